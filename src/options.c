/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c - the one table of URL query options. Each row names an
 * option, the shape and range of its value and what it does; the table
 * drives the URL parser (url.c applies a query through it), the copy and
 * the check of sluice_options' fields with the same ranges, the defaults,
 * the message for an unknown option, `sluice --help`, and the test that
 * the docs name every option. Adding an option is adding a row. */
#include "options.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    OPT_MS,     /* a whole number in [lo, hi] */
    OPT_COUNT,  /* the same, not a time */
    OPT_FLAG,   /* 1/yes/true/on or 0/no/false/off */
    OPT_CHOICE, /* one of the words in `choices`, stored as its index */
    OPT_TEXT,   /* percent-decoded, at most cap - 1 bytes, not empty */
    OPT_TEXT0   /* the same, empty allowed */
} kind;

/* The C type of the field an option sets, in sl_url and, for those
 * sluice_options has too, there. */
typedef enum {
    T_U32,  /* uint32_t */
    T_I64,  /* int64_t */
    T_BOOL, /* bool */
    T_INT,  /* int, or an enum (sluice_fail_policy) */
    T_SIZE, /* size_t */
    T_TEXT  /* char[size] */
} ftype;

/* How a value is stored (a row's flags). NOT: a flag kept as its
 * opposite (metrics=0: no_metrics). NONE0: 0 in the URL is "none", kept as
 * -1 (0 is the default there); the options' negative values mean the
 * same. SECRET: never shown in a message (a password). */
#define NOT           1u
#define NONE0         2u
#define SECRET        4u
/* The options' value out of range is SLUICE_EINVAL, not SLUICE_EURL (the
 * handle's open checked deny_cache apart before the table did). */
#define EINVAL_STATUS 8u

static const char *const clocks[] = {"local", "server", NULL};
/* In the order of sluice_fail_policy. */
static const char *const fails[] = {"error", "open", "closed", "fallback",
                                    NULL};

/* Where a row's value goes in sl_url, and its size; where sluice_options
 * holds the same (NO_OPTION: the URL only). */
#define AT(m)     offsetof(sl_url, m), sizeof(((sl_url *)0)->m)
#define IN(m)     offsetof(sluice_options, m), #m
#define NO_OPTION ((size_t)-1), NULL

/* One option, as Redis's config.c has a row for each: its name, the shape
 * and range of its value, its help, the field it sets, its default (kept
 * when the field is still 0 after the options and the URL; 0: none here,
 * the field's 0 is the default and whoever reads it knows it), the field
 * of sluice_options that sets it too (checked with the same range), and
 * the message's tail for a value of that field out of range. */
