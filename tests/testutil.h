/* SPDX-License-Identifier: BSD-3-Clause */
/* testutil.h - helpers shared by the test programs: backend URLs given as
 * "URL" or "@file", a virtual clock, and Redis key inspection. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include "sluice.h"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
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
    /* A list of servers, one a line, becomes "a,b". */
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = ',';
    return buf;
}

/* Milliseconds of the monotonic and of the real-time clock. */
static inline int64_t tu_clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the machine's share of a wait ----
 * A thread whose wait has ended may then wait for a CPU: tens or hundreds
 * of milliseconds on a busy machine (issue 31: 344 ms with a load of 6 on
 * 2 cores), for which the code under test can do nothing. The kernel
 * counts that time for each thread (run_delay, the second figure of
 * /proc/thread-self/schedstat: runnable and not running), so a test that
 * bounds a time takes it out: what remains is the time the thread ran or
 * slept, which is the code's. Where the file cannot be read the whole wall
 * time counts, as before.
 *   Two more waits for a CPU the thread cannot see in its own count: a
 * virtual machine's CPU taken by the host for another guest (steal, the
 * eighth figure of /proc/stat's first line, in ticks of 10 ms; the CI run
 * at 1574420: a loop's timer 26 ms late with 1.1 ms of run_delay), and a
 * cgroup's CPU quota spent (throttled_usec in the cgroup v2 cpu.stat of
 * the process's own group). Both count the whole machine or group, not
 * this thread: a test may excuse a little more than its thread lost, never
 * less. They are added to the thread's run_delay. */
typedef struct tu_mark {
    int64_t at_us;   /* CLOCK_MONOTONIC */
    int64_t runq_us; /* this thread's time waiting for a CPU, so far */
    int64_t cpu_us;  /* and on a CPU */
} tu_mark;

static inline int64_t tu_clock_us(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The text of a file read afresh at offset 0 into buf (len), the file
 * opened once at path and kept in *fd (-2: not yet opened; -1: none to
 * read; path NULL: none). false when there is nothing to read. */
static inline bool tu_reread(int *fd, const char *path, char *buf, size_t len)
{
    ssize_t n;

    if (*fd == -2)
        *fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (*fd < 0 || (n = pread(*fd, buf, len - 1, 0)) <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

/* The thread's time waiting for a CPU, and on one in *cpu_us (both 0
 * where the file cannot be read); the file is each thread's own. */
static inline int64_t tu_runq_us(int64_t *cpu_us)
{
    static _Thread_local int fd = -2;
    char buf[128];
    unsigned long long cpu_ns, runq_ns;

    *cpu_us = 0;
    if (!tu_reread(&fd, "/proc/thread-self/schedstat", buf, sizeof(buf)) ||
        sscanf(buf, "%llu %llu", &cpu_ns, &runq_ns) != 2)
        return 0;
    *cpu_us = (int64_t)(cpu_ns / 1000);
    return (int64_t)(runq_ns / 1000);
}

/* The machine's steal so far, all its CPUs (0 where there is none). */
static inline int64_t tu_steal_us(void)
{
    static _Thread_local int fd = -2;
    char buf[256];
    unsigned long long f[8];

    if (!tu_reread(&fd, "/proc/stat", buf, sizeof(buf)) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1],
               &f[2], &f[3], &f[4], &f[5], &f[6], &f[7]) != 8)
        return 0;
    return (int64_t)f[7] * (1000000 / sysconf(_SC_CLK_TCK));
}

/* The cpu.stat of the process's cgroup (v2) into path (len); false when
 * the process is in none. */
static inline bool tu_cgroup_stat(char *path, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[400];
    bool found = false;

    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(path, len, "/sys/fs/cgroup%s/cpu.stat",
                     strcmp(line + 3, "/") == 0 ? "" : line + 3);
            found = true;
        }
    if (f != NULL)
        fclose(f);
    return found;
}

/* The process's cgroup (v2) time throttled by its CPU quota so far (0
 * where there is no quota or no such file). */
static inline int64_t tu_throttled_us(void)
{
    static _Thread_local int fd = -2;
    char buf[512], path[512] = "";
    const char *p;

    if (fd == -2 && !tu_cgroup_stat(path, sizeof(path)))
        fd = -1;
    if (!tu_reread(&fd, path, buf, sizeof(buf)) ||
        (p = strstr(buf, "throttled_usec ")) == NULL)
        return 0;
    return (int64_t)strtoll(p + 15, NULL, 10);
}

