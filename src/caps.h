/* SPDX-License-Identifier: BSD-3-Clause */
/* caps.h - what each backend can do, as data: capability bits (as curl's
 * TLS backends declare SSLSUPP_* and SQLite's VFS SQLITE_IOCAP_*), each
 * backend's set, and one table of the refusals with their status and
 * message (caps.c). What a request asks is checked once, by the engine
 * before its backend sees it (engine.c); what a URL asks by its parser
 * (url.c: TLS, a socket) and the handle's open (sluice.c: clock=server).
 * The README's capability matrix is checked against this table
 * (tests/test_caps.c, unit.test_caps). */
#ifndef SL_CAPS_H
#define SL_CAPS_H

#include "internal.h"

struct sl_request;

/* What a backend can do. A bit it lacks is a refusal of the rows below
 * that need it. */
#define SL_CAP_BUCKET        (1u << 0) /* token and gcra rules decided */
#define SL_CAP_FORCE_BUCKET  (1u << 1) /* a settle's excess on token, gcra */
#define SL_CAP_BLOCK         (1u << 2) /* block=: exact denials */
#define SL_CAP_REFUND        (1u << 3) /* refunds (of token and gcra) */
#define SL_CAP_REFUND_WINDOW (1u << 4) /* refunds of fixed, sliding, log */
#define SL_CAP_SERVER        (1u << 5) /* the state is on a server */
#define SL_CAP_SERVER_CLOCK  (1u << 6) /* clock=server: TIME in a script */
#define SL_CAP_TLS           (1u << 7) /* TLS to the server */
#define SL_CAP_SOCKET        (1u << 8) /* a Unix-domain socket */
#define SL_CAP_COUNT         9

/* The bits a request's decision may need: a backend that has them all is
 * never checked per request (the engine's fast path). */
#define SL_CAPS_REQUEST                                                   \
    (SL_CAP_BUCKET | SL_CAP_FORCE_BUCKET | SL_CAP_BLOCK | SL_CAP_REFUND | \
     SL_CAP_REFUND_WINDOW)
#define SL_CAPS_ALL ((1u << SL_CAP_COUNT) - 1)

/* Each backend's set (its sl_backend.caps; the Sentinel and TLS forms are
 * their backend's: a Sentinel's own limit, no socket to the master, is
 * the URL's, url.c). */
#define SL_CAPS_MEMORY  SL_CAPS_REQUEST
#define SL_CAPS_EVALSHA SL_CAPS_ALL
#define SL_CAPS_CLUSTER (SL_CAPS_ALL & ~SL_CAP_SOCKET)
/* Charged before judged (plain.c): no exact denial for a block, no
 * window given back; no script for the server's clock. */
#define SL_CAPS_MULTI                                                      \
    (SL_CAP_BUCKET | SL_CAP_FORCE_BUCKET | SL_CAP_REFUND | SL_CAP_SERVER | \
     SL_CAP_TLS | SL_CAP_SOCKET)
/* No MULTI, no WATCH through the proxy: no read-modify-write at all. */
#define SL_CAPS_TWEMPROXY (SL_CAP_SERVER | SL_CAP_SOCKET)

/* What is asked: a request's decision (the engine), the URL's transport
 * (url.c), clock=server (sluice.c). A row answers only its own ask. */
typedef enum sl_ask {
    SL_ASK_REQUEST,
    SL_ASK_TRANSPORT,
    SL_ASK_CLOCK
} sl_ask;

/* One refusal: asked ask, needing bit, refused with status and text,
 * after "<backend>: " or, when in_url, after the URL (url "...": ). */
typedef struct sl_refusal {
    sl_ask ask;
    unsigned bit;
    sluice_status status;
    bool in_url;
    const char *what; /* for the README's matrix */
    const char *text;
} sl_refusal;

extern const sl_refusal sl_refusals[];
extern const size_t sl_refusals_count;

/* A backend's name and set, by scheme (what url.c checks before the
 * handle picks the backend; the backends declare the same sets). */
unsigned sl_caps_of_scheme(sl_scheme scheme);

/* The bits the request needs (0: none). */
unsigned sl_caps_needs(const struct sl_request *rq);

/* The first row of ask, in the table's order, needing a bit of need that
 * caps lacks: the refusal; NULL when caps has them all. */
const sl_refusal *sl_caps_refusal(sl_ask ask, unsigned need, unsigned caps);

#endif /* SL_CAPS_H */
