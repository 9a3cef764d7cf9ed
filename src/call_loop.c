/* SPDX-License-Identifier: BSD-3-Clause */
/* call_loop.c - the request pipeline on the caller's event loop: the same
 * stages as a blocking call (call.c), with the backend's part a job on the
 * engine whose done callback runs the stages after it and then the
 * caller's callback. */
#include "call.h"
#include "handle.h"

#include <string.h>

/* ------------------------------------------------- on the caller's loop */

/* A call started on the loop: the engine's job first, then copies of
 * everything the caller passed, which it may free once the call returns. */
typedef struct async_call {
    sl_job job;
    sluice *sl;
    sl_call_to to;
    int64_t granted;
    char lease_id[24];
    sl_op op;
    bool many;
    bool cached;           /* a single call answered before it was sent: by
                              its reservation or the deny cache */
    int64_t t0;            /* its start, for the latency */
    int64_t wait_until;    /* a waiting acquire: monotonic ms, else 0 */
    size_t n;              /* the caller's requests; job.n of them were sent */
    sl_request *reqs;      /* job.n, pointing into keys and rules */
    sluice_result *res;    /* job.n: the backend's answers */
    sluice_result *out;    /* n: what the callback gets */
    size_t *map;           /* job.n: their places in out */
    sluice_ruleset *rules; /* job.n copies */
    unsigned char *marks;  /* job.n */
    char *keys;            /* the keys, end to end */
    sluice_status first;   /* the first request refused, for a batch */
    char first_msg[SL_ERR_LEN];
    sl_rsv_plan plan; /* a single acquire: what went with it (reserve.h);
                         the request is reqs[plan.main] */
    int64_t began;    /* the call's start, monotonic ms: its budget's */
    bool parked;      /* asleep behind its key's batch in flight */
    struct async_call *next_parked;
} async_call;

static void route(async_call *a, bool from_call);

/* The handle's parked calls without a. */
static void unpark(async_call *a)
{
    async_call **p = &a->sl->parked;

    while (*p != NULL && *p != a)
        p = &(*p)->next_parked;
    if (*p == a)
        *p = a->next_parked;
    a->parked = false;
}

/* A parked call wakes: a batch was answered, or its wait is over. */
static void parked_woken(sl_job *job)
{
    async_call *a = (async_call *)job;

    unpark(a);
    a->reqs[0].now_ms = sl_call_now(a->sl); /* decided now */
    route(a, false);
}

/* A batch of some key was answered: every parked call asks again. */
static void wake_parked(sluice *sl)
{
    async_call *a = sl->parked;

    sl->parked = NULL;
    for (; a != NULL; a = a->next_parked)
        sl_engine_wake_now(&sl->eng, &a->job);
}

/* A waiting acquire wakes: the same request, at the time now. */
static void async_woken(sl_job *job)
{
    async_call *a = (async_call *)job;

    /* Alone this time: its reservation's part was settled. */
    if (a->plan.main != 0)
        a->reqs[0] = a->reqs[a->plan.main];
    memset(&a->plan, 0, sizeof(a->plan));
    a->job.reqs = a->reqs;
    a->job.out = a->res;
    a->reqs[0].now_ms = sl_call_now(a->sl);
    a->cached = false;
    a->job.n = 1;
    sl_engine_restart(&a->sl->eng, &a->job);
}

/* A waiting acquire was denied: it sleeps until the request fits, if that
 * comes before its deadline (true). */
static bool async_sleeps(async_call *a)
{
    const sluice_result *r = a->cached ? &a->out[0] : &a->res[a->plan.main];
    int64_t now = sl_mono_ms(), sleep;

    if (a->wait_until == 0 || a->sl->eng.closing || a->job.err[0] != '\0' ||
        a->sl->url.cfg.shadow ||
        (sleep = sl_call_wait_more(r, now, a->wait_until)) == 0)
        return false;
    sl_engine_sleep(&a->sl->eng, &a->job, now + sleep, async_woken);
    return true;
}

/* The job ended: the stages after the backend, then the caller's
 * callback. */
