/* SPDX-License-Identifier: BSD-3-Clause */
/* test_limiter.c - named limiters on a real backend: rules stored by one
 * handle decide for another (its own connection and cache, as another
 * process would have), on its next decision with rules_cache_ms=0 and
 * within rules_cache_ms otherwise; define keeps what is there; per-client
 * scopes; a keep-alive that runs out, and one kept by use; a deleted
 * limiter is SLUICE_ENOLIMITER; round trips per decision by name.
 *   test_limiter URL|@file */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

uint64_t sl_handle_round_trips(const sluice *sl);

static const char *url;
static bool memory; /* mem://: one named store, the handle's clock */

#define T0 (28333334LL * 60000)

/* A handle with its own connection, rules_cache_ms as given (-1: never),
 * all on one prefix per test. */
static sluice *open_cached(tu_clock *clk, const char *tag, int64_t cache_ms)
{
    char u[1024], prefix[64], err[512];
    sluice_options o;
    sluice *sl = NULL;

    if (memory)
        snprintf(u, sizeof(u), "mem://limiters");
    else
        snprintf(u, sizeof(u), "%s", url);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    /* a correctness test: one slow round trip on a loaded machine is
     * not a failure (the deadline tests hold the timeouts) */
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.rules_cache_ms = cache_ms;
    snprintf(prefix, sizeof(prefix), "nl%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static sluice_result take(sluice *sl, const char *name, const char *client)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_limiter_acquire(sl, name, strlen(name), client,
                               client ? strlen(client) : 0, 1, &r) != SLUICE_OK)
        fail_msg("acquire by %s: %s", name, sluice_errmsg(sl));
    return r;
}

/* define stores once and answers what is stored; set replaces; get reads;
 * delete removes, and then every call by the name is SLUICE_ENOLIMITER. */
