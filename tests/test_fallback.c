/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fallback.c - fail=fallback on a real backend: while the servers
 * are frozen (DEBUG SLEEP), every request is decided on the in-process
 * store with its limit divided by fallback_instances, exactly, its status
 * naming the failure; once they answer again, the backend decides. With
 * --kill (plain Redis), the same with a server of our own killed and
 * started again under load.
 *   test_fallback URL|@file [--servers LIST|@file] [--kill] */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>

static const char *url;
static char servers[2048];
static bool with_kill;
/* A frozen server costs a request its timeout, so the tests that freeze
 * keep both short (100 ms); a killed server refuses at once, and there a
 * loaded machine's slow connect or round trip to a server just started
 * must not be what fails: 2 s and 1 s (scaled). */
static bool long_timeouts;

static sluice *open_policy(const char *u, const char *tag, unsigned share,
                           sluice_fail_policy fail, int64_t rules_cache_ms)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512], full[2200], base[2048];
    const char *own = strstr(u, "connect_timeout_ms="), *sep;
    size_t n;
    bool tls = strncmp(u, "rediss://", 9) == 0 || strstr(u, "tls=1") != NULL;

    sluice_options_init(&o);
    o.fail = fail;
    o.fallback_instances = share;
    o.rules_cache_ms = rules_cache_ms;
    o.command_timeout_ms = long_timeouts ? 2000 * TU_TIME_SCALE : 100;
    /* A TLS handshake under valgrind takes far longer than 100 ms: there
     * the connect waits, and fewer requests fall back while frozen. The
     * URL's own connect_timeout_ms (the TLS fixtures' under valgrind)
     * would win over the options', and an option may be given once: the
     * URL's goes, this one takes its place. */
    if (own == NULL) {
        snprintf(base, sizeof(base), "%s", u);
    } else {
        const char *after = own + strcspn(own, "&");

        snprintf(base, sizeof(base), "%.*s%s", (int)(own - u), u,
                 *after == '&' ? after + 1 : after);
    }
    n = strlen(base);
    sep = n > 0 && (base[n - 1] == '?' || base[n - 1] == '&') ? ""
          : strchr(base, '?') != NULL                         ? "&"
                                                              : "?";
    snprintf(full, sizeof(full), "%s%sconnect_timeout_ms=%d", base, sep,
             long_timeouts ? 1000 * TU_TIME_SCALE
             : tls         ? 1500
                           : 100);
    snprintf(prefix, sizeof(prefix), "fb%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(full, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static sluice *open_fallback(const char *u, const char *tag, unsigned share)
{
    return open_policy(u, tag, share, SLUICE_FAIL_FALLBACK, 0);
}

/* Freezes every server of the list for seconds; returns the children. */
static size_t freeze_all(const char *seconds, pid_t *pids, size_t max)
{
    char list[2048], *save = NULL, *hp;
    size_t n = 0;

    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",\n ", &save); hp != NULL && n < max;
         hp = strtok_r(NULL, ",\n ", &save)) {
        char *colon = strrchr(hp, ':');

        if (colon == NULL)
            continue;
        *colon = '\0';
        pids[n++] = tu_freeze(hp, atoi(colon + 1), seconds);
    }
    return n;
}

