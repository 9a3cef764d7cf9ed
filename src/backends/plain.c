/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.c - decides with plain commands. Windows and logs are charged
 * optimistically (the charge is made, then judged, and taken back on a
 * denial); buckets need an atomic read-modify-write, which only WATCH and
 * MULTI/EXEC give. No command here needs EXPIRE options, scripts or TIME.
 *
 * Per rule, an optimistic acquire sends:
 *   fixed    SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl
 *   sliding  SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl; GET w-1
 *   log      ZADD l t m; ZRANGE l 0 -1 WITHSCORES; PEXPIRE l ttl
 * where w is the window-stamped key of t's window, so a window ending
 * between two commands never reuses a counter, and every key gets its TTL
 * from the command that creates it (SET NX PX) or right after (ZADD). A
 * denial sends DECRBY w c; PEXPIRE w ttl or ZREM l m.
 *
 * A log is pruned only below the newest stamp minus P, never below the
 * request's own t minus P: a request from a clock ahead that is then
 * denied must leave no trace, and entries it would have pruned still count
 * for the requests after it. Pruning rides on a follow-up that is sent
 * anyway (a denial, a late stamp), or on its own once dead entries are as
 * many as the live ones (and at least PRUNE_MIN), so a log holds at most
 * about twice its live entries.
 *
 * Each request is a unit that runs on the engine as a chain of steps, each
 * step a group of commands queued with a callback per reply: the block
 * (the charge or the reads), then a follow-up only where needed; a bucket
 * acquire WATCHes and reads, decides here, then writes in MULTI/EXEC. The
 * requests on one key run one after the other, in the order they came, so
 * that each sees the outcome of the one before, taken-back charges
 * included; requests on other keys share the connection's writes. A WATCH
 * holds the connection until its EXEC or UNWATCH: another request's
 * MULTI/EXEC in between would end it.
 *
 * An acquire at most is charged as an acquire of the most it asks, judged,
 * and what it does not grant is taken back in the follow-up. A refund
 * WATCHes and reads, and writes in MULTI/EXEC; only buckets are refunded
 * (classify says why).
 *
 * A server is input too: each command records the reply it must get (its
 * want), and every reply, EXEC's elements included, is checked against it
 * as it comes. A reply no Redis sends is SLUICE_EPROTO, never a number to
 * decide on, and ends the connection at once (out_of_step): every later
 * reply on it might belong to another command. */
#include "backends/plain.h"

#include "algo.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEYBUF        SL_KEY_BUF
#define WATCH_RETRIES 16
#define PRUNE_MIN     16 /* dead log entries worth a round trip */

typedef enum job_mode {
    JOB_OPTIMISTIC = 1, /* acquire of windows and logs */
    JOB_READ,           /* peek, or the reads of a watched acquire */
    JOB_RESET,
    JOB_RULES, /* a named limiter's stored rules: plain GET, SET, DEL */
    JOB_LEASE  /* a lease: added, judged, removed again if denied */
} job_mode;

/* One rule's state as read back, and what a charge must write. */
typedef struct rule_io {
    int64_t k, to_end;     /* windows: index and time to its end */
    int64_t ttl;           /* TTL sent with the optimistic charge */
    sl_log_entry *entries; /* log: oldest first, without our own */
    int64_t keep;          /* token, gcra: live at least until then */
    size_t cap;
    char member[64]; /* log: our entry */
} rule_io;

/* The steps of a unit; each queues its commands and ends when their
 * replies are in. */
typedef enum step {
    STEP_BLOCK = 1, /* the charge, the reads, or the DEL of a reset */
    STEP_FOLLOW,    /* taking back a denied charge, re-stamping a log */
    STEP_WATCH,     /* WATCH and the reads of a bucket acquire */
    STEP_EXEC       /* its writes in MULTI/EXEC */
} step;

/* The most replies of a block: a sliding window's four, each rule. */
#define BLOCK_MAX (4 * SLUICE_MAX_RULES)
/* The most commands of a step: a block with MULTI and EXEC (a follow-up
 * sends at most four a rule, the writes three, MULTI and EXEC aside). */
#define STEP_MAX  (BLOCK_MAX + 2)

/* The reply each command must get: the exact type and range Redis gives
 * it. Anything else is a reply no Redis sends (a proxy or server out of
 * step, or not Redis): SLUICE_EPROTO, never a number to decide on. */
typedef enum want {
    WANT_OK = 1,   /* +OK: MULTI, WATCH, SET */
    WANT_OK_NIL,   /* SET ... NX: +OK, or nil when the key exists */
    WANT_QUEUED,   /* any command inside MULTI */
    WANT_BOOL,     /* PEXPIRE, PERSIST, ZADD or ZREM of one member: 0 or 1 */
    WANT_COUNT,    /* DEL, ZREMRANGEBYSCORE: an integer >= 0 */
    WANT_INT,      /* INCRBY, DECRBY: any integer */
    WANT_BULK_NIL, /* GET: a bulk string, or nil */
    WANT_ARRAY,    /* ZRANGE, ZRANGEBYSCORE: an array, read by its parser */
    WANT_EXEC      /* EXEC: the array of the queued commands' replies, or nil
                    * after a WATCH */
} want;

/* One request under way. */
typedef struct sl_unit unit;
struct sl_unit {
    const sl_request *rq;
    sl_job *job; /* and i, the request's place in it */
    size_t i;
    job_mode mode;
    bool watched; /* a bucket rule: WATCH, read, MULTI/EXEC */
    bool wrapped; /* its block goes in MULTI/EXEC */
    step step;    /* the step under way, or waiting for the connection */
    int attempt;  /* of a watched acquire */
    size_t ncmds; /* commands of its block, MULTI/EXEC aside */
    /* The replies of the step: awaited and come; a failure of the
     * connection under it, and whether any of its commands went out. */
    size_t expect, got;
    bool broken, sent, exec_nil;
    /* A reply no Redis sends came for this step: the connection was ended
     * (out_of_step), and the request ends with SLUICE_EPROTO. */
    bool desync;
    unsigned char wants[STEP_MAX]; /* want of each command of the step */
    sluice_status st;              /* the step's first failure */
    char msg[SL_ERR_LEN];
    redisReply *exec;            /* a wrapped block's EXEC reply */
    redisReply *reps[BLOCK_MAX]; /* the block's replies (in exec, or own) */
    rule_io io[SLUICE_MAX_RULES];
    sl_state_view views[SLUICE_MAX_RULES];
    sl_verdict v[SLUICE_MAX_RULES];
    sl_charge ch[SLUICE_MAX_RULES];
    bool all;
    int64_t charged;    /* the cost charged: an acquire at most's grant */
    int64_t lease_last; /* a lease: when the last live one ends */
    /* The key's queue: the unit under way on the key is in the table
     * (hnext), with the last unit waiting behind it (qtail). */
    bool keyed, held;
    uint32_t hash;
    unit *hnext, *qtail, *before, *after;
    unit *hold_prev, *hold_next; /* waiting for the connection */
};

static bool all_buckets(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (!sl_store_is_bucket(&rs->rules[i]))
            return false;
    return true;
}

static bool has_bucket(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (sl_store_is_bucket(&rs->rules[i]))
            return true;
    return false;
}

/* The key of rule r; windows get ":<k>" for window k. */
static size_t rule_key(const sl_plain *p, const sl_request *rq,
                       const sluice_rule *r, bool window, int64_t k, char *buf)
{
    size_t n = sl_key_build(buf, KEYBUF,
                            rq->prefix != NULL ? rq->prefix : p->url->prefix,
                            rq->key, rq->key_len, r);

    return window ? sl_key_window(buf, n, k) : n;
}

static int64_t with_floor(const sl_plain *p, int64_t ttl)
{
    return sl_max64(ttl, (int64_t)p->url->opts.ttl_floor_ms);
}

