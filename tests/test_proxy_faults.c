/* SPDX-License-Identifier: BSD-3-Clause */
/* test_proxy_faults.c - one Redis behind twemproxy is killed during a run
 * of decisions, then started again: calls on its keys return a clear error
 * within the timeout (no hang, no crash), calls on the other server's keys
 * go on, and all succeed again once it is back. And a server that closes
 * the proxy's connection with a request in flight, which the proxy answers
 * "ERR unknown": the proxy's failure, not the server's error:
 *   test_proxy_faults URL SERVERS_SCRIPT DIR */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

static const char *url, *script, *dir;

static void servers_script(const char *verb, int n)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "'%s' %s '%s' %d >/dev/null", script, verb, dir,
             n);
    assert_int_equal(system(cmd), 0);
}

/* Which server (1 or 2) holds key K's fixed-window counter. */
static int server_of(const char *prefix, const char *key)
{
    char path[512], line[128], pattern[256];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "%s/servers", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    snprintf(pattern, sizeof(pattern), "%s{%s}:*", prefix, key);
    while (fgets(line, sizeof(line), f) != NULL) {
        char host[64];
        int port;
        redisContext *c;
        redisReply *r;

        n++;
        if (sscanf(line, "%63[^:]:%d", host, &port) != 2)
            continue;
        c = redisConnect(host, port);
        assert_non_null(c);
        r = redisCommand(c, "KEYS %s", pattern);
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
            freeReplyObject(r);
            redisFree(c);
            fclose(f);
            return n;
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
    }
    fclose(f);
    return 0;
}

