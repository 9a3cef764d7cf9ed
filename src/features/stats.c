/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c - a handle's counters, and those of each limiter it decides
 * by; prometheus.c writes them. */
#include "features/stats.h"

#include <string.h>
#include <time.h>

#define ADD(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)
#define GET(c)    atomic_load_explicit(&(c), memory_order_relaxed)

static void counts_init(sl_counts *c)
{
    size_t i;

    atomic_init(&c->allowed, 0);
    atomic_init(&c->denied, 0);
    atomic_init(&c->near_limit, 0);
    atomic_init(&c->peeks, 0);
    atomic_init(&c->resets, 0);
    atomic_init(&c->refunds, 0);
    atomic_init(&c->cache_hits, 0);
    atomic_init(&c->policy_answers, 0);
    atomic_init(&c->shadow_admitted, 0);
    atomic_init(&c->allowlisted, 0);
    atomic_init(&c->denylisted, 0);
    atomic_init(&c->reserved, 0);
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        atomic_init(&c->failures[i], 0);
}

void sl_stats_init(sl_stats *s, bool on)
{
    size_t i;

    s->on = on;
    counts_init(&s->all);
    counts_init(&s->others);
    atomic_init(&s->backend_requests, 0);
    atomic_init(&s->round_trips, 0);
    atomic_init(&s->calls, 0);
    atomic_init(&s->latency_sum_us, 0);
    for (i = 0; i < SLUICE_STATS_BUCKETS; i++)
        atomic_init(&s->latency_us[i], 0);
    for (i = 0; i < SL_STATS_SLOTS; i++)
        atomic_init(&s->limiters[i], NULL);
    atomic_init(&s->nlimiters, 0);
}

void sl_stats_free(sl_stats *s)
{
    size_t i;

    for (i = 0; i < SL_STATS_SLOTS; i++) {
        sl_free(atomic_load_explicit(&s->limiters[i], memory_order_acquire));
        atomic_store_explicit(&s->limiters[i], NULL, memory_order_relaxed);
    }
}

/* ------------------------------------------------------ by limiter */

/* FNV-1a: names are short, and the caller's configuration. */
static size_t slot_of(const void *name, size_t len)
{
    const unsigned char *p = name;
    uint32_t h = 2166136261u;

    while (len-- > 0)
        h = (h ^ *p++) * 16777619u;
    return h & (SL_STATS_SLOTS - 1);
}

/* A new entry for name, counted against the cap; NULL past it (or out of
 * memory). */
static sl_stats_limiter *make(sl_stats *s, const void *name, size_t len)
{
    sl_stats_limiter *e;

    if (atomic_fetch_add_explicit(&s->nlimiters, 1, memory_order_relaxed) >=
            SLUICE_STATS_LIMITERS ||
        (e = sl_malloc(sizeof(*e) + len)) == NULL) {
        atomic_fetch_sub_explicit(&s->nlimiters, 1, memory_order_relaxed);
        return NULL;
    }
    counts_init(&e->c);
    e->name_len = len;
    memcpy(e->name, name, len);
    return e;
}

static void unmake(sl_stats *s, sl_stats_limiter *e)
{
    if (e == NULL)
        return;
    sl_free(e);
    atomic_fetch_sub_explicit(&s->nlimiters, 1, memory_order_relaxed);
}

/* The slot that holds name (its entry in *found), or else the empty slot
 * where it would go (*found NULL); SL_STATS_SLOTS when neither, which a
 * table at most half full never is. */
static size_t probe(const sl_stats *s, const void *name, size_t len,
                    sl_stats_limiter **found)
{
    sl_stats_limiter *e;
    size_t i = slot_of(name, len), k;

    *found = NULL;
    for (k = 0; k < SL_STATS_SLOTS; k++, i = (i + 1) & (SL_STATS_SLOTS - 1)) {
        e = atomic_load_explicit(&s->limiters[i], memory_order_acquire);
        if (e == NULL)
            return i;
        if (e->name_len == len && memcmp(e->name, name, len) == 0) {
            *found = e;
            return i;
        }
    }
    return SL_STATS_SLOTS;
}

