/* SPDX-License-Identifier: BSD-3-Clause */
/* test_reserve.c - reservations (reserve_ms) on a real backend: a hot key
 * admitted mostly without round trips and never past its limit, alone and
 * from threads sharing the handle; a unit never used in another window, a
 * clock behind its charge, or past its hold; units given back at a miss
 * and at close (or lapsed where the backend takes no refund); batches,
 * named limiters and resets; cold keys and a handle without the option
 * never reserve; every key keeps a TTL.
 *   test_reserve URL|@file [--servers LIST|@file] [--unsupported LIST]
 * --unsupported as for test_conformance: "token" (twemproxy://) skips the
 * bucket cases, "window-refund" (redis+multi://) expects window units to
 * lapse rather than be given back. */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url, *servers = "";
static bool no_buckets, no_window_refund;

/* A minute's window starts here (and so does a second's). */
#define T0 (28333334LL * 60000)

static char prefix[64];

/* A handle on url with reserve_ms (0: none) on the clock clk; the same
 * prefix for every handle of a test, so that handles share keys. */
static sluice *open_at(tu_clock *clk, int64_t reserve_ms, const char *tag)
{
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    o.reserve_ms = reserve_ms;
    o.command_timeout_ms = 2000 * tu_time_scale(); /* correctness, not time */
    snprintf(prefix, sizeof(prefix), "rv%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    return sl;
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static sluice_result acquire(sluice *sl, const char *key,
                             const sluice_ruleset *rs)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, key, strlen(key), rs, 1, &r) != SLUICE_OK)
        fail_msg("acquire %s: %s", key, sluice_errmsg(sl));
    return r;
}

/* What is left on the key: a peek's remaining is that after the acquire it
 * answers for, one less when it would be admitted. */
static int64_t remaining(sluice *sl, const char *key, const sluice_ruleset *rs)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_peek(sl, key, strlen(key), rs, 1, &r) != SLUICE_OK)
        fail_msg("peek %s: %s", key, sluice_errmsg(sl));
    return r.remaining + r.allowed;
}

static sluice_stats stats(sluice *sl)
{
    sluice_stats st;

    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    return st;
}

static void check_ttls(void)
{
    char why[512];

    if (servers[0] != '\0' &&
        tu_check_ttls(servers, prefix, why, sizeof(why)) < 0)
        fail_msg("%s", why);
}

/* Far more demand than the limit, at one instant: exactly the limit is
 * admitted, most of it without a round trip, and nothing lapses. */
static void a_hot_key_admits_exactly_its_limit(void **state)
{
    tu_clock clk = {T0 + 10};
    sluice *sl = open_at(&clk, 1000, "exact");
    sluice *other = open_at(&clk, 0, "exact");
    sluice_ruleset rs = rules("fixed:1000/1m");
    sluice_stats st;
    long allowed = 0, local = 0;
    int i;

    (void)state;
    for (i = 0; i < 3000; i++) {
        sluice_result r = acquire(sl, "hot", &rs);

        allowed += r.allowed;
        local += r.status == SLUICE_RESERVED;
        if (r.status == SLUICE_RESERVED) {
            assert_true(r.allowed);
            assert_int_equal(r.retry_after_ms, -1);
            assert_int_equal(r.limit, 1000);
            assert_true(r.remaining >= 0 && r.remaining < 1000);
        }
    }
    assert_int_equal(allowed, 1000);
    assert_true(local >= 700); /* batches of up to 100: most are local */
    assert_int_equal(remaining(other, "hot", &rs), 0);
    st = stats(sl);
    assert_int_equal(st.reserve_admitted, (uint64_t)local);
    assert_int_equal(st.allowed, 1000);
    assert_int_equal(st.reserve_lapsed, 0);
    assert_true(st.reserve_batches > 0);
    assert_true(st.reserve_granted <= st.reserve_asked);
    /* A batch asks at most the share: 10 % of 1000. */
    assert_true(st.reserve_asked <= 100 * st.reserve_batches);
    check_ttls();
    sluice_close(sl);
    sluice_close(other);
}

