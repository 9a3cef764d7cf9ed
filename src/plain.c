/* SPDX-License-Identifier: BSD-3-Clause */
/* plain.c - decides with plain commands. Windows and logs are charged
 * optimistically (the charge is made, then judged, and taken back on a
 * denial); buckets need an atomic read-modify-write, which only WATCH and
 * MULTI/EXEC give. No command here needs EXPIRE options, scripts or TIME.
 *
 * Per rule, an optimistic acquire sends:
 *   fixed    SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl
 *   sliding  SET w 0 NX PX ttl; INCRBY w c; PEXPIRE w ttl; GET w-1
 *   log      ZADD l t m; ZRANGE l 0 -1 WITHSCORES; PEXPIRE l ttl
 * where w is the window-stamped key of t's window, so a window ending
 * between two commands never reuses a counter, and every key gets its TTL
 * from the command that creates it (SET NX PX) or right after (ZADD). A
 * denial sends DECRBY w c; PEXPIRE w ttl or ZREM l m.
 *
 * A log is pruned only below the newest stamp minus P, never below the
 * request's own t minus P: a request from a clock ahead that is then
 * denied must leave no trace, and entries it would have pruned still count
 * for the requests after it. Pruning rides on a follow-up that is sent
 * anyway (a denial, a late stamp), or on its own once dead entries are as
 * many as the live ones (and at least PRUNE_MIN), so a log holds at most
 * about twice its live entries. */
#include "plain.h"

#include "algo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEYBUF        SL_KEY_BUF
#define WATCH_RETRIES 16
#define PRUNE_MIN     16 /* dead log entries worth a round trip */

typedef enum job_mode {
    JOB_OPTIMISTIC = 1, /* acquire of windows and logs */
    JOB_READ,           /* peek, or the reads of a watched acquire */
    JOB_RESET
} job_mode;

/* One rule's state as read back, and what a charge must write. */
typedef struct rule_io {
    int64_t k, to_end;     /* windows: index and time to its end */
    int64_t ttl;           /* TTL sent with the optimistic charge */
    sl_log_entry *entries; /* log: oldest first, without our own */
    int64_t keep;          /* token, gcra: live at least until then */
    size_t cap;
    char member[64]; /* log: our entry */
} rule_io;

typedef struct job {
    const sl_request *rq;
    job_mode mode;
    bool watched;      /* a bucket rule: WATCH, read, MULTI/EXEC */
    size_t ncmds;      /* commands of its block, MULTI/EXEC aside */
    size_t nfollow;    /* commands of its follow-up */
    redisReply *exec;  /* MULTI mode: the EXEC reply holding them */
    redisReply **reps; /* its ncmds replies */
    rule_io io[SLUICE_MAX_RULES];
    sl_state_view views[SLUICE_MAX_RULES];
    sl_verdict v[SLUICE_MAX_RULES];
    sl_charge ch[SLUICE_MAX_RULES];
    bool all;
} job;

static bool is_bucket(const sluice_rule *r)
{
    return r->algorithm == SLUICE_TOKEN || r->algorithm == SLUICE_GCRA;
}

static bool has_bucket(const sluice_ruleset *rs)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (is_bucket(&rs->rules[i]))
            return true;
    return false;
}

/* The key of rule r; windows get ":<k>" for window k. */
static size_t rule_key(const sl_plain *p, const sl_request *rq,
                       const sluice_rule *r, bool window, int64_t k, char *buf)
{
    size_t n =
        sl_key_build(buf, KEYBUF, p->url->prefix, rq->key, rq->key_len, r);

    return window ? sl_key_window(buf, n, k) : n;
}

static bool is_window(const sluice_rule *r)
{
    return r->algorithm == SLUICE_FIXED || r->algorithm == SLUICE_SLIDING;
}

static int64_t with_floor(const sl_plain *p, int64_t ttl)
{
    return sl_max64(ttl, (int64_t)p->url->opts.ttl_floor_ms);
}

/* A log entry's member: its stamp, its cost, and a nonce that makes it
 * unique among the handles of every process. */
static void log_member(sl_plain *p, int64_t x, int64_t cost, char *buf,
                       size_t len)
{
    snprintf(buf, len, "%lld:%lld:%016llx", (long long)x, (long long)cost,
             (unsigned long long)++p->nonce);
}

