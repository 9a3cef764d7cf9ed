/* SPDX-License-Identifier: BSD-3-Clause */
/* limits_file_kit.h - what tests/test_limits_file.c and
 * tests/test_limits_reload.c share: the limits file they write, handles on
 * one store under a prefix of their own, the store emptied as a Redis
 * restarted empty, and their main. */
#ifndef SL_LIMITS_FILE_KIT_H
#define SL_LIMITS_FILE_KIT_H

#include "testutil.h"

#include <event2/event.h>
#include <pthread.h>
#include <setjmp.h>
#include <sluice/libevent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h>

#define T0 (28333334LL * 60000 + 1800000) /* mid-hour: no window ends */

static const char *url;
static char shared_url[1100]; /* mem://: a store the handles share */
static char servers[2048];
static char dir[256];
static tu_clock clk = {T0};

/* The file most cases use: "api" kept until deleted, with three
 * overrides; "login" with a keep-alive and a policy; "many" with 70
 * overrides (three round trips' batches). */
static void write_file(const char *path, const char *api_rules,
                       const char *api_policy)
{
    FILE *f = fopen(path, "w");
    int i;

    assert_non_null(f);
    fprintf(f,
            "version: 1\n"
            "limiters:\n"
            "  - name: api\n"
            "    rules: \"%s\"\n"
            "%s"
            "    overrides:\n"
            "      - {client: vip, rules: unlimited}\n"
            "      - {client: bot, rules: deny}\n"
            "      - {client: partner, rules: \"fixed:5/1h\"}\n"
            "  - name: login\n"
            "    rules: \"fixed:2/1h\"\n"
            "    keepalive_ms: 600000\n"
            "    policy: {fail: open}\n"
            "  - name: many\n"
            "    rules: \"fixed:7/1h\"\n"
            "    overrides:\n",
            api_rules, api_policy);
    for (i = 0; i < 70; i++)
        fprintf(f, "      - {client: m%02d, rules: \"fixed:1/1h\"}\n", i);
    assert_int_equal(fclose(f), 0);
}

static const char *path_of(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *b = bufs[next++ % 4];

    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return b;
}

/* A handle on the test's store under prefix tag, with file (NULL: none),
 * reading the rules with every decision unless cache_ms says. */
static sluice *open_tagged(const char *tag, const char *file, int64_t cache_ms,
                           char *err, size_t err_len, sluice_status *st)
{
    char prefix[64];
    sluice_options o;
    sluice *sl = NULL;

    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.connect_timeout_ms = 2000 * TU_TIME_SCALE;
    o.rules_cache_ms = cache_ms;
    snprintf(prefix, sizeof(prefix), "lf%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    o.limits_file = file;
    *st = sluice_open(shared_url, &o, &sl, err, err_len);
    return sl;
}

static sluice *open_ok(const char *tag, const char *file, int64_t cache_ms)
{
    char err[512];
    sluice_status st;
    sluice *sl = open_tagged(tag, file, cache_ms, err, sizeof(err), &st);

    if (st != SLUICE_OK)
        fail_msg("open %s (%s): %s", shared_url, tag, err);
    return sl;
}

/* Every key under the tag's prefix deleted on every server, as a Redis
 * restarted empty; on mem:// (one store in this process) the file's
 * limiters deleted through plain, with their overrides. */
static void empty_store(sluice *plain, const char *tag)
{
    char list[2048], *save = NULL, *hp, prefix[80];

    if (servers[0] == '\0') {
        (void)sluice_limiter_delete(plain, "api", 3);
        (void)sluice_limiter_delete(plain, "login", 5);
        (void)sluice_limiter_delete(plain, "many", 4);
        return;
    }
    snprintf(prefix, sizeof(prefix), "lf%ld-%s:*", (long)getpid(), tag);
    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",\n", &save); hp != NULL;
         hp = strtok_r(NULL, ",\n", &save)) {
        char host[256], cursor[32] = "0";
        int port;
        redisContext *c;
        redisReply *r;

        if (sscanf(hp, "%255[^:]:%d", host, &port) != 2)
            continue;
        c = redisConnect(host, port);
        assert_true(c != NULL && c->err == 0);
        do {
            size_t i;

            r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor, prefix);
            assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
            snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
            for (i = 0; i < r->element[1]->elements; i++) {
                redisReply *k = r->element[1]->element[i];
                /* A replica refuses (READONLY): its master's DEL reaches
                 * it. */
                redisReply *d = redisCommand(c, "DEL %b", k->str, k->len);

                if (d != NULL)
                    freeReplyObject(d);
            }
            freeReplyObject(r);
        } while (strcmp(cursor, "0") != 0);
        redisFree(c);
    }
}

static sluice_result acquire(sluice *sl, const char *name, const char *client)
{
    sluice_result r;
    sluice_status st;

    memset(&r, 0, sizeof(r));
    st = sluice_limiter_acquire(sl, name, strlen(name), client,
                                client != NULL ? strlen(client) : 0, 1, &r);
    if (st != SLUICE_OK)
        fail_msg("acquire %s/%s: %s: %s", name, client ? client : "",
                 sluice_strerror(st), sluice_errmsg(sl));
    return r;
}

/* The answers of the file's limiters, first decisions on an empty store
 * (a, in the order of check_first's subjects). */
static int cleanup(void **state)
{
    char cmd[400];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Reads the arguments (URL|@file [--servers LIST|@file]) and runs the
 * tests; the last local ones need no server of the run's (run once, on
 * mem://). */
static int kit_main(int argc, char **argv, const char *name,
                    const struct CMUnitTest *tests, size_t n, size_t local)
{
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL|@file [--servers LIST|@file]\n", name);
        return 2;
    }
    url = tu_url(argv[1]);
    tu_servers_of(url, servers, sizeof(servers));
    for (i = 2; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--servers") == 0)
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[i + 1]));
    /* mem://: one store shared by this process's handles, by name. */
    if (strncmp(url, "mem://", 6) == 0 && (url[6] == '\0' || url[6] == '?'))
        snprintf(shared_url, sizeof(shared_url), "mem://lf%ld%s",
                 (long)getpid(), url + 6);
    else
        snprintf(shared_url, sizeof(shared_url), "%s", url);
    snprintf(dir, sizeof(dir), "/tmp/sluice-%s-%ld", name, (long)getpid());
    if (mkdir(dir, 0700) != 0)
        return 1;
    if (servers[0] != '\0')
        n -= local;
    return _cmocka_run_group_tests(name, tests, n, NULL, cleanup);
}

#endif /* SL_LIMITS_FILE_KIT_H */
