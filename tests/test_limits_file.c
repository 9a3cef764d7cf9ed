/* SPDX-License-Identifier: BSD-3-Clause */
/* test_limits_file.c - a handle opened with a limits file (limits_file=,
 * docs/LIMITS.md, docs/SEMANTICS.md "Limits from a file"): a bad file
 * fails the open naming FILE:LINE:COL; decisions by name on an empty
 * store define the file's limiters (rules, keep-alive, overrides: an
 * allow-listed client, a deny-listed one, own rules; 70 overrides, more
 * than a round trip's batch), blocking, from threads at once and on
 * libevent; a store emptied mid-run (every key of the prefix deleted, as
 * a Redis restarted empty) is defined again at the next decision; the
 * backend's rules win while they exist; reload (good, bad, policies
 * replaced); threads decide while another reloads 200 times (the TSan
 * pass runs mem://); the file's rules decide for fail=fallback when the
 * backend is down.
 *   test_limits_file URL|@file [--servers LIST|@file] */
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
static const char *const subjects[][2] = {
    {"api", "c"},   {"api", "vip"},  {"api", "bot"}, {"api", "partner"},
    {"login", "u"}, {"many", "m69"}, {"many", "x"},
};
#define NSUBJECTS (sizeof(subjects) / sizeof(subjects[0]))

static void check_first(const sluice_result *a)
{
    assert_true(a[0].allowed && a[0].status == SLUICE_OK);
    assert_int_equal(a[0].limit, 3);
    assert_int_equal(a[0].remaining, 2);
    assert_true(a[1].allowed && a[1].status == SLUICE_ALLOWLISTED);
    assert_true(!a[2].allowed && a[2].status == SLUICE_DENYLISTED);
    assert_int_equal(a[3].limit, 5);
    assert_int_equal(a[3].remaining, 4);
    assert_int_equal(a[4].limit, 2);
    assert_int_equal(a[5].limit, 1);
    assert_int_equal(a[5].remaining, 0);
    assert_int_equal(a[6].limit, 7);
}

static int count_override(void *arg, const void *client, size_t client_len,
                          const sluice_limiter_override *ov)
{
    (void)client;
    (void)client_len;
    (void)ov;
    (*(int *)arg)++;
    return 0;
}

/* The names listed: whether api, many and login are. */
static int list_names(void *arg, const void *name, size_t name_len)
{
    static const char *const names[] = {"api", "many", "login"};
    bool *seen = arg;
    size_t i;

    for (i = 0; i < 3; i++)
        if (name_len == strlen(names[i]) &&
            memcmp(name, names[i], name_len) == 0)
            seen[i] = true;
    return 0;
}

/* What the define stored, read through a handle without the file: the
 * rules, keep-alives, the overrides, and the list of names (those kept
 * until deleted); of api, and of login and many unless api_only. */
static void check_stored(sluice *plain, const char *api_rules, bool api_only)
{
    sluice_ruleset rs;
    sluice_limiter_override ov;
    int64_t ka;
    int n = 0;
    bool seen[3] = {false, false, false};
    char text[256];

    assert_int_equal(sluice_limiter_get(plain, "api", 3, &rs, &ka), SLUICE_OK);
    sluice_ruleset_format(&rs, text, sizeof(text));
    assert_string_equal(text, api_rules);
    assert_int_equal(ka, 0);
    assert_int_equal(
        sluice_limiter_override_get(plain, "api", 3, "vip", 3, &ov), SLUICE_OK);
    assert_int_equal(ov.kind, SLUICE_OVERRIDE_UNLIMITED);
    assert_int_equal(
        sluice_limiter_override_get(plain, "api", 3, "bot", 3, &ov), SLUICE_OK);
    assert_int_equal(ov.kind, SLUICE_OVERRIDE_DENY);
    assert_int_equal(
        sluice_limiter_override_list(plain, "api", 3, count_override, &n),
        SLUICE_OK);
    assert_int_equal(n, 3);
    /* Listed as a define lists them: those kept until deleted. */
    assert_int_equal(sluice_limiter_list(plain, list_names, seen), SLUICE_OK);
    assert_true(seen[0] && !seen[2]);
    if (api_only)
        return;
    assert_true(seen[1]);
    assert_int_equal(sluice_limiter_get(plain, "login", 5, &rs, &ka),
                     SLUICE_OK);
    assert_int_equal(ka, 600000);
    n = 0;
    assert_int_equal(
        sluice_limiter_override_list(plain, "many", 4, count_override, &n),
        SLUICE_OK);
    assert_int_equal(n, 70);
}

