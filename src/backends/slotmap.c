/* SPDX-License-Identifier: BSD-3-Clause */
/* slotmap.c - the routing table of redis-cluster://. */
#include "backends/slotmap.h"

#include <stdio.h>
#include <string.h>

void sl_slotmap_init(sl_slotmap *m)
{
    m->nnodes = 0;
    memset(m->slots, 0xff, sizeof(m->slots));
}

int sl_slotmap_node(sl_slotmap *m, const char *host, int port)
{
    size_t i;

    for (i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0)
            return (int)i;
    if (m->nnodes == SL_MAX_NODES)
        return -1;
    snprintf(m->nodes[m->nnodes].host, sizeof(m->nodes[0].host), "%s", host);
    m->nodes[m->nnodes].port = port;
    return (int)m->nnodes++;
}

/* Whether entry e of CLUSTER SLOTS is [start, end, [host, port, ...], ...]
 * with 0 <= start <= end < 16384 and a port in 1..65535. */
static bool entry_ok(const redisReply *e)
{
    const redisReply *node;

    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2 ||
        e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
        return false;
    node = e->element[2];
    return e->element[0]->integer >= 0 && e->element[1]->integer < SL_NSLOTS &&
           e->element[0]->integer <= e->element[1]->integer &&
           node->element[1]->integer >= 1 && node->element[1]->integer <= 65535;
}

long sl_slotmap_load(sl_slotmap *m, const redisReply *r, const char *asked_host)
{
    unsigned char seen[SL_NSLOTS / 8];
    long assigned = 0;
    size_t k;

    /* Each slot has one owner, so a map has at most one entry a slot. */
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->elements > SL_NSLOTS)
        return -1;
    /* Every entry is checked before the map changes: a reply refused
     * halfway must not leave half a map. No two entries may cover the
     * same slot: Redis never sends such a map, and refusing it at the
     * first slot seen twice keeps the cost of any reply to one pass over
     * the 16384 slots (100,000 entries each over every slot would
     * otherwise be 1.6e9 writes). */
    memset(seen, 0, sizeof(seen));
    for (k = 0; k < r->elements; k++) {
        long long s;

        if (!entry_ok(r->element[k]))
            return -1;
        for (s = r->element[k]->element[0]->integer;
             s <= r->element[k]->element[1]->integer; s++) {
            if (seen[s / 8] & (1u << (s % 8)))
                return -1;
            seen[s / 8] |= (unsigned char)(1u << (s % 8));
        }
    }
    for (k = 0; k < r->elements; k++) {
        const redisReply *e = r->element[k], *node = e->element[2];
        const char *host = node->element[0]->type == REDIS_REPLY_STRING &&
                                   node->element[0]->len > 0 &&
                                   strcmp(node->element[0]->str, "?") != 0
                               ? node->element[0]->str
                               : asked_host;
        int owner = sl_slotmap_node(m, host, (int)node->element[1]->integer);
        long long s;

        for (s = e->element[0]->integer; s <= e->element[1]->integer; s++) {
            m->slots[s] = (int16_t)owner;
            assigned++;
        }
    }
    return assigned;
}

sl_redirect sl_slotmap_redirect(sl_slotmap *m, const char *msg,
                                const char *from_host, unsigned *slot,
                                int *node)
{
    sl_redirect kind;
    char host[256] = "";
    unsigned s;
    int port, n = 0, i;

    if (strncmp(msg, "MOVED ", 6) == 0)
        kind = SL_REDIRECT_MOVED;
    else if (strncmp(msg, "ASK ", 4) == 0)
        kind = SL_REDIRECT_ASK;
    else
        return SL_REDIRECT_NONE;
    msg += kind == SL_REDIRECT_MOVED ? 6 : 4;
    /* "3999 127.0.0.1:6381", "3999 :6381" (the same host), "3999 ?:6381" */
    if (sscanf(msg, "%u %n", &s, &n) != 1 || s >= SL_NSLOTS)
        return SL_REDIRECT_NONE;
    msg += n;
    {
        const char *colon = strrchr(msg, ':');
        size_t hl;

        if (colon == NULL || sscanf(colon + 1, "%d", &port) != 1 || port < 1 ||
            port > 65535)
            return SL_REDIRECT_NONE;
        hl = (size_t)(colon - msg);
        if (hl >= sizeof(host))
            return SL_REDIRECT_NONE;
        memcpy(host, msg, hl);
        host[hl] = '\0';
    }
    if (host[0] == '\0' || strcmp(host, "?") == 0)
        snprintf(host, sizeof(host), "%s", from_host);
    *slot = s;
    /* Only a node the map knows (a seed, or named by a slot map) is
     * followed at once; anywhere else is the caller's to check. */
    *node = -1;
    for (i = 0; i < (int)m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0)
            *node = i;
    if (*node >= 0 && kind == SL_REDIRECT_MOVED)
        m->slots[s] = (int16_t)*node;
    return kind;
}
