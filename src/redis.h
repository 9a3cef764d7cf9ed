/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.h - one connection to a Redis server, owned by sluice: a
 * non-blocking socket (TCP or a Unix-domain socket), TLS over it when the
 * URL asks, sluice's own output buffer and deadlines, and hiredis's reader
 * to parse the replies. AUTH and SELECT on connect, and the mapping of its
 * failures to sluice statuses; shared by every Redis backend. */
#ifndef SL_REDIS_H
#define SL_REDIS_H

#include "internal.h"

#include <hiredis/hiredis.h>

typedef struct sl_conn {
    int fd;              /* -1 until connected, and after a failure */
    void *ssl;           /* SSL *, when the URL asks for TLS */
    redisReader *reader; /* replies read and not yet taken */
    char *obuf;          /* commands queued and not yet written */
    size_t olen, ocap;
    const sl_url *url;    /* endpoint, credentials, TLS, timeouts */
    const char *who;      /* backend name, for messages */
    uint64_t round_trips; /* replies that had to wait for the network */
    uint64_t reopened;    /* idle connections found closed and reopened */
    /* Connect attempts that failed in a row, and the time (monotonic ms)
     * before which no new attempt is made: a server that is down costs
     * the callers an immediate SLUICE_ECONNECT, not a connect timeout
     * each, and is not hammered with connects. */
    unsigned failures;
    int64_t retry_at;
    char last_failure[SL_ERR_LEN];
} sl_conn;

void sl_conn_init(sl_conn *cn, const sl_url *url, const char *who);
/* Whether the connection is open (a failure closes it). */
bool sl_conn_is_open(const sl_conn *cn);
/* Connects (TLS handshake, AUTH, SELECT) unless already connected. */
sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len);
/* Queues one command; nothing is written until a flush or a read. */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len);
/* Queues one command formatted as hiredis's redisCommand formats it (%s,
 * %b with a length, %lld, ...). */
sluice_status sl_conn_appendf(sl_conn *cn, char *err, size_t err_len,
                              const char *fmt, ...);
/* Writes what was queued without waiting for replies, so that several
 * connections work at once. */
sluice_status sl_conn_flush(sl_conn *cn, char *err, size_t err_len);
/* Reads one reply; a transport failure closes the connection. The caller
 * frees *rep with freeReplyObject. */
sluice_status sl_conn_read(sl_conn *cn, redisReply **rep, char *err,
                           size_t err_len);
/* Closes the connection and frees its buffers; the next ensure reopens. */
void sl_conn_close(sl_conn *cn);
/* SLUICE_OK unless rep is an error reply: then the status it means, with
 * the message. A proxy's "cannot reach the server" errors mean the backend
 * is unavailable (SLUICE_EIO, SLUICE_ETIMEOUT), so that fail policies
 * apply; any other error is SLUICE_ESERVER. */
sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len);
/* Checks what a connection will need of the URL's TLS settings (its
 * files readable, its certificate and key a pair), so that a bad setting
 * is SLUICE_EURL when the handle opens, not a failure of every call. */
sluice_status sl_tls_check(const sl_url *url, char *err, size_t err_len);

struct sl_request;

/* Queues one DEL of every key that a reset of rq at its time forgets
 * (sl_key_reset_set): shared by every backend that resets on the client's
 * clock. */
sluice_status sl_conn_append_reset(sl_conn *cn, const char *prefix,
                                   const struct sl_request *rq, char *err,
                                   size_t err_len);

#endif /* SL_REDIS_H */
