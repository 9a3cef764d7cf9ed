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
            snprintf(s->named_by, sizeof(s->named_by), "the sentinel %s:%d",
                     s->ask_ep.host, s->ask_ep.port);
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

static sl_sentinel_listen *of_sub(sl_conn *conn)
{
    return (sl_sentinel_listen *)(void *)((char *)conn -
                                          offsetof(sl_sentinel_listen, conn));
}

static void on_event(sl_conn *conn, struct sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg);

/* Queues the SUBSCRIBE of sub; the engine connects (kick: now; else at
 * its next turn, after the connection's backoff). */
static void subscribe(sl_sentinel_listen *sub, bool kick)
{
    const char *argv[4] = {"SUBSCRIBE", "+switch-master", "+promoted-slave",
                           "+selected-slave"};
    size_t lens[4] = {9, 14, 15, 15};
    char err[SL_ERR_LEN];

    if (sub->conn.phase != SL_PHASE_CLOSED || sub->conn.qlen > 0)
        return;
    sub->conn.addrs.n = 0;
    if (sl_conn_append(&sub->conn, 4, argv, lens, err, sizeof(err)) ==
            SLUICE_OK &&
        sl_conn_expect(&sub->conn, on_event, NULL, 0) == SLUICE_OK && kick)
        sl_conn_kick(&sub->conn);
}

/* How long an announced new master is the only one tried, from the last
 * event that named it: its promotion (ms after +selected-slave), then
 * until every sentinel names it (+switch-master, about a second after,
 * the leader's hello every 2 s at most), and some. */
#define HINT_MS 5000

/* How soon an announced new master that said it is not one yet is tried
 * again: a connect, AUTH and ROLE, a fraction of a ms of its time. */
#define HINT_RETRY_MS 20

/* A subscription's health check: a PING this often, answered within the
 * connect timeout, or it reconnects. */
#define SUB_PING_MS 1000

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

/* The new master an event names: "+switch-master NAME OIP OPORT NIP
 * NPORT", or "+selected-slave" and "+promoted-slave", "slave NAME IP PORT
 * @ MASTER ...", from the sentinel that leads a failover: it announces the
 * replica it chose, then, up to a second after the replica turned master,
 * its promotion. False when the text names none. */
static bool new_master(const redisReply *ch, const redisReply *m, char *host,
                       size_t host_len, int *port)
{
    char text[600], *w[8], *save = NULL, *p;
    size_t n = 0;
    bool sw = ch->type == REDIS_REPLY_STRING && ch->len == 14 &&
              memcmp(ch->str, "+switch-master", 14) == 0;
    const char *h = NULL, *pt = NULL;

    if (m->len >= sizeof(text))
        return false;
    memcpy(text, m->str, m->len);
    text[m->len] = '\0';
    for (p = strtok_r(text, " ", &save); p != NULL && n < 8;
         p = strtok_r(NULL, " ", &save))
        w[n++] = p;
    /* switch: w[3], w[4]; promoted: w[2], w[3] (after "slave NAME"). */
    if (sw && n >= 5) {
        h = w[3];
        pt = w[4];
    } else if (!sw && n >= 4 && strcmp(w[0], "slave") == 0) {
        h = w[2];
        pt = w[3];
    }
    if (h == NULL || !read_port(pt, strlen(pt), port) || h[0] == '\0' ||
        strlen(h) >= host_len)
        return false;
    snprintf(host, host_len, "%s", h);
    return true;
}

/* An event for our master, from sub's sentinel: the next connects go to
 * the new master it names, at once (the backoff earned on the old one
 * ends), and the connection to the old one closes now: a request in
 * flight there ends with SLUICE_EIO (its outcome unknown), one not sent
 * yet goes to the new master. Nothing changes when the connection is with
 * the new master already: every sentinel announces +switch-master, in
 * turn.
 *
 * The leader's events come as it acts; +switch-master may be old news:
 * the leader sends its own once every replica is reconfigured, seconds
 * after the others (up to the failover timeout), and by then the next
 * failover may have begun. So a +switch-master that names another new
 * master than one announced within HINT_MS is not followed (it would lead
 * back to the master being demoted); a leader's event always is. */
