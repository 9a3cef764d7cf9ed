/* SPDX-License-Identifier: BSD-3-Clause */
/* limits_read.c - a limits file read (limits.h): libyaml's events walked
 * by the schema of docs/LIMITS.md, each value checked where it stands, so
 * that every fault is named with its line and column, what was found and
 * what was expected. Strict where YAML is loose: unknown and repeated
 * keys, anchors, aliases and tags, integers in quotes and "yes" for true
 * are faults, since a typo must not pass as a default. The schema's depth
 * (five levels) bounds the walk: anything deeper is refused where it
 * starts. */
#include "config/limits.h"
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#define NAME_MAX_LEN 1000
#define MAX_KEYS     9 /* the most keys of a mapping (a policy's) */

/* A walk under way: the parser and its last event, where faults go. */
typedef struct rd {
    yaml_parser_t yp;
    yaml_event_t ev;
    bool have; /* ev holds an event to delete */
    const char *file;
    const char *buf;
    size_t len;
    char *err;
    size_t err_len;
    sluice_status st; /* SLUICE_EINVAL, or ENOMEM */
} rd;

/* A mapping's keys: their names, and where each was met. */
typedef struct keys {
    const char *const *names;
    const char *what; /* "a limiter", ... */
    unsigned seen;
    yaml_mark_t at[MAX_KEYS];
} keys;

/* "FILE:LINE:COL: msg" at mark m; false, to return. */
static bool fail(rd *r, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(rd *r, const yaml_mark_t *m, const char *fmt, ...)
{
    char msg[SL_ERR_LEN];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl_errf(r->err, r->err_len, "%s:%zu:%zu: %s", r->file, m->line + 1,
            m->column + 1, msg);
    return false;
}

/* libyaml's own fault: the text is not UTF-8, or not YAML. */
static bool yaml_fault(rd *r)
{
    yaml_mark_t m = r->yp.problem_mark;
    size_t i;

    if (r->yp.error == YAML_MEMORY_ERROR) {
        r->st = SLUICE_ENOMEM;
        sl_errf(r->err, r->err_len, "%s: out of memory", r->file);
        return false;
    }
    if (r->yp.error == YAML_READER_ERROR) {
        /* Only the byte offset is known: the line and column from it. */
        memset(&m, 0, sizeof(m));
        for (i = 0; i < r->yp.problem_offset && i < r->len; i++) {
            if (r->buf[i] == '\n') {
                m.line++;
                m.column = 0;
            } else {
                m.column++;
            }
        }
        return fail(r, &m,
                    "not UTF-8 (%s): a name or a client of other bytes goes "
                    "in name_hex or client_hex",
                    r->yp.problem != NULL ? r->yp.problem : "?");
    }
    if (r->yp.context != NULL)
        return fail(r, &m, "YAML: %s (%s at %zu:%zu)",
                    r->yp.problem != NULL ? r->yp.problem : "?", r->yp.context,
                    r->yp.context_mark.line + 1, r->yp.context_mark.column + 1);
    return fail(r, &m, "YAML: %s", r->yp.problem != NULL ? r->yp.problem : "?");
}

/* The next event into r->ev; false on a fault, or on what the schema has
 * no use for: anchors, aliases, tags. */
static bool next(rd *r)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;

    if (r->have)
        yaml_event_delete(&r->ev);
    r->have = false;
    if (!yaml_parser_parse(&r->yp, &r->ev))
        return yaml_fault(r);
    r->have = true;
    if (r->ev.type == YAML_SCALAR_EVENT) {
        anchor = r->ev.data.scalar.anchor;
        tag = r->ev.data.scalar.tag;
    } else if (r->ev.type == YAML_SEQUENCE_START_EVENT) {
        anchor = r->ev.data.sequence_start.anchor;
        tag = r->ev.data.sequence_start.tag;
    } else if (r->ev.type == YAML_MAPPING_START_EVENT) {
        anchor = r->ev.data.mapping_start.anchor;
        tag = r->ev.data.mapping_start.tag;
    } else if (r->ev.type == YAML_ALIAS_EVENT) {
        return fail(r, &r->ev.start_mark,
                    "an alias (*%s): expected each value written out",
                    (const char *)r->ev.data.alias.anchor);
    }
    if (anchor != NULL)
        return fail(r, &r->ev.start_mark,
                    "an anchor (&%s): expected each value written out, "
                    "without anchors or aliases",
                    (const char *)anchor);
    if (tag != NULL)
        return fail(r, &r->ev.start_mark,
                    "a tag (%s): expected plain values, without tags",
                    (const char *)tag);
    return true;
}

