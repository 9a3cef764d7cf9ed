/* SPDX-License-Identifier: BSD-3-Clause */
/* url.c - parses backend URLs and their query options. */
#include "caps.h"
#include "options.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Where a password may stand, for any input: from after the first "//" (or
 * the start, when there is none) to the last '@'. A password may hold '/',
 * '?', '#' or '@' that the user did not escape, so the authority a parser
 * sees can end before the password does: everything up to the last '@' is
 * hidden, the user name too. False when there is no '@'. */
static bool secret_span(const char *url, const char **start, const char **at)
{
    const char *s = strstr(url, "//");

    *at = strrchr(url, '@');
    if (*at == NULL)
        return false;
    *start = s != NULL && s < *at ? s + 2 : url;
    return true;
}

/* Whether p points into the span a password may hold. */
static bool in_secret(const char *url, const char *p)
{
    const char *start, *at;

    return secret_span(url, &start, &at) && p >= start && p < at;
}

/* Hides the value of every secret query option in dst (of dst_len
 * bytes, already redacted up to its last '@'): "sentinel_password=***",
 * what follows cut where it no longer fits. */
static void redact_options(char *dst, size_t dst_len)
{
    static const char key[] = "sentinel_password=";
    char *p = dst;

    while ((p = strstr(p, key)) != NULL) {
        char *v = p + sizeof(key) - 1;
        size_t n = strcspn(v, "&#"), rest = strlen(v + n);
        size_t room = dst_len - (size_t)(v - dst);

        if (p == dst || (p[-1] != '?' && p[-1] != '&')) {
            p = v; /* inside another option's name or value */
            continue;
        }
        if (room < 4) {
            *v = '\0';
            return;
        }
        if (rest > room - 4)
            rest = room - 4;
        memmove(v + 3, v + n, rest);
        memcpy(v, "***", 3);
        v[3 + rest] = '\0';
        p = v + 3;
    }
}

void sl_url_redact(const char *url, char *dst, size_t dst_len)
{
    const char *start, *at;

    if (dst_len == 0)
        return;
    if (url == NULL) {
        snprintf(dst, dst_len, "(null)");
        return;
    }
    if (!secret_span(url, &start, &at))
        snprintf(dst, dst_len, "%s", url);
    else
        snprintf(dst, dst_len, "%.*s***%s", (int)(start - url), url, at);
    redact_options(dst, dst_len);
}

/* The name of query option i, for the tests: the table in options.c. */
const char *sl_url_option(size_t i)
{
    return sl_option_name(i);
}

#define URL_SHOWN 160 /* bytes of a URL a message shows */

static sluice_status bad(char *err, size_t err_len, const char *url,
                         const char *what)
{
    char shown[SL_ERR_LEN];

    sl_url_redact(url, shown, sizeof(shown));
    /* A long URL (a 5,000-byte host name) is cut, so that the message
     * keeps what is wrong with it. */
    if (strlen(shown) > URL_SHOWN)
        sl_errf(err, err_len, "url \"%.*s...\" (%zu bytes): %s", URL_SHOWN,
                shown, strlen(url), what);
    else
        sl_errf(err, err_len, "url \"%s\": %s", shown, what);
    return SLUICE_EURL;
}

/* Applies one option; seen has a bit for each option of the table given
 * already, so that a second one is refused rather than one of them
 * silently ignored. */
