/* SPDX-License-Identifier: BSD-3-Clause */
/* redis.c - what the Redis backends (evalsha, cluster, the plain family)
 * share above the connection: a connection opened on the handle's engine,
 * what Redis's and twemproxy's error replies mean as statuses, and the DEL
 * of a reset. */
#include "backends/redis.h"

#include "algo.h"
#include "net/sentinel.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------- connections */

sluice_status sl_conn_init_sentinels(sl_conn *cn, const sl_url *url,
                                     sl_engine *eng)
{
    sl_conn *sub;
    size_t i;

    if (sl_conn_use_sentinels(cn, url) != SLUICE_OK)
        return SLUICE_ENOMEM;
    /* A subscription on every sentinel: the one that leads a failover
     * announces it first, and any of them may lead. */
    for (i = 0; eng != NULL && (sub = sl_sentinel_sub(cn, i)) != NULL; i++)
        if (sl_engine_add_conn(eng, sub))
            sl_sentinel_subscribe(cn, i);
    return SLUICE_OK;
}

void sl_conn_init(sl_conn *cn, const sl_endpoint *ep, const sl_config *cfg,
                  const char *who, sl_engine *eng)
{
    sl_conn_prepare(cn, ep, cfg, who);
    if (eng != NULL)
        sl_engine_add_conn(eng, cn);
}

/* ---------------------------------------------------- error replies */

/* twemproxy answers with its own errors for a server it cannot reach:
 * "ERR " and strerror() of the failure, or "ERR unknown" when it had no
 * errno (nutcracker 0.5.0's msg_get_error): the server closed the
 * connection with requests in flight. That one exactly: Redis's own
 * "ERR unknown command ..." is an error of the server. */
static bool proxy_failure(const char *s)
{
    return strncmp(s, "ERR Connection refused", 22) == 0 ||
           strncmp(s, "ERR Connection reset by peer", 28) == 0 ||
           strncmp(s, "ERR Connection timed out", 24) == 0 ||
           strncmp(s, "ERR Invalid argument", 20) == 0 ||
           strcmp(s, "ERR unknown") == 0;
}

sluice_status sl_conn_reply_status(const sl_conn *cn, const redisReply *rep,
                                   char *err, size_t err_len)
{
    char ep[300], said[SL_ESCAPE_SHOWN * 4 + 32];

    if (rep->type != REDIS_REPLY_ERROR)
        return SLUICE_OK;
    sl_conn_endpoint(cn, ep, sizeof(ep));
    sl_escape(said, sizeof(said), rep->str, rep->len);
    if (proxy_failure(rep->str)) {
        sl_errf(err, err_len,
                "%s: %s cannot reach the Redis server of this key: %s", cn->who,
                ep, said);
        return strstr(rep->str, "timed out") ? SLUICE_ETIMEOUT : SLUICE_EIO;
    }
    /* A server that wants a password says so in two ways: NOAUTH, or, for
     * a command of more than ten arguments, a protocol error. */
    if (strncmp(rep->str, "NOAUTH", 6) == 0 ||
        strstr(rep->str, "unauthenticated") != NULL) {
        sl_errf(err, err_len,
                "%s: %s requires authentication; give the password in "
                "the URL (redis://user:password@host:port) or in "
                "options.password (SLUICE_PASSWORD for the CLI): %s",
                cn->who, ep, said);
        return SLUICE_ESERVER;
    }
    sl_errf(err, err_len, "%s: %s answered: %s", cn->who, ep, said);
    return SLUICE_ESERVER;
}

/* ------------------------------------------------------------ keys */

sluice_status sl_conn_append_reset(sl_conn *cn, const char *prefix,
                                   const sl_request *rq, char *err,
                                   size_t err_len)
{
    const sluice_ruleset *rs = rq->decide.rules;
    const char *argv[2 + SLUICE_MAX_RULES * SL_RESET_KEYS];
    size_t lens[2 + SLUICE_MAX_RULES * SL_RESET_KEYS], i, j, n, a = 1;
    char(*keys)[SL_KEY_BUF] =
        sl_malloc((1 + SLUICE_MAX_RULES * SL_RESET_KEYS) * SL_KEY_BUF);
    sluice_status st;

    if (keys == NULL) {
        sl_errf(err, err_len, "%s: out of memory", cn->who);
        return SLUICE_ENOMEM;
    }
    argv[0] = "DEL";
    lens[0] = 3;
    for (i = 0; i < rs->count; i++) {
        n = sl_key_reset_set(prefix, rq->key, rq->key_len, &rs->rules[i],
                             rq->now_ms, keys + a - 1, lens + a);
        for (j = 0; j < n; j++, a++)
            argv[a] = keys[a - 1];
    }
    /* A ruleset with a block ends the key's block too. */
    if (sl_ruleset_blocks(rs)) {
        lens[a] =
            sl_key_block(keys[a - 1], SL_KEY_BUF, prefix, rq->key, rq->key_len);
        argv[a] = keys[a - 1];
        a++;
    }
    st = sl_conn_append(cn, (int)a, argv, lens, err, err_len);
    sl_free(keys);
    return st;
}
