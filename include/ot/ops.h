// ops-transformer operators: forward and backward of every Transformer op.
//
// Conventions for every function here:
//  - `dt` is the storage dtype of activations (OT_F32, OT_BF16 or OT_F16); arithmetic
//    and accumulation are f32. Parameters' gradients are always f32 and are
//    ACCUMULATED (+=) so that gradient accumulation needs no extra buffer;
//    activation gradients are OVERWRITTEN. Norm gains/biases are f32.
//  - Shapes are row-major and contiguous unless a leading dimension is given.
//  - Public functions validate arguments and return ot_status; the fast kernel
//    for the active ISA (ot_isa_active()) runs; `ot_ref_*` are plain scalar
//    f32 references used by the tests and never used on a hot path.
//  - Threads: OpenMP, static partitions, fixed reduction order, so the same
//    inputs and thread count give bitwise-identical outputs.
#ifndef OT_OPS_H
#define OT_OPS_H

#include "ot/core.h"

#ifdef __cplusplus
extern "C" {
#endif

// ------------------------------------------------------------------ GEMM ----
// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major with leading
// dimensions (elements). op(X) = X^T when trans. A/B dtype `ab` (f32 or bf16,
// both the same), C dtype `cdt` (f32, or bf16 with ab=bf16). beta is 0 or any
// value (applied via oneDNN's sum post-op). Primitives are cached per
// (shape, dtypes, transposes, leading dims, post-ops); first call per shape is slow.
ot_status ot_gemm(ot_dtype ab, ot_dtype cdt, bool transA, bool transB,
                  int M, int N, int K, float alpha,
                  const void *A, int lda, const void *B, int ldb,
                  float beta, void *C, int ldc);
// Number of cached GEMM primitives and a way to drop them (tests, memory).
int ot_gemm_cache_size(void);
// Every GEMM executed since the start (all threads): *flops = the sum of 2 M N K,
// *seconds = the wall time inside the matmul kernels (dtype conversions excluded).
void ot_gemm_stats(double *flops, double *seconds);
void ot_gemm_cache_clear(void);
// Whether bf16 x bf16 GEMMs run natively here (oneDNN's bf16 matmul: CPUs with
// avx512_bf16, or OT_GEMM_BF16=native); false: the conversion path, f32 GEMMs on
// tiles converted from bf16 in a bounded workspace (OT_GEMM_BF16=convert forces it).
bool ot_gemm_bf16_native(void);
// The most f32 workspace (bytes) the conversion path takes per calling thread, whatever
// the shape (one tile of each converted operand; this thread's scratch, not an arena).
size_t ot_gemm_convert_ws_max(void);
// The most packing workspace (bytes) the own blocked GEMM takes per calling thread for a
// GEMM with an f32 output, with this CPU's caches and the current thread count (this
// thread's scratch; a 16-bit output over a long contraction can take more).
size_t ot_gemm_own_ws_max(void);
// Whether a GEMM of `flops` (2 M N K) is measured at its first call to choose between the
// own GEMM and oneDNN: OT_GEMM=auto and at least 1 GFLOP (smaller ones always run oneDNN);
// never under OT_GEMM=own or onednn. The engine's choice and the planner's memory both ask it.
bool ot_gemm_may_measure(double flops);
// The GEMM scratch a GEMM of C [M, N] (cdt) over a contraction of K takes in this process,
// under OT_GEMM and the thread count as they are now (the layout planner counts it):
typedef struct {
  bool measured;      // ot_gemm_may_measure(2 M N K)
  bool may_own;       // it may run on the own GEMM: measured (the measurement runs it), or OT_GEMM=own
  size_t own_ws;      // the own GEMM's packing workspace (bytes) for the shape or its measured
                      // slice, whichever is larger (this thread's GEMM scratch block); 0: !may_own
  size_t choice_ws;   // the measurement's slice of C (at most 8 MiB), plus the conversion tiles
                      // when 16-bit operands are converted (`converting`), allocated and freed
                      // within the shape's first call; 0: not measured
} ot_gemm_scratch;
void ot_gemm_scratch_of(int M, int N, int K, ot_dtype cdt, bool converting, ot_gemm_scratch *out);
// Which GEMM runs (OT_GEMM: the own blocked GEMM, oneDNN, or chosen per shape) and the own
// GEMM's micro-tile and cache sizes, as one line into buf (n bytes; `ot info` prints it).
void ot_gemm_describe(char *buf, size_t n);

// ---------------------------------------------------------------- linear ----
typedef enum { OT_ACT_NONE = 0, OT_ACT_GELU = 1 } ot_act;

// x: [M, K] (dt), w: [N, K] (dt, PyTorch nn.Linear layout), b: [N] f32 or NULL
// -> y: [M, N] (dt) = act(x w^T + b). With act=GELU and pre != NULL, pre: [M, N]
// (dt) receives x w^T + b for the backward; pre == NULL fuses GELU into the GEMM
// epilogue (inference).
ot_status ot_linear_fwd(ot_dtype dt, void *y, void *pre, const void *x, const void *w,
                        const float *b, int M, int N, int K, ot_act act);
// dy: [M, N] (dt) gradient of y; with act=GELU it is OVERWRITTEN by the gradient
// of pre (needs pre). dx: [M, K] (dt) overwritten (NULL: skip), dw: [N, K] f32 +=,
// db: [N] f32 += (NULL: skip); dw may also be NULL (skip). x, w as in the forward.
ot_status ot_linear_bwd(ot_dtype dt, void *dx, float *dw, float *db, void *dy,
                        const void *pre, const void *x, const void *w,
                        int M, int N, int K, ot_act act);
// ot_linear_fwd / _bwd with the weights w in their own dtype wdt (dt, or f32: the
// f32 master weights of a bf16 run read in place, no bf16 copy needed; x, y, dy,
// dx stay dt). bf16 activations with f32 weights run the GEMMs' conversion path.
ot_status ot_linear_fwd_w(ot_dtype dt, ot_dtype wdt, void *y, void *pre, const void *x,
                          const void *w, const float *b, int M, int N, int K, ot_act act);
ot_status ot_linear_bwd_w(ot_dtype dt, ot_dtype wdt, void *dx, float *dw, float *db, void *dy,
                          const void *pre, const void *x, const void *w, int M, int N, int K,
                          ot_act act);
// Rows [n0, n0 + rows) of that weight gradient, overwritten (no activation):
// dw [rows, K] f32 = dy[:, n0:n0+rows]^T x, dy [M, N] and x [M, K] (dt). Lets a
// caller produce a large dw in chunks (ZeRO-2's vocabulary head).
ot_status ot_linear_dw_rows(ot_dtype dt, float *dw, const void *dy, const void *x, int M, int N,
                            int K, int n0, int rows);

// ------------------------------------------------------------ fused QKV -----
// One GEMM for the three projections, output laid out per head.
// x: [B, T, C] (dt); w: [(Hq + 2*Hkv) * D, C] (dt; rows = q heads, then k heads,
// then v heads, each head D rows); b: [(Hq + 2*Hkv) * D] f32 or NULL
// -> q: [B, Hq, T, D], k: [B, Hkv, T, D], v: [B, Hkv, T, D] (dt).
// Hkv divides Hq (grouped-query; Hkv == Hq is multi-head, 1 is multi-query).
ot_status ot_qkv_fwd(ot_dtype dt, void *q, void *k, void *v, const void *x, const void *w,
                     const float *b, int B, int T, int C, int Hq, int Hkv, int D);
// The scatter half alone: qkv [B*T, (Hq + 2*Hkv) * D] f32 token-major (rows as
// the GEMM above writes them) -> q, k, v in the per-head layouts above (dt).
ot_status ot_qkv_split(ot_dtype dt, void *q, void *k, void *v, const float *qkv, int B, int T,
                       int Hq, int Hkv, int D);
// dq/dk/dv in the per-head layouts above (dt) -> dx: [B, T, C] (dt, overwritten),
// dw f32 +=, db f32 += (NULL: skip).
ot_status ot_qkv_bwd(ot_dtype dt, void *dx, float *dw, float *db, const void *dq,
                     const void *dk, const void *dv, const void *x, const void *w,
                     int B, int T, int C, int Hq, int Hkv, int D);
// The same with w in wdt (dt or f32, as ot_linear_fwd_w).
ot_status ot_qkv_fwd_w(ot_dtype dt, ot_dtype wdt, void *q, void *k, void *v, const void *x,
                       const void *w, const float *b, int B, int T, int C, int Hq, int Hkv, int D);
ot_status ot_qkv_bwd_w(ot_dtype dt, ot_dtype wdt, void *dx, float *dw, float *db, const void *dq,
                       const void *dk, const void *dv, const void *x, const void *w,
                       int B, int T, int C, int Hq, int Hkv, int D);

// ------------------------------------------------------------- embedding ----
// tokens: [B*T] int32 in [0, V); wte: [V, C] (dt); wpe: [Tpos >= T, C] (dt) or
// NULL (no learned positions). Row i = b*T + t gets wte[tokens[i]] + wpe[t].
// -> out: [B*T, C] (dt). Out-of-range tokens: OT_EINVAL naming the index.
ot_status ot_embed_fwd(ot_dtype dt, void *out, const int32_t *tokens, const void *wte,
                       const void *wpe, int B, int T, int C, int V);
// The same with the tables wte, wpe in wdt (dt, or f32 with dt bf16: each row
// summed in f32 and rounded once).
ot_status ot_embed_fwd_w(ot_dtype dt, ot_dtype wdt, void *out, const int32_t *tokens,
                         const void *wte, const void *wpe, int B, int T, int C, int V);
// dout: [B*T, C] (dt) -> dwte: [V, C] f32 +=, dwpe: [T, C] f32 += (NULL: skip).
ot_status ot_embed_bwd(ot_dtype dt, float *dwte, float *dwpe, const void *dout,
                       const int32_t *tokens, int B, int T, int C, int V);

// ------------------------------------------------------- patch embedding ----
// ViT's patch embedding: a PxP convolution with stride P as one GEMM over the
// unfolded patches. Images img: [B, Cin, H, W] f32 (NCHW, PyTorch's
// pixel_values); Hp = H / P, Wp = W / P patches per column / row, the right and
// bottom remainders cropped (what nn.Conv2d(stride=P) does); H or W < P: OT_EINVAL.
// Patch rows in (b, i, j) order = Conv2d output .flatten(2).transpose(1, 2).
// img -> cols: [B*Hp*Wp, Cin*P*P] (dt), columns in (c, y, x) order.
ot_status ot_patch_unfold(ot_dtype dt, void *cols, const float *img, int B, int Cin, int H,
                          int W, int P);
// Its adjoint: dcols [B*Hp*Wp, Cin*P*P] (dt) -> dimg [B, Cin, H, W] f32, OVERWRITTEN
// (cropped pixels 0).
ot_status ot_patch_fold(ot_dtype dt, float *dimg, const void *dcols, int B, int Cin, int H, int W,
                        int P);
// out: [B*Hp*Wp, E] (dt) = unfold(img) w^T + b; w: [E, Cin*P*P] (dt: the Conv2d
// weight [E, Cin, P, P] flattened), b: [E] f32 or NULL; cols [B*Hp*Wp, Cin*P*P] (dt)
// receives the unfolded patches (the backward reads them).
ot_status ot_patch_embed_fwd(ot_dtype dt, void *out, void *cols, const float *img, const void *w,
                             const float *b, int B, int Cin, int H, int W, int P, int E);
// dout [B*Hp*Wp, E] (dt), cols as the forward left them -> dw [E, Cin*P*P] f32 +=,
// db [E] f32 += (NULL: skip), dimg [B, Cin, H, W] f32 overwritten (NULL: skip; else
// dcols [B*Hp*Wp, Cin*P*P] (dt) is its workspace and w the forward's weight).
ot_status ot_patch_embed_bwd(ot_dtype dt, float *dimg, void *dcols, float *dw, float *db,
                             const void *dout, const void *cols, const void *w, int B, int Cin,
                             int H, int W, int P, int E);

// ------------------------------------------------- residual + normalization --
// res = x + r (r may be NULL: res = x); y = (res - mean) * rstd * g + beta.
// x, r: [N, C] (dt); res_out: [N, C] (dt) receives res (may be NULL when r is
// NULL); g: [C] f32, beta: [C] f32 or NULL; mean, rstd: [N] f32 saved.
ot_status ot_layernorm_fwd(ot_dtype dt, void *y, float *mean, float *rstd, void *res_out,
                           const void *x, const void *r, const float *g, const float *beta,
                           int N, int C, float eps);
// dy: [N, C] (dt); dres: [N, C] (dt) gradient already flowing into the residual
// stream from later layers (NULL: none); res: the forward's normalized input.
// dx: [N, C] (dt, overwritten) = LN backward + dres, which is the gradient of
// both x and r. dg, dbeta: [C] f32 += (dbeta NULL: skip). dx may alias dres.
ot_status ot_layernorm_bwd(ot_dtype dt, void *dx, float *dg, float *dbeta, const void *dy,
                           const void *dres, const void *res, const float *mean,
                           const float *rstd, const float *g, int N, int C);
// RMSNorm: y = res * rstd * g, rstd = 1/sqrt(mean(res^2) + eps). Same contract.
ot_status ot_rmsnorm_fwd(ot_dtype dt, void *y, float *rstd, void *res_out, const void *x,
                         const void *r, const float *g, int N, int C, float eps);
ot_status ot_rmsnorm_bwd(ot_dtype dt, void *dx, float *dg, const void *dy, const void *dres,
                         const void *res, const float *rstd, const float *g, int N, int C);

// ----------------------------------------------------------- activations ----
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). n elements;
// y may alias x (element-wise, in place).
ot_status ot_gelu_fwd(ot_dtype dt, void *y, const void *x, size_t n);
// dx = dy * gelu'(x); dx may alias dy.
ot_status ot_gelu_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, size_t n);
// GELU, erf form (ViT, BERT: nn.GELU()): 0.5 x (1 + erf(x / sqrt 2)), through erfc of |x| (a
// Chebyshev fit of relative error < 1.2e-7; f32 exponent rounding adds ~1e-6 in the far
// negative tail). n elements; y may alias x.
ot_status ot_gelu_erf_fwd(ot_dtype dt, void *y, const void *x, size_t n);
// dx = dy * (Phi(x) + x phi(x)) (Phi, phi: the normal CDF and density); dx may alias dy.
ot_status ot_gelu_erf_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, size_t n);
// SwiGLU: x: [N, 2F] = [gate | up] per row -> y: [N, F] = silu(gate) * up.
ot_status ot_swiglu_fwd(ot_dtype dt, void *y, const void *x, int N, int F);
// dy: [N, F] -> dx: [N, 2F] (overwritten).
ot_status ot_swiglu_bwd(ot_dtype dt, void *dx, const void *x, const void *dy, int N, int F);

