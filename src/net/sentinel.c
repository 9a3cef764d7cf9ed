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

/* The discovery state of cn (sl_conn_use_sentinels). */
static sl_sentinel *sen(const sl_conn *cn)
{
    return cn->disc_state;
}

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
    sl_sentinel *s = sen(cn);
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
    sl_sentinel *s = sen(cn);

    if (cn->fd != s->ask.fd) {
        sl_conn_unwatch(cn);
        cn->fd = s->ask.fd;
    }
}

/* After each step: the master named (connect to it), this sentinel done
 * without naming it (the next), or still under way. */
static void settle(sl_conn *cn)
{
    sl_sentinel *s = sen(cn);

    for (;;) {
        if (s->answered) {
            bool moved =
                s->known && (strcmp(s->last_host, s->master_ep.host) != 0 ||
                             s->last_port != s->master_ep.port);

            if (moved)
                atomic_fetch_add(&s->switches, 1);
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

static sl_sentinel *of_sub(sl_conn *sub)
{
    return (sl_sentinel *)(void *)((char *)sub - offsetof(sl_sentinel, sub));
}

static void on_switch(sl_conn *sub, struct sl_job *job, size_t i, redisReply *r,
                      sluice_status st, bool sent, const char *msg);

/* Queues SUBSCRIBE +switch-master on sentinel s->sub_at; the engine
 * starts its connect (kick: now), with the usual backoff after failures. */
static void subscribe(sl_sentinel *s, bool kick)
{
    const char *argv[4] = {"SUBSCRIBE", "+switch-master", "+promoted-slave",
                           "+selected-slave"};
    size_t lens[4] = {9, 14, 15, 15};
    char err[SL_ERR_LEN];

    if (s->sub.phase != SL_PHASE_CLOSED || s->sub.qlen > 0)
        return;
    s->sub_ep = s->url->sentinel_ep;
    snprintf(s->sub_ep.host, sizeof(s->sub_ep.host), "%s",
             s->url->seeds[s->sub_at].host);
    s->sub_ep.port = s->url->seeds[s->sub_at].port;
    s->sub.addrs.n = 0;
    if (sl_conn_append(&s->sub, 4, argv, lens, err, sizeof(err)) == SLUICE_OK &&
        sl_conn_expect(&s->sub, on_switch, NULL, 0) == SLUICE_OK && kick)
        sl_conn_kick(&s->sub);
}

/* How long an announced new master is waited for: a failover's
 * promotion, in the sentinels' INFO period (1 s) and some. */
#define HINT_MS 5000

/* Whether an event's text names our master: "+switch-master NAME ..."
 * starts with it, "+promoted-slave slave ... @ NAME IP PORT" has it after
 * the '@'. */
static bool names(const sl_sentinel *s, const char *t, size_t n, size_t nl)
{
    const char *name = s->url->master;
    size_t k;

    if (n > nl && memcmp(t, name, nl) == 0 && t[nl] == ' ')
        return true;
    for (k = 0; k + 3 + nl < n; k++)
        if (t[k] == ' ' && t[k + 1] == '@' && t[k + 2] == ' ' &&
            memcmp(t + k + 3, name, nl) == 0 && t[k + 3 + nl] == ' ')
            return true;
    return false;
}

/* The new master an event names, for the next connects to try alone
 * (their ROLE checked): "+switch-master NAME OIP OPORT NIP NPORT", or
 * "+selected-slave" and "+promoted-slave", "slave NAME IP PORT @ MASTER
 * ...", from the sentinel that leads a failover: it announces the
 * replica it chose, then, up to a second after the replica turned
 * master, its promotion. */
static void hint(sl_sentinel *s, const redisReply *ch, const redisReply *m)
{
    char text[600], *w[8], *save = NULL, *p;
    size_t n = 0;
    int port;
    bool sw = ch->type == REDIS_REPLY_STRING && ch->len == 14 &&
              memcmp(ch->str, "+switch-master", 14) == 0;

    if (m->len >= sizeof(text))
        return;
    memcpy(text, m->str, m->len);
    text[m->len] = '\0';
    for (p = strtok_r(text, " ", &save); p != NULL && n < 8;
         p = strtok_r(NULL, " ", &save))
        w[n++] = p;
    /* switch: w[3], w[4]; promoted: w[2], w[3] (after "slave NAME"). */
    if (sw && n >= 5 && read_port(w[4], strlen(w[4]), &port) &&
        strlen(w[3]) < sizeof(s->hint_host)) {
        snprintf(s->hint_host, sizeof(s->hint_host), "%s", w[3]);
        s->hint_port = port;
        s->hint_until = sl_mono_ms() + HINT_MS;
    } else if (!sw && n >= 4 && strcmp(w[0], "slave") == 0 &&
               read_port(w[3], strlen(w[3]), &port) &&
               strlen(w[2]) < sizeof(s->hint_host)) {
        snprintf(s->hint_host, sizeof(s->hint_host), "%s", w[2]);
        s->hint_port = port;
        s->hint_until = sl_mono_ms() + HINT_MS;
    }
}

/* A subscription's reply: a confirmation, or an event: "+switch-master
 * NAME OLDIP OLDPORT NEWIP NEWPORT" from a sentinel that learnt of a
 * failover, or "+promoted-slave ..." from the one that leads it (which
 * switches only once every replica is reconfigured, seconds later: the
 * old master takes writes until then, and they are lost). Either, for our
 * master, closes the connection to it once what it sent is answered. A failure
 * of the subscription subscribes again (on the next sentinel's turn). */
static void on_switch(sl_conn *sub, struct sl_job *job, size_t i, redisReply *r,
                      sluice_status st, bool sent, const char *msg)
{
    sl_sentinel *s = of_sub(sub);
    const redisReply *m;
    size_t nl = strlen(s->url->master);

    (void)job;
    (void)i;
    (void)st;
    (void)sent;
    (void)msg;
    if (r == NULL) {
        /* On the next sentinel, when the engine next turns (from within
         * this callback a connect could fail into it again). */
        if (!s->ending) {
            s->sub_at = (s->sub_at + 1) % s->url->nseeds;
            subscribe(s, false);
        }
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len != 7 ||
        memcmp(r->element[0]->str, "message", 7))
        return; /* a confirmation, or nothing of ours */
    m = r->element[2];
    if (m->type != REDIS_REPLY_STRING || !names(s, m->str, m->len, nl))
        return; /* another master's */
    s->announced++;
    hint(s, r->element[1], m);
    if (s->data != NULL && s->data->phase == SL_PHASE_READY && !s->data->doomed)
        sl_conn_doom(s->data);
}

sl_conn *sl_sentinel_sub(sl_conn *cn)
{
    return cn->disc_state != NULL ? &sen(cn)->sub : NULL;
}

void sl_sentinel_subscribe(sl_conn *cn)
{
    if (cn->disc_state != NULL)
        subscribe(sen(cn), true);
}

static void disc_start(sl_conn *cn)
{
    sl_sentinel *s = sen(cn);

    /* A failover announced: only its new master, without asking, until
     * ROLE says it is the master (sl_sentinel_ready) or HINT_MS pass: the
     * sentinels would name the old one meanwhile, and what it takes then
     * is lost when it turns replica. */
    if (s->hint_port != 0 && sl_mono_ms() >= s->hint_until)
        s->hint_port = 0;
    if (s->hint_port != 0) {
        snprintf(s->master_ep.host, sizeof(s->master_ep.host), "%s",
                 s->hint_host);
        s->master_ep.port = s->hint_port;
        if (s->last_port != s->hint_port ||
            strcmp(s->last_host, s->hint_host) != 0)
            atomic_fetch_add(&s->switches, 1);
        snprintf(s->last_host, sizeof(s->last_host), "%s", s->hint_host);
        s->last_port = s->master_ep.port;
        cn->phase = SL_PHASE_CLOSED;
        sl_conn_connect_found(cn);
        return;
    }

    s->why[0] = '\0';
    s->tried = 0;
    s->round_deadline = cn->connect_deadline;
    cn->phase = SL_PHASE_DISCOVER;
    ask(cn, s->first);
    settle(cn);
}

static void disc_io(sl_conn *cn, short revents)
{
    sl_conn_io(&sen(cn)->ask, revents);
    settle(cn);
}

static short disc_wants(const sl_conn *cn)
{
    return sl_conn_wants(&sen(cn)->ask);
}

static void disc_check_deadline(sl_conn *cn, int64_t now)
{
    sl_sentinel *s = sen(cn);

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

static void disc_drop(sl_conn *cn)
{
    sl_sentinel *s = sen(cn);

    end_try(s);
    if (cn->fd >= 0)
        sl_conn_unwatch(cn);
    cn->fd = -1;
}

static void disc_free(sl_conn *cn)
{
    sl_sentinel *s = sen(cn);

    if (s == NULL)
        return;
    s->ask.ev.unwatch = NULL;
    end_try(s);
    s->ending = true;
    sl_conn_close(&s->sub);
    sl_free(s);
}

/* ROLE in the setup: the master found (an awaited one included), or not
 * one: then the sentinel that named it is asked last next time, unless a
 * failover's new master is awaited (it says slave until promoted). */
static bool disc_role(sl_conn *cn, const redisReply *r, char *role,
                      size_t role_len)
{
    sl_sentinel *s = sen(cn);
    const redisReply *e;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        (r->element[0]->type != REDIS_REPLY_STRING &&
         r->element[0]->type != REDIS_REPLY_STATUS)) {
        sl_reply_describe(role, role_len, r);
    } else {
        e = r->element[0];
        snprintf(role, role_len, "%.*s", (int)(e->len > 40 ? 40 : e->len),
                 e->str);
        if (e->len == 6 && memcmp(e->str, "master", 6) == 0) {
            s->hint_port = 0;
            return true;
        }
    }
    if (s->hint_port == 0)
        s->first = (s->first + 1) % s->url->nseeds;
    return false;
}

static void disc_readonly(sl_conn *cn)
{
    sen(cn)->readonly++;
}

/* No address yet: the master's name; a failover's new master awaited:
 * says so. */
static bool disc_describe(const sl_conn *cn, char *buf, size_t len)
{
    const sl_sentinel *s = sen(cn);

    if (cn->ep->host[0] == '\0')
        snprintf(buf, len, "master \"%s\"", s->url->master);
    else if (s->hint_port != 0)
        snprintf(buf, len,
                 "%s:%d (failing over: the new master the sentinels "
                 "announced)",
                 cn->ep->host, cn->ep->port);
    else
        return false;
    return true;
}

static const sl_conn_discovery sentinels = {
    .start = disc_start,
    .io = disc_io,
    .wants = disc_wants,
    .check_deadline = disc_check_deadline,
    .drop = disc_drop,
    .free = disc_free,
    .role = disc_role,
    .readonly = disc_readonly,
    .describe = disc_describe,
};

sluice_status sl_conn_use_sentinels(sl_conn *cn, const sl_url *url)
{
    sl_sentinel *s = sl_calloc(1, sizeof(*s));

    if (s == NULL)
        return SLUICE_ENOMEM;
    atomic_init(&s->switches, 0);
    s->url = url;
    s->cfg = *cn->cfg;
    s->ask_ep = url->sentinel_ep;
    s->master_ep = url->ep;
    sl_conn_prepare(&s->ask, &s->ask_ep, &s->cfg, "sentinel");
    s->sub_ep = url->sentinel_ep;
    sl_conn_prepare(&s->sub, &s->sub_ep, cn->cfg, "sentinel");
    s->sub.push = true;
    s->data = cn;
    cn->disc = &sentinels;
    cn->disc_state = s;
    cn->ep = &s->master_ep;
    return SLUICE_OK;
}

uint64_t sl_sentinel_failovers(const sl_conn *cn)
{
    return cn->disc == &sentinels ? (uint64_t)atomic_load(&sen(cn)->switches)
                                  : 0;
}
