/* SPDX-License-Identifier: BSD-3-Clause */
/* engine.c - jobs, their deadlines, and the driving of connections: by
 * the caller's loop (sluice_attach) or, for a blocking call, by poll(). */
#include "engine.h"

#include "caps.h"
#include "net/conn.h"
#include "request.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void sl_engine_init(sl_engine *e, const sl_url *url, const char *name,
                    const sl_engine_ops *ops, unsigned caps)
{
    memset(e, 0, sizeof(*e));
    e->url = url;
    e->name = name;
    e->ops = ops;
    e->caps = caps;
    e->timer_at = -1;
}

static void conn_unwatch(void *data, sl_conn *cn)
{
    sl_engine_forget_fd(data, cn);
}

static int64_t conn_waited(void *data, const sl_job *job)
{
    (void)data;
    return sl_engine_waited(job);
}

bool sl_engine_add_conn(sl_engine *e, sl_conn *cn)
{
    if (e->nconns == SL_ENGINE_CONNS)
        return false;
    e->conns[e->nconns++] = cn;
    e->subscribers |= cn->push;
    cn->ev = (sl_conn_events){e, conn_unwatch, conn_waited};
    return true;
}

static void unlink_job(sl_job **head, sl_job **tail, sl_job *job)
{
    if (job->prev != NULL)
        job->prev->next = job->next;
    else
        *head = job->next;
    if (job->next != NULL)
        job->next->prev = job->prev;
    else
        *tail = job->prev;
    job->prev = job->next = NULL;
}

