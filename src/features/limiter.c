/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.c - named limiters: rules stored in the backend under
 * "<prefix>lim:{K}:rules", and each client's state under "<prefix>lim:{K}"
 * with K = "<name length>:<name><client id>", so that neither meets a
 * plain key, the rules of a name sit in one slot, and a million clients
 * spread over every slot (docs/DESIGN.md, "Named limiters"). A handle
 * keeps what it read for rules_cache_ms; a decision by name is then one
 * round trip, and a change made elsewhere reaches it within that time. */
#include "features/limiter.h"

#include "call.h"
#include "net/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEEP SL_MAX_PERIOD_MS
#define CACHE_MS 1000

/* Rules that pass the check, for checking a request before its rules are
 * read. */
static const sluice_ruleset any_rules = {
    1, {{.algorithm = SLUICE_FIXED, .limit = 1, .period_ms = 1000}}};

static void limiters_free(sl_ext *e)
{
    sl_limiters *l = (sl_limiters *)e;

    pthread_mutex_destroy(&l->mu);
    sl_free(l->slot);
    sl_free(l->over);
    sl_free(l);
}

/* The handle's limiters, made on the first call by name (sl_handle_ext):
 * the handle knows nothing of them but the hook that frees them. */
static sl_ext *limiters_make(const sluice *sl)
{
    const sl_url *url = sl_handle_url(sl);
    sl_limiters *l = sl_calloc(1, sizeof(*l));

    if (l == NULL)
        return NULL;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        sl_free(l);
        return NULL;
    }
    l->ext.free = limiters_free;
    snprintf(l->prefix, sizeof(l->prefix), "%slim:", url->cfg.prefix);
    l->cache_ms =
        url->cfg.rules_cache_ms == 0 ? CACHE_MS : url->cfg.rules_cache_ms;
    return &l->ext;
}

/* The handle's limiters; NULL only before limiter_ready() succeeded. */
sl_limiters *sl_limiters_of(sluice *sl)
{
    return (sl_limiters *)sl_handle_ext(sl, limiters_make);
}

/* Every call by name begins here: the limiters made, or ENOMEM. */
static sluice_status limiter_ready(sluice *sl, char *err)
{
    if (sl_limiters_of(sl) != NULL)
        return SLUICE_OK;
    sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
    return SLUICE_ENOMEM;
}

/* A blocking request checked and prepared. */
static sluice_status check(sluice *sl, sl_op op, const void *key,
                           size_t key_len, const sluice_ruleset *rules,
                           int64_t cost, sl_request *r, char *err)
{
    sluice_status st = sl_call_blocking(sl, err);

    if (st != SLUICE_OK)
        return st;
    return sl_call_prepare(sl, op, key, key_len, rules, cost, r, err);
}

/* K: "<name length>:<name><client>"; 0 when they are too long. */
size_t sl_limiter_compose(char *dst, const void *name, size_t name_len,
                          const void *client, size_t client_len)
{
    size_t n = (size_t)snprintf(dst, 24, "%zu:", name_len);

    memcpy(dst + n, name, name_len);
    if (client_len > 0)
        memcpy(dst + n + name_len, client, client_len);
    return n + name_len + client_len;
}

/* A name and client id within the caps, or EKEY/EINVAL with the message. */
static sluice_status check_name(const void *name, size_t name_len,
                                const void *client, size_t client_len,
                                char *err)
{
    if (name == NULL || name_len == 0) {
        sl_errf(err, SL_ERR_LEN, "limiter: the name is empty");
        return SLUICE_EKEY;
    }
    if (client == NULL && client_len > 0) {
        sl_errf(err, SL_ERR_LEN, "limiter: client is NULL, client_len %zu",
                client_len);
        return SLUICE_EINVAL;
    }
    if (name_len + client_len > SL_LIMITER_KEY_MAX) {
        sl_errf(err, SL_ERR_LEN,
                "limiter: the name (%zu bytes) and the client id (%zu bytes) "
                "take more than %d bytes together",
                name_len, client_len, SL_LIMITER_KEY_MAX);
        return SLUICE_EKEY;
    }
    return SLUICE_OK;
}

sluice_status sl_limiter_enter(sluice *sl, const void *name, size_t name_len,
                               const void *client, size_t client_len,
                               char **err)
{
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    *err = sl_share_err(sl);
    if ((st = limiter_ready(sl, *err)) != SLUICE_OK)
        return st;
    return check_name(name, name_len, client, client_len, *err);
}

