/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter_codec.h - the values a named limiter stores: its rules and its
 * overrides (limiter_codec.c). */
#ifndef SL_LIMITER_CODEC_H
#define SL_LIMITER_CODEC_H

#include "request.h"

/* The stored value of rules and overrides starts with this line. */
#define SL_LIMITER_MAGIC     "sluice-limiter 1\n"
#define SL_LIMITER_MAGIC_LEN (sizeof(SL_LIMITER_MAGIC) - 1)

/* The list of names (registry.c): the overrides hash of a reserved K,
 * which no name composes to ("<length>:<name>" starts with a digit), its
 * marker in the rules' place (an override is set only while rules exist),
 * and each name's value there, the magic line. */
#define SL_REGISTRY_K      "names"
#define SL_REGISTRY_K_LEN  (sizeof(SL_REGISTRY_K) - 1)
#define SL_REGISTRY_MARKER SL_LIMITER_MAGIC "registry\n"

/* The stored value of rules: the magic line, the keep-alive, the rules
 * as text; and back (EPROTO for anything else). */
size_t sl_limiter_encode(char *dst, const sluice_ruleset *rs,
                         int64_t keepalive);
sluice_status sl_limiter_decode(const sl_value *v, const void *name,
                                size_t name_len, sluice_ruleset *rs,
                                int64_t *keepalive, char *err);
/* An override as stored (the rules' encoding, or the magic
 * line and "unlimited" or "deny"), and back (not found: kind NONE). */
size_t sl_override_encode(char *dst, const sluice_limiter_override *ov);
sluice_status sl_override_decode(const sl_value *v, const void *name,
                                 size_t name_len, sluice_limiter_override *ov,
                                 char *err);

#endif /* SL_LIMITER_CODEC_H */
