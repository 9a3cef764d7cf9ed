/* SPDX-License-Identifier: BSD-3-Clause */
/* share.c - threads sharing a handle: each thread's own message of its
 * last call, and the queue that combines their blocking calls.
 *
 * Requests that arrive while another thread's round trip is in flight
 * wait in a queue; when the round trip ends, the queue goes to the
 * backend as one batch (one pipelined write and its replies), driven by
 * one of the waiting threads, while every other caller sleeps on its own
 * condition until its answer is in: no thread waits for the connection,
 * and no request waits for more than the round trip ahead of it and its
 * own. The order of arrival is the order in the batch, so requests on one
 * key keep their order. */
#include "share.h"

#include "algo.h"
#include "handle.h"
#include "net/conn.h"

#include <stdio.h>
#include <string.h>

/* sluice_errmsg, sluice_violated and sluice_last_decision: each thread
 * keeps the message of its last call on each of the last few handles it
 * used, and what decided each of that call's answers (the rules, the
 * client's override, the rules it exceeded), so that threads sharing a
 * handle never read each other's. */
#define ERR_SLOTS  4
#define ANS_INLINE 64         /* a batch's answers past these are on the heap */
#define NO_SET     UINT32_MAX /* an answer no rule decided */

/* One answer: the rules that decided it, by index in the call's sets. */
typedef struct answer_rec {
    uint32_t set;
    uint8_t violated;
    uint8_t kind; /* sluice_override_kind */
} answer_rec;

struct sl_answers {
    const sluice *sl;
    unsigned long used;
    int64_t began; /* monotonic ms: when this thread's call on sl began */
    char msg[SL_ERR_LEN];
    size_t nv;   /* answers of the call, 0: none */
    int64_t now; /* the decision's time (the handle's clock), or -1 */
    answer_rec a[ANS_INLINE]; /* the answers, when nv <= ANS_INLINE */
    answer_rec *heap;         /* else here, sl_malloc'd */
    size_t heap_cap;
    /* The rulesets that decided them, each once: the first here, the
     * rest on the heap; the last one kept, by where it came from. */
    size_t nsets;
    sluice_ruleset set0;
    sluice_ruleset *sets;
    size_t sets_cap;
    const sluice_ruleset *last_src;
    int64_t last_divided;
    /* The HTTP name and unit of the policy that decided the call ("":
     * the helpers' defaults): sluice_decision.http points at them. */
    sluice_quota_unit unit;
    char http_name[64];
    char unit_name[65];
};
static _Thread_local sl_answers err_slots[ERR_SLOTS];
static _Thread_local unsigned long err_clock;
/* The slot the thread's last call began with: where its end looks first. */
static _Thread_local sl_answers *err_last;

/* The heap arrays go with their thread: a key whose destructor frees
 * them. */
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static pthread_key_t heap_key;
static bool heap_key_made;

static void free_heaps(void *unused)
{
    size_t i;

    (void)unused;
    for (i = 0; i < ERR_SLOTS; i++) {
        sl_free(err_slots[i].heap);
        sl_free(err_slots[i].sets);
        err_slots[i].heap = NULL;
        err_slots[i].sets = NULL;
        err_slots[i].heap_cap = 0;
        err_slots[i].sets_cap = 0;
        err_slots[i].nv = 0;
    }
}

static void make_heap_key(void)
{
    heap_key_made = pthread_key_create(&heap_key, free_heaps) == 0;
}

/* The heap arrays are this thread's: freed when it ends. */
static void own_heaps(void)
{
    (void)pthread_once(&heap_once, make_heap_key);
    if (heap_key_made)
        (void)pthread_setspecific(heap_key, err_slots);
}

/* Room for n answers on e's heap; false on ENOMEM. */
static bool grow_answers(sl_answers *e, size_t n)
{
    answer_rec *h;

    if (n <= e->heap_cap)
        return true;
    if (n > SIZE_MAX / sizeof(*h) ||
        (h = sl_realloc(e->heap, n * sizeof(*h))) == NULL)
        return false;
    own_heaps();
    e->heap = h;
    e->heap_cap = n;
    return true;
}

