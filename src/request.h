/* SPDX-License-Identifier: BSD-3-Clause */
/* request.h - a request as the pipeline (call.c) hands it to a backend,
 * through the engine: validated, its key within the cap, its rules
 * checked, its cost in range. */
#ifndef SL_REQUEST_H
#define SL_REQUEST_H

#include "internal.h"

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
    SL_OP_LEASE_RELEASE
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
    size_t len;
    char buf[SL_VALUE_MAX];
} sl_value;

/* A decision's operands. */
typedef struct sl_decision {
    const sluice_ruleset *rules;
    int64_t cost;     /* ignored by reset */
    int64_t *granted; /* SL_OP_AT_MOST: where the amount granted goes */
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
    union {
        sl_decision decide; /* ACQUIRE, PEEK, RESET, AT_MOST, REFUND,
                             * FORCE */
        sl_stored stored;   /* RULES_GET, RULES_PUT, RULES_DEL */
        sl_lease_op lease;  /* LEASE_ACQUIRE, LEASE_RELEASE */
    };
} sl_request;

/* Whether op decides on a key's rules (its request's decide member). */
static inline bool sl_op_decides(sl_op op)
{
    return op <= SL_OP_FORCE;
}

#endif /* SL_REQUEST_H */
