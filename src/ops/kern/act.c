// GELU (tanh and erf forms) and SwiGLU kernels, forward and backward, one source for
// every ISA (see simd.h). Element-wise, so results do not depend on the
// thread count. f32 or bf16 storage (`bf16`), f32 math.
//   gelu(x) = 0.5 x (1 + tanh(u)) = x * s,  s = sigmoid(2u) = 1 / (1 + e),
//   e = exp(-2u), u = sqrt(2/pi) (x + 0.044715 x^3): no tanh, no cancellation.
//   gelu'(x) = s + x * s (1 - s) * 2 u'(x),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2),
//   with 1 - s = e * s (exact when s -> 1).
//   swiglu: y = silu(g) * u; dg = dy u sig(g) (1 + g (1 - sig(g))); du = dy silu(g).
// These ops must run at memory speed, and with bf16 storage they are bound by
// the arithmetic, so: simd.h's lean base-2 vexp2_core; the exponent clamped to
// [-125, 128] so that 2^t = +inf past the top and x / (1 + inf) = 0 needs no
// select; one division (cheaper here than a reciprocal and a Newton step);
// AU vectors per step with their operations interleaved (the exp and the
// division are long dependency chains); bf16 loaded and stored as vector
// pairs in simd.h's exchange order (vldx2/vstx2), whose NaNs come from bf16
// data only (vstx2_bfsrc: no NaN check needed).
#include "core/simd.h"
#include "act_k.h"
#include <omp.h>

#define ACT_PAR_MIN 32768  // elements below which one thread is faster

#define INL static inline __attribute__((always_inline))

// Vectors per step (even: loaded and stored in pairs): AU, and AU_SWB for the
// bf16 SwiGLU backward (two outputs per step); measured best on Zen 3.
// AU_MAX: the most, for the helpers' arrays.
#define AU 4
#define AU_SWB 8
#define AU_MAX 8
#define FOR_K(U) _Pragma("GCC unroll 8") for (int k = 0; k < (U); k++)

#define GELU_K0 0.7978845608028654f  // sqrt(2/pi)
#define GELU_K1 0.044715f
#define LOG2E 1.44269504088896341f

// Clamp of an exponent t for vexp2_core: below -125, 1 + 2^t = 1 in f32; at
// 128, 2^t = +inf, so that x / (1 + 2^t) = 0 for finite x. A NaN t becomes
// -125 (max returns its second operand when one is NaN); the callers carry
// NaN through their other factor.
INL vf clamp_t2(vf t) { return vmin(vmax(t, vset1(-125.0f)), vset1(128.0f)); }

// t = -2u log2(e) = x (c0 + c1 x^2), so that exp(-2u) = 2^t.
#define GELU_C0 (-2.0f * GELU_K0 * LOG2E)
#define GELU_C1 (-2.0f * GELU_K0 * GELU_K1 * LOG2E)

// x[k] <- gelu(x[k]) = x / (1 + 2^t), k < U. For x < ~-10, 2^t is +inf or
// > 1e37 and y is 0 or below 1e-36 in magnitude; NaN propagates through x.
INL void gelu_n(vf *x, const int U) {
  vf e[AU_MAX];
  FOR_K(U) e[k] = vmul(x[k], vfmadd(vmul(x[k], x[k]), vset1(GELU_C1), vset1(GELU_C0)));
  FOR_K(U) e[k] = vexp2_core(clamp_t2(e[k]));
  FOR_K(U) x[k] = vdiv(x[k], vadd(vset1(1.0f), e[k]));
}

// x[k] <- d[k] * gelu'(x[k]), k < U. Beyond |x| = 9.5 the derivative is 1 or
// |.| < 1e-30: x is clamped there, which keeps t inside the exp range
// (|t| <= 110) and every product finite. The constants come first in max/min
// so that a NaN x stays NaN (vexp2_core maps NaN to NaN).
INL void gelu_bwd_n(vf *x, const vf *d, const int U) {
  vf e[AU_MAX], s[AU_MAX];
  FOR_K(U) x[k] = vmin(vset1(9.5f), vmax(vset1(-9.5f), x[k]));
  FOR_K(U) e[k] = vexp2_core(vmul(x[k], vfmadd(vmul(x[k], x[k]), vset1(GELU_C1), vset1(GELU_C0))));
  FOR_K(U) s[k] = vdiv(vset1(1.0f), vadd(vset1(1.0f), e[k]));
  FOR_K(U) {
    vf du2 = vfmadd(vmul(x[k], x[k]), vset1(6.0f * GELU_K0 * GELU_K1), vset1(2.0f * GELU_K0));  // 2 u'(x)
    vf g = vfmadd(vmul(vmul(x[k], du2), vmul(e[k], s[k])), s[k], s[k]);  // s + x du2 (1-s) s
    x[k] = vmul(d[k], g);
  }
}

