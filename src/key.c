/* SPDX-License-Identifier: BSD-3-Clause */
/* key.c - the Redis key layout "<prefix>{K}:<algo>:<P>[:<off>]", and the
 * checks of a request's key, cost and time. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

size_t sl_key_max_len(const char *prefix, size_t key_len)
{
    /* "{" K "}:" algo ":" P ":" off: 7 + 11 + 21 + 21 bytes at most. */
    return strlen(prefix) + key_len + 64;
}

size_t sl_key_build(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len, const sluice_rule *r)
{
    size_t plen = strlen(prefix), o;
    int n;

    if (dst_len < plen + key_len + 3)
        return 0;
    memcpy(dst, prefix, plen);
    o = plen;
    dst[o++] = '{';
    memcpy(dst + o, key, key_len);
    o += key_len;
    dst[o++] = '}';
    if (r->algorithm == SLUICE_FIXED || r->algorithm == SLUICE_SLIDING)
        n = snprintf(dst + o, dst_len - o, ":%s:%lld:%lld",
                     sl_algorithm_name(r->algorithm), (long long)r->period_ms,
                     (long long)r->tz_offset_ms);
    else
        n = snprintf(dst + o, dst_len - o, ":%s:%lld",
                     sl_algorithm_name(r->algorithm), (long long)r->period_ms);
    if (n < 0 || (size_t)n >= dst_len - o)
        return 0;
    return o + (size_t)n;
}

sluice_status sl_key_check(const void *key, size_t key_len, char *err,
                           size_t err_len)
{
    char q[300];

    if (key == NULL && key_len > 0) {
        sl_errf(err, err_len, "key: NULL pointer with length %zu", key_len);
        return SLUICE_EINVAL;
    }
    if (key_len == 0) {
        sl_errf(err, err_len,
                "key: empty key; give every limited subject a "
                "non-empty key");
        return SLUICE_EKEY;
    }
    if (key_len > SLUICE_MAX_KEY_LEN) {
        sl_quote(q, sizeof(q), key, key_len);
        sl_errf(err, err_len,
                "key \"%s\": %zu bytes, above the cap of 1024; "
                "hash long identifiers first",
                q, key_len);
        return SLUICE_EKEY;
    }
    return SLUICE_OK;
}

sluice_status sl_cost_check(int64_t cost, char *err, size_t err_len)
{
    if (cost < 1 || cost > SL_MAX_LIMIT) {
        sl_errf(err, err_len, "cost %lld is out of range 1..1000000000",
                (long long)cost);
        return SLUICE_ECOST;
    }
    return SLUICE_OK;
}

sluice_status sl_time_check(int64_t t, char *err, size_t err_len)
{
    if (t < 0 || t > SL_MAX_TIME_MS) {
        sl_errf(err, err_len,
                "time %lld ms is outside 0..2^53-1; check the "
                "clock callback",
                (long long)t);
        return SLUICE_ETIME;
    }
    return SLUICE_OK;
}
