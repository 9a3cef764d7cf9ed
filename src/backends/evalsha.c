/* SPDX-License-Identifier: BSD-3-Clause */
/* evalsha.c - the Lua backend: one EVALSHA per decision (EVAL on
 * NOSCRIPT), pipelined for batches; works on plain Redis and through
 * proxies that route by the first key. */
#include "../evalsha.h"

#include "../algo.h"
#include "../backend.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <string.h>

/* Generated at build time from the lua directory (cmake/embed.cmake). */
extern const char sl_lua_script[];
extern const size_t sl_lua_script_len;
extern const char sl_lua_sha1[];

#define ARGS_PER_RULE 5
#define FIXED_ARGS    4 /* now, acquire, cost, ttl floor */

typedef struct state {
    sl_conn conn;
    const sl_url *url;
    uint64_t tag; /* of the next request; the script echoes it */
} state;

static sluice_status evalsha_open(const sl_url *url, void **out, char *err,
                                  size_t err_len)
{
    state *s = sl_calloc(1, sizeof(*s));
    sluice_status st;

    if (s == NULL) {
        sl_errf(err, err_len, "evalsha: out of memory");
        return SLUICE_ENOMEM;
    }
    s->url = url;
    sl_conn_init(&s->conn, url, "evalsha");
    st = sl_conn_ensure(&s->conn, err, err_len);
    /* With a fail policy the handle opens anyway and reconnects later. */
    if (st != SLUICE_OK && url->opts.fail == SLUICE_FAIL_ERROR) {
        sl_conn_close(&s->conn);
        sl_free(s);
        return st;
    }
    *out = s;
    return SLUICE_OK;
}

static void evalsha_close(void *p)
{
    state *s = p;

    if (s == NULL)
        return;
    sl_conn_close(&s->conn);
    sl_free(s);
}

/* Appends one request: EVALSHA (or EVAL) with every rule's key. A reset
 * runs the script too: a window's keys are found from the time, which
 * only the script knows on the server's clock. */
sluice_status sl_evalsha_append(sl_conn *cn, const sl_url *url,
                                const sl_request *rq, bool as_eval,
                                uint64_t tag, char *err, size_t err_len)
{
    const sluice_ruleset *rs = rq->rules;
    const char *argv[4 + SLUICE_MAX_RULES * (1 + ARGS_PER_RULE) + FIXED_ARGS];
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    char keys[SLUICE_MAX_RULES][SLUICE_MAX_KEY_LEN + 128];
    char nums[FIXED_ARGS + SLUICE_MAX_RULES * ARGS_PER_RULE + 1][24];
    char numkeys[24];
    size_t i, a = 0, k = 0;

    argv[a] = as_eval ? "EVAL" : "EVALSHA";
    lens[a++] = strlen(argv[0]);
    argv[a] = as_eval ? sl_lua_script : sl_lua_sha1;
    lens[a++] = as_eval ? sl_lua_script_len : 40;
    lens[a] = sl_i64toa((int64_t)rs->count, numkeys);
    argv[a++] = numkeys;
    for (i = 0; i < rs->count; i++) {
        lens[a] = sl_key_build(keys[i], sizeof(keys[i]), url->prefix, rq->key,
                               rq->key_len, &rs->rules[i]);
        argv[a++] = keys[i];
    }
    {
        int64_t v[FIXED_ARGS + SLUICE_MAX_RULES * ARGS_PER_RULE + 1];

        v[k++] = rq->now_ms;
        v[k++] = rq->op == SL_OP_ACQUIRE ? 1 : rq->op == SL_OP_PEEK ? 0 : 2;
        v[k++] = rq->cost;
        v[k++] = url->opts.ttl_floor_ms;
        for (i = 0; i < rs->count; i++) {
            const sluice_rule *r = &rs->rules[i];

            v[k++] = r->algorithm;
            v[k++] = r->limit;
            v[k++] = r->period_ms;
            v[k++] = sl_rule_capacity(r);
            v[k++] = r->tz_offset_ms;
        }
        v[k++] = (int64_t)(tag & INT64_MAX);
        for (i = 0; i < k; i++) {
            lens[a] = sl_i64toa(v[i], nums[i]);
            argv[a++] = nums[i];
        }
    }
    return sl_conn_append(cn, (int)a, argv, lens, err, err_len);
}

