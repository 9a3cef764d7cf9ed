/* SPDX-License-Identifier: BSD-3-Clause */
/* test_limits_reload.c - sluice_limits_reload (docs/SEMANTICS.md, "Limits
 * from a file"): a good file replaces the policies (one that left the
 * file removed, a call's on a limiter of the file replaced, others kept)
 * and defines by its rules; a bad or missing one keeps the last good one
 * and says why; 200 reloads while four threads decide and a handle
 * without the file watches for a limiter without its overrides (the TSan
 * pass runs mem://).
 *   test_limits_reload URL|@file [--servers LIST|@file] */
#include "limits_file_kit.h"

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
    /* A limit no run reaches: every "c" is admitted (the fresh root's
     * valgrind pass made 1.4 million decisions in 8 minutes and passed a
     * million). */
    write_file(a, "fixed:1000000000/1h", "    policy: {fail: open}\n");
    write_file(b, "fixed:1000000000/1h", "    policy: {fail: closed}\n");
    replace_file(file, a);
    memset(&r, 0, sizeof(r));
    r.sl = open_ok("race", file, -1);
    plain = open_ok("race", NULL, -1);
    r.other = open_ok("race", NULL, -1);
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_thread, &r), 0);
    assert_int_equal(pthread_create(&th[4], NULL, other_thread, &r), 0);
    /* 200 reloads; under valgrind, whose threads take turns on one
     * core, 10 (200 took over 7 minutes there, the four deciders' turns
     * between each two reloads); under the sanitizers 50. */
    for (i = 0; i < 200 / (int)tu_time_scale(); i++) {
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
int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reload_replaces_and_keeps_the_last_good_file),
        cmocka_unit_test(reloads_while_threads_decide),
    };

    return kit_main(argc, argv, "test_limits_reload", tests,
                    sizeof(tests) / sizeof(tests[0]), 0);
}
