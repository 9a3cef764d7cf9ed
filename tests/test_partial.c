/* SPDX-License-Identifier: BSD-3-Clause */
/* test_partial.c - acquire at most and refunds on a real backend, beyond
 * the conformance tables: threads on their own connections granting and
 * refunding on one key lose and invent nothing, nor do handles opened
 * one after another; a refund ends the deny
 * cache's denials of its key; shadow mode grants all and charges what
 * fits; the counters; a missing out-parameter.
 *   test_partial URL|@file [--no-buckets] [--refunds all|buckets|none] */
#include "testutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *url;
static time_t started; /* for key prefixes */
static bool buckets = true;
/* Which rules the backend refunds: all, buckets only, or none. */
static enum {
    REFUND_ALL,
    REFUND_BUCKETS,
    REFUND_NONE
} refunds = REFUND_ALL;

#define THREADS 8
#define LIMIT   100
#define T0      (28333334LL * 60000)

/* sluice's own memory goes through an allocator that gives a freed large
 * block back to the next request of its size, as malloc often does (and
 * ASan and valgrind, which hold freed memory back, never do): handles
 * opened one after another then get one address in every build. */
#define SPARES    8
#define SPARE_MIN 4096 /* bytes: a handle's state, not the small blocks */

typedef union head {
    size_t n;
    max_align_t align;
} head;

static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static head *spare[SPARES]; /* the latest large blocks freed, last newest */

static void *reuse_malloc(size_t n)
{
    head *h = NULL;
    size_t k;

    pthread_mutex_lock(&spare_lock);
    for (k = SPARES; k-- > 0 && h == NULL;)
        if (spare[k] != NULL && spare[k]->n == n) {
            h = spare[k];
            spare[k] = NULL;
        }
    pthread_mutex_unlock(&spare_lock);
    if (h == NULL && (h = malloc(sizeof(*h) + n)) == NULL)
        return NULL;
    h->n = n;
    return h + 1;
}

static void *reuse_realloc(void *p, size_t n)
{
    head *h;

    if (p == NULL)
        return reuse_malloc(n);
    if ((h = realloc((head *)p - 1, sizeof(*h) + n)) == NULL)
        return NULL;
    h->n = n;
    return h + 1;
}

static void reuse_free(void *p)
{
    head *h, *out;

    if (p == NULL)
        return;
    h = (head *)p - 1;
    if (h->n < SPARE_MIN) {
        free(h);
        return;
    }
    pthread_mutex_lock(&spare_lock);
    out = spare[0];
    memmove(spare, spare + 1, (SPARES - 1) * sizeof(*spare));
    spare[SPARES - 1] = h;
    pthread_mutex_unlock(&spare_lock);
    free(out);
}

static void free_spares(void)
{
    size_t k;

    for (k = 0; k < SPARES; k++) {
        free(spare[k]);
        spare[k] = NULL;
    }
}

/* Opens url with the query extra ("" or "shadow=1", ...), a virtual
 * clock and a prefix of tag; mem:// is shared by name, so that handles
 * of one test see one store. */
