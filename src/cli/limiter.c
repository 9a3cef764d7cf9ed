/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.c - `sluice limiter define|set|get|delete`: keeps a named
 * limiter's rules in the store, answering in a line of JSON (its
 * overrides: override.c; a limits file applied and exported: apply.c). */
#include "cli.h"
#include "jsonl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* {"limiter": NAME, "rules": TEXT, "keepalive_ms": N}, the name in a
 * member that reads back byte for byte (jsonl_field). */
static void print_limiter_json(const char *name, const sluice_ruleset *rs,
                               long long keepalive)
{
    char text[600], qn[6 * 1024 + 32];

    sluice_ruleset_format(rs, text, sizeof(text));
    jsonl_field(qn, sizeof(qn), "limiter", name, strlen(name));
    printf("{%s, \"rules\": \"%s\", \"keepalive_ms\": %lld}\n", qn, text,
           keepalive);
}

/* sluice limiter define|set NAME RULE | get|delete NAME [options] */
int cmd_limiter(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    const char *sub, *name, *rule = NULL;
    int rc, skip = 3;
    char err[512];
    sluice_options opts;
    sluice_ruleset rs, got;
    int64_t ka = 0;
    sluice *sl;
    sluice_status st;

    if (argc >= 2 && strcmp(argv[1], "apply") == 0)
        return cmd_limiter_apply(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "export") == 0)
        return cmd_limiter_export(argc - 1, argv + 1);
    if (argc < 3)
        return cli_usage_error("input", "%s",
                               "limiter: expected define|set NAME RULE, "
                               "get|delete NAME, apply FILE or export");
    sub = argv[1];
    name = argv[2];
    /* An option where a name or a rule goes: that one is missing (no
     * name or rule starts with "--"). */
    if (strncmp(name, "--", 2) == 0)
        return cli_usage_error("input", "limiter %s: missing NAME", sub);
    if (strcmp(sub, "override") == 0 || strcmp(sub, "overrides") == 0 ||
        strcmp(sub, "unoverride") == 0)
        return cmd_limiter_override(argc, argv);
    if (strcmp(sub, "define") == 0 || strcmp(sub, "set") == 0) {
        if (argc < 4 || strncmp(argv[3], "--", 2) == 0)
            return cli_usage_error("input",
                                   "limiter %s %s: missing RULE (e.g. "
                                   "fixed:100/1m)",
                                   sub, name);
        rule = argv[3];
        skip = 4;
    } else if (strcmp(sub, "get") != 0 && strcmp(sub, "delete") != 0) {
        return cli_usage_error("input",
                               "limiter: unknown \"%s\": use define, set, get, "
                               "delete, override, overrides, unoverride, "
                               "apply or export",
                               sub);
    }
    if ((rc = cli_parse_args(argc - skip + 1, argv + skip - 1, "limiter",
                             rule != NULL ? "ua" : "u", &a)) >= 0)
        return rc;
    if (rule != NULL &&
        (st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return cli_usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    if (strcmp(sub, "define") == 0) {
        st = sluice_limiter_define(sl, name, strlen(name), &rs, a.keepalive,
                                   &got);
        /* What is stored may be another's: show its keep-alive too. */
        if (st == SLUICE_OK)
            st = sluice_limiter_get(sl, name, strlen(name), &got, &ka);
    } else if (strcmp(sub, "set") == 0) {
        st = sluice_limiter_set(sl, name, strlen(name), &rs, a.keepalive);
        got = rs;
    } else if (strcmp(sub, "get") == 0) {
        st = sluice_limiter_get(sl, name, strlen(name), &got, &ka);
    } else {
        st = sluice_limiter_delete(sl, name, strlen(name));
    }
    if (st != SLUICE_OK) {
        cli_report(sluice_status_name(st), sluice_errmsg(sl));
        sluice_close(sl);
        return st == SLUICE_ENOLIMITER                    ? EXIT_DENIED
               : st == SLUICE_EKEY || st == SLUICE_EINVAL ? EXIT_USAGE
                                                          : EXIT_BACKEND;
    }
    if (strcmp(sub, "delete") == 0)
        printf("{\"deleted\": true}\n");
    else
        print_limiter_json(
            name, &got, strcmp(sub, "set") == 0 ? a.keepalive : (long long)ka);
    sluice_close(sl);
    return 0;
}
