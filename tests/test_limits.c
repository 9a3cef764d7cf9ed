/* SPDX-License-Identifier: BSD-3-Clause */
/* test_limits.c - limits files (src/config/, docs/LIMITS.md) without a
 * server: a good file's form field by field, binary names and clients,
 * the caps of the calls, every class of fault named with its line and
 * column and what was expected, the size and depth bounds, the writer's
 * text read back to the same form, and allocation failures. */
#include "config/limits.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static sl_limits *parse_ok(const char *text)
{
    char err[512] = "";
    sl_limits *l = NULL;

    if (sl_limits_parse("t.yaml", text, strlen(text), &l, err, sizeof(err)) !=
        SLUICE_OK)
        fail_msg("parse: %s\n%s", err, text);
    return l;
}

/* The fault of text: exactly want, and no form; a mismatch is printed
 * and counted, so that one run shows them all. */
static int mismatches;

static void fault(const char *text, const char *want)
{
    char err[512] = "";
    sl_limits *l = (sl_limits *)&err; /* must become NULL */
    sluice_status st;

    st = sl_limits_parse("t.yaml", text, strlen(text), &l, err, sizeof(err));
    if (st != SLUICE_EINVAL || l != NULL || strcmp(err, want) != 0) {
        printf("status %d for\n%.300s\ngot  %s\nwant %s\n", (int)st, text, err,
               want);
        mismatches++;
    }
}

static const char *rules_text(const sluice_ruleset *rs)
{
    static char buf[600];

    sluice_ruleset_format(rs, buf, sizeof(buf));
    return buf;
}

static const char good[] = "# sluice limits\n"
                           "version: 1\n"
                           "limiters:\n"
                           "  - name: api\n"
                           "    rules: \"sliding:100/1m+fixed:2000/1h\"\n"
                           "    keepalive_ms: 0\n"
                           "    policy:\n"
                           "      fail: fallback\n"
                           "      fallback_instances: 4\n"
                           "      deny_cache: true\n"
                           "      reserve_ms: 100\n"
                           "      reserve_share: 10\n"
                           "      shadow: false\n"
                           "      http_name: \"api v2\"\n"
                           "      unit: content-bytes\n"
                           "      unit_name: tokens\n"
                           "    overrides:\n"
                           "      - {client: vip-1, rules: unlimited}\n"
                           "      - {client: bad-bot, rules: deny}\n"
                           "      - client: partner\n"
                           "        rules: \"fixed:10000/1h\"\n"
                           "  - name: login\n"
                           "    rules: gcra:5/1m,burst=2\n"
                           "    keepalive_ms: 600000\n"
                           "  - name: budget\n"
                           "    rules: token:1000/1m\n"
                           "    policy: {shadow: true}\n";

