/* SPDX-License-Identifier: BSD-3-Clause */
/* denycache.c - the local deny cache (denycache.h). */
#include "features/denycache.h"

#include "algo.h"

#include <string.h>

sluice_status sl_deny_init(sl_deny_cache *c, uint32_t entries)
{
    memset(c, 0, sizeof(*c));
    atomic_init(&c->ready, false);
    return entries == 0 ? SLUICE_OK : sl_deny_enable(c, entries);
}

sluice_status sl_deny_enable(sl_deny_cache *c, uint32_t entries)
{
    if (sl_deny_on(c))
        return SLUICE_OK;
    c->nsets = (entries + SL_DENY_WAYS - 1) / SL_DENY_WAYS;
    c->slots = sl_calloc(c->nsets * SL_DENY_WAYS, sizeof(*c->slots));
    if (c->slots == NULL)
        return SLUICE_ENOMEM;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        sl_free(c->slots);
        c->slots = NULL;
        return SLUICE_ENOMEM;
    }
    /* Published last: a thread that sees it sees all of the above. */
    atomic_store_explicit(&c->ready, true, memory_order_release);
    return SLUICE_OK;
}

static void clear(sl_deny_entry *e)
{
    sl_free(e->key);
    e->key = NULL;
}

void sl_deny_free(sl_deny_cache *c)
{
    size_t i;

    if (!sl_deny_on(c))
        return;
    for (i = 0; i < c->nsets * SL_DENY_WAYS; i++)
        clear(&c->slots[i]);
    sl_free(c->slots);
    c->slots = NULL;
    atomic_store(&c->ready, false);
    pthread_mutex_destroy(&c->mu);
}

/* The set of the key's entries. */
static sl_deny_entry *set_of(const sl_deny_cache *c, const void *key,
                             size_t len)
{
    return &c->slots[(sl_hash64(key, len) % c->nsets) * SL_DENY_WAYS];
}

/* A named limiter's key (a prefix of its own) never meets a plain key of
 * the same bytes. */
static bool same_key(const sl_deny_entry *e, const void *key, size_t len,
                     bool named)
{
    return e->key != NULL && e->key_len == len && e->named == named &&
           memcmp(e->key, key, len) == 0;
}

static bool matches(const sl_deny_entry *e, const sl_request *rq)
{
    return same_key(e, rq->key, rq->key_len, rq->prefix != NULL) &&
           e->cost == rq->decide.cost &&
           sl_ruleset_same(&e->rules, rq->decide.rules);
}

