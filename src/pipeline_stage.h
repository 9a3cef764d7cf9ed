/* SPDX-License-Identifier: BSD-3-Clause */
/* pipeline_stage.h - what the stages' files share (pipeline.c,
 * pipeline_name.c), no one else: the one place a call's state changes,
 * the parts of a decision by name's K, the stages of a decision by name. */
#ifndef SL_PIPELINE_STAGE_H
#define SL_PIPELINE_STAGE_H

#include "pipeline.h"

/* The one place a call's state changes. */
static inline void sl_pipe_mstate(sl_pipe *p, sl_pipe_state s)
{
    p->state = s;
}

/* The name of a decision by name: in K, after "<len>:". */
static inline const char *sl_pipe_name_of(const sl_pipe_name *nm)
{
    return nm->key + (nm->kl - nm->client_len - nm->name_len);
}

/* Its client id, after the name. */
static inline const char *sl_pipe_client_of(const sl_pipe_name *nm)
{
    return nm->key + (nm->kl - nm->client_len);
}

/* NAME, READ, DEFINED (pipeline_name.c). */
sl_pipe_need sl_pipe_stage_name(sl_pipe *p);
sl_pipe_need sl_pipe_stage_read(sl_pipe *p);
sl_pipe_need sl_pipe_stage_defined(sl_pipe *p);

#endif /* SL_PIPELINE_STAGE_H */
