/* SPDX-License-Identifier: BSD-3-Clause */
/* test_close.c - what sluice_close() does to a decision in flight, as
 * sluice.h says per backend: mem:// decided it when the call started, so
 * its callback gets that decision and the charge stays; a Redis backend's
 * callback gets SLUICE_EIO, and a request the loop never sent charged
 * nothing.
 *   test_close URL     (mem://NAME, or a Redis URL or @file) */
#include "sluice.h"

#include "testutil.h"

static void no_watch(void *data, int fd, int events)
{
    (void)data;
    (void)fd;
    (void)events;
}

static void no_timer(void *data, int64_t timeout_ms)
{
    (void)data;
    (void)timeout_ms;
}

typedef struct seen {
    int calls;
    sluice_status st;
    bool allowed;
} seen;

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    seen *s = arg;

    (void)sl;
    (void)n;
    s->calls++;
    s->st = st;
    s->allowed = st == SLUICE_OK && res[0].allowed;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? tu_url(argv[1]) : "mem://close";
    bool mem = strncmp(url, "mem://", 6) == 0;
    sluice_loop lp = {.watch = no_watch, .timer = no_timer};
    sluice_options o;
    sluice_ruleset rs;
    sluice_result r;
    sluice *a = NULL, *b = NULL;
    seen s = {0, SLUICE_OK, false};
    char prefix[64], err[512];
    int rc = 1;

    snprintf(prefix, sizeof(prefix), "close%ld:", (long)getpid());
    sluice_options_init(&o);
    o.key_prefix = prefix;
    if (sluice_ruleset_parse("fixed:5/1h", &rs, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, &o, &a, err, sizeof(err)) != SLUICE_OK ||
        sluice_open(url, &o, &b, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "open %s: %s\n", url, err);
        goto out;
    }
    if (sluice_attach(a, &lp) != SLUICE_OK ||
        sluice_acquire_async(a, "k", 1, &rs, 3, on_done, &s) != SLUICE_OK) {
        fprintf(stderr, "start: %s\n", sluice_errmsg(a));
        goto out;
    }
    sluice_close(a);
    a = NULL;
    /* A peek of 1 reports what is left after it: 5 - charged - 1. */
    if (sluice_peek(b, "k", 1, &rs, 1, &r) != SLUICE_OK) {
        fprintf(stderr, "peek: %s\n", sluice_errmsg(b));
        goto out;
    }
    printf("%s: callback %d time(s), %s, allowed %d; %lld charged\n", url,
           s.calls, sluice_status_name(s.st), s.allowed,
           (long long)(4 - r.remaining));
    rc = 0;
    if (s.calls != 1 || s.st != (mem ? SLUICE_OK : SLUICE_EIO) ||
        s.allowed != mem || r.remaining != (mem ? 1 : 4)) {
        fprintf(stderr, "FAIL: want %s\n",
                mem ? "the decision, 3 charged" : "SLUICE_EIO, 0 charged");
        rc = 1;
    }
out:
    sluice_close(a);
    sluice_close(b);
    return rc;
}
