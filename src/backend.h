/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.h - the contract every backend implements: a struct of function
 * pointers, one file per backend in src/backends/. */
#ifndef SL_BACKEND_H
#define SL_BACKEND_H

#include "engine.h"
#include "internal.h"

#define SL_BACKEND_VERSION 3

typedef enum sl_op {
    SL_OP_ACQUIRE = 1,
    SL_OP_PEEK,
    SL_OP_RESET,
    SL_OP_AT_MOST, /* acquire at most cost: *granted says how much */
    SL_OP_REFUND,  /* give back up to cost; answers the state it leaves */
    /* A named limiter's stored rules, under the key
     * "<prefix>{key}:rules" (sl_key_rules): */
    SL_OP_RULES_GET, /* read the value; a keep-alive in it starts again */
    SL_OP_RULES_PUT, /* store value (cost 1: only if absent), then read */
    SL_OP_RULES_DEL, /* delete it; found says whether there was one */
    /* Leases on "<prefix>{key}:lease" (sl_key_lease): cost is the most
     * holders, ttl_ms the lease time, value the lease's id. */
    SL_OP_LEASE_ACQUIRE,
    SL_OP_LEASE_RELEASE
} sl_op;

/* The longest value a rules op stores or reads. */
#define SL_VALUE_MAX 512

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

/* A validated request: key within the cap, rules checked, cost in range. */
typedef struct sl_request {
    sl_op op;
    const void *key;
    size_t key_len;
    const sluice_ruleset *rules;
    int64_t cost;       /* ignored by reset */
    int64_t now_ms;     /* the handle's clock; -1: the server's clock */
    int64_t *granted;   /* SL_OP_AT_MOST: where the amount granted goes */
    const char *prefix; /* the key prefix; NULL: the handle's */
    /* Rules ops: the value to store (PUT), its keep-alive in ms (0: none;
     * GET, for backends that cannot read it first: > 0 starts that one,
     * -1 takes the key's TTL away, 0 leaves it), and where what was read
     * goes. */
    const char *value;
    size_t value_len;
    int64_t ttl_ms;
    sl_value *read;
} sl_request;

typedef struct sl_backend {
    const char *name; /* "memory", "evalsha", ...; used in messages */
    int version;      /* SL_BACKEND_VERSION it was built against */

    /* Connects (or attaches to the store); private state in *state. A
     * backend that works on the engine (start below) opens its
     * connections on eng. */
    sluice_status (*open)(const sl_url *url, sl_engine *eng, void **state,
                          char *err, size_t err_len);
    void (*close)(void *state); /* accepts NULL */

    /* Decides n requests, atomically per request for all clients of its
     * key, as one round trip where the backend can. Sets every out[i]
     * (status SLUICE_OK, or that request's own failure such as
     * SLUICE_EUNSUPPORTED). Returns non-OK only when the backend could not
     * answer at all (connect, timeout, lost connection); out is then
     * undefined. A reset fills nothing but out[i].status. */
    sluice_status (*decide)(void *state, const sl_request *reqs, size_t n,
                            sluice_result *out, char *err, size_t err_len);

    /* Version 2. Optional, NULL = none: network round trips so far. */
    uint64_t (*round_trips)(void *state);

    /* Version 3. Optional, NULL: blocking only (no sluice_attach). Starts
     * deciding the job's requests without waiting: queues commands with
     * their callbacks on the engine's connections, which answer each
     * request (sl_engine_answer) now or later. */
    void (*start)(void *state, sl_job *job);
    /* The job's wake_at has come (job NULL: the engine's own wake_at). */
    void (*resume)(void *state, sl_job *job);
    /* The job's deadline has passed: close what carries its requests and
     * answer them; the engine answers what is left with job->last. */
    void (*expire)(void *state, sl_job *job);
    /* Optional, NULL = none: request i of the job was answered, by the
     * backend or by the engine (its deadline, the handle's close); what
     * the backend keeps for it goes. Called before the job ends. */
    void (*answered)(void *state, sl_job *job, size_t i);
} sl_backend;

/* For tests: the backend state of a handle, and the number of entries a
 * memory store holds. */
void *sl_handle_state(const sluice *sl);
size_t sl_memory_count(void *state);
/* For the benchmark: network round trips the handle has made. */
uint64_t sl_handle_round_trips(const sluice *sl);
/* For tests: the backend calls the handle made (threads' requests that
 * went out together count once). */
uint64_t sl_handle_batches(sluice *sl);
/* For tests: the denials the handle's deny cache holds. */
size_t sl_handle_deny_count(sluice *sl);

extern const sl_backend sl_backend_memory;
extern const sl_backend sl_backend_evalsha;
extern const sl_backend sl_backend_multi;
extern const sl_backend sl_backend_twemproxy;
extern const sl_backend sl_backend_cluster;

#endif /* SL_BACKEND_H */
