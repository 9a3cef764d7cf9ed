/* SPDX-License-Identifier: BSD-3-Clause */
/* test_slot.c - the cluster client's routing: key slots with and without
 * hash tags, the slot map from CLUSTER SLOTS, and redirections. */
#include "backends/slotmap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static unsigned slot(const char *k)
{
    return sl_slot_of_key(k, strlen(k));
}

static void slots_match_redis_cluster(void **state)
{
    (void)state;
    /* Values from CLUSTER KEYSLOT on Redis 7.0. */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("k1"), 12706);
    assert_int_equal(slot("a"), 15495);
    assert_int_equal(slot("123456789"), 12739);
    assert_int_equal(slot(""), 0);
}

static void hash_tags_pick_the_first_non_empty_braces(void **state)
{
    (void)state;
    assert_int_equal(slot("{u1}:x"), 4574);
    assert_int_equal(slot("{u1}:y"), 4574);
    assert_int_equal(slot("sluice:{u1}:fixed:1000:0"), 4574);
    assert_int_equal(slot("{m}:c"), 15627);
    assert_int_equal(slot("{a}:x"), slot("a"));
    /* Empty braces: the whole key counts. */
    assert_int_equal(slot("{}foo"), sl_slot_of_key("{}foo", 5));
    assert_int_not_equal(slot("{}foo"), slot(""));
    /* Only the first '{' and the first '}' after it. */
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    /* No closing brace: the whole key. */
    assert_int_equal(slot("{foo"), sl_slot_of_key("{foo", 4));
    /* Binary keys. */
    assert_int_equal(sl_slot_of_key("{a\0b}:x", 7), sl_slot_of_key("a\0b", 3));
}

/* Parses RESP text with hiredis's own reader. */
static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;

    assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

