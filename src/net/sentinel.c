/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel.c - the discovery phase of a connection with sentinels
 * (sentinel.h): one sentinel at a time, on a connection of its own whose
 * socket the outer connection shows its owner, so that the owner's loop
 * (or sl_conn_ensure's poll) drives it as any other phase. */
#include "net/sentinel.h"

#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static sl_sentinel *of_ask(sl_conn *ask)
{
    return (sl_sentinel *)(void *)((char *)ask - offsetof(sl_sentinel, ask));
}

/* The asking connection closes its socket: the owner of the outer one,
 * which shows that socket, stops watching it first. */
static void ask_unwatch(void *data, sl_conn *ask)
{
    sl_conn *cn = data;

    if (cn->fd >= 0 && cn->fd == ask->fd) {
        sl_conn_unwatch(cn);
        cn->fd = -1;
    }
}

/* Appends "host:port what" to the round's account of its sentinels (a
 * failure of the connection names its sentinel already: "sentinel:
 * host:port ..."). */
static void note(sl_sentinel *s, const char *what)
{
    size_t at = strlen(s->why);

    if (strncmp(what, "sentinel: ", 10) == 0)
        snprintf(s->why + at, sizeof(s->why) - at, "%s%s", at > 0 ? "; " : "",
                 what + 10);
    else
        snprintf(s->why + at, sizeof(s->why) - at, "%s%s:%d %s",
                 at > 0 ? "; " : "", s->ask_ep.host, s->ask_ep.port, what);
}

/* A port from a reply: 1..65535, digits only. */
static bool read_port(const char *p, size_t n, int *port)
{
    long v = 0;
    size_t k;

    if (n == 0 || n > 5)
        return false;
    for (k = 0; k < n; k++) {
        if (p[k] < '0' || p[k] > '9')
            return false;
        v = v * 10 + (p[k] - '0');
    }
    *port = (int)v;
    return v >= 1 && v <= 65535;
}

/* SENTINEL GET-MASTER-ADDR-BY-NAME's answer: [host, port], nil for a
 * name the sentinel does not know, or an error (a wrong password). */
static void on_addr(sl_conn *ask, struct sl_job *job, size_t i, redisReply *r,
                    sluice_status st, bool sent, const char *msg)
{
    sl_sentinel *s = of_ask(ask);
    int port = 0;
    char said[SL_ESCAPE_SHOWN * 4 + 64];

    (void)job;
    (void)i;
    (void)st;
    (void)sent;
    if (s->ending)
        return;
    s->done = true;
    if (r == NULL) {
        note(s, msg != NULL ? msg : "failed");
        return;
    }
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(said, sizeof(said), "does not know a master \"%s\"",
                 s->url->master);
        note(s, said);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char esc[SL_ESCAPE_SHOWN * 4 + 8];

        sl_escape(esc, sizeof(esc), r->str, r->len);
        snprintf(said, sizeof(said), "answered %s", esc);
        note(s, said);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[0]->len == 0 ||
        r->element[0]->len >= sizeof(s->master_ep.host) ||
        memchr(r->element[0]->str, '\0', r->element[0]->len) != NULL ||
        !read_port(r->element[1]->str, r->element[1]->len, &port)) {
        char got[200];

        sl_reply_describe(got, sizeof(got), r);
        snprintf(said, sizeof(said), "answered %s, not a master's [host, port]",
                 got);
        note(s, said);
        return;
    }
    memcpy(s->master_ep.host, r->element[0]->str, r->element[0]->len);
    s->master_ep.host[r->element[0]->len] = '\0';
    s->master_ep.port = port;
    s->answered = true;
}

/* Ends the try under way: its connection closes, quietly. */
static void end_try(sl_sentinel *s)
{
    s->ending = true;
    sl_conn_close(&s->ask);
    s->ending = false;
}

/* Asks sentinel i, within its share of the round's time: what is left,
 * divided among the sentinels not tried yet. */
static void ask(sl_conn *cn, size_t i)
{
    sl_sentinel *s = cn->sen;
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                           s->url->master};
    size_t lens[3] = {8, 23, strlen(s->url->master)};
    int64_t now = sl_mono_ms(), left = s->round_deadline - now, share;
    char err[SL_ERR_LEN];

    share = left / (int64_t)(s->url->nseeds - s->tried);
    if (share < 1)
        share = 1;
    end_try(s);
    s->at = i;
    s->tried++;
    s->done = s->answered = false;
    snprintf(s->ask_ep.host, sizeof(s->ask_ep.host), "%s",
             s->url->seeds[i].host);
    s->ask_ep.port = s->url->seeds[i].port;
    s->cfg.connect_timeout_ms = (uint32_t)share;
    s->deadline = now + share;
    cn->connect_deadline = s->deadline;
    sl_conn_prepare(&s->ask, &s->ask_ep, &s->cfg, "sentinel");
    s->ask.ev = (sl_conn_events){cn, ask_unwatch, NULL};
    if (sl_conn_append(&s->ask, 3, argv, lens, err, sizeof(err)) != SLUICE_OK ||
        sl_conn_expect(&s->ask, on_addr, NULL, 0) != SLUICE_OK) {
        s->done = true;
        note(s, "out of memory");
        return;
    }
    sl_conn_kick(&s->ask);
}

