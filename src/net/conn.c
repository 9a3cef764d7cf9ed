/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c - one connection to a Redis server: sluice's own non-blocking
 * socket (TCP, or a Unix-domain socket), TLS over it with OpenSSL when the
 * URL asks, its own output buffer, and the replies parsed by hiredis's
 * reader. A state machine (closed, connecting, TLS, setup, ready) that
 * never waits by itself: the engine waits for the socket (and, at open,
 * sl_conn_ensure at the end of this file). Every transport failure closes the
 * connection and fails the replies it awaited, so that the next command
 * reconnects. */
#include "net/conn.h"

#include "backend.h"
#include "engine.h"

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
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (16 * 1024)

typedef struct lookup lookup;
static void lookup_unref(lookup *lk);

int64_t sl_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes: poll's
 * revents, 0 when the deadline passed, -1 an error (errno). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int64_t left = deadline - sl_mono_ms();
        int rc;

        if (left < 0)
            left = 0;
        rc = poll(&pfd, 1, (int)left);
        if (rc > 0)
            return pfd.revents;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* "host:port" or the socket's path, for messages. */
static const char *endpoint(const sl_conn *cn, char *buf, size_t len)
{
    const sl_endpoint *u = cn->ep;

    if (u->socket[0] != '\0')
        snprintf(buf, len, "%s", u->socket);
    else
        snprintf(buf, len, "%s:%d", u->host, u->port);
    return buf;
}

void sl_conn_init(sl_conn *cn, const sl_endpoint *ep,
                  const sluice_options *opts, const char *who, sl_engine *eng)
{
    memset(cn, 0, sizeof(*cn));
    cn->fd = -1;
    cn->ep = ep;
    cn->opts = opts;
    cn->who = who;
    if (eng != NULL && sl_engine_add_conn(eng, cn))
        cn->eng = eng;
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
    if (cn->eng != NULL)
        sl_engine_forget_fd(cn->eng, cn);
    if (cn->ssl != NULL) {
        /* No close_notify: the peer may be gone, and a shutdown that
         * blocks or raises SIGPIPE is worse than an abrupt close. */
        SSL_free(cn->ssl);
        cn->ssl = NULL;
    }
    if (cn->fd >= 0)
        close(cn->fd);
    cn->fd = -1;
    lookup_unref(cn->lookup); /* its thread lets go of it when done */
    cn->lookup = NULL;
    if (cn->reader != NULL)
        redisReaderFree(cn->reader);
    cn->reader = NULL;
    cn->phase = SL_PHASE_CLOSED;
    cn->want_write = false;
    cn->doomed = false;
    cn->olen = cn->owrote = 0;
    cn->queued = cn->written = 0;
    cn->slen = cn->swrote = 0;
    cn->setup_left = 0;
    cn->answered = false;
}

/* Fails every reply awaited: st and msg, and whether its command may have
 * gone out (written is the stream's offset that reached the socket). The
 * callbacks may queue commands again, on a fresh ring. */
static void fail_all(sl_conn *cn, sluice_status st, uint64_t written,
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

/* Backoff after failures in a row: the second waits 50 ms, then twice as
 * long each time, up to a second. */
static int64_t backoff_ms(unsigned failures)
{
    if (failures < 2)
        return 0;
    return failures >= 7 ? 1000 : 50LL << (failures - 2);
}

/* The connection failed with st: closed, its message kept in
 * last_failure, and every reply awaited failed. A failure before the
 * connection was ready is SLUICE_ECONNECT, counts toward the backoff, and
 * nothing queued went out. */
static void failed(sl_conn *cn, sluice_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failed(sl_conn *cn, sluice_status st, const char *fmt, ...)
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
         * answers only errors) is backed off like one that refuses. */
        cn->failures++;
        cn->retry_at = sl_mono_ms() + backoff_ms(cn->failures);
    }
    cn->last_status = st;
    drop_socket(cn);
    fail_all(cn, st, written, cn->last_failure);
}

