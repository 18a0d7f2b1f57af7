// GELU (tanh and erf forms) and SwiGLU: public entry points (validation, profiler span,
// dispatch to kern/act.c). Contracts in include/ot/ops.h.
#include "internal.h"
#include "ot/ops.h"
#include "kern/act_k.h"

// x -> y: [n] (dt). n == 0 is a no-op. y may alias x.
ot_status ot_gelu_fwd(ot_dtype dt, void *y, const void *x, size_t n) {
  static const char fn[] = "ot_gelu_fwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  if (n == 0) return OT_OK;
  OT_PROF_BEGIN("ot_gelu_fwd", 20.0 * (double)n, 2.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_gelu_fwd)(ot__sk(dt), y, x, n);
  OT_PROF_STOP();
  return OT_OK;
}

// x, dy -> dx: [n] (dt) = dy * gelu'(x); dx may alias dy (or x).
ot_status ot_gelu_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, size_t n) {
  static const char fn[] = "ot_gelu_bwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(dy, fn);
  if (n == 0) return OT_OK;
  OT_PROF_BEGIN("ot_gelu_bwd", 30.0 * (double)n, 3.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_gelu_bwd)(ot__sk(dt), dx, x, dy, n);
  OT_PROF_STOP();
  return OT_OK;
}

// GELU, erf form: x -> y: [n] (dt); y may alias x.
ot_status ot_gelu_erf_fwd(ot_dtype dt, void *y, const void *x, size_t n) {
  static const char fn[] = "ot_gelu_erf_fwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  if (n == 0) return OT_OK;
  OT_PROF_BEGIN("ot_gelu_erf_fwd", 25.0 * (double)n, 2.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_gelu_erf_fwd)(ot__sk(dt), y, x, n);
  OT_PROF_STOP();
  return OT_OK;
}

// x, dy -> dx: [n] (dt) = dy * gelu_erf'(x); dx may alias dy (or x).
ot_status ot_gelu_erf_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, size_t n) {
  static const char fn[] = "ot_gelu_erf_bwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(dy, fn);
  if (n == 0) return OT_OK;
  OT_PROF_BEGIN("ot_gelu_erf_bwd", 30.0 * (double)n, 3.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_gelu_erf_bwd)(ot__sk(dt), dx, x, dy, n);
  OT_PROF_STOP();
  return OT_OK;
}

static ot_status swiglu_check(const char *fn, ot_dtype dt, int N, int F) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(F, fn);
  return OT_OK;
}

// x: [N, 2F] = [gate | up] -> y: [N, F] (dt).
ot_status ot_swiglu_fwd(ot_dtype dt, void *y, const void *x, int N, int F) {
  static const char fn[] = "ot_swiglu_fwd";
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_TRY(swiglu_check(fn, dt, N, F));
  const double nf = (double)N * F;
  OT_PROF_BEGIN("ot_swiglu_fwd", 20.0 * nf, 3.0 * nf * ot_dtype_size(dt));
  OT_KPICK(k_swiglu_fwd)(ot__sk(dt), y, x, N, F);
  OT_PROF_STOP();
  return OT_OK;
}

// x: [N, 2F], dy: [N, F] -> dx: [N, 2F] (dt, overwritten).
ot_status ot_swiglu_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, int N, int F) {
  static const char fn[] = "ot_swiglu_bwd";
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(dy, fn);
  OT_TRY(swiglu_check(fn, dt, N, F));
  const double nf = (double)N * F;
  OT_PROF_BEGIN("ot_swiglu_bwd", 30.0 * nf, 5.0 * nf * ot_dtype_size(dt));
  OT_KPICK(k_swiglu_bwd)(ot__sk(dt), dx, x, dy, N, F);
  OT_PROF_STOP();
  return OT_OK;
}
