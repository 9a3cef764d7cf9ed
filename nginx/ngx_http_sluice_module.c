/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_module.c - the module: its directives, modelled on
 * limit_req's (sluice_backend: a sluice URL, named; sluice_zone: a limit,
 * a key and rules or a named limiter and its client; sluice_limit: a zone
 * used where requests come, with their cost; what a denial answers), its
 * configuration (inheritance, zones bound to backends, what named limiters
 * ask of their handles), and a worker's start and exit. The directives'
 * values are read in ngx_http_sluice_directives.c. */

#include "ngx_http_sluice_module.h"


static ngx_int_t ngx_http_sluice_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_sluice_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_sluice_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_sluice_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_sluice_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_sluice_init_process(ngx_cycle_t *cycle);
static void ngx_http_sluice_exit_process(ngx_cycle_t *cycle);


static ngx_command_t  ngx_http_sluice_commands[] = {

    { ngx_string("sluice_backend"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_http_sluice_backend,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("sluice_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_sluice_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("sluice_limit"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_http_sluice_limit,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("sluice_limit_status"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_sluice_limit_status,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("sluice_limit_log_level"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_sluice_log_level,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("sluice_limit_dry_run"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_sluice_loc_conf_t, dry_run),
      NULL },

    { ngx_string("sluice_headers"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_sluice_loc_conf_t, headers),
      NULL },

    { ngx_string("sluice_status"),
      NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_sluice_status,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_sluice_module_ctx = {
    ngx_http_sluice_preconfiguration,      /* preconfiguration */
    ngx_http_sluice_postconfiguration,     /* postconfiguration */

    ngx_http_sluice_create_main_conf,      /* create main configuration */
    ngx_http_sluice_init_main_conf,        /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_sluice_create_loc_conf,       /* create location configuration */
    ngx_http_sluice_merge_loc_conf         /* merge location configuration */
};


ngx_module_t  ngx_http_sluice_module = {
    NGX_MODULE_V1,
    &ngx_http_sluice_module_ctx,           /* module context */
    ngx_http_sluice_commands,              /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_sluice_init_process,          /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_sluice_exit_process,          /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ngx_http_sluice_preconfiguration(ngx_conf_t *cf)
{
    return ngx_http_sluice_add_variables(cf);
}


static ngx_int_t
ngx_http_sluice_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    /* Where limit_req decides: before access (allow, auth_basic), so that
     * a flood is limited before it costs an authentication. */
    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_sluice_handler;

    return NGX_OK;
}


static void *
ngx_http_sluice_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_sluice_main_conf_t  *smcf;

    smcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_sluice_main_conf_t));
    if (smcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&smcf->backends, cf->pool, 2,
                       sizeof(ngx_http_sluice_backend_t))
        != NGX_OK
        || ngx_array_init(&smcf->zones, cf->pool, 4,
                          sizeof(ngx_http_sluice_zone_t *))
           != NGX_OK)
    {
        return NULL;
    }

    return smcf;
}


static char *
ngx_http_sluice_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_sluice_status_handler;

    return NGX_CONF_OK;
}


/* Records what a named limiter asks of its backend's handles; two asks
 * that differ are refused with where each comes from. */