static const struct option {
    const char *name;
    kind kind;
    const char *value; /* the value's shape in --help: "N", "0|1" */
    long long lo, hi;
    const char *const *choices;
    const char *help;
    size_t at, size;
    ftype type;
    unsigned flags;
    long long def;
    size_t in;         /* offsetof in sluice_options (NO_OPTION: none) */
    const char *field; /* its name there */
    /* The message for a value of that field out of range: the value's
     * unit (" ms"), or a choice's C prefix ("SLUICE_FAIL_"), NULL: not
     * checked (a flag); what its 0 means (NONE0: a negative value), NULL:
     * the default, def. */
    const char *unit, *zero;
} table[] = {
    {"timeout_ms", OPT_MS, "N", 1, 86400000, NULL,
     "a call's whole budget (default 250)", AT(cfg.command_timeout_ms), T_U32,
     0, 250, IN(command_timeout_ms), " ms", NULL},
    {"connect_timeout_ms", OPT_MS, "N", 1, 86400000, NULL,
     "one connect (default 1000)", AT(cfg.connect_timeout_ms), T_U32, 0, 1000,
     IN(connect_timeout_ms), " ms", NULL},
    {"clock", OPT_CHOICE, "local|server", 0, 0, clocks,
     "whose clock decides (default local)", AT(cfg.server_clock), T_BOOL, 0, 0,
     IN(server_clock), NULL, NULL},
    {"fail", OPT_CHOICE, "error|open|closed|fallback", 0, 0, fails,
     "when the store fails (default error)", AT(cfg.fail), T_INT, 0, 0,
     IN(fail), "SLUICE_FAIL_", NULL},
    {"prefix", OPT_TEXT0, "P", 0, 0, NULL,
     "every key's prefix (default \"sluice:\")", AT(cfg.prefix), T_TEXT, 0, 0,
     NO_OPTION, NULL, NULL},
    {"ttl_floor_ms", OPT_MS, "N", 1, 86400000, NULL,
     "the least TTL of a key (default 1000)", AT(cfg.ttl_floor_ms), T_U32, 0,
     1000, IN(ttl_floor_ms), " ms", NULL},
    {"deny_cache", OPT_COUNT, "N", 0, 1000000, NULL,
     "denials kept locally (0: off, default)", AT(cfg.deny_cache), T_U32,
     EINVAL_STATUS, 0, IN(deny_cache), " denials to keep", "off"},
    {"metrics", OPT_FLAG, "0|1", 0, 0, NULL,
     "count for sluice_stats (default 1)", AT(cfg.no_metrics), T_BOOL, NOT, 0,
     IN(no_metrics), NULL, NULL},
    {"shadow", OPT_FLAG, "0|1", 0, 0, NULL,
     "admit all, report denials (default 0)", AT(cfg.shadow), T_BOOL, 0, 0,
     IN(shadow), NULL, NULL},
    {"fallback_instances", OPT_COUNT, "N", 1, SL_OPT_INSTANCES_MAX, NULL,
     "instances sharing fail=fallback (default 1)", AT(cfg.fallback_instances),
     T_U32, 0, 1, IN(fallback_instances), "", NULL},
    {"fallback_max_keys", OPT_COUNT, "N", 0, 1000000000, NULL,
     "keys in memory, LRU evicted (0: no bound)", AT(cfg.fallback_max_keys),
     T_I64, NONE0, 0, NO_OPTION, NULL, NULL},
    {"rules_cache_ms", OPT_MS, "N", 0, 86400000, NULL,
     "rules of limiters kept (default 1000)", AT(cfg.rules_cache_ms), T_I64,
     NONE0, 1000, IN(rules_cache_ms), "", "never cached"},
    {"rules_stale_ms", OPT_MS, "N", 0, 86400000, NULL,
     "rules used when unreadable (default 3600000)", AT(cfg.rules_stale_ms),
     T_I64, NONE0, 3600000, NO_OPTION, NULL, NULL},
    {"limits_file", OPT_TEXT, "PATH", 0, 0, NULL,
     "limiters defined from a file (docs/LIMITS.md)", AT(limits_file), T_TEXT,
     0, 0, NO_OPTION, NULL, NULL},
    {"reserve_ms", OPT_MS, "N", 0, SL_OPT_HOLD_MAX_MS, NULL,
     "reserve hot keys' units, held N ms (0: off)", AT(cfg.reserve_ms), T_I64,
     0, 0, IN(reserve_ms), " ms", "off"},
    {"reserve_share", OPT_COUNT, "PCT", 1, SL_OPT_SHARE_MAX, NULL,
     "most a handle reserves, % (default 10)", AT(cfg.reserve_share), T_U32, 0,
     SL_OPT_SHARE_DEFAULT, IN(reserve_share), " percent", NULL},
    {"max_reply_bytes", OPT_COUNT, "N", 1024, 1073741824, NULL,
     "the largest reply (default 8388608)", AT(ep.reply_max_bytes), T_SIZE, 0,
     0, NO_OPTION, NULL, NULL},
    {"socket", OPT_TEXT, "PATH", 0, 0, NULL, "a Unix-domain socket, not TCP",
     AT(ep.socket), T_TEXT, 0, 0, NO_OPTION, NULL, NULL},
    {"tls", OPT_FLAG, "0|1", 0, 0, NULL,
     "TLS (rediss:// is redis:// with tls=1)", AT(ep.tls), T_BOOL, 0, 0,
     NO_OPTION, NULL, NULL},
    {"tls_verify", OPT_FLAG, "0|1", 0, 0, NULL, "verify the server (default 1)",
     AT(ep.tls_insecure), T_BOOL, NOT, 0, NO_OPTION, NULL, NULL},
    {"tls_ca_file", OPT_TEXT, "F", 0, 0, NULL, "CA certificates to verify with",
     AT(ep.tls_ca_file), T_TEXT, 0, 0, NO_OPTION, NULL, NULL},
    {"tls_ca_dir", OPT_TEXT, "D", 0, 0, NULL, "a directory of CA certificates",
     AT(ep.tls_ca_dir), T_TEXT, 0, 0, NO_OPTION, NULL, NULL},
    {"tls_cert", OPT_TEXT, "F", 0, 0, NULL, "this client's certificate",
     AT(ep.tls_cert), T_TEXT, 0, 0, NO_OPTION, NULL, NULL},
    {"tls_key", OPT_TEXT, "F", 0, 0, NULL, "this client's private key",
     AT(ep.tls_key), T_TEXT, 0, 0, NO_OPTION, NULL, NULL},
    {"tls_server_name", OPT_TEXT, "NAME", 0, 0, NULL,
     "SNI and verified name (default host)", AT(ep.tls_server_name), T_TEXT, 0,
     0, NO_OPTION, NULL, NULL},
    {"sentinel_user", OPT_TEXT, "U", 0, 0, NULL,
     "the sentinels' ACL user (+sentinel)", AT(sentinel_ep.user), T_TEXT, 0, 0,
     NO_OPTION, NULL, NULL},
    {"sentinel_password", OPT_TEXT, "P", 0, 0, NULL,
     "the sentinels' password (+sentinel)", AT(sentinel_ep.password), T_TEXT,
     SECRET, 0, NO_OPTION, NULL, NULL},
    {"sentinel_tls", OPT_FLAG, "0|1", 0, 0, NULL,
     "TLS to the sentinels (default: as the nodes)", AT(sentinel_tls), T_INT, 0,
     0, NO_OPTION, NULL, NULL},
};

