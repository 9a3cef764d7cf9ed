/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice.c - the handle: open (the URL and options, the backend, the
 * deny cache, the counters, the fallback store), close, attaching it to a
 * loop, and what it tells about itself. Requests run through call.c;
 * threads share a handle through share.c; the fail policy is policy.c's. */
#include "call.h"
#include "features/names.h"
#include "features/prometheus.h"
#include "handle.h"
#include "net/conn.h"
#include "net/tls.h"

#include <string.h>
#include <time.h>

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;

    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sluice_options_init(sluice_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
}

/* clock=server on a backend that cannot read the server's clock: its
 * refusal from caps.c's table. */
static sluice_status refuse_clock(const sl_backend *b, const char *url,
                                  char *err, size_t err_len)
{
    const sl_refusal *r = sl_caps_refusal(
        SL_ASK_CLOCK, SL_CAP_SERVER | SL_CAP_SERVER_CLOCK, b->caps);
    char shown[SL_ERR_LEN];

    if (r == NULL)
        return SLUICE_OK;
    if (r->in_url) {
        sl_url_redact(url, shown, sizeof(shown));
        sl_errf(err, err_len, "url \"%s\": %s", shown, r->text);
    } else {
        sl_errf(err, err_len, "%s: %s", b->name, r->text);
    }
    return r->status;
}

sluice_status sluice_open(const char *url, const sluice_options *opts,
                          sluice **out, char *err, size_t err_len)
{
    sluice *sl;
    sluice_status st;

    if (out == NULL) {
        sl_errf(err, err_len, "open: out is NULL");
        return SLUICE_EINVAL;
    }
    *out = NULL;
    sl = sl_calloc(1, sizeof(*sl));
    if (sl == NULL) {
        sl_errf(err, err_len, "open: out of memory");
        return SLUICE_ENOMEM;
    }
    if (pthread_mutex_init(&sl->mu, NULL) != 0) {
        sl_free(sl);
        sl_errf(err, err_len, "open: cannot make a mutex");
        return SLUICE_ENOMEM;
    }
    if (pthread_mutex_init(&sl->make_mu, NULL) != 0) {
        pthread_mutex_destroy(&sl->mu);
        sl_free(sl);
        sl_errf(err, err_len, "open: cannot make a mutex");
        return SLUICE_ENOMEM;
    }
    if (!sl_policies_init(&sl->policies)) {
        pthread_mutex_destroy(&sl->make_mu);
        pthread_mutex_destroy(&sl->mu);
        sl_free(sl);
        sl_errf(err, err_len, "open: cannot make a mutex");
        return SLUICE_ENOMEM;
    }
    if (!sl_limfile_init(&sl->limits)) {
        sl_policies_free(&sl->policies);
        pthread_mutex_destroy(&sl->make_mu);
        pthread_mutex_destroy(&sl->mu);
        sl_free(sl);
        sl_errf(err, err_len, "open: cannot make a mutex");
        return SLUICE_ENOMEM;
    }
    st = sl_url_parse(url, opts, &sl->url, err, err_len);
    if (st != SLUICE_OK)
        goto fail;
    if (!sl_names_init(&sl->names, &sl->url.cfg)) {
        sl_errf(err, err_len, "open: cannot make a mutex");
        st = SLUICE_ENOMEM;
        goto fail;
    }
    if (sl->url.cfg.clock == NULL)
        sl->url.cfg.clock = realtime_ms;
    sl_policies_of_config(&sl->url.cfg, &sl->policy);
    switch (sl->url.scheme) {
    case SL_SCHEME_MEM:
        sl->backend = &sl_backend_memory;
        break;
    case SL_SCHEME_REDIS:
        sl->backend = &sl_backend_evalsha;
        break;
    case SL_SCHEME_MULTI:
        sl->backend = &sl_backend_multi;
        break;
    case SL_SCHEME_TWEMPROXY:
        sl->backend = &sl_backend_twemproxy;
        break;
    case SL_SCHEME_CLUSTER:
        sl->backend = &sl_backend_cluster;
        break;
    }
    if (sl->url.cfg.server_clock &&
        (st = refuse_clock(sl->backend, url, err, err_len)) != SLUICE_OK)
        goto fail;
    if ((st = sl_tls_check(&sl->url, err, err_len)) != SLUICE_OK)
        goto fail;
    if (sl_deny_init(&sl->deny, sl->url.cfg.deny_cache) != SLUICE_OK) {
        sl_errf(err, err_len, "open: out of memory for the deny cache");
        st = SLUICE_ENOMEM;
        goto fail;
    }
    /* The plain backends charge a window before they judge it, and so
     * cannot give a window's units back (plain.c). */
    if (sl_reserve_init(&sl->rsv, &sl->url.cfg,
                        (sl->backend->caps & SL_CAP_REFUND_WINDOW) != 0) !=
        SLUICE_OK) {
        sl_deny_free(&sl->deny);
        sl_errf(err, err_len, "open: out of memory for reservations");
        st = SLUICE_ENOMEM;
        goto fail;
    }
    sl_stats_init(&sl->stats, !sl->url.cfg.no_metrics);
    /* The limits file before the backend: a fault of it fails the open
     * at once, without a connect. */
    if ((st = sl_limits_file_open(sl, err, err_len)) != SLUICE_OK) {
        sl_backend_memory.close(atomic_load(&sl->fallback));
        sl_deny_free(&sl->deny);
        sl_reserve_free(&sl->rsv);
        goto fail;
    }
    sl_engine_init(&sl->eng, &sl->url, sl->backend->name, &sl->backend->ops,
                   sl->backend->caps);
    st = sl->backend->open(&sl->url, &sl->eng, &sl->state, err, err_len);
    if (st != SLUICE_OK) {
        sl_backend_memory.close(atomic_load(&sl->fallback));
        sl_deny_free(&sl->deny);
        sl_reserve_free(&sl->rsv);
        goto fail;
    }
    sl->eng.state = sl->state;
    /* (A policy of the file may have made the fallback store already.) */
    if (sl->url.cfg.fail == SLUICE_FAIL_FALLBACK &&
        atomic_load(&sl->fallback) == NULL &&
        (st = sl_policy_open(sl, err, err_len)) != SLUICE_OK) {
        sl_engine_shutdown(&sl->eng);
        sl->backend->close(sl->state);
        sl_deny_free(&sl->deny);
        sl_reserve_free(&sl->rsv);
        goto fail;
    }
    *out = sl;
    return SLUICE_OK;
fail:
    if (sl->names.prefix[0] != '\0') /* made: never empty then */
        sl_names_free(&sl->names);
    sl_limfile_free(&sl->limits);
    sl_policies_free(&sl->policies);
    pthread_mutex_destroy(&sl->make_mu);
    pthread_mutex_destroy(&sl->mu);
    sl_free(sl);
    return st;
}

