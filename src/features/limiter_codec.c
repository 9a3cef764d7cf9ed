/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter_codec.c - the values a named limiter stores: its rules (the
 * magic line, the keep-alive, the rules as text) and each override (the
 * same, or the magic line and a marker), written and read back; anything
 * else read is SLUICE_EPROTO naming the limiter. */
#include "features/limiter_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stored value: SL_LIMITER_MAGIC, the keep-alive, the rules as text. */
size_t sl_limiter_encode(char *dst, const sluice_ruleset *rs, int64_t keepalive)
{
    size_t o = (size_t)snprintf(dst, SL_VALUE_MAX, SL_LIMITER_MAGIC "%lld\n",
                                (long long)keepalive);

    /* 8 rules of the longest text fit (request.h). */
    return o + sluice_ruleset_format(rs, dst + o, SL_VALUE_MAX - o);
}

sluice_status sl_limiter_decode(const sl_value *v, const void *name,
                                size_t name_len, sluice_ruleset *rs,
                                int64_t *keepalive, char *err)
{
    char text[SL_VALUE_MAX + 1], msg[SL_ERR_LEN], q[300], *end;
    const char *nl;
    long long ka;

    sl_quote(q, sizeof(q), name, name_len);
    if (v->len <= SL_LIMITER_MAGIC_LEN ||
        memcmp(v->buf, SL_LIMITER_MAGIC, SL_LIMITER_MAGIC_LEN) != 0)
        goto bad;
    memcpy(text, v->buf + SL_LIMITER_MAGIC_LEN, v->len - SL_LIMITER_MAGIC_LEN);
    text[v->len - SL_LIMITER_MAGIC_LEN] = '\0';
    nl = strchr(text, '\n');
    ka = strtoll(text, &end, 10);
    if (nl == NULL || end != nl || ka < 0 || ka > SL_MAX_PERIOD_MS)
        goto bad;
    if (sluice_ruleset_parse(nl + 1, rs, msg, sizeof(msg)) != SLUICE_OK) {
        sl_errf(err, SL_ERR_LEN,
                "limiter \"%s\": the rules stored are not valid: %s", q, msg);
        return SLUICE_EPROTO;
    }
    *keepalive = ka;
    return SLUICE_OK;
bad:
    sl_errf(err, SL_ERR_LEN,
            "limiter \"%s\": unexpected data under its key; is another "
            "program using the key prefix?",
            q);
    return SLUICE_EPROTO;
}

/* An override as stored in the hash: a ruleset as the rules are
 * (SL_LIMITER_MAGIC, keep-alive 0, the rules), or SL_LIMITER_MAGIC and one of
 * two markers. */
#define UNLIMITED "unlimited"
#define DENY      "deny"

size_t sl_override_encode(char *dst, const sluice_limiter_override *ov)
{
    if (ov->kind == SLUICE_OVERRIDE_RULES)
        return sl_limiter_encode(dst, &ov->rules, 0);
    return (size_t)snprintf(dst, SL_VALUE_MAX, SL_LIMITER_MAGIC "%s",
                            ov->kind == SLUICE_OVERRIDE_UNLIMITED ? UNLIMITED
                                                                  : DENY);
}

static bool is_marker(const sl_value *v, const char *m)
{
    size_t n = strlen(m);

    return v->len == SL_LIMITER_MAGIC_LEN + n &&
           memcmp(v->buf, SL_LIMITER_MAGIC, SL_LIMITER_MAGIC_LEN) == 0 &&
           memcmp(v->buf + SL_LIMITER_MAGIC_LEN, m, n) == 0;
}

/* The override read in v (not found: kind NONE). */
sluice_status sl_override_decode(const sl_value *v, const void *name,
                                 size_t name_len, sluice_limiter_override *ov,
                                 char *err)
{
    int64_t ka;

    memset(ov, 0, sizeof(*ov));
    if (!v->found)
        return SLUICE_OK;
    if (is_marker(v, UNLIMITED)) {
        ov->kind = SLUICE_OVERRIDE_UNLIMITED;
        return SLUICE_OK;
    }
    if (is_marker(v, DENY)) {
        ov->kind = SLUICE_OVERRIDE_DENY;
        return SLUICE_OK;
    }
    ov->kind = SLUICE_OVERRIDE_RULES;
    return sl_limiter_decode(v, name, name_len, &ov->rules, &ka, err);
}
