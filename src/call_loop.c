/* SPDX-License-Identifier: BSD-3-Clause */
/* call_loop.c - the calls on the caller's event loop: the pipeline's
 * driver (pipeline.h) that does what a call needs without blocking: its
 * round trips as jobs on the engine, whose done callback runs the
 * pipeline on; its sleeps, and its waits behind a key's batch in flight,
 * on the engine's timers. At the end, the caller's callback. */
#include "call.h"
#include "pipeline.h"

#include <string.h>

/* A call started on the loop: the engine's job first, the pipeline's
 * state, then copies of everything the caller passed, which it may free
 * once the call returns. */
typedef struct async_call {
    sl_job job;
    sl_pipe p;
    sl_call_to to;
    bool submitted;       /* its job went to the engine once */
    int64_t granted;      /* an acquire at most's */
    char lease_id[24];    /* a lease op's id */
    sluice_result after;  /* a settle's: the acquire's answer */
    sl_policy pol;        /* the call's own policy, if it has one */
    char err[SL_ERR_LEN]; /* the call's message */
    char first_msg[SL_ERR_LEN];
    sl_request *reqs;      /* a single call: its request */
    sl_request *send;      /* 3, or n for a batch */
    sluice_result *res;    /* as many */
    sluice_result *out;    /* n: what the callback gets */
    uint8_t *violated;     /* n: the rules each exceeded (a batch's) */
    size_t *map;           /* n */
    sluice_ruleset *rules; /* a copy of each request's rules */
    sluice_request *batch; /* a batch's requests as answered (rules only) */
    unsigned char *marks;  /* the job's, as many as send */
    char *keys;            /* the keys, end to end */
    sl_pipe_name *name;    /* a decision by name's */
    struct async_call *next_parked;
} async_call;

static void drive(async_call *a);

/* The handle's parked calls without a. */
static void unpark(async_call *a)
{
    async_call **p = &a->p.sl->parked;

    while (*p != NULL && *p != a)
        p = &(*p)->next_parked;
    if (*p == a)
        *p = a->next_parked;
}

/* A batch of some key was answered: every parked call asks again. */
static void wake_parked(sluice *sl)
{
    async_call *a = sl->parked;

    sl->parked = NULL;
    for (; a != NULL; a = a->next_parked)
        sl_engine_wake_now(&sl->eng, &a->job);
}

/* A sleeping or parked call wakes: the pipeline goes on from the loop. */
static void woken(sl_job *job)
{
    async_call *a = (async_call *)job;

    if (a->p.state == SL_PIPE_PARKED)
        unpark(a);
    else /* a waiting acquire asks again, on a budget of its own */
        a->p.began = sl_mono_ms();
    drive(a);
}

/* The job ended: its answers into the pipeline, which goes on. At the
 * handle's close, a sleeping or parked call's done runs too: it is
 * answered as it stands. */
static void job_done(sl_job *job)
{
    async_call *a = (async_call *)job;
    sluice *sl = a->p.sl;

    if (a->p.state == SL_PIPE_DONE) { /* answered before it was sent */
        drive(a);
        return;
    }
    if (a->p.state == SL_PIPE_ASLEEP || a->p.state == SL_PIPE_PARKED) {
        if (a->p.state == SL_PIPE_PARKED)
            unpark(a);
        sl_pipe_abandon(&a->p);
        drive(a);
        return;
    }
    if (job->err[0] != '\0')
        memcpy(a->p.send_err, job->err, SL_ERR_LEN);
    sl_stats_backend(&sl->stats, job->n, 0);
    a->p.sent_st = SLUICE_OK;
    drive(a);
}

/* The call is answered: the message where sluice_errmsg() reads it, then
 * the caller's callback. */
static void answer(async_call *a)
{
    sluice *sl = a->p.sl;
    sluice_status st = a->p.st;

    memcpy(sl_share_err(sl), a->err, SL_ERR_LEN);
    sl_pipe_record(&a->p);
    if (st != SLUICE_OK && !a->p.many) /* the callback's result says so */
        a->out->status = st;
    if (a->to.granted != NULL)
        a->to.granted(sl, a->to.arg, st, a->out,
                      st == SLUICE_OK ? a->granted : 0);
    else
        a->to.done(sl, a->to.arg, st, a->out, a->p.n);
    sl_free(a);
}

