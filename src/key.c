/* SPDX-License-Identifier: BSD-3-Clause */
/* key.c - the Redis key layout "<prefix>{K}:<algo>:<P>[:<off>]", and the
 * checks of a request's key, cost and time. */
#include "internal.h"
#include "store.h"

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
    if (sl_store_is_window(r)) {
        dst[o++] = ':';
        o += sl_i64toa(r->tz_offset_ms, dst + o);
    }
    return o;
}

size_t sl_key_rules(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len)
{
    size_t plen = strlen(prefix), o = plen;

    if (dst_len < plen + key_len + 9)
        return 0;
    memcpy(dst, prefix, plen);
    dst[o++] = '{';
    memcpy(dst + o, key, key_len);
    o += key_len;
    memcpy(dst + o, "}:rules", 7);
    return o + 7;
}

/* A sibling of the rules key, "<prefix>{K}:<what>" with what at most as
 * long as "rules": the rules key with its last word replaced, so it fits. */
static size_t rules_sibling(char *dst, size_t dst_len, const char *prefix,
                            const void *key, size_t key_len, const char *what)
{
    size_t n = sl_key_rules(dst, dst_len, prefix, key, key_len);
    size_t w = strlen(what);

    if (n == 0)
        return 0;
    memcpy(dst + n - 5, what, w);
    return n - 5 + w;
}

size_t sl_key_lease(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len)
{
    return rules_sibling(dst, dst_len, prefix, key, key_len, "lease");
}

size_t sl_key_block(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len)
{
    return rules_sibling(dst, dst_len, prefix, key, key_len, "block");
}

size_t sl_key_over(char *dst, size_t dst_len, const char *prefix,
                   const void *key, size_t key_len)
{
    return rules_sibling(dst, dst_len, prefix, key, key_len, "over");
}

size_t sl_key_window(char *dst, size_t base_len, int64_t k)
{
    dst[base_len] = ':';
    return base_len + 1 + sl_i64toa(k, dst + base_len + 1);
}

void sl_bucket_pack(char *dst, int64_t x, int64_t d, int64_t keep)
{
    uint64_t v[3] = {(uint64_t)x, (uint64_t)d, (uint64_t)keep};
    size_t i;

    for (i = 0; i < SL_BUCKET_LEN; i++)
        dst[i] = (char)(v[i / 8] >> (8 * (i % 8)));
}

bool sl_bucket_unpack(const char *src, size_t len, int64_t *x, int64_t *d,
                      int64_t *keep)
{
    uint64_t v[3] = {0, 0, 0};
    size_t i;

    if (len != SL_BUCKET_LEN)
        return false;
    for (i = 0; i < SL_BUCKET_LEN; i++)
        v[i / 8] |= (uint64_t)(unsigned char)src[i] << (8 * (i % 8));
    *x = (int64_t)v[0];
    *d = (int64_t)v[1];
    *keep = (int64_t)v[2];
    /* A time, a backlog below capacity * period, and keep: the time of a
     * charge plus its TTL, the state's reset (a time to drain the backlog,
     * below 2^53) and a period. So keep may pass 2^53 - 1 by up to
     * 2^53 - 1 plus a period (a full burst of B*P = 2^53 - 1 charged at
     * t = 2^53 - 1), and nothing sluice writes passes that. */
    return *x >= 0 && *x <= SL_MAX_TIME_MS && *d >= 0 && *d < SL_EXACT_BOUND &&
           *keep >= 0 && *keep <= SL_MAX_KEEP_MS;
}

size_t sl_key_reset_set(const char *prefix, const void *key, size_t key_len,
                        const sluice_rule *r, int64_t t,
                        char (*keys)[SL_KEY_BUF], size_t *lens)
{
    size_t base = sl_key_build(keys[0], SL_KEY_BUF, prefix, key, key_len, r);
    int64_t k, to_end;
    int d;

    lens[0] = base;
    if (!sl_store_is_window(r))
        return 1;
    /* Windows keep nothing under the rule's key itself: keys[0] becomes
     * window k - 2, after its text served as the base of the others. */
    sl_window_locate(r, t, &k, &to_end);
    for (d = 1; d <= 3; d++) {
        memcpy(keys[d], keys[0], base);
        lens[d] = sl_key_window(keys[d], base, k - 2 + d);
    }
    lens[0] = sl_key_window(keys[0], base, k - 2);
    return 4;
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
