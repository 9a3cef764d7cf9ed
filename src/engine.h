/* SPDX-License-Identifier: BSD-3-Clause */
/* engine.h - the handle's I/O engine: the decisions under way (jobs), the
 * connections they use, and the deadlines of both. Nothing in it waits by
 * itself. The caller's event loop drives it (sluice_attach: the engine says
 * which sockets to watch for what and when its next deadline is, and the
 * loop hands readiness back, as with libcurl's multi-socket API), or, for
 * the blocking calls, the engine drives itself with poll() until the job
 * at hand is answered.
 *
 * A backend that works on the engine starts a job by queueing its commands
 * on connections with a callback each (conn.h); the callbacks answer the
 * job's requests one by one (sl_engine_answer), or queue the next step
 * (EVAL after NOSCRIPT, a redirection, a retry after a backoff). The
 * engine knows the backend only through sl_engine_ops, below. */
#ifndef SL_ENGINE_H
#define SL_ENGINE_H

#include "internal.h"

struct sl_conn;

#define SL_ENGINE_CONNS 80 /* a cluster's 64 nodes, and room */

/* A mark of each request of a job; the bits above are the backend's. */
#define SL_MARK_ANSWERED 1u

typedef struct sl_job sl_job;
typedef void (*sl_job_done_fn)(sl_job *job);

struct sl_job {
    const struct sl_request *reqs;
    size_t n;
    sluice_result *out;
    unsigned char *marks;
    size_t left;          /* requests not answered yet */
    int64_t started;      /* monotonic ms: when the call began */
    int64_t deadline;     /* started + timeout_ms: whatever is not answered
                             then is; nothing extends it */
    int64_t wake_at;      /* 0, or when the backend resumes the job (set
                             through sl_engine_wake) */
    sluice_status last;   /* what a request unanswered at the deadline gets */
    char err[SL_ERR_LEN]; /* the first failure's message */
    void *data;           /* the backend's; sl_free'd when the job ends */
    uint64_t tag;         /* the backend's: its first request's tag */
    bool expired;         /* its deadline passed: nothing is sent again */
    bool finished;
    sl_job_done_fn done; /* NULL: a blocking call waits for finished */
    /* Asleep (sl_engine_sleep): when it starts again, and what it runs
     * then (which calls sl_engine_restart). */
    int64_t resume_at;
    sl_job_done_fn woken;
    struct sl_engine *eng;
    sl_job *prev, *next;
};

/* What the engine calls of whoever starts jobs on it (the handle's
 * backend), with that one's state. */
typedef struct sl_engine_ops {
    /* Starts deciding the job's requests without waiting: queues commands
     * with their callbacks on the engine's connections, which answer each
     * request (sl_engine_answer) now or later. A request the backend's
     * caps refuse is answered already (its mark SL_MARK_ANSWERED): skip
     * it. */
    void (*start)(void *state, sl_job *job);
    /* Optional, NULL: the backend never sets a wake_at. The job's wake_at
     * has come (job NULL: the engine's own wake_at). */
    void (*resume)(void *state, sl_job *job);
    /* Optional: request i of the job was answered, by the backend or by
     * the engine (its deadline, the handle's close); what the backend
     * keeps for it goes. Called before the job ends. */
    void (*answered)(void *state, sl_job *job, size_t i);
    /* Optional: at the job's deadline, request i was carried by no
     * connection (waiting for a retry, a slot's owner): why, for its
     * message. NULL: the engine says no answer came in time. */
    void (*overdue)(void *state, const sl_job *job, size_t i, char *msg,
                    size_t len);
} sl_engine_ops;

