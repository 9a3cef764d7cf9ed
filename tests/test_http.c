/* SPDX-License-Identifier: BSD-3-Clause */
/* test_http.c - sluice_http_headers: the RateLimit-Policy and RateLimit
 * fields of draft-ietf-httpapi-ratelimit-headers-11 and Retry-After, for
 * a single rule and a composite (the binding rule named), names escaped
 * as Structured Field Strings, seconds rounded up, and snprintf's
 * contract. */
#include "sluice.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static void an_admission(void **state)
{
    sluice_ruleset rs = rules("fixed:100/1m");
    sluice_result r = {SLUICE_OK, true, 100, 42, -1, 30500};
    char buf[512];
    size_t n;

    (void)state;
    n = sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                             "RateLimit: \"api\";r=42;t=31\r\n");
}

static void a_denial_of_a_composite(void **state)
{
    sluice_ruleset rs = rules("fixed:1000/1d+fixed:10/1500ms");
    /* The second rule binds: its capacity is the result's limit. */
    sluice_result r = {SLUICE_OK, false, 10, 0, 1200, 1499};
    char buf[512];

    (void)state;
    sluice_http_headers(&rs, &r, NULL, buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"sluice-1\";q=1000;w=86400, "
                             "\"sluice-2\";q=10;w=2\r\n"
                             "RateLimit: \"sluice-2\";r=0;t=2\r\n"
                             "Retry-After: 2\r\n");
}

static void a_denial_that_never_fits_has_no_retry_after(void **state)
{
    sluice_ruleset rs = rules("token:5/1s");
    sluice_result r = {SLUICE_OK, false, 5, 5, -1, 0};
    char buf[512];

    (void)state;
    sluice_http_headers(&rs, &r, "x", buf, sizeof(buf));
    assert_null(strstr(buf, "Retry-After"));
    assert_non_null(strstr(buf, "RateLimit: \"x\";r=5;t=0\r\n"));
}

static void names_are_structured_field_strings(void **state)
{
    sluice_ruleset rs = rules("fixed:1/1s");
    sluice_result r = {SLUICE_OK, true, 1, 0, -1, 1000};
    char buf[512];

    (void)state;
    sluice_http_headers(&rs, &r, "a\"b\\c\nd", buf, sizeof(buf));
    assert_non_null(strstr(buf, "\"a\\\"b\\\\c_d\";q=1;w=1"));
}

static void the_snprintf_contract(void **state)
{
    sluice_ruleset rs = rules("fixed:100/1m");
    sluice_result r = {SLUICE_OK, true, 100, 42, -1, 30500};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_admission),
        cmocka_unit_test(a_denial_of_a_composite),
        cmocka_unit_test(a_denial_that_never_fits_has_no_retry_after),
        cmocka_unit_test(names_are_structured_field_strings),
        cmocka_unit_test(the_snprintf_contract),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
