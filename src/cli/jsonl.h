/* SPDX-License-Identifier: BSD-3-Clause */
/* jsonl.h - one event line of `sluice replay`, parsed apart from any handle
 * and any I/O, so that it can be tested and fuzzed on its own. */
#ifndef SLUICE_CLI_JSONL_H
#define SLUICE_CLI_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;

typedef enum jsonl_op {
    JSONL_ACQUIRE = 1,
    JSONL_PEEK,
    JSONL_RESET,
    JSONL_AT_MOST, /* "acquire_at_most" */
    JSONL_REFUND,  /* "refund": cost is the amount */
    JSONL_LEASE,   /* "lease": max holders, lease_ms */
    JSONL_RELEASE, /* "release": the lease */
    JSONL_SETTLE,  /* "settle": reserved and actual, no cost */
    /* A named limiter's rules and overrides: */
    JSONL_LIMITER_SET, /* "limiter_set": limiter, rule */
    JSONL_OVERRIDE,    /* "override": limiter, client, override */
    JSONL_UNOVERRIDE   /* "unoverride": limiter, client */
} jsonl_op;

/* A parsed event. key and rule point into doc, which the event owns until
 * jsonl_event_free(). */
typedef struct jsonl_event {
    jsonl_op op;      /* default JSONL_ACQUIRE */
    int64_t t;        /* virtual time: 0 .. 2^53 - 1 ms */
    const char *key;  /* key_len bytes (UTF-8 unless key_hex), NUL included */
    size_t key_len;   /* not checked against the cap: the library does */
    const char *rule; /* terminated, no NUL inside; NULL: none given */
    int64_t cost;     /* 1 .. 10^9; 1 for a reset, which ignores it */
    /* A named limiter instead of a rule (NULL: none), and the client id
     * (NULL: none); binary-safe, into doc. */
    const char *limiter, *client;
    size_t limiter_len, client_len;
    /* A lease: max holders and lease time (not range-checked: the library
     * does); a release: the lease's id (NULL otherwise), into doc. */
    int64_t max, lease_ms;
    const char *lease;
    size_t lease_len;
    /* A settle: what was reserved and what was used, 0 .. 10^9 each. */
    int64_t reserved, actual;
    /* An override: its text (rules, "unlimited" or "deny"), into doc. */
    const char *override;
    struct json_t *doc; /* the parsed line */
} jsonl_event;

/* Parses one line of len bytes (need not be terminated; the newline, if
 * any, is white space). Returns 0 and fills *ev, or -1 with *ev empty and
 * err holding "NAME: message", where NAME is "input" (not JSON, not an
 * object, an unknown field, a value of the wrong type such as 2.0 or "5"),
 * "cost" (an integer cost outside 1..10^9, or a settle's reserved or
 * actual outside 0..10^9) or "time" (an integer "t"
 * outside 0..2^53 - 1). Integers of any size are read: a reset ignores its
 * cost whatever it is. No I/O, no global state; blank lines (see
 * jsonl_blank) are the caller's to skip. */
int jsonl_parse(const char *line, size_t len, jsonl_event *ev, char *err,
                size_t err_len);

/* Releases what the event holds and empties it; an empty event is fine. */
void jsonl_event_free(jsonl_event *ev);

/* True when the line holds only JSON white space (space, tab, CR, LF). */
bool jsonl_blank(const char *line, size_t len);

/* Writes s (n bytes) as a JSON string literal, quotes included, into dst
 * and terminates it; returns its length. For text a person reads (a
 * message): the literal is always valid JSON and UTF-8, bytes that are not
 * UTF-8 appear as the text \xNN, and a value too long for dst is cut at a
 * character and ends with "...". dst_len must be at least 16. */
size_t jsonl_quote(char *dst, size_t dst_len, const char *s, size_t n);

/* Writes the member `"name": VALUE` for a value a program reads back byte
 * for byte (a limiter's name, a client id, a key): a JSON string with
 * JSON's own escapes when its n bytes are UTF-8 (byte 1 is \u0001, the
 * text \xff is "\\xff"), else `"name_hex": "ff01"`, two lowercase hex
 * digits a byte, since a JSON string holds only UTF-8. jsonl_parse reads
 * key_hex, limiter_hex and client_hex so. Returns the length written, or
 * 0 (dst "") when dst_len is too small: a value is never cut. */
size_t jsonl_field(char *dst, size_t dst_len, const char *name, const char *s,
                   size_t n);

#endif /* SLUICE_CLI_JSONL_H */
