/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.c - the limiter admin calls, each a state machine of stored-rules
 * round trips written once (step), and its two drivers: blocking, each
 * round trip through the queue of threads sharing the handle
 * (sl_call_run), and on the caller's loop, each round trip an engine job
 * whose end runs the machine on (sl_call_stored_async). A call's round
 * trips share one budget, timeout_ms from its start; the fail policy
 * never answers for them: a failure is the call's status. */
#include "features/admin.h"

#include "features/names.h"
#include "features/registry.h"

#include <string.h>

#define MAX_KEEP SL_MAX_PERIOD_MS

typedef enum admin_state {
    ST_START,
    ST_READ,     /* the rules (and a client's override) read */
    ST_PUT,      /* the rules stored (define, set) */
    ST_DEL,      /* the rules deleted */
    ST_OVER_SET, /* an override stored */
    ST_OVER_DEL, /* an override deleted */
    ST_LIST,     /* a page of overrides read */
    ST_REG_ADD,  /* the name set in the list of names (registry.h) */
    ST_REG_MARK, /* the list's marker stored */
    ST_REG_DEL,  /* the name taken out of the list */
    ST_DONE
} admin_state;

/* What follows the list's ops: the rules' store, or the end of a store or
 * of a delete. */
typedef enum reg_then {
    THEN_PUT,
    THEN_PUT_END,
    THEN_DEL_END
} reg_then;

struct sl_admin {
    sluice *sl;
    sl_admin_op op;
    admin_state state;
    char key[32 + SL_LIMITER_KEY_MAX]; /* K: "<len>:<name><client>" */
    size_t kl, name_len, client_len;
    sluice_ruleset rules; /* define, set: to store; then what is stored */
    int64_t keepalive;
    sluice_limiter_override ov;   /* override set: to store */
    sluice_limiter_override read; /* override get: what was read */
    char value[SL_VALUE_MAX + 1]; /* the value stored */
    size_t value_len;
    sluice_override_fn each;
    void *each_arg;
    /* The round trip at hand, and what it read. */
    sl_request r;
    sluice_status sent_st;
    sl_value v, over;
    sl_over_page page;
    int64_t sent;  /* the keep-alive a read sends (names.h) */
    bool again;    /* the read is the second */
    bool ask_over; /* the read asks for the client's override too */
    bool found;
    /* The list of names kept around a store and a delete. */
    reg_then then;
    int reg_tries;
    sluice_ruleset got; /* a store: what it found stored, */
    int64_t got_ka;     /* its keep-alive, */
    int64_t got_overs;  /* its overrides' count, */
    bool reread;        /* and whether it is read again (put_done) */
    sluice_status st;   /* the call's, once done */
    char *msg;          /* the call's message: the thread's buffer (blocking)
                           or own_msg (on the loop) */
    /* On the loop. */
    char own_msg[SL_ERR_LEN];
    int64_t began;
    sluice_limiter_fn done;
    void *arg;
};

static const char *name_of(const sl_admin *a)
{
    return a->key + (a->kl - a->client_len - a->name_len);
}

static const char *client_of(const sl_admin *a)
{
    return a->key + (a->kl - a->client_len);
}

/* ------------------------------------------------------------- input */

static bool has_client(sl_admin_op op)
{
    return op == SL_ADMIN_OVER_SET || op == SL_ADMIN_OVER_GET ||
           op == SL_ADMIN_OVER_DEL;
}

