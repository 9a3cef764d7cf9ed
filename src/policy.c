/* SPDX-License-Identifier: BSD-3-Clause */
/* policy.c - the fail policy (fail=open|closed|fallback|error): which
 * failures of the backend it answers, what it answers, and the fallback
 * store, a private memory store that decides in this process while the
 * backend cannot. Each request's own (its sl_policy: the handle's, a
 * limiter's or a call's); and what a policy asks of the handle, made
 * when first asked. */
#include "algo.h"
#include "features/names.h"
#include "handle.h"
#include "share.h"
#include "store.h"

#include <string.h>

/* The fallback store: private, in this process, its keys under the
 * handle's prefix. */
sluice_status sl_policy_open(sluice *sl, char *err, size_t err_len)
{
    sl_url *mem = sl_calloc(1, sizeof(*mem));
    void *store = NULL;
    sluice_status st;

    if (mem == NULL) {
        sl_errf(err, err_len, "open: out of memory for the fallback store");
        return SLUICE_ENOMEM;
    }
    mem->scheme = SL_SCHEME_MEM;
    mem->cfg = sl->url.cfg;
    st = sl_backend_memory.open(mem, NULL, &store, err, err_len);
    sl_free(mem); /* the memory backend keeps what it needs */
    /* Published last: a thread that sees it sees the store. */
    if (st == SLUICE_OK)
        atomic_store_explicit(&sl->fallback, store, memory_order_release);
    return st;
}

/* The fallback store, or NULL. */
static void *fallback_of(const sluice *sl)
{
    return atomic_load_explicit(&sl->fallback, memory_order_acquire);
}

/* Whether pol asks for something the handle has not made. */
static bool lacks(const sluice *sl, const sl_policy *pol)
{
    return (pol->deny_cache && !sl_deny_on(&sl->deny)) ||
           (pol->reserve_ms > 0 && !sl_reserve_on(&sl->rsv)) ||
           (pol->fail == SLUICE_FAIL_FALLBACK && fallback_of(sl) == NULL);
}

sluice_status sl_policy_provide(sluice *sl, const sl_policy *pol, char *err)
{
    sluice_status st = SLUICE_OK;
    const char *what = NULL;

    if (!lacks(sl, pol)) /* made already: the common case, no lock */
        return SLUICE_OK;
    pthread_mutex_lock(&sl->make_mu);
    if (pol->deny_cache &&
        sl_deny_enable(&sl->deny, SLUICE_POLICY_DENY_CACHE_SIZE) != SLUICE_OK)
        what = "a deny cache";
    else if (pol->reserve_ms > 0 && sl_reserve_enable(&sl->rsv) != SLUICE_OK)
        what = "reservations";
    else if (pol->fail == SLUICE_FAIL_FALLBACK && fallback_of(sl) == NULL)
        st = sl_policy_open(sl, err, SL_ERR_LEN);
    pthread_mutex_unlock(&sl->make_mu);
    if (what != NULL) {
        sl_errf(err, SL_ERR_LEN, "policy: out of memory for %s", what);
        st = SLUICE_ENOMEM;
    }
    return st;
}

/* The backend could not decide: unreachable, too slow, or its server
 * answered with an error (READONLY on a replica, OOM under maxmemory,
 * LOADING, BUSY, MASTERDOWN, a cluster still down after its retries), an
 * unreadable reply, or a key too hot for WATCH. The fail policy answers
 * instead. Never for bad input, an unsupported request or our own memory:
 * those are the caller's to fix, and an open policy would hide them. */
bool sl_policy_answers(const sl_policy *pol, sluice_status st)
{
    return pol->fail != SLUICE_FAIL_ERROR && sl_policy_backend_failed(st);
}

