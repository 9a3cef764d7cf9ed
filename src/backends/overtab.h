/* SPDX-License-Identifier: BSD-3-Clause */
/* overtab.h - mem://'s table of a named limiter's overrides: client ids
 * and their encoded overrides, sorted by client (length, then bytes), the
 * HGET, HSET, HDEL and HSCAN of the hash Redis keeps (overtab.c). */
#ifndef SL_OVERTAB_H
#define SL_OVERTAB_H

#include "request.h"

typedef struct sl_over_row {
    char *client, *v;
    size_t client_len, n;
} sl_over_row;

typedef struct sl_overtab { /* zeroed: empty */
    sl_over_row *o;
    size_t n, cap;
} sl_overtab;

/* The override of client into *out (found or not). */
void sl_overtab_get(const sl_overtab *t, const char *client, size_t len,
                    sl_value *out);
/* Stores value for client, replacing any; false when out of memory (the
 * table unchanged). */
bool sl_overtab_set(sl_overtab *t, const char *client, size_t len,
                    const char *value, size_t value_len);
/* Removes client's; whether there was one. */
bool sl_overtab_del(sl_overtab *t, const char *client, size_t len);
/* Up to max rows from the index in page->cursor, and the next cursor ("0":
 * done); false when out of memory. */
bool sl_overtab_page(const sl_overtab *t, sl_over_page *page, size_t max);
void sl_overtab_free(sl_overtab *t);
/* An override op (SL_OP_OVER_*) on t, the table of the limiter's rules
 * (NULL: none stored, so no override either): set, delete, a page of 100. */
sluice_status sl_overtab_op(sl_overtab *t, const sl_request *rq, char *err,
                            size_t err_len);

#endif /* SL_OVERTAB_H */
