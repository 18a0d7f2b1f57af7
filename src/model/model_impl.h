// Private interface of the model layer (src/model/*.c): the model object, the
// per-layer parameter/activation pointer sets, and helpers shared by the files.
#ifndef OT_MODEL_IMPL_H
#define OT_MODEL_IMPL_H

#include "model/graph.h"
#include <string.h>

// Indices into the parameter table for one block (-1: absent).
typedef struct {
  int ln1_w, ln1_b, qkv_w, qkv_b, o_w, o_b, ln2_w, ln2_b, fc_w, fc_b, proj_w, proj_b;
  int lnc_w, lnc_b, cqkv_w, cqkv_b, co_w, co_b;   // cross-attention (q, k, v rows fused)
} ot__layer_params;

// A stack of blocks as the backward walks it: the decoder (or decoder-only model)
// or the encoder of an encoder-decoder.
typedef struct {
  const ot__graph *g;
  ot__layer_acts *la;          // [L] saved activations
  const ot__layer_params *lp;  // [L]
  const int32_t *kv_len;       // self-attention key lengths (encoder: source lengths), or NULL
  const void *enc;             // decoder of an encoder-decoder: encoder output [B*S, C]
  void *denc;                  // its gradient [B*S, C] (+=)
  int S;
  const int32_t *src_len;      // [B]
  const ot__dropout *drop;     // the dropout of the forward being differentiated, or NULL
} ot__stack;


// Where parameter i of a part lives in the whole tensor of the same name:
// nseg row ranges (cols = false) or one column range (cols = true), whole[g0,
// g0 + n) <-> local[l0, l0 + n); whole = true: the tensor is held entirely.
typedef struct {
  int gidx;                  // index of the tensor in the whole model's table (init seeds)
  bool whole, cols;
  int nseg;
  int64_t g0[3], l0[3], n[3];
  int64_t shape[2];          // the whole tensor's shape
} ot__slice;

// The saved model-level buffers of one micro-batch slot.
typedef struct {
  ot__layer_acts *la;        // [L] this slot's block activations
  int32_t *tokens;
  void *resf;                // [N, C] stage output (not last) / final norm input (last)
  float *meanf, *rstdf;
  void *yf, *logits;         // last stage only
  float *row_loss;
  int B, T;
  bool have_grad_state;
  ot__dropout drop;          // the dropout of this slot's last forward
  // encoder-decoder: the encoder's saved buffers and the batch copies (see ot_model)
  ot__layer_acts *ela;
  int32_t *src, *src_len, *tgt;
  void *enc_res, *enc_out, *eemb, *demb;
  float *emean, *erstd, *eemean, *eerstd, *demean, *derstd;
  int S;
  ot__dropout edrop;
  // vision transformer (first stage): the unfolded patches, the image size, interpolation
  void *vcols;
  int vH, vW;
  bool vinterp;
} ot__slot;