bool sl_policy_backend_failed(sluice_status st)
{
    switch (st) {
    case SLUICE_ECONNECT:
    case SLUICE_ETIMEOUT:
    case SLUICE_EIO:
    case SLUICE_ESERVER:
    case SLUICE_EPROTO:
    case SLUICE_ECONTENDED:
        return true;
    case SLUICE_OK:
    case SLUICE_EINVAL:
    case SLUICE_EKEY:
    case SLUICE_ERULE:
    case SLUICE_ECOST:
    case SLUICE_EURL:
    case SLUICE_ETIME:
    case SLUICE_ENOMEM:
    case SLUICE_EUNSUPPORTED:
    case SLUICE_CACHED:
    case SLUICE_SHADOWED:
    case SLUICE_ENOLIMITER:
    case SLUICE_RESERVED:
    case SLUICE_ALLOWLISTED:
    case SLUICE_DENYLISTED:
        return false;
    }
    return false;
}

/* The rules of the fallback: each limit and burst divided by the
 * instances that share them (the request's policy's), rounded up. out
 * may be rs. */
void sl_policy_divide(const sl_policy *pol, const sluice_ruleset *rs,
                      sluice_ruleset *out)
{
    sl_ruleset_divide(rs, (int64_t)pol->fallback_instances, out);
}

/* fail=fallback: the request decided on the in-process store; false when
 * that store cannot decide it either. */
static bool fallback_result(const sluice *sl, const sl_request *rq,
                            sluice_status st, sluice_result *out)
{
    sluice_ruleset rs;
    sl_request r = *rq;
    void *store = fallback_of(sl);
    char err[SL_ERR_LEN];

    if (store == NULL)
        return false;
    if (sl_op_decides(rq->op)) { /* a lease keeps its most holders */
        sl_policy_divide(rq->policy, rq->decide.rules, &rs);
        r.decide.rules = &rs;
    }
    if (r.now_ms < 0) /* the server's clock: ours instead */
        r.now_ms = sl->url.cfg.clock(sl->url.cfg.clock_ctx);
    memset(out, 0, sizeof(*out));
    if (sl_memory_decide(store, &r, 1, out, err, sizeof(err)) != SLUICE_OK ||
        out->status != SLUICE_OK)
        return false;
    out->status = st;
    return true;
}

/* Whether rq is a decision without rules: one by name whose rules were
 * never read. */
static bool no_rules(const sl_request *rq)
{
    return sl_op_decides(rq->op) && rq->decide.rules == NULL;
}

static void policy_result(const sluice *sl, const sl_request *rq,
                          sluice_status st, sluice_result *out)
{
    bool open = rq->policy->fail == SLUICE_FAIL_OPEN;

    /* No rule decided, unless the fallback store does (it says so). */
    sl_request_violated(rq, 0);
    if (rq->policy->fail == SLUICE_FAIL_FALLBACK && !no_rules(rq) &&
        fallback_result(sl, rq, st, out))
        return;
    out->status = st;
    out->allowed = open;
    if (rq->op == SL_OP_AT_MOST)
        *rq->decide.granted = open ? rq->decide.cost : 0;
    out->limit = no_rules(rq) ? 0
                 : sl_op_decides(rq->op)
                     ? sl_rule_capacity(&rq->decide.rules->rules[0])
                     : rq->lease.max; /* a lease acquire */
    out->remaining = 0;
    /* A closed denial suggests retrying after a reconnect could succeed. */
    out->retry_after_ms = open ? -1 : (int64_t)sl->url.cfg.connect_timeout_ms;
    out->reset_after_ms = 0;
    out->rule = 0;
    out->rule_reset_code = SL_RESET_UNDECIDED; /* placeholders, not numbers */
}

/* The backend failed the request with st: the policy's answer in *out
 * (SLUICE_OK), or st when the policy does not answer it. */