// --------------------------------------------------------------- dropout ----
// Inverted dropout on n elements (residual branches, activations), training
// only: at inference pass p = 0 (or skip the call). The keep rule is the one
// of ot/core.h: element e uses counter offset + e of stream `seed`, kept iff
// ot_rand_u32(seed, offset + e) >= ot_dropout_threshold(p), and then
//   y[e] = x[e] * ot_dropout_scale(p)   (f32 product, rounded to dt), else 0.
// Nothing is stored: the backward regenerates the mask from (seed, offset).
// dt: OT_F32, OT_BF16 or OT_F16. p must be in [0, 1) (p >= 1 or NaN: OT_EINVAL).
// p == 0: y is an exact copy of x (no-op when y == x). y may alias x.
// Deterministic for (seed, offset) and independent of the thread count.
// Usage (the model): one seed per run and a running counter `off`; each call
// on a tensor of n elements uses [off, off + n) and advances off by n; the
// backward calls ot_dropout_bwd with the same (p, seed, offset).
ot_status ot_dropout_fwd(ot_dtype dt, void *y, const void *x, size_t n, float p, uint64_t seed,
                         uint64_t offset);
// dx[e] = kept(offset + e) ? dy[e] * ot_dropout_scale(p) : 0; dx may alias dy.
ot_status ot_dropout_bwd(ot_dtype dt, void *dx, const void *dy, size_t n, float p, uint64_t seed,
                         uint64_t offset);

