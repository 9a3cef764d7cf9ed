/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice.h - distributed rate limiting on Redis, through proxies and
 * clusters, with or without Lua. The only public header. */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SLUICE_BUILDING) && defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

/* The version of this header. CMake's configure step fails if these differ
 * from project(VERSION), so the header, the library, sluice.pc and the CMake
 * package always agree. SLUICE_VERSION_NUMBER is (major << 16) | (minor << 8)
 * | patch, for #if: 0.1.0 is 0x000100. The library's own version, which may
 * be newer than the header a program was built with, is sluice_version(). */
#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0
#define SLUICE_VERSION       "0.1.0"
#define SLUICE_VERSION_NUMBER                                     \
    ((SLUICE_VERSION_MAJOR << 16) | (SLUICE_VERSION_MINOR << 8) | \
     SLUICE_VERSION_PATCH)

/* Documented caps. */
#define SLUICE_MAX_KEY_LEN 1024 /* bytes; keys are binary-safe */
#define SLUICE_MAX_RULES   8    /* rules in one composite */

/* Statuses. Append only, never renumber. */
#define SLUICE_STATUS_MAP(X)                                             \
    X(OK, "success")                                                     \
    X(EINVAL, "invalid argument")                                        \
    X(EKEY, "invalid key")                                               \
    X(ERULE, "invalid rule")                                             \
    X(ECOST, "invalid cost")                                             \
    X(EURL, "invalid URL")                                               \
    X(ETIME, "time outside the accepted range")                          \
    X(ENOMEM, "out of memory")                                           \
    X(ECONNECT, "could not connect to the backend")                      \
    X(ETIMEOUT, "the backend did not answer within the timeout")         \
    X(EIO, "connection to the backend lost")                             \
    X(ESERVER, "the server answered with an error")                      \
    X(EPROTO, "unexpected reply from the server")                        \
    X(EUNSUPPORTED, "not supported by this backend")                     \
    X(ECONTENDED, "the key changed under every retry; try again")        \
    X(CACHED, "denied by the local deny cache, without a round trip")    \
    X(SHADOWED, "admitted in shadow mode; the rules denied it")          \
    X(ENOLIMITER, "no such limiter: never defined, deleted, or expired") \
    X(RESERVED, "admitted from a reservation, without a round trip")     \
    X(ALLOWLISTED, "admitted: the client is allow-listed (unlimited)")   \
    X(DENYLISTED, "denied: the client is deny-listed")

typedef enum sluice_status {
#define SLUICE_X(name, msg) SLUICE_##name,
    SLUICE_STATUS_MAP(SLUICE_X)
#undef SLUICE_X
} sluice_status;

typedef enum sluice_algorithm {
    SLUICE_FIXED = 1, /* fixed window, aligned to the epoch plus tz */
    SLUICE_SLIDING,   /* sliding window counter (two weighted windows) */
    SLUICE_LOG,       /* sliding log, exact */
    SLUICE_TOKEN,     /* token bucket */
    SLUICE_GCRA       /* generic cell rate algorithm */
} sluice_algorithm;

/* One rule. Zero burst means "same as limit"; burst is only valid for
 * token and gcra, tz_offset_ms only for fixed and sliding.
 *
 * block_s (rule text ",block=15m"): a penalty. Once a request on the key is
 * denied by this rule (a denial that could fit later), every request on
 * the key whose ruleset has a block is denied until the block ends,
 * block_s seconds after that denial, for every client (the block lives on
 * the backend, beside the key's state); retry_after_ms says when it ends.
 * 0: none; 1 .. 10^7 s. block_extend (",extend=1"): a request made while
 * the key is blocked starts the block again. Both were added after 0.1.0
 * in what was padding (docs/ABI.md): use designated initializers. */
typedef struct sluice_rule {
    sluice_algorithm algorithm;
    unsigned block_s : 31;
    unsigned block_extend : 1;
    int64_t limit;        /* 1 .. 10^9 */
    int64_t period_ms;    /* 1 .. 10^10 */
    int64_t burst;        /* 0 or 1 .. 10^9 */
    int64_t tz_offset_ms; /* -14h .. +14h; windows start at k*P - offset */
} sluice_rule;

/* All-or-nothing composite: every rule admits and all are charged, or
 * nothing is. A single rule is a composite of one. */
typedef struct sluice_ruleset {
    size_t count; /* 1 .. SLUICE_MAX_RULES */
    sluice_rule rules[SLUICE_MAX_RULES];
} sluice_ruleset;

/* What a handle answers when its backend cannot decide a request: the
 * server unreachable, lost or too slow (ECONNECT, EIO, ETIMEOUT), an error
 * reply such as READONLY, OOM, LOADING, BUSY, MASTERDOWN or CLUSTERDOWN
 * (ESERVER), an unreadable reply (EPROTO), a key too hot for WATCH
 * (ECONTENDED). The result's status tells which failure was papered over
 * and sluice_errmsg() quotes the reply. Bad input, EUNSUPPORTED and ENOMEM
 * are always returned as errors. */
typedef enum sluice_fail_policy {
    SLUICE_FAIL_ERROR = 0, /* return the error status (default) */
    SLUICE_FAIL_OPEN,      /* admit, out->status names the failure */
    SLUICE_FAIL_CLOSED,    /* deny, out->status names the failure */
    /* decide on an in-process store instead, with the request's rules
     * scaled to this instance's share (fallback_instances); out->status
     * names the failure */
    SLUICE_FAIL_FALLBACK
} sluice_fail_policy;

typedef int64_t (*sluice_clock_fn)(void *ctx); /* ms since the epoch */

/* Zero-initialise, or better call sluice_options_init(); a zero field means
 * the default shown. A field's range is its URL option's (the timeouts and
 * ttl_floor_ms 1..86400000 ms), checked at open. Everything kept is copied
 * at open. Options given in the URL's query override these. The struct
 * grows at its end only (see docs/ABI.md): fields added by later versions
 * go after struct_size, and the library reads them only when struct_size
 * says the caller's struct has them, so a newer library never reads past
 * an older program's struct. */
typedef struct sluice_options {
    sluice_clock_fn clock;       /* default: CLOCK_REALTIME */
    void *clock_ctx;             /* passed to clock */
    bool server_clock;           /* Redis backends: decide on Redis TIME */
    uint32_t connect_timeout_ms; /* default 1000; one connect */
    uint32_t command_timeout_ms; /* default 250; one call, whole */
    uint32_t ttl_floor_ms;       /* default 1000: no stored key lives less */
    sluice_fail_policy fail;     /* default SLUICE_FAIL_ERROR */
    const char *key_prefix;      /* default "sluice:"; no braces */
    /* Credentials given outside the URL, so that a password need not sit
     * in argv or in a configuration string; copied at open. Credentials in
     * the URL win over these; mem:// ignores them. user NULL or "": AUTH
     * with the password alone (the default user, or twemproxy). */
    const char *user;     /* default none */
    const char *password; /* default none: no AUTH */
    /* sizeof(sluice_options) as the caller compiled it, stamped by
     * sluice_options_init(). 0 (a struct zeroed by hand) means the fields
     * above only. A value larger than this library knows is accepted when
     * the unknown fields are all zero, else sluice_open() returns
     * SLUICE_EINVAL. */
    size_t struct_size;
    /* Added after 0.1.0: read only from a struct stamped by
     * sluice_options_init().
     * The local deny cache (URL: deny_cache=N): 0 off (the default), else
     * the denials it keeps, 1..1000000. A request denied with a finite
     * retry_after is denied again in this process, without a round trip,
     * until that time has passed (out->status SLUICE_CACHED); see
     * docs/PRODUCTION.md for what it cannot see. */
    uint32_t deny_cache;
    /* Added after 0.1.0. The handle's counters (sluice_get_stats) are kept
     * unless this is true (URL: metrics=0). */
    bool no_metrics;
    /* Added after 0.1.0. Shadow (dry-run) mode (URL: shadow=1): every
     * acquire is decided and counted, and admitted; one the rules deny
     * comes back allowed with status SLUICE_SHADOWED, and is not charged,
     * as a denial is not. */
    bool shadow;
    /* Added after 0.1.0. With SLUICE_FAIL_FALLBACK (URL: fail=fallback
     * &fallback_instances=N): the instances that share the limit, 1..10000
     * (default 1); the fallback store decides each request with every
     * limit and burst divided by it, rounded up. */
    uint32_t fallback_instances;
    /* Added after 0.1.0. Named limiters (sluice_limiter_*): how long a
     * handle uses the rules it read before it reads them again, in ms
     * (URL: rules_cache_ms=N). 0: the default, 1000; negative (URL: 0):
     * never cached, the rules are read with every decision. A change made
     * elsewhere reaches this handle within that time. */
    int64_t rules_cache_ms;
    /* Added after 0.1.0. Reservations (URL: reserve_ms=H&reserve_share=S;
     * docs/SEMANTICS.md "Reservations"): 0 off (the default), else the
     * hold H in ms, 1..60000. An acquire on a key this handle asks often
     * also takes a batch of units from the backend, in the same round
     * trip, and later acquires on that key and ruleset are admitted from
     * it without a round trip (out->status SLUICE_RESERVED); every unit
     * admitted was charged first. A unit is used at most H ms after its
     * charge and never in another window than its own. reserve_share: the
     * most one handle holds on a key, in percent of the rule's capacity,
     * 1..50 (0: the default, 10). */
    int64_t reserve_ms;
    uint32_t reserve_share;
    /* Added after 0.1.0. A limits file (URL: limits_file=PATH; the URL's
     * wins), docs/LIMITS.md: read and checked at open, where a fault fails
     * the open (SLUICE_EINVAL, "limits_file=PATH: FILE:LINE:COL: ...");
     * the path is copied, the file read again only by
     * sluice_limits_reload. A decision by name whose limiter has no rules
     * stored defines it from the file, with the file's overrides, and
     * decides (a Redis restarted empty is not an outage); the backend's
     * rules win while they exist; each limiter's policy in the file is its
     * policy on this handle (docs/SEMANTICS.md, "Limits from a file"). */
    const char *limits_file;
} sluice_options;

