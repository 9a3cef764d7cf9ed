/* SPDX-License-Identifier: BSD-3-Clause */
/* algo.h - the arithmetic of every algorithm, on plain numbers, so that
 * every backend that decides on the client shares one implementation. */
#ifndef SL_ALGO_H
#define SL_ALGO_H

#include "internal.h"
#include "request.h"

/* One rule's decision. Outputs assume the request was charged when
 * admit && charge (a composite charges only when every rule admits). */
typedef struct sl_verdict {
    bool admit;
    bool never_fits;   /* cost above the rule's capacity */
    int64_t remaining; /* >= 0 */
    int64_t retry_ms;  /* from t; -1 unless denying and fitting */
    int64_t reset_ms;  /* from t */
} sl_verdict;

/* cur: amount charged in t's window; prev: in the one before. */
void sl_fixed_decide(const sluice_rule *r, int64_t to_end, int64_t cur,
                     int64_t cost, bool charge, sl_verdict *v);
void sl_sliding_decide(const sluice_rule *r, int64_t to_end, int64_t cur,
                       int64_t prev, int64_t cost, bool charge, sl_verdict *v);

/* Token bucket and gcra share one state: x, the time of the last charge,
 * and d, the backlog in request-ms at x. has = false: no state. On return
 * *new_x and *new_d are the state to store if the request is charged. */
void sl_bucket_decide(const sluice_rule *r, int64_t t, bool has, int64_t x,
                      int64_t d, int64_t cost, bool charge, sl_verdict *v,
                      int64_t *new_x, int64_t *new_d);

typedef struct sl_log_entry {
    int64_t x; /* stamp */
    int64_t cost;
} sl_log_entry;

/* entries: oldest first (dead ones allowed). *stamp is the time a charge
 * is stamped with. */
void sl_log_decide(const sluice_rule *r, int64_t t, const sl_log_entry *e,
                   size_t n, int64_t cost, bool charge, sl_verdict *v,
                   int64_t *stamp);

/* What a backend read of one rule's state, for sl_decide. */
typedef struct sl_state_view {
    int64_t cur, prev; /* fixed, sliding: t's window, the one before */
    const sl_log_entry *entries; /* log: oldest first */
    size_t n;
    bool has;     /* token, gcra: state exists */
    int64_t x, d; /* token, gcra */
} sl_state_view;

/* What a charge must store for one rule, from sl_decide. */
typedef struct sl_charge {
    int64_t x; /* log: the stamp; token, gcra: the time of the charge */
    int64_t d; /* token, gcra: the backlog after the charge */
    int64_t n; /* a forced charge (sl_force_plan): what the rule gains */
} sl_charge;

/* Decides a whole ruleset on the views of its rules: every rule first,
 * then the outputs of each assuming the composite's outcome. Returns true
 * when every rule admits (then an acquire charges them all). */
bool sl_decide(const sluice_ruleset *rs, const sl_state_view *views, int64_t t,
               int64_t cost, sl_verdict *v, sl_charge *charges);

/* Whether any rule of rs has a block (a penalty, SEMANTICS.md). */
static inline bool sl_ruleset_blocks(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (rs->rules[i].block_s != 0)
            return true;
    return false;
}

/* rs with each limit and burst divided by n instances that share them
 * (n <= 1: as they are), rounded up: the fallback store's rules
 * (docs/SEMANTICS.md, "fail=fallback"). out may be rs. */
static inline void sl_ruleset_divide(const sluice_ruleset *rs, int64_t n,
                                     sluice_ruleset *out)
{
    size_t i;

    if (out != rs)
        *out = *rs;
    if (n <= 1)
        return;
    for (i = 0; i < out->count && i < SLUICE_MAX_RULES; i++) {
        sluice_rule *r = &out->rules[i];

        r->limit = (r->limit + n - 1) / n;
        if (r->burst > 0)
            r->burst = (r->burst + n - 1) / n;
    }
}

/* The longest block of rs's rules, in ms (0: none). */
static inline int64_t sl_ruleset_block_ms(const sluice_ruleset *rs)
{
    int64_t b = 0;
    size_t i;

    for (i = 0; i < rs->count; i++)
        if ((int64_t)rs->rules[i].block_s * 1000 > b)
            b = (int64_t)rs->rules[i].block_s * 1000;
    return b;
}

/* sl_decide with the key's block (SEMANTICS.md, "Penalties"): end is the
 * block's end stored before the decision (-1: none). Returns true when
 * every rule admits and the key is not blocked (an acquire then charges
 * them all). *new_end is the end after the decision: end, or a later one
 * when this request starts or extends the block (a peek reports it and
 * stores nothing). When t < *new_end the request is blocked: v holds the
 * blocked answer, the first rule with a block carrying it. Given the end
 * after a decision as end, it returns that decision again (the Lua
 * backend's client checks the script's end so). */
bool sl_decide_block(const sluice_ruleset *rs, const sl_state_view *views,
                     int64_t t, int64_t cost, int64_t end, sl_verdict *v,
                     sl_charge *charges, int64_t *new_end);

