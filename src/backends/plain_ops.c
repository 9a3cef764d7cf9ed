/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_ops.c - what the plain family sends for each kind of state, and
 * how it reads the replies: one table of {emit, parse, undo} per family
 * (store.h) and phase, as Lua's lopcodes table is read by both compiler
 * and VM, and a reply cursor that hands parse the replies in the order
 * emit queued them, each checked against the want it was queued with. So
 * the commands sent and the replies read are one list by construction.
 *
 * Per rule, an optimistic acquire (the charge phase) sends:
 *   fixed    SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl
 *   sliding  SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl; GET w-1
 *   log      ZADD l t m; ZRANGE l 0 -1 WITHSCORES; PEXPIRE l ttl
 * where w is the window-stamped key of t's window, so a window ending
 * between two commands never reuses a counter, and every key gets its TTL
 * from the command that creates it (SET NX PX) or right after (ZADD). Its
 * undo, on a denial: DECRBY w c; PEXPIRE w ttl or ZREM l m.
 *
 * A log is pruned only below the newest stamp minus P, never below the
 * request's own t minus P: a request from a clock ahead that is then
 * denied must leave no trace, and entries it would have pruned still count
 * for the requests after it. Pruning rides on a follow-up that is sent
 * anyway (a denial, a late stamp), or on its own once dead entries are as
 * many as the live ones (and at least PRUNE_MIN), so a log holds at most
 * about twice its live entries. */
#include "backends/plain_ops.h"

#include "store.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PRUNE_MIN 16 /* dead log entries worth a round trip */

/* ----------------------------------------------------------- helpers */

/* The key of rule i of u; windows get ":<k>" for window k. */
static size_t rule_key(const sl_plain *p, const unit *u, size_t i, int64_t k,
                       char *buf)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    size_t n = sl_key_build(buf, KEYBUF, sl_plain_prefix(p, u), u->rq->key,
                            u->rq->key_len, r);

    return sl_store_is_window(r) ? sl_key_window(buf, n, k) : n;
}

static int64_t ttl_floor(const sl_plain *p)
{
    return (int64_t)p->url->cfg.ttl_floor_ms;
}

/* The TTL rule i's key needs after unit u's charge (store.h). */
static int64_t charge_ttl(const sl_plain *p, const unit *u, size_t i)
{
    return sl_store_ttl(&u->rq->decide.rules->rules[i], u->rq->now_ms,
                        u->v[i].reset_ms, ttl_floor(p));
}

/* A log entry's member: its stamp, its cost, and a nonce that makes it
 * unique among the handles of every process (sl_plain_ops_seed). */
static void log_member(sl_plain *p, int64_t x, int64_t cost, char *buf,
                       size_t len)
{
    snprintf(buf, len, "%lld:%lld:%016llx", (long long)x, (long long)cost,
             (unsigned long long)++p->nonce);
}

/* Log entries from ZRANGE ... WITHSCORES, without our own member. */
static bool read_log(rule_io *io, const redisReply *r, size_t *count)
{
    size_t i, n = 0;

    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return false;
    if (r->elements / 2 > io->cap) {
        sl_log_entry *e = sl_realloc(io->entries, r->elements / 2 * sizeof(*e));

        if (e == NULL)
            return false;
        io->entries = e;
        io->cap = r->elements / 2;
    }
    for (i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *m = r->element[i], *s = r->element[i + 1];
        const char *colon;

        if (m->type != REDIS_REPLY_STRING || s->type != REDIS_REPLY_STRING)
            return false;
        if (io->member[0] != '\0' && m->len == strlen(io->member) &&
            memcmp(m->str, io->member, m->len) == 0)
            continue;
        colon = memchr(m->str, ':', m->len);
        if (colon == NULL || !sl_plain_i64(s->str, s->len, &io->entries[n].x) ||
            !sl_plain_i64(colon + 1,
                          strcspn(colon + 1, ":"), /* "<t>:<cost>:<nonce>" */
                          &io->entries[n].cost))
            return false;
        /* Stamps are times, costs within the accepted range: sums and
         * differences of them stay exact. */
        if (io->entries[n].x < 0 || io->entries[n].x > SL_MAX_TIME_MS ||
            io->entries[n].cost < 1 || io->entries[n].cost > SL_MAX_LIMIT)
            return false;
        n++;
    }
    *count = n;
    return true;
}

