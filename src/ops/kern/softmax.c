// Row softmax and fused softmax + cross-entropy kernels, one source for every
// ISA (see simd.h). OpenMP static over rows; each row is independent, so the
// results do not depend on the thread count.
//
// A row is read once in chunks of CH columns (L1-sized): per chunk its max,
// then exp(x - m) with the running max m, summed online (the sum is rescaled
// when m grows); exp(x - m) is kept in an f32 buffer e (the output itself for
// f32, a per-thread scratch row for bf16) with the chunk's m, so the write pass
// only multiplies: y = e * exp(m_chunk - M) / S. One exp per element; logits
// are read once and written once.
//
// With bf16 storage the row passes are bound by the arithmetic, so the exp is
// simd.h's base-2 vexp2_hi of (x - m) log2(e) (x - m is exact for the terms
// that matter, so the result does not depend on the magnitude of m), SU
// vectors per step with interleaved operations, and bf16 is loaded and stored
// as vector pairs in simd.h's exchange order (vldx2/vstx2): e keeps that order
// (the write pass walks each chunk with the same steps), sums and maxima do
// not depend on it.
#include "core/simd.h"
#include "softmax_k.h"
#include <omp.h>

#define SM_PAR_MIN 16384  // elements below which one thread is faster
#define SM_MAXCH 1024     // chunk maxima kept on the stack
#define INL static inline __attribute__((always_inline))

#define SU 4                // vectors per step (even: loaded in pairs)
#define SG (SU * VL)        // elements per step
#define FOR_K(U) _Pragma("GCC unroll 4") for (int k = 0; k < (U); k++)
#define LOG2E 1.44269504088896341f

// Chunk length: 2048 columns, longer for huge rows so that at most SM_MAXCH chunks.
INL int sm_chunk(int V) {
  int ch = 2048;
  if ((V + ch - 1) / ch > SM_MAXCH) ch = (((V + SM_MAXCH - 1) / SM_MAXCH) + 63) & ~63;
  return ch;
}

INL float chunk_max(const void *x, size_t off, int n, const int bf16) {
  int i = 0;
  float m = -INFINITY;
#if VL > 1
  vf m0 = vset1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
  for (; i + 4 * VL <= n; i += 4 * VL) {  // any order: exchange-order pairs
    vf v[4];
    vldx2(x, off + i, &v[0], &v[1], bf16);
    vldx2(x, off + i + 2 * VL, &v[2], &v[3], bf16);
    m0 = vmax(m0, v[0]);
    m1 = vmax(m1, v[1]);
    m2 = vmax(m2, v[2]);
    m3 = vmax(m3, v[3]);
  }
  for (; i + VL <= n; i += VL) m0 = vmax(m0, vld(x, off + i, bf16));
  m = vhmax(vmax(vmax(m0, m1), vmax(m2, m3)));
#endif
  for (; i < n; i++) { float v = sld(x, off + i, bf16); m = v > m ? v : m; }
  return m;
}

// x[k] <- exp(x[k] - m) = 2^((x - m) log2 e), k < U, for x <= m (+ rounding):
// below 2^-127 (and for -inf) 0; the constant first in max keeps a NaN.
INL void exp_sub_n(vf *x, vf vm, const int U) {
  FOR_K(U) x[k] = vexp2_hi(vmax(vset1(-127.0f), vmul(vsub(x[k], vm), vset1(LOG2E))));
}

// sum of exp(x - m) over the chunk; e (NULL: not kept) receives the terms,
// full steps in exchange order. The data n elements ahead (the next chunk or
// row) is prefetched meanwhile, and so is the output there (w, NULL: none;
// for writing, so a separate output's lines are owned before the write pass):
// this pass is compute-bound and the others are short, so without it the
// core would wait for memory at each chunk's start.
INL double chunk_expsum(const void *x, size_t off, int n, float m, float *e, void *w,
                        const int bf16) {
  int i = 0;
  const vf vm = vset1(m);
  vf s0 = vzero(), s1 = vzero();
  double sd = 0.0;
  const size_t es = bf16 ? 2 : 4;
  const char *pf = (const char *)x + (off + (size_t)n) * es;
  char *pw = w ? (char *)w + (off + (size_t)n) * es : NULL;
  for (; i + SG <= n; i += SG) {
    for (size_t b = 0; b < SG * es; b += 64) {
      __builtin_prefetch(pf + (size_t)i * es + b, 0, 3);
      if (pw) __builtin_prefetch(pw + (size_t)i * es + b, 1, 3);
    }
    vf v[SU];
    for (int k = 0; k < SU; k += 2) vldx2(x, off + i + k * VL, &v[k], &v[k + 1], bf16);
    exp_sub_n(v, vm, SU);
    if (e) FOR_K(SU) vstore(e + i + k * VL, v[k]);
#if VL == 1   // one lane: two float running sums over a whole chunk lose digits (~1e-6
              // relative at V = 4096), so the portable path sums each step in double
    FOR_K(SU) sd += (double)v[k];
#else
    for (int k = 0; k < SU; k += 2) { s0 = vadd(s0, v[k]); s1 = vadd(s1, v[k + 1]); }
#endif
  }
  for (; i + VL <= n; i += VL) {
    vf v = vld(x, off + i, bf16);
    exp_sub_n(&v, vm, 1);
    if (e) vstore(e + i, v);
    s0 = vadd(s0, v);
  }
  double s = sd + (double)vsum(vadd(s0, s1));
  for (; i < n; i++) {
    float t = expf(sld(x, off + i, bf16) - m);
    if (e) e[i] = t;
    s += t;
  }
  return s;
}

