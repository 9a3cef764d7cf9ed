/* SPDX-License-Identifier: BSD-3-Clause */
/* evalsha.c - the Lua backend: one EVALSHA per decision (EVAL on
 * NOSCRIPT), pipelined for batches; works on plain Redis and through
 * proxies that route by the first key. */
#include "backends/evalsha.h"

#include "algo.h"
#include "backend.h"
#include "backends/script_ops.h"
#include "net/sentinel.h"
#include "store.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <string.h>

/* Generated at build time from the lua directory (cmake/embed.cmake). */
extern const char sl_lua_script[];
extern const size_t sl_lua_script_len;
extern const char sl_lua_sha1[];

typedef struct state {
    sl_conn conn;
    sl_engine *eng;
    const sl_url *url;
    uint64_t tag; /* of the next request; the script echoes it */
    /* A request went as EVAL on this connection and its reply has not
     * come: the server has the script again by the time it reads anything
     * queued after it, so the requests that got NOSCRIPT before go again
     * as EVALSHA, not each as EVAL with the whole script. */
    bool eval_pending;
} state;

static sluice_status evalsha_open(const sl_url *url, sl_engine *eng, void **out,
                                  char *err, size_t err_len)
{
    state *s = sl_calloc(1, sizeof(*s));
    sluice_status st;

    if (s == NULL) {
        sl_errf(err, err_len, "evalsha: out of memory");
        return SLUICE_ENOMEM;
    }
    s->url = url;
    s->eng = eng;
    sl_conn_init(&s->conn, &url->ep, &url->cfg, "evalsha", eng);
    if (url->sentinel && sl_conn_init_sentinels(&s->conn, url, eng)) {
        sl_conn_close(&s->conn);
        sl_free(s);
        sl_errf(err, err_len, "evalsha: out of memory");
        return SLUICE_ENOMEM;
    }
    /* One connect, within connect_timeout_ms, so that the first call
     * finds it ready; a server that is down or refuses the client never
     * fails the open: the calls answer by the fail policy, and connect
     * again (docs/PRODUCTION.md). */
    st = sl_conn_ensure(&s->conn, err, err_len);
    if (st == SLUICE_ENOMEM) {
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

/* Appends v as a little-endian int64 at *p; advances *p. */
static void put_i64(char **p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    int i;

    for (i = 0; i < 8; i++)
        *(*p)++ = (char)(u >> (8 * i));
}

/* The tag as sent: below 2^52, so the script's doubles hold it. */
static int64_t wire_tag(uint64_t tag)
{
    return (int64_t)(tag & ((UINT64_C(1) << 52) - 1));
}

/* The script's code of an operation (src/backends/script_ops.h, the list
 * the script's OP_<NAME> are made from). */
static sl_script_op script_op(sl_op op)
{
    switch (op) {
    case SL_OP_ACQUIRE:
        return SL_SCRIPT_ACQUIRE;
    case SL_OP_PEEK:
        return SL_SCRIPT_PEEK;
    case SL_OP_RESET:
        return SL_SCRIPT_RESET;
    case SL_OP_AT_MOST:
        return SL_SCRIPT_AT_MOST;
    case SL_OP_REFUND:
        return SL_SCRIPT_REFUND;
    case SL_OP_FORCE:
        return SL_SCRIPT_FORCE;
    case SL_OP_RULES_GET:
        return SL_SCRIPT_RULES_GET;
    case SL_OP_RULES_PUT:
        return SL_SCRIPT_RULES_PUT_NX; /* or RULES_PUT: see append_rules */
    case SL_OP_RULES_DEL:
        return SL_SCRIPT_RULES_DEL;
    case SL_OP_LEASE_ACQUIRE:
        return SL_SCRIPT_LEASE_ACQUIRE;
    case SL_OP_LEASE_RELEASE:
        return SL_SCRIPT_LEASE_RELEASE;
    case SL_OP_OVER_SET:
        return SL_SCRIPT_OVER_SET;
    case SL_OP_OVER_DEL:
        return SL_SCRIPT_OVER_DEL;
    case SL_OP_OVER_LIST:
        return SL_SCRIPT_OVER_LIST;
    }
    return SL_SCRIPT_PEEK;
}

static void put_i64(char **p, int64_t v);

static bool is_rules_op(sl_op op)
{
    return op == SL_OP_RULES_GET || op == SL_OP_RULES_PUT ||
           op == SL_OP_RULES_DEL;
}

static bool is_over_op(sl_op op)
{
    return op == SL_OP_OVER_SET || op == SL_OP_OVER_DEL ||
           op == SL_OP_OVER_LIST;
}

static bool is_lease_op(sl_op op)
{
    return op == SL_OP_LEASE_ACQUIRE || op == SL_OP_LEASE_RELEASE;
}

/* A rules op: the script with the rules key, the numbers padded to the
 * size of one rule, and the value to store. */
static sluice_status append_rules(sl_conn *cn, const char *prefix,
                                  int64_t floor_ms, const sl_request *rq,
                                  bool as_eval, uint64_t tag, char *err,
                                  size_t err_len)
{
    const char *argv[8];
    size_t lens[8];
    char key[SL_KEY_BUF], okey[SL_KEY_BUF], packed[80], *pk = packed;
    int n = 6;
    sl_script_op op = script_op(rq->op);
    bool lease = is_lease_op(rq->op);

    if (rq->op == SL_OP_RULES_PUT && !rq->stored.if_absent)
        op = SL_SCRIPT_RULES_PUT;
    memset(packed, 0, sizeof(packed));
    /* Leases: t, op, the most holders, the tag, the lease time, the TTL
     * floor. Rules: 0, op, the keep-alive to store, the tag. */
    put_i64(&pk, lease ? rq->now_ms : 0);
    put_i64(&pk, op);
    put_i64(&pk, lease                       ? rq->lease.max
                 : rq->op == SL_OP_RULES_PUT ? rq->stored.ttl_ms
                                             : 0);
    put_i64(&pk, (int64_t)(tag & ((UINT64_C(1) << 52) - 1)));
    if (lease) {
        put_i64(&pk, rq->lease.lease_ms);
        put_i64(&pk, floor_ms);
    }
    argv[0] = as_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = as_eval ? sl_lua_script : sl_lua_sha1;
    lens[1] = as_eval ? sl_lua_script_len : 40;
    argv[2] = "1";
    lens[2] = 1;
    lens[3] =
        lease ? sl_key_lease(key, sizeof(key), prefix, rq->key, rq->key_len)
              : sl_key_rules(key, sizeof(key), prefix, rq->key, rq->key_len);
    argv[3] = key;
    argv[4] = packed;
    lens[4] = sizeof(packed);
    argv[5] = lease                      ? rq->lease.id
              : rq->stored.value != NULL ? rq->stored.value
                                         : "";
    lens[5] = lease                      ? rq->lease.id_len
              : rq->stored.value != NULL ? rq->stored.value_len
                                         : 0;
    if (lease)
        return sl_conn_append(cn, 6, argv, lens, err, err_len);
    /* Rules and overrides: KEYS[2] is the overrides hash, which goes and
     * lives with the rules; ARGV[2] and [3] as lua/20-overrides.lua and
     * lua/22-stored-rules.lua say. */
    argv[2] = "2";
    memmove(&argv[5], &argv[4], 2 * sizeof(*argv));
    memmove(&lens[5], &lens[4], 2 * sizeof(*lens));
    argv[4] = okey;
    lens[4] = sl_key_over(okey, sizeof(okey), prefix, rq->key, rq->key_len);
    n = 7;
    if (rq->op == SL_OP_RULES_GET && rq->stored.over != NULL) {
        argv[n] = rq->stored.client;
        lens[n++] = rq->stored.client_len;
    } else if (rq->op == SL_OP_OVER_SET || rq->op == SL_OP_OVER_DEL) {
        argv[6] = rq->stored.client;
        lens[6] = rq->stored.client_len;
        if (rq->op == SL_OP_OVER_SET) {
            argv[n] = rq->stored.value;
            lens[n++] = rq->stored.value_len;
        }
    } else if (rq->op == SL_OP_OVER_LIST) {
        argv[6] = rq->stored.page->cursor;
        lens[6] = strlen(rq->stored.page->cursor);
    }
    return sl_conn_append(cn, n, argv, lens, err, err_len);
}

/* Appends one request: EVALSHA (or EVAL), its numbers packed in one
 * argument (lua/00-contract.lua has the contract). On the client's clock the
 * window keys, their ends and TTLs are worked out here, so that the script
 * does no more than it must. A reset on the client's clock is a DEL; on
 * the server's only the script knows the time, so it runs the script. */
/* Whether rq goes with its key's block (ARGV[3], the block key last):
 * a decision or a reset on the server's clock of a ruleset with a block
 * (a refund neither reads nor moves it; a reset on the client's clock
 * deletes it with the rules' keys). */
static bool carries_block(const sl_request *rq)
{
    return (rq->op == SL_OP_ACQUIRE || rq->op == SL_OP_PEEK ||
            rq->op == SL_OP_AT_MOST || rq->op == SL_OP_RESET) &&
           sl_ruleset_blocks(rq->decide.rules);
}

sluice_status sl_evalsha_append(sl_conn *cn, const sl_url *url,
                                const sl_request *rq, bool as_eval,
                                uint64_t tag, char *err, size_t err_len)
{
    const sluice_ruleset *rs = rq->decide.rules;
    const char *argv[3 + 2 * SLUICE_MAX_RULES + 1 + 3];
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    char keys[2 * SLUICE_MAX_RULES + 1][SL_KEY_BUF];
    char packed[8 * (4 + 6 * SLUICE_MAX_RULES)], *pk = packed;
    char blocks[8 * SLUICE_MAX_RULES], *pb = blocks;
    bool block = carries_block(rq);
    char cost[24], numkeys[24];
    size_t i, a = 3, nk = 0;
    bool local = rq->now_ms >= 0;
    int64_t floor = url->cfg.ttl_floor_ms;
    const char *prefix = rq->prefix != NULL ? rq->prefix : url->cfg.prefix;

    if (is_rules_op(rq->op) || is_lease_op(rq->op) || is_over_op(rq->op))
        return append_rules(cn, prefix, floor, rq, as_eval, tag, err, err_len);
    if (rq->op == SL_OP_RESET && local)
        return sl_conn_append_reset(cn, prefix, rq, err, err_len);
    argv[0] = as_eval ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = as_eval ? sl_lua_script : sl_lua_sha1;
    lens[1] = as_eval ? sl_lua_script_len : 40;
    put_i64(&pk, rq->now_ms);
    put_i64(&pk, script_op(rq->op));
    put_i64(&pk, rq->decide.cost);
    put_i64(&pk, wire_tag(tag));
    /* The keys, and each rule's numbers: a window on the client's clock
     * sends its own key (a sliding window also the one before), its end
     * and its TTL. */
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        size_t base =
            sl_key_build(keys[nk], SL_KEY_BUF, prefix, rq->key, rq->key_len, r);
        int64_t w, to_end;
        int d;

        put_i64(&pk, r->algorithm);
        put_i64(&pk, r->limit);
        put_i64(&pk, r->period_ms);
        switch (sl_store_of(r->algorithm).family) {
        case SL_FAMILY_WINDOW:
            put_i64(&pk, r->tz_offset_ms);
            if (!local) {
                put_i64(&pk, -1);
                put_i64(&pk, floor);
                lens[a] = base;
                argv[a++] = keys[nk++];
                break;
            }
            sl_window_locate(r, rq->now_ms, &w, &to_end);
            put_i64(&pk, to_end);
            put_i64(&pk, floor);
            lens[a] = sl_key_window(keys[nk], base, w);
            argv[a++] = keys[nk++];
            for (d = 1; d < sl_store_of(r->algorithm).windows; d++) {
                memcpy(keys[nk], keys[nk - 1], base);
                lens[a] = sl_key_window(keys[nk], base, w - d);
                argv[a++] = keys[nk++];
            }
            break;
        case SL_FAMILY_LOG:
            put_i64(&pk, floor);
            put_i64(&pk, 0);
            put_i64(&pk, 0);
            lens[a] = base;
            argv[a++] = keys[nk++];
            break;
        case SL_FAMILY_BUCKET:
            put_i64(&pk, sl_rule_capacity(r));
            put_i64(&pk, floor);
            put_i64(&pk, 0);
            lens[a] = base;
            argv[a++] = keys[nk++];
            break;
        }
        put_i64(&pb, (r->block_extend ? -1 : 1) * (int64_t)r->block_s * 1000);
    }
    if (block) {
        lens[a] =
            sl_key_block(keys[nk], SL_KEY_BUF, prefix, rq->key, rq->key_len);
        argv[a++] = keys[nk++];
    }
    lens[2] = sl_i64toa((int64_t)nk, numkeys);
    argv[2] = numkeys;
    argv[a] = packed;
    lens[a++] = (size_t)(pk - packed);
    lens[a] = sl_i64toa(rq->decide.cost, cost);
    argv[a++] = cost;
    if (block) {
        argv[a] = blocks;
        lens[a++] = (size_t)(pb - blocks);
    }
    return sl_conn_append(cn, (int)a, argv, lens, err, err_len);
}

/* The script's reply: little-endian int64s, read in order. */
typedef struct wire {
    const unsigned char *p;
    size_t n, at; /* values, and the next one to read */
} wire;

/* The next value, if it is in lo..hi. */
static bool wire_num(wire *w, int64_t lo, int64_t hi, int64_t *v)
{
    uint64_t u = 0;
    int i;

    if (w->at >= w->n)
        return false;
    for (i = 0; i < 8; i++)
        u |= (uint64_t)w->p[8 * w->at + (size_t)i] << (8 * i);
    w->at++;
    *v = (int64_t)u;
    return *v >= lo && *v <= hi;
}

/* One rule's part of the reply: the script's admission and the state it
 * read, as the view sl_decide reads; e holds up to two log entries. False
 * when the part is malformed or out of range. */
static bool rule_view(const sluice_rule *r, wire *w, bool *admit,
                      sl_state_view *s, sl_log_entry *e)
{
    int64_t a, b, c, d;
    /* Counts read back never exceed what keeps count * P far from
     * overflow; times and backlogs stay below 2^53. */
    int64_t count_max = INT64_MAX / 4 / r->period_ms;

    memset(s, 0, sizeof(*s));
    switch (sl_store_of(r->algorithm).family) {
    case SL_FAMILY_WINDOW:
        /* cur if admitted, else -1 - cur; prev when the rule reads the
         * window before. */
        if (!wire_num(w, -1 - count_max, count_max, &a))
            return false;
        *admit = a >= 0;
        s->cur = a >= 0 ? a : -1 - a;
        return sl_store_of(r->algorithm).windows == 1 ||
               wire_num(w, 0, count_max, &s->prev);
    case SL_FAMILY_LOG:
        /* m + 1 (m the newest stamp, -1 none) if admitted, else -2 - m;
         * sum, the live cost at u; xfit and cum: the stamp whose leaving
         * lets a denied request fit, and the live cost up to it. Two
         * entries give sl_log_decide the same sum, newest stamp and wait
         * as the whole log would. */
        if (!wire_num(w, -2 - SL_MAX_TIME_MS, SL_MAX_TIME_MS + 1, &a) ||
            !wire_num(w, 0, SL_EXACT_BOUND, &b) ||
            !wire_num(w, -1, SL_MAX_TIME_MS, &c) || !wire_num(w, 0, b, &d))
            return false;
        *admit = a >= 0;
        a = a >= 0 ? a - 1 : -2 - a;
        s->entries = e;
        if (b == 0)
            return true; /* nothing live: the newest stamp is dead too */
        if (c >= 0 && d > 0) {
            e[s->n++] = (sl_log_entry){c, d};
            if (b > d)
                e[s->n++] = (sl_log_entry){a, b - d};
            return c <= a;
        }
        e[s->n++] = (sl_log_entry){a, b};
        return a >= 0;
    case SL_FAMILY_BUCKET:
        /* admitted (1/0), then x and D as stored, or -1, -1 for none. */
        if (!wire_num(w, 0, 1, &a) || !wire_num(w, -1, SL_MAX_TIME_MS, &b) ||
            !wire_num(w, -1, SL_EXACT_BOUND - 1, &c))
            return false;
        *admit = a == 1;
        s->has = b >= 0;
        s->x = b;
        s->d = c;
        return (b < 0) == (c < 0);
    }
    return false;
}

/* A rules op's reply: the value read and, for a read that asked, the
 * override read (olen bytes), then found, olen (-1: none; only when
 * asked), the count of the overrides hash (not for a delete) and the
 * tag. */
static sluice_status rules_result(const sl_request *rq, const redisReply *rep,
                                  wire *w, sluice_result *out, char *err,
                                  size_t err_len)
{
    bool asked = rq->op == SL_OP_RULES_GET && rq->stored.over != NULL;
    size_t nums = rq->op == SL_OP_RULES_DEL ? 2 : asked ? 4 : 3, vlen, ol;
    int64_t found, olen = -1, overs = 0;

    if (rep->len < 8 * nums)
        goto bad;
    vlen = rep->len - 8 * nums;
    w->at = w->n - nums;
    if (!wire_num(w, 0, INT64_MAX, &found) ||
        (asked && !wire_num(w, -1, SL_VALUE_MAX, &olen)) ||
        (rq->op != SL_OP_RULES_DEL && !wire_num(w, 0, INT64_MAX, &overs)))
        goto bad;
    ol = olen < 0 ? 0 : (size_t)olen;
    if (ol > vlen || vlen - ol > SL_VALUE_MAX ||
        (found == 0 && (vlen > 0 || olen >= 0 || overs > 0)))
        goto bad;
    vlen -= ol;
    if (asked) {
        rq->stored.over->found = olen >= 0;
        rq->stored.over->len = ol;
        memcpy(rq->stored.over->buf, rep->str + vlen, ol);
    }
    rq->stored.read->found = found > 0;
    rq->stored.read->kept = found > 0;
    rq->stored.read->overs = overs;
    rq->stored.read->len = vlen;
    memcpy(rq->stored.read->buf, rep->str, vlen);
    out->status = SLUICE_OK;
    return SLUICE_OK;
bad:
    sl_errf(err, err_len,
            "evalsha: unexpected reply for a limiter's rules (%zu bytes); is "
            "another program using the key prefix?",
            rep->len);
    return SLUICE_EPROTO;
}

/* An override op's reply: set: whether the rules exist, then the tag;
 * delete: HDEL's count, then the tag; a page of the list: records of an
 * int64 length and its bytes (the next cursor, then client and value by
 * turn), then their count and the tag. */
static sluice_status over_result(const sl_request *rq, const redisReply *rep,
                                 wire *w, sluice_result *out, char *err,
                                 size_t err_len)
{
    const sl_stored *so = &rq->stored;
    int64_t n, len[2];
    size_t o = 0, i, k;
    const char *at[2];

    out->status = SLUICE_OK;
    if (rq->op != SL_OP_OVER_LIST) {
        w->at = 0;
        if (w->n != 2 || !wire_num(w, 0, 1, &n))
            goto bad;
        so->read->found = n == 1;
        return SLUICE_OK;
    }
    w->at = w->n - 2;
    if (!wire_num(w, 0, INT64_MAX, &n))
        goto bad;
    /* The records end where the count starts: 16 bytes before the end. */
    for (i = 0; i <= 2 * (size_t)n; i++) {
        wire r = {(const unsigned char *)rep->str + o, 1, 0};
        int64_t l;

        if (rep->len - 16 - o < 8 || !wire_num(&r, 0, INT64_MAX, &l))
            goto bad;
        o += 8;
        if ((uint64_t)l > rep->len - 16 - o)
            goto bad;
        if (i == 0) {
            if (l == 0 || (size_t)l >= sizeof(so->page->cursor))
                goto bad;
            memcpy(so->page->cursor, rep->str + o, (size_t)l);
            so->page->cursor[l] = '\0';
        } else {
            k = (i - 1) % 2;
            at[k] = rep->str + o;
            len[k] = l;
            if ((k == 0 && (l == 0 || l > SLUICE_MAX_KEY_LEN)) ||
                (k == 1 && l > SL_VALUE_MAX))
                goto bad;
            if (k == 1 && !sl_over_page_add(so->page, at[0], (size_t)len[0],
                                            at[1], (size_t)len[1])) {
                sl_errf(err, err_len, "evalsha: out of memory listing");
                return SLUICE_ENOMEM;
            }
        }
        o += (size_t)l;
    }
    if (o != rep->len - 16)
        goto bad;
    return SLUICE_OK;
bad:
    sl_errf(err, err_len,
            "evalsha: unexpected reply for a limiter's overrides (%zu bytes); "
            "is another program using the key prefix?",
            rep->len);
    return SLUICE_EPROTO;
}

/* Turns a script reply into the composite's result: the script returns the
 * state it read and its admissions; the outputs are computed here, by the
 * arithmetic every backend shares, and must reach the same admissions. */
sluice_status sl_evalsha_result(const sl_request *rq, const redisReply *rep,
                                uint64_t tag, sluice_result *out, char *err,
                                size_t err_len)
{
    const sluice_ruleset *rs;
    sl_state_view views[SLUICE_MAX_RULES];
    sl_log_entry entries[SLUICE_MAX_RULES][2];
    bool admits[SLUICE_MAX_RULES];
    sl_verdict v[SLUICE_MAX_RULES];
    sl_charge ch[SLUICE_MAX_RULES];
    int64_t t = rq->now_ms, echo = -1, cost, g = 0;
    int64_t end = -1, end_after = -1, mine_after;
    bool block = carries_block(rq);
    wire w;
    size_t i;
    char got[400];

    if (rep->type == REDIS_REPLY_STRING)
        snprintf(got, sizeof(got), "a bulk string of %zu bytes", rep->len);
    else
        sl_reply_describe(got, sizeof(got), rep);
    if (rq->op == SL_OP_RESET && rq->now_ms >= 0) {
        if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0)
            return SLUICE_OK; /* DEL's count */
        sl_errf(err, err_len,
                "evalsha: DEL answered %s where an integer >= 0 was due", got);
        return SLUICE_EPROTO;
    }
    if (rep->type != REDIS_REPLY_STRING || rep->len < 16 ||
        (rep->len % 8 != 0 && !is_rules_op(rq->op) &&
         rq->op != SL_OP_OVER_LIST)) {
        sl_errf(err, err_len,
                "evalsha: unexpected script reply (%s); is another program "
                "using the key prefix, or a script of another version "
                "loaded?",
                got);
        return SLUICE_EPROTO;
    }
    /* A rules reply is a value of any length, then two numbers: read from
     * where they start. */
    w.p = (const unsigned char *)rep->str + rep->len % 8;
    w.n = rep->len / 8;
    /* The script echoes the request's tag last: a reply meant for another
     * request (a connection out of step) is never taken for this one. */
    w.at = w.n - 1;
    if (!wire_num(&w, wire_tag(tag), wire_tag(tag), &echo)) {
        sl_errf(err, err_len,
                "evalsha: a reply out of step (tag %lld, expected %lld); the "
                "connection is dropped",
                (long long)echo, (long long)wire_tag(tag));
        return SLUICE_EPROTO;
    }
    w.at = 0;
    if (rq->op == SL_OP_RESET || rq->op == SL_OP_LEASE_RELEASE)
        return w.n == 2 ? SLUICE_OK : SLUICE_EPROTO;
    if (rq->op == SL_OP_LEASE_ACQUIRE) {
        int64_t admit, live, first, last, at;

        if (w.n != 6 || !wire_num(&w, 0, 1, &admit) ||
            !wire_num(&w, 0, INT64_MAX, &live) ||
            !wire_num(&w, -1, SL_EXACT_BOUND, &first) ||
            !wire_num(&w, -1, SL_EXACT_BOUND, &last) ||
            !wire_num(&w, 0, SL_MAX_TIME_MS, &at) ||
            (live > 0) != (first > at && last >= first) ||
            sl_lease_decide(at, rq->lease.max, rq->lease.lease_ms, live, first,
                            last, out) != (admit == 1)) {
            sl_errf(err, err_len,
                    "evalsha: unexpected reply for a lease; is another "
                    "program using the key prefix?");
            return SLUICE_EPROTO;
        }
        return SLUICE_OK;
    }
    if (is_over_op(rq->op))
        return over_result(rq, rep, &w, out, err, err_len);
    if (is_rules_op(rq->op))
        return rules_result(rq, rep, &w, out, err, err_len);
    /* A decision (the reset's and the lease's replies are read above). */
    rs = rq->decide.rules;
    cost = rq->decide.cost;
    for (i = 0; i < rs->count; i++) {
        if (!rule_view(&rs->rules[i], &w, &admits[i], &views[i], entries[i])) {
            sl_errf(err, err_len,
                    "evalsha: script reply for rule %zu out of range; is "
                    "another program using the key prefix?",
                    i + 1);
            return SLUICE_EPROTO;
        }
    }
    /* On the server's clock, the time the script decided at; for an
     * acquire at most, what it granted; with a block, its end before and
     * after. */
    if ((rq->now_ms < 0 && !wire_num(&w, 0, SL_MAX_TIME_MS, &t)) ||
        (rq->op == SL_OP_AT_MOST && !wire_num(&w, 0, rq->decide.cost, &g)) ||
        (block && (!wire_num(&w, -1, SL_MAX_TIME_MS, &end) ||
                   !wire_num(&w, -1, SL_MAX_TIME_MS, &end_after))) ||
        w.at + 1 != w.n) {
        sl_errf(err, err_len, "evalsha: script reply of %zu values", w.n);
        return SLUICE_EPROTO;
    }
    /* A refund's reply is a peek of cost 1 after it, and its answer the
     * state it left; an acquire at most is an acquire of what it granted,
     * or the denial of cost 1. */
    if (rq->op == SL_OP_REFUND || rq->op == SL_OP_FORCE)
        cost = 1;
    if (rq->op == SL_OP_AT_MOST) {
        int64_t mine = end > t ? 0 : sl_grant(rs, views, t, rq->decide.cost);

        if (g != mine) {
            sl_errf(err, err_len,
                    "evalsha: the script granted %lld where the client "
                    "finds %lld; is the script of another version?",
                    (long long)g, (long long)mine);
            return SLUICE_EPROTO;
        }
        *rq->decide.granted = g;
        cost = g > 0 ? g : 1;
    }
    /* The script reports each rule's own admission, before any block. */
    sl_decide(rs, views, t, cost, v, ch);
    for (i = 0; i < rs->count; i++) {
        if (v[i].admit != admits[i]) {
            sl_errf(err, err_len,
                    "evalsha: the script and the client disagree on rule "
                    "%zu's admission; is the script of another version?",
                    i + 1);
            return SLUICE_EPROTO;
        }
    }
    if (block) {
        sl_decide_block(rs, views, t, cost, end, v, ch, &mine_after);
        if (mine_after != end_after) {
            sl_errf(err, err_len,
                    "evalsha: the script's block ends at %lld where the "
                    "client finds %lld; is the script of another version?",
                    (long long)end_after, (long long)mine_after);
            return SLUICE_EPROTO;
        }
    }
    if (rq->op == SL_OP_REFUND || rq->op == SL_OP_FORCE) {
        sl_describe(rs, views, t, out);
    } else {
        sl_combine(rs, v, out);
        sl_note_violated(rq, rs, v);
    }
    return SLUICE_OK;
}

