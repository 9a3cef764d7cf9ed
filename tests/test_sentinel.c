/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel.c - redis+sentinel:// and redis+multi+sentinel:// against
 * real sentinels (tests/servers/sentinel.sh: a master, two replicas, three
 * sentinels, and a rogue sentinel that names a replica): discovery on both
 * schemes; bad input (an unknown master, the sentinels down, a wrong
 * sentinel password, a frozen sentinel listed first, a sentinel without
 * TLS, a sentinel that names a replica); planned failovers (SENTINEL
 * FAILOVER) led by each sentinel in turn, with the first sentinel frozen
 * before the open and before the failover, and with the subscription to
 * the leader cut without a word (tcprelay.h); and a killed master; each
 * under load from threads on one key (sentinel_load.h), so that the count
 * the new master holds tells how many acknowledged decisions were lost,
 * beside a window limit that must not admit past it; and one failover
 * with the decisions on the caller's loop. The failovers change the
 * fixture: the tests run in order.
 *   test_sentinel DIR    the fixture's directory (SENTINEL_TESTS=PATTERN:
 *                        those tests alone) */
#include "sentinel_kit.h"
#include "sentinel_load.h"
#include "tcprelay.h"
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* Room for the TLS handshakes of a busy machine where a message, not a
 * time, is tested: 1 s for each of the three sentinels asked. */
#define SLOW_OK "timeout_ms=4000&connect_timeout_ms=3000"

static pid_t frozen; /* a sentinel stopped, for the teardown to thaw */

static char url[1024], url_multi[1024], sentinels[512], rogue[64];

/* u with its list of sentinels replaced by with. */
static void with_sentinels(char *out, size_t len, const char *u,
                           const char *with)
{
    const char *at = strstr(u, sentinels);

    assert_non_null(at);
    snprintf(out, len, "%.*s%s%s", (int)(at - u), u, with,
             at + strlen(sentinels));
}

static void discovers_the_master_on_both_schemes(void **state)
{
    const char *urls[2] = {url, url_multi};
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_result r;
    char key[32];
    int i;

    (void)state;
    snprintf(key, sizeof(key), "disc-%ld", (long)getpid());
    for (i = 0; i < 2; i++) {
        sluice *sl = open_url(urls[i], "timeout_ms=1000", NULL);

        memset(&r, 0, sizeof(r));
        if (sluice_acquire(sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK)
            fail_msg("acquire through %s: %s", i ? "multi" : "evalsha",
                     sluice_errmsg(sl));
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 9 - i);
        sluice_close(sl);
    }
    check_ttls();
}

/* One decision through u that must fail to connect, its message holding
 * each of the texts given (NULL ends them). */
static void refused_saying(const char *u, const char *query, ...)
{
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_result r;
    sluice *sl = open_url(u, query, NULL);
    const char *want;
    va_list ap;

    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ECONNECT);
    va_start(ap, query);
    while ((want = va_arg(ap, const char *)) != NULL)
        if (strstr(sluice_errmsg(sl), want) == NULL)
            fail_msg("\"%s\" not in: %s", want, sluice_errmsg(sl));
    va_end(ap);
    print_message("%s\n", sluice_errmsg(sl));
    sluice_close(sl);
}

