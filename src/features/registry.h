/* SPDX-License-Identifier: BSD-3-Clause */
/* registry.h - the names of the named limiters kept until deleted (no
 * keep-alive), listed in the backend beside them; sluice_limiter_list
 * reads it (registry.c). */
#ifndef SL_REGISTRY_H
#define SL_REGISTRY_H

#include "sluice.h"

#include "features/limiter_codec.h"

/* The names are the fields of the overrides hash of a reserved K, which
 * no name composes to (a name's K, "<length>:<name>", starts with a
 * digit), each with the magic line as its value; the marker stands in
 * the rules' place (an override is set only while rules exist). The
 * admin calls (admin.c) keep the list as they store and delete rules:
 * before a store without a keep-alive the name is listed; after it,
 * listed exactly when the keep-alive stored is 0; after a delete,
 * unlisted. */
#define SL_REGISTRY_K      "names"
#define SL_REGISTRY_K_LEN  (sizeof(SL_REGISTRY_K) - 1)
#define SL_REGISTRY_MARKER SL_LIMITER_MAGIC "registry\n"

#endif /* SL_REGISTRY_H */
