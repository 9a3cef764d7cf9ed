/* SPDX-License-Identifier: BSD-3-Clause */
/* test_denycache.c - the local deny cache on a real backend: a hot denied
 * key costs no backend call until its retry_after has passed, with the
 * wait counting down exactly; a cheaper request, other rules and a reset
 * go to the backend; batches mix cached and decided requests; the cache
 * keeps at most its size; threads share it; off by default.
 *   test_denycache URL|@file */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

uint64_t sl_handle_batches(sluice *sl);
size_t sl_handle_deny_count(sluice *sl);

static const char *url;

/* A minute's window starts here. */
#define T0 (28333334LL * 60000)

static sluice *open_cached(tu_clock *clk, const char *tag, uint32_t entries)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    o.deny_cache = entries;
    /* Threads share the handle: a call's timeout counts its wait for its
     * turn, which valgrind, or a busy machine (8 of 4,000 calls timed out
     * with four busy loops beside the test on 2 cores), stretches past
     * 250 ms: 2 s (scaled), as tu_open gives. */
    o.command_timeout_ms = 2000 * tu_time_scale();
    snprintf(prefix, sizeof(prefix), "dc%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
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

static sluice_result acquire(sluice *sl, const char *key,
                             const sluice_ruleset *rs, int64_t cost)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, key, strlen(key), rs, cost, &r) != SLUICE_OK)
        fail_msg("acquire %s: %s", key, sluice_errmsg(sl));
    return r;
}

static void a_hot_denied_key_costs_no_backend_call(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "hot", 64);
    sluice_ruleset rs = rules("fixed:5/1m");
    sluice_result r;
    uint64_t calls;
    int i;

    (void)state;
    for (i = 0; i < 5; i++)
        assert_true(acquire(sl, "hot", &rs, 1).allowed);
    r = acquire(sl, "hot", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK); /* decided by the backend */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 60000);
    calls = sl_handle_batches(sl);
    for (i = 0; i < 1000; i++) {
        clk.t = T0 + 10 * i;
        r = acquire(sl, "hot", &rs, 1);
        assert_int_equal(r.status, SLUICE_CACHED);
        assert_false(r.allowed);
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.retry_after_ms, 60000 - 10 * i);
    }
    /* A peek of it too. */
    assert_int_equal(sluice_peek(sl, "hot", 3, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_CACHED);
    printf("# %s: 1001 calls on a denied key, %llu backend calls\n", url,
           (unsigned long long)(sl_handle_batches(sl) - calls));
    assert_int_equal(sl_handle_batches(sl), calls);
    /* Another cost is another entry: the backend decides it. */
    r = acquire(sl, "hot", &rs, 2);
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(sl_handle_batches(sl), calls + 1);
    /* Once the wait has passed, the backend again: a new window. */
    clk.t = T0 + 60000;
    r = acquire(sl, "hot", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sl_handle_batches(sl), calls + 2);
    sluice_close(sl);
}

/* Denials by name are cached as a key's are (once each was a round
 * trip), apart from a plain key of the same bytes, and a reset by name
 * forgets them. */
