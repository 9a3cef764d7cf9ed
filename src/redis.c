/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.c - one connection to a Redis server: sluice's own non-blocking
 * socket (TCP, or a Unix-domain socket), TLS over it with OpenSSL when the
 * URL asks, its own output buffer, and a deadline for every wait, kept
 * with poll(). hiredis only parses replies (its reader) and formats the
 * plain backends' commands. Every transport failure closes the connection,
 * so the next call reconnects. */
#include "redis.h"

#include "backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (16 * 1024)

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes: 1 ready, 0
 * the deadline passed, -1 an error (errno). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int64_t left = deadline - now_ms();
        int rc;

        if (left < 0)
            left = 0;
        rc = poll(&pfd, 1, (int)left);
        if (rc > 0)
            return 1;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* "host:port" or the socket's path, for messages. */
static const char *endpoint(const sl_conn *cn, char *buf, size_t len)
{
    const sl_url *u = cn->url;

    if (u->socket[0] != '\0')
        snprintf(buf, len, "%s", u->socket);
    else
        snprintf(buf, len, "%s:%d", u->host, u->port);
    return buf;
}

void sl_conn_init(sl_conn *cn, const sl_url *url, const char *who)
{
    memset(cn, 0, sizeof(*cn));
    cn->fd = -1;
    cn->url = url;
    cn->who = who;
}

bool sl_conn_is_open(const sl_conn *cn)
{
    return cn->fd >= 0;
}

void sl_conn_close(sl_conn *cn)
{
    if (cn->ssl != NULL) {
        /* No close_notify: the peer may be gone, and a shutdown that
         * blocks or raises SIGPIPE is worse than an abrupt close. */
        SSL_free(cn->ssl);
        cn->ssl = NULL;
    }
    if (cn->fd >= 0)
        close(cn->fd);
    cn->fd = -1;
    if (cn->reader != NULL)
        redisReaderFree(cn->reader);
    cn->reader = NULL;
    sl_free(cn->obuf);
    cn->obuf = NULL;
    cn->olen = cn->ocap = 0;
}

/* Closes the connection after a failure and says why. */
static sluice_status fail(sl_conn *cn, sluice_status st, char *err,
                          size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static sluice_status fail(sl_conn *cn, sluice_status st, char *err,
                          size_t err_len, const char *fmt, ...)
{
    char msg[SL_ERR_LEN], ep[300];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl_errf(err, err_len, "%s: %s %s", cn->who, endpoint(cn, ep, sizeof(ep)),
            msg);
    sl_conn_close(cn);
    return st;
}

/* Waits until the socket is ready for events, by the deadline: SLUICE_OK
 * to try again, else the connection is closed and the status says why
 * (doing: what the server was to do, for the message). */
static sluice_status await(sl_conn *cn, short events, int64_t deadline,
                           const char *doing, char *err, size_t err_len)
{
    int w = wait_fd(cn->fd, events, deadline);

    if (w > 0)
        return SLUICE_OK;
    if (w == 0)
        return fail(cn, SLUICE_ETIMEOUT, err, err_len,
                    "did not answer %s within %u ms; the next call "
                    "reconnects",
                    doing, cn->url->opts.command_timeout_ms);
    return fail(cn, SLUICE_EIO, err, err_len,
                "%s: %s; the next call reconnects", doing, strerror(errno));
}

/* ---------------------------------------------------------------- TLS */

/* OpenSSL writes to a socket with write(), which raises SIGPIPE on a
 * connection the peer has closed; the default action kills the host
 * process. The socket BIO with its write replaced by send(MSG_NOSIGNAL). */
static BIO_METHOD *nosigpipe_method;
static pthread_once_t nosigpipe_once = PTHREAD_ONCE_INIT;

static int nosigpipe_write(BIO *b, const char *buf, int len)
{
    int fd = -1;
    ssize_t n;

    BIO_get_fd(b, &fd);
    BIO_clear_retry_flags(b);
    n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)n;
}

static void make_nosigpipe_method(void)
{
    const BIO_METHOD *s = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "sluice socket");

    if (m == NULL)
        return;
    if (!BIO_meth_set_write(m, nosigpipe_write) ||
        !BIO_meth_set_read(m, BIO_meth_get_read(s)) ||
        !BIO_meth_set_puts(m, BIO_meth_get_puts(s)) ||
        !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s)) ||
        !BIO_meth_set_create(m, BIO_meth_get_create(s)) ||
        !BIO_meth_set_destroy(m, BIO_meth_get_destroy(s))) {
        BIO_meth_free(m);
        return;
    }
    nosigpipe_method = m;
}

