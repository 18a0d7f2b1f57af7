// The model graph as every forward pass reads it: the architecture of the
// blocks, their weights through one interface (dense f32/bf16 matrices of a
// model's buffers, or quantized ones of an ot_qmodel), and the ONE block
// forward that training, KV-cache decoding and the batched serving engine
// share. What differs between those callers is passed in:
//  - where keys and values come from and go (ot__kvsrc): the current sequence
//    (training, scoring), a contiguous cache (src/infer/kvcache.c) or the paged
//    block pool (src/infer/engine_fwd.c);
//  - how a weight is read (ot__wref): dense in the activation dtype, through
//    ot_linear_fwd / ot_qkv_fwd, or quantized (f32 / bf16 / int8 per row or per
//    group) through ot_qlinear_fwd with f32 activations;
//  - where the block's tensors go (ot__layer_acts): saved per layer for the
//    backward, or one shared set of buffers.
// The backward of a block (training only) is ot__block_bwd in src/model/block.c.
//
// A block (pre-norm), on the residual stream x [N = B*T, C]:
//   res  = x_in (+ r_in)             materialized by the first norm
//   res2 = res + attn(norm1(res))    (the add fused into norm2)
//   out  = res2 + mlp(norm2(res2))   left as the pair (res2, abuf): the next
//                                    block's norm1 (or the final norm) adds it
#ifndef OT_MODEL_GRAPH_H
#define OT_MODEL_GRAPH_H
#include "internal.h"
#include "ot/attn.h"
#include "ot/model.h"
#include "ot/quant.h"

// ---------------------------------------------------------------- weights ---
// One matrix [out, in] as a forward reads it: exactly one of the two is set.
typedef struct {
  const void *dense;        // in the graph's activation dtype (f32, or the bf16 copy), or f32
  const ot_qweight *q;      // quantized storage; activations f32
  bool w32;                 // dense holds f32 master weights under bf16 activations (no bf16
                            // copy: CPUs without a native bf16 GEMM)
} ot__wref;

// y [N, out] = act(x [N, in] W^T + b), b [out] f32 or NULL. Dense: ot_linear_fwd
// (pre [N, out], when non-NULL, keeps x W^T + b for the backward); quantized:
// ot_qlinear_fwd, then the activation in place (dt must be f32; pre unused).
ot_status ot__wlinear(ot_dtype dt, void *y, void *pre, const void *x, const ot__wref *w,
                      const float *b, int N, int out, int in, ot_act act);

// The weights of one block (biases and norm gains f32; NULL: absent).
typedef struct {
  ot__wref qkv, o, fc, proj;   // [QKV, C], [C, Hq*D], [Fa, C], [C, F]
  const float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *qkv_b, *o_b, *fc_b, *proj_b;
  // cross-attention (decoder blocks of an encoder-decoder graph; else all NULL):
  // q [Hq*D, C], k, v [Hkv*D, C], o [C, Hq*D], its norm
  ot__wref cq, ck, cv, co;
  const float *lnc_w, *lnc_b, *cq_b, *ck_b, *cv_b, *co_b;
} ot__block_w;

// ----------------------------------------------------------- architecture ---
typedef struct {
  int C, Hq, Hkv, D, F, Fa;  // this process's heads and MLP width (tensor parallel: local)
  ot_norm_kind norm;
  ot_mlp_kind mlp;
  bool causal;               // self-attention masks later keys (decoder) or not (encoder)
  float eps;                 // norm epsilon
  const float *rope;         // [rope_len, D] RoPE table, NULL: no RoPE
  int rope_len;
  ot_rope_style rope_style;
  bool post;                 // post-norm: x = norm(x + f(x)) per sublayer (else pre-norm)
  bool cross;                // cross-attention over the encoder output after self-attention
} ot__arch;