/* The call's input checked; the message in err. */
static sluice_status check_in(const sl_admin_in *in, char *err)
{
    const sluice_limiter_override *ov = in->ov;
    sluice_status st;

    st =
        sl_names_check(in->name, in->name_len, in->client, in->client_len, err);
    if (st != SLUICE_OK)
        return st;
    if (has_client(in->op) && (in->client == NULL || in->client_len == 0)) {
        sl_errf(err, SL_ERR_LEN,
                "limiter: an override needs a client id of 1 byte or more");
        return SLUICE_EKEY;
    }
    switch (in->op) {
    case SL_ADMIN_DEFINE:
    case SL_ADMIN_SET:
        if ((st = sluice_ruleset_check(in->rules, err, SL_ERR_LEN)) !=
            SLUICE_OK)
            return st;
        if (in->keepalive_ms < 0 || in->keepalive_ms > MAX_KEEP) {
            sl_errf(err, SL_ERR_LEN,
                    "limiter: keepalive_ms %lld: expected 0 (none) to %lld",
                    (long long)in->keepalive_ms, (long long)MAX_KEEP);
            return SLUICE_EINVAL;
        }
        return SLUICE_OK;
    case SL_ADMIN_OVER_SET:
        if (ov == NULL) {
            sl_errf(err, SL_ERR_LEN, "limiter: ov is NULL");
            return SLUICE_EINVAL;
        }
        if (ov->kind != SLUICE_OVERRIDE_RULES &&
            ov->kind != SLUICE_OVERRIDE_UNLIMITED &&
            ov->kind != SLUICE_OVERRIDE_DENY) {
            sl_errf(err, SL_ERR_LEN,
                    "limiter: override kind %d: expected SLUICE_OVERRIDE_RULES "
                    "(%d), _UNLIMITED (%d) or _DENY (%d)",
                    (int)ov->kind, (int)SLUICE_OVERRIDE_RULES,
                    (int)SLUICE_OVERRIDE_UNLIMITED, (int)SLUICE_OVERRIDE_DENY);
            return SLUICE_EINVAL;
        }
        if (ov->kind == SLUICE_OVERRIDE_RULES)
            return sluice_ruleset_check(&ov->rules, err, SL_ERR_LEN);
        return SLUICE_OK;
    case SL_ADMIN_OVER_LIST:
        if (in->each == NULL) {
            sl_errf(err, SL_ERR_LEN,
                    "limiter: the callback for each override is NULL");
            return SLUICE_EINVAL;
        }
        return SLUICE_OK;
    case SL_ADMIN_GET:
    case SL_ADMIN_DELETE:
    case SL_ADMIN_OVER_GET:
    case SL_ADMIN_OVER_DEL:
        return SLUICE_OK;
    }
    return SLUICE_OK;
}

/* A call's state for in (checked), its input copied; NULL on ENOMEM. */
static sl_admin *new_admin(sluice *sl, const sl_admin_in *in)
{
    sl_admin *a = sl_calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->sl = sl;
    a->op = in->op;
    a->state = ST_START;
    a->name_len = in->name_len;
    a->client_len = has_client(in->op) ? in->client_len : 0;
    a->kl = sl_names_compose(a->key, in->name, in->name_len, in->client,
                             a->client_len);
    if (in->rules != NULL)
        a->rules = *in->rules;
    a->keepalive = in->keepalive_ms;
    if (in->ov != NULL)
        a->ov = *in->ov;
    a->each = in->each;
    a->each_arg = in->each_arg;
    return a;
}

static void free_admin(sl_admin *a)
{
    sl_free(a->page.buf);
    sl_free(a);
}

/* ------------------------------------------------------------- steps */

/* The call ends with st. */
static bool finish(sl_admin *a, sluice_status st)
{
    a->st = st;
    a->state = ST_DONE;
    return false;
}

/* The next round trip: op on the name's key, its read into a->v; next is
 * the state that takes its answer. */
static bool send(sl_admin *a, sl_op op, admin_state next)
{
    sluice_status st = sl_call_prepare(a->sl, op, a->key, a->kl - a->client_len,
                                       NULL, 0, &a->r, a->msg);

    if (st != SLUICE_OK)
        return finish(a, st);
    a->r.prefix = sl_handle_names(a->sl)->prefix;
    a->r.stored.read = &a->v;
    memset(&a->v, 0, sizeof(a->v));
    a->state = next;
    return true;
}

/* The next round trip on the list of names (registry.h): op on its K,
 * with the name as the field; its read into a->v. */
