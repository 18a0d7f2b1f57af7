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
// while the rows of A stream past it. Two epilogues finish softmax work while
// a tile is still in registers: MK_SET_MAX folds the new tile's column maxima
// into cm[N] (forward), MK_SET_DS turns dP into dS and the scores into P
// (backward); each saves a pass over the tile.
#ifndef OT_KERN_FLASH_MK_H
#define OT_KERN_FLASH_MK_H

#include "core/simd.h"
#include "attn_k.h"
#include <omp.h>

#define INL static inline __attribute__((always_inline))
#define MK_MR 6

// ---- base-2 softmax ------------------------------------------------------------
// The kernels fold log2(e) into the pre-scaled Q (forward) or K (backward),
// so scores come out in base 2 and p = 2^(s - m) needs no range-reduction
// multiply; the logsumexp is converted back to natural log at the edges.
#define OT_LOG2E 1.44269504088896341f
#define OT_LN2 0.693147180559945309f

// 2^t for t <= 0 (up to ~1 for rounding): the range split of vexp2_core
// (simd.h) with 2^f = 1 + f q(f), q a degree-4 fit (relative error 9e-8,
// 1.7e-7 evaluated in f32), exact at t = 0 (a query that sees one key gets
// lse = its score exactly); one FMA less than vexp2_hi, and well inside the
// kernels' 1e-6 error budget. t < -127, and -inf, give exactly 0 ([-127,
// -126.5] maps to 0); NaN stays NaN (vmax keeps its second operand when one
// is NaN).
static inline vf exp2_neg(vf t) {
  t = vmax(vset1(-127.0f), t);
  const vf r = vadd(t, vset1(OT_EXP2_SHIFT));
  const vf f = vsub(t, vsub(r, vset1(OT_EXP2_SHIFT)));
  vf q = vset1(1.3264725547e-3f);
  q = vfmadd(q, f, vset1(9.6715129302e-3f));
  q = vfmadd(q, f, vset1(5.5507337503e-2f));
  q = vfmadd(q, f, vset1(2.4022242080e-1f));
  q = vfmadd(q, f, vset1(6.9314697759e-1f));
  return vmul(vfmadd(q, f, vset1(1.0f)), vshl23(r));
}

// ---- micro-kernel ----------------------------------------------------------------
enum {
  MK_SET,      // C = A B
  MK_ADD,      // C += A B
  MK_RESCALE,  // C = C * rs[row] + A B
  MK_SET_MAX,  // C = A B; cm[col] = max(cm[col], max over the rows of C)
  MK_SET_DS,   // X holds scores S: X = P = 2^(S - ls[row]), C = P * (A B - de[row])
};

// The arrays a mode's prologue / epilogue reads or updates (others unused).
typedef struct {
  const float *rs;  // MK_RESCALE: [M] row scales
  float *cm;        // MK_SET_MAX: [N] column maxima, updated
  float *x;         // MK_SET_DS: [M, N] tile with C's row stride
  const float *ls;  // MK_SET_DS: [M] row logsumexp (base 2)
  const float *de;  // MK_SET_DS: [M] row delta
} mk_ep;

