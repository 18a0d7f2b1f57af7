// One SIMD vocabulary for every kernel source under src/core/kern/ and
// src/ops/kern/. Each such source is compiled three times (see CMakeLists.txt) with exactly one of
// OT_ARCH_AVX512 / OT_ARCH_AVX2 / OT_ARCH_PORTABLE defined; kernels are written
// once against `vf` (VL floats) and these inline functions, and get their
// symbol names from OT_K(). Only this file knows the intrinsics (BLIS style).
//
// Contract of the math functions: vexp has relative error <= 2 ulp-ish
// (< 3e-7) on [-87, 88], returns 0 below and +inf above; NaN propagates.
#ifndef OT_SIMD_H
#define OT_SIMD_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include "internal.h"

#if defined(OT_ARCH_AVX512)
#  include <immintrin.h>
#  define OT_K(name) name##_avx512
#  define VL 16
typedef __m512 vf;
typedef __m512i vi;
static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline vf vload_part(const float *p, int n) { return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p); }
static inline void vstore_part(float *p, vf x, int n) { _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), x); }
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vfmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   // a*b+c
static inline vf vfnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } // c-a*b
static inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline float vsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float vhmax(vf a) { return _mm512_reduce_max_ps(a); }
static inline vi vcvt_round(vf a) { return _mm512_cvtps_epi32(a); }        // nearest-even
static inline vf vcvt_i2f(vi a) { return _mm512_cvtepi32_ps(a); }
static inline vf vpow2i(vi n) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23)); }
static inline vf vshl23(vf r) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(r), 23)); }  // bits << 23
static inline vf vselect_gt(vf a, vf b, vf x, vf y) { // a > b ? x : y
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x); }
static inline vf vselect_nan(vf a, vf x) { // isnan(a) ? a : x
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), x, a); }
// bf16 <-> f32 (round to nearest even; NaN -> quiet NaN)
static inline vf vload_bf16(const uint16_t *p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16)); }
static inline vf vload_bf16_part(const uint16_t *p, int n) {
  __m256i h = _mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
// int8 -> f32 (exact): VL values, or the first n (rest 0)
static inline vf vload_i8(const int8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))); }
static inline vf vload_i8_part(const int8_t *p, int n) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), p))); }
// f32 -> int8: the VL values rounded to nearest even (the caller keeps |x| <= 127.5)
static inline void vstore_i8_round(int8_t *p, vf x) {
  _mm_storeu_si128((__m128i *)p, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(x))); }
// f32 -> bf16 bits in the low half of each 32-bit lane: round to nearest even
// (add 0x7fff + lsb, keep the high half); any NaN -> the quiet NaN 0x7fc0.
static inline __m512i ot__bf16_bits_512(vf x) {
  __m512i u = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, lsb), _mm512_set1_epi32(0x7fff)), 16);
  return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, _mm512_set1_epi32(0x7fc0)); }
static inline void vstore_bf16(uint16_t *p, vf x) {
  _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(ot__bf16_bits_512(x))); }
static inline void vstore_bf16_part(uint16_t *p, vf x, int n) {
  _mm256_mask_storeu_epi16(p, (__mmask16)((1u << n) - 1), _mm512_cvtepi32_epi16(ot__bf16_bits_512(x))); }
// 2 VL values: a to p[0, VL), b to p[VL, 2 VL); one pack for both (the pack
// interleaves 128-bit lanes: a's quadwords land at 0,2,4,6, b's at 1,3,5,7)
static inline void vstore2_bf16(uint16_t *p, vf a, vf b) {
  __m512i k = _mm512_packus_epi32(ot__bf16_bits_512(a), ot__bf16_bits_512(b));
  _mm512_storeu_si512(p, _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), k)); }
// Exchange order (see vldx2 below): unpacking with zero converts bf16 -> f32
// and leaves a with the low, b with the high 4 values of each 128-bit lane;
// the in-lane pack of vstx2 puts them back.
static inline void vldx2_bf16(const uint16_t *p, vf *a, vf *b) {
  __m512i v = _mm512_loadu_si512(p), z = _mm512_setzero_si512();
  *a = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, v));
  *b = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, v)); }
static inline void vstx2_bf16(uint16_t *p, vf a, vf b) {
  _mm512_storeu_si512(p, _mm512_packus_epi32(ot__bf16_bits_512(a), ot__bf16_bits_512(b))); }
