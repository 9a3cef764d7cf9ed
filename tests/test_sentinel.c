/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel.c - redis+sentinel:// and redis+multi+sentinel:// against
 * real sentinels (tests/servers/sentinel.sh: a master, two replicas, three
 * sentinels): discovery on both schemes; bad input (an unknown master, the
 * sentinels down, a wrong sentinel password, a frozen sentinel listed
 * first); a planned failover (SENTINEL FAILOVER) and a killed master under
 * load from threads, every answer a decision or the fail policy's, the
 * time from the failover to the first good decision printed; every key on
 * every node with a TTL. The failovers change the fixture: the tests run
 * in order.
 *   test_sentinel DIR    the fixture's directory */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define DATA_PW     "data-pw"
#define SENTINEL_PW "sentinel-pw"
#define THREADS     4

static const char *dir;
static char url[1024], url_multi[1024], sentinels[512], master_name[128];

static void read_file(const char *name, char *buf, size_t len)
{
    char path[512];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "r")) == NULL)
        fail_msg("cannot read %s: was the fixture started?", path);
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
}

/* A connection to 127.0.0.1:port, authenticated with pw. */
static redisContext *admin(int port, const char *pw)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r;

    if (c == NULL || c->err)
        fail_msg("cannot connect to 127.0.0.1:%d", port);
    r = redisCommand(c, "AUTH %s", pw);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        fail_msg("AUTH refused by 127.0.0.1:%d", port);
    freeReplyObject(r);
    return c;
}

/* A node's plain port (the fixture's own checks) from the port clients
 * reach it at (its TLS port under sentinel-tls.sh). */
static int plain_port(int client_port)
{
    char path[64], buf[32];
    int i;

    for (i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "node-%d/client-port", i);
        read_file(path, buf, sizeof(buf));
        if (atoi(buf) == client_port) {
            snprintf(path, sizeof(path), "node-%d/port", i);
            read_file(path, buf, sizeof(buf));
            return atoi(buf);
        }
    }
    fail_msg("no node answers clients at port %d", client_port);
    return 0;
}

static int sentinel_port(int i)
{
    char buf[32], name[32];

    snprintf(name, sizeof(name), "sentinel-%d/port", i);
    read_file(name, buf, sizeof(buf));
    return atoi(buf);
}

/* The master's port as sentinel i sees it now. */
static int master_port(int i)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r =
        redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", master_name);
    int port = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        port = atoi(r->element[1]->str);
    freeReplyObject(r);
    redisFree(c);
    return port;
}