static void a_frozen_backend_falls_back_then_returns(void **state)
{
    sluice *sl;
    sluice_ruleset rs;
    sluice_result r;
    pid_t pids[16];
    size_t n, i;
    int fb = 0, fb_admitted = 0, status, warm;
    int64_t t0;

    (void)state;
    sl = open_fallback(url, "freeze", 4);
    /* 8 an hour on the backend; 2 for this instance of four. */
    assert_int_equal(sluice_ruleset_parse("fixed:8/1h", &rs, NULL, 0),
                     SLUICE_OK);
    /* Three decided by the backend. The first connects and loads what it
     * needs within the 100 ms timeout, which a TLS handshake under
     * valgrind on a busy machine may pass (then the fallback answers, and
     * the server may have counted it: 5 such at most leave 3 of 8). */
    for (i = 0, fb = 0; i < 3;) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        if (r.status != SLUICE_OK) {
            /* The fallback store decided it: its admission counts in the
             * 2 below. */
            printf("# %s: warming, %s\n", url, sluice_strerror(r.status));
            assert_true(++fb <= 5);
            fb_admitted += r.allowed;
            continue;
        }
        assert_true(r.allowed);
        i++;
    }
    warm = fb;
    fb = 0;
    n = freeze_all("1.2", pids, 16);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    while (fb < 6 && tu_clock_ms(CLOCK_MONOTONIC) - t0 < 1000) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        if (r.status == SLUICE_OK)
            break; /* awake already */
        assert_true(r.status == SLUICE_ETIMEOUT || r.status == SLUICE_EIO ||
                    r.status == SLUICE_ECONNECT);
        assert_int_equal(r.limit, 2);
        fb++;
        fb_admitted += r.allowed;
    }
    printf("# %s: servers frozen: %d requests decided by the fallback "
           "(limit 8/4 = 2; %d more while warming), %d admitted: %s\n",
           url, fb, warm, fb_admitted, sluice_strerror(r.status));
    assert_true(fb_admitted <= 2);
    if (fb + warm >= 3)
        assert_int_equal(fb_admitted, 2);
    for (i = 0; i < n; i++)
        if (pids[i] > 0)
            waitpid(pids[i], &status, 0);
    /* Awake: the backend decides again. (How many of its 8 are taken is
     * not known: a request that timed out was written, and the server
     * may have run it once it woke.) */
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    do {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        if (r.status != SLUICE_OK)
            tu_sleep_ms(50);
    } while (r.status != SLUICE_OK && tu_clock_ms(CLOCK_MONOTONIC) - t0 < 5000);
    assert_int_equal(r.status, SLUICE_OK);
    assert_int_equal(r.limit, 8);
    sluice_close(sl);
}

/* Every request counted once: the sum of what sluice_stats counts them
 * by. */
static uint64_t counted(sluice *sl)
{
    sluice_stats st;
    uint64_t n;
    size_t i;

    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    n = st.allowed + st.denied + st.peeks + st.resets + st.refunds;
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        n += st.failures[i];
    return n;
}

/* Decides client by name on limiter "fbn" until the backend answers it
 * with want, 10 times at most; returns how many the fallback store
 * admitted meanwhile. */
static int warm_by_name(sluice *sl, const char *client, sluice_status want)
{
    sluice_result r;
    sluice_status st;
    int tries, admitted = 0;

    for (tries = 0; tries < 10; tries++) {
        /* Before the rules were read once, a failure is the call's
         * status; after, the fallback store's answer. */
        st =
            sluice_limiter_acquire(sl, "fbn", 3, client, strlen(client), 1, &r);
        if (st == SLUICE_OK && r.status == want)
            return admitted;
        printf("# %s: warming %s, %s\n", url, client,
               sluice_strerror(st != SLUICE_OK ? st : r.status));
        if (st == SLUICE_OK)
            admitted += r.allowed && r.limit > 0;
    }
    fail_msg("%s: %s never answered %s", url, client, sluice_strerror(want));
    return admitted;
}

/* A decision by name while the backend cannot answer (docs/SEMANTICS.md,
 * "Named limiters"): the rules and overrides the handle read last decide,
 * by the fail policy (here the fallback store), and the listed clients
 * are answered as listed; a handle that never read the rules gets the
 * policy's answer without rules (fallback: the failure; open: admitted;
 * closed: denied). Each request counted once, its message kept. */
