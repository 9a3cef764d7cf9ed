/* SPDX-License-Identifier: BSD-3-Clause */
/* test_crossing.c - the features that meet in one call, crossed pairwise
 * and checked against a table written from the documents, not from the
 * code: the subject (a key with its rules, or a named limiter with a
 * client), the driver (blocking, threads sharing a handle, a batch,
 * libevent, libuv), the backend's condition (healthy, a refused connect, a
 * frozen server, an error reply), the fail policy, the deny cache,
 * reservations, shadow mode, whether a name's rules were read before the
 * failure, and where the policy comes from (the handle's options, or a
 * policy: the limiter's, or the call's).
 *   test_crossing URL|@file --backend NAME --expect FILE --failures FILE
 *                 [--servers LIST|@file --own DIR --fake FAKE_SERVER_PY]
 *
 * The cases are an all-pairs reduction of those nine factors, generated
 * here (deterministic, no randomness): while some feasible pair of values
 * of two factors is in no case, a case is made from the first such pair,
 * and each other factor, the largest domain first, takes the value that
 * covers the most pairs not yet covered with the values chosen so far
 * (the first on a tie) among those that keep the case feasible. Two
 * constraints make a pair infeasible: there is no batch by name (no
 * sluice_limiter_acquire_many), so (name, batch) is left out by
 * construction; and "rules read before the failure" is yes or no exactly
 * for a name on a backend that fails, "na" otherwise. The construction
 * runs twice: first with the condition held to healthy (every pair of the
 * other factors is then decided by a healthy backend; that is all mem://
 * runs), then on from those cases over every condition. The first test
 * case checks both coverages.
 *
 * Each case opens a handle of its own (its own key prefix, a clock that
 * stands still so that the window of fixed:8/1h never ends mid-case) and
 * makes 10 acquires of one key or one client (8 within the limit, the 9th
 * over it, the 10th the same again), and by name one acquire of an
 * allow-listed and one of a deny-listed client. Every answer must match
 * the first row of tests/crossing/expect.tsv that names its case and its
 * class of request; the failure statuses a condition may give are in
 * tests/crossing/failures.tsv; both files say their format at their top.
 * The counters (sluice_get_stats) must have grown as the rows say, every
 * request counted exactly once, every call once.
 *
 * Where the policy comes from (docs/SEMANTICS.md, "Policies"): handle,
 * the fail policy, deny cache, reservations and shadow mode in the
 * handle's URL; policy, a handle opened with fail=error and none of the
 * others, and the same four given as a sluice_policy: for a name,
 * sluice_limiter_policy_set("lim") on the case's handle; for a key, with
 * every call (sluice_acquire_with, _with_async, sluice_acquire_many_with).
 * The answers and counters must be the same, so the table has no column
 * for it: every row holds for both.
 *
 * The conditions: refused is a loopback port nothing listens on (bound,
 * read, closed) or, for a name whose rules the handle read, the test's own
 * servers killed (those cases run last); frozen is the test's own servers
 * stopped with SIGSTOP (and SIGCONT after the case); an error reply is
 * tests/fake_server.py's "escapes" mode (-ERR to every command) or, for a
 * name whose rules the handle read while healthy, the test's own servers
 * with min-replicas-to-write 10 for the case (-NOREPLICAS to every write;
 * the reads of the rules still answered). */
#include "testutil.h"

#include <hiredis/hiredis.h>

#include <dirent.h>
#include <event2/event.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sluice/libevent.h>
#include <sluice/libuv.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/un.h>
#include <uv.h>

#include <cmocka.h>

#define LIMIT     8  /* fixed:8/1h, the rules of every case */
#define MAX_REQ   16 /* requests of a case */
#define THREADS   3  /* the threads driver's, on one handle */
#define MAX_CASES 96
#define MAX_ROWS  64 /* rows of expect.tsv */
#define MAX_FROWS 16 /* rows of failures.tsv */
#define T0        (28333334LL * 60000 + 1800000)

/* ------------------------------------------------------------ factors */

enum {
    SUBJECT,
    DRIVER,
    COND,
    FAIL,
    DENY,
    RSV,
    SHADOW,
    READ,
    FROM, /* where the policy comes from: not a column of the table */
    NF
};
#define NT FROM /* the factors the table names */
enum {
    KEY,
    NAME
};
enum {
    BLOCK,
    THREADED,
    BATCH,
    LIBEVENT,
    LIBUV
};
enum {
    HEALTHY,
    REFUSED,
    FROZEN,
    ERROR_REPLY
};
enum {
    READ_NA,
    READ_YES,
    READ_NO
};
/* A policy first: the all-pairs construction takes the first value on a
 * tie, so most cases run with the policy given apart from the handle. */
enum {
    FROM_POLICY,
    FROM_HANDLE
};
#define MAXV 5

static const char *const factor_names[NF] = {"subject", "driver", "cond",
                                             "fail",    "deny",   "rsv",
                                             "shadow",  "read",   "from"};
static const char *const factor_values[NF][MAXV] = {
    {"key", "name"},
    {"block", "threads", "batch", "libevent", "libuv"},
    {"healthy", "refused", "frozen", "error"},
    {"error", "open", "closed", "fallback"}, /* sluice_fail_policy order */
    {"0", "1"},
    {"0", "1"},
    {"0", "1"},
    {"na", "yes", "no"},
    {"policy", "handle"},
};
static const int factor_sizes[NF] = {2, 5, 4, 4, 2, 2, 2, 3, 2};
/* The values in play: every one, or the condition healthy alone. */
static int domain[NF];

/* Whether a whole case can be run (see the top of the file). */
static bool feasible(const int *v)
{
    bool name = v[SUBJECT] == NAME;

    if (name && v[DRIVER] == BATCH)
        return false;
    return (v[READ] != READ_NA) == (name && v[COND] != HEALTHY);
}

/* Whether a case with some factors unset (-1) can still be made
 * feasible: the constraints only involve subject, driver, cond and read. */
static bool completable(const int *v)
{
    int w[NF], s, d, c, r;

    memcpy(w, v, sizeof(w));
    for (s = 0; s < domain[SUBJECT]; s++)
        for (d = 0; d < domain[DRIVER]; d++)
            for (c = 0; c < domain[COND]; c++)
                for (r = 0; r < domain[READ]; r++) {
                    if ((v[SUBJECT] >= 0 && v[SUBJECT] != s) ||
                        (v[DRIVER] >= 0 && v[DRIVER] != d) ||
                        (v[COND] >= 0 && v[COND] != c) ||
                        (v[READ] >= 0 && v[READ] != r))
                        continue;
                    w[SUBJECT] = s;
                    w[DRIVER] = d;
                    w[COND] = c;
                    w[READ] = r;
                    if (feasible(w))
                        return true;
                }
    return false;
}

/* Pairs of values of two factors (f < g): needed (in some feasible case)
 * and covered (in some case made). */
static bool needed[NF][MAXV][NF][MAXV], covered[NF][MAXV][NF][MAXV];
static int cases[MAX_CASES][NF];
static size_t ncases, nhealthy; /* the first nhealthy: healthy alone */

static bool *pair_of(bool (*t)[MAXV][NF][MAXV], int f, int a, int g, int b)
{
    return f < g ? &t[f][a][g][b] : &t[g][b][f][a];
}

static void mark_pairs(bool (*t)[MAXV][NF][MAXV], const int *v)
{
    for (int f = 0; f < NF; f++)
        for (int g = f + 1; g < NF; g++)
            t[f][v[f]][g][v[g]] = true;
}

/* Every feasible case, and the pairs in them. */
static size_t find_needed(void)
{
    int v[NF] = {0};
    size_t pairs = 0;

    memset(needed, 0, sizeof(needed));
    for (;;) {
        int f;

        if (feasible(v))
            mark_pairs(needed, v);
        for (f = NF - 1; f >= 0 && ++v[f] == domain[f]; f--)
            v[f] = 0;
        if (f < 0)
            break;
    }
    for (int f = 0; f < NF; f++)
        for (int a = 0; a < domain[f]; a++)
            for (int g = f + 1; g < NF; g++)
                for (int b = 0; b < domain[g]; b++)
                    pairs += needed[f][a][g][b];
    return pairs;
}

