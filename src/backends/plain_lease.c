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

/* The limiter's overrides hash, beside the rules key of j. */
static size_t over_key(sl_plain *p, const unit *j, char *key)
{
    return sl_key_over(key, KEYBUF, sl_plain_prefix(p, j), j->rq->key,
                       j->rq->key_len);
}

/* An override op: set (then the hash given the rules' keep-alive, and
 * whether the rules exist: if not, the follow-up takes it back), delete,
 * or one HSCAN page. */
static size_t over_emit(sl_plain *p, unit *j)
{
    const sl_request *rq = j->rq;
    const sl_stored *so = &rq->stored;
    char key[KEYBUF], okey[KEYBUF];
    size_t kl = sl_key_rules(key, sizeof(key), sl_plain_prefix(p, j), rq->key,
                             rq->key_len);
    size_t okl = over_key(p, j, okey);

    if (rq->op == SL_OP_OVER_DEL) {
        APPEND(p, j, WANT_BOOL, "HDEL %b %b", okey, okl, so->client,
               so->client_len);
        return 1;
    }
    if (rq->op == SL_OP_OVER_LIST) {
        APPEND(p, j, WANT_ARRAY, "HSCAN %b %s COUNT 100", okey, okl,
               so->page->cursor);
        return 1;
    }
    APPEND(p, j, WANT_BOOL, "HSET %b %b %b", okey, okl, so->client,
           so->client_len, so->value, so->value_len);
    if (so->ttl_ms > 0)
        APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", okey, okl,
               (long long)so->ttl_ms);
    else
        APPEND(p, j, WANT_BOOL, "PERSIST %b", okey, okl);
    APPEND(p, j, WANT_BOOL, "EXISTS %b", key, kl);
    return 3;
}

/* The keep-alive of the rules started on the hash too (> 0), or taken
 * away (< 0); none sent for 0. */
static size_t over_keep(sl_plain *p, unit *j, int64_t ttl_ms)
{
    char okey[KEYBUF];
    size_t okl = over_key(p, j, okey);

    if (ttl_ms > 0)
        APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", okey, okl,
               (long long)ttl_ms);
    else if (ttl_ms < 0)
        APPEND(p, j, WANT_BOOL, "PERSIST %b", okey, okl);
    return ttl_ms != 0;
}

/* A rules op: read (and start the keep-alive again, the hash's too),
 * store (unless present, then read what is), or delete with the hash; a
 * read or store also counts the overrides, and a read that asks reads
 * the client's. */
static size_t rules_emit(sl_plain *p, unit *j, size_t i)
{
    const sl_request *rq = j->rq;
    char key[KEYBUF], okey[KEYBUF];
    size_t kl = sl_key_rules(key, sizeof(key), sl_plain_prefix(p, j), rq->key,
                             rq->key_len);
    size_t okl = over_key(p, j, okey), n = 1;

    (void)i;
    switch (rq->op) {
    case SL_OP_RULES_GET:
        APPEND(p, j, WANT_BULK_NIL, "GET %b", key, kl);
        if (rq->stored.ttl_ms > 0) {
            APPEND(p, j, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)rq->stored.ttl_ms);
            n++;
        }
        if (rq->stored.ttl_ms < 0) {
            APPEND(p, j, WANT_BOOL, "PERSIST %b", key, kl);
            n++;
        }
        n += over_keep(p, j, rq->stored.ttl_ms);
        APPEND(p, j, WANT_COUNT, "HLEN %b", okey, okl);
        if (rq->stored.over != NULL)
            APPEND(p, j, WANT_BULK_NIL, "HGET %b %b", okey, okl,
                   rq->stored.client, rq->stored.client_len);
        return n + 1 + (rq->stored.over != NULL);
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
        /* A define leaves the hash to the read that follows it. */
        n = rq->stored.if_absent
                ? 0
                : over_keep(p, j,
                            rq->stored.ttl_ms > 0 ? rq->stored.ttl_ms : -1);
        APPEND(p, j, WANT_COUNT, "HLEN %b", okey, okl);
        return 3 + n;
    case SL_OP_RULES_DEL:
        APPEND(p, j, WANT_COUNT, "DEL %b", key, kl);
        APPEND(p, j, WANT_COUNT, "DEL %b", okey, okl);
        return 2;
    default:
        return over_emit(p, j);
    }
}

