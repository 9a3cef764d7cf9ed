/* SPDX-License-Identifier: BSD-3-Clause */
/* backend.h - the contract every backend implements: a struct of function
 * pointers, one file per backend in src/backends/. */
#ifndef SL_BACKEND_H
#define SL_BACKEND_H

#include "caps.h"
#include "engine.h"
#include "internal.h"
#include "request.h"

typedef struct sl_backend {
    const char *name; /* "memory", "evalsha", ...; used in messages */
    /* What it can do (caps.h, SL_CAPS_<NAME>): the engine answers a
     * request it cannot before its start sees the job, the handle's open
     * refuses clock=server it cannot read. */
    unsigned caps;

    /* Connects (or attaches to the store); private state in *state. Its
     * connections are opened on eng (NULL for a fallback store, which is
     * decided with sl_memory_decide). */
    sluice_status (*open)(const sl_url *url, sl_engine *eng, void **state,
                          char *err, size_t err_len);
    void (*close)(void *state); /* accepts NULL */

    /* Optional, NULL = none: network round trips so far. */
    uint64_t (*round_trips)(void *state);
    /* Optional, NULL = none: moves to another master so far (sentinels);
     * any thread. */
    uint64_t (*failovers)(void *state);

    /* How it decides: jobs on the engine (engine.h), whose calls wait or
     * not (the blocking call is a job and a wait, sl_engine_decide). Every
     * request of a job is answered, atomically per request for all clients
     * of its key, as one round trip where the backend can; a request's
     * own failure is its answer. A reset fills
     * nothing but out[i].status. */
    sl_engine_ops ops;
} sl_backend;

/* For tests: the backend state of a handle, and the number of entries a
 * memory store holds. */
void *sl_handle_state(const sluice *sl);
size_t sl_memory_count(void *state);
/* Decides n requests on a memory store at once (the fallback store has no
 * engine). Returns non-OK when it could not answer at all. */
sluice_status sl_memory_decide(void *state, const sl_request *reqs, size_t n,
                               sluice_result *out, char *err, size_t err_len);
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
