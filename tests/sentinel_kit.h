/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_kit.h - test_sentinel's view of its fixture
 * (tests/servers/sentinel.sh: three data nodes, three sentinels and a
 * rogue one): the files the script writes, admin connections, where the
 * master is as each sentinel sees it, the topology settled between
 * failovers, faults (a failover asked of one sentinel, the master
 * killed), what the keys hold, and a watcher that timestamps the
 * sentinels' announcements as a client of the test's own sees them. */
#ifndef SL_SENTINEL_KIT_H
#define SL_SENTINEL_KIT_H

#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h>

#define DATA_PW     "data-pw"
#define SENTINEL_PW "sentinel-pw"

static const char *dir;
static char master_name[128];

/* Exits the test program: a file the fixture should have written. */
static inline void sk_read(const char *name, char *buf, size_t len)
{
    char path[512];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "r")) == NULL) {
        fprintf(stderr, "cannot read %s: was the fixture started?\n", path);
        exit(1);
    }
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
}

/* The number in DIR/KIND-I/FILE. */
static inline int sk_int(const char *kind, int i, const char *file)
{
    char name[64], buf[32];

    snprintf(name, sizeof(name), "%s-%d/%s", kind, i, file);
    sk_read(name, buf, sizeof(buf));
    return atoi(buf);
}

/* Sentinel i (1..3): its plain port (the fixture's own checks), the port
 * clients reach it at (TLS under sentinel-tls.sh), its process. */
static inline int sentinel_port(int i)
{
    return sk_int("sentinel", i, "port");
}

static inline int sentinel_client_port(int i)
{
    return sk_int("sentinel", i, "client-port");
}

static inline pid_t sentinel_pid(int i)
{
    return (pid_t)sk_int("sentinel", i, "pid");
}

/* A connection to 127.0.0.1:port, authenticated with pw; NULL when it
 * cannot be had. Every command waits at most 2 s: a frozen server never
 * hangs the test. */
static inline redisContext *sk_try_admin(int port, const char *pw)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r;

    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    r = redisCommand(c, "AUTH %s", pw);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        redisFree(c);
        return NULL;
    }
    freeReplyObject(r);
    return c;
}

static inline redisContext *admin(int port, const char *pw)
{
    redisContext *c = sk_try_admin(port, pw);

    if (c == NULL)
        fail_msg("cannot connect to 127.0.0.1:%d and authenticate", port);
    return c;
}

/* A data node's plain port from the port clients reach it at; 0 none. */
static inline int plain_port(int client_port)
{
    int i;

    for (i = 0; i < 3; i++)
        if (sk_int("node", i, "client-port") == client_port)
            return sk_int("node", i, "port");
    return 0;
}

/* The master's (client) port as sentinel i sees it now; 0 unknown. */
static inline int master_port(int i)
{
    redisContext *c = sk_try_admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r;
    int port = 0;

    if (c == NULL)
        return 0;
    r = redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", master_name);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    freeReplyObject(r);
    redisFree(c);
    return port;
}

/* INFO replication of data node i (its plain port), into buf; false
 * when the node is down (killed by a test). */
static inline bool node_info(int i, char *buf, size_t len)
{
    redisContext *c = sk_try_admin(sk_int("node", i, "port"), DATA_PW);
    redisReply *r;
    bool ok;

    if (c == NULL)
        return false;
    r = redisCommand(c, "INFO replication");
    ok = r != NULL && r->type == REDIS_REPLY_STRING;
    if (ok)
        snprintf(buf, len, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* A field of a reply of name-value pairs (SENTINEL MASTER, REPLICAS). */
static inline const char *sk_field(const redisReply *r, const char *name)
{
    size_t k;

    for (k = 0; r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2)
        if (r->element[k]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[k]->str, name) == 0 &&
            r->element[k + 1]->type == REDIS_REPLY_STRING)
            return r->element[k + 1]->str;
    return "";
}

/* Whether sentinel i is in a failover of the master (its flags): the
 * leader of the last one ends it only once it has reconfigured every
 * replica, and until then it may undo the next one's promotion. */
static inline bool sk_failing_over(int i)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r = redisCommand(c, "SENTINEL MASTER %s", master_name);
    bool in = r == NULL || strstr(sk_field(r, "flags"), "failover") != NULL;

    freeReplyObject(r);
    redisFree(c);
    return in;
}

