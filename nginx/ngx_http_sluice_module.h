/* SPDX-License-Identifier: BSD-3-Clause */
/* ngx_http_sluice_module.h - the types the module's files share: the
 * configuration (backends, zones, limits), the per-worker handles on
 * nginx's event loop, and a request's decisions. */

#ifndef _NGX_HTTP_SLUICE_MODULE_H_INCLUDED_
#define _NGX_HTTP_SLUICE_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <sluice.h>


/* $sluice_status, as $limit_req_status says it. */
#define NGX_HTTP_SLUICE_PASSED             1
#define NGX_HTTP_SLUICE_REJECTED           2
#define NGX_HTTP_SLUICE_REJECTED_DRY_RUN   3
#define NGX_HTTP_SLUICE_ERROR              4

/* A zone's fail= left to the backend's URL (its fail=, else error). */
#define NGX_HTTP_SLUICE_FAIL_UNSET         ((ngx_int_t) -1)


typedef struct ngx_http_sluice_backend_s  ngx_http_sluice_backend_t;


/* What a zone's named limiter asks of its backend's handle in each
 * worker: the fail policy of its zones and shadow mode where a location
 * runs it dry. One per (backend, limiter), so two zones or locations
 * that disagree are a configuration error. */
typedef struct {
    ngx_str_t                    limiter;
    ngx_int_t                    fail;      /* NGX_HTTP_SLUICE_FAIL_UNSET */
    ngx_int_t                    shadow;    /* -1 unset, 0 or 1 */
    u_char                      *where;     /* "FILE:LINE" that set shadow */
} ngx_http_sluice_named_t;


/* A watched socket of a handle: the nginx connection that carries its
 * events, by the fd sluice gave. */
typedef struct {
    int                          fd;
    ngx_connection_t            *c;         /* NULL: a free slot */
} ngx_http_sluice_watch_t;


struct ngx_http_sluice_backend_s {
    ngx_str_t                    name;
    ngx_str_t                    url;       /* NUL-terminated */
    ngx_array_t                  named;     /* of ngx_http_sluice_named_t */
    ngx_uint_t                   index;     /* in the main conf's array */

    /* One worker's, from init_process to exit_process. */
    sluice                      *sl;        /* NULL: could not open */
    ngx_event_t                  timer;
    ngx_int_t                    waiting;   /* decisions in flight */
    ngx_http_sluice_watch_t     *watch;
    ngx_uint_t                   nwatch;
    ngx_log_t                   *log;
    sluice_stats                 flushed;   /* counted in the shared zone */
};


/* sluice_zone: a limit's definition, like limit_req_zone's. */
typedef struct {
    ngx_str_t                    name;
    ngx_str_t                    backend_name;
    ngx_http_sluice_backend_t   *backend;
    ngx_http_complex_value_t    *key;       /* by key; by name the client;
                                               NULL: a limiter's one state */
    ngx_str_t                    rules_text;
    sluice_ruleset               rules;     /* by key */
    ngx_str_t                    limiter;   /* by name; len 0: by key */
    ngx_int_t                    fail;      /* NGX_HTTP_SLUICE_FAIL_UNSET */
    sluice_quota_unit            unit;
    ngx_str_t                    unit_name; /* NUL-terminated, or len 0 */
    ngx_uint_t                   index;     /* in the main conf's array */
    u_char                      *where;     /* "FILE:LINE" of its first use
                                               while undefined, else NULL */
    unsigned                     defined:1;
} ngx_http_sluice_zone_t;


/* sluice_limit: a zone used in a location, with the cost of a request. */
typedef struct {
    ngx_http_sluice_zone_t      *zone;
    ngx_http_complex_value_t    *cost;      /* NULL: 1 */
    u_char                      *where;     /* "FILE:LINE", for messages */
} ngx_http_sluice_limit_t;


typedef struct ngx_http_sluice_shctx_s  ngx_http_sluice_shctx_t;

typedef struct {
    ngx_array_t                  backends;  /* of ngx_http_sluice_backend_t */
    ngx_array_t                  zones;     /* of ngx_http_sluice_zone_t * */
    ngx_shm_zone_t              *shm_zone;  /* the counters, all workers' */
    ngx_http_sluice_shctx_t     *sh;
    ngx_event_t                  flush;     /* a worker's, every second */
} ngx_http_sluice_main_conf_t;


typedef struct {
    ngx_array_t                 *limits;    /* of ngx_http_sluice_limit_t */
    ngx_uint_t                   status_code;
    ngx_uint_t                   log_level;
    ngx_flag_t                   dry_run;
    ngx_flag_t                   headers;
    ngx_flag_t                   status_page;
} ngx_http_sluice_loc_conf_t;


