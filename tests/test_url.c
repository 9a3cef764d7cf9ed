/* SPDX-License-Identifier: BSD-3-Clause */
/* test_url.c - backend URLs and their query options. */
#include "internal.h"
#include "net/socket.h"
#include "options.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static sl_url parse_ok(const char *text)
{
    sl_url u;
    char err[512] = "";

    if (sl_url_parse(text, NULL, &u, err, sizeof(err)) != SLUICE_OK)
        fail_msg("\"%s\" should parse: %s", text, err);
    return u;
}

static void parse_bad(const char *text, const char *quote)
{
    sl_url u;
    char err[512] = "";
    sluice_status st = sl_url_parse(text, NULL, &u, err, sizeof(err));

    if (st != SLUICE_EURL)
        fail_msg("\"%s\" should be refused, got %d", text, st);
    if (strstr(err, quote) == NULL)
        fail_msg("message for \"%s\" should say \"%s\": %s", text, quote, err);
}

static void redis_urls_give_host_port_credentials_and_db(void **state)
{
    sl_url u = parse_ok("redis://127.0.0.1:6380");

    (void)state;
    assert_int_equal(u.scheme, SL_SCHEME_REDIS);
    assert_string_equal(u.ep.host, "127.0.0.1");
    assert_int_equal(u.ep.port, 6380);
    assert_int_equal(u.ep.db, 0);
    assert_string_equal(u.ep.user, "");
    u = parse_ok("redis://alice:s%40cret@localhost:7000/3");
    assert_string_equal(u.ep.user, "alice");
    assert_string_equal(u.ep.password, "s@cret");
    assert_string_equal(u.ep.host, "localhost");
    assert_int_equal(u.ep.port, 7000);
    assert_int_equal(u.ep.db, 3);
    u = parse_ok("redis://:pw@h:1");
    assert_string_equal(u.ep.user, "");
    assert_string_equal(u.ep.password, "pw");
    u = parse_ok("redis://pw@h:1/");
    assert_string_equal(u.ep.password, "pw");
    assert_int_equal(u.ep.db, 0);
    u = parse_ok("redis://[::1]:6379");
    assert_string_equal(u.ep.host, "::1");
    assert_int_equal(u.ep.port, 6379);
    u = parse_ok("redis://example");
    assert_int_equal(u.ep.port, 6379);
}

static void defaults_are_filled_and_query_overrides_them(void **state)
{
    sl_url u = parse_ok("mem://");
    sluice_options o;
    char err[256];

    (void)state;
    assert_int_equal(u.scheme, SL_SCHEME_MEM);
    assert_string_equal(u.name, "");
    assert_int_equal(u.cfg.command_timeout_ms, 250);
    assert_int_equal(u.cfg.connect_timeout_ms, 1000);
    assert_int_equal(u.cfg.ttl_floor_ms, 1000);
    assert_int_equal(u.cfg.fail, SLUICE_FAIL_ERROR);
    assert_string_equal(u.cfg.prefix, "sluice:");
    u = parse_ok("redis://h:1?timeout_ms=50&connect_timeout_ms=70&clock=server"
                 "&fail=closed&prefix=rl%3A&ttl_floor_ms=5");
    assert_int_equal(u.cfg.command_timeout_ms, 50);
    assert_int_equal(u.cfg.connect_timeout_ms, 70);
    assert_true(u.cfg.server_clock);
    assert_int_equal(u.cfg.fail, SLUICE_FAIL_CLOSED);
    assert_string_equal(u.cfg.prefix, "rl:");
    assert_int_equal(u.cfg.ttl_floor_ms, 5);
    memset(&o, 0, sizeof(o));
    o.fail = SLUICE_FAIL_OPEN;
    o.key_prefix = "app:";
    o.command_timeout_ms = 9;
    assert_int_equal(
        sl_url_parse("mem://shared-1?fail=error", &o, &u, err, sizeof(err)),
        SLUICE_OK);
    assert_string_equal(u.name, "shared-1");
    assert_int_equal(u.cfg.fail, SLUICE_FAIL_ERROR);
    assert_int_equal(u.cfg.command_timeout_ms, 9);
    assert_string_equal(u.cfg.prefix, "app:");
}

