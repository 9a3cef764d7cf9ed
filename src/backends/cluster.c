/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c - redis-cluster://: routes each decision to the master of its
 * key's slot (all keys of a limited key share the hash tag {K}, so one
 * script on one node decides it), follows MOVED and ASK, waits out
 * TRYAGAIN and CLUSTERDOWN, and refreshes the slot map from any node.
 * Scripts are the Lua backend's (evalsha.c), per node. */
#include "../evalsha.h"
#include "../slotmap.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_REDIRECTS 5

typedef struct node {
    sl_url url;   /* the handle's URL with this node's host and port */
    sl_conn conn; /* opened when first needed */
} node;

typedef struct cluster {
    const sl_url *url;
    sl_slotmap map;            /* slots to node indexes */
    node *nodes[SL_MAX_NODES]; /* connections, by the map's index */
    size_t nnodes;
    bool stale;   /* refresh the map before the next call */
    size_t rr;    /* which node to ask for the map first */
    uint64_t tag; /* of the next request; scripts echo it */
} cluster;

/* Where one request stands in the current call. */
typedef struct route {
    unsigned slot;
    int node;     /* where it goes next */
    bool asking;  /* send ASKING first (one-shot ASK redirect) */
    bool as_eval; /* the node lacked the script */
    bool pending; /* still to be sent */
    bool sent;    /* sent this round, reply not read yet */
    int redirects;
    uint64_t tag; /* echoed by the script: replies out of step show */
} route;

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

/* Opens connections' slots for every node the map learned of. */
static bool sync_nodes(cluster *c)
{
    while (c->nnodes < c->map.nnodes) {
        node *n = sl_calloc(1, sizeof(*n));

        if (n == NULL)
            return false;
        n->url = *c->url;
        n->url.opts.key_prefix = n->url.prefix;
        snprintf(n->url.host, sizeof(n->url.host), "%s",
                 c->map.nodes[c->nnodes].host);
        n->url.port = c->map.nodes[c->nnodes].port;
        sl_conn_init(&n->conn, &n->url, "cluster");
        c->nodes[c->nnodes++] = n;
    }
    return true;
}

/* The index of node host:port, added when new; -1 when it cannot be. */
static int node_index(cluster *c, const char *host, int port)
{
    int i = sl_slotmap_node(&c->map, host, port);

    return i >= 0 && sync_nodes(c) ? i : -1;
}

/* Reads CLUSTER SLOTS from node i into the map. */
static sluice_status load_slots(cluster *c, int i, char *err, size_t err_len)
{
    node *n = c->nodes[i];
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    redisReply *r;
    sluice_status st;

    if ((st = sl_conn_ensure(&n->conn, err, err_len)) != SLUICE_OK)
        return st;
    if ((st = sl_conn_append(&n->conn, 2, argv, NULL, err, err_len)) !=
            SLUICE_OK ||
        (st = sl_conn_read(&n->conn, &r, err, err_len)) != SLUICE_OK)
        return st;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        sl_errf(err, err_len,
                "cluster: %s:%d gave no slot map (%s); is it "
                "a cluster node?",
                n->url.host, n->url.port,
                r->type == REDIS_REPLY_ERROR ? r->str : "empty");
        freeReplyObject(r);
        return SLUICE_ESERVER;
    }
    if (sl_slotmap_load(&c->map, r, n->url.host) < 0 || !sync_nodes(c)) {
        sl_errf(err, err_len,
                "cluster: %s:%d gave a slot map that could "
                "not be read",
                n->url.host, n->url.port);
        freeReplyObject(r);
        return SLUICE_EPROTO;
    }
    freeReplyObject(r);
    return SLUICE_OK;
}

/* Refreshes the map from any node that answers, seeds included. */
static sluice_status refresh(cluster *c, char *err, size_t err_len)
{
    sluice_status st = SLUICE_ECONNECT;
    size_t i, tried, start = c->rr++;

    for (i = 0; i < c->url->nseeds; i++)
        node_index(c, c->url->seeds[i].host, c->url->seeds[i].port);
    tried = c->nnodes;
    for (i = 0; i < tried; i++) {
        st = load_slots(c, (int)((start + i) % tried), err, err_len);
        if (st == SLUICE_OK) {
            c->stale = false;
            return SLUICE_OK;
        }
    }
    return st;
}

static void cluster_close(void *p)
{
    cluster *c = p;
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < c->nnodes; i++) {
        sl_conn_close(&c->nodes[i]->conn);
        sl_free(c->nodes[i]);
    }
    sl_free(c);
}

static sluice_status cluster_open(const sl_url *url, void **out, char *err,
                                  size_t err_len)
{
    cluster *c = sl_calloc(1, sizeof(*c));
    sluice_status st;

    if (c == NULL) {
        sl_errf(err, err_len, "cluster: out of memory");
        return SLUICE_ENOMEM;
    }
    c->url = url;
    sl_slotmap_init(&c->map);
    c->stale = true;
    st = refresh(c, err, err_len);
    if (st != SLUICE_OK && url->opts.fail == SLUICE_FAIL_ERROR) {
        cluster_close(c);
        return st;
    }
    *out = c;
    return SLUICE_OK;
}

