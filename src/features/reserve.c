/* SPDX-License-Identifier: BSD-3-Clause */
/* reserve.c - reservations (reserve.h): the table of keys this handle
 * acquires on, their counts, and the units each holds. */
#include "features/reserve.h"

#include "algo.h"
#include "store.h"

#include <string.h>
#include <time.h>

#define ADD(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)
#define GET(c)    atomic_load_explicit(&(c), memory_order_relaxed)

/* A key is hot, and reserves, once this handle saw this many units asked
 * on it within a hold. */
#define HOT_UNITS 4

/* Tries of a taken set's lock before sleeping on it (lock_set). */
#define SPIN_TRIES 100

/* units charged at t0 by a batch of size granted that answered at, valid
 * on [t0, until); win_end: the end of t0's windows. */
typedef struct sl_rsv_lot {
    int64_t units, size, t0, until, win_end;
    sluice_result at;
} sl_rsv_lot;

struct sl_rsv_entry {
    char *key; /* NULL: free; the key, then the prefix as a C string */
    size_t key_len;
    bool own_prefix; /* the request's prefix (a limiter's), not the handle's */
    uint64_t gen;    /* counts the keys this entry has held */
    sluice_ruleset rules;
    int64_t last;                         /* the latest request, for eviction */
    int64_t seen_at, seen_cur, seen_prev; /* units asked, by hold */
    int64_t ceiling;                      /* the most a batch may ask now */
    int64_t asking;                       /* units asked in batches in flight */
    /* The reservation: two lots, the older first (FIFO: a unit is used
     * before any charged after it). */
    sl_rsv_lot lots[2];
    bool refundable;
    bool refused;      /* the backend refused a refund of this ruleset */
    bool has_bucket;   /* a token or gcra rule in the ruleset */
    bool windows_only; /* fixed and sliding rules only */
};

static int64_t held(const sl_rsv_entry *e)
{
    return e->lots[0].units + e->lots[1].units;
}

/* ------------------------------------------------------------ the rules */

/* The hold h: reserve_ms, at most a tenth of the least period. */
static int64_t hold_of(const sluice_ruleset *rs, int64_t hold_ms)
{
    int64_t h = hold_ms;
    size_t i;

    for (i = 0; i < rs->count; i++)
        h = sl_min64(h, rs->rules[i].period_ms / 10);
    return h;
}

/* The cap c: share percent of the least capacity. */
static int64_t cap_of(const sluice_ruleset *rs, uint32_t share)
{
    int64_t c = INT64_MAX;
    size_t i;

    for (i = 0; i < rs->count; i++)
        c = sl_min64(c, sl_rule_capacity(&rs->rules[i]));
    return c / 100 * share + c % 100 * share / 100;
}

/* The end of t's window, the earliest over the window rules; INT64_MAX
 * without one. */
static int64_t window_end(const sluice_ruleset *rs, int64_t t)
{
    int64_t end = INT64_MAX, k, to_end;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        if (!sl_store_is_window(&rs->rules[i]))
            continue;
        sl_window_locate(&rs->rules[i], t, &k, &to_end);
        end = sl_min64(end, t + to_end);
    }
    return end;
}

/* ------------------------------------------------------------ the table */

/* A set's mutex, and its condition on the monotonic clock. */
static bool set_init(sl_rsv_set *set)
{
    pthread_condattr_t ca;
    bool ok;

    if (pthread_mutex_init(&set->mu, NULL) != 0)
        return false;
    ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&set->settled, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        pthread_mutex_destroy(&set->mu);
    return ok;
}

sluice_status sl_reserve_init(sl_reserve *rv, const sl_config *cfg,
                              bool window_refunds)
{
    memset(rv, 0, sizeof(*rv));
    atomic_init(&rv->admitted, 0);
    atomic_init(&rv->batches, 0);
    atomic_init(&rv->asked, 0);
    atomic_init(&rv->granted, 0);
    atomic_init(&rv->refunded, 0);
    atomic_init(&rv->lapsed, 0);
    atomic_init(&rv->ready, false);
    rv->server_clock = cfg->server_clock;
    rv->window_refunds = window_refunds;
    return cfg->reserve_ms > 0 ? sl_reserve_enable(rv) : SLUICE_OK;
}