/* The loop's driver: runs a's pipeline until it waits for the engine, or
 * is answered. Answered before anything was sent, the callback still runs
 * from the loop: an empty job goes to the engine first. */
static void drive(async_call *a)
{
    sluice *sl = a->p.sl;

    for (;;) {
        sl_pipe_need need = sl_pipe_run(&a->p);

        if (a->p.settled) { /* a batch was answered: parked calls go on */
            a->p.settled = false;
            if (sl->parked != NULL && !sl->eng.closing)
                wake_parked(sl);
        }
        switch (need) {
        case SL_NEED_SEND:
            if (sl->eng.closing) { /* a callback that sluice_close() runs */
                a->p.sent_st = SLUICE_EIO;
                sl_errf(a->p.send_err, SL_ERR_LEN,
                        "the handle closed before the call's next round "
                        "trip; it was not sent");
                continue;
            }
            memset(a->p.res, 0, a->p.nsend * sizeof(*a->p.res));
            a->job.reqs = a->p.send;
            a->job.n = a->p.nsend;
            a->job.out = a->p.res;
            a->job.marks = sl_pipe_marks(&a->p, a->marks);
            a->job.err[0] = '\0';
            sl->eng.call_started = a->p.began;
            sl_engine_submit(&sl->eng, &a->job);
            sl->eng.call_started = 0;
            a->submitted = true;
            return;
        case SL_NEED_SLEEP:
        case SL_NEED_PARK:
            if (need == SL_NEED_PARK) {
                a->next_parked = sl->parked;
                sl->parked = a;
            }
            sl_engine_sleep(&sl->eng, &a->job, a->p.wake_at, woken);
            if (sl->eng.depth == 0) /* from the call: the loop's timer */
                sl_engine_report(&sl->eng);
            return;
        case SL_NEED_DONE:
        case SL_NEED_GO:
            if (a->submitted) {
                answer(a);
            } else { /* from the call itself: the answer from the loop */
                a->job.n = 0;
                a->submitted = true;
                sl_engine_submit(&sl->eng, &a->job);
            }
            return;
        }
    }
}

/* The offset of count items of size and alignment align placed at *at,
 * which moves past them. */
static size_t place(size_t *at, size_t count, size_t size, size_t align)
{
    size_t off = (*at + align - 1) / align * align;

    *at = off + count * size;
    return off;
}

/* A call with room for n requests (3 to send for a single one) whose keys
 * take key_bytes, and a decision by name's state (named): one allocation,
 * the call and then its arrays. */
static async_call *new_call(size_t n, size_t key_bytes, bool named,
                            const sl_call_to *to)
{
    size_t at = sizeof(async_call), m = n > 1 ? n : 3, o_reqs, o_send, o_res,
           o_out, o_map, o_rules, o_batch, o_marks, o_viol, o_keys, o_name = 0;
    async_call *a;
    char *base;

    /* Far below any overflow: the whole is at most about 1 KiB a request
     * (its rules' copy), and the keys, each within the key cap. */
    if (n > SIZE_MAX / 4096 || key_bytes > SIZE_MAX / 2)
        return NULL;
    o_reqs = place(&at, 1, sizeof(sl_request), _Alignof(sl_request));
    o_send = place(&at, m, sizeof(sl_request), _Alignof(sl_request));
    o_res = place(&at, m, sizeof(sluice_result), _Alignof(sluice_result));
    o_out = place(&at, n, sizeof(sluice_result), _Alignof(sluice_result));
    o_map = place(&at, n, sizeof(size_t), _Alignof(size_t));
    o_rules = place(&at, n, sizeof(sluice_ruleset), _Alignof(sluice_ruleset));
    o_batch = place(&at, n > 1 ? n : 0, sizeof(sluice_request),
                    _Alignof(sluice_request));
    if (named)
        o_name = place(&at, 1, sizeof(sl_pipe_name), _Alignof(sl_pipe_name));
    o_marks = place(&at, m, 1, 1);
    o_viol = place(&at, n, 1, 1);
    o_keys = place(&at, key_bytes, 1, 1);
    if ((base = sl_calloc(1, at)) == NULL)
        return NULL;
    a = (async_call *)base;
    a->to = *to;
    a->reqs = (sl_request *)(base + o_reqs);
    a->send = (sl_request *)(base + o_send);
    a->res = (sluice_result *)(base + o_res);
    a->out = (sluice_result *)(base + o_out);
    a->map = (size_t *)(base + o_map);
    a->rules = (sluice_ruleset *)(base + o_rules);
    a->batch = (sluice_request *)(base + o_batch);
    a->name = named ? (sl_pipe_name *)(base + o_name) : NULL;
    a->marks = (unsigned char *)(base + o_marks);
    a->violated = (uint8_t *)(base + o_viol);
    a->keys = base + o_keys;
    a->job.marks = a->marks;
    a->job.done = job_done;
    return a;
}