static sluice *open_url(const char *u, const char *query)
{
    char full[1200], err[512];
    sluice *sl = NULL;

    snprintf(full, sizeof(full), "%s%s%s", u,
             query[0] == '\0'         ? ""
             : strchr(u, '?') != NULL ? "&"
                                      : "?",
             query);
    if (sluice_open(full, NULL, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open: %s", err);
    return sl;
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

/* Every key of the tests on every data node has a TTL. */
static void check_ttls(void)
{
    char path[64], buf[32];
    int i;

    for (i = 0; i < 3; i++) {
        redisContext *c;
        redisReply *r;
        size_t k;

        snprintf(path, sizeof(path), "node-%d/port", i);
        read_file(path, buf, sizeof(buf));
        c = redisConnect("127.0.0.1", atoi(buf));
        if (c == NULL || c->err) {
            if (c != NULL)
                redisFree(c);
            continue; /* the node killed by a test */
        }
        freeReplyObject(redisCommand(c, "AUTH %s", DATA_PW));
        r = redisCommand(c, "KEYS sluice:*");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        for (k = 0; k < r->elements; k++) {
            redisReply *t = redisCommand(c, "PTTL %b", r->element[k]->str,
                                         r->element[k]->len);

            if (t == NULL || t->integer == -1)
                fail_msg("key %s on node %d has no TTL", r->element[k]->str, i);
            freeReplyObject(t);
        }
        freeReplyObject(r);
        redisFree(c);
    }
}

static void discovers_the_master_on_both_schemes(void **state)
{
    const char *urls[2] = {url, url_multi};
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_result r;
    int i;

    (void)state;
    for (i = 0; i < 2; i++) {
        sluice *sl = open_url(urls[i], "timeout_ms=1000");

        memset(&r, 0, sizeof(r));
        if (sluice_acquire(sl, "disc", 4, &rs, 1, &r) != SLUICE_OK)
            fail_msg("acquire through %s: %s", i ? "multi" : "evalsha",
                     sluice_errmsg(sl));
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 9 - i);
        sluice_close(sl);
    }
    check_ttls();
}

/* A clear status and message, never a stall or a secret. */
static void bad_input_is_a_clear_error(void **state)
{
    sluice_ruleset rs = rules("fixed:10/1m");
    sluice_result r;
    sluice *sl;
    char u[1200];
    const char *at;
    int64_t t0, took;
    pid_t frozen;

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
    sl = open_url(u, "timeout_ms=1000");
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ECONNECT);
    assert_non_null(strstr(sluice_errmsg(sl), "does not know a master"));
    sluice_close(sl);
    /* Sentinels that are all down. */
    sl = open_url("redis+sentinel://127.0.0.1:1,127.0.0.1:2/m", "");
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ECONNECT);
    assert_non_null(strstr(sluice_errmsg(sl), "127.0.0.1:2 cannot connect"));
    sluice_close(sl);
    /* A wrong sentinel password: refused, and never shown. */
    snprintf(u, sizeof(u), "%.*s", (int)sizeof(u) - 1, url);
    memcpy(strstr(u, SENTINEL_PW), "TopSecret99", 11);
    sl = open_url(u, "timeout_ms=1000");
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_ECONNECT);
    assert_non_null(strstr(sluice_errmsg(sl), "WRONGPASS"));
    assert_null(strstr(sluice_errmsg(sl), "TopSecret"));
    sluice_close(sl);
    /* The first sentinel frozen: the others answer within the connect's
     * time, of which it takes only its share. */
    frozen = 0;
    {
        char path[512], buf[32];

        snprintf(path, sizeof(path), "sentinel-1/pid");
        read_file(path, buf, sizeof(buf));
        frozen = (pid_t)atoi(buf);
    }
    assert_int_equal(kill(frozen, SIGSTOP), 0);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    sl = open_url(url, "timeout_ms=2000&connect_timeout_ms=900");
    memset(&r, 0, sizeof(r));
    if (sluice_acquire(sl, "frozen", 6, &rs, 1, &r) != SLUICE_OK)
        fail_msg("with the first sentinel frozen: %s", sluice_errmsg(sl));
    took = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    kill(frozen, SIGCONT);
    print_message("first sentinel frozen: opened and decided in %lld ms "
                  "(its share of connect_timeout_ms=900: 300)\n",
                  (long long)took);
    assert_true(r.allowed);
    assert_true(took >= 300 && took < 900 * (int64_t)tu_time_scale());
    sluice_close(sl);
}

/* Load from threads on one handle while the master changes: every
 * decision on one key, so that the count the new master holds tells how
 * many acknowledged decisions the failover lost. */
typedef struct load {
    sluice *sl;
    const char *key;
    pthread_mutex_t mu; /* over every field below */
    int stop;
    int64_t t0; /* the failover's start (monotonic) */
    long decided, policy, other, by_status[32];
    int64_t first_fail, last_good, max_gap; /* ms after t0; -1 none */
    char other_msg[256], policy_msg[256];
} load;