/* Frees the first n sets of sets. */
static void free_sets(sl_rsv_set *sets, size_t n)
{
    size_t i, w;

    for (i = 0; i < n && sets[i].ways != NULL; i++) {
        for (w = 0; w < SL_RSV_WAYS; w++)
            sl_free(sets[i].ways[w].key);
        sl_free(sets[i].ways);
        pthread_mutex_destroy(&sets[i].mu);
        pthread_cond_destroy(&sets[i].settled);
    }
    sl_free(sets);
}

sluice_status sl_reserve_enable(sl_reserve *rv)
{
    sl_rsv_set *sets;
    size_t i;

    if (sl_reserve_on(rv))
        return SLUICE_OK;
    if ((sets = sl_calloc(SL_RSV_SETS, sizeof(*sets))) == NULL)
        return SLUICE_ENOMEM;
    for (i = 0; i < SL_RSV_SETS; i++) {
        sets[i].ways = sl_calloc(SL_RSV_WAYS, sizeof(sl_rsv_entry));
        if (sets[i].ways == NULL || !set_init(&sets[i])) {
            sl_free(sets[i].ways);
            sets[i].ways = NULL;
            free_sets(sets, i);
            return SLUICE_ENOMEM;
        }
    }
    rv->sets = sets;
    /* Published last: a thread that sees it sees the sets. */
    atomic_store_explicit(&rv->ready, true, memory_order_release);
    return SLUICE_OK;
}

void sl_reserve_free(sl_reserve *rv)
{
    if (!sl_reserve_on(rv))
        return;
    free_sets(rv->sets, SL_RSV_SETS);
    rv->sets = NULL;
    atomic_store(&rv->ready, false);
}

/* Locks a set. Threads on a hot key meet here at every admission: a
 * thread that finds the lock taken tries again a while before it sleeps
 * (the holder runs on another core for a few hundred ns), as glibc's
 * adaptive mutexes do, so that the threads of a hot key do not take turns
 * sleeping and waking, which leaves a thread woken by its round trip's
 * answer waiting behind them for a core. */
static void lock_set(sl_rsv_set *set)
{
    int i;

    for (i = 0; i < SPIN_TRIES; i++)
        if (pthread_mutex_trylock(&set->mu) == 0)
            return;
    pthread_mutex_lock(&set->mu);
}

static const char *prefix_of(const sl_rsv_entry *e)
{
    return e->own_prefix ? e->key + e->key_len : NULL;
}

/* The set of the key (and its prefix, when it has its own). */
static sl_rsv_set *set_of(const sl_reserve *rv, const sl_request *r)
{
    uint64_t h = sl_hash64(r->key, r->key_len);

    if (r->prefix != NULL)
        h = sl_hash64_add(h, r->prefix, strlen(r->prefix));
    return &rv->sets[h % SL_RSV_SETS];
}

static bool same_key(const sl_rsv_entry *e, const sl_request *r)
{
    const char *p = prefix_of(e);

    return e->key != NULL && e->key_len == r->key_len &&
           memcmp(e->key, r->key, r->key_len) == 0 &&
           (p == NULL ? r->prefix == NULL
                      : r->prefix != NULL && strcmp(p, r->prefix) == 0);
}

static sl_rsv_entry *find(sl_rsv_set *set, const sl_request *r)
{
    size_t w;

    for (w = 0; w < SL_RSV_WAYS; w++)
        if (same_key(&set->ways[w], r) &&
            sl_ruleset_same(&set->ways[w].rules, r->decide.rules))
            return &set->ways[w];
    return NULL;
}

/* A way for r: a free one, else the least recent that holds nothing and
 * asks nothing; NULL when every way holds units. */
