/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c - a connection's life once its socket is up, and its command
 * and reply queue: the setup commands written and their replies read
 * (connect.c queues them), then the commands queued, written without
 * waiting; the replies read, each handed to the callback of its command
 * in order; a subscriber's health check (PING); and the failures, which
 * close the connection and fail the replies it awaited, so that the next
 * command reconnects. The bytes go through socket.c or tls.c, and RESP is
 * resp.c's. */
#include "net/conn.h"

#include "net/socket.h"
#include "net/tls.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (16 * 1024)

/* Whether an owner's loop drives the connection (sl_conn_events), not a
 * user of its own that waits for it (sl_conn_ensure). */
static bool driven(const sl_conn *cn)
{
    return cn->ev.unwatch != NULL;
}

/* The socket is about to close: the owner's loop stops watching it. */
void sl_conn_unwatch(sl_conn *cn)
{
    if (cn->ev.unwatch != NULL)
        cn->ev.unwatch(cn->ev.data, cn);
}

/* "host:port" or the socket's path, for messages. */
static const char *endpoint(const sl_conn *cn, char *buf, size_t len)
{
    const sl_endpoint *u = cn->ep;

    if (u->socket[0] != '\0')
        snprintf(buf, len, "%s", u->socket);
    else if (cn->disc != NULL && cn->disc->describe(cn, buf, len))
        return buf;
    else
        snprintf(buf, len, "%s:%d", u->host, u->port);
    return buf;
}

void sl_conn_prepare(sl_conn *cn, const sl_endpoint *ep, const sl_config *cfg,
                     const char *who)
{
    memset(cn, 0, sizeof(*cn));
    cn->fd = -1;
    cn->ep = ep;
    cn->cfg = cfg;
    cn->who = who;
}

bool sl_conn_is_open(const sl_conn *cn)
{
    return cn->fd >= 0;
}

bool sl_conn_is_ready(const sl_conn *cn)
{
    return cn->phase == SL_PHASE_READY;
}

/* Closes the socket and forgets what was queued and read. */
static void drop_socket(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_DISCOVER)
        cn->disc->drop(cn); /* fd is the one asked's */
    sl_conn_unwatch(cn);
    if (cn->ssl != NULL) {
        sl_tls_free(cn->ssl);
        cn->ssl = NULL;
    }
    if (cn->fd >= 0)
        close(cn->fd);
    cn->fd = -1;
    sl_lookup_unref(cn->lookup); /* its thread lets go of it when done */
    cn->lookup = NULL;
    sl_resp_close(&cn->resp);
    cn->phase = SL_PHASE_CLOSED;
    cn->want_write = false;
    cn->doomed = false;
    cn->olen = cn->owrote = 0;
    cn->queued = cn->written = 0;
    cn->slen = cn->swrote = 0;
    cn->setup_left = 0;
    cn->answered = false;
    cn->ping_at = cn->pong_by = 0;
    cn->ping_unsent = false;
}

/* Fails every reply awaited: st and msg, and whether its command may have
 * gone out (written is the stream's offset that reached the socket). The
 * callbacks may queue commands again, on a fresh ring. */
void sl_conn_fail_all(sl_conn *cn, sluice_status st, uint64_t written,
                      const char *msg)
{
    sl_expect *q = cn->q;
    size_t head = cn->qhead, len = cn->qlen, cap = cn->qcap, k;

    cn->q = NULL;
    cn->qhead = cn->qlen = cn->qcap = 0;
    for (k = 0; k < len; k++) {
        sl_expect e = q[(head + k) % cap];

        if (e.fn != NULL)
            e.fn(cn, e.job, e.i, NULL, st, e.start < written, msg);
    }
    sl_free(q);
}

/* The connection failed with st: closed, its message kept in
 * last_failure, and every reply awaited failed. A failure before the
 * connection was ready is SLUICE_ECONNECT, counts toward the backoff, and
 * nothing queued went out. */
