// Weight-only quantized linear kernels (one source for every ISA, see simd.h):
// y[M, N] = x[M, K] @ W^T (+ bias) with W [N, K] stored f32, bf16 or int8
// (scales per row or per group of columns), f32 activations and accumulation.
//
// Decode is bandwidth-bound: W is streamed exactly once for all M rows of x.
// M = 1: the rows go to the threads in a few contiguous chunks; each chunk is
// split into QG_S streams (contiguous row ranges) read side by side, one row
// of each at a time (m1_chunk): several sequential streams per thread keep
// more DRAM reads in flight than one. The weights are converted in registers
// and multiplied straight into the dot products (int8: the group's partial dot
// product is scaled once per group); on ISAs with OT_SIMD_QDOT (AVX2) bf16 /
// int8 use x prepared once per call (bf16: de-interleaved; int8: rounded to
// int16 per chunk, integer multiply-adds; see m1_i8_rows), each vector of x
// loaded once for the QG_S rows. M > 1: blocks of QG_R rows shared by the
// threads in contiguous chunks, each prefetching the next; each block's
// weights are converted in registers for all M rows at once (M <= QG_FUSED),
// or dequantized chunk by chunk (QG_KC columns) into an L1-resident f32 panel;
// f32 / bf16 weights go through wide tiles of 2 rows x up to 8 (AVX-512) or 4
// activation rows, each weight vector loaded and converted once per tile.
#include "core/simd.h"
#include "qgemv_k.h"
#include "qpack_k.h"
#include <omp.h>

#define AI static inline __attribute__((always_inline))
#define QG_R 4           // output rows per block
#define QG_MT 8          // most activation rows per register tile
#define QG_FUSED 4       // bf16/int8 with M <= QG_FUSED: weights converted in registers, no panel
#define QG_ACC OT__QK_GEMV_MAX   // accumulator slots per output row
#define QG_KC 512        // columns per dequantized chunk: a multiple of every group and of VL
#define QG_PAR_MIN 65536 // weight bytes below which one thread does everything
#define QG_CHUNKS 32     // chunks of output rows the threads share dynamically
#define QG_S 4           // M = 1: rows read side by side, each from its own stream (2 alike, 8 slower)
#define QG_M1_CHUNKS 16  // M = 1: most chunks of rows
#define QG_M1_DIST 512   // M = 1: prefetch distance in each stream, bytes (256-1024 measured alike, 4096 slower)
#define QG_YB (16 / QG_R) // blocks of output rows per 64 bytes of y

// VL weights of row pointer p from column i as f32 (int8: unscaled), or the first n.
AI vf wload(int kind, const void *p, size_t i) {
  if (kind == OT__QK_F32) return vload((const float *)p + i);
  if (kind == OT__QK_BF16) return vload_bf16((const uint16_t *)p + i);
  return vload_i8((const int8_t *)p + i);
}
AI vf wload_part(int kind, const void *p, size_t i, int n) {
  if (kind == OT__QK_F32) return vload_part((const float *)p + i, n);
  if (kind == OT__QK_BF16) return vload_bf16_part((const uint16_t *)p + i, n);
  return vload_i8_part((const int8_t *)p + i, n);
}

static size_t wsize(int kind) { return kind == OT__QK_F32 ? 4 : kind == OT__QK_BF16 ? 2 : 1; }

// Column group of W: its width (the whole row unless int8 per group) and count per row.
static int group_cols(const ot__qk_weight *W) { return W->kind == OT__QK_INT8 && W->group ? W->group : W->cols; }

// Software prefetch for R rows: the bytes [kb, kb + nb) of each row, `dist`
// bytes further (M > 1: the same columns QG_R rows on; M = 1: further along the
// row's own stream), one 64-byte line at a time; a step of nb < 64 bytes issues
// only when it starts a line. Measured on Zen 3 at M = 1, one thread (before the
// streams of m1_chunk): int8 +30-50%, bf16 +20% over the hardware prefetcher
// alone, f32 unchanged. M > 1 prefetches into L2 only (far): its
// tiles take longer per byte, and into L1 the next block's lines (4 rows ahead)
// evict the current ones; bench_qgemv --m 8 on the GPT-2 logits matrix, f32:
// 9.4 -> 6.6 ms (Zen 4, 2 threads). Prefetches never fault; integer arithmetic
// forms the address (it may point past W).
AI void prefetch_rows_at(int far, int R, const void *const *row, size_t kb, size_t nb, size_t dist) {
  if (nb < 64 && (kb & 63)) return;
  for (size_t o = 0; o < (nb < 64 ? 64 : nb); o += 64)
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const void *a = (const void *)((uintptr_t)row[r] + kb + o + dist);
      if (far) __builtin_prefetch(a, 0, 2);   // L2 (M > 1)
      else __builtin_prefetch(a, 0, 3);       // L1 (M = 1)
    }
}