typedef struct {
  ot__arch a;
  ot_dtype dt;               // activation storage: f32, or bf16 (dense weights only)
  int L;                     // blocks
  const ot__block_w *blk;    // [L]
  // embedding, final norm, head
  ot__wref wte;              // [Vp | Vl, C] token embedding
  const void *wpe;           // [max_seq, C] learned positions (dt), NULL: none
  int V;                     // token ids in [0, V)
  const float *lnf_w, *lnf_b;
  ot__wref head;             // [head_rows, C] output projection (the embedding when tied)
  int head_rows;             // logits per row
  // tensor parallelism: row-parallel outputs summed over the tensor group
  // (NULL: one rank); the row-parallel biases are added by the lead rank only
  ot_status (*tp_sum)(void *ctx, void *buf, size_t n, ot_dtype dt);
  void *tp_ctx;
  bool tp_lead;
} ot__graph;

// ------------------------------------------------------------ activations ---
// The tensors of one block. `res` is the block input (the residual stream);
// the caller points each field at a saved per-layer buffer or a shared one.
// A NULL `pre` with GELU keeps no pre-activation; a NULL `atty` with T = 1
// lets the output projection read the head-major attention output directly.
typedef struct {
  void *res;               // [N, C] block input = norm1 input
  float *mean1, *rstd1;    // [N] (mean: LayerNorm only)
  void *y1;                // [N, C] norm1 output
  void *q, *k, *v;         // [B, Hq|Hkv, T, D] after RoPE
  void *atty;              // [N, Hq*D] attention output, token-major (o_proj input)
  float *lse;              // [B, Hq, T] or NULL (not kept)
  void *res2;              // [N, C] = res + o_proj output = norm2 input
  float *mean2, *rstd2;    // [N]
  void *y2;                // [N, C] norm2 output
  void *pre;               // [N, Fa] fc output (GELU: pre-activation; SwiGLU: [gate | up])
  void *h;                 // [N, F] activation output (down projection input)
  // cross-attention (decoder blocks of an encoder-decoder graph)
  void *yc;                // [N, C] its norm's output (pre-norm: the sublayer input; post-norm:
                           // the MLP input)
  void *resc;              // [N, C] its norm's input (pre: res + self-attn; post: y1 + cross-attn)
  float *meanc, *rstdc;    // [N]
  void *qc;                // [B, Hq, T, D] cross queries
  void *attyc;             // [N, Hq*D] cross-attention output, token-major
  float *lsec;             // [B, Hq, T]
  void *kc, *vc;           // [B, Hkv, S, D] cross keys / values (the encoder output projected)
} ot__layer_acts;
// Post-norm blocks (a.post) use the fields as: res = block input u0 = self-attention
// input; res2 = u0 + attn = norm1 input, y1 = norm1 output u1; (cross) resc = u1 +
// cross-attn, yc = its norm's output u2; y2 = u + mlp(u) = norm2 input (u: the MLP
// input, yc or y1); the block output norm2(y2) goes to io->out.

