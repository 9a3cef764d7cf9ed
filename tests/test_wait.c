/* SPDX-License-Identifier: BSD-3-Clause */
/* test_wait.c - sluice_acquire_wait on a real backend, with the real
 * clock once a window is full (the clock stands still while it fills): a
 * denied request that fits before the deadline is admitted once its
 * retry_after has passed (slept, not polled: a backend call or two); one
 * that fits only after the deadline, or never, is answered at once.
 *   test_wait URL|@file [--no-buckets] */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

uint64_t sl_handle_batches(sluice *sl);

static const char *url;
static bool no_buckets;

/* clk NULL: the real clock. */
static sluice *open_real(const char *tag, tu_held_clock *clk)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    /* A loaded machine may make a round trip, a TLS connect above all,
     * longer than the default 250 ms (wait.cluster_tls once timed out
     * filling its window): 2 s (scaled), as tu_open gives. */
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    if (clk != NULL) {
        o.clock = tu_held_clock_now;
        o.clock_ctx = clk;
    }
    snprintf(prefix, sizeof(prefix), "w%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    return sl;
}

static int64_t mono(void)
{
    return tu_clock_ms(CLOCK_MONOTONIC);
}

/* Takes the whole of rs on key at one instant (the clock held, so that no
 * window ends meanwhile, however slow the run), then, the clock running,
 * waits for one more. */
static void waits_for(const char *text, int64_t limit)
{
    tu_held_clock clk;
    sluice *sl;
    sluice_ruleset rs;
    sluice_result r;
    int64_t i, tp, retry;
    tu_mark t0, t1;
    uint64_t calls;

    tu_held_clock_init(&clk);
    sl = open_real("fits", &clk);
    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    for (i = 0; i < limit; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_true(r.allowed);
    }
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    retry = r.retry_after_ms;
    tp = mono();
    tu_held_clock_release(&clk);
    calls = sl_handle_batches(sl);
    t0 = tu_mark_now();
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, 2000, &r),
                     SLUICE_OK);
    t1 = tu_mark_now();
    printf("# %s %s: denied with retry_after %lld ms; admitted after %.1f "
           "ms (%.1f of them waiting for a CPU), %llu backend calls\n",
           url, text, (long long)retry, tu_wall_ms(t0, t1), tu_runq_ms(t0, t1),
           (unsigned long long)(sl_handle_batches(sl) - calls));
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_OK);
    /* It fits no sooner than retry after the clock was released, and no
     * later than 600 ms past it but for the thread's waits for a CPU,
     * which are the machine's (tu_mark). */
    assert_true(mono() - tp >= retry - 5 &&
                tu_net_ms(t0, t1) <= (double)(retry + 600));
    assert_true(sl_handle_batches(sl) - calls <= 4);
    sluice_close(sl);
}

static void a_window_ends_while_it_waits(void **state)
{
    (void)state;
    waits_for("fixed:3/1s", 3);
}

static void a_bucket_refills_while_it_waits(void **state)
{
    (void)state;
    /* twemproxy:// has no buckets: a log ages instead. */
    waits_for(no_buckets ? "log:5/500ms" : "token:5/1s", 5);
}

static void a_wait_past_the_deadline_answers_at_once(void **state)
{
    sluice *sl = open_real("late", NULL);
    sluice_ruleset rs;
    sluice_result r;
    tu_mark t0;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:1/1h", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    /* At once: well within the 300 ms it might have waited, but for the
     * thread's waits for a CPU (tu_mark). */
    t0 = tu_mark_now();
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, 300, &r),
                     SLUICE_OK);
    assert_false(r.allowed);
    assert_true(r.retry_after_ms > 300);
    assert_true(tu_net_ms(t0, tu_mark_now()) < 200);
    /* A cost that never fits: at once too. */
    t0 = tu_mark_now();
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 2, 300, &r),
                     SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, -1);
    assert_true(tu_net_ms(t0, tu_mark_now()) < 200);
    /* wait_ms 0: one acquire. */
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, 0, &r), SLUICE_OK);
    assert_false(r.allowed);
    /* Out of range. */
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, -1, &r),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, 86400001, &r),
                     SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "wait_ms"));
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_window_ends_while_it_waits),
        cmocka_unit_test(a_bucket_refills_while_it_waits),
        cmocka_unit_test(a_wait_past_the_deadline_answers_at_once),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL|@file [--no-buckets]\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    no_buckets = argc > 2 && strcmp(argv[2], "--no-buckets") == 0;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
