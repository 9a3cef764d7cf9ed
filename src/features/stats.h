/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.h - a handle's counters (sluice_get_stats), and those of each
 * named limiter it decides by (sluice_get_limiter_stats): relaxed
 * atomics, so that threads sharing a handle count without a lock, and a
 * reader gets each counter whole (not a snapshot of all at one instant).
 * A limiter's counters are found by its name in an open-addressing table
 * that only grows, lock-free, up to SLUICE_STATS_LIMITERS names. */
#ifndef SL_STATS_H
#define SL_STATS_H

#include "backend.h"

#include <stdatomic.h>

/* The counters of a set of requests: all of a handle's, or one
 * limiter's. */
typedef struct sl_counts {
    atomic_uint_fast64_t allowed, denied, near_limit, peeks, resets, refunds,
        cache_hits, policy_answers, shadow_admitted, allowlisted, denylisted,
        reserved;
    atomic_uint_fast64_t failures[SLUICE_STATS_STATUSES];
} sl_counts;

/* One limiter's counters, under its name. */
typedef struct sl_stats_limiter {
    sl_counts c;
    size_t name_len;
    char name[]; /* name_len bytes */
} sl_stats_limiter;

/* The table's slots: twice the names it keeps, so that a probe ends
 * soon; a power of two. */
#define SL_STATS_SLOTS (2 * SLUICE_STATS_LIMITERS)

typedef struct sl_stats {
    bool on;
    sl_counts all; /* every request */
    atomic_uint_fast64_t backend_requests, round_trips, calls, latency_sum_us;
    atomic_uint_fast64_t latency_us[SLUICE_STATS_BUCKETS];
    /* By limiter: a slot, once set, keeps its entry until the handle
     * closes (sl_stats_free); others counts the names past the cap. */
    _Atomic(sl_stats_limiter *) limiters[SL_STATS_SLOTS];
    atomic_uint nlimiters; /* entries made, at most SLUICE_STATS_LIMITERS */
    sl_counts others;
} sl_stats;

void sl_stats_init(sl_stats *s, bool on);
void sl_stats_free(sl_stats *s);
/* One request's answer: op, the status the backend gave it (st, OK when
 * it decided), whether the fail policy answered, and the result; name
 * (name_len bytes) the limiter of a decision by name, else NULL. */
void sl_stats_answer(sl_stats *s, const void *name, size_t name_len, sl_op op,
                     sluice_status st, bool policy, const sluice_result *res);
/* One call's duration, from its start (sl_stats_start) to now. */
int64_t sl_stats_start(const sl_stats *s);
void sl_stats_call(sl_stats *s, int64_t start_us);
/* What went to the backend: requests, and the round trips they took. */
void sl_stats_backend(sl_stats *s, uint64_t requests, uint64_t round_trips);
void sl_stats_read(const sl_stats *s, sluice_stats *out);
/* The counters of the limiter name (NULL: the overflow's) into out,
 * zero for a name not counted. */
void sl_stats_limiter_read(const sl_stats *s, const void *name, size_t name_len,
                           sluice_limiter_stats *out);

/* Calls fn for each limiter counted, then for the overflow (name NULL)
 * when it counted anything; each counter read whole. */
typedef void (*sl_stats_limiter_fn)(void *arg, const void *name,
                                    size_t name_len,
                                    const sluice_limiter_stats *ls);
void sl_stats_each_limiter(const sl_stats *s, sl_stats_limiter_fn fn,
                           void *arg);

#endif /* SL_STATS_H */