/* The asking connection's socket is the outer one's, for its owner. */
static void mirror(sl_conn *cn)
{
    sl_sentinel *s = cn->sen;

    if (cn->fd != s->ask.fd) {
        sl_conn_unwatch(cn);
        cn->fd = s->ask.fd;
    }
}

/* After each step: the master named (connect to it), this sentinel done
 * without naming it (the next), or still under way. */
static void settle(sl_conn *cn)
{
    sl_sentinel *s = cn->sen;

    for (;;) {
        if (s->answered) {
            bool moved =
                s->known && (strcmp(s->last_host, s->master_ep.host) != 0 ||
                             s->last_port != s->master_ep.port);

            s->switches += moved;
            s->discoveries++;
            s->known = true;
            snprintf(s->last_host, sizeof(s->last_host), "%s",
                     s->master_ep.host);
            s->last_port = s->master_ep.port;
            s->first = s->at;
            end_try(s);
            sl_conn_unwatch(cn);
            cn->fd = -1;
            cn->phase = SL_PHASE_CLOSED;
            sl_conn_connect_found(cn);
            return;
        }
        if (!s->done && s->ask.phase != SL_PHASE_CLOSED) {
            mirror(cn);
            return;
        }
        if (!s->done)
            note(s, s->ask.last_failure[0] ? s->ask.last_failure : "closed");
        if (s->tried >= s->url->nseeds) {
            end_try(s);
            sl_conn_unwatch(cn);
            cn->fd = -1;
            cn->phase = SL_PHASE_CLOSED;
            sl_conn_fail(cn, SLUICE_ECONNECT,
                         "unknown: no sentinel named it: %s", s->why);
            return;
        }
        ask(cn, (s->at + 1) % s->url->nseeds);
    }
}

sluice_status sl_conn_use_sentinels(sl_conn *cn, const sl_url *url)
{
    sl_sentinel *s = sl_calloc(1, sizeof(*s));

    if (s == NULL)
        return SLUICE_ENOMEM;
    s->url = url;
    s->cfg = *cn->cfg;
    s->ask_ep = url->sentinel_ep;
    s->master_ep = url->ep;
    sl_conn_prepare(&s->ask, &s->ask_ep, &s->cfg, "sentinel");
    cn->sen = s;
    cn->ep = &s->master_ep;
    return SLUICE_OK;
}

void sl_sentinel_start(sl_conn *cn)
{
    sl_sentinel *s = cn->sen;

    s->why[0] = '\0';
    s->tried = 0;
    s->round_deadline = cn->connect_deadline;
    cn->phase = SL_PHASE_DISCOVER;
    ask(cn, s->first);
    settle(cn);
}

void sl_sentinel_io(sl_conn *cn, short revents)
{
    sl_conn_io(&cn->sen->ask, revents);
    settle(cn);
}

short sl_sentinel_wants(const sl_conn *cn)
{
    return sl_conn_wants(&cn->sen->ask);
}

void sl_sentinel_check_deadline(sl_conn *cn, int64_t now)
{
    sl_sentinel *s = cn->sen;

    if (now < s->deadline)
        return;
    if (!s->done) {
        char msg[96];

        snprintf(msg, sizeof(msg), "did not answer in %lld ms",
                 (long long)s->cfg.connect_timeout_ms);
        note(s, msg);
        s->done = true;
    }
    settle(cn);
}

void sl_sentinel_drop(sl_conn *cn)
{
    sl_sentinel *s = cn->sen;

    end_try(s);
    if (cn->fd >= 0)
        sl_conn_unwatch(cn);
    cn->fd = -1;
}

void sl_sentinel_free(sl_sentinel *s)
{
    if (s == NULL)
        return;
    s->ask.ev.unwatch = NULL;
    end_try(s);
    sl_free(s);
}

bool sl_sentinel_is_master(const redisReply *r, char *role, size_t role_len)
{
    const redisReply *e;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        (r->element[0]->type != REDIS_REPLY_STRING &&
         r->element[0]->type != REDIS_REPLY_STATUS)) {
        sl_reply_describe(role, role_len, r);
        return false;
    }
    e = r->element[0];
    snprintf(role, role_len, "%.*s", (int)(e->len > 40 ? 40 : e->len), e->str);
    return e->len == 6 && memcmp(e->str, "master", 6) == 0;
}
