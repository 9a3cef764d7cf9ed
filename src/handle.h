/* SPDX-License-Identifier: BSD-3-Clause */
/* handle.h - the handle's struct, and what the core's files (sluice.c,
 * share.c, policy.c) give the pipeline (pipeline.h) and its two drivers;
 * the features above them see only call.h. */
#ifndef SL_HANDLE_H
#define SL_HANDLE_H

#include "backend.h"
#include "engine.h"
#include "features/denycache.h"
#include "features/limfile.h"
#include "features/limiter_cache.h"
#include "features/policies.h"
#include "features/reserve.h"
#include "features/stats.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct sl_waiter sl_waiter;
struct async_call; /* call_loop.c */

struct sluice {
    const sl_backend *backend;
    void *state;
    sl_url url;
    sl_engine eng;      /* the connections' I/O, blocking or on a loop */
    sl_deny_cache deny; /* off unless deny_cache=N or a policy */
    sl_reserve rsv;     /* off unless reserve_ms=H or a policy */
    sl_stats stats;     /* on unless metrics=0 */
    /* fail=fallback's private memory store: made at open, or by the
     * first policy that asks for it (sl_policy_provide), then kept. */
    _Atomic(void *) fallback;
    sl_policy policy;          /* the handle's own, from its options */
    sl_policies policies;      /* the named limiters' */
    pthread_mutex_t make_mu;   /* makes what a policy asks for, once */
    sl_limiters names;         /* what it read of named limiters (names.h) */
    sl_limfile limits;         /* its limits file (limits_file=), if any */
    struct async_call *parked; /* calls on the loop waiting for a batch */
    uint64_t last_rt;          /* the backend's round trips counted so far; by
                                  whoever drives the engine */
    pthread_mutex_t mu;        /* guards what follows */
    bool busy;                 /* a thread is in the backend */
    sl_waiter *head, *tail;    /* queued, not yet taken */
    uint64_t batches;          /* backend calls: fewer than the calls when
                                  threads' requests went out together */
};

/* share.c: threads sharing a handle. When this thread's current call on
 * sl began (monotonic ms; now, if unknown). */
int64_t sl_share_began(const sluice *sl);
/* Decides the n prepared requests through the backend, blocking: by this
 * thread, together with what other threads queued meanwhile, or by the
 * thread already in the backend. Returns the backend's status; res[i]
 * set as sl_backend.decide sets them. */
sluice_status sl_share_decide(sluice *sl, const sl_request *reqs, size_t n,
                              sluice_result *res, char *err);
/* The same, only when no other thread's round trip is in flight or queued
 * (then this thread makes its own at once): true, and its status in *st;
 * else false at once, nothing sent. */
bool sl_share_decide_now(sluice *sl, const sl_request *reqs, size_t n,
                         sluice_result *res, char *err, sluice_status *st);
/* Counts the backend's round trips since the last count; by the thread
 * that drives the engine (the batch's leader, or the loop's). */
void sl_share_count_trips(sluice *sl, uint64_t requests);

/* policy.c: the fail policy and its fallback store; what a policy asks
 * of the handle. The fallback store, made at open (fail=fallback). */
sluice_status sl_policy_open(sluice *sl, char *err, size_t err_len);
/* Makes what pol asks for that the handle lacks: a deny cache, the
 * reservations' table, the fallback store; SLUICE_ENOMEM with the
 * message when it cannot. Any thread. */
sluice_status sl_policy_provide(sluice *sl, const sl_policy *pol, char *err);
/* Whether pol's fail policy answers for a backend that failed with st. */
bool sl_policy_answers(const sl_policy *pol, sluice_status st);
/* The rules the fallback store decides by instead of rs: each limit and
 * burst divided among pol's fallback_instances (out may be rs). */
void sl_policy_divide(const sl_policy *pol, const sluice_ruleset *rs,
                      sluice_ruleset *out);
/* Whether st is a failure of the backend (unreachable, too slow, an error
 * reply, an unreadable one), whatever the policy: what a policy answers. */
bool sl_policy_backend_failed(sluice_status st);
/* The backend failed rq with st: the answer of rq's fail policy in *out
 * (SLUICE_OK), or st when it does not answer it. */
sluice_status sl_policy_fail(const sluice *sl, const sl_request *rq,
                             sluice_status st, sluice_result *out);
/* A settle (rq: its refund or forced charge) of an acquire that the
 * fallback store decided, its failure st: settled there (true, its answer
 * in *out, status st); false when the handle has no such store or it
 * cannot. */
bool sl_policy_settle(const sluice *sl, const sl_request *rq, sluice_status st,
                      sluice_result *out);
/* The same for a batch: res holds the m requests sent, which are
 * out[map[i]]; first is the first failure of the requests refused before
 * they were sent (its message in first_msg), which the call returns when
 * nothing else failed. */
sluice_status sl_policy_many(const sluice *sl, const sl_request *rs,
                             const sluice_result *res, size_t m,
                             const size_t *map, sluice_status st,
                             sluice_result *out, sluice_status first,
                             const char *first_msg, char *err);

/* limits_file.c: the handle's limits file (limits_file=) read, checked
 * and held, its policies the limiters' on the handle; at the end of
 * open. SLUICE_EINVAL naming the file, line and column. */
sluice_status sl_limits_file_open(sluice *sl, char *err, size_t err_len);

#endif /* SL_HANDLE_H */