static void bad_urls_are_refused_with_the_reason(void **state)
{
    (void)state;
    parse_bad("http://x", "unknown scheme");
    parse_bad("", "unknown scheme");
    parse_bad("redis:/x:1", "unknown scheme");
    parse_bad("redis://", "missing host");
    parse_bad("redis://:6379", "missing host");
    parse_bad("redis://u:p@:6379", "missing host");
    parse_bad("redis://h:0", "bad port");
    parse_bad("redis://h:65536", "bad port");
    parse_bad("redis://h:abc", "bad port");
    parse_bad("redis://h:", "bad port");
    parse_bad("redis://h:-1", "bad port");
    parse_bad("redis://h:1/x", "bad database");
    parse_bad("redis://[::1:6379", "unclosed");
    parse_bad("redis://h:1?color=red", "unknown option \"color\"");
    parse_bad("redis://h:1?timeout_ms=0", "timeout_ms=0");
    parse_bad("redis://h:1?timeout_ms=1.5", "timeout_ms=1.5");
    parse_bad("redis://h:1?clock=sundial", "clock=local or clock=server");
    parse_bad("redis://h:1?fail=maybe",
              "fail=error, fail=open, fail=closed or fail=fallback");
    parse_bad("redis://h:1?prefix=a%7Bb", "may not hold");
    parse_bad("redis://u:%zz@h:1", "bad user or password");
    parse_bad("mem://a/b", "store names");
    parse_bad("redis://h:1?timeout_ms=5&timeout_ms=6",
              "option timeout_ms given twice");
    parse_bad("redis://h:1?fail=open&prefix=a:&fail=closed",
              "option fail given twice");
    parse_bad("rediss://h:1?tls_ca_file=/a&tls_ca_file=/b",
              "option tls_ca_file given twice");
}

/* RFC 3986: "schemes are case-insensitive". */
static void schemes_are_case_insensitive(void **state)
{
    sl_url u;

    (void)state;
    u = parse_ok("REDIS://h:1");
    assert_int_equal(u.scheme, SL_SCHEME_REDIS);
    assert_false(u.ep.tls);
    u = parse_ok("Rediss://h:1");
    assert_true(u.ep.tls);
    u = parse_ok("REDIS+MULTI://h:1");
    assert_int_equal(u.scheme, SL_SCHEME_MULTI);
    u = parse_ok("TwemProxy://h:1");
    assert_int_equal(u.scheme, SL_SCHEME_TWEMPROXY);
    u = parse_ok("Redis-Cluster://h:1,h:2");
    assert_int_equal(u.scheme, SL_SCHEME_CLUSTER);
    u = parse_ok("MEM://");
    assert_int_equal(u.scheme, SL_SCHEME_MEM);
}

/* The one table of options: every name in it is accepted, the message
 * for an unknown one lists them all. */
static void the_option_table_drives_the_parser_and_its_message(void **state)
{
    sl_url u;
    char err[1024] = "";
    size_t i;

    (void)state;
    assert_int_equal(
        sl_url_parse("redis://h:1?nosuch=1", NULL, &u, err, sizeof(err)),
        SLUICE_EURL);
    for (i = 0; sl_url_option(i) != NULL; i++) {
        char want[64];

        snprintf(want, sizeof(want), " %s%s", sl_url_option(i),
                 sl_url_option(i + 1) != NULL ? "," : ")");
        if (strstr(err, want) == NULL)
            fail_msg("the message does not name %s: %s", sl_url_option(i), err);
    }
    assert_int_equal(i, 28);
}

/* Every form, with and without a query: the query never leaks into the
 * authority (a one-seed cluster URL once read "7000?timeout_ms=100" as its
 * port). */
static void every_url_form_parses_alike_with_and_without_a_query(void **state)
{
    static const char *forms[] = {
        "redis://127.0.0.1:7000",
        "redis://127.0.0.1",
        "redis://u:p@127.0.0.1:7000/2",
        "redis://p@[::1]:7000",
        "redis+multi://127.0.0.1:7000",
        "redis+multi://u:p@127.0.0.1:7000/3",
        "twemproxy://127.0.0.1:7000",
        "twemproxy://p@127.0.0.1:7000",
        "redis-cluster://127.0.0.1:7000",
        "redis-cluster://127.0.0.1",
        "redis-cluster://u:p@127.0.0.1:7000",
        "redis-cluster://127.0.0.1:7000,127.0.0.1:7001",
        "redis-cluster://u:p@[::1]:7000,127.0.0.1:7001",
        "mem://",
        "mem://shared",
    };
    static const char *queries[] = {"", "?timeout_ms=100",
                                    "?timeout_ms=100&prefix=x:", "?"};
    size_t i, q, s;

    (void)state;
    for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        sl_url plain = parse_ok(forms[i]);

        for (q = 1; q < sizeof(queries) / sizeof(queries[0]); q++) {
            char text[256];
            sl_url u;

            snprintf(text, sizeof(text), "%s%s", forms[i], queries[q]);
            u = parse_ok(text);
            assert_string_equal(u.ep.host, plain.ep.host);
            assert_int_equal(u.ep.port, plain.ep.port);
            assert_string_equal(u.ep.user, plain.ep.user);
            assert_string_equal(u.ep.password, plain.ep.password);
            assert_int_equal(u.ep.db, plain.ep.db);
            assert_string_equal(u.name, plain.name);
            assert_int_equal(u.nseeds, plain.nseeds);
            for (s = 0; s < u.nseeds; s++) {
                assert_string_equal(u.seeds[s].host, plain.seeds[s].host);
                assert_int_equal(u.seeds[s].port, plain.seeds[s].port);
            }
            if (q != 3)
                assert_int_equal(u.cfg.command_timeout_ms, 100);
        }
    }
    assert_int_equal(
        parse_ok("redis-cluster://127.0.0.1:7000?timeout_ms=100").seeds[0].port,
        7000);
    parse_bad("redis-cluster://127.0.0.1:7000?bogus=1", "unknown option");
    parse_bad("redis-cluster://127.0.0.1:x?timeout_ms=1", "bad port \":x\"");
}

