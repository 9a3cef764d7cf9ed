/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_status.c - sluice_status, the Prometheus page of every
 * worker together, as stub_status is: the counters live in a shared
 * memory zone. Each zone's requests are counted there as they are decided
 * (by outcome, and by the sluice status of their answers); each worker's
 * handle counters (sluice_stats) are added to it as the differences since
 * the last time, every second, at exit, and before the worker serves the
 * page. So the page sums every worker, and goes on across reloads while
 * the zones and backends stay the same (a changed list is a new shared
 * zone: its name carries the list's CRC32). */

#include "ngx_http_sluice_module.h"


#define NGX_HTTP_SLUICE_STATS_WORDS  (sizeof(sluice_stats) / sizeof(uint64_t))
#define NGX_HTTP_SLUICE_OUTCOMES     5
#define NGX_HTTP_SLUICE_ZONE_WORDS                                        \
    (NGX_HTTP_SLUICE_OUTCOMES + SLUICE_STATS_STATUSES)
#define NGX_HTTP_SLUICE_FLUSH_MS     1000


/* In the shared zone: the backends' counters, then the zones'. */
struct ngx_http_sluice_shctx_s {
    ngx_uint_t                   nbackends;
    ngx_uint_t                   nzones;
    ngx_atomic_t                 words[1];
};


static ngx_str_t  ngx_http_sluice_outcome_names[] = {
    ngx_null_string,
    ngx_string("passed"),
    ngx_string("rejected"),
    ngx_string("rejected_dry_run"),
    ngx_string("error")
};


static ngx_int_t
ngx_http_sluice_init_shm(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_sluice_main_conf_t  *osmcf = data;

    size_t                        size;
    ngx_slab_pool_t              *shpool;
    ngx_http_sluice_main_conf_t  *smcf;

    smcf = shm_zone->data;

    if (osmcf != NULL) {
        /* A reload with the same backends and zones: counting goes on. */
        smcf->sh = osmcf->sh;
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        smcf->sh = shpool->data;
        return NGX_OK;
    }

    size = sizeof(ngx_http_sluice_shctx_t)
           + (smcf->backends.nelts * NGX_HTTP_SLUICE_STATS_WORDS
              + smcf->zones.nelts * NGX_HTTP_SLUICE_ZONE_WORDS)
             * sizeof(ngx_atomic_t);

    smcf->sh = ngx_slab_calloc(shpool, size);
    if (smcf->sh == NULL) {
        return NGX_ERROR;
    }

    smcf->sh->nbackends = smcf->backends.nelts;
    smcf->sh->nzones = smcf->zones.nelts;
    shpool->data = smcf->sh;

    return NGX_OK;
}


/* The shared zone, named by the list it counts. Called once the http{}
 * block is read, when every backend and zone is known. */
ngx_int_t
ngx_http_sluice_add_shm(ngx_conf_t *cf, ngx_http_sluice_main_conf_t *smcf)
{
    u_char                      *p;
    size_t                       size;
    uint32_t                     crc;
    ngx_str_t                    name;
    ngx_uint_t                   i;
    ngx_http_sluice_zone_t     **zones;
    ngx_http_sluice_backend_t   *b;

    ngx_crc32_init(crc);

    b = smcf->backends.elts;
    for (i = 0; i < smcf->backends.nelts; i++) {
        ngx_crc32_update(&crc, b[i].name.data, b[i].name.len);
        ngx_crc32_update(&crc, (u_char *) "\n", 1);
    }

    ngx_crc32_update(&crc, (u_char *) "|", 1);

    zones = smcf->zones.elts;
    for (i = 0; i < smcf->zones.nelts; i++) {
        ngx_crc32_update(&crc, zones[i]->name.data, zones[i]->name.len);
        ngx_crc32_update(&crc, (u_char *) "\n", 1);
    }

    ngx_crc32_final(crc);

    name.data = ngx_pnalloc(cf->pool, sizeof("sluice_metrics_ffffffff"));
    if (name.data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_sprintf(name.data, "sluice_metrics_%08xD", crc);
    name.len = p - name.data;

    size = sizeof(ngx_http_sluice_shctx_t)
           + (smcf->backends.nelts * NGX_HTTP_SLUICE_STATS_WORDS
              + smcf->zones.nelts * NGX_HTTP_SLUICE_ZONE_WORDS)
             * sizeof(ngx_atomic_t);

    /* The slab pool's own pages, and ours rounded up to pages. */
    size = 8 * ngx_pagesize + ngx_align(size, ngx_pagesize);

    smcf->shm_zone = ngx_shared_memory_add(cf, &name, size,
                                           &ngx_http_sluice_module);
    if (smcf->shm_zone == NULL) {
        return NGX_ERROR;
    }

    smcf->shm_zone->init = ngx_http_sluice_init_shm;
    smcf->shm_zone->data = smcf;

    return NGX_OK;
}


/* A zone's decision, counted: its outcome, and its answer's status. */
void
ngx_http_sluice_count(ngx_http_sluice_zone_t *z, ngx_uint_t outcome,
    ngx_int_t status)
{
    ngx_atomic_t                 *w;
    ngx_http_sluice_main_conf_t  *smcf;

    smcf = ngx_http_cycle_get_module_main_conf(ngx_cycle,
                                               ngx_http_sluice_module);

    if (smcf == NULL || smcf->sh == NULL || z->index >= smcf->sh->nzones) {
        return;
    }

    w = &smcf->sh->words[smcf->sh->nbackends * NGX_HTTP_SLUICE_STATS_WORDS
                         + z->index * NGX_HTTP_SLUICE_ZONE_WORDS];

    if (outcome < NGX_HTTP_SLUICE_OUTCOMES) {
        (void) ngx_atomic_fetch_add(&w[outcome], 1);
    }

    if (status >= 0 && status < SLUICE_STATS_STATUSES) {
        (void) ngx_atomic_fetch_add(&w[NGX_HTTP_SLUICE_OUTCOMES + status], 1);
    }
}


/* This worker's handle counters since the last time, into the zone. */
void
ngx_http_sluice_flush(ngx_http_sluice_main_conf_t *smcf)
{
    uint64_t                   *now, *last;
    ngx_uint_t                  i, k;
    sluice_stats                st;
    ngx_atomic_t               *w;
    ngx_http_sluice_backend_t  *b;

    if (smcf->sh == NULL) {
        return;
    }

    b = smcf->backends.elts;

    for (i = 0; i < smcf->backends.nelts && i < smcf->sh->nbackends; i++) {
        if (b[i].sl == NULL
            || sluice_get_stats(b[i].sl, &st, sizeof(st)) != SLUICE_OK)
        {
            continue;
        }

        now = (uint64_t *) &st;
        last = (uint64_t *) &b[i].flushed;
        w = &smcf->sh->words[i * NGX_HTTP_SLUICE_STATS_WORDS];

        for (k = 0; k < NGX_HTTP_SLUICE_STATS_WORDS; k++) {
            if (now[k] > last[k]) {
                (void) ngx_atomic_fetch_add(&w[k], now[k] - last[k]);
            }
        }

        b[i].flushed = st;
    }
}


static void
ngx_http_sluice_flush_handler(ngx_event_t *ev)
{
    ngx_http_sluice_main_conf_t  *smcf = ev->data;

    ngx_http_sluice_flush(smcf);

    if (!ngx_exiting) {
        ngx_add_timer(ev, NGX_HTTP_SLUICE_FLUSH_MS);
    }
}


void
ngx_http_sluice_start_flush(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *smcf)
{
    ngx_memzero(&smcf->flush, sizeof(ngx_event_t));

    smcf->flush.handler = ngx_http_sluice_flush_handler;
    smcf->flush.data = smcf;
    smcf->flush.log = cycle->log;
    smcf->flush.cancelable = 1;    /* a worker may exit with it left */

    ngx_add_timer(&smcf->flush, NGX_HTTP_SLUICE_FLUSH_MS);
}


void
ngx_http_sluice_stop_flush(ngx_http_sluice_main_conf_t *smcf)
{
    if (smcf->flush.timer_set) {
        ngx_del_timer(&smcf->flush);
    }

    ngx_http_sluice_flush(smcf);
}


/* Appends text's families to the page, each after the same family of
 * the texts before: texts[i] are the formatter's, each with the same
 * families in the same order, so one HELP and TYPE a family. */
static u_char *
ngx_http_sluice_merge(u_char *p, ngx_str_t *texts, ngx_uint_t n)
{
    u_char      *at[64], *end, *next;
    ngx_uint_t   i, done;

    for (i = 0; i < n; i++) {
        at[i] = texts[i].data;
    }

    for ( ;; ) {
        done = 0;

        for (i = 0; i < n; i++) {
            end = texts[i].data + texts[i].len;

            if (at[i] >= end) {
                done++;
                continue;
            }

            /* This family's block: to the next HELP line. */
            next = at[i];

            do {
                next = ngx_strlchr(next, end, '\n');
                next = (next == NULL) ? end : next + 1;
            } while (next < end
                     && ngx_strncmp(next, "# HELP ", 7) != 0);

            if (i > 0) {
                /* Its samples alone: past HELP and TYPE. */
                while (at[i] < next && at[i][0] == '#') {
                    at[i] = ngx_strlchr(at[i], next, '\n') + 1;
                }
            }

            p = ngx_cpymem(p, at[i], next - at[i]);
            at[i] = next;
        }

        if (done == n) {
            return p;
        }
    }
}


static ngx_int_t
ngx_http_sluice_page(ngx_http_request_t *r,
    ngx_http_sluice_main_conf_t *smcf, ngx_buf_t **out)
{
    char                         one[1];
    u_char                      *p, *name;
    size_t                       size, len;
    ngx_str_t                   *texts;
    ngx_uint_t                   i, k, nb;
    sluice_stats                 st;
    ngx_atomic_t                *w;
    ngx_http_sluice_zone_t     **zones;
    ngx_http_sluice_backend_t   *b;

    nb = ngx_min(smcf->backends.nelts, smcf->sh->nbackends);
    nb = ngx_min(nb, 64);
    b = smcf->backends.elts;

    texts = ngx_pcalloc(r->pool, (nb + 1) * sizeof(ngx_str_t));
    if (texts == NULL) {
        return NGX_ERROR;
    }

    size = 0;

    for (i = 0; i < nb; i++) {
        w = &smcf->sh->words[i * NGX_HTTP_SLUICE_STATS_WORDS];

        for (k = 0; k < NGX_HTTP_SLUICE_STATS_WORDS; k++) {
            ((uint64_t *) &st)[k] = (uint64_t) w[k];
        }

        name = ngx_pnalloc(r->pool, b[i].name.len + 1);
        if (name == NULL) {
            return NGX_ERROR;
        }

        ngx_cpystrn(name, b[i].name.data, b[i].name.len + 1);

        len = sluice_stats_prometheus(&st, sizeof(st), (const char *) name,
                                      one, sizeof(one));

        texts[i].data = ngx_pnalloc(r->pool, len + 1);
        if (texts[i].data == NULL) {
            return NGX_ERROR;
        }

        texts[i].len = sluice_stats_prometheus(&st, sizeof(st),
                                               (const char *) name,
                                               (char *) texts[i].data,
                                               len + 1);
        size += texts[i].len;
    }

    zones = smcf->zones.elts;

    /* The zones' families: two heads, a line a zone and outcome or
     * status, each at most a name and a number long. */
    size += 512 + ngx_min(smcf->zones.nelts, smcf->sh->nzones)
                  * (NGX_HTTP_SLUICE_ZONE_WORDS * (160 + NGX_INT64_LEN));

    *out = ngx_create_temp_buf(r->pool, size);
    if (*out == NULL) {
        return NGX_ERROR;
    }

    p = ngx_http_sluice_merge((*out)->last, texts, nb);

    w = &smcf->sh->words[smcf->sh->nbackends * NGX_HTTP_SLUICE_STATS_WORDS];

    p = ngx_cpymem(p, "# HELP sluice_nginx_requests_total Requests a zone "
                      "decided in nginx, by outcome.\n"
                      "# TYPE sluice_nginx_requests_total counter\n",
                   sizeof("# HELP sluice_nginx_requests_total Requests a "
                          "zone decided in nginx, by outcome.\n"
                          "# TYPE sluice_nginx_requests_total counter\n")
                   - 1);

    for (i = 0; i < smcf->zones.nelts && i < smcf->sh->nzones; i++) {
        for (k = 1; k < NGX_HTTP_SLUICE_OUTCOMES; k++) {
            p = ngx_sprintf(p, "sluice_nginx_requests_total{zone=\"%V\","
                            "outcome=\"%V\"} %uA\n", &zones[i]->name,
                            &ngx_http_sluice_outcome_names[k],
                            w[i * NGX_HTTP_SLUICE_ZONE_WORDS + k]);
        }
    }

    p = ngx_cpymem(p, "# HELP sluice_nginx_answers_total Answers of a "
                      "zone's decisions, by sluice status.\n"
                      "# TYPE sluice_nginx_answers_total counter\n",
                   sizeof("# HELP sluice_nginx_answers_total Answers of a "
                          "zone's decisions, by sluice status.\n"
                          "# TYPE sluice_nginx_answers_total counter\n")
                   - 1);

    for (i = 0; i < smcf->zones.nelts && i < smcf->sh->nzones; i++) {
        for (k = 0; k < SLUICE_STATS_STATUSES; k++) {
            if (k != SLUICE_OK
                && w[i * NGX_HTTP_SLUICE_ZONE_WORDS
                     + NGX_HTTP_SLUICE_OUTCOMES + k] == 0)
            {
                continue;
            }

            p = ngx_sprintf(p, "sluice_nginx_answers_total{zone=\"%V\","
                            "status=\"%s\"} %uA\n", &zones[i]->name,
                            sluice_status_name((sluice_status) k),
                            w[i * NGX_HTTP_SLUICE_ZONE_WORDS
                              + NGX_HTTP_SLUICE_OUTCOMES + k]);
        }
    }

    (*out)->last = p;

    return NGX_OK;
}


ngx_int_t
ngx_http_sluice_status_handler(ngx_http_request_t *r)
{
    ngx_int_t                     rc;
    ngx_buf_t                    *b;
    ngx_chain_t                   out;
    ngx_http_sluice_main_conf_t  *smcf;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    smcf = ngx_http_get_module_main_conf(r, ngx_http_sluice_module);

    if (smcf->sh == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* This worker's own counters as they are now. */
    ngx_http_sluice_flush(smcf);

    if (ngx_http_sluice_page(r, smcf, &b) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&r->headers_out.content_type, "text/plain; version=0.0.4");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    if (r->method == NGX_HTTP_HEAD) {
        r->header_only = 1;
    }

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}
