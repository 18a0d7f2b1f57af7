// ops-transformer model: one decoder-only Transformer configured to cover the
// GPT-2 and Llama families; its parameter layout (one f32 buffer, a table of
// named tensors with Hugging Face names), the memory plan for a (batch,
// sequence, dtype, recompute) run, and the forward/backward passes.
//
// Block (pre-norm), for layer input x (the residual stream, [B*T, C]):
//   h  = x + attn(norm1(x))           attn: fused QKV, RoPE (if any), causal
//   x' = h + mlp(norm2(h))            flash attention, output projection
// logits = norm_f(x_L) lm_head^T; loss = fused cross-entropy over the real
// vocabulary (the embedding/logits are padded to vocab_padded rows).
//
// Lifecycle: ot_model_create (plans and allocates everything once: parameters,
// gradients, activations, workspace) -> ot_model_init or an import -> steps of
// ot_model_forward / ot_model_backward. A step allocates nothing itself (the
// operators' per-thread ot_scratch grows during the first step only).
#ifndef OT_MODEL_H
#define OT_MODEL_H
#include "ot/ops.h"
#include "ot/io.h"
#include "ot/quant.h"
#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- config ----
typedef enum { OT_NORM_LAYERNORM = 0, OT_NORM_RMSNORM } ot_norm_kind;
// GELU: tanh form; RELU, GELU_ERF (exact erf GELU): encoder-decoder models (Marian)
typedef enum { OT_MLP_GELU = 0, OT_MLP_SWIGLU, OT_MLP_RELU, OT_MLP_GELU_ERF } ot_mlp_kind;
// SINUSOID: Marian's fixed table (row p: sin(p / 10000^(2j/C)) in the first half of the
// columns, cos in the second), no parameters; encoder-decoder models only (which also
// take LEARNED: one table per stack, mBART's).
typedef enum { OT_POS_LEARNED = 0, OT_POS_ROPE, OT_POS_SINUSOID } ot_pos_kind;
// What a vision transformer's head reads: the CLS token's row (HF ViT), or the mean of the
// patch tokens' rows (timm's global_pool='avg'; the CLS token still attends).
typedef enum { OT_POOL_CLS = 0, OT_POOL_MEAN } ot_pool_kind;
// Tensor naming (Hugging Face names for export/import); nothing else depends on it.
// MARIAN: MarianMTModel (model.shared, model.encoder.layers.N..., model.decoder.layers.N...);
// with learned positions / embedding norms also MBart's (embed_positions, layernorm_embedding).
// VIT: ViTForImageClassification (vit.embeddings..., vit.encoder.layer.N..., classifier).
typedef enum { OT_NAMES_GPT2 = 0, OT_NAMES_LLAMA, OT_NAMES_MARIAN, OT_NAMES_VIT } ot_names;
// Architecture: decoder-only (GPT-2 / Llama) or encoder-decoder (the original
// Transformer, Marian): n_enc_layers encoder blocks (bidirectional, masked by the
// source lengths), n_layers decoder blocks (causal self-attention, then
// cross-attention over the encoder output, then the MLP).
// VIT: a vision transformer (Dosovitskiy et al. 2021, HF ViTForImageClassification): the
// patch embedding (a patch_size x patch_size convolution with stride patch_size), a CLS
// token, learned positions, n_layers pre-norm bidirectional blocks, the final norm and a
// classification head (with bias) on the CLS row; vocab is the number of classes.
typedef enum { OT_ARCH_DECODER = 0, OT_ARCH_ENCDEC, OT_ARCH_VIT } ot_arch_kind;
// Norm placement: PRE x + f(norm(x)) (GPT-2, Llama, mBART), POST norm(x + f(x))
// (the original Transformer, Marian; no final norms then).
typedef enum { OT_PLACE_PRE = 0, OT_PLACE_POST } ot_norm_place;

