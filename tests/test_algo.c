/* SPDX-License-Identifier: BSD-3-Clause */
/* test_algo.c - the arithmetic on plain numbers, values worked out by hand
 * from the definitions, with the extremes of the accepted ranges. */
#include "algo.h"
#include "store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static sluice_rule rule(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs.rules[0];
}

static void floor_and_ceiling_division_round_toward_the_right_side(void **s)
{
    (void)s;
    assert_int_equal(sl_fdiv(7, 2), 3);
    assert_int_equal(sl_fdiv(-7, 2), -4);
    assert_int_equal(sl_fdiv(-8, 2), -4);
    assert_int_equal(sl_cdiv(7, 2), 4);
    assert_int_equal(sl_cdiv(-7, 2), -3);
    assert_int_equal(sl_cdiv(8, 2), 4);
    assert_int_equal(sl_cdiv(0, 5), 0);
}

static void windows_follow_the_tz_offset(void **s)
{
    sluice_rule r = rule("fixed:1/1d,tz=+08:00");
    int64_t k, to_end;

    (void)s;
    /* Local midnight in UTC+8 is 16:00 UTC: at 15:00 UTC one hour is left */
    sl_window_locate(&r, 15 * 3600000LL, &k, &to_end);
    assert_int_equal(k, 0);
    assert_int_equal(to_end, 3600000);
    sl_window_locate(&r, 16 * 3600000LL, &k, &to_end);
    assert_int_equal(k, 1);
    assert_int_equal(to_end, 86400000);
    r = rule("fixed:1/1d,tz=-05:00");
    /* t = 0 is 19:00 the day before in UTC-5: 5 hours left. */
    sl_window_locate(&r, 0, &k, &to_end);
    assert_int_equal(k, -1);
    assert_int_equal(to_end, 5 * 3600000LL);
    r = rule("fixed:1/1d");
    sl_window_locate(&r, SL_MAX_TIME_MS, &k, &to_end);
    assert_int_equal(k, SL_MAX_TIME_MS / 86400000);
    assert_int_equal(to_end, 86400000 - SL_MAX_TIME_MS % 86400000);
}

static void fixed_window_counts_costs_up_to_the_limit(void **s)
{
    sluice_rule r = rule("fixed:10/1s");
    sl_verdict v;

    (void)s;
    sl_fixed_decide(&r, 600, 7, 3, true, &v);
    assert_true(v.admit);
    assert_int_equal(v.remaining, 0);
    assert_int_equal(v.reset_ms, 600);
    assert_int_equal(v.retry_ms, -1);
    sl_fixed_decide(&r, 600, 8, 3, true, &v);
    assert_false(v.admit);
    assert_int_equal(v.remaining, 2);
    assert_int_equal(v.retry_ms, 600);
    sl_fixed_decide(&r, 600, 0, 11, true, &v);
    assert_false(v.admit);
    assert_true(v.never_fits);
    assert_int_equal(v.retry_ms, -1);
    assert_int_equal(v.reset_ms, 0);
    /* A lowered limit: the count above it leaves nothing. */
    sl_fixed_decide(&r, 600, 15, 1, false, &v);
    assert_int_equal(v.remaining, 0);
}