/* Appends one command; hiredis formats it into the output buffer. */
#define APPEND(p, ...) sl_conn_appendf(&(p)->conn, NULL, 0, __VA_ARGS__)

/* Appends the block of one job; returns its number of commands. */
static size_t append_block(sl_plain *p, job *j)
{
    const sl_request *rq = j->rq;
    const sluice_ruleset *rs = rq->rules;
    char key[KEYBUF], prev[KEYBUF];
    size_t i, n = 0, kl, pl;
    int64_t t = rq->now_ms;

    if (j->mode == JOB_RESET) {
        sl_conn_append_reset(&p->conn, p->url->prefix, rq, NULL, 0);
        return 1;
    }
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        rule_io *io = &j->io[i];
        int64_t per = r->period_ms;

        sl_window_locate(r, t, &io->k, &io->to_end);
        kl = rule_key(p, rq, r, is_window(r), io->k, key);
        if (j->mode == JOB_READ) {
            switch (r->algorithm) {
            case SLUICE_SLIDING:
                pl = rule_key(p, rq, r, true, io->k - 1, prev);
                APPEND(p, "GET %b", prev, pl);
                n++;
                /* fall through */
            case SLUICE_FIXED:
                APPEND(p, "GET %b", key, kl);
                n++;
                break;
            case SLUICE_LOG:
                APPEND(p, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
                n++;
                break;
            case SLUICE_TOKEN:
            case SLUICE_GCRA:
                APPEND(p, "GET %b", key, kl);
                n++;
                break;
            }
            continue;
        }
        /* Optimistic charge. */
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            io->ttl =
                with_floor(p, io->to_end + per +
                                  (r->algorithm == SLUICE_SLIDING ? per : 0));
            APPEND(p, "SET %b 0 NX PX %lld", key, kl, (long long)io->ttl);
            APPEND(p, "INCRBY %b %lld", key, kl, (long long)rq->cost);
            APPEND(p, "PEXPIRE %b %lld", key, kl, (long long)io->ttl);
            n += 3;
            if (r->algorithm == SLUICE_SLIDING) {
                pl = rule_key(p, rq, r, true, io->k - 1, prev);
                APPEND(p, "GET %b", prev, pl);
                n++;
            }
            break;
        case SLUICE_LOG:
            io->ttl = with_floor(p, 2 * per);
            log_member(p, t, rq->cost, io->member, sizeof(io->member));
            APPEND(p, "ZADD %b %lld %s", key, kl, (long long)t, io->member);
            APPEND(p, "ZRANGE %b 0 -1 WITHSCORES", key, kl);
            APPEND(p, "PEXPIRE %b %lld", key, kl, (long long)io->ttl);
            n += 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            break; /* never optimistic */
        }
    }
    return n;
}

static sluice_status reply_status(sl_plain *p, const redisReply *r, char *err,
                                  size_t err_len)
{
    return sl_conn_reply_status(&p->conn, r, err, err_len);
}

/* Reads the replies of a job's block (wrapped in MULTI/EXEC or not). */
static sluice_status read_block(sl_plain *p, job *j, bool wrapped,
                                sluice_result *out, char *err, size_t err_len)
{
    redisReply *r;
    size_t i;
    sluice_status st;

    j->reps = sl_calloc(j->ncmds ? j->ncmds : 1, sizeof(*j->reps));
    if (j->reps == NULL) {
        sl_errf(err, err_len, "%s: out of memory", p->name);
        return SLUICE_ENOMEM;
    }
    if (!wrapped) {
        for (i = 0; i < j->ncmds; i++) {
            if ((st = sl_conn_read(&p->conn, &j->reps[i], err, err_len)) !=
                SLUICE_OK)
                return st;
            if (out->status == SLUICE_OK)
                out->status = reply_status(p, j->reps[i], err, err_len);
        }
        return SLUICE_OK;
    }
    /* MULTI's +OK, one +QUEUED a command, then EXEC's array. */
    for (i = 0; i < j->ncmds + 1; i++) {
        if ((st = sl_conn_read(&p->conn, &r, err, err_len)) != SLUICE_OK)
            return st;
        if (out->status == SLUICE_OK)
            out->status = reply_status(p, r, err, err_len);
        freeReplyObject(r);
    }
    if ((st = sl_conn_read(&p->conn, &j->exec, err, err_len)) != SLUICE_OK)
        return st;
    if (out->status != SLUICE_OK)
        return SLUICE_OK;
    if (j->exec->type == REDIS_REPLY_ERROR) {
        out->status = reply_status(p, j->exec, err, err_len);
        return SLUICE_OK;
    }
    if (j->exec->type != REDIS_REPLY_ARRAY || j->exec->elements != j->ncmds) {
        sl_errf(err, err_len,
                "%s: EXEC answered %zu replies for %zu "
                "commands",
                p->name,
                j->exec->type == REDIS_REPLY_ARRAY ? j->exec->elements : 0,
                j->ncmds);
        out->status = SLUICE_EPROTO;
        return SLUICE_OK;
    }
    for (i = 0; i < j->ncmds; i++) {
        j->reps[i] = j->exec->element[i];
        if (out->status == SLUICE_OK)
            out->status = reply_status(p, j->reps[i], err, err_len);
    }
    return SLUICE_OK;
}

