/* SPDX-License-Identifier: BSD-3-Clause */
/* share.h - what share.c, the sharing of a handle between threads, gives
 * the features as well as the core (call.h passes it on): each thread's
 * message buffer. The rest of share.c is the core's (handle.h). */
#ifndef SL_SHARE_H
#define SL_SHARE_H

#include "sluice.h"

/* This thread's message buffer for sl, emptied: every call begins here,
 * which also notes when the call began (its timeout_ms runs from then). */
char *sl_share_err(const sluice *sl);

/* The rules each of the call's n answers exceeded (v[i] for answer i),
 * where sluice_violated() reads them in this thread: at the end of a
 * blocking call, before an async call's callback. */
void sl_share_violated(const sluice *sl, const uint8_t *v, size_t n);

#endif /* SL_SHARE_H */
