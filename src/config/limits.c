/* SPDX-License-Identifier: BSD-3-Clause */
/* limits.c - the form of a limits file (limits.h): built by the reader
 * (limits_read.c) or by code (the CLI's export), sealed (sorted, checked,
 * each name and client once), searched, and written back as the YAML the
 * reader takes. */
#include "config/limits.h"

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 1000 /* a name, and a name and a client together */

sl_limits *sl_limits_new(void)
{
    return sl_calloc(1, sizeof(sl_limits));
}

void sl_limits_free(sl_limits *l)
{
    size_t i, j;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++) {
        for (j = 0; j < l->lims[i].nover; j++) {
            sl_free(l->lims[i].overs[j].client);
            sl_free(l->lims[i].overs[j].rules);
        }
        sl_free(l->lims[i].overs);
        sl_free(l->lims[i].name);
    }
    sl_free(l->lims);
    sl_free(l);
}

/* Room for one more of size n in *p (cap items): false when out of
 * memory, *p unchanged. */
static bool grow(void *p, size_t *cap, size_t count, size_t size)
{
    void **pp = p;
    size_t want = *cap == 0 ? 8 : *cap * 2;
    void *q;

    if (count < *cap)
        return true;
    if ((q = sl_realloc(*pp, want * size)) == NULL)
        return false;
    *pp = q;
    *cap = want;
    return true;
}

sl_limits_limiter *sl_limits_add(sl_limits *l, const void *name,
                                 size_t name_len, const sluice_ruleset *rules,
                                 int64_t keepalive_ms)
{
    sl_limits_limiter *lim;
    char *copy = NULL;

    if (name_len > 0 && (copy = sl_memdup(name, name_len)) == NULL)
        return NULL;
    if (!grow(&l->lims, &l->cap, l->n, sizeof(*l->lims))) {
        sl_free(copy);
        return NULL;
    }
    lim = &l->lims[l->n++];
    memset(lim, 0, sizeof(*lim));
    lim->name = copy;
    lim->name_len = name_len;
    if (rules != NULL)
        lim->rules = *rules;
    lim->keepalive_ms = keepalive_ms;
    return lim;
}

bool sl_limits_add_override(sl_limits_limiter *lim, const void *client,
                            size_t client_len,
                            const sluice_limiter_override *ov)
{
    sl_limits_override *o;
    char *copy = NULL;
    sluice_rule *rules = NULL;
    size_t n = ov->kind == SLUICE_OVERRIDE_RULES ? ov->rules.count : 0;

    if (n > SLUICE_MAX_RULES)
        n = SLUICE_MAX_RULES; /* seal refuses it: the check's count */
    if ((client_len > 0 && (copy = sl_memdup(client, client_len)) == NULL) ||
        (n > 0 && (rules = (sluice_rule *)sl_memdup(
                       ov->rules.rules, n * sizeof(*rules))) == NULL) ||
        !grow(&lim->overs, &lim->cap, lim->nover, sizeof(*lim->overs))) {
        sl_free(copy);
        sl_free(rules);
        return false;
    }
    o = &lim->overs[lim->nover++];
    memset(o, 0, sizeof(*o));
    o->client = copy;
    o->client_len = client_len;
    o->kind = ov->kind;
    o->nrules = (uint8_t)n;
    o->rules = rules;
    return true;
}

void sl_limits_override_get(const sl_limits_override *o,
                            sluice_limiter_override *ov)
{
    memset(ov, 0, sizeof(*ov));
    ov->kind = o->kind;
    if (o->kind == SLUICE_OVERRIDE_RULES) {
        ov->rules.count = o->nrules;
        memcpy(ov->rules.rules, o->rules, o->nrules * sizeof(*o->rules));
    }
}

/* ------------------------------------------------------------- seal */

/* Bytes in order, a prefix first. */
static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    if (c != 0)
        return c;
    return an < bn ? -1 : an > bn;
}

/* Then by place in the file, so that the first of two equal comes first. */
static int place_cmp(unsigned al, unsigned ac, unsigned bl, unsigned bc)
{
    if (al != bl)
        return al < bl ? -1 : 1;
    return ac < bc ? -1 : ac > bc;
}

static int lim_cmp(const void *x, const void *y)
{
    const sl_limits_limiter *a = x, *b = y;
    int c = bytes_cmp(a->name, a->name_len, b->name, b->name_len);

    return c != 0 ? c : place_cmp(a->line, a->col, b->line, b->col);
}