static void *hammer(void *arg)
{
    load *l = arg;
    sluice_ruleset rs = rules("fixed:1000000000/1h");

    for (;;) {
        sluice_result r;
        sluice_status st;
        int64_t at;

        pthread_mutex_lock(&l->mu);
        if (l->stop) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        pthread_mutex_unlock(&l->mu);
        memset(&r, 0, sizeof(r));
        st = sluice_acquire(l->sl, l->key, strlen(l->key), &rs, 1, &r);
        pthread_mutex_lock(&l->mu);
        at = l->t0 > 0 ? tu_clock_ms(CLOCK_MONOTONIC) - l->t0 : -1;
        if (st == SLUICE_OK && r.status == SLUICE_OK && r.allowed) {
            l->decided++;
            if (at >= 0) {
                if (at - (l->last_good >= 0 ? l->last_good : 0) > l->max_gap)
                    l->max_gap = at - (l->last_good >= 0 ? l->last_good : 0);
                l->last_good = at;
            }
        } else if (st == SLUICE_OK &&
                   (r.status == SLUICE_ECONNECT || r.status == SLUICE_EIO ||
                    r.status == SLUICE_ETIMEOUT ||
                    r.status == SLUICE_ESERVER) &&
                   r.allowed) {
            /* fail=open's answer, its status the failure */
            l->policy++;
            l->by_status[r.status % 32]++;
            snprintf(l->policy_msg, sizeof(l->policy_msg), "%s",
                     sluice_errmsg(l->sl));
            if (at >= 0 && l->first_fail < 0)
                l->first_fail = at;
        } else {
            l->other++;
            snprintf(l->other_msg, sizeof(l->other_msg), "%s (%s)",
                     sluice_strerror(st != SLUICE_OK ? st : r.status),
                     sluice_errmsg(l->sl));
        }
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

/* The count the master now holds for key: every window's. */
static long long counted(const char *key)
{
    redisContext *c = admin(plain_port(master_port(2)), DATA_PW);
    redisReply *r = redisCommand(c, "KEYS sluice:{%s}:*", key);
    long long sum = 0;
    size_t k;

    assert_non_null(r);
    for (k = 0; k < r->elements; k++) {
        redisReply *v =
            redisCommand(c, "GET %b", r->element[k]->str, r->element[k]->len);

        if (v != NULL && v->type == REDIS_REPLY_STRING)
            sum += atoll(v->str);
        freeReplyObject(v);
    }
    freeReplyObject(r);
    redisFree(c);
    return sum;
}

/* Until the master has a replica in sync and every sentinel names it:
 * a failover needs a replica to promote. */
static void wait_settled(void)
{
    int64_t end = tu_clock_ms(CLOCK_MONOTONIC) + 20000;

    for (;;) {
        int m = master_port(1);
        bool ok = m != 0 && m == master_port(2) && m == master_port(3);

        if (ok) {
            redisContext *c = admin(plain_port(m), DATA_PW);
            redisReply *r = redisCommand(c, "INFO replication");

            ok = r != NULL && r->str != NULL &&
                 strstr(r->str, "state=online") != NULL;
            freeReplyObject(r);
            redisFree(c);
        }
        if (ok)
            return;
        if (tu_clock_ms(CLOCK_MONOTONIC) > end)
            fail_msg("the sentinels did not settle on a master with a "
                     "replica in sync in 20 s");
        tu_sleep_ms(100);
    }
}

static void planned(int old);

/* Runs the load on u, starts the failover with how (after 300 ms), and
 * waits until the sentinels name another master and decisions have been
 * good again for a second. */
static void failover_under_load(const char *u, const char *name,
                                const char *key, void (*how)(int old_port))
{
    load l;
    pthread_t th[THREADS];
    int old = master_port(2), i;
    int64_t end, again;
    long long held;

    wait_settled();
    old = master_port(2);
    memset(&l, 0, sizeof(l));
    pthread_mutex_init(&l.mu, NULL);
    l.key = key;
    l.first_fail = l.last_good = -1;
    l.sl = open_url(u, "timeout_ms=250&connect_timeout_ms=500&fail=open");
    for (i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, &l);
    tu_sleep_ms(300);
    pthread_mutex_lock(&l.mu);
    l.t0 = tu_clock_ms(CLOCK_MONOTONIC);
    pthread_mutex_unlock(&l.mu);
    how(old);

    /* A failover the sentinels start may not complete on a loaded machine
     * (the replica they chose slow to answer): a planned one is asked for
     * again after a failover timeout (the fixture's 10 s) and some. */
    end = l.t0 + 60000 * (int64_t)tu_time_scale();
    again = l.t0 + 15000;
    for (;;) {
        int64_t now = tu_clock_ms(CLOCK_MONOTONIC);
        bool settled, moved = master_port(2) != old;

        pthread_mutex_lock(&l.mu);
        settled = now - l.t0 > 3000 && l.last_good > now - l.t0 - 100;
        pthread_mutex_unlock(&l.mu);
        if ((settled && moved) || now > end)
            break;
        if (!moved && how == planned && now > again) {
            print_message("%s: no failover 15 s after asking: asked again\n",
                          name);
            how(old);
            again = now + 15000;
        }
        tu_sleep_ms(50);
    }
    pthread_mutex_lock(&l.mu);
    l.stop = 1;
    pthread_mutex_unlock(&l.mu);
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    held = counted(key);
    print_message(
        "%s: master 127.0.0.1:%d -> 127.0.0.1:%d; %ld decided, %ld by "
        "fail=open (connect %ld, io %ld, timeout %ld, server %ld) from +%lld "
        "ms; longest wait for a good decision %lld ms; the new master holds "
        "%lld: %lld acknowledged decisions lost%s%s\n",
        name, old, master_port(2), l.decided, l.policy,
        l.by_status[SLUICE_ECONNECT], l.by_status[SLUICE_EIO],
        l.by_status[SLUICE_ETIMEOUT], l.by_status[SLUICE_ESERVER],
        (long long)l.first_fail, (long long)l.max_gap, held,
        (long long)l.decided - held, l.policy ? "; last: " : "",
        l.policy ? l.policy_msg : "");
    if (l.other > 0)
        fail_msg("%ld answers neither a decision nor the fail policy's: %s",
                 l.other, l.other_msg);
    assert_true(master_port(2) != old);
    {
        sluice_stats st;

        assert_int_equal(sluice_get_stats(l.sl, &st, sizeof(st)), SLUICE_OK);
        print_message("%s: sluice_stats.failovers %llu\n", name,
                      (unsigned long long)st.failovers);
        assert_true(st.failovers >= 1);
    }
    /* A charge whose answer was lost (EIO, ETIMEOUT: the outcome
     * unknown, fail=open answered) may be counted too. */
    assert_true(held <= l.decided + l.by_status[SLUICE_EIO] +
                            l.by_status[SLUICE_ETIMEOUT]);
    sluice_close(l.sl);
    pthread_mutex_destroy(&l.mu);
    check_ttls();
}

static void planned(int old)
{
    redisContext *c = admin(sentinel_port(1), SENTINEL_PW);
    redisReply *r;
    int tries = 0;

    (void)old;
    /* The sentinels may still be closing the last failover (INPROG), or
     * not have seen the replica in sync yet (NOGOODSLAVE). */
    while ((r = redisCommand(c, "SENTINEL FAILOVER %s", master_name)) != NULL &&
           r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "INPROG", 6) == 0 ||
            strncmp(r->str, "NOGOODSLAVE", 11) == 0) &&
           ++tries < 150) {
        freeReplyObject(r);
        tu_sleep_ms(100);
    }
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        fail_msg("SENTINEL FAILOVER: %s", r != NULL ? r->str : "no reply");
    freeReplyObject(r);
    redisFree(c);
}

