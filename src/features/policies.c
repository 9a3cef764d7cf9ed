/* SPDX-License-Identifier: BSD-3-Clause */
/* policies.c - decisions' policies (policies.h): the caller's struct
 * checked by the rules of sluice_options (docs/ABI.md), laid over the
 * handle's group by group, and the table of named limiters' policies. */
#include "features/policies.h"

#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first layout's size: what struct_size 0 means, and the least a
 * caller's struct may say it has. */
#define POLICY_V1                         \
    (offsetof(sluice_policy, unit_name) + \
     sizeof(((sluice_policy *)0)->unit_name))
#define ALL_GROUPS                                                           \
    (SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE | SLUICE_POLICY_RESERVE | \
     SLUICE_POLICY_SHADOW | SLUICE_POLICY_HTTP)
/* The ranges of the options table's rows (options.h). */
#define MAX_INSTANCES SL_OPT_INSTANCES_MAX
#define MAX_HOLD_MS   SL_OPT_HOLD_MAX_MS
#define MAX_SHARE     SL_OPT_SHARE_MAX
#define DEFAULT_SHARE SL_OPT_SHARE_DEFAULT

void sluice_policy_init(sluice_policy *p)
{
    if (p == NULL)
        return;
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
}

void sl_policies_of_config(const sl_config *cfg, sl_policy *out)
{
    memset(out, 0, sizeof(*out));
    out->fail = cfg->fail;
    /* The handle's defaults are set (the options table, options.c). */
    out->fallback_instances = cfg->fallback_instances;
    out->deny_cache = cfg->deny_cache > 0;
    out->shadow = cfg->shadow;
    out->reserve_ms = cfg->reserve_ms;
    out->reserve_share = cfg->reserve_share;
    out->unit = SLUICE_UNIT_REQUESTS;
}

/* ------------------------------------------------------------- checks */

/* The length of the NUL-terminated string in s[cap], or cap when it has
 * no NUL. */
static size_t bounded_len(const char *s, size_t cap)
{
    const char *nul = memchr(s, '\0', cap);

    return nul != NULL ? (size_t)(nul - s) : cap;
}

/* An HTTP policy's name: printable ASCII (the helpers escape '"' and
 * '\'). */
static bool http_name_ok(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return n < sizeof(((sluice_policy *)0)->http_name);
}

/* A unit's name: 1..64 of A-Z a-z 0-9 . _ - (sluice_http_options). */
static bool unit_name_ok(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return n < sizeof(((sluice_policy *)0)->unit_name);
}

/* The caller's struct into *p, by struct_size. */
static sluice_status copy_in(const sluice_policy *in, sluice_policy *p,
                             char *err)
{
    size_t size = in->struct_size == 0 ? POLICY_V1 : in->struct_size, i;

    if (size < POLICY_V1) {
        sl_errf(err, SL_ERR_LEN,
                "policy.struct_size=%zu: below the first layout (%zu); call "
                "sluice_policy_init() before setting fields",
                in->struct_size, (size_t)POLICY_V1);
        return SLUICE_EINVAL;
    }
    for (i = sizeof(*p); i < size; i++) {
        if (((const unsigned char *)in)[i] != 0) {
            sl_errf(err, SL_ERR_LEN,
                    "policy: byte %zu is set, a field that libsluice %s "
                    "does not know (struct_size %zu, its own %zu); run with "
                    "the libsluice the program was built against, or a "
                    "newer one",
                    i, SLUICE_VERSION, size, sizeof(*p));
            return SLUICE_EINVAL;
        }
    }
    memset(p, 0, sizeof(*p));
    memcpy(p, in, size < sizeof(*p) ? size : sizeof(*p));
    return SLUICE_OK;
}

/* The fields of the groups p sets, each message quoting the value as the
 * options' do ("policy.reserve_ms=70000: ..."). */