// ---- M = 1 -----------------------------------------------------------------
// y[idx[r]] = dot(W[idx[r]], x) (+ bias) for r < R: R rows from R different
// streams (see m1_chunk) read side by side, each prefetching QG_M1_DIST bytes ahead.
// GC: the int8 group as a compile-time constant (32, 64, 128: the group's loop
// unrolls), 0 = W's. A row's result does not depend on R or its slot.
AI void m1_rows(int kind, int R, int GC, const ot__qk_weight *W, const int *idx, const float *x, float *y,
                const float *bias) {
  const int K = W->cols, G = GC ? GC : group_cols(W), ng = K / G;
  const size_t es = wsize(kind);
  const char *row[QG_S];
  vf acc[QG_S];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    row[r] = (const char *)W->data + (size_t)idx[r] * K * wsize(kind);
    acc[r] = vzero();
  }
  for (int g = 0; g < ng; g++) {
    const int k0 = g * G, k1 = k0 + G;
    vf p[QG_S], q[QG_S];   // two chains per row: FMA latency, not throughput, would bound one
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) p[r] = q[r] = vzero();
    int k = k0;
#pragma GCC unroll 8
    for (; k + 2 * VL <= k1; k += 2 * VL) {
      prefetch_rows_at(0, R, (const void *const *)row, (size_t)k * es, 2 * VL * es, QG_M1_DIST);
      const vf x0 = vload(x + k), x1 = vload(x + k + VL);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        p[r] = vfmadd(wload(kind, row[r], (size_t)k), x0, p[r]);
        q[r] = vfmadd(wload(kind, row[r], (size_t)k + VL), x1, q[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) p[r] = vadd(p[r], q[r]);
    for (; k + VL <= k1; k += VL) {
      const vf xv = vload(x + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) p[r] = vfmadd(wload(kind, row[r], (size_t)k), xv, p[r]);
    }
    if (k < k1) {
      const vf xv = vload_part(x + k, k1 - k);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) p[r] = vfmadd(wload_part(kind, row[r], (size_t)k, k1 - k), xv, p[r]);
    }
    if (kind == OT__QK_INT8) {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) acc[r] = vfmadd(p[r], vset1(W->scales[(size_t)idx[r] * ng + g]), acc[r]);
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) acc[r] = vadd(acc[r], p[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) y[idx[r]] = vsum(acc[r]) + (bias ? bias[idx[r]] : 0.0f);
}

#ifdef OT_SIMD_QDOT
// ---- M = 1 with activations prepared once per call (ISAs with OT_SIMD_QDOT) --
// int8: x [K] becomes int16 chunks of QX_C columns (the int8 group when W has
// groups), each with its own f32 scale: sx[c] = amax_c / QX_MAX, xq ~ x / sx[c]
// rounded to nearest even (computed as x * (QX_MAX / amax_c) in f32), stored per
// VQ8 columns as vqdot_i8 takes them (even columns, then odd), zero past K up to
// a multiple of VQ8. Every VQ8 weights then cost a load, three shifts, two
// multiply-adds of int16 pairs and two integer adds; a chunk's exact int32 dot
// product is converted and scaled once (sw * sx[c]).
// Error: |x[k] - sx[c] xq[k]| <= sx[c] (1/2 + 2^-9) (the f32 product's error
// is at most 2^-24 * QX_MAX + the reciprocal's), i.e. ~2^-16 of the chunk's
// largest |x|; for x uniform on [-max, max], rms(dx) / rms(x) = 1 / (2 * 32767)
// = 1.5e-5, ~100x below the int8 weights' own rounding (2^-8 of their group
// max). tests/test_quant.c checks every output against this bound.
#define QX_MAX 32767.0f
#define QX_C 128          // per-channel int8: activation chunk width (a multiple of VQ8)
#define QX_TINY 0x1p-100f   // a chunk whose |x| are all below: zero (< 2^-93 |w| per chunk)

