/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.h - decisions from plain Redis commands, without scripts: shared by
 * redis+multi:// (each request in MULTI/EXEC) and twemproxy:// (a bare
 * pipeline of commands the proxy can parse). Works on the engine, as a
 * chain of steps per request, so that it serves the blocking calls and
 * the event loops alike. */
#ifndef SL_PLAIN_H
#define SL_PLAIN_H

#include "backend.h"
#include "backends/redis.h"

#define SL_PLAIN_KEY_SLOTS 1024 /* the table of keys under way */

struct sl_unit;

typedef struct sl_plain {
    sl_conn conn;
    sl_engine *eng;
    const sl_url *url;
    const char *name; /* "multi" or "twemproxy", for messages */
    bool multi;       /* MULTI/EXEC and WATCH available */
    uint64_t nonce;   /* makes log members unique */
    /* Per-key order: the request under way on each key; the requests
     * after it on the same key wait in its queue. */
    struct sl_unit *keys[SL_PLAIN_KEY_SLOTS];
    /* A watched request holds the connection from its WATCH to its EXEC
     * (or UNWATCH): others' commands wait meanwhile, oldest first. */
    struct sl_unit *excl;
    struct sl_unit *held_head, *held_tail;
    bool draining;
} sl_plain;

sluice_status sl_plain_open(const sl_url *url, bool multi, sl_engine *eng,
                            void **state, char *err, size_t err_len);
void sl_plain_close(void *state);
uint64_t sl_plain_round_trips(void *state);
void sl_plain_start(void *state, sl_job *job);
void sl_plain_resume(void *state, sl_job *job);
void sl_plain_answered(void *state, sl_job *job, size_t i);

/* For the fuzzer: reads the n replies of one request's block (a peek's
 * when read_mode, else an optimistic acquire's) into state views and
 * decides on them, as a decision does. The caller keeps reps. */
sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len);

#endif /* SL_PLAIN_H */
