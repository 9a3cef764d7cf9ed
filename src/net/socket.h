/* SPDX-License-Identifier: BSD-3-Clause */
/* socket.h - the socket under a connection: the server's addresses (a
 * host name looked up on a thread, never blocking the caller), a
 * non-blocking connect, reads and writes that never raise SIGPIPE, and the
 * backoff after failures in a row. No state machine: the connection
 * (conn.h) decides what follows each outcome. */
#ifndef SL_NET_SOCKET_H
#define SL_NET_SOCKET_H

#include "internal.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#define SL_SOCKET_ADDRS 4

/* The addresses of a server, at most SL_SOCKET_ADDRS. */
typedef struct sl_addrs {
    struct sockaddr_storage addrs[SL_SOCKET_ADDRS];
    socklen_t lens[SL_SOCKET_ADDRS];
    size_t n;
} sl_addrs;

/* A host name's lookup under way on its own thread. */
typedef struct sl_lookup sl_lookup;

/* The addresses of a socket's path or a numeric host, found without a
 * lookup: true. False: the host is a name (sl_lookup_start). */
bool sl_socket_addrs_now(const sl_endpoint *ep, sl_addrs *a);
/* Starts looking the host up on a thread; *fd is the end of a socket pair
 * that turns readable when it is done. SLUICE_OK, or the failure with why
 * (nothing to free). */
sluice_status sl_lookup_start(const sl_endpoint *ep, sl_lookup **lk, int *fd,
                              char *why, size_t why_len);
/* After fd (the lookup's end) turned readable: -1 not done yet; 0 the
 * addresses are in *a; 1 the lookup failed, why says how. The caller
 * then closes fd and lets go of lk. */
int sl_lookup_finish(sl_lookup *lk, int fd, sl_addrs *a, char *why,
                     size_t why_len);
/* Lets go of a lookup (NULL is fine); its thread lets go when done. */
void sl_lookup_unref(sl_lookup *lk);

/* Opens a non-blocking socket to address i of a and starts connect():
 * 0, connected, or EINPROGRESS, under way (writable when done), with the
 * socket in *fd. Else the errno, *fd -1, and *next whether another
 * address may do better (connect() failed, not socket()). A Unix-domain
 * socket whose backlog is full is tried again until deadline. */
int sl_socket_connect(const sl_addrs *a, size_t i, int64_t deadline, int *fd,
                      bool *next);
/* The outcome of a connect() under way: 0, or the errno. */
int sl_socket_error(int fd);

/* What a read or a write that did not go through means (errno): EINTR
 * tries again, EAGAIN is -1, a failure -2 with why. Out of the way of the
 * inline calls below, which run for every reply and every command. */
ssize_t sl_socket_read_failed(int fd, char *buf, size_t len, char *why,
                              size_t why_len);
ssize_t sl_socket_write_failed(int fd, const char *buf, size_t len, char *why,
                               size_t why_len);

/* Reads up to len bytes: > 0 that many, 0 the peer closed, -1 nothing yet,
 * -2 a failure (why). */
static inline ssize_t sl_socket_read(int fd, char *buf, size_t len, char *why,
                                     size_t why_len)
{
    ssize_t n = recv(fd, buf, len, 0);

    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return -1; /* how every round of reads ends */
    return sl_socket_read_failed(fd, buf, len, why, why_len);
}

/* Writes up to len bytes: > 0 that many, -1 the socket is full (wait for
 * it to be writable), -2 a failure (why). With send()'s MSG_NOSIGNAL: a
 * write on a connection the server has closed must not raise SIGPIPE,
 * whose default action kills the host process. */
static inline ssize_t sl_socket_write(int fd, const char *buf, size_t len,
                                      char *why, size_t why_len)
{
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

    return n >= 0 ? n : sl_socket_write_failed(fd, buf, len, why, why_len);
}
/* For an idle connection: 0 nothing to read, 1 something (bytes or an
 * end), -1 an error or a hang-up. */
int sl_socket_readable(int fd);
/* Whether what is readable on an idle socket is nothing after all: EOF,
 * an error or stray bytes are not. */
bool sl_socket_still_idle(int fd);

/* Waits until fd is ready for events or the deadline (monotonic ms)
 * passes: poll's revents, 0 when the deadline passed, -1 an error. */
int sl_socket_wait(int fd, short events, int64_t deadline);

/* How long to wait before the next connect after failures in a row. */
int64_t sl_socket_backoff_ms(unsigned failures);

#endif /* SL_NET_SOCKET_H */
