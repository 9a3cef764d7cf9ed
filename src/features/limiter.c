/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.c - named limiters: rules stored in the backend under
 * "<prefix>lim:{K}:rules", and each client's state under "<prefix>lim:{K}"
 * with K = "<name length>:<name><client id>", so that neither meets a
 * plain key, the rules of a name sit in one slot, and a million clients
 * spread over every slot (docs/DESIGN.md, "Named limiters"). A handle
 * keeps what it read for rules_cache_ms; a decision by name is then one
 * round trip, and a change made elsewhere reaches it within that time. */
#include "features/limiter.h"

#include "call.h"
#include "features/registry.h"
#include "features/stored.h"
#include "net/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEEP SL_MAX_PERIOD_MS

sluice_status sl_limiter_enter(sluice *sl, const void *name, size_t name_len,
                               const void *client, size_t client_len,
                               char **err)
{
    if (sl == NULL)
        return SLUICE_EINVAL;
    *err = sl_share_err(sl);
    return sl_names_check(name, name_len, client, client_len, *err);
}

/* What a read of the rules asks of the overrides: the override of
 * client (client_len 0: none asked), read into v. */
typedef struct over_ask {
    const char *client;
    size_t client_len;
    sl_value v;
} over_ask;

sluice_status sl_limiter_stored_op(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, sl_stored *so, char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];

    return sl_stored_op(
        sl, op, key, sl_names_compose(key, name, name_len, NULL, 0), so, err);
}

/* One rules op on name: its result in *v (oa: the override asked too, or
 * NULL). */
static sluice_status rules_op(sluice *sl, sl_op op, const void *name,
                              size_t name_len, const char *value,
                              size_t value_len, int64_t ttl_ms, bool if_absent,
                              sl_value *v, over_ask *oa, char *err)
{
    sl_stored so = {value, value_len, if_absent, ttl_ms, v,
                    NULL,  0,         NULL,      NULL};

    if (oa != NULL && oa->client_len > 0) {
        so.client = oa->client;
        so.client_len = oa->client_len;
        so.over = &oa->v;
    }
    return sl_limiter_stored_op(sl, op, name, name_len, &so, err);
}

/* A read of name's rules ended (names.h, sl_names_read_ended). */
static bool read_ended(sluice *sl, const void *name, size_t name_len,
                       sluice_status *st, const sl_value *v, bool last,
                       int64_t *sent, sluice_ruleset *rs, int64_t *keepalive,
                       const over_ask *oa, sluice_limiter_override *ov,
                       char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];
    size_t cl = oa != NULL ? oa->client_len : 0;
    size_t kl = sl_names_compose(key, name, name_len,
                                 oa != NULL ? oa->client : NULL, cl);
    sluice_limiter_override none;

    return sl_names_read_ended(sl_handle_names(sl), name, name_len, key, kl, cl,
                               st, v, oa != NULL ? &oa->v : NULL, last, sent,
                               rs, keepalive, ov != NULL ? ov : &none, err);
}

/* Reads the rules of name, which starts their keep-alive again. known:
 * the keep-alive last read (-1: none read yet), which the plain backends
 * send with their GET since they cannot read it first. Where the value
 * says otherwise (the first read of a handle, or a set in between), they
 * are sent the keep-alive read, or told to take the TTL away, and read
 * once more: one round trip more, on those backends only. */
static sluice_status read_rules(sluice *sl, const void *name, size_t name_len,
                                int64_t known, sluice_ruleset *rs,
                                int64_t *keepalive, over_ask *oa,
                                sluice_limiter_override *ov, char *err)
{
    sl_value v;
    sluice_status st;
    int64_t sent = known > 0 ? known : 0;
    bool last = false;

    for (;;) {
        st = rules_op(sl, SL_OP_RULES_GET, name, name_len, NULL, 0, sent, false,
                      &v, oa, err);
        if (!read_ended(sl, name, name_len, &st, &v, last, &sent, rs, keepalive,
                        oa, ov, err))
            return st;
        last = true;
    }
}

/* The rules of name: cached if read within rules_cache_ms (unless fresh
 * is asked for), else read. */
sluice_status sl_limiter_rules_of(sluice *sl, const void *name, size_t name_len,
                                  bool fresh, sluice_ruleset *rs,
                                  int64_t *keepalive, char *err)
{
    int64_t known, overs;

    if (sl_lcache_rules(sl_handle_names(sl), name, name_len,
                        sl_handle_names(sl)->cache_ms, rs, &known, &overs) &&
        !fresh) {
        *keepalive = known;
        return SLUICE_OK;
    }
    return read_rules(sl, name, name_len, known, rs, keepalive, NULL, NULL,
                      err);
}

