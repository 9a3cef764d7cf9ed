/* SPDX-License-Identifier: BSD-3-Clause */
/* slotmap.h - the cluster client's routing table: which node owns which of
 * the 16384 slots, built from CLUSTER SLOTS and updated by redirections. */
#ifndef SL_SLOTMAP_H
#define SL_SLOTMAP_H

#include "internal.h"

#include <hiredis/hiredis.h>

#define SL_NSLOTS    16384
#define SL_MAX_NODES 64

typedef struct sl_slotmap {
    struct {
        char host[256];
        int port;
    } nodes[SL_MAX_NODES];
    size_t nnodes;
    int16_t slots[SL_NSLOTS]; /* node index per slot, -1 unknown */
} sl_slotmap;

typedef enum sl_redirect {
    SL_REDIRECT_NONE = 0, /* not a redirection */
    SL_REDIRECT_MOVED,    /* the slot has a new owner: the map is updated */
    SL_REDIRECT_ASK       /* ask that node once, with ASKING first */
} sl_redirect;

void sl_slotmap_init(sl_slotmap *m);
/* Index of host:port, added when new; -1 when the table is full. */
int sl_slotmap_node(sl_slotmap *m, const char *host, int port);
/* Applies a CLUSTER SLOTS reply obtained from asked_host (an empty or "?"
 * endpoint means that host). Returns the number of slots it assigned, or
 * -1 when the reply is not a slot map: not one entry a range of slots
 * with its owner, or two entries over the same slot. Costs at most one
 * pass over the slots, whatever the reply. */
long sl_slotmap_load(sl_slotmap *m, const redisReply *r,
                     const char *asked_host);
/* Reads an error reply "MOVED 3999 host:port" or "ASK 3999 host:port" sent
 * by from_host; sets *slot and *node: the target's index when the map
 * knows the node (a seed, or a node a slot map named), which a MOVED makes
 * the slot's owner; else -1, and the map is unchanged: a redirection to a
 * node no map named is followed only once a map names it. */
sl_redirect sl_slotmap_redirect(sl_slotmap *m, const char *msg,
                                const char *from_host, unsigned *slot,
                                int *node);

#endif /* SL_SLOTMAP_H */