/* Room for n rulesets past the first; false on ENOMEM. */
static bool grow_sets(sl_answers *e, size_t n)
{
    sluice_ruleset *h;
    size_t cap = n < 8 ? 8 : n * 2;

    if (n <= e->sets_cap)
        return true;
    if (n > SIZE_MAX / 2 / sizeof(*h) ||
        (h = sl_realloc(e->sets, cap * sizeof(*h))) == NULL)
        return false;
    own_heaps();
    e->sets = h;
    e->sets_cap = cap;
    return true;
}

/* This thread's slot for sl: its own, else the least used one, taken. */
static sl_answers *slot_of(const sluice *sl)
{
    sl_answers *e = &err_slots[0];
    size_t i;

    for (i = 0; i < ERR_SLOTS; i++) {
        if (err_slots[i].sl == sl)
            return &err_slots[i];
        if (err_slots[i].used < e->used)
            e = &err_slots[i];
    }
    e->sl = sl;
    e->nv = 0;
    e->msg[0] = '\0';
    return e;
}

/* The slot of sl if this thread has one, else NULL. */
static const sl_answers *find_slot(const sluice *sl)
{
    size_t k;

    for (k = 0; sl != NULL && k < ERR_SLOTS; k++)
        if (err_slots[k].sl == sl)
            return &err_slots[k];
    return NULL;
}

/* This thread's message buffer for sl, emptied; every call begins here,
 * so the slot keeps when, and the call's round trips share one budget (a
 * decision by name reads the rules, then decides). */
char *sl_share_err(const sluice *sl)
{
    sl_answers *e = slot_of(sl);

    err_last = e;
    e->used = ++err_clock;
    e->began = sl_mono_ms();
    e->msg[0] = '\0';
    e->nv = 0;
    return e->msg;
}

/* Only the rules it has: a single rule's copy is 48 bytes, not 328. */
static void copy_rules(sluice_ruleset *dst, const sluice_ruleset *src)
{
    size_t i;

    dst->count = src->count;
    for (i = 0; i < src->count; i++)
        dst->rules[i] = src->rules[i];
}

static bool rules_ok(const sluice_ruleset *rules)
{
    return rules != NULL && rules->count > 0 &&
           rules->count <= SLUICE_MAX_RULES;
}

void sl_share_answer1(const sluice *sl, int64_t now_ms,
                      const sluice_ruleset *rules, int64_t divide_by,
                      sluice_override_kind kind, uint8_t violated)
{
    sl_answers *e = err_last;

    if (e == NULL || e->sl != sl)
        e = slot_of(sl);
    e->nv = 1;
    e->now = now_ms;
    e->a[0].violated = violated;
    e->a[0].kind = (uint8_t)kind;
    e->a[0].set = NO_SET;
    e->nsets = 0;
    if (!rules_ok(rules))
        return;
    copy_rules(&e->set0, rules);
    sl_ruleset_divide(&e->set0, divide_by, &e->set0);
    e->a[0].set = 0;
    e->nsets = 1;
}

sl_answers *sl_share_answers(const sluice *sl, size_t n, int64_t now_ms)
{
    sl_answers *e = err_last;

    if (e == NULL || e->sl != sl)
        e = slot_of(sl);
    e->nv = 0;
    e->nsets = 0;
    e->last_src = NULL;
    e->now = now_ms;
    if (n > ANS_INLINE && !grow_answers(e, n))
        return NULL; /* no answers rather than wrong ones: none read */
    e->nv = n;
    return n > 0 ? e : NULL;
}

