/* SPDX-License-Identifier: BSD-3-Clause */
/* test_http.c - sluice_http_headers: the RateLimit-Policy and RateLimit
 * fields of draft-ietf-httpapi-ratelimit-headers-11 and Retry-After, for
 * a single rule and composites decided on mem:// (the rule that binds
 * named, with its own reset; Retry-After from the rule that denies), a
 * bucket's quota (its burst), names escaped as Structured Field Strings,
 * seconds rounded up, snprintf's contract, and the binding rule's reset
 * as it fits the result's padding. */
#include "sluice.h"

#include "algo.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static int64_t now_ms;

static int64_t test_clock(void *ctx)
{
    (void)ctx;
    return now_ms;
}

static sluice *open_mem_at(const char *url)
{
    sluice_options o;
    sluice *sl = NULL;

    sluice_options_init(&o);
    o.clock = test_clock;
    assert_int_equal(sluice_open(url, &o, &sl, NULL, 0), SLUICE_OK);
    return sl;
}

static sluice *open_mem(void)
{
    return open_mem_at("mem://");
}

/* 2023-11-14T00:00:00Z, a UTC midnight, as ms. */
#define MIDNIGHT 1699920000000LL

static void an_admission(void **state)
{
    sluice_ruleset rs = rules("fixed:100/1m");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = true,
                       .limit = 100,
                       .remaining = 42,
                       .retry_after_ms = -1,
                       .reset_after_ms = 30500};
    char buf[512];
    size_t n;

    (void)state;
    n = sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                             "RateLimit: \"api\";r=42;t=31\r\n");
}

/* The case: a second's quota and a day's. The second binds (9
 * left of 10): its own reset, not the day's, goes with it. */
static void a_composite_names_the_binding_rule_with_its_own_reset(void **s)
{
    sluice_ruleset rs = rules("fixed:10/1s+fixed:1000/1d");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];

    (void)s;
    now_ms = MIDNIGHT + 15636400; /* 04:20:36.400: day ends in 70763.6 s */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.rule, 0);
    assert_int_equal(r.reset_after_ms, 70763600);
    assert_int_equal(sluice_result_rule_reset_ms(&r), 600);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api-1\";q=10;w=1, "
                             "\"api-2\";q=1000;w=86400\r\n"
                             "RateLimit: \"api-1\";r=9;t=1\r\n");
    sluice_close(sl);
}

/* fixed:5/1s+fixed:5/1h, both spent: the hour denies longest, so it binds
 * and Retry-After is its wait; a second later only the hour denies. */
static void a_denial_names_the_rule_that_denies_longest(void **s)
{
    sluice_ruleset rs = rules("fixed:5/1s+fixed:5/1h");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];

    (void)s;
    now_ms = MIDNIGHT + 600000; /* 00:10:00: the hour ends in 3000 s */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 5, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.rule, 1);
    assert_int_equal(r.retry_after_ms, 3000000);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api-1\";q=5;w=1, "
                             "\"api-2\";q=5;w=3600\r\n"
                             "RateLimit: \"api-2\";r=0;t=3000\r\n"
                             "Retry-After: 3000\r\n");
    now_ms += 1000;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.rule, 1);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"api-2\";r=0;t=2999\r\n"
                                "Retry-After: 2999\r\n"));
    sluice_close(sl);
}

/* The deny cache answers a denial again later: the binding rule and its
 * reset count down with it. */
static void a_cached_denial_keeps_the_binding_rule(void **s)
{
    sluice_ruleset rs = rules("fixed:50/1d+fixed:5/1h");
    sluice *sl = open_mem_at("mem://?deny_cache=10");
    sluice_result r;

    (void)s;
    now_ms = MIDNIGHT + 600000; /* the hour ends in 3000 s, the day later */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 5, &r), SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_int_equal(r.rule, 1); /* the hour denies; the day has 45 */
    assert_in_range(sluice_result_rule_reset_ms(&r), 3000000,
                    3000000 + 3000000 / 1024);
    assert_int_equal(r.reset_after_ms, 85800000);
    now_ms += 600000;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_int_equal(r.rule, 1);
    assert_int_equal(r.retry_after_ms, 2400000);
    /* 2400000 in the 16-bit form: within 1/1024, never early. */
    assert_in_range(sluice_result_rule_reset_ms(&r), 2400000,
                    2400000 + 2400000 / 1024);
    sluice_close(sl);
}

/* A bucket of burst 20 refilled at 10 a second: r counts against the
 * burst, so q is 20, over the 2 s it takes to refill. */
