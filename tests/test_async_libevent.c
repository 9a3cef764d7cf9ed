/* SPDX-License-Identifier: BSD-3-Clause */
/* test_async_libevent.c - test_async.c on libevent. */
#include "test_async.c"
