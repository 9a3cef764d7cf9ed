/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_lease.c - leases and a named limiter's stored rules over plain
 * commands: each a row of {emit, parse, undo} read through the reply
 * cursor, so that what a block asks and what is read of it are one list.
 * A lease is judged on the client, never above the most holders: each
 * lease admitted was counted with every lease added before it, as a
 * window's charge is. */
#include "backends/plain_lease.h"

#include <stdlib.h>
#include <string.h>

/* A rules op: read (and start the keep-alive again), store (unless
 * present, then read what is), or delete. */
static size_t rules_emit(sl_plain *p, unit *j, size_t i)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_rules(key, sizeof(key), sl_plain_prefix(p, j), rq->key,
                             rq->key_len);

    (void)i;
    switch (rq->op) {
    case SL_OP_RULES_GET:
        APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
        if (rq->stored.ttl_ms > 0) {
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)rq->stored.ttl_ms);
            return 2;
        }
        if (rq->stored.ttl_ms < 0) {
            APPEND(p, j, WANT_BOOL, "PERSIST %b", key, kl);
            return 2;
        }
        return 1;
    case SL_OP_RULES_PUT:
        if (rq->stored.ttl_ms > 0 && rq->stored.if_absent)
            APPEND(p, j, WANT_OK_NIL, "SET %b %b PX %lld NX", key, kl,
                   rq->stored.value, rq->stored.value_len,
                   (long long)rq->stored.ttl_ms);
        else if (rq->stored.ttl_ms > 0)
            APPEND(p, j, WANT_OK, "SET %b %b PX %lld", key, kl,
                   rq->stored.value, rq->stored.value_len,
                   (long long)rq->stored.ttl_ms);
        else if (rq->stored.if_absent)
            APPEND(p, j, WANT_OK_NIL, "SET %b %b NX", key, kl, rq->stored.value,
                   rq->stored.value_len);
        else
            APPEND(p, j, WANT_OK, "SET %b %b", key, kl, rq->stored.value,
                   rq->stored.value_len);
        APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
        return 2;
    default:
        APPEND(p, j, WANT_COUNT, "DEL %b", key, kl);
        return 1;
    }
}

/* What a rules op read: the value of its GET, or DEL's count. */
static bool rules_parse(sl_plain *p, unit *j, size_t i, sl_cursor *c)
{
    const sl_request *rq = j->rq;
    const redisReply *r;
    int64_t n;

    (void)p;
    (void)i;
    if (rq->op == SL_OP_RULES_DEL) {
        if (!sl_cursor_int(c, WANT_COUNT, 0, INT64_MAX, &n))
            return false;
        rq->stored.read->found = n > 0;
        return true;
    }
    if (rq->op == SL_OP_RULES_PUT)
        sl_cursor_skip(c); /* SET, NX or not */
    r = sl_cursor_next(c, WANT_BULK_NIL);
    if (rq->op == SL_OP_RULES_GET && rq->stored.ttl_ms != 0)
        sl_cursor_next(c, WANT_BOOL); /* PEXPIRE or PERSIST */
    if (r == NULL || c->bad)
        return false;
    rq->stored.read->found = r->type != REDIS_REPLY_NIL;
    rq->stored.read->len = 0;
    if (!rq->stored.read->found)
        return true;
    if (r->len > SL_VALUE_MAX)
        return false;
    rq->stored.read->len = r->len;
    memcpy(rq->stored.read->buf, r->str, r->len);
    return true;
}

/* A lease: prune what ended, add ours, read every live lease (with ours)
 * and give the key a TTL; a release removes it. */
static size_t lease_emit(sl_plain *p, unit *j, size_t i)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_lease(key, sizeof(key), sl_plain_prefix(p, j), rq->key,
                             rq->key_len);
    long long t = (long long)rq->now_ms;

    (void)i;
    if (rq->op == SL_OP_LEASE_RELEASE) {
        APPEND(p, j, WANT_BOOL, "ZREM %b %b", key, kl, rq->lease.id,
               rq->lease.id_len);
        return 1;
    }
    APPEND(p, j, WANT_COUNT, "ZREMRANGEBYSCORE %b -inf %lld", key, kl, t);
    APPEND(p, j, WANT_BOOL, "ZADD %b %lld %b", key, kl,
           t + (long long)rq->lease.lease_ms, rq->lease.id, rq->lease.id_len);
    APPEND(p, j, WANT_ARRAY, "ZRANGEBYSCORE %b (%lld +inf WITHSCORES", key, kl,
           t);
    APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
           (long long)sl_max64(2 * rq->lease.lease_ms,
                               (int64_t)p->url->cfg.ttl_floor_ms));
    return 4;
}

