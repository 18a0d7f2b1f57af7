// Prototypes of the row softmax and softmax + cross-entropy kernels
// (kern/softmax.c), one variant per ISA; included by the kernels and by
// ops/softmax.c (contracts there).
#ifndef OT_KERN_SOFTMAX_K_H
#define OT_KERN_SOFTMAX_K_H
#include "internal.h"

OT_KDECL(void, k_softmax_fwd, (void *y, const void *x, long N, int V, float *buf, size_t bstride,
                               int bf16));
OT_KDECL(void, k_softmax_bwd, (void *dx, const void *y, const void *dy, long N, int V, int bf16));
OT_KDECL(void, k_xent, (void *lg, int ld, const int32_t *tg, long N, int V, int ignore,
                        float count, double *loss, int want_grad, float *buf, size_t bstride,
                        int bf16));
OT_KDECL(void, k_xent_ls, (void *lg, int ld, const int32_t *tg, long N, int V, int ignore,
                           float eps, float count, double *loss, int want_grad, float *buf,
                           size_t bstride, int bf16));

#endif
