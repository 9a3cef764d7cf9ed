/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter_cache.c - a handle's cache of what it read of named limiters:
 * the rules of a name (SL_LIMITER_CACHE names) and the override of a
 * client (SL_OVER_CACHE clients), each with when it was read; the least
 * used entry goes when the table is full. Locked by the limiters' mutex,
 * since any thread may decide by name on a handle it holds. */
#include "features/limiter_cache.h"

#include <stddef.h>
#include <string.h>

/* A table of n entries of size bytes, each beginning with its
 * sl_cache_entry and holding its key at key_at: the entry of the key, or
 * NULL. One search for both tables (rules by name, overrides by K). */
static sl_cache_entry *entry_find(void *table, size_t n, size_t size,
                                  size_t key_at, const void *key, size_t kl)
{
    char *at = table;
    size_t i;

    for (i = 0; table != NULL && i < n; i++, at += size) {
        sl_cache_entry *e = (sl_cache_entry *)(void *)at;

        if (e->used && e->key_len == kl && memcmp(at + key_at, key, kl) == 0)
            return e;
    }
    return NULL;
}

/* The entry of table (as for entry_find) to keep the key in: its own,
 * else a free one, else the least used; marked used, read now, and
 * holding the key. NULL when table is NULL (it could not be made). */
static sl_cache_entry *entry_take(sl_limiters *l, void *table, size_t n,
                                  size_t size, size_t key_at, const void *key,
                                  size_t kl)
{
    sl_cache_entry *c = entry_find(table, n, size, key_at, key, kl);
    char *at = table;
    size_t i;

    if (table == NULL)
        return NULL;
    for (i = 0; c == NULL && i < n; i++, at += size) {
        sl_cache_entry *e = (sl_cache_entry *)(void *)at;

        if (!e->used)
            c = e;
    }
    if (c == NULL) {
        c = table;
        for (i = 1, at = (char *)table + size; i < n; i++, at += size) {
            sl_cache_entry *e = (sl_cache_entry *)(void *)at;

            if (e->last_use < c->last_use)
                c = e;
        }
    }
    c->used = true;
    c->key_len = kl;
    memcpy((char *)c + key_at, key, kl);
    c->read_at = sl_mono_ms();
    c->last_use = ++l->uses;
    return c;
}

/* Whether c was read within age ms (< 0: never); if so it counts as used
 * now. */
static bool entry_fresh(sl_limiters *l, sl_cache_entry *c, int64_t age)
{
    if (c == NULL || age < 0 || sl_mono_ms() - c->read_at >= age)
        return false;
    c->last_use = ++l->uses;
    return true;
}

/* The cached override of K (the name's K and the client), or NULL. */
static sl_cached_over *over_find(sl_limiters *l, const char *key, size_t kl)
{
    return (sl_cached_over *)entry_find(l->over, SL_OVER_CACHE,
                                        sizeof(sl_cached_over),
                                        offsetof(sl_cached_over, key), key, kl);
}

/* Keeps ov for K (ov NULL: forgets it); the least used goes. */
void sl_lcache_over_put(sl_limiters *l, size_t name_len, const char *key,
                        size_t kl, const sluice_limiter_override *ov)
{
    sl_cached_over *o;

    pthread_mutex_lock(&l->mu);
    if (ov == NULL) {
        if ((o = over_find(l, key, kl)) != NULL)
            o->e.used = false;
    } else {
        if (l->over == NULL)
            l->over = sl_calloc(SL_OVER_CACHE, sizeof(*l->over));
        o = (sl_cached_over *)entry_take(
            l, l->over, SL_OVER_CACHE, sizeof(*l->over),
            offsetof(sl_cached_over, key), key, kl);
        if (o != NULL) {
            o->name_len = name_len;
            o->ov = *ov;
        }
    }
    pthread_mutex_unlock(&l->mu);
}

/* Forgets every override cached for name (its K is kl bytes). */
void sl_lcache_over_forget(sl_limiters *l, const char *key, size_t kl,
                           size_t name_len)
{
    size_t i;

    pthread_mutex_lock(&l->mu);
    for (i = 0; l->over != NULL && i < SL_OVER_CACHE; i++)
        if (l->over[i].e.used && l->over[i].name_len == name_len &&
            l->over[i].e.key_len >= kl && memcmp(l->over[i].key, key, kl) == 0)
            l->over[i].e.used = false;
    pthread_mutex_unlock(&l->mu);
}

/* The override of K if read within age ms (true). */
bool sl_lcache_over(sl_limiters *l, const char *key, size_t kl, int64_t age,
                    sluice_limiter_override *ov)
{
    sl_cached_over *c;
    bool fresh;

    pthread_mutex_lock(&l->mu);
    c = over_find(l, key, kl);
    fresh = entry_fresh(l, c != NULL ? &c->e : NULL, age);
    if (fresh)
        *ov = c->ov;
    pthread_mutex_unlock(&l->mu);
    return fresh;
}

static sl_cached_rules *cache_find(sl_limiters *l, const void *name,
                                   size_t name_len)
{
    return (sl_cached_rules *)entry_find(
        l->slot, SL_LIMITER_CACHE, sizeof(sl_cached_rules),
        offsetof(sl_cached_rules, name), name, name_len);
}

/* Keeps rs for name (rs NULL: forgets it); the least used goes. */
void sl_lcache_put(sl_limiters *l, const void *name, size_t name_len,
                   const sluice_ruleset *rs, int64_t keepalive, int64_t overs)
{
    sl_cached_rules *c;

    pthread_mutex_lock(&l->mu);
    /* Kept even when never used for decisions (rules_cache_ms=0): the
     * keep-alive it read is what backends that cannot read it first send
     * to start it again. */
    if (rs == NULL) {
        if ((c = cache_find(l, name, name_len)) != NULL)
            c->e.used = false;
    } else {
        if (l->slot == NULL)
            l->slot = sl_calloc(SL_LIMITER_CACHE, sizeof(*l->slot));
        c = (sl_cached_rules *)entry_take(
            l, l->slot, SL_LIMITER_CACHE, sizeof(*l->slot),
            offsetof(sl_cached_rules, name), name, name_len);
        if (c != NULL) {
            c->rules = *rs;
            c->keepalive_ms = keepalive;
            c->overs = overs;
        }
    }
    pthread_mutex_unlock(&l->mu);
}

/* The handle stored an override for name: what it read of their count
 * no longer holds. */
void sl_lcache_overs_changed(sl_limiters *l, const void *name, size_t name_len)
{
    sl_cached_rules *c;

    pthread_mutex_lock(&l->mu);
    if ((c = cache_find(l, name, name_len)) != NULL)
        c->overs = -1;
    pthread_mutex_unlock(&l->mu);
}

/* The rules of name if the handle read them within age ms (true); else
 * *known is the keep-alive it read last (-1: none), which backends that
 * cannot read it first send with their read. */
bool sl_lcache_rules(sl_limiters *l, const void *name, size_t name_len,
                     int64_t age, sluice_ruleset *rs, int64_t *known,
                     int64_t *overs)
{
    sl_cached_rules *c;
    bool fresh;

    pthread_mutex_lock(&l->mu);
    c = cache_find(l, name, name_len);
    *known = c != NULL ? c->keepalive_ms : -1;
    fresh = entry_fresh(l, c != NULL ? &c->e : NULL, age);
    if (fresh) {
        *rs = c->rules;
        *overs = c->overs;
    }
    pthread_mutex_unlock(&l->mu);
    return fresh;
}
