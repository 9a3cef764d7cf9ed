/* SPDX-License-Identifier: BSD-3-Clause */
/* apply.c - `sluice limiter apply FILE` makes the backend's limiters and
 * overrides those of a limits file (docs/LIMITS.md), printing each change
 * as a line of JSON; `sluice limiter export` writes the backend's as such
 * a file. What is stored is read into the same form as the file
 * (config/limits.h), and the two compared name by name. */
#include "cli.h"
#include "config/limits.h"
#include "jsonl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QBUF (6 * 1024 + 32) /* a name or client as a JSON member */

/* Names to read: those a list gave (gathered first: the list's callback
 * does not call the handle again) and the file's. */
typedef struct name {
    char *p;
    size_t len;
} name;

typedef struct names {
    name *v;
    size_t n, cap;
    bool nomem;
} names;

static bool names_add(names *ns, const void *p, size_t len)
{
    name *v;

    if (ns->n == ns->cap) {
        size_t cap = ns->cap == 0 ? 64 : ns->cap * 2;

        if ((v = realloc(ns->v, cap * sizeof(*v))) == NULL) {
            ns->nomem = true;
            return false;
        }
        ns->v = v;
        ns->cap = cap;
    }
    if ((ns->v[ns->n].p = malloc(len)) == NULL) {
        ns->nomem = true;
        return false;
    }
    memcpy(ns->v[ns->n].p, p, len);
    ns->v[ns->n++].len = len;
    return true;
}

static int collect(void *arg, const void *p, size_t len)
{
    return names_add(arg, p, len) ? 0 : 1;
}

static int name_cmp(const void *x, const void *y)
{
    const name *a = x, *b = y;
    int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);

    return c != 0 ? c : a->len < b->len ? -1 : a->len > b->len;
}

static void names_free(names *ns)
{
    size_t i;

    for (i = 0; i < ns->n; i++)
        free(ns->v[i].p);
    free(ns->v);
}

/* Each override listed, into lim; a list stopped for want of memory says
 * so in nomem (the list itself answers SLUICE_OK when stopped). */
typedef struct into {
    sl_limits_limiter *lim;
    bool nomem;
} into;

static int add_listed(void *arg, const void *client, size_t client_len,
                      const sluice_limiter_override *ov)
{
    into *in = arg;

    in->nomem = !sl_limits_add_override(in->lim, client, client_len, ov);
    return in->nomem ? 1 : 0;
}

/* Reads into have the limiter of nm, if it has rules (a name listed may
 * have none left), with its overrides. */
static sluice_status read_one(sluice *sl, sl_limits *have, const name *nm)
{
    into in = {NULL, false};
    sluice_ruleset rs;
    int64_t ka;
    sluice_status st;

    st = sluice_limiter_get(sl, nm->p, nm->len, &rs, &ka);
    if (st == SLUICE_ENOLIMITER)
        return SLUICE_OK;
    if (st != SLUICE_OK)
        return st;
    if ((in.lim = sl_limits_add(have, nm->p, nm->len, &rs, ka)) == NULL)
        return SLUICE_ENOMEM;
    st = sluice_limiter_override_list(sl, nm->p, nm->len, add_listed, &in);
    return st == SLUICE_OK && in.nomem ? SLUICE_ENOMEM : st;
}

/* What the backend stores, as a sealed form: the limiters listed (those
 * kept until deleted) and those of want (NULL: none), which may have a
 * keep-alive, each with its overrides, each read once. On a failure, msg
 * says why. */