struct ot_model {
  ot_model_config cfg;
  ot_run_config run;
  ot_mem_plan plan;
  ot_model_part part;
  bool first, last;          // this part holds the embedding / the head
  int C, L, Hq, Hkv, D, F, Fa, V, Vp, QKV;   // local: L = blocks held, Hq, Hkv, F, Fa, QKV of
                                             // this tp rank; V, Vp: the whole vocabulary
  int Vl, v0;                // embedding / head rows held (Vp, or Vp/tp rounded up) from row v0
  ot__slice *slices;         // [n_params]
  ot__slot *slots;           // [part.slots]
  ot__layer_acts *la_all;    // [slots * L]
  ot__layer_acts *ela_all;   // [slots * Le]
  // parameter layout
  ot_param *params;
  int n_params;
  ot_hf_tensor *hf;
  int n_hf;
  ot__layer_params *lp;       // [L]
  int wte, wpe, lnf_w, lnf_b, lm_head;   // -1 if absent
  size_t n_floats;
  // storage
  ot_arena a_params, a_grads, a_act, a_ws;
  float *w;                   // master weights [n_floats] (param_slots: the storage [n_stored])
  uint16_t *wb;               // 16-bit copy in run.dt (bf16 or f16) or NULL (indices of w)
  ot_qmodel *qm;              // quantized inference (ot_model_set_weights_q): the block
                              // matrices and the head read from it; NULL: off
  float *qtok;                // [run.B * run.T, QKV] its QKV projection's token-major output
  float *wq;                  // quantization-aware training (qat.c): [n_stored] the masters
                              // with every quantized matrix fake-quantized to int8, or NULL
  int qat_group;              // its scale group (0: per row); -1: off
  size_t *wpos;               // [n_params] index of each parameter in w / wb (= its offset
                              // unless param_slots)
  size_t n_stored;            // floats of w
  size_t *sbr;                // [2 * (Le + L)] layout range [sbr[2l], sbr[2l + 1]) of local block l
                              // (encoder blocks first; slots.c)
  size_t sblk;                // the largest block's floats (param_slots: the slot size)
  float *g;                   // gradients [n_floats] (NULL with external_grads)
  float **gp;                 // [n_params] where each parameter's gradient accumulates
  // activations (saved)
  ot__layer_acts *la;         // [L]
  int32_t *tokens;            // [N] copy of the last forward's tokens
  void *resf;                 // [N, C] final residual = norm_f input
  float *meanf, *rstdf;       // [N]
  void *yf;                   // [N, C] norm_f output
  void *logits;               // [N, Vp]
  float *row_loss;            // [N]
  // workspace
  ot__layer_acts shared;      // the non-saved buffers of one block
  void *abuf;                 // [N, C] projection outputs before the residual add
  void *ohead;                // [B, Hq, T, D] attention output, head-major
  void *dres, *dy, *datty, *dohead, *dq, *dk, *dv, *dh, *dfc;
  float *rope;                // [max_seq, D] or NULL
  float *xred;                // [3 N] vocab-parallel cross-entropy reductions (last stage)
  // the graph the forward runs on (weights.c): dense views of the buffers above
  ot__graph graph;
  ot__block_w *blkw;          // [L]
  // encoder-decoder (cfg.arch = encdec; one slot). A pipeline stage holds blocks
  // [layer0, layer1) of the combined stack: encoder blocks [0, n_enc_layers), then the
  // decoder's; e0 / d0 are the global indices of its first encoder / decoder block.
  int Le;                     // encoder blocks held
  int e0, d0;
  bool enc_last;              // holds the last encoder block (computes the encoder output)
  bool dec_first;             // holds decoder block 0 (the decoder's embedding)
  ot__layer_params *elp;      // [Le]
  ot__layer_acts *ela;        // [Le] saved encoder activations (non-saved fields: m->shared)
                              // of the current slot (this and the buffers below to S)
  ot__graph egraph;           // the encoder (bidirectional, no cross-attention)
  ot__block_w *eblkw;         // [Le]
  int elnf_w, elnf_b, lbias;  // final encoder norm (pre-norm), logits bias; -1 if absent
  int32_t *src, *src_len, *tgt;   // [B*S], [B], [B*T] copies of the last batch
  void *enc_res;              // [B*S, C] pre-norm: final encoder norm input
  float *emean, *erstd;       // [B*S]
  void *enc_out;              // [B*S, C] encoder output
  void *denc;                 // [B*S, C] its gradient (workspace)
  void *ctok;                 // [B*S, Hkv*D] cross K/V token-major scratch
  void *ctmp;                 // [B*S, C] cross K/V backward scratch
  float *pos_tab;             // [max_seq, C] sinusoid table (f32)
  int epos, dpos;             // learned position tables of encoder / decoder; -1 if absent
  int elne_w, elne_b, dlne_w, dlne_b;   // embedding norms (embed_norm); -1 if absent
  void *eemb, *demb;          // [B*S | B*T, C] embedding outputs = embedding norm inputs
  float *eemean, *eerstd, *demean, *derstd;   // their norm statistics
  int S;                      // source length of the last forward
  // dropout (dropout.c): the stream of the next forwards, and the current slot's
  // forward's decoder (ddrop) / the encoder-decoder's encoder (edrop) dropout
  uint64_t drop_seed, drop_counter;
  ot__dropout ddrop, edrop;
  // state of the last forward (mirrors the current slot)
  int B, T;
  bool have_grad_state;
  bool infer_only;            // loaded by ot_model_load_hf_infer: no gradients, backward refused
  int cur;                    // slot the pointers above refer to
  // label smoothing of the loss (ot_model_set_label_smoothing; 0: plain cross-entropy)
  float ls_eps;
  float loss_scale;           // the backward's seed times this (fp16 loss scaling); 0 or 1: none
  double nll;                 // plain NLL (sum / count) of the last forward with targets
  // vision transformer (cfg.arch = vit; the embedding's tensors on the first stage, -1 elsewhere)
  int vpatch_w, vpatch_b, vcls;   // patch projection [C, Cin*P*P] and bias, CLS token [1, C]
  void *vcols;                // [B*Np, Cin*P*P] unfolded patches of the slot's forward (saved)
  float *vpos;                // [run.T, C] the positions of the last forward (interpolated)
  float *vdpos;               // [run.T, C] their gradient (backward workspace)
  int vH, vW;                 // image size of the last forward
  bool vinterp;               // its positions were interpolated
};

