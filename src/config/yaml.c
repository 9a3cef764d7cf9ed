/* SPDX-License-Identifier: BSD-3-Clause */
/* yaml.c - libyaml's events read strictly (yaml.h): anchors, aliases and
 * tags refused, integers only unquoted and decimal, booleans only true and
 * false, unknown and repeated keys refused, since in a configuration a
 * typo must not pass as a default; a fault's line and column from
 * libyaml's marks (or, for bytes that are not UTF-8, from its offset). */
#include "config/yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 1000

/* "FILE:LINE:COL: msg" at mark m; false, to return. */
bool sl_yaml_fail(sl_yaml *r, const yaml_mark_t *m, const char *fmt, ...)
{
    char msg[SL_ERR_LEN];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl_errf(r->err, r->err_len, "%s:%zu:%zu: %s", r->file, m->line + 1,
            m->column + 1, msg);
    return false;
}

bool sl_yaml_nomem(sl_yaml *r)
{
    r->st = SLUICE_ENOMEM;
    sl_errf(r->err, r->err_len, "%s: out of memory", r->file);
    return false;
}

/* libyaml's own fault: the text is not UTF-8, or not YAML. */
static bool yaml_fault(sl_yaml *r)
{
    yaml_mark_t m = r->yp.problem_mark;
    size_t i;

    if (r->yp.error == YAML_MEMORY_ERROR)
        return sl_yaml_nomem(r);
    if (r->yp.error == YAML_READER_ERROR) {
        /* Only the byte offset is known: the line and column from it. */
        memset(&m, 0, sizeof(m));
        for (i = 0; i < r->yp.problem_offset && i < r->len; i++) {
            if (r->buf[i] == '\n') {
                m.line++;
                m.column = 0;
            } else {
                m.column++;
            }
        }
        return sl_yaml_fail(
            r, &m,
            "not UTF-8 (%s): a name or a client of other bytes goes "
            "in name_hex or client_hex",
            r->yp.problem != NULL ? r->yp.problem : "?");
    }
    if (r->yp.context != NULL)
        return sl_yaml_fail(r, &m, "YAML: %s (%s at %zu:%zu)",
                            r->yp.problem != NULL ? r->yp.problem : "?",
                            r->yp.context, r->yp.context_mark.line + 1,
                            r->yp.context_mark.column + 1);
    return sl_yaml_fail(r, &m, "YAML: %s",
                        r->yp.problem != NULL ? r->yp.problem : "?");
}

/* The next event into r->ev; false on a fault, or on what the schema has
 * no use for: anchors, aliases, tags. */
bool sl_yaml_next(sl_yaml *r)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;

    if (r->have)
        yaml_event_delete(&r->ev);
    r->have = false;
    if (!yaml_parser_parse(&r->yp, &r->ev))
        return yaml_fault(r);
    r->have = true;
    if (r->ev.type == YAML_SCALAR_EVENT) {
        anchor = r->ev.data.scalar.anchor;
        tag = r->ev.data.scalar.tag;
    } else if (r->ev.type == YAML_SEQUENCE_START_EVENT) {
        anchor = r->ev.data.sequence_start.anchor;
        tag = r->ev.data.sequence_start.tag;
    } else if (r->ev.type == YAML_MAPPING_START_EVENT) {
        anchor = r->ev.data.mapping_start.anchor;
        tag = r->ev.data.mapping_start.tag;
    } else if (r->ev.type == YAML_ALIAS_EVENT) {
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "an alias (*%s): expected each value written out",
                            (const char *)r->ev.data.alias.anchor);
    }
    if (anchor != NULL)
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "an anchor (&%s): expected each value written out, "
                            "without anchors or aliases",
                            (const char *)anchor);
    if (tag != NULL)
        return sl_yaml_fail(r, &r->ev.start_mark,
                            "a tag (%s): expected plain values, without tags",
                            (const char *)tag);
    return true;
}

/* What the event is, for "found ...": a scalar quoted (64 bytes at most),
 * else its kind. */
const char *sl_yaml_found(const sl_yaml *r, char *dst, size_t len)
{
    char q[300];

    if (sl_yaml_is_null(r)) {
        snprintf(dst, len, "nothing (null)");
    } else if (r->ev.type == YAML_SCALAR_EVENT) {
        sl_quote(q, sizeof(q), r->ev.data.scalar.value,
                 r->ev.data.scalar.length);
        snprintf(dst, len, "\"%s\"", q);
    } else {
        snprintf(dst, len, "%s",
                 r->ev.type == YAML_MAPPING_START_EVENT    ? "a mapping"
                 : r->ev.type == YAML_SEQUENCE_START_EVENT ? "a list"
                                                           : "nothing");
    }
    return dst;
}

/* "KEY: expected WHAT, found ...". */
bool sl_yaml_wrong(sl_yaml *r, const char *key, const char *expected)
{
    char f[320];

    return sl_yaml_fail(r, &r->ev.start_mark, "%s: expected %s, found %s", key,
                        expected, sl_yaml_found(r, f, sizeof(f)));
}

