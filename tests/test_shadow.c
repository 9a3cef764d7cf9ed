/* SPDX-License-Identifier: BSD-3-Clause */
/* test_shadow.c - shadow (dry-run) mode on a real backend: every acquire
 * is admitted, those the rules deny with SLUICE_SHADOWED; what the rules
 * admit is charged and what they deny is not (checked from a second,
 * enforcing handle on the same keys, both ways); batches, the deny cache,
 * waiting and the counters.
 *   test_shadow URL|@file */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url;

#define T0 (28333334LL * 60000)

static sluice *open_as(tu_clock *clk, const char *tag, bool shadow,
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
    o.shadow = shadow;
    o.deny_cache = deny;
    snprintf(prefix, sizeof(prefix), "sh%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    /* Two handles on mem:// share nothing; on mem://NAME, their store. */
    if (sluice_open(strcmp(url, "mem://") == 0 ? "mem://shadow" : url, &o, &sl,
                    err, sizeof(err)) != SLUICE_OK)
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
                             const sluice_ruleset *rs)
{
    sluice_result r;

    if (sluice_acquire(sl, key, strlen(key), rs, 1, &r) != SLUICE_OK)
        fail_msg("acquire: %s", sluice_errmsg(sl));
    return r;
}

static void every_acquire_is_admitted_and_denials_say_so(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_as(&clk, "admit", true, 0);
    sluice_ruleset rs = rules("fixed:3/1m");
    sluice_result r;
    sluice_stats st;
    int i;

    (void)state;
    for (i = 0; i < 3; i++) {
        r = acquire(sl, "k", &rs);
        assert_true(r.allowed);
        assert_int_equal(r.status, SLUICE_OK);
    }
    for (i = 0; i < 2; i++) {
        r = acquire(sl, "k", &rs);
        assert_true(r.allowed);
        assert_int_equal(r.status, SLUICE_SHADOWED);
        assert_int_equal(r.remaining, 0);
        assert_int_equal(r.retry_after_ms, 60000); /* the denial's */
    }
    /* A peek tells the truth: shadow mode admits acquires only. */
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    /* Waiting: admitted at once. */
    assert_int_equal(sluice_acquire_wait(sl, "k", 1, &rs, 1, 5000, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    assert_int_equal(st.allowed, 3);
    assert_int_equal(st.denied, 3);
    assert_int_equal(st.shadow_admitted, 3);
    sluice_close(sl);
}

/* Both sides of the choice: what the rules admit is charged; what they
 * deny is not, so that the state is the one enforcement would leave. */
static void admissions_are_charged_denials_are_not(void **state)
{
    tu_clock clk = {T0};
    sluice *dry = open_as(&clk, "charge", true, 0);
    sluice *real = open_as(&clk, "charge", false, 0);
    sluice_ruleset three = rules("fixed:3/1m"), five = rules("fixed:5/1m");
    int i;

    (void)state;
    for (i = 0; i < 7; i++)
        assert_true(acquire(dry, "k", &three).allowed);
    /* Charged: the three admitted fill the window for the real handle. */
    assert_false(acquire(real, "k", &three).allowed);
    /* Not charged: the four shadow admissions left room for two more of
     * five (seven charged would leave none). */
    assert_true(acquire(real, "k", &five).allowed);
    assert_true(acquire(real, "k", &five).allowed);
    assert_false(acquire(real, "k", &five).allowed);
    sluice_close(dry);
    sluice_close(real);
}

static void batches_and_the_deny_cache(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_as(&clk, "batch", true, 16);
    sluice_ruleset rs = rules("fixed:1/1m");
    sluice_request reqs[3];
    sluice_result out[3];

    (void)state;
    reqs[0] = (sluice_request){"a", 1, &rs, 1};
    reqs[1] = (sluice_request){"a", 1, &rs, 1};
    reqs[2] = (sluice_request){"b", 1, &rs, 1};
    assert_int_equal(sluice_acquire_many(sl, reqs, 3, out), SLUICE_OK);
    assert_int_equal(out[0].status, SLUICE_OK);
    assert_true(out[1].allowed);
    assert_int_equal(out[1].status, SLUICE_SHADOWED);
    assert_int_equal(out[2].status, SLUICE_OK);
    /* The denial was kept by the cache; its answer is shadowed too. */
    {
        sluice_result r = acquire(sl, "a", &rs);

        assert_true(r.allowed);
        assert_int_equal(r.status, SLUICE_SHADOWED);
    }
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_acquire_is_admitted_and_denials_say_so),
        cmocka_unit_test(admissions_are_charged_denials_are_not),
        cmocka_unit_test(batches_and_the_deny_cache),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s URL|@file\n", argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