/* The TTL rule i's key needs after unit j's charge (store.h). */
static int64_t charge_ttl(const sl_plain *p, const unit *j, size_t i)
{
    return sl_store_ttl(&j->rq->rules->rules[i], j->rq->now_ms,
                        j->v[i].reset_ms, (int64_t)p->url->opts.ttl_floor_ms);
}

/* splitmix64's finaliser: every bit of x moves about half of the result's. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Where a handle's log members start counting. Two handles whose counts
 * meet write the same member for one stamp and cost: the second ZADD adds
 * nothing, each takes the other's entry for its own, and their charges
 * count once (over-admission). So the start is random, from the kernel,
 * not from the process id, the second and the handle's address: a handle
 * closed and another opened in the same second at the same address (as
 * malloc gives it back, in a thread that reuses a finished one's arena)
 * started the same count, and partial.multi_tls admitted up to 199 of
 * 100. Without /dev/urandom, the clocks' nanoseconds stand in (two
 * handles of one process never open at the same nanosecond and
 * address). Two random starts meet with odds of about (n + m) / 2^64 for
 * handles writing n and m members. */
static uint64_t member_seed(const void *p)
{
    struct timespec rt = {0, 0}, mono = {0, 0};
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        ssize_t got = read(fd, &seed, sizeof(seed));

        close(fd);
        if (got == (ssize_t)sizeof(seed))
            return mix64(seed);
    }
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    seed = mix64((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec);
    seed = mix64(
        seed ^ ((uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec));
    return mix64(seed ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)p);
}

/* A log entry's member: its stamp, its cost, and a nonce that makes it
 * unique among the handles of every process (member_seed). */
static void log_member(sl_plain *p, int64_t x, int64_t cost, char *buf,
                       size_t len)
{
    snprintf(buf, len, "%lld:%lld:%016llx", (long long)x, (long long)cost,
             (unsigned long long)++p->nonce);
}

static void on_reply(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg);

/* The command just queued (st, the queueing's status) answers to unit u.
 * One that could not be queued breaks the step; the connection then
 * writes nothing more (a MULTI cut short must not go out), and what it
 * carried goes on the next. */
static void expect_reply(sl_plain *p, unit *u, want w, sluice_status st)
{
    if (st == SLUICE_OK && u->expect >= STEP_MAX)
        st = SLUICE_ENOMEM; /* cannot happen: STEP_MAX bounds every step */
    if (st == SLUICE_OK)
        st = sl_conn_expect(&p->conn, on_reply, u->job, u->i);
    if (st == SLUICE_OK) {
        u->wants[u->expect++] = (unsigned char)w;
        return;
    }
    if (!u->broken) {
        u->broken = true;
        u->st = SLUICE_ENOMEM;
        sl_errf(u->msg, sizeof(u->msg), "%s: out of memory queueing a command",
                p->name);
    }
    sl_conn_doom(&p->conn);
}

/* Queues one command of unit u; hiredis formats it. */
#define APPEND(p, u, w, ...)    \
    expect_reply((p), (u), (w), \
                 sl_conn_appendf(&(p)->conn, NULL, 0, __VA_ARGS__))

/* A rules op: read (and start the keep-alive again), store (unless
 * present, then read what is), or delete. */
static size_t append_rules(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_rules(key, sizeof(key),
                             rq->prefix != NULL ? rq->prefix : p->url->prefix,
                             rq->key, rq->key_len);

    switch (rq->op) {
    case SL_OP_RULES_GET:
        APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
        if (rq->ttl_ms > 0) {
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)rq->ttl_ms);
            return 2;
        }
        if (rq->ttl_ms < 0) {
            APPEND(p, j, WANT_BOOL, "PERSIST %b", key, kl);
            return 2;
        }
        return 1;
    case SL_OP_RULES_PUT:
        if (rq->ttl_ms > 0 && rq->cost == 1)
            APPEND(p, j, WANT_OK_NIL, "SET %b %b PX %lld NX", key, kl,
                   rq->value, rq->value_len, (long long)rq->ttl_ms);
        else if (rq->ttl_ms > 0)
            APPEND(p, j, WANT_OK, "SET %b %b PX %lld", key, kl, rq->value,
                   rq->value_len, (long long)rq->ttl_ms);
        else if (rq->cost == 1)
            APPEND(p, j, WANT_OK_NIL, "SET %b %b NX", key, kl, rq->value,
                   rq->value_len);
        else
            APPEND(p, j, WANT_OK, "SET %b %b", key, kl, rq->value,
                   rq->value_len);
        APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
        return 2;
    default:
        APPEND(p, j, WANT_COUNT, "DEL %b", key, kl);
        return 1;
    }
}

/* A lease: prune what ended, add ours, read every live lease (with ours)
 * and give the key a TTL; a release removes it. Judged on the client;
 * never more than the most holders: each lease admitted was counted with
 * every lease added before it, as a window's charge is. */
static size_t append_lease(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_lease(key, sizeof(key),
                             rq->prefix != NULL ? rq->prefix : p->url->prefix,
                             rq->key, rq->key_len);
    long long t = (long long)rq->now_ms;

    if (rq->op == SL_OP_LEASE_RELEASE) {
        APPEND(p, j, WANT_BOOL, "ZREM %b %b", key, kl, rq->value,
               rq->value_len);
        return 1;
    }
    APPEND(p, j, WANT_COUNT, "ZREMRANGEBYSCORE %b -inf %lld", key, kl, t);
    APPEND(p, j, WANT_BOOL, "ZADD %b %lld %b", key, kl,
           t + (long long)rq->ttl_ms, rq->value, rq->value_len);
    APPEND(p, j, WANT_ARRAY, "ZRANGEBYSCORE %b (%lld +inf WITHSCORES", key, kl,
           t);
    APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
           (long long)with_floor(p, 2 * rq->ttl_ms));
    return 4;
}

/* A lease's reads: the live leases but ours, the first and last ends. */
static sluice_status parse_lease(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    const redisReply *r = j->reps[2];
    int64_t n = 0, first = -1, last = -1, end;
    sluice_result *out = &j->job->out[j->i];
    size_t k;

    if (rq->op == SL_OP_LEASE_RELEASE)
        return SLUICE_OK;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        goto bad;
    for (k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *m = r->element[k], *sc = r->element[k + 1];
        char *e;

        if (m->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING)
            goto bad;
        if (m->len == rq->value_len && memcmp(m->str, rq->value, m->len) == 0)
            continue; /* ours */
        end = strtoll(sc->str, &e, 10);
        if (e == sc->str || *e != '\0' || end <= rq->now_ms ||
            end > SL_MAX_TIME_MS + SL_MAX_PERIOD_MS)
            goto bad;
        first = n == 0 ? end : sl_min64(first, end);
        last = n == 0 ? end : sl_max64(last, end);
        n++;
    }
    j->all =
        sl_lease_decide(rq->now_ms, rq->cost, rq->ttl_ms, n, first, last, out);
    j->lease_last = sl_max64(last, j->all ? rq->now_ms + rq->ttl_ms : -1);
    return SLUICE_OK;
bad:
    sl_errf(j->msg, sizeof(j->msg),
            "%s: unexpected data under the leases of this key; is another "
            "program using the key prefix \"%s\"?",
            p->name, p->url->prefix);
    return SLUICE_EPROTO;
}

/* After a lease's block: a denied lease goes again, and the key lives
 * until the last lease ends and a lease time more. */
static size_t append_lease_follow(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_lease(key, sizeof(key),
                             rq->prefix != NULL ? rq->prefix : p->url->prefix,
                             rq->key, rq->key_len);
    size_t n = 0;

    if (!j->all) {
        APPEND(p, j, WANT_BOOL, "ZREM %b %b", key, kl, rq->value,
               rq->value_len);
        n++;
    }
    if (j->lease_last + rq->ttl_ms > rq->now_ms + 2 * rq->ttl_ms) {
        APPEND(
            p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
            (long long)with_floor(p, j->lease_last + rq->ttl_ms - rq->now_ms));
        n++;
    }
    return n;
}

