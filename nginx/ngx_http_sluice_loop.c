/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_loop.c - each worker's sluice handles on nginx's own
 * event loop: sluice's watch hook becomes an nginx connection whose read
 * and write events call sluice_socket_action, its timer hook an nginx
 * timer. Nothing here blocks a worker once it serves requests: the
 * handles open in init_process (a connect of at most connect_timeout_ms
 * each) and close in exit_process. */

#include "ngx_http_sluice_module.h"


/* Set in exit_process: decisions that end while the handles close find
 * no loop to resume their requests on. */
ngx_uint_t  ngx_http_sluice_exiting;


/* Opens the URL once with short timeouts (the URL's own win), so that
 * `nginx -t` refuses what sluice_open refuses: the URL and its options,
 * the TLS files, a limits file. A server that is down does not fail it;
 * the handle is closed at once. */
ngx_int_t
ngx_http_sluice_check_backend(ngx_conf_t *cf, ngx_http_sluice_backend_t *b)
{
    char            err[1024];
    sluice         *sl;
    sluice_status   st;
    sluice_options  opts;

    sluice_options_init(&opts);
    opts.connect_timeout_ms = 250;
    opts.command_timeout_ms = 250;
    opts.no_metrics = true;

    st = sluice_open((const char *) b->url.data, &opts, &sl, err,
                     sizeof(err));
    if (st != SLUICE_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_backend \"%V\": %s", &b->name, err);
        return NGX_ERROR;
    }

    sluice_close(sl);

    return NGX_OK;
}


/* The module's decisions in flight on b, counted up as one starts and
 * down as its callback runs: the worker may exit with b's timer left only
 * when none is, since each has a request waiting for it. */
void
ngx_http_sluice_backend_busy(ngx_http_sluice_backend_t *b, ngx_int_t delta)
{
    b->waiting += delta;
    b->timer.cancelable = (b->waiting == 0);
}


static void
ngx_http_sluice_on_event(ngx_event_t *ev)
{
    int                         fd;
    ngx_connection_t           *c;
    ngx_http_sluice_backend_t  *b;

    c = ev->data;
    b = c->data;

    if (c->close) {
        /*
         * worker_shutdown_timeout's sweep closes every busy connection
         * through its read handler: this one is the handle's, which
         * sluice_close() ends in exit_process
         */
        c->close = 0;
        c->error = 0;
        return;
    }

    fd = c->fd;

    /* May end the watch and free c. */
    sluice_socket_action(b->sl, fd, ev->write ? SLUICE_WATCH_OUT
                                              : SLUICE_WATCH_IN);
}


static void
ngx_http_sluice_on_timer(ngx_event_t *ev)
{
    ngx_http_sluice_backend_t  *b = ev->data;

    sluice_socket_action(b->sl, SLUICE_SOCKET_TIMEOUT, 0);
}


static void
ngx_http_sluice_release(ngx_connection_t *c)
{
    /* sluice closes the socket after this: the events go, not the fd. */
    if (c->read->active) {
        ngx_del_event(c->read, NGX_READ_EVENT, 0);
    }

    if (c->write->active) {
        ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }

    if (c->read->posted) {
        ngx_delete_posted_event(c->read);
    }

    if (c->write->posted) {
        ngx_delete_posted_event(c->write);
    }

    c->read->closed = 1;
    c->write->closed = 1;

    ngx_free_connection(c);

    c->fd = (ngx_socket_t) -1;
}


static ngx_http_sluice_watch_t *
ngx_http_sluice_slot(ngx_http_sluice_backend_t *b, int fd, ngx_uint_t add)
{
    ngx_uint_t                i, n;
    ngx_http_sluice_watch_t  *w, *free_slot;

    free_slot = NULL;

    for (i = 0; i < b->nwatch; i++) {
        if (b->watch[i].c == NULL) {
            if (free_slot == NULL) {
                free_slot = &b->watch[i];
            }

            continue;
        }

        if (b->watch[i].fd == fd) {
            return &b->watch[i];
        }
    }

    if (!add || free_slot != NULL) {
        return free_slot;
    }

    n = b->nwatch ? 2 * b->nwatch : 4;

    w = ngx_alloc(n * sizeof(ngx_http_sluice_watch_t), b->log);
    if (w == NULL) {
        return NULL;
    }

    ngx_memzero(w, n * sizeof(ngx_http_sluice_watch_t));

    if (b->nwatch) {
        ngx_memcpy(w, b->watch, b->nwatch * sizeof(ngx_http_sluice_watch_t));
    }

    ngx_free(b->watch);

    free_slot = &w[b->nwatch];
    b->watch = w;
    b->nwatch = n;

    return free_slot;
}


