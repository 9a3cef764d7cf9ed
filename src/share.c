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

#include "handle.h"
#include "net/conn.h"

#include <string.h>

/* sluice_errmsg and sluice_violated: each thread keeps the message of its
 * last call on each of the last few handles it used, and the rules its
 * answers exceeded, so that threads sharing a handle never read each
 * other's. */
#define ERR_SLOTS   4
#define VIOL_INLINE 64 /* a batch's masks past these are on the heap */
static _Thread_local struct err_slot {
    const sluice *sl;
    unsigned long used;
    int64_t began; /* monotonic ms: when this thread's call on sl began */
    char msg[SL_ERR_LEN];
    size_t nv;              /* answers of the call, 0: none */
    uint8_t v[VIOL_INLINE]; /* their masks, when nv <= VIOL_INLINE */
    uint8_t *heap;          /* else here, sl_malloc'd */
    size_t heap_cap;
} err_slots[ERR_SLOTS];
static _Thread_local unsigned long err_clock;
/* The slot the thread's last call began with: where its end looks first. */
static _Thread_local struct err_slot *err_last;

/* The heap masks go with their thread: a key whose destructor frees them. */
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static pthread_key_t heap_key;
static bool heap_key_made;

static void free_heaps(void *unused)
{
    size_t i;

    (void)unused;
    for (i = 0; i < ERR_SLOTS; i++) {
        sl_free(err_slots[i].heap);
        err_slots[i].heap = NULL;
        err_slots[i].heap_cap = 0;
        err_slots[i].nv = 0;
    }
}

static void make_heap_key(void)
{
    heap_key_made = pthread_key_create(&heap_key, free_heaps) == 0;
}

/* This thread's slot for sl: its own, else the least used one, taken. */
static struct err_slot *slot_of(const sluice *sl)
{
    struct err_slot *e = &err_slots[0];
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

/* This thread's message buffer for sl, emptied; every call begins here,
 * so the slot keeps when, and the call's round trips share one budget (a
 * decision by name reads the rules, then decides). */
char *sl_share_err(const sluice *sl)
{
    struct err_slot *e = slot_of(sl);

    err_last = e;
    e->used = ++err_clock;
    e->began = sl_mono_ms();
    e->msg[0] = '\0';
    e->nv = 0;
    return e->msg;
}

void sl_share_violated(const sluice *sl, const uint8_t *v, size_t n)
{
    struct err_slot *e = err_last;
    uint8_t *dst;

    if (e == NULL || e->sl != sl)
        e = slot_of(sl);
    if (n == 1) { /* a single call's: every decision ends here */
        e->v[0] = v[0];
        e->nv = 1;
        return;
    }
    dst = e->v;
    e->nv = 0;
    if (n > VIOL_INLINE) {
        if (n > e->heap_cap) {
            uint8_t *h = sl_realloc(e->heap, n);

            if (h == NULL) /* no masks rather than wrong ones: all read 0 */
                return;
            if (e->heap == NULL) {
                (void)pthread_once(&heap_once, make_heap_key);
                if (heap_key_made)
                    (void)pthread_setspecific(heap_key, err_slots);
            }
            e->heap = h;
            e->heap_cap = n;
        }
        dst = e->heap;
    }
    memcpy(dst, v, n);
    e->nv = n;
}

unsigned sluice_violated(const sluice *sl, size_t i)
{
    size_t k;

    for (k = 0; sl != NULL && k < ERR_SLOTS; k++) {
        const struct err_slot *e = &err_slots[k];

        if (e->sl == sl)
            return i < e->nv ? (e->nv > VIOL_INLINE ? e->heap : e->v)[i] : 0;
    }
    return 0;
}

int64_t sl_share_began(const sluice *sl)
{
    size_t i;

    for (i = 0; i < ERR_SLOTS; i++)
        if (err_slots[i].sl == sl && err_slots[i].began > 0)
            return err_slots[i].began;
    return sl_mono_ms();
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
