// Prototypes of the residual + LayerNorm / RMSNorm kernels (kern/norm.c), one
// variant per ISA; included by the kernels and by ops/norm.c (contracts there).
#ifndef OT_KERN_NORM_K_H
#define OT_KERN_NORM_K_H
#include "internal.h"

OT_KDECL(void, k_norm_fwd, (int bf16, int rms, void *y, float *mean, float *rstd, void *res_out,
                            const void *x, const void *r, const float *g, const float *beta,
                            int N, int C, float eps));
OT_KDECL(void, k_norm_bwd, (int bf16, int rms, void *dx, float *dg, float *dbeta, const void *dy,
                            const void *dres, const void *res, const float *mean,
                            const float *rstd, const float *g, int N, int C, float *part, int nt,
                            int ld));

#endif
