/* SPDX-License-Identifier: BSD-3-Clause */
/* pipeline.c - the stages of every call, blocking or on the caller's
 * loop, in their one order (pipeline.h): a decision by name's rules and
 * override, the reservations, the deny cache, the backend, then the fail
 * policy, shadow mode and the counters. A call's state changes only in
 * sl_pipe_mstate(); what it needs of its driver (a round trip, a sleep) it says
 * and returns. */
#include "algo.h"
#include "pipeline_stage.h"
#include "share.h"

#include <string.h>

/* ------------------------------------------------------------ prepare */

sluice_status sl_pipe_prepare_at(sluice *sl, sl_op op, const void *key,
                                 size_t key_len, const sluice_ruleset *rules,
                                 int64_t cost, int64_t now, sl_request *r,
                                 char *err)
{
    sluice_status st;

    /* No prefix, value or read unless set: a decision's members set one
     * by one (every decision comes here), the rest zeroed whole. */
    if (sl_op_decides(op)) {
        r->prefix = NULL;
        r->decide.granted = NULL;
        r->decide.violated = NULL;
    } else {
        memset(r, 0, sizeof(*r));
    }
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
    r->policy = &sl->policy; /* the handle's, unless a limiter's or call's */
    if (sl_op_decides(op)) {
        r->decide.rules = rules;
        r->decide.cost = cost;
    }
    return SLUICE_OK;
}

/* A call refused before it ran, counted under its limiter's name (NULL:
 * a decision on a key). */
static void count_refused(sluice *sl, const void *name, size_t name_len,
                          sl_op op, sluice_status st)
{
    sl_stats_answer(&sl->stats, name, name_len, op, st, false, NULL);
    sl_stats_call(&sl->stats, sl_stats_start(&sl->stats));
}

void sl_pipe_count(sluice *sl, sl_op op, sluice_status st)
{
    count_refused(sl, NULL, 0, op, st);
}

sluice_status sl_pipe_policy(sluice *sl, sl_op op, const sluice_policy *in,
                             sl_policy *out, char *err)
{
    sluice_status st = sl_policies_take(&sl->policy, in, out, err);

    if (st == SLUICE_OK)
        st = sl_policy_provide(sl, out, err);
    if (st != SLUICE_OK)
        count_refused(sl, NULL, 0, op, st);
    return st;
}

/* The longest wait an acquire may ask for: a day. */
#define MAX_WAIT_MS 86400000

bool sl_pipe_bad_wait(int64_t wait_ms, char *err)
{
    if (wait_ms >= 0 && wait_ms <= MAX_WAIT_MS)
        return false;
    sl_errf(err, SL_ERR_LEN, "wait_ms %lld: expected 0..%d ms",
            (long long)wait_ms, MAX_WAIT_MS);
    return true;
}

