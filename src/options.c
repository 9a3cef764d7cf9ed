/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c - the one table of URL query options. Each row names an
 * option, the shape and range of its value and what it does; the table
 * drives the URL parser (url.c applies a query through it), the message
 * for an unknown option, `sluice --help`, and the test that the docs name
 * every option. Adding an option is adding a row and its case in store(). */
#include "options.h"

#include <ctype.h>
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

typedef enum {
    TIMEOUT_MS,
    CONNECT_TIMEOUT_MS,
    CLOCK,
    FAIL,
    PREFIX,
    TTL_FLOOR_MS,
    DENY_CACHE,
    METRICS,
    SHADOW,
    FALLBACK_INSTANCES,
    FALLBACK_MAX_KEYS,
    RULES_CACHE_MS,
    RULES_STALE_MS,
    LIMITS_FILE,
    RESERVE_MS,
    RESERVE_SHARE,
    MAX_REPLY_BYTES,
    SOCKET,
    TLS,
    TLS_VERIFY,
    TLS_CA_FILE,
    TLS_CA_DIR,
    TLS_CERT,
    TLS_KEY,
    TLS_SERVER_NAME,
    SENTINEL_USER,
    SENTINEL_PASSWORD,
    SENTINEL_TLS
} option_id;

static const char *const clocks[] = {"local", "server", NULL};
/* In the order of sluice_fail_policy. */
static const char *const fails[] = {"error", "open", "closed", "fallback",
                                    NULL};

static const struct option {
    option_id id;
    const char *name;
    kind kind;
    const char *value; /* the value's shape in --help: "N", "0|1" */
    long long lo, hi;
    const char *const *choices;
    const char *help;
} table[] = {
    {TIMEOUT_MS, "timeout_ms", OPT_MS, "N", 1, 86400000, NULL,
     "a call's whole budget (default 250)"},
    {CONNECT_TIMEOUT_MS, "connect_timeout_ms", OPT_MS, "N", 1, 86400000, NULL,
     "one connect (default 1000)"},
    {CLOCK, "clock", OPT_CHOICE, "local|server", 0, 0, clocks,
     "whose clock decides (default local)"},
    {FAIL, "fail", OPT_CHOICE, "error|open|closed|fallback", 0, 0, fails,
     "when the store fails (default error)"},
    {PREFIX, "prefix", OPT_TEXT0, "P", 0, 0, NULL,
     "every key's prefix (default \"sluice:\")"},
    {TTL_FLOOR_MS, "ttl_floor_ms", OPT_MS, "N", 1, 86400000, NULL,
     "the least TTL of a key (default 1000)"},
    {DENY_CACHE, "deny_cache", OPT_COUNT, "N", 0, 1000000, NULL,
     "denials kept locally (0: off, default)"},
    {METRICS, "metrics", OPT_FLAG, "0|1", 0, 0, NULL,
     "count for sluice_stats (default 1)"},
    {SHADOW, "shadow", OPT_FLAG, "0|1", 0, 0, NULL,
     "admit all, report denials (default 0)"},
    {FALLBACK_INSTANCES, "fallback_instances", OPT_COUNT, "N", 1, 10000, NULL,
     "instances sharing fail=fallback's limit"},
    {FALLBACK_MAX_KEYS, "fallback_max_keys", OPT_COUNT, "N", 0, 1000000000,
     NULL, "keys in memory, LRU evicted (0: no bound)"},
    {RULES_CACHE_MS, "rules_cache_ms", OPT_MS, "N", 0, 86400000, NULL,
     "rules of limiters kept (default 1000)"},
    {RULES_STALE_MS, "rules_stale_ms", OPT_MS, "N", 0, 86400000, NULL,
     "rules used when unreadable (default 3600000)"},
    {LIMITS_FILE, "limits_file", OPT_TEXT, "PATH", 0, 0, NULL,
     "limiters defined from a file (docs/LIMITS.md)"},
    {RESERVE_MS, "reserve_ms", OPT_MS, "N", 0, 60000, NULL,
     "reserve hot keys' units, held N ms (0: off)"},
    {RESERVE_SHARE, "reserve_share", OPT_COUNT, "PCT", 1, 50, NULL,
     "most a handle reserves, % (default 10)"},
    {MAX_REPLY_BYTES, "max_reply_bytes", OPT_COUNT, "N", 1024, 1073741824, NULL,
     "the largest reply (default 8388608)"},
    {SOCKET, "socket", OPT_TEXT, "PATH", 0, 0, NULL,
     "a Unix-domain socket, not TCP"},
    {TLS, "tls", OPT_FLAG, "0|1", 0, 0, NULL,
     "TLS (rediss:// is redis:// with tls=1)"},
    {TLS_VERIFY, "tls_verify", OPT_FLAG, "0|1", 0, 0, NULL,
     "verify the server (default 1)"},
    {TLS_CA_FILE, "tls_ca_file", OPT_TEXT, "F", 0, 0, NULL,
     "CA certificates to verify with"},
    {TLS_CA_DIR, "tls_ca_dir", OPT_TEXT, "D", 0, 0, NULL,
     "a directory of CA certificates"},
    {TLS_CERT, "tls_cert", OPT_TEXT, "F", 0, 0, NULL,
     "this client's certificate"},
    {TLS_KEY, "tls_key", OPT_TEXT, "F", 0, 0, NULL,
     "this client's private key"},
    {TLS_SERVER_NAME, "tls_server_name", OPT_TEXT, "NAME", 0, 0, NULL,
     "SNI and verified name (default host)"},
    {SENTINEL_USER, "sentinel_user", OPT_TEXT, "U", 0, 0, NULL,
     "the sentinels' ACL user (+sentinel)"},
    {SENTINEL_PASSWORD, "sentinel_password", OPT_TEXT, "P", 0, 0, NULL,
     "the sentinels' password (+sentinel)"},
    {SENTINEL_TLS, "sentinel_tls", OPT_FLAG, "0|1", 0, 0, NULL,
     "TLS to the sentinels (default: as the nodes)"},
};