static void define_set_get_delete(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "crud", -1);
    sluice_ruleset a = rules("fixed:3/1h+token:5/1s"), b = rules("log:7/1m"),
                   got;
    int64_t ka = -1;
    sluice_result r;
    char text[256];

    (void)state;
    assert_int_equal(sluice_limiter_get(sl, "api", 3, &got, &ka),
                     SLUICE_ENOLIMITER);
    assert_non_null(strstr(sluice_errmsg(sl), "\"api\""));
    assert_int_equal(sluice_limiter_acquire(sl, "api", 3, NULL, 0, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_define(sl, "api", 3, &a, 0, &got),
                     SLUICE_OK);
    assert_int_equal(memcmp(&got, &a, sizeof(a)), 0);
    /* A second define keeps the first's rules and says which. */
    assert_int_equal(sluice_limiter_define(sl, "api", 3, &b, 0, &got),
                     SLUICE_OK);
    sluice_ruleset_format(&got, text, sizeof(text));
    assert_string_equal(text, "fixed:3/3600000ms+token:5/1000ms");
    assert_int_equal(sluice_limiter_set(sl, "api", 3, &b, 90000), SLUICE_OK);
    assert_int_equal(sluice_limiter_get(sl, "api", 3, &got, &ka), SLUICE_OK);
    assert_int_equal(memcmp(&got, &b, sizeof(b)), 0);
    assert_int_equal(ka, 90000);
    assert_int_equal(take(sl, "api", NULL).limit, 7);
    assert_int_equal(sluice_limiter_delete(sl, "api", 3), SLUICE_OK);
    assert_int_equal(sluice_limiter_delete(sl, "api", 3), SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_acquire(sl, "api", 3, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_peek(sl, "api", 3, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_reset(sl, "api", 3, "c", 1),
                     SLUICE_ENOLIMITER);
    sluice_close(sl);
}

/* Rules with penalties by name: the longest texts of 8 rules (past the
 * 512 bytes a stored value once held) read back equal, and a block
 * started through one client's key denies that client alone. */
static void long_rules_and_blocks_by_name(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "block", -1);
    sluice_ruleset big, got, one = rules("fixed:1/1m,block=1h");
    sluice_result r;
    char text[1024];
    size_t n = 0;
    int i;

    (void)state;
    for (i = 0; i < 8; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "%ssliding:900719/9999999991ms,tz=+%02d:00,"
                              "block=10000000s,extend=1",
                              i > 0 ? "+" : "", 14 - i);
    assert_true(n > 500);
    big = rules(text);
    assert_int_equal(sluice_limiter_set(sl, "big", 3, &big, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_get(sl, "big", 3, &got, NULL), SLUICE_OK);
    assert_int_equal(memcmp(&got, &big, sizeof(big)), 0);

    assert_int_equal(sluice_limiter_set(sl, "pin", 3, &one, 0), SLUICE_OK);
    memset(&r, 0, sizeof(r));
    if (sluice_limiter_acquire(sl, "pin", 3, "a", 1, 1, &r) ==
        SLUICE_EUNSUPPORTED) {
        /* redis+multi://, twemproxy:// (conformance: block.scn). */
        sluice_close(sl);
        return;
    }
    assert_true(r.allowed);
    assert_int_equal(take(sl, "pin", "a").retry_after_ms, 3600000);
    clk.t += 60000; /* the rule would admit: the block holds */
    assert_int_equal(take(sl, "pin", "a").retry_after_ms, 3540000);
    assert_true(take(sl, "pin", "b").allowed);
    sluice_close(sl);
}

/* Names are binary-safe, and a name with a client never meets another
 * name: ("a", "bc") and ("ab", "c") are two scopes. */
static void names_and_clients_are_apart(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "apart", -1);
    sluice_ruleset one = rules("fixed:1/1h");
    const char bin[] = {'x', 0, '}', '{', 'y'};

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "a", 1, &one, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_set(sl, "ab", 2, &one, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_set(sl, bin, sizeof(bin), &one, 0),
                     SLUICE_OK);
    assert_true(take(sl, "a", "bc").allowed);
    assert_true(take(sl, "ab", "c").allowed);
    assert_false(take(sl, "a", "bc").allowed);
    assert_false(take(sl, "ab", "c").allowed);
    /* Each client its own state; no client, one shared state apart. */
    assert_true(take(sl, "a", "u1").allowed);
    assert_true(take(sl, "a", "u2").allowed);
    assert_true(take(sl, "a", NULL).allowed);
    assert_false(take(sl, "a", NULL).allowed);
    assert_false(take(sl, "a", "u1").allowed);
    {
        sluice_result r;

        assert_int_equal(
            sluice_limiter_acquire(sl, bin, sizeof(bin), "\0", 1, 1, &r),
            SLUICE_OK);
        assert_true(r.allowed);
        /* A reset by name forgets that client only. */
        assert_int_equal(sluice_limiter_reset(sl, "a", 1, "u1", 2), SLUICE_OK);
    }
    assert_true(take(sl, "a", "u1").allowed);
    assert_false(take(sl, "a", "u2").allowed);
    sluice_close(sl);
}

/* Another handle's change: with rules_cache_ms=0 on the next decision;
 * with a cache, once rules_cache_ms has passed (measured: polled). The
 * state counted carries over to the new limit. */
static void changes_reach_other_handles(void **state)
{
    tu_clock clk = {T0};
    sluice *admin = open_cached(&clk, "change", -1);
    sluice *now = open_cached(&clk, "change", -1);
    sluice *later = open_cached(&clk, "change", 300);
    sluice_ruleset three = rules("fixed:3/1h"), five = rules("fixed:5/1h");
    sluice_result r;
    int64_t t0, seen;

    (void)state;
    assert_int_equal(sluice_limiter_set(admin, "q", 1, &three, 0), SLUICE_OK);
    assert_true(take(now, "q", "c").allowed);
    assert_true(take(later, "q", "c").allowed);
    assert_true(take(now, "q", "c").allowed);
    assert_false(take(later, "q", "c").allowed);
    assert_int_equal(sluice_limiter_set(admin, "q", 1, &five, 0), SLUICE_OK);
    /* Not cached: the very next decision has the new limit; the 3 counted
     * stay counted. */
    r = take(now, "q", "c");
    assert_true(r.allowed);
    assert_int_equal(r.limit, 5);
    assert_int_equal(r.remaining, 1);
    /* Cached: the old rules until rules_cache_ms has passed. */
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    assert_int_equal(sluice_limiter_peek(later, "q", 1, "c", 1, 1, &r),
                     SLUICE_OK);
    while (r.limit == 3 && tu_clock_ms(CLOCK_MONOTONIC) - t0 < 2000) {
        tu_sleep_ms(5);
        assert_int_equal(sluice_limiter_peek(later, "q", 1, "c", 1, 1, &r),
                         SLUICE_OK);
    }
    seen = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    printf("# a change reached a handle with rules_cache_ms=300 after %lld "
           "ms; one with 0, on its next decision\n",
           (long long)seen);
    assert_int_equal(r.limit, 5);
    assert_int_equal(r.remaining, 0);
    /* A deletion too: the uncached handle at once. */
    assert_int_equal(sluice_limiter_delete(admin, "q", 1), SLUICE_OK);
    assert_int_equal(sluice_limiter_peek(now, "q", 1, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    tu_sleep_ms(310);
    assert_int_equal(sluice_limiter_peek(later, "q", 1, "c", 1, 1, &r),
                     SLUICE_ENOLIMITER);
    sluice_close(admin);
    sluice_close(now);
    sluice_close(later);
}

/* On Redis a keep-alive runs in real time: a use that a busy machine held
 * (the thread waiting for a CPU, or the server) until the keep-alive had
 * passed since the last use began may find the limiter gone, which is the
 * machine's doing, not the library's. held_past says so, when the use
 * that began at t0 ended more than ka after *since (the last use's or
 * define's start), and sets *since to t0 otherwise; the caller then sets
 * the limiter again. On mem:// the handle's clock runs the keep-alive and
 * no use is excused. */
static bool held_past(int64_t *since, int64_t t0, int64_t ka, int step)
{
    int64_t end = tu_clock_ms(CLOCK_MONOTONIC);

    if (!memory && end - *since > ka) {
        print_message("use %d ended %lld ms after the last began, past the "
                      "keep-alive of %lld ms (a busy machine): set again\n",
                      step, (long long)(end - *since), (long long)ka);
        return true;
    }
    *since = t0;
    return false;
}

/* A keep-alive: the limiter disappears once unused that long, and use
 * (reading its rules) keeps it. Real time on Redis, the handle's clock on
 * mem://: both move. */
static void keepalive_runs_out_unless_used(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "keep", -1);
    sluice_ruleset rs = rules("fixed:100/1h");
    sluice_result r;
    int64_t since = tu_clock_ms(CLOCK_MONOTONIC);
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_define(sl, "k", 1, &rs, 400, NULL),
                     SLUICE_OK);
    /* Used every 100 ms for a second: alive throughout. */
    for (i = 0; i < 10; i++) {
        int64_t t0;
        sluice_status st;

        tu_sleep_ms(100);
        clk.t += 100;
        t0 = tu_clock_ms(CLOCK_MONOTONIC);
        st = sluice_limiter_acquire(sl, "k", 1, NULL, 0, 1, &r);
        if (held_past(&since, t0, 400, i)) {
            since = tu_clock_ms(CLOCK_MONOTONIC);
            assert_int_equal(sluice_limiter_set(sl, "k", 1, &rs, 400),
                             SLUICE_OK);
            continue;
        }
        assert_int_equal(st, SLUICE_OK);
    }
    tu_sleep_ms(600);
    clk.t += 600;
    assert_int_equal(sluice_limiter_acquire(sl, "k", 1, NULL, 0, 1, &r),
                     SLUICE_ENOLIMITER);
    sluice_close(sl);
}

/* Each use by a handle that never read the rules before starts the
 * keep-alive again, as a later one does: the plain backends learn it from
 * their first read. Short-lived processes (the CLI) use limiters so. */
static void keepalive_kept_by_new_handles(void **state)
{
    enum {
        USES = 8
    };
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "keepnew", 60000), *h[USES + 1];
    sluice_ruleset rs = rules("fixed:100/1h"), got;
    sluice_result r;
    int64_t ka = 0, since;
    int i;

    (void)state;
    /* Opened first: under valgrind an open (a TLS handshake) takes longer
     * than the keep-alive; what is timed is each handle's first use. */
    for (i = 0; i <= USES; i++)
        h[i] = open_cached(&clk, "keepnew", 60000);
    since = tu_clock_ms(CLOCK_MONOTONIC);
    assert_int_equal(sluice_limiter_define(sl, "n", 1, &rs, 1000, NULL),
                     SLUICE_OK);
    /* Every 250 ms for 2 s, a handle that never read the rules acquires,
     * peeks, gets or defines again, once. */
    for (i = 0; i < USES; i++) {
        int64_t t0;
        sluice_status st;

        tu_sleep_ms(250);
        clk.t += 250;
        t0 = tu_clock_ms(CLOCK_MONOTONIC);
        switch (i % 4) {
        case 0:
            st = sluice_limiter_acquire(h[i], "n", 1, "c", 1, 1, &r);
            break;
        case 1:
            st = sluice_limiter_peek(h[i], "n", 1, NULL, 0, 1, &r);
            break;
        case 2:
            st = sluice_limiter_get(h[i], "n", 1, &got, &ka);
            break;
        default:
            /* A limiter gone meanwhile would be defined anew without a
             * keep-alive: held_past sets it again with one. */
            st = sluice_limiter_define(h[i], "n", 1, &rs, 0, &got);
            break;
        }
        if (held_past(&since, t0, 1000, i)) {
            since = tu_clock_ms(CLOCK_MONOTONIC);
            assert_int_equal(sluice_limiter_set(sl, "n", 1, &rs, 1000),
                             SLUICE_OK);
            continue;
        }
        assert_int_equal(st, SLUICE_OK);
        if (i % 4 == 2)
            assert_int_equal(ka, 1000);
        if (i % 4 == 3)
            assert_int_equal(got.rules[0].limit, 100);
    }
    tu_sleep_ms(1500);
    clk.t += 1500;
    assert_int_equal(sluice_limiter_get(h[USES], "n", 1, &got, &ka),
                     SLUICE_ENOLIMITER);
    for (i = 0; i <= USES; i++)
        sluice_close(h[i]);
    sluice_close(sl);
}