void sl_conn_fail(sl_conn *cn, sluice_status st, const char *fmt, ...)
{
    char msg[SL_ERR_LEN], ep[300];
    bool connecting = cn->phase != SL_PHASE_READY;
    uint64_t written = connecting ? 0 : cn->written;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A server that refuses the TLS client (no certificate, or one it does
     * not trust) says so only now, after the handshake, with TLS 1.3. */
    sl_errf(cn->last_failure, sizeof(cn->last_failure), "%s: %s %s%s", cn->who,
            endpoint(cn, ep, sizeof(ep)), msg,
            cn->phase == SL_PHASE_SETUP && cn->ep->tls && st != SLUICE_ECONNECT
                ? " (during the setup after the TLS handshake: does the "
                  "server want a client certificate, tls_cert= and "
                  "tls_key=?)"
                : "");
    if (connecting && st != SLUICE_ENOMEM)
        st = SLUICE_ECONNECT;
    if ((connecting || !cn->answered) && st != SLUICE_ENOMEM) {
        /* A server that accepts and then fails every exchange (closes,
         * answers only errors) is backed off like one that refuses;
         * unless the discovery says another is expected soon. */
        int64_t soon = cn->disc != NULL && cn->disc->retry_in != NULL
                           ? cn->disc->retry_in(cn)
                           : -1;

        cn->failures++;
        cn->retry_at = sl_mono_ms() +
                       (soon >= 0 ? soon : sl_socket_backoff_ms(cn->failures));
    }
    cn->last_status = st;
    drop_socket(cn);
    sl_conn_fail_all(cn, st, written, cn->last_failure);
}

void sl_conn_abort(sl_conn *cn, sluice_status st, const char *msg)
{
    uint64_t written = cn->phase == SL_PHASE_READY ? cn->written : 0;

    drop_socket(cn);
    sl_conn_fail_all(cn, st, written, msg);
}

/* A quiet close: the server closed an idle connection, or one doomed has
 * answered what it was sent. What was queued and never sent fails with
 * sent false, which the backends send again. */
static void close_quietly(sl_conn *cn, const char *why)
{
    char msg[SL_ERR_LEN], ep[300];

    sl_errf(msg, sizeof(msg), "%s: %s %s", cn->who,
            endpoint(cn, ep, sizeof(ep)), why);
    if (!cn->answered) {
        cn->failures++;
        cn->retry_at = sl_mono_ms() + sl_socket_backoff_ms(cn->failures);
        sl_errf(cn->last_failure, sizeof(cn->last_failure),
                "%s (closed before any answer but an error)", msg);
        cn->last_status = SLUICE_ECONNECT;
    }
    cn->reopened++;
    sl_conn_abort(cn, SLUICE_EIO, msg);
}

/* Takes the commands of job out of a connection that has written none of
 * them (it is not ready yet): their bytes leave the buffer, and their
 * expectations go to gone (room for qlen; NULL: dropped). A command spans
 * from its start to the next one's. Returns how many went. */
static size_t withdraw(sl_conn *cn, const struct sl_job *job, sl_expect *gone)
{
    sl_expect *q = cn->q;
    size_t head = cn->qhead, len = cn->qlen, cap = cn->qcap, k, kept = 0,
           ngone = 0;
    uint64_t base = cn->queued - cn->olen, at = 0;

    for (k = 0; k < len; k++) {
        sl_expect e = q[(head + k) % cap];
        uint64_t end = k + 1 < len ? q[(head + k + 1) % cap].start : cn->queued;
        size_t from = (size_t)(e.start - base), n = (size_t)(end - e.start);

        if (e.job == job) {
            if (gone != NULL)
                gone[ngone] = e;
            ngone++;
            continue;
        }
        memmove(cn->obuf + at, cn->obuf + from, n);
        e.start = base + at;
        q[(head + kept++) % cap] = e;
        at += n;
    }
    cn->olen = (size_t)at;
    cn->queued = base + at;
    cn->last_start = cn->queued;
    cn->qlen = kept;
    return ngone;
}

