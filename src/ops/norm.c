// Residual + LayerNorm / RMSNorm: public entry points (validation, profiler
// span, dispatch to kern/norm.c). Contracts in include/ot/ops.h.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>
#include "kern/norm_k.h"

// Checks shared by both norms' forward.
static ot_status fwd_check(const char *fn, ot_dtype dt, const void *y, const float *rstd,
                           const void *res_out, const void *x, const void *r, const float *g,
                           int N, int C, float eps) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(rstd, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(g, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(C, fn);
  if (r && !res_out)
    return ot_error(OT_EINVAL, "%s: argument 'res_out' is NULL while r is given: the residual "
                    "sum x + r must be saved for the backward (pass a [N, C] buffer)", fn);
  if (!(eps > 0.0f) || !isfinite(eps))
    return ot_error(OT_EINVAL, "%s: eps=%g must be finite and > 0 (e.g. 1e-5)", fn, (double)eps);
  return OT_OK;
}

static ot_status bwd_check(const char *fn, ot_dtype dt, const void *dx, const float *dg,
                           const void *dy, const void *res, const float *rstd, const float *g,
                           int N, int C) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(dg, fn);
  OT_CHECK_PTR(dy, fn);
  OT_CHECK_PTR(res, fn);
  OT_CHECK_PTR(rstd, fn);
  OT_CHECK_PTR(g, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(C, fn);
  return OT_OK;
}

// Per-thread scratch for the backward (dg/dbeta partials, two row buffers): nt * 4 * ld floats.
static float *bwd_scratch(int C, int *nt, int *ld) {
  *nt = ot_threads_get();
  if (*nt < 1) *nt = 1;
  *ld = (C + 15) & ~15;
  return ot_scratch(sizeof(float) * 4 * (size_t)*ld * (size_t)*nt);
}

// y, res_out: [N, C] (dt); mean, rstd: [N] f32; x, r: [N, C] (dt); g, beta: [C] f32.
ot_status ot_layernorm_fwd(ot_dtype dt, void *y, float *mean, float *rstd, void *res_out,
                           const void *x, const void *r, const float *g, const float *beta,
                           int N, int C, float eps) {
  static const char fn[] = "ot_layernorm_fwd";
  OT_TRY(fwd_check(fn, dt, y, rstd, res_out, x, r, g, N, C, eps));
  OT_CHECK_PTR(mean, fn);
  const double nc = (double)N * C, es = (double)ot_dtype_size(dt);
  OT_PROF_BEGIN("ot_layernorm_fwd", 8.0 * nc, nc * es * (2 + (r ? 2 : 0) + (!r && res_out ? 1 : 0)));
  OT_KPICK(k_norm_fwd)(ot__sk(dt), 0, y, mean, rstd, res_out, x, r, g, beta, N, C, eps);
  OT_PROF_STOP();
  return OT_OK;
}

// dx: [N, C] (dt) = LN backward + dres; dg, dbeta: [C] f32 +=.
ot_status ot_layernorm_bwd(ot_dtype dt, void *dx, float *dg, float *dbeta, const void *dy,
                           const void *dres, const void *res, const float *mean,
                           const float *rstd, const float *g, int N, int C) {
  static const char fn[] = "ot_layernorm_bwd";
  OT_TRY(bwd_check(fn, dt, dx, dg, dy, res, rstd, g, N, C));
  OT_CHECK_PTR(mean, fn);
  int nt, ld;
  float *part = bwd_scratch(C, &nt, &ld);
  if (!part) return ot_error(OT_ENOMEM, "%s: no scratch for %d threads x %d columns", fn, nt, C);
  const double nc = (double)N * C, es = (double)ot_dtype_size(dt);
  OT_PROF_BEGIN("ot_layernorm_bwd", 14.0 * nc, nc * es * (3 + (dres ? 1 : 0)));
  OT_KPICK(k_norm_bwd)(ot__sk(dt), 0, dx, dg, dbeta, dy, dres, res, mean, rstd, g, N, C, part,
                       nt, ld);
  OT_PROF_STOP();
  return OT_OK;
}

// y, res_out: [N, C] (dt); rstd: [N] f32; x, r: [N, C] (dt); g: [C] f32.
ot_status ot_rmsnorm_fwd(ot_dtype dt, void *y, float *rstd, void *res_out, const void *x,
                         const void *r, const float *g, int N, int C, float eps) {
  static const char fn[] = "ot_rmsnorm_fwd";
  OT_TRY(fwd_check(fn, dt, y, rstd, res_out, x, r, g, N, C, eps));
  const double nc = (double)N * C, es = (double)ot_dtype_size(dt);
  OT_PROF_BEGIN("ot_rmsnorm_fwd", 5.0 * nc, nc * es * (2 + (r ? 2 : 0) + (!r && res_out ? 1 : 0)));
  OT_KPICK(k_norm_fwd)(ot__sk(dt), 1, y, NULL, rstd, res_out, x, r, g, NULL, N, C, eps);
  OT_PROF_STOP();
  return OT_OK;
}

// dx: [N, C] (dt) = RMSNorm backward + dres; dg: [C] f32 +=.
ot_status ot_rmsnorm_bwd(ot_dtype dt, void *dx, float *dg, const void *dy, const void *dres,
                         const void *res, const float *rstd, const float *g, int N, int C) {
  static const char fn[] = "ot_rmsnorm_bwd";
  OT_TRY(bwd_check(fn, dt, dx, dg, dy, res, rstd, g, N, C));
  int nt, ld;
  float *part = bwd_scratch(C, &nt, &ld);
  if (!part) return ot_error(OT_ENOMEM, "%s: no scratch for %d threads x %d columns", fn, nt, C);
  const double nc = (double)N * C, es = (double)ot_dtype_size(dt);
  OT_PROF_BEGIN("ot_rmsnorm_bwd", 10.0 * nc, nc * es * (3 + (dres ? 1 : 0)));
  OT_KPICK(k_norm_bwd)(ot__sk(dt), 1, dx, dg, NULL, dy, dres, res, NULL, rstd, g, N, C, part,
                       nt, ld);
  OT_PROF_STOP();
  return OT_OK;
}