/* The last OpenSSL error as text, or what. */
static const char *ssl_reason(char *buf, size_t len, const char *what)
{
    unsigned long e = ERR_get_error();

    if (e == 0) {
        snprintf(buf, len, "%s", what);
        return buf;
    }
    ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

/* A context with the URL's CA, client certificate and verification; NULL
 * with a message naming the file or setting that failed. */
static SSL_CTX *tls_context(const sl_url *u, char *err, size_t err_len)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char why[256];

    if (ctx == NULL) {
        sl_errf(err, err_len, "TLS: cannot make a context: %s",
                ssl_reason(why, sizeof(why), "out of memory"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, u->tls_insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       NULL);
    if (u->tls_ca_file[0] != '\0' || u->tls_ca_dir[0] != '\0') {
        if (!SSL_CTX_load_verify_locations(
                ctx, u->tls_ca_file[0] ? u->tls_ca_file : NULL,
                u->tls_ca_dir[0] ? u->tls_ca_dir : NULL)) {
            sl_errf(err, err_len,
                    "TLS: cannot load the CA certificates of %s%s: %s",
                    u->tls_ca_file[0] ? "tls_ca_file=" : "tls_ca_dir=",
                    u->tls_ca_file[0] ? u->tls_ca_file : u->tls_ca_dir,
                    ssl_reason(why, sizeof(why), "no certificate found"));
            SSL_CTX_free(ctx);
            return NULL;
        }
    } else if (!SSL_CTX_set_default_verify_paths(ctx)) {
        sl_errf(err, err_len,
                "TLS: cannot load the system's CA certificates (give "
                "tls_ca_file= or tls_ca_dir=): %s",
                ssl_reason(why, sizeof(why), "none found"));
        SSL_CTX_free(ctx);
        return NULL;
    }
    if ((u->tls_cert[0] != '\0') != (u->tls_key[0] != '\0')) {
        sl_errf(err, err_len,
                "TLS: a client certificate needs both tls_cert= and "
                "tls_key=");
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (u->tls_cert[0] != '\0') {
        if (!SSL_CTX_use_certificate_chain_file(ctx, u->tls_cert)) {
            sl_errf(err, err_len,
                    "TLS: cannot load the client certificate tls_cert=%s: %s",
                    u->tls_cert, ssl_reason(why, sizeof(why), "unreadable"));
            SSL_CTX_free(ctx);
            return NULL;
        }
        if (!SSL_CTX_use_PrivateKey_file(ctx, u->tls_key, SSL_FILETYPE_PEM) ||
            !SSL_CTX_check_private_key(ctx)) {
            sl_errf(err, err_len,
                    "TLS: cannot use the client key tls_key=%s (unreadable, "
                    "or not the key of tls_cert=): %s",
                    u->tls_key, ssl_reason(why, sizeof(why), "unreadable"));
            SSL_CTX_free(ctx);
            return NULL;
        }
    }
    return ctx;
}

sluice_status sl_tls_check(const sl_url *url, char *err, size_t err_len)
{
    SSL_CTX *ctx;

    if (!url->tls)
        return SLUICE_OK;
    if ((ctx = tls_context(url, err, err_len)) == NULL)
        return SLUICE_EURL;
    SSL_CTX_free(ctx);
    return SLUICE_OK;
}

/* Waits for what an SSL call that returned rc wants; SLUICE_OK to call it
 * again. */
static sluice_status ssl_wait(sl_conn *cn, int rc, int64_t deadline,
                              const char *doing, char *err, size_t err_len)
{
    int e = SSL_get_error(cn->ssl, rc);
    char why[256];

    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return await(cn, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline,
                     doing, err, err_len);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && rc == 0))
        return fail(cn, SLUICE_EIO, err, err_len,
                    "%s: connection lost; the next call reconnects", doing);
    if (e == SSL_ERROR_SYSCALL && errno != 0)
        return fail(cn, SLUICE_EIO, err, err_len,
                    "%s: %s; the next call reconnects", doing, strerror(errno));
    return fail(cn, SLUICE_EIO, err, err_len,
                "%s: TLS: %s; the next call reconnects", doing,
                ssl_reason(why, sizeof(why), "protocol error"));
}

/* The TLS handshake, verification included, by the connect deadline. */
static sluice_status tls_handshake(sl_conn *cn, int64_t deadline, char *err,
                                   size_t err_len)
{
    const sl_url *u = cn->url;
    const char *name = u->tls_server_name[0] ? u->tls_server_name : u->host;
    unsigned char ip[16];
    bool is_ip =
        inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    SSL_CTX *ctx;
    BIO *bio;
    char why[256];
    int rc;

    pthread_once(&nosigpipe_once, make_nosigpipe_method);
    if ((ctx = tls_context(u, why, sizeof(why))) == NULL)
        return fail(cn, SLUICE_ECONNECT, err, err_len, "%s", why);
    cn->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL keeps its own reference */
    bio = nosigpipe_method ? BIO_new(nosigpipe_method) : NULL;
    if (cn->ssl == NULL || bio == NULL) {
        BIO_free(bio);
        return fail(cn, SLUICE_ENOMEM, err, err_len,
                    "TLS: out of memory setting up the connection");
    }
    BIO_set_fd(bio, cn->fd, BIO_NOCLOSE);
    SSL_set_bio(cn->ssl, bio, bio);
    if (!is_ip) {
        char sni[sizeof(u->tls_server_name)];

        snprintf(sni, sizeof(sni), "%s", name);
        SSL_set_tlsext_host_name(cn->ssl, sni);
    }
    if (!u->tls_insecure) {
        X509_VERIFY_PARAM *param = SSL_get0_param(cn->ssl);

        if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(param, name)
                  : !SSL_set1_host(cn->ssl, name))
            return fail(cn, SLUICE_ECONNECT, err, err_len,
                        "TLS: cannot verify against the name \"%s\"", name);
    }
    SSL_set_connect_state(cn->ssl);
    while ((rc = SSL_do_handshake(cn->ssl)) != 1) {
        int e = SSL_get_error(cn->ssl, rc), w;
        long v;

        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            w = wait_fd(cn->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                        deadline);
            if (w > 0)
                continue;
            return fail(cn, SLUICE_ECONNECT, err, err_len,
                        "TLS handshake did not finish within %u ms; is it a "
                        "TLS port?",
                        u->opts.connect_timeout_ms);
        }
        v = SSL_get_verify_result(cn->ssl);
        if (v != X509_V_OK)
            return fail(cn, SLUICE_ECONNECT, err, err_len,
                        "TLS: the server's certificate failed verification: "
                        "%s (verified against %s, name \"%s\"; tls_ca_file=, "
                        "tls_ca_dir= and tls_server_name= set what is "
                        "trusted)",
                        X509_verify_cert_error_string(v),
                        u->tls_ca_file[0]  ? u->tls_ca_file
                        : u->tls_ca_dir[0] ? u->tls_ca_dir
                                           : "the system's CA certificates",
                        name);
        return fail(cn, SLUICE_ECONNECT, err, err_len,
                    "TLS handshake failed: %s (is it a TLS port? does the "
                    "server want a client certificate, tls_cert= and "
                    "tls_key=?)",
                    ssl_reason(why, sizeof(why), "connection closed"));
    }
    return SLUICE_OK;
}

