/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.h - named limiters: their rules stored in the backend, defined,
 * set, read and deleted (limiter.c); used by override.c. Decisions by name
 * run through the pipeline (call.h, sl_call_by_name). */
#ifndef SL_LIMITER_H
#define SL_LIMITER_H

#include "call.h"
#include "features/names.h"

/* The head of every public call by name: sl not NULL (else EINVAL, no
 * message), *err its error buffer, and the name and client id (client_len
 * 0: none) within the caps (EKEY/EINVAL with the message). */
sluice_status sl_limiter_enter(sluice *sl, const void *name, size_t name_len,
                               const void *client, size_t client_len,
                               char **err);
/* One stored op on name (so: its operands, so->read its result). */
sluice_status sl_limiter_stored_op(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, sl_stored *so, char *err);
/* The rules of name (cached unless fresh). */
sluice_status sl_limiter_rules_of(sluice *sl, const void *name, size_t name_len,
                                  bool fresh, sluice_ruleset *rs,
                                  int64_t *keepalive, char *err);
/* The override of client (kind NONE: none), read with the rules. */
sluice_status sl_limiter_over_of(sluice *sl, const void *name, size_t name_len,
                                 const void *client, size_t client_len,
                                 sluice_limiter_override *ov, char *err);

#endif /* SL_LIMITER_H */
