/* SPDX-License-Identifier: BSD-3-Clause */
/* stored.c - one blocking op on a named limiter's stored values (rules,
 * overrides) under the handle's "<prefix>lim:" (stored.h). */
#include "features/stored.h"

#include <string.h>

sluice_status sl_stored_op(sluice *sl, sl_op op, const char *key, size_t kl,
                           sl_stored *so, char *err)
{
    sl_request r;
    sluice_status st;

    if ((st = sl_call_blocking(sl, err)) != SLUICE_OK ||
        (st = sl_call_prepare(sl, op, key, kl, NULL, 0, &r, err)) != SLUICE_OK)
        return st;
    r.prefix = sl_handle_names(sl)->prefix;
    r.stored = *so;
    memset(so->read, 0, sizeof(*so->read));
    if (so->over != NULL)
        memset(so->over, 0, sizeof(*so->over));
    return sl_call_run(sl, &r, NULL, err);
}
