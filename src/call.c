/* SPDX-License-Identifier: BSD-3-Clause */
/* call.c - the request pipeline: every call, blocking or on the caller's
 * loop, runs the same stages: prepare (check the request) -> the deny
 * cache -> the backend -> on its answer, the fail policy, shadow mode and
 * the counters. A blocking call hands its requests to the backend through
 * the queue of threads sharing the handle (share.c) and waits there; an
 * async call submits a job to the engine, whose done callback runs the
 * same last stages. */
#include "call.h"

#include "handle.h"

#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ prepare */

static sluice_status prepare(sluice *sl, sl_op op, const void *key,
                             size_t key_len, const sluice_ruleset *rules,
                             int64_t cost, int64_t now, sl_request *r,
                             char *err)
{
    sluice_status st;

    memset(r, 0, sizeof(*r)); /* no prefix, value or read unless set */
    if ((st = sl_key_check(key, key_len, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if (sl_op_decides(op) &&
        (st = sluice_ruleset_check(rules, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if (sl_op_decides(op) && op != SL_OP_RESET &&
        (op != SL_OP_REFUND || cost != 0) &&
        (st = sl_cost_check(cost, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    /* The server's clock is read by the script; ours is checked here. */
    if (!sl->url.cfg.server_clock &&
        (st = sl_time_check(now, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    r->op = op;
    r->key = key;
    r->key_len = key_len;
    r->now_ms = now;
    if (sl_op_decides(op)) {
        r->decide.rules = rules;
        r->decide.cost = cost;
    }
    return SLUICE_OK;
}

int64_t sl_call_now(const sluice *sl)
{
    if (sl->url.cfg.server_clock)
        return -1;
    return sl->url.cfg.clock(sl->url.cfg.clock_ctx);
}

sluice_status sl_call_prepare(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err)
{
    return prepare(sl, op, key, key_len, rules, cost, sl_call_now(sl), r, err);
}

/* ---------------------------------------- on the answer: policy, shadow */

/* Shadow mode: an acquire the rules denied (or the deny cache) is
 * admitted, its status saying so; it was not charged. */
static void shadow(const sluice *sl, sl_op op, sluice_result *r)
{
    if (sl->url.cfg.shadow && op == SL_OP_ACQUIRE && !r->allowed &&
        (r->status == SLUICE_OK || r->status == SLUICE_CACHED)) {
        r->allowed = true;
        r->status = SLUICE_SHADOWED;
    }
}

/* Shadow mode: an acquire at most is granted all it asked; what the rules
 * granted is what was charged. */
static void shadow_at_most(const sluice *sl, const sl_request *rq,
                           sluice_result *r)
{
    if (sl->url.cfg.shadow && r->status == SLUICE_OK &&
        *rq->decide.granted < rq->decide.cost) {
        *rq->decide.granted = rq->decide.cost;
        r->allowed = true;
        r->status = SLUICE_SHADOWED;
    }
}

/* Counts one request of a batch by its result. */
static void count_result(sluice *sl, sl_op op, const sluice_result *r)
{
    if (r->status == SLUICE_OK || r->status == SLUICE_CACHED ||
        r->status == SLUICE_SHADOWED || r->status == SLUICE_RESERVED)
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, r);
    else
        sl_stats_answer(&sl->stats, op, r->status,
                        sl_policy_answers(sl, r->status), r);
}

/* Ops whose call returns no result, only a status. */
static bool no_result(sl_op op)
{
    return op == SL_OP_RESET || op == SL_OP_LEASE_RELEASE;
}

/* Counts a single call's request: the call's status st and, when it
 * succeeded with a result, that result. */
static void count_one(sluice *sl, sl_op op, sluice_status st,
                      const sluice_result *r)
{
    if (st != SLUICE_OK)
        sl_stats_answer(&sl->stats, op, st, false, NULL);
    else if (r != NULL && !no_result(op))
        count_result(sl, op, r);
    else
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, NULL);
}

void sl_call_count(sluice *sl, sl_op op, sluice_status st)
{
    count_one(sl, op, st, NULL);
}

/* One request answered (res; NULL: the deny cache answered in *out): the
 * fail policy, then shadow mode. Returns the call's status. */
static sluice_status finish_one(const sluice *sl, const sl_request *r,
                                sluice_status st, const sluice_result *res,
                                sluice_result *out)
{
    if (res != NULL)
        st = sl_policy_one(sl, r, st, res, out);
    if (st == SLUICE_OK && r->op == SL_OP_AT_MOST)
        shadow_at_most(sl, r, out);
    else if (st == SLUICE_OK && out != NULL)
        shadow(sl, r->op, out);
    return st;
}

/* A batch answered (st for the backend call, res for the m requests
 * sent, which are out[map[i]] of the caller's n): the fail policy, shadow
 * mode and the counters, for all n. Returns the call's status. */
static sluice_status
finish_many(sluice *sl, const sl_request *rs, const sluice_result *res,
            size_t m, const size_t *map, sluice_status st, sluice_result *out,
            size_t n, sluice_status first, const char *first_msg, char *err)
{
    size_t i;

    st = sl_policy_many(sl, rs, res, m, map, st, out, first, first_msg, err);
    for (i = 0; i < n; i++) {
        shadow(sl, SL_OP_ACQUIRE, &out[i]);
        count_result(sl, SL_OP_ACQUIRE, &out[i]);
    }
    return st;
}

/* A batch's requests checked and asked of the reservations and the deny
 * cache: those to send go to rs[0..m), their places out[map[k]]; out
 * holds the others' answers
 * (the cache's, or why they were refused: the first such status in
 * *first, its message in first_msg). Returns m. */
static size_t prepare_many(sluice *sl, const sluice_request *reqs, size_t n,
                           sl_request *rs, size_t *map, sluice_result *out,
                           sluice_status *first, char *first_msg, char *err)
{
    int64_t now = sl_call_now(sl);
    sl_rsv_plan plan; /* a batch's misses take no batch of their own */
    size_t i, m = 0;

    for (i = 0; i < n; i++) {
        sluice_status rst =
            prepare(sl, SL_OP_ACQUIRE, reqs[i].key, reqs[i].key_len,
                    reqs[i].rules, reqs[i].cost, now, &rs[m], err);

        memset(&out[i], 0, sizeof(out[i]));
        out[i].status = rst;
        if (rst == SLUICE_OK &&
            sl_reserve_before(&sl->rsv, &sl->url.cfg, &rs[m], &out[i], &plan))
            continue;
        if (rst == SLUICE_OK &&
            sl_deny_before(&sl->deny, &sl->url.cfg, &rs[m], &out[i])) {
            continue;
        } else if (rst == SLUICE_OK) {
            map[m++] = i;
        } else if (*first == SLUICE_OK) {
            *first = rst;
            memcpy(first_msg, err, SL_ERR_LEN);
        }
    }
    return m;
}

/* ----------------------------------------------------------- blocking */

sluice_status sl_call_blocking(const sluice *sl, char *err)
{
    if (!sl->eng.attached)
        return SLUICE_OK;
    sl_errf(err, SL_ERR_LEN,
            "the handle is attached to an event loop: use the _async calls "
            "(or open another handle for blocking calls)");
    return SLUICE_EINVAL;
}

/* A prepared request through the pipeline, blocking; not counted. */
static sluice_status run_one(sluice *sl, sl_request *r, sluice_result *out,
                             char *err)
{
    sl_request rs[3]; /* a refund, the request, a batch (reserve.h) */
    sluice_result res[3];
    sl_rsv_plan plan;
    sluice_status st;
    size_t n;

    if (sl_reserve_before(&sl->rsv, &sl->url.cfg, r, out, &plan))
        return finish_one(sl, r, SLUICE_OK, NULL, out);
    if (r->prefix == NULL && sl_deny_before(&sl->deny, &sl->url.cfg, r, out))
        return finish_one(sl, r, SLUICE_OK, NULL, out);
    n = sl_reserve_plan(&sl->rsv, r, &plan, rs);
    memset(res, 0, n * sizeof(res[0]));
    st = sl_share_decide(sl, rs, n, res, err);
    sl_reserve_after(&sl->rsv, &plan, st, res);
    if (st == SLUICE_OK)
        sl_deny_after(&sl->deny, &sl->url.cfg, r, &res[plan.main], 1);
    return finish_one(sl, r, st, &res[plan.main], out);
}

sluice_status sl_call_run(sluice *sl, sl_request *r, sluice_result *out,
                          char *err)
{
    sluice_result res;
    sluice_status st;
    int64_t t0;

    if (r->op == SL_OP_RULES_GET || r->op == SL_OP_RULES_PUT ||
        r->op == SL_OP_RULES_DEL) {
        memset(&res, 0, sizeof(res));
        st = sl_share_decide(sl, r, 1, &res, err);
        return st == SLUICE_OK ? res.status : st;
    }
    t0 = sl_stats_start(&sl->stats);
    st = run_one(sl, r, out, err);
    count_one(sl, r->op, st, out);
    sl_stats_call(&sl->stats, t0);
    return st;
}

/* One request, blocking. granted: an acquire at most's (else NULL). */
static sluice_status decide_one(sluice *sl, sl_op op, const void *key,
                                size_t key_len, const sluice_ruleset *rules,
                                int64_t cost, int64_t *granted,
                                sluice_result *out)
{
    sl_request r;
    sluice_status st;
    int64_t t0;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((out == NULL && op != SL_OP_RESET) ||
        (op == SL_OP_AT_MOST && granted == NULL)) {
        sl_errf(err, SL_ERR_LEN, "%s is NULL", out == NULL ? "out" : "granted");
        return SLUICE_EINVAL;
    }
    if ((st = sl_call_blocking(sl, err)) != SLUICE_OK)
        return st;
    t0 = sl_stats_start(&sl->stats);
    st = sl_call_prepare(sl, op, key, key_len, rules, cost, &r, err);
    r.decide.granted = granted;
    if (granted != NULL)
        *granted = 0;
    if (st == SLUICE_OK)
        st = run_one(sl, &r, out, err);
    count_one(sl, op, st, out);
    sl_stats_call(&sl->stats, t0);
    return st;
}

sluice_status sluice_acquire(sluice *sl, const void *key, size_t key_len,
                             const sluice_ruleset *rules, int64_t cost,
                             sluice_result *out)
{
    return decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, out);
}

sluice_status sluice_acquire_at_most(sluice *sl, const void *key,
                                     size_t key_len,
                                     const sluice_ruleset *rules,
                                     int64_t max_cost, int64_t *granted,
                                     sluice_result *out)
{
    return decide_one(sl, SL_OP_AT_MOST, key, key_len, rules, max_cost, granted,
                      out);
}

sluice_status sluice_refund(sluice *sl, const void *key, size_t key_len,
                            const sluice_ruleset *rules, int64_t amount,
                            sluice_result *out)
{
    return decide_one(sl, SL_OP_REFUND, key, key_len, rules, amount, NULL, out);
}

sluice_status sluice_peek(sluice *sl, const void *key, size_t key_len,
                          const sluice_ruleset *rules, int64_t cost,
                          sluice_result *out)
{
    return decide_one(sl, SL_OP_PEEK, key, key_len, rules, cost, NULL, out);
}

sluice_status sluice_reset(sluice *sl, const void *key, size_t key_len,
                           const sluice_ruleset *rules)
{
    return decide_one(sl, SL_OP_RESET, key, key_len, rules, 1, NULL, NULL);
}

/* The longest wait an acquire may ask for: a day. */
#define MAX_WAIT_MS 86400000

static bool bad_wait(int64_t wait_ms, char *err)
{
    if (wait_ms >= 0 && wait_ms <= MAX_WAIT_MS)
        return false;
    sl_errf(err, SL_ERR_LEN, "wait_ms %lld: expected 0..%d ms",
            (long long)wait_ms, MAX_WAIT_MS);
    return true;
}

/* Sleeps ms, whatever signals come. */
static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A waiting acquire's answer r, at now (monotonic ms), with its deadline
 * until: how long to sleep before asking again, or 0 when r is the
 * answer (admitted, failed, or a denial that never fits, or fits only
 * after the deadline). Blocking and async waits decide alike. */
static int64_t wait_more(const sluice_result *r, int64_t now, int64_t until)
{
    if (r->allowed || (r->status != SLUICE_OK && r->status != SLUICE_CACHED) ||
        r->retry_after_ms < 0 || now + r->retry_after_ms > until)
        return 0;
    return r->retry_after_ms > 0 ? r->retry_after_ms : 1;
}

sluice_status sluice_acquire_wait(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t cost,
                                  int64_t wait_ms, sluice_result *out)
{
    int64_t until, sleep;
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    if (bad_wait(wait_ms, sl_share_err(sl)))
        return SLUICE_EINVAL;
    until = sl_mono_ms() + wait_ms;
    for (;;) {
        st =
            decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, out);
        if (st != SLUICE_OK ||
            (sleep = wait_more(out, sl_mono_ms(), until)) == 0)
            return st;
        sleep_ms(sleep);
    }
}

sluice_status sluice_acquire_many(sluice *sl, const sluice_request *reqs,
                                  size_t n, sluice_result *out)
{
    sl_request stack_reqs[64], *rs = stack_reqs;
    sluice_result stack_res[64], *res = stack_res;
    size_t *map = NULL, m;
    sluice_status st = SLUICE_OK, first = SLUICE_OK;
    char first_msg[SL_ERR_LEN] = "", *err;
    int64_t t0;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (n == 0)
        return SLUICE_OK;
    if (reqs == NULL || out == NULL) {
        sl_errf(err, SL_ERR_LEN, "acquire_many: %s is NULL",
                reqs == NULL ? "reqs" : "out");
        return SLUICE_EINVAL;
    }
    if ((st = sl_call_blocking(sl, err)) != SLUICE_OK)
        return st;
    t0 = sl_stats_start(&sl->stats);
    /* calloc's overflow check: n comes from the caller. */
    if (n > 64) {
        rs = sl_calloc(n, sizeof(*rs));
        res = sl_calloc(n, sizeof(*res));
    }
    map = sl_calloc(n, sizeof(*map));
    if (rs == NULL || res == NULL || map == NULL) {
        st = SLUICE_ENOMEM;
        sl_errf(err, SL_ERR_LEN, "acquire_many: out of memory for %zu requests",
                n);
        goto done;
    }
    m = prepare_many(sl, reqs, n, rs, map, out, &first, first_msg, err);
    if (m > 0) {
        memset(res, 0, m * sizeof(*res));
        st = sl_share_decide(sl, rs, m, res, err);
    }
    if (st == SLUICE_OK)
        sl_deny_after(&sl->deny, &sl->url.cfg, rs, res, m);
    st = finish_many(sl, rs, res, m, map, st, out, n, first, first_msg, err);
    sl_stats_call(&sl->stats, t0);
done:
    if (rs != stack_reqs)
        sl_free(rs);
    if (res != stack_res)
        sl_free(res);
    sl_free(map);
    return st;
}

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
} async_call;

/* A waiting acquire wakes: the same request, at the time now. */
static void async_woken(sl_job *job)
{
    async_call *a = (async_call *)job;

    /* Alone this time: its reservation's part was settled. */
    if (a->plan.main != 0)
        a->reqs[0] = a->reqs[a->plan.main];
    memset(&a->plan, 0, sizeof(a->plan));
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
        (sleep = wait_more(r, now, a->wait_until)) == 0)
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
    } else if (job->n > 0) {
        sl_reserve_after(&sl->rsv, &a->plan, SLUICE_OK, a->res);
        sl_deny_after(&sl->deny, &sl->url.cfg, &a->reqs[a->plan.main],
                      &a->res[a->plan.main], 1);
    }
    if (async_sleeps(a))
        return;
    if (a->many) {
        st = finish_many(sl, a->reqs, a->res, job->n, a->map, SLUICE_OK, a->out,
                         a->n, a->first, a->first_msg, err);
    } else {
        if (!a->cached)
            memset(a->out, 0, sizeof(*a->out));
        st = finish_one(sl, &a->reqs[a->plan.main], SLUICE_OK,
                        a->cached ? NULL : &a->res[a->plan.main], a->out);
        count_one(sl, a->op, st, a->out);
        if (st != SLUICE_OK || no_result(a->op))
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
    sl_request one;
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
    /* Answered by its reservation or the deny cache: nothing to send, and
     * the callback still runs from the loop. */
    a->cached = sl_reserve_before(&sl->rsv, &sl->url.cfg, &a->reqs[0],
                                  &a->out[0], &a->plan) ||
                (r->prefix == NULL && sl_deny_before(&sl->deny, &sl->url.cfg,
                                                     &a->reqs[0], &a->out[0]));
    one = a->reqs[0];
    a->job.n =
        a->cached ? 0 : sl_reserve_plan(&sl->rsv, &one, &a->plan, a->reqs);
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
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
    if (bad_wait(wait_ms, err))
        return SLUICE_EINVAL;
    st = sl_call_prepare(sl, op, key, key_len, rules, cost, &r, err);
    if (st != SLUICE_OK) {
        count_one(sl, op, st, NULL);
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
    a->job.n = prepare_many(sl, reqs, n, a->reqs, a->map, a->out, &a->first,
                            a->first_msg, err);
    for (k = 0; k < a->job.n; k++) { /* what is sent, copied */
        i = a->map[k];
        keep_request(a, k, at, reqs[i].key, reqs[i].key_len, reqs[i].rules);
        at += reqs[i].key_len;
    }
    /* None sent: the callback still runs, from the loop. */
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
}