static void sliding_window_weights_the_previous_window(void **s)
{
    sluice_rule r = rule("sliding:10/1s");
    sl_verdict v;

    (void)s;
    /* e = 250: prev 8 weighs 8*750/1000 = 6; cur 2; 6 + 2 + 1 <= 10. */
    sl_sliding_decide(&r, 750, 2, 8, 1, true, &v);
    assert_true(v.admit);
    /* floor((10000 - 6000)/1000) - 3 = 1 */
    assert_int_equal(v.remaining, 1);
    assert_int_equal(v.reset_ms, 750 + 1000);
    /* cur 3 + cost 2 = 5; prev weight 6000 > (10-5)*1000 = 5000: deny.
     * Admitted once 8*(750-w) <= 5000: w >= 750 - 625 = 125. */
    sl_sliding_decide(&r, 750, 3, 8, 2, true, &v);
    assert_false(v.admit);
    assert_int_equal(v.retry_ms, 125);
    assert_int_equal(v.remaining, 1);
    /* cur 9 + 2 > 10: next window, where prev = 9 weighs 9*(1000-e'):
     * 9*(1000-e') <= 8000 for e' >= 112 (1000 - floor(8000/9) = 112). */
    sl_sliding_decide(&r, 750, 9, 8, 2, true, &v);
    assert_false(v.admit);
    assert_int_equal(v.retry_ms, 750 + 112);
    /* Only prev counts: full again when the current window ends. */
    sl_sliding_decide(&r, 750, 0, 1, 11, false, &v);
    assert_true(v.never_fits);
    assert_int_equal(v.reset_ms, 750);
}

static void token_bucket_refills_in_exact_fractions(void **s)
{
    sluice_rule r = rule("token:3/1s");
    sl_verdict v;
    int64_t x, d;

    (void)s;
    /* Empty bucket at t=0: D = 3 requests * 1000 = 3000 request-ms. */
    sl_bucket_decide(&r, 0, true, 0, 3000, 1, true, &v, &x, &d);
    assert_false(v.admit);
    /* One token takes 1000/3 ms: wait ceil(1000/3) = 334. */
    assert_int_equal(v.retry_ms, 334);
    assert_int_equal(v.reset_ms, 1000);
    sl_bucket_decide(&r, 333, true, 0, 3000, 1, true, &v, &x, &d);
    assert_false(v.admit);
    assert_int_equal(v.retry_ms, 1);
    sl_bucket_decide(&r, 334, true, 0, 3000, 1, true, &v, &x, &d);
    assert_true(v.admit);
    /* Drained 334*3 = 1002; D' = 1998 + 1000 = 2998: remaining 0. */
    assert_int_equal(d, 2998);
    assert_int_equal(x, 334);
    assert_int_equal(v.remaining, 0);
    assert_int_equal(v.reset_ms, 1000); /* ceil(2998/3) */
    /* A late request is decided at the last charge, waits from its own t. */
    sl_bucket_decide(&r, 300, true, 334, 2998, 1, true, &v, &x, &d);
    assert_false(v.admit);
    assert_int_equal(x, 334);
    assert_int_equal(v.retry_ms, 34 + 333); /* gap + ceil(998/3) */
}

static void token_bucket_is_exact_at_the_range_limits(void **s)
{
    /* capacity * period just below 2^53 */
    sluice_rule r = rule("token:1000000000/9007199ms");
    sl_verdict v;
    int64_t x, d;
    int64_t full = 1000000000LL * 9007199LL;

    (void)s;
    sl_bucket_decide(&r, SL_MAX_TIME_MS, false, 0, 0, 1000000000, true, &v, &x,
                     &d);
    assert_true(v.admit);
    assert_int_equal(d, full);
    assert_int_equal(v.reset_ms, 9007199);
    sl_bucket_decide(&r, SL_MAX_TIME_MS, true, SL_MAX_TIME_MS, full, 1, true,
                     &v, &x, &d);
    assert_false(v.admit);
    /* one request = 9007199 request-ms at 10^9 per ms: 1 ms */
    assert_int_equal(v.retry_ms, 1);
    /* A long idle gap empties the backlog without overflowing. */
    sl_bucket_decide(&r, SL_MAX_TIME_MS, true, 0, full, 1, true, &v, &x, &d);
    assert_true(v.admit);
    assert_int_equal(v.remaining, 999999999);
}

