/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c - the command line: check one request, replay JSON Lines on a
 * virtual clock, or show a burst being limited. */
#include "sluice.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
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

static const char usage_text[] =
    "usage:\n"
    "  sluice check  --rule RULE --key KEY [--url URL] [--cost N] [--peek]"
    " [--json]\n"
    "  sluice replay [--url URL] [--rule RULE]   < events.jsonl\n"
    "  sluice demo   [--url URL] [--rule RULE] [--requests N]\n"
    "\n"
    "URL   mem:// (default), mem://NAME, "
    "redis://[user:password@]host:port[/db] (Lua),\n"
    "      redis+multi://[user:password@]host:port[/db] (no scripts),\n"
    "      twemproxy://[password@]host:port, "
    "redis-cluster://[user:password@]host:port[,...]\n"
    "      options: ?timeout_ms=N&connect_timeout_ms=N&clock=local|server"
    "&fail=error|open|closed&prefix=P\n"
    "RULE  ALGO:LIMIT/PERIOD[,burst=N][,tz=+HH:MM], ALGO one of fixed, "
    "sliding,\n"
    "      log, token, gcra; PERIOD like 250ms, 1s, 1m, 1h, 1d; join rules "
    "with '+'\n"
    "      for an all-or-nothing composite: fixed:1000/1d,tz=+08:00+"
    "fixed:100/1h\n"
    "\n"
    "check exits 0 when allowed, 3 when denied, 2 for bad arguments, 1 when "
    "the\n"
    "backend fails. replay reads one JSON event a line:\n"
    "  {\"t\": 1400, \"key\": \"user:1\", \"rule\": \"fixed:10/1s\", "
    "\"cost\": 1, \"op\": \"acquire\"}\n"
    "and writes one JSON result a line.\n";

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "sluice: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see sluice --help)\n");
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

static int backend_exit(sluice_status st)
{
    return st == SLUICE_EURL || st == SLUICE_EINVAL ? EXIT_USAGE : EXIT_BACKEND;
}

static void print_result_json(FILE *f, const sluice_result *r)
{
    fprintf(f,
            "{\"allowed\": %s, \"limit\": %lld, \"remaining\": %lld, "
            "\"retry_after_ms\": %lld, \"reset_after_ms\": %lld}\n",
            r->allowed ? "true" : "false", (long long)r->limit,
            (long long)r->remaining, (long long)r->retry_after_ms,
            (long long)r->reset_after_ms);
}

static void print_error_json(FILE *f, const char *msg)
{
    json_t *s = json_string(msg);
    char *txt = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;

    fprintf(f, "{\"error\": %s}\n", txt ? txt : "\"(unprintable message)\"");
    free(txt);
    json_decref(s);
}

/* Options of every command; each command accepts a subset. */
typedef struct cli_args {
    const char *url, *rule, *key;
    long long cost, requests;
    int peek, json;
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == '?')
            return usage_error("%s: bad option", cmd);
        if (strchr(allowed, c) == NULL && c != 'h')
            return usage_error(
                "%s: option --%s does not apply", cmd,
                longopts[strchr("urkcnpjh", c) - "urkcnpjh"].name);
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
            if (parse_int(optarg, 1, 1000000000, &a->cost) != 0)
                return usage_error("--cost \"%s\": expected a whole number "
                                   "in 1..1000000000",
                                   optarg);
            break;
        case 'n':
            if (parse_int(optarg, 1, 1000, &a->requests) != 0)
                return usage_error("--requests \"%s\": expected 1..1000",
                                   optarg);
            break;
        case 'p':
            a->peek = 1;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        }
    }
    if (optind < argc)
        return usage_error("%s: unexpected argument \"%s\"", cmd, argv[optind]);
    return -1;
}

/* Opens the handle of a.url; on failure prints why and returns NULL with
 * the exit status in *exit_status. */
static sluice *open_or_report(const char *url, const sluice_options *opts,
                              int *exit_status)
{
    char err[512];
    sluice *sl;
    sluice_status st = sluice_open(url, opts, &sl, err, sizeof(err));

    if (st != SLUICE_OK) {
        fprintf(stderr, "sluice: %s\n", err);
        *exit_status = backend_exit(st);
        return NULL;
    }
    return sl;
}

/* ---- check ---- */

