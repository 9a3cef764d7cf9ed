/* SPDX-License-Identifier: BSD-3-Clause */
/* pipeline.h - a call's way through the stages, written once (pipeline.c):
 *
 *   NAME    a decision by name: its rules and the client's override,
 *           cached or read (READ); stale ones when the read fails; none
 *           stored, defined from the handle's limits file (DEFINED)
 *   LOCAL   a settle of what the backend did not charge, settled where it
 *           was; the reservations, then the deny cache; else what goes to
 *           the backend (SENT), or a local admission's refill (REFILLED)
 *   ANSWER  the fail policy, shadow mode, the counters; a waiting acquire
 *           denied sleeps (ASLEEP) and goes back to LOCAL, as a call on
 *           the loop parked behind its key's batch does (PARKED)
 *
 * A batch (sluice_acquire_many) takes the same stages for each of its
 * requests at once: BATCH (LOCAL's), then BATCH_SENT (ANSWER's).
 *
 * Two drivers run it, as curl's easy interface runs its multi: call.c
 * blocking (a round trip through share.c, a sleep in the thread) and
 * call_loop.c on the caller's loop (a round trip as an engine job, a sleep
 * on the engine's timers). sl_pipe_run moves a call on until it needs what
 * only its driver can do, and says which; the driver does it and runs it
 * again. The state changes in one place, mstate() in pipeline.c. */
#ifndef SL_PIPELINE_H
#define SL_PIPELINE_H

#include "features/names.h"
#include "handle.h"

typedef enum sl_pipe_state {
    SL_PIPE_NAME,       /* a decision by name: its rules, its override */
    SL_PIPE_READ,       /* their read was answered */
    SL_PIPE_DEFINED,    /* a round trip of a define from the file */
    SL_PIPE_LOCAL,      /* the reservations, the deny cache */
    SL_PIPE_SENT,       /* the backend answered the call's requests */
    SL_PIPE_REFILLED,   /* the backend answered a local admission's refill */
    SL_PIPE_PARKED,     /* on the loop, behind its key's batch in flight */
    SL_PIPE_ASLEEP,     /* a waiting acquire, until its request may fit */
    SL_PIPE_ANSWER,     /* the fail policy, shadow mode, the counters */
    SL_PIPE_BATCH,      /* a batch's requests: checked, reservations, cache */
    SL_PIPE_BATCH_SENT, /* the backend answered a batch: policy, shadow,
                           counters */
    SL_PIPE_DONE
} sl_pipe_state;

/* What the driver does for the call before it runs it again. */
typedef enum sl_pipe_need {
    SL_NEED_SEND,  /* send[0..nsend) to the backend, answers into res, the
                      message into send_err, the status into sent_st */
    SL_NEED_SLEEP, /* a waiting acquire: sleep until wake_at */
    SL_NEED_PARK,  /* on the loop: wait for its key's batch in flight,
                      until wake_at at most */
    SL_NEED_DONE,  /* answered: the call's status in st, out set */
    SL_NEED_GO     /* (pipeline.c's own: the next stage now) */
} sl_pipe_need;

/* A decision by name: what it needs until it is a decision on a key. */
typedef struct sl_pipe_name {
    size_t name_len, client_len;
    char key[32 + SL_LIMITER_KEY_MAX]; /* K, "<len>:<name><client>" */
    size_t kl;
    sluice_ruleset rules;      /* the ones that decide */
    sluice_override_kind kind; /* the client's override (NONE: none) */
    sl_value v, over;          /* what a read read */
    int64_t sent;              /* the keep-alive the read sends (names.h) */
    bool again;                /* the second read */
    sluice_status failed; /* the read failed: decided without the backend */
    sl_policy pol;        /* the limiter's policy, when it has one (NAME) */
    bool defined;         /* a define from the limits file was tried */
    sl_define *def;       /* the define under way (DEFINED), or NULL */
    uint64_t since;       /* the limits file's define events at the read */
    sl_request *send0;    /* the call's own send and res, the define's */
    sluice_result *res0;  /* in their place meanwhile */
} sl_pipe_name;

