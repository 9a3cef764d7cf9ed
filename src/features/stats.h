/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.h - a handle's counters (sluice_get_stats): relaxed atomics, so
 * that threads sharing a handle count without a lock, and a reader gets
 * each counter whole (not a snapshot of all at one instant). */
#ifndef SL_STATS_H
#define SL_STATS_H

#include "backend.h"

#include <stdatomic.h>

typedef struct sl_stats {
    bool on;
    atomic_uint_fast64_t allowed, denied, near_limit, peeks, resets, cache_hits,
        policy_answers, backend_requests, round_trips, calls, latency_sum_us,
        shadow_admitted, refunds, allowlisted, denylisted;
    atomic_uint_fast64_t failures[SLUICE_STATS_STATUSES];
    atomic_uint_fast64_t latency_us[SLUICE_STATS_BUCKETS];
} sl_stats;

void sl_stats_init(sl_stats *s, bool on);
/* One request's answer: op, the status the backend gave it (st, OK when
 * it decided), whether the fail policy answered, and the result. */
void sl_stats_answer(sl_stats *s, sl_op op, sluice_status st, bool policy,
                     const sluice_result *res);
/* One call's duration, from its start (sl_stats_start) to now. */
int64_t sl_stats_start(const sl_stats *s);
void sl_stats_call(sl_stats *s, int64_t start_us);
/* What went to the backend: requests, and the round trips they took. */
void sl_stats_backend(sl_stats *s, uint64_t requests, uint64_t round_trips);
void sl_stats_read(const sl_stats *s, sluice_stats *out);

#endif /* SL_STATS_H */