/* The example file: each limiter, sorted by name, with every field. */
static void good_file_reads_into_the_form(void **state)
{
    sl_limits *l = parse_ok(good);
    const sl_limits_limiter *api, *b, *login;
    const sl_limits_override *o;
    sluice_limiter_override ov;

    (void)state;
    assert_int_equal(l->n, 3);
    api = &l->lims[0];
    b = &l->lims[1];
    login = &l->lims[2];
    assert_memory_equal(api->name, "api", 3);
    assert_int_equal(api->name_len, 3);
    assert_memory_equal(b->name, "budget", 6);
    assert_memory_equal(login->name, "login", 5);
    assert_ptr_equal(sl_limits_find(l, "login", 5), login);
    assert_null(sl_limits_find(l, "log", 3));
    assert_string_equal(rules_text(&api->rules),
                        "sliding:100/60000ms+fixed:2000/3600000ms");
    assert_int_equal(api->keepalive_ms, 0);
    assert_int_equal(api->line, 4);
    assert_int_equal(api->col, 5);
    assert_int_equal(api->policy.set,
                     SL_LIMITS_POLICY_FAIL | SL_LIMITS_POLICY_DENY_CACHE |
                         SL_LIMITS_POLICY_RESERVE | SL_LIMITS_POLICY_SHADOW |
                         SL_LIMITS_POLICY_HTTP);
    assert_int_equal(api->policy.fail, SLUICE_FAIL_FALLBACK);
    assert_int_equal(api->policy.fallback_instances, 4);
    assert_true(api->policy.deny_cache);
    assert_int_equal(api->policy.reserve_ms, 100);
    assert_int_equal(api->policy.reserve_share, 10);
    assert_false(api->policy.shadow);
    assert_string_equal(api->policy.http_name, "api v2");
    assert_int_equal(api->policy.unit, SLUICE_UNIT_CONTENT_BYTES);
    assert_string_equal(api->policy.unit_name, "tokens");
    /* Overrides sorted by client. */
    assert_int_equal(api->nover, 3);
    assert_memory_equal(api->overs[0].client, "bad-bot", 7);
    assert_int_equal(api->overs[0].kind, SLUICE_OVERRIDE_DENY);
    assert_memory_equal(api->overs[1].client, "partner", 7);
    o = sl_limits_find_override(api, "partner", 7);
    assert_ptr_equal(o, &api->overs[1]);
    assert_int_equal(o->line, 20);
    assert_int_equal(o->col, 9);
    sl_limits_override_get(o, &ov);
    assert_int_equal(ov.kind, SLUICE_OVERRIDE_RULES);
    assert_string_equal(rules_text(&ov.rules), "fixed:10000/3600000ms");
    assert_int_equal(api->overs[2].kind, SLUICE_OVERRIDE_UNLIMITED);
    assert_null(sl_limits_find_override(api, "vip", 3));
    assert_int_equal(login->keepalive_ms, 600000);
    assert_int_equal(login->policy.set, 0);
    assert_int_equal(login->nover, 0);
    assert_string_equal(rules_text(&login->rules), "gcra:5/60000ms,burst=2");
    assert_int_equal(b->policy.set, SL_LIMITS_POLICY_SHADOW);
    assert_true(b->policy.shadow);
    sl_limits_free(l);
}

/* Empty lists and mappings, written as null (all commented out). */
static void empty_lists_read_as_none(void **state)
{
    sl_limits *l = parse_ok("version: 1\nlimiters: []\n");

    (void)state;
    assert_int_equal(l->n, 0);
    sl_limits_free(l);
    l = parse_ok("version: 1\nlimiters:\n# - name: api\n");
    assert_int_equal(l->n, 0);
    sl_limits_free(l);
    l = parse_ok("limiters:\n  - name: a\n    rules: fixed:1/1s\n"
                 "    overrides:\n    policy: ~\nversion: 1\n");
    assert_int_equal(l->n, 1);
    assert_int_equal(l->lims[0].nover, 0);
    assert_int_equal(l->lims[0].policy.set, 0);
    sl_limits_free(l);
}

/* Bytes that are not UTF-8 in hex (either case), escapes in quotes, and
 * the caps: a name of 1000 bytes, a name and a client of 1000 together. */