static sluice_status apply_option(const char *url, const char *kv, size_t n,
                                  uint32_t *seen, sl_url *u, char *err,
                                  size_t err_len)
{
    const char *eq = memchr(kv, '=', n);
    size_t klen = eq ? (size_t)(eq - kv) : n;
    const char *v = eq ? eq + 1 : kv + n;
    size_t vlen = eq ? n - klen - 1 : 0;
    int i = sl_option_find(kv, klen);
    char msg[600];

    if (i < 0) {
        char known[400];

        sl_option_known(known, sizeof(known));
        if (in_secret(url, kv))
            snprintf(msg, sizeof(msg), "unknown option (known: %s)", known);
        else
            snprintf(msg, sizeof(msg), "unknown option \"%.*s\" (known: %s)",
                     (int)(klen > 40 ? 40 : klen), kv, known);
        return bad(err, err_len, url, msg);
    }
    if ((*seen & (UINT32_C(1) << i)) != 0) {
        snprintf(msg, sizeof(msg),
                 "option %s given twice; give each option once",
                 sl_option_name((size_t)i));
        return bad(err, err_len, url, msg);
    }
    *seen |= UINT32_C(1) << i;
    if (!sl_option_apply((size_t)i, v, vlen,
                         in_secret(url, v) || sl_option_secret((size_t)i), u,
                         msg, sizeof(msg)))
        return bad(err, err_len, url, msg);
    return SLUICE_OK;
}

static sluice_status parse_query(const char *url, const char *q, sl_url *u,
                                 char *err, size_t err_len)
{
    uint32_t seen = 0;

    while (*q != '\0') {
        size_t n = strcspn(q, "&");
        sluice_status st;

        if (n > 0 &&
            (st = apply_option(url, q, n, &seen, u, err, err_len)) != SLUICE_OK)
            return st;
        q += n;
        if (*q == '&')
            q++;
    }
    return SLUICE_OK;
}

static sluice_status parse_mem(const char *url, const char *rest, size_t n,
                               sl_url *u, char *err, size_t err_len)
{
    size_t i;

    if (n >= sizeof(u->name))
        return bad(err, err_len, url, "store name longer than 127 bytes");
    for (i = 0; i < n; i++) {
        char c = rest[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return bad(err, err_len, url,
                       "mem:// store names use letters, digits, '_', '-' and "
                       "'.' only");
    }
    memcpy(u->name, rest, n);
    u->name[n] = '\0';
    return SLUICE_OK;
}

static sluice_status parse_redis(const char *url, const char *rest, size_t n,
                                 sl_url *u, char *err, size_t err_len)
{
    const char *at = NULL, *p, *end = rest + n, *hs, *he, *slash;
    long long num;
    size_t i;

    for (i = 0; i < n; i++)
        if (rest[i] == '@')
            at = rest + i;
    if (at != NULL) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));

        if (colon == NULL) {
            /* "password@host" */
            if (!sl_decode(u->ep.password, sizeof(u->ep.password), rest,
                           (size_t)(at - rest)))
                return bad(err, err_len, url, "bad password (escape?)");
        } else if (!sl_decode(u->ep.user, sizeof(u->ep.user), rest,
                              (size_t)(colon - rest)) ||
                   !sl_decode(u->ep.password, sizeof(u->ep.password), colon + 1,
                              (size_t)(at - colon - 1))) {
            return bad(err, err_len, url, "bad user or password (escape?)");
        }
        p = at + 1;
    } else {
        p = rest;
    }
    slash = memchr(p, '/', (size_t)(end - p));
    if (slash == NULL)
        slash = end;
    if (p < slash && *p == '[') {
        hs = p + 1;
        he = memchr(hs, ']', (size_t)(slash - hs));
        if (he == NULL)
            return bad(err, err_len, url, "unclosed '[' in the host");
        p = he + 1;
    } else {
        hs = p;
        he = p;
        while (he < slash && *he != ':')
            he++;
        p = he;
    }
    if (he == hs)
        return bad(err, err_len, url, "missing host (e.g. 127.0.0.1:6379)");
    if ((size_t)(he - hs) >= sizeof(u->ep.host))
        return bad(err, err_len, url, "host longer than 255 bytes");
    memcpy(u->ep.host, hs, (size_t)(he - hs));
    u->ep.host[he - hs] = '\0';
    u->ep.port = 6379;
    if (p < slash) {
        if (*p != ':' ||
            !sl_read_uint(p + 1, (size_t)(slash - p - 1), 1, 65535, &num)) {
            char msg[96];

            if (in_secret(url, p))
                snprintf(msg, sizeof(msg), "bad port; expected 1..65535");
            else
                snprintf(msg, sizeof(msg),
                         "bad port \"%.*s\"; expected 1..65535",
                         (int)(slash - p > 20 ? 20 : slash - p), p);
            return bad(err, err_len, url, msg);
        }
        u->ep.port = (int)num;
    }
    if (slash < end && slash + 1 < end) {
        if (!sl_read_uint(slash + 1, (size_t)(end - slash - 1), 0, 1000000,
                          &num))
            return bad(err, err_len, url,
                       "bad database number after '/'; expected 0, 1, ...");
        u->ep.db = (int)num;
    }
    return SLUICE_OK;
}