typedef struct sl_engine {
    const char *name; /* the backend's, for messages */
    const sl_engine_ops *ops;
    unsigned caps; /* the backend's (caps.h): what it refuses is answered
                      before its start sees the job */
    void *state;
    const sl_url *url;
    struct sl_conn *conns[SL_ENGINE_CONNS];
    size_t nconns;
    bool subscribers;                /* some are (Sentinel's announcements) */
    sl_job *head, *tail;             /* under way, soonest deadline first */
    sl_job *done_head, *done_tail;   /* answered, callbacks not yet run */
    sl_job *sleep_head, *sleep_tail; /* waiting to start again, soonest
                                        first */
    int64_t wake_at; /* 0, or when the backend resumes (job NULL) */
    size_t waking;   /* jobs with a wake_at */
    /* The caller's loop (sluice_attach), or none. */
    bool attached;
    sluice_loop loop;
    int64_t timer_at; /* the deadline the loop was last given, -1 none */
    /* > 0: when the call that starts the next job began (a blocking
     * batch that waited for another thread's), its budget's start. */
    int64_t call_started;
    int depth;    /* nested engine calls (callbacks starting jobs) */
    bool closing; /* the handle closes: nothing is sent again */
} sl_engine;

/* name, ops and caps: the backend's (backend.h). */
void sl_engine_init(sl_engine *e, const sl_url *url, const char *name,
                    const sl_engine_ops *ops, unsigned caps);
/* Every connection a backend opens on the engine is registered: the
 * engine drives it, and sets its events (conn.h). False: no room. */
bool sl_engine_add_conn(sl_engine *e, struct sl_conn *cn);
/* Fails every job under way (the handle closes) and tells the loop to
 * stop watching. */
void sl_engine_shutdown(sl_engine *e);

/* Answers request i of job (once; later answers are ignored). out[i] is
 * filled by the caller when st is SLUICE_OK. */
void sl_engine_answer(sl_job *job, size_t i, sluice_status st, const char *msg);
static inline bool sl_engine_answered(const sl_job *job, size_t i)
{
    return (job->marks[i] & SL_MARK_ANSWERED) != 0;
}
/* How long the job's call has waited so far, in ms: for messages. */
int64_t sl_engine_waited(const sl_job *job);
/* The backend resumes the job at at (monotonic ms; 0: never). At its
 * deadline the engine expires the job itself: every connection carrying
 * its requests fails them (sl_conn_expire), and what is left gets
 * job->last. */
void sl_engine_wake(sl_job *job, int64_t at);

/* The blocking call: decides reqs on the engine, driving it with poll().
 * Every out[i].status is set; returns SLUICE_OK, or SLUICE_ENOMEM. */
sluice_status sl_engine_decide(sl_engine *e, const struct sl_request *reqs,
                               size_t n, sluice_result *out, char *err,
                               size_t err_len);
/* Drives the engine with poll() until *flag or the deadline (monotonic
 * ms). */
void sl_engine_wait(sl_engine *e, const bool *flag, int64_t deadline);
/* The same until done(arg) says so, or the deadline. */
void sl_engine_wait_until(sl_engine *e, bool (*done)(void *arg), void *arg,
                          int64_t deadline);

/* The async calls: starts job (its done set, its requests owned by the
 * caller until done runs). */
void sl_engine_submit(sl_engine *e, sl_job *job);
/* The loop's readiness (fd) or its timer (SLUICE_SOCKET_TIMEOUT). */
void sl_engine_action(sl_engine *e, int fd, int events);
/* Tells the loop what changed: sockets to watch, the next deadline. */
void sl_engine_report(sl_engine *e);
/* The connection's socket is about to close: the loop stops watching. */
void sl_engine_forget_fd(sl_engine *e, struct sl_conn *cn);
size_t sl_engine_pending(const sl_engine *e);
/* A job that ended (from its done callback) sleeps until at (monotonic
 * ms); then woken runs, from the loop. At the handle's close, a sleeping
 * job's done runs again with the answers it had. */
void sl_engine_sleep(sl_engine *e, sl_job *job, int64_t at,
                     sl_job_done_fn woken);
/* Starts a job again (from its woken callback). */
void sl_engine_restart(sl_engine *e, sl_job *job);
/* A sleeping job wakes now (at the engine's next timers), not at its
 * time. */
void sl_engine_wake_now(sl_engine *e, sl_job *job);

#endif /* SL_ENGINE_H */
