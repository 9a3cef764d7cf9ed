/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_faults.c - a steady load of decisions on a real 6-node
 * cluster while (a) a replica takes over by CLUSTER FAILOVER, (b) a slot
 * holding live limiter keys migrates to another master, (c) a master is
 * killed. Every decision is checked against mem:// on the same schedule:
 * a decision is right, or an error (the key is then set aside, since its
 * outcome is unknown). Also reports the share of decisions each master
 * served:
 *   test_cluster_faults URL DIR */
#include "internal.h"
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#define NKEYS 256
#define NODES 6

static const char *url, *dir;

/* ---- the nodes ---- */

static int node_port(int i)
{
    int port = tu_node_port(dir, i);

    assert_true(port > 0);
    return port;
}

static redisReply *node_cmd(int port, const char *fmt, ...)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = NULL;
    va_list ap;

    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* ROLE of the node on port: 'm' master, 's' replica, 0 unreachable. */
static char node_role(int port, int *master_port)
{
    redisReply *r = node_cmd(port, "ROLE");
    char role = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        role = r->element[0]->str[0] == 'm' ? 'm' : 's';
        if (role == 's' && master_port != NULL)
            *master_port = (int)r->element[2]->integer;
    }
    if (r != NULL)
        freeReplyObject(r);
    return role;
}

static void node_id(int port, char *id, size_t len)
{
    redisReply *r = node_cmd(port, "CLUSTER MYID");

    assert_non_null(r);
    snprintf(id, len, "%s", r->str);
    freeReplyObject(r);
}

/* The port of the master that owns slot. */
static int owner_of(unsigned slot)
{
    int i;

    for (i = 1; i <= NODES; i++) {
        redisReply *r = node_cmd(node_port(i), "CLUSTER SLOTS");
        size_t k;
        int port = 0;

        if (r == NULL)
            continue;
        for (k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];

            if ((unsigned)e->element[0]->integer <= slot &&
                slot <= (unsigned)e->element[1]->integer)
                port = (int)e->element[2]->element[1]->integer;
        }
        freeReplyObject(r);
        if (port != 0)
            return port;
    }
    fail_msg("no node knows the owner of slot %u", slot);
    return 0;
}

/* ---- the load ---- */

static const char *const rule_texts[] = {"fixed:20/1s", "sliding:15/1s",
                                         "log:8/500ms", "token:10/1s,burst=5",
                                         "gcra:20/1s+fixed:100/10s"};
#define NRULES (sizeof(rule_texts) / sizeof(rule_texts[0]))

typedef struct event {
    int64_t at; /* mono ms */
    unsigned slot;
    bool ok;
} event;

static struct {
    atomic_bool stop;
    pthread_mutex_t lock;
    event *events;
    size_t nevents, cap;
    long decisions, errors, wrong;
    char first_error[512], last_error[512];
} load;

static void record(int64_t at, unsigned slot, bool ok)
{
    pthread_mutex_lock(&load.lock);
    if (load.nevents == load.cap) {
        load.cap = load.cap ? load.cap * 2 : 4096;
        load.events = realloc(load.events, load.cap * sizeof(*load.events));
    }
    load.events[load.nevents++] = (event){at, slot, ok};
    pthread_mutex_unlock(&load.lock);
}

static unsigned key_slot(const char *prefix, const char *key)
{
    char k[256];

    snprintf(k, sizeof(k), "%s{%s}:x", prefix, key);
    return sl_slot_of_key(k, strlen(k));
}

static tu_clock lclk;
static char load_prefix[64];

