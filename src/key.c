/* SPDX-License-Identifier: BSD-3-Clause */
/* key.c - the Redis key layout "<prefix>{K}:<algo>:<P>[:<off>]", and the
 * checks of a request's key, cost and time. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

size_t sl_i64toa(int64_t v, char *dst)
{
    char tmp[21];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, i = 0;

    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    if (v < 0)
        dst[i++] = '-';
    while (n > 0)
        dst[i++] = tmp[--n];
    return i;
}

size_t sl_key_build(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len, const sluice_rule *r)
{
    size_t plen = strlen(prefix), o;
    const char *name = sl_algorithm_name(r->algorithm);
    size_t nlen = strlen(name);

    /* Room for "{K}", ":" name, and two ":" numbers of 21 bytes. */
    if (dst_len < plen + key_len + 3 + 1 + nlen + 2 * 22)
        return 0;
    memcpy(dst, prefix, plen);
    o = plen;
    dst[o++] = '{';
    memcpy(dst + o, key, key_len);
    o += key_len;
    dst[o++] = '}';
    dst[o++] = ':';
    memcpy(dst + o, name, nlen);
    o += nlen;
    dst[o++] = ':';
    o += sl_i64toa(r->period_ms, dst + o);
    if (r->algorithm == SLUICE_FIXED || r->algorithm == SLUICE_SLIDING) {
        dst[o++] = ':';
        o += sl_i64toa(r->tz_offset_ms, dst + o);
    }
    return o;
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