/* A window count read back: a taken-back charge whose key expired
 * meanwhile leaves a negative count, which is an empty window; a count
 * whose product with the period could overflow is not ours. */
static bool window_count(int64_t *v, const sluice_rule *r)
{
    if (*v < 0)
        *v = 0;
    return *v <= INT64_MAX / 4 / r->period_ms;
}

/* Log entries (others', oldest first) stamped at or before upto. */
static size_t log_dead(const sl_state_view *s, int64_t upto)
{
    size_t n = 0;

    while (n < s->n && s->entries[n].x <= upto)
        n++;
    return n;
}

/* Queues the removal of the log's entries stamped at or before upto. */
static size_t emit_prune(sl_plain *p, unit *u, const char *key, size_t kl,
                         int64_t upto)
{
    APPEND(p, u, WANT_COUNT, "ZREMRANGEBYSCORE %b -inf %lld", key, kl,
           (long long)upto);
    return 1;
}

/* Queues a log entry of cost at stamp x, under a new member, and the
 * key's TTL. */
static size_t emit_log_entry(sl_plain *p, unit *u, const char *key, size_t kl,
                             int64_t x, int64_t cost, long long ttl)
{
    char member[64];

    log_member(p, x, cost, member, sizeof(member));
    APPEND(p, u, WANT_BOOL, "ZADD %b %lld %s", key, kl, (long long)x, member);
    APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl, ttl);
    return 2;
}

/* ------------------------------------------------------------ windows */

/* Reads: GET of each window the rule reads, the oldest first. */
static size_t window_read(sl_plain *p, unit *u, size_t i)
{
    int windows = sl_store_of(u->rq->decide.rules->rules[i].algorithm).windows;
    char key[KEYBUF];
    size_t kl;
    int d;

    for (d = windows - 1; d >= 0; d--) {
        kl = rule_key(p, u, i, u->io[i].k - d, key);
        APPEND(p, u, WANT_BULK_NIL, "GET %b", key, kl);
    }
    return (size_t)windows;
}

static bool window_read_parse(sl_plain *p, unit *u, size_t i, sl_cursor *c)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    sl_state_view *s = &u->views[i];

    (void)p;
    if (sl_store_of(r->algorithm).windows > 1)
        sl_cursor_count(c, INT64_MIN, INT64_MAX, &s->prev);
    sl_cursor_count(c, INT64_MIN, INT64_MAX, &s->cur);
    return !c->bad && window_count(&s->cur, r) && window_count(&s->prev, r);
}

/* The charge: SET NX PX gives a new window its TTL as it creates it,
 * INCRBY charges, PEXPIRE again (an expiry between the two would leave a
 * key without one); then the windows before t's that the rule reads. */
static size_t window_charge(sl_plain *p, unit *u, size_t i)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    rule_io *io = &u->io[i];
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, io->k, key), n = 3;
    int d;

    io->ttl = sl_store_window_ttl(r, io->to_end, ttl_floor(p));
    APPEND(p, u, WANT_OK_NIL, "SET %b 0 NX PX %lld", key, kl,
           (long long)io->ttl);
    APPEND(p, u, WANT_INT, "INCRBY %b %lld", key, kl,
           (long long)u->rq->decide.cost);
    APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl, (long long)io->ttl);
    for (d = 1; d < sl_store_of(r->algorithm).windows; d++, n++) {
        kl = rule_key(p, u, i, io->k - d, key);
        APPEND(p, u, WANT_BULK_NIL, "GET %b", key, kl);
    }
    return n;
}