static sl_rsv_entry *claim(sl_rsv_set *set, const sl_request *r, int64_t now,
                           int64_t cap)
{
    sl_rsv_entry *e = NULL;
    size_t w, plen = r->prefix != NULL ? strlen(r->prefix) : 0;
    char *key;

    for (w = 0; w < SL_RSV_WAYS && e == NULL; w++)
        if (set->ways[w].key == NULL)
            e = &set->ways[w];
    for (w = 0; w < SL_RSV_WAYS && e == NULL; w++) {
        sl_rsv_entry *x = &set->ways[w];

        if (held(x) == 0 && x->asking == 0 && (e == NULL || x->last < e->last))
            e = x;
    }
    if (e == NULL || (key = sl_malloc(r->key_len + plen + 1)) == NULL)
        return NULL; /* no reservation for this key: it is decided as is */
    memcpy(key, r->key, r->key_len);
    if (plen > 0)
        memcpy(key + r->key_len, r->prefix, plen);
    key[r->key_len + plen] = '\0';
    sl_free(e->key);
    e->key = key;
    e->key_len = r->key_len;
    e->own_prefix = r->prefix != NULL;
    e->gen++;
    e->rules = *r->decide.rules;
    e->has_bucket = sl_ruleset_has(&e->rules, SL_FAMILY_BUCKET);
    e->windows_only =
        !e->has_bucket && !sl_ruleset_has(&e->rules, SL_FAMILY_LOG);
    e->seen_at = now;
    e->seen_cur = e->seen_prev = 0;
    e->ceiling = cap;
    e->asking = 0;
    memset(e->lots, 0, sizeof(e->lots));
    e->refused = false;
    return e;
}

/* Counts cost units asked at now, by hold: the current hold's and the
 * last one's. */
static void count(sl_rsv_entry *e, int64_t now, int64_t h, int64_t cost)
{
    if (now >= e->seen_at + h) {
        e->seen_prev = now < e->seen_at + 2 * h ? e->seen_cur : 0;
        e->seen_cur = 0;
        e->seen_at = now - (now - e->seen_at) % h;
    }
    e->seen_cur = sl_min64(e->seen_cur + cost, INT64_MAX / 4);
    e->last = sl_max64(e->last, now);
}

/* Whether a lot of e lives to the end of its windows rather than the
 * hold: a unit of fixed and sliding rules is safe anywhere in the window
 * it was charged in, and where the backend cannot give it back, the hold
 * would only make it lapse (docs/SEMANTICS.md, "Lots"). Buckets and logs
 * need the hold for their guarantee. */
static bool keeps(const sl_reserve *rv, const sl_rsv_entry *e)
{
    return e->windows_only && (!rv->window_refunds || e->refused);
}

/* The entry's units let go at now: those that can be given back (the
 * caller refunds them) are returned; with keep, those that cannot and are
 * still valid stay in their lots (dropping them would waste them); the
 * others are counted as lapsed. The lots left are in order, the older
 * first. */
static int64_t let_go(sl_reserve *rv, sl_rsv_entry *e, int64_t now, bool keep)
{
    int64_t back = 0;
    int i;

    for (i = 0; i < 2; i++) {
        sl_rsv_lot *l = &e->lots[i];

        /* A bucket's only within its hold: later, what it charged may
         * have drained, and giving it back would make room that was used
         * (a window's count never drains within its window). */
        if (e->refundable && !e->refused && now >= l->t0 &&
            now < (e->has_bucket ? l->until : l->win_end))
            back += l->units;
        else if (keep && l->units > 0 && now >= l->t0 && now < l->until)
            continue;
        else
            ADD(rv->lapsed, (uint64_t)l->units);
        memset(l, 0, sizeof(*l));
    }
    if (e->lots[0].units == 0) {
        e->lots[0] = e->lots[1];
        memset(&e->lots[1], 0, sizeof(e->lots[1]));
    }
    return back;
}

/* A reset through the handle: the key's reservations lapse (the reset
 * forgot their charges). */
