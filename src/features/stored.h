/* SPDX-License-Identifier: BSD-3-Clause */
/* stored.h - one blocking op on what a named limiter stores beside its
 * rules, under "<prefix>lim:{K}" (stored.c): used by limiter.c,
 * override.c (through limiter.c, K composed from a name) and registry.c
 * (a reserved K). */
#ifndef SL_STORED_H
#define SL_STORED_H

#include "call.h"

/* One stored op on K (kl bytes; so: its operands, so->read its result). */
sluice_status sl_stored_op(sluice *sl, sl_op op, const char *key, size_t kl,
                           sl_stored *so, char *err);

#endif /* SL_STORED_H */
