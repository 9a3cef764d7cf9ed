/* SPDX-License-Identifier: BSD-3-Clause */
/* test_http_answer.c - the HTTP answer follows the result's status
 * (docs/HTTP.md, "HTTP answer per status"): an allow-listed client gets no
 * numbers, a deny-listed one a 403 problem, a cost that can never fit 400
 * (413 for content bytes) without Retry-After, fail=open and fail=closed
 * no numbers they did not decide (503 for closed), fail=fallback and
 * shadow mode the numbers their store or rules decided. Then the options:
 * versioned by struct_size, a unit the caller names, the legacy
 * X-RateLimit-* trio, the fields one by one. Decisions on mem:// and on a
 * redis:// URL that nothing listens on (no server needed). */
#include "sluice.h"

#include "testutil.h"

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

static int64_t now_ms = 1699920000000LL; /* a UTC midnight */

static int64_t test_clock(void *ctx)
{
    (void)ctx;
    return now_ms;
}

static sluice *open_at(const char *url)
{
    sluice_options o;
    sluice *sl = NULL;
    char err[256];

    sluice_options_init(&o);
    o.clock = test_clock;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("%s: %s", url, err);
    return sl;
}

/* A limiter "api" of fixed:2/1m on sl, with vip allow-listed and bot
 * deny-listed. */
