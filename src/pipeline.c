/* SPDX-License-Identifier: BSD-3-Clause */
/* pipeline.c - the stages of every call, blocking or on the caller's
 * loop, in their one order (pipeline.h): a decision by name's rules and
 * override, the reservations, the deny cache, the backend, then the fail
 * policy, shadow mode and the counters. A call's state changes only in
 * mstate(); what it needs of its driver (a round trip, a sleep) it says
 * and returns. */
#include "pipeline.h"

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

/* The one place a call's state changes. */
static void mstate(sl_pipe *p, sl_pipe_state s)
{
    p->state = s;
}

/* ------------------------------------------------- NAME, READ: by name */

/* The name of a decision by name: in K, after "<len>:". */
static const char *name_of(const sl_pipe_name *nm)
{
    return nm->key + (nm->kl - nm->client_len - nm->name_len);
}

/* Its client id, after the name. */
static const char *client_of(const sl_pipe_name *nm)
{
    return nm->key + (nm->kl - nm->client_len);
}

/* The answer to an allow- or deny-listed client (docs/SEMANTICS.md,
 * "Named limiters"): no rule decided, nothing counted or read. */
static void listed(sluice_override_kind kind, sluice_result *out)
{
    memset(out, 0, sizeof(*out));
    out->allowed = kind == SLUICE_OVERRIDE_UNLIMITED;
    out->status = out->allowed ? SLUICE_ALLOWLISTED : SLUICE_DENYLISTED;
    out->retry_after_ms = -1;
}

/* The rules and override of a decision by name are known: an allow- or
 * deny-listed client is answered here; any other, a decision on its key
 * by those rules. */
static sl_pipe_need named(sl_pipe *p, const sluice_limiter_override *ov)
{
    sl_pipe_name *nm = p->name;

    if (ov->kind == SLUICE_OVERRIDE_RULES)
        nm->rules = ov->rules;
    p->reqs[0].decide.rules = &nm->rules;
    if (p->reqs[0].op != SL_OP_RESET &&
        (ov->kind == SLUICE_OVERRIDE_UNLIMITED ||
         ov->kind == SLUICE_OVERRIDE_DENY)) {
        listed(ov->kind, p->out);
        p->answered = true;
        mstate(p, SL_PIPE_ANSWER);
    } else {
        mstate(p, SL_PIPE_LOCAL);
    }
    return SL_NEED_GO;
}

/* The read of the rules (and the client's override) to send. */
static sl_pipe_need read_rules(sl_pipe *p)
{
    sl_pipe_name *nm = p->name;
    sl_request *r = &p->send[0];

    memset(r, 0, sizeof(*r));
    r->op = SL_OP_RULES_GET;
    r->key = nm->key;
    r->key_len = nm->kl - nm->client_len;
    r->prefix = p->sl->names.prefix;
    r->now_ms = p->reqs[0].now_ms;
    r->stored.ttl_ms = nm->sent;
    r->stored.read = &nm->v;
    memset(&nm->v, 0, sizeof(nm->v));
    if (nm->client_len > 0) {
        r->stored.client = nm->key + nm->kl - nm->client_len;
        r->stored.client_len = nm->client_len;
        r->stored.over = &nm->over;
        memset(&nm->over, 0, sizeof(nm->over));
    }
    p->nsend = 1;
    p->send_err = p->err;
    mstate(p, SL_PIPE_READ);
    return SL_NEED_SEND;
}

static sl_pipe_need stage_name(sl_pipe *p)
{
    sl_pipe_name *nm = p->name;
    sl_limiters *l = &p->sl->names;
    sluice_limiter_override ov;
    int64_t known;

    /* The limiter's policy, when it has one, decides the whole request:
     * also one whose rules cannot be read (read_failed). Copied: a policy
     * set meanwhile is the next request's. */
    if (sl_policies_find(&p->sl->policies, name_of(nm), nm->name_len, &nm->pol))
        p->reqs[0].policy = &nm->pol;
    if (sl_names_cached(l, name_of(nm), nm->name_len, nm->key, nm->kl,
                        nm->client_len, l->cache_ms, &nm->rules, &known, &ov))
        return named(p, &ov);
    nm->sent = known > 0 ? known : 0;
    return read_rules(p);
}

/* The read failed with st, a failure of the backend: the rules and
 * override this handle read last decide, if read within rules_stale_ms,
 * and the fail policy answers for the backend (docs/SEMANTICS.md, "Named
 * limiters"); with none, the policy answers without rules. */