/* What the event is, for "found ...": a scalar quoted (64 bytes at most),
 * else its kind. */
static const char *found(const rd *r, char *dst, size_t len)
{
    char q[300];

    if (r->ev.type == YAML_SCALAR_EVENT) {
        sl_quote(q, sizeof(q), r->ev.data.scalar.value,
                 r->ev.data.scalar.length);
        snprintf(dst, len, "\"%s\"", q);
    } else {
        snprintf(dst, len, "%s",
                 r->ev.type == YAML_MAPPING_START_EVENT    ? "a mapping"
                 : r->ev.type == YAML_SEQUENCE_START_EVENT ? "a list"
                                                           : "nothing");
    }
    return dst;
}

/* "KEY: expected WHAT, found ...". */
static bool wrong(rd *r, const char *key, const char *expected)
{
    char f[320];

    return fail(r, &r->ev.start_mark, "%s: expected %s, found %s", key,
                expected, found(r, f, sizeof(f)));
}

/* A plain empty, ~ or null: YAML's null, which a list or mapping left
 * empty (all of it commented out) reads as. */
static bool is_null(const rd *r)
{
    const char *v = (const char *)r->ev.data.scalar.value;

    return r->ev.type == YAML_SCALAR_EVENT &&
           r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (strcmp(v, "") == 0 || strcmp(v, "~") == 0 ||
            strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
            strcmp(v, "NULL") == 0);
}

static bool is_scalar(const rd *r)
{
    return r->ev.type == YAML_SCALAR_EVENT && !is_null(r);
}

/* An integer lo..hi, unquoted, decimal, no leading zero. */
static bool get_int(rd *r, const char *key, int64_t lo, int64_t hi,
                    const char *unit, int64_t *out)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    char expected[128];
    int64_t v = 0;
    size_t i = 0, len = r->ev.data.scalar.length;
    bool neg = false;

    snprintf(expected, sizeof(expected), "an unquoted integer %lld..%lld%s",
             (long long)lo, (long long)hi, unit);
    if (!is_scalar(r) || r->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return wrong(r, key, expected);
    if (s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == len || (s[i] == '0' && len > i + 1))
        return wrong(r, key, expected);
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return wrong(r, key, expected);
        if (v > (INT64_MAX - 9) / 10)
            return wrong(r, key, expected); /* past any bound */
        v = v * 10 + (s[i] - '0');
    }
    if (neg)
        v = -v;
    if (v < lo || v > hi)
        return wrong(r, key, expected);
    *out = v;
    return true;
}

static bool get_bool(rd *r, const char *key, bool *out)
{
    const char *s = (const char *)r->ev.data.scalar.value;

    if (is_scalar(r) && r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)) {
        *out = s[0] == 't';
        return true;
    }
    return wrong(r, key, "true or false, unquoted");
}

/* One of words (NULL-terminated), as its index. */
static bool get_word(rd *r, const char *key, const char *const *words,
                     const char *expected, int *out)
{
    int i;

    if (is_scalar(r))
        for (i = 0; words[i] != NULL; i++)
            if (strlen(words[i]) == r->ev.data.scalar.length &&
                memcmp(words[i], r->ev.data.scalar.value,
                       r->ev.data.scalar.length) == 0) {
                *out = i;
                return true;
            }
    return wrong(r, key, expected);
}

/* A name or a client: its text, or with hex its bytes in hex digits (two
 * a byte, either case); 1..NAME_MAX_LEN bytes, copied into *out. */