/* A clear status and message, never a stall or a secret. */
static void bad_input_is_a_clear_error(void **state)
{
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_result r;
    sluice *sl;
    char u[1300], list[128];
    const char *at;
    int64_t t0, took;

    (void)state;
    /* An unknown master. */
    {
        char seg[160];

        snprintf(seg, sizeof(seg), "/%s?", master_name);
        at = strstr(url, seg);
        assert_non_null(at);
        snprintf(u, sizeof(u), "%.*s/nosuch%s", (int)(at - url), url,
                 at + strlen(seg) - 1);
    }
    refused_saying(u, SLOW_OK, "does not know a master", NULL);
    /* Sentinels that are all down. */
    refused_saying("redis+sentinel://127.0.0.1:1,127.0.0.1:2/m", "",
                   "127.0.0.1:2 cannot connect", NULL);
    /* A wrong sentinel password: refused, and never shown. */
    snprintf(u, sizeof(u), "%.*s", (int)sizeof(u) - 1, url);
    memcpy(strstr(u, SENTINEL_PW), "TopSecret99", 11);
    sl = open_url(u, SLOW_OK, NULL);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ECONNECT);
    if (strstr(sluice_errmsg(sl), "WRONGPASS") == NULL ||
        strstr(sluice_errmsg(sl), "TopSecret") != NULL)
        fail_msg("a wrong sentinel password: %s", sluice_errmsg(sl));
    sluice_close(sl);
    /* TLS to a sentinel without it (its plain port): said as a data
     * node's connect says it. */
    snprintf(list, sizeof(list), "127.0.0.1:%d", sentinel_port(1));
    with_sentinels(u, sizeof(u), url, list);
    if (strncmp(u, "redis+", 6) == 0) { /* rediss+ */
        memmove(u + 6, u + 5, strlen(u + 5) + 1);
        u[5] = 's';
    }
    refused_saying(u, "tls_verify=0&" SLOW_OK, "is it a TLS port?", list, NULL);
    /* A sentinel that names a replica (its configuration watches one):
     * the message names that sentinel. */
    with_sentinels(u, sizeof(u), url, rogue);
    snprintf(list, sizeof(list), "the sentinel %s named it", rogue);
    refused_saying(u, SLOW_OK, "ROLE answered slave", list, NULL);
    /* The first sentinel frozen: the others answer within the connect's
     * time, of which it takes only its share. */
    frozen = sentinel_pid(1);
    assert_int_equal(kill(frozen, SIGSTOP), 0);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    sl = open_url(url, "timeout_ms=2000&connect_timeout_ms=900", NULL);
    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, "frozen", 6, &rs, 1, &r) != SLUICE_OK)
        fail_msg("with the first sentinel frozen: %s", sluice_errmsg(sl));
    took = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    kill(frozen, SIGCONT);
    frozen = 0;
    print_message("first sentinel frozen: opened and decided in %lld ms "
                  "(its share of connect_timeout_ms=900: 300)\n",
                  (long long)took);
    assert_true(r.allowed);
    assert_true(took >= 300 && took < 900 * (int64_t)tu_time_scale());
    sluice_close(sl);
}

/* A failover under load: how names it, 1..3 the sentinel asked to lead a
 * planned one, 0 the master killed; via a sentinel never frozen. Waits
 * until the sentinels name another master and decisions have been good
 * for a while, and the limited key is at its limit. */
typedef struct run {
    const char *name;
    int leader, via;
    bool multi;             /* redis+multi+sentinel:// */
    bool fail_open;         /* else fail=error */
    int64_t before_ms;      /* the load alone before the fault */
    int64_t pause_ms;       /* no calls for so long after it */
    void (*setup)(void);    /* before the load (a freeze) */
    void (*prepare)(void);  /* during it, before the fault */
    void (*teardown)(void); /* after it */
} run;

/* Set by a run's setup: the URL to load through instead. */
static char run_url[1200];
static tcprelay relay;
static bool relaying;
static sk_watch *watching;