static void binary_names_and_the_caps(void **state)
{
    char *text = malloc(8192), name[1001];
    const sl_limits_limiter *lim;
    sl_limits *l;

    (void)state;
    l = parse_ok("version: 1\nlimiters:\n"
                 "  - {name_hex: \"FF00c3A9\", rules: fixed:1/1s,\n"
                 "     overrides: [{client_hex: ff, rules: deny},\n"
                 "                 {client: \"\\x00\\t\\\"\\u00e9\", "
                 "rules: deny}]}\n"
                 "  - {name: \"caf\\u00e9\", rules: fixed:1/1s}\n");
    assert_int_equal(l->n, 2);
    lim = sl_limits_find(l, "caf\xc3\xa9", 5);
    assert_non_null(lim);
    lim = sl_limits_find(l, "\xff\x00\xc3\xa9", 4);
    assert_non_null(lim);
    assert_int_equal(lim->nover, 2);
    assert_non_null(sl_limits_find_override(lim, "\xff", 1));
    assert_non_null(sl_limits_find_override(lim, "\0\t\"\xc3\xa9", 5));
    sl_limits_free(l);
    memset(name, 'n', sizeof(name));
    snprintf(text, 8192,
             "version: 1\nlimiters:\n  - name: %.1000s\n    rules: "
             "fixed:1/1s\n  - name: %.600s\n    rules: fixed:1/1s\n"
             "    overrides: [{client: %.400s, rules: deny}]\n",
             name, name, name);
    l = parse_ok(text);
    assert_int_equal(l->lims[1].name_len, 1000);
    sl_limits_free(l);
    snprintf(text, 8192,
             "version: 1\nlimiters:\n  - name: %.1001s\n    rules: "
             "fixed:1/1s\n",
             name);
    fault(text, "t.yaml:3:11: name of 1001 bytes: expected 1..1000");
    snprintf(text, 8192,
             "version: 1\nlimiters:\n  - name: %.600s\n    rules: "
             "fixed:1/1s\n    overrides:\n      - {client: %.401s, rules: "
             "deny}\n",
             name, name);
    fault(text,
          "t.yaml:6:9: limiter "
          "\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
          "...\": client "
          "\"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
          "...\" of 401 bytes: expected 1 byte or more, and with the "
          "name's 600 at most 1000");
    free(text);
}

#define HEAD  "version: 1\nlimiters:\n"
#define API   HEAD "  - name: api\n    rules: fixed:1/1s\n"
#define OVERS API "    overrides:\n"

/* Every class of fault, named with its line and column, what was found
 * and what was expected; nothing is kept from a file with one. */
