/* SPDX-License-Identifier: BSD-3-Clause */
/* http.c - a decision as HTTP response header fields, per the IETF draft
 * "RateLimit header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers,
 * revision 11): RateLimit-Policy lists the quota policies (one a rule),
 * RateLimit the one that binds, both Structured Field lists of Items whose
 * value is a String naming the policy, with the quota unit (qu) and the
 * partition key (pk, hashed unless the caller says it is public);
 * Retry-After (RFC 9110) on a denial that can fit; and the draft's
 * quota-exceeded problem type as an RFC 9457 body. */
#include "internal.h"
#include "store.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

/* A Structured Field String: printable ASCII, with backslash and quote
 * escaped; anything else becomes '_'. Rule i (1-based) of a composite gets
 * "-i" after the name. */
static void put_name(sl_text *t, const char *name, size_t i, size_t count)
{
    const char *c;

    sl_textf(t, "\"");
    for (c = name; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            sl_textf(t, "\\%c", *c);
        else if (*c >= 0x20 && *c < 0x7f)
            sl_textf(t, "%c", *c);
        else
            sl_textf(t, "_");
    }
    if (count > 1)
        sl_textf(t, "-%zu", i + 1);
    sl_textf(t, "\"");
}

/* Seconds, rounded up: a client that waits this long is not early. */
static long long seconds_up(int64_t ms)
{
    return ms <= 0 ? 0 : (long long)((ms + 999) / 1000);
}

/* A rule's quota policy: q, the capacity its remaining counts against
 * (a bucket's burst), over w, the time it takes to come back whole (a
 * bucket refills capacity at limit per period: capacity * period / limit;
 * a window's is its period). */
static void policy_of(const sluice_rule *r, long long *q, long long *w)
{
    int64_t cap = sl_rule_capacity(r), p = r->period_ms, l = r->limit;

    *q = (long long)cap;
    if (!sl_store_is_bucket(r) || cap == l)
        *w = seconds_up(p);
    else if (cap <= (INT64_MAX - l) / p)
        *w = seconds_up((cap * p + l - 1) / l);
    else /* past 2^63 ms: whole seconds are all a header shows */
        *w = (long long)((double)cap / (double)l * ((double)p / 1000.0)) + 1;
}

/* The draft's t for the rule that binds (draft -11, 4.1.2: the effective
 * window, the time within which the client can use no more than r), in
 * ms. A window gives nothing back before its reset, or (sliding, log)
 * gives back gradually until then: its reset bounds t. A bucket gains a
 * unit every period / limit: with r of capacity b left, its reset counts
 * b - r units still to come, and t is the first of them, the reset less
 * the b - r - 1 after it (one unit's time when full), rounded up. A
 * denial's t is never past its wait: Retry-After SHOULD NOT come before
 * the end of the effective window (draft -11, section 6). */
static int64_t window_ms(const sluice_rule *r, const sluice_result *res)
{
    int64_t t = sluice_result_rule_reset_ms(res);

    if (sl_store_is_bucket(r)) {
        int64_t b = sl_rule_capacity(r), left = res->remaining;
        /* (b - left - 1) * period < 2^53: capacity * period is (rule.c) */
        int64_t after = b - (left < 0 ? 0 : left > b ? b : left) - 1;

        t -= after * r->period_ms / r->limit;
    }
    if (!res->allowed && res->retry_after_ms >= 0 && res->retry_after_ms < t)
        t = res->retry_after_ms;
    return t;
}

static const char *const units[] = {NULL, "content-bytes",
                                    "concurrent-requests"};

/* pk's value: a Byte Sequence (RFC 9651), the key's bytes or the first 16
 * bytes of its SHA-256, in base64 between colons. */
static void put_pk(sl_text *t, const void *key, size_t key_len, bool raw)
{
    unsigned char digest[EVP_MAX_MD_SIZE], *b64;
    unsigned int dlen = 0;
    const unsigned char *bytes = key;
    size_t n = key_len;

    if (!raw) {
        if (EVP_Digest(key, key_len, digest, &dlen, EVP_sha256(), NULL) != 1)
            return; /* no pk rather than a wrong one */
        bytes = digest;
        n = dlen < 16 ? dlen : 16;
    }
    if ((b64 = sl_malloc(4 * ((n + 2) / 3) + 1)) == NULL)
        return;
    EVP_EncodeBlock(b64, bytes, (int)n);
    sl_textf(t, ";pk=:%s:", (const char *)b64);
    sl_free(b64);
}