static void *load_thread(void *arg)
{
    sluice_ruleset rs[NRULES];
    sluice *cl = NULL, *mem = NULL;
    sluice_options o;
    char u[700], err[512];
    bool dirty[NKEYS + 1] = {false};
    size_t i, k;

    (void)arg;
    for (i = 0; i < NRULES; i++)
        if (sluice_ruleset_parse(rule_texts[i], &rs[i], NULL, 0) != SLUICE_OK)
            return NULL;
    memset(&o, 0, sizeof(o));
    o.clock = tu_clock_now;
    o.clock_ctx = &lclk;
    o.key_prefix = load_prefix;
    snprintf(u, sizeof(u), "%s?timeout_ms=1000", url);
    if (sluice_open(u, &o, &cl, err, sizeof(err)) != SLUICE_OK ||
        sluice_open("mem://", &o, &mem, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "load: %s\n", err);
        return NULL;
    }
    for (k = 0; !atomic_load(&load.stop); k++) {
        /* Every fourth decision goes to one hot key with a two-key
         * composite, so that a fault on its slot meets many requests. */
        bool hot = k % 4 == 0;
        size_t ki = hot ? NKEYS : k % NKEYS;
        size_t ri = hot ? NRULES - 1 : ki % NRULES;
        char key[32];
        sluice_result a, b;
        sluice_status st;
        int64_t cost = (int64_t)(k % 3) + 1;

        if (hot)
            snprintf(key, sizeof(key), "hot");
        else
            snprintf(key, sizeof(key), "user:%zu", ki);
        lclk.t = tu_clock_ms(CLOCK_REALTIME);
        if (dirty[ki]) {
            /* After an error the key's state is unknown: forget it on both
             * sides before comparing again. */
            if (sluice_reset(cl, key, strlen(key), &rs[ri]) == SLUICE_OK &&
                sluice_reset(mem, key, strlen(key), &rs[ri]) == SLUICE_OK)
                dirty[ki] = false;
            else
                snprintf(load.last_error, sizeof(load.last_error), "reset: %s",
                         sluice_errmsg(cl));
            continue;
        }
        st = sluice_acquire(cl, key, strlen(key), &rs[ri], cost, &a);
        record(tu_clock_ms(CLOCK_MONOTONIC), key_slot(load_prefix, key),
               st == SLUICE_OK);
        pthread_mutex_lock(&load.lock);
        load.decisions++;
        if (st != SLUICE_OK && load.errors++ == 0)
            snprintf(load.first_error, sizeof(load.first_error), "%s",
                     sluice_errmsg(cl));
        if (st != SLUICE_OK)
            snprintf(load.last_error, sizeof(load.last_error), "%s",
                     sluice_errmsg(cl));
        pthread_mutex_unlock(&load.lock);
        if (st != SLUICE_OK) {
            dirty[ki] = true;
            continue;
        }
        if (sluice_acquire(mem, key, strlen(key), &rs[ri], cost, &b) !=
                SLUICE_OK ||
            a.allowed != b.allowed || a.remaining != b.remaining ||
            a.retry_after_ms != b.retry_after_ms ||
            a.reset_after_ms != b.reset_after_ms || a.limit != b.limit) {
            pthread_mutex_lock(&load.lock);
            if (load.wrong++ < 5)
                fprintf(stderr,
                        "wrong decision on %s (%s): cluster %d %lld %lld "
                        "%lld, mem %d %lld %lld %lld\n",
                        key, rule_texts[ri], a.allowed, (long long)a.remaining,
                        (long long)a.retry_after_ms,
                        (long long)a.reset_after_ms, b.allowed,
                        (long long)b.remaining, (long long)b.retry_after_ms,
                        (long long)b.reset_after_ms);
            pthread_mutex_unlock(&load.lock);
        }
        /* About 2000 decisions a second. */
        if (k % 20 == 0)
            tu_sleep_ms(5);
    }
    sluice_close(cl);
    sluice_close(mem);
    return NULL;
}

static pthread_t load_tid;

static void load_start(void)
{
    atomic_store(&load.stop, false);
    pthread_mutex_init(&load.lock, NULL);
    load.nevents = 0;
    load.decisions = load.errors = load.wrong = 0;
    load.first_error[0] = '\0';
    snprintf(load_prefix, sizeof(load_prefix), "cf%ld-%lld:", (long)getpid(),
             (long long)tu_clock_ms(CLOCK_MONOTONIC));
    assert_int_equal(pthread_create(&load_tid, NULL, load_thread, NULL), 0);
}