// Dropout of the coming forward (dropout.c): m->ddrop and m->edrop from the config and
// the stream when want_grad, else off; OT_EINVAL when a site outgrows its counter range.
ot_status ot__dropout_begin(ot_model *m, bool want_grad, int B, int T, int S,
                            const int64_t *sample, int64_t sample0, const char *fn);
// Points la / tokens / resf / ... at slot s's buffers (and saves the current slot's state).
void ot__select_slot(ot_model *m, int s);

// Parameter table construction (layout.c): fills params, hf, lp and n_floats
// into m (malloc'd tables, freed by ot__layout_free).
ot_status ot__layout_build(ot_model *m);
void ot__layout_free(ot_model *m);

// Model dimensions of config c, run r and partition p (all validated) into m (layout.c).
void ot__set_dims(ot_model *m, const ot_model_config *c, const ot_run_config *r,
                  const ot_model_part *p);
// Slices of every parameter (part.c), after the layout is built.
ot_status ot__slices_build(ot_model *m);
// Where each parameter is stored (slots.c): wpos, n_stored; the ZeRO-3 slots.
ot_status ot__slots_build(ot_model *m);
// ZeRO-3 parts: the need_rows hook and its buffers are set (a model with buffers needs them).
ot_status ot__slots_check_hooks(const ot_model *m);
// ZeRO-3 (slots.c): the embedding lookup out [B*T, C] and the head's GEMMs (forward:
// logits = yf W^T; backward: dx = dlogits W) over vocabulary parameter i read a chunk
// of rows at a time (comm.need_rows).
ot_status ot__z3_embed_fwd(ot_model *m, void *out, const int32_t *tokens, int B, int T);
// Rows [r0, r0 + rows) of vocabulary parameter i [Vl, C], gathered (comm.need_rows) and read
// as the unchunked path reads them: f32, or the 16-bit copy where the part keeps one (*wdt).
const void *ot__z3_rows(const ot_model *m, int i, int r0, int rows, ot_dtype *wdt);
ot_status ot__z3_head(ot_model *m, int i, int N, bool backward, void *dx);
// Copies between whole tensor `s` (whole) and local parameter p (local) (part.c).
void ot__slice_copy(const ot__slice *s, const ot_param *p, float *local, float *whole, bool to_whole);
// The model's graph over its buffers (weights.c), after the layout and the buffers.
ot_status ot__graph_build(ot_model *m);
// Backward of block l of the current slot (block.c): m->dres holds the gradient of
// the block output on entry and of its input on exit; parameter gradients accumulate.
ot_status ot__block_bwd(ot_model *m, const ot__stack *st, int l, int B, int T);
// Forward of the current slot's pre-norm self-attention blocks over la[0].res (B rows of
// T); the last block's output pair (x + r) left in io->x, io->r (forward.c).
ot_status ot__stack_fwd(ot_model *m, int B, int T, ot__block_io *io);
// The decoder-only stack of the current slot.
ot__stack ot__stack_decoder(ot_model *m);
// MLP activation h = act(pre) for RELU / GELU_ERF / SWIGLU / GELU (encdec_ops.c, block.c),
// and its backward in place (dh -> dpre, RELU / GELU_ERF).
ot_status ot__act_fwd(ot_mlp_kind k, ot_dtype dt, void *y, const void *x, size_t n);
ot_status ot__act_bwd(ot_mlp_kind k, ot_dtype dt, void *dx, const void *x, const void *dy, size_t n);
// Scalar reference of ReLU (f32; the erf GELU's is ot_ref_gelu_erf_fwd in ot/ops.h).
void ot_ref_relu_fwd(float *y, const float *x, size_t n);
// y += x, n elements of dt.
void ot__add_into(ot_dtype dt, void *y, const void *x, size_t n);
// y = a + b, n elements of dt (element-wise, static partition; forward.c).
void ot__add_pair(ot_dtype dt, void *y, const void *a, const void *b, size_t n);
const char *ot__mlp_name(ot_mlp_kind k);
// Encoder-decoder config checks (encdec.c); n: the model's name for messages.
ot_status ot__encdec_validate(const ot_model_config *c, const char *n);
// Vision transformer config checks and backward (vit.c).
ot_status ot__vit_validate(const ot_model_config *c, const char *n);
ot_status ot__vit_backward(ot_model *m);
// ViTForImageClassification directory: config.json + model.safetensors (vit_hf.c).
ot_status ot__vit_save_hf(const ot_model *m, const char *dir);
// Encoder-decoder backward (encdec.c), after ot_model_backward's checks.
ot_status ot__s2s_backward(ot_model *m);
// The head of the last stage (forward.c): logits = yf W^T (+ logits bias) and, with
// targets, the loss; its backward: weight gradients and dx [N, C] = dlogits W.
ot_status ot__head_fwd(ot_model *m, const int32_t *targets, int N, float count, bool want_grad,
                       double *loss);