// Pass 1 over x[off, off + V): returns S = sum exp(x - M), *M = row max;
// e[0, V) (or NULL) receives exp(x - mc[k]) for chunk k.
INL double row_stats(const void *x, size_t off, int V, int ch, float *e, float *mc, float *Mout,
                     void *w, const int bf16) {
  float M = -INFINITY;
  double S = 0.0;
  for (int k = 0, c0 = 0; c0 < V; k++, c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch;
    float cm = chunk_max(x, off + c0, n, bf16);
    if (cm > M) {  // the running max grows: rescale the sum (S = 0 before the first chunk)
      if (S != 0.0) S *= exp((double)M - (double)cm);
      M = cm;
    }
    S += chunk_expsum(x, off + c0, n, M, e ? e + c0 : NULL, w, bf16);
    mc[k] = M;
  }
  *Mout = M;
  return S;
}

// Pass 2: out[off + i] = e[i] * exp(mc[k] - M) * mul for i in [0, V), e in
// the order chunk_expsum left it.
INL void row_scale(void *out, size_t off, const float *e, const float *mc, int V, int ch, float M,
                   double mul, const int bf16) {
  for (int k = 0, c0 = 0; c0 < V; k++, c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch;
    float sc = (float)((mc[k] == M ? 1.0 : exp((double)mc[k] - (double)M)) * mul);
    const vf vs = vset1(sc);
    const float *ec = e + c0;
    int i = 0;
    for (; i + SG <= n; i += SG)
      for (int j = 0; j < SU; j += 2)
        vstx2_bfsrc(out, off + c0 + i + j * VL, vmul(vload(ec + i + j * VL), vs),
                    vmul(vload(ec + i + (j + 1) * VL), vs), bf16);
    for (; i + VL <= n; i += VL) vst(out, off + c0 + i, vmul(vload(ec + i), vs), bf16);
    for (; i < n; i++) sst(out, off + c0 + i, ec[i] * sc, bf16);
  }
}

// The row loops below are orphaned `omp for` (static: fixed rows per thread)
// inside the parallel regions of the entry points, which pick the dtype
// first: each region body then runs a loop specialised for it (a parallel
// region in these inlined helpers would be outlined once, with a run-time
// dtype flag).
INL void softmax_rows(void *y, const void *x, long N, int V, float *buf, size_t bstride,
                      const int bf16) {
  const int ch = sm_chunk(V);
#pragma omp for schedule(static)
  for (long r = 0; r < N; r++) {
    float mc[SM_MAXCH], M;
    size_t off = (size_t)r * V;
    float *e = bf16 ? buf + (size_t)omp_get_thread_num() * bstride : (float *)y + off;
    double S = row_stats(x, off, V, ch, e, mc, &M, y == x ? NULL : y, bf16);
    row_scale(y, off, e, mc, V, ch, M, 1.0 / S, bf16);
  }
}

// x, y: [N, V] (y may alias x). buf: per-thread f32 rows (bstride floats
// apart) for bf16 storage, unused for f32.
void OT_K(k_softmax_fwd)(void *y, const void *x, long N, int V, float *buf, size_t bstride,
                         int bf16) {
#pragma omp parallel if (N * (long)V >= SM_PAR_MIN)
  {
    OT_SK_SWITCH(bf16, K, softmax_rows(y, x, N, V, buf, bstride, K));
  }
}

