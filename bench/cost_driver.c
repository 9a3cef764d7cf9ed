/* SPDX-License-Identifier: BSD-3-Clause */
/* cost_driver.c - sends decisions through the library, 16 a batch, on one
 * hot key or on keys never seen, at a fixed virtual time, so that
 * bench/redis-cost.sh can count what each costs Redis under callgrind:
 *   sluice-cost-driver URL RULE hot|new N */
#include "sluice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 16

static int64_t fixed_time(void *ctx)
{
    (void)ctx;
    return 1763900000500LL; /* inside one window of every rule used */
}

int main(int argc, char **argv)
{
    static char keys[BATCH][48];
    sluice_request reqs[BATCH];
    sluice_result out[BATCH];
    sluice_options o;
    sluice_ruleset rs;
    sluice *sl = NULL;
    char err[256];
    long n, i, next = 0;
    int j, hot;

    if (argc != 5) {
        fprintf(stderr, "usage: sluice-cost-driver URL RULE hot|new N\n");
        return 2;
    }
    memset(&o, 0, sizeof(o));
    o.clock = fixed_time;
    o.command_timeout_ms = 10000; /* Redis runs under callgrind */
    if (sluice_ruleset_parse(argv[2], &rs, err, sizeof(err)) != SLUICE_OK ||
        sluice_open(argv[1], &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-cost-driver: %s\n", err);
        return 1;
    }
    hot = strcmp(argv[3], "hot") == 0;
    n = atol(argv[4]);
    for (i = 0; i < n; i += BATCH) {
        for (j = 0; j < BATCH; j++) {
            if (hot)
                snprintf(keys[j], sizeof(keys[j]), "hot");
            else
                snprintf(keys[j], sizeof(keys[j]), "k%ld-%ld", next++,
                         (long)getpid());
            reqs[j] = (sluice_request){keys[j], strlen(keys[j]), &rs, 1};
        }
        if (sluice_acquire_many(sl, reqs, BATCH, out) != SLUICE_OK) {
            fprintf(stderr, "sluice-cost-driver: %s\n", sluice_errmsg(sl));
            sluice_close(sl);
            return 1;
        }
    }
    sluice_close(sl);
    return 0;
}
