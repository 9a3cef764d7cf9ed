/* SPDX-License-Identifier: BSD-3-Clause */
/* tls.h - TLS over a connection's socket, with OpenSSL: the URL's
 * settings checked when a handle opens, the handshake with the server's
 * name verified, and reads and writes through the TLS session. An SSL
 * session is a void * here, so that no one above needs OpenSSL's headers. */
#ifndef SL_NET_TLS_H
#define SL_NET_TLS_H

#include "internal.h"

#include <sys/types.h>

/* Checks what a connection will need of the URL's TLS settings (its
 * files readable, its certificate and key a pair), so that a bad setting
 * is SLUICE_EURL when the handle opens, not a failure of every call. */
sluice_status sl_tls_check(const sl_url *url, char *err, size_t err_len);

/* Starts TLS on the connected socket fd, as a client of the server u
 * names: SNI, and the name or address its certificate must carry. The
 * session, or NULL with st (SLUICE_ECONNECT, SLUICE_ENOMEM) and why. */
void *sl_tls_new(const sl_endpoint *u, int fd, sluice_status *st, char *why,
                 size_t why_len);
/* Frees a session (NULL is fine) without a close_notify. */
void sl_tls_free(void *ssl);
/* One step of the handshake: 1 done, 0 not yet (*want_write: it waits for
 * the socket to be writable), -1 failed (why). */
int sl_tls_handshake(void *ssl, const sl_endpoint *u, bool *want_write,
                     char *why, size_t why_len);

/* As sl_socket_read and sl_socket_write (socket.h), through the session;
 * *want_write is set when TLS needs the socket writable to go on. */
ssize_t sl_tls_read(void *ssl, char *buf, size_t len, bool *want_write,
                    char *why, size_t why_len);
ssize_t sl_tls_write(void *ssl, const char *buf, size_t len, bool *want_write,
                     char *why, size_t why_len);
/* For an idle connection: whether the session holds bytes already
 * decrypted, and, the socket being readable, whether what came was only
 * the protocol's own (TLS 1.3 session tickets, consumed): still idle. */
bool sl_tls_pending(void *ssl);
bool sl_tls_still_idle(void *ssl);

#endif /* SL_NET_TLS_H */
