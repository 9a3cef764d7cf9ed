/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.h - decisions from plain Redis commands, without scripts: shared by
 * redis+multi:// (each request in MULTI/EXEC) and twemproxy:// (a bare
 * pipeline of commands the proxy can parse). */
#ifndef SL_PLAIN_H
#define SL_PLAIN_H

#include "backend.h"
#include "conn.h"

typedef struct sl_plain {
    sl_conn conn;
    const sl_url *url;
    const char *name; /* "multi" or "twemproxy", for messages */
    bool multi;       /* MULTI/EXEC and WATCH available */
    bool unwatch;     /* a WATCH is pending: UNWATCH before the next use */
    uint64_t nonce;   /* makes log members unique */
} sl_plain;

sluice_status sl_plain_open(const sl_url *url, bool multi, void **state,
                            char *err, size_t err_len);
void sl_plain_close(void *state);
uint64_t sl_plain_round_trips(void *state);
sluice_status sl_plain_decide(void *state, const sl_request *reqs, size_t n,
                              sluice_result *out, char *err, size_t err_len);

/* For the fuzzer: reads the n replies of one request's block (a peek's
 * when read_mode, else an optimistic acquire's) into state views and
 * decides on them, as a decision does. The caller keeps reps. */
sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len);

#endif /* SL_PLAIN_H */
