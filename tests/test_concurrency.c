/* SPDX-License-Identifier: BSD-3-Clause */
/* test_concurrency.c - several processes, each with its own connection,
 * hammer one key on a real server; for the exact algorithms the number
 * admitted must equal the limit exactly. Then threads sharing one handle
 * do the same, single calls and batches mixed, and their requests must go
 * out together (fewer round trips than calls):
 *   test_concurrency URL|@file */
#include "algo.h"
#include "backend.h"
#include "store.h"
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#define PROCS    8
#define ATTEMPTS 400

static const char *url;
static const char *unsupported = ""; /* algorithms the backend refuses */

static int64_t fixed_now; /* virtual time for every child; 0: real */

static int64_t virtual_clock(void *ctx)
{
    (void)ctx;
    return fixed_now;
}

/* Child: acquire ATTEMPTS times, write the admitted count to fd. */
static void child(const char *u, const char *prefix, const char *rule, int fd)
{
    sluice_options o;
    sluice_ruleset rs;
    sluice *sl = NULL;
    int64_t admitted = 0, errors = 0, contended = 0, counts[3];
    int i;

    memset(&o, 0, sizeof(o));
    o.key_prefix = prefix;
    o.command_timeout_ms = 5000;
    if (fixed_now != 0)
        o.clock = virtual_clock;
    if (sluice_ruleset_parse(rule, &rs, NULL, 0) != SLUICE_OK ||
        sluice_open(u, &o, &sl, NULL, 0) != SLUICE_OK)
        _exit(3);
    for (i = 0; i < ATTEMPTS; i++) {
        sluice_result r;
        sluice_status st = sluice_acquire(sl, "hot", 3, &rs, 1, &r);

        if (st == SLUICE_ECONTENDED)
            contended++; /* WATCH gave up: nothing was charged */
        else if (st != SLUICE_OK)
            errors++;
        else
            admitted += r.allowed;
    }
    sluice_close(sl);
    counts[0] = admitted;
    counts[1] = errors;
    counts[2] = contended;
    if (write(fd, counts, sizeof(counts)) != (ssize_t)sizeof(counts))
        _exit(4);
    _exit(0);
}

/* Runs PROCS children on prefix; returns the total admitted. */
static int64_t run_prefixed(const char *u, const char *rule, const char *prefix)
{
    int fds[2], i;
    int64_t total = 0, errors = 0, contended = 0;

    assert_int_equal(pipe(fds), 0);
    for (i = 0; i < PROCS; i++) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(u, prefix, rule, fds[1]);
        }
    }
    close(fds[1]);
    for (i = 0; i < PROCS; i++) {
        int64_t counts[3];

        assert_int_equal(read(fds[0], counts, sizeof(counts)), sizeof(counts));
        total += counts[0];
        errors += counts[1];
        contended += counts[2];
    }
    close(fds[0]);
    for (i = 0; i < PROCS; i++) {
        int status;

        wait(&status);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(errors, 0);
    if (contended > 0)
        printf("# %lld requests gave up on WATCH after 16 tries "
               "(SLUICE_ECONTENDED, nothing charged)\n",
               (long long)contended);
    return total;
}

/* Runs PROCS children on a fresh prefix; returns the total admitted. */
static int64_t run(const char *u, const char *rule, int round)
{
    char prefix[64];

    snprintf(prefix, sizeof(prefix), "cc%ld-%d:", (long)getpid(), round);
    return run_prefixed(u, rule, prefix);
}

