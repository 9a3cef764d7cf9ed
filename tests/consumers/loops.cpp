// SPDX-License-Identifier: BSD-3-Clause
// loops.cpp - the event-loop adapters, <sluice/libevent.h> and
// <sluice/libuv.h>, included by C++ as a service on either loop includes
// them, under the consumers' C++ warnings (g++'s -Wold-style-cast and
// -Wuseless-cast among them) as errors. Compiled only: the consumers link
// neither loop; test_async_libevent and test_async_libuv run the adapters.
#include <sluice/libevent.h>
#include <sluice/libuv.h>

sluice_status attach_both(sluice *a, struct event_base *base, sluice *b,
                          uv_loop_t *loop);

// Both attach calls, as a service makes them.
sluice_status attach_both(sluice *a, struct event_base *base, sluice *b,
                          uv_loop_t *loop)
{
    sluice_status st = sluice_libevent_attach(a, base);

    return st != SLUICE_OK ? st : sluice_libuv_attach(b, loop);
}
