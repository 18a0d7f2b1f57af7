// ops-transformer weight-only quantization for inference: a weight matrix
// stored as f32, bf16 or symmetric int8 (per-channel or per-group scales), the
// linear layer over it (GEMV kernels that stream the weight once for decode;
// for prefill an int8 GEMM over int8 weights, tiles converted for the oneDNN
// GEMM otherwise). The quantized model (every matrix of a model, and the file
// `ot quantize` writes) is in ot/model.h.
//
// Arithmetic is f32 with f32 activations ("weight-only": the result equals
// x @ dequant(W)^T up to f32 accumulation order), except the int8 GEMM, which
// quantizes the activations per row to int8 (ot_qlinear_i8_fwd: its bound),
// and the int8 GEMV on AVX2, which rounds them to int16 per chunk.
#ifndef OT_QUANT_H
#define OT_QUANT_H
#include "ot/ops.h"
#ifdef __cplusplus
extern "C" {
#endif

// -------------------------------------------------------- quantized weight ---
typedef enum { OT_QW_F32 = 0, OT_QW_BF16, OT_QW_INT8 } ot_qw_kind;
const char *ot_qw_kind_name(ot_qw_kind k);    // "f32", "bf16", "int8"

typedef struct {
  ot_qw_kind kind;
  int rows, cols;      // [rows = out features N, cols = in features K] (nn.Linear layout)
  int group;           // INT8: scale group along cols: 0 = per-channel (one scale per row),
                       // else 32, 64 or 128 (cols % group == 0); 0 for F32/BF16
  void *data;          // F32 float[rows*cols] | BF16 uint16[rows*cols] | INT8 int8[rows*cols]
                       // (symmetric, zero point 0), row-major
  float *scales;       // INT8: [rows, cols/group] (per-channel: [rows]); NULL otherwise
  bool owned;          // data/scales allocated by ot_qweight_quantize (OT_MEM_PARAMS),
                       // freed by ot_qweight_free
  int pack;            // 0: row-major; F32 only: > 0 = packed by ot_qweight_pack in panels
                       // of `pack` rows (element (r, c) at data[(r / pack) * pack * cols
                       // + c * pack + r % pack], the last panel zero-padded)
} ot_qweight;

// w: [rows, cols] f32 -> *out (owned). F32: a copy; BF16: rounded to nearest
// even; INT8: per group of `group` columns (0: the whole row) scale =
// absmax / 127, q = round_even(w / scale) in [-127, 127] (an all-zero group
// has scale 0 and q 0), so |w - q * scale| <= scale / 2. group must be 0 for
// F32/BF16. Non-finite weights, a bad group or shape: OT_EINVAL naming them.
ot_status ot_qweight_quantize(ot_qweight *out, ot_qw_kind kind, int group, const float *w, int rows,
                              int cols);
// Repacks an F32 weight in place (data replaced by an owned copy, the old data
// freed when owned) in the panels of this CPU's linear kernel (pack = its width):
// ot_qlinear_fwd then reads each panel as one sequential stream for all rows of
// x, which decode with several sequences needs (the row-major form reads rows
// side by side). Every ot_qweight function takes packed weights (a view with
// fewer rows too); only the kernel of the ISA that packed runs on them directly,
// another ISA goes through row tiles. Packed again for the active ISA when
// packed for another; a no-op when packed for it. bf16 / int8: OT_EINVAL.
ot_status ot_qweight_pack(ot_qweight *w);

// INT8 with clipped scales (calibration, src/ops/quant_calib.c): as
// ot_qweight_quantize, row r's scales are clip[r] * absmax / 127 (clip [rows] in
// (0, 1], NULL: all 1 = ot_qweight_quantize); values beyond saturate at +-127.
// clip with a kind other than INT8: OT_EINVAL.
ot_status ot_qweight_quantize_clip(ot_qweight *out, ot_qw_kind kind, int group, const float *w, int rows,
                                   int cols, const float *clip);
// Fake quantization (quantization-aware training, calibration): out [rows, cols]
// = dequant(int8 quantize(w)) with ot_qweight_quantize_clip's scales, equal bit
// for bit to ot_qweight_dequantize of that quantized weight. out may equal w.
// Its backward is the straight-through estimator: the gradient of w is the
// gradient of out, unchanged (nothing to compute).
ot_status ot_qweight_fake_quant(float *out, const float *w, int rows, int cols, int group, const float *clip);
// Plain scalar reference of the same.
ot_status ot_ref_qweight_fake_quant(float *out, const float *w, int rows, int cols, int group,
                                    const float *clip);
void ot_qweight_free(ot_qweight *w);          // NULL ok; frees owned storage, zeroes the struct
// Checks the descriptor's fields (kind, shape, group, pointers); `fn` names the caller.
ot_status ot_qweight_check(const ot_qweight *w, const char *fn);
// Bytes a full pass over the weight reads (data + scales).
size_t ot_qweight_bytes(const ot_qweight *w);
// Dequantized row `row`: out [cols] f32 (e.g. an embedding lookup in a quantized tied table).
ot_status ot_qweight_row(const ot_qweight *w, int row, float *out);
// The whole weight dequantized: out [rows, cols] f32.
ot_status ot_qweight_dequantize(const ot_qweight *w, float *out);

// ----------------------------------------------------------- linear layer ---
// y[M, rows] = x[M, cols] @ W^T (+ bias[rows] if non-NULL); x, y f32 row-major
// (ldx = cols, ldy = rows), y must not overlap x. M <= OT_QLINEAR_GEMV_MAX: one
// pass over W for all M rows (GEMV kernels, output rows split over the OpenMP
// threads); larger M: f32 / bf16 weights through tiles of W converted to f32
// feeding the oneDNN GEMM. int8 weights from M = OT_QLINEAR_I8_MIN on go through
// the int8 GEMM (ot_qlinear_i8_fwd: the activations quantized to int8 per row),
// except groups of 32, which take the GEMV up to OT_QLINEAR_GEMV_MAX and the
// dequantized tiles above (there the int8 GEMM's per-group epilogue costs as
// much as it saves: 0.94x to 1.04x the dequantized path at M = 128 on GPT-2's
// shapes, `bench_qgemv --i8gemm`). The int8 GEMM from M = 4: `bench_qgemv --m
// M` on GPT-2's weights (Zen 4, AVX-512 VNNI, 2 threads), GEMV -> int8 GEMM:
// M = 2 slower (logits 1.96 -> 4.50 ms), M = 4 about even (3.12 -> 3.10 ms),
// M = 8 2.6-3.3x faster (logits 7.68 -> 2.94 ms per channel), M = 16 2.3-2.8x.
// f32 packed by ot_qweight_pack: the packed kernel at every M (each panel one
// stream, read once for all the rows of x; broadcast form, no horizontal sums),
// or, packed for another ISA than the active one, the tiles above.
// Allocates nothing after the first call of a shape (per-thread scratch).
#define OT_QLINEAR_GEMV_MAX 16
#define OT_QLINEAR_I8_MIN 4
ot_status ot_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);
// Plain scalar reference of the same (double accumulation over dequantized weights).
ot_status ot_ref_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);