/* What a rules op read: the value of its GET, or DEL's count. */
static sluice_status parse_rules_reply(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    const redisReply *r = rq->op == SL_OP_RULES_PUT ? j->reps[1] : j->reps[0];

    if (r != NULL && rq->op == SL_OP_RULES_DEL &&
        r->type == REDIS_REPLY_INTEGER) {
        rq->read->found = r->integer > 0;
        return SLUICE_OK;
    }
    if (r != NULL && r->type == REDIS_REPLY_NIL) {
        rq->read->found = false;
        rq->read->len = 0;
        return SLUICE_OK;
    }
    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len > SL_VALUE_MAX) {
        sl_errf(j->msg, sizeof(j->msg),
                "%s: unexpected reply for a limiter's rules; is another "
                "program using the key prefix \"%s\"?",
                p->name, p->url->prefix);
        return SLUICE_EPROTO;
    }
    rq->read->found = true;
    rq->read->len = r->len;
    memcpy(rq->read->buf, r->str, r->len);
    return SLUICE_OK;
}

/* Appends the block of one unit; returns its number of commands. */
static size_t append_block(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    const sluice_ruleset *rs = rq->rules;
    char key[KEYBUF], prev[KEYBUF];
    size_t i, n = 0, kl, pl;
    int64_t t = rq->now_ms;

    if (j->mode == JOB_RESET) {
        expect_reply(p, j, WANT_COUNT,
                     sl_conn_append_reset(&p->conn,
                                          rq->prefix != NULL ? rq->prefix
                                                             : p->url->prefix,
                                          rq, NULL, 0));
        return 1;
    }
    if (j->mode == JOB_RULES)
        return append_rules(p, j);
    if (j->mode == JOB_LEASE)
        return append_lease(p, j);
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        rule_io *io = &j->io[i];
        int64_t per = r->period_ms;

        sl_window_locate(r, t, &io->k, &io->to_end);
        kl = rule_key(p, rq, r, sl_store_is_window(r), io->k, key);
        if (j->mode == JOB_READ) {
            switch (r->algorithm) {
            case SLUICE_SLIDING:
                pl = rule_key(p, rq, r, true, io->k - 1, prev);
                APPEND(p, j, WANT_BULK_NIL, "GET %b", prev, pl);
                n++;
                /* fall through */
            case SLUICE_FIXED:
                APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
                n++;
                break;
            case SLUICE_LOG:
                APPEND(p, j, WANT_ARRAY, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
                n++;
                break;
            case SLUICE_TOKEN:
            case SLUICE_GCRA:
                APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
                n++;
                break;
            }
            continue;
        }
        /* Optimistic charge. */
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            io->ttl = sl_store_window_ttl(r, io->to_end,
                                          (int64_t)p->url->opts.ttl_floor_ms);
            APPEND(p, j, WANT_OK_NIL, "SET %b 0 NX PX %lld", key, kl,
                   (long long)io->ttl);
            APPEND(p, j, WANT_INT, "INCRBY %b %lld", key, kl,
                   (long long)rq->cost);
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)io->ttl);
            n += 3;
            if (r->algorithm == SLUICE_SLIDING) {
                pl = rule_key(p, rq, r, true, io->k - 1, prev);
                APPEND(p, j, WANT_BULK_NIL, "GET %b", prev, pl);
                n++;
            }
            break;
        case SLUICE_LOG:
            /* A charge stamped t resets a period later. */
            io->ttl =
                sl_store_ttl(r, t, per, (int64_t)p->url->opts.ttl_floor_ms);
            log_member(p, t, rq->cost, io->member, sizeof(io->member));
            APPEND(p, j, WANT_BOOL, "ZADD %b %lld %s", key, kl, (long long)t,
                   io->member);
            APPEND(p, j, WANT_ARRAY, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)io->ttl);
            n += 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            break; /* never optimistic */
        }
    }
    return n;
}

/* Whether r is what Redis answers to a command of want w. */
static bool reply_fits(want w, const redisReply *r)
{
    switch (w) {
    case WANT_OK:
        return r->type == REDIS_REPLY_STATUS && r->len == 2 &&
               memcmp(r->str, "OK", 2) == 0;
    case WANT_OK_NIL:
        return r->type == REDIS_REPLY_NIL || reply_fits(WANT_OK, r);
    case WANT_QUEUED:
        return r->type == REDIS_REPLY_STATUS && r->len == 6 &&
               memcmp(r->str, "QUEUED", 6) == 0;
    case WANT_BOOL:
        return r->type == REDIS_REPLY_INTEGER &&
               (r->integer == 0 || r->integer == 1);
    case WANT_COUNT:
        return r->type == REDIS_REPLY_INTEGER && r->integer >= 0;
    case WANT_INT:
        return r->type == REDIS_REPLY_INTEGER;
    case WANT_BULK_NIL:
        return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL;
    case WANT_ARRAY:
        return r->type == REDIS_REPLY_ARRAY;
    case WANT_EXEC:
        return r->type == REDIS_REPLY_ARRAY || r->type == REDIS_REPLY_NIL;
    }
    return false;
}

static const char *want_text(want w)
{
    switch (w) {
    case WANT_OK:
        return "+OK";
    case WANT_OK_NIL:
        return "+OK or nil";
    case WANT_QUEUED:
        return "+QUEUED";
    case WANT_BOOL:
        return "the integer 0 or 1";
    case WANT_COUNT:
        return "an integer >= 0";
    case WANT_INT:
        return "an integer";
    case WANT_BULK_NIL:
        return "a bulk string or nil";
    case WANT_ARRAY:
        return "an array";
    case WANT_EXEC:
        return "EXEC's array";
    }
    return "?";
}

/* A whole decimal int64, as Redis writes one: "-"? digits, nothing else. */
static bool strict_i64(const char *s, size_t len, int64_t *v)
{
    uint64_t acc = 0, lim;
    bool neg = len > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;

    if (i == len || len - i > 19)
        return false;
    lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        acc = acc * 10 + (uint64_t)(s[i] - '0');
        if (acc > lim)
            return false;
    }
    *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return true;
}

/* A count from GET: nil (no key) is 0, else a whole decimal. */
static bool get_int(const redisReply *r, int64_t *v)
{
    if (r->type == REDIS_REPLY_NIL) {
        *v = 0;
        return true;
    }
    return r->type == REDIS_REPLY_STRING && strict_i64(r->str, r->len, v);
}

/* INCRBY's reply: an integer, only. */
static bool incr_int(const redisReply *r, int64_t *v)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return false;
    *v = r->integer;
    return true;
}

/* Log entries from ZRANGE ... WITHSCORES, without our own member. */
static bool read_log(rule_io *io, const redisReply *r, size_t *count)
{
    size_t i, n = 0;

    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return false;
    if (r->elements / 2 > io->cap) {
        sl_log_entry *e = sl_realloc(io->entries, r->elements / 2 * sizeof(*e));

        if (e == NULL)
            return false;
        io->entries = e;
        io->cap = r->elements / 2;
    }
    for (i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *m = r->element[i], *s = r->element[i + 1];
        const char *colon;

        if (m->type != REDIS_REPLY_STRING || s->type != REDIS_REPLY_STRING)
            return false;
        if (io->member[0] != '\0' && m->len == strlen(io->member) &&
            memcmp(m->str, io->member, m->len) == 0)
            continue;
        colon = memchr(m->str, ':', m->len);
        if (colon == NULL || !strict_i64(s->str, s->len, &io->entries[n].x) ||
            !strict_i64(colon + 1,
                        strcspn(colon + 1, ":"), /* "<t>:<cost>:<nonce>" */
                        &io->entries[n].cost))
            return false;
        /* Stamps are times, costs within the accepted range: sums and
         * differences of them stay exact. */
        if (io->entries[n].x < 0 || io->entries[n].x > SL_MAX_TIME_MS ||
            io->entries[n].cost < 1 || io->entries[n].cost > SL_MAX_LIMIT)
            return false;
        n++;
    }
    *count = n;
    return true;
}