static void release_replies(job *j, bool wrapped)
{
    size_t i;

    if (j->reps != NULL && !wrapped)
        for (i = 0; i < j->ncmds; i++)
            if (j->reps[i] != NULL)
                freeReplyObject(j->reps[i]);
    if (j->exec != NULL)
        freeReplyObject(j->exec);
    sl_free(j->reps);
    j->reps = NULL;
    j->exec = NULL;
}

static void release_job(job *j, bool wrapped)
{
    size_t i;

    release_replies(j, wrapped);
    for (i = 0; i < SLUICE_MAX_RULES; i++)
        sl_free(j->io[i].entries);
}

/* An integer from an integer, string or nil reply. */
static bool reply_int(const redisReply *r, int64_t *v)
{
    char *end;

    if (r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return true;
    }
    if (r->type == REDIS_REPLY_NIL) {
        *v = 0;
        return true;
    }
    if (r->type == REDIS_REPLY_STRING) {
        *v = strtoll(r->str, &end, 10);
        return end != r->str && *end == '\0';
    }
    return false;
}

/* Log entries from ZRANGE ... WITHSCORES, without our own member. */
static bool read_log(rule_io *io, const redisReply *r, size_t *count)
{
    size_t i, n = 0;

    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
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
        if (io->member[0] != '\0' && strcmp(m->str, io->member) == 0)
            continue;
        colon = strchr(m->str, ':');
        if (colon == NULL)
            return false;
        io->entries[n].x = strtoll(s->str, NULL, 10);
        io->entries[n].cost = strtoll(colon + 1, NULL, 10);
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

/* A bucket's state: nil, or what sl_bucket_pack wrote. */
static bool read_bucket(const redisReply *r, sl_state_view *s, int64_t *keep)
{
    if (r->type == REDIS_REPLY_NIL)
        return true;
    s->has = true;
    return r->type == REDIS_REPLY_STRING &&
           sl_bucket_unpack(r->str, r->len, &s->x, &s->d, keep);
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

/* Turns a job's replies into views of the state before the request. */
static sluice_status parse_views(sl_plain *p, job *j, char *err, size_t err_len)
{
    const sluice_ruleset *rs = j->rq->rules;
    size_t i, at = 0;
    bool ok = true;

    for (i = 0; i < rs->count && ok; i++) {
        const sluice_rule *r = &rs->rules[i];
        sl_state_view *s = &j->views[i];
        rule_io *io = &j->io[i];
        redisReply **rep = j->reps + at;

        memset(s, 0, sizeof(*s));
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            if (j->mode == JOB_READ) {
                if (r->algorithm == SLUICE_SLIDING)
                    ok = reply_int(*rep++, &s->prev);
                ok = ok && reply_int(*rep, &s->cur);
                at += r->algorithm == SLUICE_SLIDING ? 2 : 1;
            } else {
                ok = reply_int(rep[1], &s->cur) &&
                     s->cur > INT64_MIN + j->rq->cost;
                s->cur -= ok ? j->rq->cost : 0;
                if (r->algorithm == SLUICE_SLIDING)
                    ok = ok && reply_int(rep[3], &s->prev);
                at += r->algorithm == SLUICE_SLIDING ? 4 : 3;
            }
            ok = ok && window_count(&s->cur, r) && window_count(&s->prev, r);
            break;
        case SLUICE_LOG:
            ok = read_log(io, rep[j->mode == JOB_READ ? 0 : 1], &s->n);
            s->entries = io->entries;
            at += j->mode == JOB_READ ? 1 : 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            ok = read_bucket(rep[0], s, &io->keep);
            at += 1;
            break;
        }
    }
    if (!ok) {
        sl_errf(err, err_len,
                "%s: unexpected data under the keys of this "
                "request; is another program using the key prefix \"%s\"?",
                p->name, p->url->prefix);
        return SLUICE_EPROTO;
    }
    return SLUICE_OK;
}

/* Log entries (others', oldest first) stamped at or before upto. */
static size_t log_dead(const sl_state_view *s, int64_t upto)
{
    size_t n = 0;

    while (n < s->n && s->entries[n].x <= upto)
        n++;
    return n;
}

/* Appends the removal of the log's entries stamped at or before upto. */
static size_t append_prune(sl_plain *p, const char *key, size_t kl,
                           int64_t upto)
{
    APPEND(p, "ZREMRANGEBYSCORE %b -inf %lld", key, kl, (long long)upto);
    return 1;
}

/* Appends what takes back an optimistic charge that was denied. */
static size_t append_compensation(sl_plain *p, job *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        rule_io *io = &j->io[i];

        kl = rule_key(p, j->rq, r, is_window(r), io->k, key);
        if (is_window(r)) {
            /* PEXPIRE too: should the key have expired meanwhile, DECRBY
             * would have created it without a TTL. */
            APPEND(p, "DECRBY %b %lld", key, kl, (long long)j->rq->cost);
            APPEND(p, "PEXPIRE %b %lld", key, kl, (long long)io->ttl);
            n += 2;
        } else if (r->algorithm == SLUICE_LOG) {
            const sl_state_view *s = &j->views[i];

            APPEND(p, "ZREM %b %s", key, kl, io->member);
            n++;
            /* Dead for everyone: below the newest charge minus P. Not
             * below t - P: this request charged nothing. */
            if (s->n > 0 &&
                log_dead(s, s->entries[s->n - 1].x - r->period_ms) > 0)
                n += append_prune(p, key, kl,
                                  s->entries[s->n - 1].x - r->period_ms);
        }
    }
    return n;
}

