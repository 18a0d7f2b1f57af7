// The linear layer over f32 weights packed in panels (layout: qpack_k.h), one
// source for every ISA (see simd.h). Decode with a few sequences is bound by
// how fast the weights stream in; the row-major dot-product form (kern/qgemv.c)
// reads several rows side by side and, at 8 rows of x, reached 55-61% of STREAM
// on GPT-2's shapes here (quiet, `bench_qgemv --no-prefill --only f32`: logits
// 5906 us), this form 85-100% (3632 us). Packed, each panel is one sequential stream, and the
// broadcast form needs no horizontal sums: per k, NV weight vectors are loaded
// once and multiplied by each row's x[m, k] broadcast (MT x NV accumulators:
// AVX-512 8 x 2 of 32 registers, AVX2 6 x 2 of 16, portable 4 x 4 scalars). The
// panels are the own GEMM's packed B for the whole contraction (k_sg_pack_b).
// With one or two rows, the two halves of k go to two sets of accumulators, so
// that the FMA latency does not bound the loop; one row (single-stream decode)
// reads PK_S whole panels side by side, each its own stream, x[k] broadcast once
// for all. Prefill takes the same kernel: a panel (P x K floats, L2-sized) is
// read from memory once and multiplied by all M rows of x in tiles of MT.
#include "core/simd.h"
#include "qpack_k.h"
#include "sgemm_k.h"
#include <omp.h>
#include <string.h>

#if VL >= 16
#  define NV 2
#  define MT 8
#elif VL > 1
#  define NV 2
#  define MT 6
#else
#  define NV 4
#  define MT 4
#endif
#define PW (NV * VL)            // panel width
#define PK_PAR_MIN 65536        // weight bytes below which one thread does everything
#define PK_CHUNKS 32            // M > 1: chunks of panels the threads share dynamically
#define AI static inline __attribute__((always_inline))

int OT_K(k_qpk_width)(void) { return PW; }

// The own GEMM's B panels for the whole contraction (kern/sgemm.c, B stored transposed).
void OT_K(k_qpk_pack)(float *dst, const float *W, int N, int K) {
  const int np = (N + PW - 1) / PW;
#pragma omp parallel for schedule(static) if ((size_t)N * K >= PK_PAR_MIN)
  for (int p = 0; p < np; p++) OT_K(k_sg_pack_b)(dst, W, OT_SK_F32, (size_t)K, 1, K, N, p, p + 1);
}

void OT_K(k_qpk_unpack)(float *dst, const float *D, int K, int n0, int n1) {
  const int p0 = n0 / PW, p1 = (n1 + PW - 1) / PW;
#pragma omp parallel for schedule(static) if ((size_t)(n1 - n0) * K >= PK_PAR_MIN)
  for (int p = p0; p < p1; p++) {
    const float *pn = D + (size_t)p * PW * K;
    const int c0 = p * PW < n0 ? n0 - p * PW : 0, c1 = (p + 1) * PW > n1 ? n1 - p * PW : PW;
    int k = 0;
#if VL > 1
    if (c0 == 0 && c1 == PW) {   // whole panel: VL x VL blocks transposed in registers
      for (; k + VL <= K; k += VL)
        for (int c = 0; c < PW; c += VL) {
          vf t[VL];
#pragma GCC unroll 16
          for (int i = 0; i < VL; i++) t[i] = vload(pn + (size_t)(k + i) * PW + c);
          vtranspose(t);   // t[j] lane i = W(p PW + c + j, k + i)
#pragma GCC unroll 16
          for (int j = 0; j < VL; j++) vstore(dst + (size_t)(p * PW + c + j - n0) * K + k, t[j]);
        }
    }
#endif
    for (int c = c0; c < c1; c++) {
      float *d = dst + (size_t)(p * PW + c - n0) * K;
      for (int kk = k; kk < K; kk++) d[kk] = pn[(size_t)kk * PW + c];
    }
  }
}

