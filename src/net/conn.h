/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.h - one connection to a Redis server, owned by sluice: a
 * non-blocking socket (TCP or a Unix-domain socket, socket.h), TLS over it
 * when the URL asks (tls.h), sluice's own output buffer, and hiredis's
 * reader to parse the replies (resp.h). AUTH and SELECT on connect; every
 * command queued is paired with a callback that gets its reply, in order.
 *
 * A connection is a state machine that never waits by itself: sl_conn_io
 * takes the readiness of its socket, sl_conn_wants says what it waits for
 * and until when. Its owner drives it and learns of its socket through the
 * callbacks it sets (sl_conn_events), as hiredis's async context reaches
 * its event loop; the connection knows nothing of who owns it, and a job
 * is only a token it hands back. Only the connect at a handle's open
 * waits, with poll() (sl_conn_ensure). */
#ifndef SL_NET_CONN_H
#define SL_NET_CONN_H

#include "internal.h"
#include "net/resp.h"
#include "net/socket.h"

#include <hiredis/hiredis.h>

struct sl_job; /* the owner's: passed back, never looked into */
struct sl_conn;

/* Receives one command's reply (r, freed by the connection after the
 * call), or, with r NULL, the failure that closed the connection before
 * the reply came: st and msg say why, and sent whether any byte of the
 * command may have reached the server (false: it certainly did not run). */
typedef void (*sl_reply_fn)(struct sl_conn *cn, struct sl_job *job, size_t i,
                            redisReply *r, sluice_status st, bool sent,
                            const char *msg);

typedef struct sl_expect {
    sl_reply_fn fn;     /* NULL: the reply is dropped (ASKING's +OK) */
    struct sl_job *job; /* passed back, with i */
    size_t i;
    uint64_t start; /* offset of the command's first byte in the stream */
} sl_expect;

/* What a connection tells its owner and asks of it, set by the owner
 * before the first command (as hiredis's async context has ev.addRead,
 * ev.delRead, ...). With none (unwatch NULL) the connection is used on its
 * own, blocking: its user waits for it (sl_conn_ensure). */
typedef struct sl_conn_events {
    void *data; /* the owner's, passed back */
    /* The socket is about to close: stop watching it. */
    void (*unwatch)(void *data, struct sl_conn *cn);
    /* How long job's call has waited so far, in ms: for messages. */
    int64_t (*waited)(void *data, const struct sl_job *job);
} sl_conn_events;

typedef enum sl_phase {
    SL_PHASE_CLOSED = 0,
    SL_PHASE_DISCOVER,   /* the sentinels asked where the master is */
    SL_PHASE_RESOLVING,  /* the host name looked up on a thread */
    SL_PHASE_CONNECTING, /* connect() under way */
    SL_PHASE_TLS,        /* the TLS handshake */
    SL_PHASE_SETUP,      /* AUTH, SELECT or PING written, replies awaited */
    SL_PHASE_READY
} sl_phase;

struct sl_conn;

/* Where a connection connects to, asked before every connect (Redis
 * Sentinel: net/sentinel.c sets these; the connection knows nothing of
 * it but this table, as an owner reaches it through sl_conn_events). In
 * the discovery phase fd is the socket of the one asked. */
typedef struct sl_conn_discovery {
    /* A connect begins: ask (the phase is SL_PHASE_DISCOVER until the
     * answer, then sl_conn_connect_found, or sl_conn_fail). */
    void (*start)(struct sl_conn *cn);
    void (*io)(struct sl_conn *cn, short revents);
    short (*wants)(const struct sl_conn *cn);
    void (*check_deadline)(struct sl_conn *cn, int64_t now);
    void (*drop)(struct sl_conn *cn); /* the connection closes */
    void (*free)(struct sl_conn *cn); /* for good */
    /* ROLE's reply in the setup (sent last): whether the server is the
     * master; else role says what it is, for the message. */
    bool (*role)(struct sl_conn *cn, const redisReply *r, char *role,
                 size_t role_len);
    /* After a connect failed (ROLE refused the server, or it closed):
     * ms until the next (a new master announced and awaited is tried
     * again soon, its promotion a matter of ms), or -1: the usual
     * backoff. */
    int64_t (*retry_in)(const struct sl_conn *cn);
    void (*readonly)(struct sl_conn *cn); /* a READONLY reply came */
    /* The endpoint for messages, when discovery has something to say
     * about it (no address yet, a failover awaited); else false. */
    bool (*describe)(const struct sl_conn *cn, char *buf, size_t len);
} sl_conn_discovery;

