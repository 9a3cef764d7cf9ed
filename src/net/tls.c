/* SPDX-License-Identifier: BSD-3-Clause */
/* tls.c - TLS over a connection's socket with OpenSSL: the URL's settings
 * checked at open, the handshake with the server's name verified, and
 * reads and writes through the session, never raising SIGPIPE. */
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

void *sl_tls_new(const sl_endpoint *u, int fd, sluice_status *st, char *why,
                 size_t why_len)
{
    const char *name = u->tls_server_name[0] ? u->tls_server_name : u->host;
    unsigned char ip[16];
    bool is_ip =
        inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *bio;

    pthread_once(&nosigpipe_once, make_nosigpipe_method);
    *st = SLUICE_ECONNECT;
    if ((ctx = tls_context(u, why, why_len)) == NULL)
        return NULL;
    ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL keeps its own reference */
    bio = nosigpipe_method ? BIO_new(nosigpipe_method) : NULL;
    if (ssl == NULL || bio == NULL) {
        BIO_free(bio);
        SSL_free(ssl);
        *st = SLUICE_ENOMEM;
        sl_errf(why, why_len, "TLS: out of memory setting up the connection");
        return NULL;
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, bio, bio);
    if (!is_ip) {
        char sni[sizeof(u->tls_server_name)];

        snprintf(sni, sizeof(sni), "%s", name);
        SSL_set_tlsext_host_name(ssl, sni);
    }
    if (!u->tls_insecure) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

        if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(param, name)
                  : !SSL_set1_host(ssl, name)) {
            SSL_free(ssl);
            sl_errf(why, why_len, "TLS: cannot verify against the name \"%s\"",
                    name);
            return NULL;
        }
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

void sl_tls_free(void *ssl)
{
    /* No close_notify: the peer may be gone, and a shutdown that blocks or
     * raises SIGPIPE is worse than an abrupt close. */
    SSL_free(ssl);
}

int sl_tls_handshake(void *ssl, const sl_endpoint *u, bool *want_write,
                     char *why, size_t why_len)
{
    const char *name = u->tls_server_name[0] ? u->tls_server_name : u->host;
    char reason[256];
    long v;
    int rc = SSL_do_handshake(ssl), e;

    if (rc == 1) {
        *want_write = false;
        return 1;
    }
    e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want_write = e == SSL_ERROR_WANT_WRITE;
        return 0;
    }
    v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        sl_errf(why, why_len,
                "TLS: the server's certificate failed verification: %s "
                "(verified against %s, name \"%s\"; tls_ca_file=, "
                "tls_ca_dir= and tls_server_name= set what is trusted)",
                X509_verify_cert_error_string(v),
                u->tls_ca_file[0]  ? u->tls_ca_file
                : u->tls_ca_dir[0] ? u->tls_ca_dir
                                   : "the system's CA certificates",
                name);
        return -1;
    }
    sl_errf(why, why_len,
            "TLS handshake failed: %s (is it a TLS port? does the server "
            "want a client certificate, tls_cert= and tls_key=?)",
            ssl_reason(reason, sizeof(reason), "connection closed"));
    return -1;
}

/* ---------------------------------------------------- reads, writes */

/* A failed SSL call's reason: the system's error when there is one. */
static void io_reason(int e, char *why, size_t why_len)
{
    char reason[256];

    snprintf(why, why_len, "%s",
             e == SSL_ERROR_SYSCALL && errno != 0
                 ? strerror(errno)
                 : ssl_reason(reason, sizeof(reason), "TLS error"));
}

ssize_t sl_tls_read(void *ssl, char *buf, size_t len, bool *want_write,
                    char *why, size_t why_len)
{
    int rc = SSL_read(ssl, buf, len > INT_MAX ? INT_MAX : (int)len), e;

    if (rc > 0)
        return rc;
    e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ)
        return -1;
    if (e == SSL_ERROR_WANT_WRITE) {
        *want_write = true;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && rc == 0))
        return 0;
    io_reason(e, why, why_len);
    return -2;
}

ssize_t sl_tls_write(void *ssl, const char *buf, size_t len, bool *want_write,
                     char *why, size_t why_len)
{
    int rc = SSL_write(ssl, buf, len > INT_MAX ? INT_MAX : (int)len), e;

    if (rc > 0)
        return rc;
    e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_WRITE) {
        *want_write = true;
        return -1;
    }
    if (e == SSL_ERROR_WANT_READ)
        return -1;
    io_reason(e, why, why_len);
    return -2;
}

bool sl_tls_pending(void *ssl)
{
    return SSL_pending(ssl) > 0;
}

bool sl_tls_still_idle(void *ssl)
{
    char byte;
    int rc = SSL_read(ssl, &byte, 1);

    if (rc > 0)
        return false;
    ERR_clear_error();
    return SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ;
}
