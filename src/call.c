/* SPDX-License-Identifier: BSD-3-Clause */
/* call.c - the blocking calls: the pipeline's driver (pipeline.h) that
 * does what a call needs in the calling thread: its round trips through
 * the queue of threads sharing the handle (share.c), its sleeps with
 * nanosleep. call_loop.c drives the same pipeline on the caller's loop. */
#include "call.h"

#include "pipeline.h"

#include <string.h>
#include <time.h>

/* ----------------------------------------------------------- blocking */

sluice_status sl_call_prepare(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err)
{
    return sl_pipe_prepare(sl, op, key, key_len, rules, cost, r, err);
}

void sl_call_count(sluice *sl, sl_op op, sluice_status st)
{
    sl_pipe_count(sl, op, st);
}

sluice_status sl_call_blocking(const sluice *sl, char *err)
{
    if (!sl->eng.attached)
        return SLUICE_OK;
    sl_errf(err, SL_ERR_LEN,
            "the handle is attached to an event loop: use the _async calls "
            "(or open another handle for blocking calls)");
    return SLUICE_EINVAL;
}

/* Sleeps ms, whatever signals come. */
static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* p's round trip, through the queue of threads sharing the handle. A
 * refill after an admission from a reservation goes only when no other
 * thread's round trip is in flight or queued: the admission, answered
 * already, never waits behind another thread's round trip (a later
 * admission on the key asks again); when it goes, it is this thread's own
 * round trip at once. */
static sluice_status send(sl_pipe *p)
{
    sluice_status st;

    if (p->state != SL_PIPE_REFILLED)
        return sl_share_decide(p->sl, p->send, p->nsend, p->res, p->send_err);
    if (!sl_share_decide_now(p->sl, p->send, p->nsend, p->res, p->send_err,
                             &st))
        sl_reserve_cancel(&p->plan);
    return st;
}

/* Runs p to its answer, in this thread. */
static sluice_status drive(sl_pipe *p)
{
    int64_t left;

    for (;;) {
        switch (sl_pipe_run(p)) {
        case SL_NEED_SEND:
            p->sent_st = SLUICE_OK;
            if (p->nsend > 0) {
                memset(p->res, 0, p->nsend * sizeof(*p->res));
                p->sent_st = send(p);
            }
            break;
        case SL_NEED_SLEEP:
        case SL_NEED_PARK: /* (a blocking call waits in the reservations) */
            if ((left = p->wake_at - sl_mono_ms()) > 0)
                sleep_ms(left);
            /* Asked again on a budget of its own, its message new. */
            (void)sl_share_err(p->sl);
            break;
        case SL_NEED_DONE:
        case SL_NEED_GO:
            return p->st;
        }
    }
}

/* The blocking driver: runs the prepared r (nm: a decision by name's)
 * through the pipeline in this thread; *out set unless it fails (out
 * NULL: a reset's, not kept). */
static sluice_status run(sluice *sl, sl_request *r, sl_pipe_name *nm,
                         int64_t wait_ms, const sluice_result *after,
                         sluice_result *out, char *err)
{
    sl_request send[3]; /* a refund, the request, a batch (reserve.h) */
    sluice_result res[3], none;
    sluice_status st;
    sl_pipe p;

    sl_pipe_one(&p, sl, r, out != NULL ? out : &none, send, res, err);
    if (nm != NULL)
        sl_pipe_by_name(&p, nm);
    if (wait_ms > 0)
        p.wait_until = sl_mono_ms() + wait_ms;
    p.after = after;
    st = drive(&p);
    sl_pipe_record(&p);
    return st;
}

sluice_status sl_call_run(sluice *sl, sl_request *r, sluice_result *out,
                          char *err)
{
    sluice_result res;
    sluice_status st;

    if (r->op == SL_OP_RULES_GET || r->op == SL_OP_RULES_PUT ||
        r->op == SL_OP_RULES_DEL || r->op == SL_OP_OVER_SET ||
        r->op == SL_OP_OVER_DEL || r->op == SL_OP_OVER_LIST) {
        memset(&res, 0, sizeof(res));
        st = sl_share_decide(sl, r, 1, &res, err);
        return st == SLUICE_OK ? res.status : st;
    }
    return run(sl, r, NULL, 0, NULL, out, err);
}

/* One request, blocking. granted: an acquire at most's (else NULL);
 * in: the call's policy (NULL: the handle's). */
static sluice_status decide_with(sluice *sl, sl_op op, const void *key,
                                 size_t key_len, const sluice_ruleset *rules,
                                 int64_t cost, int64_t *granted,
                                 int64_t wait_ms, const sluice_result *after,
                                 const sluice_policy *in, sluice_result *out)
{
    sl_policy pol;
    sl_request r;
    sluice_status st;
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
    if (granted != NULL)
        *granted = 0;
    if (in != NULL && (st = sl_pipe_policy(sl, op, in, &pol, err)) != SLUICE_OK)
        return st;
    st = sl_pipe_prepare(sl, op, key, key_len, rules, cost, &r, err);
    if (st != SLUICE_OK) {
        sl_pipe_count(sl, op, st);
        return st;
    }
    r.decide.granted = granted;
    if (in != NULL)
        r.policy = &pol;
    return run(sl, &r, NULL, wait_ms, after, out, err);
}

static sluice_status decide_one(sluice *sl, sl_op op, const void *key,
                                size_t key_len, const sluice_ruleset *rules,
                                int64_t cost, int64_t *granted, int64_t wait_ms,
                                const sluice_result *after, sluice_result *out)
{
    return decide_with(sl, op, key, key_len, rules, cost, granted, wait_ms,
                       after, NULL, out);
}

