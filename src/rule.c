/* SPDX-License-Identifier: BSD-3-Clause */
/* rule.c - parses and checks rules:
 * "ALGO:LIMIT/PERIOD[,burst=N][,tz=..][,block=D[,extend=1]]"
 * joined by '+' into all-or-nothing composites. */
#include "internal.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    sluice_algorithm algorithm;
} algorithms[] = {
    {"fixed", SLUICE_FIXED}, {"sliding", SLUICE_SLIDING}, {"log", SLUICE_LOG},
    {"token", SLUICE_TOKEN}, {"gcra", SLUICE_GCRA},
};

const char *sl_algorithm_name(sluice_algorithm a)
{
    size_t i;

    for (i = 0; i < sizeof(algorithms) / sizeof(algorithms[0]); i++)
        if (algorithms[i].algorithm == a)
            return algorithms[i].name;
    return "unknown";
}

void sl_rule_format(const sluice_rule *r, char *dst, size_t dst_len)
{
    int n = snprintf(dst, dst_len, "%s:%lld/%lldms",
                     sl_algorithm_name(r->algorithm), (long long)r->limit,
                     (long long)r->period_ms);

    if (n < 0 || (size_t)n >= dst_len)
        return;
    if (r->burst > 0)
        n += snprintf(dst + n, dst_len - (size_t)n, ",burst=%lld",
                      (long long)r->burst);
    if (n >= 0 && (size_t)n < dst_len && r->tz_offset_ms != 0) {
        long long off =
            r->tz_offset_ms < 0 ? -r->tz_offset_ms : r->tz_offset_ms;
        n += snprintf(dst + n, dst_len - (size_t)n, ",tz=%c%02lld:%02lld",
                      r->tz_offset_ms < 0 ? '-' : '+', off / 3600000,
                      off / 60000 % 60);
    }
    if (n >= 0 && (size_t)n < dst_len && r->block_s != 0)
        snprintf(dst + n, dst_len - (size_t)n, ",block=%us%s",
                 (unsigned)r->block_s, r->block_extend ? ",extend=1" : "");
}

bool sl_ruleset_same(const sluice_ruleset *a, const sluice_ruleset *b)
{
    size_t i;

    if (a->count != b->count)
        return false;
    for (i = 0; i < a->count; i++) {
        const sluice_rule *x = &a->rules[i], *y = &b->rules[i];

        if (x->algorithm != y->algorithm || x->limit != y->limit ||
            x->period_ms != y->period_ms ||
            sl_rule_capacity(x) != sl_rule_capacity(y) ||
            x->tz_offset_ms != y->tz_offset_ms || x->block_s != y->block_s ||
            x->block_extend != y->block_extend)
            return false;
    }
    return true;
}

size_t sluice_ruleset_format(const sluice_ruleset *rs, char *buf, size_t len)
{
    char one[128];
    sl_text t = {buf, len, 0};
    size_t i;

    if (len > 0)
        buf[0] = '\0';
    if (rs == NULL)
        return 0;
    for (i = 0; i < rs->count && i < SLUICE_MAX_RULES; i++) {
        sl_rule_format(&rs->rules[i], one, sizeof(one));
        sl_textf(&t, "%s%s", i > 0 ? "+" : "", one);
    }
    return t.at;
}

/* Parser state: the whole text, for messages, and the cursor. */
typedef struct parser {
    const char *text;
    const char *p;
    char *err;
    size_t err_len;
} parser;

static sluice_status fail(parser *ps, const char *what, const char *at,
                          size_t at_len)
{
    sl_errf(ps->err, ps->err_len, "rule \"%s\": %s%s%.*s%s", ps->text, what,
            at_len ? " at \"" : "", (int)(at_len > 40 ? 40 : at_len), at,
            at_len ? "\"" : "");
    return SLUICE_ERULE;
}