/* A bucket's state: nil, or what sl_bucket_pack wrote. */
static bool read_bucket(const redisReply *r, sl_state_view *s, int64_t *keep)
{
    if (r->type == REDIS_REPLY_NIL)
        return true;
    s->has = true;
    return r->type == REDIS_REPLY_STRING &&
           sl_bucket_unpack(r->str, r->len, &s->x, &s->d, keep);
}

/* A window count read back: a taken-back charge whose key expired
 * meanwhile leaves a negative count, which is an empty window; a count
 * whose product with the period could overflow is not ours. */
static bool window_count(int64_t *v, const sluice_rule *r)
{
    if (*v < 0)
        *v = 0;
    return *v <= INT64_MAX / 4 / r->period_ms;
}

/* Turns a unit's block replies into views of the state before the
 * request. */
static sluice_status parse_views(sl_plain *p, unit *j, redisReply **reps,
                                 char *err, size_t err_len)
{
    const sluice_ruleset *rs = j->rq->rules;
    size_t i, at = 0;
    bool ok = true;

    for (i = 0; i < rs->count && ok; i++) {
        const sluice_rule *r = &rs->rules[i];
        sl_state_view *s = &j->views[i];
        rule_io *io = &j->io[i];
        redisReply **rep = reps + at;

        memset(s, 0, sizeof(*s));
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            if (j->mode == JOB_READ) {
                if (r->algorithm == SLUICE_SLIDING)
                    ok = get_int(*rep++, &s->prev);
                ok = ok && get_int(*rep, &s->cur);
                at += r->algorithm == SLUICE_SLIDING ? 2 : 1;
            } else {
                /* SET NX PX, INCRBY, PEXPIRE, GET of the window before. */
                ok = reply_fits(WANT_OK_NIL, rep[0]) &&
                     incr_int(rep[1], &s->cur) &&
                     s->cur > INT64_MIN + j->rq->cost &&
                     reply_fits(WANT_BOOL, rep[2]);
                s->cur -= ok ? j->rq->cost : 0;
                if (r->algorithm == SLUICE_SLIDING)
                    ok = ok && get_int(rep[3], &s->prev);
                at += r->algorithm == SLUICE_SLIDING ? 4 : 3;
            }
            ok = ok && window_count(&s->cur, r) && window_count(&s->prev, r);
            break;
        case SLUICE_LOG:
            /* ZADD, ZRANGE, PEXPIRE. */
            ok = (j->mode == JOB_READ || (reply_fits(WANT_BOOL, rep[0]) &&
                                          reply_fits(WANT_BOOL, rep[2]))) &&
                 read_log(io, rep[j->mode == JOB_READ ? 0 : 1], &s->n);
            s->entries = io->entries;
            at += j->mode == JOB_READ ? 1 : 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            ok = read_bucket(rep[0], s, &io->keep);
            at += 1;
            break;
        }
    }
    if (!ok) {
        sl_errf(err, err_len,
                "%s: unexpected data under the keys of this "
                "request; is another program using the key prefix \"%s\"?",
                p->name, p->url->prefix);
        return SLUICE_EPROTO;
    }
    return SLUICE_OK;
}

/* Log entries (others', oldest first) stamped at or before upto. */
static size_t log_dead(const sl_state_view *s, int64_t upto)
{
    size_t n = 0;

    while (n < s->n && s->entries[n].x <= upto)
        n++;
    return n;
}

/* Appends the removal of the log's entries stamped at or before upto. */
static size_t append_prune(sl_plain *p, unit *j, const char *key, size_t kl,
                           int64_t upto)
{
    APPEND(p, j, WANT_COUNT, "ZREMRANGEBYSCORE %b -inf %lld", key, kl,
           (long long)upto);
    return 1;
}

/* Appends what takes back an optimistic charge that was denied. */
static size_t append_compensation(sl_plain *p, unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        rule_io *io = &j->io[i];

        kl = rule_key(p, j->rq, r, sl_store_is_window(r), io->k, key);
        if (sl_store_is_window(r)) {
            /* PEXPIRE too: should the key have expired meanwhile, DECRBY
             * would have created it without a TTL. */
            APPEND(p, j, WANT_INT, "DECRBY %b %lld", key, kl,
                   (long long)j->rq->cost);
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)io->ttl);
            n += 2;
        } else if (r->algorithm == SLUICE_LOG) {
            const sl_state_view *s = &j->views[i];

            APPEND(p, j, WANT_BOOL, "ZREM %b %s", key, kl, io->member);
            n++;
            /* Dead for everyone: below the newest charge minus P. Not
             * below t - P: this request charged nothing. */
            if (s->n > 0 &&
                log_dead(s, s->entries[s->n - 1].x - r->period_ms) > 0)
                n += append_prune(p, j, key, kl,
                                  s->entries[s->n - 1].x - r->period_ms);
        }
    }
    return n;
}

/* Appends a log entry of cost at stamp x, under a new member, and the
 * key's TTL. */
static void append_log_entry(sl_plain *p, unit *j, const char *key, size_t kl,
                             int64_t x, int64_t cost, long long ttl)
{
    char member[64];

    log_member(p, x, cost, member, sizeof(member));
    APPEND(p, j, WANT_BOOL, "ZADD %b %lld %s", key, kl, (long long)x, member);
    APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl, ttl);
}

/* After an admitted charge: a late log entry is stamped with the newest
 * time, so ours is re-stamped; and entries that died before our stamp are
 * pruned when that is due (see the top of the file). An acquire at most
 * that granted less than it charged takes back the rest. */
static size_t append_restamp(sl_plain *p, unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl, dead;
    int64_t excess = j->rq->cost - j->charged;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        const sl_state_view *s = &j->views[i];
        int64_t upto = j->ch[i].x - r->period_ms;
        bool late = j->ch[i].x != j->rq->now_ms;

        if (sl_store_is_window(r) && excess > 0) {
            kl = rule_key(p, j->rq, r, true, j->io[i].k, key);
            APPEND(p, j, WANT_INT, "DECRBY %b %lld", key, kl,
                   (long long)excess);
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)j->io[i].ttl);
            n += 2;
        }
        if (r->algorithm != SLUICE_LOG)
            continue;
        dead = log_dead(s, upto);
        if (!late && excess == 0 && (dead < PRUNE_MIN || dead < s->n - dead))
            continue;
        kl = rule_key(p, j->rq, r, false, 0, key);
        if (late || excess > 0) {
            /* The new entry first: between two commands another client's
             * block may run, and must find the charge there (twice is
             * safe, missing would admit beyond the limit). */
            append_log_entry(p, j, key, kl, j->ch[i].x, j->charged,
                             (long long)charge_ttl(p, j, i));
            APPEND(p, j, WANT_BOOL, "ZREM %b %s", key, kl, j->io[i].member);
            n += 3;
        }
        if (dead > 0)
            n += append_prune(p, j, key, kl, upto);
    }
    return n;
}