static void exact_algorithms_admit_exactly_the_limit(void **state)
{
    /* Daily windows and refills of 1000 a day: during the few seconds of
     * the run nothing refills, so exactly 1000 may pass. */
    static const char *const rules[] = {
        "fixed:1000/1d",
        "log:1000/1d",
        "token:1000/1d",
        "gcra:1000/1d",
        "sliding:1000/1d",
        "fixed:1000/1d+token:1500/1d,burst=1500",
        "fixed:1000/1d+log:1500/1d"};
    static const char *const clocks[] = {"", "clock=server"};
    size_t k, c;
    int round = 0;

    (void)state;
    for (c = 0; c < 2; c++) {
        char u[600];

        snprintf(u, sizeof(u), "%s%s%s", url,
                 c == 0                     ? ""
                 : strchr(url, '?') != NULL ? "&"
                                            : "?",
                 clocks[c]);
        if (c == 1 && ((strncmp(url, "redis://", 8) != 0 &&
                        strncmp(url, "rediss://", 9) != 0 &&
                        strncmp(url, "redis-cluster://", 16) != 0) ||
                       getenv("SLUICE_NO_SERVER_CLOCK") != NULL))
            break; /* the server's clock is the Lua backend's */
        for (k = 0; k < sizeof(rules) / sizeof(rules[0]); k++) {
            sluice_ruleset rs;
            int64_t k0, k1, e, total;
            int64_t t0 = tu_clock_ms(CLOCK_REALTIME);

            if (unsupported[0] != '\0' && (strstr(rules[k], "token") != NULL ||
                                           strstr(rules[k], "gcra") != NULL))
                continue;
            assert_int_equal(sluice_ruleset_parse(rules[k], &rs, NULL, 0),
                             SLUICE_OK);
            total = run(u, rules[k], round++);
            sl_window_locate(&rs.rules[0], t0, &k0, &e);
            sl_window_locate(&rs.rules[0], tu_clock_ms(CLOCK_REALTIME), &k1,
                             &e);
            printf("# %s %s: %d processes x %d attempts, admitted %lld "
                   "(limit 1000)\n",
                   rules[k], clocks[c][0] ? "server clock" : "client clock",
                   PROCS, ATTEMPTS, (long long)total);
            if (k0 != k1) {
                /* The run straddled midnight UTC: a new window began. */
                printf("# window boundary crossed; run again\n");
                total = run(u, rules[k], round++);
            }
            assert_int_equal(total, 1000);
        }
    }
}

/* A sliding counter whose previous window still weighs: 600 charged in
 * window 0; at 500 ms into window 1 it weighs 600 * 500 / 1000 = 300, so
 * exactly 700 more may pass while every process decides at that instant. */
