/* SPDX-License-Identifier: BSD-3-Clause */
/* alloc.c - the replaceable allocator behind all of sluice's own memory,
 * so that tests can fail allocations one by one. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static struct {
    void *(*malloc_fn)(size_t);
    void *(*realloc_fn)(void *, size_t);
    void (*free_fn)(void *);
} allocator = {malloc, realloc, free};

void sluice_set_allocator(void *(*malloc_fn)(size_t),
                          void *(*realloc_fn)(void *, size_t),
                          void (*free_fn)(void *))
{
    bool all = malloc_fn != NULL && realloc_fn != NULL && free_fn != NULL;

    allocator.malloc_fn = all ? malloc_fn : malloc;
    allocator.realloc_fn = all ? realloc_fn : realloc;
    allocator.free_fn = all ? free_fn : free;
}

void *sl_malloc(size_t n)
{
    return allocator.malloc_fn(n == 0 ? 1 : n);
}

void *sl_calloc(size_t count, size_t n)
{
    void *p;

    if (n != 0 && count > SIZE_MAX / n)
        return NULL;
    p = sl_malloc(count * n);
    if (p != NULL)
        memset(p, 0, count * n);
    return p;
}

void *sl_realloc(void *p, size_t n)
{
    return allocator.realloc_fn(p, n == 0 ? 1 : n);
}

void sl_free(void *p)
{
    if (p != NULL)
        allocator.free_fn(p);
}

char *sl_memdup(const void *p, size_t n)
{
    char *d = sl_malloc(n + 1);

    if (d != NULL) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}
