/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_jsonl.c - the CLI's replay line parser (src/cli/jsonl.c) on
 * arbitrary bytes: an event it accepts is in range, a line it refuses gets
 * a named message, and every message and key quoted back is valid JSON. */
#include "jsonl.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const uint8_t *data, size_t size,
                   const char *detail)
{
    fprintf(stderr, "fuzz_jsonl: %s\n  line: \"%.*s\"\n  %s\n", what,
            (int)(size > 300 ? 300 : size), (const char *)data, detail);
    abort();
}

/* Whether s is UTF-8, by jansson's own check (json_stringn refuses
 * anything else). */
static bool utf8(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);

    json_decref(j);
    return j != NULL;
}

/* Quotes s with a buffer of dst_len; the literal must be valid JSON, and
 * when nothing was cut it must read back as s (valid UTF-8 in). */
static void check_quote(const char *s, size_t n, size_t dst_len, bool utf8_in,
                        const uint8_t *data, size_t size)
{
    char *dst = malloc(dst_len);
    json_error_t jerr;
    json_t *back;
    size_t len;

    if (dst == NULL)
        return;
    len = jsonl_quote(dst, dst_len, s, n);
    if (len >= dst_len || strlen(dst) != len)
        broken("jsonl_quote overran or miscounted", data, size, dst);
    back = json_loadb(dst, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (back == NULL || !json_is_string(back))
        broken("jsonl_quote wrote invalid JSON", data, size, jerr.text);
    if (utf8_in && (len < 5 || strcmp(dst + len - 4, "...\"") != 0) &&
        (json_string_length(back) != n ||
         memcmp(json_string_value(back), s, n) != 0))
        broken("jsonl_quote does not read back as its input", data, size, dst);
    json_decref(back);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {
        "input: ", "cost: ", "rule: ", "time: "};
    const char *line = (const char *)data;
    char err[700];
    jsonl_event ev;
    size_t i;
    bool named = false;

    memset(err, 0x55, sizeof(err));
    if (jsonl_parse(line, size, &ev, err, sizeof(err)) != 0) {
        if (memchr(err, '\0', sizeof(err)) == NULL)
            broken("an unterminated message", data, size, "");
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            named |= strncmp(err, names[i], strlen(names[i])) == 0;
        if (!named)
            broken("a message without its name", data, size, err);
        if (ev.doc != NULL || ev.key != NULL || ev.rule != NULL)
            broken("a refused line left an event behind", data, size, err);
        /* jansson may quote bytes of the line that are not UTF-8. */
        check_quote(err, strlen(err), 6 * sizeof(err) + 16, false, data, size);
        if (jsonl_blank(line, size) && strncmp(err, "input: ", 7) != 0)
            broken("a blank line refused for a value", data, size, err);
    } else {
        json_t *jrule = json_object_get(ev.doc, "rule");

        if (jsonl_blank(line, size))
            broken("a blank line accepted", data, size, "");
        if (ev.t < 0 || ev.t > 9007199254740991LL)
            broken("t out of range", data, size, "");
        if (ev.op != JSONL_ACQUIRE && ev.op != JSONL_PEEK &&
            ev.op != JSONL_RESET && ev.op != JSONL_AT_MOST &&
            ev.op != JSONL_REFUND && ev.op != JSONL_LEASE &&
            ev.op != JSONL_RELEASE && ev.op != JSONL_SETTLE &&
            ev.op != JSONL_LIMITER_SET && ev.op != JSONL_OVERRIDE &&
            ev.op != JSONL_UNOVERRIDE)
            broken("a bad op", data, size, "");
        /* A settle's amounts are in range, and only a settle's. */
        if (ev.op == JSONL_SETTLE
                ? ev.reserved < 0 || ev.reserved > 1000000000 ||
                      ev.actual < 0 || ev.actual > 1000000000
                : ev.reserved != 0 || ev.actual != 0)
            broken("settle amounts out of range", data, size, "");
        /* A limiter's rules and overrides: a limiter, a client but for
         * limiter_set, its rule, the whole override text, no cost. */
        if ((ev.op == JSONL_LIMITER_SET || ev.op == JSONL_OVERRIDE ||
             ev.op == JSONL_UNOVERRIDE) &&
            (ev.limiter == NULL || ev.cost != 1 ||
             (ev.op != JSONL_LIMITER_SET && ev.client == NULL) ||
             (ev.op == JSONL_LIMITER_SET && ev.rule == NULL)))
            broken("a limiter op without its fields", data, size, "");
        if ((ev.op == JSONL_OVERRIDE) !=
            (ev.override != NULL &&
             strlen(ev.override) ==
                 json_string_length(json_object_get(ev.doc, "override"))))
            broken("an override without its whole text", data, size, "");
        /* A lease takes max and lease_ms, a release its lease's id, whole;
         * neither takes a limiter or a rule. */
        if ((ev.op == JSONL_LEASE || ev.op == JSONL_RELEASE) &&
            (ev.limiter != NULL || ev.rule != NULL))
            broken("a lease with a limiter or a rule", data, size, "");
        if ((ev.op == JSONL_RELEASE) !=
            (ev.lease != NULL &&
             ev.lease_len ==
                 json_string_length(json_object_get(ev.doc, "lease"))))
            broken("a release without its whole lease id", data, size, "");
        if (ev.op != JSONL_LEASE && (ev.max != 0 || ev.lease_ms != 0))
            broken("lease fields on another op", data, size, "");
        if (ev.lease != NULL)
            check_quote(ev.lease, ev.lease_len, 6 * ev.lease_len + 16, true,
                        data, size);
        if (ev.cost < (ev.op == JSONL_REFUND ? 0 : 1) || ev.cost > 1000000000 ||
            (ev.op == JSONL_RESET && ev.cost != 1))
            broken("cost out of range", data, size, "");
        if (ev.limiter == NULL &&
            (ev.key == NULL ||
             ev.key_len != json_string_length(json_object_get(ev.doc, "key"))))
            broken("the key lost bytes", data, size, "");
        if ((ev.rule == NULL) != (jrule == NULL) ||
            (ev.rule != NULL && strlen(ev.rule) != json_string_length(jrule)))
            broken("a rule with a NUL inside", data, size, "");
        if (ev.limiter != NULL &&
            (ev.key != NULL ||
             (ev.rule != NULL && ev.op != JSONL_LIMITER_SET) ||
             ev.limiter_len !=
                 json_string_length(json_object_get(ev.doc, "limiter"))))
            broken("a limiter event with a key or a rule, or cut", data, size,
                   "");
        /* What the CLI quotes back: the key, or the limiter and client.
         * One given in hex (key_hex, limiter_hex, client_hex: the parser
         * decodes it into key, limiter, client) may be any bytes, which
         * the quote shows (\\xHH) rather than reads back as; UTF-8 must
         * read back (jansson tells UTF-8). */
        if (ev.key != NULL)
            check_quote(ev.key, ev.key_len, 6 * ev.key_len + 16,
                        utf8(ev.key, ev.key_len), data, size);
        if (ev.limiter != NULL)
            check_quote(ev.limiter, ev.limiter_len, 6 * ev.limiter_len + 16,
                        utf8(ev.limiter, ev.limiter_len), data, size);
        if (ev.client != NULL)
            check_quote(ev.client, ev.client_len, 6 * ev.client_len + 16,
                        utf8(ev.client, ev.client_len), data, size);
        jsonl_event_free(&ev);
        if (ev.doc != NULL)
            broken("jsonl_event_free left the document", data, size, "");
    }
    /* Any bytes at all, and a buffer from tiny to roomy: valid JSON. */
    check_quote(line, size, 16 + (size > 0 ? data[0] % 64 : 0), false, data,
                size);
    return 0;
}