/* What a read of the rules asks of the overrides: the override of
 * client (client_len 0: none asked), read into v. */
typedef struct over_ask {
    const char *client;
    size_t client_len;
    sl_value v;
} over_ask;

/* One stored op on name (so: its operands, so->read its result). */
sluice_status sl_limiter_stored_op(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, sl_stored *so, char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];
    size_t kl = sl_limiter_compose(key, name, name_len, NULL, 0);
    sl_request r;
    sluice_status st;

    st = check(sl, op, key, kl, NULL, 0, &r, err);
    if (st != SLUICE_OK)
        return st;
    r.prefix = sl_limiters_of(sl)->prefix;
    r.stored = *so;
    memset(so->read, 0, sizeof(*so->read));
    if (so->over != NULL)
        memset(so->over, 0, sizeof(*so->over));
    return sl_call_run(sl, &r, NULL, err);
}

/* One rules op on name: its result in *v (oa: the override asked too, or
 * NULL). */
static sluice_status rules_op(sluice *sl, sl_op op, const void *name,
                              size_t name_len, const char *value,
                              size_t value_len, int64_t ttl_ms, bool if_absent,
                              sl_value *v, over_ask *oa, char *err)
{
    sl_stored so = {value, value_len, if_absent, ttl_ms, v,
                    NULL,  0,         NULL,      NULL};

    if (oa != NULL && oa->client_len > 0) {
        so.client = oa->client;
        so.client_len = oa->client_len;
        so.over = &oa->v;
    }
    return sl_limiter_stored_op(sl, op, name, name_len, &so, err);
}

sluice_status sl_limiter_no_limiter(const void *name, size_t name_len,
                                    char *err)
{
    char q[300];

    sl_quote(q, sizeof(q), name, name_len);
    sl_errf(err, SL_ERR_LEN,
            "limiter \"%s\" has no rules stored: it was never defined, was "
            "deleted, or its keep-alive ran out unused",
            q);
    return SLUICE_ENOLIMITER;
}

/* A read of name's rules ended with *st and v (blocking or on the loop):
 * decodes them into rs and *keepalive, and caches them (none stored:
 * forgets them, SLUICE_ENOLIMITER). *sent is the keep-alive the read
 * sent; true when one more read must send the one read instead (unless
 * this read was the last allowed), *sent then set to it. */
static bool read_ended(sluice *sl, const void *name, size_t name_len,
                       sluice_status *st, const sl_value *v, bool last,
                       int64_t *sent, sluice_ruleset *rs, int64_t *keepalive,
                       const over_ask *oa, sluice_limiter_override *ov,
                       char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];
    size_t kl = sl_limiter_compose(key, name, name_len, NULL, 0);

    if (*st == SLUICE_OK && !v->found) {
        sl_lcache_put(sl_limiters_of(sl), name, name_len, NULL, 0, 0);
        sl_lcache_over_forget(sl_limiters_of(sl), key, kl, name_len);
        *st = sl_limiter_no_limiter(name, name_len, err);
    } else if (*st == SLUICE_OK) {
        *st = sl_limiter_decode(v, name, name_len, rs, keepalive, err);
    }
    if (*st == SLUICE_OK && oa != NULL && oa->client_len > 0)
        *st = sl_override_decode(&oa->v, name, name_len, ov, err);
    if (*st != SLUICE_OK)
        return false;
    if (!v->kept && !last && *keepalive != *sent) {
        *sent = *keepalive > 0 ? *keepalive : -1;
        return true;
    }
    sl_lcache_put(sl_limiters_of(sl), name, name_len, rs, *keepalive, v->overs);
    if (oa != NULL && oa->client_len > 0) {
        kl =
            sl_limiter_compose(key, name, name_len, oa->client, oa->client_len);
        sl_lcache_over_put(sl_limiters_of(sl), name_len, key, kl, ov);
    }
    return false;
}

/* Reads the rules of name, which starts their keep-alive again. known:
 * the keep-alive last read (-1: none read yet), which the plain backends
 * send with their GET since they cannot read it first. Where the value
 * says otherwise (the first read of a handle, or a set in between), they
 * are sent the keep-alive read, or told to take the TTL away, and read
 * once more: one round trip more, on those backends only. */
