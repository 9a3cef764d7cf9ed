/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice_bench.c - measures sluice's backends and algorithms against the
 * floors (a raw INCR, and an EVALSHA of a script that is itself a fixed
 * window: INCR + PEXPIRE), same client, same connection pattern, one run:
 *   sluice-bench --target NAME=URL[|host:port,...] ... [--seconds S]
 *                [--json F] [--flush] [--replay]
 *   sluice-bench --print-command RULE [--key K] [--prefix P]
 *   sluice-bench --instructions URL --decisions N
 * Each cell: backend x algorithm x key pattern x mode, for S seconds.
 * Figures: decisions/s, latency p50/p99/p99.9, round trips per decision;
 * from the servers' INFO before and after: Redis CPU per decision by
 * commandstats of the outer command (EVALSHA, not the commands the script
 * calls, which Redis counts inside the EVALSHA's usec as well), and the
 * whole process's CPU (used_cpu_sys + used_cpu_user); memory per limited
 * key; admitted against the exact bound on the hot key. Reservations
 * (section reserve, and capacity on targets named cap*): each cell without
 * and with reserve_ms=100 in turns, with the handles' sluice_stats, and 4
 * processes on one key counted window by window against the limit. */
#include "sluice.h"

#include "backend.h"
#include "internal.h"
#include "store.h"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sluice/libevent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NKEYS         10000
#define THREADS       50
#define PIPE          16
#define MAX_TGTS      16
#define MAX_CMDS      192
#define MAX_ARGS      128
#define FLOOR_TTL     "2000"       /* ms: a 1 s window plus the 1 s TTL floor */
#define RAND_KEYS     "2000000000" /* keys a replay draws from (-r) */
#define SPREAD        64           /* PAT_SPREAD's keys */
#define PROCS         4            /* MODE_PROC: processes */
#define PROC_THR      8            /* MODE_PROC: threads of each */
#define WINS          64           /* MODE_PROC: 1 s windows recorded */
/* The reservation cells' hot key: a rule that never denies in a cell. */
#define HOT_RULE      "fixed:1000000000/1s"
/* Several processes on one key: the rule and duration. */
#define PROC_RULE     "fixed:10000/1s"
#define PROC_LIMIT    10000
#define PROC_SECONDS  10.0
#define RESERVE_MS    100
/* Paced cells: demand as a share of PROC_LIMIT, spread evenly over the
 * threads of every process, for PACED_SECONDS. */
#define PACED_SECONDS 4.0
#define TURNS         4 /* turns of a cell and its paired floor or twin */

typedef enum pattern {
    PAT_HOT,     /* one key */
    PAT_UNIFORM, /* 10,000 keys, uniform */
    PAT_ZIPF,    /* 10,000 keys, Zipf s = 1 */
    PAT_NEW,     /* every decision a key never seen: a first charge */
    PAT_SPREAD   /* 64 keys, uniform: hot keys over the slots */
} pattern;

typedef enum mode {
    MODE_SEQ,      /* one connection, one decision at a time */
    MODE_PIPE,     /* one connection, 16 in flight (acquire-many) */
    MODE_THREADS,  /* 50 threads, each its own handle */
    MODE_PIPE50,   /* one connection, 50 in flight (acquire-many) */
    MODE_REPLAY,   /* redis-benchmark -c 1 -P 16 of the exact command */
    MODE_SHARED50, /* 50 threads sharing one handle (its floor: conc50's) */
    MODE_LOOP50,   /* one thread, one handle on libevent, 50 in flight */
    MODE_LOOP1000, /* the same, 1,000 in flight */
    MODE_PROC      /* 4 processes x 8 threads, one handle a process (or
                      cell.procs), closed loop or paced (cell.pace) */
} mode;

static const char *const pattern_names[] = {"hot", "uniform", "zipf", "new",
                                            "keys64"};
static const char *const mode_names[] = {"seq",    "pipe16",   "conc50",
                                         "pipe50", "replay16", "shared50",
                                         "loop50", "loop1000", "proc4x8"};

/* Decisions in flight on one connection. */
static int batch_of(mode m)
{
    return m == MODE_PIPE || m == MODE_REPLAY ? PIPE
           : m == MODE_PIPE50                 ? 50
                                              : 1;
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
static bool flush_between; /* FLUSHALL before each cell: our own servers */

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

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
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
    case PAT_NEW:
        return 0;
    case PAT_UNIFORM:
        return (unsigned)(xorshift(rng) % NKEYS);
    case PAT_SPREAD:
        return (unsigned)(xorshift(rng) % SPREAD);
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

/* A key name of the pattern; turn and n (a worker's decisions in this
 * turn) keep PAT_NEW from repeating one. */
static void key_name(char *dst, size_t len, pattern p, int turn, int id,
                     uint64_t n, uint64_t *rng)
{
    if (p == PAT_NEW)
        snprintf(dst, len, "n%d_%d_%llu", turn, id, (unsigned long long)n);
    else
        snprintf(dst, len, "k%u", next_key(p, rng));
}

/* ---- the servers behind a target ---- */

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

static void command_ignored(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, cmd);

    if (r != NULL)
        freeReplyObject(r);
}

static void flush_server(redisContext *c, void *ctx)
{
    (void)ctx;
    command_ignored(c, "FLUSHALL SYNC"); /* a replica refuses: fine */
}

/* One command's counters from INFO commandstats. */
typedef struct cmdstat {
    char name[48];
    double calls, usec, failed;
} cmdstat;

/* INFO of every server of a target: commandstats of the masters (a
 * replica's are copies of its master's writes), CPU seconds of all. */
typedef struct snapshot {
    cmdstat cmd[MAX_CMDS];
    size_t ncmd;
    double cpu_s, cpu_masters_s;
    int masters;
} snapshot;

static const cmdstat *cmd_find(const snapshot *s, const char *name)
{
    size_t i;

    for (i = 0; i < s->ncmd; i++)
        if (strcmp(s->cmd[i].name, name) == 0)
            return &s->cmd[i];
    return NULL;
}

static cmdstat *cmd_slot(snapshot *s, const char *name)
{
    size_t i;

    for (i = 0; i < s->ncmd; i++)
        if (strcmp(s->cmd[i].name, name) == 0)
            return &s->cmd[i];
    if (s->ncmd == MAX_CMDS)
        return NULL;
    snprintf(s->cmd[s->ncmd].name, sizeof(s->cmd[0].name), "%s", name);
    return &s->cmd[s->ncmd++];
}

static void add_snapshot(redisContext *c, void *ctx)
{
    snapshot *s = ctx;
    redisReply *r = redisCommand(c, "INFO all");
    char *save = NULL, *line;
    double cpu = 0, v;
    bool master;

    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        if (r != NULL)
            freeReplyObject(r);
        return;
    }
    master = strstr(r->str, "role:slave") == NULL;
    for (line = strtok_r(r->str, "\r\n", &save); line != NULL;
         line = strtok_r(NULL, "\r\n", &save)) {
        if (sscanf(line, "used_cpu_sys:%lf", &v) == 1 ||
            sscanf(line, "used_cpu_user:%lf", &v) == 1) {
            /* The prefix match above also takes used_cpu_sys_children
             * and _main_thread: keep the exact names only. */
            if (strncmp(line, "used_cpu_sys:", 13) == 0 ||
                strncmp(line, "used_cpu_user:", 14) == 0)
                cpu += v;
        } else if (master && strncmp(line, "cmdstat_", 8) == 0) {
            char *colon = strchr(line, ':'), *f;
            cmdstat *cs;
            double calls = 0, usec = 0;

            if (colon == NULL)
                continue;
            *colon = '\0';
            if (sscanf(colon + 1, "calls=%lf,usec=%lf", &calls, &usec) != 2 ||
                (cs = cmd_slot(s, line + 8)) == NULL)
                continue;
            cs->calls += calls;
            cs->usec += usec;
            /* Redis 6.2 and later: calls the command refused or failed. */
            if ((f = strstr(colon + 1, "rejected_calls=")) != NULL)
                cs->failed += atof(f + 15);
            if ((f = strstr(colon + 1, "failed_calls=")) != NULL)
                cs->failed += atof(f + 13);
        }
    }
    s->cpu_s += cpu;
    if (master) {
        s->cpu_masters_s += cpu;
        s->masters++;
    }
    freeReplyObject(r);
}

static void take_snapshot(const char *servers, snapshot *out)
{
    memset(out, 0, sizeof(*out));
    each_server(servers, add_snapshot, out);
}

/* The harness's own commands (INFO, FLUSHALL, SCAN, MEMORY USAGE, ...,
 * and every subcommand such as CONFIG|GET, SCRIPT|LOAD, CLUSTER|SLOTS). */
static bool harness_command(const char *name)
{
    static const char *const own[] = {
        "info", "flushall", "flushdb", "scan",   "keys",  "type",  "zcard",
        "llen", "ping",     "auth",    "select", "hello", "unlink"};
    size_t i;

    if (strchr(name, '|') != NULL)
        return true;
    for (i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcmp(name, own[i]) == 0)
            return true;
    return false;
}

static bool script_command(const char *name)
{
    return strcmp(name, "evalsha") == 0 || strcmp(name, "eval") == 0 ||
           strcmp(name, "evalsha_ro") == 0 || strcmp(name, "eval_ro") == 0 ||
           strcmp(name, "fcall") == 0 || strcmp(name, "fcall_ro") == 0;
}

/* What the servers did between two snapshots. */
typedef struct delta {
    double all_calls;               /* every command, nested ones too */
    double outer_calls, outer_usec; /* scripts if any ran, else all */
    double failed;
    double cpu_s, cpu_masters_s;
    bool scripts;
} delta;

