/* SPDX-License-Identifier: BSD-3-Clause */
/* options.h - the one table of options (options.c): the URL's query and
 * the fields of sluice_options, their ranges and defaults; and the readers
 * of a URL's parts that the table and the URL parser share. */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include "internal.h"

/* Bounds and defaults that a call's sluice_policy shares with its rows
 * (features/policies.c checks a policy's fields with them). */
#define SL_OPT_INSTANCES_MAX 10000 /* fallback_instances= */
#define SL_OPT_HOLD_MAX_MS   60000 /* reserve_ms= */
#define SL_OPT_SHARE_MAX     50    /* reserve_share= */
#define SL_OPT_SHARE_DEFAULT 10

/* The options in the order messages and --help list them. */
size_t sl_option_count(void);
/* Option i's name; NULL past the last. */
const char *sl_option_name(size_t i);
/* "name=SHAPE" (as "timeout_ms=N") for --help; "" past the last. */
void sl_option_usage(size_t i, char *dst, size_t dst_len);
/* Option i's one-line help; NULL past the last. */
const char *sl_option_help(size_t i);
/* "a, b, ..." : every name, for the message on an unknown option. */
void sl_option_known(char *dst, size_t dst_len);
/* The index of the option named [name, name+len), or -1. */
int sl_option_find(const char *name, size_t len);
/* Checks the value [v, v+n) of option i and keeps it in u; false with the
 * reason in msg (the value shown as *** when secret: a password may stand
 * there). */
bool sl_option_apply(size_t i, const char *v, size_t n, bool secret, sl_url *u,
                     char *msg, size_t msg_len);

/* Whether option i's value is a secret, never shown (sentinel_password). */
bool sl_option_secret(size_t i);
/* Option i's default (0: none in the table; the field's 0 is its default,
 * known where it is read). */
long long sl_option_default(size_t i);

/* The fields of sluice_options that rows of the table set, copied into u
 * (before the URL's query, which wins). */
void sl_options_take(const sluice_options *o, sl_url *u);
/* Checks u's fields that sluice_options may have set against their rows'
 * ranges (a URL's value is in range already): SLUICE_OK, or the status
 * with "options.NAME=VALUE: expected ..." in msg. */
sluice_status sl_options_check(const sl_url *u, char *msg, size_t msg_len);
/* Sets each field still 0 to its row's default. */
void sl_options_defaults(sl_url *u);

/* A whole decimal number in [lo, hi] from [s, s+n). */
bool sl_read_uint(const char *s, size_t n, long long lo, long long hi,
                  long long *out);
/* Percent-decodes [s, s+n) into dst; false on a bad escape, a NUL, or no
 * room. */
bool sl_decode(char *dst, size_t dst_len, const char *s, size_t n);

#endif /* SL_OPTIONS_H */
