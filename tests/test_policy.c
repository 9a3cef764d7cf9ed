/* SPDX-License-Identifier: BSD-3-Clause */
/* test_policy.c - one handle, every policy (docs/SEMANTICS.md,
 * "Policies"): a handle opened with fail=error and no deny cache,
 * reservations or shadow mode serves two limiters whose policies differ
 * ("open": fail=open, the deny cache, shadow mode; "closed": fail=closed,
 * reservations) and keys decided with a policy of the call's (the deny
 * cache, fail=fallback over 2 instances) or with the handle's, their
 * decisions interleaved: each answers by its own policy, blocking, from
 * threads sharing the handle, in batches and on libevent; then, with the
 * servers frozen (DEBUG SLEEP, as test_fallback), each failure is
 * answered by its own fail policy. Policies change while threads decide
 * (the TSan pass runs the mem:// case). Bad policies:
 * test_policy_input.c.
 *   test_policy URL|@file [--servers LIST|@file] */
#include "testutil.h"

#include <event2/event.h>
#include <pthread.h>
#include <setjmp.h>
#include <sluice/libevent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h>

#define T0     (28333334LL * 60000 + 1800000) /* mid-hour: no window ends */
#define ROUNDS 12

static const char *url;
static char servers[2048];
static tu_clock clk = {T0};
static sluice_ruleset four, eight; /* fixed:4/1h, fixed:8/1h */

enum {
    BLOCKING,
    THREADS,
    BATCH,
    LIBEVENT,
    NDRIVERS
};
static const char *const driver_names[NDRIVERS] = {"blocking", "threads",
                                                   "batch", "libevent"};

/* The subjects of one handle: the limiters "open" and "closed" (client
 * "c"), the key "kp" with the call's policy, the key "kh" with the
 * handle's. */
enum {
    OPEN,
    CLOSED,
    KP,
    KH,
    NSUBJ
};
static const int rounds_of[NSUBJ] = {6, ROUNDS, 6, 6};

static sluice_policy open_pol, closed_pol, call_pol;

static void make_policies(void)
{
    sluice_policy_init(&open_pol);
    open_pol.set =
        SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE | SLUICE_POLICY_SHADOW;
    open_pol.fail = SLUICE_FAIL_OPEN;
    open_pol.deny_cache = true;
    open_pol.shadow = true;
    sluice_policy_init(&closed_pol);
    closed_pol.set = SLUICE_POLICY_FAIL | SLUICE_POLICY_RESERVE;
    closed_pol.fail = SLUICE_FAIL_CLOSED;
    closed_pol.reserve_ms = 100;
    closed_pol.reserve_share = 50;
    sluice_policy_init(&call_pol);
    call_pol.set = SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE;
    call_pol.fail = SLUICE_FAIL_FALLBACK;
    call_pol.fallback_instances = 2;
    call_pol.deny_cache = true;
}

/* A handle on url with the fixed clock: fail=error, none of the features
 * a policy turns on; timeout_ms its calls' and connects' timeout. */
static sluice *open_handle(const char *tag, uint32_t timeout_ms)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.command_timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    o.rules_cache_ms = -1; /* read with every decision: a failure fails it */
    snprintf(prefix, sizeof(prefix), "pol%ld-%s:", (long)getpid(), tag);
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", url, err);
    return sl;
}

/* The limiters (defined through sl) and their policies on sl. */
static void define(sluice *sl)
{
    assert_int_equal(sluice_limiter_define(sl, "open", 4, &four, 0, NULL),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_define(sl, "closed", 6, &eight, 0, NULL),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(sl, "open", 4, &open_pol),
                     SLUICE_OK);
    assert_int_equal(sluice_limiter_policy_set(sl, "closed", 6, &closed_pol),
                     SLUICE_OK);
}

/* One answer. */
typedef struct answer {
    bool done;
    sluice_status ret;
    sluice_result res;
} answer;