static void every_fault_names_its_place(void **state)
{
    (void)state;
    /* The text: YAML, UTF-8, one document, a mapping. */
    fault(HEAD "  - name: api\n   rules: fixed:1/1s\n",
          "t.yaml:4:4: YAML: did not find expected '-' indicator (while "
          "parsing a block collection at 3:3)");
    fault(HEAD "  - name: \"api\n",
          "t.yaml:4:1: YAML: found unexpected end of stream (while "
          "scanning a quoted scalar at 3:11)");
    fault(HEAD "  - name: a\xff\n",
          "t.yaml:3:12: not UTF-8 (invalid leading UTF-8 octet): a name or "
          "a client of other bytes goes in name_hex or client_hex");
    fault("", "t.yaml:1:1: empty: expected a mapping with version: 1 and "
              "limiters");
    fault("# nothing\n", "t.yaml:2:1: empty: expected a mapping with "
                         "version: 1 and limiters");
    fault("[1, 2]\n", "t.yaml:1:1: expected a mapping with version and "
                      "limiters, found a list");
    fault("version: 1\nlimiters: []\n---\nversion: 1\n",
          "t.yaml:3:1: a second document: expected one in the file");
    fault(HEAD "  - &a {name: api, rules: fixed:1/1s}\n  - *a\n",
          "t.yaml:3:5: an anchor (&a): expected each value written out, "
          "without anchors or aliases");
    fault("version: !!int 1\nlimiters: []\n",
          "t.yaml:1:10: a tag (tag:yaml.org,2002:int): expected plain "
          "values, without tags");
    /* Keys: unknown, again, missing, both of a pair. */
    fault("version: 1\nlimiter: []\n",
          "t.yaml:2:1: unknown key \"limiter\" in the file: expected "
          "version or limiters");
    fault(HEAD "  - name: api\n    rule: fixed:1/1s\n",
          "t.yaml:4:5: unknown key \"rule\" in a limiter: expected name, "
          "name_hex, rules, keepalive_ms, policy or overrides");
    fault(API "    policy: {fails: open}\n",
          "t.yaml:5:14: unknown key \"fails\" in a policy: expected fail, "
          "fallback_instances, deny_cache, reserve_ms, reserve_share, "
          "shadow, http_name, unit or unit_name");
    fault(OVERS "      - {client: a, rule: deny}\n",
          "t.yaml:6:21: unknown key \"rule\" in an override: expected "
          "client, client_hex or rules");
    fault(API "    rules: fixed:2/1s\n",
          "t.yaml:5:5: rules again in a limiter (first at 4:5)");
    fault("version: 1\nversion: 1\nlimiters: []\n",
          "t.yaml:2:1: version again in the file (first at 1:1)");
    fault("limiters: []\n", "t.yaml:1:1: no version: expected version: 1");
    fault("version: 1\n", "t.yaml:1:1: no limiters: expected limiters: a "
                          "list (or [] for none)");
    fault(HEAD "  - rules: fixed:1/1s\n",
          "t.yaml:3:5: a limiter without a name: expected name (or "
          "name_hex for bytes that are not UTF-8)");
    fault(HEAD "  - name: api\n",
          "t.yaml:3:5: limiter \"api\" without rules: expected rules (e.g. "
          "rules: \"fixed:100/1m\")");
    fault(HEAD "  - {name: api, name_hex: \"61\", rules: fixed:1/1s}\n",
          "t.yaml:3:17: name and name_hex: expected one");
    fault(OVERS "      - {rules: deny}\n",
          "t.yaml:6:9: an override without a client: expected client (or "
          "client_hex for bytes that are not UTF-8)");
    fault(OVERS "      - {client: a}\n",
          "t.yaml:6:9: an override without rules: expected rules: RULES, "
          "unlimited or deny");
    fault(OVERS "      - {client: a, client_hex: \"61\", rules: deny}\n",
          "t.yaml:6:21: client and client_hex: expected one");
    fault("? [a]\n: 1\n", "t.yaml:1:3: a key in the file: expected a "
                          "string, found a list");
    /* Names and clients: each once; 1 byte or more; hex. */
    fault(API "  - name: api\n    rules: fixed:2/1s\n",
          "t.yaml:5:5: limiter \"api\" again (first at 3:5): each name once");
    fault(API "  - name_hex: \"617069\"\n    rules: fixed:2/1s\n",
          "t.yaml:5:5: limiter \"api\" again (first at 3:5): each name once");
    fault(OVERS "      - {client: a, rules: deny}\n"
                "      - {client_hex: \"61\", rules: unlimited}\n",
          "t.yaml:7:9: limiter \"api\": client \"a\" again (first at 6:9): "
          "each client once");
    fault(HEAD "  - name: \"\"\n    rules: fixed:1/1s\n",
          "t.yaml:3:5: name \"\": expected 1..1000 bytes");
    fault(HEAD "  - name_hex: \"6\"\n    rules: fixed:1/1s\n",
          "t.yaml:3:15: name_hex: expected 2..2000 hex digits, two a byte, "
          "found \"6\"");
    fault(OVERS "      - {client_hex: zz, rules: deny}\n",
          "t.yaml:6:22: client_hex: expected 2..2000 hex digits, two a "
          "byte, found \"zz\"");
    fault(OVERS "      - {client: \"\", rules: deny}\n",
          "t.yaml:6:9: limiter \"api\": client \"\" of 0 bytes: expected 1 "
          "byte or more, and with the name's 3 at most 1000");
    /* Values of the wrong kind or out of range. */
    fault("version: 2\nlimiters: []\n",
          "t.yaml:1:10: version 2: expected 1 (this sluice reads version 1)");
    fault(HEAD "  - name: api\n    rules: fixed:1\n",
          "t.yaml:4:12: rules \"fixed:1\": rule \"fixed:1\": expected "
          "'/PERIOD' after the limit at \"fixed:1\"");
    fault(HEAD "  - name: api\n    rules:\n",
          "t.yaml:4:11: rules: expected rules (e.g. \"fixed:100/1m\"), "
          "found nothing (null)");
    fault(API "  - name: b\n    rules: >\n      fixed:1/1s\n",
          "t.yaml:6:12: rules \"fixed:1/1s\\x0a\": expected rules without "
          "line breaks or other control characters (a block scalar keeps "
          "its last line break: >- or |- drops it)");
    fault(OVERS "      - {client: a, rules: nope}\n",
          "t.yaml:6:28: rules \"nope\": expected unlimited, deny or rules "
          "(rule \"nope\": unknown algorithm (use fixed, sliding, log, token "
          "or gcra) at \"nope\")");
    fault(API "    keepalive_ms: \"100\"\n",
          "t.yaml:5:19: keepalive_ms: expected an unquoted integer "
          "0..10000000000 ms (0: kept until deleted), found \"100\"");
    fault(API "    keepalive_ms: 007\n",
          "t.yaml:5:19: keepalive_ms: expected an unquoted integer "
          "0..10000000000 ms (0: kept until deleted), found \"007\"");
    fault(API "    keepalive_ms: -1\n",
          "t.yaml:5:19: keepalive_ms: expected an unquoted integer "
          "0..10000000000 ms (0: kept until deleted), found \"-1\"");
    fault(API "    keepalive_ms: 99999999999999999999\n",
          "t.yaml:5:19: keepalive_ms: expected an unquoted integer "
          "0..10000000000 ms (0: kept until deleted), found "
          "\"99999999999999999999\"");
    fault(API "    policy: {fail: maybe}\n",
          "t.yaml:5:20: fail: expected error, open, closed or fallback, "
          "found \"maybe\"");
    fault(API "    policy: {shadow: yes}\n",
          "t.yaml:5:22: shadow: expected true or false, unquoted, found "
          "\"yes\"");
    fault(API "    policy: {reserve_ms: 70000}\n",
          "t.yaml:5:26: reserve_ms: expected an unquoted integer 0..60000 "
          "ms (0: off), found \"70000\"");
    fault(API "    policy: {reserve_share: 51, reserve_ms: 5}\n",
          "t.yaml:5:29: reserve_share: expected an unquoted integer 0..50 "
          "percent (0: the default), found \"51\"");
    fault(API "    policy: {fallback_instances: 10001}\n",
          "t.yaml:5:34: fallback_instances: expected an unquoted integer "
          "0..10000 (0: the handle's), found \"10001\"");
    fault(API "    policy: {unit: tokens}\n",
          "t.yaml:5:20: unit: expected requests, content-bytes or "
          "concurrent-requests, found \"tokens\"");
    fault(API "    policy: {unit_name: \"a b\"}\n",
          "t.yaml:5:25: unit_name: expected A-Z a-z 0-9 . _ -, 0..64 bytes, "
          "found \"a b\"");
    fault(API "    policy: {http_name: \"caf\\u00e9\"}\n",
          "t.yaml:5:25: http_name: expected printable ASCII, 0..63 bytes, "
          "found \"caf\\xc3\\xa9\"");
    fault(API "    policy: {fallback_instances: 3}\n",
          "t.yaml:5:14: fallback_instances 3: expected fail: fallback "
          "beside it");
    fault(API "    policy: {reserve_share: 20}\n",
          "t.yaml:5:14: reserve_share 20: expected reserve_ms (1..60000) "
          "beside it");
    /* Structure: a list where a mapping goes, and so on. */
    fault("version: 1\nlimiters: {api: 1}\n",
          "t.yaml:2:11: limiters: expected a list, found a mapping");
    fault(HEAD "  - api\n", "t.yaml:3:5: limiters: expected a limiter (a "
                            "mapping), found \"api\"");
    fault(API "    policy: [fail]\n",
          "t.yaml:5:13: policy: expected a mapping, found a list");
    fault(OVERS "      vip: unlimited\n",
          "t.yaml:6:7: overrides: expected a list, found a mapping");
    fault(API "    keepalive_ms: {a: 1}\n",
          "t.yaml:5:19: keepalive_ms: expected an unquoted integer "
          "0..10000000000 ms (0: kept until deleted), found a mapping");
    assert_int_equal(mismatches, 0);
}