sluice_status sl_call_ready(const sluice *sl, bool has_answer, char *err)
{
    if (!has_answer) {
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

/* Request r of a, prepared, points at its own copies of key and rules
 * (a decision's; rules NULL: none), the key at keys + at_key. */
static void keep_request(async_call *a, sl_request *r, size_t at_key,
                         const sluice_ruleset *rules, sluice_ruleset *copy)
{
    memcpy(a->keys + at_key, r->key, r->key_len);
    r->key = a->keys + at_key;
    if (rules != NULL) {
        *copy = *rules;
        r->decide.rules = copy;
    }
}

/* Starts the prepared request r on the loop (nm: a decision by name's,
 * copied into the call), its key, rules, value and policy (pol: the
 * call's own, or NULL) copied. */
static sluice_status start_prepared(sluice *sl, const sl_request *r,
                                    const sl_pipe_name *nm, int64_t wait_ms,
                                    const sluice_result *after,
                                    const sl_policy *pol, const sl_call_to *to,
                                    char *err)
{
    async_call *a;

    if ((a = new_call(1, nm != NULL ? 0 : r->key_len, nm != NULL, to)) ==
        NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    a->reqs[0] = *r;
    sl_pipe_one(&a->p, sl, a->reqs, a->out, a->send, a->res, a->err);
    if (nm != NULL) {
        *a->name = *nm;
        a->reqs[0].key = a->name->key;
        sl_pipe_by_name(&a->p, a->name);
    } else {
        keep_request(a, &a->reqs[0], 0,
                     sl_op_decides(r->op) ? r->decide.rules : NULL,
                     &a->rules[0]);
    }
    if (r->op == SL_OP_AT_MOST)
        a->reqs[0].decide.granted = &a->granted;
    if (pol != NULL) {
        a->pol = *pol;
        a->reqs[0].policy = &a->pol;
    }
    if ((r->op == SL_OP_LEASE_ACQUIRE || r->op == SL_OP_LEASE_RELEASE) &&
        r->lease.id_len < sizeof(a->lease_id)) {
        memcpy(a->lease_id, r->lease.id, r->lease.id_len);
        a->reqs[0].lease.id = a->lease_id;
    }
    a->p.began = sl_mono_ms();
    a->p.wait_until = wait_ms > 0 ? a->p.began + wait_ms : 0;
    if (after != NULL) {
        a->after = *after;
        a->p.after = &a->after;
    }
    drive(a);
    return SLUICE_OK;
}

sluice_status sl_call_start(sluice *sl, const sl_request *r,
                            const sl_call_to *to, char *err)
{
    sluice_status st;

    st = sl_call_ready(sl, to->done != NULL || to->granted != NULL, err);
    if (st != SLUICE_OK)
        return st;
    return start_prepared(sl, r, NULL, 0, NULL, NULL, to, err);
}

/* A stored op's round trip on the loop (sl_call_stored_async). */
typedef struct stored_call {
    sl_job job;
    sluice *sl;
    sl_request r;
    sluice_result res;
    unsigned char mark;
    sl_call_stored_fn fn;
    void *arg;
    char *err;
} stored_call;

static void stored_done(sl_job *job)
{
    stored_call *c = (stored_call *)job;
    sluice_status st = job->n == 0 ? SLUICE_OK : c->res.status;

    if (job->n > 0)
        sl_stats_backend(&c->sl->stats, job->n, 0);
    if (st != SLUICE_OK && job->err[0] != '\0')
        memcpy(c->err, job->err, SL_ERR_LEN);
    c->fn(c->sl, c->arg, st);
    sl_free(c);
}

sluice_status sl_call_stored_async(sluice *sl, const sl_request *r,
                                   int64_t began, sl_call_stored_fn fn,
                                   void *arg, char *err)
{
    stored_call *c;

    if (sl->eng.closing) { /* a callback that sluice_close() runs */
        sl_errf(err, SL_ERR_LEN,
                "the handle closed before the call's next round trip; it "
                "was not sent");
        return SLUICE_EIO;
    }
    if ((c = sl_calloc(1, sizeof(*c))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    c->sl = sl;
    if (r != NULL)
        c->r = *r;
    c->fn = fn;
    c->arg = arg;
    c->err = err;
    c->job.reqs = &c->r;
    c->job.n = r != NULL ? 1 : 0;
    c->job.out = &c->res;
    c->job.marks = &c->mark;
    c->job.done = stored_done;
    sl->eng.call_started = began;
    sl_engine_submit(&sl->eng, &c->job);
    sl->eng.call_started = 0;
    return SLUICE_OK;
}

/* One request on the loop; in: the call's policy (NULL: the handle's). */
static sluice_status start_with(sluice *sl, sl_op op, const void *key,
                                size_t key_len, const sluice_ruleset *rules,
                                int64_t cost, int64_t wait_ms,
                                const sluice_result *after,
                                const sluice_policy *in, const sl_call_to *to)
{
    sl_policy pol;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    st = sl_call_ready(sl, to->done != NULL || to->granted != NULL, err);
    if (st != SLUICE_OK)
        return st;
    if (sl_pipe_bad_wait(wait_ms, err))
        return SLUICE_EINVAL;
    if (in != NULL && (st = sl_pipe_policy(sl, op, in, &pol, err)) != SLUICE_OK)
        return st;
    st = sl_pipe_prepare(sl, op, key, key_len, rules, cost, &r, err);
    if (st != SLUICE_OK) {
        sl_pipe_count(sl, op, st);
        return st;
    }
    return start_prepared(sl, &r, NULL, wait_ms, after,
                          in != NULL ? &pol : NULL, to, err);
}

static sluice_status start_one(sluice *sl, sl_op op, const void *key,
                               size_t key_len, const sluice_ruleset *rules,
                               int64_t cost, int64_t wait_ms,
                               const sluice_result *after, const sl_call_to *to)
{
    return start_with(sl, op, key, key_len, rules, cost, wait_ms, after, NULL,
                      to);
}

sluice_status sl_call_by_name_async(sluice *sl, sl_op op, const void *name,
                                    size_t name_len, const void *client,
                                    size_t client_len, int64_t cost,
                                    sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};
    sl_pipe_name *nm;
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_call_ready(sl, done != NULL, err)) != SLUICE_OK)
        return st;
    if ((nm = sl_malloc(sizeof(*nm))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    st = sl_pipe_name_prepare(sl, op, name, name_len, client, client_len, cost,
                              nm, &r, err);
    if (st == SLUICE_OK)
        st = start_prepared(sl, &r, nm, 0, NULL, NULL, &to, err);
    sl_free(nm);
    return st;
}

sluice_status sluice_acquire_async(sluice *sl, const void *key, size_t key_len,
                                   const sluice_ruleset *rules, int64_t cost,
                                   sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, 0, NULL,
                     &to);
}

sluice_status sluice_acquire_with_async(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        int64_t cost, const sluice_policy *p,
                                        sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_with(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, 0, NULL, p,
                      &to);
}

sluice_status sluice_acquire_wait_async(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        int64_t cost, int64_t wait_ms,
                                        sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_one(sl, SL_OP_ACQUIRE, key, key_len, rules, cost, wait_ms,
                     NULL, &to);
}

sluice_status sluice_peek_async(sluice *sl, const void *key, size_t key_len,
                                const sluice_ruleset *rules, int64_t cost,
                                sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_one(sl, SL_OP_PEEK, key, key_len, rules, cost, 0, NULL, &to);
}

sluice_status sluice_reset_async(sluice *sl, const void *key, size_t key_len,
                                 const sluice_ruleset *rules,
                                 sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_one(sl, SL_OP_RESET, key, key_len, rules, 1, 0, NULL, &to);
}

sluice_status sluice_acquire_at_most_async(sluice *sl, const void *key,
                                           size_t key_len,
                                           const sluice_ruleset *rules,
                                           int64_t max_cost,
                                           sluice_granted_fn done, void *arg)
{
    sl_call_to to = {NULL, done, arg};

    return start_one(sl, SL_OP_AT_MOST, key, key_len, rules, max_cost, 0, NULL,
                     &to);
}

sluice_status sluice_refund_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t amount,
                                  sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return start_one(sl, SL_OP_REFUND, key, key_len, rules, amount, 0, NULL,
                     &to);
}

/* A settle on the loop (acquired: its acquire's answer, needed or not). */
static sluice_status settle_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules,
                                  const sluice_result *acquired, bool need,
                                  int64_t reserved, int64_t actual,
                                  sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};
    sl_op op;
    int64_t amount;
    sluice_status st;

    st = sl_pipe_settle(sl, acquired, need, reserved, actual, &op, &amount);
    if (st != SLUICE_OK)
        return st;
    return start_one(sl, op, key, key_len, rules, amount, 0, acquired, &to);
}

