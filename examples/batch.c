/* SPDX-License-Identifier: BSD-3-Clause */
/* batch.c - sluice_acquire_many: independent requests, each with its own
 * key, rules and cost, decided in one round trip (one pipeline on Redis).
 * Every request gets its own status; one bad request does not stop the
 * others, and the call returns the first failure.
 *   batch [URL]        default mem:// */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

#define REQ(k, rs, c)           \
    {                           \
        k, sizeof(k) - 1, rs, c \
    }

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://";
    char err[256];
    sluice_ruleset per_user, per_ip;
    sluice_result out[5];
    sluice_status st;
    sluice *sl;
    size_t i;

    if (sluice_ruleset_parse("token:10/1s", &per_user, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_ruleset_parse("sliding:100/1m", &per_ip, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    {
        const sluice_request reqs[5] = {
            REQ("batch:user:1", &per_user, 1),
            REQ("batch:user:2", &per_user, 4),
            REQ("batch:ip:192.0.2.7", &per_ip, 1),
            REQ("batch:user:3", &per_user, 0),  /* bad: cost 0 */
            REQ("batch:user:1", &per_user, 11), /* can never fit 10 */
        };

        /* So that the example gives the same answers when run again on a
         * Redis; a service would not reset. */
        for (i = 0; i < 5; i++)
            sluice_reset(sl, reqs[i].key, reqs[i].key_len, reqs[i].rules);
        st = sluice_acquire_many(sl, reqs, 5, out);
        printf("acquire_many: %s\n", sluice_strerror(st));
        for (i = 0; i < 5; i++) {
            printf("  %zu %-20s cost %2lld: ", i, (const char *)reqs[i].key,
                   (long long)reqs[i].cost);
            if (out[i].status != SLUICE_OK)
                printf("error: %s\n", sluice_strerror(out[i].status));
            else if (out[i].allowed)
                printf("allowed, %lld of %lld left\n",
                       (long long)out[i].remaining, (long long)out[i].limit);
            else if (out[i].retry_after_ms < 0)
                printf("denied, can never fit a limit of %lld\n",
                       (long long)out[i].limit);
            else
                printf("denied, retry in %lld ms\n",
                       (long long)out[i].retry_after_ms);
        }
    }
    /* The first failure's message; the other requests were decided. */
    if (st != SLUICE_OK)
        printf("first failure: %s\n", sluice_errmsg(sl));
    sluice_close(sl);
    return st == SLUICE_ECOST ? 0 : 1;
}