static void failover(sl_sentinel_listen *sub, const redisReply *ch,
                     const redisReply *m)
{
    sl_sentinel *s = sub->s;
    sl_conn *cn = s->data;
    char host[256];
    int port = 0;
    bool named = new_master(ch, m, host, sizeof(host), &port);
    bool sw = ch->len == 14 && memcmp(ch->str, "+switch-master", 14) == 0;

    s->announced++;
    if (named && cn->phase != SL_PHASE_CLOSED &&
        cn->phase != SL_PHASE_DISCOVER && s->master_ep.port == port &&
        strcmp(s->master_ep.host, host) == 0)
        return;
    if (named && sw && s->hint_port != 0 && sl_mono_ms() < s->hint_until &&
        (s->hint_port != port || strcmp(s->hint_host, host) != 0)) {
        s->stale++;
        return;
    }
    if (named) {
        snprintf(s->hint_host, sizeof(s->hint_host), "%s", host);
        s->hint_port = port;
        s->hint_until = sl_mono_ms() + HINT_MS;
        snprintf(s->hint_by, sizeof(s->hint_by), "%.*s from the sentinel %s:%d",
                 (int)(ch->len > 20 ? 20 : ch->len), ch->str, sub->ep.host,
                 sub->ep.port);
    }
    sl_conn_retry_now(cn);
    if (cn->phase != SL_PHASE_CLOSED) {
        char msg[SL_ERR_LEN];

        /* What it carried and was not answered yet is not acknowledged:
         * the master that would answer it is being demoted, and what it
         * takes from the promotion on is lost. What was not sent goes to
         * the new master. */
        sl_errf(msg, sizeof(msg),
                "sentinel: %s announced a failover: the master is being "
                "demoted, and the outcome of what was in flight is unknown",
                named ? s->hint_by : "an event");
        sl_conn_abort(cn, SLUICE_EIO, msg);
    }
}

/* A subscription's reply: a confirmation, or an event: "+switch-master
 * NAME OLDIP OLDPORT NEWIP NEWPORT" from a sentinel that learnt of a
 * failover, or "+selected-slave ..." and "+promoted-slave ..." from the
 * one that leads it (which switches only once every replica is
 * reconfigured, a second or more later: the old master takes writes until
 * it is demoted, and they are lost). A failure of the subscription
 * subscribes again, on the same sentinel, after its backoff. */
