/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice.c - the handle: options, input checks, dispatch to the backend,
 * and the fail policy.
 *
 * A handle is shared by threads. Requests that arrive while another
 * thread's round trip is in flight wait in a queue; when the round trip
 * ends, the queue goes to the backend as one batch (one pipelined write
 * and its replies), driven by one of the waiting threads, while every
 * other caller sleeps on its own condition until its answer is in: no
 * thread waits for the connection, and no request waits for more than the
 * round trip ahead of it and its own. The order of arrival is the order in
 * the batch, so requests on one key keep their order. */
#include "backend.h"
#include "denycache.h"
#include "engine.h"
#include "limiter.h"
#include "net/tls.h"
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A caller waiting for its requests' answers. */
typedef struct waiter {
    const sl_request *reqs;
    size_t n;
    sluice_result *res;
    sluice_status st;
    char *err; /* the caller's message buffer, SL_ERR_LEN bytes */
    bool done;
    int64_t since; /* monotonic ms: when the call queued; its budget
                      runs from then */
    pthread_cond_t cv;
    struct waiter *next;
} waiter;

struct sluice {
    const sl_backend *backend;
    void *state;
    sl_url url;
    sl_engine eng;       /* the connections' I/O, blocking or on a loop */
    sl_deny_cache deny;  /* off unless deny_cache=N */
    sl_stats stats;      /* on unless metrics=0 */
    sl_limiters lim;     /* named limiters: their prefix, the rules read */
    void *fallback;      /* fail=fallback: a private memory store */
    uint64_t last_rt;    /* the backend's round trips counted so far; by
                            whoever drives the engine */
    pthread_mutex_t mu;  /* guards what follows */
    bool busy;           /* a thread is in the backend */
    waiter *head, *tail; /* queued, not yet taken */
    uint64_t batches;    /* backend calls: fewer than the calls when
                            threads' requests went out together */
};

/* sluice_errmsg: each thread keeps the message of its last call on each of
 * the last few handles it used, so that threads sharing a handle never
 * read each other's messages. */
#define ERR_SLOTS 4
static _Thread_local struct err_slot {
    const sluice *sl;
    unsigned long used;
    int64_t began; /* monotonic ms: when this thread's call on sl began */
    char msg[SL_ERR_LEN];
} err_slots[ERR_SLOTS];
static _Thread_local unsigned long err_clock;

/* This thread's message buffer for sl, emptied; every call begins here,
 * so the slot keeps when, and the call's round trips share one budget (a
 * decision by name reads the rules, then decides). */
static char *err_of(const sluice *sl)
{
    struct err_slot *e = &err_slots[0];
    size_t i;

    for (i = 0; i < ERR_SLOTS; i++) {
        if (err_slots[i].sl == sl) {
            e = &err_slots[i];
            break;
        }
        if (err_slots[i].used < e->used)
            e = &err_slots[i];
    }
    e->sl = sl;
    e->used = ++err_clock;
    e->began = sl_mono_ms();
    e->msg[0] = '\0';
    return e->msg;
}

/* When this thread's current call on sl began (now, if unknown). */
static int64_t call_began(const sluice *sl)
{
    size_t i;

    for (i = 0; i < ERR_SLOTS; i++)
        if (err_slots[i].sl == sl && err_slots[i].began > 0)
            return err_slots[i].began;
    return sl_mono_ms();
}

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;

    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sluice_options_init(sluice_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
}

/* The fallback store: private, in this process, its keys under the
 * handle's prefix. */
static sluice_status open_fallback(sluice *sl, char *err, size_t err_len)
{
    sl_url *mem = sl_calloc(1, sizeof(*mem));
    sluice_status st;

    if (mem == NULL) {
        sl_errf(err, err_len, "open: out of memory for the fallback store");
        return SLUICE_ENOMEM;
    }
    mem->scheme = SL_SCHEME_MEM;
    mem->opts = sl->url.opts;
    memcpy(mem->prefix, sl->url.prefix, sizeof(mem->prefix));
    st = sl_backend_memory.open(mem, NULL, &sl->fallback, err, err_len);
    sl_free(mem); /* the memory backend keeps what it needs */
    return st;
}

sluice_status sluice_open(const char *url, const sluice_options *opts,
                          sluice **out, char *err, size_t err_len)
{
    sluice *sl;
    sluice_status st;

    if (out == NULL) {
        sl_errf(err, err_len, "open: out is NULL");
        return SLUICE_EINVAL;
    }
    *out = NULL;
    sl = sl_calloc(1, sizeof(*sl));
    if (sl == NULL) {
        sl_errf(err, err_len, "open: out of memory");
        return SLUICE_ENOMEM;
    }
    if (pthread_mutex_init(&sl->mu, NULL) != 0) {
        sl_free(sl);
        sl_errf(err, err_len, "open: cannot make a mutex");
        return SLUICE_ENOMEM;
    }
    st = sl_url_parse(url, opts, &sl->url, err, err_len);
    if (st != SLUICE_OK)
        goto fail;
    sl->url.opts.key_prefix = sl->url.prefix; /* point into our copy */
    if ((st = sl_limiters_init(&sl->lim, &sl->url)) != SLUICE_OK) {
        sl_errf(err, err_len, "open: cannot make a mutex");
        goto fail;
    }
    if (sl->url.opts.clock == NULL)
        sl->url.opts.clock = realtime_ms;
    switch (sl->url.scheme) {
    case SL_SCHEME_MEM:
        sl->backend = &sl_backend_memory;
        if (sl->url.opts.server_clock) {
            sl_errf(err, err_len,
                    "url \"%s\": mem:// has no server clock; "
                    "drop clock=server or use a redis:// URL",
                    url); /* mem:// holds no credentials */
            st = SLUICE_EURL;
            goto fail;
        }
        break;
    case SL_SCHEME_REDIS:
        sl->backend = &sl_backend_evalsha;
        break;
    case SL_SCHEME_MULTI:
        sl->backend = &sl_backend_multi;
        break;
    case SL_SCHEME_TWEMPROXY:
        sl->backend = &sl_backend_twemproxy;
        break;
    case SL_SCHEME_CLUSTER:
        sl->backend = &sl_backend_cluster;
        break;
    }
    if ((st = sl_tls_check(&sl->url, err, err_len)) != SLUICE_OK)
        goto fail;
    if (sl->url.opts.deny_cache > 1000000) {
        sl_errf(err, err_len,
                "open: deny_cache %u: expected 0..1000000 denials to keep",
                (unsigned)sl->url.opts.deny_cache);
        st = SLUICE_EINVAL;
        goto fail;
    }
    if (sl_deny_init(&sl->deny, sl->url.opts.deny_cache) != SLUICE_OK) {
        sl_errf(err, err_len, "open: out of memory for the deny cache");
        st = SLUICE_ENOMEM;
        goto fail;
    }
    sl_stats_init(&sl->stats, !sl->url.opts.no_metrics);
    sl_engine_init(&sl->eng, &sl->url);
    sl->eng.be = sl->backend;
    st = sl->backend->open(&sl->url, &sl->eng, &sl->state, err, err_len);
    if (st != SLUICE_OK) {
        sl_deny_free(&sl->deny);
        goto fail;
    }
    sl->eng.state = sl->state;
    if (sl->url.opts.fail == SLUICE_FAIL_FALLBACK &&
        (st = open_fallback(sl, err, err_len)) != SLUICE_OK) {
        sl_engine_shutdown(&sl->eng);
        sl->backend->close(sl->state);
        sl_deny_free(&sl->deny);
        goto fail;
    }
    *out = sl;
    return SLUICE_OK;
fail:
    sl_limiters_free(&sl->lim);
    pthread_mutex_destroy(&sl->mu);
    sl_free(sl);
    return st;
}

