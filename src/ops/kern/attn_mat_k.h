// Prototypes of the materialized attention's row kernels (kern/attn_mat.c):
// masked softmax of score rows and its backward, one variant per ISA;
// included by the kernels and by ops/attn_mat.c.
#ifndef OT_KERN_ATTN_MAT_K_H
#define OT_KERN_ATTN_MAT_K_H
#include "internal.h"

OT_KDECL(void, k_attn_mat_softmax, (float *s, int rows, int ld, int Tq, int Tk, int kvl, int causal));
OT_KDECL(void, k_attn_mat_dsoftmax, (float *dp, const float *p, int rows, int ld, int n));

#endif