static char *
ngx_http_sluice_name_policy(ngx_conf_t *cf, ngx_http_sluice_zone_t *z,
    ngx_int_t shadow, u_char *where)
{
    ngx_uint_t                i;
    ngx_http_sluice_named_t  *n;

    n = z->backend->named.elts;

    for (i = 0; i < z->backend->named.nelts; i++) {
        if (n[i].limiter.len == z->limiter.len
            && ngx_strncmp(n[i].limiter.data, z->limiter.data,
                           z->limiter.len) == 0)
        {
            break;
        }
    }

    if (i == z->backend->named.nelts) {
        n = ngx_array_push(&z->backend->named);
        if (n == NULL) {
            return NGX_CONF_ERROR;
        }

        n->limiter = z->limiter;
        n->fail = NGX_HTTP_SLUICE_FAIL_UNSET;
        n->shadow = -1;
        n->where = NULL;

    } else {
        n = &n[i];
    }

    if (z->fail != NGX_HTTP_SLUICE_FAIL_UNSET) {
        if (n->fail != NGX_HTTP_SLUICE_FAIL_UNSET && n->fail != z->fail) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_zone \"%V\": limiter \"%V\" on "
                               "backend \"%V\" has another fail= in another "
                               "zone: a named limiter has one fail policy "
                               "a backend; give both zones the same, or "
                               "use a second sluice_backend",
                               &z->name, &z->limiter, &z->backend->name);
            return NGX_CONF_ERROR;
        }

        n->fail = z->fail;
    }

    if (shadow != -1) {
        if (n->shadow != -1 && n->shadow != shadow) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "sluice_limit zone=%V: limiter \"%V\" on "
                               "backend \"%V\" is run dry "
                               "(sluice_limit_dry_run on) where one "
                               "sluice_limit uses it and not where another "
                               "does (%s, %s): a named limiter has one "
                               "shadow mode a backend; use a second "
                               "sluice_backend for the dry run",
                               &z->name, &z->limiter, &z->backend->name,
                               n->where, where);
            return NGX_CONF_ERROR;
        }

        n->shadow = shadow;
        n->where = where;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_sluice_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_sluice_main_conf_t  *smcf = conf;

    ngx_uint_t                  i;
    ngx_http_sluice_zone_t    **zones, *z;
    ngx_http_sluice_backend_t  *b;

    zones = smcf->zones.elts;
    b = smcf->backends.elts;

    for (i = 0; i < smcf->zones.nelts; i++) {
        z = zones[i];

        if (!z->defined) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "sluice_limit zone=%V in %s: no sluice_zone "
                          "\"%V\" is defined", &z->name, z->where, &z->name);
            return NGX_CONF_ERROR;
        }

        if (z->backend_name.data != NULL) {
            z->backend = ngx_http_sluice_find_backend(smcf, &z->backend_name);

            if (z->backend == NULL) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "sluice_zone \"%V\": no sluice_backend "
                              "\"%V\" is defined", &z->name,
                              &z->backend_name);
                return NGX_CONF_ERROR;
            }

        } else if (smcf->backends.nelts == 1) {
            z->backend = &b[0];

        } else {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "sluice_zone \"%V\": backend= is missing, and "
                          "there are %ui sluice_backend directives to "
                          "choose from", &z->name, smcf->backends.nelts);
            return NGX_CONF_ERROR;
        }

        if (z->limiter.len > 0
            && ngx_http_sluice_name_policy(cf, z, -1, NULL) != NGX_CONF_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    if ((smcf->backends.nelts > 0 || smcf->zones.nelts > 0)
        && ngx_http_sluice_add_shm(cf, smcf) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static void *
ngx_http_sluice_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_sluice_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_sluice_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->limits = NULL;
     */

    conf->status_code = NGX_CONF_UNSET_UINT;
    conf->log_level = NGX_CONF_UNSET_UINT;
    conf->dry_run = NGX_CONF_UNSET;
    conf->headers = NGX_CONF_UNSET;

    return conf;
}


static char *
ngx_http_sluice_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_sluice_loc_conf_t *prev = parent;
    ngx_http_sluice_loc_conf_t *conf = child;

    ngx_uint_t                i, j;
    ngx_http_sluice_limit_t  *limits;

    /* As limit_req: a level's limits are inherited only where the level
     * has none of its own. */
    if (conf->limits == NULL) {
        conf->limits = prev->limits;
    }

    ngx_conf_merge_uint_value(conf->status_code, prev->status_code,
                              NGX_HTTP_TOO_MANY_REQUESTS);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_value(conf->headers, prev->headers, 1);

    if (conf->limits == NULL) {
        return NGX_CONF_OK;
    }

    limits = conf->limits->elts;

    for (i = 0; i < conf->limits->nelts; i++) {

        /* The names in RateLimit-Policy: one a zone, so distinct. */
        for (j = 0; j < i; j++) {
            if (limits[j].zone == limits[i].zone) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "sluice_limit: zone \"%V\" twice in one "
                                   "location", &limits[i].zone->name);
                return NGX_CONF_ERROR;
            }
        }

        if (limits[i].zone->limiter.len > 0
            && ngx_http_sluice_name_policy(cf, limits[i].zone, conf->dry_run,
                                           limits[i].where)
               != NGX_CONF_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_sluice_init_process(ngx_cycle_t *cycle)
{
    return ngx_http_sluice_open_backends(cycle);
}


static void
ngx_http_sluice_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_sluice_close_backends(cycle);
}
