/* SPDX-License-Identifier: BSD-3-Clause */
/* yaml.h - libyaml's events read strictly, a value at a time (yaml.c):
 * what limits_read.c walks a limits file with. Each reader checks the
 * event last read and, on a fault, writes "FILE:LINE:COL: what was found:
 * what was expected" and returns false. */
#ifndef SL_CONFIG_YAML_H
#define SL_CONFIG_YAML_H

#include "internal.h"

#include <yaml.h>

#define SL_YAML_MAX_KEYS     9 /* the most keys of a mapping (a policy's) */
/* Mappings and lists nest 5 deep in a limits file (the file, limiters, a
 * limiter, its overrides, an override); past 16 the text is refused
 * before the schema is walked, so that a deeper mistake is still named
 * by the schema, and a deep pile of '[' costs libyaml no time. */
#define SL_YAML_SCHEMA_DEPTH 5
#define SL_YAML_MAX_DEPTH    16

/* A walk under way: the parser and its last event, where faults go. */
typedef struct sl_yaml {
    yaml_parser_t yp;
    yaml_event_t ev;
    bool have; /* ev holds an event to delete */
    const char *file;
    const char *buf;
    size_t len;
    char *err;
    size_t err_len;
    sluice_status st; /* SLUICE_EINVAL, or ENOMEM */
} sl_yaml;

/* A mapping's keys: their names (NULL-terminated), and where each was
 * met. */
typedef struct sl_yaml_keys {
    const char *const *names;
    const char *what; /* "a limiter", ... */
    unsigned seen;
    yaml_mark_t at[SL_YAML_MAX_KEYS];
} sl_yaml_keys;

/* "FILE:LINE:COL: msg" at mark m; false, to return. */
bool sl_yaml_fail(sl_yaml *r, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Out of memory: SLUICE_ENOMEM; false. */
bool sl_yaml_nomem(sl_yaml *r);
/* Pass one, YAML alone (no event kept): false with the syntax fault, or
 * past SL_YAML_MAX_DEPTH. */
bool sl_yaml_check(sl_yaml *r);
/* The next event into r->ev; false on a fault, or on what the schema has
 * no use for: anchors, aliases, tags. */
bool sl_yaml_next(sl_yaml *r);
/* What the event is, for "found ...": a scalar quoted, else its kind. */
const char *sl_yaml_found(const sl_yaml *r, char *dst, size_t len);
/* "KEY: expected WHAT, found ..."; false. */
bool sl_yaml_wrong(sl_yaml *r, const char *key, const char *expected);
/* A plain empty, ~ or null (YAML's null), or any other scalar. */
bool sl_yaml_is_null(const sl_yaml *r);
bool sl_yaml_is_scalar(const sl_yaml *r);

/* Values (unit: what follows the range in a message, " ms"). */
bool sl_yaml_int(sl_yaml *r, const char *key, int64_t lo, int64_t hi,
                 const char *unit, int64_t *out);
bool sl_yaml_bool(sl_yaml *r, const char *key, bool *out);
/* One of words (NULL-terminated), as its index; expected lists them. */
bool sl_yaml_word(sl_yaml *r, const char *key, const char *const *words,
                  const char *expected, int *out);
/* A name or a client: its text, or with hex its bytes in hex digits (two
 * a byte, either case); at most 1000 bytes, copied into *out (sl_malloc). */
bool sl_yaml_bytes(sl_yaml *r, const char *key, bool hex, char **out,
                   size_t *out_len);
/* 0..max bytes into dst (max + 1 bytes), each of printable ASCII, or with
 * unit of A-Z a-z 0-9 . _ - (a unit's name). */
bool sl_yaml_label(sl_yaml *r, const char *key, size_t max, bool unit,
                   char *dst);

/* Mappings: the next key of the one begun (its index in k->names, the
 * value's event then read), -1 at its end, -2 on a fault (unknown or
 * repeated keys are faults). */
int sl_yaml_key(sl_yaml *r, sl_yaml_keys *k);
bool sl_yaml_has(const sl_yaml_keys *k, int at);
/* A value that must open a mapping (null: an empty one, *empty set). */
bool sl_yaml_mapping(sl_yaml *r, const char *key, bool *empty);
/* A list of mappings, each read by item (null: an empty list). */
bool sl_yaml_list(sl_yaml *r, const char *key, const char *item_what,
                  bool (*item)(sl_yaml *r, void *arg), void *arg);

#endif /* SL_CONFIG_YAML_H */
