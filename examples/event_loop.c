/* SPDX-License-Identifier: BSD-3-Clause */
/* event_loop.c - decisions on a libevent loop: 400 requests on one key
 * limited to 100 an hour are started at once from one thread, and the loop
 * runs until every answer is in; exactly 100 are admitted. Nothing blocks:
 * the loop watches the handle's socket and fires its deadlines, and its
 * other work (here a 10 ms timer) goes on meanwhile.
 *   event_loop [URL]      default mem:// (redis:// and redis-cluster://
 *                         too) */
#include <event2/event.h>
#include <sluice/libevent.h>
#include <stdio.h>
#include <string.h>

enum {
    REQUESTS = 400,
    LIMIT = 100
};

typedef struct tally {
    struct event_base *base;
    int answered, admitted, denied, failed;
} tally;

static void done(sluice *sl, void *arg, sluice_status st,
                 const sluice_result *res, size_t n)
{
    tally *t = arg;

    (void)n;
    if (st != SLUICE_OK) {
        t->failed++;
        fprintf(stderr, "acquire: %s: %s\n", sluice_strerror(st),
                sluice_errmsg(sl));
    } else if (res[0].allowed) {
        t->admitted++;
    } else {
        t->denied++;
    }
    if (++t->answered == REQUESTS)
        event_base_loopbreak(t->base); /* the loop has nothing else to do */
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ++*(int *)arg;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    struct timeval ten_ms = {0, 10000};
    struct event *ticker;
    sluice_ruleset rules;
    sluice *sl;
    char err[256];
    tally t;
    int i, ticks = 0;

    memset(&t, 0, sizeof(t));
    if (sluice_ruleset_parse("fixed:100/1h", &rules, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    t.base = event_base_new();
    if (t.base == NULL || sluice_libevent_attach(sl, t.base) != SLUICE_OK) {
        fprintf(stderr, "attach: %s\n", sluice_errmsg(sl));
        return 1;
    }
    ticker = event_new(t.base, -1, EV_PERSIST, tick, &ticks);
    event_add(ticker, &ten_ms);
    for (i = 0; i < REQUESTS; i++) {
        if (sluice_acquire_async(sl, "api:tenant:7", 12, &rules, 1, done, &t) !=
            SLUICE_OK) {
            fprintf(stderr, "start: %s\n", sluice_errmsg(sl));
            return 1;
        }
    }
    printf("%zu decisions in flight\n", sluice_pending(sl));
    event_base_dispatch(t.base);
    printf("%d of %d admitted (limit %d), %d denied, %d failed\n", t.admitted,
           REQUESTS, LIMIT, t.denied, t.failed);
    sluice_close(sl); /* removes its events from the loop */
    event_free(ticker);
    event_base_free(t.base);
    return t.admitted == LIMIT && t.failed == 0 ? 0 : 1;
}