/* fail() with a message about what: "<pre><what><post>". */
static sluice_status fail_what(parser *ps, const char *pre, const char *what,
                               const char *post, const char *at, size_t at_len)
{
    char msg[96];

    snprintf(msg, sizeof(msg), "%s%s%s", pre, what, post);
    return fail(ps, msg, at, at_len);
}

static size_t span_until(const char *p, const char *stops)
{
    return strcspn(p, stops);
}

/* Reads digits, saturating at INT64_MAX; false when there is none or when
 * a fraction or exponent follows (numbers are integers). */
static sluice_status scan_digits(parser *ps, const char *what, int64_t *out)
{
    const char *start = ps->p;
    int64_t v = 0;

    if (*ps->p < '0' || *ps->p > '9') {
        char msg[96];

        snprintf(msg, sizeof(msg), "expected a whole number for %s", what);
        return fail(ps, msg, start, span_until(start, ",+/"));
    }
    while (*ps->p >= '0' && *ps->p <= '9') {
        v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (*ps->p - '0');
        ps->p++;
    }
    if (*ps->p == '.' || *ps->p == 'e' || *ps->p == 'E') {
        char msg[96];

        snprintf(msg, sizeof(msg), "%s must be a whole number", what);
        return fail(ps, msg, start, span_until(start, ",+/"));
    }
    *out = v;
    return SLUICE_OK;
}

/* Reads a decimal integer in 1..max. */
static sluice_status read_number(parser *ps, const char *what, int64_t max,
                                 int64_t *out)
{
    const char *start = ps->p;
    int64_t v;
    sluice_status st;

    if ((st = scan_digits(ps, what, &v)) != SLUICE_OK)
        return st;
    if (v < 1 || v > max) {
        char msg[128];

        snprintf(msg, sizeof(msg), "%s %.*s is out of range 1..%lld", what,
                 (int)(ps->p - start > 24 ? 24 : ps->p - start), start,
                 (long long)max);
        return fail(ps, msg, "", 0);
    }
    *out = v;
    return SLUICE_OK;
}

/* A duration, "N<unit>", up to 10^10 ms; what names it in messages
 * ("period", "block"). */
static sluice_status read_duration(parser *ps, const char *what, int64_t *out)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    const char *start = ps->p;
    int64_t n;
    size_t i, len;
    sluice_status st;

    if ((st = scan_digits(ps, what, &n)) != SLUICE_OK)
        return st;
    if (n == 0)
        return fail_what(ps, "", what, " 0 is not allowed", start,
                         span_until(start, ",+"));
    /* The longest unit that the text starts with ("ms" before "m"). */
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        len = strlen(units[i].unit);
        if (strncmp(ps->p, units[i].unit, len) == 0) {
            ps->p += len;
            if (n > SL_MAX_PERIOD_MS / units[i].ms)
                return fail_what(ps, "", what,
                                 " above 10^10 ms (about 115 days)", start,
                                 (size_t)(ps->p - start));
            *out = n * units[i].ms;
            return SLUICE_OK;
        }
    }
    len = span_until(ps->p, ",+");
    if (len == 0)
        return fail_what(ps, "", what, " needs a unit (ms, s, m, h or d)",
                         start, span_until(start, ",+"));
    return fail_what(ps, "unknown ", what, " unit (use ms, s, m, h or d)",
                     ps->p, len);
}

static sluice_status read_tz(parser *ps, int64_t *out)
{
    const char *s = ps->p;
    int sign, hh, mm;

    if ((s[0] != '+' && s[0] != '-') || s[1] < '0' || s[1] > '9' ||
        s[2] < '0' || s[2] > '9' || s[3] != ':' || s[4] < '0' || s[4] > '9' ||
        s[5] < '0' || s[5] > '9')
        return fail(ps, "tz must look like +08:00 or -05:30", s,
                    span_until(s, ","));
    sign = s[0] == '-' ? -1 : 1;
    hh = (s[1] - '0') * 10 + (s[2] - '0');
    mm = (s[4] - '0') * 10 + (s[5] - '0');
    if (mm > 59 || hh * 60 + mm > 14 * 60)
        return fail(ps, "tz outside -14:00..+14:00", s, 6);
    *out = sign * ((int64_t)hh * 3600000 + (int64_t)mm * 60000);
    ps->p += 6;
    return SLUICE_OK;
}

