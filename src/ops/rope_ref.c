// Scalar reference for RoPE: angles computed here in double (independent of
// ot_rope_table), rotation in double, single thread.
#include "ot/ops.h"
#include <math.h>

// x: [B, H, T, D] f32 rotated in place by sgn * angle on the first rot dims.
static void ref_rope(float *x, int B, int H, int T, int D, int rot, float base, int pos0,
                     ot_rope_style style, double sgn) {
  if (!x || B <= 0 || H <= 0 || T <= 0 || D <= 0 || rot <= 0 || rot % 2 || rot > D ||
      pos0 < 0 || !(base > 0))
    return;
  const int half = rot / 2;
  for (long r = 0; r < (long)B * H * T; r++) {
    float *row = x + (size_t)r * D;
    double pos = (double)pos0 + (double)(r % T);
    for (int i = 0; i < half; i++) {
      double a = pos * pow((double)base, -2.0 * i / rot);
      double c = cos(a), s = sgn * sin(a);
      int i1 = style == OT_ROPE_GPTJ ? 2 * i : i;
      int i2 = style == OT_ROPE_GPTJ ? 2 * i + 1 : i + half;
      double x1 = row[i1], x2 = row[i2];
      row[i1] = (float)(x1 * c - x2 * s);
      row[i2] = (float)(x2 * c + x1 * s);
    }
  }
}

void ot_ref_rope_fwd(float *x, int B, int H, int T, int D, int rot_dims, float base, int pos0,
                     ot_rope_style style) {
  ref_rope(x, B, H, T, D, rot_dims, base, pos0, style, 1.0);
}

void ot_ref_rope_bwd(float *dx, int B, int H, int T, int D, int rot_dims, float base, int pos0,
                     ot_rope_style style) {
  ref_rope(dx, B, H, T, D, rot_dims, base, pos0, style, -1.0);
}
