/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_reply.h - the lowest layer of the plain family: the backend's
 * state, a request under way (its unit), the reply each command must get
 * (its want), the queueing of a command with its want, and the reply
 * cursor that reads a block's replies in the order they were asked for
 * (plain_reply.c). The tables above it (plain_ops.h, plain_lease.h) and
 * the steps (plain.c) read these. */
#ifndef SL_PLAIN_REPLY_H
#define SL_PLAIN_REPLY_H

#include "algo.h"
#include "backend.h"
#include "backends/redis.h"

#define SL_PLAIN_KEY_SLOTS 1024 /* the table of keys under way */

struct sl_unit;

typedef struct sl_plain {
    sl_conn conn;
    sl_engine *eng;
    const sl_url *url;
    const char *name; /* "multi" or "twemproxy", for messages */
    bool multi;       /* MULTI/EXEC and WATCH available */
    uint64_t nonce;   /* makes log members unique */
    /* Per-key order: the request under way on each key; the requests
     * after it on the same key wait in its queue. */
    struct sl_unit *keys[SL_PLAIN_KEY_SLOTS];
    /* A watched request holds the connection from its WATCH to its EXEC
     * (or UNWATCH): others' commands wait meanwhile, oldest first. */
    struct sl_unit *excl;
    struct sl_unit *held_head, *held_tail;
    bool draining;
    /* The steps' callback for every reply (plain.c): the commands queued
     * below answer to it. */
    sl_reply_fn on_reply;
} sl_plain;

#define KEYBUF SL_KEY_BUF

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
    bool dry;     /* sl_plain_decode: commands are counted, never sent */
    step step;    /* the step under way, or waiting for the connection */
    int attempt;  /* of a watched acquire */
    size_t ncmds; /* commands of its block, MULTI/EXEC aside */
    size_t first; /* the want of the block's first command (after MULTI
                   * or WATCH) */
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
    /* A forced charge made at once (twemproxy://): SLUICE_OK when kept,
     * else why it was taken back (a rule's ceiling, or out of memory). */
    sluice_status forced;
    /* The key's queue: the unit under way on the key is in the table
     * (hnext), with the last unit waiting behind it (qtail). */
    bool keyed, held;
    uint32_t hash;
    unit *hnext, *qtail, *before, *after;
    unit *hold_prev, *hold_next; /* waiting for the connection */
};

/* The command just queued (st, the queueing's status) answers to unit u
 * with a reply of want w, through p->on_reply. */
void sl_plain_expect(sl_plain *p, unit *u, want w, sluice_status st);

/* Queues one command of unit u; hiredis formats it. A dry unit records
 * its want and sends nothing. */
#define APPEND(p, u, w, ...)        \
    sl_plain_expect((p), (u), (w),  \
                    (u)->dry        \
                        ? SLUICE_OK \
                        : sl_conn_appendf(&(p)->conn, NULL, 0, __VA_ARGS__))

/* The prefix of u's keys. */
static inline const char *sl_plain_prefix(const sl_plain *p, const unit *u)
{
    return u->rq->prefix != NULL ? u->rq->prefix : p->url->cfg.prefix;
}

/* ------------------------------------------------------ the reply cursor */

/* The replies of one block, read in the order their commands were
 * queued: each read names the want its command was queued with (an
 * assert: parse reads what emit asked, by construction) and the range it
 * accepts; anything else marks the cursor bad, and the block is
 * SLUICE_EPROTO. */
typedef struct sl_cursor {
    redisReply **reps;
    const unsigned char *wants; /* the want each was queued with */
    size_t n, at;
    bool bad;
} sl_cursor;

/* plain_reply.c: frees the replies u keeps; checks reply r to a command
 * of want w as it comes (what names it when it is not a whole reply), an
 * EXEC reply's elements, and takes a wrapped block's replies from its
 * EXEC reply. */
void sl_plain_reply_release(unit *u);
void sl_plain_reply_check(sl_plain *p, unit *u, want w, const redisReply *r,
                          const char *what);
void sl_plain_reply_check_exec(sl_plain *p, unit *u, const redisReply *x);
void sl_plain_reply_take_exec(sl_plain *p, unit *u);

/* The cursor over unit u's block (its wants after MULTI or WATCH). */
sl_cursor sl_plain_cursor(unit *u, redisReply **reps);
/* The next reply, of want w; NULL (and bad) when it does not fit. */
const redisReply *sl_cursor_next(sl_cursor *c, want w);
/* The next reply, of the want it was queued with: one the op does not
 * read (false when it does not fit). */
bool sl_cursor_skip(sl_cursor *c);
/* The next reply, an integer of want w within lo..hi. */
bool sl_cursor_int(sl_cursor *c, want w, int64_t lo, int64_t hi, int64_t *v);
/* The next reply, a GET of a count: nil is 0, else a whole decimal
 * within lo..hi. */
bool sl_cursor_count(sl_cursor *c, int64_t lo, int64_t hi, int64_t *v);
/* Whether every reply was read, none bad. */
bool sl_cursor_done(const sl_cursor *c);

/* Whether r is what Redis answers to a command of want w, and how a
 * message names w. */
bool sl_plain_fits(want w, const redisReply *r);
const char *sl_plain_want_text(want w);
/* A whole decimal int64, as Redis writes one. */
bool sl_plain_i64(const char *s, size_t len, int64_t *v);

#endif /* SL_PLAIN_REPLY_H */
