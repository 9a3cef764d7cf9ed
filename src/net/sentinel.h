/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel.h - finding the master through Redis Sentinel: the first phase
 * of every connect of a connection opened from redis+sentinel:// (or
 * redis+multi+sentinel://). The sentinels are asked in turn, each within
 * its share of the connect's time (a frozen one never stalls the others),
 * SENTINEL GET-MASTER-ADDR-BY-NAME; the connection then connects to the
 * address named, and its setup checks with ROLE that it is the master
 * (conn.c). Every connect asks again: a closed connection or a READONLY
 * reply (a demoted master) is how a failover shows. See the Sentinel
 * client spec on redis.io; docs/PRODUCTION.md, "Redis Sentinel". */
#ifndef SL_NET_SENTINEL_H
#define SL_NET_SENTINEL_H

#include "net/conn.h"

#include <stdatomic.h>

struct sl_sentinel;

/* A subscription on one sentinel: +selected-slave and +promoted-slave
 * come only from the sentinel that leads a failover, which may be any of
 * them, so every listed sentinel has one. */
typedef struct sl_sentinel_listen {
    sl_conn conn;   /* subscribed; reconnects with its own backoff */
    sl_endpoint ep; /* the sentinel */
    struct sl_sentinel *s;
} sl_sentinel_listen;

typedef struct sl_sentinel {
    const sl_url *url;        /* seeds: the sentinels; master: the name */
    sl_config cfg;            /* the handle's, its connect timeout a share */
    sl_endpoint ask_ep;       /* the sentinel asked now: url's sentinel_ep */
    sl_endpoint master_ep;    /* url's ep with the master's address */
    sl_conn ask;              /* to the sentinel asked now */
    sl_sentinel_listen *subs; /* one a sentinel: url->nseeds */
    char hint_host[256];      /* a failover's new master, announced */
    int hint_port;            /* 0: none */
    int64_t hint_until;       /* tried alone until then (monotonic ms) */
    char hint_by[320];        /* the event and its sentinel, for messages */
    char named_by[320];       /* who named master_ep, for messages */
    sl_conn *data;            /* the connection to the master */
    size_t at;                /* its index in url->seeds */
    size_t tried;             /* sentinels tried in this round */
    size_t first;             /* the one that answered last: asked first */
    int64_t deadline;         /* of this sentinel's try (monotonic ms) */
    int64_t round_deadline;   /* of the round: the connect's */
    bool done;                /* this try is over, named or not */
    bool answered;            /* it named the master */
    bool ending;              /* closing: callbacks are not news */
    char why[SL_ERR_LEN];     /* what each sentinel tried said, joined */
    atomic_uint_fast64_t switches; /* moves to another master */
    uint64_t discoveries;          /* rounds that named a master */
    uint64_t readonly;  /* READONLY replies that closed the connection */
    uint64_t announced; /* events of this master heard, on any sentinel */
    uint64_t stale;     /* of those, +switch-master not followed */
    bool known;         /* a master was named before */
    char last_host[256];
    int last_port;
} sl_sentinel;

/* A connection to url's master through its sentinels: cn (prepared, on
 * url->ep) asks them before every connect. SLUICE_ENOMEM or OK. */
sluice_status sl_conn_use_sentinels(sl_conn *cn, const sl_url *url);

/* The subscriptions that cn's sentinels announce a failover on, one a
 * sentinel (i from 0; NULL past the last): connections for the owner's
 * loop to drive (the engine), each subscribed (sl_sentinel_subscribe)
 * once it is added. An announced failover of cn's master closes cn once
 * what it sent is answered: the next request goes to the new master. */
sl_conn *sl_sentinel_sub(sl_conn *cn, size_t i);
void sl_sentinel_subscribe(sl_conn *cn, size_t i);

/* Moves to another master so far: any thread. */
uint64_t sl_sentinel_failovers(const sl_conn *cn);

#endif /* SL_NET_SENTINEL_H */