/* Closing: the units reservations hold given back, blocking, where they
 * can be; a handle on a loop lets them lapse (its loop may be gone). */
static void give_back(sluice *sl)
{
    enum {
        MAX = SL_RSV_SETS * SL_RSV_WAYS
    };
    sl_request *rs;
    sluice_result *res;
    sluice_status st;
    size_t n;

    if (!sl_reserve_on(&sl->rsv))
        return;
    rs = sl_calloc(MAX, sizeof(*rs));
    res = sl_calloc(MAX, sizeof(*res));
    n = sl_reserve_leftovers(
        &sl->rsv, sl->url.cfg.clock(sl->url.cfg.clock_ctx), rs,
        rs == NULL || res == NULL || sl->eng.attached ? 0 : MAX);
    if (n > 0) {
        st = sl_share_decide(sl, rs, n, res, sl_share_err(sl));
        sl_reserve_closed(&sl->rsv, rs, n, st, res);
    }
    sl_free(rs);
    sl_free(res);
}

void sluice_close(sluice *sl)
{
    if (sl == NULL)
        return;
    give_back(sl);
    sl_engine_shutdown(&sl->eng);
    sl->backend->close(sl->state);
    sl_backend_memory.close(atomic_load(&sl->fallback));
    sl_deny_free(&sl->deny);
    sl_reserve_free(&sl->rsv);
    sl_names_free(&sl->names); /* after the callbacks */
    sl_limfile_free(&sl->limits);
    sl_policies_free(&sl->policies);
    sl_stats_free(&sl->stats);
    pthread_mutex_destroy(&sl->make_mu);
    pthread_mutex_destroy(&sl->mu);
    sl_free(sl);
}

size_t sl_handle_deny_count(sluice *sl)
{
    return sl_deny_count(&sl->deny);
}

void *sl_handle_state(const sluice *sl)
{
    return sl->state;
}

const char *sluice_backend_name(const sluice *sl)
{
    return sl == NULL ? "none" : sl->backend->name;
}

