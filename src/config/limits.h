/* SPDX-License-Identifier: BSD-3-Clause */
/* limits.h - limits in a file (docs/LIMITS.md): a YAML file of named
 * limiters, each with its rules, keep-alive, policy and overrides, read
 * and checked into the form below (limits.c, with libyaml), and written
 * back in the same format. Nothing here is applied: the CLI's `limiter
 * apply` stores a form with the public calls. The form is also what a
 * handle opened with a file is to hold (found by name with sl_limits_find,
 * its policies field for field those of sluice_policy); this layer needs
 * only the base and the rules' parser, so it can sit below the handle. */
#ifndef SL_LIMITS_H
#define SL_LIMITS_H

#include "sluice.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_LIMITS_VERSION   1                  /* the one version read */
#define SL_LIMITS_MAX_BYTES (16 * 1024 * 1024) /* a larger file is refused */

/* The groups of a policy the file gives: the values of item 2's
 * SLUICE_POLICY_* bits, so that a form's policy maps field for field on
 * sluice_policy. */
#define SL_LIMITS_POLICY_FAIL       (1u << 0) /* fail, fallback_instances */
#define SL_LIMITS_POLICY_DENY_CACHE (1u << 1) /* deny_cache */
#define SL_LIMITS_POLICY_RESERVE    (1u << 2) /* reserve_ms, reserve_share */
#define SL_LIMITS_POLICY_SHADOW     (1u << 3) /* shadow */
#define SL_LIMITS_POLICY_HTTP       (1u << 4) /* http_name, unit, unit_name */

/* A limiter's policy: decided by the handle that decides by its name, not
 * stored in the backend. A group given takes its other fields' defaults
 * (0, false, ""), not the handle's. */
typedef struct sl_limits_policy {
    unsigned set; /* SL_LIMITS_POLICY_* */
    sluice_fail_policy fail;
    uint32_t fallback_instances; /* 0..10000; 0: the handle's */
    bool deny_cache;
    int64_t reserve_ms;     /* 0..60000; 0: off */
    uint32_t reserve_share; /* 0..50 percent; 0: the default */
    bool shadow;
    char http_name[64]; /* 0..63 bytes of printable ASCII, NUL-terminated */
    sluice_quota_unit unit;
    char unit_name[65]; /* 0..64 of A-Z a-z 0-9 . _ -, NUL-terminated */
} sl_limits_policy;

/* A client's override: kind RULES, UNLIMITED or DENY. The rules are kept
 * as many as there are, not a whole sluice_ruleset each: a file of 16 MB
 * may hold half a million overrides. */
typedef struct sl_limits_override {
    char *client; /* client_len bytes, any */
    size_t client_len;
    sluice_override_kind kind;
    uint8_t nrules;     /* RULES: 1..SLUICE_MAX_RULES */
    sluice_rule *rules; /* RULES: nrules of them */
    unsigned line, col; /* where the file gives it (1-based); 0: not read */
} sl_limits_override;

typedef struct sl_limits_limiter {
    char *name; /* name_len bytes, 1..1000 */
    size_t name_len;
    sluice_ruleset rules;
    int64_t keepalive_ms; /* 0: kept until deleted */
    sl_limits_policy policy;
    sl_limits_override *overs; /* sorted by client once sealed */
    size_t nover, cap;
    unsigned line, col;
} sl_limits_limiter;

/* Limiters sorted by name once sealed (bytes, a prefix first). */
typedef struct sl_limits {
    sl_limits_limiter *lims;
    size_t n, cap;
} sl_limits;

/* An empty form (NULL: out of memory), and its end (NULL: a no-op). */
sl_limits *sl_limits_new(void);
void sl_limits_free(sl_limits *l);

/* Adds a limiter (its name copied; no policy, no overrides), or an
 * override to one (the client copied; ov's kind RULES, UNLIMITED or DENY):
 * NULL or false when out of memory. Neither checks; sl_limits_seal does. */
sl_limits_limiter *sl_limits_add(sl_limits *l, const void *name,
                                 size_t name_len, const sluice_ruleset *rules,
                                 int64_t keepalive_ms);
bool sl_limits_add_override(sl_limits_limiter *lim, const void *client,
                            size_t client_len,
                            const sluice_limiter_override *ov);

/* Sorts the limiters and each one's overrides, and checks what the calls
 * check (names 1..1000 bytes, a name and a client 1000 at most together,
 * rules, keep-alives, policies) and that no name, nor any client of a
 * limiter, comes twice. On an error err says, as "FILE:LINE:COL: ..." for
 * what came from a file (file names it; NULL: "limits"). */
sluice_status sl_limits_seal(sl_limits *l, const char *file, char *err,
                             size_t err_len);

/* The limiter of name, the override of client in lim (NULL: none); the
 * form sealed. */
const sl_limits_limiter *sl_limits_find(const sl_limits *l, const void *name,
                                        size_t name_len);
const sl_limits_override *sl_limits_find_override(const sl_limits_limiter *lim,
                                                  const void *client,
                                                  size_t client_len);
/* An override as the public calls take it. */
void sl_limits_override_get(const sl_limits_override *o,
                            sluice_limiter_override *ov);

/* Reads len bytes of YAML (file: the name messages give it; NULL:
 * "limits") into a sealed form in *out (NULL on an error). SLUICE_EINVAL
 * for any fault of the text, with err as "FILE:LINE:COL: what was found:
 * what was expected"; SLUICE_ENOMEM. */
sluice_status sl_limits_parse(const char *file, const char *buf, size_t len,
                              sl_limits **out, char *err, size_t err_len);
/* The same from the file at path ("-": standard input), refused past
 * SL_LIMITS_MAX_BYTES. */
sluice_status sl_limits_load(const char *path, sl_limits **out, char *err,
                             size_t err_len);

/* Writes l (sealed) as the text sl_limits_parse reads back to the same
 * form, in pieces to out: names and clients double-quoted when their bytes
 * are UTF-8, else as name_hex and client_hex. */
typedef void (*sl_limits_out_fn)(void *arg, const char *s, size_t n);
void sl_limits_write(const sl_limits *l, sl_limits_out_fn out, void *arg);

#endif /* SL_LIMITS_H */