static void on_event(sl_conn *conn, struct sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg)
{
    sl_sentinel_listen *sub = of_sub(conn);
    sl_sentinel *s = sub->s;
    const redisReply *m;
    size_t nl = strlen(s->url->master);

    (void)job;
    (void)i;
    (void)st;
    (void)sent;
    (void)msg;
    if (r == NULL) {
        /* When the engine next turns (from within this callback a
         * connect could fail into it again). */
        if (!s->ending)
            subscribe(sub, false);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len != 7 ||
        memcmp(r->element[0]->str, "message", 7) != 0 ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return; /* a confirmation, or nothing of ours */
    m = r->element[2];
    if (m->type != REDIS_REPLY_STRING || !names(s, m->str, m->len, nl))
        return; /* another master's */
    failover(sub, r->element[1], m);
}

sl_conn *sl_sentinel_sub(sl_conn *cn, size_t i)
{
    sl_sentinel *s = cn->disc_state;

    return s != NULL && i < s->url->nseeds ? &s->subs[i].conn : NULL;
}

void sl_sentinel_subscribe(sl_conn *cn, size_t i)
{
    sl_sentinel *s = cn->disc_state;

    if (s != NULL && i < s->url->nseeds)
        subscribe(&s->subs[i], true);
}

static void disc_start(sl_conn *cn)
{
    sl_sentinel *s = sen(cn);

    /* A failover announced: only its new master, without asking, until
     * HINT_MS after the last event: the sentinels name the old one until
     * they switch, and what it takes then is lost when it turns
     * replica. */
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
        snprintf(s->named_by, sizeof(s->named_by), "%s", s->hint_by);
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
        char msg[200];
        long long ms = (long long)s->cfg.connect_timeout_ms;

        /* As a data node's connect says it (connect.c). */
        switch (s->ask.phase) {
        case SL_PHASE_RESOLVING:
            snprintf(msg, sizeof(msg), "could not be looked up in %lld ms", ms);
            break;
        case SL_PHASE_CONNECTING:
            snprintf(msg, sizeof(msg),
                     "did not accept the connection in %lld ms", ms);
            break;
        case SL_PHASE_TLS:
            snprintf(msg, sizeof(msg),
                     "TLS handshake did not finish in %lld ms; is it a TLS "
                     "port? (sentinel_tls=0 reaches sentinels without TLS)",
                     ms);
            break;
        case SL_PHASE_SETUP:
            snprintf(msg, sizeof(msg), "did not answer %s in %lld ms",
                     sl_conn_setup_name(&s->ask, 0), ms);
            break;
        case SL_PHASE_CLOSED:
        case SL_PHASE_DISCOVER:
        case SL_PHASE_READY:
            snprintf(msg, sizeof(msg),
                     "did not answer SENTINEL GET-MASTER-ADDR-BY-NAME in "
                     "%lld ms",
                     ms);
            break;
        }
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
    size_t k;

    if (s == NULL)
        return;
    s->ask.ev.unwatch = NULL;
    end_try(s);
    s->ending = true;
    for (k = 0; s->subs != NULL && k < s->url->nseeds; k++)
        sl_conn_close(&s->subs[k].conn);
    sl_free(s->subs);
    sl_free(s);
}

/* ROLE in the setup: the master found (an awaited one included), or not
 * one: then role says what it is, who named it, and what comes next: the
 * sentinel that named it is asked last next time, unless a failover's
 * new master is awaited (it says slave until promoted). */
static bool disc_role(sl_conn *cn, const redisReply *r, char *role,
                      size_t role_len)
{
    sl_sentinel *s = sen(cn);
    const redisReply *e;
    char what[200];

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        (r->element[0]->type != REDIS_REPLY_STRING &&
         r->element[0]->type != REDIS_REPLY_STATUS)) {
        sl_reply_describe(what, sizeof(what), r);
    } else {
        e = r->element[0];
        snprintf(what, sizeof(what), "%.*s", (int)(e->len > 40 ? 40 : e->len),
                 e->str);
        /* The hint stays (HINT_MS): until +switch-master the sentinels
         * name the old master, and a reconnect must not go back to it. */
        if (e->len == 6 && memcmp(e->str, "master", 6) == 0)
            return true;
    }
    if (s->hint_port != 0) {
        snprintf(role, role_len,
                 "answered %s: the new master that %s announced, not "
                 "promoted yet; tried again",
                 what, s->named_by);
        return false;
    }
    snprintf(role, role_len,
             "answered %s, and %s named it (a failover under way, or a "
             "sentinel that names a replica); the sentinels are asked again",
             what, s->named_by[0] ? s->named_by : "a sentinel");
    s->first = (s->first + 1) % s->url->nseeds;
    return false;
}

/* A new master announced is tried every HINT_RETRY_MS until ROLE says it
 * is one: the leader promotes it a few ms after +selected-slave, and the
 * usual backoff would keep the calls failing up to a second after. */
static int64_t disc_retry_in(const sl_conn *cn)
{
    const sl_sentinel *s = sen(cn);

    return s->hint_port != 0 && sl_mono_ms() < s->hint_until ? HINT_RETRY_MS
                                                             : -1;
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
    .retry_in = disc_retry_in,
    .readonly = disc_readonly,
    .describe = disc_describe,
};

sluice_status sl_conn_use_sentinels(sl_conn *cn, const sl_url *url)
{
    sl_sentinel *s = sl_calloc(1, sizeof(*s));
    size_t k;

    if (s == NULL)
        return SLUICE_ENOMEM;
    if ((s->subs = sl_calloc(url->nseeds, sizeof(*s->subs))) == NULL) {
        sl_free(s);
        return SLUICE_ENOMEM;
    }
    atomic_init(&s->switches, 0);
    s->url = url;
    s->cfg = *cn->cfg;
    s->ask_ep = url->sentinel_ep;
    s->master_ep = url->ep;
    sl_conn_prepare(&s->ask, &s->ask_ep, &s->cfg, "sentinel");
    for (k = 0; k < url->nseeds; k++) {
        sl_sentinel_listen *sub = &s->subs[k];

        sub->s = s;
        sub->ep = url->sentinel_ep;
        snprintf(sub->ep.host, sizeof(sub->ep.host), "%s", url->seeds[k].host);
        sub->ep.port = url->seeds[k].port;
        sl_conn_prepare(&sub->conn, &sub->ep, cn->cfg, "sentinel");
        sub->conn.push = true;
        sub->conn.ping_every_ms = SUB_PING_MS;
        sub->conn.ping_wait_ms = cn->cfg->connect_timeout_ms;
    }
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
