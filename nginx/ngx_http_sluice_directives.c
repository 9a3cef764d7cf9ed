/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_directives.c - what sluice_backend, sluice_zone and
 * sluice_limit read: each value checked as it is read, with sluice's own
 * parsers (rules, URLs), so that `nginx -t` names the directive and the
 * value it refuses. A zone may be used before it is defined; what stays
 * undefined is refused once the http{} block is read. */

#include "ngx_http_sluice_module.h"


/* "FILE:LINE" of the directive being read, for messages given later. */
static u_char *
ngx_http_sluice_where(ngx_conf_t *cf)
{
    u_char  *p, *last;
    size_t   len;

    len = cf->conf_file->file.name.len + NGX_INT_T_LEN + 2;

    p = ngx_pnalloc(cf->pool, len);
    if (p == NULL) {
        return NULL;
    }

    last = ngx_snprintf(p, len - 1, "%V:%ui", &cf->conf_file->file.name,
                        cf->conf_file->line);
    *last = '\0';

    return p;
}


ngx_http_sluice_backend_t *
ngx_http_sluice_find_backend(ngx_http_sluice_main_conf_t *smcf,
    ngx_str_t *name)
{
    ngx_uint_t                  i;
    ngx_http_sluice_backend_t  *b;

    b = smcf->backends.elts;

    for (i = 0; i < smcf->backends.nelts; i++) {
        if (b[i].name.len == name->len
            && ngx_strncmp(b[i].name.data, name->data, name->len) == 0)
        {
            return &b[i];
        }
    }

    return NULL;
}


/* The zone of that name: defined or not yet (a use may come first). */
static ngx_http_sluice_zone_t *
ngx_http_sluice_get_zone(ngx_conf_t *cf, ngx_http_sluice_main_conf_t *smcf,
    ngx_str_t *name)
{
    ngx_uint_t               i;
    ngx_http_sluice_zone_t  *z, **zones, **slot;

    zones = smcf->zones.elts;

    for (i = 0; i < smcf->zones.nelts; i++) {
        if (zones[i]->name.len == name->len
            && ngx_strncmp(zones[i]->name.data, name->data, name->len) == 0)
        {
            return zones[i];
        }
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_sluice_zone_t));
    slot = ngx_array_push(&smcf->zones);

    if (z == NULL || slot == NULL) {
        return NULL;
    }

    z->name = *name;
    z->fail = NGX_HTTP_SLUICE_FAIL_UNSET;
    z->index = smcf->zones.nelts - 1;
    *slot = z;

    return z;
}