// The int8 x int8 -> int32 GEMM over an int8 weight (any M >= 1, any group; the
// path of ot_qlinear_fwd for M > OT_QLINEAR_GEMV_MAX, groups other than 32). Each row of x is quantized on
// the fly: amax = max |x[m, :]| (a row below 2^-100 counts as zero), sx =
// amax / 127, xq = round_even(x * (127 / amax)) in [-127, 127] (f32 products);
// then y[m, n] = sx[m] * sum_g sw[n, g] * sum_{k in g} xq[m, k] W[n, k]
// (+ bias[n]): exact int32 sums per weight group (per channel: the whole row),
// scales applied in f32. Error against x @ dequant(W)^T: at most
// sum_k |dequant(W)[n, k]| sx[m] / 2 per output, plus f32 rounding. An x
// holding a NaN or an infinity takes the f32 path (ot_qlinear_fwd's for
// f32 weights) so that they propagate. Weights other than int8: OT_EINVAL.
ot_status ot_qlinear_i8_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);
// Its scalar reference: the same activation quantization (scalar code), int64
// sums per group, the epilogue in double.
ot_status ot_ref_qlinear_i8_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);

// ------------------------------------------------- calibrated search (AWQ) ---
// Activation-aware search of one linear layer's int8 quantization (AWQ-style,
// src/ops/quant_calib.c): from calibration inputs x [R, K] (rows of the layer's
// input on real data) it chooses
//  - per-input-channel scales s [K] = xmean^alpha, normalized so that
//    max(s) * min(s) = 1 (xmean: mean |x| per channel over all calibration rows,
//    floored at 1e-5 of its largest value), alpha on the grid 0, 1/alpha_steps, ..., 1;
//    the layer then stores Q(W diag(s)) and its input is divided by s (folded into
//    the previous op by the caller: a norm's gain and bias, or the rows of a
//    previous linear layer);
//  - then per output row a clip ratio [N] of its int8 scales on the grid 1,
//    1 - clip_step, ..., 1 - clip_steps * clip_step,
// each minimizing the output error err = sum over rows of ||x W^T - (x / s)
// deq(Q(W diag(s), clip))^T||^2 / R. alpha 0 and clip 1 are plain PTQ, so err <=
// err_plain; ties keep the smaller alpha and the larger clip. With act_int8 the
// error adds that of the prefill int8 GEMM (ot_qlinear_i8_fwd), whose input rows
// x / s are quantized to int8 per row: ||x W^T - Qa(x / s) deq(Q(W diag(s), clip))^T||^2 / R
// (Qa: scale absmax / 127 per row, round half to even). The errors are computed by
// GEMMs (fast) or in double (ot_ref_qsearch).
typedef struct {
  int alpha_steps;        // 0: no scaling (s = 1); 20: alpha step 0.05
  int clip_steps;         // 0: no clipping
  float clip_step;        // e.g. 0.02
  bool act_int8;          // also score the int8-activation GEMM's output error
} ot_qsearch_opts;

typedef struct {
  float alpha;            // chosen exponent (0: s = 1)
  double err_plain;       // output error of plain PTQ (s = 1, clip 1)
  double err_scaled;      // after the alpha search, before clipping
  double err;             // of the choice
} ot_qsearch_result;

// w [N, K] f32, group 0 | 32 | 64 | 128 (divides K), x [R, K] f32, xmean [K] >= 0
// (NULL: mean |x| over the R rows) -> s [K] (NULL allowed when alpha_steps = 0),
// clip [N] (NULL allowed when clip_steps = 0), *res.
ot_status ot_qsearch(ot_qsearch_result *res, float *s, float *clip, const float *w, int N, int K, int group,
                     const float *x, int R, const float *xmean, const ot_qsearch_opts *o);
// Its scalar reference (plain loops, errors accumulated in double).
ot_status ot_ref_qsearch(ot_qsearch_result *res, float *s, float *clip, const float *w, int N, int K,
                         int group, const float *x, int R, const float *xmean, const ot_qsearch_opts *o);

#ifdef __cplusplus
}
#endif
#endif