void sl_conn_abort(sl_conn *cn, sluice_status st, const char *msg)
{
    uint64_t written = cn->phase == SL_PHASE_READY ? cn->written : 0;

    drop_socket(cn);
    fail_all(cn, st, written, msg);
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
        cn->retry_at = sl_mono_ms() + backoff_ms(cn->failures);
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
static size_t withdraw(sl_conn *cn, const sl_job *job, sl_expect *gone)
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

bool sl_conn_withdraw(sl_conn *cn, const sl_job *job)
{
    if (cn->phase == SL_PHASE_READY || !sl_conn_serves(cn, job))
        return false;
    withdraw(cn, job, NULL);
    return true;
}

sluice_status sl_conn_expire(sl_conn *cn, const sl_job *job, const char *msg)
{
    sl_expect *gone;
    size_t k, ngone;
    char why[SL_ERR_LEN], ep[300];

    if (!sl_conn_serves(cn, job))
        return SLUICE_OK;
    if (cn->phase == SL_PHASE_READY || cn->phase == SL_PHASE_CLOSED) {
        /* Sent, and stuck: Redis answers in order, so whatever was sent
         * after it waits too. */
        sl_conn_abort(cn, SLUICE_ETIMEOUT, msg);
        return SLUICE_ETIMEOUT;
    }
    /* Still connecting: nothing was written, so the job's commands leave
     * the buffer, and the connect goes on for the calls after it. */
    if ((gone = sl_malloc(cn->qlen * sizeof(*gone))) == NULL) {
        sl_conn_abort(cn, SLUICE_ECONNECT, msg);
        return SLUICE_ECONNECT;
    }
    ngone = withdraw(cn, job, gone);
    sl_errf(why, sizeof(why),
            "%s: %s: not connected within %lld ms (timeout_ms=%u; %s); "
            "nothing was sent, and the connect goes on for the next calls",
            cn->who, endpoint(cn, ep, sizeof(ep)),
            (long long)sl_engine_waited(job), cn->opts->command_timeout_ms,
            cn->phase == SL_PHASE_RESOLVING    ? "host name lookup under way"
            : cn->phase == SL_PHASE_CONNECTING ? "connect() under way"
            : cn->phase == SL_PHASE_TLS        ? "TLS handshake under way"
                                               : "setup under way");
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

void sl_conn_forget(sl_conn *cn, const sl_job *job)
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

bool sl_conn_serves(const sl_conn *cn, const sl_job *job)
{
    size_t k;

    for (k = 0; k < cn->qlen; k++)
        if (cn->q[(cn->qhead + k) % cn->qcap].job == job)
            return true;
    return false;
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
static SSL_CTX *tls_context(const sl_endpoint *u, char *err, size_t err_len)
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

    struct stat sb;
    const char *dir = url->ep.tls_ca_dir;

    if (!url->ep.tls)
        return SLUICE_OK;
    /* OpenSSL reads a CA directory only when it verifies a certificate,
     * so a directory it cannot read would fail every connect instead. */
    if (dir[0] != '\0' && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
                           access(dir, R_OK | X_OK) != 0)) {
        int e = errno;

        sl_errf(err, err_len,
                "TLS: cannot read the CA directory tls_ca_dir=%s: %s", dir,
                stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode) ? "not a directory"
                                                            : strerror(e));
        return SLUICE_EURL;
    }
    if ((ctx = tls_context(&url->ep, err, err_len)) == NULL)
        return SLUICE_EURL;
    SSL_CTX_free(ctx);
    return SLUICE_OK;
}

/* Starts TLS on the connected socket: SNI, and the name or address the
 * certificate must carry. */
static bool tls_begin(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    const char *name = u->tls_server_name[0] ? u->tls_server_name : u->host;
    unsigned char ip[16];
    bool is_ip =
        inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    SSL_CTX *ctx;
    BIO *bio;
    char why[SL_ERR_LEN];

    pthread_once(&nosigpipe_once, make_nosigpipe_method);
    if ((ctx = tls_context(u, why, sizeof(why))) == NULL) {
        failed(cn, SLUICE_ECONNECT, "%s", why);
        return false;
    }
    cn->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL keeps its own reference */
    bio = nosigpipe_method ? BIO_new(nosigpipe_method) : NULL;
    if (cn->ssl == NULL || bio == NULL) {
        BIO_free(bio);
        failed(cn, SLUICE_ENOMEM,
               "TLS: out of memory setting up the connection");
        return false;
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
                  : !SSL_set1_host(cn->ssl, name)) {
            failed(cn, SLUICE_ECONNECT,
                   "TLS: cannot verify against the name \"%s\"", name);
            return false;
        }
    }
    SSL_set_connect_state(cn->ssl);
    cn->phase = SL_PHASE_TLS;
    return true;
}

static void begin_setup(sl_conn *cn);

