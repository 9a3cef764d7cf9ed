/* SPDX-License-Identifier: BSD-3-Clause */
/* test_async_libuv.c - test_async.c on libuv. */
#define TEST_LIBUV 1
#include "test_async.c"