typedef struct {
  char name[32];        // preset name, or what the caller calls it
  ot_names names;
  int vocab;            // real vocabulary V (loss and token ids over [0, V))
  int vocab_pad;        // embedding/logit rows padded to a multiple of this (1 = none)
  int d_model;          // C
  int n_layers;         // L
  int n_heads;          // Hq; head_dim D = C / Hq
  int n_kv_heads;       // Hkv, divides Hq (Hq: multi-head, 1: multi-query)
  int d_ff;             // F, MLP hidden width (SwiGLU: F per gate/up half)
  int max_seq;          // longest sequence (rows of the learned position table / RoPE table)
  ot_norm_kind norm;
  ot_mlp_kind mlp;
  ot_pos_kind pos;
  float rope_base;      // RoPE: theta base (10000)
  ot_rope_style rope_style;  // RoPE: NEOX (HF Llama) or GPTJ (Meta's original)
  bool tied;            // lm_head shares the token embedding
  bool bias;            // biases of every linear layer and LayerNorm's beta
  float eps;            // norm epsilon
  float init_std;       // initialization std (0.02)
  // encoder-decoder fields (all 0 for decoder-only models)
  ot_arch_kind arch;
  int n_enc_layers;     // encoder blocks (encoder-decoder only)
  ot_norm_place norm_place;
  bool embed_scale;     // token embeddings times sqrt(d_model) (Marian scale_embedding)
  bool logits_bias;     // a bias on the logits (Marian final_logits_bias)
  int pad_id, eos_id, decoder_start_id;   // token ids (encoder-decoder)
  int src_vocab;        // 0: one vocabulary shared by source and target (the only one supported)
  int pos_offset;       // encoder-decoder learned positions: position p reads row p + pos_offset
                        // of its table [max_seq + pos_offset, C] (mBART: 2)
  bool embed_norm;      // a norm after the embedding of each stack (mBART layernorm_embedding)
  // dropout (training forwards only, see ot_model_set_dropout_step), each in [0, 1):
  float dropout;        // after the embedding (+ positions, + embedding norm) and on every
                        // sublayer output before its residual add (HF dropout / GPT-2
                        // resid_pdrop and embd_pdrop)
  float attn_dropout;   // on the attention probabilities (self and cross; inside the flash kernels)
  float act_dropout;    // after the MLP activation (HF activation_dropout)
  // vision transformer fields (arch = OT_ARCH_VIT; all 0 otherwise). vocab = classes,
  // vocab_pad = 1, max_seq = 1 + (image_size / patch_size)^2 (CLS + patches), untied,
  // logits_bias = true (the classifier's bias).
  int image_size;       // the side of the square images the positions were trained for
  int patch_size;       // P: side of a patch
  int channels;         // image channels (3: RGB, 1: grey)
  float drop_path;      // stochastic depth: block l drops each sample's sublayer outputs with
                        // probability drop_path * l / (n_layers - 1) (timm's linear rule;
                        // training only; [0, 1))
  ot_pool_kind pool;    // the head's input: the final norm of the CLS row (CLS, HF), or the
                        // final norm of the mean of the last block's patch rows (MEAN: timm's
                        // global_pool='avg' with its fc_norm; Hugging Face cannot express it)
} ot_model_config;

// Presets: "gpt2" (124M: V 50257 padded to 50304, C 768, 12 layers, 12 heads),
// "llama-tiny" (23.7M, stories15M-shaped but untied, GQA: V 32000, C 288, 6 layers, 6
// heads / 2 kv heads, SwiGLU F 768, RoPE, RMSNorm, untied), "tiny" (tests: V 50
// padded to 64, C 32, 2 layers, 4 heads, F 128, T 16, GPT-2 family), "small"
// (the default: GPT-2 family, V 8192, C 256, 4 layers, 4 heads, F 1024, T 256,
// a few minutes of training on 2 cores). For planning layouts of large models
// (`ot plan`): "llama-34b" (CodeLlama-34B's shape: V 32000, C 8192, 48 layers, 64 heads
// / 8 kv heads, SwiGLU F 22016) and "gpt-1t" (1.0T parameters, GPT-2 family: V 51200,
// C 25600, 128 layers, 160 heads, F 102400, T 2048). Unknown name: OT_EINVAL listing them.
// Dropout is 0 in every preset except transformer-base / -big / -seed / -small
// (dropout 0.1, attn_dropout 0, act_dropout 0: fairseq's transformer); the test
// shape transformer-tiny keeps 0.
// Vision presets (arch vit, HF ViT names, erf GELU, LayerNorm eps 1e-12, 1000 classes):
// "vit-tiny/16" (C 192, 12 layers, 3 heads), "vit-small/16" (384, 12, 6), "vit-base/16"
// (768, 12, 12) at 224 px (196 patches + CLS), "vit-long" (ViT-S/16 at 512 px: 32 x 32
// = 1024 patches + CLS), "vit-digits" (the bundled 8x8 digits: 1 channel, patches 2x2,
// C 64, 4 layers, 4 heads, F 128, 10 classes).
ot_status ot_model_config_preset(ot_model_config *c, const char *name);
ot_model_config ot_model_config_default(void);   // the "small" preset
// Checks every field; OT_EINVAL with a message naming the field, its value and
// the fix (e.g. "d_model=100 is not a multiple of n_heads=3").
ot_status ot_model_config_validate(const ot_model_config *c);
void ot_model_config_print(FILE *f, const ot_model_config *c);
int ot_model_head_dim(const ot_model_config *c);          // C / Hq
int ot_model_vocab_padded(const ot_model_config *c);      // V rounded up to vocab_pad
// Number of parameters as Hugging Face counts them (no padding rows).
int64_t ot_model_n_params(const ot_model_config *c);
// Training FLOPs per token (forward + backward, 3 x forward GEMMs incl. the
// logits, plus attention at sequence length T with causal halving; encoder-decoder:
// plus the encoder over a source of T tokens and the cross-attention, per target token).
double ot_model_flops_per_token(const ot_model_config *c, int T);

// ------------------------------------------------------- parameter layout ---
typedef enum {
  OT_PT_EMBED = 0,   // token embedding [Vp, C] (rows >= V are padding, kept 0)
  OT_PT_POS,         // learned positions [max_seq, C]
  OT_PT_NORM_W,      // norm gain [C]
  OT_PT_NORM_B,      // LayerNorm beta [C]
  OT_PT_MATRIX,      // linear weight [out, in]
  OT_PT_MATRIX_RES,  // linear weight writing into the residual stream (init / sqrt(2L))
  OT_PT_BIAS,        // linear bias [out]
  OT_PT_LM_HEAD      // untied output embedding [Vp, C]
} ot_param_kind;