static inline __m512i ot__bf16_bits_rne_512(vf x) {  // no NaN check: see vstx2_bfsrc
  __m512i u = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, lsb), _mm512_set1_epi32(0x7fff)), 16); }
static inline void vstx2_bf16_bfsrc(uint16_t *p, vf a, vf b) {
  _mm512_storeu_si512(p, _mm512_packus_epi32(ot__bf16_bits_rne_512(a), ot__bf16_bits_rne_512(b))); }
// f16 <-> f32 by F16C / AVX-512F (vcvtph2ps exact; vcvtps2ph round to nearest
// even, overflow to inf, subnormals kept, NaN -> quiet NaN with its payload's top bits)
#define OT__F16_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
static inline vf vload_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline vf vload_f16_part(const uint16_t *p, int n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p)); }
static inline void vstore_f16(uint16_t *p, vf x) { _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(x, OT__F16_RNE)); }
static inline void vstore_f16_part(uint16_t *p, vf x, int n) {
  _mm256_mask_storeu_epi16(p, (__mmask16)((1u << n) - 1), _mm512_cvtps_ph(x, OT__F16_RNE)); }
// r[0..VL) <- the transpose of the VL x VL block whose row i is r[i] (lane j of
// the new r[i] is lane i of the old r[j]).
static inline void vtranspose(vf r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // u[4q + c] holds, per 128-bit lane L, rows 4q..4q+3 of column 4L + c
  for (int c = 0; c < 4; c++) {
    const __m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 e = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), f = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(a, e, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(a, e, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(b, f, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(b, f, 0xDD);
  }
}

#elif defined(OT_ARCH_AVX2)
#  include <immintrin.h>
#  define OT_K(name) name##_avx2
#  define VL 8
typedef __m256 vf;
typedef __m256i vi;
static inline __m256i ot__mask8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline vf vload_part(const float *p, int n) { return _mm256_maskload_ps(p, ot__mask8(n)); }
static inline void vstore_part(float *p, vf x, int n) { _mm256_maskstore_ps(p, ot__mask8(n), x); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vfmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vfnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline float vsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s); }
static inline float vhmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s); }
static inline vi vcvt_round(vf a) { return _mm256_cvtps_epi32(a); }
static inline vf vcvt_i2f(vi a) { return _mm256_cvtepi32_ps(a); }
static inline vf vpow2i(vi n) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23)); }
static inline vf vshl23(vf r) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(r), 23)); }  // bits << 23
static inline vf vselect_gt(vf a, vf b, vf x, vf y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
static inline vf vselect_nan(vf a, vf x) { return _mm256_blendv_ps(x, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }
static inline vf vload_bf16(const uint16_t *p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16)); }
static inline vf vload_bf16_part(const uint16_t *p, int n) {
  uint16_t t[8] = {0}; memcpy(t, p, (size_t)n * 2); return vload_bf16(t); }
// int8 -> f32 (exact): VL values, or the first n (rest 0)
static inline vf vload_i8(const int8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))); }
static inline vf vload_i8_part(const int8_t *p, int n) {
  int8_t t[8] = {0}; memcpy(t, p, (size_t)n); return vload_i8(t); }
// f32 -> int8: the VL values rounded to nearest even (the caller keeps |x| <= 127.5)
static inline void vstore_i8_round(int8_t *p, vf x) {
  const __m256i i = _mm256_cvtps_epi32(x);
  const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64((__m128i *)p, _mm_packs_epi16(h, h)); }
// f32 -> bf16 bits in the low half of each 32-bit lane: round to nearest even
// (add 0x7fff + lsb, keep the high half); any NaN -> the quiet NaN 0x7fc0
// (one compare + blend: the rounding add could carry a NaN into inf or -0).
static inline __m256i ot__bf16_bits_256(vf x) {
  __m256i u = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, lsb), _mm256_set1_epi32(0x7fff)), 16);
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc0)),
                                              _mm256_cmp_ps(x, x, _CMP_UNORD_Q))); }
static inline __m128i ot__f32_to_bf16_256(vf x) {  // 8 x u32 (each < 65536) -> 8 x u16
  __m256i r = ot__bf16_bits_256(x);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)); }