bool sl_conn_withdraw(sl_conn *cn, const struct sl_job *job)
{
    if (cn->phase == SL_PHASE_READY || !sl_conn_serves(cn, job))
        return false;
    withdraw(cn, job, NULL);
    return true;
}

sluice_status sl_conn_expire(sl_conn *cn, const struct sl_job *job)
{
    sl_expect *gone;
    size_t k, ngone;
    char why[SL_ERR_LEN], ep[300];
    long long waited =
        cn->ev.waited != NULL ? (long long)cn->ev.waited(cn->ev.data, job) : 0;

    if (!sl_conn_serves(cn, job))
        return SLUICE_OK;
    endpoint(cn, ep, sizeof(ep));
    if (cn->phase == SL_PHASE_READY || cn->phase == SL_PHASE_CLOSED) {
        /* Sent, and stuck: Redis answers in order, so whatever was sent
         * after it waits too. */
        sl_errf(why, sizeof(why),
                "%s: %s did not answer within %lld ms (timeout_ms=%u); the "
                "outcome is unknown, and the next call reconnects",
                cn->who, ep, waited, cn->cfg->command_timeout_ms);
        sl_conn_abort(cn, SLUICE_ETIMEOUT, why);
        return SLUICE_ETIMEOUT;
    }
    /* Still connecting: nothing was written, so the job's commands leave
     * the buffer, and the connect goes on for the calls after it. */
    sl_errf(why, sizeof(why),
            "%s: %s: not connected within %lld ms (timeout_ms=%u; %s); "
            "nothing was sent, and the connect goes on for the next calls",
            cn->who, ep, waited, cn->cfg->command_timeout_ms,
            cn->phase == SL_PHASE_RESOLVING    ? "host name lookup under way"
            : cn->phase == SL_PHASE_CONNECTING ? "connect() under way"
            : cn->phase == SL_PHASE_TLS        ? "TLS handshake under way"
                                               : "setup under way");
    if ((gone = sl_malloc(cn->qlen * sizeof(*gone))) == NULL) {
        sl_conn_abort(cn, SLUICE_ECONNECT, why);
        return SLUICE_ECONNECT;
    }
    ngone = withdraw(cn, job, gone);
    for (k = 0; k < ngone; k++)
        if (gone[k].fn != NULL)
            gone[k].fn(cn, gone[k].job, gone[k].i, NULL, SLUICE_ECONNECT, false,
                       why);
    sl_free(gone);
    return SLUICE_ECONNECT;
}

void sl_conn_doom(sl_conn *cn)
{
    if (cn->fd >= 0)
        cn->doomed = true;
}

void sl_conn_forget(sl_conn *cn, const struct sl_job *job)
{
    size_t k;

    for (k = 0; k < cn->qlen; k++) {
        sl_expect *e = &cn->q[(cn->qhead + k) % cn->qcap];

        if (e->job == job) {
            e->fn = NULL;
            e->job = NULL;
        }
    }
}

bool sl_conn_serves(const sl_conn *cn, const struct sl_job *job)
{
    size_t k;

    for (k = 0; k < cn->qlen; k++)
        if (cn->q[(cn->qhead + k) % cn->qcap].job == job)
            return true;
    return false;
}

/* What the setup commands are, in order, for messages. */
const char *sl_conn_setup_name(const sl_conn *cn, unsigned k)
{
    const sl_endpoint *u = cn->ep;
    const char *names[4];
    unsigned n = 0;

    if (u->tls && u->password[0] == '\0' && u->db == 0)
        names[n++] = "PING";
    if (u->password[0] != '\0')
        names[n++] = "AUTH";
    if (u->db != 0)
        names[n++] = "SELECT";
    if (cn->disc != NULL)
        names[n++] = "ROLE";
    return k < n ? names[k] : "setup";
}

/* The backoff ends with the first answer that is not an error, not with
 * the connect: a server that accepts and closes, or answers "max number
 * of clients reached", is still failing. */
