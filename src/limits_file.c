/* SPDX-License-Identifier: BSD-3-Clause */
/* limits_file.c - a handle opened with a limits file (limits_file=,
 * docs/LIMITS.md): the file read and checked at open and at each
 * sluice_limits_reload, held for the decisions by name (which define a
 * limiter from it where the backend has none: pipeline.c, limfile.c),
 * and its limiters' policies made the handle's, in place of the last
 * file's. Stored rules are never written here: the backend's win while
 * they exist (docs/SEMANTICS.md, "Limits from a file"). */
#include "handle.h"
#include "share.h"

#include <stdio.h>
#include <string.h>

/* The file's policy of a limiter as the calls take one. */
static void policy_of(const sl_limits_policy *lp, sluice_policy *p)
{
    sluice_policy_init(p);
    p->set = lp->set;
    p->fail = lp->fail;
    p->fallback_instances = lp->fallback_instances;
    p->deny_cache = lp->deny_cache;
    p->reserve_ms = lp->reserve_ms;
    p->reserve_share = lp->reserve_share;
    p->shadow = lp->shadow;
    memcpy(p->http_name, lp->http_name, sizeof(p->http_name));
    p->unit = lp->unit;
    memcpy(p->unit_name, lp->unit_name, sizeof(p->unit_name));
}

/* The policies of form's limiters that give one, laid over the handle's
 * as sluice_limiter_policy_set lays them, into *out (n of them; names
 * copied when copy, else pointing into the form). *out NULL for none. */
static sluice_status policies_of(sluice *sl, const sl_limits *form, bool copy,
                                 sl_policy_entry **out, size_t *n, char *err)
{
    sl_policy_entry *e;
    sluice_policy p;
    sluice_status st = SLUICE_OK;
    size_t i, k = 0, want = 0;

    *out = NULL;
    *n = 0;
    for (i = 0; form != NULL && i < form->n; i++)
        want += form->lims[i].policy.set != 0;
    if (want == 0)
        return SLUICE_OK;
    if ((e = sl_calloc(want, sizeof(*e))) == NULL) {
        sl_errf(err, SL_ERR_LEN, "limits_file: out of memory");
        return SLUICE_ENOMEM;
    }
    for (i = 0; i < form->n && st == SLUICE_OK; i++) {
        const sl_limits_limiter *lim = &form->lims[i];

        if (lim->policy.set == 0)
            continue;
        policy_of(&lim->policy, &p);
        /* Checked by the file's reader already: the same ranges. */
        if ((st = sl_policies_take(&sl->policy, &p, &e[k].pol, err)) !=
            SLUICE_OK)
            break;
        e[k].name_len = lim->name_len;
        e[k].name = copy ? sl_memdup(lim->name, lim->name_len) : lim->name;
        if (e[k++].name == NULL) {
            sl_errf(err, SL_ERR_LEN, "limits_file: out of memory");
            st = SLUICE_ENOMEM;
        }
    }
    if (st != SLUICE_OK && copy)
        for (i = 0; i < k; i++)
            sl_free(e[i].name);
    if (st != SLUICE_OK) {
        sl_free(e);
        return st;
    }
    *out = e;
    *n = k;
    return SLUICE_OK;
}

/* Reads the file, makes what its policies ask of the handle, and holds
 * it in place of the last (whose policies its own replace). On any
 * failure nothing changes. err: the message, SL_ERR_LEN bytes. */
static sluice_status load(sluice *sl, char *err)
{
    sl_limfile_form *old = NULL;
    sl_policy_entry *put = NULL, *drop = NULL;
    size_t n_put = 0, n_drop = 0, i;
    sl_limits *form = NULL;
    sluice_status st;
    char msg[SL_ERR_LEN];

    st = sl_limits_load(sl->url.limits_file, &form, msg, sizeof(msg));
    if (st != SLUICE_OK) {
        sl_errf(err, SL_ERR_LEN, "limits_file=%s: %s", sl->url.limits_file,
                msg);
        return st;
    }
    if ((st = policies_of(sl, form, true, &put, &n_put, err)) != SLUICE_OK) {
        sl_limits_free(form);
        return st;
    }
    for (i = 0; i < n_put && st == SLUICE_OK; i++)
        st = sl_policy_provide(sl, &put[i].pol, err);
    old = sl_limfile_take(&sl->limits);
    if (st == SLUICE_OK)
        st = policies_of(sl, old != NULL ? old->form : NULL, false, &drop,
                         &n_drop, err);
    if (st != SLUICE_OK) {
        for (i = 0; i < n_put; i++)
            sl_free(put[i].name);
    } else if ((st = sl_policies_replace(&sl->policies, drop, n_drop, put,
                                         n_put)) != SLUICE_OK) {
        sl_errf(err, SL_ERR_LEN, "limits_file: out of memory");
    }
    sl_free(put);
    sl_free(drop);
    sl_limfile_drop(old); /* drop's names pointed into it: used by now */
    if (st != SLUICE_OK) {
        sl_limits_free(form);
        return st;
    }
    /* The policies are the new file's from here, the form a moment later:
     * a decision in between defines by the last file's rules with the new
     * policy, as one that began a moment earlier would. */
    if (!sl_limfile_swap(&sl->limits, form, &old)) {
        sl_errf(err, SL_ERR_LEN, "limits_file: out of memory");
        return SLUICE_ENOMEM;
    }
    sl_limfile_drop(old);
    return SLUICE_OK;
}

sluice_status sl_limits_file_open(sluice *sl, char *err, size_t err_len)
{
    char msg[SL_ERR_LEN];
    sluice_status st;

    if (sl->url.limits_file[0] == '\0')
        return SLUICE_OK;
    if (strcmp(sl->url.limits_file, "-") == 0) {
        sl_errf(err, err_len,
                "limits_file=-: a handle reads its file again at each "
                "reload, which standard input cannot give; name a file");
        return SLUICE_EINVAL;
    }
    if ((st = load(sl, msg)) != SLUICE_OK)
        sl_errf(err, err_len, "%s", msg);
    return st;
}

sluice_status sluice_limits_reload(sluice *sl, char *err, size_t err_len)
{
    sluice_status st;
    char *msg;

    if (sl == NULL) {
        sl_errf(err, err_len, "limits_reload: sl is NULL");
        return SLUICE_EINVAL;
    }
    msg = sl_share_err(sl);
    if (sl->url.limits_file[0] == '\0') {
        sl_errf(msg, SL_ERR_LEN,
                "limits_reload: the handle was opened without a limits file "
                "(limits_file=PATH)");
        st = SLUICE_EINVAL;
    } else {
        pthread_mutex_lock(&sl->limits.reload_mu);
        st = load(sl, msg);
        pthread_mutex_unlock(&sl->limits.reload_mu);
    }
    if (st != SLUICE_OK)
        sl_errf(err, err_len, "%s", msg);
    else if (err != NULL && err_len > 0)
        err[0] = '\0';
    return st;
}
