// Residual + LayerNorm / RMSNorm kernels, forward and backward, one source for
// every ISA (see simd.h). One row of C values stays in L1 between the passes
// over it, so each row's data comes from memory once:
//   forward:  res = x + r -> res_out fused with the row sum (or sum of squares),
//             then (LayerNorm) the centred sum of squares, then
//             y = (res - mean) * rstd * g (+ beta)
//   backward: row sums of dxhat and dxhat * xhat plus dg/dbeta partials, then
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) + dres
// `rms` selects RMSNorm (no centring, mean(res^2) instead of the variance).
// Storage is f32 or bf16 (`bf16`); math is f32. The row helpers are inlined
// with constant flags so each (dtype, norm) pair gets its own branch-free loop.
// bf16: the next row is prefetched while the current one computes (pf_next),
// bf16 outputs are packed two vectors at a time (vst2), and passes that do not
// depend on the column order load pairs in simd.h's exchange order (vldx2).
#include "core/simd.h"
#include "norm_k.h"
#include <omp.h>

#define NORM_PAR_MIN 16384  // elements below which one thread is faster

#define INL static inline __attribute__((always_inline))

// Prefetch of the next row, bf16 only: called at every vector step c of a
// pass over the current row, it fetches the elements [c, c + 32) of p at
// o_next (a row ahead) once per 32 columns, so that the next row's data
// arrives while this row computes (each row's first pass would otherwise wait
// for memory). A prefetch past the end of an array is harmless (no fault).
// Not for f32: its larger rows plus the [C] buffers of the backward would not
// fit L1 together with the next row (measured slower when the data is in L2).
INL void pf_next(const void *p, size_t o_next, int c, const int bf16) {
  if (bf16 && p && (c & 31) == 0)
    __builtin_prefetch((const char *)p + (o_next + (size_t)c) * 2, 0, 3);
}
// The same for an output (fetched for writing: owned before the stores).
INL void pfw_next(void *p, size_t o_next, int c, const int bf16) {
  if (bf16 && p && (c & 31) == 0)
    __builtin_prefetch((char *)p + (o_next + (size_t)c) * 2, 1, 3);
}

// Sums over a row do not depend on the element order: full pairs are loaded
// in simd.h's exchange order (vldx2: cheaper for bf16).

// Sum of p[0..C) (rms = 0) or of its squares (rms = 1); two accumulators.
INL float row_sum(const void *p, size_t o, int C, const int bf16, const int rms) {
  vf a0 = vzero(), a1 = vzero();
  int c = 0;
  for (; c + 2 * VL <= C; c += 2 * VL) {
    vf v0, v1;
    vldx2(p, o + c, &v0, &v1, bf16);
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
    vf d0, d1;
    vldx2(p, o + c, &d0, &d1, bf16);
    d0 = vsub(d0, vm);
    d1 = vsub(d1, vm);
    a0 = vfmadd(d0, d0, a0); a1 = vfmadd(d1, d1, a1);
  }
  for (; c + VL <= C; c += VL) { vf d = vsub(vld(p, o + c, bf16), vm); a0 = vfmadd(d, d, a0); }
  float s = vsum(vadd(a0, a1));
  for (; c < C; c++) { float d = sld(p, o + c, bf16) - m; s += d * d; }
  return s;
}

