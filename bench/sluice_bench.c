/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice_bench.c - measures sluice's backends and algorithms against the
 * physical floor (a raw INCR and a trivial EVALSHA, same client, same
 * connection pattern) in one run:
 *   sluice-bench --target NAME=URL[@servers] ... [--seconds S] [--json F]
 * Each cell: backend x algorithm x key pattern x concurrency, for S seconds.
 * Figures: decisions/s, latency p50/p99/p99.9, Redis commands, round trips
 * and Redis CPU (commandstats usec) per decision, memory per limited key,
 * and admitted against the exact bound on the hot key. */
#include "sluice.h"

#include "backend.h"
#include "internal.h"

#include <hiredis/hiredis.h>

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NKEYS    10000
#define THREADS  50
#define PIPE     16
#define MAX_TGTS 8

typedef enum pattern {
    PAT_HOT,     /* one key */
    PAT_UNIFORM, /* 10,000 keys, uniform */
    PAT_ZIPF     /* 10,000 keys, Zipf s = 1 */
} pattern;

typedef enum mode {
    MODE_SEQ,     /* one connection, one decision at a time */
    MODE_PIPE,    /* one connection, 16 in flight (acquire-many) */
    MODE_THREADS, /* 50 threads, each its own handle */
    MODE_PIPE50   /* one connection, 50 in flight (acquire-many) */
} mode;

static const char *const pattern_names[] = {"hot", "uniform", "zipf"};
static const char *const mode_names[] = {"seq", "pipe16", "conc50", "pipe50"};

/* Decisions in flight on one connection. */
static int batch_of(mode m)
{
    return m == MODE_PIPE ? PIPE : m == MODE_PIPE50 ? 50 : 1;
}

typedef struct target {
    char name[32];
    char url[512];
    char servers[512]; /* host:port,... whose INFO to read */
} target;

static target targets[MAX_TGTS];
static size_t ntargets;
static double seconds = 1.0;
static double zipf_cdf[NKEYS];
static FILE *json;
static bool json_first = true;

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t real_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static unsigned next_key(pattern p, uint64_t *rng)
{
    double u;
    unsigned lo = 0, hi = NKEYS - 1;

    switch (p) {
    case PAT_HOT:
        return 0;
    case PAT_UNIFORM:
        return (unsigned)(xorshift(rng) % NKEYS);
    case PAT_ZIPF:
        u = (double)(xorshift(rng) >> 11) / 9007199254740992.0;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;

            if (zipf_cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo;
    }
    return 0;
}

/* ---- Redis statistics of the servers behind a target ---- */

typedef struct rstats {
    double calls, usec; /* commands, and their usec */
} rstats;

/* Connects to every "host:port" of the comma-separated list in turn and
 * calls fn with the connection; unreachable servers are skipped. */
static void each_server(const char *servers,
                        void (*fn)(redisContext *c, void *ctx), void *ctx)
{
    char list[512], *save = NULL, *hp;

    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",", &save); hp != NULL;
         hp = strtok_r(NULL, ",", &save)) {
        char host[256];
        int port;
        redisContext *c;

        if (sscanf(hp, "%255[^:]:%d", host, &port) != 2)
            continue;
        c = redisConnect(host, port);
        if (c != NULL && c->err == 0)
            fn(c, ctx);
        if (c != NULL)
            redisFree(c);
    }
}

static void add_stats(redisContext *c, void *ctx)
{
    rstats *out = ctx;
    redisReply *r = redisCommand(c, "INFO commandstats");
    const char *p;

    for (p = r ? r->str : ""; (p = strstr(p, "cmdstat_")) != NULL; p++) {
        double calls = 0, usec = 0;
        const char *colon = strchr(p, ':');

        /* The harness's own INFO, CONFIG, MEMORY and SCAN do not count. */
        if (strncmp(p, "cmdstat_info", 12) == 0 ||
            strncmp(p, "cmdstat_config", 14) == 0 ||
            strncmp(p, "cmdstat_memory", 14) == 0 ||
            strncmp(p, "cmdstat_scan", 12) == 0)
            continue;
        if (colon != NULL &&
            sscanf(colon, ":calls=%lf,usec=%lf", &calls, &usec) == 2) {
            out->calls += calls;
            out->usec += usec;
        }
    }
    if (r != NULL)
        freeReplyObject(r);
}

static void read_stats(const char *servers, rstats *out)
{
    memset(out, 0, sizeof(*out));
    each_server(servers, add_stats, out);
}

typedef struct memsample {
    const char *prefix;
    double bytes;
    long tags;
} memsample;