typedef struct sl_pipe {
    sluice *sl;
    sl_pipe_state state;
    bool many;     /* a batch call: n requests, no reservation plan */
    bool may_wait; /* blocking: a miss may wait for its key's batch */
    bool answered; /* a single call: out set before anything was sent */
    bool settled;  /* a batch of a key was answered (parked calls go on) */
    size_t n;
    sl_request *reqs;   /* a single call: its request (reqs[0]) */
    sluice_result *out; /* n answers */
    /* n: the rules each answer's request exceeded (sluice_violated), its
     * decision's pointer (sl_decision.violated); a single call's is
     * violated1. */
    uint8_t *violated;
    uint8_t violated1;
    sluice_status st; /* a single call's: the request's status until
                         ANSWER, then the call's */
    /* The round trip at hand. */
    sl_request *send; /* room for 3 (a single call) or n */
    sluice_result *res;
    size_t *map; /* a batch: send[k] is its request map[k] */
    size_t nsend;
    sluice_status sent_st;
    char *send_err;
    char *err; /* the call's message, SL_ERR_LEN bytes */
    sl_rsv_plan plan;
    /* A batch: its first request refused, and that one's message. */
    sluice_status first;
    char *first_msg;
    const sluice_request *batch; /* the caller's requests (on the loop,
                                    the call's copies), until answered */
    int64_t batch_now;           /* a batch's time */
    const sl_policy *pol;        /* a batch's policy (the handle's, or the
                                    call's) */
    int64_t t0;                  /* the counters' start */
    int64_t began;               /* monotonic ms: the budget's start */
    int64_t wait_until; /* a waiting acquire's deadline (monotonic), or 0 */
    int64_t wake_at;    /* SLEEP, PARK: until when (monotonic ms) */
    sl_pipe_name *name; /* NULL: a decision on a key */
    /* A settle's: the answer its acquire got, which says where it was
     * charged (NULL: on the backend, sluice_settle). */
    const sluice_result *after;
    bool uncounted;           /* settled nowhere: nothing to count */
    char scratch[SL_ERR_LEN]; /* a refill's message: not the call's */
} sl_pipe;

/* The job marks of p's round trip at hand: a define's own (it sends
 * more than a call's room of 3), else own. */
static inline unsigned char *sl_pipe_marks(const sl_pipe *p, unsigned char *own)
{
    return p->state == SL_PIPE_DEFINED ? p->name->def->marks : own;
}

/* The time a request carries: the handle's clock, or -1 for the
 * server's. */
static inline int64_t sl_pipe_now(const sluice *sl)
{
    if (sl->url.cfg.server_clock)
        return -1;
    return sl->url.cfg.clock(sl->url.cfg.clock_ctx);
}
/* Checks one request and fills r, stamped now (call.h, sl_call_prepare,
 * says how); sl_pipe_prepare at the handle's time. Every decision begins
 * here: inline. */
sluice_status sl_pipe_prepare_at(sluice *sl, sl_op op, const void *key,
                                 size_t key_len, const sluice_ruleset *rules,
                                 int64_t cost, int64_t now, sl_request *r,
                                 char *err);
static inline sluice_status sl_pipe_prepare(sluice *sl, sl_op op,
                                            const void *key, size_t key_len,
                                            const sluice_ruleset *rules,
                                            int64_t cost, sl_request *r,
                                            char *err)
{
    return sl_pipe_prepare_at(sl, op, key, key_len, rules, cost,
                              sl_pipe_now(sl), r, err);
}
/* A call refused before it ran (st): its request and the call counted. */
void sl_pipe_count(sluice *sl, sl_op op, sluice_status st);
/* A call's own policy in checked and laid over the handle's into *out,
 * and what it asks of the handle made (sl_policy_provide): SLUICE_OK, or
 * the call refused (counted, the message in err). */