/* One limit's answer in a request. */
typedef struct {
    ngx_http_sluice_limit_t     *limit;
    sluice_status                st;        /* the call's: OK or a failure */
    sluice_result                res;       /* with st SLUICE_OK */
    sluice_ruleset               rules;     /* what decided it (count 0:
                                               no rule decided) */
    unsigned                     violated;
    ngx_str_t                    key;       /* a zone by key's, as sent */
    ngx_int_t                    cost;
    unsigned                     asked:1;   /* a decision was made */
} ngx_http_sluice_answer_t;


typedef struct ngx_http_sluice_wait_s  ngx_http_sluice_wait_t;

/* A request's decisions: in its pool, found again after an internal
 * redirect through the pool's cleanup (the request is limited once). */
typedef struct {
    ngx_http_request_t          *request;
    ngx_array_t                 *limits;    /* the location's */
    ngx_http_sluice_answer_t    *answers;   /* one a limit */
    ngx_uint_t                   next;      /* the limit being decided */
    ngx_uint_t                   state;     /* NGX_HTTP_SLUICE_STATE_* */
    ngx_int_t                    rc;        /* the phase's answer */
    ngx_uint_t                   outcome;   /* NGX_HTTP_SLUICE_PASSED... */
    ngx_int_t                    deciding;  /* the answer the variables
                                               tell, -1: none */
    ngx_http_sluice_wait_t      *wait;      /* the decision in flight */
} ngx_http_sluice_ctx_t;

#define NGX_HTTP_SLUICE_STATE_DECIDING   0  /* the next limit to start */
#define NGX_HTTP_SLUICE_STATE_WAITING    1  /* a decision in flight */
#define NGX_HTTP_SLUICE_STATE_ANSWERED   2  /* its callback has run */
#define NGX_HTTP_SLUICE_STATE_DONE       3  /* ctx->rc is the answer */

/* Outlives the request if need be: the callback of a decision whose
 * request has gone finds ctx NULL. Allocated with ngx_alloc. */
struct ngx_http_sluice_wait_s {
    ngx_http_sluice_ctx_t       *ctx;
    ngx_http_sluice_backend_t   *backend;
};


extern ngx_module_t  ngx_http_sluice_module;


/* ngx_http_sluice_directives.c */
char *ngx_http_sluice_backend(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_sluice_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_sluice_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_sluice_limit_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_sluice_log_level(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_http_sluice_backend_t *ngx_http_sluice_find_backend(
    ngx_http_sluice_main_conf_t *smcf, ngx_str_t *name);

/* ngx_http_sluice_loop.c */
ngx_int_t ngx_http_sluice_check_backend(ngx_conf_t *cf,
    ngx_http_sluice_backend_t *b);
ngx_int_t ngx_http_sluice_open_backends(ngx_cycle_t *cycle);
void ngx_http_sluice_close_backends(ngx_cycle_t *cycle);
void ngx_http_sluice_backend_busy(ngx_http_sluice_backend_t *b,
    ngx_int_t delta);
extern ngx_uint_t  ngx_http_sluice_exiting;

/* ngx_http_sluice_status.c */
ngx_int_t ngx_http_sluice_add_shm(ngx_conf_t *cf,
    ngx_http_sluice_main_conf_t *smcf);
void ngx_http_sluice_count(ngx_http_sluice_zone_t *z, ngx_uint_t outcome,
    ngx_int_t status);
void ngx_http_sluice_flush(ngx_http_sluice_main_conf_t *smcf);
void ngx_http_sluice_start_flush(ngx_cycle_t *cycle,
    ngx_http_sluice_main_conf_t *smcf);
void ngx_http_sluice_stop_flush(ngx_http_sluice_main_conf_t *smcf);
ngx_int_t ngx_http_sluice_status_handler(ngx_http_request_t *r);

/* ngx_http_sluice_access.c */
ngx_int_t ngx_http_sluice_handler(ngx_http_request_t *r);
ngx_http_sluice_ctx_t *ngx_http_sluice_get_ctx(ngx_http_request_t *r);

/* ngx_http_sluice_refund.c */
void ngx_http_sluice_give_back(ngx_http_request_t *r,
    ngx_http_sluice_ctx_t *ctx);
ngx_int_t ngx_http_sluice_add_variables(ngx_conf_t *cf);


#endif /* _NGX_HTTP_SLUICE_MODULE_H_INCLUDED_ */