static sluice_status read_stored(sluice *sl, const sl_limits *want,
                                 sl_limits **out, char *msg, size_t msg_len)
{
    names ns = {NULL, 0, 0, false};
    sl_limits *have = sl_limits_new();
    sluice_status st;
    size_t i;

    *out = NULL;
    st = have == NULL ? SLUICE_ENOMEM : sluice_limiter_list(sl, collect, &ns);
    for (i = 0; st == SLUICE_OK && want != NULL && i < want->n; i++)
        names_add(&ns, want->lims[i].name, want->lims[i].name_len);
    if (st == SLUICE_OK && ns.nomem)
        st = SLUICE_ENOMEM;
    if (st == SLUICE_OK && ns.n > 1)
        qsort(ns.v, ns.n, sizeof(*ns.v), name_cmp);
    for (i = 0; st == SLUICE_OK && i < ns.n; i++)
        if (i == 0 || name_cmp(&ns.v[i - 1], &ns.v[i]) != 0)
            st = read_one(sl, have, &ns.v[i]);
    names_free(&ns);
    snprintf(msg, msg_len, "%s",
             st == SLUICE_ENOMEM ? "out of memory" : sluice_errmsg(sl));
    /* What the backend gave passed the calls' checks: sealing sorts. */
    if (st == SLUICE_OK &&
        sl_limits_seal(have, "stored", msg, msg_len) != SLUICE_OK)
        st = SLUICE_EPROTO;
    if (st != SLUICE_OK) {
        sl_limits_free(have);
        return st;
    }
    *out = have;
    return SLUICE_OK;
}

/* ----------------------------------------------------------- changes */

/* An apply under way: the handle, its flags, what it counted. */
typedef struct run {
    sluice *sl;
    bool dry, prune;
    size_t changes, kept_limiters, kept_overrides;
} run;

static void rules_text(const sluice_ruleset *rs, char *dst, size_t len)
{
    sluice_ruleset_format(rs, dst, len);
}

static void override_text(const sl_limits_override *o, char *dst, size_t len)
{
    sluice_limiter_override ov;

    sl_limits_override_get(o, &ov);
    if (ov.kind == SLUICE_OVERRIDE_RULES)
        sluice_ruleset_format(&ov.rules, dst, len);
    else
        snprintf(dst, len, "%s",
                 ov.kind == SLUICE_OVERRIDE_UNLIMITED ? "unlimited" : "deny");
}

/* One limiter's line: added (h NULL), changed, or removed (w NULL). */
static void print_limiter(const sl_limits_limiter *w,
                          const sl_limits_limiter *h)
{
    const sl_limits_limiter *any = w != NULL ? w : h;
    char qn[QBUF], now[600], was[600];

    jsonl_field(qn, sizeof(qn), "limiter", any->name, any->name_len);
    printf("{%s, \"change\": \"%s\"", qn,
           h == NULL   ? "added"
           : w == NULL ? "removed"
                       : "changed");
    if (w != NULL) {
        rules_text(&w->rules, now, sizeof(now));
        printf(", \"rules\": \"%s\", \"keepalive_ms\": %lld", now,
               (long long)w->keepalive_ms);
    }
    if (h != NULL) {
        rules_text(&h->rules, was, sizeof(was));
        printf(", \"was_rules\": \"%s\", \"was_keepalive_ms\": %lld", was,
               (long long)h->keepalive_ms);
    }
    printf("}\n");
}

/* One override's line, as print_limiter's. */
static void print_override(const sl_limits_limiter *lim,
                           const sl_limits_override *w,
                           const sl_limits_override *h)
{
    const sl_limits_override *any = w != NULL ? w : h;
    char qn[QBUF], qc[QBUF], text[600];

    jsonl_field(qn, sizeof(qn), "limiter", lim->name, lim->name_len);
    jsonl_field(qc, sizeof(qc), "client", any->client, any->client_len);
    printf("{%s, %s, \"change\": \"%s\"", qn, qc,
           h == NULL   ? "added"
           : w == NULL ? "removed"
                       : "changed");
    if (w != NULL) {
        override_text(w, text, sizeof(text));
        printf(", \"override\": \"%s\"", text);
    }
    if (h != NULL) {
        override_text(h, text, sizeof(text));
        printf(", \"was_override\": \"%s\"", text);
    }
    printf("}\n");
}