static void drop(sl_reserve *rv, const sl_request *r)
{
    sl_rsv_set *set = set_of(rv, r);
    size_t w;

    pthread_mutex_lock(&set->mu);
    for (w = 0; w < SL_RSV_WAYS; w++) {
        sl_rsv_entry *e = &set->ways[w];

        if (same_key(e, r) && held(e) > 0) {
            ADD(rv->lapsed, (uint64_t)held(e));
            memset(e->lots, 0, sizeof(e->lots));
        }
    }
    pthread_mutex_unlock(&set->mu);
}

/* ------------------------------------------------------- the pipeline */

/* The answer of an acquire admitted from lot l of e at now: l's answer
 * counted down; remaining, the newest lot's answer and what is held. */
static void answer(const sl_rsv_entry *e, const sl_rsv_lot *l, int64_t now,
                   sluice_result *out)
{
    const sl_rsv_lot *newest = e->lots[1].size > 0 ? &e->lots[1] : &e->lots[0];
    int64_t gone = now - l->t0;

    *out = l->at;
    out->status = SLUICE_RESERVED;
    out->allowed = true;
    out->retry_after_ms = -1;
    out->remaining = newest->at.remaining + held(e);
    out->reset_after_ms = sl_max64(0, l->at.reset_after_ms - gone);
    sl_result_set_rule_reset(
        out, sl_max64(0, sluice_result_rule_reset_ms(&l->at) - gone));
}

/* The lot of e that admits cost at now: the older when it can, else the
 * newer; NULL: neither. */
static sl_rsv_lot *covering(sl_rsv_entry *e, int64_t now, int64_t cost)
{
    int i;

    for (i = 0; i < 2; i++) {
        sl_rsv_lot *l = &e->lots[i];

        if (l->units >= cost && now >= l->t0 && now < l->until)
            return l;
    }
    return NULL;
}

static bool covers(sl_rsv_entry *e, int64_t now, int64_t cost)
{
    return covering(e, now, cost) != NULL;
}

/* What a batch asks at now (0: none): what the key asked within the
 * last hold h, at most the ceiling; with what is held and asked already,
 * no more than the cap (a handle never holds more than c units of a key,
 * its batches in flight included) and, when the key's window ends within
 * h, no more than the key asks at that pace until then (the rest would
 * lapse). */
static int64_t batch_size(const sl_rsv_entry *e, int64_t now, int64_t h,
                          int64_t cap)
{
    int64_t want = sl_max64(e->seen_prev, e->seen_cur), most = cap, ask, end;

    if (want < HOT_UNITS)
        return 0;
    end = window_end(&e->rules, now);
    if (end != INT64_MAX && end - now < h) /* want * (end - now) / h, up */
        most = sl_min64(most, want / h * (end - now) +
                                  sl_cdiv(want % h * (end - now), h));
    ask = sl_min64(sl_min64(want, e->ceiling), most - held(e) - e->asking);
    return ask >= 2 ? ask : 0;
}

/* Takes cost from e at now (covers() said it can): the answer in *out.
 * When the older lot runs below half its size and no newer one is held
 * or asked, the refill's size (else 0). */
static int64_t take(sl_rsv_entry *e, int64_t now, int64_t cost, int64_t h,
                    int64_t cap, sluice_result *out)
{
    sl_rsv_lot *l = covering(e, now, cost);

    l->units -= cost;
    answer(e, l, now, out);
    if (e->lots[0].units == 0 && e->lots[1].size > 0) { /* the newer moves up */
        e->lots[0] = e->lots[1];
        memset(&e->lots[1], 0, sizeof(e->lots[1]));
    }
    if (e->lots[1].size == 0 && e->asking == 0 &&
        e->lots[0].units < e->lots[0].size / 2)
        return batch_size(e, now, h, cap);
    return 0;
}

/* Waits on set (locked) for e's batches in flight, while they could
 * cover cost, until deadline (monotonic ms): whether e covers it then. */
