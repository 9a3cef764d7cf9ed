/* SPDX-License-Identifier: BSD-3-Clause */
/* reserve.h - reservations (opt-in: reserve_ms=H): an acquire on a key
 * this handle asks often takes, in the same round trip, a batch of units
 * (an acquire at most after it), and later acquires on that key and
 * ruleset are admitted from them without a round trip. Every unit admitted
 * was charged first; a unit is used at most h ms after its charge and
 * never in another window than its own (docs/SEMANTICS.md,
 * "Reservations", is the definition; this file is one implementation).
 *
 * The pipeline (call.c) asks in three steps: sl_reserve_before (admitted
 * here?), then, on a miss the deny cache did not answer, sl_reserve_plan
 * (the requests to send: a refund of what is held before the acquire, a
 * batch after it), and sl_reserve_after with their answers.
 *
 * Bounded: SL_RSV_SETS sets of SL_RSV_WAYS entries chosen by the key, each
 * set with its own mutex, so that threads on different keys rarely meet.
 * An entry holding units is never given up for another key: that key
 * does not reserve until a way is free.
 *
 * The table is made at open (reserve_ms=H), or later by the first policy
 * that asks for it (sl_reserve_enable), then kept. The hold and the share
 * are each request's policy's: only acquires whose policy has a hold
 * reserve; a reset drops the key's units whatever its policy. */
#ifndef SL_RESERVE_H
#define SL_RESERVE_H

#include "request.h"

#include <pthread.h>
#include <stdatomic.h>

#define SL_RSV_SETS 256
#define SL_RSV_WAYS 4

typedef struct sl_rsv_entry sl_rsv_entry;

typedef struct sl_rsv_set {
    pthread_mutex_t mu;
    pthread_cond_t settled; /* a batch of the set was answered */
    sl_rsv_entry *ways;     /* SL_RSV_WAYS */
} sl_rsv_set;

typedef struct sl_reserve {
    atomic_bool ready; /* made: sets is set, and stays */
    sl_rsv_set *sets;
    bool server_clock;
    bool window_refunds; /* the backend takes refunds of fixed and sliding
                            rules (not redis+multi://, twemproxy://) */
    atomic_uint_fast64_t admitted, batches, asked, granted, refunded, lapsed;
} sl_reserve;

/* A miss's plan: what sl_reserve_plan added around the request, and the
 * entry it concerns (checked again by generation: it may have changed
 * hands meanwhile). */
typedef struct sl_rsv_plan {
    sl_rsv_entry *e; /* NULL: nothing to settle */
    sl_rsv_set *set;
    uint64_t gen;
    int64_t now;  /* the request's time on the handle's clock */
    int64_t hold; /* the ruleset's hold h and cap c */
    int64_t cap;
    int64_t refund;  /* units given back before the request */
    int64_t ask;     /* units asked after it */
    int64_t cost;    /* the request's */
    int64_t refill;  /* an admission's refill: units asked alone */
    bool park;       /* a miss that a batch in flight could cover: a call
                        on the loop waits for it (sl_reserve_use) */
    int64_t granted; /* the batch's answer */
    size_t main;     /* the request's place among those sent */
    size_t n;        /* requests sent */
} sl_rsv_plan;

/* window_refunds: whether the backend takes refunds of fixed and sliding
 * rules; where it does not, a lot of such rules lives to its window's end
 * rather than the hold (docs/SEMANTICS.md, "Lots"). */
sluice_status sl_reserve_init(sl_reserve *rv, const sl_config *cfg,
                              bool window_refunds);
/* Makes the table unless it is made: its callers take turns (the
 * handle's make_mu); other threads may use it meanwhile. */
sluice_status sl_reserve_enable(sl_reserve *rv);
void sl_reserve_free(sl_reserve *rv);
static inline bool sl_reserve_on(const sl_reserve *rv)
{
    return atomic_load_explicit(&rv->ready, memory_order_acquire);
}

/* Before the deny cache: an acquire admitted from the key's reservation
 * fills *out (status SLUICE_RESERVED) and returns true; p->e is then set
 * when the handle should refill the key's reservation (sl_reserve_refill)
 * before the call returns. A reset drops the
 * key's reservations (their units lapse: the reset forgot them). Either
 * way the entry's count of the key's acquires is kept; *p is made ready
 * for sl_reserve_plan. may_wait (a blocking call): when the key has a
 * batch in flight that could cover it, the call waits for that batch's
 * answer (at most the call's timeout) rather than go to the backend too:
 * threads on a hot key share one round trip. Without may_wait, such a
 * miss sets p->park: a call on the loop parks until a batch is answered
 * (sl_reserve_settled says when), then asks again. */
bool sl_reserve_use(sl_reserve *rv, const sl_config *cfg, const sl_request *r,
                    bool may_wait, sluice_result *out, sl_rsv_plan *p);
static inline bool sl_reserve_before(sl_reserve *rv, const sl_config *cfg,
                                     const sl_request *r, bool may_wait,
                                     sluice_result *out, sl_rsv_plan *p)
{
    p->e = NULL;
    p->refill = 0;
    p->park = false;
    return sl_reserve_on(rv) && sl_reserve_use(rv, cfg, r, may_wait, out, p);
}
/* After an admission here that left p->e set: the refill to send, alone
 * (its answer changes nothing of the admission's), into rs[0]. Returns 1. */
size_t sl_reserve_refill(const sl_request *r, sl_rsv_plan *p, sl_request *rs);
/* A refill the caller does not send (a batch call's). */
void sl_reserve_cancel(sl_rsv_plan *p);
/* A miss: writes the requests to send into rs (room for 3): a refund of
 * the units held before r when they can be given back, r itself (at
 * p->main), and a batch after it when the key is hot. Returns how many. */
size_t sl_reserve_plan(sl_reserve *rv, const sl_request *r, sl_rsv_plan *p,
                       sl_request *rs);
/* The answers to what the plan sent (st: the call's status; res: p->n
 * results): the batch's units kept, the counters counted. A denied
 * acquire that the key's lots cover once its answer came (a batch of
 * another call's landed meanwhile; its own batch granted nothing) is
 * admitted from them: its answer in
 * *rescue. Returns SL_RSV_SETTLED when a batch was answered (parked calls
 * may go on), | SL_RSV_RESCUED. */
#define SL_RSV_SETTLED 1
#define SL_RSV_RESCUED 2
int sl_reserve_after(sl_reserve *rv, sl_rsv_plan *p, sluice_status st,
                     const sluice_result *res, sluice_result *rescue);

/* Closing: refunds of every reservation that can be given back at now,
 * written into rs (room for max, pointing into the entries, valid until
 * sl_reserve_free); the other units lapse. Returns how many. Then
 * sl_reserve_closed with their answers. */
size_t sl_reserve_leftovers(sl_reserve *rv, int64_t now, sl_request *rs,
                            size_t max);
void sl_reserve_closed(sl_reserve *rv, const sl_request *rs, size_t n,
                       sluice_status st, const sluice_result *res);

/* The counters, into the public struct's fields. */
void sl_reserve_read(const sl_reserve *rv, sluice_stats *out);

#endif /* SL_RESERVE_H */