/* "[user:password@]host:port,host:port,...": every seed is checked; the
 * first also fills host and port. No database: clusters have only 0. */
static sluice_status parse_cluster(const char *url, const char *rest, size_t n,
                                   int port, sl_url *u, char *err,
                                   size_t err_len)
{
    const char *at = NULL, *p, *end = rest + n;
    size_t creds, i, first;
    sluice_status st;

    /* The last '@' ends the credentials, as for one server. */
    for (i = 0; i < n; i++)
        if (rest[i] == '@')
            at = rest + i;
    creds = at != NULL ? (size_t)(at - rest + 1) : 0;

    p = rest + creds;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma != NULL ? (size_t)(comma - p) : (size_t)(end - p);
        sl_url tmp;

        if (u->nseeds == SL_MAX_SEEDS)
            return bad(err, err_len, url, "more than 16 seed nodes");
        if (len == 0)
            return bad(err, err_len, url, "empty seed between commas");
        /* Each seed is parsed as a URL of its own, credentials aside. */
        memset(&tmp, 0, sizeof(tmp));
        if ((st = parse_redis(url, p, len, &tmp, err, err_len)) != SLUICE_OK)
            return st;
        if (tmp.ep.db != 0 || memchr(p, '/', len) != NULL)
            return bad(err, err_len, url,
                       "a cluster has no databases: drop the /db");
        snprintf(u->seeds[u->nseeds].host, sizeof(u->seeds[0].host), "%s",
                 tmp.ep.host);
        /* A seed without a port has the scheme's: after a bracketed
         * IPv6 address, or anywhere in a name or IPv4 address. */
        {
            const char *close = p[0] == '[' ? memchr(p, ']', len) : p;
            size_t after = close != NULL ? (size_t)(close - p) : 0;

            u->seeds[u->nseeds++].port =
                memchr(p + after, ':', len - after) != NULL ? tmp.ep.port
                                                            : port;
        }
        p += len + (comma != NULL ? 1 : 0);
        if (comma != NULL && p == end)
            return bad(err, err_len, url, "empty seed after a comma");
    }
    if (u->nseeds == 0)
        return bad(err, err_len, url, "missing host (e.g. 127.0.0.1:7000)");
    /* Credentials, and the first seed as host and port: up to its comma,
     * or to the end of the authority (the query is not part of it). */
    for (first = creds; first < n && rest[first] != ','; first++)
        ;
    return parse_redis(url, rest, first, u, err, err_len);
}

/* "[user:password@]host[:port][,host[:port]...]/MASTER[/db]": the
 * sentinels as a cluster's seeds are (port 26379 when none is given),
 * then the master's name (1 to 127 bytes,
 * percent-escaped where needed) and the data nodes' database. */
