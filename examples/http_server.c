/* SPDX-License-Identifier: BSD-3-Clause */
/* http_server.c - an HTTP service that limits each client: libevent's
 * evhttp answers every request on the same loop as sluice's async calls.
 * The client is named by its X-Client-Key header, else its address; a
 * request costs its X-Cost header (default 1). The answer is the one
 * sluice_http_status gives (docs/HTTP.md): 200 within the limit, 429 over
 * it, 400 for a cost that can never fit, 503 when the limiter cannot
 * decide and fails closed; the RateLimit-Policy and RateLimit fields of
 * the IETF draft added one by one, Retry-After on a 429, and an RFC 9457
 * problem body naming every rule the request exceeded. Nothing blocks: a
 * slow Redis delays only its own requests.
 *   http_server URL PORT [RULES]    e.g. redis://127.0.0.1:6379 8080
 *                                   "fixed:100/1m" (the default) */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sluice/libevent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct service {
    sluice *sl;
    sluice_ruleset rules;
} service;

static service *the;

/* sluice_http_each's callback: one field of the answer. */
static int add_field(void *headers, const char *name, const char *value)
{
    return evhttp_add_header(headers, name, value);
}

static void decided(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    struct evhttp_request *req = arg;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    struct evbuffer *body = evbuffer_new();
    sluice_http_options o;
    char problem[1024];
    int code;

    (void)n;
    if (st != SLUICE_OK) {
        /* No decision at all (fail=error): say so, do not guess. */
        evbuffer_add_printf(body, "rate limiter unavailable: %s\n",
                            sluice_errmsg(sl));
        evhttp_send_reply(req, 503, "Service Unavailable", body);
        evbuffer_free(body);
        return;
    }
    sluice_http_options_init(&o);
    o.name = "default";
    o.violated = sluice_violated(sl, 0); /* every rule it exceeded */
    sluice_http_each(&the->rules, &res[0], &o, add_field, headers);
    if ((code = sluice_http_status(&res[0], &o)) == 0) {
        evbuffer_add_printf(body, "ok\n");
        evhttp_send_reply(req, 200, "OK", body);
    } else {
        sluice_http_body(&the->rules, &res[0], &o, problem, sizeof(problem));
        evhttp_add_header(headers, "Content-Type", SLUICE_HTTP_PROBLEM_TYPE);
        evbuffer_add_printf(body, "%s\n", problem);
        evhttp_send_reply(req, code, NULL, body); /* the code's phrase */
    }
    evbuffer_free(body);
}

static void handle(struct evhttp_request *req, void *arg)
{
    service *s = arg;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *key = evhttp_find_header(in, "X-Client-Key");
    const char *cost = evhttp_find_header(in, "X-Cost");
    char *peer = NULL;
    ev_uint16_t port;

    if (key == NULL || key[0] == '\0') {
        evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer,
                                   &port);
        key = peer != NULL ? peer : "unknown";
    }
    if (sluice_acquire_async(s->sl, key, strlen(key), &s->rules,
                             cost != NULL ? atoll(cost) : 1, decided,
                             req) != SLUICE_OK) {
        struct evbuffer *body = evbuffer_new();

        evbuffer_add_printf(body, "bad request: %s\n", sluice_errmsg(s->sl));
        evhttp_send_reply(req, 400, "Bad Request", body);
        evbuffer_free(body);
    }
}

int main(int argc, char **argv)
{
    struct event_base *base;
    struct evhttp *http;
    service s;
    char err[256];
    int port;

    if (argc < 3) {
        fprintf(stderr, "usage: %s URL PORT [RULES]\n", argv[0]);
        return 2;
    }
    port = atoi(argv[2]);
    if (sluice_ruleset_parse(argc > 3 ? argv[3] : "fixed:100/1m", &s.rules, err,
                             sizeof(err)) != SLUICE_OK ||
        sluice_open(argv[1], NULL, &s.sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "http_server: %s\n", err);
        return 1;
    }
    the = &s;
    base = event_base_new();
    if (base == NULL || sluice_libevent_attach(s.sl, base) != SLUICE_OK) {
        fprintf(stderr, "http_server: cannot attach: %s\n",
                sluice_errmsg(s.sl));
        return 1;
    }
    http = evhttp_new(base);
    if (http == NULL ||
        evhttp_bind_socket(http, "127.0.0.1", (ev_uint16_t)port) != 0) {
        fprintf(stderr, "http_server: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    evhttp_set_gencb(http, handle, &s);
    printf("listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    event_base_dispatch(base);
    evhttp_free(http);
    sluice_close(s.sl);
    event_base_free(base);
    return 0;
}
