/* SPDX-License-Identifier: BSD-3-Clause */
/* version.c - the library's own version, which a program may compare with
 * the header it was built with. */
#include "sluice.h"

const char *sluice_version(void)
{
    return SLUICE_VERSION;
}

unsigned sluice_version_number(void)
{
    return SLUICE_VERSION_NUMBER;
}