/* The clock read between two readings of the count that agree: a
 * preemption between them would count on one side of the mark only. */
static inline tu_mark tu_mark_now(void)
{
    tu_mark m;
    int64_t cpu, after = tu_runq_us(&cpu),
                 lost = tu_steal_us() + tu_throttled_us();
    int tries = 0;

    do {
        m.runq_us = after;
        m.cpu_us = cpu;
        m.at_us = tu_clock_us(CLOCK_MONOTONIC);
        after = tu_runq_us(&cpu);
    } while (after != m.runq_us && ++tries < 5);
    m.runq_us += lost;
    return m;
}

/* Wall milliseconds from a to b (b marked on the thread that marked a);
 * those of them the thread was not waiting for a CPU (it ran or slept);
 * those it waited; those it slept (neither ran nor waited: a poll, a
 * sleep, a lock). */
static inline double tu_wall_ms(tu_mark a, tu_mark b)
{
    return (double)(b.at_us - a.at_us) / 1000.0;
}

static inline double tu_net_ms(tu_mark a, tu_mark b)
{
    return (double)((b.at_us - a.at_us) - (b.runq_us - a.runq_us)) / 1000.0;
}

static inline double tu_runq_ms(tu_mark a, tu_mark b)
{
    return (double)(b.runq_us - a.runq_us) / 1000.0;
}

static inline double tu_asleep_ms(tu_mark a, tu_mark b)
{
    return tu_net_ms(a, b) - (double)(b.cpu_us - a.cpu_us) / 1000.0;
}

/* How much slower this build runs than a plain one (valgrind 20, the
 * sanitizers 4): the build's TU_TIME_SCALE. */
#ifndef TU_TIME_SCALE
#define TU_TIME_SCALE 1
#endif
static inline unsigned tu_time_scale(void)
{
    return TU_TIME_SCALE;
}

static inline void tu_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

typedef struct tu_clock {
    int64_t t;
} tu_clock;

static inline int64_t tu_clock_now(void *ctx)
{
    return ((tu_clock *)ctx)->t;
}

/* A clock that stands still until released, then runs with the real one:
 * a test fills a window at one instant, however slow the machine (under
 * valgrind, a window of the real clock could end in the middle and admit
 * what should be denied), and then waits for it in real time. It starts
 * halfway through a second of the real clock. */
typedef struct tu_held_clock {
    int64_t at;       /* ms since the epoch while held */
    int64_t released; /* CLOCK_MONOTONIC ms when released; 0: held */
} tu_held_clock;

static inline void tu_held_clock_init(tu_held_clock *c)
{
    c->at = tu_clock_ms(CLOCK_REALTIME) / 1000 * 1000 + 500;
    c->released = 0;
}

static inline void tu_held_clock_release(tu_held_clock *c)
{
    c->released = tu_clock_ms(CLOCK_MONOTONIC);
}

static inline int64_t tu_held_clock_now(void *ctx)
{
    const tu_held_clock *c = ctx;

    return c->at +
           (c->released != 0 ? tu_clock_ms(CLOCK_MONOTONIC) - c->released : 0);
}

/* Opens url with a virtual clock and a prefix unique to this process and
 * tag, so runs never see each other's keys. A correctness test must not
 * fail because a loaded machine made one round trip or one connect (a TLS
 * handshake) slow: its calls and connects get 2 s (scaled) unless the URL
 * says otherwise; the deadline tests hold the timeouts themselves. */
static uint32_t tu_ttl_floor_ms; /* for tu_open; 0: the default */