static void sliding_counter_with_a_weighted_previous_window(void **state)
{
    const char *rule = "sliding:1000/1s";
    char prefix[64], floored[1100];
    sluice_options o;
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl;
    int64_t total;

    (void)state;
    /* The clock is virtual but keys expire in real time: under valgrind on
     * a busy machine the processes take seconds to start, longer than the
     * windows' TTLs, and a previous window that expired mid-run let 740
     * through. A TTL floor of ten minutes keeps the state while it counts. */
    snprintf(floored, sizeof(floored), "%s%sttl_floor_ms=600000", url,
             strchr(url, '?') != NULL ? "&" : "?");
    snprintf(prefix, sizeof(prefix), "cc%ld-99:", (long)getpid());
    memset(&o, 0, sizeof(o));
    o.key_prefix = prefix;
    o.clock = virtual_clock;
    fixed_now = 1700000000500LL;
    assert_int_equal(sluice_ruleset_parse(rule, &rs, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_open(floored, &o, &sl, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "hot", 3, &rs, 600, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(sl);
    fixed_now = 1700000001500LL;
    total = run_prefixed(floored, rule, prefix);
    fixed_now = 0;
    printf("# %s, previous window 600 weighing 300: %d processes x %d "
           "attempts, admitted %lld (exact: 700)\n",
           rule, PROCS, ATTEMPTS, (long long)total);
    assert_int_equal(total, 700);
}

/* One handle, THREADS threads: odd threads acquire one at a time, even
 * ones in batches of 4 (the same key twice in each batch, and another
 * key), one thread also makes a bad call now and then. */
#define THREADS         8
#define BATCH           4
/* Calls a thread makes: 4 x 200 single hot calls and 4 x 100 batches
 * with 2 hot requests each, 1600 on the hot key, well past its limit
 * (under valgrind the plain backends take a minute for 400 a thread). */
#define SHARED_ATTEMPTS 200

typedef struct shared_run {
    sluice *sl;
    sluice_ruleset rs;
    int index;
    int64_t admitted, errors, others;
    bool own_message; /* the bad call's message, never another thread's */
} shared_run;

static void *shared_thread(void *arg)
{
    shared_run *t = arg;
    int i, j;

    for (i = 0; i < SHARED_ATTEMPTS;) {
        if (t->index % 2 == 1) {
            sluice_result r;
            sluice_status st = sluice_acquire(t->sl, "hot", 3, &t->rs, 1, &r);

            if (st != SLUICE_OK && st != SLUICE_ECONTENDED)
                t->errors++;
            else if (st == SLUICE_OK)
                t->admitted += r.allowed;
            else if (strcmp(sluice_errmsg(t->sl), "") == 0)
                t->own_message = false; /* contention says why */
            i++;
        } else {
            sluice_request q[BATCH] = {{"hot", 3, &t->rs, 1},
                                       {"other", 5, &t->rs, 1},
                                       {"hot", 3, &t->rs, 1},
                                       {"other", 5, &t->rs, 1}};
            sluice_result r[BATCH];
            sluice_status st = sluice_acquire_many(t->sl, q, BATCH, r);

            if (st != SLUICE_OK && st != SLUICE_ECONTENDED)
                t->errors++;
            for (j = 0; j < BATCH; j += 2) {
                if (r[j].status == SLUICE_OK)
                    t->admitted += r[j].allowed;
                else if (r[j].status != SLUICE_ECONTENDED)
                    t->errors++;
                t->others += r[j + 1].status == SLUICE_OK;
            }
            i += 2;
        }
        if (t->index == 0 && i % 50 == 0) {
            sluice_result r;

            /* A key over the cap: this thread's own message. */
            static char big[SLUICE_MAX_KEY_LEN + 1];
            if (sluice_acquire(t->sl, big, sizeof(big), &t->rs, 1, &r) !=
                    SLUICE_EKEY ||
                strstr(sluice_errmsg(t->sl), "key") == NULL)
                t->own_message = false;
        }
    }
    return NULL;
}

static void one_handle_shared_by_threads_admits_exactly_the_limit(void **st)
{
    static const char *const rules[] = {"fixed:1000/1d", "log:1000/1d",
                                        "gcra:1000/1d", "sliding:1000/1d"};
    size_t k;

    (void)st;
    for (k = 0; k < sizeof(rules) / sizeof(rules[0]); k++) {
        shared_run t[THREADS];
        pthread_t th[THREADS];
        char prefix[64];
        sluice_options o;
        sluice *sl = NULL;
        int64_t total = 0, errors = 0, calls;
        uint64_t trips, batches;
        int i;

        if (strstr(unsupported, rules[k]) != NULL ||
            (strncmp(rules[k], "gcra", 4) == 0 &&
             strstr(unsupported, "gcra") != NULL))
            continue;
        snprintf(prefix, sizeof(prefix), "ct%ld-%zu:", (long)getpid(), k);
        memset(&o, 0, sizeof(o));
        o.key_prefix = prefix;
        o.command_timeout_ms = 5000;
        assert_int_equal(sluice_open(url, &o, &sl, NULL, 0), SLUICE_OK);
        for (i = 0; i < THREADS; i++) {
            memset(&t[i], 0, sizeof(t[i]));
            t[i].sl = sl;
            t[i].index = i;
            t[i].own_message = true;
            assert_int_equal(sluice_ruleset_parse(rules[k], &t[i].rs, NULL, 0),
                             SLUICE_OK);
            assert_int_equal(pthread_create(&th[i], NULL, shared_thread, &t[i]),
                             0);
        }
        for (i = 0; i < THREADS; i++) {
            assert_int_equal(pthread_join(th[i], NULL), 0);
            total += t[i].admitted;
            errors += t[i].errors;
            assert_true(t[i].own_message);
        }
        trips = sl_handle_round_trips(sl);
        batches = sl_handle_batches(sl);
        sluice_close(sl);
        /* Single calls, batches, and thread 0's bad calls (which never
         * reach the server). */
        calls =
            THREADS / 2 * SHARED_ATTEMPTS + THREADS / 2 * SHARED_ATTEMPTS / 2;
        printf("# %s: one handle, %d threads x %d attempts (singles and "
               "batches of %d), admitted %lld (limit 1000); %lld calls went "
               "to the backend in %llu batches, %llu round trips\n",
               rules[k], THREADS, SHARED_ATTEMPTS, BATCH, (long long)total,
               (long long)calls, (unsigned long long)batches,
               (unsigned long long)trips);
        assert_int_equal(errors, 0);
        assert_int_equal(total, 1000);
        /* Calls made while another was in the backend went with the
         * next batch (thread 0's bad calls never reach it). */
        assert_true(batches < (uint64_t)calls);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_algorithms_admit_exactly_the_limit),
        cmocka_unit_test(sliding_counter_with_a_weighted_previous_window),
        cmocka_unit_test(one_handle_shared_by_threads_admits_exactly_the_limit),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: test_concurrency URL|@file\n");
        return 2;
    }
    url = tu_url(argv[1]);
    if (argc >= 4 && strcmp(argv[2], "--unsupported") == 0)
        unsupported = argv[3];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
