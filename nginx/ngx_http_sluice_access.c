/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_access.c - a request's limits, decided in the preaccess
 * phase without blocking the worker: each limit's decision starts on the
 * worker's handle, the request waits (its phases stop), and the
 * decision's callback posts the request's write event, which runs the
 * phases again from this handler. The limits of a location are decided
 * one after the other; the first denial answers, and what the earlier
 * ones charged is given back (ngx_http_sluice_refund.c). */

#include "ngx_http_sluice_module.h"
#include <ngx_sha1.h>


static void ngx_http_sluice_cleanup(void *data);


/* The request's decisions, also after an internal redirect (which
 * empties the module contexts): through the pool's cleanup. */
ngx_http_sluice_ctx_t *
ngx_http_sluice_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t     *cln;
    ngx_http_sluice_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_sluice_module);
    if (ctx != NULL) {
        return ctx;
    }

    for (cln = r->main->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_sluice_cleanup) {
            return cln->data;
        }
    }

    return NULL;
}


/* The request's pool goes: a decision still in flight must not touch it. */
static void
ngx_http_sluice_cleanup(void *data)
{
    ngx_http_sluice_ctx_t *ctx = data;

    if (ctx->wait != NULL) {
        ctx->wait->ctx = NULL;
        ctx->wait = NULL;
    }
}


/* A decision's callback, from sluice_socket_action: keeps the answer
 * (and what decided it, readable only here), then resumes the request
 * from its connection's write event. */
static void
ngx_http_sluice_done(sluice *sl, void *arg, sluice_status st,
    const sluice_result *res, size_t n)
{
    ngx_http_sluice_wait_t *wait = arg;

    sluice_decision            d;
    ngx_http_request_t        *r;
    ngx_http_sluice_ctx_t     *ctx;
    ngx_http_sluice_answer_t  *a;

    ctx = wait->ctx;
    ngx_http_sluice_backend_busy(wait->backend, -1);
    ngx_free(wait);

    if (ctx == NULL) {
        return;
    }

    ctx->wait = NULL;

    if (ngx_http_sluice_exiting) {
        return;
    }

    r = ctx->request;
    a = &ctx->answers[ctx->next];
    a->st = st;

    if (st == SLUICE_OK && n > 0) {
        a->res = res[0];

        sluice_decision_init(&d);

        if (sluice_last_decision(sl, 0, &d) == SLUICE_OK) {
            a->rules = d.rules;
            a->violated = d.violated;
        }

    } else {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice_limit zone=%V: %s",
                      &a->limit->zone->name, sluice_errmsg(sl));
    }

    ctx->state = NGX_HTTP_SLUICE_STATE_ANSWERED;

    r->write_event_handler = ngx_http_core_run_phases;
    ngx_post_event(r->connection->write, &ngx_posted_events);
}


/* The cost of a request in a limit: 1, a constant or a variable; 0 (or
 * an empty value: 1) is not counted. NGX_ERROR: not a number. */
static ngx_int_t
ngx_http_sluice_cost(ngx_http_request_t *r, ngx_http_sluice_limit_t *limit)
{
    ngx_int_t  cost;
    ngx_str_t  v;

    if (limit->cost == NULL) {
        return 1;
    }

    if (ngx_http_complex_value(r, limit->cost, &v) != NGX_OK) {
        return NGX_ERROR;
    }

    if (v.len == 0) {
        return 1;
    }

    cost = ngx_atoi(v.data, v.len);

    if (cost == NGX_ERROR || cost > 1000000000) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "sluice_limit zone=%V: cost \"%V\" is not a number "
                      "from 0 to 1000000000", &limit->zone->name, &v);
        return NGX_ERROR;
    }

    return cost;
}


/* prefix + value, or prefix + "#" + the value's SHA-1 in hex when that
 * would pass max bytes: a long value (a header) is still limited, by its
 * digest, rather than refused. */
