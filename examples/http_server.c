/* SPDX-License-Identifier: BSD-3-Clause */
/* http_server.c - an HTTP service that limits each client: libevent's
 * evhttp answers every request on the same loop as sluice's async calls.
 * The client is named by its X-Client-Key header, else its address; a
 * request within the limit gets 200, one over it 429, both with the
 * RateLimit-Policy and RateLimit fields of the IETF draft, and Retry-After
 * on a 429. Nothing blocks: a slow Redis delays only its own requests.
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

/* Writes each "Name: value" line of the helper's text as a header. */
static void add_headers(struct evkeyvalq *out, char *text)
{
    char *line, *save = NULL;

    for (line = strtok_r(text, "\r\n", &save); line != NULL;
         line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');

        if (colon == NULL)
            continue;
        *colon = '\0';
        evhttp_add_header(out, line, colon + 2);
    }
}

static service *the;

static void decided(sluice *sl, void *arg, sluice_status st,
                    const sluice_result *res, size_t n)
{
    struct evhttp_request *req = arg;
    struct evbuffer *body = evbuffer_new();
    char fields[1024];

    (void)n;
    if (st != SLUICE_OK) {
        /* No decision at all (fail=error): say so, do not guess. */
        evbuffer_add_printf(body, "rate limiter unavailable: %s\n",
                            sluice_errmsg(sl));
        evhttp_send_reply(req, 503, "Service Unavailable", body);
        evbuffer_free(body);
        return;
    }
    sluice_http_headers(&the->rules, &res[0], "default", fields,
                        sizeof(fields));
    add_headers(evhttp_request_get_output_headers(req), fields);
    if (res[0].allowed) {
        evbuffer_add_printf(body, "ok, %lld left\n",
                            (long long)res[0].remaining);
        evhttp_send_reply(req, 200, "OK", body);
    } else {
        /* RFC 9457 problem details: the draft's quota-exceeded type. */
        char problem[512];

        sluice_http_problem(&the->rules, &res[0], "default", problem,
                            sizeof(problem));
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "Content-Type", "application/problem+json");
        evbuffer_add_printf(body, "%s\n", problem);
        evhttp_send_reply(req, 429, "Too Many Requests", body);
    }
    evbuffer_free(body);
}

static void handle(struct evhttp_request *req, void *arg)
{
    service *s = arg;
    const char *key = evhttp_find_header(evhttp_request_get_input_headers(req),
                                         "X-Client-Key");
    char *peer = NULL;
    ev_uint16_t port;

    if (key == NULL || key[0] == '\0') {
        evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer,
                                   &port);
        key = peer != NULL ? peer : "unknown";
    }
    if (sluice_acquire_async(s->sl, key, strlen(key), &s->rules, 1, decided,
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
