/* SPDX-License-Identifier: BSD-3-Clause */
/* registry.h - the names of the named limiters kept until deleted (no
 * keep-alive), listed in the backend beside them (registry.c): limiter.c
 * keeps the list as it stores and deletes rules. */
#ifndef SL_REGISTRY_H
#define SL_REGISTRY_H

#include "sluice.h"

/* Around the store of name's rules with keepalive_ms asked: before, the
 * name listed if that is 0 (a name listed without rules is skipped by a
 * list, rules stored without their name would be missed); after, with
 * the keep-alive stored (a define may find another's) and whether the
 * store replaced what was there (set), listed exactly when it is 0. */
sluice_status sl_registry_before(sluice *sl, const void *name, size_t name_len,
                                 int64_t keepalive_ms, char *err);
sluice_status sl_registry_after(sluice *sl, const void *name, size_t name_len,
                                int64_t keepalive_ms, int64_t stored_ms,
                                bool replaced, char *err);
/* Unlists name, listed or not. */
sluice_status sl_registry_del(sluice *sl, const void *name, size_t name_len,
                              char *err);

#endif /* SL_REGISTRY_H */