static void the_map_follows_cluster_slots(void **state)
{
    sl_slotmap m;
    redisReply *r;

    (void)state;
    sl_slotmap_init(&m);
    assert_int_equal(m.slots[0], -1);
    /* Three ranges; the third has an empty endpoint ("the host you
     * asked"), the second a replica after the master. */
    r = resp(
        "*3\r\n"
        "*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$1\r\nx\r\n"
        "*4\r\n:5461\r\n:10922\r\n*3\r\n$9\r\n127.0.0.2\r\n:7001\r\n$1\r\n"
        "y\r\n*3\r\n$9\r\n127.0.0.9\r\n:7009\r\n$1\r\nz\r\n"
        "*3\r\n:10923\r\n:16383\r\n*3\r\n$0\r\n\r\n:7002\r\n$1\r\nw\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "10.1.1.1"), 16384);
    freeReplyObject(r);
    assert_int_equal(m.nnodes, 3);
    assert_string_equal(m.nodes[m.slots[0]].host, "127.0.0.1");
    assert_int_equal(m.nodes[m.slots[5460]].port, 7000);
    assert_int_equal(m.nodes[m.slots[5461]].port, 7001);
    assert_string_equal(m.nodes[m.slots[16383]].host, "10.1.1.1");
    /* After a migration one slot moves; known nodes keep their index. */
    r = resp(
        "*1\r\n*3\r\n:15627\r\n:15627\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "10.1.1.1"), 1);
    freeReplyObject(r);
    assert_int_equal(m.slots[15627], m.slots[0]);
    assert_int_equal(m.nnodes, 3);
    /* Not a slot map. */
    r = resp("-ERR This instance has cluster support disabled\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    r = resp("*1\r\n*3\r\n:9\r\n:99999\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    /* Ports out of range are refused (found by fuzz_reply). */
    r = resp("*1\r\n*3\r\n:0\r\n:100\r\n*2\r\n$1\r\nh\r\n:99999\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    r = resp("*1\r\n*3\r\n:0\r\n:100\r\n*2\r\n$1\r\nh\r\n:-7\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    /* A reply refused at its second entry changes nothing of the map. */
    r = resp("*2\r\n*3\r\n:0\r\n:100\r\n*2\r\n$1\r\nq\r\n:7000\r\n:5\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    assert_string_equal(m.nodes[m.slots[0]].host, "127.0.0.1");
    assert_int_equal(m.nnodes, 3);
}

static void moved_updates_the_map_and_ask_does_not(void **state)
{
    sl_slotmap m;
    unsigned s = 0;
    int node = -1, first, second, third;

    (void)state;
    sl_slotmap_init(&m);
    first = sl_slotmap_node(&m, "127.0.0.1", 7000);
    second = sl_slotmap_node(&m, "127.0.0.1", 7002);
    third = sl_slotmap_node(&m, "127.0.0.1", 7003);
    m.slots[3999] = (int16_t)first;
    assert_int_equal(sl_slotmap_redirect(&m, "MOVED 3999 127.0.0.1:7002",
                                         "127.0.0.1", &s, &node),
                     SL_REDIRECT_MOVED);
    assert_int_equal(s, 3999);
    assert_int_equal(node, second);
    assert_int_equal(m.slots[3999], second);
    assert_int_equal(sl_slotmap_redirect(&m, "ASK 100 127.0.0.1:7003",
                                         "127.0.0.1", &s, &node),
                     SL_REDIRECT_ASK);
    assert_int_equal(s, 100);
    assert_int_equal(node, third);
    assert_int_equal(m.slots[100], -1);
    /* An empty or unknown host means the node that answered. */
    sl_slotmap_node(&m, "192.0.2.7", 30003);
    assert_int_equal(
        sl_slotmap_redirect(&m, "MOVED 12182 :30003", "192.0.2.7", &s, &node),
        SL_REDIRECT_MOVED);
    assert_string_equal(m.nodes[node].host, "192.0.2.7");
    assert_int_equal(m.nodes[node].port, 30003);
    sl_slotmap_node(&m, "192.0.2.8", 30001);
    assert_int_equal(
        sl_slotmap_redirect(&m, "MOVED 5061 ?:30001", "192.0.2.8", &s, &node),
        SL_REDIRECT_MOVED);
    assert_string_equal(m.nodes[node].host, "192.0.2.8");
    /* IPv6 hosts keep their colons. */
    sl_slotmap_node(&m, "::1", 7010);
    assert_int_equal(
        sl_slotmap_redirect(&m, "MOVED 1 ::1:7010", "x", &s, &node),
        SL_REDIRECT_MOVED);
    assert_string_equal(m.nodes[node].host, "::1");
    /* Issue 20: a node no map named is not added, nor made the owner; the
     * cluster reads the map again before it goes anywhere. */
    assert_int_equal(sl_slotmap_redirect(&m, "MOVED 3999 192.0.2.1:6379",
                                         "127.0.0.1", &s, &node),
                     SL_REDIRECT_MOVED);
    assert_int_equal(node, -1);
    assert_int_equal(s, 3999);
    assert_int_equal(m.slots[3999], second);
    assert_int_equal(sl_slotmap_redirect(&m, "ASK 3999 192.0.2.1:6379",
                                         "127.0.0.1", &s, &node),
                     SL_REDIRECT_ASK);
    assert_int_equal(node, -1);
    assert_int_equal(m.nnodes, 6);
    /* Anything else is not a redirection. */
    assert_int_equal(
        sl_slotmap_redirect(&m, "TRYAGAIN Multiple keys", "x", &s, &node),
        SL_REDIRECT_NONE);
    assert_int_equal(sl_slotmap_redirect(&m, "MOVED 16384 h:1", "x", &s, &node),
                     SL_REDIRECT_NONE);
    assert_int_equal(sl_slotmap_redirect(&m, "MOVED 1 h:0", "x", &s, &node),
                     SL_REDIRECT_NONE);
    assert_int_equal(sl_slotmap_redirect(&m, "MOVED x", "x", &s, &node),
                     SL_REDIRECT_NONE);
}

/* Issue 20: a map with two entries over one slot is refused, and any
 * reply costs at most one pass over the slots. */
static void overlapping_and_absurd_maps_are_refused(void **state)
{
    static const char entry[] =
        "*3\r\n:0\r\n:16383\r\n*2\r\n$1\r\nh\r\n:7000\r\n";
    sl_slotmap m;
    redisReply *r;
    char *text;
    size_t n = 20000, k, len = strlen(entry);

    (void)state;
    sl_slotmap_init(&m);
    r = resp("*2\r\n*3\r\n:0\r\n:100\r\n*2\r\n$1\r\nh\r\n:7000\r\n"
             "*3\r\n:100\r\n:200\r\n*2\r\n$1\r\ni\r\n:7001\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    assert_int_equal(m.nnodes, 0);
    assert_int_equal(m.slots[100], -1);
    /* 20,000 entries, each over every slot. */
    text = malloc(32 + n * len);
    assert_non_null(text);
    k = (size_t)sprintf(text, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++, k += len)
        memcpy(text + k, entry, len);
    text[k] = '\0';
    r = resp(text);
    free(text);
    assert_int_equal(sl_slotmap_load(&m, r, "h"), -1);
    freeReplyObject(r);
    assert_int_equal(m.nnodes, 0);
    /* Adjacent ranges are a map. */
    r = resp("*2\r\n*3\r\n:0\r\n:99\r\n*2\r\n$1\r\nh\r\n:7000\r\n"
             "*3\r\n:100\r\n:16383\r\n*2\r\n$1\r\ni\r\n:7001\r\n");
    assert_int_equal(sl_slotmap_load(&m, r, "h"), 16384);
    freeReplyObject(r);
}

static void a_full_node_table_is_reported(void **state)
{
    sl_slotmap m;
    int i;

    (void)state;
    sl_slotmap_init(&m);
    for (i = 0; i < SL_MAX_NODES; i++)
        assert_int_equal(sl_slotmap_node(&m, "h", 1000 + i), i);
    assert_int_equal(sl_slotmap_node(&m, "h", 1000), 0);
    assert_int_equal(sl_slotmap_node(&m, "h", 9999), -1);
}

static void cluster_urls_take_several_seeds(void **state)
{
    sl_url u;
    char err[256];

    (void)state;
    assert_int_equal(sl_url_parse("redis-cluster://a:b@h1:7000,h2:7001,"
                                  "[::1]:7002?timeout_ms=9",
                                  NULL, &u, err, sizeof(err)),
                     SLUICE_OK);
    assert_int_equal(u.nseeds, 3);
    assert_string_equal(u.seeds[1].host, "h2");
    assert_int_equal(u.seeds[2].port, 7002);
    assert_string_equal(u.seeds[2].host, "::1");
    assert_string_equal(u.ep.user, "a");
    assert_string_equal(u.ep.host, "h1");
    assert_int_equal(u.cfg.command_timeout_ms, 9);
    assert_int_equal(sl_url_parse("redis-cluster://h1:7000,,h2:1", NULL, &u,
                                  err, sizeof(err)),
                     SLUICE_EURL);
    assert_non_null(strstr(err, "empty seed"));
    assert_int_equal(
        sl_url_parse("redis-cluster://h1:7000/2", NULL, &u, err, sizeof(err)),
        SLUICE_EURL);
    assert_non_null(strstr(err, "no databases"));
    assert_int_equal(
        sl_url_parse("redis-cluster://h1:0", NULL, &u, err, sizeof(err)),
        SLUICE_EURL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slots_match_redis_cluster),
        cmocka_unit_test(hash_tags_pick_the_first_non_empty_braces),
        cmocka_unit_test(the_map_follows_cluster_slots),
        cmocka_unit_test(moved_updates_the_map_and_ask_does_not),
        cmocka_unit_test(overlapping_and_absurd_maps_are_refused),
        cmocka_unit_test(a_full_node_table_is_reported),
        cmocka_unit_test(cluster_urls_take_several_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