static bool send_reg(sl_admin *a, sl_op op, admin_state next)
{
    sluice_status st = sl_call_prepare(
        a->sl, op, SL_REGISTRY_K, SL_REGISTRY_K_LEN, NULL, 0, &a->r, a->msg);

    if (st != SLUICE_OK)
        return finish(a, st);
    a->r.prefix = sl_handle_names(a->sl)->prefix;
    a->r.stored.read = &a->v;
    memset(&a->v, 0, sizeof(a->v));
    a->state = next;
    if (op == SL_OP_RULES_PUT) { /* the marker, once */
        a->r.stored.value = SL_REGISTRY_MARKER;
        a->r.stored.value_len = sizeof(SL_REGISTRY_MARKER) - 1;
        a->r.stored.if_absent = true;
        return true;
    }
    a->r.stored.client = name_of(a);
    a->r.stored.client_len = a->name_len;
    if (op == SL_OP_OVER_SET) {
        a->r.stored.value = SL_LIMITER_MAGIC;
        a->r.stored.value_len = SL_LIMITER_MAGIC_LEN;
    }
    return true;
}

/* The name listed, then what then says. */
static bool reg_add(sl_admin *a, reg_then then)
{
    a->then = then;
    a->reg_tries = 0;
    return send_reg(a, SL_OP_OVER_SET, ST_REG_ADD);
}

static bool reg_del(sl_admin *a, reg_then then)
{
    a->then = then;
    return send_reg(a, SL_OP_OVER_DEL, ST_REG_DEL);
}

/* The rules' read (with the client's override when ask_over), sending
 * the keep-alive a->sent. */
static bool read_rules(sl_admin *a)
{
    if (!send(a, SL_OP_RULES_GET, ST_READ))
        return false;
    a->r.stored.ttl_ms = a->sent;
    if (a->ask_over) {
        a->r.stored.client = client_of(a);
        a->r.stored.client_len = a->client_len;
        a->r.stored.over = &a->over;
        memset(&a->over, 0, sizeof(a->over));
    }
    return true;
}

/* A read from the backend, not the cache: the keep-alive the handle read
 * last is what the plain backends send with it (limiter.c, names.h). */
static bool start_read(sl_admin *a, bool ask_over)
{
    sluice_ruleset rs;
    int64_t known, overs;

    (void)sl_lcache_rules(sl_handle_names(a->sl), name_of(a), a->name_len, -1,
                          &rs, &known, &overs);
    a->sent = known > 0 ? known : 0;
    a->again = false;
    a->ask_over = ask_over;
    return read_rules(a);
}

static bool store_override(sl_admin *a)
{
    a->value_len = sl_override_encode(a->value, &a->ov);
    if (!send(a, SL_OP_OVER_SET, ST_OVER_SET))
        return false;
    a->r.stored.value = a->value;
    a->r.stored.value_len = a->value_len;
    a->r.stored.ttl_ms = a->keepalive; /* the rules', read just now */
    a->r.stored.client = client_of(a);
    a->r.stored.client_len = a->client_len;
    return true;
}

static bool list_page(sl_admin *a)
{
    if (!send(a, SL_OP_OVER_LIST, ST_LIST))
        return false;
    a->page.n = 0;
    a->page.len = 0;
    a->r.stored.page = &a->page;
    return true;
}

static bool put_rules(sl_admin *a)
{
    a->value_len = sl_limiter_encode(a->value, &a->rules, a->keepalive);
    if (!send(a, SL_OP_RULES_PUT, ST_PUT))
        return false;
    a->r.stored.value = a->value;
    a->r.stored.value_len = a->value_len;
    a->r.stored.if_absent = a->op == SL_ADMIN_DEFINE;
    a->r.stored.ttl_ms = a->keepalive;
    return true;
}

