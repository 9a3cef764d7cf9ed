/* SPDX-License-Identifier: BSD-3-Clause */
/* gateway.c - a small HTTP front (libevent's evhttp) limited by sluice:
 * one handle opened with a limits file (examples/gateway.yml: every
 * limiter's rules, overrides and policy), the path mapped to a limiter
 * by a table, the client named by its X-Client-Key header (else its
 * address), the cost by X-Cost (default 1), each request decided by name
 * on the loop and answered as sluice_http_status says (docs/HTTP.md),
 * the fields added one by one, the HTTP policy's name and unit the
 * limiter's. GET /metrics is the Prometheus page; SIGHUP reloads the
 * file. A Redis restarted empty costs nothing: the file's limiters are
 * defined again at their first decision.
 *   gateway URL PORT [LIMITS_FILE]    e.g. redis://127.0.0.1:6379 8080
 *                                     examples/gateway.yml (the default) */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <sluice/libevent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which limiter decides a path: the first whose prefix it has. */
static const struct route {
    const char *prefix, *limiter;
} routes[] = {
    {"/api/", "api"},
    {"/login", "login"},
    {"/llm/", "llm"},
    {"/hot/", "hot"},
};

static sluice *sl;

/* A request on its way: the limiter its answer is for. */
typedef struct pending {
    struct evhttp_request *req;
    const char *limiter;
} pending;

static void reply(struct evhttp_request *req, int code, const char *type,
                  const char *text)
{
    struct evbuffer *body = evbuffer_new();

    if (type != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "Content-Type", type);
    evbuffer_add(body, text, strlen(text));
    evhttp_send_reply(req, code, NULL, body); /* the code's own phrase */
    evbuffer_free(body);
}

/* sluice_http_each's callback: one field of the answer. */
static int add_field(void *headers, const char *name, const char *value)
{
    return evhttp_add_header(headers, name, value);
}

static void decided(sluice *h, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    pending *p = arg;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(p->req);
    const sluice_ruleset *rules = NULL;
    sluice_decision d;
    char text[2048];
    int code;

    (void)n;
    if (st != SLUICE_OK) { /* neither a decision nor the fail policy's */
        snprintf(text, sizeof(text), "rate limiter: %s\n", sluice_errmsg(h));
        reply(p->req, 500, "text/plain", text);
        free(p);
        return;
    }
    /* The rules that decided the answer (none for a listed client or the
     * fail policy's open or closed answer, which carry no fields), the
     * rules it exceeded, its time, and the limiter's HTTP name and unit
     * (its policy in the limits file): ready for sluice_http_*. */
    sluice_decision_init(&d);
    if (sluice_last_decision(h, 0, &d) == SLUICE_OK && d.rules.count > 0)
        rules = &d.rules;
    sluice_http_each(rules, res, &d.http, add_field, headers);
    evhttp_add_header(headers, "X-Sluice-Status",
                      sluice_status_name(res->status));
    if ((code = sluice_http_status(res, &d.http)) == 0) {
        reply(p->req, 200, "text/plain", "ok\n");
    } else {
        sluice_http_body(rules, res, &d.http, text, sizeof(text));
        reply(p->req, code, SLUICE_HTTP_PROBLEM_TYPE, text);
    }
    free(p);
}

static void metrics(struct evhttp_request *req)
{
    size_t len = 1 << 16, need;
    char *buf = malloc(len);

    /* The counters grow between calls: a larger buffer until it fits. */
    while (buf != NULL &&
           (need = sluice_metrics_page(&sl, NULL, 1, 0, buf, len)) >= len) {
        free(buf);
        buf = malloc(len = need + 4096);
    }
    reply(req, buf != NULL ? 200 : 500, "text/plain; version=0.0.4",
          buf != NULL ? buf : "out of memory\n");
    free(buf);
}

static void handle(struct evhttp_request *req, void *arg)
{
    const char *path = evhttp_request_get_uri(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *client = evhttp_find_header(in, "X-Client-Key");
    const char *cost = evhttp_find_header(in, "X-Cost");
    pending *p;
    char *peer = NULL, text[600];
    ev_uint16_t port;
    size_t i;

    (void)arg;
    if (strcmp(path, "/metrics") == 0) {
        metrics(req);
        return;
    }
    for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (strncmp(path, routes[i].prefix, strlen(routes[i].prefix)) == 0)
            break;
    if (i == sizeof(routes) / sizeof(routes[0])) {
        reply(req, 404, "text/plain", "no such route\n");
        return;
    }
    if (client == NULL || client[0] == '\0') {
        evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer,
                                   &port);
        client = peer != NULL ? peer : "unknown";
    }
    if ((p = malloc(sizeof(*p))) == NULL) {
        reply(req, 500, "text/plain", "out of memory\n");
        return;
    }
    p->req = req;
    p->limiter = routes[i].limiter;
    if (sluice_limiter_acquire_async(
            sl, p->limiter, strlen(p->limiter), client, strlen(client),
            cost != NULL ? atoll(cost) : 1, decided, p) != SLUICE_OK) {
        snprintf(text, sizeof(text), "bad request: %s\n", sluice_errmsg(sl));
        reply(req, 400, "text/plain", text);
        free(p);
    }
}

/* SIGHUP: the limits file again; a fault keeps the last good one. */
static void on_hangup(evutil_socket_t sig, short what, void *arg)
{
    char err[512];

    (void)sig;
    (void)what;
    (void)arg;
    if (sluice_limits_reload(sl, err, sizeof(err)) == SLUICE_OK)
        fprintf(stderr, "gateway: limits reloaded\n");
    else
        fprintf(stderr, "gateway: limits not reloaded: %s\n", err);
}

static void on_stop(evutil_socket_t sig, short what, void *base)
{
    (void)sig;
    (void)what;
    event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
    struct event *hup, *term;
    struct event_base *base;
    struct evhttp *http;
    sluice_options opts;
    char err[512];
    int port;

    if (argc < 3) {
        fprintf(stderr, "usage: %s URL PORT [LIMITS_FILE]\n", argv[0]);
        return 2;
    }
    port = atoi(argv[2]);
    sluice_options_init(&opts);
    opts.limits_file = argc > 3 ? argv[3] : "examples/gateway.yml";
    if (sluice_open(argv[1], &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "gateway: %s\n", err);
        return 1;
    }
    base = event_base_new();
    if (base == NULL || sluice_libevent_attach(sl, base) != SLUICE_OK) {
        fprintf(stderr, "gateway: cannot attach: %s\n", sluice_errmsg(sl));
        return 1;
    }
    http = evhttp_new(base);
    if (http == NULL ||
        evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
        fprintf(stderr, "gateway: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    evhttp_set_gencb(http, handle, NULL);
    hup = evsignal_new(base, SIGHUP, on_hangup, NULL);
    term = evsignal_new(base, SIGTERM, on_stop, base);
    evsignal_add(hup, NULL);
    evsignal_add(term, NULL);
    printf("listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    event_base_dispatch(base);
    event_free(hup);
    event_free(term);
    evhttp_free(http);
    sluice_close(sl);
    event_base_free(base);
    return 0;
}