static bool window_charge_parse(sl_plain *p, unit *u, size_t i, sl_cursor *c)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    sl_state_view *s = &u->views[i];
    int64_t cost = u->rq->decide.cost;

    (void)p;
    sl_cursor_next(c, WANT_OK_NIL);
    /* The count after the charge: before it, cur, must be an int64. */
    if (sl_cursor_int(c, WANT_INT, INT64_MIN + cost + 1, INT64_MAX, &s->cur))
        s->cur -= cost;
    sl_cursor_next(c, WANT_BOOL);
    if (sl_store_of(r->algorithm).windows > 1)
        sl_cursor_count(c, INT64_MIN, INT64_MAX, &s->prev);
    return !c->bad && window_count(&s->cur, r) && window_count(&s->prev, r);
}

/* Takes back what was charged and not granted: all of it on a denial,
 * an acquire at most's excess on an admission. PEXPIRE too: should the
 * key have expired meanwhile, DECRBY would have created it without a
 * TTL. */
static size_t window_undo(sl_plain *p, unit *u, size_t i)
{
    int64_t back =
        u->all ? u->rq->decide.cost - u->charged : u->rq->decide.cost;
    char key[KEYBUF];
    size_t kl;

    if (back <= 0)
        return 0;
    kl = rule_key(p, u, i, u->io[i].k, key);
    APPEND(p, u, WANT_INT, "DECRBY %b %lld", key, kl, (long long)back);
    APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
           (long long)u->io[i].ttl);
    return 2;
}

/* A watched acquire's writes, admitted. */
static size_t window_write(sl_plain *p, unit *u, size_t i)
{
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, u->io[i].k, key);

    APPEND(p, u, WANT_INT, "INCRBY %b %lld", key, kl, (long long)u->charged);
    APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
           (long long)charge_ttl(p, u, i));
    return 2;
}

/* ---------------------------------------------------------------- logs */

static size_t log_read(sl_plain *p, unit *u, size_t i)
{
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, 0, key);

    APPEND(p, u, WANT_ARRAY, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
    return 1;
}

static bool log_read_parse(sl_plain *p, unit *u, size_t i, sl_cursor *c)
{
    sl_state_view *s = &u->views[i];

    (void)p;
    s->entries = u->io[i].entries;
    if (!read_log(&u->io[i], sl_cursor_next(c, WANT_ARRAY), &s->n))
        return false;
    s->entries = u->io[i].entries;
    return true;
}

/* The charge: our entry, every entry, the TTL (a charge stamped t resets
 * a period later). */
static size_t log_charge(sl_plain *p, unit *u, size_t i)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    rule_io *io = &u->io[i];
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, 0, key);
    int64_t t = u->rq->now_ms;

    io->ttl = sl_store_ttl(r, t, r->period_ms, ttl_floor(p));
    log_member(p, t, u->rq->decide.cost, io->member, sizeof(io->member));
    APPEND(p, u, WANT_BOOL, "ZADD %b %lld %s", key, kl, (long long)t,
           io->member);
    APPEND(p, u, WANT_ARRAY, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
    APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl, (long long)io->ttl);
    return 3;
}

static bool log_charge_parse(sl_plain *p, unit *u, size_t i, sl_cursor *c)
{
    sl_state_view *s = &u->views[i];
    const redisReply *all;

    (void)p;
    sl_cursor_next(c, WANT_BOOL);
    all = sl_cursor_next(c, WANT_ARRAY);
    sl_cursor_next(c, WANT_BOOL);
    s->entries = u->io[i].entries;
    if (c->bad || !read_log(&u->io[i], all, &s->n))
        return false;
    s->entries = u->io[i].entries;
    return true;
}

/* On a denial, our entry goes, and what is dead for everyone (below the
 * newest charge minus P; not below t - P: this request charged nothing).
 * On an admission, a late entry is re-stamped with the newest time and an
 * acquire at most's entry gets its grant (the new entry first: between
 * two commands another client's block may run, and must find the charge
 * there; twice is safe, missing would admit beyond the limit), and the
 * entries that died before our stamp are pruned when that is due (see
 * the top of the file). */