static sluice_status check_groups(const sluice_policy *p, char *err)
{
    size_t hn = bounded_len(p->http_name, sizeof(p->http_name));
    size_t un = bounded_len(p->unit_name, sizeof(p->unit_name));
    char q[300];

    if ((p->set & ~ALL_GROUPS) != 0) {
        sl_errf(err, SL_ERR_LEN,
                "policy.set=0x%x: bits 0x%x are no SLUICE_POLICY_* group",
                p->set, p->set & ~ALL_GROUPS);
    } else if ((p->set & SLUICE_POLICY_FAIL) &&
               (unsigned)p->fail > SLUICE_FAIL_FALLBACK) {
        sl_errf(err, SL_ERR_LEN,
                "policy.fail=%d: expected SLUICE_FAIL_ERROR, _OPEN, _CLOSED "
                "or _FALLBACK",
                (int)p->fail);
    } else if ((p->set & SLUICE_POLICY_FAIL) &&
               p->fallback_instances > MAX_INSTANCES) {
        sl_errf(err, SL_ERR_LEN,
                "policy.fallback_instances=%lu: expected 1..%d (0: the "
                "handle's)",
                (unsigned long)p->fallback_instances, MAX_INSTANCES);
    } else if ((p->set & SLUICE_POLICY_RESERVE) &&
               (p->reserve_ms < 0 || p->reserve_ms > MAX_HOLD_MS)) {
        sl_errf(err, SL_ERR_LEN,
                "policy.reserve_ms=%lld: expected 0..%d ms (0: off)",
                (long long)p->reserve_ms, MAX_HOLD_MS);
    } else if ((p->set & SLUICE_POLICY_RESERVE) &&
               p->reserve_share > MAX_SHARE) {
        sl_errf(err, SL_ERR_LEN,
                "policy.reserve_share=%lu: expected 1..%d percent (0: the "
                "default, %d)",
                (unsigned long)p->reserve_share, MAX_SHARE, DEFAULT_SHARE);
    } else if ((p->set & SLUICE_POLICY_HTTP) &&
               (unsigned)p->unit > SLUICE_UNIT_CONCURRENT_REQUESTS) {
        sl_errf(err, SL_ERR_LEN,
                "policy.unit=%d: expected SLUICE_UNIT_REQUESTS, "
                "_CONTENT_BYTES or _CONCURRENT_REQUESTS",
                (int)p->unit);
    } else if ((p->set & SLUICE_POLICY_HTTP) &&
               !http_name_ok(p->http_name, hn)) {
        sl_quote(q, sizeof(q), p->http_name, hn);
        sl_errf(err, SL_ERR_LEN,
                "policy.http_name \"%s\"%s: expected 1..63 bytes of "
                "printable ASCII, NUL-terminated (\"\": the default, "
                "\"sluice\")",
                q, hn == sizeof(p->http_name) ? " (no NUL)" : "");
    } else if ((p->set & SLUICE_POLICY_HTTP) &&
               !unit_name_ok(p->unit_name, un)) {
        sl_quote(q, sizeof(q), p->unit_name, un);
        sl_errf(err, SL_ERR_LEN,
                "policy.unit_name \"%s\"%s: expected 1..64 of A-Z a-z 0-9 "
                "'.' '_' '-', NUL-terminated (\"\": none)",
                q, un == sizeof(p->unit_name) ? " (no NUL)" : "");
    } else {
        return SLUICE_OK;
    }
    return SLUICE_EINVAL;
}

sluice_status sl_policies_take(const sl_policy *base, const sluice_policy *in,
                               sl_policy *out, char *err)
{
    sluice_policy p;
    sluice_status st;

    if ((st = copy_in(in, &p, err)) != SLUICE_OK ||
        (st = check_groups(&p, err)) != SLUICE_OK)
        return st;
    *out = *base;
    out->set = p.set;
    if (p.set & SLUICE_POLICY_FAIL) {
        out->fail = p.fail;
        if (p.fallback_instances > 0)
            out->fallback_instances = p.fallback_instances;
    }
    if (p.set & SLUICE_POLICY_DENY_CACHE)
        out->deny_cache = p.deny_cache;
    if (p.set & SLUICE_POLICY_RESERVE) {
        out->reserve_ms = p.reserve_ms;
        out->reserve_share =
            p.reserve_share > 0 ? p.reserve_share : DEFAULT_SHARE;
    }
    if (p.set & SLUICE_POLICY_SHADOW)
        out->shadow = p.shadow;
    if (p.set & SLUICE_POLICY_HTTP) {
        out->unit = p.unit;
        memcpy(out->http_name, p.http_name, sizeof(out->http_name));
        memcpy(out->unit_name, p.unit_name, sizeof(out->unit_name));
    }
    return SLUICE_OK;
}

