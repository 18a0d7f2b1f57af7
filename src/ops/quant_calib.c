// Activation-aware int8 calibration of one linear layer (AWQ-style; contract in
// ot/quant.h, ot_qsearch): a grid search of the per-input-channel scale exponent
// alpha, then of a clip ratio per output row, each candidate scored by the
// layer's output error on the calibration rows, computed by one GEMM
// (E = x dW^T, dW = W - deq(Q(W diag(s), clip)) / s) per candidate. The scalar
// reference is quant_calib_ref.c; the model-level calibration that collects the
// rows and folds the scales is src/model/quant_calib.c.
#include "quant_impl.h"
#include <math.h>
#include <stdlib.h>

// The arguments (the reference, quant_calib_ref.c, calls this too).
ot_status ot__qsearch_check(const ot_qsearch_result *res, const float *s, const float *clip, const float *w,
                       int N, int K, int group, const float *x, int R, const ot_qsearch_opts *o,
                       const char *fn) {
  OT_CHECK_PTR(res, fn);
  OT_CHECK_PTR(w, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(o, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(K, fn);
  OT_CHECK_POS(R, fn);
  if (group != 0 && group != 32 && group != 64 && group != 128)
    return ot_error(OT_EINVAL, "%s: group=%d unsupported (use 0 = per row, 32, 64 or 128)", fn, group);
  if (group && K % group)
    return ot_error(OT_EINVAL, "%s: group=%d does not divide K=%d (use 0 = per row)", fn, group, K);
  if (o->alpha_steps < 0 || o->alpha_steps > 1000 || o->clip_steps < 0 || o->clip_steps > 1000)
    return ot_error(OT_EINVAL, "%s: alpha_steps=%d, clip_steps=%d outside [0, 1000]", fn, o->alpha_steps,
                    o->clip_steps);
  if (o->clip_steps && !(o->clip_step > 0.0f && o->clip_steps * (double)o->clip_step < 1.0))
    return ot_error(OT_EINVAL, "%s: clip_step=%g with clip_steps=%d must give ratios in (0, 1) (e.g. 0.02 "
                    "with 10)", fn, (double)o->clip_step, o->clip_steps);
  if (o->alpha_steps && !s) return ot_error(OT_EINVAL, "%s: s is NULL but alpha_steps=%d", fn, o->alpha_steps);
  if (o->clip_steps && !clip) return ot_error(OT_EINVAL, "%s: clip is NULL but clip_steps=%d", fn, o->clip_steps);
  for (size_t i = 0; i < (size_t)R * K; i++)
    if (!isfinite(x[i]))
      return ot_error(OT_EINVAL, "%s: calibration input [%zu, %zu] = %g is not finite", fn, i / (size_t)K,
                      i % (size_t)K, (double)x[i]);
  return OT_OK;
}

// s [K] = max(xm, 1e-5 max xm)^alpha / sqrt(max * min) (all 1 when xm is all zero).
static void scales_of(float *s, const float *xm, int K, double alpha) {
  double mx = 0.0;
  for (int k = 0; k < K; k++) mx = fmax(mx, (double)xm[k]);
  if (!(mx > 0.0) || alpha == 0.0) {
    for (int k = 0; k < K; k++) s[k] = 1.0f;
    return;
  }
  double lo = INFINITY, hi = 0.0;
  for (int k = 0; k < K; k++) {
    const double v = pow(fmax((double)xm[k], 1e-5 * mx), alpha);
    s[k] = (float)v;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
  }
  const double nrm = sqrt(lo * hi);
  for (int k = 0; k < K; k++) s[k] = (float)((double)s[k] / nrm);
}

typedef struct {
  const float *w, *x;
  int N, K, R, group;
  bool act;              // add the int8-activation GEMM's error
  float *ws, *dw, *E;    // [N, K], [N, K], [R, N] workspace
  float *Y, *xa;         // act: [R, N] x W^T, [R, K] the quantized activations
  double *e;             // [N] per-row errors of the last candidate
} search;

// xa [R, K] = the int8 GEMM's view of x / s: per row amax = max |v| (below 2^-100: 0),
// q = round_even(v * (127 / amax)), xa = q * (amax / 127).
static void act_quant(float *xa, const float *x, const float *s, int R, int K) {
#pragma omp parallel for schedule(static) if ((size_t)R * K >= 65536)
  for (int r = 0; r < R; r++) {
    float *v = xa + (size_t)r * K, amax = 0.0f;
    for (int k = 0; k < K; k++) {
      v[k] = s ? x[(size_t)r * K + k] / s[k] : x[(size_t)r * K + k];
      amax = fmaxf(amax, fabsf(v[k]));
    }
    if (amax < 0x1p-100f) amax = 0.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, sx = amax / 127.0f;
    for (int k = 0; k < K; k++) v[k] = nearbyintf(v[k] * inv) * sx;
  }
}

// S->e [N] = per-row output errors of the candidate (s [K] or NULL = 1, clip [N] or NULL = 1).
static ot_status row_errors(search *S, const float *s, const float *clip) {
  const int N = S->N, K = S->K, R = S->R;
#pragma omp parallel for schedule(static) if ((size_t)N * K >= 65536)
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) S->ws[(size_t)n * K + k] = S->w[(size_t)n * K + k] * (s ? s[k] : 1.0f);
  OT_TRY(ot_qweight_fake_quant(S->ws, S->ws, N, K, S->group, clip));
#pragma omp parallel for schedule(static) if ((size_t)N * K >= 65536)
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      const size_t i = (size_t)n * K + k;
      S->dw[i] = S->w[i] - (s ? S->ws[i] / s[k] : S->ws[i]);
    }
  OT_TRY(ot_linear_fwd(OT_F32, S->E, NULL, S->x, S->dw, NULL, R, N, K, OT_ACT_NONE));
#pragma omp parallel for schedule(static) if ((size_t)N * R >= 65536)
  for (int n = 0; n < N; n++) {
    double a = 0.0;
    for (int r = 0; r < R; r++) {
      const double v = S->E[(size_t)r * N + n];
      a += v * v;
    }
    S->e[n] = a / R;
  }
  if (!S->act) return OT_OK;
  act_quant(S->xa, S->x, s, R, K);
  OT_TRY(ot_linear_fwd(OT_F32, S->E, NULL, S->xa, S->ws, NULL, R, N, K, OT_ACT_NONE));
#pragma omp parallel for schedule(static) if ((size_t)N * R >= 65536)
  for (int n = 0; n < N; n++) {
    double a = 0.0;
    for (int r = 0; r < R; r++) {
      const double v = (double)S->E[(size_t)r * N + n] - (double)S->Y[(size_t)r * N + n];
      a += v * v;
    }
    S->e[n] += a / R;
  }
  return OT_OK;
}