ot_status ot__head_bwd(ot_model *m, int N, void *dx);
// The sinusoid table [Tmax, C] (Marian layout) in f32.
void ot__sinusoid_table(float *tab, int Tmax, int C);
// Gradient of a norm (block.c): dx = norm backward of dy (+ dres), gain gi / beta bi
// gradients accumulated into their bound storage.
ot_status ot__norm_bwd(const ot_model *m, void *dx, int gi, int bi, const void *dy,
                       const void *dres, const void *res, const float *mean, const float *rstd,
                       int N);
// Sum of buf [n] over the graph's tensor group (no-op on one rank).
static inline ot_status ot__tp_sum(const ot__graph *g, void *buf, size_t n) {
  return g->tp_sum ? g->tp_sum(g->tp_ctx, buf, n, g->dt) : OT_OK;
}
// The partition's data-parallel hook: every gradient at offsets >= from is final.
static inline void ot__grads_ready(const ot_model *m, size_t from) {
  if (m->part.comm.grads_ready) m->part.comm.grads_ready(m->part.comm.ctx, from);
}
// Vocabulary-parallel embedding and cross-entropy (vocab_par.c).
ot_status ot__vp_embed_fwd(ot_model *m, void *out, const int32_t *tokens, int B, int T);
void ot__vp_embed_bwd(ot_model *m, const void *dout, const int32_t *tokens, int B, int T);
// Embedding gradient rows [r0, r0 + rows) of the local vocabulary into dwte [rows, C] (+=,
// NULL: skip) and dwpe [T, C] (+=, NULL: skip) from dout [B*T, C] (vocab_par.c).
void ot__embed_bwd_rows(ot_model *m, float *dwte, int r0, int rows, float *dwpe, const void *dout,
                        const int32_t *tokens, int B, int T);
