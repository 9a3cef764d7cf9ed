/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sf_fields.c - prints sluice_http_fields' text for decisions made on
 * mem:// (single rules, composites, buckets; admitted and denied), every
 * quota unit, names that need escaping, partition keys hashed and raw
 * (binary ones too), one case a block, for tests/check_sf.mjs to parse
 * with an independent Structured Field parser:
 *   case UNIT RAW RULES NAME_HEX KEY_HEX|-
 *   <the fields, CRLF-terminated>
 *   end
 *   test_sf_fields */
#include "sluice.h"

#include <stdio.h>
#include <string.h>

static void hex(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;

    if (n == 0)
        fputs("-", stdout);
    for (i = 0; i < n; i++)
        printf("%02x", b[i]);
}

int main(void)
{
    static const char *const rulesets[] = {
        "fixed:3/1m", "sliding:10/1s+token:5/1s,burst=8",
        "fixed:2/1s+log:4/1h+gcra:10/1m", "token:1000000/1d"};
    static const char *const names[] = {"api", "a\"b\\c d", "caf\xc3\xa9", ""};
    static const struct {
        const char *bytes;
        size_t len;
    } keys[] = {{NULL, 0}, {"user:1", 6}, {"\0\xff\x01k", 4}, {"App-999", 7}};
    sluice *sl = NULL;
    char buf[2048], err[256];
    size_t r, nm, k, u, raw;
    int i;

    if (sluice_open("mem://", NULL, &sl, err, sizeof(err)) != SLUICE_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    for (r = 0; r < sizeof(rulesets) / sizeof(rulesets[0]); r++) {
        sluice_ruleset rs;
        sluice_result res;

        if (sluice_ruleset_parse(rulesets[r], &rs, err, sizeof(err)) !=
            SLUICE_OK) {
            fprintf(stderr, "%s: %s\n", rulesets[r], err);
            return 1;
        }
        /* Admitted first, then denied (when the rules deny by then). */
        for (i = 0; i < 6; i++) {
            if (sluice_acquire(sl, "k", 1, &rs, 1, &res) != SLUICE_OK) {
                fprintf(stderr, "acquire: %s\n", sluice_errmsg(sl));
                return 1;
            }
            if (i != 0 && i != 5)
                continue;
            for (nm = 0; nm < sizeof(names) / sizeof(names[0]); nm++)
                for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                    for (u = 0; u < 3; u++)
                        for (raw = 0; raw < 2; raw++) {
                            if (keys[k].bytes == NULL && raw)
                                continue;
                            sluice_http_fields(
                                &rs, &res, names[nm], (sluice_quota_unit)u,
                                keys[k].bytes, keys[k].len,
                                raw ? SLUICE_HTTP_RAW_PK : 0, buf, sizeof(buf));
                            printf("case %zu %zu %zu ", u, raw, rs.count);
                            hex(names[nm], strlen(names[nm]));
                            putchar(' ');
                            hex(keys[k].bytes, keys[k].len);
                            printf("\n%send\n", buf);
                        }
        }
        sluice_reset(sl, "k", 1, &rs);
    }
    sluice_close(sl);
    return 0;
}