static void decisions_by_name_are_cached_apart_from_keys(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "name", 64);
    sluice_ruleset rs = rules("fixed:2/1m");
    sluice_result r;
    sluice_stats st;
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "dcn", 3, &rs, 0), SLUICE_OK);
    for (i = 0; i < 2; i++) {
        assert_int_equal(sluice_limiter_acquire(sl, "dcn", 3, "c", 1, 1, &r),
                         SLUICE_OK);
        assert_true(r.allowed);
    }
    assert_int_equal(sluice_limiter_acquire(sl, "dcn", 3, "c", 1, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK); /* the backend's denial */
    assert_false(r.allowed);
    for (i = 0; i < 100; i++) {
        clk.t = T0 + 10 * i;
        assert_int_equal(sluice_limiter_acquire(sl, "dcn", 3, "c", 1, 1, &r),
                         SLUICE_OK);
        assert_int_equal(r.status, SLUICE_CACHED);
        assert_false(r.allowed);
        assert_int_equal(r.retry_after_ms, 60000 - 10 * i);
    }
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    printf("# %s: 100 denials by name from the cache: %llu hits\n", url,
           (unsigned long long)st.deny_cache_hits);
    assert_int_equal(st.deny_cache_hits, 100);
    /* The plain key of the same bytes as the limiter's is another key. */
    r = acquire(sl, "3:dcnc", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    /* A reset by name forgets its denials. */
    assert_int_equal(sluice_limiter_reset(sl, "dcn", 3, "c", 1), SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(sl, "dcn", 3, "c", 1, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(sl);
}

static void a_cheaper_request_other_rules_and_a_reset_miss(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "miss", 64);
    sluice_ruleset rs = rules("fixed:10/1m"), raised = rules("fixed:20/1m");
    sluice_result r;

    (void)state;
    assert_true(acquire(sl, "k", &rs, 9).allowed);
    r = acquire(sl, "k", &rs, 3); /* 9 + 3 > 10 */
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(acquire(sl, "k", &rs, 3).status, SLUICE_CACHED);
    /* A cheaper request may still fit: decided, and it does. */
    r = acquire(sl, "k", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    /* Other rules: decided by the backend. */
    assert_int_equal(acquire(sl, "k", &raised, 3).status, SLUICE_OK);
    /* A reset through the handle forgets the denial. */
    assert_int_equal(acquire(sl, "k", &rs, 3).status, SLUICE_CACHED);
    assert_int_equal(sluice_reset(sl, "k", 1, &rs), SLUICE_OK);
    r = acquire(sl, "k", &rs, 3);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    /* A denial that never fits (cost above the capacity) is not kept:
     * nothing but other rules changes it. */
    r = acquire(sl, "k", &rs, 11);
    assert_int_equal(r.status, SLUICE_OK);
    assert_int_equal(r.retry_after_ms, -1);
    assert_int_equal(acquire(sl, "k", &rs, 11).status, SLUICE_OK);
    sluice_close(sl);
}

/* Rules compared by value: a burst left out is the limit, so the same
 * ruleset written two ways finds its denial (a bucket's logic: on mem://,
 * which every build has, whatever the backend under test refuses). */
static void rules_are_compared_by_value(void **state)
{
    tu_clock clk = {T0};
    sluice_options o;
    sluice *sl = NULL;
    sluice_ruleset a = rules("token:5/1m"), b = rules("token:5/1m,burst=5");
    sluice_result r;
    int i;

    (void)state;
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.deny_cache = 16;
    assert_int_equal(sluice_open("mem://", &o, &sl, NULL, 0), SLUICE_OK);
    for (i = 0; i < 5; i++)
        assert_true(acquire(sl, "v", &a, 1).allowed);
    r = acquire(sl, "v", &a, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(acquire(sl, "v", &b, 1).status, SLUICE_CACHED);
    sluice_close(sl);
}

/* A settle's excess lengthens every wait: the handle forgets the key's
 * denials, and the next request gets the backend's longer wait, not the
 * cached one (on mem://, which every build has, as above). */
static void a_settle_forgets_the_denial(void **state)
{
    tu_clock clk = {T0};
    sluice_options o;
    sluice *sl = NULL;
    sluice_ruleset rs = rules("token:5/1m");
    sluice_result r;
    int i;

    (void)state;
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.deny_cache = 16;
    assert_int_equal(sluice_open("mem://", &o, &sl, NULL, 0), SLUICE_OK);
    for (i = 0; i < 5; i++)
        assert_true(acquire(sl, "s", &rs, 1).allowed);
    /* Empty: one token in 12,000 ms. */
    assert_int_equal(acquire(sl, "s", &rs, 1).retry_after_ms, 12000);
    r = acquire(sl, "s", &rs, 1);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_int_equal(r.retry_after_ms, 12000);
    /* 5 more used than reserved: a backlog of 10, so 1 fits once 4 are
     * left, (10 - 4) * 12,000 ms away. */
    assert_int_equal(sluice_settle(sl, "s", 1, &rs, 0, 5, &r), SLUICE_OK);
    r = acquire(sl, "s", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 72000);
    sluice_close(sl);
}

/* A block (SEMANTICS.md, "Penalties") is held as any denial, until it
 * ends, past the window that denied; one with extend=1 never is: each
 * request must reach the backend to start the block again. */
static void a_block_is_cached_unless_it_extends(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "block", 64);
    sluice_ruleset rs = rules("fixed:2/1m,block=15m");
    sluice_ruleset ext = rules("fixed:2/1m,block=15m,extend=1");
    sluice_result r;
    uint64_t calls;

    (void)state;
    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, "b", 1, &rs, 1, &r) == SLUICE_EUNSUPPORTED) {
        /* redis+multi://, twemproxy:// (conformance: block.scn). A
         * batch's refused request is answered by itself, the others
         * decided. */
        sluice_ruleset plain = rules("fixed:2/1m");
        sluice_request reqs[3] = {
            {"p1", 2, &plain, 1}, {"p2", 2, &rs, 1}, {"p3", 2, &plain, 1}};
        sluice_result out[3];

        print_message("block refused here: %s\n", sluice_errmsg(sl));
        assert_int_equal(sluice_acquire_many(sl, reqs, 3, out),
                         SLUICE_EUNSUPPORTED);
        assert_int_equal(out[0].status, SLUICE_OK);
        assert_true(out[0].allowed);
        assert_int_equal(out[1].status, SLUICE_EUNSUPPORTED);
        assert_int_equal(out[2].status, SLUICE_OK);
        assert_true(out[2].allowed);
        sluice_close(sl);
        return;
    }
    assert_true(r.allowed);
    assert_true(acquire(sl, "b", &rs, 1).allowed);
    r = acquire(sl, "b", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 900000);
    calls = sl_handle_batches(sl);
    clk.t += 60000; /* the next window: the rule would admit */
    r = acquire(sl, "b", &rs, 1);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 840000);
    assert_int_equal(sl_handle_batches(sl), calls);
    clk.t += 840000; /* ended */
    r = acquire(sl, "b", &rs, 1);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);

    assert_true(acquire(sl, "e", &ext, 1).allowed);
    assert_true(acquire(sl, "e", &ext, 1).allowed);
    assert_false(acquire(sl, "e", &ext, 1).allowed);
    calls = sl_handle_batches(sl);
    clk.t += 1000;
    r = acquire(sl, "e", &ext, 1);
    assert_int_equal(r.status, SLUICE_OK); /* the backend's: extended */
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 900000);
    assert_int_equal(sl_handle_batches(sl), calls + 1);
    assert_int_equal(sl_handle_deny_count(sl), 0); /* none of "e"s */
    sluice_close(sl);
}

