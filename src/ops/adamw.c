// AdamW optimizer step and global-gradient-norm helpers: validation, profiler
// span and dispatch; the kernels live in kern/adamw.c.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>
#include "kern/adamw_k.h"

// p, g, m, v: [n] f32 (p, m, v updated in place); p16: [n] copy of the new p in
// p16dt (OT_BF16 or OT_F16, round to nearest even) or NULL. PyTorch AdamW (torch.optim.AdamW, single-tensor path):
//   g' = g*grad_scale; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
//   p = p (1 - lr wd) - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),
// bc1 = 1 - b1^step, bc2 = 1 - b2^step (computed once, in double).
ot_status ot_adamw_dt(float *p, const float *g, float *m, float *v, uint16_t *p16, ot_dtype p16dt,
                      size_t n, const ot_adamw_cfg *cfg, float grad_scale) {
  static const char fn[] = "ot_adamw";
  if (p16 && p16dt != OT_BF16 && p16dt != OT_F16)
    return ot_error(OT_EINVAL, "%s: parameter copy dtype %s unsupported (use bf16 or f16)", fn,
                    ot_dtype_name(p16dt));
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_PTR(p, fn);
  OT_CHECK_PTR(g, fn);
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(v, fn);
  if (!isfinite(cfg->lr) || cfg->lr < 0)
    return ot_error(OT_EINVAL, "%s: lr=%g must be finite and >= 0", fn, cfg->lr);
  if (!(cfg->beta1 >= 0 && cfg->beta1 < 1))
    return ot_error(OT_EINVAL, "%s: beta1=%g must be in [0, 1)", fn, cfg->beta1);
  if (!(cfg->beta2 >= 0 && cfg->beta2 < 1))
    return ot_error(OT_EINVAL, "%s: beta2=%g must be in [0, 1)", fn, cfg->beta2);
  if (!isfinite(cfg->eps) || cfg->eps <= 0)
    return ot_error(OT_EINVAL, "%s: eps=%g must be finite and > 0 (e.g. 1e-8)", fn, cfg->eps);
  if (!isfinite(cfg->weight_decay) || cfg->weight_decay < 0)
    return ot_error(OT_EINVAL, "%s: weight_decay=%g must be finite and >= 0", fn, cfg->weight_decay);
  if (cfg->step < 1)
    return ot_error(OT_EINVAL, "%s: step=%lld must be >= 1 (1-based, for bias correction)", fn,
                    (long long)cfg->step);
  if (!isfinite(grad_scale))
    return ot_error(OT_EINVAL, "%s: grad_scale=%g must be finite (skip the step when the "
                    "clip coefficient is NaN)", fn, grad_scale);
  if (n == 0) return OT_OK;

  double bc1 = 1.0 - pow((double)cfg->beta1, (double)cfg->step);
  double bc2 = 1.0 - pow((double)cfg->beta2, (double)cfg->step);
  float c[9] = {cfg->beta1, 1.0f - cfg->beta1, cfg->beta2, 1.0f - cfg->beta2, cfg->eps,
                (float)(1.0 - (double)cfg->lr * cfg->weight_decay), (float)(cfg->lr / bc1),
                (float)(1.0 / sqrt(bc2)), grad_scale};
  OT_PROF_BEGIN("adamw", 12.0 * (double)n, (double)n * (28.0 + (p16 ? 2.0 : 0.0)));
  OT_KPICK(k_adamw)(p, g, m, v, p16, ot__sk(p16dt), n, c);
  OT_PROF_STOP();
  return OT_OK;
}

// ot_adamw_dt with a bf16 copy (or none).
ot_status ot_adamw(float *p, const float *g, float *m, float *v, uint16_t *p_bf16,
                   size_t n, const ot_adamw_cfg *cfg, float grad_scale) {
  return ot_adamw_dt(p, g, m, v, p_bf16, OT_BF16, n, cfg, grad_scale);
}

// g: [n] f32 -> sum of squares in double; fixed 64K-element chunks summed in
// chunk order, so the result does not depend on the thread count. NULL/0 -> 0.
// Squares and 1024-element block partials are f32 (|g| > ~1e19 overflows to
// inf, i.e. a non-finite norm); blocks and chunks are added in double.
double ot_sumsq(const float *g, size_t n) {
  if (!g || n == 0) return 0.0;
  OT_PROF_BEGIN("sumsq", 2.0 * (double)n, 4.0 * (double)n);
  double s = OT_KPICK(k_sumsq)(g, n);
  OT_PROF_STOP();
  return s;
}

// min(1, max_norm / (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_); 1 when
// max_norm <= 0 (clipping off); NaN when norm is not finite (skip the step),
// checked first so that a NaN gradient is reported even with clipping off.
float ot_clip_coef(double norm, float max_norm) {
  if (!isfinite(norm)) return NAN;
  if (!(max_norm > 0)) return 1.0f;
  double c = (double)max_norm / (norm + 1e-6);
  return c < 1.0 ? (float)c : 1.0f;
}
