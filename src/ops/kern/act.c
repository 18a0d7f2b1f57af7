// GELU (tanh form) and SwiGLU kernels, forward and backward, one source for
// every ISA (see simd.h). Element-wise, so results do not depend on the
// thread count. f32 or bf16 storage (`bf16`), f32 math.
//   gelu(x) = 0.5 x (1 + tanh(u)) = x * s,  s = sigmoid(2u) = 1 / (1 + e),
//   e = exp(-2u), u = sqrt(2/pi) (x + 0.044715 x^3): no tanh, no cancellation.
//   gelu'(x) = s + x * s (1 - s) * 2 u'(x),  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2),
//   with 1 - s = e * s (exact when s -> 1).
//   swiglu: y = silu(g) * u; dg = dy u sig(g) (1 + g (1 - sig(g))); du = dy silu(g).
// These ops must run at memory speed, so they use simd.h's lean vexp2_core
// (base 2, degree 5, no range handling: the callers clamp the argument).
#include "simd.h"
#include <omp.h>

#define ACT_PAR_MIN 32768  // elements below which one thread is faster

#define INL static inline __attribute__((always_inline))

#define GELU_K0 0.7978845608028654f  // sqrt(2/pi)
#define GELU_K1 0.044715f
#define LOG2E 1.44269504088896341f
#define T2_MAX 125.0f                // |t| <= T2_MAX keeps 2^n a normal float

INL vf clamp_t2(vf t) { return vmin(vmax(t, vset1(-T2_MAX)), vset1(T2_MAX)); }

// sigmoid(z) = 1 / (1 + 2^t), t = -z log2(e). Where t > T2_MAX (z < -86.6)
// the value is below 2e-38: 0 is returned, so that silu(z) = z * s is 0 for
// any huge negative z. NaN propagates through the callers' products with z.
INL vf sigmoid_lean(vf z) {
  vf t = vmul(z, vset1(-LOG2E));
  vf s = vdiv(vset1(1.0f), vadd(vset1(1.0f), vexp2_core(clamp_t2(t))));
  return vselect_gt(t, vset1(T2_MAX), vzero(), s);
}

// t = -2u log2(e) = x (c0 + c1 x^2), so that exp(-2u) = 2^t.
#define GELU_C0 (-2.0f * GELU_K0 * LOG2E)
#define GELU_C1 (-2.0f * GELU_K0 * GELU_K1 * LOG2E)

// gelu(x) = x / (1 + 2^t). Where t > T2_MAX (x < ~-10.4) the value is 0 to
// f32 precision: selected explicitly so that a huge negative x does not give
// x * 1e-38.
INL vf gelu_v(vf x) {
  vf t = vmul(x, vfmadd(vmul(x, x), vset1(GELU_C1), vset1(GELU_C0)));
  vf y = vdiv(x, vadd(vset1(1.0f), vexp2_core(clamp_t2(t))));
  return vselect_gt(t, vset1(T2_MAX), vzero(), y);
}

// gelu'(x). Beyond |x| = 9.5 the derivative is 1 or |.| < 1e-30: x is clamped
// there, which keeps t inside the exp range (|t| <= 110) and every product
// finite; a NaN x (lost by the clamp) is put back at the end.
INL vf gelu_grad_v(vf x) {
  vf xc = vmin(vmax(x, vset1(-9.5f)), vset1(9.5f));
  vf x2 = vmul(xc, xc);
  vf e = vexp2_core(vmul(xc, vfmadd(x2, vset1(GELU_C1), vset1(GELU_C0))));
  vf s = vdiv(vset1(1.0f), vadd(vset1(1.0f), e));
  vf du2 = vfmadd(x2, vset1(6.0f * GELU_K0 * GELU_K1), vset1(2.0f * GELU_K0));  // 2 u'(x)
  vf g = vfmadd(vmul(vmul(xc, du2), vmul(e, s)), s, s);  // s + x du2 (1-s) s
  return vselect_nan(x, g);
}

// Blocks [b0, b1) of VL elements, plus the tail of k < VL elements at the end
// of the array when `tail`.
INL void gelu_fwd_range(const int bf16, void *y, const void *x, size_t b0, size_t b1, int tail) {
  for (size_t b = b0; b < b1; b++) vst(y, b * VL, gelu_v(vld(x, b * VL, bf16)), bf16);
  if (tail) vst_part(y, b1 * VL, gelu_v(vld_part(x, b1 * VL, tail, bf16)), tail, bf16);
}

INL void gelu_bwd_range(const int bf16, void *dx, const void *x, const void *dy, size_t b0,
                        size_t b1, int tail) {
  for (size_t b = b0; b < b1; b++)
    vst(dx, b * VL, vmul(vld(dy, b * VL, bf16), gelu_grad_v(vld(x, b * VL, bf16))), bf16);
  if (tail) {
    const size_t i = b1 * VL;
    vst_part(dx, i, vmul(vld_part(dy, i, tail, bf16), gelu_grad_v(vld_part(x, i, tail, bf16))), tail, bf16);
  }
}

