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
    /* No rules needed: a caller by name that never read them. */
    assert_int_equal(sluice_http_body(NULL, &r, NULL, buf, sizeof(buf)),
                     strlen(buf));
    assert_non_null(strstr(buf, "\"status\": 403"));
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

/* ------------------------------------------------------------ options */

/* The fields as "Name: value" lines again, from sluice_http_each. */
typedef struct fields_seen {
    char text[4096];
    size_t at;
    int calls, stop_after;
    size_t longest;
} fields_seen;

static int collect(void *arg, const char *name, const char *value)
{
    fields_seen *f = arg;
    int n = snprintf(f->text + f->at, sizeof(f->text) - f->at, "%s: %s\r\n",
                     name, value);

    assert_true(n > 0 && (size_t)n < sizeof(f->text) - f->at);
    f->at += (size_t)n;
    if (strlen(value) > f->longest)
        f->longest = strlen(value);
    return ++f->calls == f->stop_after;
}

/* Issue 32: evhttp, libuv servers and nginx add fields one by one, and
 * had to parse the CRLF text to do so. sluice_http_each gives each name
 * and value, the same as the text, in its order; a nonzero return stops
 * it; a value longer than its stack buffer (a long name, eight rules)
 * comes whole; an answer without fields calls nothing. */
static void the_fields_one_by_one(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = rules("fixed:2/1m+token:10/1h,burst=4");
    sluice_http_options o;
    sluice_result r;
    fields_seen f;
    char text[4096], name[300];
    int i;

    (void)state;
    for (i = 0; i < 3; i++)
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    sluice_http_options_init(&o);
    o.name = "api";
    o.flags = SLUICE_HTTP_LEGACY;
    sluice_http_text(&rs, &r, &o, text, sizeof(text));
    memset(&f, 0, sizeof(f));
    assert_int_equal(sluice_http_each(&rs, &r, &o, collect, &f), SLUICE_OK);
    assert_int_equal(f.calls, 6);
    assert_string_equal(f.text, text);
    assert_non_null(strstr(f.text, "Retry-After: "));
    memset(&f, 0, sizeof(f));
    f.stop_after = 2;
    assert_int_equal(sluice_http_each(&rs, &r, &o, collect, &f), SLUICE_OK);
    assert_int_equal(f.calls, 2);
    /* 300-byte names, twice in RateLimit-Policy: past 512 bytes. */
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    o.name = name;
    sluice_http_text(&rs, &r, &o, text, sizeof(text));
    memset(&f, 0, sizeof(f));
    assert_int_equal(sluice_http_each(&rs, &r, &o, collect, &f), SLUICE_OK);
    assert_true(f.longest > 600);
    assert_string_equal(f.text, text);
    assert_int_equal(sluice_http_each(&rs, &r, &o, NULL, &f), SLUICE_EINVAL);
    assert_int_equal(sluice_http_each(NULL, &r, &o, collect, &f),
                     SLUICE_EINVAL);
    /* No fields: nothing called. */
    r.status = SLUICE_DENYLISTED;
    memset(&f, 0, sizeof(f));
    assert_int_equal(sluice_http_each(&rs, &r, &o, collect, &f), SLUICE_OK);
    assert_int_equal(f.calls, 0);
    sluice_close(sl);
}

/* Issue 32: a budget counts tokens, which no registered unit names: the
 * caller names it (qu="tokens"), and it keeps its window. A bad name is
 * refused, not written. */
static void a_unit_the_caller_names(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = rules("token:100000/1h");
    sluice_http_options o;
    sluice_result r;
    char buf[512], long_name[80];

    (void)state;
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1500, &r), SLUICE_OK);
    sluice_http_options_init(&o);
    o.name = "llm";
    o.unit_name = "tokens";
    sluice_http_text(&rs, &r, &o, buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: "
                             "\"llm\";q=100000;qu=\"tokens\";w=3600\r\n"
                             "RateLimit: \"llm\";r=98500;t=1\r\n");
    o.unit = SLUICE_UNIT_CONCURRENT_REQUESTS; /* the name wins, w stays */
    sluice_http_text(&rs, &r, &o, buf, sizeof(buf));
    assert_non_null(strstr(buf, ";qu=\"tokens\";w=3600\r\n"));
    memset(long_name, 't', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    {
        const char *bad[] = {"", "to ken", "tok\"en", long_name};
        size_t i;

        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            o.unit_name = bad[i];
            assert_int_equal(sluice_http_text(&rs, &r, &o, buf, sizeof(buf)),
                             0);
            assert_string_equal(buf, "");
            assert_int_equal(sluice_http_status(&r, &o), -1);
        }
    }
    sluice_close(sl);
}

