/* SPDX-License-Identifier: BSD-3-Clause */
/* override.c - `sluice limiter override NAME CLIENT RULES|unlimited|deny`,
 * `limiter overrides NAME` and `limiter unoverride NAME CLIENT`: a named
 * limiter's per-client overrides, each answered in lines of JSON. */
#include "cli.h"
#include "jsonl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The override's text: its rules, "unlimited" or "deny". */
static void override_text(const sluice_limiter_override *ov, char *dst,
                          size_t len)
{
    if (ov->kind == SLUICE_OVERRIDE_RULES)
        sluice_ruleset_format(&ov->rules, dst, len);
    else
        snprintf(dst, len, "%s",
                 ov->kind == SLUICE_OVERRIDE_UNLIMITED ? "unlimited"
                 : ov->kind == SLUICE_OVERRIDE_DENY    ? "deny"
                                                       : "none");
}

/* {"limiter": NAME, "client": CLIENT, "override": TEXT}, the name and the
 * client in members that read back byte for byte (jsonl_field). */
static void print_override(const char *name, const void *client,
                           size_t client_len, const sluice_limiter_override *ov)
{
    char text[600], qn[6 * 1024 + 32], qc[6 * 1024 + 32];

    override_text(ov, text, sizeof(text));
    jsonl_field(qn, sizeof(qn), "limiter", name, strlen(name));
    jsonl_field(qc, sizeof(qc), "client", client, client_len);
    printf("{%s, %s, \"override\": \"%s\"}\n", qn, qc, text);
}

/* A listing under way: the limiter's name, and the lines printed. */
typedef struct listing {
    const char *name;
    size_t printed;
} listing;

static int print_listed(void *arg, const void *client, size_t client_len,
                        const sluice_limiter_override *ov)
{
    listing *ls = arg;

    ls->printed++;
    print_override(ls->name, client, client_len, ov);
    return 0;
}

/* Lists name's overrides, a line each. A name with none listed may have
 * no rules either: then SLUICE_ENOLIMITER (exit 3), as `limiter get`
 * answers, not an empty list. Overrides live only with the rules, so the
 * rules are read only when the list is empty. */
static sluice_status list_overrides(sluice *sl, const char *name)
{
    listing ls = {name, 0};
    sluice_ruleset rs;
    sluice_status st;

    st =
        sluice_limiter_override_list(sl, name, strlen(name), print_listed, &ls);
    if (st == SLUICE_OK && ls.printed == 0)
        st = sluice_limiter_get(sl, name, strlen(name), &rs, NULL);
    return st;
}

int cli_parse_override(const char *text, sluice_limiter_override *ov, char *err,
                       size_t err_len)
{
    char why[512];
    sluice_status st;

    memset(ov, 0, sizeof(*ov));
    if (strcmp(text, "unlimited") == 0) {
        ov->kind = SLUICE_OVERRIDE_UNLIMITED;
        return SLUICE_OK;
    }
    if (strcmp(text, "deny") == 0) {
        ov->kind = SLUICE_OVERRIDE_DENY;
        return SLUICE_OK;
    }
    ov->kind = SLUICE_OVERRIDE_RULES;
    /* The parser's reason goes into a buffer of its own, then into err
     * after the override's text: never a copy of err cut to fit. */
    st = sluice_ruleset_parse(text, &ov->rules, why, sizeof(why));
    if (st != SLUICE_OK)
        snprintf(err, err_len,
                 "override \"%s\": expected rules, \"unlimited\" or "
                 "\"deny\": %s",
                 text, why);
    return (int)st;
}

/* argv from "override", "overrides" or "unoverride" on. */
int cmd_limiter_override(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    const char *sub = argv[1], *client = NULL;
    char *name = argv[2];
    int rc, skip = 3;
    char err[700];
    sluice_options opts;
    sluice_limiter_override ov;
    sluice *sl;
    sluice_status st;
    bool found = false;

    if (strcmp(sub, "overrides") != 0) {
        if (argc < 4 || strncmp(argv[3], "--", 2) == 0)
            return cli_usage_error("input", "limiter %s %s: missing CLIENT",
                                   sub, name);
        client = argv[3];
        skip = 4;
    }
    if (strcmp(sub, "override") == 0) {
        if (argc < 5 || strncmp(argv[4], "--", 2) == 0)
            return cli_usage_error("input",
                                   "limiter override %s %s: missing RULES, "
                                   "unlimited or deny",
                                   name, client);
        st = (sluice_status)cli_parse_override(argv[4], &ov, err, sizeof(err));
        if (st != SLUICE_OK)
            return cli_usage_error(sluice_status_name(st), "%s", err);
        skip = 5;
    }
    if ((rc = cli_parse_args(argc - skip + 1, argv + skip - 1, "limiter", "u",
                             &a)) >= 0)
        return rc;
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    if (strcmp(sub, "override") == 0)
        st = sluice_limiter_override_set(sl, name, strlen(name), client,
                                         strlen(client), &ov);
    else if (strcmp(sub, "unoverride") == 0)
        st = sluice_limiter_override_delete(sl, name, strlen(name), client,
                                            strlen(client), &found);
    else
        st = list_overrides(sl, name);
    if (st != SLUICE_OK) {
        cli_report(sluice_status_name(st), sluice_errmsg(sl));
        sluice_close(sl);
        return st == SLUICE_ENOLIMITER ? EXIT_DENIED
               : st == SLUICE_EKEY || st == SLUICE_EINVAL || st == SLUICE_ERULE
                   ? EXIT_USAGE
                   : EXIT_BACKEND;
    }
    if (strcmp(sub, "override") == 0)
        print_override(name, client, strlen(client), &ov);
    else if (strcmp(sub, "unoverride") == 0)
        printf("{\"deleted\": %s}\n", found ? "true" : "false");
    sluice_close(sl);
    return 0;
}