/* ------------------------------------------------------------- cases */

static void bad_files_fail_the_open_naming_file_line_and_column(void **state)
{
    const char *bad = path_of("bad.yml"), *good = path_of("good.yml");
    char err[1024], want[1024], u[1400];
    sluice_options o;
    sluice_status st;
    sluice *sl;
    FILE *f;

    (void)state;
    f = fopen(bad, "w");
    assert_non_null(f);
    fputs("version: 1\nlimiters:\n  - name: api\n    rule: \"fixed:3/1h\"\n",
          f);
    fclose(f);
    sl = open_tagged("bad", bad, 0, err, sizeof(err), &st);
    assert_null(sl);
    assert_int_equal(st, SLUICE_EINVAL);
    snprintf(want, sizeof(want), "limits_file=%s: %s:4:5: unknown key", bad,
             bad);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("message: %s\nexpected it to start with: %s", err, want);
    sl = open_tagged("bad", path_of("none.yml"), 0, err, sizeof(err), &st);
    assert_null(sl);
    assert_int_equal(st, SLUICE_EINVAL);
    assert_non_null(strstr(err, "none.yml: cannot open"));
    sl = open_tagged("bad", "-", 0, err, sizeof(err), &st);
    assert_null(sl);
    assert_int_equal(st, SLUICE_EINVAL);
    /* The URL's form, over the options' (a good file there, a bad one in
     * the URL: the URL's is read). */
    write_file(good, "fixed:3/1h", "");
    snprintf(u, sizeof(u), "%s%climits_file=%s", shared_url,
             strchr(shared_url, '?') != NULL ? '&' : '?', bad);
    sluice_options_init(&o);
    o.limits_file = good;
    sl = NULL;
    st = sluice_open(u, &o, &sl, err, sizeof(err));
    assert_int_equal(st, SLUICE_EINVAL);
    assert_non_null(strstr(err, ":4:5: unknown key"));
    snprintf(u, sizeof(u), "%s%climits_file=%s", shared_url,
             strchr(shared_url, '?') != NULL ? '&' : '?', good);
    assert_int_equal(sluice_open(u, NULL, &sl, err, sizeof(err)), SLUICE_OK);
    /* A handle without one cannot reload. */
    sluice_close(sl);
    sl = open_ok("bad", NULL, 0);
    assert_int_equal(sluice_limits_reload(sl, err, sizeof(err)), SLUICE_EINVAL);
    assert_non_null(strstr(err, "without a limits file"));
    sluice_close(sl);
}

static void decisions_define_the_files_limiters(void **state)
{
    const char *file = path_of("base.yml");
    sluice_result a[NSUBJECTS];
    sluice *sl, *plain;
    size_t i;

    (void)state;
    write_file(file, "fixed:3/1h", "");
    sl = open_ok("blocking", file, -1);
    plain = open_ok("blocking", NULL, -1);
    for (i = 0; i < NSUBJECTS; i++)
        a[i] = acquire(sl, subjects[i][0], subjects[i][1]);
    check_first(a);
    check_stored(plain, "fixed:3/3600000ms", false);
    /* Defined once: the next decision counts on. */
    assert_int_equal(acquire(sl, "api", "c").remaining, 1);
    sluice_close(sl);
    empty_store(plain, "blocking");
    sluice_close(plain);
}

typedef struct thread_arg {
    sluice *sl;
    size_t subject;
    sluice_result res;
    sluice_status st;
} thread_arg;

static void *decide_thread(void *p)
{
    thread_arg *t = p;
    const char *const *s = subjects[t->subject];

    t->st = sluice_limiter_acquire(t->sl, s[0], strlen(s[0]), s[1],
                                   strlen(s[1]), 1, &t->res);
    return NULL;
}