/* sluice's watch hook: fd's events as an nginx connection's, level
 * triggered as poll() would report them. */
static void
ngx_http_sluice_watch_fd(void *data, int fd, int events)
{
    ngx_http_sluice_backend_t *b = data;

    ngx_connection_t         *c;
    ngx_http_sluice_watch_t  *w;

    w = ngx_http_sluice_slot(b, fd, events != 0);

    if (events == 0) {
        if (w != NULL && w->c != NULL && w->fd == fd) {
            ngx_http_sluice_release(w->c);
            w->c = NULL;
        }

        return;
    }

    if (w == NULL) {
        ngx_log_error(NGX_LOG_ALERT, b->log, 0,
                      "sluice_backend \"%V\": no memory to watch socket %d; "
                      "its requests end at their timeout", &b->name, fd);
        return;
    }

    if (w->c == NULL) {
        c = ngx_get_connection(fd, b->log);
        if (c == NULL) {
            ngx_log_error(NGX_LOG_ALERT, b->log, 0,
                          "sluice_backend \"%V\": no free connection for "
                          "socket %d (raise worker_connections); its "
                          "requests end at their timeout", &b->name, fd);
            return;
        }

        c->data = b;
        c->read->handler = ngx_http_sluice_on_event;
        c->write->handler = ngx_http_sluice_on_event;
        c->read->log = b->log;
        c->write->log = b->log;

        w->fd = fd;
        w->c = c;
    }

    c = w->c;

    if ((events & SLUICE_WATCH_IN) && !c->read->active) {
        if (ngx_add_event(c->read, NGX_READ_EVENT, NGX_LEVEL_EVENT)
            != NGX_OK)
        {
            ngx_log_error(NGX_LOG_ALERT, b->log, 0,
                          "sluice_backend \"%V\": cannot watch socket %d "
                          "for reading", &b->name, fd);
        }

    } else if (!(events & SLUICE_WATCH_IN) && c->read->active) {
        ngx_del_event(c->read, NGX_READ_EVENT, 0);
    }

    if ((events & SLUICE_WATCH_OUT) && !c->write->active) {
        if (ngx_add_event(c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT)
            != NGX_OK)
        {
            ngx_log_error(NGX_LOG_ALERT, b->log, 0,
                          "sluice_backend \"%V\": cannot watch socket %d "
                          "for writing", &b->name, fd);
        }

    } else if (!(events & SLUICE_WATCH_OUT) && c->write->active) {
        ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }
}


/* sluice's timer hook. nginx keeps a timer that moves by less than
 * NGX_TIMER_LAZY_DELAY where it was: deleted first, so that a deadline
 * brought forward fires on time. */
static void
ngx_http_sluice_timer(void *data, int64_t timeout_ms)
{
    ngx_http_sluice_backend_t *b = data;

    if (b->timer.timer_set) {
        ngx_del_timer(&b->timer);
    }

    if (timeout_ms >= 0) {
        ngx_add_timer(&b->timer, (ngx_msec_t) timeout_ms);
    }
}


static void
ngx_http_sluice_cleanup_loop(void *data)
{
    ngx_http_sluice_backend_t *b = data;

    ngx_uint_t  i;

    for (i = 0; i < b->nwatch; i++) {
        if (b->watch[i].c != NULL) {
            ngx_http_sluice_release(b->watch[i].c);
            b->watch[i].c = NULL;
        }
    }

    ngx_free(b->watch);
    b->watch = NULL;
    b->nwatch = 0;

    if (b->timer.timer_set) {
        ngx_del_timer(&b->timer);
    }
}


/* The policy a named limiter's zones ask for, merged into what the
 * handle gives it (a limits file's policy keeps its other groups). */