/* Whether sentinel i has seen every replica it reaches as a replica of
 * the master on port m, in sync: one it still takes for a master (its
 * INFO not read since it turned replica) is converted back when it is
 * next promoted, undoing that failover. */
static inline bool sk_sees_replicas(int i, int m)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r = redisCommand(c, "SENTINEL REPLICAS %s", master_name);
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    char port[16];
    size_t k;

    snprintf(port, sizeof(port), "%d", m);
    for (k = 0; ok && k < r->elements; k++) {
        const redisReply *e = r->element[k];

        if (strstr(sk_field(e, "flags"), "s_down") != NULL ||
            strstr(sk_field(e, "flags"), "disconnected") != NULL)
            continue; /* a node killed by a test */
        ok = strcmp(sk_field(e, "role-reported"), "slave") == 0 &&
             strcmp(sk_field(e, "master-port"), port) == 0 &&
             strcmp(sk_field(e, "master-link-status"), "ok") == 0;
    }
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* How many clients of sentinel i are subscribed to three channels (the
 * handle's subscription and the watcher's): Sentinel has no PUBSUB. */
/* The ids of sentinel i's clients subscribed to three channels (a
 * handle's, the watcher's), into ids (max; more are not kept): their
 * count. A count alone cannot tell a new handle's subscription from a
 * closed handle's that the sentinel has not seen go yet (the failover on
 * the caller's loop went on before its handle subscribed, and lost the
 * second until +switch-master). */
static inline int sk_subscriber_ids(int i, long long *ids, int max)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r = redisCommand(c, "CLIENT LIST");
    const char *line = r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "";
    int n = 0;

    while (*line != '\0') {
        const char *eol = strchr(line, '\n'), *sub = strstr(line, " sub=3 ");
        long long id;

        if (eol == NULL)
            eol = line + strlen(line);
        if (sub != NULL && sub < eol && sscanf(line, "id=%lld", &id) == 1) {
            if (n < max)
                ids[n] = id;
            n++;
        }
        line = *eol != '\0' ? eol + 1 : eol;
    }
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Whether sentinel i has a client subscribed to three channels whose id
 * is none of before's (n). */
static inline bool sk_new_subscriber(int i, const long long *before, int n)
{
    long long now[64];
    int k = sk_subscriber_ids(i, now, 64), a, b;

    for (a = 0; a < k && a < 64; a++) {
        for (b = 0; b < n && before[b] != now[a]; b++)
            ;
        if (b == n)
            return true;
    }
    return false;
}

static inline int sk_subscribers(int i)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r = redisCommand(c, "CLIENT LIST");
    const char *p;
    int n = 0;

    for (p = r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "";
         (p = strstr(p, " sub=3 ")) != NULL; p++)
        n++;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Whether the master (client port m) streams its writes to n replicas
 * now: a write there, then WAIT for n of them (200 ms). A replica that
 * has just loaded a full resync says master_link_status:up, and the
 * master lists it online, but the master sends it nothing until the
 * replica's first REPLCONF ACK, up to a second later: promoted in that
 * second, it lacks every write of it. That was the fresh root's failure
 * of the failover on the caller's loop (2,184 acknowledged decisions at
 * adb0a43 under valgrind, 14,840 at 0a52f5c): this wait had demoted the
 * last test's old master 0.6 s before the failover, and sentinel 3 chose
 * it, its offset 158,378 bytes behind the other replica's. */