// x [K] -> xq [roundup(K, VQ8)] int16, sx [ceil(K / C)] f32 as described above.
// false (nothing usable) when x holds a NaN or an infinity, or all |x| < QX_TINY:
// the caller takes the f32 path then (NaN propagates, tiny values keep their precision).
static bool quant_x(const float *x, int K, int C, int16_t *xq, float *sx) {
  float gmax = 0.0f;
  for (int c = 0, k0 = 0; k0 < K; c++, k0 += C) {
    const int k1 = k0 + C < K ? k0 + C : K;
    vf m = vzero(), z = vzero();   // z: sum of 0 * x, NaN iff some x is NaN or infinite
    int k = k0;
    for (; k + VL <= k1; k += VL) {
      const vf v = vload(x + k);
      m = vmax(m, vmax(v, vsub(vzero(), v)));
      z = vfmadd(v, vzero(), z);
    }
    float amax = vhmax(m), zs = vsum(z);
    for (; k < k1; k++) { amax = fmaxf(amax, fabsf(x[k])); zs += 0.0f * x[k]; }
    if (zs != 0.0f) return false;
    gmax = fmaxf(gmax, amax);
    if (amax < QX_TINY) amax = 0.0f;
    const float inv = amax > 0.0f ? QX_MAX / amax : 0.0f;
    sx[c] = amax / QX_MAX;
    for (k = k0; k + VQ8 <= k1; k += VQ8) vstore_i16_eo(xq + k, xq + k + VQ8 / 2, x + k, vset1(inv));
    if (k < k1) {   // the last columns of x (C is a multiple of VQ8): zero-padded
      float t[VQ8] = {0};
      memcpy(t, x + k, sizeof(float) * (size_t)(k1 - k));
      vstore_i16_eo(xq + k, xq + k + VQ8 / 2, t, vset1(inv));
    }
  }
  return gmax >= QX_TINY;
}

// y[idx[r]] = dot(W[idx[r]], x) (+ bias), r < R, W int8 with x prepared by
// quant_x: R rows from R streams side by side (see m1_rows), each vector of x
// loaded once for all R. A row's result does not depend on R or its slot.
AI void m1_i8_rows(int GC, int R, const ot__qk_weight *W, const int *idx, const int16_t *xq, const float *sx,
                   float *y, const float *bias) {
  const int K = W->cols, G = GC ? GC : W->group, C = G ? G : QX_C, ng = G ? K / G : 1;
  const int8_t *row[QG_S];
  const float *sw[QG_S];
  vf acc[QG_S];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    row[r] = (const int8_t *)W->data + (size_t)idx[r] * K;
    sw[r] = G ? W->scales + (size_t)idx[r] * ng : NULL;
    acc[r] = vzero();
  }
  for (int c = 0, k0 = 0; k0 < K; c++, k0 += C) {
    const int nk = GC ? GC : G ? G : (K - k0 < C ? (K - k0) & ~(VQ8 - 1) : C);
    vi a[QG_S];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) a[r] = vzero_i32();
