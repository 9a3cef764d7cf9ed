/* SPDX-License-Identifier: BSD-3-Clause */
/* test_decision.c - sluice_last_decision on a real backend: the rules and
 * override that decided each answer, on every path (blocking, a batch
 * past the answers a thread keeps inline, threads sharing a handle, the
 * loop inside the callback; by key and by name; the deny cache,
 * reservations, shadow mode, listed clients), and the HTTP answer built
 * from it the same as the one built from the true rules. A limiter
 * changed by another handle between decisions: each decision reports the
 * rules it was decided by (a cached handle's the old ones until its cache
 * ends), never the stored ones. With --faults (a redis:// or
 * redis+multi:// URL) the fail policies on a server of the test's own:
 * open and closed decide by no rules, fallback by the divided ones.
 *   test_decision URL|@file [--faults] */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url;
static bool with_faults;

/* 08:00 UTC: neither the hour nor the day ends while a case runs. */
#define T0 (19675LL * 86400000 + 8 * 3600000)

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

/* A handle with the tag's prefix (handles of one tag share keys; on mem://
 * through one named store), the query added. */
static sluice *open_tagged(tu_clock *clk, const char *tag, const char *query)
{
    const char *u = strcmp(url, "mem://") == 0 ? "mem://decision" : url;
    char full[1100];
    sluice *sl;

    snprintf(full, sizeof(full), "%s%s%s", u, strchr(u, '?') ? "&" : "?",
             query);
    sl = tu_open(full, clk, tag);
    assert_non_null(sl);
    return sl;
}

/* Two rulesets are the same rule for rule, as sluice_ruleset_format
 * writes them. */
static void assert_same_rules(const sluice_ruleset *a, const sluice_ruleset *b)
{
    char ta[512], tb[512];

    assert_int_equal(a->count, b->count);
    if (a->count == 0)
        return;
    assert_int_equal(sluice_ruleset_format(a, ta, sizeof(ta)) < sizeof(ta),
                     true);
    assert_int_equal(sluice_ruleset_format(b, tb, sizeof(tb)) < sizeof(tb),
                     true);
    assert_string_equal(ta, tb);
}

/* The decision of answer i, checked against what decided it: truth (NULL:
 * no rule did), the override kind, and the result's limit; then the HTTP
 * fields, body and status built from it, the same as from truth. */
static sluice_decision check_decision(sluice *sl, size_t i,
                                      const sluice_result *res,
                                      const sluice_ruleset *truth,
                                      sluice_override_kind kind)
{
    sluice_decision d;
    sluice_http_options o;
    char a[1024], b[1024];

    sluice_decision_init(&d);
    assert_int_equal(sluice_last_decision(sl, i, &d), SLUICE_OK);
    assert_int_equal(d.struct_size, sizeof(d));
    assert_int_equal(d.override, kind);
    assert_int_equal(d.violated, sluice_violated(sl, i));
    assert_int_equal(d.http.violated, d.violated);
    assert_int_equal(d.http.struct_size, sizeof(d.http));
    if (truth == NULL) {
        assert_int_equal(d.rules.count, 0);
    } else {
        assert_same_rules(&d.rules, truth);
        /* The result's numbers come from these rules: the capacity of the
         * binding one (single rules and fixed windows here). */
        if (res->status != SLUICE_ALLOWLISTED &&
            res->status != SLUICE_DENYLISTED)
            assert_int_equal(res->limit, d.rules.rules[res->rule].limit);
    }
    /* The HTTP answer from the decision is the one from the truth. */
    d.http.name = "api";
    sluice_http_options_init(&o);
    o.name = "api";
    o.violated = sluice_violated(sl, i);
    assert_int_equal(sluice_http_status(res, &d.http),
                     sluice_http_status(res, &o));
    sluice_http_text(&d.rules, res, &d.http, a, sizeof(a));
    sluice_http_text(truth, res, &o, b, sizeof(b));
    assert_string_equal(a, b);
    sluice_http_body(&d.rules, res, &d.http, a, sizeof(a));
    sluice_http_body(truth, res, &o, b, sizeof(b));
    assert_string_equal(a, b);
    if (truth == NULL) /* no numbers that were not decided */
        assert_null(strstr(a, "RateLimit"));
    return d;
}

