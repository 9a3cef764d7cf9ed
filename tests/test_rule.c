/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rule.c - rule syntax, ranges and composites. */
#include "internal.h"
#include "store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static sluice_ruleset parse_ok(const char *text)
{
    sluice_ruleset rs;
    char err[512] = "";

    if (sluice_ruleset_parse(text, &rs, err, sizeof(err)) != SLUICE_OK)
        fail_msg("\"%s\" should parse: %s", text, err);
    return rs;
}

/* Fails unless text is refused with ERULE and a message quoting `quote`. */
static void parse_bad(const char *text, const char *quote)
{
    sluice_ruleset rs;
    char err[512] = "";
    sluice_status st = sluice_ruleset_parse(text, &rs, err, sizeof(err));

    if (st != SLUICE_ERULE)
        fail_msg("\"%s\" should be refused, got status %d", text, st);
    if (strstr(err, quote) == NULL)
        fail_msg("message for \"%s\" should quote \"%s\": %s", text, quote,
                 err);
}

static void every_algorithm_and_unit_parses(void **state)
{
    sluice_ruleset rs;

    (void)state;
    rs = parse_ok("fixed:10/1s");
    assert_int_equal(rs.count, 1);
    assert_int_equal(rs.rules[0].algorithm, SLUICE_FIXED);
    assert_int_equal(rs.rules[0].limit, 10);
    assert_int_equal(rs.rules[0].period_ms, 1000);
    assert_int_equal(parse_ok("sliding:5/250ms").rules[0].period_ms, 250);
    assert_int_equal(parse_ok("log:5/1m").rules[0].period_ms, 60000);
    assert_int_equal(parse_ok("token:5/1h").rules[0].period_ms, 3600000);
    assert_int_equal(parse_ok("gcra:5/1d").rules[0].period_ms, 86400000);
    assert_int_equal(parse_ok("log:5/10s").rules[0].algorithm, SLUICE_LOG);
    assert_int_equal(parse_ok("token:5/1s").rules[0].algorithm, SLUICE_TOKEN);
    assert_int_equal(parse_ok("gcra:5/1s").rules[0].algorithm, SLUICE_GCRA);
    assert_int_equal(parse_ok("sliding:5/1s").rules[0].algorithm,
                     SLUICE_SLIDING);
}

static void options_burst_and_tz_parse(void **state)
{
    sluice_ruleset rs;

    (void)state;
    rs = parse_ok("token:5/1s,burst=20");
    assert_int_equal(rs.rules[0].burst, 20);
    assert_int_equal(sl_rule_capacity(&rs.rules[0]), 20);
    rs = parse_ok("gcra:5/1s,burst=1");
    assert_int_equal(sl_rule_capacity(&rs.rules[0]), 1);
    rs = parse_ok("fixed:100/1d,tz=+08:00");
    assert_int_equal(rs.rules[0].tz_offset_ms, 8 * 3600000LL);
    rs = parse_ok("sliding:100/1h,tz=-05:30");
    assert_int_equal(rs.rules[0].tz_offset_ms, -(5 * 3600000LL + 1800000));
    rs = parse_ok("fixed:1/1d,tz=+14:00");
    assert_int_equal(rs.rules[0].tz_offset_ms, 14 * 3600000LL);
    rs = parse_ok("fixed:1/1d,tz=-00:00");
    assert_int_equal(rs.rules[0].tz_offset_ms, 0);
}

static void composite_with_tz_splits_on_plus(void **state)
{
    sluice_ruleset rs = parse_ok("fixed:1000/1d,tz=+08:00+fixed:100/1h");

    (void)state;
    assert_int_equal(rs.count, 2);
    assert_int_equal(rs.rules[0].limit, 1000);
    assert_int_equal(rs.rules[0].tz_offset_ms, 8 * 3600000LL);
    assert_int_equal(rs.rules[1].limit, 100);
    assert_int_equal(rs.rules[1].period_ms, 3600000);
    rs = parse_ok("token:5/1s,burst=10+log:100/1m+gcra:1/1s");
    assert_int_equal(rs.count, 3);
    assert_int_equal(rs.rules[2].algorithm, SLUICE_GCRA);
}