/* Past 16 MB: refused, from a buffer and from a file (unread); deeper
 * than the schema: refused at its first level too deep. */
static void size_and_depth_are_bounded(void **state)
{
    char err[512], path[] = "/tmp/sluice-limits-XXXXXX";
    size_t big = SL_LIMITS_MAX_BYTES + 1, i;
    char *text = malloc(big + 1);
    sl_limits *l;
    int fd;

    (void)state;
    memset(text, ' ', big);
    text[big] = '\0';
    assert_int_equal(sl_limits_parse("t.yaml", text, big, &l, err, sizeof(err)),
                     SLUICE_EINVAL);
    assert_string_equal(err, "t.yaml: 16777217 bytes: expected at most "
                             "16777216 (16 MB)");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)big), 0);
    close(fd);
    assert_int_equal(sl_limits_load(path, &l, err, sizeof(err)), SLUICE_EINVAL);
    assert_non_null(strstr(err, ": 16777217 bytes: expected at most "
                                "16777216 (16 MB)"));
    unlink(path);
    assert_int_equal(
        sl_limits_load("/nonexistent/limits.yaml", &l, err, sizeof(err)),
        SLUICE_EINVAL);
    assert_string_equal(err, "/nonexistent/limits.yaml: cannot open: No "
                             "such file or directory");
    /* 100,000 lists in lists, where a limiter's mapping goes. */
    strcpy(text, "version: 1\nlimiters: ");
    for (i = 0; i < 100000; i++)
        text[21 + i] = '[';
    for (i = 0; i < 100000; i++)
        text[100021 + i] = ']';
    text[200021] = '\0';
    fault(text, "t.yaml:2:26: nested more than 16 deep: expected the "
                "schema's 5 levels at most");
    /* Within 16, the schema names the mistake. */
    text[21 + 10] = '\0';
    strcat(text, "]]]]]]]]]]\n");
    fault(text, "t.yaml:2:12: limiters: expected a limiter (a mapping), "
                "found a list");
    free(text);
    assert_int_equal(mismatches, 0);
}

