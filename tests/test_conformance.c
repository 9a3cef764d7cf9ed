/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conformance.c - runs the scenario tables (the .scn files in
 * tests/conformance, written from the semantics, not from the code) on one
 * backend: test_conformance URL|@urlfile FILE.scn... Every scenario is one
 * cmocka test on a fresh key prefix. On Redis backends it also checks
 * afterwards that no key was left without a TTL.
 *
 * With --alternate URL (repeatable), the steps of each scenario go to the
 * backends in turn, on the same keys: backends sharing a server must share
 * their state, or the counts split and the tables fail. Steps that the
 * first backend refuses (--unsupported) go to the next one. */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define MAX_STEPS 256

typedef struct step {
    int line;
    char op[16];
    int64_t t;
    char key[1100];
    size_t key_len;
    int64_t cost;
    char rule[256];
    bool expect_error;
    bool expect_ok; /* "=> ok": release, set, delete */
    char status[32];
    sluice_result want;
    int64_t want_granted; /* acquire_at_most */
    /* Named limiters: a client id (client=); define, set: keepalive=;
     * define and get answer "=> rules TEXT [KEEPALIVE]". */
    char client[256];
    size_t client_len;
    int64_t keepalive;
    char want_rules[256];
    int64_t want_keepalive; /* -1: not checked */
    /* Leases: lease KEY MAX LEASE_MS as=NAME; release KEY as=NAME. */
    int64_t max, lease_ms;
    char as[32];
    /* Settles: settle KEY RESERVED ACTUAL. */
    int64_t reserved, actual;
    /* Overrides: override NAME client=C [rule=R | over=unlimited|deny]. */
    char over[16];
} step;

typedef struct scenario {
    char name[128];
    char file[256];
    size_t nsteps;
    step steps[MAX_STEPS];
} scenario;

#define MAX_URLS 4

static const char *url;
static const char *urls[MAX_URLS]; /* urls[0] = url, then --alternate */
static char *owned[MAX_URLS];      /* copies of the alternates */
static size_t nurls;
static char servers[1024];    /* host:port,... whose keys must have TTLs */
static char unsupported[128]; /* algorithms the backend refuses */
static scenario *scenarios;
static size_t nscenarios;

static const char *status_name(sluice_status st)
{
    switch (st) {
#define SLUICE_X(name, msg) \
    case SLUICE_##name:     \
        return #name;
        SLUICE_STATUS_MAP(SLUICE_X)
#undef SLUICE_X
    }
    return "?";
}

static void parse_key(step *s, const char *tok)
{
    long n;

    if (strcmp(tok, "<empty>") == 0) {
        s->key_len = 0;
    } else if (sscanf(tok, "<long:%ld>", &n) == 1 && n > 0 &&
               (size_t)n < sizeof(s->key)) {
        memset(s->key, 'x', (size_t)n);
        s->key_len = (size_t)n;
    } else {
        s->key_len = strlen(tok);
        memcpy(s->key, tok, s->key_len);
    }
}

static void die(const char *file, int line, const char *why)
{
    fprintf(stderr, "%s:%d: %s\n", file, line, why);
    exit(2);
}

