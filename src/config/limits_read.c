/* SPDX-License-Identifier: BSD-3-Clause */
/* limits_read.c - a limits file read (limits.h): the schema of
 * docs/LIMITS.md walked over libyaml's events (config/yaml.c reads each
 * value strictly), so that every fault is named with its line and column,
 * what was found and what was expected. The schema's depth (five levels)
 * bounds the walk: anything deeper is refused where it starts. */
#include "config/limits.h"
#include "config/yaml.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define NAME_MAX_LEN 1000

/* A ruleset's text into *rs (or, with listed, "unlimited" and "deny" as
 * kinds into *kind). */
static bool get_rules(sl_yaml *r, const char *key, bool listed,
                      sluice_ruleset *rs, sluice_override_kind *kind)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    char why[SL_ERR_LEN], f[320];
    size_t i;

    if (!sl_yaml_is_scalar(r) || strlen(s) != r->ev.data.scalar.length)
        return sl_yaml_wrong(
            r, key,
            listed ? "rules (e.g. \"fixed:100/1m\"), unlimited or "
                     "deny"
                   : "rules (e.g. \"fixed:100/1m\")");
    /* The rules' own message would quote a line break as it is. */
    for (i = 0; s[i] != '\0'; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return sl_yaml_fail(r, &r->ev.start_mark,
                                "%s %s: expected rules without line breaks "
                                "or other control characters (a block "
                                "scalar keeps its last line break: >- or |- "
                                "drops it)",
                                key, sl_yaml_found(r, f, sizeof(f)));
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
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "%s %s: expected unlimited, deny or rules (%s)",
                            key, sl_yaml_found(r, f, sizeof(f)), why);
    return sl_yaml_fail(r, &r->ev.start_mark, "%s %s: %s", key,
                        sl_yaml_found(r, f, sizeof(f)), why);
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