/* The first pair needed and not yet covered, in factor and value order. */
static bool first_uncovered(int *f, int *a, int *g, int *b)
{
    for (*f = 0; *f < NF; (*f)++)
        for (*a = 0; *a < domain[*f]; (*a)++)
            for (*g = *f + 1; *g < NF; (*g)++)
                for (*b = 0; *b < domain[*g]; (*b)++)
                    if (needed[*f][*a][*g][*b] && !covered[*f][*a][*g][*b])
                        return true;
    return false;
}

/* The greedy all-pairs construction described at the top, going on from
 * the cases made so far. */
static void make_cases(void)
{
    static const int order[NF] = {DRIVER, COND, FAIL,   READ, SUBJECT,
                                  DENY,   RSV,  SHADOW, FROM};
    int v[NF], f, a, g, b;

    memset(covered, 0, sizeof(covered));
    for (size_t i = 0; i < ncases; i++)
        mark_pairs(covered, cases[i]);
    while (first_uncovered(&f, &a, &g, &b)) {
        for (int k = 0; k < NF; k++)
            v[k] = -1;
        v[f] = a;
        v[g] = b;
        for (int i = 0; i < NF; i++) {
            int k = order[i], best = -1, best_gain = -1;

            if (v[k] >= 0)
                continue;
            for (int x = 0; x < domain[k]; x++) {
                int gain = 0;

                v[k] = x;
                if (!completable(v))
                    continue;
                for (int h = 0; h < NF; h++)
                    if (h != k && v[h] >= 0 &&
                        *pair_of(needed, k, x, h, v[h]) &&
                        !*pair_of(covered, k, x, h, v[h]))
                        gain++;
                if (gain > best_gain) {
                    best_gain = gain;
                    best = x;
                }
            }
            v[k] = best;
        }
        if (!feasible(v) || ncases == MAX_CASES) {
            fprintf(stderr, "the all-pairs construction went wrong\n");
            exit(1);
        }
        memcpy(cases[ncases++], v, sizeof(v));
        mark_pairs(covered, v);
    }
}

/* -------------------------------------------------- the expectations */

enum {
    REQ_IN,
    REQ_OVER,
    REQ_AGAIN,
    REQ_ALLOW,
    REQ_DENY,
    NREQ
};
static const char *const req_names[NREQ] = {"in", "over", "again", "allow",
                                            "deny"};

enum {
    C_ALLOWED,
    C_DENIED,
    C_HITS,
    C_POLICY,
    C_RESERVED,
    C_ALLOWLISTED,
    C_DENYLISTED,
    C_SHADOW,
    C_FAILURES, /* failures[] at the answer's failure status */
    NCOUNT
};
static const char *const count_names[NCOUNT] = {
    "allowed",        "denied",           "deny_cache_hits",
    "policy_answers", "reserve_admitted", "allowlisted",
    "denylisted",     "shadow_admitted",  "failures"};
static const size_t count_offsets[C_FAILURES] = {
    offsetof(sluice_stats, allowed),
    offsetof(sluice_stats, denied),
    offsetof(sluice_stats, deny_cache_hits),
    offsetof(sluice_stats, policy_answers),
    offsetof(sluice_stats, reserve_admitted),
    offsetof(sluice_stats, allowlisted),
    offsetof(sluice_stats, denylisted),
    offsetof(sluice_stats, shadow_admitted)};

static const struct {
    const char *name;
    sluice_status st;
} status_names[] = {
#define SLUICE_X(name, msg) {#name, SLUICE_##name},
    SLUICE_STATUS_MAP(SLUICE_X)
#undef SLUICE_X
};
#define NSTATUS (sizeof(status_names) / sizeof(status_names[0]))
#define F_BIT   (1u << 31) /* "F" in a set of statuses */

static const char *status_text(sluice_status st)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (status_names[i].st == st)
            return status_names[i].name;
    return "?";
}

typedef enum {
    EXACTLY,
    MAYBE,
    WHEN
} count_how;

typedef struct count_token {
    int counter;
    count_how how;
    sluice_status when; /* WHEN: counted when the answer has this status */
} count_token;

typedef struct expect_row {
    unsigned factor[NT]; /* a bit per value */
    unsigned req;        /* a bit per class */
    bool ret_f;          /* ret F (a failure status), else SLUICE_OK */
    int allowed;         /* 1, 0, or -1: not checked */
    uint32_t status;     /* a bit per status, F_BIT; 0: not checked */
    bool msg;            /* sluice_errmsg() not empty */
    count_token counts[8];
    size_t ncounts;
    int line;
    char ref[320];
    size_t used; /* answers held to it */
} expect_row;

typedef struct failure_row {
    unsigned cond;
    char backends[256]; /* "*" or a comma list */
    uint32_t status;
    int line;
} failure_row;

static expect_row rows[MAX_ROWS];
static size_t nrows;
static failure_row frows[MAX_FROWS];
static size_t nfrows;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void bad_table(const char *path, int line, const char *what,
                      const char *text)
{
    fprintf(stderr, "%s:%d: %s: \"%s\"\n", path, line, what, text);
    exit(1);
}

/* Splits a line at tabs into at most max fields; returns the count. */
static size_t split_tabs(char *line, char **fields, size_t max)
{
    size_t n = 0;

    for (;;) {
        char *tab = strchr(line, '\t');

        if (n == max)
            return max + 1;
        fields[n++] = line;
        if (tab == NULL)
            return n;
        *tab = '\0';
        line = tab + 1;
    }
}

/* "*" or a comma list of names: a bit per name's index. */
static unsigned parse_set(const char *path, int line, const char *text,
                          const char *const *names, int count)
{
    char buf[256], *save = NULL, *item;
    unsigned set = 0;

    if (strcmp(text, "*") == 0)
        return (1u << count) - 1;
    snprintf(buf, sizeof(buf), "%s", text);
    for (item = strtok_r(buf, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        int i;

        for (i = 0; i < count && strcmp(names[i], item) != 0; i++)
            ;
        if (i == count)
            bad_table(path, line, "unknown value", item);
        set |= 1u << i;
    }
    return set;
}

static sluice_status parse_status(const char *path, int line, const char *t)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (strcmp(status_names[i].name, t) == 0)
            return status_names[i].st;
    bad_table(path, line, "unknown status", t);
    return SLUICE_OK;
}

/* A comma list of status names and F; "-": 0. */
static uint32_t parse_statuses(const char *path, int line, const char *text)
{
    char buf[256], *save = NULL, *item;
    uint32_t set = 0;

    if (strcmp(text, "-") == 0)
        return 0;
    snprintf(buf, sizeof(buf), "%s", text);
    for (item = strtok_r(buf, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save))
        set |= strcmp(item, "F") == 0
                   ? F_BIT
                   : 1u << (unsigned)parse_status(path, line, item);
    return set;
}