static bool get_bytes(rd *r, const char *key, bool hex, char **out,
                      size_t *out_len)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    size_t len = r->ev.data.scalar.length, i;
    char *b;

    if (!is_scalar(r))
        return wrong(r, key,
                     hex ? "2..2000 hex digits, two a byte"
                         : "a string of 1..1000 bytes");
    if (!hex) {
        if (len > NAME_MAX_LEN)
            return fail(r, &r->ev.start_mark, "%s of %zu bytes: expected 1..%d",
                        key, len, NAME_MAX_LEN);
        if ((b = sl_memdup(s, len)) == NULL)
            goto nomem;
        *out = b;
        *out_len = len;
        return true;
    }
    if (len % 2 != 0 || len > 2 * NAME_MAX_LEN ||
        strspn(s, "0123456789abcdefABCDEF") != len)
        return wrong(r, key, "2..2000 hex digits, two a byte");
    if ((b = sl_malloc(len / 2 + 1)) == NULL)
        goto nomem;
    for (i = 0; i < len / 2; i++) {
        char pair[3] = {s[2 * i], s[2 * i + 1], '\0'};

        b[i] = (char)strtoul(pair, NULL, 16);
    }
    *out = b;
    *out_len = len / 2;
    return true;
nomem:
    r->st = SLUICE_ENOMEM;
    sl_errf(r->err, r->err_len, "%s: out of memory", r->file);
    return false;
}

/* A ruleset's text into *rs (or, with listed, "unlimited" and "deny" as
 * kinds into *kind). */
static bool get_rules(rd *r, const char *key, bool listed, sluice_ruleset *rs,
                      sluice_override_kind *kind)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    char why[SL_ERR_LEN], f[320];

    if (!is_scalar(r) || strlen(s) != r->ev.data.scalar.length)
        return wrong(r, key,
                     listed ? "rules (e.g. \"fixed:100/1m\"), unlimited or "
                              "deny"
                            : "rules (e.g. \"fixed:100/1m\")");
    if (listed && strcmp(s, "unlimited") == 0) {
        *kind = SLUICE_OVERRIDE_UNLIMITED;
        return true;
    }
    if (listed && strcmp(s, "deny") == 0) {
        *kind = SLUICE_OVERRIDE_DENY;
        return true;
    }
    if (listed)
        *kind = SLUICE_OVERRIDE_RULES;
    if (sluice_ruleset_parse(s, rs, why, sizeof(why)) == SLUICE_OK)
        return true;
    if (listed)
        return fail(r, &r->ev.start_mark,
                    "%s %s: expected unlimited, deny or rules (%s)", key,
                    found(r, f, sizeof(f)), why);
    return fail(r, &r->ev.start_mark, "%s %s: %s", key, found(r, f, sizeof(f)),
                why);
}

/* ---------------------------------------------------------- mappings */

/* The next key of the mapping begun (its index in k->names), or -1 at its
 * end, -2 on a fault; the value's event is then read. */
static int next_key(rd *r, keys *k)
{
    char list[256], f[320];
    const char *s;
    size_t i, n;
    int at;

    if (!next(r))
        return -2;
    if (r->ev.type == YAML_MAPPING_END_EVENT)
        return -1;
    if (!is_scalar(r)) {
        fail(r, &r->ev.start_mark, "a key in %s: expected a string, found %s",
             k->what, found(r, f, sizeof(f)));
        return -2;
    }
    s = (const char *)r->ev.data.scalar.value;
    for (at = 0; k->names[at] != NULL; at++)
        if (strlen(k->names[at]) == r->ev.data.scalar.length &&
            memcmp(k->names[at], s, r->ev.data.scalar.length) == 0)
            break;
    if (k->names[at] == NULL) {
        for (n = 0, i = 0; k->names[i] != NULL; i++)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
                                  i == 0                    ? ""
                                  : k->names[i + 1] == NULL ? " or "
                                                            : ", ",
                                  k->names[i]);
        fail(r, &r->ev.start_mark, "unknown key %s in %s: expected %s",
             found(r, f, sizeof(f)), k->what, list);
        return -2;
    }
    if (k->seen & (1u << at)) {
        fail(r, &r->ev.start_mark, "%s again in %s (first at %zu:%zu)",
             k->names[at], k->what, k->at[at].line + 1, k->at[at].column + 1);
        return -2;
    }
    k->seen |= 1u << at;
    k->at[at] = r->ev.start_mark;
    return next(r) ? at : -2;
}

static bool has(const keys *k, int at)
{
    return (k->seen & (1u << at)) != 0;
}