/* Adds MEMORY USAGE of every key of up to 20 limited keys on c. */
static void add_memory(redisContext *c, void *ctx)
{
    memsample *ms = ctx;
    redisReply *r = redisCommand(c, "SCAN 0 MATCH %s* COUNT 1000", ms->prefix);
    size_t i, j;

    for (i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
                i < r->element[1]->elements && i < 20;
         i++) {
        const char *k = r->element[1]->element[i]->str;
        const char *close = strchr(k, '}');
        redisReply *all, *m;

        if (close == NULL)
            continue;
        /* Every key of this limited key: "<prefix>{K}:*". */
        all = redisCommand(c, "KEYS %b:*", k, (size_t)(close - k + 1));
        for (j = 0;
             all != NULL && all->type == REDIS_REPLY_ARRAY && j < all->elements;
             j++) {
            m = redisCommand(c, "MEMORY USAGE %b", all->element[j]->str,
                             all->element[j]->len);
            if (m != NULL && m->type == REDIS_REPLY_INTEGER)
                ms->bytes += (double)m->integer;
            if (m != NULL)
                freeReplyObject(m);
        }
        if (all != NULL)
            freeReplyObject(all);
        ms->tags++;
    }
    if (r != NULL)
        freeReplyObject(r);
}

/* Average MEMORY USAGE of a limited key (all its stored keys), over a
 * sample of up to 20 limited keys per server under prefix. */
static double memory_per_key(const char *servers, const char *prefix)
{
    memsample ms = {prefix, 0, 0};

    each_server(servers, add_memory, &ms);
    return ms.tags == 0 ? 0 : ms.bytes / (double)ms.tags;
}

/* ---- one cell ---- */

typedef struct cell {
    const target *tgt;
    const char *rule;  /* NULL: a floor */
    const char *floor; /* "INCR" or "EVALSHA" */
    pattern pat;
    mode md;
    char prefix[64];
    /* results */
    double dps, p50, p99, p999, cmds, rtts, usec, mem, accuracy;
    long decisions, admitted, errors;
} cell;

typedef struct worker {
    cell *c;
    int id;
    int64_t deadline;
    uint32_t *lat; /* microseconds per decision */
    size_t nlat, cap;
    long decisions, admitted, errors;
    uint64_t round_trips;
    int64_t first_ms, last_ms; /* hot key admissions, for accuracy */
} worker;

static void add_lat(worker *w, int64_t us, long n)
{
    long i;

    for (i = 0; i < n; i++) {
        if (w->nlat == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 65536;
            w->lat = realloc(w->lat, w->cap * sizeof(*w->lat));
        }
        w->lat[w->nlat++] = (uint32_t)(us > 0xffffffffLL ? 0xffffffffLL : us);
    }
}

static const char trivial_script[] = "return redis.call('INCR', KEYS[1])";
static char trivial_sha[41];

/* The floor: raw INCR, or EVALSHA of a one-key script, with hiredis. */
static void *floor_worker(void *arg)
{
    worker *w = arg;
    cell *c = w->c;
    char host[256];
    int port;
    redisContext *rc;
    uint64_t rng = (uint64_t)0x9e3779b97f4a7c15ULL ^ (uint64_t)w->id;
    int batch = batch_of(c->md);

    if (sscanf(strstr(c->tgt->url, "://") + 3, "%255[^:]:%d", host, &port) != 2)
        return NULL;
    rc = redisConnect(host, port);
    if (rc == NULL || rc->err)
        return NULL;
    while (now_us() < w->deadline) {
        int64_t t0 = now_us();
        int i;

        for (i = 0; i < batch; i++) {
            char key[128];

            snprintf(key, sizeof(key), "%s{k%u}:f", c->prefix,
                     next_key(c->pat, &rng));
            if (strcmp(c->floor, "INCR") == 0)
                redisAppendCommand(rc, "INCR %s", key);
            else
                redisAppendCommand(rc, "EVALSHA %s 1 %s", trivial_sha, key);
        }
        for (i = 0; i < batch; i++) {
            void *r = NULL;

            if (redisGetReply(rc, &r) != REDIS_OK || r == NULL) {
                w->errors++;
                redisFree(rc);
                return NULL;
            }
            if (((redisReply *)r)->type == REDIS_REPLY_ERROR)
                w->errors++;
            freeReplyObject(r);
        }
        w->round_trips++;
        add_lat(w, now_us() - t0, batch);
        w->decisions += batch;
    }
    redisFree(rc);
    return NULL;
}