/* Appends a log entry of cost at stamp x, under a new member, and the
 * key's TTL. */
static void append_log_entry(sl_plain *p, const char *key, size_t kl, int64_t x,
                             int64_t cost, long long ttl)
{
    char member[64];

    log_member(p, x, cost, member, sizeof(member));
    APPEND(p, "ZADD %b %lld %s", key, kl, (long long)x, member);
    APPEND(p, "PEXPIRE %b %lld", key, kl, ttl);
}

/* After an admitted charge: a late log entry is stamped with the newest
 * time, so ours is re-stamped; and entries that died before our stamp are
 * pruned when that is due (see the top of the file). */
static size_t append_restamp(sl_plain *p, job *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl, dead;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        const sl_state_view *s = &j->views[i];
        int64_t upto = j->ch[i].x - r->period_ms;
        bool late = j->ch[i].x != j->rq->now_ms;

        if (r->algorithm != SLUICE_LOG)
            continue;
        dead = log_dead(s, upto);
        if (!late && (dead < PRUNE_MIN || dead < s->n - dead))
            continue;
        kl = rule_key(p, j->rq, r, false, 0, key);
        if (late) {
            APPEND(p, "ZREM %b %s", key, kl, j->io[i].member);
            append_log_entry(
                p, key, kl, j->ch[i].x, j->rq->cost,
                (long long)with_floor(p, sl_ttl_after_charge(r, &j->v[i])));
            n += 3;
        }
        if (dead > 0)
            n += append_prune(p, key, kl, upto);
    }
    return n;
}

/* Reads n replies of a follow-up pipeline; the first failure wins. */
static sluice_status read_followup(sl_plain *p, size_t n, sluice_result *out,
                                   char *err, size_t err_len)
{
    size_t i;
    redisReply *r;
    sluice_status st;

    for (i = 0; i < n; i++) {
        if ((st = sl_conn_read(&p->conn, &r, err, err_len)) != SLUICE_OK)
            return st;
        if (out->status == SLUICE_OK)
            out->status = reply_status(p, r, err, err_len);
        freeReplyObject(r);
    }
    return SLUICE_OK;
}