/* Percent escapes are two hex digits and never a NUL (found by fuzz_url:
 * strtol took "%-1", and "%00" cut the value short in silence). */
static void percent_escapes_are_two_hex_digits_and_never_nul(void **state)
{
    (void)state;
    assert_string_equal(parse_ok("redis://u:%41%62@h:1").ep.password, "Ab");
    assert_string_equal(parse_ok("redis://h:1?prefix=a%3Ab").cfg.prefix, "a:b");
    parse_bad("redis://u:%-1@h:1", "escape");
    parse_bad("redis://u:%+9@h:1", "escape");
    parse_bad("redis://u:% f@h:1", "escape");
    parse_bad("redis://u:ab%00cd@h:1", "escape");
    parse_bad("redis://h:1?prefix=a%00b", "escape");
    parse_bad("redis://u:%4@h:1", "escape");
}

/* A message that shows a URL never shows its password. */
static void messages_hide_passwords(void **state)
{
    static const char *urls[] = {
        "redis://svc:TopSecret123@127.0.0.1:6379?fail=x",
        "redis://TopSecret123@127.0.0.1:6379?fail=x",
        "redis+multi://svc:TopSecret123@127.0.0.1:6379?fail=x",
        "twemproxy://TopSecret123@127.0.0.1:6379?fail=x",
        "redis-cluster://svc:TopSecret123@127.0.0.1:1,127.0.0.1:2?fail=x",
        "redis://svc:TopSecret123@127.0.0.1:99999",
        "redis://svc:Top@Secret123@127.0.0.1:6379?fail=x",
        "redis://svc:TopSecret123@127.0.0.1:6379/x",
        "redis-cluster://svc:TopSecret123@127.0.0.1:1/0",
        "redis://u2:Top@Secret123:/?#@127.0.0.1:17105",
        "redis://u2:Top@ss/?Secret123=1#@127.0.0.1:17105",
        "redis://u2:Top@ss/?timeout_ms=Secret123#@127.0.0.1:17105",
        "redis://u2:Top@ss:Secret123/?#@127.0.0.1:17105",
        "redis-cluster://h:Secret123?x=@1",
        "REDIS://u:Top/Secret123@h:1?fail=x",
    };
    char err[512], shown[256];
    size_t i;
    sl_url u;

    (void)state;
    for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        err[0] = '\0';
        assert_int_equal(sl_url_parse(urls[i], NULL, &u, err, sizeof(err)),
                         SLUICE_EURL);
        if (strstr(err, "Secret") != NULL || strstr(err, "***") == NULL)
            fail_msg("message for \"%s\" shows the password: %s", urls[i], err);
    }
    /* Everything from "//" to the last '@' is hidden, the user too: a
     * password with '@', '/', '?' or '#' unescaped ends after where a
     * parser's authority does. */
    sl_url_redact("redis://svc:pw@h:1/2?x=1", shown, sizeof(shown));
    assert_string_equal(shown, "redis://***@h:1/2?x=1");
    sl_url_redact("twemproxy://pw@h:1", shown, sizeof(shown));
    assert_string_equal(shown, "twemproxy://***@h:1");
    sl_url_redact("redis://u2:p@ss:/?#@127.0.0.1:17105", shown, sizeof(shown));
    assert_string_equal(shown, "redis://***@127.0.0.1:17105");
    sl_url_redact("redis:u:pw@h", shown, sizeof(shown));
    assert_string_equal(shown, "***@h");
    sl_url_redact("redis://h:1?prefix=a@b", shown, sizeof(shown));
    assert_string_equal(shown, "redis://***@b");
    sl_url_redact("redis://h:1", shown, sizeof(shown));
    assert_string_equal(shown, "redis://h:1");
}

