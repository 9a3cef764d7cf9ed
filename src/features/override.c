/* SPDX-License-Identifier: BSD-3-Clause */
/* override.c - overrides of named limiters: a client's own rules, an
 * allow-list or a deny-list entry, stored in the hash beside the limiter's
 * rules ("<prefix>lim:{K}:over"), and the calls that set, read, delete
 * and list them, blocking or on the loop (admin.c's machine); a decision
 * by name reads a client's override with the rules (pipeline.c). */
#include "features/admin.h"

#include <string.h>

sluice_status sluice_limiter_override_set(sluice *sl, const void *name,
                                          size_t name_len, const void *client,
                                          size_t client_len,
                                          const sluice_limiter_override *ov)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_SET,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len,
                      .ov = ov};

    return sl_admin_call(sl, &in, NULL);
}

sluice_status sluice_limiter_override_get(sluice *sl, const void *name,
                                          size_t name_len, const void *client,
                                          size_t client_len,
                                          sluice_limiter_override *ov)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_GET,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len};
    sluice_limiter_info info;
    sluice_status st;

    if (sl != NULL && ov == NULL) {
        sl_errf(sl_share_err(sl), SL_ERR_LEN, "limiter: ov is NULL");
        return SLUICE_EINVAL;
    }
    if ((st = sl_admin_call(sl, &in, &info)) == SLUICE_OK)
        *ov = info.override;
    return st;
}

sluice_status sluice_limiter_override_delete(sluice *sl, const void *name,
                                             size_t name_len,
                                             const void *client,
                                             size_t client_len, bool *found)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_DEL,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len};
    sluice_limiter_info info;
    sluice_status st = sl_admin_call(sl, &in, &info);

    if (st == SLUICE_OK && found != NULL)
        *found = info.found;
    return st;
}

sluice_status sluice_limiter_override_list(sluice *sl, const void *name,
                                           size_t name_len,
                                           sluice_override_fn fn, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_LIST,
                      .name = name,
                      .name_len = name_len,
                      .each = fn,
                      .each_arg = arg};

    return sl_admin_call(sl, &in, NULL);
}

/* The same on the loop. */
sluice_status
sluice_limiter_override_set_async(sluice *sl, const void *name, size_t name_len,
                                  const void *client, size_t client_len,
                                  const sluice_limiter_override *ov,
                                  sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_SET,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len,
                      .ov = ov};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status
sluice_limiter_override_get_async(sluice *sl, const void *name, size_t name_len,
                                  const void *client, size_t client_len,
                                  sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_GET,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status sluice_limiter_override_delete_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, sluice_limiter_fn done, void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_DEL,
                      .name = name,
                      .name_len = name_len,
                      .client = client,
                      .client_len = client_len};

    return sl_admin_call_async(sl, &in, done, arg);
}

sluice_status sluice_limiter_override_list_async(sluice *sl, const void *name,
                                                 size_t name_len,
                                                 sluice_override_fn each,
                                                 sluice_limiter_fn done,
                                                 void *arg)
{
    sl_admin_in in = {.op = SL_ADMIN_OVER_LIST,
                      .name = name,
                      .name_len = name_len,
                      .each = each,
                      .each_arg = arg};

    return sl_admin_call_async(sl, &in, done, arg);
}