/* A plain empty, ~ or null: YAML's null, which a list or mapping left
 * empty (all of it commented out) reads as. */
bool sl_yaml_is_null(const sl_yaml *r)
{
    const char *v = (const char *)r->ev.data.scalar.value;

    return r->ev.type == YAML_SCALAR_EVENT &&
           r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (strcmp(v, "") == 0 || strcmp(v, "~") == 0 ||
            strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
            strcmp(v, "NULL") == 0);
}

bool sl_yaml_is_scalar(const sl_yaml *r)
{
    return r->ev.type == YAML_SCALAR_EVENT && !sl_yaml_is_null(r);
}

/* An integer lo..hi, unquoted, decimal, no leading zero. */
bool sl_yaml_int(sl_yaml *r, const char *key, int64_t lo, int64_t hi,
                 const char *unit, int64_t *out)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    char expected[128];
    int64_t v = 0;
    size_t i = 0, len = r->ev.data.scalar.length;
    bool neg = false;

    snprintf(expected, sizeof(expected), "an unquoted integer %lld..%lld%s",
             (long long)lo, (long long)hi, unit);
    if (!sl_yaml_is_scalar(r) ||
        r->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return sl_yaml_wrong(r, key, expected);
    if (s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i == len || (s[i] == '0' && len > i + 1))
        return sl_yaml_wrong(r, key, expected);
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return sl_yaml_wrong(r, key, expected);
        if (v > (INT64_MAX - 9) / 10)
            return sl_yaml_wrong(r, key, expected); /* past any bound */
        v = v * 10 + (s[i] - '0');
    }
    if (neg)
        v = -v;
    if (v < lo || v > hi)
        return sl_yaml_wrong(r, key, expected);
    *out = v;
    return true;
}

bool sl_yaml_bool(sl_yaml *r, const char *key, bool *out)
{
    const char *s = (const char *)r->ev.data.scalar.value;

    if (sl_yaml_is_scalar(r) &&
        r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)) {
        *out = s[0] == 't';
        return true;
    }
    return sl_yaml_wrong(r, key, "true or false, unquoted");
}

/* One of words (NULL-terminated), as its index. */
bool sl_yaml_word(sl_yaml *r, const char *key, const char *const *words,
                  const char *expected, int *out)
{
    int i;

    if (sl_yaml_is_scalar(r))
        for (i = 0; words[i] != NULL; i++)
            if (strlen(words[i]) == r->ev.data.scalar.length &&
                memcmp(words[i], r->ev.data.scalar.value,
                       r->ev.data.scalar.length) == 0) {
                *out = i;
                return true;
            }
    return sl_yaml_wrong(r, key, expected);
}

/* A name or a client: its text, or with hex its bytes in hex digits (two
 * a byte, either case); 1..NAME_MAX_LEN bytes, copied into *out. */
bool sl_yaml_bytes(sl_yaml *r, const char *key, bool hex, char **out,
                   size_t *out_len)
{
    const char *s = (const char *)r->ev.data.scalar.value;
    size_t len = r->ev.data.scalar.length, i;
    char *b;

    if (!sl_yaml_is_scalar(r))
        return sl_yaml_wrong(r, key,
                             hex ? "2..2000 hex digits, two a byte"
                                 : "a string of 1..1000 bytes");
    if (!hex) {
        if (len > NAME_MAX_LEN)
            return sl_yaml_fail(r, &r->ev.start_mark,
                                "%s of %zu bytes: expected 1..%d", key, len,
                                NAME_MAX_LEN);
        if ((b = sl_memdup(s, len)) == NULL)
            goto nomem;
        *out = b;
        *out_len = len;
        return true;
    }
    if (len % 2 != 0 || len > 2 * NAME_MAX_LEN ||
        strspn(s, "0123456789abcdefABCDEF") != len)
        return sl_yaml_wrong(r, key, "2..2000 hex digits, two a byte");
    if ((b = sl_malloc(len / 2 + 1)) == NULL)
        goto nomem;
    for (i = 0; i < len / 2; i++) {
        char pair[3] = {s[2 * i], s[2 * i + 1], '\0'};

        b[i] = (char)strtoul(pair, NULL, 16);
    }
    *out = b;
    *out_len = len / 2;
    return true;
nomem:
    return sl_yaml_nomem(r);
}

/* ---------------------------------------------------------- mappings */

/* The next key of the mapping begun (its index in k->names), or -1 at its
 * end, -2 on a fault; the value's event is then read. */
