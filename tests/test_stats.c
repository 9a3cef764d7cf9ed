/* SPDX-License-Identifier: BSD-3-Clause */
/* test_stats.c - a handle's counters on a real backend: every request
 * counted once, by outcome; batches, peeks, resets, bad input; the deny
 * cache's hits; the fail policy's answers and the failures behind them (a
 * server that is not there); threads counting at once; metrics=0; and the
 * Prometheus text, written for tests/check_prometheus.py to parse with
 * Debian's prometheus_client.
 *   test_stats URL|@file PROM_FILE */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url, *prom_file;

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
    f = fopen(prom_file, "w");
    assert_non_null(f);
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
    };
    size_t k, n = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s URL|@file PROM_FILE\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    prom_file = argv[2];
    /* A case that does not apply is left out, not skipped: a skip says
     * that a case which should have run did not. */
    for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
        if (applies(tests[k].test_func))
            tests[n++] = tests[k];
    return _cmocka_run_group_tests("test_stats", tests, n, NULL, NULL);
}