static void diff_snapshots(const snapshot *b, const snapshot *a, delta *d)
{
    double s_calls = 0, s_usec = 0, all_usec = 0;
    size_t i;

    memset(d, 0, sizeof(*d));
    for (i = 0; i < a->ncmd; i++) {
        const cmdstat *x = &a->cmd[i];
        const cmdstat *y = cmd_find(b, x->name);
        double calls = x->calls - (y ? y->calls : 0);
        double usec = x->usec - (y ? y->usec : 0);

        if (harness_command(x->name) || calls <= 0)
            continue;
        d->all_calls += calls;
        all_usec += usec;
        d->failed += x->failed - (y ? y->failed : 0);
        if (script_command(x->name)) {
            s_calls += calls;
            s_usec += usec;
        }
    }
    /* A script's usec already holds the commands it called: count the
     * outer command only. Plain backends: the sum over their commands. */
    d->scripts = s_calls > 0;
    d->outer_calls = d->scripts ? s_calls : d->all_calls;
    d->outer_usec = d->scripts ? s_usec : all_usec;
    d->cpu_s = a->cpu_s - b->cpu_s;
    d->cpu_masters_s = a->cpu_masters_s - b->cpu_masters_s;
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

typedef struct entries {
    const char *prefix;
    double most;
} entries;

/* The most entries a log under the prefix holds (ZCARD of sorted sets,
 * LLEN of lists): the hot key's live entries, give or take those not yet
 * pruned. */
static void add_entries(redisContext *c, void *ctx)
{
    entries *e = ctx;
    redisReply *r = redisCommand(c, "SCAN 0 MATCH %s* COUNT 1000", e->prefix);
    size_t i;

    for (i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
                i < r->element[1]->elements;
         i++) {
        const redisReply *k = r->element[1]->element[i];
        redisReply *t = redisCommand(c, "TYPE %b", k->str, k->len), *n = NULL;

        if (t != NULL && t->type == REDIS_REPLY_STATUS &&
            strcmp(t->str, "zset") == 0)
            n = redisCommand(c, "ZCARD %b", k->str, k->len);
        else if (t != NULL && t->type == REDIS_REPLY_STATUS &&
                 strcmp(t->str, "list") == 0)
            n = redisCommand(c, "LLEN %b", k->str, k->len);
        if (n != NULL && n->type == REDIS_REPLY_INTEGER &&
            (double)n->integer > e->most)
            e->most = (double)n->integer;
        if (n != NULL)
            freeReplyObject(n);
        if (t != NULL)
            freeReplyObject(t);
    }
    if (r != NULL)
        freeReplyObject(r);
}

/* UNLINK every key under the prefix (the raw INCR floor sets no TTL). */
static void unlink_prefix(redisContext *c, void *ctx)
{
    const char *prefix = ctx;
    char cursor[32] = "0";

    do {
        redisReply *r =
            redisCommand(c, "SCAN %s MATCH %s* COUNT 1000", cursor, prefix);
        size_t i;

        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r != NULL)
                freeReplyObject(r);
            return;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (i = 0; i < r->element[1]->elements; i++) {
            const redisReply *k = r->element[1]->element[i];
            redisReply *u = redisCommand(c, "UNLINK %b", k->str, k->len);

            if (u != NULL)
                freeReplyObject(u);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
}

/* ---- the exact command the library sends ---- */

/* Parses one RESP array of bulk strings ("*N\r\n$L\r\n...\r\n"). Returns
 * the number of arguments, or -1 when buf holds no complete one. */
static int parse_resp(const char *buf, size_t n, char **argv, size_t *lens,
                      int max)
{
    const char *p = buf, *end = buf + n;
    long argc, i;
    char *e;

    if (n < 4 || *p != '*')
        return -1;
    argc = strtol(p + 1, &e, 10);
    if (argc < 1 || argc > max || e + 2 > end || e[0] != '\r')
        return -1;
    p = e + 2;
    for (i = 0; i < argc; i++) {
        long len;

        if (p >= end || *p != '$')
            return -1;
        len = strtol(p + 1, &e, 10);
        if (len < 0 || e + 2 > end || e[0] != '\r' ||
            (size_t)(end - (e + 2)) < (size_t)len + 2)
            return -1;
        p = e + 2;
        argv[i] = malloc((size_t)len + 1);
        memcpy(argv[i], p, (size_t)len);
        argv[i][len] = '\0';
        lens[i] = (size_t)len;
        p += len + 2;
    }
    return (int)argc;
}

/* The command sluice_acquire writes for one request of rule on key: the
 * library talks to a listener of ours that never answers (the acquire
 * times out), and the bytes it wrote are read back. Whatever the backend
 * builds and however, this is what Redis would run. Returns argc, or -1
 * with a message on stderr. */
static int capture_command(const char *rule, const char *prefix,
                           const char *key, char **argv, size_t *lens)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = -1, argc = -1;
    sluice_options o;
    sluice_ruleset rs;
    sluice_result res;
    sluice *sl = NULL;
    char url[64], err[512], buf[65536];
    size_t got = 0;
    ssize_t k;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        perror("sluice-bench: capture listener");
        goto done;
    }
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ntohs(a.sin_port));
    memset(&o, 0, sizeof(o));
    o.key_prefix = prefix;
    o.command_timeout_ms = 50;
    if (sluice_ruleset_parse(rule, &rs, err, sizeof(err)) != SLUICE_OK ||
        sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        goto done;
    }
    /* Times out: nobody answers. The request is in our socket by then. */
    (void)sluice_acquire(sl, key, strlen(key), &rs, 1, &res);
    if ((cfd = accept(lfd, NULL, NULL)) < 0 ||
        fcntl(cfd, F_SETFL, O_NONBLOCK) != 0) {
        perror("sluice-bench: capture accept");
        goto done;
    }
    while (got < sizeof(buf) &&
           (k = recv(cfd, buf + got, sizeof(buf) - got, 0)) > 0)
        got += (size_t)k;
    argc = parse_resp(buf, got, argv, lens, MAX_ARGS);
    if (argc < 0)
        fprintf(stderr,
                "sluice-bench: capture: no complete command in %zu bytes\n",
                got);
done:
    sluice_close(sl);
    if (cfd >= 0)
        close(cfd);
    if (lfd >= 0)
        close(lfd);
    return argc;
}

static void free_args(char **argv, int argc)
{
    int i;

    for (i = 0; i < argc; i++)
        free(argv[i]);
}

/* --print-command: the arguments on one line, for
 *   redis-benchmark -P 16 -n 100000 $(sluice-bench --print-command RULE) */
static int print_command(const char *rule, const char *key, const char *prefix)
{
    char *argv[MAX_ARGS];
    size_t lens[MAX_ARGS];
    int argc = capture_command(rule, prefix, key, argv, lens), i;

    if (argc < 0)
        return 1;
    for (i = 0; i < argc; i++)
        printf("%s%s", i ? " " : "", argv[i]);
    printf("\n");
    free_args(argv, argc);
    return 0;
}

/* ---- one cell ---- */

/* A handle's counters (sluice_get_stats) that the reservation cells
 * report, summed over handles. */
typedef struct hstats {
    uint64_t backend_requests, round_trips, reserve_admitted, reserve_batches,
        reserve_asked, reserve_granted, reserve_refunded, reserve_lapsed;
} hstats;

typedef struct cell {
    const target *tgt;
    const char *rule;  /* NULL: a floor */
    const char *floor; /* "INCR" or "EVALSHA" */
    pattern pat;
    mode md;
    const char *section; /* "rcpu", "throughput", "peers", "denycache" */
    uint32_t deny_cache; /* the handles' deny_cache= (0: off) */
    bool no_metrics;     /* the handles' metrics=0 */
    int reserve_ms;      /* the handles' reserve_ms= (0: off) */
    double secs;         /* the cell's length; 0: --seconds */
    /* Runs in TURNS turns with the next cell (its twin, the same but for
     * one option), so that both meet the same weather. */
    bool with_next;
    sluice *shared; /* MODE_SHARED50, MODE_PROC: every thread's handle */
    /* The floor run in turns with this cell, so that both meet the same
     * weather on a shared machine (Redis CPU cells); NULL: none. */
    struct cell *pair;
    char prefix[64];
    /* raw totals over the cell's turns */
    int turns;
    int64_t elapsed_us, first_ms, last_ms;
    uint32_t *lat; /* microseconds per decision */
    size_t nlat;
    uint64_t round_trips;
    delta sum;
    hstats st;                /* the handles' counters, summed */
    double turn_dps[TURNS];   /* decisions/s of each turn */
    int masters;              /* masters among the servers read */
    int64_t win0;             /* MODE_PROC: window index of win_*[0] */
    int64_t run_from, run_to; /* MODE_PROC: the load's span, real ms */
    long win_admitted[WINS];  /* MODE_PROC: admissions by 1 s window */
    long win_charged[WINS];   /* the hot key's counter; -1: not read */
    long win_denied[WINS];    /* MODE_PROC: denials by 1 s window */
    int procs;                /* MODE_PROC: processes (0: PROCS) */
    double pace; /* MODE_PROC: demand, a multiple of PROC_LIMIT a second,
                    spread evenly over the threads; 0: closed loop */
    uint32_t *lat_local; /* admissions from a reservation, microseconds */
    size_t nlat_local;
    long timeouts; /* calls answered SLUICE_ETIMEOUT */
    long skipped;  /* paced: requests dropped, the thread kept from its
                      schedule by the machine */
    /* results */
    double dps, p50, p99, p999, cmds, rtts, mem, accuracy, log_entries;
    double p99_local, p999_local, local_max, slowest;
    double outer_calls, usec_call, usec_dec, cpu_dec, cpu_masters_dec;
    bool scripts;
    long decisions, admitted, errors;
    double redis_failed;
} cell;

static cell *cells;
static size_t ncells;
static cell *pairs; /* the floors run in turns with Redis CPU cells */
static size_t npairs;

extern char **environ; /* for posix_spawnp */

typedef struct worker {
    cell *c;
    int id;
    int64_t deadline;
    uint32_t *lat; /* microseconds per decision */
    size_t nlat, cap;
    long decisions, admitted, errors;
    uint64_t round_trips;
    int64_t first_ms, last_ms; /* hot key admissions, for accuracy */
    int64_t start_us;          /* MODE_PROC: when to begin (monotonic) */
    hstats st;                 /* the worker's own handle's counters */
    long win[WINS];            /* MODE_PROC: admissions by window */
    long denied[WINS];         /* MODE_PROC: denials by window */
    uint32_t *lat_local;       /* admitted from a reservation */
    size_t nlat_local, cap_local;
    long timeouts, skipped;
} worker;