/* A decision. status is SLUICE_OK when the backend decided; with a fail
 * policy of OPEN or CLOSED it is the failure that the policy answered;
 * SLUICE_CACHED when the deny cache answered (a denial, retry_after_ms
 * counting down to the time it fits, remaining as at the denial);
 * SLUICE_SHADOWED when shadow mode admitted what the rules denied (the
 * other fields are the denial's); SLUICE_RESERVED when the handle admitted
 * it from units it reserved (reserve_ms), without a round trip: remaining
 * is the backend's at the reservation plus the units this handle still
 * holds, the resets count down from it (docs/SEMANTICS.md).
 *
 * The rule that binds (rule): of the rules with the least remaining, on a
 * denial the one that waits longest (one that never fits first), else the
 * first. remaining is its remaining; limit is the capacity of the first
 * rule with the least remaining, which is the same rule but on a denial
 * where another rule has the same remaining. rule and rule_reset_code
 * were added after 0.1.0 in what was padding: the size and every offset
 * are unchanged (docs/ABI.md). A library before them leaves those bytes as
 * the caller had them: zero the struct before the call to read 0 there
 * (rule 0, its reset read as reset_after_ms). */
typedef struct sluice_result {
    sluice_status status;
    bool allowed;
    uint8_t rule; /* index in the ruleset of the rule that binds; 0 when no
                     rule decided (a fail policy's answer, a lease) */
    /* That rule's own reset, encoded to fit the padding: read it with
     * sluice_result_rule_reset_ms(). 0 means reset_after_ms; 0xffff that
     * no rule decided the numbers (sluice_result_decided()). */
    uint16_t rule_reset_code;
    int64_t limit;     /* capacity of the first rule with the least remaining */
    int64_t remaining; /* cost-1 requests still admitted now */
    int64_t retry_after_ms; /* -1 if allowed, or if the cost never fits */
    int64_t reset_after_ms; /* until back to full capacity; 0 if full */
} sluice_result;

/* One request of a batch. */
typedef struct sluice_request {
    const void *key;
    size_t key_len;
    const sluice_ruleset *rules;
    int64_t cost; /* 1 .. 10^9 */
} sluice_request;

typedef struct sluice sluice; /* opaque handle */

/* The library's version, e.g. "0.1.0", and its SLUICE_VERSION_NUMBER: those
 * of the library the program runs with, which may be newer than the header
 * it was built with. Static; never NULL. */
SLUICE_API const char *sluice_version(void);
SLUICE_API unsigned sluice_version_number(void);

/* Zeroes *opts (every field its default) and stamps struct_size. */
SLUICE_API void sluice_options_init(sluice_options *opts);

/* How long until the rule that binds (res->rule) is back to full
 * capacity, in ms: exact up to 2047 ms, and above that rounded up by less
 * than 0.1 % (never early, never past reset_after_ms), as the padding it
 * lives in holds 16 bits; reset_after_ms, the whole key's, when that is the
 * same or when no rule decided. For a single rule it is always reset_after_ms.
 * NULL: 0. */
SLUICE_API int64_t sluice_result_rule_reset_ms(const sluice_result *res);

/* Whether the numbers of res were decided (added after 0.1.0): by the
 * backend, the deny cache, a reservation, or, with fail=fallback, the
 * fallback store. False for the answers no rule decided, whose limit,
 * remaining and waits are placeholders: fail=open's and fail=closed's
 * (their status the failure), an allow- or deny-listed client's (and a
 * deny-listed one's in shadow mode), a reset's; and for NULL. */
SLUICE_API bool sluice_result_decided(const sluice_result *res);

/* Static text for a status; never NULL, never to be freed. */
SLUICE_API const char *sluice_strerror(sluice_status st);

/* A status's short name, for logs and metric labels: the status without
 * its E, in lower case ("connect", "timeout", "cached"; "invalid" for
 * SLUICE_EINVAL, "nomem" for SLUICE_ENOMEM, "ok"); "unknown" for a value
 * this library does not know. Static; never NULL. */
SLUICE_API const char *sluice_status_name(sluice_status st);

/* Parses "ALGO:LIMIT/PERIOD[,burst=N][,tz=+HH:MM]" joined by '+', e.g.
 * "fixed:1000/1d,tz=+08:00+fixed:100/1h". On error returns SLUICE_ERULE and
 * writes a message quoting the offending part into err (may be NULL). */
SLUICE_API sluice_status sluice_ruleset_parse(const char *text,
                                              sluice_ruleset *out, char *err,
                                              size_t err_len);

/* Writes rs as the text sluice_ruleset_parse() reads back to the same
 * ruleset ("fixed:1000/86400000ms,tz=+08:00+fixed:100/3600000ms"); returns
 * the length the whole text needs, as snprintf does. */
SLUICE_API size_t sluice_ruleset_format(const sluice_ruleset *rs, char *buf,
                                        size_t len);

/* Checks ranges and combinations of a ruleset built by hand. */
SLUICE_API sluice_status sluice_ruleset_check(const sluice_ruleset *rs,
                                              char *err, size_t err_len);

/* Opens a handle on a backend chosen by the URL:
 *   mem://            private in-process store
 *   mem://NAME        in-process store shared by every handle named NAME
 *   redis://[user:password@]host:port[/db]   Lua scripts by EVALSHA
 *   redis+multi://[user:password@]host:port[/db]   MULTI/EXEC, no scripts
 *   twemproxy://[password@]host:port   plain pipelines a proxy can parse
 *   redis-cluster://[user:password@]host:port[,host:port...]   slot-routed
 *   redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]
 *       the master that Redis Sentinel names (the Lua backend), asked of
 *       the sentinels listed before every connect and followed across
 *       failovers; redis+multi+sentinel:// (MULTI/EXEC), rediss+sentinel://
 *       (TLS); user:password are the data nodes', the sentinels' go in
 *       sentinel_user= and sentinel_password= (never shown in a message),
 *       sentinel_tls=0|1 (default: as the data nodes)
 * Query options, each once (a scheme in any case):
 *   ?timeout_ms=&connect_timeout_ms=&clock=local|server
 *   &fail=error|open|closed|fallback&prefix=&ttl_floor_ms=
 *   &deny_cache=&metrics=&shadow=&fallback_instances=&fallback_max_keys=
 *   &rules_cache_ms=&rules_stale_ms=&limits_file=&reserve_ms=&reserve_share=
 *   &max_reply_bytes=&socket=&tls=&tls_verify=&tls_ca_file=&tls_ca_dir=
 *   &tls_cert=&tls_key=&tls_server_name=&sentinel_user=&sentinel_password=
 *   &sentinel_tls=   (`sluice --help` says each)
 * opts may be NULL. On SLUICE_OK stores a handle in *out; else *out is NULL
 * and err (may be NULL) holds the reason. Free with sluice_close().
 * Checks the URL, the options and the TLS files; a server that is down,
 * slow or refusing never fails the open: it tries one connect for at most
 * connect_timeout_ms (a cluster: the slot map, then connects to the
 * masters it names, in parallel, for connect_timeout_ms plus
 * command_timeout_ms in all), and the first decisions answer by the fail
 * policy
 * (SLUICE_ECONNECT under fail=error). Every call then ends within
 * command_timeout_ms, a reconnect included. */
