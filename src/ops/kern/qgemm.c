// The int8 x int8 -> int32 GEMM of the quantized linear (one source for every
// ISA, see simd.h): y[M, N] = x[M, K] @ W^T (+ bias) with W [N, K] int8 (a scale
// per row or per group of 32 / 64 / 128 columns) and x quantized per row to
// int8 on the fly (k_qx_i8).
//
// Dot-product form: W and xq are read as stored, row-major along K (no packed
// copy of the weights); a register tile of QM_NR weight rows x QM_MR activation
// rows keeps QM_NR * QM_MR vector accumulators whose lanes hold partial sums
// over K. Each step of VQ columns loads QM_NR weight vectors (|w| once per
// vector, vq_wabs) and QM_MR activation vectors and issues QM_NR * QM_MR
// vq_dot (AVX2: vpsignb, vpmaddubsw, vpmaddwd, vpaddd; AVX-512 with VNNI: one
// vpdpbusd over activations offset by 128, the accumulators starting at -128
// times the weights' sums, themselves one vpdpbusd per weight vector and group,
// computed in a pass over the group's weights before it). At the end of each weight
// group the int32 lanes are converted and multiplied by the group's scale into
// f32 lanes (per-channel: once, at the end of the row); the lanes are summed
// and scaled by the activation row's scale last, then the bias is added.
// Blocking: the threads share the weight rows in chunks; within a chunk the
// activation rows go in blocks of QM_XBLOCK bytes (kept in L2 while every
// weight row pair of the chunk passes over them).
#if defined(OT_ARCH_AVX512)
// VNNI (vpdpbusd) in this file's AVX-512 variant: ops/quant.c runs it only on
// CPUs that have it (the AVX2 variant otherwise). Before simd.h, which then
// defines the VNNI form of the int8 dot products.
#pragma GCC target("avx512vnni")
#endif
#include "core/simd.h"
#include "qgemm_k.h"
#include <omp.h>

#define AI static inline __attribute__((always_inline))
#define QM_MR 4                   // activation rows per register tile
#if defined(OT_ARCH_AVX512)
#define QM_NR 4                   // weight rows per register tile (32 vector registers)
#else
#define QM_NR 2                   // weight rows per register tile (16 vector registers)
#endif
#define QM_XBLOCK (96 << 10)      // bytes of xq per block of activation rows
#define QM_CHUNKS 32              // chunks of weight row pairs the threads share dynamically
#define QM_PAR_MIN 65536          // MACs below which one thread does everything

bool OT_K(k_qx_i8)(int8_t *xq, float *sx, const float *x, int M, int K, int Kp) {
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if ((long)M * K >= QM_PAR_MIN)
  for (int m = 0; m < M; m++) {
    const float *xr = x + (size_t)m * K;
    int8_t *q = xq + (size_t)m * Kp;
    vf mx = vzero(), z = vzero();   // z: sum of 0 * x, NaN iff some x is NaN or infinite
    int k = 0;
    for (; k + VL <= K; k += VL) {
      const vf v = vload(xr + k);
      mx = vmax(mx, vmax(v, vsub(vzero(), v)));
      z = vfmadd(v, vzero(), z);
    }
    float amax = vhmax(mx), zs = vsum(z);
    for (int j = k; j < K; j++) {
      amax = fmaxf(amax, fabsf(xr[j]));
      zs += 0.0f * xr[j];
    }
    if (zs != 0.0f) {
      bad = 1;
      continue;
    }
    if (amax < OT__QX_TINY) amax = 0.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    sx[m] = amax / 127.0f;
    const vf s = vset1(inv);
    for (k = 0; k + VL <= K; k += VL) vstore_i8_round(q + k, vmul(vload(xr + k), s));
    for (; k < K; k++) q[k] = (int8_t)nearbyintf(xr[k] * inv);
    memset(q + K, 0, (size_t)(Kp - K));
#if VQ_XOFF == 128
    for (k = 0; k < Kp; k++) q[k] = (int8_t)((uint8_t)q[k] ^ 0x80);   // + 128 as unsigned bytes
#endif
  }
  return !bad;
}

// y[m + i, n + r] for r < R, i < MT (see k_qgemm_i8). GC: the group as a
// compile-time constant (32, 64, 128; 0 = per channel, one group of K).
AI void tile(int R, int MT, int GC, const ot__qk_weight *W, int n, const int8_t *xq, int Kp, const float *sx,
             int m, float *y, const float *bias) {
  const int K = W->cols, N = W->rows, G = GC ? GC : K, ng = K / G;
  const int8_t *wr[QM_NR], *xr[QM_MR];
  const float *sw[QM_NR];
  vqf f[QM_NR][QM_MR];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    wr[r] = (const int8_t *)W->data + (size_t)(n + r) * K;
    sw[r] = W->scales + (size_t)(n + r) * ng;
  }
