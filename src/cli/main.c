/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c - the entry point of the command line, one job: say what sluice
 * does (--help, --version) and hand argv to the subcommand it names:
 * check (check.c), replay (replay.c), demo (demo.c) or limiter
 * define|set|get|delete (limiter.c; apply and export: apply.c). What they share
 * is in cli.c; the URL options' help comes from the library's table
 * (options.h). */
#include "sluice.h"

#include "cli.h"
#include "options.h"

#include <stdio.h>
#include <string.h>

static const char usage_head[] =
    "usage:\n"
    "  sluice check  --rule RULE --key KEY [--url URL] [--cost N] [--peek]"
    " [--json]\n"
    "  sluice replay [--url URL] [--rule RULE]   < events.jsonl\n"
    "  sluice demo   [--url URL] [--rule RULE] [--requests N]\n"
    "  sluice check  --limiter NAME [--client ID] [--url URL] [--cost N] "
    "[--peek] [--json]\n"
    "  sluice limiter define|set NAME RULE [--url URL] [--keepalive MS]\n"
    "  sluice limiter get|delete NAME [--url URL]\n"
    "  sluice limiter override NAME CLIENT RULES|unlimited|deny [--url URL]\n"
    "  sluice limiter overrides NAME [--url URL]\n"
    "  sluice limiter unoverride NAME CLIENT [--url URL]\n"
    "  sluice limiter apply FILE [--url URL] [--dry-run] [--prune]\n"
    "  sluice limiter export [--url URL]\n"
    "\n"
    "URL   mem:// (default), mem://NAME, "
    "redis://[user:password@]host:port[/db] (Lua),\n"
    "      redis+multi://[user:password@]host:port[/db] (no scripts),\n"
    "      twemproxy://[password@]host:port, "
    "redis-cluster://[user:password@]host:port[,...]\n"
    "      rediss://... (Lua over TLS; tls=1 for redis+multi:// and "
    "redis-cluster://)\n"
    "      options, each once (the scheme in any case), as ?a=1&b=2:\n";

/* After the options, which the table in options.c gives. */
static const char usage_tail[] =
    "RULE  ALGO:LIMIT/PERIOD[,burst=N][,tz=+HH:MM], ALGO one of fixed, "
    "sliding,\n"
    "      log, token, gcra; PERIOD like 250ms, 1s, 1m, 1h, 1d; join rules "
    "with '+'\n"
    "      for an all-or-nothing composite: fixed:1000/1d,tz=+08:00+"
    "fixed:100/1h\n"
    "\n"
    "Environment: SLUICE_USER and SLUICE_PASSWORD, when set and not empty, "
    "are the\n"
    "credentials for AUTH (so that a password need not sit in argv); "
    "credentials in\n"
    "the URL win over them. Messages never show a password.\n"
    "\n"
    "limiter apply makes the backend's limiters those of a limits file "
    "(YAML,\n"
    "docs/LIMITS.md; - for standard input), a JSON line a change; "
    "--dry-run changes\n"
    "nothing, only --prune removes what the file lacks. limiter export "
    "writes them.\n"
    "\n"
    "check exits 0 when allowed, 3 when denied, 2 for bad arguments, 1 when "
    "the\n"
    "backend fails; --peek charges nothing and says \"would be allowed\" or "
    "\"would\n"
    "be denied\". replay reads one JSON event a line:\n"
    "  {\"t\": 1400, \"key\": \"user:1\", \"rule\": \"fixed:10/1s\", "
    "\"cost\": 1, \"op\": \"acquire\"}\n"
    "(op: acquire, peek, reset, acquire_at_most, refund or settle, with\n"
    "\"reserved\" and \"actual\"; a \"limiter\" "
    "and\n"
    "\"client\" instead of \"rule\" decide by name; op lease takes "
    "\"max\" and \"lease_ms\",\n"
    "op release the \"lease\" a lease answered; op limiter_set takes "
    "\"limiter\" and\n"
    "\"rule\", op override \"limiter\", \"client\" and \"override\" "
    "(rules, unlimited or\n"
    "deny), op unoverride \"limiter\" and \"client\")\n"
    "and writes one JSON result a line, flushed at once; an answer that is "
    "not a\n"
    "plain decision (fail policy, deny cache, shadow) has \"status\"; a\n"
    "composite's names the rule that binds, \"rule\" (from 0), and its own\n"
    "\"rule_reset_ms\".\n"
    "Every error message starts with a name: input (a malformed line or "
    "argument),\n"
    "or the status without its E in lower case: rule, key, cost, time, url,\n"
    "connect, timeout, io, server, unsupported, ... (\"invalid\" for EINVAL), "
    "as in\n"
    "  {\"error\": \"cost: cost 0 is out of range 1..1000000000\"}\n";

/* The usage, with a line per URL option from the one table. */
static void print_usage(FILE *f)
{
    size_t i;

    fputs(usage_head, f);
    for (i = 0; i < sl_option_count(); i++) {
        char u[64];

        sl_option_usage(i, u, sizeof(u));
        fprintf(f, "        %-32s %s\n", u, sl_option_help(i));
    }
    fputs(usage_tail, f);
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv from the command's name on */
} commands[] = {
    {"check", cmd_check},
    {"replay", cmd_replay},
    {"demo", cmd_demo},
    {"limiter", cmd_limiter},
};

int main(int argc, char **argv)
{
    size_t i;
    int rc;

    if (argc < 2)
        return cli_usage_error("input", "%s",
                               "missing command: check, replay or demo");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("sluice %s\n", SLUICE_VERSION);
        return 0;
    }
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        rc = commands[i].run(argc - 1, argv + 1);
        if (rc == CLI_HELP) {
            print_usage(stdout);
            return 0;
        }
        return rc;
    }
    return cli_usage_error(
        "input", "unknown command \"%s\": use check, replay, demo or limiter",
        argv[1]);
}
