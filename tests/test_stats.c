/* SPDX-License-Identifier: BSD-3-Clause */
/* test_stats.c - a handle's counters on a real backend: every request
 * counted once, by outcome; batches, peeks, resets, bad input; the deny
 * cache's hits; the fail policy's answers and the failures behind them (a
 * server that is not there); threads counting at once; metrics=0; the
 * counters by limiter (blocking, threads, the loop, the cap on names);
 * and the Prometheus text, of one handle and a page of several, written
 * into OUT_DIR for tests/test_stats.sh to check with promtool and with
 * Debian's prometheus_client (tests/check_prometheus.py).
 *   test_stats URL|@file OUT_DIR */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url, *out_dir;

#define T0 (28333334LL * 60000)

static sluice *open_with(tu_clock *clk, const char *tag, const char *u,
                         uint32_t deny)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    /* a correctness test: one slow round trip on a loaded machine is
     * not a failure (the deadline tests hold the timeouts) */
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.deny_cache = deny;
    snprintf(prefix, sizeof(prefix), "st%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static sluice_stats stats_of(sluice *sl)
{
    sluice_stats st;

    if (sluice_get_stats(sl, &st, sizeof(st)) != SLUICE_OK)
        fail_msg("get_stats: %s", sluice_errmsg(sl));
    return st;
}

static uint64_t buckets(const sluice_stats *st)
{
    uint64_t n = 0;
    int i;

    for (i = 0; i < SLUICE_STATS_BUCKETS; i++)
        n += st->latency_us[i];
    return n;
}

static void every_request_counts_once_by_outcome(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "count", url, 0);
    sluice_ruleset rs, bad;
    sluice_result r, out[4];
    sluice_request reqs[4];
    sluice_stats st;
    int i;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:3/1m", &rs, NULL, 0),
                     SLUICE_OK);
    memset(&bad, 0, sizeof(bad));
    for (i = 0; i < 5; i++)
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(sluice_reset(sl, "k", 1, &rs), SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "", 0, &rs, 1, &r), SLUICE_EKEY);
    reqs[0] = (sluice_request){"a", 1, &rs, 1};
    reqs[1] = (sluice_request){"b", 1, &rs, 1};
    reqs[2] = (sluice_request){"c", 1, &bad, 1};
    reqs[3] = (sluice_request){"a", 1, &rs, 3}; /* 1 + 3 > 3 */
    assert_int_equal(sluice_acquire_many(sl, reqs, 4, out), SLUICE_ERULE);
    st = stats_of(sl);
    printf("# %s: allowed %llu, denied %llu, near limit %llu, peeks %llu, "
           "resets %llu, backend requests %llu in %llu round trips, %llu "
           "calls\n",
           url, (unsigned long long)st.allowed, (unsigned long long)st.denied,
           (unsigned long long)st.near_limit, (unsigned long long)st.peeks,
           (unsigned long long)st.resets,
           (unsigned long long)st.backend_requests,
           (unsigned long long)st.round_trips, (unsigned long long)st.calls);
    assert_int_equal(st.allowed, 3 + 2);
    assert_int_equal(st.denied, 2 + 1);
    /* remaining 0 of 3 (the third), and "a" and "b" keep 2 of 3: no. */
    assert_int_equal(st.near_limit, 1);
    assert_int_equal(st.peeks, 1);
    assert_int_equal(st.resets, 1);
    assert_int_equal(st.failures[SLUICE_EKEY], 1);
    assert_int_equal(st.failures[SLUICE_ERULE], 1);
    assert_int_equal(st.policy_answers, 0);
    assert_int_equal(st.deny_cache_hits, 0);
    /* Bad input never reaches the backend. */
    assert_int_equal(st.backend_requests, 5 + 1 + 1 + 3);
    if (strncmp(url, "mem:", 4) != 0)
        assert_true(st.round_trips >= 1 &&
                    st.round_trips <= 2 * st.backend_requests);
    assert_int_equal(st.calls, 5 + 1 + 1 + 1 + 1);
    assert_int_equal(buckets(&st), st.calls);
    assert_true(st.latency_sum_us > 0 || strncmp(url, "mem:", 4) == 0);
    sluice_close(sl);
}