// Dropout of a slice of a larger tensor, with the counters the whole tensor
// would give its elements: x, y [n0, n1, n2] (dt, contiguous); element (a, b, c)
// uses counter offset + r(a) * s0 + b * s1 + c, r(a) = rows ? rows[a] : a. E.g. a
// tensor-parallel rank's columns [f0, f0 + n2) of [N, F] activations: n0 = 1,
// n1 = N, s1 = F, offset + f0; the samples of a global batch at fixed strides
// whatever their padding: n0 = rows, n1 = positions, s0 = Pmax * s1. The caller
// keeps distinct elements' counters distinct (s1 >= n2, s0 >= n1 * s1, rows
// distinct and >= 0). Keep rule, p, aliasing and the p = 0 copy as
// ot_dropout_fwd, which is the case n0 = n1 = 1.
typedef struct {
  size_t n0, n1, n2;     // the tensor [n0, n1, n2]
  const int64_t *rows;   // [n0] counter row r(a) of each a (NULL: a)
  uint64_t s0, s1;       // counter strides of r(a) and of b
} ot_dropout_map;
ot_status ot_dropout_fwd_map(ot_dtype dt, void *y, const void *x, const ot_dropout_map *mp,
                             float p, uint64_t seed, uint64_t offset);
// dx = the forward's mask (the same map, p, seed, offset) applied to dy; dx may alias dy.
ot_status ot_dropout_bwd_map(ot_dtype dt, void *dx, const void *dy, const ot_dropout_map *mp,
                             float p, uint64_t seed, uint64_t offset);

