/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c - the command line, one job: parse argv and run a subcommand on
 * the library's public API: check one request (by rules or by a limiter's
 * name), replay JSON Lines on a virtual clock, show a burst being limited
 * (demo), or keep a named limiter's rules (limiter define/set/get/delete).
 * JSON Lines parsing lives in jsonl.c; the URL options' help comes from the
 * library's table (options.h). At 843 lines it is over the house's 800:
 * the limiter subcommand is the part to move out (issue 21). */
#include "sluice.h"

#include "jsonl.h"
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    EXIT_ALLOWED = 0,
    EXIT_BACKEND = 1,
    EXIT_USAGE = 2,
    EXIT_DENIED = 3
};

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
    "check exits 0 when allowed, 3 when denied, 2 for bad arguments, 1 when "
    "the\n"
    "backend fails; --peek charges nothing and says \"would be allowed\" or "
    "\"would\n"
    "be denied\". replay reads one JSON event a line:\n"
    "  {\"t\": 1400, \"key\": \"user:1\", \"rule\": \"fixed:10/1s\", "
    "\"cost\": 1, \"op\": \"acquire\"}\n"
    "(op: acquire, peek, reset, acquire_at_most or refund; a \"limiter\" "
    "and\n"
    "\"client\" instead of \"rule\" decide by name; op lease takes "
    "\"max\" and \"lease_ms\",\n"
    "op release the \"lease\" a lease answered)\n"
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

/* Writes "NAME: msg" into dst, unless msg already starts with "NAME: ". */
static void named(char *dst, size_t dst_len, const char *name, const char *msg)
{
    size_t n = strlen(name);

    if (strncmp(msg, name, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        snprintf(dst, dst_len, "%s", msg);
    else
        snprintf(dst, dst_len, "%s: %s", name, msg);
}

/* "sluice: NAME: msg" on stderr. */
static void report(const char *name, const char *msg)
{
    char line[1024];

    named(line, sizeof(line), name, msg);
    fprintf(stderr, "sluice: %s\n", line);
}

static int usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports bad arguments, named, and returns the exit status for them. */
static int usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    char msg[768];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    report(name, msg);
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
static void print_result_json(FILE *f, const sluice_result *r, size_t nrules,
                              bool open)
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
    if (r->status != SLUICE_OK)
        fprintf(f, ", \"status\": \"%s\"", sluice_status_name(r->status));
    fputs("}\n", f);
}

/* Why an answer is not a plain decision, for the human output. */
static void report_status(sluice *sl, const sluice_result *res)
{
    char msg[700];

    switch (res->status) {
    case SLUICE_OK:
        return;
    case SLUICE_SHADOWED:
        if (res->retry_after_ms >= 0)
            snprintf(msg, sizeof(msg),
                     "admitted in shadow mode: the rules denied it (it "
                     "would fit in %lld ms)",
                     (long long)res->retry_after_ms);
        else
            snprintf(msg, sizeof(msg),
                     "admitted in shadow mode: the rules denied it (its "
                     "cost never fits)");
        break;
    case SLUICE_CACHED:
        snprintf(msg, sizeof(msg),
                 "denied by the local deny cache, without a round trip");
        break;
    default:
        snprintf(msg, sizeof(msg), "decided by the fail policy: %s",
                 sluice_errmsg(sl)[0] != '\0' ? sluice_errmsg(sl)
                                              : sluice_strerror(res->status));
        break;
    }
    report(sluice_status_name(res->status), msg);
}

/* A composite's rule that binds, and its own reset (sluice_result). */
static void print_binding(const sluice_ruleset *rs, const sluice_result *res)
{
    sluice_ruleset one;
    char text[160];

    if (rs == NULL || rs->count < 2 || res->rule >= rs->count)
        return;
    one.count = 1;
    one.rules[0] = rs->rules[res->rule];
    sluice_ruleset_format(&one, text, sizeof(text));
    printf("rule %u of %zu binds (%s): full again in %lld ms\n",
           (unsigned)res->rule + 1, rs->count, text,
           (long long)sluice_result_rule_reset_ms(res));
}

/* {"error": "NAME: msg"}, valid JSON whatever bytes msg holds; name NULL:
 * msg is named already. */
static void print_error_json(FILE *f, const char *name, const char *msg)
{
    char line[1024], quoted[6 * sizeof(line) + 16];

    if (name != NULL)
        named(line, sizeof(line), name, msg);
    else
        snprintf(line, sizeof(line), "%s", msg);
    jsonl_quote(quoted, sizeof(quoted), line, strlen(line));
    fprintf(f, "{\"error\": %s}\n", quoted);
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

/* Options of every command; each command accepts a subset. */
typedef struct cli_args {
    const char *url, *rule, *key;
    long long cost, requests;
    int peek, json;
    const char *limiter, *client;
    long long keepalive;
} cli_args;

/* Parses argv for command cmd, accepting the option letters in `allowed`.
 * Returns -1 to go on, or the exit status to leave with. */
static int parse_args(int argc, char **argv, const char *cmd,
                      const char *allowed, cli_args *a)
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
        {NULL, 0, NULL, 0}};
    int c;

    opterr = 0; /* our own message, named like every other */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == '?')
            return usage_error("input",
                               "%s: unknown option, or one missing its "
                               "value: \"%s\"",
                               cmd, argv[optind - 1]);
        if (strchr(allowed, c) == NULL && c != 'h')
            return usage_error(
                "input", "%s: option --%s does not apply", cmd,
                longopts[strchr("urkcnpjliah", c) - "urkcnpjliah"].name);
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
                return usage_error(whole_number(optarg) ? "cost" : "input",
                                   "--cost \"%s\": expected a whole number "
                                   "in 1..1000000000",
                                   optarg);
            break;
        case 'n':
            if (parse_int(optarg, 1, 1000, &a->requests) != 0)
                return usage_error(
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
                return usage_error("input",
                                   "--keepalive \"%s\": expected 0 (none) to "
                                   "10000000000 ms",
                                   optarg);
            break;
        case 'h':
            print_usage(stdout);
            return 0;
        }
    }
    if (optind < argc)
        return usage_error("input", "%s: unexpected argument \"%s\"", cmd,
                           argv[optind]);
    return -1;
}