sl_limiters *sl_handle_names(sluice *sl)
{
    return &sl->names;
}

sluice_status sluice_attach(sluice *sl, const sluice_loop *loop)
{
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (loop == NULL || loop->watch == NULL || loop->timer == NULL) {
        sl_errf(err, SL_ERR_LEN, "attach: the loop needs watch and timer");
        return SLUICE_EINVAL;
    }
    if (sl->eng.attached) {
        sl_errf(err, SL_ERR_LEN, "attach: the handle is attached already");
        return SLUICE_EINVAL;
    }
    sl->eng.loop = *loop;
    sl->eng.attached = true;
    sl->eng.timer_at = -1;
    sl_engine_report(&sl->eng);
    return SLUICE_OK;
}

void sluice_socket_action(sluice *sl, int fd, int events)
{
    if (sl == NULL || !sl->eng.attached)
        return;
    sl_engine_action(&sl->eng, fd, events);
    sl_share_count_trips(sl, 0);
}

/* The handle's counters, as sluice_get_stats gives them. */
static void read_stats(sluice *sl, sluice_stats *st)
{
    sl_stats_read(&sl->stats, st);
    sl_reserve_read(&sl->rsv, st);
    if (sl->backend->failovers != NULL)
        st->failovers = sl->backend->failovers(sl->state);
}

sluice_status sluice_get_stats(sluice *sl, sluice_stats *out, size_t size)
{
    sluice_stats st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (out == NULL || size == 0) {
        sl_errf(err, SL_ERR_LEN, "get_stats: %s",
                out == NULL ? "out is NULL" : "size is 0");
        return SLUICE_EINVAL;
    }
    if (!sl->stats.on) {
        sl_errf(err, SL_ERR_LEN,
                "get_stats: the handle keeps no counters (metrics=0)");
        return SLUICE_EINVAL;
    }
    read_stats(sl, &st);
    memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
    return SLUICE_OK;
}

sluice_status sluice_get_limiter_stats(sluice *sl, const void *name,
                                       size_t name_len,
                                       sluice_limiter_stats *out, size_t size)
{
    sluice_limiter_stats st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (out == NULL || size == 0) {
        sl_errf(err, SL_ERR_LEN, "get_limiter_stats: %s",
                out == NULL ? "out is NULL" : "size is 0");
        return SLUICE_EINVAL;
    }
    if (!sl->stats.on) {
        sl_errf(err, SL_ERR_LEN,
                "get_limiter_stats: the handle keeps no counters (metrics=0)");
        return SLUICE_EINVAL;
    }
    sl_stats_limiter_read(&sl->stats, name, name_len, &st);
    memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
    return SLUICE_OK;
}

/* A metrics page's reader: handle i's counters, as sluice_get_stats
 * reads them, and its counters by limiter. */
static bool page_read(const void *ctx, size_t i, sluice_stats *st,
                      const sl_stats **live)
{
    sluice *sl = ((sluice *const *)ctx)[i];

    if (!sl->stats.on)
        return false;
    read_stats(sl, st);
    *live = &sl->stats;
    return true;
}

/* Whether names label n handles apart: each a non-empty string, no two
 * the same (NULL, or one NULL name, only for one handle). */
static bool names_apart(const char *const *names, size_t n)
{
    size_t i, j;

    if (names == NULL || (n == 1 && names[0] == NULL))
        return n <= 1;
    for (i = 0; i < n; i++) {
        if (names[i] == NULL || names[i][0] == '\0')
            return false;
        for (j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return false;
    }
    return true;
}

size_t sluice_metrics_page(sluice *const *handles, const char *const *names,
                           size_t n, unsigned flags, char *buf, size_t len)
{
    size_t i;

    if (buf != NULL && len > 0)
        buf[0] = '\0';
    if ((flags & ~SLUICE_METRICS_NO_LIMITERS) != 0 ||
        (handles == NULL && n > 0) || !names_apart(names, n))
        return 0;
    for (i = 0; i < n; i++)
        if (handles[i] == NULL)
            return 0;
    return sl_prom_page(page_read, handles, n,
                        names != NULL && names[0] != NULL ? names : NULL,
                        (flags & SLUICE_METRICS_NO_LIMITERS) == 0, buf, len);
}

size_t sluice_pending(const sluice *sl)
{
    return sl == NULL ? 0 : sl_engine_pending(&sl->eng);
}
