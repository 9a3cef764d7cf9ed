/* SPDX-License-Identifier: BSD-3-Clause */
/* socket.c - the socket under a connection: addresses (a host name looked
 * up on a thread), a non-blocking connect, reads and writes without
 * SIGPIPE, and the backoff after failures in a row. */
#include "net/socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------- addresses */

/* The addresses of res, at most SL_SOCKET_ADDRS. */
static size_t take_addrs(const struct addrinfo *res, sl_addrs *a)
{
    const struct addrinfo *ai;
    size_t n = 0;

    for (ai = res; ai != NULL && n < SL_SOCKET_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(a->addrs[0]))
            continue;
        memcpy(&a->addrs[n], ai->ai_addr, ai->ai_addrlen);
        a->lens[n++] = ai->ai_addrlen;
    }
    return n;
}

bool sl_socket_addrs_now(const sl_endpoint *ep, sl_addrs *a)
{
    struct addrinfo hints, *res = NULL;
    char port[16];

    if (ep->socket[0] != '\0') {
        struct sockaddr_un *sun = (struct sockaddr_un *)&a->addrs[0];

        memset(sun, 0, sizeof(*sun));
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, ep->socket, strlen(ep->socket) + 1);
        a->lens[0] = sizeof(*sun);
        a->n = 1;
        return true;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
    snprintf(port, sizeof(port), "%d", ep->port);
    if (getaddrinfo(ep->host, port, &hints, &res) == 0) {
        a->n = take_addrs(res, a);
        freeaddrinfo(res);
        if (a->n > 0)
            return true;
    }
    return false;
}

/* A host name's lookup, off the caller's thread: getaddrinfo() may block
 * for seconds (a resolver that does not answer), which must cost neither
 * the event loop nor a call's deadline. The thread writes one byte to its
 * end of a socket pair when done; the connection watches the other end as
 * its socket, under its connect deadline. Whoever lets go of it last (the
 * thread, or the connection, closed meanwhile) frees it. */
struct sl_lookup {
    atomic_int refs;
    atomic_bool done;
    int fd; /* the thread's end */
    char host[sizeof(((sl_endpoint *)0)->host)];
    char port[16];
    int rc; /* getaddrinfo's */
    sl_addrs found;
};

void sl_lookup_unref(sl_lookup *lk)
{
    if (lk != NULL && atomic_fetch_sub(&lk->refs, 1) == 1) {
        if (lk->fd >= 0)
            close(lk->fd);
        sl_free(lk);
    }
}

static void *lookup_run(void *arg)
{
    sl_lookup *lk = arg;
    struct addrinfo hints, *res = NULL;
    char one = 1;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    lk->rc = getaddrinfo(lk->host, lk->port, &hints, &res);
    if (lk->rc == 0) {
        lk->found.n = take_addrs(res, &lk->found);
        freeaddrinfo(res);
    }
    atomic_store(&lk->done, true);
    if (send(lk->fd, &one, 1, MSG_NOSIGNAL) < 0) {
        /* The connection closed meanwhile: nobody waits. */
    }
    sl_lookup_unref(lk);
    return NULL;
}

sluice_status sl_lookup_start(const sl_endpoint *ep, sl_lookup **out, int *fd,
                              char *why, size_t why_len)
{
    sl_lookup *lk = sl_calloc(1, sizeof(*lk));
    pthread_attr_t attr;
    pthread_t th;
    int pair[2], rc;

    if (lk == NULL) {
        sl_errf(why, why_len, "out of memory for a host name lookup");
        return SLUICE_ENOMEM;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
        sl_free(lk);
        sl_errf(why, why_len, "cannot be looked up: socketpair: %s",
                strerror(errno));
        return SLUICE_ECONNECT;
    }
    snprintf(lk->host, sizeof(lk->host), "%s", ep->host);
    snprintf(lk->port, sizeof(lk->port), "%d", ep->port);
    lk->fd = pair[1];
    atomic_init(&lk->refs, 2);
    atomic_init(&lk->done, false);
    fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, lookup_run, lk);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(pair[0]);
        close(pair[1]);
        sl_free(lk);
        sl_errf(why, why_len, "cannot be looked up: no thread: %s",
                strerror(rc));
        return SLUICE_ECONNECT;
    }
    *out = lk;
    *fd = pair[0];
    return SLUICE_OK;
}

