/* SPDX-License-Identifier: BSD-3-Clause */
/* transport.c - decisions/s through one handle for a given time, for
 * bench/tls.sh, which runs it on one server's TLS port and its plain TCP
 * port in turns:
 *   sluice-transport URL seq|loop50|loop1000 SECONDS
 * seq: one decision at a time (sluice_acquire); loopN: N in flight on a
 * libevent loop (sluice_acquire_async). fixed:1000000/1s on 10,000 keys;
 * prints the decisions per second. */
#include <event2/event.h>
#include <sluice/libevent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct run {
    sluice *sl;
    struct event_base *base;
    sluice_ruleset rules;
    double until;
    long done, failed, next, in_flight;
} run;

static void start(run *r);

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    run *r = arg;

    (void)sl;
    (void)res;
    (void)n;
    if (st == SLUICE_OK)
        r->done++;
    else
        r->failed++;
    if (now_s() < r->until)
        start(r);
    else if (--r->in_flight == 0)
        event_base_loopbreak(r->base);
}

static void start(run *r)
{
    char key[16];
    int len = snprintf(key, sizeof(key), "k%ld", r->next++ % 10000);

    if (sluice_acquire_async(r->sl, key, (size_t)len, &r->rules, 1, on_done,
                             r) != SLUICE_OK) {
        r->failed++;
        if (--r->in_flight == 0)
            event_base_loopbreak(r->base);
    }
}

int main(int argc, char **argv)
{
    run r;
    char err[512];
    double t0;
    long i, inflight;

    if (argc != 4) {
        fprintf(stderr, "usage: %s URL seq|loop50|loop1000 SECONDS\n", argv[0]);
        return 2;
    }
    memset(&r, 0, sizeof(r));
    if (sluice_ruleset_parse("fixed:1000000/1s", &r.rules, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(argv[1], NULL, &r.sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-transport: %s\n", err);
        return 1;
    }
    t0 = now_s();
    r.until = t0 + atof(argv[3]);
    if (strcmp(argv[2], "seq") == 0) {
        sluice_result res;

        while (now_s() < r.until) {
            char key[16];
            int len = snprintf(key, sizeof(key), "k%ld", r.next++ % 10000);

            if (sluice_acquire(r.sl, key, (size_t)len, &r.rules, 1, &res) ==
                SLUICE_OK)
                r.done++;
            else
                r.failed++;
        }
    } else {
        inflight = atol(argv[2] + 4);
        r.base = event_base_new();
        if (r.base == NULL || inflight <= 0 ||
            sluice_libevent_attach(r.sl, r.base) != SLUICE_OK) {
            fprintf(stderr, "sluice-transport: cannot attach: %s\n",
                    sluice_errmsg(r.sl));
            return 1;
        }
        r.in_flight = inflight;
        for (i = 0; i < inflight; i++)
            start(&r);
        event_base_dispatch(r.base);
    }
    printf("%.0f\n", (double)r.done / (now_s() - t0));
    sluice_close(r.sl);
    if (r.base != NULL)
        event_base_free(r.base);
    return r.failed > 0 ? 1 : 0;
}