static ngx_int_t
ngx_http_sluice_compose(ngx_http_request_t *r, ngx_str_t *prefix,
    ngx_str_t *value, size_t max, ngx_str_t *out)
{
    u_char        *p, digest[20];
    ngx_sha1_t     sha1;

    if (prefix->len + value->len <= max) {
        p = ngx_pnalloc(r->pool, prefix->len + value->len);
        if (p == NULL) {
            return NGX_ERROR;
        }

        out->data = p;
        p = ngx_cpymem(p, prefix->data, prefix->len);
        p = ngx_cpymem(p, value->data, value->len);
        out->len = p - out->data;

        return NGX_OK;
    }

    if (prefix->len + 41 > max) {
        return NGX_ERROR;
    }

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, value->data, value->len);
    ngx_sha1_final(digest, &sha1);

    p = ngx_pnalloc(r->pool, prefix->len + 41);
    if (p == NULL) {
        return NGX_ERROR;
    }

    out->data = p;
    p = ngx_cpymem(p, prefix->data, prefix->len);
    *p++ = '#';
    p = ngx_hex_dump(p, digest, sizeof(digest));
    out->len = p - out->data;

    return NGX_OK;
}


/* Starts the decision of the next limit. NGX_AGAIN: the request waits
 * for it; NGX_DECLINED: the limit does not apply (an empty key, cost 0);
 * else the status to answer. */
static ngx_int_t
ngx_http_sluice_start(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    ngx_int_t                    cost;
    ngx_str_t                    key, full, prefix;
    sluice_status                st;
    sluice_policy                policy, *pp;
    ngx_http_sluice_zone_t      *z;
    ngx_http_sluice_wait_t      *wait;
    ngx_http_sluice_limit_t     *limit;
    ngx_http_sluice_answer_t    *a;
    ngx_http_sluice_backend_t   *b;
    ngx_http_sluice_loc_conf_t  *slcf;

    limit = (ngx_http_sluice_limit_t *) ctx->limits->elts + ctx->next;
    a = &ctx->answers[ctx->next];
    a->limit = limit;
    z = limit->zone;
    b = z->backend;

    cost = ngx_http_sluice_cost(r, limit);
    if (cost == NGX_ERROR) {
        ctx->outcome = NGX_HTTP_SLUICE_ERROR;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_ERROR, -1);
        return NGX_HTTP_BAD_REQUEST;
    }

    if (cost == 0) {
        return NGX_DECLINED;
    }

    ngx_str_null(&key);

    if (z->key != NULL) {
        if (ngx_http_complex_value(r, z->key, &key) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        /* As limit_req: a request whose key is empty is not counted. */
        if (key.len == 0) {
            return NGX_DECLINED;
        }
    }

    if (b->sl == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice_limit zone=%V: backend \"%V\" did not open "
                      "in this worker (its reason is logged at start)",
                      &z->name, &b->name);
        ctx->outcome = NGX_HTTP_SLUICE_ERROR;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_ERROR, -1);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    wait = ngx_alloc(sizeof(ngx_http_sluice_wait_t), r->connection->log);
    if (wait == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    wait->ctx = ctx;
    wait->backend = b;

    if (z->limiter.len == 0) {
        /* A zone's keys are its own: "ZONE:" before the key. */
        slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);

        prefix.len = z->name.len + 1;
        prefix.data = ngx_pnalloc(r->pool, prefix.len);
        if (prefix.data == NULL) {
            ngx_free(wait);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_memcpy(prefix.data, z->name.data, z->name.len);
        prefix.data[z->name.len] = ':';

        if (ngx_http_sluice_compose(r, &prefix, &key, SLUICE_MAX_KEY_LEN,
                                    &full)
            != NGX_OK)
        {
            ngx_free(wait);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        pp = NULL;

        if (z->fail != NGX_HTTP_SLUICE_FAIL_UNSET || slcf->dry_run) {
            sluice_policy_init(&policy);

            if (z->fail != NGX_HTTP_SLUICE_FAIL_UNSET) {
                policy.set |= SLUICE_POLICY_FAIL;
                policy.fail = (sluice_fail_policy) z->fail;
            }

            if (slcf->dry_run) {
                policy.set |= SLUICE_POLICY_SHADOW;
                policy.shadow = true;
            }

            pp = &policy;
        }

        a->key = full;
        a->cost = cost;

        st = sluice_acquire_with_async(b->sl, full.data, full.len, &z->rules,
                                       cost, pp, ngx_http_sluice_done, wait);

    } else {
        /* The name and the client id take 1000 bytes at most. */
        ngx_str_set(&prefix, "");
        ngx_str_null(&full);

        if (key.len > 0
            && ngx_http_sluice_compose(r, &prefix, &key,
                                       1000 - z->limiter.len, &full)
               != NGX_OK)
        {
            ngx_free(wait);
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "sluice_limit zone=%V: the limiter's name leaves "
                          "no room for a client id", &z->name);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        st = sluice_limiter_acquire_async(b->sl, z->limiter.data,
                                          z->limiter.len, full.data, full.len,
                                          cost, ngx_http_sluice_done, wait);
    }

    if (st != SLUICE_OK) {
        ngx_free(wait);
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice_limit zone=%V: %s", &z->name,
                      sluice_errmsg(b->sl));
        ctx->outcome = NGX_HTTP_SLUICE_ERROR;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_ERROR, st);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    a->asked = 1;
    ctx->wait = wait;
    ctx->state = NGX_HTTP_SLUICE_STATE_WAITING;

    /* While it waits: a client that goes away ends the request (499),
     * whose cleanup forgets the decision; a write event does nothing.
     * The read event is posted once, as the client may have gone with
     * its request already (epoll reported both in one event, and no
     * other will come): ngx_http_test_reading finds that out now. */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;
    ngx_post_event(r->connection->read, &ngx_posted_events);

    ngx_http_sluice_backend_busy(b, 1);

    return NGX_AGAIN;
}