sluice_status sl_limiter_over_of(sluice *sl, const void *name, size_t name_len,
                                 const void *client, size_t client_len,
                                 sluice_limiter_override *ov, char *err)
{
    sluice_ruleset rs;
    int64_t known, ka, overs;
    over_ask *oa;
    sluice_status st;

    (void)sl_lcache_rules(sl_handle_names(sl), name, name_len, -1, &rs, &known,
                          &overs);
    if ((oa = sl_malloc(sizeof(*oa))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
        return SLUICE_ENOMEM;
    }
    oa->client = client;
    oa->client_len = client_len;
    st = read_rules(sl, name, name_len, known, &rs, &ka, oa, ov, err);
    sl_free(oa);
    return st;
}

static sluice_status store(sluice *sl, const void *name, size_t name_len,
                           const sluice_ruleset *rules, int64_t keepalive,
                           bool only_if_absent, sluice_ruleset *stored)
{
    char *err, value[SL_VALUE_MAX + 1];
    sluice_ruleset got;
    int64_t ka;
    sl_value v;
    sluice_status st;
    size_t len;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    if ((st = sluice_ruleset_check(rules, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if (keepalive < 0 || keepalive > MAX_KEEP) {
        sl_errf(err, SL_ERR_LEN,
                "limiter: keepalive_ms %lld: expected 0 (none) to %lld",
                (long long)keepalive, (long long)MAX_KEEP);
        return SLUICE_EINVAL;
    }
    if ((st = sl_registry_before(sl, name, name_len, keepalive, err)) !=
        SLUICE_OK)
        return st;
    len = sl_limiter_encode(value, rules, keepalive);
    st = rules_op(sl, SL_OP_RULES_PUT, name, name_len, value, len, keepalive,
                  only_if_absent, &v, NULL, err);
    if (st != SLUICE_OK)
        return st;
    if (!v.found) /* deleted or expired at once: what was asked is gone */
        return sl_names_none(name, name_len, err);
    if ((st = sl_limiter_decode(&v, name, name_len, &got, &ka, err)) !=
            SLUICE_OK ||
        (st = sl_registry_after(sl, name, name_len, keepalive, ka,
                                !only_if_absent, err)) != SLUICE_OK)
        return st;
    /* A define that found rules stored reads them, which starts their
     * keep-alive again; the plain backends are sent it with a read. */
    if (!v.kept && ka > 0 && (v.len != len || memcmp(v.buf, value, len) != 0))
        return read_rules(sl, name, name_len, ka, stored ? stored : &got, &ka,
                          NULL, NULL, err);
    sl_lcache_put(sl_handle_names(sl), name, name_len, &got, ka, v.overs);
    if (stored != NULL)
        *stored = got;
    return SLUICE_OK;
}

sluice_status sluice_limiter_define(sluice *sl, const void *name,
                                    size_t name_len,
                                    const sluice_ruleset *rules,
                                    int64_t keepalive_ms,
                                    sluice_ruleset *stored)
{
    return store(sl, name, name_len, rules, keepalive_ms, true, stored);
}

sluice_status sluice_limiter_set(sluice *sl, const void *name, size_t name_len,
                                 const sluice_ruleset *rules,
                                 int64_t keepalive_ms)
{
    return store(sl, name, name_len, rules, keepalive_ms, false, NULL);
}

sluice_status sluice_limiter_get(sluice *sl, const void *name, size_t name_len,
                                 sluice_ruleset *rules, int64_t *keepalive_ms)
{
    char *err;
    sluice_ruleset got;
    int64_t ka;
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    if (rules == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: rules is NULL");
        return SLUICE_EINVAL;
    }
    if ((st = sl_limiter_rules_of(sl, name, name_len, true, &got, &ka, err)) !=
        SLUICE_OK)
        return st;
    *rules = got;
    if (keepalive_ms != NULL)
        *keepalive_ms = ka;
    return SLUICE_OK;
}

sluice_status sluice_limiter_delete(sluice *sl, const void *name,
                                    size_t name_len)
{
    char *err;
    sl_value v;
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    st = rules_op(sl, SL_OP_RULES_DEL, name, name_len, NULL, 0, 0, false, &v,
                  NULL, err);
    /* Unlisted after: also a name whose rules were gone already (its
     * keep-alive ran out), so that a delete clears what a list shows. */
    if (st == SLUICE_OK)
        st = sl_registry_del(sl, name, name_len, err);
    if (st != SLUICE_OK)
        return st;
    sl_lcache_put(sl_handle_names(sl), name, name_len, NULL, 0, 0);
    {
        char key[32 + SL_LIMITER_KEY_MAX];

        sl_lcache_over_forget(sl_handle_names(sl), key,
                              sl_names_compose(key, name, name_len, NULL, 0),
                              name_len);
    }
    return v.found ? SLUICE_OK : sl_names_none(name, name_len, err);
}

sluice_status sluice_limiter_acquire(sluice *sl, const void *name,
                                     size_t name_len, const void *client,
                                     size_t client_len, int64_t cost,
                                     sluice_result *out)
{
    return sl_call_by_name(sl, SL_OP_ACQUIRE, name, name_len, client,
                           client_len, cost, out);
}

sluice_status sluice_limiter_peek(sluice *sl, const void *name, size_t name_len,
                                  const void *client, size_t client_len,
                                  int64_t cost, sluice_result *out)
{
    return sl_call_by_name(sl, SL_OP_PEEK, name, name_len, client, client_len,
                           cost, out);
}

sluice_status sluice_limiter_reset(sluice *sl, const void *name,
                                   size_t name_len, const void *client,
                                   size_t client_len)
{
    return sl_call_by_name(sl, SL_OP_RESET, name, name_len, client, client_len,
                           1, NULL);
}

sluice_status sluice_limiter_acquire_async(sluice *sl, const void *name,
                                           size_t name_len, const void *client,
                                           size_t client_len, int64_t cost,
                                           sluice_done_fn done, void *arg)
{
    return sl_call_by_name_async(sl, SL_OP_ACQUIRE, name, name_len, client,
                                 client_len, cost, done, arg);
}

sluice_status sluice_limiter_peek_async(sluice *sl, const void *name,
                                        size_t name_len, const void *client,
                                        size_t client_len, int64_t cost,
                                        sluice_done_fn done, void *arg)
{
    return sl_call_by_name_async(sl, SL_OP_PEEK, name, name_len, client,
                                 client_len, cost, done, arg);
}

sluice_status sluice_limiter_reset_async(sluice *sl, const void *name,
                                         size_t name_len, const void *client,
                                         size_t client_len, sluice_done_fn done,
                                         void *arg)
{
    return sl_call_by_name_async(sl, SL_OP_RESET, name, name_len, client,
                                 client_len, 1, done, arg);
}