static bool wait_batch(sl_rsv_set *set, sl_rsv_entry *e, uint64_t gen,
                       int64_t now, int64_t cost, int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000),
                          (long)(deadline % 1000) * 1000000};

    while (e->gen == gen && e->asking >= cost && !covers(e, now, cost))
        if (pthread_cond_timedwait(&set->settled, &set->mu, &ts) != 0)
            break; /* timed out: to the backend */
    return e->gen == gen && covers(e, now, cost);
}

bool sl_reserve_use(sl_reserve *rv, const sl_config *cfg, const sl_request *r,
                    bool may_wait, sluice_result *out, sl_rsv_plan *p)
{
    const sluice_ruleset *rs;
    int64_t h, cap, now, cost;
    sl_rsv_set *set;
    sl_rsv_entry *e;
    bool hit = false;

    if (r->op == SL_OP_RESET)
        drop(rv, r);
    if (r->op != SL_OP_ACQUIRE)
        return false;
    if (r->policy->reserve_ms <= 0) /* not this request's policy */
        return false;
    rs = r->decide.rules;
    cost = r->decide.cost;
    h = hold_of(rs, r->policy->reserve_ms);
    cap = cap_of(rs, r->policy->reserve_share);
    /* A block must stop every client at once: a lot held elsewhere cannot
     * know of it, so a ruleset with one never reserves. */
    if (h <= 0 || cap < 2 || sl_ruleset_blocks(rs) ||
        (rv->server_clock && sl_ruleset_has(rs, SL_FAMILY_WINDOW)))
        return false;
    now = r->now_ms >= 0 ? r->now_ms : cfg->clock(cfg->clock_ctx);
    set = set_of(rv, r);
    lock_set(set);
    if ((e = find(set, r)) == NULL && (e = claim(set, r, now, cap)) == NULL) {
        pthread_mutex_unlock(&set->mu);
        return false;
    }
    count(e, now, h, cost);
    p->e = e;
    p->set = set;
    p->gen = e->gen;
    p->now = now;
    p->hold = h;
    p->cap = cap;
    p->refill = 0;
    p->park = false;
    p->cost = cost;
    /* A blocking call waits for a batch in flight, at most half its
     * budget: the other half is for its own round trip if it must. */
    if (covers(e, now, cost) ||
        (may_wait && e->asking >= cost &&
         wait_batch(set, e, e->gen, now, cost,
                    sl_mono_ms() + cfg->command_timeout_ms / 2))) {
        p->refill = take(e, now, cost, h, cap, out);
        e->asking += p->refill;
        if (p->refill == 0)
            p->e = NULL;
        hit = true;
    } else {
        p->park = !may_wait && e->asking >= cost;
    }
    pthread_mutex_unlock(&set->mu);
    if (hit)
        ADD(rv->admitted, 1);
    return hit;
}

size_t sl_reserve_plan(sl_reserve *rv, const sl_request *r, sl_rsv_plan *p,
                       sl_request *rs)
{
    sl_rsv_entry *e = p->e;
    size_t n = 0;

    p->refund = p->ask = p->granted = 0;
    if (e != NULL) {
        pthread_mutex_lock(&p->set->mu);
        if (e->gen != p->gen) {
            p->e = NULL;
        } else if ((e->lots[0].units > 0 && p->now < e->lots[0].t0) ||
                   (e->lots[1].units > 0 && p->now < e->lots[1].t0)) {
            p->e = NULL; /* a clock behind: alone, the units stay */
        } else {
            p->refund = let_go(rv, e, p->now, true);
            p->ask = batch_size(e, p->now, p->hold, p->cap);
            e->asking += p->ask;
        }
        pthread_mutex_unlock(&p->set->mu);
    }
    if (p->refund > 0) {
        rs[n] = *r;
        rs[n].op = SL_OP_REFUND;
        rs[n].decide.cost = p->refund;
        rs[n].decide.granted = NULL;
        rs[n].decide.violated = NULL;
        n++;
    }
    p->main = n;
    rs[n++] = *r;
    if (p->ask > 0) {
        rs[n] = *r;
        rs[n].op = SL_OP_AT_MOST;
        rs[n].decide.cost = p->ask;
        rs[n].decide.granted = &p->granted;
        rs[n].decide.violated = NULL; /* the batch's, not the request's */
        n++;
    }
    p->n = n;
    return n;
}