static void *sluice_worker(void *arg)
{
    worker *w = arg;
    cell *c = w->c;
    sluice_options o;
    sluice_ruleset rs;
    sluice *sl = NULL;
    char err[512];
    uint64_t rng = (uint64_t)0x9e3779b97f4a7c15ULL ^ ((uint64_t)w->id << 32);
    char keys[50][32];
    sluice_request reqs[50];
    sluice_result out[50];
    int batch = batch_of(c->md), i;

    memset(&o, 0, sizeof(o));
    o.key_prefix = c->prefix;
    o.command_timeout_ms = 2000;
    if (sluice_ruleset_parse(c->rule, &rs, err, sizeof(err)) != SLUICE_OK ||
        sluice_open(c->tgt->url, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        w->errors++;
        return NULL;
    }
    while (now_us() < w->deadline) {
        int64_t t0 = now_us();
        sluice_status st;

        for (i = 0; i < batch; i++) {
            snprintf(keys[i], sizeof(keys[i]), "k%u", next_key(c->pat, &rng));
            reqs[i] = (sluice_request){keys[i], strlen(keys[i]), &rs, 1};
        }
        if (batch == 1)
            st = sluice_acquire(sl, keys[0], strlen(keys[0]), &rs, 1, out);
        else
            st = sluice_acquire_many(sl, reqs, (size_t)batch, out);
        if (st != SLUICE_OK) {
            w->errors++;
            continue;
        }
        add_lat(w, now_us() - t0, batch);
        w->decisions += batch;
        for (i = 0; i < batch; i++) {
            if (out[i].allowed) {
                int64_t t = real_ms();

                w->admitted++;
                if (w->first_ms == 0)
                    w->first_ms = t;
                w->last_ms = t;
            }
        }
    }
    w->round_trips = sl_handle_round_trips(sl);
    sluice_close(sl);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* The most a rule may admit on one key between two instants. */
static double exact_bound(const char *rule, int64_t from, int64_t to)
{
    sluice_ruleset rs;
    const sluice_rule *r;
    double span = (double)(to - from);

    if (sluice_ruleset_parse(rule, &rs, NULL, 0) != SLUICE_OK)
        return 0;
    r = &rs.rules[0];
    switch (r->algorithm) {
    case SLUICE_FIXED:
        return (double)r->limit *
               (double)(to / r->period_ms - from / r->period_ms + 1);
    case SLUICE_SLIDING:
    case SLUICE_LOG:
        /* Any span of P admits at most L. */
        return (double)r->limit * (span / (double)r->period_ms + 1);
    case SLUICE_TOKEN:
    case SLUICE_GCRA:
        return (double)sl_rule_capacity(r) +
               (double)r->limit * span / (double)r->period_ms;
    }
    return 0;
}

static void run_cell(cell *c)
{
    int n = c->md == MODE_THREADS ? THREADS : 1, i;
    worker *ws = calloc((size_t)n, sizeof(*ws));
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    rstats before, after;
    int64_t t0, t1, first = 0, last = 0;
    size_t total = 0, k = 0;
    uint32_t *all;
    uint64_t rtts = 0;

    snprintf(c->prefix, sizeof(c->prefix), "b%ld-%lld:", (long)getpid(),
             (long long)now_us());
    read_stats(c->tgt->servers, &before);
    t0 = now_us();
    for (i = 0; i < n; i++) {
        ws[i].c = c;
        ws[i].id = i;
        ws[i].deadline = t0 + (int64_t)(seconds * 1e6);
        pthread_create(&th[i], NULL, c->rule ? sluice_worker : floor_worker,
                       &ws[i]);
    }
    for (i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    t1 = now_us();
    read_stats(c->tgt->servers, &after);
    c->decisions = c->admitted = c->errors = 0;
    for (i = 0; i < n; i++) {
        c->decisions += ws[i].decisions;
        c->admitted += ws[i].admitted;
        c->errors += ws[i].errors;
        total += ws[i].nlat;
        rtts += ws[i].round_trips;
        if (ws[i].first_ms && (first == 0 || ws[i].first_ms < first))
            first = ws[i].first_ms;
        if (ws[i].last_ms > last)
            last = ws[i].last_ms;
    }
    all = malloc((total ? total : 1) * sizeof(*all));
    for (i = 0; i < n; i++) {
        memcpy(all + k, ws[i].lat, ws[i].nlat * sizeof(*all));
        k += ws[i].nlat;
        free(ws[i].lat);
    }
    qsort(all, total, sizeof(*all), cmp_u32);
    c->dps = (double)c->decisions / ((double)(t1 - t0) / 1e6);
    c->p50 = total ? all[total / 2] : 0;
    c->p99 = total ? all[(size_t)((double)total * 0.99)] : 0;
    c->p999 = total ? all[(size_t)((double)total * 0.999)] : 0;
    c->cmds =
        c->decisions ? (after.calls - before.calls) / (double)c->decisions : 0;
    c->usec =
        c->decisions ? (after.usec - before.usec) / (double)c->decisions : 0;
    c->rtts = c->decisions ? (double)rtts / (double)c->decisions : 0;
    c->mem = c->rule && c->pat == PAT_UNIFORM
                 ? memory_per_key(c->tgt->servers, c->prefix)
                 : 0;
    c->accuracy = c->rule && c->pat == PAT_HOT && first
                      ? (double)c->admitted / exact_bound(c->rule, first, last)
                      : 0;
    free(all);
    free(ws);
    free(th);
}

static void print_cell(const cell *c, size_t idx, size_t total)
{
    char what[96];

    snprintf(what, sizeof(what), "%s %s", c->tgt->name,
             c->rule ? c->rule : c->floor);
    printf("%-44s %-7s %-6s %10.0f %7.0f %7.0f %8.0f %5.2f %5.2f %7.2f "
           "%7.0f %6.3f %s\n",
           what, pattern_names[c->pat], mode_names[c->md], c->dps, c->p50,
           c->p99, c->p999, c->cmds, c->rtts, c->usec, c->mem, c->accuracy,
           c->errors ? "ERRORS" : "");
    fflush(stdout);
    fprintf(stderr, "\rsluice-bench: %zu/%zu cells", idx, total);
    if (json != NULL) {
        fprintf(json,
                "%s\n  {\"target\": \"%s\", \"what\": \"%s\", \"kind\": "
                "\"%s\", \"pattern\": \"%s\", \"mode\": \"%s\", "
                "\"decisions_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": "
                "%.0f, \"p999_us\": %.0f, \"commands_per_decision\": %.3f, "
                "\"round_trips_per_decision\": %.3f, "
                "\"redis_usec_per_decision\": %.3f, "
                "\"memory_bytes_per_key\": %.0f, \"admitted\": %ld, "
                "\"decisions\": %ld, \"accuracy\": %.4f, \"errors\": %ld}",
                json_first ? "" : ",", c->tgt->name,
                c->rule ? c->rule : c->floor, c->rule ? "sluice" : "floor",
                pattern_names[c->pat], mode_names[c->md], c->dps, c->p50,
                c->p99, c->p999, c->cmds, c->rtts, c->usec, c->mem, c->admitted,
                c->decisions, c->accuracy, c->errors);
        json_first = false;
    }
}

/* SCRIPT LOAD of the floor's script on a server (a proxy cannot load
 * scripts: its backends can). */
static void load_script(redisContext *c, void *ctx)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", trivial_script);

    (void)ctx;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(trivial_sha, sizeof(trivial_sha), "%s", r->str);
    if (r != NULL)
        freeReplyObject(r);
}

/* N sequential decisions on url: run under callgrind twice with two N
 * to get the client's instructions per decision. */
static int instructions(const char *url, long n)
{
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl;
    char err[512];
    uint64_t rng = 88172645463325252ULL;
    long i;
    static char keys[NKEYS][8];

    /* Key names are made before, so that only sluice's work is counted. */
    for (i = 0; i < NKEYS; i++)
        snprintf(keys[i], sizeof(keys[i]), "k%ld", i);
    if (sluice_ruleset_parse("fixed:1000/1s", &rs, NULL, 0) != SLUICE_OK ||
        sluice_open(url, NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return 1;
    }
    for (i = 0; i < n; i++) {
        const char *key = keys[next_key(PAT_UNIFORM, &rng)];

        if (sluice_acquire(sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK) {
            fprintf(stderr, "sluice-bench: %s\n", sluice_errmsg(sl));
            sluice_close(sl);
            return 1;
        }
    }
    sluice_close(sl);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: sluice-bench --target NAME=URL[|host:port,...] ... "
            "[--seconds S] [--json FILE]\n"
            "       sluice-bench --instructions URL --decisions N\n"
            "  NAME redis, multi, twemproxy, lua-proxy, cluster, mem: the "
            "backends;\n"
            "  the servers after '|' are read with INFO (default: the "
            "URL's).\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"target", required_argument, NULL, 't'},
        {"seconds", required_argument, NULL, 's'},
        {"json", required_argument, NULL, 'j'},
        {"instructions", required_argument, NULL, 'i'},
        {"decisions", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0}};
    static const char *const rules[] = {"fixed:1000/1s", "sliding:1000/1s",
                                        "log:100/1s", "token:1000/1s",
                                        "gcra:1000/1s"};
    cell *cells;
    size_t ncells = 0, cap = 512, i, r;
    int opt;
    double h = 0;
    const char *instr_url = NULL;
    long instr_n = 0;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 't': {
            target *t = &targets[ntargets];
            char *eq = strchr(optarg, '='), *bar;

            if (eq == NULL || ntargets == MAX_TGTS) {
                usage();
                return 2;
            }
            snprintf(t->name, sizeof(t->name), "%.*s", (int)(eq - optarg),
                     optarg);
            snprintf(t->url, sizeof(t->url), "%s", eq + 1);
            /* "URL|host:port,...": the servers to read INFO from. */
            if ((bar = strchr(t->url, '|')) != NULL) {
                snprintf(t->servers, sizeof(t->servers), "%s", bar + 1);
                *bar = '\0';
            } else if (strncmp(t->url, "mem://", 6) != 0) {
                const char *p = strstr(t->url, "://") + 3, *a = strchr(p, '@');

                snprintf(t->servers, sizeof(t->servers), "%.*s",
                         (int)strcspn(a ? a + 1 : p, "/?"), a ? a + 1 : p);
            }
            ntargets++;
            break;
        }
        case 's':
            seconds = atof(optarg);
            break;
        case 'i':
            instr_url = optarg;
            break;
        case 'n':
            instr_n = atol(optarg);
            break;
        case 'j':
            json = fopen(optarg, "w");
            break;
        default:
            usage();
            return 2;
        }
    }
    if (instr_url != NULL)
        return instructions(instr_url, instr_n);
    if (ntargets == 0) {
        usage();
        return 2;
    }
    for (i = 0; i < NKEYS; i++) {
        h += 1.0 / (double)(i + 1);
        zipf_cdf[i] = h;
    }
    for (i = 0; i < NKEYS; i++)
        zipf_cdf[i] /= h;
    cells = calloc(cap, sizeof(*cells));
    /* The floors first, per target that speaks plain Redis. */
    for (i = 0; i < ntargets; i++) {
        const target *t = &targets[i];
        bool plain = strncmp(t->url, "redis://", 8) == 0 ||
                     strncmp(t->url, "twemproxy://", 12) == 0;
        int m;

        if (!plain || (strcmp(t->name, "redis") != 0 &&
                       strcmp(t->name, "twemproxy") != 0))
            continue;
        each_server(t->servers, load_script, NULL);
        for (m = 0; m < 3; m++) {
            cells[ncells++] = (cell){
                .tgt = t, .floor = "INCR", .pat = PAT_UNIFORM, .md = (mode)m};
            cells[ncells++] = (cell){.tgt = t,
                                     .floor = "EVALSHA",
                                     .pat = PAT_UNIFORM,
                                     .md = (mode)m};
        }
    }
    /* Every backend x algorithm x mode on uniform keys; the key patterns
     * on the Lua backend. */
    for (i = 0; i < ntargets; i++) {
        for (r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
            int m, p;

            if (strcmp(targets[i].name, "twemproxy") == 0 &&
                (strstr(rules[r], "token") || strstr(rules[r], "gcra")))
                continue; /* refused by design */
            for (m = 0; m < 3; m++)
                for (p = 0; p < 3; p++)
                    if (p == PAT_UNIFORM ||
                        strcmp(targets[i].name, "redis") == 0 ||
                        (p == PAT_HOT && m == MODE_SEQ))
                        cells[ncells++] = (cell){.tgt = &targets[i],
                                                 .rule = rules[r],
                                                 .pat = (pattern)p,
                                                 .md = (mode)m};
        }
    }
    /* 50 in flight on one connection: the figure set against the peers. */
    for (i = 0; i < ntargets; i++)
        if (strcmp(targets[i].name, "redis") == 0)
            cells[ncells++] = (cell){.tgt = &targets[i],
                                     .rule = rules[0],
                                     .pat = PAT_UNIFORM,
                                     .md = MODE_PIPE50};
    if (json != NULL)
        fprintf(json, "{\"seconds_per_cell\": %.2f, \"cells\": [", seconds);
    printf("%-44s %-7s %-6s %10s %7s %7s %8s %5s %5s %7s %7s %6s\n",
           "target and rule", "keys", "mode", "decisions/s", "p50us", "p99us",
           "p99.9us", "cmds", "rtts", "usec", "bytes", "admit");
    for (i = 0; i < ncells; i++) {
        run_cell(&cells[i]);
        print_cell(&cells[i], i + 1, ncells);
    }
    fprintf(stderr, "\n");
    if (json != NULL) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    free(cells);
    return 0;
}