/* Opens the handle of url with the environment's credentials; on failure
 * prints why and returns NULL with the exit status in *exit_status. */
static sluice *open_or_report(const char *url, sluice_options *opts,
                              int *exit_status)
{
    char err[512];
    sluice *sl;
    sluice_status st;

    env_credentials(opts);
    st = sluice_open(url, opts, &sl, err, sizeof(err));
    if (st != SLUICE_OK) {
        report(sluice_status_name(st), err);
        *exit_status = backend_exit(st);
        return NULL;
    }
    return sl;
}

/* ---- check ---- */

static int cmd_check(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0};
    const char *rule, *key, *would;
    long long cost;
    int rc;
    char err[512];
    sluice_options opts;
    sluice_ruleset rs;
    sluice_result res;
    sluice *sl;
    sluice_status st;

    if ((rc = parse_args(argc, argv, "check", "urkcpjli", &a)) >= 0)
        return rc;
    rule = a.rule;
    key = a.key;
    cost = a.cost;
    if (a.limiter != NULL && (rule != NULL || key != NULL))
        return usage_error("input", "%s",
                           "check: --limiter (with --client) or --rule and "
                           "--key, not both");
    if (a.client != NULL && a.limiter == NULL)
        return usage_error("input", "%s",
                           "check: --client goes with --limiter");
    if (a.limiter != NULL) {
        memset(&opts, 0, sizeof(opts));
        if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
            return rc;
        key = a.client != NULL ? a.client : "";
        st = a.peek ? sluice_limiter_peek(sl, a.limiter, strlen(a.limiter), key,
                                          strlen(key), cost, &res)
                    : sluice_limiter_acquire(sl, a.limiter, strlen(a.limiter),
                                             key, strlen(key), cost, &res);
        goto decided;
    }
    if (rule == NULL)
        return usage_error("input", "%s", "check: --rule is required");
    if (key == NULL)
        return usage_error("input", "%s", "check: --key is required");
    if ((st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
        return rc;
    st = a.peek ? sluice_peek(sl, key, strlen(key), &rs, cost, &res)
                : sluice_acquire(sl, key, strlen(key), &rs, cost, &res);
decided:
    if (st != SLUICE_OK) {
        report(sluice_status_name(st), sluice_errmsg(sl));
        sluice_close(sl);
        return st == SLUICE_EKEY || st == SLUICE_ECOST || st == SLUICE_ERULE ||
                       st == SLUICE_ENOLIMITER
                   ? EXIT_USAGE
                   : EXIT_BACKEND;
    }
    /* A peek charged nothing: it says what an acquire would have met. */
    would = a.peek ? "would be " : "";
    if (a.json) {
        print_result_json(stdout, &res, a.limiter == NULL ? rs.count : 0, true);
    } else if (res.allowed) {
        printf("%sallowed: %lld of %lld left, full again in %lld ms\n", would,
               (long long)res.remaining, (long long)res.limit,
               (long long)res.reset_after_ms);
    } else if (res.retry_after_ms < 0) {
        printf("%sdenied: a cost of %lld can never fit a limit of %lld\n",
               would, cost, (long long)res.limit);
    } else {
        printf("%sdenied: retry in %lld ms (%lld of %lld left)\n", would,
               (long long)res.retry_after_ms, (long long)res.remaining,
               (long long)res.limit);
    }
    if (!a.json && a.limiter == NULL)
        print_binding(&rs, &res);
    report_status(sl, &res);
    sluice_close(sl);
    return res.allowed ? EXIT_ALLOWED : EXIT_DENIED;
}

/* ---- replay ---- */

typedef struct vclock {
    int64_t t;
} vclock;

static int64_t vclock_now(void *ctx)
{
    return ((vclock *)ctx)->t;
}

/* Answers one event line with one output line: a result, {"reset": true}
 * or an error. default_rules is NULL without --rule. */
/* An event that names a limiter: acquire, peek or reset by name. */
static void replay_by_name(sluice *sl, vclock *clk, const jsonl_event *ev)
{
    sluice_result res;
    sluice_status st;

    clk->t = ev->t;
    switch (ev->op) {
    case JSONL_ACQUIRE:
        st = sluice_limiter_acquire(sl, ev->limiter, ev->limiter_len,
                                    ev->client, ev->client_len, ev->cost, &res);
        break;
    case JSONL_PEEK:
        st = sluice_limiter_peek(sl, ev->limiter, ev->limiter_len, ev->client,
                                 ev->client_len, ev->cost, &res);
        break;
    case JSONL_RESET:
        st = sluice_limiter_reset(sl, ev->limiter, ev->limiter_len, ev->client,
                                  ev->client_len);
        break;
    default:
        print_error_json(stdout, "input",
                         "by limiter, op is acquire, peek or reset");
        return;
    }
    if (st != SLUICE_OK)
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
    else if (ev->op == JSONL_RESET)
        fputs("{\"reset\": true}\n", stdout);
    else
        print_result_json(stdout, &res, 0, true);
}

/* A lease: {"lease": ID, ...the result} when admitted, the result alone
 * when denied; a release: {"released": true}. */
static void replay_lease(sluice *sl, vclock *clk, const jsonl_event *ev)
{
    sluice_lease lease;
    sluice_result res;
    sluice_status st;
    char q[64];

    clk->t = ev->t;
    memset(&lease, 0, sizeof(lease));
    if (ev->op == JSONL_RELEASE) {
        if (ev->lease_len == 0 || ev->lease_len >= sizeof(lease.id)) {
            print_error_json(stdout, "input",
                             "\"lease\" is not an id that a lease answered");
            return;
        }
        memcpy(lease.id, ev->lease, ev->lease_len);
        st = sluice_lease_release(sl, ev->key, ev->key_len, &lease);
        if (st != SLUICE_OK)
            print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
        else
            fputs("{\"released\": true}\n", stdout);
        return;
    }
    st = sluice_lease_acquire(sl, ev->key, ev->key_len, ev->max, ev->lease_ms,
                              &lease, &res);
    if (st != SLUICE_OK) {
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
        return;
    }
    if (res.allowed) {
        jsonl_quote(q, sizeof(q), lease.id, strlen(lease.id));
        printf("{\"lease\": %s, ", q);
    }
    print_result_json(stdout, &res, 1, !res.allowed);
}

static void replay_line(sluice *sl, vclock *clk,
                        const sluice_ruleset *default_rules, const char *line,
                        size_t len)
{
    char msg[700];
    const sluice_ruleset *rules = default_rules;
    jsonl_event ev;
    sluice_ruleset rs;
    sluice_result res;
    sluice_status st = SLUICE_EINVAL;
    int64_t granted = 0;

    if (jsonl_parse(line, len, &ev, msg, sizeof(msg)) != 0) {
        print_error_json(stdout, NULL, msg); /* named by jsonl_parse */
        return;
    }
    if (ev.limiter != NULL) {
        replay_by_name(sl, clk, &ev);
        goto done;
    }
    if (ev.op == JSONL_LEASE || ev.op == JSONL_RELEASE) {
        replay_lease(sl, clk, &ev);
        goto done;
    }
    if (ev.rule != NULL) {
        if ((st = sluice_ruleset_parse(ev.rule, &rs, msg, sizeof(msg))) !=
            SLUICE_OK) {
            print_error_json(stdout, sluice_status_name(st), msg);
            goto done;
        }
        rules = &rs;
    }
    if (rules == NULL) {
        print_error_json(stdout, "input",
                         "no rule: give \"rule\" in the event or --rule on "
                         "the command line");
        goto done;
    }
    clk->t = ev.t;
    switch (ev.op) {
    case JSONL_RESET:
        st = sluice_reset(sl, ev.key, ev.key_len, rules);
        break;
    case JSONL_PEEK:
        st = sluice_peek(sl, ev.key, ev.key_len, rules, ev.cost, &res);
        break;
    case JSONL_ACQUIRE:
        st = sluice_acquire(sl, ev.key, ev.key_len, rules, ev.cost, &res);
        break;
    case JSONL_AT_MOST:
        st = sluice_acquire_at_most(sl, ev.key, ev.key_len, rules, ev.cost,
                                    &granted, &res);
        break;
    case JSONL_REFUND:
        st = sluice_refund(sl, ev.key, ev.key_len, rules, ev.cost, &res);
        break;
    case JSONL_LEASE:
    case JSONL_RELEASE: /* answered above */
        break;
    }
    if (st != SLUICE_OK) {
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
    } else if (ev.op == JSONL_RESET) {
        fputs("{\"reset\": true}\n", stdout);
    } else {
        if (ev.op == JSONL_AT_MOST)
            printf("{\"granted\": %lld, ", (long long)granted);
        print_result_json(stdout, &res, rules->count, ev.op != JSONL_AT_MOST);
    }
done:
    jsonl_event_free(&ev);
}

static int cmd_replay(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0};
    sluice_options opts;
    sluice_ruleset rs;
    vclock clk = {0};
    char err[512], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    sluice *sl;
    sluice_status st;
    int rc;

    if ((rc = parse_args(argc, argv, "replay", "ur", &a)) >= 0)
        return rc;
    if (a.rule != NULL &&
        (st = sluice_ruleset_parse(a.rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    opts.clock = vclock_now;
    opts.clock_ctx = &clk;
    if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
        return rc;
    rc = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (jsonl_blank(line, (size_t)len))
            continue;
        replay_line(sl, &clk, a.rule != NULL ? &rs : NULL, line, (size_t)len);
        /* At once: a program may be waiting for this answer before it
         * writes the next event. */
        if (fflush(stdout) != 0) {
            report("io", "cannot write the answers");
            rc = EXIT_BACKEND;
            break;
        }
    }
    free(line);
    sluice_close(sl);
    return rc;
}

/* ---- limiter ---- */

/* {"limiter": NAME, "rules": TEXT, "keepalive_ms": N} */
static void print_limiter_json(const char *name, const sluice_ruleset *rs,
                               long long keepalive)
{
    char text[600], qn[6 * 1024 + 16];

    sluice_ruleset_format(rs, text, sizeof(text));
    jsonl_quote(qn, sizeof(qn), name, strlen(name));
    printf("{\"limiter\": %s, \"rules\": \"%s\", \"keepalive_ms\": %lld}\n", qn,
           text, keepalive);
}

/* sluice limiter define|set NAME RULE | get|delete NAME [options] */
static int cmd_limiter(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0};
    const char *sub, *name, *rule = NULL;
    int rc, skip = 3;
    char err[512];
    sluice_options opts;
    sluice_ruleset rs, got;
    int64_t ka = 0;
    sluice *sl;
    sluice_status st;

    if (argc < 3)
        return usage_error("input", "%s",
                           "limiter: expected define|set NAME RULE, or "
                           "get|delete NAME");
    sub = argv[1];
    name = argv[2];
    /* An option where a name or a rule goes: that one is missing (no
     * name or rule starts with "--"). */
    if (strncmp(name, "--", 2) == 0)
        return usage_error("input", "limiter %s: missing NAME", sub);
    if (strcmp(sub, "define") == 0 || strcmp(sub, "set") == 0) {
        if (argc < 4 || strncmp(argv[3], "--", 2) == 0)
            return usage_error("input",
                               "limiter %s %s: missing RULE (e.g. "
                               "fixed:100/1m)",
                               sub, name);
        rule = argv[3];
        skip = 4;
    } else if (strcmp(sub, "get") != 0 && strcmp(sub, "delete") != 0) {
        return usage_error("input",
                           "limiter: unknown \"%s\": use define, set, get "
                           "or delete",
                           sub);
    }
    if ((rc = parse_args(argc - skip + 1, argv + skip - 1, "limiter",
                         rule != NULL ? "ua" : "u", &a)) >= 0)
        return rc;
    if (rule != NULL &&
        (st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
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
        report(sluice_status_name(st), sluice_errmsg(sl));
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

/* ---- demo ---- */

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void demo_line(int i, const sluice_result *r)
{
    if (r->allowed)
        printf("  request %2d  allowed   %lld of %lld left\n", i,
               (long long)r->remaining, (long long)r->limit);
    else
        printf("  request %2d  DENIED    retry in %lld ms\n", i,
               (long long)r->retry_after_ms);
}

static int cmd_demo(int argc, char **argv)
{
    cli_args a = {"mem://", "token:5/1s", NULL, 1, 8, 0, 0, NULL, NULL, 0};
    const char *key = "demo:user:42", *rule;
    long long n;
    sluice_options opts;
    sluice_ruleset rs;
    sluice_result r;
    sluice_status st;
    char err[512];
    sluice *sl;
    int i, allowed = 0, rc;

    if ((rc = parse_args(argc, argv, "demo", "urn", &a)) >= 0)
        return rc;
    rule = a.rule;
    n = a.requests;
    if ((st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
        return rc;
    sluice_reset(sl, key, strlen(key), &rs);
    printf("sluice demo: a burst of %lld requests from %s, rule %s, "
           "backend %s\n",
           n, key, rule, sluice_backend_name(sl));
    for (i = 1; i <= n; i++) {
        if ((st = sluice_acquire(sl, key, strlen(key), &rs, 1, &r)) !=
            SLUICE_OK)
            goto fail;
        allowed += r.allowed;
        demo_line(i, &r);
    }
    printf("%d of %lld admitted at once.", allowed, n);
    if (!r.allowed && r.retry_after_ms > 0) {
        printf(" Waiting the %lld ms the last denial asked for...\n",
               (long long)r.retry_after_ms);
        fflush(stdout);
        sleep_ms(r.retry_after_ms);
        if ((st = sluice_acquire(sl, key, strlen(key), &rs, 1, &r)) !=
            SLUICE_OK)
            goto fail;
        demo_line(i, &r);
    } else {
        printf("\n");
    }
    sluice_close(sl);
    return 0;
fail:
    report(sluice_status_name(st), sluice_errmsg(sl));
    sluice_close(sl);
    return EXIT_BACKEND;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("input", "%s",
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
    if (strcmp(argv[1], "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "replay") == 0)
        return cmd_replay(argc - 1, argv + 1);
    if (strcmp(argv[1], "demo") == 0)
        return cmd_demo(argc - 1, argv + 1);
    if (strcmp(argv[1], "limiter") == 0)
        return cmd_limiter(argc - 1, argv + 1);
    return usage_error(
        "input", "unknown command \"%s\": use check, replay, demo or limiter",
        argv[1]);
}