static void failover_under_load(const run *how)
{
    static load l;
    sk_watch w;
    int old, via = how->via, leader = 0, i;
    int64_t end, again, sel, pro, sw, g, bound, t0, fail0, promoted, began,
        settle_ms;
    long long held, subs[4][64];
    uint64_t failovers;
    int nsubs[4];
    bool moved = false;

    began = tu_clock_ms(CLOCK_MONOTONIC);
    wait_settled();
    settle_ms = tu_clock_ms(CLOCK_MONOTONIC) - began;
    old = master_port(via);
    sk_watch_start(&w);
    watching = &w;
    run_url[0] = '\0';
    if (how->setup != NULL)
        how->setup();
    for (i = 1; i <= 3; i++) /* subscribed before the handle: not its */
        nsubs[i] =
            frozen == sentinel_pid(i) ? 0 : sk_subscriber_ids(i, subs[i], 64);
    load_start(&l,
               run_url[0]   ? run_url
               : how->multi ? url_multi
                            : url,
               how->fail_open
                   ? "timeout_ms=250&connect_timeout_ms=500&fail=open"
                   : "timeout_ms=250&connect_timeout_ms=500&fail=error");
    tu_sleep_ms(how->before_ms);
    if (how->prepare != NULL)
        how->prepare();
    /* The handle subscribed where the fault is announced first (one that
     * opens as a failover begins may miss its first announcement: a
     * window no client closes). One that never does is told, and the
     * failover shows what it costs. */
    for (i = 1; i <= 3; i++) {
        int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 5000;

        if ((how->leader > 0 && i != how->leader) || frozen == sentinel_pid(i))
            continue;
        while (!sk_new_subscriber(i, subs[i], nsubs[i]) &&
               tu_clock_ms(CLOCK_MONOTONIC) < until)
            tu_sleep_ms(10);
        if (!sk_new_subscriber(i, subs[i], nsubs[i]))
            print_message("%s: the handle did not subscribe on sentinel %d "
                          "in 5 s\n",
                          how->name, i);
    }
    load_begin(&l, how->pause_ms);
    t0 = l.t0;
    atomic_store(&w.armed, t0);
    if (how->leader > 0)
        planned(how->leader);
    else
        killed(old);
    /* A failover the sentinels start may not complete on a loaded machine
     * (the replica chosen slow to answer): a planned one is asked for
     * again after a failover timeout (the fixture's 10 s) and some. */
    end = t0 + 60000 * (int64_t)tu_time_scale();
    again = t0 + 15000;
    for (;;) {
        int64_t now = tu_clock_ms(CLOCK_MONOTONIC), last;
        bool settled, full;

        moved = moved || master_port(via) != old;
        pthread_mutex_lock(&l.mu);
        last = now - t0 - 100;
        settled = now - t0 > 2000 && last > 0 && last < SPAN_MS &&
                  first_at(l.good, last) >= 0;
        full = l.limit_denied > 0;
        pthread_mutex_unlock(&l.mu);
        if ((settled && moved && full) || now > end)
            break;
        if (!moved && how->leader > 0 && now > again) {
            print_message("%s: no failover 15 s after asking: asked again\n",
                          how->name);
            planned(how->leader);
            again = now + 15000;
        }
        tu_sleep_ms(50);
    }
    load_stop(&l);
    sk_watch_stop(&w);
    watching = NULL;
    if (how->teardown != NULL)
        how->teardown();
    held = counted(l.key, via);
    /* The first good decision once the replica chosen answers ROLE
     * master, against a test's own connect and PING to it then. */
    sel = sk_first(&w, "+selected-slave", t0, &leader);
    pro = sk_first(&w, "+promoted-slave", t0, NULL);
    sw = sk_first(&w, "+switch-master", t0, NULL);
    promoted = w.promoted_at >= 0 ? w.promoted_at - t0 : -1;
    bound = 200 + 2 * (w.control_ms > 0 ? w.control_ms : 0);
    fail0 = first_at(l.bad, 0);
    g = promoted >= 0 ? first_at(l.good, promoted) : -1;
    print_message(
        "%s: master %d -> %d, led by sentinel %d; %ld decided, %ld failed "
        "(%ld by fail=open; connect %ld, io %ld, timeout %ld, server %ld); "
        "the new master holds %lld: %lld acknowledged decisions lost (and "
        "%lld of %ld with an unknown outcome counted); limit %d: %ld "
        "admitted, %ld denied, %ld failed\n",
        how->name, old, master_port(via), leader, l.decided, l.failed, l.policy,
        l.by_status[SLUICE_ECONNECT], l.by_status[SLUICE_EIO],
        l.by_status[SLUICE_ETIMEOUT], l.by_status[SLUICE_ESERVER], held,
        held < l.decided ? (long long)l.decided - held : 0,
        held > l.decided ? held - (long long)l.decided : 0, l.unknown, LIMIT,
        l.limit_admitted, l.limit_denied, l.limit_failed);
    print_message(
        "%s: ms after the fault: +selected-slave %lld, promoted %lld "
        "(+promoted-slave %lld, +switch-master %lld); failures from %lld to "
        "%lld; the first good decision after the promotion at %lld: %lld "
        "ms after it (control %lld ms); last failure: %s\n",
        how->name, (long long)sel, (long long)promoted, (long long)pro,
        (long long)sw, (long long)fail0, (long long)last_at(l.bad),
        (long long)g, (long long)(g - promoted), (long long)w.control_ms,
        l.fail_msg[0] ? l.fail_msg : "-");
    print_message("%s: %lld ms in all, %lld of them for the fixture to settle "
                  "before\n",
                  how->name, (long long)(tu_clock_ms(CLOCK_MONOTONIC) - began),
                  (long long)settle_ms);
    if (l.other > 0)
        fail_msg("%ld answers neither a decision nor a failure: %s", l.other,
                 l.other_msg);
    /* A replica promoted closes its clients' connections, before any reply
     * to a connect under way: no sign of a TLS port (a killed master's
     * resets are another story). */
    if (how->leader > 0 && l.rediss_msg[0] != '\0')
        fail_msg("%s: a message suggests rediss://: %s", how->name,
                 l.rediss_msg);
    assert_true(moved);
    {
        sluice_stats st;

        assert_int_equal(sluice_get_stats(l.sl, &st, sizeof(st)), SLUICE_OK);
        failovers = st.failovers;
    }
    load_close(&l);
    /* A charge whose answer was lost (EIO, ETIMEOUT: the outcome unknown)
     * may be counted too; a planned failover loses nothing acknowledged.
     * (A killed master may: replication is asynchronous.) */
    assert_true(held <= l.decided + l.unknown);
    /* Bar what the replica had not received when it was promoted
     * (asynchronous replication, Redis's loss: sk_lag): the handle's own
     * would be writes to the old master after the promotion. */
    print_message("%s: the replica promoted lacked %lld bytes of the old "
                  "master's stream (-1: unknown), at most %lld decisions\n",
                  how->name, w.lag_bytes, sk_lag_decisions(&w));
    if (how->leader > 0 && held + sk_lag_decisions(&w) < l.decided)
        fail_msg("%s: %lld acknowledged decisions lost", how->name,
                 (long long)l.decided - held);
    if (l.limit_admitted > LIMIT + sk_lag_decisions(&w))
        fail_msg("%s: %ld admitted under a limit of %d in one window",
                 how->name, l.limit_admitted, LIMIT);
    if (failovers < 1)
        fail_msg("%s: sluice_stats.failovers is 0", how->name);
    /* Once the new master is one, the handle is there about as soon as a
     * client of the test's own (its calls failed while it was awaited; a
     * handle that missed the announcements decided on the old master,
     * and lost what it decided there, above). */
    if (promoted < 0 || g < 0 ||
        g - promoted > bound * (int64_t)tu_time_scale())
        fail_msg("%s: decisions were good again %lld ms after the "
                 "promotion (at %lld ms after the fault); the bound is %lld "
                 "ms",
                 how->name, (long long)(g - promoted), (long long)promoted,
                 (long long)bound);
    check_ttls();
}