sluice_status sl_call_by_name(sluice *sl, sl_op op, const void *name,
                              size_t name_len, const void *client,
                              size_t client_len, int64_t cost,
                              sluice_result *out)
{
    sl_pipe_name nm;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_call_blocking(sl, err)) != SLUICE_OK)
        return st;
    if (out == NULL && op != SL_OP_RESET) {
        sl_errf(err, SL_ERR_LEN, "out is NULL");
        return SLUICE_EINVAL;
    }
    st = sl_pipe_name_prepare(sl, op, name, name_len, client, client_len, cost,
                              &nm, &r, err);
    if (st != SLUICE_OK)
        return st;
    return run(sl, &r, &nm, 0, NULL, out, err);
}

sluice_status sluice_acquire(sluice *sl, const void *key, size_t key_len,
                             const sluice_ruleset *rules, int64_t cost,
                             sluice_result *out)
{
    return decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, 0,
                      NULL, out);
}

sluice_status sluice_acquire_with(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t cost,
                                  const sluice_policy *p, sluice_result *out)
{
    return decide_with(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, 0,
                       NULL, p, out);
}

sluice_status sluice_acquire_at_most(sluice *sl, const void *key,
                                     size_t key_len,
                                     const sluice_ruleset *rules,
                                     int64_t max_cost, int64_t *granted,
                                     sluice_result *out)
{
    return decide_one(sl, SL_OP_AT_MOST, key, key_len, rules, max_cost, granted,
                      0, NULL, out);
}

sluice_status sluice_refund(sluice *sl, const void *key, size_t key_len,
                            const sluice_ruleset *rules, int64_t amount,
                            sluice_result *out)
{
    return decide_one(sl, SL_OP_REFUND, key, key_len, rules, amount, NULL, 0,
                      NULL, out);
}

sluice_status sluice_settle(sluice *sl, const void *key, size_t key_len,
                            const sluice_ruleset *rules, int64_t reserved,
                            int64_t actual, sluice_result *out)
{
    sl_op op;
    int64_t amount;
    sluice_status st;

    st = sl_pipe_settle(sl, NULL, false, reserved, actual, &op, &amount);
    if (st != SLUICE_OK)
        return st;
    return decide_one(sl, op, key, key_len, rules, amount, NULL, 0, NULL, out);
}

sluice_status sluice_settle_after(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules,
                                  const sluice_result *acquired,
                                  int64_t reserved, int64_t actual,
                                  sluice_result *out)
{
    sl_op op;
    int64_t amount;
    sluice_status st;

    st = sl_pipe_settle(sl, acquired, true, reserved, actual, &op, &amount);
    if (st != SLUICE_OK)
        return st;
    return decide_one(sl, op, key, key_len, rules, amount, NULL, 0, acquired,
                      out);
}

sluice_status sluice_peek(sluice *sl, const void *key, size_t key_len,
                          const sluice_ruleset *rules, int64_t cost,
                          sluice_result *out)
{
    return decide_one(sl, SL_OP_PEEK, key, key_len, rules, cost, NULL, 0, NULL,
                      out);
}

sluice_status sluice_reset(sluice *sl, const void *key, size_t key_len,
                           const sluice_ruleset *rules)
{
    return decide_one(sl, SL_OP_RESET, key, key_len, rules, 1, NULL, 0, NULL,
                      NULL);
}

sluice_status sluice_acquire_wait(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t cost,
                                  int64_t wait_ms, sluice_result *out)
{
    if (sl == NULL)
        return SLUICE_EINVAL;
    if (sl_pipe_bad_wait(wait_ms, sl_share_err(sl)))
        return SLUICE_EINVAL;
    return decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL,
                      wait_ms, NULL, out);
}

sluice_status sluice_acquire_many(sluice *sl, const sluice_request *reqs,
                                  size_t n, sluice_result *out)
{
    return sluice_acquire_many_with(sl, reqs, n, NULL, out);
}

sluice_status sluice_acquire_many_with(sluice *sl, const sluice_request *reqs,
                                       size_t n, const sluice_policy *in,
                                       sluice_result *out)
{
    sl_policy pol;
    sl_request stack_reqs[64], *rs = stack_reqs;
    sluice_result stack_res[64], *res = stack_res;
    uint8_t stack_v[64], *v = stack_v;
    size_t *map = NULL;
    sluice_status st;
    char first_msg[SL_ERR_LEN], *err;
    sl_pipe p;

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
    if (in != NULL &&
        (st = sl_pipe_policy(sl, SL_OP_ACQUIRE, in, &pol, err)) != SLUICE_OK)
        return st;
    /* calloc's overflow check: n comes from the caller. Each after the
     * last succeeded: a count whose first array overflows is not asked
     * for again in one that does not (n bytes of SIZE_MAX / 8 + 1). */
    if (n > 64) {
        rs = sl_calloc(n, sizeof(*rs));
        res = rs != NULL ? sl_calloc(n, sizeof(*res)) : NULL;
        v = res != NULL ? sl_calloc(n, 1) : NULL;
    }
    map = v != NULL ? sl_calloc(n, sizeof(*map)) : NULL;
    if (rs == NULL || res == NULL || v == NULL || map == NULL) {
        st = SLUICE_ENOMEM;
        sl_errf(err, SL_ERR_LEN, "acquire_many: out of memory for %zu requests",
                n);
    } else {
        sl_pipe_many(&p, sl, reqs, n, in != NULL ? &pol : NULL, out, v, rs, res,
                     map, first_msg, err);
        st = drive(&p);
        sl_pipe_record(&p);
    }
    if (rs != stack_reqs)
        sl_free(rs);
    if (res != stack_res)
        sl_free(res);
    if (v != stack_v)
        sl_free(v);
    sl_free(map);
    return st;
}
