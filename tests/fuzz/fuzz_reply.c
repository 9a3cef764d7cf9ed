/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_reply.c - arbitrary bytes read as RESP by hiredis's reader, and every
 * reply tree handed to every decoder of server replies: the script's result,
 * error replies (a proxy's included), CLUSTER SLOTS, MOVED and ASK, and the
 * plain backends' blocks. None may crash, and what they accept is in range.
 *
 * Input: byte 0 picks the ruleset, byte 1 is the script's tag, byte 2 holds
 * the op (bits 0-1: acquire, peek, reset, acquire at most; bit 5: a
 * refund; bit 6: a lease; bit 7: a named limiter's rules), the cost (bit 2: 1,
 * else 3) and the clock (bits 3-4); the rest is RESP. */
#include "sluice.h"

#include "backend.h"
#include "backends/evalsha.h"
#include "backends/plain_ops.h"
#include "backends/redis.h"
#include "backends/slotmap.h"
#include "net/conn.h"

#include <hiredis/hiredis.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPLIES 64
#define ASKED_HOST  "10.0.0.1"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const rule_texts[] = {
    "fixed:10/1s",
    "sliding:10/1s,tz=-05:30",
    "log:5/1s",
    "token:5/1s,burst=10",
    "gcra:5/1s",
    "fixed:1000/1d,tz=+08:00+fixed:100/1h",
    "fixed:3/1s+sliding:5/1m+log:2/1s+token:4/1s+gcra:4/1m",
    ("fixed:1/1ms+fixed:1/2ms+fixed:1/3ms+fixed:1/4ms+sliding:1/5ms+"
     "sliding:1/6ms+log:1/7ms+log:1/8ms"),
    "sliding:900719/10000000000ms",
    "log:1000000000/9007ms",
    "gcra:1000000000/9007ms,burst=1000000000",
    "token:1/10000000000ms",
};
#define NRULESETS (sizeof(rule_texts) / sizeof(rule_texts[0]))

static sluice_ruleset rulesets[NRULESETS];
static sl_url url;

static void broken(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_reply: %s: %s\n", what, detail);
    abort();
}

static void setup(void)
{
    char err[512];
    size_t i;

    for (i = 0; i < NRULESETS; i++)
        if (sluice_ruleset_parse(rule_texts[i], &rulesets[i], err,
                                 sizeof(err)) != SLUICE_OK)
            broken("a ruleset of the harness does not parse", err);
    if (sl_url_parse("redis://127.0.0.1:6379", NULL, &url, err, sizeof(err)) !=
        SLUICE_OK)
        broken("the harness's URL does not parse", err);
}

static void check_message(sluice_status st, const char *err, size_t err_len)
{
    if (st != SLUICE_OK &&
        (memchr(err, '\0', err_len) == NULL || err[0] == '\0'))
        broken("a failure without a terminated message", sluice_strerror(st));
}

/* An error reply, or any reply, as a connection would judge it; nested
 * replies too (EXEC's). */
static void decode_status(const sl_conn *cn, const redisReply *rep, int depth)
{
    char err[SL_ERR_LEN];
    sluice_status st;
    size_t i;

    memset(err, 0x55, sizeof(err));
    st = sl_conn_reply_status(cn, rep, err, sizeof(err));
    check_message(st, err, sizeof(err));
    if ((rep->type == REDIS_REPLY_ERROR) != (st != SLUICE_OK))
        broken("an error reply judged OK, or the reverse", rep->str);
    if (st != SLUICE_OK && st != SLUICE_ESERVER && st != SLUICE_EIO &&
        st != SLUICE_ETIMEOUT)
        broken("an error reply with an unexpected status", sluice_strerror(st));
    if (rep->type == REDIS_REPLY_ARRAY && depth < 8)
        for (i = 0; i < rep->elements; i++)
            decode_status(cn, rep->element[i], depth + 1);
}

/* 16384 slots a call: uninstrumented, or the fuzzer crawls. */
__attribute__((no_sanitize("coverage"))) static void
check_map(const sl_slotmap *m)
{
    size_t i;

    if (m->nnodes > SL_MAX_NODES)
        broken("a slot map with too many nodes", "");
    for (i = 0; i < SL_NSLOTS; i++)
        if (m->slots[i] < -1 || m->slots[i] >= (int)m->nnodes)
            broken("a slot owned by no known node", "");
    for (i = 0; i < m->nnodes; i++)
        if (memchr(m->nodes[i].host, '\0', sizeof(m->nodes[i].host)) == NULL)
            broken("a node host is not terminated", "");
}

/* CLUSTER SLOTS, and MOVED or ASK in an error (or any string). */
static void decode_cluster(const redisReply *rep)
{
    static sl_slotmap map;
    unsigned slot = 0;
    int node = -1;
    sl_redirect kind;

    sl_slotmap_init(&map);
    sl_slotmap_load(&map, rep, ASKED_HOST);
    check_map(&map);
    if (rep->type != REDIS_REPLY_ERROR && rep->type != REDIS_REPLY_STATUS &&
        rep->type != REDIS_REPLY_STRING)
        return;
    kind = sl_slotmap_redirect(&map, rep->str, ASKED_HOST, &slot, &node);
    if (kind == SL_REDIRECT_NONE)
        return;
    if (slot >= SL_NSLOTS || node < -1 || node >= (int)map.nnodes)
        broken("a redirection to no slot or no node", rep->str);
    /* A node no map named (-1) is the cluster's to look up again: the map
     * must be as it was. */
    if (node < 0) {
        check_map(&map);
        return;
    }
    if (map.nodes[node].port < 1 || map.nodes[node].port > 65535 ||
        map.nodes[node].host[0] == '\0')
        broken("a redirection to a bad endpoint", rep->str);
    if (kind == SL_REDIRECT_MOVED && map.slots[slot] != node)
        broken("MOVED did not update the map", rep->str);
    check_map(&map);
}

