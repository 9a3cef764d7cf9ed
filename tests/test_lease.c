/* SPDX-License-Identifier: BSD-3-Clause */
/* test_lease.c - the concurrency limiter on a real backend: leases decided
 * exactly as SEMANTICS.md says, on a virtual clock; a holder killed with
 * its lease held, whose slot comes back when the lease ends; and 8
 * processes (threads on mem://, which processes cannot share) taking and
 * releasing leases on one key, never more holders than the limit, counted
 * in shared memory.
 *   test_lease URL|@file [--servers @file|host:port,...] */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <cmocka.h>

static const char *url;
static bool memory;
static char servers[1024];

#define WORKERS 8
#define HOLDERS 3

/* A handle on one prefix per tag; clk NULL: the real clock. */
static sluice *open_on(tu_clock *clk, const char *tag, pid_t owner)
{
    char u[1024], prefix[64], err[512];
    sluice_options o;
    sluice *sl = NULL;

    snprintf(u, sizeof(u), "%s", memory ? "mem://leases" : url);
    sluice_options_init(&o);
    if (clk != NULL) {
        o.clock = tu_clock_now;
        o.clock_ctx = clk;
    }
    /* a correctness test: one slow round trip on a loaded machine is not a
     * failure (the deadline tests hold the timeouts), nor a slow connect:
     * 8 processes' TLS handshakes to a cluster beside four busy loops
     * once took more than the default 1 s */
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.connect_timeout_ms = 2000 * TU_TIME_SCALE;
    snprintf(prefix, sizeof(prefix), "ls%ld-%s:", (long)owner, tag);
    o.key_prefix = prefix;
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "open %s: %s\n", u, err);
        return NULL;
    }
    return sl;
}

static void expect(sluice *sl, const char *key, int64_t max, int64_t ms,
                   sluice_lease *l, bool allowed, int64_t remaining,
                   int64_t retry, int64_t reset, int line)
{
    sluice_result r;

    if (sluice_lease_acquire(sl, key, strlen(key), max, ms, l, &r) != SLUICE_OK)
        fail_msg("line %d: %s", line, sluice_errmsg(sl));
    if (r.allowed != allowed || r.limit != max || r.remaining != remaining ||
        r.retry_after_ms != retry || r.reset_after_ms != reset)
        fail_msg("line %d: want %d %lld %lld %lld %lld, got %d %lld %lld "
                 "%lld %lld",
                 line, allowed, (long long)max, (long long)remaining,
                 (long long)retry, (long long)reset, r.allowed,
                 (long long)r.limit, (long long)r.remaining,
                 (long long)r.retry_after_ms, (long long)r.reset_after_ms);
}

#define EXPECT(...) expect(__VA_ARGS__, __LINE__)

/* SEMANTICS.md, "Leases", worked by hand: at most 2 of 1000 ms. */
static void decided_as_defined(void **state)
{
    tu_clock clk = {1700000000000LL};
    const int64_t t0 = clk.t;
    sluice *sl = open_on(&clk, "exact", getpid());
    sluice_lease a, b, c, d, e;
    char missing[256];

    (void)state;
    assert_non_null(sl);
    /* Live leases end after t: A at t0+1000 leaves 1 of 2. */
    EXPECT(sl, "k", 2, 1000, &a, true, 1, -1, 1000);
    clk.t = t0 + 100;
    EXPECT(sl, "k", 2, 1000, &b, true, 0, -1, 1000);
    /* Full: the first lease ends at t0+1000 (800 on), the last at
     * t0+1100 (900 on). */
    clk.t = t0 + 200;
    EXPECT(sl, "k", 2, 1000, &c, false, 0, 800, 900);
    assert_int_equal(sluice_lease_release(sl, "k", 1, &a), SLUICE_OK);
    /* Released twice, or a lease that never was: nothing to do. */
    assert_int_equal(sluice_lease_release(sl, "k", 1, &a), SLUICE_OK);
    clk.t = t0 + 300;
    EXPECT(sl, "k", 2, 1000, &c, true, 0, -1, 1000);
    /* B ends at t0+1100 exactly: not live then. */
    clk.t = t0 + 1100;
    EXPECT(sl, "k", 2, 1000, &d, true, 0, -1, 1000);
    clk.t = t0 + 1200;
    EXPECT(sl, "k", 2, 1000, &e, false, 0, 100, 900);
    /* Another key, another count; a longer lease; the limit per call. */
    EXPECT(sl, "other", 1, 5000, &e, true, 0, -1, 5000);
    EXPECT(sl, "k", 3, 1000, &e, true, 0, -1, 1000);
    sluice_close(sl);
    if (!memory) {
        char prefix[64];

        snprintf(prefix, sizeof(prefix), "ls%ld-exact:", (long)getpid());
        if (tu_check_ttls(servers, prefix, missing, sizeof(missing)) < 0)
            fail_msg("%s", missing);
    }
}

/* A holder killed with its lease: the slot is taken until the lease ends,
 * then free again, without anyone releasing it. */
