/* SPDX-License-Identifier: BSD-3-Clause */
/* names.h - what a decision by name needs before it is a decision on a
 * key: the key K of (name, client), the rules and override the handle read
 * (cached for rules_cache_ms, used stale for rules_stale_ms when a read
 * fails), and a read's answer decoded and kept (names.c). The pipeline's
 * first stage (pipeline.c) and the blocking calls on stored rules
 * (limiter.c) both use it. */
#ifndef SL_NAMES_H
#define SL_NAMES_H

#include "features/limiter_cache.h"
#include "features/limiter_codec.h"

/* Sets up the handle's limiters from its configuration (its defaults
 * set: sl_url_parse); false: no mutex. */
bool sl_names_init(sl_limiters *l, const sl_config *cfg);
void sl_names_free(sl_limiters *l);

/* K: "<name length>:<name><client>" into dst (32 + SL_LIMITER_KEY_MAX
 * bytes); its length. */
size_t sl_names_compose(char *dst, const void *name, size_t name_len,
                        const void *client, size_t client_len);
/* A name and client id within the caps, or EKEY/EINVAL with the message. */
sluice_status sl_names_check(const void *name, size_t name_len,
                             const void *client, size_t client_len, char *err);
/* SLUICE_ENOLIMITER, with the message naming name. */
sluice_status sl_names_none(const void *name, size_t name_len, char *err);

/* The rules of name and the override of the client whose K is key (kl
 * bytes; client_len 0: none asked), if the handle read them within age ms
 * (true); else *known is the keep-alive read last (-1: none). */
bool sl_names_cached(sl_limiters *l, const void *name, size_t name_len,
                     const char *key, size_t kl, size_t client_len, int64_t age,
                     sluice_ruleset *rs, int64_t *known,
                     sluice_limiter_override *ov);

/* A read of name's rules (with, when client_len > 0, the override of the
 * client whose K is key, read into *over) ended with *st and v: decodes
 * them into rs, *keepalive and *ov, and keeps them (none stored: forgets
 * them, SLUICE_ENOLIMITER; keep false: what was found is not kept, a
 * read that may have seen a define half done). *sent is the keep-alive
 * the read sent; true when one more read must send the one read instead
 * (unless this read was the last allowed), *sent then set to it. */
bool sl_names_read_ended(sl_limiters *l, const void *name, size_t name_len,
                         const char *key, size_t kl, size_t client_len,
                         sluice_status *st, const sl_value *v,
                         const sl_value *over, bool last, bool keep,
                         int64_t *sent, sluice_ruleset *rs, int64_t *keepalive,
                         sluice_limiter_override *ov, char *err);

#endif /* SL_NAMES_H */