/* One step of the handshake, verification included. */
static void tls_step(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    const char *name = u->tls_server_name[0] ? u->tls_server_name : u->host;
    char why[256];
    long v;
    int rc = SSL_do_handshake(cn->ssl), e;

    if (rc == 1) {
        cn->want_write = false;
        begin_setup(cn);
        return;
    }
    e = SSL_get_error(cn->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        cn->want_write = e == SSL_ERROR_WANT_WRITE;
        return;
    }
    v = SSL_get_verify_result(cn->ssl);
    if (v != X509_V_OK) {
        failed(cn, SLUICE_ECONNECT,
               "TLS: the server's certificate failed verification: %s "
               "(verified against %s, name \"%s\"; tls_ca_file=, "
               "tls_ca_dir= and tls_server_name= set what is trusted)",
               X509_verify_cert_error_string(v),
               u->tls_ca_file[0]  ? u->tls_ca_file
               : u->tls_ca_dir[0] ? u->tls_ca_dir
                                  : "the system's CA certificates",
               name);
        return;
    }
    failed(cn, SLUICE_ECONNECT,
           "TLS handshake failed: %s (is it a TLS port? does the server "
           "want a client certificate, tls_cert= and tls_key=?)",
           ssl_reason(why, sizeof(why), "connection closed"));
}

/* ------------------------------------------------------------ connect */

/* Formats one command in RESP at dst, which has room (resp_size). */
static size_t resp_size(int argc, const char **argv, const size_t *lens)
{
    size_t need = 24, i;

    for (i = 0; i < (size_t)argc; i++)
        need += 32 + (lens != NULL ? lens[i] : strlen(argv[i]));
    return need;
}

static size_t resp_format(char *dst, int argc, const char **argv,
                          const size_t *lens)
{
    char *p = dst;
    size_t i;

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
    return (size_t)(p - dst);
}

/* What the setup commands are, in order, for messages. */
static const char *setup_name(const sl_conn *cn, unsigned k)
{
    const sl_endpoint *u = cn->ep;
    const char *names[3];
    unsigned n = 0;

    if (u->tls && u->password[0] == '\0' && u->db == 0)
        names[n++] = "PING";
    if (u->password[0] != '\0')
        names[n++] = "AUTH";
    if (u->db != 0)
        names[n++] = "SELECT";
    return k < n ? names[k] : "setup";
}

/* The backoff ends with the first answer that is not an error, not with
 * the connect: a server that accepts and closes, or answers "max number
 * of clients reached", is still failing. */
static void ready(sl_conn *cn)
{
    cn->phase = SL_PHASE_READY;
}

/* Queues AUTH and SELECT, and over TLS without them a PING: something to
 * answer, so that a refused client is a failure to connect, not of the
 * first request. Nothing queued by callers is written before their
 * replies are in. */
static void begin_setup(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    char db[16];

    cn->slen = cn->swrote = 0;
    cn->setup_left = 0;
    if (u->tls && u->password[0] == '\0' && u->db == 0) {
        const char *argv[1] = {"PING"};

        cn->slen += resp_format(cn->sbuf + cn->slen, 1, argv, NULL);
        cn->setup_left++;
    }
    if (u->password[0] != '\0') {
        const char *argv[3] = {"AUTH", u->user, u->password};

        if (u->user[0] == '\0') {
            argv[1] = u->password;
            cn->slen += resp_format(cn->sbuf + cn->slen, 2, argv, NULL);
        } else {
            cn->slen += resp_format(cn->sbuf + cn->slen, 3, argv, NULL);
        }
        cn->setup_left++;
    }
    if (u->db != 0) {
        const char *argv[2] = {"SELECT", db};

        snprintf(db, sizeof(db), "%d", u->db);
        cn->slen += resp_format(cn->sbuf + cn->slen, 2, argv, NULL);
        cn->setup_left++;
    }
    if (cn->setup_left == 0)
        ready(cn);
    else
        cn->phase = SL_PHASE_SETUP;
}

/* ---------------------------------------------- the reply size cap */

/* hiredis 0.14 has no limit on a reply: a bulk string is buffered whole,
 * and an array's header alone makes it allocate the room for all its
 * elements. Its reader builds the reply through a table of functions, so
 * sluice puts its own in front of hiredis's: each counts what the object
 * costs against the connection's cap (max_reply_bytes), and refuses past
 * it, which the reader reports as an error (read by take_reply). */
static redisReplyObjectFunctions *hiredis_fns; /* the reader's own */
static pthread_once_t hiredis_fns_once = PTHREAD_ONCE_INIT;

/* hiredis's table is static in its library, the same for every reader:
 * read it once, from a reader made for that (threads may open their
 * connections at the same time). */
static void find_hiredis_fns(void)
{
    redisReader *r = redisReaderCreate();

    if (r != NULL) {
        hiredis_fns = r->fn;
        redisReaderFree(r);
    }
}