// ---------------------------------------------------------------- dropout ---
// The dropout of one training forward over one stack (NULL or all p = 0: off, the
// exact no-dropout path). Site (l, s) of the stack uses the counters from
// off = ot__drop_offset(d, l, s) of stream `key` (the step's: the same on every rank
// and micro-batch): disjoint ranges of 2^46 per site, so no two sites share a mask.
// Inside a site an element's counter depends only on what it is in the one-process
// step, never on the layout: sample r (its index in the step's global batch: sample[b]
// or sample0 + b), position t, channel c at fixed strides P (positions) and C (or Fg:
// the MLP's global width, a tensor rank's columns from f0), attention probabilities
// at (r, global head h0 + h, query, key) with strides Hg*P*P, P*P, P (dropout.c).
typedef struct {
  float resid, attn, act;   // embedding + sublayer outputs, attention probabilities, MLP activation
  uint64_t key;             // Philox stream of this step
  int stack;                // 0: the decoder (or a decoder-only model), 1: the encoder
  int layer0;               // global index of block 0 (pipeline stages)
  // stochastic depth (drop-path, ViT): block l (global index) drops each sample's
  // self-attention and MLP outputs with probability path * l / (path_layers - 1)
  float path;
  int path_layers;
  int B, T;                 // this forward's rows and positions (of this stack)
  int P;                    // position stride of the counters (>= every T of the model)
  int C, F, Fg, f0;         // model width; MLP width here, in all, this rank's first column
  int Hg, h0;               // query heads in all, this rank's first head
  const int64_t *sample;    // [B] each row's index in the step's global batch (NULL: sample0 + b;
                            // the caller's array, read again by the forward's backward)
  int64_t sample0;
} ot__dropout;
enum {
  OT__DROP_EMBED = 0,       // the stack's embedding output (l = 0)
  OT__DROP_ATTN_OUT,        // self-attention output projection, before the residual add
  OT__DROP_CROSS_OUT,       // cross-attention output projection
  OT__DROP_MLP_OUT,         // MLP output projection
  OT__DROP_ATTN_P,          // self-attention probabilities (flash kernels)
  OT__DROP_CROSS_P,         // cross-attention probabilities
  OT__DROP_ACT,             // MLP activation output
  OT__DROP_PATH             // drop-path masks, one counter per sample (self-attention
                            // output; the MLP output's at + 2^45)
};
#define OT__DROP_SITE_BITS 46   // counters per site: 2^46
// First counter of site s of block l (dropout.c).
uint64_t ot__drop_offset(const ot__dropout *d, int l, int site);
// Sets the attention dropout of site s of block l on a flash shape (no-op when off).
void ot__drop_attn(const ot__dropout *d, ot_attn_shape *s, int l, int site);
// In place on x [n] (dt; n = B * T * C, or B * T * F at the activation site): forward
// (x = mask(x) * scale) or backward (the same on a gradient) of site s of block l with
// probability p; no-op when d is NULL or p = 0.
// At the self-attention and MLP output sites drop-path (d->path) masks whole samples too.
ot_status ot__drop_fwd(const ot__dropout *d, float p, ot_dtype dt, void *x, size_t n, int l,
                       int site);
// dx [n] = the backward of that site on dy [n] (dx may alias dy).
ot_status ot__drop_bwd(const ot__dropout *d, float p, ot_dtype dt, void *dx, const void *dy,
                       size_t n, int l, int site);
// True when the site's probability p is on under d.
static inline bool ot__drop_on(const ot__dropout *d, float p) { return d && p > 0.0f; }
// True when drop-path is on under d (the sublayer outputs are masked per sample).
static inline bool ot__drop_path_on(const ot__dropout *d) { return d && d->path > 0.0f; }

// ------------------------------------------------------------ keys/values ---
typedef struct ot__kvsrc ot__kvsrc;
struct ot__kvsrc {
  // Attention of block l for the step's new rows (after RoPE): q [B,Hq,T,D],
  // k, v [B,Hkv,T,D] (dt) -> o [B,Hq,T,D] (dt), lse [B,Hq,T] f32 when non-NULL.
  // The source also keeps k and v where its later steps read them (a cache,
  // the block pool), or nowhere (the current sequence).
  ot_status (*attend)(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                      const void *q, const void *k, const void *v, int B, int T);
  // Cross-attention of decoder block l (encoder-decoder graphs; NULL otherwise):
  // q [B,Hq,T,D] (dt) over the block's cross keys / values -> o [B,Hq,T,D], lse
  // [B,Hq,T] when non-NULL. The cross K/V of a block are the encoder output [B*S, C]
  // projected by the block's ck / cv weights (ot__cross_kv_fwd), masked by the source
  // lengths, never causal. They depend only on the source sentence: the training
  // source computes them in every forward (and keeps them for the backward); a decoder
  // cache computes them once per sentence (first step) and hands the same K/V to
  // every later step, so an incremental decode never reprojects the encoder output.
  ot_status (*cross)(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                     const void *q, int B, int T);
};

