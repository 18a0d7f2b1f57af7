// Private interface of the fused attention family (attn_flash.c, attn_sparse.c,
// attn_decode.c): the shared drivers around the kernels of kern/flash.c and
// kern/flash_bwd.c, whose argument block and tile logic are in kern/attn_k.h.
#ifndef OT_OPS_ATTN_IMPL_H
#define OT_OPS_ATTN_IMPL_H

#include "internal.h"
#include "ot/attn.h"
#include "kern/attn_k.h"

// The argument block, tile sizes, interval logic and kernel prototypes:
// kern/attn_k.h (shared with the kernels).

// Shared drivers (attn_flash.c): validate the tensors, size the scratch, build
// the tile lists, run the kernel inside a profiler span. `fn` names the public
// caller in errors; A->blk/win/glob select the sparse layout (0: dense).
ot_status ot__attn_fwd_run(const char *fn, ot_dtype dt, ot__attn_args *A, void *o, float *lse,
                           const void *q, const void *k, const void *v, const ot_attn_shape *s);
ot_status ot__attn_bwd_run(const char *fn, ot_dtype dt, ot__attn_args *A, void *dq, void *dk,
                           void *dv, const void *dout, const void *o, const float *lse,
                           const void *q, const void *k, const void *v, const ot_attn_shape *s);
// Fills A's shape fields from s (already checked).
void ot__attn_args_init(ot__attn_args *A, ot_dtype dt, const ot_attn_shape *s);
// OT_EINVAL (naming fn) when s asks for dropout: for the kernels without it.
ot_status ot__attn_no_dropout(const ot_attn_shape *s, const char *fn);
// Visible (query, key) pairs of one head summed over the batch (A's layout).
double ot__attn_pairs(const ot__attn_args *A);

#endif