void sl_conn_ready(sl_conn *cn)
{
    cn->phase = SL_PHASE_READY;
    if (cn->ping_every_ms > 0)
        cn->ping_at = sl_mono_ms() + cn->ping_every_ms;
}

/* ------------------------------------------------------------ writing */

/* Through TLS when the connection has it, else the socket itself: as
 * sl_socket_read and sl_socket_write (socket.h). */
static ssize_t transport_read(sl_conn *cn, char *buf, size_t len, char *why,
                              size_t why_len)
{
    if (cn->ssl != NULL)
        return sl_tls_read(cn->ssl, buf, len, &cn->want_write, why, why_len);
    return sl_socket_read(cn->fd, buf, len, why, why_len);
}

static ssize_t transport_write(sl_conn *cn, const char *buf, size_t len,
                               char *why, size_t why_len)
{
    ssize_t n;

    if (cn->ssl != NULL)
        return sl_tls_write(cn->ssl, buf, len, &cn->want_write, why, why_len);
    if ((n = sl_socket_write(cn->fd, buf, len, why, why_len)) == -1)
        cn->want_write = true;
    return n;
}

static bool obuf_reserve(sl_conn *cn, size_t more)
{
    size_t cap = cn->ocap ? cn->ocap : 4096;
    char *p;

    if (cn->olen + more <= cn->ocap)
        return true;
    if (cn->owrote > 0) {
        /* Written bytes go first. */
        memmove(cn->obuf, cn->obuf + cn->owrote, cn->olen - cn->owrote);
        cn->olen -= cn->owrote;
        cn->owrote = 0;
        if (cn->olen + more <= cn->ocap)
            return true;
    }
    while (cap < cn->olen + more)
        cap *= 2;
    if ((p = sl_realloc(cn->obuf, cap)) == NULL)
        return false;
    cn->obuf = p;
    cn->ocap = cap;
    return true;
}

static bool idle_connection_is_sound(sl_conn *cn);

/* Before the first command queued on an idle connection: one the server
 * closed meanwhile (its idle timeout, a restart, CLIENT KILL) is reopened,
 * and the command sent on the new one, since nothing of it went out. */
void sl_conn_check_idle(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_READY && cn->olen == cn->owrote &&
        cn->qlen == 0 && !idle_connection_is_sound(cn)) {
        cn->reopened++;
        drop_socket(cn);
    }
}

sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len)
{
    size_t n;

    /* Blocking users check in sl_conn_ensure, before they append. */
    if (driven(cn))
        sl_conn_check_idle(cn);
    if (!obuf_reserve(cn, sl_resp_size(argc, argv, lens))) {
        sl_errf(err, err_len, "%s: out of memory queueing a command", cn->who);
        return SLUICE_ENOMEM;
    }
    n = sl_resp_format(cn->obuf + cn->olen, argc, argv, lens);
    cn->last_start = cn->queued;
    cn->olen += n;
    cn->queued += n;
    return SLUICE_OK;
}

sluice_status sl_conn_appendf(sl_conn *cn, char *err, size_t err_len,
                              const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    int len;

    if (driven(cn))
        sl_conn_check_idle(cn);
    va_start(ap, fmt);
    len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0 || !obuf_reserve(cn, (size_t)len)) {
        if (cmd != NULL)
            redisFreeCommand(cmd);
        sl_errf(err, err_len, "%s: out of memory queueing a command", cn->who);
        return SLUICE_ENOMEM;
    }
    memcpy(cn->obuf + cn->olen, cmd, (size_t)len);
    cn->last_start = cn->queued;
    cn->olen += (size_t)len;
    cn->queued += (size_t)len;
    redisFreeCommand(cmd);
    return SLUICE_OK;
}