static void batches_mix_cached_and_decided(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "batch", 64);
    sluice_ruleset rs = rules("fixed:1/1m");
    sluice_request reqs[3];
    sluice_result out[3];
    uint64_t calls;

    (void)state;
    assert_true(acquire(sl, "a", &rs, 1).allowed);
    assert_false(acquire(sl, "a", &rs, 1).allowed);
    reqs[0] = (sluice_request){"a", 1, &rs, 1};
    reqs[1] = (sluice_request){"b", 1, &rs, 1};
    reqs[2] = (sluice_request){"b", 1, &rs, 1};
    calls = sl_handle_batches(sl);
    assert_int_equal(sluice_acquire_many(sl, reqs, 3, out), SLUICE_OK);
    assert_int_equal(out[0].status, SLUICE_CACHED);
    assert_false(out[0].allowed);
    assert_int_equal(out[1].status, SLUICE_OK);
    assert_true(out[1].allowed);
    assert_int_equal(out[2].status, SLUICE_OK);
    assert_false(out[2].allowed);
    assert_int_equal(sl_handle_batches(sl), calls + 1);
    /* The batch's denial is kept too. */
    assert_int_equal(acquire(sl, "b", &rs, 1).status, SLUICE_CACHED);
    sluice_close(sl);
}

static void the_cache_keeps_at_most_its_size(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "bound", 8);
    sluice_ruleset rs = rules("fixed:1/1m");
    char key[32];
    int i;

    (void)state;
    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "key%d", i);
        assert_true(acquire(sl, key, &rs, 1).allowed);
        assert_int_equal(acquire(sl, key, &rs, 1).status, SLUICE_OK);
        assert_true(sl_handle_deny_count(sl) <= 8);
        /* The newest denial is always kept. */
        assert_int_equal(acquire(sl, key, &rs, 1).status, SLUICE_CACHED);
    }
    printf("# 100 denied keys, a cache of 8: %zu kept\n",
           sl_handle_deny_count(sl));
    sluice_close(sl);
}