/* Appends the writes of a watched acquire that was admitted. */
static size_t append_writes(sl_plain *p, job *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    char key[KEYBUF];
    size_t i, n = 0, kl;

    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        long long ttl =
            (long long)with_floor(p, sl_ttl_after_charge(r, &j->v[i]));

        kl = rule_key(p, j->rq, r, is_window(r), j->io[i].k, key);
        switch (r->algorithm) {
        case SLUICE_FIXED:
        case SLUICE_SLIDING:
            APPEND(p, "INCRBY %b %lld", key, kl, (long long)j->rq->cost);
            APPEND(p, "PEXPIRE %b %lld", key, kl, ttl);
            n += 2;
            break;
        case SLUICE_LOG:
            APPEND(p, "ZREMRANGEBYSCORE %b -inf %lld", key, kl,
                   (long long)(j->ch[i].x - r->period_ms));
            append_log_entry(p, key, kl, j->ch[i].x, j->rq->cost, ttl);
            n += 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA: {
            /* TTLs only grow: keep is the latest time any charge of the
             * state asked it to live until (a raised limit drains faster
             * than the rule that charged before). */
            char packed[SL_BUCKET_LEN];
            int64_t keep =
                sl_max64(j->io[i].keep,
                         j->rq->now_ms + sl_ttl_after_charge(r, &j->v[i]));

            sl_bucket_pack(packed, j->ch[i].x, j->ch[i].d, keep);
            APPEND(p, "SET %b %b PX %lld", key, kl, packed, sizeof(packed),
                   (long long)with_floor(p, keep - j->rq->now_ms));
            n += 1;
            break;
        }
        }
    }
    return n;
}

/* Appends WATCH of every key a watched request reads. */
static void append_watch(sl_plain *p, job *j)
{
    const sluice_ruleset *rs = j->rq->rules;
    const char *argv[1 + 2 * SLUICE_MAX_RULES];
    size_t lens[1 + 2 * SLUICE_MAX_RULES], i;
    char keys[2 * SLUICE_MAX_RULES][KEYBUF];
    int argc = 1;

    argv[0] = "WATCH";
    lens[0] = 5;
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        int64_t k, to_end;

        sl_window_locate(r, j->rq->now_ms, &k, &to_end);
        lens[argc] = rule_key(p, j->rq, r, is_window(r), k, keys[argc - 1]);
        argv[argc] = keys[argc - 1];
        argc++;
        if (r->algorithm == SLUICE_SLIDING) {
            lens[argc] = rule_key(p, j->rq, r, true, k - 1, keys[argc - 1]);
            argv[argc] = keys[argc - 1];
            argc++;
        }
    }
    sl_conn_append(&p->conn, argc, argv, lens, NULL, 0);
}

/* Sends UNWATCH first if a denied watched request left a WATCH behind. */
static sluice_status settle_unwatch(sl_plain *p, char *err, size_t err_len)
{
    redisReply *r;
    sluice_status st;

    if (!p->unwatch)
        return SLUICE_OK;
    p->unwatch = false;
    APPEND(p, "UNWATCH");
    if ((st = sl_conn_read(&p->conn, &r, err, err_len)) != SLUICE_OK)
        return st;
    freeReplyObject(r);
    return SLUICE_OK;
}

/* An acquire with a bucket rule: WATCH and read, decide here, then write
 * in MULTI/EXEC; a concurrent change aborts EXEC and we try again. */