/* Issue 32: many clients read only X-RateLimit-Limit, -Remaining and
 * -Reset: on request, the binding rule's q, r, and the seconds until it
 * is whole again (the trio's usual meaning: a bucket's until full), or
 * that time as a Unix time, which needs the decision's clock. */
static void the_legacy_trio_on_request(void **state)
{
    sluice *sl = open_at("mem://");
    sluice_ruleset rs = rules("fixed:100/1m"),
                   bucket = rules("token:10/1m,burst=5");
    sluice_http_options o;
    sluice_result r;
    char buf[512];

    (void)state;
    now_ms = 1699920015000LL; /* 15 s into a minute */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    sluice_http_options_init(&o);
    o.name = "api";
    o.flags = SLUICE_HTTP_LEGACY;
    sluice_http_text(&rs, &r, &o, buf, sizeof(buf));
    assert_string_equal(buf, "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                             "RateLimit: \"api\";r=99;t=45\r\n"
                             "X-RateLimit-Limit: 100\r\n"
                             "X-RateLimit-Remaining: 99\r\n"
                             "X-RateLimit-Reset: 45\r\n");
    o.flags = SLUICE_HTTP_LEGACY_EPOCH;
    assert_int_equal(sluice_http_text(&rs, &r, &o, buf, sizeof(buf)), 0);
    o.now_ms = now_ms;
    sluice_http_text(&rs, &r, &o, buf, sizeof(buf));
    assert_non_null(strstr(buf, "X-RateLimit-Reset: 1699920060\r\n"));
    /* Not by default. */
    o.flags = 0;
    sluice_http_text(&rs, &r, &o, buf, sizeof(buf));
    assert_null(strstr(buf, "X-RateLimit"));
    /* A bucket of 5 after 2: t is its next unit, the trio's reset its
     * time until full. */
    o.flags = SLUICE_HTTP_LEGACY;
    assert_int_equal(sluice_acquire(sl, "b", 1, &bucket, 2, &r), SLUICE_OK);
    sluice_http_text(&bucket, &r, &o, buf, sizeof(buf));
    assert_non_null(strstr(buf, "RateLimit: \"api\";r=3;t=6\r\n"
                                "X-RateLimit-Limit: 5\r\n"
                                "X-RateLimit-Remaining: 3\r\n"
                                "X-RateLimit-Reset: 12\r\n"));
    sluice_close(sl);
}

/* sluice_http_options grows as sluice_options does (docs/ABI.md): a
 * struct zeroed by hand (struct_size 0) is this first version; a size
 * below it is refused; a newer caller's larger struct is taken when what
 * this library does not know is zero, refused when it is not. */
static void the_options_are_versioned(void **state)
{
    struct {
        sluice_http_options o;
        unsigned char newer[16];
    } big;
    sluice_result r = {.status = SLUICE_OK,
                       .allowed = false,
                       .limit = 5,
                       .retry_after_ms = -1};
    sluice_http_options o;

    (void)state;
    memset(&o, 0, sizeof(o));
    o.unit = SLUICE_UNIT_CONTENT_BYTES;
    assert_int_equal(sluice_http_status(&r, &o), 413);
    o.struct_size = sizeof(size_t);
    assert_int_equal(sluice_http_status(&r, &o), -1);
    memset(&big, 0, sizeof(big));
    sluice_http_options_init(&big.o);
    assert_int_equal(big.o.struct_size, sizeof(sluice_http_options));
    big.o.struct_size = sizeof(big);
    big.o.unit = SLUICE_UNIT_CONTENT_BYTES;
    assert_int_equal(sluice_http_status(&r, &big.o), 413);
    big.newer[3] = 1;
    assert_int_equal(sluice_http_status(&r, &big.o), -1);
    assert_int_equal(sluice_http_status(NULL, NULL), -1);
    assert_int_equal(sluice_http_status(&r, NULL), 400);
    o = big.o;
    o.struct_size = sizeof(o);
    o.flags = 8;
    assert_int_equal(sluice_http_status(&r, &o), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_allow_listed_client_gets_no_numbers),
        cmocka_unit_test(a_deny_listed_client_is_forbidden),
        cmocka_unit_test(a_cost_that_never_fits_is_400_or_413),
        cmocka_unit_test(fail_policy_answers_carry_no_invented_numbers),
        cmocka_unit_test(shadow_mode_serves_with_the_decided_numbers),
        cmocka_unit_test(the_fields_one_by_one),
        cmocka_unit_test(a_unit_the_caller_names),
        cmocka_unit_test(the_legacy_trio_on_request),
        cmocka_unit_test(the_options_are_versioned),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
