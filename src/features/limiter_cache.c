/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter_cache.c - a handle's cache of what it read of named limiters:
 * the rules of a name (SL_LIMITER_CACHE names) and the override of a
 * client (SL_OVER_CACHE clients), each with when it was read; the least
 * used entry goes when the table is full. Locked by the limiters' mutex,
 * since any thread may decide by name on a handle it holds. */
#include "features/limiter_cache.h"

#include <string.h>

/* The cached override of K (the name's K and the client), or NULL. */
static sl_cached_over *over_find(sl_limiters *l, const char *key, size_t kl)
{
    size_t i;

    if (l->over == NULL)
        return NULL;
    for (i = 0; i < SL_OVER_CACHE; i++)
        if (l->over[i].used && l->over[i].key_len == kl &&
            memcmp(l->over[i].key, key, kl) == 0)
            return &l->over[i];
    return NULL;
}

/* Keeps ov for K (ov NULL: forgets it); the least used goes. */
void sl_lcache_over_put(sl_limiters *l, size_t name_len, const char *key,
                        size_t kl, const sluice_limiter_override *ov)
{
    sl_cached_over *c;
    size_t i;

    pthread_mutex_lock(&l->mu);
    c = over_find(l, key, kl);
    if (ov == NULL) {
        if (c != NULL)
            c->used = false;
        pthread_mutex_unlock(&l->mu);
        return;
    }
    if (c == NULL && l->over == NULL)
        l->over = sl_calloc(SL_OVER_CACHE, sizeof(*l->over));
    if (c == NULL && l->over != NULL) {
        c = &l->over[0];
        for (i = 0; i < SL_OVER_CACHE && c->used; i++)
            if (!l->over[i].used || l->over[i].last_use < c->last_use)
                c = &l->over[i];
    }
    if (c != NULL) {
        c->used = true;
        c->name_len = name_len;
        c->key_len = kl;
        memcpy(c->key, key, kl);
        c->ov = *ov;
        c->read_at = sl_mono_ms();
        c->last_use = ++l->uses;
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
        if (l->over[i].used && l->over[i].name_len == name_len &&
            l->over[i].key_len >= kl && memcmp(l->over[i].key, key, kl) == 0)
            l->over[i].used = false;
    pthread_mutex_unlock(&l->mu);
}

/* The override of K if read within rules_cache_ms (true). */
bool sl_lcache_over(sl_limiters *l, const char *key, size_t kl,
                    sluice_limiter_override *ov)
{
    sl_cached_over *c;
    bool fresh;

    pthread_mutex_lock(&l->mu);
    c = over_find(l, key, kl);
    fresh = c != NULL && l->cache_ms >= 0 &&
            sl_mono_ms() - c->read_at < l->cache_ms;
    if (fresh) {
        *ov = c->ov;
        c->last_use = ++l->uses;
    }
    pthread_mutex_unlock(&l->mu);
    return fresh;
}

static sl_cached_rules *cache_find(sl_limiters *l, const void *name,
                                   size_t name_len)
{
    size_t i;

    if (l->slot == NULL)
        return NULL;
    for (i = 0; i < SL_LIMITER_CACHE; i++)
        if (l->slot[i].used && l->slot[i].name_len == name_len &&
            memcmp(l->slot[i].name, name, name_len) == 0)
            return &l->slot[i];
    return NULL;
}

/* Keeps rs for name (rs NULL: forgets it); the least used goes. */
void sl_lcache_put(sl_limiters *l, const void *name, size_t name_len,
                   const sluice_ruleset *rs, int64_t keepalive, int64_t overs)
{
    sl_cached_rules *c;
    size_t i;

    pthread_mutex_lock(&l->mu);
    c = cache_find(l, name, name_len);
    /* Kept even when never used for decisions (rules_cache_ms=0): the
     * keep-alive it read is what backends that cannot read it first send
     * to start it again. */
    if (rs == NULL) {
        if (c != NULL)
            c->used = false;
        pthread_mutex_unlock(&l->mu);
        return;
    }
    if (c == NULL && l->slot == NULL)
        l->slot = sl_calloc(SL_LIMITER_CACHE, sizeof(*l->slot));
    if (c == NULL && l->slot != NULL) {
        c = &l->slot[0];
        for (i = 0; i < SL_LIMITER_CACHE && c->used; i++)
            if (!l->slot[i].used || l->slot[i].last_use < c->last_use)
                c = &l->slot[i];
    }
    if (c != NULL) {
        c->used = true;
        c->name_len = name_len;
        memcpy(c->name, name, name_len);
        c->rules = *rs;
        c->keepalive_ms = keepalive;
        c->overs = overs;
        c->read_at = sl_mono_ms();
        c->last_use = ++l->uses;
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

/* The rules of name if the handle read them within rules_cache_ms (true);
 * else *known is the keep-alive it read last (-1: none), which backends
 * that cannot read it first send with their read. */
bool sl_lcache_rules(sl_limiters *l, const void *name, size_t name_len,
                     sluice_ruleset *rs, int64_t *known, int64_t *overs)
{
    sl_cached_rules *c;
    bool fresh;

    pthread_mutex_lock(&l->mu);
    c = cache_find(l, name, name_len);
    fresh = c != NULL && l->cache_ms >= 0 &&
            sl_mono_ms() - c->read_at < l->cache_ms;
    *known = c != NULL ? c->keepalive_ms : -1;
    if (fresh) {
        *rs = c->rules;
        *overs = c->overs;
        c->last_use = ++l->uses;
    }
    pthread_mutex_unlock(&l->mu);
    return fresh;
}