static void deny_cache_hits_count_as_denials(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "hits", url, 16);
    sluice_ruleset rs;
    sluice_result r;
    sluice_stats st;
    int i;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:1/1m", &rs, NULL, 0),
                     SLUICE_OK);
    for (i = 0; i < 10; i++)
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    st = stats_of(sl);
    assert_int_equal(st.allowed, 1);
    assert_int_equal(st.denied, 9);
    assert_int_equal(st.deny_cache_hits, 8);
    assert_int_equal(st.backend_requests, 2);
    sluice_close(sl);
}

/* A port nobody listens on, with each policy. */
static void failures_and_the_policy_answers(void **state)
{
    tu_clock clk = {T0};
    sluice_ruleset rs;
    sluice_result r;
    sluice_stats st;
    sluice *sl;
    char u[128];
    const char *scheme;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:1/1m", &rs, NULL, 0),
                     SLUICE_OK);
    scheme = strncmp(url, "twemproxy:", 10) == 0     ? "twemproxy"
             : strncmp(url, "redis+multi:", 12) == 0 ? "redis+multi"
                                                     : "redis";
    snprintf(u, sizeof(u), "%s://127.0.0.1:1/?fail=open", scheme);
    sl = open_with(&clk, "open", u, 0);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ECONNECT);
    assert_true(r.allowed);
    st = stats_of(sl);
    assert_int_equal(st.failures[SLUICE_ECONNECT], 1);
    assert_int_equal(st.policy_answers, 1);
    assert_int_equal(st.allowed, 0); /* not a decision */
    sluice_close(sl);
    snprintf(u, sizeof(u), "%s://127.0.0.1:1/?fail=error", scheme);
    {
        sluice_options o;
        char err[256];

        sluice_options_init(&o);
        /* fail=error opens too (a service starts before Redis); the call
         * fails, and is counted as a failure. */
        assert_int_equal(sluice_open(u, &o, &sl, err, sizeof(err)), SLUICE_OK);
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r),
                         SLUICE_ECONNECT);
        st = stats_of(sl);
        assert_int_equal(st.failures[SLUICE_ECONNECT], 1);
        assert_int_equal(st.policy_answers, 0);
        sluice_close(sl);
    }
}

#define THREADS 8

static void *hammer(void *arg)
{
    sluice *sl = arg;
    sluice_ruleset rs;
    sluice_result r;
    char key[16];
    int i;

    if (sluice_ruleset_parse("fixed:100/1m", &rs, NULL, 0) != SLUICE_OK)
        return NULL;
    for (i = 0; i < 250; i++) {
        snprintf(key, sizeof(key), "t%d", i % 7);
        (void)sluice_acquire(sl, key, strlen(key), &rs, 1, &r);
    }
    return NULL;
}

static void threads_count_at_once(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "threads", url, 0);
    pthread_t th[THREADS];
    sluice_stats st;
    int i;

    (void)state;
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, sl), 0);
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    st = stats_of(sl);
    assert_int_equal(st.allowed + st.denied, THREADS * 250);
    assert_int_equal(st.allowed, 7 * 100); /* 2000 over 7 keys of 100 */
    assert_int_equal(st.calls, THREADS * 250);
    assert_int_equal(buckets(&st), st.calls);
    sluice_close(sl);
}

static void metrics_off_keeps_none(void **state)
{
    char u[1200];
    sluice *sl = NULL;
    sluice_stats st;

    (void)state;
    snprintf(u, sizeof(u), "%s%smetrics=0", url, strchr(url, '?') ? "&" : "?");
    assert_int_equal(sluice_open(u, NULL, &sl, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "metrics=0"));
    sluice_close(sl);
}

static FILE *out_file(const char *name)
{
    char path[1200];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", out_dir, name);
    f = fopen(path, "w");
    if (f == NULL)
        fail_msg("cannot write %s", path);
    return f;
}