static size_t log_undo(sl_plain *p, unit *u, size_t i)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    const sl_state_view *s = &u->views[i];
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, 0, key), n = 0, dead;
    int64_t upto = u->ch[i].x - r->period_ms;
    bool late = u->ch[i].x != u->rq->now_ms;

    if (!u->all) {
        APPEND(p, u, WANT_BOOL, "ZREM %b %s", key, kl, u->io[i].member);
        if (s->n > 0 && log_dead(s, s->entries[s->n - 1].x - r->period_ms) > 0)
            return 1 + emit_prune(p, u, key, kl,
                                  s->entries[s->n - 1].x - r->period_ms);
        return 1;
    }
    dead = log_dead(s, upto);
    if (!late && u->rq->decide.cost == u->charged &&
        (dead < PRUNE_MIN || dead < s->n - dead))
        return 0;
    if (late || u->rq->decide.cost > u->charged) {
        n += emit_log_entry(p, u, key, kl, u->ch[i].x, u->charged,
                            (long long)charge_ttl(p, u, i));
        APPEND(p, u, WANT_BOOL, "ZREM %b %s", key, kl, u->io[i].member);
        n++;
    }
    if (dead > 0)
        n += emit_prune(p, u, key, kl, upto);
    return n;
}

/* A watched acquire's writes, admitted: the dead entries, ours. */
static size_t log_write(sl_plain *p, unit *u, size_t i)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, 0, key);

    emit_prune(p, u, key, kl, u->ch[i].x - r->period_ms);
    return 1 + emit_log_entry(p, u, key, kl, u->ch[i].x, u->charged,
                              (long long)charge_ttl(p, u, i));
}

/* ------------------------------------------------------------- buckets */

static size_t bucket_read(sl_plain *p, unit *u, size_t i)
{
    char key[KEYBUF];
    size_t kl = rule_key(p, u, i, 0, key);

    APPEND(p, u, WANT_BULK_NIL, "GET %b", key, kl);
    return 1;
}

/* A bucket's state: nil, or what sl_bucket_pack wrote. */
static bool bucket_read_parse(sl_plain *p, unit *u, size_t i, sl_cursor *c)
{
    const redisReply *r = sl_cursor_next(c, WANT_BULK_NIL);
    sl_state_view *s = &u->views[i];

    (void)p;
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_NIL)
        return true;
    s->has = true;
    return sl_bucket_unpack(r->str, r->len, &s->x, &s->d, &u->io[i].keep);
}

/* A watched acquire's write, admitted. TTLs only grow: keep is the latest
 * time any charge of the state asked it to live until (a raised limit
 * drains faster than the rule that charged before). */
static size_t bucket_write(sl_plain *p, unit *u, size_t i)
{
    const sluice_rule *r = &u->rq->decide.rules->rules[i];
    int64_t t = u->rq->now_ms;
    char key[KEYBUF], packed[SL_BUCKET_LEN];
    size_t kl = rule_key(p, u, i, 0, key);
    int64_t keep =
        sl_max64(u->io[i].keep, t + sl_store_ttl(r, t, u->v[i].reset_ms, 0));

    sl_bucket_pack(packed, u->ch[i].x, u->ch[i].d, keep);
    APPEND(p, u, WANT_OK, "SET %b %b PX %lld", key, kl, packed, sizeof(packed),
           (long long)sl_max64(keep - t, ttl_floor(p)));
    return 1;
}

/* A refund's write: the state after it, when there is one, its TTL
 * kept; none for a refund of 0, which changes nothing. */
static size_t bucket_refund(sl_plain *p, unit *u, size_t i)
{
    const sl_state_view *s = &u->views[i];
    char key[KEYBUF], packed[SL_BUCKET_LEN];
    size_t kl;

    if (!s->has || u->rq->decide.cost == 0)
        return 0;
    kl = rule_key(p, u, i, 0, key);
    sl_bucket_pack(packed, s->x, s->d, u->io[i].keep);
    APPEND(p, u, WANT_OK, "SET %b %b KEEPTTL", key, kl, packed, sizeof(packed));
    return 1;
}

/* ------------------------------------------------------------- the table */

/* The phases of a decision, each a column of the table. */
typedef enum phase {
    PHASE_READ,   /* a peek, or the reads of a watched request */
    PHASE_CHARGE, /* an optimistic acquire: charged, judged, undone */
    PHASE_WRITE,  /* a watched acquire's writes, in MULTI/EXEC */
    PHASE_REFUND, /* a refund's writes, in MULTI/EXEC */
    PHASE_COUNT
} phase;

