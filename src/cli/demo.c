/* SPDX-License-Identifier: BSD-3-Clause */
/* demo.c - `sluice demo`: a burst of requests from one key, shown being
 * limited, then one more after the wait the last denial asked for. */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void demo_line(int i, const sluice_result *r)
{
    if (r->allowed)
        printf("  request %2d  allowed   %lld of %lld left\n", i,
               (long long)r->remaining, (long long)r->limit);
    else
        printf("  request %2d  DENIED    retry in %lld ms\n", i,
               (long long)r->retry_after_ms);
}

int cmd_demo(int argc, char **argv)
{
    cli_args a = {"mem://", "token:5/1s", NULL, 1, 8, 0,
                  0,        NULL,         NULL, 0, 0, 0};
    const char *key = "demo:user:42", *rule;
    long long n;
    sluice_options opts;
    sluice_ruleset rs;
    sluice_result r;
    sluice_status st;
    char err[512];
    sluice *sl;
    int i, allowed = 0, rc;

    if ((rc = cli_parse_args(argc, argv, "demo", "urn", &a)) >= 0)
        return rc;
    rule = a.rule;
    n = a.requests;
    if ((st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return cli_usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    sluice_reset(sl, key, strlen(key), &rs);
    printf("sluice demo: a burst of %lld requests from %s, rule %s, "
           "backend %s\n",
           n, key, rule, sluice_backend_name(sl));
    for (i = 1; i <= n; i++) {
        if ((st = sluice_acquire(sl, key, strlen(key), &rs, 1, &r)) !=
            SLUICE_OK)
            goto fail;
        allowed += r.allowed;
        demo_line(i, &r);
    }
    printf("%d of %lld admitted at once.", allowed, n);
    if (!r.allowed && r.retry_after_ms > 0) {
        printf(" Waiting the %lld ms the last denial asked for...\n",
               (long long)r.retry_after_ms);
        fflush(stdout);
        sleep_ms(r.retry_after_ms);
        if ((st = sluice_acquire(sl, key, strlen(key), &rs, 1, &r)) !=
            SLUICE_OK)
            goto fail;
        demo_line(i, &r);
    } else {
        printf("\n");
    }
    sluice_close(sl);
    return 0;
fail:
    cli_report(sluice_status_name(st), sluice_errmsg(sl));
    sluice_close(sl);
    return EXIT_BACKEND;
}