#define NOPTIONS (sizeof(table) / sizeof(table[0]))

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

/* Where a text option is kept, and its room. */
static char *text_of(option_id id, sl_url *u, size_t *cap)
{
    *cap = 256;
    switch (id) {
    case PREFIX:
        *cap = sizeof(u->cfg.prefix);
        return u->cfg.prefix;
    case SOCKET:
        *cap = sizeof(u->ep.socket);
        return u->ep.socket;
    case LIMITS_FILE:
        *cap = sizeof(u->limits_file);
        return u->limits_file;
    case TLS_CA_FILE:
        return u->ep.tls_ca_file;
    case TLS_CA_DIR:
        return u->ep.tls_ca_dir;
    case TLS_CERT:
        return u->ep.tls_cert;
    case TLS_KEY:
        return u->ep.tls_key;
    case TLS_SERVER_NAME:
        return u->ep.tls_server_name;
    case SENTINEL_USER:
        *cap = sizeof(u->sentinel_ep.user);
        return u->sentinel_ep.user;
    case SENTINEL_PASSWORD:
        *cap = sizeof(u->sentinel_ep.password);
        return u->sentinel_ep.password;
    default:
        return NULL;
    }
}

/* Keeps a checked number (or flag, or choice's index) where it belongs. */
static void store(option_id id, long long n, sl_url *u)
{
    switch (id) {
    case TIMEOUT_MS:
        u->cfg.command_timeout_ms = (uint32_t)n;
        break;
    case CONNECT_TIMEOUT_MS:
        u->cfg.connect_timeout_ms = (uint32_t)n;
        break;
    case TTL_FLOOR_MS:
        u->cfg.ttl_floor_ms = (uint32_t)n;
        break;
    case CLOCK:
        u->cfg.server_clock = n == 1;
        break;
    case FAIL:
        u->cfg.fail = (sluice_fail_policy)n;
        break;
    case DENY_CACHE:
        u->cfg.deny_cache = (uint32_t)n;
        break;
    case METRICS:
        u->cfg.no_metrics = n == 0;
        break;
    case SHADOW:
        u->cfg.shadow = n != 0;
        break;
    case FALLBACK_INSTANCES:
        u->cfg.fallback_instances = (uint32_t)n;
        break;
    case FALLBACK_MAX_KEYS:
        /* 0 in the URL is no bound: -1, where 0 means the default. */
        u->cfg.fallback_max_keys = n == 0 ? -1 : (int64_t)n;
        break;
    case RULES_CACHE_MS:
        /* 0 in the URL reads the rules with every decision: -1 in the
         * options, where 0 means the default. */
        u->cfg.rules_cache_ms = n == 0 ? -1 : (int64_t)n;
        break;
    case RULES_STALE_MS:
        /* As rules_cache_ms: 0 in the URL never uses stale rules. */
        u->cfg.rules_stale_ms = n == 0 ? -1 : (int64_t)n;
        break;
    case RESERVE_MS:
        u->cfg.reserve_ms = (int64_t)n;
        break;
    case RESERVE_SHARE:
        u->cfg.reserve_share = (uint32_t)n;
        break;
    case MAX_REPLY_BYTES:
        u->ep.reply_max_bytes = (size_t)n;
        break;
    case TLS:
        u->ep.tls = n != 0;
        break;
    case TLS_VERIFY:
        u->ep.tls_insecure = n == 0;
        break;
    case SENTINEL_TLS:
        u->sentinel_tls = (int)n;
        break;
    default:
        break;
    }
}

bool sl_option_secret(size_t i)
{
    return i < NOPTIONS && table[i].id == SENTINEL_PASSWORD;
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
        dst = text_of(o->id, u, &cap);
        if ((o->kind == OPT_TEXT && n == 0) || dst == NULL ||
            !sl_decode(dst, cap, v, n)) {
            snprintf(msg, msg_len,
                     "option %s: %sa bad escape, or longer than %zu bytes",
                     o->name, o->kind == OPT_TEXT ? "empty, " : "", cap - 1);
            return false;
        }
        break;
    }
    store(o->id, num, u);
    return true;
}