// One tensor of the master buffer (offsets in floats, 16-float aligned; the
// gaps between tensors hold zeros and never change).
typedef struct {
  char name[80];      // HF-style name; fused ones as HF-style "...qkv_proj..." / "...gate_up_proj..."
  ot_param_kind kind;
  int layer;          // block index, -1 for global tensors
  int ndim;           // 1 or 2
  int64_t shape[2];   // [out, in] for matrices (PyTorch nn.Linear layout)
  size_t offset, numel;
  bool decay;         // weight decay applies (matrices and embeddings)
} ot_param;

// A Hugging Face tensor: rows [row0, row0 + rows) of a parameter (rows = the
// first dim in OUR orientation). transpose: HF stores it [in, out] (GPT-2's
// Conv1D), so it is transposed on import/export. E.g. Llama's q/k/v_proj are
// three row ranges of the fused qkv weight, gate/up_proj two of gate_up; the
// token embedding covers the V real rows of the padded [Vp, C].
typedef struct {
  char name[80];
  int ndim;
  int64_t shape[2];   // the HF shape
  int param;          // index into the parameter table
  int64_t row0, rows;
  bool transpose;
  // The file shape when HF stores the tensor with more dims than ndim/shape above (ViT:
  // the CLS token [1, 1, C], positions [1, T, C], the patch projection [C, Cin, P, P]);
  // fdim 0: the file shape is ndim / shape. Same elements in the same order.
  int fdim;
  int64_t fshape[4];
} ot_hf_tensor;

// ------------------------------------------------------------------- run ----
typedef enum { OT_RECOMPUTE_NONE = 0, OT_RECOMPUTE_SELECTIVE, OT_RECOMPUTE_FULL } ot_recompute;
const char *ot_recompute_name(ot_recompute r);   // "none", "selective", "full"

typedef struct {
  int B, T;                // largest micro-batch and sequence the buffers hold
  ot_dtype dt;             // activation storage: OT_F32, or OT_BF16 / OT_F16 (mixed precision:
                           // a bf16 / f16 copy of the weights feeds the GEMMs and embeddings;
                           // norm gains and biases are read from the f32 master; all
                           // gradients are f32; arithmetic is f32 inside every op)
  ot_recompute recompute;  // none | selective (attention core + MLP activation
                           // recomputed in backward) | full (each layer's input kept)
  int ignore_index;        // targets equal to this give no loss (e.g. -1)
  int S;                   // encoder-decoder: longest source the buffers hold (0 otherwise)
} ot_run_config;

// Bytes per memory category, exactly what ot_model_create allocates (each
// buffer rounded to 64 bytes). optim is NOT allocated here: it is what AdamW's
// two f32 moments will take (8 bytes per master float), for the report.
typedef struct {
  size_t params;            // f32 master weights
  size_t params_bf16;       // 16-bit copy in dt (bf16 or f16; 0 for f32, and for bf16 where
                            // bf16 GEMMs convert, except a ViT: the GEMMs read the f32
                            // masters), also OT_MEM_PARAMS
  size_t grads;             // f32 gradients
  size_t optim;             // AdamW m + v (informational)
  size_t act_saved_layer;   // saved for the backward, per layer
  size_t act_saved;         // all saved activations (layers + embedding/final/logits/loss)
  size_t act_logits;        // of which the [B*T, Vp] logits
  size_t workspace_layer;   // one layer's non-saved buffers (shared by all layers)
  size_t workspace_bwd;     // backward-only buffers (gradient stream, dq/dk/dv, ...)
  size_t workspace;         // all workspace, incl. the RoPE table
  size_t n_floats;          // length of the master buffer (floats)
  size_t act_saved_enc_layer;   // encoder-decoder: saved per encoder layer (in act_saved)
  size_t act_enc;               // encoder-decoder: all encoder activations (in act_saved)
} ot_mem_plan;

// The plan for a config and run, without allocating anything.
ot_status ot_model_plan(const ot_model_config *c, const ot_run_config *r, ot_mem_plan *p);
// Prints the plan by category, and the activation + workspace bytes of every
// recompute mode with what each saves against `none`.
ot_status ot_model_plan_print(FILE *f, const ot_model_config *c, const ot_run_config *r);

// ------------------------------------------------------------------ model ---
typedef struct ot_model ot_model;

// Validates, plans and allocates everything (parameters and gradients zeroed:
// call ot_model_init or import weights next). *out = NULL on failure.
ot_status ot_model_create(ot_model **out, const ot_model_config *c, const ot_run_config *r);
void ot_model_free(ot_model *m);   // NULL ok
const ot_model_config *ot_model_config_of(const ot_model *m);
const ot_run_config *ot_model_run_of(const ot_model *m);
const ot_mem_plan *ot_model_plan_of(const ot_model *m);

// GPT-2 style initialization, deterministic from seed: matrices and embeddings
// normal(0, init_std), residual projections (attention output, MLP down)
// normal(0, init_std / sqrt(2 L)), biases 0, norm gains 1, padding rows 0.
// Refreshes the bf16 copy.
ot_status ot_model_init(ot_model *m, uint64_t seed);