// ------------------------------------------------------------------ RoPE ----
typedef enum {
  OT_ROPE_NEOX = 0,  // rotate pairs (i, i + rot/2): GPT-NeoX, Llama (HF)
  OT_ROPE_GPTJ = 1   // rotate pairs (2i, 2i + 1): GPT-J, Meta's original Llama
} ot_rope_style;
// Table for positions [0, Tmax): tab: [Tmax, rot_dims] f32, per position
// rot_dims/2 cosines then rot_dims/2 sines of pos * base^(-2i/rot_dims).
ot_status ot_rope_table(float *tab, int Tmax, int rot_dims, float base);
// x: [B, H, T, D] (dt) rotated IN PLACE on the first rot_dims (even, <= D)
// dims of each head; row t has position pos0 + t. tab: [Tmax, rot_dims] from
// ot_rope_table with the same rot_dims; pos0 + T > Tmax is an error.
ot_status ot_rope_fwd(ot_dtype dt, void *x, const float *tab, int Tmax, int B, int H, int T,
                      int D, int rot_dims, int pos0, ot_rope_style style);
// Gradient: rotates dx in place by the inverse angle.
ot_status ot_rope_bwd(ot_dtype dt, void *dx, const float *tab, int Tmax, int B, int H, int T,
                      int D, int rot_dims, int pos0, ot_rope_style style);

