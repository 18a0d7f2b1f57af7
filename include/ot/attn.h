// ops-transformer attention kernels: the shape every kernel takes, the
// materialized baseline, flash (forward/backward), block-sparse, decode over a
// contiguous cache and over the paged block pool, and their scalar references.
//
// Semantics shared with ot_ref_attn_* / ot_attn_mat_*:
//  - q: [B, Hq, Tq, D], k, v: [B, Hkv, Tk, D], o: [B, Hq, Tq, D] (dt = f32, bf16
//    or f16 storage, f32 arithmetic); lse: [B, Hq, Tq] f32 logsumexp of the
//    scaled scores of each row (natural log), the only state the backward needs
//    besides o. Query head h reads kv head h / (Hq / Hkv): grouped-query and
//    multi-query attention never copy K/V.
//  - causal is aligned bottom-right (FlashAttention-2): query i sees key j iff
//    j <= i + (Tk - Tq); with Tq > Tk the first Tq - Tk rows see nothing.
//    kv_len[b] masks keys j >= kv_len[b] (never read: padding may hold garbage).
//  - A row that sees no key gets o = 0 and lse = -inf (its gradients are 0).
//  - Working memory is O(T * D) per thread (ot_scratch, OT_MEM_WORKSPACE): the
//    Tq x Tk score matrix is never formed.
//  - Deterministic: no atomics; GQA heads are summed in head order. o, lse, dk
//    and dv are each computed by one thread in a fixed order, so they do not
//    depend on the thread count or on scheduling. dq sums per-thread partials
//    in thread order over a fixed (shape- and thread-count-derived) partition:
//    repeated calls with the same thread count give identical bits, another
//    thread count may change dq's rounding (~1e-7 relative).
#ifndef OT_ATTN_H
#define OT_ATTN_H
#include "ot/ops.h"
#ifdef __cplusplus
extern "C" {
#endif

// ------------------------------------------------------------- attention ----
// Shapes shared by every attention kernel. q: [B, Hq, Tq, D]; k, v: [B, Hkv, Tk, D];
// o: [B, Hq, Tq, D]. Query head h uses kv head h / (Hq / Hkv).
// causal: aligned bottom-right (as FlashAttention-2): query i sees key j iff
// j <= i + (Tk - Tq). kv_len: [B] valid key count per sequence (keys j >=
// kv_len[b] are masked) or NULL. A query row that sees no key gets o = 0 and
// lse = -inf. scale 0 means 1/sqrt(D).
//
// Attention dropout (training only; the fields come last, so a positional
// initializer that stops at `scale` means "no dropout"): with dropout_p > 0,
//   o = (Z o P / (1 - p)) V,   P = softmax (the undropped probabilities),
// lse unchanged (the logsumexp of the undropped scores), Z[b, h, i, j] = 1 iff
// the counter dropout_offset + r(b) * sb + h * sh + i * si + j of stream
// dropout_seed is kept by the rule of ot/core.h (ot_dropout_keep), and the
// factor is ot_dropout_scale(p). The mask is never stored: the backward
// regenerates it per tile from (seed, offset), so pass the forward's shape to
// the backward unchanged. By default (dropout_rows NULL: r(b) = b; strides 0)
// the counters are those of the dense [B, Hq, Tq, Tk] layout (si = Tk, sh = Tq*Tk,
// sb = Hq*Tq*Tk) and a call uses [offset, offset + B*Hq*Tq*Tk): advance the offset
// by that much between calls that must differ (layers, steps). A caller that
// computes a slice of a larger attention gives its counters instead: a tensor-
// parallel rank's heads h0.. add h0 * sh to the offset; batch entry b at row
// dropout_rows[b] of a global batch; sb / sh / si of the largest Tq, Tk, so that a
// mask does not depend on the padding (each stride 0 takes its dense value; the
// caller keeps distinct (b, h, i, j) on distinct counters: si >= Tk, sh >= Tq*si,
// sb >= Hq*sh). dropout_p in [0, 1) (else OT_EINVAL); 0 (inference) takes exactly
// the no-dropout code path. Supported by ot_attn_flash_* and the references
// ot_ref_attn_*; ot_attn_mat_*, ot_attn_sparse_* and ot_attn_decode reject
// dropout_p != 0 (OT_EINVAL).
typedef struct {
  int B, Hq, Hkv, Tq, Tk, D;
  bool causal;
  const int32_t *kv_len;
  float scale;
  float dropout_p;          // probability of dropping a probability (0: off)
  uint64_t dropout_seed;    // stream of the mask
  uint64_t dropout_offset;  // first counter of this call's mask
  const int64_t *dropout_rows;  // [B] counter row r(b) of batch entry b (NULL: b)
  uint64_t dropout_sb, dropout_sh, dropout_si;  // counter strides of r(b), h, i (0: dense)
} ot_attn_shape;
ot_status ot_attn_shape_check(const ot_attn_shape *s, const char *fn);

// Materialized attention (GEMM + softmax); the baseline the flash kernels beat.
// att: [B, Hq, Tq, Tk] f32 receives the probabilities (kept for the backward).
ot_status ot_attn_mat_fwd(ot_dtype dt, void *o, float *att, const void *q, const void *k,
                          const void *v, const ot_attn_shape *s);
// dq: [B,Hq,Tq,D], dk/dv: [B,Hkv,Tk,D] (dt, overwritten); datt: [B,Hq,Tq,Tk] f32 scratch.
ot_status ot_attn_mat_bwd(ot_dtype dt, void *dq, void *dk, void *dv, float *datt,
                          const void *dout, const float *att, const void *q, const void *k,
                          const void *v, const ot_attn_shape *s);

// ------------------------------------------------------------ flash ---------
// q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] (dt) -> o: [B,Hq,Tq,D] (dt),
// lse: [B,Hq,Tq] f32 (NULL: not stored, e.g. inference).
ot_status ot_attn_flash_fwd(ot_dtype dt, void *o, float *lse, const void *q, const void *k,
                            const void *v, const ot_attn_shape *s);
// dout, o: [B,Hq,Tq,D] (dt), lse: [B,Hq,Tq] f32 from the forward ->
// dq: [B,Hq,Tq,D], dk, dv: [B,Hkv,Tk,D] (dt, overwritten; dk/dv summed over
// the Hq/Hkv query heads of each kv head; keys nobody sees get 0).
ot_status ot_attn_flash_bwd(ot_dtype dt, void *dq, void *dk, void *dv, const void *dout,
                            const void *o, const float *lse, const void *q, const void *k,
                            const void *v, const ot_attn_shape *s);

// ----------------------------------------------------- block-sparse ---------
// The "block_size=64, local_window=3, global_tokens=10" layout. Positions are
// key indices; query i sits at position p = i + (Tk - Tq) (needs Tq <= Tk).
// Query block qb = p / block_size, key block kb = j / block_size. Query i may
// attend key j iff
//    p < global_tokens or j < global_tokens            (global tokens), or
//    kb in the window of qb: [qb - (w-1), qb] when s->causal,
//                            [qb - w/2, qb + (w-1)/2] otherwise (w = local_window),
// and, as in dense attention, j <= p when s->causal and j < kv_len[b].
typedef struct {
  int block_size;     // b >= 1 tokens per block
  int local_window;   // w >= 1 blocks in the sliding window
  int global_tokens;  // g >= 0 leading positions that see and are seen by all
} ot_attn_sparse_layout;

// Same contracts as the flash functions; only active (query tile, key tile)
// pairs are computed, forward and backward.
ot_status ot_attn_sparse_fwd(ot_dtype dt, void *o, float *lse, const void *q, const void *k,
                             const void *v, const ot_attn_shape *s,
                             const ot_attn_sparse_layout *l);
ot_status ot_attn_sparse_bwd(ot_dtype dt, void *dq, void *dk, void *dv, const void *dout,
                             const void *o, const float *lse, const void *q, const void *k,
                             const void *v, const ot_attn_shape *s,
                             const ot_attn_sparse_layout *l);
// mask: [Tq, Tk] bytes, 1 where the layout (and s->causal) lets query i attend
// key j, else 0; kv_len is NOT applied (it depends on the batch row). Dense
// attention with this mask equals ot_attn_sparse_* (tests, visualisation).
ot_status ot_attn_sparse_mask(uint8_t *mask, const ot_attn_shape *s,
                              const ot_attn_sparse_layout *l);
// Number of (query, key) pairs one head attends, summed over the batch (kv_len
// applied); l = NULL for dense attention. FLOPs of a forward = 4 * D * Hq * pairs.
// Returns -1 (message set) on invalid arguments.
double ot_attn_pairs(const ot_attn_shape *s, const ot_attn_sparse_layout *l);

// ------------------------------------------------------------ decode --------
// A few new query rows against a KV cache. q: [B,Hq,Tq,D] (dt), kc, vc:
// [B,Hkv,S,D] (dt) with S = s->Tk the cache capacity; s->kv_len[b] (NULL: S)
// keys of sequence b are valid, the last Tq of them being the new tokens' own.
// Query t of sequence b sits at position kv_len[b] - Tq + t: with s->causal it
// sees keys j <= that position, else all kv_len[b] keys. (Alignment is to each
// sequence's length, not to S; with kv_len = NULL this is exactly flash
// attention.) -> o: [B,Hq,Tq,D] (dt), lse: [B,Hq,Tq] f32 or NULL.
// The keys are split in fixed chunks across threads; partial (max, sum,
// accumulator) triples are merged in chunk order, so results do not depend on
// the thread count. K/V are read once per kv head for all its query heads.
ot_status ot_attn_decode(ot_dtype dt, void *o, float *lse, const void *q, const void *kc,
                         const void *vc, const ot_attn_shape *s);

// ------------------------------------------------ paged decode attention ---
// One new query row per sequence against its paged keys/values. Row r has
// kv_len[r] >= 1 valid keys (the last one its own new token) in the blocks
// tables[r * table_stride + i], i < ceil(kv_len[r] / block_tokens); the
// block_tokens K rows (D elements each) of kv head h in block b start at
// k + h * head_stride + b * block_stride elements (V likewise from v), element
// type kv_dt. (The pool's layout: block_stride = block_tokens * D, head_stride
// = blocks * block_stride.)
typedef struct {
  int n, Hq, Hkv, D;        // rows, query heads, kv heads (divides Hq), head dim
  int block_tokens;
  int n_blocks;             // blocks in the pool: every table entry used is checked < n_blocks
  ot_dtype kv_dt;           // OT_F32 or OT_BF16
  const void *k, *v;
  size_t block_stride;      // elements from one block to the next (>= block_tokens * D)
  size_t head_stride;       // elements from one kv head to the next
  const int32_t *tables;    // [n, table_stride]
  int table_stride;
  const int32_t *kv_len;    // [n]
  float scale;              // 0: 1/sqrt(D)
} ot_paged_attn;

// q: row r at q + r * ldq holds [Hq, D] f32 -> o: row r at o + r * ldo gets
// [Hq, D] f32 = softmax(q k^T * scale) v over the row's keys (query head h
// reads kv head h / (Hq / Hkv)). The keys are split in fixed chunks of whole
// blocks; partial (max, sum, accumulator) triples are merged in chunk order,
// so results do not depend on the thread count.
ot_status ot_attn_paged_decode(float *o, int ldo, const float *q, int ldq, const ot_paged_attn *p);
// Scalar reference of the same contract (tests).
void ot_ref_attn_paged_decode(float *o, int ldo, const float *q, int ldq, const ot_paged_attn *p);


// -------------------------------------------------- scalar references (f32) --
// lse: [B, Hq, Tq] f32 or NULL.
void ot_ref_attn_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                     const ot_attn_shape *s);
void ot_ref_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                     const float *k, const float *v, const ot_attn_shape *s);

#ifdef __cplusplus
}
#endif
#endif
