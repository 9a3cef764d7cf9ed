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

/* {"limiter": NAME, "client": CLIENT, "override": TEXT} */
static int print_override(void *arg, const void *client, size_t client_len,
                          const sluice_limiter_override *ov)
{
    const char *name = arg;
    char text[600], qn[6 * 1024 + 16], qc[6 * 1024 + 16];

    override_text(ov, text, sizeof(text));
    jsonl_quote(qn, sizeof(qn), name, strlen(name));
    jsonl_quote(qc, sizeof(qc), client, client_len);
    printf("{\"limiter\": %s, \"client\": %s, \"override\": \"%s\"}\n", qn, qc,
           text);
    return 0;
}

int cli_parse_override(const char *text, sluice_limiter_override *ov, char *err,
                       size_t err_len)
{
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
    st = sluice_ruleset_parse(text, &ov->rules, err, err_len);
    if (st != SLUICE_OK) {
        char msg[512];

        snprintf(msg, sizeof(msg), "%s", err);
        snprintf(err, err_len,
                 "override \"%s\": expected rules, \"unlimited\" or "
                 "\"deny\": %s",
                 text, msg);
    }
    return (int)st;
}

/* argv from "override", "overrides" or "unoverride" on. */
int cmd_limiter_override(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0};
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
        st = sluice_limiter_override_list(sl, name, strlen(name),
                                          print_override, name);
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