static void add_hstats(hstats *a, const hstats *b)
{
    a->backend_requests += b->backend_requests;
    a->round_trips += b->round_trips;
    a->reserve_admitted += b->reserve_admitted;
    a->reserve_batches += b->reserve_batches;
    a->reserve_asked += b->reserve_asked;
    a->reserve_granted += b->reserve_granted;
    a->reserve_refunded += b->reserve_refunded;
    a->reserve_lapsed += b->reserve_lapsed;
}

/* Adds a handle's counters to h (a handle with metrics=0 keeps none). */
static void take_stats(hstats *h, sluice *sl)
{
    sluice_stats st;
    hstats x;

    if (sluice_get_stats(sl, &st, sizeof(st)) != SLUICE_OK)
        return;
    x = (hstats){.backend_requests = st.backend_requests,
                 .round_trips = st.round_trips,
                 .reserve_admitted = st.reserve_admitted,
                 .reserve_batches = st.reserve_batches,
                 .reserve_asked = st.reserve_asked,
                 .reserve_granted = st.reserve_granted,
                 .reserve_refunded = st.reserve_refunded,
                 .reserve_lapsed = st.reserve_lapsed};
    add_hstats(h, &x);
}

/* The target's URL with the cell's options. */
static void cell_url(const cell *c, char *buf, size_t len)
{
    if (c->reserve_ms > 0)
        snprintf(buf, len, "%s%creserve_ms=%d", c->tgt->url,
                 strchr(c->tgt->url, '?') != NULL ? '&' : '?', c->reserve_ms);
    else
        snprintf(buf, len, "%s", c->tgt->url);
}

/* The handle's clock in MODE_PROC: the real time, its first reading in
 * a call kept, so that an admission is counted in the window the library
 * decided it in. */
static _Thread_local int64_t clock_seen = -1;

static int64_t proc_clock(void *ctx)
{
    int64_t t = real_ms();

    (void)ctx;
    if (clock_seen < 0)
        clock_seen = t;
    return t;
}

static void push_lat(uint32_t **lat, size_t *n, size_t *cap, int64_t us)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 65536;
        *lat = realloc(*lat, *cap * sizeof(**lat));
    }
    (*lat)[(*n)++] = (uint32_t)(us > 0xffffffffLL ? 0xffffffffLL : us);
}

static void add_lat(worker *w, int64_t us, long n)
{
    long i;

    for (i = 0; i < n; i++)
        push_lat(&w->lat, &w->nlat, &w->cap, us);
}

/* Sleeps until the monotonic microsecond t. */
static void sleep_until_us(int64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000), (long)(t % 1000000) * 1000};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* The floor script is a fixed-window counter itself. */
static const char floor_script[] =
    "local n = redis.call('INCR', KEYS[1]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n";
static char floor_sha[41];