static sluice_status decide_watched(sl_plain *p, job *j, sluice_result *out,
                                    char *err, size_t err_len)
{
    int attempt;
    sluice_status st;

    for (attempt = 0; attempt < WATCH_RETRIES; attempt++) {
        redisReply *r;
        size_t n;

        if ((st = settle_unwatch(p, err, err_len)) != SLUICE_OK)
            return st;
        append_watch(p, j);
        j->mode = JOB_READ;
        j->ncmds = append_block(p, j);
        if ((st = sl_conn_read(&p->conn, &r, err, err_len)) != SLUICE_OK)
            return st;
        out->status = reply_status(p, r, err, err_len);
        freeReplyObject(r);
        p->unwatch = true;
        if ((st = read_block(p, j, false, out, err, err_len)) != SLUICE_OK)
            return st;
        if (out->status == SLUICE_OK)
            out->status = parse_views(p, j, err, err_len);
        if (out->status != SLUICE_OK) {
            release_replies(j, false);
            return SLUICE_OK;
        }
        j->all = sl_decide(j->rq->rules, j->views, j->rq->now_ms, j->rq->cost,
                           j->v, j->ch);
        release_replies(j, false);
        sl_combine(j->rq->rules, j->v, out);
        if (!j->all)
            return SLUICE_OK; /* UNWATCH rides on the next request */
        APPEND(p, "MULTI");
        n = append_writes(p, j);
        APPEND(p, "EXEC");
        p->unwatch = false; /* EXEC ends the WATCH either way */
        /* MULTI's +OK and one +QUEUED a command, then EXEC's reply. */
        if ((st = read_followup(p, n + 1, out, err, err_len)) != SLUICE_OK)
            return st;
        if ((st = sl_conn_read(&p->conn, &r, err, err_len)) != SLUICE_OK)
            return st;
        if (r->type == REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return SLUICE_OK;
        }
        if (r->type != REDIS_REPLY_NIL && out->status == SLUICE_OK)
            out->status = reply_status(p, r, err, err_len);
        freeReplyObject(r);
        if (out->status != SLUICE_OK)
            return SLUICE_OK;
        out->status = SLUICE_OK; /* nil: a concurrent change; again */
    }
    out->status = SLUICE_ECONTENDED;
    sl_errf(err, err_len,
            "%s: the keys of this request changed under each "
            "of %d attempts; the key is too hot for WATCH (the Lua backend "
            "decides in one step)",
            p->name, WATCH_RETRIES);
    return SLUICE_OK;
}

/* A request's key and place in the batch, sorted to find repeats. */
typedef struct keyed {
    const void *key;
    size_t len, idx;
} keyed;

