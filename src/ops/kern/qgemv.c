// Weight-only quantized linear kernels (one source for every ISA, see simd.h):
// y[M, N] = x[M, K] @ W^T (+ bias) with W [N, K] stored f32, bf16 or int8
// (scales per row or per group of columns), f32 activations and accumulation.
//
// Decode is bandwidth-bound: W is streamed exactly once for all M rows of x.
// Output rows are split into blocks of QG_R, shared by the OpenMP threads in
// contiguous chunks; each block prefetches the next. M = 1: the weights are converted
// in registers and multiplied straight into the dot products (int8: the
// group's partial dot product is scaled once per group). M > 1: each block's
// weights are converted in registers for all M rows at once (M <= QG_FUSED),
// or dequantized chunk by chunk (QG_KC columns) into an L1-resident f32 panel
// that register tiles of QG_R rows x QG_MT_F32 activation rows reuse.
#include "simd.h"
#include "ot/quant.h"

#define AI static inline __attribute__((always_inline))
#define QG_R 4           // output rows per block
#define QG_MT 4          // most activation rows per register tile
#define QG_MT_F32 3      // activation rows per tile over f32 weights (QG_R * 3 accumulators)
#define QG_FUSED 4       // bf16/int8 with M <= QG_FUSED: weights converted in registers, no panel
#define QG_ACC OT_QLINEAR_GEMV_MAX   // accumulator slots per output row
#define QG_KC 512        // columns per dequantized chunk: a multiple of every group and of VL
#define QG_PAR_MIN 65536 // weight bytes below which one thread does everything
#define QG_CHUNKS 32     // chunks of output rows the threads share dynamically

// VL weights of row pointer p from column i as f32 (int8: unscaled), or the first n.
AI vf wload(int kind, const void *p, size_t i) {
  if (kind == OT_QW_F32) return vload((const float *)p + i);
  if (kind == OT_QW_BF16) return vload_bf16((const uint16_t *)p + i);
  return vload_i8((const int8_t *)p + i);
}
AI vf wload_part(int kind, const void *p, size_t i, int n) {
  if (kind == OT_QW_F32) return vload_part((const float *)p + i, n);
  if (kind == OT_QW_BF16) return vload_bf16_part((const uint16_t *)p + i, n);
  return vload_i8_part((const int8_t *)p + i, n);
}

static size_t wsize(int kind) { return kind == OT_QW_F32 ? 4 : kind == OT_QW_BF16 ? 2 : 1; }

// Column group of W: its width (the whole row unless int8 per group) and count per row.
static int group_cols(const ot_qweight *W) { return W->kind == OT_QW_INT8 && W->group ? W->group : W->cols; }

// Software prefetch of the next block of rows: for each of R rows, the bytes
// [kb, kb + nb) of the row `dist` bytes further (the same columns QG_R rows
// on), one 64-byte line at a time; a step of nb < 64 bytes issues only when it
// starts a line. Measured on Zen 3 at M = 1, one thread: int8 +30-50%, bf16
// +20% over the hardware prefetcher alone, f32 unchanged; a longer distance or
// another locality hint changed nothing. Prefetches never fault; integer
// arithmetic forms the address (it may point past W).
AI void prefetch_rows(int R, const void *const *row, size_t kb, size_t nb, size_t dist) {
  if (nb < 64 && (kb & 63)) return;
  for (size_t o = 0; o < (nb < 64 ? 64 : nb); o += 64)
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) __builtin_prefetch((const void *)((uintptr_t)row[r] + kb + o + dist), 0, 3);
}

