/* SPDX-License-Identifier: BSD-3-Clause */
/* test_violated.c - sluice_violated on a real backend: every rule of a
 * composite that denied the request (fixed:2/1d+fixed:2/1h filled: both,
 * where the result names one; the day's alone filled: the day), on every
 * path: blocking, a batch (past the 64 masks a thread keeps inline), by
 * name, the deny cache, shadow mode, on the loop (single, batch, by
 * name), threads sharing the handle; and the HTTP problem's
 * "violated-policies" from it.
 *   test_violated URL|@file */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url;

/* 08:00 UTC: neither the hour nor the day ends while a case runs. */
#define T0 (19675LL * 86400000 + 8 * 3600000)

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static sluice *open_tagged(tu_clock *clk, const char *tag, const char *query)
{
    char u[1100];
    sluice *sl;

    snprintf(u, sizeof(u), "%s%s%s", url, strchr(url, '?') ? "&" : "?", query);
    sl = tu_open(u, clk, tag);
    assert_non_null(sl);
    return sl;
}

/* Acquires cost on key n times; the last answer in *r. */
static void acquire_n(sluice *sl, const char *key, const sluice_ruleset *rs,
                      int64_t cost, int n, sluice_result *r)
{
    int i;

    for (i = 0; i < n; i++)
        assert_int_equal(sluice_acquire(sl, key, strlen(key), rs, cost, r),
                         SLUICE_OK);
}

/* Issue 32: fixed:2/1d+fixed:2/1h filled, the third request's problem
 * listed only the binding rule. Both denied it; the day alone, the day;
 * the hour alone, the hour. An admission: none. */
static void every_rule_that_denied(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "every", "metrics=0");
    sluice_ruleset both = rules("fixed:2/1d+fixed:2/1h"),
                   day = rules("fixed:2/1d+fixed:5/1h"),
                   hour = rules("fixed:5/1d+fixed:2/1h");
    sluice_http_options o;
    sluice_result r;
    char buf[512];

    (void)state;
    acquire_n(sl, "k1", &both, 1, 2, &r);
    assert_true(r.allowed);
    assert_int_equal(sluice_violated(sl, 0), 0);
    acquire_n(sl, "k1", &both, 1, 1, &r);
    assert_false(r.allowed);
    assert_int_equal(r.rule, 0); /* the day waits longest: it binds */
    assert_int_equal(sluice_violated(sl, 0), 3);
    assert_int_equal(sluice_violated(sl, 1), 0);
    sluice_http_options_init(&o);
    o.name = "api";
    o.violated = sluice_violated(sl, 0);
    sluice_http_body(&both, &r, &o, buf, sizeof(buf));
    assert_non_null(
        strstr(buf, "\"violated-policies\": [\"api-1\", \"api-2\"]}"));
    /* Without it, the one the result names. */
    o.violated = 0;
    sluice_http_body(&both, &r, &o, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\"violated-policies\": [\"api-1\"]}"));

    acquire_n(sl, "k2", &day, 1, 3, &r);
    assert_false(r.allowed);
    assert_int_equal(sluice_violated(sl, 0), 1);
    acquire_n(sl, "k3", &hour, 1, 3, &r);
    assert_false(r.allowed);
    assert_int_equal(r.rule, 1);
    assert_int_equal(sluice_violated(sl, 0), 2);
    /* A cost above both limits never fits either. */
    acquire_n(sl, "k4", &both, 3, 1, &r);
    assert_int_equal(r.retry_after_ms, -1);
    assert_int_equal(sluice_violated(sl, 0), 3);
    /* A failed call has none. */
    assert_int_equal(sluice_acquire(sl, "k1", 2, &both, 0, &r), SLUICE_ECOST);
    assert_int_equal(sluice_violated(sl, 0), 0);
    sluice_close(sl);
}

/* Request i of the batch: A cost 3 (never fits either rule: 3), B cost 3
 * (never fits the day: 1), A cost 1 on a new key (admitted: 0). */