SLUICE_API sluice_status sluice_open(const char *url,
                                     const sluice_options *opts, sluice **out,
                                     char *err, size_t err_len);

/* NULL is a no-op. */
SLUICE_API void sluice_close(sluice *sl);

/* Decides and charges. A denial is not an error: SLUICE_OK with
 * out->allowed == false. On other statuses *out is untouched unless the fail
 * policy answered (then SLUICE_OK and out->status says why); see
 * sluice_errmsg(). */
SLUICE_API sluice_status sluice_acquire(sluice *sl, const void *key,
                                        size_t key_len,
                                        const sluice_ruleset *rules,
                                        int64_t cost, sluice_result *out);

/* sluice_acquire, and while it is denied with a retry_after that ends
 * before wait_ms (0..86400000) from now have passed, sleeps that long and
 * tries again: returns the first admission, or the last decision (a
 * denial whose wait would pass the deadline, one that never fits, a
 * failure). Never busy-waits: it sleeps each retry_after. */
SLUICE_API sluice_status sluice_acquire_wait(sluice *sl, const void *key,
                                             size_t key_len,
                                             const sluice_ruleset *rules,
                                             int64_t cost, int64_t wait_ms,
                                             sluice_result *out);

/* Returns what sluice_acquire would, and changes nothing. */
SLUICE_API sluice_status sluice_peek(sluice *sl, const void *key,
                                     size_t key_len,
                                     const sluice_ruleset *rules, int64_t cost,
                                     sluice_result *out);

/* Acquires as much of max_cost as fits right now, all or nothing across
 * the rules: grants g, the largest cost from 0 to max_cost that
 * sluice_acquire would admit (the least remaining over the rules), into
 * *granted. g >= 1: out is that acquire's admission, g charged. g == 0: out
 * is the denial of cost 1 (retry_after_ms: until 1 fits). Exact on every
 * algorithm and backend; see docs/SEMANTICS.md, "acquire at most". */
SLUICE_API sluice_status sluice_acquire_at_most(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    int64_t max_cost, int64_t *granted, sluice_result *out);

/* Gives back up to amount (0..10^9; 0 gives back nothing and succeeds, with
 * out the state as it is) of what the key's rules still count,
 * never more than a rule counts (a refund creates no capacity that was not
 * charged); docs/SEMANTICS.md, "refund", says where it goes on each
 * algorithm. out is the state it leaves, nothing charged: allowed, the
 * least remaining over the rules (and its limit), retry_after_ms -1,
 * reset_after_ms the largest. A failure is returned, never answered by
 * the fail policy. twemproxy:// returns SLUICE_EUNSUPPORTED (no atomic
 * read-modify-write), and redis+multi:// too for fixed, sliding and log
 * rules (it charges them before judging them; token and gcra refund). */
SLUICE_API sluice_status sluice_refund(sluice *sl, const void *key,
                                       size_t key_len,
                                       const sluice_ruleset *rules,
                                       int64_t amount, sluice_result *out);

/* Settles a budget reserved before the work against what it used
 * (reserved and actual each 0..10^9, else SLUICE_ECOST naming the value),
 * in one atomic step per key: actual < reserved refunds the difference
 * (exactly sluice_refund), actual == reserved answers the state as it is,
 * and actual > reserved charges the excess to every rule unjudged, past
 * the limit, leaving the key in deficit: later requests wait until it is
 * paid back, their retry_after_ms exact (docs/SEMANTICS.md, "settle"). out
 * is the state it leaves, as a refund's: allowed, the least remaining over
 * the rules (0 in deficit) and its limit, retry_after_ms -1, reset_after_ms
 * the largest, the deficit included. A failure is returned, never
 * answered by the fail policy. redis+multi:// charges every excess (under
 * WATCH); twemproxy:// charges that of fixed, sliding and log rules at
 * once, and returns SLUICE_EUNSUPPORTED with the reason for a bucket's and
 * for one that would pass a rule's ceiling (taken back); below, both
 * refund as sluice_refund does. */
SLUICE_API sluice_status sluice_settle(sluice *sl, const void *key,
                                       size_t key_len,
                                       const sluice_ruleset *rules,
                                       int64_t reserved, int64_t actual,
                                       sluice_result *out);

/* sluice_settle for a budget whose acquire answered *acquired (added after
 * 0.1.0): settled where it was charged, never by a refund on the backend
 * of what others spent there. An acquire the backend admitted (status
 * SLUICE_OK or SLUICE_RESERVED) is settled there, exactly as
 * sluice_settle. One the fail policy admitted was not charged on the
 * backend: with SLUICE_FAIL_FALLBACK it is settled on the fallback store,
 * which charged it (out->status: the acquire's failure); any other (the
 * open policy's admission, a denial, shadow mode, an allow-listed client)
 * charged nothing, and nothing is settled: SLUICE_OK, *out the acquire's
 * answer (its status says so; retry_after_ms -1), nothing counted. A
 * settle that failed (a timeout) may have been applied: see
 * docs/SEMANTICS.md ("settle") before sending it again. */
SLUICE_API sluice_status sluice_settle_after(sluice *sl, const void *key,
                                             size_t key_len,
                                             const sluice_ruleset *rules,
                                             const sluice_result *acquired,
                                             int64_t reserved, int64_t actual,
                                             sluice_result *out);

/* Forgets the key's state under every rule of the set. */
SLUICE_API sluice_status sluice_reset(sluice *sl, const void *key,
                                      size_t key_len,
                                      const sluice_ruleset *rules);

/* Acquires n independent requests in one round trip (pipelined on Redis).
 * Each out[i].status is that request's own status (bad input included);
 * the call returns SLUICE_OK when every request was answered, else the
 * first failure. */
SLUICE_API sluice_status sluice_acquire_many(sluice *sl,
                                             const sluice_request *reqs,
                                             size_t n, sluice_result *out);

/* Detail of the calling thread's last failure on this handle ("" if its
 * last call succeeded); valid until the thread's next call on it. Threads
 * sharing a handle each see their own. */
SLUICE_API const char *sluice_errmsg(const sluice *sl);

/* The rules the request of answer i exceeded (added after 0.1.0): bit k
 * set when rule k of its ruleset denied it, on its own, in the decision
 * the answer reports (a composite's every rule that denied, where
 * res->rule names one; the HTTP problem's "violated-policies"). Of the
 * calling thread's last call on this handle (answer 0 of a single call,
 * i of a batch), valid until the thread's next call on it; in an async
 * callback, of the call it answers. 0 for an admission, for an answer no
 * rule decided (fail=open or fail=closed, an allow- or deny-listed
 * client), for a failed call, and for i past the call's answers. The deny
 * cache answers with its denial's; shadow mode's admission keeps the
 * rules' denial's; fail=fallback's is the fallback store's. */
SLUICE_API unsigned sluice_violated(const sluice *sl, size_t i);

/* Name of the handle's backend: "memory", "evalsha", ... */
SLUICE_API const char *sluice_backend_name(const sluice *sl);

/* ------------------------------------------ on the caller's event loop
 *
 * A handle attached to a loop decides without blocking, in the style of
 * libcurl's multi-socket API: sluice tells the loop which sockets to watch
 * for what (watch) and when its next deadline is (timer); the loop calls
 * sluice_socket_action() when a socket is ready or the timer fires; each
 * decision ends in its done callback, called from sluice_socket_action(),
 * never from the call that started it. The sockets and timers are the
 * loop's; nothing on this path blocks: a host name is looked up on a
 * thread of its own, within connect_timeout_ms (docs/PRODUCTION.md). Ready
 * adapters: <sluice/libevent.h> and <sluice/libuv.h>. A loop may serve
 * several handles; an attached handle belongs to its loop's thread, and
 * its blocking calls return SLUICE_EINVAL. */
#define SLUICE_WATCH_IN       1  /* readable */
#define SLUICE_WATCH_OUT      2  /* writable */
#define SLUICE_SOCKET_TIMEOUT -1 /* sluice_socket_action's fd: the timer */