#pragma GCC unroll 4
  for (int i = 0; i < MT; i++) {
    xr[i] = xq + (size_t)(m + i) * Kp;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) f[r][i] = vqf_zero();
  }
  for (int g = 0; g < ng; g++) {
    const int k1 = (g + 1) * G;
    vq a[QM_NR][QM_MR];
    if (VQ_XOFF) {   // the group's weight sums first: the accumulators start at -VQ_XOFF times them
      vq cs[QM_NR];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) cs[r] = vq_zero();
      int k = g * G;
#pragma GCC unroll 4
      for (; k + VQ <= k1; k += VQ)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) cs[r] = vq_wsum(cs[r], vq_load(wr[r] + k));
      if (!GC && k < k1)
        for (int r = 0; r < R; r++) cs[r] = vq_wsum(cs[r], vq_load_part(wr[r] + k, k1 - k));
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const vq s = vq_unoff(cs[r]);
#pragma GCC unroll 4
        for (int i = 0; i < MT; i++) a[r][i] = s;
      }
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i < MT; i++) a[r][i] = vq_zero();
    }
    int k = g * G;
#pragma GCC unroll 2
    for (; k + VQ <= k1; k += VQ) {
      vq w[QM_NR], wa[QM_NR];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        w[r] = vq_load(wr[r] + k);
        wa[r] = vq_wabs(w[r]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MT; i++) {
        const vq xv = vq_load(xr[i] + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) a[r][i] = vq_dot(a[r][i], wa[r], w[r], xv);
      }
    }
    if (!GC && k < k1) {   // per channel: the last K % VQ columns (xq is zero from K on)
      vq w[QM_NR], wa[QM_NR];
      for (int r = 0; r < R; r++) {
        w[r] = vq_load_part(wr[r] + k, k1 - k);
        wa[r] = vq_wabs(w[r]);
      }
      for (int i = 0; i < MT; i++) {
        const vq xv = vq_load(xr[i] + k);
        for (int r = 0; r < R; r++) a[r][i] = vq_dot(a[r][i], wa[r], w[r], xv);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int i = 0; i < MT; i++) f[r][i] = vqf_fma(f[r][i], a[r][i], sw[r][g]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int i = 0; i < MT; i++)
      y[(size_t)(m + i) * N + n + r] = vqf_sum(f[r][i]) * sx[m + i] + (bias ? bias[n + r] : 0.0f);
}

// Weight rows [n, n + R) x activation rows [m0, m1), in tiles of QM_MR rows.
AI void rows(int R, int GC, const ot__qk_weight *W, int n, const int8_t *xq, int Kp, const float *sx, int m0,
             int m1, float *y, const float *bias) {
  int m = m0;
  for (; m + QM_MR <= m1; m += QM_MR) tile(R, QM_MR, GC, W, n, xq, Kp, sx, m, y, bias);
  switch (m1 - m) {
    case 3: tile(R, 3, GC, W, n, xq, Kp, sx, m, y, bias); break;
    case 2: tile(R, 2, GC, W, n, xq, Kp, sx, m, y, bias); break;
    case 1: tile(R, 1, GC, W, n, xq, Kp, sx, m, y, bias); break;
    default: break;
  }
}

// Pairs of weight rows [p0, p1) over every activation row, block by block; GC as in tile.
AI void chunk(int GC, const ot__qk_weight *W, int p0, int p1, const int8_t *xq, int Kp, const float *sx, int M,
              int MB, float *y, const float *bias) {
  const int N = W->rows;
  for (int m0 = 0; m0 < M; m0 += MB) {
    const int m1 = M - m0 < MB ? M : m0 + MB;
    for (int p = p0; p < p1; p++) {
      const int n = p * QM_NR;
      if (n + QM_NR <= N && GC && QM_NR == 4) {   // per group: tiles of 2 rows (f32 sums in registers too)
        rows(2, GC, W, n, xq, Kp, sx, m0, m1, y, bias);
        rows(2, GC, W, n + 2, xq, Kp, sx, m0, m1, y, bias);
      } else if (n + QM_NR <= N) rows(QM_NR, GC, W, n, xq, Kp, sx, m0, m1, y, bias);
      else
        for (int i = n; i < N; i++) rows(1, GC, W, i, xq, Kp, sx, m0, m1, y, bias);
    }
  }
}

void OT_K(k_qgemm_i8)(float *y, const int8_t *xq, const float *sx, int M, int Kp, const ot__qk_weight *W,
                      const float *bias) {
  const int N = W->rows, np = (N + QM_NR - 1) / QM_NR;
  int MB = (int)(QM_XBLOCK / Kp) / QM_MR * QM_MR;
  if (MB < QM_MR) MB = QM_MR;
  const int par = (double)M * N * W->cols >= QM_PAR_MIN && np > 1;
  const int nch = par ? (np < QM_CHUNKS ? np : QM_CHUNKS) : 1;
#pragma omp parallel for schedule(dynamic, 1) if (nch > 1)
  for (int c = 0; c < nch; c++) {
    const int p0 = (int)((long)np * c / nch), p1 = (int)((long)np * (c + 1) / nch);
    switch (W->group) {
      case 32: chunk(32, W, p0, p1, xq, Kp, sx, M, MB, y, bias); break;
      case 64: chunk(64, W, p0, p1, xq, Kp, sx, M, MB, y, bias); break;
      case 128: chunk(128, W, p0, p1, xq, Kp, sx, M, MB, y, bias); break;
      default: chunk(0, W, p0, p1, xq, Kp, sx, M, MB, y, bias); break;
    }
  }
}
