/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.c - a hiredis connection with connect and command timeouts; every
 * transport failure closes it, so the next call reconnects. */
#include "redis.h"

#include "backend.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

static struct timeval ms_to_tv(uint32_t ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

void sl_conn_init(sl_conn *cn, const sl_url *url, const char *who)
{
    cn->c = NULL;
    cn->url = url;
    cn->who = who;
    cn->round_trips = 0;
    cn->reopened = 0;
}

void sl_conn_close(sl_conn *cn)
{
    if (cn->c != NULL)
        redisFree(cn->c);
    cn->c = NULL;
}

/* Maps the context's error, then drops the connection. */
static sluice_status transport_error(sl_conn *cn, const char *doing, char *err,
                                     size_t err_len)
{
    redisContext *c = cn->c;
    sluice_status st = SLUICE_EIO;
    const char *hint = "; the next call reconnects";

    if (c->err == REDIS_ERR_IO &&
        (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)) {
        st = SLUICE_ETIMEOUT;
        sl_errf(err, err_len, "%s: %s:%d did not answer %s within %u ms%s",
                cn->who, cn->url->host, cn->url->port, doing,
                cn->url->opts.command_timeout_ms, hint);
    } else {
        sl_errf(err, err_len, "%s: %s:%d %s: %s%s", cn->who, cn->url->host,
                cn->url->port, doing,
                c->errstr[0] ? c->errstr : "connection lost", hint);
    }
    sl_conn_close(cn);
    return st;
}

/* Runs one command synchronously during the connection's setup. */
static sluice_status setup_command(sl_conn *cn, int argc, const char **argv,
                                   const char *what, char *err, size_t err_len)
{
    redisReply *rep = NULL;
    sluice_status st;

    if ((st = sl_conn_append(cn, argc, argv, NULL, err, err_len)) != SLUICE_OK)
        return st;
    if ((st = sl_conn_read(cn, &rep, err, err_len)) != SLUICE_OK)
        return st;
    if (rep->type == REDIS_REPLY_ERROR) {
        sl_errf(err, err_len, "%s: %s:%d refused %s: %s", cn->who,
                cn->url->host, cn->url->port, what, rep->str);
        freeReplyObject(rep);
        sl_conn_close(cn);
        return SLUICE_ECONNECT;
    }
    freeReplyObject(rep);
    return SLUICE_OK;
}

/* Whether an idle connection is still fit for a request: the server may
 * have closed it (its idle timeout, a restart, CLIENT KILL), and anything
 * readable on a connection that owes us nothing (a late reply, EOF, an
 * error) means it is out of step. Checked before anything is written, so
 * a connection found dead is reopened and the request sent on the new one:
 * nothing of it had gone out. */
static bool idle_connection_is_sound(const redisContext *c)
{
    struct pollfd pfd = {c->fd, POLLIN, 0};
    char byte;

    if (c->reader->len > c->reader->pos)
        return false; /* bytes of a reply nobody asked for */
    if (poll(&pfd, 1, 0) == 0)
        return true;
    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
        return false;
    /* Readable: EOF (0), an error (-1), or stray bytes; all unsound. */
    return recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
           (errno == EAGAIN || errno == EWOULDBLOCK);
}

sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len)
{
    const sl_url *u = cn->url;
    sluice_status st;
    char db[16];

    if (cn->c != NULL && sdslen(cn->c->obuf) == 0 &&
        !idle_connection_is_sound(cn->c)) {
        cn->reopened++;
        sl_conn_close(cn);
    }
    if (cn->c != NULL)
        return SLUICE_OK;
    cn->c = redisConnectWithTimeout(u->host, u->port,
                                    ms_to_tv(u->opts.connect_timeout_ms));
    if (cn->c == NULL) {
        sl_errf(err, err_len, "%s: out of memory connecting to %s:%d", cn->who,
                u->host, u->port);
        return SLUICE_ENOMEM;
    }
    if (cn->c->err) {
        sl_errf(err, err_len,
                "%s: cannot connect to %s:%d: %s; is the "
                "server running?",
                cn->who, u->host, u->port, cn->c->errstr);
        sl_conn_close(cn);
        return SLUICE_ECONNECT;
    }
    if (redisSetTimeout(cn->c, ms_to_tv(u->opts.command_timeout_ms)) !=
        REDIS_OK)
        return transport_error(cn, "setting the timeout", err, err_len);
    if (u->password[0] != '\0') {
        const char *argv[3] = {"AUTH", u->user, u->password};

        if (u->user[0] == '\0') {
            argv[1] = u->password;
            st = setup_command(cn, 2, argv, "AUTH", err, err_len);
        } else {
            st = setup_command(cn, 3, argv, "AUTH", err, err_len);
        }
        if (st != SLUICE_OK)
            return st;
    }
    if (u->db != 0) {
        const char *argv[2] = {"SELECT", db};

        snprintf(db, sizeof(db), "%d", u->db);
        if ((st = setup_command(cn, 2, argv, "SELECT", err, err_len)) !=
            SLUICE_OK)
            return st;
    }
    return SLUICE_OK;
}