static inline bool sk_streaming(int m, int n)
{
    redisContext *c = sk_try_admin(plain_port(m), DATA_PW);
    redisReply *r;
    bool ok;

    if (c == NULL)
        return false;
    freeReplyObject(redisCommand(c, "SET sk:settled 1 PX 60000"));
    r = redisCommand(c, "WAIT %d 200", n);
    ok = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= n;
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Until every sentinel names one master, none is in a failover, every
 * other live node is its replica, in sync, and every sentinel has seen
 * that: a failover needs a replica to promote, the next one must not
 * promote a node that still holds what the last took, and a sentinel
 * that still takes the node promoted for the master it was undoes the
 * promotion. The old master of a planned failover turns replica only when
 * the sentinels next look at it (8 s and more); the test demotes it at
 * once, as they would (REPLICAOF the new master). */
static inline void wait_settled(void)
{
    int64_t end = tu_clock_ms(CLOCK_MONOTONIC) + 30000;
    char info[4096], want[64];

    for (;;) {
        int m = master_port(1), i, replicas = 0;
        bool ok = m != 0 && m == master_port(2) && m == master_port(3);

        for (i = 0; ok && i < 3; i++) {
            if (sk_int("node", i, "client-port") == m ||
                !node_info(i, info, sizeof(info)))
                continue;
            replicas++;
            snprintf(want, sizeof(want), "master_port:%d\r", m);
            if (strstr(info, "role:master") != NULL) {
                redisContext *c = admin(sk_int("node", i, "port"), DATA_PW);

                freeReplyObject(redisCommand(c, "REPLICAOF 127.0.0.1 %d", m));
                redisFree(c);
                ok = false;
            } else if (strstr(info, want) == NULL ||
                       strstr(info, "master_link_status:up") == NULL) {
                ok = false;
            }
        }
        for (i = 1; ok && i <= 3; i++)
            ok = !sk_failing_over(i) && sk_sees_replicas(i, m);
        if (ok && sk_streaming(m, replicas))
            return;
        if (tu_clock_ms(CLOCK_MONOTONIC) > end)
            fail_msg("the sentinels did not settle on a master with its "
                     "replicas in sync in 30 s");
        tu_sleep_ms(100);
    }
}

/* The sentinels' announcements as a client of the test's own hears them
 * (subscribed on each of the three): each with when it came
 * (CLOCK_MONOTONIC ms). Once the first +selected-slave after armed names
 * the replica chosen, when it turned master (ROLE asked every 2 ms), and
 * a control: how long the test's own connect, AUTH and PING to it took
 * then. Read them after sk_watch_stop. */
#define SK_EVENTS 64
typedef struct sk_event {
    int64_t at;
    char channel[16];
    int sentinel; /* 1..3 */
    int port;     /* the new master's */
} sk_event;

typedef struct sk_watch {
    redisContext *c[3];
    sk_event ev[SK_EVENTS];
    int n;
    _Atomic int64_t armed; /* events before it are old news */
    int64_t promoted_at;   /* -1 not seen */
    int64_t control_ms;    /* -1 none */
    long long lag_bytes;   /* what the replica lacked when promoted, -1
                              unknown (sk_lag) */
    atomic_int stop;
    bool running;
    pthread_t th;
} sk_watch;

/* The new master's port an event names (the word after the address of
 * the old one, or of the replica). */
static inline int sk_event_port(const char *ch, const char *m)
{
    char a[6][64];
    int n = sscanf(m, "%63s %63s %63s %63s %63s %63s", a[0], a[1], a[2], a[3],
                   a[4], a[5]);

    if (strcmp(ch, "+switch-master") == 0)
        return n >= 5 ? atoi(a[4]) : 0;
    return n >= 4 ? atoi(a[3]) : 0;
}

/* The test's own client over TLS, for the control on the TLS fixture: a
 * connect, a handshake (not verified: only its time counts), AUTH and PING,
 * as the handle's own reconnect does them; 2 s at most. */
static inline bool sk_tls_ping(int port, const char *pw)
{
    struct sockaddr_in a;
    struct timeval tv = {2, 0};
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = NULL;
    char cmd[256], buf[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0), n, got = 0;
    bool pong = false;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ctx == NULL)
        goto out;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        (ssl = SSL_new(ctx)) == NULL || SSL_set_fd(ssl, fd) != 1 ||
        SSL_connect(ssl) != 1)
        goto out;
    n = snprintf(cmd, sizeof(cmd),
                 "*2\r\n$4\r\nAUTH\r\n$%zu\r\n%s\r\n*1\r\n$4\r\nPING\r\n",
                 strlen(pw), pw);
    if (SSL_write(ssl, cmd, n) != n)
        goto out;
    while (got < (int)sizeof(buf) - 1 &&
           (n = SSL_read(ssl, buf + got, (int)sizeof(buf) - 1 - got)) > 0) {
        got += n;
        buf[got] = '\0';
        if ((pong = strstr(buf, "PONG") != NULL) || strchr(buf, '-') != NULL)
            break;
    }
