/* SPDX-License-Identifier: BSD-3-Clause */
/* quickstart.c - the README's API example, built with the project so that
 * it stays true: a daily and an hourly quota charged together. */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    char err[256];
    sluice_ruleset quota;
    sluice_result r;
    sluice *sl;
    int i;

    /* 1000 a day (days start at midnight UTC+8) and 100 an hour, both or
     * neither. */
    if (sluice_ruleset_parse("fixed:1000/1d,tz=+08:00+fixed:100/1h", &quota,
                             err, sizeof(err)) != SLUICE_OK ||
        sluice_open(url, NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (i = 0; i < 3; i++) {
        /* A request that costs 40 units of the quota. */
        if (sluice_acquire(sl, "tenant:7", strlen("tenant:7"), &quota, 40,
                           &r) != SLUICE_OK) {
            fprintf(stderr, "%s\n", sluice_errmsg(sl));
            break;
        }
        if (r.allowed)
            printf("allowed, %lld left\n", (long long)r.remaining);
        else
            printf("denied, retry in %lld ms\n", (long long)r.retry_after_ms);
    }
    sluice_close(sl);
    return 0;
}
