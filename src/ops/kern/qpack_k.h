// f32 weights packed for the linear layer (kern/qpack.c, used by ops/quant.c
// for ot_qweight_pack): the panel layout and the kernels' prototypes, one
// variant per ISA.
//
// A weight W [N, K] packed with panel width P (the `pack` of ot__qk_weight) is
// ceil(N / P) panels of P rows, each stored k-major: element (n, k) at
// data[(n / P) * P * K + k * P + n % P]; rows past N in the last panel are zero.
// One panel is one contiguous stream that the broadcast-form kernel reads once
// for every row of x: y[m, n0 .. n0 + P) += x[m, k] * panel[k, 0 .. P).
#ifndef OT_KERN_QPACK_K_H
#define OT_KERN_QPACK_K_H
#include "internal.h"
#include "qgemv_k.h"

// Floats of a packed [rows, cols] weight with panel width P (the last panel padded).
static inline size_t ot__qpk_floats(int rows, int cols, int P) {
  return (size_t)(rows + P - 1) / (size_t)P * (size_t)P * (size_t)cols;
}

// dst[k] = W(n, k) for k < K: row n of a weight packed with width P (any ISA's).
static inline void ot__qpk_row(float *dst, const float *D, int P, int K, int n) {
  const float *s = D + (size_t)(n / P) * (size_t)P * (size_t)K + n % P;
  for (int k = 0; k < K; k++) dst[k] = s[(size_t)k * P];
}

// The panel width of this ISA's kernel (2 vectors: AVX-512 32, AVX2 16; portable 4), the own
// GEMM's NR (k_sg_tile).
OT_KDECL(int, k_qpk_width, (void));
// dst (ot__qpk_floats(N, K, P) floats) = W [N, K] row-major packed with this ISA's width (threaded).
OT_KDECL(void, k_qpk_pack, (float *dst, const float *W, int N, int K));
// dst[(n - n0) * K + k] = W(n, k) for n in [n0, n1): rows of a weight D [N, K] packed
// with this ISA's width, back to row-major (threaded).
OT_KDECL(void, k_qpk_unpack, (float *dst, const float *D, int K, int n0, int n1));
// y[M, W->rows] = x[M, W->cols] @ W^T (+ bias), W packed with this ISA's width (the
// caller checks), M >= 1: decode steps and prefill alike (each panel read once from
// memory for all M rows, which come from L2 or L3). M = 1 runs on the library's team
// (a descheduled helper does not hold the step back); M > 1 over OpenMP threads,
// panels handed out dynamically. Each output is computed by one thread in a fixed order:
// results do not depend on the thread count. OT_ENOMEM if the team's buffer cannot grow.
OT_KDECL(ot_status, k_qpk_linear, (float *y, const float *x, const ot__qk_weight *W, const float *bias, int M));

#endif
