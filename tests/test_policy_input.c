/* SPDX-License-Identifier: BSD-3-Clause */
/* test_policy_input.c - policies as input (docs/SEMANTICS.md,
 * "Policies", bad input): every bad struct or field refused by every call
 * that takes a policy, the message quoting the field and its value, and
 * nothing changed; the fields of a group not set never read; what
 * sluice_limiter_policy_get answers, set and removed. On mem://.
 *   test_policy_input [URL|@file] */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url = "mem://";
static sluice_ruleset four; /* fixed:4/1h */
static sluice_policy open_pol;

static sluice *open_handle(const char *tag)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.connect_timeout_ms = 2000 * TU_TIME_SCALE;
    snprintf(prefix, sizeof(prefix), "pin%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    return sl;
}

/* The limiter "open" and its policy: fail=open, the deny cache, shadow. */
static void define(sluice *sl)
{
    assert_int_equal(sluice_limiter_define(sl, "open", 4, &four, 0, NULL),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(sl, "open", 4, &open_pol),
                     SLUICE_OK);
}

/* ------------------------------------------------------- bad policies */

/* st is SLUICE_EINVAL and the handle's message holds want. */
static void refused(sluice *sl, sluice_status st, const char *want)
{
    if (st != SLUICE_EINVAL || strstr(sluice_errmsg(sl), want) == NULL)
        fail_msg("%s: \"%s\", expected SLUICE_EINVAL quoting %s",
                 sluice_strerror(st), sluice_errmsg(sl), want);
}

/* p refused by every call that takes a policy, each quoting want. */
static void refused_everywhere(sluice *sl, const sluice_policy *p,
                               const char *want)
{
    sluice_request q = {"k", 1, &four, 1};
    sluice_result out;
    char msg[600];

    refused(sl, sluice_limiter_policy_set(sl, "open", 4, p), want);
    snprintf(msg, sizeof(msg), "%s", sluice_errmsg(sl));
    assert_non_null(strstr(msg, "limiter \"open\": "));
    refused(sl, sluice_acquire_with(sl, "k", 1, &four, 1, p, &out), want);
    refused(sl, sluice_acquire_many_with(sl, &q, 1, p, &out), want);
}

static void bad_policies_are_refused_with_their_value(void **state)
{
    sluice *sl = open_handle("bad");
    unsigned char big[sizeof(sluice_policy) + 16];
    sluice_policy p, got;
    sluice_stats st;
    sluice_result out;

    (void)state;
    define(sl);
    /* A larger struct: taken when its tail is zero, else refused. */
    memset(big, 0, sizeof(big));
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_SHADOW;
    p.shadow = true;
    p.struct_size = sizeof(big);
    memcpy(big, &p, sizeof(p));
    assert_int_equal(sluice_acquire_with(sl, "k0", 2, &four, 1,
                                         (const sluice_policy *)(void *)big,
                                         &out),
                     SLUICE_OK);
    big[sizeof(p) + 3] = 1;
    refused_everywhere(sl, (const sluice_policy *)(void *)big, "byte ");
    sluice_policy_init(&p);
    p.struct_size = 8;
    refused_everywhere(sl, &p, "policy.struct_size=8");
    sluice_policy_init(&p);
    p.set = 0x40 | SLUICE_POLICY_FAIL;
    refused_everywhere(sl, &p, "policy.set=0x41");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_FAIL;
    p.fail = (sluice_fail_policy)7;
    refused_everywhere(sl, &p, "policy.fail=7");
    p.fail = SLUICE_FAIL_FALLBACK;
    p.fallback_instances = 10001;
    refused_everywhere(sl, &p, "policy.fallback_instances=10001");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_RESERVE;
    p.reserve_ms = 70000;
    refused_everywhere(sl, &p, "policy.reserve_ms=70000");
    p.reserve_ms = -1;
    refused_everywhere(sl, &p, "policy.reserve_ms=-1");
    p.reserve_ms = 100;
    p.reserve_share = 51;
    refused_everywhere(sl, &p, "policy.reserve_share=51");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_HTTP;
    strcpy(p.http_name, "api\x01v2");
    refused_everywhere(sl, &p, "policy.http_name \"api\\x01v2\"");
    memset(p.http_name, 'a', sizeof(p.http_name));
    refused_everywhere(sl, &p, "(no NUL)");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_HTTP;
    strcpy(p.unit_name, "llm tokens");
    refused_everywhere(sl, &p, "policy.unit_name \"llm tokens\"");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_HTTP;
    p.unit = (sluice_quota_unit)9;
    refused_everywhere(sl, &p, "policy.unit=9");
    /* Nothing refused changed the limiter's policy. */
    sluice_policy_init(&got);
    assert_int_equal(sluice_limiter_policy_get(sl, "open", 4, &got), SLUICE_OK);
    assert_int_equal(got.set, open_pol.set);
    assert_int_equal(got.fail, SLUICE_FAIL_OPEN);
    /* A group not set is not read: its fields may hold anything. */
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_SHADOW;
    p.shadow = true;
    p.fail = (sluice_fail_policy)7;
    p.reserve_ms = -5;
    assert_int_equal(sluice_limiter_policy_set(sl, "open", 4, &p), SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_get(sl, "open", 4, &got), SLUICE_OK);
    assert_int_equal(got.set, SLUICE_POLICY_SHADOW);
    assert_true(got.shadow);
    assert_int_equal(got.fail, SLUICE_FAIL_ERROR); /* the handle's */
    /* The bad calls were counted as bad input, by the handle. */
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    assert_int_equal(st.failures[SLUICE_EINVAL], 2 * 12);
    /* Bad names and outs. */
    refused(sl, sluice_limiter_policy_get(sl, "open", 4, NULL), "out is NULL");
    got.struct_size = 3;
    refused(sl, sluice_limiter_policy_get(sl, "open", 4, &got),
            "out->struct_size=3");
    assert_int_not_equal(sluice_limiter_policy_set(sl, "", 0, &p), SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(NULL, "open", 4, &p),
                     SLUICE_EINVAL);
    sluice_close(sl);
}