static void threads_define_at_once(void **state)
{
    const char *file = path_of("base.yml");
    thread_arg t[NSUBJECTS];
    pthread_t th[NSUBJECTS];
    sluice_result a[NSUBJECTS];
    sluice *sl, *plain;
    size_t i;

    (void)state;
    write_file(file, "fixed:3/1h", "");
    sl = open_ok("threads", file, -1);
    plain = open_ok("threads", NULL, -1);
    for (i = 0; i < NSUBJECTS; i++) {
        t[i].sl = sl;
        t[i].subject = i;
        assert_int_equal(pthread_create(&th[i], NULL, decide_thread, &t[i]), 0);
    }
    for (i = 0; i < NSUBJECTS; i++) {
        pthread_join(th[i], NULL);
        if (t[i].st != SLUICE_OK)
            fail_msg("%s/%s: %s", subjects[i][0], subjects[i][1],
                     sluice_strerror(t[i].st));
        a[i] = t[i].res;
    }
    check_first(a);
    check_stored(plain, "fixed:3/3600000ms", false);
    sluice_close(sl);
    empty_store(plain, "threads");
    sluice_close(plain);
}

typedef struct async_answer {
    bool done;
    sluice_status st;
    sluice_result res;
} async_answer;

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    async_answer *a = arg;

    (void)sl;
    (void)n;
    a->done = true;
    a->st = st;
    a->res = res[0];
}

/* The subjects decided on libevent, all started at once. */
static void decide_async(sluice *sl, struct event_base *base,
                         sluice_result *out)
{
    async_answer a[NSUBJECTS];
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 10000 * TU_TIME_SCALE;
    size_t i, done;

    memset(a, 0, sizeof(a));
    for (i = 0; i < NSUBJECTS; i++)
        assert_int_equal(sluice_limiter_acquire_async(
                             sl, subjects[i][0], strlen(subjects[i][0]),
                             subjects[i][1], strlen(subjects[i][1]), 1, on_done,
                             &a[i]),
                         SLUICE_OK);
    do {
        if (tu_clock_ms(CLOCK_MONOTONIC) > until)
            fail_msg("a callback never came");
        event_base_loop(base, EVLOOP_ONCE);
        for (i = 0, done = 0; i < NSUBJECTS; i++)
            done += a[i].done;
    } while (done < NSUBJECTS);
    for (i = 0; i < NSUBJECTS; i++) {
        if (a[i].st != SLUICE_OK)
            fail_msg("%s/%s on the loop: %s", subjects[i][0], subjects[i][1],
                     sluice_strerror(a[i].st));
        out[i] = a[i].res;
    }
}

static void the_loop_defines_too_and_again_once_emptied(void **state)
{
    const char *file = path_of("base.yml");
    struct event_base *base;
    sluice_result a[NSUBJECTS];
    sluice *sl, *plain;

    (void)state;
    write_file(file, "fixed:3/1h", "");
    sl = open_ok("loop", file, -1);
    plain = open_ok("loop", NULL, -1);
    assert_non_null(base = event_base_new());
    assert_int_equal(sluice_libevent_attach(sl, base), SLUICE_OK);
    decide_async(sl, base, a);
    check_first(a);
    check_stored(plain, "fixed:3/3600000ms", false);
    empty_store(plain, "loop");
    decide_async(sl, base, a); /* the rules read again: none, defined */
    assert_true(a[0].allowed && a[0].limit == 3);
    assert_int_equal(a[1].status, SLUICE_ALLOWLISTED);
    assert_int_equal(a[2].status, SLUICE_DENYLISTED);
    assert_int_equal(a[5].limit, 1);
    check_stored(plain, "fixed:3/3600000ms", false);
    sluice_close(sl);
    event_base_free(base);
    empty_store(plain, "loop");
    sluice_close(plain);
}

