/* SPDX-License-Identifier: BSD-3-Clause */
/* test_async_admin_libuv.c - test_async_admin.c on libuv. */
#define TEST_LIBUV 1
#include "test_async_admin.c"