/* The connection whose reply a task builds (the reader's privdata). */
static bool reply_charge(const redisReadTask *task, size_t bytes)
{
    sl_conn *cn = task->privdata;

    if (cn == NULL)
        return true;
    if (bytes > cn->reply_cap - cn->reply_bytes) {
        cn->reply_too_big = true;
        return false;
    }
    cn->reply_bytes += bytes;
    return true;
}

static void *capped_string(const redisReadTask *task, char *str, size_t len)
{
    if (!reply_charge(task, sizeof(redisReply) + len))
        return NULL;
    return hiredis_fns->createString(task, str, len);
}

static void *capped_array(const redisReadTask *task, int elements)
{
    size_t n = elements > 0 ? (size_t)elements : 0;

    if (!reply_charge(task, sizeof(redisReply) + n * sizeof(redisReply *)))
        return NULL;
    return hiredis_fns->createArray(task, elements);
}

static void *capped_integer(const redisReadTask *task, long long v)
{
    if (!reply_charge(task, sizeof(redisReply)))
        return NULL;
    return hiredis_fns->createInteger(task, v);
}

static void *capped_nil(const redisReadTask *task)
{
    if (!reply_charge(task, sizeof(redisReply)))
        return NULL;
    return hiredis_fns->createNil(task);
}

static void free_reply_object(void *r)
{
    hiredis_fns->freeObject(r);
}

static redisReplyObjectFunctions capped_fns = {
    capped_string, capped_array, capped_integer, capped_nil, free_reply_object};

/* A reader whose replies count against cn's cap. */
static redisReader *capped_reader(sl_conn *cn)
{
    redisReader *r;

    pthread_once(&hiredis_fns_once, find_hiredis_fns);
    if ((r = redisReaderCreate()) == NULL)
        return NULL;
    if (r->fn == hiredis_fns && hiredis_fns != NULL) {
        r->fn = &capped_fns;
        r->privdata = cn;
    }
    cn->reply_cap = cn->ep->reply_max_bytes > 0 ? cn->ep->reply_max_bytes
                                                : SL_REPLY_MAX_DEFAULT;
    cn->reply_bytes = 0;
    cn->reply_too_big = false;
    cn->got_reply = false;
    return r;
}

