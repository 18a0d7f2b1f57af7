// Scalar f32 references for GELU (tanh and erf forms) and SwiGLU (tests only). Each
// value is computed in double with libm (tanh, erf, exp), then rounded to f32.
#include "ot/ops.h"
#include <math.h>

#define REF_K0 0.79788456080286535588  // sqrt(2/pi)
#define REF_K1 0.044715

// x -> y: [n], y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void ot_ref_gelu_fwd(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double v = x[i], t = tanh(REF_K0 * (v + REF_K1 * v * v * v));
    y[i] = (float)(0.5 * v * (1.0 + t));
  }
}

// dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)): [n].
void ot_ref_gelu_bwd(float *dx, const float *x, const float *dy, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double v = x[i], t = tanh(REF_K0 * (v + REF_K1 * v * v * v));
    double d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * REF_K0 * (1.0 + 3.0 * REF_K1 * v * v);
    dx[i] = (float)(dy[i] * d);
  }
}

// x -> y: [n], y = 0.5 x (1 + erf(x / sqrt 2)) (libm erf in double).
void ot_ref_gelu_erf_fwd(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (float)(0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))));
}

// dx = dy * (0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)): [n].
void ot_ref_gelu_erf_bwd(float *dx, const float *x, const float *dy, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double v = x[i];
    dx[i] = (float)(dy[i] * (0.5 * (1.0 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2.0 * M_PI)));
  }
}

// x: [N, 2F] = [gate | up] -> y: [N, F] = gate * sigmoid(gate) * up.
void ot_ref_swiglu_fwd(float *y, const float *x, int N, int F) {
  for (int n = 0; n < N; n++)
    for (int f = 0; f < F; f++) {
      double g = x[(size_t)n * 2 * F + f], u = x[(size_t)n * 2 * F + F + f];
      y[(size_t)n * F + f] = (float)(g / (1.0 + exp(-g)) * u);
    }
}

// dy: [N, F] -> dx: [N, 2F]: d gate = dy u s (1 + g (1 - s)), d up = dy g s.
void ot_ref_swiglu_bwd(float *dx, const float *x, const float *dy, int N, int F) {
  for (int n = 0; n < N; n++)
    for (int f = 0; f < F; f++) {
      const size_t gi = (size_t)n * 2 * F + f, ui = gi + F;
      double g = x[gi], u = x[ui], d = dy[(size_t)n * F + f], s = 1.0 / (1.0 + exp(-g));
      dx[gi] = (float)(d * u * s * (1.0 + g * (1.0 - s)));
      dx[ui] = (float)(d * g * s);
    }
}
