/* SPDX-License-Identifier: BSD-3-Clause */
/* store.c - where a window is, and how long a charged key lives: the
 * storage rules every backend shares (store.h has the descriptor). */
#include "store.h"

#include "internal.h"

void sl_window_locate(const sluice_rule *r, int64_t t, int64_t *k,
                      int64_t *to_end)
{
    int64_t p = r->period_ms;
    /* t + off stays far from int64 limits: t < 2^53, |off| <= 14h. */
    int64_t shifted = t + r->tz_offset_ms;
    int64_t idx = sl_fdiv(shifted, p);

    *k = idx;
    *to_end = (idx + 1) * p - shifted;
}

int64_t sl_store_window_ttl(const sluice_rule *r, int64_t to_end,
                            int64_t floor_ms)
{
    /* Every charge of a window asks the same TTL: its end is fixed. */
    return sl_max64(to_end + sl_store_of(r->algorithm).windows * r->period_ms,
                    floor_ms);
}

int64_t sl_store_ttl(const sluice_rule *r, int64_t t, int64_t reset_ms,
                     int64_t floor_ms)
{
    int64_t k, to_end;

    switch (sl_store_of(r->algorithm).ttl) {
    case SL_TTL_WINDOW_END:
        sl_window_locate(r, t, &k, &to_end);
        return sl_store_window_ttl(r, to_end, floor_ms);
    case SL_TTL_RESET:
        break;
    }
    /* Its reset already counts what is still live (for a log, until its
     * newest entry leaves), plus a grace of one period. */
    return sl_max64(reset_ms + r->period_ms, floor_ms);
}