static bool read_policy(sl_yaml *r, sl_limits_policy *p)
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
    sl_yaml_keys k = {names, "a policy", 0, {{0, 0, 0}}};
    int at, w;
    int64_t v;
    bool ok = true;

    while (ok && (at = sl_yaml_key(r, &k)) >= 0) {
        switch (at) {
        case P_FAIL:
            ok = sl_yaml_word(r, "fail", fails,
                              "error, open, closed or fallback", &w);
            p->fail = (sluice_fail_policy)w;
            p->set |= SL_LIMITS_POLICY_FAIL;
            break;
        case P_INSTANCES:
            ok = sl_yaml_int(r, "fallback_instances", 0, 10000,
                             " (0: the handle's)", &v);
            p->fallback_instances = (uint32_t)v;
            p->set |= SL_LIMITS_POLICY_FAIL;
            break;
        case P_DENY_CACHE:
            ok = sl_yaml_bool(r, "deny_cache", &p->deny_cache);
            p->set |= SL_LIMITS_POLICY_DENY_CACHE;
            break;
        case P_RESERVE_MS:
            ok = sl_yaml_int(r, "reserve_ms", 0, 60000, " ms (0: off)",
                             &p->reserve_ms);
            p->set |= SL_LIMITS_POLICY_RESERVE;
            break;
        case P_SHARE:
            ok = sl_yaml_int(r, "reserve_share", 0, 50,
                             " percent (0: the default)", &v);
            p->reserve_share = (uint32_t)v;
            p->set |= SL_LIMITS_POLICY_RESERVE;
            break;
        case P_SHADOW:
            ok = sl_yaml_bool(r, "shadow", &p->shadow);
            p->set |= SL_LIMITS_POLICY_SHADOW;
            break;
        case P_HTTP_NAME:
            ok = sl_yaml_label(r, "http_name", 63, false, p->http_name);
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        case P_UNIT:
            ok = sl_yaml_word(r, "unit", units,
                              "requests, content-bytes or concurrent-requests",
                              &w);
            p->unit = (sluice_quota_unit)w;
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        case P_UNIT_NAME:
            ok = sl_yaml_label(r, "unit_name", 64, true, p->unit_name);
            p->set |= SL_LIMITS_POLICY_HTTP;
            break;
        }
    }
    if (!ok || at == -2)
        return false;
    /* A field that means nothing without the one it goes with is a
     * mistake to say, not to ignore. */
    if (p->fallback_instances > 0 && p->fail != SLUICE_FAIL_FALLBACK)
        return sl_yaml_fail(
            r, &k.at[P_INSTANCES],
            "fallback_instances %lu: expected fail: fallback beside "
            "it",
            (unsigned long)p->fallback_instances);
    if (p->reserve_share > 0 && p->reserve_ms == 0)
        return sl_yaml_fail(r, &k.at[P_SHARE],
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

static bool read_override(sl_yaml *r, sl_limits_limiter *lim)
{
    static const char *const names[] = {"client", "client_hex", "rules", NULL};
    sl_yaml_keys k = {names, "an override", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    sluice_limiter_override ov;
    sl_limits_override *o;
    char *client = NULL;
    size_t client_len = 0;
    bool ok = true;
    int at;

    memset(&ov, 0, sizeof(ov));
    while (ok && (at = sl_yaml_key(r, &k)) >= 0) {
        if (at == O_RULES) {
            ok = get_rules(r, "rules", true, &ov.rules, &ov.kind);
        } else if (sl_yaml_has(&k, O_CLIENT) && sl_yaml_has(&k, O_CLIENT_HEX)) {
            ok = sl_yaml_fail(r, &k.at[at],
                              "client and client_hex: expected one");
        } else {
            ok = sl_yaml_bytes(r, names[at], at == O_CLIENT_HEX, &client,
                               &client_len);
        }
    }
    if (ok && at != -2 && !sl_yaml_has(&k, O_CLIENT) &&
        !sl_yaml_has(&k, O_CLIENT_HEX))
        ok = sl_yaml_fail(r, &start,
                          "an override without a client: expected client (or "
                          "client_hex for bytes that are not UTF-8)");
    if (ok && at != -2 && !sl_yaml_has(&k, O_RULES))
        ok = sl_yaml_fail(r, &start,
                          "an override without rules: expected rules: RULES, "
                          "unlimited or deny");
    if (ok && at != -2) {
        if (!sl_limits_add_override(lim, client, client_len, &ov)) {
            ok = sl_yaml_nomem(r);
        } else {
            o = &lim->overs[lim->nover - 1];
            o->line = (unsigned)start.line + 1;
            o->col = (unsigned)start.column + 1;
        }
    }
    sl_free(client);
    return ok && at != -2;
}

static bool override_item(sl_yaml *r, void *arg)
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

static bool read_limiter(sl_yaml *r, sl_limits *l)
{
    static const char *const names[] = {
        "name",   "name_hex",  "rules", "keepalive_ms",
        "policy", "overrides", NULL};
    sl_yaml_keys k = {names, "a limiter", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    sl_limits_limiter *lim = sl_limits_add(l, NULL, 0, NULL, 0);
    char q[300];
    bool ok = true, empty;
    int at;

    if (lim == NULL) {
        return sl_yaml_nomem(r);
    }
    lim->line = (unsigned)start.line + 1;
    lim->col = (unsigned)start.column + 1;
    while (ok && (at = sl_yaml_key(r, &k)) >= 0) {
        switch (at) {
        case L_NAME:
        case L_NAME_HEX:
            if (sl_yaml_has(&k, L_NAME) && sl_yaml_has(&k, L_NAME_HEX))
                ok = sl_yaml_fail(r, &k.at[at],
                                  "name and name_hex: expected one");
            else
                ok = sl_yaml_bytes(r, names[at], at == L_NAME_HEX, &lim->name,
                                   &lim->name_len);
            break;
        case L_RULES:
            ok = get_rules(r, "rules", false, &lim->rules, NULL);
            break;
        case L_KEEPALIVE:
            ok = sl_yaml_int(r, "keepalive_ms", 0, SL_MAX_PERIOD_MS,
                             " ms (0: kept until deleted)", &lim->keepalive_ms);
            break;
        case L_POLICY:
            ok = sl_yaml_mapping(r, "policy", &empty) &&
                 (empty || read_policy(r, &lim->policy));
            break;
        case L_OVERRIDES:
            /* lim may move as limiters are added: not while in it. */
            ok = sl_yaml_list(r, "overrides", "an override (a mapping)",
                              override_item, lim);
            break;
        }
    }
    if (!ok || at == -2)
        return false;
    if (!sl_yaml_has(&k, L_NAME) && !sl_yaml_has(&k, L_NAME_HEX))
        return sl_yaml_fail(
            r, &start,
            "a limiter without a name: expected name (or name_hex "
            "for bytes that are not UTF-8)");
    sl_quote(q, sizeof(q), lim->name, lim->name_len);
    if (lim->name_len == 0)
        return sl_yaml_fail(
            r, &k.at[sl_yaml_has(&k, L_NAME) ? L_NAME : L_NAME_HEX],
            "name \"\": expected 1..%d bytes", NAME_MAX_LEN);
    if (!sl_yaml_has(&k, L_RULES))
        return sl_yaml_fail(
            r, &start,
            "limiter \"%s\" without rules: expected rules (e.g. "
            "rules: \"fixed:100/1m\")",
            q);
    return true;
}

static bool limiter_item(sl_yaml *r, void *arg)
{
    return read_limiter(r, arg);
}

/* -------------------------------------------------------------- root */

enum {
    R_VERSION,
    R_LIMITERS
};

static bool read_root(sl_yaml *r, sl_limits *l)
{
    static const char *const names[] = {"version", "limiters", NULL};
    sl_yaml_keys k = {names, "the file", 0, {{0, 0, 0}}};
    yaml_mark_t start = r->ev.start_mark;
    bool ok = true;
    int64_t v;
    int at;

    while (ok && (at = sl_yaml_key(r, &k)) >= 0) {
        if (at == R_VERSION) {
            ok = sl_yaml_int(r, "version", 0, INT32_MAX, "", &v);
            if (ok && v != SL_LIMITS_VERSION)
                ok = sl_yaml_fail(
                    r, &r->ev.start_mark,
                    "version %lld: expected %d (this sluice reads "
                    "version %d)",
                    (long long)v, SL_LIMITS_VERSION, SL_LIMITS_VERSION);
        } else {
            ok = sl_yaml_list(r, "limiters", "a limiter (a mapping)",
                              limiter_item, l);
        }
    }
    if (!ok || at == -2)
        return false;
    if (!sl_yaml_has(&k, R_VERSION))
        return sl_yaml_fail(r, &start, "no version: expected version: %d",
                            SL_LIMITS_VERSION);
    if (!sl_yaml_has(&k, R_LIMITERS))
        return sl_yaml_fail(r, &start,
                            "no limiters: expected limiters: a list (or [] for "
                            "none)");
    return true;
}

/* The stream: one document, a mapping. */
static bool read_stream(sl_yaml *r, sl_limits *l)
{
    char f[320];

    if (!sl_yaml_next(r) || !sl_yaml_next(r))
        return false;
    if (r->ev.type == YAML_STREAM_END_EVENT)
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "empty: expected a mapping with version: %d and "
                            "limiters",
                            SL_LIMITS_VERSION);
    if (!sl_yaml_next(r))
        return false;
    if (r->ev.type != YAML_MAPPING_START_EVENT)
        return sl_yaml_fail(
            r, &r->ev.start_mark,
            "expected a mapping with version and limiters, found %s",
            sl_yaml_found(r, f, sizeof(f)));
    if (!read_root(r, l) || !sl_yaml_next(r) || !sl_yaml_next(r))
        return false;
    if (r->ev.type != YAML_STREAM_END_EVENT)
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "a second document: expected one in the file");
    return true;
}

sluice_status sl_limits_parse(const char *file, const char *buf, size_t len,
                              sl_limits **out, char *err, size_t err_len)
{
    sl_yaml r;
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
    if (!sl_yaml_check(&r)) {
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