/* cmocka's teardown: a failed test leaves no threads, no frozen
 * sentinel and no relay behind. */
static int cleanup(void **state)
{
    (void)state;
    if (running != NULL)
        load_stop(running);
    if (watching != NULL)
        sk_watch_stop(watching);
    watching = NULL;
    if (frozen > 0)
        kill(frozen, SIGCONT);
    frozen = 0;
    if (relaying)
        tr_stop(&relay);
    relaying = false;
    return 0;
}

static void freeze_first(void)
{
    frozen = sentinel_pid(1);
    assert_int_equal(kill(frozen, SIGSTOP), 0);
}

/* A second before the fault, as a sentinel that hangs mid-run. */
static void freeze_first_a_second(void)
{
    freeze_first();
    tu_sleep_ms(1000);
}

static void thaw(void)
{
    kill(frozen, SIGCONT);
    frozen = 0;
}

/* The second sentinel reached through a relay. */
static void relay_second(void)
{
    char list[256];

    if (!tr_start(&relay, sentinel_client_port(2)))
        fail_msg("cannot start the relay");
    relaying = true;
    snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             sentinel_client_port(1), relay.port, sentinel_client_port(3));
    with_sentinels(run_url, sizeof(run_url), url, list);
}

/* The relay's connections cut without a word (the subscription on the
 * second sentinel among them), long enough before the fault for a health
 * check to find it out: a PING a second, answered within
 * connect_timeout_ms (500). */
static void cut_second(void)
{
    tr_cut(&relay);
    tu_sleep_ms(2500);
}