/* The entry of name, made if there is room; NULL when there is none.
 * Lock-free: an entry is published whole by a compare-and-swap on an
 * empty slot, and a slot never changes again until the handle closes. */
static sl_stats_limiter *find(sl_stats *s, const void *name, size_t len)
{
    sl_stats_limiter *fresh = NULL, *e, *none;
    size_t i;

    while ((i = probe(s, name, len, &e)) < SL_STATS_SLOTS && e == NULL) {
        if (fresh == NULL && (fresh = make(s, name, len)) == NULL)
            return NULL;
        none = NULL;
        if (atomic_compare_exchange_strong_explicit(&s->limiters[i], &none,
                                                    fresh, memory_order_acq_rel,
                                                    memory_order_acquire))
            return fresh;
        /* Another thread set that slot first: probe again. */
    }
    unmake(s, fresh);
    return e;
}

/* ------------------------------------------------------------ counting */

static void count(sl_counts *c, sl_op op, sluice_status st, bool policy,
                  const sluice_result *res)
{
    if (st != SLUICE_OK) {
        ADD(c->failures[(unsigned)st % SLUICE_STATS_STATUSES], 1);
        if (policy)
            ADD(c->policy_answers, 1);
        return;
    }
    if (res != NULL && res->status == SLUICE_CACHED)
        ADD(c->cache_hits, 1);
    if (res != NULL && res->status == SLUICE_ALLOWLISTED)
        ADD(c->allowlisted, 1);
    if (res != NULL && res->status == SLUICE_DENYLISTED)
        ADD(c->denylisted, 1);
    if (res != NULL && res->status == SLUICE_SHADOWED) {
        ADD(c->shadow_admitted, 1);
        ADD(c->denied, 1); /* the decision */
        return;
    }
    switch (op) {
    case SL_OP_ACQUIRE:
    case SL_OP_AT_MOST:
    case SL_OP_LEASE_ACQUIRE:
        if (res == NULL)
            break;
        if (!res->allowed) {
            ADD(c->denied, 1);
            break;
        }
        ADD(c->allowed, 1);
        if (res->status == SLUICE_RESERVED)
            ADD(c->reserved, 1);
        /* Envoy's near limit: at most 20 % of the limit left (an
         * allow-listed client has no limit). */
        if (res->status != SLUICE_ALLOWLISTED &&
            res->remaining <= res->limit / 5)
            ADD(c->near_limit, 1);
        break;
    case SL_OP_PEEK:
        ADD(c->peeks, 1);
        break;
    case SL_OP_RESET:
        ADD(c->resets, 1);
        break;
    case SL_OP_REFUND:
        ADD(c->refunds, 1);
        break;
    case SL_OP_FORCE:
        break; /* a settle's charge: neither an admission nor a refund */
    case SL_OP_RULES_GET:
    case SL_OP_RULES_PUT:
    case SL_OP_RULES_DEL:
    case SL_OP_OVER_SET:
    case SL_OP_OVER_DEL:
    case SL_OP_OVER_LIST:
    case SL_OP_LEASE_RELEASE:
        break; /* never counted: not decisions */
    }
}

void sl_stats_answer(sl_stats *s, const void *name, size_t name_len, sl_op op,
                     sluice_status st, bool policy, const sluice_result *res)
{
    sl_stats_limiter *e;

    if (!s->on)
        return;
    count(&s->all, op, st, policy, res);
    if (name == NULL)
        return;
    e = find(s, name, name_len);
    count(e != NULL ? &e->c : &s->others, op, st, policy, res);
}

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sl_stats_start(const sl_stats *s)
{
    return s->on ? mono_us() : 0;
}

