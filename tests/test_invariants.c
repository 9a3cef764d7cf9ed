/* SPDX-License-Identifier: BSD-3-Clause */
/* test_invariants.c - properties checked on random schedules, beside the
 * scenario tables:
 *   test_invariants URL|@file                 invariants on one backend
 *   test_invariants URL|@file --against URL2  same decisions as URL2
 * No window admits more than its limit, a composite never charges part of
 * itself, and (with --against) two backends agree on every decision. */
#include "algo.h"
#include "store.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url, *against;
static const char *unsupported = ""; /* algorithms the backend refuses */
static char servers[1024];           /* whose keys must all have TTLs */

/* False when text uses an algorithm the backend under test refuses, or a
 * block it refuses ("block"). */
static bool supported(const char *text)
{
    static const char *const names[] = {"token", "gcra"};
    size_t i;

    if (strstr(unsupported, "block") != NULL && strstr(text, "block=") != NULL)
        return false;
    for (i = 0; i < 2; i++)
        if (strstr(unsupported, names[i]) != NULL &&
            strstr(text, names[i]) != NULL)
            return false;
    return true;
}

/* False when the backend refuses refunds of text: "refund" (all), or
 * "window-refund" (those of fixed, sliding or log rules). */
static bool refundable(const char *text)
{
    if (strstr(unsupported, "window-refund") != NULL)
        return strstr(text, "fixed") == NULL &&
               strstr(text, "sliding") == NULL && strstr(text, "log") == NULL;
    return strstr(unsupported, "refund") == NULL;
}

static uint64_t seed = 0x5eed1234abcdULL;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic schedules from the printed seed */
    seed ^= seed >> 12;
    seed ^= seed << 25;
    seed ^= seed >> 27;
    return seed * 2685821657736338717ULL;
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;
    char err[256];

    if (sluice_ruleset_parse(text, &rs, err, sizeof(err)) != SLUICE_OK)
        fail_msg("%s", err);
    return rs;
}

#define MAXEV 600

typedef struct event {
    int64_t t, cost;
} event;

/* Drives one rule with random costs and a clock that mostly moves forward;
 * returns the admitted events. */
static size_t drive(sluice *sl, tu_clock *clk, const sluice_ruleset *rs,
                    int64_t period, event *adm)
{
    size_t n = 0;
    int i;

    clk->t = 1700000000000LL + rnd_in(0, 100000);
    for (i = 0; i < MAXEV; i++) {
        sluice_result r;
        int64_t cost = rnd_in(1, 3);

        clk->t += rnd_in(0, period / 8);
        assert_int_equal(sluice_acquire(sl, "inv", 3, rs, cost, &r), SLUICE_OK);
        if (r.allowed) {
            adm[n].t = clk->t;
            adm[n++].cost = cost;
        }
    }
    return n;
}

static void fixed_windows_never_admit_more_than_the_limit(void **state)
{
    static const char *const texts[] = {"fixed:10/1s", "fixed:7/1s,tz=+05:30",
                                        "fixed:25/250ms"};
    size_t k;

    (void)state;
    for (k = 0; k < 3; k++) {
        tu_clock clk;
        sluice *sl = tu_open(url, &clk, texts[k]);
        sluice_ruleset rs = rules(texts[k]);
        event adm[MAXEV];
        size_t n = drive(sl, &clk, &rs, rs.rules[0].period_ms, adm), i, j;

        for (i = 0; i < n; i++) {
            int64_t ki, kj, e, sum = 0;

            sl_window_locate(&rs.rules[0], adm[i].t, &ki, &e);
            for (j = 0; j < n; j++) {
                sl_window_locate(&rs.rules[0], adm[j].t, &kj, &e);
                if (kj == ki)
                    sum += adm[j].cost;
            }
            if (sum > rs.rules[0].limit)
                fail_msg("%s: window %lld admitted %lld", texts[k],
                         (long long)ki, (long long)sum);
        }
        printf("# %s: %zu admitted, no window over its limit\n", texts[k], n);
        assert_true(n > 20);
        sluice_close(sl);
    }
}

static void sliding_log_never_admits_more_than_the_limit(void **state)
{
    tu_clock clk;
    sluice *sl = tu_open(url, &clk, "log");
    sluice_ruleset rs = rules("log:12/1s");
    event adm[MAXEV];
    size_t n = drive(sl, &clk, &rs, 1000, adm), i, j;

    (void)state;
    for (i = 0; i < n; i++) {
        int64_t sum = 0;

        for (j = 0; j <= i; j++)
            if (adm[j].t > adm[i].t - 1000)
                sum += adm[j].cost;
        if (sum > 12)
            fail_msg("log: %lld admitted in (%lld - 1s, %lld]", (long long)sum,
                     (long long)adm[i].t, (long long)adm[i].t);
    }
    printf("# log:12/1s: %zu admitted, no 1 s span over 12\n", n);
    assert_true(n > 20);
    sluice_close(sl);
}

