// Rotary position embedding (RoPE): table construction, argument validation,
// profiler span and dispatch; the kernels live in kern/rope.c, the scalar
// reference in rope_ref.c.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>
#include "kern/rope_k.h"

// tab: [Tmax, rot_dims] f32; row p holds cos(p w_i) for i < rot/2, then
// sin(p w_i), with w_i = base^(-2i/rot_dims). Angles are formed in double.
ot_status ot_rope_table(float *tab, int Tmax, int rot_dims, float base) {
  static const char fn[] = "ot_rope_table";
  OT_CHECK_PTR(tab, fn);
  OT_CHECK_POS(Tmax, fn);
  if (rot_dims <= 0 || rot_dims % 2)
    return ot_error(OT_EINVAL, "%s: rot_dims=%d must be even and > 0", fn, rot_dims);
  if (!(base > 0) || !isfinite(base))
    return ot_error(OT_EINVAL, "%s: base=%g must be finite and > 0 (e.g. 10000)", fn, base);
  const int half = rot_dims / 2;
  for (int p = 0; p < Tmax; p++) {
    float *row = tab + (size_t)p * rot_dims;
    for (int i = 0; i < half; i++) {
      double w = pow((double)base, -2.0 * i / rot_dims);
      double a = (double)p * w;
      row[i] = (float)cos(a);
      row[half + i] = (float)sin(a);
    }
  }
  return OT_OK;
}

static ot_status rope_check(const char *fn, ot_dtype dt, const void *x, const float *tab, int Tmax,
                            int B, int H, int T, int D, int rot_dims, int pos0, ot_rope_style style) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(tab, fn);
  OT_CHECK_POS(B, fn);
  OT_CHECK_POS(H, fn);
  OT_CHECK_POS(T, fn);
  OT_CHECK_POS(D, fn);
  if (rot_dims <= 0 || rot_dims % 2 || rot_dims > D)
    return ot_error(OT_EINVAL, "%s: rot_dims=%d must be even and in (0, D=%d]", fn, rot_dims, D);
  if (pos0 < 0)
    return ot_error(OT_EINVAL, "%s: pos0=%d must be >= 0", fn, pos0);
  if ((long long)pos0 + T > Tmax)
    return ot_error(OT_EINVAL, "%s: positions up to pos0=%d + T=%d exceed the table's Tmax=%d "
                    "(build the table with ot_rope_table for at least %lld positions)",
                    fn, pos0, T, Tmax, (long long)pos0 + T);
  if (style != OT_ROPE_NEOX && style != OT_ROPE_GPTJ)
    return ot_error(OT_EINVAL, "%s: style=%d unknown (use OT_ROPE_NEOX or OT_ROPE_GPTJ)", fn,
                    (int)style);
  return OT_OK;
}

static ot_status rope_run(const char *fn, const char *span, float sgn, ot_dtype dt, void *x,
                          const float *tab, int Tmax, int B, int H, int T, int D, int rot_dims,
                          int pos0, ot_rope_style style) {
  OT_TRY(rope_check(fn, dt, x, tab, Tmax, B, H, T, D, rot_dims, pos0, style));
  long rows = (long)B * H * T;
  double n = (double)rows * rot_dims;
  OT_PROF_BEGIN(span, 3.0 * n, n * 2.0 * ot_dtype_size(dt) + (double)T * rot_dims * 4.0);
  OT_KPICK(k_rope)(x, tab, rows, T, D, rot_dims, pos0, style == OT_ROPE_GPTJ, sgn, ot__sk(dt));
  OT_PROF_STOP();
  return OT_OK;
}

// x: [B, H, T, D] (dt) rotated in place on its first rot_dims dims; row t uses
// table row pos0 + t (tab: [Tmax >= pos0 + T, rot_dims] from ot_rope_table).
ot_status ot_rope_fwd(ot_dtype dt, void *x, const float *tab, int Tmax, int B, int H, int T,
                      int D, int rot_dims, int pos0, ot_rope_style style) {
  return rope_run("ot_rope_fwd", "rope_fwd", 1.0f, dt, x, tab, Tmax, B, H, T, D, rot_dims, pos0, style);
}

// dx: [B, H, T, D] (dt) gradient of the rotated x, rotated in place by the
// inverse angle (the rotation is orthogonal), giving the gradient of x.
ot_status ot_rope_bwd(ot_dtype dt, void *dx, const float *tab, int Tmax, int B, int H, int T,
                      int D, int rot_dims, int pos0, ot_rope_style style) {
  return rope_run("ot_rope_bwd", "rope_bwd", -1.0f, dt, dx, tab, Tmax, B, H, T, D, rot_dims, pos0, style);
}