static void malformed_rules_are_refused_with_the_offending_part(void **state)
{
    (void)state;
    parse_bad("", "empty");
    parse_bad("leaky:10/1s", "leaky");
    parse_bad("fixed:0/1s", "limit 0");
    parse_bad("fixed:10/0s", "period 0");
    parse_bad("fixed:10/0ms", "period 0");
    parse_bad("fixed:10", "expected '/PERIOD'");
    parse_bad("fixed:/1s", "limit");
    parse_bad("fixed10/1s", "fixed10");
    parse_bad(":10/1s", "missing algorithm");
    parse_bad("fixed:10/1", "unit");
    parse_bad("fixed:10/1w", "unknown period unit");
    parse_bad("fixed:10/s", "period");
    parse_bad("fixed:10/1s,foo=1", "foo=1");
    parse_bad("fixed:10/1s,burst=5", "burst= applies to token and gcra");
    parse_bad("sliding:10/1s,burst=5", "burst= applies");
    parse_bad("log:10/1s,burst=5", "burst= applies");
    parse_bad("log:10/1s,tz=+01:00", "tz= applies to fixed and sliding");
    parse_bad("token:10/1s,tz=+01:00", "tz= applies");
    parse_bad("gcra:10/1s,tz=+01:00", "tz= applies");
    parse_bad("fixed:10/1s,tz=+15:00", "-14:00..+14:00");
    parse_bad("fixed:10/1s,tz=-14:01", "-14:00..+14:00");
    parse_bad("fixed:10/1s,tz=+08:60", "-14:00..+14:00");
    parse_bad("fixed:10/1s,tz=08:00", "tz must look like");
    parse_bad("fixed:10/1s,tz=+8:00", "tz must look like");
    parse_bad("fixed:10/1s,tz=+01:00,tz=+02:00", "tz given twice");
    parse_bad("token:10/1s,burst=2,burst=3", "burst given twice");
    parse_bad("token:10/1s,burst=0", "burst 0");
    parse_bad("fixed:10/1s garbage", "trailing");
    parse_bad("fixed:10/1s+", "missing algorithm");
    parse_bad("fixed:10/1s;", "trailing text at \";\"");
    parse_bad("fixed:10/1sec", "trailing text at \"ec\"");
    parse_bad("fixed:1.5/1s", "whole number");
    parse_bad("fixed:1e3/1s", "whole number");
    parse_bad("fixed:10/1.5s", "whole number");
    parse_bad("fixed:-1/1s", "limit");
    parse_bad("fixed:+1/1s", "limit");
    parse_bad("FIXED:10/1s", "unknown algorithm");
}

static void numbers_outside_the_accepted_ranges_are_refused(void **state)
{
    (void)state;
    parse_ok("fixed:1000000000/9007ms");
    parse_bad("fixed:1000000001/1s", "out of range 1..1000000000");
    parse_bad("fixed:99999999999999999999999/1s", "out of range");
    parse_ok("fixed:1/10000000000ms");
    parse_bad("fixed:1/10000000001ms", "10^10");
    parse_bad("fixed:1/116d", "10^10");
    parse_bad("fixed:1/99999999999999999999d", "10^10");
    parse_bad("token:1/1s,burst=1000000001", "out of range");
    /* capacity * period must stay below 2^53 */
    parse_ok("fixed:900719/10000000000ms");
    parse_bad("fixed:900720/10000000000ms", "2^53");
    parse_bad("token:1/10000000000ms,burst=900720", "2^53");
    parse_ok("token:1000000/10000000000ms,burst=900719");
    /* The largest accepted factors: 10^9 * 10^10 passes INT64_MAX, so the
     * bound must be checked without forming the product (it once wrapped
     * and let the rule through to a division by zero). */
    parse_bad("sliding:1000000000/10000000000ms", "2^53");
    parse_bad("fixed:1000000000/10000000000ms", "2^53");
    parse_bad("gcra:1/10000000000ms,burst=1000000000", "2^53");
    parse_bad("log:922337204/10000000000ms", "2^53");
    parse_ok("fixed:1000000000/9007199ms");
    parse_bad("fixed:1000000000/9007200ms", "2^53");
}

static void duplicate_state_in_a_composite_is_refused(void **state)
{
    (void)state;
    parse_bad("fixed:10/1s+fixed:20/1000ms", "same algorithm, period and tz");
    parse_bad("fixed:10/1d+fixed:20/1d,tz=+00:00", "same algorithm");
    parse_ok("fixed:10/1d+fixed:20/1d,tz=+01:00");
    parse_ok("fixed:10/1s+sliding:10/1s");
    parse_bad("token:1/1s+token:2/1s,burst=5", "same algorithm");
    parse_bad("fixed:1/1s+fixed:1/2s+fixed:1/3s+fixed:1/4s+fixed:1/5s+"
              "fixed:1/6s+fixed:1/7s+fixed:1/8s+fixed:1/9s",
              "more than 8");
}

static void hand_built_rulesets_are_checked(void **state)
{
    sluice_ruleset rs;
    char err[256];

    (void)state;
    memset(&rs, 0, sizeof(rs));
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    rs.count = 1;
    rs.rules[0].algorithm = (sluice_algorithm)9;
    rs.rules[0].limit = 1;
    rs.rules[0].period_ms = 1;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    assert_non_null(strstr(err, "unknown algorithm"));
    rs.rules[0].algorithm = SLUICE_FIXED;
    rs.rules[0].tz_offset_ms = 14 * 3600000LL + 1;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    rs.rules[0].tz_offset_ms = 0;
    rs.rules[0].burst = -1;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    rs.rules[0].burst = 0;
    rs.rules[0].period_ms = 0;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    assert_non_null(strstr(err, "period 0"));
    rs.rules[0].limit = 1000000000;
    rs.rules[0].period_ms = 10000000000LL;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    assert_non_null(strstr(err, "2^53"));
    rs.rules[0].limit = 1;
    assert_int_equal(sluice_ruleset_check(NULL, err, sizeof(err)),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_ruleset_parse(NULL, &rs, NULL, 0), SLUICE_EINVAL);
}

