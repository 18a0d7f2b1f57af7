// Scalar reference of the int8 GEMM of the quantized linear (ot_qlinear_i8_fwd,
// kern/qgemm.c): the same per-row activation quantization written as plain
// loops, exact integer sums per weight group (int64), the epilogue in double.
#include "internal.h"
#include "ot/quant.h"
#include <math.h>
#include <stdlib.h>

ot_status ot_ref_qlinear_i8_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M) {
  static const char fn[] = "ot_ref_qlinear_i8_fwd";
  OT_TRY(ot_qweight_check(W, fn));
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_POS(M, fn);
  if (W->kind != OT_QW_INT8)
    return ot_error(OT_EINVAL, "%s: weight is %s (the int8 GEMM takes int8 weights)", fn, ot_qw_kind_name(W->kind));
  const int N = W->rows, K = W->cols, G = W->group ? W->group : K, ng = K / G;
  const int8_t *wq = (const int8_t *)W->data;
  int8_t *xq = malloc((size_t)K);
  if (!xq) return ot_error(OT_ENOMEM, "%s: out of memory for a row of %d bytes", fn, K);
  for (int m = 0; m < M; m++) {
    const float *xr = x + (size_t)m * K;
    float amax = 0.0f;
    bool finite = true;
    for (int k = 0; k < K; k++) {
      finite = finite && isfinite(xr[k]);
      amax = fmaxf(amax, fabsf(xr[k]));
    }
    if (!finite) {   // NaN / infinity: the f32 product, so that they propagate
      ot_status s = ot_ref_qlinear_fwd(y + (size_t)m * N, xr, W, bias, 1);
      if (s != OT_OK) {
        free(xq);
        return s;
      }
      continue;
    }
    if (amax < 0x1p-100f) amax = 0.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, sx = amax / 127.0f;
    for (int k = 0; k < K; k++) {
      const float t = xr[k] * inv;   // one f32 product, then round to nearest even
      xq[k] = (int8_t)nearbyintf(t);
    }
    for (int n = 0; n < N; n++) {
      double acc = 0.0;
      for (int g = 0; g < ng; g++) {
        int64_t s = 0;
        for (int k = g * G; k < (g + 1) * G; k++) s += (int64_t)xq[k] * wq[(size_t)n * K + k];
        acc += (double)W->scales[(size_t)n * ng + g] * (double)s;
      }
      y[(size_t)m * N + n] = (float)(acc * (double)sx + (bias ? (double)bias[n] : 0.0));
    }
  }
  free(xq);
  return OT_OK;
}