INL void softmax_bwd_rows(void *dx, const void *y, const void *dy, long N, int V, const int bf16) {
#pragma omp for schedule(static)
  for (long r = 0; r < N; r++) {
    size_t off = (size_t)r * V;
    int i = 0;
    vf s0 = vzero(), s1 = vzero();
    for (; i + 2 * VL <= V; i += 2 * VL) {  // exchange-order pairs, the same for y and dy
      vf y0, y1, d0, d1;
      vldx2(y, off + i, &y0, &y1, bf16);
      vldx2(dy, off + i, &d0, &d1, bf16);
      s0 = vfmadd(d0, y0, s0);
      s1 = vfmadd(d1, y1, s1);
    }
    for (; i + VL <= V; i += VL) s0 = vfmadd(vld(dy, off + i, bf16), vld(y, off + i, bf16), s0);
    double d = (double)vsum(vadd(s0, s1));
    for (; i < V; i++) d += (double)sld(dy, off + i, bf16) * sld(y, off + i, bf16);
    const vf vd = vset1((float)d);
    i = 0;
    for (; i + 2 * VL <= V; i += 2 * VL) {
      vf y0, y1, d0, d1;
      vldx2(y, off + i, &y0, &y1, bf16);
      vldx2(dy, off + i, &d0, &d1, bf16);
      vstx2_bfsrc(dx, off + i, vmul(y0, vsub(d0, vd)), vmul(y1, vsub(d1, vd)), bf16);
    }
    for (; i + VL <= V; i += VL)
      vst(dx, off + i, vmul(vld(y, off + i, bf16), vsub(vld(dy, off + i, bf16), vd)), bf16);
    for (; i < V; i++)
      sst(dx, off + i, sld(y, off + i, bf16) * (sld(dy, off + i, bf16) - (float)d), bf16);
  }
}

// y, dy, dx: [N, V]; dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
void OT_K(k_softmax_bwd)(void *dx, const void *y, const void *dy, long N, int V, int bf16) {
#pragma omp parallel if (N * (long)V >= SM_PAR_MIN)
  {
    OT_SK_SWITCH(bf16, K, softmax_bwd_rows(dx, y, dy, N, V, K));
  }
}

INL void xent_rows(void *lg, int ld, const int32_t *tg, long N, int V, int ignore, float count,
                   double *loss, int want_grad, float *buf, size_t bstride, const int bf16) {
  const int ch = sm_chunk(V);
  const double inv_count = 1.0 / (double)count;
#pragma omp for schedule(static)
  for (long r = 0; r < N; r++) {
    size_t off = (size_t)r * ld;
    int t = tg[r];
    if (t == ignore) {
      loss[r] = 0.0;
      if (want_grad) {
        int i = 0;
        for (; i + VL <= ld; i += VL) vst(lg, off + i, vzero(), bf16);
        for (; i < ld; i++) sst(lg, off + i, 0.0f, bf16);
      }
      continue;
    }
    float mc[SM_MAXCH], M;
    double xt = sld(lg, off + t, bf16);  // read before the row is overwritten
    float *e = NULL;
    if (want_grad) e = bf16 ? buf + (size_t)omp_get_thread_num() * bstride : (float *)lg + off;
    double S = row_stats(lg, off, V, ch, e, mc, &M, NULL, bf16);
    double lse = (double)M + log(S);
    loss[r] = lse - xt;
    if (want_grad) {
      row_scale(lg, off, e, mc, V, ch, M, inv_count / S, bf16);
      for (int i = V; i < ld; i++) sst(lg, off + i, 0.0f, bf16);
      sst(lg, off + t, (float)((exp(xt - lse) - 1.0) * inv_count), bf16);
    }
  }
}

// logits: [N, ld] (V valid columns); targets: [N]; loss: [N] double receives
// the row losses (0 for ignored rows). want_grad: logits overwritten with
// (softmax - onehot) / count, zero on ignored rows and padding columns.
void OT_K(k_xent)(void *lg, int ld, const int32_t *tg, long N, int V, int ignore, float count,
                  double *loss, int want_grad, float *buf, size_t bstride, int bf16) {
#pragma omp parallel if (N * (long)V >= SM_PAR_MIN)
  {
    OT_SK_SWITCH(bf16, K, xent_rows(lg, ld, tg, N, V, ignore, count, loss, want_grad, buf, bstride, K));
  }
}