void sl_reserve_cancel(sl_rsv_plan *p)
{
    if (p->e == NULL)
        return;
    pthread_mutex_lock(&p->set->mu);
    if (p->e->gen == p->gen && p->refill > 0) {
        p->e->asking = sl_max64(0, p->e->asking - p->refill);
        pthread_cond_broadcast(&p->set->settled); /* waiters for it go on */
    }
    pthread_mutex_unlock(&p->set->mu);
    p->e = NULL;
}

size_t sl_reserve_refill(const sl_request *r, sl_rsv_plan *p, sl_request *rs)
{
    p->refund = p->granted = 0;
    p->ask = p->refill;
    p->main = 0; /* no answer of its own: the admission was answered */
    rs[0] = *r;
    rs[0].op = SL_OP_AT_MOST;
    rs[0].decide.cost = p->ask;
    rs[0].decide.granted = &p->granted;
    rs[0].decide.violated = NULL;
    p->n = 1;
    return 1;
}

/* g units charged at now by the batch that answered b, kept in e: the
 * older lot when it is empty, else the newer. When both hold units (two
 * batches answered at once), the newer's and the grant become one lot,
 * valid where both are (from the later charge to the earlier end), if
 * they are of the same windows; else the newer's lapse. */
static void deposit(sl_reserve *rv, sl_rsv_entry *e, const sl_rsv_plan *p,
                    int64_t g, const sluice_result *b)
{
    sl_rsv_lot lot = {g, g, p->now, 0, 0, *b};
    sl_rsv_lot *l = &e->lots[1];

    lot.win_end = window_end(&e->rules, p->now);
    lot.until =
        keeps(rv, e) ? lot.win_end : sl_min64(p->now + p->hold, lot.win_end);
    e->refundable =
        !sl_ruleset_has(&e->rules, SL_FAMILY_LOG) &&
        (rv->window_refunds || !sl_ruleset_has(&e->rules, SL_FAMILY_WINDOW));
    if (e->lots[0].units == 0) {
        e->lots[0] = *l; /* the newer moves up */
        memset(l, 0, sizeof(*l));
        if (e->lots[0].units == 0)
            l = &e->lots[0];
    }
    if (l->units > 0 && l->win_end == lot.win_end && p->now < l->until) {
        lot.units += l->units;
        lot.size += l->size;
        lot.t0 = sl_max64(lot.t0, l->t0);
        lot.until = sl_min64(lot.until, l->until);
    } else if (l->units > 0) {
        ADD(rv->lapsed, (uint64_t)l->units);
    }
    *l = lot;
}

