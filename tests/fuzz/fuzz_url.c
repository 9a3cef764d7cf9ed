/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_url.c - sl_url_parse on arbitrary bytes, without options and with
 * options that carry credentials and a prefix: what it accepts names a
 * host and a port in range for every Redis scheme and a prefix without
 * braces; what it refuses gets a message, and no message shows a
 * password; a redacted URL hides everything where a password may stand. */
#include "sluice.h"

#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPTS_PASSWORD "OptionsSecret-9f3b"
#define CANARY        "CanaryPw7"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, const char *url, const char *detail)
{
    fprintf(stderr, "fuzz_url: %s\n  url: \"%s\"\n  %s\n", what, url, detail);
    abort();
}

static bool terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static void check_endpoint(const char *url, const char *host, size_t cap,
                           int port)
{
    if (!terminated(host, cap) || host[0] == '\0')
        broken("accepted an empty or unterminated host", url, host);
    if (port < 1 || port > 65535)
        broken("accepted a port outside 1..65535", url, "");
}

static void check_accepted(const char *url, const sl_url *u,
                           const sluice_options *opts)
{
    size_t i;

    if (u->scheme < SL_SCHEME_MEM || u->scheme > SL_SCHEME_CLUSTER)
        broken("accepted without a scheme", url, "");
    if (!terminated(u->name, sizeof(u->name)) ||
        !terminated(u->ep.user, sizeof(u->ep.user)) ||
        !terminated(u->ep.password, sizeof(u->ep.password)) ||
        !terminated(u->cfg.prefix, sizeof(u->cfg.prefix)) ||
        !terminated(u->ep.socket, sizeof(u->ep.socket)) ||
        !terminated(u->ep.tls_ca_file, sizeof(u->ep.tls_ca_file)) ||
        !terminated(u->ep.tls_ca_dir, sizeof(u->ep.tls_ca_dir)) ||
        !terminated(u->ep.tls_cert, sizeof(u->ep.tls_cert)) ||
        !terminated(u->ep.tls_key, sizeof(u->ep.tls_key)) ||
        !terminated(u->ep.tls_server_name, sizeof(u->ep.tls_server_name)))
        broken("a field is not terminated", url, "");
    if (u->scheme == SL_SCHEME_TWEMPROXY && u->ep.tls)
        broken("twemproxy with TLS", url, "");
    if (u->scheme == SL_SCHEME_MEM && (u->ep.tls || u->ep.socket[0] != '\0'))
        broken("mem:// with TLS or a socket", url, "");
    if (u->ep.socket[0] != '\0' && u->ep.socket[0] != '/')
        broken("a socket path that is not absolute", url, u->ep.socket);
    if (!u->ep.tls &&
        (u->ep.tls_ca_file[0] != '\0' || u->ep.tls_cert[0] != '\0' ||
         u->ep.tls_key[0] != '\0' || u->ep.tls_insecure))
        broken("TLS settings without TLS", url, "");
    if (u->sentinel) {
        /* The master's address is the sentinels' to name: none yet; the
         * seeds are the sentinels, the name the master's. */
        if (u->ep.host[0] != '\0' || u->ep.port != 0 ||
            !terminated(u->master, sizeof(u->master)) || u->master[0] == '\0' ||
            (u->scheme != SL_SCHEME_REDIS && u->scheme != SL_SCHEME_MULTI))
            broken("a sentinel URL with an address or without a name", url, "");
        if (u->nseeds < 1 || u->nseeds > SL_MAX_SEEDS)
            broken("a sentinel URL with a bad number of sentinels", url, "");
        for (i = 0; i < u->nseeds; i++)
            check_endpoint(url, u->seeds[i].host, sizeof(u->seeds[i].host),
                           u->seeds[i].port);
        if (!terminated(u->sentinel_ep.user, sizeof(u->sentinel_ep.user)) ||
            !terminated(u->sentinel_ep.password,
                        sizeof(u->sentinel_ep.password)))
            broken("a sentinel field is not terminated", url, "");
        return;
    }
    if (u->scheme != SL_SCHEME_MEM)
        check_endpoint(url, u->ep.host, sizeof(u->ep.host), u->ep.port);
    if (u->scheme == SL_SCHEME_CLUSTER) {
        if (u->nseeds < 1 || u->nseeds > SL_MAX_SEEDS)
            broken("a cluster URL with a bad number of seeds", url, "");
        for (i = 0; i < u->nseeds; i++)
            check_endpoint(url, u->seeds[i].host, sizeof(u->seeds[i].host),
                           u->seeds[i].port);
        if (strcmp(u->seeds[0].host, u->ep.host) != 0 ||
            u->seeds[0].port != u->ep.port)
            broken("the first seed is not the host", url, u->ep.host);
    } else if (u->nseeds != 0) {
        broken("seeds outside a cluster URL", url, "");
    }
    if (u->ep.db < 0)
        broken("a negative database", url, "");
    if (u->scheme == SL_SCHEME_TWEMPROXY &&
        (u->ep.user[0] != '\0' || u->ep.db != 0))
        broken("twemproxy with a user or a database", url, "");
    if (memchr(u->cfg.prefix, '\0', sizeof(u->cfg.prefix)) == NULL)
        broken("the prefix is not a string", url, "");
    if (strpbrk(u->cfg.prefix, "{}") != NULL)
        broken("a prefix with braces", url, u->cfg.prefix);
    if (u->cfg.connect_timeout_ms == 0 || u->cfg.command_timeout_ms == 0 ||
        u->cfg.ttl_floor_ms == 0)
        broken("a default left at zero", url, "");
    if (u->cfg.fail != SLUICE_FAIL_ERROR && u->cfg.fail != SLUICE_FAIL_OPEN &&
        u->cfg.fail != SLUICE_FAIL_CLOSED &&
        u->cfg.fail != SLUICE_FAIL_FALLBACK)
        broken("a fail policy out of range", url, "");
    /* Credentials given in options fill only what the URL left empty. */
    if (opts != NULL && u->scheme != SL_SCHEME_MEM && u->ep.password[0] == '\0')
        broken("the options' password was dropped", url, "");
}