void sl_share_answer(sl_answers *e, size_t i, const sluice_ruleset *rules,
                     int64_t divide_by, sluice_override_kind kind,
                     uint8_t violated)
{
    answer_rec *r = &(e->nv > ANS_INLINE ? e->heap : e->a)[i];
    sluice_ruleset *dst;

    r->violated = violated;
    r->kind = (uint8_t)kind;
    r->set = NO_SET;
    if (!rules_ok(rules))
        return;
    /* The same rules as the answer before (a batch on one ruleset): the
     * same set, not another copy. */
    if (e->nsets > 0 && rules == e->last_src && divide_by == e->last_divided) {
        r->set = (uint32_t)(e->nsets - 1);
        return;
    }
    if (e->nsets == 0) {
        dst = &e->set0;
    } else if (e->nsets >= NO_SET || !grow_sets(e, e->nsets)) {
        return; /* no memory: this answer reads as decided by none */
    } else {
        dst = &e->sets[e->nsets - 1];
    }
    copy_rules(dst, rules);
    sl_ruleset_divide(dst, divide_by, dst);
    r->set = (uint32_t)e->nsets++;
    e->last_src = rules;
    e->last_divided = divide_by;
}

unsigned sluice_violated(const sluice *sl, size_t i)
{
    const sl_answers *e = find_slot(sl);

    if (e == NULL || i >= e->nv)
        return 0;
    return (e->nv > ANS_INLINE ? e->heap : e->a)[i].violated;
}

/* The first version's size: what struct_size 0 means, and the least a
 * caller's struct may say it has. */
#define DECISION_V1 sizeof(sluice_decision)

void sluice_decision_init(sluice_decision *d)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof(*d));
    d->struct_size = sizeof(*d);
    sluice_http_options_init(&d->http);
}

void sl_share_http(const sluice *sl, const char *http_name,
                   sluice_quota_unit unit, const char *unit_name)
{
    sl_answers *e = err_last;

    if (e == NULL || e->sl != sl)
        e = slot_of(sl);
    e->unit = unit;
    snprintf(e->http_name, sizeof(e->http_name), "%s", http_name);
    snprintf(e->unit_name, sizeof(e->unit_name), "%s", unit_name);
}

sluice_status sluice_last_decision(sluice *sl, size_t i, sluice_decision *out)
{
    const sl_answers *e = find_slot(sl);
    const answer_rec *r;
    sluice_decision d;
    size_t size;

    if (out == NULL || e == NULL || i >= e->nv)
        return SLUICE_EINVAL;
    size = out->struct_size == 0 ? DECISION_V1 : out->struct_size;
    if (size < DECISION_V1)
        return SLUICE_EINVAL;
    r = &(e->nv > ANS_INLINE ? e->heap : e->a)[i];
    memset(&d, 0, sizeof(d));
    d.struct_size = out->struct_size;
    if (r->set != NO_SET) {
        const sluice_ruleset *rs =
            r->set == 0 ? &e->set0 : &e->sets[r->set - 1];

        copy_rules(&d.rules, rs);
    }
    d.override = (sluice_override_kind)r->kind;
    d.violated = r->violated;
    sluice_http_options_init(&d.http);
    d.http.violated = r->violated;
    d.http.now_ms = e->now > 0 ? e->now : 0;
    d.http.name = e->http_name[0] != '\0' ? e->http_name : NULL;
    d.http.unit = e->unit;
    d.http.unit_name = e->unit_name[0] != '\0' ? e->unit_name : NULL;
    /* A newer caller's fields past this library's stay as it set them
     * (zero, from sluice_decision_init). */
    memcpy(out, &d, size < sizeof(d) ? size : sizeof(d));
    return SLUICE_OK;
}

int64_t sl_share_began(const sluice *sl)
{
    const sl_answers *e = find_slot(sl);

    return e != NULL && e->began > 0 ? e->began : sl_mono_ms();
}

const char *sluice_errmsg(const sluice *sl)
{
    const sl_answers *e;

    if (sl == NULL)
        return "handle is NULL";
    e = find_slot(sl);
    return e != NULL ? e->msg : "";
}