/* Threads sharing the handle, at one instant: still exactly the limit. */
typedef struct worker {
    sluice *sl;
    const sluice_ruleset *rs;
    long allowed, local;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    int i;

    for (i = 0; i < 1500; i++) {
        sluice_result r = acquire(w->sl, "shared", w->rs);

        w->allowed += r.allowed;
        w->local += r.status == SLUICE_RESERVED;
    }
    return NULL;
}

static void threads_share_reservations(void **state)
{
    tu_clock clk = {T0 + 20};
    sluice *sl = open_at(&clk, 1000, "threads");
    sluice_ruleset rs = rules("fixed:5000/1m");
    pthread_t th[8];
    worker w[8];
    long allowed = 0, local = 0;
    int i;

    (void)state;
    for (i = 0; i < 8; i++) {
        w[i] = (worker){sl, &rs, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        allowed += w[i].allowed;
        local += w[i].local;
    }
    assert_int_equal(allowed, 5000);
    assert_true(local > 0);
    assert_int_equal(stats(sl).reserve_lapsed, 0);
    sluice_close(sl);
}

/* Units charged in one window are never used in the next: they lapse. */
static void a_unit_never_crosses_its_window(void **state)
{
    tu_clock clk = {T0 + 980};
    sluice *sl = open_at(&clk, 100, "window");
    sluice *other = open_at(&clk, 0, "window");
    sluice_ruleset rs = rules("fixed:1000/1s");
    sluice_stats a, b;
    sluice_result r;
    int i;

    (void)state;
    for (i = 0; i < 6; i++) /* hot at the fourth: a batch */
        acquire(sl, "w", &rs);
    assert_true(stats(sl).reserve_granted > 0);
    clk.t = T0 + 999; /* the same window: from the batch (and a refill) */
    assert_int_equal(acquire(sl, "w", &rs).status, SLUICE_RESERVED);
    a = stats(sl);
    clk.t = T0 + 1000; /* the next one: decided by the backend */
    r = acquire(sl, "w", &rs);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    b = stats(sl);
    assert_true(b.reserve_lapsed > a.reserve_lapsed);
    assert_int_equal(b.reserve_refunded, 0);
    /* The new window counts this acquire and whatever batch came with it,
     * nothing of the old one's units. */
    assert_int_equal(remaining(other, "w", &rs),
                     1000 - 1 -
                         (int64_t)(b.reserve_granted - a.reserve_granted));
    sluice_close(sl);
    sluice_close(other);
}

/* A bucket's units: never used by a clock behind their charge, nor at or
 * past the hold; given back at the next miss, and at close. */
static void a_unit_is_used_within_its_hold(void **state)
{
    tu_clock clk = {T0};
    sluice *sl, *other;
    sluice_ruleset rs = rules("token:1000/1h");
    sluice_stats a, b;
    int64_t held;
    int i;

    (void)state;
    sl = open_at(&clk, 100, "hold");
    other = open_at(&clk, 0, "hold");
    for (i = 0; i < 6; i++)
        acquire(sl, "b", &rs);
    a = stats(sl);
    held = (int64_t)(a.reserve_granted - a.reserve_admitted);
    assert_true(held > 0);
    /* Held units count as used for everyone else. */
    assert_int_equal(remaining(other, "b", &rs), 1000 - 6 - held);
    clk.t = T0 - 1; /* a clock behind the charge: the backend decides */
    assert_int_equal(acquire(sl, "b", &rs).status, SLUICE_OK);
    clk.t = T0 + 99; /* within the hold: the last of the batch, a refill */
    assert_int_equal(acquire(sl, "b", &rs).status, SLUICE_RESERVED);
    clk.t = T0 + 100; /* the batch's end: from the refill, charged at 99 */
    assert_int_equal(acquire(sl, "b", &rs).status, SLUICE_RESERVED);
    /* A miss (a cost no lot covers) within the refill's hold: its units
     * are given back, the first batch's last unit, past its hold, lapses
     * (what it charged may have drained). */
    clk.t = T0 + 150;
    {
        sluice_result r;

        assert_int_equal(sluice_acquire(sl, "b", 1, &rs, 1000, &r), SLUICE_OK);
        assert_false(r.allowed);
    }
    b = stats(sl);
    assert_true(b.reserve_refunded > 0);
    assert_int_equal(b.reserve_lapsed, 1);
    /* Close gives back what the miss's batch took: the key then counts
     * what was admitted and the unit that lapsed. */
    sluice_close(sl);
    assert_int_equal(remaining(other, "b", &rs), 1000 - 9 - 1);
    sluice_close(other);
    check_ttls();
}

/* At close, a window's units are given back where the backend takes it,
 * else they lapse (counted on the server either way). */
static void close_gives_back_a_windows_units(void **state)
{
    tu_clock clk = {T0 + 30};
    sluice *sl = open_at(&clk, 1000, "close");
    sluice *other = open_at(&clk, 0, "close");
    sluice_ruleset rs = rules("fixed:1000/1m");
    sluice_stats st;
    int i;

    (void)state;
    for (i = 0; i < 6; i++)
        acquire(sl, "c", &rs);
    st = stats(sl);
    assert_true(st.reserve_granted > 1);
    sluice_close(sl);
    if (no_window_refund) /* they lapse with the window */
        assert_int_equal(
            remaining(other, "c", &rs),
            1000 - 6 - (int64_t)(st.reserve_granted - st.reserve_admitted));
    else
        assert_int_equal(remaining(other, "c", &rs), 1000 - 6);
    sluice_close(other);
}

/* Units held now by sl on keys asked with cost 1: granted less what was
 * admitted from them, given back or lapsed. */
static int64_t held_units(sluice *sl)
{
    sluice_stats st = stats(sl);

    return (int64_t)(st.reserve_granted - st.reserve_admitted -
                     st.reserve_refunded - st.reserve_lapsed);
}

/* A demand of 0.9 of the limit, evenly paced over four windows, from one
 * handle: never denied, and each window loses at most c units (charged
 * and never admitted: those held at its end, which lapse), on every
 * backend. Before issue 31, redis+multi:// and twemproxy://, which cannot
 * give a window's units back, let each lot's rest lapse at the end of its
 * hold: about ten lapses a window, 44 % of the limit lost and denials
 * below the limit. */
static void paced_demand_below_the_limit_is_never_denied(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_at(&clk, 100, "paced");
    sluice *other = open_at(&clk, 0, "paced");
    sluice_ruleset rs = rules("fixed:1000/1s"); /* h = 100 ms, c = 100 */
    int64_t w, i, lost, most = 0;

    (void)state;
    for (w = 0; w < 4; w++) {
        long admitted = 0;

        for (i = 0; i < 900; i++) { /* 9 requests every 10 ms */
            sluice_result r;

            clk.t = T0 + w * 1000 + i * 10 / 9;
            r = acquire(sl, "p", &rs);
            if (!r.allowed)
                fail_msg("window %lld, request %lld at %lld: denied (%s)",
                         (long long)w, (long long)i, (long long)(clk.t - T0),
                         sluice_strerror(r.status));
            admitted++;
        }
        /* What the window counts, held units included, less what it
         * admitted: what it loses. */
        clk.t = T0 + w * 1000 + 999;
        lost = 1000 - remaining(other, "p", &rs) - admitted;
        most = lost > most ? lost : most;
        print_message("window %lld: admitted %ld, lost %lld\n", (long long)w,
                      admitted, (long long)lost);
        assert_true(lost >= 0);
    }
    assert_true(most <= 100);
    assert_true(stats(sl).reserve_admitted > 3000);
    assert_true(stats(sl).reserve_lapsed <= 4 * 100);
    sluice_close(sl);
    sluice_close(other);
}

/* A handle never holds more than c units of a key, the units its batches
 * ask included (docs/SEMANTICS.md, "Lots"): here c = 100, and before
 * issue 31 a refill of c landed while the older lot still held up to half
 * its size (149 held). */
static void a_handle_holds_at_most_its_share(void **state)
{
    tu_clock clk = {T0 + 80};
    sluice *sl = open_at(&clk, 1000, "most");
    sluice_ruleset rs = rules("fixed:1000/1m"); /* c = 100 */
    int64_t most = 0;
    int i;

    (void)state;
    for (i = 0; i < 1000; i++) {
        assert_true(acquire(sl, "m", &rs).allowed);
        {
            int64_t h = held_units(sl);

            most = h > most ? h : most;
        }
    }
    print_message("most held %lld of c = 100\n", (long long)most);
    assert_true(most <= 100);
    assert_true(most >= 50); /* it reserves, in lots of up to c */
    assert_false(acquire(sl, "m", &rs).allowed);
    sluice_close(sl);
}

/* A batch call is answered from the reservation, request by request. */
static void batches_use_reservations(void **state)
{
    tu_clock clk = {T0 + 40};
    sluice *sl = open_at(&clk, 1000, "many");
    sluice_ruleset rs = rules("fixed:1000/1m"), other = rules("fixed:5/1m");
    sluice_request req[3] = {
        {"m", 1, &rs, 1}, {"x", 1, &other, 1}, {"m", 1, &rs, 1}};
    sluice_result out[3];
    int i;

    (void)state;
    for (i = 0; i < 6; i++)
        acquire(sl, "m", &rs);
    assert_int_equal(sluice_acquire_many(sl, req, 3, out), SLUICE_OK);
    assert_int_equal(out[0].status, SLUICE_RESERVED);
    assert_int_equal(out[1].status, SLUICE_OK); /* a cold key */
    assert_int_equal(out[2].status, SLUICE_RESERVED);
    assert_true(out[0].allowed && out[1].allowed && out[2].allowed);
    assert_int_equal(out[2].remaining, out[0].remaining - 1);
    sluice_close(sl);
}

/* Decisions by name reserve as decisions by key do; a reset of the key
 * drops its reservation. */
static void named_limiters_and_resets(void **state)
{
    tu_clock clk = {T0 + 50};
    sluice *sl = open_at(&clk, 1000, "named");
    sluice_ruleset rs = rules("fixed:1000/1m");
    sluice_result r;
    sluice_stats a;
    long local = 0;
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_define(sl, "api", 3, &rs, 0, NULL),
                     SLUICE_OK);
    for (i = 0; i < 20; i++) {
        assert_int_equal(
            sluice_limiter_acquire(sl, "api", 3, "alice", 5, 1, &r), SLUICE_OK);
        assert_true(r.allowed);
        local += r.status == SLUICE_RESERVED;
    }
    assert_true(local > 0);
    for (i = 0; i < 6; i++)
        acquire(sl, "k", &rs);
    a = stats(sl);
    assert_int_equal(sluice_reset(sl, "k", 1, &rs), SLUICE_OK);
    assert_true(stats(sl).reserve_lapsed > a.reserve_lapsed);
    assert_int_equal(acquire(sl, "k", &rs).status, SLUICE_OK);
    sluice_close(sl);
}