static bool start(sl_admin *a)
{
    switch (a->op) {
    case SL_ADMIN_DEFINE:
    case SL_ADMIN_SET:
        /* Rules without a keep-alive are listed first: a name listed
         * without rules is skipped by a list, rules stored without their
         * name would be missed (registry.h). */
        return a->keepalive == 0 ? reg_add(a, THEN_PUT) : put_rules(a);
    case SL_ADMIN_GET:
    case SL_ADMIN_OVER_SET: /* the rules first: their keep-alive is the
                               hash's */
        return start_read(a, false);
    case SL_ADMIN_OVER_GET:
        return start_read(a, true);
    case SL_ADMIN_DELETE:
        return send(a, SL_OP_RULES_DEL, ST_DEL);
    case SL_ADMIN_OVER_DEL:
        if (!send(a, SL_OP_OVER_DEL, ST_OVER_DEL))
            return false;
        a->r.stored.client = client_of(a);
        a->r.stored.client_len = a->client_len;
        return true;
    case SL_ADMIN_OVER_LIST:
        strcpy(a->page.cursor, "0");
        return list_page(a);
    }
    return finish(a, SLUICE_EINVAL);
}

static bool read_done(sl_admin *a)
{
    sl_limiters *l = sl_handle_names(a->sl);
    sluice_status st = a->sent_st;
    size_t cl = a->ask_over ? a->client_len : 0;
    sluice_limiter_override ov;

    if (sl_names_read_ended(l, name_of(a), a->name_len, a->key,
                            a->kl - a->client_len + cl, cl, &st, &a->v,
                            a->ask_over ? &a->over : NULL, a->again, true,
                            &a->sent, &a->rules, &a->keepalive, &ov, a->msg)) {
        a->again = true;
        return read_rules(a);
    }
    if (st != SLUICE_OK)
        return finish(a, st);
    if (a->op == SL_ADMIN_OVER_SET)
        return store_override(a);
    if (a->op == SL_ADMIN_OVER_GET) {
        a->read = ov;
        a->found = ov.kind != SLUICE_OVERRIDE_NONE;
    } else {
        a->found = true;
    }
    return finish(a, SLUICE_OK);
}

static bool put_end(sl_admin *a);
static bool del_end(sl_admin *a);

static bool put_done(sl_admin *a)
{
    sluice_status st = a->sent_st;

    if (st != SLUICE_OK)
        return finish(a, st);
    if (!a->v.found) /* deleted or expired at once: what was asked is gone */
        return finish(a, sl_names_none(name_of(a), a->name_len, a->msg));
    st = sl_limiter_decode(&a->v, name_of(a), a->name_len, &a->got, &a->got_ka,
                           a->msg);
    if (st != SLUICE_OK)
        return finish(a, st);
    /* A define that found rules stored reads them, which starts their
     * keep-alive again; the plain backends are sent it with a read. */
    a->reread = !a->v.kept && a->got_ka > 0 &&
                (a->v.len != a->value_len ||
                 memcmp(a->v.buf, a->value, a->value_len) != 0);
    a->got_overs = a->v.overs;
    /* Listed exactly when the keep-alive stored is 0: a define with one
     * that found rules without one (listed again, if a crash or a race
     * left them out); a keep-alive stored where the name may be listed
     * (asked for none and found one, or rules without one replaced). */
    if (a->got_ka == 0 && a->keepalive > 0)
        return reg_add(a, THEN_PUT_END);
    if (a->got_ka > 0 && (a->keepalive == 0 || a->op == SL_ADMIN_SET))
        return reg_del(a, THEN_PUT_END);
    return put_end(a);
}

static bool put_end(sl_admin *a)
{
    if (a->reread) {
        a->sent = a->got_ka;
        a->again = false;
        a->ask_over = false;
        return read_rules(a);
    }
    sl_lcache_put(sl_handle_names(a->sl), name_of(a), a->name_len, &a->got,
                  a->got_ka, a->got_overs);
    a->rules = a->got;
    a->keepalive = a->got_ka;
    a->found = true;
    return finish(a, SLUICE_OK);
}

static bool del_done(sl_admin *a)
{
    if (a->sent_st != SLUICE_OK)
        return finish(a, a->sent_st);
    a->found = a->v.found;
    /* Unlisted after: also a name whose rules were gone already (its
     * keep-alive ran out), so that a delete clears what a list shows. */
    return reg_del(a, THEN_DEL_END);
}

