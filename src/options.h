/* SPDX-License-Identifier: BSD-3-Clause */
/* options.h - the one table of URL query options (options.c), and the
 * readers of a URL's parts that the table and the URL parser share. */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include "internal.h"

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

/* A whole decimal number in [lo, hi] from [s, s+n). */
bool sl_read_uint(const char *s, size_t n, long long lo, long long hi,
                  long long *out);
/* Percent-decodes [s, s+n) into dst; false on a bad escape, a NUL, or no
 * room. */
bool sl_decode(char *dst, size_t dst_len, const char *s, size_t n);

#endif /* SL_OPTIONS_H */