// Master buffer [n_floats] f32, gradients (same layout; NULL with external_grads), 16-bit
// copy in the run dtype, bf16 or f16 (NULL when dt = f32, and with dt = bf16 where bf16
// GEMMs convert (!ot_gemm_bf16_native(), except vision transformers): the forward and
// backward then read the f32 masters).
float *ot_model_params(ot_model *m);
float *ot_model_grads(ot_model *m);
uint16_t *ot_model_params_bf16(ot_model *m);
size_t ot_model_n_floats(const ot_model *m);
// Recomputes the 16-bit (bf16 / f16) copy from the master weights (mixed precision: after every
// optimizer step that did not write it itself, e.g. ot_adamw over the whole
// buffer with p_bf16 = ot_model_params_bf16() keeps it in sync); no-op with dt = f32.
ot_status ot_model_sync_bf16(ot_model *m);
// Quantization-aware training (`ot train --qat`, src/model/qat.c): group >= 0 makes the
// forward and the backward read every matrix that ot_qmodel_from_model quantizes
// (linear weights, token embedding, head) fake-quantized to int8 from the f32
// masters (ot_qweight_fake_quant: scale absmax / 127 per row (group 0) or per group
// of 32 / 64 / 128 inputs, round half to even), kept in a copy of n_floats f32;
// the gradients are those at the fake-quantized weights and go to the masters
// unchanged (straight-through estimator). ot_qmodel_from_model with the same group
// then stores exactly the weights the forward ran with. group -1: off. Whole
// decoder-only models in f32 (pipeline stages: each its own); OT_EINVAL otherwise.
ot_status ot_model_set_qat(ot_model *m, int group);
// Refreshes the fake-quantized copy from the masters (after every optimizer step;
// ot_model_sync_bf16 and weight loads call it); no-op without QAT.
ot_status ot_model_sync_qat(ot_model *m);
int ot_model_qat_group(const ot_model *m);   // -1: off
void ot_model_zero_grad(ot_model *m);

int ot_model_param_count(const ot_model *m);
const ot_param *ot_model_param_at(const ot_model *m, int i);   // NULL if out of range
int ot_model_param_find(const ot_model *m, const char *name);  // -1 if absent
int ot_model_hf_count(const ot_model *m);
const ot_hf_tensor *ot_model_hf_at(const ot_model *m, int i);
int ot_model_hf_find(const ot_model *m, const char *name);     // -1 if absent

// Copies HF tensor i out of `buf` (the params or grads buffer) into out [HF
// shape, row-major], or into `buf` from `in` (transposing where recorded).
ot_status ot_model_hf_get(const ot_model *m, int i, const float *buf, float *out);
ot_status ot_model_hf_put(const ot_model *m, int i, float *buf, const float *in);

// Imports every HF tensor of the layout from an open safetensors file, named
// prefix + HF name (prefix may be NULL; for GPT-2 names, "transformer." is also
// tried). Dtypes F32/BF16/F16; shapes must match. Missing or mis-shaped
// tensors: OT_EFORMAT naming the tensor, the expected and the found shape. With
// strict, a tensor under prefix that the layout does not know (besides known
// non-parameter buffers such as attn.bias, rotary_emb.inv_freq) is an error.
// Refreshes the bf16 copy.
ot_status ot_model_import(ot_model *m, const ot_st_file *f, const char *prefix, bool strict);
// Writes the weights with HF names (F32) to a safetensors file, atomically.
ot_status ot_model_export(const ot_model *m, const char *path);

// The shape HF tensor i has in files (fdim / fshape when set, else ndim / shape) into
// shape[4]; returns its rank (0: bad index).
int ot_model_hf_file_shape(const ot_model *m, int i, int64_t shape[4]);

// Hugging Face config.json (GPT2LMHeadModel / LlamaForCausalLM / MarianMTModel /
// MBartForConditionalGeneration / ViTForImageClassification: model_type "vit", hidden_act
// "gelu" (erf) or "gelu_new", qkv_bias true, num_labels from id2label) -> config. Unsupported settings (e.g. rope_scaling,
// activation other than gelu_new/silu, Marian's swish, separate source/target
// vocabularies) are
// OT_EUNSUPPORTED with the key named. Marian / mBART's dropout, attention_dropout and
// activation_dropout are read (HF defaults 0.1 / 0 / 0 when absent); GPT-2's and
// Llama's dropout keys are not (set the fields after loading to fine-tune with dropout).
ot_status ot_model_config_from_hf(ot_model_config *c, const char *config_json_path);
// Loads <dir>/config.json + <dir>/model.safetensors: creates the model for run
// r (encoder-decoder with r->S = 0: S = r->T) and imports the weights (strict).
// *out = NULL on failure.
ot_status ot_model_load_hf(ot_model **out, const char *dir, const ot_run_config *r);
// The same for inference only: no gradient buffer (the whole model with
// external_grads, none bound), so a backward is refused; forwards (want_grad false),
// ot_model_set_weights_q, exports and the translator work as on ot_model_load_hf's.
ot_status ot_model_load_hf_infer(ot_model **out, const char *dir, const ot_run_config *r);