typedef struct sluice_loop {
    void *data; /* passed to each function */
    /* Watch fd for events (SLUICE_WATCH_IN | SLUICE_WATCH_OUT); 0: stop
     * watching it (sluice closes it next). Called with a new mask when it
     * changes. */
    void (*watch)(void *data, int fd, int events);
    /* Call sluice_socket_action(sl, SLUICE_SOCKET_TIMEOUT, 0) in
     * timeout_ms (0: as soon as the loop can; replaces any earlier
     * timer); -1: no timer. */
    void (*timer)(void *data, int64_t timeout_ms);
    /* The handle closes: free what the loop's side holds. May be NULL. */
    void (*cleanup)(void *data);
} sluice_loop;

/* A decision started on the loop has ended. st is what the blocking call
 * would have returned (the fail policy applied), res the n results (n is
 * 1 for acquire, peek and reset, whose result holds only the status), valid
 * during the call; the message is sluice_errmsg(sl) during the call.
 * sluice_close() runs the callback of each decision still in flight: on
 * mem://, which decides when the call starts, with that decision (charged);
 * on the Redis backends with SLUICE_EIO: a request still queued was never
 * sent and charged nothing, one written may have been decided and charged
 * (its outcome is unknown). */
typedef void (*sluice_done_fn)(sluice *sl, void *arg, sluice_status st,
                               const sluice_result *res, size_t n);

/* Attaches the handle to a loop (copied). Once only; every backend. */
SLUICE_API sluice_status sluice_attach(sluice *sl, const sluice_loop *loop);

/* fd became ready for events (SLUICE_WATCH_IN | SLUICE_WATCH_OUT; poll's
 * error and hang-up count as IN), or fd is SLUICE_SOCKET_TIMEOUT: the
 * timer fired. Runs the done callbacks of what ended. */
SLUICE_API void sluice_socket_action(sluice *sl, int fd, int events);

/* Start the decision; on SLUICE_OK, done(sl, arg, ...) runs exactly once,
 * later. Bad input is returned here (done never runs), as by the blocking
 * calls. The key, rules and requests are copied. */
SLUICE_API sluice_status sluice_acquire_async(sluice *sl, const void *key,
                                              size_t key_len,
                                              const sluice_ruleset *rules,
                                              int64_t cost, sluice_done_fn done,
                                              void *arg);
/* sluice_acquire_wait on the loop: a denial that fits before the
 * deadline sleeps on the loop's timer and tries again; done runs once,
 * with the first admission or the last decision. */
SLUICE_API sluice_status sluice_acquire_wait_async(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    int64_t cost, int64_t wait_ms, sluice_done_fn done, void *arg);
SLUICE_API sluice_status sluice_peek_async(sluice *sl, const void *key,
                                           size_t key_len,
                                           const sluice_ruleset *rules,
                                           int64_t cost, sluice_done_fn done,
                                           void *arg);
SLUICE_API sluice_status sluice_reset_async(sluice *sl, const void *key,
                                            size_t key_len,
                                            const sluice_ruleset *rules,
                                            sluice_done_fn done, void *arg);
/* A bad request of the batch gets its own status in res, as with
 * sluice_acquire_many(). */
SLUICE_API sluice_status sluice_acquire_many_async(sluice *sl,
                                                   const sluice_request *reqs,
                                                   size_t n,
                                                   sluice_done_fn done,
                                                   void *arg);

/* sluice_acquire_at_most on the loop: done gets what was granted (0 when
 * the call failed or was denied). */
typedef void (*sluice_granted_fn)(sluice *sl, void *arg, sluice_status st,
                                  const sluice_result *res, int64_t granted);
SLUICE_API sluice_status sluice_acquire_at_most_async(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    int64_t max_cost, sluice_granted_fn done, void *arg);
/* sluice_refund on the loop. */
SLUICE_API sluice_status sluice_refund_async(sluice *sl, const void *key,
                                             size_t key_len,
                                             const sluice_ruleset *rules,
                                             int64_t amount,
                                             sluice_done_fn done, void *arg);
/* sluice_settle on the loop. */
SLUICE_API sluice_status sluice_settle_async(sluice *sl, const void *key,
                                             size_t key_len,
                                             const sluice_ruleset *rules,
                                             int64_t reserved, int64_t actual,
                                             sluice_done_fn done, void *arg);

/* sluice_settle_after on the loop; *acquired is copied. */
SLUICE_API sluice_status sluice_settle_after_async(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    const sluice_result *acquired, int64_t reserved, int64_t actual,
    sluice_done_fn done, void *arg);

/* Decisions started on the loop and not yet ended. */
SLUICE_API size_t sluice_pending(const sluice *sl);

/* --------------------------------------------------- named limiters
 *
 * A named limiter's rules live in the backend, under the handle's key
 * prefix, so every service that uses the name decides by the same rules,
 * and changing them needs no redeploy (docs/SEMANTICS.md, "Named
 * limiters"). A name is 1..1000 bytes, binary-safe; a decision by name may
 * give a client id (per-client scope: each client its own state under the
 * shared rules; none: one state for all); the name and the client id
 * together take at most 1000 bytes. keepalive_ms: 0 keeps the limiter
 * until it is deleted; else it disappears once that long has passed
 * without its rules being read (each handle reads them at most every
 * rules_cache_ms while it decides by the name). A name with no rules
 * stored gives SLUICE_ENOLIMITER. Every call below also runs on the loop
 * (its _async form), so an attached handle manages its own limiters. */

/* Stores rules under name unless some are stored already; *stored (may be
 * NULL) receives what is stored then: these rules, or those that were. */
SLUICE_API sluice_status sluice_limiter_define(sluice *sl, const void *name,
                                               size_t name_len,
                                               const sluice_ruleset *rules,
                                               int64_t keepalive_ms,
                                               sluice_ruleset *stored);
/* Stores rules under name, replacing any: the state counted so far carries
 * over as for any changed limit. */
SLUICE_API sluice_status sluice_limiter_set(sluice *sl, const void *name,
                                            size_t name_len,
                                            const sluice_ruleset *rules,
                                            int64_t keepalive_ms);
/* The rules stored under name (read from the backend, not a cache), and
 * their keepalive_ms (may be NULL). */
SLUICE_API sluice_status sluice_limiter_get(sluice *sl, const void *name,
                                            size_t name_len,
                                            sluice_ruleset *rules,
                                            int64_t *keepalive_ms);
/* Deletes the rules stored under name (SLUICE_ENOLIMITER if none); the
 * clients' state expires on its own. */
SLUICE_API sluice_status sluice_limiter_delete(sluice *sl, const void *name,
                                               size_t name_len);
/* Calls fn with the name of each limiter kept until deleted (keepalive_ms
 * 0), in no set order, until fn returns nonzero (then SLUICE_OK); added
 * after 0.1.0. Those with a keep-alive come and go with use and are not
 * listed. The names are kept in the backend beside the limiters, in one
 * hash under the key prefix, read a page at a time (HSCAN, never SCAN: so
 * also through twemproxy and on a cluster): a name defined or deleted
 * while the list runs may be reported or not, and one may be reported
 * twice. Define and set of rules without a keep-alive list the name first
 * (one round trip more), a set with a keep-alive and a delete unlist it
 * after (one more). */
typedef int (*sluice_name_fn)(void *arg, const void *name, size_t name_len);
SLUICE_API sluice_status sluice_limiter_list(sluice *sl, sluice_name_fn fn,
                                             void *arg);
/* sluice_acquire, sluice_peek and sluice_reset by name, with the client id
 * (client NULL or client_len 0: the limiter's one shared state). */
SLUICE_API sluice_status sluice_limiter_acquire(sluice *sl, const void *name,
                                                size_t name_len,
                                                const void *client,
                                                size_t client_len, int64_t cost,
                                                sluice_result *out);
SLUICE_API sluice_status sluice_limiter_peek(sluice *sl, const void *name,
                                             size_t name_len,
                                             const void *client,
                                             size_t client_len, int64_t cost,
                                             sluice_result *out);
SLUICE_API sluice_status sluice_limiter_reset(sluice *sl, const void *name,
                                              size_t name_len,
                                              const void *client,
                                              size_t client_len);
/* The same on the loop: the rules are read first unless the handle read
 * them within rules_cache_ms (a name with none stored: done gets
 * SLUICE_ENOLIMITER). The name and client id are copied. */