static sluice_status parse_sentinel(const char *url, const char *rest, size_t n,
                                    sl_url *u, char *err, size_t err_len)
{
    const char *at = NULL, *end = rest + n, *path, *name, *db;
    long long num;
    size_t i;
    sluice_status st;

    for (i = 0; i < n; i++)
        if (rest[i] == '@')
            at = rest + i;
    path = memchr(at != NULL ? at : rest, '/',
                  (size_t)(end - (at != NULL ? at : rest)));
    if (path == NULL || path + 1 == end)
        return bad(err, err_len, url,
                   "missing the master's name: redis+sentinel://"
                   "host:port[,host:port...]/MASTERNAME");
    if ((st = parse_cluster(url, rest, (size_t)(path - rest), 26379, u, err,
                            err_len)) != SLUICE_OK)
        return st;
    name = path + 1;
    db = memchr(name, '/', (size_t)(end - name));
    if (db == NULL)
        db = end;
    if (db == name ||
        !sl_decode(u->master, sizeof(u->master), name, (size_t)(db - name)) ||
        u->master[0] == '\0')
        return bad(err, err_len, url,
                   "bad master name: 1 to 127 bytes, escaped where needed");
    if (db < end && db + 1 < end) {
        if (!sl_read_uint(db + 1, (size_t)(end - db - 1), 0, 1000000, &num))
            return bad(err, err_len, url,
                       "bad database number after the master's name; "
                       "expected 0, 1, ...");
        u->ep.db = (int)num;
    }
    /* The data nodes' address is the one the sentinels name. */
    u->ep.host[0] = '\0';
    u->ep.port = 0;
    return SLUICE_OK;
}

/* Reads the caller's options as far as the caller's header made them
 * (struct_size): a struct from an older header is shorter than ours, and
 * the fields it lacks stay zero, their defaults; one from a newer header is
 * longer, and is accepted when every field we do not know is zero (as
 * Linux's extensible system calls accept a newer struct). A struct_size of
 * 0, a struct zeroed by hand, means the fields before struct_size. The
 * configuration takes what it keeps; credentials go to the endpoint
 * (credentials_from_options), the prefix is copied (config_prefix). */
static sluice_status copy_options(const sluice_options *in, sluice_options *out,
                                  char *err, size_t err_len)
{
    const size_t base = offsetof(sluice_options, struct_size);
    const size_t min = base + sizeof(in->struct_size);
    size_t n = in->struct_size, i;

    memset(out, 0, sizeof(*out));
    if (n == 0) {
        memcpy(out, in, base);
        return SLUICE_OK;
    }
    if (n < min) {
        sl_errf(err, err_len,
                "options: struct_size %zu is below the smallest layout "
                "(%zu); call sluice_options_init() before setting fields",
                n, min);
        return SLUICE_EINVAL;
    }
    for (i = sizeof(*out); i < n; i++) {
        if (((const unsigned char *)in)[i] != 0) {
            sl_errf(err, err_len,
                    "options: byte %zu is set, a field that libsluice %s "
                    "does not know (struct_size %zu, its own %zu); run "
                    "with the libsluice the program was built against, "
                    "or a newer one",
                    i, SLUICE_VERSION, n, sizeof(*out));
            return SLUICE_EINVAL;
        }
    }
    memcpy(out, in, n < sizeof(*out) ? n : sizeof(*out));
    out->struct_size = sizeof(*out);
    return SLUICE_OK;
}

/* The configuration the options give, before the URL's query: the clock,
 * and the fields of the options table (options.c). */
static void config_of(const sluice_options *o, sl_url *u)
{
    u->cfg.clock = o->clock;
    u->cfg.clock_ctx = o->clock_ctx;
    sl_options_take(o, u);
}

/* Credentials given in the options, where the URL gave none. */
static sluice_status credentials_from_options(const char *url,
                                              const sluice_options *opts,
                                              sl_url *u, char *err,
                                              size_t err_len)
{
    /* mem:// has nothing to log in to: the same options serve a service
     * whatever its URL. */
    if (opts == NULL || u->ep.password[0] != '\0' || opts->password == NULL ||
        opts->password[0] == '\0' || u->scheme == SL_SCHEME_MEM)
        return SLUICE_OK;
    if (u->scheme == SL_SCHEME_TWEMPROXY && opts->user != NULL &&
        opts->user[0] != '\0')
        return bad(err, err_len, url,
                   "twemproxy takes only a password (AUTH with one "
                   "argument): drop options.user (SLUICE_USER for the CLI)");
    if (strlen(opts->password) >= sizeof(u->ep.password))
        return bad(err, err_len, url, "options.password longer than 255 bytes");
    if (opts->user != NULL && strlen(opts->user) >= sizeof(u->ep.user))
        return bad(err, err_len, url, "options.user longer than 127 bytes");
    strcpy(u->ep.password, opts->password);
    if (opts->user != NULL)
        strcpy(u->ep.user, opts->user);
    return SLUICE_OK;
}