// ------------------------------------------- label-smoothed cross-entropy ---
// Sum of x[off, off + V) (f32 vectors per chunk, chunks summed in double).
INL double row_sum(const void *x, size_t off, int V, int ch, const int bf16) {
  double s = 0.0;
  for (int c0 = 0; c0 < V; c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch, i = 0;
    vf s0 = vzero(), s1 = vzero();
    double sd = 0.0;
    for (; i + 2 * VL <= n; i += 2 * VL) {  // any order: exchange-order pairs
      vf a, b;
      vldx2(x, off + c0 + i, &a, &b, bf16);
#if VL == 1
      sd += (double)a + (double)b;
#else
      s0 = vadd(s0, a);
      s1 = vadd(s1, b);
#endif
    }
    for (; i + VL <= n; i += VL) s0 = vadd(s0, vld(x, off + c0 + i, bf16));
    sd += (double)vsum(vadd(s0, s1));
    for (; i < n; i++) sd += (double)sld(x, off + c0 + i, bf16);
    s += sd;
  }
  return s;
}

// As row_scale with out = e * exp(mc[k] - M) * mul - sub (one fused
// multiply-add: with sub = 0 the bits of row_scale).
INL void row_scale_sub(void *out, size_t off, const float *e, const float *mc, int V, int ch,
                       float M, double mul, float sub, const int bf16) {
  const vf vn = vset1(-sub);
  for (int k = 0, c0 = 0; c0 < V; k++, c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch;
    float sc = (float)((mc[k] == M ? 1.0 : exp((double)mc[k] - (double)M)) * mul);
    const vf vs = vset1(sc);
    const float *ec = e + c0;
    int i = 0;
    for (; i + SG <= n; i += SG)
      for (int j = 0; j < SU; j += 2)
        vstx2_bfsrc(out, off + c0 + i + j * VL, vfmadd(vload(ec + i + j * VL), vs, vn),
                    vfmadd(vload(ec + i + (j + 1) * VL), vs, vn), bf16);
    for (; i + VL <= n; i += VL) vst(out, off + c0 + i, vfmadd(vload(ec + i), vs, vn), bf16);
    for (; i < n; i++) sst(out, off + c0 + i, fmaf(ec[i], sc, -sub), bf16);
  }
}

INL void xent_ls_rows(void *lg, int ld, const int32_t *tg, long N, int V, int ignore, float eps,
                      float count, double *loss, int want_grad, float *buf, size_t bstride,
                      const int bf16) {
  const int ch = sm_chunk(V);
  const double inv_count = 1.0 / (double)count, de = (double)eps;
  const float sub = (float)(de / V * inv_count);  // eps / V / count on every column
#pragma omp for schedule(static)
  for (long r = 0; r < N; r++) {
    size_t off = (size_t)r * ld;
    int t = tg[r];
    if (t == ignore) {
      loss[r] = 0.0;
      if (want_grad) {
        int i = 0;
        for (; i + VL <= ld; i += VL) vst(lg, off + i, vzero(), bf16);
        for (; i < ld; i++) sst(lg, off + i, 0.0f, bf16);
      }
      continue;
    }
    float mc[SM_MAXCH], M;
    double xt = sld(lg, off + t, bf16);  // read before the row is overwritten
    double xs = eps != 0.0f ? row_sum(lg, off, V, ch, bf16) : 0.0;
    float *e = NULL;
    if (want_grad) e = bf16 ? buf + (size_t)omp_get_thread_num() * bstride : (float *)lg + off;
    double S = row_stats(lg, off, V, ch, e, mc, &M, NULL, bf16);
    double lse = (double)M + log(S);
    // (1 - eps) nll + eps mean_j(lse - x_j) = nll + eps (x_t - mean_j x_j)
    loss[r] = eps != 0.0f ? (lse - xt) + de * (xt - xs / V) : lse - xt;
    if (want_grad) {
      row_scale_sub(lg, off, e, mc, V, ch, M, inv_count / S, sub, bf16);
      for (int i = V; i < ld; i++) sst(lg, off + i, 0.0f, bf16);
      sst(lg, off + t, (float)((exp(xt - lse) - (1.0 - de) - de / V) * inv_count), bf16);
    }
  }
}

// As k_xent with label smoothing eps in [0, 1): row loss (1 - eps) nll +
// eps mean_j(-log p_j); gradient (softmax - (1 - eps) onehot - eps / V) / count.
// eps = 0 gives k_xent's bits.
void OT_K(k_xent_ls)(void *lg, int ld, const int32_t *tg, long N, int V, int ignore, float eps,
                     float count, double *loss, int want_grad, float *buf, size_t bstride,
                     int bf16) {
#pragma omp parallel if (N * (long)V >= SM_PAR_MIN)
  {
    OT_SK_SWITCH(bf16, K, xent_ls_rows(lg, ld, tg, N, V, ignore, eps, count, loss, want_grad, buf, bstride, K));
  }
}