// ---------------------------------------------- softmax and cross-entropy ---
// Row softmax: x, y: [N, V] (dt); y may alias x.
ot_status ot_softmax_fwd(ot_dtype dt, void *y, const void *x, int N, int V);
// dx = y * (dy - sum(dy * y)); dx may alias dy.
ot_status ot_softmax_bwd(ot_dtype dt, void *dx, const void *y, const void *dy, int N, int V);
// Fused softmax + cross-entropy over the vocabulary, in place.
// logits: [N, ld] (dt) with V <= ld valid columns (columns >= V are padding:
// ignored, and their gradient is written as 0). targets: [N] int32; a row whose
// target == ignore_index contributes no loss and a zero gradient row; other
// targets must be in [0, V). row_loss: [N] f32 (NULL: skip). *mean_loss =
// sum of row losses / count (count > 0, e.g. the number of non-ignored tokens of
// the whole global batch). want_grad: logits are OVERWRITTEN with
// dlogits = (softmax - onehot) / count.
ot_status ot_xent_fused(ot_dtype dt, void *logits, int ld, const int32_t *targets,
                        int N, int V, int ignore_index, float count, float *row_loss,
                        float *mean_loss, bool want_grad);
// Label-smoothed cross-entropy, as PyTorch's F.cross_entropy(logits, t,
// ignore_index, label_smoothing=eps, reduction='sum') / count; same layout and
// in-place contract as ot_xent_fused. eps in [0, 1). row_loss: [N] f32 (NULL:
// skip) = (1 - eps) * (-log p_t) + eps * mean_j(-log p_j), 0 on ignored rows;
// want_grad: logits OVERWRITTEN with (softmax - (1 - eps) onehot - eps / V) /
// count (0 on ignored rows and padding columns). eps = 0 gives exactly
// ot_xent_fused's numbers.
ot_status ot_xent_ls_fused(ot_dtype dt, void *logits, int ld, const int32_t *targets, int N,
                           int V, int ignore_index, float eps, float count, float *row_loss,
                           float *mean_loss, bool want_grad);

