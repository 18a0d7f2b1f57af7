// Dropout for the kernels (kern/dropout.c, kern/flash.c, kern/flash_bwd.c)
// and the prototype of the elementwise dropout kernel, one variant per ISA.
// The generators here are inline copies of ot_philox4x32_10 / ot_rand_u32
// (src/core/rng.c; kernels call no core function per element), one block at
// a time and lane-wise over OT__PHX_N blocks: the same Philox4x32-10 and the
// same keep rule as documented in ot/core.h; tests check them against each
// other and the published test vectors, and the masks against the reference.
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

// Philox blocks blk0 .. blk0 + OT__PHX_N - 1 of stream seed, lane-wise
// (structure of arrays, plain C that the compiler vectorizes for the
// kernel's ISA: 32 x 32 -> 64-bit products of whole vectors of counters):
// w[k * OT__PHX_N + l] = word k of block blk0 + l.
#define OT__PHX_N 16
static inline void ot__philox_lanes(uint32_t *w, uint64_t seed, uint64_t blk0) {
  // 32-bit words held in 64-bit lanes: the products are then plain 64-bit
  // multiplies of vectors (vpmuludq / vpmullq), which GCC vectorizes at -O2
  const uint64_t lo32 = 0xffffffffu;
  uint64_t c0[OT__PHX_N], c1[OT__PHX_N], c2[OT__PHX_N], c3[OT__PHX_N];
  for (int l = 0; l < OT__PHX_N; l++) {
    const uint64_t b = blk0 + (uint64_t)l;
    c0[l] = b & lo32; c1[l] = b >> 32; c2[l] = 0u; c3[l] = 0u;
  }
  uint64_t k0 = seed & lo32, k1 = seed >> 32;
  for (int r = 0; r < 10; r++) {
    if (r > 0) { k0 = (k0 + 0x9E3779B9u) & lo32; k1 = (k1 + 0xBB67AE85u) & lo32; }
    for (int l = 0; l < OT__PHX_N; l++) {
      const uint64_t p0 = 0xD2511F53u * c0[l], p1 = 0xCD9E8D57u * c2[l];
      const uint64_t n0 = (p1 >> 32) ^ c1[l] ^ k0, n2 = (p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = p1 & lo32; c3[l] = p0 & lo32; c0[l] = n0; c2[l] = n2;
    }
  }
  for (int l = 0; l < OT__PHX_N; l++) {
    w[l] = (uint32_t)c0[l]; w[OT__PHX_N + l] = (uint32_t)c1[l];
    w[2 * OT__PHX_N + l] = (uint32_t)c2[l]; w[3 * OT__PHX_N + l] = (uint32_t)c3[l];
  }
}

// m[e] = (element c0 + e of stream seed kept) ? s : 0 for e in [0, n) (the
// keep rule of ot/core.h with threshold thr). Counters c0 .. c0 + n - 1 lie in
// the blocks c0 >> 2 ..: a partial first block and the tail go through the
// single-block generator, whole runs of OT__PHX_N blocks through the lane-wise
// one, their words written back in counter order (4 interleaved stores per
// block, which the compiler turns into vector shuffles).
static inline void ot__drop_mask(float *m, int n, uint64_t seed, uint64_t c0, uint32_t thr,
                                 float s) {
  uint32_t w[4 * OT__PHX_N];
  uint64_t blk = c0 >> 2;
  int e = 0, k = (int)(c0 & 3);
  if (k && n > 0) {  // the rest of the first block
    ot__philox_blk(w, seed, blk++);
    for (; k < 4 && e < n; k++, e++) m[e] = w[k] >= thr ? s : 0.0f;
  }
  for (; n - e >= 4 * OT__PHX_N; e += 4 * OT__PHX_N, blk += OT__PHX_N) {  // whole runs
    ot__philox_lanes(w, seed, blk);
    float *o = m + e;
    for (int l = 0; l < OT__PHX_N; l++) {
      o[4 * l] = w[l] >= thr ? s : 0.0f;
      o[4 * l + 1] = w[OT__PHX_N + l] >= thr ? s : 0.0f;
      o[4 * l + 2] = w[2 * OT__PHX_N + l] >= thr ? s : 0.0f;
      o[4 * l + 3] = w[3 * OT__PHX_N + l] >= thr ? s : 0.0f;
    }
  }
  while (e < n) {
    ot__philox_blk(w, seed, blk++);
    for (k = 0; k < 4 && e < n; k++, e++) m[e] = w[k] >= thr ? s : 0.0f;
  }
}

// The counter map of a [n0, n1, n2] tensor (ot_dropout_map of ot/ops.h): element
// (a, b, c) uses counter off + r(a) * s0 + b * s1 + c, r(a) = rows ? rows[a] : a.
typedef struct {
  size_t n0, n1, n2;
  const int64_t *rows;
  uint64_t s0, s1;
} ot__dmap;

// y = kept ? x * s : 0 elementwise over the map's tensor (f32 or bf16 storage, f32
// product); y may alias x. Elementwise: independent of the thread count.
OT_KDECL(void, k_dropout, (int bf16, void *y, const void *x, const ot__dmap *mp, uint64_t seed,
                           uint64_t off, uint32_t thr, float s));

#endif
