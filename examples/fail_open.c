/* SPDX-License-Identifier: BSD-3-Clause */
/* fail_open.c - a handle that admits when its backend cannot decide (the
 * server down, too slow, answering with an error), and how to tell such an
 * answer from a real decision: result.status names the failure that the
 * policy papered over.
 *   fail_open [URL [DOWN_URL]]
 * URL (default mem://) is asked first; then DOWN_URL (default
 * redis://127.0.0.1:1, where nothing listens) shows the policy answering. */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

static const char key[] = "login:alice";

/* Asks three times and says who decided. Returns how many answers came
 * from the fail policy, or -1 on an error the policy does not cover. */
static int ask(const char *url, const sluice_ruleset *rules)
{
    sluice_options opts;
    sluice_result r;
    char err[256];
    sluice *sl;
    int i, by_policy = 0;

    sluice_options_init(&opts);   /* every field its default */
    opts.fail = SLUICE_FAIL_OPEN; /* or ?fail=open in the URL */
    opts.connect_timeout_ms = 200;
    opts.command_timeout_ms = 100;
    /* Opening connects lazily: an unreachable server shows on the first
     * request, where the policy can answer. */
    if (sluice_open(url, &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    printf("%s (%s):\n", url, sluice_backend_name(sl));
    for (i = 0; i < 3; i++) {
        if (sluice_acquire(sl, key, strlen(key), rules, 1, &r) != SLUICE_OK) {
            /* Bad input, EUNSUPPORTED, ENOMEM: never papered over. */
            fprintf(stderr, "%s\n", sluice_errmsg(sl));
            sluice_close(sl);
            return -1;
        }
        if (r.status == SLUICE_OK) {
            printf("  decided: %s, %lld of %lld left\n",
                   r.allowed ? "allowed" : "denied", (long long)r.remaining,
                   (long long)r.limit);
        } else {
            /* Admitted without a decision: count it, log it, alert on it. */
            printf("  %s by the fail policy: %s\n",
                   r.allowed ? "allowed" : "denied", sluice_strerror(r.status));
            printf("    (%s)\n", sluice_errmsg(sl));
            by_policy++;
        }
    }
    sluice_close(sl);
    return by_policy;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    const char *down = argc > 2 ? argv[2] : "redis://127.0.0.1:1";
    char err[256];
    sluice_ruleset rules;
    int up, failed;

    if (sluice_ruleset_parse("log:5/1m", &rules, err, sizeof(err)) !=
        SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    up = ask(url, &rules);
    failed = ask(down, &rules);
    printf("%d answers from the fail policy on %s, %d on %s\n", up, url, failed,
           down);
    return up == 0 && failed == 3 ? 0 : 1;
}