/* block=D: a duration as a period is written, in whole seconds. */
static sluice_status read_block(parser *ps, bool twice, sluice_rule *r)
{
    const char *opt = ps->p;
    int64_t ms;
    sluice_status st;

    if (twice)
        return fail(ps, "block given twice", opt, span_until(opt, ",+"));
    ps->p += 6;
    if ((st = read_duration(ps, "block", &ms)) != SLUICE_OK)
        return st;
    if (ms % 1000 != 0)
        return fail(ps, "block is whole seconds (e.g. block=90s, block=15m)",
                    opt, span_until(opt, ",+"));
    r->block_s = (unsigned)(ms / 1000) & 0x7fffffffu;
    return SLUICE_OK;
}

static sluice_status read_rule(parser *ps, sluice_rule *r)
{
    const char *start = ps->p;
    size_t len = span_until(ps->p, ":+,");
    size_t i;
    bool have_burst = false, have_tz = false, have_block = false;
    bool have_extend = false;
    sluice_status st;

    memset(r, 0, sizeof(*r));
    for (i = 0; i < sizeof(algorithms) / sizeof(algorithms[0]); i++)
        if (len == strlen(algorithms[i].name) &&
            memcmp(start, algorithms[i].name, len) == 0)
            r->algorithm = algorithms[i].algorithm;
    if (len == 0)
        return fail(ps, "missing algorithm (fixed, sliding, log, token, gcra)",
                    start, span_until(start, "+"));
    if (r->algorithm == 0)
        return fail(ps,
                    "unknown algorithm (use fixed, sliding, log, token or "
                    "gcra)",
                    start, len);
    ps->p += len;
    if (*ps->p != ':')
        return fail(ps, "expected ':LIMIT/PERIOD' after the algorithm", start,
                    span_until(start, "+"));
    ps->p++;
    if ((st = read_number(ps, "limit", SL_MAX_LIMIT, &r->limit)) != SLUICE_OK)
        return st;
    if (*ps->p != '/')
        return fail(ps, "expected '/PERIOD' after the limit", start,
                    span_until(start, "+"));
    ps->p++;
    if ((st = read_duration(ps, "period", &r->period_ms)) != SLUICE_OK)
        return st;
    while (*ps->p == ',') {
        const char *opt = ++ps->p;

        if (strncmp(opt, "burst=", 6) == 0) {
            if (have_burst)
                return fail(ps, "burst given twice", opt,
                            span_until(opt, ",+"));
            ps->p += 6;
            if ((st = read_number(ps, "burst", SL_MAX_LIMIT, &r->burst)) !=
                SLUICE_OK)
                return st;
            have_burst = true;
        } else if (strncmp(opt, "tz=", 3) == 0) {
            if (have_tz)
                return fail(ps, "tz given twice", opt, span_until(opt, ","));
            ps->p += 3;
            if ((st = read_tz(ps, &r->tz_offset_ms)) != SLUICE_OK)
                return st;
            have_tz = true;
        } else if (strncmp(opt, "block=", 6) == 0) {
            if ((st = read_block(ps, have_block, r)) != SLUICE_OK)
                return st;
            have_block = true;
        } else if (strncmp(opt, "extend=", 7) == 0) {
            if (have_extend || (opt[7] != '0' && opt[7] != '1') ||
                (opt[8] != '\0' && opt[8] != ',' && opt[8] != '+'))
                return fail(ps,
                            have_extend ? "extend given twice"
                                        : "extend must be 0 or 1",
                            opt, span_until(opt, ",+"));
            r->block_extend = opt[7] == '1';
            ps->p += 8;
            have_extend = true;
        } else {
            return fail(ps,
                        "unknown option (use burst=N, tz=+HH:MM, block=D or "
                        "extend=1)",
                        opt, span_until(opt, ",+"));
        }
    }
    if (r->block_extend && !have_block)
        return fail(ps, "extend=1 needs block=D (the block it extends)", start,
                    span_until(start, "+"));
    return SLUICE_OK;
}

