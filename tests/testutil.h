/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil.h - helpers shared by the test programs: backend URLs given as
 * "URL" or "@file", a virtual clock, and Redis key inspection. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include "sluice.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Resolves "@path" to the URL written in that file (by the server start
 * scripts); anything else is the URL itself. Returns static storage (four
 * calls' worth). */
static inline const char *tu_url(const char *arg)
{
    static char bufs[4][1024];
    static int next;
    char *buf = bufs[next++ % 4];
    FILE *f;
    size_t n;

    if (arg[0] != '@')
        return arg;
    f = fopen(arg + 1, "r");
    if (f == NULL) {
        fprintf(stderr,
                "cannot read the server URL from %s: was the server "
                "started (ctest fixture redis.start)?\n",
                arg + 1);
        exit(1);
    }
    n = fread(buf, 1, sizeof(bufs[0]) - 1, f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    return buf;
}

typedef struct tu_clock {
    int64_t t;
} tu_clock;

static inline int64_t tu_clock_now(void *ctx)
{
    return ((tu_clock *)ctx)->t;
}

/* Opens url with a virtual clock and a prefix unique to this process and
 * tag, so runs never see each other's keys. */
static inline sluice *tu_open(const char *url, tu_clock *clk, const char *tag)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    memset(&o, 0, sizeof(o));
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    size_t i;

    snprintf(prefix, sizeof(prefix), "t%ld-%.40s:", (long)getpid(), tag);
    for (i = 0; prefix[i] != '\0'; i++)
        if (prefix[i] == '{' || prefix[i] == '}')
            prefix[i] = '_';
    o.key_prefix = prefix;
    if (sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "open %s: %s\n", url, err);
        return NULL;
    }
    return sl;
}

#endif /* SL_TESTUTIL_H */