static void an_emptied_store_is_defined_again(void **state)
{
    const char *file = path_of("base.yml");
    sluice *sl, *cached, *plain;
    sluice_result r;
    int round;

    (void)state;
    write_file(file, "fixed:3/1h", "");
    sl = open_ok("emptied", file, -1);        /* reads with every decision */
    cached = open_ok("emptied", file, 60000); /* keeps what it read */
    plain = open_ok("emptied", NULL, -1);
    for (round = 0; round < 3; round++) {
        r = acquire(sl, "api", "c");
        assert_true(r.status == SLUICE_OK && r.limit == 3);
        assert_int_equal(acquire(cached, "api", "vip").status,
                         SLUICE_ALLOWLISTED);
        assert_int_equal(acquire(sl, "many", "m00").limit, 1);
        empty_store(plain, "emptied");
        /* The next decision finds nothing stored and defines again; the
         * one that kept what it read decides by it meanwhile. */
        r = acquire(sl, "api", "bot");
        assert_int_equal(r.status, SLUICE_DENYLISTED);
        assert_int_equal(acquire(cached, "api", "vip").status,
                         SLUICE_ALLOWLISTED);
        check_stored(plain, "fixed:3/3600000ms", true);
        empty_store(plain, "emptied");
    }
    sluice_close(sl);
    sluice_close(cached);
    sluice_close(plain);
}

static void stored_rules_win_until_deleted(void **state)
{
    const char *file = path_of("base.yml");
    sluice_ruleset ten;
    sluice_limiter_override deny = {SLUICE_OVERRIDE_DENY, {0, {{0}}}};
    sluice *sl, *plain;
    sluice_result r;

    (void)state;
    write_file(file, "fixed:3/1h", "");
    assert_int_equal(sluice_ruleset_parse("fixed:10/1h", &ten, NULL, 0),
                     SLUICE_OK);
    sl = open_ok("precedence", file, -1);
    plain = open_ok("precedence", NULL, -1);
    /* Set at run time (`sluice limiter set`): the handle decides by it. */
    assert_int_equal(sluice_limiter_set(plain, "api", 3, &ten, 0), SLUICE_OK);
    r = acquire(sl, "api", "c");
    assert_int_equal(r.limit, 10);
    /* A client the file allow-lists, deny-listed at run time. */
    assert_int_equal(acquire(sl, "api", "vip").status, SLUICE_OK);
    assert_int_equal(
        sluice_limiter_override_set(plain, "api", 3, "vip", 3, &deny),
        SLUICE_OK);
    assert_int_equal(acquire(sl, "api", "vip").status, SLUICE_DENYLISTED);
    assert_int_equal(acquire(sl, "api", "c").limit, 10);
    {
        sluice_ruleset rs;
        char text[128];

        assert_int_equal(sluice_limiter_get(plain, "api", 3, &rs, NULL),
                         SLUICE_OK);
        sluice_ruleset_format(&rs, text, sizeof(text));
        assert_string_equal(text, "fixed:10/3600000ms"); /* never written */
    }
    /* Deleted: the next decision defines the file's again. */
    assert_int_equal(sluice_limiter_delete(plain, "api", 3), SLUICE_OK);
    r = acquire(sl, "api", "c");
    assert_int_equal(r.limit, 3);
    assert_int_equal(acquire(sl, "api", "vip").status, SLUICE_ALLOWLISTED);
    check_stored(plain, "fixed:3/3600000ms", true);
    sluice_close(sl);
    empty_store(plain, "precedence");
    sluice_close(plain);
}

static void policy_of(sluice *sl, const char *name, sluice_policy *p)
{
    sluice_policy_init(p);
    assert_int_equal(sluice_limiter_policy_get(sl, name, strlen(name), p),
                     SLUICE_OK);
}