// ------------------------------------------------------------- partition ---
// A model split for tensor and pipeline parallelism (Megatron style). One
// process holds: blocks [layer0, layer1) of the pipeline; of each, the heads
// [tp_rank * Hq/tp, ...) and kv-heads of the attention (QKV column-parallel,
// output projection row-parallel) and the columns [tp_rank * F/tp, ...) of the
// MLP (first matrix column-parallel, both SwiGLU halves split alike; second
// row-parallel); the embedding when first, the final norm and the head when
// last (a tied model's last stage keeps its own copy of the embedding, whose
// gradient the caller sums with the first stage's). With vocab_parallel the
// embedding / head rows are split across the tp ranks (rows [tp_rank * Vl,
// (tp_rank + 1) * Vl), Vl = ceil(Vp / tp)) and the cross-entropy is vocab-
// parallel (max, sum and target logit, and with label smoothing the sum of the
// logits, all-reduced; logits never gathered). An encoder-decoder splits its
// shared embedding (encoder and decoder lookups, tied head) and final_logits_bias
// the same way.
// Row-parallel outputs, the column-parallel inputs' gradients and the vocab-
// parallel embedding are summed over the tensor group with comm.allreduce;
// a row-parallel bias is added by tp rank 0 only (every rank keeps the same
// copy and computes the same gradient).
typedef enum { OT_RED_SUM = 0, OT_RED_MAX } ot_red_op;
typedef struct {
  void *ctx;
  // In-place all-reduce of buf [n] (dt: f32, or bf16 summed in f32) over the tensor group.
  ot_status (*allreduce)(void *ctx, void *buf, size_t n, ot_dtype dt, ot_red_op op);
  // Called during the backward whenever every gradient at offsets >= from (floats,
  // in the layout) is final for this micro-batch (data-parallel bucket launch): after
  // each weight matrix's and norm's gradient within a block (a block's parameters are laid
  // out in forward order), after each block and at the end. May be NULL.
  void (*grads_ready)(void *ctx, size_t from);
  // Vocabulary-row gradients in chunks (ZeRO-2; NULL: off). When set, the weight
  // gradients of the token embedding and of the output head (one tensor when
  // tied) never touch their bound gradients: for each chunk of chunk_rows rows
  // (the part's local rows), the backward overwrites chunk_buf [chunk_rows, C]
  // f32 with this micro-batch's gradient of rows [row0, row0 + rows) of
  // parameter `param` and calls vocab_chunk. The head's chunks come first in the
  // backward, the embedding's last (an encoder-decoder: the decoder's embedding
  // pass, then the encoder's, each over every chunk).
  void (*vocab_chunk)(void *ctx, int param, int row0, int rows);
  float *chunk_buf;
  int chunk_rows;
  // ZeRO-3 (param_slots parts): called before block l (local index) runs, in the forward
  // (backward = false) and in the backward (true, also before a recompute); on return the
  // block's parameters must be in its slot (ot_model_block_range). An encoder-decoder
  // part numbers its blocks in running order: encoder blocks [0, Le), then decoder blocks
  // [Le, Le + L) (the forward asks for them in that order, the backward in reverse). May
  // be NULL.
  void (*need_block)(void *ctx, int l, bool backward);
  // ZeRO-3: the vocabulary tensors (token embedding, output head) are not stored either;
  // the embedding lookup and the head's forward and backward read them a chunk of
  // row_rows local rows at a time: need_rows fills row_buf [rows, C] (f32) with rows
  // [row0, row0 + rows) of parameter `param`; row_buf16 [row_rows, C] is the model's
  // scratch for their 16-bit copy.
  void (*need_rows)(void *ctx, int param, int row0, int rows);
  float *row_buf;
  uint16_t *row_buf16;
  int row_rows;
} ot_model_comm;

typedef struct {
  int tp, tp_rank;          // tensor group size and rank (1, 0: no tensor parallelism)
  int layer0, layer1;       // this stage's blocks (global indices), layer0 < layer1; an
                            // encoder-decoder's blocks are numbered encoder first, then
                            // decoder: [0, n_enc_layers + n_layers) (ot_model_n_blocks)
  bool vocab_parallel;      // embedding / head rows split over the tensor group
  int slots;                // micro-batches whose activations are held at once (>= 1)
  bool external_grads;      // no gradient buffer: the caller binds every parameter's
                            // gradient storage (ot_model_bind_grad) before a backward
  bool param_slots;         // ZeRO-3: the part stores its global tensors (those outside the
                            // blocks) and two block slots, not every block (see
                            // ot_model_block_range); needs external_grads and at least
                            // one block; comm.need_block fills the slots
  ot_model_comm comm;       // required when tp > 1
} ot_model_part;

// The whole model on one process: tp 1, every layer, one slot.
ot_model_part ot_model_part_whole(const ot_model_config *c);
// Blocks a pipeline splits: n_layers, plus n_enc_layers for an encoder-decoder.
int ot_model_n_blocks(const ot_model_config *c);
// Checks a partition against a config: OT_EINVAL naming the numbers and the fix
// (heads / kv-heads / d_ff divisible by tp, layer range inside [0, n_layers)).
ot_status ot_model_part_validate(const ot_model_config *c, const ot_model_part *p);
// ot_model_create for one part (ot_model_create = the whole part). Initialization
// (ot_model_init) gives every rank exactly its slice of the one-process model's
// tensors. Import/export/HF accessors and the KV cache need the whole model.
ot_status ot_model_create_part(ot_model **out, const ot_model_config *c, const ot_run_config *r,
                               const ot_model_part *p);
const ot_model_part *ot_model_part_of(const ot_model *m);
// The memory plan of one part, exactly what ot_model_create_part allocates (the same
// checks and walker; nothing allocated). The part's hooks may be unset.
ot_status ot_model_plan_part(const ot_model_config *c, const ot_run_config *r, const ot_model_part *part,
                             ot_mem_plan *p);
// A part's parameter layout and memory plan without any buffer (the parameter-table
// queries, ot_model_plan_of, ot_model_block_range work; no forward, no weights): for
// planning what a layout allocates. Free with ot_model_free.
ot_status ot_model_create_layout(ot_model **out, const ot_model_config *c, const ot_run_config *r,
                                 const ot_model_part *part);