out:
    if (ssl != NULL)
        SSL_free(ssl);
    if (ctx != NULL)
        SSL_CTX_free(ctx);
    if (fd >= 0)
        close(fd);
    return pong;
}

/* A field of INFO replication's text as a number; -1 none. */
static inline long long sk_info_ll(const char *info, const char *field)
{
    const char *at = strstr(info, field);

    return at != NULL ? atoll(at + strlen(field)) : -1;
}

/* The replication stream the replica promoted (c: a connection to it)
 * lacked at its promotion: the old master's offset now (read as soon as
 * the promotion is seen; the handle wrote nothing there since
 * +selected-slave) less the offset the new master had taken from it
 * (second_repl_offset, one past it, under the old master's replication
 * id). Redis's loss, not the handle's: replication is asynchronous, and
 * on a loaded machine (a fresh root's ASan pass, with three compilers
 * beside it: 637 decisions of 52,855) the replica may be tens of ms
 * behind. -1 when it cannot be told. */
static inline long long sk_lag(redisContext *c, int old_port)
{
    redisContext *o = sk_try_admin(plain_port(old_port), DATA_PW);
    redisReply *ro = o != NULL ? redisCommand(o, "INFO replication") : NULL;
    redisReply *rn = redisCommand(c, "INFO replication");
    long long lag = -1;

    if (ro != NULL && rn != NULL && ro->type == REDIS_REPLY_STRING &&
        rn->type == REDIS_REPLY_STRING) {
        char id[64] = "", want[80];
        const char *at = strstr(ro->str, "master_replid:");
        long long old_off = sk_info_ll(ro->str, "master_repl_offset:");
        long long taken = sk_info_ll(rn->str, "second_repl_offset:");

        if (at != NULL)
            sscanf(at, "master_replid:%40s", id);
        snprintf(want, sizeof(want), "master_replid2:%s", id);
        if (id[0] != '\0' && strstr(rn->str, want) != NULL &&
            strstr(ro->str, "role:master") != NULL && old_off >= 0 && taken > 0)
            lag = old_off - (taken - 1) > 0 ? old_off - (taken - 1) : 0;
    }
    freeReplyObject(ro);
    freeReplyObject(rn);
    if (o != NULL)
        redisFree(o);
    return lag;
}

/* The most decisions a lag of bytes can hold: one admitted decision
 * replicates 75 bytes at least (a fixed window's key charged again by
 * EVALSHA; 187 by redis+multi://; measured with INFO's offsets on Redis
 * 7.0.15), so a floor of 60. */
#define SK_MIN_DECISION_BYTES 60

static inline long long sk_lag_decisions(const sk_watch *w)
{
    return w->lag_bytes > 0 ? w->lag_bytes / SK_MIN_DECISION_BYTES : 0;
}

/* Asks the replica chosen for its role until it says master (the leader
 * has it close every client's connection as it promotes it: a fresh one
 * then); then what it lacked of the old master's (old_port) writes. */
