/* SPDX-License-Identifier: BSD-3-Clause */
/* test_key.c - the key layout and the checks of key, cost and time. */
#include "internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static sluice_rule rule(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs.rules[0];
}

static void keys_share_the_hash_tag_and_name_the_state(void **state)
{
    char buf[256];
    sluice_rule r;
    size_t n;

    (void)state;
    r = rule("fixed:10/1s,tz=+08:00");
    n = sl_key_build(buf, sizeof(buf), "sluice:", "user:1", 6, &r);
    assert_int_equal(n, strlen("sluice:{user:1}:fixed:1000:28800000"));
    assert_memory_equal(buf, "sluice:{user:1}:fixed:1000:28800000", n);
    r = rule("sliding:10/1m");
    n = sl_key_build(buf, sizeof(buf), "p:", "u", 1, &r);
    assert_memory_equal(buf, "p:{u}:sliding:60000:0", n);
    r = rule("log:10/1s");
    n = sl_key_build(buf, sizeof(buf), "p:", "u", 1, &r);
    assert_memory_equal(buf, "p:{u}:log:1000", n);
    /* The limit and burst are not part of the state's identity. */
    r = rule("token:10/1s,burst=50");
    n = sl_key_build(buf, sizeof(buf), "p:", "u", 1, &r);
    assert_memory_equal(buf, "p:{u}:token:1000", n);
    r = rule("gcra:99/1s");
    n = sl_key_build(buf, sizeof(buf), "p:", "u", 1, &r);
    assert_memory_equal(buf, "p:{u}:gcra:1000", n);
}

static void keys_are_binary_safe(void **state)
{
    char buf[256];
    sluice_rule r = rule("log:1/1s");
    size_t n = sl_key_build(buf, sizeof(buf), "p:", "a\0b", 3, &r);

    (void)state;
    assert_int_equal(n, strlen("p:{a") + 1 + strlen("b}:log:1000"));
    assert_memory_equal(buf, "p:{a\0b}:log:1000", n);
    assert_int_equal(sl_key_check("\0", 1, NULL, 0), SLUICE_OK);
}

static void too_small_buffers_are_reported(void **state)
{
    char buf[16];
    sluice_rule r = rule("log:1/1s");

    (void)state;
    assert_int_equal(sl_key_build(buf, sizeof(buf), "sluice:", "abcdef", 6, &r),
                     0);
}

static void empty_and_oversized_keys_are_refused(void **state)
{
    char big[1025], err[512];

    (void)state;
    memset(big, 'k', sizeof(big));
    assert_int_equal(sl_key_check("", 0, err, sizeof(err)), SLUICE_EKEY);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(sl_key_check(big, 1024, err, sizeof(err)), SLUICE_OK);
    assert_int_equal(sl_key_check(big, 1025, err, sizeof(err)), SLUICE_EKEY);
    assert_non_null(strstr(err, "1025 bytes"));
    assert_non_null(strstr(err, "kkkk"));
    assert_int_equal(sl_key_check(NULL, 3, err, sizeof(err)), SLUICE_EINVAL);
}

static void costs_and_times_outside_the_ranges_are_refused(void **state)
{
    char err[256];

    (void)state;
    assert_int_equal(sl_cost_check(0, err, sizeof(err)), SLUICE_ECOST);
    assert_non_null(strstr(err, "cost 0"));
    assert_int_equal(sl_cost_check(-1, err, sizeof(err)), SLUICE_ECOST);
    assert_non_null(strstr(err, "cost -1"));
    assert_int_equal(sl_cost_check(1000000001, err, sizeof(err)), SLUICE_ECOST);
    assert_int_equal(sl_cost_check(1, err, sizeof(err)), SLUICE_OK);
    assert_int_equal(sl_cost_check(1000000000, err, sizeof(err)), SLUICE_OK);
    assert_int_equal(sl_time_check(-1, err, sizeof(err)), SLUICE_ETIME);
    assert_non_null(strstr(err, "-1"));
    assert_int_equal(sl_time_check(SL_MAX_TIME_MS, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(sl_time_check(SL_MAX_TIME_MS + 1, err, sizeof(err)),
                     SLUICE_ETIME);
}

static void messages_quote_binary_values_printably(void **state)
{
    char q[64];

    (void)state;
    sl_quote(q, sizeof(q), "a\"b\x01", 4);
    assert_string_equal(q, "a\\x22b\\x01");
}

static void numbers_print_like_printf(void **state)
{
    static const int64_t values[] = {
        0,         1,        -1, 9, 10, 12345, -50400000, 9007199254740991LL,
        INT64_MAX, INT64_MIN};
    char a[32], b[32];
    size_t i, n;

    (void)state;
    for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        n = sl_i64toa(values[i], a);
        a[n] = '\0';
        snprintf(b, sizeof(b), "%lld", (long long)values[i]);
        assert_string_equal(a, b);
    }
}

/* Issue 20, item 6: a state sluice writes is read back, whatever its
 * numbers, and nothing past them is. */
static void a_bucket_state_reads_back_up_to_the_latest_keep(void **state)
{
    char b[SL_BUCKET_LEN];
    int64_t x, d, keep;

    (void)state;
    /* A full burst of B*P = 2^53 - 1 taken at t = 2^53 - 1 - 3001 with
     * P = 441650591: keep = t + (2^53 - 1) + P. */
    sl_bucket_pack(b, 9007199254737990LL, 9007199254740991LL,
                   9007199254737990LL + 9007199254740991LL + 441650591LL);
    assert_true(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    assert_int_equal(keep, 18014398951129572LL);
    sl_bucket_pack(b, SL_MAX_TIME_MS, SL_EXACT_BOUND - 1, SL_MAX_KEEP_MS);
    assert_true(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    sl_bucket_pack(b, SL_MAX_TIME_MS, SL_EXACT_BOUND - 1, SL_MAX_KEEP_MS + 1);
    assert_false(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    sl_bucket_pack(b, SL_MAX_TIME_MS + 1, 0, 0);
    assert_false(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    sl_bucket_pack(b, 0, SL_EXACT_BOUND, 0);
    assert_false(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    sl_bucket_pack(b, 0, 0, -1);
    assert_false(sl_bucket_unpack(b, sizeof(b), &x, &d, &keep));
    assert_false(sl_bucket_unpack(b, sizeof(b) - 1, &x, &d, &keep));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_share_the_hash_tag_and_name_the_state),
        cmocka_unit_test(keys_are_binary_safe),
        cmocka_unit_test(too_small_buffers_are_reported),
        cmocka_unit_test(empty_and_oversized_keys_are_refused),
        cmocka_unit_test(costs_and_times_outside_the_ranges_are_refused),
        cmocka_unit_test(messages_quote_binary_values_printably),
        cmocka_unit_test(numbers_print_like_printf),
        cmocka_unit_test(a_bucket_state_reads_back_up_to_the_latest_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
