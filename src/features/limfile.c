/* SPDX-License-Identifier: BSD-3-Clause */
/* limfile.c - a handle's limits file (limfile.h): the form held and
 * swapped, and a named limiter defined from it where the backend has
 * none, as sluice_limiter_define defines one (limiter.c, registry.c), but
 * in steps: the pipeline's stage sends what a step asks, on whichever
 * driver runs the decision (docs/SEMANTICS.md, "Limits from a file"). */
#include "features/limfile.h"

#include "features/names.h"

#include <string.h>

/* ------------------------------------------------------------ the form */

bool sl_limfile_init(sl_limfile *f)
{
    memset(f, 0, sizeof(*f));
    if (pthread_mutex_init(&f->mu, NULL) != 0)
        return false;
    if (pthread_mutex_init(&f->reload_mu, NULL) != 0) {
        pthread_mutex_destroy(&f->mu);
        return false;
    }
    return true;
}

void sl_limfile_free(sl_limfile *f)
{
    sl_limfile_drop(f->cur);
    f->cur = NULL;
    pthread_mutex_destroy(&f->reload_mu);
    pthread_mutex_destroy(&f->mu);
}

sl_limfile_form *sl_limfile_take(sl_limfile *f)
{
    sl_limfile_form *h;

    pthread_mutex_lock(&f->mu);
    if ((h = f->cur) != NULL)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&f->mu);
    return h;
}

void sl_limfile_drop(sl_limfile_form *h)
{
    /* The last holder frees it: acq_rel, so that what the others did with
     * the form happens before the free. */
    if (h != NULL &&
        atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
        sl_limits_free(h->form);
        sl_free(h);
    }
}

bool sl_limfile_swap(sl_limfile *f, sl_limits *form, sl_limfile_form **old)
{
    sl_limfile_form *h = sl_malloc(sizeof(*h));

    *old = NULL;
    if (h == NULL) {
        sl_limits_free(form);
        return false;
    }
    atomic_init(&h->refs, 1);
    h->form = form;
    pthread_mutex_lock(&f->mu);
    *old = f->cur;
    f->cur = h;
    pthread_mutex_unlock(&f->mu);
    return true;
}

bool sl_limfile_rules(sl_limfile *f, const void *name, size_t name_len,
                      const void *client, size_t client_len, sluice_ruleset *rs,
                      sluice_limiter_override *ov)
{
    sl_limfile_form *h = sl_limfile_take(f);
    const sl_limits_limiter *lim;
    const sl_limits_override *o;
    bool found = false;

    memset(ov, 0, sizeof(*ov));
    if (h != NULL && (lim = sl_limits_find(h->form, name, name_len)) != NULL) {
        *rs = lim->rules;
        if (client_len > 0 &&
            (o = sl_limits_find_override(lim, client, client_len)) != NULL)
            sl_limits_override_get(o, ov);
        found = true;
    }
    sl_limfile_drop(h);
    return found;
}

/* ---------------------------------------------------------- the define */

/* The steps: each names what the round trip just answered. */
enum {
    ST_START,
    ST_LISTED, /* the name set in the list (registry.c's reg_add) */
    ST_MARKED, /* the list's marker stored, the name to set again */
    ST_PUT,    /* the rules stored unless some were */
    ST_UNLISTED,
    ST_OVERS, /* a batch of overrides written */
    ST_AFTER  /* (then: the list kept after the store) */
};

/* lim's place in f->defining (f locked), or SL_LIMFILE_DEFINING. */
static size_t defining_at(const sl_limfile *f, const sl_limits_limiter *lim)
{
    size_t i;

    for (i = 0; i < SL_LIMFILE_DEFINING && f->defining[i] != lim; i++)
        ;
    return i;
}

sl_define *sl_define_new(sl_limfile *f, const void *name, size_t name_len,
                         const char *prefix, int64_t now, sl_define_none *why)
{
    const sl_limits_limiter *lim = NULL;
    sl_limfile_form *h;
    sl_define *d = NULL;
    size_t at;

    *why = SL_DEFINE_NOT_IN_FILE;
    pthread_mutex_lock(&f->mu);
    if ((h = f->cur) != NULL)
        lim = sl_limits_find(h->form, name, name_len);
    if (lim != NULL && defining_at(f, lim) < SL_LIMFILE_DEFINING)
        *why = SL_DEFINE_UNDER_WAY;
    else if (lim != NULL && (d = sl_malloc(sizeof(*d))) == NULL)
        *why = SL_DEFINE_NOMEM;
    if (d != NULL) {
        f->events++;
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
        /* Without room, defined all the same (a second define of a name
         * stores nothing new). */
        if ((at = defining_at(f, NULL)) < SL_LIMFILE_DEFINING)
            f->defining[at] = lim;
    }
    pthread_mutex_unlock(&f->mu);
    if (d == NULL)
        return NULL;
    d->file = f;
    d->held = h;
    d->lim = lim;
    d->prefix = prefix;
    d->now = now;
    d->step = ST_START;
    d->then = ST_START;
    d->tries = 0;
    d->kl = sl_names_compose(d->key, name, name_len, NULL, 0);
    d->len = sl_limiter_encode(d->value, &lim->rules, lim->keepalive_ms);
    d->next = 0;
    d->nsend = 0;
    return d;
}

