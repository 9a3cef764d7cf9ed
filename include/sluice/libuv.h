/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice/libuv.h - runs a sluice handle on a libuv loop. Header only: the
 * program links libuv, the library does not.
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     sluice_libuv_attach(sl, loop);
 *     sluice_acquire_async(sl, "k", 1, &rules, 1, on_done, arg);
 *     uv_run(loop, UV_RUN_DEFAULT);
 *
 * The handle's sockets become uv_poll_t handles and its timer a
 * uv_timer_t; sluice_close() closes them (libuv frees them on the loop's
 * next turn, so run the loop once more before uv_loop_close()). Use the
 * handle from the loop's thread only. */
#ifndef SLUICE_LIBUV_H
#define SLUICE_LIBUV_H

#include <sluice.h>
#include <stdlib.h>
#include <uv.h>

/* C++ services include this header too: their casts, so that it compiles
 * clean under g++ -Wold-style-cast -Wuseless-cast; a poll or a timer is
 * passed to uv_close() as the uv_handle_t it starts with, as libuv's own
 * examples do. Undefined at the end. */
#ifdef __cplusplus
#define SLUICE_UV_CAST(T, v) (static_cast<T>(v))
#define SLUICE_UV_HANDLE(h)  (reinterpret_cast<uv_handle_t *>(h))
#else
#define SLUICE_UV_CAST(T, v) ((T)(v))
#define SLUICE_UV_HANDLE(h)  ((uv_handle_t *)(h))
#endif

typedef struct sluice_libuv sluice_libuv;

typedef struct sluice_libuv_poll {
    uv_poll_t poll; /* first: freed as the handle; poll.data is this */
    int fd;
    sluice_libuv *lu;
    struct sluice_libuv_poll *next;
} sluice_libuv_poll;

struct sluice_libuv {
    sluice *sl;
    uv_loop_t *loop;
    uv_timer_t *timer;
    sluice_libuv_poll *polls; /* one per socket watched */
};

static void sluice_libuv_on_poll(uv_poll_t *p, int status, int events)
{
    sluice_libuv_poll *sp = SLUICE_UV_CAST(sluice_libuv_poll *, p->data);
    int ev = ((events & UV_READABLE) ? SLUICE_WATCH_IN : 0) |
             ((events & UV_WRITABLE) ? SLUICE_WATCH_OUT : 0);

    /* An error on the socket: let sluice read it and find out. */
    if (status < 0)
        ev = SLUICE_WATCH_IN;
    sluice_socket_action(sp->lu->sl, sp->fd, ev);
}

static void sluice_libuv_on_timer(uv_timer_t *t)
{
    sluice_libuv *lu = SLUICE_UV_CAST(sluice_libuv *, t->data);

    sluice_socket_action(lu->sl, SLUICE_SOCKET_TIMEOUT, 0);
}

static void sluice_libuv_free_handle(uv_handle_t *h)
{
    free(h);
}

static void sluice_libuv_watch(void *data, int fd, int events)
{
    sluice_libuv *lu = SLUICE_UV_CAST(sluice_libuv *, data);
    sluice_libuv_poll **pp, *p = NULL;
    int ev = ((events & SLUICE_WATCH_IN) ? UV_READABLE : 0) |
             ((events & SLUICE_WATCH_OUT) ? UV_WRITABLE : 0);

    for (pp = &lu->polls; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->fd == fd) {
            p = *pp;
            break;
        }
    }
    if (ev == 0) {
        /* sluice closes fd next: stop polling it now. */
        if (p != NULL) {
            *pp = p->next;
            uv_poll_stop(&p->poll);
            uv_close(SLUICE_UV_HANDLE(&p->poll), sluice_libuv_free_handle);
        }
        return;
    }
    if (p == NULL) {
        p = SLUICE_UV_CAST(sluice_libuv_poll *, calloc(1, sizeof(*p)));
        if (p == NULL || uv_poll_init(lu->loop, &p->poll, fd) != 0)
            abort(); /* cannot watch the socket: nothing sound is left */
        p->fd = fd;
        p->lu = lu;
        p->poll.data = p;
        p->next = lu->polls;
        lu->polls = p;
    }
    uv_poll_start(&p->poll, ev, sluice_libuv_on_poll);
}

static void sluice_libuv_timer(void *data, int64_t timeout_ms)
{
    sluice_libuv *lu = SLUICE_UV_CAST(sluice_libuv *, data);

    if (timeout_ms < 0)
        uv_timer_stop(lu->timer);
    else
        uv_timer_start(lu->timer, sluice_libuv_on_timer,
                       SLUICE_UV_CAST(uint64_t, timeout_ms), 0);
}

static void sluice_libuv_cleanup(void *data)
{
    sluice_libuv *lu = SLUICE_UV_CAST(sluice_libuv *, data);

    while (lu->polls != NULL) {
        sluice_libuv_poll *p = lu->polls;

        lu->polls = p->next;
        uv_poll_stop(&p->poll);
        uv_close(SLUICE_UV_HANDLE(&p->poll), sluice_libuv_free_handle);
    }
    uv_timer_stop(lu->timer);
    uv_close(SLUICE_UV_HANDLE(lu->timer), sluice_libuv_free_handle);
    free(lu);
}

/* Attaches sl to loop. SLUICE_ENOMEM, or sluice_attach()'s status. */
static inline sluice_status sluice_libuv_attach(sluice *sl, uv_loop_t *loop)
{
    sluice_libuv *lu = SLUICE_UV_CAST(sluice_libuv *, calloc(1, sizeof(*lu)));
    sluice_loop l;
    sluice_status st;

    if (lu == NULL)
        return SLUICE_ENOMEM;
    lu->timer = SLUICE_UV_CAST(uv_timer_t *, calloc(1, sizeof(*lu->timer)));
    if (lu->timer == NULL) {
        free(lu);
        return SLUICE_ENOMEM;
    }
    lu->sl = sl;
    lu->loop = loop;
    uv_timer_init(loop, lu->timer);
    lu->timer->data = lu;
    l.data = lu;
    l.watch = sluice_libuv_watch;
    l.timer = sluice_libuv_timer;
    l.cleanup = sluice_libuv_cleanup;
    st = sluice_attach(sl, &l);
    if (st != SLUICE_OK)
        sluice_libuv_cleanup(lu);
    return st;
}

#undef SLUICE_UV_CAST
#undef SLUICE_UV_HANDLE

#endif /* SLUICE_LIBUV_H */