static sluice_result by_name(sluice *sl, const char *name, const char *client)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_limiter_acquire(sl, name, strlen(name), client,
                               client ? strlen(client) : 0, 1, &r) != SLUICE_OK)
        fail_msg("acquire by name %s/%s: %s", name, client ? client : "",
                 sluice_errmsg(sl));
    return r;
}

/* Issue 32: a gateway deciding by name kept a mirror of the rules, which
 * disagreed with the handle's cache after each change. The decision says
 * what decided it: a handle that reads the rules each time sees the
 * change at once, a cached one decides by the old rules until its cache
 * ends, and each reports the rules that decided, whatever is stored. */
static void by_name_changed_by_another_handle(void **state)
{
    tu_clock clk = {T0};
    sluice *admin = open_tagged(&clk, "chg", "metrics=0");
    sluice *fresh = open_tagged(&clk, "chg", "rules_cache_ms=0&metrics=0");
    sluice *cached = open_tagged(&clk, "chg", "rules_cache_ms=60000");
    sluice_ruleset five = rules("fixed:5/1h"), seven = rules("fixed:7/1h"),
                   three = rules("fixed:3/1h"), nine = rules("fixed:9/1h");
    sluice_limiter_override ov;
    sluice_decision d;
    sluice_result r;
    char a[512], b[512];
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_set(admin, "api", 3, &five, 600000),
                     SLUICE_OK);
    r = by_name(fresh, "api", "c1");
    assert_int_equal(r.limit, 5);
    check_decision(fresh, 0, &r, &five, SLUICE_OVERRIDE_NONE);
    r = by_name(cached, "api", "c2"); /* read, and cached for a minute */
    check_decision(cached, 0, &r, &five, SLUICE_OVERRIDE_NONE);

    assert_int_equal(sluice_limiter_set(admin, "api", 3, &seven, 600000),
                     SLUICE_OK);
    r = by_name(fresh, "api", "c1");
    assert_int_equal(r.limit, 7);
    assert_int_equal(r.remaining, 5);
    check_decision(fresh, 0, &r, &seven, SLUICE_OVERRIDE_NONE);
    /* The cached handle still decides by five: its decision says five,
     * and the text from it is not the text from the rules now stored. */
    r = by_name(cached, "api", "c2");
    assert_int_equal(r.limit, 5);
    d = check_decision(cached, 0, &r, &five, SLUICE_OVERRIDE_NONE);
    sluice_http_text(&d.rules, &r, &d.http, a, sizeof(a));
    sluice_http_text(&seven, &r, &d.http, b, sizeof(b));
    assert_string_not_equal(a, b);
    assert_int_equal(sluice_limiter_delete(admin, "api", 3), SLUICE_OK);
    assert_int_equal(sluice_limiter_set(admin, "api", 3, &nine, 600000),
                     SLUICE_OK);

    /* Overrides: own rules, allow- and deny-listed. */
    memset(&ov, 0, sizeof(ov));
    ov.kind = SLUICE_OVERRIDE_RULES;
    ov.rules = three;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "own", 3, &ov), SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_UNLIMITED;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "vip", 3, &ov), SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_DENY;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "bad", 3, &ov), SLUICE_OK);
    for (i = 0; i < 4; i++) { /* the fourth is denied by its own three */
        r = by_name(fresh, "api", "own");
        check_decision(fresh, 0, &r, &three, SLUICE_OVERRIDE_RULES);
    }
    assert_false(r.allowed);
    assert_int_equal(r.limit, 3);
    assert_int_equal(sluice_violated(fresh, 0), 1);
    r = by_name(fresh, "api", "vip");
    assert_int_equal(r.status, SLUICE_ALLOWLISTED);
    check_decision(fresh, 0, &r, NULL, SLUICE_OVERRIDE_UNLIMITED);
    r = by_name(fresh, "api", "bad");
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    d = check_decision(fresh, 0, &r, NULL, SLUICE_OVERRIDE_DENY);
    assert_int_equal(sluice_http_status(&r, &d.http), 403);
    r = by_name(fresh, "api", "c9");
    check_decision(fresh, 0, &r, &nine, SLUICE_OVERRIDE_NONE);
    /* The override changed to rules of its own: the next decision. */
    ov.kind = SLUICE_OVERRIDE_RULES;
    ov.rules = seven;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "vip", 3, &ov), SLUICE_OK);
    r = by_name(fresh, "api", "vip");
    assert_int_equal(r.limit, 7);
    check_decision(fresh, 0, &r, &seven, SLUICE_OVERRIDE_RULES);
    /* No client: the name's one state, never an override. */
    r = by_name(fresh, "api", NULL);
    check_decision(fresh, 0, &r, &nine, SLUICE_OVERRIDE_NONE);
    /* A peek decides too; a reset's rules are those it reset by. */
    memset(&r, 0, sizeof(r));
    assert_int_equal(sluice_limiter_peek(fresh, "api", 3, "own", 3, 1, &r),
                     SLUICE_OK);
    check_decision(fresh, 0, &r, &three, SLUICE_OVERRIDE_RULES);
    assert_int_equal(sluice_limiter_reset(fresh, "api", 3, "own", 3),
                     SLUICE_OK);
    sluice_decision_init(&d);
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_OK);
    assert_same_rules(&d.rules, &three);

    /* What has no decision: EINVAL, out untouched, the message kept. */
    assert_int_equal(sluice_limiter_acquire(fresh, "nope", 4, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    d.violated = 77;
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_EINVAL);
    assert_int_equal(d.violated, 77);
    assert_non_null(strstr(sluice_errmsg(fresh), "nope"));
    r = by_name(fresh, "api", "c1");
    assert_int_equal(sluice_last_decision(fresh, 1, &d), SLUICE_EINVAL);
    assert_int_equal(sluice_last_decision(fresh, 0, NULL), SLUICE_EINVAL);
    assert_int_equal(sluice_last_decision(NULL, 0, &d), SLUICE_EINVAL);
    d.struct_size = sizeof(d) - 1; /* below the first layout */
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_EINVAL);
    memset(&d, 0, sizeof(d)); /* 0: the first layout, as zeroed by hand */
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_OK);
    assert_same_rules(&d.rules, &nine);
    /* Another handle's calls leave this one's decision as it was. */
    r = by_name(cached, "api", "c2");
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_OK);
    assert_same_rules(&d.rules, &nine);
    /* An admin call is no decision. */
    assert_int_equal(sluice_limiter_get(fresh, "api", 3, &d.rules, NULL),
                     SLUICE_OK);
    assert_int_equal(sluice_last_decision(fresh, 0, &d), SLUICE_EINVAL);
    sluice_close(cached);
    sluice_close(fresh);
    sluice_close(admin);
}

