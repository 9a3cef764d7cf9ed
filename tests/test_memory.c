/* SPDX-License-Identifier: BSD-3-Clause */
/* test_memory.c - the in-process backend: shared named stores, threads,
 * memory bounded by expiry, and allocation failures. */
#include "backend.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct vclock {
    int64_t t;
} vclock;

static int64_t vnow(void *ctx)
{
    return ((vclock *)ctx)->t;
}

static sluice *open_mem(const char *url, vclock *clk)
{
    sluice_options o;
    sluice *sl = NULL;
    char err[256];

    memset(&o, 0, sizeof(o));
    if (clk != NULL) {
        o.clock = vnow;
        o.clock_ctx = clk;
    }
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    return sl;
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static void named_stores_are_shared_and_private_ones_are_not(void **state)
{
    vclock clk = {1000};
    sluice *a = open_mem("mem://shared", &clk);
    sluice *b = open_mem("mem://shared", &clk);
    sluice *c = open_mem("mem://", &clk);
    sluice_ruleset rs = rules("fixed:2/1s");
    sluice_result r;

    (void)state;
    assert_string_equal(sluice_backend_name(a), "memory");
    assert_int_equal(sluice_acquire(a, "k", 1, &rs, 2, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sluice_acquire(b, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(sluice_acquire(c, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(a);
    /* The store lives while one handle holds it. */
    assert_int_equal(sluice_acquire(b, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    sluice_close(b);
    b = open_mem("mem://shared", &clk);
    assert_int_equal(sluice_acquire(b, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(b);
    sluice_close(c);
}

typedef struct worker {
    const char *url;
    const sluice_ruleset *rs;
    int attempts;
    int admitted;
} worker;

static void *hammer(void *p)
{
    worker *w = p;
    sluice *sl = NULL;
    sluice_result r;
    int i;

    if (sluice_open(w->url, NULL, &sl, NULL, 0) != SLUICE_OK)
        return NULL;
    for (i = 0; i < w->attempts; i++)
        if (sluice_acquire(sl, "hot", 3, w->rs, 1, &r) == SLUICE_OK &&
            r.allowed)
            w->admitted++;
    sluice_close(sl);
    return NULL;
}

static void threads_on_one_store_admit_exactly_the_limit(void **state)
{
    static const char *const texts[] = {"fixed:1000/1d", "log:1000/1d",
                                        "token:1000/1d", "gcra:1000/1d",
                                        "fixed:5000/1d+token:1000/1d"};
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
        sluice_ruleset rs = rules(texts[k]);
        sluice *keep = open_mem("mem://threads", NULL);
        pthread_t th[4];
        worker w[4];
        int i, total = 0;

        for (i = 0; i < 4; i++) {
            w[i] = (worker){"mem://threads", &rs, 600, 0};
            pthread_create(&th[i], NULL, hammer, &w[i]);
        }
        for (i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            total += w[i].admitted;
        }
        printf("# %s: 4 threads x 600 attempts, admitted %d\n", texts[k],
               total);
        assert_int_equal(total, 1000);
        assert_int_equal(sluice_reset(keep, "hot", 3, &rs), SLUICE_OK);
        sluice_close(keep);
    }
}

static void memory_is_bounded_by_expiry(void **state)
{
    vclock clk = {0};
    sluice *sl = open_mem("mem://", &clk);
    sluice_ruleset rs = rules("fixed:5/1s+log:5/1s+token:5/1s");
    sluice_result r;
    size_t most = 0;
    int i;

    (void)state;
    /* 30,000 distinct keys, 10 new ones a millisecond: each lives about
     * 2 s of clock, so about 20,000 keys x 3 rules at most are alive. */
    for (i = 0; i < 30000; i++) {
        char key[32];
        size_t n;

        clk.t = i / 10;
        snprintf(key, sizeof(key), "user:%d", i);
        assert_int_equal(sluice_acquire(sl, key, strlen(key), &rs, 1, &r),
                         SLUICE_OK);
        n = sl_memory_count(sl_handle_state(sl));
        if (n > most)
            most = n;
    }
    printf("# 30000 keys x 3 rules over 3 s: at most %zu entries held\n", most);
    assert_true(most < 3 * 25000);
    sluice_close(sl);
}

/* A store holds at most fallback_max_keys state entries (100,000 by
 * default), the least recently used evicted past it: a key used all along
 * keeps its count; one left unused since it was filled is forgotten, and
 * admitted again. Rules that keep keys an hour, so that expiry frees none
 * (without the bound: 120,000 entries held, 40 MB). */
static void memory_is_bounded_by_max_keys(void **state)
{
    static const struct {
        const char *url;
        size_t max;
    } cases[] = {{"mem://", 100000}, {"mem://?fallback_max_keys=1000", 1000}};
    sluice_ruleset rs = rules("fixed:3/1h");
    sluice_result r;
    size_t c;

    (void)state;
    for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        vclock clk = {0};
        sluice *sl = open_mem(cases[c].url, &clk);
        size_t i, most = 0, n = cases[c].max + cases[c].max / 5;

        for (i = 0; i < 3; i++) {
            assert_int_equal(sluice_acquire(sl, "hot", 3, &rs, 1, &r),
                             SLUICE_OK);
            assert_int_equal(sluice_acquire(sl, "cold", 4, &rs, 1, &r),
                             SLUICE_OK);
        }
        for (i = 0; i < n; i++) {
            char key[32];

            clk.t = (int64_t)(i / 100);
            snprintf(key, sizeof(key), "user:%zu", i);
            assert_int_equal(sluice_acquire(sl, key, strlen(key), &rs, 1, &r),
                             SLUICE_OK);
            /* A peek is a use too. */
            if (i % 100 == 0)
                assert_int_equal(sluice_peek(sl, "hot", 3, &rs, 1, &r),
                                 SLUICE_OK);
            if (sl_memory_count(sl_handle_state(sl)) > most)
                most = sl_memory_count(sl_handle_state(sl));
        }
        printf("# %s: %zu keys a fixed:3/1h: at most %zu entries held\n",
               cases[c].url, n, most);
        assert_true(most <= cases[c].max);
        assert_int_equal(sluice_acquire(sl, "hot", 3, &rs, 1, &r), SLUICE_OK);
        assert_false(r.allowed);
        assert_int_equal(sluice_acquire(sl, "cold", 4, &rs, 1, &r), SLUICE_OK);
        assert_true(r.allowed);
        sluice_close(sl);
    }
}

/* The fallback store is bounded as mem:// is (fail=fallback against a
 * server that refuses): a key filled there and left unused is forgotten
 * once fallback_max_keys others came after it; with room, it is not. */
static void the_fallback_store_is_bounded_too(void **state)
{
    static const char *const urls[] = {
        "redis://127.0.0.1:1?fail=fallback&fallback_max_keys=50",
        "redis://127.0.0.1:1?fail=fallback&fallback_max_keys=500"};
    sluice_ruleset rs = rules("fixed:1/1h");
    sluice_result r;
    size_t u, i;

    (void)state;
    for (u = 0; u < 2; u++) {
        vclock clk = {0};
        sluice *sl = open_mem(urls[u], &clk);

        assert_int_equal(sluice_acquire(sl, "a", 1, &rs, 1, &r), SLUICE_OK);
        assert_true(r.allowed);
        assert_int_equal(r.status, SLUICE_ECONNECT);
        for (i = 0; i < 100; i++) {
            char key[32];

            snprintf(key, sizeof(key), "user:%zu", i);
            assert_int_equal(sluice_acquire(sl, key, strlen(key), &rs, 1, &r),
                             SLUICE_OK);
            assert_int_equal(r.status, SLUICE_ECONNECT);
        }
        /* 50 kept: "a" evicted, admitted again; 500: still counted. */
        assert_int_equal(sluice_acquire(sl, "a", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.allowed, u == 0);
        sluice_close(sl);
    }
}

/* A bound below one request's entries (three rules and a block): the
 * request keeps every entry it uses (none is evicted under it), and what
 * it leaves is evicted by the next key's request. */
static void a_request_keeps_its_entries_past_the_bound(void **state)
{
    vclock clk = {0};
    sluice *sl = open_mem("mem://?fallback_max_keys=1", &clk);
    sluice_ruleset rs = rules("fixed:2/1h,block=1m+sliding:3/1h+token:4/1h");
    sluice_result r;
    int i;

    (void)state;
    for (i = 0; i < 3; i++) {
        assert_int_equal(sluice_acquire(sl, "a", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.allowed, i < 2);
        assert_true(sl_memory_count(sl_handle_state(sl)) <= 4);
    }
    assert_int_equal(sluice_acquire(sl, "b", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_true(sl_memory_count(sl_handle_state(sl)) <= 4);
    /* a's entries, its block among them, went for b's. */
    assert_int_equal(sluice_acquire(sl, "a", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(sl);
}

/* One store, one bound: a handle that asks another of a named store is
 * refused, naming the bound it has. */
static void a_named_store_has_one_bound(void **state)
{
    sluice *a = open_mem("mem://bound?fallback_max_keys=10", NULL), *b = NULL;
    char err[256];

    (void)state;
    assert_int_equal(sluice_open("mem://bound?fallback_max_keys=20", NULL, &b,
                                 err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "fallback_max_keys=10"));
    sluice_close(open_mem("mem://bound?fallback_max_keys=10", NULL));
    sluice_close(a);
}

/* An allocator that fails once `budget` allocations were served. */
static long budget;

static void *failing_malloc(size_t n)
{
    if (budget-- <= 0)
        return NULL;
    return malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    if (budget-- <= 0)
        return NULL;
    return realloc(p, n);
}

static sluice_status scenario_under_budget(void)
{
    vclock clk = {5};
    sluice_options o;
    sluice *sl = NULL;
    sluice_ruleset rs = rules("fixed:9/1s+log:9/1s+sliding:9/1s+token:9/1s");
    sluice_request reqs[100];
    sluice_result r, outs[100];
    sluice_status st;
    char keys[100][16];
    int i;

    memset(&o, 0, sizeof(o));
    o.clock = vnow;
    o.clock_ctx = &clk;
    if ((st = sluice_open("mem://", &o, &sl, NULL, 0)) != SLUICE_OK)
        return st;
    for (i = 0; i < 12 && st == SLUICE_OK; i++) {
        clk.t += 1;
        st = sluice_acquire(sl, "k", 1, &rs, 1, &r);
    }
    for (i = 0; i < 100; i++) {
        snprintf(keys[i], sizeof(keys[i]), "m%d", i);
        reqs[i] = (sluice_request){keys[i], strlen(keys[i]), &rs, 1};
    }
    if (st == SLUICE_OK)
        st = sluice_acquire_many(sl, reqs, 100, outs);
    /* A settle's excess on every family: on the key charged above (a log
     * entry more), and on a new key (every entry created at once). */
    if (st == SLUICE_OK)
        st = sluice_settle(sl, "k", 1, &rs, 1, 30, &r);
    if (st == SLUICE_OK)
        st = sluice_settle(sl, "f", 1, &rs, 0, 30, &r);
    sluice_close(sl);
    return st;
}

static void allocation_failures_return_enomem_and_leak_nothing(void **state)
{
    long n;
    sluice_status st = SLUICE_ENOMEM;

    (void)state;
    for (n = 0; st != SLUICE_OK; n++) {
        budget = n;
        sluice_set_allocator(failing_malloc, failing_realloc, free);
        st = scenario_under_budget();
        sluice_set_allocator(NULL, NULL, NULL);
        if (st != SLUICE_OK && st != SLUICE_ENOMEM)
            fail_msg("budget %ld: status %s", n, sluice_strerror(st));
    }
    printf("# succeeded from %ld allocations on\n", n - 1);
    assert_true(n > 5);
}

/* Expiry goes one way, as a Redis key's does: state that a request found
 * expired is not found again by a request on a clock behind (it once was,
 * and answered 10 where a fresh bucket gives 19). */
static void expired_state_stays_gone_for_clocks_behind(void **state)
{
    vclock clk = {1000};
    sluice *sl = open_mem("mem://?ttl_floor_ms=1", &clk);
    sluice_ruleset big = rules("token:10/100ms"),
                   slow = rules("token:1/100ms,burst=20");
    sluice_result r;

    (void)state;
    /* Backlog 10 requests at 1000: needed until 1100, plus a period. */
    assert_int_equal(sluice_acquire(sl, "k", 1, &big, 10, &r), SLUICE_OK);
    clk.t = 1300;
    assert_int_equal(sluice_peek(sl, "k", 1, &slow, 1, &r), SLUICE_OK);
    assert_int_equal(r.remaining, 19);
    clk.t = 1150;
    assert_int_equal(sluice_acquire(sl, "k", 1, &slow, 1, &r), SLUICE_OK);
    assert_int_equal(r.remaining, 19);
    sluice_close(sl);
}

/* The TTL floor holds in memory as it does on Redis: with a floor of ten
 * minutes the backlog is still there 300 ms later. */
static void the_ttl_floor_keeps_state(void **state)
{
    vclock clk = {1000};
    sluice *sl = open_mem("mem://?ttl_floor_ms=600000", &clk);
    sluice_ruleset big = rules("token:10/100ms"),
                   slow = rules("token:1/100ms,burst=20");
    sluice_result r;

    (void)state;
    assert_int_equal(sluice_acquire(sl, "k", 1, &big, 10, &r), SLUICE_OK);
    clk.t = 1300;
    /* Backlog 1000 request*ms drained at 1 a ms for 300 ms: 700, that is
     * 7 requests of the 20: 13 left, 12 after this one. */
    assert_int_equal(sluice_peek(sl, "k", 1, &slow, 1, &r), SLUICE_OK);
    assert_int_equal(r.remaining, 12);
    sluice_close(sl);
}

/* A window outlives the TTL floor from its start, as a Redis window key
 * does, even when later windows are charged (found by the reference model,
 * seed 446730999: a charge three windows on dropped it, and a late request
 * into the window after it was admitted beyond the limit). */
static void the_ttl_floor_keeps_old_windows(void **state)
{
    vclock clk = {56};
    sluice *sl = open_mem("mem://?ttl_floor_ms=600000", &clk);
    sluice_ruleset rs = rules("sliding:2/100ms");
    sluice_result r;

    (void)state;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    clk.t = 320; /* window 3: window 0 no longer counts for now */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    /* Late, in window 1: window 0's 1 weighs 29 of 100 ms, so 2 more
     * would pass the limit; denied until window 0 weighs nothing. */
    clk.t = 171;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 2, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 29);
    sluice_close(sl);
}

/* A batch size whose arrays would pass SIZE_MAX bytes is refused before
 * anything is read from the caller's arrays. */
static void a_batch_too_large_to_allocate_is_refused(void **state)
{
    sluice *sl = NULL;
    sluice_request req = {0};
    sluice_result out;

    (void)state;
    assert_int_equal(sluice_open("mem://", NULL, &sl, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_acquire_many(sl, &req, SIZE_MAX / 8 + 1, &out),
                     SLUICE_ENOMEM);
    assert_non_null(strstr(sluice_errmsg(sl), "out of memory"));
    sluice_close(sl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(named_stores_are_shared_and_private_ones_are_not),
        cmocka_unit_test(threads_on_one_store_admit_exactly_the_limit),
        cmocka_unit_test(memory_is_bounded_by_expiry),
        cmocka_unit_test(memory_is_bounded_by_max_keys),
        cmocka_unit_test(the_fallback_store_is_bounded_too),
        cmocka_unit_test(a_named_store_has_one_bound),
        cmocka_unit_test(a_request_keeps_its_entries_past_the_bound),
        cmocka_unit_test(allocation_failures_return_enomem_and_leak_nothing),
        cmocka_unit_test(a_batch_too_large_to_allocate_is_refused),
        cmocka_unit_test(expired_state_stays_gone_for_clocks_behind),
        cmocka_unit_test(the_ttl_floor_keeps_state),
        cmocka_unit_test(the_ttl_floor_keeps_old_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
