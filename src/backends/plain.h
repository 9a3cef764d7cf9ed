/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.h - the plain family's entry points: decisions from plain Redis
 * commands, without scripts, shared by redis+multi:// (each request in
 * MULTI/EXEC) and twemproxy:// (a bare pipeline of commands the proxy can
 * parse). Works on the engine, as a chain of steps per request, so that it
 * serves the blocking calls and the event loops alike. The family's files,
 * lowest first: plain_reply.h (a request under way, the reply each command
 * must get, the reply cursor), plain_ops.h and plain_lease.h (the tables
 * of {emit, parse, undo}), plain.c (the steps, on the engine). */
#ifndef SL_PLAIN_H
#define SL_PLAIN_H

#include "backend.h"

sluice_status sl_plain_open(const sl_url *url, bool multi, sl_engine *eng,
                            void **state, char *err, size_t err_len);
void sl_plain_close(void *state);
uint64_t sl_plain_round_trips(void *state);
void sl_plain_start(void *state, sl_job *job);
void sl_plain_answered(void *state, sl_job *job, size_t i);

#endif /* SL_PLAIN_H */
