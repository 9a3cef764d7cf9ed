/* SPDX-License-Identifier: BSD-3-Clause */
/* limfile.h - a handle's limits file (limits_file=, docs/LIMITS.md): the
 * form it holds, shared by the decisions that read it while a reload
 * replaces it, and the define of a named limiter from it where the
 * backend has none, in steps whose round trips the pipeline's driver
 * makes, blocking or on the loop (limfile.c). No I/O here. */
#ifndef SL_LIMFILE_H
#define SL_LIMFILE_H

#include "config/limits.h"
#include "features/limiter_cache.h"

#include <pthread.h>
#include <stdatomic.h>

/* A form and its holders: the handle, until a reload replaces it, and
 * each define under way (which writes the overrides from it). */
typedef struct sl_limfile_form {
    atomic_size_t refs;
    sl_limits *form;
} sl_limfile_form;

/* Defines under way on one handle, at most (more define each their own;
 * sl_define_new). */
#define SL_LIMFILE_DEFINING 16

/* A handle's limits file. */
typedef struct sl_limfile {
    pthread_mutex_t mu;        /* guards cur and defining */
    pthread_mutex_t reload_mu; /* one reload at a time */
    sl_limfile_form *cur;      /* NULL: opened without a file */
    /* The limiters (of a form held) whose define is under way: another
     * decision by the name decides by the file meanwhile. */
    const struct sl_limits_limiter *defining[SL_LIMFILE_DEFINING];
    /* Defines begun and ended so far, and the last few ended, each with
     * that count once it ended: a read sent while one of its name was
     * under way may have found the rules without all their overrides
     * (written a round trip after, 32 at a time). */
    uint64_t events;
    struct sl_limfile_ended {
        const struct sl_limits_limiter *lim;
        uint64_t at; /* events once it ended */
    } ended[SL_LIMFILE_DEFINING];
    size_t ended_next;
} sl_limfile;

/* false: no mutex. */
bool sl_limfile_init(sl_limfile *f);
void sl_limfile_free(sl_limfile *f);
/* The form held now, with one holder more (NULL: no file); each take is
 * dropped once. */
sl_limfile_form *sl_limfile_take(sl_limfile *f);
void sl_limfile_drop(sl_limfile_form *h);
/* Holds form (sealed; taken over, also on failure) in place of the
 * last, whose holder is returned in *old (NULL: none) for the caller to
 * read and drop. false: out of memory, nothing changed. */
bool sl_limfile_swap(sl_limfile *f, sl_limits *form, sl_limfile_form **old);

/* The rules of name in the file, and the file's override of client
 * (client_len 0: none; kind NONE when the file has none): false when the
 * handle has no file or the file no such limiter. */
bool sl_limfile_rules(sl_limfile *f, const void *name, size_t name_len,
                      const void *client, size_t client_len, sluice_ruleset *rs,
                      sluice_limiter_override *ov);

/* Defines begun and ended on f so far: taken when a read of rules is
 * sent. */
uint64_t sl_limfile_events(sl_limfile *f);
/* Whether a read of name's rules sent when sl_limfile_events said since
 * may have overlapped a define of name on f: one under way now, or one
 * that ended after since (true, too, when too many have ended to tell).
 * Its answer is then the file's, not the read's. */
bool sl_limfile_overlapped(sl_limfile *f, const void *name, size_t name_len,
                           uint64_t since);

/* A define from the file: sluice_limiter_define's round trips (the name
 * listed first when the file's keep-alive is 0, the rules stored unless
 * some are, the list kept after), and the file's overrides written as
 * override_set writes each: the first SL_DEFINE_BATCH - 1 in the rules'
 * round trip, after their store (so that no decision on a Redis that runs
 * a pipeline's commands together, nor on mem://, reads the rules without
 * them), the rest SL_DEFINE_BATCH a round trip when the rules stored are
 * the file's. */
#define SL_DEFINE_BATCH 32

typedef enum sl_define_end {
    SL_DEFINE_SEND,   /* send[0..nsend) to the backend, then step again */
    SL_DEFINE_STORED, /* the file's rules are stored (in stored, ka) and
                         its overrides written */
    SL_DEFINE_FOUND,  /* other rules were stored: read them */
    SL_DEFINE_FAILED  /* the define failed: *st, the message in err */
} sl_define_end;

typedef struct sl_define {
    sl_limfile *file;
    sl_limfile_form *held;
    const sl_limits_limiter *lim;
    const char *prefix; /* the limiters' ("<prefix>lim:") */
    int64_t now;        /* the decision's time (-1: the server's) */
    int step, then;     /* this round trip's, and after the list's */
    int tries;          /* the list's marker stored again */
    char key[32 + SL_LIMITER_KEY_MAX]; /* the name's K */
    size_t kl;
    char value[SL_VALUE_MAX + 1]; /* the file's rules as stored */
    size_t len;
    bool ours;             /* what is stored is the file's */
    size_t next;           /* the next override to write */
    sluice_ruleset stored; /* what is stored (STORED, FOUND) */
    int64_t ka;
    /* The round trip at hand. */
    size_t nsend;
    sl_request send[SL_DEFINE_BATCH];
    sluice_result res[SL_DEFINE_BATCH];
    unsigned char marks[SL_DEFINE_BATCH];
    sl_value v[SL_DEFINE_BATCH];
    char over[SL_DEFINE_BATCH][SL_VALUE_MAX + 1];
} sl_define;

/* Why sl_define_new made none. */
typedef enum sl_define_none {
    SL_DEFINE_NOT_IN_FILE, /* no file, or no such limiter in it */
    SL_DEFINE_UNDER_WAY,   /* this handle defines it already: decide by
                              the file's rules (sl_limfile_rules) */
    SL_DEFINE_NOMEM
} sl_define_none;

/* A define of name from the file (f's form taken), its requests stamped
 * now, under prefix; NULL and *why when none is made. */
sl_define *sl_define_new(sl_limfile *f, const void *name, size_t name_len,
                         const char *prefix, int64_t now, sl_define_none *why);
void sl_define_free(sl_define *d);
/* The define's next move: at first (sent SLUICE_OK, nothing sent), then
 * after each round trip (sent its status; each request's in res). */
sl_define_end sl_define_step(sl_define *d, sluice_status sent,
                             sluice_status *st, char *err);

#endif /* SL_LIMFILE_H */