static void load_stop(void)
{
    atomic_store(&load.stop, true);
    pthread_join(load_tid, NULL);
}

/* Errors after `since` on slots for which affected() holds, and the time
 * from `since` to the first good decision on such a slot after the last
 * error. */
static bool affected[16384]; /* the slots a fault touched */

static void report(const char *what, int64_t since)
{
    size_t i;
    int64_t last_err = 0, first_ok = -1;
    long errs = 0, good_after = 0;

    pthread_mutex_lock(&load.lock);
    for (i = 0; i < load.nevents; i++) {
        const event *e = &load.events[i];

        if (e->at < since || !affected[e->slot])
            continue;
        if (!e->ok) {
            errs++;
            last_err = e->at;
            first_ok = -1;
        } else if (first_ok < 0) {
            first_ok = e->at;
        }
    }
    for (i = 0; i < load.nevents; i++)
        good_after += load.events[i].at >= since && load.events[i].ok;
    printf("# (%s) %ld decisions, %ld errors seen by callers (%ld on the "
           "affected slots), %ld wrong decisions; first good decision on an "
           "affected slot %lld ms after the fault%s\n",
           what, load.decisions, load.errors, errs, load.wrong,
           first_ok < 0 ? -1LL : (long long)(first_ok - since),
           errs ? "" : " (no error at all)");
    if (load.errors > 0)
        printf("#   first error: %s\n#   last error: %s\n", load.first_error,
               load.last_error);
    (void)last_err;
    pthread_mutex_unlock(&load.lock);
    assert_int_equal(load.wrong, 0);
    assert_true(first_ok >= 0);
    assert_true(good_after > 0);
}

/* Marks the slots that the master on port owns now. */
static void mark_slots_of(int port)
{
    redisReply *r = node_cmd(port, "CLUSTER SLOTS");
    size_t k;
    long long s;

    memset(affected, 0, sizeof(affected));
    assert_non_null(r);
    for (k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];

        if (e->element[2]->element[1]->integer != port)
            continue;
        for (s = e->element[0]->integer; s <= e->element[1]->integer; s++)
            affected[s] = true;
    }
    freeReplyObject(r);
}

/* ---- the faults ---- */

static int first_master(void)
{
    int i;

    for (i = 1; i <= NODES; i++)
        if (node_role(node_port(i), NULL) == 'm')
            return node_port(i);
    fail_msg("no master");
    return 0;
}

static int replica_of(int master)
{
    int i, m = 0;

    for (i = 1; i <= NODES; i++)
        if (node_role(node_port(i), &m) == 's' && m == master)
            return node_port(i);
    fail_msg("no replica of %d", master);
    return 0;
}

/* Connections the nodes have accepted so far, all together. */
static long long connections_received(redisContext **c)
{
    long long total = 0;
    int i;

    for (i = 1; i <= NODES; i++) {
        redisReply *r = redisCommand(c[i], "INFO stats");
        const char *p;
        long long n = 0;

        assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
        p = strstr(r->str, "total_connections_received:");
        assert_non_null(p);
        assert_int_equal(sscanf(p, "total_connections_received:%lld", &n), 1);
        total += n;
        freeReplyObject(r);
    }
    return total;
}

/* A new handle connects to the masters its slot map names while it opens,
 * so that its first decisions connect nowhere: over TLS a connect is a
 * handshake of several round trips, which they would pay within their
 * timeout_ms (limiter.cluster_tls timed out so on a loaded machine). One
 * seed only, so that the other masters are known from the map alone. */