/* By key: the caller's rules, copied (changing them after the call
 * changes nothing); a batch past the 64 answers kept inline, two
 * rulesets; the deny cache, reservations and shadow mode. */
static void by_key_on_every_path(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "key", "deny_cache=64&metrics=0");
    sluice_ruleset a = rules("fixed:2/1d+fixed:2/1h"), b = rules("fixed:4/1d"),
                   mine;
    sluice_request q[70];
    sluice_result out[70], r;
    char keys[70][16];
    size_t i;

    (void)state;
    mine = a;
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire(sl, "k", 1, &mine, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    mine.rules[0].limit = 99; /* the caller's, after the call */
    check_decision(sl, 0, &r, &a, SLUICE_OVERRIDE_NONE);
    assert_int_equal(sluice_violated(sl, 0), 3);
    /* The deny cache answers with the rules of the request it denied. */
    assert_int_equal(sluice_acquire(sl, "k", 1, &a, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_CACHED);
    check_decision(sl, 0, &r, &a, SLUICE_OVERRIDE_NONE);

    for (i = 0; i < 70; i++) {
        snprintf(keys[i], sizeof(keys[i]), "b%zu", i);
        q[i].key = keys[i];
        q[i].key_len = strlen(keys[i]);
        q[i].rules = i % 3 == 1 ? &b : &a;
        q[i].cost = i % 5 == 4 ? 3 : 1; /* 3 never fits a */
    }
    assert_int_equal(sluice_acquire_many(sl, q, 70, out), SLUICE_OK);
    for (i = 0; i < 70; i++)
        check_decision(sl, i, &out[i], q[i].rules, SLUICE_OVERRIDE_NONE);
    assert_int_equal(sluice_last_decision(sl, 70, &(sluice_decision){0}),
                     SLUICE_EINVAL);
    /* A short batch after it: its own answers. */
    assert_int_equal(sluice_acquire_many(sl, q + 1, 2, out), SLUICE_OK);
    check_decision(sl, 0, &out[0], &b, SLUICE_OVERRIDE_NONE);
    check_decision(sl, 1, &out[1], &a, SLUICE_OVERRIDE_NONE);
    assert_int_equal(sluice_last_decision(sl, 2, &(sluice_decision){0}),
                     SLUICE_EINVAL);
    /* A failed call has none. */
    assert_int_equal(sluice_acquire(sl, "k", 1, &a, 0, &r), SLUICE_ECOST);
    assert_int_equal(sluice_last_decision(sl, 0, &(sluice_decision){0}),
                     SLUICE_EINVAL);
    sluice_close(sl);

    /* Shadow mode: admitted, decided by the rules that denied it. */
    sl = open_tagged(&clk, "shadow", "shadow=1&metrics=0");
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire(sl, "k", 1, &a, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    check_decision(sl, 0, &r, &a, SLUICE_OVERRIDE_NONE);
    sluice_close(sl);

    /* Reservations: an admission from the units this handle holds. */
    sl = open_tagged(&clk, "rsv", "reserve_ms=1000&metrics=0");
    b = rules("fixed:1000/1s");
    for (i = 0; i < 12 && r.status != SLUICE_RESERVED; i++)
        assert_int_equal(sluice_acquire(sl, "hot", 3, &b, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_RESERVED);
    check_decision(sl, 0, &r, &b, SLUICE_OVERRIDE_NONE);
    sluice_close(sl);
}

/* ------------------------------------------------------------ the loop */

typedef struct seen {
    int calls;
    sluice_status st;
    size_t n;
    sluice_result res[70];
    sluice_decision d[70];
    sluice_status dst[71];
} seen;

/* In the callback: the decision of each answer of the call it answers. */
static void record(sluice *sl, void *arg, sluice_status st,
                   const sluice_result *res, size_t n)
{
    seen *s = arg;
    size_t i;

    s->calls++;
    s->st = st;
    s->n = n;
    for (i = 0; i <= n && i < 70; i++) {
        if (i < n)
            s->res[i] = res[i];
        sluice_decision_init(&s->d[i]);
        s->dst[i] = sluice_last_decision(sl, i, &s->d[i]);
    }
}

static void wait_for(sluice *sl, tu_poll *l, const seen *s, int calls)
{
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 10000 * TU_TIME_SCALE;

    while (s->calls < calls && tu_clock_ms(CLOCK_MONOTONIC) < until)
        tu_poll_turn(sl, l, 50);
    assert_int_equal(s->calls, calls);
}

/* The decision s saw for answer i: decided by truth (NULL: none), kind;
 * the HTTP text from it the text from truth. */
static void check_seen(const seen *s, size_t i, const sluice_ruleset *truth,
                       sluice_override_kind kind)
{
    sluice_http_options o;
    sluice_decision d = s->d[i];
    char a[1024], b[1024];

    assert_int_equal(s->dst[i], SLUICE_OK);
    assert_int_equal(d.override, kind);
    if (truth == NULL) {
        assert_int_equal(d.rules.count, 0);
    } else {
        assert_same_rules(&d.rules, truth);
        if (s->res[i].status != SLUICE_DENYLISTED &&
            s->res[i].status != SLUICE_ALLOWLISTED)
            assert_int_equal(s->res[i].limit,
                             d.rules.rules[s->res[i].rule].limit);
    }
    sluice_http_options_init(&o);
    o.name = d.http.name = "api";
    o.violated = d.violated;
    sluice_http_text(&d.rules, &s->res[i], &d.http, a, sizeof(a));
    sluice_http_text(truth, &s->res[i], &o, b, sizeof(b));
    assert_string_equal(a, b);
}

static void on_the_loop(void **state)
{
    tu_clock clk = {T0};
    sluice *admin = open_tagged(&clk, "loop", "metrics=0");
    sluice *sl = open_tagged(&clk, "loop", "rules_cache_ms=0&metrics=0");
    sluice *cached = open_tagged(&clk, "loop", "rules_cache_ms=60000");
    sluice_ruleset five = rules("fixed:5/1h"), seven = rules("fixed:7/1h"),
                   three = rules("fixed:3/1h"), a = rules("fixed:2/1h"),
                   b = rules("fixed:3/1d");
    sluice_limiter_override ov;
    sluice_request q[70];
    char keys[70][16];
    sluice_loop lp, lpc;
    tu_poll l, lc;
    static seen s;
    size_t i;

    (void)state;
    assert_int_equal(sluice_limiter_set(admin, "api", 3, &five, 600000),
                     SLUICE_OK);
    memset(&ov, 0, sizeof(ov));
    ov.kind = SLUICE_OVERRIDE_RULES;
    ov.rules = three;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "own", 3, &ov), SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_UNLIMITED;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "vip", 3, &ov), SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_DENY;
    assert_int_equal(
        sluice_limiter_override_set(admin, "api", 3, "bad", 3, &ov), SLUICE_OK);
    tu_poll_init(&l);
    lp = tu_poll_loop(&l);
    assert_int_equal(sluice_attach(sl, &lp), SLUICE_OK);
    tu_poll_init(&lc);
    lpc = tu_poll_loop(&lc);
    assert_int_equal(sluice_attach(cached, &lpc), SLUICE_OK);

    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(sl, "api", 3, "c", 1, 1, record, &s),
        SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    assert_int_equal(s.res[0].limit, 5);
    check_seen(&s, 0, &five, SLUICE_OVERRIDE_NONE);
    assert_int_equal(s.dst[1], SLUICE_EINVAL);
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(cached, "api", 3, "c", 1, 1, record, &s),
        SLUICE_OK);
    wait_for(cached, &lc, &s, 1);
    check_seen(&s, 0, &five, SLUICE_OVERRIDE_NONE);

    /* Changed by another handle: the next decision of sl, not cached's. */
    assert_int_equal(sluice_limiter_set(admin, "api", 3, &seven, 600000),
                     SLUICE_OK);
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(sl, "api", 3, "c", 1, 1, record, &s),
        SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    assert_int_equal(s.res[0].limit, 7);
    check_seen(&s, 0, &seven, SLUICE_OVERRIDE_NONE);
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(cached, "api", 3, "c", 1, 1, record, &s),
        SLUICE_OK);
    wait_for(cached, &lc, &s, 1);
    assert_int_equal(s.res[0].limit, 5);
    check_seen(&s, 0, &five, SLUICE_OVERRIDE_NONE);

    /* Overrides, each answer inside its own callback. */
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(sl, "api", 3, "own", 3, 1, record, &s),
        SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    check_seen(&s, 0, &three, SLUICE_OVERRIDE_RULES);
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_acquire_async(sl, "api", 3, "vip", 3, 1, record, &s),
        SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    assert_int_equal(s.res[0].status, SLUICE_ALLOWLISTED);
    check_seen(&s, 0, NULL, SLUICE_OVERRIDE_UNLIMITED);
    memset(&s, 0, sizeof(s));
    assert_int_equal(
        sluice_limiter_peek_async(sl, "api", 3, "bad", 3, 1, record, &s),
        SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    assert_int_equal(s.res[0].status, SLUICE_DENYLISTED);
    check_seen(&s, 0, NULL, SLUICE_OVERRIDE_DENY);

    /* By key, single and a batch past the inline answers. */
    memset(&s, 0, sizeof(s));
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire_async(sl, "k", 1, &a, 1, record, &s),
                         SLUICE_OK);
    wait_for(sl, &l, &s, 3);
    assert_false(s.res[0].allowed);
    check_seen(&s, 0, &a, SLUICE_OVERRIDE_NONE);
    for (i = 0; i < 70; i++) {
        snprintf(keys[i], sizeof(keys[i]), "ab%zu", i);
        q[i].key = keys[i];
        q[i].key_len = strlen(keys[i]);
        q[i].rules = i % 3 == 1 ? &b : &a;
        q[i].cost = i % 5 == 4 ? 3 : 1;
    }
    memset(&s, 0, sizeof(s));
    assert_int_equal(sluice_acquire_many_async(sl, q, 70, record, &s),
                     SLUICE_OK);
    /* The caller's rules may change once the call returns. */
    a.rules[0].limit = 99;
    b.rules[0].limit = 99;
    wait_for(sl, &l, &s, 1);
    a.rules[0].limit = 2;
    b.rules[0].limit = 3;
    assert_int_equal(s.n, 70);
    for (i = 0; i < 70; i++)
        check_seen(&s, i, i % 3 == 1 ? &b : &a, SLUICE_OVERRIDE_NONE);
    sluice_close(cached);
    sluice_close(sl);
    sluice_close(admin);
}

