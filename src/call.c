/* SPDX-License-Identifier: BSD-3-Clause */
/* call.c - the request pipeline: every call, blocking or on the caller's
 * loop, runs the same stages: prepare (check the request) -> the
 * reservations -> the deny cache -> the backend -> on its answer, the fail
 * policy, shadow mode and the counters. Here the stages and the blocking
 * calls, which hand their requests to the backend through the queue of
 * threads sharing the handle (share.c) and wait there; call_loop.c runs
 * the same stages on the caller's loop. */
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
        r->status == SLUICE_SHADOWED || r->status == SLUICE_RESERVED ||
        r->status == SLUICE_ALLOWLISTED || r->status == SLUICE_DENYLISTED)
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, r);
    else
        sl_stats_answer(&sl->stats, op, r->status,
                        sl_policy_answers(sl, r->status), r);
}

/* Ops whose call returns no result, only a status. */
bool sl_call_no_result(sl_op op)
{
    return op == SL_OP_RESET || op == SL_OP_LEASE_RELEASE;
}

/* Counts a single call's request: the call's status st and, when it
 * succeeded with a result, that result. */
void sl_call_count_one(sluice *sl, sl_op op, sluice_status st,
                       const sluice_result *r)
{
    if (st != SLUICE_OK)
        sl_stats_answer(&sl->stats, op, st, false, NULL);
    else if (r != NULL && !sl_call_no_result(op))
        count_result(sl, op, r);
    else
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, NULL);
}

void sl_call_count(sluice *sl, sl_op op, sluice_status st)
{
    sl_call_count_one(sl, op, st, NULL);
}

void sl_call_count_answer(sluice *sl, sl_op op, const sluice_result *r)
{
    sl_call_count_one(sl, op, SLUICE_OK, r);
}

/* One request answered (res; NULL: the deny cache answered in *out): the
 * fail policy, then shadow mode. Returns the call's status. */
sluice_status sl_call_finish_one(const sluice *sl, const sl_request *r,
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
sluice_status sl_call_finish_many(sluice *sl, const sl_request *rs,
                                  const sluice_result *res, size_t m,
                                  const size_t *map, sluice_status st,
                                  sluice_result *out, size_t n,
                                  sluice_status first, const char *first_msg,
                                  char *err)
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
size_t sl_call_prepare_many(sluice *sl, const sluice_request *reqs, size_t n,
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
            sl_reserve_before(&sl->rsv, &sl->url.cfg, &rs[m], false, &out[i],
                              &plan)) {
            sl_reserve_cancel(&plan);
            continue;
        }
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

    if (sl_reserve_before(&sl->rsv, &sl->url.cfg, r, true, out, &plan)) {
        if (plan.e != NULL) { /* refilled now; its failure is not ours */
            char scratch[SL_ERR_LEN];

            n = sl_reserve_refill(r, &plan, rs);
            memset(res, 0, sizeof(res[0]));
            st = sl_share_decide(sl, rs, n, res, scratch);
            sl_reserve_after(&sl->rsv, &plan, st, res, NULL);
        }
        return sl_call_finish_one(sl, r, SLUICE_OK, NULL, out);
    }
    if (r->prefix == NULL && sl_deny_before(&sl->deny, &sl->url.cfg, r, out))
        return sl_call_finish_one(sl, r, SLUICE_OK, NULL, out);
    n = sl_reserve_plan(&sl->rsv, r, &plan, rs);
    memset(res, 0, n * sizeof(res[0]));
    st = sl_share_decide(sl, rs, n, res, err);
    if (sl_reserve_after(&sl->rsv, &plan, st, res, out) & SL_RSV_RESCUED)
        return sl_call_finish_one(sl, r, SLUICE_OK, NULL, out);
    if (st == SLUICE_OK)
        sl_deny_after(&sl->deny, &sl->url.cfg, r, &res[plan.main], 1);
    return sl_call_finish_one(sl, r, st, &res[plan.main], out);
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
    sl_call_count_one(sl, r->op, st, out);
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
    sl_call_count_one(sl, op, st, out);
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

sluice_status sl_call_settle(int64_t reserved, int64_t actual, sl_op *op,
                             int64_t *amount, char *err)
{
    bool bad_reserved = reserved < 0 || reserved > SL_MAX_LIMIT;

    if (bad_reserved || actual < 0 || actual > SL_MAX_LIMIT) {
        sl_errf(err, SL_ERR_LEN, "%s %lld is out of range 0..%lld",
                bad_reserved ? "reserved" : "actual",
                (long long)(bad_reserved ? reserved : actual),
                (long long)SL_MAX_LIMIT);
        return SLUICE_ECOST;
    }
    *op = actual > reserved ? SL_OP_FORCE : SL_OP_REFUND;
    *amount = actual > reserved ? actual - reserved : reserved - actual;
    return SLUICE_OK;
}

sluice_status sluice_settle(sluice *sl, const void *key, size_t key_len,
                            const sluice_ruleset *rules, int64_t reserved,
                            int64_t actual, sluice_result *out)
{
    sl_op op;
    int64_t amount;
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    st = sl_call_settle(reserved, actual, &op, &amount, sl_share_err(sl));
    if (st != SLUICE_OK)
        return st;
    return decide_one(sl, op, key, key_len, rules, amount, NULL, out);
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

bool sl_call_bad_wait(int64_t wait_ms, char *err)
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
int64_t sl_call_wait_more(const sluice_result *r, int64_t now, int64_t until)
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
    if (sl_call_bad_wait(wait_ms, sl_share_err(sl)))
        return SLUICE_EINVAL;
    until = sl_mono_ms() + wait_ms;
    for (;;) {
        st =
            decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, out);
        if (st != SLUICE_OK ||
            (sleep = sl_call_wait_more(out, sl_mono_ms(), until)) == 0)
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
    m = sl_call_prepare_many(sl, reqs, n, rs, map, out, &first, first_msg, err);
    if (m > 0) {
        memset(res, 0, m * sizeof(*res));
        st = sl_share_decide(sl, rs, m, res, err);
    }
    if (st == SLUICE_OK)
        sl_deny_after(&sl->deny, &sl->url.cfg, rs, res, m);
    st = sl_call_finish_many(sl, rs, res, m, map, st, out, n, first, first_msg,
                             err);
    sl_stats_call(&sl->stats, t0);
done:
    if (rs != stack_reqs)
        sl_free(rs);
    if (res != stack_res)
        sl_free(res);
    sl_free(map);
    return st;
}