typedef struct sl_conn {
    int fd; /* -1 when closed */
    /* With a discovery (sentinels), every connect asks it first. NULL:
     * none. */
    const sl_conn_discovery *disc;
    void *disc_state;
    void *ssl;    /* SSL *, when the URL asks for TLS */
    sl_resp resp; /* replies read and not yet taken */
    sl_phase phase;
    bool want_write; /* TLS: the last SSL call wants the socket writable */
    /* Commands queued: obuf[owrote, olen) is still to be written. queued
     * and written count the bytes of the stream since the connection
     * opened, so that an expectation knows whether its command went out. */
    char *obuf;
    size_t olen, ocap, owrote;
    uint64_t queued, written;
    uint64_t last_start; /* where the command queued last starts */
    /* The setup commands, written before anything queued. */
    char sbuf[1024];
    size_t slen, swrote;
    unsigned setup_left; /* their replies still to come */
    /* Replies expected, oldest first (a ring). */
    sl_expect *q;
    size_t qhead, qlen, qcap;
    int64_t connect_deadline; /* monotonic ms, while not ready */
    short watched;            /* events the loop was last told to watch */
    bool doomed;              /* closes once what was written is answered */
    bool push;                /* a subscriber: every reply goes to the
                               * oldest expectation, which stays; in a
                               * backoff it waits, its commands queued */
    bool kept;                /* the callback keeps the reply it got */
    bool answered;            /* a reply other than an error came */
    sl_conn_events ev;        /* the owner's loop; zero: none */
    const sl_endpoint *ep;    /* where, as whom, TLS */
    const sl_config *cfg;     /* timeouts, shared by the handle */
    const char *who;          /* backend name, for messages */
    /* The addresses of the host, resolved on the first connect (numeric
     * hosts without a lookup; names on a thread, never blocking the
     * caller): a reconnect does not look up again. */
    sl_lookup *lookup; /* under way: fd is its end of a socket pair */
    sl_addrs addrs;
    size_t addr_at;       /* the one tried now */
    uint64_t round_trips; /* writes that carried requests to the server */
    uint64_t reopened;    /* idle connections found closed and reopened */
    /* Connect attempts that failed in a row, and the time (monotonic ms)
     * before which no new attempt is made: a server that is down costs
     * the callers an immediate SLUICE_ECONNECT, not a connect timeout
     * each, and is not hammered with connects. */
    unsigned failures;
    int64_t retry_at;
    /* A subscriber's health check, as Redis clients have one (redis-py's
     * health_check_interval): a socket that stays open to a server that
     * hangs, or to a host gone without a reset, brings no message and no
     * error, so a PING goes every ping_every_ms while it is ready, and no
     * answer within ping_wait_ms closes it (it reconnects). 0: none. */
    uint32_t ping_every_ms, ping_wait_ms;
    int64_t ping_at;  /* the next PING (monotonic ms); 0: none due */
    int64_t pong_by;  /* the answer's deadline, from its write; 0: none */
    bool ping_unsent; /* a PING queued, not all written yet */
    char last_failure[SL_ERR_LEN]; /* the message of the last failure */
    sluice_status last_status;     /* and its status */
    bool got_reply;                /* any reply came on this connection */
} sl_conn;

/* A closed connection to ep, for who (a backend's name, in messages); no
 * events: the owner sets cn->ev to drive it from a loop. */
void sl_conn_prepare(sl_conn *cn, const sl_endpoint *ep, const sl_config *cfg,
                     const char *who);
/* Whether the connection is open (a failure closes it). */
bool sl_conn_is_open(const sl_conn *cn);
bool sl_conn_is_ready(const sl_conn *cn);

/* Queues one command; nothing is written until the socket is writable
 * (the engine) or a flush or read (blocking). */
sluice_status sl_conn_append(sl_conn *cn, int argc, const char **argv,
                             const size_t *lens, char *err, size_t err_len);
/* Queues one command formatted as hiredis's redisCommand formats it (%s,
 * %b with a length, %lld, ...). */
sluice_status sl_conn_appendf(sl_conn *cn, char *err, size_t err_len,
                              const char *fmt, ...);
/* With an engine: the command queued last gets its reply through fn. On
 * a closed connection this starts a connect (or, in a backoff, fails the
 * command with SLUICE_ECONNECT, through fn, from the engine's loop). */
sluice_status sl_conn_expect(sl_conn *cn, sl_reply_fn fn, struct sl_job *job,
                             size_t i);
/* Called from a reply callback: the reply is the callback's to free (with
 * freeReplyObject), not the connection's. */
static inline void sl_conn_keep_reply(sl_conn *cn)
{
    cn->kept = true;
}
/* Whether any of the replies awaited belongs to job. */
bool sl_conn_serves(const sl_conn *cn, const struct sl_job *job);

/* The replies awaited for job, answered by other means (its deadline),
 * are dropped when they come. */