static void a_bucket_quota_is_its_burst(void **s)
{
    sluice_ruleset rs = rules("token:10/1s,burst=20");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];

    (void)s;
    now_ms = MIDNIGHT;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=20;w=2\r\n"
                             "RateLimit: \"api\";r=19;t=1\r\n");
    rs = rules("gcra:1/1d,burst=100000");
    sluice_http_headers(&rs, &r, "g", buf, sizeof(buf));
    assert_non_null(strstr(buf, "\"g\";q=100000;w=8640000000\r\n"));
    sluice_close(sl);
}

/* draft-ietf-httpapi-ratelimit-headers-11, 4.1.2: t is the effective
 * window, the time within which the client can use no more than r. A
 * bucket gains a unit every period / limit, so t is the time to its next
 * unit, not the time until it is full. token:10/1m,burst=5 (a unit every
 * 6 s): a peek answers as the acquire would, its unit taken and back in
 * 6 s; five requests at one instant, the sixth denied with r=0, t=6 (not
 * 30, the time until full) and Retry-After: 6; 3 s on, half a unit is in
 * and the next whole one 3 s away; 7 s on, one is in, and a peek that
 * takes it sees the next in 5 s. */
static void a_bucket_t_is_the_time_to_its_next_unit(void **s)
{
    sluice_ruleset rs = rules("token:10/1m,burst=5");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];
    int i;

    (void)s;
    now_ms = MIDNIGHT;
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    sluice_http_headers(&rs, &r, "default", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"default\";r=4;t=6\r\n"));
    for (i = 0; i < 5; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_true(r.allowed);
    }
    sluice_http_headers(&rs, &r, "default", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"default\";r=0;t=6\r\n"));
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 6000);
    assert_int_equal(r.reset_after_ms, 30000);
    sluice_http_headers(&rs, &r, "default", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"default\";q=5;w=30\r\n"
                             "RateLimit: \"default\";r=0;t=6\r\n"
                             "Retry-After: 6\r\n");
    now_ms += 3000;
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    sluice_http_headers(&rs, &r, "default", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"default\";r=0;t=3\r\n"
                                "Retry-After: 3\r\n"));
    now_ms += 4000;
    assert_int_equal(sluice_peek(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_http_headers(&rs, &r, "default", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"default\";r=0;t=5\r\n"));
    sluice_close(sl);
}

/* Draft -11, section 6: Retry-After SHOULD NOT be earlier than the end
 * of the effective window. sliding:2/1s, two requests in the window
 * [0, 1000) and one at 1500 (the old window weighs 1 of 2): the next one
 * at 1500 fits once that weight drops, in 500 ms, while the rule is whole
 * again only in 1500 ms. t is the effective window, so at most the
 * wait: t=1, Retry-After: 1 (it was t=2 against Retry-After: 1). */
static void a_denial_t_is_never_past_retry_after(void **s)
{
    sluice_ruleset rs = rules("sliding:2/1s");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];

    (void)s;
    now_ms = MIDNIGHT;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 2, &r), SLUICE_OK);
    now_ms += 1500;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, 500);
    assert_int_equal(r.reset_after_ms, 1500);
    sluice_http_headers(&rs, &r, "s", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"s\";r=0;t=1\r\n"
                                "Retry-After: 1\r\n"));
    sluice_close(sl);
}

/* A composite's binding reset is rounded up to 11 significant bits:
 * log:3/1h+log:3/1d after one request, the hour binds with its reset of
 * 3,600,000 ms, kept as 1,758 * 2^11 = 3,600,384 (t=3601 before). A log
 * is whole again within its period, so t is 3600; a block may hold the
 * key longer, and is not cut. */
static void a_rounded_reset_never_passes_the_rule(void **s)
{
    sluice_ruleset rs = rules("log:3/1h+log:3/1d"),
                   blocked = rules("log:3/1h,block=2h+log:3/1d");
    sluice *sl = open_mem();
    sluice_result r;
    char buf[512];

    (void)s;
    now_ms = MIDNIGHT;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.rule, 0);
    assert_int_equal(sluice_result_rule_reset_ms(&r), 3600384);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"api-1\";r=2;t=3600\r\n"));
    sluice_http_headers(&blocked, &r, "api", buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"api-1\";r=2;t=3601\r\n"));
    sluice_close(sl);
}