int sl_reserve_after(sl_reserve *rv, sl_rsv_plan *p, sluice_status st,
                     const sluice_result *res, sluice_result *rescue)
{
    const sluice_result *m, *b;
    bool ok = st == SLUICE_OK;
    int64_t g = 0;
    sl_rsv_entry *e = p->e;
    int out = 0;

    if (e == NULL)
        return 0;
    m = p->refill > 0 ? NULL : &res[p->main];
    b = p->ask > 0 ? &res[p->n - 1] : NULL;
    if (p->refund > 0)
        ADD(*(ok && res[0].status == SLUICE_OK ? &rv->refunded : &rv->lapsed),
            (uint64_t)p->refund);
    if (b != NULL) {
        if (ok && b->status == SLUICE_OK && b->allowed)
            g = sl_min64(sl_max64(p->granted, 0), p->ask);
        ADD(rv->batches, 1);
        ADD(rv->asked, (uint64_t)p->ask);
        ADD(rv->granted, (uint64_t)g);
    }
    pthread_mutex_lock(&p->set->mu);
    if (e->gen == p->gen) {
        /* twemproxy:// takes no refund, redis+multi:// none of a window:
         * this key's units lapse from now on. */
        if (p->refund > 0 && ok && res[0].status == SLUICE_EUNSUPPORTED)
            e->refused = true;
        e->asking = sl_max64(0, e->asking - p->ask);
        /* Near the limit every request is the backend's: a short grant
         * halves what the key may ask, until an answer shows room for a
         * whole batch again. */
        if (b != NULL && ok && b->status == SLUICE_OK && g < p->ask)
            e->ceiling = g / 2;
        else if (ok && (b != NULL ? b : m)->status == SLUICE_OK &&
                 (b != NULL ? b : m)->remaining >= p->cap)
            e->ceiling = p->cap;
        if (ok && m != NULL && m->status == SLUICE_OK && !m->allowed)
            e->ceiling = 0;
        if (g > 0)
            deposit(rv, e, p, g, b);
        if (b != NULL)
            pthread_cond_broadcast(&p->set->settled);
        /* Not from its own batch's units: the lots it kept at the miss
         * did not cover it, and its grant joins them (deposit). */
        if (m != NULL && ok && m->status == SLUICE_OK && !m->allowed &&
            g == 0 && covers(e, p->now, p->cost)) {
            take(e, p->now, p->cost, p->hold, p->cap,
                 rescue); /* no refill here */
            out |= SL_RSV_RESCUED;
        }
    } else if (g > 0) {
        ADD(rv->lapsed, (uint64_t)g); /* its entry changed hands */
    }
    pthread_mutex_unlock(&p->set->mu);
    if (out & SL_RSV_RESCUED)
        ADD(rv->admitted, 1);
    return out | (b != NULL ? SL_RSV_SETTLED : 0);
}

/* ------------------------------------------------------------- closing */

size_t sl_reserve_leftovers(sl_reserve *rv, int64_t now, sl_request *rs,
                            size_t max)
{
    size_t i, w, n = 0;

    if (!sl_reserve_on(rv))
        return 0;
    for (i = 0; i < SL_RSV_SETS; i++) {
        pthread_mutex_lock(&rv->sets[i].mu);
        for (w = 0; w < SL_RSV_WAYS; w++) {
            sl_rsv_entry *e = &rv->sets[i].ways[w];

            int64_t back;

            if (held(e) <= 0)
                continue;
            if (n >= max) {
                ADD(rv->lapsed, (uint64_t)held(e));
                memset(e->lots, 0, sizeof(e->lots));
            } else if ((back = let_go(rv, e, now, false)) > 0) {
                memset(&rs[n], 0, sizeof(rs[n]));
                rs[n].op = SL_OP_REFUND;
                rs[n].key = e->key;
                rs[n].key_len = e->key_len;
                rs[n].prefix = prefix_of(e);
                rs[n].now_ms = rv->server_clock ? -1 : now;
                rs[n].decide.rules = &e->rules;
                rs[n].decide.cost = back;
                n++;
            }
        }
        pthread_mutex_unlock(&rv->sets[i].mu);
    }
    return n;
}

void sl_reserve_closed(sl_reserve *rv, const sl_request *rs, size_t n,
                       sluice_status st, const sluice_result *res)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (st == SLUICE_OK && res[i].status == SLUICE_OK)
            ADD(rv->refunded, (uint64_t)rs[i].decide.cost);
        else
            ADD(rv->lapsed, (uint64_t)rs[i].decide.cost);
    }
}

void sl_reserve_read(const sl_reserve *rv, sluice_stats *out)
{
    out->reserve_admitted = GET(rv->admitted);
    out->reserve_batches = GET(rv->batches);
    out->reserve_asked = GET(rv->asked);
    out->reserve_granted = GET(rv->granted);
    out->reserve_refunded = GET(rv->refunded);
    out->reserve_lapsed = GET(rv->lapsed);
}