/* A value that must open a mapping (null: an empty one, *empty set). */
static bool open_mapping(rd *r, const char *key, bool *empty)
{
    *empty = is_null(r);
    if (*empty || r->ev.type == YAML_MAPPING_START_EVENT)
        return true;
    return wrong(r, key, "a mapping");
}

/* ------------------------------------------------------------ policy */

enum {
    P_FAIL,
    P_INSTANCES,
    P_DENY_CACHE,
    P_RESERVE_MS,
    P_SHARE,
    P_SHADOW,
    P_HTTP_NAME,
    P_UNIT,
    P_UNIT_NAME
};

/* A name of the HTTP policy, or a unit's, into dst: 0..max bytes, each
 * one ok says. */
static bool get_label(rd *r, const char *key, size_t max, bool unit, char *dst)
{
    const unsigned char *s = r->ev.data.scalar.value;
    size_t len = r->ev.data.scalar.length, i;
    char expected[96];

    snprintf(expected, sizeof(expected), "%s, 0..%zu bytes",
             unit ? "A-Z a-z 0-9 . _ -" : "printable ASCII", max);
    if (r->ev.type != YAML_SCALAR_EVENT || len > max)
        return wrong(r, key, expected);
    for (i = 0; i < len; i++)
        if (unit ? !((s[i] != '\0' && strchr("._-", s[i]) != NULL) ||
                     (s[i] >= '0' && s[i] <= '9') ||
                     (s[i] >= 'a' && s[i] <= 'z') ||
                     (s[i] >= 'A' && s[i] <= 'Z'))
                 : (s[i] < 0x20 || s[i] > 0x7e))
            return wrong(r, key, expected);
    memcpy(dst, s, len);
    dst[len] = '\0';
    return true;
}

static bool read_policy(rd *r, sl_limits_policy *p)
{
    static const char *const names[] = {"fail",          "fallback_instances",
                                        "deny_cache",    "reserve_ms",
                                        "reserve_share", "shadow",
                                        "http_name",     "unit",
                                        "unit_name",     NULL};
    static const char *const fails[] = {"error", "open", "closed", "fallback",
                                        NULL};
    static const char *const units[] = {"requests", "content-bytes",
                                        "concurrent-requests", NULL};
    keys k = {names, "a policy", 0, {{0, 0, 0}}};
    int at, w;
    int64_t v;
    bool ok = true;

    while (ok && (at = next_key(r, &k)) >= 0) {
        switch (at) {
        case P_FAIL:
            ok = get_word(r, "fail", fails, "error, open, closed or fallback",
                          &w);
            p->fail = (sluice_fail_policy)w;
            p->set |= SL_LIMITS_POLICY_FAIL;
            break;
        case P_INSTANCES:
            ok = get_int(r, "fallback_instances", 0, 10000,
                         " (0: the handle's)", &v);
            p->fallback_instances = (uint32_t)v;
            p->set |= SL_LIMITS_POLICY_FAIL;
            break;
        case P_DENY_CACHE:
            ok = get_bool(r, "deny_cache", &p->deny_cache);
            p->set |= SL_LIMITS_POLICY_DENY_CACHE;
            break;
        case P_RESERVE_MS:
            ok = get_int(r, "reserve_ms", 0, 60000, " ms (0: off)",
                         &p->reserve_ms);
            p->set |= SL_LIMITS_POLICY_RESERVE;
            break;
        case P_SHARE:
            ok = get_int(r, "reserve_share", 0, 50, " percent (0: the default)",
                         &v);
            p->reserve_share = (uint32_t)v;
            p->set |= SL_LIMITS_POLICY_RESERVE;
            break;
        case P_SHADOW:
            ok = get_bool(r, "shadow", &p->shadow);
            p->set |= SL_LIMITS_POLICY_SHADOW;
            break;
        case P_HTTP_NAME:
            ok = get_label(r, "http_name", 63, false, p->http_name);
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        case P_UNIT:
            ok = get_word(r, "unit", units,
                          "requests, content-bytes or concurrent-requests", &w);
            p->unit = (sluice_quota_unit)w;
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        case P_UNIT_NAME:
            ok = get_label(r, "unit_name", 64, true, p->unit_name);
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        }
    }
    if (!ok || at == -2)
        return false;
    /* A field that means nothing without the one it goes with is a
     * mistake to say, not to ignore. */
    if (p->fallback_instances > 0 && p->fail != SLUICE_FAIL_FALLBACK)
        return fail(r, &k.at[P_INSTANCES],
                    "fallback_instances %lu: expected fail: fallback beside "
                    "it",
                    (unsigned long)p->fallback_instances);
    if (p->reserve_share > 0 && p->reserve_ms == 0)
        return fail(r, &k.at[P_SHARE],
                    "reserve_share %lu: expected reserve_ms (1..60000) "
                    "beside it",
                    (unsigned long)p->reserve_share);
    return true;
}

