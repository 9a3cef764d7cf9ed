/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.c - what a C program outside the tree does with an installed
 * sluice: three requests on fixed:2/1s at one instant, the third denied. */
#include "sluice.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Callers allocate these, in arrays too, so their layout is frozen within
 * the SONAME (docs/ABI.md); checked here on LP64, where users build. */
#if defined(__LP64__)
_Static_assert(sizeof(sluice_rule) == 40, "sluice_rule is frozen");
_Static_assert(sizeof(sluice_ruleset) == 328, "sluice_ruleset is frozen");
_Static_assert(sizeof(sluice_result) == 40, "sluice_result is frozen");
_Static_assert(sizeof(sluice_request) == 32, "sluice_request is frozen");
/* Fields added after 0.1.0 live in what was padding: no offset moved. */
_Static_assert(offsetof(sluice_result, rule) == 5 &&
                   offsetof(sluice_result, rule_reset_code) == 6 &&
                   offsetof(sluice_result, limit) == 8,
               "sluice_result's offsets are frozen");
_Static_assert(offsetof(sluice_options, struct_size) == 64,
               "sluice_options grows only after struct_size");
/* Versioned by struct_size, its first field: it grows at its end only. */
_Static_assert(offsetof(sluice_policy, struct_size) == 0 &&
                   offsetof(sluice_policy, unit_name) == 108 &&
                   sizeof(sluice_policy) == 176,
               "sluice_policy's first layout is frozen");
#endif

static int64_t frozen_clock(void *ctx)
{
    return *(const int64_t *)ctx;
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "c";
    static const bool want[3] = {true, true, false};
    int64_t now = 1700000000000;
    sluice_options opts;
    sluice_ruleset rules;
    sluice_result r;
    sluice *sl;
    char err[256];
    int i;

    if (strcmp(sluice_version(), SLUICE_VERSION) != 0 ||
        sluice_version_number() != SLUICE_VERSION_NUMBER) {
        fprintf(stderr, "%s: library %s is not header %s\n", how,
                sluice_version(), SLUICE_VERSION);
        return 1;
    }
    sluice_options_init(&opts);
    opts.clock = frozen_clock; /* one instant: no window ends mid-test */
    opts.clock_ctx = &now;
    if (sluice_ruleset_parse("fixed:2/1s", &rules, err, sizeof(err)) !=
            SLUICE_OK ||
        sluice_open("mem://", &opts, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "%s: %s\n", how, err);
        return 1;
    }
    printf("%s: sluice %s:", how, sluice_version());
    for (i = 0; i < 3; i++) {
        if (sluice_acquire(sl, "user:1", 6, &rules, 1, &r) != SLUICE_OK ||
            r.allowed != want[i]) {
            printf(" request %d wrong: %s\n", i + 1, sluice_errmsg(sl));
            sluice_close(sl);
            return 1;
        }
        if (r.rule != 0 ||
            sluice_result_rule_reset_ms(&r) != r.reset_after_ms) {
            printf(" request %d: a single rule binds with the key's reset\n",
                   i + 1);
            sluice_close(sl);
            return 1;
        }
        printf(" %s", r.allowed ? "allowed" : "denied");
    }
    /* The denial as an HTTP answer: 429 and its three fields. */
    {
        sluice_http_options ho;
        char fields[512];

        sluice_http_options_init(&ho);
        ho.name = "api";
        if (sluice_http_status(&r, &ho) != 429 ||
            sluice_http_text(&rules, &r, &ho, fields, sizeof(fields)) == 0 ||
            strstr(fields, "Retry-After: 1\r\n") == NULL) {
            printf(" the HTTP answer is wrong\n");
            sluice_close(sl);
            return 1;
        }
    }
    printf("\n");
    sluice_close(sl);
    return 0;
}
