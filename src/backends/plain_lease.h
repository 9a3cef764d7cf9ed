/* SPDX-License-Identifier: BSD-3-Clause */
/* plain_lease.h - leases and a named limiter's stored rules over plain
 * commands (plain_lease.c): rows of {emit, parse, undo} like plain_ops.h's,
 * read through the reply cursor (plain_reply.h). */
#ifndef SL_PLAIN_LEASE_H
#define SL_PLAIN_LEASE_H

#include "backends/plain_ops.h"

/* plain_lease.c: the block of a lease op or a stored-rules op, its parse,
 * and a lease's follow-up. */
size_t sl_plain_lease_block(sl_plain *p, unit *u);
sluice_status sl_plain_lease_parse(sl_plain *p, unit *u);
size_t sl_plain_lease_follow(sl_plain *p, unit *u);

#endif /* SL_PLAIN_LEASE_H */