/* By family (store.h) and phase. Buckets are never charged blindly (a
 * read-modify-write needs WATCH), nor windows and logs refunded (plain.c,
 * classify): those cells are empty. The writes are answered in EXEC,
 * each checked against its want as it comes: they need no parse. */
static const plain_op ops[SL_FAMILY_BUCKET + 1][PHASE_COUNT] = {
    [SL_FAMILY_WINDOW] =
        {
            [PHASE_READ] = {window_read, window_read_parse, NULL},
            [PHASE_CHARGE] = {window_charge, window_charge_parse, window_undo},
            [PHASE_WRITE] = {window_write, NULL, NULL},
        },
    [SL_FAMILY_LOG] =
        {
            [PHASE_READ] = {log_read, log_read_parse, NULL},
            [PHASE_CHARGE] = {log_charge, log_charge_parse, log_undo},
            [PHASE_WRITE] = {log_write, NULL, NULL},
        },
    [SL_FAMILY_BUCKET] =
        {
            [PHASE_READ] = {bucket_read, bucket_read_parse, NULL},
            [PHASE_WRITE] = {bucket_write, NULL, NULL},
            [PHASE_REFUND] = {bucket_refund, NULL, NULL},
        },
};

static const plain_op *op_of(const unit *u, size_t i, phase ph)
{
    return &ops[sl_store_of(u->rq->decide.rules->rules[i].algorithm).family]
               [ph];
}

/* Runs emit (or undo) of phase ph for every rule of u. */
static size_t emit_all(sl_plain *p, unit *u, phase ph, bool undo)
{
    size_t i, n = 0;

    for (i = 0; i < u->rq->decide.rules->count; i++) {
        const plain_op *op = op_of(u, i, ph);
        size_t (*f)(sl_plain *, unit *, size_t) = undo ? op->undo : op->emit;

        if (f != NULL)
            n += f(p, u, i);
    }
    return n;
}

size_t sl_plain_ops_block(sl_plain *p, unit *u)
{
    size_t i;

    for (i = 0; i < u->rq->decide.rules->count; i++)
        sl_window_locate(&u->rq->decide.rules->rules[i], u->rq->now_ms,
                         &u->io[i].k, &u->io[i].to_end);
    return emit_all(p, u, u->mode == JOB_READ ? PHASE_READ : PHASE_CHARGE,
                    false);
}

sluice_status sl_plain_ops_parse(sl_plain *p, unit *u, redisReply **reps,
                                 char *err, size_t err_len)
{
    sl_cursor c = sl_plain_cursor(u, reps);
    phase ph = u->mode == JOB_READ ? PHASE_READ : PHASE_CHARGE;
    size_t i;
    bool ok = true;

    for (i = 0; i < u->rq->decide.rules->count && ok; i++) {
        const plain_op *op = op_of(u, i, ph);

        memset(&u->views[i], 0, sizeof(u->views[i]));
        ok = op->parse != NULL && op->parse(p, u, i, &c);
    }
    if (ok && sl_cursor_done(&c))
        return SLUICE_OK;
    sl_errf(err, err_len,
            "%s: unexpected data under the keys of this "
            "request; is another program using the key prefix \"%s\"?",
            p->name, p->url->cfg.prefix);
    return SLUICE_EPROTO;
}

size_t sl_plain_ops_follow(sl_plain *p, unit *u)
{
    return emit_all(p, u, PHASE_CHARGE, true);
}

size_t sl_plain_ops_writes(sl_plain *p, unit *u)
{
    return emit_all(p, u, PHASE_WRITE, false);
}

/* A refund of buckets (the only rules refunded here) on the views read:
 * they become the state after it. */
void sl_plain_ops_refund_views(unit *u)
{
    const sluice_ruleset *rs = u->rq->decide.rules;
    size_t i;

    for (i = 0; i < rs->count; i++) {
        sl_state_view *s = &u->views[i];

        s->has = sl_refund_bucket(&rs->rules[i], u->rq->now_ms, s->has, s->x,
                                  s->d, u->rq->decide.cost, &s->x, &s->d);
    }
}

