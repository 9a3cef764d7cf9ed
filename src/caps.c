/* SPDX-License-Identifier: BSD-3-Clause */
/* caps.c - the refusals' table, and what a request or a scheme needs of
 * it (caps.h). */
#include "caps.h"

#include "algo.h"
#include "request.h"
#include "store.h"

/* In the order they are checked: a request that asks two things a backend
 * lacks gets the first (a settle's excess before anything else, a block
 * before the family, as the plain backends sorted them). */
const sl_refusal sl_refusals[] = {
    {SL_ASK_REQUEST, SL_CAP_FORCE_BUCKET, SLUICE_EUNSUPPORTED, false,
     "a settle's excess on token, gcra",
     "a settle's excess on token and gcra needs an atomic "
     "read-modify-write that a proxy's plain commands cannot give; use "
     "redis:// through the proxy (the Lua backend, one EVAL per decision)"},
    /* A denial here may come from another request's charge that is taken
     * back a moment later: a block must not start from a denial that an
     * exact decision would not make. */
    {SL_ASK_REQUEST, SL_CAP_BLOCK, SLUICE_EUNSUPPORTED, false, "block=",
     "block= needs exact denials, and this backend charges before it "
     "judges (a request may be denied by another's charge in flight); use "
     "redis:// (the Lua backend, also through the proxy) for rules with a "
     "block"},
    {SL_ASK_REQUEST, SL_CAP_REFUND, SLUICE_EUNSUPPORTED, false, "refunds",
     "a refund needs an atomic read-modify-write that a proxy's plain "
     "commands cannot give; use redis:// through the proxy (the Lua "
     "backend, one EVAL per decision)"},
    /* Windows and logs are charged before they are judged: a refund could
     * give back a charge another client is about to take back, and leave
     * the key counting less than was admitted. */
    {SL_ASK_REQUEST, SL_CAP_REFUND_WINDOW, SLUICE_EUNSUPPORTED, false,
     "refunds of fixed, sliding, log",
     "a refund of fixed, sliding or log rules could give back a charge "
     "another client has in flight (this backend charges them before "
     "judging); use redis:// (the Lua backend) for refunds; token and gcra "
     "refund here"},
    {SL_ASK_REQUEST, SL_CAP_BUCKET, SLUICE_EUNSUPPORTED, false, "token, gcra",
     "token and gcra need an atomic read-modify-write that a proxy's plain "
     "commands cannot give; use redis:// through the proxy (the Lua "
     "backend, one EVAL per decision)"},
    {SL_ASK_TRANSPORT, SL_CAP_SERVER, SLUICE_EURL, true, "socket, TLS",
     "mem:// keeps its state in this process: no socket, no TLS"},
    {SL_ASK_TRANSPORT, SL_CAP_TLS, SLUICE_EURL, true, "TLS",
     "twemproxy has no TLS (nutcracker 0.5.0 speaks plain TCP): put a TLS "
     "terminator in front of it, or use rediss:// to Redis itself"},
    {SL_ASK_TRANSPORT, SL_CAP_SOCKET, SLUICE_EURL, true, "socket",
     "option socket: a cluster's nodes are reached at the TCP addresses "
     "they announce, not through a socket"},
    /* mem:// is a mistake in the URL (it has no server); the plain
     * backends have one whose TIME they cannot read inside a decision. */
    {SL_ASK_CLOCK, SL_CAP_SERVER, SLUICE_EURL, true, "clock=server",
     "mem:// has no server clock; drop clock=server or use a redis:// URL"},
    {SL_ASK_CLOCK, SL_CAP_SERVER_CLOCK, SLUICE_EUNSUPPORTED, false,
     "clock=server",
     "clock=server needs TIME inside a script; use redis:// (the Lua "
     "backend) for the server's clock"},
};
const size_t sl_refusals_count = sizeof(sl_refusals) / sizeof(sl_refusals[0]);

unsigned sl_caps_of_scheme(sl_scheme scheme)
{
    switch (scheme) {
    case SL_SCHEME_MEM:
        return SL_CAPS_MEMORY;
    case SL_SCHEME_REDIS:
        return SL_CAPS_EVALSHA;
    case SL_SCHEME_MULTI:
        return SL_CAPS_MULTI;
    case SL_SCHEME_TWEMPROXY:
        return SL_CAPS_TWEMPROXY;
    case SL_SCHEME_CLUSTER:
        return SL_CAPS_CLUSTER;
    }
    return 0;
}

static bool all_buckets(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (!sl_store_is_bucket(&rs->rules[i]))
            return false;
    return true;
}

unsigned sl_caps_needs(const sl_request *rq)
{
    const sluice_ruleset *rs = rq->decide.rules;
    unsigned need = 0;

    switch (rq->op) {
    case SL_OP_FORCE:
        /* A settle's excess is charged, never judged: no block. */
        return sl_ruleset_has(rs, SL_FAMILY_BUCKET) ? SL_CAP_FORCE_BUCKET : 0;
    case SL_OP_REFUND:
        return SL_CAP_REFUND | (all_buckets(rs) ? 0 : SL_CAP_REFUND_WINDOW);
    case SL_OP_ACQUIRE:
    case SL_OP_PEEK:
    case SL_OP_AT_MOST:
        if (sl_ruleset_blocks(rs))
            need |= SL_CAP_BLOCK;
        if (sl_ruleset_has(rs, SL_FAMILY_BUCKET))
            need |= SL_CAP_BUCKET;
        return need;
    default: /* a reset, a limiter's stored rules, a lease */
        return 0;
    }
}

const sl_refusal *sl_caps_refusal(sl_ask ask, unsigned need, unsigned caps)
{
    size_t i;

    if ((need & ~caps) == 0)
        return NULL;
    for (i = 0; i < sl_refusals_count; i++) {
        const sl_refusal *r = &sl_refusals[i];

        if (r->ask == ask && (need & r->bit) != 0 && (caps & r->bit) == 0)
            return r;
    }
    return NULL;
}
