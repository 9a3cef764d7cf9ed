/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c - status texts and message formatting. */
#include "internal.h"

#include <stdio.h>

const char *sluice_strerror(sluice_status st)
{
    switch (st) {
#define SLUICE_X(name, msg) \
    case SLUICE_##name:     \
        return msg;
        SLUICE_STATUS_MAP(SLUICE_X)
#undef SLUICE_X
    }
    return "unknown status";
}

const char *sluice_status_name(sluice_status st)
{
    switch (st) {
    case SLUICE_OK:
        return "ok";
    case SLUICE_EINVAL:
        return "invalid";
    case SLUICE_EKEY:
        return "key";
    case SLUICE_ERULE:
        return "rule";
    case SLUICE_ECOST:
        return "cost";
    case SLUICE_EURL:
        return "url";
    case SLUICE_ETIME:
        return "time";
    case SLUICE_ENOMEM:
        return "nomem";
    case SLUICE_ECONNECT:
        return "connect";
    case SLUICE_ETIMEOUT:
        return "timeout";
    case SLUICE_EIO:
        return "io";
    case SLUICE_ESERVER:
        return "server";
    case SLUICE_EPROTO:
        return "proto";
    case SLUICE_EUNSUPPORTED:
        return "unsupported";
    case SLUICE_ENOLIMITER:
        return "nolimiter";
    case SLUICE_ECONTENDED:
        return "contended";
    case SLUICE_CACHED:
        return "cached";
    case SLUICE_SHADOWED:
        return "shadowed";
    case SLUICE_RESERVED:
        return "reserved";
    case SLUICE_ALLOWLISTED:
        return "allowlisted";
    case SLUICE_DENYLISTED:
        return "denylisted";
    }
    return "unknown";
}

void sl_errf(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || err_len == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

void sl_quote(char *dst, size_t dst_len, const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i, o = 0, shown = n > 64 ? 64 : n;

    if (dst_len == 0)
        return;
    for (i = 0; i < shown && o + 5 < dst_len; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
            dst[o++] = (char)s[i];
        else
            o += (size_t)snprintf(dst + o, dst_len - o, "\\x%02x", s[i]);
    }
    if (shown < n && o + 4 < dst_len) {
        dst[o++] = '.';
        dst[o++] = '.';
        dst[o++] = '.';
    }
    dst[o] = '\0';
}

void sl_textf(sl_text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(t->at < t->len ? t->buf + t->at : NULL,
                  t->at < t->len ? t->len - t->at : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->at += (size_t)n;
}

void sl_escape(char *dst, size_t dst_len, const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i, o = 0, shown = n > SL_ESCAPE_SHOWN ? SL_ESCAPE_SHOWN : n;

    if (dst_len == 0)
        return;
    for (i = 0; i < shown && o + 5 < dst_len; i++) {
        /* Control bytes (escape sequences, bells, backspaces) and every
         * byte past ASCII (C1 controls in 8-bit terminals) are shown as
         * \xNN: a message never acts on the terminal that prints it. */
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\')
            dst[o++] = (char)s[i];
        else
            o += (size_t)snprintf(dst + o, dst_len - o, "\\x%02x", s[i]);
    }
    dst[o] = '\0';
    if (shown < n)
        snprintf(dst + o, dst_len - o, "... (%zu bytes)", n);
}