static inline sluice *tu_open(const char *url, tu_clock *clk, const char *tag)
{
    static char prefix[64];
    sluice_options o;
    sluice *sl = NULL;
    char err[512];

    memset(&o, 0, sizeof(o));
    o.clock = tu_clock_now;
    o.clock_ctx = clk;
    o.command_timeout_ms = 2000 * TU_TIME_SCALE;
    o.connect_timeout_ms = 2000 * TU_TIME_SCALE;
    o.ttl_floor_ms = tu_ttl_floor_ms;
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

/* For tu_check_ttls: a penalty's block key (":block") must have a PTTL
 * of at least this (0: any TTL); one at 0 is going (a reset's, seen on a
 * replica before its DEL). */
static long long tu_min_pttl_ms;

/* Checks that every key under prefix, on every server of the list
 * "host:port,host:port" (or newline separated), carries a TTL. Returns the
 * number of keys checked, or -1 with the first offender in why. */
static inline long tu_check_ttls(const char *servers, const char *prefix,
                                 char *why, size_t why_len)
{
    char list[1024], *save = NULL, *hp;
    long checked = 0;

    snprintf(list, sizeof(list), "%s", servers);
    for (hp = strtok_r(list, ",\n", &save); hp != NULL;
         hp = strtok_r(NULL, ",\n", &save)) {
        char host[256], cursor[32] = "0", pattern[128];
        int port;
        redisContext *c;
        redisReply *r;

        if (sscanf(hp, "%255[^:]:%d", host, &port) != 2)
            continue;
        c = redisConnect(host, port);
        if (c == NULL || c->err) {
            snprintf(why, why_len, "cannot connect to %s", hp);
            if (c != NULL)
                redisFree(c);
            return -1;
        }
        snprintf(pattern, sizeof(pattern), "%s*", prefix);
        do {
            size_t i;

            r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
            if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
                snprintf(why, why_len, "SCAN failed on %s", hp);
                if (r != NULL)
                    freeReplyObject(r);
                redisFree(c);
                return -1;
            }
            snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
            for (i = 0; i < r->element[1]->elements; i++) {
                redisReply *k = r->element[1]->element[i];
                redisReply *ttl = redisCommand(c, "PTTL %b", k->str, k->len);
                long long v = ttl != NULL ? ttl->integer : -3;

                if (ttl != NULL)
                    freeReplyObject(ttl);
                if (v == -2)
                    continue; /* expired since SCAN saw it */
                checked++;
                if (v < 0) {
                    snprintf(why, why_len,
                             "key %s on %s has no TTL (PTTL "
                             "%lld)",
                             k->str, hp, v);
                    freeReplyObject(r);
                    redisFree(c);
                    return -1;
                }
                if (v > 0 && v < tu_min_pttl_ms && k->len > 6 &&
                    memcmp(k->str + k->len - 6, ":block", 6) == 0) {
                    snprintf(why, why_len,
                             "key %s on %s has a PTTL of %lld ms, below "
                             "the %lld the TTL floor leaves it",
                             k->str, hp, v, tu_min_pttl_ms);
                    freeReplyObject(r);
                    redisFree(c);
                    return -1;
                }
            }
            freeReplyObject(r);
        } while (strcmp(cursor, "0") != 0);
        redisFree(c);
    }
    return checked;
}

/* The servers behind a redis-style URL ("host:port"), or "" for mem://. */
static inline void tu_servers_of(const char *url, char *out, size_t len)
{
    const char *p = strstr(url, "://"), *at;
    size_t n;

    out[0] = '\0';
    if (p == NULL || strncmp(url, "mem://", 6) == 0)
        return;
    p += 3;
    at = strchr(p, '@');
    if (at != NULL)
        p = at + 1;
    n = strcspn(p, "/?");
    snprintf(out, len, "%.*s", (int)n, p);
}

/* The port of node i of a cluster that tests/servers/cluster.sh started in
 * dir (dir/nI/port); 0 when it cannot be read. */
static inline int tu_node_port(const char *dir, int i)
{
    char path[512];
    FILE *f;
    int port = 0;

    snprintf(path, sizeof(path), "%s/n%d/port", dir, i);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    return port;
}

/* Freezes host:port for `seconds` (DEBUG SLEEP) from a child process, and
 * returns once the command has had time to reach the server: the child's
 * pid (waitpid it), -1 when fork failed. */
static inline pid_t tu_freeze(const char *host, int port, const char *seconds)
{
    pid_t pid = fork();

    if (pid == 0) {
        redisContext *c = redisConnect(host, port);
        redisReply *r = c ? redisCommand(c, "DEBUG SLEEP %s", seconds) : NULL;

        if (r != NULL)
            freeReplyObject(r);
        if (c != NULL)
            redisFree(c);
        _exit(0);
    }
    if (pid > 0)
        tu_sleep_ms(100);
    return pid;
}