/* The text, for the Python check; and snprintf's contract. */
static void the_prometheus_text(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "prom", url, 16);
    sluice_ruleset rs;
    sluice_result r;
    sluice_stats st;
    char small[16], *buf;
    size_t need, got;
    FILE *f;
    int i;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:2/1m", &rs, NULL, 0),
                     SLUICE_OK);
    for (i = 0; i < 5; i++)
        assert_int_equal(sluice_acquire(sl, "p", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "", 0, &rs, 1, &r), SLUICE_EKEY);
    st = stats_of(sl);
    need = sluice_stats_prometheus(&st, sizeof(st), "api \"v1\"", NULL, 0);
    got = sluice_stats_prometheus(&st, sizeof(st), "api \"v1\"", small,
                                  sizeof(small));
    assert_int_equal(got, need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    buf = malloc(need + 1);
    assert_non_null(buf);
    assert_int_equal(
        sluice_stats_prometheus(&st, sizeof(st), "api \"v1\"", buf, need + 1),
        need);
    assert_int_equal(strlen(buf), need);
    f = out_file("prom.txt");
    /* The expected values first, as comments the parser skips. */
    fprintf(f,
            "# expect allowed=%llu denied=%llu hits=%llu key=%llu "
            "calls=%llu\n",
            (unsigned long long)st.allowed, (unsigned long long)st.denied,
            (unsigned long long)st.deny_cache_hits,
            (unsigned long long)st.failures[SLUICE_EKEY],
            (unsigned long long)st.calls);
    fputs(buf, f);
    fclose(f);
    free(buf);
    sluice_close(sl);
}

/* ------------------------------------------------------- by limiter */

static sluice_limiter_stats limiter_stats(sluice *sl, const char *name)
{
    sluice_limiter_stats ls;

    memset(&ls, 0xa5, sizeof(ls)); /* every byte must be written */
    if (sluice_get_limiter_stats(sl, name, name != NULL ? strlen(name) : 0, &ls,
                                 sizeof(ls)) != SLUICE_OK)
        fail_msg("get_limiter_stats: %s", sluice_errmsg(sl));
    return ls;
}

static void define(sluice *sl, const char *name, const char *rules)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(rules, &rs, NULL, 0), SLUICE_OK);
    if (sluice_limiter_define(sl, name, strlen(name), &rs, 0, NULL) !=
        SLUICE_OK)
        fail_msg("define %s: %s", name, sluice_errmsg(sl));
}

static uint64_t failures_of(const uint64_t *f)
{
    uint64_t n = 0;
    int i;

    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        n += f[i];
    return n;
}

/* Each request by name counts once by its limiter, as by the handle: a
 * request by key, or with a name refused, by the handle only. */