// GELU, erf form (ViT, BERT): gelu(x) = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2)). With
// a = |x| / sqrt 2: h = 0.5 erfc(a) = 0.5 t exp(-a^2 + Q(t)), t = 1 / (1 + a / 2), Q the
// degree-9 Chebyshev fit of Numerical Recipes' erfcc (relative error of erfc below 1.2e-7
// for every a >= 0; in f32 the exponent's rounding adds up to ~2e-6 at a = 3, where h <
// 1e-5); Phi = x > 0 ? 1 - h : h, so the negative tail keeps its relative accuracy. The
// exponent is clamped at -125 (below, h is 0 to f32 precision); a NaN x gives a NaN t, so
// NaN propagates. gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
#define ERFC_A (0.5f * 0.70710678118654752f)   // t = 1 / (1 + ERFC_A |x|)
#define INV_SQRT_2PI 0.39894228040143268f

// ph[k] <- Phi(x[k]), k < U; with e: e[k] <- exp(-x[k]^2 / 2) too.
INL void phi_n(const vf *x, vf *ph, vf *e, const int U) {
  vf t[AU_MAX], s[AU_MAX];
  FOR_K(U) t[k] = vdiv(vset1(1.0f), vfmadd(vmax(x[k], vsub(vzero(), x[k])), vset1(ERFC_A), vset1(1.0f)));
  FOR_K(U) s[k] = vmul(vmul(x[k], x[k]), vset1(-0.5f));   // -a^2
  if (e) {
    FOR_K(U) e[k] = vexp2_core(vmax(vmul(s[k], vset1(LOG2E)), vset1(-125.0f)));
  }
  FOR_K(U) {
    vf q = vfmadd(t[k], vset1(0.17087277f), vset1(-0.82215223f));
    q = vfmadd(q, t[k], vset1(1.48851587f));
    q = vfmadd(q, t[k], vset1(-1.13520398f));
    q = vfmadd(q, t[k], vset1(0.27886807f));
    q = vfmadd(q, t[k], vset1(-0.18628806f));
    q = vfmadd(q, t[k], vset1(0.09678418f));
    q = vfmadd(q, t[k], vset1(0.37409196f));
    q = vfmadd(q, t[k], vset1(1.00002368f));
    q = vfmadd(q, t[k], vset1(-1.26551223f));
    const vf ex = vexp2_core(vmax(vmul(vadd(s[k], q), vset1(LOG2E)), vset1(-125.0f)));
    const vf h = vmul(vmul(t[k], ex), vset1(0.5f));
    ph[k] = vselect_gt(x[k], vzero(), vsub(vset1(1.0f), h), h);
  }
}

// x[k] <- x[k] Phi(x[k]), k < U.
INL void gelu_erf_n(vf *x, const int U) {
  vf ph[AU_MAX];
  phi_n(x, ph, NULL, U);
  FOR_K(U) x[k] = vmul(x[k], ph[k]);
}

// x[k] <- d[k] * (Phi(x[k]) + x[k] phi(x[k])), k < U. x clamped to [-9.5, 9.5] first (the
// derivative is 1 or 0 to f32 precision beyond), so that x times the clamped exponential
// stays right for huge |x|; the constants come first in max/min so that a NaN x stays NaN.
INL void gelu_erf_bwd_n(vf *x, const vf *d, const int U) {
  vf ph[AU_MAX], e[AU_MAX];
  FOR_K(U) x[k] = vmin(vset1(9.5f), vmax(vset1(-9.5f), x[k]));
  phi_n(x, ph, e, U);
  FOR_K(U) x[k] = vmul(d[k], vfmadd(vmul(x[k], e[k]), vset1(INV_SQRT_2PI), ph[k]));
}

// g[k] <- silu(g[k]) * u[k] = g / (1 + 2^t) * u, t = -g log2(e), k < U. For
// g < -88, 2^t = +inf and silu(g) = 0 (also for a huge g); NaN through g.
INL void swiglu_n(vf *g, const vf *u, const int U) {
  vf e[AU_MAX];
  FOR_K(U) e[k] = vexp2_core(clamp_t2(vmul(g[k], vset1(-LOG2E))));
  FOR_K(U) g[k] = vmul(vdiv(g[k], vadd(vset1(1.0f), e[k])), u[k]);
}