// The current sequence: flash attention of the rows over themselves, causal
// as the architecture says; kv_len [B] (NULL: none) masks keys j >= kv_len[b].
typedef struct {
  ot__kvsrc base;
  const int32_t *kv_len;
  const ot__dropout *drop;   // attention-probability dropout (training), NULL: off
} ot__kv_self;
ot__kv_self ot__kv_self_make(const int32_t *kv_len);
// The shape the current-sequence source gives the flash kernels (forward and backward).
ot_attn_shape ot__self_shape(const ot__graph *g, int B, int T, const int32_t *kv_len);

// The training source of an encoder-decoder's decoder: self-attention over the
// current sequence (causal, no mask), cross-attention over enc [B*S, C] (dt),
// masked by src_len [B]; block l's cross K/V are projected into la[l].kc / vc
// (tok: [B*S, Hkv*D] scratch of dt).
typedef struct {
  ot__kv_self self;
  const void *enc;
  int S;
  const int32_t *src_len;
  ot__layer_acts *la;
  void *tok;
} ot__kv_s2s;
ot__kv_s2s ot__kv_s2s_make(const void *enc, int S, const int32_t *src_len, ot__layer_acts *la,
                           void *tok);
// Block l's cross K/V: kc, vc [B, Hkv, S, D] (dt) = enc [B*S, C] through ck / cv (+ biases);
// tok [B*S, Hkv*D] scratch (dt).
ot_status ot__cross_kv_fwd(const ot__graph *g, int l, void *kc, void *vc, void *tok,
                           const void *enc, int B, int S);
// The shape of cross-attention: T queries over S keys masked by src_len, not causal.
ot_attn_shape ot__cross_shape(const ot__graph *g, int B, int T, int S, const int32_t *src_len);

// ------------------------------------------------------------------ block ---
typedef struct {
  int B, T;                  // B sequences of T new tokens each (token-major rows)
  const void *x, *r;         // the block input is x + r (r may be NULL), [N, C]
  ot__layer_acts *A;         // where the block's tensors go (A->res receives x + r)
  void *abuf;                // [N, C] projection output (on return: the MLP's)
  void *ohead;               // [B, Hq, T, D] attention output, head-major
  void *qkv_tok;             // [N, QKV] f32 scratch for quantized QKV weights (else unused)
  int pos0;                  // RoPE: every sequence's first new token sits at pos0 ...
  const int32_t *pos;        // ... or sequence b's at pos[b] (non-NULL)
  ot__kvsrc *kv;
  void *out;                 // post-norm: [N, C] receives the block output (pre-norm: unused)
  const ot__dropout *drop;   // training dropout of this forward, NULL: off (inference)
} ot__block_io;

// Forward of block l. On return the block output is A->res2 + io->abuf (the
// next block's norm1 or the final norm adds it); with mlp = false it stops
// after the MLP activation A->h (a full recompute needs only the internals).
// Post-norm (g->a.post): the output is io->out = norm2(y2) (mlp must be true);
// cross-attention (g->a.cross) runs between self-attention and the MLP, through
// io->kv->cross.
ot_status ot__block_fwd(const ot__graph *g, int l, const ot__block_io *io, bool mlp);

// y = norm(x + r) with res_out = x + r (r, res_out may be NULL; res_out may
// equal x), gain g, beta b (NULL: none), over N rows of the graph's width.
ot_status ot__norm_fwd(const ot__graph *g, void *y, float *mean, float *rstd, void *res_out,
                       const void *x, const void *r, const float *gain, const float *beta, int N);
// Token + position embedding of B sequences of T tokens (ids checked by the
// caller) into x [B*T, C] (dt): sequence b's token t at position pos0 + t, or
// pos[b] + t when pos is non-NULL.
ot_status ot__embed_fwd(const ot__graph *g, void *x, const int32_t *tokens, int B, int T, int pos0,
                        const int32_t *pos);