static sluice_status read_rules(sluice *sl, const void *name, size_t name_len,
                                int64_t known, sluice_ruleset *rs,
                                int64_t *keepalive, over_ask *oa,
                                sluice_limiter_override *ov, char *err)
{
    sl_value v;
    sluice_status st;
    int64_t sent = known > 0 ? known : 0;
    bool last = false;

    for (;;) {
        st = rules_op(sl, SL_OP_RULES_GET, name, name_len, NULL, 0, sent, false,
                      &v, oa, err);
        if (!read_ended(sl, name, name_len, &st, &v, last, &sent, rs, keepalive,
                        oa, ov, err))
            return st;
        last = true;
    }
}

/* The rules of name: cached if read within rules_cache_ms (unless fresh
 * is asked for), else read. */
sluice_status sl_limiter_rules_of(sluice *sl, const void *name, size_t name_len,
                                  bool fresh, sluice_ruleset *rs,
                                  int64_t *keepalive, char *err)
{
    int64_t known, overs;

    if (sl_lcache_rules(sl_limiters_of(sl), name, name_len, rs, &known,
                        &overs) &&
        !fresh) {
        *keepalive = known;
        return SLUICE_OK;
    }
    return read_rules(sl, name, name_len, known, rs, keepalive, NULL, NULL,
                      err);
}

/* The rules of name and the override of client (client_len 0: none),
 * cached if both were read within rules_cache_ms (unless fresh is asked
 * for), else read together in one round trip. */
sluice_status sl_limiter_rules_and_over(sluice *sl, const void *name,
                                        size_t name_len, const void *client,
                                        size_t client_len, bool fresh,
                                        sluice_ruleset *rs, int64_t *keepalive,
                                        sluice_limiter_override *ov, char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];
    over_ask *oa;
    int64_t known, overs = -1;
    sluice_status st;

    memset(ov, 0, sizeof(*ov));
    if (client_len == 0)
        return sl_limiter_rules_of(sl, name, name_len, fresh, rs, keepalive,
                                   err);
    /* Cached: the rules, and the client's override or none for any. */
    if (sl_lcache_rules(sl_limiters_of(sl), name, name_len, rs, &known,
                        &overs) &&
        !fresh &&
        (overs == 0 || sl_lcache_over(sl_limiters_of(sl), key,
                                      sl_limiter_compose(key, name, name_len,
                                                         client, client_len),
                                      ov))) {
        *keepalive = known;
        return SLUICE_OK;
    }
    if ((oa = sl_malloc(sizeof(*oa))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
        return SLUICE_ENOMEM;
    }
    oa->client = client;
    oa->client_len = client_len;
    st = read_rules(sl, name, name_len, known, rs, keepalive, oa, ov, err);
    sl_free(oa);
    return st;
}