// g[k] <- dg, u[k] <- du for upstream d[k], k < U; s = sigmoid(g) = 1 / (1 + 2^t).
INL void swiglu_bwd_n(vf *g, vf *u, const vf *d, const int U) {
  vf s[AU_MAX];
  FOR_K(U) s[k] = vexp2_core(clamp_t2(vmul(g[k], vset1(-LOG2E))));
  FOR_K(U) s[k] = vdiv(vset1(1.0f), vadd(vset1(1.0f), s[k]));
  FOR_K(U) {
    const vf one = vset1(1.0f);
    vf dg = vmul(vmul(vmul(d[k], u[k]), s[k]), vfmadd(g[k], vsub(one, s[k]), one));
    u[k] = vmul(d[k], vmul(g[k], s[k]));
    g[k] = dg;
  }
}

// Loads U vectors from p + i (exchange order for full steps).
INL void ld_step(vf *v, const void *p, size_t i, const int U, const int bf16) {
  for (int k = 0; k < U; k += 2) vldx2(p, i + (size_t)k * VL, &v[k], &v[k + 1], bf16);
}
INL void st_step(void *p, size_t i, const vf *v, const int U, const int bf16) {
  for (int k = 0; k < U; k += 2) vstx2_bfsrc(p, i + (size_t)k * VL, v[k], v[k + 1], bf16);
}
// One vector of k <= VL elements at i (natural order).
INL vf ld1(const void *p, size_t i, int k, const int bf16) {
  return k == VL ? vld(p, i, bf16) : vld_part(p, i, k, bf16);
}
INL void st1(void *p, size_t i, vf v, int k, const int bf16) {
  if (k == VL) vst(p, i, v, bf16); else vst_part(p, i, v, k, bf16);
}

// Elements [i0, i1): full steps, then (when i1 is not a step boundary: the
// end of the array) single vectors and the partial tail.
// erf: the erf form (gelu_erf_n) instead of the tanh form.
INL void gelu_fwd_range(const int bf16, const int erf, void *y, const void *x, size_t i0, size_t i1) {
  size_t i = i0;
  for (; i + AU * VL <= i1; i += AU * VL) {
    vf v[AU];
    ld_step(v, x, i, AU, bf16);
    if (erf) gelu_erf_n(v, AU); else gelu_n(v, AU);
    st_step(y, i, v, AU, bf16);
  }
  for (; i < i1; i += VL) {
    int k = i1 - i < VL ? (int)(i1 - i) : VL;
    vf v = ld1(x, i, k, bf16);
    if (erf) gelu_erf_n(&v, 1); else gelu_n(&v, 1);
    st1(y, i, v, k, bf16);
  }
}

INL void gelu_bwd_range(const int bf16, const int erf, void *dx, const void *x, const void *dy,
                        size_t i0, size_t i1) {
  size_t i = i0;
  for (; i + AU * VL <= i1; i += AU * VL) {
    vf v[AU], d[AU];
    ld_step(v, x, i, AU, bf16);
    ld_step(d, dy, i, AU, bf16);
    if (erf) gelu_erf_bwd_n(v, d, AU); else gelu_bwd_n(v, d, AU);
    st_step(dx, i, v, AU, bf16);
  }
  for (; i < i1; i += VL) {
    int k = i1 - i < VL ? (int)(i1 - i) : VL;
    vf v = ld1(x, i, k, bf16), d = ld1(dy, i, k, bf16);
    if (erf) gelu_erf_bwd_n(&v, &d, 1); else gelu_bwd_n(&v, &d, 1);
    st1(dx, i, v, k, bf16);
  }
}

// Prefetch for the SwiGLU row loops (bf16): the lines of elements [i, i + n)
// of p, called with the next row's span of the current step. Rows of x hold
// two streams (gate, up) that the hardware prefetcher alone follows poorly
// (measured 1.35x faster from memory); a prefetch past the end of an array is
// harmless.
INL void pf_span(const void *p, size_t i, int n, const int bf16) {
  if (bf16)
    for (int b = 0; b < 2 * n; b += 64) __builtin_prefetch((const char *)p + 2 * i + b, 0, 3);
}

// Rows [n0, n1) of x [N, 2F] (gate, up) -> y [N, F].
INL void swiglu_fwd_rows(const int bf16, void *y, const void *x, long n0, long n1, size_t F) {
  for (long n = n0; n < n1; n++) {
    const size_t xo = (size_t)n * 2 * F, yo = (size_t)n * F;
    size_t c = 0;
    for (; c + AU * VL <= F; c += AU * VL) {
      pf_span(x, xo + 2 * F + c, AU * VL, bf16);  // the next row's gate and up
      pf_span(x, xo + 3 * F + c, AU * VL, bf16);
      vf g[AU], u[AU];
      ld_step(g, x, xo + c, AU, bf16);
      ld_step(u, x, xo + F + c, AU, bf16);
      swiglu_n(g, u, AU);
      st_step(y, yo + c, g, AU, bf16);
    }
    for (; c < F; c += VL) {
      int k = F - c < VL ? (int)(F - c) : VL;
      vf g = ld1(x, xo + c, k, bf16), u = ld1(x, xo + F + c, k, bf16);
      swiglu_n(&g, &u, 1);
      st1(y, yo + c, g, k, bf16);
    }
  }
}