/* Turns a script reply into the composite's result. */
sluice_status sl_evalsha_result(const sl_request *rq, const redisReply *rep,
                                uint64_t tag, sluice_result *out, char *err,
                                size_t err_len)
{
    const sluice_ruleset *rs = rq->rules;
    sl_verdict v[SLUICE_MAX_RULES];
    const redisReply *echo;
    char want[24];
    size_t i;

    size_t nvals = rq->op == SL_OP_RESET ? 0 : 6 * rs->count;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != nvals + 1) {
        sl_errf(err, err_len,
                "evalsha: unexpected script reply (type %d, "
                "%zu elements); is another program using the key prefix?",
                rep->type, rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0);
        return SLUICE_EPROTO;
    }
    /* The script echoes the request's tag: a reply meant for another
     * request (a connection out of step) is never taken for this one. */
    echo = rep->element[nvals];
    want[sl_i64toa((int64_t)(tag & INT64_MAX), want)] = '\0';
    if (echo->type != REDIS_REPLY_STRING || strcmp(echo->str, want) != 0) {
        sl_errf(err, err_len,
                "evalsha: a reply out of step (tag %s, expected %s); the "
                "connection is dropped",
                echo->type == REDIS_REPLY_STRING ? echo->str : "?", want);
        return SLUICE_EPROTO;
    }
    if (rq->op == SL_OP_RESET)
        return SLUICE_OK;
    /* Flags are 0 or 1, waits at least -1, the rest at least 0; nothing
     * reaches 2^53 (so retry + gap cannot overflow). */
    for (i = 0; i < nvals; i++) {
        const redisReply *e = rep->element[i];
        long long lo = i % 6 < 2 ? 0 : i % 6 == 3 ? -1 : 0;
        long long hi = i % 6 < 2 ? 1 : SL_EXACT_BOUND;

        if (e->type != REDIS_REPLY_INTEGER || e->integer < lo ||
            e->integer > hi) {
            sl_errf(err, err_len,
                    "evalsha: script reply element %zu is not an integer in "
                    "%lld..%lld",
                    i, lo, hi);
            return SLUICE_EPROTO;
        }
    }
    for (i = 0; i < rs->count; i++) {
        redisReply **e = rep->element + 6 * i;
        int64_t gap = e[5]->integer;

        v[i].admit = e[0]->integer == 1;
        v[i].never_fits = e[1]->integer == 1;
        v[i].remaining = e[2]->integer;
        v[i].retry_ms = e[3]->integer < 0 ? -1 : e[3]->integer + gap;
        v[i].reset_ms = e[4]->integer > 0 ? e[4]->integer + gap : 0;
    }
    sl_combine(rs, v, out);
    return SLUICE_OK;
}

/* Reads the n replies of a pipeline; marks NOSCRIPT ones in resend. */
static sluice_status read_replies(state *s, const sl_request *reqs, size_t n,
                                  uint64_t base, sluice_result *out,
                                  unsigned char *resend, bool eval_pass,
                                  size_t *nresend, char *err, size_t err_len)
{
    size_t i;
    sluice_status st;

    for (i = 0; i < n; i++) {
        redisReply *rep;

        if (eval_pass && !resend[i])
            continue;
        resend[i] = 0;
        if ((st = sl_conn_read(&s->conn, &rep, err, err_len)) != SLUICE_OK)
            return st;
        if (rep->type == REDIS_REPLY_ERROR && !eval_pass &&
            strncmp(rep->str, "NOSCRIPT", 8) == 0) {
            /* A restart, failover or SCRIPT FLUSH emptied the cache. */
            resend[i] = 1;
            (*nresend)++;
        } else if (rep->type == REDIS_REPLY_ERROR) {
            out[i].status = sl_conn_reply_status(&s->conn, rep, err, err_len);
        } else {
            out[i].status = sl_evalsha_result(&reqs[i], rep, base + i, &out[i],
                                              err, err_len);
        }
        freeReplyObject(rep);
    }
    return SLUICE_OK;
}

static sluice_status evalsha_decide(void *p, const sl_request *reqs, size_t n,
                                    sluice_result *out, char *err,
                                    size_t err_len)
{
    state *s = p;
    unsigned char small[64], *resend = n <= 64 ? small : sl_calloc(n, 1);
    size_t i, nresend = 0;
    uint64_t base = s->tag;
    sluice_status st;

    if (resend == NULL) {
        sl_errf(err, err_len, "evalsha: out of memory for %zu requests", n);
        return SLUICE_ENOMEM;
    }
    memset(resend, 0, n);
    s->tag += n;
    if ((st = sl_conn_ensure(&s->conn, err, err_len)) != SLUICE_OK)
        goto done;
    for (i = 0; i < n && st == SLUICE_OK; i++)
        st = sl_evalsha_append(&s->conn, s->url, &reqs[i], false, base + i, err,
                               err_len);
    if (st == SLUICE_OK)
        st = read_replies(s, reqs, n, base, out, resend, false, &nresend, err,
                          err_len);
    if (st == SLUICE_OK && nresend > 0) {
        for (i = 0; i < n && st == SLUICE_OK; i++)
            if (resend[i])
                st = sl_evalsha_append(&s->conn, s->url, &reqs[i], true,
                                       base + i, err, err_len);
        if (st == SLUICE_OK)
            st = read_replies(s, reqs, n, base, out, resend, true, &nresend,
                              err, err_len);
    }
    /* A proxy error can leave the connection half-used, and a reply out of
     * step means it is: start afresh. */
    for (i = 0; i < n && st == SLUICE_OK; i++)
        if (out[i].status == SLUICE_EIO || out[i].status == SLUICE_ETIMEOUT ||
            out[i].status == SLUICE_EPROTO)
            sl_conn_close(&s->conn);
done:
    if (resend != small)
        sl_free(resend);
    return st;
}

static uint64_t evalsha_round_trips(void *p)
{
    return ((state *)p)->conn.round_trips;
}

const sl_backend sl_backend_evalsha = {
    .name = "evalsha",
    .version = SL_BACKEND_VERSION,
    .open = evalsha_open,
    .close = evalsha_close,
    .decide = evalsha_decide,
    .round_trips = evalsha_round_trips,
};
