/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.h - the limiter admin calls (define, set, get, delete; override
 * set, get, delete, list), each one state machine of stored-rules round
 * trips (admin.c), written once and run by two drivers, as the pipeline
 * is for decisions: blocking (limiter.c, override.c) and on the caller's
 * loop (limiter_async.c). */
#ifndef SL_ADMIN_H
#define SL_ADMIN_H

#include "call.h"

typedef enum sl_admin_op {
    SL_ADMIN_DEFINE = 1,
    SL_ADMIN_SET,
    SL_ADMIN_GET,
    SL_ADMIN_DELETE,
    SL_ADMIN_OVER_SET,
    SL_ADMIN_OVER_GET,
    SL_ADMIN_OVER_DEL,
    SL_ADMIN_OVER_LIST
} sl_admin_op;

/* What a call is given; nothing is kept by reference. */
typedef struct sl_admin_in {
    sl_admin_op op;
    const void *name;
    size_t name_len;
    const void *client; /* the override calls' */
    size_t client_len;
    const sluice_ruleset *rules;       /* define, set */
    int64_t keepalive_ms;              /* define, set */
    const sluice_limiter_override *ov; /* override set */
    sluice_override_fn each;           /* list: each override */
    void *each_arg;
} sl_admin_in;

typedef struct sl_admin sl_admin;

/* Blocking: checks in (bad input: its status, the message in the
 * thread's buffer), then runs the call in this thread; what it read in
 * *info (may be NULL), whose name and client point into nothing once it
 * returns. */
sluice_status sl_admin_call(sluice *sl, const sl_admin_in *in,
                            sluice_limiter_info *info);
/* On the loop: checks in (done NULL, a handle not attached or closing,
 * bad input: returned, done never runs), copies it, and starts the call;
 * done(sl, arg, st, info) runs once, from the loop. */
sluice_status sl_admin_call_async(sluice *sl, const sl_admin_in *in,
                                  sluice_limiter_fn done, void *arg);

#endif /* SL_ADMIN_H */