size_t sluice_http_fields(const sluice_ruleset *rules, const sluice_result *res,
                          const char *name, sluice_quota_unit unit,
                          const void *partition_key, size_t partition_key_len,
                          unsigned flags, char *buf, size_t len)
{
    sl_text t = {buf, buf != NULL ? len : 0, 0};
    size_t i, binding;
    long long q, w;

    if (t.len > 0)
        t.buf[0] = '\0';
    if (rules == NULL || res == NULL || rules->count == 0 ||
        rules->count > SLUICE_MAX_RULES ||
        (unsigned)unit >= sizeof(units) / sizeof(units[0]) ||
        (flags & ~SLUICE_HTTP_RAW_PK) != 0 ||
        (partition_key == NULL && partition_key_len > 0) ||
        partition_key_len > SLUICE_MAX_KEY_LEN)
        return 0;
    if (name == NULL || name[0] == '\0')
        name = "sluice";
    /* The rule that binds, as the decision named it. */
    binding = res->rule < rules->count ? res->rule : 0;
    /* The policies: each rule's limit over its period. */
    sl_textf(&t, "RateLimit-Policy: ");
    for (i = 0; i < rules->count; i++) {
        const sluice_rule *r = &rules->rules[i];

        sl_textf(&t, "%s", i > 0 ? ", " : "");
        put_name(&t, name, i, rules->count);
        policy_of(r, &q, &w);
        sl_textf(&t, ";q=%lld", q);
        if (units[unit] != NULL)
            sl_textf(&t, ";qu=\"%s\"", units[unit]);
        if (unit != SLUICE_UNIT_CONCURRENT_REQUESTS)
            sl_textf(&t, ";w=%lld", w);
    }
    sl_textf(&t, "\r\n");
    /* Where the binding one stands: the remaining (the least over the
     * rules, the binding one's) and its own reset. */
    sl_textf(&t, "RateLimit: ");
    put_name(&t, name, binding, rules->count);
    sl_textf(&t, ";r=%lld;t=%lld",
             (long long)(res->remaining > 0 ? res->remaining : 0),
             seconds_up(window_ms(&rules->rules[binding], res)));
    if (partition_key != NULL)
        put_pk(&t, partition_key, partition_key_len,
               (flags & SLUICE_HTTP_RAW_PK) != 0);
    sl_textf(&t, "\r\n");
    if (!res->allowed && res->retry_after_ms >= 0)
        sl_textf(&t, "Retry-After: %lld\r\n",
                 seconds_up(res->retry_after_ms) > 0
                     ? seconds_up(res->retry_after_ms)
                     : 1);
    return t.at;
}

size_t sluice_http_headers(const sluice_ruleset *rules,
                           const sluice_result *res, const char *name,
                           char *buf, size_t len)
{
    return sluice_http_fields(rules, res, name, SLUICE_UNIT_REQUESTS, NULL, 0,
                              0, buf, len);
}

size_t sluice_http_problem(const sluice_ruleset *rules,
                           const sluice_result *res, const char *name,
                           char *buf, size_t len)
{
    sl_text t = {buf, buf != NULL ? len : 0, 0};

    if (t.len > 0)
        t.buf[0] = '\0';
    if (rules == NULL || res == NULL || res->allowed || rules->count == 0 ||
        rules->count > SLUICE_MAX_RULES)
        return 0;
    if (name == NULL || name[0] == '\0')
        name = "sluice";
    sl_textf(&t, "{\"type\": \"https://iana.org/assignments/"
                 "http-problem-types#quota-exceeded\", \"title\": \"Request "
                 "cannot be satisfied as assigned quota has been exceeded\", "
                 "\"status\": 429, \"violated-policies\": [");
    /* A Structured Field String of printable ASCII, quote and backslash
     * escaped, is also a JSON string: the same name as the fields'. */
    put_name(&t, name, res->rule < rules->count ? res->rule : 0, rules->count);
    sl_textf(&t, "]}");
    return t.at;
}