static void a_denial_that_never_fits_has_no_retry_after(void **state)
{
    sluice_ruleset rs = rules("token:5/1s");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = false,
                       .limit = 5,
                       .remaining = 5,
                       .retry_after_ms = -1,
                       .reset_after_ms = 0};
    char buf[512];

    (void)state;
    sluice_http_headers(&rs, &r, "x", buf, sizeof(buf));
    assert_null(strstr(buf, "Retry-After"));
    /* A full bucket: its next unit one unit's time (200 ms) after one
     * is taken. */
    assert_non_null(strstr(buf, "RateLimit: \"x\";r=5;t=1\r\n"));
}

static void names_are_structured_field_strings(void **state)
{
    sluice_ruleset rs = rules("fixed:1/1s");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = true,
                       .limit = 1,
                       .remaining = 0,
                       .retry_after_ms = -1,
                       .reset_after_ms = 1000};
    char buf[512];

    (void)state;
    sluice_http_headers(&rs, &r, "a\"b\\c\nd", buf, sizeof(buf));
    assert_non_null(strstr(buf, "\"a\\\"b\\\\c_d\";q=1;w=1"));
}

static void the_snprintf_contract(void **state)
{
    sluice_ruleset rs = rules("fixed:100/1m");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = true,
                       .limit = 100,
                       .remaining = 42,
                       .retry_after_ms = -1,
                       .reset_after_ms = 30500};
    char small[10], big[512];
    size_t need;

    (void)state;
    need = sluice_http_headers(&rs, &r, "api", NULL, 0);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", small, sizeof(small)),
                     need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", big, sizeof(big)),
                     need);
    assert_int_equal(strlen(big), need);
    assert_int_equal(sluice_http_headers(NULL, &r, "api", big, sizeof(big)), 0);
    assert_string_equal(big, "");
}

/* The binding rule's reset in 16 bits: exact below 2048 ms, never early,
 * late by less than 1/1024; 0 (the key's reset) when it is the same, and
 * a zeroed struct (an older library's) reads as the key's reset. */
static void the_rule_reset_fits_the_padding(void **state)
{
    sluice_result r;
    int64_t ms, got;

    (void)state;
    assert_int_equal(offsetof(sluice_result, rule), 5);
    assert_int_equal(offsetof(sluice_result, rule_reset_code), 6);
    assert_int_equal(offsetof(sluice_result, limit), 8);
    assert_int_equal(sizeof(sluice_result), 40);
    memset(&r, 0, sizeof(r));
    r.reset_after_ms = 12345;
    assert_int_equal(sluice_result_rule_reset_ms(&r), 12345);
    assert_int_equal(sluice_result_rule_reset_ms(NULL), 0);
    /* Up to 2000 << 30 ms, 68 years; past that, the key's reset. */
    for (ms = 0; ms < INT64_C(2000) << 30; ms = ms * 3 / 2 + 1) {
        r.reset_after_ms = INT64_MAX;
        sl_result_set_rule_reset(&r, ms);
        got = sluice_result_rule_reset_ms(&r);
        if (got < ms || (ms < 2048 && got != ms) || got - ms > ms / 1024)
            fail_msg("reset %lld ms reads back as %lld", (long long)ms,
                     (long long)got);
        r.reset_after_ms = ms;
        sl_result_set_rule_reset(&r, ms);
        assert_int_equal(r.rule_reset_code, 0);
    }
    r.reset_after_ms = INT64_MAX;
    sl_result_set_rule_reset(&r, INT64_C(1) << 50);
    assert_int_equal(sluice_result_rule_reset_ms(&r), INT64_MAX);
    /* Rounded up, but never past the key's reset, which is at least the
     * rule's: 4,097 rounds to 4,100, and the key's 4,098 caps it. */
    r.reset_after_ms = 4098;
    sl_result_set_rule_reset(&r, 4097);
    assert_int_equal(sluice_result_rule_reset_ms(&r), 4098);
    r.reset_after_ms = 5000;
    sl_result_set_rule_reset(&r, 4097);
    assert_int_equal(sluice_result_rule_reset_ms(&r), 4100);
}

/* The draft's other parameters: qu for a unit (none for requests, no w
 * for a concurrency), pk as a Byte Sequence: the first 16 bytes of the
 * key's SHA-256 (the value below from coreutils: printf 'user:1' |
 * sha256sum), or with SLUICE_HTTP_RAW_PK the key itself (the draft's own
 * example, "App-999"). Unknown units and flags write nothing. */
