/* SPDX-License-Identifier: BSD-3-Clause */
/* test_faults.c - a real Redis that stops answering, loses its script
 * cache or its keys, closes idle connections or drops one mid-write: clear
 * statuses within the timeout, the fail policy, recovery, and never a
 * SIGPIPE in the host process:
 *   test_faults URL|@file     (redis:// or redis+multi://) */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

static const char *url;
static char host[256];
static int port;
static bool lua; /* redis://: the script cache exists */

/* Sends one command on a fresh connection of our own. */
static void admin(const char *cmd)
{
    redisContext *c = redisConnect(host, port);
    redisReply *r;

    assert_non_null(c);
    assert_int_equal(c->err, 0);
    r = redisCommand(c, cmd);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
}

/* CONFIG SET name value, value being one argument. */
static void admin_set(const char *name, const char *value)
{
    redisContext *c = redisConnect(host, port);
    redisReply *r;

    assert_non_null(c);
    assert_int_equal(c->err, 0);
    r = redisCommand(c, "CONFIG SET %s %s", name, value);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(c);
}

/* Freezes the server for `seconds` from a child process (DEBUG SLEEP). */
static pid_t freeze(const char *seconds)
{
    pid_t pid = tu_freeze(host, port, seconds);

    assert_true(pid > 0);
    return pid;
}

