// dtypes: sizes, names, scalar conversions (round-to-nearest-even, NaN kept)
// and dispatch of the vectorized array conversions in kern/convert.c.
#include "internal.h"
#include <math.h>
#include "kern/convert_k.h"

size_t ot_dtype_size(ot_dtype dt) {
  static const size_t sz[OT_DTYPE_COUNT] = {4, 2, 2, 1, 4, 2};
  return (unsigned)dt < OT_DTYPE_COUNT ? sz[dt] : 0;
}
const char *ot_dtype_name(ot_dtype dt) {
  static const char *nm[OT_DTYPE_COUNT] = {"f32", "bf16", "f16", "i8", "i32", "u16"};
  return (unsigned)dt < OT_DTYPE_COUNT ? nm[dt] : "unknown";
}

uint16_t ot_f32_to_bf16(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float ot_bf16_to_f32(uint16_t x) {
  uint32_t u = (uint32_t)x << 16; float f; memcpy(&f, &u, 4); return f;
}

uint16_t ot_f32_to_f16(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));  // NaN
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // subnormal or zero in f16: scale into integer and round
    float f; memcpy(&f, &a, 4);
    float s = f * 16777216.0f;  // 2^24: f16 subnormal unit is 2^-24
    uint32_t r = (uint32_t)nearbyintf(s);  // default rounding mode = nearest even
    return (uint16_t)(sign | r);
  }
  uint32_t m = a + 0xc8000fffu + ((a >> 13) & 1u);  // rebias exponent (-112<<23) and round
  return (uint16_t)(sign | (m >> 13));
}
float ot_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) { f = (float)m * (1.0f / 16777216.0f); return sign ? -f : f; }
  uint32_t u = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
  memcpy(&f, &u, 4);
  return f;
}

void ot_cvt_f32_to_bf16(const float *s, uint16_t *d, size_t n) { OT_KPICK(k_cvt_f32_bf16)(s, d, n); }
void ot_cvt_bf16_to_f32(const uint16_t *s, float *d, size_t n) { OT_KPICK(k_cvt_bf16_f32)(s, d, n); }
void ot_cvt_f32_to_f16(const float *s, uint16_t *d, size_t n) { OT_KPICK(k_cvt_f32_f16)(s, d, n); }
void ot_cvt_f16_to_f32(const uint16_t *s, float *d, size_t n) { OT_KPICK(k_cvt_f16_f32)(s, d, n); }
void ot_cvt_f32_to_i8(const float *s, int8_t *d, size_t n, float scale) { OT_KPICK(k_cvt_f32_i8)(s, d, n, scale); }
void ot_cvt_i8_to_f32(const int8_t *s, float *d, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) d[i] = (float)s[i] * scale;  // auto-vectorized
}

ot_status ot_convert(const void *src, ot_dtype sdt, void *dst, ot_dtype ddt, size_t n) {
  if (!src || !dst) return ot_error(OT_EINVAL, "ot_convert: NULL buffer");
  bool sok = sdt == OT_F32 || sdt == OT_BF16 || sdt == OT_F16;
  bool dok = ddt == OT_F32 || ddt == OT_BF16 || ddt == OT_F16;
  if (!sok || !dok)
    return ot_error(OT_EINVAL, "ot_convert: %s -> %s unsupported (f32, bf16, f16 only)",
                    ot_dtype_name(sdt), ot_dtype_name(ddt));
  if (sdt == ddt) { memmove(dst, src, n * ot_dtype_size(sdt)); return OT_OK; }
  if (sdt == OT_F32) {
    if (ddt == OT_BF16) ot_cvt_f32_to_bf16(src, dst, n); else ot_cvt_f32_to_f16(src, dst, n);
    return OT_OK;
  }
  if (ddt == OT_F32) {
    if (sdt == OT_BF16) ot_cvt_bf16_to_f32(src, dst, n); else ot_cvt_f16_to_f32(src, dst, n);
    return OT_OK;
  }
  // bf16 <-> f16 through f32 in chunks on the stack
  float tmp[1024];
  for (size_t i = 0; i < n; i += 1024) {
    size_t m = n - i < 1024 ? n - i : 1024;
    const uint8_t *s = (const uint8_t *)src + i * 2;
    uint8_t *d = (uint8_t *)dst + i * 2;
    if (sdt == OT_BF16) ot_cvt_bf16_to_f32((const uint16_t *)s, tmp, m); else ot_cvt_f16_to_f32((const uint16_t *)s, tmp, m);
    if (ddt == OT_BF16) ot_cvt_f32_to_bf16(tmp, (uint16_t *)d, m); else ot_cvt_f32_to_f16(tmp, (uint16_t *)d, m);
  }
  return OT_OK;
}