/* How an answer is written over HTTP: the zone's name and unit, or for a
 * named limiter the policy's own where the handle has one for it. */
static void
ngx_http_sluice_http_options(ngx_http_sluice_answer_t *a,
    sluice_http_options *o, sluice_policy *pol, u_char *name)
{
    ngx_http_sluice_zone_t  *z = a->limit->zone;

    sluice_http_options_init(o);
    ngx_cpystrn(name, z->name.data, z->name.len + 1);

    o->name = (const char *) name;
    o->unit = z->unit;
    o->unit_name = z->unit_name.len ? (const char *) z->unit_name.data : NULL;
    o->violated = a->violated;

    if (z->limiter.len > 0 && z->backend->sl != NULL) {
        sluice_policy_init(pol);

        if (sluice_limiter_policy_get(z->backend->sl, z->limiter.data,
                                      z->limiter.len, pol)
                == SLUICE_OK
            && (pol->set & SLUICE_POLICY_HTTP))
        {
            o->name = pol->http_name;
            o->unit = pol->unit;
            o->unit_name = pol->unit_name[0] ? pol->unit_name : NULL;
        }
    }
}


/* The status an answer gives: 0 admitted, else the denial's. */
static ngx_int_t
ngx_http_sluice_judge(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx,
    ngx_http_sluice_answer_t *a)
{
    int                          code;
    u_char                       name[64];
    sluice_policy                pol;
    sluice_http_options          o;
    ngx_http_sluice_zone_t      *z;
    ngx_http_sluice_loc_conf_t  *slcf;

    z = a->limit->zone;

    if (a->st != SLUICE_OK) {
        /* fail=error's answer: neither a decision nor a policy's. */
        ctx->outcome = NGX_HTTP_SLUICE_ERROR;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_ERROR, a->st);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);

    ngx_http_sluice_http_options(a, &o, &pol, name);

    code = sluice_http_status(&a->res, &o);

    if (code < 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "sluice_limit zone=%V: no HTTP answer for status %s",
                      &a->limit->zone->name,
                      sluice_status_name(a->res.status));
        ctx->outcome = NGX_HTTP_SLUICE_ERROR;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_ERROR, a->res.status);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (a->res.status == SLUICE_SHADOWED) {
        ngx_log_error(slcf->log_level, r->connection->log, 0,
                      "limiting requests, dry run, by zone \"%V\": %s",
                      &z->name, sluice_status_name(a->res.status));
        ctx->outcome = NGX_HTTP_SLUICE_REJECTED_DRY_RUN;
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_REJECTED_DRY_RUN,
                              a->res.status);
        return 0;
    }

    if (code == 0) {
        ngx_http_sluice_count(z, NGX_HTTP_SLUICE_PASSED, a->res.status);
        return 0;
    }

    ngx_http_sluice_count(z, NGX_HTTP_SLUICE_REJECTED, a->res.status);

    ngx_log_error(slcf->log_level, r->connection->log, 0,
                  "limiting requests by zone \"%V\": %s, retry after %L ms",
                  &z->name, sluice_status_name(a->res.status),
                  (int64_t) a->res.retry_after_ms);

    ctx->outcome = NGX_HTTP_SLUICE_REJECTED;

    if (code == NGX_HTTP_TOO_MANY_REQUESTS) {
        return slcf->status_code;
    }

    return code;
}


