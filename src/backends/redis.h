/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.h - what the Redis backends (evalsha, cluster, the plain family)
 * share above the connection (net/conn.h): a connection opened on the
 * handle's engine, the statuses that error replies mean, and the DEL of a
 * reset. These keep the sl_conn_ names they had in conn.c, which the
 * backends call by. */
#ifndef SL_BACKENDS_REDIS_H
#define SL_BACKENDS_REDIS_H

#include "backend.h"
#include "net/conn.h"

/* Prepares a connection to ep for the backend who, registered with eng
 * (its loop drives it); eng NULL: used on its own, blocking. */
void sl_conn_init(sl_conn *cn, const sl_endpoint *ep, const sl_config *cfg,
                  const char *who, sl_engine *eng);
/* For a sentinel URL: cn (sl_conn_init on url->ep) asks url's sentinels
 * where the master is, and its subscription to their failovers goes on
 * eng. SLUICE_ENOMEM or OK. */
sluice_status sl_conn_init_sentinels(sl_conn *cn, const sl_url *url,
                                     sl_engine *eng);

/* SLUICE_OK unless rep is an error reply: then the status it means, with
 * the message. A proxy's "cannot reach the server" errors mean the backend
 * is unavailable (SLUICE_EIO, SLUICE_ETIMEOUT), so that fail policies
 * apply; any other error is SLUICE_ESERVER. */
sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len);

/* Queues one DEL of every key that a reset of rq at its time forgets
 * (sl_key_reset_set): shared by every backend that resets on the client's
 * clock. */
sluice_status sl_conn_append_reset(sl_conn *cn, const char *prefix,
                                   const sl_request *rq, char *err,
                                   size_t err_len);

#endif /* SL_BACKENDS_REDIS_H */
