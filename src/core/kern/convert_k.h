// Prototypes of the array dtype conversion kernels (kern/convert.c), one
// variant per ISA; included by the kernels and by core/dtype.c, their caller.
#ifndef OT_KERN_CONVERT_K_H
#define OT_KERN_CONVERT_K_H
#include "internal.h"

OT_KDECL(void, k_cvt_f32_bf16, (const float *src, uint16_t *dst, size_t n));
OT_KDECL(void, k_cvt_bf16_f32, (const uint16_t *src, float *dst, size_t n));
OT_KDECL(void, k_cvt_f32_f16, (const float *src, uint16_t *dst, size_t n));
OT_KDECL(void, k_cvt_f16_f32, (const uint16_t *src, float *dst, size_t n));
OT_KDECL(void, k_cvt_f32_i8, (const float *src, int8_t *dst, size_t n, float scale));

#endif
