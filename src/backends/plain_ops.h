/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_ops.h - the table of operations on the rules' state, {emit,
 * parse, undo} (plain_ops.c), that the steps (plain.c) run: what each
 * sends and how exactly its replies are read, through the reply cursor
 * (plain_reply.h). */
#ifndef SL_PLAIN_OPS_H
#define SL_PLAIN_OPS_H

#include "backends/plain_reply.h"

/* ------------------------------------------------- the tables of ops */

/* One operation on one kind of state: emit queues its commands (returns
 * how many), parse reads exactly their replies through the cursor (false:
 * not what sluice wrote), undo queues the follow-up once decided: what
 * takes back the part of a charge not granted, and any tidying due. A
 * NULL member has nothing to do. i is the rule's index. */
typedef struct plain_op {
    size_t (*emit)(sl_plain *p, unit *u, size_t i);
    bool (*parse)(sl_plain *p, unit *u, size_t i, sl_cursor *c);
    size_t (*undo)(sl_plain *p, unit *u, size_t i);
} plain_op;

/* plain_ops.c: a unit's block (its reads, or its optimistic charge),
 * its parse into views, its follow-up, a watched acquire's writes and a
 * refund's, and the WATCH before the reads. */
size_t sl_plain_ops_block(sl_plain *p, unit *u);
sluice_status sl_plain_ops_parse(sl_plain *p, unit *u, redisReply **reps,
                                 char *err, size_t err_len);
size_t sl_plain_ops_follow(sl_plain *p, unit *u);
size_t sl_plain_ops_writes(sl_plain *p, unit *u);
void sl_plain_ops_refund_views(unit *u);
size_t sl_plain_ops_refund_writes(sl_plain *p, unit *u);
void sl_plain_ops_watch(sl_plain *p, unit *u);
/* A forced charge (SEMANTICS.md, "settle") on the views read: what each
 * rule gains, and the views become the state after it (false: out of
 * memory for a log's entry). Its writes, in MULTI/EXEC. */
bool sl_plain_ops_force_views(unit *u);
size_t sl_plain_ops_force_writes(sl_plain *p, unit *u);
/* A forced charge made at once, as an optimistic acquire's (twemproxy://),
 * on the views read before it: SLUICE_OK when every rule takes all of it
 * (the views become the state after it), else SLUICE_EUNSUPPORTED (a rule
 * would pass its ceiling: the follow-up takes it all back) or
 * SLUICE_ENOMEM. */
sluice_status sl_plain_ops_force_judge(unit *u);
/* Where a handle's log members start counting (random). */
uint64_t sl_plain_ops_seed(const void *p);

/* For the fuzzer: reads the n replies of one request's block (a peek's
 * when read_mode, else an optimistic acquire's) into state views and
 * decides on them, as a decision does. The caller keeps reps. */
sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len);

#endif /* SL_PLAIN_OPS_H */