static void to_text(void *arg, const char *s, size_t n)
{
    char *dst = arg;
    size_t at = strlen(dst);

    assert_true(at + n < 65536);
    memcpy(dst + at, s, n);
    dst[at + n] = '\0';
}

/* What sl_limits_write writes reads back to the same form, whose text is
 * the same again: names in quotes with YAML's escapes (controls, DEL, C1,
 * NEL, the separators, the BOM, quotes and backslashes), else in hex. */
static void written_text_reads_back(void **state)
{
    static const char odd[] = "a\"b\\c\x01\x7f\xc2\x85\xc2\x9f\xe2\x80\xa8"
                              "\xe2\x80\xa9\xef\xbb\xbf\xef\xbf\xbe\t\r\n\0z";
    static char a[65536], b[65536];
    sluice_limiter_override ov = {SLUICE_OVERRIDE_DENY, {0}};
    sl_limits *l = parse_ok(good), *l2;
    sl_limits_limiter *lim;
    const sl_limits_limiter *found;
    char err[512];

    (void)state;
    lim = sl_limits_add(l, odd, sizeof(odd), &l->lims[0].rules, 5);
    assert_non_null(lim);
    assert_true(sl_limits_add_override(lim, odd, 7, &ov));
    assert_true(sl_limits_add_override(lim, "\xff\xfe", 2, &ov));
    assert_non_null(sl_limits_add(l, "\xc3\x28", 2, &l->lims[0].rules, 0));
    assert_int_equal(sl_limits_seal(l, NULL, err, sizeof(err)), SLUICE_OK);
    a[0] = '\0';
    sl_limits_write(l, to_text, a);
    l2 = parse_ok(a);
    b[0] = '\0';
    sl_limits_write(l2, to_text, b);
    assert_string_equal(a, b);
    assert_int_equal(l2->n, 5);
    found = sl_limits_find(l2, odd, sizeof(odd));
    assert_non_null(found);
    assert_int_equal(found->keepalive_ms, 5);
    assert_non_null(sl_limits_find_override(found, odd, 7));
    assert_non_null(sl_limits_find_override(found, "\xff\xfe", 2));
    assert_non_null(sl_limits_find(l2, "\xc3\x28", 2));
    assert_non_null(strstr(a, "name_hex: \"c328\""));
    assert_non_null(strstr(a, "client_hex: \"fffe\""));
    assert_non_null(
        strstr(a, "{client: \"a\\\"b\\\\c\\x01\\x7f\", rules: deny}"));
    sl_limits_free(l);
    sl_limits_free(l2);
    l = parse_ok("version: 1\nlimiters: []\n");
    a[0] = '\0';
    sl_limits_write(l, to_text, a);
    assert_string_equal(a, "# sluice limits (docs/LIMITS.md)\nversion: "
                           "1\nlimiters: []\n");
    sl_limits_free(l);
}