/* sluice_http_each's callback: one field into headers_out. */
static int
ngx_http_sluice_add_field(void *arg, const char *name, const char *value)
{
    ngx_http_request_t *r = arg;

    size_t            nlen, vlen;
    ngx_table_elt_t  *h;

    nlen = ngx_strlen(name);
    vlen = ngx_strlen(value);

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return 1;
    }

    h->key.data = ngx_pnalloc(r->pool, nlen + vlen);
    if (h->key.data == NULL) {
        h->hash = 0;
        return 1;
    }

    h->hash = 1;
    h->key.len = nlen;
    ngx_memcpy(h->key.data, name, nlen);
    h->value.data = h->key.data + nlen;
    h->value.len = vlen;
    ngx_memcpy(h->value.data, value, vlen);
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return 0;
}


static void
ngx_http_sluice_add_fields(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx)
{
    u_char                     name[64];
    ngx_uint_t                 i;
    sluice_policy              pol;
    sluice_http_options        o;
    ngx_http_sluice_answer_t  *a;

    for (i = 0; i < ctx->limits->nelts; i++) {
        a = &ctx->answers[i];

        if (!a->asked || a->st != SLUICE_OK) {
            continue;
        }

        ngx_http_sluice_http_options(a, &o, &pol, name);

        (void) sluice_http_each(a->rules.count > 0 ? &a->rules : NULL,
                                &a->res, &o, ngx_http_sluice_add_field, r);
    }
}