void sl_stats_call(sl_stats *s, int64_t start_us)
{
    int64_t d;
    unsigned k = 0;

    if (!s->on)
        return;
    d = mono_us() - start_us;
    if (d < 0)
        d = 0;
    while (k + 1 < SLUICE_STATS_BUCKETS && d >= (INT64_C(2) << k))
        k++;
    ADD(s->latency_us[k], 1);
    ADD(s->calls, 1);
    ADD(s->latency_sum_us, (uint64_t)d);
}

void sl_stats_backend(sl_stats *s, uint64_t requests, uint64_t round_trips)
{
    if (!s->on)
        return;
    ADD(s->backend_requests, requests);
    ADD(s->round_trips, round_trips);
}

void sl_stats_read(const sl_stats *s, sluice_stats *out)
{
    const sl_counts *c = &s->all;
    size_t i;

    memset(out, 0, sizeof(*out));
    out->allowed = GET(c->allowed);
    out->denied = GET(c->denied);
    out->near_limit = GET(c->near_limit);
    out->peeks = GET(c->peeks);
    out->resets = GET(c->resets);
    out->deny_cache_hits = GET(c->cache_hits);
    out->policy_answers = GET(c->policy_answers);
    out->shadow_admitted = GET(c->shadow_admitted);
    out->refunds = GET(c->refunds);
    out->allowlisted = GET(c->allowlisted);
    out->denylisted = GET(c->denylisted);
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        out->failures[i] = GET(c->failures[i]);
    out->backend_requests = GET(s->backend_requests);
    out->round_trips = GET(s->round_trips);
    out->calls = GET(s->calls);
    out->latency_sum_us = GET(s->latency_sum_us);
    for (i = 0; i < SLUICE_STATS_BUCKETS; i++)
        out->latency_us[i] = GET(s->latency_us[i]);
}

static void counts_read(const sl_counts *c, sluice_limiter_stats *out)
{
    size_t i;

    memset(out, 0, sizeof(*out));
    out->allowed = GET(c->allowed);
    out->denied = GET(c->denied);
    out->near_limit = GET(c->near_limit);
    out->peeks = GET(c->peeks);
    out->resets = GET(c->resets);
    out->deny_cache_hits = GET(c->cache_hits);
    out->reserve_admitted = GET(c->reserved);
    out->shadow_admitted = GET(c->shadow_admitted);
    out->allowlisted = GET(c->allowlisted);
    out->denylisted = GET(c->denylisted);
    out->policy_answers = GET(c->policy_answers);
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        out->failures[i] = GET(c->failures[i]);
}

void sl_stats_limiter_read(const sl_stats *s, const void *name, size_t name_len,
                           sluice_limiter_stats *out)
{
    sl_stats_limiter *e = NULL;

    if (name == NULL)
        counts_read(&s->others, out);
    else if (probe(s, name, name_len, &e) < SL_STATS_SLOTS && e != NULL)
        counts_read(&e->c, out);
    else
        memset(out, 0, sizeof(*out));
}

/* Whether an overflow counted anything. */
static bool used(const sluice_limiter_stats *ls)
{
    size_t s;

    if (ls->allowed | ls->denied | ls->peeks | ls->resets)
        return true;
    for (s = 0; s < SLUICE_STATS_STATUSES; s++)
        if (ls->failures[s] != 0)
            return true;
    return false;
}

void sl_stats_each_limiter(const sl_stats *s, sl_stats_limiter_fn fn, void *arg)
{
    const sl_stats_limiter *e;
    sluice_limiter_stats ls;
    size_t i;

    for (i = 0; i < SL_STATS_SLOTS; i++) {
        e = atomic_load_explicit(&s->limiters[i], memory_order_acquire);
        if (e == NULL)
            continue;
        counts_read(&e->c, &ls);
        fn(arg, e->name, e->name_len, &ls);
    }
    counts_read(&s->others, &ls);
    if (used(&ls))
        fn(arg, NULL, 0, &ls);
}
