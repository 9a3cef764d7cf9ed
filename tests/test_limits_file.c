/* SPDX-License-Identifier: BSD-3-Clause */
/* test_limits_file.c - a handle opened with a limits file (limits_file=,
 * docs/LIMITS.md, docs/SEMANTICS.md "Limits from a file"): a bad file
 * fails the open naming FILE:LINE:COL; decisions by name on an empty
 * store define the file's limiters (rules, keep-alive, overrides: an
 * allow-listed client, a deny-listed one, own rules; 70 overrides, more
 * than a round trip's batch), blocking, from threads at once and on
 * libevent; a store emptied mid-run (every key of the prefix deleted, as
 * a Redis restarted empty) is defined again at the next decision; the
 * backend's rules win while they exist; the file's rules decide for
 * fail=fallback when the backend is down, and when a define fails (a
 * Redis past its maxmemory). Reloads: test_limits_reload.c.
 *   test_limits_file URL|@file [--servers LIST|@file] */
#include "limits_file_kit.h"

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

/* A define that fails is a failure of the decision: on a Redis of the
 * test's own past its maxmemory (noeviction), redis+multi:// reads the
 * rules (GET, HGET: no write) and finds none, then the define's first
 * write is refused (OOM): the limiter's fail policy answers, by the file's
 * rules; once Redis takes writes again the limiter is defined. */
static pid_t own_redis; /* killed by the teardown, also on a failure */

static int kill_own_redis(void **state)
{
    (void)state;
    tu_kill(&own_redis);
    return 0;
}

static void a_define_that_fails_is_the_fail_policys(void **state)
{
    const char *file = path_of("oom.yml");
    int port = tu_free_port();
    char u[128], err[512];
    redisContext *c;
    redisReply *rep;
    sluice_options o;
    sluice_result r;
    sluice *sl = NULL;

    (void)state;
    assert_true((own_redis = tu_start_redis(port)) > 0);
    write_file(file, "fixed:3/1h", "    policy: {fail: fallback}\n");
    c = redisConnect("127.0.0.1", port);
    assert_true(c != NULL && c->err == 0);
    rep = redisCommand(c, "CONFIG SET maxmemory 1");
    assert_true(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    snprintf(u, sizeof(u), "redis+multi://127.0.0.1:%d", port);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.rules_cache_ms = -1;
    o.limits_file = file;
    assert_int_equal(sluice_open(u, &o, &sl, err, sizeof(err)), SLUICE_OK);
    r = acquire(sl, "api", "c");
    if (!(r.allowed && r.status == SLUICE_ESERVER))
        fail_msg("expected the fallback store's answer, got %s: %s",
                 sluice_status_name(r.status), sluice_errmsg(sl));
    assert_true(sluice_result_decided(&r));
    assert_int_equal(r.limit, 3);
    assert_non_null(strstr(sluice_errmsg(sl), "OOM"));
    assert_int_equal(acquire(sl, "api", "vip").status, SLUICE_ALLOWLISTED);
    rep = redisCommand(c, "CONFIG SET maxmemory 0");
    assert_true(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    r = acquire(sl, "api", "c");
    assert_true(r.status == SLUICE_OK && r.limit == 3 && r.remaining == 2);
    rep = redisCommand(c, "HLEN sluice:lim:{3:api}:over");
    assert_true(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    assert_int_equal(rep->integer, 3);
    freeReplyObject(rep);
    redisFree(c);
    sluice_close(sl);
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
        /* Need no server of the run's: once, in the mem:// run. */
        cmocka_unit_test(the_files_rules_decide_when_the_backend_is_down),
        cmocka_unit_test_teardown(a_define_that_fails_is_the_fail_policys,
                                  kill_own_redis),
    };

    return kit_main(argc, argv, "test_limits_file", tests,
                    sizeof(tests) / sizeof(tests[0]), 2);
}