void sluice_close(sluice *sl)
{
    if (sl == NULL)
        return;
    sl_engine_shutdown(&sl->eng);
    sl->backend->close(sl->state);
    sl_backend_memory.close(sl->fallback);
    sl_deny_free(&sl->deny);
    sl_limiters_free(&sl->lim);
    pthread_mutex_destroy(&sl->mu);
    sl_free(sl);
}

const char *sluice_errmsg(const sluice *sl)
{
    size_t i;

    if (sl == NULL)
        return "handle is NULL";
    for (i = 0; i < ERR_SLOTS; i++)
        if (err_slots[i].sl == sl)
            return err_slots[i].msg;
    return "";
}

static void count_round_trips(sluice *sl, uint64_t requests);

/* Decides the requests of a batch of waiters in one backend call: their
 * requests side by side, in the order they arrived. */
static void run_batch(sluice *sl, waiter *batch)
{
    sl_request stack_reqs[64], *reqs = stack_reqs;
    sluice_result stack_res[64], *res = stack_res;
    char err[SL_ERR_LEN] = "";
    size_t total = 0, at = 0;
    sluice_status st;
    waiter *w;

    if (batch->next == NULL) {
        sl->eng.call_started = batch->since;
        batch->st = sl->backend->decide(sl->state, batch->reqs, batch->n,
                                        batch->res, batch->err, SL_ERR_LEN);
        sl->eng.call_started = 0;
        count_round_trips(sl, batch->n);
        return;
    }
    /* The batch's deadline is that of the call that queued first: no call
     * waits past its own timeout for another thread's round trip. */
    for (w = batch; w != NULL; w = w->next) {
        total += w->n;
        if (w->since < batch->since)
            batch->since = w->since;
    }
    if (total > 64) {
        reqs = sl_calloc(total, sizeof(*reqs));
        res = sl_calloc(total, sizeof(*res));
    }
    if (reqs == NULL || res == NULL) {
        /* No memory to combine them: one after the other. */
        if (reqs != stack_reqs)
            sl_free(reqs);
        if (res != stack_res)
            sl_free(res);
        for (w = batch; w != NULL; w = w->next) {
            sl->eng.call_started = w->since;
            w->st = sl->backend->decide(sl->state, w->reqs, w->n, w->res,
                                        w->err, SL_ERR_LEN);
        }
        sl->eng.call_started = 0;
        count_round_trips(sl, total);
        return;
    }
    for (w = batch; w != NULL; w = w->next) {
        memcpy(reqs + at, w->reqs, w->n * sizeof(*reqs));
        at += w->n;
    }
    memset(res, 0, total * sizeof(*res));
    sl->eng.call_started = batch->since;
    st = sl->backend->decide(sl->state, reqs, total, res, err, SL_ERR_LEN);
    sl->eng.call_started = 0;
    count_round_trips(sl, total);
    at = 0;
    for (w = batch; w != NULL; w = w->next) {
        size_t i;
        bool failed = st != SLUICE_OK;

        memcpy(w->res, res + at, w->n * sizeof(*res));
        for (i = 0; i < w->n; i++)
            failed |= res[at + i].status != SLUICE_OK;
        at += w->n;
        w->st = st;
        if (failed)
            memcpy(w->err, err, SL_ERR_LEN);
    }
    if (reqs != stack_reqs)
        sl_free(reqs);
    if (res != stack_res)
        sl_free(res);
}

/* Queues the requests and returns when they are decided: by this thread,
 * together with whatever queued meanwhile, when no other thread is in the
 * backend; else by the thread that is, or the next one. */
static sluice_status dispatch(sluice *sl, const sl_request *reqs, size_t n,
                              sluice_result *res, char *err)
{
    waiter me;

    memset(&me, 0, sizeof(me));
    me.reqs = reqs;
    me.n = n;
    me.res = res;
    me.err = err;
    me.since = call_began(sl);
    pthread_cond_init(&me.cv, NULL);
    pthread_mutex_lock(&sl->mu);
    if (sl->tail != NULL)
        sl->tail->next = &me;
    else
        sl->head = &me;
    sl->tail = &me;
    while (!me.done) {
        if (!sl->busy) {
            waiter *batch = sl->head, *w, *next;

            sl->head = sl->tail = NULL;
            sl->busy = true;
            sl->batches++;
            pthread_mutex_unlock(&sl->mu);
            run_batch(sl, batch);
            pthread_mutex_lock(&sl->mu);
            sl->busy = false;
            for (w = batch; w != NULL; w = next) {
                next = w->next; /* w may be gone once done */
                w->done = true;
                if (w != &me)
                    pthread_cond_signal(&w->cv);
            }
            /* The next in the queue drives the next round trip. */
            if (sl->head != NULL)
                pthread_cond_signal(&sl->head->cv);
        } else {
            pthread_cond_wait(&me.cv, &sl->mu);
        }
    }
    pthread_mutex_unlock(&sl->mu);
    pthread_cond_destroy(&me.cv);
    return me.st;
}

uint64_t sl_handle_batches(sluice *sl)
{
    uint64_t n;

    pthread_mutex_lock(&sl->mu);
    n = sl->batches;
    pthread_mutex_unlock(&sl->mu);
    return n;
}