static void decode_script(const sl_request *rq, const redisReply *rep,
                          uint64_t tag)
{
    char err[SL_ERR_LEN];
    sluice_result out;
    sluice_status st;

    memset(err, 0x55, sizeof(err));
    st = sl_evalsha_result(rq, rep, tag, &out, err, sizeof(err));
    check_message(st, err, sizeof(err));
    if (st != SLUICE_OK && st != SLUICE_EPROTO)
        broken("a script reply refused with an unexpected status",
               sluice_strerror(st));
    if (st == SLUICE_OK && rq->op == SL_OP_AT_MOST &&
        (*rq->decide.granted < 0 || *rq->decide.granted > rq->decide.cost))
        broken("a grant out of range", "");
    /* A refund and a settle's forced charge answer the state they leave,
     * nothing judged. */
    if (st == SLUICE_OK && (rq->op == SL_OP_REFUND || rq->op == SL_OP_FORCE) &&
        (!out.allowed || out.retry_after_ms != -1 || out.remaining < 0))
        broken("a refund's or settle's answer that is not a state", "");
}

/* The plain backends: a block of n replies, optimistic or read. */
static void decode_plain(const sl_request *rq, redisReply **reps, size_t n)
{
    char err[SL_ERR_LEN];
    sluice_status st;
    int read_mode;

    for (read_mode = 0; read_mode < 2; read_mode++) {
        memset(err, 0x55, sizeof(err));
        st = sl_plain_decode(rq, read_mode == 1, reps, n, err, sizeof(err));
        check_message(st, err, sizeof(err));
    }
}

/* Refuses inputs that would make hiredis 0.14 allocate an array of a
 * huge count up front (an out-of-memory report, not a finding). */
static bool huge_array(const uint8_t *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        size_t j = i + 1;
        unsigned long long v = 0;

        if (p[i] != '*')
            continue;
        if (j < n && p[j] == '-')
            j++;
        while (j < n && p[j] >= '0' && p[j] <= '9' && v < 100000)
            v = v * 10 + (unsigned long long)(p[j++] - '0');
        if (v >= 100000)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static const int64_t clocks[] = {0, 1, 1700000000000LL, 9007199254740991LL};
    redisReply *reps[MAX_REPLIES];
    redisReader *reader;
    sl_request rq, dec;
    sl_conn cn;
    uint64_t tag;
    int64_t granted = -1;
    sl_value value;
    size_t n = 0, i;
    void *r;

    if (!ready) {
        setup();
        ready = true;
    }
    if (size < 3 || huge_array(data + 3, size - 3))
        return 0;
    memset(&dec, 0, sizeof(dec));
    tag = data[1];
    /* A decision (what the plain backends' blocks decode), and the request
     * the script's reply is read for: that decision, a lease, or a named
     * limiter's rules. */
    dec.op = (data[2] & 3) == 1   ? SL_OP_PEEK
             : (data[2] & 3) == 2 ? SL_OP_RESET
             : (data[2] & 3) == 3 ? SL_OP_AT_MOST
                                  : SL_OP_ACQUIRE;
    if (data[2] & 0x20)
        dec.op = (data[2] & 1) ? SL_OP_FORCE : SL_OP_REFUND;
    dec.decide = (sl_decision){.rules = &rulesets[data[0] % NRULESETS],
                               .cost = (data[2] & 4) ? 1 : 3,
                               .granted = &granted};
    rq = dec;
    if (data[2] & 0x40) {
        rq.op = SL_OP_LEASE_ACQUIRE;
        rq.lease =
            (sl_lease_op){(data[2] & 4) ? 1 : 3, 1000, "0123456789abcdef", 16};
    }
    if (data[2] & 0x80) {
        rq.op = SL_OP_RULES_GET;
        rq.stored = (sl_stored){.ttl_ms = 1000, .read = &value};
    }
    rq.now_ms = dec.now_ms = clocks[(data[2] >> 3) & 3];
    rq.key = dec.key = "k";
    rq.key_len = dec.key_len = 1;
    sl_conn_init(&cn, &url.ep, &url.cfg, "fuzz", NULL);

    if ((reader = redisReaderCreate()) == NULL)
        return 0;
    if (redisReaderFeed(reader, (const char *)data + 3, size - 3) != REDIS_OK) {
        redisReaderFree(reader);
        return 0;
    }
    while (n < MAX_REPLIES && redisReaderGetReply(reader, &r) == REDIS_OK &&
           r != NULL)
        reps[n++] = r;
    redisReaderFree(reader);

    for (i = 0; i < n; i++) {
        decode_status(&cn, reps[i], 0);
        decode_cluster(reps[i]);
        decode_script(&rq, reps[i], tag);
    }
    /* A decision's block read one reply at a time, or inside EXEC's
     * array. */
    if (n > 0)
        decode_plain(&dec, reps, n);
    if (n > 0 && reps[0]->type == REDIS_REPLY_ARRAY)
        decode_plain(&dec, reps[0]->element, reps[0]->elements);

    for (i = 0; i < n; i++)
        freeReplyObject(reps[i]);
    return 0;
}
