/* SPDX-License-Identifier: BSD-3-Clause */
/* replay.c - `sluice replay`: JSON Lines events on stdin, decided on a
 * virtual clock, one JSON answer a line on stdout (the events are parsed
 * by jsonl.c). */
#include "cli.h"
#include "jsonl.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* SIGHUP asks for the limits file (limits_file=) to be read again, before
 * the next event. */
static volatile sig_atomic_t hangup;

static void on_hangup(int sig)
{
    (void)sig;
    hangup = 1;
}

/* Reads the handle's limits file again; says so on standard error (a
 * fault: the last good file stays, and why). */
static void reload(sluice *sl)
{
    char err[768];

    hangup = 0;
    if (sluice_limits_reload(sl, err, sizeof(err)) == SLUICE_OK)
        fprintf(stderr, "sluice: limits reloaded\n");
    else
        cli_report("input", err);
}

/* {"error": "NAME: msg"}, valid JSON whatever bytes msg holds; name NULL:
 * msg is named already. */
static void print_error_json(FILE *f, const char *name, const char *msg)
{
    char line[1024], quoted[6 * sizeof(line) + 16];

    if (name != NULL)
        cli_named(line, sizeof(line), name, msg);
    else
        snprintf(line, sizeof(line), "%s", msg);
    jsonl_quote(quoted, sizeof(quoted), line, strlen(line));
    fprintf(f, "{\"error\": %s}\n", quoted);
}

typedef struct vclock {
    int64_t t;
} vclock;

static int64_t vclock_now(void *ctx)
{
    return ((vclock *)ctx)->t;
}

/* A reserving handle's traffic during one event: the counters before it
 * (*was) against now, as "name": value pairs in buf (empty: none). */
static const char *traffic(sluice *sl, const sluice_stats *was, char *buf,
                           size_t len)
{
    sluice_stats now;
    size_t at = 0;

    buf[0] = '\0';
    if (sluice_get_stats(sl, &now, sizeof(now)) != SLUICE_OK)
        return buf;
    if (now.reserve_batches > was->reserve_batches)
        at += (size_t)snprintf(
            buf + at, len - at, "\"asked\": %llu, \"reserved\": %llu",
            (unsigned long long)(now.reserve_asked - was->reserve_asked),
            (unsigned long long)(now.reserve_granted - was->reserve_granted));
    if (now.reserve_refunded > was->reserve_refunded && at < len)
        at += (size_t)snprintf(
            buf + at, len - at, "%s\"refunded\": %llu", at > 0 ? ", " : "",
            (unsigned long long)(now.reserve_refunded - was->reserve_refunded));
    if (now.reserve_lapsed > was->reserve_lapsed && at < len)
        snprintf(
            buf + at, len - at, "%s\"lapsed\": %llu", at > 0 ? ", " : "",
            (unsigned long long)(now.reserve_lapsed - was->reserve_lapsed));
    return buf;
}

/* An event that names a limiter: acquire, peek or reset by name. */
static void replay_by_name(sluice *sl, vclock *clk, const jsonl_event *ev)
{
    sluice_stats was;
    sluice_result res;
    sluice_status st;
    char extra[160];

    if (sluice_get_stats(sl, &was, sizeof(was)) != SLUICE_OK)
        memset(&was, 0, sizeof(was));
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
                         "by limiter, op is acquire, peek, reset, "
                         "limiter_set, override or unoverride");
        return;
    }
    if (st != SLUICE_OK)
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
    else if (ev->op == JSONL_RESET)
        fputs("{\"reset\": true}\n", stdout);
    else
        cli_print_result(stdout, &res, 0, true,
                         traffic(sl, &was, extra, sizeof(extra)));
}

/* A limiter's rules or an override set ({"set": true}), or an override
 * removed ({"deleted": true|false}); keep-alive 0 (none). */
static void replay_limiter_admin(sluice *sl, vclock *clk, const jsonl_event *ev)
{
    sluice_limiter_override ov;
    sluice_ruleset rs;
    sluice_status st;
    char msg[700];
    bool found = false;

    clk->t = ev->t;
    if (ev->op == JSONL_LIMITER_SET) {
        if ((st = sluice_ruleset_parse(ev->rule, &rs, msg, sizeof(msg))) !=
            SLUICE_OK) {
            print_error_json(stdout, sluice_status_name(st), msg);
            return;
        }
        st = sluice_limiter_set(sl, ev->limiter, ev->limiter_len, &rs, 0);
    } else if (ev->op == JSONL_OVERRIDE) {
        st = (sluice_status)cli_parse_override(ev->override, &ov, msg,
                                               sizeof(msg));
        if (st != SLUICE_OK) {
            print_error_json(stdout, sluice_status_name(st), msg);
            return;
        }
        st = sluice_limiter_override_set(sl, ev->limiter, ev->limiter_len,
                                         ev->client, ev->client_len, &ov);
    } else {
        st = sluice_limiter_override_delete(sl, ev->limiter, ev->limiter_len,
                                            ev->client, ev->client_len, &found);
    }
    if (st != SLUICE_OK)
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
    else if (ev->op == JSONL_UNOVERRIDE)
        printf("{\"deleted\": %s}\n", found ? "true" : "false");
    else
        fputs("{\"set\": true}\n", stdout);
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
    cli_print_result(stdout, &res, 1, !res.allowed, NULL);
}

