/* SPDX-License-Identifier: BSD-3-Clause */
/* resp.h - RESP, the Redis protocol, both ways and nothing else: a command
 * formatted into bytes, and replies read out of bytes by hiredis's reader
 * under a cap on what one reply may cost (max_reply_bytes). No sockets:
 * the connection (conn.h) feeds it what it read. */
#ifndef SL_NET_RESP_H
#define SL_NET_RESP_H

#include "internal.h"

#include <hiredis/hiredis.h>

#include <string.h>

/* The replies of one connection: hiredis's reader, and what the reply
 * under way has cost against the cap (its objects, as hiredis allocates
 * them). Lives where it is opened: the reader points back at it. */
typedef struct sl_resp {
    redisReader *reader; /* NULL: closed */
    size_t cap;          /* max_reply_bytes */
    size_t used;         /* what the reply under way has cost so far */
    bool over;           /* the reader stopped at the cap */
} sl_resp;

/* The room one command needs in RESP (an upper bound), and the command
 * written at dst, which has that room; returns its length. lens NULL:
 * every argument is a C string. */
static inline size_t sl_resp_size(int argc, const char **argv,
                                  const size_t *lens)
{
    size_t need = 24, i;

    for (i = 0; i < (size_t)argc; i++)
        need += 32 + (lens != NULL ? lens[i] : strlen(argv[i]));
    return need;
}
size_t sl_resp_format(char *dst, int argc, const char **argv,
                      const size_t *lens);

/* Opens the reader with the cap (bytes, > 0); false: out of memory. */
bool sl_resp_open(sl_resp *rs, size_t cap);
/* Frees the reader and what it holds; a closed one is fine. */
void sl_resp_close(sl_resp *rs);
/* Whether bytes of a reply not yet complete are held. */
bool sl_resp_pending(const sl_resp *rs);
/* The failures of sl_resp_feed and sl_resp_take, out of their way. */
bool sl_resp_feed_failed(sl_resp *rs, sluice_status *st, char *why,
                         size_t why_len);
int sl_resp_take_failed(sl_resp *rs, sluice_status *st, char *why,
                        size_t why_len);

/* Feeds n bytes read; false (the connection is to be dropped): st and why
 * say what failed, the cap or memory. What the reader holds is the reply
 * under way (those before it were taken): a bulk string is buffered whole
 * before it becomes a reply, so the cap counts it here. Inline, as the
 * take below: both run for every reply. */
static inline bool sl_resp_feed(sl_resp *rs, const char *buf, size_t n,
                                sluice_status *st, char *why, size_t why_len)
{
    if (rs->reader->len - rs->reader->pos > rs->cap - rs->used ||
        redisReaderFeed(rs->reader, buf, n) != REDIS_OK)
        return sl_resp_feed_failed(rs, st, why, why_len);
    return true;
}

/* Takes the next complete reply: 1 one in *r (the caller's to free with
 * freeReplyObject), 0 none yet, -1 the bytes are not RESP, or the cap or
 * memory stopped the reader: st and why say which. */
static inline int sl_resp_take(sl_resp *rs, redisReply **r, sluice_status *st,
                               char *why, size_t why_len)
{
    void *p = NULL;

    if (redisReaderGetReply(rs->reader, &p) != REDIS_OK)
        return sl_resp_take_failed(rs, st, why, why_len);
    if (p != NULL)
        rs->used = 0; /* the next reply counts afresh */
    *r = p;
    return p != NULL;
}

/* A reply type's name ("bulk string", "integer", ...), and a reply
 * described for a message: its type and, printably quoted and cut short,
 * its value ("error \"ERR \x1b[31m...\"", "integer -1"). */
const char *sl_reply_type_name(int type);
void sl_reply_describe(char *dst, size_t dst_len, const redisReply *r);

#endif /* SL_NET_RESP_H */