static int over_cmp(const void *x, const void *y)
{
    const sl_limits_override *a = x, *b = y;
    int c = bytes_cmp(a->client, a->client_len, b->client, b->client_len);

    return c != 0 ? c : place_cmp(a->line, a->col, b->line, b->col);
}

/* "FILE:LINE:COL: " (or "FILE: " for what no file gave) into err, then
 * the message. */
static sluice_status fail_at(char *err, size_t err_len, const char *file,
                             unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static sluice_status fail_at(char *err, size_t err_len, const char *file,
                             unsigned line, unsigned col, const char *fmt, ...)
{
    char msg[SL_ERR_LEN];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (file == NULL)
        file = "limits";
    if (line > 0)
        sl_errf(err, err_len, "%s:%u:%u: %s", file, line, col, msg);
    else
        sl_errf(err, err_len, "%s: %s", file, msg);
    return SLUICE_EINVAL;
}

/* A limiter's own fields, as the calls would check them. */
static sluice_status check_limiter(const sl_limits_limiter *lim,
                                   const char *file, char *err, size_t err_len)
{
    char q[300], why[SL_ERR_LEN];
    size_t j;

    sl_quote(q, sizeof(q), lim->name, lim->name_len);
    if (lim->name_len == 0 || lim->name_len > NAME_MAX_LEN)
        return fail_at(err, err_len, file, lim->line, lim->col,
                       "limiter \"%s\": a name of %zu bytes: expected "
                       "1..%d",
                       q, lim->name_len, NAME_MAX_LEN);
    if (sluice_ruleset_check(&lim->rules, why, sizeof(why)) != SLUICE_OK)
        return fail_at(err, err_len, file, lim->line, lim->col,
                       "limiter \"%s\": %s", q, why);
    if (lim->keepalive_ms < 0 || lim->keepalive_ms > SL_MAX_PERIOD_MS)
        return fail_at(err, err_len, file, lim->line, lim->col,
                       "limiter \"%s\": keepalive_ms %lld: expected 0..%lld", q,
                       (long long)lim->keepalive_ms,
                       (long long)SL_MAX_PERIOD_MS);
    for (j = 0; j < lim->nover; j++) {
        const sl_limits_override *o = &lim->overs[j];
        sluice_limiter_override ov;
        char qc[300];

        sl_quote(qc, sizeof(qc), o->client, o->client_len);
        if (o->client_len == 0 || lim->name_len + o->client_len > NAME_MAX_LEN)
            return fail_at(err, err_len, file, o->line, o->col,
                           "limiter \"%s\": client \"%s\" of %zu bytes: "
                           "expected 1 byte or more, and with the name's "
                           "%zu at most %d",
                           q, qc, o->client_len, lim->name_len, NAME_MAX_LEN);
        if (o->kind != SLUICE_OVERRIDE_RULES &&
            o->kind != SLUICE_OVERRIDE_UNLIMITED &&
            o->kind != SLUICE_OVERRIDE_DENY)
            return fail_at(err, err_len, file, o->line, o->col,
                           "limiter \"%s\": client \"%s\": override kind %d: "
                           "expected rules, unlimited or deny",
                           q, qc, (int)o->kind);
        sl_limits_override_get(o, &ov);
        if (o->kind == SLUICE_OVERRIDE_RULES &&
            sluice_ruleset_check(&ov.rules, why, sizeof(why)) != SLUICE_OK)
            return fail_at(err, err_len, file, o->line, o->col,
                           "limiter \"%s\": client \"%s\": %s", q, qc, why);
    }
    return SLUICE_OK;
}

/* " (first at LINE:COL)" into where, or nothing for what no file gave. */
static const char *first_at(const unsigned *line, const unsigned *col,
                            char *where)
{
    where[0] = '\0';
    if (*line > 0)
        snprintf(where, 48, " (first at %u:%u)", *line, *col);
    return where;
}

sluice_status sl_limits_seal(sl_limits *l, const char *file, char *err,
                             size_t err_len)
{
    char q[300], where[48];
    size_t i, j;
    sluice_status st;

    if (l->n > 1)
        qsort(l->lims, l->n, sizeof(*l->lims), lim_cmp);
    for (i = 0; i < l->n; i++) {
        sl_limits_limiter *lim = &l->lims[i];

        if ((st = check_limiter(lim, file, err, err_len)) != SLUICE_OK)
            return st;
        sl_quote(q, sizeof(q), lim->name, lim->name_len);
        if (i > 0 && bytes_cmp(l->lims[i - 1].name, l->lims[i - 1].name_len,
                               lim->name, lim->name_len) == 0)
            return fail_at(
                err, err_len, file, lim->line, lim->col,
                "limiter \"%s\" again%s: each name once", q,
                first_at(&l->lims[i - 1].line, &l->lims[i - 1].col, where));
        if (lim->nover > 1)
            qsort(lim->overs, lim->nover, sizeof(*lim->overs), over_cmp);
        for (j = 1; j < lim->nover; j++) {
            const sl_limits_override *a = &lim->overs[j - 1],
                                     *b = &lim->overs[j];
            char qc[300];

            if (bytes_cmp(a->client, a->client_len, b->client, b->client_len) !=
                0)
                continue;
            sl_quote(qc, sizeof(qc), b->client, b->client_len);
            return fail_at(err, err_len, file, b->line, b->col,
                           "limiter \"%s\": client \"%s\" again%s: each "
                           "client once",
                           q, qc, first_at(&a->line, &a->col, where));
        }
    }
    return SLUICE_OK;
}

const sl_limits_limiter *sl_limits_find(const sl_limits *l, const void *name,
                                        size_t name_len)
{
    size_t lo = 0, hi = l->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c =
            bytes_cmp(l->lims[mid].name, l->lims[mid].name_len, name, name_len);

        if (c == 0)
            return &l->lims[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const sl_limits_override *sl_limits_find_override(const sl_limits_limiter *lim,
                                                  const void *client,
                                                  size_t client_len)
{
    size_t lo = 0, hi = lim->nover;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = bytes_cmp(lim->overs[mid].client, lim->overs[mid].client_len,
                          client, client_len);

        if (c == 0)
            return &lim->overs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ------------------------------------------------------------ write */

/* The code point at s (n bytes left) into *cp, and its length; 0 for
 * bytes that are not UTF-8 (overlong forms, surrogates and past U+10FFFF
 * included), as libyaml reads it. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len, i;
    uint32_t c;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2;
        c = s[0] & 0x1fu;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3;
        c = s[0] & 0x0fu;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4;
        c = s[0] & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3fu);
    }
    if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) ||
        (len == 4 && c < 0x10000) || c > 0x10ffff ||
        (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

static bool utf8_ok(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k;
    uint32_t cp;

    while (i < n) {
        if ((k = utf8_next(u + i, n - i, &cp)) == 0)
            return false;
        i += k;
    }
    return true;
}

static void put(sl_limits_out_fn out, void *arg, const char *s)
{
    out(arg, s, strlen(s));
}

/* A double-quoted YAML scalar of s (UTF-8): what YAML does not take as is
 * in one (controls, DEL, C1, line and paragraph separators, the BOM and
 * the two non-characters libyaml refuses) escaped. */
static void put_quoted(sl_limits_out_fn out, void *arg, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k;
    uint32_t cp;
    char esc[16];

    out(arg, "\"", 1);
    while (i < n) {
        if ((k = utf8_next(u + i, n - i, &cp)) == 0) {
            k = 1; /* never: the callers give UTF-8 */
            cp = u[i];
        }
        if (cp == '"' || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            out(arg, esc, 2);
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            snprintf(esc, sizeof(esc), "\\x%02x", (unsigned)cp);
            put(out, arg, esc);
        } else if (cp == 0x2028 || cp == 0x2029 || cp == 0xfeff ||
                   cp == 0xfffe || cp == 0xffff) {
            snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
            put(out, arg, esc);
        } else {
            out(arg, s + i, k);
        }
        i += k;
    }
    out(arg, "\"", 1);
}

/* `KEY: "text"` for UTF-8, else `KEY_hex: "hex"`. */
static void put_bytes(sl_limits_out_fn out, void *arg, const char *key,
                      const char *s, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char h[2];
    size_t i;

    put(out, arg, key);
    if (utf8_ok(s, n)) {
        put(out, arg, ": ");
        put_quoted(out, arg, s, n);
        return;
    }
    put(out, arg, "_hex: \"");
    for (i = 0; i < n; i++) {
        h[0] = digits[(unsigned char)s[i] >> 4];
        h[1] = digits[(unsigned char)s[i] & 15];
        out(arg, h, 2);
    }
    put(out, arg, "\"");
}

static void put_rules(sl_limits_out_fn out, void *arg, const sluice_ruleset *rs)
{
    char text[600];

    sluice_ruleset_format(rs, text, sizeof(text));
    put_quoted(out, arg, text, strlen(text));
}

static void put_policy(sl_limits_out_fn out, void *arg,
                       const sl_limits_policy *p)
{
    static const char *const fails[] = {"error", "open", "closed", "fallback"};
    static const char *const units[] = {"requests", "content-bytes",
                                        "concurrent-requests"};
    char line[128];

    put(out, arg, "    policy:\n");
    if (p->set & SL_LIMITS_POLICY_FAIL) {
        snprintf(line, sizeof(line), "      fail: %s\n",
                 (unsigned)p->fail <= SLUICE_FAIL_FALLBACK ? fails[p->fail]
                                                           : "?");
        put(out, arg, line);
        snprintf(line, sizeof(line), "      fallback_instances: %lu\n",
                 (unsigned long)p->fallback_instances);
        put(out, arg, p->fallback_instances > 0 ? line : "");
    }
    if (p->set & SL_LIMITS_POLICY_DENY_CACHE)
        put(out, arg,
            p->deny_cache ? "      deny_cache: true\n"
                          : "      deny_cache: false\n");
    if (p->set & SL_LIMITS_POLICY_RESERVE) {
        snprintf(line, sizeof(line), "      reserve_ms: %lld\n",
                 (long long)p->reserve_ms);
        put(out, arg, line);
        snprintf(line, sizeof(line), "      reserve_share: %lu\n",
                 (unsigned long)p->reserve_share);
        put(out, arg, p->reserve_share > 0 ? line : "");
    }
    if (p->set & SL_LIMITS_POLICY_SHADOW)
        put(out, arg,
            p->shadow ? "      shadow: true\n" : "      shadow: false\n");
    if (p->set & SL_LIMITS_POLICY_HTTP) {
        put(out, arg, "      http_name: ");
        put_quoted(out, arg, p->http_name, strnlen(p->http_name, 63));
        snprintf(line, sizeof(line), "\n      unit: %s\n      unit_name: ",
                 (unsigned)p->unit <= SLUICE_UNIT_CONCURRENT_REQUESTS
                     ? units[p->unit]
                     : "?");
        put(out, arg, line);
        put_quoted(out, arg, p->unit_name, strnlen(p->unit_name, 64));
        put(out, arg, "\n");
    }
}

void sl_limits_write(const sl_limits *l, sl_limits_out_fn out, void *arg)
{
    char line[64];
    size_t i, j;

    put(out, arg, "# sluice limits (docs/LIMITS.md)\nversion: 1\nlimiters:");
    put(out, arg, l->n == 0 ? " []\n" : "\n");
    for (i = 0; i < l->n; i++) {
        const sl_limits_limiter *lim = &l->lims[i];

        put_bytes(out, arg, "  - name", lim->name, lim->name_len);
        put(out, arg, "\n    rules: ");
        put_rules(out, arg, &lim->rules);
        put(out, arg, "\n");
        if (lim->keepalive_ms > 0) {
            snprintf(line, sizeof(line), "    keepalive_ms: %lld\n",
                     (long long)lim->keepalive_ms);
            put(out, arg, line);
        }
        if (lim->policy.set != 0)
            put_policy(out, arg, &lim->policy);
        if (lim->nover > 0)
            put(out, arg, "    overrides:\n");
        for (j = 0; j < lim->nover; j++) {
            const sl_limits_override *o = &lim->overs[j];
            sluice_limiter_override ov;

            put_bytes(out, arg, "      - {client", o->client, o->client_len);
            put(out, arg, ", rules: ");
            sl_limits_override_get(o, &ov);
            if (o->kind == SLUICE_OVERRIDE_RULES)
                put_rules(out, arg, &ov.rules);
            else
                put(out, arg,
                    o->kind == SLUICE_OVERRIDE_UNLIMITED ? "unlimited"
                                                         : "deny");
            put(out, arg, "}\n");
        }
    }
}