static int keyed_cmp(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c;

    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    if ((c = memcmp(a->key, b->key, a->len)) != 0)
        return c;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Sorts requests into waves: a request on a key that an earlier request
 * of the batch also uses waits for the next wave, so that it sees that
 * request's outcome, taken-back charges included. The wave of a request
 * is the number of earlier requests on its key: found by sorting (n log n;
 * comparing every pair took minutes for 100,000 requests). Returns the
 * number of waves, 0 when out of memory. */
static size_t assign_waves(const job *jobs, size_t n, size_t *waves)
{
    keyed *ks = sl_calloc(n, sizeof(*ks));
    size_t i, most = 0;

    if (ks == NULL)
        return 0;
    for (i = 0; i < n; i++)
        ks[i] = (keyed){jobs[i].rq->key, jobs[i].rq->key_len, i};
    qsort(ks, n, sizeof(*ks), keyed_cmp);
    for (i = 0; i < n; i++) {
        bool repeat = i > 0 && ks[i].len == ks[i - 1].len &&
                      memcmp(ks[i].key, ks[i - 1].key, ks[i].len) == 0;

        waves[ks[i].idx] = repeat ? waves[ks[i - 1].idx] + 1 : 0;
        if (waves[ks[i].idx] > most)
            most = waves[ks[i].idx];
    }
    sl_free(ks);
    return most + 1;
}

/* Classifies a request; false when it is refused outright. */
static bool classify(sl_plain *p, job *j, sluice_result *out, char *err,
                     size_t err_len)
{
    const sl_request *rq = j->rq;

    if (rq->op == SL_OP_RESET) {
        j->mode = JOB_RESET;
    } else if (has_bucket(rq->rules) && !p->multi) {
        out->status = SLUICE_EUNSUPPORTED;
        sl_errf(err, err_len,
                "%s: token and gcra need an atomic "
                "read-modify-write that a proxy's plain commands cannot "
                "give; use redis:// through the proxy (the Lua backend, one "
                "EVAL per decision)",
                p->name);
        return false;
    } else if (rq->op == SL_OP_PEEK) {
        j->mode = JOB_READ;
    } else if (has_bucket(rq->rules)) {
        j->watched = true;
    } else {
        j->mode = JOB_OPTIMISTIC;
    }
    return true;
}

/* Decides one wave: its pipelined blocks, the follow-ups of those that
 * need one, then its watched requests one at a time. */
static sluice_status decide_wave(sl_plain *p, job *jobs, const bool *in,
                                 size_t n, sluice_result *out, char *err,
                                 size_t err_len)
{
    size_t i, follow = 0;
    sluice_status st = SLUICE_OK;

    for (i = 0; i < n; i++) {
        job *j = &jobs[i];
        bool wrapped = p->multi && j->mode == JOB_OPTIMISTIC;

        if (!in[i] || j->watched)
            continue;
        if (wrapped)
            APPEND(p, "MULTI");
        j->ncmds = append_block(p, j);
        if (wrapped)
            APPEND(p, "EXEC");
    }
    for (i = 0; i < n && st == SLUICE_OK; i++) {
        job *j = &jobs[i];
        const sl_request *rq = j->rq;

        if (!in[i] || j->watched)
            continue;
        st = read_block(p, j, p->multi && j->mode == JOB_OPTIMISTIC, &out[i],
                        err, err_len);
        if (st != SLUICE_OK || out[i].status != SLUICE_OK ||
            j->mode == JOB_RESET)
            continue;
        out[i].status = parse_views(p, j, err, err_len);
        if (out[i].status != SLUICE_OK)
            continue;
        j->all =
            sl_decide(rq->rules, j->views, rq->now_ms, rq->cost, j->v, j->ch);
        sl_combine(rq->rules, j->v, &out[i]);
    }
    /* Only when needed: take back denied charges, re-stamp late log
     * entries. */
    for (i = 0; i < n && st == SLUICE_OK; i++) {
        job *j = &jobs[i];

        if (!in[i] || j->watched || j->mode != JOB_OPTIMISTIC ||
            out[i].status != SLUICE_OK)
            continue;
        j->nfollow = j->all ? append_restamp(p, j) : append_compensation(p, j);
        follow += j->nfollow;
    }
    for (i = 0; i < n && st == SLUICE_OK && follow > 0; i++) {
        job *j = &jobs[i];

        if (in[i] && !j->watched && j->mode == JOB_OPTIMISTIC &&
            out[i].status == SLUICE_OK)
            st = read_followup(p, j->nfollow, &out[i], err, err_len);
    }
    for (i = 0; i < n && st == SLUICE_OK; i++)
        if (in[i] && jobs[i].watched && out[i].status == SLUICE_OK)
            st = decide_watched(p, &jobs[i], &out[i], err, err_len);
    return st;
}

sluice_status sl_plain_decide(void *state, const sl_request *reqs, size_t n,
                              sluice_result *out, char *err, size_t err_len)
{
    sl_plain *p = state;
    job *jobs = NULL;
    size_t *waves = NULL, nwaves, w, i;
    bool *in = NULL;
    sluice_status st;

    if ((st = sl_conn_ensure(&p->conn, err, err_len)) != SLUICE_OK)
        return st;
    if ((st = settle_unwatch(p, err, err_len)) != SLUICE_OK)
        return st;
    jobs = sl_calloc(n, sizeof(*jobs));
    waves = sl_calloc(n, sizeof(*waves));
    in = sl_calloc(n, sizeof(*in));
    if (jobs == NULL || waves == NULL || in == NULL) {
        sl_errf(err, err_len, "%s: out of memory for %zu requests", p->name, n);
        st = SLUICE_ENOMEM;
        goto done;
    }
    for (i = 0; i < n; i++) {
        jobs[i].rq = &reqs[i];
        memset(&out[i], 0, sizeof(out[i]));
    }
    if ((nwaves = assign_waves(jobs, n, waves)) == 0) {
        sl_errf(err, err_len, "%s: out of memory for %zu requests", p->name, n);
        st = SLUICE_ENOMEM;
        goto done;
    }
    for (w = 0; w < nwaves && st == SLUICE_OK; w++) {
        for (i = 0; i < n; i++)
            in[i] =
                waves[i] == w && classify(p, &jobs[i], &out[i], err, err_len);
        st = decide_wave(p, jobs, in, n, out, err, err_len);
    }
    /* A proxy error can leave the connection half-used: start afresh. */
    for (i = 0; i < n && st == SLUICE_OK; i++)
        if (out[i].status == SLUICE_EIO || out[i].status == SLUICE_ETIMEOUT)
            sl_conn_close(&p->conn);
done:
    for (i = 0; jobs != NULL && i < n; i++)
        release_job(&jobs[i], p->multi && jobs[i].mode == JOB_OPTIMISTIC &&
                                  !jobs[i].watched);
    sl_free(jobs);
    sl_free(waves);
    sl_free(in);
    return st;
}

sluice_status sl_plain_open(const sl_url *url, bool multi, void **state,
                            char *err, size_t err_len)
{
    sl_plain *p;
    sluice_status st;
    const char *name = multi ? "multi" : "twemproxy";

    if (url->opts.server_clock) {
        sl_errf(err, err_len,
                "%s: clock=server needs TIME inside a script; "
                "use redis:// (the Lua backend) for the server's clock",
                name);
        return SLUICE_EUNSUPPORTED;
    }
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        sl_errf(err, err_len, "%s: out of memory", name);
        return SLUICE_ENOMEM;
    }
    p->url = url;
    p->name = name;
    p->multi = multi;
    /* Members must differ between handles: seed from pid, time, address. */
    p->nonce = ((uint64_t)getpid() << 40) ^ ((uint64_t)time(NULL) << 20) ^
               (uint64_t)(uintptr_t)p;
    sl_conn_init(&p->conn, &url->ep, &url->opts, name, NULL);
    st = sl_conn_ensure(&p->conn, err, err_len);
    if (st != SLUICE_OK && url->opts.fail == SLUICE_FAIL_ERROR) {
        sl_conn_close(&p->conn);
        sl_free(p);
        return st;
    }
    *state = p;
    return SLUICE_OK;
}

