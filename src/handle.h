/* SPDX-License-Identifier: BSD-3-Clause */
/* handle.h - the handle's struct, and what the core's files (sluice.c,
 * share.c, policy.c, call.c) give each other; the features above them see
 * only call.h. */
#ifndef SL_HANDLE_H
#define SL_HANDLE_H

#include "backend.h"
#include "engine.h"
#include "features/denycache.h"
#include "features/reserve.h"
#include "features/stats.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct sl_waiter sl_waiter;
struct sl_ext; /* call.h */

struct sluice {
    const sl_backend *backend;
    void *state;
    sl_url url;
    sl_engine eng;      /* the connections' I/O, blocking or on a loop */
    sl_deny_cache deny; /* off unless deny_cache=N */
    sl_reserve rsv;     /* off unless reserve_ms=H */
    sl_stats stats;     /* on unless metrics=0 */
    void *fallback;     /* fail=fallback: a private memory store */
    /* A feature's state (named limiters), made on its first use and
     * freed at close through its own hook (sl_handle_ext). */
    _Atomic(struct sl_ext *) ext;
    uint64_t last_rt;       /* the backend's round trips counted so far; by
                               whoever drives the engine */
    pthread_mutex_t mu;     /* guards what follows */
    bool busy;              /* a thread is in the backend */
    sl_waiter *head, *tail; /* queued, not yet taken */
    uint64_t batches;       /* backend calls: fewer than the calls when
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
/* Counts the backend's round trips since the last count; by the thread
 * that drives the engine (the batch's leader, or the loop's). */
void sl_share_count_trips(sluice *sl, uint64_t requests);

/* policy.c: the fail policy and its fallback store. */
sluice_status sl_policy_open(sluice *sl, char *err, size_t err_len);
/* Whether the fail policy answers for a backend that failed with st. */
bool sl_policy_answers(const sluice *sl, sluice_status st);
/* What a single request returns for the backend's answer (st for the
 * call, res for the request): the policy applied; *out set unless the
 * call fails. */
sluice_status sl_policy_fail(const sluice *sl, const sl_request *rq,
                             sluice_status st, sluice_result *out);
static inline sluice_status
sl_policy_one(const sluice *sl, const sl_request *rq, sluice_status st,
              const sluice_result *res, sluice_result *out)
{
    if (st == SLUICE_OK)
        st = res->status;
    if (st != SLUICE_OK) /* the policy's: out of the hot path */
        return sl_policy_fail(sl, rq, st, out);
    if (out != NULL)
        *out = *res;
    return SLUICE_OK;
}
/* The same for a batch: res holds the m requests sent, which are
 * out[map[i]]; first is the first failure of the requests refused before
 * they were sent (its message in first_msg), which the call returns when
 * nothing else failed. */
sluice_status sl_policy_many(const sluice *sl, const sl_request *rs,
                             const sluice_result *res, size_t m,
                             const size_t *map, sluice_status st,
                             sluice_result *out, sluice_status first,
                             const char *first_msg, char *err);

/* call.c: the pipeline's stages, which call_loop.c runs on the loop. */
/* Ops whose call returns no result, only a status. */
bool sl_call_no_result(sl_op op);
/* Counts a single call's request: its status and, when it succeeded with
 * a result, that result. */
void sl_call_count_one(sluice *sl, sl_op op, sluice_status st,
                       const sluice_result *r);
/* One request answered (res; NULL: answered before it was sent, in
 * *out): the fail policy, then shadow mode. Returns the call's status. */
sluice_status sl_call_finish_one(const sluice *sl, const sl_request *r,
                                 sluice_status st, const sluice_result *res,
                                 sluice_result *out);
/* A batch answered: res for the m requests sent, which are out[map[i]]
 * of the caller's n; the policy, shadow mode and the counters for all n. */
sluice_status sl_call_finish_many(sluice *sl, const sl_request *rs,
                                  const sluice_result *res, size_t m,
                                  const size_t *map, sluice_status st,
                                  sluice_result *out, size_t n,
                                  sluice_status first, const char *first_msg,
                                  char *err);
/* A batch's requests checked and asked of the reservations and the deny
 * cache: those to send into rs, their places in map. Returns how many. */
size_t sl_call_prepare_many(sluice *sl, const sluice_request *reqs, size_t n,
                            sl_request *rs, size_t *map, sluice_result *out,
                            sluice_status *first, char *first_msg, char *err);
/* Whether wait_ms is out of range (err says so). */
bool sl_call_bad_wait(int64_t wait_ms, char *err);
/* A waiting acquire's answer r at now (monotonic ms), its deadline until:
 * how long to sleep before asking again, or 0 when r is the answer. */
int64_t sl_call_wait_more(const sluice_result *r, int64_t now, int64_t until);

#endif /* SL_HANDLE_H */
