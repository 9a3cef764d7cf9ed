/* SPDX-License-Identifier: BSD-3-Clause */
/* algo.c - exact integer arithmetic of the five algorithms and of
 * composites; docs/DESIGN.md derives every formula. */
#include "algo.h"

#include "store.h"

static void deny_never_fits(sl_verdict *v)
{
    v->admit = false;
    v->never_fits = true;
    v->retry_ms = -1;
}

void sl_fixed_decide(const sluice_rule *r, int64_t to_end, int64_t cur,
                     int64_t cost, bool charge, sl_verdict *v)
{
    int64_t l = r->limit;
    int64_t after;

    v->never_fits = false;
    v->admit = cost <= l && cur + cost <= l;
    if (cost > l)
        deny_never_fits(v);
    after = v->admit && charge ? cur + cost : cur;
    v->remaining = sl_max64(0, l - after);
    v->reset_ms = after > 0 ? to_end : 0;
    if (!v->never_fits)
        v->retry_ms = v->admit ? -1 : to_end;
}

void sl_sliding_decide(const sluice_rule *r, int64_t to_end, int64_t cur,
                       int64_t prev, int64_t cost, bool charge, sl_verdict *v)
{
    int64_t l = r->limit, p = r->period_ms;
    int64_t weight = to_end; /* P - e: how much of prev still overlaps */
    int64_t after, room;

    v->never_fits = false;
    /* prev*(P-e) and (L-cur-c)*P stay below 2^53: counts never exceed the
     * capacity of the rules that charged them, and capacity*P < 2^53. */
    v->admit =
        cost <= l && cur + cost <= l && prev * weight <= (l - cur - cost) * p;
    after = v->admit && charge ? cur + cost : cur;
    room = sl_fdiv(l * p - prev * weight, p) - after;
    v->remaining = sl_max64(0, room);
    v->reset_ms = after > 0 ? to_end + p : (prev > 0 ? to_end : 0);
    if (cost > l) {
        deny_never_fits(v);
    } else if (v->admit) {
        v->retry_ms = -1;
    } else if (cur + cost <= l) {
        /* Admissible later in this window, once prev's weight drops. */
        v->retry_ms = to_end - sl_fdiv((l - cur - cost) * p, prev);
    } else {
        /* Next window: cur becomes prev, weighted by P - e'. */
        int64_t e_next = sl_max64(0, p - sl_fdiv((l - cost) * p, cur));
        v->retry_ms = to_end + e_next;
    }
}

void sl_bucket_decide(const sluice_rule *r, int64_t t, bool has, int64_t x,
                      int64_t d, int64_t cost, bool charge, sl_verdict *v,
                      int64_t *new_x, int64_t *new_d)
{
    int64_t l = r->limit, p = r->period_ms, b = sl_rule_capacity(r);
    int64_t u, gap, du, after;

    if (!has) {
        x = t;
        d = 0;
    }
    u = sl_max64(t, x);
    gap = u - t;
    /* Drain at L request-ms per ms; compare before multiplying. */
    if (d <= 0 || u - x >= sl_cdiv(d, l))
        du = 0;
    else
        du = d - (u - x) * l;

    v->never_fits = false;
    v->admit = cost <= b && du <= (b - cost) * p;
    after = v->admit && charge ? du + cost * p : du;
    v->remaining = sl_max64(0, b - sl_cdiv(after, p));
    v->reset_ms = after > 0 ? gap + sl_cdiv(after, l) : 0;
    if (cost > b)
        deny_never_fits(v);
    else if (v->admit)
        v->retry_ms = -1;
    else
        v->retry_ms = gap + sl_cdiv(du - (b - cost) * p, l);
    *new_x = u;
    *new_d = after;
}

void sl_log_decide(const sluice_rule *r, int64_t t, const sl_log_entry *e,
                   size_t n, int64_t cost, bool charge, sl_verdict *v,
                   int64_t *stamp)
{
    int64_t l = r->limit, p = r->period_ms;
    int64_t u = n > 0 ? sl_max64(t, e[n - 1].x) : t;
    int64_t gap = u - t, sum = 0, newest = -1;
    size_t first = n, i;

    for (i = 0; i < n; i++) {
        if (e[i].x > u - p) {
            if (first == n)
                first = i;
            sum += e[i].cost;
            newest = e[i].x;
        }
    }
    v->never_fits = false;
    v->admit = cost <= l && sum + cost <= l;
    if (v->admit && charge) {
        sum += cost;
        newest = u;
    }
    v->remaining = sl_max64(0, l - sum);
    v->reset_ms = newest >= 0 ? gap + newest + p - u : 0;
    *stamp = u;
    if (cost > l) {
        deny_never_fits(v);
    } else if (v->admit) {
        v->retry_ms = -1;
    } else {
        /* Oldest entries leave first, at x + P. */
        int64_t left = sum;

        v->retry_ms = -1;
        for (i = first; i < n; i++) {
            left -= e[i].cost;
            if (left + cost <= l) {
                v->retry_ms = gap + e[i].x + p - u;
                break;
            }
        }
    }
}