// One tensor rank's share of the vocabulary for the vocab-parallel cross-entropy.
typedef struct {
  ot_dtype dt;            // the logits' storage
  int V, Vl, v0, ignore;  // whole vocabulary, local rows [v0, v0 + Vl), ignore_index
  const ot_model_comm *comm;   // allreduce over the tensor group
} ot__vp_shard;
ot__vp_shard ot__vp_shard_of(const ot_model *m);
// Vocab-parallel (label-smoothed, eps in [0, 1)) cross-entropy over logits [N, Vl]: see
// vocab_par.c. red: [4N] f32 workspace (the plan's xred).
ot_status ot__vp_xent(const ot__vp_shard *v, void *logits, const int32_t *targets, int N,
                      float count, float eps, float *row_loss, double *nll_sum, bool want_grad,
                      float *red);
// True when m holds the whole model (no tensor or pipeline split).
static inline bool ot__is_whole(const ot_model *m) {
  return m->part.tp == 1 && m->first && m->last && !m->part.param_slots;
}
// ZeRO-3 parts: block l (local) is about to run (comm.need_block).
static inline void ot__need_block(const ot_model *m, int l, bool backward) {
  if (m->part.comm.need_block) m->part.comm.need_block(m->part.comm.ctx, l, backward);
}

// Parameters a quantized model stores quantized: matrices (linear weights, token
// embedding, untied head); learned positions, norms and biases stay f32 (quant_model.c).
bool ot__param_quantized(const ot_param *p);
// ot_qmodel_from_model over the weights w [n_floats] (the model's layout) instead of the
// model's own, with per-row clip ratios clip[i] [rows] for quantized parameter i
// (clip or clip[i] NULL: none; int8 only).
ot_status ot__qmodel_build(ot_qmodel **out, const ot_model *m, ot_qw_kind kind, int group, const float *w,
                           float *const *clip);

// Pointers to a parameter in the master (f32), weights-as-used (dt) or grads buffer.
static inline float *ot__pw(const ot_model *m, int i) { return i < 0 ? NULL : m->w + m->wpos[i]; }
static inline float *ot__pg(const ot_model *m, int i) { return i < 0 ? NULL : m->gp[i]; }
// The dtype ot__pdt's weights are in: the bf16 copy where the model keeps one
// (bf16 runs with native bf16 GEMMs), else the f32 masters (f32 runs, and bf16
// runs whose GEMMs convert: they read the masters in place).
// Quantization-aware training reads the fake-quantized copy (f32 runs only).
static inline ot_dtype ot__wdt(const ot_model *m) { return m->wb ? m->run.dt : OT_F32; }
static inline const void *ot__pdt(const ot_model *m, int i) {
  if (i < 0) return NULL;
  if (m->wq) return m->wq + m->wpos[i];
  return m->wb ? (const void *)(m->wb + m->wpos[i]) : (const void *)(m->w + m->wpos[i]);
}
// Rebuilds the graph's weight views (weights.c; after the weights' storage changes).
ot_status ot__graph_rebuild(ot_model *m);

// bf16 <-> f32 inline (round to nearest even; NaN stays a quiet NaN), and element i of an
// f32 or bf16 buffer: the element-wise loops of the model layer (forward.c, encdec.c,
// s2s_graph.c) use these, so they round exactly as ot_f32_to_bf16 does.
static inline float ot__bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t ot__f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
// f16 (fp16 mixed precision) through core's conversions (round to nearest even).
static inline float ot__ldf(ot_dtype dt, const void *p, size_t i) {
  return dt == OT_F32   ? ((const float *)p)[i]
         : dt == OT_F16 ? ot_f16_to_f32(((const uint16_t *)p)[i])
                        : ot__bf2f(((const uint16_t *)p)[i]);
}
static inline void ot__stf(ot_dtype dt, void *p, size_t i, float v) {
  if (dt == OT_F32) ((float *)p)[i] = v;
  else if (dt == OT_F16) ((uint16_t *)p)[i] = ot_f32_to_f16(v);
  else ((uint16_t *)p)[i] = ot__f2bf(v);
}

#endif