static inline void vstore_bf16(uint16_t *p, vf x) { _mm_storeu_si128((__m128i *)p, ot__f32_to_bf16_256(x)); }
static inline void vstore_bf16_part(uint16_t *p, vf x, int n) {
  uint16_t t[8]; _mm_storeu_si128((__m128i *)t, ot__f32_to_bf16_256(x)); memcpy(p, t, (size_t)n * 2); }
// 2 VL values: a to p[0, VL), b to p[VL, 2 VL); one pack for both (the pack
// interleaves 128-bit lanes: a's quadwords land at 0,2, b's at 1,3)
static inline void vstore2_bf16(uint16_t *p, vf a, vf b) {
  __m256i k = _mm256_packus_epi32(ot__bf16_bits_256(a), ot__bf16_bits_256(b));
  _mm256_storeu_si256((__m256i *)p, _mm256_permute4x64_epi64(k, 0xd8)); }
// Exchange order (see vldx2 below): unpacking with zero converts bf16 -> f32
// and leaves a with the low, b with the high 4 values of each 128-bit lane;
// the in-lane pack of vstx2 puts them back.
static inline void vldx2_bf16(const uint16_t *p, vf *a, vf *b) {
  __m256i v = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
  *a = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
  *b = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v)); }
static inline void vstx2_bf16(uint16_t *p, vf a, vf b) {
  _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(ot__bf16_bits_256(a), ot__bf16_bits_256(b))); }
static inline __m256i ot__bf16_bits_rne_256(vf x) {  // no NaN check: see vstx2_bfsrc
  __m256i u = _mm256_castps_si256(x);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, lsb), _mm256_set1_epi32(0x7fff)), 16); }
static inline void vstx2_bf16_bfsrc(uint16_t *p, vf a, vf b) {
  _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(ot__bf16_bits_rne_256(a), ot__bf16_bits_rne_256(b))); }
// f16 <-> f32 by F16C (vcvtph2ps exact; vcvtps2ph round to nearest even,
// overflow to inf, subnormals kept, NaN -> quiet NaN with its payload's top bits)
#define OT__F16_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
static inline vf vload_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline vf vload_f16_part(const uint16_t *p, int n) {
  uint16_t t[8] = {0}; memcpy(t, p, (size_t)n * 2); return vload_f16(t); }
static inline void vstore_f16(uint16_t *p, vf x) { _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(x, OT__F16_RNE)); }
static inline void vstore_f16_part(uint16_t *p, vf x, int n) {
  uint16_t t[8]; _mm_storeu_si128((__m128i *)t, _mm256_cvtps_ph(x, OT__F16_RNE)); memcpy(p, t, (size_t)n * 2); }
// r[0..VL) <- the transpose of the VL x VL block whose row i is r[i].
static inline void vtranspose(vf r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}
// Weight-only GEMV helpers (this ISA only; OT_SIMD_QDOT marks them).
// vqdot_i8: acc (VL int32 lanes) + the pair sums of VQ8 = 32 int8 weights at p
// times int16 activations, xe for the even weights (0, 2, .., 30) and xo for
// the odd ones: the weights are widened in-lane by shifts (a cross-lane
// vpmovsxbw costs twice the time on Zen 3); exact while each lane's total fits
// int32 (|w| <= 127, |x| <= 32767: at least 129 calls).
#define OT_SIMD_QDOT 1
#define VQ8 32
#define VQB 16
static inline vi vzero_i32(void) { return _mm256_setzero_si256(); }
static inline vi vadd_i32(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vload_i16x(const int16_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
// The 32 f32 x[0, 32) times s rounded to nearest-even int16 (the caller keeps
// every |x s| < 32767.5), split as vqdot_i8 takes them: xe[i] = x[2 i] s,
// xo[i] = x[2 i + 1] s, i < 16.
static inline void vstore_i16_eo(int16_t *xe, int16_t *xo, const float *x, vf s) {
  const __m256 c0 = _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), s)));
  const __m256 c1 = _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), s)));
  const __m256 c2 = _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), s)));
  const __m256 c3 = _mm256_castsi256_ps(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), s)));
  // per 128-bit lane: evens (odds) of c0, c1 then of c2, c3; the pack and the
  // permutation then restore the order x[0], x[2], .., x[30]
  const __m256i e0 = _mm256_castps_si256(_mm256_shuffle_ps(c0, c1, 0x88));
  const __m256i e1 = _mm256_castps_si256(_mm256_shuffle_ps(c2, c3, 0x88));
  const __m256i o0 = _mm256_castps_si256(_mm256_shuffle_ps(c0, c1, 0xdd));
  const __m256i o1 = _mm256_castps_si256(_mm256_shuffle_ps(c2, c3, 0xdd));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256((__m256i *)xe, _mm256_permutevar8x32_epi32(_mm256_packs_epi32(e0, e1), perm));
  _mm256_storeu_si256((__m256i *)xo, _mm256_permutevar8x32_epi32(_mm256_packs_epi32(o0, o1), perm)); }