static void batch_of(sluice_request *q, char keys[][32], size_t n,
                     const char *tag, const sluice_ruleset *a,
                     const sluice_ruleset *b)
{
    size_t i;

    for (i = 0; i < n; i++) {
        snprintf(keys[i], 32, "%s%zu", tag, i);
        q[i].key = keys[i];
        q[i].key_len = strlen(keys[i]);
        q[i].rules = i % 3 == 1 ? b : a;
        q[i].cost = i % 3 == 2 ? 1 : 3;
    }
}

static unsigned batch_want(size_t i)
{
    return i % 3 == 0 ? 3 : i % 3 == 1 ? 1 : 0;
}

#define BATCH 70

static void a_batch_past_the_inline_masks(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "batch", "metrics=0");
    sluice_ruleset a = rules("fixed:2/1d+fixed:2/1h"),
                   b = rules("fixed:2/1d+fixed:5/1h");
    sluice_request q[BATCH];
    sluice_result out[BATCH];
    char keys[BATCH][32];
    size_t i;

    (void)state;
    batch_of(q, keys, BATCH, "b", &a, &b);
    assert_int_equal(sluice_acquire_many(sl, q, BATCH, out), SLUICE_OK);
    for (i = 0; i < BATCH; i++) {
        if (sluice_violated(sl, i) != batch_want(i))
            fail_msg("request %zu: violated %u, expected %u", i,
                     sluice_violated(sl, i), batch_want(i));
        assert_int_equal(out[i].allowed, batch_want(i) == 0);
    }
    assert_int_equal(sluice_violated(sl, BATCH), 0);
    /* A small one after it: its own masks. */
    assert_int_equal(sluice_acquire_many(sl, q, 2, out), SLUICE_OK);
    assert_int_equal(sluice_violated(sl, 0), 3);
    assert_int_equal(sluice_violated(sl, 1), 1);
    assert_int_equal(sluice_violated(sl, 2), 0);
    sluice_close(sl);
}

/* By name, the deny cache (a denial answered again without a round trip
 * keeps its rules), shadow mode (admitted, the rules' denial kept). */