/* The socket is connected: TLS, or the setup. */
static void connected(sl_conn *cn)
{
    if (cn->ep->socket[0] == '\0') {
        int one = 1;

        setsockopt(cn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if ((cn->reader = capped_reader(cn)) == NULL) {
        failed(cn, SLUICE_ENOMEM, "out of memory setting up the connection");
        return;
    }
    if (cn->ep->tls) {
        if (tls_begin(cn))
            tls_step(cn);
        return;
    }
    begin_setup(cn);
}

static void connect_failed(sl_conn *cn, int e)
{
    const sl_endpoint *u = cn->ep;

    if (e == ETIMEDOUT)
        failed(cn, SLUICE_ECONNECT,
               "did not accept the connection in connect_timeout_ms=%u; is "
               "the server running?",
               cn->opts->connect_timeout_ms);
    else if (u->socket[0] != '\0')
        failed(cn, SLUICE_ECONNECT,
               "cannot connect to the socket: %s; is the server running, "
               "listening there (unixsocket), and may this process open it?",
               strerror(e));
    else
        failed(cn, SLUICE_ECONNECT,
               "cannot connect: %s; is the server running?", strerror(e));
}

/* Connects to the next address; the socket in cn->fd, connecting. */
static void try_address(sl_conn *cn)
{
    const struct sockaddr *sa =
        (const struct sockaddr *)&cn->addrs[cn->addr_at];
    int s =
        socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc, e;

    if (s < 0) {
        connect_failed(cn, errno);
        return;
    }
    /* A Unix-domain socket whose backlog is full says EAGAIN, and the
     * connect has not started: try again, briefly, until the deadline. */
    while ((rc = connect(s, sa, cn->addr_lens[cn->addr_at])) < 0 &&
           sa->sa_family == AF_UNIX && errno == EAGAIN &&
           sl_mono_ms() < cn->connect_deadline) {
        struct timespec ms = {0, 1000000};

        nanosleep(&ms, NULL);
    }
    cn->fd = s;
    cn->phase = SL_PHASE_CONNECTING;
    if (rc == 0) {
        connected(cn);
        return;
    }
    if (errno == EINPROGRESS || errno == EINTR)
        return; /* writable when done */
    e = errno == EAGAIN ? ETIMEDOUT : errno;
    if (cn->addr_at + 1 < cn->naddrs) {
        close(s);
        cn->fd = -1;
        cn->addr_at++;
        try_address(cn);
        return;
    }
    connect_failed(cn, e);
}

/* A host name's lookup, off the caller's thread: getaddrinfo() may block
 * for seconds (a resolver that does not answer), which must cost neither
 * the event loop nor a call's deadline. The thread writes one byte to its
 * end of a socket pair when done; the connection watches the other end as
 * its socket, under its connect deadline. Whoever lets go of it last (the
 * thread, or the connection, closed meanwhile) frees it. */
struct lookup {
    atomic_int refs;
    atomic_bool done;
    int fd; /* the thread's end */
    char host[sizeof(((sl_endpoint *)0)->host)];
    char port[16];
    int rc; /* getaddrinfo's */
    struct sockaddr_storage addrs[SL_CONN_ADDRS];
    socklen_t lens[SL_CONN_ADDRS];
    size_t n;
};

static void lookup_unref(lookup *lk)
{
    if (lk != NULL && atomic_fetch_sub(&lk->refs, 1) == 1) {
        if (lk->fd >= 0)
            close(lk->fd);
        sl_free(lk);
    }
}

/* The addresses of res, at most SL_CONN_ADDRS. */
static size_t take_addrs(const struct addrinfo *res,
                         struct sockaddr_storage *addrs, socklen_t *lens)
{
    const struct addrinfo *ai;
    size_t n = 0;

    for (ai = res; ai != NULL && n < SL_CONN_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(addrs[0]))
            continue;
        memcpy(&addrs[n], ai->ai_addr, ai->ai_addrlen);
        lens[n++] = ai->ai_addrlen;
    }
    return n;
}

static void *lookup_run(void *arg)
{
    lookup *lk = arg;
    struct addrinfo hints, *res = NULL;
    char one = 1;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    lk->rc = getaddrinfo(lk->host, lk->port, &hints, &res);
    if (lk->rc == 0) {
        lk->n = take_addrs(res, lk->addrs, lk->lens);
        freeaddrinfo(res);
    }
    atomic_store(&lk->done, true);
    if (send(lk->fd, &one, 1, MSG_NOSIGNAL) < 0) {
        /* The connection closed meanwhile: nobody waits. */
    }
    lookup_unref(lk);
    return NULL;
}

/* Starts the lookup of the host: the connection waits on its end of the
 * pair (SL_PHASE_RESOLVING). */
static void start_lookup(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    lookup *lk = sl_calloc(1, sizeof(*lk));
    pthread_attr_t attr;
    pthread_t th;
    int pair[2], rc;

    if (lk == NULL) {
        failed(cn, SLUICE_ENOMEM, "out of memory for a host name lookup");
        return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
        sl_free(lk);
        failed(cn, SLUICE_ECONNECT, "cannot be looked up: socketpair: %s",
               strerror(errno));
        return;
    }
    snprintf(lk->host, sizeof(lk->host), "%s", u->host);
    snprintf(lk->port, sizeof(lk->port), "%d", u->port);
    lk->fd = pair[1];
    atomic_init(&lk->refs, 2);
    atomic_init(&lk->done, false);
    fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, lookup_run, lk);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        close(pair[0]);
        close(pair[1]);
        sl_free(lk);
        failed(cn, SLUICE_ECONNECT, "cannot be looked up: no thread: %s",
               strerror(rc));
        return;
    }
    cn->lookup = lk;
    cn->fd = pair[0];
    cn->phase = SL_PHASE_RESOLVING;
}

static void try_address(sl_conn *cn);

/* The lookup thread is done: its addresses, then the connect. */
static void lookup_done(sl_conn *cn)
{
    lookup *lk = cn->lookup;
    char byte;

    if (recv(cn->fd, &byte, 1, 0) < 0 && !atomic_load(&lk->done))
        return; /* not yet */
    if (!atomic_load(&lk->done))
        return;
    if (cn->eng != NULL)
        sl_engine_forget_fd(cn->eng, cn);
    close(cn->fd);
    cn->fd = -1;
    cn->lookup = NULL;
    cn->phase = SL_PHASE_CLOSED;
    if (lk->rc != 0 || lk->n == 0) {
        char why[128];

        snprintf(why, sizeof(why), "%s",
                 lk->rc != 0 ? gai_strerror(lk->rc) : "no address");
        lookup_unref(lk);
        failed(cn, SLUICE_ECONNECT, "cannot be looked up: %s", why);
        return;
    }
    memcpy(cn->addrs, lk->addrs, sizeof(cn->addrs));
    memcpy(cn->addr_lens, lk->lens, sizeof(cn->addr_lens));
    cn->naddrs = lk->n;
    lookup_unref(lk);
    try_address(cn);
}