/* Cold keys never reserve, nor does a handle without the option. */
static void cold_keys_and_the_default_never_reserve(void **state)
{
    tu_clock clk = {T0 + 60};
    sluice *sl = open_at(&clk, 1000, "cold");
    sluice *plain = open_at(&clk, 0, "cold");
    sluice_ruleset rs = rules("fixed:1000/1m");
    char key[32];
    int i;

    (void)state;
    for (i = 0; i < 300; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(acquire(sl, key, &rs).status, SLUICE_OK);
        assert_int_equal(acquire(plain, "hot", &rs).status, SLUICE_OK);
    }
    assert_int_equal(stats(sl).reserve_batches, 0);
    assert_int_equal(stats(plain).reserve_batches, 0);
    assert_int_equal(stats(plain).reserve_admitted, 0);
    sluice_close(sl);
    sluice_close(plain);
}

/* A block must stop every client at once (SEMANTICS.md, "Penalties"): a
 * hot key whose rules have one is decided by the backend every time. */
static void a_ruleset_with_a_block_never_reserves(void **state)
{
    tu_clock clk = {T0 + 60};
    sluice *sl = open_at(&clk, 1000, "block");
    sluice_ruleset rs = rules("fixed:1000/1m,block=1m");
    sluice_result r;
    int i;

    (void)state;
    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, "hot", 3, &rs, 1, &r) == SLUICE_EUNSUPPORTED) {
        print_message("block refused here: %s\n", sluice_errmsg(sl));
        sluice_close(sl);
        return;
    }
    for (i = 0; i < 300; i++)
        assert_int_equal(acquire(sl, "hot", &rs).status, SLUICE_OK);
    assert_int_equal(stats(sl).reserve_batches, 0);
    assert_int_equal(stats(sl).reserve_admitted, 0);
    assert_int_equal(remaining(sl, "hot", &rs), 1000 - 301);
    sluice_close(sl);
}