/* ------------------------------------------------------------ connect */

/* Starts a non-blocking connect and waits for it; the socket in *fd.
 * Returns 0 or the errno that ended it (ETIMEDOUT at the deadline). */
static int connect_by(int family, const struct sockaddr *sa, socklen_t len,
                      int64_t deadline, int *fd)
{
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int soerr = 0, w, rc;
    socklen_t sl = sizeof(soerr);

    if (s < 0)
        return errno;
    /* A Unix-domain socket whose backlog is full says EAGAIN, and the
     * connect has not started: try again until the deadline. */
    while ((rc = connect(s, sa, len)) < 0 && family == AF_UNIX &&
           errno == EAGAIN && now_ms() < deadline) {
        struct timespec ms = {0, 1000000};

        nanosleep(&ms, NULL);
    }
    if (rc < 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            soerr = errno == EAGAIN ? ETIMEDOUT : errno;
            close(s);
            return soerr;
        }
        w = wait_fd(s, POLLOUT, deadline);
        if (w <= 0) {
            soerr = w == 0 ? ETIMEDOUT : errno;
            close(s);
            return soerr;
        }
        if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
            soerr != 0) {
            if (soerr == 0)
                soerr = errno;
            close(s);
            return soerr;
        }
    }
    if (family != AF_UNIX) {
        int one = 1;

        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    *fd = s;
    return 0;
}

