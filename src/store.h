/* SPDX-License-Identifier: BSD-3-Clause */
/* store.h - one home per storage rule: for each algorithm, the family of
 * state it keeps (counters by window, a log, a bucket), the windows a
 * decision reads, and how long a charged key lives. The plain backends,
 * mem:// and the script's packer read it here; lua/30-storage.lua mirrors it
 * under the same names (family, windows, window_ttl for SL_TTL_WINDOW_END,
 * reset_ttl for SL_TTL_RESET). */
#ifndef SL_STORE_H
#define SL_STORE_H

#include "sluice.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum sl_family {
    SL_FAMILY_WINDOW = 1, /* a counter per window: fixed, sliding */
    SL_FAMILY_LOG,        /* a sorted set of stamped charges: log */
    SL_FAMILY_BUCKET      /* one packed state (sl_bucket_pack): token, gcra */
} sl_family;

/* How long a key lives after a charge (never less than the TTL floor). */
typedef enum sl_ttl_rule {
    /* Until its window's end, and a period more for each window that
     * still counts it: the window itself, and for sliding the next one,
     * where it is the weighted previous window (sl_store_window_ttl). */
    SL_TTL_WINDOW_END = 1,
    /* Until the state stops mattering (its reset after the charge), and
     * a period of grace. */
    SL_TTL_RESET
} sl_ttl_rule;

/* The storage descriptor of one algorithm. */
typedef struct sl_store {
    sl_family family;
    int windows; /* windows a decision reads: fixed 1 (t's), sliding 2
                  * (t's and the one before); 0 for the others */
    sl_ttl_rule ttl;
} sl_store;

/* The descriptor of algorithm a; family 0 for a value that names none
 * (rule.c refuses those). */
static inline sl_store sl_store_of(sluice_algorithm a)
{
    switch (a) {
    case SLUICE_FIXED:
        return (sl_store){SL_FAMILY_WINDOW, 1, SL_TTL_WINDOW_END};
    case SLUICE_SLIDING:
        return (sl_store){SL_FAMILY_WINDOW, 2, SL_TTL_WINDOW_END};
    case SLUICE_LOG:
        return (sl_store){SL_FAMILY_LOG, 0, SL_TTL_RESET};
    case SLUICE_TOKEN:
    case SLUICE_GCRA:
        return (sl_store){SL_FAMILY_BUCKET, 0, SL_TTL_RESET};
    }
    return (sl_store){(sl_family)0, 0, (sl_ttl_rule)0};
}

static inline bool sl_store_is_window(const sluice_rule *r)
{
    return sl_store_of(r->algorithm).family == SL_FAMILY_WINDOW;
}

static inline bool sl_store_is_bucket(const sluice_rule *r)
{
    return sl_store_of(r->algorithm).family == SL_FAMILY_BUCKET;
}

/* Whether any rule of rs keeps its state in family f. */
static inline bool sl_ruleset_has(const sluice_ruleset *rs, sl_family f)
{
    size_t i;

    for (i = 0; i < rs->count; i++)
        if (sl_store_of(rs->rules[i].algorithm).family == f)
            return true;
    return false;
}

/* Window index of t and the time from t to that window's end. */
void sl_window_locate(const sluice_rule *r, int64_t t, int64_t *k,
                      int64_t *to_end);

/* The TTL of a window key charged to_end ms before its window ends:
 * SL_TTL_WINDOW_END, at least floor_ms. The one C home of this formula;
 * the script's is window_ttl. */
int64_t sl_store_window_ttl(const sluice_rule *r, int64_t to_end,
                            int64_t floor_ms);

/* The TTL a key of rule r needs after a charge at t whose verdict reports
 * reset_ms (sl_verdict): its algorithm's TTL rule, at least floor_ms. */
int64_t sl_store_ttl(const sluice_rule *r, int64_t t, int64_t reset_ms,
                     int64_t floor_ms);

/* A rule's capacity: a bucket's burst when it has one, else its limit. */
static inline int64_t sl_rule_capacity(const sluice_rule *r)
{
    return sl_store_is_bucket(r) && r->burst > 0 ? r->burst : r->limit;
}

#endif /* SL_STORE_H */