/* Host, port and credentials of a target's URL, as the library reads it. */
static bool endpoint_of(const target *t, sl_url *u)
{
    char err[512];

    if (sl_url_parse(t->url, NULL, u, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return false;
    }
    return true;
}

static redisContext *floor_connect(const target *t)
{
    sl_url u;
    redisContext *rc;
    redisReply *r = NULL;

    if (!endpoint_of(t, &u))
        return NULL;
    rc = redisConnect(u.ep.host, u.ep.port);
    if (rc == NULL || rc->err) {
        if (rc != NULL)
            redisFree(rc);
        return NULL;
    }
    if (u.ep.password[0] != '\0')
        r = u.ep.user[0]
                ? redisCommand(rc, "AUTH %s %s", u.ep.user, u.ep.password)
                : redisCommand(rc, "AUTH %s", u.ep.password);
    if (r != NULL)
        freeReplyObject(r);
    if (u.ep.db != 0 && (r = redisCommand(rc, "SELECT %d", u.ep.db)) != NULL)
        freeReplyObject(r);
    return rc;
}

/* The reservation cells' control: the same threads, each bumping a
 * counter of its own between two clock readings, no library and no lock:
 * how long the machine keeps a busy thread from running (its slowest
 * "call" is the scheduler's). */
static void *cpu_worker(void *arg)
{
    worker *w = arg;
    volatile uint64_t n = 0;

    while (now_us() < w->deadline) {
        int64_t t0 = now_us();
        int i;

        for (i = 0; i < 20; i++)
            n = n + 1;
        add_lat(w, now_us() - t0, 1);
        w->decisions++;
    }
    return NULL;
}

/* The floor: raw INCR, or EVALSHA of INCR + PEXPIRE, with hiredis. */
static void *floor_worker(void *arg)
{
    worker *w = arg;
    cell *c = w->c;
    redisContext *rc;

    if (strcmp(c->floor, "CPU") == 0)
        return cpu_worker(arg);
    rc = floor_connect(c->tgt);
    uint64_t rng = (uint64_t)0x9e3779b97f4a7c15ULL ^ (uint64_t)w->id;
    uint64_t n = 0;
    int batch = batch_of(c->md);

    if (rc == NULL) {
        w->errors++;
        return NULL;
    }
    while (now_us() < w->deadline) {
        int64_t t0 = now_us();
        int i;

        for (i = 0; i < batch; i++) {
            char key[128], name[48];

            key_name(name, sizeof(name), c->pat, c->turns, w->id, n++, &rng);
            snprintf(key, sizeof(key), "%s{%s}:f", c->prefix, name);
            if (strcmp(c->floor, "INCR") == 0)
                redisAppendCommand(rc, "INCR %s", key);
            else
                redisAppendCommand(rc, "EVALSHA %s 1 %s %s", floor_sha, key,
                                   FLOOR_TTL);
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

/* MODE_LOOP50, MODE_LOOP1000: one decision of a loop worker in flight. */
typedef struct loop_slot {
    worker *w;
    const sluice_ruleset *rs;
    struct event_base *base;
    uint64_t *rng, *n;
    int *left; /* slots still in flight */
    int64_t t0;
    char key[32];
} loop_slot;

static void loop_start(sluice *sl, loop_slot *s);

static void loop_done(sluice *sl, void *arg, sluice_status st,
                      const sluice_result *res, size_t n)
{
    loop_slot *s = arg;
    worker *w = s->w;

    (void)n;
    if (st != SLUICE_OK) {
        w->errors++;
    } else {
        add_lat(w, now_us() - s->t0, 1);
        w->decisions++;
        if (res[0].allowed) {
            int64_t t = real_ms();

            w->admitted++;
            if (w->first_ms == 0)
                w->first_ms = t;
            w->last_ms = t;
        }
    }
    if (now_us() < w->deadline) {
        loop_start(sl, s);
    } else if (--*s->left == 0) {
        event_base_loopbreak(s->base);
    }
}

static void loop_start(sluice *sl, loop_slot *s)
{
    key_name(s->key, sizeof(s->key), s->w->c->pat, s->w->c->turns, s->w->id,
             (*s->n)++, s->rng);
    s->t0 = now_us();
    if (sluice_acquire_async(sl, s->key, strlen(s->key), s->rs, 1, loop_done,
                             s) != SLUICE_OK) {
        s->w->errors++;
        if (--*s->left == 0)
            event_base_loopbreak(s->base);
    }
}

/* One thread keeps `inflight` decisions going on one handle attached to
 * libevent until the deadline: each answer starts the next. */
static void loop_worker(worker *w, sluice *sl, const sluice_ruleset *rs,
                        int inflight, uint64_t *rng, uint64_t *n)
{
    struct event_base *base = event_base_new();
    loop_slot *slots = calloc((size_t)inflight, sizeof(*slots));
    int i, left = inflight;

    if (base == NULL || slots == NULL ||
        sluice_libevent_attach(sl, base) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: cannot attach to libevent: %s\n",
                sluice_errmsg(sl));
        w->errors++;
        free(slots);
        if (base != NULL)
            event_base_free(base);
        return;
    }
    for (i = 0; i < inflight; i++) {
        slots[i] = (loop_slot){w, rs, base, rng, n, &left, 0, ""};
        loop_start(sl, &slots[i]);
    }
    if (left > 0)
        event_base_dispatch(base);
    w->round_trips = sl_handle_round_trips(sl);
    take_stats(&w->st, sl);
    sluice_close(sl); /* removes its events first */
    event_base_free(base);
    free(slots);
}

static void *sluice_worker(void *arg)
{
    worker *w = arg;
    cell *c = w->c;
    sluice_options o;
    sluice_ruleset rs;
    sluice *sl = NULL;
    char err[512], url[600];
    uint64_t rng = (uint64_t)0x9e3779b97f4a7c15ULL ^ ((uint64_t)w->id << 32);
    uint64_t n = 0;
    char keys[50][32];
    sluice_request reqs[50];
    sluice_result out[50];
    int batch = batch_of(c->md), i;
    double gap = 0, next = 0; /* paced: microseconds between requests */

    sluice_options_init(&o);
    o.key_prefix = c->prefix;
    o.command_timeout_ms = 2000;
    o.deny_cache = c->deny_cache;
    o.no_metrics = c->no_metrics;
    cell_url(c, url, sizeof(url));
    if (sluice_ruleset_parse(c->rule, &rs, err, sizeof(err)) != SLUICE_OK ||
        (c->shared == NULL &&
         sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK)) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        w->errors++;
        return NULL;
    }
    if (c->shared != NULL)
        sl = c->shared;
    if (c->md == MODE_LOOP50 || c->md == MODE_LOOP1000) {
        loop_worker(w, sl, &rs, c->md == MODE_LOOP50 ? 50 : 1000, &rng, &n);
        return NULL;
    }
    while (now_us() < w->start_us)
        sleep_ms(1);
    if (c->md == MODE_PROC && c->pace > 0) {
        /* Paced: each thread asks at its share of the rate, the threads
         * of all processes evenly staggered. A thread kept from its
         * schedule (the machine gave it no core) drops the requests it
         * missed rather than send them at once: no window gets more than
         * the pace, so that a denial at 0.9x is the library's. */
        int all = (c->procs > 0 ? c->procs : PROCS) * PROC_THR;

        gap = 1e6 * all / (c->pace * PROC_LIMIT);
        next = (double)w->start_us + gap * w->id / all;
    }
    while (now_us() < w->deadline) {
        int64_t t0, t_real = 0;
        sluice_status st;

        if (gap > 0) {
            double late = (double)now_us() - next;

            if (late > gap) {
                w->skipped += (long)(late / gap);
                next += gap * (double)(long)(late / gap);
            }
            if ((int64_t)next >= w->deadline)
                break;
            sleep_until_us((int64_t)next);
            next += gap;
        }
        t0 = now_us();

        for (i = 0; i < batch; i++) {
            key_name(keys[i], sizeof(keys[i]), c->pat, c->turns, w->id, n++,
                     &rng);
            reqs[i] = (sluice_request){keys[i], strlen(keys[i]), &rs, 1};
        }
        if (c->md == MODE_PROC) {
            clock_seen = -1;
            t_real = real_ms();
        }
        if (batch == 1)
            st = sluice_acquire(sl, keys[0], strlen(keys[0]), &rs, 1, out);
        else
            st = sluice_acquire_many(sl, reqs, (size_t)batch, out);
        if (st != SLUICE_OK) {
            w->errors++;
            w->timeouts += st == SLUICE_ETIMEOUT;
            continue;
        }
        if (c->md == MODE_PROC) {
            /* The window of the handle's clock; no latencies (millions
             * of them in several processes). */
            int64_t k = (clock_seen >= 0 ? clock_seen : t_real) / 1000;

            if (k >= c->win0 && k < c->win0 + WINS)
                (out[0].allowed ? w->win : w->denied)[k - c->win0]++;
        } else {
            int64_t us = now_us() - t0;

            add_lat(w, us, batch);
            if (batch == 1 && out[0].status == SLUICE_RESERVED)
                push_lat(&w->lat_local, &w->nlat_local, &w->cap_local, us);
        }
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
    if (c->shared != NULL)
        return NULL; /* its round trips are counted once, by run_turn */
    w->round_trips = sl_handle_round_trips(sl);
    take_stats(&w->st, sl);
    sluice_close(sl);
    return NULL;
}

/* The rate of the cell run live with the same target, rule and keys, so
 * that a replay lasts about as long as a cell. */
static double live_rate(const cell *c)
{
    size_t i;

    for (i = 0; i < ncells; i++) {
        const cell *x = &cells[i];

        if (x != c && x->tgt == c->tgt && x->md == MODE_PIPE &&
            x->pat == c->pat && x->dps > 0 &&
            (c->rule ? x->rule && strcmp(x->rule, c->rule) == 0
                     : x->floor && strcmp(x->floor, c->floor) == 0))
            return x->dps;
    }
    return 20000;
}

/* MODE_REPLAY: redis-benchmark -c 1 -P 16 sends the exact command the
 * library sends for one request (captured on the wire), n times; on new
 * keys its -r puts a random 12-digit number in place of __rand_int__. The
 * arguments are frozen, the request's time among them: a hot key stays in
 * one window. Runs in the calling thread; fills w. */
static void replay(worker *w, const char *bench_path, double secs)
{
    cell *c = w->c;
    char *cmd[MAX_ARGS];
    size_t lens[MAX_ARGS];
    int argc, i, status = 0;
    char *args[MAX_ARGS + 24], num[24];
    const char *key = c->pat == PAT_NEW ? "n__rand_int__" : "k0";
    size_t a = 0;
    long n;
    pid_t pid;
    posix_spawn_file_actions_t fa;
    int64_t t0, limit;
    sl_url u;

    if (!endpoint_of(c->tgt, &u)) {
        w->errors++;
        return;
    }
    if (c->rule != NULL) {
        argc = capture_command(c->rule, c->prefix, key, cmd, lens);
    } else {
        char k[128];

        snprintf(k, sizeof(k), "%s{%s}:f", c->prefix, key);
        argc = 0;
        cmd[argc++] = strdup(c->floor);
        if (strcmp(c->floor, "EVALSHA") == 0) {
            cmd[argc++] = strdup(floor_sha);
            cmd[argc++] = strdup("1");
        }
        cmd[argc++] = strdup(k);
        if (strcmp(c->floor, "EVALSHA") == 0)
            cmd[argc++] = strdup(FLOOR_TTL);
    }
    if (argc < 0) {
        w->errors++;
        return;
    }
    n = (long)(live_rate(c) * secs / PIPE) * PIPE;
    if (n < 10 * PIPE)
        n = 10 * PIPE;
    args[a++] = strdup("redis-benchmark");
    args[a++] = strdup("-h");
    args[a++] = strdup(u.ep.host);
    args[a++] = strdup("-p");
    snprintf(num, sizeof(num), "%d", u.ep.port);
    args[a++] = strdup(num);
    if (u.ep.password[0] != '\0') {
        if (u.ep.user[0] != '\0') {
            args[a++] = strdup("--user");
            args[a++] = strdup(u.ep.user);
        }
        args[a++] = strdup("-a");
        args[a++] = strdup(u.ep.password);
    }
    if (u.ep.db != 0) {
        snprintf(num, sizeof(num), "%d", u.ep.db);
        args[a++] = strdup("--dbnum");
        args[a++] = strdup(num);
    }
    args[a++] = strdup("-c");
    args[a++] = strdup("1");
    args[a++] = strdup("-P");
    args[a++] = strdup("16");
    args[a++] = strdup("-n");
    snprintf(num, sizeof(num), "%ld", n);
    args[a++] = strdup(num);
    args[a++] = strdup("-q");
    if (c->pat == PAT_NEW) {
        args[a++] = strdup("-r");
        args[a++] = strdup(RAND_KEYS);
    }
    for (i = 0; i < argc; i++)
        args[a++] = cmd[i]; /* freed with args */
    args[a] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    t0 = now_us();
    if (posix_spawnp(&pid, bench_path, &fa, NULL, args, environ) != 0) {
        fprintf(stderr, "sluice-bench: cannot run %s\n", bench_path);
        w->errors++;
        posix_spawn_file_actions_destroy(&fa);
        free_args(args, (int)a);
        return;
    }
    posix_spawn_file_actions_destroy(&fa);
    /* Bounded: ten times a cell's length, then killed. */
    limit = t0 + (int64_t)(secs * 10e6) + 2000000;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_us() > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "sluice-bench: redis-benchmark killed\n");
            w->errors++;
            break;
        }
        sleep_ms(2);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        w->decisions = n;
        w->round_trips = (uint64_t)(n / PIPE);
    } else {
        w->errors++;
    }
    free_args(args, (int)a);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* The most a rule may admit on one key between two instants. */
static double exact_bound(const sluice_rule *r, int64_t from, int64_t to)
{
    double span = (double)(to - from);

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

static const char *redis_benchmark = "redis-benchmark";

/* The script a backend runs is loaded before the cell (a replay sends
 * EVALSHA only, and a cell should not count the first NOSCRIPT): acquires
 * on keys of several slots load it on every node that answers them. */
static void warm_script(const cell *c)
{
    sluice_options o;
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl = NULL;
    char key[8];
    int i;

    memset(&o, 0, sizeof(o));
    o.key_prefix = "bench-warm:";
    if (c->rule != NULL && c->tgt->servers[0] != '\0' &&
        sluice_ruleset_parse(c->rule, &rs, NULL, 0) == SLUICE_OK &&
        sluice_open(c->tgt->url, &o, &sl, NULL, 0) == SLUICE_OK)
        for (i = 0; i < 16; i++) {
            snprintf(key, sizeof(key), "w%d", i);
            (void)sluice_acquire(sl, key, strlen(key), &rs, 1, &r);
        }
    sluice_close(sl);
}

/* What one process of MODE_PROC hands back to the parent. */
typedef struct proc_out {
    long decisions, admitted, errors, timeouts, skipped;
    uint64_t round_trips;
    hstats st;
    long win[WINS], denied[WINS];
} proc_out;

/* One process of MODE_PROC: one handle, PROC_THR threads sharing it, from
 * start_us for secs seconds. c is the child's own copy of the cell. */
static void proc_child(cell *c, int id, int64_t start_us, double secs,
                       proc_out *out)
{
    sluice_options o;
    char url[600], err[512];
    worker ws[PROC_THR];
    pthread_t th[PROC_THR];
    int i, k;

    sluice_options_init(&o);
    o.key_prefix = c->prefix;
    o.command_timeout_ms = 2000;
    o.clock = proc_clock;
    cell_url(c, url, sizeof(url));
    if (sluice_open(url, &o, &c->shared, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        out->errors++;
        return;
    }
    memset(ws, 0, sizeof(ws));
    for (i = 0; i < PROC_THR; i++) {
        ws[i].c = c;
        ws[i].id = id * PROC_THR + i;
        ws[i].start_us = start_us;
        ws[i].deadline = start_us + (int64_t)(secs * 1e6);
        pthread_create(&th[i], NULL, sluice_worker, &ws[i]);
    }
    for (i = 0; i < PROC_THR; i++) {
        pthread_join(th[i], NULL);
        out->decisions += ws[i].decisions;
        out->admitted += ws[i].admitted;
        out->errors += ws[i].errors;
        out->timeouts += ws[i].timeouts;
        out->skipped += ws[i].skipped;
        for (k = 0; k < WINS; k++) {
            out->win[k] += ws[i].win[k];
            out->denied[k] += ws[i].denied[k];
        }
    }
    out->round_trips = sl_handle_round_trips(c->shared);
    take_stats(&out->st, c->shared);
    sluice_close(c->shared);
}

/* The fixed window's counter of the hot key k0 in window k (DESIGN.md:
 * <prefix>{K}:fixed:<P>:<off>:<k>), read on every server of the target
 * (the key lives on one of a proxy's or a cluster's; the others answer
 * nil, or MOVED): the largest value, or -1 when no server answered. */
typedef struct hot_read {
    const cell *c;
    int64_t k;
    long v;
} hot_read;

static void read_hot(redisContext *rc, void *ctx)
{
    hot_read *h = ctx;
    redisReply *r = redisCommand(rc, "GET %s{k0}:fixed:1000:0:%lld",
                                 h->c->prefix, (long long)h->k);

    if (r != NULL && r->type == REDIS_REPLY_STRING && atol(r->str) > h->v)
        h->v = atol(r->str);
    else if (r != NULL && r->type == REDIS_REPLY_NIL && h->v < 0)
        h->v = 0;
    if (r != NULL)
        freeReplyObject(r);
}

static long hot_counter(const cell *c, int64_t k)
{
    hot_read h = {c, k, -1};

    each_server(c->tgt->servers, read_hot, &h);
    return h.v;
}

/* MODE_PROC: PROCS processes at once, each proc_child, started together;
 * a run of 2 s or more starts on a window's edge. Adds their totals to
 * c (each process writes its proc_out, less than PIPE_BUF, to a pipe of
 * its own when done); on the hot key of PROC_RULE, reads the server's
 * counter of each window as it ends (its key lives a period more). */
static void run_procs(cell *c, double secs)
{
    proc_out po[PROCS];
    pid_t pids[PROCS];
    int fds[PROCS][2];
    int64_t real0 = real_ms(), mono0 = now_us(), from, k;
    int i, j, procs = c->procs > 0 ? c->procs : PROCS;
    bool count = c->pat == PAT_HOT && strcmp(c->rule, PROC_RULE) == 0 &&
                 c->tgt->servers[0] != '\0';

    _Static_assert(sizeof(proc_out) < 4096, "one write to a pipe");
    memset(po, 0, sizeof(po));
    if (c->turns == 0)
        for (j = 0; j < WINS; j++)
            c->win_charged[j] = -1;
    /* 300 ms for the processes to start and connect. */
    from = secs >= 2 ? (real0 + 300) / 1000 * 1000 + 1000 : real0 + 300;
    c->win0 = from / 1000 - 1;
    c->run_from = from;
    c->run_to = from + (int64_t)(secs * 1000);
    fflush(stdout);
    for (i = 0; i < procs; i++) {
        pids[i] = -1;
        if (pipe(fds[i]) != 0) {
            perror("sluice-bench: pipe");
            c->errors++;
            fds[i][0] = fds[i][1] = -1;
            continue;
        }
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[i][0]);
            proc_child(c, i, mono0 + (from - real0) * 1000, secs, &po[i]);
            if (write(fds[i][1], &po[i], sizeof(po[i])) != sizeof(po[i]))
                _exit(1);
            _exit(0);
        }
        close(fds[i][1]);
        if (pids[i] < 0) {
            perror("sluice-bench: fork");
            c->errors++;
        }
    }
    for (k = from / 1000; count && k < c->run_to / 1000; k++) {
        while (real_ms() < (k + 1) * 1000 + 150)
            sleep_ms(10);
        if (k - c->win0 < WINS)
            c->win_charged[k - c->win0] = hot_counter(c, k);
    }
    for (i = 0; i < procs; i++) {
        if (pids[i] > 0 &&
            read(fds[i][0], &po[i], sizeof(po[i])) != sizeof(po[i])) {
            fprintf(stderr, "sluice-bench: process %d gave no figures\n", i);
            memset(&po[i], 0, sizeof(po[i]));
            c->errors++;
        }
        if (fds[i][0] >= 0)
            close(fds[i][0]);
        if (pids[i] > 0)
            waitpid(pids[i], NULL, 0);
        c->decisions += po[i].decisions;
        c->admitted += po[i].admitted;
        c->errors += po[i].errors;
        c->timeouts += po[i].timeouts;
        c->skipped += po[i].skipped;
        c->round_trips += po[i].round_trips;
        add_hstats(&c->st, &po[i].st);
        for (j = 0; j < WINS; j++) {
            c->win_admitted[j] += po[i].win[j];
            c->win_denied[j] += po[i].denied[j];
        }
    }
}

/* Runs one turn of cell c for secs seconds and adds it to c's totals,
 * INFO of the servers taken right before and after. */
static void run_turn(cell *c, double secs)
{
    int n = c->md == MODE_THREADS || c->md == MODE_SHARED50 ? THREADS
            : c->md == MODE_PROC                            ? 0
                                                            : 1,
        i;
    long before_n = c->decisions;
    worker *ws = calloc((size_t)n, sizeof(*ws));
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    snapshot *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    delta d;
    int64_t t0, t1;
    size_t total = c->nlat, total_local = c->nlat_local;

    if (c->turns == 0)
        warm_script(c);
    if (c->md == MODE_SHARED50) {
        sluice_options o;
        char err[512], url[600];

        memset(&o, 0, sizeof(o));
        o.key_prefix = c->prefix;
        o.command_timeout_ms = 2000;
        cell_url(c, url, sizeof(url));
        if (sluice_open(url, &o, &c->shared, err, sizeof(err)) != SLUICE_OK) {
            fprintf(stderr, "sluice-bench: %s\n", err);
            c->shared = NULL;
            c->errors++;
        }
    }
    take_snapshot(c->tgt->servers, before);
    t0 = now_us();
    for (i = 0; i < n; i++) {
        ws[i].c = c;
        ws[i].id = i;
        ws[i].deadline = t0 + (int64_t)(secs * 1e6);
        if (c->md != MODE_REPLAY)
            pthread_create(&th[i], NULL, c->rule ? sluice_worker : floor_worker,
                           &ws[i]);
    }
    if (c->md == MODE_REPLAY)
        replay(&ws[0], redis_benchmark, secs);
    else if (c->md == MODE_PROC)
        run_procs(c, secs);
    else
        for (i = 0; i < n; i++)
            pthread_join(th[i], NULL);
    t1 = now_us();
    if (c->md == MODE_PROC) /* the load's own span, not the start-up */
        t1 = t0 + (int64_t)(secs * 1e6);
    if (c->shared != NULL) {
        c->round_trips += sl_handle_round_trips(c->shared);
        take_stats(&c->st, c->shared);
        sluice_close(c->shared);
        c->shared = NULL;
    }
    take_snapshot(c->tgt->servers, after);
    diff_snapshots(before, after, &d);
    c->sum.all_calls += d.all_calls;
    c->sum.outer_calls += d.outer_calls;
    c->sum.outer_usec += d.outer_usec;
    c->sum.failed += d.failed;
    c->sum.cpu_s += d.cpu_s;
    c->sum.cpu_masters_s += d.cpu_masters_s;
    c->sum.scripts = c->sum.scripts || d.scripts;
    c->masters = after->masters;
    c->elapsed_us += t1 - t0;
    for (i = 0; i < n; i++) {
        add_hstats(&c->st, &ws[i].st);
        c->decisions += ws[i].decisions;
        c->admitted += ws[i].admitted;
        c->errors += ws[i].errors;
        c->timeouts += ws[i].timeouts;
        c->round_trips += ws[i].round_trips;
        total += ws[i].nlat;
        total_local += ws[i].nlat_local;
        if (ws[i].first_ms &&
            (c->first_ms == 0 || ws[i].first_ms < c->first_ms))
            c->first_ms = ws[i].first_ms;
        if (ws[i].last_ms > c->last_ms)
            c->last_ms = ws[i].last_ms;
    }
    c->lat = realloc(c->lat, (total ? total : 1) * sizeof(*c->lat));
    c->lat_local = realloc(c->lat_local,
                           (total_local ? total_local : 1) * sizeof(*c->lat));
    for (i = 0; i < n; i++) {
        memcpy(c->lat + c->nlat, ws[i].lat, ws[i].nlat * sizeof(*c->lat));
        c->nlat += ws[i].nlat;
        free(ws[i].lat);
        memcpy(c->lat_local + c->nlat_local, ws[i].lat_local,
               ws[i].nlat_local * sizeof(*c->lat));
        c->nlat_local += ws[i].nlat_local;
        free(ws[i].lat_local);
    }
    if (c->turns < TURNS && t1 > t0)
        c->turn_dps[c->turns] =
            (double)(c->decisions - before_n) / ((double)(t1 - t0) / 1e6);
    c->turns++;
    free(ws);
    free(th);
    free(before);
    free(after);
}

/* The figures of a cell from its totals. */
static void finish_cell(cell *c)
{
    double dn = (double)c->decisions;
    const delta *d = &c->sum;
    sluice_ruleset rs;

    qsort(c->lat, c->nlat, sizeof(*c->lat), cmp_u32);
    c->dps = c->elapsed_us > 0 ? dn / ((double)c->elapsed_us / 1e6) : 0;
    c->p50 = c->nlat ? c->lat[c->nlat / 2] : 0;
    c->p99 = c->nlat ? c->lat[(size_t)((double)c->nlat * 0.99)] : 0;
    c->p999 = c->nlat ? c->lat[(size_t)((double)c->nlat * 0.999)] : 0;
    c->slowest = c->nlat ? c->lat[c->nlat - 1] : 0;
    qsort(c->lat_local, c->nlat_local, sizeof(*c->lat_local), cmp_u32);
    c->p99_local = c->nlat_local
                       ? c->lat_local[(size_t)((double)c->nlat_local * 0.99)]
                       : 0;
    c->p999_local = c->nlat_local
                        ? c->lat_local[(size_t)((double)c->nlat_local * 0.999)]
                        : 0;
    c->local_max = c->nlat_local ? c->lat_local[c->nlat_local - 1] : 0;
    if (c->decisions > 0) {
        c->cmds = d->all_calls / dn;
        c->outer_calls = d->outer_calls / dn;
        c->usec_dec = d->outer_usec / dn;
        c->usec_call = d->outer_calls > 0 ? d->outer_usec / d->outer_calls : 0;
        c->cpu_dec = d->cpu_s * 1e6 / dn;
        c->cpu_masters_dec = d->cpu_masters_s * 1e6 / dn;
        c->rtts = (double)c->round_trips / dn;
    }
    c->scripts = d->scripts;
    c->redis_failed = d->failed;
    c->mem = c->rule && c->pat == PAT_UNIFORM && c->md != MODE_REPLAY
                 ? memory_per_key(c->tgt->servers, c->prefix)
                 : 0;
    c->log_entries = 0;
    if (c->rule && strstr(c->rule, "log") && c->pat == PAT_HOT &&
        c->tgt->servers[0] != '\0') {
        entries e = {c->prefix, 0};

        each_server(c->tgt->servers, add_entries, &e);
        c->log_entries = e.most;
    }
    c->accuracy = 0;
    if (c->rule && c->pat == PAT_HOT && c->first_ms &&
        sluice_ruleset_parse(c->rule, &rs, NULL, 0) == SLUICE_OK &&
        rs.count == 1)
        c->accuracy = (double)c->admitted /
                      exact_bound(&rs.rules[0], c->first_ms, c->last_ms);
    /* Keys without a TTL are not left on servers we do not flush. */
    if (!flush_between && c->rule == NULL && strcmp(c->floor, "INCR") == 0)
        each_server(c->tgt->servers, unlink_prefix, c->prefix);
    free(c->lat);
    c->lat = NULL;
    free(c->lat_local);
    c->lat_local = NULL;
}

static void new_prefix(cell *c, char tag)
{
    snprintf(c->prefix, sizeof(c->prefix), "b%c%ld-%lld:", tag, (long)getpid(),
             (long long)now_us());
}

/* A cell: S seconds in one go (its own length if it has one), or, with
 * a paired floor or a twin, TURNS turns of S / TURNS seconds each, the
 * floor's (or the cell's) and the cell's (or its twin's) in
 * alternation. */
static void run_cell(cell *c)
{
    double secs = c->secs > 0 ? c->secs : seconds;
    int k;

    new_prefix(c, 'c');
    if (c->pair != NULL)
        new_prefix(c->pair, 'f');
    if (c->with_next)
        new_prefix(c + 1, 'c');
    if (flush_between && c->tgt->servers[0] != '\0')
        each_server(c->tgt->servers, flush_server, NULL);
    if (flush_between && c->pair != NULL && c->pair->tgt != c->tgt)
        each_server(c->pair->tgt->servers, flush_server, NULL);
    if (c->with_next) {
        for (k = 0; k < TURNS; k++) {
            run_turn(c, secs / TURNS);
            run_turn(c + 1, secs / TURNS);
        }
        finish_cell(c + 1);
    } else if (c->pair == NULL) {
        run_turn(c, secs);
    } else {
        for (k = 0; k < TURNS; k++) {
            run_turn(c->pair, seconds / TURNS);
            run_turn(c, seconds / TURNS);
        }
        finish_cell(c->pair);
    }
    finish_cell(c);
}

/* Full windows of a MODE_PROC cell: those wholly within its load. */
static bool full_window(const cell *c, int j)
{
    int64_t k = c->win0 + j;

    return c->run_to > 0 && k * 1000 >= c->run_from &&
           (k + 1) * 1000 <= c->run_to;
}

/* The reservation figures of a cell, and a MODE_PROC cell's windows on
 * the hot key, each checked against the limit. */
static void print_reserve(const cell *c)
{
    double dn = c->decisions > 0 ? (double)c->decisions : 1;
    int j, procs = c->procs > 0 ? c->procs : PROCS;

    printf("    %s: %.1f decisions a round trip (stats), local %.1f %%, "
           "batches %llu, units asked %llu granted %llu refunded %llu "
           "lapsed %llu, Redis %.4f us a decision\n",
           c->reserve_ms ? "reserve_ms=100" : "no reserve",
           c->st.round_trips ? dn / (double)c->st.round_trips : 0,
           100.0 * (double)c->st.reserve_admitted / dn,
           (unsigned long long)c->st.reserve_batches,
           (unsigned long long)c->st.reserve_asked,
           (unsigned long long)c->st.reserve_granted,
           (unsigned long long)c->st.reserve_refunded,
           (unsigned long long)c->st.reserve_lapsed, c->usec_dec);
    if (c->md == MODE_SHARED50 || c->md == MODE_LOOP1000)
        printf("    latency us: p99 %.0f p99.9 %.0f slowest %.0f; admitted "
               "from a reservation (%zu): p99 %.0f p99.9 %.0f slowest %.0f; "
               "timeouts %ld\n",
               c->p99, c->p999, c->slowest, c->nlat_local, c->p99_local,
               c->p999_local, c->local_max, c->timeouts);
    if (c->md == MODE_PROC)
        printf("    %d process(es) x %d threads, %s; lapsed %.0f a handle "
               "and window (stats, %.0f s); errors %ld, timeouts %ld, "
               "requests dropped behind schedule %ld\n",
               procs, PROC_THR, c->pace > 0 ? "paced" : "closed loop",
               (double)c->st.reserve_lapsed /
                   (procs * (c->secs > 0 ? c->secs : seconds)),
               c->secs > 0 ? c->secs : seconds, c->errors, c->timeouts,
               c->skipped);
    for (j = 0; j < WINS; j++) {
        if (!full_window(c, j) || c->pat != PAT_HOT)
            continue;
        printf("    window %lld: admitted %ld (%.2f %% of %d), denied %ld, "
               "charged on the server %ld, lost %ld\n",
               (long long)(c->win0 + j), c->win_admitted[j],
               100.0 * (double)c->win_admitted[j] / PROC_LIMIT, PROC_LIMIT,
               c->win_denied[j], c->win_charged[j],
               c->win_charged[j] < 0 ? -1
                                     : c->win_charged[j] - c->win_admitted[j]);
        if (c->win_admitted[j] > PROC_LIMIT || c->win_charged[j] > PROC_LIMIT)
            printf("FAIL: window %lld admitted %ld, charged %ld: above the "
                   "limit %d\n",
                   (long long)(c->win0 + j), c->win_admitted[j],
                   c->win_charged[j], PROC_LIMIT);
    }
}

static void print_cell(const cell *c, size_t idx, size_t total)
{
    char what[96];
    int j;
    bool first = true;

    snprintf(what, sizeof(what), "%s %s%s%s%s", c->tgt->name,
             c->rule ? c->rule : c->floor, c->deny_cache ? " deny_cache" : "",
             c->no_metrics ? " metrics=0" : "",
             c->reserve_ms ? " reserve" : "");
    if (c->pace > 0)
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " %.1fx %dp",
                 c->pace, c->procs > 0 ? c->procs : PROCS);
    printf("%-40s %-7s %-8s %10.0f %6.0f %6.0f %5.2f %5.2f %7.2f %7.2f "
           "%7.2f %5.0f %6.3f",
           what, pattern_names[c->pat], mode_names[c->md], c->dps, c->p50,
           c->p99, c->cmds, c->rtts, c->usec_call, c->usec_dec, c->cpu_dec,
           c->mem, c->accuracy);
    if (c->pair != NULL)
        printf(" (floor in turns: %.2f us, cpu %.2f)", c->pair->usec_dec,
               c->pair->cpu_dec);
    printf(" %s%s\n", c->errors ? "ERRORS " : "",
           c->redis_failed > 0.001 * (double)c->decisions ? "FAILED-CALLS"
                                                          : "");
    if (c->rule != NULL && (strcmp(c->section, "reserve") == 0 ||
                            strcmp(c->section, "capacity") == 0))
        print_reserve(c);
    else if (c->floor != NULL && strcmp(c->floor, "CPU") == 0)
        printf("    control, 50 threads without the library: latency us p99 "
               "%.0f p99.9 %.0f slowest %.0f\n",
               c->p99, c->p999, c->slowest);
    fflush(stdout);
    fprintf(stderr, "\rsluice-bench: %zu/%zu cells", idx, total);
    if (json != NULL) {
        fprintf(json,
                "%s\n  {\"target\": \"%s\", \"what\": \"%s\", \"kind\": "
                "\"%s\", \"section\": \"%s\", \"pattern\": \"%s\", "
                "\"mode\": \"%s\", \"deny_cache\": %u, \"metrics\": %s, "
                "\"decisions_per_s\": %.0f, \"p50_us\": %.0f, \"p99_us\": "
                "%.0f, \"p999_us\": %.0f, "
                "\"commands_per_decision\": %.3f, "
                "\"outer\": \"%s\", \"outer_calls_per_decision\": %.3f, "
                "\"usec_per_call\": %.3f, "
                "\"redis_usec_per_decision\": %.3f, "
                "\"cpu_usec_per_decision\": %.3f, "
                "\"cpu_usec_per_decision_masters\": %.3f, "
                "\"round_trips_per_decision\": %.3f, "
                "\"memory_bytes_per_key\": %.0f, \"log_entries\": %.0f, "
                "\"admitted\": %ld, \"decisions\": %ld, \"accuracy\": %.4f, "
                "\"errors\": %ld, \"redis_failed_calls\": %.0f, "
                "\"pair_what\": \"%s\", \"pair_usec_per_decision\": %.3f, "
                "\"pair_cpu_usec_per_decision\": %.3f, "
                "\"pair_decisions_per_s\": %.0f",
                json_first ? "" : ",", c->tgt->name,
                c->rule ? c->rule : c->floor, c->rule ? "sluice" : "floor",
                c->section, pattern_names[c->pat], mode_names[c->md],
                (unsigned)c->deny_cache, c->no_metrics ? "false" : "true",
                c->dps, c->p50, c->p99, c->p999, c->cmds,
                c->scripts ? "script" : "commands", c->outer_calls,
                c->usec_call, c->usec_dec, c->cpu_dec, c->cpu_masters_dec,
                c->rtts, c->mem, c->log_entries, c->admitted, c->decisions,
                c->accuracy, c->errors, c->redis_failed,
                c->pair ? c->pair->floor : "", c->pair ? c->pair->usec_dec : 0,
                c->pair ? c->pair->cpu_dec : 0, c->pair ? c->pair->dps : 0);
        fprintf(json,
                ", \"reserve_ms\": %d, \"seconds\": %.2f, \"masters\": %d, "
                "\"processes\": %d, \"threads\": %d, "
                "\"stats_backend_requests\": %llu, "
                "\"stats_round_trips\": %llu, \"reserve_admitted\": %llu, "
                "\"reserve_batches\": %llu, \"reserve_asked\": %llu, "
                "\"reserve_granted\": %llu, \"reserve_refunded\": %llu, "
                "\"reserve_lapsed\": %llu, \"pace\": %.2f, "
                "\"p99_local_us\": %.0f, \"p999_local_us\": %.0f, "
                "\"local_max_us\": %.0f, \"local_decisions\": %zu, "
                "\"slowest_us\": %.0f, \"timeouts\": %ld, \"skipped\": %ld, "
                "\"turn_decisions_per_s\": [",
                c->reserve_ms, c->secs > 0 ? c->secs : seconds, c->masters,
                c->md == MODE_PROC ? (c->procs > 0 ? c->procs : PROCS) : 1,
                c->md == MODE_PROC                                ? PROC_THR
                : c->md == MODE_THREADS || c->md == MODE_SHARED50 ? THREADS
                                                                  : 1,
                (unsigned long long)c->st.backend_requests,
                (unsigned long long)c->st.round_trips,
                (unsigned long long)c->st.reserve_admitted,
                (unsigned long long)c->st.reserve_batches,
                (unsigned long long)c->st.reserve_asked,
                (unsigned long long)c->st.reserve_granted,
                (unsigned long long)c->st.reserve_refunded,
                (unsigned long long)c->st.reserve_lapsed, c->pace, c->p99_local,
                c->p999_local, c->local_max, c->nlat_local, c->slowest,
                c->timeouts, c->skipped);
        for (j = 0; j < TURNS && j < c->turns; j++)
            fprintf(json, "%s%.0f", j ? ", " : "", c->turn_dps[j]);
        fprintf(json, "], \"windows\": [");
        for (j = 0; j < WINS; j++) {
            if (!full_window(c, j) || c->pat != PAT_HOT)
                continue;
            fprintf(json, "%s[%lld, %ld, %ld, %ld]", first ? "" : ", ",
                    (long long)(c->win0 + j), c->win_admitted[j],
                    c->win_charged[j], c->win_denied[j]);
            first = false;
        }
        fprintf(json, "], \"window_limit\": %d}", PROC_LIMIT);
        json_first = false;
    }
}