static sl_pipe_need read_failed(sl_pipe *p, sluice_status st)
{
    sl_pipe_name *nm = p->name;
    sl_limiters *l = &p->sl->names;
    sluice_limiter_override ov;
    int64_t known;
    size_t len;
    char q[300];

    /* The rules read last: this handle's within rules_stale_ms, else
     * its limits file's. */
    if (sl_names_cached(l, name_of(nm), nm->name_len, nm->key, nm->kl,
                        nm->client_len, l->stale_ms, &nm->rules, &known, &ov) ||
        sl_limfile_rules(&p->sl->limits, name_of(nm), nm->name_len,
                         client_of(nm), nm->client_len, &nm->rules, &ov)) {
        nm->failed = st;
        return named(p, &ov);
    }
    p->reqs[0].decide.rules = NULL;
    p->st = st;
    if (p->reqs[0].policy->fail == SLUICE_FAIL_FALLBACK) {
        sl_quote(q, sizeof(q), name_of(nm), nm->name_len);
        len = strlen(p->err);
        sl_errf(p->err + len, SL_ERR_LEN - len,
                "%slimiter \"%s\": this handle has not read its rules, so "
                "the fallback store has none to decide by",
                len > 0 ? "; " : "", q);
    }
    mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}

/* A round trip of the define at hand ended with sent (the first step:
 * SLUICE_OK, nothing sent): the next, or the decision goes on by what is
 * stored (docs/SEMANTICS.md, "Limits from a file"). */
static sl_pipe_need define_step(sl_pipe *p, sluice_status sent)
{
    sl_pipe_name *nm = p->name;
    sl_define *d = nm->def;
    sl_limiters *l = &p->sl->names;
    sluice_limiter_override ov;
    sluice_status st = SLUICE_OK;
    sl_define_end end = sl_define_step(d, sent, &st, p->err);

    if (end == SL_DEFINE_SEND) {
        p->send = d->send;
        p->res = d->res;
        p->nsend = d->nsend;
        p->send_err = p->err;
        mstate(p, SL_PIPE_DEFINED);
        return SL_NEED_SEND;
    }
    p->send = nm->send0;
    p->res = nm->res0;
    nm->rules = d->stored;
    nm->sent = d->ka > 0 ? d->ka : 0;
    memset(&ov, 0, sizeof(ov));
    if (end == SL_DEFINE_STORED) {
        /* Its overrides are the file's: this client's decides at once. */
        const sl_limits_override *o =
            nm->client_len == 0 ? NULL
                                : sl_limits_find_override(d->lim, client_of(nm),
                                                          nm->client_len);

        if (o != NULL)
            sl_limits_override_get(o, &ov);
        sl_lcache_put(l, name_of(nm), nm->name_len, &d->stored, d->ka,
                      (int64_t)d->lim->nover);
        if (nm->client_len > 0)
            sl_lcache_over_put(l, nm->name_len, nm->key, nm->kl, &ov);
    }
    sl_define_free(d);
    nm->def = NULL;
    if (end == SL_DEFINE_STORED)
        return named(p, &ov);
    if (end == SL_DEFINE_FOUND) { /* another's rules: read as any */
        nm->again = false;
        return read_rules(p);
    }
    if (sl_policy_backend_failed(st))
        return read_failed(p, st);
    p->st = st;
    mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}

/* None stored under the name: defined from the handle's limits file if
 * the name is in it (once a decision; while this handle defines it
 * already, decided by the file's rules and override), else the
 * decision's answer. */
static sl_pipe_need define(sl_pipe *p, sluice_status st)
{
    sl_pipe_name *nm = p->name;
    sluice_limiter_override ov;
    sl_define_none why = SL_DEFINE_NOT_IN_FILE;

    if (!nm->defined) {
        nm->defined = true;
        nm->def = sl_define_new(&p->sl->limits, name_of(nm), nm->name_len,
                                p->sl->names.prefix, p->reqs[0].now_ms, &why);
    }
    if (nm->def != NULL || why == SL_DEFINE_UNDER_WAY)
        p->err[0] = '\0'; /* not the answer now */
    if (nm->def != NULL) {
        nm->send0 = p->send;
        nm->res0 = p->res;
        return define_step(p, SLUICE_OK);
    }
    if (why == SL_DEFINE_UNDER_WAY &&
        sl_limfile_rules(&p->sl->limits, name_of(nm), nm->name_len,
                         client_of(nm), nm->client_len, &nm->rules, &ov))
        return named(p, &ov);
    if (why == SL_DEFINE_NOMEM) {
        sl_errf(p->err, SL_ERR_LEN, "limits_file: out of memory");
        st = SLUICE_ENOMEM;
    }
    p->st = st;
    mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}