/* redis+sentinel:// (issue 24): the sentinels as seeds, the master's name
 * in the path, the data nodes' credentials in the authority and the
 * sentinels' in the query, never shown. */
static void sentinel_urls(void **state)
{
    sl_url u = parse_ok("redis+sentinel://:data@127.0.0.1:26379,"
                        "[::1]:26380,s3/mymaster/2?sentinel_password=sp&"
                        "sentinel_user=watcher&timeout_ms=50");
    char err[512], shown[256];

    (void)state;
    assert_int_equal(u.scheme, SL_SCHEME_REDIS);
    assert_true(u.sentinel);
    assert_string_equal(u.master, "mymaster");
    assert_int_equal(u.ep.db, 2);
    assert_string_equal(u.ep.password, "data");
    assert_string_equal(u.ep.host, ""); /* named by the sentinels */
    assert_int_equal(u.nseeds, 3);
    assert_string_equal(u.seeds[0].host, "127.0.0.1");
    assert_int_equal(u.seeds[0].port, 26379);
    assert_string_equal(u.seeds[1].host, "::1");
    assert_int_equal(u.seeds[1].port, 26380);
    assert_int_equal(u.seeds[2].port, 26379); /* Sentinel's own port */
    assert_string_equal(u.sentinel_ep.user, "watcher");
    assert_string_equal(u.sentinel_ep.password, "sp");
    assert_false(u.sentinel_ep.tls);
    assert_int_equal(u.cfg.command_timeout_ms, 50);
    u = parse_ok("redis+sentinel://[::1],h/m");
    assert_int_equal(u.seeds[0].port, 26379);
    assert_int_equal(u.seeds[1].port, 26379);
    u = parse_ok("redis-cluster://h");
    assert_int_equal(u.seeds[0].port, 6379);
    u = parse_ok("redis+multi+sentinel://h:1/m%2Fx");
    assert_int_equal(u.scheme, SL_SCHEME_MULTI);
    assert_string_equal(u.master, "m/x");
    u = parse_ok("rediss+sentinel://h:1/m?tls_verify=0");
    assert_true(u.ep.tls);
    assert_true(u.sentinel_ep.tls);
    assert_true(u.sentinel_ep.tls_insecure);
    u = parse_ok("rediss+sentinel://h:1/m?sentinel_tls=0");
    assert_true(u.ep.tls);
    assert_false(u.sentinel_ep.tls);
    u = parse_ok("redis+sentinel://h:1/m?sentinel_tls=1");
    assert_false(u.ep.tls);
    assert_true(u.sentinel_ep.tls);
    u = parse_ok("redis://h:1");
    assert_false(u.sentinel);

    parse_bad("redis+sentinel://h:1", "missing the master's name");
    parse_bad("redis+sentinel://h:1/", "missing the master's name");
    parse_bad("redis+sentinel://h:1//2", "bad master name");
    parse_bad("redis+sentinel://h:1/m/x", "bad database number");
    parse_bad("redis+sentinel:///m", "missing host");
    parse_bad("redis+sentinel://h:1,,h:2/m", "empty seed");
    parse_bad("redis+sentinel://h:1/m?socket=/tmp/s", "address they name");
    parse_bad("redis://h:1?sentinel_password=x", "need a sentinel scheme");
    parse_bad("redis://h:1?sentinel_tls=1", "need a sentinel scheme");

    /* The sentinels' password never shows, in the query either. */
    err[0] = '\0';
    assert_int_equal(sl_url_parse("redis+sentinel://h:1/m?sentinel_password="
                                  "TopSecret1&fail=x",
                                  NULL, &u, err, sizeof(err)),
                     SLUICE_EURL);
    assert_null(strstr(err, "Secret"));
    assert_non_null(strstr(err, "sentinel_password=***"));
    err[0] = '\0';
    assert_int_equal(sl_url_parse("redis+sentinel://h:1/m?sentinel_password="
                                  "%zzSecret1",
                                  NULL, &u, err, sizeof(err)),
                     SLUICE_EURL);
    assert_null(strstr(err, "Secret"));
    sl_url_redact("redis+sentinel://u:p@h:1/m?sentinel_password=s&x=1#f", shown,
                  sizeof(shown));
    assert_string_equal(
        shown, "redis+sentinel://***@h:1/m?sentinel_password=***&x=1#f");
    sl_url_redact("redis+sentinel://h:1/m?a=1&sentinel_password=longer-secret",
                  shown, sizeof(shown));
    assert_string_equal(shown,
                        "redis+sentinel://h:1/m?a=1&sentinel_password=***");
    sl_url_redact("redis+sentinel://h:1/m?xsentinel_password=v", shown,
                  sizeof(shown));
    assert_string_equal(shown, "redis+sentinel://h:1/m?xsentinel_password=v");
    sl_url_redact("r://h?sentinel_password=secret", shown, 30);
    assert_string_equal(shown, "r://h?sentinel_password=***");
    sl_url_redact("r://h?sentinel_password=secret", shown, 25);
    assert_null(strstr(shown, "sec"));
}

