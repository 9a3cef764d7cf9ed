/* SPDX-License-Identifier: BSD-3-Clause */
/* multi.c - redis+multi://: plain Redis that may not run scripts. Each
 * decision is one MULTI/EXEC round trip, with a compensating round trip
 * only on a denial; token and gcra go through WATCH. */
#include "backends/plain.h"
#include "backends/plain_reply.h"
#include "net/sentinel.h"

static sluice_status multi_open(const sl_url *url, sl_engine *eng, void **state,
                                char *err, size_t err_len)
{
    return sl_plain_open(url, true, eng, state, err, err_len);
}

/* Moves to another master (redis+multi+sentinel://). */
static uint64_t multi_failovers(void *state)
{
    return sl_sentinel_failovers(&((sl_plain *)state)->conn);
}

const sl_backend sl_backend_multi = {
    .name = "multi",
    .caps = SL_CAPS_MULTI,
    .open = multi_open,
    .close = sl_plain_close,
    .round_trips = sl_plain_round_trips,
    .failovers = multi_failovers,
    .ops = {.start = sl_plain_start, .answered = sl_plain_answered},
};