/* With the deny cache: the reservation answers first (units charged are
 * admitted whatever the cache holds), the cache then answers the denials
 * without a round trip. */
static void the_deny_cache_and_reservations(void **state)
{
    tu_clock clk = {T0 + 70};
    sluice_options o;
    sluice *sl = NULL;
    sluice_ruleset rs = rules("fixed:100/1m");
    sluice_stats a, b;
    long allowed = 0, cached = 0;
    char err[512];
    int i;

    (void)state;
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.reserve_ms = 1000;
    o.deny_cache = 64;
    o.command_timeout_ms = 2000 * tu_time_scale(); /* correctness, not time */
    snprintf(prefix, sizeof(prefix), "rv%ld-deny:", (long)getpid());
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    for (i = 0; i < 300; i++) {
        sluice_result r = acquire(sl, "d", &rs);

        allowed += r.allowed;
        cached += r.status == SLUICE_CACHED;
    }
    assert_int_equal(allowed, 100);
    assert_true(cached > 150);
    a = stats(sl);
    for (i = 0; i < 100; i++)
        assert_int_equal(acquire(sl, "d", &rs).status, SLUICE_CACHED);
    b = stats(sl);
    assert_int_equal(b.backend_requests, a.backend_requests);
    assert_int_equal(b.deny_cache_hits - a.deny_cache_hits, 100);
    sluice_close(sl);
}

