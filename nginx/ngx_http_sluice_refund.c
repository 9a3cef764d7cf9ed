/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_refund.c - all or nothing across a location's limits,
 * as limit_req: when a later limit refuses a request (a denial, or an
 * error that answers 500), what the earlier limits admitted is given
 * back, each where it was charged (sluice_settle_after with nothing
 * used: a reservation's units to the reservation, a fallback store's to
 * it; an admission that charged nothing, by the open policy, shadow mode
 * or an allow-list, gives back nothing). The answer does not wait for
 * it. A named limiter's admission is not given back (sluice has no
 * refund by name), nor one on a backend that cannot refund (twemproxy://;
 * redis+multi:// for fixed, sliding and log rules): those stay charged,
 * and the worker's log says so at info level. */

#include "ngx_http_sluice_module.h"


typedef struct {
    ngx_http_sluice_backend_t   *backend;
    ngx_str_t                    zone;      /* the configuration's */
} ngx_http_sluice_refund_t;


static void
ngx_http_sluice_refunded(sluice *sl, void *arg, sluice_status st,
    const sluice_result *res, size_t n)
{
    ngx_http_sluice_refund_t *rf = arg;

    (void) res;
    (void) n;

    ngx_http_sluice_backend_busy(rf->backend, -1);

    if (st != SLUICE_OK) {
        ngx_log_error(NGX_LOG_INFO, ngx_cycle->log, 0,
                      "sluice_limit zone=%V: an admission of a request "
                      "another limit refused stays charged: %s",
                      &rf->zone, sluice_errmsg(sl));
    }

    ngx_free(rf);
}


void
ngx_http_sluice_give_back(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_uint_t                   i;
    sluice_status                st;
    ngx_http_sluice_zone_t      *z;
    ngx_http_sluice_answer_t    *a;
    ngx_http_sluice_refund_t    *rf;
    ngx_http_sluice_backend_t   *b;

    for (i = 0; i < ctx->next; i++) {
        a = &ctx->answers[i];
        z = a->limit->zone;
        b = z->backend;

        if (!a->asked || a->st != SLUICE_OK || !a->res.allowed
            || z->limiter.len > 0 || b->sl == NULL)
        {
            continue;
        }

        rf = ngx_alloc(sizeof(ngx_http_sluice_refund_t), r->connection->log);
        if (rf == NULL) {
            continue;
        }

        rf->backend = b;
        rf->zone = z->name;

        st = sluice_settle_after_async(b->sl, a->key.data, a->key.len,
                                       &z->rules, &a->res, a->cost, 0,
                                       ngx_http_sluice_refunded, rf);

        if (st != SLUICE_OK) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "sluice_limit zone=%V: an admission of a request "
                          "another limit refused stays charged: %s",
                          &z->name, sluice_errmsg(b->sl));
            ngx_free(rf);
            continue;
        }

        ngx_http_sluice_backend_busy(b, 1);
    }
}
