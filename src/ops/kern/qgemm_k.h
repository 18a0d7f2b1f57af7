// The int8 x int8 -> int32 GEMM of the quantized linear (kern/qgemm.c, called
// by ops/quant.c for prefill and batched rows over int8 weights): activations
// quantized per row, integer dot products per weight group, scales in an f32
// epilogue. One variant per ISA.
#ifndef OT_KERN_QGEMM_K_H
#define OT_KERN_QGEMM_K_H
#include "qgemv_k.h"

// Below this largest |x| a row of activations is quantized as zero (its
// outputs are then the bias: an error below 2^-100 sum |w|).
#define OT__QX_TINY 0x1p-100f

// Each row m of x [M, K] f32 -> xq [M, Kp] int8 and sx [M] f32 (Kp >= K, a
// multiple of 32): amax = max |x[m, :]| (0 when below OT__QX_TINY), sx[m] =
// amax / 127, xq[m, k] = x[m, k] * (127 / amax) rounded to nearest even (both
// products f32), in [-127, 127]; xq[m, K..Kp) = 0; each stored plus VQ_XOFF
// of the variant (simd.h; AVX-512 with VNNI: + 128 as unsigned bytes), so the
// xq of one variant goes to k_qgemm_i8 of the same. false when x holds a NaN
// or an infinity (xq, sx then undefined). The AVX-512 variants need VNNI.
OT_KDECL(bool, k_qx_i8, (int8_t *xq, float *sx, const float *x, int M, int K, int Kp));
// y[M, N] = sx[m] * sum_g sw[n, g] * sum_{k in g} xq[m, k] W[n, k] (+ bias[n]),
// W int8 [N = rows, K = cols] (per-channel: one group of K), xq [M, Kp] from
// k_qx_i8. Integer sums exact (int32 per group); the epilogue in f32. Threaded
// over the rows of W; every output computed by one thread in a fixed order.
OT_KDECL(void, k_qgemm_i8, (float *y, const int8_t *xq, const float *sx, int M, int Kp, const ot__qk_weight *W,
                            const float *bias));
// From this many rows on ops/quant.c takes k_qgemm_i8p.
#define OT__QI8_PANEL_MIN 32
// The same outputs from the outer-product form (kern/qgemm_panel.c), for many
// rows: the threads pack panels of W into their own scratch
// (ot_scratch_slot(OT_SCRATCH_GEMM), k_qgemm_i8p_ws bytes each) and run every
// row of xq through them. false (error set, y incomplete) when a thread's
// scratch cannot grow; the caller then runs k_qgemm_i8. Results may differ from
// k_qgemm_i8 in the last bits of the f32 epilogue (same integer sums).
OT_KDECL(bool, k_qgemm_i8p, (float *y, const int8_t *xq, const float *sx, int M, int Kp, const ot__qk_weight *W,
                             const float *bias));
// Bytes of one thread's scratch in k_qgemm_i8p for xq rows of Kp bytes and the
// weight's group (0: per channel).
OT_KDECL(size_t, k_qgemm_i8p_ws, (int Kp, int group));

#endif
