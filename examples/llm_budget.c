/* SPDX-License-Identifier: BSD-3-Clause */
/* llm_budget.c - an LLM gateway's token budget, settled after each call
 * (docs/SEMANTICS.md, "settle"). A tenant may spend 1,000 tokens a minute,
 * "token:1000/1m": a bucket of 1,000 refilled at one token every 60 ms, so
 * that a burst of one large prompt fits while the minute's average holds.
 * The gateway does not know a call's size before it: it reserves an
 * estimate (1,000 tokens), calls the model, and settles the reservation
 * against the tokens the model reports. A call that used more leaves the
 * tenant in deficit, and the next call waits until it is paid back; one
 * that used less gives the rest back at once. A virtual clock makes the
 * answers the same on every run.
 *   llm_budget [URL]    default mem:// */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

/* 2026-03-02 09:00:00 UTC, in ms. */
#define START_MS 1772442000000LL
/* The estimate reserved before each call. */
#define ESTIMATE 1000

static int64_t virtual_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

static void stamp(int64_t at_ms)
{
    printf("%02lld:%02lld.%03lld  ", (long long)(at_ms / 60000),
           (long long)(at_ms % 60000 / 1000), (long long)(at_ms % 1000));
}

/* A call: reserve the estimate, "call the model", settle at used tokens.
 * Returns 0 when done or denied (the wait printed), 1 when the limiter
 * failed (its message printed). */
static int call(sluice *sl, const sluice_ruleset *budget, const char *tenant,
                int64_t used, int64_t at_ms)
{
    size_t len = strlen(tenant);
    sluice_result r;

    stamp(at_ms);
    if (sluice_acquire(sl, tenant, len, budget, ESTIMATE, &r) != SLUICE_OK)
        goto failed;
    if (!r.allowed) {
        printf("reserve %d tokens: denied, retry in %lld ms\n", ESTIMATE,
               (long long)r.retry_after_ms);
        return 0;
    }
    printf("reserve %d tokens: allowed, %lld left\n", ESTIMATE,
           (long long)r.remaining);
    /* ... the model answers, and reports the tokens it used ... */
    if (sluice_settle(sl, tenant, len, budget, ESTIMATE, used, &r) != SLUICE_OK)
        goto failed;
    stamp(at_ms);
    printf("settled at %lld used, %lld %s the estimate: %lld left, full "
           "again in %lld ms\n",
           (long long)used,
           (long long)(used > ESTIMATE ? used - ESTIMATE : ESTIMATE - used),
           used > ESTIMATE ? "over" : "under", (long long)r.remaining,
           (long long)r.reset_after_ms);
    return 0;
failed:
    fprintf(stderr, "%s\n", sluice_errmsg(sl));
    return 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    static const char tenant[] = "llm:tenant-42";
    int64_t now = START_MS;
    char err[256];
    sluice_options opts;
    sluice_ruleset budget;
    sluice_result r;
    sluice *sl;
    int bad = 0;

    sluice_options_init(&opts); /* every field its default */
    opts.clock = virtual_now;   /* a service keeps the default: real time */
    opts.clock_ctx = &now;
    if (sluice_ruleset_parse("token:1000/1m", &budget, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* The same answers when run again on a Redis. */
    sluice_reset(sl, tenant, strlen(tenant), &budget);
    /* The first call is larger than its estimate: 400 tokens over. */
    bad = call(sl, &budget, tenant, 1400, 0);
    /* At once, a request of 1 token waits for the deficit, 400 tokens,
     * and its own token (a peek: nothing charged). */
    if (bad == 0 &&
        sluice_peek(sl, tenant, strlen(tenant), &budget, 1, &r) == SLUICE_OK) {
        stamp(0);
        printf("a 1-token request: retry in %lld ms\n",
               (long long)r.retry_after_ms);
    }
    /* The next call waits for its 1,000 tokens and the deficit. */
    bad = bad || call(sl, &budget, tenant, 600, 0);
    now = START_MS + 84000;
    bad = bad || call(sl, &budget, tenant, 600, 84000);
    sluice_close(sl);
    return bad;
}