static sluice_status open_socket(sl_conn *cn, int64_t deadline, char *err,
                                 size_t err_len)
{
    const sl_url *u = cn->url;
    struct addrinfo hints, *res = NULL, *ai;
    char port[16];
    int e = ETIMEDOUT, rc;

    if (u->socket[0] != '\0') {
        struct sockaddr_un sun;

        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        memcpy(sun.sun_path, u->socket, strlen(u->socket) + 1);
        e = connect_by(AF_UNIX, (struct sockaddr *)&sun, sizeof(sun), deadline,
                       &cn->fd);
    } else {
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        snprintf(port, sizeof(port), "%d", u->port);
        if ((rc = getaddrinfo(u->host, port, &hints, &res)) != 0) {
            sl_errf(err, err_len, "%s: cannot connect to %s:%d: %s", cn->who,
                    u->host, u->port, gai_strerror(rc));
            return SLUICE_ECONNECT;
        }
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            e = connect_by(ai->ai_family, ai->ai_addr, ai->ai_addrlen, deadline,
                           &cn->fd);
            if (e == 0 || e == ETIMEDOUT)
                break;
        }
        freeaddrinfo(res);
    }
    if (e == 0)
        return SLUICE_OK;
    cn->fd = -1;
    if (e == ETIMEDOUT)
        return fail(cn, SLUICE_ECONNECT, err, err_len,
                    "did not accept the connection within %u ms; is the "
                    "server running?",
                    u->opts.connect_timeout_ms);
    if (u->socket[0] != '\0')
        sl_errf(err, err_len,
                "%s: cannot connect to the socket %s: %s; is the server "
                "running, listening there (unixsocket), and may this "
                "process open it?",
                cn->who, u->socket, strerror(e));
    else
        sl_errf(err, err_len,
                "%s: cannot connect to %s:%d: %s; is the server running?",
                cn->who, u->host, u->port, strerror(e));
    sl_conn_close(cn);
    return SLUICE_ECONNECT;
}

