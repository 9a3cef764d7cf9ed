/* SPDX-License-Identifier: BSD-3-Clause */
/* script_ops.h - the operation codes of the Lua script (the sections in lua/),
 * the one list that C and Lua share. The enum below is made from it here, and
 * cmake/embed.cmake reads the same X(NAME, code) lines at build time and
 * writes each OP_<NAME> of the script's code as its number: a code
 * changed here changes both, and the script's SHA1 with them.
 *
 * The list is in the C header, not in a file of its own that the build
 * turns into one, so that every C file compiles from src/ alone
 * (scripts/layers.py compiles each apart), as sluice.h's statuses do.
 * embed.cmake fails the build unless the codes are 0 to N - 1, each once,
 * and on an OP_ name not in the list or op compared with a bare number.
 *
 * The script tests two groups as ranges, so each group's codes follow
 * each other: RULES_GET to RULES_DEL, and OVER_SET to the last. A new
 * code goes last, or the script's ranges change with it. */
#ifndef SL_SCRIPT_OPS_H
#define SL_SCRIPT_OPS_H

/* X(NAME, code), in the order of the codes; what each does and answers:
 * the lua/ section that runs it. */
#define SL_SCRIPT_OPS(X)                                                   \
    X(PEEK, 0)           /* decide, charge nothing */                      \
    X(ACQUIRE, 1)        /* charge when every rule admits */               \
    X(RESET, 2)          /* forget, on the server's clock */               \
    X(AT_MOST, 3)        /* acquire what fits, up to the cost */           \
    X(REFUND, 4)         /* give back up to the cost; answers a peek */    \
    X(RULES_GET, 5)      /* a named limiter's rules: read */               \
    X(RULES_PUT_NX, 6)   /* store unless present */                        \
    X(RULES_PUT, 7)      /* store */                                       \
    X(RULES_DEL, 8)      /* delete, with the overrides */                  \
    X(LEASE_ACQUIRE, 9)  /* take a lease */                                \
    X(LEASE_RELEASE, 10) /* release a lease */                             \
    X(FORCE, 11)         /* charge unjudged (a settle's excess); a peek */ \
    X(OVER_SET, 12)      /* a client's override: set */                    \
    X(OVER_DEL, 13)      /* delete */                                      \
    X(OVER_LIST, 14)     /* a page of the list */

typedef enum sl_script_op {
#define SL_SCRIPT_X(name, code) SL_SCRIPT_##name = code,
    SL_SCRIPT_OPS(SL_SCRIPT_X)
#undef SL_SCRIPT_X
} sl_script_op;

#endif /* SL_SCRIPT_OPS_H */