/* The host's addresses, looked up once and kept: a reconnect does not
 * look up again. A socket's path and a numeric address need no lookup; a
 * host name is looked up on a thread (start_lookup), and false is
 * returned meanwhile. */
static bool resolve(sl_conn *cn)
{
    const sl_endpoint *u = cn->ep;
    struct addrinfo hints, *res = NULL;
    char port[16];

    if (cn->naddrs > 0)
        return true;
    if (u->socket[0] != '\0') {
        struct sockaddr_un *sun = (struct sockaddr_un *)&cn->addrs[0];

        memset(sun, 0, sizeof(*sun));
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, u->socket, strlen(u->socket) + 1);
        cn->addr_lens[0] = sizeof(*sun);
        cn->naddrs = 1;
        return true;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
    snprintf(port, sizeof(port), "%d", u->port);
    if (getaddrinfo(u->host, port, &hints, &res) == 0) {
        cn->naddrs = take_addrs(res, cn->addrs, cn->addr_lens);
        freeaddrinfo(res);
        if (cn->naddrs > 0)
            return true;
    }
    start_lookup(cn);
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
        fail_all(cn, SLUICE_ECONNECT, 0, msg);
        return;
    }
    cn->connect_deadline = now + cn->opts->connect_timeout_ms;
    cn->addr_at = 0;
    if (resolve(cn))
        try_address(cn);
}

void sl_conn_kick(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_CLOSED && cn->qlen > 0)
        start_connect(cn);
}

void sl_conn_warm(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_CLOSED &&
        (cn->failures == 0 || sl_mono_ms() >= cn->retry_at))
        start_connect(cn);
}

bool sl_conn_is_connecting(const sl_conn *cn)
{
    return cn->phase != SL_PHASE_CLOSED && cn->phase != SL_PHASE_READY;
}

/* connect() finished, well or not. */
static void connect_done(sl_conn *cn)
{
    int soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (getsockopt(cn->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        soerr = errno;
    if (soerr == 0) {
        connected(cn);
        return;
    }
    if (cn->addr_at + 1 < cn->naddrs) {
        if (cn->eng != NULL)
            sl_engine_forget_fd(cn->eng, cn);
        close(cn->fd);
        cn->fd = -1;
        cn->addr_at++;
        try_address(cn);
        return;
    }
    connect_failed(cn, soerr);
}

void sl_conn_check_deadline(sl_conn *cn, int64_t now)
{
    if (cn->phase == SL_PHASE_CLOSED || cn->phase == SL_PHASE_READY ||
        now < cn->connect_deadline)
        return;
    if (cn->phase == SL_PHASE_RESOLVING)
        failed(cn, SLUICE_ECONNECT,
               "cannot be looked up in connect_timeout_ms=%u",
               cn->opts->connect_timeout_ms);
    else if (cn->phase == SL_PHASE_CONNECTING)
        connect_failed(cn, ETIMEDOUT);
    else if (cn->phase == SL_PHASE_TLS)
        failed(cn, SLUICE_ECONNECT,
               "TLS handshake did not finish in connect_timeout_ms=%u; is it "
               "a TLS port?",
               cn->opts->connect_timeout_ms);
    else
        failed(cn, SLUICE_ECONNECT,
               "did not answer %s in connect_timeout_ms=%u", setup_name(cn, 0),
               cn->opts->connect_timeout_ms);
}

/* ------------------------------------------------------------ writing */

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
static void check_idle(sl_conn *cn)
{
    if (cn->phase == SL_PHASE_READY && cn->olen == cn->owrote &&
        cn->qlen == 0 && !idle_connection_is_sound(cn)) {
        cn->reopened++;
        drop_socket(cn);
    }
}

/* Writes the RESP form of a command ourselves: hiredis's own formatting
 * (sdscatfmt per argument) was the largest client cost per decision. */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len)
{
    size_t n;

    /* Blocking users check in sl_conn_ensure, before they append. */
    if (cn->eng != NULL)
        check_idle(cn);
    if (!obuf_reserve(cn, resp_size(argc, argv, lens))) {
        sl_errf(err, err_len, "%s: out of memory queueing a command", cn->who);
        return SLUICE_ENOMEM;
    }
    n = resp_format(cn->obuf + cn->olen, argc, argv, lens);
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

    if (cn->eng != NULL)
        check_idle(cn);
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

sluice_status sl_conn_expect(sl_conn *cn, sl_reply_fn fn, sl_job *job, size_t i)
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
static void io_write(sl_conn *cn)
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
        ssize_t n;

        if (cn->ssl != NULL) {
            int rc = SSL_write(cn->ssl, buf + *off, (int)chunk), e;
            char why[256];

            if (rc > 0) {
                n = rc;
            } else {
                e = SSL_get_error(cn->ssl, rc);
                if (e == SSL_ERROR_WANT_WRITE) {
                    cn->want_write = true;
                    return;
                }
                if (e == SSL_ERROR_WANT_READ)
                    return;
                failed(cn, SLUICE_EIO, "sending: %s; the next call reconnects",
                       e == SSL_ERROR_SYSCALL && errno != 0
                           ? strerror(errno)
                           : ssl_reason(why, sizeof(why), "TLS error"));
                return;
            }
        } else {
            n = send(cn->fd, buf + *off, chunk, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    cn->want_write = true;
                    return;
                }
                failed(cn, SLUICE_EIO, "sending: %s; the next call reconnects",
                       strerror(errno));
                return;
            }
        }
        *off += (size_t)n;
        if (!setup)
            cn->written += (uint64_t)n;
    }
    if (!setup)
        cn->olen = cn->owrote = 0;
}