/* A page of HSCAN: the next cursor, then client and value by turn. */
static bool page_parse(const sl_request *rq, sl_cursor *c)
{
    const redisReply *r = sl_cursor_next(c, WANT_ARRAY), *cur, *kv;
    sl_over_page *page = rq->stored.page;
    size_t k;

    if (r == NULL || r->elements != 2)
        return false;
    cur = r->element[0];
    kv = r->element[1];
    if (cur->type != REDIS_REPLY_STRING || cur->len == 0 ||
        cur->len >= sizeof(page->cursor) || kv->type != REDIS_REPLY_ARRAY ||
        kv->elements % 2 != 0)
        return false;
    memcpy(page->cursor, cur->str, cur->len);
    page->cursor[cur->len] = '\0';
    for (k = 0; k + 1 < kv->elements; k += 2) {
        const redisReply *f = kv->element[k], *v = kv->element[k + 1];

        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            f->len == 0 || f->len > SLUICE_MAX_KEY_LEN || v->len > SL_VALUE_MAX)
            return false;
        if (!sl_over_page_add(page, f->str, f->len, v->str, v->len))
            return false; /* out of memory: reported as the reply's */
    }
    return true;
}

/* What an override op read. */
static bool over_parse(unit *j, sl_cursor *c)
{
    const sl_request *rq = j->rq;
    int64_t n;

    if (rq->op == SL_OP_OVER_LIST)
        return page_parse(rq, c);
    if (rq->op == SL_OP_OVER_SET) {
        sl_cursor_skip(c); /* HSET */
        sl_cursor_skip(c); /* PEXPIRE or PERSIST */
    }
    if (!sl_cursor_int(c, WANT_BOOL, 0, 1, &n))
        return false;
    rq->stored.read->found = n == 1;
    j->all = n == 1; /* a set that found no rules is taken back */
    return true;
}

/* What a rules op read: the value of its GET, or DEL's count; the
 * overrides' count, and the client's override when asked. */
static bool rules_parse(sl_plain *p, unit *j, size_t i, sl_cursor *c)
{
    const sl_request *rq = j->rq;
    const redisReply *r, *o = NULL;
    int64_t n, overs = 0;

    (void)p;
    (void)i;
    if (rq->op >= SL_OP_OVER_SET)
        return over_parse(j, c);
    if (rq->op == SL_OP_RULES_DEL) {
        if (!sl_cursor_int(c, WANT_COUNT, 0, INT64_MAX, &n) ||
            !sl_cursor_skip(c)) /* the hash's DEL */
            return false;
        rq->stored.read->found = n > 0;
        return true;
    }
    if (rq->op == SL_OP_RULES_PUT)
        sl_cursor_skip(c); /* SET, NX or not */
    r = sl_cursor_next(c, WANT_BULK_NIL);
    if (rq->op == SL_OP_RULES_GET && rq->stored.ttl_ms != 0) {
        sl_cursor_next(c, WANT_BOOL); /* PEXPIRE or PERSIST, the rules */
        sl_cursor_next(c, WANT_BOOL); /* and the hash */
    }
    if (rq->op == SL_OP_RULES_PUT && !rq->stored.if_absent)
        sl_cursor_next(c, WANT_BOOL); /* the hash's keep-alive */
    if (!sl_cursor_int(c, WANT_COUNT, 0, INT64_MAX, &overs))
        return false;
    if (rq->op == SL_OP_RULES_GET && rq->stored.over != NULL)
        o = sl_cursor_next(c, WANT_BULK_NIL);
    if (r == NULL || c->bad ||
        (rq->op == SL_OP_RULES_GET && rq->stored.over != NULL && o == NULL))
        return false;
    rq->stored.read->found = r->type != REDIS_REPLY_NIL;
    rq->stored.read->len = 0;
    rq->stored.read->overs = overs;
    if (o != NULL && o->type != REDIS_REPLY_NIL) {
        if (o->len > SL_VALUE_MAX)
            return false;
        rq->stored.over->found = true;
        rq->stored.over->len = o->len;
        memcpy(rq->stored.over->buf, o->str, o->len);
    }
    if (!rq->stored.read->found)
        return true;
    if (r->len > SL_VALUE_MAX)
        return false;
    rq->stored.read->len = r->len;
    memcpy(rq->stored.read->buf, r->str, r->len);
    return true;
}

/* After an override's set that found no rules: what it wrote goes. */
static size_t rules_undo(sl_plain *p, unit *j, size_t i)
{
    char okey[KEYBUF];
    size_t okl = over_key(p, j, okey);

    (void)i;
    if (j->rq->op != SL_OP_OVER_SET || j->all)
        return 0;
    APPEND(p, j, WANT_BOOL, "HDEL %b %b", okey, okl, j->rq->stored.client,
           j->rq->stored.client_len);
    return 1;
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
static const plain_op rules_op = {rules_emit, rules_parse, rules_undo};

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
