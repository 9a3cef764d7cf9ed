/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_reply.c - the plain family's replies: each checked against the
 * want its command was queued with as it comes (a reply no Redis sends is
 * SLUICE_EPROTO and puts the connection out of step; an error reply is
 * the server's status), and the reply cursor through which the tables of
 * plain_ops.c and plain_lease.c read a block's replies in the order they
 * were asked for. */
#include "backends/plain_reply.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* The command just queued (st, the queueing's status) answers to unit u,
 * through the steps' callback.
 * One that could not be queued breaks the step; the connection then
 * writes nothing more (a MULTI cut short must not go out), and what it
 * carried goes on the next. */
void sl_plain_expect(sl_plain *p, unit *u, want w, sluice_status st)
{
    if (st == SLUICE_OK && u->expect >= STEP_MAX)
        st = SLUICE_ENOMEM; /* cannot happen: STEP_MAX bounds every step */
    if (st == SLUICE_OK && u->dry) {
        u->wants[u->expect++] = (unsigned char)w;
        return;
    }
    if (st == SLUICE_OK)
        st = sl_conn_expect(&p->conn, p->on_reply, u->job, u->i);
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

bool sl_plain_fits(want w, const redisReply *r)
{
    switch (w) {
    case WANT_OK:
        return r->type == REDIS_REPLY_STATUS && r->len == 2 &&
               memcmp(r->str, "OK", 2) == 0;
    case WANT_OK_NIL:
        return r->type == REDIS_REPLY_NIL || sl_plain_fits(WANT_OK, r);
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

const char *sl_plain_want_text(want w)
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

bool sl_plain_i64(const char *s, size_t len, int64_t *v)
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

sl_cursor sl_plain_cursor(unit *u, redisReply **reps)
{
    sl_cursor c = {reps, u->wants + u->first, u->ncmds, 0, false};

    return c;
}

const redisReply *sl_cursor_next(sl_cursor *c, want w)
{
    const redisReply *r;

    if (c->bad || c->at >= c->n) {
        c->bad = true;
        return NULL;
    }
    /* parse reads what emit queued, in its order: by construction. */
    assert(c->wants[c->at] == (unsigned char)w);
    r = c->reps[c->at++];
    if (r == NULL || !sl_plain_fits(w, r)) {
        c->bad = true;
        return NULL;
    }
    return r;
}

bool sl_cursor_skip(sl_cursor *c)
{
    if (c->bad || c->at >= c->n) {
        c->bad = true;
        return false;
    }
    return sl_cursor_next(c, (want)c->wants[c->at]) != NULL;
}

bool sl_cursor_int(sl_cursor *c, want w, int64_t lo, int64_t hi, int64_t *v)
{
    const redisReply *r = sl_cursor_next(c, w);

    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < lo ||
        r->integer > hi) {
        c->bad = true;
        return false;
    }
    *v = r->integer;
    return true;
}

bool sl_cursor_count(sl_cursor *c, int64_t lo, int64_t hi, int64_t *v)
{
    const redisReply *r = sl_cursor_next(c, WANT_BULK_NIL);

    if (r != NULL && r->type == REDIS_REPLY_NIL)
        *v = 0;
    else if (r == NULL || !sl_plain_i64(r->str, r->len, v))
        c->bad = true;
    if (!c->bad && (*v < lo || *v > hi))
        c->bad = true;
    return !c->bad;
}

bool sl_cursor_done(const sl_cursor *c)
{
    return !c->bad && c->at == c->n;
}

/* ------------------------------------------------------------ checks */

/* Frees the replies a unit keeps. */
void sl_plain_reply_release(unit *u)
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
            what != NULL ? " as " : "", what != NULL ? what : "",
            sl_plain_want_text(w));
}

/* Checks the reply r to a command of want w: an error reply is the
 * server's (note_status), anything else must fit. */
void sl_plain_reply_check(sl_plain *p, unit *u, want w, const redisReply *r,
                          const char *what)
{
    if (r->type == REDIS_REPLY_ERROR)
        note_status(p, u, r);
    else if (!sl_plain_fits(w, r))
        note_bad(p, u, w, r, what);
}

/* Checks an EXEC reply's elements against the wants of the commands it
 * ran (wants[1..n], after MULTI). */
void sl_plain_reply_check_exec(sl_plain *p, unit *u, const redisReply *x)
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
        sl_plain_reply_check(p, u, (want)u->wants[k + 1], x->element[k], what);
    }
}

/* A wrapped block's EXEC reply: its elements are the block's replies. */
void sl_plain_reply_take_exec(sl_plain *p, unit *u)
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
    sl_plain_reply_check_exec(p, u, x);
    for (k = 0; k < u->ncmds && k < x->elements; k++)
        u->reps[k] = x->element[k];
}