sluice_status sl_conn_expect(sl_conn *cn, sl_reply_fn fn, struct sl_job *job,
                             size_t i)
{
    if (cn->qlen == cn->qcap) {
        size_t cap = cn->qcap ? cn->qcap * 2 : 16, k;
        sl_expect *q = sl_malloc(cap * sizeof(*q));

        if (q == NULL) {
            /* The command goes too, or its reply would be taken for the
             * next one's: nothing of it was written yet. */
            cn->olen -= (size_t)(cn->queued - cn->last_start);
            cn->queued = cn->last_start;
            return SLUICE_ENOMEM;
        }
        for (k = 0; k < cn->qlen; k++)
            q[k] = cn->q[(cn->qhead + k) % cn->qcap];
        sl_free(cn->q);
        cn->q = q;
        cn->qcap = cap;
        cn->qhead = 0;
    }
    cn->q[(cn->qhead + cn->qlen++) % cn->qcap] =
        (sl_expect){fn, job, i, cn->last_start};
    return SLUICE_OK;
}

/* Writes what it can without waiting: the setup commands, then, once the
 * connection is ready, what was queued. With send()'s MSG_NOSIGNAL (or the
 * TLS BIO that uses it): a write on a connection the server has closed
 * must not raise SIGPIPE, whose default action kills the host process. */
void sl_conn_write(sl_conn *cn)
{
    bool setup = cn->phase == SL_PHASE_SETUP;
    const char *buf = setup ? cn->sbuf : cn->obuf;
    size_t *off = setup ? &cn->swrote : &cn->owrote;
    size_t len = setup ? cn->slen : cn->olen;

    if (!setup && (cn->phase != SL_PHASE_READY || cn->doomed))
        return;
    if (!setup && *off == 0 && len > 0)
        cn->round_trips++;
    cn->want_write = false;
    while (*off < len) {
        size_t chunk = len - *off > 1 << 30 ? 1 << 30 : len - *off;
        char why[256];
        ssize_t n = transport_write(cn, buf + *off, chunk, why, sizeof(why));

        if (n == -1)
            return;
        if (n < 0) {
            sl_conn_fail(cn, SLUICE_EIO,
                         "sending: %s; the next call reconnects", why);
            return;
        }
        *off += (size_t)n;
        if (!setup)
            cn->written += (uint64_t)n;
    }
    if (setup)
        return;
    cn->olen = cn->owrote = 0;
    /* The health check's wait starts when its PING has gone out: a
     * blocking handle writes only during calls. */
    if (cn->ping_unsent) {
        cn->ping_unsent = false;
        cn->pong_by = sl_mono_ms() + cn->ping_wait_ms;
    }
}

/* ------------------------------------------------------------ reading */

/* A TLS port drops a client that speaks plain text to it (a reset, or a
 * close) before any reply: say so when that is how a plain connection
 * ends. */
static const char *tls_hint(const sl_conn *cn)
{
    if (cn->ep->tls || cn->got_reply || cn->ep->socket[0] != '\0')
        return "";
    /* A failover's new master closes its clients' connections as it is
     * promoted: no sign of a TLS port. */
    if (cn->disc != NULL && cn->disc->retry_in != NULL &&
        cn->disc->retry_in(cn) >= 0)
        return "";
    return " before any reply (is this a TLS port? use rediss://, or tls=1 "
           "for redis+multi:// and redis-cluster://)";
}

/* Reads what the socket has into the reader: 1 bytes read, 0 the server
 * closed, -1 nothing yet, -2 a failure (closed, reported). */
static int read_some(sl_conn *cn)
{
    char buf[READ_CHUNK], why[SL_ERR_LEN];
    sluice_status st;
    ssize_t n = transport_read(cn, buf, sizeof(buf), why, sizeof(why));

    if (n == 0 || n == -1)
        return (int)n;
    if (n < 0) {
        sl_conn_fail(cn, SLUICE_EIO,
                     "reading a reply: %s%s; the next call reconnects", why,
                     tls_hint(cn));
        return -2;
    }
    if (!sl_resp_feed(&cn->resp, buf, (size_t)n, &st, why, sizeof(why))) {
        sl_conn_fail(cn, st, "%s", why);
        return -2;
    }
    return 1;
}

