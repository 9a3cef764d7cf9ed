/* SPDX-License-Identifier: BSD-3-Clause */
/* test_resp.c - RESP both ways (src/net/resp.c), with no socket: commands
 * formatted as Redis reads them, replies read whole and in order however
 * the bytes arrive, the cap on one reply (max_reply_bytes), and what is
 * not RESP. */
#include "net/resp.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void a_command_is_formatted_as_resp(void **state)
{
    const char *argv[3] = {"SET", "k", "v"};
    const char *bin[2] = {"GET", "a\0b"};
    const size_t lens[2] = {3, 3};
    char buf[128];
    size_t n;

    (void)state;
    n = sl_resp_format(buf, 3, argv, NULL);
    assert_int_equal(n, strlen("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));
    assert_memory_equal(buf, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", n);
    assert_true(sl_resp_size(3, argv, NULL) >= n);
    /* Binary-safe with lengths: a NUL inside an argument goes through. */
    n = sl_resp_format(buf, 2, bin, lens);
    assert_int_equal(n, 22);
    assert_memory_equal(buf, "*2\r\n$3\r\nGET\r\n$3\r\na\0b\r\n", n);
    assert_true(sl_resp_size(2, bin, lens) >= n);
}

static void replies_come_whole_and_in_order_however_bytes_arrive(void **state)
{
    static const char bytes[] = "+OK\r\n:42\r\n*2\r\n$1\r\na\r\n$-1\r\n";
    sluice_status st = SLUICE_OK;
    redisReply *r = NULL;
    char why[SL_ERR_LEN];
    sl_resp rs;
    size_t i;
    int kinds[3], got = 0;

    (void)state;
    assert_true(sl_resp_open(&rs, 1 << 20));
    /* One byte at a time: a reply is taken only once it is complete. */
    for (i = 0; i + 1 < sizeof(bytes); i++) {
        assert_true(sl_resp_feed(&rs, bytes + i, 1, &st, why, sizeof(why)));
        while (sl_resp_take(&rs, &r, &st, why, sizeof(why)) == 1) {
            assert_true(got < 3);
            kinds[got++] = r->type;
            if (r->type == REDIS_REPLY_INTEGER)
                assert_int_equal(r->integer, 42);
            freeReplyObject(r);
        }
    }
    assert_int_equal(got, 3);
    assert_int_equal(kinds[0], REDIS_REPLY_STATUS);
    assert_int_equal(kinds[1], REDIS_REPLY_INTEGER);
    assert_int_equal(kinds[2], REDIS_REPLY_ARRAY);
    assert_false(sl_resp_pending(&rs));
    sl_resp_close(&rs);
    sl_resp_close(&rs); /* closed twice: fine */
}

static void a_reply_over_the_cap_is_refused(void **state)
{
    char big[300], why[SL_ERR_LEN];
    sluice_status st = SLUICE_OK;
    redisReply *r = NULL;
    sl_resp rs;
    int n;

    (void)state;
    /* A bulk string of 200 bytes against a cap of 128. */
    n = snprintf(big, sizeof(big), "$200\r\n");
    memset(big + n, 'x', 200);
    memcpy(big + n + 200, "\r\n", 2);
    assert_true(sl_resp_open(&rs, 128));
    if (sl_resp_feed(&rs, big, (size_t)n + 202, &st, why, sizeof(why)))
        assert_int_equal(sl_resp_take(&rs, &r, &st, why, sizeof(why)), -1);
    assert_int_equal(st, SLUICE_EPROTO);
    assert_non_null(strstr(why, "more than 128 bytes (max_reply_bytes)"));
    sl_resp_close(&rs);

    /* An array's header alone: refused before its elements' room. */
    assert_true(sl_resp_open(&rs, 1024));
    assert_true(sl_resp_feed(&rs, "*100000000\r\n", 12, &st, why, sizeof(why)));
    assert_int_equal(sl_resp_take(&rs, &r, &st, why, sizeof(why)), -1);
    assert_int_equal(st, SLUICE_EPROTO);
    assert_non_null(strstr(why, "more than 1024 bytes"));
    sl_resp_close(&rs);
}

static void the_cap_counts_each_reply_afresh(void **state)
{
    char why[SL_ERR_LEN];
    sluice_status st = SLUICE_OK;
    redisReply *r = NULL;
    sl_resp rs;
    int i;

    (void)state;
    /* Each reply costs well under the cap; together far over it. */
    assert_true(sl_resp_open(&rs, 256));
    for (i = 0; i < 100; i++) {
        assert_true(
            sl_resp_feed(&rs, "$5\r\nhello\r\n", 11, &st, why, sizeof(why)));
        assert_int_equal(sl_resp_take(&rs, &r, &st, why, sizeof(why)), 1);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        freeReplyObject(r);
    }
    sl_resp_close(&rs);
}

static void bytes_that_are_not_resp_are_a_protocol_error(void **state)
{
    char why[SL_ERR_LEN];
    sluice_status st = SLUICE_OK;
    redisReply *r = NULL;
    sl_resp rs;

    (void)state;
    assert_true(sl_resp_open(&rs, 1 << 20));
    assert_true(
        sl_resp_feed(&rs, "HTTP/1.1 400\r\n", 14, &st, why, sizeof(why)));
    assert_int_equal(sl_resp_take(&rs, &r, &st, why, sizeof(why)), -1);
    assert_int_equal(st, SLUICE_EPROTO);
    assert_non_null(strstr(why, "sent what is not a Redis reply"));
    sl_resp_close(&rs);
}

static void replies_are_described_printably(void **state)
{
    static char said[] = "ERR \x1b[31mred";
    redisReply err = {0}, num = {0};
    char buf[128];

    (void)state;
    err.type = REDIS_REPLY_ERROR;
    err.str = said;
    err.len = strlen(said);
    sl_reply_describe(buf, sizeof(buf), &err);
    assert_string_equal(buf, "error \"ERR \\x1b[31mred\"");
    num.type = REDIS_REPLY_INTEGER;
    num.integer = -1;
    sl_reply_describe(buf, sizeof(buf), &num);
    assert_string_equal(buf, "integer -1");
    assert_string_equal(sl_reply_type_name(REDIS_REPLY_NIL), "nil");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_command_is_formatted_as_resp),
        cmocka_unit_test(replies_come_whole_and_in_order_however_bytes_arrive),
        cmocka_unit_test(a_reply_over_the_cap_is_refused),
        cmocka_unit_test(the_cap_counts_each_reply_afresh),
        cmocka_unit_test(bytes_that_are_not_resp_are_a_protocol_error),
        cmocka_unit_test(replies_are_described_printably),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