// v's part of a row of the tile (columns v VL .. of nc valid ones): store, or
// store the first nc - v VL lanes.
AI void store_cols(float *y, int v, int nc, vf a) {
  const int c0 = v * VL;
  if (c0 + VL <= nc) vstore(y + c0, a);
  else if (c0 < nc) vstore_part(y + c0, a, nc - c0);
}

AI vf load_cols(const float *b, int v, int nc) {
  const int c0 = v * VL;
  return c0 + VL <= nc ? vload(b + c0) : c0 < nc ? vload_part(b + c0, nc - c0) : vzero();
}

// y[m * ldy + c] = sum_k x[m * K + k] * pn[k * PW + c] (+ bias[c]) for m < mt, c < nc
// (nc <= PW; mt <= MT, a constant after the switch in panel()).
AI void tile(int mt, const float *pn, int K, const float *x, float *y, size_t ldy, int nc, const float *bias) {
  vf a[MT][NV], b[MT][NV];
#pragma GCC unroll 8
  for (int m = 0; m < mt; m++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) a[m][v] = b[m][v] = vzero();
  int k = 0;
  if (mt <= 2) {   // two sets of accumulators over the two halves of k: two streams
    const int h = K / 2;
    for (; k < h; k++) {
      const float *p0 = pn + (size_t)k * PW, *p1 = pn + (size_t)(k + h) * PW;
      vf w0[NV], w1[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) {
        w0[v] = vload(p0 + v * VL);
        w1[v] = vload(p1 + v * VL);
      }
#pragma GCC unroll 2
      for (int m = 0; m < mt; m++) {
        const vf x0 = vset1(x[(size_t)m * K + k]), x1 = vset1(x[(size_t)m * K + k + h]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
          a[m][v] = vfmadd(w0[v], x0, a[m][v]);
          b[m][v] = vfmadd(w1[v], x1, b[m][v]);
        }
      }
    }
    k = 2 * h;   // K odd: its last k below
  }
  for (; k < K; k++) {
    const float *p0 = pn + (size_t)k * PW;
    vf w[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) w[v] = vload(p0 + v * VL);
#pragma GCC unroll 8
    for (int m = 0; m < mt; m++) {
      const vf xb = vset1(x[(size_t)m * K + k]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) a[m][v] = vfmadd(w[v], xb, a[m][v]);
    }
  }
  vf bs[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; v++) bs[v] = bias ? load_cols(bias, v, nc) : vzero();
#pragma GCC unroll 8
  for (int m = 0; m < mt; m++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) store_cols(y + (size_t)m * ldy, v, nc, vadd(vadd(a[m][v], b[m][v]), bs[v]));
}

// One panel (output columns n0 .. n0 + nc of y, y and bias already offset to n0) for all M rows.
AI void panel(const float *pn, int K, const float *x, int M, float *y, size_t ldy, int nc, const float *bias) {
  for (int m = 0; m < M; m += MT) {
    const int mt = M - m < MT ? M - m : MT;
    const float *xm = x + (size_t)m * K;
    float *ym = y + (size_t)m * ldy;
#define PK_T(n) case n: tile(n <= MT ? n : 1, pn, K, xm, ym, ldy, nc, bias); break;
    switch (mt) {
      PK_T(1) PK_T(2) PK_T(3) PK_T(4) PK_T(5) PK_T(6) PK_T(7)
      default: tile(MT, pn, K, xm, ym, ldy, nc, bias); break;
    }
#undef PK_T
  }
}