static sluice *open_with(const char *extra, tu_clock *clk, const char *tag)
{
    char u[1024], prefix[64], err[512];
    sluice_options o;
    sluice *sl = NULL;

    if (strcmp(url, "mem://") == 0)
        snprintf(u, sizeof(u), "mem://partial%s%s", extra[0] ? "?" : "", extra);
    else
        snprintf(u, sizeof(u), "%s%s%s", url,
                 extra[0] == '\0'           ? ""
                 : strchr(url, '?') != NULL ? "&"
                                            : "?",
                 extra);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    /* a correctness test: one slow round trip on a loaded machine is
     * not a failure (the deadline tests hold the timeouts) */
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    /* The start time too: a loop of runs reuses process ids, and would
     * find an earlier run's full keys. */
    snprintf(prefix, sizeof(prefix), "pg%ld.%lld-%s:", (long)getpid(),
             (long long)started, tag);
    o.key_prefix = prefix;
    if (sluice_open(u, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    return sl;
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

/* What a cost-1 acquire would still find: a peek's remaining counts the
 * peek's own charge. */
static int64_t room(sluice *sl, const char *key, const sluice_ruleset *rs)
{
    sluice_result r;

    assert_int_equal(sluice_peek(sl, key, strlen(key), rs, 1, &r), SLUICE_OK);
    return r.allowed ? r.remaining + 1 : 0;
}

typedef struct worker {
    const char *rule, *tag;
    bool refund;
    tu_clock *clk;
    int64_t granted, refunded, calls, contended;
    char failure[256];
} worker;

/* Asks for at most 3 until nothing is granted; every third grant gives 1
 * back. */
static void *work(void *arg)
{
    worker *w = arg;
    sluice *sl = open_with("", w->clk, w->tag);
    sluice_ruleset rs = rules(w->rule);
    int zeros = 0;

    while (zeros < 3) {
        sluice_result r;
        int64_t g = -1;

        sluice_status st = sluice_acquire_at_most(sl, "hot", 3, &rs, 3, &g, &r);

        /* A bucket on redis+multi:// may be too hot for WATCH: nothing
         * was charged, and the caller tries again (documented). */
        if (st == SLUICE_ECONTENDED) {
            w->contended++;
            continue;
        }
        if (st != SLUICE_OK) {
            snprintf(w->failure, sizeof(w->failure), "at most: %s",
                     sluice_errmsg(sl));
            break;
        }
        w->calls++;
        if (g < 0 || g > 3 || r.allowed != (g > 0)) {
            snprintf(w->failure, sizeof(w->failure), "granted %lld, allowed %d",
                     (long long)g, r.allowed);
            break;
        }
        zeros = g == 0 ? zeros + 1 : 0;
        w->granted += g;
        if (w->refund && g > 0 && w->calls % 3 == 0) {
            st = sluice_refund(sl, "hot", 3, &rs, 1, &r);
            if (st == SLUICE_ECONTENDED) {
                w->contended++;
                continue;
            }
            if (st != SLUICE_OK) {
                snprintf(w->failure, sizeof(w->failure), "refund: %s",
                         sluice_errmsg(sl));
                break;
            }
            w->refunded++;
        }
    }
    sluice_close(sl);
    return NULL;
}

/* Threads with their own connections: what the key counts at the end is
 * exactly what was granted less what was given back, and never above the
 * limit. */
static void concurrent(const char *rule, const char *tag, bool bucket)
{
    tu_clock clk = {T0};
    pthread_t th[THREADS];
    worker w[THREADS];
    int64_t granted = 0, refunded = 0, contended = 0, left;
    sluice_ruleset rs = rules(rule);
    /* Open first: a mem:// store lives while a handle holds it. */
    sluice *sl = open_with("", &clk, tag);
    int i;

    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].rule = rule;
        w[i].refund =
            refunds == REFUND_ALL || (refunds == REFUND_BUCKETS && bucket);
        w[i].tag = tag;
        w[i].clk = &clk;
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].failure[0] != '\0')
            fail_msg("thread %d: %s", i, w[i].failure);
        granted += w[i].granted;
        refunded += w[i].refunded;
        contended += w[i].contended;
    }
    left = room(sl, "hot", &rs);
    printf("# %s: %d threads granted %lld, gave back %lld, %lld left of "
           "%d (%lld calls too hot for WATCH)\n",
           rule, THREADS, (long long)granted, (long long)refunded,
           (long long)left, LIMIT, (long long)contended);
    assert_true(granted >= LIMIT);
    assert_int_equal(granted - refunded, LIMIT - left);
    sluice_close(sl);
}

static void concurrent_fixed(void **state)
{
    (void)state;
    concurrent("fixed:100/1h", "fixed", false);
}

static void concurrent_log(void **state)
{
    (void)state;
    concurrent("log:100/1h", "log", false);
}

static void concurrent_token(void **state)
{
    (void)state;
    concurrent("token:100/1h", "token", true);
}

static void concurrent_composite(void **state)
{
    (void)state;
    concurrent("sliding:100/1h+fixed:1000/1d", "composite", false);
}

