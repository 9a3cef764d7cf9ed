/* SPDX-License-Identifier: BSD-3-Clause */
/* test_caps.c - the backends' capabilities as data (src/caps.c): each
 * backend declares its scheme's set, the refusals come in the order the
 * plain backends sorted them, and the docs say what the table says:
 * docs/BACKENDS.md's block between its markers ("What each backend
 * refuses") equals what this test renders from the table (it prints the
 * block to paste when they differ), and the README's capability matrix
 * (its token, gcra and server clock columns) agrees with it.
 *   test_caps README.md docs/BACKENDS.md */
#include "backend.h"
#include "caps.h"
#include "request.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *readme_path, *backends_path;

static const struct {
    const char *urls; /* the README's first column */
    const sl_backend *b;
    sl_scheme scheme;
} backends[] = {
    {"`mem://`", &sl_backend_memory, SL_SCHEME_MEM},
    {"`redis://`, `rediss://`", &sl_backend_evalsha, SL_SCHEME_REDIS},
    {"`redis+multi://`", &sl_backend_multi, SL_SCHEME_MULTI},
    {"`twemproxy://`", &sl_backend_twemproxy, SL_SCHEME_TWEMPROXY},
    {"`redis-cluster://`", &sl_backend_cluster, SL_SCHEME_CLUSTER},
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

/* The matrix's columns: what is asked, as the library asks it. */
static const struct {
    const char *what;
    sl_ask ask;
    unsigned need;
} columns[] = {
    {"token, gcra", SL_ASK_REQUEST, SL_CAP_BUCKET},
    {"a settle's excess on token, gcra", SL_ASK_REQUEST, SL_CAP_FORCE_BUCKET},
    {"`block=`", SL_ASK_REQUEST, SL_CAP_BLOCK},
    {"refunds of token, gcra", SL_ASK_REQUEST, SL_CAP_REFUND},
    {"refunds of fixed, sliding, log", SL_ASK_REQUEST,
     SL_CAP_REFUND | SL_CAP_REFUND_WINDOW},
    {"TLS", SL_ASK_TRANSPORT, SL_CAP_SERVER | SL_CAP_TLS},
    {"socket", SL_ASK_TRANSPORT, SL_CAP_SERVER | SL_CAP_SOCKET},
    {"`clock=server`", SL_ASK_CLOCK, SL_CAP_SERVER | SL_CAP_SERVER_CLOCK},
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

static const char *status_name(sluice_status st)
{
    switch (st) {
    case SLUICE_EURL:
        return "SLUICE_EURL";
    case SLUICE_EUNSUPPORTED:
        return "SLUICE_EUNSUPPORTED";
    default:
        fail_msg("a refusal with status %d: name it here", (int)st);
        return "?";
    }
}

/* The block the README holds between its markers. */
static void render(char *out, size_t len)
{
    size_t i, k, at = 0;

#define PUT(...)                                            \
    do {                                                    \
        int w_ = snprintf(out + at, len - at, __VA_ARGS__); \
        assert_true(w_ >= 0 && (size_t)w_ < len - at);      \
        at += (size_t)w_;                                   \
    } while (0)
    PUT("| URL |");
    for (k = 0; k < NCOLUMNS; k++)
        PUT(" %s |", columns[k].what);
    PUT("\n|---|");
    for (k = 0; k < NCOLUMNS; k++)
        PUT("---|");
    PUT("\n");
    for (i = 0; i < NBACKENDS; i++) {
        PUT("| %s |", backends[i].urls);
        for (k = 0; k < NCOLUMNS; k++) {
            const sl_refusal *r = sl_caps_refusal(
                columns[k].ask, columns[k].need, backends[i].b->caps);

            if (r == NULL)
                PUT(" yes |");
            else
                PUT(" `%s` |", status_name(r->status));
        }
        PUT("\n");
    }
#undef PUT
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void backends_declare_their_schemes_sets(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < NBACKENDS; i++)
        assert_int_equal(backends[i].b->caps,
                         sl_caps_of_scheme(backends[i].scheme));
    /* Every bit a backend lacks has a refusal to give. */
    for (i = 0; i < SL_CAP_COUNT; i++) {
        size_t k;
        bool found = false;

        for (k = 0; k < sl_refusals_count; k++)
            found |= sl_refusals[k].bit == 1u << i;
        assert_true(found);
    }
}

static sluice_ruleset rules(const char *text)
{
    sluice_ruleset rs;

    assert_int_equal(sluice_ruleset_parse(text, &rs, NULL, 0), SLUICE_OK);
    return rs;
}

/* The order of plain.c's classify before the table: a settle's excess
 * first, a block before the family, any refund before a window's. */
static void refusals_come_in_the_plain_backends_order(void **state)
{
    sluice_ruleset both = rules("fixed:3/1s,block=10s+token:5/1s");
    sluice_ruleset fixed = rules("fixed:3/1s");
    sl_request rq;
    const sl_refusal *r;

    (void)state;
    memset(&rq, 0, sizeof(rq));
    rq.decide.rules = &both;
    rq.op = SL_OP_ACQUIRE;
    r = sl_caps_refusal(SL_ASK_REQUEST, sl_caps_needs(&rq), SL_CAPS_TWEMPROXY);
    assert_non_null(r);
    assert_int_equal(r->bit, SL_CAP_BLOCK);
    rq.op = SL_OP_FORCE;
    r = sl_caps_refusal(SL_ASK_REQUEST, sl_caps_needs(&rq), SL_CAPS_TWEMPROXY);
    assert_int_equal(r->bit, SL_CAP_FORCE_BUCKET);
    assert_null(
        sl_caps_refusal(SL_ASK_REQUEST, sl_caps_needs(&rq), SL_CAPS_MULTI));
    rq.op = SL_OP_REFUND;
    rq.decide.rules = &fixed;
    r = sl_caps_refusal(SL_ASK_REQUEST, sl_caps_needs(&rq), SL_CAPS_TWEMPROXY);
    assert_int_equal(r->bit, SL_CAP_REFUND);
    r = sl_caps_refusal(SL_ASK_REQUEST, sl_caps_needs(&rq), SL_CAPS_MULTI);
    assert_int_equal(r->bit, SL_CAP_REFUND_WINDOW);
    assert_int_equal(r->status, SLUICE_EUNSUPPORTED);
    rq.op = SL_OP_RESET;
    assert_int_equal(sl_caps_needs(&rq), 0);
    r = sl_caps_refusal(SL_ASK_CLOCK, SL_CAP_SERVER | SL_CAP_SERVER_CLOCK,
                        SL_CAPS_MEMORY);
    assert_int_equal(r->status, SLUICE_EURL);
    assert_non_null(strstr(r->text, "no server clock"));
}

static void docs_block_is_the_tables(void **state)
{
    static const char begin[] = "<!-- capabilities: generated from "
                                "src/caps.c, checked by tests/test_caps.c "
                                "-->\n";
    static const char end[] = "<!-- capabilities: end -->";
    char want[8192];
    char *text = read_text(backends_path), *b, *e;

    (void)state;
    render(want, sizeof(want));
    b = strstr(text, begin);
    e = b != NULL ? strstr(b, end) : NULL;
    if (b == NULL || e == NULL ||
        (size_t)(e - b) != strlen(begin) + strlen(want) ||
        memcmp(b + strlen(begin), want, strlen(want)) != 0) {
        printf("# %s: the capabilities block differs from src/caps.c; "
               "it should read:\n%s%s%s\n",
               backends_path, begin, want, end);
        fail_msg("%s: the capabilities block is not caps.c's table",
                 backends_path);
    }
    free(text);
}

/* The cell of column k (from 0) of a table row "| a | b |...". */
static bool cell(const char *row, size_t k, char *out, size_t len)
{
    const char *p = row, *q;

    for (; k + 1 > 0; k--) {
        if ((p = strchr(p, '|')) == NULL)
            return false;
        p++;
        if (k == 0)
            break;
    }
    if ((q = strchr(p, '|')) == NULL)
        return false;
    while (*p == ' ')
        p++;
    snprintf(out, len, "%.*s", (int)(q - p), p);
    return true;
}

static void readme_algorithm_matrix_agrees(void **state)
{
    static const struct {
        const char *url;
        sl_scheme scheme;
    } schemes[] = {{"`mem://", SL_SCHEME_MEM},
                   {"`redis://", SL_SCHEME_REDIS},
                   {"`redis+multi://", SL_SCHEME_MULTI},
                   {"`twemproxy://", SL_SCHEME_TWEMPROXY},
                   {"`redis-cluster://", SL_SCHEME_CLUSTER}};
    char *text = read_text(readme_path), *line, *next;
    size_t rows = 0;

    (void)state;
    line = strstr(text, "## Capability matrix\n");
    assert_non_null(line);
    line = strstr(line, "\n| backend |");
    assert_non_null(line);
    for (line++; line[0] == '|'; line = next + 1) {
        char url[512], token[64], gcra[64], clock[128];
        size_t i;

        next = strchr(line, '\n');
        assert_non_null(next);
        *next = '\0';
        assert_true(cell(line, 1, url, sizeof(url)));
        for (i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
            if (strncmp(url, schemes[i].url, strlen(schemes[i].url)) == 0)
                break;
        if (i == sizeof(schemes) / sizeof(schemes[0]))
            continue; /* the header, its rule, the Sentinel's "as" row */
        {
            unsigned caps = sl_caps_of_scheme(schemes[i].scheme);
            bool bucket = (caps & SL_CAP_BUCKET) != 0;
            bool clocked = sl_caps_refusal(SL_ASK_CLOCK,
                                           SL_CAP_SERVER | SL_CAP_SERVER_CLOCK,
                                           caps) == NULL;

            assert_true(cell(line, 5, token, sizeof(token)));
            assert_true(cell(line, 6, gcra, sizeof(gcra)));
            assert_true(cell(line, 8, clock, sizeof(clock)));
            if (bucket == (strncmp(token, "refused", 7) == 0) ||
                bucket == (strncmp(gcra, "refused", 7) == 0) ||
                clocked == (strncmp(clock, "no", 2) == 0))
                fail_msg("README.md's matrix, row %s: token \"%s\", gcra "
                         "\"%s\", server clock \"%s\"; src/caps.c says %s, "
                         "%s",
                         url, token, gcra, clock,
                         bucket ? "token and gcra" : "no token, no gcra",
                         clocked ? "a server clock" : "no server clock");
            rows++;
        }
    }
    assert_int_equal(rows, 6); /* redis:// twice: also through the proxy */
    free(text);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backends_declare_their_schemes_sets),
        cmocka_unit_test(refusals_come_in_the_plain_backends_order),
        cmocka_unit_test(docs_block_is_the_tables),
        cmocka_unit_test(readme_algorithm_matrix_agrees),
    };

    if (argc != 3) {
        fprintf(stderr, "usage: test_caps README.md docs/BACKENDS.md\n");
        return 2;
    }
    readme_path = argv[1];
    backends_path = argv[2];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