/* ---- a round trip of another thread's ---- */

uint64_t sl_handle_batches(sluice *sl); /* backend.h: round trips begun */

typedef struct slow_call {
    sluice *sl;
    int64_t took; /* ms */
    sluice_status st;
} slow_call;

/* An acquire on a ruleset that never reserves (h = 0), timed. */
static void *slow_acquire(void *arg)
{
    slow_call *c = arg;
    sluice_ruleset rs = rules("fixed:1000/5ms");
    sluice_result r;
    int64_t t0 = tu_clock_ms(CLOCK_MONOTONIC);

    c->st = sluice_acquire(c->sl, "cold", 4, &rs, 1, &r);
    c->took = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    return NULL;
}

/* The server of the test's own (0: none), and the threads' state: static,
 * so that a failed assertion (a longjmp) leaves nothing they use. */
static pid_t own_pid;
static slow_call other;

static void *thaw_later(void *arg)
{
    (void)arg;
    tu_sleep_ms(300);
    kill(own_pid, SIGCONT);
    return NULL;
}

/* Whatever the case did, its server goes. */
static int stop_own(void **state)
{
    (void)state;
    if (own_pid > 0)
        kill(own_pid, SIGCONT);
    tu_kill(&own_pid);
    return 0;
}

/* Another thread's round trip in flight on a server of the test's own,
 * frozen (SIGSTOP) and thawed 300 ms later: admissions from the hot key's
 * reservation go on meanwhile, each at once, the one whose lot runs below
 * half included (its refill waits for no other thread's round trip: it is
 * asked again later); only the miss once the lots are spent waits. The
 * control is that round trip, timed in its own thread. Before issue 31 the
 * admission that refilled queued its refill behind the frozen round trip
 * and returned only after it. */