/* One decision of subject s, blocking; client (or key suffix) c. */
static void decide(sluice *sl, int s, const char *c, answer *a)
{
    char key[16];

    memset(a, 0, sizeof(*a));
    snprintf(key, sizeof(key), "%s%s", s == KP ? "kp" : "kh", c);
    switch (s) {
    case OPEN:
        a->ret =
            sluice_limiter_acquire(sl, "open", 4, c, strlen(c), 1, &a->res);
        break;
    case CLOSED:
        a->ret =
            sluice_limiter_acquire(sl, "closed", 6, c, strlen(c), 1, &a->res);
        break;
    case KP:
        a->ret = sluice_acquire_with(sl, key, strlen(key), &four, 1, &call_pol,
                                     &a->res);
        break;
    case KH:
        a->ret = sluice_acquire(sl, key, strlen(key), &four, 1, &a->res);
        break;
    }
    a->done = true;
}

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    answer *a = arg;

    (void)sl;
    a->ret = st;
    if (n > 0)
        a->res = res[0];
    a->done = true;
}

/* The same on the loop: started, answered later. */
static void start(sluice *sl, int s, const char *c, answer *a)
{
    char key[16];
    sluice_status st = SLUICE_OK;

    memset(a, 0, sizeof(*a));
    snprintf(key, sizeof(key), "%s%s", s == KP ? "kp" : "kh", c);
    if (s == OPEN || s == CLOSED)
        st = sluice_limiter_acquire_async(sl, s == OPEN ? "open" : "closed",
                                          s == OPEN ? 4 : 6, c, strlen(c), 1,
                                          on_done, a);
    else
        st = sluice_acquire_with_async(sl, key, strlen(key), &four, 1,
                                       s == KP ? &call_pol : NULL, on_done, a);
    assert_int_equal(st, SLUICE_OK);
}

static void run_until(struct event_base *base, answer *a, size_t n)
{
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 10000 * TU_TIME_SCALE;
    size_t i;

    for (;;) {
        for (i = 0; i < n && a[i].done; i++)
            ;
        if (i == n)
            return;
        if (tu_clock_ms(CLOCK_MONOTONIC) > until)
            fail_msg("a callback never came");
        event_base_loop(base, EVLOOP_ONCE);
    }
}

/* ------------------------------------------------ the healthy backend */

/* Answer i of subject s, by its policy (see the top of the file). */
static void check_healthy(int s, int i, const answer *a, const char *what)
{
    const sluice_result *r = &a->res;

    if (a->ret != SLUICE_OK)
        fail_msg("%s: subject %d, request %d: %s (%s)", what, s, i,
                 sluice_strerror(a->ret), sluice_strerror(r->status));
    switch (s) {
    case OPEN: /* the rules deny the 5th; shadow admits it and the 6th,
                  which the deny cache answered */
        assert_true(r->allowed);
        assert_int_equal(r->status, i < 4 ? SLUICE_OK : SLUICE_SHADOWED);
        break;
    case CLOSED: /* 8 admitted, some from reservations; no cache, no
                    shadow */
        assert_int_equal(r->allowed, i < 8);
        if (i < 8)
            assert_true(r->status == SLUICE_OK || r->status == SLUICE_RESERVED);
        else
            assert_int_equal(r->status, SLUICE_OK);
        break;
    case KP: /* the call's deny cache answers the 6th */
        assert_int_equal(r->allowed, i < 4);
        assert_int_equal(r->status, i < 5 ? SLUICE_OK : SLUICE_CACHED);
        break;
    case KH: /* the handle's: every one decided by the backend */
        assert_int_equal(r->allowed, i < 4);
        assert_int_equal(r->status, SLUICE_OK);
        break;
    }
}

/* The admissions of "closed" from its reservations: answers[ROUNDS]. */
static int reserved_of(const answer *closed)
{
    int n = 0;

    for (int i = 0; i < ROUNDS; i++)
        n += closed[i].res.status == SLUICE_RESERVED;
    return n;
}

/* A thread's subject: n requests of client (or key suffix) c. */
typedef struct worker {
    sluice *sl;
    int s, n;
    const char *c;
    answer *ans;
} worker;

