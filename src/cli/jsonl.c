/* SPDX-License-Identifier: BSD-3-Clause */
/* jsonl.c - reads one event line of `sluice replay` into a struct; no I/O,
 * so that the fuzzer can drive it alone. */
#include "jsonl.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_T    9007199254740991LL /* 2^53 - 1 */
#define MAX_COST 1000000000LL

/* jansson fails a whole line on an integer beyond 64 bits, yet a reset
 * must ignore its cost, and an acquire must name the cost as the culprit.
 * So a line that overflows is read again from a copy in which every
 * integer of magnitude BIG or more stands as a sentinel of the same sign,
 * INT64_MAX minus the offset of its literal in the line (so a message can
 * quote the literal), and every fraction or exponent as 0.5 (no field takes
 * one). Both are never longer than what they replace, and no accepted
 * value comes near BIG. */
#define SENTINEL_SPAN 4294967296LL /* offsets below 2^32: 4 GiB lines */
#define BIG           (INT64_MAX - SENTINEL_SPAN + 1)
#define BIG_DIGITS    "9223372032559808512" /* BIG in decimal */

#define LOAD_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

typedef enum number_kind {
    NOT_A_NUMBER,
    INTEGER,
    REAL
} number_kind;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* What the n bytes at s are under JSON's grammar of numbers. */
static number_kind number_kind_of(const char *s, size_t n)
{
    size_t i = 0;
    bool real = false;

    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && is_digit(s[i]))
            i++;
    } else {
        return NOT_A_NUMBER;
    }
    if (i < n && s[i] == '.') {
        if (++i >= n || !is_digit(s[i]))
            return NOT_A_NUMBER;
        while (i < n && is_digit(s[i]))
            i++;
        real = true;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit(s[i]))
            return NOT_A_NUMBER;
        while (i < n && is_digit(s[i]))
            i++;
        real = true;
    }
    if (i != n)
        return NOT_A_NUMBER;
    return real ? REAL : INTEGER;
}

/* True when the integer literal (grammar already checked) is BIG or more
 * in magnitude. */
static bool is_big(const char *s, size_t n)
{
    size_t d = s[0] == '-' ? n - 1 : n;
    size_t w = sizeof(BIG_DIGITS) - 1;

    return d > w || (d == w && memcmp(s + (n - d), BIG_DIGITS, w) >= 0);
}

/* Copies line into out (len + 1 bytes) with the numbers rewritten as above;
 * returns the length written. Strings are copied untouched, so the copy
 * has the same tokens as the line, valid or not; only values change. */
static size_t tame_numbers(const char *line, size_t len, char *out)
{
    size_t i = 0, o = 0;
    bool in_string = false;

    while (i < len) {
        char c = line[i];
        size_t n;

        if (in_string) {
            out[o++] = line[i++];
            if (c == '\\' && i < len)
                out[o++] = line[i++];
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c != '-' && !is_digit(c)) {
            in_string = c == '"';
            out[o++] = line[i++];
            continue;
        }
        /* A number token runs as far as these characters do. */
        n = 0;
        while (i + n < len && line[i + n] != '\0' &&
               strchr("0123456789+-.eE", line[i + n]) != NULL)
            n++;
        switch (number_kind_of(line + i, n)) {
        case INTEGER:
            if (is_big(line + i, n)) {
                o += (size_t)sprintf(out + o, "%s%lld", c == '-' ? "-" : "",
                                     (long long)(INT64_MAX - (int64_t)i));
                break;
            }
            memcpy(out + o, line + i, n);
            o += n;
            break;
        case REAL:
            memcpy(out + o, "0.5", 3);
            o += 3;
            break;
        case NOT_A_NUMBER:
            memcpy(out + o, line + i, n);
            o += n;
            break;
        }
        i += n;
    }
    out[o] = '\0';
    return o;
}

/* Shows n bytes of a value (valid UTF-8, as jansson hands them over) in
 * double quotes for a message: control bytes as \u00XX, at most about 64
 * bytes, cut between characters. dst_len must be at least 8. */