/* Credentials can stay out of the URL; the URL's own win. */
/* A program built against a newer header passes a longer struct: what it
 * adds must be zero (its defaults), or the library says it cannot honour
 * it. */
static void options_are_read_as_far_as_their_struct_size_says(void **state)
{
    struct {
        sluice_options o;
        unsigned char newer[16]; /* fields of a later version */
    } big;
    sluice_options o;
    char err[512] = "";
    sl_url u;

    (void)state;
    sluice_options_init(&o);
    assert_int_equal(o.struct_size, sizeof(o));
    assert_null(o.clock);
    assert_int_equal(o.fail, SLUICE_FAIL_ERROR);
    o.command_timeout_ms = 7;
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(u.cfg.command_timeout_ms, 7);
    o.struct_size = 8;
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_EINVAL);
    assert_non_null(strstr(err, "sluice_options_init()"));
    memset(&big, 0, sizeof(big));
    sluice_options_init(&big.o);
    big.o.struct_size = sizeof(big);
    big.o.command_timeout_ms = 9;
    assert_int_equal(sl_url_parse("mem://", &big.o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(u.cfg.command_timeout_ms, 9);
    big.newer[3] = 1;
    assert_int_equal(sl_url_parse("mem://", &big.o, &u, err, sizeof(err)),
                     SLUICE_EINVAL);
    assert_non_null(strstr(err, "does not know"));
}

/* The limits file: the options' (read only when struct_size has it),
 * the URL's over it, its path's bound. */
static void the_limits_file_comes_from_the_url_over_the_options(void **state)
{
    char err[512] = "", path[1100];
    sluice_options o;
    sl_url u;

    (void)state;
    sluice_options_init(&o);
    o.limits_file = "/etc/a.yml";
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.limits_file, "/etc/a.yml");
    assert_int_equal(sl_url_parse("mem://?limits_file=%2Fsrv%2Fb%20c.yml", &o,
                                  &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.limits_file, "/srv/b c.yml");
    assert_int_equal(sl_url_parse("mem://", NULL, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.limits_file, "");
    /* A program built before the field: its struct ends before it. */
    o.struct_size = offsetof(sluice_options, limits_file);
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.limits_file, "");
    sluice_options_init(&o);
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    path[1024] = '\0';
    o.limits_file = path;
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "options.limits_file longer than 1023"));
    path[1023] = '\0';
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(strlen(u.limits_file), 1023);
    assert_int_equal(
        sl_url_parse("mem://?limits_file=", NULL, &u, err, sizeof(err)),
        SLUICE_EURL);
    assert_non_null(strstr(err, "option limits_file: empty"));
}

/* A field of sluice_options out of its range is quoted in the message, as
 * the URL's forms quote theirs ("option reserve_ms=70000: ..."). */
static void out_of_range_options_are_quoted(void **state)
{
    static const struct {
        const char *field, *quote;
    } cases[] = {
        {"fail", "options.fail=7: expected SLUICE_FAIL_ERROR"},
        {"fallback_instances", "options.fallback_instances=10001: expected "
                               "1..10000"},
        {"rules_cache_ms", "options.rules_cache_ms=86400001: expected at "
                           "most 86400000"},
        {"reserve_ms", "options.reserve_ms=70000: expected 0..60000 ms"},
        {"reserve_ms", "options.reserve_ms=-1: expected 0..60000 ms"},
        {"reserve_share", "options.reserve_share=51: expected 1..50 percent"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_options o;
        char err[512] = "";
        sl_url u;

        sluice_options_init(&o);
        if (strcmp(cases[i].field, "fail") == 0)
            o.fail = (sluice_fail_policy)7;
        else if (strcmp(cases[i].field, "fallback_instances") == 0)
            o.fallback_instances = 10001;
        else if (strcmp(cases[i].field, "rules_cache_ms") == 0)
            o.rules_cache_ms = 86400001;
        else if (strcmp(cases[i].field, "reserve_ms") == 0)
            o.reserve_ms = strstr(cases[i].quote, "=-1") ? -1 : 70000;
        else
            o.reserve_share = 51;
        assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                         SLUICE_EURL);
        if (strstr(err, cases[i].quote) == NULL)
            fail_msg("options.%s: want \"%s\" in: %s", cases[i].field,
                     cases[i].quote, err);
    }
}