static bool same_limiter(const sl_limits_limiter *a, const sl_limits_limiter *b)
{
    char ta[600], tb[600];

    rules_text(&a->rules, ta, sizeof(ta));
    rules_text(&b->rules, tb, sizeof(tb));
    return strcmp(ta, tb) == 0 && a->keepalive_ms == b->keepalive_ms;
}

static bool same_override(const sl_limits_override *a,
                          const sl_limits_override *b)
{
    char ta[600], tb[600];

    override_text(a, ta, sizeof(ta));
    override_text(b, tb, sizeof(tb));
    return strcmp(ta, tb) == 0;
}

/* Each change is made (unless dry), then printed: the lines are what was
 * done when a later one fails. */
static sluice_status set_limiter(run *r, const sl_limits_limiter *w,
                                 const sl_limits_limiter *h)
{
    sluice_status st = SLUICE_OK;

    if (!r->dry)
        st = sluice_limiter_set(r->sl, w->name, w->name_len, &w->rules,
                                w->keepalive_ms);
    if (st == SLUICE_OK) {
        print_limiter(w, h);
        r->changes++;
    }
    return st;
}

static sluice_status set_override(run *r, const sl_limits_limiter *lim,
                                  const sl_limits_override *w,
                                  const sl_limits_override *h)
{
    sluice_limiter_override ov;
    sluice_status st = SLUICE_OK;

    sl_limits_override_get(w != NULL ? w : h, &ov);
    if (!r->dry && w != NULL)
        st = sluice_limiter_override_set(r->sl, lim->name, lim->name_len,
                                         w->client, w->client_len, &ov);
    else if (!r->dry)
        st = sluice_limiter_override_delete(r->sl, lim->name, lim->name_len,
                                            h->client, h->client_len, NULL);
    if (st == SLUICE_OK) {
        print_override(lim, w, h);
        r->changes++;
    }
    return st;
}

/* The overrides of one limiter of the file (h: as stored, or NULL). */
static sluice_status apply_overrides(run *r, const sl_limits_limiter *w,
                                     const sl_limits_limiter *h)
{
    const sl_limits_override *o;
    sluice_status st = SLUICE_OK;
    size_t i;

    for (i = 0; st == SLUICE_OK && i < w->nover; i++) {
        o = h != NULL ? sl_limits_find_override(h, w->overs[i].client,
                                                w->overs[i].client_len)
                      : NULL;
        if (o == NULL || !same_override(&w->overs[i], o))
            st = set_override(r, w, &w->overs[i], o);
    }
    for (i = 0; st == SLUICE_OK && h != NULL && i < h->nover; i++) {
        if (sl_limits_find_override(w, h->overs[i].client,
                                    h->overs[i].client_len) != NULL)
            continue;
        if (r->prune)
            st = set_override(r, w, NULL, &h->overs[i]);
        else
            r->kept_overrides++;
    }
    return st;
}

/* The file's limiters in name order, each with its overrides; then those
 * stored and not in the file. */
static sluice_status apply(run *r, const sl_limits *want, const sl_limits *have)
{
    const sl_limits_limiter *w, *h;
    sluice_status st = SLUICE_OK;
    size_t i;

    for (i = 0; st == SLUICE_OK && i < want->n; i++) {
        w = &want->lims[i];
        h = sl_limits_find(have, w->name, w->name_len);
        if (h == NULL || !same_limiter(w, h))
            st = set_limiter(r, w, h);
        if (st == SLUICE_OK)
            st = apply_overrides(r, w, h);
    }
    for (i = 0; st == SLUICE_OK && i < have->n; i++) {
        h = &have->lims[i];
        if (sl_limits_find(want, h->name, h->name_len) != NULL)
            continue;
        if (!r->prune) {
            r->kept_limiters++;
            continue;
        }
        if (!r->dry)
            st = sluice_limiter_delete(r->sl, h->name, h->name_len);
        if (st == SLUICE_ENOLIMITER) /* gone meanwhile: as asked */
            st = SLUICE_OK;
        if (st == SLUICE_OK) {
            print_limiter(NULL, h);
            r->changes++;
        }
    }
    return st;
}