size_t sl_plain_ops_refund_writes(sl_plain *p, unit *u)
{
    return emit_all(p, u, PHASE_REFUND, false);
}

/* WATCH of every key a watched request reads: each rule's key, and for
 * windows every window it reads. */
void sl_plain_ops_watch(sl_plain *p, unit *u)
{
    const sluice_ruleset *rs = u->rq->decide.rules;
    const char *argv[1 + 2 * SLUICE_MAX_RULES];
    size_t lens[1 + 2 * SLUICE_MAX_RULES], i;
    char keys[2 * SLUICE_MAX_RULES][KEYBUF];
    int argc = 1, d;

    argv[0] = "WATCH";
    lens[0] = 5;
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        int64_t k, to_end;

        sl_window_locate(r, u->rq->now_ms, &k, &to_end);
        d = 0;
        do {
            lens[argc] = rule_key(p, u, i, k - d, keys[argc - 1]);
            argv[argc] = keys[argc - 1];
            argc++;
        } while (++d < sl_store_of(r->algorithm).windows);
    }
    sl_plain_expect(p, u, WANT_OK,
                    sl_conn_append(&p->conn, argc, argv, lens, NULL, 0));
}

/* ------------------------------------------------- members and decoding */

/* splitmix64's finaliser: every bit of x moves about half of the result's. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Where a handle's log members start counting. Two handles whose counts
 * meet write the same member for one stamp and cost: the second ZADD adds
 * nothing, each takes the other's entry for its own, and their charges
 * count once (over-admission). So the start is random, from the kernel,
 * not from the process id, the second and the handle's address: a handle
 * closed and another opened in the same second at the same address (as
 * malloc gives it back, in a thread that reuses a finished one's arena)
 * started the same count, and partial.multi_tls admitted up to 199 of
 * 100. Without /dev/urandom, the clocks' nanoseconds stand in (two
 * handles of one process never open at the same nanosecond and
 * address). Two random starts meet with odds of about (n + m) / 2^64 for
 * handles writing n and m members. */
uint64_t sl_plain_ops_seed(const void *p)
{
    struct timespec rt = {0, 0}, mono = {0, 0};
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd >= 0) {
        ssize_t got = read(fd, &seed, sizeof(seed));

        close(fd);
        if (got == (ssize_t)sizeof(seed))
            return mix64(seed);
    }
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    seed = mix64((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec);
    seed = mix64(
        seed ^ ((uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec));
    return mix64(seed ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)p);
}

sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len)
{
    static const sl_url url = {.cfg = {.prefix = "sluice:"}};
    sl_plain p = {.url = &url, .name = "decode"};
    unit *j;
    sluice_status st;
    size_t i;

    if (!sl_op_decides(rq->op)) {
        sl_errf(err, err_len, "decode: only a decision's block is decoded");
        return SLUICE_EINVAL;
    }
    for (i = 0; !read_mode && i < rq->decide.rules->count; i++)
        if (sl_store_is_bucket(&rq->decide.rules->rules[i]))
            break;
    if (!read_mode && i < rq->decide.rules->count) {
        sl_errf(err, err_len, "decode: buckets are never charged blindly");
        return SLUICE_EINVAL;
    }
    if ((j = sl_calloc(1, sizeof(*j))) == NULL)
        return SLUICE_ENOMEM;
    j->rq = rq;
    j->mode = read_mode ? JOB_READ : JOB_OPTIMISTIC;
    /* The block's commands, counted (and their wants recorded), not sent:
     * the replies must answer them one for one. */
    j->dry = true;
    j->ncmds = sl_plain_ops_block(&p, j);
    if (n != j->ncmds) {
        sl_errf(err, err_len, "decode: %zu replies for a block of %zu", n,
                j->ncmds);
        sl_free(j);
        return SLUICE_EINVAL;
    }
    if (!read_mode)
        for (i = 0; i < rq->decide.rules->count; i++)
            snprintf(j->io[i].member, sizeof(j->io[i].member), "%lld:%lld:0",
                     (long long)rq->now_ms, (long long)rq->decide.cost);
    st = sl_plain_ops_parse(&p, j, reps, err, err_len);
    if (st == SLUICE_OK) {
        sluice_result out;

        j->all = sl_decide(rq->decide.rules, j->views, rq->now_ms,
                           rq->decide.cost, j->v, j->ch);
        sl_combine(rq->decide.rules, j->v, &out);
    }
    for (i = 0; i < SLUICE_MAX_RULES; i++)
        sl_free(j->io[i].entries);
    sl_free(j);
    return st;
}