/* A caller waiting for its requests' answers. */
struct sl_waiter {
    const sl_request *reqs;
    size_t n;
    sluice_result *res;
    sluice_status st;
    char *err; /* the caller's message buffer, SL_ERR_LEN bytes */
    bool done;
    int64_t since; /* monotonic ms: when the call queued; its budget
                      runs from then */
    pthread_cond_t cv;
    sl_waiter *next;
};

uint64_t sl_handle_round_trips(const sluice *sl)
{
    return sl->backend->round_trips != NULL
               ? sl->backend->round_trips(sl->state)
               : 0;
}

void sl_share_count_trips(sluice *sl, uint64_t requests)
{
    uint64_t rt = sl_handle_round_trips(sl);

    sl_stats_backend(&sl->stats, requests, rt - sl->last_rt);
    sl->last_rt = rt;
}

/* Decides the requests of a batch of waiters in one backend call: their
 * requests side by side, in the order they arrived. */
static void run_batch(sluice *sl, sl_waiter *batch)
{
    sl_request stack_reqs[64], *reqs = stack_reqs;
    sluice_result stack_res[64], *res = stack_res;
    char err[SL_ERR_LEN]; /* a message only when a step fails */
    size_t total = 0, at = 0;
    sluice_status st;
    sl_waiter *w;

    err[0] = '\0';
    if (batch->next == NULL) {
        sl->eng.call_started = batch->since;
        batch->st = sl_engine_decide(&sl->eng, batch->reqs, batch->n,
                                     batch->res, batch->err, SL_ERR_LEN);
        sl->eng.call_started = 0;
        sl_share_count_trips(sl, batch->n);
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
            w->st = sl_engine_decide(&sl->eng, w->reqs, w->n, w->res, w->err,
                                     SL_ERR_LEN);
        }
        sl->eng.call_started = 0;
        sl_share_count_trips(sl, total);
        return;
    }
    for (w = batch; w != NULL; w = w->next) {
        memcpy(reqs + at, w->reqs, w->n * sizeof(*reqs));
        at += w->n;
    }
    memset(res, 0, total * sizeof(*res));
    sl->eng.call_started = batch->since;
    st = sl_engine_decide(&sl->eng, reqs, total, res, err, SL_ERR_LEN);
    sl->eng.call_started = 0;
    sl_share_count_trips(sl, total);
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
 * backend; else by the thread that is, or the next one. now_only: only
 * when none is in the backend or queued; *sent says whether it went. */
static sluice_status share(sluice *sl, const sl_request *reqs, size_t n,
                           sluice_result *res, char *err, bool now_only,
                           bool *sent)
{
    sl_waiter me;

    pthread_mutex_lock(&sl->mu);
    *sent = !now_only || (!sl->busy && sl->head == NULL);
    if (!*sent) {
        pthread_mutex_unlock(&sl->mu);
        return SLUICE_OK;
    }
    memset(&me, 0, sizeof(me));
    me.reqs = reqs;
    me.n = n;
    me.res = res;
    me.err = err;
    me.since = sl_share_began(sl);
    pthread_cond_init(&me.cv, NULL);
    if (sl->tail != NULL)
        sl->tail->next = &me;
    else
        sl->head = &me;
    sl->tail = &me;
    while (!me.done) {
        if (!sl->busy) {
            sl_waiter *batch = sl->head, *w, *next;

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

sluice_status sl_share_decide(sluice *sl, const sl_request *reqs, size_t n,
                              sluice_result *res, char *err)
{
    bool sent;

    return share(sl, reqs, n, res, err, false, &sent);
}

bool sl_share_decide_now(sluice *sl, const sl_request *reqs, size_t n,
                         sluice_result *res, char *err, sluice_status *st)
{
    bool sent;

    *st = share(sl, reqs, n, res, err, true, &sent);
    return sent;
}

uint64_t sl_handle_batches(sluice *sl)
{
    uint64_t n;

    pthread_mutex_lock(&sl->mu);
    n = sl->batches;
    pthread_mutex_unlock(&sl->mu);
    return n;
}
