// The error bound of the int8 GEMM of the quantized linear (ot_qlinear_i8_fwd,
// the path of ot_qlinear_fwd for int8 weights and M > OT_QLINEAR_GEMV_MAX),
// shared by tests/test_quant.c and tests/test_quant_i8.c.
#ifndef OT_TEST_QUANT_I8_BOUND_H
#define OT_TEST_QUANT_I8_BOUND_H
#include <math.h>
#include <stddef.h>

// Outputs of y [M, N] off want (the f32 product x @ wd^T + bias, wd [N, K] the
// dequantized weights) by more than the per-row activation rounding: each x
// becomes sx * round(x / sx), sx = max |x[m, :]| / 127, off by at most sx / 2
// (1 + 2^-20 for the f32 products that form it), so |y - want| <= sum_k |wd|
// sx / 2, plus 1e-6 (sum |wd x| + |bias|) for the f32 conversions and sums; a
// row whose max |x| is below 2^-100 is quantized as zero (sum |wd| max |x|).
static inline int th_over_i8_bound(const float *y, const float *want, const float *wd, const float *x,
                                   const float *bias, int M, int N, int K) {
  int bad = 0;
  for (int m = 0; m < M; m++) {
    const float *xr = x + (size_t)m * K;
    double amax = 0.0;
    for (int k = 0; k < K; k++) amax = fmax(amax, fabs(xr[k]));
    const double e = amax < 0x1p-100 ? amax : amax / 127.0 * 0.5 * (1.0 + 0x1p-20);
    for (int n = 0; n < N; n++) {
      double b = 1e-30 + (bias ? 1e-6 * fabs(bias[n]) : 0.0);
      for (int k = 0; k < K; k++) {
        const double aw = fabs(wd[(size_t)n * K + k]);
        b += aw * e + 1e-6 * aw * fabs(xr[k]);
      }
      bad += !(fabs((double)y[(size_t)m * N + n] - want[(size_t)m * N + n]) <= b);
    }
  }
  return bad;
}
#endif
