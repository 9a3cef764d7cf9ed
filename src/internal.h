/* SPDX-License-Identifier: BSD-3-Clause */
/* internal.h - private helpers shared by the core, the backends and tests. */
#ifndef SL_INTERNAL_H
#define SL_INTERNAL_H

#include "sluice.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_MAX_LIMIT     1000000000LL  /* limit, burst and cost */
#define SL_MAX_PERIOD_MS 10000000000LL /* 10^10 ms */
#define SL_MAX_TZ_MS     (14LL * 3600 * 1000)
#define SL_MAX_TIME_MS   9007199254740991LL /* 2^53 - 1 */
#define SL_EXACT_BOUND   9007199254740992LL /* 2^53 */
#define SL_ERR_LEN       512

/* alloc.c: sluice's own memory goes through the replaceable allocator. */
void *sl_malloc(size_t n);
void *sl_calloc(size_t count, size_t n);
void *sl_realloc(void *p, size_t n);
void sl_free(void *p);
char *sl_memdup(const void *p, size_t n);

/* error.c: printf into a caller's buffer; a NULL buffer is fine. */
void sl_errf(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Quotes up to 64 bytes of a binary value printably ("ab\x00c..."). */
void sl_quote(char *dst, size_t dst_len, const void *p, size_t n);
/* Text from a server, printable: control and non-ASCII bytes as \xNN,
 * and at most SL_ESCAPE_SHOWN bytes of it, then "... (N bytes)". Every
 * message that quotes what a server sent passes it through here. */
#define SL_ESCAPE_SHOWN 160
void sl_escape(char *dst, size_t dst_len, const void *p, size_t n);

/* Text built piece by piece into buf[len], as snprintf would build it:
 * what does not fit is counted in at, so that at is the length the whole
 * text needs. */
typedef struct sl_text {
    char *buf;
    size_t len, at;
} sl_text;
void sl_textf(sl_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* clock.c: monotonic milliseconds, the clock of every deadline. */
int64_t sl_mono_ms(void);

/* rule.c */
const char *sl_algorithm_name(sluice_algorithm a);
/* Formats a rule back to its canonical text ("token:5/1000ms,burst=10"). */
void sl_rule_format(const sluice_rule *r, char *dst, size_t dst_len);
/* Whether two rulesets are the same by value: rule by rule, the same
 * algorithm, limit, period, capacity (a burst left out is the limit) and
 * tz. What the deny cache and reservations key their entries by. */
bool sl_ruleset_same(const sluice_ruleset *a, const sluice_ruleset *b);

/* key.c: decimal text of v into dst (at least 21 bytes), no terminator;
 * returns its length. Faster than snprintf on the hot path. */
size_t sl_i64toa(int64_t v, char *dst);

/* key.c: "<prefix>{K}:<algo>:<P>[:<off>]"; returns the length written, or 0
 * when dst is too small. */
size_t sl_key_build(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len, const sluice_rule *r);

/* Room for any key sl_key_build writes, plus a window's ":<k>". */
#define SL_KEY_BUF (SLUICE_MAX_KEY_LEN + 160)

/* key.c: "<prefix>{K}:rules", a named limiter's stored rules; returns the
 * length written, or 0 when dst is too small. */
size_t sl_key_rules(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len);

/* key.c: "<prefix>{K}:lease", a key's leases; as sl_key_rules. */
size_t sl_key_lease(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len);

/* key.c: "<prefix>{K}:block", a key's block (a sorted set, member "e"
 * scored by the block's end); as sl_key_rules. */
size_t sl_key_block(char *dst, size_t dst_len, const char *prefix,
                    const void *key, size_t key_len);

/* key.c: "<prefix>{K}:over", a named limiter's overrides (a hash: field
 * the client id, value the encoded override); as sl_key_rules. */
size_t sl_key_over(char *dst, size_t dst_len, const char *prefix,
                   const void *key, size_t key_len);

/* key.c: appends ":<k>" to the rule key of length base_len in dst (of
 * SL_KEY_BUF bytes): the key of window k. Returns the new length. */
size_t sl_key_window(char *dst, size_t base_len, int64_t k);

/* key.c: a token or gcra state as stored: x (the time of the last
 * charge), d (the backlog in request*ms at x) and keep (the time until
 * which it must live), three little-endian int64 in SL_BUCKET_LEN bytes.
 * unpack is false when the bytes are not such a state or hold numbers
 * outside their ranges. */
#define SL_BUCKET_LEN 24
void sl_bucket_pack(char *dst, int64_t x, int64_t d, int64_t keep);
bool sl_bucket_unpack(const char *src, size_t len, int64_t *x, int64_t *d,
                      int64_t *keep);

/* The latest keep a bucket's state can hold (see sl_bucket_unpack). */
#define SL_MAX_KEEP_MS (2 * SL_MAX_TIME_MS + SL_MAX_PERIOD_MS)

/* key.c: the keys that a reset of rule r at t deletes: the rule's key,
 * and for windows the windows k - 2 .. k + 1 around t (late requests and
 * clocks ahead). Writes up to SL_RESET_KEYS keys; returns how many. */
#define SL_RESET_KEYS 4
size_t sl_key_reset_set(const char *prefix, const void *key, size_t key_len,
                        const sluice_rule *r, int64_t t,
                        char (*keys)[SL_KEY_BUF], size_t *lens);
/* Checks a key against the cap; writes the message. */
sluice_status sl_key_check(const void *key, size_t key_len, char *err,
                           size_t err_len);
sluice_status sl_cost_check(int64_t cost, char *err, size_t err_len);
sluice_status sl_time_check(int64_t t, char *err, size_t err_len);

/* slot.c: the Redis Cluster slot (0..16383) of a key, by its hash tag. */
unsigned sl_slot_of_key(const void *key, size_t len);
/* FNV-1a (64 bits), for in-process hash tables: h with n more bytes
 * (from SL_HASH64_SEED), and n bytes on their own. */
#define SL_HASH64_SEED 14695981039346656037u
static inline uint64_t sl_hash64_add(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211u;
    return h;
}
static inline uint64_t sl_hash64(const void *p, size_t n)
{
    return sl_hash64_add(SL_HASH64_SEED, p, n);
}

/* url.c */
typedef enum sl_scheme {
    SL_SCHEME_MEM = 1,
    SL_SCHEME_REDIS,
    SL_SCHEME_MULTI,
    SL_SCHEME_TWEMPROXY,
    SL_SCHEME_CLUSTER
} sl_scheme;

#define SL_MAX_SEEDS 16

/* The largest reply read by default (URL: max_reply_bytes), counted as
 * hiredis allocates it: a log of about 50,000 entries. */
#define SL_REPLY_MAX_DEFAULT (8u << 20)

/* Where a connection goes and as whom: one server (a cluster node has its
 * own), apart from the configuration every connection of a handle shares
 * (sl_config). */
typedef struct sl_endpoint {
    char host[256];
    int port;
    char socket[108]; /* ?socket=PATH: a Unix-domain socket, not TCP */
    char user[128];
    char password[256];
    int db;
    bool tls;          /* rediss://, or ?tls=1 */
    bool tls_insecure; /* ?tls_verify=0: no verification (tests only) */
    char tls_ca_file[256], tls_ca_dir[256], tls_cert[256], tls_key[256];
    char tls_server_name[256]; /* verified and sent as SNI; default host */
    size_t reply_max_bytes;    /* ?max_reply_bytes=N; 0: the default */
} sl_endpoint;

/* How a handle behaves, whatever it connects to: the caller's
 * sluice_options resolved (defaults applied, the URL's query over them),
 * kept in the library's own struct, not the public one (which grows by
 * struct_size and holds credentials and pointers the caller owns). */
typedef struct sl_config {
    sluice_clock_fn clock; /* never NULL once the handle is open */
    void *clock_ctx;
    bool server_clock;
    uint32_t connect_timeout_ms;
    uint32_t command_timeout_ms;
    uint32_t ttl_floor_ms;
    sluice_fail_policy fail;
    char prefix[64]; /* every key's prefix */
    uint32_t deny_cache;
    bool no_metrics;
    bool shadow;
    uint32_t fallback_instances;
    int64_t rules_cache_ms; /* 0: the default; < 0: never cached */
    /* How long after their read a limiter's rules and overrides still
     * decide when they cannot be read again (stale-if-error); 0: the
     * default, an hour; < 0: never. URL only (rules_stale_ms=N). */
    int64_t rules_stale_ms;
    int64_t reserve_ms;     /* reservations' hold; 0: off */
    uint32_t reserve_share; /* percent of a capacity; 0: the default */
    /* The most state entries an in-process store keeps (the fallback
     * store, mem://), the least recently used evicted past it; 0: the
     * default; < 0: no bound. URL only (fallback_max_keys=N, 0: none). */
    int64_t fallback_max_keys;
} sl_config;

/* A parsed URL: where (the endpoint, a cluster's seeds) and how (the
 * configuration), two structs. */
typedef struct sl_url {
    sl_scheme scheme;
    char name[128]; /* mem://NAME */
    sl_endpoint ep; /* the server (the first seed of a cluster) */
    size_t nseeds;  /* redis-cluster://: seeds[0] is ep's host:port */
    struct {
        char host[256];
        int port;
    } seeds[SL_MAX_SEEDS];
    /* redis+sentinel://, rediss+sentinel://, redis+multi+sentinel://:
     * scheme is SL_SCHEME_REDIS or SL_SCHEME_MULTI, seeds are the
     * sentinels, master the name they know the master by, and sentinel_ep
     * how they are reached (user, password, TLS; its host is unused). ep
     * is the data nodes': its host and port are the master's, once the
     * sentinels named it. */
    bool sentinel;
    char master[128];
    sl_endpoint sentinel_ep;
    int sentinel_tls; /* sentinel_tls=: -1 as the data nodes, 0, 1 */
    sl_config cfg;
    /* limits_file=PATH (or sluice_options.limits_file): the handle's
     * limits file; "": none. Kept apart from cfg, which is copied. */
    char limits_file[1024];
} sl_url;

/* Copies url into dst with its password shown as "***"; every message
 * that shows a URL passes through here. */
void sl_url_redact(const char *url, char *dst, size_t dst_len);
/* The name of query option i, in the order --help lists them; NULL past
 * the last. The one list the parser, its messages and the docs test read. */
const char *sl_url_option(size_t i);

/* Parses url into where (out's endpoint and seeds) and how (out->cfg);
 * opts (may be NULL) gives the configuration that the query overrides,
 * and credentials where the URL has none. Nothing of opts is kept by
 * reference: the prefix is copied into out->cfg.prefix. */
sluice_status sl_url_parse(const char *url, const sluice_options *opts,
                           sl_url *out, char *err, size_t err_len);

/* Floor and ceiling divisions for b > 0. */
static inline int64_t sl_fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t sl_cdiv(int64_t a, int64_t b)
{
    return -sl_fdiv(-a, b);
}
static inline int64_t sl_max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}
static inline int64_t sl_min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

#endif /* SL_INTERNAL_H */
