/* SPDX-License-Identifier: BSD-3-Clause */
/* prometheus.h - handles' counters as Prometheus text (prometheus.c). */
#ifndef SL_PROMETHEUS_H
#define SL_PROMETHEUS_H

#include "features/stats.h"

/* A page's reader (sluice_metrics_page): the counters of handle i into
 * *st, as sluice_get_stats reads them, and its counters by limiter in
 * *live (NULL: none); false when the handle keeps none (metrics=0). */
typedef bool (*sl_prom_read_fn)(const void *ctx, size_t i, sluice_stats *st,
                                const sl_stats **live);
/* Writes the page of n handles, names[i] labelling the i-th (names NULL:
 * n is 1, no label), as sluice_metrics_page says; by_limiter: with the
 * sluice_limiter_* families. The caller checks the names. */
size_t sl_prom_page(sl_prom_read_fn read, const void *ctx, size_t n,
                    const char *const *names, bool by_limiter, char *buf,
                    size_t len);

#endif /* SL_PROMETHEUS_H */
