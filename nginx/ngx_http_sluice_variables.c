/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_variables.c - what a request's limits decided, for logs
 * and upstreams: $sluice_status (as $limit_req_status), $sluice_result
 * (the answer's sluice status), $sluice_limit (the zone that decided),
 * $sluice_rule (its rule that binds), $sluice_remaining and
 * $sluice_retry_after. Empty (not found) where no limit was decided. */

#include "ngx_http_sluice_module.h"


#define NGX_HTTP_SLUICE_VAR_STATUS       0
#define NGX_HTTP_SLUICE_VAR_RESULT       1
#define NGX_HTTP_SLUICE_VAR_LIMIT        2
#define NGX_HTTP_SLUICE_VAR_RULE         3
#define NGX_HTTP_SLUICE_VAR_REMAINING    4
#define NGX_HTTP_SLUICE_VAR_RETRY_AFTER  5


static ngx_int_t ngx_http_sluice_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


static ngx_http_variable_t  ngx_http_sluice_vars[] = {

    { ngx_string("sluice_status"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_STATUS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("sluice_result"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_RESULT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("sluice_limit"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_LIMIT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("sluice_rule"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_RULE, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("sluice_remaining"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_REMAINING, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("sluice_retry_after"), NULL, ngx_http_sluice_variable,
      NGX_HTTP_SLUICE_VAR_RETRY_AFTER, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_str_t  ngx_http_sluice_outcomes[] = {
    ngx_null_string,
    ngx_string("PASSED"),
    ngx_string("REJECTED"),
    ngx_string("REJECTED_DRY_RUN"),
    ngx_string("ERROR")
};


ngx_int_t
ngx_http_sluice_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_sluice_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_sluice_set(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    u_char *data, size_t len, ngx_uint_t copy)
{
    if (copy) {
        v->data = ngx_pnalloc(r->pool, len);
        if (v->data == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(v->data, data, len);

    } else {
        v->data = data;
    }

    v->len = len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_http_sluice_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char                     buf[NGX_INT64_LEN + 160], *p;
    size_t                     len;
    int64_t                    ms;
    sluice_ruleset             one;
    ngx_http_sluice_ctx_t     *ctx;
    ngx_http_sluice_answer_t  *a;

    v->not_found = 1;

    ctx = ngx_http_sluice_get_ctx(r);

    if (ctx == NULL || ctx->state != NGX_HTTP_SLUICE_STATE_DONE) {
        return NGX_OK;
    }

    if (data == NGX_HTTP_SLUICE_VAR_STATUS) {
        if (ctx->outcome == 0) {
            return NGX_OK;
        }

        return ngx_http_sluice_set(r, v,
                                   ngx_http_sluice_outcomes[ctx->outcome].data,
                                   ngx_http_sluice_outcomes[ctx->outcome].len,
                                   0);
    }

    if (ctx->deciding < 0 || ctx->answers[ctx->deciding].limit == NULL) {
        return NGX_OK;
    }

    a = &ctx->answers[ctx->deciding];

    switch (data) {

    case NGX_HTTP_SLUICE_VAR_LIMIT:
        return ngx_http_sluice_set(r, v, a->limit->zone->name.data,
                                   a->limit->zone->name.len, 0);

    case NGX_HTTP_SLUICE_VAR_RESULT:
        if (!a->asked) {
            return NGX_OK;
        }

        p = (u_char *) sluice_status_name(a->st != SLUICE_OK ? a->st
                                                             : a->res.status);
        return ngx_http_sluice_set(r, v, p, ngx_strlen(p), 0);
    }

    /* The numbers: only those a rule decided. */
    if (!a->asked || a->st != SLUICE_OK || !sluice_result_decided(&a->res)) {
        return NGX_OK;
    }

    switch (data) {

    case NGX_HTTP_SLUICE_VAR_RULE:
        if (a->rules.count == 0 || a->res.rule >= a->rules.count) {
            return NGX_OK;
        }

        one.count = 1;
        one.rules[0] = a->rules.rules[a->res.rule];

        len = sluice_ruleset_format(&one, (char *) buf, sizeof(buf));
        if (len >= sizeof(buf)) {
            return NGX_OK;
        }

        return ngx_http_sluice_set(r, v, buf, len, 1);

    case NGX_HTTP_SLUICE_VAR_REMAINING:
        p = ngx_sprintf(buf, "%L", (int64_t) a->res.remaining);
        return ngx_http_sluice_set(r, v, buf, p - buf, 1);

    default: /* NGX_HTTP_SLUICE_VAR_RETRY_AFTER: seconds, rounded up */
        ms = a->res.retry_after_ms;

        if (ms < 0 || (a->res.allowed && a->res.status != SLUICE_SHADOWED)) {
            return NGX_OK;
        }

        p = ngx_sprintf(buf, "%L", (int64_t) ((ms + 999) / 1000));
        return ngx_http_sluice_set(r, v, buf, p - buf, 1);
    }
}