#pragma GCC unroll 4
    for (int j = 0; j < nk; j += VQ8) {
      prefetch_rows_at(0, R, (const void *const *)row, (size_t)(k0 + j), VQ8, QG_M1_DIST);
      const vi xe = vload_i16x(xq + k0 + j), xo = vload_i16x(xq + k0 + j + VQ8 / 2);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) a[r] = vqdot_i8(a[r], row[r] + k0 + j, xe, xo);
    }
    if (!G && k0 + nk < K && nk < C) {   // per channel: the last K % VQ8 columns
      const int k = k0 + nk;
      for (int r = 0; r < R; r++) {
        int8_t t[VQ8] = {0};
        memcpy(t, row[r] + k, (size_t)(K - k));
        a[r] = vqdot_i8(a[r], t, vload_i16x(xq + k), vload_i16x(xq + k + VQ8 / 2));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = vfmadd(vcvt_i2f(a[r]), vset1(G ? sw[r][c] * sx[c] : sx[c]), acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    y[idx[r]] = vsum(acc[r]) * (G ? 1.0f : W->scales[idx[r]]) + (bias ? bias[idx[r]] : 0.0f);
}

// bf16: x [K] de-interleaved per VQB columns, xp[j + i] = x[j + 2 i] and
// xp[j + VQB / 2 + i] = x[j + 2 i + 1] (i < VQB / 2, j a multiple of VQB, up to
// K rounded down to VQB), to match vload_bf16_eo's halves.
static void deinterleave_x(const float *x, int K, float *xp) {
  for (int j = 0; j + VQB <= K; j += VQB)
    for (int i = 0; i < VQB / 2; i++) {
      xp[j + i] = x[j + 2 * i];
      xp[j + VQB / 2 + i] = x[j + 2 * i + 1];
    }
}

// bf16: R rows from R streams side by side (see m1_i8_rows), two FMA chains per row.
AI void m1_bf16_rows(int R, const ot__qk_weight *W, const int *idx, const float *xp, const float *x, float *y,
                     const float *bias) {
  const int K = W->cols;
  const uint16_t *row[QG_S];
  vf p[QG_S], q[QG_S];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    row[r] = (const uint16_t *)W->data + (size_t)idx[r] * K;
    p[r] = q[r] = vzero();
  }
  int k = 0;
#pragma GCC unroll 2
  for (; k + VQB <= K; k += VQB) {
    prefetch_rows_at(0, R, (const void *const *)row, (size_t)k * 2, VQB * 2, QG_M1_DIST);
    const vf xe = vload(xp + k), xo = vload(xp + k + VQB / 2);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      vf e, o;
      vload_bf16_eo(row[r] + k, &e, &o);
      p[r] = vfmadd(e, xe, p[r]);
      q[r] = vfmadd(o, xo, q[r]);
    }
  }
  for (; k < K; k += VL) {
    const int t = K - k < VL ? K - k : VL;
    const vf xv = vload_part(x + k, t);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) p[r] = vfmadd(vload_bf16_part(row[r] + k, t), xv, p[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) y[idx[r]] = vsum(vadd(p[r], q[r])) + (bias ? bias[idx[r]] : 0.0f);
}

#endif

// ---- M > 1 -----------------------------------------------------------------
// Register tile over one chunk of columns: acc[r * QG_ACC + m] += sum_j
// W(r, j) x[m * ldx + j] for r < R, m < MT, j < kc, where W(r, j) =
// row[r][wk0 + j] as f32 (kind) times, for int8, the scale scl[r][g0 + j / G]
// (the chunk starts on a group boundary; per-channel: G >= kc, one scale).
// Each weight vector is converted once and used for all MT activation rows.
// pf > 0: prefetch the rows pf bytes further (see prefetch_rows_at).
AI void tile(int kind, int R, int MT, const void *const *row, int wk0, const float *const *scl, int g0, int G,
             int kc, const float *x, size_t ldx, vf *acc, size_t pf) {
  vf a[QG_R][QG_MT];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int m = 0; m < MT; m++) a[r][m] = acc[r * QG_ACC + m];
  const int gw = kind == OT__QK_INT8 ? G : kc;
  for (int j0 = 0, g = g0; j0 < kc; j0 += gw, g++) {
    const int j1 = j0 + gw < kc ? j0 + gw : kc;
    vf s[QG_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) s[r] = kind == OT__QK_INT8 ? vset1(scl[r][g]) : vzero();
    int j = j0;
    for (; j + VL <= j1; j += VL) {
      if (pf) prefetch_rows_at(1, R, row, (size_t)(wk0 + j) * wsize(kind), VL * wsize(kind), pf);
      vf xv[QG_MT];
#pragma GCC unroll 8
      for (int m = 0; m < MT; m++) xv[m] = vload(x + m * ldx + j);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf w = wload(kind, row[r], (size_t)(wk0 + j));
        if (kind == OT__QK_INT8) w = vmul(w, s[r]);
#pragma GCC unroll 8
        for (int m = 0; m < MT; m++) a[r][m] = vfmadd(w, xv[m], a[r][m]);
      }
    }
    if (j < j1) {
      const int t = j1 - j;
      vf xv[QG_MT];
#pragma GCC unroll 8
      for (int m = 0; m < MT; m++) xv[m] = vload_part(x + m * ldx + j, t);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf w = wload_part(kind, row[r], (size_t)(wk0 + j), t);
        if (kind == OT__QK_INT8) w = vmul(w, s[r]);
#pragma GCC unroll 8
        for (int m = 0; m < MT; m++) a[r][m] = vfmadd(w, xv[m], a[r][m]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int m = 0; m < MT; m++) acc[r * QG_ACC + m] = a[r][m];
}

// panel[r * QG_KC + j] = W(r, j) dequantized to f32 as in tile, r < R, j < kc.
AI void dequant_chunk(int kind, int R, const void *const *row, int wk0, const float *const *scl, int g0, int G,
                      int kc, float *panel) {
  const int gw = kind == OT__QK_INT8 ? G : kc;
  for (int r = 0; r < R; r++) {
    float *d = panel + r * QG_KC;
    for (int j0 = 0, g = g0; j0 < kc; j0 += gw, g++) {
      const int j1 = j0 + gw < kc ? j0 + gw : kc;
      const vf s = kind == OT__QK_INT8 ? vset1(scl[r][g]) : vzero();
      int j = j0;
      for (; j + VL <= j1; j += VL) {
        const vf v = wload(kind, row[r], (size_t)(wk0 + j));
        vstore(d + j, kind == OT__QK_INT8 ? vmul(v, s) : v);
      }
      if (j < j1) {
        const vf v = wload_part(kind, row[r], (size_t)(wk0 + j), j1 - j);
        vstore_part(d + j, kind == OT__QK_INT8 ? vmul(v, s) : v, j1 - j);
      }
    }
  }
}

// Wide tiles: activation rows in tiles of QG_MW x QG_RW weight rows (rr, mt
// compile-time after the switch), the weights converted in registers (bf16)
// and read once from memory per tile pass; the first pass prefetches pf ahead.
#if VL >= 16
#define QG_MW 8          // activation rows per wide tile: 16 accumulators + 8 x + 2 w of 32 registers
#else
#define QG_MW 4          // 8 accumulators + 4 x + 2 w of 16 registers
#endif
#define QG_RW 2
AI void wide_tiles(int kind, int R, const void *const *row, int wk0, int kc, const float *x, size_t ldx, int M,
                   vf *acc, size_t pf) {
  for (int m = 0; m < M; m += QG_MW, pf = 0) {
    const int mt = M - m < QG_MW ? M - m : QG_MW;
    for (int r0 = 0; r0 < R; r0 += QG_RW) {
      const void *const *rw = row + r0;
      vf *ac = acc + r0 * QG_ACC + m;
      const float *xm = x + m * ldx;
#define QG_W(RR, MM) tile(kind, RR, MM, rw, wk0, NULL, 0, 0, kc, xm, ldx, ac, pf)
#define QG_WM(RR)                                                   \
  switch (mt) {                                                     \
    case 1: QG_W(RR, 1); break;                                     \
    case 2: QG_W(RR, 2); break;                                     \
    case 3: QG_W(RR, 3); break;                                     \
    case 4: QG_W(RR, 4); break;                                     \
    case 5: QG_W(RR, QG_MW > 4 ? 5 : 1); break;                     \
    case 6: QG_W(RR, QG_MW > 4 ? 6 : 1); break;                     \
    case 7: QG_W(RR, QG_MW > 4 ? 7 : 1); break;                     \
    default: QG_W(RR, QG_MW > 4 ? 8 : 1); break;                    \
  }
      if (R - r0 >= 2) { QG_WM(2) } else { QG_WM(1) }
#undef QG_WM
#undef QG_W
    }
  }
}

// y[m, n + r] = dot(W[n + r], x[m]) (+ bias) for r < R, m < M (2 <= M <= OT__QK_GEMV_MAX).
// f32 / bf16 weights: wide tiles straight from W (bf16 converted in registers).
// int8 (the int8 GEMM takes most M > 1 calls, see ops/quant.c) with M <= QG_FUSED:
// one tile of all M rows converting the weights in registers (pairs of rows,
// to fit the registers); larger M: each chunk dequantized once into an f32
// panel (L1) that wide tiles read.
AI void mb_rows(int kind, int R, const ot__qk_weight *W, int n, const float *x, int M, float *y,
                const float *bias) {
  const int K = W->cols, N = W->rows, G = group_cols(W), ng = K / G;
  const size_t pf = (size_t)QG_R * K * wsize(kind);
  const void *row[QG_R];
  const float *scl[QG_R], *prow[QG_R];
  vf acc[QG_R * QG_ACC];
  float panel[QG_R * QG_KC];
  for (int r = 0; r < R; r++) {
    row[r] = (const char *)W->data + (size_t)(n + r) * K * wsize(kind);
    scl[r] = kind == OT__QK_INT8 ? W->scales + (size_t)(n + r) * ng : NULL;
    prow[r] = panel + r * QG_KC;
  }
  for (int r = 0; r < R; r++)
    for (int m = 0; m < M; m++) acc[r * QG_ACC + m] = vzero();
  for (int k0 = 0; k0 < K; k0 += QG_KC) {
    const int kc = K - k0 < QG_KC ? K - k0 : QG_KC, g0 = kind == OT__QK_INT8 ? k0 / G : 0;
    const float *xc = x + k0;
    if (kind != OT__QK_INT8) {
      wide_tiles(kind, R, row, k0, kc, xc, (size_t)K, M, acc, pf);
    } else if (M <= QG_FUSED) {
#define QG_FUSED_TILE(RR, MM) tile(kind, RR, MM, row + r0, k0, scl + r0, g0, G, kc, xc, (size_t)K, acc + r0 * QG_ACC, pf)
      if (M == 2 && R == QG_R) {   // 4 rows x 2: 8 accumulator chains
        const int r0 = 0;
        QG_FUSED_TILE(QG_R, 2);
      } else {
        for (int r0 = 0; r0 < R; r0 += 2) {   // pairs of rows x 2..4
          if (R - r0 >= 2) { if (M == 2) QG_FUSED_TILE(2, 2); else if (M == 3) QG_FUSED_TILE(2, 3); else QG_FUSED_TILE(2, 4); }
          else { if (M == 2) QG_FUSED_TILE(1, 2); else if (M == 3) QG_FUSED_TILE(1, 3); else QG_FUSED_TILE(1, 4); }
        }
      }
#undef QG_FUSED_TILE
    } else {
      dequant_chunk(kind, R, row, k0, scl, g0, G, kc, panel);   // (prefetching here measured slower)
      wide_tiles(OT__QK_F32, R, (const void *const *)prow, 0, kc, xc, (size_t)K, M, acc, 0);
    }
  }
  for (int r = 0; r < R; r++)
    for (int m = 0; m < M; m++) y[(size_t)m * N + n + r] = vsum(acc[r * QG_ACC + m]) + (bias ? bias[n + r] : 0.0f);
}

// Activations of an M = 1 call prepared once for every row (see m1_i8_rows /
// m1_bf16_rows); NULL pointers: the plain m1_rows path.
typedef struct {
  const int16_t *xq;   // int8 W: x as int16 chunks
  const float *sx;     // int8 W: the chunks' scales
  const float *xp;     // bf16 W: x de-interleaved
} m1_prep;

// M = 1, R rows idx[0 .. R) (R = QG_S or 1), dispatched to the kernel for W's kind and group.
AI void m1_kernel(int kind, int R, const ot__qk_weight *W, const int *idx, const float *x, float *y,
                  const float *bias, const m1_prep *pp) {
#ifdef OT_SIMD_QDOT
  if (kind == OT__QK_INT8 && pp->xq) {
    if (W->group == 32) m1_i8_rows(32, R, W, idx, pp->xq, pp->sx, y, bias);
    else if (W->group == 64) m1_i8_rows(64, R, W, idx, pp->xq, pp->sx, y, bias);
    else if (W->group == 128) m1_i8_rows(128, R, W, idx, pp->xq, pp->sx, y, bias);
    else m1_i8_rows(0, R, W, idx, pp->xq, pp->sx, y, bias);
    return;
  }
  if (kind == OT__QK_BF16 && pp->xp) {
    m1_bf16_rows(R, W, idx, pp->xp, x, y, bias);
    return;
  }
#else
  (void)pp;
#endif
  if (kind != OT__QK_INT8 || !W->group) m1_rows(kind, R, 0, W, idx, x, y, bias);
  else if (W->group == 32) m1_rows(kind, R, 32, W, idx, x, y, bias);
  else if (W->group == 64) m1_rows(kind, R, 64, W, idx, x, y, bias);
  else m1_rows(kind, R, 128, W, idx, x, y, bias);
}

// M = 1 over output rows [c0, c1): split into QG_S contiguous streams, read
// side by side one row of each at a time. Several sequential streams per
// thread keep more DRAM reads in flight than one: `bench_qgemv --streams` (two
// threads summing 256 MiB) read 22 GB/s with one stream per thread and 31-32
// GB/s with four, 30 with eight; in bench_qgemv the GPT-2 logits matrix went
// from 3490 to 1898 us in bf16, 1560 to 1250 us in int8/g64.
AI void m1_chunk(int kind, const ot__qk_weight *W, int c0, int c1, const float *x, float *y, const float *bias,
                 const m1_prep *pp) {
  const int L = (c1 - c0 + QG_S - 1) / QG_S;
  for (int i = 0; i < L; i++) {
    int idx[QG_S], R = 0;
    for (int s = 0; s < QG_S; s++)
      if (c0 + s * L + i < c1) idx[R++] = c0 + s * L + i;
    if (R == QG_S) m1_kernel(kind, QG_S, W, idx, x, y, bias, pp);
    else
      for (int r = 0; r < R; r++) m1_kernel(kind, 1, W, idx + r, x, y, bias, pp);
  }
}

// M = 1 on the team (ot__team_for): item i = output rows [i w, (i + 1) w), its
// inputs (x, the prepared x) in the team's buffer, W and bias by pointer.
typedef struct {
  ot__qk_weight W;
  const float *x, *bias;
  m1_prep pp;
  int w;
} m1_job;

static void m1_item(const void *ctx, long i, float *dst, float *scratch) {
  (void)scratch;
  const m1_job *j = ctx;
  const int c0 = (int)i * j->w, c1 = c0 + j->w < j->W.rows ? c0 + j->w : j->W.rows;
  switch (j->W.kind) {
    case OT__QK_F32: m1_chunk(OT__QK_F32, &j->W, c0, c1, j->x, dst, j->bias, &j->pp); break;
    case OT__QK_BF16: m1_chunk(OT__QK_BF16, &j->W, c0, c1, j->x, dst, j->bias, &j->pp); break;
    default: m1_chunk(OT__QK_INT8, &j->W, c0, c1, j->x, dst, j->bias, &j->pp); break;
  }
}

// Rows [n, n + QG_R) of the output (M > 1), or the rows from n to N one at a time.
AI void block(int kind, const ot__qk_weight *W, int n, const float *x, int M, float *y, const float *bias) {
  const int N = W->rows;
  if (n + QG_R <= N) mb_rows(kind, QG_R, W, n, x, M, y, bias);
  else
    for (int i = n; i < N; i++) mb_rows(kind, 1, W, i, x, M, y, bias);
}

// y[M, N] = x[M, K] @ W^T (+ bias[N]), 1 <= M <= OT__QK_GEMV_MAX, W checked by the caller.
// M = 1: the rows in 2 chunks per thread (at most QG_M1_CHUNKS), handed out to
// whichever thread is free (a thread slowed by another process on its core
// does less), each read as QG_S streams (m1_chunk). M > 1: blocks of QG_R output
// rows, handed out in QG_CHUNKS contiguous chunks. Each output row is computed
// by one thread in a fixed order, so the result does not depend on the thread
// count or timing. The kind is dispatched per chunk so that each kind's loops
// are compiled for it alone. M = 1 over bf16 / int8 on ISAs with OT_SIMD_QDOT:
// x is first prepared into this thread's scratch. OT_ENOMEM if that scratch
// cannot be had.
ot_status OT_K(k_qgemv)(float *y, const float *x, const ot__qk_weight *W, const float *bias, int M) {
  const int N = W->rows, K = W->cols;
  const size_t bytes = (size_t)N * K * wsize(W->kind);
  if (M == 1) {
    m1_prep pp = {NULL, NULL, NULL};
    const int par = bytes >= QG_PAR_MIN && N >= 4 * QG_S;
    // the team: x (and its prepared form) copied into the team's buffer, which
    // stays mapped for a preempted helper that reads it late
    const bool team = par && ot__team_acquire();
    char *tb = NULL;
    if (team) {
      if (!(tb = ot__team_buf(ot_align64((size_t)K * 4) + (size_t)K * 4 + (size_t)K * 2 + 4096))) {
        ot__team_release();
        return OT_ENOMEM;
      }
      memcpy(tb, x, (size_t)K * 4);
      x = (const float *)tb;
      tb += ot_align64((size_t)K * 4);
    }
#ifdef OT_SIMD_QDOT
    if (W->kind != OT__QK_F32) {
      const int C = W->kind == OT__QK_INT8 && W->group ? W->group : QX_C, nc = (K + C - 1) / C;
      const size_t kq = ((size_t)K + VQ8 - 1) / VQ8 * VQ8;
      char *ws = tb ? tb : ot_scratch(W->kind == OT__QK_INT8 ? kq * 2 + (size_t)nc * 4 : (size_t)K * 4);
      if (!ws) return OT_ENOMEM;
      if (W->kind == OT__QK_BF16) {
        deinterleave_x(x, K, (float *)ws);
        pp.xp = (const float *)ws;
      } else if (quant_x(x, K, C, (int16_t *)(ws + (size_t)nc * 4), (float *)ws)) {
        pp.sx = (const float *)ws;
        pp.xq = (const int16_t *)(ws + (size_t)nc * 4);
      }
    }
#endif
    if (team) {
      // items of 16 KiB to 256 KiB of weights, a multiple of QG_S rows (ot__qk_team_width)
      const int w = ot__qk_team_width(N, (size_t)K * wsize(W->kind), ot__team_size(), QG_S);
      const m1_job job = {*W, x, bias, pp, w};
      const ot_status s = ot__team_for(y, N, w, m1_item, &job, sizeof job, ot__team_steal_get());
      ot__team_release();
      return s;
    }
    int nch = par ? 2 * omp_get_max_threads() : 1;
    if (nch > QG_M1_CHUNKS) nch = QG_M1_CHUNKS;
#pragma omp parallel for schedule(dynamic, 1) if (nch > 1)
    for (int c = 0; c < nch; c++) {
      const int c0 = (int)((long)N * c / nch), c1 = (int)((long)N * (c + 1) / nch);
      switch (W->kind) {
        case OT__QK_F32: m1_chunk(OT__QK_F32, W, c0, c1, x, y, bias, &pp); break;
        case OT__QK_BF16: m1_chunk(OT__QK_BF16, W, c0, c1, x, y, bias, &pp); break;
        default: m1_chunk(OT__QK_INT8, W, c0, c1, x, y, bias, &pp); break;
      }
    }
    return OT_OK;
  }
  // chunks of whole 64-byte lines of y (QG_YB blocks), so that two threads never write
  // the same line of y (a precaution for short rows; no speed-up measured on this machine)
  const long nb = (N + QG_R - 1) / QG_R, c0 = nb / QG_CHUNKS > 1 ? nb / QG_CHUNKS : 1;
  const long chunk = (c0 + QG_YB - 1) / QG_YB * QG_YB;
#pragma omp parallel for schedule(dynamic, chunk) if (bytes >= QG_PAR_MIN && nb > 1)
  for (long b = 0; b < nb; b++) {
    const int n = (int)b * QG_R;
    switch (W->kind) {
      case OT__QK_F32: block(OT__QK_F32, W, n, x, M, y, bias); break;
      case OT__QK_BF16: block(OT__QK_BF16, W, n, x, M, y, bias); break;
      default: block(OT__QK_INT8, W, n, x, M, y, bias); break;
    }
  }
  return OT_OK;
}

// dst[(n - n0) * K + k] = W[n, k] dequantized to f32 for n in [n0, n1) (threaded).
void OT_K(k_qdequant_rows)(float *dst, const ot__qk_weight *W, int n0, int n1) {
  const int K = W->cols, G = group_cols(W), ng = K / G;
  if (W->pack == OT_K(k_qpk_width)()) {   // packed by this ISA: panels transposed back
    OT_K(k_qpk_unpack)(dst, W->data, K, n0, n1);
    return;
  }
  const int kind = W->kind;
  const size_t es = wsize(kind);
#pragma omp parallel for schedule(static) if ((size_t)(n1 - n0) * K >= QG_PAR_MIN)
  for (int n = n0; n < n1; n++) {
    const char *row = (const char *)W->data + (size_t)n * K * es;
    float *d = dst + (size_t)(n - n0) * K;
    if (W->pack) {   // f32 in panels of another ISA's width
      ot__qpk_row(d, W->data, W->pack, K, n);
      continue;
    }
    for (int g = 0; g < ng; g++) {
      const int k1 = (g + 1) * G;
      int k = g * G;
      if (kind == OT__QK_INT8) {
        const vf s = vset1(W->scales[(size_t)n * ng + g]);
        for (; k + VL <= k1; k += VL) vstore(d + k, vmul(vload_i8((const int8_t *)row + k), s));
        if (k < k1) vstore_part(d + k, vmul(vload_i8_part((const int8_t *)row + k, k1 - k), s), k1 - k);
      } else if (kind == OT__QK_BF16) {
        for (; k + VL <= k1; k += VL) vstore(d + k, vload_bf16((const uint16_t *)row + k));
        if (k < k1) vstore_part(d + k, vload_bf16_part((const uint16_t *)row + k, k1 - k), k1 - k);
      } else {
        memcpy(d, row, (size_t)K * 4);
      }
    }
  }
}