static void *work(void *arg)
{
    worker *w = arg;

    for (int i = 0; i < w->n; i++)
        decide(w->sl, w->s, w->c, &w->ans[i]);
    return NULL;
}

/* The keys by batches: the first 5 of each key in one batch (its denial
 * inside), the 6th alone; the limiters blocking between them. */
static void drive_batch(sluice *sl, answer (*ans)[ROUNDS])
{
    sluice_request reqs[10];
    sluice_result out[10];
    int i;

    for (i = 0; i < 5; i++) {
        reqs[i] = (sluice_request){"kpc", 3, &four, 1};
        reqs[5 + i] = (sluice_request){"khc", 3, &four, 1};
    }
    for (i = 0; i < ROUNDS / 2; i++)
        decide(sl, CLOSED, "c", &ans[CLOSED][i]);
    assert_int_equal(sluice_acquire_many_with(sl, reqs, 5, &call_pol, out),
                     SLUICE_OK);
    for (i = 0; i < 5; i++)
        ans[KP][i] = (answer){true, SLUICE_OK, out[i]};
    for (i = 0; i < 6; i++)
        decide(sl, OPEN, "c", &ans[OPEN][i]);
    assert_int_equal(sluice_acquire_many(sl, reqs + 5, 5, out), SLUICE_OK);
    for (i = 0; i < 5; i++)
        ans[KH][i] = (answer){true, SLUICE_OK, out[i]};
    assert_int_equal(sluice_acquire_many_with(sl, reqs, 1, &call_pol, out),
                     SLUICE_OK);
    ans[KP][5] = (answer){true, SLUICE_OK, out[0]};
    assert_int_equal(sluice_acquire_many(sl, reqs + 5, 1, out), SLUICE_OK);
    ans[KH][5] = (answer){true, SLUICE_OK, out[0]};
    for (i = ROUNDS / 2; i < ROUNDS; i++)
        decide(sl, CLOSED, "c", &ans[CLOSED][i]);
}

/* Every subject's requests on sl by driver d, interleaved. */
static void drive(sluice *sl, int d, struct event_base *base,
                  answer (*ans)[ROUNDS])
{
    pthread_t th[NSUBJ];
    worker w[NSUBJ];
    int i, s;

    switch (d) {
    case BLOCKING:
        for (i = 0; i < ROUNDS; i++)
            for (s = 0; s < NSUBJ; s++)
                if (i < rounds_of[s])
                    decide(sl, s, "c", &ans[s][i]);
        break;
    case THREADS:
        for (s = 0; s < NSUBJ; s++) {
            w[s] = (worker){sl, s, rounds_of[s], "c", ans[s]};
            assert_int_equal(pthread_create(&th[s], NULL, work, &w[s]), 0);
        }
        for (s = 0; s < NSUBJ; s++)
            pthread_join(th[s], NULL);
        break;
    case BATCH:
        drive_batch(sl, ans);
        break;
    case LIBEVENT:
        for (i = 0; i < ROUNDS; i++) {
            answer *round[NSUBJ];
            size_t n = 0;

            for (s = 0; s < NSUBJ; s++)
                if (i < rounds_of[s]) {
                    start(sl, s, "c", &ans[s][i]);
                    round[n++] = &ans[s][i];
                }
            for (size_t k = 0; k < n; k++)
                run_until(base, round[k], 1);
        }
        break;
    }
}