/* Answers one event line with one output line: a result, {"reset": true}
 * or an error. default_rules is NULL without --rule. */
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
    sluice_stats was;
    char extra[160];

    if (jsonl_parse(line, len, &ev, msg, sizeof(msg)) != 0) {
        print_error_json(stdout, NULL, msg); /* named by jsonl_parse */
        return;
    }
    if (ev.op == JSONL_LIMITER_SET || ev.op == JSONL_OVERRIDE ||
        ev.op == JSONL_UNOVERRIDE) {
        replay_limiter_admin(sl, clk, &ev);
        goto done;
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
    if (sluice_get_stats(sl, &was, sizeof(was)) != SLUICE_OK)
        memset(&was, 0, sizeof(was));
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
    case JSONL_SETTLE:
        st = sluice_settle(sl, ev.key, ev.key_len, rules, ev.reserved,
                           ev.actual, &res);
        break;
    case JSONL_LEASE:
    case JSONL_RELEASE:
    case JSONL_LIMITER_SET:
    case JSONL_OVERRIDE:
    case JSONL_UNOVERRIDE: /* answered above */
        break;
    }
    if (st != SLUICE_OK) {
        print_error_json(stdout, sluice_status_name(st), sluice_errmsg(sl));
    } else if (ev.op == JSONL_RESET) {
        fputs("{\"reset\": true}\n", stdout);
    } else {
        if (ev.op == JSONL_AT_MOST)
            printf("{\"granted\": %lld, ", (long long)granted);
        cli_print_result(stdout, &res, rules->count, ev.op != JSONL_AT_MOST,
                         traffic(sl, &was, extra, sizeof(extra)));
    }
done:
    jsonl_event_free(&ev);
}

/* Whether the backend answers, before any input is read: a peek (it
 * charges nothing, and writes no key) of a key of the CLI's own. The
 * open does not connect (a service may start before its Redis), so this
 * is where replay learns that every line would fail, whatever the URL's
 * fail policy would answer: its result's status is the failure. */
static bool reachable(sluice *sl)
{
    static const char key[] = "sluice:replay:reachable";
    sluice_ruleset rs;
    sluice_result res;
    sluice_status st;
    char err[128];

    memset(&res, 0, sizeof(res));
    if (sluice_ruleset_parse("fixed:1/1s", &rs, err, sizeof(err)) != SLUICE_OK)
        return false;
    st = sluice_peek(sl, key, sizeof(key) - 1, &rs, 1, &res);
    if (st == SLUICE_OK && res.status == SLUICE_OK)
        return true;
    cli_report(sluice_status_name(st != SLUICE_OK ? st : res.status),
               sluice_errmsg(sl));
    return false;
}

int cmd_replay(int argc, char **argv)
{
    cli_args a = {"mem://", NULL, NULL, 1, 0, 0, 0, NULL, NULL, 0, 0, 0};
    sluice_options opts;
    sluice_ruleset rs;
    vclock clk = {0};
    char err[512], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    sluice *sl;
    sluice_status st;
    int rc;

    if ((rc = cli_parse_args(argc, argv, "replay", "ur", &a)) >= 0)
        return rc;
    if (a.rule != NULL &&
        (st = sluice_ruleset_parse(a.rule, &rs, err, sizeof(err))) != SLUICE_OK)
        return cli_usage_error(sluice_status_name(st), "%s", err);
    memset(&opts, 0, sizeof(opts));
    opts.clock = vclock_now;
    opts.clock_ctx = &clk;
    if ((sl = cli_open(a.url, &opts, &rc)) == NULL)
        return rc;
    if (!reachable(sl)) {
        sluice_close(sl);
        return EXIT_BACKEND;
    }
    rc = 0;
    /* A replay fed by a running service may last: with a limits file it
     * reloads on SIGHUP (read restarted, so the event after the signal
     * sees the file). Without one SIGHUP keeps its default. */
    if (strstr(a.url, "limits_file=") != NULL) {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_hangup;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGHUP, &sa, NULL);
    }
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (hangup)
            reload(sl);
        if (jsonl_blank(line, (size_t)len))
            continue;
        replay_line(sl, &clk, a.rule != NULL ? &rs : NULL, line, (size_t)len);
        /* At once: a program may be waiting for this answer before it
         * writes the next event. */
        if (fflush(stdout) != 0) {
            cli_report("io", "cannot write the answers");
            rc = EXIT_BACKEND;
            break;
        }
    }
    free(line);
    sluice_close(sl);
    return rc;
}
