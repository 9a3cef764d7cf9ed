/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice/libevent.h - runs a sluice handle on a libevent loop. Header
 * only: the program links libevent, the library does not.
 *
 *     struct event_base *base = event_base_new();
 *     sluice_libevent_attach(sl, base);
 *     sluice_acquire_async(sl, "k", 1, &rules, 1, on_done, arg);
 *     event_base_dispatch(base);
 *
 * The handle's sockets and its timer become events of base; sluice_close()
 * removes them. Use the handle from the loop's thread only. */
#ifndef SLUICE_LIBEVENT_H
#define SLUICE_LIBEVENT_H

#include <event2/event.h>
#include <sluice.h>
#include <stdlib.h>

/* C++ services include this header too: their casts, so that it compiles
 * clean under g++ -Wold-style-cast -Wuseless-cast. Undefined at the end. */
#ifdef __cplusplus
#define SLUICE_EV_CAST(T, v) (static_cast<T>(v))
#else
#define SLUICE_EV_CAST(T, v) ((T)(v))
#endif

typedef struct sluice_libevent_fd {
    int fd;
    struct event *ev; /* NULL: a free slot */
} sluice_libevent_fd;

typedef struct sluice_libevent {
    sluice *sl;
    struct event_base *base;
    struct event *timer;
    sluice_libevent_fd *fds;
    size_t nfds;
} sluice_libevent;

static void sluice_libevent_on_fd(evutil_socket_t fd, short what, void *arg)
{
    sluice_libevent *le = SLUICE_EV_CAST(sluice_libevent *, arg);

    /* evutil_socket_t is int on POSIX systems, the only ones sluice runs
     * on. */
    sluice_socket_action(le->sl, fd,
                         ((what & EV_READ) ? SLUICE_WATCH_IN : 0) |
                             ((what & EV_WRITE) ? SLUICE_WATCH_OUT : 0));
}

static void sluice_libevent_on_timer(evutil_socket_t fd, short what, void *arg)
{
    sluice_libevent *le = SLUICE_EV_CAST(sluice_libevent *, arg);

    (void)fd;
    (void)what;
    sluice_socket_action(le->sl, SLUICE_SOCKET_TIMEOUT, 0);
}

static void sluice_libevent_watch(void *data, int fd, int events)
{
    sluice_libevent *le = SLUICE_EV_CAST(sluice_libevent *, data);
    sluice_libevent_fd *slot = NULL;
    short what =
        SLUICE_EV_CAST(short, ((events & SLUICE_WATCH_IN) ? EV_READ : 0) |
                                  ((events & SLUICE_WATCH_OUT) ? EV_WRITE : 0));
    size_t i;

    for (i = 0; i < le->nfds; i++) {
        if (le->fds[i].ev != NULL && le->fds[i].fd == fd) {
            slot = &le->fds[i];
            break;
        }
    }
    if (slot != NULL) {
        /* A new mask, or none: the old event goes. */
        event_free(slot->ev);
        slot->ev = NULL;
    }
    if (what == 0)
        return;
    for (i = 0; slot == NULL && i < le->nfds; i++)
        if (le->fds[i].ev == NULL)
            slot = &le->fds[i];
    if (slot == NULL) {
        sluice_libevent_fd *p =
            SLUICE_EV_CAST(sluice_libevent_fd *,
                           realloc(le->fds, (le->nfds + 4) * sizeof(*p)));

        if (p == NULL)
            abort(); /* cannot watch the socket: nothing sound is left */
        for (i = le->nfds; i < le->nfds + 4; i++)
            p[i].ev = NULL;
        le->fds = p;
        slot = &le->fds[le->nfds];
        le->nfds += 4;
    }
    slot->fd = fd;
    slot->ev = event_new(le->base, fd, SLUICE_EV_CAST(short, what | EV_PERSIST),
                         sluice_libevent_on_fd, le);
    if (slot->ev == NULL || event_add(slot->ev, NULL) != 0)
        abort();
}

static void sluice_libevent_timer(void *data, int64_t timeout_ms)
{
    sluice_libevent *le = SLUICE_EV_CAST(sluice_libevent *, data);
    struct timeval tv;

    if (timeout_ms < 0) {
        event_del(le->timer);
        return;
    }
    /* In long long, so that neither cast is to the type it casts (time_t
     * and suseconds_t are often int64_t's type): g++ -Wuseless-cast. */
    tv.tv_sec = SLUICE_EV_CAST(time_t, timeout_ms / 1000LL);
    tv.tv_usec = SLUICE_EV_CAST(suseconds_t, (timeout_ms % 1000LL) * 1000LL);
    event_add(le->timer, &tv);
}

static void sluice_libevent_cleanup(void *data)
{
    sluice_libevent *le = SLUICE_EV_CAST(sluice_libevent *, data);
    size_t i;

    for (i = 0; i < le->nfds; i++)
        if (le->fds[i].ev != NULL)
            event_free(le->fds[i].ev);
    event_free(le->timer);
    free(le->fds);
    free(le);
}

/* Attaches sl to base. SLUICE_ENOMEM, or sluice_attach()'s status. */
static inline sluice_status sluice_libevent_attach(sluice *sl,
                                                   struct event_base *base)
{
    sluice_libevent *le =
        SLUICE_EV_CAST(sluice_libevent *, calloc(1, sizeof(*le)));
    sluice_loop loop;
    sluice_status st;

    if (le == NULL)
        return SLUICE_ENOMEM;
    le->sl = sl;
    le->base = base;
    le->timer = evtimer_new(base, sluice_libevent_on_timer, le);
    if (le->timer == NULL) {
        free(le);
        return SLUICE_ENOMEM;
    }
    loop.data = le;
    loop.watch = sluice_libevent_watch;
    loop.timer = sluice_libevent_timer;
    loop.cleanup = sluice_libevent_cleanup;
    st = sluice_attach(sl, &loop);
    if (st != SLUICE_OK)
        sluice_libevent_cleanup(le);
    return st;
}

#undef SLUICE_EV_CAST

#endif /* SLUICE_LIBEVENT_H */