/* Writes the RESP form of a command ourselves: hiredis's own formatting
 * (sdscatfmt per argument) was the largest client cost per decision. */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len)
{
    char small[2048], *buf = small, *p;
    size_t need = 24, i;
    int rc;

    for (i = 0; i < (size_t)argc; i++)
        need += 32 + (lens != NULL ? lens[i] : strlen(argv[i]));
    if (need > sizeof(small) && (buf = sl_malloc(need)) == NULL) {
        sl_errf(err, err_len, "%s: out of memory queueing a command", cn->who);
        return SLUICE_ENOMEM;
    }
    p = buf;
    *p++ = '*';
    p += sl_i64toa(argc, p);
    *p++ = '\r';
    *p++ = '\n';
    for (i = 0; i < (size_t)argc; i++) {
        size_t len = lens != NULL ? lens[i] : strlen(argv[i]);

        *p++ = '$';
        p += sl_i64toa((int64_t)len, p);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], len);
        p += len;
        *p++ = '\r';
        *p++ = '\n';
    }
    rc = redisAppendFormattedCommand(cn->c, buf, (size_t)(p - buf));
    if (buf != small)
        sl_free(buf);
    if (rc != REDIS_OK) {
        sl_errf(err, err_len, "%s: out of memory queueing a command", cn->who);
        sl_conn_close(cn);
        return SLUICE_ENOMEM;
    }
    return SLUICE_OK;
}

/* Writes the whole output buffer. Our own send() with MSG_NOSIGNAL, not
 * hiredis's write(): a write on a connection the server has closed raises
 * SIGPIPE, whose default action kills the host process. */
sluice_status sl_conn_flush(sl_conn *cn, char *err, size_t err_len)
{
    redisContext *c = cn->c;
    size_t len = sdslen(c->obuf), off = 0;

    while (off < len) {
        ssize_t n = send(c->fd, c->obuf + off, len - off, MSG_NOSIGNAL);

        if (n >= 0) {
            off += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            sl_errf(err, err_len,
                    "%s: %s:%d did not take the request within %u ms; the "
                    "next call reconnects",
                    cn->who, cn->url->host, cn->url->port,
                    cn->url->opts.command_timeout_ms);
            sl_conn_close(cn);
            return SLUICE_ETIMEOUT;
        }
        sl_errf(err, err_len, "%s: %s:%d sending: %s; the next call reconnects",
                cn->who, cn->url->host, cn->url->port, strerror(errno));
        sl_conn_close(cn);
        return SLUICE_EIO;
    }
    sdsclear(c->obuf);
    return SLUICE_OK;
}

sluice_status sl_conn_read(sl_conn *cn, redisReply **rep, char *err,
                           size_t err_len)
{
    void *r = NULL;

    /* A reply already in the reader costs no round trip. */
    if (redisReaderGetReply(cn->c->reader, &r) == REDIS_OK && r != NULL) {
        *rep = r;
        return SLUICE_OK;
    }
    cn->round_trips++;
    /* Written by us (see sl_conn_flush), so redisGetReply only reads. */
    if (sdslen(cn->c->obuf) > 0) {
        sluice_status st = sl_conn_flush(cn, err, err_len);

        if (st != SLUICE_OK)
            return st;
    }
    if (redisGetReply(cn->c, &r) != REDIS_OK || r == NULL)
        return transport_error(cn, "reading a reply", err, err_len);
    *rep = r;
    return SLUICE_OK;
}

/* twemproxy answers with its own errors for a server it cannot reach. */
static bool proxy_failure(const char *s)
{
    return strncmp(s, "ERR Connection refused", 22) == 0 ||
           strncmp(s, "ERR Connection reset by peer", 28) == 0 ||
           strncmp(s, "ERR Connection timed out", 24) == 0 ||
           strncmp(s, "ERR Invalid argument", 20) == 0;
}

sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len)
{
    if (rep->type != REDIS_REPLY_ERROR)
        return SLUICE_OK;
    if (proxy_failure(rep->str)) {
        sl_errf(err, err_len,
                "%s: %s:%d cannot reach the Redis server of this key: %s",
                cn->who, cn->url->host, cn->url->port, rep->str);
        return strstr(rep->str, "timed out") ? SLUICE_ETIMEOUT : SLUICE_EIO;
    }
    /* A server that wants a password says so in two ways: NOAUTH, or, for
     * a command of more than ten arguments, a protocol error. */
    if (strncmp(rep->str, "NOAUTH", 6) == 0 ||
        strstr(rep->str, "unauthenticated") != NULL) {
        sl_errf(err, err_len,
                "%s: %s:%d requires authentication; give the password in "
                "the URL (redis://user:password@host:port) or in "
                "options.password (SLUICE_PASSWORD for the CLI): %s",
                cn->who, cn->url->host, cn->url->port, rep->str);
        return SLUICE_ESERVER;
    }
    sl_errf(err, err_len, "%s: %s:%d answered: %s", cn->who, cn->url->host,
            cn->url->port, rep->str);
    return SLUICE_ESERVER;
}

sluice_status sl_conn_append_reset(sl_conn *cn, const char *prefix,
                                   const sl_request *rq, char *err,
                                   size_t err_len)
{
    const sluice_ruleset *rs = rq->rules;
    const char *argv[1 + SLUICE_MAX_RULES * SL_RESET_KEYS];
    size_t lens[1 + SLUICE_MAX_RULES * SL_RESET_KEYS], i, j, n, a = 1;
    char(*keys)[SL_KEY_BUF] =
        sl_malloc(SLUICE_MAX_RULES * SL_RESET_KEYS * SL_KEY_BUF);
    sluice_status st;

    if (keys == NULL) {
        sl_errf(err, err_len, "%s: out of memory", cn->who);
        return SLUICE_ENOMEM;
    }
    argv[0] = "DEL";
    lens[0] = 3;
    for (i = 0; i < rs->count; i++) {
        n = sl_key_reset_set(prefix, rq->key, rq->key_len, &rs->rules[i],
                             rq->now_ms, keys + a - 1, lens + a);
        for (j = 0; j < n; j++, a++)
            argv[a] = keys[a - 1];
    }
    st = sl_conn_append(cn, (int)a, argv, lens, err, err_len);
    sl_free(keys);
    return st;
}