// ---- M = 1 -----------------------------------------------------------------
// y[n + r] = dot(W[n + r], x) (+ bias) for r < R. GC: the int8 group as a
// compile-time constant (32, 64, 128: the group's loop unrolls), 0 = W's.
AI void m1_rows(int kind, int R, int GC, const ot_qweight *W, int n, const float *x, float *y, const float *bias) {
  const int K = W->cols, G = GC ? GC : group_cols(W), ng = K / G;
  const size_t es = wsize(kind), dist = (size_t)QG_R * K * es;
  const char *row[QG_R];
  vf acc[QG_R];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    row[r] = (const char *)W->data + (size_t)(n + r) * K * wsize(kind);
    acc[r] = vzero();
  }
  for (int g = 0; g < ng; g++) {
    const int k0 = g * G, k1 = k0 + G;
    vf p[QG_R], q[QG_R];   // two chains per row: FMA latency, not throughput, would bound one
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) p[r] = q[r] = vzero();
    int k = k0;
#pragma GCC unroll 8
    for (; k + 2 * VL <= k1; k += 2 * VL) {
      prefetch_rows(R, (const void *const *)row, (size_t)k * es, 2 * VL * es, dist);
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
    if (kind == OT_QW_INT8) {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) acc[r] = vfmadd(p[r], vset1(W->scales[(size_t)(n + r) * ng + g]), acc[r]);
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) acc[r] = vadd(acc[r], p[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) y[n + r] = vsum(acc[r]) + (bias ? bias[n + r] : 0.0f);
}

// ---- M > 1 -----------------------------------------------------------------
// Register tile over one chunk of columns: acc[r * QG_ACC + m] += sum_j
// W(r, j) x[m * ldx + j] for r < R, m < MT, j < kc, where W(r, j) =
// row[r][wk0 + j] as f32 (kind) times, for int8, the scale scl[r][g0 + j / G]
// (the chunk starts on a group boundary; per-channel: G >= kc, one scale).
// Each weight vector is converted once and used for all MT activation rows.
// pf > 0: prefetch the rows pf bytes further (see prefetch_rows).
AI void tile(int kind, int R, int MT, const void *const *row, int wk0, const float *const *scl, int g0, int G,
             int kc, const float *x, size_t ldx, vf *acc, size_t pf) {
  vf a[QG_R][QG_MT];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int m = 0; m < MT; m++) a[r][m] = acc[r * QG_ACC + m];
  const int gw = kind == OT_QW_INT8 ? G : kc;
  for (int j0 = 0, g = g0; j0 < kc; j0 += gw, g++) {
    const int j1 = j0 + gw < kc ? j0 + gw : kc;
    vf s[QG_R];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) s[r] = kind == OT_QW_INT8 ? vset1(scl[r][g]) : vzero();
    int j = j0;
    for (; j + VL <= j1; j += VL) {
      if (pf) prefetch_rows(R, row, (size_t)(wk0 + j) * wsize(kind), VL * wsize(kind), pf);
      vf xv[QG_MT];
#pragma GCC unroll 4
      for (int m = 0; m < MT; m++) xv[m] = vload(x + m * ldx + j);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf w = wload(kind, row[r], (size_t)(wk0 + j));
        if (kind == OT_QW_INT8) w = vmul(w, s[r]);
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++) a[r][m] = vfmadd(w, xv[m], a[r][m]);
      }
    }
    if (j < j1) {
      const int t = j1 - j;
      vf xv[QG_MT];
#pragma GCC unroll 4
      for (int m = 0; m < MT; m++) xv[m] = vload_part(x + m * ldx + j, t);
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        vf w = wload_part(kind, row[r], (size_t)(wk0 + j), t);
        if (kind == OT_QW_INT8) w = vmul(w, s[r]);
#pragma GCC unroll 4
        for (int m = 0; m < MT; m++) a[r][m] = vfmadd(w, xv[m], a[r][m]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int m = 0; m < MT; m++) acc[r * QG_ACC + m] = a[r][m];
}