/* --------------------------------------------------------- overrides */

enum {
    O_CLIENT,
    O_CLIENT_HEX,
    O_RULES
};

static bool read_override(rd *r, sl_limits_limiter *lim)
{
    static const char *const names[] = {"client", "client_hex", "rules", NULL};
    keys k = {names, "an override", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    sluice_limiter_override ov;
    sl_limits_override *o;
    char *client = NULL;
    size_t client_len = 0;
    bool ok = true;
    int at;

    memset(&ov, 0, sizeof(ov));
    while (ok && (at = next_key(r, &k)) >= 0) {
        if (at == O_RULES) {
            ok = get_rules(r, "rules", true, &ov.rules, &ov.kind);
        } else if (has(&k, O_CLIENT) && has(&k, O_CLIENT_HEX)) {
            ok = fail(r, &k.at[at], "client and client_hex: expected one");
        } else {
            ok = get_bytes(r, names[at], at == O_CLIENT_HEX, &client,
                           &client_len);
        }
    }
    if (ok && at != -2 && !has(&k, O_CLIENT) && !has(&k, O_CLIENT_HEX))
        ok = fail(r, &start,
                  "an override without a client: expected client (or "
                  "client_hex for bytes that are not UTF-8)");
    if (ok && at != -2 && !has(&k, O_RULES))
        ok = fail(r, &start,
                  "an override without rules: expected rules: RULES, "
                  "unlimited or deny");
    if (ok && at != -2) {
        if (!sl_limits_add_override(lim, client, client_len, &ov)) {
            r->st = SLUICE_ENOMEM;
            sl_errf(r->err, r->err_len, "%s: out of memory", r->file);
            ok = false;
        } else {
            o = &lim->overs[lim->nover - 1];
            o->line = (unsigned)start.line + 1;
            o->col = (unsigned)start.column + 1;
        }
    }
    sl_free(client);
    return ok && at != -2;
}

/* A list of items, each a mapping read by item (null: an empty list). */
static bool read_list(rd *r, const char *key, const char *item_what,
                      bool (*item)(rd *r, void *arg), void *arg)
{
    char f[320];

    if (is_null(r))
        return true;
    if (r->ev.type != YAML_SEQUENCE_START_EVENT)
        return wrong(r, key, "a list");
    for (;;) {
        if (!next(r))
            return false;
        if (r->ev.type == YAML_SEQUENCE_END_EVENT)
            return true;
        if (r->ev.type != YAML_MAPPING_START_EVENT)
            return fail(r, &r->ev.start_mark, "%s: expected %s, found %s", key,
                        item_what, found(r, f, sizeof(f)));
        if (!item(r, arg))
            return false;
    }
}

static bool override_item(rd *r, void *arg)
{
    return read_override(r, arg);
}

/* ---------------------------------------------------------- limiters */

enum {
    L_NAME,
    L_NAME_HEX,
    L_RULES,
    L_KEEPALIVE,
    L_POLICY,
    L_OVERRIDES
};

static bool read_limiter(rd *r, sl_limits *l)
{
    static const char *const names[] = {
        "name",   "name_hex",  "rules", "keepalive_ms",
        "policy", "overrides", NULL};
    keys k = {names, "a limiter", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    sl_limits_limiter *lim = sl_limits_add(l, NULL, 0, NULL, 0);
    char q[300];
    bool ok = true, empty;
    int at;

    if (lim == NULL) {
        r->st = SLUICE_ENOMEM;
        sl_errf(r->err, r->err_len, "%s: out of memory", r->file);
        return false;
    }
    lim->line = (unsigned)start.line + 1;
    lim->col = (unsigned)start.column + 1;
    while (ok && (at = next_key(r, &k)) >= 0) {
        switch (at) {
        case L_NAME:
        case L_NAME_HEX:
            if (has(&k, L_NAME) && has(&k, L_NAME_HEX))
                ok = fail(r, &k.at[at], "name and name_hex: expected one");
            else
                ok = get_bytes(r, names[at], at == L_NAME_HEX, &lim->name,
                               &lim->name_len);
            break;
        case L_RULES:
            ok = get_rules(r, "rules", false, &lim->rules, NULL);
            break;
        case L_KEEPALIVE:
            ok = get_int(r, "keepalive_ms", 0, SL_MAX_PERIOD_MS,
                         " ms (0: kept until deleted)", &lim->keepalive_ms);
            break;
        case L_POLICY:
            ok = open_mapping(r, "policy", &empty) &&
                 (empty || read_policy(r, &lim->policy));
            break;
        case L_OVERRIDES:
            /* lim may move as limiters are added: not while in it. */
            ok = read_list(r, "overrides", "an override (a mapping)",
                           override_item, lim);
            break;
        }
    }
    if (!ok || at == -2)
        return false;
    if (!has(&k, L_NAME) && !has(&k, L_NAME_HEX))
        return fail(r, &start,
                    "a limiter without a name: expected name (or name_hex "
                    "for bytes that are not UTF-8)");
    sl_quote(q, sizeof(q), lim->name, lim->name_len);
    if (lim->name_len == 0)
        return fail(r, &k.at[has(&k, L_NAME) ? L_NAME : L_NAME_HEX],
                    "name \"\": expected 1..%d bytes", NAME_MAX_LEN);
    if (!has(&k, L_RULES))
        return fail(r, &start,
                    "limiter \"%s\" without rules: expected rules (e.g. "
                    "rules: \"fixed:100/1m\")",
                    q);
    return true;
}

static bool limiter_item(rd *r, void *arg)
{
    return read_limiter(r, arg);
}

/* -------------------------------------------------------------- root */

enum {
    R_VERSION,
    R_LIMITERS
};

static bool read_root(rd *r, sl_limits *l)
{
    static const char *const names[] = {"version", "limiters", NULL};
    keys k = {names, "the file", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    bool ok = true;
    int64_t v;
    int at;

    while (ok && (at = next_key(r, &k)) >= 0) {
        if (at == R_VERSION) {
            ok = get_int(r, "version", 0, INT32_MAX, "", &v);
            if (ok && v != SL_LIMITS_VERSION)
                ok = fail(r, &r->ev.start_mark,
                          "version %lld: expected %d (this sluice reads "
                          "version %d)",
                          (long long)v, SL_LIMITS_VERSION, SL_LIMITS_VERSION);
        } else {
            ok = read_list(r, "limiters", "a limiter (a mapping)", limiter_item,
                           l);
        }
    }
    if (!ok || at == -2)
        return false;
    if (!has(&k, R_VERSION))
        return fail(r, &start, "no version: expected version: %d",
                    SL_LIMITS_VERSION);
    if (!has(&k, R_LIMITERS))
        return fail(r, &start,
                    "no limiters: expected limiters: a list (or [] for "
                    "none)");
    return true;
}

/* Pass one, YAML alone: a fault of the syntax is named as such, not as
 * the schema's complaint about what libyaml gave before it (a mapping
 * ended early by a line indented wrong reads as one missing a key). */
static bool yaml_only(rd *r)
{
    bool end;

    for (;;) {
        if (!yaml_parser_parse(&r->yp, &r->ev))
            return yaml_fault(r);
        end = r->ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&r->ev);
        if (end)
            return true;
    }
}

/* The stream: one document, a mapping. */
static bool read_stream(rd *r, sl_limits *l)
{
    char f[320];

    if (!next(r) || !next(r))
        return false;
    if (r->ev.type == YAML_STREAM_END_EVENT)
        return fail(r, &r->ev.start_mark,
                    "empty: expected a mapping with version: %d and "
                    "limiters",
                    SL_LIMITS_VERSION);
    if (!next(r))
        return false;
    if (r->ev.type != YAML_MAPPING_START_EVENT)
        return fail(r, &r->ev.start_mark,
                    "expected a mapping with version and limiters, found %s",
                    found(r, f, sizeof(f)));
    if (!read_root(r, l) || !next(r) || !next(r))
        return false;
    if (r->ev.type != YAML_STREAM_END_EVENT)
        return fail(r, &r->ev.start_mark,
                    "a second document: expected one in the file");
    return true;
}

sluice_status sl_limits_parse(const char *file, const char *buf, size_t len,
                              sl_limits **out, char *err, size_t err_len)
{
    rd r;
    sl_limits *l;
    sluice_status st;

    *out = NULL;
    memset(&r, 0, sizeof(r));
    r.file = file != NULL ? file : "limits";
    r.buf = buf;
    r.len = len;
    r.err = err;
    r.err_len = err_len;
    r.st = SLUICE_EINVAL;
    if (len > SL_LIMITS_MAX_BYTES) {
        sl_errf(err, err_len, "%s: %zu bytes: expected at most %d (16 MB)",
                r.file, len, SL_LIMITS_MAX_BYTES);
        return SLUICE_EINVAL;
    }
    if ((l = sl_limits_new()) == NULL || !yaml_parser_initialize(&r.yp)) {
        sl_free(l);
        sl_errf(err, err_len, "%s: out of memory", r.file);
        return SLUICE_ENOMEM;
    }
    yaml_parser_set_input_string(&r.yp, (const unsigned char *)buf, len);
    if (!yaml_only(&r)) {
        st = r.st;
    } else {
        yaml_parser_delete(&r.yp);
        if (!yaml_parser_initialize(&r.yp)) {
            sl_limits_free(l);
            sl_errf(err, err_len, "%s: out of memory", r.file);
            return SLUICE_ENOMEM;
        }
        yaml_parser_set_input_string(&r.yp, (const unsigned char *)buf, len);
        st =
            read_stream(&r, l) ? sl_limits_seal(l, r.file, err, err_len) : r.st;
    }
    if (r.have)
        yaml_event_delete(&r.ev);
    yaml_parser_delete(&r.yp);
    if (st != SLUICE_OK) {
        sl_limits_free(l);
        return st;
    }
    *out = l;
    return SLUICE_OK;
}

sluice_status sl_limits_load(const char *path, sl_limits **out, char *err,
                             size_t err_len)
{
    const char *file = strcmp(path, "-") == 0 ? "<stdin>" : path;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    struct stat sb;
    char *buf = NULL, *b;
    size_t len = 0, cap = 0, n;
    sluice_status st;

    *out = NULL;
    if (f == NULL) {
        sl_errf(err, err_len, "%s: cannot open: %s", file, strerror(errno));
        return SLUICE_EINVAL;
    }
    /* A regular file too large is refused unread; anything else is read
     * up to the bound and a byte past it. */
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        sb.st_size > SL_LIMITS_MAX_BYTES) {
        sl_errf(err, err_len, "%s: %lld bytes: expected at most %d (16 MB)",
                file, (long long)sb.st_size, SL_LIMITS_MAX_BYTES);
        st = SLUICE_EINVAL;
        goto done;
    }
    for (;;) {
        if (len == cap) {
            cap = cap == 0 ? 64 * 1024 : cap * 2;
            if (cap > SL_LIMITS_MAX_BYTES + 1)
                cap = SL_LIMITS_MAX_BYTES + 1;
            if ((b = sl_realloc(buf, cap + 1)) == NULL) {
                sl_errf(err, err_len, "%s: out of memory", file);
                st = SLUICE_ENOMEM;
                goto done;
            }
            buf = b;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0 || len > SL_LIMITS_MAX_BYTES)
            break;
    }
    if (ferror(f)) {
        sl_errf(err, err_len, "%s: cannot read: %s", file, strerror(errno));
        st = SLUICE_EINVAL;
    } else {
        st = sl_limits_parse(file, buf != NULL ? buf : "", len, out, err,
                             err_len);
    }
done:
    if (f != stdin)
        fclose(f);
    sl_free(buf);
    return st;
}
