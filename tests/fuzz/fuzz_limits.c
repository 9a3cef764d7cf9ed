/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_limits.c - a limits file (src/config/, docs/LIMITS.md) read from
 * arbitrary bytes: what is refused gets SLUICE_EINVAL and a message naming
 * the file, and no form; what is accepted is sealed (names sorted and
 * each once, within the caps, rules that pass the check), and the text
 * sl_limits_write makes of it reads back to a form whose text is the same
 * (a fixed point after one round). */
#include "config/limits.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_limits: %s\n  %s\n", what, detail);
    abort();
}

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void to_text(void *arg, const char *s, size_t n)
{
    text *t = arg;

    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        if ((t->p = realloc(t->p, t->cap)) == NULL)
            abort();
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    return c != 0 ? c : an < bn ? -1 : an > bn;
}

/* What sealing promises. */
static void check_sealed(const sl_limits *l)
{
    char err[512];
    size_t i, j;

    for (i = 0; i < l->n; i++) {
        const sl_limits_limiter *lim = &l->lims[i];

        if (lim->name_len < 1 || lim->name_len > 1000)
            broken("a name out of 1..1000 bytes", "");
        if (i > 0 && bytes_cmp(l->lims[i - 1].name, l->lims[i - 1].name_len,
                               lim->name, lim->name_len) >= 0)
            broken("names not sorted, or one twice", "");
        if (sluice_ruleset_check(&lim->rules, err, sizeof(err)) != SLUICE_OK)
            broken("rules that the check refuses", err);
        if (lim->keepalive_ms < 0 || lim->keepalive_ms > 10000000000LL)
            broken("a keep-alive out of range", "");
        for (j = 0; j < lim->nover; j++) {
            const sl_limits_override *o = &lim->overs[j];
            sluice_limiter_override ov;

            if (o->client_len < 1 || lim->name_len + o->client_len > 1000)
                broken("a client past the caps", "");
            if (j > 0 && bytes_cmp(lim->overs[j - 1].client,
                                   lim->overs[j - 1].client_len, o->client,
                                   o->client_len) >= 0)
                broken("clients not sorted, or one twice", "");
            sl_limits_override_get(o, &ov);
            if (ov.kind == SLUICE_OVERRIDE_RULES &&
                sluice_ruleset_check(&ov.rules, err, sizeof(err)) != SLUICE_OK)
                broken("override rules that the check refuses", err);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    text a = {NULL, 0, 0}, b = {NULL, 0, 0};
    sl_limits *l = NULL, *l2 = NULL;
    sluice_status st;

    err[0] = '\0';
    st = sl_limits_parse("f", (const char *)data, size, &l, err, sizeof(err));
    if (st != SLUICE_OK) {
        if (st != SLUICE_EINVAL || l != NULL || strncmp(err, "f:", 2) != 0)
            broken("a refusal without SLUICE_EINVAL, or a form, or the "
                   "file's name",
                   err);
        return 0;
    }
    check_sealed(l);
    sl_limits_write(l, to_text, &a);
    if (sl_limits_parse("f", a.p, a.len, &l2, err, sizeof(err)) != SLUICE_OK)
        broken("the written text does not read back", err);
    sl_limits_write(l2, to_text, &b);
    if (a.len != b.len || memcmp(a.p, b.p, a.len) != 0 || l->n != l2->n)
        broken("the written text reads back to another form", a.p);
    sl_limits_free(l);
    sl_limits_free(l2);
    free(a.p);
    free(b.p);
    return 0;
}