// panel[r * QG_KC + j] = W(r, j) dequantized to f32 as in tile, r < R, j < kc.
AI void dequant_chunk(int kind, int R, const void *const *row, int wk0, const float *const *scl, int g0, int G,
                      int kc, float *panel) {
  const int gw = kind == OT_QW_INT8 ? G : kc;
  for (int r = 0; r < R; r++) {
    float *d = panel + r * QG_KC;
    for (int j0 = 0, g = g0; j0 < kc; j0 += gw, g++) {
      const int j1 = j0 + gw < kc ? j0 + gw : kc;
      const vf s = kind == OT_QW_INT8 ? vset1(scl[r][g]) : vzero();
      int j = j0;
      for (; j + VL <= j1; j += VL) {
        const vf v = wload(kind, row[r], (size_t)(wk0 + j));
        vstore(d + j, kind == OT_QW_INT8 ? vmul(v, s) : v);
      }
      if (j < j1) {
        const vf v = wload_part(kind, row[r], (size_t)(wk0 + j), j1 - j);
        vstore_part(d + j, kind == OT_QW_INT8 ? vmul(v, s) : v, j1 - j);
      }
    }
  }
}

// Activation rows in register tiles of QG_MT_F32 over one chunk (weights
// already f32); the first tile prefetches pf bytes ahead (0: none).
AI void tiles_f32(int R, const float *const *row, int wk0, int kc, const float *x, size_t ldx, int M, vf *acc,
                  size_t pf) {
  const void *const *rw = (const void *const *)row;
  int m = 0;
  for (; m + QG_MT_F32 <= M; m += QG_MT_F32, pf = 0)
    tile(OT_QW_F32, R, QG_MT_F32, rw, wk0, NULL, 0, 0, kc, x + m * ldx, ldx, acc + m, pf);
  if (M - m == 2) tile(OT_QW_F32, R, 2, rw, wk0, NULL, 0, 0, kc, x + m * ldx, ldx, acc + m, pf);
  if (M - m == 1) tile(OT_QW_F32, R, 1, rw, wk0, NULL, 0, 0, kc, x + m * ldx, ldx, acc + m, pf);
}

// y[m, n + r] = dot(W[n + r], x[m]) (+ bias) for r < R, m < M (2 <= M <= OT_QLINEAR_GEMV_MAX).
// f32 weights: register tiles straight from W. bf16/int8 with M <= QG_FUSED:
// one tile of all M rows converting the weights in registers (pairs of rows,
// to fit the registers); larger M: each chunk dequantized once into an f32
// panel (L1) that the tiles read.
AI void mb_rows(int kind, int R, const ot_qweight *W, int n, const float *x, int M, float *y,
                const float *bias) {
  const int K = W->cols, N = W->rows, G = group_cols(W), ng = K / G;
  const size_t pf = (size_t)QG_R * K * wsize(kind);
  const void *row[QG_R];
  const float *scl[QG_R], *prow[QG_R];
  vf acc[QG_R * QG_ACC];
  float panel[QG_R * QG_KC];
  for (int r = 0; r < R; r++) {
    row[r] = (const char *)W->data + (size_t)(n + r) * K * wsize(kind);
    scl[r] = kind == OT_QW_INT8 ? W->scales + (size_t)(n + r) * ng : NULL;
    prow[r] = panel + r * QG_KC;
  }
  for (int i = 0; i < QG_R * QG_ACC; i++) acc[i] = vzero();
  for (int k0 = 0; k0 < K; k0 += QG_KC) {
    const int kc = K - k0 < QG_KC ? K - k0 : QG_KC, g0 = kind == OT_QW_INT8 ? k0 / G : 0;
    const float *xc = x + k0;
    if (kind == OT_QW_F32) {
      tiles_f32(R, (const float *const *)row, k0, kc, xc, (size_t)K, M, acc, pf);
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
      tiles_f32(R, prow, 0, kc, xc, (size_t)K, M, acc, 0);
    }
  }
  for (int r = 0; r < R; r++)
    for (int m = 0; m < M; m++) y[(size_t)m * N + n + r] = vsum(acc[r * QG_ACC + m]) + (bias ? bias[n + r] : 0.0f);
}