// Rows [n0, n1) of the forward.
INL void norm_fwd_rows(const int bf16, const int rms, void *y, float *mean, float *rstd,
                       void *res_out, const void *x, const void *r, const float *g,
                       const float *beta, long n0, long n1, int C, float eps) {
  const size_t es = bf16 ? 2 : 4;
  for (long n = n0; n < n1; n++) {
    const size_t o = (size_t)n * C;
    // pass 1: res = x + r, stored (rounded to the storage dtype), and the sum
    // (LayerNorm) or sum of squares (RMSNorm) of the stored values, which are
    // what the backward will see
    const void *src = x;  // where res lives
    float s;
    if (r) {
      vf a = vzero(), a1 = vzero();
      int c = 0;
      for (; c + 2 * VL <= C; c += 2 * VL) {  // element-wise: exchange-order pairs
        pf_next(x, o + C, c, bf16);
        pf_next(r, o + C, c, bf16);
        pfw_next(res_out, o + C, c, bf16);
        vf x0, x1, r0, r1;
        vldx2(x, o + c, &x0, &x1, bf16);
        vldx2(r, o + c, &r0, &r1, bf16);
        x0 = vadd(x0, r0);
        x1 = vadd(x1, r1);
        vstx2_bfsrc(res_out, o + c, x0, x1, bf16);
        if (bf16) vldx2(res_out, o + c, &x0, &x1, bf16);  // the rounded values
        a = rms ? vfmadd(x0, x0, a) : vadd(a, x0);
        a1 = rms ? vfmadd(x1, x1, a1) : vadd(a1, x1);
      }
      for (; c + VL <= C; c += VL) {
        pf_next(x, o + C, c, bf16);
        pf_next(r, o + C, c, bf16);
        pfw_next(res_out, o + C, c, bf16);
        vf v = vadd(vld(x, o + c, bf16), vld(r, o + c, bf16));
        vst(res_out, o + c, v, bf16);
        if (bf16) v = vld(res_out, o + c, bf16);  // the rounded value
        a = rms ? vfmadd(v, v, a) : vadd(a, v);
      }
      s = vsum(vadd(a, a1));
      for (; c < C; c++) {
        sst(res_out, o + c, sld(x, o + c, bf16) + sld(r, o + c, bf16), bf16);
        float v = sld(res_out, o + c, bf16);
        s += rms ? v * v : v;
      }
      src = res_out;
    } else {
      if (res_out && res_out != x)
        memcpy((char *)res_out + o * es, (const char *)x + o * es, (size_t)C * es);
      s = row_sum(x, o, C, bf16, rms);
    }
    float m = 0.0f, rs;
    if (rms) {
      rs = 1.0f / sqrtf(s / (float)C + eps);
    } else {  // pass 2: centred sum of squares (the row is in L1)
      m = s / (float)C;
      rs = 1.0f / sqrtf(row_var_sum(src, o, C, m, bf16) / (float)C + eps);
      mean[n] = m;
    }
    rstd[n] = rs;
    // last pass: normalize
    const vf vm = vset1(m), vr = vset1(rs);
    int c = 0;
    if (beta) {
      for (; c + 2 * VL <= C; c += 2 * VL) {  // pairs: one bf16 pack per two vectors
        if (!r) pf_next(x, o + C, c, bf16);
        pfw_next(y, o + C, c, bf16);
        vf h0 = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vf h1 = vmul(vsub(vld(src, o + c + VL, bf16), vm), vr);
        vst2(y, o + c, vfmadd(h0, vload(g + c), vload(beta + c)),
             vfmadd(h1, vload(g + c + VL), vload(beta + c + VL)), bf16);
      }
      for (; c + VL <= C; c += VL) {
        if (!r) pf_next(x, o + C, c, bf16);
        pfw_next(y, o + C, c, bf16);
        vf h = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vst(y, o + c, vfmadd(h, vload(g + c), vload(beta + c)), bf16);
      }
      for (; c < C; c++) sst(y, o + c, (sld(src, o + c, bf16) - m) * rs * g[c] + beta[c], bf16);
    } else {
      for (; c + 2 * VL <= C; c += 2 * VL) {
        if (!r) pf_next(x, o + C, c, bf16);
        pfw_next(y, o + C, c, bf16);
        vf h0 = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vf h1 = vmul(vsub(vld(src, o + c + VL, bf16), vm), vr);
        vst2(y, o + c, vmul(h0, vload(g + c)), vmul(h1, vload(g + c + VL)), bf16);
      }
      for (; c + VL <= C; c += VL) {
        if (!r) pf_next(x, o + C, c, bf16);
        pfw_next(y, o + C, c, bf16);
        vf h = vmul(vsub(vld(src, o + c, bf16), vm), vr);
        vst(y, o + c, vmul(h, vload(g + c)), bf16);
      }
      for (; c < C; c++) sst(y, o + c, (sld(src, o + c, bf16) - m) * rs * g[c], bf16);
    }
  }
}

// One row of the backward. pdg/pdb: this thread's dg/dbeta partials (pdb
// NULL: skip); bx/bd: this thread's [C] buffers for xhat and dxhat, kept in L1
// between the two passes so the second one does not convert res/dy again.
INL void norm_bwd_row(const int bf16, const int rms, void *dx, float *pdg, float *pdb,
                      float *bx, float *bd, const void *dy, const void *dres, const void *res,
                      float m, float rs, const float *g, size_t o, int C) {
  const vf vm = vset1(m), vr = vset1(rs);
  vf s1 = vzero(), s2 = vzero();
  int c = 0;
  for (; c + VL <= C; c += VL) {
    pf_next(dy, o + C, c, bf16);
    pf_next(res, o + C, c, bf16);
    vf d = vld(dy, o + c, bf16);
    vf xh = vmul(vsub(vld(res, o + c, bf16), vm), vr);
    vf dxh = vmul(d, vload(g + c));
    vstore(bx + c, xh);
    vstore(bd + c, dxh);
    if (!rms) s1 = vadd(s1, dxh);
    s2 = vfmadd(dxh, xh, s2);
    vstore(pdg + c, vfmadd(d, xh, vload(pdg + c)));
    if (pdb) vstore(pdb + c, vadd(vload(pdb + c), d));
  }
  float t1 = vsum(s1), t2 = vsum(s2);
  for (; c < C; c++) {
    float d = sld(dy, o + c, bf16), xh = (sld(res, o + c, bf16) - m) * rs, dxh = d * g[c];
    bx[c] = xh;
    bd[c] = dxh;
    if (!rms) t1 += dxh;
    t2 += dxh * xh;
    pdg[c] += d * xh;
    if (pdb) pdb[c] += d;
  }
  const float a = t1 / (float)C, b = t2 / (float)C;
  const vf va = vset1(a), vb = vset1(b);
  c = 0;
  for (; c + 2 * VL <= C; c += 2 * VL) {  // pairs: one bf16 pack per two vectors
    pf_next(dres, o + C, c, bf16);
    pfw_next(dx, o + C, c, bf16);
    vf v0 = vmul(vsub(vload(bd + c), vfmadd(vload(bx + c), vb, va)), vr);
    vf v1 = vmul(vsub(vload(bd + c + VL), vfmadd(vload(bx + c + VL), vb, va)), vr);
    if (dres) { v0 = vadd(v0, vld(dres, o + c, bf16)); v1 = vadd(v1, vld(dres, o + c + VL, bf16)); }
    vst2(dx, o + c, v0, v1, bf16);
  }
  for (; c + VL <= C; c += VL) {
    pf_next(dres, o + C, c, bf16);
    pfw_next(dx, o + C, c, bf16);
    vf v = vmul(vsub(vload(bd + c), vfmadd(vload(bx + c), vb, va)), vr);
    if (dres) v = vadd(v, vld(dres, o + c, bf16));
    vst(dx, o + c, v, bf16);
  }
  for (; c < C; c++) {
    float v = (bd[c] - (bx[c] * b + a)) * rs;
    if (dres) v += sld(dres, o + c, bf16);
    sst(dx, o + c, v, bf16);
  }
}