sluice_status sl_policies_give(const sl_policy *pol, sluice_policy *out,
                               char *err)
{
    size_t size = out->struct_size == 0 ? POLICY_V1 : out->struct_size;
    sluice_policy p;

    if (size < POLICY_V1) {
        sl_errf(err, SL_ERR_LEN,
                "out->struct_size=%zu: below the first layout (%zu); call "
                "sluice_policy_init() first",
                out->struct_size, (size_t)POLICY_V1);
        return SLUICE_EINVAL;
    }
    sluice_policy_init(&p);
    p.set = pol->set;
    p.fail = pol->fail;
    p.fallback_instances = pol->fallback_instances;
    p.deny_cache = pol->deny_cache;
    p.reserve_ms = pol->reserve_ms;
    p.reserve_share = pol->reserve_share;
    p.shadow = pol->shadow;
    /* What the HTTP helpers write for no name. */
    if (pol->http_name[0] != '\0')
        memcpy(p.http_name, pol->http_name, sizeof(p.http_name));
    else
        strcpy(p.http_name, "sluice");
    p.unit = pol->unit;
    memcpy(p.unit_name, pol->unit_name, sizeof(p.unit_name));
    p.struct_size = out->struct_size;
    memcpy(out, &p, size < sizeof(p) ? size : sizeof(p));
    return SLUICE_OK;
}

/* -------------------------------------------------------------- table */

bool sl_policies_init(sl_policies *t)
{
    memset(t, 0, sizeof(*t));
    atomic_init(&t->n, 0);
    return pthread_mutex_init(&t->mu, NULL) == 0;
}

void sl_policies_free(sl_policies *t)
{
    size_t i, n = atomic_load(&t->n);

    for (i = 0; i < n; i++)
        sl_free(t->e[i].name);
    sl_free(t->e);
    t->e = NULL;
    pthread_mutex_destroy(&t->mu);
}

/* Names by length, then bytes. */
static int compare(const sl_policy_entry *e, const void *name, size_t len)
{
    if (e->name_len != len)
        return e->name_len < len ? -1 : 1;
    return memcmp(e->name, name, len);
}

/* The place of name in t (locked): *found whether it is there. */
static size_t place(const sl_policies *t, size_t n, const void *name,
                    size_t len, bool *found)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare(&t->e[mid], name, len);

        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Room for one more entry in t (locked); false on ENOMEM. */
static bool room(sl_policies *t, size_t n)
{
    size_t cap = t->cap > 0 ? t->cap * 2 : 8;
    sl_policy_entry *e;

    if (n < t->cap)
        return true;
    if ((e = sl_realloc(t->e, cap * sizeof(*e))) == NULL)
        return false;
    t->e = e;
    t->cap = cap;
    return true;
}