/* TLS and a socket where the scheme's backend has them (caps.c). */
static sluice_status check_transport(const char *url, const sl_url *u,
                                     char *err, size_t err_len)
{
    unsigned need = (u->ep.tls ? SL_CAP_SERVER | SL_CAP_TLS : 0) |
                    (u->ep.socket[0] ? SL_CAP_SERVER | SL_CAP_SOCKET : 0);
    const sl_refusal *r =
        sl_caps_refusal(SL_ASK_TRANSPORT, need, sl_caps_of_scheme(u->scheme));

    if (r == NULL)
        return SLUICE_OK;
    bad(err, err_len, url, r->text);
    return r->status;
}

/* The sentinels' options only with a sentinel scheme; then the
 * sentinels' endpoint: TLS as the data nodes unless sentinel_tls= says,
 * with the same CA and client certificate. */
static sluice_status check_sentinel(const char *url, sl_url *u, char *err,
                                    size_t err_len)
{
    sl_endpoint *s = &u->sentinel_ep;

    if (!u->sentinel) {
        if (s->user[0] || s->password[0] || u->sentinel_tls >= 0)
            return bad(err, err_len, url,
                       "sentinel_* options need a sentinel scheme "
                       "(redis+sentinel://, redis+multi+sentinel://)");
        return SLUICE_OK;
    }
    if (u->ep.socket[0] != '\0')
        return bad(err, err_len, url,
                   "option socket: with sentinels, the master is reached at "
                   "the address they name");
    s->tls = u->sentinel_tls < 0 ? u->ep.tls : u->sentinel_tls == 1;
    s->tls_insecure = u->ep.tls_insecure;
    s->reply_max_bytes = u->ep.reply_max_bytes;
    memcpy(s->tls_ca_file, u->ep.tls_ca_file, sizeof(s->tls_ca_file));
    memcpy(s->tls_ca_dir, u->ep.tls_ca_dir, sizeof(s->tls_ca_dir));
    memcpy(s->tls_cert, u->ep.tls_cert, sizeof(s->tls_cert));
    memcpy(s->tls_key, u->ep.tls_key, sizeof(s->tls_key));
    return SLUICE_OK;
}

/* The fields of sluice_options that the URL's table did not check (a
 * value from the URL is in range already; deny_cache is checked at open),
 * each message quoting the value as the URL's forms do ("option
 * reserve_ms=70000: ..."). */
/* The options' values against their rows' ranges (options.c). */
static sluice_status check_config(const char *url, const sl_url *u, char *err,
                                  size_t err_len)
{
    char what[200];
    sluice_status st = sl_options_check(u, what, sizeof(what));

    if (st != SLUICE_OK)
        bad(err, err_len, url, what);
    return st;
}