static sl_pipe_need stage_defined(sl_pipe *p)
{
    return define_step(p, p->sent_st);
}

static sl_pipe_need stage_read(sl_pipe *p)
{
    sl_pipe_name *nm = p->name;
    sluice_status st = p->sent_st == SLUICE_OK ? p->res[0].status : p->sent_st;
    sluice_limiter_override ov;
    int64_t ka = 0;

    if (sl_names_read_ended(&p->sl->names, name_of(nm), nm->name_len, nm->key,
                            nm->kl, nm->client_len, &st, &nm->v, &nm->over,
                            nm->again, &nm->sent, &nm->rules, &ka, &ov,
                            p->err)) {
        nm->again = true;
        return read_rules(p);
    }
    if (st == SLUICE_OK)
        return named(p, &ov);
    if (sl_policy_backend_failed(st))
        return read_failed(p, st);
    if (st == SLUICE_ENOLIMITER)
        return define(p, st);
    p->st = st; /* bad rules stored: the caller's to fix */
    mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
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
    mstate(p, SL_PIPE_ANSWER);
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
            mstate(p, SL_PIPE_REFILLED);
            return SL_NEED_SEND;
        }
        mstate(p, SL_PIPE_ANSWER);
        return SL_NEED_GO;
    }
    if (sl_deny_before(&sl->deny, &sl->url.cfg, r, p->out)) {
        p->answered = true;
        mstate(p, SL_PIPE_ANSWER);
        return stage_answer(p);
    }
    if (p->name != NULL && p->name->failed != SLUICE_OK) {
        p->st = p->name->failed; /* its rules' read failed: so would it */
        mstate(p, SL_PIPE_ANSWER);
        return SL_NEED_GO;
    }
    if (p->plan.park && !sl->eng.closing &&
        sl_mono_ms() < p->began + sl->url.cfg.command_timeout_ms / 2) {
        p->wake_at = p->began + sl->url.cfg.command_timeout_ms / 2;
        mstate(p, SL_PIPE_PARKED);
        return SL_NEED_PARK;
    }
    p->nsend = sl_reserve_plan(&sl->rsv, r, &p->plan, p->send);
    p->send_err = p->err;
    mstate(p, SL_PIPE_SENT);
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
    mstate(p, SL_PIPE_ANSWER);
    return stage_answer(p);
}

static sl_pipe_need stage_refilled(sl_pipe *p)
{
    int how = sl_reserve_after(&p->sl->rsv, &p->plan, p->sent_st, p->res, NULL);

    p->settled = (how & SL_RSV_SETTLED) != 0;
    mstate(p, SL_PIPE_ANSWER);
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
    mstate(p, SL_PIPE_LOCAL);
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
        c.name = name_of(nm);
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
        mstate(p, SL_PIPE_ASLEEP);
        return SL_NEED_SLEEP;
    }
    if (no_result(r->op))
        p->out->status = st;
    if (!p->uncounted)
        count_one(sl, counted(p->name), r, st, p->out);
    sl_stats_call(&sl->stats, p->t0);
    p->st = st;
    mstate(p, SL_PIPE_DONE);
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
    mstate(p, SL_PIPE_BATCH_SENT);
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
    mstate(p, SL_PIPE_DONE);
    return SL_NEED_DONE;
}

/* ------------------------------------------------------------ the run */

static sl_pipe_need stage_done(sl_pipe *p)
{
    (void)p;
    return SL_NEED_DONE;
}

/* The stage of each state: the pipeline's order, as data. */
sl_pipe_need (*const sl_pipe_stages[SL_PIPE_DONE + 1])(sl_pipe *p) = {
    [SL_PIPE_NAME] = stage_name,
    [SL_PIPE_READ] = stage_read,
    [SL_PIPE_DEFINED] = stage_defined,
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
        mstate(p, SL_PIPE_ANSWER);
    } else if (p->state == SL_PIPE_ASLEEP) {
        /* A waiting acquire: its last answer is the answer. */
        p->answered = true;
        mstate(p, SL_PIPE_ANSWER);
    }
    (void)sl_pipe_run(p);
}