/* Appends the writes of a watched acquire that was admitted. */
static size_t append_writes(sl_plain *p, unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        long long ttl = (long long)charge_ttl(p, j, i);

        kl = rule_key(p, j->rq, r, sl_store_is_window(r), j->io[i].k, key);
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            APPEND(p, j, WANT_INT, "INCRBY %b %lld", key, kl,
                   (long long)j->charged);
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl, ttl);
            n += 2;
            break;
        case SLUICE_LOG:
            APPEND(p, j, WANT_COUNT, "ZREMRANGEBYSCORE %b -inf %lld", key, kl,
                   (long long)(j->ch[i].x - r->period_ms));
            append_log_entry(p, j, key, kl, j->ch[i].x, j->charged, ttl);
            n += 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA: {
            /* TTLs only grow: keep is the latest time any charge of the
             * state asked it to live until (a raised limit drains faster
             * than the rule that charged before). */
            char packed[SL_BUCKET_LEN];
            int64_t keep =
                sl_max64(j->io[i].keep,
                         j->rq->now_ms + sl_store_ttl(r, j->rq->now_ms,
                                                      j->v[i].reset_ms, 0));

            sl_bucket_pack(packed, j->ch[i].x, j->ch[i].d, keep);
            APPEND(p, j, WANT_OK, "SET %b %b PX %lld", key, kl, packed,
                   sizeof(packed),
                   (long long)with_floor(p, keep - j->rq->now_ms));
            n += 1;
            break;
        }
        }
    }
    return n;
}

/* A refund of buckets (the only rules refunded here; see classify) on
 * the views read: they become the state after it. */
static void refund_views(unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        sl_state_view *s = &j->views[i];

        s->has = sl_refund_bucket(&rs->rules[i], j->rq->now_ms, s->has, s->x,
                                  s->d, j->rq->cost, &s->x, &s->d);
    }
}

/* Appends a refund's writes: each bucket that has a state, with its TTL
 * kept. */
static size_t append_refund_writes(sl_plain *p, unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF], packed[SL_BUCKET_LEN];
    size_t i, n = 0, kl;

    for (i = 0; i < rs->count; i++) {
        const sl_state_view *s = &j->views[i];

        if (!s->has)
            continue;
        kl = rule_key(p, j->rq, &rs->rules[i], false, 0, key);
        sl_bucket_pack(packed, s->x, s->d, j->io[i].keep);
        APPEND(p, j, WANT_OK, "SET %b %b KEEPTTL", key, kl, packed,
               sizeof(packed));
        n++;
    }
    return n;
}

/* Appends WATCH of every key a watched request reads. */
static void append_watch(sl_plain *p, unit *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    const char *argv[1 + 2 * SLUICE_MAX_RULES];
    size_t lens[1 + 2 * SLUICE_MAX_RULES], i;
    char keys[2 * SLUICE_MAX_RULES][KEYBUF];
    int argc = 1;

    argv[0] = "WATCH";
    lens[0] = 5;
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        int64_t k, to_end;

        sl_window_locate(r, j->rq->now_ms, &k, &to_end);
        lens[argc] =
            rule_key(p, j->rq, r, sl_store_is_window(r), k, keys[argc - 1]);
        argv[argc] = keys[argc - 1];
        argc++;
        if (r->algorithm == SLUICE_SLIDING) {
            lens[argc] = rule_key(p, j->rq, r, true, k - 1, keys[argc - 1]);
            argv[argc] = keys[argc - 1];
            argc++;
        }
    }
    expect_reply(p, j, WANT_OK,
                 sl_conn_append(&p->conn, argc, argv, lens, NULL, 0));
}

/* ------------------------------------------------------------ replies */

/* Frees the replies a unit keeps. */
static void release_replies(unit *u)
{
    size_t k;

    if (u->exec != NULL)
        freeReplyObject(u->exec); /* reps point into it */
    else
        for (k = 0; k < BLOCK_MAX; k++)
            if (u->reps[k] != NULL)
                freeReplyObject(u->reps[k]);
    u->exec = NULL;
    memset(u->reps, 0, sizeof(u->reps));
}

/* The first failure of a step wins. A proxy's error can leave the
 * connection half-used: it closes once what was sent is answered. */
static void note_status(sl_plain *p, unit *u, const redisReply *r)
{
    sluice_status st;

    if (u->st != SLUICE_OK)
        return;
    st = sl_conn_reply_status(&p->conn, r, u->msg, sizeof(u->msg));
    if (st == SLUICE_EIO || st == SLUICE_ETIMEOUT)
        sl_conn_doom(&p->conn);
    u->st = st;
}

/* A reply no Redis sends came for unit u, where one of want w was due
 * (what, when it is not a whole reply: "element 2 of EXEC's reply"). The
 * step's first failure gives way: the stream is out of step. */
static void note_bad(sl_plain *p, unit *u, want w, const redisReply *r,
                     const char *what)
{
    char ep[300], got[400];

    if (u->desync)
        return;
    u->desync = true;
    u->st = SLUICE_EPROTO;
    sl_reply_describe(got, sizeof(got), r);
    sl_errf(u->msg, sizeof(u->msg),
            "%s: %s sent %s%s%s where %s was due, which no Redis sends; the "
            "connection is closed, and the requests sent on it end with "
            "this status (their outcome unknown)",
            p->name, sl_conn_endpoint(&p->conn, ep, sizeof(ep)), got,
            what != NULL ? " as " : "", what != NULL ? what : "", want_text(w));
}

/* Checks the reply r to a command of want w: an error reply is the
 * server's (note_status), anything else must fit. */
static void check_reply(sl_plain *p, unit *u, want w, const redisReply *r,
                        const char *what)
{
    if (r->type == REDIS_REPLY_ERROR)
        note_status(p, u, r);
    else if (!reply_fits(w, r))
        note_bad(p, u, w, r, what);
}

/* Checks an EXEC reply's elements against the wants of the commands it
 * ran (wants[1..n], after MULTI). */
static void check_exec(sl_plain *p, unit *u, const redisReply *x)
{
    char what[64];
    size_t k, n = u->expect - 2;

    if (x->elements != n) {
        snprintf(what, sizeof(what), "EXEC's reply to %zu commands", n);
        note_bad(p, u, WANT_EXEC, x, what);
        return;
    }
    for (k = 0; k < n && !u->desync; k++) {
        snprintf(what, sizeof(what), "element %zu of EXEC's reply", k + 1);
        check_reply(p, u, (want)u->wants[k + 1], x->element[k], what);
    }
}

/* A wrapped block's EXEC reply: its elements are the block's replies. */
static void take_exec(sl_plain *p, unit *u)
{
    const redisReply *x = u->exec;
    size_t k;

    if (u->st != SLUICE_OK)
        return;
    if (x->type == REDIS_REPLY_ERROR) {
        note_status(p, u, x);
        return;
    }
    if (x->type != REDIS_REPLY_ARRAY) {
        note_bad(p, u, WANT_ARRAY, x, "EXEC's reply");
        return;
    }
    check_exec(p, u, x);
    for (k = 0; k < u->ncmds && k < x->elements; k++)
        u->reps[k] = x->element[k];
}

/* -------------------------------------------------- order and holding */

static uint32_t key_hash(const void *key, size_t len)
{
    const unsigned char *c = key;
    uint32_t h = 2166136261u; /* FNV-1a */
    size_t k;

    for (k = 0; k < len; k++)
        h = (h ^ c[k]) * 16777619u;
    return h;
}

static bool same_key(const unit *a, const unit *b)
{
    return a->hash == b->hash && a->rq->key_len == b->rq->key_len &&
           memcmp(a->rq->key, b->rq->key, a->rq->key_len) == 0;
}

/* The unit under way on u's key, and the table slot that leads to it. */
static unit **key_slot(sl_plain *p, const unit *u)
{
    unit **at = &p->keys[u->hash % SL_PLAIN_KEY_SLOTS];

    while (*at != NULL && !same_key(*at, u))
        at = &(*at)->hnext;
    return at;
}

static void hold(sl_plain *p, unit *u)
{
    u->held = true;
    u->hold_next = NULL;
    u->hold_prev = p->held_tail;
    if (p->held_tail != NULL)
        p->held_tail->hold_next = u;
    else
        p->held_head = u;
    p->held_tail = u;
}

