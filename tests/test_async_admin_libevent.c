/* SPDX-License-Identifier: BSD-3-Clause */
/* test_async_admin_libevent.c - test_async_admin.c on libevent. */
#include "test_async_admin.c"
