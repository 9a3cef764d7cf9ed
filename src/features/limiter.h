/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.h - named limiters: their rules stored in the backend, and a
 * handle's cache of what it read (limiter.c). */
#ifndef SL_LIMITER_H
#define SL_LIMITER_H

#include "backend.h"

#include <pthread.h>

#define SL_LIMITER_CACHE   64   /* names a handle keeps rules for */
#define SL_LIMITER_KEY_MAX 1000 /* name and client id together */

/* Rules read for one name, and when (monotonic ms). */
typedef struct sl_cached_rules {
    bool used;
    size_t name_len;
    char name[SLUICE_MAX_KEY_LEN];
    sluice_ruleset rules;
    int64_t keepalive_ms;
    int64_t read_at;
    uint64_t last_use;
} sl_cached_rules;

typedef struct sl_limiters {
    pthread_mutex_t mu;
    char prefix[80];       /* "<prefix>lim:": apart from plain keys */
    int64_t cache_ms;      /* < 0: never cached */
    sl_cached_rules *slot; /* SL_LIMITER_CACHE of them, made on first use */
    uint64_t uses;
    bool ready; /* mu made */
} sl_limiters;

sluice_status sl_limiters_init(sl_limiters *l, const sl_url *url);
void sl_limiters_free(sl_limiters *l);

/* sluice.c, for limiter.c: the handle's limiters, its clock, this thread's
 * message buffer; and one prepared request through the handle (the fail
 * policy, shadow mode and the counters for decisions; rules ops as they
 * are), blocking. */
sl_limiters *sl_handle_limiters(sluice *sl);
int64_t sl_handle_now(const sluice *sl);
char *sl_handle_err(const sluice *sl);
sluice_status sl_handle_check(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err);
sluice_status sl_handle_one(sluice *sl, sl_request *r, sluice_result *out,
                            char *err);

/* On the loop: sl_handle_check without refusing an attached handle, and
 * the start of a prepared request, copied. A decision answers done as any
 * async call does; a rules op answers then instead, with the request's
 * status (what it read in r->read, which must outlive the call). began
 * is when the caller's call began (sl_mono_ms), 0 for now: the request's
 * deadline is timeout_ms from then, so that reading the rules and deciding
 * share one budget. */
typedef void (*sl_then_fn)(sluice *sl, void *arg, sluice_status st);
sluice_status sl_handle_prepare(sluice *sl, sl_op op, const void *key,
                                size_t key_len, const sluice_ruleset *rules,
                                int64_t cost, sl_request *r, char *err);
sluice_status sl_handle_start(sluice *sl, const sl_request *r, int64_t began,
                              sluice_done_fn done, sl_then_fn then, void *arg,
                              char *err);

#endif /* SL_LIMITER_H */