/* Takes the next complete reply: 1 one in *r, 0 none yet, -1 the bytes
 * are not RESP (closed, reported). */
static int take_reply(sl_conn *cn, redisReply **r)
{
    char why[SL_ERR_LEN];
    sluice_status st;
    int got = sl_resp_take(&cn->resp, r, &st, why, sizeof(why));

    if (got < 0)
        sl_conn_fail(cn, st, "%s", why);
    else if (got > 0)
        cn->got_reply = true;
    return got;
}

/* A setup command's reply: an error refuses the connection. */
static void setup_reply(sl_conn *cn, redisReply *r)
{
    unsigned k = 0;

    /* Which command this answers: the first of those still awaited. */
    {
        const sl_endpoint *u = cn->ep;
        unsigned n =
            (unsigned)(u->tls && u->password[0] == '\0' && u->db == 0) +
            (unsigned)(u->password[0] != '\0') + (unsigned)(u->db != 0) +
            (unsigned)(cn->disc != NULL);

        k = n - cn->setup_left;
    }
    if (cn->disc != NULL && cn->setup_left == 1 &&
        r->type != REDIS_REPLY_ERROR) {
        char role[SL_ERR_LEN];

        /* The discovery says who named the address, and what comes
         * next. */
        if (!cn->disc->role(cn, r, role, sizeof(role))) {
            sl_conn_fail(cn, SLUICE_ECONNECT, "is not the master: ROLE %s",
                         role);
            return;
        }
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char said[SL_ESCAPE_SHOWN * 4 + 32];

        sl_escape(said, sizeof(said), r->str, r->len);
        sl_conn_fail(cn, SLUICE_ECONNECT, "refused %s: %s",
                     sl_conn_setup_name(cn, k), said);
        return;
    }
    if (--cn->setup_left == 0)
        sl_conn_ready(cn);
}

/* PING's answer on a subscribed connection: ["pong", ""] (RESP2), or
 * +PONG should it come before the subscription. */
static bool is_pong(const redisReply *r)
{
    if (r->type == REDIS_REPLY_STATUS)
        return r->len == 4 && memcmp(r->str, "PONG", 4) == 0;
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           r->element[0]->len == 4 &&
           memcmp(r->element[0]->str, "pong", 4) == 0;
}

/* Hands complete replies to their callbacks, in order. */
static void dispatch(sl_conn *cn)
{
    while (cn->fd >= 0 && cn->resp.reader != NULL) {
        redisReply *r = NULL;
        sl_expect e;
        int got;

        if ((got = take_reply(cn, &r)) <= 0)
            return;
        if (cn->phase == SL_PHASE_SETUP) {
            setup_reply(cn, r);
            freeReplyObject(r);
            continue;
        }
        if (cn->qlen == 0) {
            freeReplyObject(r);
            sl_conn_fail(cn, SLUICE_EPROTO,
                         "sent a reply nobody asked for; the connection is "
                         "dropped");
            return;
        }
        if (cn->push) {
            /* A subscription's replies, the first its confirmation. */
            e = cn->q[cn->qhead];
            cn->answered = true;
            cn->failures = 0;
            if (cn->ping_every_ms > 0 && is_pong(r)) {
                /* The health check's answer: the next one in a while. */
                cn->pong_by = 0;
                cn->ping_at = sl_mono_ms() + cn->ping_every_ms;
                freeReplyObject(r);
                continue;
            }
            cn->kept = false;
            e.fn(cn, e.job, e.i, r, SLUICE_OK, true, NULL);
            if (!cn->kept)
                freeReplyObject(r);
            cn->kept = false;
            continue;
        }
        if (r->type != REDIS_REPLY_ERROR) {
            cn->answered = true;
            cn->failures = 0;
        } else if (cn->disc != NULL && r->len >= 8 &&
                   memcmp(r->str, "READONLY", 8) == 0 && !cn->doomed) {
            /* A demoted master: what was written is answered here, the
             * rest goes to the master the sentinels name next. */
            cn->disc->readonly(cn);
            sl_conn_doom(cn);
        }
        e = cn->q[cn->qhead];
        cn->qhead = (cn->qhead + 1) % cn->qcap;
        cn->qlen--;
        cn->kept = false;
        if (e.fn != NULL)
            e.fn(cn, e.job, e.i, r, SLUICE_OK, true, NULL);
        if (!cn->kept)
            freeReplyObject(r);
        cn->kept = false;
        /* Doomed, and every command it carried is answered. */
        if (cn->doomed && cn->fd >= 0 &&
            (cn->qlen == 0 || cn->q[cn->qhead].start >= cn->written))
            close_quietly(cn, "closed after a reply out of step");
    }
}

