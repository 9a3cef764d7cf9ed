/* SPDX-License-Identifier: BSD-3-Clause */
/* memtab.c - the in-process table of stored keys: a hash table whose
 * entries expire on the caller's clock, bounded when asked by evicting the
 * least recently used state (nginx's limit_req zones do the same when
 * their memory runs out). */
#include "backends/memtab.h"

#include <string.h>

static void entry_free(sl_memtab_entry *e)
{
    if (sl_memtab_family(e) == SL_FAMILY_WINDOW) {
        sl_free(e->u.win.idx);
        sl_free(e->u.win.count);
    } else if (sl_memtab_family(e) == SL_FAMILY_LOG) {
        sl_free(e->u.log.e);
    } else if (e->algorithm == SL_MEMTAB_RULES) {
        sl_free(e->u.blob.v);
        sl_overtab_free(&e->u.blob.over);
    } else if (e->algorithm == SL_MEMTAB_LEASES) {
        sl_free(e->u.leases.l);
    }
    sl_free(e->key);
    sl_free(e);
}

sl_memtab *sl_memtab_new(const char *name, size_t max_keys)
{
    sl_memtab *t = sl_calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->nbuckets = 64;
    t->buckets = sl_calloc(t->nbuckets, sizeof(*t->buckets));
    if (t->buckets == NULL || pthread_mutex_init(&t->lock, NULL) != 0) {
        sl_free(t->buckets);
        sl_free(t);
        return NULL;
    }
    t->gc_at = 1024;
    t->max_keys = max_keys;
    t->refs = 1;
    strcpy(t->name, name);
    return t;
}

void sl_memtab_free(sl_memtab *t)
{
    size_t i;

    for (i = 0; i < t->nbuckets; i++) {
        sl_memtab_entry *e = t->buckets[i], *next;

        for (; e != NULL; e = next) {
            next = e->next;
            entry_free(e);
        }
    }
    pthread_mutex_destroy(&t->lock);
    sl_free(t->buckets);
    sl_free(t);
}

/* Rules are configuration, not state: never in the use order, never
 * evicted, not counted against max_keys. */
static bool is_state(const sl_memtab_entry *e)
{
    return e->algorithm != SL_MEMTAB_RULES;
}

static void unlink_use(sl_memtab *t, sl_memtab_entry *e)
{
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    e->newer = e->older = NULL;
}

/* e is used by the request under way: the most recent, and kept. */
static void touch(sl_memtab *t, sl_memtab_entry *e)
{
    e->used = t->requests;
    if (!is_state(e) || t->newest == e)
        return;
    if (e->newer != NULL || t->oldest == e)
        unlink_use(t, e);
    e->older = t->newest;
    if (t->newest != NULL)
        t->newest->newer = e;
    t->newest = e;
    if (t->oldest == NULL)
        t->oldest = e;
}

static sl_memtab_entry **find_slot(sl_memtab *t, const char *key, size_t len,
                                   uint64_t h)
{
    sl_memtab_entry **pp = &t->buckets[h & (t->nbuckets - 1)];

    for (; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->key_len == len &&
            memcmp((*pp)->key, key, len) == 0)
            return pp;
    return pp;
}

/* Unlinks the entry at *pp from its chain and the use order; frees it. */
static void drop_at(sl_memtab *t, sl_memtab_entry **pp)
{
    sl_memtab_entry *e = *pp;

    *pp = e->next;
    if (is_state(e)) {
        unlink_use(t, e);
        t->nstate--;
    }
    entry_free(e);
    t->count--;
}

void sl_memtab_drop(sl_memtab *t, sl_memtab_entry *e)
{
    sl_memtab_entry **pp = &t->buckets[e->hash & (t->nbuckets - 1)];

    while (*pp != e)
        pp = &(*pp)->next;
    drop_at(t, pp);
}

/* Drops every entry that has expired by now; grows the table. */
static void gc(sl_memtab *t, int64_t now)
{
    size_t i, nb = t->nbuckets;
    sl_memtab_entry **grown = NULL;

    for (i = 0; i < nb; i++) {
        sl_memtab_entry **pp = &t->buckets[i];

        while (*pp != NULL) {
            if ((*pp)->expires_at <= now)
                drop_at(t, pp);
            else
                pp = &(*pp)->next;
        }
    }
    if (t->count > nb && (grown = sl_calloc(nb * 2, sizeof(*grown))) != NULL) {
        for (i = 0; i < nb; i++) {
            sl_memtab_entry *e = t->buckets[i], *next;

            for (; e != NULL; e = next) {
                next = e->next;
                e->next = grown[e->hash & (nb * 2 - 1)];
                grown[e->hash & (nb * 2 - 1)] = e;
            }
        }
        sl_free(t->buckets);
        t->buckets = grown;
        t->nbuckets = nb * 2;
    }
    t->gc_at = t->count * 2 > 1024 ? t->count * 2 : 1024;
}

void sl_memtab_begin(sl_memtab *t, int64_t now)
{
    t->requests++;
    if (t->count >= t->gc_at)
        gc(t, now);
}

sl_memtab_entry *sl_memtab_lookup(sl_memtab *t, const char *key, size_t len,
                                  int64_t now)
{
    sl_memtab_entry **pp = find_slot(t, key, len, sl_hash64(key, len));

    if (*pp == NULL)
        return NULL;
    if ((*pp)->expires_at <= now) {
        drop_at(t, pp);
        return NULL;
    }
    touch(t, *pp);
    return *pp;
}

/* Makes room for one more state entry: drops the least recently used
 * until fewer than max_keys are held, but none that this request uses
 * (its pointers to them stay valid; the table may pass the bound by
 * those, at most a request's entries). */
static void make_room(sl_memtab *t, int64_t now)
{
    while (t->max_keys > 0 && t->nstate >= t->max_keys && t->oldest != NULL &&
           t->oldest->used != t->requests) {
        sl_memtab_entry *e = t->oldest;

        t->evicted += e->expires_at > now;
        sl_memtab_drop(t, e);
    }
}

sl_memtab_entry *sl_memtab_obtain(sl_memtab *t, const char *key, size_t len,
                                  sluice_algorithm a, int64_t now)
{
    uint64_t h = sl_hash64(key, len);
    sl_memtab_entry **pp = find_slot(t, key, len, h), *e;

    if (*pp != NULL && (*pp)->expires_at <= now)
        drop_at(t, pp);
    else if (*pp != NULL) {
        touch(t, *pp);
        return *pp;
    }
    if (a != SL_MEMTAB_RULES)
        make_room(t, now);
    e = sl_calloc(1, sizeof(*e));
    if (e == NULL || (e->key = sl_memdup(key, len)) == NULL) {
        sl_free(e);
        return NULL;
    }
    e->hash = h;
    e->key_len = len;
    e->algorithm = a;
    e->expires_at = now;
    /* Found again: an eviction may have changed the chain. */
    pp = find_slot(t, key, len, h);
    *pp = e;
    t->count++;
    t->nstate += is_state(e);
    touch(t, e);
    return e;
}