SLUICE_API sluice_status sluice_limiter_acquire_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, int64_t cost, sluice_done_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_peek_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, int64_t cost, sluice_done_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_reset_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, sluice_done_fn done, void *arg);

/* Overrides (added after 0.1.0): a client of a named limiter may have
 * its own rules in place of the limiter's (its state stays under its own
 * key, so switching between rules carries its counts over, as a changed
 * limit does), be allow-listed (SLUICE_OVERRIDE_UNLIMITED: admitted with
 * status SLUICE_ALLOWLISTED, nothing counted nor read) or deny-listed
 * (SLUICE_OVERRIDE_DENY: denied with status SLUICE_DENYLISTED,
 * retry_after_ms -1). Both answers have limit, remaining and
 * reset_after_ms 0 and rule 0; in shadow mode an acquire of a deny-listed
 * client is admitted with SLUICE_SHADOWED. An override lives only while
 * the limiter's rules do (deleting the limiter deletes them; they share
 * its keep-alive). It is read with the rules, in the same round trip, and
 * cached with them for rules_cache_ms, per client (at most 256 clients a
 * handle, the least used dropped): a change made through the handle
 * applies to its next decision, one made elsewhere within rules_cache_ms.
 * docs/SEMANTICS.md, "Named limiters". Blocking, or on the loop (below). */
typedef enum sluice_override_kind {
    SLUICE_OVERRIDE_NONE = 0,  /* none: the limiter's rules apply */
    SLUICE_OVERRIDE_RULES,     /* the client's own rules */
    SLUICE_OVERRIDE_UNLIMITED, /* allow-listed */
    SLUICE_OVERRIDE_DENY       /* deny-listed */
} sluice_override_kind;

typedef struct sluice_limiter_override {
    sluice_override_kind kind;
    sluice_ruleset rules; /* SLUICE_OVERRIDE_RULES only */
} sluice_limiter_override;

/* Stores the override of client (1 byte or more; with the name at most
 * 1000 bytes) under name, replacing any. SLUICE_ENOLIMITER when name has
 * no rules; SLUICE_EINVAL for a kind that is not RULES, UNLIMITED or
 * DENY; SLUICE_ERULE for bad rules. */
SLUICE_API sluice_status sluice_limiter_override_set(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, const sluice_limiter_override *ov);
/* The override of client, read from the backend (kind NONE: none). */
SLUICE_API sluice_status sluice_limiter_override_get(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, sluice_limiter_override *ov);
/* Deletes the override of client; SLUICE_OK whether or not there was
 * one, *found (may be NULL) says. */
SLUICE_API sluice_status sluice_limiter_override_delete(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, bool *found);
/* Calls fn for each override of name, in no set order, until fn returns
 * nonzero (then SLUICE_OK). The backend is read a page at a time (HSCAN
 * on Redis, never SCAN): an override set or deleted while the list runs
 * may be reported or not, and one may be reported twice. */
typedef int (*sluice_override_fn)(void *arg, const void *client,
                                  size_t client_len,
                                  const sluice_limiter_override *ov);
SLUICE_API sluice_status sluice_limiter_override_list(sluice *sl,
                                                      const void *name,
                                                      size_t name_len,
                                                      sluice_override_fn fn,
                                                      void *arg);

/* The admin calls on the loop (added after 0.1.0): define, set, get,
 * delete, and override set, get, delete and list, as the blocking calls
 * above decide them, on a handle attached to a loop. Each copies its
 * input and returns at once; bad input, a NULL done, a handle not
 * attached or closing are returned by the call (done never runs, as for
 * the decisions' _async forms). Else done(sl, arg, st, info) runs exactly
 * once, from the loop (sluice_socket_action), never from the call: st is
 * what the blocking call returns (SLUICE_ENOLIMITER for a name with no
 * rules; the backend's failure as is: the fail policy never answers for
 * an admin call), the message sluice_errmsg(sl) during the callback. A
 * call's round trips (a read of the rules before an override is stored;
 * a second read where the plain backends must send a keep-alive; a list's
 * pages) share one budget, timeout_ms from its start. Counted in
 * sluice_pending() until done has run; sluice_close() runs done of each
 * still in flight with SLUICE_EIO (a write may or may not have been
 * applied). */
typedef struct sluice_limiter_info {
    size_t struct_size; /* the library's sizeof: fields past it are absent */
    const void *name;   /* the call's name, valid during the callback */
    size_t name_len;
    const void *client; /* an override call's client id (else NULL) */
    size_t client_len;
    /* get, define, set: rules are stored (true with SLUICE_OK); delete:
     * there were some; override get: the client has an override (kind
     * not NONE); override set: it was stored; override delete: there was
     * one. */
    bool found;
    /* get, define, set: the rules stored then (define: these, or those
     * that were), and their keepalive_ms. */
    sluice_ruleset rules;
    int64_t keepalive_ms;
    /* override get: the client's (kind NONE: none); override set: the one
     * stored. */
    sluice_limiter_override override;
} sluice_limiter_info;

typedef void (*sluice_limiter_fn)(sluice *sl, void *arg, sluice_status st,
                                  const sluice_limiter_info *info);

