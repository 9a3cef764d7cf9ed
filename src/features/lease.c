/* SPDX-License-Identifier: BSD-3-Clause */
/* lease.c - leases (sluice_lease_acquire/release): at most N holders of a
 * key at once, each under an id unique among processes, held until
 * released or until its lease time ends; run through the request
 * pipeline (call.h) as any decision is, fail policy included. */
#include "call.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A lease id unique among processes and handles: a random start (pid,
 * time, address), the pid and a counter, mixed. */
static void lease_id(char *dst)
{
    static _Atomic uint64_t next;
    static _Atomic uint64_t seed;
    uint64_t s = atomic_load(&seed), x;

    if (s == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)&next;
        s |= 1;
        atomic_compare_exchange_strong(&seed, &(uint64_t){0}, s);
        s = atomic_load(&seed);
    }
    /* The pid again: a child made by fork() inherits seed and counter. */
    x = (s ^ ((uint64_t)getpid() << 40)) +
        0x9e3779b97f4a7c15ULL * (atomic_fetch_add(&next, 1) + 1);
    x ^= x >> 31; /* splitmix64's finish: ids look unrelated */
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    snprintf(dst, 24, "%016llx", (unsigned long long)x);
}

/* Checks a lease op and prepares r: the most holders, the lease time and
 * the lease's id; an acquire passes its lease as named too, which names it
 * here. A bad request is counted. */
static sluice_status lease_check(sluice *sl, sl_op op, const void *key,
                                 size_t key_len, int64_t max, int64_t lease_ms,
                                 const sluice_lease *lease, sluice_lease *named,
                                 sl_request *r, char *err)
{
    sluice_status st;

    if (lease == NULL) {
        sl_errf(err, SL_ERR_LEN, "lease is NULL");
        return SLUICE_EINVAL;
    }
    if (op == SL_OP_LEASE_RELEASE &&
        strnlen(lease->id, sizeof(lease->id)) != 16) {
        sl_errf(err, SL_ERR_LEN,
                "lease: not one that sluice_lease_acquire made");
        return SLUICE_EINVAL;
    }
    if (max < 1 || max > SL_MAX_LIMIT) {
        sl_errf(err, SL_ERR_LEN, "max_holders %lld: expected 1..1000000000",
                (long long)max);
        return SLUICE_EINVAL;
    }
    if (lease_ms < 1 || lease_ms > SL_MAX_PERIOD_MS) {
        sl_errf(err, SL_ERR_LEN, "lease_ms %lld: expected 1..10000000000",
                (long long)lease_ms);
        return SLUICE_EINVAL;
    }
    st = sl_call_prepare(sl, op, key, key_len, NULL, 0, r, err);
    if (st != SLUICE_OK) {
        sl_call_count(sl, op, st);
        return st;
    }
    if (named != NULL)
        lease_id(named->id);
    r->lease = (sl_lease_op){max, lease_ms, lease->id, strlen(lease->id)};
    return SLUICE_OK;
}

/* A lease op, blocking (to NULL: the answer in *out) or on the loop (to:
 * the callback). */
static sluice_status lease_call(sluice *sl, sl_op op, const void *key,
                                size_t key_len, int64_t max, int64_t lease_ms,
                                const sluice_lease *lease, sluice_lease *named,
                                sluice_result *out, const sl_call_to *to)
{
    sl_request r;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    st = to != NULL ? sl_call_ready(sl, to->done != NULL, err)
                    : sl_call_blocking(sl, err);
    if (st != SLUICE_OK ||
        (st = lease_check(sl, op, key, key_len, max, lease_ms, lease, named, &r,
                          err)) != SLUICE_OK)
        return st;
    return to != NULL ? sl_call_start(sl, &r, to, err)
                      : sl_call_run(sl, &r, out, err);
}

sluice_status sluice_lease_acquire(sluice *sl, const void *key, size_t key_len,
                                   int64_t max_holders, int64_t lease_ms,
                                   sluice_lease *lease, sluice_result *out)
{
    if (sl != NULL && out == NULL) {
        sl_errf(sl_share_err(sl), SL_ERR_LEN, "out is NULL");
        return SLUICE_EINVAL;
    }
    return lease_call(sl, SL_OP_LEASE_ACQUIRE, key, key_len, max_holders,
                      lease_ms, lease, lease, out, NULL);
}

sluice_status sluice_lease_release(sluice *sl, const void *key, size_t key_len,
                                   const sluice_lease *lease)
{
    sluice_result out;

    return lease_call(sl, SL_OP_LEASE_RELEASE, key, key_len, 1, 1, lease, NULL,
                      &out, NULL);
}

sluice_status sluice_lease_acquire_async(sluice *sl, const void *key,
                                         size_t key_len, int64_t max_holders,
                                         int64_t lease_ms, sluice_lease *lease,
                                         sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return lease_call(sl, SL_OP_LEASE_ACQUIRE, key, key_len, max_holders,
                      lease_ms, lease, lease, NULL, &to);
}

sluice_status sluice_lease_release_async(sluice *sl, const void *key,
                                         size_t key_len,
                                         const sluice_lease *lease,
                                         sluice_done_fn done, void *arg)
{
    sl_call_to to = {done, NULL, arg};

    return lease_call(sl, SL_OP_LEASE_RELEASE, key, key_len, 1, 1, lease, NULL,
                      NULL, &to);
}