static void
ngx_http_sluice_set_policies(ngx_http_sluice_backend_t *b)
{
    ngx_uint_t                i;
    sluice_policy             p;
    ngx_http_sluice_named_t  *n;

    n = b->named.elts;

    for (i = 0; i < b->named.nelts; i++) {
        if (n[i].fail == NGX_HTTP_SLUICE_FAIL_UNSET && n[i].shadow != 1) {
            continue;
        }

        sluice_policy_init(&p);

        if (sluice_limiter_policy_get(b->sl, n[i].limiter.data,
                                      n[i].limiter.len, &p)
            != SLUICE_OK)
        {
            p.set = 0;
        }

        if (n[i].fail != NGX_HTTP_SLUICE_FAIL_UNSET) {
            p.set |= SLUICE_POLICY_FAIL;
            p.fail = (sluice_fail_policy) n[i].fail;
        }

        if (n[i].shadow == 1) {
            p.set |= SLUICE_POLICY_SHADOW;
            p.shadow = true;
        }

        if (sluice_limiter_policy_set(b->sl, n[i].limiter.data,
                                      n[i].limiter.len, &p)
            != SLUICE_OK)
        {
            ngx_log_error(NGX_LOG_ALERT, b->log, 0,
                          "sluice_backend \"%V\": limiter \"%V\": %s",
                          &b->name, &n[i].limiter, sluice_errmsg(b->sl));
        }
    }
}


ngx_int_t
ngx_http_sluice_open_backends(ngx_cycle_t *cycle)
{
    char                          err[1024];
    ngx_uint_t                    i;
    sluice_loop                   loop;
    sluice_status                 st;
    ngx_http_sluice_backend_t    *b;
    ngx_http_sluice_main_conf_t  *smcf;

    ngx_http_sluice_exiting = 0;

    smcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_module);
    if (smcf == NULL) {
        return NGX_OK;
    }

    b = smcf->backends.elts;

    for (i = 0; i < smcf->backends.nelts; i++) {
        b[i].log = cycle->log;
        b[i].waiting = 0;
        b[i].watch = NULL;
        b[i].nwatch = 0;
        ngx_memzero(&b[i].flushed, sizeof(sluice_stats));

        ngx_memzero(&b[i].timer, sizeof(ngx_event_t));
        b[i].timer.handler = ngx_http_sluice_on_timer;
        b[i].timer.data = &b[i];
        b[i].timer.log = cycle->log;
        b[i].timer.cancelable = 1;

        /*
         * A failure here was not one at configuration time (memory, a
         * file that went away): the worker serves on, and the zones of
         * this backend answer 500 with this message's reason logged.
         */
        st = sluice_open((const char *) b[i].url.data, NULL, &b[i].sl, err,
                         sizeof(err));
        if (st != SLUICE_OK) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "sluice_backend \"%V\": %s", &b[i].name, err);
            b[i].sl = NULL;
            continue;
        }

        loop.data = &b[i];
        loop.watch = ngx_http_sluice_watch_fd;
        loop.timer = ngx_http_sluice_timer;
        loop.cleanup = ngx_http_sluice_cleanup_loop;

        if (sluice_attach(b[i].sl, &loop) != SLUICE_OK) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "sluice_backend \"%V\": %s", &b[i].name,
                          sluice_errmsg(b[i].sl));
            sluice_close(b[i].sl);
            b[i].sl = NULL;
            continue;
        }

        ngx_http_sluice_set_policies(&b[i]);
    }

    if (smcf->sh != NULL) {
        ngx_http_sluice_start_flush(cycle, smcf);
    }

    return NGX_OK;
}


void
ngx_http_sluice_close_backends(ngx_cycle_t *cycle)
{
    ngx_uint_t                    i;
    ngx_http_sluice_backend_t    *b;
    ngx_http_sluice_main_conf_t  *smcf;

    ngx_http_sluice_exiting = 1;

    smcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_sluice_module);
    if (smcf == NULL) {
        return;
    }

    /* What this worker counted since its last flush, before it goes. */
    ngx_http_sluice_stop_flush(smcf);

    b = smcf->backends.elts;

    for (i = 0; i < smcf->backends.nelts; i++) {
        if (b[i].sl != NULL) {
            /* Ends what is in flight (their callbacks see exiting), the
             * watches and the timer (the cleanup hook). */
            sluice_close(b[i].sl);
            b[i].sl = NULL;
        }
    }
}