// Rows [n, n + QG_R) of the output, or the rows from n to N one at a time.
AI void block(int kind, const ot_qweight *W, int n, const float *x, int M, float *y, const float *bias) {
  const int N = W->rows;
  if (n + QG_R <= N) {
    if (M > 1) mb_rows(kind, QG_R, W, n, x, M, y, bias);
    else if (kind != OT_QW_INT8 || !W->group) m1_rows(kind, QG_R, 0, W, n, x, y, bias);
    else if (W->group == 32) m1_rows(kind, QG_R, 32, W, n, x, y, bias);
    else if (W->group == 64) m1_rows(kind, QG_R, 64, W, n, x, y, bias);
    else m1_rows(kind, QG_R, 128, W, n, x, y, bias);
  } else {
    for (int i = n; i < N; i++) {
      if (M == 1) m1_rows(kind, 1, 0, W, i, x, y, bias);
      else mb_rows(kind, 1, W, i, x, M, y, bias);
    }
  }
}

// y[M, N] = x[M, K] @ W^T (+ bias[N]), 1 <= M <= OT_QLINEAR_GEMV_MAX, W checked by the caller.
// Blocks of QG_R output rows, handed out in QG_CHUNKS contiguous chunks to
// whichever thread is free (a thread slowed by another process on its core
// does less); each output row is computed by one thread in a fixed order, so
// the result does not depend on the thread count or timing. The kind is
// dispatched per block so that each kind's loops are compiled for it alone.
void OT_K(k_qgemv)(float *y, const float *x, const ot_qweight *W, const float *bias, int M) {
  const int N = W->rows;
  const long nb = (N + QG_R - 1) / QG_R, chunk = nb / QG_CHUNKS > 1 ? nb / QG_CHUNKS : 1;
  const size_t bytes = (size_t)N * W->cols * wsize(W->kind);
#pragma omp parallel for schedule(dynamic, chunk) if (bytes >= QG_PAR_MIN && nb > 1)
  for (long b = 0; b < nb; b++) {
    const int n = (int)b * QG_R;
    switch (W->kind) {
      case OT_QW_F32: block(OT_QW_F32, W, n, x, M, y, bias); break;
      case OT_QW_BF16: block(OT_QW_BF16, W, n, x, M, y, bias); break;
      default: block(OT_QW_INT8, W, n, x, M, y, bias); break;
    }
  }
}

// dst[(n - n0) * K + k] = W[n, k] dequantized to f32 for n in [n0, n1) (threaded).
void OT_K(k_qdequant_rows)(float *dst, const ot_qweight *W, int n0, int n1) {
  const int K = W->cols, G = group_cols(W), ng = K / G;
  const int kind = W->kind;
  const size_t es = wsize(kind);
#pragma omp parallel for schedule(static) if ((size_t)(n1 - n0) * K >= QG_PAR_MIN)
  for (int n = n0; n < n1; n++) {
    const char *row = (const char *)W->data + (size_t)n * K * es;
    float *d = dst + (size_t)(n - n0) * K;
    for (int g = 0; g < ng; g++) {
      const int k1 = (g + 1) * G;
      int k = g * G;
      if (kind == OT_QW_INT8) {
        const vf s = vset1(W->scales[(size_t)n * ng + g]);
        for (; k + VL <= k1; k += VL) vstore(d + k, vmul(vload_i8((const int8_t *)row + k), s));
        if (k < k1) vstore_part(d + k, vmul(vload_i8_part((const int8_t *)row + k, k1 - k), s), k1 - k);
      } else if (kind == OT_QW_BF16) {
        for (; k + VL <= k1; k += VL) vstore(d + k, vload_bf16((const uint16_t *)row + k));
        if (k < k1) vstore_part(d + k, vload_bf16_part((const uint16_t *)row + k, k1 - k), k1 - k);
      } else {
        memcpy(d, row, (size_t)K * 4);
      }
    }
  }
}
