/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.c - a hiredis connection with connect and command timeouts; every
 * transport failure closes it, so the next call reconnects. */
#include "redis.h"

#include <errno.h>
#include <string.h>
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

sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len)
{
    const sl_url *u = cn->url;
    sluice_status st;
    char db[16];

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

sluice_status sl_conn_flush(sl_conn *cn, char *err, size_t err_len)
{
    int done = 0;

    while (!done)
        if (redisBufferWrite(cn->c, &done) != REDIS_OK)
            return transport_error(cn, "sending", err, err_len);
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
    sl_errf(err, err_len, "%s: %s:%d answered: %s", cn->who, cn->url->host,
            cn->url->port, rep->str);
    return SLUICE_ESERVER;
}
