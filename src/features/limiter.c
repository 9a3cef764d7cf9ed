/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.c - named limiters: rules stored in the backend under
 * "<prefix>lim:{K}:rules", and each client's state under "<prefix>lim:{K}"
 * with K = "<name length>:<name><client id>", so that neither meets a
 * plain key, the rules of a name sit in one slot, and a million clients
 * spread over every slot (docs/DESIGN.md, "Named limiters"). A handle
 * keeps what it read for rules_cache_ms; a decision by name is then one
 * round trip, and a change made elsewhere reaches it within that time.
 * The admin calls are admin.c's machine, blocking or on the loop;
 * decisions by name run through the pipeline (call.h). */
#include "features/admin.h"

#include <string.h>

/* define, set, get and delete: the admin machine (admin.c), blocking. */
static sluice_status store(sluice *sl, const void *name, size_t name_len,
                           const sluice_ruleset *rules, int64_t keepalive,
                           bool only_if_absent, sluice_ruleset *stored)
{
    sl_admin_in in = {.op = only_if_absent ? SL_ADMIN_DEFINE : SL_ADMIN_SET,
                      .name = name,
                      .name_len = name_len,
                      .rules = rules,
                      .keepalive_ms = keepalive};
    sluice_limiter_info info;
    sluice_status st = sl_admin_call(sl, &in, &info);

    if (st == SLUICE_OK && stored != NULL)
        *stored = info.rules;
    return st;
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
    sl_admin_in in = {.op = SL_ADMIN_GET, .name = name, .name_len = name_len};
    sluice_limiter_info info;
    sluice_status st;

    if (sl != NULL && rules == NULL) {
        sl_errf(sl_share_err(sl), SL_ERR_LEN, "limiter: rules is NULL");
        return SLUICE_EINVAL;
    }
    if ((st = sl_admin_call(sl, &in, &info)) != SLUICE_OK)
        return st;
    *rules = info.rules;
    if (keepalive_ms != NULL)
        *keepalive_ms = info.keepalive_ms;
    return SLUICE_OK;
}

sluice_status sluice_limiter_delete(sluice *sl, const void *name,
                                    size_t name_len)
{
    sl_admin_in in = {
        .op = SL_ADMIN_DELETE, .name = name, .name_len = name_len};

    return sl_admin_call(sl, &in, NULL);
}

/* The same on the loop. */
sluice_status sluice_limiter_define_async(sluice *sl, const void *name,
                                          size_t name_len,
                                          const sluice_ruleset *rules,
                                          int64_t keepalive_ms,
                                          sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_DEFINE,
                      .name = name,
                      .name_len = name_len,
                      .rules = rules,
                      .keepalive_ms = keepalive_ms};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status sluice_limiter_set_async(sluice *sl, const void *name,
                                       size_t name_len,
                                       const sluice_ruleset *rules,
                                       int64_t keepalive_ms,
                                       sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_SET,
                      .name = name,
                      .name_len = name_len,
                      .rules = rules,
                      .keepalive_ms = keepalive_ms};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status sluice_limiter_get_async(sluice *sl, const void *name,
                                       size_t name_len, sluice_limiter_fn done,
                                       void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_GET, .name = name, .name_len = name_len};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status sluice_limiter_delete_async(sluice *sl, const void *name,
                                          size_t name_len,
                                          sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {
        .op = SL_ADMIN_DELETE, .name = name, .name_len = name_len};

    return sl_admin_call_async(sl, &in, done, arg);
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