int sl_yaml_key(sl_yaml *r, sl_yaml_keys *k)
{
    char list[256], f[320];
    const char *s;
    size_t i, n;
    int at;

    if (!sl_yaml_next(r))
        return -2;
    if (r->ev.type == YAML_MAPPING_END_EVENT)
        return -1;
    if (!sl_yaml_is_scalar(r)) {
        sl_yaml_fail(r, &r->ev.start_mark,
                     "a key in %s: expected a string, found %s", k->what,
                     sl_yaml_found(r, f, sizeof(f)));
        return -2;
    }
    s = (const char *)r->ev.data.scalar.value;
    for (at = 0; k->names[at] != NULL; at++)
        if (strlen(k->names[at]) == r->ev.data.scalar.length &&
            memcmp(k->names[at], s, r->ev.data.scalar.length) == 0)
            break;
    if (k->names[at] == NULL) {
        for (n = 0, i = 0; k->names[i] != NULL; i++)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s",
                                  i == 0                    ? ""
                                  : k->names[i + 1] == NULL ? " or "
                                                            : ", ",
                                  k->names[i]);
        sl_yaml_fail(r, &r->ev.start_mark, "unknown key %s in %s: expected %s",
                     sl_yaml_found(r, f, sizeof(f)), k->what, list);
        return -2;
    }
    if (k->seen & (1u << at)) {
        sl_yaml_fail(r, &r->ev.start_mark, "%s again in %s (first at %zu:%zu)",
                     k->names[at], k->what, k->at[at].line + 1,
                     k->at[at].column + 1);
        return -2;
    }
    k->seen |= 1u << at;
    k->at[at] = r->ev.start_mark;
    return sl_yaml_next(r) ? at : -2;
}

bool sl_yaml_has(const sl_yaml_keys *k, int at)
{
    return (k->seen & (1u << at)) != 0;
}

/* A value that must open a mapping (null: an empty one, *empty set). */
bool sl_yaml_mapping(sl_yaml *r, const char *key, bool *empty)
{
    *empty = sl_yaml_is_null(r);
    if (*empty || r->ev.type == YAML_MAPPING_START_EVENT)
        return true;
    return sl_yaml_wrong(r, key, "a mapping");
}

/* A name of the HTTP policy, or a unit's, into dst: 0..max bytes, each
 * one ok says. */
bool sl_yaml_label(sl_yaml *r, const char *key, size_t max, bool unit,
                   char *dst)
{
    const unsigned char *s = r->ev.data.scalar.value;
    size_t len = r->ev.data.scalar.length, i;
    char expected[96];

    snprintf(expected, sizeof(expected), "%s, 0..%zu bytes",
             unit ? "A-Z a-z 0-9 . _ -" : "printable ASCII", max);
    if (r->ev.type != YAML_SCALAR_EVENT || len > max)
        return sl_yaml_wrong(r, key, expected);
    for (i = 0; i < len; i++)
        if (unit ? !((s[i] != '\0' && strchr("._-", s[i]) != NULL) ||
                     (s[i] >= '0' && s[i] <= '9') ||
                     (s[i] >= 'a' && s[i] <= 'z') ||
                     (s[i] >= 'A' && s[i] <= 'Z'))
                 : (s[i] < 0x20 || s[i] > 0x7e))
            return sl_yaml_wrong(r, key, expected);
    memcpy(dst, s, len);
    dst[len] = '\0';
    return true;
}

/* A list of items, each a mapping read by item (null: an empty list). */
bool sl_yaml_list(sl_yaml *r, const char *key, const char *item_what,
                  bool (*item)(sl_yaml *r, void *arg), void *arg)
{
    char f[320];

    if (sl_yaml_is_null(r))
        return true;
    if (r->ev.type != YAML_SEQUENCE_START_EVENT)
        return sl_yaml_wrong(r, key, "a list");
    for (;;) {
        if (!sl_yaml_next(r))
            return false;
        if (r->ev.type == YAML_SEQUENCE_END_EVENT)
            return true;
        if (r->ev.type != YAML_MAPPING_START_EVENT)
            return sl_yaml_fail(r, &r->ev.start_mark,
                                "%s: expected %s, found %s", key, item_what,
                                sl_yaml_found(r, f, sizeof(f)));
        if (!item(r, arg))
            return false;
    }
}

/* Pass one, YAML alone: a fault of the syntax is named as such, not as
 * the schema's complaint about what libyaml gave before it (a mapping
 * ended early by a line indented wrong reads as one missing a key). */
bool sl_yaml_check(sl_yaml *r)
{
    yaml_mark_t at;
    int depth = 0;
    bool end;

    for (;;) {
        if (!yaml_parser_parse(&r->yp, &r->ev))
            return yaml_fault(r);
        end = r->ev.type == YAML_STREAM_END_EVENT;
        if (r->ev.type == YAML_SEQUENCE_START_EVENT ||
            r->ev.type == YAML_MAPPING_START_EVENT)
            depth++;
        else if (r->ev.type == YAML_SEQUENCE_END_EVENT ||
                 r->ev.type == YAML_MAPPING_END_EVENT)
            depth--;
        at = r->ev.start_mark;
        yaml_event_delete(&r->ev);
        /* libyaml keeps a possible key for each open flow collection and
         * looks at all of them at every token: quadratic in the depth
         * (100,000 '[' took 52 s). So the depth is cut here, before
         * libyaml reads much past it. */
        if (depth > SL_YAML_MAX_DEPTH)
            return sl_yaml_fail(r, &at,
                                "nested more than %d deep: expected the "
                                "schema's %d levels at most",
                                SL_YAML_MAX_DEPTH, SL_YAML_SCHEMA_DEPTH);
        if (end)
            return true;
    }
}