sluice_status sl_policies_put(sl_policies *t, const void *name, size_t name_len,
                              const sl_policy *pol)
{
    sluice_status st = SLUICE_OK;
    size_t n, at;
    bool found;
    char *copy;

    pthread_mutex_lock(&t->mu);
    n = atomic_load_explicit(&t->n, memory_order_relaxed);
    at = place(t, n, name, name_len, &found);
    if (found && pol != NULL) {
        t->e[at].pol = *pol;
    } else if (found) {
        sl_free(t->e[at].name);
        memmove(&t->e[at], &t->e[at + 1], (n - at - 1) * sizeof(t->e[0]));
        atomic_store_explicit(&t->n, n - 1, memory_order_release);
    } else if (pol != NULL) {
        if (!room(t, n) || (copy = sl_memdup(name, name_len)) == NULL) {
            st = SLUICE_ENOMEM;
        } else {
            memmove(&t->e[at + 1], &t->e[at], (n - at) * sizeof(t->e[0]));
            t->e[at] = (sl_policy_entry){copy, name_len, *pol};
            atomic_store_explicit(&t->n, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* Whether two policies are the same, field by field. */
static bool same(const sl_policy *a, const sl_policy *b)
{
    return a->fail == b->fail &&
           a->fallback_instances == b->fallback_instances &&
           a->deny_cache == b->deny_cache && a->shadow == b->shadow &&
           a->reserve_ms == b->reserve_ms &&
           a->reserve_share == b->reserve_share && a->set == b->set &&
           a->unit == b->unit &&
           strncmp(a->http_name, b->http_name, sizeof(a->http_name)) == 0 &&
           strncmp(a->unit_name, b->unit_name, sizeof(a->unit_name)) == 0;
}

static int by_name(const void *a, const void *b)
{
    const sl_policy_entry *y = b;

    return compare(a, y->name, y->name_len);
}

/* Whether e is in drop (sorted by name) with the same policy. */
static bool dropped(const sl_policy_entry *e, const sl_policy_entry *drop,
                    size_t n)
{
    const sl_policy_entry *d =
        n > 0 ? bsearch(e, drop, n, sizeof(*drop), by_name) : NULL;

    return d != NULL && same(&d->pol, &e->pol);
}

sluice_status sl_policies_replace(sl_policies *t, const sl_policy_entry *drop,
                                  size_t n_drop, sl_policy_entry *put,
                                  size_t n_put)
{
    sl_policy_entry *sorted = NULL, *e;
    size_t n, i = 0, j = 0, k = 0;

    /* drop sorted in a copy of its own; put in place (the caller's). */
    if (n_drop > 0) {
        if ((sorted = sl_calloc(n_drop, sizeof(*sorted))) == NULL)
            goto nomem;
        memcpy(sorted, drop, n_drop * sizeof(*sorted));
        qsort(sorted, n_drop, sizeof(*sorted), by_name);
    }
    if (n_put > 0)
        qsort(put, n_put, sizeof(*put), by_name);
    pthread_mutex_lock(&t->mu);
    n = atomic_load_explicit(&t->n, memory_order_relaxed);
    if ((e = sl_calloc(n + n_put + 1, sizeof(*e))) == NULL) {
        pthread_mutex_unlock(&t->mu);
        goto nomem;
    }
    /* Both sorted: one merge, put winning a name both have. */
    while (i < n || j < n_put) {
        int c = i == n       ? 1
                : j == n_put ? -1
                             : compare(&t->e[i], put[j].name, put[j].name_len);

        if (c < 0 && dropped(&t->e[i], sorted, n_drop)) {
            sl_free(t->e[i++].name);
        } else if (c < 0) {
            e[k++] = t->e[i++];
        } else {
            if (c == 0)
                sl_free(t->e[i++].name);
            e[k++] = put[j++];
        }
    }
    sl_free(t->e);
    t->e = e;
    t->cap = n + n_put + 1;
    atomic_store_explicit(&t->n, k, memory_order_release);
    pthread_mutex_unlock(&t->mu);
    sl_free(sorted);
    return SLUICE_OK;
nomem:
    sl_free(sorted);
    for (j = 0; j < n_put; j++)
        sl_free(put[j].name);
    return SLUICE_ENOMEM;
}

bool sl_policies_lookup(sl_policies *t, const void *name, size_t name_len,
                        sl_policy *out)
{
    size_t at;
    bool found;

    pthread_mutex_lock(&t->mu);
    at = place(t, atomic_load_explicit(&t->n, memory_order_relaxed), name,
               name_len, &found);
    if (found)
        *out = t->e[at].pol;
    pthread_mutex_unlock(&t->mu);
    return found;
}
