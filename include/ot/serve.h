// ops-transformer serving: a paged KV cache (one block pool allocated once
// from a byte budget, a block table per sequence), decode attention over the
// block tables, and a batched engine with continuous batching: sequences join
// (their prompt is prefilled with flash attention and written into their
// blocks) and leave between steps, and one step decodes one token for every
// active sequence with the linear layers run once over all their rows, so the
// weights are streamed once per step for the whole batch. Linear weights are
// f32, bf16 or int8 (weight-only quantization, per-group scales); activations
// are f32.
//
// Lifecycle: a model with weights (ot_model_create + init / import; only its
// f32 master weights are read, once), or a quantized model file ->
// ot_engine_create / ot_engine_create_q (quantized weights, the block pool,
// the workspace and the event buffer, all allocated here) ->
// ot_engine_add / ot_engine_step / ot_engine_remove in any order ->
// ot_engine_free. The model may be freed after ot_engine_create. A step
// allocates nothing; ot_engine_add creates the sequence's sampler (its work
// arrays) and allocates nothing else. One thread drives an engine at a time
// (the kernels inside use the OpenMP threads).
#ifndef OT_SERVE_H
#define OT_SERVE_H
#include "ot/model.h"
#include "ot/infer.h"
#include "ot/quant.h"
#ifdef __cplusplus
extern "C" {
#endif

// --------------------------------------------------------- KV block pool ---
// A block holds block_tokens consecutive tokens of one sequence, K and V of
// every layer and kv head. Storage is [L][2 (K, V)][Hkv][blocks][block_tokens][D]
// elements of dt: for one (layer, K|V, kv head) the blocks are adjacent, so a
// sequence whose blocks are consecutive ids reads one contiguous stream per
// head (as a contiguous cache would), and any block is a 4 KB-ish chunk
// (block_tokens * D elements).
typedef struct {
  int n_layers, n_kv_heads, head_dim;   // L, Hkv, D
  int block_tokens;                     // tokens per block (>= 1)
  ot_dtype dt;                          // OT_F32 or OT_BF16 storage
  size_t budget_bytes;                  // blocks = floor(budget / block bytes) (>= 1)
  int max_seqs;                         // sequence slots
  int max_blocks_per_seq;               // block table width (longest sequence / block_tokens)
} ot_kvpool_config;

typedef struct ot_kvpool ot_kvpool;

// Validates (OT_EINVAL naming the field) and allocates every block once
// (OT_MEM_KVCACHE, zeroed), the block tables and the free list.
ot_status ot_kvpool_create(ot_kvpool **out, const ot_kvpool_config *cfg);
void ot_kvpool_free(ot_kvpool *p);                     // NULL ok
const ot_kvpool_config *ot_kvpool_config_of(const ot_kvpool *p);
int ot_kvpool_blocks(const ot_kvpool *p);              // blocks in the pool
int ot_kvpool_free_blocks(const ot_kvpool *p);         // blocks on the free list
size_t ot_kvpool_block_bytes(const ot_kvpool *p);
size_t ot_kvpool_bytes(const ot_kvpool *p);            // allocated storage (<= budget)
int ot_kvpool_open_seqs(const ot_kvpool *p);           // slots in use

// Takes a free slot (an empty sequence: no blocks) -> *seq in [0, max_seqs).
// OT_ENOMEM when every slot is in use (nothing changes).
ot_status ot_kvpool_open(ot_kvpool *p, int *seq);
// Grows sequence seq to hold at least `tokens` tokens (blocks in table order,
// taken from the free list). All or nothing: when the free list or the table
// width cannot cover it, OT_ENOMEM naming the blocks needed and free, and the
// pool is unchanged. Never shrinks.
ot_status ot_kvpool_reserve(ot_kvpool *p, int seq, int tokens);
// Returns the slot's blocks to the free list (they are reused by later
// sequences) and frees the slot. OT_EINVAL for a slot that is not open.
ot_status ot_kvpool_close(ot_kvpool *p, int seq);
bool ot_kvpool_is_open(const ot_kvpool *p, int seq);
int ot_kvpool_capacity(const ot_kvpool *p, int seq);   // tokens its blocks hold
// Block ids of sequence seq in order (*n_blocks of them); NULL if not open.
const int32_t *ot_kvpool_table(const ot_kvpool *p, int seq, int *n_blocks);
// All tables: [max_seqs, max_blocks_per_seq] int32 (slot-major).
const int32_t *ot_kvpool_tables(const ot_kvpool *p);
// K (kv = 0) or V (kv = 1) of layer `layer`: [Hkv][blocks][block_tokens][D]
// (element type dt), i.e. token t of block b, kv head h starts at element
// ((h * blocks + b) * block_tokens + t) * D. NULL for a bad layer / kv.
void *ot_kvpool_base(const ot_kvpool *p, int layer, int kv);

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

// ---------------------------------------------------------------- engine ---
typedef struct {
  ot_dtype weights;      // linear weights: OT_F32, OT_BF16 or OT_I8 (int8 with a scale per
                         // `group` input columns of each row)
  int group;             // int8: input columns per scale, 32, 64 or 128 (0: one scale per row)
  ot_dtype kv_dtype;     // cache storage: OT_F32 or OT_BF16
  size_t kv_bytes;       // block pool budget; 0: max_seqs sequences of max_len tokens
  int block_tokens;      // tokens per block (0: 16)
  int max_seqs;          // sequences decoded together at most (0: 8)
  int max_len;           // longest sequence, prompt + generated (0: the model's max_seq)
  int max_prompt;        // longest prompt (prefill workspace rows; 0: max_len)
} ot_engine_config;

typedef struct {
  const int32_t *prompt;     // [n_prompt] token ids (n_prompt >= 1)
  int n_prompt;
  ot_sampler_config sampler; // this sequence's sampler (own RNG stream)
  int max_tokens;            // new tokens at most (>= 1)
  int32_t stop_token;        // end-of-text id: the sequence ends when it is sampled
                             // (not emitted as a token); -1: none
} ot_request;

// What happened to one sequence in ot_engine_add or ot_engine_step.
typedef struct {
  int id;            // sequence id (from ot_engine_add)
  int32_t token;     // the new token, or -1 when the stop token was sampled
  bool done;         // the sequence ended here (stop token or max_tokens) and has left:
                     // its slot and blocks are free again
} ot_engine_event;

typedef struct ot_engine ot_engine;

// Builds the engine's weights from the model's f32 master weights
// (ot_qmodel_from_model: matrices quantized to cfg->weights, the tied lm_head
// is the token embedding, one table; norms, biases, positions f32), allocates
// the block pool (OT_MEM_KVCACHE) and the workspace (OT_MEM_WORKSPACE).
// OT_EINVAL names a bad field.
ot_status ot_engine_create(ot_engine **out, const ot_model *m, const ot_engine_config *cfg);
// The same from a quantized model (ot_quant_file_load of a file `ot quantize`
// wrote, or ot_qmodel_from_model): the engine takes q over and frees it, also
// when creation fails. cfg->weights and cfg->group are ignored (q's are
// reported by ot_engine_config_of).
ot_status ot_engine_create_q(ot_engine **out, ot_qmodel *q, const ot_engine_config *cfg);
void ot_engine_free(ot_engine *e);                       // NULL ok
const ot_engine_config *ot_engine_config_of(const ot_engine *e);   // resolved (no zeros)
const ot_model_config *ot_engine_model_config(const ot_engine *e);
const ot_kvpool *ot_engine_pool(const ot_engine *e);
int ot_engine_active(const ot_engine *e);                // sequences in the batch
// Bytes of weights one decode step reads: every linear layer incl. the lm_head
// (the numerator of the bandwidth roofline).
size_t ot_engine_weight_bytes(const ot_engine *e);

// Admits a sequence: checks the request (OT_EINVAL: empty prompt, bad token,
// prompt + max_tokens - 1 > max_len, prompt > max_prompt, bad sampler), takes
// a slot and the blocks for prompt + max_tokens - 1 tokens (OT_ENOMEM naming
// what is missing when the slots or the pool's free blocks do not suffice:
// the request is refused and nothing changes), prefills the prompt and
// samples its first token into *first (may be NULL). *id identifies the
// sequence. When first->done, the sequence has already left.
ot_status ot_engine_add(ot_engine *e, const ot_request *r, int *id, ot_engine_event *first);
// One decode step for every active sequence (its last token in, the next one
// sampled). *ev: one event per sequence that was active, in admission order,
// valid until the next call; *n_ev their number (0 when none is active).
ot_status ot_engine_step(ot_engine *e, const ot_engine_event **ev, int *n_ev);
// Replaces the token sequence id sampled last, i.e. its input at the next step
// (teacher forcing, constrained decoding). OT_EINVAL for an unknown id or token.
ot_status ot_engine_set_token(ot_engine *e, int id, int32_t token);
// Ends a sequence early (frees its slot and blocks). OT_EINVAL for an unknown id.
ot_status ot_engine_remove(ot_engine *e, int id);
// Logits [V] f32 from which sequence id's token of the latest add / step was
// sampled (also when it ended there; valid until the next add / step / remove
// / score), NULL when it had none in that call; *V may be NULL.
const float *ot_engine_logits(const ot_engine *e, int id, int *V);
// Teacher-forced scoring through the engine's weights (no slot, no blocks):
// the sum of -log p(tokens[t + 1] | tokens[0..t]) over t < n - 1 into *nll and
// n - 1 into *count. 2 <= n <= max_prompt.
ot_status ot_engine_score(ot_engine *e, const int32_t *tokens, int n, double *nll, int *count);

#ifdef __cplusplus
}
#endif
#endif
