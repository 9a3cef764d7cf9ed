/* SPDX-License-Identifier: BSD-3-Clause */
/* registry.c - the list of the named limiters kept until deleted
 * (sluice_limiter_list), kept in the backend rather than found with SCAN,
 * which twemproxy does not pass and a cluster answers one node at a time,
 * and which walks every key stored (a million clients' state) to find a
 * few dozen names. Limiters with a keep-alive are not listed: they come and
 * go with use (a name per tenant, made on demand), and a list of them
 * would grow without end, as no one could take a name out of it when its
 * keep-alive runs out. So the list's two keys, which have no TTL, appear
 * only with rules that have none: every key of a prefix whose limiters
 * all have a keep-alive still carries a TTL (the tests check). The names
 * are the clients of the overrides hash of a reserved K, "names", which no
 * name composes to (a name's K, "<length>:<name>", starts with a digit):
 * every backend keeps such a hash with the overrides' ops, on every path,
 * through twemproxy and on a cluster (HSET while the K's rules exist, here
 * a marker stored once; HDEL; HSCAN a page at a time). */
#include "features/registry.h"

#include "features/limiter_codec.h"
#include "features/stored.h"

#include <string.h>

/* The reserved K, its marker and each name's value (the magic line,
 * which says whose data it is to anyone reading the keys):
 * limiter_codec.h, shared with a define from a limits file (limfile.c),
 * which keeps the list as this file does. */
#define REG_K     SL_REGISTRY_K
#define REG_K_LEN SL_REGISTRY_K_LEN
#define MARKER    SL_REGISTRY_MARKER

/* One op on the registry's hash or its marker. */
static sluice_status reg_op(sluice *sl, sl_op op, const void *name,
                            size_t name_len, sl_value *v, sl_over_page *page,
                            char *err)
{
    sl_stored so;

    memset(&so, 0, sizeof(so));
    so.read = v;
    so.client = name;
    so.client_len = name_len;
    so.page = page;
    if (op == SL_OP_OVER_SET) {
        so.value = SL_LIMITER_MAGIC;
        so.value_len = SL_LIMITER_MAGIC_LEN;
    } else if (op == SL_OP_RULES_PUT) {
        so.value = MARKER;
        so.value_len = sizeof(MARKER) - 1;
        so.if_absent = true;
    }
    return sl_stored_op(sl, op, REG_K, REG_K_LEN, &so, err);
}

static sluice_status reg_add(sluice *sl, const void *name, size_t name_len,
                             char *err)
{
    sl_value v;
    sluice_status st;
    int tries;

    /* No marker yet (a new prefix), or none any more (a FLUSHALL, an
     * eviction): it is stored, and the name set again. */
    for (tries = 0; tries < 2; tries++) {
        st = reg_op(sl, SL_OP_OVER_SET, name, name_len, &v, NULL, err);
        if (st != SLUICE_OK || v.found)
            return st;
        st = reg_op(sl, SL_OP_RULES_PUT, NULL, 0, &v, NULL, err);
        if (st != SLUICE_OK)
            return st;
    }
    sl_errf(err, SL_ERR_LEN,
            "limiter: the list of names could not be kept: its marker "
            "disappeared as soon as stored (an eviction policy?)");
    return SLUICE_ESERVER;
}

sluice_status sl_registry_del(sluice *sl, const void *name, size_t name_len,
                              char *err)
{
    sl_value v;

    return reg_op(sl, SL_OP_OVER_DEL, name, name_len, &v, NULL, err);
}

sluice_status sl_registry_before(sluice *sl, const void *name, size_t name_len,
                                 int64_t keepalive_ms, char *err)
{
    return keepalive_ms == 0 ? reg_add(sl, name, name_len, err) : SLUICE_OK;
}

sluice_status sl_registry_after(sluice *sl, const void *name, size_t name_len,
                                int64_t keepalive_ms, int64_t stored_ms,
                                bool replaced, char *err)
{
    /* A define with a keep-alive that found rules without one: listed
     * (again, if a crash or a race left them out). */
    if (stored_ms == 0)
        return keepalive_ms > 0 ? reg_add(sl, name, name_len, err) : SLUICE_OK;
    /* A keep-alive stored where the name may be listed: listed before
     * (asked for none, found one), or rules without one replaced. */
    if (keepalive_ms == 0 || replaced)
        return sl_registry_del(sl, name, name_len, err);
    return SLUICE_OK;
}

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
           (uint32_t)u[3] << 24;
}

/* Calls fn for each name of page, each checked: a name of 1..1000 bytes
 * and the magic line as its value (else EPROTO). false when fn said stop,
 * or *st. */
static bool page_each(const sl_over_page *page, sluice_name_fn fn, void *arg,
                      sluice_status *st, char *err)
{
    size_t o = 0, i, nl, vl;

    for (i = 0; i < page->n; i++) {
        const char *name = page->buf + o + 4;

        nl = get32(page->buf + o);
        o += 4 + nl;
        vl = get32(page->buf + o);
        if (nl == 0 || nl > SL_LIMITER_KEY_MAX || vl != SL_LIMITER_MAGIC_LEN ||
            memcmp(page->buf + o + 4, SL_LIMITER_MAGIC, vl) != 0) {
            sl_errf(err, SL_ERR_LEN,
                    "limiter: unexpected data in the list of names (a name "
                    "of %zu bytes, a value of %zu); is another program using "
                    "the key prefix?",
                    nl, vl);
            *st = SLUICE_EPROTO;
            return false;
        }
        o += 4 + vl;
        if (fn(arg, name, nl) != 0)
            return false;
    }
    return true;
}

sluice_status sluice_limiter_list(sluice *sl, sluice_name_fn fn, void *arg)
{
    char *err;
    sl_over_page page;
    sl_value v;
    sluice_status st;

    if (sl == NULL)
        return SLUICE_EINVAL;
    err = sl_share_err(sl);
    if (fn == NULL) {
        sl_errf(err, SL_ERR_LEN, "limiter: fn is NULL");
        return SLUICE_EINVAL;
    }
    memset(&page, 0, sizeof(page));
    strcpy(page.cursor, "0");
    do {
        page.n = 0;
        page.len = 0;
        st = reg_op(sl, SL_OP_OVER_LIST, NULL, 0, &v, &page, err);
    } while (st == SLUICE_OK && page_each(&page, fn, arg, &st, err) &&
             strcmp(page.cursor, "0") != 0);
    sl_free(page.buf);
    return st;
}
