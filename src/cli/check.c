/* SPDX-License-Identifier: BSD-3-Clause */
/* check.c - `sluice check`: one request, by rules and a key or by a named
 * limiter and a client, answered in a line for a person or in JSON, with
 * the exit status saying allowed or denied. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

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
    case SLUICE_RESERVED:
        snprintf(msg, sizeof(msg),
                 "admitted from this handle's reservation, without a round "
                 "trip");
        break;
    case SLUICE_ALLOWLISTED:
        snprintf(msg, sizeof(msg),
                 "admitted: the client is allow-listed, nothing counted");
        break;
    case SLUICE_DENYLISTED:
        snprintf(msg, sizeof(msg), "denied: the client is deny-listed");
        break;
    default:
        snprintf(msg, sizeof(msg), "decided by the fail policy: %s",
                 sluice_errmsg(sl)[0] != '\0' ? sluice_errmsg(sl)
                                              : sluice_strerror(res->status));
        break;
    }
    cli_report(sluice_status_name(res->status), msg);
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

int cmd_check(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    const char *rule, *key, *would;
    long long cost;
    int rc;
    char err[512];
    sluice_options opts;
    sluice_ruleset rs;
    sluice_result res;
    sluice *sl;
    sluice_status st;

    if ((rc = cli_parse_args(argc, argv, "check", "urkcpjli", &a)) >= 0)
        return rc;
    rule = a.rule;
    key = a.key;
    cost = a.cost;
    if (a.limiter != NULL && (rule != NULL || key != NULL))
        return cli_usage_error("input", "%s",
                               "check: --limiter (with --client) or --rule and "
                               "--key, not both");
    if (a.client != NULL && a.limiter == NULL)
        return cli_usage_error("input", "%s",
                               "check: --client goes with --limiter");
    if (a.limiter != NULL) {
        memset(&opts, 0, sizeof(opts));
        if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
            return rc;
        key = a.client != NULL ? a.client : "";
        st = a.peek ? sluice_limiter_peek(sl, a.limiter, strlen(a.limiter), key,
                                          strlen(key), cost, &res)
                    : sluice_limiter_acquire(sl, a.limiter, strlen(a.limiter),
                                             key, strlen(key), cost, &res);
        goto decided;
    }
    if (rule == NULL)
        return cli_usage_error("input", "%s", "check: --rule is required");
    if (key == NULL)
        return cli_usage_error("input", "%s", "check: --key is required");
    if ((st = sluice_ruleset_parse(rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return cli_usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    st = a.peek ? sluice_peek(sl, key, strlen(key), &rs, cost, &res)
                : sluice_acquire(sl, key, strlen(key), &rs, cost, &res);
decided:
    if (st != SLUICE_OK) {
        cli_report(sluice_status_name(st), sluice_errmsg(sl));
        sluice_close(sl);
        return st == SLUICE_EKEY || st == SLUICE_ECOST || st == SLUICE_ERULE ||
                       st == SLUICE_ENOLIMITER
                   ? EXIT_USAGE
                   : EXIT_BACKEND;
    }
    /* A peek charged nothing: it says what an acquire would have met. */
    would = a.peek ? "would be " : "";
    if (a.json) {
        cli_print_result(stdout, &res, a.limiter == NULL ? rs.count : 0, true,
                         NULL);
    } else if (res.status == SLUICE_ALLOWLISTED) {
        /* No rule was read: the numbers would be zeros, not a limit. */
        printf("%sallowed: the client is allow-listed, nothing counted\n",
               would);
    } else if (res.status == SLUICE_DENYLISTED) {
        printf("%sdenied: the client is deny-listed\n", would);
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