/* The options table's rows check sluice_options' fields with the URL's
 * ranges (timeouts were checked only in the URL before the table), and set
 * the defaults that --help states. */
static void option_rows_check_the_struct_and_set_defaults(void **state)
{
    static const struct {
        const char *field, *quote;
        sluice_status st;
    } cases[] = {
        {"command_timeout_ms",
         "options.command_timeout_ms=86400001: expected 1..86400000 ms",
         SLUICE_EURL},
        {"connect_timeout_ms",
         "options.connect_timeout_ms=86400001: expected 1..86400000 ms",
         SLUICE_EURL},
        {"ttl_floor_ms", "options.ttl_floor_ms=86400001: expected 1..86400000",
         SLUICE_EURL},
        {"deny_cache", "options.deny_cache=1000001: expected 0..1000000",
         SLUICE_EINVAL},
    };
    sluice_options o;
    char err[512] = "";
    sl_url u;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_options_init(&o);
        if (strcmp(cases[i].field, "command_timeout_ms") == 0)
            o.command_timeout_ms = 86400001;
        else if (strcmp(cases[i].field, "connect_timeout_ms") == 0)
            o.connect_timeout_ms = 86400001;
        else if (strcmp(cases[i].field, "ttl_floor_ms") == 0)
            o.ttl_floor_ms = 86400001;
        else
            o.deny_cache = 1000001;
        assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                         cases[i].st);
        if (strstr(err, cases[i].quote) == NULL)
            fail_msg("options.%s: want \"%s\" in: %s", cases[i].field,
                     cases[i].quote, err);
    }
    /* The URL's valid value wins over the struct's, unchecked then. */
    sluice_options_init(&o);
    o.reserve_ms = 70000;
    assert_int_equal(
        sl_url_parse("mem://?reserve_ms=100", &o, &u, err, sizeof(err)),
        SLUICE_OK);
    assert_int_equal(u.cfg.reserve_ms, 100);
    /* Defaults: each as its --help says. */
    assert_int_equal(sl_url_parse("mem://", NULL, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(u.cfg.rules_cache_ms, 1000);
    assert_int_equal(u.cfg.rules_stale_ms, 3600000);
    assert_int_equal(u.cfg.fallback_instances, 1);
    assert_int_equal(u.cfg.reserve_share, 10);
    assert_int_equal(u.cfg.fallback_max_keys, 0);
    for (i = 0; sl_option_name(i) != NULL; i++) {
        char want[40];

        if (sl_option_default(i) == 0)
            continue;
        snprintf(want, sizeof(want), "(default %lld)", sl_option_default(i));
        if (strstr(sl_option_help(i), want) == NULL)
            fail_msg("option %s: default %lld, its help says \"%s\"",
                     sl_option_name(i), sl_option_default(i),
                     sl_option_help(i));
    }
    /* 0 in the URL is none (-1), where 0 is the default. */
    assert_int_equal(sl_url_parse("mem://?rules_cache_ms=0&fallback_max_keys=0",
                                  NULL, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(u.cfg.rules_cache_ms, -1);
    assert_int_equal(u.cfg.fallback_max_keys, -1);
}

/* A text option's bad value is quoted (its first 40 bytes), a secret's
 * never. */
static void text_options_quote_their_value(void **state)
{
    char url[600], err[512] = "";
    sl_url u;

    (void)state;
    parse_bad("redis://h?socket=/run/%zz", "option socket=/run/%zz: a bad "
                                           "escape");
    snprintf(url, sizeof(url), "redis://h?tls_ca_file=/%0300d", 0);
    parse_bad(url, "option tls_ca_file=/000000000");
    snprintf(url, sizeof(url),
             "redis+sentinel://s:26379/m?sentinel_password=%0300d", 7);
    assert_int_equal(sl_url_parse(url, NULL, &u, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "option sentinel_password=***: a bad escape"));
    assert_null(strstr(err, "0000"));
}

static void credentials_come_from_options_when_the_url_has_none(void **state)
{
    sluice_options o;
    char err[512] = "";
    sl_url u;

    (void)state;
    memset(&o, 0, sizeof(o));
    o.user = "svc";
    o.password = "from-options";
    assert_int_equal(sl_url_parse("redis://h:1", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.ep.user, "svc");
    assert_string_equal(u.ep.password, "from-options");
    assert_int_equal(
        sl_url_parse("redis://me:in-url@h:1", &o, &u, err, sizeof(err)),
        SLUICE_OK);
    assert_string_equal(u.ep.user, "me");
    assert_string_equal(u.ep.password, "in-url");
    o.user = NULL;
    assert_int_equal(sl_url_parse("twemproxy://h:1", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.ep.user, "");
    assert_string_equal(u.ep.password, "from-options");
    o.user = "svc";
    assert_int_equal(sl_url_parse("twemproxy://h:1", &o, &u, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "options.user"));
    assert_int_equal(sl_url_parse("mem://", &o, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_string_equal(u.ep.password, "");
}

static void tls_and_unix_socket_options(void **state)
{
    sl_url u = parse_ok("rediss://h:6380?tls_ca_file=/ca%20dir/ca.crt&"
                        "tls_cert=/c.pem&tls_key=/k.pem&tls_server_name=r.x");

    (void)state;
    assert_int_equal(u.scheme, SL_SCHEME_REDIS);
    assert_true(u.ep.tls);
    assert_false(u.ep.tls_insecure);
    assert_string_equal(u.ep.tls_ca_file, "/ca dir/ca.crt");
    assert_string_equal(u.ep.tls_cert, "/c.pem");
    assert_string_equal(u.ep.tls_key, "/k.pem");
    assert_string_equal(u.ep.tls_server_name, "r.x");
    u = parse_ok("redis://h:6379");
    assert_false(u.ep.tls);
    u = parse_ok("redis+multi://h?tls=1&tls_verify=0&tls_ca_dir=/etc/ssl");
    assert_int_equal(u.scheme, SL_SCHEME_MULTI);
    assert_true(u.ep.tls);
    assert_true(u.ep.tls_insecure);
    assert_string_equal(u.ep.tls_ca_dir, "/etc/ssl");
    u = parse_ok("redis-cluster://a:1,b:2?tls=yes");
    assert_true(u.ep.tls);
    u = parse_ok("redis://localhost?socket=/run/redis/redis.sock");
    assert_string_equal(u.ep.socket, "/run/redis/redis.sock");
    parse_bad("twemproxy://h:22121?tls=1", "twemproxy has no TLS");
    parse_bad("redis://h?tls_ca_file=/ca.crt", "without TLS");
    parse_bad("redis://h?tls=maybe", "expected 1 or 0");
    parse_bad("redis://h?socket=run/redis.sock", "absolute path");
    parse_bad("redis-cluster://h:1?socket=/s", "not through a socket");
    parse_bad("mem://?tls=1", "no socket, no TLS");
    parse_bad("rediss://h?tls_cert=", "option tls_cert: empty");
}

/* A server that is down: after two failed connects in a row, calls fail
 * at once (naming the last failure) until the backoff has passed, then
 * try again. */
static void connects_back_off_after_failures(void **state)
{
    sluice_options o;
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl = NULL;
    struct timespec pause = {0, 0};
    int i, n;

    (void)state;
    memset(&o, 0, sizeof(o));
    o.fail = SLUICE_FAIL_OPEN; /* open connects, and goes on if it fails */
    assert_int_equal(sluice_open("redis://127.0.0.1:1", &o, &sl, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_ruleset_parse("fixed:3/1s", &rs, NULL, 0),
                     SLUICE_OK);
    /* The open's attempt and this one fail for real (nothing listens). */
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ECONNECT);
    assert_null(strstr(sluice_errmsg(sl), "in a row"));
    /* Two in a row: the next calls within the backoff (50 ms after the
     * second failure, twice as long after each further one, 1 s from the
     * seventh) fail at once, naming the last failure and the count. A call
     * the machine held past the backoff (valgrind on a busy machine) tries
     * for real and fails again, with a longer backoff: so calls go on
     * until one lands within it. */
    for (i = 0, n = 0; i < 50 && n == 0; i++) {
        const char *at;

        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
        assert_int_equal(r.status, SLUICE_ECONNECT);
        assert_non_null(strstr(sluice_errmsg(sl), "cannot connect"));
        if ((at = strstr(sluice_errmsg(sl), " failed attempts in a row")) !=
            NULL) {
            while (at > sluice_errmsg(sl) && at[-1] >= '0' && at[-1] <= '9')
                at--;
            n = atoi(at);
            assert_true(n >= 2);
        }
    }
    assert_true(n >= 2);
    /* Past the backoff of n failures (and 20 ms), a call tries for real. */
    {
        int64_t ms = sl_socket_backoff_ms((unsigned)n) + 20;

        pause.tv_sec = (time_t)(ms / 1000);
        pause.tv_nsec = (long)(ms % 1000) * 1000000L;
    }
    nanosleep(&pause, NULL);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ECONNECT);
    assert_null(strstr(sluice_errmsg(sl), "in a row"));
    sluice_close(sl);
}

static void null_url_is_misuse(void **state)
{
    sl_url u;

    (void)state;
    assert_int_equal(sl_url_parse(NULL, NULL, &u, NULL, 0), SLUICE_EINVAL);
}

/* Opens a handle on a port where nothing listens, with a fail policy, and
 * returns the policy's answer; the result names the failure. */
static bool policy_answer(sluice_fail_policy fail)
{
    sluice_options o;
    sluice_ruleset rs;
    sluice_result r;
    sluice *sl = NULL;
    char err[512];

    memset(&o, 0, sizeof(o));
    o.fail = fail;
    assert_int_equal(
        sluice_open("redis://127.0.0.1:1", &o, &sl, err, sizeof(err)),
        SLUICE_OK);
    assert_int_equal(sluice_ruleset_parse("fixed:3/1s", &rs, NULL, 0),
                     SLUICE_OK);
    assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r), SLUICE_OK);
    assert_int_equal(r.status, SLUICE_ECONNECT);
    assert_non_null(strstr(sluice_errmsg(sl), "cannot connect"));
    /* A reset has no policy: it reports the failure. */
    assert_int_equal(sluice_reset(sl, "k", 1, &rs), SLUICE_ECONNECT);
    sluice_close(sl);
    return r.allowed;
}

static void open_reports_bad_urls_and_unreachable_servers(void **state)
{
    sluice *sl = (sluice *)1;
    char err[512];

    (void)state;
    assert_int_equal(sluice_open("nope://", NULL, &sl, err, sizeof(err)),
                     SLUICE_EURL);
    assert_null(sl);
    assert_int_equal(
        sluice_open("mem://?clock=server", NULL, &sl, err, sizeof(err)),
        SLUICE_EURL);
    assert_non_null(strstr(err, "no server clock"));
    /* Port 1 on loopback: nothing listens there. The open succeeds (a
     * service starts before Redis); the first decision says why not. */
    assert_int_equal(
        sluice_open("redis://127.0.0.1:1", NULL, &sl, err, sizeof(err)),
        SLUICE_OK);
    {
        sluice_ruleset rs;
        sluice_result r;

        assert_int_equal(sluice_ruleset_parse("fixed:3/1s", &rs, NULL, 0),
                         SLUICE_OK);
        assert_int_equal(sluice_acquire(sl, "k", 1, &rs, 1, &r),
                         SLUICE_ECONNECT);
        assert_non_null(strstr(sluice_errmsg(sl), "127.0.0.1:1"));
    }
    sluice_close(sl);
    /* A CA directory that cannot be read is the URL's fault, found at
     * open as tls_ca_file's is, not a failure of every connect. */
    assert_int_equal(sluice_open("rediss://127.0.0.1:1?tls_ca_dir=/nonexistent",
                                 NULL, &sl, err, sizeof(err)),
                     SLUICE_EURL);
    assert_null(sl);
    assert_non_null(strstr(err, "tls_ca_dir=/nonexistent"));
    assert_int_equal(sluice_open("rediss://127.0.0.1:1?tls_ca_dir=/etc/passwd",
                                 NULL, &sl, err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "not a directory"));
    /* With a fail policy the handle opens and the policy answers. */
    assert_true(policy_answer(SLUICE_FAIL_OPEN));
    assert_false(policy_answer(SLUICE_FAIL_CLOSED));
    sluice_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redis_urls_give_host_port_credentials_and_db),
        cmocka_unit_test(defaults_are_filled_and_query_overrides_them),
        cmocka_unit_test(bad_urls_are_refused_with_the_reason),
        cmocka_unit_test(null_url_is_misuse),
        cmocka_unit_test(schemes_are_case_insensitive),
        cmocka_unit_test(the_option_table_drives_the_parser_and_its_message),
        cmocka_unit_test(tls_and_unix_socket_options),
        cmocka_unit_test(connects_back_off_after_failures),
        cmocka_unit_test(every_url_form_parses_alike_with_and_without_a_query),
        cmocka_unit_test(messages_hide_passwords),
        cmocka_unit_test(sentinel_urls),
        cmocka_unit_test(percent_escapes_are_two_hex_digits_and_never_nul),
        cmocka_unit_test(credentials_come_from_options_when_the_url_has_none),
        cmocka_unit_test(options_are_read_as_far_as_their_struct_size_says),
        cmocka_unit_test(out_of_range_options_are_quoted),
        cmocka_unit_test(option_rows_check_the_struct_and_set_defaults),
        cmocka_unit_test(text_options_quote_their_value),
        cmocka_unit_test(the_limits_file_comes_from_the_url_over_the_options),
        cmocka_unit_test(open_reports_bad_urls_and_unreachable_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
