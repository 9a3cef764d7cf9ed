/* SPDX-License-Identifier: BSD-3-Clause */
/* memory.c - the in-process backend: decisions on a table of limiter
 * state (memtab.c) behind one mutex, private to a handle (mem://) or shared
 * by name (mem://NAME), its memory bounded by expiry on the handle's clock
 * and by fallback_max_keys=. */
#include "algo.h"
#include "backend.h"
#include "backends/memtab.h"
#include "store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef sl_memtab_entry entry;
typedef sl_memtab store;

#define BLOB   SL_MEMTAB_RULES
#define LEASES SL_MEMTAB_LEASES
#define BLOCK  SL_MEMTAB_BLOCK

/* What a handle holds: its store and its key prefix. */
typedef struct handle {
    store *s;
    char prefix[64];
    int64_t ttl_floor_ms; /* no entry lives less after a charge */
} handle;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static store *registry; /* named stores: shared by handles of one process */

static sl_family family_of(const entry *e)
{
    return sl_memtab_family(e);
}

/* fallback_max_keys's default: 18 to 32 MB of state (177 to 321 bytes an
 * entry with its key, measured; docs/PRODUCTION.md), where without a bound
 * a flood of new keys grew a store until they expired, an hour or a day
 * later on such rules. */
#define DEFAULT_MAX_KEYS 100000

static sluice_status memory_open(const sl_url *url, sl_engine *eng,
                                 void **state, char *err, size_t err_len)
{
    store *s;
    handle *h = sl_calloc(1, sizeof(*h));
    int64_t cap = url->cfg.fallback_max_keys;
    size_t max_keys = cap > 0 ? (size_t)cap : cap == 0 ? DEFAULT_MAX_KEYS : 0;

    (void)eng;
    if (h == NULL) {
        sl_errf(err, err_len, "memory: out of memory creating the handle");
        return SLUICE_ENOMEM;
    }

    if (url->name[0] == '\0') {
        s = sl_memtab_new("", max_keys);
    } else {
        pthread_mutex_lock(&registry_lock);
        for (s = registry; s != NULL; s = s->next)
            if (strcmp(s->name, url->name) == 0)
                break;
        if (s != NULL && s->max_keys != max_keys) {
            /* One store, one bound: a second would hold for no one. */
            pthread_mutex_unlock(&registry_lock);
            sl_free(h);
            sl_errf(err, err_len,
                    "memory: mem://%s is open with fallback_max_keys=%zu; "
                    "give every handle on it the same",
                    url->name, s->max_keys);
            return SLUICE_EURL;
        }
        if (s != NULL) {
            s->refs++;
        } else if ((s = sl_memtab_new(url->name, max_keys)) != NULL) {
            s->next = registry;
            registry = s;
        }
        pthread_mutex_unlock(&registry_lock);
    }
    if (s == NULL) {
        sl_free(h);
        sl_errf(err, err_len, "memory: out of memory creating the store");
        return SLUICE_ENOMEM;
    }
    h->s = s;
    strcpy(h->prefix, url->cfg.prefix);
    h->ttl_floor_ms = url->cfg.ttl_floor_ms;
    *state = h;
    return SLUICE_OK;
}