/* Reads and hands out replies; an end of stream fails what is awaited. */
void sl_conn_read(sl_conn *cn)
{
    int rc, rounds;

    for (rounds = 0; rounds < 64; rounds++) {
        if ((rc = read_some(cn)) == -2)
            return;
        if (rc < 0)
            break;
        if (rc == 0) {
            dispatch(cn);
            if (cn->fd < 0)
                return;
            if (cn->phase == SL_PHASE_READY && cn->qlen == 0 && driven(cn))
                close_quietly(cn, "closed the idle connection");
            else
                sl_conn_fail(
                    cn, SLUICE_EIO,
                    "closed the connection%s%s; the next call reconnects",
                    cn->phase == SL_PHASE_READY
                        ? " with requests in flight; their outcome is "
                          "unknown"
                        : "",
                    tls_hint(cn));
            return;
        }
        dispatch(cn);
        if (cn->fd < 0)
            return;
    }
}

short sl_conn_wants(const sl_conn *cn)
{
    switch (cn->phase) {
    case SL_PHASE_CLOSED:
        return 0;
    case SL_PHASE_DISCOVER:
        return cn->disc->wants(cn);
    case SL_PHASE_RESOLVING:
        return POLLIN;
    case SL_PHASE_CONNECTING:
        return POLLOUT;
    case SL_PHASE_TLS:
        return cn->want_write ? POLLOUT : POLLIN;
    case SL_PHASE_SETUP:
        return (short)(POLLIN |
                       (cn->swrote < cn->slen || cn->want_write ? POLLOUT : 0));
    case SL_PHASE_READY:
        return (short)(POLLIN |
                       ((cn->owrote < cn->olen && !cn->doomed) || cn->want_write
                            ? POLLOUT
                            : 0));
    }
    return 0;
}

/* Whether an idle connection is still fit for a request: the server may
 * have closed it (its idle timeout, a restart, CLIENT KILL), and anything
 * readable on a connection that owes us nothing (a late reply, EOF, an
 * error) means it is out of step. Over TLS, what arrives unasked may also
 * be the protocol's own (TLS 1.3 session tickets), which a read consumes. */
static bool idle_connection_is_sound(sl_conn *cn)
{
    int readable;

    if (sl_resp_pending(&cn->resp))
        return false; /* bytes of a reply nobody asked for */
    if (cn->ssl != NULL && sl_tls_pending(cn->ssl))
        return false;
    if ((readable = sl_socket_readable(cn->fd)) <= 0)
        return readable == 0;
    return cn->ssl != NULL ? sl_tls_still_idle(cn->ssl)
                           : sl_socket_still_idle(cn->fd);
}

void sl_conn_close(sl_conn *cn)
{
    sl_conn_abort(cn, SLUICE_EIO,
                  "the connection was closed; the outcome is unknown");
    sl_free(cn->obuf);
    cn->obuf = NULL;
    cn->ocap = 0;
    sl_free(cn->q);
    cn->q = NULL;
    cn->qcap = cn->qhead = cn->qlen = 0;
    if (cn->disc != NULL)
        cn->disc->free(cn);
    cn->disc = NULL;
    cn->disc_state = NULL;
}

const char *sl_conn_endpoint(const sl_conn *cn, char *buf, size_t len)
{
    return endpoint(cn, buf, len);
}
