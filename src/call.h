/* SPDX-License-Identifier: BSD-3-Clause */
/* call.h - the request pipeline (call.c), as the features built on it
 * (named limiters, leases) use it: a request is prepared (checked), then
 * run, blocking or on the caller's loop, through the one pipeline: deny
 * cache, the backend, then the fail policy, shadow mode and the counters.
 * Also this thread's message buffer (share.c), and the two things of the
 * handle (sluice.c) a feature reads: its URL, and a place for the
 * feature's own state. */
#ifndef SL_CALL_H
#define SL_CALL_H

#include "backend.h"
#include "share.h"

/* The time a request carries: the handle's clock, or -1 for the
 * server's. */
int64_t sl_call_now(const sluice *sl);
/* Checks one request (key, the time, and for a decision its rules and
 * cost; rules NULL for the ops that do not decide) and fills r, stamped
 * with sl_call_now; the message in err. Set r->prefix, and a stored-rules
 * or lease op's member (r->stored, r->lease), after. */
sluice_status sl_call_prepare(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err);
/* A request refused before it ran (st), counted as the pipeline counts
 * its own. */
void sl_call_count(sluice *sl, sl_op op, sluice_status st);
/* A request answered without the backend (r: its result), counted as the
 * pipeline counts its own. */
void sl_call_count_answer(sluice *sl, sl_op op, const sluice_result *r);

/* Blocking. SLUICE_EINVAL, with the message, on a handle attached to a
 * loop (a blocking call would stall it). */
sluice_status sl_call_blocking(const sluice *sl, char *err);
/* Runs the prepared r, blocking. A decision (or a lease op) goes through
 * the whole pipeline and is counted; *out is set unless it fails (out may
 * be NULL for a reset or a release). A rules op only goes to the backend:
 * its status is the request's, what it read in r->read. */
sluice_status sl_call_run(sluice *sl, sl_request *r, sluice_result *out,
                          char *err);

/* On the caller's loop. How a call answers: done, or granted for an
 * acquire at most, or then for a rules op (with the request's status;
 * what it read in r->read, which must outlive the call). */
typedef void (*sl_then_fn)(sluice *sl, void *arg, sluice_status st);
typedef struct sl_call_to {
    sluice_done_fn done;
    sluice_granted_fn granted;
    sl_then_fn then;
    void *arg;
} sl_call_to;
/* What every async call needs (an answer to give, an attached handle
 * that is not closing); the message in err. */
sluice_status sl_call_ready(const sluice *sl, bool has_answer, char *err);
/* Starts the prepared r on the loop, its key, rules and value copied.
 * began is when the caller's call began (monotonic ms; 0 for now): the
 * request's deadline is timeout_ms from then, so that reading a limiter's
 * rules and deciding share one budget. wait_ms > 0: an acquire that
 * waits that long for a denial to fit. */
sluice_status sl_call_start(sluice *sl, const sl_request *r, int64_t began,
                            int64_t wait_ms, const sl_call_to *to, char *err);

/* sluice.c: the handle's URL (its options resolved). */
const sl_url *sl_handle_url(const sluice *sl);
/* A feature's state in the handle: made by make on the first call (NULL:
 * no memory), kept until the handle closes, which frees it through its
 * free hook. Threads may race to make it; one wins, the others' copies
 * are freed. */
typedef struct sl_ext {
    void (*free)(struct sl_ext *e);
} sl_ext;
sl_ext *sl_handle_ext(sluice *sl, sl_ext *(*make)(const sluice *sl));

/* A settle of reserved against actual (each 0..10^9, else SLUICE_ECOST
 * with the message in err): *op and *amount are the refund of what was
 * reserved and not used, or the forced charge of the excess. */
sluice_status sl_call_settle(int64_t reserved, int64_t actual, sl_op *op,
                             int64_t *amount, char *err);

#endif /* SL_CALL_H */