static inline vi vqdot_i8(vi acc, const int8_t *p, vi xe, vi xo) {
  const __m256i v = _mm256_loadu_si256((const __m256i *)p);
  const __m256i od = _mm256_srai_epi16(v, 8), ev = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ev, xe), _mm256_madd_epi16(od, xo))); }
// VQB = 16 bf16 at p as two f32 vectors without widening: *ev = p[0, 2, .., 14] (low
// halves shifted up), *od = p[1, 3, .., 15] (high halves, low bits cleared).
static inline void vload_bf16_eo(const uint16_t *p, vf *ev, vf *od) {
  __m256i v = _mm256_loadu_si256((const __m256i *)p);
  *ev = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  *od = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u))); }

#elif defined(OT_ARCH_PORTABLE)
#  define OT_K(name) name##_portable
#  define VL 1
typedef float vf;
typedef int32_t vi;
static inline vf vzero(void) { return 0.0f; }
static inline vf vset1(float x) { return x; }
static inline vf vload(const float *p) { return *p; }
static inline void vstore(float *p, vf x) { *p = x; }
static inline vf vload_part(const float *p, int n) { return n > 0 ? *p : 0.0f; }
static inline void vstore_part(float *p, vf x, int n) { if (n > 0) *p = x; }
static inline vf vadd(vf a, vf b) { return a + b; }
static inline vf vsub(vf a, vf b) { return a - b; }
static inline vf vmul(vf a, vf b) { return a * b; }
static inline vf vdiv(vf a, vf b) { return a / b; }
static inline vf vfmadd(vf a, vf b, vf c) { return fmaf(a, b, c); }
static inline vf vfnmadd(vf a, vf b, vf c) { return fmaf(-a, b, c); }
static inline vf vmax(vf a, vf b) { return a > b ? a : b; }
static inline vf vmin(vf a, vf b) { return a < b ? a : b; }
static inline vf vsqrt(vf a) { return sqrtf(a); }
static inline float vsum(vf a) { return a; }
static inline float vhmax(vf a) { return a; }
// NaN or out of range -> INT32_MIN, as cvtps2dq does (no undefined float -> int cast)
static inline vi vcvt_round(vf a) { return fabsf(a) < 2147483520.0f ? (vi)nearbyintf(a) : INT32_MIN; }
static inline vf vcvt_i2f(vi a) { return (float)a; }
static inline vf vpow2i(vi n) { uint32_t u = ((uint32_t)n + 127u) << 23; float f; memcpy(&f, &u, 4); return f; }
static inline vf vshl23(vf r) { uint32_t u; memcpy(&u, &r, 4); u <<= 23; memcpy(&r, &u, 4); return r; }  // bits << 23
static inline vf vselect_gt(vf a, vf b, vf x, vf y) { return a > b ? x : y; }
static inline vf vselect_nan(vf a, vf x) { return a != a ? a : x; }
static inline vf vload_bf16(const uint16_t *p) { return ot_bf16_to_f32(*p); }
static inline vf vload_bf16_part(const uint16_t *p, int n) { return n > 0 ? ot_bf16_to_f32(*p) : 0.0f; }
static inline vf vload_i8(const int8_t *p) { return (float)*p; }
static inline vf vload_i8_part(const int8_t *p, int n) { return n > 0 ? (float)*p : 0.0f; }
static inline void vstore_i8_round(int8_t *p, vf x) { *p = (int8_t)nearbyintf(x); }   // |x| <= 127.5
static inline void vstore_bf16(uint16_t *p, vf x) { *p = ot_f32_to_bf16(x); }
static inline void vstore_bf16_part(uint16_t *p, vf x, int n) { if (n > 0) *p = ot_f32_to_bf16(x); }
static inline void vstore2_bf16(uint16_t *p, vf a, vf b) { p[0] = ot_f32_to_bf16(a); p[1] = ot_f32_to_bf16(b); }
static inline void vldx2_bf16(const uint16_t *p, vf *a, vf *b) { *a = ot_bf16_to_f32(p[0]); *b = ot_bf16_to_f32(p[1]); }
static inline void vstx2_bf16(uint16_t *p, vf a, vf b) { vstore2_bf16(p, a, b); }
static inline void vstx2_bf16_bfsrc(uint16_t *p, vf a, vf b) { vstore2_bf16(p, a, b); }
// f16 <-> f32 by the scalar conversions of core (round to nearest even; inf,
// NaN and subnormals as IEEE binary16)
static inline vf vload_f16(const uint16_t *p) { return ot_f16_to_f32(*p); }
static inline vf vload_f16_part(const uint16_t *p, int n) { return n > 0 ? ot_f16_to_f32(*p) : 0.0f; }
static inline void vstore_f16(uint16_t *p, vf x) { *p = ot_f32_to_f16(x); }
static inline void vstore_f16_part(uint16_t *p, vf x, int n) { if (n > 0) *p = ot_f32_to_f16(x); }
// r[0..VL) <- the transpose of the VL x VL block whose row i is r[i] (VL = 1).
static inline void vtranspose(vf r[1]) { (void)r; }
#else
#  error "compile kernel sources with one of OT_ARCH_AVX512, OT_ARCH_AVX2, OT_ARCH_PORTABLE"
#endif

