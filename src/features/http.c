/* SPDX-License-Identifier: BSD-3-Clause */
/* http.c - a decision as an HTTP answer: its status code, its header
 * fields per the IETF draft "RateLimit header fields for HTTP"
 * (draft-ietf-httpapi-ratelimit-headers, revision 11): RateLimit-Policy
 * lists the quota policies (one a rule), RateLimit the one that binds,
 * both Structured Field lists of Items whose value is a String naming the
 * policy, with the quota unit (qu) and the partition key (pk, hashed
 * unless the caller says it is public); Retry-After (RFC 9110) on a
 * denial that can fit; the legacy X-RateLimit-* trio on request; and an
 * RFC 9457 problem body. What to answer comes from the result's status
 * (docs/HTTP.md has the table): nothing a fail policy or a list made up
 * is written as a number. */
#include "algo.h"
#include "internal.h"
#include "store.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

/* How a result is answered. */
typedef enum answer {
    PASS_BARE,  /* admitted, nothing decided: no fields */
    PASS,       /* admitted by the rules: the fields */
    LIMITED,    /* 429: the fields, Retry-After, a quota-exceeded body */
    NEVER,      /* 413 or 400: the fields, a quota-exceeded body */
    FORBIDDEN,  /* 403: a deny-listed client */
    UNAVAILABLE /* 503: fail=closed, nothing decided */
} answer;

static answer answer_of(const sluice_result *res)
{
    if (res->status == SLUICE_DENYLISTED)
        return FORBIDDEN;
    if (!sluice_result_decided(res))
        return res->allowed ? PASS_BARE : UNAVAILABLE;
    if (res->allowed)
        return PASS;
    return res->retry_after_ms < 0 ? NEVER : LIMITED;
}

/* ----------------------------------------------------------- options */

/* The first version's size: what struct_size 0 means, and the least a
 * caller's struct may say it has. */
#define OPTIONS_V1 (offsetof(sluice_http_options, now_ms) + sizeof(int64_t))
#define ALL_FLAGS \
    (SLUICE_HTTP_RAW_PK | SLUICE_HTTP_LEGACY | SLUICE_HTTP_LEGACY_EPOCH)
#define UNIT_NAME_MAX 64

void sluice_http_options_init(sluice_http_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
}

/* A caller-named unit: 1..64 of A-Z a-z 0-9 . _ -, a String that needs
 * no escaping. */