// [B, T, H, D] <-> [B, H, T, D] (element size es); to_heads: token-major src ->
// head-major dst, else head-major src -> token-major dst.
void ot__transpose_heads(size_t es, void *dst, const void *src, int B, int T, int H, int D,
                         bool to_heads);

// ----------------------------------------------------------------- graphs ---
// The graph of a model over its own buffers (built by ot_model_create: dense
// weights in the run dtype, tensor-parallel hooks of its partition).
const ot__graph *ot__model_graph(const ot_model *m);

// The graph of a whole quantized model (f32 activations): every tensor found
// by the model's parameter names and checked for shape (matrices [out, in],
// vectors stored f32) against q->config; the head reads the first V rows.
// blk [n_layers] and rope [max_seq * head_dim] (RoPE models) are the caller's.
// pack: the f32 matrices the graph multiplies by (blocks, embedding, head; not the
// position table, read as rows) are packed in place for this CPU's linear kernel
// (ot_qweight_pack), which streams them once for all the rows of a decode step.
// OT_EINVAL names a missing or mis-shaped tensor.
ot_status ot__qmodel_graph(ot_qmodel *q, ot__graph *g, ot__block_w *blk, ot_qweight *head, float *rope,
                           bool pack);


// ------------------------------------------------- encoder-decoder graphs ---
// The embedding of one stack of an encoder-decoder as an incremental forward
// reads it (src/model/s2s_graph.c): x = scale * wte[tok] + position, then the
// embedding norm when ln_w is set.
typedef struct {
  float scale;               // sqrt(C) (scale_embedding) or 1
  const float *sin_tab;      // [max_seq, C] sinusoid table (f32), or NULL
  const void *lpos;          // learned positions [off + max_seq, C] (the graph's dt), or NULL
  int off;                   // learned positions: row of position 0
  const float *ln_w, *ln_b;  // embedding norm (mBART), NULL: none
} ot__s2s_emb;

// Both stacks of an encoder-decoder model: encoder and decoder graphs (the
// decoder's wte is the shared token table), their embeddings, the logits bias.
typedef struct {
  const ot__graph *enc, *dec;
  ot__s2s_emb eemb, demb;
  const float *head_b;       // [V] logits bias (Marian final_logits_bias), NULL: none
  int max_seq;               // positions [0, max_seq) exist
} ot__s2s_graph;

// The stacks of an encoder-decoder model over its own buffers (OT_EINVAL for a
// decoder-only model or a partition).
ot_status ot__model_s2s_graph(const ot_model *m, ot__s2s_graph *out);
// x [B*T, C] (dt of g) = the stack's embedding of tok [B, T] at positions
// pos0 + t (ids checked by the caller); with an embedding norm, tmp [B*T, C]
// holds the norm input and mean / rstd [B*T] its statistics.
ot_status ot__s2s_embed_fwd(const ot__graph *g, const ot__s2s_emb *e, void *x, void *tmp,
                            float *mean, float *rstd, const int32_t *tok, int B, int T, int pos0);
// Both stacks of a quantized encoder-decoder (f32 activations): enc / dec [1]
// graphs with eblk [n_enc_layers] / dblk [n_layers] block weights, the head a
// view of the V real rows, rows [HD, KD, KD] of each fused cross q/k/v weight
// as views in cviews [3 * n_layers] (owned by nobody); sin_tab [max_seq * C]
// the caller's (sinusoidal positions). OT_EINVAL names a missing tensor.
ot_status ot__qmodel_s2s_graph(const ot_qmodel *q, ot__s2s_graph *sg, ot__graph *enc,
                               ot__graph *dec, ot__block_w *eblk, ot__block_w *dblk,
                               ot_qweight *head, ot_qweight *cviews, float *sin_tab);

#endif
