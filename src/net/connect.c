/* SPDX-License-Identifier: BSD-3-Clause */
/* connect.c - bringing a connection up: the host looked up, connect() to
 * each address in turn, the TLS handshake, then the setup commands queued
 * (their replies are read in conn.c); the connect deadline, the backoff
 * after failures in a row, and a subscriber's health check; the socket's
 * readiness handed to the phase that waits for it (sl_conn_io); and the
 * one connect that waits, at a handle's open (sl_conn_ensure). */
#include "net/conn.h"
#include "net/socket.h"
#include "net/tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ setup */

/* Queues AUTH and SELECT, and over TLS without them a PING: something to
 * answer, so that a refused client is a failure to connect, not of the
 * first request. Nothing queued by callers is written before their
 * replies are in. */
void sl_conn_begin_setup(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    char db[16];

    cn->slen = cn->swrote = 0;
    cn->setup_left = 0;
    if (u->tls && u->password[0] == '\0' && u->db == 0) {
        const char *argv[1] = {"PING"};

        cn->slen += sl_resp_format(cn->sbuf + cn->slen, 1, argv, NULL);
        cn->setup_left++;
    }
    if (u->password[0] != '\0') {
        const char *argv[3] = {"AUTH", u->user, u->password};

        if (u->user[0] == '\0') {
            argv[1] = u->password;
            cn->slen += sl_resp_format(cn->sbuf + cn->slen, 2, argv, NULL);
        } else {
            cn->slen += sl_resp_format(cn->sbuf + cn->slen, 3, argv, NULL);
        }
        cn->setup_left++;
    }
    if (u->db != 0) {
        const char *argv[2] = {"SELECT", db};

        snprintf(db, sizeof(db), "%d", u->db);
        cn->slen += sl_resp_format(cn->sbuf + cn->slen, 2, argv, NULL);
        cn->setup_left++;
    }
    if (cn->disc != NULL) {
        /* Is the address the sentinels named the master still? */
        const char *argv[1] = {"ROLE"};

        cn->slen += sl_resp_format(cn->sbuf + cn->slen, 1, argv, NULL);
        cn->setup_left++;
    }
    if (cn->setup_left == 0)
        sl_conn_ready(cn);
    else
        cn->phase = SL_PHASE_SETUP;
}

/* One step of the TLS handshake, verification included; the setup once
 * it is done. */
static void tls_step(sl_conn *cn)
{
    char why[SL_ERR_LEN];
    int rc =
        sl_tls_handshake(cn->ssl, cn->ep, &cn->want_write, why, sizeof(why));

    if (rc > 0)
        sl_conn_begin_setup(cn);
    else if (rc < 0)
        sl_conn_fail(cn, SLUICE_ECONNECT, "%s", why);
}

