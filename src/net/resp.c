/* SPDX-License-Identifier: BSD-3-Clause */
/* resp.c - RESP both ways: commands formatted into bytes by sluice itself,
 * and replies read by hiredis's reader with a cap on what one reply may
 * cost (max_reply_bytes), and replies described for messages. */
#include "net/resp.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------- commands */

/* Writes the RESP form of a command ourselves: hiredis's own formatting
 * (sdscatfmt per argument) was the largest client cost per decision. */
size_t sl_resp_format(char *dst, int argc, const char **argv,
                      const size_t *lens)
{
    char *p = dst;
    size_t i;

    *p++ = '*';
    p += sl_i64toa(argc, p);
    *p++ = '\r';
    *p++ = '\n';
    for (i = 0; i < (size_t)argc; i++) {
        size_t len = lens != NULL ? lens[i] : strlen(argv[i]);

        *p++ = '$';
        p += sl_i64toa((int64_t)len, p);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], len);
        p += len;
        *p++ = '\r';
        *p++ = '\n';
    }
    return (size_t)(p - dst);
}

/* ---------------------------------------------- the reply size cap */

/* hiredis 0.14 has no limit on a reply: a bulk string is buffered whole,
 * and an array's header alone makes it allocate the room for all its
 * elements. Its reader builds the reply through a table of functions, so
 * sluice puts its own in front of hiredis's: each counts what the object
 * costs against the connection's cap (max_reply_bytes), and refuses past
 * it, which the reader reports as an error (read by sl_resp_take). */
static redisReplyObjectFunctions *hiredis_fns; /* the reader's own */
static pthread_once_t hiredis_fns_once = PTHREAD_ONCE_INIT;

/* hiredis's table is static in its library, the same for every reader:
 * read it once, from a reader made for that (threads may open their
 * connections at the same time). */
static void find_hiredis_fns(void)
{
    redisReader *r = redisReaderCreate();

    if (r != NULL) {
        hiredis_fns = r->fn;
        redisReaderFree(r);
    }
}

/* The replies whose cap a task counts against (the reader's privdata). */
static bool reply_charge(const redisReadTask *task, size_t bytes)
{
    sl_resp *rs = task->privdata;

    if (rs == NULL)
        return true;
    if (bytes > rs->cap - rs->used) {
        rs->over = true;
        return false;
    }
    rs->used += bytes;
    return true;
}

static void *capped_string(const redisReadTask *task, char *str, size_t len)
{
    if (!reply_charge(task, sizeof(redisReply) + len))
        return NULL;
    return hiredis_fns->createString(task, str, len);
}

static void *capped_array(const redisReadTask *task, int elements)
{
    size_t n = elements > 0 ? (size_t)elements : 0;

    if (!reply_charge(task, sizeof(redisReply) + n * sizeof(redisReply *)))
        return NULL;
    return hiredis_fns->createArray(task, elements);
}

static void *capped_integer(const redisReadTask *task, long long v)
{
    if (!reply_charge(task, sizeof(redisReply)))
        return NULL;
    return hiredis_fns->createInteger(task, v);
}

static void *capped_nil(const redisReadTask *task)
{
    if (!reply_charge(task, sizeof(redisReply)))
        return NULL;
    return hiredis_fns->createNil(task);
}

static void free_reply_object(void *r)
{
    hiredis_fns->freeObject(r);
}

static redisReplyObjectFunctions capped_fns = {
    capped_string, capped_array, capped_integer, capped_nil, free_reply_object};

/* ----------------------------------------------------------- replies */

bool sl_resp_open(sl_resp *rs, size_t cap)
{
    pthread_once(&hiredis_fns_once, find_hiredis_fns);
    rs->cap = cap;
    rs->used = 0;
    rs->over = false;
    if ((rs->reader = redisReaderCreate()) == NULL)
        return false;
    if (rs->reader->fn == hiredis_fns && hiredis_fns != NULL) {
        rs->reader->fn = &capped_fns;
        rs->reader->privdata = rs;
    }
    return true;
}

void sl_resp_close(sl_resp *rs)
{
    if (rs->reader != NULL)
        redisReaderFree(rs->reader);
    rs->reader = NULL;
}

bool sl_resp_pending(const sl_resp *rs)
{
    return rs->reader->len > rs->reader->pos;
}

static void too_big(const sl_resp *rs, sluice_status *st, char *why,
                    size_t why_len)
{
    *st = SLUICE_EPROTO;
    sl_errf(why, why_len,
            "sent a reply of more than %zu bytes (max_reply_bytes); "
            "the connection is dropped",
            rs->cap);
}

bool sl_resp_feed_failed(sl_resp *rs, sluice_status *st, char *why,
                         size_t why_len)
{
    if (rs->reader->len - rs->reader->pos > rs->cap - rs->used) {
        too_big(rs, st, why, why_len);
    } else {
        *st = SLUICE_ENOMEM;
        sl_errf(why, why_len, "out of memory reading a reply");
    }
    return false;
}

int sl_resp_take_failed(sl_resp *rs, sluice_status *st, char *why,
                        size_t why_len)
{
    const char *said = rs->reader->errstr;
    char q[300];

    if (rs->over) {
        too_big(rs, st, why, why_len);
    } else if (rs->reader->err == REDIS_ERR_OOM) {
        *st = SLUICE_ENOMEM;
        sl_errf(why, why_len, "out of memory reading a reply");
    } else {
        *st = SLUICE_EPROTO;
        sl_errf(why, why_len,
                "sent what is not a Redis reply (%s); the next call "
                "reconnects",
                said[0] ? (sl_quote(q, sizeof(q), said, strlen(said)), q)
                        : "protocol error");
    }
    return -1;
}

/* ---------------------------------------------------- for messages */

const char *sl_reply_type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "bulk string";
    case REDIS_REPLY_ARRAY:
        return "array";
    case REDIS_REPLY_INTEGER:
        return "integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "status";
    case REDIS_REPLY_ERROR:
        return "error";
    default:
        return "reply of an unknown type";
    }
}

void sl_reply_describe(char *dst, size_t dst_len, const redisReply *r)
{
    char q[300];

    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        sl_quote(q, sizeof(q), r->str, r->len);
        snprintf(dst, dst_len, "%s \"%s\"", sl_reply_type_name(r->type), q);
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(dst, dst_len, "integer %lld", r->integer);
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(dst, dst_len, "array of %zu", r->elements);
        break;
    default:
        snprintf(dst, dst_len, "%s", sl_reply_type_name(r->type));
        break;
    }
}
