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
#include "simd.h"
#include <omp.h>

#define SM_PAR_MIN 16384  // elements below which one thread is faster
#define SM_MAXCH 1024     // chunk maxima kept on the stack
#define INL static inline __attribute__((always_inline))

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
  for (; i + 4 * VL <= n; i += 4 * VL) {
    m0 = vmax(m0, vld(x, off + i, bf16));
    m1 = vmax(m1, vld(x, off + i + VL, bf16));
    m2 = vmax(m2, vld(x, off + i + 2 * VL, bf16));
    m3 = vmax(m3, vld(x, off + i + 3 * VL, bf16));
  }
  for (; i + VL <= n; i += VL) m0 = vmax(m0, vld(x, off + i, bf16));
  m = vhmax(vmax(vmax(m0, m1), vmax(m2, m3)));
#endif
  for (; i < n; i++) { float v = sld(x, off + i, bf16); m = v > m ? v : m; }
  return m;
}

// sum of exp(x - m) over the chunk; e (NULL: not kept) receives the terms.
// Two vectors per step: more would spill (vexp_neg keeps ~10 constants live).
INL double chunk_expsum(const void *x, size_t off, int n, float m, float *e, const int bf16) {
  int i = 0;
  const vf vm = vset1(m);
  vf s0 = vzero(), s1 = vzero();
  for (; i + 2 * VL <= n; i += 2 * VL) {
    vf e0 = vexp_neg(vsub(vld(x, off + i, bf16), vm));
    vf e1 = vexp_neg(vsub(vld(x, off + i + VL, bf16), vm));
    if (e) { vstore(e + i, e0); vstore(e + i + VL, e1); }
    s0 = vadd(s0, e0);
    s1 = vadd(s1, e1);
  }
  for (; i + VL <= n; i += VL) {
    vf e0 = vexp_neg(vsub(vld(x, off + i, bf16), vm));
    if (e) vstore(e + i, e0);
    s0 = vadd(s0, e0);
  }
  double s = (double)vsum(vadd(s0, s1));
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
                     const int bf16) {
  float M = -INFINITY;
  double S = 0.0;
  for (int k = 0, c0 = 0; c0 < V; k++, c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch;
    float cm = chunk_max(x, off + c0, n, bf16);
    if (cm > M) {  // the running max grows: rescale the sum (S = 0 before the first chunk)
      if (S != 0.0) S *= exp((double)M - (double)cm);
      M = cm;
    }
    S += chunk_expsum(x, off + c0, n, M, e ? e + c0 : NULL, bf16);
    mc[k] = M;
  }
  *Mout = M;
  return S;
}

// Pass 2: out[off + i] = e[i] * exp(mc[k] - M) * mul for i in [0, V).
INL void row_scale(void *out, size_t off, const float *e, const float *mc, int V, int ch, float M,
                   double mul, const int bf16) {
  for (int k = 0, c0 = 0; c0 < V; k++, c0 += ch) {
    int n = V - c0 < ch ? V - c0 : ch;
    float sc = (float)((mc[k] == M ? 1.0 : exp((double)mc[k] - (double)M)) * mul);
    const vf vs = vset1(sc);
    int i = 0;
    for (; i + VL <= n; i += VL) vst(out, off + c0 + i, vmul(vload(e + c0 + i), vs), bf16);
    for (; i < n; i++) sst(out, off + c0 + i, e[c0 + i] * sc, bf16);
  }
}

INL void softmax_rows(void *y, const void *x, long N, int V, float *buf, size_t bstride,
                      const int bf16) {
  const int ch = sm_chunk(V);
#pragma omp parallel for schedule(static) if (N * (long)V >= SM_PAR_MIN)
  for (long r = 0; r < N; r++) {
    float mc[SM_MAXCH], M;
    size_t off = (size_t)r * V;
    float *e = bf16 ? buf + (size_t)omp_get_thread_num() * bstride : (float *)y + off;
    double S = row_stats(x, off, V, ch, e, mc, &M, bf16);
    row_scale(y, off, e, mc, V, ch, M, 1.0 / S, bf16);
  }
}

// x, y: [N, V] (y may alias x). buf: per-thread f32 rows (bstride floats
// apart) for bf16 storage, unused for f32.
void OT_K(k_softmax_fwd)(void *y, const void *x, long N, int V, float *buf, size_t bstride,
                         int bf16) {
  if (bf16) softmax_rows(y, x, N, V, buf, bstride, 1);
  else softmax_rows(y, x, N, V, buf, bstride, 0);
}

INL void softmax_bwd_rows(void *dx, const void *y, const void *dy, long N, int V, const int bf16) {
#pragma omp parallel for schedule(static) if (N * (long)V >= SM_PAR_MIN)
  for (long r = 0; r < N; r++) {
    size_t off = (size_t)r * V;
    int i = 0;
    vf s0 = vzero(), s1 = vzero();
    for (; i + 2 * VL <= V; i += 2 * VL) {
      s0 = vfmadd(vld(dy, off + i, bf16), vld(y, off + i, bf16), s0);
      s1 = vfmadd(vld(dy, off + i + VL, bf16), vld(y, off + i + VL, bf16), s1);
    }
    for (; i + VL <= V; i += VL) s0 = vfmadd(vld(dy, off + i, bf16), vld(y, off + i, bf16), s0);
    double d = (double)vsum(vadd(s0, s1));
    for (; i < V; i++) d += (double)sld(dy, off + i, bf16) * sld(y, off + i, bf16);
    const vf vd = vset1((float)d);
    i = 0;
    for (; i + VL <= V; i += VL)
      vst(dx, off + i, vmul(vld(y, off + i, bf16), vsub(vld(dy, off + i, bf16), vd)), bf16);
    for (; i < V; i++)
      sst(dx, off + i, sld(y, off + i, bf16) * (sld(dy, off + i, bf16) - (float)d), bf16);
  }
}

// y, dy, dx: [N, V]; dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
void OT_K(k_softmax_bwd)(void *dx, const void *y, const void *dy, long N, int V, int bf16) {
  if (bf16) softmax_bwd_rows(dx, y, dy, N, V, 1);
  else softmax_bwd_rows(dx, y, dy, N, V, 0);
}

INL void xent_rows(void *lg, int ld, const int32_t *tg, long N, int V, int ignore, float count,
                   double *loss, int want_grad, float *buf, size_t bstride, const int bf16) {
  const int ch = sm_chunk(V);
  const double inv_count = 1.0 / (double)count;
#pragma omp parallel for schedule(static) if (N * (long)V >= SM_PAR_MIN)
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
    double S = row_stats(lg, off, V, ch, e, mc, &M, bf16);
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
  if (bf16) xent_rows(lg, ld, tg, N, V, ignore, count, loss, want_grad, buf, bstride, 1);
  else xent_rows(lg, ld, tg, N, V, ignore, count, loss, want_grad, buf, bstride, 0);
}
