// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw,
// SC 2011) and the dropout keep rule built on it. Contracts in ot/core.h.
#include "internal.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u  // golden ratio
#define PHILOX_W1 0xBB67AE85u  // sqrt(3) - 1

// 128-bit counter ctr[4] under key[2] -> out[4] (10 rounds; the key is bumped
// by the Weyl constants between rounds).
void ot_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) { k0 += PHILOX_W0; k1 += PHILOX_W1; }
    const uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// Word (c & 3) of the Philox block c >> 2 of stream seed.
uint32_t ot_rand_u32(uint64_t seed, uint64_t c) {
  const uint64_t blk = c >> 2;
  const uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 0u, 0u};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  ot_philox4x32_10(out, ctr, key);
  return out[c & 3];
}

// floor(p * 2^32) for p in [0, 1) (0 for p <= 0 or NaN; callers validate p).
uint32_t ot_dropout_threshold(float p) {
  if (!(p > 0.0f)) return 0u;
  const double t = (double)p * 4294967296.0;
  return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

// 1 / (1 - p) rounded to f32 (1 for p == 0).
float ot_dropout_scale(float p) { return (float)(1.0 / (1.0 - (double)p)); }

bool ot_dropout_keep(uint64_t seed, uint64_t c, float p) {
  return ot_rand_u32(seed, c) >= ot_dropout_threshold(p);
}