// ---- int8 dot products (the int8 GEMM, src/ops/kern/qgemm.c) -------------
// vq: VQ int8 values (x86: 32 in a 256-bit register, under AVX-512 too, so
// that a step never spans two weight groups of 32; portable: 4 packed in an
// int32), or as an accumulator VQ / 4 int32 lanes; vqf: VQ / 4 f32 lanes.
// Activations are stored as int8 plus VQ_XOFF (as unsigned bytes when 128).
// vq_dot(acc, wa, w, x): lane i of acc += sum_{j<4} w[4 i + j] x[4 i + j] with
// x the stored activations, wa = vq_wabs(w) (hoisted: one per weight vector,
// shared by the activation rows). The true sum is that minus VQ_XOFF times the
// sum of the weights: vq_wsum(cs, w) accumulates those sums, and an
// accumulator started at vq_unoff(cs) (cs: the sums over the columns it will
// take) ends exact (VQ_XOFF 0: both no-ops). Exact while the lanes fit int32.
//  - AVX2 (and AVX-512 without VNNI: kern/qgemm.c runs the AVX2 variant there):
//    VQ_XOFF 0, no activation is -128; vpmaddubsw multiplies |w| (unsigned)
//    by x with w's sign (vpsignb), each pair sum at most 2 * 127 * 127 < 32767
//    (unsigned activations with an offset would saturate: 2 * 255 * 127 >
//    32767), then vpmaddwd with ones widens the pairs to int32.
//  - AVX-512 with VNNI (where the including source enables it): VQ_XOFF 128,
//    vpdpbusd sums the four u8 x s8 products straight into int32, one
//    instruction and no saturation.
#if defined(OT_ARCH_AVX2) || defined(OT_ARCH_AVX512)
#define VQ 32
typedef __m256i vq;
typedef __m256 vqf;
static inline vq vq_zero(void) { return _mm256_setzero_si256(); }
static inline vq vq_load(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
#if defined(OT_ARCH_AVX512) && defined(__AVX512VNNI__)
#define VQ_XOFF 128
static inline vq vq_wabs(vq w) { return w; }
static inline vq vq_dot(vq acc, vq wa, vq w, vq x) { (void)wa; return _mm256_dpbusd_epi32(acc, x, w); }
static inline vq vq_wsum(vq cs, vq w) { return _mm256_dpbusd_epi32(cs, _mm256_set1_epi8(1), w); }
static inline vq vq_unoff(vq cs) { return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(cs, 7)); }
#else
#define VQ_XOFF 0
static inline vq vq_wabs(vq w) { return _mm256_abs_epi8(w); }
static inline vq vq_dot(vq acc, vq wa, vq w, vq x) {
  const __m256i p = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(x, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1))); }