static double total(const double *e, int N) {
  double t = 0.0;
  for (int n = 0; n < N; n++) t += e[n];
  return t;
}

static ot_status run(search *S, ot_qsearch_result *res, float *s, float *clip, const float *xmean,
                     const ot_qsearch_opts *o, float *xm, float *st, float *cv, double *best) {
  const int N = S->N, K = S->K, R = S->R;
  if (xmean) {
    memcpy(xm, xmean, (size_t)K * sizeof(float));
  } else {
    for (int k = 0; k < K; k++) {
      double a = 0.0;
      for (int r = 0; r < R; r++) a += fabs((double)S->x[(size_t)r * K + k]);
      xm[k] = (float)(a / R);
    }
  }
  OT_TRY(row_errors(S, NULL, NULL));
  memcpy(best, S->e, (size_t)N * sizeof(double));
  res->alpha = 0.0f;
  res->err_plain = res->err_scaled = total(S->e, N);
  if (s) for (int k = 0; k < K; k++) s[k] = 1.0f;
  for (int i = 1; i <= o->alpha_steps; i++) {
    const double a = (double)i / o->alpha_steps;
    scales_of(st, xm, K, a);
    OT_TRY(row_errors(S, st, NULL));
    const double e = total(S->e, N);
    if (e < res->err_scaled) {
      res->err_scaled = e;
      res->alpha = (float)a;
      memcpy(s, st, (size_t)K * sizeof(float));
      memcpy(best, S->e, (size_t)N * sizeof(double));
    }
  }
  const float *sc = res->alpha > 0.0f ? s : NULL;
  if (clip) for (int n = 0; n < N; n++) clip[n] = 1.0f;
  for (int j = 1; j <= o->clip_steps; j++) {
    const float c = (float)(1.0 - j * (double)o->clip_step);
    for (int n = 0; n < N; n++) cv[n] = c;
    OT_TRY(row_errors(S, sc, cv));
    for (int n = 0; n < N; n++)
      if (S->e[n] < best[n]) {
        best[n] = S->e[n];
        clip[n] = c;
      }
  }
  res->err = total(best, N);
  return OT_OK;
}