static void log_counts_entries_until_they_leave(void **s)
{
    sluice_rule r = rule("log:3/1s");
    sl_log_entry e[] = {{100, 1}, {200, 2}};
    sl_verdict v;
    int64_t stamp;

    (void)s;
    /* At 500 both entries count: 3 + 1 > 3. The first to leave (100, at
     * 1100) frees enough for a cost of 1. */
    sl_log_decide(&r, 500, e, 2, 1, true, &v, &stamp);
    assert_false(v.admit);
    assert_int_equal(v.remaining, 0);
    assert_int_equal(v.retry_ms, 600);
    assert_int_equal(v.reset_ms, 700);
    /* A cost of 2 needs 200 gone too, at 1200. */
    sl_log_decide(&r, 500, e, 2, 2, true, &v, &stamp);
    assert_false(v.admit);
    assert_int_equal(v.retry_ms, 700);
    sl_log_decide(&r, 1100, e, 2, 1, true, &v, &stamp);
    assert_true(v.admit); /* 100 left at exactly 1100 */
    assert_int_equal(v.remaining, 0);
    assert_int_equal(v.reset_ms, 1000);
    /* Late: decided at 200, stamped 200, waits from 150. */
    sl_log_decide(&r, 150, e, 1, 1, true, &v, &stamp);
    assert_int_equal(stamp, 150); /* not late: 100 < 150 */
    e[0].x = 200;
    sl_log_decide(&r, 150, e, 1, 2, true, &v, &stamp);
    assert_int_equal(stamp, 200);
    assert_true(v.admit);
    assert_int_equal(v.remaining, 0);
    assert_int_equal(v.reset_ms, 50 + 1000);
}

static void composites_take_the_binding_rule(void **s)
{
    sluice_ruleset rs;
    sl_verdict v[3];
    sluice_result out;

    (void)s;
    assert_int_equal(
        sluice_ruleset_parse("fixed:10/1s+fixed:5/1m+log:7/1h", &rs, NULL, 0),
        SLUICE_OK);
    memset(v, 0, sizeof(v));
    v[0] = (sl_verdict){true, false, 4, -1, 100};
    v[1] = (sl_verdict){false, false, 2, 900, 50000};
    v[2] = (sl_verdict){false, false, 2, 1000, 10};
    sl_combine(&rs, v, &out);
    assert_false(out.allowed);
    assert_int_equal(out.limit, 5); /* first of the least remaining */
    assert_int_equal(out.remaining, 2);
    assert_int_equal(out.retry_after_ms, 1000);
    assert_int_equal(out.reset_after_ms, 50000);
    v[2].never_fits = true;
    v[2].retry_ms = -1;
    sl_combine(&rs, v, &out);
    assert_int_equal(out.retry_after_ms, -1);
}

/* Refunds, by hand: a log gives back newest first, only what lives; a
 * bucket never past full, with no product that overflows. */
static void refunds_give_back_what_counts(void **s)
{
    sluice_rule lg = rule("log:10/1s"), tk = rule("token:1/10000000000ms");
    sluice_rule sl = rule("sliding:10/1s");
    sl_log_entry e[3] = {{0, 3}, {100, 4}, {200, 3}};
    size_t first, end;
    int64_t last, x, d, tc, tp;

    (void)s;
    /* 5 back at 300: 200:3 whole, then 2 of 100:4. */
    sl_refund_log(&lg, 300, e, 3, 5, &first, &end, &last);
    assert_int_equal(first, 0);
    assert_int_equal(end, 2);
    assert_int_equal(last, 2);
    /* At 1150 only 200:3 lives (0 and 100 are at or before 150). */
    sl_refund_log(&lg, 1150, e, 3, 1, &first, &end, &last);
    assert_int_equal(first, 2);
    assert_int_equal(end, 3);
    assert_int_equal(last, 2);
    /* More than lives: nothing stays. */
    sl_refund_log(&lg, 300, e, 3, 100, &first, &end, &last);
    assert_int_equal(end, first);
    /* 10^9 back on a period of 10^10 ms: A * P would pass 2^63. */
    assert_true(
        sl_refund_bucket(&tk, 5, true, 0, 10000000000LL, 1000000000, &x, &d));
    assert_int_equal(x, 5);
    assert_int_equal(d, 0);
    assert_false(sl_refund_bucket(&tk, 5, false, 0, 0, 1, &x, &d));
    /* A refund of 0 changes nothing: no re-stamp at t, no dead entry
     * dropped (a late request after it reads the state as it was). */
    assert_true(sl_refund_bucket(&tk, 5, true, 0, 7, 0, &x, &d));
    assert_int_equal(x, 0);
    assert_int_equal(d, 7);
    sl_refund_log(&lg, 1150, e, 3, 0, &first, &end, &last);
    assert_int_equal(first, 0);
    assert_int_equal(end, 3);
    assert_int_equal(last, 3);
    /* Sliding: the current window first, then the previous one. */
    sl_refund_window(&sl, 3, 8, 5, &tc, &tp);
    assert_int_equal(tc, 3);
    assert_int_equal(tp, 2);
    sl_refund_window(&sl, 0, 1, 5, &tc, &tp);
    assert_int_equal(tc, 0);
    assert_int_equal(tp, 1);
}

