/* SPDX-License-Identifier: BSD-3-Clause */
/* prometheus.c - the counters of handles (stats.c) in the Prometheus
 * text format: one handle's (sluice_stats_prometheus), or a page of
 * several with their limiters' (sluice_metrics_page). */
#include "features/prometheus.h"

#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 character at p (n bytes left) when it may
 * stand in a label value as it is: valid, shortest form, not a surrogate,
 * not an ASCII control; else 0. */
static size_t plain_len(const unsigned char *p, size_t n)
{
    uint32_t cp, min;
    size_t k, i;

    if (p[0] < 0x80)
        return p[0] >= 0x20 && p[0] != 0x7f ? 1 : 0;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        k = 2;
        cp = p[0] & 0x1fu;
        min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        k = 3;
        cp = p[0] & 0x0fu;
        min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        k = 4;
        cp = p[0] & 0x07u;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (i = 1; i < k; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

/* A name as a label value, which must be UTF-8: its characters as they
 * are, but a backslash as \\ and a byte that is a control or not UTF-8 as
 * \xHH (so that two names never share a value); then the format's own
 * escapes of backslash and quote. */
static void put_value(sl_text *t, const void *v, size_t n)
{
    const unsigned char *p = v;
    size_t i = 0, k;

    while (i < n) {
        k = plain_len(p + i, n - i);
        if (k == 0)
            sl_textf(t, "\\\\x%02x", p[i]);
        else if (p[i] == '\\')
            sl_textf(t, "\\\\\\\\");
        else if (p[i] == '"')
            sl_textf(t, "\\\"");
        else
            sl_textf(t, "%.*s", (int)k, (const char *)p + i);
        i += k > 0 ? k : 1;
    }
}

/* A page being written: the handles, and the family at hand. */
typedef struct page {
    sl_text t;
    sl_prom_read_fn read;
    const void *ctx;
    size_t n;
    const char *const *names;
    const char *metric; /* the family's */
    bool head;          /* its HELP and TYPE still to write */
    const char *help, *type;
} page;

static void family(page *pg, const char *metric, const char *type,
                   const char *help)
{
    pg->metric = metric;
    pg->type = type;
    pg->help = help;
    pg->head = true;
}

/* A sample's limiter: its name, or the overflow. */
typedef struct limiter_label {
    const void *name; /* NULL: the overflow */
    size_t len;
} limiter_label;

/* The start of a sample of handle i, up to its value: the family's head
 * before its first sample, the metric with suffix, the labels (the
 * handle's, the limiter's when lim is set, extra). */
static void sample_head(page *pg, const char *suffix, size_t i,
                        const limiter_label *lim, const char *extra)
{
    const char *sep = "{";

    if (pg->head) {
        sl_textf(&pg->t, "# HELP %s %s\n", pg->metric, pg->help);
        sl_textf(&pg->t, "# TYPE %s %s\n", pg->metric, pg->type);
        pg->head = false;
    }
    sl_textf(&pg->t, "%s%s", pg->metric, suffix);
    if (pg->names != NULL && pg->names[i] != NULL) {
        sl_textf(&pg->t, "%shandle=\"", sep);
        put_value(&pg->t, pg->names[i], strlen(pg->names[i]));
        sl_textf(&pg->t, "\"");
        sep = ",";
    }
    if (lim != NULL && lim->name != NULL) {
        sl_textf(&pg->t, "%slimiter=\"", sep);
        put_value(&pg->t, lim->name, lim->len);
        sl_textf(&pg->t, "\"");
        sep = ",";
    } else if (lim != NULL) {
        sl_textf(&pg->t, "%slimiter_overflow=\"true\"", sep);
        sep = ",";
    }
    if (extra != NULL) {
        sl_textf(&pg->t, "%s%s", sep, extra);
        sep = ",";
    }
    if (sep[0] == ',')
        sl_textf(&pg->t, "}");
}

static void sample(page *pg, const char *suffix, size_t i,
                   const limiter_label *lim, const char *extra, uint64_t v)
{
    sample_head(pg, suffix, i, lim, extra);
    sl_textf(&pg->t, " %llu\n", (unsigned long long)v);
}

/* A counter: a row of a family (help set: the first row of one). */
typedef struct row {
    const char *metric, *help, *extra;
    size_t off; /* of the uint64_t in the struct the rows read */
} row;

#define S(f) offsetof(sluice_stats, f)
static const row handle_rows[] = {
    {"sluice_decisions_total",
     "Acquires decided, by outcome (deny cache answers included).",
     "outcome=\"allowed\"", S(allowed)},
    {"sluice_decisions_total", NULL, "outcome=\"denied\"", S(denied)},
    {"sluice_near_limit_total",
     "Acquires admitted with at most 20% of the limit left.", NULL,
     S(near_limit)},
    {"sluice_peeks_total", "Peeks answered.", NULL, S(peeks)},
    {"sluice_resets_total", "Resets done.", NULL, S(resets)},
    {"sluice_refunds_total", "Refunds made.", NULL, S(refunds)},
    {"sluice_shadow_admitted_total",
     "Acquires the rules denied and shadow mode admitted.", NULL,
     S(shadow_admitted)},
    {"sluice_listed_total",
     "Answers to allow-listed and deny-listed clients of named limiters.",
     "list=\"allow\"", S(allowlisted)},
    {"sluice_listed_total", NULL, "list=\"deny\"", S(denylisted)},
    {"sluice_deny_cache_hits_total",
     "Requests answered by the local deny cache.", NULL, S(deny_cache_hits)},
    {"sluice_reserve_admitted_total",
     "Acquires admitted from a reservation, without a round trip.", NULL,
     S(reserve_admitted)},
    {"sluice_reserve_batches_total",
     "Batches of units asked of the backend (reservations).", NULL,
     S(reserve_batches)},
    {"sluice_reserve_units_total",
     "Reserved units: asked, granted (charged), given back unused, lapsed "
     "unused.",
     "kind=\"asked\"", S(reserve_asked)},
    {"sluice_reserve_units_total", NULL, "kind=\"granted\"",
     S(reserve_granted)},
    {"sluice_reserve_units_total", NULL, "kind=\"refunded\"",
     S(reserve_refunded)},
    {"sluice_reserve_units_total", NULL, "kind=\"lapsed\"", S(reserve_lapsed)},
    {"sluice_failovers_total",
     "Moves to another master that the sentinels named.", NULL, S(failovers)},
};
/* After sluice_failures_total, which has a sample a status. */
static const row handle_rows_after[] = {
    {"sluice_fail_policy_answers_total", "Requests the fail policy answered.",
     NULL, S(policy_answers)},
    {"sluice_backend_requests_total", "Requests that went to the backend.",
     NULL, S(backend_requests)},
    {"sluice_round_trips_total", "Network writes that carried requests.", NULL,
     S(round_trips)},
};
#undef S

#define L(f) offsetof(sluice_limiter_stats, f)
static const row limiter_rows[] = {
    {"sluice_limiter_decisions_total",
     "Acquires by name decided, by limiter and outcome.", "outcome=\"allowed\"",
     L(allowed)},
    {"sluice_limiter_decisions_total", NULL, "outcome=\"denied\"", L(denied)},
    {"sluice_limiter_deny_cache_hits_total",
     "Requests by name answered by the local deny cache, by limiter.", NULL,
     L(deny_cache_hits)},
    {"sluice_limiter_reserve_admitted_total",
     "Acquires by name admitted from a reservation, without a round trip, "
     "by limiter.",
     NULL, L(reserve_admitted)},
    {"sluice_limiter_shadow_admitted_total",
     "Acquires by name the rules denied and shadow mode admitted, by "
     "limiter.",
     NULL, L(shadow_admitted)},
    {"sluice_limiter_listed_total",
     "Answers to allow-listed and deny-listed clients, by limiter.",
     "list=\"allow\"", L(allowlisted)},
    {"sluice_limiter_listed_total", NULL, "list=\"deny\"", L(denylisted)},
    {"sluice_limiter_fail_policy_answers_total",
     "Requests by name the fail policy answered, by limiter.", NULL,
     L(policy_answers)},
};
#undef L

static uint64_t at(const void *st, size_t off)
{
    uint64_t v;

    memcpy(&v, (const char *)st + off, sizeof(v));
    return v;
}

/* The rows of handle counters, family by family, every handle's. */
static void handle_families(page *pg, const row *rows, size_t nrows)
{
    sluice_stats st;
    const sl_stats *live;
    size_t r, end, i, k;

    for (r = 0; r < nrows; r = end) {
        for (end = r + 1; end < nrows && rows[end].help == NULL; end++)
            ;
        family(pg, rows[r].metric, "counter", rows[r].help);
        for (i = 0; i < pg->n; i++)
            if (pg->read(pg->ctx, i, &st, &live))
                for (k = r; k < end; k++)
                    sample(pg, "", i, NULL, rows[k].extra,
                           at(&st, rows[k].off));
    }
}

/* Samples by status, those not 0: a handle's or a limiter's failures. */
static void failures(page *pg, size_t i, const limiter_label *lim,
                     const uint64_t *f)
{
    char extra[64];
    size_t s;

    for (s = 0; s < SLUICE_STATS_STATUSES; s++) {
        const char *label = sluice_status_name((sluice_status)s);

        if (f[s] == 0 || strcmp(label, "unknown") == 0)
            continue;
        snprintf(extra, sizeof(extra), "status=\"%s\"", label);
        sample(pg, "", i, lim, extra, f[s]);
    }
}

static void histogram(page *pg)
{
    sluice_stats st;
    const sl_stats *live;
    char extra[64];
    uint64_t cum;
    size_t i, k;

    family(pg, "sluice_call_duration_seconds", "histogram",
           "Calls by duration (a batch is one call).");
    for (i = 0; i < pg->n; i++) {
        if (!pg->read(pg->ctx, i, &st, &live))
            continue;
        cum = 0;
        for (k = 0; k < SLUICE_STATS_BUCKETS; k++) {
            cum += st.latency_us[k];
            if (k + 1 == SLUICE_STATS_BUCKETS)
                snprintf(extra, sizeof(extra), "le=\"+Inf\"");
            else
                snprintf(extra, sizeof(extra), "le=\"%.6f\"",
                         (double)(UINT64_C(2) << k) / 1e6);
            sample(pg, "_bucket", i, NULL, extra, cum);
        }
        sample_head(pg, "_sum", i, NULL, NULL);
        sl_textf(&pg->t, " %.6f\n", (double)st.latency_sum_us / 1e6);
        /* The count is the +Inf bucket's: the counters are read one by
         * one. */
        sample(pg, "_count", i, NULL, NULL, cum);
    }
}

/* Each limiter of one handle: the rows [r, end) of the page's family, or
 * (rows NULL) its failures by status. */
typedef struct limiter_walk {
    page *pg;
    size_t i; /* the handle */
    const row *rows;
    size_t r, end;
} limiter_walk;

static void limiter_rows_of(void *arg, const void *name, size_t len,
                            const sluice_limiter_stats *ls)
{
    const limiter_walk *w = arg;
    limiter_label lim = {name, len};
    size_t k;

    if (w->rows == NULL)
        failures(w->pg, w->i, &lim, ls->failures);
    for (k = w->r; w->rows != NULL && k < w->end; k++)
        sample(w->pg, "", w->i, &lim, w->rows[k].extra, at(ls, w->rows[k].off));
}

/* Each limiter of each handle, the rows [r, end) or (rows NULL) its
 * failures by status. */
static void limiter_samples(page *pg, const row *rows, size_t r, size_t end)
{
    limiter_walk w = {pg, 0, rows, r, end};
    sluice_stats st;
    const sl_stats *live;

    for (w.i = 0; w.i < pg->n; w.i++)
        if (pg->read(pg->ctx, w.i, &st, &live) && live != NULL)
            sl_stats_each_limiter(live, limiter_rows_of, &w);
}

static void limiter_families(page *pg)
{
    const size_t nrows = sizeof(limiter_rows) / sizeof(limiter_rows[0]);
    size_t r, end;

    for (r = 0; r < nrows; r = end) {
        for (end = r + 1; end < nrows && limiter_rows[end].help == NULL; end++)
            ;
        family(pg, limiter_rows[r].metric, "counter", limiter_rows[r].help);
        limiter_samples(pg, limiter_rows, r, end);
    }
    family(pg, "sluice_limiter_failures_total", "counter",
           "Requests by name not decided, by limiter and status (fail "
           "policy answers included).");
    limiter_samples(pg, NULL, 0, 0);
}

size_t sl_prom_page(sl_prom_read_fn read, const void *ctx, size_t n,
                    const char *const *names, bool by_limiter, char *buf,
                    size_t len)
{
    page pg = {{buf, buf != NULL ? len : 0, 0},
               read,
               ctx,
               n,
               names,
               NULL,
               false,
               NULL,
               NULL};
    sluice_stats st;
    const sl_stats *live;
    size_t i;

    if (pg.t.len > 0)
        pg.t.buf[0] = '\0';
    handle_families(&pg, handle_rows,
                    sizeof(handle_rows) / sizeof(handle_rows[0]));
    family(&pg, "sluice_failures_total", "counter",
           "Requests not decided, by status (fail policy answers included).");
    for (i = 0; i < n; i++)
        if (read(ctx, i, &st, &live))
            failures(&pg, i, NULL, st.failures);
    handle_families(&pg, handle_rows_after,
                    sizeof(handle_rows_after) / sizeof(handle_rows_after[0]));
    histogram(&pg);
    if (by_limiter)
        limiter_families(&pg);
    return pg.t.at;
}

/* sluice_stats_prometheus: one handle's counters, as the caller read
 * them. */
static bool given(const void *ctx, size_t i, sluice_stats *st,
                  const sl_stats **live)
{
    (void)i;
    *st = *(const sluice_stats *)ctx;
    *live = NULL;
    return true;
}

size_t sluice_stats_prometheus(const sluice_stats *in, size_t size,
                               const char *name, char *buf, size_t len)
{
    sluice_stats st;

    memset(&st, 0, sizeof(st));
    if (in != NULL)
        memcpy(&st, in, size < sizeof(st) ? size : sizeof(st));
    return sl_prom_page(given, &st, 1, &name, false, buf, len);
}