static void unhold(sl_plain *p, unit *u)
{
    if (u->hold_prev != NULL)
        u->hold_prev->hold_next = u->hold_next;
    else
        p->held_head = u->hold_next;
    if (u->hold_next != NULL)
        u->hold_next->hold_prev = u->hold_prev;
    else
        p->held_tail = u->hold_prev;
    u->held = false;
    u->hold_prev = u->hold_next = NULL;
}

/* ---------------------------------------------------------------- steps */

static void begin(sl_plain *p, unit *u, step s);

static void finish(unit *u, sluice_status st, const char *msg)
{
    sl_engine_answer(u->job, u->i, st, st == SLUICE_OK ? NULL : msg);
}

/* The watched unit lets the connection go; those waiting for it start,
 * oldest first, until one of them WATCHes in turn. */
static void let_go(sl_plain *p, unit *u)
{
    if (p->excl != u)
        return;
    p->excl = NULL;
    if (p->draining)
        return; /* the loop below, further up, goes on */
    p->draining = true;
    while (p->excl == NULL && p->held_head != NULL && !p->eng->closing) {
        unit *h = p->held_head;

        unhold(p, h);
        begin(p, h, h->step);
    }
    p->draining = false;
}

/* UNWATCH's reply, which no request waits for: anything but +OK (or the
 * server's error) puts the stream out of step, and ends the connection. */
static void on_unwatch(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                       sluice_status st, bool sent, const char *msg)
{
    sl_plain *p = (sl_plain *)(void *)((char *)cn - offsetof(sl_plain, conn));
    char ep[300], got[400], why[SL_ERR_LEN];

    (void)job;
    (void)i;
    (void)st;
    (void)sent;
    (void)msg;
    if (r == NULL || r->type == REDIS_REPLY_ERROR || reply_fits(WANT_OK, r))
        return;
    sl_reply_describe(got, sizeof(got), r);
    sl_errf(why, sizeof(why),
            "%s: %s sent %s where +OK was due (UNWATCH), which no Redis "
            "sends; the connection is closed, and the requests sent on it "
            "end with this status (their outcome unknown)",
            p->name, sl_conn_endpoint(cn, ep, sizeof(ep)), got);
    sl_conn_abort(cn, SLUICE_EPROTO, why);
}

/* Ends a WATCH that will not be followed by EXEC. */
static void unwatch(sl_plain *p, unit *u)
{
    sluice_status st = sl_conn_appendf(&p->conn, NULL, 0, "UNWATCH");

    if (st == SLUICE_OK)
        st = sl_conn_expect(&p->conn, on_unwatch, NULL, 0);
    if (st != SLUICE_OK)
        sl_conn_doom(&p->conn); /* the WATCH ends with the connection */
    let_go(p, u);
}

/* Queues the commands of step s, or holds the unit while another's WATCH
 * holds the connection. */
static void begin(sl_plain *p, unit *u, step s)
{
    u->step = s;
    /* A request that waited past its deadline (behind its key, or for the
     * connection) is not started: the engine answers it. */
    if ((s == STEP_BLOCK || s == STEP_WATCH) &&
        sl_mono_ms() >= u->job->deadline)
        return;
    if (p->excl != NULL && p->excl != u) {
        hold(p, u);
        return;
    }
    u->expect = u->got = 0;
    u->broken = u->sent = u->exec_nil = false;
    u->st = SLUICE_OK;
    u->msg[0] = '\0';
    switch (s) {
    case STEP_BLOCK:
        u->wrapped = p->multi && (u->mode == JOB_OPTIMISTIC ||
                                  u->mode == JOB_RULES || u->mode == JOB_LEASE);
        if (u->wrapped)
            APPEND(p, u, WANT_OK, "MULTI");
        u->ncmds = append_block(p, u);
        if (u->wrapped)
            APPEND(p, u, WANT_EXEC, "EXEC");
        break;
    case STEP_FOLLOW:
        if ((u->mode == JOB_LEASE ? append_lease_follow(p, u)
             : u->all             ? append_restamp(p, u)
                                  : append_compensation(p, u)) == 0 &&
            !u->broken) {
            finish(u, SLUICE_OK, NULL);
            return;
        }
        break;
    case STEP_WATCH:
        p->excl = u;
        append_watch(p, u);
        u->mode = JOB_READ;
        u->ncmds = append_block(p, u);
        break;
    case STEP_EXEC:
        APPEND(p, u, WANT_OK, "MULTI");
        if (u->rq->op == SL_OP_REFUND)
            append_refund_writes(p, u);
        else
            append_writes(p, u);
        APPEND(p, u, WANT_EXEC, "EXEC");
        let_go(p, u); /* EXEC ends the WATCH, whatever it answers */
        break;
    }
    if (u->got == u->expect) { /* nothing could be queued */
        u->broken = true;
        finish(u, u->st, u->msg);
    }
}

/* A reply no Redis sends came for u (u->msg says which): the stream is
 * out of step, so every later reply on it may belong to another command.
 * The connection ends; every request written on it ends with
 * SLUICE_EPROTO (its outcome unknown, never resent), and what was only
 * queued goes on the next connection. */
static void out_of_step(sl_plain *p, unit *u)
{
    char msg[SL_ERR_LEN];

    u->desync = true;
    sl_errf(msg, sizeof(msg), "%s", u->msg);
    sl_conn_abort(&p->conn, SLUICE_EPROTO, msg);
}

/* Ends u with the protocol error found in its replies, once they are all
 * in (u awaits nothing on the connection). */
static void end_out_of_step(sl_plain *p, unit *u)
{
    out_of_step(p, u);
    let_go(p, u); /* its WATCH, if any, went with the connection */
    finish(u, SLUICE_EPROTO, u->msg);
}

/* The connection failed under a step. A request none of whose commands
 * went out, whose step changed nothing yet, goes on the next connection
 * (unless the failure is the connect's own, or its deadline passed);
 * otherwise its outcome is unknown. */
static void step_failed(sl_plain *p, unit *u)
{
    bool fresh = u->step == STEP_BLOCK || u->step == STEP_WATCH;

    let_go(p, u); /* its WATCH, if any, went with the connection */
    if (!u->sent && fresh && u->st != SLUICE_ECONNECT &&
        u->st != SLUICE_ENOMEM && !p->eng->closing && !u->job->expired) {
        release_replies(u);
        if (u->watched)
            u->mode = JOB_READ;
        begin(p, u, u->step);
        return;
    }
    finish(u, u->st, u->msg);
}

/* Decides u on its views: an acquire at most decides the cost it grants
 * (or the denial of 1); the cost charged is kept. */
static bool decide(unit *u)
{
    const sl_request *rq = u->rq;
    int64_t cost = rq->cost;

    if (rq->op == SL_OP_AT_MOST) {
        *rq->granted = sl_grant(rq->rules, u->views, rq->now_ms, rq->cost);
        cost = *rq->granted > 0 ? *rq->granted : 1;
    }
    u->charged = cost;
    return sl_decide(rq->rules, u->views, rq->now_ms, cost, u->v, u->ch);
}