sluice_status sluice_settle_async(sluice *sl, const void *key, size_t key_len,
                                  const sluice_ruleset *rules, int64_t reserved,
                                  int64_t actual, sluice_done_fn done,
                                  void *arg)
{
    return settle_async(sl, key, key_len, rules, NULL, false, reserved, actual,
                        done, arg);
}

sluice_status sluice_settle_after_async(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        const sluice_result *acquired,
                                        int64_t reserved, int64_t actual,
                                        sluice_done_fn done, void *arg)
{
    return settle_async(sl, key, key_len, rules, acquired, true, reserved,
                        actual, done, arg);
}

sluice_status sluice_acquire_many_async(sluice *sl, const sluice_request *reqs,
                                        size_t n, sluice_done_fn done,
                                        void *arg)
{
    return sluice_acquire_many_with_async(sl, reqs, n, NULL, done, arg);
}

sluice_status sluice_acquire_many_with_async(sluice *sl,
                                             const sluice_request *reqs,
                                             size_t n, const sluice_policy *in,
                                             sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};
    sl_policy pol;
    async_call *a;
    size_t i, k, bytes = 0, at = 0;
    sluice_status st;
    bool sent;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_call_ready(sl, done != NULL, err)) != SLUICE_OK)
        return st;
    if (n == 0 || reqs == NULL) {
        sl_errf(err, SL_ERR_LEN, "acquire_many_async: %s",
                reqs == NULL ? "reqs is NULL" : "no requests");
        return SLUICE_EINVAL;
    }
    if (in != NULL &&
        (st = sl_pipe_policy(sl, SL_OP_ACQUIRE, in, &pol, err)) != SLUICE_OK)
        return st;
    for (i = 0; i < n; i++)
        if (reqs[i].key_len <= SLUICE_MAX_KEY_LEN)
            bytes += reqs[i].key_len;
    if ((a = new_call(n, bytes, false, &to)) == NULL) {
        sl_errf(err, SL_ERR_LEN,
                "acquire_many_async: out of memory for %zu requests", n);
        return SLUICE_ENOMEM;
    }
    if (in != NULL)
        a->pol = pol;
    sl_pipe_many(&a->p, sl, reqs, n, in != NULL ? &a->pol : NULL, a->out,
                 a->violated, a->send, a->res, a->map, a->first_msg, a->err);
    a->p.began = sl_mono_ms();
    /* Prepared and asked of the reservations and the deny cache now,
     * while the caller's requests are there; what is sent, copied. The
     * rules of each request checked are kept to the answer (what decided
     * it, sluice_last_decision): a copy each, which the sent point to. */
    sent = sl_pipe_run(&a->p) == SL_NEED_SEND;
    for (i = 0; i < n; i++) {
        sluice_status rst = a->out[i].status;

        a->batch[i].rules = NULL;
        if (rst == SLUICE_OK || rst == SLUICE_CACHED ||
            rst == SLUICE_RESERVED) {
            a->rules[i] = *reqs[i].rules;
            a->batch[i].rules = &a->rules[i];
        }
    }
    for (k = 0; sent && k < a->p.nsend; k++) {
        i = a->map[k];
        keep_request(a, &a->send[k], at, NULL, NULL);
        a->send[k].decide.rules = &a->rules[i];
        at += reqs[i].key_len;
    }
    a->p.batch = a->batch;
    a->job.reqs = a->send;
    a->job.n = a->p.nsend;
    a->job.out = a->res;
    a->submitted = true;
    /* None sent: the callback still runs, from the loop. */
    sl_engine_submit(&sl->eng, &a->job);
    return SLUICE_OK;
}