static void requests_by_name_count_by_limiter(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "byname", url, 0);
    sluice_limiter_override deny = {SLUICE_OVERRIDE_DENY, {0}};
    sluice_ruleset rs;
    sluice_result r;
    sluice_limiter_stats a, b, nope, over, never;
    sluice_stats st;
    int i;

    (void)state;
    define(sl, "a", "fixed:3/1m");
    define(sl, "b", "fixed:1/1m");
    assert_int_equal(sluice_limiter_override_set(sl, "b", 1, "bad", 3, &deny),
                     SLUICE_OK);
    for (i = 0; i < 5; i++)
        assert_int_equal(sluice_limiter_acquire(sl, "a", 1, "c1", 2, 1, &r),
                         SLUICE_OK);
    for (i = 0; i < 2; i++)
        assert_int_equal(sluice_limiter_acquire(sl, "b", 1, NULL, 0, 1, &r),
                         SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(sl, "b", 1, "bad", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    assert_int_equal(sluice_limiter_peek(sl, "a", 1, "c1", 2, 1, &r),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_reset(sl, "b", 1, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(sl, "nope", 4, NULL, 0, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_acquire(sl, "a", 1, "c1", 2, 0, &r),
                     SLUICE_ECOST);
    /* No limiter to count by: an empty name; and a request by key. */
    assert_int_equal(sluice_limiter_acquire(sl, "", 0, NULL, 0, 1, &r),
                     SLUICE_EKEY);
    assert_int_equal(sluice_ruleset_parse("fixed:3/1m", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);

    a = limiter_stats(sl, "a");
    b = limiter_stats(sl, "b");
    nope = limiter_stats(sl, "nope");
    over = limiter_stats(sl, NULL);
    never = limiter_stats(sl, "never");
    st = stats_of(sl);
    assert_int_equal(a.allowed, 3);
    assert_int_equal(a.denied, 2);
    assert_int_equal(a.near_limit, 1); /* the third: 0 of 3 left */
    assert_int_equal(a.peeks, 1);
    assert_int_equal(a.failures[SLUICE_ECOST], 1);
    assert_int_equal(failures_of(a.failures), 1);
    assert_int_equal(a.resets + a.deny_cache_hits + a.reserve_admitted +
                         a.shadow_admitted + a.allowlisted + a.denylisted +
                         a.policy_answers,
                     0);
    assert_int_equal(b.allowed, 1);
    assert_int_equal(b.denied, 2);
    assert_int_equal(b.denylisted, 1);
    assert_int_equal(b.resets, 1);
    assert_int_equal(failures_of(b.failures), 0);
    assert_int_equal(nope.failures[SLUICE_ENOLIMITER], 1);
    assert_int_equal(nope.allowed + nope.denied, 0);
    assert_int_equal(over.allowed + over.denied + failures_of(over.failures),
                     0);
    assert_int_equal(never.allowed + never.denied + never.peeks +
                         failures_of(never.failures),
                     0);
    /* The handle's: these, and the request by key. */
    assert_int_equal(st.allowed, a.allowed + b.allowed + 1);
    assert_int_equal(st.denied, a.denied + b.denied);
    assert_int_equal(st.peeks, a.peeks);
    assert_int_equal(st.resets, b.resets);
    assert_int_equal(st.denylisted, b.denylisted);
    /* The empty name counts by the handle, under no limiter. */
    assert_int_equal(st.failures[SLUICE_EKEY], 1);
    assert_int_equal(failures_of(st.failures),
                     failures_of(a.failures) + failures_of(nope.failures) + 1);
    sluice_close(sl);
}

#define NAMES 13 /* limiters the threads share, defined beforehand */

static void *hammer_by_name(void *arg)
{
    sluice *sl = arg;
    sluice_result r;
    char name[16];
    int i;

    for (i = 0; i < 250; i++) {
        snprintf(name, sizeof(name), "n%d", i % NAMES);
        (void)sluice_limiter_acquire(sl, name, strlen(name), NULL, 0, 1, &r);
    }
    return NULL;
}

/* Threads meet each name first at once: each name has one entry, which
 * counts every request. */
static void threads_count_by_limiter_at_once(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "lthreads", url, 0);
    pthread_t th[THREADS];
    sluice_limiter_stats ls;
    uint64_t allowed = 0, denied = 0;
    char name[16];
    int i, k, want;

    (void)state;
    for (k = 0; k < NAMES; k++) {
        snprintf(name, sizeof(name), "n%d", k);
        define(sl, name, "fixed:100/1m");
    }
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_by_name, sl), 0);
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (k = 0; k < NAMES; k++) {
        snprintf(name, sizeof(name), "n%d", k);
        ls = limiter_stats(sl, name);
        /* i % NAMES == k for i in 0..249, in each thread */
        want = THREADS * ((250 - k + NAMES - 1) / NAMES);
        if (ls.allowed + ls.denied != (uint64_t)want ||
            ls.allowed != (uint64_t)(want < 100 ? want : 100) ||
            failures_of(ls.failures) != 0)
            fail_msg("%s: %llu allowed, %llu denied, %llu failed; expected "
                     "%d requests, %d allowed",
                     name, (unsigned long long)ls.allowed,
                     (unsigned long long)ls.denied,
                     (unsigned long long)failures_of(ls.failures), want,
                     want < 100 ? want : 100);
        allowed += ls.allowed;
        denied += ls.denied;
    }
    assert_int_equal(allowed + denied, THREADS * 250);
    assert_int_equal(stats_of(sl).allowed, allowed);
    assert_int_equal(stats_of(sl).denied, denied);
    ls = limiter_stats(sl, NULL);
    assert_int_equal(ls.allowed + ls.denied, 0);
    sluice_close(sl);
}

static void count_done(sluice *sl, void *arg, sluice_status st,
                       const sluice_result *res, size_t n)
{
    (void)sl;
    (void)res;
    (void)n;
    if (st == SLUICE_OK)
        ++*(int *)arg;
}

/* The loop's decisions by name: the rules read on the loop, then
 * cached. */
static void the_loop_counts_by_limiter(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "lloop", url, 0);
    sluice_limiter_stats ls;
    sluice_loop lp;
    tu_poll l;
    int64_t until;
    int i, done = 0;

    (void)state;
    define(sl, "a", "fixed:3/1m");
    tu_poll_init(&l);
    lp = tu_poll_loop(&l);
    assert_int_equal(sluice_attach(sl, &lp), SLUICE_OK);
    for (i = 0; i < 5; i++)
        assert_int_equal(sluice_limiter_acquire_async(sl, "a", 1, "c", 1, 1,
                                                      count_done, &done),
                         SLUICE_OK);
    assert_int_equal(
        sluice_limiter_peek_async(sl, "a", 1, "c", 1, 1, count_done, &done),
        SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire_async(sl, "none", 4, NULL, 0, 1,
                                                  count_done, &done),
                     SLUICE_OK);
    until = tu_clock_ms(CLOCK_MONOTONIC) + 10000 * TU_TIME_SCALE;
    while (sluice_pending(sl) > 0 && tu_clock_ms(CLOCK_MONOTONIC) < until)
        tu_poll_turn(sl, &l, 50);
    assert_int_equal(sluice_pending(sl), 0);
    assert_int_equal(done, 6); /* "none": ENOLIMITER */
    ls = limiter_stats(sl, "a");
    assert_int_equal(ls.allowed, 3);
    assert_int_equal(ls.denied, 2);
    assert_int_equal(ls.peeks, 1);
    ls = limiter_stats(sl, "none");
    assert_int_equal(ls.failures[SLUICE_ENOLIMITER], 1);
    sluice_close(sl);
}