static void sliding_counter_keeps_the_weighted_bound(void **state)
{
    tu_clock clk;
    sluice *sl = tu_open(url, &clk, "sliding");
    sluice_ruleset rs = rules("sliding:10/1s");
    const sluice_rule *r = &rs.rules[0];
    event adm[MAXEV];
    size_t n = drive(sl, &clk, &rs, 1000, adm), i, j;

    (void)state;
    for (i = 0; i < n; i++) {
        int64_t k, to_end, kj, e, cur = 0, prev = 0;

        sl_window_locate(r, adm[i].t, &k, &to_end);
        for (j = 0; j <= i; j++) {
            sl_window_locate(r, adm[j].t, &kj, &e);
            if (kj == k)
                cur += adm[j].cost;
            else if (kj == k - 1)
                prev += adm[j].cost;
        }
        if (prev * to_end + cur * 1000 > 10 * 1000)
            fail_msg("sliding: at %lld prev %lld cur %lld over the bound",
                     (long long)adm[i].t, (long long)prev, (long long)cur);
    }
    printf("# sliding:10/1s: %zu admitted within the weighted bound\n", n);
    assert_true(n > 20);
    sluice_close(sl);
}

static void buckets_never_admit_more_than_burst_plus_refill(void **state)
{
    static const char *const texts[] = {"token:5/1s,burst=8",
                                        "gcra:5/1s,burst=8", "token:3/1s"};
    size_t k;

    (void)state;
    for (k = 0; k < 3; k++) {
        tu_clock clk;
        sluice *sl;
        sluice_ruleset rs = rules(texts[k]);
        const sluice_rule *r = &rs.rules[0];

        if (!supported(texts[k]))
            continue;
        sl = tu_open(url, &clk, texts[k]);
        event adm[MAXEV];
        size_t n = drive(sl, &clk, &rs, 1000, adm), i, j;

        for (i = 0; i < n; i++) {
            int64_t sum = 0;

            for (j = i; j < n; j++) {
                sum += adm[j].cost;
                /* sum <= B + (tj - ti) * L / P, in request-ms */
                if (sum * r->period_ms > sl_rule_capacity(r) * r->period_ms +
                                             (adm[j].t - adm[i].t) * r->limit)
                    fail_msg("%s: %lld admitted in [%lld, %lld]", texts[k],
                             (long long)sum, (long long)adm[i].t,
                             (long long)adm[j].t);
            }
        }
        printf("# %s: %zu admitted, never above burst plus refill\n", texts[k],
               n);
        assert_true(n > 20);
        sluice_close(sl);
    }
}

static void composites_charge_all_rules_or_none(void **state)
{
    static const char *const texts[] = {
        "fixed:60/1d+fixed:5/1s", "token:4/1s,burst=6+log:10/5s",
        "sliding:8/1s+gcra:3/1s+fixed:50/1m", "log:6/1s+sliding:9/2s"};
    size_t k;

    (void)state;
    for (k = 0; k < 4; k++) {
        tu_clock clk;
        sluice *sl;
        sluice_ruleset rs = rules(texts[k]);
        sluice_ruleset part[SLUICE_MAX_RULES];
        int i, allowed = 0, denied = 0;
        size_t p;

        if (!supported(texts[k]))
            continue;
        sl = tu_open(url, &clk, texts[k]);
        for (p = 0; p < rs.count; p++) {
            part[p].count = 1;
            part[p].rules[0] = rs.rules[p];
        }
        clk.t = 1700000000000LL;
        for (i = 0; i < 300; i++) {
            int64_t before[SLUICE_MAX_RULES], cost = rnd_in(1, 3);
            sluice_result r, q;

            clk.t += rnd_in(0, 150);
            for (p = 0; p < rs.count; p++) {
                assert_int_equal(sluice_peek(sl, "c", 1, &part[p], 1, &q),
                                 SLUICE_OK);
                before[p] = q.remaining + (q.allowed ? 1 : 0);
            }
            assert_int_equal(sluice_acquire(sl, "c", 1, &rs, cost, &r),
                             SLUICE_OK);
            allowed += r.allowed;
            denied += !r.allowed;
            for (p = 0; p < rs.count; p++) {
                int64_t want = r.allowed ? before[p] - cost : before[p];

                assert_int_equal(sluice_peek(sl, "c", 1, &part[p], 1, &q),
                                 SLUICE_OK);
                if (q.remaining + (q.allowed ? 1 : 0) != want)
                    fail_msg(
                        "%s at %lld: rule %zu had %lld left, now %lld "
                        "after a%s request of cost %lld",
                        texts[k], (long long)clk.t, p + 1, (long long)before[p],
                        (long long)(q.remaining + (q.allowed ? 1 : 0)),
                        r.allowed ? "n admitted" : " denied", (long long)cost);
            }
        }
        printf("# %s: %d admitted, %d denied, never charged in part\n",
               texts[k], allowed, denied);
        assert_true(allowed > 5 && denied > 5);
        sluice_close(sl);
    }
}

