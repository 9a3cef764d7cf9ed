/* SPDX-License-Identifier: BSD-3-Clause */
/* composite.c - a daily and an hourly quota on one key, all or nothing: a
 * request is admitted only if both admit it, and then both are charged; a
 * request that either denies charges neither. A virtual clock walks through
 * two hours of one day, so the answers are the same on every run.
 *   composite [URL]    default mem:// */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

/* 2026-03-02 09:00:00 UTC, in ms. */
#define START_MS 1772442000000LL
#define HOUR_MS  3600000LL

static int64_t virtual_now(void *ctx)
{
    return *(const int64_t *)ctx;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    static const char key[] = "tenant:7";
    /* At minute 0, 10, 20 of the first hour, then of the second. */
    static const int64_t at_ms[] = {
        0, 600000, 1200000, HOUR_MS, HOUR_MS + 600000, HOUR_MS + 1200000};
    int64_t now = START_MS;
    char err[256];
    sluice_options opts;
    sluice_ruleset quota;
    sluice_result r;
    sluice *sl;
    size_t i;
    int admitted = 0;

    sluice_options_init(&opts); /* every field its default */
    opts.clock = virtual_now;   /* a service keeps the default: real time */
    opts.clock_ctx = &now;
    /* 4 a day (days start at midnight UTC) and 2 an hour. */
    if (sluice_ruleset_parse("fixed:4/1d+fixed:2/1h", &quota, err,
                             sizeof(err)) != SLUICE_OK ||
        sluice_open(url, &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* So that the example gives the same answers when run again on a
     * Redis; a service would not reset. */
    sluice_reset(sl, key, strlen(key), &quota);
    for (i = 0; i < sizeof(at_ms) / sizeof(at_ms[0]); i++) {
        now = START_MS + at_ms[i];
        if (sluice_acquire(sl, key, strlen(key), &quota, 1, &r) != SLUICE_OK) {
            fprintf(stderr, "%s\n", sluice_errmsg(sl));
            sluice_close(sl);
            return 1;
        }
        /* limit and remaining are those of the rule with the least left:
         * limit 2 is the hourly quota, limit 4 the daily one. */
        printf("%02lld:%02lld  ", (long long)(9 + at_ms[i] / HOUR_MS),
               (long long)(at_ms[i] % HOUR_MS / 60000));
        if (r.allowed) {
            admitted++;
            printf("allowed  %lld left of the %s quota\n",
                   (long long)r.remaining, r.limit == 2 ? "hourly" : "daily");
        } else {
            printf("denied   by the %s quota, retry in %lld min\n",
                   r.limit == 2 ? "hourly" : "daily",
                   (long long)(r.retry_after_ms / 60000));
        }
    }
    sluice_close(sl);
    /* 09:20 was denied by the hourly quota and charged the daily one
     * nothing, so 10:00 and 10:10 still fit the day's 4. */
    printf("%d of 6 admitted\n", admitted);
    return admitted == 4 ? 0 : 1;
}