// ----------------------------------------------------------------- AdamW ----
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;        // 1-based step for bias correction
} ot_adamw_cfg;
// PyTorch AdamW semantics: g' = g * grad_scale; m = b1 m + (1-b1) g';
// v = b2 v + (1-b2) g'^2; p -= lr * (wd * p + (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)).
// p, g, m, v: [n] f32. p_bf16: [n] bf16 copy of the updated p, or NULL.
ot_status ot_adamw(float *p, const float *g, float *m, float *v, uint16_t *p_bf16,
                   size_t n, const ot_adamw_cfg *cfg, float grad_scale);
// As ot_adamw with the 16-bit copy p16 in p16dt: OT_BF16 or OT_F16 (mixed precision).
ot_status ot_adamw_dt(float *p, const float *g, float *m, float *v, uint16_t *p16, ot_dtype p16dt,
                      size_t n, const ot_adamw_cfg *cfg, float grad_scale);
// Sum of squares of g: [n] in double, deterministic (fixed chunks).
double ot_sumsq(const float *g, size_t n);
// Clip coefficient for a global norm: min(1, max_norm / (norm + 1e-6)); 1 if
// max_norm <= 0. Non-finite norm returns NaN (the caller skips the step).
float ot_clip_coef(double norm, float max_norm);

// -------------------------------------------------- scalar references (f32) --
// Same contracts as above with dt = f32, straightforward loops, single thread.
void ot_ref_gemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc);
void ot_ref_linear_fwd(float *y, float *pre, const float *x, const float *w, const float *b,
                       int M, int N, int K, ot_act act);
void ot_ref_linear_bwd(float *dx, float *dw, float *db, float *dy, const float *pre,
                       const float *x, const float *w, int M, int N, int K, ot_act act);
void ot_ref_qkv_fwd(float *q, float *k, float *v, const float *x, const float *w, const float *b,
                    int B, int T, int C, int Hq, int Hkv, int D);
void ot_ref_qkv_bwd(float *dx, float *dw, float *db, const float *dq, const float *dk,
                    const float *dv, const float *x, const float *w, int B, int T, int C,
                    int Hq, int Hkv, int D);
void ot_ref_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                      int B, int T, int C);
void ot_ref_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                      int B, int T, int C);
// Direct convolution: w [E, Cin, P, P], same shapes as ot_patch_embed_fwd / _bwd.
void ot_ref_patch_embed_fwd(float *out, const float *img, const float *w, const float *b, int B,
                            int Cin, int H, int W, int P, int E);