#define NOPTIONS (sizeof(table) / sizeof(table[0]))

/* T_INT holds an enum (fail) as an int. */
_Static_assert(sizeof(sluice_fail_policy) == sizeof(int),
               "fail= is kept as an int");

size_t sl_option_count(void)
{
    return NOPTIONS;
}

const char *sl_option_name(size_t i)
{
    return i < NOPTIONS ? table[i].name : NULL;
}

void sl_option_usage(size_t i, char *dst, size_t dst_len)
{
    if (dst_len == 0)
        return;
    if (i >= NOPTIONS) {
        dst[0] = '\0';
        return;
    }
    snprintf(dst, dst_len, "%s=%s", table[i].name, table[i].value);
}

const char *sl_option_help(size_t i)
{
    return i < NOPTIONS ? table[i].help : NULL;
}

void sl_option_known(char *dst, size_t dst_len)
{
    size_t i, at = 0;

    if (dst_len == 0)
        return;
    dst[0] = '\0';
    for (i = 0; i < NOPTIONS && at < dst_len; i++) {
        int k = snprintf(dst + at, dst_len - at, "%s%s", i > 0 ? ", " : "",
                         table[i].name);

        if (k < 0)
            break;
        at += (size_t)k;
    }
}

int sl_option_find(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++)
        if (len == strlen(table[i].name) &&
            memcmp(name, table[i].name, len) == 0)
            return (int)i;
    return -1;
}

static bool is_word(const char *v, size_t n, const char *w)
{
    return n == strlen(w) && memcmp(v, w, n) == 0;
}

bool sl_read_uint(const char *s, size_t n, long long lo, long long hi,
                  long long *out)
{
    long long v = 0;
    size_t i;

    if (n == 0 || n > 12)
        return false;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool sl_decode(char *dst, size_t dst_len, const char *s, size_t n)
{
    size_t i, o = 0;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (c == '%') {
            /* Exactly two hex digits, and never a NUL that would cut the
             * value short in silence. */
            char hex[3] = {0};

            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return false;
            hex[0] = s[i + 1];
            hex[1] = s[i + 2];
            c = (char)strtol(hex, NULL, 16);
            if (c == '\0')
                return false;
            i += 2;
        }
        if (o + 1 >= dst_len)
            return false;
        dst[o++] = c;
    }
    dst[o] = '\0';
    return true;
}