static void decisions_by_name_fall_back_on_the_rules_read_last(void **state)
{
    sluice *sl, *never, *open, *closed, *admin;
    sluice_ruleset rs;
    sluice_result r;
    sluice_limiter_override ov;
    pid_t pids[16];
    size_t n, i;
    uint64_t before;
    int status, admitted = 0, warm;
    sluice_status st;
    char msg[512];

    (void)state;
    /* Rules read with every decision: the frozen read is one that fails,
     * and what decides then is the stale copy. */
    sl = open_policy(url, "name", 2, SLUICE_FAIL_FALLBACK, -1);
    never = open_policy(url, "name", 2, SLUICE_FAIL_FALLBACK, -1);
    open = open_policy(url, "name", 1, SLUICE_FAIL_OPEN, -1);
    closed = open_policy(url, "name", 1, SLUICE_FAIL_CLOSED, -1);
    /* The rules are written by a handle of the same prefix with the long
     * timeouts: a first connect under valgrind on a busy machine may pass
     * 100 ms (the busy fresh-root run: sluice_limiter_set ended
     * ETIMEOUT). */
    long_timeouts = true;
    admin = open_policy(url, "name", 1, SLUICE_FAIL_ERROR, 0);
    long_timeouts = false;
    assert_int_equal(sluice_ruleset_parse("fixed:6/1h", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_set(admin, "fbn", 3, &rs, 0), SLUICE_OK);
    memset(&ov, 0, sizeof(ov));
    ov.kind = SLUICE_OVERRIDE_UNLIMITED;
    assert_int_equal(
        sluice_limiter_override_set(admin, "fbn", 3, "vip", 3, &ov), SLUICE_OK);
    ov.kind = SLUICE_OVERRIDE_DENY;
    assert_int_equal(
        sluice_limiter_override_set(admin, "fbn", 3, "bad", 3, &ov), SLUICE_OK);
    sluice_close(admin);
    /* The copy the frozen decisions use is read by sl's own decisions, at
     * 100 ms each: one that fails is answered by the fallback store (an
     * admission there counts in the 3 below), and tried again. */
    warm = warm_by_name(sl, "c1", SLUICE_OK);
    assert_int_equal(warm_by_name(sl, "vip", SLUICE_ALLOWLISTED), 0);
    assert_int_equal(warm_by_name(sl, "bad", SLUICE_DENYLISTED), 0);
    /* 3 s: the cluster's six freezes take 0.6 s, the requests below about
     * 100 ms each. */
    n = freeze_all("3", pids, 16);
    before = counted(sl);
    for (i = 0; i < 4; i++) {
        assert_int_equal(sluice_limiter_acquire(sl, "fbn", 3, "c1", 2, 1, &r),
                         SLUICE_OK);
        assert_true(r.status == SLUICE_ETIMEOUT || r.status == SLUICE_EIO ||
                    r.status == SLUICE_ECONNECT);
        assert_int_equal(r.limit, 3); /* 6 shared by two instances */
        assert_true(sluice_errmsg(sl)[0] != '\0');
        admitted += r.allowed;
    }
    assert_int_equal(admitted + warm, 3);
    assert_int_equal(sluice_limiter_acquire(sl, "fbn", 3, "vip", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ALLOWLISTED);
    assert_int_equal(sluice_limiter_acquire(sl, "fbn", 3, "bad", 3, 1, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    assert_int_equal(counted(sl) - before, 6);
    /* Never read: the fallback store has no rules; open admits and closed
     * denies without them. */
    before = counted(never);
    st = sluice_limiter_acquire(never, "fbn", 3, "c1", 2, 1, &r);
    assert_true(st == SLUICE_ETIMEOUT || st == SLUICE_EIO ||
                st == SLUICE_ECONNECT);
    snprintf(msg, sizeof(msg), "%s", sluice_errmsg(never));
    assert_non_null(strstr(msg, "has not read its rules"));
    assert_int_equal(counted(never) - before, 1);
    assert_int_equal(sluice_limiter_acquire(open, "fbn", 3, "c1", 2, 1, &r),
                     SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.limit, 0);
    assert_true(r.status != SLUICE_OK);
    assert_int_equal(sluice_limiter_acquire(closed, "fbn", 3, "c1", 2, 1, &r),
                     SLUICE_OK);
    assert_false(r.allowed);
    assert_true(r.status != SLUICE_OK);
    printf("# %s: frozen: by name 4 decided on the stale rules (3 of 3 "
           "admitted), listed clients answered; never read: %s\n",
           url, msg);
    for (i = 0; i < n; i++)
        if (pids[i] > 0)
            waitpid(pids[i], &status, 0);
    sluice_close(sl);
    sluice_close(never);
    sluice_close(open);
    sluice_close(closed);
}

/* ---- a server of our own, killed and started again ---- */

static pid_t own;
static int own_port;

static void start_own(void)
{
    own = tu_start_redis(own_port);
    if (own <= 0)
        fail_msg("redis-server on port %d did not start", own_port);
}

static void kill_own(void)
{
    tu_kill(&own);
}

/* A server of our own on a free port, and its URL in the scheme under
 * test into u. */
static void start_own_url(char *u, size_t n)
{
    own_port = tu_free_port();
    start_own();
    snprintf(u, n, "%.*s://127.0.0.1:%d/", (int)(strstr(url, "://") - url), url,
             own_port);
    if (strncmp(url, "redis+multi://", 14) == 0)
        snprintf(u, n, "redis+multi://127.0.0.1:%d/", own_port);
}

static void a_killed_server_falls_back_then_returns(void **state)
{
    sluice *sl;
    sluice_ruleset rs;
    sluice_result r;
    char u[128];
    int i, fb = 0, fb_admitted = 0, back = 0;
    int64_t t0;

    (void)state;
    long_timeouts = true;
    start_own_url(u, sizeof(u));
    sl = open_fallback(u, "kill", 2);
    /* 10 an hour; 5 for this instance of two. */
    assert_int_equal(sluice_ruleset_parse("fixed:10/1h", &rs, NULL, 0),
                     SLUICE_OK);
    for (i = 0; i < 3; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.status, SLUICE_OK);
    }
    kill_own();
    for (i = 0; i < 20; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_true(r.status == SLUICE_ECONNECT || r.status == SLUICE_EIO);
        fb++;
        fb_admitted += r.allowed;
    }
    printf("# %s: server killed: %d requests decided by the fallback (limit "
           "10/2 = 5), %d admitted: %s\n",
           u, fb, fb_admitted, sluice_errmsg(sl));
    assert_int_equal(fb_admitted, 5);
    start_own();
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    do {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        back = r.status == SLUICE_OK;
        if (!back)
            tu_sleep_ms(50);
    } while (!back && tu_clock_ms(CLOCK_MONOTONIC) - t0 < 5000);
    printf("# %s: server back: the backend decides again after %lld ms\n", u,
           (long long)(tu_clock_ms(CLOCK_MONOTONIC) - t0));
    assert_true(back);
    assert_int_equal(r.limit, 10); /* the new server's: a fresh count */
    assert_true(r.allowed);
    sluice_close(sl);
    kill_own();
}

/* A settle of what the fail policy admitted refunds nothing on the
 * backend (docs/SEMANTICS.md, "settle"): the open policy charged nothing,
 * fail=fallback charged its own store, and the backend's count is what
 * others spent there. (sluice_settle would give that back.) */
static void
a_settle_after_a_policy_admission_refunds_nothing_there(void **state)
{
    sluice *open, *fb, *other;
    sluice_ruleset rs;
    sluice_result r, by_open, by_fb;
    sluice_stats st;
    char u[128];

    (void)state;
    long_timeouts = true;
    start_own_url(u, sizeof(u));
    open = open_policy(u, "settle", 1, SLUICE_FAIL_OPEN, 0);
    fb = open_policy(u, "settle", 1, SLUICE_FAIL_FALLBACK, 0);
    other = open_policy(u, "settle", 1, SLUICE_FAIL_ERROR, 0);
    assert_int_equal(sluice_ruleset_parse("token:10/1h", &rs, NULL, 0),
                     SLUICE_OK);
    kill_own();
    assert_int_equal(sluice_acquire(open, "s", 1, &rs, 3, &by_open), SLUICE_OK);
    assert_true(by_open.allowed);
    assert_true(by_open.status == SLUICE_ECONNECT ||
                by_open.status == SLUICE_EIO);
    assert_int_equal(sluice_acquire(fb, "s", 1, &rs, 3, &by_fb), SLUICE_OK);
    assert_true(by_fb.allowed);
    start_own();
    /* Others spend 5 of 10 on the server, which is back (empty). */
    assert_int_equal(sluice_acquire(other, "s", 1, &rs, 5, &r), SLUICE_OK);
    assert_true(r.allowed);
    /* Each reserved 3 and used none: nothing comes off the server. */
    assert_int_equal(sluice_settle_after(open, "s", 1, &rs, &by_open, 3, 0, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, by_open.status);
    assert_int_equal(sluice_get_stats(open, &st, sizeof(st)), SLUICE_OK);
    assert_int_equal(st.refunds, 0);
    assert_int_equal(sluice_settle_after(fb, "s", 1, &rs, &by_fb, 3, 0, &r),
                     SLUICE_OK);
    assert_int_equal(r.status, by_fb.status); /* the fallback store's */
    assert_int_equal(sluice_peek(other, "s", 1, &rs, 1, &r), SLUICE_OK);
    printf("# %s: settles of the policy's admissions: a peek of 1 leaves %lld "
           "of 10 (others spent 5)\n",
           u, (long long)r.remaining);
    assert_int_equal(r.remaining, 4); /* 10 - 5 - the peek's own 1 */
    /* What the backend charged is settled there. */
    assert_int_equal(sluice_acquire(other, "s", 1, &rs, 3, &by_open),
                     SLUICE_OK);
    assert_int_equal(
        sluice_settle_after(other, "s", 1, &rs, &by_open, 3, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_int_equal(r.remaining, 4);
    sluice_close(open);
    sluice_close(fb);
    sluice_close(other);
    kill_own();
}

static int teardown(void **state)
{
    (void)state;
    long_timeouts = false;
    kill_own();
    return 0;
}

/* A bad share is refused at open. */
static void a_bad_share_is_refused(void **state)
{
    sluice_options o;
    sluice *sl = NULL;
    char err[256];

    (void)state;
    sluice_options_init(&o);
    o.fail = SLUICE_FAIL_FALLBACK;
    o.fallback_instances = 10001;
    assert_int_equal(sluice_open("mem://", &o, &sl, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "fallback_instances"));
    assert_int_equal(sluice_open("mem://?fail=fallback&fallback_instances=0",
                                 NULL, &sl, err, sizeof(err)),
                     SLUICE_EURL);
}

/* Whether a case applies to the URL and options under test. */
static bool applies(CMUnitTestFunction f)
{
    if (f == a_frozen_backend_falls_back_then_returns ||
        f == decisions_by_name_fall_back_on_the_rules_read_last)
        return strncmp(url, "mem:", 4) != 0 && servers[0] != '\0';
    if (f == a_killed_server_falls_back_then_returns ||
        f == a_settle_after_a_policy_admission_refunds_nothing_there)
        return with_kill;
    return true;
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(a_bad_share_is_refused),
        cmocka_unit_test(a_frozen_backend_falls_back_then_returns),
        cmocka_unit_test(decisions_by_name_fall_back_on_the_rules_read_last),
        cmocka_unit_test_teardown(a_killed_server_falls_back_then_returns,
                                  teardown),
        cmocka_unit_test_teardown(
            a_settle_after_a_policy_admission_refunds_nothing_there, teardown),
    };
    size_t k, n = 0;
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL|@file [--servers LIST|@file] [--kill]\n",
                argv[0]);
        return 2;
    }
    url = tu_url(argv[1]);
    tu_servers_of(url, servers, sizeof(servers));
    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc)
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[++i]));
        else if (strcmp(argv[i], "--kill") == 0)
            with_kill = true;
    }
    /* A case that does not apply is left out, not skipped: a skip says
     * that a case which should have run did not. */
    for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
        if (applies(tests[k].test_func))
            tests[n++] = tests[k];
    return _cmocka_run_group_tests("test_fallback", tests, n, NULL, teardown);
}