/* The binding rule's reset fits the 16 bits of padding in sluice_result
 * as a small float of ms, code - 1 = e << 11 | m for m << e ms: exact below
 * 2048 ms, and m >= 1024 above, so rounding up adds less than 1/1024. */
#define RESET_MANT_BITS 11

void sl_result_set_rule_reset(sluice_result *out, int64_t ms)
{
    uint64_t m = ms > 0 ? (uint64_t)ms : 0;
    unsigned e = 0;

    out->rule_reset_code = 0;
    if (ms == out->reset_after_ms)
        return;
    while (m >= (1u << RESET_MANT_BITS)) {
        /* Halve, rounding up: never early. */
        m = (m >> 1) + (m & 1);
        e++;
    }
    /* Past what 16 bits hold (years): the key's reset, which is longer. */
    if (e > 30 || ((e << RESET_MANT_BITS) | m) >= UINT16_MAX)
        return;
    out->rule_reset_code = (uint16_t)(((e << RESET_MANT_BITS) | m) + 1);
}

int64_t sluice_result_rule_reset_ms(const sluice_result *res)
{
    unsigned c;
    int64_t ms;

    if (res == NULL)
        return 0;
    if (res->rule_reset_code == 0 || res->rule_reset_code == SL_RESET_UNDECIDED)
        return res->reset_after_ms;
    c = (unsigned)res->rule_reset_code - 1;
    ms = (int64_t)(c & ((1u << RESET_MANT_BITS) - 1)) << (c >> RESET_MANT_BITS);
    /* Rounded up, but never past the key's reset, which is at least the
     * rule's own: as exact as the 16 bits allow, never early. */
    return ms < res->reset_after_ms ? ms : res->reset_after_ms;
}

bool sluice_result_decided(const sluice_result *res)
{
    /* Every rule and lease has a capacity of 1 or more: a limit of 0 is
     * an answer without rules (a listed client, a reset). */
    return res != NULL && res->status != SLUICE_ALLOWLISTED &&
           res->status != SLUICE_DENYLISTED && res->limit > 0 &&
           res->rule_reset_code != SL_RESET_UNDECIDED;
}

void sl_combine(const sluice_ruleset *rs, const sl_verdict *v,
                sluice_result *out)
{
    bool admit = true, never = false;
    int64_t retry = -1, reset = 0;
    size_t i, least = 0, binding;

    for (i = 0; i < rs->count; i++) {
        if (!v[i].admit) {
            admit = false;
            if (v[i].never_fits)
                never = true;
            else
                retry = sl_max64(retry, v[i].retry_ms);
        }
        reset = sl_max64(reset, v[i].reset_ms);
        if (v[i].remaining < v[least].remaining)
            least = i;
    }
    out->status = SLUICE_OK;
    out->allowed = admit;
    out->limit = sl_rule_capacity(&rs->rules[least]);
    out->remaining = v[least].remaining;
    out->retry_after_ms = admit || never ? -1 : retry;
    out->reset_after_ms = reset;
    /* The rule that binds: of those with the least remaining, on a denial
     * the one that waits longest (one that never fits first), so that a
     * RateLimit header names the rule its Retry-After comes from whenever
     * that rule has the least remaining (always at cost 1; a costlier
     * request may wait longest on a rule with more left, SEMANTICS.md). */
    binding = least;
    for (i = least + 1; !admit && i < rs->count; i++) {
        const sl_verdict *b = &v[binding], *c = &v[i];

        if (c->remaining != v[least].remaining || c->admit)
            continue;
        if (b->admit || (c->never_fits && !b->never_fits) ||
            (!b->never_fits && !c->never_fits && c->retry_ms > b->retry_ms))
            binding = i;
    }
    out->rule = (uint8_t)binding;
    sl_result_set_rule_reset(out, v[binding].reset_ms);
}

