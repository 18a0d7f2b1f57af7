// RoPE kernels, one source for every ISA (see simd.h). Rows (b, h, t) are
// independent: OpenMP static over rows, cos/sin read from the table (no
// sin/cos here). sgn = +1 rotates by the angle (forward), -1 by its inverse
// (backward). NEOX pairs (i, i + rot/2) vectorize directly; GPTJ pairs
// (2i, 2i+1) use a pair swap within the vector (the only shuffle needed).
#include "core/simd.h"
#include "rope_k.h"

#define ROPE_PAR_MIN 32768  // elements rotated below which one thread is faster
#define INL static inline __attribute__((always_inline))

#if defined(OT_ARCH_AVX512)
// [x0 x1 x2 x3 ...] -> [x1 x0 x3 x2 ...]
INL vf swap_pairs(vf x) { return _mm512_permute_ps(x, 0xB1); }
// p[0..7] -> [p0 p0 p1 p1 ... p7 p7]
INL vf dup_pairs(const float *p) {
  __m512 a = _mm512_castps256_ps512(_mm256_loadu_ps(p));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), a);
}
INL vf alt_sign(float s) {
  return _mm512_setr_ps(-s, s, -s, s, -s, s, -s, s, -s, s, -s, s, -s, s, -s, s);
}
#elif defined(OT_ARCH_AVX2)
INL vf swap_pairs(vf x) { return _mm256_permute_ps(x, 0xB1); }
INL vf dup_pairs(const float *p) {  // p[0..3] -> [p0 p0 p1 p1 p2 p2 p3 p3]
  // 128-bit broadcast (a load) + in-lane permute: no lane-crossing shuffle
  __m256 a = _mm256_broadcast_ps((const __m128 *)p);
  return _mm256_permutevar_ps(a, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}
INL vf alt_sign(float s) { return _mm256_setr_ps(-s, s, -s, s, -s, s, -s, s); }
#endif

// One NEOX row: x[off + i], x[off + half + i] rotated by (c[i], sgn * s[i]).
INL void row_neox(void *x, size_t off, const float *c, const float *s, int half, float sgn,
                  const int bf16) {
  int i = 0;
#if VL > 1
  const vf vs = vset1(sgn);
  for (; i + VL <= half; i += VL) {
    vf x1 = vld(x, off + i, bf16), x2 = vld(x, off + half + i, bf16);
    vf cc = vload(c + i), ss = vmul(vload(s + i), vs);
    vst(x, off + i, vfnmadd(x2, ss, vmul(x1, cc)), bf16);
    vst(x, off + half + i, vfmadd(x1, ss, vmul(x2, cc)), bf16);
  }
#endif
  for (; i < half; i++) {
    float x1 = sld(x, off + i, bf16), x2 = sld(x, off + half + i, bf16);
    float cc = c[i], ss = sgn * s[i];
    sst(x, off + i, x1 * cc - x2 * ss, bf16);
    sst(x, off + half + i, x2 * cc + x1 * ss, bf16);
  }
}

// One GPTJ row: pairs x[off + 2i], x[off + 2i + 1] rotated by (c[i], sgn * s[i]).
INL void row_gptj(void *x, size_t off, const float *c, const float *s, int half, float sgn,
                  const int bf16) {
  int i = 0;
#if VL > 1
  const vf alt = alt_sign(sgn);  // out = x * c + swap(x) * [-s, s, -s, s, ...]
  for (; i + VL / 2 <= half; i += VL / 2) {
    vf v = vld(x, off + 2 * (size_t)i, bf16);
    vf cc = dup_pairs(c + i), ss = vmul(dup_pairs(s + i), alt);
    vst(x, off + 2 * (size_t)i, vfmadd(swap_pairs(v), ss, vmul(v, cc)), bf16);
  }
#endif
  for (; i < half; i++) {
    size_t j = off + 2 * (size_t)i;
    float x1 = sld(x, j, bf16), x2 = sld(x, j + 1, bf16);
    float cc = c[i], ss = sgn * s[i];
    sst(x, j, x1 * cc - x2 * ss, bf16);
    sst(x, j + 1, x2 * cc + x1 * ss, bf16);
  }
}

INL void rope_rows(void *x, const float *tab, long rows, int T, int D, int rot, int pos0,
                   const int gptj, float sgn, const int bf16) {
  const int half = rot / 2;
#pragma omp parallel for schedule(static) if (rows * (long)rot >= ROPE_PAR_MIN)
  for (long r = 0; r < rows; r++) {
    const float *c = tab + (size_t)(pos0 + (int)(r % T)) * rot;
    if (gptj) row_gptj(x, (size_t)r * D, c, c + half, half, sgn, bf16);
    else row_neox(x, (size_t)r * D, c, c + half, half, sgn, bf16);
  }
}

// x: [rows = B*H*T, D] (f32 or bf16), rotated in place on dims [0, rot);
// tab: [>= pos0 + T, rot] (cos then sin per position); row r has position pos0 + r % T.
void OT_K(k_rope)(void *x, const float *tab, long rows, int T, int D, int rot, int pos0, int gptj,
                  float sgn, int bf16) {
  if (gptj) OT_SK_SWITCH(bf16, K, rope_rows(x, tab, rows, T, D, rot, pos0, 1, sgn, K));
  else OT_SK_SWITCH(bf16, K, rope_rows(x, tab, rows, T, D, rot, pos0, 0, sgn, K));
}