static inline void sk_await_promotion(sk_watch *w, int port, int old_port)
{
    redisContext *c = NULL;
    int64_t end = tu_clock_ms(CLOCK_MONOTONIC) + 5000, t;

    while (tu_clock_ms(CLOCK_MONOTONIC) < end) {
        redisReply *r;
        bool master;

        if (c == NULL &&
            (c = sk_try_admin(plain_port(port), DATA_PW)) == NULL) {
            tu_sleep_ms(2);
            continue;
        }
        r = redisCommand(c, "ROLE");
        master = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(r->element[0]->str, "master") == 0;
        if (r == NULL) {
            redisFree(c);
            c = NULL;
        }
        freeReplyObject(r);
        if (master) {
            w->promoted_at = tu_clock_ms(CLOCK_MONOTONIC);
            w->lag_bytes = sk_lag(c, old_port);
            break;
        }
        tu_sleep_ms(2);
    }
    if (c != NULL)
        redisFree(c);
    /* The control: a connect and a PING of the test's own, over TLS on
     * the TLS fixture as the handle's are (the busy fresh-root run: the
     * handle back 210 ms after the promotion over TLS, against a bound
     * of 200 ms + 2 controls taken over TCP, 0 ms). */
    t = tu_clock_ms(CLOCK_MONOTONIC);
    if (plain_port(port) != port) {
        if (!sk_tls_ping(port, DATA_PW))
            fprintf(stderr, "the TLS control got no PONG from %d\n", port);
    } else if ((c = sk_try_admin(plain_port(port), DATA_PW)) != NULL) {
        freeReplyObject(redisCommand(c, "PING"));
        redisFree(c);
    }
    w->control_ms = tu_clock_ms(CLOCK_MONOTONIC) - t;
}

static inline void sk_heard(sk_watch *w, int i, const redisReply *r)
{
    const char *ch, *m;
    char at[160];
    sk_event *e;
    int64_t armed = atomic_load(&w->armed);

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(r->element[0]->str, "message") != 0 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return;
    ch = r->element[1]->str;
    m = r->element[2]->str;
    snprintf(at, sizeof(at), "@ %s ", master_name);
    if ((strncmp(m, master_name, strlen(master_name)) != 0 &&
         strstr(m, at) == NULL) ||
        w->n == SK_EVENTS)
        return;
    e = &w->ev[w->n++];
    e->at = tu_clock_ms(CLOCK_MONOTONIC);
    snprintf(e->channel, sizeof(e->channel), "%s", ch);
    e->sentinel = i + 1;
    e->port = sk_event_port(ch, m);
    if (armed > 0 && e->at >= armed && w->control_ms < 0 &&
        strcmp(ch, "+selected-slave") == 0) {
        /* "slave IP:PORT IP PORT @ NAME OLDIP OLDPORT": the old master
         * is the last word. */
        const char *last = strrchr(m, ' ');

        sk_await_promotion(w, e->port, last != NULL ? atoi(last + 1) : 0);
    }
}

/* The first event on channel since t0: its time after t0, -1 none. */
static inline int64_t sk_first(const sk_watch *w, const char *channel,
                               int64_t t0, int *sentinel)
{
    int k;

    for (k = 0; k < w->n; k++)
        if (w->ev[k].at >= t0 && strcmp(w->ev[k].channel, channel) == 0) {
            if (sentinel != NULL)
                *sentinel = w->ev[k].sentinel;
            return w->ev[k].at - t0;
        }
    return -1;
}

static inline void *sk_watch_run(void *arg)
{
    sk_watch *w = arg;

    while (!atomic_load(&w->stop)) {
        struct pollfd p[3];
        int i;

        for (i = 0; i < 3; i++) {
            p[i].fd = w->c[i] != NULL ? w->c[i]->fd : -1;
            p[i].events = POLLIN;
            p[i].revents = 0;
        }
        if (poll(p, 3, 20) <= 0)
            continue;
        for (i = 0; i < 3; i++) {
            void *r = NULL;

            if (p[i].revents == 0)
                continue;
            if (redisBufferRead(w->c[i]) != REDIS_OK) {
                redisFree(w->c[i]);
                w->c[i] = NULL;
                continue;
            }
            while (redisGetReplyFromReader(w->c[i], &r) == REDIS_OK &&
                   r != NULL) {
                sk_heard(w, i, r);
                freeReplyObject(r);
                r = NULL;
            }
        }
    }
    return NULL;
}

