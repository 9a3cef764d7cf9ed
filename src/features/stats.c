/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c - a handle's counters, and their Prometheus text. */
#include "features/stats.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ADD(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)
#define GET(c)    atomic_load_explicit(&(c), memory_order_relaxed)

void sl_stats_init(sl_stats *s, bool on)
{
    size_t i;

    s->on = on;
    atomic_init(&s->allowed, 0);
    atomic_init(&s->denied, 0);
    atomic_init(&s->near_limit, 0);
    atomic_init(&s->peeks, 0);
    atomic_init(&s->resets, 0);
    atomic_init(&s->cache_hits, 0);
    atomic_init(&s->policy_answers, 0);
    atomic_init(&s->backend_requests, 0);
    atomic_init(&s->round_trips, 0);
    atomic_init(&s->calls, 0);
    atomic_init(&s->latency_sum_us, 0);
    atomic_init(&s->shadow_admitted, 0);
    atomic_init(&s->refunds, 0);
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        atomic_init(&s->failures[i], 0);
    for (i = 0; i < SLUICE_STATS_BUCKETS; i++)
        atomic_init(&s->latency_us[i], 0);
}

void sl_stats_answer(sl_stats *s, sl_op op, sluice_status st, bool policy,
                     const sluice_result *res)
{
    if (!s->on)
        return;
    if (st != SLUICE_OK) {
        ADD(s->failures[(unsigned)st % SLUICE_STATS_STATUSES], 1);
        if (policy)
            ADD(s->policy_answers, 1);
        return;
    }
    if (res != NULL && res->status == SLUICE_CACHED)
        ADD(s->cache_hits, 1);
    if (res != NULL && res->status == SLUICE_ALLOWLISTED)
        ADD(s->allowlisted, 1);
    if (res != NULL && res->status == SLUICE_DENYLISTED)
        ADD(s->denylisted, 1);
    if (res != NULL && res->status == SLUICE_SHADOWED) {
        ADD(s->shadow_admitted, 1);
        ADD(s->denied, 1); /* the decision */
        return;
    }
    switch (op) {
    case SL_OP_ACQUIRE:
    case SL_OP_AT_MOST:
    case SL_OP_LEASE_ACQUIRE:
        if (res == NULL)
            break;
        if (!res->allowed) {
            ADD(s->denied, 1);
            break;
        }
        ADD(s->allowed, 1);
        /* Envoy's near limit: at most 20 % of the limit left (an
         * allow-listed client has no limit). */
        if (res->status != SLUICE_ALLOWLISTED &&
            res->remaining <= res->limit / 5)
            ADD(s->near_limit, 1);
        break;
    case SL_OP_PEEK:
        ADD(s->peeks, 1);
        break;
    case SL_OP_RESET:
        ADD(s->resets, 1);
        break;
    case SL_OP_REFUND:
        ADD(s->refunds, 1);
        break;
    case SL_OP_FORCE:
        break; /* a settle's charge: neither an admission nor a refund */
    case SL_OP_RULES_GET:
    case SL_OP_RULES_PUT:
    case SL_OP_RULES_DEL:
    case SL_OP_OVER_SET:
    case SL_OP_OVER_DEL:
    case SL_OP_OVER_LIST:
    case SL_OP_LEASE_RELEASE:
        break; /* never counted: not decisions */
    }
}

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sl_stats_start(const sl_stats *s)
{
    return s->on ? mono_us() : 0;
}

void sl_stats_call(sl_stats *s, int64_t start_us)
{
    int64_t d;
    unsigned k = 0;

    if (!s->on)
        return;
    d = mono_us() - start_us;
    if (d < 0)
        d = 0;
    while (k + 1 < SLUICE_STATS_BUCKETS && d >= (INT64_C(2) << k))
        k++;
    ADD(s->latency_us[k], 1);
    ADD(s->calls, 1);
    ADD(s->latency_sum_us, (uint64_t)d);
}

