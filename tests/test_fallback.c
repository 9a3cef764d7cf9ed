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

static sluice *open_fallback(const char *u, const char *tag, unsigned share)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512], full[2200], base[2048];
    const char *own = strstr(u, "connect_timeout_ms="), *sep;
    size_t n;
    bool tls = strncmp(u, "rediss://", 9) == 0 || strstr(u, "tls=1") != NULL;

    sluice_options_init(&o);
    o.fail = SLUICE_FAIL_FALLBACK;
    o.fallback_instances = share;
    o.command_timeout_ms = 100;
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
             tls ? 1500 : 100);
    snprintf(prefix, sizeof(prefix), "fb%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(full, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
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
    int fb = 0, fb_admitted = 0, status;
    int64_t t0;

    (void)state;
    sl = open_fallback(url, "freeze", 4);
    /* 8 an hour on the backend; 2 for this instance of four. */
    assert_int_equal(sluice_ruleset_parse("fixed:8/1h", &rs, NULL, 0),
                     SLUICE_OK);
    for (i = 0; i < 3; i++) {
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.status, SLUICE_OK);
        assert_true(r.allowed);
    }
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
           "(limit 8/4 = 2), %d admitted: %s\n",
           url, fb, fb_admitted, sluice_strerror(r.status));
    assert_true(fb_admitted <= 2);
    if (fb >= 3)
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

static void a_killed_server_falls_back_then_returns(void **state)
{
    sluice *sl;
    sluice_ruleset rs;
    sluice_result r;
    char u[128];
    int i, fb = 0, fb_admitted = 0, back = 0;
    int64_t t0;

    (void)state;
    own_port = tu_free_port();
    start_own();
    snprintf(u, sizeof(u), "%.*s://127.0.0.1:%d/",
             (int)(strstr(url, "://") - url), url, own_port);
    if (strncmp(url, "redis+multi://", 14) == 0)
        snprintf(u, sizeof(u), "redis+multi://127.0.0.1:%d/", own_port);
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

static int teardown(void **state)
{
    (void)state;
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
    if (f == a_frozen_backend_falls_back_then_returns)
        return strncmp(url, "mem:", 4) != 0 && servers[0] != '\0';
    if (f == a_killed_server_falls_back_then_returns)
        return with_kill;
    return true;
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(a_bad_share_is_refused),
        cmocka_unit_test(a_frozen_backend_falls_back_then_returns),
        cmocka_unit_test_teardown(a_killed_server_falls_back_then_returns,
                                  teardown),
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