/* Subscribes on the three sentinels (none may be frozen yet), then
 * listens on a thread. */
static inline void sk_watch_start(sk_watch *w)
{
    int i;

    memset(w, 0, sizeof(*w));
    w->promoted_at = w->control_ms = -1;
    w->lag_bytes = -1;
    atomic_init(&w->armed, 0);
    atomic_init(&w->stop, 0);
    for (i = 0; i < 3; i++) {
        redisReply *r;

        w->c[i] = admin(sentinel_port(i + 1), SENTINEL_PW);
        r = redisCommand(w->c[i], "SUBSCRIBE +selected-slave "
                                  "+promoted-slave +switch-master");
        if (r == NULL)
            fail_msg("cannot subscribe on sentinel %d", i + 1);
        freeReplyObject(r);
    }
    w->running = pthread_create(&w->th, NULL, sk_watch_run, w) == 0;
}

static inline void sk_watch_stop(sk_watch *w)
{
    int i;

    if (!w->running)
        return;
    atomic_store(&w->stop, 1);
    pthread_join(w->th, NULL);
    w->running = false;
    for (i = 0; i < 3; i++)
        if (w->c[i] != NULL)
            redisFree(w->c[i]);
}

/* Every key of the tests on every data node has a TTL. */
static inline void check_ttls(void)
{
    int i;

    for (i = 0; i < 3; i++) {
        redisContext *c = sk_try_admin(sk_int("node", i, "port"), DATA_PW);
        redisReply *r;
        size_t k;

        if (c == NULL)
            continue; /* the node killed by a test */
        r = redisCommand(c, "KEYS sluice:*");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        for (k = 0; k < r->elements; k++) {
            redisReply *t = redisCommand(c, "PTTL %b", r->element[k]->str,
                                         r->element[k]->len);

            if (t == NULL || t->integer == -1)
                fail_msg("key %s on node %d has no TTL", r->element[k]->str, i);
            freeReplyObject(t);
        }
        freeReplyObject(r);
        redisFree(c);
    }
}

/* The count key holds on the master now (every window's). */
static inline long long counted(const char *key, int via)
{
    redisContext *c = admin(plain_port(master_port(via)), DATA_PW);
    redisReply *r = redisCommand(c, "KEYS sluice:{%s}:*", key);
    long long sum = 0;
    size_t k;

    assert_non_null(r);
    for (k = 0; k < r->elements; k++) {
        redisReply *v =
            redisCommand(c, "GET %b", r->element[k]->str, r->element[k]->len);

        if (v != NULL && v->type == REDIS_REPLY_STRING)
            sum += atoll(v->str);
        freeReplyObject(v);
    }
    freeReplyObject(r);
    redisFree(c);
    return sum;
}

/* Asks sentinel i to fail the master over: it leads that failover. */
static inline void planned(int i)
{
    redisContext *c = admin(sentinel_port(i), SENTINEL_PW);
    redisReply *r;
    int tries = 0;

    /* The sentinels may still be closing the last failover (INPROG), or
     * not have seen a replica in sync yet (NOGOODSLAVE). */
    while ((r = redisCommand(c, "SENTINEL FAILOVER %s", master_name)) != NULL &&
           r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "INPROG", 6) == 0 ||
            strncmp(r->str, "NOGOODSLAVE", 11) == 0) &&
           ++tries < 150) {
        freeReplyObject(r);
        tu_sleep_ms(100);
    }
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        fail_msg("SENTINEL FAILOVER on sentinel %d: %s", i,
                 r != NULL ? r->str : "no reply");
    freeReplyObject(r);
    redisFree(c);
}

static inline void killed(int old)
{
    int i;

    for (i = 0; i < 3; i++)
        if (sk_int("node", i, "client-port") == old) {
            assert_int_equal(kill((pid_t)sk_int("node", i, "pid"), SIGKILL), 0);
            return;
        }
    fail_msg("no node has the master's port %d", old);
}

#endif /* SL_SENTINEL_KIT_H */