void sl_conn_forget(sl_conn *cn, const struct sl_job *job);
/* The deadline of job passed with replies of it awaited here. On a ready
 * connection they are stuck (Redis answers in order): it closes, failing
 * what it awaited with SLUICE_ETIMEOUT and a message naming the endpoint
 * and the wait. On one still connecting nothing was sent: the job's
 * commands leave the buffer, its callbacks get SLUICE_ECONNECT (sent
 * false), and the connect goes on. Returns the status given, SLUICE_OK
 * when nothing of job was here. */
sluice_status sl_conn_expire(sl_conn *cn, const struct sl_job *job);
/* On a connection not ready yet (nothing written): the commands of job
 * leave it, their callbacks uncalled. False when there were none, or the
 * connection is ready (they may have gone out). */
bool sl_conn_withdraw(sl_conn *cn, const struct sl_job *job);
/* Closes the connection: every reply awaited gets st and msg (through its
 * callback), and the next command reconnects. */
void sl_conn_abort(sl_conn *cn, sluice_status st, const char *msg);
/* Closes the connection once the replies to what was written are in;
 * nothing more is written on it. For a connection out of step. */
void sl_conn_doom(sl_conn *cn);

/* The events the socket is waited for (POLLIN, POLLOUT), 0 for none. */
short sl_conn_wants(const sl_conn *cn);
/* Handles readiness of the socket (poll's revents). */
void sl_conn_io(sl_conn *cn, short revents);
/* Starts a connect when replies are awaited on a closed connection; fails
 * them in a backoff. Called by the engine before it waits. */
void sl_conn_kick(sl_conn *cn);
/* For net/sentinel.c: the sentinels named the master (cn->ep's address):
 * connect to it. */
void sl_conn_connect_found(sl_conn *cn);
/* Starts a connect on a closed connection with nothing queued, unless a
 * backoff holds: the engine drives it, so that the first command finds it
 * ready (a cluster's masters, once a slot map names them). */
void sl_conn_warm(sl_conn *cn);
/* Whether a connect is under way: a lookup, connect(), the TLS handshake
 * or the setup. */
bool sl_conn_is_connecting(const sl_conn *cn);
/* Fails a connect that passed its deadline; on a ready subscriber, sends
 * the health check's PING when due, and closes it when the answer is
 * late. */
void sl_conn_check_deadline(sl_conn *cn, int64_t now);
/* When sl_conn_check_deadline (or sl_conn_kick, for a subscriber waiting
 * out its backoff) has something to do next: monotonic ms, -1 none. */
int64_t sl_conn_next_timer(const sl_conn *cn);
/* The server to connect to changed (a failover announced): the backoff
 * earned on the old one ends, and the next connect goes at once. */
void sl_conn_retry_now(sl_conn *cn);

/* Connects (TLS handshake, AUTH, SELECT) unless already connected,
 * waiting with poll(): a handle's open. */
sluice_status sl_conn_ensure(sl_conn *cn, char *err, size_t err_len);
/* Closes the connection and frees its buffers, failing what it awaited
 * with SLUICE_EIO; the next command reconnects. */
void sl_conn_close(sl_conn *cn);

/* The connection's server as "host:port" or the socket's path, for
 * messages. */
const char *sl_conn_endpoint(const sl_conn *cn, char *buf, size_t len);

/* Within src/net: what conn.c (a connection's streams: the setup, the
 * commands queued and their replies, and the failures that close it)
 * gives connect.c (bringing it up). */
/* The connection failed with st: closed, the message kept in
 * last_failure, and every reply awaited failed. A failure before the
 * connection was ready is SLUICE_ECONNECT, counts toward the backoff, and
 * nothing queued went out. */
void sl_conn_fail(sl_conn *cn, sluice_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fails every reply awaited with st and msg; written is the stream's
 * offset that reached the socket (what was sent). */
void sl_conn_fail_all(sl_conn *cn, sluice_status st, uint64_t written,
                      const char *msg);
/* Tells the owner the socket is about to close. */
void sl_conn_unwatch(sl_conn *cn);
/* Queues AUTH, SELECT or PING as the connection needs, then is ready. */
void sl_conn_begin_setup(sl_conn *cn);
/* The setup is answered: the connection is ready (a subscriber's health
 * check starts). */
void sl_conn_ready(sl_conn *cn);
/* The name of setup command k, for messages. */
const char *sl_conn_setup_name(const sl_conn *cn, unsigned k);
/* Writes, and reads and hands out replies, without waiting. */
void sl_conn_write(sl_conn *cn);
void sl_conn_read(sl_conn *cn);
/* Drops an idle connection the server closed meanwhile. */
void sl_conn_check_idle(sl_conn *cn);

#endif /* SL_NET_CONN_H */
