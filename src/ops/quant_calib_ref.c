// Scalar references of the calibration operators (ot/quant.h): fake
// quantization and the activation-aware search, as plain loops with every
// output error accumulated in double (ot_qsearch computes them by GEMMs).
#include "quant_impl.h"
#include <math.h>
#include <stdlib.h>

ot_status ot_ref_qweight_fake_quant(float *out, const float *w, int rows, int cols, int group,
                                    const float *clip) {
  static const char fn[] = "ot_ref_qweight_fake_quant";
  OT_CHECK_PTR(out, fn);
  OT_CHECK_PTR(w, fn);
  OT_CHECK_POS(rows, fn);
  OT_CHECK_POS(cols, fn);
  if ((group != 0 && group != 32 && group != 64 && group != 128) || (group && cols % group))
    return ot_error(OT_EINVAL, "%s: group=%d must be 0, 32, 64 or 128 and divide cols=%d", fn, group, cols);
  const int G = group ? group : cols;
  for (int r = 0; r < rows; r++) {
    const float c = clip ? clip[r] : 1.0f;
    if (!(c > 0.0f && c <= 1.0f)) return ot_error(OT_EINVAL, "%s: clip[%d] = %g outside (0, 1]", fn, r, (double)c);
    for (int g0 = 0; g0 < cols; g0 += G) {
      const float *v = w + (size_t)r * cols + g0;
      float amax = 0.0f;
      for (int k = 0; k < G; k++) {
        if (!isfinite(v[k])) return ot_error(OT_EINVAL, "%s: weight [%d, %d] is not finite", fn, r, g0 + k);
        if (fabsf(v[k]) > amax) amax = fabsf(v[k]);
      }
      const float sc = c * amax / 127.0f;
      float *o = out + (size_t)r * cols + g0;
      for (int k = 0; k < G; k++) {
        double q = sc > 0.0f ? nearbyint((double)v[k] / (double)sc) : 0.0;
        if (q > 127.0) q = 127.0;
        if (q < -127.0) q = -127.0;
        o[k] = (float)(int)q * sc;
      }
    }
  }
  return OT_OK;
}

// Per-row output errors err [N] (double) of the candidate: s [K] (NULL: 1), clip [N] (NULL: 1);
// act: plus the int8-activation GEMM's (xa [K] scratch: one row of x / s as it quantizes it).
static ot_status ref_errors(double *err, float *wq, const float *w, int N, int K, int group, const float *x,
                            int R, const float *s, const float *clip, bool act, float *xa) {
  for (size_t i = 0; i < (size_t)N * K; i++) wq[i] = w[i] * (s ? s[i % (size_t)K] : 1.0f);
  OT_TRY(ot_ref_qweight_fake_quant(wq, wq, N, K, group, clip));
  for (int n = 0; n < N; n++) {
    double e = 0.0;
    for (int r = 0; r < R; r++) {
      double d = 0.0;
      for (int k = 0; k < K; k++) {
        const size_t i = (size_t)n * K + k;
        const float weff = s ? wq[i] / s[k] : wq[i];
        d += (double)x[(size_t)r * K + k] * ((double)w[i] - (double)weff);
      }
      e += d * d;
    }
    err[n] = e / R;
  }
  for (int r = 0; act && r < R; r++) {
    float amax = 0.0f;
    for (int k = 0; k < K; k++) {
      xa[k] = s ? x[(size_t)r * K + k] / s[k] : x[(size_t)r * K + k];
      if (fabsf(xa[k]) > amax) amax = fabsf(xa[k]);
    }
    if (amax < 0x1p-100f) amax = 0.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, sx = amax / 127.0f;
    for (int k = 0; k < K; k++) xa[k] = nearbyintf(xa[k] * inv) * sx;
    for (int n = 0; n < N; n++) {
      double d = 0.0;
      for (int k = 0; k < K; k++)
        d += (double)xa[k] * wq[(size_t)n * K + k] - (double)x[(size_t)r * K + k] * w[(size_t)n * K + k];
      err[n] += d * d / R;
    }
  }
  return OT_OK;
}

ot_status ot_ref_qsearch(ot_qsearch_result *res, float *s, float *clip, const float *w, int N, int K,
                         int group, const float *x, int R, const float *xmean, const ot_qsearch_opts *o) {
  static const char fn[] = "ot_ref_qsearch";
  OT_TRY(ot__qsearch_check(res, s, clip, w, N, K, group, x, R, o, fn));
  float *wq = malloc((size_t)N * K * sizeof(float)), *st = malloc((size_t)K * sizeof(float));
  double *e = malloc((size_t)N * sizeof(double)), *best = malloc((size_t)N * sizeof(double));
  double *xm = malloc((size_t)K * sizeof(double));
  float *cv = malloc((size_t)N * sizeof(float)), *xa = malloc((size_t)K * sizeof(float));
  ot_status rc = OT_OK;
  if (!wq || !st || !e || !best || !xm || !cv || !xa) rc = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  double mx = 0.0;
  for (int k = 0; rc == OT_OK && k < K; k++) {
    if (xmean) {
      xm[k] = xmean[k];
    } else {
      double a = 0.0;
      for (int r = 0; r < R; r++) a += fabs((double)x[(size_t)r * K + k]);
      xm[k] = (double)(float)(a / R);
    }
    if (xm[k] > mx) mx = xm[k];
  }
  if (rc == OT_OK) rc = ref_errors(best, wq, w, N, K, group, x, R, NULL, NULL, o->act_int8, xa);
  memset(res, 0, sizeof *res);
  for (int n = 0; rc == OT_OK && n < N; n++) res->err_plain += best[n];
  res->err_scaled = res->err_plain;
  for (int k = 0; s && k < K; k++) s[k] = 1.0f;
  for (int i = 1; rc == OT_OK && mx > 0.0 && i <= o->alpha_steps; i++) {
    const double a = (double)i / o->alpha_steps;
    double lo = INFINITY, hi = 0.0;
    for (int k = 0; k < K; k++) {
      const double v = pow(xm[k] > 1e-5 * mx ? xm[k] : 1e-5 * mx, a);
      st[k] = (float)v;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    for (int k = 0; k < K; k++) st[k] = (float)((double)st[k] / sqrt(lo * hi));
    rc = ref_errors(e, wq, w, N, K, group, x, R, st, NULL, o->act_int8, xa);
    double t = 0.0;
    for (int n = 0; n < N; n++) t += e[n];
    if (rc == OT_OK && t < res->err_scaled) {
      res->err_scaled = t;
      res->alpha = (float)a;
      for (int k = 0; k < K; k++) s[k] = st[k];
      for (int n = 0; n < N; n++) best[n] = e[n];
    }
  }
  for (int n = 0; clip && n < N; n++) clip[n] = 1.0f;
  for (int j = 1; rc == OT_OK && j <= o->clip_steps; j++) {
    const float c = (float)(1.0 - j * (double)o->clip_step);
    for (int n = 0; n < N; n++) cv[n] = c;
    rc = ref_errors(e, wq, w, N, K, group, x, R, res->alpha > 0.0f ? s : NULL, cv, o->act_int8, xa);
    for (int n = 0; rc == OT_OK && n < N; n++)
      if (e[n] < best[n]) {
        best[n] = e[n];
        clip[n] = c;
      }
  }
  for (int n = 0; rc == OT_OK && n < N; n++) res->err += best[n];
  free(wq); free(st); free(e); free(best); free(xm); free(cv); free(xa);
  return rc;
}