int sl_lookup_finish(sl_lookup *lk, int fd, sl_addrs *a, char *why,
                     size_t why_len)
{
    char byte;

    if (recv(fd, &byte, 1, 0) < 0 && !atomic_load(&lk->done))
        return -1; /* not yet */
    if (!atomic_load(&lk->done))
        return -1;
    if (lk->rc != 0 || lk->found.n == 0) {
        snprintf(why, why_len, "%s",
                 lk->rc != 0 ? gai_strerror(lk->rc) : "no address");
        return 1;
    }
    *a = lk->found;
    return 0;
}

/* ----------------------------------------------------------- connect */

int sl_socket_connect(const sl_addrs *a, size_t i, int64_t deadline, int *fd,
                      bool *next)
{
    const struct sockaddr *sa = (const struct sockaddr *)&a->addrs[i];
    int s =
        socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc, e;

    *fd = -1;
    *next = false;
    if (s < 0)
        return errno;
    /* A Unix-domain socket whose backlog is full says EAGAIN, and the
     * connect has not started: try again, briefly, until the deadline. */
    while ((rc = connect(s, sa, a->lens[i])) < 0 && sa->sa_family == AF_UNIX &&
           errno == EAGAIN && sl_mono_ms() < deadline) {
        struct timespec ms = {0, 1000000};

        nanosleep(&ms, NULL);
    }
    if (rc == 0 || errno == EINPROGRESS || errno == EINTR) {
        *fd = s;
        return rc == 0 ? 0 : EINPROGRESS; /* writable when done */
    }
    e = errno == EAGAIN ? ETIMEDOUT : errno;
    close(s);
    *next = true;
    return e;
}

int sl_socket_error(int fd)
{
    int soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    return soerr;
}

/* ---------------------------------------------------- reads, writes */

ssize_t sl_socket_read_failed(int fd, char *buf, size_t len, char *why,
                              size_t why_len)
{
    for (;;) {
        ssize_t n;

        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -1;
        if (errno != EINTR) {
            snprintf(why, why_len, "%s", strerror(errno));
            return -2;
        }
        if ((n = recv(fd, buf, len, 0)) >= 0)
            return n;
    }
}

ssize_t sl_socket_write_failed(int fd, const char *buf, size_t len, char *why,
                               size_t why_len)
{
    for (;;) {
        ssize_t n;

        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -1;
        if (errno != EINTR) {
            snprintf(why, why_len, "%s", strerror(errno));
            return -2;
        }
        if ((n = send(fd, buf, len, MSG_NOSIGNAL)) >= 0)
            return n;
    }
}

int sl_socket_readable(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};

    if (poll(&pfd, 1, 0) == 0)
        return 0;
    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
        return -1;
    return 1;
}

bool sl_socket_still_idle(int fd)
{
    char byte;

    /* Readable: EOF (0), an error (-1), or stray bytes; all unsound. */
    return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
           (errno == EAGAIN || errno == EWOULDBLOCK);
}

int sl_socket_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int64_t left = deadline - sl_mono_ms();
        int rc;

        if (left < 0)
            left = 0;
        rc = poll(&pfd, 1, (int)left);
        if (rc > 0)
            return pfd.revents;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* The second failure in a row waits 50 ms, then twice as long each time,
 * up to a second. */
int64_t sl_socket_backoff_ms(unsigned failures)
{
    if (failures < 2)
        return 0;
    return failures >= 7 ? 1000 : 50LL << (failures - 2);
}