bool sl_deny_lookup(sl_deny_cache *c, const sl_request *rq, int64_t now,
                    sluice_result *out)
{
    sl_deny_entry *set;
    bool hit = false;
    size_t w;

    if (!sl_deny_on(c))
        return false;
    pthread_mutex_lock(&c->mu);
    set = set_of(c, rq->key, rq->key_len);
    for (w = 0; w < SL_DENY_WAYS; w++) {
        sl_deny_entry *e = &set[w];

        if (!matches(e, rq))
            continue;
        /* A clock that went back (another host's, a replay) is not
         * trusted with a denial either. */
        if (now >= e->until || now < e->at) {
            clear(e);
            break;
        }
        *out = e->res;
        out->status = SLUICE_CACHED;
        out->allowed = false;
        out->retry_after_ms = e->until - now;
        out->reset_after_ms = e->res.reset_after_ms > now - e->at
                                  ? e->res.reset_after_ms - (now - e->at)
                                  : 0;
        sl_result_set_rule_reset(
            out,
            sl_max64(0, sluice_result_rule_reset_ms(&e->res) - (now - e->at)));
        sl_request_violated(rq, e->violated);
        hit = true;
        break;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* Whether a rule of rs has a block with extend=1 (SEMANTICS.md,
 * "Penalties"). */
static bool extends(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (rs->rules[i].block_extend)
            return true;
    return false;
}

void sl_deny_store(sl_deny_cache *c, const sl_request *rq, int64_t now,
                   const sluice_result *res)
{
    sl_deny_entry *set, *e = NULL;
    size_t w;
    char *key;

    /* A block with extend=1 must see every request while it lasts. */
    if (!sl_deny_on(c) || res->status != SLUICE_OK || res->allowed ||
        res->retry_after_ms <= 0 || extends(rq->decide.rules))
        return;
    pthread_mutex_lock(&c->mu);
    set = set_of(c, rq->key, rq->key_len);
    /* The same request's entry, else an empty or spent one, else the one
     * that ends first. */
    for (w = 0; w < SL_DENY_WAYS && e == NULL; w++)
        if (matches(&set[w], rq))
            e = &set[w];
    for (w = 0; w < SL_DENY_WAYS && e == NULL; w++)
        if (set[w].key == NULL || set[w].until <= now)
            e = &set[w];
    for (w = 0; e == NULL && w < SL_DENY_WAYS; w++)
        if (w == 0 || set[w].until < e->until)
            e = &set[w];
    if (e == NULL) { /* cannot happen: the loop above picks one */
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (!same_key(e, rq->key, rq->key_len, rq->prefix != NULL)) {
        if ((key = sl_malloc(rq->key_len)) == NULL) {
            pthread_mutex_unlock(&c->mu); /* a cache may forget */
            return;
        }
        clear(e);
        memcpy(key, rq->key, rq->key_len);
        e->key = key;
        e->key_len = rq->key_len;
        e->named = rq->prefix != NULL;
    }
    e->cost = rq->decide.cost;
    e->rules = *rq->decide.rules;
    e->res = *res;
    e->violated = rq->decide.violated != NULL ? *rq->decide.violated : 0;
    e->at = now;
    e->until = now + res->retry_after_ms;
    pthread_mutex_unlock(&c->mu);
}

void sl_deny_forget(sl_deny_cache *c, const void *key, size_t key_len,
                    bool named)
{
    sl_deny_entry *set;
    size_t w;

    if (!sl_deny_on(c))
        return;
    pthread_mutex_lock(&c->mu);
    set = set_of(c, key, key_len);
    for (w = 0; w < SL_DENY_WAYS; w++)
        if (same_key(&set[w], key, key_len, named))
            clear(&set[w]);
    pthread_mutex_unlock(&c->mu);
}

size_t sl_deny_count(sl_deny_cache *c)
{
    size_t i, n = 0;

    if (!sl_deny_on(c))
        return 0;
    pthread_mutex_lock(&c->mu);
    for (i = 0; i < c->nsets * SL_DENY_WAYS; i++)
        n += c->slots[i].key != NULL;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* The cache's clock: the request's own time, or, when the server decides
 * on its clock, the handle's. */
static int64_t deny_now(const sl_config *cfg, const sl_request *r)
{
    return r->now_ms >= 0 ? r->now_ms : cfg->clock(cfg->clock_ctx);
}

bool sl_deny_ask(sl_deny_cache *c, const sl_config *cfg, const sl_request *r,
                 sluice_result *out)
{
    if (r->op == SL_OP_RESET || r->op == SL_OP_REFUND || r->op == SL_OP_FORCE) {
        /* A forced charge lengthens every wait: a denial kept would
         * answer too short a retry_after. */
        sl_deny_forget(c, r->key, r->key_len, r->prefix != NULL);
        return false;
    }
    /* The cache holds denials of acquires and peeks, of one cost, for
     * the policies that have it. */
    if ((r->op != SL_OP_ACQUIRE && r->op != SL_OP_PEEK) ||
        !r->policy->deny_cache)
        return false;
    return sl_deny_lookup(c, r, deny_now(cfg, r), out);
}

void sl_deny_keep(sl_deny_cache *c, const sl_config *cfg, const sl_request *rs,
                  const sluice_result *res, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if ((rs[i].op == SL_OP_ACQUIRE || rs[i].op == SL_OP_PEEK) &&
            rs[i].policy->deny_cache)
            sl_deny_store(c, &rs[i], deny_now(cfg, &rs[i]), &res[i]);
}
