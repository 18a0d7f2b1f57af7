// Prototypes of the activation kernels (kern/act.c: GELU tanh and erf forms, SwiGLU),
// one variant per ISA; included by the kernels and by ops/act.c.
// x, y, dx, dy: [n] (GELU) or x [N, 2F] -> y [N, F] (SwiGLU); bf16 != 0: bf16 storage.
#ifndef OT_KERN_ACT_K_H
#define OT_KERN_ACT_K_H
#include "internal.h"

OT_KDECL(void, k_gelu_fwd, (int bf16, void *y, const void *x, size_t n));
OT_KDECL(void, k_gelu_bwd, (int bf16, void *dx, const void *x, const void *dy, size_t n));
OT_KDECL(void, k_gelu_erf_fwd, (int bf16, void *y, const void *x, size_t n));
OT_KDECL(void, k_gelu_erf_bwd, (int bf16, void *dx, const void *x, const void *dy, size_t n));
OT_KDECL(void, k_swiglu_fwd, (int bf16, void *y, const void *x, int N, int F));
OT_KDECL(void, k_swiglu_bwd, (int bf16, void *dx, const void *x, const void *dy, int N, int F));

#endif