/* SLUICE_STATS_LIMITERS names apart, the first met; the rest together,
 * as the overflow. */
static void names_past_the_cap_count_together(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "lcap", url, 0);
    sluice_limiter_stats ls;
    sluice_result r;
    char name[16];
    int k;

    (void)state;
    for (k = 0; k < SLUICE_STATS_LIMITERS + 44; k++) {
        snprintf(name, sizeof(name), "u%d", k);
        assert_int_equal(
            sluice_limiter_acquire(sl, name, strlen(name), NULL, 0, 1, &r),
            SLUICE_ENOLIMITER);
    }
    for (k = 0; k < SLUICE_STATS_LIMITERS + 44; k++) {
        snprintf(name, sizeof(name), "u%d", k);
        ls = limiter_stats(sl, name);
        assert_int_equal(ls.failures[SLUICE_ENOLIMITER],
                         k < SLUICE_STATS_LIMITERS ? 1 : 0);
    }
    ls = limiter_stats(sl, NULL);
    assert_int_equal(ls.failures[SLUICE_ENOLIMITER], 44);
    assert_int_equal(stats_of(sl).failures[SLUICE_ENOLIMITER],
                     SLUICE_STATS_LIMITERS + 44);
    sluice_close(sl);
}

/* A name no label value may hold as it is: a backslash, a quote, a byte
 * that is not UTF-8, a control; and one that is UTF-8. */
#define ODD_NAME "b\\\"\xff\n\xc3\xa9"

/* The page of three handles (one keeps no counters), for promtool and
 * tests/check_prometheus.py; beside it, two handles' texts one after the
 * other, which promtool must refuse (the reason for the page); and the
 * page's arguments refused. */