static void stop_relay(void)
{
    tr_stop(&relay);
    relaying = false;
}

static void led_by_first(void **state)
{
    run how = {.name = "planned, led by sentinel 1 (redis+sentinel://)",
               .leader = 1,
               .via = 2};

    (void)state;
    how.before_ms = 300;
    failover_under_load(&how);
}

static void led_by_second(void **state)
{
    run how = {.name = "planned, led by sentinel 2 (redis+multi+sentinel://)",
               .leader = 2,
               .via = 1};

    (void)state;
    how.multi = true;
    how.before_ms = 300;
    failover_under_load(&how);
}

static void led_by_third(void **state)
{
    run how = {.name = "planned, led by sentinel 3 (redis+sentinel://)",
               .leader = 3,
               .via = 2};

    (void)state;
    how.before_ms = 300;
    failover_under_load(&how);
}

/* The first sentinel hangs: before the open, or a second before a
 * failover that another leads (the third: a handle that subscribes on one
 * sentinel at a time moves from the first to the second; the second: one
 * subscribed on the first waits on it). */
static void first_frozen_before_the_open(void **state)
{
    run how = {.name = "sentinel 1 frozen before the open, led by sentinel 3",
               .leader = 3,
               .via = 2};

    (void)state;
    how.before_ms = 300;
    how.setup = freeze_first;
    how.teardown = thaw;
    failover_under_load(&how);
}

static void first_frozen_before_the_failover(void **state)
{
    run how = {.name = "sentinel 1 frozen a second before, led by sentinel 2",
               .leader = 2,
               .via = 3};

    (void)state;
    how.multi = true;
    how.before_ms = 300;
    how.prepare = freeze_first_a_second;
    how.teardown = thaw;
    failover_under_load(&how);
}

/* The subscription on the leader dead without a word (its host gone, a
 * firewall that forgot it): the health check replaces it before the
 * failover, whose first announcements only the leader makes. */
static void leader_subscription_cut(void **state)
{
    run how = {.name = "subscription to sentinel 2 cut, led by it",
               .leader = 2,
               .via = 3};

    (void)state;
    how.before_ms = 500;
    how.setup = relay_second;
    how.prepare = cut_second;
    how.teardown = stop_relay;
    failover_under_load(&how);
}

/* The same on the caller's loop (sluice_attach, a poll loop on this
 * thread): 8 decisions in flight on one key at all times, a failover led
 * by sentinel 3. The subscriptions, their health checks and the
 * connection to the master are the loop's sockets and timer. */
typedef struct on_loop {
    sluice *sl;
    sluice_ruleset rs;
    char key[64];
    int64_t t0;
    bool stop;
    long inflight, decided, failed, unknown, other;
    unsigned char good[SPAN_MS], bad[SPAN_MS];
    int64_t first_unknown; /* ms, -1 none */
    char other_msg[256], unknown_msg[256];
} on_loop;

static void loop_submit(on_loop *a);

static void loop_decided(sluice *sl, void *arg, sluice_status st,
                         const sluice_result *res, size_t n)
{
    on_loop *a = arg;
    int64_t ms = a->t0 > 0 ? tu_clock_ms(CLOCK_MONOTONIC) - a->t0 : -1;

    (void)n;
    a->inflight--;
    if (st == SLUICE_OK && res[0].status == SLUICE_OK && res[0].allowed) {
        a->decided++;
        if (ms >= 0 && ms < SPAN_MS)
            a->good[ms] = 1;
    } else if (st == SLUICE_ECONNECT || st == SLUICE_EIO ||
               st == SLUICE_ETIMEOUT || st == SLUICE_ESERVER) {
        a->failed++;
        if (ms >= 0 && ms < SPAN_MS)
            a->bad[ms] = 1;
        if ((st == SLUICE_EIO || st == SLUICE_ETIMEOUT) && a->unknown++ == 0) {
            a->first_unknown = ms;
            snprintf(a->unknown_msg, sizeof(a->unknown_msg), "%s",
                     sluice_errmsg(sl));
        }
    } else {
        a->other++;
        snprintf(a->other_msg, sizeof(a->other_msg), "%s (%s)",
                 sluice_strerror(st != SLUICE_OK ? st : res[0].status),
                 sluice_errmsg(sl));
    }
    if (!a->stop)
        loop_submit(a);
}