/* The RFC 9457 problem of a denial, as the body of its answer. */
static ngx_int_t
ngx_http_sluice_send_problem(ngx_http_request_t *r,
    ngx_http_sluice_answer_t *a, ngx_int_t status)
{
    char                 stack[2048], *text;
    size_t               len;
    u_char               name[64], *p;
    ngx_int_t            rc;
    ngx_buf_t           *buf;
    ngx_chain_t          out;
    sluice_policy        pol;
    sluice_http_options  o;
    const sluice_ruleset  *rules;

    ngx_http_sluice_http_options(a, &o, &pol, name);
    rules = a->rules.count > 0 ? &a->rules : NULL;

    text = stack;
    len = sluice_http_body(rules, &a->res, &o, stack, sizeof(stack));

    if (len >= sizeof(stack)) {
        text = ngx_pnalloc(r->pool, len + 1);
        if (text == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        len = sluice_http_body(rules, &a->res, &o, text, len + 1);
    }

    if (len == 0) {
        /* No body for this answer: nginx's own page. */
        return status;
    }

    /* The problem's "status" is the answer's (RFC 9457, 3.1.2):
     * sluice_limit_status may have changed a 429. */
    p = ngx_strnstr((u_char *) text, "\"status\": ", len);

    if (p != NULL && (size_t) (p - (u_char *) text) + 13 <= len
        && status >= 100 && status <= 999)
    {
        (void) ngx_sprintf(p + 10, "%03i", status);
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    buf = ngx_create_temp_buf(r->pool, len);
    if (buf == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    buf->last = ngx_cpymem(buf->pos, text, len);
    buf->last_buf = (r == r->main) ? 1 : 0;
    buf->last_in_chain = 1;

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;
    ngx_str_set(&r->headers_out.content_type, SLUICE_HTTP_PROBLEM_TYPE);
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        ngx_http_finalize_request(r, rc);
        return NGX_DONE;
    }

    out.buf = buf;
    out.next = NULL;

    ngx_http_finalize_request(r, ngx_http_output_filter(r, &out));

    return NGX_DONE;
}


/* Whether error_page covers status here: then nginx answers it. */
static ngx_uint_t
ngx_http_sluice_error_page(ngx_http_request_t *r, ngx_int_t status)
{
    ngx_uint_t                 i;
    ngx_http_err_page_t       *ep;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (clcf->error_pages == NULL) {
        return 0;
    }

    ep = clcf->error_pages->elts;

    for (i = 0; i < clcf->error_pages->nelts; i++) {
        if (ep[i].status == status) {
            return 1;
        }
    }

    return 0;
}


/* The answer the variables tell when every limit admitted: the one with
 * the least remaining of those decided, else the first asked. */
static ngx_int_t
ngx_http_sluice_binding(ngx_http_sluice_ctx_t *ctx)
{
    ngx_int_t                  best;
    ngx_uint_t                 i;
    ngx_http_sluice_answer_t  *a;

    best = -1;

    for (i = 0; i < ctx->limits->nelts; i++) {
        a = &ctx->answers[i];

        if (!a->asked || a->st != SLUICE_OK) {
            continue;
        }

        if (best == -1) {
            best = i;
            continue;
        }

        if (sluice_result_decided(&a->res)
            && (!sluice_result_decided(&ctx->answers[best].res)
                || a->res.remaining < ctx->answers[best].res.remaining))
        {
            best = i;
        }
    }

    return best;
}


static ngx_int_t
ngx_http_sluice_finish(ngx_http_request_t *r, ngx_http_sluice_ctx_t *ctx,
    ngx_int_t rc)
{
    ngx_http_sluice_loc_conf_t  *slcf;

    ctx->state = NGX_HTTP_SLUICE_STATE_DONE;
    ctx->rc = rc;

    r->read_event_handler = ngx_http_block_reading;

    if (rc == NGX_DECLINED) {
        ctx->deciding = ngx_http_sluice_binding(ctx);

        /* No limit applied (empty keys, cost 0): nothing to tell. */
        if (ctx->outcome == 0 && ctx->deciding != -1) {
            ctx->outcome = NGX_HTTP_SLUICE_PASSED;
        }

    } else if (ctx->deciding == -1 && ctx->next < ctx->limits->nelts) {
        ctx->deciding = ctx->next;
    }

    slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);

    if (slcf->headers) {
        ngx_http_sluice_add_fields(r, ctx);
    }

    if (rc == NGX_DECLINED || ctx->outcome != NGX_HTTP_SLUICE_REJECTED) {
        return rc;
    }

    if (ngx_http_sluice_error_page(r, rc)) {
        return rc;
    }

    return ngx_http_sluice_send_problem(r, &ctx->answers[ctx->deciding], rc);
}


ngx_int_t
ngx_http_sluice_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_pool_cleanup_t          *cln;
    ngx_http_sluice_ctx_t       *ctx;
    ngx_http_sluice_loc_conf_t  *slcf;

    /* A request is limited once: not its subrequests. */
    if (r != r->main) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_sluice_get_ctx(r);

    if (ctx == NULL) {
        slcf = ngx_http_get_module_loc_conf(r, ngx_http_sluice_module);

        if (slcf->limits == NULL) {
            return NGX_DECLINED;
        }

        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_sluice_ctx_t));
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->answers = ngx_pcalloc(r->pool, slcf->limits->nelts
                                            * sizeof(ngx_http_sluice_answer_t));
        cln = ngx_pool_cleanup_add(r->pool, 0);

        if (ctx->answers == NULL || cln == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->request = r;
        ctx->limits = slcf->limits;
        ctx->deciding = -1;
        ctx->state = NGX_HTTP_SLUICE_STATE_DECIDING;

        cln->handler = ngx_http_sluice_cleanup;
        cln->data = ctx;

        ngx_http_set_ctx(r, ctx, ngx_http_sluice_module);

    } else if (ngx_http_get_module_ctx(r, ngx_http_sluice_module) == NULL) {
        /* An internal redirect of a request decided already. */
        return NGX_DECLINED;
    }

    for ( ;; ) {
        switch (ctx->state) {

        case NGX_HTTP_SLUICE_STATE_WAITING:
            return NGX_AGAIN;

        case NGX_HTTP_SLUICE_STATE_DONE:
            return NGX_DECLINED;

        case NGX_HTTP_SLUICE_STATE_ANSWERED:
            rc = ngx_http_sluice_judge(r, ctx, &ctx->answers[ctx->next]);
            if (rc != 0) {
                /* All or nothing, as limit_req: what the earlier limits
                 * charged is given back. */
                ngx_http_sluice_give_back(r, ctx);
                return ngx_http_sluice_finish(r, ctx, rc);
            }

            ctx->next++;
            ctx->state = NGX_HTTP_SLUICE_STATE_DECIDING;
            break;

        default: /* NGX_HTTP_SLUICE_STATE_DECIDING */

            if (ctx->next == ctx->limits->nelts) {
                return ngx_http_sluice_finish(r, ctx, NGX_DECLINED);
            }

            rc = ngx_http_sluice_start(r, ctx);

            if (rc == NGX_AGAIN) {
                return NGX_AGAIN;
            }

            if (rc != NGX_DECLINED) {
                ctx->deciding = ctx->next;
                ngx_http_sluice_give_back(r, ctx);
                return ngx_http_sluice_finish(r, ctx, rc);
            }

            ctx->next++;
            break;
        }
    }
}
