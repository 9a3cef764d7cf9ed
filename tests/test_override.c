/* SPDX-License-Identifier: BSD-3-Clause */
/* test_override.c - overrides of named limiters on a real backend: set,
 * get, delete and list; the decisions of each kind; another handle's
 * change seen within rules_cache_ms, its own at once; round trips per
 * decision; the hash's TTL follows the rules'; deleting the limiter
 * deletes its overrides; bad input. Every backend holds them.
 *   test_override URL|@file */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

uint64_t sl_handle_round_trips(const sluice *sl);

static const char *url;
static bool memory;  /* mem://: one named store, the handle's clock */
static bool sharded; /* redis-cluster://: keys on several nodes */
static bool direct;  /* a server this test reads TTLs from */

#define T0 (28333334LL * 60000)

static sluice *open_with(tu_clock *clk, const char *tag, int64_t cache_ms,
                         bool shadow)
{
    char u[1024], prefix[64], err[512];
    sluice_options o;
    sluice *sl = NULL;

    if (memory)
        snprintf(u, sizeof(u), "mem://overrides");
    else
        snprintf(u, sizeof(u), "%s", url);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.rules_cache_ms = cache_ms;
    o.shadow = shadow;
    snprintf(prefix, sizeof(prefix), "ov%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static sluice *open_cached(tu_clock *clk, const char *tag, int64_t cache_ms)
{
    return open_with(clk, tag, cache_ms, false);
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static sluice_limiter_override over(sluice_override_kind kind, const char *text)
{
    sluice_limiter_override ov;

    memset(&ov, 0, sizeof(ov));
    ov.kind = kind;
    if (text != NULL)
        ov.rules = rules(text);
    return ov;
}

static sluice_status set(sluice *sl, const char *name, const char *client,
                         sluice_limiter_override ov)
{
    return sluice_limiter_override_set(sl, name, strlen(name), client,
                                       strlen(client), &ov);
}

static sluice_limiter_override get(sluice *sl, const char *name,
                                   const char *client)
{
    sluice_limiter_override ov;

    memset(&ov, 0xff, sizeof(ov));
    if (sluice_limiter_override_get(sl, name, strlen(name), client,
                                    strlen(client), &ov) != SLUICE_OK)
        fail_msg("override_get: %s", sluice_errmsg(sl));
    return ov;
}

static sluice_result take(sluice *sl, const char *name, const char *client)
{
    sluice_result r;

    memset(&r, 0, sizeof(r));
    if (sluice_limiter_acquire(sl, name, strlen(name), client,
                               client ? strlen(client) : 0, 1, &r) != SLUICE_OK)
        fail_msg("acquire by %s: %s", name, sluice_errmsg(sl));
    return r;
}

/* Counts what a listing reports, by kind. */
typedef struct tally {
    int n, rules, unlimited, deny;
    int64_t limit_of_p; /* the limit of client "p"'s rules */
} tally;

static int count(void *arg, const void *client, size_t client_len,
                 const sluice_limiter_override *ov)
{
    tally *t = arg;

    t->n++;
    t->rules += ov->kind == SLUICE_OVERRIDE_RULES;
    t->unlimited += ov->kind == SLUICE_OVERRIDE_UNLIMITED;
    t->deny += ov->kind == SLUICE_OVERRIDE_DENY;
    if (client_len == 1 && memcmp(client, "p", 1) == 0)
        t->limit_of_p = ov->rules.rules[0].limit;
    return 0;
}

static tally list(sluice *sl, const char *name)
{
    tally t = {0, 0, 0, 0, 0};

    if (sluice_limiter_override_list(sl, name, strlen(name), count, &t) !=
        SLUICE_OK)
        fail_msg("override_list: %s", sluice_errmsg(sl));
    return t;
}

/* Set, get, delete and list: each kind read back as stored. */
static void set_get_delete_list(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "crud", -1);
    sluice_ruleset rs = rules("fixed:2/1h");
    sluice_limiter_override ov;
    bool found = false;
    tally t;

    (void)state;
    assert_int_equal(
        set(sl, "L", "p", over(SLUICE_OVERRIDE_RULES, "fixed:1/1s")),
        SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_set(sl, "L", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(get(sl, "L", "p").kind, SLUICE_OVERRIDE_NONE);
    assert_int_equal(
        set(sl, "L", "p", over(SLUICE_OVERRIDE_RULES, "fixed:5/1h+log:9/1m")),
        SLUICE_OK);
    assert_int_equal(set(sl, "L", "a", over(SLUICE_OVERRIDE_UNLIMITED, NULL)),
                     SLUICE_OK);
    assert_int_equal(set(sl, "L", "d", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    ov = get(sl, "L", "p");
    assert_int_equal(ov.kind, SLUICE_OVERRIDE_RULES);
    assert_int_equal(ov.rules.count, 2);
    assert_int_equal(ov.rules.rules[0].limit, 5);
    assert_int_equal(ov.rules.rules[1].algorithm, SLUICE_LOG);
    assert_int_equal(get(sl, "L", "a").kind, SLUICE_OVERRIDE_UNLIMITED);
    assert_int_equal(get(sl, "L", "d").kind, SLUICE_OVERRIDE_DENY);
    t = list(sl, "L");
    assert_int_equal(t.n, 3);
    assert_int_equal(t.rules, 1);
    assert_int_equal(t.unlimited, 1);
    assert_int_equal(t.deny, 1);
    assert_int_equal(t.limit_of_p, 5);
    /* A set replaces. */
    assert_int_equal(set(sl, "L", "p", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    assert_int_equal(get(sl, "L", "p").kind, SLUICE_OVERRIDE_DENY);
    assert_int_equal(sluice_limiter_override_delete(sl, "L", 1, "p", 1, &found),
                     SLUICE_OK);
    assert_true(found);
    assert_int_equal(sluice_limiter_override_delete(sl, "L", 1, "p", 1, &found),
                     SLUICE_OK);
    assert_false(found);
    assert_int_equal(get(sl, "L", "p").kind, SLUICE_OVERRIDE_NONE);
    assert_int_equal(list(sl, "L").n, 2);
    /* Another name has none. */
    assert_int_equal(sluice_limiter_set(sl, "M", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(list(sl, "M").n, 0);
    assert_int_equal(get(sl, "M", "a").kind, SLUICE_OVERRIDE_NONE);
    sluice_close(sl);
}

/* 300 overrides: a listing of several pages (HSCAN past a listpack)
 * reports each at least once, and a callback that says stop stops it. */
static int stop_at_10(void *arg, const void *client, size_t client_len,
                      const sluice_limiter_override *ov)
{
    int *n = arg;

    (void)client;
    (void)client_len;
    (void)ov;
    return ++*n == 10;
}

static void long_lists_come_in_pages(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "pages", -1);
    sluice_ruleset rs = rules("fixed:2/1h");
    char client[16];
    int i, n = 0;
    tally t;

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "P", 1, &rs, 0), SLUICE_OK);
    for (i = 0; i < 300; i++) {
        snprintf(client, sizeof(client), "c%d", i);
        assert_int_equal(
            set(sl, "P", client,
                over(i % 2 ? SLUICE_OVERRIDE_DENY : SLUICE_OVERRIDE_UNLIMITED,
                     NULL)),
            SLUICE_OK);
    }
    t = list(sl, "P");
    /* HSCAN may report one twice while the hash changes; it did not. */
    assert_int_equal(t.n, 300);
    assert_int_equal(t.deny, 150);
    assert_int_equal(sluice_limiter_override_list(sl, "P", 1, stop_at_10, &n),
                     SLUICE_OK);
    assert_int_equal(n, 10);
    sluice_close(sl);
}

/* The decisions of each kind, and a client switched between rules keeps
 * its counts. */
static void decisions_of_each_kind(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "kinds", -1);
    sluice_ruleset rs = rules("fixed:2/1h");
    sluice_result r;
    sluice_stats st;
    int i;

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "K", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(
        set(sl, "K", "p", over(SLUICE_OVERRIDE_RULES, "fixed:5/1h")),
        SLUICE_OK);
    assert_int_equal(set(sl, "K", "a", over(SLUICE_OVERRIDE_UNLIMITED, NULL)),
                     SLUICE_OK);
    assert_int_equal(set(sl, "K", "d", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    for (i = 0; i < 5; i++) {
        r = take(sl, "K", "p");
        assert_true(r.allowed);
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.remaining, 4 - i);
    }
    assert_false(take(sl, "K", "p").allowed);
    for (i = 0; i < 10; i++) {
        r = take(sl, "K", "a");
        assert_true(r.allowed);
        assert_int_equal(r.status, SLUICE_ALLOWLISTED);
        assert_int_equal(r.limit, 0);
        assert_int_equal(r.remaining, 0);
        assert_int_equal(r.retry_after_ms, -1);
        assert_int_equal(r.reset_after_ms, 0);
    }
    r = take(sl, "K", "d");
    assert_false(r.allowed);
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    assert_int_equal(r.retry_after_ms, -1);
    assert_int_equal(r.limit, 0);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_after_ms, 0);
    assert_int_equal(sluice_limiter_peek(sl, "K", 1, "d", 1, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_DENYLISTED);
    assert_true(take(sl, "K", "n").allowed);
    assert_true(take(sl, "K", "n").allowed);
    assert_false(take(sl, "K", "n").allowed);
    /* Counted: 10 acquires allow-listed, an acquire and a peek denied. */
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    assert_int_equal(st.allowlisted, 10);
    assert_int_equal(st.denylisted, 2);
    /* Nothing was counted for "a": under the limiter's rules it has 2. */
    assert_int_equal(sluice_limiter_override_delete(sl, "K", 1, "a", 1, NULL),
                     SLUICE_OK);
    r = take(sl, "K", "a");
    assert_true(r.allowed);
    assert_int_equal(r.remaining, 1);
    /* "p" counted 5: under the limiter's 2 it is denied. */
    assert_int_equal(sluice_limiter_override_delete(sl, "K", 1, "p", 1, NULL),
                     SLUICE_OK);
    r = take(sl, "K", "p");
    assert_false(r.allowed);
    assert_int_equal(r.limit, 2);
    sluice_close(sl);
}

/* Shadow mode admits an acquire of a deny-listed client, saying so. */
static void shadow_admits_the_denylisted(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with(&clk, "shadow", -1, true);
    sluice_ruleset rs = rules("fixed:2/1h");
    sluice_result r;

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "S", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(set(sl, "S", "d", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    r = take(sl, "S", "d");
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    sluice_close(sl);
}

/* Another handle's change: seen at once with rules_cache_ms=0, within
 * rules_cache_ms otherwise; the handle's own change at once. */
static void changes_reach_other_handles(void **state)
{
    tu_clock clk = {T0};
    sluice *a = open_cached(&clk, "cache", -1);
    sluice *never = open_cached(&clk, "cache", -1);
    sluice *cached = open_cached(&clk, "cache", 60000);
    sluice *brief = open_cached(&clk, "cache", 50);
    sluice_ruleset rs = rules("fixed:100/1h");

    (void)state;
    assert_int_equal(sluice_limiter_set(a, "C", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(take(never, "C", "x").status, SLUICE_OK);
    assert_int_equal(take(cached, "C", "x").status, SLUICE_OK);
    assert_int_equal(take(brief, "C", "x").status, SLUICE_OK);
    assert_int_equal(set(a, "C", "x", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    assert_int_equal(take(never, "C", "x").status, SLUICE_DENYLISTED);
    assert_int_equal(take(cached, "C", "x").status, SLUICE_OK);
    tu_sleep_ms(60);
    assert_int_equal(take(brief, "C", "x").status, SLUICE_DENYLISTED);
    /* The cached handle's own change applies to its next decision. */
    assert_int_equal(
        set(cached, "C", "x", over(SLUICE_OVERRIDE_UNLIMITED, NULL)),
        SLUICE_OK);
    assert_int_equal(take(cached, "C", "x").status, SLUICE_ALLOWLISTED);
    assert_int_equal(
        sluice_limiter_override_delete(cached, "C", 1, "x", 1, NULL),
        SLUICE_OK);
    assert_int_equal(take(cached, "C", "x").status, SLUICE_OK);
    sluice_close(a);
    sluice_close(never);
    sluice_close(cached);
    sluice_close(brief);
}

/* Round trips a decision by name: with the rules and the override cached,
 * one (a listed client none); never cached, two. */
static void round_trips(void **state)
{
    tu_clock clk = {T0};
    sluice *cached = open_cached(&clk, "rt", 60000);
    sluice *uncached = open_cached(&clk, "rt", -1);
    sluice_ruleset rs = rules("fixed:1000/1h");
    uint64_t n[4];
    const char *who[4] = {"none", "rules", "allow", "deny"};
    int i, k;

    (void)state;
    assert_int_equal(sluice_limiter_set(cached, "R", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(
        set(cached, "R", "rules", over(SLUICE_OVERRIDE_RULES, "fixed:999/1h")),
        SLUICE_OK);
    assert_int_equal(
        set(cached, "R", "allow", over(SLUICE_OVERRIDE_UNLIMITED, NULL)),
        SLUICE_OK);
    assert_int_equal(set(cached, "R", "deny", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    for (k = 0; k < 4; k++) {
        take(cached, "R", who[k]); /* reads the rules and the override */
        n[k] = sl_handle_round_trips(cached);
        for (i = 0; i < 100; i++)
            take(cached, "R", who[k]);
        n[k] = sl_handle_round_trips(cached) - n[k];
    }
    printf("# round trips for 100 cached decisions by name: %llu (no "
           "override), %llu (own rules), %llu (allow-listed), %llu "
           "(deny-listed)\n",
           (unsigned long long)n[0], (unsigned long long)n[1],
           (unsigned long long)n[2], (unsigned long long)n[3]);
    if (!memory) {
        assert_int_equal(n[0], 100);
        assert_int_equal(n[1], 100);
        assert_int_equal(n[2], 0);
        assert_int_equal(n[3], 0);
        n[0] = sl_handle_round_trips(uncached);
        for (i = 0; i < 100; i++)
            take(uncached, "R", "rules");
        n[0] = sl_handle_round_trips(uncached) - n[0];
        assert_int_equal(n[0], 200);
        n[0] = sl_handle_round_trips(uncached);
        for (i = 0; i < 100; i++)
            take(uncached, "R", "deny");
        n[0] = sl_handle_round_trips(uncached) - n[0];
        assert_int_equal(n[0], 100);
    }
    sluice_close(cached);
    sluice_close(uncached);
}

/* PTTL of key on the URL's server (redis:// and the proxy): -3 when it
 * cannot be read there (a cluster node that does not own it). */
static long long pttl(const char *key)
{
    char servers[256], host[200];
    redisContext *c;
    redisReply *r;
    long long v = -3;
    int port;

    tu_servers_of(url, servers, sizeof(servers));
    if (sscanf(servers, "%199[^:]:%d", host, &port) != 2)
        return -3;
    c = redisConnect(host, port);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return -3;
    }
    r = redisCommand(c, "PTTL %s", key);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return v;
}

/* The hash lives as long as the rules: their keep-alive, or none; it goes
 * with the limiter, and a limiter defined again has no overrides. */
static void overrides_live_and_go_with_the_rules(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "ttl", -1);
    sluice_ruleset rs = rules("fixed:2/1h");
    char key[128];
    long long t;

    (void)state;
    assert_int_equal(sluice_limiter_set(sl, "T", 1, &rs, 600000), SLUICE_OK);
    assert_int_equal(set(sl, "T", "d", over(SLUICE_OVERRIDE_DENY, NULL)),
                     SLUICE_OK);
    snprintf(key, sizeof(key), "ov%ld-ttl:lim:{1:T}:over", (long)getpid());
    if (direct) {
        t = pttl(key);
        printf("# PTTL %s: %lld ms (keep-alive 600000)\n", key, t);
        assert_true(t > 590000 && t <= 600000);
    }
    /* Keep-alive 0: the hash has none either. */
    assert_int_equal(sluice_limiter_set(sl, "T", 1, &rs, 0), SLUICE_OK);
    if (direct)
        assert_int_equal(pttl(key), -1);
    assert_int_equal(sluice_limiter_set(sl, "T", 1, &rs, 300000), SLUICE_OK);
    assert_int_equal(take(sl, "T", "d").status, SLUICE_DENYLISTED);
    if (direct) {
        t = pttl(key);
        assert_true(t > 290000 && t <= 300000);
    }
    if (memory) {
        /* Unused past the keep-alive: the rules and overrides are gone. */
        clk.t += 300001;
        assert_int_equal(sluice_limiter_set(sl, "T", 1, &rs, 0), SLUICE_OK);
        assert_int_equal(get(sl, "T", "d").kind, SLUICE_OVERRIDE_NONE);
        assert_int_equal(set(sl, "T", "d", over(SLUICE_OVERRIDE_DENY, NULL)),
                         SLUICE_OK);
    }
    assert_int_equal(sluice_limiter_delete(sl, "T", 1), SLUICE_OK);
    if (direct)
        assert_int_equal(pttl(key), -2);
    assert_int_equal(sluice_limiter_override_get(sl, "T", 1, "d", 1,
                                                 &(sluice_limiter_override){0}),
                     SLUICE_ENOLIMITER);
    assert_int_equal(sluice_limiter_set(sl, "T", 1, &rs, 0), SLUICE_OK);
    assert_int_equal(get(sl, "T", "d").kind, SLUICE_OVERRIDE_NONE);
    assert_int_equal(list(sl, "T").n, 0);
    assert_true(take(sl, "T", "d").allowed);
    sluice_close(sl);
}

/* Bad input: a clear status and a message quoting the value. */
static void bad_input(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_cached(&clk, "bad", -1);
    sluice_ruleset rs = rules("fixed:1/1s");
    sluice_limiter_override ov = over(SLUICE_OVERRIDE_RULES, "fixed:1/1s");
    char big[1001];

    (void)state;
    memset(big, 'c', sizeof(big));
    assert_int_equal(sluice_limiter_set(sl, "B", 1, &rs, 0), SLUICE_OK);
    ov.kind = (sluice_override_kind)7;
    assert_int_equal(sluice_limiter_override_set(sl, "B", 1, "c", 1, &ov),
                     SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "kind 7"));
    ov.kind = SLUICE_OVERRIDE_RULES;
    ov.rules.rules[0].limit = 0;
    assert_int_equal(sluice_limiter_override_set(sl, "B", 1, "c", 1, &ov),
                     SLUICE_ERULE);
    ov.rules.rules[0].limit = 1;
    assert_int_equal(sluice_limiter_override_set(sl, "B", 1, big, 1000, &ov),
                     SLUICE_EKEY);
    assert_non_null(strstr(sluice_errmsg(sl), "1000 bytes"));
    assert_int_equal(sluice_limiter_override_set(sl, "B", 1, "c", 0, &ov),
                     SLUICE_EKEY);
    assert_int_equal(sluice_limiter_override_set(sl, "B", 1, "c", 1, NULL),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_limiter_override_get(sl, "B", 1, "c", 1, NULL),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_limiter_override_list(sl, "B", 1, NULL, NULL),
                     SLUICE_EINVAL);
    assert_int_equal(sluice_limiter_override_list(sl, "", 0, count, NULL),
                     SLUICE_EKEY);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_get_delete_list),
        cmocka_unit_test(long_lists_come_in_pages),
        cmocka_unit_test(decisions_of_each_kind),
        cmocka_unit_test(shadow_admits_the_denylisted),
        cmocka_unit_test(changes_reach_other_handles),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(overrides_live_and_go_with_the_rules),
        cmocka_unit_test(bad_input),
    };

    if (argc < 2) {
        fprintf(stderr, "usage: test_override URL|@file\n");
        return 2;
    }
    url = tu_url(argv[1]);
    memory = strncmp(url, "mem://", 6) == 0;
    sharded = strncmp(url, "redis-cluster", 13) == 0;
    /* The TTLs are read with a plain TCP connection to the URL's server:
     * not a cluster's (other nodes), a Unix socket's or a TLS port. */
    direct = !memory && !sharded && strstr(url, "socket=") == NULL &&
             strncmp(url, "rediss", 6) != 0 && strstr(url, "tls=1") == NULL;
    printf("overrides of named limiters on %s\n", url);
    return cmocka_run_group_tests_name(url, tests, NULL, NULL);
}