static void show(char *dst, size_t dst_len, const char *s, size_t n)
{
    size_t i = 0, o = 0;

    dst[o++] = '"';
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = 1, w;

        while (i + len < n && ((unsigned char)s[i + len] & 0xC0) == 0x80)
            len++;
        w = c < 0x20 ? 6 : c == '"' || c == '\\' ? 2 : len;
        /* Room for the character, then "...", the quote and the end. */
        if (i >= 64 || o + w + 5 > dst_len)
            break;
        if (c < 0x20) {
            snprintf(dst + o, dst_len - o, "\\u%04X", c);
        } else if (c == '"' || c == '\\') {
            dst[o] = '\\';
            dst[o + 1] = (char)c;
        } else {
            memcpy(dst + o, s + i, len);
        }
        o += w;
        i += len;
    }
    if (i < n) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o++] = '"';
    dst[o] = '\0';
}

/* The decimal text of an integer field as the line wrote it. */
static void int_text(char *dst, size_t dst_len, json_int_t v, bool tamed,
                     const char *line, size_t len)
{
    if (tamed && (v >= BIG || v <= -BIG)) {
        size_t off = (size_t)(INT64_MAX - (v < 0 ? -v : v)), n = 0;

        while (off + n < len &&
               (is_digit(line[off + n]) || line[off + n] == '-'))
            n++;
        if (n > 0) {
            snprintf(dst, dst_len, "%.*s%s", (int)(n > 40 ? 40 : n), line + off,
                     n > 40 ? "..." : "");
            return;
        }
    }
    snprintf(dst, dst_len, "%lld", (long long)v);
}