static void killed(int old)
{
    char path[64], buf[32];
    int i;

    for (i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "node-%d/client-port", i);
        read_file(path, buf, sizeof(buf));
        if (atoi(buf) == old) {
            snprintf(path, sizeof(path), "node-%d/pid", i);
            read_file(path, buf, sizeof(buf));
            assert_int_equal(kill((pid_t)atoi(buf), SIGKILL), 0);
            return;
        }
    }
    fail_msg("no node has the master's port %d", old);
}

static void planned_failover_under_load(void **state)
{
    (void)state;
    failover_under_load(url, "planned failover (redis+sentinel://)",
                        "ctr-planned", planned);
}

static void killed_master_under_load(void **state)
{
    (void)state;
    failover_under_load(url_multi, "killed master (redis+multi+sentinel://)",
                        "ctr-killed", killed);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(discovers_the_master_on_both_schemes),
        cmocka_unit_test(bad_input_is_a_clear_error),
        /* A killed master first: the one a planned failover demotes
         * turns replica only at the sentinels' next look, seconds later,
         * and a failover before then could promote it with what it had. */
        cmocka_unit_test(killed_master_under_load),
        cmocka_unit_test(planned_failover_under_load),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: test_sentinel DIR\n");
        return 2;
    }
    dir = argv[1];
    read_file("url", url, sizeof(url));
    read_file("url-multi", url_multi, sizeof(url_multi));
    read_file("sentinels", sentinels, sizeof(sentinels));
    read_file("master", master_name, sizeof(master_name));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