static bool known_op(const char *op)
{
    static const char *const ops[] = {
        "acquire",   "peek",     "reset",   "acquire_at_most",
        "refund",    "lease",    "release", "define",
        "set",       "get",      "delete",  "acquire_by",
        "peek_by",   "reset_by", "settle",  "override",
        "unoverride"};
    size_t i;

    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

/* Decisions by key, and the limiter ops that store rules, take theirs
 * from the table; leases, reads and decisions by name take none. */
static bool takes_table_rules(const char *op)
{
    return strstr(op, "_by") == NULL && strcmp(op, "lease") != 0 &&
           strcmp(op, "release") != 0 && strcmp(op, "get") != 0 &&
           strcmp(op, "delete") != 0 && strcmp(op, "unoverride") != 0;
}

/* Parses one table file, appending scenarios. */
static void load(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[4096], rule[256] = "";
    int line = 0;
    scenario *cur = NULL;

    if (f == NULL)
        die(path, 0, "cannot open");
    while (fgets(buf, sizeof(buf), f) != NULL) {
        char *tok[32], *save = NULL, *p;
        int n = 0, i;
        step *s;

        line++;
        if ((p = strchr(buf, '#')) != NULL)
            *p = '\0';
        for (p = strtok_r(buf, " \t\r\n", &save); p != NULL && n < 32;
             p = strtok_r(NULL, " \t\r\n", &save))
            tok[n++] = p;
        if (n == 0)
            continue;
        if (strcmp(tok[0], "scenario") == 0) {
            if (n != 2)
                die(path, line, "scenario NAME");
            scenarios = realloc(scenarios, (nscenarios + 1) * sizeof(*cur));
            cur = &scenarios[nscenarios++];
            memset(cur, 0, sizeof(*cur));
            snprintf(cur->name, sizeof(cur->name), "%s", tok[1]);
            snprintf(cur->file, sizeof(cur->file), "%s", path);
            rule[0] = '\0';
            continue;
        }
        if (cur == NULL)
            die(path, line, "step before any scenario");
        if (strcmp(tok[0], "rule") == 0) {
            if (n != 2)
                die(path, line, "rule RULE");
            snprintf(rule, sizeof(rule), "%s", tok[1]);
            continue;
        }
        if (cur->nsteps == MAX_STEPS)
            die(path, line, "too many steps");
        s = &cur->steps[cur->nsteps++];
        memset(s, 0, sizeof(*s));
        s->line = line;
        if (n < 4)
            die(path, line, "T OP KEY [COST] [rule=R] => EXPECTED");
        s->t = strtoll(tok[0], NULL, 10);
        snprintf(s->op, sizeof(s->op), "%s", tok[1]);
        parse_key(s, tok[2]);
        snprintf(s->rule, sizeof(s->rule), "%s", rule);
        s->want_keepalive = -1;
        if (!known_op(s->op))
            die(path, line,
                "op must be acquire, peek, reset, acquire_at_most, refund, "
                "lease, release, define, set, get, delete, acquire_by, "
                "peek_by, reset_by, settle, override or unoverride");
        /* Numbers (cost; or max and lease time), then name=value. */
        {
            int64_t num[2];
            int nnum = 0;

            for (i = 3; i < n && strcmp(tok[i], "=>") != 0; i++) {
                if (strncmp(tok[i], "rule=", 5) == 0)
                    snprintf(s->rule, sizeof(s->rule), "%s", tok[i] + 5);
                else if (strncmp(tok[i], "client=", 7) == 0) {
                    s->client_len = strlen(tok[i] + 7);
                    memcpy(s->client, tok[i] + 7, s->client_len);
                } else if (strncmp(tok[i], "keepalive=", 10) == 0)
                    s->keepalive = strtoll(tok[i] + 10, NULL, 10);
                else if (strncmp(tok[i], "over=", 5) == 0)
                    snprintf(s->over, sizeof(s->over), "%s", tok[i] + 5);
                else if (strncmp(tok[i], "as=", 3) == 0)
                    snprintf(s->as, sizeof(s->as), "%s", tok[i] + 3);
                else if (nnum < 2)
                    num[nnum++] = strtoll(tok[i], NULL, 10);
                else
                    die(path, line, "too many numbers before '=>'");
            }
            if (strcmp(s->op, "lease") == 0) {
                if (nnum != 2 || s->as[0] == '\0')
                    die(path, line, "lease KEY MAX LEASE_MS as=NAME");
                s->max = num[0];
                s->lease_ms = num[1];
            } else if (strcmp(s->op, "settle") == 0) {
                if (nnum != 2)
                    die(path, line, "settle KEY RESERVED ACTUAL");
                s->reserved = num[0];
                s->actual = num[1];
            } else if (strcmp(s->op, "release") == 0) {
                if (nnum != 0 || s->as[0] == '\0')
                    die(path, line, "release KEY as=NAME");
            } else if (nnum == 1) {
                s->cost = num[0];
            } else if (nnum != 0) {
                die(path, line, "one number (the cost) before '=>'");
            }
        }
        if (i >= n)
            die(path, line, "expected '=>'");
        i++;
        if (i < n && strcmp(tok[i], "error") == 0 && i + 1 < n) {
            s->expect_error = true;
            snprintf(s->status, sizeof(s->status), "%s", tok[i + 1]);
        } else if (strcmp(s->op, "reset") == 0 ||
                   strcmp(s->op, "reset_by") == 0) {
            if (i >= n || strcmp(tok[i], "reset") != 0)
                die(path, line, "a reset expects '=> reset'");
        } else if (strcmp(s->op, "release") == 0 || strcmp(s->op, "set") == 0 ||
                   strcmp(s->op, "delete") == 0 ||
                   strcmp(s->op, "override") == 0 ||
                   strcmp(s->op, "unoverride") == 0) {
            if (i >= n || strcmp(tok[i], "ok") != 0)
                die(path, line, "expected '=> ok' or '=> error STATUS'");
            s->expect_ok = true;
        } else if (strcmp(s->op, "define") == 0 || strcmp(s->op, "get") == 0) {
            if (n - i < 2 || n - i > 3 || strcmp(tok[i], "rules") != 0)
                die(path, line, "expected '=> rules TEXT [KEEPALIVE]'");
            snprintf(s->want_rules, sizeof(s->want_rules), "%s", tok[i + 1]);
            if (n - i == 3)
                s->want_keepalive = strtoll(tok[i + 2], NULL, 10);
        } else {
            /* An acquire at most answers GRANTED first. */
            if (strcmp(s->op, "acquire_at_most") == 0) {
                if (n - i != 6)
                    die(path, line,
                        "expected GRANTED ALLOWED LIMIT REMAINING RETRY "
                        "RESET");
                s->want_granted = strtoll(tok[i++], NULL, 10);
            }
            /* A status other than ok, last: status=NAME. */
            if (n - i == 6 && strncmp(tok[n - 1], "status=", 7) == 0)
                snprintf(s->status, sizeof(s->status), "%s", tok[--n] + 7);
            if (n - i != 5)
                die(path, line,
                    "expected ALLOWED LIMIT REMAINING RETRY "
                    "RESET [status=NAME]");
            s->want.allowed = strtol(tok[i], NULL, 10) == 1;
            s->want.limit = strtoll(tok[i + 1], NULL, 10);
            s->want.remaining = strtoll(tok[i + 2], NULL, 10);
            s->want.retry_after_ms = strtoll(tok[i + 3], NULL, 10);
            s->want.reset_after_ms = strtoll(tok[i + 4], NULL, 10);
        }
    }
    fclose(f);
}

/* True when the comma-separated list holds tok. */
static bool has_token(const char *list, const char *tok)
{
    size_t n = strlen(tok);
    const char *p;

    for (p = list; (p = strstr(p, tok)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* True when the step's rule uses an algorithm the backend refuses, or
 * its op is one the backend refuses (refund), or its rules have a block
 * the backend refuses (block). */
static bool refused(const step *s)
{
    static const char *const names[] = {"",    "fixed", "sliding",
                                        "log", "token", "gcra"};
    sluice_ruleset rs;
    size_t i;

    if (unsupported[0] == '\0' ||
        sluice_ruleset_parse(s->rule, &rs, NULL, 0) != SLUICE_OK)
        return false;
    /* Of the named limiters' and leases' ops, only a decision by name can
     * be refused: by the limiter's rules (the scenario's). */
    if (strcmp(s->op, "lease") == 0 || strcmp(s->op, "release") == 0 ||
        strcmp(s->op, "define") == 0 || strcmp(s->op, "set") == 0 ||
        strcmp(s->op, "get") == 0 || strcmp(s->op, "delete") == 0 ||
        strcmp(s->op, "reset_by") == 0 || strcmp(s->op, "override") == 0 ||
        strcmp(s->op, "unoverride") == 0)
        return false;
    /* force: a settle's excess (actual above reserved) is refused; a
     * settle below is a refund. */
    if (strcmp(s->op, "settle") == 0 && s->actual > s->reserved &&
        has_token(unsupported, "force"))
        return true;
    /* ceiling: an excess that may reach a rule's ceiling is refused (a
     * rule whose ceiling is its capacity, max(capacity, (2^50 - 1) / P)
     * = capacity: the tables' only such rule reaches it). */
    for (i = 0; strcmp(s->op, "settle") == 0 && s->actual > s->reserved &&
                has_token(unsupported, "ceiling") && i < rs.count;
         i++)
        if ((rs.rules[i].burst > 0 ? rs.rules[i].burst : rs.rules[i].limit) >=
            1125899906842623LL / rs.rules[i].period_ms)
            return true;
    if (strcmp(s->op, "refund") == 0 ||
        (strcmp(s->op, "settle") == 0 && s->actual <= s->reserved)) {
        if (has_token(unsupported, "refund"))
            return true;
        /* window-refund: refunds of fixed, sliding or log are refused. */
        for (i = 0; i < rs.count; i++)
            if (has_token(unsupported, "window-refund") &&
                rs.rules[i].algorithm != SLUICE_TOKEN &&
                rs.rules[i].algorithm != SLUICE_GCRA)
                return true;
    }
    /* block: decisions on rules with a block are refused. */
    for (i = 0; i < rs.count; i++)
        if (has_token(unsupported, "block") && rs.rules[i].block_s != 0 &&
            strcmp(s->op, "refund") != 0 && strcmp(s->op, "settle") != 0)
            return true;
    for (i = 0; i < rs.count; i++)
        if (strstr(unsupported, names[rs.rules[i].algorithm]) != NULL)
            return true;
    return false;
}

/* The leases a scenario took, by the names the table gives them. */
typedef struct held {
    char as[32];
    sluice_lease lease;
} held;

static sluice_lease *held_lease(held *hs, size_t *n, const char *as)
{
    size_t i;

    for (i = 0; i < *n; i++)
        if (strcmp(hs[i].as, as) == 0)
            return &hs[i].lease;
    assert_true(*n < MAX_STEPS);
    snprintf(hs[*n].as, sizeof(hs[*n].as), "%s", as);
    memset(&hs[*n].lease, 0, sizeof(hs[*n].lease));
    return &hs[(*n)++].lease;
}

/* The ruleset as its normal text, for comparing rules written apart. */
static void normal_rules(const sluice_ruleset *rs, char *buf, size_t len)
{
    if (sluice_ruleset_format(rs, buf, len) >= len)
        fail_msg("rules longer than %zu bytes", len);
}

/* An override set (the table's rules, or over=unlimited|deny) or
 * removed. */
static sluice_status run_override(sluice *sl, const step *s,
                                  const sluice_ruleset *rs)
{
    sluice_limiter_override ov;

    if (strcmp(s->op, "unoverride") == 0)
        return sluice_limiter_override_delete(sl, s->key, s->key_len, s->client,
                                              s->client_len, NULL);
    memset(&ov, 0, sizeof(ov));
    ov.kind = strcmp(s->over, "unlimited") == 0 ? SLUICE_OVERRIDE_UNLIMITED
              : strcmp(s->over, "deny") == 0    ? SLUICE_OVERRIDE_DENY
                                                : SLUICE_OVERRIDE_RULES;
    ov.rules = *rs;
    return sluice_limiter_override_set(sl, s->key, s->key_len, s->client,
                                       s->client_len, &ov);
}

/* Runs the named limiters' and leases' ops; false for any other op. */
static bool run_named(sluice *sl, const step *s, const sluice_ruleset *rs,
                      held *hs, size_t *nheld, sluice_result *got,
                      sluice_status *st, char *rules_got, size_t rules_len,
                      int64_t *keepalive_got)
{
    const char *c = s->client_len > 0 ? s->client : NULL;
    sluice_ruleset stored;

    rules_got[0] = '\0';
    *keepalive_got = -1;
    if (strcmp(s->op, "lease") == 0)
        *st = sluice_lease_acquire(sl, s->key, s->key_len, s->max, s->lease_ms,
                                   held_lease(hs, nheld, s->as), got);
    else if (strcmp(s->op, "release") == 0)
        *st = sluice_lease_release(sl, s->key, s->key_len,
                                   held_lease(hs, nheld, s->as));
    else if (strcmp(s->op, "define") == 0)
        *st = sluice_limiter_define(sl, s->key, s->key_len, rs, s->keepalive,
                                    &stored);
    else if (strcmp(s->op, "set") == 0)
        *st = sluice_limiter_set(sl, s->key, s->key_len, rs, s->keepalive);
    else if (strcmp(s->op, "get") == 0)
        *st =
            sluice_limiter_get(sl, s->key, s->key_len, &stored, keepalive_got);
    else if (strcmp(s->op, "delete") == 0)
        *st = sluice_limiter_delete(sl, s->key, s->key_len);
    else if (strcmp(s->op, "acquire_by") == 0)
        *st = sluice_limiter_acquire(sl, s->key, s->key_len, c, s->client_len,
                                     s->cost, got);
    else if (strcmp(s->op, "peek_by") == 0)
        *st = sluice_limiter_peek(sl, s->key, s->key_len, c, s->client_len,
                                  s->cost, got);
    else if (strcmp(s->op, "reset_by") == 0)
        *st = sluice_limiter_reset(sl, s->key, s->key_len, c, s->client_len);
    else if (strcmp(s->op, "override") == 0 || strcmp(s->op, "unoverride") == 0)
        *st = run_override(sl, s, rs);
    else
        return false;
    if (*st == SLUICE_OK &&
        (strcmp(s->op, "define") == 0 || strcmp(s->op, "get") == 0))
        normal_rules(&stored, rules_got, rules_len);
    return true;
}

static void run_scenario(void **state)
{
    const scenario *sc = *state;
    tu_clock clk = {0};
    sluice *handles[MAX_URLS], *sl;
    size_t i, h, nheld = 0;
    char tag[64], prefix[96];
    static held hs[MAX_STEPS];

    snprintf(tag, sizeof(tag), "%zu", (size_t)(sc - scenarios));
    for (h = 0; h < nurls; h++) {
        /* Handles that alternate read a limiter's rules with every
         * decision: a change through one reaches the other at once. */
        char u[1200];

        snprintf(u, sizeof(u), "%s%s", urls[h],
                 nurls == 1                     ? ""
                 : strchr(urls[h], '?') != NULL ? "&rules_cache_ms=0"
                                                : "?rules_cache_ms=0");
        handles[h] = tu_open(u, &clk, tag);
        assert_non_null(handles[h]);
    }
    snprintf(prefix, sizeof(prefix), "t%ld-%s:", (long)getpid(), tag);
    for (i = 0; i < sc->nsteps; i++) {
        const step *s = &sc->steps[i];
        sluice_ruleset rs;
        sluice_result got;
        sluice_status st;
        char err[512], rules_got[256];
        bool first;
        int64_t granted = -1, keepalive_got = -1;

        h = i % nurls;
        if (h == 0 && nurls > 1 && !s->expect_error && refused(s))
            h = 1;
        first = h == 0;
        sl = handles[h];
        memset(&got, 0, sizeof(got));
        clk.t = s->t;
        memset(&rs, 0, sizeof(rs));
        st = takes_table_rules(s->op)
                 ? sluice_ruleset_parse(s->rule, &rs, err, sizeof(err))
                 : SLUICE_OK;
        if (st == SLUICE_OK) {
            if (run_named(sl, s, &rs, hs, &nheld, &got, &st, rules_got,
                          sizeof(rules_got), &keepalive_got))
                ;
            else if (strcmp(s->op, "reset") == 0)
                st = sluice_reset(sl, s->key, s->key_len, &rs);
            else if (strcmp(s->op, "peek") == 0)
                st = sluice_peek(sl, s->key, s->key_len, &rs, s->cost, &got);
            else if (strcmp(s->op, "acquire_at_most") == 0)
                st = sluice_acquire_at_most(sl, s->key, s->key_len, &rs,
                                            s->cost, &granted, &got);
            else if (strcmp(s->op, "refund") == 0)
                st = sluice_refund(sl, s->key, s->key_len, &rs, s->cost, &got);
            else if (strcmp(s->op, "settle") == 0)
                st = sluice_settle(sl, s->key, s->key_len, &rs, s->reserved,
                                   s->actual, &got);
            else
                st = sluice_acquire(sl, s->key, s->key_len, &rs, s->cost, &got);
            snprintf(err, sizeof(err), "%s", sluice_errmsg(sl));
        }
        if (first && !s->expect_error && strcmp(s->op, "reset") != 0 &&
            strcmp(s->op, "reset_by") != 0 && refused(s)) {
            /* A backend that cannot do an algorithm exactly says so. */
            if (st != SLUICE_EUNSUPPORTED)
                fail_msg("%s:%d (%s): %s should be refused with "
                         "EUNSUPPORTED, got %s",
                         sc->file, s->line, sc->name, s->rule, status_name(st));
            if (strstr(err, "redis://") == NULL)
                fail_msg("%s:%d: the refusal should point to the Lua "
                         "backend: %s",
                         sc->file, s->line, err);
            /* The steps after a refund count on it: the rest of the
             * scenario is not this backend's. */
            if (strcmp(s->op, "refund") == 0 || strcmp(s->op, "settle") == 0)
                break;
            continue;
        }
        if (s->expect_error) {
            if (strcmp(status_name(st), s->status) != 0)
                fail_msg("%s:%d (%s): expected error %s, got %s (%s)", sc->file,
                         s->line, sc->name, s->status, status_name(st), err);
            if (err[0] == '\0')
                fail_msg("%s:%d: error %s without a message", sc->file, s->line,
                         s->status);
            continue;
        }
        if (st != SLUICE_OK)
            fail_msg("%s:%d (%s): %s failed: %s: %s", sc->file, s->line,
                     sc->name, s->op, status_name(st), err);
        if (strcmp(s->op, "reset") == 0 || strcmp(s->op, "reset_by") == 0 ||
            s->expect_ok)
            continue;
        if (s->want_rules[0] != '\0') {
            sluice_ruleset want_rs;
            char want[256];

            if (sluice_ruleset_parse(s->want_rules, &want_rs, err,
                                     sizeof(err)) != SLUICE_OK)
                fail_msg("%s:%d: %s", sc->file, s->line, err);
            normal_rules(&want_rs, want, sizeof(want));
            if (strcmp(want, rules_got) != 0)
                fail_msg("%s:%d (%s) on %s: %s answered rules %s, want %s",
                         sc->file, s->line, sc->name, urls[h], s->op, rules_got,
                         want);
            if (s->want_keepalive >= 0 && keepalive_got != s->want_keepalive)
                fail_msg("%s:%d (%s) on %s: keepalive %lld, want %lld",
                         sc->file, s->line, sc->name, urls[h],
                         (long long)keepalive_got,
                         (long long)s->want_keepalive);
            continue;
        }
        if (strcmp(s->op, "acquire_at_most") == 0 && granted != s->want_granted)
            fail_msg("%s:%d (%s) on %s, t=%lld at most %lld rule %s: "
                     "granted %lld, want %lld",
                     sc->file, s->line, sc->name, urls[h], (long long)s->t,
                     (long long)s->cost, s->rule, (long long)granted,
                     (long long)s->want_granted);
        if (got.allowed != s->want.allowed || got.limit != s->want.limit ||
            got.remaining != s->want.remaining ||
            got.retry_after_ms != s->want.retry_after_ms ||
            got.reset_after_ms != s->want.reset_after_ms ||
            (s->status[0] != '\0' &&
             strcmp(status_name(got.status), s->status) != 0))
            fail_msg("%s:%d (%s) on %s, t=%lld %s cost %lld rule %s:\n"
                     "   want %d %lld %lld %lld %lld %s\n"
                     "   got  %d %lld %lld %lld %lld %s",
                     sc->file, s->line, sc->name, urls[h], (long long)s->t,
                     s->op, (long long)s->cost, s->rule, s->want.allowed,
                     (long long)s->want.limit, (long long)s->want.remaining,
                     (long long)s->want.retry_after_ms,
                     (long long)s->want.reset_after_ms, s->status, got.allowed,
                     (long long)got.limit, (long long)got.remaining,
                     (long long)got.retry_after_ms,
                     (long long)got.reset_after_ms, status_name(got.status));
    }
    for (h = 0; h < nurls; h++)
        sluice_close(handles[h]);
    {
        char missing[256];
        long checked = tu_check_ttls(servers, prefix, missing, sizeof(missing));

        if (checked < 0)
            fail_msg("%s: %s", sc->name, missing);
    }
}

int main(int argc, char **argv)
{
    struct CMUnitTest *tests;
    size_t i;
    int rc;

    if (argc < 3) {
        fprintf(stderr, "usage: test_conformance URL|@file [--servers "
                        "@file|host:port,...] [--unsupported algo,...] "
                        "FILE.scn...\n");
        return 2;
    }
    url = tu_url(argv[1]);
    urls[nurls++] = url;
    tu_servers_of(url, servers, sizeof(servers));
    for (i = 2; i < (size_t)argc; i++) {
        if (strcmp(argv[i], "--alternate") == 0 && i + 1 < (size_t)argc &&
            nurls < MAX_URLS) {
            owned[nurls] = strdup(tu_url(argv[++i]));
            urls[nurls] = owned[nurls];
            nurls++;
        } else if (strcmp(argv[i], "--servers") == 0 && i + 1 < (size_t)argc) {
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[++i]));
        } else if (strcmp(argv[i], "--unsupported") == 0 &&
                   i + 1 < (size_t)argc) {
            snprintf(unsupported, sizeof(unsupported), "%s", argv[++i]);
        } else {
            load(argv[i]);
        }
    }
    tests = calloc(nscenarios, sizeof(*tests));
    for (i = 0; i < nscenarios; i++) {
        tests[i].name = scenarios[i].name;
        tests[i].test_func = run_scenario;
        tests[i].initial_state = &scenarios[i];
    }
    printf("conformance on %s: %zu scenarios%s%s\n", url, nscenarios,
           unsupported[0] ? ", refusing " : "", unsupported);
    for (i = 1; i < nurls; i++)
        printf("  alternating step by step with %s\n", urls[i]);
    rc = _cmocka_run_group_tests(url, tests, nscenarios, NULL, NULL);
    free(tests);
    free(scenarios);
    for (i = 1; i < nurls; i++)
        free(owned[i]);
    return rc;
}