static void loop_submit(on_loop *a)
{
    if (sluice_acquire_async(a->sl, a->key, strlen(a->key), &a->rs, 1,
                             loop_decided, a) == SLUICE_OK)
        a->inflight++;
}

/* Turns the loop for ms. */
static void loop_for(on_loop *a, tu_poll *lp, int64_t ms)
{
    int64_t end = tu_clock_ms(CLOCK_MONOTONIC) + ms;

    while (tu_clock_ms(CLOCK_MONOTONIC) < end)
        tu_poll_turn(a->sl, lp, 5);
}

static void failover_on_the_callers_loop(void **state)
{
    static on_loop a;
    tu_poll lp;
    sluice_loop loop;
    sk_watch w;
    int old, k, nsubs;
    int64_t end, promoted, g, sel, pro, sw;
    long long held, subs[64];

    (void)state;
    wait_settled();
    old = master_port(2);
    sk_watch_start(&w);
    watching = &w;
    memset(&a, 0, sizeof(a));
    a.first_unknown = -1;
    a.rs = rules("fixed:1000000000/1h");
    snprintf(a.key, sizeof(a.key), "loop-%ld", (long)getpid());
    nsubs = sk_subscriber_ids(3, subs, 64); /* before the handle: not its */
    a.sl =
        open_url(url, "timeout_ms=250&connect_timeout_ms=500&fail=error", NULL);
    tu_poll_init(&lp);
    loop = tu_poll_loop(&lp);
    assert_int_equal(sluice_attach(a.sl, &loop), SLUICE_OK);
    for (k = 0; k < 8; k++)
        loop_submit(&a);
    /* Until the handle is subscribed on the leader (the loop connects
     * it). */
    end = tu_clock_ms(CLOCK_MONOTONIC) + 5000;
    do
        loop_for(&a, &lp, 50);
    while (!sk_new_subscriber(3, subs, nsubs) &&
           tu_clock_ms(CLOCK_MONOTONIC) < end);
    if (!sk_new_subscriber(3, subs, nsubs))
        print_message("on the caller's loop: the handle did not subscribe on "
                      "sentinel 3 in 5 s\n");
    loop_for(&a, &lp, 300);
    a.t0 = tu_clock_ms(CLOCK_MONOTONIC);
    atomic_store(&w.armed, a.t0);
    planned(3);
    end = a.t0 + 30000 * (int64_t)tu_time_scale();
    for (;;) {
        int64_t now;

        loop_for(&a, &lp, 100);
        now = tu_clock_ms(CLOCK_MONOTONIC);
        if ((now - a.t0 > 2000 && master_port(2) != old &&
             first_at(a.good, now - a.t0 - 150) >= 0) ||
            now > end)
            break;
    }
    a.stop = true;
    end = tu_clock_ms(CLOCK_MONOTONIC) + 5000;
    while (a.inflight > 0 && tu_clock_ms(CLOCK_MONOTONIC) < end)
        tu_poll_turn(a.sl, &lp, 5);
    sk_watch_stop(&w);
    watching = NULL;
    held = counted(a.key, 2);
    promoted = w.promoted_at >= 0 ? w.promoted_at - a.t0 : -1;
    g = promoted >= 0 ? first_at(a.good, promoted) : -1;
    sel = sk_first(&w, "+selected-slave", a.t0, NULL);
    pro = sk_first(&w, "+promoted-slave", a.t0, NULL);
    sw = sk_first(&w, "+switch-master", a.t0, NULL);
    print_message("on the caller's loop, led by sentinel 3: master %d -> %d; "
                  "%ld decided, %ld failed (%ld unknown); the new master "
                  "holds %lld; promoted at %lld ms, the first good decision "
                  "after it at %lld ms (control %lld ms)\n",
                  old, master_port(2), a.decided, a.failed, a.unknown, held,
                  (long long)promoted, (long long)g, (long long)w.control_ms);
    print_message("on the caller's loop: ms after SENTINEL FAILOVER: "
                  "+selected-slave %lld (+promoted-slave %lld, +switch-master "
                  "%lld); failures from %lld to %lld, the first with an "
                  "unknown outcome at %lld: %s\n",
                  (long long)sel, (long long)pro, (long long)sw,
                  (long long)first_at(a.bad, 0), (long long)last_at(a.bad),
                  (long long)a.first_unknown,
                  a.unknown_msg[0] ? a.unknown_msg : "-");
    sluice_close(a.sl);
    if (a.other > 0)
        fail_msg("%ld answers neither a decision nor a failure: %s", a.other,
                 a.other_msg);
    assert_int_equal(a.inflight, 0);
    assert_true(master_port(2) != old);
    print_message("on the caller's loop: the replica promoted lacked %lld "
                  "bytes of the old master's stream (-1: unknown), at most "
                  "%lld decisions\n",
                  w.lag_bytes, sk_lag_decisions(&w));
    if (held + sk_lag_decisions(&w) < a.decided)
        fail_msg("on the caller's loop: %lld acknowledged decisions lost",
                 (long long)a.decided - held);
    assert_true(held <= a.decided + a.unknown);
    if (promoted < 0 || g < 0 ||
        g - promoted > (200 + 2 * (w.control_ms > 0 ? w.control_ms : 0)) *
                           (int64_t)tu_time_scale())
        fail_msg("on the caller's loop: good again %lld ms after the "
                 "promotion",
                 (long long)(g - promoted));
    check_ttls();
}

