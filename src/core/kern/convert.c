// Array dtype conversions, one source for every ISA (see simd.h). Threaded
// for large arrays; element-wise, so results do not depend on thread count.
#include "core/simd.h"
#include "convert_k.h"
#if !defined(OT_ARCH_PORTABLE)
#include <immintrin.h>
#endif

#define CVT_PAR_MIN 65536

// for (long b = 0; b < nv; b++) body, threaded when n >= CVT_PAR_MIN. The size test
// stays outside the parallel construct: an `if (...)` clause still enters the OpenMP
// runtime (a team of one, allocated anew inside another parallel region: about 1 us a
// call), which dominated callers converting many short runs (the ViT patch unfold: one
// call per 16 pixels, 100x slower in bf16 than its f32 copies).
#define CVT_LOOP(n, nv, body)                                                       \
  do {                                                                              \
    if ((n) >= CVT_PAR_MIN) {                                                       \
      _Pragma("omp parallel for schedule(static)")                                  \
      for (long b = 0; b < (nv); b++) { body; }                                     \
    } else {                                                                        \
      for (long b = 0; b < (nv); b++) { body; }                                     \
    }                                                                               \
  } while (0)

void OT_K(k_cvt_f32_bf16)(const float *src, uint16_t *dst, size_t n) {
  long nv = (long)(n / VL);
  CVT_LOOP(n, nv, vstore_bf16(dst + b * VL, vload(src + b * VL)));
  for (size_t i = (size_t)nv * VL; i < n; i++) dst[i] = ot_f32_to_bf16(src[i]);
}

void OT_K(k_cvt_bf16_f32)(const uint16_t *src, float *dst, size_t n) {
  long nv = (long)(n / VL);
  CVT_LOOP(n, nv, vstore(dst + b * VL, vload_bf16(src + b * VL)));
  for (size_t i = (size_t)nv * VL; i < n; i++) dst[i] = ot_bf16_to_f32(src[i]);
}

void OT_K(k_cvt_f32_f16)(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
#if !defined(OT_ARCH_PORTABLE)
  // F16C: vcvtps2ph with round-to-nearest-even; NaN/inf handled by hardware
  long nv = (long)(n / 8);
  CVT_LOOP(n, nv, _mm_storeu_si128((__m128i *)(dst + b * 8),
                                   _mm256_cvtps_ph(_mm256_loadu_ps(src + b * 8), _MM_FROUND_TO_NEAREST_INT)));
  i = (size_t)nv * 8;
#endif
  for (; i < n; i++) dst[i] = ot_f32_to_f16(src[i]);
}

void OT_K(k_cvt_f16_f32)(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
#if !defined(OT_ARCH_PORTABLE)
  long nv = (long)(n / 8);
  CVT_LOOP(n, nv, _mm256_storeu_ps(dst + b * 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + b * 8)))));
  i = (size_t)nv * 8;
#endif
  for (; i < n; i++) dst[i] = ot_f16_to_f32(src[i]);
}

void OT_K(k_cvt_f32_i8)(const float *src, int8_t *dst, size_t n, float scale) {
  const float inv = 1.0f / scale;
  for (size_t i = 0; i < n; i++) {
    float q = nearbyintf(src[i] * inv);
    q = q > 127.f ? 127.f : (q < -127.f ? -127.f : q);
    dst[i] = (int8_t)(q == q ? q : 0.f);  // NaN -> 0
  }
}
