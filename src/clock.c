/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.c - the monotonic clock that every deadline and timeout is
 * measured on (never the wall clock, which may step). */
#include "internal.h"

#include <time.h>

int64_t sl_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