/* A name for headers and keys: 1..63 of A-Z a-z 0-9 . _ - */
static ngx_int_t
ngx_http_sluice_valid_name(ngx_str_t *s, size_t max)
{
    size_t  i;
    u_char  c;

    if (s->len == 0 || s->len > max) {
        return NGX_ERROR;
    }

    for (i = 0; i < s->len; i++) {
        c = s->data[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


char *
ngx_http_sluice_backend(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_main_conf_t  *smcf = conf;

    ngx_str_t                  *value;
    ngx_http_sluice_backend_t  *b;

    value = cf->args->elts;

    if (ngx_http_sluice_valid_name(&value[1], 63) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_backend: invalid name \"%V\": expected "
                           "1 to 63 of A-Z a-z 0-9 . _ -", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ngx_http_sluice_find_backend(smcf, &value[1]) != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_backend: duplicate name \"%V\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    b = ngx_array_push(&smcf->backends);
    if (b == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(b, sizeof(ngx_http_sluice_backend_t));

    b->name = value[1];
    b->url = value[2];        /* the parser ends each value with a NUL */
    b->index = smcf->backends.nelts - 1;

    if (ngx_array_init(&b->named, cf->pool, 2,
                       sizeof(ngx_http_sluice_named_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    if (ngx_http_sluice_check_backend(cf, b) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_sluice_parse_fail(ngx_str_t *v)
{
    static const char  *names[] = { "error", "open", "closed", "fallback" };
    static const sluice_fail_policy  policies[] = {
        SLUICE_FAIL_ERROR, SLUICE_FAIL_OPEN, SLUICE_FAIL_CLOSED,
        SLUICE_FAIL_FALLBACK
    };

    ngx_uint_t  i;

    for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
        if (v->len == ngx_strlen(names[i])
            && ngx_strncmp(v->data, names[i], v->len) == 0)
        {
            return (ngx_int_t) policies[i];
        }
    }

    return NGX_ERROR;
}


/* The unit= of a zone: the draft's registered units, or a name of the
 * service's own (qu="tokens"). */
static char *
ngx_http_sluice_parse_unit(ngx_conf_t *cf, ngx_http_sluice_zone_t *z,
    ngx_str_t *v)
{
    if (v->len == 8 && ngx_strncmp(v->data, "requests", 8) == 0) {
        z->unit = SLUICE_UNIT_REQUESTS;
        return NGX_CONF_OK;
    }

    if (v->len == 13 && ngx_strncmp(v->data, "content-bytes", 13) == 0) {
        z->unit = SLUICE_UNIT_CONTENT_BYTES;
        return NGX_CONF_OK;
    }

    if (ngx_http_sluice_valid_name(v, 64) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_zone: invalid unit=\"%V\": expected "
                           "requests, content-bytes, or a name of 1 to 64 "
                           "of A-Z a-z 0-9 . _ -", v);
        return NGX_CONF_ERROR;
    }

    z->unit = SLUICE_UNIT_REQUESTS;
    z->unit_name = *v;        /* a suffix of a NUL-terminated value */

    return NGX_CONF_OK;
}


#define ngx_http_sluice_param(v, p)                                        \
    ((v)->len >= sizeof(p) - 1                                             \
     && ngx_strncmp((v)->data, p, sizeof(p) - 1) == 0)


char *
ngx_http_sluice_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_main_conf_t  *smcf = conf;

    char                              err[512];
    ngx_str_t                        *value, s, name, key, unit, backend;
    ngx_str_t                         rules, limiter, fail;
    ngx_int_t                         policy;
    ngx_uint_t                        i;
    sluice_status                     st;
    ngx_http_sluice_zone_t           *z;
    ngx_http_compile_complex_value_t  ccv;

    value = cf->args->elts;

    ngx_str_null(&name);
    ngx_str_null(&key);
    ngx_str_null(&unit);
    ngx_str_null(&backend);
    ngx_str_null(&rules);
    ngx_str_null(&limiter);
    ngx_str_null(&fail);

    for (i = 1; i < cf->args->nelts; i++) {
        s = value[i];

        if (ngx_http_sluice_param(&s, "zone=")) {
            name.data = s.data + 5;
            name.len = s.len - 5;

        } else if (ngx_http_sluice_param(&s, "backend=")) {
            backend.data = s.data + 8;
            backend.len = s.len - 8;

        } else if (ngx_http_sluice_param(&s, "rules=")) {
            rules.data = s.data + 6;
            rules.len = s.len - 6;

        } else if (ngx_http_sluice_param(&s, "limiter=")) {
            limiter.data = s.data + 8;
            limiter.len = s.len - 8;

        } else if (ngx_http_sluice_param(&s, "fail=")) {
            fail.data = s.data + 5;
            fail.len = s.len - 5;

        } else if (ngx_http_sluice_param(&s, "unit=")) {
            unit.data = s.data + 5;
            unit.len = s.len - 5;

        } else if (i == 1) {
            key = s;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone: invalid parameter \"%V\": "
                               "expected zone=, backend=, rules=, "
                               "limiter=, fail= or unit=", &s);
            return NGX_CONF_ERROR;
        }
    }

    if (ngx_http_sluice_valid_name(&name, 63) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_zone: %s zone=\"%V\": expected 1 to 63 "
                           "of A-Z a-z 0-9 . _ -",
                           name.data == NULL ? "missing" : "invalid", &name);
        return NGX_CONF_ERROR;
    }

    z = ngx_http_sluice_get_zone(cf, smcf, &name);
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    if (z->defined) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_zone: duplicate zone \"%V\"", &name);
        return NGX_CONF_ERROR;
    }

    z->defined = 1;
    z->where = NULL;
    z->backend_name = backend;

    if ((rules.data == NULL) == (limiter.data == NULL)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_zone \"%V\": give either rules= (a key's "
                           "rules) or limiter= (a named limiter)", &name);
        return NGX_CONF_ERROR;
    }

    if (rules.data != NULL) {
        if (key.data == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone \"%V\": rules= needs a key, "
                               "as in \"sluice_zone $binary_remote_addr "
                               "zone=%V rules=%V\"", &name, &name, &rules);
            return NGX_CONF_ERROR;
        }

        st = sluice_ruleset_parse((const char *) rules.data, &z->rules, err,
                                  sizeof(err));
        if (st != SLUICE_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone \"%V\": invalid rules=\"%V\": %s",
                               &name, &rules, err);
            return NGX_CONF_ERROR;
        }

        z->rules_text = rules;
    }

    if (limiter.data != NULL) {
        if (limiter.len == 0 || limiter.len > 1000) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone \"%V\": invalid limiter=\"%V\": "
                               "expected a name of 1 to 1000 bytes",
                               &name, &limiter);
            return NGX_CONF_ERROR;
        }

        z->limiter = limiter;
    }

    if (key.data != NULL) {
        z->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
        if (z->key == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));

        ccv.cf = cf;
        ccv.value = &key;
        ccv.complex_value = z->key;

        if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    if (fail.data != NULL) {
        policy = ngx_http_sluice_parse_fail(&fail);

        if (policy == NGX_ERROR) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone \"%V\": invalid fail=\"%V\": "
                               "expected error, open, closed or fallback",
                               &name, &fail);
            return NGX_CONF_ERROR;
        }

        z->fail = policy;
    }

    if (unit.data != NULL) {
        return ngx_http_sluice_parse_unit(cf, z, &unit);
    }

    return NGX_CONF_OK;
}