static bool del_end(sl_admin *a)
{
    sl_limiters *l = sl_handle_names(a->sl);

    sl_lcache_put(l, name_of(a), a->name_len, NULL, 0, 0);
    sl_lcache_over_forget(l, a->key, a->kl - a->client_len, a->name_len);
    return finish(a, a->found ? SLUICE_OK
                              : sl_names_none(name_of(a), a->name_len, a->msg));
}

/* An op on the list of names answered. */
static bool reg_done(sl_admin *a)
{
    if (a->sent_st != SLUICE_OK)
        return finish(a, a->sent_st);
    if (a->state == ST_REG_MARK) /* the marker there: the name again */
        return send_reg(a, SL_OP_OVER_SET, ST_REG_ADD);
    /* No marker yet (a new prefix), or none any more (a FLUSHALL, an
     * eviction): it is stored, and the name set again. */
    if (a->state == ST_REG_ADD && !a->v.found) {
        if (++a->reg_tries < 2)
            return send_reg(a, SL_OP_RULES_PUT, ST_REG_MARK);
        sl_errf(a->msg, SL_ERR_LEN,
                "limiter: the list of names could not be kept: its marker "
                "disappeared as soon as stored (an eviction policy?)");
        return finish(a, SLUICE_ESERVER);
    }
    switch (a->then) {
    case THEN_PUT:
        return put_rules(a);
    case THEN_PUT_END:
        return put_end(a);
    case THEN_DEL_END:
        return del_end(a);
    }
    return finish(a, SLUICE_EINVAL);
}

/* An override stored or deleted (ok or not): the handle's cache of it
 * forgotten, its next decision reads it. */
static bool over_done(sl_admin *a)
{
    sl_limiters *l = sl_handle_names(a->sl);

    if (a->state == ST_OVER_SET)
        sl_lcache_overs_changed(l, name_of(a), a->name_len);
    sl_lcache_over_put(l, a->name_len, a->key, a->kl, NULL);
    if (a->sent_st != SLUICE_OK)
        return finish(a, a->sent_st);
    a->found = a->v.found;
    if (a->state == ST_OVER_SET && !a->found)
        return finish(a, sl_names_none(name_of(a), a->name_len, a->msg));
    return finish(a, SLUICE_OK);
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
           (uint32_t)u[3] << 24;
}

/* Calls each for every entry of the page read; false when it said stop,
 * or *st. */
static bool page_each(sl_admin *a, sluice_status *st)
{
    const sl_over_page *page = &a->page;
    sluice_limiter_override ov;
    sl_value *v = &a->over; /* free while listing */
    size_t o = 0, i, cl;
    bool go = true;

    for (i = 0; i < page->n && go; i++) {
        const char *client = page->buf + o + 4;

        cl = get32(page->buf + o);
        o += 4 + cl;
        v->found = true;
        v->len = get32(page->buf + o);
        if (v->len > SL_VALUE_MAX) { /* the backends keep to it */
            sl_errf(a->msg, SL_ERR_LEN, "limiter: an override of %zu bytes",
                    v->len);
            *st = SLUICE_EPROTO;
            return false;
        }
        memcpy(v->buf, page->buf + o + 4, v->len);
        o += 4 + v->len;
        if ((*st = sl_override_decode(v, name_of(a), a->name_len, &ov,
                                      a->msg)) != SLUICE_OK)
            go = false;
        else if (a->each(a->each_arg, client, cl, &ov) != 0)
            go = false;
    }
    return go;
}

static bool list_done(sl_admin *a)
{
    sluice_status st = SLUICE_OK;

    if (a->sent_st != SLUICE_OK)
        return finish(a, a->sent_st);
    if (!page_each(a, &st) || strcmp(a->page.cursor, "0") == 0)
        return finish(a, st);
    return list_page(a);
}

/* Moves a on: true when a->r is to be sent (its status then in
 * a->sent_st, and a step again), false once the call is done (a->st). */