static void units_and_partition_keys(void **state)
{
    sluice_ruleset rs = rules("fixed:10/1m+token:5/1s");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = true,
                       .rule = 1,
                       .limit = 5,
                       .remaining = 4,
                       .retry_after_ms = -1,
                       .reset_after_ms = 200};
    char buf[512];

    (void)state;
    assert_true(sluice_http_fields(&rs, &r, "api", SLUICE_UNIT_CONTENT_BYTES,
                                   "user:1", 6, 0, buf, sizeof(buf)) > 0);
    assert_string_equal(
        buf, "RateLimit-Policy: \"api-1\";q=10;qu=\"content-bytes\";w=60, "
             "\"api-2\";q=5;qu=\"content-bytes\";w=1\r\n"
             "RateLimit: \"api-2\";r=4;t=1;pk=:q8Oke4rRi4VcaH2cosYJHg==:\r\n");
    assert_null(strstr(buf, "user:1"));
    sluice_http_fields(&rs, &r, "api", SLUICE_UNIT_CONCURRENT_REQUESTS,
                       "App-999", 7, SLUICE_HTTP_RAW_PK, buf, sizeof(buf));
    assert_string_equal(
        buf, "RateLimit-Policy: \"api-1\";q=10;qu=\"concurrent-requests\", "
             "\"api-2\";q=5;qu=\"concurrent-requests\"\r\n"
             "RateLimit: \"api-2\";r=4;t=1;pk=:QXBwLTk5OQ==:\r\n");
    /* Requests, no key: sluice_http_headers' text. */
    {
        char old[512];

        sluice_http_headers(&rs, &r, "api", old, sizeof(old));
        sluice_http_fields(&rs, &r, "api", SLUICE_UNIT_REQUESTS, NULL, 0, 0,
                           buf, sizeof(buf));
        assert_string_equal(buf, old);
    }
    assert_int_equal(sluice_http_fields(&rs, &r, "api", (sluice_quota_unit)3,
                                        NULL, 0, 0, buf, sizeof(buf)),
                     0);
    assert_string_equal(buf, "");
    assert_int_equal(sluice_http_fields(&rs, &r, "api", SLUICE_UNIT_REQUESTS,
                                        NULL, 0, 2, buf, sizeof(buf)),
                     0);
    assert_int_equal(sluice_http_fields(&rs, &r, "api", SLUICE_UNIT_REQUESTS,
                                        NULL, 5, 0, buf, sizeof(buf)),
                     0);
}

/* The problem body of a denial: the draft's type, 429, the policy that
 * binds (as the fields name it, escaped for JSON); none for an admission;
 * snprintf's contract. */
static void a_denial_as_problem_details(void **state)
{
    sluice_ruleset one = rules("fixed:10/1m"),
                   two = rules("fixed:10/1m+fixed:100/1h");
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = false,
                       .rule = 1,
                       .limit = 10,
                       .remaining = 0,
                       .retry_after_ms = 1000,
                       .reset_after_ms = 3600000};
    char buf[512], small[16];
    size_t n;

    (void)state;
    n = sluice_http_problem(&two, &r, "a\"b", buf, sizeof(buf));
    assert_string_equal(
        buf, "{\"type\": \"https://iana.org/assignments/http-problem-types"
             "#quota-exceeded\", \"title\": \"Request cannot be satisfied "
             "as assigned quota has been exceeded\", \"status\": 429, "
             "\"violated-policies\": [\"a\\\"b-2\"]}");
    assert_int_equal(n, strlen(buf));
    assert_int_equal(
        sluice_http_problem(&two, &r, "a\"b", small, sizeof(small)), n);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    r.rule = 0;
    sluice_http_problem(&one, &r, NULL, buf, sizeof(buf));
    assert_non_null(strstr(buf, "[\"sluice\"]"));
    r.allowed = true;
    assert_int_equal(sluice_http_problem(&one, &r, "x", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_admission),
        cmocka_unit_test(a_composite_names_the_binding_rule_with_its_own_reset),
        cmocka_unit_test(a_denial_names_the_rule_that_denies_longest),
        cmocka_unit_test(a_cached_denial_keeps_the_binding_rule),
        cmocka_unit_test(a_bucket_quota_is_its_burst),
        cmocka_unit_test(a_bucket_t_is_the_time_to_its_next_unit),
        cmocka_unit_test(a_denial_t_is_never_past_retry_after),
        cmocka_unit_test(a_rounded_reset_never_passes_the_rule),
        cmocka_unit_test(a_denial_that_never_fits_has_no_retry_after),
        cmocka_unit_test(names_are_structured_field_strings),
        cmocka_unit_test(the_snprintf_contract),
        cmocka_unit_test(the_rule_reset_fits_the_padding),
        cmocka_unit_test(units_and_partition_keys),
        cmocka_unit_test(a_denial_as_problem_details),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
