/* SPDX-License-Identifier: BSD-3-Clause */
/* call.h - the calls as the features built on the handle (named
 * limiters, leases) make them: a request is prepared (checked), then run
 * through the one pipeline (pipeline.h), blocking (call.c) or on the
 * caller's loop (call_loop.c). Also this thread's message buffer
 * (share.c), and what a feature reads of the handle (sluice.c). */
#ifndef SL_CALL_H
#define SL_CALL_H

#include "backend.h"
#include "features/limiter_cache.h"
#include "share.h"

/* Checks one request (key, the time, and for a decision its rules and
 * cost; rules NULL for the ops that do not decide) and fills r, stamped
 * with the handle's clock (-1: the server's); the message in err. Set
 * r->prefix, and a stored-rules or lease op's member (r->stored,
 * r->lease), after. */
sluice_status sl_call_prepare(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err);
/* A call refused before it ran (st), its request counted as the pipeline
 * counts its own. */
void sl_call_count(sluice *sl, sl_op op, sluice_status st);

/* Blocking. SLUICE_EINVAL, with the message, on a handle attached to a
 * loop (a blocking call would stall it). */
sluice_status sl_call_blocking(const sluice *sl, char *err);
/* Runs the prepared r, blocking. A decision (or a lease op) goes through
 * the whole pipeline and is counted; *out is set unless it fails (out may
 * be NULL for a reset or a release). A stored-rules op only goes to the
 * backend: its status is the request's, what it read in r->stored. */
sluice_status sl_call_run(sluice *sl, sl_request *r, sluice_result *out,
                          char *err);
/* A decision by name (op: acquire, peek or reset), blocking: the name and
 * client checked, then the pipeline from its first stage. */
sluice_status sl_call_by_name(sluice *sl, sl_op op, const void *name,
                              size_t name_len, const void *client,
                              size_t client_len, int64_t cost,
                              sluice_result *out);

/* On the caller's loop: how a call answers (done, or granted for an
 * acquire at most). */
typedef struct sl_call_to {
    sluice_done_fn done;
    sluice_granted_fn granted;
    void *arg;
} sl_call_to;
/* What every async call needs (an answer to give, an attached handle
 * that is not closing); the message in err. */
sluice_status sl_call_ready(const sluice *sl, bool has_answer, char *err);
/* Starts the prepared r on the loop, its key, rules and value copied. */
sluice_status sl_call_start(sluice *sl, const sl_request *r,
                            const sl_call_to *to, char *err);
/* A decision by name on the loop, as sl_call_by_name; the name and client
 * copied. */
sluice_status sl_call_by_name_async(sluice *sl, sl_op op, const void *name,
                                    size_t name_len, const void *client,
                                    size_t client_len, int64_t cost,
                                    sluice_done_fn done, void *arg);

/* A stored-rules op's round trip on the loop, for a call made of several
 * (the limiter admin calls, features/admin.h): no pipeline (no fail
 * policy, not counted as a decision). r prepared (NULL: no request, the
 * answer from the loop all the same), its pointers alive until fn runs;
 * the round trip's budget runs from began (monotonic ms), the call's
 * start. fn(sl, arg, st) runs from the loop, never from this call, with
 * the request's status, its message in err (SL_ERR_LEN bytes). SLUICE_OK,
 * or (fn never runs) SLUICE_EIO on a handle that closes, SLUICE_ENOMEM. */
typedef void (*sl_call_stored_fn)(sluice *sl, void *arg, sluice_status st);
sluice_status sl_call_stored_async(sluice *sl, const sl_request *r,
                                   int64_t began, sl_call_stored_fn fn,
                                   void *arg, char *err);

/* sluice.c: the handle's cache of named limiters (names.h). */
sl_limiters *sl_handle_names(sluice *sl);

#endif /* SL_CALL_H */