/* Acquire at most max: the amount granted, 0..max, the largest cost that
 * every rule admits on these views (the least remaining a peek reports).
 * Every admission test is monotone in the cost, so this is exact. */
int64_t sl_grant(const sluice_ruleset *rs, const sl_state_view *views,
                 int64_t t, int64_t max);

/* A refund's answer: the state on the views, nothing charged: allowed,
 * limit and remaining of the rule with the least remaining, retry -1,
 * reset the largest. */
void sl_describe(const sluice_ruleset *rs, const sl_state_view *views,
                 int64_t t, sluice_result *out);

/* A lease acquire at t for at most max holders of lease_ms, given the
 * leases live at t other than its own: n of them, ending first at
 * first_end and last at last_end (-1 when n is 0). Returns whether it is
 * admitted (n < max) and fills out. */
bool sl_lease_decide(int64_t t, int64_t max, int64_t lease_ms, int64_t n,
                     int64_t first_end, int64_t last_end, sluice_result *out);

/* Refunds of amount a at t (SEMANTICS.md, "refund"); a of 0 changes
 * nothing, the state is kept as it is. Windows: what comes
 * off the window of t (*take_cur) and, for sliding, the one before
 * (*take_prev). */
void sl_refund_window(const sluice_rule *r, int64_t cur, int64_t prev,
                      int64_t a, int64_t *take_cur, int64_t *take_prev);
/* Buckets: the state after, (*new_x, *new_d); false when there is none
 * (nothing to refund, nothing to store). */
bool sl_refund_bucket(const sluice_rule *r, int64_t t, bool has, int64_t x,
                      int64_t d, int64_t a, int64_t *new_x, int64_t *new_d);
/* Logs (entries oldest first): the entries that stay are e[*first ..
 * *end), the last of them with cost *last_cost (when *end > *first). */
void sl_refund_log(const sluice_rule *r, int64_t t, const sl_log_entry *e,
                   size_t n, int64_t a, size_t *first, size_t *end,
                   int64_t *last_cost);

/* The rule_reset_code of an answer no rule decided (fail=open and
 * fail=closed): sluice_result_decided() is false, and the rule's reset
 * reads as reset_after_ms. sl_result_set_rule_reset never makes it. */
#define SL_RESET_UNDECIDED 0xffffu

/* Stores ms as the binding rule's reset in out (sluice_result_rule_reset_ms
 * reads it back, rounded up by less than 0.1 %): code 0 when it is
 * out->reset_after_ms, which must be set first. */
void sl_result_set_rule_reset(sluice_result *out, int64_t ms);

/* Records for rq, where it asks (sluice_violated), the rules of rs whose
 * verdict in v denies: bit i for rule i. */
static inline void sl_note_violated(const sl_request *rq,
                                    const sluice_ruleset *rs,
                                    const sl_verdict *v)
{
    unsigned m = 0;
    size_t i;

    if (rq->decide.violated == NULL)
        return;
    for (i = 0; i < rs->count; i++)
        if (!v[i].admit)
            m |= 1u << i;
    *rq->decide.violated = (uint8_t)m;
}

/* Combines per-rule verdicts into the composite's result, with the rule
 * that binds and its own reset. */
void sl_combine(const sluice_ruleset *rs, const sl_verdict *v,
                sluice_result *out);

/* A forced charge of e at t (SEMANTICS.md, "settle"): charged unjudged,
 * past the limit, up to the most a rule may have in use, its ceiling
 * max(capacity, floor((2^50 - 1) / P)) requests, which keeps count * P
 * and the script's sums exact. */
int64_t sl_force_ceiling(const sluice_rule *r);
/* Windows: what the window of t, counting cur, gains. */
int64_t sl_force_window(const sluice_rule *r, int64_t cur, int64_t e);
/* Buckets: the state after, (*new_x, *new_d): at u = max(t, x), the
 * backlog drained to u plus e * P, at most the ceiling's. */
void sl_force_bucket(const sluice_rule *r, int64_t t, bool has, int64_t x,
                     int64_t d, int64_t e, int64_t *new_x, int64_t *new_d);
/* Logs (entries oldest first): the cost of the entry added, stamped at
 * *stamp = u = max(t, newest) (0: none added). */
int64_t sl_force_log(const sluice_rule *r, int64_t t, const sl_log_entry *en,
                     size_t n, int64_t e, int64_t *stamp);
/* A forced charge of e at t on a ruleset's views: per rule, what it
 * gains (ch[i].n, up to its ceiling), the stamp (log) or the state after
 * (buckets) in ch[i].x and ch[i].d, and in v[i].reset_ms the rule's reset
 * after it (when it gains anything), as an admitted charge's are. */
void sl_force_plan(const sluice_ruleset *rs, const sl_state_view *views,
                   int64_t t, int64_t e, sl_verdict *v, sl_charge *ch);

#endif /* SL_ALGO_H */