/* Round trips per decision by name: the rules' read, then one a decision
 * while they are cached; two a decision when they are never cached. */
static void round_trips_by_name(void **state)
{
    tu_clock clk = {T0};
    sluice *cached = open_cached(&clk, "rt", 60000);
    sluice *uncached = open_cached(&clk, "rt", -1);
    sluice_ruleset rs = rules("fixed:1000/1h");
    uint64_t a, b;
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_set(cached, "r", 1, &rs, 0), SLUICE_OK);
    a = sl_handle_round_trips(cached);
    for (i = 0; i < 100; i++)
        take(cached, "r", "c1");
    a = sl_handle_round_trips(cached) - a;
    b = sl_handle_round_trips(uncached);
    for (i = 0; i < 100; i++)
        take(uncached, "r", "c2");
    b = sl_handle_round_trips(uncached) - b;
    printf("# round trips for 100 decisions by name: %llu with the rules "
           "cached, %llu with rules_cache_ms=0\n",
           (unsigned long long)a, (unsigned long long)b);
    if (!memory) {
        assert_int_equal(a, 100);
        assert_int_equal(b, 200);
    }
    sluice_close(cached);
    sluice_close(uncached);
}

/* What a list gathered: the names seen, each once however often HSCAN
 * reports it, and when to stop. */
