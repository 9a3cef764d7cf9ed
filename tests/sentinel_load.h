/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_load.h - test_sentinel's load: THREADS threads deciding on one
 * key through one handle while the master changes, and one more deciding
 * on a limited key about once a millisecond from the fault on; when each
 * good decision and each failure came, by the ms after the fault. */
#ifndef SL_SENTINEL_LOAD_H
#define SL_SENTINEL_LOAD_H

#include "sentinel_kit.h"

#define THREADS 4
#define LIMIT   500 /* the window limit decided beside the load */
#define SPAN_MS 65536

static inline sluice *open_url(const char *u, const char *query,
                               const sluice_options *o)
{
    char full[1600], err[512];
    sluice *sl = NULL;

    snprintf(full, sizeof(full), "%s%s%s", u,
             query[0] == '\0'         ? ""
             : strchr(u, '?') != NULL ? "&"
                                      : "?",
             query);
    if (sluice_open(full, o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open: %s", err);
    return sl;
}

static inline sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

static inline int64_t first_at(const unsigned char *at, int64_t from)
{
    int64_t k;

    for (k = from < 0 ? 0 : from; k < SPAN_MS; k++)
        if (at[k])
            return k;
    return -1;
}

static inline int64_t last_at(const unsigned char *at)
{
    int64_t k;

    for (k = SPAN_MS - 1; k >= 0; k--)
        if (at[k])
            return k;
    return -1;
}

/* Load from threads on one handle while the master changes: THREADS
 * decide on one key under a limit never reached, so that the count the
 * new master holds tells how many acknowledged decisions the failover
 * lost; one more decides from the fault on, about once a millisecond, on
 * a key limited to LIMIT a window (the handle's clock stands still: one
 * window), which the lost charges would let admit past it. When each
 * good decision and each failure came is kept by the ms after t0. */
typedef struct load {
    sluice *sl;
    tu_clock clock;
    char key[64], limit_key[64];
    pthread_mutex_t mu; /* over every field below */
    int stop;
    int64_t t0;        /* the fault (monotonic); 0 before */
    int64_t resume_at; /* no calls before (monotonic); 0 none */
    long decided, policy, failed, unknown, other, by_status[32];
    long limit_admitted, limit_denied, limit_failed;
    unsigned char good[SPAN_MS], bad[SPAN_MS];
    char other_msg[256], fail_msg[256];
    char rediss_msg[256]; /* a failure that suggested rediss:// */
    pthread_t th[THREADS + 1];
    int nth;
} load;

static load *running; /* stopped by the teardown when a test fails */

static inline void mark(unsigned char *at, const load *l)
{
    int64_t ms;

    if (l->t0 > 0 && (ms = tu_clock_ms(CLOCK_MONOTONIC) - l->t0) >= 0 &&
        ms < SPAN_MS)
        at[ms] = 1;
}

/* Whether to call now: false to stop, *wait set to pause a while. */
static inline bool go_on(load *l, bool *wait)
{
    bool on;

    pthread_mutex_lock(&l->mu);
    on = !l->stop;
    *wait = l->resume_at > tu_clock_ms(CLOCK_MONOTONIC);
    pthread_mutex_unlock(&l->mu);
    if (on && *wait)
        tu_sleep_ms(1);
    return on;
}

static inline void *hammer(void *arg)
{
    load *l = arg;
    sluice_ruleset rs = rules("fixed:1000000000/1h");
    bool wait;

    while (go_on(l, &wait)) {
        sluice_result r;
        sluice_status st;

        if (wait)
            continue;
        memset(&r, 0, sizeof(r));
        st = sluice_acquire(l->sl, l->key, strlen(l->key), &rs, 1, &r);
        pthread_mutex_lock(&l->mu);
        if (st == SLUICE_OK && r.status == SLUICE_OK && r.allowed) {
            l->decided++;
            mark(l->good, l);
        } else if (st == SLUICE_OK && r.status != SLUICE_OK && r.allowed) {
            l->policy++; /* fail=open's answer, its status the failure */
            l->by_status[r.status % 32]++;
            l->unknown += r.status == SLUICE_EIO || r.status == SLUICE_ETIMEOUT;
            mark(l->bad, l);
            snprintf(l->fail_msg, sizeof(l->fail_msg), "%s",
                     sluice_errmsg(l->sl));
            if (strstr(l->fail_msg, "use rediss://") != NULL)
                snprintf(l->rediss_msg, sizeof(l->rediss_msg), "%s",
                         l->fail_msg);
        } else if (st == SLUICE_ECONNECT || st == SLUICE_EIO ||
                   st == SLUICE_ETIMEOUT || st == SLUICE_ESERVER) {
            l->failed++; /* fail=error */
            l->by_status[st % 32]++;
            l->unknown += st == SLUICE_EIO || st == SLUICE_ETIMEOUT;
            mark(l->bad, l);
            snprintf(l->fail_msg, sizeof(l->fail_msg), "%s",
                     sluice_errmsg(l->sl));
            if (strstr(l->fail_msg, "use rediss://") != NULL)
                snprintf(l->rediss_msg, sizeof(l->rediss_msg), "%s",
                         l->fail_msg);
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

/* The limited key, about once a millisecond from the fault on: a call
 * every ms of the time since t0, at once when behind (a slow machine). */
static inline void *limited(void *arg)
{
    load *l = arg;
    char rule[64];
    sluice_ruleset rs;
    bool wait;
    int64_t calls = 0;

    snprintf(rule, sizeof(rule), "fixed:%d/1h", LIMIT);
    rs = rules(rule);
    while (go_on(l, &wait)) {
        sluice_result r;
        sluice_status st;
        int64_t t0;

        pthread_mutex_lock(&l->mu);
        t0 = l->t0;
        pthread_mutex_unlock(&l->mu);
        if (t0 == 0 || wait || tu_clock_ms(CLOCK_MONOTONIC) < t0 + calls) {
            tu_sleep_ms(1);
            continue;
        }
        calls++;
        memset(&r, 0, sizeof(r));
        st = sluice_acquire(l->sl, l->limit_key, strlen(l->limit_key), &rs, 1,
                            &r);
        pthread_mutex_lock(&l->mu);
        if (st == SLUICE_OK && r.status == SLUICE_OK)
            r.allowed ? l->limit_admitted++ : l->limit_denied++;
        else
            l->limit_failed++;
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

/* Opens u with query and a clock that stands still, and starts the
 * threads. */
static inline void load_start(load *l, const char *u, const char *query)
{
    static int runs;
    sluice_options o;
    int i;

    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    /* The process's own keys: a run again on the same fixture starts at
     * 0. */
    runs++;
    snprintf(l->key, sizeof(l->key), "ctr-%ld-%d", (long)getpid(), runs);
    snprintf(l->limit_key, sizeof(l->limit_key), "lim-%ld-%d", (long)getpid(),
             runs);
    l->clock.t = tu_clock_ms(CLOCK_REALTIME);
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &l->clock;
    l->sl = open_url(u, query, &o);
    running = l;
    for (i = 0; i < THREADS; i++)
        pthread_create(&l->th[l->nth++], NULL, hammer, l);
    pthread_create(&l->th[l->nth++], NULL, limited, l);
}

/* The fault begins now; the calls pause for pause_ms. */
static inline void load_begin(load *l, int64_t pause_ms)
{
    pthread_mutex_lock(&l->mu);
    l->t0 = tu_clock_ms(CLOCK_MONOTONIC);
    l->resume_at = pause_ms > 0 ? l->t0 + pause_ms : 0;
    pthread_mutex_unlock(&l->mu);
}

static inline void load_stop(load *l)
{
    int i;

    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_mutex_unlock(&l->mu);
    for (i = 0; i < l->nth; i++)
        pthread_join(l->th[i], NULL);
    l->nth = 0;
    running = NULL;
}

static inline void load_close(load *l)
{
    sluice_close(l->sl);
    pthread_mutex_destroy(&l->mu);
}

#endif /* SL_SENTINEL_LOAD_H */