/* The slot of a request; every key of it must share it. */
static sluice_status request_slot(const cluster *c, const sl_request *rq,
                                  unsigned *slot, char *err, size_t err_len)
{
    char key[SLUICE_MAX_KEY_LEN + 128], q[300];
    size_t i, n;

    for (i = 0; i < rq->rules->count; i++) {
        unsigned s;

        n = sl_key_build(key, sizeof(key), c->url->prefix, rq->key, rq->key_len,
                         &rq->rules->rules[i]);
        s = sl_slot_of_key(key, n);
        if (i > 0 && s != *slot) {
            sl_quote(q, sizeof(q), rq->key, rq->key_len);
            sl_errf(err, err_len,
                    "cluster: key \"%s\" starts with '}', so "
                    "its stored keys have no common hash tag and fall in "
                    "slots %u and %u; give it another first byte",
                    q, *slot, s);
            return SLUICE_EKEY;
        }
        *slot = s;
    }
    return SLUICE_OK;
}

/* Sends every pending request of node i; marks them sent. *connected
 * tells whether anything may have reached the node. */
static sluice_status send_node(cluster *c, int i, const sl_request *reqs,
                               route *rt, size_t n, bool *connected, char *err,
                               size_t err_len)
{
    node *nd = c->nodes[i];
    sluice_status st;
    size_t k;
    bool any = false;

    *connected = false;
    for (k = 0; k < n && !any; k++)
        any = rt[k].pending && rt[k].node == i;
    if (!any)
        return SLUICE_OK;
    if ((st = sl_conn_ensure(&nd->conn, err, err_len)) != SLUICE_OK)
        return st;
    *connected = true;
    for (k = 0; k < n; k++) {
        if (!rt[k].pending || rt[k].node != i)
            continue;
        if (rt[k].asking) {
            const char *argv[1] = {"ASKING"};

            if ((st = sl_conn_append(&nd->conn, 1, argv, NULL, err, err_len)) !=
                SLUICE_OK)
                return st;
        }
        if ((st = sl_evalsha_append(&nd->conn, &nd->url, &reqs[k],
                                    rt[k].as_eval, rt[k].tag, err, err_len)) !=
            SLUICE_OK)
            return st;
        rt[k].pending = false;
        rt[k].sent = true;
    }
    return sl_conn_flush(&nd->conn, err, err_len);
}

/* Reads node i's replies; decides, or schedules a retry. Returns how long
 * to back off before the next round (0: none). */
static int64_t read_node(cluster *c, int i, const sl_request *reqs, route *rt,
                         size_t n, sluice_result *out, char *err,
                         size_t err_len)
{
    node *nd = c->nodes[i];
    int64_t backoff = 0;
    size_t k;

    for (k = 0; k < n; k++) {
        redisReply *r;
        sluice_status st;
        sl_redirect kind;
        unsigned slot;
        int to;

        if (!rt[k].sent || rt[k].node != i)
            continue;
        rt[k].sent = false;
        if (rt[k].asking) {
            rt[k].asking = false;
            if (sl_conn_is_open(&nd->conn) &&
                sl_conn_read(&nd->conn, &r, err, err_len) == SLUICE_OK)
                freeReplyObject(r);
        }
        if (!sl_conn_is_open(&nd->conn) ||
            (st = sl_conn_read(&nd->conn, &r, err, err_len)) != SLUICE_OK) {
            /* Sent, and the connection is gone: the script may have run,
             * so it is not sent again (no double charge). */
            out[k].status = SLUICE_EIO;
            if (!sl_conn_is_open(&nd->conn))
                sl_errf(err, err_len,
                        "cluster: lost the connection to "
                        "%s:%d with a request in flight; its outcome is "
                        "unknown",
                        nd->url.host, nd->url.port);
            c->stale = true;
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR &&
            (kind = sl_slotmap_redirect(&c->map, r->str, nd->url.host, &slot,
                                        &to)) != SL_REDIRECT_NONE) {
            if (!sync_nodes(c) || ++rt[k].redirects > MAX_REDIRECTS) {
                out[k].status = SLUICE_EPROTO;
                sl_errf(err, err_len,
                        "cluster: too many redirections for slot %u (last: "
                        "%s)",
                        rt[k].slot, r->str);
            } else {
                /* MOVED updated the map (more may have moved: refresh);
                 * ASK holds for this request only. */
                if (kind == SL_REDIRECT_MOVED)
                    c->stale = true;
                rt[k].node = to;
                rt[k].asking = kind == SL_REDIRECT_ASK;
                rt[k].pending = true;
            }
        } else if (r->type == REDIS_REPLY_ERROR &&
                   (strncmp(r->str, "TRYAGAIN", 8) == 0 ||
                    strncmp(r->str, "CLUSTERDOWN", 11) == 0)) {
            /* A slot being moved, or a failover under way: nothing ran. */
            rt[k].pending = true;
            backoff = 20;
            if (r->str[0] == 'C')
                c->stale = true;
            sl_errf(err, err_len, "cluster: %s:%d answered: %s", nd->url.host,
                    nd->url.port, r->str);
        } else if (r->type == REDIS_REPLY_ERROR &&
                   strncmp(r->str, "NOSCRIPT", 8) == 0 && !rt[k].as_eval) {
            /* A new owner, a failover or a restart: no script cached. */
            rt[k].as_eval = true;
            rt[k].pending = true;
        } else if (r->type == REDIS_REPLY_ERROR) {
            out[k].status = sl_conn_reply_status(&nd->conn, r, err, err_len);
        } else {
            out[k].status = sl_evalsha_result(&reqs[k], r, rt[k].tag, &out[k],
                                              err, err_len);
            if (out[k].status == SLUICE_EPROTO)
                sl_conn_close(&nd->conn); /* out of step: start afresh */
        }
        freeReplyObject(r);
    }
    return backoff;
}