// M = 1 over PK_S whole panels pp[s] at once (each its own stream, as the row-major
// GEMV reads QG_S rows side by side): y[s * PW + c] (y at each panel's first column).
#define PK_S 4
AI void m1_panels(const float *const *pp, int K, const float *x, float *const *y, const float *const *bias) {
  vf a[PK_S][NV];
#pragma GCC unroll 4
  for (int s = 0; s < PK_S; s++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) a[s][v] = vzero();
  for (int k = 0; k < K; k++) {
    const vf xb = vset1(x[k]);
#pragma GCC unroll 4
    for (int s = 0; s < PK_S; s++)
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) a[s][v] = vfmadd(vload(pp[s] + (size_t)k * PW + v * VL), xb, a[s][v]);
  }
#pragma GCC unroll 4
  for (int s = 0; s < PK_S; s++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) vstore(y[s] + v * VL, bias[s] ? vadd(a[s][v], vload(bias[s] + v * VL)) : a[s][v]);
}

// Panels [p0, p1) of W for the M rows of x.
static void panels(const ot__qk_weight *W, int p0, int p1, const float *x, int M, float *y, size_t ldy,
                   const float *bias) {
  const int N = W->rows, K = W->cols;
  if (M == 1) {   // PK_S streams of whole panels side by side, the rest one by one
    const int full = N / PW < p1 ? N / PW : p1, L = full > p0 ? (full - p0) / PK_S : 0;
    for (int i = 0; i < L; i++) {
      const float *pp[PK_S], *bb[PK_S];
      float *yy[PK_S];
      for (int s = 0; s < PK_S; s++) {
        const int p = p0 + s * L + i;
        pp[s] = (const float *)W->data + (size_t)p * PW * K;
        yy[s] = y + (size_t)p * PW;
        bb[s] = bias ? bias + (size_t)p * PW : NULL;
      }
      m1_panels(pp, K, x, yy, bb);
    }
    p0 += PK_S * L;
  }
  for (int p = p0; p < p1; p++) {
    const int n0 = p * PW, nc = N - n0 < PW ? N - n0 : PW;
    panel((const float *)W->data + (size_t)p * PW * K, K, x, M, y + n0, ldy, nc, bias ? bias + n0 : NULL);
  }
}

// M = 1 on the team (ot__team_for): item i = output rows [i w, (i + 1) w) (w a
// multiple of PW), x in the team's buffer, W and bias by pointer.
typedef struct {
  ot__qk_weight W;
  const float *x, *bias;
  int w;
} pk_job;

static void pk_item(const void *ctx, long i, float *dst, float *scratch) {
  (void)scratch;
  const pk_job *j = ctx;
  const int p0 = (int)i * j->w / PW, p1 = (int)(((long)i + 1) * j->w / PW);
  const int np = (j->W.rows + PW - 1) / PW;
  panels(&j->W, p0, p1 < np ? p1 : np, j->x, 1, dst, (size_t)j->W.rows, j->bias);
}

ot_status OT_K(k_qpk_linear)(float *y, const float *x, const ot__qk_weight *W, const float *bias, int M) {
  const int N = W->rows, K = W->cols, np = (N + PW - 1) / PW;
  const bool par = (size_t)N * K * 4 >= PK_PAR_MIN && np > 1;
  if (M == 1 && par && ot__team_acquire()) {
    // x copied into the team's buffer, which stays mapped for a preempted helper that reads it late
    float *xb = ot__team_buf((size_t)K * 4);
    if (!xb) {
      ot__team_release();
      return OT_ENOMEM;
    }
    memcpy(xb, x, (size_t)K * 4);
    const pk_job job = {*W, xb, bias, ot__qk_team_width(N, (size_t)K * 4, ot__team_size(), PW)};
    const ot_status s = ot__team_for(y, N, job.w, pk_item, &job, sizeof job, ot__team_steal_get());
    ot__team_release();
    return s;
  }
  const int chunk = np / PK_CHUNKS > 1 ? np / PK_CHUNKS : 1;
#pragma omp parallel for schedule(dynamic, chunk) if (par)
  for (int p = 0; p < np; p++) panels(W, p, p + 1, x, M, y, (size_t)N, bias);
  return OT_OK;
}
