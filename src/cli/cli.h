/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h - what the parts of the command line share: the exit statuses, the
 * options of every subcommand, named messages, opening a handle, a result
 * as JSON (cli.c), and the subcommands that main.c dispatches to. */
#ifndef SLUICE_CLI_CLI_H
#define SLUICE_CLI_CLI_H

#include "sluice.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum {
    EXIT_ALLOWED = 0,
    EXIT_BACKEND = 1,
    EXIT_USAGE = 2,
    EXIT_DENIED = 3,
    /* Not an exit status: --help was given, so main prints the usage and
     * exits 0 (the usage lives in main.c, which no part calls back). */
    CLI_HELP = 100
};

/* Options of every command; each command accepts a subset. */
typedef struct cli_args {
    const char *url, *rule, *key;
    long long cost, requests;
    int peek, json;
    const char *limiter, *client;
    long long keepalive;
    int dry_run, prune; /* limiter apply */
} cli_args;

/* Writes "NAME: msg" into dst, unless msg already starts with "NAME: ". */
void cli_named(char *dst, size_t dst_len, const char *name, const char *msg);

/* "sluice: NAME: msg" on stderr. */
void cli_report(const char *name, const char *msg);

/* Reports bad arguments, named, and returns the exit status for them. */
int cli_usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses argv for command cmd, accepting the option letters in `allowed`.
 * Returns -1 to go on, or the exit status to leave with (CLI_HELP for
 * --help). */
int cli_parse_args(int argc, char **argv, const char *cmd, const char *allowed,
                   cli_args *a);

/* Opens the handle of url with the environment's credentials; on failure
 * prints why and returns NULL with the exit status in *exit_status. */
sluice *cli_open(const char *url, sluice_options *opts, int *exit_status);

/* One result as a line of JSON; see cli.c for open and nrules. extra (NULL:
 * none): more "name": value pairs, put before the status. */
void cli_print_result(FILE *f, const sluice_result *r, size_t nrules, bool open,
                      const char *extra);

/* The subcommands, each given argv from its own name on; each returns the
 * exit status (or CLI_HELP). */
int cmd_check(int argc, char **argv);   /* check.c */
int cmd_replay(int argc, char **argv);  /* replay.c */
int cmd_limiter(int argc, char **argv); /* limiter.c */
/* override.c: limiter override|overrides|unoverride (argv from the
 * subcommand on, at least NAME given); and an override's text ("RULES",
 * "unlimited", "deny") into *ov, a status with the message in err. */
int cmd_limiter_override(int argc, char **argv);
int cli_parse_override(const char *text, sluice_limiter_override *ov, char *err,
                       size_t err_len);
int cmd_demo(int argc, char **argv); /* demo.c */
/* apply.c: limiter apply FILE and limiter export (argv from "apply" or
 * "export" on). */
int cmd_limiter_apply(int argc, char **argv);
int cmd_limiter_export(int argc, char **argv);

#endif /* SLUICE_CLI_CLI_H */