/* The socket is connected: TLS, or the setup. */
static void connected(sl_conn *cn)
{
    if (cn->ep->socket[0] == '\0') {
        int one = 1;

        setsockopt(cn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    cn->got_reply = false;
    if (!sl_resp_open(&cn->resp, cn->ep->reply_max_bytes > 0
                                     ? cn->ep->reply_max_bytes
                                     : SL_REPLY_MAX_DEFAULT)) {
        sl_conn_fail(cn, SLUICE_ENOMEM,
                     "out of memory setting up the connection");
        return;
    }
    if (cn->ep->tls) {
        sluice_status st;
        char why[SL_ERR_LEN];

        if ((cn->ssl = sl_tls_new(cn->ep, cn->fd, &st, why, sizeof(why))) ==
            NULL) {
            sl_conn_fail(cn, st, "%s", why);
            return;
        }
        cn->phase = SL_PHASE_TLS;
        tls_step(cn);
        return;
    }
    sl_conn_begin_setup(cn);
}

static void connect_failed(sl_conn *cn, int e)
{
    const sl_endpoint *u = cn->ep;

    if (e == ETIMEDOUT)
        sl_conn_fail(
            cn, SLUICE_ECONNECT,
            "did not accept the connection in connect_timeout_ms=%u; is "
            "the server running?",
            cn->cfg->connect_timeout_ms);
    else if (u->socket[0] != '\0')
        sl_conn_fail(
            cn, SLUICE_ECONNECT,
            "cannot connect to the socket: %s; is the server running, "
            "listening there (unixsocket), and may this process open it?",
            strerror(e));
    else
        sl_conn_fail(cn, SLUICE_ECONNECT,
                     "cannot connect: %s; is the server running?", strerror(e));
}

/* Connects to the next address; the socket in cn->fd, connecting. */
static void try_address(sl_conn *cn)
{
    for (;;) {
        bool next;
        int e = sl_socket_connect(&cn->addrs, cn->addr_at, cn->connect_deadline,
                                  &cn->fd, &next);

        if (e == 0 || e == EINPROGRESS) {
            cn->phase = SL_PHASE_CONNECTING;
            if (e == 0)
                connected(cn);
            return; /* else writable when done */
        }
        if (!next || cn->addr_at + 1 >= cn->addrs.n) {
            connect_failed(cn, e);
            return;
        }
        cn->addr_at++;
    }
}

/* The lookup thread is done: its addresses, then the connect. */
static void lookup_done(sl_conn *cn)
{
    sl_lookup *lk = cn->lookup;
    char why[128];
    int rc = sl_lookup_finish(lk, cn->fd, &cn->addrs, why, sizeof(why));

    if (rc < 0)
        return; /* not yet */
    sl_conn_unwatch(cn);
    close(cn->fd);
    cn->fd = -1;
    cn->lookup = NULL;
    cn->phase = SL_PHASE_CLOSED;
    sl_lookup_unref(lk);
    if (rc > 0) {
        sl_conn_fail(cn, SLUICE_ECONNECT, "cannot be looked up: %s", why);
        return;
    }
    try_address(cn);
}

/* The host's addresses, looked up once and kept: a reconnect does not
 * look up again. A socket's path and a numeric address need no lookup; a
 * host name is looked up on a thread, and false is returned meanwhile. */
static bool resolve(sl_conn *cn)
{
    sluice_status st;
    char why[SL_ERR_LEN];

    if (cn->addrs.n > 0 || sl_socket_addrs_now(cn->ep, &cn->addrs))
        return true;
    st = sl_lookup_start(cn->ep, &cn->lookup, &cn->fd, why, sizeof(why));
    if (st != SLUICE_OK)
        sl_conn_fail(cn, st, "%s", why);
    else
        cn->phase = SL_PHASE_RESOLVING;
    return false;
}

/* Starts a connect, unless a backoff holds: then fails at once. */
static void start_connect(sl_conn *cn)
{
    int64_t now = sl_mono_ms();

    if (cn->failures > 0 && now < cn->retry_at) {
        char msg[SL_ERR_LEN];

        sl_errf(msg, sizeof(msg),
                "%s (%u failed attempts in a row; the next in %lld ms)",
                cn->last_failure, cn->failures,
                (long long)(cn->retry_at - now));
        cn->last_status = SLUICE_ECONNECT;
        cn->olen = cn->owrote = 0; /* none of it will go out */
        cn->queued = cn->written = 0;
        sl_conn_fail_all(cn, SLUICE_ECONNECT, 0, msg);
        return;
    }
    cn->connect_deadline = now + cn->cfg->connect_timeout_ms;
    cn->addr_at = 0;
    if (cn->disc != NULL) {
        cn->disc->start(cn); /* then sl_conn_connect_found */
        return;
    }
    if (resolve(cn))
        try_address(cn);
}

void sl_conn_connect_found(sl_conn *cn)
{
    cn->connect_deadline = sl_mono_ms() + cn->cfg->connect_timeout_ms;
    cn->addr_at = 0;
    cn->addrs.n = 0; /* the master may have moved */
    if (resolve(cn))
        try_address(cn);
}

/* Whether a backoff holds now. */
static bool backing_off(const sl_conn *cn)
{
    return cn->failures > 0 && sl_mono_ms() < cn->retry_at;
}

void sl_conn_kick(sl_conn *cn)
{
    /* A subscriber has no caller to answer: it waits out its backoff
     * (sl_conn_next_timer), its SUBSCRIBE queued. */
    if (cn->phase == SL_PHASE_CLOSED && cn->qlen > 0 &&
        !(cn->push && backing_off(cn)))
        start_connect(cn);
}

void sl_conn_retry_now(sl_conn *cn)
{
    cn->failures = 0;
    cn->retry_at = 0;
}

int64_t sl_conn_next_timer(const sl_conn *cn)
{
    switch (cn->phase) {
    case SL_PHASE_CLOSED:
        return cn->push && cn->qlen > 0 && cn->failures > 0 ? cn->retry_at : -1;
    case SL_PHASE_DISCOVER:
    case SL_PHASE_RESOLVING:
    case SL_PHASE_CONNECTING:
    case SL_PHASE_TLS:
    case SL_PHASE_SETUP:
        return cn->connect_deadline;
    case SL_PHASE_READY:
        return cn->pong_by > 0                       ? cn->pong_by
               : cn->ping_at > 0 && !cn->ping_unsent ? cn->ping_at
                                                     : -1;
    }
    return -1;
}

void sl_conn_warm(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_CLOSED && !backing_off(cn))
        start_connect(cn);
}

bool sl_conn_is_connecting(const sl_conn *cn)
{
    return cn->phase != SL_PHASE_CLOSED && cn->phase != SL_PHASE_READY;
}

/* connect() finished, well or not. */
static void connect_done(sl_conn *cn)
{
    int soerr = sl_socket_error(cn->fd);

    if (soerr == 0) {
        connected(cn);
        return;
    }
    if (cn->addr_at + 1 < cn->addrs.n) {
        sl_conn_unwatch(cn);
        close(cn->fd);
        cn->fd = -1;
        cn->addr_at++;
        try_address(cn);
        return;
    }
    connect_failed(cn, soerr);
}

/* A ready subscriber's health check at now: its PING sent when due, and
 * the connection closed when the answer is late. */
static void check_alive(sl_conn *cn, int64_t now)
{
    char err[SL_ERR_LEN];

    if (cn->pong_by > 0 && now >= cn->pong_by) {
        /* What has come first: a loop may report the socket after the
         * timer, and a blocking handle reads only during calls. */
        sl_conn_read(cn);
        if (cn->fd < 0 || cn->pong_by == 0)
            return;
        sl_conn_fail(cn, SLUICE_ETIMEOUT,
                     "did not answer PING within %u ms (the health check "
                     "of the subscription); reconnecting",
                     cn->ping_wait_ms);
        return;
    }
    if (cn->ping_at > 0 && now >= cn->ping_at && cn->pong_by == 0 &&
        !cn->ping_unsent) {
        const char *argv[1] = {"PING"};
        size_t len = 4;

        cn->ping_at = 0;
        if (sl_conn_append(cn, 1, argv, &len, err, sizeof(err)) == SLUICE_OK)
            cn->ping_unsent = true;
        else
            cn->ping_at = now + cn->ping_every_ms; /* out of memory */
    }
}

void sl_conn_check_deadline(sl_conn *cn, int64_t now)
{
    if (cn->phase == SL_PHASE_READY && cn->ping_every_ms > 0)
        check_alive(cn, now);
    if (cn->phase == SL_PHASE_CLOSED || cn->phase == SL_PHASE_READY ||
        now < cn->connect_deadline)
        return;
    if (cn->phase == SL_PHASE_DISCOVER)
        cn->disc->check_deadline(cn, now);
    else if (cn->phase == SL_PHASE_RESOLVING)
        sl_conn_fail(cn, SLUICE_ECONNECT,
                     "cannot be looked up in connect_timeout_ms=%u",
                     cn->cfg->connect_timeout_ms);
    else if (cn->phase == SL_PHASE_CONNECTING)
        connect_failed(cn, ETIMEDOUT);
    else if (cn->phase == SL_PHASE_TLS)
        sl_conn_fail(
            cn, SLUICE_ECONNECT,
            "TLS handshake did not finish in connect_timeout_ms=%u; is it "
            "a TLS port?",
            cn->cfg->connect_timeout_ms);
    else
        sl_conn_fail(cn, SLUICE_ECONNECT,
                     "did not answer %s in connect_timeout_ms=%u",
                     sl_conn_setup_name(cn, 0), cn->cfg->connect_timeout_ms);
}

void sl_conn_io(sl_conn *cn, short revents)
{
    switch (cn->phase) {
    case SL_PHASE_CLOSED:
        return;
    case SL_PHASE_DISCOVER:
        cn->disc->io(cn, revents);
        return;
    case SL_PHASE_RESOLVING:
        lookup_done(cn);
        return;
    case SL_PHASE_CONNECTING:
        connect_done(cn);
        return;
    case SL_PHASE_TLS:
        tls_step(cn);
        return;
    case SL_PHASE_SETUP:
    case SL_PHASE_READY:
        break;
    }
    if (revents & (POLLOUT | POLLERR | POLLHUP))
        sl_conn_write(cn);
    if (cn->fd >= 0 && (revents & (POLLIN | POLLERR | POLLHUP)))
        sl_conn_read(cn);
    /* The setup answered: what was queued goes out now. */
    if (cn->fd >= 0 && cn->phase == SL_PHASE_READY && cn->owrote < cn->olen &&
        !cn->want_write)
        sl_conn_write(cn);
}

/* ------------------------------------------------------- at open */

/* The message of the last failure, and its status. */
static sluice_status last(const sl_conn *cn, char *err, size_t err_len)
{
    sl_errf(err, err_len, "%s", cn->last_failure);
    return cn->last_status != SLUICE_OK ? cn->last_status : SLUICE_EIO;
}

sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len)
{
    sl_conn_check_idle(cn);
    if (cn->phase == SL_PHASE_READY)
        return SLUICE_OK;
    if (cn->phase == SL_PHASE_CLOSED) {
        if (cn->failures > 0 && sl_mono_ms() < cn->retry_at) {
            sl_errf(err, err_len,
                    "%s (%u failed attempts in a row; the next in %lld ms)",
                    cn->last_failure, cn->failures,
                    (long long)(cn->retry_at - sl_mono_ms()));
            return SLUICE_ECONNECT;
        }
        start_connect(cn);
    }
    while (cn->phase != SL_PHASE_CLOSED && cn->phase != SL_PHASE_READY) {
        int w = sl_socket_wait(cn->fd, sl_conn_wants(cn), cn->connect_deadline);

        if (w > 0)
            sl_conn_io(cn, (short)w);
        else if (w == 0)
            sl_conn_check_deadline(cn, sl_mono_ms());
        else
            sl_conn_fail(cn, SLUICE_ECONNECT, "%s", strerror(errno));
    }
    return cn->phase == SL_PHASE_READY ? SLUICE_OK : last(cn, err, err_len);
}
