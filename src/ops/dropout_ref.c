// Scalar reference of the elementwise dropout (tests): one ot_dropout_keep
// call per element, straight from the rule in ot/core.h.
#include "internal.h"
#include "ot/ops.h"

// x -> y: [n] f32; y may alias x.
void ot_ref_dropout_fwd(float *y, const float *x, size_t n, float p, uint64_t seed,
                        uint64_t offset) {
  const float s = ot_dropout_scale(p);
  for (size_t e = 0; e < n; e++) y[e] = ot_dropout_keep(seed, offset + e, p) ? x[e] * s : 0.0f;
}

// dy -> dx: [n] f32, the forward's mask regenerated; dx may alias dy.
void ot_ref_dropout_bwd(float *dx, const float *dy, size_t n, float p, uint64_t seed,
                        uint64_t offset) {
  ot_ref_dropout_fwd(dx, dy, n, p, seed, offset);
}

// x -> y: [n0, n1, n2] f32, element (a, b, c) with counter offset + r(a) s0 + b s1 + c.
void ot_ref_dropout_fwd_map(float *y, const float *x, const ot_dropout_map *mp, float p,
                            uint64_t seed, uint64_t offset) {
  const float s = ot_dropout_scale(p);
  for (size_t a = 0; a < mp->n0; a++)
    for (size_t b = 0; b < mp->n1; b++)
      for (size_t c = 0; c < mp->n2; c++) {
        const size_t e = (a * mp->n1 + b) * mp->n2 + c;
        const uint64_t r = mp->rows ? (uint64_t)mp->rows[a] : (uint64_t)a;
        const uint64_t ctr = offset + r * mp->s0 + (uint64_t)b * mp->s1 + (uint64_t)c;
        y[e] = ot_dropout_keep(seed, ctr, p) ? x[e] * s : 0.0f;
      }
}

// dy -> dx: [n0, n1, n2] f32, the forward's mask regenerated; dx may alias dy.
void ot_ref_dropout_bwd_map(float *dx, const float *dy, const ot_dropout_map *mp, float p,
                            uint64_t seed, uint64_t offset) {
  ot_ref_dropout_fwd_map(dx, dy, mp, p, seed, offset);
}