static inline vq vq_wsum(vq cs, vq w) { (void)w; return cs; }
static inline vq vq_unoff(vq cs) { (void)cs; return _mm256_setzero_si256(); }
#endif
static inline vqf vqf_zero(void) { return _mm256_setzero_ps(); }
static inline vqf vqf_fma(vqf f, vq acc, float s) {   // f + float(acc) * s
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(s), f); }
static inline float vqf_sum(vqf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s); }
#else
#define VQ 4
#define VQ_XOFF 0
typedef int32_t vq;
typedef float vqf;
static inline vq vq_zero(void) { return 0; }
static inline vq vq_load(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline vq vq_wabs(vq w) { return w; }
static inline vq vq_dot(vq acc, vq wa, vq w, vq x) {
  (void)wa;
  int8_t a[4], b[4];
  memcpy(a, &w, 4);
  memcpy(b, &x, 4);
  return acc + a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]; }
static inline vq vq_wsum(vq cs, vq w) { (void)w; return cs; }
static inline vq vq_unoff(vq cs) { (void)cs; return 0; }
static inline vqf vqf_zero(void) { return 0.0f; }
static inline vqf vqf_fma(vqf f, vq acc, float s) { return fmaf((float)acc, s, f); }
static inline float vqf_sum(vqf a) { return a; }
#endif
// The first n (< VQ) int8 at p, the rest zero.
static inline vq vq_load_part(const int8_t *p, int n) {
  int8_t t[VQ] = {0}; memcpy(t, p, (size_t)n); return vq_load(t); }

// ---- dtype-generic access: the storage kind `sk` of an array -------------
// Kernels take the storage kind of their activation arrays as an int (named
// `bf16` in the older kernels): OT_SK_F32 (0), OT_SK_BF16 (1) or OT_SK_F16 (2),
// the values of ot_dtype's OT_F32 / OT_BF16 / OT_F16 (ot__sk() in internal.h).
// Any non-zero kind is 2 bytes an element. Math is f32 whatever the storage.
#define OT_SK_F32 0
#define OT_SK_BF16 1
#define OT_SK_F16 2
// OT_SK_SWITCH(sk, K, stmt): runs stmt with the constant K equal to sk, so a
// function inlined with K as its `const int` storage kind folds its branches.
#define OT_SK_SWITCH(sk, K, stmt) do {                           \
    if ((sk) == OT_SK_BF16) { enum { K = OT_SK_BF16 }; stmt; }   \
    else if ((sk) == OT_SK_F16) { enum { K = OT_SK_F16 }; stmt; } \
    else { enum { K = OT_SK_F32 }; stmt; } } while (0)
static inline vf vld(const void *p, size_t i, int sk) {
  return sk == OT_SK_BF16 ? vload_bf16((const uint16_t *)p + i)
       : sk == OT_SK_F16 ? vload_f16((const uint16_t *)p + i) : vload((const float *)p + i); }
static inline vf vld_part(const void *p, size_t i, int n, int sk) {
  return sk == OT_SK_BF16 ? vload_bf16_part((const uint16_t *)p + i, n)
       : sk == OT_SK_F16 ? vload_f16_part((const uint16_t *)p + i, n) : vload_part((const float *)p + i, n); }
static inline void vst(void *p, size_t i, vf x, int sk) {
  if (sk == OT_SK_BF16) vstore_bf16((uint16_t *)p + i, x);
  else if (sk == OT_SK_F16) vstore_f16((uint16_t *)p + i, x);
  else vstore((float *)p + i, x); }
// 2 VL values: a to [i, i + VL), b to [i + VL, i + 2 VL) (one pack for bf16).
static inline void vst2(void *p, size_t i, vf a, vf b, int sk) {
  if (sk == OT_SK_BF16) vstore2_bf16((uint16_t *)p + i, a, b);
  else if (sk == OT_SK_F16) { vstore_f16((uint16_t *)p + i, a); vstore_f16((uint16_t *)p + i + VL, b); }
  else { vstore((float *)p + i, a); vstore((float *)p + i + VL, b); } }