static void one_handle_answers_each_by_its_own_policy(void **state)
{
    (void)state;
    for (int d = 0; d < NDRIVERS; d++) {
        answer ans[NSUBJ][ROUNDS], peek, again;
        sluice_limiter_stats open_st, closed_st;
        sluice_stats st;
        struct event_base *base = NULL;
        sluice *sl = open_handle(driver_names[d], 2000 * TU_TIME_SCALE);
        char what[64];

        memset(ans, 0, sizeof(ans));
        define(sl);
        if (d == LIBEVENT) {
            assert_non_null(base = event_base_new());
            assert_int_equal(sluice_libevent_attach(sl, base), SLUICE_OK);
        }
        drive(sl, d, base, ans);
        snprintf(what, sizeof(what), "%s on %s", driver_names[d], url);
        for (int s = 0; s < NSUBJ; s++)
            for (int i = 0; i < rounds_of[s]; i++)
                check_healthy(s, i, &ans[s][i], what);
        /* Shadow mode admitted what the cache answered of "open"; a peek
         * (which shadow mode leaves as it is) shows the cache's denial. */
        memset(&peek, 0, sizeof(peek));
        if (base == NULL) {
            peek.ret = sluice_limiter_peek(sl, "open", 4, "c", 1, 1, &peek.res);
        } else {
            assert_int_equal(sluice_limiter_peek_async(sl, "open", 4, "c", 1, 1,
                                                       on_done, &peek),
                             SLUICE_OK);
            run_until(base, &peek, 1);
        }
        assert_int_equal(peek.ret, SLUICE_OK);
        assert_false(peek.res.allowed);
        assert_int_equal(peek.res.status, SLUICE_CACHED);
        /* kp's key with the handle's policy: the cache holds its denial,
         * and does not answer a request whose policy has it off. */
        memset(&again, 0, sizeof(again));
        if (base == NULL) {
            again.ret = sluice_acquire(sl, "kpc", 3, &four, 1, &again.res);
        } else {
            assert_int_equal(
                sluice_acquire_async(sl, "kpc", 3, &four, 1, on_done, &again),
                SLUICE_OK);
            run_until(base, &again, 1);
        }
        assert_int_equal(again.ret, SLUICE_OK);
        assert_false(again.res.allowed);
        assert_int_equal(again.res.status, SLUICE_OK);
        /* Counted by what answered: the cache for that peek and kp's 6th,
         * shadow twice, reservations for "closed" alone. */
        assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
        assert_int_equal(
            sluice_get_limiter_stats(sl, "open", 4, &open_st, sizeof(open_st)),
            SLUICE_OK);
        assert_int_equal(sluice_get_limiter_stats(sl, "closed", 6, &closed_st,
                                                  sizeof(closed_st)),
                         SLUICE_OK);
        assert_int_equal(open_st.deny_cache_hits, 1);
        assert_int_equal(open_st.shadow_admitted, 2);
        assert_int_equal(open_st.reserve_admitted, 0);
        assert_int_equal(closed_st.deny_cache_hits, 0);
        assert_int_equal(closed_st.shadow_admitted, 0);
        assert_true(closed_st.reserve_admitted >= 1);
        assert_int_equal(closed_st.reserve_admitted, reserved_of(ans[CLOSED]));
        assert_int_equal(st.deny_cache_hits, 2);
        assert_int_equal(st.shadow_admitted, 2);
        assert_int_equal(st.reserve_admitted, closed_st.reserve_admitted);
        assert_int_equal(st.policy_answers, 0);
        print_message("%s: %d of 8 admissions of \"closed\" from its "
                      "reservations\n",
                      what, reserved_of(ans[CLOSED]));
        sluice_close(sl);
        if (base != NULL)
            event_base_free(base);
    }
}

/* ----------------------------------------------- the backend frozen */

static bool failed(sluice_status st)
{
    return st == SLUICE_ECONNECT || st == SLUICE_ETIMEOUT || st == SLUICE_EIO ||
           st == SLUICE_ESERVER || st == SLUICE_EPROTO ||
           st == SLUICE_ECONTENDED;
}

