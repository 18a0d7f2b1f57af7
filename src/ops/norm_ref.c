// Scalar f32 references for residual + LayerNorm / RMSNorm (tests only).
// Row statistics and row sums in double; same contracts as ops.h with dt = f32.
#include "ot/ops.h"
#include <math.h>

// Shared forward: rms selects RMSNorm (mean stays 0, no centring).
static void ref_norm_fwd(int rms, float *y, float *mean, float *rstd, float *res_out,
                         const float *x, const float *r, const float *g, const float *beta,
                         int N, int C, float eps) {
  for (int n = 0; n < N; n++) {
    const size_t o = (size_t)n * C;
    double s = 0, q = 0;
    for (int c = 0; c < C; c++) {
      float v = r ? x[o + c] + r[o + c] : x[o + c];
      if (res_out) res_out[o + c] = v;
      s += v;
    }
    // after pass 1 res lives in res_out (which may alias x or r), else recompute it
#define RES(c) (res_out ? res_out[o + (c)] : r ? x[o + (c)] + r[o + (c)] : x[o + (c)])
    double m = rms ? 0.0 : s / C;
    for (int c = 0; c < C; c++) {
      double d = (double)RES(c) - m;
      q += d * d;
    }
    double rs = 1.0 / sqrt(q / C + (double)eps);
    if (mean) mean[n] = (float)m;
    rstd[n] = (float)rs;
    for (int c = 0; c < C; c++) {
      double h = ((double)RES(c) - m) * rs * g[c] + (beta ? beta[c] : 0.0);
      y[o + c] = (float)h;
    }
#undef RES
  }
}

// Shared backward. Parameter gradients first (columns), so that dx may alias dy or dres.
static void ref_norm_bwd(int rms, float *dx, float *dg, float *dbeta, const float *dy,
                         const float *dres, const float *res, const float *mean,
                         const float *rstd, const float *g, int N, int C) {
  for (int c = 0; c < C; c++) {
    double sg = 0, sb = 0;
    for (int n = 0; n < N; n++) {
      const size_t i = (size_t)n * C + c;
      double m = rms ? 0.0 : mean[n];
      sg += (double)dy[i] * ((res[i] - m) * rstd[n]);
      sb += dy[i];
    }
    dg[c] += (float)sg;
    if (dbeta) dbeta[c] += (float)sb;
  }
  for (int n = 0; n < N; n++) {
    const size_t o = (size_t)n * C;
    const double m = rms ? 0.0 : mean[n], rs = rstd[n];
    double s1 = 0, s2 = 0;
    for (int c = 0; c < C; c++) {
      double dxh = (double)dy[o + c] * g[c], xh = (res[o + c] - m) * rs;
      s1 += dxh;
      s2 += dxh * xh;
    }
    const double a = rms ? 0.0 : s1 / C, b = s2 / C;
    for (int c = 0; c < C; c++) {
      double dxh = (double)dy[o + c] * g[c], xh = (res[o + c] - m) * rs;
      double v = (dxh - a - xh * b) * rs + (dres ? dres[o + c] : 0.0);
      dx[o + c] = (float)v;
    }
  }
}

// x, r: [N, C]; y, res_out: [N, C]; mean, rstd: [N]; g, beta: [C].
void ot_ref_layernorm_fwd(float *y, float *mean, float *rstd, float *res_out, const float *x,
                          const float *r, const float *g, const float *beta, int N, int C,
                          float eps) {
  ref_norm_fwd(0, y, mean, rstd, res_out, x, r, g, beta, N, C, eps);
}

// dy, dres, res: [N, C] -> dx: [N, C]; dg, dbeta: [C] +=.
void ot_ref_layernorm_bwd(float *dx, float *dg, float *dbeta, const float *dy, const float *dres,
                          const float *res, const float *mean, const float *rstd, const float *g,
                          int N, int C) {
  ref_norm_bwd(0, dx, dg, dbeta, dy, dres, res, mean, rstd, g, N, C);
}

// x, r: [N, C]; y, res_out: [N, C]; rstd: [N]; g: [C].
void ot_ref_rmsnorm_fwd(float *y, float *rstd, float *res_out, const float *x, const float *r,
                        const float *g, int N, int C, float eps) {
  ref_norm_fwd(1, y, NULL, rstd, res_out, x, r, g, NULL, N, C, eps);
}

// dy, dres, res: [N, C] -> dx: [N, C]; dg: [C] +=.
void ot_ref_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *dres,
                        const float *res, const float *rstd, const float *g, int N, int C) {
  ref_norm_bwd(1, dx, dg, NULL, dy, dres, res, NULL, rstd, g, N, C);
}