static bool step(sl_admin *a)
{
    switch (a->state) {
    case ST_START:
        return start(a);
    case ST_READ:
        return read_done(a);
    case ST_PUT:
        return put_done(a);
    case ST_DEL:
        return del_done(a);
    case ST_OVER_SET:
    case ST_OVER_DEL:
        return over_done(a);
    case ST_LIST:
        return list_done(a);
    case ST_REG_ADD:
    case ST_REG_MARK:
    case ST_REG_DEL:
        return reg_done(a);
    case ST_DONE:
        return false;
    }
    return false;
}

/* What the call read, for its caller. */
static void fill_info(const sl_admin *a, sluice_limiter_info *info)
{
    memset(info, 0, sizeof(*info));
    info->struct_size = sizeof(*info);
    info->name = name_of(a);
    info->name_len = a->name_len;
    if (a->client_len > 0) {
        info->client = client_of(a);
        info->client_len = a->client_len;
    }
    info->found = a->found;
    if (a->st != SLUICE_OK)
        return;
    if (a->op == SL_ADMIN_DEFINE || a->op == SL_ADMIN_SET ||
        a->op == SL_ADMIN_GET) {
        info->rules = a->rules;
        info->keepalive_ms = a->keepalive;
    } else if (a->op == SL_ADMIN_OVER_GET) {
        info->override = a->read;
    } else if (a->op == SL_ADMIN_OVER_SET) {
        info->override = a->ov;
    }
}

/* ---------------------------------------------------------- blocking */

sluice_status sl_admin_call(sluice *sl, const sl_admin_in *in,
                            sluice_limiter_info *info)
{
    sl_admin *a;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = check_in(in, err)) != SLUICE_OK ||
        (st = sl_call_blocking(sl, err)) != SLUICE_OK)
        return st;
    if ((a = new_admin(sl, in)) == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
        return SLUICE_ENOMEM;
    }
    a->msg = err;
    while (step(a))
        a->sent_st = sl_call_run(sl, &a->r, NULL, err);
    st = a->st;
    if (info != NULL)
        fill_info(a, info);
    free_admin(a);
    return st;
}

/* ----------------------------------------------------------- the loop */

static void sent(sluice *sl, void *arg, sluice_status st);

/* The call is done: its message where sluice_errmsg() reads it, then the
 * caller's callback. */
static void answer(sl_admin *a)
{
    sluice_limiter_info info;

    fill_info(a, &info);
    memcpy(sl_share_err(a->sl), a->msg, SL_ERR_LEN);
    a->done(a->sl, a->arg, a->st, &info);
    free_admin(a);
}

/* A round trip ended: the machine goes on from the loop. */
static void sent(sluice *sl, void *arg, sluice_status st)
{
    sl_admin *a = arg;

    (void)sl;
    a->sent_st = st;
    while (step(a)) {
        st = sl_call_stored_async(a->sl, &a->r, a->began, sent, a, a->msg);
        if (st == SLUICE_OK)
            return;
        a->sent_st = st; /* not sent (the handle closes): its failure */
    }
    answer(a);
}

sluice_status sl_admin_call_async(sluice *sl, const sl_admin_in *in,
                                  sluice_limiter_fn done, void *arg)
{
    sl_admin *a;
    sluice_status st;
    char *err;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if ((st = sl_call_ready(sl, done != NULL, err)) != SLUICE_OK ||
        (st = check_in(in, err)) != SLUICE_OK)
        return st;
    if ((a = new_admin(sl, in)) == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
        return SLUICE_ENOMEM;
    }
    a->msg = a->own_msg;
    a->done = done;
    a->arg = arg;
    a->began = sl_mono_ms();
    /* Answered at once (bad time from the clock): from the loop all the
     * same, after a round trip of nothing. */
    st = sl_call_stored_async(sl, step(a) ? &a->r : NULL, a->began, sent, a,
                              a->msg);
    if (st != SLUICE_OK) {
        memcpy(err, a->msg, SL_ERR_LEN);
        free_admin(a);
    }
    return st;
}