static void by_name_cached_and_shadowed(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "paths", "deny_cache=16&metrics=0");
    sluice_ruleset both = rules("fixed:2/1d+fixed:2/1h");
    sluice_result r;

    (void)state;
    assert_int_equal(sluice_limiter_define(sl, "lim", 3, &both, 0, NULL),
                     SLUICE_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sluice_limiter_acquire(sl, "lim", 3, "c", 1, 1, &r),
                         SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(sluice_violated(sl, 0), 3);
    assert_int_equal(sluice_limiter_acquire(sl, "lim", 3, "c", 1, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_int_equal(sluice_violated(sl, 0), 3);
    /* An unknown name: no decision, none. */
    assert_int_equal(sluice_limiter_acquire(sl, "nope", 4, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_violated(sl, 0), 0);
    acquire_n(sl, "k", &both, 1, 3, &r);
    acquire_n(sl, "k", &both, 1, 1, &r);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_int_equal(sluice_violated(sl, 0), 3);
    sluice_close(sl);

    sl = open_tagged(&clk, "shadow", "shadow=1&metrics=0");
    acquire_n(sl, "k", &both, 1, 3, &r);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    assert_int_equal(sluice_violated(sl, 0), 3);
    sluice_close(sl);
}

/* ------------------------------------------------------------ the loop */

typedef struct seen {
    int calls;
    sluice_status st;
    unsigned v[BATCH + 1];
    size_t n;
    bool allowed;
} seen;

static void record(sluice *sl, void *arg, sluice_status st,
                   const sluice_result *res, size_t n)
{
    seen *s = arg;
    size_t i;

    s->calls++;
    s->st = st;
    s->n = n;
    s->allowed = n > 0 && res[0].allowed;
    for (i = 0; i <= n && i <= BATCH; i++)
        s->v[i] = sluice_violated(sl, i);
}

static void wait_for(sluice *sl, tu_poll *l, const seen *s, int calls)
{
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 10000 * TU_TIME_SCALE;

    while (s->calls < calls && tu_clock_ms(CLOCK_MONOTONIC) < until)
        tu_poll_turn(sl, l, 50);
    assert_int_equal(s->calls, calls);
}

static void on_the_loop(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_tagged(&clk, "loop", "metrics=0");
    sluice_ruleset a = rules("fixed:2/1d+fixed:2/1h"),
                   b = rules("fixed:2/1d+fixed:5/1h");
    sluice_request q[BATCH];
    char keys[BATCH][32];
    sluice_loop lp;
    tu_poll l;
    seen s;
    size_t i;

    (void)state;
    tu_poll_init(&l);
    lp = tu_poll_loop(&l);
    assert_int_equal(sluice_attach(sl, &lp), SLUICE_OK);
    memset(&s, 0, sizeof(s));
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire_async(sl, "k", 1, &a, 1, record, &s),
                         SLUICE_OK);
    wait_for(sl, &l, &s, 3);
    assert_int_equal(s.st, SLUICE_OK);
    assert_false(s.allowed);
    assert_int_equal(s.v[0], 3);
    assert_int_equal(s.v[1], 0);

    memset(&s, 0, sizeof(s));
    batch_of(q, keys, BATCH, "ab", &a, &b);
    assert_int_equal(sluice_acquire_many_async(sl, q, BATCH, record, &s),
                     SLUICE_OK);
    wait_for(sl, &l, &s, 1);
    assert_int_equal(s.n, BATCH);
    for (i = 0; i < BATCH; i++)
        if (s.v[i] != batch_want(i))
            fail_msg("async request %zu: violated %u, expected %u", i, s.v[i],
                     batch_want(i));
    assert_int_equal(s.v[BATCH], 0);
    sluice_close(sl);

    /* By name: the rules read on the loop, then the decision. */
    sl = open_tagged(&clk, "loopname", "metrics=0");
    assert_int_equal(sluice_limiter_define(sl, "lim", 3, &b, 0, NULL),
                     SLUICE_OK);
    tu_poll_init(&l);
    lp = tu_poll_loop(&l);
    assert_int_equal(sluice_attach(sl, &lp), SLUICE_OK);
    memset(&s, 0, sizeof(s));
    for (i = 0; i < 3; i++)
        assert_int_equal(
            sluice_limiter_acquire_async(sl, "lim", 3, "c", 1, 1, record, &s),
            SLUICE_OK);
    wait_for(sl, &l, &s, 3);
    assert_false(s.allowed);
    assert_int_equal(s.v[0], 1);
    sluice_close(sl);
}

/* ---------------------------------------------------------- threads */

#define THREADS 4
#define ROUNDS  40

typedef struct worker {
    sluice *sl;
    int id;
    int wrong;
} worker;

/* Each thread denies on keys of its own, by rules whose mask is its own
 * (3, 1 or 2), while the others' calls share the round trips. */
static void *work(void *arg)
{
    static const char *const texts[] = {"fixed:2/1d+fixed:2/1h",
                                        "fixed:2/1d+fixed:5/1h",
                                        "fixed:5/1d+fixed:2/1h"};
    static const unsigned want[] = {3, 1, 2};
    worker *w = arg;
    sluice_ruleset rs;
    sluice_result r;
    char key[32];
    int i, j;

    sluice_ruleset_parse(texts[w->id % 3], &rs, NULL, 0);
    for (i = 0; i < ROUNDS; i++) {
        snprintf(key, sizeof(key), "t%d-%d", w->id, i);
        for (j = 0; j < 3; j++)
            if (sluice_acquire(w->sl, key, strlen(key), &rs, 1, &r) !=
                SLUICE_OK)
                w->wrong++;
        if (r.allowed || sluice_violated(w->sl, 0) != want[w->id % 3])
            w->wrong++;
        /* An admission in between: none. */
        snprintf(key, sizeof(key), "u%d-%d", w->id, i);
        if (sluice_acquire(w->sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK ||
            !r.allowed || sluice_violated(w->sl, 0) != 0)
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
    int i;

    (void)state;
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_rule_that_denied),
        cmocka_unit_test(a_batch_past_the_inline_masks),
        cmocka_unit_test(by_name_cached_and_shadowed),
        cmocka_unit_test(on_the_loop),
        cmocka_unit_test(threads_sharing_a_handle),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL|@file\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
