/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.c - the engine side of the plain family (redis+multi:// and
 * twemproxy://): decides with plain commands, no scripts, EXPIRE options
 * or TIME. Windows and logs are charged optimistically (the charge is
 * made, then judged, and taken back on a denial); buckets need an atomic
 * read-modify-write, which only WATCH and MULTI/EXEC give. What each step
 * sends and how its replies are read is in the tables of plain_ops.c
 * (rules' state) and plain_lease.c (leases, stored rules); this file runs
 * the steps.
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
#include "backends/plain_lease.h"
#include "backends/plain_ops.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

#define WATCH_RETRIES 16

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
    if (r == NULL || r->type == REDIS_REPLY_ERROR || sl_plain_fits(WANT_OK, r))
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

/* Queues the commands of u's block: a reset's DEL, a lease's or stored
 * rules' op, or the reads or charge of its rules. */
static size_t block(sl_plain *p, unit *u)
{
    if (u->mode == JOB_RESET) {
        sl_plain_expect(p, u, WANT_COUNT,
                        sl_conn_append_reset(&p->conn, sl_plain_prefix(p, u),
                                             u->rq, NULL, 0));
        return 1;
    }
    if (u->mode == JOB_RULES || u->mode == JOB_LEASE)
        return sl_plain_lease_block(p, u);
    return sl_plain_ops_block(p, u);
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
        u->first = u->expect;
        u->ncmds = block(p, u);
        if (u->wrapped)
            APPEND(p, u, WANT_EXEC, "EXEC");
        break;
    case STEP_FOLLOW:
        if ((u->mode == JOB_LEASE || u->mode == JOB_RULES
                 ? sl_plain_lease_follow(p, u)
                 : sl_plain_ops_follow(p, u)) == 0 &&
            !u->broken) {
            finish(u, SLUICE_OK, NULL);
            return;
        }
        break;
    case STEP_WATCH:
        p->excl = u;
        sl_plain_ops_watch(p, u);
        u->mode = JOB_READ;
        u->first = u->expect;
        u->ncmds = block(p, u);
        break;
    case STEP_EXEC:
        APPEND(p, u, WANT_OK, "MULTI");
        if (u->rq->op == SL_OP_REFUND)
            sl_plain_ops_refund_writes(p, u);
        else if (u->rq->op == SL_OP_FORCE)
            sl_plain_ops_force_writes(p, u);
        else
            sl_plain_ops_writes(p, u);
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
        sl_plain_reply_release(u);
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
    int64_t cost = rq->decide.cost;

    if (rq->op == SL_OP_AT_MOST) {
        *rq->decide.granted =
            sl_grant(rq->decide.rules, u->views, rq->now_ms, rq->decide.cost);
        cost = *rq->decide.granted > 0 ? *rq->decide.granted : 1;
    }
    u->charged = cost;
    return sl_decide(rq->decide.rules, u->views, rq->now_ms, cost, u->v, u->ch);
}

/* The block's replies are in: decide. */
static void block_done(sl_plain *p, unit *u)
{
    sluice_result *out = &u->job->out[u->i];
    const sl_request *rq = u->rq;

    if (u->wrapped)
        sl_plain_reply_take_exec(p, u);
    if (u->st == SLUICE_OK && (u->mode == JOB_RULES || u->mode == JOB_LEASE))
        u->st = sl_plain_lease_parse(p, u);
    else if (u->st == SLUICE_OK && u->mode != JOB_RESET)
        u->st = sl_plain_ops_parse(p, u, u->reps, u->msg, sizeof(u->msg));
    sl_plain_reply_release(u);
    if (u->st == SLUICE_EPROTO) {
        end_out_of_step(p, u);
        return;
    }
    if (u->mode == JOB_RULES) {
        if (u->st == SLUICE_OK && rq->op == SL_OP_OVER_SET && !u->all)
            begin(p, u, STEP_FOLLOW); /* no rules: the set taken back */
        else
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
    if (rq->op == SL_OP_FORCE) {
        /* Charged at once, unjudged (twemproxy://): answered with the
         * state after it, or taken back whole (the follow-up). */
        u->forced = sl_plain_ops_force_judge(u);
        u->all = u->forced == SLUICE_OK;
        u->charged = rq->decide.cost;
        if (u->all)
            sl_describe(rq->decide.rules, u->views, rq->now_ms, out);
        begin(p, u, STEP_FOLLOW);
        return;
    }
    u->all = decide(u);
    sl_combine(rq->decide.rules, u->v, out);
    sl_note_violated(rq, rq->decide.rules, u->v);
    if (u->mode == JOB_READ) {
        finish(u, SLUICE_OK, NULL);
        return;
    }
    begin(p, u, STEP_FOLLOW);
}

/* A forced charge taken back (twemproxy://): why. */
static void forced_back(sl_plain *p, unit *u)
{
    if (u->forced == SLUICE_ENOMEM)
        sl_errf(u->msg, sizeof(u->msg), "%s: out of memory", p->name);
    else
        sl_errf(u->msg, sizeof(u->msg),
                "%s: a settle's excess would pass a rule's ceiling, which "
                "a proxy's plain commands cannot charge up to exactly (it "
                "was taken back); use redis:// through the proxy (the Lua "
                "backend, one EVAL per decision)",
                p->name);
    finish(u, u->forced, u->msg);
}

/* A watched acquire's reads are in: decide; write only if admitted. */
static void watch_done(sl_plain *p, unit *u)
{
    const sl_request *rq = u->rq;

    if (u->st == SLUICE_OK)
        u->st = sl_plain_ops_parse(p, u, u->reps, u->msg, sizeof(u->msg));
    sl_plain_reply_release(u);
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
        sl_plain_ops_refund_views(u);
        sl_describe(rq->decide.rules, u->views, rq->now_ms, &u->job->out[u->i]);
        begin(p, u, STEP_EXEC);
        return;
    }
    if (rq->op == SL_OP_FORCE) {
        /* Charged unjudged, answered with the state after it. */
        if (!sl_plain_ops_force_views(u)) {
            unwatch(p, u);
            sl_errf(u->msg, sizeof(u->msg), "%s: out of memory", p->name);
            finish(u, SLUICE_ENOMEM, u->msg);
            return;
        }
        sl_describe(rq->decide.rules, u->views, rq->now_ms, &u->job->out[u->i]);
        begin(p, u, STEP_EXEC);
        return;
    }
    u->all = decide(u);
    sl_combine(rq->decide.rules, u->v, &u->job->out[u->i]);
    sl_note_violated(rq, rq->decide.rules, u->v);
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
                sl_plain_reply_check(p, u, w, r, NULL);
                keep_rep(cn, u, k, r);
            } else if (exec && r->type == REDIS_REPLY_ARRAY) {
                u->exec = r; /* checked by sl_plain_reply_take_exec */
                sl_conn_keep_reply(cn);
            } else if (exec) {
                sl_plain_reply_check(p, u, WANT_ARRAY, r, "EXEC's reply");
            } else {
                sl_plain_reply_check(p, u, w, r, NULL);
            }
            break;
        case STEP_WATCH:
            sl_plain_reply_check(p, u, w, r, NULL);
            if (k > 0)
                keep_rep(cn, u, k - 1, r);
            break;
        case STEP_FOLLOW:
            sl_plain_reply_check(p, u, w, r, NULL);
            break;
        case STEP_EXEC:
            if (exec && r->type == REDIS_REPLY_NIL)
                u->exec_nil = true;
            else if (exec && r->type == REDIS_REPLY_ARRAY)
                sl_plain_reply_check_exec(p, u, r);
            else if (exec)
                sl_plain_reply_check(p, u, WANT_EXEC, r, "EXEC's reply");
            else
                sl_plain_reply_check(p, u, w, r, NULL);
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
        if (u->st == SLUICE_OK && u->forced != SLUICE_OK)
            forced_back(p, u);
        else
            finish(u, u->st, u->msg);
        break;
    case STEP_EXEC:
        exec_done(p, u);
        break;
    }
}

