/* SPDX-License-Identifier: BSD-3-Clause */
/* twemproxy.c - twemproxy://: only commands that nutcracker parses, in
 * plain pipelines (no MULTI, no EXPIRE options, no scripts, no TIME): one
 * round trip for an admitted request, a second only to take back a denied
 * charge. No token, gcra, refund or block= (SL_CAPS_TWEMPROXY, caps.h). */
#include "backends/plain.h"

static sluice_status twemproxy_open(const sl_url *url, sl_engine *eng,
                                    void **state, char *err, size_t err_len)
{
    return sl_plain_open(url, false, eng, state, err, err_len);
}

const sl_backend sl_backend_twemproxy = {
    .name = "twemproxy",
    .caps = SL_CAPS_TWEMPROXY,
    .open = twemproxy_open,
    .close = sl_plain_close,
    .round_trips = sl_plain_round_trips,
    .ops = {.start = sl_plain_start, .answered = sl_plain_answered},
};