/* A free loopback TCP port (bound, read, closed). */
static inline int tu_free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM, 0), port = 0;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* A throwaway redis-server of the test's own on 127.0.0.1:port, up and
 * answering: its pid, or -1 when it did not start within 4 s. */
static inline pid_t tu_start_redis(int port)
{
    char arg[16];
    pid_t pid;
    int i;

    snprintf(arg, sizeof(arg), "%d", port);
    if ((pid = fork()) < 0)
        return -1;
    if (pid == 0) {
        execlp("redis-server", "redis-server", "--port", arg, "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "no", "--logfile",
               "/dev/null", (char *)NULL);
        _exit(127);
    }
    for (i = 0; i < 200; i++) {
        redisContext *c = redisConnect("127.0.0.1", port);
        bool up = c != NULL && c->err == 0;

        if (c != NULL)
            redisFree(c);
        if (up)
            return pid;
        tu_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Kills *pid (SIGKILL) and reaps it; *pid becomes 0. */
static inline void tu_kill(pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGKILL);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

/* A poll(2) loop for the async API, for tests that need no event library:
 * the sockets sluice watches and its one timer. */
#define TU_POLL_FDS 16

typedef struct tu_poll {
    int fds[TU_POLL_FDS];
    int events[TU_POLL_FDS]; /* SLUICE_WATCH_IN | SLUICE_WATCH_OUT */
    size_t n;
    int64_t timer_at; /* monotonic ms; -1 none */
} tu_poll;

static inline void tu_poll_init(tu_poll *l)
{
    memset(l, 0, sizeof(*l));
    l->timer_at = -1;
}

static inline void tu_poll_watch(void *data, int fd, int events)
{
    tu_poll *l = data;
    size_t i;

    for (i = 0; i < l->n && l->fds[i] != fd; i++)
        ;
    if (events == 0) {
        if (i < l->n) {
            l->fds[i] = l->fds[l->n - 1];
            l->events[i] = l->events[l->n - 1];
            l->n--;
        }
        return;
    }
    if (i == l->n) {
        if (l->n == TU_POLL_FDS) {
            fprintf(stderr, "tu_poll: more than %d sockets\n", TU_POLL_FDS);
            exit(1);
        }
        l->fds[l->n++] = fd;
    }
    l->events[i] = events;
}

static inline void tu_poll_timer(void *data, int64_t timeout_ms)
{
    tu_poll *l = data;

    l->timer_at =
        timeout_ms < 0 ? -1 : tu_clock_ms(CLOCK_MONOTONIC) + timeout_ms;
}

/* The loop for sluice_attach: {l, tu_poll_watch, tu_poll_timer, NULL}. */
static inline sluice_loop tu_poll_loop(tu_poll *l)
{
    sluice_loop lp = {l, tu_poll_watch, tu_poll_timer, NULL};

    return lp;
}

/* One turn: waits up to max_ms for a socket or the timer, runs sluice. */
static inline void tu_poll_turn(sluice *sl, tu_poll *l, int64_t max_ms)
{
    struct pollfd p[TU_POLL_FDS];
    int64_t now = tu_clock_ms(CLOCK_MONOTONIC), wait = max_ms < 0 ? 0 : max_ms;
    size_t i, n = l->n;

    if (l->timer_at >= 0 && l->timer_at - now < wait)
        wait = l->timer_at > now ? l->timer_at - now : 0;
    for (i = 0; i < n; i++)
        p[i] = (struct pollfd){
            l->fds[i],
            (short)(((l->events[i] & SLUICE_WATCH_IN) ? POLLIN : 0) |
                    ((l->events[i] & SLUICE_WATCH_OUT) ? POLLOUT : 0)),
            0};
    if (poll(p, n, (int)wait) > 0)
        for (i = 0; i < n; i++) {
            int ev =
                ((p[i].revents & (POLLIN | POLLERR | POLLHUP)) ? SLUICE_WATCH_IN
                                                               : 0) |
                ((p[i].revents & POLLOUT) ? SLUICE_WATCH_OUT : 0);

            if (ev != 0)
                sluice_socket_action(sl, p[i].fd, ev);
        }
    if (l->timer_at >= 0 && tu_clock_ms(CLOCK_MONOTONIC) >= l->timer_at) {
        l->timer_at = -1;
        sluice_socket_action(sl, SLUICE_SOCKET_TIMEOUT, 0);
    }
}

#endif /* SL_TESTUTIL_H */