// Exchange order, for element-wise kernels: vldx2 loads the 2 VL values at
// [i, i + 2 VL) into a and b in an ISA-defined order, vstx2 stores a and b
// back in the same order, so vstx2(q, i, f(a), f(b)) after vldx2(p, i, &a, &b)
// gives q[j] = f(p[j]) for every j (the same order for every array of one
// storage kind). For bf16 it spares the shuffles of the in-order conversions.
// f32 and f16: plain order.
static inline void vldx2(const void *p, size_t i, vf *a, vf *b, int sk) {
  if (sk == OT_SK_BF16) vldx2_bf16((const uint16_t *)p + i, a, b);
  else if (sk == OT_SK_F16) { *a = vload_f16((const uint16_t *)p + i); *b = vload_f16((const uint16_t *)p + i + VL); }
  else { *a = vload((const float *)p + i); *b = vload((const float *)p + i + VL); } }
static inline void vstx2(void *p, size_t i, vf a, vf b, int sk) {
  if (sk == OT_SK_BF16) vstx2_bf16((uint16_t *)p + i, a, b);
  else vst2(p, i, a, b, sk); }
// vstx2 for values whose NaNs all derive from bf16 data: x86 arithmetic returns
// the default NaN or a quieted operand NaN, so a NaN computed from bf16-loaded
// values and non-NaN constants only has a zero low half, which the rounding
// add cannot carry into inf or -0; the NaN check (a compare and a blend, ~10%
// of an exp-bound kernel) is skipped. Not for values mixing in f32 data that
// may hold NaN (e.g. an f32 gamma): use vstx2. (f16: vcvtps2ph needs no check.)
static inline void vstx2_bfsrc(void *p, size_t i, vf a, vf b, int sk) {
  if (sk == OT_SK_BF16) vstx2_bf16_bfsrc((uint16_t *)p + i, a, b);
  else vst2(p, i, a, b, sk); }
static inline void vst_part(void *p, size_t i, vf x, int n, int sk) {
  if (sk == OT_SK_BF16) vstore_bf16_part((uint16_t *)p + i, x, n);
  else if (sk == OT_SK_F16) vstore_f16_part((uint16_t *)p + i, x, n);
  else vstore_part((float *)p + i, x, n); }
// Scalar element access in the same style (for tails and per-row values).
static inline float sld(const void *p, size_t i, int sk) {
  return sk == OT_SK_BF16 ? ot_bf16_to_f32(((const uint16_t *)p)[i])
       : sk == OT_SK_F16 ? ot_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i]; }
static inline void sst(void *p, size_t i, float x, int sk) {
  if (sk == OT_SK_BF16) ((uint16_t *)p)[i] = ot_f32_to_bf16(x);
  else if (sk == OT_SK_F16) ((uint16_t *)p)[i] = ot_f32_to_f16(x);
  else ((float *)p)[i] = x; }

// ---- exp: Cody-Waite range reduction + degree-6 polynomial ----------------
// exp(xc) / 2^nf for nf = round(xc * log2(e)): r = xc - nf ln2 in two parts,
// then e^r by a degree-6 polynomial. Shared by vexp and vexp_neg.
static inline vf ot__exp_reduced(vf xc, vf nf) {
  vf r = vfnmadd(nf, vset1(0.693359375f), xc);
  r = vfnmadd(nf, vset1(-2.12194440e-4f), r);
  vf p = vset1(1.9875691500e-4f);
  p = vfmadd(p, r, vset1(1.3981999507e-3f));
  p = vfmadd(p, r, vset1(8.3334519073e-3f));
  p = vfmadd(p, r, vset1(4.1665795894e-2f));
  p = vfmadd(p, r, vset1(1.6666665459e-1f));
  p = vfmadd(p, r, vset1(5.0000001201e-1f));
  return vfmadd(p, vmul(r, r), vadd(r, vset1(1.0f)));
}

static inline vf vexp(vf x) {
  const vf hi = vset1(88.3762626647949f), lo = vset1(-87.3365447504f);
  vf xc = vmin(vmax(x, lo), hi);
  vi n = vcvt_round(vmul(xc, vset1(1.44269504088896341f)));
  vf nf = vcvt_i2f(n);
  vf p = ot__exp_reduced(xc, nf);
  // 2^n for n in [-126, 128]: split so that n=128 (x near hi) does not overflow the exponent field
  vi n1 = vcvt_round(vmul(nf, vset1(0.5f)));   // roughly n/2
  vf n1f = vcvt_i2f(n1);
  vi n2 = vcvt_round(vsub(nf, n1f));
  vf y = vmul(vmul(p, vpow2i(n1)), vpow2i(n2));
  y = vselect_gt(x, hi, vset1(INFINITY), y);
  y = vselect_gt(lo, x, vzero(), y);
  return vselect_nan(x, y);
}