/* A request marked so goes as EVAL: the server lacked the script. */
#define MARK_EVAL       2u
/* How many times the request got NOSCRIPT (0..3), in two bits. */
#define NOSCRIPTS(m)    (((m) >> 2) & 3u)
#define NOSCRIPT_ONE    4u
#define NOSCRIPT_ROUNDS 3u

static void on_reply(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg);

/* Queues request i of the job, with its callback. */
static void send_request(state *s, sl_job *job, size_t i)
{
    char err[SL_ERR_LEN];
    sluice_status st;

    /* One EVAL a connection loads the script: the first request that
     * lacked it goes as EVAL, the others by EVALSHA behind it. */
    if (NOSCRIPTS(job->marks[i]) > 0 && !s->eval_pending)
        job->marks[i] |= MARK_EVAL;
    st = sl_evalsha_append(&s->conn, s->url, &job->reqs[i],
                           (job->marks[i] & MARK_EVAL) != 0, job->tag + i, err,
                           sizeof(err));
    if (st == SLUICE_OK &&
        (st = sl_conn_expect(&s->conn, on_reply, job, i)) != SLUICE_OK)
        sl_errf(err, sizeof(err), "evalsha: out of memory");
    if (st != SLUICE_OK)
        sl_engine_answer(job, i, st, err);
    else if ((job->marks[i] & MARK_EVAL) != 0)
        s->eval_pending = true; /* until its reply, or the close, comes */
}

