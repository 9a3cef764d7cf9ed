/* SPDX-License-Identifier: BSD-3-Clause */
/* names.c - a decision by name before it is a decision on a key: K, the
 * rules and override read (cached, or stale when a read fails), and a
 * read's answer decoded and kept (docs/SEMANTICS.md, "Named limiters"). */
#include "features/names.h"

#include <stdio.h>
#include <string.h>

bool sl_names_init(sl_limiters *l, const sl_config *cfg)
{
    memset(l, 0, sizeof(*l));
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return false;
    snprintf(l->prefix, sizeof(l->prefix), "%slim:", cfg->prefix);
    /* Their defaults (1000, an hour) set by the options table. */
    l->cache_ms = cfg->rules_cache_ms;
    l->stale_ms = cfg->rules_stale_ms;
    return true;
}

void sl_names_free(sl_limiters *l)
{
    pthread_mutex_destroy(&l->mu);
    sl_free(l->slot);
    sl_free(l->over);
}

size_t sl_names_compose(char *dst, const void *name, size_t name_len,
                        const void *client, size_t client_len)
{
    size_t n = (size_t)snprintf(dst, 24, "%zu:", name_len);

    memcpy(dst + n, name, name_len);
    if (client_len > 0)
        memcpy(dst + n + name_len, client, client_len);
    return n + name_len + client_len;
}

sluice_status sl_names_check(const void *name, size_t name_len,
                             const void *client, size_t client_len, char *err)
{
    if (name == NULL || name_len == 0) {
        sl_errf(err, SL_ERR_LEN, "limiter: the name is empty");
        return SLUICE_EKEY;
    }
    if (client == NULL && client_len > 0) {
        sl_errf(err, SL_ERR_LEN, "limiter: client is NULL, client_len %zu",
                client_len);
        return SLUICE_EINVAL;
    }
    if (name_len + client_len > SL_LIMITER_KEY_MAX) {
        sl_errf(err, SL_ERR_LEN,
                "limiter: the name (%zu bytes) and the client id (%zu bytes) "
                "take more than %d bytes together",
                name_len, client_len, SL_LIMITER_KEY_MAX);
        return SLUICE_EKEY;
    }
    return SLUICE_OK;
}

sluice_status sl_names_none(const void *name, size_t name_len, char *err)
{
    char q[300];

    sl_quote(q, sizeof(q), name, name_len);
    sl_errf(err, SL_ERR_LEN,
            "limiter \"%s\" has no rules stored: it was never defined, was "
            "deleted, or its keep-alive ran out unused",
            q);
    return SLUICE_ENOLIMITER;
}

bool sl_names_cached(sl_limiters *l, const void *name, size_t name_len,
                     const char *key, size_t kl, size_t client_len, int64_t age,
                     sluice_ruleset *rs, int64_t *known,
                     sluice_limiter_override *ov)
{
    int64_t overs = -1;

    memset(ov, 0, sizeof(*ov));
    /* The rules, and the client's override, or none for any client. */
    return sl_lcache_rules(l, name, name_len, age, rs, known, &overs) &&
           (client_len == 0 || overs == 0 ||
            sl_lcache_over(l, key, kl, age, ov));
}

bool sl_names_read_ended(sl_limiters *l, const void *name, size_t name_len,
                         const char *key, size_t kl, size_t client_len,
                         sluice_status *st, const sl_value *v,
                         const sl_value *over, bool last, bool keep,
                         int64_t *sent, sluice_ruleset *rs, int64_t *keepalive,
                         sluice_limiter_override *ov, char *err)
{
    size_t nkl = kl - client_len; /* K without the client */

    memset(ov, 0, sizeof(*ov));
    if (*st == SLUICE_OK && !v->found) {
        sl_lcache_put(l, name, name_len, NULL, 0, 0);
        sl_lcache_over_forget(l, key, nkl, name_len);
        *st = sl_names_none(name, name_len, err);
    } else if (*st == SLUICE_OK) {
        *st = sl_limiter_decode(v, name, name_len, rs, keepalive, err);
    }
    if (*st == SLUICE_OK && client_len > 0)
        *st = sl_override_decode(over, name, name_len, ov, err);
    if (*st != SLUICE_OK)
        return false;
    if (!v->kept && !last && *keepalive != *sent) {
        *sent = *keepalive > 0 ? *keepalive : -1;
        return true;
    }
    if (!keep)
        return false;
    sl_lcache_put(l, name, name_len, rs, *keepalive, v->overs);
    if (client_len > 0)
        sl_lcache_over_put(l, name_len, key, kl, ov);
    return false;
}