/* ------------------------------------------------------ forced charges */

/* The views become the state after the forced charge planned in u->ch
 * (false: out of memory for a log's entry, the views as read). */
static bool force_apply(unit *u)
{
    const sluice_ruleset *rs = u->rq->decide.rules;
    size_t i;

    /* Room for a log's entry first: on failure, the views are as read. */
    for (i = 0; i < rs->count; i++) {
        rule_io *io = &u->io[i];
        sl_log_entry *n;

        if (rs->rules[i].algorithm != SLUICE_LOG || u->ch[i].n == 0 ||
            u->views[i].n < io->cap)
            continue;
        if ((n = sl_realloc(io->entries, (io->cap + 1) * sizeof(*n))) == NULL)
            return false;
        io->entries = n;
        io->cap++;
        u->views[i].entries = n;
    }
    for (i = 0; i < rs->count; i++) {
        sl_state_view *s = &u->views[i];

        switch (sl_store_of(rs->rules[i].algorithm).family) {
        case SL_FAMILY_WINDOW:
            s->cur += u->ch[i].n;
            break;
        case SL_FAMILY_LOG:
            if (u->ch[i].n > 0)
                u->io[i].entries[s->n++] =
                    (sl_log_entry){u->ch[i].x, u->ch[i].n};
            break;
        case SL_FAMILY_BUCKET:
            s->has = true;
            s->x = u->ch[i].x;
            s->d = u->ch[i].d;
            break;
        }
    }
    return true;
}

bool sl_plain_ops_force_views(unit *u)
{
    sl_force_plan(u->rq->decide.rules, u->views, u->rq->now_ms,
                  u->rq->decide.cost, u->v, u->ch);
    return force_apply(u);
}

size_t sl_plain_ops_force_writes(sl_plain *p, unit *u)
{
    const sluice_ruleset *rs = u->rq->decide.rules;
    char key[KEYBUF];
    size_t i, kl, n = 0;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];

        if (u->ch[i].n == 0)
            continue;
        switch (sl_store_of(r->algorithm).family) {
        case SL_FAMILY_WINDOW:
            kl = rule_key(p, u, i, u->io[i].k, key);
            APPEND(p, u, WANT_INT, "INCRBY %b %lld", key, kl,
                   (long long)u->ch[i].n);
            APPEND(p, u, WANT_BOOL, "PEXPIRE %b %lld", key, kl,
                   (long long)charge_ttl(p, u, i));
            n += 2;
            break;
        case SL_FAMILY_LOG:
            kl = rule_key(p, u, i, 0, key);
            emit_prune(p, u, key, kl, u->ch[i].x - r->period_ms);
            n += 1 + emit_log_entry(p, u, key, kl, u->ch[i].x, u->ch[i].n,
                                    (long long)charge_ttl(p, u, i));
            break;
        case SL_FAMILY_BUCKET:
            n += bucket_write(p, u, i);
            break;
        }
    }
    return n;
}

sluice_status sl_plain_ops_force_judge(unit *u)
{
    const sluice_ruleset *rs = u->rq->decide.rules;
    size_t i;

    /* Judged on the views as read (the follow-up that takes the charge
     * back reads them): only a charge kept changes them. */
    sl_force_plan(rs, u->views, u->rq->now_ms, u->rq->decide.cost, u->v, u->ch);
    for (i = 0; i < rs->count; i++)
        if (u->ch[i].n != u->rq->decide.cost)
            return SLUICE_EUNSUPPORTED;
    return force_apply(u) ? SLUICE_OK : SLUICE_ENOMEM;
}
