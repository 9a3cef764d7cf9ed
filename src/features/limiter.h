/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.h - named limiters: their rules stored in the backend, and a
 * handle's cache of what it read (limiter.c). */
#ifndef SL_LIMITER_H
#define SL_LIMITER_H

#include "call.h"

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

/* A handle's limiters: its state for them (sl_handle_ext), made on the
 * first call by name. */
typedef struct sl_limiters {
    sl_ext ext; /* first: the handle frees it through ext.free */
    pthread_mutex_t mu;
    char prefix[80];       /* "<prefix>lim:": apart from plain keys */
    int64_t cache_ms;      /* < 0: never cached */
    sl_cached_rules *slot; /* SL_LIMITER_CACHE of them, made on first use */
    uint64_t uses;
} sl_limiters;

#endif /* SL_LIMITER_H */