/* ---------------------------------------------------------- the engine */

/* Sorts a request. What the backend refuses (a block, a refund of a
 * window, and on twemproxy:// token, gcra and refunds) never comes here:
 * the engine answered it from its caps (SL_CAPS_MULTI, SL_CAPS_TWEMPROXY
 * in caps.h). */
static void classify(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;

    if (rq->op == SL_OP_RESET) {
        j->mode = JOB_RESET;
    } else if (rq->op == SL_OP_RULES_GET || rq->op == SL_OP_RULES_PUT ||
               rq->op == SL_OP_RULES_DEL) {
        j->mode = JOB_RULES;
    } else if (rq->op == SL_OP_LEASE_ACQUIRE || rq->op == SL_OP_LEASE_RELEASE) {
        j->mode = JOB_LEASE;
    } else if (rq->op == SL_OP_OVER_SET || rq->op == SL_OP_OVER_DEL ||
               rq->op == SL_OP_OVER_LIST) {
        j->mode = JOB_RULES;
    } else if (rq->op == SL_OP_FORCE && !p->multi) {
        /* Windows and logs: charged at once, as an acquire is, and kept
         * unless a rule would pass its ceiling. */
        j->mode = JOB_OPTIMISTIC;
    } else if (rq->op == SL_OP_FORCE || rq->op == SL_OP_REFUND) {
        /* Read under WATCH, written in MULTI/EXEC: an optimistic charge
         * of another client in between aborts it, and it is made again.
         * (A refund here is of token and gcra only.) */
        j->watched = true;
        j->mode = JOB_READ;
    } else if (rq->op == SL_OP_PEEK) {
        j->mode = JOB_READ;
    } else if (sl_ruleset_has(rq->decide.rules, SL_FAMILY_BUCKET)) {
        j->watched = true;
        j->mode = JOB_READ;
    } else {
        j->mode = JOB_OPTIMISTIC;
    }
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
        if (!(job->marks[i] & SL_MARK_ANSWERED)) /* not refused already */
            memset(&job->out[i], 0, sizeof(job->out[i]));
    }
    /* A request on a key already under way waits behind it. */
    for (i = 0; i < job->n && !job->finished; i++) {
        unit *u = &units[i], **at;

        if (job->marks[i] & SL_MARK_ANSWERED) /* refused (caps.h) */
            continue;
        classify(p, u);
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
    sl_plain_reply_release(u);
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

/* Opens the backend (multi: redis+multi://, else twemproxy://) on eng;
 * a server that is down does not fail it. */
sluice_status sl_plain_open(const sl_url *url, bool multi, sl_engine *eng,
                            void **state, char *err, size_t err_len)
{
    sl_plain *p;
    sluice_status st;
    const char *name = multi ? "multi" : "twemproxy";

    /* (clock=server was refused by the handle's open: SL_CAPS_MULTI.) */
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        sl_errf(err, err_len, "%s: out of memory", name);
        return SLUICE_ENOMEM;
    }
    p->url = url;
    p->eng = eng;
    p->name = name;
    p->multi = multi;
    p->nonce = sl_plain_ops_seed(p);
    sl_conn_init(&p->conn, &url->ep, &url->cfg, name, eng);
    if (url->sentinel && sl_conn_init_sentinels(&p->conn, url, eng)) {
        sl_conn_close(&p->conn);
        sl_free(p);
        sl_errf(err, err_len, "%s: out of memory", name);
        return SLUICE_ENOMEM;
    }
    p->on_reply = on_reply;
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