/* Answer a of subject s while the backend fails, by its fail policy. */
static void check_failed(int s, const answer *a, const char *what)
{
    const sluice_result *r = &a->res;

    if (s == KH) { /* the handle's fail=error: the failure returned */
        if (!failed(a->ret))
            fail_msg("%s: the handle's key: %s, expected a failure", what,
                     sluice_strerror(a->ret));
        return;
    }
    if (a->ret != SLUICE_OK || !failed(r->status))
        fail_msg("%s: subject %d: %s (%s), expected an answer of its policy",
                 what, s, sluice_strerror(a->ret), sluice_strerror(r->status));
    switch (s) {
    case OPEN: /* fail=open: admitted, no rule decided */
        assert_true(r->allowed);
        assert_false(sluice_result_decided(r));
        break;
    case CLOSED: /* fail=closed: denied, no rule decided */
        assert_false(r->allowed);
        assert_false(sluice_result_decided(r));
        break;
    case KP: /* fail=fallback over 2 instances: fixed:4 halved */
        assert_true(r->allowed);
        assert_true(sluice_result_decided(r));
        assert_int_equal(r->limit, 2);
        assert_int_equal(r->remaining, 1);
        break;
    }
}

/* One request of every subject by driver d, on a frozen backend. */
static void drive_failed(sluice *sl, int d, struct event_base *base,
                         answer *ans)
{
    sluice_request q[2] = {{"kpf", 3, &four, 1}, {"khf", 3, &four, 1}};
    sluice_result out;
    pthread_t th[NSUBJ];
    worker w[NSUBJ];
    int s;

    switch (d) {
    case BLOCKING:
        for (s = 0; s < NSUBJ; s++)
            decide(sl, s, "f", &ans[s]);
        break;
    case THREADS: /* each its own thread, one request each */
        for (s = 0; s < NSUBJ; s++) {
            w[s] = (worker){sl, s, 1, "f", &ans[s]};
            assert_int_equal(pthread_create(&th[s], NULL, work, &w[s]), 0);
        }
        for (s = 0; s < NSUBJ; s++)
            pthread_join(th[s], NULL);
        break;
    case BATCH:
        decide(sl, OPEN, "f", &ans[OPEN]);
        ans[KP].ret = sluice_acquire_many_with(sl, q, 1, &call_pol, &out);
        ans[KP].res = out;
        decide(sl, CLOSED, "f", &ans[CLOSED]);
        ans[KH].ret = sluice_acquire_many(sl, q + 1, 1, &out);
        ans[KH].res = out;
        break;
    case LIBEVENT:
        for (s = 0; s < NSUBJ; s++)
            start(sl, s, "f", &ans[s]);
        run_until(base, ans, NSUBJ);
        break;
    }
}

/* Freezes every server of the list for ms; returns the children. */
static size_t freeze_all(int64_t ms, pid_t *pids, size_t max)
{
    char list[2048], secs[32], *save = NULL, *hp;
    size_t n = 0;

    snprintf(secs, sizeof(secs), "%.3f", (double)ms / 1000);
    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",\n ", &save); hp != NULL && n < max;
         hp = strtok_r(NULL, ",\n ", &save)) {
        char *colon = strrchr(hp, ':');

        if (colon == NULL)
            continue;
        *colon = '\0';
        pids[n++] = tu_freeze(hp, atoi(colon + 1), secs);
    }
    return n;
}