void sl_stats_backend(sl_stats *s, uint64_t requests, uint64_t round_trips)
{
    if (!s->on)
        return;
    ADD(s->backend_requests, requests);
    ADD(s->round_trips, round_trips);
}

void sl_stats_read(const sl_stats *s, sluice_stats *out)
{
    size_t i;

    memset(out, 0, sizeof(*out));
    out->allowed = GET(s->allowed);
    out->denied = GET(s->denied);
    out->near_limit = GET(s->near_limit);
    out->peeks = GET(s->peeks);
    out->resets = GET(s->resets);
    out->deny_cache_hits = GET(s->cache_hits);
    out->policy_answers = GET(s->policy_answers);
    out->backend_requests = GET(s->backend_requests);
    out->round_trips = GET(s->round_trips);
    out->calls = GET(s->calls);
    out->latency_sum_us = GET(s->latency_sum_us);
    out->shadow_admitted = GET(s->shadow_admitted);
    out->refunds = GET(s->refunds);
    out->allowlisted = GET(s->allowlisted);
    out->denylisted = GET(s->denylisted);
    for (i = 0; i < SLUICE_STATS_STATUSES; i++)
        out->failures[i] = GET(s->failures[i]);
    for (i = 0; i < SLUICE_STATS_BUCKETS; i++)
        out->latency_us[i] = GET(s->latency_us[i]);
}

/* ---------------------------------------------------------- Prometheus */

/* A name as a label value: backslash, quote and newline escaped. */
static void put_label_value(sl_text *t, const char *v)
{
    for (; *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            sl_textf(t, "\\%c", *v);
        else if (*v == '\n')
            sl_textf(t, "\\n");
        else
            sl_textf(t, "%c", *v);
    }
}

/* The labels: {handle="name",extra} or {extra} or none. */
static void put_labels(sl_text *t, const char *name, const char *extra)
{
    if (name == NULL && extra == NULL)
        return;
    sl_textf(t, "{");
    if (name != NULL) {
        sl_textf(t, "handle=\"");
        put_label_value(t, name);
        sl_textf(t, "\"%s", extra != NULL ? "," : "");
    }
    sl_textf(t, "%s}", extra != NULL ? extra : "");
}

static void counter(sl_text *t, const char *metric, const char *help,
                    const char *name, const char *extra, uint64_t v, bool head)
{
    if (head) {
        sl_textf(t, "# HELP %s %s\n", metric, help);
        sl_textf(t, "# TYPE %s counter\n", metric);
    }
    sl_textf(t, "%s", metric);
    put_labels(t, name, extra);
    sl_textf(t, " %llu\n", (unsigned long long)v);
}

