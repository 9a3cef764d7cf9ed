/* SPDX-License-Identifier: BSD-3-Clause */
/* threads.c - one handle per thread: four threads send 100 requests each
 * on one key limited to 100 an hour, and exactly 100 of the 400 are
 * admitted. (One handle shared by all threads works too, and pipelines
 * their requests on one connection; tests/test_concurrency.c shows it.)
 * Handles on one mem://NAME share one in-process store (locked), and
 * handles on one Redis share the server.
 *   threads [URL]      default mem://threads-example */
#include "sluice.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum {
    THREADS = 4,
    REQUESTS = 100,
    LIMIT = 100
};

static const char key[] = "api:tenant:7";

typedef struct worker {
    pthread_t thread;
    const char *url;
    const sluice_ruleset *rules;
    int admitted, denied, failed;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char err[256];
    sluice_result r;
    sluice *sl;
    int i;

    /* Each thread opens its own handle and never shares it. */
    if (sluice_open(w->url, NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        w->failed = REQUESTS;
        return NULL;
    }
    for (i = 0; i < REQUESTS; i++) {
        if (sluice_acquire(sl, key, strlen(key), w->rules, 1, &r) !=
            SLUICE_OK) {
            fprintf(stderr, "%s\n", sluice_errmsg(sl));
            w->failed++;
        } else if (r.allowed) {
            w->admitted++;
        } else {
            w->denied++;
        }
    }
    sluice_close(sl);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "mem://threads-example";
    worker w[THREADS];
    char err[256];
    sluice_ruleset rules;
    sluice *keeper;
    int i, admitted = 0, denied = 0, failed = 0;

    if (sluice_ruleset_parse("fixed:100/1h", &rules, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open(url, NULL, &keeper, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* A mem://NAME store lives while a handle on it is open: this one keeps
     * it for the whole run, whatever order the threads open and close
     * theirs in. The reset lets the example run again on a Redis within the
     * hour; a service would not reset. */
    if (sluice_reset(keeper, key, strlen(key), &rules) != SLUICE_OK) {
        fprintf(stderr, "%s\n", sluice_errmsg(keeper));
        sluice_close(keeper);
        return 1;
    }
    for (i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].url = url;
        w[i].rules = &rules;
        if (pthread_create(&w[i].thread, NULL, work, &w[i]) != 0) {
            fprintf(stderr, "cannot start thread %d\n", i);
            return 1;
        }
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(w[i].thread, NULL);
        printf("thread %d: %d admitted, %d denied\n", i, w[i].admitted,
               w[i].denied);
        admitted += w[i].admitted;
        denied += w[i].denied;
        failed += w[i].failed;
    }
    sluice_close(keeper);
    printf("%d of %d admitted (limit %d), %d denied, %d failed\n", admitted,
           THREADS * REQUESTS, LIMIT, denied, failed);
    return admitted == LIMIT && failed == 0 ? 0 : 1;
}