bool ot_model_is_first(const ot_model *m);   // holds the embedding (layer0 == 0)
bool ot_model_is_last(const ot_model *m);    // holds the final norm and the head
// Parameter i of a part <-> the whole tensor of the same name in the one-process
// layout ([out, in] as ot_param; `whole` has the global shape): get writes
// the slice this part holds into whole (the rest untouched), put reads it.
// ot_model_part_whole_numel: numel of the whole tensor (-1: bad index).
ot_status ot_model_part_get(const ot_model *m, int i, const float *buf, float *whole);
ot_status ot_model_part_put(const ot_model *m, int i, float *buf, const float *whole);
int64_t ot_model_part_whole_numel(const ot_model *m, int i);
// Points the gradient of parameter i at g [numel] (accumulated into by the
// backward; external_grads models only). OT_EINVAL otherwise.
ot_status ot_model_bind_grad(ot_model *m, int i, float *g);
// True for parameters this tp rank holds a private slice of (false: replicated
// over the tensor group: norms, row-parallel biases, the replicated embedding).
bool ot_model_param_is_split(const ot_model *m, int i);

// ZeRO-3 parts (part.param_slots) store the global tensors other than the vocabulary
// ones (positions, final norms, logits bias: each contiguous at ot_model_storage(m, its
// offset)) and two slots of the largest block's size, block l (local index; an
// encoder-decoder's encoder blocks first) always in slot l % 2; the
// vocabulary tensors are not stored (comm.need_rows). ot_model_block_range: block l's
// layout range [*o0, *o1), its storage contiguous at ot_model_storage(m, *o0) (f32; the
// 16-bit copy at the same index of ot_model_params_bf16, refreshed by
// ot_model_sync_bf16_range). ot_model_storage of a vocabulary offset: NULL.
// ot_model_params(m) is the storage of ot_model_n_stored(m) floats (every layout offset
// for a whole part). ot_model_param_stored: whether parameter i is stored whole.
void ot_model_block_range(const ot_model *m, int l, size_t *o0, size_t *o1);
float *ot_model_storage(ot_model *m, size_t off);
size_t ot_model_n_stored(const ot_model *m);
bool ot_model_param_stored(const ot_model *m, int i);
ot_status ot_model_sync_bf16_range(ot_model *m, size_t o0, size_t o1);
// The initial values of every tensor of the part (as ot_model_init) into buf [n_floats]
// in the layout (works for param_slots parts, whose storage cannot hold them all).
ot_status ot_model_init_into(const ot_model *m, uint64_t seed, float *buf);

// Pipeline steps of micro-batch `slot` (in [0, slots)). A stage that is not
// first reads its input from ot_model_stage_input(slot) (the caller fills it,
// [B*T, C] of the run dtype) instead of embedding tokens; a stage that is not
// last leaves its output at ot_model_stage_output(slot) and computes no loss
// (targets, count ignored). The backward of a stage that is not last starts
// from ot_model_stage_grad(m) (the caller fills it with the gradient of the
// output); a stage that is not first leaves the gradient of its input there.
// ot_model_forward / ot_model_backward are these with slot 0.
ot_status ot_model_forward_slot(ot_model *m, int slot, const int32_t *tokens,
                                const int32_t *targets, int B, int T, float count, bool want_grad,
                                double *loss);
ot_status ot_model_backward_slot(ot_model *m, int slot);
void *ot_model_stage_input(ot_model *m, int slot);
void *ot_model_stage_output(ot_model *m, int slot);
void *ot_model_stage_grad(ot_model *m);

// ------------------------------------------------------------------- step ---
// tokens, targets: [B, T] int32 (B <= run.B, T <= run.T). Without targets:
// logits only (ot_model_logits). With targets: *loss (may be NULL) = sum of the
// per-token losses over targets != ignore_index / count; count <= 0 means the
// number of such targets in this call (pass the global batch's count for
// gradient accumulation over micro-batches). want_grad (needs targets) keeps
// what ot_model_backward needs and turns the logits into their gradient.
ot_status ot_model_forward(ot_model *m, const int32_t *tokens, const int32_t *targets, int B,
                           int T, float count, bool want_grad, double *loss);
// Gradients of the last forward (want_grad) ACCUMULATED (+=) into the grads buffer.
ot_status ot_model_backward(ot_model *m);
// Dropout mask stream of the following forwards (all of them, until the next call; the
// counter does not advance by itself): pass one counter per optimizer step (e.g. the
// step), the same for all of its micro-batches and on every rank: a row's masks come
// from its index in the step's global batch (ot_s2s_batch.sample, ot_image_batch.sample0;
// default: the forward's row b), so a data-parallel rank or a micro-batch holding a row
// draws the masks one process does.
// Dropout (cfg.dropout, attn_dropout, act_dropout) is active only in forwards with
// want_grad = true (ot_model_forward[_slot], ot_model_forward_s2s); with want_grad = false
// (evaluation, scoring) and in decoding it is off, exactly. Every dropout site draws from
// its own counter range derived from (seed, counter, stack, layer, site); inside it an
// element's counter is a function of (sample, position, channel) at fixed strides
// (positions: the model's max_seq, so the padding of a forward does not matter; the
// attention probabilities: (sample, global head, query, key); the MLP activation: its
// global column), so tensor-parallel ranks and pipeline stages draw the one-process
// masks too. The backward of a micro-batch slot regenerates the masks of that slot's
// forward (no mask is stored: dropout adds no bytes to the plan), and the masks depend on
// neither the thread count nor the recompute mode. Default stream: seed 0, counter 0.
void ot_model_set_dropout_step(ot_model *m, uint64_t seed, uint64_t counter);
// Logits of the last forward: [B*T, *ld] (dt of the run, ld = vocab_padded;
// columns >= V are padding). After a forward with want_grad they hold dlogits.
const void *ot_model_logits(const ot_model *m, int *ld);