/* True when CANARY stands where a password may go, for any input: between
 * the first "//" (or the start) and the last '@' of the whole text (a
 * password may hold '/', '?', '#' or '@' unescaped, so the authority a
 * parser sees can end before it does). */
static bool canary_is_secret(const char *url)
{
    const char *s = strstr(url, "//"), *at = strrchr(url, '@'), *c;

    if (at == NULL || (c = strstr(url, CANARY)) == NULL ||
        strstr(c + 1, CANARY) != NULL)
        return false;
    if (s == NULL || s > at)
        s = url;
    return c >= s && c + strlen(CANARY) <= at;
}

/* The redacted text keeps what is before the first "//" (with it) and
 * from the last '@' on, and shows "***" for what is between. */
static void check_redacted(const char *url)
{
    char shown[SL_ERR_LEN];

    sl_url_redact(url, shown, sizeof(shown));
    if (!terminated(shown, sizeof(shown)))
        broken("a redacted URL is not terminated", url, "");
    if (canary_is_secret(url) && strstr(shown, CANARY) != NULL)
        broken("the redacted URL shows what may be a password", url, shown);
    /* A sentinel_password= value hidden whole may take the "***@" with
     * it: hiding more is allowed. */
    if (strchr(url, '@') != NULL && strstr(shown, "***@") == NULL &&
        strstr(shown, "sentinel_password=***") == NULL &&
        strlen(url) < sizeof(shown) - 8)
        broken("a URL with '@' redacted without \"***@\"", url, shown);
}

static void parse_once(const char *url, const sluice_options *opts)
{
    char err[SL_ERR_LEN];
    sl_url u;
    sluice_status st;

    memset(err, 0x55, sizeof(err));
    st = sl_url_parse(url, opts, &u, err, sizeof(err));
    if (st == SLUICE_OK) {
        check_accepted(url, &u, opts);
        return;
    }
    if (st != SLUICE_EURL)
        broken("refused with a status other than SLUICE_EURL", url,
               sluice_strerror(st));
    if (!terminated(err, sizeof(err)) || err[0] == '\0')
        broken("refused without a terminated message", url, "");
    if (strstr(url, OPTS_PASSWORD) == NULL &&
        strstr(err, OPTS_PASSWORD) != NULL)
        broken("a message shows the options' password", url, err);
    if (canary_is_secret(url) && strstr(err, CANARY) != NULL)
        broken("a message shows the URL's password", url, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    sluice_options opts;

    if (url == NULL)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    check_redacted(url);
    parse_once(url, NULL);
    memset(&opts, 0, sizeof(opts));
    opts.user = "svc";
    opts.password = OPTS_PASSWORD;
    opts.key_prefix = "app:";
    opts.command_timeout_ms = 100;
    parse_once(url, &opts);
    free(url);
    return 0;
}
