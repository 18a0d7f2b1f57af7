// Prototypes of the AdamW and sum-of-squares kernels (kern/adamw.c), one
// variant per ISA; included by the kernels and by ops/adamw.c (contracts there).
#ifndef OT_KERN_ADAMW_K_H
#define OT_KERN_ADAMW_K_H
#include "internal.h"

OT_KDECL(void, k_adamw, (float *p, const float *g, float *m, float *v, uint16_t *pb, int pbsk,
                         size_t n, const float c[9]));
OT_KDECL(double, k_sumsq, (const float *g, size_t n));

#endif