typedef struct seen {
    char names[200][1000];
    size_t lens[200], n, calls, stop_after;
} seen;

static bool listed(const seen *s, const void *name, size_t name_len)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        if (s->lens[i] == name_len && memcmp(s->names[i], name, name_len) == 0)
            return true;
    return false;
}

static int see(void *arg, const void *name, size_t name_len)
{
    seen *s = arg;

    assert_true(name_len >= 1 && name_len <= 1000);
    if (!listed(s, name, name_len)) { /* a name may come twice */
        assert_true(s->n < 200);
        memcpy(s->names[s->n], name, name_len);
        s->lens[s->n++] = name_len;
    }
    s->calls++;
    return s->stop_after > 0 && s->calls >= s->stop_after;
}

static size_t count_listed(sluice *sl, seen *s)
{
    memset(s, 0, sizeof(*s));
    if (sluice_limiter_list(sl, see, s) != SLUICE_OK)
        fail_msg("list: %s", sluice_errmsg(sl));
    return s->n;
}

/* sluice_limiter_list: the names kept until deleted, binary ones and the
 * longest included, each once, over several pages (HSCAN); not those with
 * a keep-alive, nor a deleted one, nor another prefix's; a set that adds
 * a keep-alive unlists, one that takes it away lists; a callback stops. */