/* ---------------------------------------------------------- threads */

#define THREADS 4
#define ROUNDS  30

typedef struct worker {
    sluice *sl;
    int id;
    int wrong;
} worker;

/* Each thread decides by rules of its own, by key and by name, while the
 * others' calls share the round trips: its decisions are its own. */
static void *work(void *arg)
{
    worker *w = arg;
    sluice_ruleset rs;
    sluice_decision d;
    sluice_result r;
    char key[32], name[16];
    int i;

    rs.count = 1;
    memset(&rs.rules[0], 0, sizeof(rs.rules[0]));
    rs.rules[0].algorithm = SLUICE_FIXED;
    rs.rules[0].limit = 10 + w->id;
    rs.rules[0].period_ms = 3600000;
    snprintf(name, sizeof(name), "n%d", w->id);
    for (i = 0; i < ROUNDS; i++) {
        snprintf(key, sizeof(key), "t%d-%d", w->id, i);
        sluice_decision_init(&d);
        if (sluice_acquire(w->sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK ||
            sluice_last_decision(w->sl, 0, &d) != SLUICE_OK ||
            d.rules.count != 1 || d.rules.rules[0].limit != 10 + w->id ||
            r.limit != 10 + w->id)
            w->wrong++;
        sluice_decision_init(&d);
        if (sluice_limiter_acquire(w->sl, name, strlen(name), key, strlen(key),
                                   1, &r) != SLUICE_OK ||
            sluice_last_decision(w->sl, 0, &d) != SLUICE_OK ||
            d.rules.count != 1 || d.rules.rules[0].limit != 20 + w->id ||
            r.limit != 20 + w->id)
            w->wrong++;
    }
    return NULL;
}

static void threads_sharing_a_handle(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "threads", "metrics=0");
    pthread_t t[THREADS];
    worker w[THREADS];
    sluice_ruleset rs = rules("fixed:20/1h");
    char name[16];
    int i;

    (void)state;
    for (i = 0; i < THREADS; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        rs.rules[0].limit = 20 + i;
        assert_int_equal(
            sluice_limiter_set(sl, name, strlen(name), &rs, 600000), SLUICE_OK);
    }
    for (i = 0; i < THREADS; i++) {
        w[i] = (worker){sl, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].wrong, 0);
    }
    sluice_close(sl);
}

