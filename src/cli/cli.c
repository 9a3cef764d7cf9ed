/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.c - what every subcommand shares: reading its options from argv,
 * naming its messages ("sluice: NAME: msg"), opening its handle with the
 * environment's credentials, and writing a result as a line of JSON. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes "NAME: msg" into dst, unless msg already starts with "NAME: ". */
void cli_named(char *dst, size_t dst_len, const char *name, const char *msg)
{
    size_t n = strlen(name);

    if (strncmp(msg, name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        snprintf(dst, dst_len, "%s", msg);
    else
        snprintf(dst, dst_len, "%s: %s", name, msg);
}

/* "sluice: NAME: msg" on stderr. */
void cli_report(const char *name, const char *msg)
{
    char line[1024];

    cli_named(line, sizeof(line), name, msg);
    fprintf(stderr, "sluice: %s\n", line);
}

/* Reports bad arguments, named, and returns the exit status for them. */
int cli_usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    char msg[768];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli_report(name, msg);
    fprintf(stderr, "(see sluice --help)\n");
    return EXIT_USAGE;
}

/* Parses a whole decimal integer; no sign other than '-', no fraction. */
static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    if (*s == '\0' || *s == '+' || *s == ' ')
        return -1;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* True for an optional '-' and one digit or more, and nothing else. */
static bool whole_number(const char *s)
{
    if (*s == '-')
        s++;
    return *s != '\0' && s[strspn(s, "0123456789")] == '\0';
}

static int backend_exit(sluice_status st)
{
    return st == SLUICE_EURL || st == SLUICE_EINVAL ? EXIT_USAGE : EXIT_BACKEND;
}

/* open: the object starts here (else its first fields are written).
 * nrules: the rules that decided, 0 when the CLI does not know them (a
 * decision by name); a composite's answer names the rule that binds and
 * its own reset. An answer that is not a plain decision (a fail policy's,
 * the deny cache's, shadow mode's) says so in "status", by the status's
 * name. */
void cli_print_result(FILE *f, const sluice_result *r, size_t nrules, bool open,
                      const char *extra)
{
    fprintf(f,
            "%s\"allowed\": %s, \"limit\": %lld, \"remaining\": %lld, "
            "\"retry_after_ms\": %lld, \"reset_after_ms\": %lld",
            open ? "{" : "", r->allowed ? "true" : "false", (long long)r->limit,
            (long long)r->remaining, (long long)r->retry_after_ms,
            (long long)r->reset_after_ms);
    if (nrules >= 2)
        fprintf(f, ", \"rule\": %u, \"rule_reset_ms\": %lld", (unsigned)r->rule,
                (long long)sluice_result_rule_reset_ms(r));
    if (extra != NULL && extra[0] != '\0')
        fprintf(f, ", %s", extra);
    if (r->status != SLUICE_OK)
        fprintf(f, ", \"status\": \"%s\"", sluice_status_name(r->status));
    fputs("}\n", f);
}

/* Credentials from the environment, so that no password sits in argv. */
static void env_credentials(sluice_options *opts)
{
    const char *user = getenv("SLUICE_USER");
    const char *password = getenv("SLUICE_PASSWORD");

    if (user != NULL && user[0] != '\0')
        opts->user = user;
    if (password != NULL && password[0] != '\0')
        opts->password = password;
}

/* Parses argv for command cmd, accepting the option letters in `allowed`.
 * Returns -1 to go on, or the exit status to leave with. */
int cli_parse_args(int argc, char **argv, const char *cmd, const char *allowed,
                   cli_args *a)
{
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'},
        {"rule", required_argument, NULL, 'r'},
        {"key", required_argument, NULL, 'k'},
        {"cost", required_argument, NULL, 'c'},
        {"requests", required_argument, NULL, 'n'},
        {"peek", no_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},
        {"limiter", required_argument, NULL, 'l'},
        {"client", required_argument, NULL, 'i'},
        {"keepalive", required_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {"dry-run", no_argument, NULL, 'd'},
        {"prune", no_argument, NULL, 'P'},
        {NULL, 0, NULL, 0}};
    int c;

    opterr = 0; /* our own message, named like every other */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == '?')
            return cli_usage_error("input",
                                   "%s: unknown option, or one missing its "
                                   "value: \"%s\"",
                                   cmd, argv[optind - 1]);
        if (strchr(allowed, c) == NULL && c != 'h')
            return cli_usage_error(
                "input", "%s: option --%s does not apply", cmd,
                longopts[strchr("urkcnpjliahdP", c) - "urkcnpjliahdP"].name);
        switch (c) {
        case 'u':
            a->url = optarg;
            break;
        case 'r':
            a->rule = optarg;
            break;
        case 'k':
            a->key = optarg;
            break;
        case 'c':
            /* A whole number out of range is a bad cost; anything else
             * (1.5, "x") is malformed, as in a replay line. */
            if (parse_int(optarg, 1, 1000000000, &a->cost) != 0)
                return cli_usage_error(whole_number(optarg) ? "cost" : "input",
                                       "--cost \"%s\": expected a whole number "
                                       "in 1..1000000000",
                                       optarg);
            break;
        case 'n':
            if (parse_int(optarg, 1, 1000, &a->requests) != 0)
                return cli_usage_error(
                    "input", "--requests \"%s\": expected 1..1000", optarg);
            break;
        case 'p':
            a->peek = 1;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'l':
            a->limiter = optarg;
            break;
        case 'i':
            a->client = optarg;
            break;
        case 'a':
            if (parse_int(optarg, 0, 10000000000LL, &a->keepalive) != 0)
                return cli_usage_error(
                    "input",
                    "--keepalive \"%s\": expected 0 (none) to "
                    "10000000000 ms",
                    optarg);
            break;
        case 'h':
            return CLI_HELP;
        case 'd':
            a->dry_run = 1;
            break;
        case 'P':
            a->prune = 1;
            break;
        }
    }
    if (optind < argc)
        return cli_usage_error("input", "%s: unexpected argument \"%s\"", cmd,
                               argv[optind]);
    return -1;
}

/* Opens the handle of url with the environment's credentials; on failure
 * prints why and returns NULL with the exit status in *exit_status. */
sluice *cli_open(const char *url, sluice_options *opts, int *exit_status)
{
    char err[512];
    sluice *sl;
    sluice_status st;

    env_credentials(opts);
    st = sluice_open(url, opts, &sl, err, sizeof(err));
    if (st != SLUICE_OK) {
        cli_report(sluice_status_name(st), err);
        *exit_status = backend_exit(st);
        return NULL;
    }
    return sl;
}