/* A grant is the least room, never below 0 (a lowered limit). */
static void grants_take_the_least_room(void **s)
{
    sluice_ruleset rs;
    sl_state_view v[2];

    (void)s;
    assert_int_equal(
        sluice_ruleset_parse("fixed:5/1s+token:10/1s", &rs, NULL, 0),
        SLUICE_OK);
    memset(v, 0, sizeof(v));
    v[0].cur = 2;                                           /* room 3 */
    v[1] = (sl_state_view){.has = true, .x = 0, .d = 8500}; /* room 1 */
    assert_int_equal(sl_grant(&rs, v, 0, 9), 1);
    v[1].has = false;
    assert_int_equal(sl_grant(&rs, v, 0, 9), 3);
    assert_int_equal(sl_grant(&rs, v, 0, 2), 2);
    v[0].cur = 7; /* above the limit */
    assert_int_equal(sl_grant(&rs, v, 0, 9), 0);
}

/* A forced charge (a settle's excess), by hand: past the limit, up to the
 * ceiling max(capacity, floor((2^50 - 1) / P)), with no product that
 * overflows. */
static void forced_charges_go_past_the_limit_up_to_the_ceiling(void **s)
{
    sluice_rule fx = rule("fixed:10/1s"), big = rule("fixed:1000000000/1h");
    sluice_rule tk = rule("token:1000/1m"), far = rule("token:1/10000000000ms");
    sluice_rule lg = rule("log:10/1s");
    sl_log_entry e[2] = {{0, 4}, {100, 6}};
    int64_t x, d, stamp;

    (void)s;
    assert_int_equal(sl_force_ceiling(&fx), 1125899906842623LL / 1000);
    assert_int_equal(sl_force_ceiling(&big), 1000000000);
    assert_int_equal(sl_force_window(&fx, 12, 5), 5);
    assert_int_equal(sl_force_window(&big, 999999998, 5), 2);
    assert_int_equal(sl_force_window(&big, 1000000000, 5), 0);
    /* 1,000 tokens taken, 400 more forced: 1,400 minutes' worth of ms. */
    sl_force_bucket(&tk, 0, true, 0, 60000000, 400, &x, &d);
    assert_int_equal(x, 0);
    assert_int_equal(d, 84000000);
    /* Late: at u = x = 50, drained from 60,000,000 by 50,000. */
    sl_force_bucket(&tk, 10, true, 50, 60000000, 1, &x, &d);
    assert_int_equal(x, 50);
    assert_int_equal(d, 60060000);
    sl_force_bucket(&tk, 7, false, 0, 0, 2, &x, &d);
    assert_int_equal(x, 7);
    assert_int_equal(d, 120000);
    /* 10^9 on a period of 10^10 ms: e * P would pass 2^63; the backlog
     * stops at the ceiling, floor((2^50 - 1) / 10^10) = 112,589 times P. */
    sl_force_bucket(&far, 0, true, 0, 0, 1000000000, &x, &d);
    assert_int_equal(d, 1125890000000000LL);
    sl_force_bucket(&far, 0, true, 0, 1125890000000000LL, 1, &x, &d);
    assert_int_equal(d, 1125890000000000LL);
    sl_force_bucket(&far, 0, true, 0, 10000000000LL, 1, &x, &d);
    assert_int_equal(d, 20000000000LL);
    /* A log: stamped at u = max(t, newest), whatever lives there. */
    assert_int_equal(sl_force_log(&lg, 50, e, 2, 3, &stamp), 3);
    assert_int_equal(stamp, 100);
    assert_int_equal(sl_force_log(&lg, 1050, e, 2, 3, &stamp), 3);
    assert_int_equal(stamp, 1050);
}