static void rules_format_back_to_canonical_text(void **state)
{
    char buf[128];
    sluice_ruleset rs = parse_ok("fixed:10/1s,tz=-05:30+token:3/1m,burst=9");

    (void)state;
    sl_rule_format(&rs.rules[0], buf, sizeof(buf));
    assert_string_equal(buf, "fixed:10/1000ms,tz=-05:30");
    sl_rule_format(&rs.rules[1], buf, sizeof(buf));
    assert_string_equal(buf, "token:3/60000ms,burst=9");
}

/* block=D[,extend=1] (SEMANTICS.md, "Penalties"): whole seconds on any
 * algorithm, formatted back, compared by value, checked when hand-built. */
static void block_and_extend_parse(void **state)
{
    sluice_ruleset rs, other;
    char buf[128], err[256];

    (void)state;
    rs = parse_ok("fixed:5/1m,block=15m");
    assert_int_equal(rs.rules[0].block_s, 900);
    assert_int_equal(rs.rules[0].block_extend, 0);
    assert_int_equal(rs.rules[0].limit, 5);
    rs = parse_ok("token:5/1s,burst=9,block=2h,extend=1+fixed:1/1d,block=1s");
    assert_int_equal(rs.rules[0].block_s, 7200);
    assert_int_equal(rs.rules[0].block_extend, 1);
    assert_int_equal(rs.rules[0].burst, 9);
    assert_int_equal(rs.rules[1].block_s, 1);
    rs = parse_ok("log:3/1s,block=10000000s,extend=0");
    assert_int_equal(rs.rules[0].block_s, 10000000);
    assert_int_equal(rs.rules[0].block_extend, 0);
    rs = parse_ok("sliding:3/1s,block=2000ms,tz=+01:00");
    assert_int_equal(rs.rules[0].block_s, 2);
    sl_rule_format(&rs.rules[0], buf, sizeof(buf));
    assert_string_equal(buf, "sliding:3/1000ms,tz=+01:00,block=2s");
    rs = parse_ok("gcra:3/1s,block=1m,extend=1");
    sl_rule_format(&rs.rules[0], buf, sizeof(buf));
    assert_string_equal(buf, "gcra:3/1000ms,block=60s,extend=1");
    other = parse_ok("gcra:3/1s,block=60s,extend=1");
    assert_true(sl_ruleset_same(&rs, &other));
    other = parse_ok("gcra:3/1s,block=60s");
    assert_false(sl_ruleset_same(&rs, &other));
    other = parse_ok("gcra:3/1s");
    assert_false(sl_ruleset_same(&rs, &other));

    parse_bad("fixed:5/1m,block=500ms", "block is whole seconds");
    parse_bad("fixed:5/1m,block=1500ms", "block is whole seconds");
    parse_bad("fixed:5/1m,block=0s", "block 0 is not allowed");
    parse_bad("fixed:5/1m,block=15", "block needs a unit");
    parse_bad("fixed:5/1m,block=15w", "unknown block unit");
    parse_bad("fixed:5/1m,block=x", "whole number for block");
    parse_bad("fixed:5/1m,block=116d", "block above 10^10 ms");
    parse_bad("fixed:5/1m,block=1m,block=2m", "block given twice");
    parse_bad("fixed:5/1m,extend=1", "extend=1 needs block=D");
    parse_bad("fixed:5/1m,block=1m,extend=2", "extend must be 0 or 1");
    parse_bad("fixed:5/1m,block=1m,extend=10", "extend must be 0 or 1");
    parse_bad("fixed:5/1m,block=1m,extend=1,extend=1", "extend given twice");

    /* Hand-built: the fields are checked as the text is. */
    rs = parse_ok("fixed:5/1m");
    rs.rules[0].block_extend = 1;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    assert_non_null(strstr(err, "needs a block"));
    rs.rules[0].block_s = 10000001;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_ERULE);
    assert_non_null(strstr(err, "1..10000000 s"));
    rs.rules[0].block_s = 10000000;
    assert_int_equal(sluice_ruleset_check(&rs, err, sizeof(err)), SLUICE_OK);
}

static void every_status_has_a_text(void **state)
{
    (void)state;
    assert_string_equal(sluice_strerror(SLUICE_OK), "success");
    assert_non_null(strstr(sluice_strerror(SLUICE_ETIMEOUT), "timeout"));
    assert_string_equal(sluice_strerror((sluice_status)999), "unknown status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_algorithm_and_unit_parses),
        cmocka_unit_test(options_burst_and_tz_parse),
        cmocka_unit_test(composite_with_tz_splits_on_plus),
        cmocka_unit_test(malformed_rules_are_refused_with_the_offending_part),
        cmocka_unit_test(numbers_outside_the_accepted_ranges_are_refused),
        cmocka_unit_test(duplicate_state_in_a_composite_is_refused),
        cmocka_unit_test(hand_built_rulesets_are_checked),
        cmocka_unit_test(rules_format_back_to_canonical_text),
        cmocka_unit_test(block_and_extend_parse),
        cmocka_unit_test(every_status_has_a_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