// One micro-tile: R (<= 6) rows, NV (1 or 2) vectors of columns, at row r0
// and column c0 of the whole product (where e's arrays are read).
INL void mk_tile(const int R, const int NV, const int mode, float *C, size_t ldc,
                 const float *A, size_t ars, size_t acs, const float *B, size_t ldb, int K,
                 const mk_ep *e, int r0, int c0) {
  vf c00 = vzero(), c01 = vzero(), c10 = vzero(), c11 = vzero(), c20 = vzero(), c21 = vzero();
  vf c30 = vzero(), c31 = vzero(), c40 = vzero(), c41 = vzero(), c50 = vzero(), c51 = vzero();
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
  if (mode == MK_SET_DS) {
    float *X = e->x + (size_t)r0 * ldc + c0;
#define MK_DS(r)                                                          \
  if (R > r) {                                                            \
    const vf l_ = vset1(e->ls[r0 + r]), d_ = vset1(e->de[r0 + r]);        \
    vf p_ = exp2_neg(vsub(vload(X + r * ldc), l_));                       \
    vstore(X + r * ldc, p_);                                              \
    vstore(C + r * ldc, vmul(p_, vsub(c##r##0, d_)));                     \
    if (NV > 1) {                                                         \
      p_ = exp2_neg(vsub(vload(X + r * ldc + VL), l_));                   \
      vstore(X + r * ldc + VL, p_);                                       \
      vstore(C + r * ldc + VL, vmul(p_, vsub(c##r##1, d_)));              \
    }                                                                     \
  }
    MK_DS(0) MK_DS(1) MK_DS(2) MK_DS(3) MK_DS(4) MK_DS(5)
#undef MK_DS
    return;
  }
  // C's old value joins after the loop (off the accumulation chains' critical
  // path: the loads need not complete before the first FMA)
#define MK_OLD(r)                                                         \
  if (R > r) {                                                            \
    if (mode == MK_ADD) {                                                 \
      c##r##0 = vadd(vload(C + r * ldc), c##r##0);                        \
      if (NV > 1) c##r##1 = vadd(vload(C + r * ldc + VL), c##r##1);       \
    } else {                                                              \
      const vf s_ = vset1(e->rs[r0 + r]);                                 \
      c##r##0 = vfmadd(vload(C + r * ldc), s_, c##r##0);                  \
      if (NV > 1) c##r##1 = vfmadd(vload(C + r * ldc + VL), s_, c##r##1); \
    }                                                                     \
  }
  if (mode == MK_ADD || mode == MK_RESCALE) {
    MK_OLD(0) MK_OLD(1) MK_OLD(2) MK_OLD(3) MK_OLD(4) MK_OLD(5)
  }
#undef MK_OLD
#define MK_STORE(r)                                                       \
  if (R > r) {                                                            \
    vstore(C + r * ldc, c##r##0);                                         \
    if (NV > 1) vstore(C + r * ldc + VL, c##r##1);                        \
  }
  MK_STORE(0) MK_STORE(1) MK_STORE(2) MK_STORE(3) MK_STORE(4) MK_STORE(5)
#undef MK_STORE
  if (mode == MK_SET_MAX) {
    vf m0 = c00, m1 = c01;
#define MK_MAX(r)                                                         \
  if (R > r) {                                                            \
    m0 = vmax(m0, c##r##0);                                               \
    if (NV > 1) m1 = vmax(m1, c##r##1);                                   \
  }
    MK_MAX(1) MK_MAX(2) MK_MAX(3) MK_MAX(4) MK_MAX(5)
#undef MK_MAX
    float *cm = e->cm + c0;
    vstore(cm, vmax(vload(cm), m0));
    if (NV > 1) vstore(cm + VL, vmax(vload(cm + VL), m1));
  }
}

INL void mk_nv(const int R, const int NV, int mode, float *C, size_t ldc, const float *A,
               size_t ars, size_t acs, const float *B, size_t ldb, int K, const mk_ep *e,
               int r0, int c0) {
#define MK_CALL(m) mk_tile(R, NV, m, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0)
  switch (mode) {
    case MK_SET: MK_CALL(MK_SET); break;
    case MK_ADD: MK_CALL(MK_ADD); break;
    case MK_RESCALE: MK_CALL(MK_RESCALE); break;
    case MK_SET_MAX: MK_CALL(MK_SET_MAX); break;
    default: MK_CALL(MK_SET_DS); break;
  }
#undef MK_CALL
}

INL void mk_r(const int R, int nv, int mode, float *C, size_t ldc, const float *A, size_t ars,
              size_t acs, const float *B, size_t ldb, int K, const mk_ep *e, int r0, int c0) {
  if (nv == 2) mk_nv(R, 2, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0);
  else mk_nv(R, 1, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0);
}

// Causal triangles: on a tile that crosses the diagonal, key j is visible
// to query i iff j <= i + d. MK_TRI_* tell mm which of its row / column / k
// indices are queries and keys, so it can skip what is invisible: micro-tiles
// of a score tile that are entirely masked (the caller's mask pass must still
// overwrite every masked element, whatever C holds there), and the k range of
// a row block that only meets zero probabilities.
enum {
  MK_TRI_NONE,
  MK_TRI_SCORES_KQ,  // C rows = keys, columns = queries (forward S^T)
  MK_TRI_SCORES_QK,  // C rows = queries, columns = keys (backward S, dP)
  MK_TRI_K_KEYS,     // C rows = queries, k = keys (P V, dS K)
  MK_TRI_K_QUERIES,  // C rows = keys, k = queries (P^T dO, dS^T Q)
};

INL void mk_rows(int R, int nv, int mode, float *C, size_t ldc, const float *A, size_t ars,
                 size_t acs, const float *B, size_t ldb, int K, const mk_ep *e, int r0, int c0) {
  switch (R) {
    case 6: mk_r(6, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
    case 5: mk_r(5, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
    case 4: mk_r(4, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
    case 3: mk_r(3, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
    case 2: mk_r(2, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
    default: mk_r(1, nv, mode, C, ldc, A, ars, acs, B, ldb, K, e, r0, c0); break;
  }
}

// C[M, N] op= A[M, K] * B[K, N] (op: the mode, see the enum); N a multiple of
// VL; e: the mode's arrays (NULL for MK_SET, MK_ADD); tri, d: the causal
// triangle to skip (MK_TRI_NONE: none).
INL void mm_tri(int M, int N, int mode, float *C, size_t ldc, const float *A, size_t ars,
                size_t acs, const float *B, size_t ldb, int K, const mk_ep *e, int tri, int d) {
  for (int c = 0; c < N; c += 2 * VL) {
    const int nv = N - c >= 2 * VL ? 2 : 1, W = nv * VL;
    for (int r = 0; r < M; r += MK_MR) {
      const int R = M - r < MK_MR ? M - r : MK_MR;
      int k0 = 0, k1 = K;
      if (tri == MK_TRI_SCORES_KQ && r > c + W - 1 + d) continue;
      if (tri == MK_TRI_SCORES_QK && c > r + R - 1 + d) continue;
      if (tri == MK_TRI_K_KEYS) k1 = r + R + d < 0 ? 0 : r + R + d < K ? r + R + d : K;
      if (tri == MK_TRI_K_QUERIES) k0 = r - d < 0 ? 0 : r - d < K ? r - d : K;
      mk_rows(R, nv, mode, C + (size_t)r * ldc + c, ldc, A + r * ars + (size_t)k0 * acs, ars, acs,
              B + (size_t)k0 * ldb + c, ldb, k1 - k0, e, r, c);
    }
  }
}

INL void mm(int M, int N, int mode, float *C, size_t ldc, const float *A, size_t ars,
            size_t acs, const float *B, size_t ldb, int K, const mk_ep *e) {
  mm_tri(M, N, mode, C, ldc, A, ars, acs, B, ldb, K, e, MK_TRI_NONE, 0);
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
      for (int d = 0; d < D; d++) dst[(size_t)d * ld + r] = scale * sld(src, o + d, bf16);
    else {
      const float *s = (const float *)src + o;
      for (int d = 0; d < D; d++) dst[(size_t)d * ld + r] = scale * s[d];
    }
  }
  if (ncols > n)
    for (int d = 0; d < D; d++) memset(dst + (size_t)d * ld + n, 0, sizeof(float) * (size_t)(ncols - n));
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
