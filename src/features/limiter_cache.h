/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter_cache.h - a handle's limiters and its cache of what it read of
 * them: rules by name, overrides by client (limiter_cache.c). */
#ifndef SL_LIMITER_CACHE_H
#define SL_LIMITER_CACHE_H

#include "request.h"

#include <pthread.h>

#define SL_LIMITER_CACHE   64   /* names a handle keeps rules for */
#define SL_LIMITER_KEY_MAX 1000 /* name and client id together */

/* What every cached entry begins with: its key's length (the key is the
 * entry's own array), when it was read (monotonic ms), and its last use,
 * by which the least used goes when a table is full. */
typedef struct sl_cache_entry {
    bool used;
    size_t key_len;
    int64_t read_at;
    uint64_t last_use;
} sl_cache_entry;

/* Rules read for one name (the key). */
typedef struct sl_cached_rules {
    sl_cache_entry e;
    char name[SLUICE_MAX_KEY_LEN];
    sluice_ruleset rules;
    int64_t keepalive_ms;
    int64_t overs; /* overrides the name had then: 0, none for any client */
} sl_cached_rules;

#define SL_OVER_CACHE 256 /* clients a handle keeps overrides for */

/* The override read for one client of a name (kind NONE: none). key: K,
 * "<name length>:<name><client>", its first name_len bytes after the
 * colon the name's. */
typedef struct sl_cached_over {
    sl_cache_entry e;
    size_t name_len;
    char key[24 + SL_LIMITER_KEY_MAX];
    sluice_limiter_override ov;
} sl_cached_over;

/* A handle's limiters: what it read of them, kept in the handle. */
typedef struct sl_limiters {
    pthread_mutex_t mu;
    char prefix[80];       /* "<prefix>lim:": apart from plain keys */
    int64_t cache_ms;      /* < 0: never cached */
    int64_t stale_ms;      /* used when a read fails; < 0: never */
    sl_cached_rules *slot; /* SL_LIMITER_CACHE of them, made on first use */
    sl_cached_over *over;  /* SL_OVER_CACHE of them, made on first use */
    uint64_t uses;
} sl_limiters;

/* limiter_cache.c: what a handle read, kept for l->cache_ms. K is
 * "<name length>:<name><client>" (limiter.c's compose), kl its length.
 * Each takes l->mu. */
/* Keeps rs for name, with its keep-alive and the count of overrides read
 * with it (rs NULL: forgets it); the least used goes. */
void sl_lcache_put(sl_limiters *l, const void *name, size_t name_len,
                   const sluice_ruleset *rs, int64_t keepalive, int64_t overs);
/* The rules of name if read within age ms (true; l->cache_ms for a
 * decision, l->stale_ms when a read failed), and *overs; else *known is
 * the keep-alive read last (-1: none). */
bool sl_lcache_rules(sl_limiters *l, const void *name, size_t name_len,
                     int64_t age, sluice_ruleset *rs, int64_t *known,
                     int64_t *overs);
/* The handle stored an override for name: the count read is unknown. */
void sl_lcache_overs_changed(sl_limiters *l, const void *name, size_t name_len);
/* Keeps ov for K (ov NULL: forgets it); the least used goes. */
void sl_lcache_over_put(sl_limiters *l, size_t name_len, const char *key,
                        size_t kl, const sluice_limiter_override *ov);
/* Forgets every override cached for name (its K, without a client, is kl
 * bytes). */
void sl_lcache_over_forget(sl_limiters *l, const char *key, size_t kl,
                           size_t name_len);
/* The override of K if read within age ms (true). */
bool sl_lcache_over(sl_limiters *l, const char *key, size_t kl, int64_t age,
                    sluice_limiter_override *ov);

#endif /* SL_LIMITER_CACHE_H */
