/* SPDX-License-Identifier: BSD-3-Clause */
/* evalsha.h - the Lua backend's request and reply halves, for backends that
 * route scripts elsewhere (redis-cluster:// sends them to slot owners). */
#ifndef SL_EVALSHA_H
#define SL_EVALSHA_H

#include "backend.h"
#include "backends/redis.h"

#include <string.h>

/* Queues one request on cn: EVALSHA (EVAL when as_eval) with the keys of
 * every rule and the request's tag, or, for a reset on the client's clock,
 * DEL of every key the reset forgets (sl_key_reset_set). */
sluice_status sl_evalsha_append(sl_conn *cn, const sl_url *url,
                                const sl_request *rq, bool as_eval,
                                uint64_t tag, char *err, size_t err_len);

/* Turns the script's reply (the state it read and its admissions) into
 * the composite's result, computed by src/algo.c. A reply whose echoed tag
 * is not `tag`, whose values are out of range, or whose admissions differ
 * from the client's is SLUICE_EPROTO, and the caller must drop the
 * connection. */
sluice_status sl_evalsha_result(const sl_request *rq, const redisReply *rep,
                                uint64_t tag, sluice_result *out, char *err,
                                size_t err_len);

/* Whether rep answers a request sent as EVALSHA with NOSCRIPT: the server
 * lacks the script (a restart, a failover, SCRIPT FLUSH, a slot's new
 * owner), and the request goes again as EVAL, which runs it and caches
 * it. Nothing ran. */
static inline bool sl_evalsha_noscript(const redisReply *rep, bool as_eval)
{
    return !as_eval && rep->type == REDIS_REPLY_ERROR &&
           strncmp(rep->str, "NOSCRIPT", 8) == 0;
}

#endif /* SL_EVALSHA_H */