static void off_by_default(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = tu_open(url, &clk, "dc-off");
    sluice_ruleset rs = rules("fixed:1/1m");
    uint64_t calls;

    (void)state;
    assert_non_null(sl);
    assert_true(acquire(sl, "k", &rs, 1).allowed);
    calls = sl_handle_batches(sl);
    assert_int_equal(acquire(sl, "k", &rs, 1).status, SLUICE_OK);
    assert_int_equal(acquire(sl, "k", &rs, 1).status, SLUICE_OK);
    assert_int_equal(sl_handle_batches(sl), calls + 2);
    assert_int_equal(sl_handle_deny_count(sl), 0);
    sluice_close(sl);
}

#define THREADS 8

typedef struct worker {
    sluice *sl;
    const sluice_ruleset *rs;
    int allowed, cached, decided;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    int i;

    for (i = 0; i < 500; i++) {
        sluice_result r;

        if (sluice_acquire(w->sl, "shared", 6, w->rs, 1, &r) != SLUICE_OK)
            continue;
        w->allowed += r.allowed;
        w->cached += r.status == SLUICE_CACHED;
        w->decided += r.status == SLUICE_OK;
    }
    return NULL;
}

static void threads_share_the_cache(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "threads", 64);
    sluice_ruleset rs = rules("fixed:100/1m");
    pthread_t th[THREADS];
    worker ws[THREADS];
    int i, allowed = 0, cached = 0, decided = 0;

    (void)state;
    for (i = 0; i < THREADS; i++) {
        ws[i] = (worker){sl, &rs, 0, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &ws[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        allowed += ws[i].allowed;
        cached += ws[i].cached;
        decided += ws[i].decided;
    }
    printf("# %d threads x 500 on one key of fixed:100/1m: %d admitted, %d "
           "decided by the backend, %d by the cache\n",
           THREADS, allowed, decided, cached);
    assert_int_equal(allowed, 100);
    assert_int_equal(decided + cached, THREADS * 500);
    assert_true(cached > 0);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_hot_denied_key_costs_no_backend_call),
        cmocka_unit_test(decisions_by_name_are_cached_apart_from_keys),
        cmocka_unit_test(a_cheaper_request_other_rules_and_a_reset_miss),
        cmocka_unit_test(rules_are_compared_by_value),
        cmocka_unit_test(a_settle_forgets_the_denial),
        cmocka_unit_test(a_block_is_cached_unless_it_extends),
        cmocka_unit_test(batches_mix_cached_and_decided),
        cmocka_unit_test(the_cache_keeps_at_most_its_size),
        cmocka_unit_test(off_by_default),
        cmocka_unit_test(threads_share_the_cache),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s URL|@file\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