sluice_status sl_pipe_settle(sluice *sl, const sluice_result *acquired,
                             bool need_acquired, int64_t reserved,
                             int64_t actual, sl_op *op, int64_t *amount)
{
    bool bad_reserved = reserved < 0 || reserved > SL_MAX_LIMIT;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (need_acquired && acquired == NULL) {
        sl_errf(err, SL_ERR_LEN, "settle: acquired is NULL");
        return SLUICE_EINVAL;
    }
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

/* ---------------------------------------------------------- the setup */

/* Fills nm for (name, client), both checked. */
static void name_set(sl_pipe_name *nm, const void *name, size_t name_len,
                     const void *client, size_t client_len)
{
    nm->name_len = name_len;
    nm->client_len = client_len;
    nm->kl = sl_names_compose(nm->key, name, name_len, client, client_len);
    nm->sent = 0;
    nm->again = false;
    nm->failed = SLUICE_OK;
    nm->kind = SLUICE_OVERRIDE_NONE;
    nm->defined = false;
    nm->def = NULL;
}

sluice_status sl_pipe_name_prepare(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, const void *client,
                                   size_t client_len, int64_t cost,
                                   sl_pipe_name *nm, sl_request *r, char *err)
{
    /* Rules that pass the check, for the request's (its key, its cost)
     * before its own are known: bad input is told at once. */
    static const sluice_ruleset any = {
        1, {{.algorithm = SLUICE_FIXED, .limit = 1, .period_ms = 1000}}};
    sluice_status st;

    if (client == NULL)
        client_len = 0;
    st = sl_names_check(name, name_len, client, client_len, err);
    if (st != SLUICE_OK) {
        count_refused(sl, NULL, 0, op, st); /* no name to count it by */
        return st;
    }
    name_set(nm, name, name_len, client, client_len);
    st = sl_pipe_prepare(sl, op, nm->key, nm->kl, &any, cost, r, err);
    if (st != SLUICE_OK) {
        count_refused(sl, name, name_len, op, st);
        return st;
    }
    r->prefix = sl->names.prefix;
    return SLUICE_OK;
}

void sl_pipe_by_name(sl_pipe *p, sl_pipe_name *nm)
{
    p->name = nm;
    p->state = SL_PIPE_NAME;
}

void sl_pipe_many(sl_pipe *p, sluice *sl, const sluice_request *reqs, size_t n,
                  const sl_policy *pol, sluice_result *out, uint8_t *violated,
                  sl_request *send, sluice_result *res, size_t *map,
                  char *first_msg, char *err)
{
    sl_pipe_one(p, sl, NULL, out, send, res, err);
    p->pol = pol != NULL ? pol : &sl->policy;
    memset(violated, 0, n);
    p->violated = violated;
    p->first = SLUICE_OK;
    p->state = SL_PIPE_BATCH;
    p->many = true;
    p->may_wait = false;
    p->n = n;
    p->batch = reqs;
    p->map = map;
    p->first_msg = first_msg;
    first_msg[0] = '\0';
}

/* --------------------------------------- LOCAL, SENT, REFILLED: a key */

static sl_pipe_need stage_answer(sl_pipe *p);

/* A settle whose acquire the backend did not charge (docs/SEMANTICS.md,
 * "settle"): one the fail policy admitted with fail=fallback is settled
 * on the fallback store, which charged it; any other (the policy's open
 * answer, a denial, shadow mode, an allow-listed client) charged nothing
 * anywhere, and nothing is settled: its answer is the acquire's, its
 * status saying so, and nothing is counted. Never a refund on the backend
 * of what others spent there. */
static sl_pipe_need settle_elsewhere(sl_pipe *p)
{
    const sluice_result *a = p->after;

    if (!(a->allowed && sl_policy_backend_failed(a->status) &&
          sl_policy_settle(p->sl, &p->reqs[0], a->status, p->out))) {
        *p->out = *a;
        p->out->retry_after_ms = -1;
        p->uncounted = true;
    }
    p->answered = true;
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
    return stage_answer(p);
}

static sl_pipe_need stage_local(sl_pipe *p)
{
    sluice *sl = p->sl;
    sl_request *r = &p->reqs[0];

    *p->violated = 0; /* a waiting acquire's last denial is not this one */
    if (p->after != NULL &&
        !(p->after->allowed && (p->after->status == SLUICE_OK ||
                                p->after->status == SLUICE_RESERVED)))
        return settle_elsewhere(p);

    if (sl_reserve_before(&sl->rsv, &sl->url.cfg, r, p->may_wait, p->out,
                          &p->plan)) {
        p->answered = true;
        if (p->plan.e != NULL) { /* refilled now; its failure is not ours */
            p->nsend = sl_reserve_refill(r, &p->plan, p->send);
            p->send_err = p->scratch;
            sl_pipe_mstate(p, SL_PIPE_REFILLED);
            return SL_NEED_SEND;
        }
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
        return SL_NEED_GO;
    }
    if (sl_deny_before(&sl->deny, &sl->url.cfg, r, p->out)) {
        p->answered = true;
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
        return stage_answer(p);
    }
    if (p->name != NULL && p->name->failed != SLUICE_OK) {
        p->st = p->name->failed; /* its rules' read failed: so would it */
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
        return SL_NEED_GO;
    }
    if (p->plan.park && !sl->eng.closing &&
        sl_mono_ms() < p->began + sl->url.cfg.command_timeout_ms / 2) {
        p->wake_at = p->began + sl->url.cfg.command_timeout_ms / 2;
        sl_pipe_mstate(p, SL_PIPE_PARKED);
        return SL_NEED_PARK;
    }
    p->nsend = sl_reserve_plan(&sl->rsv, r, &p->plan, p->send);
    p->send_err = p->err;
    sl_pipe_mstate(p, SL_PIPE_SENT);
    return SL_NEED_SEND;
}

static sl_pipe_need stage_sent(sl_pipe *p)
{
    sluice *sl = p->sl;
    const sluice_result *res = &p->res[p->plan.main];
    int how = sl_reserve_after(&sl->rsv, &p->plan, p->sent_st, p->res, p->out);

    p->settled = (how & SL_RSV_SETTLED) != 0;
    if (how & SL_RSV_RESCUED) {
        p->answered = true; /* admitted from the key's lots */
        *p->violated = 0;   /* the backend's denial is not the answer */
    } else if (p->sent_st == SLUICE_OK) {
        sl_deny_after(&sl->deny, &sl->url.cfg, &p->reqs[0], res, 1);
        p->st = res->status;
    } else {
        p->st = p->sent_st;
    }
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
    return stage_answer(p);
}

static sl_pipe_need stage_refilled(sl_pipe *p)
{
    int how = sl_reserve_after(&p->sl->rsv, &p->plan, p->sent_st, p->res, NULL);

    p->settled = (how & SL_RSV_SETTLED) != 0;
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}

/* Woken behind its key's batch, or from a waiting acquire's sleep: asked
 * again, at the time now. */
static sl_pipe_need stage_woken(sl_pipe *p)
{
    p->reqs[0].now_ms = sl_pipe_now(p->sl);
    p->answered = false;
    p->st = SLUICE_OK;
    p->plan.main = 0;
    sl_pipe_mstate(p, SL_PIPE_LOCAL);
    return SL_NEED_GO;
}

/* ---------------------------------------------- ANSWER: policy, shadow */

/* Shadow mode (pol's): an acquire the rules denied (or the deny cache, or
 * a deny list) is admitted, its status saying so; it was not charged. */
static void shadow(const sl_policy *pol, sl_op op, sluice_result *r)
{
    if (pol->shadow && op == SL_OP_ACQUIRE && !r->allowed &&
        (r->status == SLUICE_OK || r->status == SLUICE_CACHED ||
         r->status == SLUICE_DENYLISTED)) {
        r->allowed = true;
        r->status = SLUICE_SHADOWED;
    }
}

/* Shadow mode: an acquire at most is granted all it asked; what the rules
 * granted is what was charged. */
static void shadow_at_most(const sl_request *rq, sluice_result *r)
{
    if (rq->policy->shadow && r->status == SLUICE_OK &&
        *rq->decide.granted < rq->decide.cost) {
        *rq->decide.granted = rq->decide.cost;
        r->allowed = true;
        r->status = SLUICE_SHADOWED;
    }
}

/* The statuses of a request answered, not failed: one test of a bit. */
#define ANSWERED                                                     \
    (1u << SLUICE_OK | 1u << SLUICE_CACHED | 1u << SLUICE_SHADOWED | \
     1u << SLUICE_RESERVED | 1u << SLUICE_ALLOWLISTED |              \
     1u << SLUICE_DENYLISTED)

/* The name a request counts under: its limiter's (nm NULL: none). */
typedef struct counted_as {
    const void *name;
    size_t len;
} counted_as;

static counted_as counted(const sl_pipe_name *nm)
{
    counted_as c = {NULL, 0};

    if (nm != NULL) {
        c.name = sl_pipe_name_of(nm);
        c.len = nm->name_len;
    }
    return c;
}

/* Counts one request by its result (pol: its policy): here, and in
 * count_one and count_refused, every request is counted, by the handle
 * and (by name) by its limiter. */
static void count_result(sluice *sl, counted_as as, sl_op op,
                         const sl_policy *pol, const sluice_result *r)
{
    if ((unsigned)r->status < 32 && (ANSWERED >> (unsigned)r->status & 1u))
        sl_stats_answer(&sl->stats, as.name, as.len, op, SLUICE_OK, false, r);
    else
        sl_stats_answer(&sl->stats, as.name, as.len, op, r->status,
                        sl_policy_answers(pol, r->status), r);
}

/* Ops whose call returns no result, only a status. */
static bool no_result(sl_op op)
{
    return op == SL_OP_RESET || op == SL_OP_LEASE_RELEASE;
}

/* Counts a single call's request: the call's status st and, when it
 * succeeded with a result, that result. */
static void count_one(sluice *sl, counted_as as, const sl_request *rq,
                      sluice_status st, const sluice_result *r)
{
    sl_op op = rq->op;

    if (st != SLUICE_OK)
        sl_stats_answer(&sl->stats, as.name, as.len, op, st, false, NULL);
    else if (!no_result(op))
        count_result(sl, as, op, rq->policy, r);
    else
        sl_stats_answer(&sl->stats, as.name, as.len, op, SLUICE_OK, false,
                        NULL);
}

/* A waiting acquire's answer r at now (monotonic ms), its deadline until:
 * how long to sleep before asking again, or 0 when r is the answer
 * (admitted, failed, or a denial that never fits, or fits only after the
 * deadline). */
static int64_t wait_more(const sluice_result *r, int64_t now, int64_t until)
{
    if (r->allowed || (r->status != SLUICE_OK && r->status != SLUICE_CACHED) ||
        r->retry_after_ms < 0 || now + r->retry_after_ms > until)
        return 0;
    return r->retry_after_ms > 0 ? r->retry_after_ms : 1;
}

static sl_pipe_need stage_answer(sl_pipe *p)
{
    sluice *sl = p->sl;
    const sl_request *r = &p->reqs[0];
    sluice_status st = p->st;
    int64_t now, sleep;

    if (!p->answered && st == SLUICE_OK)
        *p->out = p->res[p->plan.main];
    else if (!p->answered)
        st = sl_policy_fail(sl, r, st, p->out);
    if (st == SLUICE_OK && r->op == SL_OP_AT_MOST)
        shadow_at_most(r, p->out);
    else if (st == SLUICE_OK)
        shadow(r->policy, r->op, p->out);
    /* A waiting acquire denied asks again once it fits, by its deadline. */
    if (st == SLUICE_OK && p->wait_until > 0 && !r->policy->shadow &&
        !sl->eng.closing &&
        (sleep = wait_more(p->out, now = sl_mono_ms(), p->wait_until)) > 0) {
        p->wake_at = now + sleep;
        sl_pipe_mstate(p, SL_PIPE_ASLEEP);
        return SL_NEED_SLEEP;
    }
    if (no_result(r->op))
        p->out->status = st;
    if (!p->uncounted)
        count_one(sl, counted(p->name), r, st, p->out);
    sl_stats_call(&sl->stats, p->t0);
    p->st = st;
    sl_pipe_mstate(p, SL_PIPE_DONE);
    return SL_NEED_DONE;
}

/* ------------------------------------------------------------ a batch */

/* Each request checked and asked of the reservations and the deny cache:
 * those to send go to send[0..nsend), their places out[map[k]]; out holds
 * the others' answers (the cache's, or why they were refused: the first
 * such status in first, its message in first_msg). */
static sl_pipe_need stage_local_many(sl_pipe *p)
{
    sluice *sl = p->sl;
    int64_t now = sl_pipe_now(sl);
    sl_rsv_plan plan; /* a batch's misses take no batch of their own */
    size_t i, m = 0;

    p->batch_now = now;
    for (i = 0; i < p->n; i++) {
        const sluice_request *q = &p->batch[i];
        sluice_status rst =
            sl_pipe_prepare_at(sl, SL_OP_ACQUIRE, q->key, q->key_len, q->rules,
                               q->cost, now, &p->send[m], p->err);

        memset(&p->out[i], 0, sizeof(p->out[i]));
        p->out[i].status = rst;
        if (rst == SLUICE_OK) {
            p->send[m].decide.violated = &p->violated[i];
            p->send[m].policy = p->pol;
        }
        if (rst == SLUICE_OK &&
            sl_reserve_before(&sl->rsv, &sl->url.cfg, &p->send[m], false,
                              &p->out[i], &plan)) {
            sl_reserve_cancel(&plan);
        } else if (rst == SLUICE_OK &&
                   sl_deny_before(&sl->deny, &sl->url.cfg, &p->send[m],
                                  &p->out[i])) {
            continue;
        } else if (rst == SLUICE_OK) {
            p->map[m++] = i;
        } else if (p->first == SLUICE_OK) {
            p->first = rst;
            memcpy(p->first_msg, p->err, SL_ERR_LEN);
        }
    }
    p->nsend = m;
    p->send_err = p->err;
    sl_pipe_mstate(p, SL_PIPE_BATCH_SENT);
    return SL_NEED_SEND;
}

/* The batch answered: the fail policy, shadow mode and the counters, for
 * all n. */
static sl_pipe_need stage_answer_many(sl_pipe *p)
{
    sluice *sl = p->sl;
    size_t i;

    if (p->sent_st == SLUICE_OK)
        sl_deny_after(&sl->deny, &sl->url.cfg, p->send, p->res, p->nsend);
    p->st = sl_policy_many(sl, p->send, p->res, p->nsend, p->map, p->sent_st,
                           p->out, p->first, p->first_msg, p->err);
    for (i = 0; i < p->n; i++) {
        sluice_status rst = p->out[i].status;

        shadow(p->pol, SL_OP_ACQUIRE, &p->out[i]);
        count_result(sl, counted(NULL), SL_OP_ACQUIRE, p->pol, &p->out[i]);
        /* A request that failed has no rules it exceeded, whatever a
         * try of it decided before it failed. */
        if (!((unsigned)rst < 32 && (ANSWERED >> (unsigned)rst & 1u)) &&
            !sl_policy_answers(p->pol, rst))
            p->violated[i] = 0;
    }
    sl_stats_call(&sl->stats, p->t0);
    sl_pipe_mstate(p, SL_PIPE_DONE);
    return SL_NEED_DONE;
}

/* ----------------------------------------------- what decided each */

/* The rules of the request decided out unless nothing did: a fail
 * policy's open or closed answer (its reset code says so), a listed
 * client, a lease (limit 0); a reset is its rules'. Under fail=fallback
 * the fallback store decided a request whose backend failed, by the rules
 * it divides. sluice_result_decided(), inline: every decision ends here. */
static const sluice_ruleset *decided_by(const sluice_ruleset *rules, sl_op op,
                                        const sluice_result *out,
                                        const sl_policy *pol,
                                        int64_t *divide_by)
{
    *divide_by = 1;
    if (op != SL_OP_RESET &&
        (out->limit <= 0 || out->rule_reset_code == SL_RESET_UNDECIDED))
        return NULL;
    if (out->status != SLUICE_OK && rules != NULL &&
        sl_policy_backend_failed(out->status))
        *divide_by = (int64_t)pol->fallback_instances;
    return rules;
}

void sl_pipe_record(const sl_pipe *p)
{
    const sl_request *r = p->reqs;
    const sluice_ruleset *rs;
    int64_t divide_by;
    sl_answers *a;
    size_t i;

    if (p->st != SLUICE_OK) { /* a failed call has no answers */
        (void)sl_share_answers(p->sl, 0, 0);
    } else if (!p->many) {
        rs = decided_by(sl_op_decides(r->op) ? r->decide.rules : NULL, r->op,
                        p->out, r->policy, &divide_by);
        sl_share_answer1(p->sl, r->now_ms, rs, divide_by,
                         p->name != NULL ? p->name->kind : SLUICE_OVERRIDE_NONE,
                         p->violated[0]);
    } else if ((a = sl_share_answers(p->sl, p->n, p->batch_now)) != NULL) {
        for (i = 0; i < p->n; i++) {
            rs = decided_by(p->batch[i].rules, SL_OP_ACQUIRE, &p->out[i],
                            p->pol, &divide_by);
            sl_share_answer(a, i, rs, divide_by, SLUICE_OVERRIDE_NONE,
                            p->violated[i]);
        }
    }
    if (p->st == SLUICE_OK) {
        const sl_policy *pol = p->many ? p->pol : r->policy;

        sl_share_http(p->sl, pol->http_name, pol->unit, pol->unit_name);
    }
}

/* ------------------------------------------------------------ the run */

static sl_pipe_need stage_done(sl_pipe *p)
{
    (void)p;
    return SL_NEED_DONE;
}

/* The stage of each state: the pipeline's order, as data. */
sl_pipe_need (*const sl_pipe_stages[SL_PIPE_DONE + 1])(sl_pipe *p) = {
    [SL_PIPE_NAME] = sl_pipe_stage_name,
    [SL_PIPE_READ] = sl_pipe_stage_read,
    [SL_PIPE_DEFINED] = sl_pipe_stage_defined,
    [SL_PIPE_LOCAL] = stage_local,
    [SL_PIPE_SENT] = stage_sent,
    [SL_PIPE_REFILLED] = stage_refilled,
    [SL_PIPE_PARKED] = stage_woken,
    [SL_PIPE_ASLEEP] = stage_woken,
    [SL_PIPE_ANSWER] = stage_answer,
    [SL_PIPE_BATCH] = stage_local_many,
    [SL_PIPE_BATCH_SENT] = stage_answer_many,
    [SL_PIPE_DONE] = stage_done,
};

void sl_pipe_abandon(sl_pipe *p)
{
    if (p->state == SL_PIPE_PARKED) {
        /* Behind its key's batch: nothing was sent. */
        p->st = SLUICE_EIO;
        sl_errf(p->err, SL_ERR_LEN,
                "the handle closed while the call waited for its key's "
                "batch; nothing was sent");
        p->answered = false;
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
    } else if (p->state == SL_PIPE_ASLEEP) {
        /* A waiting acquire: its last answer is the answer. */
        p->answered = true;
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
    }
    (void)sl_pipe_run(p);
}