static void a_killed_server_fails_fast_and_recovers(void **state)
{
    char u[700], prefix[64], keys[3][32];
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl;
    int64_t t_kill = 0, t_err = 0, t_revive = 0, t_ok = 0, slowest = 0;
    int i, found = 0, errors = 0, other_ok = 0;

    (void)state;
    snprintf(prefix, sizeof(prefix), "pf%ld:", (long)getpid());
    snprintf(u, sizeof(u), "%s?timeout_ms=1000&prefix=%s", url, prefix);
    assert_int_equal(sluice_ruleset_parse("fixed:1000000/1d", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_open(u, NULL, &sl, NULL, 0), SLUICE_OK);
    /* One key on each server. */
    memset(keys, 0, sizeof(keys));
    for (i = 0; i < 100 && found < 2; i++) {
        char k[32];
        int s;

        snprintf(k, sizeof(k), "%c%d", 'a' + i % 26, i);
        assert_int_equal(sluice_acquire(sl, k, strlen(k), &rs, 1, &r),
                         SLUICE_OK);
        s = server_of(prefix, k);
        if (s > 0 && keys[s][0] == '\0') {
            snprintf(keys[s], sizeof(keys[s]), "%s", k);
            found++;
        }
    }
    assert_int_equal(found, 2);
    /* Decisions every 20 ms on both keys; kill server 2 at 0.5 s, start
     * it again 2 s later; stop once its key succeeds again (15 s cap). */
    {
        int64_t start = tu_clock_ms(CLOCK_MONOTONIC);

        for (i = 0; tu_clock_ms(CLOCK_MONOTONIC) - start < 15000; i++) {
            int64_t now = tu_clock_ms(CLOCK_MONOTONIC), took;
            tu_mark t0;
            sluice_status st;

            if (t_kill == 0 && now - start >= 500) {
                servers_script("kill", 2);
                t_kill = tu_clock_ms(CLOCK_MONOTONIC);
            }
            if (t_kill != 0 && t_revive == 0 && now - t_kill >= 2000) {
                servers_script("revive", 2);
                t_revive = tu_clock_ms(CLOCK_MONOTONIC);
            }
            /* Without the thread's waits for a CPU (tu_mark). */
            t0 = tu_mark_now();
            st = sluice_acquire(sl, keys[2], strlen(keys[2]), &rs, 1, &r);
            took = (int64_t)tu_net_ms(t0, tu_mark_now());
            slowest = took > slowest ? took : slowest;
            if (st != SLUICE_OK) {
                /* A clear status and a message naming the proxy. */
                if (st != SLUICE_EIO && st != SLUICE_ETIMEOUT &&
                    st != SLUICE_ECONNECT)
                    fail_msg("unexpected status %s: %s", sluice_strerror(st),
                             sluice_errmsg(sl));
                if (t_kill == 0)
                    fail_msg("error before the kill: %s", sluice_errmsg(sl));
                if (errors++ == 0) {
                    t_err = tu_clock_ms(CLOCK_MONOTONIC);
                    printf("# first error: %s\n", sluice_errmsg(sl));
                }
            } else if (t_revive != 0) {
                t_ok = tu_clock_ms(CLOCK_MONOTONIC);
                break;
            }
            if (sluice_acquire(sl, keys[1], strlen(keys[1]), &rs, 1, &r) ==
                SLUICE_OK)
                other_ok++;
            else
                fail_msg("the healthy server's key failed: %s",
                         sluice_errmsg(sl));
            tu_sleep_ms(20);
        }
    }
    sluice_close(sl);
    printf("# %s: killed server 2; first error after %lld ms, %d errors, "
           "slowest call %lld ms; server 1 answered all %d calls; first "
           "success %lld ms after the restart\n",
           url, (long long)(t_err - t_kill), errors, (long long)slowest,
           other_ok, (long long)(t_ok - t_revive));
    assert_true(errors > 0);
    assert_true(t_ok != 0);
    assert_true(slowest < 3000);
}

/* The address of server n (1 or 2) from DIR/servers. */
static void server_addr(int n, char *host, size_t host_len, int *port)
{
    char path[512], line[128], h[64];
    FILE *f;
    int i = 0;

    snprintf(path, sizeof(path), "%s/servers", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (++i == n && sscanf(line, "%63[^:]:%d", h, port) == 2) {
            snprintf(host, host_len, "%s", h);
            fclose(f);
            return;
        }
    fclose(f);
    fail_msg("no server %d in %s", n, path);
}

typedef struct closer {
    const char *host;
    int port;
    bool closed; /* it saw the request held and closed its client */
} closer;

/* The id of the client whose request the server holds (flags=b in
 * CLIENT LIST), 0 when none. */
static long long held_client(redisContext *c)
{
    redisReply *r = redisCommand(c, "CLIENT LIST");
    long long id = 0;
    const char *line;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        for (line = r->str; line != NULL && id == 0;
             line = strchr(line + 1, '\n')) {
            const char *end = strchr(line + 1, '\n');
            const char *b = strstr(line, " flags=b ");

            if (b != NULL && (end == NULL || b < end) &&
                sscanf(line + (*line == '\n'), "id=%lld", &id) != 1)
                id = 0;
        }
    if (r != NULL)
        freeReplyObject(r);
    return id;
}

/* Waits until the server holds a client's request (CLIENT PAUSE WRITE
 * blocks it after reading it), then closes that client: the proxy's
 * connection ends with the request read and unanswered, by a FIN, so that
 * nutcracker answers "ERR unknown" (its message for a failure with no
 * errno). */
static void *close_when_held(void *arg)
{
    closer *k = arg;
    redisContext *c = redisConnect(k->host, k->port);
    int i;

    for (i = 0; c != NULL && !c->err && i < 1000; i++) {
        long long id = held_client(c);

        if (id > 0) {
            redisReply *r = redisCommand(c, "CLIENT KILL ID %lld", id);

            k->closed =
                r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        tu_sleep_ms(2);
    }
    if (c != NULL)
        redisFree(c);
    return NULL;
}

/* nutcracker answers "-ERR unknown" for the requests in flight on a server
 * connection that ended without an errno (the server closed it, as a
 * server being killed or restarted may): that is the proxy failing to
 * reach the server (SLUICE_EIO, so the fail policy answers), not an error
 * of Redis's own, which would be SLUICE_ESERVER. */
static void a_request_the_proxy_lost_is_not_a_server_error(void **state)
{
    char u[700], prefix[64], keys[3][32], host[64];
    sluice_ruleset rs;
    sluice_result r;
    sluice_status st;
    redisContext *c;
    redisReply *rep;
    pthread_t th;
    closer k = {NULL, 0, false};
    sluice *sl;
    int i, found = 0, port = 0;

    (void)state;
    snprintf(prefix, sizeof(prefix), "pl%ld:", (long)getpid());
    snprintf(u, sizeof(u), "%s?timeout_ms=5000&prefix=%s", url, prefix);
    assert_int_equal(sluice_ruleset_parse("fixed:1000000/1d", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_open(u, NULL, &sl, NULL, 0), SLUICE_OK);
    memset(keys, 0, sizeof(keys));
    for (i = 0; i < 100 && keys[2][0] == '\0'; i++) {
        char key[32];

        snprintf(key, sizeof(key), "%c%d", 'a' + i % 26, i);
        assert_int_equal(sluice_acquire(sl, key, strlen(key), &rs, 1, &r),
                         SLUICE_OK);
        if (server_of(prefix, key) == 2) {
            snprintf(keys[2], sizeof(keys[2]), "%s", key);
            found++;
        }
    }
    assert_int_equal(found, 1);
    server_addr(2, host, sizeof(host), &port);
    c = redisConnect(host, port);
    assert_true(c != NULL && !c->err);
    /* Held for 3 s at most, should the test end early. */
    rep = redisCommand(c, "CLIENT PAUSE 3000 WRITE");
    assert_true(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    k.host = host;
    k.port = port;
    assert_int_equal(pthread_create(&th, NULL, close_when_held, &k), 0);
    st = sluice_acquire(sl, keys[2], strlen(keys[2]), &rs, 1, &r);
    pthread_join(th, NULL);
    rep = redisCommand(c, "CLIENT UNPAUSE");
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(c);
    printf("# the server closed the proxy's connection mid-request: %s: %s\n",
           sluice_strerror(st), sluice_errmsg(sl));
    assert_true(k.closed);
    if (st != SLUICE_EIO)
        fail_msg("expected SLUICE_EIO, got %s: %s", sluice_strerror(st),
                 sluice_errmsg(sl));
    assert_non_null(strstr(sluice_errmsg(sl), "cannot reach"));
    assert_non_null(strstr(sluice_errmsg(sl), "ERR unknown"));
    /* The proxy connects again: the next decision is made. */
    assert_int_equal(sluice_acquire(sl, keys[2], strlen(keys[2]), &rs, 1, &r),
                     SLUICE_OK);
    sluice_close(sl);
}

/* Whatever happened, leave server 2 running for the tests after us. */
static int revive_if_dead(void **state)
{
    char path[512];
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/r2/pid", dir);
    f = fopen(path, "r");
    if (f != NULL)
        fclose(f);
    else
        servers_script("revive", 2);
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_request_the_proxy_lost_is_not_a_server_error),
        cmocka_unit_test_teardown(a_killed_server_fails_fast_and_recovers,
                                  revive_if_dead),
    };

    if (argc != 4) {
        fprintf(stderr, "usage: test_proxy_faults URL SCRIPT DIR\n");
        return 2;
    }
    url = tu_url(argv[1]);
    script = argv[2];
    dir = argv[3];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
