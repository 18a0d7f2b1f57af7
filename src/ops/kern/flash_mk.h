// Register-blocked micro-kernels of the fused attention kernels (flash.c,
// flash_bwd.c), written once against simd.h.
//
// One primitive covers every product the kernels need:
//   C[M, N] (=|+=|= C * rs[row] +) A[M, K] * B[K, N]
// with A addressed as A[r * ars + k * acs] (so A may be a transposed view,
// e.g. P^T, at no cost: its elements are broadcast one at a time) and B
// row-major with N a multiple of VL. The micro-tile is 6 rows x 2 vectors:
// 12 accumulators + 2 B vectors + 1 broadcast = 15 of the 16 ymm registers on
// AVX2; per k it issues 2 loads, 6 broadcasts and 12 FMAs, enough independent
// FMAs (12 > 2 pipes x 4 cycles latency) to keep both FMA pipes busy.
// Column blocks are the outer loop, so a [K, 2 VL] strip of B stays in L1
// while the rows of A stream past it.
#ifndef OT_KERN_FLASH_MK_H
#define OT_KERN_FLASH_MK_H

#include "simd.h"
#include "ops/attn_impl.h"
#include <omp.h>

#define INL static inline __attribute__((always_inline))
#define MK_MR 6

enum { MK_SET = 0, MK_ADD = 1, MK_RESCALE = 2 };