static void killed_holder_frees_its_slot(void **state)
{
    sluice *sl;
    sluice_lease mine[HOLDERS];
    sluice_result r;
    int fds[2], status;
    char ok = 0;
    pid_t child;
    int i;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    if ((child = fork()) == 0) {
        sluice *c = open_on(NULL, "killed", getppid());
        sluice_lease l;

        ok = c != NULL &&
             sluice_lease_acquire(c, "k", 1, HOLDERS, 600, &l, &r) ==
                 SLUICE_OK &&
             r.allowed;
        if (write(fds[1], &ok, 1) != 1)
            _exit(2);
        pause(); /* killed holding it */
        _exit(0);
    }
    assert_int_equal(read(fds[0], &ok, 1), 1);
    assert_true(ok);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    sl = open_on(NULL, "killed", getpid());
    assert_non_null(sl);
    for (i = 0; i < HOLDERS - 1; i++) {
        assert_int_equal(
            sluice_lease_acquire(sl, "k", 1, HOLDERS, 5000, &mine[i], &r),
            SLUICE_OK);
        assert_true(r.allowed);
    }
    assert_int_equal(
        sluice_lease_acquire(sl, "k", 1, HOLDERS, 5000, &mine[i], &r),
        SLUICE_OK);
    assert_false(r.allowed);
    assert_true(r.retry_after_ms > 0 && r.retry_after_ms <= 600);
    tu_sleep_ms(r.retry_after_ms + 5);
    assert_int_equal(
        sluice_lease_acquire(sl, "k", 1, HOLDERS, 5000, &mine[i], &r),
        SLUICE_OK);
    assert_true(r.allowed);
    printf("# a killed holder's slot came back when its lease ended\n");
    close(fds[0]);
    close(fds[1]);
    sluice_close(sl);
}

/* Shared by the workers: holders now, the most seen, leases taken. */
typedef struct shared {
    atomic_int holders, most, failures;
    atomic_long taken, denied;
} shared;

static void work(shared *sh, pid_t owner, int seconds)
{
    sluice *sl = open_on(NULL, "stress", owner);
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + seconds * 1000;

    if (sl == NULL) {
        atomic_fetch_add(&sh->failures, 1);
        return;
    }
    while (tu_clock_ms(CLOCK_MONOTONIC) < until) {
        sluice_lease l;
        sluice_result r;
        int now, most;

        if (sluice_lease_acquire(sl, "hot", 3, HOLDERS, 10000, &l, &r) !=
            SLUICE_OK) {
            fprintf(stderr, "lease: %s\n", sluice_errmsg(sl));
            atomic_fetch_add(&sh->failures, 1);
            break;
        }
        if (!r.allowed) {
            atomic_fetch_add(&sh->denied, 1);
            tu_sleep_ms(1);
            continue;
        }
        /* Counted from after the grant to before the release: never
         * more than the live leases. */
        now = atomic_fetch_add(&sh->holders, 1) + 1;
        most = atomic_load(&sh->most);
        while (now > most &&
               !atomic_compare_exchange_weak(&sh->most, &most, now))
            ;
        atomic_fetch_add(&sh->taken, 1);
        tu_sleep_ms(2);
        atomic_fetch_sub(&sh->holders, 1);
        if (sluice_lease_release(sl, "hot", 3, &l) != SLUICE_OK) {
            atomic_fetch_add(&sh->failures, 1);
            break;
        }
    }
    sluice_close(sl);
}

static void *work_thread(void *arg)
{
    work(arg, getpid(), 2);
    return NULL;
}

static void holders_never_exceed_the_limit(void **state)
{
    shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t kids[WORKERS];
    pthread_t th[WORKERS];
    int i, status;

    (void)state;
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    for (i = 0; i < WORKERS; i++) {
        if (memory) {
            assert_int_equal(pthread_create(&th[i], NULL, work_thread, sh), 0);
        } else if ((kids[i] = fork()) == 0) {
            work(sh, getppid(), 2);
            _exit(0);
        }
    }
    for (i = 0; i < WORKERS; i++) {
        if (memory)
            pthread_join(th[i], NULL);
        else
            waitpid(kids[i], &status, 0);
    }
    printf("# %d %s: %ld leases taken, %ld denied, at most %d holders at "
           "once (limit %d)\n",
           WORKERS, memory ? "threads" : "processes", (long)sh->taken,
           (long)sh->denied, sh->most, HOLDERS);
    assert_int_equal(sh->failures, 0);
    assert_true(sh->most <= HOLDERS);
    assert_true(sh->taken > 0);
    munmap(sh, sizeof(*sh));
}

static void bad_arguments(void **state)
{
    sluice *sl = open_on(NULL, "bad", getpid());
    sluice_lease l;
    sluice_result r;

    (void)state;
    assert_int_equal(sluice_lease_acquire(sl, "k", 1, 0, 1000, &l, &r),
                     SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "max_holders"));
    assert_int_equal(sluice_lease_acquire(sl, "k", 1, 1, 0, &l, &r),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_lease_acquire(sl, "", 0, 1, 10, &l, &r),
                     SLUICE_EKEY);
    assert_int_equal(sluice_lease_acquire(sl, "k", 1, 1, 10, NULL, &r),
                     SLUICE_EINVAL);
    memset(&l, 0, sizeof(l));
    assert_int_equal(sluice_lease_release(sl, "k", 1, &l), SLUICE_EINVAL);
    sluice_close(sl);
}

/* Whether a case applies to the URL under test: a process of its own
 * holds no mem:// store. */
static bool applies(CMUnitTestFunction f)
{
    return f != killed_holder_frees_its_slot || !memory;
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(decided_as_defined),
        cmocka_unit_test(killed_holder_frees_its_slot),
        cmocka_unit_test(holders_never_exceed_the_limit),
        cmocka_unit_test(bad_arguments),
    };
    size_t k, n = 0;
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: test_lease URL|@file\n");
        return 2;
    }
    url = tu_url(argv[1]);
    memory = strncmp(url, "mem://", 6) == 0;
    tu_servers_of(url, servers, sizeof(servers));
    /* --servers: where the keys are (behind a proxy, or over TLS). */
    for (i = 2; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--servers") == 0)
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[i + 1]));
    printf("leases on %s\n", url);
    /* A case that does not apply is left out, not skipped: a skip says
     * that a case which should have run did not. */
    for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
        if (applies(tests[k].test_func))
            tests[n++] = tests[k];
    return _cmocka_run_group_tests(url, tests, n, NULL, NULL);
}
