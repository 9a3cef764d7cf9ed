/* SPDX-License-Identifier: BSD-3-Clause */
/* request.h - a request as the pipeline (call.c) hands it to a backend,
 * through the engine: validated, its key within the cap, its rules
 * checked, its cost in range. */
#ifndef SL_REQUEST_H
#define SL_REQUEST_H

#include "internal.h"

#include <string.h>

typedef enum sl_op {
    /* Decisions on a key's rules (sl_decision): */
    SL_OP_ACQUIRE = 1,
    SL_OP_PEEK,
    SL_OP_RESET,
    SL_OP_AT_MOST, /* acquire at most cost: *granted says how much */
    SL_OP_REFUND,  /* give back up to cost; answers the state it leaves */
    SL_OP_FORCE,   /* charge cost unjudged, past the limit (a settle's
                    * excess); answers the state it leaves, as a refund */
    /* A named limiter's stored rules, under the key
     * "<prefix>{key}:rules" (sl_key_rules; sl_stored): */
    SL_OP_RULES_GET, /* read the value; a keep-alive in it starts again */
    SL_OP_RULES_PUT, /* store value (if_absent: only then), then read */
    SL_OP_RULES_DEL, /* delete it; found says whether there was one */
    /* Leases on "<prefix>{key}:lease" (sl_key_lease; sl_lease_op): */
    SL_OP_LEASE_ACQUIRE,
    SL_OP_LEASE_RELEASE,
    /* A named limiter's overrides, the hash "<prefix>{key}:over"
     * (sl_key_over; sl_stored's client, over and page): */
    SL_OP_OVER_SET, /* HSET client value, if the rules exist (found) */
    SL_OP_OVER_DEL, /* HDEL client; found says whether there was one */
    SL_OP_OVER_LIST /* one HSCAN page from page->cursor */
} sl_op;

/* The longest value a rules op stores or reads: a limiter's header and 8
 * rules of at most 71 bytes each ("gcra:1000000000/10000000000ms,burst=
 * 1000000000,block=10000000s,extend=1") take 604. */
#define SL_VALUE_MAX 1024

/* What a rules op read: found, and the value (SL_OP_RULES_GET and PUT).
 * kept: the backend started the keep-alive in the value again itself (the
 * script, mem://); the plain backends, which cannot read it first, leave
 * it false and start the keep-alive they were sent. */
typedef struct sl_value {
    bool found;
    bool kept;
    int64_t overs; /* a rules read: the overrides stored for the name */
    size_t len;
    char buf[SL_VALUE_MAX];
} sl_value;

/* A page of a limiter's overrides (SL_OP_OVER_LIST): the cursor to
 * start from and the one to go on with ("0": done), and the entries read,
 * as [u32 client length][client][u32 value length][value] in buf, made
 * by the backend with sl_realloc and freed by the caller. */
typedef struct sl_over_page {
    char cursor[24];
    size_t n;
    char *buf;
    size_t len, cap;
} sl_over_page;

static inline void sl_over_put32(char *p, size_t v)
{
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
    p[2] = (char)((v >> 16) & 0xff);
    p[3] = (char)((v >> 24) & 0xff);
}

/* Appends one entry to page; false on ENOMEM. */
static inline bool sl_over_page_add(sl_over_page *page, const char *client,
                                    size_t client_len, const char *value,
                                    size_t value_len)
{
    size_t need = page->len + 8 + client_len + value_len;

    if (need > page->cap) {
        size_t cap = need * 2 > 4096 ? need * 2 : 4096;
        char *b = sl_realloc(page->buf, cap);

        if (b == NULL)
            return false;
        page->buf = b;
        page->cap = cap;
    }
    sl_over_put32(page->buf + page->len, client_len);
    memcpy(page->buf + page->len + 4, client, client_len);
    page->len += 4 + client_len;
    sl_over_put32(page->buf + page->len, value_len);
    memcpy(page->buf + page->len + 4, value, value_len);
    page->len += 4 + value_len;
    page->n++;
    return true;
}