static void memory_close(void *state)
{
    handle *h = state;
    store *s, **pp;

    if (h == NULL)
        return;
    s = h->s;
    sl_free(h);
    if (s->name[0] == '\0') {
        sl_memtab_free(s);
        return;
    }
    pthread_mutex_lock(&registry_lock);
    if (--s->refs == 0) {
        for (pp = &registry; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        }
        sl_memtab_free(s);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* A reset: a bucket or log goes whole; a window rule loses the windows
 * k - 2 .. k + 1 around t, what the Redis backends delete (one key per
 * window there; SEMANTICS.md, "reset"). */
static void reset_key(store *s, const char *key, size_t len,
                      const sluice_rule *r, int64_t t)
{
    entry *e = sl_memtab_lookup(s, key, len, t);
    int64_t k, to_end;
    size_t i, o = 0;

    if (e == NULL)
        return;
    if (family_of(e) == SL_FAMILY_WINDOW) {
        sl_window_locate(r, t, &k, &to_end);
        for (i = 0; i < e->u.win.n; i++) {
            if (e->u.win.idx[i] >= k - 2 && e->u.win.idx[i] <= k + 1)
                continue;
            e->u.win.idx[o] = e->u.win.idx[i];
            e->u.win.count[o++] = e->u.win.count[i];
        }
        e->u.win.n = o;
        if (o > 0)
            return;
    }
    sl_memtab_drop(s, e);
}

/* Where window k is, or where it goes (found: *at holds it). Windows are
 * in ascending order, so the current ones are found from the end. */
static size_t window_at(const entry *e, int64_t k, bool *at)
{
    size_t i = e->u.win.n;

    while (i > 0 && e->u.win.idx[i - 1] > k)
        i--;
    *at = i > 0 && e->u.win.idx[i - 1] == k;
    return *at ? i - 1 : i;
}

static int64_t window_count(const entry *e, int64_t k)
{
    bool at;
    size_t i;

    if (e == NULL)
        return 0;
    i = window_at(e, k, &at);
    return at ? e->u.win.count[i] : 0;
}

/* What the store holds for rule r, as the arithmetic wants it. */
static void view_of(const entry *e, const sluice_rule *r, int64_t t,
                    sl_state_view *s)
{
    int64_t k, to_end;

    memset(s, 0, sizeof(*s));
    if (e == NULL)
        return;
    switch (sl_store_of(r->algorithm).family) {
    case SL_FAMILY_WINDOW:
        sl_window_locate(r, t, &k, &to_end);
        s->cur = window_count(e, k);
        s->prev = window_count(e, k - 1);
        break;
    case SL_FAMILY_LOG:
        s->entries = e->u.log.e + e->u.log.head;
        s->n = e->u.log.n;
        break;
    case SL_FAMILY_BUCKET:
        s->has = e->u.bucket.has;
        s->x = e->u.bucket.x;
        s->d = e->u.bucket.d;
        break;
    }
}

/* Makes room so that charging e cannot fail halfway through a composite. */
static bool reserve(entry *e)
{
    if (family_of(e) == SL_FAMILY_WINDOW) {
        if (e->u.win.n == e->u.win.cap) {
            size_t cap = e->u.win.cap ? e->u.win.cap * 2 : 4;
            int64_t *idx = sl_realloc(e->u.win.idx, cap * sizeof(int64_t));

            if (idx == NULL)
                return false;
            e->u.win.idx = idx;
            idx = sl_realloc(e->u.win.count, cap * sizeof(int64_t));
            if (idx == NULL)
                return false;
            e->u.win.count = idx;
            e->u.win.cap = cap;
        }
    } else if (family_of(e) == SL_FAMILY_LOG) {
        if (e->u.log.head > 0 && e->u.log.head + e->u.log.n == e->u.log.cap) {
            memmove(e->u.log.e, e->u.log.e + e->u.log.head,
                    e->u.log.n * sizeof(sl_log_entry));
            e->u.log.head = 0;
        }
        if (e->u.log.n == e->u.log.cap) {
            size_t cap = e->u.log.cap ? e->u.log.cap * 2 : 8;
            sl_log_entry *n = sl_realloc(e->u.log.e, cap * sizeof(*n));

            if (n == NULL)
                return false;
            e->u.log.e = n;
            e->u.log.cap = cap;
        }
    }
    return true;
}

/* floor: the handle's TTL floor, which a window outlives from its start,
 * as a Redis window key does. */
static void charge_rule(entry *e, const sluice_rule *r, int64_t t, int64_t cost,
                        int64_t aux_x, int64_t aux_d, int64_t floor)
{
    int64_t k, to_end;
    size_t i;

    switch (sl_store_of(r->algorithm).family) {
    case SL_FAMILY_WINDOW: {
        /* Windows older than the ones that still count are garbage once
         * the TTL floor from their start has passed too (a request late
         * by more than a period may still find them, as on Redis). They
         * are a prefix, dropped when the array is full: a hot key with a
         * 1 ms period keeps a floor's worth of windows, as Redis does. */
        int64_t keep = sl_store_of(r->algorithm).windows;
        int64_t *idx = e->u.win.idx, *count = e->u.win.count;
        size_t n = e->u.win.n, d = 0;
        bool at;

        sl_window_locate(r, t, &k, &to_end);
        i = window_at(e, k, &at);
        if (at) {
            count[i] += cost;
            break;
        }
        memmove(idx + i + 1, idx + i, (n - i) * sizeof(*idx));
        memmove(count + i + 1, count + i, (n - i) * sizeof(*count));
        idx[i] = k;
        count[i] = cost;
        e->u.win.n = ++n;
        if (n < e->u.win.cap)
            break;
        while (d < n && idx[d] < k - keep &&
               t >= idx[d] * r->period_ms - r->tz_offset_ms + floor)
            d++;
        memmove(idx, idx + d, (n - d) * sizeof(*idx));
        memmove(count, count + d, (n - d) * sizeof(*count));
        e->u.win.n = n - d;
        break;
    }
    case SL_FAMILY_LOG: {
        sl_log_entry *le = e->u.log.e + e->u.log.head;
        size_t n = e->u.log.n;

        /* aux_x is the stamp u = max(t, newest); older than u - P is out. */
        while (n > 0 && le->x <= aux_x - r->period_ms) {
            le++;
            n--;
            e->u.log.head++;
        }
        e->u.log.n = n;
        if (n > 0 && le[n - 1].x == aux_x) {
            le[n - 1].cost += cost;
        } else {
            le[n].x = aux_x;
            le[n].cost = cost;
            e->u.log.n++;
        }
        break;
    }
    case SL_FAMILY_BUCKET:
        e->u.bucket.has = true;
        e->u.bucket.x = aux_x;
        e->u.bucket.d = aux_d;
        break;
    }
}

/* Refunds a of rule r's entry e at t (SEMANTICS.md, "refund"); s is
 * the view read before. No expiry moves. */
static void refund_rule(entry *e, const sluice_rule *r, int64_t t, int64_t a,
                        const sl_state_view *s)
{
    int64_t k, to_end, take_cur, take_prev, x, d, last;
    size_t i, first, end;
    bool at;

    switch (sl_store_of(r->algorithm).family) {
    case SL_FAMILY_WINDOW:
        sl_window_locate(r, t, &k, &to_end);
        sl_refund_window(r, s->cur, s->prev, a, &take_cur, &take_prev);
        i = window_at(e, k, &at);
        if (at)
            e->u.win.count[i] -= take_cur;
        i = window_at(e, k - 1, &at);
        if (at)
            e->u.win.count[i] -= take_prev;
        break;
    case SL_FAMILY_LOG:
        sl_refund_log(r, t, s->entries, s->n, a, &first, &end, &last);
        e->u.log.head += first;
        e->u.log.n = end - first;
        if (end > first)
            e->u.log.e[e->u.log.head + e->u.log.n - 1].cost = last;
        break;
    case SL_FAMILY_BUCKET:
        if (sl_refund_bucket(r, t, s->has, s->x, s->d, a, &x, &d)) {
            e->u.bucket.x = x;
            e->u.bucket.d = d;
        }
        break;
    }
}

/* A lease op: an acquire drops the leases that ended by t and adds one if
 * fewer than the most holders live; a release drops its lease alone (as
 * the Lua script's ZREM and the plain backends' do). */
static sluice_status lease_request(store *s, const handle *h,
                                   const sl_request *rq, sluice_result *out,
                                   char *err, size_t err_len)
{
    char key[SL_KEY_BUF];
    size_t kl = sl_key_lease(key, sizeof(key),
                             rq->prefix != NULL ? rq->prefix : h->prefix,
                             rq->key, rq->key_len);
    int64_t t = rq->now_ms, first = -1, last = -1;
    entry *e = sl_memtab_lookup(s, key, kl, t);
    size_t i, o = 0;

    out->status = SLUICE_OK;
    if (e != NULL) {
        for (i = 0; i < e->u.leases.n; i++) {
            struct sl_memtab_lease *l = &e->u.leases.l[i];

            if (rq->op == SL_OP_LEASE_RELEASE ? strcmp(l->id, rq->lease.id) == 0
                                              : l->end <= t)
                continue;
            first = o == 0 ? l->end : sl_min64(first, l->end);
            last = o == 0 ? l->end : sl_max64(last, l->end);
            e->u.leases.l[o++] = *l;
        }
        e->u.leases.n = o;
    }
    if (rq->op == SL_OP_LEASE_RELEASE)
        return SLUICE_OK;
    if (!sl_lease_decide(t, rq->lease.max, rq->lease.lease_ms, (int64_t)o,
                         first, last, out))
        return SLUICE_OK;
    if (e == NULL && (e = sl_memtab_obtain(s, key, kl, LEASES, t)) == NULL)
        goto nomem;
    if (e->u.leases.n == e->u.leases.cap) {
        size_t cap = e->u.leases.cap ? e->u.leases.cap * 2 : 4;
        struct sl_memtab_lease *l = sl_realloc(e->u.leases.l, cap * sizeof(*l));

        if (l == NULL)
            goto nomem;
        e->u.leases.l = l;
        e->u.leases.cap = cap;
    }
    snprintf(e->u.leases.l[e->u.leases.n].id, 24, "%s", rq->lease.id);
    e->u.leases.l[e->u.leases.n++].end = t + rq->lease.lease_ms;
    e->expires_at = sl_max64(
        e->expires_at, t + sl_max64(2 * rq->lease.lease_ms, h->ttl_floor_ms));
    return SLUICE_OK;
nomem:
    sl_errf(err, err_len, "memory: out of memory storing a lease");
    return SLUICE_ENOMEM;
}

/* A rules or overrides op on the store: the keep-alive on the handle's
 * clock. */
static sluice_status rules_request(store *s, const handle *h,
                                   const sl_request *rq, sluice_result *out,
                                   char *err, size_t err_len)
{
    char key[SL_KEY_BUF];
    size_t kl = sl_key_rules(key, sizeof(key),
                             rq->prefix != NULL ? rq->prefix : h->prefix,
                             rq->key, rq->key_len);
    int64_t t = rq->now_ms;
    entry *e = sl_memtab_lookup(s, key, kl, t);
    char *v;

    out->status = SLUICE_OK;
    rq->stored.read->found = false;
    rq->stored.read->len = 0;
    if (rq->op >= SL_OP_OVER_SET) /* the table lives in the rules' entry */
        return sl_overtab_op(e != NULL ? &e->u.blob.over : NULL, rq, err,
                             err_len);
    if (rq->op == SL_OP_RULES_DEL) {
        if (e != NULL) {
            e->expires_at = t; /* gone: lookups drop it */
            rq->stored.read->found = true;
        }
        return SLUICE_OK;
    }
    if (rq->op == SL_OP_RULES_PUT && (e == NULL || !rq->stored.if_absent)) {
        if ((v = sl_memdup(rq->stored.value, rq->stored.value_len)) == NULL ||
            (e = sl_memtab_obtain(s, key, kl, BLOB, t)) == NULL) {
            sl_free(v);
            sl_errf(err, err_len, "memory: out of memory storing rules");
            return SLUICE_ENOMEM;
        }
        sl_free(e->u.blob.v);
        e->u.blob.v = v;
        e->u.blob.n = rq->stored.value_len;
        e->u.blob.keepalive = rq->stored.ttl_ms;
        e->expires_at = INT64_MAX;
    }
    if (e == NULL)
        return SLUICE_OK;
    if (e->u.blob.keepalive > 0)
        e->expires_at = t + e->u.blob.keepalive;
    if (rq->op == SL_OP_RULES_GET && rq->stored.over != NULL)
        sl_overtab_get(&e->u.blob.over, rq->stored.client,
                       rq->stored.client_len, rq->stored.over);
    rq->stored.read->found = true;
    rq->stored.read->kept = true;
    rq->stored.read->overs = (int64_t)e->u.blob.over.n;
    rq->stored.read->len = e->u.blob.n;
    memcpy(rq->stored.read->buf, e->u.blob.v, e->u.blob.n);
    return SLUICE_OK;
}

static sluice_status decide_request(store *s, const handle *h,
                                    const sl_request *rq, sluice_result *out,
                                    char *err, size_t err_len)
{
    const char *prefix = rq->prefix != NULL ? rq->prefix : h->prefix;
    const sluice_ruleset *rs = rq->decide.rules;
    sl_verdict v[SLUICE_MAX_RULES];
    sl_state_view views[SLUICE_MAX_RULES];
    sl_charge ch[SLUICE_MAX_RULES];
    entry *es[SLUICE_MAX_RULES];
    char keys[SLUICE_MAX_RULES][SLUICE_MAX_KEY_LEN + 128];
    size_t lens[SLUICE_MAX_RULES], i, bl = 0;
    char bkey[SL_KEY_BUF];
    entry *be;
    int64_t t = rq->now_ms, cost, end = -1, new_end;
    bool all, blocks = sl_ruleset_blocks(rs);

    out->status = SLUICE_OK;
    for (i = 0; i < rs->count; i++) {
        lens[i] = sl_key_build(keys[i], sizeof(keys[i]), prefix, rq->key,
                               rq->key_len, &rs->rules[i]);
        if (rq->op == SL_OP_RESET) {
            reset_key(s, keys[i], lens[i], &rs->rules[i], t);
            continue;
        }
        es[i] = sl_memtab_lookup(s, keys[i], lens[i], t);
        view_of(es[i], &rs->rules[i], t, &views[i]);
    }
    if (rq->op == SL_OP_RESET) {
        /* A ruleset with a block ends the key's block too. */
        if (blocks)
            reset_key(
                s, bkey,
                sl_key_block(bkey, sizeof(bkey), prefix, rq->key, rq->key_len),
                &rs->rules[0], t);
        return SLUICE_OK;
    }
    if (rq->op == SL_OP_REFUND) {
        for (i = 0; i < rs->count; i++)
            if (es[i] != NULL)
                refund_rule(es[i], &rs->rules[i], t, rq->decide.cost,
                            &views[i]);
        for (i = 0; i < rs->count; i++)
            view_of(es[i], &rs->rules[i], t, &views[i]);
        sl_describe(rs, views, t, out);
        return SLUICE_OK;
    }
    cost = rq->decide.cost;
    if (rq->op == SL_OP_FORCE) {
        /* Unjudged (SEMANTICS.md, "settle"): charged as an admission is,
         * each rule what it gains, then answered as a refund is. */
        sl_force_plan(rs, views, t, cost, v, ch);
        goto charge;
    }
    if (blocks) {
        bl = sl_key_block(bkey, sizeof(bkey), prefix, rq->key, rq->key_len);
        be = sl_memtab_lookup(s, bkey, bl, t);
        end = be != NULL ? be->u.block.end : -1;
    }
    if (rq->op == SL_OP_AT_MOST) {
        *rq->decide.granted =
            end > t ? 0 : sl_grant(rs, views, t, rq->decide.cost);
        cost = *rq->decide.granted > 0 ? *rq->decide.granted : 1;
    }
    all = sl_decide_block(rs, views, t, cost, end, v, ch, &new_end);
    sl_combine(rs, v, out);
    sl_note_violated(rq, rs, v);
    if (rq->op != SL_OP_ACQUIRE && rq->op != SL_OP_AT_MOST)
        return SLUICE_OK;
    if (new_end != end) {
        /* Started or extended: kept a longest block past its end, as a
         * Redis backend's key lives (its TTL only collects garbage). */
        if ((be = sl_memtab_obtain(s, bkey, bl, BLOCK, t)) == NULL) {
            sl_errf(err, err_len, "memory: out of memory storing a block");
            return SLUICE_ENOMEM;
        }
        be->u.block.end = sl_max64(be->u.block.end, new_end);
        be->expires_at =
            sl_max64(be->expires_at, new_end + sl_ruleset_block_ms(rs));
    }
    if (!all)
        return SLUICE_OK;
charge:
    /* Reserve everything first so that the charge is all or nothing; a
     * live entry found above is the one to charge. */
    for (i = 0; i < rs->count; i++) {
        if (es[i] == NULL)
            es[i] = sl_memtab_obtain(s, keys[i], lens[i],
                                     rs->rules[i].algorithm, t);
        if (es[i] == NULL || !reserve(es[i])) {
            sl_errf(err, err_len, "memory: out of memory storing a charge");
            return SLUICE_ENOMEM;
        }
    }
    for (i = 0; i < rs->count; i++) {
        int64_t ttl =
            sl_store_ttl(&rs->rules[i], t, v[i].reset_ms, h->ttl_floor_ms);

        if (rq->op == SL_OP_FORCE && ch[i].n == 0)
            continue; /* at its ceiling */
        charge_rule(es[i], &rs->rules[i], t,
                    rq->op == SL_OP_FORCE ? ch[i].n : cost, ch[i].x, ch[i].d,
                    h->ttl_floor_ms);
        es[i]->expires_at = sl_max64(es[i]->expires_at, t + ttl);
    }
    if (rq->op == SL_OP_FORCE) {
        for (i = 0; i < rs->count; i++)
            view_of(es[i], &rs->rules[i], t, &views[i]);
        sl_describe(rs, views, t, out);
    }
    return SLUICE_OK;
}

sluice_status sl_memory_decide(void *state, const sl_request *reqs, size_t n,
                               sluice_result *out, char *err, size_t err_len)
{
    handle *h = state;
    store *s = h->s;
    size_t i;
    sluice_status st = SLUICE_OK;

    pthread_mutex_lock(&s->lock);
    for (i = 0; i < n && st == SLUICE_OK; i++) {
        sl_memtab_begin(s, reqs[i].now_ms);
        if ((reqs[i].op >= SL_OP_RULES_GET && reqs[i].op <= SL_OP_RULES_DEL) ||
            reqs[i].op >= SL_OP_OVER_SET)
            st = rules_request(s, h, &reqs[i], &out[i], err, err_len);
        else if (reqs[i].op == SL_OP_LEASE_ACQUIRE ||
                 reqs[i].op == SL_OP_LEASE_RELEASE)
            st = lease_request(s, h, &reqs[i], &out[i], err, err_len);
        else
            st = decide_request(s, h, &reqs[i], &out[i], err, err_len);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* On the engine: decided at once, never waiting; the engine runs the
 * callback from the loop. */
static void memory_start(void *state, sl_job *job)
{
    char err[SL_ERR_LEN]; /* a message only when the store fails */
    sluice_status st;
    size_t i;

    err[0] = '\0';
    st = sl_memory_decide(state, job->reqs, job->n, job->out, err, sizeof(err));

    for (i = 0; i < job->n && !job->finished; i++)
        sl_engine_answer(job, i, st != SLUICE_OK ? st : job->out[i].status,
                         err);
}

size_t sl_memory_count(void *state)
{
    handle *h = state;
    size_t n;

    pthread_mutex_lock(&h->s->lock);
    n = h->s->count;
    pthread_mutex_unlock(&h->s->lock);
    return n;
}

const sl_backend sl_backend_memory = {
    .name = "memory",
    .caps = SL_CAPS_MEMORY,
    .open = memory_open,
    .close = memory_close,
    /* Nothing of a memory job waits: it never resumes nor expires. */
    .ops = {.start = memory_start},
};
