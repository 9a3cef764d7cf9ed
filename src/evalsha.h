/* SPDX-License-Identifier: BSD-3-Clause */
/* evalsha.h - the Lua backend's request and reply halves, for backends that
 * route scripts elsewhere (redis-cluster:// sends them to slot owners). */
#ifndef SL_EVALSHA_H
#define SL_EVALSHA_H

#include "backend.h"
#include "redis.h"

/* Queues one request on cn: EVALSHA (EVAL when as_eval) with the keys of
 * every rule and the request's tag, or DEL of them for a reset. */
sluice_status sl_evalsha_append(sl_conn *cn, const sl_url *url,
                                const sl_request *rq, bool as_eval,
                                uint64_t tag, char *err, size_t err_len);

/* Turns the script's reply into the composite's result. A reply whose
 * echoed tag is not `tag` is out of step: SLUICE_EPROTO, and the caller
 * must drop the connection. */
sluice_status sl_evalsha_result(const sl_request *rq, const redisReply *rep,
                                uint64_t tag, sluice_result *out, char *err,
                                size_t err_len);

#endif /* SL_EVALSHA_H */
