/* SPDX-License-Identifier: BSD-3-Clause */
/* policies.h - decisions' policies (policies.c): a caller's sluice_policy
 * checked and laid over the handle's, and the table of the named
 * limiters' policies that a handle keeps. The pipeline reads the result,
 * an sl_policy (request.h), from each request. */
#ifndef SL_POLICIES_H
#define SL_POLICIES_H

#include "request.h"

#include <pthread.h>
#include <stdatomic.h>

/* One limiter's policy, under its name. */
typedef struct sl_policy_entry {
    char *name;
    size_t name_len;
    sl_policy pol;
} sl_policy_entry;

/* A handle's limiters' policies: a sorted array behind a mutex. Names
 * are configuration (a few, set rarely), and a decision by name reads
 * the table only when it holds some: n, read first without the lock. */
typedef struct sl_policies {
    pthread_mutex_t mu;
    atomic_size_t n;    /* entries; 0: no name has a policy */
    sl_policy_entry *e; /* n of them, by name length, then bytes */
    size_t cap;
} sl_policies;

/* false: no mutex. */
bool sl_policies_init(sl_policies *t);
void sl_policies_free(sl_policies *t);

/* The handle's own policy, from its configuration (its defaults set:
 * sl_url_parse). */
void sl_policies_of_config(const sl_config *cfg, sl_policy *out);
/* Checks the caller's in (its struct_size, the groups it sets, their
 * fields) and lays the groups it sets over base into *out; SLUICE_EINVAL
 * with the message, quoting the field and its value, in err. */
sluice_status sl_policies_take(const sl_policy *base, const sluice_policy *in,
                               sl_policy *out, char *err);
/* pol into the caller's *out, as much of it as out->struct_size says;
 * SLUICE_EINVAL with the message for a struct_size below the first
 * layout. */
sluice_status sl_policies_give(const sl_policy *pol, sluice_policy *out,
                               char *err);

/* Keeps pol for name (NULL: forgets it); SLUICE_ENOMEM, nothing changed,
 * when there is no memory for it. */
sluice_status sl_policies_put(sl_policies *t, const void *name, size_t name_len,
                              const sl_policy *pol);
/* A limits file's policies in place of the last file's, under one lock,
 * so that a decision sees either's (a reload): each of drop (n_drop) is
 * removed if its policy is still the one given there (a policy set by
 * the call since stays), then each of put (n_put, its names made with
 * sl_malloc and taken over whatever the status) is kept, in place of any.
 * SLUICE_ENOMEM, nothing changed, when there is no memory for it. */
sluice_status sl_policies_replace(sl_policies *t, const sl_policy_entry *drop,
                                  size_t n_drop, sl_policy_entry *put,
                                  size_t n_put);
/* The policy of name into *out (true); false when it has none. */
bool sl_policies_lookup(sl_policies *t, const void *name, size_t name_len,
                        sl_policy *out);
/* The same, at once false while no name has a policy: every decision by
 * name asks. */
static inline bool sl_policies_find(sl_policies *t, const void *name,
                                    size_t name_len, sl_policy *out)
{
    return atomic_load_explicit(&t->n, memory_order_acquire) > 0 &&
           sl_policies_lookup(t, name, name_len, out);
}

#endif /* SL_POLICIES_H */
