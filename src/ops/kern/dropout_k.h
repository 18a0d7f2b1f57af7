// Dropout for the kernels (kern/dropout.c, kern/flash.c, kern/flash_bwd.c)
// and the prototype of the elementwise dropout kernel, one variant per ISA.
// The generator here is an inline copy of ot_philox4x32_10 / ot_rand_u32
// (src/core/rng.c; kernels call no core function per element): the same
// Philox4x32-10 and the same keep rule as documented in ot/core.h; tests
// check both against each other and the published test vectors.
#ifndef OT_KERN_DROPOUT_K_H
#define OT_KERN_DROPOUT_K_H
#include "internal.h"

// Philox4x32-10 block `blk` of stream `seed` -> out[4].
static inline void ot__philox_blk(uint32_t out[4], uint64_t seed, uint64_t blk) {
  uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = 0u, c3 = 0u;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// m[e] = (element c0 + e of stream seed kept) ? s : 0 for e in [0, n) (the
// keep rule of ot/core.h with threshold thr); one Philox block per 4 counters.
static inline void ot__drop_mask(float *m, int n, uint64_t seed, uint64_t c0, uint32_t thr,
                                 float s) {
  uint32_t w[4];
  uint64_t blk = c0 >> 2;
  int e = 0, k = (int)(c0 & 3);
  while (e < n) {
    ot__philox_blk(w, seed, blk++);
    for (; k < 4 && e < n; k++, e++) m[e] = w[k] >= thr ? s : 0.0f;
    k = 0;
  }
}

// y[e] = kept(off + e) ? x[e] * s : 0 for e in [0, n) (f32 or bf16 storage,
// f32 product); y may alias x. Elementwise: independent of the thread count.
OT_KDECL(void, k_dropout, (int bf16, void *y, const void *x, size_t n, uint64_t seed,
                           uint64_t off, uint32_t thr, float s));

#endif