static sluice_status check_rule(const sluice_rule *r, size_t i,
                                const char *label, char *err, size_t err_len);
static sluice_status check_duplicates(const sluice_ruleset *rs, char *err,
                                      size_t err_len);

sluice_status sluice_ruleset_parse(const char *text, sluice_ruleset *out,
                                   char *err, size_t err_len)
{
    parser ps = {text, text, err, err_len};
    sluice_ruleset rs;
    sluice_status st;

    if (text == NULL || out == NULL) {
        sl_errf(err, err_len, "rule: %s is NULL",
                text == NULL ? "text" : "out");
        return SLUICE_EINVAL;
    }
    memset(&rs, 0, sizeof(rs));
    if (*text == '\0') {
        sl_errf(err, err_len, "rule \"\": empty; expected ALGO:LIMIT/PERIOD");
        return SLUICE_ERULE;
    }
    for (;;) {
        if (rs.count == SLUICE_MAX_RULES)
            return fail(&ps, "more than 8 rules in one composite", ps.p,
                        strlen(ps.p));
        const char *start = ps.p;
        char label[96];

        if ((st = read_rule(&ps, &rs.rules[rs.count])) != SLUICE_OK)
            return st;
        snprintf(label, sizeof(label), "%.*s",
                 (int)(ps.p - start > 95 ? 95 : ps.p - start), start);
        if ((st = check_rule(&rs.rules[rs.count], rs.count, label, err,
                             err_len)) != SLUICE_OK)
            return st;
        rs.count++;
        if (*ps.p == '\0')
            break;
        if (*ps.p != '+')
            return fail(&ps, "unexpected trailing text", ps.p, strlen(ps.p));
        ps.p++;
    }
    /* Each rule was checked as it was read; what is left is the set. */
    if ((st = check_duplicates(&rs, err, err_len)) != SLUICE_OK)
        return st;
    *out = rs;
    return SLUICE_OK;
}

/* Checks one rule; label names it in messages (its text, or NULL to
 * format it). */