/* Handles opened and closed one after another, in one thread and one
 * second, each charging a log at one stamp: the allocator gives each the
 * last one's memory back (reuse_malloc), and each charge must count. A plain
 * backend's log members once started counting from the process id, the
 * second and the handle's address, so each handle wrote the same member:
 * 12 of 12 admitted by log:5/1h (and partial.multi_tls, whose threads
 * reused a finished thread's memory, up to 199 of 100). */
static void reopened_handles_count_every_charge(void **state)
{
    tu_clock clk = {T0};
    sluice_ruleset rs = rules("log:5/1h");
    /* Holds a mem:// store open between the others. */
    sluice *keep = open_with("", &clk, "reopen");
    int admitted = 0, i;

    (void)state;
    for (i = 0; i < 12; i++) {
        sluice *sl = open_with("", &clk, "reopen");
        sluice_result r;
        sluice_status st = sluice_acquire(sl, "k", 1, &rs, 1, &r);

        if (st != SLUICE_OK)
            fprintf(stderr, "# acquire %d: %s\n", i, sluice_errmsg(sl));
        sluice_close(sl);
        if (st != SLUICE_OK)
            break;
        admitted += r.allowed;
    }
    printf("# log:5/1h, 12 handles one after another: %d admitted\n", admitted);
    sluice_close(keep);
    assert_int_equal(i, 12);
    assert_int_equal(admitted, 5);
}

/* A refund is a change the deny cache cannot see coming: it forgets the
 * key's denials, and the next acquire is decided again. */
static void refund_ends_cached_denials(void **state)
{
    tu_clock clk = {T0};
    sluice_ruleset rs = rules("fixed:2/1h");
    sluice_result r;
    sluice *sl;

    (void)state;
    sl = open_with("deny_cache=16", &clk, "cache");
    if (refunds == REFUND_BUCKETS)
        rs = rules("token:2/1h");
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 2, &r), SLUICE_OK);
    assert_true(r.allowed);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_false(r.allowed);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_CACHED);
    assert_int_equal(sluice_refund(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_OK);
    assert_true(r.allowed);
    sluice_close(sl);
}

/* Shadow mode grants everything asked and charges what the rules grant,
 * as enforcement would: an enforcing handle sees 5 of 5 used, not 8. */
static void shadow_grants_all_charges_what_fits(void **state)
{
    tu_clock clk = {T0};
    sluice *sh = open_with("shadow=1", &clk, "shadow");
    sluice *en = open_with("", &clk, "shadow");
    sluice_ruleset rs = rules("fixed:5/1h");
    sluice_result r;
    int64_t g = -1;

    (void)state;
    assert_int_equal(sluice_acquire_at_most(sh, "s", 1, &rs, 8, &g, &r),
                     SLUICE_OK);
    assert_int_equal(g, 8);
    assert_true(r.allowed);
    assert_int_equal(r.status, SLUICE_SHADOWED);
    assert_int_equal(room(en, "s", &rs), 0);
    /* A grant in full is no shadow admission. */
    assert_int_equal(sluice_acquire_at_most(sh, "t", 1, &rs, 3, &g, &r),
                     SLUICE_OK);
    assert_int_equal(g, 3);
    assert_int_equal(r.status, SLUICE_OK);
    assert_int_equal(room(en, "t", &rs), 2);
    sluice_close(sh);
    sluice_close(en);
}

/* Grants count as admissions, nothing granted as a denial, refunds as
 * refunds. */