// ---------------------------------------------------- vision transformer ---
// Tokens of an H x W image: 1 + (H / P) * (W / P) (0 for a non-ViT config).
int ot_vit_tokens(const ot_model_config *c, int H, int W);
// ViTForImageClassification's config.json for config c into buf[cap] ("" when c is not a
// vision transformer or buf is too small); labels "LABEL_<i>".
void ot_vit_hf_config(const ot_model_config *c, char *buf, size_t cap);
// A batch of images: img [B, channels, H, W] f32 (NCHW, normalized: PyTorch's
// pixel_values), labels [B] in [0, classes) or ignore_index (NULL: logits only).
// H and W must equal image_size unless interpolate (HF's interpolate_pos_encoding):
// then the patch positions are resized bicubically (align_corners = False, as HF and
// timm do) to the (H / P) x (W / P) grid; pixels past the last whole patch are
// cropped (as nn.Conv2d with stride P does). 1 + (H/P)(W/P) <= run.T.
typedef struct {
  int B, H, W;
  const float *img;
  const int32_t *labels;
  bool interpolate;
  int64_t sample0;   // index of row 0 in the step's global batch (row b: sample0 + b), for
                     // the dropout and drop-path masks
} ot_image_batch;
// Forward of a ViT (arch = OT_ARCH_VIT): logits [B, classes] (ot_model_logits, ld =
// classes) and, with labels, the loss (sum over labelled images / count; count <= 0:
// this call's labelled images); want_grad keeps what ot_model_backward needs.
ot_status ot_model_forward_images(ot_model *m, const ot_image_batch *b, float count,
                                  bool want_grad, double *loss);
// The same into micro-batch slot `slot` of a pipeline stage (a part with several slots; its
// backward is ot_model_backward_slot(m, slot)): the first stage embeds the images, a later
// one reads its stage input (ot_model_stage_input; b->img unused), the last one takes the
// labels and runs the head; the others leave their output in ot_model_stage_output.
ot_status ot_model_forward_images_slot(ot_model *m, int slot, const ot_image_batch *b, float count,
                                       bool want_grad, double *loss);

// ------------------------------------------------ encoder-decoder step ---
// One batch of an encoder-decoder model: src [B, S] source ids (row b valid up
// to src_len[b] in [1, S], the rest ignored), tgt_in [B, T] decoder inputs
// (decoder_start_id first), targets [B, T] (ignore_index: no loss; NULL: logits
// only). S <= run.S, T <= run.T, and the tokens fit the plan: B*S <= run.B*run.S,
// B*T <= run.B*run.T (B may exceed run.B when the rows are shorter).
typedef struct {
  int B, S, T;
  const int32_t *src, *src_len, *tgt_in, *targets;
  const int64_t *sample;   // [B] each row's index in the step's global batch (dropout
                           // masks; NULL: 0 .. B - 1); read by the forward and the backward
} ot_s2s_batch;
// Forward of an encoder-decoder model (arch = OT_ARCH_ENCDEC): the encoder over
// the source, the decoder over tgt_in, the logits and (with targets) the loss,
// as ot_model_forward (count, want_grad, *loss); then ot_model_backward gives
// the gradients of every parameter (encoder through the cross-attention).
ot_status ot_model_forward_s2s(ot_model *m, const ot_s2s_batch *b, float count, bool want_grad,
                               double *loss);
// The same into micro-batch slot `slot` of a part with several (pipeline stages); its
// backward is ot_model_backward_slot(m, slot).
ot_status ot_model_forward_s2s_slot(ot_model *m, int slot, const ot_s2s_batch *b, float count,
                                    bool want_grad, double *loss);