/* Reads and writes the field of a row in base (an sl_url or a
 * sluice_options), as a number. */
static long long get(const void *base, size_t at, ftype t)
{
    const char *p = (const char *)base + at;

    switch (t) {
    case T_U32:
        return *(const uint32_t *)(const void *)p;
    case T_I64:
        return *(const int64_t *)(const void *)p;
    case T_BOOL:
        return *(const bool *)(const void *)p;
    case T_INT:
        return *(const int *)(const void *)p;
    case T_SIZE:
        return (long long)*(const size_t *)(const void *)p;
    case T_TEXT:
        break;
    }
    return 0;
}

static void put(void *base, size_t at, ftype t, long long v)
{
    char *p = (char *)base + at;

    switch (t) {
    case T_U32:
        *(uint32_t *)(void *)p = (uint32_t)v;
        break;
    case T_I64:
        *(int64_t *)(void *)p = (int64_t)v;
        break;
    case T_BOOL:
        *(bool *)(void *)p = v != 0;
        break;
    case T_INT:
        *(int *)(void *)p = (int)v;
        break;
    case T_SIZE:
        *(size_t *)(void *)p = (size_t)v;
        break;
    case T_TEXT:
        break;
    }
}

/* Keeps a checked number (or flag, or choice's index) in its field. */
static void store(const struct option *o, long long n, sl_url *u)
{
    if (o->flags & NOT)
        n = n == 0;
    else if ((o->flags & NONE0) && n == 0)
        n = -1;
    put(u, o->at, o->type, n);
}

bool sl_option_secret(size_t i)
{
    return i < NOPTIONS && (table[i].flags & SECRET) != 0;
}

bool sl_option_apply(size_t i, const char *v, size_t n, bool secret, sl_url *u,
                     char *msg, size_t msg_len)
{
    const struct option *o;
    /* A value where a password may stand is not quoted. */
    const char *shown = secret ? "***" : v;
    int shown_len = secret ? 3 : (int)(n > 40 ? 40 : n);
    long long num = 0;
    size_t k, cap;
    char *dst;

    if (i >= NOPTIONS) {
        snprintf(msg, msg_len, "no such option");
        return false;
    }
    o = &table[i];
    switch (o->kind) {
    case OPT_MS:
    case OPT_COUNT:
        if (!sl_read_uint(v, n, o->lo, o->hi, &num)) {
            snprintf(msg, msg_len,
                     "option %s=%.*s: expected a whole number%s in "
                     "%lld..%lld: %s",
                     o->name, shown_len, shown,
                     o->kind == OPT_MS ? " of ms" : "", o->lo, o->hi, o->help);
            return false;
        }
        break;
    case OPT_FLAG:
        if (is_word(v, n, "1") || is_word(v, n, "yes") ||
            is_word(v, n, "true") || is_word(v, n, "on"))
            num = 1;
        else if (is_word(v, n, "0") || is_word(v, n, "no") ||
                 is_word(v, n, "false") || is_word(v, n, "off"))
            num = 0;
        else {
            snprintf(msg, msg_len, "option %s=%.*s: expected 1 or 0: %s",
                     o->name, shown_len, shown, o->help);
            return false;
        }
        break;
    case OPT_CHOICE:
        for (k = 0; o->choices[k] != NULL; k++)
            if (is_word(v, n, o->choices[k]))
                break;
        if (o->choices[k] == NULL) {
            size_t at;

            snprintf(msg, msg_len, "option %s=%.*s: expected", o->name,
                     shown_len, shown);
            for (k = 0; o->choices[k] != NULL; k++) {
                at = strlen(msg);
                snprintf(msg + at, msg_len - at, "%s %s=%s",
                         k == 0                      ? ""
                         : o->choices[k + 1] == NULL ? " or"
                                                     : ",",
                         o->name, o->choices[k]);
            }
            return false;
        }
        num = (long long)k;
        break;
    case OPT_TEXT:
    case OPT_TEXT0:
        dst = (char *)u + o->at;
        cap = o->size;
        if (o->kind == OPT_TEXT && n == 0) {
            snprintf(msg, msg_len,
                     "option %s: empty, a bad escape, or longer than %zu "
                     "bytes",
                     o->name, cap - 1);
            return false;
        }
        if (!sl_decode(dst, cap, v, n)) {
            /* Its first 40 bytes quoted, as a number's are. */
            snprintf(msg, msg_len,
                     "option %s=%.*s: a bad escape, or longer than %zu bytes",
                     o->name, shown_len, shown, cap - 1);
            return false;
        }
        break;
    }
    if (o->type != T_TEXT)
        store(o, num, u);
    return true;
}