static void on_reply(sl_conn *cn, sl_job *job, size_t i, redisReply *r,
                     sluice_status st, bool sent, const char *msg)
{
    state *s = job->eng->state;
    char err[SL_ERR_LEN]; /* a message only when a step fails */

    err[0] = '\0';
    /* An EVAL answered, or the connection that carried it closed. */
    if (r == NULL || (job->marks[i] & MARK_EVAL) != 0)
        s->eval_pending = false;
    if (sl_engine_answered(job, i))
        return;
    if (r == NULL) {
        /* Never sent, and the connection closed for another reason than
         * a failure to connect (an idle close found late, a reply out of
         * step, another request's timeout): send it on the next one. */
        if (!sent && st != SLUICE_ECONNECT && st != SLUICE_ENOMEM &&
            !job->eng->closing && !job->expired) {
            send_request(s, job, i);
            return;
        }
        sl_engine_answer(job, i, st, msg);
        return;
    }
    if (sl_evalsha_noscript(r, (job->marks[i] & MARK_EVAL) != 0)) {
        /* Again after an EVAL went before it: through a proxy, the EVAL
         * loaded another server (one EVAL a server, a round each), or the
         * cache emptied once more. The third time it goes as EVAL itself,
         * so that a request is sent at most four times. */
        job->marks[i] = (unsigned char)(job->marks[i] + NOSCRIPT_ONE);
        if (NOSCRIPTS(job->marks[i]) >= NOSCRIPT_ROUNDS)
            job->marks[i] |= MARK_EVAL;
        send_request(s, job, i);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR)
        st = sl_conn_reply_status(cn, r, err, sizeof(err));
    else
        st = sl_evalsha_result(&job->reqs[i], r, job->tag + i, &job->out[i],
                               err, sizeof(err));
    /* A proxy error can leave the connection half-used, and a reply out of
     * step means it is: start afresh once what was sent is answered. */
    if (st == SLUICE_EIO || st == SLUICE_ETIMEOUT || st == SLUICE_EPROTO)
        sl_conn_doom(cn);
    sl_engine_answer(job, i, st, err);
}

/* Each request has its tag, which the script echoes. */
static void evalsha_start(void *p, sl_job *job)
{
    state *s = p;
    size_t i;

    job->tag = s->tag;
    s->tag += job->n;
    for (i = 0; i < job->n && !job->finished; i++)
        send_request(s, job, i);
}

/* Moves to another master (redis+sentinel://). */
static uint64_t evalsha_failovers(void *p)
{
    return sl_sentinel_failovers(&((state *)p)->conn);
}

static uint64_t evalsha_round_trips(void *p)
{
    return ((state *)p)->conn.round_trips;
}

const sl_backend sl_backend_evalsha = {
    .name = "evalsha",
    .caps = SL_CAPS_EVALSHA,
    .open = evalsha_open,
    .close = evalsha_close,
    .round_trips = evalsha_round_trips,
    .failovers = evalsha_failovers,
    .ops = {.start = evalsha_start},
};