static void reload_replaces_and_keeps_the_last_good_file(void **state)
{
    const char *file = path_of("reload.yml");
    sluice_policy p, shadow;
    sluice *sl, *plain;
    char err[1024];
    FILE *f;

    (void)state;
    write_file(file, "fixed:3/1h",
               "    policy: {fail: closed, http_name: api-a}\n");
    sl = open_ok("reload", file, -1);
    plain = open_ok("reload", NULL, -1);
    policy_of(sl, "api", &p);
    assert_int_equal(p.set, SLUICE_POLICY_FAIL | SLUICE_POLICY_HTTP);
    assert_int_equal(p.fail, SLUICE_FAIL_CLOSED);
    assert_string_equal(p.http_name, "api-a");
    policy_of(sl, "login", &p);
    assert_int_equal(p.fail, SLUICE_FAIL_OPEN);
    /* Set by the call: it wins until the next reload. */
    sluice_policy_init(&shadow);
    shadow.set = SLUICE_POLICY_SHADOW;
    shadow.shadow = true;
    assert_int_equal(sluice_limiter_policy_set(sl, "api", 3, &shadow),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(sl, "many", 4, &shadow),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(sl, "other", 5, &shadow),
                     SLUICE_OK);
    policy_of(sl, "api", &p);
    assert_int_equal(p.set, SLUICE_POLICY_SHADOW);
    /* The next file: api's policy and rules change, login leaves. */
    f = fopen(file, "w");
    assert_non_null(f);
    fputs("version: 1\nlimiters:\n"
          "  - {name: api, rules: \"fixed:4/1h\", policy: {fail: fallback}}\n"
          "  - {name: many, rules: \"fixed:7/1h\"}\n",
          f);
    fclose(f);
    assert_int_equal(sluice_limits_reload(sl, err, sizeof(err)), SLUICE_OK);
    assert_string_equal(err, "");
    policy_of(sl, "api", &p);
    assert_int_equal(p.set, SLUICE_POLICY_FAIL);
    assert_int_equal(p.fail, SLUICE_FAIL_FALLBACK);
    policy_of(sl, "login", &p); /* left the file: the handle's */
    assert_int_equal(p.set, 0);
    assert_int_equal(p.fail, SLUICE_FAIL_ERROR);
    policy_of(sl, "many", &p); /* the file gives none: the call's stays */
    assert_int_equal(p.set, SLUICE_POLICY_SHADOW);
    policy_of(sl, "other", &p);
    assert_int_equal(p.set, SLUICE_POLICY_SHADOW);
    /* The new file defines. */
    assert_int_equal(acquire(sl, "api", "c").limit, 4);
    {
        sluice_result r;

        /* Left the file, never stored: nothing defines it any more. */
        assert_int_equal(sluice_limiter_acquire(sl, "login", 5, "c", 1, 1, &r),
                         SLUICE_ENOLIMITER);
    }
    /* A bad file: nothing changes, and the message says why. */
    f = fopen(file, "w");
    assert_non_null(f);
    fputs("version: 1\nlimiters:\n  - {name: api, rules: \"fixed:9/1h\", "
          "policy: {fail: maybe}}\n",
          f);
    fclose(f);
    assert_int_equal(sluice_limits_reload(sl, err, sizeof(err)), SLUICE_EINVAL);
    if (strstr(err, "reload.yml:3:") == NULL ||
        strstr(err, "limits_file=") != err)
        fail_msg("message: %s", err);
    assert_string_equal(sluice_errmsg(sl), err);
    policy_of(sl, "api", &p);
    assert_int_equal(p.fail, SLUICE_FAIL_FALLBACK);
    assert_int_equal(sluice_limiter_delete(plain, "api", 3), SLUICE_OK);
    assert_int_equal(acquire(sl, "api", "c").limit, 4); /* the last good */
    /* Gone from the disk: the same. */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(sluice_limits_reload(sl, NULL, 0), SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "cannot open"));
    policy_of(sl, "api", &p);
    assert_int_equal(p.fail, SLUICE_FAIL_FALLBACK);
    sluice_close(sl);
    empty_store(plain, "reload");
    sluice_close(plain);
}

/* Threads decide by name while another reloads: two files alike but for
 * api's fail policy, a bad one between, and a plain handle deleting api
 * now and then, so that defines run during the reloads. */
typedef struct race {
    sluice *sl, *other;
    atomic_bool stop;
    atomic_long decided;
    atomic_long bad;
    atomic_long window; /* vip decided by the rules alone */
    char why[256];
} race;