SLUICE_API sluice_status sluice_limiter_define_async(
    sluice *sl, const void *name, size_t name_len, const sluice_ruleset *rules,
    int64_t keepalive_ms, sluice_limiter_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_set_async(
    sluice *sl, const void *name, size_t name_len, const sluice_ruleset *rules,
    int64_t keepalive_ms, sluice_limiter_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_get_async(sluice *sl, const void *name,
                                                  size_t name_len,
                                                  sluice_limiter_fn done,
                                                  void *arg);
SLUICE_API sluice_status sluice_limiter_delete_async(sluice *sl,
                                                     const void *name,
                                                     size_t name_len,
                                                     sluice_limiter_fn done,
                                                     void *arg);
SLUICE_API sluice_status sluice_limiter_override_set_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, const sluice_limiter_override *ov,
    sluice_limiter_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_override_get_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, sluice_limiter_fn done, void *arg);
SLUICE_API sluice_status sluice_limiter_override_delete_async(
    sluice *sl, const void *name, size_t name_len, const void *client,
    size_t client_len, sluice_limiter_fn done, void *arg);
/* each(arg, client, client_len, ov) for each override, from the loop, as
 * sluice_limiter_override_list calls it (nonzero: stop, then SLUICE_OK);
 * then done(sl, arg, st, info) once. */
SLUICE_API sluice_status sluice_limiter_override_list_async(
    sluice *sl, const void *name, size_t name_len, sluice_override_fn each,
    sluice_limiter_fn done, void *arg);

/* ------------------------------------------------------- policies
 *
 * A decision's policy (added after 0.1.0): what answers when the backend
 * cannot (the fail policy), the deny cache, reservations, shadow mode,
 * and how it is answered over HTTP. A handle's options give its own; a
 * named limiter may have one in the handle (sluice_limiter_policy_set),
 * and a decision by key may pass one (sluice_acquire_with,
 * sluice_acquire_many_with): the call's, else the limiter's, else the
 * handle's, group by group (docs/SEMANTICS.md, "Policies"). So one handle,
 * on one connection, serves limiters that answer each by its own policy.
 * A policy that asks for what the handle was opened without makes it
 * then, once: a deny cache of SLUICE_POLICY_DENY_CACHE_SIZE denials,
 * reservations' table, the fallback store (fail=fallback). */

/* What a quota counts (the draft's "qu"; the HTTP helpers below). */
typedef enum sluice_quota_unit {
    SLUICE_UNIT_REQUESTS = 0,       /* the draft's default: no qu written */
    SLUICE_UNIT_CONTENT_BYTES,      /* qu="content-bytes": cost is bytes */
    SLUICE_UNIT_CONCURRENT_REQUESTS /* qu="concurrent-requests" (leases):
                                       no w, a concurrency has no window */
} sluice_quota_unit;

/* The groups of a policy, for sluice_policy.set. */
#define SLUICE_POLICY_FAIL       (1u << 0) /* fail (and fallback_instances) */
#define SLUICE_POLICY_DENY_CACHE (1u << 1) /* deny_cache */
#define SLUICE_POLICY_RESERVE    (1u << 2) /* reserve_ms, reserve_share */
#define SLUICE_POLICY_SHADOW     (1u << 3) /* shadow */
#define SLUICE_POLICY_HTTP       (1u << 4) /* http_name, unit, unit_name */

/* The denials a deny cache made for a policy keeps (a handle opened with
 * deny_cache=N keeps N). */
#define SLUICE_POLICY_DENY_CACHE_SIZE 10000

/* Zero it with sluice_policy_init(), which stamps struct_size, then set
 * the groups given in set and their fields; a group not in set is the
 * handle's, and its fields are not read. Grows at its end only, as
 * sluice_options does (docs/ABI.md): struct_size 0 means this first
 * layout; a larger struct whose bytes past this library's are not all
 * zero is refused. Copied by every call that takes it. */
typedef struct sluice_policy {
    size_t struct_size; /* stamped by sluice_policy_init() */
    unsigned set;       /* SLUICE_POLICY_* bits: the groups given */
    sluice_fail_policy fail;
    /* With SLUICE_FAIL_FALLBACK: the instances that share the limit,
     * 1..10000; 0: the handle's fallback_instances (1 unless set). */
    uint32_t fallback_instances;
    /* Whether the deny cache answers this policy's acquires and peeks;
     * the cache (its size) is the handle's, shared by every policy. */
    bool deny_cache;
    int64_t reserve_ms;     /* 0 off, else the hold 1..60000 ms */
    uint32_t reserve_share; /* 1..50 percent; 0: the default, 10 */
    bool shadow;
    /* The HTTP policy's name (sluice_http_options.name), NUL-terminated:
     * 1..63 bytes of printable ASCII; "": the default, "sluice". */
    char http_name[64];
    sluice_quota_unit unit; /* as sluice_http_options.unit */
    /* As sluice_http_options.unit_name, NUL-terminated: 1..64 of A-Z a-z
     * 0-9 '.' '_' '-'; "": none (unit's). */
    char unit_name[65];
} sluice_policy;

/* Zeroes *p (no group set: the handle's policy) and stamps struct_size. */
SLUICE_API void sluice_policy_init(sluice_policy *p);

/* The policy of the decisions by name on this handle (acquire, peek and
 * reset, blocking and on the loop): kept in the handle, not in the
 * backend, as its URL is (a deployment's choice); p copied, NULL or no
 * group set removes it. It applies from the next decision by the name
 * that starts; one in flight keeps the policy it started with. Makes what
 * the policy asks for that the handle lacks (SLUICE_ENOMEM when it cannot;
 * nothing changed then). Bad fields: SLUICE_EINVAL, the message quoting
 * the field and its value. Any thread, also while others decide, and on a
 * handle attached to a loop (it does no I/O). */
SLUICE_API sluice_status sluice_limiter_policy_set(sluice *sl, const void *name,
                                                   size_t name_len,
                                                   const sluice_policy *p);
/* The policy decisions by name get on this handle, every field filled
 * (the handle's where the limiter's policy has no group), and set the
 * groups the limiter's own policy gives (0: none). out->struct_size says
 * how much of *out the caller has (sluice_policy_init() first). */
SLUICE_API sluice_status sluice_limiter_policy_get(sluice *sl, const void *name,
                                                   size_t name_len,
                                                   sluice_policy *out);
/* Reads the handle's limits file (limits_file=) again (added after
 * 0.1.0): on success its limiters replace the last file's for every
 * decision that starts after (one in flight keeps the form it started
 * with), and its policies replace the last file's (a policy the last file
 * gave to a limiter that left the file is removed; one set by
 * sluice_limiter_policy_set since is replaced, for the limiters of the
 * file). On a fault nothing changes: the last good file stays, and
 * SLUICE_EINVAL with err (may be NULL) saying why ("FILE:LINE:COL: ...").
 * SLUICE_EINVAL for a handle opened without a file. No I/O on the
 * backend: stored rules are never written by a reload (the file only
 * defines what is missing; `sluice limiter apply` stores it). Any
 * thread, also while others decide, and on a handle attached to a loop
 * (it reads the file in the calling thread). */
SLUICE_API sluice_status sluice_limits_reload(sluice *sl, char *err,
                                              size_t err_len);
/* sluice_acquire and sluice_acquire_async with a policy for this call (p
 * copied; NULL: the handle's): the groups it sets win over the handle's.
 * A bad policy is bad input (SLUICE_EINVAL, nothing counted). */
SLUICE_API sluice_status sluice_acquire_with(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    int64_t cost, const sluice_policy *p, sluice_result *out);
SLUICE_API sluice_status sluice_acquire_with_async(
    sluice *sl, const void *key, size_t key_len, const sluice_ruleset *rules,
    int64_t cost, const sluice_policy *p, sluice_done_fn done, void *arg);
/* sluice_acquire_many and sluice_acquire_many_async with one policy for
 * every request of the batch, as sluice_acquire_with. */
SLUICE_API sluice_status sluice_acquire_many_with(sluice *sl,
                                                  const sluice_request *reqs,
                                                  size_t n,
                                                  const sluice_policy *p,
                                                  sluice_result *out);
SLUICE_API sluice_status sluice_acquire_many_with_async(
    sluice *sl, const sluice_request *reqs, size_t n, const sluice_policy *p,
    sluice_done_fn done, void *arg);

/* ---------------------------------------------- concurrency limiter
 *
 * Leases on a key: at most max_holders live at once, each for lease_ms
 * from its acquire on the deciding clock unless released before; a lease
 * whose holder died ends by itself (docs/SEMANTICS.md, "Leases"). Exact:
 * never more than max_holders live leases, on every backend (twemproxy://
 * and redis+multi:// may deny one that would fit while others race on
 * the key, never admit one that does not). Blocking, or on the loop. */
typedef struct sluice_lease {
    char id[24]; /* made by sluice_lease_acquire; NUL-terminated */
} sluice_lease;

/* Takes a lease when fewer than max_holders (1..10^9) are live: out is an
 * admission (limit max_holders, remaining the leases still free,
 * reset_after_ms until every live lease has ended) and *lease names it;
 * or a denial whose retry_after_ms is when the first live lease ends.
 * lease_ms: 1..10^10. */
SLUICE_API sluice_status sluice_lease_acquire(
    sluice *sl, const void *key, size_t key_len, int64_t max_holders,
    int64_t lease_ms, sluice_lease *lease, sluice_result *out);
/* Ends a lease before its time (one that ended already: nothing to do). */
SLUICE_API sluice_status sluice_lease_release(sluice *sl, const void *key,
                                              size_t key_len,
                                              const sluice_lease *lease);
/* The same on the loop. *lease is named before the call returns; it is
 * held when done gets an admission. A release's res holds only the
 * status, as a reset's. */
SLUICE_API sluice_status sluice_lease_acquire_async(
    sluice *sl, const void *key, size_t key_len, int64_t max_holders,
    int64_t lease_ms, sluice_lease *lease, sluice_done_fn done, void *arg);
SLUICE_API sluice_status sluice_lease_release_async(sluice *sl, const void *key,
                                                    size_t key_len,
                                                    const sluice_lease *lease,
                                                    sluice_done_fn done,
                                                    void *arg);

/* ---------------------------------------------------------- metrics
 *
 * A handle's counters since it opened, kept unless no_metrics (metrics=0):
 * relaxed atomic increments and two clock reads per call. Every request
 * counts once, in one of allowed, denied, peeks, resets or failures. */
#define SLUICE_STATS_STATUSES 32 /* failures[] by status value */
#define SLUICE_STATS_BUCKETS  24 /* latency_us[]: powers of two */

typedef struct sluice_stats {
    uint64_t allowed;         /* acquires admitted by a decision */
    uint64_t denied;          /* acquires denied by a decision or the cache */
    uint64_t near_limit;      /* of allowed: remaining <= 20 % of the limit */
    uint64_t peeks;           /* peeks answered */
    uint64_t resets;          /* resets done */
    uint64_t deny_cache_hits; /* of denied (and peeks): by the deny cache */
    /* Requests the backend could not decide, by that status (a fail
     * policy's answers included; bad input is counted as its status too),
     * and of those, the fail policy's answers. */
    uint64_t failures[SLUICE_STATS_STATUSES];
    uint64_t policy_answers;
    uint64_t backend_requests; /* requests that went to the backend */
    uint64_t round_trips;      /* writes that carried them (Redis) */
    /* Calls (a batch is one) by duration: latency_us[0] under 2 us,
     * latency_us[k] from 2^k to 2^(k+1) us, the last one everything
     * above; their count and their sum. */
    uint64_t latency_us[SLUICE_STATS_BUCKETS];
    uint64_t calls;
    uint64_t latency_sum_us;
    uint64_t shadow_admitted; /* of denied: admitted by shadow mode */
    uint64_t refunds;         /* refunds made (sluice_refund) */
    /* Added after 0.1.0: reservations (reserve_ms). */
    uint64_t reserve_admitted; /* of allowed: admitted without a round trip */
    uint64_t reserve_batches;  /* batches asked of the backend */
    uint64_t reserve_asked;    /* units those batches asked */
    uint64_t reserve_granted;  /* units they were granted (charged) */
    uint64_t reserve_refunded; /* units given back unused */
    uint64_t reserve_lapsed;   /* units dropped unused, not given back */
    /* Added after 0.1.0: overrides of named limiters. */
    uint64_t allowlisted; /* of allowed (and peeks): allow-listed clients */
    uint64_t denylisted;  /* of denied (and peeks): deny-listed clients */
    /* Added after 0.1.0: Redis Sentinel (redis+sentinel://). */
    uint64_t failovers; /* moves to another master the sentinels named */
} sluice_stats;

/* Copies the counters into out, size bytes of it (sizeof(*out) as the
 * caller compiled it: the struct grows at its end only). SLUICE_EINVAL
 * when the handle keeps none (metrics=0). Any thread. */
SLUICE_API sluice_status sluice_get_stats(sluice *sl, sluice_stats *out,
                                          size_t size);

/* Writes the counters in the Prometheus text format (version 0.0.4) into
 * buf, with the label handle="<name>" (name may be NULL: no label);
 * returns the length the whole text needs, as snprintf does (buf holds it
 * when that is below len). size as for sluice_get_stats. One handle's
 * text: two of them one after the other are not a valid page (each
 * family's HELP twice); for several handles, sluice_metrics_page. A name
 * is written as it is when it is UTF-8, a backslash as \\ and a control
 * or a byte that is not UTF-8 as \xHH, then the format's escapes. */
SLUICE_API size_t sluice_stats_prometheus(const sluice_stats *st, size_t size,
                                          const char *name, char *buf,
                                          size_t len);

/* Added after 0.1.0. The counters of one named limiter's requests in a
 * handle (sluice_limiter_acquire, _peek, _reset, blocking or on the
 * loop): each counts once, as in sluice_stats, in one of allowed, denied,
 * peeks, resets or failures (one refused for its name or client id,
 * empty or too long, counts by the handle only). A handle keeps the
 * counters of SLUICE_STATS_LIMITERS names apart, the first it meets; the
 * requests of any other name (or of one met when memory ran out) count
 * together, as the overflow. Names are the caller's configuration, never
 * a client id, so the set is bounded (docs/PRODUCTION.md, "Metrics"). */
#define SLUICE_STATS_LIMITERS 256

typedef struct sluice_limiter_stats {
    uint64_t allowed;          /* acquires admitted by a decision */
    uint64_t denied;           /* acquires denied by a decision or the cache */
    uint64_t near_limit;       /* of allowed: remaining <= 20 % of the limit */
    uint64_t peeks;            /* peeks answered */
    uint64_t resets;           /* resets done */
    uint64_t deny_cache_hits;  /* of denied (and peeks): by the deny cache */
    uint64_t reserve_admitted; /* of allowed: from a reservation, locally */
    uint64_t shadow_admitted;  /* of denied: admitted by shadow mode */
    uint64_t allowlisted;      /* of allowed (and peeks): allow-listed */
    uint64_t denylisted;       /* of denied (and peeks): deny-listed */
    /* Requests not decided, by status (the fail policy's answers, an
     * undefined limiter's SLUICE_ENOLIMITER and bad input included), and
     * of those, the fail policy's answers. */
    uint64_t failures[SLUICE_STATS_STATUSES];
    uint64_t policy_answers;
} sluice_limiter_stats;

/* Copies the counters of the limiter name (name_len bytes) into out, size
 * bytes of it as for sluice_get_stats: zero for a name this handle has
 * not counted. name NULL: the overflow's. SLUICE_EINVAL when the handle
 * keeps no counters (metrics=0). Any thread. */
SLUICE_API sluice_status sluice_get_limiter_stats(sluice *sl, const void *name,
                                                  size_t name_len,
                                                  sluice_limiter_stats *out,
                                                  size_t size);

/* Flags of sluice_metrics_page. */
#define SLUICE_METRICS_NO_LIMITERS                            \
    1u /* leave out the counters by limiter (sluice_limiter_* \
          families) */

/* Added after 0.1.0. One metrics page for several handles, in the
 * Prometheus text format (version 0.0.4): each family's HELP and TYPE
 * once, then its samples of every handle, handles[i] labelled
 * handle="names[i]", and the counters of each named limiter labelled
 * limiter="NAME" (the overflow's limiter_overflow="true"); the names and
 * labels are in docs/PRODUCTION.md, "Metrics". names may be NULL only
 * when n is 1 (no handle label); else each is a distinct non-empty
 * string. A handle with metrics=0 has no samples. flags: 0 or
 * SLUICE_METRICS_NO_LIMITERS. Returns the length the whole text needs, as
 * snprintf does (buf holds it when that is below len), read at this call:
 * the counters grow, so size the buffer with room to spare and call again
 * when the length returned is len or more. 0, nothing written, for a NULL
 * handle, a missing, empty or repeated name, or an unknown flag. Any
 * thread; not while one of the handles closes. */
SLUICE_API size_t sluice_metrics_page(sluice *const *handles,
                                      const char *const *names, size_t n,
                                      unsigned flags, char *buf, size_t len);

/* ------------------------------------------------------------- HTTP
 *
 * A decision as an HTTP answer, per the IETF draft "RateLimit header
 * fields for HTTP" (draft-ietf-httpapi-ratelimit-headers-11) and RFC 9457
 * (problem details); docs/HTTP.md has the table of answers by status.
 * Pure formatting: no handle, any thread. The answer follows res->status:
 *   admitted by the rules (OK, RESERVED, SHADOWED, or the fallback
 *     store's answer with fail=fallback): the service answers as it
 *     would, with the fields;
 *   denied, fits later (OK, CACHED, fail=fallback): 429, the fields,
 *     Retry-After, a quota-exceeded problem;
 *   denied, the cost can never fit (retry_after_ms -1): 413 when the
 *     quota counts content bytes, else 400; the fields but no
 *     Retry-After, a quota-exceeded problem;
 *   a deny-listed client: 403, no fields, an about:blank problem;
 *   an allow-listed client, or fail=open's admission: no fields;
 *   fail=closed's denial: 503, no fields, an about:blank problem.
 * Fail-policy and listed answers carry no numbers: none was decided
 * (sluice_result_decided()). The fields, in this order:
 *   RateLimit-Policy: "NAME";q=QUOTA;w=WINDOW_S  (one item a rule; a
 *                     composite's are "NAME-1", "NAME-2", ...; q is what
 *                     remaining counts against, a bucket's burst, and w
 *                     the time it takes to come back whole: a window's
 *                     period, a bucket's burst * period / limit; with
 *                     qu="UNIT" unless the unit is requests, and no w
 *                     for concurrent requests)
 *   RateLimit: "NAME";r=REMAINING;t=WINDOW_S     (res->rule, the rule
 *                     that binds; t the draft's effective window, the time
 *                     within which r is all the client can use: a
 *                     window's reset (sluice_result_rule_reset_ms), a
 *                     bucket's next unit; on a denial never past
 *                     Retry-After; pk=:BASE64: with a partition key)
 *   Retry-After: SECONDS                         (a denial that can fit:
 *                     retry_after_ms, the wait of the rule that denies)
 *   X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (opt-in,
 *                     SLUICE_HTTP_LEGACY: the binding rule's q, r, and
 *                     the seconds until it is whole again, or with
 *                     SLUICE_HTTP_LEGACY_EPOCH that time as a Unix time)
 * Seconds are rounded up. */

/* What a quota counts (the draft's "qu"): sluice_quota_unit, defined with
 * the policies above. */

/* Flags of the HTTP helpers. */
#define SLUICE_HTTP_RAW_PK                         \
    1u /* pk is the partition key's own bytes, not \
          its hash: only for keys that are public */
#define SLUICE_HTTP_LEGACY       2u /* the X-RateLimit-* trio as well */
#define SLUICE_HTTP_LEGACY_EPOCH 4u /* X-RateLimit-Reset a Unix time */

/* The media type of the bodies sluice_http_body writes. */
#define SLUICE_HTTP_PROBLEM_TYPE "application/problem+json"

/* How to answer (added after 0.1.0): zero it with
 * sluice_http_options_init(), which stamps struct_size; a zero field
 * means the default shown. Grows at its end only, as sluice_options does
 * (docs/ABI.md): the library reads struct_size bytes of it (0: those of
 * this first version), and refuses a larger struct whose bytes past its
 * own are not all zero. Nothing is kept after a call. */
typedef struct sluice_http_options {
    size_t struct_size;
    const char *name;       /* the policy's name; default (NULL or "")
                               "sluice"; a String: printable ASCII, other
                               bytes written as '_' */
    sluice_quota_unit unit; /* default SLUICE_UNIT_REQUESTS */
    /* A unit the caller names (qu="tokens" for a budget of LLM tokens),
     * in place of unit's: 1..64 of A-Z a-z 0-9 '.' '_' '-'. The draft's
     * registry holds requests, content-bytes and concurrent-requests;
     * another name is the service's own. Default NULL: unit's. */
    const char *unit_name;
    /* The partition key (pk): the first 16 bytes of its SHA-256, never
     * the key itself unless flags has SLUICE_HTTP_RAW_PK. NULL: none. */
    const void *partition_key;
    size_t partition_key_len; /* 0..SLUICE_MAX_KEY_LEN */
    unsigned flags;           /* SLUICE_HTTP_*; default 0 */
    /* The rules the request exceeded, bit i for rule i
     * (sluice_violated() after the decision): the problem's
     * "violated-policies". 0: the rule that binds alone, which is all a
     * result names. */
    unsigned violated;
    /* SLUICE_HTTP_LEGACY_EPOCH: the time of the decision, ms since the
     * epoch (the handle's clock); required, > 0. */
    int64_t now_ms;
} sluice_http_options;

/* Zeroes *opts (every field its default) and stamps struct_size. */
SLUICE_API void sluice_http_options_init(sluice_http_options *opts);

/* The status code to answer res with: 0 when it was admitted (the service
 * answers as it would), 429, 413, 400, 403 or 503 as above; -1 for a NULL
 * res or bad opts (opts may be NULL: the defaults). */
SLUICE_API int sluice_http_status(const sluice_result *res,
                                  const sluice_http_options *opts);

/* The fields for res, decided by rules (the ruleset of the decision: for
 * a decision by name, the limiter's, or the client's override's), as
 * text: "Name: value" lines, each ending in CRLF; "" when the answer has
 * none. rules must pass sluice_ruleset_check and be those that decided
 * res; they may be NULL for an answer without fields (a listed client,
 * fail=open, fail=closed), which sluice_http_body writes too. Returns the
 * length the whole text needs, as snprintf does; 0 (and buf "") for NULL
 * or bad arguments. */
SLUICE_API size_t sluice_http_text(const sluice_ruleset *rules,
                                   const sluice_result *res,
                                   const sluice_http_options *opts, char *buf,
                                   size_t len);

/* The same fields one by one, for servers that add each (evhttp's
 * evhttp_add_header, nginx's headers_out list, a libuv server's own):
 * fn(arg, name, value) with NUL-terminated strings valid during the call
 * only; a nonzero return stops the walk. SLUICE_OK (none called when the
 * answer has no fields), SLUICE_EINVAL for bad arguments, SLUICE_ENOMEM
 * when a value longer than 511 bytes finds no memory. */
typedef int (*sluice_http_field_fn)(void *arg, const char *name,
                                    const char *value);
SLUICE_API sluice_status sluice_http_each(const sluice_ruleset *rules,
                                          const sluice_result *res,
                                          const sluice_http_options *opts,
                                          sluice_http_field_fn fn, void *arg);

/* The body of an answer that is not an admission: an RFC 9457 problem
 * (SLUICE_HTTP_PROBLEM_TYPE) whose "status" is sluice_http_status's. 429,
 * 413 and 400: the draft's type
 * "https://iana.org/assignments/http-problem-types#quota-exceeded", its
 * title, and "violated-policies", the policies named as in the fields
 * (opts->violated, or the rule that binds); 413 and 400 say in "detail"
 * that the cost can never fit. 403 and 503: "about:blank" with the
 * status's phrase as title and a "detail". Returns the length the whole
 * text needs, as snprintf does; 0 (buf "") for an admission and for NULL
 * or bad arguments. */
SLUICE_API size_t sluice_http_body(const sluice_ruleset *rules,
                                   const sluice_result *res,
                                   const sluice_http_options *opts, char *buf,
                                   size_t len);

/* Shorthands: sluice_http_text with the options' name alone;
 * sluice_http_fields with name, unit, partition key and flags
 * (SLUICE_HTTP_RAW_PK only; 0 for an unknown unit or flag);
 * sluice_http_problem is sluice_http_body with name alone. */
SLUICE_API size_t sluice_http_headers(const sluice_ruleset *rules,
                                      const sluice_result *res,
                                      const char *name, char *buf, size_t len);
SLUICE_API size_t sluice_http_fields(const sluice_ruleset *rules,
                                     const sluice_result *res, const char *name,
                                     sluice_quota_unit unit,
                                     const void *partition_key,
                                     size_t partition_key_len, unsigned flags,
                                     char *buf, size_t len);
SLUICE_API size_t sluice_http_problem(const sluice_ruleset *rules,
                                      const sluice_result *res,
                                      const char *name, char *buf, size_t len);

/* What decided an answer (added after 0.1.0): the rules and the client's
 * override that gave the thread's last call on a handle its answer i, so
 * that a decision by name can be answered with the HTTP helpers above
 * without a copy of the limiter's rules:
 *
 *     sluice_decision d;
 *     sluice_decision_init(&d);
 *     if (sluice_last_decision(sl, 0, &d) == SLUICE_OK) {
 *         code = sluice_http_status(&res, &d.http);
 *         sluice_http_text(&d.rules, &res, &d.http, buf, sizeof(buf));
 *     }
 *
 * Zero it with sluice_decision_init(), which stamps struct_size; it grows
 * at its end only, as sluice_http_options does (docs/ABI.md): the library
 * writes struct_size bytes of it at most (0: the first layout's). */
typedef struct sluice_decision {
    size_t struct_size; /* stamped by sluice_decision_init() */
    /* The rules that decided answer i: by key the caller's; by name the
     * limiter's, or the client's override's, as the request read them
     * (cached or not; never read again); the fallback store's division of
     * them under fail=fallback (docs/SEMANTICS.md, "What decided an
     * answer"). Empty (count 0) for an answer no rule decided: fail=open
     * and fail=closed, an allow- or deny-listed client, a lease. */
    sluice_ruleset rules;
    /* By name: the client's override (NONE: the limiter's rules); by key
     * NONE. */
    sluice_override_kind override;
    unsigned violated; /* as sluice_violated(sl, i) */
    /* Ready for sluice_http_*: stamped, violated set, now_ms the time of
     * the decision on the handle's clock (0 with the server's clock);
     * name, unit and unit_name those of the policy that decided the call
     * (the limiter's, the call's or the handle's: sluice_policy's
     * http_name, unit, unit_name; NULL where it has none), pointing into
     * the thread's record, valid until its next call on the handle; the
     * rest at their defaults, the caller's to set. */
    sluice_http_options http;
} sluice_decision;

/* Zeroes *d (every field its default) and stamps struct_size. */
SLUICE_API void sluice_decision_init(sluice_decision *d);

/* What decided answer i of the calling thread's last call on sl (in an
 * async callback, of the call it answers), as sluice_violated() reads it:
 * every path, blocking, batch (i of n), by key or by name, on the loop,
 * threads sharing the handle (each its own). SLUICE_EINVAL (no message:
 * the call's stays) for a NULL out or sl, a struct_size below the first
 * layout's, an i past the call's answers, and when the thread's last call
 * on sl failed or was no decision (an admin call); out is then untouched.
 * For an answer no rule decided, rules is empty and the HTTP helpers
 * write no numbers for it. Valid until the thread's next call on sl. */
SLUICE_API sluice_status sluice_last_decision(sluice *sl, size_t i,
                                              sluice_decision *out);

/* Replaces the allocator of sluice's own memory (not hiredis's). Call before
 * any handle exists; NULL arguments restore the C library's. */
SLUICE_API void sluice_set_allocator(void *(*malloc_fn)(size_t),
                                     void *(*realloc_fn)(void *, size_t),
                                     void (*free_fn)(void *));

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
