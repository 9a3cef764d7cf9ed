/* SPDX-License-Identifier: BSD-3-Clause */
/* denycache.h - the handle's local deny cache (opt-in: deny_cache=N). A
 * request denied with a finite retry_after stays denied in this process,
 * without a round trip, until that time has passed: nothing but charges
 * can make a denied request fit later, and a charge only ever pushes it
 * further. Keyed by key, rules and cost (a cheaper request may still
 * fit); a reset of the key through the handle forgets its entries. What
 * it cannot see: a reset, or a raised limit, from another process; the
 * stale denial then lasts at most its retry_after.
 *
 * Bounded: N entries in sets of four chosen by the key, so that a reset
 * finds every entry of its key; a full set gives up the entry that ends
 * first. Thread-safe (its own mutex). Made at open (deny_cache=N), or
 * later by the first policy that asks for it (sl_deny_enable), then kept:
 * ready says it is made. Only requests whose policy has the cache on are
 * answered from it and kept in it; a reset, a refund or a forced charge
 * forgets the key's denials whatever its policy. */
#ifndef SL_DENYCACHE_H
#define SL_DENYCACHE_H

#include "request.h"

#include <pthread.h>
#include <stdatomic.h>

#define SL_DENY_WAYS 4

typedef struct sl_deny_entry {
    char *key; /* NULL: empty */
    size_t key_len;
    bool named; /* a named limiter's key (its own prefix) */
    int64_t cost;
    int64_t at, until; /* the handle's clock: denied at, fits again at */
    sluice_ruleset rules;
    sluice_result res;
    uint8_t violated; /* the rules that denied it (sluice_violated) */
} sl_deny_entry;

typedef struct sl_deny_cache {
    atomic_bool ready;    /* made: what follows is set, and stays */
    sl_deny_entry *slots; /* nsets * SL_DENY_WAYS */
    size_t nsets;
    pthread_mutex_t mu;
} sl_deny_cache;

/* entries 0: the cache is off, and every call below does nothing, until
 * sl_deny_enable. */
sluice_status sl_deny_init(sl_deny_cache *c, uint32_t entries);
/* Makes the cache, of entries, unless it is made: its callers take turns
 * (the handle's make_mu); other threads may use it meanwhile. */
sluice_status sl_deny_enable(sl_deny_cache *c, uint32_t entries);
void sl_deny_free(sl_deny_cache *c);
static inline bool sl_deny_on(const sl_deny_cache *c)
{
    return atomic_load_explicit(&c->ready, memory_order_acquire);
}
/* A denial of rq still in force at now: *out filled (status
 * SLUICE_CACHED), true. */
bool sl_deny_lookup(sl_deny_cache *c, const sl_request *rq, int64_t now,
                    sluice_result *out);
/* Keeps res if it is a denial with a finite retry_after. */
void sl_deny_store(sl_deny_cache *c, const sl_request *rq, int64_t now,
                   const sluice_result *res);
/* Forgets every entry of the key (named: a named limiter's). */
void sl_deny_forget(sl_deny_cache *c, const void *key, size_t key_len,
                    bool named);
/* The pipeline's two calls, each nothing when the cache is off. Before a
 * request goes out: a reset or a refund forgets the key's denials; an
 * acquire or a peek whose policy has the cache, denied and still in
 * force, is answered in *out (true). After the backend answered n
 * requests: the denials of acquires and peeks whose policy has the cache
 * are kept, a named limiter's apart from plain keys. The cache's clock is
 * the request's time, or the handle's when the server decides on its. */
bool sl_deny_ask(sl_deny_cache *c, const sl_config *cfg, const sl_request *r,
                 sluice_result *out);
void sl_deny_keep(sl_deny_cache *c, const sl_config *cfg, const sl_request *rs,
                  const sluice_result *res, size_t n);
static inline bool sl_deny_before(sl_deny_cache *c, const sl_config *cfg,
                                  const sl_request *r, sluice_result *out)
{
    return sl_deny_on(c) && sl_deny_ask(c, cfg, r, out);
}
static inline void sl_deny_after(sl_deny_cache *c, const sl_config *cfg,
                                 const sl_request *rs, const sluice_result *res,
                                 size_t n)
{
    if (sl_deny_on(c))
        sl_deny_keep(c, cfg, rs, res, n);
}
/* For tests: the entries held. */
size_t sl_deny_count(sl_deny_cache *c);

#endif /* SL_DENYCACHE_H */
