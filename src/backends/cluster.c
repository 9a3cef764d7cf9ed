/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c - redis-cluster://: routes each decision to the master of its
 * key's slot (all keys of a limited key share the hash tag {K}, so one
 * script on one node decides it), follows MOVED and ASK, waits out
 * TRYAGAIN and CLUSTERDOWN, and refreshes the slot map from any node.
 * Scripts are the Lua backend's (evalsha.c), per node. */
#include "backends/evalsha.h"
#include "backends/slotmap.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MAX_REDIRECTS 5
#define RETRY_MS      20 /* between map refreshes; after TRYAGAIN */
#define ASK_WIDTH     3  /* nodes asked for the map at once */

typedef struct node {
    struct cluster *cl; /* the cluster it belongs to */
    sl_endpoint ep;     /* the handle's endpoint with this node's host, port */
    sl_conn conn;       /* opened when first needed */
    /* The slot map asked of it: outstanding, and in which round. */
    bool asking;
    unsigned round;
    int64_t asked_at, ask_deadline; /* monotonic ms */
    /* Exchanges for the map that failed in a row (no answer, a closed
     * connection, an error such as "max number of clients reached"), and
     * the time (monotonic ms) before which it is not asked again. */
    unsigned failures;
    int64_t retry_at;
    /* A request went to this node as EVAL and its reply has not come:
     * requests that got NOSCRIPT go by EVALSHA behind it (evalsha.c). */
    bool eval_pending;
    bool owner; /* the last slot map gave it slots: a master */
} node;

typedef struct cluster {
    const sl_url *url;
    sl_engine *eng;
    sl_slotmap map;            /* slots to node indexes */
    node *nodes[SL_MAX_NODES]; /* connections, by the map's index */
    size_t nnodes;
    bool stale;                /* the map may be out of date: refresh it */
    bool refreshing;           /* a round of CLUSTER SLOTS is under way */
    bool settled;              /* the last refresh ended, well or not */
    size_t rr;                 /* which node to ask first */
    unsigned round;            /* the refresh round, counted */
    size_t outstanding;        /* asks of this round not answered yet */
    bool reached;              /* the last round gave a map */
    int64_t round_deadline;    /* the round's asks are given up then */
    int64_t refresh_after;     /* no new round before (monotonic ms) */
    uint64_t tag;              /* of the next request; scripts echo it */
    char last_msg[SL_ERR_LEN]; /* why the last refresh failed */
    sl_job asks;               /* names the CLUSTER SLOTS on connections */
} cluster;

/* Where one request stands. */
typedef struct route {
    unsigned slot;
    int node;      /* where it goes next; -1 unknown */
    bool asking;   /* send ASKING first (one-shot ASK redirect) */
    bool as_eval;  /* goes as EVAL: the node lacked the script */
    bool noscript; /* got NOSCRIPT once */
    bool waiting;  /* to be sent */
    int redirects;
    /* Redirected to a node no slot map named: the map was read again
     * before it went anywhere; a second such redirection fails. */
    bool unknown_target;
    int64_t not_before; /* a TRYAGAIN's retry, not before then */
} route;

