// Residual + LayerNorm / RMSNorm kernels, forward and backward, one source for
// every ISA (see simd.h). One row of C values stays in L1 between the passes
// over it, so each row's data comes from memory once:
//   forward:  [res = x + r -> res_out], stats (sum, then centred sum of
//             squares), y = (res - mean) * rstd * g (+ beta)
//   backward: row sums of dxhat and dxhat * xhat plus dg/dbeta partials, then
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) + dres
// `rms` selects RMSNorm (no centring, mean(res^2) instead of the variance).
// Storage is f32 or bf16 (`bf16`); math is f32. The row helpers are inlined
// with constant flags so each (dtype, norm) pair gets its own branch-free loop.
#include "simd.h"
#include <omp.h>

#define NORM_PAR_MIN 16384  // elements below which one thread is faster

#define INL static inline __attribute__((always_inline))

// Sum of p[0..C) (rms = 0) or of its squares (rms = 1); two accumulators.
INL float row_sum(const void *p, size_t o, int C, const int bf16, const int rms) {
  vf a0 = vzero(), a1 = vzero();
  int c = 0;
  for (; c + 2 * VL <= C; c += 2 * VL) {
    vf v0 = vld(p, o + c, bf16), v1 = vld(p, o + c + VL, bf16);
    if (rms) { a0 = vfmadd(v0, v0, a0); a1 = vfmadd(v1, v1, a1); }
    else { a0 = vadd(a0, v0); a1 = vadd(a1, v1); }
  }
  for (; c + VL <= C; c += VL) {
    vf v = vld(p, o + c, bf16);
    a0 = rms ? vfmadd(v, v, a0) : vadd(a0, v);
  }
  float s = vsum(vadd(a0, a1));
  for (; c < C; c++) { float v = sld(p, o + c, bf16); s += rms ? v * v : v; }
  return s;
}

// Sum of (p - m)^2 over the row.
INL float row_var_sum(const void *p, size_t o, int C, float m, const int bf16) {
  vf a0 = vzero(), a1 = vzero(), vm = vset1(m);
  int c = 0;
  for (; c + 2 * VL <= C; c += 2 * VL) {
    vf d0 = vsub(vld(p, o + c, bf16), vm), d1 = vsub(vld(p, o + c + VL, bf16), vm);
    a0 = vfmadd(d0, d0, a0); a1 = vfmadd(d1, d1, a1);
  }
  for (; c + VL <= C; c += VL) { vf d = vsub(vld(p, o + c, bf16), vm); a0 = vfmadd(d, d, a0); }
  float s = vsum(vadd(a0, a1));
  for (; c < C; c++) { float d = sld(p, o + c, bf16) - m; s += d * d; }
  return s;
}

INL void norm_fwd_impl(const int bf16, const int rms, void *y, float *mean, float *rstd,
                       void *res_out, const void *x, const void *r, const float *g,
                       const float *beta, int N, int C, float eps) {
  const size_t es = bf16 ? 2 : 4;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= NORM_PAR_MIN)
  for (long n = 0; n < N; n++) {
    const size_t o = (size_t)n * C;
    const void *src = x;  // where res lives once pass 1 is done
    if (r) {  // pass 1: res = x + r, stored (rounded to the storage dtype)
      int c = 0;
      for (; c + VL <= C; c += VL) vst(res_out, o + c, vadd(vld(x, o + c, bf16), vld(r, o + c, bf16)), bf16);
      for (; c < C; c++) sst(res_out, o + c, sld(x, o + c, bf16) + sld(r, o + c, bf16), bf16);
      src = res_out;
    } else if (res_out && res_out != x) {
      memcpy((char *)res_out + o * es, (const char *)x + o * es, (size_t)C * es);
    }
    // statistics over the stored values (what the backward will see)
    float m = 0.0f, rs;
    if (rms) {
      rs = 1.0f / sqrtf(row_sum(src, o, C, bf16, 1) / (float)C + eps);
    } else {
      m = row_sum(src, o, C, bf16, 0) / (float)C;
      rs = 1.0f / sqrtf(row_var_sum(src, o, C, m, bf16) / (float)C + eps);
      mean[n] = m;
    }
    rstd[n] = rs;
    // normalize
    const vf vm = vset1(m), vr = vset1(rs);
    int c = 0;
    if (beta) {
      for (; c + VL <= C; c += VL) {
        vf h = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vst(y, o + c, vfmadd(h, vload(g + c), vload(beta + c)), bf16);
      }
      for (; c < C; c++) sst(y, o + c, (sld(src, o + c, bf16) - m) * rs * g[c] + beta[c], bf16);
    } else {
      for (; c + VL <= C; c += VL) {
        vf h = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vst(y, o + c, vmul(h, vload(g + c)), bf16);
      }
      for (; c < C; c++) sst(y, o + c, (sld(src, o + c, bf16) - m) * rs * g[c], bf16);
    }
  }
}