INL void swiglu_bwd_rows(const int bf16, void *dx, const void *x, const void *dy, long n0,
                         long n1, size_t F) {
  for (long n = n0; n < n1; n++) {
    const size_t xo = (size_t)n * 2 * F, yo = (size_t)n * F;
    size_t c = 0;
    const int U = bf16 ? AU_SWB : AU;
    for (; c + (size_t)U * VL <= F; c += (size_t)U * VL) {
      pf_span(x, xo + 2 * F + c, U * VL, bf16);  // the next row's gate, up and dy
      pf_span(x, xo + 3 * F + c, U * VL, bf16);
      pf_span(dy, yo + F + c, U * VL, bf16);
      vf g[AU_MAX], u[AU_MAX], d[AU_MAX];
      ld_step(g, x, xo + c, U, bf16);
      ld_step(u, x, xo + F + c, U, bf16);
      ld_step(d, dy, yo + c, U, bf16);
      swiglu_bwd_n(g, u, d, U);
      st_step(dx, xo + c, g, U, bf16);
      st_step(dx, xo + F + c, u, U, bf16);
    }
    for (; c < F; c += VL) {
      int k = F - c < VL ? (int)(F - c) : VL;
      vf g = ld1(x, xo + c, k, bf16), u = ld1(x, xo + F + c, k, bf16), d = ld1(dy, yo + c, k, bf16);
      swiglu_bwd_n(&g, &u, &d, 1);
      st1(dx, xo + c, g, k, bf16);
      st1(dx, xo + F + c, u, k, bf16);
    }
  }
}

// Threads take fixed contiguous ranges (static partition, element-wise ops so
// the split does not change any value): `total` units split evenly.
#define PAR_SPLIT(total, lo, hi)                                         \
  const int t_ = omp_get_thread_num(), T_ = omp_get_num_threads();      \
  const size_t lo = (total) * (size_t)t_ / (size_t)T_,                  \
               hi = (total) * (size_t)(t_ + 1) / (size_t)T_

// Element ranges: whole steps of g elements per thread, the last thread also
// takes the rest.
#define PAR_ELEMS(n, g, i0, i1)                                          \
  PAR_SPLIT((n) / (g), s0_, s1_);                                       \
  const size_t i0 = s0_ * (g), i1 = t_ == T_ - 1 ? (n) : s1_ * (g)

void OT_K(k_gelu_fwd)(int bf16, void *y, const void *x, size_t n) {
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_ELEMS(n, AU * VL, i0, i1);
    OT_SK_SWITCH(bf16, K, gelu_fwd_range(K, 0, y, x, i0, i1));
  }
}

void OT_K(k_gelu_bwd)(int bf16, void *dx, const void *x, const void *dy, size_t n) {
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_ELEMS(n, AU * VL, i0, i1);
    OT_SK_SWITCH(bf16, K, gelu_bwd_range(K, 0, dx, x, dy, i0, i1));
  }
}

void OT_K(k_gelu_erf_fwd)(int bf16, void *y, const void *x, size_t n) {
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_ELEMS(n, AU * VL, i0, i1);
    OT_SK_SWITCH(bf16, K, gelu_fwd_range(K, 1, y, x, i0, i1));
  }
}

void OT_K(k_gelu_erf_bwd)(int bf16, void *dx, const void *x, const void *dy, size_t n) {
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_ELEMS(n, AU * VL, i0, i1);
    OT_SK_SWITCH(bf16, K, gelu_bwd_range(K, 1, dx, x, dy, i0, i1));
  }
}

void OT_K(k_swiglu_fwd)(int bf16, void *y, const void *x, int N, int F) {
#pragma omp parallel if ((size_t)N * F >= ACT_PAR_MIN)
  {
    PAR_SPLIT((size_t)N, n0, n1);
    OT_SK_SWITCH(bf16, K, swiglu_fwd_rows(K, y, x, (long)n0, (long)n1, (size_t)F));
  }
}

void OT_K(k_swiglu_bwd)(int bf16, void *dx, const void *x, const void *dy, int N, int F) {
#pragma omp parallel if ((size_t)N * F >= ACT_PAR_MIN)
  {
    PAR_SPLIT((size_t)N, n0, n1);
    OT_SK_SWITCH(bf16, K, swiglu_bwd_rows(K, dx, x, dy, (long)n0, (long)n1, (size_t)F));
  }
}