static sluice *open_with(const char *query)
{
    char u[600], err[512];
    sluice *sl = NULL;

    snprintf(u, sizeof(u), "%s?prefix=f%ld:%s", url, (long)getpid(), query);
    if (sluice_open(u, NULL, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static void a_frozen_server_times_out_then_recovers(void **state)
{
    sluice *sl = open_with("&timeout_ms=100");
    sluice_ruleset rs;
    sluice_result r;
    tu_mark t0, t1;
    pid_t pid;
    int status, i;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("token:100/1s", &rs, NULL, 0),
                     SLUICE_OK);
    /* Connected and decided before the freeze: a first connect under
     * valgrind on a busy machine may take more than the 100 ms. */
    for (i = 0; sluice_acquire(sl, "k", 1, &rs, 1, &r) != SLUICE_OK; i++) {
        printf("# warming: %s\n", sluice_errmsg(sl));
        assert_true(i < 10);
    }
    pid = freeze("1.5");
    t0 = tu_mark_now();
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ETIMEOUT);
    t1 = tu_mark_now();
    printf("# frozen server: SLUICE_ETIMEOUT after %.1f ms (%.1f of them "
           "waiting for a CPU; timeout 100 ms): %s\n",
           tu_wall_ms(t0, t1), tu_runq_ms(t0, t1), sluice_errmsg(sl));
    /* Without the thread's waits for a CPU, the machine's (tu_mark). */
    assert_true(tu_net_ms(t0, t1) < 1000);
    assert_non_null(strstr(sluice_errmsg(sl), "did not answer"));
    waitpid(pid, &status, 0);
    /* The next call reconnects. */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(sl);
}

static void fail_policies_answer_when_the_server_does_not(void **state)
{
    sluice *open = open_with("&timeout_ms=100&fail=open");
    sluice *closed = open_with("&timeout_ms=100&fail=closed");
    sluice_ruleset rs;
    sluice_result r;
    pid_t pid;
    int status;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:1/1h", &rs, NULL, 0),
                     SLUICE_OK);
    pid = freeze("1");
    assert_int_equal(sluice_acquire(open, "p", 1, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_ETIMEOUT);
    assert_int_equal(sluice_acquire(closed, "p", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.status, SLUICE_ETIMEOUT);
    waitpid(pid, &status, 0);
    /* Back to real decisions, status OK. (The timed-out request had been
     * written before the timeout; Redis may still apply it when it wakes,
     * so the outcome of a timed-out call is unknown: use a fresh key.) */
    assert_int_equal(sluice_acquire(open, "q", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sluice_acquire(closed, "q", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_false(r.allowed);
    sluice_close(open);
    sluice_close(closed);
}

static void an_emptied_script_cache_falls_back_to_eval(void **state)
{
    sluice *sl = open_with("");
    sluice_ruleset rs;
    sluice_request reqs[20];
    sluice_result r, outs[20];
    int i;

    (void)state;
    assert_int_equal(sluice_ruleset_parse("log:30/1m", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "s", 1, &rs, 1, &r), SLUICE_OK);
    admin("SCRIPT FLUSH");
    assert_int_equal(sluice_acquire(sl, "s", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.remaining, 28);
    /* A whole pipelined batch meeting NOSCRIPT is resent as EVAL. */
    admin("SCRIPT FLUSH");
    for (i = 0; i < 20; i++)
        reqs[i] = (sluice_request){"s", 1, &rs, 1};
    assert_int_equal(sluice_acquire_many(sl, reqs, 20, outs), SLUICE_OK);
    for (i = 0; i < 20; i++) {
        assert_int_equal(outs[i].status, SLUICE_OK);
        assert_int_equal(outs[i].remaining, 27 - i);
    }
    sluice_close(sl);
}

static void foreign_data_under_a_key_is_a_clear_server_error(void **state)
{
    sluice *sl = open_with("");
    sluice_ruleset rs;
    sluice_result r;
    char cmd[128];

    (void)state;
    assert_int_equal(sluice_ruleset_parse("token:5/1s", &rs, NULL, 0),
                     SLUICE_OK);
    snprintf(cmd, sizeof(cmd), "HSET f%ld:{w}:token:1000 not a-string",
             (long)getpid());
    admin(cmd);
    snprintf(cmd, sizeof(cmd), "EXPIRE f%ld:{w}:token:1000 60", (long)getpid());
    admin(cmd);
    assert_int_equal(sluice_acquire(sl, "w", 1, &rs, 1, &r), SLUICE_ESERVER);
    assert_non_null(strstr(sluice_errmsg(sl), "WRONGTYPE"));
    /* A string that is not a bucket's state: refused, not misread. */
    snprintf(cmd, sizeof(cmd), "SET f%ld:{x}:token:1000 short EX 60",
             (long)getpid());
    admin(cmd);
    {
        sluice_status st = sluice_acquire(sl, "x", 1, &rs, 1, &r);

        printf("# foreign string under a bucket's key: %s: %s\n",
               sluice_strerror(st), sluice_errmsg(sl));
        assert_true(st == SLUICE_ESERVER || st == SLUICE_EPROTO);
    }
    /* The connection survives a server error. */
    assert_int_equal(sluice_acquire(sl, "v", 1, &rs, 1, &r), SLUICE_OK);
    sluice_close(sl);
}

/* Expects the three policies' answers to a server that refuses writes
 * with reply `word`, and bad input never papered over. */
static void expect_policies(const char *word)
{
    sluice *open = open_with("&fail=open");
    sluice *closed = open_with("&fail=closed");
    sluice *error = open_with("");
    sluice_ruleset rs;
    sluice_result r;

    assert_int_equal(
        sluice_ruleset_parse("fixed:5/1h+token:5/1s", &rs, NULL, 0), SLUICE_OK);
    assert_int_equal(sluice_acquire(open, "ro", 2, &rs, 1, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_ESERVER);
    if (strstr(sluice_errmsg(open), word) == NULL)
        fail_msg("message should quote %s: %s", word, sluice_errmsg(open));
    printf("# fail=open on %s: allowed, status %s: %s\n", word,
           sluice_strerror(r.status), sluice_errmsg(open));
    assert_int_equal(sluice_acquire(closed, "ro", 2, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(r.status, SLUICE_ESERVER);
    assert_int_equal(sluice_acquire(error, "ro", 2, &rs, 1, &r),
                     SLUICE_ESERVER);
    assert_non_null(strstr(sluice_errmsg(error), word));
    /* Bad input is the caller's to fix, whatever the policy. */
    assert_int_equal(sluice_acquire(open, "", 0, &rs, 1, &r), SLUICE_EKEY);
    assert_int_equal(sluice_acquire(open, "ro", 2, &rs, 0, &r), SLUICE_ECOST);
    sluice_close(open);
    sluice_close(closed);
    sluice_close(error);
}

/* A replica, or a server out of memory, cannot decide: the fail policy
 * answers, with the real status and the reply in the message. */
static void server_error_replies_get_the_fail_policy(void **state)
{
    (void)state;
    /* A replica of a master that does not exist: reads only. */
    admin("REPLICAOF 127.0.0.1 1");
    expect_policies("READONLY");
    admin("REPLICAOF NO ONE");
    admin_set("maxmemory", "1");
    expect_policies("OOM");
    admin_set("maxmemory", "0");
}

/* CONFIG SET requirepass on a connection that authenticates first (the
 * password may already be set); "" clears it. */
static void set_password(const char *current, const char *next)
{
    redisContext *c = redisConnect(host, port);
    redisReply *r;

    assert_non_null(c);
    if (current[0] != '\0') {
        r = redisCommand(c, "AUTH %s", current);
        if (r != NULL)
            freeReplyObject(r);
    }
    r = redisCommand(c, "CONFIG SET requirepass %s", next);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
}

/* A server that wants a password: the message says what to give, and
 * never shows a password. */
static void a_server_that_wants_a_password_says_so(void **state)
{
    sluice *sl = open_with("");
    sluice_ruleset rs;
    sluice_result r;

    (void)state;
    assert_int_equal(
        sluice_ruleset_parse("fixed:5/1h+sliding:5/1h", &rs, NULL, 0),
        SLUICE_OK);
    set_password("", "Wanted-Pw-123");
    sluice_close(sl);
    sl = open_with("&fail=error");
    assert_int_equal(sluice_acquire(sl, "pw", 2, &rs, 1, &r), SLUICE_ESERVER);
    printf("# no password given: %s\n", sluice_errmsg(sl));
    assert_non_null(strstr(sluice_errmsg(sl), "requires authentication"));
    assert_null(strstr(sluice_errmsg(sl), "Wanted-Pw-123"));
    set_password("Wanted-Pw-123", "");
    sluice_close(sl);
}

/* Runs body in a child process with SIGPIPE at its default action, so that
 * a SIGPIPE reaching the host kills the child, not the test; returns the
 * child's exit code and fails the test if a signal ended it. */
static int in_child(int (*body)(void))
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        int rc = body();

        fflush(stdout);
        _exit(rc);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the process was killed by signal %d (%s)", WTERMSIG(status),
                 WTERMSIG(status) == SIGPIPE ? "SIGPIPE" : "?");
    return WEXITSTATUS(status);
}

/* 2000 requests of a three-rule composite in one batch, keys of this
 * process; out[i].status of each must be want. With want a failure: the
 * connection is dropped mid-batch, so what was written fails and what was
 * never written goes out on the next connection, within the deadline;
 * some must fail, and then the count returned is 0. Returns the number of
 * requests that did not match. */
static int big_batch(sluice *sl, size_t n, sluice_status want)
{
    static sluice_request reqs[100000];
    static sluice_result outs[100000];
    static char keys[100000][16];
    sluice_ruleset rs;
    sluice_status st;
    size_t i;
    int bad = 0;

    if (sluice_ruleset_parse("fixed:100/1m+sliding:100/1m+log:100/1m", &rs,
                             NULL, 0) != SLUICE_OK)
        return -1;
    for (i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "b%zu", i % 500);
        reqs[i] = (sluice_request){keys[i], strlen(keys[i]), &rs, 1};
    }
    st = sluice_acquire_many(sl, reqs, n, outs);
    for (i = 0; i < n; i++)
        if (want == SLUICE_OK ? outs[i].status != SLUICE_OK
                              : outs[i].status == SLUICE_OK)
            bad++;
    if (want != SLUICE_OK)
        bad = bad < (int)n ? 0 : 1; /* some failed */
    printf("# batch of %zu: status %s, %d requests not %s%s%s\n", n,
           sluice_strerror(st), bad, want == SLUICE_OK ? "OK" : "failed",
           st != SLUICE_OK ? ": " : "",
           st != SLUICE_OK ? sluice_errmsg(sl) : "");
    if (want == SLUICE_OK && st != SLUICE_OK)
        bad++;
    return bad;
}

static int idle_then_batch(void)
{
    /* A deadline for the count, not the speed: under valgrind on CI, the
     * plain backend's batch of 2000 passed a 2 s deadline, and with two
     * busy loops per core beside valgrind 20 s (1,500 of 2,000 answered
     * in the busy fresh-root run): 20 s scaled (400 s under valgrind). */
    char q[64];
    sluice *sl;
    sluice_ruleset rs;
    sluice_result r;
    int bad;

    snprintf(q, sizeof(q), "&timeout_ms=%lld",
             (long long)(20000 * tu_time_scale()));
    sl = open_with(q);

    if (sluice_ruleset_parse("fixed:10/1s", &rs, NULL, 0) != SLUICE_OK ||
        sluice_acquire(sl, "i", 1, &rs, 1, &r) != SLUICE_OK)
        return 10;
    /* The server closes connections idle for over a second. */
    tu_sleep_ms(2600);
    bad = big_batch(sl, 2000, SLUICE_OK);
    /* And a single call after another idle spell. */
    tu_sleep_ms(2600);
    if (sluice_acquire(sl, "i", 1, &rs, 1, &r) != SLUICE_OK) {
        printf("# single call after idle: %s\n", sluice_errmsg(sl));
        bad++;
    }
    sluice_close(sl);
    return bad > 0 ? 1 : 0;
}

/* Nothing of the request was written on a connection the server had
 * closed, so it is reopened and the request sent (once). */
static void a_connection_the_server_closed_while_idle_is_reopened(void **state)
{
    (void)state;
    admin_set("timeout", "1");
    assert_int_equal(in_child(idle_then_batch), 0);
}

/* For ms, kills every client with a part of a request still unread (a
 * big pipeline being written): from a child process. */
static pid_t kill_writers(long ms)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        redisContext *c = redisConnect(host, port);
        int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + ms;

        while (c != NULL && c->err == 0 &&
               tu_clock_ms(CLOCK_MONOTONIC) < until) {
            redisReply *r = redisCommand(c, "CLIENT LIST");
            char *line = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;

            while (line != NULL && *line != '\0') {
                char *end = strchr(line, '\n'), *q = strstr(line, " qbuf=");
                long long id = 0, qbuf = 0;

                if (end != NULL)
                    *end = '\0';
                sscanf(line, "id=%lld", &id);
                if (q != NULL)
                    qbuf = atoll(q + 6);
                if (qbuf > 0) {
                    redisReply *k = redisCommand(c, "CLIENT KILL ID %lld", id);

                    if (k != NULL)
                        freeReplyObject(k);
                }
                line = end != NULL ? end + 1 : NULL;
            }
            if (r != NULL)
                freeReplyObject(r);
            tu_sleep_ms(2);
        }
        if (c != NULL)
            redisFree(c);
        _exit(0);
    }
    return pid;
}

static int dropped_mid_write(void)
{
    sluice *sl = open_with("&timeout_ms=2000");
    pid_t killer = kill_writers(1500);
    int bad = big_batch(sl, 100000, SLUICE_EIO), status;
    sigset_t pending;

    waitpid(killer, &status, 0);
    sluice_close(sl);
    /* No SIGPIPE left pending for the host either. */
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE))
        return 3;
    return bad > 0 ? 1 : 0;
}

/* The server drops the client (CLIENT KILL, again and again) while
 * megabytes of the batch are still being written: the writes meet EPIPE
 * or a reset, which must come back as a status, not as a signal. (A limit
 * on the client's output buffer no longer does it: the engine reads the
 * replies while it writes, so they never pile up.) */
static void
a_connection_dropped_mid_write_is_an_error_not_a_signal(void **state)
{
    (void)state;
    assert_int_equal(in_child(dropped_mid_write), 0);
}

static int restore_server(void **state)
{
    (void)state;
    set_password("Wanted-Pw-123", "");
    admin_set("timeout", "0");
    admin_set("client-output-buffer-limit", "normal 0 0 0");
    admin_set("maxmemory", "0");
    admin("REPLICAOF NO ONE");
    return 0;
}

int main(int argc, char **argv)
{
    char server[300];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_frozen_server_times_out_then_recovers),
        cmocka_unit_test(fail_policies_answer_when_the_server_does_not),
        cmocka_unit_test(foreign_data_under_a_key_is_a_clear_server_error),
        cmocka_unit_test_teardown(server_error_replies_get_the_fail_policy,
                                  restore_server),
        cmocka_unit_test_teardown(
            a_connection_the_server_closed_while_idle_is_reopened,
            restore_server),
        cmocka_unit_test_teardown(
            a_connection_dropped_mid_write_is_an_error_not_a_signal,
            restore_server),
        /* Last, only on redis://: the script cache; a password wanted
         * (redis+multi:// logs in as its own ACL user). */
        cmocka_unit_test(an_emptied_script_cache_falls_back_to_eval),
        cmocka_unit_test_teardown(a_server_that_wants_a_password_says_so,
                                  restore_server),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: test_faults URL|@file\n");
        return 2;
    }
    url = tu_url(argv[1]);
    lua = strncmp(url, "redis://", 8) == 0;
    tu_servers_of(url, server, sizeof(server));
    if ((!lua && strncmp(url, "redis+multi://", 14) != 0) ||
        sscanf(server, "%255[^:]:%d", host, &port) != 2) {
        fprintf(stderr, "test_faults needs a redis:// or redis+multi:// "
                        "URL\n");
        return 2;
    }
    return _cmocka_run_group_tests(
        "test_faults", tests, sizeof(tests) / sizeof(tests[0]) - (lua ? 0 : 2),
        NULL, NULL);
}