static void names_kept_until_deleted_are_listed(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "list", -1);
    sluice *other = open_cached(&clk, "list2", -1);
    sluice_ruleset rs = rules("fixed:5/1m"), got;
    static seen s;
    char bin[3] = {'\xff', '\0', 'x'}, big[1000], name[32];
    int i;

    (void)state;
    memset(big, 'b', sizeof(big));
    assert_int_equal(count_listed(sl, &s), 0);
    assert_int_equal(sluice_limiter_define(sl, "api", 3, &rs, 0, NULL),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_set(sl, bin, sizeof(bin), &rs, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_set(sl, big, sizeof(big), &rs, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_define(sl, "temp", 4, &rs, 600000, NULL),
                     SLUICE_OK);
    assert_int_equal(count_listed(sl, &s), 3);
    assert_true(listed(&s, "api", 3));
    assert_true(listed(&s, bin, sizeof(bin)));
    assert_true(listed(&s, big, sizeof(big)));
    assert_false(listed(&s, "temp", 4));
    assert_int_equal(count_listed(other, &s), 0);
    /* A keep-alive set unlists; a define that finds rules without one
     * keeps them listed; a set without one lists. */
    assert_int_equal(sluice_limiter_set(sl, "api", 3, &rs, 600000), SLUICE_OK);
    assert_int_equal(sluice_limiter_define(sl, "temp", 4, &rs, 0, NULL),
                     SLUICE_OK);
    assert_int_equal(count_listed(sl, &s), 2);
    assert_false(listed(&s, "api", 3));
    assert_false(listed(&s, "temp", 4));
    assert_int_equal(sluice_limiter_set(sl, "api", 3, &rs, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_define(sl, "api", 3, &rs, 600000, &got),
                     SLUICE_OK);
    assert_int_equal(count_listed(sl, &s), 3);
    assert_true(listed(&s, "api", 3));
    /* Deleted: unlisted, also a name that was not listed. */
    assert_int_equal(sluice_limiter_delete(sl, bin, sizeof(bin)), SLUICE_OK);
    assert_int_equal(sluice_limiter_delete(sl, "temp", 4), SLUICE_OK);
    assert_int_equal(count_listed(sl, &s), 2);
    assert_false(listed(&s, bin, sizeof(bin)));
    /* 150 names: HSCAN's pages of 100 (the hash past Redis's small
     * encoding), each name once. */
    for (i = 0; i < 150; i++) {
        int n = snprintf(name, sizeof(name), "n%03d", i);

        assert_int_equal(sluice_limiter_set(sl, name, (size_t)n, &rs, 0),
                         SLUICE_OK);
    }
    assert_int_equal(count_listed(sl, &s), 152);
    for (i = 0; i < 150; i++)
        assert_true(
            listed(&s, name, (size_t)snprintf(name, sizeof(name), "n%03d", i)));
    memset(&s, 0, sizeof(s));
    s.stop_after = 2;
    assert_int_equal(sluice_limiter_list(sl, see, &s), SLUICE_OK);
    assert_int_equal(s.calls, 2);
    assert_int_equal(sluice_limiter_list(sl, NULL, NULL), SLUICE_EINVAL);
    assert_int_equal(sluice_limiter_list(NULL, see, &s), SLUICE_EINVAL);
    sluice_close(sl);
    sluice_close(other);
}

/* Bad input: a clear status and message. */
static void bad_input(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "bad", -1);
    sluice_ruleset rs = rules("fixed:1/1s"), bad = rs;
    char big[1001];
    sluice_result r;

    (void)state;
    memset(big, 'n', sizeof(big));
    assert_int_equal(sluice_limiter_set(sl, "", 0, &rs, 0), SLUICE_EKEY);
    assert_int_equal(sluice_limiter_set(sl, big, sizeof(big), &rs, 0),
                     SLUICE_EKEY);
    assert_int_equal(sluice_limiter_set(sl, "n", 1, &rs, -1), SLUICE_EINVAL);
    bad.rules[0].limit = 0;
    assert_int_equal(sluice_limiter_set(sl, "n", 1, &bad, 0), SLUICE_ERULE);
    assert_int_equal(sluice_limiter_set(sl, "n", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(sl, "n", 1, big, 1000, 1, &r),
                     SLUICE_EKEY);
    assert_non_null(strstr(sluice_errmsg(sl), "1000 bytes"));
    assert_int_equal(sluice_limiter_acquire(sl, "n", 1, NULL, 0, 0, &r),
                     SLUICE_ECOST);
    assert_int_equal(sluice_limiter_acquire(sl, "n", 1, NULL, 0, 1, NULL),
                     SLUICE_EINVAL);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(define_set_get_delete),
        cmocka_unit_test(long_rules_and_blocks_by_name),
        cmocka_unit_test(names_and_clients_are_apart),
        cmocka_unit_test(changes_reach_other_handles),
        cmocka_unit_test(keepalive_runs_out_unless_used),
        cmocka_unit_test(keepalive_kept_by_new_handles),
        cmocka_unit_test(round_trips_by_name),
        cmocka_unit_test(names_kept_until_deleted_are_listed),
        cmocka_unit_test(bad_input),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: test_limiter URL|@file\n");
        return 2;
    }
    url = tu_url(argv[1]);
    memory = strncmp(url, "mem://", 6) == 0;
    printf("named limiters on %s\n", url);
    return cmocka_run_group_tests_name(url, tests, NULL, NULL);
}