/* A failed call's report and exit status, as `limiter` gives them. */
static int failed(sluice_status st, const char *msg)
{
    cli_report(sluice_status_name(st), msg);
    return st == SLUICE_EKEY || st == SLUICE_EINVAL || st == SLUICE_ERULE
               ? EXIT_USAGE
               : EXIT_BACKEND;
}

/* sluice limiter apply FILE [--url URL] [--dry-run] [--prune]; argv from
 * "apply" on. */
int cmd_limiter_apply(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    const char *file;
    char err[512];
    sl_limits *want = NULL, *have = NULL;
    sluice_options opts;
    sluice *sl;
    sluice_status st;
    run r;
    int rc;

    if (argc < 2 || (strncmp(argv[1], "--", 2) == 0))
        return cli_usage_error("input", "%s",
                               "limiter apply: missing FILE (a limits file, "
                               "docs/LIMITS.md; - for standard input)");
    file = argv[1];
    if ((rc = cli_parse_args(argc - 1, argv + 1, "limiter apply", "udP", &a)) >=
        0)
        return rc;
    /* Nothing is applied from a file with a fault: it is read whole and
     * checked before the backend is opened. */
    if ((st = sl_limits_load(file, &want, err, sizeof(err))) != SLUICE_OK) {
        cli_report(st == SLUICE_ENOMEM ? "nomem" : "input", err);
        return st == SLUICE_ENOMEM ? EXIT_BACKEND : EXIT_USAGE;
    }
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL) {
        sl_limits_free(want);
        return rc;
    }
    memset(&r, 0, sizeof(r));
    r.sl = sl;
    r.dry = a.dry_run != 0;
    r.prune = a.prune != 0;
    if ((st = read_stored(sl, want, &have, err, sizeof(err))) != SLUICE_OK)
        rc = failed(st, err);
    else if ((st = apply(&r, want, have)) != SLUICE_OK)
        rc = failed(st,
                    st == SLUICE_ENOMEM ? "out of memory" : sluice_errmsg(sl));
    else
        rc = 0;
    if (st == SLUICE_OK && (r.kept_limiters > 0 || r.kept_overrides > 0))
        fprintf(stderr,
                "sluice: apply: %zu limiter%s and %zu override%s stored "
                "but not in %s: kept (--prune removes them)\n",
                r.kept_limiters, r.kept_limiters == 1 ? "" : "s",
                r.kept_overrides, r.kept_overrides == 1 ? "" : "s",
                strcmp(file, "-") == 0 ? "the file" : file);
    if (st == SLUICE_OK && r.dry)
        fprintf(stderr,
                "sluice: apply: --dry-run: %zu change%s shown, none made\n",
                r.changes, r.changes == 1 ? "" : "s");
    sl_limits_free(want);
    sl_limits_free(have);
    sluice_close(sl);
    return rc;
}

static void to_stdout(void *arg, const char *s, size_t n)
{
    (void)arg;
    fwrite(s, 1, n, stdout);
}

/* sluice limiter export [--url URL]; argv from "export" on. */
int cmd_limiter_export(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    char err[512];
    sl_limits *have = NULL;
    sluice_options opts;
    sluice *sl;
    sluice_status st;
    int rc;

    if ((rc = cli_parse_args(argc, argv, "limiter export", "u", &a)) >= 0)
        return rc;
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    rc = 0;
    if ((st = read_stored(sl, NULL, &have, err, sizeof(err))) != SLUICE_OK)
        rc = failed(st, err);
    else
        sl_limits_write(have, to_stdout, NULL);
    sl_limits_free(have);
    sluice_close(sl);
    return rc;
}
