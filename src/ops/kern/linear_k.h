// Prototypes of the kernels around the GEMMs of linear and fused QKV
// (kern/linear.c), one variant per ISA; included by the kernels and, through
// ops/gemm_impl.h, by their callers.
#ifndef OT_KERN_LINEAR_K_H
#define OT_KERN_LINEAR_K_H
#include "internal.h"

// dst[r*ldd + c] = src[r*lds + c], r < rows, c < cols; f32/bf16 on either side.
OT_KDECL(void, k_lin_copy2d, (void *dst, int dbf, size_t ldd, const void *src, int sbf,
                              size_t lds, int rows, int cols));
// db[j] += sum_i src[i*ld + j], i < M, j < N; each column summed by one thread
// in a fixed order (blocks of rows), so the result is thread-count independent.
OT_KDECL(void, k_lin_colsum, (float *db, const void *src, int sbf, size_t ld, int M, int N));
// src: [B*T, (Hq+2Hkv)*D] f32 -> q: [B,Hq,T,D], k, v: [B,Hkv,T,D] (bf16 if bf).
OT_KDECL(void, k_qkv_scatter, (void *q, void *k, void *v, int bf, const float *src,
                               int B, int T, int Hq, int Hkv, int D));
// dq, dk, dv (bf16 if bf) in the per-head layouts -> g: [B*T, (Hq+2Hkv)*D] (bf16 if gbf).
OT_KDECL(void, k_qkv_gather, (void *g, int gbf, const void *dq, const void *dk,
                              const void *dv, int bf, int B, int T, int Hq, int Hkv, int D));

#endif