/* A request's policy (sluice_policy resolved): the handle's, a named
 * limiter's, or a call's, every field given. What the pipeline's stages
 * read where they once read the handle's options: the fail policy
 * (policy.c), the deny cache, reservations and shadow mode. */
typedef struct sl_policy {
    sluice_fail_policy fail;
    uint32_t fallback_instances; /* 1..10000 */
    bool deny_cache;
    bool shadow;
    int64_t reserve_ms;     /* 0: off */
    uint32_t reserve_share; /* 1..50 */
    unsigned set;           /* the groups a limiter's or call's policy gave */
    sluice_quota_unit unit;
    char http_name[64]; /* "": the HTTP helpers' default */
    char unit_name[65];
} sl_policy;

/* A decision's operands. */
typedef struct sl_decision {
    const sluice_ruleset *rules;
    int64_t cost;     /* ignored by reset */
    int64_t *granted; /* SL_OP_AT_MOST: where the amount granted goes */
    /* Where the rules that denied go, bit i for rule i (sluice_violated),
     * or NULL: written by whatever answers the request with a decision of
     * its rules (a backend, the fallback store, the deny cache), 0 by
     * what answers it without (a fail policy). */
    uint8_t *violated;
} sl_decision;

/* A stored-rules op's: the value to store (PUT), whether only if absent
 * (PUT), its keep-alive in ms (0: none; GET, for backends that cannot
 * read it first: > 0 starts that one, -1 takes the key's TTL away, 0
 * leaves it), and where what was read goes. */
typedef struct sl_stored {
    const char *value;
    size_t value_len;
    bool if_absent;
    int64_t ttl_ms;
    sl_value *read;
    /* Overrides. RULES_GET: over non-NULL also reads the client's
     * override (HGET) into *over, in the same round trip. OVER_SET: the
     * override (value) of client; ttl_ms the keep-alive the hash is given
     * as the rules' (0: none); read->found: the rules exist (else nothing
     * is stored). OVER_DEL: read->found: it was there. RULES_DEL deletes
     * the hash with the rules, and every keep-alive started on the rules
     * is started on the hash too. */
    const char *client;
    size_t client_len;
    sl_value *over;
    sl_over_page *page; /* OVER_LIST */
} sl_stored;

/* A lease op's: the most holders (acquire), the lease time, and the
 * lease's id (a member of the key's set). */
typedef struct sl_lease_op {
    int64_t max;
    int64_t lease_ms;
    const char *id;
    size_t id_len;
} sl_lease_op;

/* A validated request: key within the cap, rules checked, cost in range.
 * What it carries besides its key and time depends on op: one member of
 * the union, named for its kind (as SQLite's sqlite3_io_methods has one
 * typed method per operation), never a field that changes meaning. */
typedef struct sl_request {
    sl_op op;
    const void *key;
    size_t key_len;
    const char *prefix; /* the key prefix; NULL: the handle's */
    int64_t now_ms;     /* the handle's clock; -1: the server's clock */
    /* Its policy (a decision or a lease acquire): set by the pipeline's
     * prepare to the handle's, by its name stage to a limiter's, by a
     * call to its own; NULL in what only goes to the backend. */
    const sl_policy *policy;
    union {
        sl_decision decide; /* ACQUIRE, PEEK, RESET, AT_MOST, REFUND,
                             * FORCE */
        sl_stored stored;   /* RULES_GET, RULES_PUT, RULES_DEL, OVER_* */
        sl_lease_op lease;  /* LEASE_ACQUIRE, LEASE_RELEASE */
    };
} sl_request;

/* Whether op decides on a key's rules (its request's decide member). */
static inline bool sl_op_decides(sl_op op)
{
    return op <= SL_OP_FORCE;
}

/* Records the rules that denied rq (bit i: rule i) where it asks. */
static inline void sl_request_violated(const sl_request *rq, unsigned mask)
{
    if (sl_op_decides(rq->op) && rq->decide.violated != NULL)
        *rq->decide.violated = (uint8_t)mask;
}

#endif /* SL_REQUEST_H */
