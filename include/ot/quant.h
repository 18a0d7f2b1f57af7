// ops-transformer weight-only quantization for inference: a weight matrix
// stored as f32, bf16 or symmetric int8 (per-channel or per-group scales), the
// linear layer over it (GEMV kernels that stream the weight once for decode,
// tiles dequantized into the oneDNN GEMM for prefill), and the quantized model
// file written by `ot quantize`.
//
// Arithmetic is f32 with f32 activations in every case ("weight-only"): the
// result equals x @ dequant(W)^T up to f32 accumulation order.
#ifndef OT_QUANT_H
#define OT_QUANT_H
#include "ot/model.h"
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
} ot_qweight;

// w: [rows, cols] f32 -> *out (owned). F32: a copy; BF16: rounded to nearest
// even; INT8: per group of `group` columns (0: the whole row) scale =
// absmax / 127, q = round_even(w / scale) in [-127, 127] (an all-zero group
// has scale 0 and q 0), so |w - q * scale| <= scale / 2. group must be 0 for
// F32/BF16. Non-finite weights, a bad group or shape: OT_EINVAL naming them.
ot_status ot_qweight_quantize(ot_qweight *out, ot_qw_kind kind, int group, const float *w, int rows,
                              int cols);
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
// threads); larger M: tiles of W dequantized to f32 feed the oneDNN GEMM.
// Allocates nothing after the first call of a shape (per-thread scratch).
#define OT_QLINEAR_GEMV_MAX 16
ot_status ot_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);
// Plain scalar reference of the same (double accumulation over dequantized weights).
ot_status ot_ref_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M);

// ------------------------------------------------------ quantized models ---
// One named tensor of a quantized model. 2-D parameters are [out, in]
// (nn.Linear orientation; GPT-2's Conv1D weights already transposed, the
// embedding with its padding rows); 1-D ones (norm gains, biases) are F32
// with rows = 1, cols = numel.
typedef struct {
  char name[80];          // the model's parameter name (ot_param.name: HF names for GPT-2;
                          // Llama's fused "...qkv_proj..." / "...gate_up_proj...")
  int ndim;               // 1 or 2
  ot_qweight w;
} ot_qtensor;

typedef struct {
  ot_model_config config;
  ot_qw_kind kind;        // what the matrices were quantized to
  int group;              // INT8 group (0: per-channel)
  int n;
  ot_qtensor *t;          // [n] in the model's parameter order
} ot_qmodel;

// Quantizes every matrix of a model (linear weights, token embedding, untied
// lm_head) to `kind` (group as ot_qweight_quantize); learned positions, norms
// and biases stay F32. A matrix whose columns `group` does not divide:
// OT_EINVAL naming it and the groups that fit. *out = NULL on failure.
ot_status ot_qmodel_from_model(ot_qmodel **out, const ot_model *m, ot_qw_kind kind, int group);
void ot_qmodel_free(ot_qmodel *q);            // NULL ok
const ot_qtensor *ot_qmodel_find(const ot_qmodel *q, const char *name);   // NULL if absent
size_t ot_qmodel_bytes(const ot_qmodel *q);   // all tensors' bytes (data + scales)

// Writes one safetensors file atomically: INT8 matrices as "<name>" (I8,
// [out, in]) + "<name>.scales" (F32, [out, in/group] or [out] per-channel),
// BF16 ones as BF16, everything else F32; __metadata__: format
// "ot-quantized", dtype, group, layout "out_in" and the model config
// ("config.<field>" keys, floats round-trip exactly).
ot_status ot_quant_file_save(const ot_qmodel *q, const char *path);
// Reads such a file into owned tensors, in file order (the file is closed on
// return): I8 tensors with their ".scales" as INT8 (group from the metadata),
// BF16 as BF16, F32 as F32. Another format, an invalid config, a tensor of
// another dtype or rank, scales missing or of the wrong shape: OT_EFORMAT
// naming the tensor. Names and shapes against the config are the user's to
// check (ot_qmodel_find). *out = NULL on failure.
ot_status ot_quant_file_load(ot_qmodel **out, const char *path);

#ifdef __cplusplus
}
#endif
#endif