/* ------------------------------------------------------------ reading */

/* A TLS port drops a client that speaks plain text to it (a reset, or a
 * close) before any reply: say so when that is how a plain connection
 * ends. */
static const char *tls_hint(const sl_conn *cn)
{
    if (cn->ep->tls || cn->got_reply || cn->ep->socket[0] != '\0')
        return "";
    return " before any reply (is this a TLS port? use rediss://, or tls=1 "
           "for redis+multi:// and redis-cluster://)";
}

/* Reads what the socket has into the reader: 1 bytes read, 0 the server
 * closed, -1 nothing yet, -2 a failure (closed, reported). */
static int read_some(sl_conn *cn)
{
    char buf[READ_CHUNK];
    ssize_t n;

    for (;;) {
        if (cn->ssl != NULL) {
            int rc = SSL_read(cn->ssl, buf, sizeof(buf)), e;
            char why[256];

            if (rc > 0) {
                n = rc;
                break;
            }
            e = SSL_get_error(cn->ssl, rc);
            if (e == SSL_ERROR_WANT_READ)
                return -1;
            if (e == SSL_ERROR_WANT_WRITE) {
                cn->want_write = true;
                return -1;
            }
            if (e == SSL_ERROR_ZERO_RETURN ||
                (e == SSL_ERROR_SYSCALL && rc == 0))
                return 0;
            failed(cn, SLUICE_EIO,
                   "reading a reply: %s; the next call reconnects",
                   e == SSL_ERROR_SYSCALL && errno != 0
                       ? strerror(errno)
                       : ssl_reason(why, sizeof(why), "TLS error"));
            return -2;
        }
        n = recv(cn->fd, buf, sizeof(buf), 0);
        if (n > 0)
            break;
        if (n == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -1;
        failed(cn, SLUICE_EIO,
               "reading a reply: %s%s; the next call reconnects",
               strerror(errno), tls_hint(cn));
        return -2;
    }
    /* What the reader holds is the reply under way (those before it were
     * taken): a bulk string is buffered whole before it becomes a reply,
     * so the cap counts it here. */
    if (cn->reader->len - cn->reader->pos > cn->reply_cap - cn->reply_bytes) {
        failed(cn, SLUICE_EPROTO,
               "sent a reply of more than %zu bytes (max_reply_bytes); "
               "the connection is dropped",
               cn->reply_cap);
        return -2;
    }
    if (redisReaderFeed(cn->reader, buf, (size_t)n) != REDIS_OK) {
        failed(cn, SLUICE_ENOMEM, "out of memory reading a reply");
        return -2;
    }
    return 1;
}

/* Takes the next complete reply: 1 one in *r, 0 none yet, -1 the bytes
 * are not RESP (closed, reported). */
static int take_reply(sl_conn *cn, redisReply **r)
{
    void *p = NULL;

    if (redisReaderGetReply(cn->reader, &p) != REDIS_OK) {
        char why[300];

        if (cn->reply_too_big)
            failed(cn, SLUICE_EPROTO,
                   "sent a reply of more than %zu bytes (max_reply_bytes); "
                   "the connection is dropped",
                   cn->reply_cap);
        else if (cn->reader->err == REDIS_ERR_OOM)
            failed(cn, SLUICE_ENOMEM, "out of memory reading a reply");
        else
            failed(cn, SLUICE_EPROTO,
                   "sent what is not a Redis reply (%s); the next call "
                   "reconnects",
                   cn->reader->errstr[0]
                       ? (sl_quote(why, sizeof(why), cn->reader->errstr,
                                   strlen(cn->reader->errstr)),
                          why)
                       : "protocol error");
        return -1;
    }
    if (p != NULL) {
        cn->reply_bytes = 0; /* the next reply counts afresh */
        cn->got_reply = true;
    }
    *r = p;
    return p != NULL;
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
            (unsigned)(u->password[0] != '\0') + (unsigned)(u->db != 0);

        k = n - cn->setup_left;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char said[SL_ESCAPE_SHOWN * 4 + 32];

        sl_escape(said, sizeof(said), r->str, r->len);
        failed(cn, SLUICE_ECONNECT, "refused %s: %s", setup_name(cn, k), said);
        return;
    }
    if (--cn->setup_left == 0)
        ready(cn);
}

