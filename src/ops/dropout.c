// Elementwise dropout: public entry points (validation, the p == 0 copy,
// profiler span, dispatch to kern/dropout.c). Contracts in include/ot/ops.h;
// the keep rule in include/ot/core.h.
#include "internal.h"
#include "ot/ops.h"
#include "kern/dropout_k.h"

// Shared by forward and backward: y = kept ? x * s : 0 over the map's tensor.
static ot_status dropout_run(const char *fn, ot_dtype dt, void *y, const void *x,
                             const ot_dropout_map *mp, float p, uint64_t seed, uint64_t offset) {
  OT_CHECK_FLOAT_DT(dt, fn);
  if (!(p >= 0.0f && p < 1.0f))
    return ot_error(OT_EINVAL, "%s: dropout probability p=%g must be in [0, 1) (p = 0 turns "
                    "dropout off, e.g. at inference)", fn, (double)p);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(mp, fn);
  const size_t n = mp->n0 * mp->n1 * mp->n2;
  if (n == 0) return OT_OK;
  if (mp->n1 > 1 && mp->s1 < mp->n2)
    return ot_error(OT_EINVAL, "%s: counter stride s1=%llu is below the row length n2=%zu: rows "
                    "would share counters (give s1 >= n2)", fn, (unsigned long long)mp->s1, mp->n2);
  if (p == 0.0f) {  // exact copy: the no-dropout path, bit for bit
    if (y != x) memmove(y, x, n * ot_dtype_size(dt));
    return OT_OK;
  }
  ot__dmap km = {mp->n0, mp->n1, mp->n2, mp->rows, mp->s0, mp->s1};
  // runs of consecutive counters as one row each: longer rows, fewer work items
  if (km.n1 == 1 || km.s1 == km.n2) { km.n2 *= km.n1; km.n1 = 1; km.s1 = 0; }
  if (km.n0 == 1 && km.rows) offset += (uint64_t)km.rows[0] * km.s0;
  if (km.n0 == 1 || (!km.rows && km.s0 == km.n2)) {
    km.n2 *= km.n0; km.n0 = 1; km.s0 = 0; km.rows = NULL;
  }
  OT_PROF_BEGIN("ot_dropout", 12.0 * (double)n, 2.0 * (double)n * ot_dtype_size(dt));
  OT_KPICK(k_dropout)(ot__sk(dt), y, x, &km, seed, offset, ot_dropout_threshold(p),
                      ot_dropout_scale(p));
  OT_PROF_STOP();
  return OT_OK;
}

// x -> y: [n] (dt); y may alias x.
ot_status ot_dropout_fwd(ot_dtype dt, void *y, const void *x, size_t n, float p, uint64_t seed,
                         uint64_t offset) {
  const ot_dropout_map mp = {1, 1, n, NULL, 0, 0};
  return dropout_run("ot_dropout_fwd", dt, y, x, &mp, p, seed, offset);
}

// dy -> dx: [n] (dt) with the forward's mask; dx may alias dy.
ot_status ot_dropout_bwd(ot_dtype dt, void *dx, const void *dy, size_t n, float p, uint64_t seed,
                         uint64_t offset) {
  const ot_dropout_map mp = {1, 1, n, NULL, 0, 0};
  return dropout_run("ot_dropout_bwd", dt, dx, dy, &mp, p, seed, offset);
}

// x -> y: [n0, n1, n2] (dt), counters by the map; y may alias x.
ot_status ot_dropout_fwd_map(ot_dtype dt, void *y, const void *x, const ot_dropout_map *mp,
                             float p, uint64_t seed, uint64_t offset) {
  return dropout_run("ot_dropout_fwd_map", dt, y, x, mp, p, seed, offset);
}

// dy -> dx: [n0, n1, n2] (dt) with the forward's mask; dx may alias dy.
ot_status ot_dropout_bwd_map(ot_dtype dt, void *dx, const void *dy, const ot_dropout_map *mp,
                             float p, uint64_t seed, uint64_t offset) {
  return dropout_run("ot_dropout_bwd_map", dt, dx, dy, mp, p, seed, offset);
}