sluice_status sl_url_parse(const char *url, const sluice_options *opts,
                           sl_url *out, char *err, size_t err_len)
{
    static const struct {
        const char *prefix;
        sl_scheme scheme;
    } schemes[] = {{"mem://", SL_SCHEME_MEM},
                   {"redis://", SL_SCHEME_REDIS},
                   {"rediss://", SL_SCHEME_REDIS},
                   {"redis+multi://", SL_SCHEME_MULTI},
                   {"twemproxy://", SL_SCHEME_TWEMPROXY},
                   {"redis-cluster://", SL_SCHEME_CLUSTER},
                   {"redis+sentinel://", SL_SCHEME_REDIS},
                   {"rediss+sentinel://", SL_SCHEME_REDIS},
                   {"redis+multi+sentinel://", SL_SCHEME_MULTI}};
    const char *rest = NULL, *q;
    sluice_options given;
    size_t i, n;
    sluice_status st;

    if (url == NULL) {
        sl_errf(err, err_len, "url: NULL");
        return SLUICE_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memset(&given, 0, sizeof(given));
    if (opts != NULL &&
        (st = copy_options(opts, &given, err, err_len)) != SLUICE_OK)
        return st;
    config_of(&given, out);
    for (i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t plen = strlen(schemes[i].prefix);

        /* Schemes are case-insensitive (RFC 3986, 3.1). */
        if (strncasecmp(url, schemes[i].prefix, plen) == 0) {
            out->scheme = schemes[i].scheme;
            out->ep.tls = strncmp(schemes[i].prefix, "rediss", 6) == 0;
            out->sentinel = strstr(schemes[i].prefix, "sentinel") != NULL;
            rest = url + plen;
        }
    }
    if (rest == NULL)
        return bad(err, err_len, url,
                   "unknown scheme; use mem://, "
                   "redis://[user:password@]host:port[/db] (rediss:// with "
                   "TLS), redis+multi://"
                   "[user:password@]host:port[/db], "
                   "twemproxy://[password@]host:port, "
                   "redis-cluster://[user:password@]host:port[,host:port] or "
                   "redis+sentinel://[user:password@]host:port[,host:port]/"
                   "MASTER (redis+multi+sentinel://, rediss+sentinel://)");
    q = strchr(rest, '?');
    n = q ? (size_t)(q - rest) : strlen(rest);
    out->sentinel_tls = -1;
    if (out->scheme == SL_SCHEME_MEM)
        st = parse_mem(url, rest, n, out, err, err_len);
    else if (out->sentinel)
        st = parse_sentinel(url, rest, n, out, err, err_len);
    else if (out->scheme == SL_SCHEME_CLUSTER)
        st = parse_cluster(url, rest, n, 6379, out, err, err_len);
    else
        st = parse_redis(url, rest, n, out, err, err_len);
    if (st != SLUICE_OK)
        return st;
    if ((st = credentials_from_options(url, opts ? &given : NULL, out, err,
                                       err_len)) != SLUICE_OK)
        return st;
    if (out->scheme == SL_SCHEME_TWEMPROXY && (out->ep.user[0] || out->ep.db))
        return bad(err, err_len, url,
                   "twemproxy takes only a password (AUTH with one "
                   "argument) and no database: use the pool's redis_db");
    if (given.key_prefix != NULL) {
        if (strlen(given.key_prefix) >= sizeof(out->cfg.prefix))
            return bad(err, err_len, url, "key_prefix longer than 63 bytes");
        strcpy(out->cfg.prefix, given.key_prefix);
    } else {
        strcpy(out->cfg.prefix, "sluice:");
    }
    if (given.limits_file != NULL) {
        if (strlen(given.limits_file) >= sizeof(out->limits_file))
            return bad(err, err_len, url,
                       "options.limits_file longer than 1023 bytes");
        strcpy(out->limits_file, given.limits_file);
    }
    if (q != NULL &&
        (st = parse_query(url, q + 1, out, err, err_len)) != SLUICE_OK)
        return st;
    if ((st = check_transport(url, out, err, err_len)) != SLUICE_OK)
        return st;
    if (!out->ep.tls && (out->ep.tls_ca_file[0] || out->ep.tls_ca_dir[0] ||
                         out->ep.tls_cert[0] || out->ep.tls_key[0] ||
                         out->ep.tls_server_name[0] || out->ep.tls_insecure))
        return bad(err, err_len, url,
                   "tls_* options without TLS: use rediss:// or tls=1");
    if ((st = check_sentinel(url, out, err, err_len)) != SLUICE_OK)
        return st;
    if (out->ep.socket[0] != '\0' && out->ep.socket[0] != '/')
        return bad(err, err_len, url,
                   "option socket: expected an absolute path");
    if (strpbrk(out->cfg.prefix, "{}") != NULL)
        return bad(err, err_len, url,
                   "key prefix may not hold '{' or '}': the key's hash tag "
                   "must be the first braces");
    if ((st = check_config(url, out, err, err_len)) != SLUICE_OK)
        return st;
    sl_options_defaults(out);
    return SLUICE_OK;
}