static sluice_status cluster_decide(void *p, const sl_request *reqs, size_t n,
                                    sluice_result *out, char *err,
                                    size_t err_len)
{
    cluster *c = p;
    route small[64], *rt = n <= 64 ? small : sl_calloc(n, sizeof(*rt));
    int64_t deadline = mono_ms() + c->url->opts.command_timeout_ms;
    size_t k, left;
    sluice_status st = SLUICE_OK, last = SLUICE_ETIMEOUT;

    if (rt == NULL) {
        sl_errf(err, err_len, "cluster: out of memory for %zu requests", n);
        return SLUICE_ENOMEM;
    }
    if (c->stale && refresh(c, err, err_len) != SLUICE_OK)
        c->stale = true; /* keep going with what is known */
    for (k = 0; k < n; k++) {
        memset(&rt[k], 0, sizeof(rt[k]));
        memset(&out[k], 0, sizeof(out[k]));
        out[k].status = request_slot(c, &reqs[k], &rt[k].slot, err, err_len);
        rt[k].pending = out[k].status == SLUICE_OK;
        rt[k].node = c->map.slots[rt[k].slot];
        rt[k].tag = c->tag++;
    }
    for (;;) {
        int64_t backoff = 0;
        size_t i;
        bool unreachable = false;

        for (k = 0, left = 0; k < n; k++)
            left += rt[k].pending;
        if (left == 0)
            break;
        if (mono_ms() >= deadline)
            break;
        /* Requests of slots nobody is known to own wait for a refresh. */
        for (k = 0; k < n; k++)
            if (rt[k].pending && rt[k].node < 0)
                unreachable = true;
        if (unreachable) {
            if (refresh(c, err, err_len) != SLUICE_OK) {
                last = SLUICE_ECONNECT;
                sleep_ms(20);
            }
            for (k = 0; k < n; k++)
                if (rt[k].pending && rt[k].node < 0)
                    rt[k].node = c->map.slots[rt[k].slot];
            continue;
        }
        for (i = 0; i < c->nnodes; i++) {
            bool connected;

            if (send_node(c, (int)i, reqs, rt, n, &connected, err, err_len) ==
                SLUICE_OK)
                continue;
            c->stale = true;
            last = connected ? SLUICE_EIO : SLUICE_ECONNECT;
            for (k = 0; k < n; k++) {
                if (rt[k].node != (int)i)
                    continue;
                if (!connected && rt[k].pending) {
                    /* Could not connect: nothing was sent. Ask the map
                     * again and retry where it points. */
                    rt[k].node = -1;
                } else if (connected && (rt[k].pending || rt[k].sent)) {
                    /* Failed halfway through sending: outcome unknown. */
                    rt[k].pending = rt[k].sent = false;
                    out[k].status = SLUICE_EIO;
                }
            }
        }
        for (i = 0; i < c->nnodes; i++) {
            int64_t b = read_node(c, (int)i, reqs, rt, n, out, err, err_len);

            backoff = b > backoff ? b : backoff;
        }
        if (c->stale && refresh(c, err, err_len) == SLUICE_OK) {
            for (k = 0; k < n; k++)
                if (rt[k].pending && !rt[k].asking)
                    rt[k].node = c->map.slots[rt[k].slot];
        }
        if (backoff > 0)
            sleep_ms(backoff);
    }
    for (k = 0; k < n; k++) {
        if (!rt[k].pending)
            continue;
        /* Out of time: never sent, so nothing was charged. */
        out[k].status = last;
        sl_errf(err, err_len,
                "cluster: no owner of slot %u answered within "
                "%u ms (failover or resharding under way?)",
                rt[k].slot, c->url->opts.command_timeout_ms);
    }
    if (rt != small)
        sl_free(rt);
    return st;
}

static uint64_t cluster_round_trips(void *p)
{
    const cluster *c = p;
    uint64_t n = 0;
    size_t i;

    for (i = 0; i < c->nnodes; i++)
        n += c->nodes[i]->conn.round_trips;
    return n;
}

const sl_backend sl_backend_cluster = {
    .name = "cluster",
    .version = SL_BACKEND_VERSION,
    .open = cluster_open,
    .close = cluster_close,
    .decide = cluster_decide,
    .round_trips = cluster_round_trips,
};