/* Opens connections' slots for every node the map learned of. */
static bool sync_nodes(cluster *c)
{
    while (c->nnodes < c->map.nnodes) {
        node *n = sl_calloc(1, sizeof(*n));

        if (n == NULL)
            return false;
        n->cl = c;
        n->ep = c->url->ep;
        snprintf(n->ep.host, sizeof(n->ep.host), "%s",
                 c->map.nodes[c->nnodes].host);
        n->ep.port = c->map.nodes[c->nnodes].port;
        sl_conn_init(&n->conn, &n->ep, &c->url->cfg, "cluster", c->eng);
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

static node *node_of(sl_conn *cn)
{
    return (node *)(void *)((char *)cn - offsetof(node, conn));
}

static void pump(cluster *c, sl_job *job);

/* Every job's requests waiting for an owner go where the map says. */
static void reroute_all(cluster *c)
{
    sl_job *j, *next;

    for (j = c->eng->head; j != NULL; j = next) {
        route *rt = j->data;
        size_t k;

        next = j->next;
        for (k = 0; rt != NULL && k < j->n; k++)
            if (rt[k].waiting && !rt[k].asking)
                rt[k].node = c->map.slots[rt[k].slot];
        pump(c, j);
    }
}

static void wake_at(cluster *c, int64_t at)
{
    if (c->eng->wake_at == 0 || at < c->eng->wake_at)
        c->eng->wake_at = at;
}

/* Backoff of a node's map exchanges after failures in a row: 50 ms, then
 * twice as long each time, up to two seconds. */
static int64_t node_backoff_ms(unsigned failures)
{
    return failures >= 6 ? 2000 : 50LL << (failures - 1);
}

static void node_failed(node *n)
{
    n->failures++;
    n->retry_at = sl_mono_ms() + node_backoff_ms(n->failures);
}

/* Requests of every job that wait for an owner nobody could name: the
 * round failed with every node asked, so they are answered now, by the
 * last failure, rather than at their deadlines. */
static void fail_ownerless(cluster *c)
{
    sl_job *j, *next;

    for (j = c->eng->head; j != NULL; j = next) {
        route *rt = j->data;
        size_t k;

        next = j->next;
        for (k = 0; rt != NULL && k < j->n && !j->finished; k++)
            if (rt[k].waiting && rt[k].node < 0 && !sl_engine_answered(j, k))
                sl_engine_answer(j, k, SLUICE_ECONNECT, c->last_msg);
    }
}

static bool ask_more(cluster *c);

/* A new map: its masters connect now, in parallel, so that the first
 * requests to each do not pay a connect (over TLS a handshake of several
 * round trips) within their own timeout_ms; each connect is bounded by
 * connect_timeout_ms and driven by the engine (the open waits for them,
 * then the calls or the caller's loop). A node the map gives no slot,
 * still connecting for an ask that is no longer needed, closes. */
static void connect_owners(cluster *c)
{
    bool owner[SL_MAX_NODES] = {false};
    size_t i;

    for (i = 0; i < SL_NSLOTS; i++)
        if (c->map.slots[i] >= 0)
            owner[c->map.slots[i]] = true;
    for (i = 0; i < c->nnodes; i++) {
        node *n = c->nodes[i];

        n->owner = owner[i];
        if (n->owner)
            sl_conn_warm(&n->conn);
        else if (sl_conn_is_connecting(&n->conn) && n->conn.qlen == 0)
            sl_conn_abort(&n->conn, SLUICE_ECONNECT,
                          "cluster: not needed (no slots in the map)");
    }
}

/* Whether no master of the map is still connecting. */
static bool owners_connected(void *p)
{
    const cluster *c = p;
    size_t i;

    for (i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->owner && sl_conn_is_connecting(&c->nodes[i]->conn))
            return false;
    return true;
}

/* The round ended without a map. */
static void round_failed(cluster *c)
{
    int64_t now = sl_mono_ms(), at = now + RETRY_MS, soonest = INT64_MAX;
    size_t i;

    c->refreshing = false;
    c->settled = true;
    /* No round before some node is out of its backoff. */
    for (i = 0; i < c->nnodes; i++)
        if (!c->nodes[i]->asking && c->nodes[i]->retry_at < soonest)
            soonest = c->nodes[i]->retry_at;
    if (soonest != INT64_MAX && soonest > at)
        at = soonest;
    c->refresh_after = at;
    wake_at(c, at);
    if (!c->reached && !c->eng->closing)
        fail_ownerless(c);
}

/* CLUSTER SLOTS from one node: the map, or wait for the others asked. */
static void on_slots(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg)
{
    node *n = node_of(cn);
    cluster *c = n->cl;
    bool current = c->refreshing && n->round == c->round;

    (void)job;
    (void)i;
    (void)st;
    (void)sent;
    n->asking = false;
    if (current)
        c->outstanding--;
    if (r == NULL) {
        node_failed(n);
        if (current)
            sl_errf(c->last_msg, sizeof(c->last_msg), "%s", msg);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        node_failed(n);
        if (current) {
            char said[SL_ESCAPE_SHOWN * 4 + 32] = "empty";

            if (r->type == REDIS_REPLY_ERROR)
                sl_escape(said, sizeof(said), r->str, r->len);
            sl_errf(c->last_msg, sizeof(c->last_msg),
                    "cluster: %s:%d gave no slot map (%s); is it a cluster "
                    "node?",
                    n->ep.host, n->ep.port, said);
        }
    } else if (!current) {
        n->failures = 0; /* a late answer: the round ended without it */
        return;
    } else if (sl_slotmap_load(&c->map, r, n->ep.host) < 0 || !sync_nodes(c)) {
        node_failed(n);
        sl_errf(c->last_msg, sizeof(c->last_msg),
                "cluster: %s:%d gave a slot map that could not be read "
                "(not one entry a range of slots, with its owner)",
                n->ep.host, n->ep.port);
    } else {
        size_t k;

        /* The asks not yet sent (connects under way) are not needed. */
        for (k = 0; k < c->nnodes; k++)
            if (c->nodes[k]->asking &&
                sl_conn_withdraw(&c->nodes[k]->conn, &c->asks))
                c->nodes[k]->asking = false;
        n->failures = 0;
        c->reached = true;
        c->stale = false;
        c->refreshing = false;
        c->settled = true;
        c->refresh_after = sl_mono_ms() + RETRY_MS;
        if (!c->eng->closing) {
            connect_owners(c);
            reroute_all(c);
        }
        return;
    }
    if (c->eng->closing) {
        c->refreshing = false;
        return;
    }
    if (current && c->outstanding == 0 && !ask_more(c))
        round_failed(c);
}

/* Asks nodes of this round not asked yet, up to ASK_WIDTH at once, in
 * parallel: a frozen node costs the round nothing while another answers
 * within its own round trip. Nodes in their backoff, or still owing an
 * answer, are passed over. False when there was none to ask. */
static bool ask_more(cluster *c)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    int64_t now = sl_mono_ms();
    size_t k;

    for (k = 0; k < c->nnodes && c->outstanding < ASK_WIDTH; k++) {
        node *n = c->nodes[(c->rr + k) % c->nnodes];

        if (n->round == c->round || n->asking || now < n->retry_at)
            continue;
        n->round = c->round;
        /* Out of memory: nothing of it stays queued; the next node. */
        if (sl_conn_append(&n->conn, 2, argv, NULL, NULL, 0) != SLUICE_OK ||
            sl_conn_expect(&n->conn, on_slots, &c->asks, 0) != SLUICE_OK)
            continue;
        n->asking = true;
        c->outstanding++;
        /* A node still to connect has its connect's time as well. */
        n->asked_at = now;
        n->ask_deadline =
            now + c->url->cfg.command_timeout_ms +
            (sl_conn_is_ready(&n->conn) ? 0 : c->url->cfg.connect_timeout_ms);
        if (n->ask_deadline > c->round_deadline)
            c->round_deadline = n->ask_deadline;
    }
    if (c->outstanding == 0)
        return false;
    wake_at(c, c->round_deadline);
    return true;
}

/* The round's deadline passed: the nodes that still owe the map are stuck
 * (a node answers in order), so their connections close, which fails
 * their asks (on_slots) and backs them off. */
static void give_up_asks(cluster *c, int64_t now)
{
    node *stuck[SL_MAX_NODES];
    char msg[SL_ERR_LEN];
    size_t i, n = 0;

    /* Listed first: aborting one may start asks that must not go too. */
    for (i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->asking && now >= c->nodes[i]->ask_deadline)
            stuck[n++] = c->nodes[i];
    for (i = 0; i < n; i++) {
        sl_errf(msg, sizeof(msg),
                "cluster: %s:%d did not give the slot map within %lld ms; "
                "is it frozen or overloaded?",
                stuck[i]->ep.host, stuck[i]->ep.port,
                (long long)(now - stuck[i]->asked_at));
        if (stuck[i]->asking)
            sl_conn_abort(&stuck[i]->conn, SLUICE_ETIMEOUT, msg);
    }
}

/* Refreshes the map from the nodes that answer, seeds included, unless a
 * refresh is under way or one ended less than RETRY_MS ago. */
static void want_refresh(cluster *c)
{
    size_t i;

    c->stale = true;
    if (c->refreshing || c->eng->closing)
        return;
    if (sl_mono_ms() < c->refresh_after) {
        /* No node could be reached in the last round: the requests that
         * need the map have their answer now. */
        if (c->settled && !c->reached)
            fail_ownerless(c);
        wake_at(c, c->refresh_after);
        return;
    }
    give_up_asks(c, sl_mono_ms()); /* asks left over from earlier rounds */
    for (i = 0; i < c->url->nseeds; i++)
        node_index(c, c->url->seeds[i].host, c->url->seeds[i].port);
    c->refreshing = true;
    c->settled = false;
    c->reached = false;
    c->round++;
    c->outstanding = 0;
    c->round_deadline = 0;
    c->rr++;
    if (!ask_more(c))
        round_failed(c);
}

static void cluster_close(void *p)
{
    cluster *c = p;
    size_t i;

    if (c == NULL)
        return;
    c->eng->closing = true; /* the callbacks of what closes send nothing */
    for (i = 0; i < c->nnodes; i++) {
        sl_conn_close(&c->nodes[i]->conn);
        sl_free(c->nodes[i]);
    }
    sl_free(c);
}

static sluice_status cluster_open(const sl_url *url, sl_engine *eng, void **out,
                                  char *err, size_t err_len)
{
    cluster *c = sl_calloc(1, sizeof(*c));
    int64_t deadline = sl_mono_ms() + url->cfg.connect_timeout_ms +
                       url->cfg.command_timeout_ms;

    if (c == NULL) {
        sl_errf(err, err_len, "cluster: out of memory");
        return SLUICE_ENOMEM;
    }
    c->url = url;
    c->eng = eng;
    eng->state = c; /* the engine calls back while the map loads */
    sl_slotmap_init(&c->map);
    /* The map if a node gives it in time; else the first calls ask again.
     * A server that is down never fails the open (docs/PRODUCTION.md).
     * Then, within the same budget, the connects to the masters the map
     * names (connect_owners): what is not done by then goes on in the
     * first calls. */
    want_refresh(c);
    sl_engine_wait(eng, &c->settled, deadline);
    sl_engine_wait_until(eng, owners_connected, c, deadline);
    (void)err;
    (void)err_len;
    *out = c;
    return SLUICE_OK;
}

/* The slot of a request; every key of it must share it. */
static sluice_status request_slot(const cluster *c, const sl_request *rq,
                                  unsigned *slot, char *err, size_t err_len)
{
    char key[SLUICE_MAX_KEY_LEN + 128], q[300];
    const char *prefix = rq->prefix != NULL ? rq->prefix : c->url->cfg.prefix;
    size_t i, n;

    /* A stored-rules or lease op has one key. */
    if (rq->op == SL_OP_LEASE_ACQUIRE || rq->op == SL_OP_LEASE_RELEASE) {
        n = sl_key_lease(key, sizeof(key), prefix, rq->key, rq->key_len);
        *slot = sl_slot_of_key(key, n);
        return SLUICE_OK;
    }
    if (!sl_op_decides(rq->op)) {
        n = sl_key_rules(key, sizeof(key), prefix, rq->key, rq->key_len);
        *slot = sl_slot_of_key(key, n);
        return SLUICE_OK;
    }
    for (i = 0; i < rq->decide.rules->count; i++) {
        unsigned s;

        n = sl_key_build(key, sizeof(key), c->url->cfg.prefix, rq->key,
                         rq->key_len, &rq->decide.rules->rules[i]);
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

static void on_reply(sl_conn *cn, sl_job *job, size_t k, redisReply *r,
                     sluice_status st, bool sent, const char *msg);

/* ASKING's reply, which no request waits for: anything but +OK (or the
 * node's error) puts the stream out of step, and ends the connection. */
static void on_asking(sl_conn *cn, sl_job *job, size_t k, redisReply *r,
                      sluice_status st, bool sent, const char *msg)
{
    char ep[300], got[400], why[SL_ERR_LEN];

    (void)job;
    (void)k;
    (void)st;
    (void)sent;
    (void)msg;
    if (r == NULL || r->type == REDIS_REPLY_ERROR ||
        (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0))
        return;
    sl_reply_describe(got, sizeof(got), r);
    sl_errf(why, sizeof(why),
            "cluster: %s sent %s where +OK was due (ASKING), which no Redis "
            "sends; the connection is closed",
            sl_conn_endpoint(cn, ep, sizeof(ep)), got);
    sl_conn_abort(cn, SLUICE_EPROTO, why);
}

/* Queues request k on its node, ASKING first after an ASK. */
static void send_request(cluster *c, sl_job *job, size_t k)
{
    route *rt = &((route *)job->data)[k];
    node *nd = c->nodes[rt->node];
    char err[SL_ERR_LEN] = "cluster: out of memory";
    sluice_status st = SLUICE_OK;

    if (rt->asking) {
        const char *argv[1] = {"ASKING"};

        /* Named with the job, so that it leaves with the job's command
         * when the job expires before the connect is done. */
        if ((st = sl_conn_append(&nd->conn, 1, argv, NULL, err, sizeof(err))) ==
            SLUICE_OK)
            st = sl_conn_expect(&nd->conn, on_asking, job, k);
        rt->asking = false;
    }
    /* One EVAL a connection loads the script (evalsha.c). */
    if (rt->noscript && !nd->eval_pending)
        rt->as_eval = true;
    if (st == SLUICE_OK)
        st = sl_evalsha_append(&nd->conn, c->url, &job->reqs[k], rt->as_eval,
                               job->tag + k, err, sizeof(err));
    if (st == SLUICE_OK)
        st = sl_conn_expect(&nd->conn, on_reply, job, k);
    rt->waiting = false;
    if (st != SLUICE_OK)
        sl_engine_answer(job, k, st, err);
    else if (rt->as_eval)
        nd->eval_pending = true; /* until its reply, or the close, comes */
}

/* Sends every request of the job that can go now; the others wait for
 * the map or their retry time. */
static void pump(cluster *c, sl_job *job)
{
    int64_t now = sl_mono_ms(), wake = 0;
    size_t k;

    for (k = 0; k < job->n && !job->finished; k++) {
        route *rt = &((route *)job->data)[k];

        if (sl_engine_answered(job, k) || !rt->waiting)
            continue;
        if (rt->not_before > now) {
            if (wake == 0 || rt->not_before < wake)
                wake = rt->not_before;
            continue;
        }
        if (rt->node < 0) {
            want_refresh(c); /* reroute_all sends it */
            continue;
        }
        send_request(c, job, k);
    }
    if (!job->finished)
        sl_engine_wake(job, wake);
}

static void on_reply(sl_conn *cn, sl_job *job, size_t k, redisReply *r,
                     sluice_status st, bool sent, const char *msg)
{
    node *nd = node_of(cn);
    cluster *c = job->eng->state;
    route *rt = &((route *)job->data)[k];
    char err[SL_ERR_LEN]; /* a message only when a step fails */
    sl_redirect kind;
    unsigned slot;
    int to;

    err[0] = '\0';
    /* An EVAL answered, or the connection that carried it closed. */
    if (r == NULL || rt->as_eval)
        nd->eval_pending = false;
    if (sl_engine_answered(job, k))
        return;
    if (r == NULL) {
        if (job->eng->closing || job->expired || st == SLUICE_ENOMEM) {
            sl_engine_answer(job, k, st, msg);
        } else if (!sent) {
            /* It never reached the node: ask the map again (the node may
             * be gone) and send it where the map points. */
            if (st == SLUICE_ECONNECT) {
                rt->node = -1;
                job->last = SLUICE_ECONNECT;
                sl_errf(c->last_msg, sizeof(c->last_msg), "%s", msg);
                want_refresh(c);
            }
            rt->waiting = true;
            pump(c, job);
        } else {
            /* Sent, and the connection is gone: the script may have run,
             * so it is not sent again (no double charge). */
            c->stale = true;
            if (st == SLUICE_ETIMEOUT) {
                sl_engine_answer(job, k, st, msg);
                return;
            }
            sl_errf(err, sizeof(err),
                    "cluster: lost the connection to %s:%d with a request "
                    "in flight; its outcome is unknown (%s)",
                    nd->ep.host, nd->ep.port, msg);
            sl_engine_answer(job, k, SLUICE_EIO, err);
        }
        return;
    }
    if (r->type == REDIS_REPLY_ERROR &&
        (kind = sl_slotmap_redirect(&c->map, r->str, nd->ep.host, &slot,
                                    &to)) != SL_REDIRECT_NONE) {
        char said[SL_ESCAPE_SHOWN * 4 + 32];

        sl_escape(said, sizeof(said), r->str, r->len);
        if (++rt->redirects > MAX_REDIRECTS) {
            sl_errf(err, sizeof(err),
                    "cluster: too many redirections for slot %u (last: %s)",
                    rt->slot, said);
            sl_engine_answer(job, k, SLUICE_EPROTO, err);
            return;
        }
        if (to < 0 && rt->unknown_target) {
            sl_errf(err, sizeof(err),
                    "cluster: %s:%d redirected slot %u to a node that no "
                    "slot map names, also after the map was read again "
                    "(%s); not followed",
                    nd->ep.host, nd->ep.port, rt->slot, said);
            sl_engine_answer(job, k, SLUICE_EPROTO, err);
            return;
        }
        if (to < 0) {
            /* Any address could be in a redirection: follow only a node
             * a slot map names. Read the map again from the nodes known;
             * the request then goes where it says (a node added by
             * resharding is named there). */
            rt->unknown_target = true;
            rt->node = -1;
            rt->waiting = true;
            want_refresh(c);
            pump(c, job);
            return;
        }
        /* MOVED updated the map (more may have moved: refresh); ASK holds
         * for this request only. */
        if (kind == SL_REDIRECT_MOVED)
            want_refresh(c);
        rt->node = to;
        rt->asking = kind == SL_REDIRECT_ASK;
        rt->waiting = true;
        pump(c, job);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR &&
        (strncmp(r->str, "TRYAGAIN", 8) == 0 ||
         strncmp(r->str, "CLUSTERDOWN", 11) == 0)) {
        /* A slot being moved, or a failover under way: nothing ran. */
        char said[SL_ESCAPE_SHOWN * 4 + 32];

        sl_escape(said, sizeof(said), r->str, r->len);
        sl_errf(c->last_msg, sizeof(c->last_msg), "cluster: %s:%d answered: %s",
                nd->ep.host, nd->ep.port, said);
        if (r->str[0] == 'C')
            want_refresh(c);
        rt->waiting = true;
        rt->not_before = sl_mono_ms() + RETRY_MS;
        pump(c, job);
        return;
    }
    if (sl_evalsha_noscript(r, rt->as_eval)) {
        /* Again after an EVAL went before it: as EVAL itself. */
        if (rt->noscript)
            rt->as_eval = true;
        rt->noscript = true;
        rt->waiting = true;
        pump(c, job);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        st = sl_conn_reply_status(cn, r, err, sizeof(err));
    } else {
        st = sl_evalsha_result(&job->reqs[k], r, job->tag + k, &job->out[k],
                               err, sizeof(err));
        if (st == SLUICE_EPROTO)
            sl_conn_doom(cn); /* out of step: start afresh */
    }
    sl_engine_answer(job, k, st, err);
}

static void cluster_start(void *p, sl_job *job)
{
    cluster *c = p;
    route *rt = sl_calloc(job->n, sizeof(*rt));
    size_t k;

    if (rt == NULL) {
        for (k = 0; k < job->n && !job->finished; k++)
            sl_engine_answer(job, k, SLUICE_ENOMEM, "cluster: out of memory");
        return;
    }
    job->data = rt;
    job->tag = c->tag;
    c->tag += job->n;
    for (k = 0; k < job->n; k++) {
        char err[SL_ERR_LEN];
        sluice_status st =
            request_slot(c, &job->reqs[k], &rt[k].slot, err, sizeof(err));

        if (st != SLUICE_OK) {
            sl_engine_answer(job, k, st, err);
            if (job->finished)
                return;
            continue;
        }
        rt[k].node = c->map.slots[rt[k].slot];
        rt[k].waiting = true;
    }
    if (c->stale)
        want_refresh(c);
    pump(c, job);
}

static void cluster_resume(void *p, sl_job *job)
{
    cluster *c = p;

    if (job != NULL) {
        pump(c, job);
        return;
    }
    if (c->refreshing && sl_mono_ms() >= c->round_deadline)
        give_up_asks(c, sl_mono_ms());
    else if (c->refreshing)
        wake_at(c, c->round_deadline);
    if (!c->refreshing && c->stale)
        want_refresh(c);
}

/* At the job's deadline, request k was with no node (the engine expired
 * the nodes holding the others: a node answers in order, so they close):
 * it waited for its slot's owner, and was never sent, nor charged. */
static void cluster_overdue(void *p, const sl_job *job, size_t k, char *msg,
                            size_t len)
{
    const cluster *c = p;
    const route *rt = &((const route *)job->data)[k];

    sl_errf(msg, len,
            "cluster: no owner of slot %u answered within %lld ms "
            "(failover or resharding under way?)%s%s",
            rt->slot, (long long)sl_engine_waited(job),
            c->last_msg[0] ? "; last: " : "", c->last_msg);
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
    .caps = SL_CAPS_CLUSTER,
    .open = cluster_open,
    .close = cluster_close,
    .round_trips = cluster_round_trips,
    .ops = {.start = cluster_start,
            .resume = cluster_resume,
            .overdue = cluster_overdue},
};