static bool unit_name_ok(const char *u)
{
    size_t n;

    for (n = 0; u[n] != '\0'; n++) {
        char c = u[n];

        if (n == UNIT_NAME_MAX ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return n > 0;
}

/* The caller's options in *o, checked (NULL: the defaults); false for bad
 * ones. Only struct_size bytes are read; a larger struct than this
 * library's is taken when the rest is zero, the rule of sluice_options. */
static bool take_options(const sluice_http_options *in, sluice_http_options *o)
{
    size_t size, i;

    sluice_http_options_init(o);
    if (in == NULL)
        return true;
    size = in->struct_size == 0 ? OPTIONS_V1 : in->struct_size;
    if (size < OPTIONS_V1)
        return false;
    for (i = sizeof(*o); i < size; i++)
        if (((const unsigned char *)in)[i] != 0)
            return false;
    memcpy(o, in, size < sizeof(*o) ? size : sizeof(*o));
    o->struct_size = sizeof(*o);
    return (unsigned)o->unit <= SLUICE_UNIT_CONCURRENT_REQUESTS &&
           (o->flags & ~ALL_FLAGS) == 0 &&
           (o->partition_key != NULL || o->partition_key_len == 0) &&
           o->partition_key_len <= SLUICE_MAX_KEY_LEN &&
           (o->unit_name == NULL || unit_name_ok(o->unit_name)) &&
           ((o->flags & SLUICE_HTTP_LEGACY_EPOCH) == 0 || o->now_ms > 0);
}

/* ------------------------------------------------------------ values */

/* Everything one answer's fields and body are made of, checked. */
typedef struct answer_in {
    const sluice_ruleset *rules;
    const sluice_result *res;
    sluice_http_options o;
    const char *name; /* never NULL */
    size_t binding;   /* the rule that binds */
    answer a;
} answer_in;

/* Fills *in; false for NULL or bad arguments (rules may be NULL when
 * rules_needed is false: the status alone). */
static bool take(answer_in *in, const sluice_ruleset *rules,
                 const sluice_result *res, const sluice_http_options *opts,
                 bool rules_needed)
{
    if (res == NULL || !take_options(opts, &in->o))
        return false;
    in->a = answer_of(res);
    if (rules_needed && (in->a == PASS || in->a == LIMITED || in->a == NEVER) &&
        (rules == NULL || sluice_ruleset_check(rules, NULL, 0) != SLUICE_OK))
        return false;
    in->rules = rules;
    in->res = res;
    in->name =
        in->o.name != NULL && in->o.name[0] != '\0' ? in->o.name : "sluice";
    in->binding = rules != NULL && res->rule < rules->count ? res->rule : 0;
    return true;
}

/* A Structured Field String: printable ASCII, with backslash and quote
 * escaped; anything else becomes '_'. Rule i (0-based) of a composite
 * gets "-(i+1)" after the name. */
static void put_name(sl_text *t, const char *name, size_t i, size_t count)
{
    const char *c;

    sl_textf(t, "\"");
    for (c = name; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            sl_textf(t, "\\%c", *c);
        else if (*c >= 0x20 && *c < 0x7f)
            sl_textf(t, "%c", *c);
        else
            sl_textf(t, "_");
    }
    if (count > 1)
        sl_textf(t, "-%zu", i + 1);
    sl_textf(t, "\"");
}

/* Seconds, rounded up: a client that waits this long is not early. */
static long long seconds_up(int64_t ms)
{
    return ms <= 0 ? 0 : (long long)((ms + 999) / 1000);
}

/* A rule's quota policy: q, the capacity its remaining counts against
 * (a bucket's burst), over w, the time it takes to come back whole (a
 * bucket refills capacity at limit per period: capacity * period / limit;
 * a window's is its period). */
static void policy_of(const sluice_rule *r, long long *q, long long *w)
{
    int64_t cap = sl_rule_capacity(r), p = r->period_ms, l = r->limit;

    *q = (long long)cap;
    if (!sl_store_is_bucket(r) || cap == l)
        *w = seconds_up(p);
    else
        /* capacity * period < 2^53 (rule.c) */
        *w = seconds_up((cap * p + l - 1) / l);
}

/* The draft's t for the rule that binds (draft -11, 4.1.2: the effective
 * window, the time within which the client can use no more than r), in
 * ms. A window gives nothing back before its reset, or (sliding, log)
 * gives back gradually until then: its reset bounds t. A bucket gains a
 * unit every period / limit: with r of capacity b left, its reset counts
 * b - r units still to come, and t is the first of them, the reset less
 * the b - r - 1 after it (one unit's time when full), rounded up. A
 * denial's t is never past its wait: Retry-After SHOULD NOT come before
 * the end of the effective window (draft -11, section 6). */
static int64_t window_ms(const sluice_rule *r, const sluice_result *res)
{
    int64_t t = sluice_result_rule_reset_ms(res), p = r->period_ms, most;

    if (sl_store_is_bucket(r)) {
        int64_t b = sl_rule_capacity(r), left = res->remaining;
        /* (b - left - 1) * period < 2^53: capacity * period is (rule.c) */
        int64_t after = b - (left < 0 ? 0 : left > b ? b : left) - 1;

        t -= after * p / r->limit;
        most = (p + r->limit - 1) / r->limit;
    } else {
        most = r->algorithm == SLUICE_SLIDING ? 2 * p : p;
    }
    /* A composite's binding reset is rounded up to 11 significant bits
     * (SEMANTICS.md): t never passes what the rule can take, one unit's
     * time or a window's span (on clocks that agree), unless a block
     * holds the key longer. */
    if (r->block_s == 0 && t > most)
        t = most;
    if (!res->allowed && res->retry_after_ms >= 0 && res->retry_after_ms < t)
        t = res->retry_after_ms;
    return t;
}

static const char *const units[] = {NULL, "content-bytes",
                                    "concurrent-requests"};

/* pk's value: a Byte Sequence (RFC 9651), the key's bytes or the first 16
 * bytes of its SHA-256, in base64 between colons. */
static void put_pk(sl_text *t, const void *key, size_t key_len, bool raw)
{
    unsigned char digest[EVP_MAX_MD_SIZE], *b64;
    unsigned int dlen = 0;
    const unsigned char *bytes = key;
    size_t n = key_len;

    if (!raw) {
        if (EVP_Digest(key, key_len, digest, &dlen, EVP_sha256(), NULL) != 1)
            return; /* no pk rather than a wrong one */
        bytes = digest;
        n = dlen < 16 ? dlen : 16;
    }
    if ((b64 = sl_malloc(4 * ((n + 2) / 3) + 1)) == NULL)
        return;
    EVP_EncodeBlock(b64, bytes, (int)n);
    sl_textf(t, ";pk=:%s:", (const char *)b64);
    sl_free(b64);
}

static void put_policy(sl_text *t, const answer_in *in)
{
    const char *unit =
        in->o.unit_name != NULL ? in->o.unit_name : units[in->o.unit];
    long long q, w;
    size_t i;

    for (i = 0; i < in->rules->count; i++) {
        sl_textf(t, "%s", i > 0 ? ", " : "");
        put_name(t, in->name, i, in->rules->count);
        policy_of(&in->rules->rules[i], &q, &w);
        sl_textf(t, ";q=%lld", q);
        if (unit != NULL)
            sl_textf(t, ";qu=\"%s\"", unit);
        if (in->o.unit_name != NULL ||
            in->o.unit != SLUICE_UNIT_CONCURRENT_REQUESTS)
            sl_textf(t, ";w=%lld", w);
    }
}

/* Where the binding one stands: the remaining (the least over the rules,
 * the binding one's) and its effective window. */
static void put_limit(sl_text *t, const answer_in *in)
{
    put_name(t, in->name, in->binding, in->rules->count);
    sl_textf(t, ";r=%lld;t=%lld",
             (long long)(in->res->remaining > 0 ? in->res->remaining : 0),
             seconds_up(window_ms(&in->rules->rules[in->binding], in->res)));
    if (in->o.partition_key != NULL)
        put_pk(t, in->o.partition_key, in->o.partition_key_len,
               (in->o.flags & SLUICE_HTTP_RAW_PK) != 0);
}

static void put_retry(sl_text *t, const answer_in *in)
{
    long long s = seconds_up(in->res->retry_after_ms);

    sl_textf(t, "%lld", s > 0 ? s : 1);
}

static void put_x_limit(sl_text *t, const answer_in *in)
{
    sl_textf(t, "%lld",
             (long long)sl_rule_capacity(&in->rules->rules[in->binding]));
}

static void put_x_remaining(sl_text *t, const answer_in *in)
{
    sl_textf(t, "%lld",
             (long long)(in->res->remaining > 0 ? in->res->remaining : 0));
}

/* Until the binding rule is whole again: seconds, or the Unix time then. */
static void put_x_reset(sl_text *t, const answer_in *in)
{
    int64_t ms = sluice_result_rule_reset_ms(in->res);

    if (in->o.flags & SLUICE_HTTP_LEGACY_EPOCH)
        sl_textf(t, "%lld",
                 (long long)((in->o.now_ms + (ms > 0 ? ms : 0) + 999) / 1000));
    else
        sl_textf(t, "%lld", seconds_up(ms));
}

/* ------------------------------------------------------------ fields */

/* Where the fields go: CRLF text, or the caller's function. */
typedef struct sink {
    sl_text *text;
    sluice_http_field_fn fn;
    void *arg;
    sluice_status st; /* SLUICE_ENOMEM: a value found no memory */
    bool stop;        /* fn said so */
} sink;

#define VALUE_STACK 512

static void field(sink *s, const char *name,
                  void (*put)(sl_text *, const answer_in *),
                  const answer_in *in)
{
    char stack[VALUE_STACK], *v = stack;
    sl_text t = {stack, sizeof(stack), 0};

    if (s->stop || s->st != SLUICE_OK)
        return;
    if (s->text != NULL) {
        sl_textf(s->text, "%s: ", name);
        put(s->text, in);
        sl_textf(s->text, "\r\n");
        return;
    }
    put(&t, in);
    if (t.at >= sizeof(stack)) { /* long names, many rules: measured */
        if ((v = sl_malloc(t.at + 1)) == NULL) {
            s->st = SLUICE_ENOMEM;
            return;
        }
        t = (sl_text){v, t.at + 1, 0};
        put(&t, in);
    }
    s->stop = s->fn(s->arg, name, v) != 0;
    if (v != stack)
        sl_free(v);
}

static void walk(sink *s, const answer_in *in)
{
    if (in->a != PASS && in->a != LIMITED && in->a != NEVER)
        return; /* nothing decided, or no rule applied */
    field(s, "RateLimit-Policy", put_policy, in);
    field(s, "RateLimit", put_limit, in);
    if (in->a == LIMITED)
        field(s, "Retry-After", put_retry, in);
    if (in->o.flags & (SLUICE_HTTP_LEGACY | SLUICE_HTTP_LEGACY_EPOCH)) {
        field(s, "X-RateLimit-Limit", put_x_limit, in);
        field(s, "X-RateLimit-Remaining", put_x_remaining, in);
        field(s, "X-RateLimit-Reset", put_x_reset, in);
    }
}

int sluice_http_status(const sluice_result *res,
                       const sluice_http_options *opts)
{
    answer_in in;

    if (!take(&in, NULL, res, opts, false))
        return -1;
    switch (in.a) {
    case PASS_BARE:
    case PASS:
        return 0;
    case LIMITED:
        return 429;
    case NEVER:
        /* The cost is the content's size: 413 Content Too Large (RFC
         * 9110, 15.5.14). Any other cost (requests, tokens) is a request
         * the client must change: 400. Neither is worth a retry. */
        return in.o.unit_name == NULL && in.o.unit == SLUICE_UNIT_CONTENT_BYTES
                   ? 413
                   : 400;
    case FORBIDDEN:
        return 403;
    case UNAVAILABLE:
        return 503;
    }
    return -1;
}

size_t sluice_http_text(const sluice_ruleset *rules, const sluice_result *res,
                        const sluice_http_options *opts, char *buf, size_t len)
{
    sl_text t = {buf, buf != NULL ? len : 0, 0};
    sink s = {&t, NULL, NULL, SLUICE_OK, false};
    answer_in in;

    if (t.len > 0)
        t.buf[0] = '\0';
    if (!take(&in, rules, res, opts, true))
        return 0;
    walk(&s, &in);
    return t.at;
}

sluice_status sluice_http_each(const sluice_ruleset *rules,
                               const sluice_result *res,
                               const sluice_http_options *opts,
                               sluice_http_field_fn fn, void *arg)
{
    sink s = {NULL, fn, arg, SLUICE_OK, false};
    answer_in in;

    if (fn == NULL || !take(&in, rules, res, opts, true))
        return SLUICE_EINVAL;
    walk(&s, &in);
    return s.st;
}

/* -------------------------------------------------------------- body */

#define QUOTA_EXCEEDED                                                    \
    "{\"type\": \"https://iana.org/assignments/http-problem-types#quota-" \
    "exceeded\", \"title\": \"Request cannot be satisfied as assigned "   \
    "quota has been exceeded\", \"status\": %d, "

/* The policies the request exceeded: the caller's (sluice_violated), and
 * always the one that binds, which denied it. A Structured Field String
 * of printable ASCII, quote and backslash escaped, is also a JSON string:
 * the names of the fields. */
static void put_violated(sl_text *t, const answer_in *in)
{
    unsigned all = (1u << in->rules->count) - 1;
    unsigned v = (in->o.violated & all) | 1u << in->binding;
    size_t i, n = 0;

    sl_textf(t, "\"violated-policies\": [");
    for (i = 0; i < in->rules->count; i++) {
        if ((v >> i & 1u) == 0)
            continue;
        sl_textf(t, "%s", n++ > 0 ? ", " : "");
        put_name(t, in->name, i, in->rules->count);
    }
    sl_textf(t, "]}");
}

size_t sluice_http_body(const sluice_ruleset *rules, const sluice_result *res,
                        const sluice_http_options *opts, char *buf, size_t len)
{
    sl_text t = {buf, buf != NULL ? len : 0, 0};
    answer_in in;

    if (t.len > 0)
        t.buf[0] = '\0';
    if (!take(&in, rules, res, opts, true))
        return 0;
    switch (in.a) {
    case PASS_BARE:
    case PASS:
        break;
    case LIMITED:
        sl_textf(&t, QUOTA_EXCEEDED, 429);
        put_violated(&t, &in);
        break;
    case NEVER:
        sl_textf(&t, QUOTA_EXCEEDED, sluice_http_status(res, &in.o));
        sl_textf(&t, "\"detail\": \"The request's cost can never fit the "
                     "quota of the policies below.\", ");
        put_violated(&t, &in);
        break;
    case FORBIDDEN:
        sl_textf(&t, "{\"type\": \"about:blank\", \"title\": \"Forbidden\", "
                     "\"status\": 403, \"detail\": \"The client is "
                     "deny-listed.\"}");
        break;
    case UNAVAILABLE:
        sl_textf(&t, "{\"type\": \"about:blank\", \"title\": \"Service "
                     "Unavailable\", \"status\": 503, \"detail\": \"The rate "
                     "limiter could not decide the request.\"}");
        break;
    }
    return t.at;
}

/* --------------------------------------------------------- shorthands */

size_t sluice_http_headers(const sluice_ruleset *rules,
                           const sluice_result *res, const char *name,
                           char *buf, size_t len)
{
    sluice_http_options o;

    sluice_http_options_init(&o);
    o.name = name;
    return sluice_http_text(rules, res, &o, buf, len);
}

size_t sluice_http_fields(const sluice_ruleset *rules, const sluice_result *res,
                          const char *name, sluice_quota_unit unit,
                          const void *partition_key, size_t partition_key_len,
                          unsigned flags, char *buf, size_t len)
{
    sluice_http_options o;

    if ((flags & ~SLUICE_HTTP_RAW_PK) != 0) {
        if (buf != NULL && len > 0)
            buf[0] = '\0';
        return 0;
    }
    sluice_http_options_init(&o);
    o.name = name;
    o.unit = unit;
    o.partition_key = partition_key;
    o.partition_key_len = partition_key_len;
    o.flags = flags;
    return sluice_http_text(rules, res, &o, buf, len);
}

size_t sluice_http_problem(const sluice_ruleset *rules,
                           const sluice_result *res, const char *name,
                           char *buf, size_t len)
{
    sluice_http_options o;

    sluice_http_options_init(&o);
    o.name = name;
    return sluice_http_body(rules, res, &o, buf, len);
}