// exp(x) for x <= 0 (e.g. logit - running max; valid up to x <= 88, where
// 2^n still fits the exponent field, so rounding slightly above 0 is fine): the reduction and polynomial
// of vexp (same accuracy) with a single 2^n scale (n in [-126, 0]), no
// overflow branch, and NaN carried through the arithmetic instead of a final
// select: ~19 operations instead of ~33. x < -87.3 (and -inf) -> 0; NaN -> NaN.
static inline vf vexp_neg(vf x) {
  const vf lo = vset1(-87.3365447504f);
  // max returns its second operand when one is NaN: xc keeps a NaN (carried into
  // r below), xn replaces it by lo so that the float -> int conversion is defined
  vf xc = vmax(lo, x), xn = vmax(x, lo);
  vi n = vcvt_round(vmul(xn, vset1(1.44269504088896341f)));
  vf p = ot__exp_reduced(xc, vcvt_i2f(n));  // NaN in xc stays NaN in p
  vf y = vmul(p, vpow2i(n));
  return vselect_gt(lo, x, vzero(), y);  // false for NaN: y (NaN) kept
}

// 2^t for t in [-126, 126] -- the CALLER bounds t (no range handling here):
// t = n + f, |f| <= 1/2 exact, 2^f by a degree-5 Chebyshev fit (relative
// error 1.6e-7), times 2^n. Base 2 lets callers fold log2(e) into their own
// constants, so the reduction costs no multiply (used by GELU, SiLU, softmax).
// Also defined at the edges: t in [127.5, 128] gives +inf (n = 128), t in
// [-127, -126.5] gives 0 (n = -127), and NaN gives NaN (f NaN).
// The split: r = t + OT_EXP2_SHIFT (1.5 * 2^23 + 127) is an integer of
// [2^23, 2^24) whose low mantissa bits hold n + 127, n = t rounded to nearest
// even (as cvtps2dq), so 2^n = bits(r) << 23 (the higher bits shift out) and
// n = r - OT_EXP2_SHIFT exactly: one operation less than a float -> int ->
// float round trip and a bias add.
#define OT_EXP2_SHIFT 12583039.0f
static inline vf vexp2_core(vf t) {
  vf r = vadd(t, vset1(OT_EXP2_SHIFT));
  vf f = vsub(t, vsub(r, vset1(OT_EXP2_SHIFT)));
  vf p = vset1(1.3390863314270973e-3f);
  p = vfmadd(p, f, vset1(9.676031768321991e-3f));
  p = vfmadd(p, f, vset1(5.5503569543361664e-2f));
  p = vfmadd(p, f, vset1(2.402210682630539e-1f));
  p = vfmadd(p, f, vset1(6.931471824645996e-1f));
  p = vfmadd(p, f, vset1(1.0000001192092896f));
  return vmul(p, vshl23(r));
}

// 2^t as vexp2_core (same domain and edge cases), more accurate and exact at
// t = 0 (softmax: the row maximum contributes exactly 1, so a one-term row
// has log-sum-exp = max exactly): 2^f = 1 + f q(f), q a degree-5 minimax fit
// (relative error 2.6e-9, 8e-8 evaluated in f32). One more FMA than vexp2_core.
static inline vf vexp2_hi(vf t) {
  vf r = vadd(t, vset1(OT_EXP2_SHIFT));
  vf f = vsub(t, vsub(r, vset1(OT_EXP2_SHIFT)));
  vf q = vset1(1.5594677824992687e-4f);
  q = vfmadd(q, f, vset1(1.3406643411144614e-3f));
  q = vfmadd(q, f, vset1(9.617692790925503e-3f));
  q = vfmadd(q, f, vset1(5.5503103882074356e-2f));
  q = vfmadd(q, f, vset1(2.4022652208805084e-1f));
  q = vfmadd(q, f, vset1(6.931472420692444e-1f));
  return vmul(vfmadd(q, f, vset1(1.0f)), vshl23(r));
}

// Numerically safe logistic: 1 / (1 + exp(-x)).
static inline vf vsigmoid(vf x) { return vdiv(vset1(1.0f), vadd(vset1(1.0f), vexp(vsub(vzero(), x)))); }

#endif
