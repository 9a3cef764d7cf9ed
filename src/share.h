/* SPDX-License-Identifier: BSD-3-Clause */
/* share.h - what share.c, the sharing of a handle between threads, gives
 * the features as well as the core (call.h passes it on): each thread's
 * message buffer. The rest of share.c is the core's (handle.h). */
#ifndef SL_SHARE_H
#define SL_SHARE_H

#include "sluice.h"

#include <stdbool.h>
#include <stdint.h>

/* This thread's message buffer for sl, emptied: every call begins here,
 * which also notes when the call began (its timeout_ms runs from then). */
char *sl_share_err(const sluice *sl);

/* What decided the answers of this thread's call on sl, where
 * sluice_violated() and sluice_last_decision() read them in this thread:
 * recorded at the end of a blocking call, before an async call's
 * callback. sl_share_answers starts the record of n answers decided at
 * now_ms (the handle's clock; -1: the server's); n 0 for a call that
 * failed. NULL when there is nothing to record (n 0) or no memory for n
 * (then none is read). */
typedef struct sl_answers sl_answers;
sl_answers *sl_share_answers(const sluice *sl, size_t n, int64_t now_ms);
/* Answer i (< n): the rules that decided it (NULL: none did: a fail
 * policy, a listed client), divided among divide_by instances (the
 * fallback store's; 0 or 1: as they are; algo.h), the client's override,
 * and the rules it exceeded (bit k: rule k). The rules are copied. */
void sl_share_answer(sl_answers *a, size_t i, const sluice_ruleset *rules,
                     int64_t divide_by, sluice_override_kind kind,
                     uint8_t violated);
/* The HTTP name, unit and unit name ("": the default) of the policy that
 * decided the call recorded last on sl in this thread. */
void sl_share_http(const sluice *sl, const char *http_name,
                   sluice_quota_unit unit, const char *unit_name);
/* Both for a single call's one answer: every decision ends here. */
void sl_share_answer1(const sluice *sl, int64_t now_ms,
                      const sluice_ruleset *rules, int64_t divide_by,
                      sluice_override_kind kind, uint8_t violated);

#endif /* SL_SHARE_H */