static void an_admission_never_waits_behind_another_round_trip(void **state)
{
    int port = tu_free_port();
    static tu_clock clk = {T0 + 90};
    sluice_options o;
    sluice *sl = NULL;
    sluice_ruleset rs = rules("fixed:1000/1m");
    pthread_t a, b;
    char u[128], err[512];
    int64_t slowest = 0, t0;
    uint64_t trips;
    long local = 0;
    int i;

    (void)state;
    if ((own_pid = tu_start_redis(port)) <= 0)
        fail_msg("redis-server on port %d did not start", port);
    snprintf(u, sizeof(u), "%.*s://127.0.0.1:%d/?reserve_ms=1000",
             (int)(strstr(url, "://") - url), url, port);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.command_timeout_ms = 5000 * tu_time_scale();
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    for (i = 0; i < 20; i++) /* hot: lots held, their refills answered */
        assert_true(acquire(sl, "hot", &rs).allowed);
    kill(own_pid, SIGSTOP);
    trips = sl_handle_batches(sl);
    other = (slow_call){sl, 0, SLUICE_OK};
    assert_int_equal(pthread_create(&a, NULL, slow_acquire, &other), 0);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    while (sl_handle_batches(sl) == trips) /* its round trip begun */
        if (tu_clock_ms(CLOCK_MONOTONIC) - t0 > 5000 * (int64_t)tu_time_scale())
            fail_msg("the other thread's acquire did not begin");
        else
            tu_sleep_ms(1);
    assert_int_equal(pthread_create(&b, NULL, thaw_later, NULL), 0);
    for (;;) {
        int64_t s = tu_clock_ms(CLOCK_MONOTONIC), took;
        sluice_result r = acquire(sl, "hot", &rs);

        took = tu_clock_ms(CLOCK_MONOTONIC) - s;
        if (r.status != SLUICE_RESERVED)
            break; /* the lots spent: to the backend, behind the other */
        local++;
        slowest = took > slowest ? took : slowest;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    print_message("%ld admissions from the reservation during another "
                  "thread's round trip of %lld ms: the slowest %lld ms\n",
                  local, (long long)other.took, (long long)slowest);
    assert_int_equal(other.st, SLUICE_OK);
    assert_true(local > 0);
    assert_true(other.took >= 250);
    assert_true(slowest < other.took / 4);
    sluice_close(sl);
}

/* Bad values are refused with a message that names them. */
static void bad_options_are_refused(void **state)
{
    sluice_options o;
    sluice *sl = NULL;
    char err[512], u[600];

    (void)state;
    sluice_options_init(&o);
    o.reserve_ms = 60001;
    assert_int_equal(sluice_open("mem://", &o, &sl, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "reserve_ms"));
    snprintf(u, sizeof(u), "mem://?reserve_ms=10&reserve_share=51");
    assert_int_equal(sluice_open(u, NULL, &sl, err, sizeof(err)), SLUICE_EURL);
    assert_non_null(strstr(err, "reserve_share"));
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(a_hot_key_admits_exactly_its_limit),
        cmocka_unit_test(threads_share_reservations),
        cmocka_unit_test(a_unit_never_crosses_its_window),
        cmocka_unit_test(a_unit_is_used_within_its_hold),
        cmocka_unit_test(close_gives_back_a_windows_units),
        cmocka_unit_test(batches_use_reservations),
        cmocka_unit_test(named_limiters_and_resets),
        cmocka_unit_test(cold_keys_and_the_default_never_reserve),
        cmocka_unit_test(a_ruleset_with_a_block_never_reserves),
        cmocka_unit_test(the_deny_cache_and_reservations),
        cmocka_unit_test(bad_options_are_refused),
        cmocka_unit_test(paced_demand_below_the_limit_is_never_denied),
        cmocka_unit_test(a_handle_holds_at_most_its_share),
        cmocka_unit_test_teardown(
            an_admission_never_waits_behind_another_round_trip, stop_own),
    };
    size_t n;
    int i;
    bool own;

    if (argc < 2) {
        fprintf(stderr,
                "usage: %s URL|@file [--servers LIST|@file] "
                "[--unsupported LIST]\n",
                argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    for (i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--servers") == 0)
            servers = tu_url(argv[i + 1]);
        else if (strcmp(argv[i], "--unsupported") == 0) {
            no_buckets = strstr(argv[i + 1], "token") != NULL;
            no_window_refund = strstr(argv[i + 1], "window-refund") != NULL ||
                               strstr(argv[i + 1], "refund") != NULL;
        }
    }
    /* A case that does not apply is left out, never skipped: without
     * buckets (twemproxy://), the hold's case; the round trip's needs a
     * scheme that a plain redis-server of the test's own answers. */
    own = strncmp(url, "redis://", 8) == 0 ||
          strncmp(url, "redis+multi://", 14) == 0 ||
          strncmp(url, "twemproxy://", 12) == 0;
    for (i = 0, n = 0; i < (int)(sizeof(tests) / sizeof(tests[0])); i++)
        if ((!no_buckets ||
             strcmp(tests[i].name, "a_unit_is_used_within_its_hold") != 0) &&
            (own || strcmp(tests[i].name, "an_admission_never_waits_behind_"
                                          "another_round_trip") != 0))
            tests[n++] = tests[i];
    return _cmocka_run_group_tests("test_reserve", tests, n, NULL, NULL);
}