static void each_failure_is_answered_by_its_own_fail_policy(void **state)
{
    /* A frozen server costs each request its timeout: short, and the
     * freeze outlasts every request of every driver (12 timeouts). */
    uint32_t ms = 100 * TU_TIME_SCALE < 400 ? 100 * TU_TIME_SCALE : 400;
    sluice *f[NDRIVERS];
    struct event_base *base = NULL;
    answer ans[NDRIVERS][NSUBJ];
    pid_t pids[16];
    size_t n, i;

    (void)state;
    for (int d = 0; d < NDRIVERS; d++) {
        char tag[32];
        sluice *def;

        /* Defined through a handle with the long timeouts, the same
         * prefix: a busy machine's slow round trip is not this test's
         * failure. */
        snprintf(tag, sizeof(tag), "f%s", driver_names[d]);
        def = open_handle(tag, 2000 * TU_TIME_SCALE);
        define(def);
        sluice_close(def);
        f[d] = open_handle(tag, ms);
        assert_int_equal(sluice_limiter_policy_set(f[d], "open", 4, &open_pol),
                         SLUICE_OK);
        assert_int_equal(
            sluice_limiter_policy_set(f[d], "closed", 6, &closed_pol),
            SLUICE_OK);
    }
    assert_non_null(base = event_base_new());
    assert_int_equal(sluice_libevent_attach(f[LIBEVENT], base), SLUICE_OK);
    n = freeze_all(12 * (int64_t)ms + 1500, pids, 16);
    for (int d = 0; d < NDRIVERS; d++) {
        sluice_limiter_stats open_st, closed_st;
        sluice_stats st;
        char what[64];

        snprintf(what, sizeof(what), "%s on %s, frozen", driver_names[d], url);
        drive_failed(f[d], d, base, ans[d]);
        for (int s = 0; s < NSUBJ; s++)
            check_failed(s, &ans[d][s], what);
        /* The policy answers, counted by the handle and by limiter. */
        assert_int_equal(sluice_get_stats(f[d], &st, sizeof(st)), SLUICE_OK);
        assert_int_equal(sluice_get_limiter_stats(f[d], "open", 4, &open_st,
                                                  sizeof(open_st)),
                         SLUICE_OK);
        assert_int_equal(sluice_get_limiter_stats(f[d], "closed", 6, &closed_st,
                                                  sizeof(closed_st)),
                         SLUICE_OK);
        assert_int_equal(st.policy_answers, 3);
        assert_int_equal(open_st.policy_answers, 1);
        assert_int_equal(closed_st.policy_answers, 1);
        print_message("%s: %s, %s, %s, %s\n", what,
                      sluice_strerror(ans[d][OPEN].res.status),
                      sluice_strerror(ans[d][CLOSED].res.status),
                      sluice_strerror(ans[d][KP].res.status),
                      sluice_strerror(ans[d][KH].ret));
    }
    for (i = 0; i < n; i++)
        waitpid(pids[i], NULL, 0);
    for (int d = 0; d < NDRIVERS; d++)
        sluice_close(f[d]);
    event_base_free(base);
}

/* -------------------------------------------------- policies changing */

typedef struct decider {
    sluice *sl;
    int id;
    atomic_bool *stop;
    atomic_int answered;
    int bad;
    char why[200];
} decider;

/* Decides by name, by key with the call's policy, and by key with the
 * handle's, until told to stop: every call answered, each answer one
 * that some policy given gives. The call's policy asks for what the
 * handle lacks (threads 0 and 1 the deny cache and the fallback store, 2
 * and 3 reservations): made by the first such call, while the other
 * threads decide. */
static void *decide_on(void *arg)
{
    decider *w = arg;
    char client[16], key[16];
    int i = 0;

    snprintf(client, sizeof(client), "c%d", w->id);
    snprintf(key, sizeof(key), "k%d", w->id);
    while (!atomic_load(w->stop) || i < 30) {
        sluice_result r;
        sluice_status st;

        switch (i++ % 3) {
        case 0:
            st = sluice_limiter_acquire(w->sl, "hot", 3, client, strlen(client),
                                        1, &r);
            break;
        case 1:
            st = sluice_acquire_with(w->sl, key, strlen(key), &eight, 1,
                                     w->id < 2 ? &call_pol : &closed_pol, &r);
            break;
        default:
            st = sluice_acquire(w->sl, key, strlen(key), &eight, 1, &r);
            break;
        }
        if (st != SLUICE_OK ||
            (r.status != SLUICE_OK && r.status != SLUICE_CACHED &&
             r.status != SLUICE_SHADOWED && r.status != SLUICE_RESERVED)) {
            if (w->bad++ == 0)
                snprintf(w->why, sizeof(w->why), "%s (%s): %s",
                         sluice_strerror(st), sluice_strerror(r.status),
                         sluice_errmsg(w->sl));
        }
        atomic_fetch_add(&w->answered, 1);
    }
    return NULL;
}

static int answered_by(decider *w, int n)
{
    int total = 0;

    for (int t = 0; t < n; t++)
        total += atomic_load(&w[t].answered);
    return total;
}

