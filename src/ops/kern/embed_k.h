// Prototypes of the token + position embedding kernels (kern/embed.c), one
// variant per ISA; included by the kernels and by ops/embed.c (contracts there).
#ifndef OT_KERN_EMBED_K_H
#define OT_KERN_EMBED_K_H
#include "internal.h"

OT_KDECL(void, k_embed_fwd, (void *out, const int32_t *tokens, const void *wte, const void *wpe,
                             long N, int T, int C, int bf16));
OT_KDECL(void, k_embed_bwd, (float *dwte, float *dwpe, const void *dout, const int32_t *tokens,
                             long N, int T, int C, int bf16));

#endif