static int fail(jsonl_event *ev, char *err, size_t err_len, const char *name,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Writes "NAME: message" and empties the event. */
static int fail(jsonl_event *ev, char *err, size_t err_len, const char *name,
                const char *fmt, ...)
{
    va_list ap;
    int n;

    jsonl_event_free(ev);
    if (err == NULL || err_len == 0)
        return -1;
    n = snprintf(err, err_len, "%s: ", name);
    if (n >= 0 && (size_t)n < err_len) {
        va_start(ap, fmt);
        vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* "max" and "lease_ms" for a lease, "lease" for a release, nowhere else.
 * Returns 0, or -1 with err written and the event emptied. */
static int lease_fields(jsonl_event *ev, char *err, size_t err_len)
{
    json_t *jmax = json_object_get(ev->doc, "max");
    json_t *jms = json_object_get(ev->doc, "lease_ms");
    json_t *jid = json_object_get(ev->doc, "lease");

    if (ev->op != JSONL_LEASE && (jmax != NULL || jms != NULL)) {
        fail(ev, err, err_len, "input",
             "\"max\" and \"lease_ms\" go with op \"lease\"");
        return -1;
    }
    if (ev->op != JSONL_RELEASE && jid != NULL) {
        fail(ev, err, err_len, "input", "\"lease\" goes with op \"release\"");
        return -1;
    }
    if (ev->op == JSONL_LEASE) {
        if (!json_is_integer(jmax) || !json_is_integer(jms)) {
            fail(ev, err, err_len, "input",
                 "a lease needs \"max\" (holders) and \"lease_ms\", JSON "
                 "integers");
            return -1;
        }
        ev->max = json_integer_value(jmax);
        ev->lease_ms = json_integer_value(jms);
    }
    if (ev->op == JSONL_RELEASE) {
        if (!json_is_string(jid)) {
            fail(ev, err, err_len, "input",
                 "a release needs \"lease\", the id its lease answered");
            return -1;
        }
        ev->lease = json_string_value(jid);
        ev->lease_len = json_string_length(jid);
    }
    return 0;
}

/* The ops on a limiter's rules and overrides: "limiter_set" takes a
 * limiter and a rule, "override" a limiter, a client and "override" (a
 * string), "unoverride" a limiter and a client; "override" goes nowhere
 * else. Returns 0, or -1 with err written and the event emptied. */
static int limiter_fields(jsonl_event *ev, const json_t *jrule, char *err,
                          size_t err_len)
{
    json_t *jov = json_object_get(ev->doc, "override");
    bool admin = ev->op == JSONL_LIMITER_SET || ev->op == JSONL_OVERRIDE ||
                 ev->op == JSONL_UNOVERRIDE;

    if (ev->op != JSONL_OVERRIDE && jov != NULL) {
        fail(ev, err, err_len, "input",
             "\"override\" goes with op "
             "\"override\"");
        return -1;
    }
    if (!admin)
        return 0;
    if (ev->limiter == NULL ||
        (ev->op != JSONL_LIMITER_SET && ev->client == NULL) ||
        (ev->op == JSONL_LIMITER_SET && jrule == NULL) ||
        (ev->op == JSONL_OVERRIDE && !json_is_string(jov)) ||
        json_object_get(ev->doc, "cost") != NULL) {
        fail(ev, err, err_len, "input",
             "limiter_set takes \"limiter\" and \"rule\"; override "
             "\"limiter\", \"client\" and \"override\" (rules, "
             "\"unlimited\" or \"deny\"); unoverride \"limiter\" and "
             "\"client\"; none a cost");
        return -1;
    }
    if (jov != NULL) {
        ev->override = json_string_value(jov);
        if (strlen(ev->override) != json_string_length(jov)) {
            fail(ev, err, err_len, "input", "\"override\" holds a NUL byte");
            return -1;
        }
    }
    return 0;
}

/* A settle's reserved and actual (JSON integers, 0 .. 10^9), on a key
 * and a rule, without a cost; no other op takes them. */
static int settle_fields(jsonl_event *ev, bool tamed, const char *line,
                         size_t len, char *err, size_t err_len)
{
    json_t *jr = json_object_get(ev->doc, "reserved");
    json_t *ja = json_object_get(ev->doc, "actual");
    char q[96];
    int k;

    if (ev->op != JSONL_SETTLE && (jr != NULL || ja != NULL)) {
        fail(ev, err, err_len, "input",
             "\"reserved\" and \"actual\" go with op \"settle\"");
        return -1;
    }
    if (ev->op != JSONL_SETTLE)
        return 0;
    if (!json_is_integer(jr) || !json_is_integer(ja) ||
        json_object_get(ev->doc, "cost") != NULL || ev->limiter != NULL) {
        fail(ev, err, err_len, "input",
             "a settle needs \"reserved\" and \"actual\", JSON integers, "
             "on a key (no \"cost\", no limiter)");
        return -1;
    }
    for (k = 0; k < 2; k++) {
        json_int_t v = json_integer_value(k == 0 ? jr : ja);

        if (v < 0 || v > MAX_COST) {
            int_text(q, sizeof(q), v, tamed, line, len);
            fail(ev, err, err_len, "cost",
                 "%s %s is out of range 0..1000000000",
                 k == 0 ? "reserved" : "actual", q);
            return -1;
        }
    }
    ev->reserved = json_integer_value(jr);
    ev->actual = json_integer_value(ja);
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A value given as NAME_hex (jsonl_field: bytes that are not UTF-8 have
 * no JSON string) becomes NAME in the document, its bytes decoded, as if
 * it had been given so; giving both is bad input. Returns 0, or -1 with
 * err written and the event emptied. */
static int unhex_fields(jsonl_event *ev, char *err, size_t err_len)
{
    static const char *const names[] = {"key", "limiter", "client"};
    size_t i, k, n;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char hex_name[16], *bytes;
        const char *h;
        json_t *jh, *js;
        bool bad;

        snprintf(hex_name, sizeof(hex_name), "%s_hex", names[i]);
        if ((jh = json_object_get(ev->doc, hex_name)) == NULL)
            continue;
        if (json_object_get(ev->doc, names[i]) != NULL)
            return fail(ev, err, err_len, "input",
                        "\"%s\" and \"%s\": give one of them", names[i],
                        hex_name);
        h = json_string_value(jh);
        n = json_string_length(jh);
        bad = h == NULL || n % 2 != 0;
        for (k = 0; !bad && k < n; k++)
            bad = hex_digit(h[k]) < 0;
        if (bad)
            return fail(ev, err, err_len, "input",
                        "\"%s\" must be a string of hex digits, two a byte",
                        hex_name);
        if ((bytes = malloc(n / 2 + 1)) == NULL)
            return fail(ev, err, err_len, "input", "out of memory for \"%s\"",
                        hex_name);
        for (k = 0; k < n / 2; k++)
            bytes[k] =
                (char)(hex_digit(h[2 * k]) * 16 + hex_digit(h[2 * k + 1]));
        /* Not checked as UTF-8: that is what the hex form is for. */
        js = json_stringn_nocheck(bytes, n / 2);
        free(bytes);
        if (js == NULL || json_object_set_new(ev->doc, names[i], js) != 0)
            return fail(ev, err, err_len, "input", "out of memory for \"%s\"",
                        hex_name);
        json_object_del(ev->doc, hex_name);
    }
    return 0;
}

int jsonl_parse(const char *line, size_t len, jsonl_event *ev, char *err,
                size_t err_len)
{
    static const char *const ops[] = {
        "acquire",     "peek",     "reset",     "acquire_at_most",
        "refund",      "lease",    "release",   "settle",
        "limiter_set", "override", "unoverride"};
    json_error_t jerr;
    json_t *jt, *jkey, *jrule, *jcost, *jop, *val;
    const char *name;
    char q[96];
    bool tamed = false;
    size_t i;

    memset(ev, 0, sizeof(*ev));
    ev->op = JSONL_ACQUIRE;
    ev->cost = 1;
    ev->doc = json_loadb(line, len, LOAD_FLAGS, &jerr);
    if (ev->doc == NULL &&
        json_error_code(&jerr) == json_error_numeric_overflow) {
        char *copy;

        if ((long long)len >= SENTINEL_SPAN)
            return fail(ev, err, err_len, "input",
                        "a line of %zu bytes with a number beyond 64 bits",
                        len);
        if ((copy = malloc(len + 1)) == NULL)
            return fail(ev, err, err_len, "input",
                        "out of memory for a line of %zu bytes", len);
        ev->doc =
            json_loadb(copy, tame_numbers(line, len, copy), LOAD_FLAGS, &jerr);
        free(copy);
        tamed = true;
    }
    if (ev->doc == NULL)
        return fail(ev, err, err_len, "input", "line is not JSON: %s",
                    jerr.text);
    if (!json_is_object(ev->doc))
        return fail(ev, err, err_len, "input", "event must be a JSON object");
    json_object_foreach(ev->doc, name, val)
    {
        if (strcmp(name, "t") != 0 && strcmp(name, "key") != 0 &&
            strcmp(name, "rule") != 0 && strcmp(name, "cost") != 0 &&
            strcmp(name, "op") != 0 && strcmp(name, "limiter") != 0 &&
            strcmp(name, "client") != 0 && strcmp(name, "max") != 0 &&
            strcmp(name, "lease_ms") != 0 && strcmp(name, "lease") != 0 &&
            strcmp(name, "reserved") != 0 && strcmp(name, "actual") != 0 &&
            strcmp(name, "override") != 0 && strcmp(name, "key_hex") != 0 &&
            strcmp(name, "limiter_hex") != 0 &&
            strcmp(name, "client_hex") != 0) {
            show(q, sizeof(q), name, strlen(name));
            return fail(ev, err, err_len, "input",
                        "unknown field %s (known: t, key, rule, limiter, "
                        "client, cost, op, max, lease_ms, lease, reserved, "
                        "actual, override, key_hex, limiter_hex, "
                        "client_hex)",
                        q);
        }
    }
    if (unhex_fields(ev, err, err_len) != 0)
        return -1;
    jt = json_object_get(ev->doc, "t");
    jkey = json_object_get(ev->doc, "key");
    jrule = json_object_get(ev->doc, "rule");
    jcost = json_object_get(ev->doc, "cost");
    jop = json_object_get(ev->doc, "op");
    if (jt == NULL)
        return fail(ev, err, err_len, "input",
                    "missing \"t\" (virtual time in ms)");
    if (!json_is_integer(jt))
        return fail(ev, err, err_len, "input",
                    "\"t\" must be a JSON integer (ms), not a string, "
                    "fraction or exponent");
    if (json_object_get(ev->doc, "limiter") != NULL) {
        json_t *jl = json_object_get(ev->doc, "limiter");
        json_t *jc = json_object_get(ev->doc, "client");

        /* By name: the rules are the limiter's, the key its client's. */
        if (!json_is_string(jl) || (jc != NULL && !json_is_string(jc)))
            return fail(ev, err, err_len, "input",
                        "\"limiter\" and \"client\" must be strings");
        if (jkey != NULL || (jrule != NULL && !(json_is_string(jop) &&
                                                strcmp(json_string_value(jop),
                                                       "limiter_set") == 0)))
            return fail(ev, err, err_len, "input",
                        "an event names a limiter (and a client) or a key "
                        "and a rule, not both");
        ev->limiter = json_string_value(jl);
        ev->limiter_len = json_string_length(jl);
        if (jc != NULL) {
            ev->client = json_string_value(jc);
            ev->client_len = json_string_length(jc);
        }
    } else if (json_object_get(ev->doc, "client") != NULL) {
        return fail(ev, err, err_len, "input",
                    "\"client\" goes with \"limiter\"");
    } else if (jkey == NULL) {
        return fail(ev, err, err_len, "input", "missing \"key\"");
    } else if (!json_is_string(jkey)) {
        return fail(ev, err, err_len, "input", "\"key\" must be a string");
    } else {
        ev->key = json_string_value(jkey);
        ev->key_len = json_string_length(jkey);
    }
    if (jop != NULL) {
        const char *op;
        size_t op_len;

        if (!json_is_string(jop))
            return fail(ev, err, err_len, "input",
                        "\"op\" must be a string (acquire, peek, reset, "
                        "acquire_at_most, refund, lease, release, settle, "
                        "limiter_set, override or unoverride)");
        op = json_string_value(jop);
        op_len = json_string_length(jop);
        ev->op = 0;
        /* By length: "peek\u0000x" is not "peek". */
        for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
            if (op_len == strlen(ops[i]) && memcmp(op, ops[i], op_len) == 0)
                ev->op = (jsonl_op)(JSONL_ACQUIRE + (int)i);
        if (ev->op == 0) {
            show(q, sizeof(q), op, op_len);
            return fail(ev, err, err_len, "input",
                        "unknown op %s (use acquire, peek, reset, "
                        "acquire_at_most, refund, lease, release, settle, "
                        "limiter_set, override or unoverride)",
                        q);
        }
    }
    if (jrule != NULL) {
        if (!json_is_string(jrule))
            return fail(ev, err, err_len, "input", "\"rule\" must be a string");
        ev->rule = json_string_value(jrule);
        /* A NUL would end the text early and hide what follows. */
        if (strlen(ev->rule) != json_string_length(jrule)) {
            show(q, sizeof(q), ev->rule, json_string_length(jrule));
            return fail(ev, err, err_len, "rule", "rule %s holds a NUL byte",
                        q);
        }
    }
    if ((ev->op == JSONL_LEASE || ev->op == JSONL_RELEASE) &&
        (ev->limiter != NULL || jrule != NULL || jcost != NULL))
        return fail(ev, err, err_len, "input",
                    "a lease or a release takes a key, not a limiter, a "
                    "rule or a cost");
    if (lease_fields(ev, err, err_len) != 0 ||
        settle_fields(ev, tamed, line, len, err, err_len) != 0 ||
        limiter_fields(ev, jrule, err, err_len) != 0)
        return -1;
    /* A reset ignores cost entirely, whatever it holds. */
    if (jcost != NULL && ev->op != JSONL_RESET) {
        /* A refund of 0 gives back nothing (sluice_refund). */
        long long lo = ev->op == JSONL_REFUND ? 0 : 1;

        if (!json_is_integer(jcost))
            return fail(ev, err, err_len, "input",
                        "\"cost\" must be a JSON integer");
        if (json_integer_value(jcost) < lo ||
            json_integer_value(jcost) > MAX_COST) {
            int_text(q, sizeof(q), json_integer_value(jcost), tamed, line, len);
            return fail(ev, err, err_len, "cost",
                        "cost %s is out of range %lld..1000000000", q, lo);
        }
        ev->cost = json_integer_value(jcost);
    }
    if (json_integer_value(jt) < 0 || json_integer_value(jt) > MAX_T) {
        int_text(q, sizeof(q), json_integer_value(jt), tamed, line, len);
        return fail(ev, err, err_len, "time",
                    "\"t\" %s is outside 0..9007199254740991 ms", q);
    }
    ev->t = json_integer_value(jt);
    return 0;
}

void jsonl_event_free(jsonl_event *ev)
{
    json_decref(ev->doc);
    memset(ev, 0, sizeof(*ev));
}

bool jsonl_blank(const char *line, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' &&
            line[i] != '\n')
            return false;
    return true;
}

/* Length of the UTF-8 character at s (at most n bytes), or 0 when the
 * bytes there are not one (overlong forms and surrogates included). */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    size_t len, i;
    unsigned char lo = 0x80, hi = 0xBF;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4;
    else
        return 0;
    if (s[0] == 0xE0)
        lo = 0xA0;
    else if (s[0] == 0xED)
        hi = 0x9F;
    else if (s[0] == 0xF0)
        lo = 0x90;
    else if (s[0] == 0xF4)
        hi = 0x8F;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* jsonl_quote, or with whole set: 0 (dst "") where the value would be
 * cut. */
static size_t quote(char *dst, size_t dst_len, const char *s, size_t n,
                    bool whole)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;

    dst[o++] = '"';
    while (i < n) {
        char unit[8];
        size_t ulen = utf8_char(u + i, n - i), take = ulen;

        if (ulen == 0) {
            ulen = (size_t)snprintf(unit, sizeof(unit), "\\\\x%02x", u[i]);
            take = 1;
        } else if (u[i] == '"' || u[i] == '\\') {
            unit[0] = '\\';
            unit[1] = (char)u[i];
            ulen = 2;
        } else if (u[i] < 0x20) {
            const char *short_form = strchr("\b\f\n\r\t", u[i]);

            if (u[i] != 0 && short_form != NULL) {
                unit[0] = '\\';
                unit[1] = "bfnrt"[short_form - "\b\f\n\r\t"];
                ulen = 2;
            } else {
                ulen = (size_t)snprintf(unit, sizeof(unit), "\\u%04X", u[i]);
            }
        } else {
            memcpy(unit, u + i, ulen);
        }
        /* Room for the unit, then "...", the quote and the terminator. */
        if (o + ulen + 5 > dst_len) {
            if (whole) {
                dst[0] = '\0';
                return 0;
            }
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(dst + o, unit, ulen);
        o += ulen;
        i += take;
    }
    dst[o++] = '"';
    dst[o] = '\0';
    return o;
}

size_t jsonl_quote(char *dst, size_t dst_len, const char *s, size_t n)
{
    return quote(dst, dst_len, s, n, false);
}

size_t jsonl_field(char *dst, size_t dst_len, const char *name, const char *s,
                   size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i, o, k;
    bool utf8 = true;

    for (i = 0; utf8 && i < n; i += k)
        utf8 = (k = utf8_char(u + i, n - i)) > 0;
    o = (size_t)snprintf(dst, dst_len, "\"%s%s\": ", name, utf8 ? "" : "_hex");
    if (o >= dst_len)
        goto cut;
    if (utf8) {
        if ((k = quote(dst + o, dst_len - o, s, n, true)) == 0)
            goto cut;
        return o + k;
    }
    if (o + 2 * n + 3 > dst_len)
        goto cut;
    dst[o++] = '"';
    for (i = 0; i < n; i++) {
        dst[o++] = "0123456789abcdef"[u[i] >> 4];
        dst[o++] = "0123456789abcdef"[u[i] & 15];
    }
    dst[o++] = '"';
    dst[o] = '\0';
    return o;
cut:
    dst[0] = '\0';
    return 0;
}