/* Hands complete replies to their callbacks, in order. */
static void dispatch(sl_conn *cn)
{
    while (cn->fd >= 0 && cn->reader != NULL) {
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
            failed(cn, SLUICE_EPROTO,
                   "sent a reply nobody asked for; the connection is "
                   "dropped");
            return;
        }
        if (r->type != REDIS_REPLY_ERROR) {
            cn->answered = true;
            cn->failures = 0;
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
static void io_read(sl_conn *cn)
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
            if (cn->phase == SL_PHASE_READY && cn->qlen == 0 && cn->eng != NULL)
                close_quietly(cn, "closed the idle connection");
            else
                failed(cn, SLUICE_EIO,
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

void sl_conn_io(sl_conn *cn, short revents)
{
    switch (cn->phase) {
    case SL_PHASE_CLOSED:
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
        io_write(cn);
    if (cn->fd >= 0 && (revents & (POLLIN | POLLERR | POLLHUP)))
        io_read(cn);
    /* The setup answered: what was queued goes out now. */
    if (cn->fd >= 0 && cn->phase == SL_PHASE_READY && cn->owrote < cn->olen &&
        !cn->want_write)
        io_write(cn);
}

/* Whether an idle connection is still fit for a request: the server may
 * have closed it (its idle timeout, a restart, CLIENT KILL), and anything
 * readable on a connection that owes us nothing (a late reply, EOF, an
 * error) means it is out of step. Over TLS, what arrives unasked may also
 * be the protocol's own (TLS 1.3 session tickets), which a read consumes. */
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

/* ------------------------------------------------------- at open */

/* The message of the last failure, and its status. */
static sluice_status last(const sl_conn *cn, char *err, size_t err_len)
{
    sl_errf(err, err_len, "%s", cn->last_failure);
    return cn->last_status != SLUICE_OK ? cn->last_status : SLUICE_EIO;
}

sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len)
{
    check_idle(cn);
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
        int w = wait_fd(cn->fd, sl_conn_wants(cn), cn->connect_deadline);

        if (w > 0)
            sl_conn_io(cn, (short)w);
        else if (w == 0)
            sl_conn_check_deadline(cn, sl_mono_ms());
        else
            failed(cn, SLUICE_ECONNECT, "%s", strerror(errno));
    }
    return cn->phase == SL_PHASE_READY ? SLUICE_OK : last(cn, err, err_len);
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
}

/* ------------------------------------------------------------ replies */

/* twemproxy answers with its own errors for a server it cannot reach:
 * "ERR " and strerror() of the failure, or "ERR unknown" when it had no
 * errno (nutcracker 0.5.0's msg_get_error): the server closed the
 * connection with requests in flight. That one exactly: Redis's own
 * "ERR unknown command ..." is an error of the server. */
static bool proxy_failure(const char *s)
{
    return strncmp(s, "ERR Connection refused", 22) == 0 ||
           strncmp(s, "ERR Connection reset by peer", 28) == 0 ||
           strncmp(s, "ERR Connection timed out", 24) == 0 ||
           strncmp(s, "ERR Invalid argument", 20) == 0 ||
           strcmp(s, "ERR unknown") == 0;
}

const char *sl_conn_endpoint(const sl_conn *cn, char *buf, size_t len)
{
    return endpoint(cn, buf, len);
}

sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len)
{
    char ep[300], said[SL_ESCAPE_SHOWN * 4 + 32];

    if (rep->type != REDIS_REPLY_ERROR)
        return SLUICE_OK;
    endpoint(cn, ep, sizeof(ep));
    sl_escape(said, sizeof(said), rep->str, rep->len);
    if (proxy_failure(rep->str)) {
        sl_errf(err, err_len,
                "%s: %s cannot reach the Redis server of this key: %s", cn->who,
                ep, said);
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
                cn->who, ep, said);
        return SLUICE_ESERVER;
    }
    sl_errf(err, err_len, "%s: %s answered: %s", cn->who, ep, said);
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
