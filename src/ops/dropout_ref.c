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