ot_status ot_qsearch(ot_qsearch_result *res, float *s, float *clip, const float *w, int N, int K, int group,
                     const float *x, int R, const float *xmean, const ot_qsearch_opts *o) {
  static const char fn[] = "ot_qsearch";
  OT_TRY(ot__qsearch_check(res, s, clip, w, N, K, group, x, R, o, fn));
  memset(res, 0, sizeof *res);
  const size_t nk = (size_t)N * K;
  search S = {w, x, N, K, R, group, o->act_int8, NULL, NULL, NULL, NULL, NULL, NULL};
  S.ws = ot_mem_alloc(nk * sizeof(float), OT_MEM_WORKSPACE);
  S.dw = ot_mem_alloc(nk * sizeof(float), OT_MEM_WORKSPACE);
  S.E = ot_mem_alloc((size_t)R * N * sizeof(float), OT_MEM_WORKSPACE);
  S.e = ot_mem_alloc((size_t)N * sizeof(double), OT_MEM_WORKSPACE);
  double *best = ot_mem_alloc((size_t)N * sizeof(double), OT_MEM_WORKSPACE);
  float *xm = ot_mem_alloc((size_t)K * sizeof(float), OT_MEM_WORKSPACE);
  float *st = ot_mem_alloc((size_t)K * sizeof(float), OT_MEM_WORKSPACE);
  float *cv = ot_mem_alloc((size_t)N * sizeof(float), OT_MEM_WORKSPACE);
  if (S.act) {
    S.Y = ot_mem_alloc((size_t)R * N * sizeof(float), OT_MEM_WORKSPACE);
    S.xa = ot_mem_alloc((size_t)R * K * sizeof(float), OT_MEM_WORKSPACE);
  }
  ot_status st_ = OT_OK;
  if (!S.ws || !S.dw || !S.E || !S.e || !best || !xm || !st || !cv || (S.act && (!S.Y || !S.xa)))
    st_ = ot_error(OT_ENOMEM, "%s: out of memory for the workspace of a [%d, %d] weight and %d rows", fn, N, K, R);
  OT_PROF_BEGIN("qsearch", 2.0 * R * N * K * (1 + o->alpha_steps + o->clip_steps) * (o->act_int8 ? 2 : 1), 0.0);
  if (st_ == OT_OK && S.act) st_ = ot_linear_fwd(OT_F32, S.Y, NULL, x, w, NULL, R, N, K, OT_ACT_NONE);
  if (st_ == OT_OK) st_ = run(&S, res, s, clip, xmean, o, xm, st, cv, best);
  OT_PROF_STOP();
  ot_mem_free(S.ws);
  ot_mem_free(S.dw);
  ot_mem_free(S.E);
  ot_mem_free(S.e);
  ot_mem_free(best);
  ot_mem_free(xm);
  ot_mem_free(st);
  ot_mem_free(cv);
  ot_mem_free(S.Y);
  ot_mem_free(S.xa);
  return st_;
}