static void decide_rule(const sluice_rule *r, const sl_state_view *s, int64_t t,
                        int64_t cost, bool charge, sl_verdict *v, sl_charge *ch)
{
    int64_t k, to_end;

    switch (r->algorithm) {
    case SLUICE_FIXED:
        sl_window_locate(r, t, &k, &to_end);
        sl_fixed_decide(r, to_end, s->cur, cost, charge, v);
        break;
    case SLUICE_SLIDING:
        sl_window_locate(r, t, &k, &to_end);
        sl_sliding_decide(r, to_end, s->cur, s->prev, cost, charge, v);
        break;
    case SLUICE_LOG:
        sl_log_decide(r, t, s->entries, s->n, cost, charge, v, &ch->x);
        break;
    case SLUICE_TOKEN:
    case SLUICE_GCRA:
        sl_bucket_decide(r, t, s->has, s->x, s->d, cost, charge, v, &ch->x,
                         &ch->d);
        break;
    }
}

bool sl_decide(const sluice_ruleset *rs, const sl_state_view *views, int64_t t,
               int64_t cost, sl_verdict *v, sl_charge *charges)
{
    bool all = true;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        decide_rule(&rs->rules[i], &views[i], t, cost, false, &v[i],
                    &charges[i]);
        all = all && v[i].admit;
    }
    for (i = 0; i < rs->count; i++)
        decide_rule(&rs->rules[i], &views[i], t, cost, all, &v[i], &charges[i]);
    return all;
}

bool sl_decide_block(const sluice_ruleset *rs, const sl_state_view *views,
                     int64_t t, int64_t cost, int64_t end, sl_verdict *v,
                     sl_charge *charges, int64_t *new_end)
{
    bool blocked = end > t, all = false;
    int64_t e = end;
    size_t i, carrier = rs->count;

    if (!blocked)
        all = sl_decide(rs, views, t, cost, v, charges);
    else
        for (i = 0; i < rs->count; i++)
            decide_rule(&rs->rules[i], &views[i], t, cost, false, &v[i],
                        &charges[i]);
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        int64_t b = (int64_t)r->block_s * 1000;

        if (b == 0)
            continue;
        if (carrier == rs->count)
            carrier = i;
        /* Blocked: a rule with extend starts it again. Not blocked: a
         * denial by the rule that could fit later starts it. */
        if ((blocked && r->block_extend) ||
            (!blocked && !v[i].admit && !v[i].never_fits))
            e = sl_max64(e, sl_min64(t + b, SL_MAX_TIME_MS));
    }
    *new_end = e;
    if (e <= t || carrier == rs->count)
        return all;
    /* The block is the first blocking rule's answer: nothing left, and
     * the wait until both the block and the rule itself let it through
     * (the rule's own wait only shortens as time passes). */
    v[carrier].remaining = 0;
    v[carrier].reset_ms = sl_max64(v[carrier].reset_ms, e - t);
    if (!v[carrier].never_fits)
        v[carrier].retry_ms =
            sl_max64(e - t, v[carrier].admit ? 0 : v[carrier].retry_ms);
    v[carrier].admit = false;
    return false;
}

int64_t sl_grant(const sluice_ruleset *rs, const sl_state_view *views,
                 int64_t t, int64_t max)
{
    sl_verdict v;
    sl_charge ch;
    int64_t g = max;
    size_t i;

    /* A peek of cost 1 reports remaining before any charge: the largest
     * cost each rule admits. */
    for (i = 0; i < rs->count; i++) {
        decide_rule(&rs->rules[i], &views[i], t, 1, false, &v, &ch);
        g = sl_min64(g, v.remaining);
    }
    return sl_max64(g, 0);
}

void sl_describe(const sluice_ruleset *rs, const sl_state_view *views,
                 int64_t t, sluice_result *out)
{
    sl_verdict v[SLUICE_MAX_RULES];
    sl_charge ch;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        decide_rule(&rs->rules[i], &views[i], t, 1, false, &v[i], &ch);
        v[i].admit = true;
    }
    sl_combine(rs, v, out);
}

bool sl_lease_decide(int64_t t, int64_t max, int64_t lease_ms, int64_t n,
                     int64_t first_end, int64_t last_end, sluice_result *out)
{
    bool admit = n < max;
    int64_t last = admit ? sl_max64(last_end, t + lease_ms) : last_end;

    out->status = SLUICE_OK;
    out->allowed = admit;
    out->limit = max;
    out->remaining = admit ? max - n - 1 : 0;
    out->retry_after_ms = admit ? -1 : first_end - t;
    out->reset_after_ms = last > t ? last - t : 0;
    out->rule = 0;
    out->rule_reset_code = 0;
    return admit;
}

void sl_refund_window(const sluice_rule *r, int64_t cur, int64_t prev,
                      int64_t a, int64_t *take_cur, int64_t *take_prev)
{
    *take_cur = sl_min64(a, sl_max64(cur, 0));
    *take_prev = 0;
    if (sl_store_of(r->algorithm).windows > 1)
        *take_prev = sl_min64(a - *take_cur, sl_max64(prev, 0));
}