// Label smoothing of the loss from now on: eps in [0, 1) (0, the default: the
// plain cross-entropy, ot_xent_fused; else ot_xent_ls_fused, the loss and its
// gradient label-smoothed; a vocabulary-parallel head smooths over the whole
// vocabulary, its row sums all-reduced). OT_EINVAL outside [0, 1).
ot_status ot_model_set_label_smoothing(ot_model *m, float eps);
// Loss scaling (fp16 mixed precision): every later backward starts from the loss
// gradient times scale (finite, > 0; 1 = none, the default), so the gradients come
// out multiplied by it (the trainer unscales them in its optimizer step). The loss
// values reported stay unscaled.
ot_status ot_model_set_loss_scale(ot_model *m, float scale);
// Plain NLL (sum of -log p_target / count) of the last forward with targets:
// = its loss when eps = 0; with eps > 0 computed in forwards without want_grad
// only (NaN after a training forward, whose logits become their gradient).
double ot_model_nll(const ot_model *m);
// The encoder output of the last ot_model_forward_s2s: [B*S, *ld] (dt of the run), or NULL.
const void *ot_model_encoder_out(const ot_model *m, int *ld);
// Pipeline stages of an encoder-decoder (a part of blocks [layer0, layer1) of the
// combined stack, encoder first): the buffers the caller moves between stages, all
// in the run dtype, for the batch's B, S, T; those of inputs and outputs belong to
// micro-batch slot `slot`, GRAD and ENC_GRAD are shared by the slots. ot_model_forward_s2s on a stage reads its
// inputs there instead of embedding (ENC_IN: the encoder stage input [B*S, C], when
// the part holds encoder blocks but not the first; DEC_IN: the decoder stage input
// [B*T, C], when it holds decoder blocks but not block 0; ENC_OUT [B*S, C]: the
// encoder output, which a part holding decoder blocks but not the last encoder block
// reads) and leaves its outputs (ENC_OUT: the encoder output on the part of the last
// encoder block, the encoder stage output on an earlier one; DEC_OUT [B*T, C]: the
// decoder stage output of a part that is not last); a stage that is not last
// computes no loss (*loss = 0). ot_model_backward of a stage that is not last starts
// from GRAD ([B*T, C]: the gradient of DEC_OUT, or [B*S, C]: of an encoder stage's
// ENC_OUT) and, when it holds decoder blocks, from ENC_GRAD [B*S, C] (the later
// stages' partial sum of the encoder output's gradient; the part of the last encoder
// block receives the complete sum); it leaves the gradient of its stage input in GRAD
// (ENC_IN's or DEC_IN's) and its partial sum in ENC_GRAD. NULL where not applicable.
typedef enum {
  OT_S2S_ENC_IN, OT_S2S_DEC_IN, OT_S2S_ENC_OUT, OT_S2S_DEC_OUT, OT_S2S_GRAD, OT_S2S_ENC_GRAD
} ot_s2s_stage_buf;
void *ot_model_s2s_stage_buf(ot_model *m, int slot, ot_s2s_stage_buf which);
// Writes <dir>/config.json, <dir>/generation_config.json and <dir>/model.safetensors
// (F32) that MarianMTModel.from_pretrained (ViTForImageClassification.from_pretrained
// for a vision transformer) loads (dir must exist; whole models only). Decoding settings
// are the model's own: forced_eos_token_id is null in both JSON files (MarianConfig's
// default would force eos at the length limit), generation max_length = max_seq, so ot
// and transformers decode the directory as ot decodes the model.
// Models HF Marian cannot express (pre-norm, SwiGLU, no biases, RMSNorm, eps other
// than 1e-5) and decoder-only models: OT_EUNSUPPORTED (ot_model_export writes
// their weights).
ot_status ot_model_save_hf(const ot_model *m, const char *dir);

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
// Quantized inference on a model's own forward (vision transformers; `ot classify
// --weights int8`): from now on every block matrix (QKV, attention output, MLP) and the
// classifier are read from ot_qmodel_from_model(m, kind, group) — int8: ot_qlinear_fwd, the
// int8 linear of the decoder's engine (4 rows or more: activations quantized per row
// in its int8 x int8 GEMM) — while the patch projection, CLS token, positions, norms and
// biases stay f32. m must be a whole ViT created with dt f32; a forward with want_grad is
// refused while it is on; the f32 masters are kept. kind OT_QW_F32 turns it off.
ot_status ot_model_set_weights_q(ot_model *m, ot_qw_kind kind, int group);
// Calibrated int8 post-training quantization (AWQ-style; src/model/quant_calib.c):
// runs m's forward (the one graph; m created with dt f32, recompute none, run B x T)
// on the calibration tokens [batches, B, T], keeps each linear layer's input rows
// (at most max_rows per layer, evenly strided; mean |x| per channel over all rows)
// and searches each matrix with ot_qsearch: per-input-channel scales where they fold
// into the op before it (QKV: norm1's gain / bias, pre-norm; output projection: the
// V rows of QKV and their bias, when Hq = Hkv; MLP input: norm2's gain / bias,
// pre-norm; MLP down projection: the up rows under SwiGLU), a clip ratio per output
// row everywhere (the GELU down projection and the head: clipping only), scored by the
// weight-only output error plus, for groups other than 32, that of the int8-activation
// GEMM the engine's prefill runs (ot_qsearch_opts.act_int8). The folded
// model is quantized with the chosen clips: the file has the format of
// ot_qmodel_from_model and runs on the same engine. m's weights are not changed.
typedef struct {
  int group;               // int8 scale group: 0 (per row), 32, 64, 128
  int max_rows;            // calibration rows kept per layer (0: 512)
  ot_qsearch_opts search;  // all 0: {20, 10, 0.02}: alpha step 0.05, clips 1 .. 0.8; act_int8
                           // is set for groups other than 32 (the prefill GEMM's int8 activations)
  bool no_scale;           // clipping only (no per-channel scales anywhere)
} ot_qcalib_config;

typedef struct {
  int matrices;            // matrices searched
  int scaled;              // ... of which with per-channel scales (alpha > 0)
  double err_plain, err;   // summed output errors (ot_qsearch_result) over them
  double rel_plain, rel;   // mean over them of sqrt(err / ||x W^T||^2) (relative output error)
  int rows;                // calibration rows per layer kept
} ot_qcalib_report;

ot_status ot_qmodel_calibrate(ot_qmodel **out, ot_model *m, const int32_t *tokens, int batches,
                              const ot_qcalib_config *cfg, ot_qcalib_report *rep);
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
