/* SPDX-License-Identifier: BSD-3-Clause */
/* test_noscript.c - a cold script cache under an async load: after SCRIPT
 * FLUSH, a thousand decisions in flight on one handle load the script once
 * per connection (one EVAL), resend the rest by EVALSHA, and none ends in
 * SLUICE_ETIMEOUT. Counted with INFO commandstats on every server.
 *   test_noscript own              a redis-server of the test's own
 *   test_noscript URL SERVERS      a cluster (SERVERS: "host:port,..."
 *                                  or @file), shared with other tests */
#include "sluice.h"

#include "testutil.h"

#include <poll.h>

#define N        1000
#define MAX_SRVS 16

typedef struct tally {
    size_t done, ok, timeouts, other;
    sluice_status first_bad;
} tally;

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    tally *t = arg;

    (void)n;
    t->done++;
    if (st == SLUICE_OK && res[0].status == SLUICE_OK) {
        t->ok++;
        return;
    }
    if (st == SLUICE_ETIMEOUT)
        t->timeouts++;
    else
        t->other++;
    if (t->first_bad == SLUICE_OK) {
        t->first_bad = st;
        fprintf(stderr, "a decision ended in %s: %s\n", sluice_status_name(st),
                sluice_errmsg(sl));
    }
}

/* "host:port,host:port" into hosts and ports. */
static size_t split_servers(const char *list, char hosts[][64], int *ports)
{
    size_t n = 0;
    const char *p = list;

    while (*p != '\0' && n < MAX_SRVS) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);

        if (colon != NULL && (size_t)(colon - p) < 64) {
            snprintf(hosts[n], 64, "%.*s", (int)(colon - p), p);
            ports[n] = atoi(colon + 1);
            n++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n;
}

/* Runs cmd on every server; with count, returns the calls of EVAL and of
 * SCRIPT LOAD that INFO commandstats reports, summed; -1 on failure. */
static long on_servers(char hosts[][64], const int *ports, size_t n,
                       const char *cmd, bool count)
{
    long total = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        redisContext *c = redisConnect(hosts[i], ports[i]);
        redisReply *r = c != NULL && c->err == 0 ? redisCommand(c, cmd) : NULL;
        const char *names[] = {
            "cmdstat_eval:calls=", "cmdstat_script|load:calls=",
            "cmdstat_script:calls="};
        bool bad = r == NULL || r->type == REDIS_REPLY_ERROR;
        size_t k;

        if (bad)
            fprintf(stderr, "%s on %s:%d failed: %s\n", cmd, hosts[i], ports[i],
                    r != NULL   ? r->str
                    : c != NULL ? c->errstr
                                : "no memory");
        for (k = 0; !bad && count && k < 3; k++) {
            const char *at =
                r->type == REDIS_REPLY_STRING ? strstr(r->str, names[k]) : NULL;

            if (at != NULL)
                total += atol(at + strlen(names[k]));
        }
        if (r != NULL)
            freeReplyObject(r);
        if (c != NULL)
            redisFree(c);
        if (bad)
            return -1;
    }
    return total;
}

int main(int argc, char **argv)
{
    static char hosts[MAX_SRVS][64];
    int ports[MAX_SRVS];
    const char *slow = getenv("SLUICE_TEST_SLOW");
    /* Under valgrind and the sanitizers the client is several times
     * slower: give the decisions 10 s there (CMake sets the variable). */
    const char *query =
        slow != NULL && slow[0] == '1' ? "?timeout_ms=10000" : "";
    char url[1200], err[512], key[32];
    sluice_ruleset rules;
    sluice_options o;
    sluice_loop lp;
    sluice_result res;
    tu_poll l;
    tally t = {0};
    sluice *sl = NULL;
    pid_t own = 0;
    size_t nsrv, i;
    long before, evals;
    int64_t t0, ms;
    int rc = 1, port = 0;

    if (argc == 2 && strcmp(argv[1], "own") == 0) {
        if ((port = tu_free_port()) == 0 || (own = tu_start_redis(port)) < 0) {
            fprintf(stderr, "cannot start a redis-server of my own\n");
            return 1;
        }
        snprintf(url, sizeof(url), "redis://127.0.0.1:%d%s", port, query);
        snprintf(hosts[0], sizeof(hosts[0]), "127.0.0.1");
        ports[0] = port;
        nsrv = 1;
    } else if (argc == 3) {
        snprintf(url, sizeof(url), "%s%s", tu_url(argv[1]), query);
        nsrv = split_servers(tu_url(argv[2]), hosts, ports);
    } else {
        fprintf(stderr, "usage: test_noscript own | URL SERVERS\n");
        return 2;
    }
    sluice_options_init(&o);
    o.key_prefix = "noscript:";
    if (sluice_ruleset_parse("fixed:1000/1h", &rules, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "open %s: %s\n", url, err);
        goto out;
    }
    /* Warm: the script cached, a connection to every node that owns one
     * of the keys. */
    for (i = 0; i < N; i += 50) {
        int len = snprintf(key, sizeof(key), "k%zu", i);

        if (sluice_peek(sl, key, (size_t)len, &rules, 1, &res) != SLUICE_OK) {
            fprintf(stderr, "peek: %s\n", sluice_errmsg(sl));
            goto out;
        }
    }
    if (on_servers(hosts, ports, nsrv, "SCRIPT FLUSH", false) < 0 ||
        (before = on_servers(hosts, ports, nsrv, "INFO commandstats", true)) <
            0)
        goto out;
    tu_poll_init(&l);
    lp = tu_poll_loop(&l);
    if (sluice_attach(sl, &lp) != SLUICE_OK) {
        fprintf(stderr, "attach: %s\n", sluice_errmsg(sl));
        goto out;
    }
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    for (i = 0; i < N; i++) {
        int len = snprintf(key, sizeof(key), "k%zu", i);

        if (sluice_acquire_async(sl, key, (size_t)len, &rules, 1, on_done,
                                 &t) != SLUICE_OK) {
            fprintf(stderr, "acquire_async: %s\n", sluice_errmsg(sl));
            goto out;
        }
    }
    while (t.done < N && tu_clock_ms(CLOCK_MONOTONIC) - t0 < 60000)
        tu_poll_turn(sl, &l, 100);
    ms = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    if ((evals = on_servers(hosts, ports, nsrv, "INFO commandstats", true)) < 0)
        goto out;
    evals -= before;
    printf("%zu decisions after SCRIPT FLUSH on %zu server(s): %zu ok, %zu "
           "timed out, %zu other failures, %ld EVAL or SCRIPT calls, %lld "
           "ms\n",
           t.done, nsrv, t.ok, t.timeouts, t.other, evals, (long long)ms);
    rc = 0;
    if (t.done != N || t.ok != N) {
        fprintf(stderr, "FAIL: every decision must be decided\n");
        rc = 1;
    }
    /* One EVAL per connection; on a shared cluster other tests' handles
     * may load the script too, once per connection each. */
    if (evals < 1 || evals > (own ? 1 : (long)nsrv + 8)) {
        fprintf(stderr,
                "FAIL: %ld EVAL or SCRIPT calls; the script must load once "
                "per connection\n",
                evals);
        rc = 1;
    }
out:
    sluice_close(sl);
    tu_kill(&own);
    return rc;
}