/* Random traffic of every kind on two backends; every answer must match. */
static void two_backends_decide_alike(void **state)
{
    static const char *const texts[] = {"fixed:5/1s",
                                        "fixed:9/1m,tz=-03:00",
                                        "sliding:6/1s",
                                        "sliding:4/250ms",
                                        "log:5/1s",
                                        "log:3/100ms",
                                        "token:4/1s,burst=7",
                                        "token:3/1s",
                                        "gcra:4/1s,burst=7",
                                        "gcra:7/3s",
                                        "fixed:20/1m+token:2/1s,burst=4",
                                        "log:10/2s+sliding:8/1s+gcra:5/1s",
                                        "fixed:5/1s,block=2s",
                                        ("sliding:4/1s,block=1s,extend=1+"
                                         "gcra:9/3s,block=5s")};
    const size_t nrules = sizeof(texts) / sizeof(texts[0]);
    sluice_ruleset rs[sizeof(texts) / sizeof(texts[0])];
    tu_clock ca, cb;
    sluice *a, *b;
    int i, decisions = 0, late = 0, batches = 0, at_most = 0, refunds = 0;
    int64_t began;
    size_t k;

    (void)state;
    /* Virtual time runs about 100 times faster than real time here, and a
     * loaded machine slows the real one further: a key whose TTL (at
     * least the 1 s floor, in real time on a server) ran out between two
     * of its steps would be gone on the server and kept on mem://. With an
     * hour's floor on both, no key expires during the run, and every
     * decision must still agree; expiry has tests of its own. */
    began = tu_clock_ms(CLOCK_MONOTONIC);
    tu_ttl_floor_ms = 3600000;
    a = tu_open(url, &ca, "diff");
    b = tu_open(against, &cb, "diff");
    tu_ttl_floor_ms = 0;
    assert_non_null(a);
    assert_non_null(b);
    for (k = 0; k < nrules; k++)
        rs[k] = rules(texts[k]);
    ca.t = 1700000000000LL;
    for (i = 0; i < 20000; i++) {
        /* Each key keeps its rule, so that no state outlives its TTL. */
        size_t ri = (size_t)rnd_in(0, (int64_t)nrules - 1);
        char key[16];
        int64_t cost = rnd_in(1, 4), step = rnd_in(-40, 120);
        int op = (int)rnd_in(0, 19);
        sluice_result ra, rb;
        sluice_status sa, sb;

        if (!supported(texts[ri]))
            continue;
        /* Late by less than 40 ms: within every rule's grace. */
        ca.t += step;
        late += step < 0;
        cb.t = ca.t;
        snprintf(key, sizeof(key), "k%zu-%d", ri, (int)rnd_in(0, 2));
        memset(&ra, 0, sizeof(ra));
        memset(&rb, 0, sizeof(rb));
        if (op == 0) {
            sa = sluice_reset(a, key, strlen(key), &rs[ri]);
            sb = sluice_reset(b, key, strlen(key), &rs[ri]);
        } else if (op <= 3) {
            sa = sluice_peek(a, key, strlen(key), &rs[ri], cost, &ra);
            sb = sluice_peek(b, key, strlen(key), &rs[ri], cost, &rb);
        } else if (op == 4) {
            sluice_request reqs[3];
            sluice_result oa[3], ob[3];
            int j;

            for (j = 0; j < 3; j++)
                reqs[j] =
                    (sluice_request){key, strlen(key), &rs[ri], rnd_in(1, 2)};
            assert_int_equal(sluice_acquire_many(a, reqs, 3, oa), SLUICE_OK);
            assert_int_equal(sluice_acquire_many(b, reqs, 3, ob), SLUICE_OK);
            for (j = 0; j < 3; j++)
                if (memcmp(&oa[j], &ob[j], sizeof(oa[j])) != 0)
                    fail_msg("batch item %d differs at step %d", j, i);
            batches++;
            continue;
        } else if (op == 5) {
            int64_t ga = -1, gb = -2;

            sa = sluice_acquire_at_most(a, key, strlen(key), &rs[ri], cost + 2,
                                        &ga, &ra);
            sb = sluice_acquire_at_most(b, key, strlen(key), &rs[ri], cost + 2,
                                        &gb, &rb);
            if (sa == SLUICE_OK && ga != gb)
                fail_msg("step %d: granted %lld on %s, %lld on %s", i,
                         (long long)ga, url, (long long)gb, against);
            at_most++;
        } else if (op == 6 && refundable(texts[ri])) {
            sa = sluice_refund(a, key, strlen(key), &rs[ri], cost, &ra);
            sb = sluice_refund(b, key, strlen(key), &rs[ri], cost, &rb);
            refunds++;
        } else {
            sa = sluice_acquire(a, key, strlen(key), &rs[ri], cost, &ra);
            sb = sluice_acquire(b, key, strlen(key), &rs[ri], cost, &rb);
        }
        assert_int_equal(sa, SLUICE_OK);
        assert_int_equal(sb, SLUICE_OK);
        decisions++;
        if (ra.allowed != rb.allowed || ra.limit != rb.limit ||
            ra.remaining != rb.remaining ||
            ra.retry_after_ms != rb.retry_after_ms ||
            ra.reset_after_ms != rb.reset_after_ms)
            fail_msg("step %d, t=%lld, %s cost %lld on %s:\n"
                     "  %s: %d %lld %lld %lld %lld\n"
                     "  %s: %d %lld %lld %lld %lld",
                     i, (long long)ca.t, texts[ri], (long long)cost, key, url,
                     ra.allowed, (long long)ra.limit, (long long)ra.remaining,
                     (long long)ra.retry_after_ms, (long long)ra.reset_after_ms,
                     against, rb.allowed, (long long)rb.limit,
                     (long long)rb.remaining, (long long)rb.retry_after_ms,
                     (long long)rb.reset_after_ms);
    }
    printf("# %d decisions (%d acquires at most, %d refunds), %d batches, "
           "%d late requests: %s and %s identical\n",
           decisions, at_most, refunds, batches, late, url, against);
    if (servers[0] != '\0') {
        char why[256], prefix[64];
        long checked;

        snprintf(prefix, sizeof(prefix), "t%ld-diff:", (long)getpid());
        /* A penalty's block keeps the hour's floor as the rules' keys do (its
         * key once took the block's length alone, and a busy machine
         * outlived it: the model test on the TLS cluster then found a
         * block gone that the virtual clock still held). A second's slack
         * for the servers' clocks, which start a TTL. */
        tu_min_pttl_ms =
            3600000 - (tu_clock_ms(CLOCK_MONOTONIC) - began) - 1000;
        checked = tu_check_ttls(servers, prefix, why, sizeof(why));
        tu_min_pttl_ms = 0;
        if (checked < 0)
            fail_msg("%s", why);
        printf("# SCAN + PTTL on %s: all %ld keys have a TTL\n", servers,
               checked);
    }
    sluice_close(a);
    sluice_close(b);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_windows_never_admit_more_than_the_limit),
        cmocka_unit_test(sliding_log_never_admits_more_than_the_limit),
        cmocka_unit_test(sliding_counter_keeps_the_weighted_bound),
        cmocka_unit_test(buckets_never_admit_more_than_burst_plus_refill),
        cmocka_unit_test(composites_charge_all_rules_or_none),
        cmocka_unit_test(two_backends_decide_alike),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: test_invariants URL|@file [--against URL]\n");
        return 2;
    }
    url = tu_url(argv[1]);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--against") == 0)
            against = argv[i + 1];
        else if (strcmp(argv[i], "--unsupported") == 0)
            unsupported = argv[i + 1];
        else if (strcmp(argv[i], "--servers") == 0)
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[i + 1]));
    }
    if (servers[0] == '\0')
        tu_servers_of(url, servers, sizeof(servers));
    if (getenv("SLUICE_SEED") != NULL)
        seed = strtoull(getenv("SLUICE_SEED"), NULL, 0);
    printf("# invariants on %s, seed 0x%llx\n", url, (unsigned long long)seed);
    if (against != NULL)
        return _cmocka_run_group_tests("differential", tests + 5, 1, NULL,
                                       NULL);
    /* The differential case runs only --against another backend (it is
     * left out, not skipped: a skip says that a case which should have
     * run did not). */
    return _cmocka_run_group_tests("invariants", tests, 5, NULL, NULL);
}