char *
ngx_http_sluice_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t  *slcf = conf;

    u_char                            *where;
    ngx_str_t                         *value, s, name, cost;
    ngx_uint_t                         i;
    ngx_http_sluice_zone_t            *z;
    ngx_http_sluice_limit_t           *limit, *limits;
    ngx_http_sluice_main_conf_t       *smcf;
    ngx_http_compile_complex_value_t   ccv;

    value = cf->args->elts;

    ngx_str_null(&name);
    ngx_str_null(&cost);

    for (i = 1; i < cf->args->nelts; i++) {
        s = value[i];

        if (ngx_http_sluice_param(&s, "zone=")) {
            name.data = s.data + 5;
            name.len = s.len - 5;

        } else if (ngx_http_sluice_param(&s, "cost=")) {
            cost.data = s.data + 5;
            cost.len = s.len - 5;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_limit: invalid parameter \"%V\": "
                               "expected zone= and cost=", &s);
            return NGX_CONF_ERROR;
        }
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_limit: zone= is missing");
        return NGX_CONF_ERROR;
    }

    smcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_sluice_module);

    z = ngx_http_sluice_get_zone(cf, smcf, &name);
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    where = ngx_http_sluice_where(cf);
    if (where == NULL) {
        return NGX_CONF_ERROR;
    }

    if (!z->defined && z->where == NULL) {
        z->where = where;
    }

    if (slcf->limits == NULL) {
        slcf->limits = ngx_array_create(cf->pool, 1,
                                        sizeof(ngx_http_sluice_limit_t));
        if (slcf->limits == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    limits = slcf->limits->elts;

    for (i = 0; i < slcf->limits->nelts; i++) {
        if (limits[i].zone == z) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_limit: zone \"%V\" twice here",
                               &name);
            return NGX_CONF_ERROR;
        }
    }

    limit = ngx_array_push(slcf->limits);
    if (limit == NULL) {
        return NGX_CONF_ERROR;
    }

    limit->zone = z;
    limit->cost = NULL;
    limit->where = where;

    if (cost.data != NULL) {
        limit->cost = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
        if (limit->cost == NULL) {
            return NGX_CONF_ERROR;
        }

        ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));

        ccv.cf = cf;
        ccv.value = &cost;
        ccv.complex_value = limit->cost;

        if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
            return NGX_CONF_ERROR;
        }

        /* A constant cost is checked now, as the request would. */
        if (limit->cost->lengths == NULL
            && (ngx_atoi(cost.data, cost.len) == NGX_ERROR
                || ngx_atoi(cost.data, cost.len) > 1000000000))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_limit: invalid cost=\"%V\": expected "
                               "0 to 1000000000 (0: not counted) or a "
                               "variable", &cost);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* sluice_limit_status: 400 to 599, the value named when it is not. */
char *
ngx_http_sluice_limit_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t  *slcf = conf;

    ngx_int_t   code;
    ngx_str_t  *value;

    if (slcf->status_code != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;
    code = ngx_atoi(value[1].data, value[1].len);

    if (code < 400 || code > 599) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "sluice_limit_status: invalid code \"%V\": "
                           "expected 400 to 599", &value[1]);
        return NGX_CONF_ERROR;
    }

    slcf->status_code = code;

    return NGX_CONF_OK;
}


/* sluice_limit_log_level: a level of limit_req_log_level's. */
char *
ngx_http_sluice_log_level(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_sluice_loc_conf_t  *slcf = conf;

    static ngx_str_t   names[] = {
        ngx_string("info"), ngx_string("notice"), ngx_string("warn"),
        ngx_string("error")
    };
    static ngx_uint_t  levels[] = {
        NGX_LOG_INFO, NGX_LOG_NOTICE, NGX_LOG_WARN, NGX_LOG_ERR
    };

    ngx_str_t   *value;
    ngx_uint_t   i;

    if (slcf->log_level != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        if (names[i].len == value[1].len
            && ngx_strncmp(names[i].data, value[1].data, value[1].len) == 0)
        {
            slcf->log_level = levels[i];
            return NGX_CONF_OK;
        }
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "sluice_limit_log_level: invalid level \"%V\": "
                       "expected info, notice, warn or error", &value[1]);

    return NGX_CONF_ERROR;
}
