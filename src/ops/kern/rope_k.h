// Prototype of the rotary position embedding kernel (kern/rope.c), one
// variant per ISA; included by the kernel and by ops/rope.c (contract there).
#ifndef OT_KERN_ROPE_K_H
#define OT_KERN_ROPE_K_H
#include "internal.h"

OT_KDECL(void, k_rope, (void *x, const float *tab, long rows, int T, int D, int rot, int pos0,
                        int gptj, float sgn, int bf16));

#endif