/* The master killed: the failover's announcements end the backoff of
 * connects to the dead master. The calls pause 400 ms after the kill, as
 * a quiet client's would, so that the backoff's steps (then 400, 450,
 * 550, 750, 1150, 1950 and 2950 ms: 50 ms doubled up to a second)
 * straddle the promotion, which comes 0.9 to 2.1 s after the kill: a
 * handle that waited for the backoff's end answered its first good
 * decision 469-568 ms after the promotion. */
static void killed_master_under_load(void **state)
{
    run how = {.name = "killed master (redis+multi+sentinel://)",
               .leader = 0,
               .via = 2};

    (void)state;
    how.multi = true;
    how.fail_open = true;
    how.before_ms = 300;
    how.pause_ms = 400;
    failover_under_load(&how);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(discovers_the_master_on_both_schemes),
        cmocka_unit_test_teardown(bad_input_is_a_clear_error, cleanup),
        cmocka_unit_test_teardown(led_by_first, cleanup),
        cmocka_unit_test_teardown(led_by_second, cleanup),
        cmocka_unit_test_teardown(led_by_third, cleanup),
        cmocka_unit_test_teardown(first_frozen_before_the_open, cleanup),
        cmocka_unit_test_teardown(first_frozen_before_the_failover, cleanup),
        cmocka_unit_test_teardown(leader_subscription_cut, cleanup),
        cmocka_unit_test_teardown(failover_on_the_callers_loop, cleanup),
        /* Last: it leaves two data nodes. */
        cmocka_unit_test_teardown(killed_master_under_load, cleanup),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: test_sentinel DIR\n");
        return 2;
    }
    dir = argv[1];
    sk_read("url", url, sizeof(url));
    sk_read("url-multi", url_multi, sizeof(url_multi));
    sk_read("sentinels", sentinels, sizeof(sentinels));
    sk_read("master", master_name, sizeof(master_name));
    sk_read("rogue", rogue, sizeof(rogue));
    /* SENTINEL_TESTS=name,name,... runs those alone, in this order (each
     * settles the fixture first). */
    if (getenv("SENTINEL_TESTS") != NULL) {
        struct CMUnitTest some[sizeof(tests) / sizeof(tests[0])];
        const char *want = getenv("SENTINEL_TESTS");
        size_t i, n = 0, len;

        for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
            const char *at = want;

            len = strlen(tests[i].name);
            while ((at = strstr(at, tests[i].name)) != NULL &&
                   !((at == want || at[-1] == ',') &&
                     (at[len] == ',' || at[len] == '\0')))
                at += len;
            if (at != NULL)
                some[n++] = tests[i];
        }
        if (n == 0) {
            fprintf(stderr, "SENTINEL_TESTS=%s names no test\n", want);
            return 2;
        }
        return _cmocka_run_group_tests("test_sentinel", some, n, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