bool sl_refund_bucket(const sluice_rule *r, int64_t t, bool has, int64_t x,
                      int64_t d, int64_t a, int64_t *new_x, int64_t *new_d)
{
    int64_t l = r->limit, p = r->period_ms, u, du;

    if (!has)
        return false;
    /* A refund of 0 changes nothing: not even the stamp, which a late
     * request after it would be decided at (SEMANTICS.md, "refund"). */
    if (a == 0) {
        *new_x = x;
        *new_d = d;
        return true;
    }
    u = sl_max64(t, x);
    if (d <= 0 || u - x >= sl_cdiv(d, l))
        du = 0;
    else
        du = d - (u - x) * l;
    *new_x = u;
    /* a * P may pass 2^63; du < 2^53 does not. */
    *new_d = a >= sl_cdiv(du, p) ? 0 : du - a * p;
    return true;
}

void sl_refund_log(const sluice_rule *r, int64_t t, const sl_log_entry *e,
                   size_t n, int64_t a, size_t *first, size_t *end,
                   int64_t *last_cost)
{
    int64_t u = n > 0 ? sl_max64(t, e[n - 1].x) : t;
    size_t f = 0, k = n;

    /* A refund of 0 drops nothing, not even the entries that no longer
     * count at u: a late request after it reads them (SEMANTICS.md). */
    while (a > 0 && f < n && e[f].x <= u - r->period_ms)
        f++;
    *last_cost = 0;
    while (k > f && a > 0) {
        if (e[k - 1].cost > a) {
            *last_cost = e[k - 1].cost - a;
            break;
        }
        a -= e[k - 1].cost;
        k--;
    }
    if (k > f && *last_cost == 0)
        *last_cost = e[k - 1].cost;
    *first = f;
    *end = k;
}

/* 2^50 - 1: a log's live cost stays below the script's sums mod 2^50. */
#define FORCE_BOUND 1125899906842623LL

int64_t sl_force_ceiling(const sluice_rule *r)
{
    return sl_max64(sl_rule_capacity(r), FORCE_BOUND / r->period_ms);
}

int64_t sl_force_window(const sluice_rule *r, int64_t cur, int64_t e)
{
    return sl_min64(e, sl_max64(0, sl_force_ceiling(r) - cur));
}

void sl_force_bucket(const sluice_rule *r, int64_t t, bool has, int64_t x,
                     int64_t d, int64_t e, int64_t *new_x, int64_t *new_d)
{
    int64_t l = r->limit, p = r->period_ms, u, du;
    int64_t top = sl_force_ceiling(r) * p;

    if (!has) {
        x = t;
        d = 0;
    }
    u = sl_max64(t, x);
    if (d <= 0 || u - x >= sl_cdiv(d, l))
        du = 0;
    else
        du = d - (u - x) * l;
    *new_x = u;
    /* e * P may pass 2^63: compare in requests first. */
    *new_d =
        du >= top || e >= sl_cdiv(top - du, p) ? sl_max64(du, top) : du + e * p;
}

int64_t sl_force_log(const sluice_rule *r, int64_t t, const sl_log_entry *en,
                     size_t n, int64_t e, int64_t *stamp)
{
    int64_t u = n > 0 ? sl_max64(t, en[n - 1].x) : t, sum = 0;
    size_t i;

    for (i = 0; i < n; i++)
        if (en[i].x > u - r->period_ms)
            sum += en[i].cost;
    *stamp = u;
    return sl_min64(e, sl_max64(0, sl_force_ceiling(r) - sum));
}

void sl_force_plan(const sluice_ruleset *rs, const sl_state_view *views,
                   int64_t t, int64_t e, sl_verdict *v, sl_charge *ch)
{
    sl_charge unused;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        sl_state_view after = views[i];

        ch[i].x = ch[i].d = 0;
        switch (sl_store_of(r->algorithm).family) {
        case SL_FAMILY_WINDOW:
            ch[i].n = sl_force_window(r, after.cur, e);
            after.cur += ch[i].n;
            break;
        case SL_FAMILY_LOG:
            ch[i].n = sl_force_log(r, t, after.entries, after.n, e, &ch[i].x);
            break;
        case SL_FAMILY_BUCKET:
            ch[i].n = e;
            sl_force_bucket(r, t, after.has, after.x, after.d, e, &ch[i].x,
                            &ch[i].d);
            after.has = true;
            after.x = ch[i].x;
            after.d = ch[i].d;
            break;
        }
        decide_rule(r, &after, t, 1, false, &v[i], &unused);
        /* A log's newest entry is then the forced one, at x. */
        if (r->algorithm == SLUICE_LOG)
            v[i].reset_ms = ch[i].x + r->period_ms - t;
    }
}
