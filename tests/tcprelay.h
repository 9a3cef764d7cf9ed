/* SPDX-License-Identifier: BSD-3-Clause */
/* tcprelay.h - a TCP relay on a thread, between a client and one real
 * server, that can cut the connections it carries without closing them:
 * from then on nothing passes either way and neither end is told, as
 * when the server's host is gone without a reset or a stateful firewall
 * forgot the connection. Connections made after the cut are relayed as
 * before. For the tests of a client's health checks. */
#ifndef SL_TCPRELAY_H
#define SL_TCPRELAY_H

#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define TR_PAIRS 64

typedef struct tcprelay {
    int lfd, port, target; /* listening socket, its port, the server's */
    int a[TR_PAIRS], b[TR_PAIRS];
    bool cut[TR_PAIRS]; /* held open, never read again */
    int n;
    atomic_int cuts, stop;
    int seen_cuts;
    pthread_t th;
} tcprelay;

static inline int tr_connect(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Copies what from has to to; false at its end or on an error. */
static inline bool tr_copy(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof(buf)), off = 0;

    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    while (off < n) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));

        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static inline void tr_drop(tcprelay *r, int k)
{
    close(r->a[k]);
    close(r->b[k]);
    r->n--;
    r->a[k] = r->a[r->n];
    r->b[k] = r->b[r->n];
    r->cut[k] = r->cut[r->n];
}

static inline void *tr_run(void *arg)
{
    tcprelay *r = arg;

    while (!atomic_load(&r->stop)) {
        struct pollfd p[1 + 2 * TR_PAIRS];
        int of[1 + 2 * TR_PAIRS], np = 1, k, c = atomic_load(&r->cuts);

        if (c != r->seen_cuts) {
            for (k = 0; k < r->n; k++)
                r->cut[k] = true;
            r->seen_cuts = c;
        }
        p[0].fd = r->lfd;
        p[0].events = POLLIN;
        for (k = 0; k < r->n; k++) {
            if (r->cut[k])
                continue;
            p[np].fd = r->a[k];
            p[np].events = POLLIN;
            of[np++] = k;
            p[np].fd = r->b[k];
            p[np].events = POLLIN;
            of[np++] = k;
        }
        if (poll(p, (nfds_t)np, 20) <= 0)
            continue;
        if ((p[0].revents & POLLIN) && r->n < TR_PAIRS) {
            int cfd = accept(r->lfd, NULL, NULL), sfd;

            if (cfd >= 0 && (sfd = tr_connect(r->target)) >= 0) {
                r->a[r->n] = cfd;
                r->b[r->n] = sfd;
                r->cut[r->n++] = false;
            } else if (cfd >= 0) {
                close(cfd);
            }
            continue; /* the pairs moved */
        }
        for (k = 1; k < np; k++) {
            int pair = of[k], from = p[k].fd;
            int to = from == r->a[pair] ? r->b[pair] : r->a[pair];

            if (p[k].revents != 0 && !tr_copy(from, to)) {
                tr_drop(r, pair);
                break; /* the pairs moved */
            }
        }
    }
    while (r->n > 0)
        tr_drop(r, 0);
    return NULL;
}

/* A relay to 127.0.0.1:target on a port of its own (r->port). */
static inline bool tr_start(tcprelay *r, int target)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int one = 1;

    memset(r, 0, sizeof(*r));
    r->target = target;
    atomic_init(&r->cuts, 0);
    atomic_init(&r->stop, 0);
    if ((r->lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
        return false;
    setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(r->lfd, 64) != 0 ||
        getsockname(r->lfd, (struct sockaddr *)&sa, &len) != 0) {
        close(r->lfd);
        return false;
    }
    r->port = ntohs(sa.sin_port);
    return pthread_create(&r->th, NULL, tr_run, r) == 0;
}

/* The connections relayed now stop passing anything, held open. */
static inline void tr_cut(tcprelay *r)
{
    atomic_fetch_add(&r->cuts, 1);
}

static inline void tr_stop(tcprelay *r)
{
    atomic_store(&r->stop, 1);
    pthread_join(r->th, NULL);
    close(r->lfd);
}

#endif /* SL_TCPRELAY_H */