/* The state after a forced charge: the wait each algorithm answers is
 * the smallest one after which the request is admitted, found by trying
 * every wait (counts above the limit: sliding's current and previous
 * windows, a bucket's backlog past its burst, a log's sum past L). */
static void waits_from_a_deficit_are_exact(void **s)
{
    sluice_rule sd = rule("sliding:5/10ms"), tk = rule("token:3/10ms");
    sluice_rule lg = rule("log:5/10ms");
    int64_t cur, prev, e, c, w, d, nx, nd, a, b;
    sl_verdict v, u;
    sl_log_entry en[2];

    (void)s;
    for (cur = 0; cur <= 40; cur++)
        for (prev = 0; prev <= 40; prev++)
            for (e = 0; e < 10; e++)
                for (c = 1; c <= 5; c++) {
                    sl_sliding_decide(&sd, 10 - e, cur, prev, c, false, &v);
                    if (v.admit)
                        continue;
                    for (w = 1;; w++) {
                        int64_t at = e + w;

                        if (at < 10)
                            sl_sliding_decide(&sd, 10 - at, cur, prev, c, false,
                                              &u);
                        else if (at < 20)
                            sl_sliding_decide(&sd, 20 - at, 0, cur, c, false,
                                              &u);
                        else
                            sl_sliding_decide(&sd, 30 - at, 0, 0, c, false, &u);
                        if (u.admit)
                            break;
                    }
                    assert_int_equal(v.retry_ms, w);
                }
    for (d = 0; d <= 400; d++)
        for (c = 1; c <= 3; c++) {
            sl_bucket_decide(&tk, 0, true, 0, d, c, false, &v, &nx, &nd);
            if (v.admit)
                continue;
            for (w = 1;; w++) {
                sl_bucket_decide(&tk, w, true, 0, d, c, false, &u, &nx, &nd);
                if (u.admit)
                    break;
            }
            assert_int_equal(v.retry_ms, w);
        }
    for (a = 0; a <= 20; a++)
        for (b = 0; b <= 20; b++)
            for (c = 1; c <= 5; c++) {
                en[0] = (sl_log_entry){3, a};
                en[1] = (sl_log_entry){6, b};
                if (a == 0 || b == 0)
                    continue;
                sl_log_decide(&lg, 8, en, 2, c, false, &v, &nx);
                if (v.admit)
                    continue;
                for (w = 1;; w++) {
                    sl_log_decide(&lg, 8 + w, en, 2, c, false, &u, &nx);
                    if (u.admit)
                        break;
                }
                assert_int_equal(v.retry_ms, w);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            floor_and_ceiling_division_round_toward_the_right_side),
        cmocka_unit_test(windows_follow_the_tz_offset),
        cmocka_unit_test(fixed_window_counts_costs_up_to_the_limit),
        cmocka_unit_test(sliding_window_weights_the_previous_window),
        cmocka_unit_test(token_bucket_refills_in_exact_fractions),
        cmocka_unit_test(token_bucket_is_exact_at_the_range_limits),
        cmocka_unit_test(log_counts_entries_until_they_leave),
        cmocka_unit_test(composites_take_the_binding_rule),
        cmocka_unit_test(refunds_give_back_what_counts),
        cmocka_unit_test(grants_take_the_least_room),
        cmocka_unit_test(forced_charges_go_past_the_limit_up_to_the_ceiling),
        cmocka_unit_test(waits_from_a_deficit_are_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
