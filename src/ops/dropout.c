// Elementwise dropout: public entry points (validation, the p == 0 copy,
// profiler span, dispatch to kern/dropout.c). Contracts in include/ot/ops.h;
// the keep rule in include/ot/core.h.
#include "internal.h"
#include "ot/ops.h"
#include "kern/dropout_k.h"

// Shared by forward and backward: y[e] = kept(offset + e) ? x[e] * s : 0.
static ot_status dropout_run(const char *fn, ot_dtype dt, void *y, const void *x, size_t n,
                             float p, uint64_t seed, uint64_t offset) {
  OT_CHECK_FLOAT_DT(dt, fn);
  if (!(p >= 0.0f && p < 1.0f))
    return ot_error(OT_EINVAL, "%s: dropout probability p=%g must be in [0, 1) (p = 0 turns "
                    "dropout off, e.g. at inference)", fn, (double)p);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  if (n == 0) return OT_OK;
  if (p == 0.0f) {  // exact copy: the no-dropout path, bit for bit
    if (y != x) memmove(y, x, n * ot_dtype_size(dt));
    return OT_OK;
  }
  OT_PROF_BEGIN("ot_dropout", 12.0 * (double)n, 2.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_dropout)(ot__sk(dt), y, x, n, seed, offset, ot_dropout_threshold(p),
                      ot_dropout_scale(p));
  OT_PROF_STOP();
  return OT_OK;
}

// x -> y: [n] (dt); y may alias x.
ot_status ot_dropout_fwd(ot_dtype dt, void *y, const void *x, size_t n, float p, uint64_t seed,
                         uint64_t offset) {
  return dropout_run("ot_dropout_fwd", dt, y, x, n, p, seed, offset);
}

// dy -> dx: [n] (dt) with the forward's mask; dx may alias dy.
ot_status ot_dropout_bwd(ot_dtype dt, void *dx, const void *dy, size_t n, float p, uint64_t seed,
                         uint64_t offset) {
  return dropout_run("ot_dropout_bwd", dt, dx, dy, n, p, seed, offset);
}