static void counted(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with("", &clk, "stats");
    sluice_ruleset rs = rules("fixed:4/1h");
    sluice_result r;
    sluice_stats st;
    int64_t g;

    (void)state;
    assert_int_equal(sluice_acquire_at_most(sl, "c", 1, &rs, 3, &g, &r),
                     SLUICE_OK);
    assert_int_equal(sluice_acquire_at_most(sl, "c", 1, &rs, 3, &g, &r),
                     SLUICE_OK);
    assert_int_equal(g, 1);
    assert_int_equal(sluice_acquire_at_most(sl, "c", 1, &rs, 3, &g, &r),
                     SLUICE_OK);
    assert_int_equal(g, 0);
    if (refunds != REFUND_NONE) {
        sluice_ruleset tk = rules("token:4/1h");

        assert_int_equal(sluice_refund(sl, "c", 1, &tk, 2, &r), SLUICE_OK);
    }
    assert_int_equal(sluice_get_stats(sl, &st, sizeof(st)), SLUICE_OK);
    assert_int_equal(st.allowed, 2);
    assert_int_equal(st.denied, 1);
    assert_int_equal(st.refunds, refunds != REFUND_NONE ? 1 : 0);
    sluice_close(sl);
}

/* Bad arguments: a clear status and a message, nothing charged. */
static void bad_arguments(void **state)
{
    tu_clock clk = {T0};
    sluice *sl = open_with("", &clk, "bad");
    sluice_ruleset rs = rules("fixed:4/1h");
    sluice_result r;
    sluice_status st;
    int64_t g;

    (void)state;
    assert_int_equal(sluice_acquire_at_most(sl, "b", 1, &rs, 3, NULL, &r),
                     SLUICE_EINVAL);
    assert_non_null(strstr(sluice_errmsg(sl), "granted"));
    assert_int_equal(sluice_acquire_at_most(sl, "b", 1, &rs, 0, &g, &r),
                     SLUICE_ECOST);
    assert_int_equal(sluice_refund(sl, "b", 1, &rs, -1, &r), SLUICE_ECOST);
    /* A refund of 0 gives back nothing, and succeeds where refunds of
     * these rules are supported (not on redis+multi://, twemproxy://). */
    st = sluice_refund(sl, "b", 1, &rs, 0, &r);
    if (st != SLUICE_EUNSUPPORTED) {
        assert_int_equal(st, SLUICE_OK);
        assert_true(r.allowed);
        assert_int_equal(r.remaining, 4);
    }
    assert_int_equal(sluice_refund(sl, "b", 1, &rs, 1, NULL), SLUICE_EINVAL);
    assert_int_equal(room(sl, "b", &rs), 4);
    sluice_close(sl);
}

/* Whether a case applies to the backend under test. */
static bool applies(CMUnitTestFunction f)
{
    if (f == concurrent_token)
        return buckets;
    if (f == refund_ends_cached_denials)
        return refunds != REFUND_NONE;
    return true;
}

int main(int argc, char **argv)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_fixed),
        cmocka_unit_test(concurrent_log),
        cmocka_unit_test(concurrent_token),
        cmocka_unit_test(concurrent_composite),
        cmocka_unit_test(reopened_handles_count_every_charge),
        cmocka_unit_test(refund_ends_cached_denials),
        cmocka_unit_test(shadow_grants_all_charges_what_fits),
        cmocka_unit_test(counted),
        cmocka_unit_test(bad_arguments),
    };
    size_t k, n = 0;
    int i, rc;

    if (argc < 2) {
        fprintf(stderr, "usage: test_partial URL|@file [--no-buckets] "
                        "[--refunds all|buckets|none]\n");
        return 2;
    }
    url = tu_url(argv[1]);
    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--no-buckets") == 0)
            buckets = false;
        else if (strcmp(argv[i], "--refunds") == 0 && i + 1 < argc) {
            i++;
            refunds = strcmp(argv[i], "none") == 0      ? REFUND_NONE
                      : strcmp(argv[i], "buckets") == 0 ? REFUND_BUCKETS
                                                        : REFUND_ALL;
        }
    }
    printf("partial grants and refunds on %s\n", url);
    started = time(NULL);
    sluice_set_allocator(reuse_malloc, reuse_realloc, reuse_free);
    /* A case that does not apply is left out, not skipped: a skip says
     * that a case which should have run did not. */
    for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
        if (applies(tests[k].test_func))
            tests[n++] = tests[k];
    rc = _cmocka_run_group_tests(url, tests, n, NULL, NULL);
    sluice_set_allocator(NULL, NULL, NULL);
    free_spares();
    return rc;
}