sluice_status sl_pipe_policy(sluice *sl, sl_op op, const sluice_policy *in,
                             sl_policy *out, char *err);

/* Sets p up for the single request reqs[0] (prepared), answered into
 * out; send and res have room for 3. Then, for a decision by name,
 * sl_pipe_by_name. Inline: every decision begins here. */
static inline void sl_pipe_one(sl_pipe *p, sluice *sl, sl_request *reqs,
                               sluice_result *out, sl_request *send,
                               sluice_result *res, char *err)
{
    /* Only what every stage reads before it sets it: a decision runs
     * here, and each store counts (sluice-bench --instructions). */
    p->sl = sl;
    p->state = SL_PIPE_LOCAL;
    p->many = false;
    p->may_wait = !sl->eng.attached;
    p->answered = false;
    p->settled = false;
    p->n = 1;
    p->reqs = reqs;
    p->out = out;
    p->violated = &p->violated1;
    p->violated1 = 0;
    if (reqs != NULL && sl_op_decides(reqs[0].op))
        reqs[0].decide.violated = p->violated;
    p->st = SLUICE_OK;
    p->send = send;
    p->res = res;
    p->err = err;
    p->t0 = sl_stats_start(&sl->stats);
    p->began = 0;
    p->wait_until = 0;
    p->name = NULL;
    p->after = NULL;
    p->uncounted = false;
}

/* p's request is the decision by name nm (set up by sl_pipe_name_set): its
 * rules come first. */
void sl_pipe_by_name(sl_pipe *p, sl_pipe_name *nm);
/* A decision by name's request: the name and client checked, nm filled,
 * r prepared on K with the limiters' prefix (its rules still to come).
 * Bad input is counted and returned, its message in err. */
sluice_status sl_pipe_name_prepare(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, const void *client,
                                   size_t client_len, int64_t cost,
                                   sl_pipe_name *nm, sl_request *r, char *err);
/* Sets p up for the batch reqs (n) decided by the policy pol (NULL: the
 * handle's), answered into out, the rules each exceeded into violated
 * (n); send, res and map have room for n. */
void sl_pipe_many(sl_pipe *p, sluice *sl, const sluice_request *reqs, size_t n,
                  const sl_policy *pol, sluice_result *out, uint8_t *violated,
                  sl_request *send, sluice_result *res, size_t *map,
                  char *first_msg, char *err);

/* The stage of each state (pipeline.c): the order of the stages, as
 * data. */
extern sl_pipe_need (*const sl_pipe_stages[SL_PIPE_DONE + 1])(sl_pipe *p);
/* Moves p on until its driver must act; SL_NEED_DONE once answered.
 * Inline: a decision runs it twice. */
static inline sl_pipe_need sl_pipe_run(sl_pipe *p)
{
    sl_pipe_need need;

    while ((need = sl_pipe_stages[p->state](p)) == SL_NEED_GO)
        ;
    return need;
}
/* p is answered (st its call's status): what decided each answer,
 * recorded where sluice_violated() and sluice_last_decision() read it in
 * this thread. */
void sl_pipe_record(const sl_pipe *p);

/* The handle closes while p sleeps or is parked: p's answer now (a
 * waiting acquire's last, or the failure of one that never was sent). */
void sl_pipe_abandon(sl_pipe *p);

/* A settle's head, blocking or on the loop: sl not NULL, acquired (the
 * acquire's answer) given if need_acquired, reserved and actual each
 * 0..10^9 (else SLUICE_ECOST naming it); *op and *amount are then the
 * refund of what was reserved and not used, or the forced charge of the
 * excess. The message in the thread's buffer. */
sluice_status sl_pipe_settle(sluice *sl, const sluice_result *acquired,
                             bool need_acquired, int64_t reserved,
                             int64_t actual, sl_op *op, int64_t *amount);
/* The longest wait an acquire may ask for, and its check (err says). */
bool sl_pipe_bad_wait(int64_t wait_ms, char *err);

#endif /* SL_PIPELINE_H */
