// Scalar f32 references for GEMM, linear and fused QKV (tests only): plain
// loops, one thread, dot products accumulated in double.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>
#include <stdlib.h>

// C[M,N] = alpha op(A) op(B) + beta C (beta == 0: C is not read).
void ot_ref_gemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int p = 0; p < K; p++) {
        double a = transA ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
        double b = transB ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
        s += a * b;
      }
      float *c = &C[(size_t)i * ldc + j];
      *c = beta == 0.0f ? (float)(alpha * s) : (float)(alpha * s + (double)beta * *c);
    }
}

static const double GELU_K = 0.7978845608028654;  // sqrt(2/pi)
static float gelu(float x) {
  double u = GELU_K * (x + 0.044715 * (double)x * x * x);
  return (float)(0.5 * x * (1.0 + tanh(u)));
}
static float gelu_grad(float x) {
  double u = GELU_K * (x + 0.044715 * (double)x * x * x), t = tanh(u);
  return (float)(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3 * 0.044715 * (double)x * x));
}

// x: [M,K], w: [N,K], b: [N] or NULL -> y: [M,N] = act(x w^T + b); pre: [M,N]
// receives x w^T + b when non-NULL.
void ot_ref_linear_fwd(float *y, float *pre, const float *x, const float *w, const float *b,
                       int M, int N, int K, ot_act act) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = b ? b[j] : 0.0;
      for (int p = 0; p < K; p++) s += (double)x[(size_t)i * K + p] * w[(size_t)j * K + p];
      float z = (float)s;
      if (pre) pre[(size_t)i * N + j] = z;
      y[(size_t)i * N + j] = act == OT_ACT_GELU ? gelu(z) : z;
    }
}

// dy: [M,N] (overwritten by dy * gelu'(pre) when act = GELU); dx: [M,K] = dy w
// (NULL: skip); dw: [N,K] += dy^T x; db: [N] += column sums of dy (NULL: skip).
void ot_ref_linear_bwd(float *dx, float *dw, float *db, float *dy, const float *pre,
                       const float *x, const float *w, int M, int N, int K, ot_act act) {
  if (act == OT_ACT_GELU)
    for (size_t i = 0; i < (size_t)M * N; i++) dy[i] *= gelu_grad(pre[i]);
  if (dx)
    for (int i = 0; i < M; i++)
      for (int p = 0; p < K; p++) {
        double s = 0;
        for (int j = 0; j < N; j++) s += (double)dy[(size_t)i * N + j] * w[(size_t)j * K + p];
        dx[(size_t)i * K + p] = (float)s;
      }
  for (int j = 0; j < N; j++)
    for (int p = 0; p < K; p++) {
      double s = 0;
      for (int i = 0; i < M; i++) s += (double)dy[(size_t)i * N + j] * x[(size_t)i * K + p];
      dw[(size_t)j * K + p] += (float)s;
    }
  if (db)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int i = 0; i < M; i++) s += dy[(size_t)i * N + j];
      db[j] += (float)s;
    }
}

// Output feature n = h*D + d of the fused projection belongs to q head h
// (h < Hq), k head h - Hq, or v head h - Hq - Hkv; element of row b*T + t.
static float *qkv_slot(float *q, float *k, float *v, int b, int t, int n, int T, int Hq, int Hkv,
                       int D) {
  int h = n / D, d = n % D;
  if (h < Hq) return &q[(((size_t)b * Hq + h) * T + t) * D + d];
  if (h < Hq + Hkv) return &k[(((size_t)b * Hkv + h - Hq) * T + t) * D + d];
  return &v[(((size_t)b * Hkv + h - Hq - Hkv) * T + t) * D + d];
}

// x: [B,T,C], w: [(Hq+2Hkv)D, C], b: [(Hq+2Hkv)D] or NULL -> q: [B,Hq,T,D],
// k, v: [B,Hkv,T,D].
void ot_ref_qkv_fwd(float *q, float *k, float *v, const float *x, const float *w, const float *b,
                    int B, int T, int C, int Hq, int Hkv, int D) {
  int Nt = (Hq + 2 * Hkv) * D;
  for (int bb = 0; bb < B; bb++)
    for (int t = 0; t < T; t++)
      for (int n = 0; n < Nt; n++) {
        const float *xr = &x[((size_t)bb * T + t) * C];
        double s = b ? b[n] : 0.0;
        for (int c = 0; c < C; c++) s += (double)xr[c] * w[(size_t)n * C + c];
        *qkv_slot(q, k, v, bb, t, n, T, Hq, Hkv, D) = (float)s;
      }
}

// dq: [B,Hq,T,D], dk, dv: [B,Hkv,T,D] -> dx: [B,T,C] (overwritten),
// dw: [(Hq+2Hkv)D, C] +=, db: [(Hq+2Hkv)D] += (NULL: skip).
void ot_ref_qkv_bwd(float *dx, float *dw, float *db, const float *dq, const float *dk,
                    const float *dv, const float *x, const float *w, int B, int T, int C,
                    int Hq, int Hkv, int D) {
  int Nt = (Hq + 2 * Hkv) * D;
  size_t M = (size_t)B * T;
  float *g = malloc(M * Nt * sizeof(float) + 4);  // reference only: [B*T, Nt]
  if (!g) return;
  for (int bb = 0; bb < B; bb++)
    for (int t = 0; t < T; t++)
      for (int n = 0; n < Nt; n++)
        g[((size_t)bb * T + t) * Nt + n] =
            *qkv_slot((float *)dq, (float *)dk, (float *)dv, bb, t, n, T, Hq, Hkv, D);
  ot_ref_linear_bwd(dx, dw, db, g, NULL, x, w, (int)M, Nt, C, OT_ACT_NONE);
  free(g);
}
