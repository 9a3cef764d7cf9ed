/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.h - named limiters: their rules stored in the backend and read
 * for decisions by name (limiter.c), used by override.c. */
#ifndef SL_LIMITER_H
#define SL_LIMITER_H

#include "call.h"
#include "features/limiter_cache.h"
#include "features/limiter_codec.h"

/* limiter.c, for override.c. */
/* The handle's limiters (made on the first call by name; NULL only
 * before a first sl_limiter_enter succeeded). */
sl_limiters *sl_limiters_of(sluice *sl);
/* The head of every public call by name: sl not NULL (else EINVAL, no
 * message), *err its error buffer, the handle's limiters made, and the
 * name and client id (client_len 0: none) within the caps (EKEY/EINVAL
 * with the message). */
sluice_status sl_limiter_enter(sluice *sl, const void *name, size_t name_len,
                               const void *client, size_t client_len,
                               char **err);
/* K: "<name length>:<name><client>" into dst (32 + SL_LIMITER_KEY_MAX
 * bytes); its length. */
size_t sl_limiter_compose(char *dst, const void *name, size_t name_len,
                          const void *client, size_t client_len);
/* One stored op on name (so: its operands, so->read its result). */
sluice_status sl_limiter_stored_op(sluice *sl, sl_op op, const void *name,
                                   size_t name_len, sl_stored *so, char *err);
/* SLUICE_ENOLIMITER, with the message naming name. */
sluice_status sl_limiter_no_limiter(const void *name, size_t name_len,
                                    char *err);
/* The rules of name (cached unless fresh), and with a client its override
 * read with them in one round trip (kind NONE: none). */
sluice_status sl_limiter_rules_of(sluice *sl, const void *name, size_t name_len,
                                  bool fresh, sluice_ruleset *rs,
                                  int64_t *keepalive, char *err);
sluice_status sl_limiter_rules_and_over(sluice *sl, const void *name,
                                        size_t name_len, const void *client,
                                        size_t client_len, bool fresh,
                                        sluice_ruleset *rs, int64_t *keepalive,
                                        sluice_limiter_override *ov, char *err);

#endif /* SL_LIMITER_H */
