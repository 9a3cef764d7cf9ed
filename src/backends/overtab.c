/* SPDX-License-Identifier: BSD-3-Clause */
/* overtab.c - mem://'s table of a limiter's overrides, sorted by client
 * id so that a decision finds one by binary search (overtab.h). */
#include "backends/overtab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where client is or goes; *hit: it is. */
static size_t find(const sl_overtab *t, const char *client, size_t len,
                   bool *hit)
{
    size_t lo = 0, hi = t->n;

    *hit = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sl_over_row *o = &t->o[mid];
        int c = o->client_len < len   ? -1
                : o->client_len > len ? 1
                                      : memcmp(o->client, client, len);

        if (c == 0) {
            *hit = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sl_overtab_get(const sl_overtab *t, const char *client, size_t len,
                    sl_value *out)
{
    bool hit;
    size_t i = find(t, client, len, &hit);

    out->found = hit;
    out->len = hit ? t->o[i].n : 0;
    if (hit)
        memcpy(out->buf, t->o[i].v, out->len);
}

bool sl_overtab_set(sl_overtab *t, const char *client, size_t len,
                    const char *value, size_t value_len)
{
    char *v = sl_memdup(value, value_len), *c = NULL;
    bool hit;
    size_t i = find(t, client, len, &hit);

    if (v == NULL)
        return false;
    if (hit) {
        sl_free(t->o[i].v);
        t->o[i].v = v;
        t->o[i].n = value_len;
        return true;
    }
    if ((c = sl_memdup(client, len)) == NULL)
        goto nomem;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        sl_over_row *o = sl_realloc(t->o, cap * sizeof(*o));

        if (o == NULL)
            goto nomem;
        t->o = o;
        t->cap = cap;
    }
    memmove(&t->o[i + 1], &t->o[i], (t->n - i) * sizeof(*t->o));
    t->o[i] = (sl_over_row){c, v, len, value_len};
    t->n++;
    return true;
nomem:
    sl_free(c);
    sl_free(v);
    return false;
}

bool sl_overtab_del(sl_overtab *t, const char *client, size_t len)
{
    bool hit;
    size_t i = find(t, client, len, &hit);

    if (!hit)
        return false;
    sl_free(t->o[i].client);
    sl_free(t->o[i].v);
    memmove(&t->o[i], &t->o[i + 1], (t->n - i - 1) * sizeof(*t->o));
    t->n--;
    return true;
}

bool sl_overtab_page(const sl_overtab *t, sl_over_page *page, size_t max)
{
    size_t i = (size_t)strtoull(page->cursor, NULL, 10);

    for (; i < t->n && max > 0; i++, max--)
        if (!sl_over_page_add(page, t->o[i].client, t->o[i].client_len,
                              t->o[i].v, t->o[i].n))
            return false;
    snprintf(page->cursor, sizeof(page->cursor), "%zu", i < t->n ? i : 0);
    return true;
}

void sl_overtab_free(sl_overtab *t)
{
    size_t i;

    for (i = 0; i < t->n; i++) {
        sl_free(t->o[i].client);
        sl_free(t->o[i].v);
    }
    sl_free(t->o);
}

sluice_status sl_overtab_op(sl_overtab *t, const sl_request *rq, char *err,
                            size_t err_len)
{
    const sl_stored *so = &rq->stored;

    if (rq->op == SL_OP_OVER_LIST && t == NULL)
        strcpy(so->page->cursor, "0");
    else if (rq->op == SL_OP_OVER_LIST && !sl_overtab_page(t, so->page, 100))
        goto nomem;
    if (rq->op == SL_OP_OVER_LIST || t == NULL)
        return SLUICE_OK;
    if (rq->op == SL_OP_OVER_DEL) {
        so->read->found = sl_overtab_del(t, so->client, so->client_len);
        return SLUICE_OK;
    }
    if (!sl_overtab_set(t, so->client, so->client_len, so->value,
                        so->value_len))
        goto nomem;
    so->read->found = true;
    return SLUICE_OK;
nomem:
    sl_errf(err, err_len, "memory: out of memory storing an override");
    return SLUICE_ENOMEM;
}
