/* SPDX-License-Identifier: BSD-3-Clause */
/* slot.c - Redis Cluster's key slot: CRC16 (XMODEM) of the key's hash tag,
 * modulo 16384. */
#include "internal.h"

/* CRC16-CCITT, polynomial 0x1021, initial value 0, as Redis Cluster uses. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    size_t i;
    int b;

    for (i = 0; i < n; i++) {
        crc = (uint16_t)(crc ^ (uint16_t)(p[i] << 8));
        for (b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned sl_slot_of_key(const void *key, size_t len)
{
    const unsigned char *k = key;
    size_t open, close;

    /* Only the part between the first '{' and the first '}' after it
     * counts, when it is not empty. */
    for (open = 0; open < len && k[open] != '{'; open++)
        ;
    if (open < len) {
        for (close = open + 1; close < len && k[close] != '}'; close++)
            ;
        if (close < len && close > open + 1)
            return crc16(k + open + 1, close - open - 1) & 16383;
    }
    return crc16(k, len) & 16383;
}
