/* SPDX-License-Identifier: BSD-3-Clause */
/* registry.h - the names of the named limiters kept until deleted (no
 * keep-alive), listed in the backend beside them; sluice_limiter_list
 * reads it (registry.c). */
#ifndef SL_REGISTRY_H
#define SL_REGISTRY_H

#include "sluice.h"

#include "features/limiter_codec.h"

/* The names are the fields of the overrides hash of a reserved K
 * (SL_REGISTRY_K, limiter_codec.h), each with the magic line as its
 * value, its marker in the rules' place. The admin calls (admin.c) keep
 * the list as they store and delete rules: before a store without a
 * keep-alive the name is listed; after it, listed exactly when the
 * keep-alive stored is 0; after a delete, unlisted. A define from a
 * limits file (limfile.c) keeps it alike. */

#endif /* SL_REGISTRY_H */