// One row of the backward. pdg/pdb: this thread's dg/dbeta partials (pdb NULL: skip).
INL void norm_bwd_row(const int bf16, const int rms, void *dx, float *pdg, float *pdb,
                      const void *dy, const void *dres, const void *res, float m, float rs,
                      const float *g, size_t o, int C) {
  const vf vm = vset1(m), vr = vset1(rs);
  vf s1 = vzero(), s2 = vzero();
  int c = 0;
  for (; c + VL <= C; c += VL) {
    vf d = vld(dy, o + c, bf16);
    vf xh = vmul(vsub(vld(res, o + c, bf16), vm), vr);
    vf dxh = vmul(d, vload(g + c));
    if (!rms) s1 = vadd(s1, dxh);
    s2 = vfmadd(dxh, xh, s2);
    vstore(pdg + c, vfmadd(d, xh, vload(pdg + c)));
    if (pdb) vstore(pdb + c, vadd(vload(pdb + c), d));
  }
  float t1 = vsum(s1), t2 = vsum(s2);
  for (; c < C; c++) {
    float d = sld(dy, o + c, bf16), xh = (sld(res, o + c, bf16) - m) * rs, dxh = d * g[c];
    if (!rms) t1 += dxh;
    t2 += dxh * xh;
    pdg[c] += d * xh;
    if (pdb) pdb[c] += d;
  }
  const float a = t1 / (float)C, b = t2 / (float)C;
  const vf va = vset1(a), vb = vset1(b);
  c = 0;
  for (; c + VL <= C; c += VL) {
    vf xh = vmul(vsub(vld(res, o + c, bf16), vm), vr);
    vf dxh = vmul(vld(dy, o + c, bf16), vload(g + c));
    vf v = vmul(vsub(dxh, vfmadd(xh, vb, va)), vr);
    if (dres) v = vadd(v, vld(dres, o + c, bf16));
    vst(dx, o + c, v, bf16);
  }
  for (; c < C; c++) {
    float xh = (sld(res, o + c, bf16) - m) * rs, dxh = sld(dy, o + c, bf16) * g[c];
    float v = (dxh - (xh * b + a)) * rs;
    if (dres) v += sld(dres, o + c, bf16);
    sst(dx, o + c, v, bf16);
  }
}

// part: scratch for nt threads' partials, nt * 2 * ld floats (ld >= C, multiple of 16).
INL void norm_bwd_impl(const int bf16, const int rms, void *dx, float *dg, float *dbeta,
                       const void *dy, const void *dres, const void *res, const float *mean,
                       const float *rstd, const float *g, int N, int C, float *part, int nt,
                       int ld) {
  int used = 1;
  if ((size_t)N * C < NORM_PAR_MIN) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    if (t == 0) used = T;
    float *pdg = part + (size_t)t * 2 * ld, *pdb = dbeta ? pdg + ld : NULL;
    memset(pdg, 0, sizeof(float) * 2 * (size_t)ld);
    const long n0 = (long)N * t / T, n1 = (long)N * (t + 1) / T;  // static, fixed partition
    for (long n = n0; n < n1; n++)
      norm_bwd_row(bf16, rms, dx, pdg, pdb, dy, dres, res, rms ? 0.0f : mean[n], rstd[n], g,
                   (size_t)n * C, C);
  }
  // fixed-order reduction of the partials: thread 0, 1, ...
  for (int c = 0; c < C; c++) {
    float sg = 0.0f, sb = 0.0f;
    for (int t = 0; t < used; t++) {
      sg += part[(size_t)t * 2 * ld + c];
      sb += part[(size_t)t * 2 * ld + ld + c];
    }
    dg[c] += sg;
    if (dbeta) dbeta[c] += sb;
  }
}

void OT_K(k_norm_fwd)(int bf16, int rms, void *y, float *mean, float *rstd, void *res_out,
                      const void *x, const void *r, const float *g, const float *beta, int N,
                      int C, float eps) {
  if (bf16) {
    if (rms) norm_fwd_impl(1, 1, y, mean, rstd, res_out, x, r, g, NULL, N, C, eps);
    else norm_fwd_impl(1, 0, y, mean, rstd, res_out, x, r, g, beta, N, C, eps);
  } else {
    if (rms) norm_fwd_impl(0, 1, y, mean, rstd, res_out, x, r, g, NULL, N, C, eps);
    else norm_fwd_impl(0, 0, y, mean, rstd, res_out, x, r, g, beta, N, C, eps);
  }
}

void OT_K(k_norm_bwd)(int bf16, int rms, void *dx, float *dg, float *dbeta, const void *dy,
                      const void *dres, const void *res, const float *mean, const float *rstd,
                      const float *g, int N, int C, float *part, int nt, int ld) {
  if (bf16) {
    if (rms) norm_bwd_impl(1, 1, dx, dg, NULL, dy, dres, res, NULL, rstd, g, N, C, part, nt, ld);
    else norm_bwd_impl(1, 0, dx, dg, dbeta, dy, dres, res, mean, rstd, g, N, C, part, nt, ld);
  } else {
    if (rms) norm_bwd_impl(0, 1, dx, dg, NULL, dy, dres, res, NULL, rstd, g, N, C, part, nt, ld);
    else norm_bwd_impl(0, 0, dx, dg, dbeta, dy, dres, res, mean, rstd, g, N, C, part, nt, ld);
  }
}