static void async_done(sl_job *job)
{
    async_call *a = (async_call *)job;
    sluice *sl = a->sl;
    char *err = sl_share_err(sl);
    sluice_status st;

    if (job->err[0] != '\0')
        memcpy(err, job->err, SL_ERR_LEN);
    sl_stats_backend(&sl->stats, job->n, 0);
    if (a->to.then != NULL) { /* a rules op for limiter.c */
        a->to.then(sl, a->to.arg, a->res[0].status);
        sl_free(a);
        return;
    }
    if (a->many) {
        sl_deny_after(&sl->deny, &sl->url.cfg, a->reqs, job->out, job->n);
    } else if (a->parked) { /* the handle closed while it waited */
        unpark(a);
        a->cached = false;
        a->res[0].status = SLUICE_EIO;
        sl_errf(err, SL_ERR_LEN,
                "the handle closed while the call waited for its key's "
                "batch; nothing was sent");
    } else if (job->n > 0) {
        int how = sl_reserve_after(&sl->rsv, &a->plan, SLUICE_OK, job->out,
                                   &a->out[0]);

        if ((how & SL_RSV_SETTLED) && sl->parked != NULL && !sl->eng.closing)
            wake_parked(sl);
        if (how & SL_RSV_RESCUED)
            a->cached = true; /* admitted from the key's lots */
        else if (a->plan.refill == 0)
            sl_deny_after(&sl->deny, &sl->url.cfg, &a->reqs[a->plan.main],
                          &a->res[a->plan.main], 1);
    }
    if (async_sleeps(a))
        return;
    if (a->many) {
        st = sl_call_finish_many(sl, a->reqs, a->res, job->n, a->map, SLUICE_OK,
                                 a->out, a->n, a->first, a->first_msg, err);
    } else {
        if (!a->cached)
            memset(a->out, 0, sizeof(*a->out));
        st = sl_call_finish_one(sl, &a->reqs[a->plan.main], SLUICE_OK,
                                a->cached ? NULL : &a->res[a->plan.main],
                                a->out);
        sl_call_count_one(sl, a->op, st, a->out);
        if (st != SLUICE_OK || sl_call_no_result(a->op))
            a->out->status = st;
    }
    sl_stats_call(&sl->stats, a->t0);
    if (a->to.granted != NULL)
        a->to.granted(sl, a->to.arg, st, a->out,
                      st == SLUICE_OK ? a->granted : 0);
    else
        a->to.done(sl, a->to.arg, st, a->out, a->n);
    sl_free(a);
}

/* The offset of count items of size and alignment align placed at *at,
 * which moves past them. */
static size_t place(size_t *at, size_t count, size_t size, size_t align)
{
    size_t off = (*at + align - 1) / align * align;

    *at = off + count * size;
    return off;
}

/* A call with room for n requests whose keys take key_bytes: one
 * allocation, the call and then its arrays. */
static async_call *new_call(sluice *sl, size_t n, size_t key_bytes,
                            const sl_call_to *to)
{
    size_t at = sizeof(async_call), o_reqs, o_res, o_out, o_map, o_rules,
           o_marks, o_keys;
    async_call *a;
    char *base;

    /* Far below any overflow: the whole is at most about 1 KiB a request
     * (its rules' copy), and the keys, each within the key cap. */
    if (n > SIZE_MAX / 4096 || key_bytes > SIZE_MAX / 2)
        return NULL;
    o_reqs = place(&at, n, sizeof(sl_request), _Alignof(sl_request));
    o_res = place(&at, n, sizeof(sluice_result), _Alignof(sluice_result));
    o_out = place(&at, n, sizeof(sluice_result), _Alignof(sluice_result));
    o_map = place(&at, n, sizeof(size_t), _Alignof(size_t));
    o_rules = place(&at, n, sizeof(sluice_ruleset), _Alignof(sluice_ruleset));
    o_marks = place(&at, n, 1, 1);
    o_keys = place(&at, key_bytes, 1, 1);
    if ((base = sl_calloc(1, at)) == NULL)
        return NULL;
    a = (async_call *)base;
    a->sl = sl;
    a->to = *to;
    a->n = n;
    a->t0 = sl_stats_start(&sl->stats);
    a->reqs = (sl_request *)(base + o_reqs);
    a->res = (sluice_result *)(base + o_res);
    a->out = (sluice_result *)(base + o_out);
    a->map = (size_t *)(base + o_map);
    a->rules = (sluice_ruleset *)(base + o_rules);
    a->marks = (unsigned char *)(base + o_marks);
    a->keys = base + o_keys;
    a->job.reqs = a->reqs;
    a->job.out = a->res;
    a->job.marks = a->marks;
    a->job.done = async_done;
    return a;
}