/* Runs one command synchronously during the connection's setup. */
static sluice_status setup_command(sl_conn *cn, int argc, const char **argv,
                                   const char *what, char *err, size_t err_len)
{
    redisReply *rep = NULL;
    sluice_status st;
    char ep[300];

    if ((st = sl_conn_append(cn, argc, argv, NULL, err, err_len)) != SLUICE_OK)
        return st;
    if ((st = sl_conn_read(cn, &rep, err, err_len)) != SLUICE_OK) {
        /* The connection could not be set up: a server that refuses the
         * TLS client (no certificate, or one it does not trust) says so
         * only here, after the handshake, with TLS 1.3. */
        if (cn->url->tls && err != NULL && st != SLUICE_ENOMEM) {
            size_t n = strlen(err);

            snprintf(err + n, err_len > n ? err_len - n : 0,
                     " (during %s after the TLS handshake: does the server "
                     "want a client certificate, tls_cert= and tls_key=?)",
                     what);
        }
        return st == SLUICE_ENOMEM ? st : SLUICE_ECONNECT;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        sl_errf(err, err_len, "%s: %s refused %s: %s", cn->who,
                endpoint(cn, ep, sizeof(ep)), what, rep->str);
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
 * nothing of it had gone out. Over TLS, what arrives unasked may also be
 * the protocol's own (TLS 1.3 session tickets), which a read consumes. */
static bool idle_connection_is_sound(sl_conn *cn)
{
    struct pollfd pfd = {cn->fd, POLLIN, 0};
    char byte;

    if (cn->reader->len > cn->reader->pos)
        return false; /* bytes of a reply nobody asked for */
    if (cn->ssl != NULL && SSL_pending(cn->ssl) > 0)
        return false;
    if (poll(&pfd, 1, 0) == 0)
        return true;
    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
        return false;
    if (cn->ssl != NULL) {
        int rc = SSL_read(cn->ssl, &byte, 1);

        if (rc > 0)
            return false;
        ERR_clear_error();
        return SSL_get_error(cn->ssl, rc) == SSL_ERROR_WANT_READ;
    }
    /* Readable: EOF (0), an error (-1), or stray bytes; all unsound. */
    return recv(cn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
           (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Backoff after failures in a row: the second waits 50 ms, then twice as
 * long each time, up to a second. */
static int64_t backoff_ms(unsigned failures)
{
    if (failures < 2)
        return 0;
    return failures >= 7 ? 1000 : 50LL << (failures - 2);
}

static sluice_status open_connection(sl_conn *cn, char *err, size_t err_len);

sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len)
{
    int64_t now;
    sluice_status st;

    if (cn->fd >= 0 && cn->olen == 0 && !idle_connection_is_sound(cn)) {
        cn->reopened++;
        sl_conn_close(cn);
    }
    if (cn->fd >= 0)
        return SLUICE_OK;
    now = now_ms();
    if (cn->failures > 0 && now < cn->retry_at) {
        sl_errf(err, err_len,
                "%s (%u failed attempts in a row; the next in %lld ms)",
                cn->last_failure, cn->failures,
                (long long)(cn->retry_at - now));
        return SLUICE_ECONNECT;
    }
    if ((st = open_connection(cn, cn->last_failure,
                              sizeof(cn->last_failure))) == SLUICE_OK) {
        cn->failures = 0;
        return SLUICE_OK;
    }
    sl_errf(err, err_len, "%s", cn->last_failure);
    if (st == SLUICE_ECONNECT) {
        cn->failures++;
        cn->retry_at = now_ms() + backoff_ms(cn->failures);
    }
    return st;
}

static sluice_status open_connection(sl_conn *cn, char *err, size_t err_len)
{
    const sl_url *u = cn->url;
    int64_t deadline;
    sluice_status st;
    char db[16];

    deadline = now_ms() + u->opts.connect_timeout_ms;
    if ((st = open_socket(cn, deadline, err, err_len)) != SLUICE_OK)
        return st;
    cn->reader = redisReaderCreate();
    if (cn->reader == NULL)
        return fail(cn, SLUICE_ENOMEM, err, err_len,
                    "out of memory setting up the connection");
    if (u->tls && (st = tls_handshake(cn, deadline, err, err_len)) != SLUICE_OK)
        return st;
    if (u->tls && u->password[0] == '\0' && u->db == 0) {
        /* Something to answer, so that a refused client is a failure to
         * connect, not of the first request. */
        const char *argv[1] = {"PING"};

        if ((st = setup_command(cn, 1, argv, "PING", err, err_len)) !=
            SLUICE_OK)
            return st;
    }
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

/* ------------------------------------------------------------ writing */

static bool obuf_reserve(sl_conn *cn, size_t more)
{
    size_t cap = cn->ocap ? cn->ocap : 4096;
    char *p;

    if (cn->olen + more <= cn->ocap)
        return true;
    while (cap < cn->olen + more)
        cap *= 2;
    if ((p = sl_realloc(cn->obuf, cap)) == NULL)
        return false;
    cn->obuf = p;
    cn->ocap = cap;
    return true;
}

/* Writes the RESP form of a command ourselves: hiredis's own formatting
 * (sdscatfmt per argument) was the largest client cost per decision. */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len)
{
    size_t need = 24, i;
    char *p;

    for (i = 0; i < (size_t)argc; i++)
        need += 32 + (lens != NULL ? lens[i] : strlen(argv[i]));
    if (!obuf_reserve(cn, need))
        return fail(cn, SLUICE_ENOMEM, err, err_len,
                    "out of memory queueing a command");
    p = cn->obuf + cn->olen;
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
    cn->olen = (size_t)(p - cn->obuf);
    return SLUICE_OK;
}

sluice_status sl_conn_appendf(sl_conn *cn, char *err, size_t err_len,
                              const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0 || !obuf_reserve(cn, (size_t)len)) {
        if (cmd != NULL)
            redisFreeCommand(cmd);
        return fail(cn, SLUICE_ENOMEM, err, err_len,
                    "out of memory queueing a command");
    }
    memcpy(cn->obuf + cn->olen, cmd, (size_t)len);
    cn->olen += (size_t)len;
    redisFreeCommand(cmd);
    return SLUICE_OK;
}

/* Writes the whole output buffer by the command deadline, with send()'s
 * MSG_NOSIGNAL (or the TLS BIO that uses it): a write on a connection the
 * server has closed must not raise SIGPIPE, whose default action kills the
 * host process. */
sluice_status sl_conn_flush(sl_conn *cn, char *err, size_t err_len)
{
    int64_t deadline = now_ms() + cn->url->opts.command_timeout_ms;
    size_t off = 0;
    sluice_status st;

    if (cn->fd < 0)
        return fail(cn, SLUICE_EIO, err, err_len,
                    "connection closed; the next call reconnects");
    while (off < cn->olen) {
        if (cn->ssl != NULL) {
            int n = SSL_write(
                cn->ssl, cn->obuf + off,
                (int)(cn->olen - off > 1 << 30 ? 1 << 30 : cn->olen - off));

            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            if ((st = ssl_wait(cn, n, deadline, "taking the request", err,
                               err_len)) != SLUICE_OK)
                return st;
            continue;
        }
        ssize_t n = send(cn->fd, cn->obuf + off, cn->olen - off, MSG_NOSIGNAL);

        if (n >= 0) {
            off += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return fail(cn, SLUICE_EIO, err, err_len,
                        "sending: %s; the next call reconnects",
                        strerror(errno));
        if ((st = await(cn, POLLOUT, deadline, "taking the request", err,
                        err_len)) != SLUICE_OK)
            return st;
    }
    cn->olen = 0;
    return SLUICE_OK;
}

/* ------------------------------------------------------------ reading */

/* Reads what the socket has into the reader, waiting by the deadline. */
static sluice_status fill(sl_conn *cn, int64_t deadline, char *err,
                          size_t err_len)
{
    char buf[READ_CHUNK];
    sluice_status st;

    for (;;) {
        ssize_t n;

        if (cn->ssl != NULL) {
            int rc = SSL_read(cn->ssl, buf, sizeof(buf));

            if (rc > 0) {
                n = rc;
            } else {
                if ((st = ssl_wait(cn, rc, deadline, "a reply", err,
                                   err_len)) != SLUICE_OK)
                    return st;
                continue;
            }
        } else {
            n = recv(cn->fd, buf, sizeof(buf), 0);
            if (n == 0)
                return fail(cn, SLUICE_EIO, err, err_len,
                            "reading a reply: connection lost; the next "
                            "call reconnects");
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    return fail(cn, SLUICE_EIO, err, err_len,
                                "reading a reply: %s; the next call "
                                "reconnects",
                                strerror(errno));
                if ((st = await(cn, POLLIN, deadline, "a reply", err,
                                err_len)) != SLUICE_OK)
                    return st;
                continue;
            }
        }
        if (redisReaderFeed(cn->reader, buf, (size_t)n) != REDIS_OK)
            return fail(cn, SLUICE_ENOMEM, err, err_len,
                        "out of memory reading a reply");
        return SLUICE_OK;
    }
}

sluice_status sl_conn_read(sl_conn *cn, redisReply **rep, char *err,
                           size_t err_len)
{
    int64_t deadline;
    bool waited = false;
    sluice_status st;
    void *r = NULL;

    if (cn->fd < 0)
        return fail(cn, SLUICE_EIO, err, err_len,
                    "connection closed; the next call reconnects");
    for (;;) {
        if (redisReaderGetReply(cn->reader, &r) != REDIS_OK)
            return fail(cn, SLUICE_EIO, err, err_len,
                        "sent what is not a Redis reply (%s); the next "
                        "call reconnects",
                        cn->reader->errstr[0] ? cn->reader->errstr
                                              : "protocol error");
        if (r != NULL) {
            *rep = r;
            return SLUICE_OK;
        }
        if (!waited) {
            /* A reply already in the reader costs no round trip. */
            waited = true;
            cn->round_trips++;
            if (cn->olen > 0 &&
                (st = sl_conn_flush(cn, err, err_len)) != SLUICE_OK)
                return st;
            deadline = now_ms() + cn->url->opts.command_timeout_ms;
        }
        if ((st = fill(cn, deadline, err, err_len)) != SLUICE_OK)
            return st;
    }
}

/* ------------------------------------------------------------ replies */

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
    char ep[300];

    if (rep->type != REDIS_REPLY_ERROR)
        return SLUICE_OK;
    endpoint(cn, ep, sizeof(ep));
    if (proxy_failure(rep->str)) {
        sl_errf(err, err_len,
                "%s: %s cannot reach the Redis server of this key: %s", cn->who,
                ep, rep->str);
        return strstr(rep->str, "timed out") ? SLUICE_ETIMEOUT : SLUICE_EIO;
    }
    /* A server that wants a password says so in two ways: NOAUTH, or, for
     * a command of more than ten arguments, a protocol error. */
    if (strncmp(rep->str, "NOAUTH", 6) == 0 ||
        strstr(rep->str, "unauthenticated") != NULL) {
        sl_errf(err, err_len,
                "%s: %s requires authentication; give the password in "
                "the URL (redis://user:password@host:port) or in "
                "options.password (SLUICE_PASSWORD for the CLI): %s",
                cn->who, ep, rep->str);
        return SLUICE_ESERVER;
    }
    sl_errf(err, err_len, "%s: %s answered: %s", cn->who, ep, rep->str);
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