/* The block's replies are in: decide. */
static void block_done(sl_plain *p, unit *u)
{
    sluice_result *out = &u->job->out[u->i];
    const sl_request *rq = u->rq;

    if (u->wrapped)
        take_exec(p, u);
    if (u->st == SLUICE_OK && u->mode == JOB_RULES)
        u->st = parse_rules_reply(p, u);
    else if (u->st == SLUICE_OK && u->mode == JOB_LEASE)
        u->st = parse_lease(p, u);
    else if (u->st == SLUICE_OK && u->mode != JOB_RESET)
        u->st = parse_views(p, u, u->reps, u->msg, sizeof(u->msg));
    release_replies(u);
    if (u->st == SLUICE_EPROTO) {
        end_out_of_step(p, u);
        return;
    }
    if (u->mode == JOB_RULES) {
        finish(u, u->st, u->msg);
        return;
    }
    if (u->mode == JOB_LEASE) {
        if (u->st != SLUICE_OK || u->rq->op == SL_OP_LEASE_RELEASE)
            finish(u, u->st, u->msg);
        else
            begin(p, u, STEP_FOLLOW);
        return;
    }
    if (u->st != SLUICE_OK || u->mode == JOB_RESET) {
        finish(u, u->st, u->msg);
        return;
    }
    u->all = decide(u);
    sl_combine(rq->rules, u->v, out);
    if (u->mode == JOB_READ) {
        finish(u, SLUICE_OK, NULL);
        return;
    }
    begin(p, u, STEP_FOLLOW);
}

/* A watched acquire's reads are in: decide; write only if admitted. */
static void watch_done(sl_plain *p, unit *u)
{
    const sl_request *rq = u->rq;

    if (u->st == SLUICE_OK)
        u->st = parse_views(p, u, u->reps, u->msg, sizeof(u->msg));
    release_replies(u);
    if (u->st == SLUICE_EPROTO) {
        end_out_of_step(p, u);
        return;
    }
    if (u->st != SLUICE_OK) {
        unwatch(p, u);
        finish(u, u->st, u->msg);
        return;
    }
    if (rq->op == SL_OP_REFUND) {
        /* Answered with the state after it. */
        refund_views(u);
        sl_describe(rq->rules, u->views, rq->now_ms, &u->job->out[u->i]);
        begin(p, u, STEP_EXEC);
        return;
    }
    u->all = decide(u);
    sl_combine(rq->rules, u->v, &u->job->out[u->i]);
    if (!u->all) {
        unwatch(p, u);
        finish(u, SLUICE_OK, NULL);
        return;
    }
    begin(p, u, STEP_EXEC);
}

/* EXEC answered: the writes are made, or a concurrent change aborted them
 * (nil) and the request is decided again. */
static void exec_done(sl_plain *p, unit *u)
{
    if (u->st != SLUICE_OK || !u->exec_nil) {
        finish(u, u->st, u->msg);
        return;
    }
    if (++u->attempt < WATCH_RETRIES) {
        u->mode = JOB_READ;
        begin(p, u, STEP_WATCH);
        return;
    }
    sl_errf(u->msg, sizeof(u->msg),
            "%s: the keys of this request changed under each of %d "
            "attempts; the key is too hot for WATCH (the Lua backend decides "
            "in one step)",
            p->name, WATCH_RETRIES);
    finish(u, SLUICE_ECONTENDED, u->msg);
}

/* Keeps reply k of u's block. */
static void keep_rep(sl_conn *cn, unit *u, size_t k, redisReply *r)
{
    if (k < BLOCK_MAX && u->reps[k] == NULL) {
        u->reps[k] = r;
        sl_conn_keep_reply(cn);
    }
}

static void on_reply(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg)
{
    sl_plain *p = job->eng->state;
    unit *u = &((unit *)job->data)[i];
    size_t k = u->got++;
    want w = k < STEP_MAX ? (want)u->wants[k] : WANT_OK;
    bool exec = k + 1 == u->expect &&
                (u->step == STEP_EXEC || (u->step == STEP_BLOCK && u->wrapped));

    if (r == NULL) {
        if (!u->broken && !u->desync) {
            u->broken = true;
            u->st = st;
            sl_errf(u->msg, sizeof(u->msg), "%s", msg != NULL ? msg : "");
        }
        u->broken = true;
        u->sent = u->sent || sent;
    } else if (!u->broken && !u->desync) {
        /* Inside MULTI, each command is answered +QUEUED, and EXEC
         * answers for them all. */
        if (k > 0 && !exec &&
            (u->step == STEP_EXEC || (u->step == STEP_BLOCK && u->wrapped)))
            w = WANT_QUEUED;
        switch (u->step) {
        case STEP_BLOCK:
            if (!u->wrapped) {
                check_reply(p, u, w, r, NULL);
                keep_rep(cn, u, k, r);
            } else if (exec && r->type == REDIS_REPLY_ARRAY) {
                u->exec = r; /* checked by take_exec */
                sl_conn_keep_reply(cn);
            } else if (exec) {
                check_reply(p, u, WANT_ARRAY, r, "EXEC's reply");
            } else {
                check_reply(p, u, w, r, NULL);
            }
            break;
        case STEP_WATCH:
            check_reply(p, u, w, r, NULL);
            if (k > 0)
                keep_rep(cn, u, k - 1, r);
            break;
        case STEP_FOLLOW:
            check_reply(p, u, w, r, NULL);
            break;
        case STEP_EXEC:
            if (exec && r->type == REDIS_REPLY_NIL)
                u->exec_nil = true;
            else if (exec && r->type == REDIS_REPLY_ARRAY)
                check_exec(p, u, r);
            else if (exec)
                check_reply(p, u, WANT_EXEC, r, "EXEC's reply");
            else
                check_reply(p, u, w, r, NULL);
            break;
        }
        if (u->desync) {
            /* End the connection now: the replies still to come on it
             * are out of step. u's own come back failed, through this
             * function, which ends u once they are all in. */
            bool last = u->got == u->expect;

            out_of_step(p, u);
            if (!last)
                return;
        }
    }
    if (u->got < u->expect)
        return;
    if (u->desync) {
        let_go(p, u);
        finish(u, SLUICE_EPROTO, u->msg);
        return;
    }
    if (u->broken) {
        step_failed(p, u);
        return;
    }
    switch (u->step) {
    case STEP_BLOCK:
        block_done(p, u);
        break;
    case STEP_WATCH:
        watch_done(p, u);
        break;
    case STEP_FOLLOW:
        finish(u, u->st, u->msg);
        break;
    case STEP_EXEC:
        exec_done(p, u);
        break;
    }
}

/* ---------------------------------------------------------- the engine */

/* Sorts a request: false when it is refused outright. */
static bool classify(sl_plain *p, unit *j, char *err, size_t err_len)
{
    const sl_request *rq = j->rq;

    if (rq->op == SL_OP_RESET) {
        j->mode = JOB_RESET;
    } else if (rq->op == SL_OP_RULES_GET || rq->op == SL_OP_RULES_PUT ||
               rq->op == SL_OP_RULES_DEL) {
        j->mode = JOB_RULES;
    } else if (rq->op == SL_OP_LEASE_ACQUIRE || rq->op == SL_OP_LEASE_RELEASE) {
        j->mode = JOB_LEASE;
    } else if (rq->op == SL_OP_REFUND && !p->multi) {
        sl_errf(err, err_len,
                "%s: a refund needs an atomic read-modify-write that a "
                "proxy's plain commands cannot give; use redis:// through "
                "the proxy (the Lua backend, one EVAL per decision)",
                p->name);
        return false;
    } else if (rq->op == SL_OP_REFUND && !all_buckets(rq->rules)) {
        /* Windows and logs are charged here before they are judged: a
         * refund could give back a charge another client is about to
         * take back, and leave the key counting less than was admitted. */
        sl_errf(err, err_len,
                "%s: a refund of fixed, sliding or log rules could give back "
                "a charge another client has in flight (this backend charges "
                "them before judging); use redis:// (the Lua backend) for "
                "refunds; token and gcra refund here",
                p->name);
        return false;
    } else if (rq->op == SL_OP_REFUND) {
        j->watched = true;
        j->mode = JOB_READ;
    } else if (has_bucket(rq->rules) && !p->multi) {
        sl_errf(err, err_len,
                "%s: token and gcra need an atomic "
                "read-modify-write that a proxy's plain commands cannot "
                "give; use redis:// through the proxy (the Lua backend, one "
                "EVAL per decision)",
                p->name);
        return false;
    } else if (rq->op == SL_OP_PEEK) {
        j->mode = JOB_READ;
    } else if (has_bucket(rq->rules)) {
        j->watched = true;
        j->mode = JOB_READ;
    } else {
        j->mode = JOB_OPTIMISTIC;
    }
    return true;
}