static sluice_status store(sluice *sl, const void *name, size_t name_len,
                           const sluice_ruleset *rules, int64_t keepalive,
                           bool only_if_absent, sluice_ruleset *stored)
{
    char *err, value[SL_VALUE_MAX + 1];
    sluice_ruleset got;
    int64_t ka;
    sl_value v;
    sluice_status st;
    size_t len;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    if ((st = sluice_ruleset_check(rules, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    if (keepalive < 0 || keepalive > MAX_KEEP) {
        sl_errf(err, SL_ERR_LEN,
                "limiter: keepalive_ms %lld: expected 0 (none) to %lld",
                (long long)keepalive, (long long)MAX_KEEP);
        return SLUICE_EINVAL;
    }
    len = sl_limiter_encode(value, rules, keepalive);
    st = rules_op(sl, SL_OP_RULES_PUT, name, name_len, value, len, keepalive,
                  only_if_absent, &v, NULL, err);
    if (st != SLUICE_OK)
        return st;
    if (!v.found) /* deleted or expired at once: what was asked is gone */
        return sl_limiter_no_limiter(name, name_len, err);
    if ((st = sl_limiter_decode(&v, name, name_len, &got, &ka, err)) !=
        SLUICE_OK)
        return st;
    /* A define that found rules stored reads them, which starts their
     * keep-alive again; the plain backends are sent it with a read. */
    if (!v.kept && ka > 0 && (v.len != len || memcmp(v.buf, value, len) != 0))
        return read_rules(sl, name, name_len, ka, stored ? stored : &got, &ka,
                          NULL, NULL, err);
    sl_lcache_put(sl_limiters_of(sl), name, name_len, &got, ka, v.overs);
    if (stored != NULL)
        *stored = got;
    return SLUICE_OK;
}

sluice_status sluice_limiter_define(sluice *sl, const void *name,
                                    size_t name_len,
                                    const sluice_ruleset *rules,
                                    int64_t keepalive_ms,
                                    sluice_ruleset *stored)
{
    return store(sl, name, name_len, rules, keepalive_ms, true, stored);
}

sluice_status sluice_limiter_set(sluice *sl, const void *name, size_t name_len,
                                 const sluice_ruleset *rules,
                                 int64_t keepalive_ms)
{
    return store(sl, name, name_len, rules, keepalive_ms, false, NULL);
}

sluice_status sluice_limiter_get(sluice *sl, const void *name, size_t name_len,
                                 sluice_ruleset *rules, int64_t *keepalive_ms)
{
    char *err;
    sluice_ruleset got;
    int64_t ka;
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    if (rules == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: rules is NULL");
        return SLUICE_EINVAL;
    }
    if ((st = sl_limiter_rules_of(sl, name, name_len, true, &got, &ka, err)) !=
        SLUICE_OK)
        return st;
    *rules = got;
    if (keepalive_ms != NULL)
        *keepalive_ms = ka;
    return SLUICE_OK;
}

sluice_status sluice_limiter_delete(sluice *sl, const void *name,
                                    size_t name_len)
{
    char *err;
    sl_value v;
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    st = rules_op(sl, SL_OP_RULES_DEL, name, name_len, NULL, 0, 0, false, &v,
                  NULL, err);
    if (st != SLUICE_OK)
        return st;
    sl_lcache_put(sl_limiters_of(sl), name, name_len, NULL, 0, 0);
    {
        char key[32 + SL_LIMITER_KEY_MAX];

        sl_lcache_over_forget(sl_limiters_of(sl), key,
                              sl_limiter_compose(key, name, name_len, NULL, 0),
                              name_len);
    }
    return v.found ? SLUICE_OK : sl_limiter_no_limiter(name, name_len, err);
}

/* The answer to an allow- or deny-listed client (docs/SEMANTICS.md,
 * "Named limiters"): no rule decided, nothing counted; shadow mode admits
 * an acquire of a deny-listed client as it admits any denied acquire. */
static void listed(const sluice *sl, sl_op op, sluice_override_kind kind,
                   sluice_result *out)
{
    memset(out, 0, sizeof(*out));
    out->allowed = kind == SLUICE_OVERRIDE_UNLIMITED;
    out->status = out->allowed ? SLUICE_ALLOWLISTED : SLUICE_DENYLISTED;
    out->retry_after_ms = -1;
    if (!out->allowed && op == SL_OP_ACQUIRE && sl_handle_url(sl)->cfg.shadow) {
        out->allowed = true;
        out->status = SLUICE_SHADOWED;
    }
}

/* A decision by name: the rules and the client's override (cached or
 * read), then the request on the client's key, or the listed answer. */
static sluice_status by_name(sluice *sl, sl_op op, const void *name,
                             size_t name_len, const void *client,
                             size_t client_len, int64_t cost,
                             sluice_result *out)
{
    char *err, key[32 + SL_LIMITER_KEY_MAX];
    sluice_ruleset rs;
    sluice_limiter_override ov;
    sl_request r;
    sluice_status st;
    int64_t keepalive;

    if (client == NULL)
        client_len = 0;
    if ((st = sl_limiter_enter(sl, name, name_len, client, client_len, &err)) !=
        SLUICE_OK)
        return st;
    if (out == NULL && op != SL_OP_RESET) {
        sl_errf(err, SL_ERR_LEN, "out is NULL");
        return SLUICE_EINVAL;
    }
    st = sl_limiter_rules_and_over(sl, name, name_len, client, client_len,
                                   false, &rs, &keepalive, &ov, err);
    if (st != SLUICE_OK)
        return st;
    if (ov.kind == SLUICE_OVERRIDE_RULES)
        rs = ov.rules;
    if (op != SL_OP_RESET && (ov.kind == SLUICE_OVERRIDE_UNLIMITED ||
                              ov.kind == SLUICE_OVERRIDE_DENY)) {
        /* Bad input (the cost) is told as for any client. */
        st = check(sl, op, key,
                   sl_limiter_compose(key, name, name_len, client, client_len),
                   &rs, cost, &r, err);
        if (st != SLUICE_OK)
            return st;
        listed(sl, op, ov.kind, out);
        sl_call_count_answer(sl, op, out);
        return SLUICE_OK;
    }
    st = check(sl, op, key,
               sl_limiter_compose(key, name, name_len, client, client_len), &rs,
               cost, &r, err);
    if (st != SLUICE_OK)
        return st;
    r.prefix = sl_limiters_of(sl)->prefix;
    return sl_call_run(sl, &r, out, err);
}

sluice_status sluice_limiter_acquire(sluice *sl, const void *name,
                                     size_t name_len, const void *client,
                                     size_t client_len, int64_t cost,
                                     sluice_result *out)
{
    return by_name(sl, SL_OP_ACQUIRE, name, name_len, client, client_len, cost,
                   out);
}

sluice_status sluice_limiter_peek(sluice *sl, const void *name, size_t name_len,
                                  const void *client, size_t client_len,
                                  int64_t cost, sluice_result *out)
{
    return by_name(sl, SL_OP_PEEK, name, name_len, client, client_len, cost,
                   out);
}

sluice_status sluice_limiter_reset(sluice *sl, const void *name,
                                   size_t name_len, const void *client,
                                   size_t client_len)
{
    return by_name(sl, SL_OP_RESET, name, name_len, client, client_len, 1,
                   NULL);
}

/* ------------------------------------------------- on the caller's loop */

/* A decision by name whose rules are being read: what it needs then. */
typedef struct by_name_call {
    sluice *sl;
    sl_op op;
    int64_t cost;
    sluice_done_fn done;
    void *arg;
    int64_t sent;  /* the keep-alive sent with the read (read_rules) */
    int64_t began; /* when the call began: the read and decision share
                      its timeout_ms */
    bool again;    /* the second read */
    sl_value v;
    size_t name_len, key_len;
    char name[SL_LIMITER_KEY_MAX];
    char key[32 + SL_LIMITER_KEY_MAX]; /* K, with the client id */
    over_ask oa; /* the client's override, read with the rules */
} by_name_call;

static void rules_read(sluice *sl, void *arg, sluice_status st);

/* Starts the read of c's rules. */
static sluice_status read_async(by_name_call *c, char *err)
{
    char key[32 + SL_LIMITER_KEY_MAX];
    size_t kl = sl_limiter_compose(key, c->name, c->name_len, NULL, 0);
    sl_call_to to = {NULL, NULL, rules_read, c};
    sl_request r;
    sluice_status st;

    st = sl_call_prepare(c->sl, SL_OP_RULES_GET, key, kl, NULL, 0, &r, err);
    if (st != SLUICE_OK)
        return st;
    r.prefix = sl_limiters_of(c->sl)->prefix;
    r.stored.ttl_ms = c->sent;
    r.stored.read = &c->v;
    memset(&c->v, 0, sizeof(c->v));
    if (c->oa.client_len > 0) {
        r.stored.client = c->oa.client;
        r.stored.client_len = c->oa.client_len;
        r.stored.over = &c->oa.v;
        memset(&c->oa.v, 0, sizeof(c->oa.v));
    }
    return sl_call_start(c->sl, &r, c->began, 0, &to, err);
}

/* Starts the decision on the rules rs. */
static sluice_status decide_async(sluice *sl, sl_op op, const char *key,
                                  size_t key_len, const sluice_ruleset *rs,
                                  int64_t cost, int64_t began,
                                  sluice_done_fn done, void *arg, char *err)
{
    sl_call_to to = {done, NULL, NULL, arg};
    sl_request r;
    sluice_status st;

    st = sl_call_prepare(sl, op, key, key_len, rs, cost, &r, err);
    if (st != SLUICE_OK)
        return st;
    r.prefix = sl_limiters_of(sl)->prefix;
    return sl_call_start(sl, &r, began, 0, &to, err);
}

/* The rules were read (as read_rules does, blocking): the decision starts,
 * or the caller hears why not. */
static void rules_read(sluice *sl, void *arg, sluice_status st)
{
    by_name_call *c = arg;
    char *err = sl_share_err(sl);
    sluice_ruleset rs;
    sluice_limiter_override ov;
    sluice_result res;
    int64_t ka = 0;

    memset(&ov, 0, sizeof(ov));
    if (read_ended(sl, c->name, c->name_len, &st, &c->v, c->again, &c->sent,
                   &rs, &ka, &c->oa, &ov, err)) {
        c->again = true;
        if ((st = read_async(c, err)) == SLUICE_OK)
            return;
    } else if (st == SLUICE_OK && c->op != SL_OP_RESET &&
               (ov.kind == SLUICE_OVERRIDE_UNLIMITED ||
                ov.kind == SLUICE_OVERRIDE_DENY)) {
        listed(sl, c->op, ov.kind, &res);
        sl_call_count_answer(sl, c->op, &res);
        c->done(sl, c->arg, SLUICE_OK, &res, 1);
    } else if (st == SLUICE_OK) {
        if (ov.kind == SLUICE_OVERRIDE_RULES)
            rs = ov.rules;
        st = decide_async(sl, c->op, c->key, c->key_len, &rs, c->cost, c->began,
                          c->done, c->arg, err);
    }
    if (st != SLUICE_OK) {
        memset(&res, 0, sizeof(res));
        res.status = st;
        c->done(sl, c->arg, st, &res, 1);
    }
    sl_free(c);
}

static sluice_status by_name_async(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, const void *client,
                                   size_t client_len, int64_t cost,
                                   sluice_done_fn done, void *arg)
{
    char *err, key[32 + SL_LIMITER_KEY_MAX];
    sluice_ruleset rs;
    sluice_limiter_override ov;
    sl_request r;
    sluice_status st;
    by_name_call *c;
    size_t kl;
    int64_t known, overs = -1;

    if (client == NULL)
        client_len = 0;
    if ((st = sl_limiter_enter(sl, name, name_len, client, client_len, &err)) !=
        SLUICE_OK)
        return st;
    if (done == NULL) {
        sl_errf(err, SL_ERR_LEN, "done is NULL");
        return SLUICE_EINVAL;
    }
    kl = sl_limiter_compose(key, name, name_len, client, client_len);
    /* Cached: decided at once. An allow- or deny-listed client is
     * answered on the loop after a read (the loop answers only from the
     * backend): one round trip. */
    memset(&ov, 0, sizeof(ov));
    if (sl_lcache_rules(sl_limiters_of(sl), name, name_len, &rs, &known,
                        &overs) &&
        (client_len == 0 || overs == 0 ||
         (sl_lcache_over(sl_limiters_of(sl), key, kl, &ov) &&
          (ov.kind == SLUICE_OVERRIDE_NONE ||
           ov.kind == SLUICE_OVERRIDE_RULES || op == SL_OP_RESET)))) {
        if (ov.kind == SLUICE_OVERRIDE_RULES)
            rs = ov.rules;
        return decide_async(sl, op, key, kl, &rs, cost, 0, done, arg, err);
    }
    /* Bad input (the key, the cost) is returned now, before the rules are
     * read: checked with any valid rules in their place. */
    if ((st = sl_call_prepare(sl, op, key, kl, &any_rules, cost, &r, err)) !=
        SLUICE_OK)
        return st;
    if ((c = sl_calloc(1, sizeof(*c))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "out of memory");
        return SLUICE_ENOMEM;
    }
    c->sl = sl;
    c->op = op;
    c->cost = cost;
    c->done = done;
    c->arg = arg;
    c->sent = known > 0 ? known : 0;
    c->began = sl_mono_ms();
    c->name_len = name_len;
    memcpy(c->name, name, name_len);
    c->key_len = kl;
    memcpy(c->key, key, kl);
    c->oa.client = c->key + kl - client_len;
    c->oa.client_len = client_len;
    if ((st = read_async(c, err)) != SLUICE_OK)
        sl_free(c);
    return st;
}

sluice_status sluice_limiter_acquire_async(sluice *sl, const void *name,
                                           size_t name_len, const void *client,
                                           size_t client_len, int64_t cost,
                                           sluice_done_fn done, void *arg)
{
    return by_name_async(sl, SL_OP_ACQUIRE, name, name_len, client, client_len,
                         cost, done, arg);
}

sluice_status sluice_limiter_peek_async(sluice *sl, const void *name,
                                        size_t name_len, const void *client,
                                        size_t client_len, int64_t cost,
                                        sluice_done_fn done, void *arg)
{
    return by_name_async(sl, SL_OP_PEEK, name, name_len, client, client_len,
                         cost, done, arg);
}

sluice_status sluice_limiter_reset_async(sluice *sl, const void *name,
                                         size_t name_len, const void *client,
                                         size_t client_len, sluice_done_fn done,
                                         void *arg)
{
    return by_name_async(sl, SL_OP_RESET, name, name_len, client, client_len, 1,
                         done, arg);
}