sluice_status sl_call_ready(const sluice *sl, bool has_answer, char *err)
{
    if (!has_answer) {
        sl_errf(err, SL_ERR_LEN, "done is NULL");
        return SLUICE_EINVAL;
    }
    if (sl->eng.closing) { /* a callback that sluice_close() runs */
        sl_errf(err, SL_ERR_LEN, "the handle is closing: nothing starts");
        return SLUICE_EIO;
    }
    if (!sl->eng.attached) {
        sl_errf(err, SL_ERR_LEN,
                "the handle is not attached to an event loop: call "
                "sluice_attach() (or an adapter's attach) first");
        return SLUICE_EINVAL;
    }
    return SLUICE_OK;
}

/* Request m of a, prepared, points at its own copies of key and rules
 * (a decision's; rules NULL: none). */
static void keep_request(async_call *a, size_t m, size_t at_key,
                         const void *key, size_t key_len,
                         const sluice_ruleset *rules)
{
    memcpy(a->keys + at_key, key, key_len);
    a->reqs[m].key = a->keys + at_key;
    if (rules != NULL) {
        a->rules[m] = *rules;
        a->reqs[m].decide.rules = &a->rules[m];
    }
}

/* Starts the prepared request r on the loop: its key, rules and value
 * copied; its reservation asked, and the deny cache for plain keys; with
 * room for what a miss sends with it (a refund, a batch). */
static sluice_status start_prepared(sluice *sl, const sl_request *r,
                                    int64_t wait_ms, const sl_call_to *to,
                                    char *err)
{
    async_call *a;

    if ((a = new_call(sl, 3, r->key_len, to)) == NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    a->n = 1;
    a->reqs[0] = *r;
    keep_request(a, 0, 0, r->key, r->key_len,
                 sl_op_decides(r->op) ? r->decide.rules : NULL);
    if (r->op == SL_OP_AT_MOST)
        a->reqs[0].decide.granted = &a->granted;
    if ((r->op == SL_OP_LEASE_ACQUIRE || r->op == SL_OP_LEASE_RELEASE) &&
        r->lease.id_len < sizeof(a->lease_id)) {
        memcpy(a->lease_id, r->lease.id, r->lease.id_len);
        a->reqs[0].lease.id = a->lease_id;
    }
    a->op = r->op;
    a->wait_until = wait_ms > 0 ? sl_mono_ms() + wait_ms : 0;
    a->began = sl->eng.call_started > 0 ? sl->eng.call_started : sl_mono_ms();
    route(a, true);
    return SLUICE_OK;
}

/* The call's request asked of its reservation and the deny cache, then
 * sent with what goes with it (from_call: by the call that starts it;
 * else from the engine's timers), or parked behind its key's batch in
 * flight, for at most half its budget. Answered before it was sent, the
 * callback still runs from the loop. */
static void route(async_call *a, bool from_call)
{
    sluice *sl = a->sl;
    sl_request one;

    a->job.reqs = a->reqs;
    a->job.out = a->res;
    a->cached =
        sl_reserve_before(&sl->rsv, &sl->url.cfg, &a->reqs[0], false,
                          &a->out[0], &a->plan) ||
        (a->reqs[0].prefix == NULL &&
         sl_deny_before(&sl->deny, &sl->url.cfg, &a->reqs[0], &a->out[0]));
    if (!a->cached && a->plan.park && !sl->eng.closing &&
        sl_mono_ms() < a->began + sl->url.cfg.command_timeout_ms / 2) {
        a->parked = true;
        a->next_parked = sl->parked;
        sl->parked = a;
        sl_engine_sleep(&sl->eng, &a->job,
                        a->began + sl->url.cfg.command_timeout_ms / 2,
                        parked_woken);
        return;
    }
    one = a->reqs[0];
    if (!a->cached) {
        a->job.n = sl_reserve_plan(&sl->rsv, &one, &a->plan, a->reqs);
    } else if (a->plan.e != NULL) { /* admitted here, and a refill to send */
        a->job.reqs = a->reqs + 1;
        a->job.out = a->res + 1;
        a->job.n = sl_reserve_refill(&one, &a->plan, a->reqs + 1);
    } else {
        a->job.n = 0;
    }
    if (from_call) {
        sl_engine_submit(&sl->eng, &a->job);
    } else {
        sl->eng.call_started = a->began;
        sl_engine_restart(&sl->eng, &a->job);
    }
}

sluice_status sl_call_start(sluice *sl, const sl_request *r, int64_t began,
                            int64_t wait_ms, const sl_call_to *to, char *err)
{
    sluice_status st;

    st = sl_call_ready(
        sl, to->done != NULL || to->granted != NULL || to->then != NULL, err);
    if (st != SLUICE_OK)
        return st;
    sl->eng.call_started = began;
    st = start_prepared(sl, r, wait_ms, to, err);
    sl->eng.call_started = 0;
    return st;
}

static sluice_status start_one(sluice *sl, sl_op op, const void *key,
                               size_t key_len, const sluice_ruleset *rules,
                               int64_t cost, int64_t wait_ms,
                               const sl_call_to *to)
{
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    st = sl_call_ready(sl, to->done != NULL || to->granted != NULL, err);
    if (st != SLUICE_OK)
        return st;
    if (sl_call_bad_wait(wait_ms, err))
        return SLUICE_EINVAL;
    st = sl_call_prepare(sl, op, key, key_len, rules, cost, &r, err);
    if (st != SLUICE_OK) {
        sl_call_count_one(sl, op, st, NULL);
        return st;
    }
    return start_prepared(sl, &r, wait_ms, to, err);
}

sluice_status sluice_acquire_async(sluice *sl, const void *key, size_t key_len,
                                   const sluice_ruleset *rules, int64_t cost,
                                   sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, 0, &to);
}