/* A lease's reads: the live leases but ours, the first and last ends;
 * then the lease is judged. */
static bool lease_parse(sl_plain *p, unit *j, size_t i, sl_cursor *c)
{
    const sl_request *rq = j->rq;
    const redisReply *r;
    int64_t n = 0, first = -1, last = -1, end;
    sluice_result *out = &j->job->out[j->i];
    size_t k;

    (void)p;
    (void)i;
    if (rq->op == SL_OP_LEASE_RELEASE)
        return sl_cursor_next(c, WANT_BOOL) != NULL;
    sl_cursor_next(c, WANT_COUNT); /* ZREMRANGEBYSCORE */
    sl_cursor_next(c, WANT_BOOL);  /* ZADD */
    r = sl_cursor_next(c, WANT_ARRAY);
    sl_cursor_next(c, WANT_BOOL); /* PEXPIRE */
    if (r == NULL || c->bad || r->elements % 2 != 0)
        return false;
    for (k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *m = r->element[k], *sc = r->element[k + 1];
        char *e;

        if (m->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING)
            return false;
        if (m->len == rq->lease.id_len &&
            memcmp(m->str, rq->lease.id, m->len) == 0)
            continue; /* ours */
        end = strtoll(sc->str, &e, 10);
        if (e == sc->str || *e != '\0' || end <= rq->now_ms ||
            end > SL_MAX_TIME_MS + SL_MAX_PERIOD_MS)
            return false;
        first = n == 0 ? end : sl_min64(first, end);
        last = n == 0 ? end : sl_max64(last, end);
        n++;
    }
    j->all = sl_lease_decide(rq->now_ms, rq->lease.max, rq->lease.lease_ms, n,
                             first, last, out);
    j->lease_last =
        sl_max64(last, j->all ? rq->now_ms + rq->lease.lease_ms : -1);
    return true;
}

/* After a lease's block: a denied lease goes again, and the key lives
 * until the last lease ends and a lease time more. */
static size_t lease_undo(sl_plain *p, unit *j, size_t i)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF];
    size_t kl = sl_key_lease(key, sizeof(key), sl_plain_prefix(p, j), rq->key,
                             rq->key_len);
    size_t n = 0;

    (void)i;
    if (!j->all) {
        APPEND(p, j, WANT_BOOL, "ZREM %b %b", key, kl, rq->lease.id,
               rq->lease.id_len);
        n++;
    }
    if (j->lease_last + rq->lease.lease_ms >
        rq->now_ms + 2 * rq->lease.lease_ms) {
        APPEND(
            p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
            (long long)sl_max64(j->lease_last + rq->lease.lease_ms - rq->now_ms,
                                (int64_t)p->url->cfg.ttl_floor_ms));
        n++;
    }
    return n;
}

static const plain_op lease_op = {lease_emit, lease_parse, lease_undo};
static const plain_op rules_op = {rules_emit, rules_parse, NULL};

static const plain_op *op_of(const unit *u)
{
    return u->mode == JOB_LEASE ? &lease_op : &rules_op;
}

size_t sl_plain_lease_block(sl_plain *p, unit *u)
{
    return op_of(u)->emit(p, u, 0);
}

sluice_status sl_plain_lease_parse(sl_plain *p, unit *u)
{
    sl_cursor c = sl_plain_cursor(u, u->reps);

    if (op_of(u)->parse(p, u, 0, &c) && sl_cursor_done(&c))
        return SLUICE_OK;
    if (u->mode == JOB_LEASE)
        sl_errf(u->msg, sizeof(u->msg),
                "%s: unexpected data under the leases of this key; is another "
                "program using the key prefix \"%s\"?",
                p->name, p->url->cfg.prefix);
    else
        sl_errf(u->msg, sizeof(u->msg),
                "%s: unexpected reply for a limiter's rules; is another "
                "program using the key prefix \"%s\"?",
                p->name, p->url->cfg.prefix);
    return SLUICE_EPROTO;
}

size_t sl_plain_lease_follow(sl_plain *p, unit *u)
{
    return op_of(u)->undo != NULL ? op_of(u)->undo(p, u, 0) : 0;
}