size_t sluice_stats_prometheus(const sluice_stats *in, size_t size,
                               const char *name, char *buf, size_t len)
{
    sluice_stats st;
    sl_text t = {buf, buf != NULL ? len : 0, 0};
    char extra[64];
    uint64_t cum = 0;
    size_t i;
    bool head;

    memset(&st, 0, sizeof(st));
    if (in != NULL)
        memcpy(&st, in, size < sizeof(st) ? size : sizeof(st));
    if (t.len > 0)
        t.buf[0] = '\0';
    counter(&t, "sluice_decisions_total",
            "Acquires decided, by outcome (deny cache answers included).", name,
            "outcome=\"allowed\"", st.allowed, true);
    counter(&t, "sluice_decisions_total", NULL, name, "outcome=\"denied\"",
            st.denied, false);
    counter(&t, "sluice_near_limit_total",
            "Acquires admitted with at most 20% of the limit left.", name, NULL,
            st.near_limit, true);
    counter(&t, "sluice_peeks_total", "Peeks answered.", name, NULL, st.peeks,
            true);
    counter(&t, "sluice_resets_total", "Resets done.", name, NULL, st.resets,
            true);
    counter(&t, "sluice_refunds_total", "Refunds made.", name, NULL, st.refunds,
            true);
    counter(&t, "sluice_shadow_admitted_total",
            "Acquires the rules denied and shadow mode admitted.", name, NULL,
            st.shadow_admitted, true);
    counter(&t, "sluice_listed_total",
            "Answers to allow-listed and deny-listed clients of named "
            "limiters.",
            name, "list=\"allow\"", st.allowlisted, true);
    counter(&t, "sluice_listed_total", NULL, name, "list=\"deny\"",
            st.denylisted, false);
    counter(&t, "sluice_deny_cache_hits_total",
            "Requests answered by the local deny cache.", name, NULL,
            st.deny_cache_hits, true);
    counter(&t, "sluice_reserve_admitted_total",
            "Acquires admitted from a reservation, without a round trip.", name,
            NULL, st.reserve_admitted, true);
    counter(&t, "sluice_reserve_batches_total",
            "Batches of units asked of the backend (reservations).", name, NULL,
            st.reserve_batches, true);
    counter(&t, "sluice_reserve_units_total",
            "Reserved units: asked, granted (charged), given back unused, "
            "lapsed unused.",
            name, "kind=\"asked\"", st.reserve_asked, true);
    counter(&t, "sluice_reserve_units_total", NULL, name, "kind=\"granted\"",
            st.reserve_granted, false);
    counter(&t, "sluice_reserve_units_total", NULL, name, "kind=\"refunded\"",
            st.reserve_refunded, false);
    counter(&t, "sluice_reserve_units_total", NULL, name, "kind=\"lapsed\"",
            st.reserve_lapsed, false);
    counter(&t, "sluice_failovers_total",
            "Moves to another master that the sentinels named.", name, NULL,
            st.failovers, true);
    head = true;
    for (i = 0; i < SLUICE_STATS_STATUSES; i++) {
        const char *label = sluice_status_name((sluice_status)i);

        if (st.failures[i] == 0 || strcmp(label, "unknown") == 0)
            continue;
        snprintf(extra, sizeof(extra), "status=\"%s\"", label);
        counter(&t, "sluice_failures_total",
                "Requests not decided, by status (fail policy answers "
                "included).",
                name, extra, st.failures[i], head);
        head = false;
    }
    counter(&t, "sluice_fail_policy_answers_total",
            "Requests the fail policy answered.", name, NULL, st.policy_answers,
            true);
    counter(&t, "sluice_backend_requests_total",
            "Requests that went to the backend.", name, NULL,
            st.backend_requests, true);
    counter(&t, "sluice_round_trips_total",
            "Network writes that carried requests.", name, NULL, st.round_trips,
            true);
    sl_textf(&t,
             "# HELP sluice_call_duration_seconds Calls by duration (a batch "
             "is one call).\n");
    sl_textf(&t, "# TYPE sluice_call_duration_seconds histogram\n");
    for (i = 0; i < SLUICE_STATS_BUCKETS; i++) {
        cum += st.latency_us[i];
        if (i + 1 == SLUICE_STATS_BUCKETS)
            snprintf(extra, sizeof(extra), "le=\"+Inf\"");
        else
            snprintf(extra, sizeof(extra), "le=\"%.6f\"",
                     (double)(UINT64_C(2) << i) / 1e6);
        sl_textf(&t, "sluice_call_duration_seconds_bucket");
        put_labels(&t, name, extra);
        sl_textf(&t, " %llu\n", (unsigned long long)cum);
    }
    sl_textf(&t, "sluice_call_duration_seconds_sum");
    put_labels(&t, name, NULL);
    sl_textf(&t, " %.6f\n", (double)st.latency_sum_us / 1e6);
    sl_textf(&t, "sluice_call_duration_seconds_count");
    put_labels(&t, name, NULL);
    /* The count is the +Inf bucket's: the counters are read one by one. */
    sl_textf(&t, " %llu\n", (unsigned long long)cum);
    return t.at;
}
