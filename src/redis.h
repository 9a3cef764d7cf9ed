/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.h - one hiredis connection with timeouts, AUTH and SELECT, and the
 * mapping of its failures to sluice statuses; shared by Redis backends. */
#ifndef SL_REDIS_H
#define SL_REDIS_H

#include "internal.h"

#include <hiredis/hiredis.h>

typedef struct sl_conn {
    redisContext *c;      /* NULL until connected, and after a failure */
    const sl_url *url;    /* host, port, credentials, timeouts */
    const char *who;      /* backend name, for messages */
    uint64_t round_trips; /* replies that had to wait for the network */
    uint64_t reopened;    /* idle connections found closed and reopened */
} sl_conn;

void sl_conn_init(sl_conn *cn, const sl_url *url, const char *who);
/* Connects (AUTH, SELECT, timeouts) unless already connected. */
sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len);
/* Queues one command; nothing is written until a read. */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len);
/* Writes what was queued without waiting for replies, so that several
 * connections work at once. */
sluice_status sl_conn_flush(sl_conn *cn, char *err, size_t err_len);
/* Reads one reply; a transport failure closes the connection. The caller
 * frees *rep with freeReplyObject. */
sluice_status sl_conn_read(sl_conn *cn, redisReply **rep, char *err,
                           size_t err_len);
void sl_conn_close(sl_conn *cn);
/* SLUICE_OK unless rep is an error reply: then the status it means, with
 * the message. A proxy's "cannot reach the server" errors mean the backend
 * is unavailable (SLUICE_EIO, SLUICE_ETIMEOUT), so that fail policies
 * apply; any other error is SLUICE_ESERVER. */
sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len);

struct sl_request;

/* Queues one DEL of every key that a reset of rq at its time forgets
 * (sl_key_reset_set): shared by every backend that resets on the client's
 * clock. */
sluice_status sl_conn_append_reset(sl_conn *cn, const char *prefix,
                                   const struct sl_request *rq, char *err,
                                   size_t err_len);

#endif /* SL_REDIS_H */