static void policies_change_while_threads_decide(void **state)
{
    sluice *sl = open_handle("tsan", 2000 * TU_TIME_SCALE);
    sluice_policy p[5];
    pthread_t th[4];
    decider w[4];
    atomic_bool stop;
    int64_t until = tu_clock_ms(CLOCK_MONOTONIC) + 5000;
    int k;

    (void)state;
    assert_int_equal(sluice_limiter_define(sl, "hot", 3, &eight, 0, NULL),
                     SLUICE_OK);
    /* Each turns on what the handle was opened without, made while the
     * threads decide: the deny cache, reservations, the fallback store. */
    for (k = 0; k < 5; k++)
        sluice_policy_init(&p[k]);
    p[0].set = SLUICE_POLICY_SHADOW;
    p[0].shadow = true;
    p[1].set = SLUICE_POLICY_DENY_CACHE;
    p[1].deny_cache = true;
    p[2].set = SLUICE_POLICY_RESERVE;
    p[2].reserve_ms = 50;
    p[3].set = SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE;
    p[3].fail = SLUICE_FAIL_FALLBACK;
    p[3].deny_cache = true;
    atomic_init(&stop, false);
    for (int t = 0; t < 4; t++) {
        w[t].sl = sl;
        w[t].id = t;
        w[t].stop = &stop;
        atomic_init(&w[t].answered, 0);
        w[t].bad = 0;
        w[t].why[0] = '\0';
        assert_int_equal(pthread_create(&th[t], NULL, decide_on, &w[t]), 0);
    }
    /* The threads under way first; then 400 changes at least, and on
     * until they made 4,000 decisions (5 s at most). */
    while (answered_by(w, 4) < 40 && tu_clock_ms(CLOCK_MONOTONIC) < until)
        tu_sleep_ms(1);
    for (k = 0; k < 400 || (answered_by(w, 4) < 4000 &&
                            tu_clock_ms(CLOCK_MONOTONIC) < until);
         k++) {
        const sluice_policy *q = k % 5 == 4 ? NULL : &p[k % 5];
        sluice_policy got;

        assert_int_equal(sluice_limiter_policy_set(sl, "hot", 3, q), SLUICE_OK);
        sluice_policy_init(&got);
        assert_int_equal(sluice_limiter_policy_get(sl, "hot", 3, &got),
                         SLUICE_OK);
        if (k % 40 == 0)
            tu_sleep_ms(1);
    }
    atomic_store(&stop, true);
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        if (w[t].bad > 0)
            fail_msg("thread %d: %d of %d answers wrong, the first %s", t,
                     w[t].bad, atomic_load(&w[t].answered), w[t].why);
    }
    print_message("%d decisions while the policy changed %d times\n",
                  answered_by(w, 4), k);
    sluice_close(sl);
}

int main(int argc, char **argv)
{
    /* The failures last, and not on mem://, which never fails. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_handle_answers_each_by_its_own_policy),
        cmocka_unit_test(policies_change_while_threads_decide),
        cmocka_unit_test(each_failure_is_answered_by_its_own_fail_policy),
    };
    size_t n = sizeof(tests) / sizeof(tests[0]);

    if (argc < 2) {
        fprintf(stderr,
                "usage: test_policy URL|@file [--servers LIST|@file]\n");
        return 2;
    }
    url = tu_url(argv[1]);
    tu_servers_of(url, servers, sizeof(servers));
    for (int i = 2; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--servers") == 0)
            snprintf(servers, sizeof(servers), "%s", tu_url(argv[i + 1]));
    if (sluice_ruleset_parse("fixed:4/1h", &four, NULL, 0) != SLUICE_OK ||
        sluice_ruleset_parse("fixed:8/1h", &eight, NULL, 0) != SLUICE_OK)
        return 1;
    make_policies();
    if (servers[0] == '\0')
        n--;
    return _cmocka_run_group_tests("test_policy", tests, n, NULL, NULL);
}