void sl_options_take(const sluice_options *o, sl_url *u)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++)
        if (table[i].field != NULL)
            put(u, table[i].at, table[i].type,
                get(o, table[i].in, table[i].type));
}

/* Whether v, a value of row o's sluice_options field, is in its range: 0
 * (the default, or off) or lo..hi, a choice's index, or, where the URL's
 * 0 is none, negative too. */
static bool in_range(const struct option *o, long long v)
{
    if (o->kind == OPT_CHOICE) {
        size_t k;

        for (k = 0; o->choices[k] != NULL; k++)
            ;
        return v >= 0 && v < (long long)k;
    }
    return v == 0 || (v < 0 && (o->flags & NONE0)) ||
           (v >= o->lo && v <= o->hi);
}

/* "options.FIELD=VALUE: expected ..." for row o. */
static void expected(const struct option *o, long long v, char *msg,
                     size_t msg_len)
{
    int at = snprintf(msg, msg_len, "options.%s=%lld: expected ", o->field, v);
    size_t k;

    if (at < 0 || (size_t)at >= msg_len)
        return;
    if (o->kind == OPT_CHOICE) {
        /* "SLUICE_FAIL_ERROR, _OPEN, _CLOSED or _FALLBACK" */
        for (k = 0; o->choices[k] != NULL && (size_t)at < msg_len; k++) {
            const char *c = o->choices[k];
            int w = snprintf(msg + at, msg_len - (size_t)at, "%s%s",
                             k == 0                      ? o->unit
                             : o->choices[k + 1] == NULL ? " or _"
                                                         : ", _",
                             "");

            if (w < 0)
                return;
            for (at += w; *c != '\0' && (size_t)at + 1 < msg_len; c++)
                msg[at++] = (char)toupper((unsigned char)*c);
            msg[at] = '\0';
        }
    } else if (o->flags & NONE0) {
        snprintf(msg + at, msg_len - (size_t)at,
                 "at most %lld%s (negative: %s)", o->hi, o->unit, o->zero);
    } else if (o->zero != NULL) {
        snprintf(msg + at, msg_len - (size_t)at, "%lld..%lld%s (0: %s)", o->lo,
                 o->hi, o->unit, o->zero);
    } else {
        snprintf(msg + at, msg_len - (size_t)at,
                 "%lld..%lld%s (0: the default, %lld)", o->lo, o->hi, o->unit,
                 o->def);
    }
}

sluice_status sl_options_check(const sl_url *u, char *msg, size_t msg_len)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++) {
        const struct option *o = &table[i];
        long long v;

        if (o->field == NULL || o->unit == NULL)
            continue;
        v = get(u, o->at, o->type);
        if (in_range(o, v))
            continue;
        expected(o, v, msg, msg_len);
        return (o->flags & EINVAL_STATUS) ? SLUICE_EINVAL : SLUICE_EURL;
    }
    return SLUICE_OK;
}

void sl_options_defaults(sl_url *u)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++)
        if (table[i].def != 0 && get(u, table[i].at, table[i].type) == 0)
            put(u, table[i].at, table[i].type, table[i].def);
}

long long sl_option_default(size_t i)
{
    return i < NOPTIONS ? table[i].def : 0;
}