/* ----------------------------------------------------- fail policies */

static pid_t own_server;

/* A handle on a server of the test's own (the URL's scheme), the query
 * added. */
static sluice *open_own(tu_clock *clk, int port, const char *query)
{
    char u[256];

    snprintf(u, sizeof(u), "%s://127.0.0.1:%d/?timeout_ms=%d&%s",
             strncmp(url, "redis+multi", 11) == 0 ? "redis+multi" : "redis",
             port, 300 * TU_TIME_SCALE, query);
    return tu_open(u, clk, "fail");
}

/* open and closed answer by no rules; fallback decides by the rules it
 * divides (fallback_instances=2: fixed:10 decides as fixed:5), by key and
 * by name (the rules read before the server went away). */
static void fail_policies(void **state)
{
    tu_clock clk = {T0};
    sluice_ruleset ten = rules("fixed:10/1h"), five = rules("fixed:5/1h");
    sluice *open, *closed, *fb;
    sluice_result r;
    int port = tu_free_port();

    (void)state;
    if (!with_faults) {
        printf("# fail policies: run with --faults (a redis:// URL)\n");
        return;
    }
    own_server = tu_start_redis(port);
    assert_true(own_server > 0);
    open = open_own(&clk, port, "fail=open");
    closed = open_own(&clk, port, "fail=closed");
    fb = open_own(&clk, port, "fail=fallback&fallback_instances=2");
    assert_int_equal(sluice_limiter_set(fb, "api", 3, &ten, 600000), SLUICE_OK);
    r = by_name(fb, "api", "c"); /* read, so stale ones can decide */
    check_decision(fb, 0, &r, &ten, SLUICE_OVERRIDE_NONE);
    tu_kill(&own_server);

    assert_int_equal(sluice_acquire(open, "k", 1, &ten, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_false(sluice_result_decided(&r));
    check_decision(open, 0, &r, NULL, SLUICE_OVERRIDE_NONE);
    assert_int_equal(sluice_acquire(closed, "k", 1, &ten, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    check_decision(closed, 0, &r, NULL, SLUICE_OVERRIDE_NONE);
    /* By name, never read: no rules to decide by. */
    r = by_name(open, "api", "c");
    check_decision(open, 0, &r, NULL, SLUICE_OVERRIDE_NONE);

    assert_int_equal(sluice_acquire(fb, "k", 1, &ten, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.limit, 5);
    assert_true(sluice_result_decided(&r));
    check_decision(fb, 0, &r, &five, SLUICE_OVERRIDE_NONE);
    r = by_name(fb, "api", "c");
    assert_int_equal(r.limit, 5);
    check_decision(fb, 0, &r, &five, SLUICE_OVERRIDE_NONE);
    sluice_close(fb);
    sluice_close(closed);
    sluice_close(open);
}

/* The server of the test's own goes, whatever the case did. */
static int kill_own_server(void **state)
{
    (void)state;
    tu_kill(&own_server);
    return 0;
}

/* The gateway copied each limiter's HTTP name and unit from its policy
 * beside the decision: the decision carries them, of the policy that
 * decided (the limiter's, the call's, none), never the call's before. */
static void the_policys_http_name_and_unit(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "httpn", "metrics=0");
    sluice_ruleset five = rules("fixed:5/1h");
    sluice_policy pol;
    sluice_decision d;
    sluice_result r;
    char text[1024];

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "llm", 3, &five, 600000),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_set(sl, "plain", 5, &five, 600000),
                     SLUICE_OK);
    sluice_policy_init(&pol);
    pol.set = SLUICE_POLICY_HTTP;
    snprintf(pol.http_name, sizeof(pol.http_name), "budget");
    snprintf(pol.unit_name, sizeof(pol.unit_name), "tokens");
    assert_int_equal(sluice_limiter_policy_set(sl, "llm", 3, &pol), SLUICE_OK);

    r = by_name(sl, "llm", "u1");
    sluice_decision_init(&d);
    assert_int_equal(sluice_last_decision(sl, 0, &d), SLUICE_OK);
    assert_non_null(d.http.name);
    assert_string_equal(d.http.name, "budget");
    assert_non_null(d.http.unit_name);
    assert_string_equal(d.http.unit_name, "tokens");
    sluice_http_text(&d.rules, &r, &d.http, text, sizeof(text));
    assert_non_null(strstr(text, "RateLimit-Policy: \"budget\";q=5;"
                                 "qu=\"tokens\""));
    /* A limiter without a policy: the defaults, not the last call's. */
    r = by_name(sl, "plain", "u1");
    sluice_decision_init(&d);
    assert_int_equal(sluice_last_decision(sl, 0, &d), SLUICE_OK);
    assert_null(d.http.name);
    assert_null(d.http.unit_name);
    assert_int_equal(d.http.unit, SLUICE_UNIT_REQUESTS);
    /* By key, the call's policy. */
    snprintf(pol.http_name, sizeof(pol.http_name), "percall");
    pol.unit = SLUICE_UNIT_CONTENT_BYTES;
    pol.unit_name[0] = '\0';
    memset(&r, 0, sizeof(r));
    assert_int_equal(sluice_acquire_with(sl, "k", 1, &five, 1, &pol, &r),
                     SLUICE_OK);
    sluice_decision_init(&d);
    assert_int_equal(sluice_last_decision(sl, 0, &d), SLUICE_OK);
    assert_string_equal(d.http.name, "percall");
    assert_int_equal(d.http.unit, SLUICE_UNIT_CONTENT_BYTES);
    assert_null(d.http.unit_name);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(by_name_changed_by_another_handle),
        cmocka_unit_test(by_key_on_every_path),
        cmocka_unit_test(the_policys_http_name_and_unit),
        cmocka_unit_test(on_the_loop),
        cmocka_unit_test(threads_sharing_a_handle),
        cmocka_unit_test_teardown(fail_policies, kill_own_server),
    };
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL|@file [--faults]\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    for (i = 2; i < argc; i++)
        with_faults |= strcmp(argv[i], "--faults") == 0;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