// One block of k (<= VL) SwiGLU outputs at column f of row offset (xo, yo).
INL void swiglu_fwd_blk(const int bf16, void *y, const void *x, size_t xo, size_t yo, size_t F,
                        int k) {
  vf g = k == VL ? vld(x, xo, bf16) : vld_part(x, xo, k, bf16);
  vf u = k == VL ? vld(x, xo + F, bf16) : vld_part(x, xo + F, k, bf16);
  vf v = vmul(vmul(g, sigmoid_lean(g)), u);
  if (k == VL) vst(y, yo, v, bf16); else vst_part(y, yo, v, k, bf16);
}

INL void swiglu_bwd_blk(const int bf16, void *dx, const void *x, const void *dy, size_t xo,
                        size_t yo, size_t F, int k) {
  vf g = k == VL ? vld(x, xo, bf16) : vld_part(x, xo, k, bf16);
  vf u = k == VL ? vld(x, xo + F, bf16) : vld_part(x, xo + F, k, bf16);
  vf d = k == VL ? vld(dy, yo, bf16) : vld_part(dy, yo, k, bf16);
  vf s = sigmoid_lean(g), one = vset1(1.0f);
  vf dg = vmul(vmul(vmul(d, u), s), vfmadd(g, vsub(one, s), one));
  vf du = vmul(d, vmul(g, s));
  if (k == VL) { vst(dx, xo, dg, bf16); vst(dx, xo + F, du, bf16); }
  else { vst_part(dx, xo, dg, k, bf16); vst_part(dx, xo + F, du, k, bf16); }
}

// Rows [n0, n1).
INL void swiglu_fwd_rows(const int bf16, void *y, const void *x, long n0, long n1, size_t f) {
  for (long n = n0; n < n1; n++) {
    const size_t xo = (size_t)n * 2 * f, yo = (size_t)n * f;
    size_t c = 0;
    for (; c + VL <= f; c += VL) swiglu_fwd_blk(bf16, y, x, xo + c, yo + c, f, VL);
    if (c < f) swiglu_fwd_blk(bf16, y, x, xo + c, yo + c, f, (int)(f - c));
  }
}

INL void swiglu_bwd_rows(const int bf16, void *dx, const void *x, const void *dy, long n0,
                         long n1, size_t f) {
  for (long n = n0; n < n1; n++) {
    const size_t xo = (size_t)n * 2 * f, yo = (size_t)n * f;
    size_t c = 0;
    for (; c + VL <= f; c += VL) swiglu_bwd_blk(bf16, dx, x, dy, xo + c, yo + c, f, VL);
    if (c < f) swiglu_bwd_blk(bf16, dx, x, dy, xo + c, yo + c, f, (int)(f - c));
  }
}

// Threads take fixed contiguous ranges (static partition, element-wise ops so
// the split does not change any value); each range runs a loop specialised
// for the storage dtype. The last thread also does the tail (< VL elements).
#define PAR_SPLIT(total, lo, hi, last)                                   \
  const int t_ = omp_get_thread_num(), T_ = omp_get_num_threads();      \
  const size_t lo = (total) * (size_t)t_ / (size_t)T_,                  \
               hi = (total) * (size_t)(t_ + 1) / (size_t)T_;            \
  const int last = t_ == T_ - 1

void OT_K(k_gelu_fwd)(int bf16, void *y, const void *x, size_t n) {
  const size_t nb = n / VL;
  const int tail = (int)(n - nb * VL);
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_SPLIT(nb, b0, b1, last);
    if (bf16) gelu_fwd_range(1, y, x, b0, b1, last ? tail : 0);
    else gelu_fwd_range(0, y, x, b0, b1, last ? tail : 0);
  }
}

void OT_K(k_gelu_bwd)(int bf16, void *dx, const void *x, const void *dy, size_t n) {
  const size_t nb = n / VL;
  const int tail = (int)(n - nb * VL);
#pragma omp parallel if (n >= ACT_PAR_MIN)
  {
    PAR_SPLIT(nb, b0, b1, last);
    if (bf16) gelu_bwd_range(1, dx, x, dy, b0, b1, last ? tail : 0);
    else gelu_bwd_range(0, dx, x, dy, b0, b1, last ? tail : 0);
  }
}

void OT_K(k_swiglu_fwd)(int bf16, void *y, const void *x, int N, int F) {
#pragma omp parallel if ((size_t)N * F >= ACT_PAR_MIN)
  {
    PAR_SPLIT((size_t)N, n0, n1, last);
    (void)last;
    if (bf16) swiglu_fwd_rows(1, y, x, (long)n0, (long)n1, (size_t)F);
    else swiglu_fwd_rows(0, y, x, (long)n0, (long)n1, (size_t)F);
  }
}

void OT_K(k_swiglu_bwd)(int bf16, void *dx, const void *x, const void *dy, int N, int F) {
#pragma omp parallel if ((size_t)N * F >= ACT_PAR_MIN)
  {
    PAR_SPLIT((size_t)N, n0, n1, last);
    (void)last;
    if (bf16) swiglu_bwd_rows(1, dx, x, dy, (long)n0, (long)n1, (size_t)F);
    else swiglu_bwd_rows(0, dx, x, dy, (long)n0, (long)n1, (size_t)F);
  }
}