/* SCRIPT LOAD of the floor's script on a server (a proxy cannot load
 * scripts: its backends can). */
static void load_script(redisContext *c, void *ctx)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", floor_script);

    (void)ctx;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(floor_sha, sizeof(floor_sha), "%s", r->str);
    if (r != NULL)
        freeReplyObject(r);
}

/* N sequential decisions on url: run under callgrind twice with two N
 * to get the client's instructions per decision. */
static int instructions(const char *url, long n)
{
    sluice_options o;
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
    /* Under callgrind on a busy machine a reply can take long. */
    memset(&o, 0, sizeof(o));
    o.command_timeout_ms = 10000;
    if (sluice_ruleset_parse("fixed:1000/1s", &rs, NULL, 0) != SLUICE_OK ||
        sluice_open(url, &o, &sl, err, sizeof(err)) != SLUICE_OK) {
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

static const char *only_section; /* --section: only its cells */

static void usage(void)
{
    fprintf(stderr,
            "usage: sluice-bench --target NAME=URL[|host:port,...] ... "
            "[--seconds S] [--json FILE] [--flush] [--replay]\n"
            "       [--section NAME]\n"
            "       sluice-bench --print-command RULE [--key K] [--prefix P]\n"
            "       sluice-bench --instructions URL --decisions N\n"
            "  NAME redis, multi, twemproxy, lua-proxy, cluster, mem: the "
            "backends;\n"
            "  the servers after '|' are read with INFO (default: the "
            "URL's).\n"
            "  --flush   FLUSHALL every server before each cell (servers of "
            "the harness's own only)\n"
            "  --replay  also replay the exact command with redis-benchmark "
            "-c 1 -P 16 on 'redis'\n"
            "  --section only the cells of one section (throughput, rcpu, "
            "peers, denycache, metrics, reserve, capacity)\n"
            "  targets named cap* (clusters of 1, 3, 6 masters) get the "
            "capacity cells only\n");
}

static void add_cell(const target *t, const char *rule, const char *floor,
                     pattern p, mode m, const char *section)
{
    cells[ncells++] = (cell){.tgt = t,
                             .rule = rule,
                             .floor = floor,
                             .pat = p,
                             .md = m,
                             .section = section};
}

static bool named(const target *t, const char *name)
{
    return strcmp(t->name, name) == 0;
}

/* The capacity clusters (cap1, cap3, cap6): their own cells only. */
static bool capacity_target(const target *t)
{
    return strncmp(t->name, "cap", 3) == 0;
}

/* A cell and its twin with reserve_ms=RESERVE_MS, run in turns. */
static void add_reserve_pair(const target *t, const char *rule, pattern p,
                             mode m, const char *section)
{
    add_cell(t, rule, NULL, p, m, section);
    cells[ncells - 1].with_next = true;
    add_cell(t, rule, NULL, p, m, section);
    cells[ncells - 1].reserve_ms = RESERVE_MS;
}

/* Targets whose floors are measured: plain Redis or a proxy before it. */
static bool has_floors(const target *t)
{
    return (named(t, "redis") || named(t, "twemproxy")) &&
           (strncmp(t->url, "redis://", 8) == 0 ||
            strncmp(t->url, "twemproxy://", 12) == 0);
}

/* Where a target's floors are measured: through the same proxy for the
 * targets named lua-proxy and twemproxy, else on the target named redis.
 * NULL when there is none. */
static const target *floor_target(const target *t)
{
    const char *want =
        named(t, "lua-proxy") || named(t, "twemproxy") ? "twemproxy" : "redis";
    size_t i;

    if (strncmp(t->url, "mem://", 6) == 0)
        return NULL;
    for (i = 0; i < ntargets; i++)
        if (named(&targets[i], want) && has_floors(&targets[i]))
            return &targets[i];
    return NULL;
}

/* Targets that run on an event loop (sluice_attach). */
static bool refused(const target *t, const char *rule)
{
    /* twemproxy:// refuses token and gcra by design (no scripts, no
     * WATCH through a proxy). */
    return named(t, "twemproxy") &&
           (strstr(rule, "token") || strstr(rule, "gcra"));
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"target", required_argument, NULL, 't'},
        {"seconds", required_argument, NULL, 's'},
        {"json", required_argument, NULL, 'j'},
        {"instructions", required_argument, NULL, 'i'},
        {"decisions", required_argument, NULL, 'n'},
        {"print-command", required_argument, NULL, 'P'},
        {"key", required_argument, NULL, 'k'},
        {"prefix", required_argument, NULL, 'x'},
        {"flush", no_argument, NULL, 'F'},
        {"replay", no_argument, NULL, 'R'},
        {"redis-benchmark", required_argument, NULL, 'B'},
        {"section", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0}};
    /* The two rules of the composite come first and alone, so that the
     * composite is set beside their sum. */
    static const char *const rules[] = {
        "fixed:1000/1s", "sliding:1000/1s", "log:100/1s",
        "token:1000/1s", "gcra:1000/1s",    "fixed:1000/1s+token:1000/1s"};
    static const pattern rcpu_pats[] = {PAT_HOT, PAT_NEW};
    const size_t nrules = sizeof(rules) / sizeof(rules[0]);
    size_t i, r, p, f, k;
    int opt, m;
    double h = 0;
    const char *instr_url = NULL, *print_rule = NULL, *print_key = "k0";
    const char *print_prefix = NULL;
    long instr_n = 0;
    bool do_replay = false;

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
                const char *s = strstr(t->url, "://") + 3, *a = strchr(s, '@');

                snprintf(t->servers, sizeof(t->servers), "%.*s",
                         (int)strcspn(a ? a + 1 : s, "/?"), a ? a + 1 : s);
            }
            ntargets++;
            break;
        }
        case 's':
            seconds = atof(optarg);
            break;
        case 'S':
            only_section = optarg;
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
        case 'P':
            print_rule = optarg;
            break;
        case 'k':
            print_key = optarg;
            break;
        case 'x':
            print_prefix = optarg;
            break;
        case 'F':
            flush_between = true;
            break;
        case 'R':
            do_replay = true;
            break;
        case 'B':
            redis_benchmark = optarg;
            break;
        default:
            usage();
            return 2;
        }
    }
    if (print_rule != NULL)
        return print_command(print_rule, print_key, print_prefix);
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
    cells = calloc(1024, sizeof(*cells));
    pairs = calloc(256, sizeof(*pairs));
    for (i = 0; i < ntargets; i++)
        if (has_floors(&targets[i]))
            each_server(targets[i].servers, load_script, NULL);

    /* 1. Redis CPU: 16 in flight on one connection, a hot key and new
     * keys. Each cell runs in turns with its own EVALSHA floor (the
     * machine drifts, and on a shared one fast); the floors on their own
     * once, INCR among them. */
    for (f = 0; f < ntargets; f++) {
        const target *ft = &targets[f];

        if (!has_floors(ft))
            continue;
        for (p = 0; p < 2; p++) {
            add_cell(ft, NULL, "EVALSHA", rcpu_pats[p], MODE_PIPE, "rcpu");
            add_cell(ft, NULL, "INCR", rcpu_pats[p], MODE_PIPE, "rcpu");
        }
        for (i = 0; i < ntargets; i++) {
            /* TLS: throughput beside plain TCP only (below). */
            if (floor_target(&targets[i]) != ft || named(&targets[i], "tls") ||
                capacity_target(&targets[i]))
                continue;
            for (r = 0; r < nrules; r++)
                if (!refused(&targets[i], rules[r]))
                    for (p = 0; p < 2; p++) {
                        add_cell(&targets[i], rules[r], NULL, rcpu_pats[p],
                                 MODE_PIPE, "rcpu");
                        pairs[npairs] = (cell){.tgt = ft,
                                               .floor = "EVALSHA",
                                               .pat = rcpu_pats[p],
                                               .md = MODE_PIPE,
                                               .section = "pair"};
                        cells[ncells - 1].pair = &pairs[npairs++];
                    }
        }
        /* The same, replayed by redis-benchmark, on plain Redis. */
        if (!do_replay || !named(ft, "redis"))
            continue;
        for (p = 0; p < 2; p++)
            add_cell(ft, NULL, "EVALSHA", rcpu_pats[p], MODE_REPLAY, "rcpu");
        for (r = 0; r < nrules; r++)
            for (p = 0; p < 2; p++)
                add_cell(ft, rules[r], NULL, rcpu_pats[p], MODE_REPLAY, "rcpu");
        for (p = 0; p < 2; p++)
            add_cell(ft, NULL, "EVALSHA", rcpu_pats[p], MODE_REPLAY, "rcpu");
    }

    /* Targets with no floor of their kind among the targets still get
     * their Redis CPU measured. */
    for (i = 0; i < ntargets; i++)
        if (floor_target(&targets[i]) == NULL &&
            strncmp(targets[i].url, "mem://", 6) != 0 &&
            !capacity_target(&targets[i]))
            for (r = 0; r < nrules; r++)
                if (!refused(&targets[i], rules[r]))
                    for (p = 0; p < 2; p++)
                        add_cell(&targets[i], rules[r], NULL, rcpu_pats[p],
                                 MODE_PIPE, "rcpu");

    /* 2. Throughput: every backend x algorithm x mode on uniform keys,
     * between two measurements of the floors. */
    for (k = 0; k < 2; k++) {
        for (i = 0; i < ntargets; i++)
            if (has_floors(&targets[i]))
                for (m = MODE_SEQ; m <= MODE_THREADS; m++) {
                    add_cell(&targets[i], NULL, "EVALSHA", PAT_UNIFORM, (mode)m,
                             "throughput");
                    add_cell(&targets[i], NULL, "INCR", PAT_UNIFORM, (mode)m,
                             "throughput");
                }
        for (i = 0; k == 0 && i < ntargets; i++)
            for (r = 0; r < nrules; r++)
                if (!refused(&targets[i], rules[r]) &&
                    !(named(&targets[i], "tls") && r > 0) &&
                    !capacity_target(&targets[i])) {
                    for (m = MODE_SEQ; m <= MODE_THREADS; m++)
                        add_cell(&targets[i], rules[r], NULL, PAT_UNIFORM,
                                 (mode)m, "throughput");
                    add_cell(&targets[i], rules[r], NULL, PAT_UNIFORM,
                             MODE_SHARED50, "throughput");
                    add_cell(&targets[i], rules[r], NULL, PAT_UNIFORM,
                             MODE_LOOP50, "throughput");
                    add_cell(&targets[i], rules[r], NULL, PAT_UNIFORM,
                             MODE_LOOP1000, "throughput");
                }
    }

    /* The local deny cache on a hot denied key (one admission an hour):
     * the same cell with the cache off and on, one after the other. */
    for (i = 0; i < ntargets; i++) {
        if (!named(&targets[i], "redis"))
            continue;
        add_cell(&targets[i], "fixed:1/1h", NULL, PAT_HOT, MODE_SEQ,
                 "denycache");
        add_cell(&targets[i], "fixed:1/1h", NULL, PAT_HOT, MODE_SEQ,
                 "denycache");
        cells[ncells - 1].deny_cache = 4096;
    }

    /* The cost of the handle's counters on the hot path: the same cell
     * with metrics=0 and with them (the default), one after the other. */
    for (i = 0; i < ntargets; i++) {
        if (!named(&targets[i], "mem") && !named(&targets[i], "redis"))
            continue;
        add_cell(&targets[i], rules[0], NULL, PAT_UNIFORM, MODE_SEQ, "metrics");
        cells[ncells - 1].no_metrics = true;
        add_cell(&targets[i], rules[0], NULL, PAT_UNIFORM, MODE_SEQ, "metrics");
    }

    /* 3. What the peers are set against: redis:// fixed windows on each key
     * pattern, sequential and 50 at once. */
    for (i = 0; i < ntargets; i++) {
        if (!named(&targets[i], "redis"))
            continue;
        add_cell(&targets[i], rules[0], NULL, PAT_HOT, MODE_SEQ, "peers");
        add_cell(&targets[i], rules[0], NULL, PAT_ZIPF, MODE_SEQ, "peers");
        add_cell(&targets[i], rules[0], NULL, PAT_HOT, MODE_THREADS, "peers");
        add_cell(&targets[i], rules[0], NULL, PAT_ZIPF, MODE_THREADS, "peers");
        for (p = PAT_HOT; p <= PAT_ZIPF; p++)
            add_cell(&targets[i], rules[0], NULL, (pattern)p, MODE_SHARED50,
                     "peers");
        for (p = PAT_HOT; p <= PAT_ZIPF; p++)
            add_cell(&targets[i], rules[0], NULL, (pattern)p, MODE_PIPE50,
                     "peers");
        for (p = PAT_HOT; p <= PAT_ZIPF; p++) {
            add_cell(&targets[i], rules[0], NULL, (pattern)p, MODE_LOOP50,
                     "peers");
            add_cell(&targets[i], rules[0], NULL, (pattern)p, MODE_LOOP1000,
                     "peers");
        }
    }

    /* 4. Reservations (issue 22): one hot key on a rule that never
     * denies, 50 threads on one handle and 1,000 in flight on the loop,
     * without and with reserve_ms, in turns; beside the EVALSHA floor's
     * Redis CPU on the hot key. */
    for (i = 0; i < ntargets; i++)
        if (named(&targets[i], "redis") && has_floors(&targets[i]))
            add_cell(&targets[i], NULL, "EVALSHA", PAT_HOT, MODE_PIPE,
                     "reserve");
    for (i = 0; i < ntargets; i++) {
        if (capacity_target(&targets[i]))
            continue;
        add_reserve_pair(&targets[i], HOT_RULE, PAT_HOT, MODE_SHARED50,
                         "reserve");
        add_reserve_pair(&targets[i], HOT_RULE, PAT_HOT, MODE_LOOP1000,
                         "reserve");
    }
    /* Their control: the same 50 threads without the library. */
    for (i = 0; i < ntargets; i++)
        if (!capacity_target(&targets[i])) {
            add_cell(&targets[i], NULL, "CPU", PAT_HOT, MODE_SHARED50,
                     "reserve");
            break;
        }
    /* The cold path: uniform keys, where no key is seen often enough to
     * reserve; and several processes on one key, 10 s. */
    for (i = 0; i < ntargets; i++) {
        if (!named(&targets[i], "redis"))
            continue;
        add_reserve_pair(&targets[i], rules[0], PAT_UNIFORM, MODE_SHARED50,
                         "reserve");
        add_cell(&targets[i], PROC_RULE, NULL, PAT_HOT, MODE_PROC, "reserve");
        cells[ncells - 1].reserve_ms = RESERVE_MS;
        cells[ncells - 1].secs = PROC_SECONDS;
    }

    /* Paced demand on one key of PROC_RULE, on every backend (issue 31):
     * 0.9x the limit from one handle of 8 threads and from 4 processes,
     * then 1.5x from 4 processes; each window's admissions, denials and
     * counter. mem:// is one process's store: one handle only. */
    for (i = 0; i < ntargets; i++) {
        static const struct {
            double pace;
            int procs;
        } paced[] = {{0.9, 1}, {0.9, PROCS}, {1.5, PROCS}};

        if (capacity_target(&targets[i]))
            continue;
        for (k = 0; k < sizeof(paced) / sizeof(paced[0]); k++) {
            if (paced[k].procs > 1 && strncmp(targets[i].url, "mem://", 6) == 0)
                continue;
            add_cell(&targets[i], PROC_RULE, NULL, PAT_HOT, MODE_PROC,
                     "reserve");
            cells[ncells - 1].reserve_ms = RESERVE_MS;
            cells[ncells - 1].secs = PACED_SECONDS;
            cells[ncells - 1].pace = paced[k].pace;
            cells[ncells - 1].procs = paced[k].procs;
        }
    }

    /* 5. Capacity planning: the same processes on 64 keys over the
     * slots of clusters of 1, 3 and 6 masters, without and with
     * reservations. */
    for (i = 0; i < ntargets; i++)
        if (capacity_target(&targets[i]))
            add_reserve_pair(&targets[i], PROC_RULE, PAT_SPREAD, MODE_PROC,
                             "capacity");

    if (json != NULL)
        fprintf(json,
                "{\"seconds_per_cell\": %.2f, \"floor_script\": \"%s\", "
                "\"cells\": [",
                seconds, floor_script);
    printf("%-40s %-7s %-8s %10s %6s %6s %5s %5s %7s %7s %7s %5s %6s\n",
           "target and rule", "keys", "mode", "decisions/s", "p50us", "p99us",
           "cmds", "rtts", "us/call", "us/dec", "cpu/dec", "bytes", "admit");
    for (i = 0; i < ncells; i++) {
        if (only_section != NULL &&
            strcmp(cells[i].section, only_section) != 0) {
            i += cells[i].with_next;
            continue;
        }
        if (strcmp(cells[i].section, "capacity") == 0 &&
            (i == 0 || strcmp(cells[i - 1].section, "capacity") != 0))
            printf("capacity: %ld CPUs here; masters and load share them, "
                   "so with fewer cores than masters the figures are "
                   "bounded by the cores, not by the masters\n",
                   sysconf(_SC_NPROCESSORS_ONLN));
        run_cell(&cells[i]);
        print_cell(&cells[i], i + 1, ncells);
        if (cells[i].with_next) {
            i++;
            print_cell(&cells[i], i + 1, ncells);
        }
    }
    fprintf(stderr, "\n");
    if (json != NULL) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    free(cells);
    free(pairs);
    return 0;
}