static void append_job(sl_job **head, sl_job **tail, sl_job *job)
{
    job->next = NULL;
    job->prev = *tail;
    if (*tail != NULL)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

/* Links job into a list after `after` (NULL: first). */
static void insert_after(sl_job **head, sl_job **tail, sl_job *after,
                         sl_job *job)
{
    job->prev = after;
    job->next = after != NULL ? after->next : *head;
    if (job->next != NULL)
        job->next->prev = job;
    else
        *tail = job;
    if (after != NULL)
        after->next = job;
    else
        *head = job;
}

/* Jobs under way are kept in deadline order, so that the expired ones are
 * found at the head. Deadlines grow with the start time, so a job goes in
 * at the tail, or, a batch that began earlier, a few places before it. */
static void insert_by_deadline(sl_engine *e, sl_job *job)
{
    sl_job *after = e->tail;

    while (after != NULL && after->deadline > job->deadline)
        after = after->prev;
    insert_after(&e->head, &e->tail, after, job);
}

void sl_engine_wake(sl_job *job, int64_t at)
{
    sl_engine *e = job->eng;

    if (job->wake_at == 0 && at != 0)
        e->waking++;
    else if (job->wake_at != 0 && at == 0)
        e->waking--;
    job->wake_at = at;
}

void sl_engine_answer(sl_job *job, size_t i, sluice_status st, const char *msg)
{
    sl_engine *e = job->eng;

    if (job->marks[i] & SL_MARK_ANSWERED)
        return;
    job->marks[i] |= SL_MARK_ANSWERED;
    job->out[i].status = st;
    if (st != SLUICE_OK && job->err[0] == '\0' && msg != NULL)
        snprintf(job->err, sizeof(job->err), "%s", msg);
    /* Before the count: what the hook starts (the next request on the
     * key) may answer others of this job, never end it. */
    if (e->ops->answered != NULL)
        e->ops->answered(e->state, job, i);
    if (--job->left > 0)
        return;
    job->finished = true;
    if (job->wake_at != 0)
        sl_engine_wake(job, 0);
    if (job->data != NULL) {
        sl_free(job->data);
        job->data = NULL;
    }
    unlink_job(&e->head, &e->tail, job);
    /* A blocking call's job is waited for by its flag, not delivered. */
    if (job->done != NULL)
        append_job(&e->done_head, &e->done_tail, job);
}

/* Answers the job's requests that the backend's caps refuse; true when
 * that was all of them. */
static bool refuse(sl_engine *e, sl_job *job)
{
    char msg[SL_ERR_LEN];
    size_t i;

    for (i = 0; i < job->n; i++) {
        const sl_refusal *r = sl_caps_refusal(
            SL_ASK_REQUEST, sl_caps_needs(&job->reqs[i]), e->caps);

        if (r == NULL)
            continue;
        sl_errf(msg, sizeof(msg), "%s: %s", e->name, r->text);
        /* Nothing but its status, as a backend's own refusal was. */
        memset(&job->out[i], 0, sizeof(job->out[i]));
        sl_engine_answer(job, i, r->status, msg);
    }
    return job->finished;
}

static void start_job(sl_engine *e, sl_job *job)
{
    job->eng = e;
    job->left = job->n;
    job->finished = false;
    job->expired = false;
    job->wake_at = 0;
    job->last = SLUICE_ETIMEOUT;
    job->err[0] = '\0';
    job->data = NULL;
    /* The call's whole budget, from when the call began (a batch that
     * queued behind another thread's has spent that wait): a connect or
     * reconnect spends it, never extends it. */
    job->started = e->call_started > 0 ? e->call_started : sl_mono_ms();
    e->call_started = 0;
    job->deadline = job->started + e->url->cfg.command_timeout_ms;
    memset(job->marks, 0, job->n);
    if (job->n == 0) {
        job->finished = true;
        if (job->done != NULL)
            append_job(&e->done_head, &e->done_tail, job);
        return;
    }
    insert_by_deadline(e, job);
    /* The one place every request crosses on its way to the backend
     * (blocking, threads, batches, the loop, by key and by name): what
     * the backend cannot do is answered here, from caps.c's table. */
    if ((e->caps & SL_CAPS_REQUEST) != SL_CAPS_REQUEST && refuse(e, job))
        return;
    e->ops->start(e->state, job);
}

/* Connects what has replies waiting and is closed; a connection in a
 * backoff fails them instead, which may queue more, there too: the next
 * request on a key that waited behind the failed one (the plain
 * backends). Those are failed in the same turn, not left for a poll that
 * would wait for their deadline (a batch of nine on one key once answered
 * two ECONNECT and seven ETIMEOUT). Each round answers at least one
 * request, so the rounds end; the bound only guards that. */
static void kick_all(sl_engine *e)
{
    size_t i, round;
    bool again = true;

    for (round = 0; again && round < 100000; round++) {
        again = false;
        for (i = 0; i < e->nconns; i++) {
            sl_conn *cn = e->conns[i];

            sl_conn_kick(cn);
            /* Queued again: failed at the next kick while the backoff
             * holds, or connected once it has ended, which it may have
             * since the kick (a subscriber waits for that instead). */
            again |=
                cn->phase == SL_PHASE_CLOSED && cn->qlen > 0 &&
                !(cn->push && cn->failures > 0 && sl_mono_ms() < cn->retry_at);
        }
    }
}

/* The earliest deadline of jobs, wakes and connections (a connect, a
 * subscriber's health check or the end of its backoff); -1 none. */
static int64_t next_deadline(const sl_engine *e)
{
    int64_t t = -1;
    const sl_job *j;
    size_t i;

#define SOONER(x)                          \
    do {                                   \
        if ((x) > 0 && (t < 0 || (x) < t)) \
            t = (x);                       \
    } while (0)
    if (e->head != NULL)
        SOONER(e->head->deadline);
    if (e->sleep_head != NULL)
        SOONER(e->sleep_head->resume_at);
    for (j = e->head; e->waking > 0 && j != NULL; j = j->next)
        SOONER(j->wake_at);
    SOONER(e->wake_at);
    for (i = 0; i < e->nconns; i++)
        SOONER(sl_conn_next_timer(e->conns[i]));
#undef SOONER
    return t;
}

void sl_engine_sleep(sl_engine *e, sl_job *job, int64_t at,
                     sl_job_done_fn woken)
{
    sl_job *after = e->sleep_tail;

    job->resume_at = at;
    job->woken = woken;
    while (after != NULL && after->resume_at > at)
        after = after->prev;
    insert_after(&e->sleep_head, &e->sleep_tail, after, job);
}

void sl_engine_restart(sl_engine *e, sl_job *job)
{
    start_job(e, job);
}

void sl_engine_wake_now(sl_engine *e, sl_job *job)
{
    unlink_job(&e->sleep_head, &e->sleep_tail, job);
    sl_engine_sleep(e, job, sl_mono_ms(), job->woken); /* > 0: a time */
}

/* Runs what is due at now: expired jobs, connect deadlines, wakes. */
static void run_timers(sl_engine *e, int64_t now)
{
    size_t i;
    sl_job *j;

    /* Sleepers whose time has come start again. */
    while ((j = e->sleep_head) != NULL && j->resume_at <= now) {
        unlink_job(&e->sleep_head, &e->sleep_tail, j);
        j->woken(j);
    }

    /* The expired: at the head, and first, so that a job past its
     * deadline ends with its own timeout and says how long it waited, not
     * with what a connect's deadline or a backend's wake due in the same
     * turn would fail it with (a loop that runs late finds them all due;
     * a cluster's ask for the slot map may be older than the call). A
     * backend's step may end other jobs, so the head is looked at afresh
     * after each. */
    while ((j = e->head) != NULL && j->deadline <= now) {
        char msg[SL_ERR_LEN];
        size_t k;

        j->expired = true;
        for (i = 0; i < e->nconns && !j->finished; i++)
            sl_conn_expire(e->conns[i], j);
        for (k = 0; k < j->n && !j->finished; k++) {
            if (sl_engine_answered(j, k))
                continue;
            if (e->ops->overdue != NULL)
                e->ops->overdue(e->state, j, k, msg, sizeof(msg));
            else
                sl_errf(msg, sizeof(msg),
                        "%s: no answer within %lld ms (timeout_ms=%u); the "
                        "outcome is unknown",
                        e->name, (long long)sl_engine_waited(j),
                        e->url->cfg.command_timeout_ms);
            sl_engine_answer(j, k, j->last, msg);
        }
        /* Its replies, should any still come, go nowhere. */
        for (i = 0; i < e->nconns; i++)
            sl_conn_forget(e->conns[i], j);
    }
    for (i = 0; i < e->nconns; i++)
        sl_conn_check_deadline(e->conns[i], now);
    if (e->wake_at > 0 && e->wake_at <= now) {
        e->wake_at = 0;
        if (e->ops->resume != NULL)
            e->ops->resume(e->state, NULL);
    }
    /* Wakes, when any job waits for one (a cluster's retry). */
again:
    for (j = e->head; e->waking > 0 && j != NULL; j = j->next) {
        if (j->wake_at > 0 && j->wake_at <= now) {
            sl_engine_wake(j, 0);
            if (e->ops->resume != NULL)
                e->ops->resume(e->state, j);
            goto again;
        }
    }
}

void sl_engine_forget_fd(sl_engine *e, sl_conn *cn)
{
    if (cn->watched != 0 && e->attached && cn->fd >= 0)
        e->loop.watch(e->loop.data, cn->fd, 0);
    cn->watched = 0;
}

void sl_engine_report(sl_engine *e)
{
    int64_t t;
    size_t i;

    kick_all(e);
    if (!e->attached)
        return;
    for (i = 0; i < e->nconns; i++) {
        sl_conn *cn = e->conns[i];
        short w = cn->fd >= 0 ? sl_conn_wants(cn) : 0;

        if (cn->fd >= 0 && w != cn->watched) {
            cn->watched = w;
            e->loop.watch(e->loop.data, cn->fd,
                          ((w & POLLIN) ? SLUICE_WATCH_IN : 0) |
                              ((w & POLLOUT) ? SLUICE_WATCH_OUT : 0));
        }
    }
    /* Callbacks to run: as soon as the loop can. */
    t = e->done_head != NULL ? sl_mono_ms() : next_deadline(e);
    if (t != e->timer_at) {
        int64_t now = sl_mono_ms();

        e->timer_at = t;
        e->loop.timer(e->loop.data, t < 0 ? -1 : t > now ? t - now : 0);
    }
}

int64_t sl_engine_waited(const sl_job *job)
{
    return sl_mono_ms() - job->started;
}

/* Runs the done callbacks of what ended (async jobs only). */
static void deliver(sl_engine *e)
{
    while (e->done_head != NULL) {
        sl_job *j = e->done_head;

        unlink_job(&e->done_head, &e->done_tail, j);
        j->done(j);
    }
}

void sl_engine_submit(sl_engine *e, sl_job *job)
{
    e->depth++;
    start_job(e, job);
    e->depth--;
    if (e->depth == 0)
        sl_engine_report(e);
}

void sl_engine_action(sl_engine *e, int fd, int events)
{
    size_t i;

    e->depth++;
    if (fd != SLUICE_SOCKET_TIMEOUT) {
        for (i = 0; i < e->nconns; i++) {
            if (e->conns[i]->fd == fd) {
                sl_conn_io(
                    e->conns[i],
                    (short)(((events & SLUICE_WATCH_IN) ? POLLIN : 0) |
                            ((events & SLUICE_WATCH_OUT) ? POLLOUT : 0)));
                break;
            }
        }
    }
    /* A timer given to the loop is spent once it fires. */
    if (fd == SLUICE_SOCKET_TIMEOUT)
        e->timer_at = -1;
    run_timers(e, sl_mono_ms());
    kick_all(e);
    deliver(e);
    e->depth--;
    if (e->depth == 0)
        sl_engine_report(e);
}

size_t sl_engine_pending(const sl_engine *e)
{
    size_t n = 0;
    const sl_job *j;

    for (j = e->head; j != NULL; j = j->next)
        n++;
    for (j = e->done_head; j != NULL; j = j->next)
        n++;
    for (j = e->sleep_head; j != NULL; j = j->next)
        n++;
    return n;
}

static bool flag_set(void *flag)
{
    return *(const bool *)flag;
}

void sl_engine_wait(sl_engine *e, const bool *flag, int64_t deadline)
{
    sl_engine_wait_until(e, flag_set, (void *)(uintptr_t)flag, deadline);
}

/* One turn of the blocking loop: polls the connections for at most
 * timeout ms (-1: no limit), handles what is ready, then the timers.
 * Subscribers first: a failover announced there closes the master's
 * connection before a request is written to the old master. Returns
 * false when poll() failed. */
static bool turn(sl_engine *e, int timeout)
{
    struct pollfd fds[SL_ENGINE_CONNS];
    sl_conn *of[SL_ENGINE_CONNS];
    size_t i, nfds = 0;
    int rc, pass;

    for (i = 0; i < e->nconns; i++) {
        short w = e->conns[i]->fd >= 0 ? sl_conn_wants(e->conns[i]) : 0;

        if (w != 0) {
            fds[nfds].fd = e->conns[i]->fd;
            fds[nfds].events = w;
            fds[nfds].revents = 0;
            of[nfds++] = e->conns[i];
        }
    }
    rc = poll(fds, nfds, timeout);
    if (rc < 0 && errno != EINTR)
        return false; /* cannot happen with valid fds; the deadlines hold */
    for (pass = 0; rc > 0 && pass < 2; pass++)
        for (i = 0; i < nfds; i++)
            if (fds[i].revents != 0 && of[i]->push == (pass == 0) &&
                of[i]->fd == fds[i].fd)
                sl_conn_io(of[i], fds[i].revents);
    run_timers(e, sl_mono_ms());
    return true;
}

void sl_engine_wait_until(sl_engine *e, bool (*done)(void *arg), void *arg,
                          int64_t deadline)
{
    bool turned = false;

    for (;;) {
        int64_t now, t;

        kick_all(e);
        if (done(arg)) {
            /* Answered without a turn (a connection in its backoff fails
             * its requests at once): the subscribers and timers are
             * looked at all the same, without waiting, or a failover
             * announced would wait for the backoff's end to be read. */
            if (!turned && e->subscribers) {
                turn(e, 0);
                kick_all(e);
            }
            return;
        }
        now = sl_mono_ms();
        if (deadline >= 0 && now >= deadline)
            return;
        t = next_deadline(e);
        if (deadline >= 0 && (t < 0 || deadline < t))
            t = deadline;
        if (!turn(e, t < 0 ? -1 : t > now ? (int)(t - now) : 0))
            return;
        turned = true;
    }
}

sluice_status sl_engine_decide(sl_engine *e, const sl_request *reqs, size_t n,
                               sluice_result *out, char *err, size_t err_len)
{
    unsigned char small[64];
    sl_job job;

    if (n == 0)
        return SLUICE_OK;
    /* Field by field: start_job sets the rest, and zeroing the message
     * buffer too would cost a blocking call more than the engine does. */
    job.reqs = reqs;
    job.n = n;
    job.out = out;
    job.tag = 0;
    job.done = NULL;
    job.resume_at = 0;
    job.woken = NULL;
    job.prev = job.next = NULL;
    job.marks = n <= sizeof(small) ? small : sl_malloc(n);
    if (job.marks == NULL) {
        sl_errf(err, err_len, "%s: out of memory for %zu requests", e->name, n);
        return SLUICE_ENOMEM;
    }
    e->depth++;
    start_job(e, &job);
    if (!job.finished) /* a backend may answer as the job starts */
        sl_engine_wait(e, &job.finished, -1);
    e->depth--;
    if (job.err[0] != '\0')
        sl_errf(err, err_len, "%s", job.err);
    if (job.marks != small)
        sl_free(job.marks);
    return SLUICE_OK;
}

void sl_engine_shutdown(sl_engine *e)
{
    size_t i;

    /* Every job under way ends: its outcome unknown. The connections
     * first, while the backend's callbacks can still run. */
    e->depth++;
    e->closing = true;
    for (i = 0; i < e->nconns; i++)
        sl_conn_abort(e->conns[i], SLUICE_EIO,
                      "the handle closed with the request in flight; its "
                      "outcome is unknown");
    while (e->head != NULL) {
        sl_job *j = e->head;
        size_t k;

        for (k = 0; k < j->n && !j->finished; k++)
            sl_engine_answer(j, k, SLUICE_EIO,
                             "the handle closed with the request in flight; "
                             "its outcome is unknown");
    }
    /* Sleepers end with the answers they had. */
    while (e->sleep_head != NULL) {
        sl_job *j = e->sleep_head;

        unlink_job(&e->sleep_head, &e->sleep_tail, j);
        append_job(&e->done_head, &e->done_tail, j);
    }
    for (i = 0; i < e->nconns; i++)
        sl_engine_forget_fd(e, e->conns[i]);
    deliver(e);
    e->depth--;
    if (e->attached) {
        e->loop.timer(e->loop.data, -1);
        if (e->loop.cleanup != NULL)
            e->loop.cleanup(e->loop.data);
        e->attached = false;
    }
}
