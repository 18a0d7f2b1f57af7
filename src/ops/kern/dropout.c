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

void OT_K(k_dropout)(int bf16, void *y, const void *x, size_t n, uint64_t seed, uint64_t off,
                     uint32_t thr, float s) {
  const long nch = (long)((n + CH - 1) / CH);
#pragma omp parallel for schedule(static) if (n >= DROP_PAR_MIN)
  for (long ch = 0; ch < nch; ch++) {
    float m[CH];
    const size_t e0 = (size_t)ch * CH, ne = n - e0 < CH ? n - e0 : CH;
    ot__drop_mask(m, (int)ne, seed, off + e0, thr, s);
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