static void *race_thread(void *p)
{
    race *r = p;
    sluice_policy pol;
    sluice_result res;
    sluice_status st;
    long i = 0;

    while (!atomic_load(&r->stop)) {
        const char *client = (i & 3) == 0 ? "vip" : "c";

        st = sluice_limiter_acquire(r->sl, "api", 3, client, strlen(client), 1,
                                    &res);
        sluice_policy_init(&pol);
        if (st == SLUICE_OK)
            st = sluice_limiter_policy_get(r->sl, "api", 3, &pol);
        /* vip is allow-listed; a define stores the rules and the first
         * overrides in one round trip, but a backend may run another
         * client's read between them (twemproxy forwards each command on
         * its own): docs/SEMANTICS.md, "Limits from a file". */
        if (st == SLUICE_OK && client[0] == 'v' && res.status == SLUICE_OK)
            atomic_fetch_add(&r->window, 1);
        if (st != SLUICE_OK || !res.allowed ||
            (pol.fail != SLUICE_FAIL_OPEN && pol.fail != SLUICE_FAIL_CLOSED) ||
            (client[0] != 'v' && res.status != SLUICE_OK) ||
            (client[0] == 'v' && res.status != SLUICE_ALLOWLISTED &&
             res.status != SLUICE_OK)) {
            if (atomic_fetch_add(&r->bad, 1) == 0)
                snprintf(r->why, sizeof(r->why),
                         "%s: status %s, result %s, fail policy %d: %s", client,
                         sluice_strerror(st), sluice_status_name(res.status),
                         (int)pol.fail, sluice_errmsg(r->sl));
        }
        atomic_fetch_add(&r->decided, 1);
        i++;
    }
    return NULL;
}

/* Writes path's text: the file at src (NULL: a bad one), made whole
 * under another name and renamed, so that a reload reads either whole. */
static void replace_file(const char *path, const char *src)
{
    char tmp[600], buf[8192];
    FILE *in, *out;
    size_t n;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_non_null(out = fopen(tmp, "w"));
    if (src == NULL) {
        fputs("version: 2\n", out);
    } else {
        assert_non_null(in = fopen(src, "r"));
        while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
            assert_int_equal(fwrite(buf, 1, n, out), n);
        fclose(in);
    }
    assert_int_equal(fclose(out), 0);
    assert_int_equal(rename(tmp, path), 0);
}

/* A handle without the file decides for vip meanwhile: it finds no
 * limiter, or the allow-listed client; the limiter without its override
 * only between a define's rules and its overrides. */
static void *other_thread(void *p)
{
    race *r = p;
    sluice_result res;
    sluice_status st;

    while (!atomic_load(&r->stop)) {
        st = sluice_limiter_acquire(r->other, "api", 3, "vip", 3, 1, &res);
        if (st == SLUICE_OK && res.status == SLUICE_OK)
            atomic_fetch_add(&r->window, 1);
        else if (st != SLUICE_ENOLIMITER &&
                 !(st == SLUICE_OK && res.status == SLUICE_ALLOWLISTED) &&
                 atomic_fetch_add(&r->bad, 1) == 0)
            snprintf(r->why, sizeof(r->why), "other: %s, %s",
                     sluice_strerror(st), sluice_status_name(res.status));
    }
    return NULL;
}