size_t sl_handle_deny_count(sluice *sl)
{
    return sl_deny_count(&sl->deny);
}

uint64_t sl_handle_round_trips(const sluice *sl)
{
    return sl->backend->round_trips != NULL
               ? sl->backend->round_trips(sl->state)
               : 0;
}

void *sl_handle_state(const sluice *sl)
{
    return sl->state;
}

const char *sluice_backend_name(const sluice *sl)
{
    return sl == NULL ? "none" : sl->backend->name;
}

/* The backend could not decide: unreachable, too slow, or its server
 * answered with an error (READONLY on a replica, OOM under maxmemory,
 * LOADING, BUSY, MASTERDOWN, a cluster still down after its retries), an
 * unreadable reply, or a key too hot for WATCH. The fail policy answers
 * instead. Never for bad input, an unsupported request or our own memory:
 * those are the caller's to fix, and an open policy would hide them. */
static bool policy_answers(const sluice *sl, sluice_status st)
{
    if (sl->url.opts.fail == SLUICE_FAIL_ERROR)
        return false;
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
        return false;
    }
    return false;
}

/* The rules of the fallback: each limit and burst divided by the
 * instances that share them, rounded up. */
static void fallback_rules(const sluice *sl, const sluice_ruleset *rs,
                           sluice_ruleset *out)
{
    int64_t n = sl->url.opts.fallback_instances > 1
                    ? (int64_t)sl->url.opts.fallback_instances
                    : 1;
    size_t i;

    *out = *rs;
    for (i = 0; i < out->count; i++) {
        sluice_rule *r = &out->rules[i];

        r->limit = (r->limit + n - 1) / n;
        if (r->burst > 0)
            r->burst = (r->burst + n - 1) / n;
    }
}

/* fail=fallback: the request decided on the in-process store; false when
 * that store cannot decide it either. */
static bool fallback_result(const sluice *sl, const sl_request *rq,
                            sluice_status st, sluice_result *out)
{
    sluice_ruleset rs;
    sl_request r = *rq;
    char err[SL_ERR_LEN];

    fallback_rules(sl, rq->rules, &rs);
    r.rules = &rs;
    if (r.now_ms < 0) /* the server's clock: ours instead */
        r.now_ms = sl->url.opts.clock(sl->url.opts.clock_ctx);
    memset(out, 0, sizeof(*out));
    if (sl_backend_memory.decide(sl->fallback, &r, 1, out, err, sizeof(err)) !=
            SLUICE_OK ||
        out->status != SLUICE_OK)
        return false;
    out->status = st;
    return true;
}

static void policy_result(const sluice *sl, const sl_request *rq,
                          sluice_status st, sluice_result *out)
{
    const sluice_ruleset *rs = rq->rules;
    bool open = sl->url.opts.fail == SLUICE_FAIL_OPEN;

    if (sl->url.opts.fail == SLUICE_FAIL_FALLBACK &&
        fallback_result(sl, rq, st, out))
        return;
    out->status = st;
    out->allowed = open;
    if (rq->op == SL_OP_AT_MOST)
        *rq->granted = open ? rq->cost : 0;
    out->limit = sl_rule_capacity(&rs->rules[0]);
    out->remaining = 0;
    /* A closed denial suggests retrying after a reconnect could succeed. */
    out->retry_after_ms = open ? -1 : (int64_t)sl->url.opts.connect_timeout_ms;
    out->reset_after_ms = 0;
    out->rule = 0;
    out->rule_reset_code = 0;
}