void sl_plain_close(void *state)
{
    sl_plain *p = state;

    if (p == NULL)
        return;
    sl_conn_close(&p->conn);
    sl_free(p);
}

uint64_t sl_plain_round_trips(void *state)
{
    return ((sl_plain *)state)->conn.round_trips;
}

/* The number of replies of one request's block (see append_block). */
static size_t block_replies(const sl_request *rq, bool read_mode)
{
    size_t i, n = 0;

    for (i = 0; i < rq->rules->count; i++) {
        switch (rq->rules->rules[i].algorithm) {
        case SLUICE_FIXED:
            n += read_mode ? 1 : 3;
            break;
        case SLUICE_SLIDING:
            n += read_mode ? 2 : 4;
            break;
        case SLUICE_LOG:
            n += read_mode ? 1 : 3;
            break;
        case SLUICE_TOKEN:
        case SLUICE_GCRA:
            n += 1; /* GET, read mode only */
            break;
        }
    }
    return n;
}

sluice_status sl_plain_decode(const sl_request *rq, bool read_mode,
                              redisReply **reps, size_t n, char *err,
                              size_t err_len)
{
    static const sl_url url = {.prefix = "sluice:"};
    sl_plain p = {.url = &url, .name = "decode"};
    job *j;
    sluice_status st;
    size_t i;

    if (!read_mode && has_bucket(rq->rules)) {
        sl_errf(err, err_len, "decode: buckets are never charged blindly");
        return SLUICE_EINVAL;
    }
    if (n != block_replies(rq, read_mode)) {
        sl_errf(err, err_len, "decode: %zu replies for a block of %zu", n,
                block_replies(rq, read_mode));
        return SLUICE_EINVAL;
    }
    if ((j = sl_calloc(1, sizeof(*j))) == NULL)
        return SLUICE_ENOMEM;
    j->rq = rq;
    j->mode = read_mode ? JOB_READ : JOB_OPTIMISTIC;
    j->reps = reps;
    j->ncmds = n;
    if (!read_mode)
        for (i = 0; i < rq->rules->count; i++)
            snprintf(j->io[i].member, sizeof(j->io[i].member), "%lld:%lld:0",
                     (long long)rq->now_ms, (long long)rq->cost);
    st = parse_views(&p, j, err, err_len);
    if (st == SLUICE_OK) {
        sluice_result out;

        j->all =
            sl_decide(rq->rules, j->views, rq->now_ms, rq->cost, j->v, j->ch);
        sl_combine(rq->rules, j->v, &out);
    }
    for (i = 0; i < SLUICE_MAX_RULES; i++)
        sl_free(j->io[i].entries);
    sl_free(j);
    return st;
}