static void reloads_while_threads_decide(void **state)
{
    const char *a = path_of("race-a.yml"), *b = path_of("race-b.yml");
    const char *file = path_of("race.yml");
    char err[1024];
    pthread_t th[5];
    sluice *plain;
    race r;
    int i, reloads = 0;

    (void)state;
    write_file(a, "fixed:1000000/1h", "    policy: {fail: open}\n");
    write_file(b, "fixed:1000000/1h", "    policy: {fail: closed}\n");
    replace_file(file, a);
    memset(&r, 0, sizeof(r));
    r.sl = open_ok("race", file, -1);
    plain = open_ok("race", NULL, -1);
    r.other = open_ok("race", NULL, -1);
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_thread, &r), 0);
    assert_int_equal(pthread_create(&th[4], NULL, other_thread, &r), 0);
    for (i = 0; i < 200; i++) {
        replace_file(file, i % 10 == 9 ? NULL : i % 2 ? b : a);
        assert_int_equal(sluice_limits_reload(r.sl, err, sizeof(err)),
                         i % 10 == 9 ? SLUICE_EINVAL : SLUICE_OK);
        reloads++;
        if (i % 20 == 0)
            (void)sluice_limiter_delete(plain, "api", 3);
    }
    atomic_store(&r.stop, true);
    for (i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    print_message("%d reloads, %ld decisions during them (%ld of vip "
                  "decided between a define's rules and its overrides)\n",
                  reloads, (long)atomic_load(&r.decided),
                  (long)atomic_load(&r.window));
    if (atomic_load(&r.bad) > 0)
        fail_msg("%ld bad answers; the first: %s", (long)atomic_load(&r.bad),
                 r.why);
    assert_true(atomic_load(&r.decided) > 0);
    /* mem:// runs a round trip's requests under one lock: the rules and
     * their first overrides are stored together. */
    if (servers[0] == '\0')
        assert_int_equal(atomic_load(&r.window), 0);
    /* Once the defines are done, vip is allow-listed again. */
    assert_int_equal(acquire(r.sl, "api", "vip").status, SLUICE_ALLOWLISTED);
    sluice_close(r.sl);
    sluice_close(r.other);
    empty_store(plain, "race");
    sluice_close(plain);
}

/* The backend down (nothing listens): the file's rules are the rules read
 * last, so fail=fallback decides by them, and its overrides answer. */
static void the_files_rules_decide_when_the_backend_is_down(void **state)
{
    const char *file = path_of("down.yml");
    char u[128], err[512];
    sluice_options o;
    sluice_result r;
    sluice *sl = NULL;

    (void)state;
    write_file(file, "fixed:3/1h", "    policy: {fail: fallback}\n");
    snprintf(u, sizeof(u), "redis://127.0.0.1:%d", tu_free_port());
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.connect_timeout_ms = 200;
    o.command_timeout_ms = 200;
    o.limits_file = file;
    assert_int_equal(sluice_open(u, &o, &sl, err, sizeof(err)), SLUICE_OK);
    r = acquire(sl, "api", "c");
    assert_true(r.allowed && r.status == SLUICE_ECONNECT);
    assert_true(sluice_result_decided(&r));
    assert_int_equal(r.limit, 3);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(acquire(sl, "api", "vip").status, SLUICE_ALLOWLISTED);
    assert_int_equal(acquire(sl, "api", "bot").status, SLUICE_DENYLISTED);
    r = acquire(sl, "login", "c"); /* fail=open: admitted, undecided */
    assert_true(r.allowed && r.status == SLUICE_ECONNECT);
    assert_false(sluice_result_decided(&r));
    assert_int_equal(sluice_limiter_acquire(sl, "nofile", 6, NULL, 0, 1, &r),
                     SLUICE_ECONNECT); /* the handle's fail=error */
    sluice_close(sl);
}

static int cleanup(void **state)
{
    char cmd[400];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_files_fail_the_open_naming_file_line_and_column),
        cmocka_unit_test(decisions_define_the_files_limiters),
        cmocka_unit_test(threads_define_at_once),
        cmocka_unit_test(the_loop_defines_too_and_again_once_emptied),
        cmocka_unit_test(an_emptied_store_is_defined_again),
        cmocka_unit_test(stored_rules_win_until_deleted),
        cmocka_unit_test(reload_replaces_and_keeps_the_last_good_file),
        cmocka_unit_test(reloads_while_threads_decide),
        /* Needs no server: once, in the mem:// run. */
        cmocka_unit_test(the_files_rules_decide_when_the_backend_is_down),
    };
    size_t n = sizeof(tests) / sizeof(tests[0]);
    int i;

    if (argc < 2) {
        fprintf(stderr,
                "usage: test_limits_file URL|@file [--servers LIST|@file]\n");
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
    snprintf(dir, sizeof(dir), "/tmp/sluice-lf-%ld", (long)getpid());
    if (mkdir(dir, 0700) != 0)
        return 1;
    if (servers[0] != '\0')
        n--;
    return _cmocka_run_group_tests("test_limits_file", tests, n, NULL, cleanup);
}