// One micro-tile: R (<= 6) rows, NV (1 or 2) vectors of columns.
INL void mk_tile(const int R, const int NV, const int mode, float *C, size_t ldc,
                 const float *A, size_t ars, size_t acs, const float *B, size_t ldb, int K,
                 const float *rs) {
  vf c00 = vzero(), c01 = vzero(), c10 = vzero(), c11 = vzero(), c20 = vzero(), c21 = vzero();
  vf c30 = vzero(), c31 = vzero(), c40 = vzero(), c41 = vzero(), c50 = vzero(), c51 = vzero();
#define MK_LOAD(r)                                                        \
  if (R > r) {                                                            \
    c##r##0 = vload(C + r * ldc);                                         \
    if (NV > 1) c##r##1 = vload(C + r * ldc + VL);                        \
    if (mode == MK_RESCALE) {                                             \
      vf s_ = vset1(rs[r]);                                               \
      c##r##0 = vmul(c##r##0, s_);                                        \
      if (NV > 1) c##r##1 = vmul(c##r##1, s_);                            \
    }                                                                     \
  }
  if (mode != MK_SET) { MK_LOAD(0) MK_LOAD(1) MK_LOAD(2) MK_LOAD(3) MK_LOAD(4) MK_LOAD(5) }
#undef MK_LOAD
#pragma GCC unroll 4
  for (int k = 0; k < K; k++) {
    const float *b = B + (size_t)k * ldb, *a = A + (size_t)k * acs;
    vf b0 = vload(b), b1 = NV > 1 ? vload(b + VL) : b0;
#define MK_FMA(r)                                                         \
  if (R > r) {                                                            \
    vf x_ = vset1(a[r * ars]);                                            \
    c##r##0 = vfmadd(x_, b0, c##r##0);                                    \
    if (NV > 1) c##r##1 = vfmadd(x_, b1, c##r##1);                        \
  }
    MK_FMA(0) MK_FMA(1) MK_FMA(2) MK_FMA(3) MK_FMA(4) MK_FMA(5)
#undef MK_FMA
  }
#define MK_STORE(r)                                                       \
  if (R > r) {                                                            \
    vstore(C + r * ldc, c##r##0);                                         \
    if (NV > 1) vstore(C + r * ldc + VL, c##r##1);                        \
  }
  MK_STORE(0) MK_STORE(1) MK_STORE(2) MK_STORE(3) MK_STORE(4) MK_STORE(5)
#undef MK_STORE
}

INL void mk_nv(const int R, const int NV, int mode, float *C, size_t ldc, const float *A,
               size_t ars, size_t acs, const float *B, size_t ldb, int K, const float *rs) {
  if (mode == MK_SET) mk_tile(R, NV, MK_SET, C, ldc, A, ars, acs, B, ldb, K, rs);
  else if (mode == MK_ADD) mk_tile(R, NV, MK_ADD, C, ldc, A, ars, acs, B, ldb, K, rs);
  else mk_tile(R, NV, MK_RESCALE, C, ldc, A, ars, acs, B, ldb, K, rs);
}

INL void mk_r(const int R, int nv, int mode, float *C, size_t ldc, const float *A, size_t ars,
              size_t acs, const float *B, size_t ldb, int K, const float *rs) {
  if (nv == 2) mk_nv(R, 2, mode, C, ldc, A, ars, acs, B, ldb, K, rs);
  else mk_nv(R, 1, mode, C, ldc, A, ars, acs, B, ldb, K, rs);
}

// C[M, N] op= A[M, K] * B[K, N]; N a multiple of VL; rs: [M] (MK_RESCALE only).
INL void mm(int M, int N, int mode, float *C, size_t ldc, const float *A, size_t ars,
               size_t acs, const float *B, size_t ldb, int K, const float *rs) {
  for (int c = 0; c < N; c += 2 * VL) {
    const int nv = N - c >= 2 * VL ? 2 : 1;
    int r = 0;
    for (; r + MK_MR <= M; r += MK_MR)
      mk_r(MK_MR, nv, mode, C + (size_t)r * ldc + c, ldc, A + r * ars, ars, acs, B + c, ldb, K,
           rs ? rs + r : NULL);
    float *Cr = C + (size_t)r * ldc + c;
    const float *Ar = A + r * ars, *rr = rs ? rs + r : NULL;
    switch (M - r) {
      case 1: mk_r(1, nv, mode, Cr, ldc, Ar, ars, acs, B + c, ldb, K, rr); break;
      case 2: mk_r(2, nv, mode, Cr, ldc, Ar, ars, acs, B + c, ldb, K, rr); break;
      case 3: mk_r(3, nv, mode, Cr, ldc, Ar, ars, acs, B + c, ldb, K, rr); break;
      case 4: mk_r(4, nv, mode, Cr, ldc, Ar, ars, acs, B + c, ldb, K, rr); break;
      case 5: mk_r(5, nv, mode, Cr, ldc, Ar, ars, acs, B + c, ldb, K, rr); break;
      default: break;
    }
  }
}

// ---- tile staging ----------------------------------------------------------
static inline int rup(int x, int m) { return (x + m - 1) / m * m; }

// Bump allocation of a per-thread scratch slice (16-float aligned pieces).
static inline float *take(float **p, size_t n) {
  float *r = *p;
  *p += (n + 15) & ~(size_t)15;
  return r;
}

// Thread t's scratch slice, 64-byte aligned.
static inline float *thread_ws(const ot__attn_args *A) {
  int t = omp_get_thread_num();
  return A->ws + (size_t)t * A->ws_pt;
}

// f32 view of n rows of `src` (row stride D) starting at element `off`, with
// row stride Dp (= D rounded up to VL): the rows themselves when they are f32
// and D == Dp, else converted into buf [n, Dp] with zero padding.
static const float *rows_f32(float *buf, const void *src, size_t off, int n, int D, int Dp,
                             int bf16) {
  if (!bf16 && D == Dp) return (const float *)src + off;
  for (int r = 0; r < n; r++) {
    float *d = buf + (size_t)r * Dp;
    size_t o = off + (size_t)r * D;
    int c = 0;
    for (; c + VL <= D; c += VL) vstore(d + c, vld(src, o + c, bf16));
    for (; c < D; c++) d[c] = sld(src, o + c, bf16);
    for (; c < Dp; c++) d[c] = 0.0f;
  }
  return buf;
}

// dst[d * ld + r] = scale * src[off + r * D + d] for r < n, d < D; columns
// [n, ncols) are zeroed.
static void tr_rows(float *dst, int ld, int ncols, const void *src, size_t off, int n, int D,
                    int bf16, float scale) {
  for (int r = 0; r < n; r++) {
    size_t o = off + (size_t)r * D;
    if (bf16)
      for (int d = 0; d < D; d++) dst[(size_t)d * ld + r] = scale * sld(src, o + d, 1);
    else {
      const float *s = (const float *)src + o;
      for (int d = 0; d < D; d++) dst[(size_t)d * ld + r] = scale * s[d];
    }
  }
  if (ncols > n)
    for (int d = 0; d < D; d++) memset(dst + (size_t)d * ld + n, 0, sizeof(float) * (size_t)(ncols - n));
}

// Prefetches n rows (row stride D elements of esz bytes) at element `off` of
// src into L2, one request per cache line, so the next tile's K/V arrive while
// the current one is multiplied.
static inline void prefetch_rows(const void *src, size_t off, int n, int D, int esz) {
  const char *p = (const char *)src + off * (size_t)esz, *e = p + (size_t)n * D * esz;
  for (; p < e; p += 64) __builtin_prefetch(p, 0, 2);
}

// Row of D outputs from an f32 accumulator row times `mul`.
static inline void store_row(void *dst, size_t off, const float *acc, int D, float mul, int bf16) {
  const vf m = vset1(mul);
  int c = 0;
  for (; c + VL <= D; c += VL) vst(dst, off + c, vmul(vload(acc + c), m), bf16);
  if (c < D) vst_part(dst, off + c, vmul(vload_part(acc + c, D - c), m), D - c, bf16);
}

static inline void zero_rows(void *dst, size_t off, size_t n, int bf16) {
  memset((char *)dst + off * (bf16 ? 2 : 4), 0, n * (bf16 ? 2 : 4));
}

#endif