void ot_ref_patch_embed_bwd(float *dimg, float *dw, float *db, const float *dout,
                            const float *img, const float *w, int B, int Cin, int H, int W, int P,
                            int E);
void ot_ref_layernorm_fwd(float *y, float *mean, float *rstd, float *res_out, const float *x,
                          const float *r, const float *g, const float *beta, int N, int C, float eps);
void ot_ref_layernorm_bwd(float *dx, float *dg, float *dbeta, const float *dy, const float *dres,
                          const float *res, const float *mean, const float *rstd, const float *g,
                          int N, int C);
void ot_ref_rmsnorm_fwd(float *y, float *rstd, float *res_out, const float *x, const float *r,
                        const float *g, int N, int C, float eps);
void ot_ref_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *dres,
                        const float *res, const float *rstd, const float *g, int N, int C);
void ot_ref_gelu_fwd(float *y, const float *x, size_t n);
void ot_ref_gelu_bwd(float *dx, const float *x, const float *dy, size_t n);
void ot_ref_gelu_erf_fwd(float *y, const float *x, size_t n);
void ot_ref_gelu_erf_bwd(float *dx, const float *x, const float *dy, size_t n);
// Scalar dropout reference (same contract as ot_dropout_fwd / _bwd, f32, any p).
void ot_ref_dropout_fwd(float *y, const float *x, size_t n, float p, uint64_t seed,
                        uint64_t offset);
void ot_ref_dropout_bwd(float *dx, const float *dy, size_t n, float p, uint64_t seed,
                        uint64_t offset);
// Scalar reference of ot_dropout_fwd_map / _bwd_map (f32).
void ot_ref_dropout_fwd_map(float *y, const float *x, const ot_dropout_map *mp, float p,
                            uint64_t seed, uint64_t offset);
void ot_ref_dropout_bwd_map(float *dx, const float *dy, const ot_dropout_map *mp, float p,
                            uint64_t seed, uint64_t offset);
void ot_ref_swiglu_fwd(float *y, const float *x, int N, int F);
void ot_ref_swiglu_bwd(float *dx, const float *x, const float *dy, int N, int F);
void ot_ref_rope_fwd(float *x, int B, int H, int T, int D, int rot_dims, float base, int pos0,
                     ot_rope_style style);
void ot_ref_rope_bwd(float *dx, int B, int H, int T, int D, int rot_dims, float base, int pos0,
                     ot_rope_style style);
void ot_ref_softmax_fwd(float *y, const float *x, int N, int V);
void ot_ref_softmax_bwd(float *dx, const float *y, const float *dy, int N, int V);
void ot_ref_xent(float *logits, int ld, const int32_t *targets, int N, int V, int ignore_index,
                 float count, float *row_loss, float *mean_loss, bool want_grad);
void ot_ref_xent_ls(float *logits, int ld, const int32_t *targets, int N, int V,
                    int ignore_index, float eps, float count, float *row_loss, float *mean_loss,
                    bool want_grad);
void ot_ref_adamw(float *p, const float *g, float *m, float *v, size_t n,
                  const ot_adamw_cfg *cfg, float grad_scale);

// ------------------------------------------------------------ measurement ---
// Measured f32 FMA peak of this machine on all OpenMP threads (GFLOP/s): the
// best of a few ~20 ms runs of independent FMA chains (the vector unit's peak
// with the active ISA). The same probe `ot bench ops` prints.
double ot_measure_fma_peak(void);
// STREAM triad a[i] = b[i] + s * c[i], i < n, on all OpenMP threads (static
// partition); streaming: non-temporal stores where the ISA has them (no read
// for ownership of a; a must be 64-byte aligned, else plain stores). Benchmarks
// measure the memory bandwidth with it (bytes: 3 * 4 * n per call).
void ot_stream_triad(float *a, const float *b, const float *c, float s, size_t n, bool streaming);
// a = 1, b = 2, c = 0.5 over n floats with ot_stream_triad's partition (first touch).
void ot_stream_init(float *a, float *b, float *c, size_t n);

#ifdef __cplusplus
}
#endif
#endif