/* What sluice_limiter_policy_get says: the handle's where the limiter has
 * no group, its own where it has; removed, the handle's again. */
static void a_limiter_policy_reads_back_and_goes(void **state)
{
    sluice *sl = open_handle("get");
    sluice_policy p, got;

    (void)state;
    sluice_policy_init(&got);
    assert_int_equal(sluice_limiter_policy_get(sl, "api", 3, &got), SLUICE_OK);
    assert_int_equal(got.set, 0);
    assert_int_equal(got.fail, SLUICE_FAIL_ERROR);
    assert_int_equal(got.fallback_instances, 1);
    assert_false(got.deny_cache);
    assert_int_equal(got.reserve_ms, 0);
    assert_int_equal(got.reserve_share, 10);
    assert_string_equal(got.http_name, "sluice");
    assert_string_equal(got.unit_name, "");
    sluice_policy_init(&p);
    p.set = SLUICE_POLICY_FAIL | SLUICE_POLICY_RESERVE | SLUICE_POLICY_HTTP;
    p.fail = SLUICE_FAIL_FALLBACK;
    p.reserve_ms = 250;
    strcpy(p.http_name, "api \"v2\"");
    p.unit = SLUICE_UNIT_CONTENT_BYTES;
    strcpy(p.unit_name, "tokens");
    assert_int_equal(sluice_limiter_policy_set(sl, "api", 3, &p), SLUICE_OK);
    sluice_policy_init(&got);
    assert_int_equal(sluice_limiter_policy_get(sl, "api", 3, &got), SLUICE_OK);
    assert_int_equal(got.set, p.set);
    assert_int_equal(got.fail, SLUICE_FAIL_FALLBACK);
    assert_int_equal(got.fallback_instances, 1); /* 0: the handle's */
    assert_int_equal(got.reserve_ms, 250);
    assert_int_equal(got.reserve_share, 10);
    assert_false(got.shadow);
    assert_string_equal(got.http_name, "api \"v2\"");
    assert_int_equal(got.unit, SLUICE_UNIT_CONTENT_BYTES);
    assert_string_equal(got.unit_name, "tokens");
    /* Another name, and the name's own bytes (binary-safe). */
    assert_int_equal(sluice_limiter_policy_get(sl, "ap\0", 3, &got), SLUICE_OK);
    assert_int_equal(got.set, 0);
    /* A policy with no group removes it, as NULL does. */
    sluice_policy_init(&p);
    assert_int_equal(sluice_limiter_policy_set(sl, "api", 3, &p), SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_get(sl, "api", 3, &got), SLUICE_OK);
    assert_int_equal(got.set, 0);
    assert_int_equal(sluice_limiter_policy_set(sl, "api", 3, NULL), SLUICE_OK);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_policies_are_refused_with_their_value),
        cmocka_unit_test(a_limiter_policy_reads_back_and_goes),
    };

    if (argc > 1)
        url = tu_url(argv[1]);
    if (sluice_ruleset_parse("fixed:4/1h", &four, NULL, 0) != SLUICE_OK)
        return 1;
    sluice_policy_init(&open_pol);
    open_pol.set =
        SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE | SLUICE_POLICY_SHADOW;
    open_pol.fail = SLUICE_FAIL_OPEN;
    open_pol.deny_cache = true;
    open_pol.shadow = true;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