/* Checks one request and fills r; messages go to the handle. */
static sluice_status prepare(sluice *sl, sl_op op, const void *key,
                             size_t key_len, const sluice_ruleset *rules,
                             int64_t cost, int64_t now, sl_request *r,
                             char *err)
{
    sluice_status st;

    memset(r, 0, sizeof(*r)); /* no prefix, value or read unless set */
    if ((st = sl_key_check(key, key_len, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if ((st = sluice_ruleset_check(rules, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if (op != SL_OP_RESET && (op != SL_OP_REFUND || cost != 0) &&
        (st = sl_cost_check(cost, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    /* The server's clock is read by the script; ours is checked here. */
    if (!sl->url.opts.server_clock &&
        (st = sl_time_check(now, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    r->op = op;
    r->key = key;
    r->key_len = key_len;
    r->rules = rules;
    r->cost = cost;
    r->now_ms = now;
    return SLUICE_OK;
}

static int64_t handle_now(const sluice *sl)
{
    if (sl->url.opts.server_clock)
        return -1;
    return sl->url.opts.clock(sl->url.opts.clock_ctx);
}

/* The deny cache's clock: the request's own time, or, when the server
 * decides on its clock, the handle's. */
static int64_t deny_now(const sluice *sl, const sl_request *r)
{
    return r->now_ms >= 0 ? r->now_ms
                          : sl->url.opts.clock(sl->url.opts.clock_ctx);
}

/* Before a request goes out: a reset forgets the key's denials; an
 * acquire or a peek denied and still in force is answered here (true). */
static bool deny_answers(sluice *sl, const sl_request *r, sluice_result *out)
{
    if (!sl_deny_on(&sl->deny))
        return false;
    if (r->op == SL_OP_RESET || r->op == SL_OP_REFUND) {
        sl_deny_forget(&sl->deny, r->key, r->key_len);
        return false;
    }
    /* The cache holds denials of acquires and peeks, of one cost. */
    if (r->op != SL_OP_ACQUIRE && r->op != SL_OP_PEEK)
        return false;
    return sl_deny_lookup(&sl->deny, r, deny_now(sl, r), out);
}

/* After the backend decided: a denial is kept. */
static void deny_keep(sluice *sl, const sl_request *r, const sluice_result *res)
{
    if (sl_deny_on(&sl->deny) &&
        (r->op == SL_OP_ACQUIRE || r->op == SL_OP_PEEK))
        sl_deny_store(&sl->deny, r, deny_now(sl, r), res);
}

/* What a single call returns for the backend's answer (st for the call,
 * res for the request): the fail policy applied; *out set unless the call
 * fails. */
static sluice_status answer_one(const sluice *sl, const sl_request *rq,
                                sluice_status st, const sluice_result *res,
                                sluice_result *out)
{
    if (st == SLUICE_OK)
        st = res->status;
    if (st != SLUICE_OK) {
        if (rq->op == SL_OP_RESET || rq->op == SL_OP_REFUND ||
            rq->op == SL_OP_LEASE_RELEASE || !policy_answers(sl, st))
            return st;
        policy_result(sl, rq, st, out);
        return SLUICE_OK;
    }
    if (out != NULL)
        *out = *res;
    return SLUICE_OK;
}

/* Counts the backend's round trips since the last count; by the thread
 * that drives the engine (the batch's leader, or the loop's). */
static void count_round_trips(sluice *sl, uint64_t requests)
{
    uint64_t rt = sl_handle_round_trips(sl);

    sl_stats_backend(&sl->stats, requests, rt - sl->last_rt);
    sl->last_rt = rt;
}

/* Shadow mode: an acquire the rules denied (or the deny cache) is
 * admitted, its status saying so; it was not charged. */
static void shadow(const sluice *sl, sl_op op, sluice_result *r)
{
    if (sl->url.opts.shadow && op == SL_OP_ACQUIRE && !r->allowed &&
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
    if (sl->url.opts.shadow && r->status == SLUICE_OK &&
        *rq->granted < rq->cost) {
        *rq->granted = rq->cost;
        r->allowed = true;
        r->status = SLUICE_SHADOWED;
    }
}

/* Counts one request of a batch by its result. */
static void count_result(sluice *sl, sl_op op, const sluice_result *r)
{
    if (r->status == SLUICE_OK || r->status == SLUICE_CACHED ||
        r->status == SLUICE_SHADOWED)
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, r);
    else
        sl_stats_answer(&sl->stats, op, r->status,
                        policy_answers(sl, r->status), r);
}

/* Counts a single call's request: the call's status cst and, when it
 * succeeded, its result (NULL for a reset). */
static void count_call(sluice *sl, sl_op op, sluice_status cst,
                       const sluice_result *r)
{
    if (cst != SLUICE_OK)
        sl_stats_answer(&sl->stats, op, cst, false, NULL);
    else if (r != NULL)
        count_result(sl, op, r);
    else
        sl_stats_answer(&sl->stats, op, SLUICE_OK, false, NULL);
}

/* An attached handle is its loop's; a blocking call would stall it. */
static bool refuse_blocking(const sluice *sl, char *err)
{
    if (!sl->eng.attached)
        return false;
    sl_errf(err, SL_ERR_LEN,
            "the handle is attached to an event loop: use the _async calls "
            "(or open another handle for blocking calls)");
    return true;
}

/* A prepared request, blocking: the deny cache (plain keys only), the
 * backend, the fail policy and shadow mode. */
static sluice_status run_one(sluice *sl, sl_request *r, sluice_result *out,
                             char *err)
{
    sluice_result res;
    sluice_status st;

    if (r->prefix == NULL && deny_answers(sl, r, out)) {
        st = SLUICE_OK;
    } else {
        memset(&res, 0, sizeof(res));
        st = dispatch(sl, r, 1, &res, err);
        if (st == SLUICE_OK && r->prefix == NULL)
            deny_keep(sl, r, &res);
        st = answer_one(sl, r, st, &res, out);
    }
    if (st == SLUICE_OK && r->op == SL_OP_AT_MOST)
        shadow_at_most(sl, r, out);
    else if (st == SLUICE_OK && out != NULL)
        shadow(sl, r->op, out);
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
    err = err_of(sl);
    if ((out == NULL && op != SL_OP_RESET) ||
        (op == SL_OP_AT_MOST && granted == NULL)) {
        sl_errf(err, SL_ERR_LEN, "%s is NULL", out == NULL ? "out" : "granted");
        return SLUICE_EINVAL;
    }
    if (refuse_blocking(sl, err))
        return SLUICE_EINVAL;
    t0 = sl_stats_start(&sl->stats);
    st = prepare(sl, op, key, key_len, rules, cost, handle_now(sl), &r, err);
    r.granted = granted;
    if (granted != NULL)
        *granted = 0;
    if (st == SLUICE_OK)
        st = run_one(sl, &r, out, err);
    count_call(sl, op, st, op == SL_OP_RESET ? NULL : out);
    sl_stats_call(&sl->stats, t0);
    return st;
}

/* ------------------------------------------------------------- leases */

/* A lease id unique among processes and handles: a random start (pid,
 * time, address), the pid and a counter, mixed. */
static void lease_id(char *dst)
{
    static _Atomic uint64_t next;
    static _Atomic uint64_t seed;
    uint64_t s = atomic_load(&seed), x;

    if (s == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)&next;
        s |= 1;
        atomic_compare_exchange_strong(&seed, &(uint64_t){0}, s);
        s = atomic_load(&seed);
    }
    /* The pid again: a child made by fork() inherits seed and counter. */
    x = (s ^ ((uint64_t)getpid() << 40)) +
        0x9e3779b97f4a7c15ULL * (atomic_fetch_add(&next, 1) + 1);
    x ^= x >> 31; /* splitmix64's finish: ids look unrelated */
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    snprintf(dst, 24, "%016llx", (unsigned long long)x);
}

/* Checks a lease op and prepares r on *rs, whose one rule names the most
 * holders (the limit a fail policy's answer gives), with the lease's id;
 * an acquire passes its lease as named too, which names it here. A bad
 * request is counted. */
static sluice_status lease_check(sluice *sl, sl_op op, const void *key,
                                 size_t key_len, int64_t max, int64_t lease_ms,
                                 const sluice_lease *lease, sluice_lease *named,
                                 sluice_ruleset *rs, sl_request *r, char *err)
{
    sluice_status st;

    if (lease == NULL) {
        sl_errf(err, SL_ERR_LEN, "lease is NULL");
        return SLUICE_EINVAL;
    }
    if (op == SL_OP_LEASE_RELEASE &&
        strnlen(lease->id, sizeof(lease->id)) != 16) {
        sl_errf(err, SL_ERR_LEN,
                "lease: not one that sluice_lease_acquire made");
        return SLUICE_EINVAL;
    }
    if (max < 1 || max > SL_MAX_LIMIT) {
        sl_errf(err, SL_ERR_LEN, "max_holders %lld: expected 1..1000000000",
                (long long)max);
        return SLUICE_EINVAL;
    }
    if (lease_ms < 1 || lease_ms > SL_MAX_PERIOD_MS) {
        sl_errf(err, SL_ERR_LEN, "lease_ms %lld: expected 1..10000000000",
                (long long)lease_ms);
        return SLUICE_EINVAL;
    }
    *rs = (sluice_ruleset){1, {{SLUICE_FIXED, max, 1000, 0, 0}}};
    st = prepare(sl, op, key, key_len, rs, max, handle_now(sl), r, err);
    if (st != SLUICE_OK) {
        count_call(sl, op, st, NULL);
        return st;
    }
    if (named != NULL)
        lease_id(named->id);
    r->ttl_ms = lease_ms;
    r->value = lease->id;
    r->value_len = strlen(lease->id);
    return SLUICE_OK;
}

/* A checked lease op, blocking. */
static sluice_status lease_run(sluice *sl, sl_request *r, sluice_result *out,
                               char *err)
{
    sluice_status st;
    int64_t t0 = sl_stats_start(&sl->stats);

    st = run_one(sl, r, out, err);
    count_call(sl, r->op, st, r->op == SL_OP_LEASE_RELEASE ? NULL : out);
    sl_stats_call(&sl->stats, t0);
    return st;
}

sluice_status sluice_lease_acquire(sluice *sl, const void *key, size_t key_len,
                                   int64_t max_holders, int64_t lease_ms,
                                   sluice_lease *lease, sluice_result *out)
{
    sluice_ruleset rs;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if (out == NULL) {
        sl_errf(err, SL_ERR_LEN, "out is NULL");
        return SLUICE_EINVAL;
    }
    if (refuse_blocking(sl, err))
        return SLUICE_EINVAL;
    if ((st = lease_check(sl, SL_OP_LEASE_ACQUIRE, key, key_len, max_holders,
                          lease_ms, lease, lease, &rs, &r, err)) != SLUICE_OK)
        return st;
    return lease_run(sl, &r, out, err);
}

sluice_status sluice_lease_release(sluice *sl, const void *key, size_t key_len,
                                   const sluice_lease *lease)
{
    sluice_ruleset rs;
    sluice_result out;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if (refuse_blocking(sl, err))
        return SLUICE_EINVAL;
    if ((st = lease_check(sl, SL_OP_LEASE_RELEASE, key, key_len, 1, 1, lease,
                          NULL, &rs, &r, err)) != SLUICE_OK)
        return st;
    return lease_run(sl, &r, &out, err);
}

/* ------------------------------------------------- for limiter.c */

sl_limiters *sl_handle_limiters(sluice *sl)
{
    return &sl->lim;
}

int64_t sl_handle_now(const sluice *sl)
{
    return handle_now(sl);
}

char *sl_handle_err(const sluice *sl)
{
    return err_of(sl);
}

sluice_status sl_handle_check(sluice *sl, sl_op op, const void *key,
                              size_t key_len, const sluice_ruleset *rules,
                              int64_t cost, sl_request *r, char *err)
{
    if (refuse_blocking(sl, err))
        return SLUICE_EINVAL;
    return prepare(sl, op, key, key_len, rules, cost, handle_now(sl), r, err);
}

sluice_status sl_handle_prepare(sluice *sl, sl_op op, const void *key,
                                size_t key_len, const sluice_ruleset *rules,
                                int64_t cost, sl_request *r, char *err)
{
    return prepare(sl, op, key, key_len, rules, cost, handle_now(sl), r, err);
}

sluice_status sl_handle_one(sluice *sl, sl_request *r, sluice_result *out,
                            char *err)
{
    sluice_result res;
    sluice_status st;
    int64_t t0;

    if (r->op == SL_OP_RULES_GET || r->op == SL_OP_RULES_PUT ||
        r->op == SL_OP_RULES_DEL) {
        memset(&res, 0, sizeof(res));
        st = dispatch(sl, r, 1, &res, err);
        return st == SLUICE_OK ? res.status : st;
    }
    t0 = sl_stats_start(&sl->stats);
    st = run_one(sl, r, out, err);
    count_call(sl, r->op, st, r->op == SL_OP_RESET ? NULL : out);
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

/* The longest wait an acquire may ask for: a day. */
#define MAX_WAIT_MS 86400000

static bool bad_wait(int64_t wait_ms, char *err)
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

sluice_status sluice_acquire_wait(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t cost,
                                  int64_t wait_ms, sluice_result *out)
{
    int64_t until;
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    if (bad_wait(wait_ms, err_of(sl)))
        return SLUICE_EINVAL;
    until = sl_mono_ms() + wait_ms;
    for (;;) {
        int64_t now;

        st =
            decide_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, NULL, out);
        /* Admitted, failed, or a denial that never fits, or fits only
         * after the deadline: that is the answer. */
        if (st != SLUICE_OK || out->allowed ||
            (out->status != SLUICE_OK && out->status != SLUICE_CACHED) ||
            out->retry_after_ms < 0)
            return st;
        now = sl_mono_ms();
        if (now + out->retry_after_ms > until)
            return st;
        sleep_ms(out->retry_after_ms > 0 ? out->retry_after_ms : 1);
    }
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

/* What a batch returns for the backend's answer (st for the call, res
 * for the m requests that were sent, which are out[map[i]]): the fail
 * policy applied, and the first failure, first being that of the requests
 * refused before (with its message). */
static sluice_status answer_many(const sluice *sl, const sl_request *rs,
                                 const sluice_result *res, size_t m,
                                 const size_t *map, sluice_status st,
                                 sluice_result *out, sluice_status first,
                                 const char *first_msg, char *err)
{
    size_t i;

    for (i = 0; i < m; i++) {
        size_t j = map[i];

        if (st == SLUICE_OK && policy_answers(sl, res[i].status))
            policy_result(sl, &rs[i], res[i].status, &out[j]);
        else if (st == SLUICE_OK)
            out[j] = res[i];
        else if (policy_answers(sl, st))
            policy_result(sl, &rs[i], st, &out[j]);
        else
            out[j].status = st;
    }
    if (st != SLUICE_OK && policy_answers(sl, st))
        st = SLUICE_OK;
    for (i = 0; i < m && first == SLUICE_OK && st == SLUICE_OK; i++)
        if (out[map[i]].status != SLUICE_OK &&
            !policy_answers(sl, out[map[i]].status))
            first = out[map[i]].status;
    if (st == SLUICE_OK && first != SLUICE_OK) {
        st = first;
        if (first_msg[0] != '\0')
            memcpy(err, first_msg, SL_ERR_LEN);
    }
    return st;
}

sluice_status sluice_acquire_many(sluice *sl, const sluice_request *reqs,
                                  size_t n, sluice_result *out)
{
    sl_request stack_reqs[64], *rs = stack_reqs;
    sluice_result stack_res[64], *res = stack_res;
    size_t *map = NULL, i, m = 0;
    sluice_status st = SLUICE_OK, first = SLUICE_OK;
    char first_msg[SL_ERR_LEN] = "", *err;
    int64_t now, t0;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if (n == 0)
        return SLUICE_OK;
    if (reqs == NULL || out == NULL) {
        sl_errf(err, SL_ERR_LEN, "acquire_many: %s is NULL",
                reqs == NULL ? "reqs" : "out");
        return SLUICE_EINVAL;
    }
    if (refuse_blocking(sl, err))
        return SLUICE_EINVAL;
    t0 = sl_stats_start(&sl->stats);
    /* calloc's overflow check: n comes from the caller. */
    if (n > 64) {
        rs = sl_calloc(n, sizeof(*rs));
        res = sl_calloc(n, sizeof(*res));
    }
    map = sl_calloc(n, sizeof(*map));
    if (rs == NULL || res == NULL || map == NULL) {
        st = SLUICE_ENOMEM;
        sl_errf(err, SL_ERR_LEN,
                "acquire_many: out of memory for %zu "
                "requests",
                n);
        goto done;
    }
    now = handle_now(sl);
    for (i = 0; i < n; i++) {
        sluice_status rst =
            prepare(sl, SL_OP_ACQUIRE, reqs[i].key, reqs[i].key_len,
                    reqs[i].rules, reqs[i].cost, now, &rs[m], err);

        memset(&out[i], 0, sizeof(out[i]));
        out[i].status = rst;
        if (rst == SLUICE_OK && deny_answers(sl, &rs[m], &out[i])) {
            continue;
        } else if (rst == SLUICE_OK) {
            map[m++] = i;
        } else if (first == SLUICE_OK) {
            first = rst;
            memcpy(first_msg, err, SL_ERR_LEN);
        }
    }
    if (m > 0) {
        memset(res, 0, m * sizeof(*res));
        st = dispatch(sl, rs, m, res, err);
    }
    for (i = 0; i < m && st == SLUICE_OK; i++)
        deny_keep(sl, &rs[i], &res[i]);
    st = answer_many(sl, rs, res, m, map, st, out, first, first_msg, err);
    for (i = 0; i < n; i++) {
        shadow(sl, SL_OP_ACQUIRE, &out[i]);
        count_result(sl, SL_OP_ACQUIRE, &out[i]);
    }
    sl_stats_call(&sl->stats, t0);
done:
    if (rs != stack_reqs)
        sl_free(rs);
    if (res != stack_res)
        sl_free(res);
    sl_free(map);
    return st;
}

/* ------------------------------------------------- on the caller's loop */

/* A decision started on the loop: the engine's job first, then copies of
 * everything the caller passed, which it may free once the call returns. */
typedef struct async_call {
    sl_job job;
    sluice *sl;
    sluice_done_fn done;
    sluice_granted_fn granted_done; /* an acquire at most's, else NULL */
    sl_then_fn then;                /* limiter.c's: runs instead of done */
    void *arg;
    int64_t granted;
    char value[24]; /* a lease's id */
    sl_op op;
    bool many;
    bool cached;           /* a single call the deny cache answered */
    int64_t t0;            /* its start, for the latency */
    int64_t wait_until;    /* a waiting acquire: monotonic ms, else 0 */
    size_t n;              /* the caller's requests; job.n of them were sent */
    sl_request *reqs;      /* job.n, pointing into keys and rules */
    sluice_result *res;    /* job.n: the backend's answers */
    sluice_result *out;    /* n: what the callback gets */
    size_t *map;           /* job.n: their places in out */
    sluice_ruleset *rules; /* job.n copies */
    unsigned char *marks;  /* job.n */
    char *keys;            /* the keys, end to end */
    sluice_status first;   /* the first request refused, for a batch */
    char first_msg[SL_ERR_LEN];
} async_call;

static void async_done(sl_job *job);

/* A waiting acquire wakes: the same request, at the time now. */
static void async_woken(sl_job *job)
{
    async_call *a = (async_call *)job;

    a->reqs[0].now_ms = handle_now(a->sl);
    a->cached = false;
    a->job.n = 1;
    sl_engine_restart(&a->sl->eng, &a->job);
}

/* A waiting acquire was denied: it sleeps until the request fits, if that
 * comes before its deadline (true). */
static bool async_sleeps(async_call *a)
{
    const sluice_result *r = a->cached ? &a->out[0] : &a->res[0];
    int64_t now = sl_mono_ms();

    if (a->wait_until == 0 || a->sl->eng.closing || a->job.err[0] != '\0' ||
        a->sl->url.opts.shadow ||
        (r->status != SLUICE_OK && r->status != SLUICE_CACHED) || r->allowed ||
        r->retry_after_ms < 0 || now + r->retry_after_ms > a->wait_until)
        return false;
    sl_engine_sleep(&a->sl->eng, &a->job,
                    now + (r->retry_after_ms > 0 ? r->retry_after_ms : 1),
                    async_woken);
    return true;
}

/* The job ended: the fail policy, then the caller's callback. */
static void async_done(sl_job *job)
{
    async_call *a = (async_call *)job;
    sluice *sl = a->sl;
    char *err = err_of(sl);
    sluice_status st;
    size_t i;

    if (job->err[0] != '\0')
        memcpy(err, job->err, SL_ERR_LEN);
    sl_stats_backend(&sl->stats, job->n, 0);
    if (a->then != NULL) { /* a rules op for limiter.c */
        a->then(sl, a->arg, a->res[0].status);
        sl_free(a);
        return;
    }
    for (i = 0; i < job->n; i++)
        if (job->out[i].status == SLUICE_OK && a->reqs[i].prefix == NULL)
            deny_keep(sl, &a->reqs[i], &job->out[i]);
    if (async_sleeps(a))
        return;
    if (a->cached) {
        st = SLUICE_OK; /* out[0] holds the cache's answer */
        shadow(sl, a->op, a->out);
        count_call(sl, a->op, st, a->out);
    } else if (a->many) {
        st = answer_many(sl, a->reqs, a->res, job->n, a->map, SLUICE_OK, a->out,
                         a->first, a->first_msg, err);
        for (i = 0; i < a->n; i++) {
            shadow(sl, SL_OP_ACQUIRE, &a->out[i]);
            count_result(sl, SL_OP_ACQUIRE, &a->out[i]);
        }
    } else {
        bool no_result = a->op == SL_OP_RESET || a->op == SL_OP_LEASE_RELEASE;

        memset(a->out, 0, sizeof(*a->out));
        st = answer_one(sl, &a->reqs[0], SLUICE_OK, &a->res[0], a->out);
        if (st == SLUICE_OK && a->op == SL_OP_AT_MOST)
            shadow_at_most(sl, &a->reqs[0], a->out);
        else if (st == SLUICE_OK)
            shadow(sl, a->op, a->out);
        count_call(sl, a->op, st, no_result ? NULL : a->out);
        if (st != SLUICE_OK || no_result)
            a->out->status = st;
    }
    sl_stats_call(&sl->stats, a->t0);
    if (a->granted_done != NULL)
        a->granted_done(sl, a->arg, st, a->out,
                        st == SLUICE_OK ? a->granted : 0);
    else
        a->done(sl, a->arg, st, a->out, a->n);
    sl_free(a);
}

/* The offset of count items of size and alignment align placed at *at,
 * which moves past them. */
static size_t place(size_t *at, size_t count, size_t size, size_t align)
{
    size_t off = (*at + align - 1) / align * align;

    *at = off + count * size;
    return off;
}

/* A call with room for n requests whose keys take key_bytes: one
 * allocation, the call and then its arrays. */
static async_call *new_call(sluice *sl, size_t n, size_t key_bytes,
                            sluice_done_fn done, void *arg)
{
    size_t at = sizeof(async_call), o_reqs, o_res, o_out, o_map, o_rules,
           o_marks, o_keys;
    async_call *a;
    char *base;

    /* Far below any overflow: the whole is at most about 1 KiB a request
     * (its rules' copy), and the keys, each within the key cap. */
    if (n > SIZE_MAX / 4096 || key_bytes > SIZE_MAX / 2)
        return NULL;
    o_reqs = place(&at, n, sizeof(sl_request), _Alignof(sl_request));
    o_res = place(&at, n, sizeof(sluice_result), _Alignof(sluice_result));
    o_out = place(&at, n, sizeof(sluice_result), _Alignof(sluice_result));
    o_map = place(&at, n, sizeof(size_t), _Alignof(size_t));
    o_rules = place(&at, n, sizeof(sluice_ruleset), _Alignof(sluice_ruleset));
    o_marks = place(&at, n, 1, 1);
    o_keys = place(&at, key_bytes, 1, 1);
    if ((base = sl_calloc(1, at)) == NULL)
        return NULL;
    a = (async_call *)base;
    a->sl = sl;
    a->done = done;
    a->arg = arg;
    a->n = n;
    a->t0 = sl_stats_start(&sl->stats);
    a->reqs = (sl_request *)(base + o_reqs);
    a->res = (sluice_result *)(base + o_res);
    a->out = (sluice_result *)(base + o_out);
    a->map = (size_t *)(base + o_map);
    a->rules = (sluice_ruleset *)(base + o_rules);
    a->marks = (unsigned char *)(base + o_marks);
    a->keys = base + o_keys;
    a->job.reqs = a->reqs;
    a->job.out = a->res;
    a->job.marks = a->marks;
    a->job.done = async_done;
    return a;
}

/* Checks what every async call needs; the message in err. */
static sluice_status async_ready(const sluice *sl, bool has_done, char *err)
{
    if (!has_done) {
        sl_errf(err, SL_ERR_LEN, "done is NULL");
        return SLUICE_EINVAL;
    }
    if (sl->eng.closing) { /* a callback that sluice_close() runs */
        sl_errf(err, SL_ERR_LEN, "the handle is closing: nothing starts");
        return SLUICE_EIO;
    }
    if (!sl->eng.attached) {
        sl_errf(err, SL_ERR_LEN,
                "the handle is not attached to an event loop: call "
                "sluice_attach() (or an adapter's attach) first");
        return SLUICE_EINVAL;
    }
    return SLUICE_OK;
}

/* Starts request i of a (checked by prepare into a->reqs[m]). */
static void keep_request(async_call *a, size_t m, size_t at_key,
                         const void *key, size_t key_len,
                         const sluice_ruleset *rules)
{
    memcpy(a->keys + at_key, key, key_len);
    a->rules[m] = *rules;
    a->reqs[m].key = a->keys + at_key;
    a->reqs[m].rules = &a->rules[m];
}

/* How a call started on the loop answers: one of the three. */
typedef struct answer_to {
    sluice_done_fn done;
    sluice_granted_fn granted;
    sl_then_fn then;
    void *arg;
} answer_to;

/* Starts the prepared request r on the loop: its key, rules and value
 * copied; the deny cache asked for plain keys. */
static sluice_status start_prepared(sluice *sl, const sl_request *r,
                                    int64_t wait_ms, const answer_to *to,
                                    char *err)
{
    async_call *a;

    if ((a = new_call(sl, 1, r->key_len, to->done, to->arg)) == NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    a->granted_done = to->granted;
    a->then = to->then;
    a->reqs[0] = *r;
    keep_request(a, 0, 0, r->key, r->key_len, r->rules);
    if (r->op == SL_OP_AT_MOST)
        a->reqs[0].granted = &a->granted;
    if (r->value != NULL && r->value_len < sizeof(a->value)) {
        memcpy(a->value, r->value, r->value_len);
        a->reqs[0].value = a->value;
    }
    a->op = r->op;
    a->wait_until = wait_ms > 0 ? sl_mono_ms() + wait_ms : 0;
    /* Answered by the deny cache: nothing to send, and the callback still
     * runs from the loop. */
    a->cached = r->prefix == NULL && deny_answers(sl, &a->reqs[0], &a->out[0]);
    a->job.n = a->cached ? 0 : 1;
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
}

static sluice_status start_one(sluice *sl, sl_op op, const void *key,
                               size_t key_len, const sluice_ruleset *rules,
                               int64_t cost, int64_t wait_ms,
                               const answer_to *to)
{
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if ((st = async_ready(sl, to->done != NULL || to->granted != NULL, err)) !=
        SLUICE_OK)
        return st;
    if (bad_wait(wait_ms, err))
        return SLUICE_EINVAL;
    st = prepare(sl, op, key, key_len, rules, cost, handle_now(sl), &r, err);
    if (st != SLUICE_OK) {
        count_call(sl, op, st, NULL);
        return st;
    }
    return start_prepared(sl, &r, wait_ms, to, err);
}

sluice_status sluice_acquire_async(sluice *sl, const void *key, size_t key_len,
                                   const sluice_ruleset *rules, int64_t cost,
                                   sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, 0, &to);
}

sluice_status sluice_acquire_wait_async(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        int64_t cost, int64_t wait_ms,
                                        sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, wait_ms,
                     &to);
}

sluice_status sluice_peek_async(sluice *sl, const void *key, size_t key_len,
                                const sluice_ruleset *rules, int64_t cost,
                                sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_PEEK, key, key_len, rules, cost, 0, &to);
}

sluice_status sluice_reset_async(sluice *sl, const void *key, size_t key_len,
                                 const sluice_ruleset *rules,
                                 sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_RESET, key, key_len, rules, 1, 0, &to);
}

sluice_status sluice_acquire_at_most_async(sluice *sl, const void *key,
                                           size_t key_len,
                                           const sluice_ruleset *rules,
                                           int64_t max_cost,
                                           sluice_granted_fn done, void *arg)
{
    answer_to to = {NULL, done, NULL, arg};

    return start_one(sl, SL_OP_AT_MOST, key, key_len, rules, max_cost, 0, &to);
}

sluice_status sluice_refund_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t amount,
                                  sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};

    return start_one(sl, SL_OP_REFUND, key, key_len, rules, amount, 0, &to);
}

sluice_status sluice_lease_acquire_async(sluice *sl, const void *key,
                                         size_t key_len, int64_t max_holders,
                                         int64_t lease_ms, sluice_lease *lease,
                                         sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};
    sluice_ruleset rs;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if ((st = async_ready(sl, done != NULL, err)) != SLUICE_OK ||
        (st = lease_check(sl, SL_OP_LEASE_ACQUIRE, key, key_len, max_holders,
                          lease_ms, lease, lease, &rs, &r, err)) != SLUICE_OK)
        return st;
    return start_prepared(sl, &r, 0, &to, err);
}

sluice_status sluice_lease_release_async(sluice *sl, const void *key,
                                         size_t key_len,
                                         const sluice_lease *lease,
                                         sluice_done_fn done, void *arg)
{
    answer_to to = {done, NULL, NULL, arg};
    sluice_ruleset rs;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if ((st = async_ready(sl, done != NULL, err)) != SLUICE_OK ||
        (st = lease_check(sl, SL_OP_LEASE_RELEASE, key, key_len, 1, 1, lease,
                          NULL, &rs, &r, err)) != SLUICE_OK)
        return st;
    return start_prepared(sl, &r, 0, &to, err);
}

/* For limiter.c: r (prepared by sl_handle_prepare) on the loop. */
sluice_status sl_handle_start(sluice *sl, const sl_request *r,
                              int64_t began, sluice_done_fn done,
                              sl_then_fn then, void *arg, char *err)
{
    answer_to to = {done, NULL, then, arg};
    sluice_status st;

    if ((st = async_ready(sl, done != NULL || then != NULL, err)) != SLUICE_OK)
        return st;
    sl->eng.call_started = began;
    st = start_prepared(sl, r, 0, &to, err);
    sl->eng.call_started = 0;
    return st;
}

sluice_status sluice_acquire_many_async(sluice *sl, const sluice_request *reqs,
                                        size_t n, sluice_done_fn done,
                                        void *arg)
{
    async_call *a;
    size_t i, m = 0, bytes = 0, at = 0;
    sluice_status st;
    char *err;
    int64_t now;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if ((st = async_ready(sl, done != NULL, err)) != SLUICE_OK)
        return st;
    if (n == 0 || reqs == NULL) {
        sl_errf(err, SL_ERR_LEN, "acquire_many_async: %s",
                reqs == NULL ? "reqs is NULL" : "no requests");
        return SLUICE_EINVAL;
    }
    for (i = 0; i < n; i++)
        if (reqs[i].key_len <= SLUICE_MAX_KEY_LEN)
            bytes += reqs[i].key_len;
    if ((a = new_call(sl, n, bytes, done, arg)) == NULL) {
        sl_errf(err, SL_ERR_LEN,
                "acquire_many_async: out of memory for %zu "
                "requests",
                n);
        return SLUICE_ENOMEM;
    }
    a->many = true;
    a->op = SL_OP_ACQUIRE;
    now = handle_now(sl);
    for (i = 0; i < n; i++) {
        sluice_status rst =
            prepare(sl, SL_OP_ACQUIRE, reqs[i].key, reqs[i].key_len,
                    reqs[i].rules, reqs[i].cost, now, &a->reqs[m], err);

        a->out[i].status = rst;
        if (rst == SLUICE_OK && deny_answers(sl, &a->reqs[m], &a->out[i])) {
            continue;
        } else if (rst == SLUICE_OK) {
            keep_request(a, m, at, reqs[i].key, reqs[i].key_len, reqs[i].rules);
            at += reqs[i].key_len;
            a->map[m++] = i;
        } else if (a->first == SLUICE_OK) {
            a->first = rst;
            memcpy(a->first_msg, err, SL_ERR_LEN);
        }
    }
    a->job.n = m; /* none: the callback still runs, from the loop */
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
}

sluice_status sluice_attach(sluice *sl, const sluice_loop *loop)
{
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if (loop == NULL || loop->watch == NULL || loop->timer == NULL) {
        sl_errf(err, SL_ERR_LEN, "attach: the loop needs watch and timer");
        return SLUICE_EINVAL;
    }
    if (sl->backend->start == NULL) {
        sl_errf(err, SL_ERR_LEN, "attach: %s has no event-loop mode",
                sl->backend->name);
        return SLUICE_EUNSUPPORTED;
    }
    if (sl->eng.attached) {
        sl_errf(err, SL_ERR_LEN, "attach: the handle is attached already");
        return SLUICE_EINVAL;
    }
    sl->eng.loop = *loop;
    sl->eng.attached = true;
    sl->eng.timer_at = -1;
    sl_engine_report(&sl->eng);
    return SLUICE_OK;
}

void sluice_socket_action(sluice *sl, int fd, int events)
{
    if (sl == NULL || !sl->eng.attached)
        return;
    sl_engine_action(&sl->eng, fd, events);
    count_round_trips(sl, 0);
}

sluice_status sluice_get_stats(sluice *sl, sluice_stats *out, size_t size)
{
    sluice_stats st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = err_of(sl);
    if (out == NULL || size == 0) {
        sl_errf(err, SL_ERR_LEN, "get_stats: %s",
                out == NULL ? "out is NULL" : "size is 0");
        return SLUICE_EINVAL;
    }
    if (!sl->stats.on) {
        sl_errf(err, SL_ERR_LEN,
                "get_stats: the handle keeps no counters (metrics=0)");
        return SLUICE_EINVAL;
    }
    sl_stats_read(&sl->stats, &st);
    memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
    return SLUICE_OK;
}

size_t sluice_pending(const sluice *sl)
{
    return sl == NULL ? 0 : sl_engine_pending(&sl->eng);
}
