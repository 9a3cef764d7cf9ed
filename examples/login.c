/* SPDX-License-Identifier: BSD-3-Clause */
/* login.c - a login endpoint that locks an account for 15 minutes after 5
 * wrong passwords within a minute (docs/SEMANTICS.md, "Penalties"). The
 * rule "fixed:4/1m,block=15m" counts an account's wrong passwords: the
 * fifth in a minute is denied, and that denial starts the block. While it
 * lasts, every attempt on the account is refused before its password is
 * checked, for every client, whichever process it reaches; a right
 * password forgets the count. A virtual clock walks through 16 minutes, so
 * the answers are the same on every run.
 *   login [URL]    default mem:// */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

/* 2026-03-02 09:00:00 UTC, in ms. */
#define START_MS 1772442000000LL

static int64_t virtual_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

/* One attempt: refused while the account is blocked, else the password
 * checked, and a wrong one counted. Returns 0, or 1 when the limiter
 * failed (its message printed). */
static int attempt(sluice *sl, const sluice_ruleset *failures,
                   const sluice_ruleset *gate, const char *account, bool right,
                   int64_t at_ms)
{
    size_t len = strlen(account);
    sluice_result r;

    printf("%02lld:%02lld  %s password: ", (long long)(at_ms / 60000),
           (long long)(at_ms % 60000 / 1000), right ? "right" : "wrong");
    /* Is the account blocked? A peek charges nothing, but answers what an
     * acquire would, a block it would start included; so it asks with the
     * gate's rules, whose limit the count of wrong passwords never
     * reaches: only a block denies it. */
    if (sluice_peek(sl, account, len, gate, 1, &r) != SLUICE_OK)
        goto failed;
    if (!r.allowed) {
        printf("locked, retry in %lld s\n",
               (long long)(r.retry_after_ms + 999) / 1000);
        return 0;
    }
    if (right) {
        /* Welcome: the count of wrong passwords starts again. */
        if (sluice_reset(sl, account, len, failures) != SLUICE_OK)
            goto failed;
        printf("welcome\n");
        return 0;
    }
    if (sluice_acquire(sl, account, len, failures, 1, &r) != SLUICE_OK)
        goto failed;
    if (r.allowed)
        printf("refused, locked after %lld more\n", (long long)r.remaining + 1);
    else
        printf("refused, account locked for %lld s\n",
               (long long)(r.retry_after_ms + 999) / 1000);
    return 0;
failed:
    fprintf(stderr, "%s\n", sluice_errmsg(sl));
    return 1;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    static const char account[] = "login:alice";
    /* Five wrong passwords 10 s apart, right ones during the block and
     * after it, then wrong ones again. */
    static const struct {
        int64_t at_ms;
        bool right;
    } tries[] = {{0, false},      {10000, false}, {20000, false},
                 {30000, false},  {40000, false}, {60000, true},
                 {900000, true},  {939999, true}, {940000, true},
                 {950000, false}, {960000, false}};
    int64_t now = START_MS;
    char err[256];
    sluice_options opts;
    sluice_ruleset failures, gate;
    sluice *sl;
    size_t i;
    int bad = 0;

    sluice_options_init(&opts); /* every field its default */
    opts.clock = virtual_now;   /* a service keeps the default: real time */
    opts.clock_ctx = &now;
    /* The gate shares the count's state (the same algorithm and period)
     * and its block; its own limit, 5, is never reached, as the count
     * stops at 4. */
    if (sluice_ruleset_parse("fixed:4/1m,block=15m", &failures, err,
                             sizeof(err)) != SLUICE_OK ||
        sluice_ruleset_parse("fixed:5/1m,block=15m", &gate, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* So that the example gives the same answers when run again on a
     * Redis: the reset also ends a block left by an earlier run. */
    sluice_reset(sl, account, strlen(account), &failures);
    for (i = 0; i < sizeof(tries) / sizeof(tries[0]) && bad == 0; i++) {
        now = START_MS + tries[i].at_ms;
        bad = attempt(sl, &failures, &gate, account, tries[i].right,
                      tries[i].at_ms);
    }
    sluice_close(sl);
    return bad;
}