static sluice_ruleset api_with_lists(sluice *sl)
{
    sluice_ruleset rs = rules("fixed:2/1m");
    sluice_limiter_override ov;

    assert_int_equal(sluice_limiter_define(sl, "api", 3, &rs, 0, NULL),
                     SLUICE_OK);
    memset(&ov, 0, sizeof(ov));
    ov.kind = SLUICE_OVERRIDE_UNLIMITED;
    assert_int_equal(sluice_limiter_override_set(sl, "api", 3, "vip", 3, &ov),
                     SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_DENY;
    assert_int_equal(sluice_limiter_override_set(sl, "api", 3, "bot", 3, &ov),
                     SLUICE_OK);
    return rs;
}

/* Issue 32: an allow-listed answer carried RateLimit: "api";r=0;t=0. It
 * carries no fields at all: no rule applied to it. */
static void an_allow_listed_client_gets_no_numbers(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = api_with_lists(sl);
    sluice_result r;
    char buf[512];

    (void)state;
    assert_int_equal(sluice_limiter_acquire(sl, "api", 3, "vip", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ALLOWLISTED);
    assert_false(sluice_result_decided(&r));
    assert_int_equal(sluice_http_status(&r, NULL), 0);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    assert_int_equal(sluice_http_body(&rs, &r, NULL, buf, sizeof(buf)), 0);
    sluice_close(sl);
}

/* Issue 32: a deny-listed client got a 429 quota-exceeded problem. It is
 * a 403 (RFC 9110, 15.5.4: the server refuses it, and a retry will not
 * help), no fields, and an about:blank problem (RFC 9457, 4.2.1: the
 * title the status's phrase). In shadow mode it is admitted, without
 * numbers either. */
static void a_deny_listed_client_is_forbidden(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = api_with_lists(sl);
    sluice_result r;
    char buf[512];

    (void)state;
    assert_int_equal(sluice_limiter_acquire(sl, "api", 3, "bot", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    assert_int_equal(sluice_http_status(&r, NULL), 403);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", buf, sizeof(buf)), 0);
    sluice_http_problem(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "{\"type\": \"about:blank\", \"title\": "
                             "\"Forbidden\", \"status\": 403, \"detail\": "
                             "\"The client is deny-listed.\"}");
    sluice_close(sl);

    sl = open_at("mem://?shadow=1");
    rs = api_with_lists(sl);
    assert_int_equal(sluice_limiter_acquire(sl, "api", 3, "bot", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    assert_false(sluice_result_decided(&r));
    assert_int_equal(sluice_http_status(&r, NULL), 0);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", buf, sizeof(buf)), 0);
    assert_int_equal(sluice_http_problem(&rs, &r, "api", buf, sizeof(buf)), 0);
    sluice_close(sl);
}

/* Issue 32: a cost that can never fit got a 429 with r=10, the full
 * quota, as if waiting helped. It is a 400 (the client must change the
 * request), or 413 Content Too Large when the cost is the content's
 * bytes; no Retry-After; a quota-exceeded problem whose status says so
 * and whose detail says why. The numbers are decided ones: they stay. */
static void a_cost_that_never_fits_is_400_or_413(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_http_options o;
    sluice_result r;
    char buf[512];

    (void)state;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 20, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.retry_after_ms, -1);
    assert_int_equal(sluice_http_status(&r, NULL), 400);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=10;w=60\r\n"
                             "RateLimit: \"api\";r=10;t=0\r\n");
    sluice_http_problem(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(
        buf, "{\"type\": \"https://iana.org/assignments/http-problem-types"
             "#quota-exceeded\", \"title\": \"Request cannot be satisfied "
             "as assigned quota has been exceeded\", \"status\": 400, "
             "\"detail\": \"The request's cost can never fit the quota of "
             "the policies below.\", \"violated-policies\": [\"api\"]}");
    sluice_http_options_init(&o);
    o.unit = SLUICE_UNIT_CONTENT_BYTES;
    assert_int_equal(sluice_http_status(&r, &o), 413);
    sluice_http_body(&rs, &r, &o, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\"status\": 413, "));
    o.unit_name = "tokens"; /* a budget of tokens: the request, not bytes */
    assert_int_equal(sluice_http_status(&r, &o), 400);
    sluice_close(sl);
}

/* Issue 32: fail=open gave RateLimit r=0;t=0, fail=closed a quota-exceeded
 * problem and Retry-After: 1, numbers no one decided. Open: admitted, no
 * fields. Closed: 503 (the service cannot answer; nginx's limit_req
 * default too), no fields, no Retry-After, an about:blank problem.
 * Fallback: its store decided, so its numbers are written, 429 and all. */
static void fail_policy_answers_carry_no_invented_numbers(void **state)
{
    sluice_ruleset rs = rules("fixed:2/1m");
    sluice_result r;
    sluice *sl;
    char url[128], buf[512];
    int port = tu_free_port(), i;

    (void)state;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d?fail=open", port);
    sl = open_at(url);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_ECONNECT);
    assert_false(sluice_result_decided(&r));
    assert_int_equal(sluice_http_status(&r, NULL), 0);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", buf, sizeof(buf)), 0);
    sluice_close(sl);

    snprintf(url, sizeof(url), "redis://127.0.0.1:%d?fail=closed", port);
    sl = open_at(url);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_false(sluice_result_decided(&r));
    assert_int_equal(sluice_violated(sl, 0), 0);
    assert_int_equal(sluice_result_rule_reset_ms(&r), 0);
    assert_int_equal(sluice_http_status(&r, NULL), 503);
    assert_int_equal(sluice_http_headers(&rs, &r, "api", buf, sizeof(buf)), 0);
    sluice_http_problem(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "{\"type\": \"about:blank\", \"title\": "
                             "\"Service Unavailable\", \"status\": 503, "
                             "\"detail\": \"The rate limiter could not "
                             "decide the request.\"}");
    sluice_close(sl);

    snprintf(url, sizeof(url), "redis://127.0.0.1:%d?fail=fallback", port);
    sl = open_at(url);
    for (i = 0; i < 3; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.status, SLUICE_ECONNECT);
        assert_true(sluice_result_decided(&r));
    }
    assert_false(r.allowed);
    assert_int_equal(sluice_violated(sl, 0), 1); /* the fallback's rule */
    assert_int_equal(sluice_http_status(&r, NULL), 429);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=2;w=60\r\n"
                             "RateLimit: \"api\";r=0;t=60\r\n"
                             "Retry-After: 60\r\n");
    sluice_close(sl);
}

/* Shadow mode admits what the rules denied: the service serves it, and
 * the fields say what the rules decided, without Retry-After. */
static void shadow_mode_serves_with_the_decided_numbers(void **state)
{
    sluice *sl = open_at("mem://?shadow=1");
    sluice_ruleset rs = rules("fixed:1/1m");
    sluice_result r;
    char buf[512];

    (void)state;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    assert_int_equal(sluice_http_status(&r, NULL), 0);
    sluice_http_headers(&rs, &r, "api", buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=1;w=60\r\n"
                             "RateLimit: \"api\";r=0;t=60\r\n");
    assert_int_equal(sluice_http_body(&rs, &r, NULL, buf, sizeof(buf)), 0);
    sluice_close(sl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_allow_listed_client_gets_no_numbers),
        cmocka_unit_test(a_deny_listed_client_is_forbidden),
        cmocka_unit_test(a_cost_that_never_fits_is_400_or_413),
        cmocka_unit_test(fail_policy_answers_carry_no_invented_numbers),
        cmocka_unit_test(shadow_mode_serves_with_the_decided_numbers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