static sluice_status check_rule(const sluice_rule *r, size_t i,
                                const char *label, char *err, size_t err_len)
{
    char txt[96];
    bool bucket = sl_store_is_bucket(r), window = sl_store_is_window(r);

    if (r->algorithm < SLUICE_FIXED || r->algorithm > SLUICE_GCRA) {
        sl_errf(err, err_len, "rule %zu: unknown algorithm %d", i + 1,
                (int)r->algorithm);
        return SLUICE_ERULE;
    }
/* The rule as the message quotes it: formatted only on the way to an
 * error, since every decision checks its rules. */
#define RULE_TEXT() \
    (label != NULL ? label : (sl_rule_format(r, txt, sizeof(txt)), txt))
    if (r->limit < 1 || r->limit > SL_MAX_LIMIT) {
        sl_errf(err, err_len,
                "rule \"%s\": limit %lld is out of range "
                "1..1000000000",
                RULE_TEXT(), (long long)r->limit);
        return SLUICE_ERULE;
    }
    if (r->period_ms < 1 || r->period_ms > SL_MAX_PERIOD_MS) {
        sl_errf(err, err_len,
                "rule \"%s\": period %lld ms is out of range "
                "1..10000000000 ms",
                RULE_TEXT(), (long long)r->period_ms);
        return SLUICE_ERULE;
    }
    if (r->burst != 0 && !bucket) {
        sl_errf(err, err_len,
                "rule \"%s\": burst= applies to token and gcra "
                "only",
                RULE_TEXT());
        return SLUICE_ERULE;
    }
    if (r->burst < 0 || r->burst > SL_MAX_LIMIT) {
        sl_errf(err, err_len,
                "rule \"%s\": burst %lld is out of range "
                "1..1000000000",
                RULE_TEXT(), (long long)r->burst);
        return SLUICE_ERULE;
    }
    if (r->tz_offset_ms != 0 && !window) {
        sl_errf(err, err_len,
                "rule \"%s\": tz= applies to fixed and sliding "
                "only",
                RULE_TEXT());
        return SLUICE_ERULE;
    }
    if (r->tz_offset_ms < -SL_MAX_TZ_MS || r->tz_offset_ms > SL_MAX_TZ_MS) {
        sl_errf(err, err_len,
                "rule \"%s\": tz offset %lld ms is outside "
                "-14:00..+14:00",
                RULE_TEXT(), (long long)r->tz_offset_ms);
        return SLUICE_ERULE;
    }
    if (r->block_s > SL_MAX_PERIOD_MS / 1000 ||
        (r->block_extend && r->block_s == 0)) {
        sl_errf(err, err_len, "rule \"%s\": %s", RULE_TEXT(),
                r->block_s == 0 ? "block_extend needs a block (block_s 0)"
                                : "block is out of range 1..10000000 s");
        return SLUICE_ERULE;
    }
    /* Compared by division: capacity (up to 10^9) times period (up to
     * 10^10) would pass INT64_MAX. cap * P < 2^53 iff P <= (2^53 - 1) /
     * cap, both sides whole numbers. */
    if (r->period_ms > (SL_EXACT_BOUND - 1) / sl_rule_capacity(r)) {
        sl_errf(err, err_len,
                "rule \"%s\": capacity %lld times period %lld "
                "ms must stay below 2^53; use a shorter period or a smaller "
                "limit",
                RULE_TEXT(), (long long)sl_rule_capacity(r),
                (long long)r->period_ms);
        return SLUICE_ERULE;
    }
    return SLUICE_OK;
}
#undef RULE_TEXT

/* A composite may not hold two rules that share their state. */
static sluice_status check_duplicates(const sluice_ruleset *rs, char *err,
                                      size_t err_len)
{
    size_t i, j;

    for (i = 0; i < rs->count; i++) {
        for (j = i + 1; j < rs->count; j++) {
            const sluice_rule *a = &rs->rules[i], *b = &rs->rules[j];

            if (a->algorithm == b->algorithm && a->period_ms == b->period_ms &&
                a->tz_offset_ms == b->tz_offset_ms) {
                char txt[96];

                sl_rule_format(b, txt, sizeof(txt));
                sl_errf(err, err_len,
                        "rule \"%s\": a composite may not hold two rules "
                        "with the same algorithm, period and tz (rules %zu "
                        "and %zu share their state)",
                        txt, i + 1, j + 1);
                return SLUICE_ERULE;
            }
        }
    }
    return SLUICE_OK;
}

sluice_status sluice_ruleset_check(const sluice_ruleset *rs, char *err,
                                   size_t err_len)
{
    size_t i;
    sluice_status st;

    if (rs == NULL) {
        sl_errf(err, err_len, "rule: ruleset is NULL");
        return SLUICE_EINVAL;
    }
    if (rs->count < 1 || rs->count > SLUICE_MAX_RULES) {
        sl_errf(err, err_len, "rule: a ruleset holds 1..8 rules, not %zu",
                rs->count);
        return SLUICE_ERULE;
    }
    for (i = 0; i < rs->count; i++)
        if ((st = check_rule(&rs->rules[i], i, NULL, err, err_len)) !=
            SLUICE_OK)
            return st;
    return check_duplicates(rs, err, err_len);
}