static int cmd_check(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0};
    const char *rule, *key;
    long long cost;
    int rc;
    char err[512];
    sluice_ruleset rs;
    sluice_result res;
    sluice *sl;
    sluice_status st;

    if ((rc = parse_args(argc, argv, "check", "urkcpj", &a)) >= 0)
        return rc;
    rule = a.rule;
    key = a.key;
    cost = a.cost;
    if (rule == NULL)
        return usage_error("%s", "check: --rule is required");
    if (key == NULL)
        return usage_error("%s", "check: --key is required");
    if (sluice_ruleset_parse(rule, &rs, err, sizeof(err)) != SLUICE_OK)
        return usage_error("%s", err);
    if ((sl = open_or_report(a.url, NULL, &rc)) == NULL)
        return rc;
    st = a.peek ? sluice_peek(sl, key, strlen(key), &rs, cost, &res)
                : sluice_acquire(sl, key, strlen(key), &rs, cost, &res);
    if (st != SLUICE_OK) {
        fprintf(stderr, "sluice: %s\n", sluice_errmsg(sl));
        sluice_close(sl);
        return st == SLUICE_EKEY || st == SLUICE_ECOST || st == SLUICE_ERULE
                   ? EXIT_USAGE
                   : EXIT_BACKEND;
    }
    if (a.json) {
        print_result_json(stdout, &res);
    } else if (res.allowed) {
        printf("allowed: %lld of %lld left, full again in %lld ms\n",
               (long long)res.remaining, (long long)res.limit,
               (long long)res.reset_after_ms);
    } else if (res.retry_after_ms < 0) {
        printf("denied: a cost of %lld can never fit a limit of %lld\n", cost,
               (long long)res.limit);
    } else {
        printf("denied: retry in %lld ms (%lld of %lld left)\n",
               (long long)res.retry_after_ms, (long long)res.remaining,
               (long long)res.limit);
    }
    if (res.status != SLUICE_OK)
        fprintf(stderr, "sluice: decided by the fail policy: %s\n",
                sluice_errmsg(sl));
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