/* A form built by code is checked as a file is, with no place to name. */
static void a_built_form_is_checked(void **state)
{
    sluice_ruleset rs;
    sl_limits *l = sl_limits_new();
    char err[512];

    (void)state;
    assert_int_equal(sluice_ruleset_parse("fixed:1/1s", &rs, NULL, 0),
                     SLUICE_OK);
    assert_non_null(sl_limits_add(l, "x", 1, &rs, 0));
    assert_non_null(sl_limits_add(l, "x", 1, &rs, 0));
    assert_int_equal(sl_limits_seal(l, NULL, err, sizeof(err)), SLUICE_EINVAL);
    assert_string_equal(err, "limits: limiter \"x\" again: each name once");
    sl_limits_free(l);
    l = sl_limits_new();
    rs.rules[0].limit = 0;
    assert_non_null(sl_limits_add(l, "y", 1, &rs, 0));
    assert_int_equal(sl_limits_seal(l, "f", err, sizeof(err)), SLUICE_EINVAL);
    assert_string_equal(err, "f: limiter \"y\": rule \"fixed:0/1000ms\": "
                             "limit 0 is out of range 1..1000000000");
    sl_limits_free(l);
}

/* An allocator that fails once `budget` allocations were served. */
static long budget;

static void *failing_malloc(size_t n)
{
    return budget-- <= 0 ? NULL : malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    return budget-- <= 0 ? NULL : realloc(p, n);
}

/* Each allocation failing in turn: SLUICE_ENOMEM and no form, until the
 * parse succeeds (leaks: the ASan and valgrind passes). */
static void allocation_failures_return_enomem(void **state)
{
    char err[512];
    sl_limits *l;
    sluice_status st;
    long n;

    (void)state;
    for (n = 0;; n++) {
        budget = n;
        sluice_set_allocator(failing_malloc, failing_realloc, free);
        st =
            sl_limits_parse("t.yaml", good, strlen(good), &l, err, sizeof(err));
        sluice_set_allocator(NULL, NULL, NULL);
        if (st == SLUICE_OK)
            break;
        if (st != SLUICE_ENOMEM || l != NULL)
            fail_msg("budget %ld: status %d: %s", n, (int)st, err);
        assert_string_equal(err, "t.yaml: out of memory");
    }
    printf("# %ld allocations for the example file\n", n);
    assert_true(n > 5);
    sl_limits_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_file_reads_into_the_form),
        cmocka_unit_test(empty_lists_read_as_none),
        cmocka_unit_test(binary_names_and_the_caps),
        cmocka_unit_test(every_fault_names_its_place),
        cmocka_unit_test(size_and_depth_are_bounded),
        cmocka_unit_test(written_text_reads_back),
        cmocka_unit_test(a_built_form_is_checked),
        cmocka_unit_test(allocation_failures_return_enomem),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