sluice_status sl_policy_fail(const sluice *sl, const sl_request *rq,
                             sluice_status st, sluice_result *out)
{
    if (rq->op == SL_OP_RESET || rq->op == SL_OP_REFUND ||
        rq->op == SL_OP_FORCE || rq->op == SL_OP_LEASE_RELEASE ||
        !sl_policy_answers(rq->policy, st) ||
        /* No rules to decide by: the fallback store cannot. */
        (no_rules(rq) && rq->policy->fail == SLUICE_FAIL_FALLBACK))
        return st;
    policy_result(sl, rq, st, out);
    return SLUICE_OK;
}

bool sl_policy_settle(const sluice *sl, const sl_request *rq, sluice_status st,
                      sluice_result *out)
{
    return fallback_result(sl, rq, st, out);
}

sluice_status sl_policy_many(const sluice *sl, const sl_request *rs,
                             const sluice_result *res, size_t m,
                             const size_t *map, sluice_status st,
                             sluice_result *out, sluice_status first,
                             const char *first_msg, char *err)
{
    size_t i;

    for (i = 0; i < m; i++) {
        size_t j = map[i];

        if (st == SLUICE_OK && sl_policy_answers(rs[i].policy, res[i].status))
            policy_result(sl, &rs[i], res[i].status, &out[j]);
        else if (st == SLUICE_OK)
            out[j] = res[i];
        else if (sl_policy_answers(rs[i].policy, st))
            policy_result(sl, &rs[i], st, &out[j]);
        else
            out[j].status = st;
    }
    /* One policy for the batch (sluice_acquire_many_with): a failure of
     * the whole is answered by it, or returned. */
    if (st != SLUICE_OK && m > 0 && sl_policy_answers(rs[0].policy, st))
        st = SLUICE_OK;
    for (i = 0; i < m && first == SLUICE_OK && st == SLUICE_OK; i++)
        if (out[map[i]].status != SLUICE_OK &&
            !sl_policy_answers(rs[i].policy, out[map[i]].status))
            first = out[map[i]].status;
    if (st == SLUICE_OK && first != SLUICE_OK) {
        st = first;
        if (first_msg[0] != '\0')
            memcpy(err, first_msg, SL_ERR_LEN);
    }
    return st;
}

/* --------------------------------------------- the limiters' policies */

/* The message in err, after "limiter "NAME": ". */
static void name_message(const void *name, size_t name_len, char *err)
{
    char q[300], msg[SL_ERR_LEN];

    memcpy(msg, err, SL_ERR_LEN);
    sl_quote(q, sizeof(q), name, name_len);
    sl_errf(err, SL_ERR_LEN, "limiter \"%s\": %s", q, msg);
}

sluice_status sluice_limiter_policy_set(sluice *sl, const void *name,
                                        size_t name_len, const sluice_policy *p)
{
    sl_policy pol;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_names_check(name, name_len, NULL, 0, err)) != SLUICE_OK)
        return st;
    if (p != NULL &&
        (st = sl_policies_take(&sl->policy, p, &pol, err)) != SLUICE_OK) {
        name_message(name, name_len, err);
        return st;
    }
    if (p == NULL || pol.set == 0) /* no group of its own: none */
        return sl_policies_put(&sl->policies, name, name_len, NULL);
    if ((st = sl_policy_provide(sl, &pol, err)) != SLUICE_OK) {
        name_message(name, name_len, err);
        return st;
    }
    if ((st = sl_policies_put(&sl->policies, name, name_len, &pol)) !=
        SLUICE_OK)
        sl_errf(err, SL_ERR_LEN, "limiter_policy_set: out of memory");
    return st;
}

sluice_status sluice_limiter_policy_get(sluice *sl, const void *name,
                                        size_t name_len, sluice_policy *out)
{
    sl_policy pol;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_names_check(name, name_len, NULL, 0, err)) != SLUICE_OK)
        return st;
    if (out == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter_policy_get: out is NULL");
        return SLUICE_EINVAL;
    }
    if (!sl_policies_find(&sl->policies, name, name_len, &pol))
        pol = sl->policy;
    return sl_policies_give(&pol, out, err);
}