void sl_define_free(sl_define *d)
{
    size_t at;

    if (d == NULL)
        return;
    pthread_mutex_lock(&d->file->mu);
    if ((at = defining_at(d->file, d->lim)) < SL_LIMFILE_DEFINING)
        d->file->defining[at] = NULL;
    at = d->file->ended_next++ % SL_LIMFILE_DEFINING;
    d->file->ended[at].lim = d->lim;
    d->file->ended[at].at = ++d->file->events;
    pthread_mutex_unlock(&d->file->mu);
    sl_limfile_drop(d->held);
    sl_free(d);
}

uint64_t sl_limfile_events(sl_limfile *f)
{
    uint64_t n;

    pthread_mutex_lock(&f->mu);
    n = f->events;
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool sl_limfile_overlapped(sl_limfile *f, const void *name, size_t name_len,
                           uint64_t since)
{
    const sl_limits_limiter *lim = NULL;
    bool yes = false;
    size_t i, n;

    pthread_mutex_lock(&f->mu);
    if (f->cur != NULL)
        lim = sl_limits_find(f->cur->form, name, name_len);
    if (lim != NULL) {
        yes = defining_at(f, lim) < SL_LIMFILE_DEFINING; /* under way */
        if (f->events == since) /* none begun or ended since */
            goto out;
        n = f->ended_next < SL_LIMFILE_DEFINING ? f->ended_next
                                                : SL_LIMFILE_DEFINING;
        for (i = 0; i < n && !yes; i++)
            yes = f->ended[i].lim == lim && f->ended[i].at > since;
        /* The ring full of ends after since: older ones may be lost. */
        if (!yes && f->ended_next >= SL_LIMFILE_DEFINING) {
            uint64_t oldest = UINT64_MAX;

            for (i = 0; i < SL_LIMFILE_DEFINING; i++)
                if (f->ended[i].at < oldest)
                    oldest = f->ended[i].at;
            yes = oldest > since + 1;
        }
    }
out:
    pthread_mutex_unlock(&f->mu);
    return yes;
}

/* Request i of the next round trip: op on K (kl bytes), its read into
 * v[i]; the caller sets what else it stores. */
static sl_stored *request(sl_define *d, size_t i, sl_op op, const char *key,
                          size_t kl)
{
    sl_request *r = &d->send[i];

    memset(r, 0, sizeof(*r));
    r->op = op;
    r->key = key;
    r->key_len = kl;
    r->prefix = d->prefix;
    r->now_ms = d->now;
    memset(&d->v[i], 0, sizeof(d->v[i]));
    r->stored.read = &d->v[i];
    d->nsend = i + 1;
    return &r->stored;
}

static sl_define_end send(sl_define *d, int step)
{
    d->step = step;
    return SL_DEFINE_SEND;
}

/* The name set in the list (registry.c's reg_add): HSET in the hash of
 * the reserved K, which holds only while its marker exists. */
static sl_define_end list(sl_define *d)
{
    sl_stored *so =
        request(d, 0, SL_OP_OVER_SET, SL_REGISTRY_K, SL_REGISTRY_K_LEN);

    so->value = SL_LIMITER_MAGIC;
    so->value_len = SL_LIMITER_MAGIC_LEN;
    so->client = d->lim->name;
    so->client_len = d->lim->name_len;
    return send(d, ST_LISTED);
}

/* The file's overrides from the next one into requests first.. of the
 * round trip, as override_set writes each (the hash given the rules'
 * keep-alive, ka); how many. */
static size_t add_overs(sl_define *d, size_t first, int64_t ka)
{
    const sl_limits_limiter *lim = d->lim;
    sluice_limiter_override ov;
    size_t i;

    for (i = first; i < SL_DEFINE_BATCH && d->next < lim->nover;
         i++, d->next++) {
        const sl_limits_override *o = &lim->overs[d->next];
        sl_stored *so = request(d, i, SL_OP_OVER_SET, d->key, d->kl);

        sl_limits_override_get(o, &ov);
        so->value = d->over[i];
        so->value_len = sl_override_encode(d->over[i], &ov);
        so->ttl_ms = ka;
        so->client = o->client;
        so->client_len = o->client_len;
    }
    return i - first;
}

/* The rules stored unless some are, and the first overrides after them
 * in the same round trip. */
static sl_define_end put(sl_define *d)
{
    sl_stored *so = request(d, 0, SL_OP_RULES_PUT, d->key, d->kl);

    so->value = d->value;
    so->value_len = d->len;
    so->if_absent = true;
    so->ttl_ms = d->lim->keepalive_ms;
    (void)add_overs(d, 1, d->lim->keepalive_ms);
    return send(d, ST_PUT);
}

/* The next batch of the file's overrides; none left: stored. */
static sl_define_end overs(sl_define *d)
{
    return add_overs(d, 0, d->ka) > 0 ? send(d, ST_OVERS) : SL_DEFINE_STORED;
}

/* The store is done and the list kept: the file's rules stored, their
 * overrides go after; another's, read. */
static sl_define_end stored(sl_define *d)
{
    return d->ours ? overs(d) : SL_DEFINE_FOUND;
}

/* The list after the store, as registry.c's sl_registry_after with
 * nothing replaced: rules without a keep-alive listed (a define with
 * one that found some), rules with one unlisted (a define without one
 * that found some). */
static sl_define_end after(sl_define *d)
{
    if (d->ka == 0 && d->lim->keepalive_ms > 0) {
        d->then = ST_AFTER;
        d->tries = 0;
        return list(d);
    }
    if (d->ka > 0 && d->lim->keepalive_ms == 0) {
        sl_stored *so =
            request(d, 0, SL_OP_OVER_DEL, SL_REGISTRY_K, SL_REGISTRY_K_LEN);

        so->client = d->lim->name;
        so->client_len = d->lim->name_len;
        return send(d, ST_UNLISTED);
    }
    return stored(d);
}

static sl_define_end failed(sluice_status *st, sluice_status why)
{
    *st = why;
    return SL_DEFINE_FAILED;
}

sl_define_end sl_define_step(sl_define *d, sluice_status sent,
                             sluice_status *st, char *err)
{
    size_t i;

    if (d->step != ST_START) {
        if (sent != SLUICE_OK)
            return failed(st, sent);
        for (i = 0; i < d->nsend; i++)
            if (d->res[i].status != SLUICE_OK)
                return failed(st, d->res[i].status);
    }
    switch (d->step) {
    case ST_START:
        if (d->lim->keepalive_ms > 0)
            return put(d);
        d->then = ST_PUT;
        return list(d);
    case ST_LISTED:
        if (d->v[0].found) /* listed: on with the store, or after it */
            return d->then == ST_PUT ? put(d) : stored(d);
        if (++d->tries > 1) {
            sl_errf(err, SL_ERR_LEN,
                    "limiter: the list of names could not be kept: its "
                    "marker disappeared as soon as stored (an eviction "
                    "policy?)");
            return failed(st, SLUICE_ESERVER);
        }
        {
            /* No marker (a Redis restarted empty): stored, then the name
             * set again. */
            sl_stored *so = request(d, 0, SL_OP_RULES_PUT, SL_REGISTRY_K,
                                    SL_REGISTRY_K_LEN);

            so->value = SL_REGISTRY_MARKER;
            so->value_len = sizeof(SL_REGISTRY_MARKER) - 1;
            so->if_absent = true;
            return send(d, ST_MARKED);
        }
    case ST_MARKED:
        return list(d);
    case ST_PUT:
        if (!d->v[0].found) /* deleted or expired at once */
            return failed(st,
                          sl_names_none(d->lim->name, d->lim->name_len, err));
        if ((*st = sl_limiter_decode(&d->v[0], d->lim->name, d->lim->name_len,
                                     &d->stored, &d->ka, err)) != SLUICE_OK)
            return SL_DEFINE_FAILED;
        d->ours =
            d->v[0].len == d->len && memcmp(d->v[0].buf, d->value, d->len) == 0;
        return after(d);
    case ST_UNLISTED:
        return stored(d);
    case ST_OVERS:
        return overs(d);
    }
    return failed(st, SLUICE_EPROTO);
}