static void parse_counts(const char *path, int line, const char *text,
                         expect_row *e)
{
    char buf[256], *save = NULL, *item;

    if (strcmp(text, "-") == 0)
        return;
    snprintf(buf, sizeof(buf), "%s", text);
    for (item = strtok_r(buf, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        count_token *t = &e->counts[e->ncounts];
        char *at = strchr(item, '@');
        size_t len = strlen(item);
        int c;

        if (e->ncounts == sizeof(e->counts) / sizeof(e->counts[0]))
            bad_table(path, line, "too many counters", text);
        t->how = EXACTLY;
        if (at != NULL) {
            *at = '\0';
            t->how = WHEN;
            t->when = parse_status(path, line, at + 1);
        } else if (len > 0 && item[len - 1] == '?') {
            item[len - 1] = '\0';
            t->how = MAYBE;
        }
        for (c = 0; c < NCOUNT && strcmp(count_names[c], item) != 0; c++)
            ;
        if (c == NCOUNT)
            bad_table(path, line, "unknown counter", item);
        t->counter = c;
        e->ncounts++;
    }
}

/* The lines of a table that are neither empty nor comments, the first of
 * them the header; fn gets each row's fields. */
static void read_table(const char *path, const char *header, size_t ncol,
                       void (*fn)(const char *, int, char **))
{
    char *buf = read_all(path), *line = buf, *next;
    bool seen_header = false;
    int n = 0;

    for (; line != NULL; line = next) {
        char *fields[24];
        size_t len;

        n++;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (!seen_header) {
            if (strcmp(line, header) != 0)
                bad_table(path, n, "the header should be", header);
            seen_header = true;
            continue;
        }
        if (split_tabs(line, fields, 24) != ncol)
            bad_table(path, n, "wrong number of tab-separated fields",
                      fields[0]);
        fn(path, n, fields);
    }
    free(buf);
}

static void expect_line(const char *path, int line, char **f)
{
    expect_row *e = &rows[nrows];

    if (nrows == MAX_ROWS)
        bad_table(path, line, "too many rows", f[0]);
    memset(e, 0, sizeof(*e));
    for (int k = 0; k < NT; k++)
        e->factor[k] =
            parse_set(path, line, f[k], factor_values[k], factor_sizes[k]);
    e->req = parse_set(path, line, f[NT], req_names, NREQ);
    if (strcmp(f[NT + 1], "OK") != 0 && strcmp(f[NT + 1], "F") != 0)
        bad_table(path, line, "ret is OK or F", f[NT + 1]);
    e->ret_f = strcmp(f[NT + 1], "F") == 0;
    if (strcmp(f[NT + 2], "-") == 0)
        e->allowed = -1;
    else if (strcmp(f[NT + 2], "0") == 0 || strcmp(f[NT + 2], "1") == 0)
        e->allowed = f[NT + 2][0] - '0';
    else
        bad_table(path, line, "allowed is 1, 0 or -", f[NT + 2]);
    e->status = parse_statuses(path, line, f[NT + 3]);
    if (strcmp(f[NT + 4], "set") != 0 && strcmp(f[NT + 4], "-") != 0)
        bad_table(path, line, "msg is set or -", f[NT + 4]);
    e->msg = strcmp(f[NT + 4], "set") == 0;
    parse_counts(path, line, f[NT + 5], e);
    snprintf(e->ref, sizeof(e->ref), "%s", f[NT + 6]);
    e->line = line;
    nrows++;
}

static void failure_line(const char *path, int line, char **f)
{
    failure_row *r = &frows[nfrows];

    if (nfrows == MAX_FROWS)
        bad_table(path, line, "too many rows", f[0]);
    r->cond = parse_set(path, line, f[0], factor_values[COND], 4);
    snprintf(r->backends, sizeof(r->backends), "%s", f[1]);
    r->status = parse_statuses(path, line, f[2]);
    r->line = line;
    nfrows++;
}

/* The first row for a case's class of request. */
static const expect_row *expectation(const int *v, int req)
{
    for (size_t i = 0; i < nrows; i++) {
        const expect_row *e = &rows[i];
        int k;

        for (k = 0; k < NT && (e->factor[k] & (1u << v[k])) != 0; k++)
            ;
        if (k == NT && (e->req & (1u << req)) != 0)
            return e;
    }
    return NULL;
}

static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);

    if (strcmp(list, "*") == 0)
        return true;
    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    }
    return false;
}

/* ------------------------------------------------------- the backend */

static const char *backend = "memory", *expect_path, *failures_path;
static const char *own_dir, *fake_script;
static char servers[2048];
static char real_url[2048], dead_url[4096], fake_url[256];
static char dead_sock[108];
static bool memory;
static tu_clock clk = {T0};
static sluice_ruleset limit_rules;

/* The test's own servers: their pids (DIR/pid, DIR/x/pid). */
static pid_t own_pids[16];
static size_t nown;
static bool killed;

static void read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid;

    if (f == NULL)
        return;
    if (fscanf(f, "%ld", &pid) == 1 && pid > 1 && nown < 16)
        own_pids[nown++] = (pid_t)pid;
    fclose(f);
}

static void find_own_pids(const char *dir)
{
    char path[1024];
    struct dirent *de;
    DIR *d;

    snprintf(path, sizeof(path), "%s/pid", dir);
    read_pid(path);
    if ((d = opendir(dir)) == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/pid", dir, de->d_name);
        read_pid(path);
    }
    closedir(d);
}

static void signal_own(int sig)
{
    for (size_t i = 0; i < nown; i++)
        kill(own_pids[i], sig);
}

/* min-replicas-to-write 10 on every server, which has none: every write
 * is answered -NOREPLICAS, reads as always (a clean error reply, which
 * nutcracker passes on; it mangles Redis 7's OOM reply); or 0 again. */
static void set_write_errors(bool on)
{
    char list[2048], *save = NULL, *hp;

    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",\n ", &save); hp != NULL;
         hp = strtok_r(NULL, ",\n ", &save)) {
        char host[256];
        int port;
        redisContext *c;
        redisReply *r;

        if (sscanf(hp, "%255[^:]:%d", host, &port) != 2)
            continue;
        c = redisConnect(host, port);
        assert_non_null(c);
        assert_int_equal(c->err, 0);
        r = redisCommand(c, "CONFIG SET min-replicas-to-write %s",
                         on ? "10" : "0");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(c);
    }
}

/* tests/fake_server.py on free loopback ports: its first port. */
static pid_t fake_pid = -1;
static int fake_in = -1;

