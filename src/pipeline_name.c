/* SPDX-License-Identifier: BSD-3-Clause */
/* pipeline_name.c - the stages of a decision by name (NAME, READ,
 * DEFINED): its limiter's policy, its rules and its client's override,
 * from the handle's cache or a read, a define from the limits file where
 * none are stored, the rules read last when the read fails; then the
 * decision goes on on its key (pipeline.c). */
#include "pipeline_stage.h"

#include <string.h>
/* ------------------------------------------------- NAME, READ: by name */

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

    nm->kind = ov->kind;
    if (ov->kind == SLUICE_OVERRIDE_RULES)
        nm->rules = ov->rules;
    p->reqs[0].decide.rules = &nm->rules;
    if (p->reqs[0].op != SL_OP_RESET &&
        (ov->kind == SLUICE_OVERRIDE_UNLIMITED ||
         ov->kind == SLUICE_OVERRIDE_DENY)) {
        listed(ov->kind, p->out);
        p->answered = true;
        sl_pipe_mstate(p, SL_PIPE_ANSWER);
    } else {
        sl_pipe_mstate(p, SL_PIPE_LOCAL);
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
    nm->since = sl_limfile_events(&p->sl->limits);
    sl_pipe_mstate(p, SL_PIPE_READ);
    return SL_NEED_SEND;
}

sl_pipe_need sl_pipe_stage_name(sl_pipe *p)
{
    sl_pipe_name *nm = p->name;
    sl_limiters *l = &p->sl->names;
    sluice_limiter_override ov;
    int64_t known;

    /* The limiter's policy, when it has one, decides the whole request:
     * also one whose rules cannot be read (read_failed). Copied: a policy
     * set meanwhile is the next request's. */
    if (sl_policies_find(&p->sl->policies, sl_pipe_name_of(nm), nm->name_len,
                         &nm->pol))
        p->reqs[0].policy = &nm->pol;
    if (sl_names_cached(l, sl_pipe_name_of(nm), nm->name_len, nm->key, nm->kl,
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
    if (sl_names_cached(l, sl_pipe_name_of(nm), nm->name_len, nm->key, nm->kl,
                        nm->client_len, l->stale_ms, &nm->rules, &known, &ov) ||
        sl_limfile_rules(&p->sl->limits, sl_pipe_name_of(nm), nm->name_len,
                         sl_pipe_client_of(nm), nm->client_len, &nm->rules,
                         &ov)) {
        nm->failed = st;
        return named(p, &ov);
    }
    p->reqs[0].decide.rules = NULL;
    p->st = st;
    if (p->reqs[0].policy->fail == SLUICE_FAIL_FALLBACK) {
        sl_quote(q, sizeof(q), sl_pipe_name_of(nm), nm->name_len);
        len = strlen(p->err);
        sl_errf(p->err + len, SL_ERR_LEN - len,
                "%slimiter \"%s\": this handle has not read its rules, so "
                "the fallback store has none to decide by",
                len > 0 ? "; " : "", q);
    }
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
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
        sl_pipe_mstate(p, SL_PIPE_DEFINED);
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
            nm->client_len == 0
                ? NULL
                : sl_limits_find_override(d->lim, sl_pipe_client_of(nm),
                                          nm->client_len);

        if (o != NULL)
            sl_limits_override_get(o, &ov);
        sl_lcache_put(l, sl_pipe_name_of(nm), nm->name_len, &d->stored, d->ka,
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
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
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
        nm->def =
            sl_define_new(&p->sl->limits, sl_pipe_name_of(nm), nm->name_len,
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
        sl_limfile_rules(&p->sl->limits, sl_pipe_name_of(nm), nm->name_len,
                         sl_pipe_client_of(nm), nm->client_len, &nm->rules,
                         &ov))
        return named(p, &ov);
    if (why == SL_DEFINE_NOMEM) {
        sl_errf(p->err, SL_ERR_LEN, "limits_file: out of memory");
        st = SLUICE_ENOMEM;
    }
    p->st = st;
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}

sl_pipe_need sl_pipe_stage_defined(sl_pipe *p)
{
    return define_step(p, p->sent_st);
}

sl_pipe_need sl_pipe_stage_read(sl_pipe *p)
{
    sl_pipe_name *nm = p->name;
    sluice_status st = p->sent_st == SLUICE_OK ? p->res[0].status : p->sent_st;
    sluice_limiter_override ov;
    int64_t ka = 0;
    /* A read while this handle defined the name may have found the rules
     * without all the file's overrides (written 32 a round trip): not
     * kept, and the decision is the file's, as for every other decision
     * of the handle by the name while it defines (docs/SEMANTICS.md,
     * "Limits from a file"). */
    bool half = st == SLUICE_OK &&
                sl_limfile_overlapped(&p->sl->limits, sl_pipe_name_of(nm),
                                      nm->name_len, nm->since);

    if (sl_names_read_ended(&p->sl->names, sl_pipe_name_of(nm), nm->name_len,
                            nm->key, nm->kl, nm->client_len, &st, &nm->v,
                            &nm->over, nm->again, !half, &nm->sent, &nm->rules,
                            &ka, &ov, p->err)) {
        nm->again = true;
        return read_rules(p);
    }
    if (st == SLUICE_OK && half &&
        sl_limfile_rules(&p->sl->limits, sl_pipe_name_of(nm), nm->name_len,
                         sl_pipe_client_of(nm), nm->client_len, &nm->rules,
                         &ov))
        return named(p, &ov);
    if (st == SLUICE_OK)
        return named(p, &ov);
    if (sl_policy_backend_failed(st))
        return read_failed(p, st);
    if (st == SLUICE_ENOLIMITER)
        return define(p, st);
    p->st = st; /* bad rules stored: the caller's to fix */
    sl_pipe_mstate(p, SL_PIPE_ANSWER);
    return SL_NEED_GO;
}
