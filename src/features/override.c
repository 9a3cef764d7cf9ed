/* SPDX-License-Identifier: BSD-3-Clause */
/* override.c - overrides of named limiters: a client's own rules, an
 * allow-list or a deny-list entry, stored in the hash beside the limiter's
 * rules ("<prefix>lim:{K}:over"), and the calls that set, read, delete
 * and list them; limiter.c reads a client's override with the rules. */
#include "call.h"
#include "features/limiter.h"

#include <stdio.h>
#include <string.h>

/* The head of a call on a client's override: a client id of 1 byte or
 * more, besides what sl_limiter_enter checks. */
static sluice_status enter_client(sluice *sl, const void *name, size_t name_len,
                                  const void *client, size_t client_len,
                                  char **err)
{
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, client, client_len, err)) !=
        SLUICE_OK)
        return st;
    if (client == NULL || client_len == 0) {
        sl_errf(*err, SL_ERR_LEN,
                "limiter: an override needs a client id of 1 byte or more");
        return SLUICE_EKEY;
    }
    return SLUICE_OK;
}

sluice_status sluice_limiter_override_set(sluice *sl, const void *name,
                                          size_t name_len, const void *client,
                                          size_t client_len,
                                          const sluice_limiter_override *ov)
{
    char *err, value[SL_VALUE_MAX + 1], key[32 + SL_LIMITER_KEY_MAX];
    sl_stored so;
    sluice_ruleset rs;
    int64_t ka;
    sl_value v;
    sluice_status st;

    st = enter_client(sl, name, name_len, client, client_len, &err);
    if (st != SLUICE_OK)
        return st;
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
    if (ov->kind == SLUICE_OVERRIDE_RULES &&
        (st = sluice_ruleset_check(&ov->rules, err, SL_ERR_LEN)) != SLUICE_OK)
        return st;
    /* The rules read first: their keep-alive is the hash's. */
    if ((st = sl_limiter_rules_of(sl, name, name_len, true, &rs, &ka, err)) !=
        SLUICE_OK)
        return st;
    memset(&so, 0, sizeof(so));
    so.value = value;
    so.value_len = sl_override_encode(value, ov);
    so.ttl_ms = ka;
    so.read = &v;
    so.client = client;
    so.client_len = client_len;
    st = sl_limiter_stored_op(sl, SL_OP_OVER_SET, name, name_len, &so, err);
    sl_lcache_overs_changed(sl_handle_names(sl), name, name_len);
    sl_lcache_over_put(
        sl_handle_names(sl), name_len, key,
        sl_names_compose(key, name, name_len, client, client_len), NULL);
    if (st != SLUICE_OK)
        return st;
    return v.found ? SLUICE_OK : sl_names_none(name, name_len, err);
}

sluice_status sluice_limiter_override_get(sluice *sl, const void *name,
                                          size_t name_len, const void *client,
                                          size_t client_len,
                                          sluice_limiter_override *ov)
{
    char *err;
    sluice_limiter_override got;
    sluice_status st;

    st = enter_client(sl, name, name_len, client, client_len, &err);
    if (st != SLUICE_OK)
        return st;
    if (ov == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: ov is NULL");
        return SLUICE_EINVAL;
    }
    st = sl_limiter_over_of(sl, name, name_len, client, client_len, &got, err);
    if (st == SLUICE_OK)
        *ov = got;
    return st;
}

sluice_status sluice_limiter_override_delete(sluice *sl, const void *name,
                                             size_t name_len,
                                             const void *client,
                                             size_t client_len, bool *found)
{
    char *err, key[32 + SL_LIMITER_KEY_MAX];
    sl_stored so;
    sl_value v;
    sluice_status st;

    st = enter_client(sl, name, name_len, client, client_len, &err);
    if (st != SLUICE_OK)
        return st;
    memset(&so, 0, sizeof(so));
    so.read = &v;
    so.client = client;
    so.client_len = client_len;
    st = sl_limiter_stored_op(sl, SL_OP_OVER_DEL, name, name_len, &so, err);
    sl_lcache_over_put(
        sl_handle_names(sl), name_len, key,
        sl_names_compose(key, name, name_len, client, client_len), NULL);
    if (st == SLUICE_OK && found != NULL)
        *found = v.found;
    return st;
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
           (uint32_t)u[3] << 24;
}

/* Calls fn for each entry of page; false when fn said stop, or *st. */
static bool page_each(const sl_over_page *page, const void *name,
                      size_t name_len, sluice_override_fn fn, void *arg,
                      sluice_status *st, char *err)
{
    sluice_limiter_override ov;
    sl_value *v = sl_malloc(sizeof(*v));
    size_t o = 0, i, cl;
    bool go = true;

    if (v == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: out of memory");
        *st = SLUICE_ENOMEM;
        return false;
    }
    for (i = 0; i < page->n && go; i++) {
        const char *client = page->buf + o + 4;

        cl = get32(page->buf + o);
        o += 4 + cl;
        v->found = true;
        v->len = get32(page->buf + o);
        if (v->len > SL_VALUE_MAX) { /* the backends keep to it */
            sl_errf(err, SL_ERR_LEN, "limiter: an override of %zu bytes",
                    v->len);
            *st = SLUICE_EPROTO;
            break;
        }
        memcpy(v->buf, page->buf + o + 4, v->len);
        o += 4 + v->len;
        if ((*st = sl_override_decode(v, name, name_len, &ov, err)) !=
            SLUICE_OK)
            go = false;
        else if (fn(arg, client, cl, &ov) != 0)
            go = false;
    }
    sl_free(v);
    return go;
}

sluice_status sluice_limiter_override_list(sluice *sl, const void *name,
                                           size_t name_len,
                                           sluice_override_fn fn, void *arg)
{
    char *err;
    sl_over_page page;
    sl_stored so;
    sl_value v;
    sluice_status st;

    if ((st = sl_limiter_enter(sl, name, name_len, NULL, 0, &err)) != SLUICE_OK)
        return st;
    if (fn == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: fn is NULL");
        return SLUICE_EINVAL;
    }
    memset(&page, 0, sizeof(page));
    strcpy(page.cursor, "0");
    do {
        memset(&so, 0, sizeof(so));
        so.read = &v;
        so.page = &page;
        page.n = 0;
        page.len = 0;
        st =
            sl_limiter_stored_op(sl, SL_OP_OVER_LIST, name, name_len, &so, err);
    } while (st == SLUICE_OK &&
             page_each(&page, name, name_len, fn, arg, &st, err) &&
             strcmp(page.cursor, "0") != 0);
    sl_free(page.buf);
    return st;
}