static void a_new_handle_connects_the_masters_at_open(void **state)
{
    const char *hosts = strstr(url, "://") + 3, *query = strchr(hosts, '?');
    redisContext *c[NODES + 1];
    sluice_ruleset rs;
    sluice_result r;
    long long before, after;
    char u[2048], key[32];
    sluice *sl;
    int i;

    (void)state;
    snprintf(u, sizeof(u), "redis-cluster://%.*s%s", (int)strcspn(hosts, ",?"),
             hosts, query != NULL ? query : "");
    for (i = 1; i <= NODES; i++) {
        c[i] = redisConnect("127.0.0.1", node_port(i));
        assert_true(c[i] != NULL && !c[i]->err);
    }
    assert_int_equal(sluice_ruleset_parse("fixed:100/1h", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_open(u, NULL, &sl, NULL, 0), SLUICE_OK);
    before = connections_received(c);
    /* 48 keys: on every master (all on two: (2/3)^48 * 3, about 1e-8). */
    for (i = 0; i < 48; i++) {
        snprintf(key, sizeof(key), "fresh:%d", i);
        assert_int_equal(sluice_acquire(sl, key, strlen(key), &rs, 1, &r),
                         SLUICE_OK);
        assert_int_equal(r.status, SLUICE_OK);
    }
    after = connections_received(c);
    sluice_close(sl);
    for (i = 1; i <= NODES; i++)
        redisFree(c[i]);
    printf("# connections made by a new handle's first 48 decisions, on "
           "keys of every master: %lld\n",
           after - before);
    assert_int_equal(after - before, 0);
}

static void every_master_serves_decisions(void **state)
{
    int i, masters = 0;
    long calls[NODES + 1] = {0}, total = 0;

    (void)state;
    for (i = 1; i <= NODES; i++) {
        redisReply *r = node_cmd(node_port(i), "CONFIG RESETSTAT");

        if (r != NULL)
            freeReplyObject(r);
    }
    load_start();
    tu_sleep_ms(2000);
    load_stop();
    for (i = 1; i <= NODES; i++) {
        redisReply *r = node_cmd(node_port(i), "INFO commandstats");
        const char *p;

        if (r == NULL || node_role(node_port(i), NULL) != 'm') {
            if (r != NULL)
                freeReplyObject(r);
            continue;
        }
        masters++;
        for (p = r->str; (p = strstr(p, "cmdstat_eval")) != NULL; p++) {
            long n = 0;

            if (sscanf(strchr(p, ':'), ":calls=%ld", &n) == 1)
                calls[i] += n;
        }
        total += calls[i];
        freeReplyObject(r);
    }
    for (i = 1; i <= NODES; i++)
        if (calls[i] > 0)
            printf("# master 127.0.0.1:%d served %ld of %ld decisions "
                   "(%.1f%%)\n",
                   node_port(i), calls[i], total,
                   100.0 * (double)calls[i] / (double)total);
    assert_int_equal(masters, 3);
    for (i = 1; i <= NODES; i++)
        if (node_role(node_port(i), NULL) == 'm')
            assert_true(calls[i] > 0);
    printf("# load: %ld decisions, %ld errors, %ld wrong\n", load.decisions,
           load.errors, load.wrong);
    assert_int_equal(load.errors, 0);
    assert_int_equal(load.wrong, 0);
}

static void manual_failover_loses_no_decision(void **state)
{
    int master = first_master(), replica = replica_of(master), m = 0;
    int64_t t0, start;
    redisReply *r;

    (void)state;
    load_start();
    tu_sleep_ms(500);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    r = node_cmd(replica, "CLUSTER FAILOVER");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    start = tu_clock_ms(CLOCK_MONOTONIC);
    while (node_role(replica, &m) != 'm' &&
           tu_clock_ms(CLOCK_MONOTONIC) - start < 10000)
        tu_sleep_ms(20);
    assert_int_equal(node_role(replica, NULL), 'm');
    tu_sleep_ms(1500);
    load_stop();
    printf("# (a) CLUSTER FAILOVER on 127.0.0.1:%d (replica of %d): "
           "promoted after %lld ms\n",
           replica, master,
           (long long)(tu_clock_ms(CLOCK_MONOTONIC) - start - 1500));
    mark_slots_of(replica);
    report("a: manual failover", t0);
}

static void migrating_a_live_slot_keeps_decisions_right(void **state)
{
    char src_id[64], dst_id[64], key[64];
    unsigned slot;
    int src, dst = 0, i, moved = 0;
    int64_t t0;
    redisReply *r;

    (void)state;
    load_start();
    tu_sleep_ms(500);
    /* The slot of the hot key, which the load uses all the time. */
    snprintf(key, sizeof(key), "hot");
    slot = key_slot(load_prefix, key);
    src = owner_of(slot);
    for (i = 1; i <= NODES; i++) {
        int p = node_port(i);

        if (p != src && node_role(p, NULL) == 'm') {
            dst = p;
            break;
        }
    }
    node_id(src, src_id, sizeof(src_id));
    node_id(dst, dst_id, sizeof(dst_id));
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    r = node_cmd(dst, "CLUSTER SETSLOT %u IMPORTING %s", slot, src_id);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = node_cmd(src, "CLUSTER SETSLOT %u MIGRATING %s", slot, dst_id);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    /* Move the keys one at a time, slowly, while the load runs. */
    for (;;) {
        redisReply *keys = node_cmd(src, "CLUSTER GETKEYSINSLOT %u 1", slot);

        assert_non_null(keys);
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        r = node_cmd(src, "MIGRATE 127.0.0.1 %d %b 0 5000", dst,
                     keys->element[0]->str, keys->element[0]->len);
        assert_non_null(r);
        if (r->type == REDIS_REPLY_STATUS)
            moved++;
        freeReplyObject(r);
        freeReplyObject(keys);
        tu_sleep_ms(100);
    }
    for (i = 1; i <= NODES; i++) {
        int p = node_port(i);

        if (node_role(p, NULL) == 'm') {
            r = node_cmd(p, "CLUSTER SETSLOT %u NODE %s", slot, dst_id);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    tu_sleep_ms(1000);
    load_stop();
    printf("# (b) slot %u with live keys migrated from 127.0.0.1:%d to "
           "127.0.0.1:%d, %d keys moved one by one in %lld ms\n",
           slot, src, dst, moved,
           (long long)(tu_clock_ms(CLOCK_MONOTONIC) - t0 - 1000));
    assert_true(moved > 0);
    memset(affected, 0, sizeof(affected));
    affected[slot] = true;
    report("b: slot migration", t0);
}

static void a_killed_master_is_replaced(void **state)
{
    int master = first_master(), replica = replica_of(master), i;
    int64_t t0, start;
    char path[512];
    FILE *f;
    long pid = 0;

    (void)state;
    for (i = 1; i <= NODES; i++) {
        if (node_port(i) != master)
            continue;
        snprintf(path, sizeof(path), "%s/n%d/pid", dir, i);
        f = fopen(path, "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%ld", &pid), 1);
        fclose(f);
    }
    load_start();
    tu_sleep_ms(500);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
    start = tu_clock_ms(CLOCK_MONOTONIC);
    while (node_role(replica, NULL) != 'm' &&
           tu_clock_ms(CLOCK_MONOTONIC) - start < 20000)
        tu_sleep_ms(50);
    tu_sleep_ms(1500);
    load_stop();
    printf("# (c) master 127.0.0.1:%d killed; its replica 127.0.0.1:%d took "
           "over after %lld ms\n",
           master, replica,
           (long long)(tu_clock_ms(CLOCK_MONOTONIC) - start - 1500));
    mark_slots_of(replica);
    report("c: master killed", t0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_new_handle_connects_the_masters_at_open),
        cmocka_unit_test(every_master_serves_decisions),
        cmocka_unit_test(manual_failover_loses_no_decision),
        cmocka_unit_test(migrating_a_live_slot_keeps_decisions_right),
        cmocka_unit_test(a_killed_master_is_replaced),
    };

    if (argc != 3) {
        fprintf(stderr, "usage: test_cluster_faults URL DIR\n");
        return 2;
    }
    url = tu_url(argv[1]);
    dir = argv[2];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