// Rows [n0, n1) of the backward, partials into pdg/pdb.
INL void norm_bwd_rows(const int bf16, const int rms, void *dx, float *pdg, float *pdb,
                       float *bx, float *bd, const void *dy, const void *dres, const void *res, const float *mean,
                       const float *rstd, const float *g, long n0, long n1, int C) {
  for (long n = n0; n < n1; n++)
    norm_bwd_row(bf16, rms, dx, pdg, pdb, bx, bd, dy, dres, res, rms ? 0.0f : mean[n], rstd[n], g,
                 (size_t)n * C, C);
}

// Threads take fixed contiguous row ranges (static partition); inside the
// parallel region each range runs a loop specialised for (bf16, rms).
void OT_K(k_norm_fwd)(int bf16, int rms, void *y, float *mean, float *rstd, void *res_out,
                      const void *x, const void *r, const float *g, const float *beta, int N,
                      int C, float eps) {
#pragma omp parallel if ((size_t)N * C >= NORM_PAR_MIN)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    const long n0 = (long)N * t / T, n1 = (long)N * (t + 1) / T;
    if (rms) OT_SK_SWITCH(bf16, K, norm_fwd_rows(K, 1, y, mean, rstd, res_out, x, r, g, NULL, n0, n1, C, eps));
    else OT_SK_SWITCH(bf16, K, norm_fwd_rows(K, 0, y, mean, rstd, res_out, x, r, g, beta, n0, n1, C, eps));
  }
}

// part: scratch for nt threads, nt * 4 * ld floats (ld >= C, a multiple of 16):
// per thread dg and dbeta partials, summed in thread order at the end
// (deterministic), and the xhat/dxhat row buffers.
void OT_K(k_norm_bwd)(int bf16, int rms, void *dx, float *dg, float *dbeta, const void *dy,
                      const void *dres, const void *res, const float *mean, const float *rstd,
                      const float *g, int N, int C, float *part, int nt, int ld) {
  int used = 1;
  if ((size_t)N * C < NORM_PAR_MIN) nt = 1;
  if (rms) dbeta = NULL;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    if (t == 0) used = T;
    float *pdg = part + (size_t)t * 4 * ld, *pdb = dbeta ? pdg + ld : NULL;
    float *bx = pdg + 2 * (size_t)ld, *bd = pdg + 3 * (size_t)ld;
    memset(pdg, 0, sizeof(float) * 2 * (size_t)ld);
    const long n0 = (long)N * t / T, n1 = (long)N * (t + 1) / T;
    if (rms) OT_SK_SWITCH(bf16, K, norm_bwd_rows(K, 1, dx, pdg, NULL, bx, bd, dy, dres, res, NULL, rstd, g, n0, n1, C));
    else OT_SK_SWITCH(bf16, K, norm_bwd_rows(K, 0, dx, pdg, pdb, bx, bd, dy, dres, res, mean, rstd, g, n0, n1, C));
  }
  // fixed-order reduction of the partials: thread 0, 1, ...
  for (int c = 0; c < C; c++) {
    float sg = 0.0f, sb = 0.0f;
    for (int t = 0; t < used; t++) {
      sg += part[(size_t)t * 4 * ld + c];
      sb += part[(size_t)t * 4 * ld + ld + c];
    }
    dg[c] += sg;
    if (dbeta) dbeta[c] += sb;
  }
}