static void one_page_for_several_handles(void **state)
{
    tu_clock clk = {T0};
    sluice *h[3];
    const char *names[3] = {"api", "admin \"x\"", "off"};
    const char *dup[2] = {"api", "api"};
    sluice_ruleset rs;
    sluice_result r;
    sluice_stats st;
    sluice_limiter_stats login, odd;
    char small[16], *buf, u[1200];
    size_t need, i;
    FILE *f;

    (void)state;
    h[0] = open_with(&clk, "pageA", url, 16);
    h[1] = open_with(&clk, "pageB", url, 0);
    snprintf(u, sizeof(u), "%s%smetrics=0", url, strchr(url, '?') ? "&" : "?");
    assert_int_equal(sluice_open(u, NULL, &h[2], NULL, 0), SLUICE_OK);
    define(h[0], "login", "fixed:2/1m");
    define(h[0], ODD_NAME, "fixed:2/1m");
    define(h[1], "login", "fixed:2/1m");
    for (i = 0; i < 4; i++) /* 2 allowed, 1 denied, 1 the cache's */
        assert_int_equal(
            sluice_limiter_acquire(h[0], "login", 5, "c", 1, 1, &r), SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(h[0], ODD_NAME, strlen(ODD_NAME),
                                            NULL, 0, 1, &r),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(h[0], "missing", 7, NULL, 0, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_acquire(h[1], "login", 5, "c", 1, 1, &r),
                     SLUICE_OK);
    assert_int_equal(sluice_ruleset_parse("fixed:2/1m", &rs, NULL, 0),
                     SLUICE_OK);
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire(h[1], "k", 1, &rs, 1, &r), SLUICE_OK);
    login = limiter_stats(h[0], "login");
    odd = limiter_stats(h[0], ODD_NAME);
    assert_int_equal(login.deny_cache_hits, 1);

    /* snprintf's contract, and what is refused. */
    need = sluice_metrics_page(h, names, 3, 0, NULL, 0);
    assert_true(need > 0);
    assert_int_equal(sluice_metrics_page(h, names, 3, 0, small, sizeof(small)),
                     need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(sluice_metrics_page(h, dup, 2, 0, small, sizeof(small)),
                     0);
    assert_int_equal(small[0], '\0');
    assert_int_equal(sluice_metrics_page(h, NULL, 2, 0, NULL, 0), 0);
    assert_int_equal(sluice_metrics_page(h, names, 3, 4u, NULL, 0), 0);
    assert_true(sluice_metrics_page(h, NULL, 1, 0, NULL, 0) > 0);
    assert_true(sluice_metrics_page(h, names, 3, SLUICE_METRICS_NO_LIMITERS,
                                    NULL, 0) < need);
    {
        sluice *none[2] = {h[0], NULL};

        assert_int_equal(sluice_metrics_page(none, names, 2, 0, NULL, 0), 0);
    }
    /* Room to spare: nothing counts meanwhile, but a caller would. */
    buf = malloc(need + 1);
    assert_non_null(buf);
    assert_int_equal(sluice_metrics_page(h, names, 3, 0, buf, need + 1), need);
    assert_int_equal(strlen(buf), need);
    f = out_file("page.txt");
    st = stats_of(h[1]);
    fprintf(f,
            "# expect login_allowed=%llu login_denied=%llu login_hits=%llu "
            "odd_allowed=%llu missing=1 admin_login_allowed=1 "
            "admin_allowed=%llu admin_denied=%llu\n",
            (unsigned long long)login.allowed, (unsigned long long)login.denied,
            (unsigned long long)login.deny_cache_hits,
            (unsigned long long)odd.allowed, (unsigned long long)st.allowed,
            (unsigned long long)st.denied);
    fputs(buf, f);
    fclose(f);
    free(buf);

    /* Two handles' texts one after the other: what the page replaces. */
    f = out_file("concatenated.txt");
    for (i = 0; i < 2; i++) {
        char text[16384];

        st = stats_of(h[i]);
        assert_true(sluice_stats_prometheus(&st, sizeof(st), names[i], text,
                                            sizeof(text)) < sizeof(text));
        fputs(text, f);
    }
    fclose(f);
    for (i = 0; i < 3; i++)
        sluice_close(h[i]);
}

/* Whether a case applies to the URL under test: mem:// never fails. */
static bool applies(CMUnitTestFunction f)
{
    return f != failures_and_the_policy_answers || strncmp(url, "mem:", 4) != 0;
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(every_request_counts_once_by_outcome),
        cmocka_unit_test(deny_cache_hits_count_as_denials),
        cmocka_unit_test(failures_and_the_policy_answers),
        cmocka_unit_test(threads_count_at_once),
        cmocka_unit_test(metrics_off_keeps_none),
        cmocka_unit_test(the_prometheus_text),
        cmocka_unit_test(requests_by_name_count_by_limiter),
        cmocka_unit_test(threads_count_by_limiter_at_once),
        cmocka_unit_test(the_loop_counts_by_limiter),
        cmocka_unit_test(names_past_the_cap_count_together),
        cmocka_unit_test(one_page_for_several_handles),
    };
    size_t k, n = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s URL|@file OUT_DIR\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    out_dir = argv[2];
    /* A case that does not apply is left out, not skipped: a skip says
     * that a case which should have run did not. */
    for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
        if (applies(tests[k].test_func))
            tests[n++] = tests[k];
    return _cmocka_run_group_tests("test_stats", tests, n, NULL, NULL);
}