void sl_plain_start(void *state, sl_job *job)
{
    sl_plain *p = state;
    unit *units = sl_calloc(job->n, sizeof(*units));
    char err[SL_ERR_LEN];
    size_t i;

    if (units == NULL) {
        sl_errf(err, sizeof(err), "%s: out of memory for %zu requests", p->name,
                job->n);
        for (i = 0; i < job->n && !job->finished; i++)
            sl_engine_answer(job, i, SLUICE_ENOMEM, err);
        return;
    }
    job->data = units;
    /* A job that starts on a connection still to open spends its own
     * budget on the connect, as one that waits behind others (its key, a
     * WATCH) spends it there. */
    for (i = 0; i < job->n; i++) {
        units[i].rq = &job->reqs[i];
        units[i].job = job;
        units[i].i = i;
        memset(&job->out[i], 0, sizeof(job->out[i]));
    }
    /* A request on a key already under way waits behind it. */
    for (i = 0; i < job->n && !job->finished; i++) {
        unit *u = &units[i], **at;

        if (!classify(p, u, err, sizeof(err))) {
            sl_engine_answer(job, i, SLUICE_EUNSUPPORTED, err);
            continue;
        }
        u->hash = key_hash(u->rq->key, u->rq->key_len);
        u->keyed = true;
        at = key_slot(p, u);
        if (*at != NULL) {
            u->before = (*at)->qtail;
            u->before->after = u;
            (*at)->qtail = u;
            continue;
        }
        u->qtail = u;
        *at = u;
        begin(p, u, u->watched ? STEP_WATCH : STEP_BLOCK);
    }
}

/* A request answered (by its steps, or by the engine at its deadline or
 * the handle's close): what it kept goes, the connection is let go if it
 * held it, and the next request on its key starts. */
void sl_plain_answered(void *state, sl_job *job, size_t i)
{
    sl_plain *p = state;
    unit *u, **at, *next;
    size_t k;

    if (job->data == NULL)
        return;
    u = &((unit *)job->data)[i];
    release_replies(u);
    for (k = 0; k < SLUICE_MAX_RULES; k++) {
        sl_free(u->io[k].entries);
        u->io[k].entries = NULL;
        u->io[k].cap = 0;
    }
    if (u->held)
        unhold(p, u);
    let_go(p, u);
    if (!u->keyed)
        return;
    u->keyed = false;
    if (u->before != NULL) { /* it waited behind another */
        u->before->after = u->after;
        if (u->after != NULL)
            u->after->before = u->before;
        else
            (*key_slot(p, u))->qtail = u->before;
        return;
    }
    at = key_slot(p, u);
    next = u->after;
    *at = u->hnext;
    if (next == NULL)
        return;
    next->before = NULL;
    next->qtail = u->qtail;
    next->hnext = *at;
    *at = next;
    if (!p->eng->closing)
        begin(p, next, next->watched ? STEP_WATCH : STEP_BLOCK);
}

void sl_plain_resume(void *state, sl_job *job)
{
    (void)state;
    (void)job;
}

/* The job's deadline passed: the connection carrying it is stuck (Redis
 * answers in order), so it closes, failing what it carried. */
void sl_plain_expire(void *state, sl_job *job)
{
    sl_plain *p = state;
    char msg[SL_ERR_LEN];

    sl_errf(msg, sizeof(msg),
            "%s: %s:%d did not answer within %lld ms (timeout_ms=%u); the "
            "outcome is unknown, and the next call reconnects",
            p->name, p->url->ep.host, p->url->ep.port,
            (long long)sl_engine_waited(job), p->url->opts.command_timeout_ms);
    sl_conn_expire(&p->conn, job, msg);
}

sluice_status sl_plain_decide(void *state, const sl_request *reqs, size_t n,
                              sluice_result *out, char *err, size_t err_len)
{
    sl_plain *p = state;

    return sl_engine_decide(p->eng, reqs, n, out, err, err_len);
}

sluice_status sl_plain_open(const sl_url *url, bool multi, sl_engine *eng,
                            void **state, char *err, size_t err_len)
{
    sl_plain *p;
    sluice_status st;
    const char *name = multi ? "multi" : "twemproxy";

    if (url->opts.server_clock) {
        sl_errf(err, err_len,
                "%s: clock=server needs TIME inside a script; "
                "use redis:// (the Lua backend) for the server's clock",
                name);
        return SLUICE_EUNSUPPORTED;
    }
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        sl_errf(err, err_len, "%s: out of memory", name);
        return SLUICE_ENOMEM;
    }
    p->url = url;
    p->eng = eng;
    p->name = name;
    p->multi = multi;
    p->nonce = member_seed(p);
    sl_conn_init(&p->conn, &url->ep, &url->opts, name, eng);
    /* A server that is down never fails the open (as evalsha_open). */
    st = sl_conn_ensure(&p->conn, err, err_len);
    if (st == SLUICE_ENOMEM) {
        sl_conn_close(&p->conn);
        sl_free(p);
        return st;
    }
    *state = p;
    return SLUICE_OK;
}

void sl_plain_close(void *state)
{
    sl_plain *p = state;

    if (p == NULL)
        return;
    sl_conn_close(&p->conn);
    sl_free(p);
}

uint64_t sl_plain_round_trips(void *state)
{
    return ((sl_plain *)state)->conn.round_trips;
}

/* The number of replies of one request's block (see append_block). */
static size_t block_replies(const sl_request *rq, bool read_mode)
{
    size_t i, n = 0;

    for (i = 0; i < rq->rules->count; i++) {
        switch (rq->rules->rules[i].algorithm) {
        case SLUICE_FIXED:
            n += read_mode ? 1 : 3;
            break;
        case SLUICE_SLIDING:
            n += read_mode ? 2 : 4;
            break;
        case SLUICE_LOG:
            n += read_mode ? 1 : 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            n += 1; /* GET, read mode only */
            break;
        }
    }
    return n;
}

sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len)
{
    static const sl_url url = {.prefix = "sluice:"};
    sl_plain p = {.url = &url, .name = "decode"};
    unit *j;
    sluice_status st;
    size_t i;

    if (!read_mode && has_bucket(rq->rules)) {
        sl_errf(err, err_len, "decode: buckets are never charged blindly");
        return SLUICE_EINVAL;
    }
    if (n != block_replies(rq, read_mode)) {
        sl_errf(err, err_len, "decode: %zu replies for a block of %zu", n,
                block_replies(rq, read_mode));
        return SLUICE_EINVAL;
    }
    if ((j = sl_calloc(1, sizeof(*j))) == NULL)
        return SLUICE_ENOMEM;
    j->rq = rq;
    j->mode = read_mode ? JOB_READ : JOB_OPTIMISTIC;
    j->ncmds = n;
    if (!read_mode)
        for (i = 0; i < rq->rules->count; i++)
            snprintf(j->io[i].member, sizeof(j->io[i].member), "%lld:%lld:0",
                     (long long)rq->now_ms, (long long)rq->cost);
    st = parse_views(&p, j, reps, err, err_len);
    if (st == SLUICE_OK) {
        sluice_result out;

        j->all =
            sl_decide(rq->rules, j->views, rq->now_ms, rq->cost, j->v, j->ch);
        sl_combine(rq->rules, j->v, &out);
    }
    for (i = 0; i < SLUICE_MAX_RULES; i++)
        sl_free(j->io[i].entries);
    sl_free(j);
    return st;
}