static int start_fake(void)
{
    int in[2], out[2], port = 0, alt = 0;
    char line[64];
    size_t n = 0;

    if (pipe(in) != 0 || pipe(out) != 0 || (fake_pid = fork()) < 0)
        return 0;
    if (fake_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execlp("python3", "python3", fake_script, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fake_in = in[1];
    while (n + 1 < sizeof(line)) {
        struct pollfd p = {out[0], POLLIN, 0};

        if (poll(&p, 1, 20000) <= 0 || read(out[0], line + n, 1) <= 0 ||
            line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    close(out[0]);
    if (sscanf(line, "%d %d", &port, &alt) != 2)
        return 0;
    return port;
}

static void stop_fake(void)
{
    if (fake_in >= 0)
        close(fake_in); /* it serves until its stdin closes */
    if (fake_pid > 0) {
        kill(fake_pid, SIGTERM);
        waitpid(fake_pid, NULL, 0);
    }
    fake_in = -1;
    fake_pid = -1;
}

/* The parts of a URL: scheme://[user@]hosts[/path][?query]. */
typedef struct url_parts {
    char scheme[32], user[256], hosts[1024], path[256], query[1024];
} url_parts;

static void split_url(const char *u, url_parts *p)
{
    const char *s = strstr(u, "://"), *at, *end;
    size_t n;

    memset(p, 0, sizeof(*p));
    if (s == NULL) {
        fprintf(stderr, "not a URL: %s\n", u);
        exit(1);
    }
    snprintf(p->scheme, sizeof(p->scheme), "%.*s", (int)(s - u), u);
    s += 3;
    n = strcspn(s, "/?");
    at = memchr(s, '@', n);
    if (at != NULL) {
        snprintf(p->user, sizeof(p->user), "%.*s@", (int)(at - s), s);
        s = at + 1;
        n = strcspn(s, "/?");
    }
    snprintf(p->hosts, sizeof(p->hosts), "%.*s", (int)n, s);
    s += n;
    end = strchr(s, '?');
    n = end != NULL ? (size_t)(end - s) : strlen(s);
    snprintf(p->path, sizeof(p->path), "%.*s", (int)n, s);
    if (end != NULL)
        snprintf(p->query, sizeof(p->query), "%s", end + 1);
}

/* A loopback port nothing listens on, and a Unix socket nobody accepts
 * on (bound and closed: connect() is refused). */
static void make_dead_url(void)
{
    url_parts p;
    char query[1200] = "", *sock;

    split_url(real_url, &p);
    sock = strstr(p.query, "socket=");
    if (sock != NULL) {
        struct sockaddr_un a;
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        size_t rest = strcspn(sock, "&");

        snprintf(dead_sock, sizeof(dead_sock), "/tmp/sluice-crossing-%ld.sock",
                 (long)getpid());
        unlink(dead_sock);
        memset(&a, 0, sizeof(a));
        a.sun_family = AF_UNIX;
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", dead_sock);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
            fprintf(stderr, "cannot bind %s\n", dead_sock);
            exit(1);
        }
        close(s);
        snprintf(query, sizeof(query), "%.*ssocket=%s%s", (int)(sock - p.query),
                 p.query, dead_sock, sock + rest);
        snprintf(dead_url, sizeof(dead_url), "%s://%s%s%s?%s", p.scheme, p.user,
                 p.hosts, p.path, query);
        return;
    }
    snprintf(dead_url, sizeof(dead_url), "%s://%s127.0.0.1:%d%s%s%s", p.scheme,
             p.user, tu_free_port(), p.path, p.query[0] != '\0' ? "?" : "",
             p.query);
}

/* The fake server in "escapes" mode under the backend's scheme, without
 * TLS (the fake server speaks none). */
static void make_fake_url(int port)
{
    url_parts p;
    const char *scheme;

    split_url(real_url, &p);
    scheme = strcmp(p.scheme, "rediss") == 0 ? "redis" : p.scheme;
    snprintf(fake_url, sizeof(fake_url), "%s://:escapes@127.0.0.1:%d", scheme,
             port);
}

/* The statuses a failure of this condition may be on this backend. */
static uint32_t failure_set(int cond)
{
    if (cond == HEALTHY)
        return 0;
    for (size_t i = 0; i < nfrows; i++)
        if ((frows[i].cond & (1u << cond)) != 0 &&
            in_list(frows[i].backends, backend))
            return frows[i].status;
    fail_msg("%s: no row for the condition %s on %s", failures_path,
             factor_values[COND][cond], backend);
    return 0;
}

/* ----------------------------------------------------------- a case */

typedef struct request {
    int cls;            /* REQ_* */
    const char *client; /* NULL: the key */
    int group;          /* requests of one key or client */
} request;

typedef struct answer {
    bool answered, sync; /* sync: an _async call refused at its start */
    sluice_status ret;
    sluice_result res;
    bool msg; /* sluice_errmsg() was not empty */
} answer;

typedef struct row {
    int v[NF];
    /* from=policy: the case's policy (sluice_acquire_with for a key); for
     * a handle's, pol is NULL */
    sluice_policy policy;
    const sluice_policy *pol;
    char name[160], prefix[64];
    bool opened;
    sluice *sl;
    struct event_base *base;
    struct event *guard;
    uv_loop_t *uv;
    uv_timer_t guard_uv;
    bool expired;        /* the guard fired: a callback never came */
    int64_t guard_until; /* libuv: when the guard fires */
    bool frozen, wrerr;
    request req[MAX_REQ];
    answer ans[MAX_REQ];
    size_t n, calls;
    sluice_stats before, after;
    /* The limiter "lim"'s and the overflow's (sluice_get_limiter_stats). */
    sluice_limiter_stats lim_before, lim_after, over_after;
    int64_t ms;
} row;

static row crows[MAX_CASES];

static bool on_loop(const row *r)
{
    return r->v[DRIVER] == LIBEVENT || r->v[DRIVER] == LIBUV;
}

/* Killed: refused, for a name whose rules were read (run last). */
static bool is_killed(const int *v)
{
    return v[COND] == REFUSED && v[READ] == READ_YES;
}

static void on_guard_ev(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ((row *)arg)->expired = true;
}

/* libuv's UV_RUN_ONCE runs the timers that are due, then waits in poll
 * for the next one: a guard of 10 s would hold every answer that a timer
 * of sluice gave that long. So the guard ticks every 50 ms, and each turn
 * runs what is due (UV_RUN_NOWAIT) before it waits. */
static void on_guard_uv(uv_timer_t *t)
{
    row *r = t->data;

    if (tu_clock_ms(CLOCK_MONOTONIC) >= r->guard_until)
        r->expired = true;
}

/* Runs the case's loop until *done, or until 10 s (scaled) passed. */
static void loop_until(row *r, const bool *done)
{
    uint64_t ms = 10000u * tu_time_scale();

    r->expired = false;
    if (r->base != NULL) {
        struct timeval tv = {(time_t)(ms / 1000), 0};

        evtimer_add(r->guard, &tv);
        while (!*done && !r->expired)
            event_base_loop(r->base, EVLOOP_ONCE);
        evtimer_del(r->guard);
    } else {
        r->guard_until = tu_clock_ms(CLOCK_MONOTONIC) + (int64_t)ms;
        uv_timer_start(&r->guard_uv, on_guard_uv, 50, 50);
        for (;;) {
            uv_run(r->uv, UV_RUN_NOWAIT);
            if (*done || r->expired)
                break;
            uv_run(r->uv, UV_RUN_ONCE);
        }
        uv_timer_stop(&r->guard_uv);
    }
}

static void on_done(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    answer *a = arg;

    a->ret = st;
    if (res != NULL && n > 0)
        a->res = res[0];
    a->msg = sluice_errmsg(sl)[0] != '\0';
    a->answered = true;
}

/* One acquire, blocking or on the loop; peek: a peek (reading the rules
 * before the failure). */
static void call(row *r, const request *q, answer *a, bool peek)
{
    const char *c = q->client;
    sluice *sl = r->sl;

    memset(a, 0, sizeof(*a));
    if (on_loop(r)) {
        sluice_status st;

        if (c == NULL)
            st = sluice_acquire_with_async(sl, "k", 1, &limit_rules, 1, r->pol,
                                           on_done, a);
        else if (peek)
            st = sluice_limiter_peek_async(sl, "lim", 3, c, strlen(c), 1,
                                           on_done, a);
        else
            st = sluice_limiter_acquire_async(sl, "lim", 3, c, strlen(c), 1,
                                              on_done, a);
        if (st != SLUICE_OK) {
            a->ret = st;
            a->msg = sluice_errmsg(sl)[0] != '\0';
            a->answered = a->sync = true;
            return;
        }
        loop_until(r, &a->answered);
        return;
    }
    if (c == NULL)
        a->ret =
            sluice_acquire_with(sl, "k", 1, &limit_rules, 1, r->pol, &a->res);
    else if (peek)
        a->ret = sluice_limiter_peek(sl, "lim", 3, c, strlen(c), 1, &a->res);
    else
        a->ret = sluice_limiter_acquire(sl, "lim", 3, c, strlen(c), 1, &a->res);
    a->msg = sluice_errmsg(sl)[0] != '\0';
    a->answered = true;
}

/* The requests of a case: 10 on the key or client "c", by name then one
 * for the allow-listed and one for the deny-listed client. */
static void plan(row *r)
{
    size_t i;

    r->n = 0;
    for (i = 0; i < LIMIT + 2; i++)
        r->req[r->n++] = (request){i < LIMIT    ? REQ_IN
                                   : i == LIMIT ? REQ_OVER
                                                : REQ_AGAIN,
                                   r->v[SUBJECT] == NAME ? "c" : NULL, 0};
    if (r->v[SUBJECT] == NAME) {
        r->req[r->n++] = (request){REQ_ALLOW, "allow", 1};
        r->req[r->n++] = (request){REQ_DENY, "deny", 2};
    }
}

/* The limiter "lim" (fixed:8/1h), the client "allow" allow-listed and
 * "deny" deny-listed, stored through a healthy handle of the case's
 * prefix (on mem://, the case's named store). */
static void define_limiter(const row *r)
{
    sluice_options o;
    sluice *sl = NULL;
    sluice_limiter_override allow, deny;
    char err[512];

    memset(&allow, 0, sizeof(allow));
    memset(&deny, 0, sizeof(deny));
    allow.kind = SLUICE_OVERRIDE_UNLIMITED;
    deny.kind = SLUICE_OVERRIDE_DENY;
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.command_timeout_ms = 2000 * tu_time_scale();
    o.key_prefix = r->prefix;
    if (sluice_open(real_url, &o, &sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", real_url, err);
    if (sluice_limiter_define(sl, "lim", 3, &limit_rules, 0, NULL) !=
            SLUICE_OK ||
        sluice_limiter_override_set(sl, "lim", 3, "allow", 5, &allow) !=
            SLUICE_OK ||
        sluice_limiter_override_set(sl, "lim", 3, "deny", 4, &deny) !=
            SLUICE_OK)
        fail_msg("%s: defining the limiter: %s", r->name, sluice_errmsg(sl));
    sluice_close(sl);
}

/* A name's rules and its clients' overrides read while healthy: a peek
 * for each client (nothing charged). A handle with a short timeout may
 * miss one on a loaded machine (a connect, over TLS a handshake, in
 * connect_timeout_ms=50): tried again for 10 s (scaled), past the
 * reconnect backoff's 1 s, not a number of times that the backoff
 * answers at once. */
static void read_before(row *r)
{
    static const request peeks[] = {
        {REQ_IN, "c", 0}, {REQ_ALLOW, "allow", 1}, {REQ_DENY, "deny", 2}};
    static const sluice_status want[] = {SLUICE_OK, SLUICE_ALLOWLISTED,
                                         SLUICE_DENYLISTED};
    int64_t until =
        tu_clock_ms(CLOCK_MONOTONIC) + 10000 * (int64_t)tu_time_scale();
    answer a;

    for (;;) {
        size_t i;

        for (i = 0; i < 3; i++) {
            call(r, &peeks[i], &a, true);
            if (a.ret != SLUICE_OK || a.res.status != want[i])
                break;
        }
        if (i == 3)
            return;
        if (tu_clock_ms(CLOCK_MONOTONIC) > until)
            fail_msg("%s: reading the rules before the failure: %s (%s)",
                     r->name, status_text(a.ret), sluice_errmsg(r->sl));
        tu_sleep_ms(50);
    }
}

/* from=policy: the case's fail policy, deny cache, reservations and
 * shadow mode as a policy: the limiter's, or each call's. */
static void give_policy(row *r)
{
    sluice_policy *p = &r->policy;

    sluice_policy_init(p);
    p->set = SLUICE_POLICY_FAIL | SLUICE_POLICY_DENY_CACHE |
             SLUICE_POLICY_RESERVE | SLUICE_POLICY_SHADOW;
    p->fail = (sluice_fail_policy)r->v[FAIL];
    p->deny_cache = r->v[DENY] != 0;
    p->reserve_ms = r->v[RSV] ? 100 : 0;
    p->reserve_share = 50;
    p->shadow = r->v[SHADOW] != 0;
    if (r->v[SUBJECT] == KEY)
        r->pol = p;
    else if (sluice_limiter_policy_set(r->sl, "lim", 3, p) != SLUICE_OK)
        fail_msg("%s: limiter_policy_set: %s", r->name, sluice_errmsg(r->sl));
}

/* The handle of a case on the URL its condition needs, its loop, the
 * limiter, and the rules read before the failure where the case says. */
static void row_open(row *r)
{
    const int *v = r->v;
    const char *base = real_url;
    unsigned s = tu_time_scale();
    char u[4200], err[512];
    sluice_options o;
    size_t len;

    if (v[COND] == REFUSED && v[READ] != READ_YES)
        base = dead_url;
    else if (v[COND] == ERROR_REPLY && v[READ] != READ_YES)
        base = fake_url;
    len = strlen(base);
    if (v[FROM] == FROM_POLICY) /* the handle has none of the policy */
        snprintf(u, sizeof(u), "%s%sfail=error&rules_cache_ms=20", base,
                 len > 0 && (base[len - 1] == '?' || base[len - 1] == '&') ? ""
                 : strchr(base, '?') != NULL                               ? "&"
                                             : "?");
    else
        snprintf(u, sizeof(u), "%s%sfail=%s&rules_cache_ms=20%s%s%s", base,
                 len > 0 && (base[len - 1] == '?' || base[len - 1] == '&') ? ""
                 : strchr(base, '?') != NULL                               ? "&"
                                             : "?",
                 factor_values[FAIL][v[FAIL]], v[DENY] ? "&deny_cache=64" : "",
                 v[RSV] ? "&reserve_ms=100&reserve_share=50" : "",
                 v[SHADOW] ? "&shadow=1" : "");
    sluice_options_init(&o);
    o.clock = tu_clock_now;
    o.clock_ctx = &clk;
    o.key_prefix = r->prefix;
    /* A correctness test, where one slow round trip on a loaded machine
     * is no failure: long timeouts, also where the server refuses or
     * answers errors, which it does at once (with 50 ms, a TLS connect on
     * a busy machine made those cases ECONNECT or ETIMEOUT, not the
     * table's). Frozen: a short call, so that a frozen server costs
     * little; scaled (valgrind, the sanitizers) to at most 250 ms, as a
     * frozen server is a wait, not work. Its connect short too, unless
     * the rules are read first, while healthy: a call's deadline bounds a
     * connect to the frozen server anyway. */
    o.command_timeout_ms = v[COND] != FROZEN ? 2000 * s
                           : 50 * s < 250    ? 50 * s
                                             : 250;
    o.connect_timeout_ms = v[COND] != FROZEN || v[READ] == READ_YES ? 1000 * s
                           : 50 * s < 250                           ? 50 * s
                                                                    : 250;
    if (sluice_open(u, &o, &r->sl, err, sizeof(err)) != SLUICE_OK)
        fail_msg("open %s: %s", u, err);
    r->opened = true;
    if (v[FROM] == FROM_POLICY)
        give_policy(r);
    if (v[DRIVER] == LIBEVENT) {
        r->base = event_base_new();
        assert_non_null(r->base);
        r->guard = evtimer_new(r->base, on_guard_ev, r);
        assert_int_equal(sluice_libevent_attach(r->sl, r->base), SLUICE_OK);
    } else if (v[DRIVER] == LIBUV) {
        r->uv = malloc(sizeof(*r->uv));
        assert_non_null(r->uv);
        assert_int_equal(uv_loop_init(r->uv), 0);
        uv_timer_init(r->uv, &r->guard_uv);
        r->guard_uv.data = r;
        assert_int_equal(sluice_libuv_attach(r->sl, r->uv), SLUICE_OK);
    }
    if (v[SUBJECT] == NAME)
        define_limiter(r);
    if (v[READ] == READ_YES)
        read_before(r);
    assert_int_equal(sluice_get_stats(r->sl, &r->before, sizeof(r->before)),
                     SLUICE_OK);
    assert_int_equal(sluice_get_limiter_stats(r->sl, "lim", 3, &r->lim_before,
                                              sizeof(r->lim_before)),
                     SLUICE_OK);
}

static void row_close(row *r)
{
    if (r->frozen)
        signal_own(SIGCONT);
    r->frozen = false;
    if (r->wrerr)
        set_write_errors(false);
    r->wrerr = false;
    if (r->sl != NULL)
        sluice_close(r->sl);
    r->sl = NULL;
    if (r->base != NULL) {
        event_free(r->guard);
        event_base_free(r->base);
        r->base = NULL;
    }
    if (r->uv != NULL) {
        uv_close((uv_handle_t *)&r->guard_uv, NULL);
        while (uv_run(r->uv, UV_RUN_NOWAIT) != 0)
            ;
        assert_int_equal(uv_loop_close(r->uv), 0);
        free(r->uv);
        r->uv = NULL;
    }
}

/* The backend fails as the case says. Where the rules were read, the
 * cache (rules_cache_ms=20) runs out first: stale rules must answer. */
static void row_break(row *r)
{
    switch (r->v[COND]) {
    case HEALTHY:
        return;
    case REFUSED:
        if (r->v[READ] == READ_YES && !killed) {
            signal_own(SIGKILL);
            killed = true;
            tu_sleep_ms(100);
        }
        break;
    case FROZEN:
        signal_own(SIGSTOP);
        r->frozen = true;
        break;
    case ERROR_REPLY:
        if (r->v[READ] == READ_YES) {
            set_write_errors(true);
            r->wrerr = true;
        }
        break;
    }
    if (r->v[READ] == READ_YES)
        tu_sleep_ms(30);
}

/* ---- the drivers ---- */

static void drive_blocking(row *r)
{
    for (size_t i = 0; i < r->n; i++)
        call(r, &r->req[i], &r->ans[i], false);
    r->calls = r->n;
}

typedef struct worker {
    row *r;
    atomic_size_t *next;
} worker;

static void *work(void *arg)
{
    worker *w = arg;

    for (;;) {
        size_t i = atomic_fetch_add(w->next, 1);

        if (i >= w->r->n)
            return NULL;
        call(w->r, &w->r->req[i], &w->r->ans[i], false);
    }
}

static void drive_threads(row *r)
{
    pthread_t th[THREADS];
    atomic_size_t next;
    worker w = {r, &next};

    atomic_init(&next, 0);
    for (size_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, work, &w), 0);
    for (size_t i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    r->calls = r->n;
}

/* Two batches: the first 9 requests in one (the denial inside it), the
 * 10th alone (the deny cache can answer it). */
static void drive_batch(row *r)
{
    sluice_request reqs[MAX_REQ];
    sluice_result out[MAX_REQ];
    size_t first = r->n - 1, i;
    sluice_status st;
    bool msg;

    for (i = 0; i < r->n; i++)
        reqs[i] = (sluice_request){"k", 1, &limit_rules, 1};
    memset(out, 0, sizeof(out));
    st = sluice_acquire_many_with(r->sl, reqs, first, r->pol, out);
    msg = sluice_errmsg(r->sl)[0] != '\0';
    for (i = 0; i < first; i++)
        r->ans[i] = (answer){true, false, st, out[i], msg};
    st = sluice_acquire_many_with(r->sl, reqs + first, 1, r->pol, out + first);
    msg = sluice_errmsg(r->sl)[0] != '\0';
    r->ans[first] = (answer){true, false, st, out[first], msg};
    r->calls = 2;
}

/* ---- the checks ---- */

static bool fits(const expect_row *e, const answer *a, uint32_t fset)
{
    uint32_t bit;

    if (e == NULL || !a->answered)
        return false;
    if (e->ret_f ? ((1u << (unsigned)a->ret) & fset) == 0 : a->ret != SLUICE_OK)
        return false;
    if (e->allowed >= 0 && a->ret == SLUICE_OK &&
        a->res.allowed != (e->allowed == 1))
        return false;
    bit = 1u << (unsigned)a->res.status;
    if (e->status != 0 && (e->status & bit) == 0 &&
        ((e->status & F_BIT) == 0 || (fset & bit) == 0))
        return false;
    return !e->msg || a->msg;
}

static void show_expect(const expect_row *e, char *buf, size_t len)
{
    char st[200] = "";
    size_t n = 0;

    if (e == NULL) {
        snprintf(buf, len, "no row of %s for it", expect_path);
        return;
    }
    for (size_t i = 0; i < NSTATUS; i++)
        if ((e->status & (1u << (unsigned)status_names[i].st)) != 0)
            n += (size_t)snprintf(st + n, sizeof(st) - n, "%s%s",
                                  n > 0 ? "," : "", status_names[i].name);
    if ((e->status & F_BIT) != 0)
        snprintf(st + n, sizeof(st) - n, "%sF", n > 0 ? "," : "");
    snprintf(buf, len,
             "ret %s, allowed %s, status %s, msg %s (expect.tsv line %d: %s)",
             e->ret_f ? "F" : "OK",
             e->allowed < 0 ? "-"
             : e->allowed   ? "1"
                            : "0",
             e->status == 0 ? "-" : st, e->msg ? "set" : "-", e->line, e->ref);
}

static void show_answer(const answer *a, char *buf, size_t len)
{
    if (!a->answered) {
        snprintf(buf, len, "no answer within 10 s");
        return;
    }
    snprintf(buf, len, "ret %s%s, allowed %d, status %s, msg %s",
             status_text(a->ret), a->sync ? " (at the _async call)" : "",
             a->ret == SLUICE_OK ? (int)a->res.allowed : -1,
             status_text(a->res.status), a->msg ? "set" : "empty");
}

/* Kuhn's augmenting path: answer i to some expectation of its group. */
static bool augment(size_t i, bool ok[MAX_REQ][MAX_REQ], size_t n, int *owner,
                    bool *seen)
{
    for (size_t j = 0; j < n; j++) {
        if (!ok[i][j] || seen[j])
            continue;
        seen[j] = true;
        if (owner[j] < 0 || augment((size_t)owner[j], ok, n, owner, seen)) {
            owner[j] = (int)i;
            return true;
        }
    }
    return false;
}

/* Which expectation each answer is held to: its own, or with threads
 * any of its group's (they ran in any order); -1: none fits. */
static void assign(const row *r, const expect_row **spec, uint32_t fset,
                   int *of)
{
    bool ok[MAX_REQ][MAX_REQ];
    int owner[MAX_REQ];

    for (size_t i = 0; i < r->n; i++) {
        of[i] = fits(spec[i], &r->ans[i], fset) ? (int)i : -1;
        for (size_t j = 0; j < r->n; j++)
            ok[i][j] = r->req[i].group == r->req[j].group &&
                       fits(spec[j], &r->ans[i], fset);
    }
    if (r->v[DRIVER] != THREADED)
        return;
    for (size_t j = 0; j < r->n; j++)
        owner[j] = -1;
    for (size_t i = 0; i < r->n; i++) {
        bool seen[MAX_REQ] = {false};

        augment(i, ok, r->n, owner, seen);
    }
    for (size_t i = 0; i < r->n; i++)
        of[i] = -1;
    for (size_t j = 0; j < r->n; j++)
        if (owner[j] >= 0)
            of[owner[j]] = (int)j;
}

/* The answer's own failure: its result's status when that is one (a
 * policy's answer, a request of a batch), else what the call returned. */
static sluice_status failure_of(const answer *a)
{
    sluice_status st = a->res.status;

    if (st == SLUICE_OK || st == SLUICE_CACHED || st == SLUICE_SHADOWED ||
        st == SLUICE_RESERVED || st == SLUICE_ALLOWLISTED ||
        st == SLUICE_DENYLISTED)
        return a->ret;
    return st;
}

static uint64_t counter(const sluice_stats *s, int c)
{
    uint64_t x;

    memcpy(&x, (const char *)s + count_offsets[c], sizeof(x));
    return x;
}

static uint64_t failures_sum(const sluice_stats *s)
{
    uint64_t n = 0;

    for (size_t i = 0; i < SLUICE_STATS_STATUSES; i++)
        n += s->failures[i];
    return n;
}

/* The counters against what the expectations of the answers add. */
static int check_counters(const row *r, const expect_row **spec, const int *of)
{
    uint64_t lo[NCOUNT] = {0}, hi[NCOUNT] = {0};
    uint64_t flo[SLUICE_STATS_STATUSES] = {0}, fhi[SLUICE_STATS_STATUSES] = {0};
    const sluice_stats *b = &r->before, *a = &r->after;
    uint64_t once_b, once_a;
    int bad = 0;

    for (size_t i = 0; i < r->n; i++) {
        const expect_row *e = spec[of[i] >= 0 ? (size_t)of[i] : i];
        const answer *an = &r->ans[i];

        if (e == NULL)
            continue;
        for (size_t k = 0; k < e->ncounts; k++) {
            const count_token *t = &e->counts[k];
            uint64_t *l = lo, *h = hi;
            size_t c = (size_t)t->counter;

            if (t->counter == C_FAILURES) {
                l = flo;
                h = fhi;
                c = (unsigned)failure_of(an) % SLUICE_STATS_STATUSES;
            }
            if (t->how == EXACTLY || (t->how == WHEN && an->ret == SLUICE_OK &&
                                      an->res.status == t->when))
                l[c]++;
            if (t->how != WHEN ||
                (an->ret == SLUICE_OK && an->res.status == t->when))
                h[c]++;
        }
    }
    for (int c = 0; c < C_FAILURES; c++) {
        uint64_t d = counter(a, c) - counter(b, c);

        if (d < lo[c] || d > hi[c]) {
            print_error("%s: %s grew by %llu, the table says %llu..%llu\n",
                        r->name, count_names[c], (unsigned long long)d,
                        (unsigned long long)lo[c], (unsigned long long)hi[c]);
            bad++;
        }
    }
    for (size_t s = 0; s < SLUICE_STATS_STATUSES; s++) {
        uint64_t d = a->failures[s] - b->failures[s];

        if (d < flo[s] || d > fhi[s]) {
            print_error("%s: failures[%s] grew by %llu, the table says "
                        "%llu..%llu\n",
                        r->name, status_text((sluice_status)s),
                        (unsigned long long)d, (unsigned long long)flo[s],
                        (unsigned long long)fhi[s]);
            bad++;
        }
    }
    once_b = b->allowed + b->denied + b->peeks + b->resets + b->refunds +
             failures_sum(b);
    once_a = a->allowed + a->denied + a->peeks + a->resets + a->refunds +
             failures_sum(a);
    if (once_a - once_b != r->n) {
        print_error("%s: %zu requests, counted %llu times (allowed + denied + "
                    "peeks + resets + refunds + failures)\n",
                    r->name, r->n, (unsigned long long)(once_a - once_b));
        bad++;
    }
    if (a->calls - b->calls != r->calls) {
        print_error("%s: %zu calls, calls grew by %llu\n", r->name, r->calls,
                    (unsigned long long)(a->calls - b->calls));
        bad++;
    }
    return bad;
}

/* The counters of the limiter "lim" (docs/PRODUCTION.md, "Metrics"): a
 * case by name makes only requests of "lim", so they grew as the
 * handle's did, counter by counter; a case by key left them as they were.
 * The overflow never counts (one name). */
static int check_by_limiter(const row *r)
{
    static const struct {
        const char *name;
        size_t h, l; /* offsets in sluice_stats, sluice_limiter_stats */
    } pairs[] = {
#define P(hf, lf) \
    {#lf, offsetof(sluice_stats, hf), offsetof(sluice_limiter_stats, lf)}
        P(allowed, allowed),
        P(denied, denied),
        P(near_limit, near_limit),
        P(peeks, peeks),
        P(resets, resets),
        P(deny_cache_hits, deny_cache_hits),
        P(reserve_admitted, reserve_admitted),
        P(shadow_admitted, shadow_admitted),
        P(allowlisted, allowlisted),
        P(denylisted, denylisted),
        P(policy_answers, policy_answers),
#undef P
    };
    bool by_name = r->v[SUBJECT] == NAME;
    uint64_t hb, ha, lb, la;
    int bad = 0;

    for (size_t k = 0;
         k < sizeof(pairs) / sizeof(pairs[0]) + SLUICE_STATS_STATUSES; k++) {
        char what[64];
        size_t s = k - sizeof(pairs) / sizeof(pairs[0]);

        if (k < sizeof(pairs) / sizeof(pairs[0])) {
            memcpy(&hb, (const char *)&r->before + pairs[k].h, sizeof(hb));
            memcpy(&ha, (const char *)&r->after + pairs[k].h, sizeof(ha));
            memcpy(&lb, (const char *)&r->lim_before + pairs[k].l, sizeof(lb));
            memcpy(&la, (const char *)&r->lim_after + pairs[k].l, sizeof(la));
            snprintf(what, sizeof(what), "%s", pairs[k].name);
        } else {
            hb = r->before.failures[s];
            ha = r->after.failures[s];
            lb = r->lim_before.failures[s];
            la = r->lim_after.failures[s];
            snprintf(what, sizeof(what), "failures[%s]",
                     status_text((sluice_status)s));
        }
        if (la - lb != (by_name ? ha - hb : 0)) {
            print_error("%s: the limiter's %s grew by %llu, the handle's by "
                        "%llu\n",
                        r->name, what, (unsigned long long)(la - lb),
                        (unsigned long long)(ha - hb));
            bad++;
        }
    }
    if (r->over_after.allowed + r->over_after.denied + r->over_after.peeks +
            r->over_after.policy_answers !=
        0) {
        print_error("%s: the overflow counted\n", r->name);
        bad++;
    }
    return bad;
}

/* The answers that fit no expectation; a run of requests of one class
 * with the same answer is told once. */
static int check_answers(const row *r, const expect_row **spec, const int *of)
{
    int bad = 0;

    for (size_t i = 0, j; i < r->n; i = j) {
        char got[200], next[200], want[600];

        j = i + 1;
        if (of[i] >= 0)
            continue;
        show_answer(&r->ans[i], got, sizeof(got));
        for (; j < r->n && of[j] < 0 && spec[j] == spec[i] &&
               r->req[j].group == r->req[i].group;
             j++) {
            show_answer(&r->ans[j], next, sizeof(next));
            if (strcmp(next, got) != 0)
                break;
        }
        bad += (int)(j - i);
        show_expect(spec[i], want, sizeof(want));
        if (j - i > 1)
            print_error("%s: requests %zu-%zu", r->name, i, j - 1);
        else
            print_error("%s: request %zu", r->name, i);
        print_error(
            " (%s%s%s%s%s): %s; expected %s\n", req_names[r->req[i].cls],
            r->req[j - 1].cls != r->req[i].cls ? " to " : "",
            r->req[j - 1].cls != r->req[i].cls ? req_names[r->req[j - 1].cls]
                                               : "",
            r->req[i].client ? ", client " : "",
            r->req[i].client ? r->req[i].client : "", got, want);
    }
    return bad;
}

/* What the answers were, for the log: "OK 8, CACHED 1, ECONNECT 3". */
static void tally(const row *r, char *buf, size_t len)
{
    size_t n = 0, counts[32] = {0};

    for (size_t i = 0; i < r->n; i++) {
        const answer *a = &r->ans[i];

        counts[(unsigned)(a->ret != SLUICE_OK ? failure_of(a) : a->res.status) %
               32]++;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < NSTATUS && n < len; i++)
        if (counts[(unsigned)status_names[i].st] > 0)
            n += (size_t)snprintf(buf + n, len - n, "%s%s %zu",
                                  n > 0 ? ", " : "", status_names[i].name,
                                  counts[(unsigned)status_names[i].st]);
}

/* Opens the handles of every killed case while the servers are up, and
 * reads their rules, before the first of them kills the servers. */
static void open_killed(void)
{
    for (size_t i = 0; i < ncases; i++)
        if (is_killed(crows[i].v) && !crows[i].opened)
            row_open(&crows[i]);
}

static void run_case(void **state)
{
    row *r = *state;
    const expect_row *spec[MAX_REQ];
    int of[MAX_REQ];
    uint32_t fset = failure_set(r->v[COND]);
    char seen[256];
    int64_t t0;
    int bad;

    if (is_killed(r->v))
        open_killed();
    if (!r->opened)
        row_open(r);
    row_break(r);
    t0 = tu_clock_ms(CLOCK_MONOTONIC);
    if (r->v[DRIVER] == THREADED)
        drive_threads(r);
    else if (r->v[DRIVER] == BATCH)
        drive_batch(r);
    else
        drive_blocking(r);
    r->ms = tu_clock_ms(CLOCK_MONOTONIC) - t0;
    assert_int_equal(sluice_get_stats(r->sl, &r->after, sizeof(r->after)),
                     SLUICE_OK);
    assert_int_equal(sluice_get_limiter_stats(r->sl, "lim", 3, &r->lim_after,
                                              sizeof(r->lim_after)),
                     SLUICE_OK);
    assert_int_equal(sluice_get_limiter_stats(r->sl, NULL, 0, &r->over_after,
                                              sizeof(r->over_after)),
                     SLUICE_OK);
    for (size_t i = 0; i < r->n; i++)
        if ((spec[i] = expectation(r->v, r->req[i].cls)) != NULL)
            rows[spec[i] - rows].used++;
    assign(r, spec, fset, of);
    bad = check_answers(r, spec, of);
    bad += check_counters(r, spec, of);
    bad += check_by_limiter(r);
    tally(r, seen, sizeof(seen));
    print_message("%s: %zu requests in %lld ms (%s)%s\n", r->name, r->n,
                  (long long)r->ms, seen,
                  bad ? ": differs from the table" : "");
    if (bad)
        fail_msg("%s: %d differences from %s", r->name, bad, expect_path);
}

static int case_teardown(void **state)
{
    row_close(*state);
    return 0;
}

/* The pairs needed over the domain, each in a case of cases[0..n): the
 * number of pairs needed, or 0 with the missing ones told. */
static size_t check_pairs(size_t n)
{
    static bool have[NF][MAXV][NF][MAXV];
    size_t need = find_needed(), missing = 0;

    memset(have, 0, sizeof(have));
    for (size_t i = 0; i < n; i++) {
        assert_true(feasible(cases[i]));
        mark_pairs(have, cases[i]);
    }
    for (int f = 0; f < NF; f++)
        for (int a = 0; a < domain[f]; a++)
            for (int g = f + 1; g < NF; g++)
                for (int b = 0; b < domain[g]; b++)
                    if (needed[f][a][g][b] && !have[f][a][g][b]) {
                        print_error("pair %s=%s, %s=%s is in no case\n",
                                    factor_names[f], factor_values[f][a],
                                    factor_names[g], factor_values[g][b]);
                        missing++;
                    }
    return missing == 0 ? need : 0;
}

/* Every pair of values of two factors that some feasible case holds is
 * in a case that runs: among the healthy cases, every pair with the
 * backend healthy; among all, every pair over every condition. */
static void every_feasible_pair_is_covered(void **state)
{
    size_t healthy, all = 0;
    int conds = domain[COND];

    (void)state;
    domain[COND] = 1;
    healthy = check_pairs(nhealthy);
    domain[COND] = conds;
    if (conds > 1)
        all = check_pairs(ncases);
    print_message("%zu healthy cases cover all %zu feasible pairs of values "
                  "with the backend healthy%s",
                  nhealthy, healthy, conds > 1 ? "" : "\n");
    if (conds > 1)
        print_message("; with %zu more, %zu cases cover all %zu over every "
                      "condition\n",
                      ncases - nhealthy, ncases, all);
    assert_true(healthy > 0);
    assert_true(conds == 1 || all > 0);
}

static int group_teardown(void **state)
{
    char unused[256] = "";
    size_t n = 0;

    (void)state;
    for (size_t i = 0; i < nrows && n < sizeof(unused); i++)
        if (rows[i].used == 0)
            n += (size_t)snprintf(unused + n, sizeof(unused) - n, " %d",
                                  rows[i].line);
    if (n > 0)
        print_message("rows of %s that no case here reaches (lines):%s\n",
                      expect_path, unused);
    for (size_t i = 0; i < ncases; i++)
        row_close(&crows[i]);
    stop_fake();
    if (dead_sock[0] != '\0')
        unlink(dead_sock);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: test_crossing URL|@file --backend NAME --expect "
                    "FILE --failures FILE [--servers LIST|@file --own DIR "
                    "--fake FAKE_SERVER_PY]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static struct CMUnitTest tests[MAX_CASES + 1];
    size_t k = 0;
    int64_t t0 = tu_clock_ms(CLOCK_MONOTONIC);
    int rc;

    if (argc < 2)
        usage();
    snprintf(real_url, sizeof(real_url), "%s", tu_url(argv[1]));
    tu_servers_of(real_url, servers, sizeof(servers));
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (val == NULL)
            usage();
        i++;
        if (strcmp(arg, "--backend") == 0)
            backend = val;
        else if (strcmp(arg, "--expect") == 0)
            expect_path = val;
        else if (strcmp(arg, "--failures") == 0)
            failures_path = val;
        else if (strcmp(arg, "--servers") == 0)
            snprintf(servers, sizeof(servers), "%s", tu_url(val));
        else if (strcmp(arg, "--own") == 0)
            own_dir = val;
        else if (strcmp(arg, "--fake") == 0)
            fake_script = val;
        else
            usage();
    }
    if (expect_path == NULL || failures_path == NULL)
        usage();
    read_table(expect_path,
               "subject\tdriver\tcond\tfail\tdeny\trsv\tshadow\tread\treq\tret"
               "\tallowed\tstatus\tmsg\tcounts\tref",
               NT + 7, expect_line);
    read_table(failures_path, "cond\tbackend\tstatuses\tref", 4, failure_line);
    memory = strncmp(real_url, "mem://", 6) == 0;
    if (memory) {
        /* A store the limiter's handle and the case's share. */
        snprintf(real_url, sizeof(real_url), "mem://crossing%ld",
                 (long)getpid());
    } else {
        int port;

        if (own_dir == NULL || fake_script == NULL)
            usage();
        find_own_pids(own_dir);
        if (nown == 0) {
            fprintf(stderr, "no server pid under %s\n", own_dir);
            return 1;
        }
        if ((port = start_fake()) == 0) {
            fprintf(stderr, "%s did not start\n", fake_script);
            return 1;
        }
        make_fake_url(port);
        make_dead_url();
    }
    if (sluice_ruleset_parse("fixed:8/1h", &limit_rules, NULL, 0) != SLUICE_OK)
        return 1;
    /* Every pair with the backend healthy first, then every pair over
     * every condition (mem:// has no other). */
    for (int f = 0; f < NF; f++)
        domain[f] = factor_sizes[f];
    domain[COND] = 1;
    find_needed();
    make_cases();
    nhealthy = ncases;
    if (!memory) {
        domain[COND] = factor_sizes[COND];
        find_needed();
        make_cases();
    }
    tests[k++] =
        (struct CMUnitTest){"every_feasible_pair_is_covered",
                            every_feasible_pair_is_covered, NULL, NULL, NULL};
    /* The killed cases last: nothing after them has a server. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < ncases; i++) {
            row *r = &crows[k - 1];
            const int *v = cases[i];

            if (is_killed(v) != (pass == 1))
                continue;
            memset(r, 0, sizeof(*r));
            memcpy(r->v, v, sizeof(r->v));
            snprintf(
                r->name, sizeof(r->name),
                "c%02zu %s %s %s fail=%s deny=%s rsv=%s shadow=%s "
                "read=%s from=%s",
                i, factor_values[SUBJECT][v[SUBJECT]],
                factor_values[DRIVER][v[DRIVER]], factor_values[COND][v[COND]],
                factor_values[FAIL][v[FAIL]], factor_values[DENY][v[DENY]],
                factor_values[RSV][v[RSV]], factor_values[SHADOW][v[SHADOW]],
                factor_values[READ][v[READ]], factor_values[FROM][v[FROM]]);
            snprintf(r->prefix, sizeof(r->prefix),
                     "x%ld-c%02zu:", (long)getpid(), i);
            plan(r);
            tests[k++] =
                (struct CMUnitTest){r->name, run_case, NULL, case_teardown, r};
        }
    ncases = k - 1;
    printf("crossing on %s (%s): %zu cases\n", backend, real_url, ncases);
    rc = _cmocka_run_group_tests("test_crossing", tests, k, NULL,
                                 group_teardown);
    printf("crossing on %s: %lld ms\n", backend,
           (long long)(tu_clock_ms(CLOCK_MONOTONIC) - t0));
    return rc;
}
