// Elementwise dropout kernel (forward and backward are the same map: the
// backward applies the forward's mask, regenerated from (seed, offset), to dy),
// one source for every ISA (see simd.h). Fixed chunks of CH elements: the mask
// of a chunk is generated into a stack buffer, then applied with vector
// selects (a dropped element is 0 even when x is NaN or inf).
#include "core/simd.h"
#include "dropout_k.h"
#include <omp.h>

#define CH 1024
#define DROP_PAR_MIN 65536  // elements below which one thread is faster

// Work items: chunks of CH elements of one (a, b) row of n2 elements (a row's
// counters are consecutive); one division per chunk, none per element.
void OT_K(k_dropout)(int bf16, void *y, const void *x, const ot__dmap *mp, uint64_t seed,
                     uint64_t off, uint32_t thr, float s) {
  const size_t n1 = mp->n1, n2 = mp->n2, n = mp->n0 * n1 * n2;
  const long cpr = (long)((n2 + CH - 1) / CH), nch = (long)(mp->n0 * n1) * cpr;
#pragma omp parallel for schedule(static) if (n >= DROP_PAR_MIN)
  for (long it = 0; it < nch; it++) {
    float m[CH];
    const size_t row = (size_t)(it / cpr), a = row / n1, b = row - a * n1;
    const size_t c0 = (size_t)(it - (long)row * cpr) * CH, ne = n2 - c0 < CH ? n2 - c0 : CH;
    const size_t e0 = row * n2 + c0;
    const uint64_t ra = mp->rows ? (uint64_t)mp->rows[a] : (uint64_t)a;
    ot__drop_mask(m, (int)ne, seed, off + ra * mp->s0 + (uint64_t)b * mp->s1 + c0, thr, s);
    const vf zero = vzero();
    size_t e = 0;
    for (; e + VL <= ne; e += VL) {
      const vf mv = vload(m + e);
      vst(y, e0 + e, vselect_gt(mv, zero, vmul(vld(x, e0 + e, bf16), mv), zero), bf16);
    }
    for (; e < ne; e++) {
      const float xv = sld(x, e0 + e, bf16), r = m[e] > 0.0f ? xv * m[e] : 0.0f;
      sst(y, e0 + e, r, bf16);
    }
  }
}
