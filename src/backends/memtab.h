/* SPDX-License-Identifier: BSD-3-Clause */
/* memtab.h - the in-process table under mem:// and the fallback store:
 * stored keys by their bytes, each expiring on the handle's clock as a
 * Redis key does, and, when the table is bounded (fallback_max_keys=),
 * the least recently used state evicted to make room (memtab.c). */
#ifndef SL_MEMTAB_H
#define SL_MEMTAB_H

#include "algo.h"
#include "backends/overtab.h"
#include "internal.h"
#include "store.h"

#include <pthread.h>

#define SL_MEMTAB_RULES  ((sluice_algorithm)0)  /* a named limiter's rules */
#define SL_MEMTAB_BLOCK  ((sluice_algorithm)98) /* a key's block */
#define SL_MEMTAB_LEASES ((sluice_algorithm)99) /* a key's leases */

/* One stored key: the state of one rule of one limited key, a block, the
 * leases of a key, or a named limiter's rules. */
typedef struct sl_memtab_entry {
    struct sl_memtab_entry *next;          /* the hash chain */
    struct sl_memtab_entry *newer, *older; /* use order; not for rules */
    uint64_t hash;
    uint64_t used; /* the table's request count at its last use */
    char *key;
    size_t key_len;
    int64_t expires_at; /* clock ms; the entry is empty from then on */
    sluice_algorithm algorithm;
    union {
        struct { /* fixed, sliding: counts by window index, ascending */
            int64_t *idx;
            int64_t *count;
            size_t n, cap;
        } win;
        struct { /* token, gcra */
            bool has;
            int64_t x, d;
        } bucket;
        struct { /* log: entries oldest first, live from head */
            sl_log_entry *e;
            size_t head, n, cap;
        } log;
        struct { /* a named limiter's rules */
            char *v;
            size_t n;
            int64_t keepalive; /* ms; 0: none */
            sl_overtab over;   /* its overrides: they live and go with it */
        } blob;
        struct { /* a key's block: its end */
            int64_t end;
        } block;
        struct { /* a key's leases, unordered */
            struct sl_memtab_lease {
                char id[24];
                int64_t end;
            } * l;
            size_t n, cap;
        } leases;
    } u;
} sl_memtab_entry;

typedef struct sl_memtab {
    pthread_mutex_t lock; /* held by the caller around every call below */
    sl_memtab_entry **buckets;
    size_t nbuckets, count, gc_at;
    /* State entries (all but rules) from the most recently used to the
     * least; at most max_keys of them (0: no bound). */
    sl_memtab_entry *newest, *oldest;
    size_t nstate, max_keys;
    uint64_t requests; /* one more for each request (sl_memtab_begin) */
    uint64_t evicted;  /* entries dropped to make room, ever */
    /* Named tables only: registry link and handle count (memory.c). */
    struct sl_memtab *next;
    char name[128];
    size_t refs;
} sl_memtab;

/* The family of state an entry holds (store.h); 0 for rules, leases and
 * blocks. */
static inline sl_family sl_memtab_family(const sl_memtab_entry *e)
{
    return sl_store_of(e->algorithm).family;
}

/* A new empty table (name "" for a private one); NULL without memory. */
sl_memtab *sl_memtab_new(const char *name, size_t max_keys);
void sl_memtab_free(sl_memtab *t);

/* Starts a request at now: drops expired entries when due. Entries used
 * within one request are never evicted by it, so the pointers it holds
 * stay valid. */
void sl_memtab_begin(sl_memtab *t, int64_t now);
/* The live entry of key, or NULL; an entry found expired is dropped:
 * expiry goes one way, as a Redis key's does, so a request on a clock
 * behind never finds again what one ahead found gone. */
sl_memtab_entry *sl_memtab_lookup(sl_memtab *t, const char *key, size_t len,
                                  int64_t now);
/* Finds or creates key's entry (of algorithm a, emptied if it had
 * expired), evicting the least recently used state first when the table
 * is full; NULL without memory. */
sl_memtab_entry *sl_memtab_obtain(sl_memtab *t, const char *key, size_t len,
                                  sluice_algorithm a, int64_t now);
/* Removes e, which is in t. */
void sl_memtab_drop(sl_memtab *t, sl_memtab_entry *e);

#endif /* SL_MEMTAB_H */