/* JSON white space other than newline: the line holds nothing. */
static int blank_line(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

/* Answers one event line; writes the result or an error line. */
static void replay_line(sluice *sl, vclock *clk, const char *default_rule,
                        const char *line, size_t len)
{
    json_error_t jerr;
    json_t *ev = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *jt, *jkey, *jrule, *jcost, *jop;
    const char *op = "acquire", *rule_text = default_rule, *name;
    char msg[700];
    long long cost = 1;
    sluice_ruleset rs;
    sluice_result res;
    sluice_status st;
    json_t *val;

    if (ev == NULL) {
        snprintf(msg, sizeof(msg), "line is not JSON: %s", jerr.text);
        print_error_json(stdout, msg);
        return;
    }
    if (!json_is_object(ev)) {
        print_error_json(stdout, "event must be a JSON object");
        goto done;
    }
    json_object_foreach(ev, name, val)
    {
        if (strcmp(name, "t") != 0 && strcmp(name, "key") != 0 &&
            strcmp(name, "rule") != 0 && strcmp(name, "cost") != 0 &&
            strcmp(name, "op") != 0) {
            snprintf(msg, sizeof(msg),
                     "unknown field \"%.64s\" (known: t, "
                     "key, rule, cost, op)",
                     name);
            print_error_json(stdout, msg);
            goto done;
        }
    }
    jt = json_object_get(ev, "t");
    jkey = json_object_get(ev, "key");
    jrule = json_object_get(ev, "rule");
    jcost = json_object_get(ev, "cost");
    jop = json_object_get(ev, "op");
    if (jt == NULL || !json_is_integer(jt)) {
        print_error_json(stdout, jt == NULL ? "missing \"t\" (virtual time "
                                              "in ms)"
                                            : "\"t\" must be a JSON integer "
                                              "(ms), not a string, fraction "
                                              "or exponent");
        goto done;
    }
    if (jkey == NULL || !json_is_string(jkey)) {
        print_error_json(stdout, jkey == NULL ? "missing \"key\""
                                              : "\"key\" must be a string");
        goto done;
    }
    if (jop != NULL) {
        if (!json_is_string(jop)) {
            print_error_json(stdout, "\"op\" must be \"acquire\", \"peek\" "
                                     "or \"reset\"");
            goto done;
        }
        op = json_string_value(jop);
        if (strcmp(op, "acquire") != 0 && strcmp(op, "peek") != 0 &&
            strcmp(op, "reset") != 0) {
            snprintf(msg, sizeof(msg),
                     "unknown op \"%.64s\" (use acquire, "
                     "peek or reset)",
                     op);
            print_error_json(stdout, msg);
            goto done;
        }
    }
    if (jrule != NULL) {
        if (!json_is_string(jrule)) {
            print_error_json(stdout, "\"rule\" must be a string");
            goto done;
        }
        rule_text = json_string_value(jrule);
    }
    if (rule_text == NULL) {
        print_error_json(stdout, "no rule: give \"rule\" in the event or "
                                 "--rule on the command line");
        goto done;
    }
    /* A reset ignores cost entirely. */
    if (jcost != NULL && strcmp(op, "reset") != 0) {
        if (!json_is_integer(jcost)) {
            print_error_json(stdout, "\"cost\" must be a JSON integer");
            goto done;
        }
        cost = json_integer_value(jcost);
    }
    if (sluice_ruleset_parse(rule_text, &rs, msg, sizeof(msg)) != SLUICE_OK) {
        print_error_json(stdout, msg);
        goto done;
    }
    if (json_integer_value(jt) < 0 ||
        json_integer_value(jt) > 9007199254740991LL) {
        snprintf(msg, sizeof(msg),
                 "\"t\" %lld is outside "
                 "0..9007199254740991 ms",
                 (long long)json_integer_value(jt));
        print_error_json(stdout, msg);
        goto done;
    }
    clk->t = json_integer_value(jt);
    if (strcmp(op, "reset") == 0) {
        st = sluice_reset(sl, json_string_value(jkey), json_string_length(jkey),
                          &rs);
        if (st == SLUICE_OK)
            fputs("{\"reset\": true}\n", stdout);
    } else if (strcmp(op, "peek") == 0) {
        st = sluice_peek(sl, json_string_value(jkey), json_string_length(jkey),
                         &rs, cost, &res);
    } else {
        st = sluice_acquire(sl, json_string_value(jkey),
                            json_string_length(jkey), &rs, cost, &res);
    }
    if (st != SLUICE_OK)
        print_error_json(stdout, sluice_errmsg(sl));
    else if (strcmp(op, "reset") != 0)
        print_result_json(stdout, &res);
done:
    json_decref(ev);
}

static int cmd_replay(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0};
    const char *rule;
    sluice_options opts;
    sluice_ruleset rs;
    vclock clk = {0};
    char err[512], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    sluice *sl;
    int rc;

    if ((rc = parse_args(argc, argv, "replay", "ur", &a)) >= 0)
        return rc;
    rule = a.rule;
    if (rule != NULL &&
        sluice_ruleset_parse(rule, &rs, err, sizeof(err)) != SLUICE_OK)
        return usage_error("%s", err);
    memset(&opts, 0, sizeof(opts));
    opts.clock = vclock_now;
    opts.clock_ctx = &clk;
    if ((sl = open_or_report(a.url, &opts, &rc)) == NULL)
        return rc;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (blank_line(line, (size_t)len))
            continue;
        replay_line(sl, &clk, rule, line, (size_t)len);
    }
    free(line);
    sluice_close(sl);
    return fflush(stdout) == 0 ? 0 : EXIT_BACKEND;
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
    cli_args a = {"mem://", "token:5/1s", NULL, 1, 8, 0, 0};
    const char *key = "demo:user:42", *rule;
    long long n;
    sluice_ruleset rs;
    sluice_result r;
    char err[512];
    sluice *sl;
    int i, allowed = 0, rc;

    if ((rc = parse_args(argc, argv, "demo", "urn", &a)) >= 0)
        return rc;
    rule = a.rule;
    n = a.requests;
    if (sluice_ruleset_parse(rule, &rs, err, sizeof(err)) != SLUICE_OK)
        return usage_error("%s", err);
    if ((sl = open_or_report(a.url, NULL, &rc)) == NULL)
        return rc;
    sluice_reset(sl, key, strlen(key), &rs);
    printf("sluice demo: a burst of %lld requests from %s, rule %s, "
           "backend %s\n",
           n, key, rule, sluice_backend_name(sl));
    for (i = 1; i <= n; i++) {
        if (sluice_acquire(sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK)
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
        if (sluice_acquire(sl, key, strlen(key), &rs, 1, &r) != SLUICE_OK)
            goto fail;
        demo_line(i, &r);
    } else {
        printf("\n");
    }
    sluice_close(sl);
    return 0;
fail:
    fprintf(stderr, "sluice: %s\n", sluice_errmsg(sl));
    sluice_close(sl);
    return EXIT_BACKEND;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("%s", "missing command: check, replay or demo");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
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
    return usage_error("unknown command \"%s\": use check, replay or demo",
                       argv[1]);
}
