/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_rule.c - sluice_ruleset_parse on arbitrary bytes: what it accepts
 * passes sluice_ruleset_check, keeps capacity x period below 2^53, and
 * reads back the same from its canonical text; what it refuses gets
 * SLUICE_ERULE and a message. */
#include "sluice.h"

#include "internal.h"
#include "store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *text, const char *detail)
{
    fprintf(stderr, "fuzz_rule: %s\n  rule: \"%s\"\n  %s\n", what, text,
            detail);
    abort();
}

static bool same_rule(const sluice_rule *a, const sluice_rule *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit &&
           a->period_ms == b->period_ms && a->burst == b->burst &&
           a->tz_offset_ms == b->tz_offset_ms && a->block_s == b->block_s &&
           a->block_extend == b->block_extend;
}

/* Accepted: in range, checked, and the same again from its own text. */
static void check_accepted(const char *text, const sluice_ruleset *rs)
{
    char err[512], canon[SLUICE_MAX_RULES * 96 + 8];
    size_t i, n = 0;
    sluice_ruleset back;

    if (rs->count < 1 || rs->count > SLUICE_MAX_RULES)
        broken("accepted a ruleset of a bad size", text, "");
    if (sluice_ruleset_check(rs, err, sizeof(err)) != SLUICE_OK)
        broken("sluice_ruleset_check refuses what parse accepted", text, err);
    for (i = 0; i < rs->count; i++) {
        const sluice_rule *r = &rs->rules[i];
        int64_t cap = sl_rule_capacity(r);

        if (r->limit < 1 || r->limit > SL_MAX_LIMIT || r->period_ms < 1 ||
            r->period_ms > SL_MAX_PERIOD_MS || r->burst < 0 ||
            r->burst > SL_MAX_LIMIT || r->tz_offset_ms < -SL_MAX_TZ_MS ||
            r->tz_offset_ms > SL_MAX_TZ_MS ||
            r->block_s > SL_MAX_PERIOD_MS / 1000 ||
            (r->block_extend && r->block_s == 0))
            broken("accepted a number out of range", text, "");
        /* By division: the product itself could wrap. */
        if (cap > (SL_EXACT_BOUND - 1) / r->period_ms)
            broken("accepted capacity x period >= 2^53", text, "");
        if (i > 0)
            canon[n++] = '+';
        sl_rule_format(r, canon + n, sizeof(canon) - n);
        n += strlen(canon + n);
    }
    if (sluice_ruleset_parse(canon, &back, err, sizeof(err)) != SLUICE_OK)
        broken("the canonical text does not parse", text, err);
    if (back.count != rs->count)
        broken("the canonical text has another number of rules", text, canon);
    for (i = 0; i < rs->count; i++)
        if (!same_rule(&rs->rules[i], &back.rules[i]))
            broken("the canonical text reads back differently", text, canon);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), err[512];
    sluice_ruleset rs;
    sluice_status st;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(err, 0x55, sizeof(err));
    st = sluice_ruleset_parse(text, &rs, err, sizeof(err));
    if (st == SLUICE_OK) {
        check_accepted(text, &rs);
    } else {
        if (st != SLUICE_ERULE)
            broken("refused with a status other than SLUICE_ERULE", text,
                   sluice_strerror(st));
        if (memchr(err, '\0', sizeof(err)) == NULL || err[0] == '\0')
            broken("refused without a terminated message", text, "");
        if (strncmp(err, "rule ", 5) != 0)
            broken("a message that does not start with the rule", text, err);
    }
    free(text);
    return 0;
}