sluice_status sluice_acquire_wait_async(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        int64_t cost, int64_t wait_ms,
                                        sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, wait_ms,
                     &to);
}

sluice_status sluice_peek_async(sluice *sl, const void *key, size_t key_len,
                                const sluice_ruleset *rules, int64_t cost,
                                sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_PEEK, key, key_len, rules, cost, 0, &to);
}

sluice_status sluice_reset_async(sluice *sl, const void *key, size_t key_len,
                                 const sluice_ruleset *rules,
                                 sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_RESET, key, key_len, rules, 1, 0, &to);
}

sluice_status sluice_acquire_at_most_async(sluice *sl, const void *key,
                                           size_t key_len,
                                           const sluice_ruleset *rules,
                                           int64_t max_cost,
                                           sluice_granted_fn done, void *arg)
{
    sl_call_to to = {NULL, done, NULL, arg};

    return start_one(sl, SL_OP_AT_MOST, key, key_len, rules, max_cost, 0, &to);
}

sluice_status sluice_refund_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t amount,
                                  sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_REFUND, key, key_len, rules, amount, 0, &to);
}

sluice_status sluice_settle_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t reserved,
                                  int64_t actual, sluice_done_fn done,
                                  void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};
    sl_op op;
    int64_t amount;
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    st = sl_call_settle(reserved, actual, &op, &amount, sl_share_err(sl));
    if (st != SLUICE_OK)
        return st;
    return start_one(sl, op, key, key_len, rules, amount, 0, &to);
}

sluice_status sluice_acquire_many_async(sluice *sl, const sluice_request *reqs,
                                        size_t n, sluice_done_fn done,
                                        void *arg)
{
    sl_call_to to = {done, NULL, NULL, arg};
    async_call *a;
    size_t i, k, bytes = 0, at = 0;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_call_ready(sl, done != NULL, err)) != SLUICE_OK)
        return st;
    if (n == 0 || reqs == NULL) {
        sl_errf(err, SL_ERR_LEN, "acquire_many_async: %s",
                reqs == NULL ? "reqs is NULL" : "no requests");
        return SLUICE_EINVAL;
    }
    for (i = 0; i < n; i++)
        if (reqs[i].key_len <= SLUICE_MAX_KEY_LEN)
            bytes += reqs[i].key_len;
    if ((a = new_call(sl, n, bytes, &to)) == NULL) {
        sl_errf(err, SL_ERR_LEN,
                "acquire_many_async: out of memory for %zu requests", n);
        return SLUICE_ENOMEM;
    }
    a->many = true;
    a->op = SL_OP_ACQUIRE;
    a->job.n = sl_call_prepare_many(sl, reqs, n, a->reqs, a->map, a->out,
                                    &a->first, a->first_msg, err);
    for (k = 0; k < a->job.n; k++) { /* what is sent, copied */
        i = a->map[k];
        keep_request(a, k, at, reqs[i].key, reqs[i].key_len, reqs[i].rules);
        at += reqs[i].key_len;
    }
    /* None sent: the callback still runs, from the loop. */
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
}
