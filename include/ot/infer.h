// ops-transformer inference: a KV cache with an incremental forward over the
// model's weights (prefill a prompt, then decode a token at a time), a
// sampler (temperature, top-k, top-p, seeded), the generation loop, and the
// batched engine over a paged KV cache (below).
//
// Lifecycle: a model (ot_model_create + ot_model_init or an import; its run
// config only needs B = T = 1 for generation, the cache owns its own buffers)
// -> ot_kv_create (plans and allocates the cache and the step buffers once) ->
// ot_kv_forward calls (each appends tokens and returns logits) or
// ot_generate -> ot_kv_reset to start a new sequence. A step allocates nothing
// itself (the operators' per-thread ot_scratch and oneDNN's primitive cache
// grow on the first step of each shape only).
//
// Equivalence: the logits of the incremental forward at every position equal
// those of ot_model_forward on the whole sequence up to float rounding (same
// operators and weights; attention of new rows against the cache uses the
// decode kernel, a first chunk uses flash attention).
#ifndef OT_INFER_H
#define OT_INFER_H
#include "ot/model.h"
#include "ot/attn.h"
#include "ot/data.h"
#ifdef __cplusplus
extern "C" {
#endif

// --------------------------------------------------------------- KV cache ---
typedef struct {
  int B;            // sequences decoded together; they always have the same length
  int max_seq;      // cache capacity in tokens per sequence; 0: the model's max_seq
                    // (it may not exceed it: RoPE table / learned position rows)
  int chunk;        // most new tokens per sequence that one step computes; 0: min(max_seq, 64).
                    // Longer inputs are split into chunks (only without all_logits).
  bool all_logits;  // ot_kv_forward may return the logits of every new token
                    // (needs [B * chunk, Vp] f32); otherwise only each sequence's last
} ot_kv_config;

typedef struct ot_kvcache ot_kvcache;

// Validates against the model, allocates K and V per layer [B, Hkv, S, D] in
// the model's activation dtype (OT_MEM_KVCACHE) and the step buffers for
// B * chunk rows (OT_MEM_WORKSPACE). The model must outlive the cache and its
// weights may change between steps (the cache reads them at each step).
ot_status ot_kv_create(ot_kvcache **out, const ot_model *m, const ot_kv_config *cfg);
void ot_kv_free(ot_kvcache *c);                     // NULL ok
void ot_kv_reset(ot_kvcache *c);                    // length := 0 (a new sequence)
int ot_kv_len(const ot_kvcache *c);                 // tokens held per sequence
int ot_kv_capacity(const ot_kvcache *c);            // S
const ot_kv_config *ot_kv_config_of(const ot_kvcache *c);   // resolved (no zeros)
const ot_model *ot_kv_model(const ot_kvcache *c);
size_t ot_kv_cache_bytes(const ot_kvcache *c);      // K + V of all layers
size_t ot_kv_workspace_bytes(const ot_kvcache *c);  // step buffers

// Appends tokens [B, T] (row b = sequence b's next T tokens) at positions
// [len, len + T): embeddings (learned positions wpe[len + t]), every block with
// RoPE at pos0 = len and the new K/V written into the cache, attention of the
// new rows against the cache (flash attention when the cache was empty, the
// decode kernel otherwise), final norm and logits.
// all = true (needs cfg.all_logits, T <= chunk): *logits = [B * T, *ld] f32,
// row b * T + t = the logits after token t of sequence b; all = false:
// *logits = [B, *ld] f32, after each sequence's last token. ld = the model's
// vocab_padded; columns >= vocab are padding. The pointer stays valid until
// the next call. len + T > capacity: OT_EINVAL (nothing changes), naming both.
ot_status ot_kv_forward(ot_kvcache *c, const int32_t *tokens, int T, bool all,
                        const float **logits, int *ld);

// ---------------------------------------------------------------- sampler ---
typedef struct {
  float temperature;   // 0: greedy (argmax, lowest id on ties); > 0: softmax(logits / T)
  int top_k;           // keep the k most likely tokens; 0: all
  float top_p;         // nucleus: keep the smallest most-likely prefix whose probability
                       // reaches top_p (after top-k), at least one token; 1: all
  uint64_t seed;       // RNG seed: the same seed and logits give the same tokens
} ot_sampler_config;

// temperature 0.8, top_k 40, top_p 0.95, seed 1337.
ot_sampler_config ot_sampler_config_default(void);

typedef struct ot_sampler ot_sampler;

// Checks the config (OT_EINVAL naming the field: temperature >= 0 and finite,
// top_k >= 0, 0 < top_p <= 1) and allocates the work arrays for vocab V once.
ot_status ot_sampler_create(ot_sampler **out, const ot_sampler_config *cfg, int V);
void ot_sampler_free(ot_sampler *s);                 // NULL ok
int ot_sampler_vocab(const ot_sampler *s);           // V
// Restarts the RNG from seed (a rerun then repeats the same draws).
void ot_sampler_reseed(ot_sampler *s, uint64_t seed);
// logits: [V] f32 (NaN counts as -inf) -> *token in [0, V). Order: temperature,
// top-k, top-p, then one uniform draw over the kept tokens in descending order
// of probability (ties: lower id first). Greedy when temperature == 0, top_k
// == 1 or the nucleus holds one token; greedy picks consume no draw.
// OT_EINVAL when no logit is finite (> -inf).
ot_status ot_sampler_sample(ot_sampler *s, const float *logits, int32_t *token);

// ------------------------------------------------------------- generation ---
typedef struct {
  int max_tokens;        // new tokens at most (>= 1)
  int32_t stop_token;    // end-of-text id: generation ends when it is sampled
                         // (it is neither stored nor passed on); -1: none
} ot_gen_config;

typedef struct {
  int prompt_tokens, new_tokens;   // new_tokens excludes the stop token
  int decode_steps;                // one-token forwards run (tokens fed back)
  bool stopped;                    // ended on stop_token (else on max_tokens or the callback)
  double prefill_s, decode_s;      // wall time of the prompt's forward and of the rest
                                   // (decode speed: decode_steps / decode_s)
} ot_gen_stats;

// Called once per generated token, as it comes (e.g. print and flush it).
// Returning false stops the generation after that token.
typedef bool (*ot_gen_token_fn)(void *ctx, int32_t token);

// Generates after prompt[0, n_prompt) (n_prompt >= 1) on a cache with B = 1
// (reset first) with sampler s (V at most the model's vocab; its RNG goes on
// from where it was: ot_sampler_reseed repeats a run): prefill, then sample /
// feed back up to max_tokens. out: [max_tokens] int32 (may be NULL) receives
// the new tokens; on_token may be NULL. n_prompt + max_tokens - 1 > capacity
// is OT_EINVAL before anything runs (the last token is sampled, never fed back).
ot_status ot_generate(ot_kvcache *c, ot_sampler *s, const int32_t *prompt, int n_prompt,
                      const ot_gen_config *cfg, int32_t *out, ot_gen_token_fn on_token,
                      void *ctx, ot_gen_stats *stats);

// ======================================================== batched engine ===
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
// f32 matrices are packed for this CPU's linear kernel (ot_qweight_pack: each
// read as one stream for all the sequences of a step; same bytes, up to one
// padded panel per matrix). OT_EINVAL names a bad field.
ot_status ot_engine_create(ot_engine **out, const ot_model *m, const ot_engine_config *cfg);
// The same from a quantized model (ot_quant_file_load of a file `ot quantize`
// wrote, or ot_qmodel_from_model): the engine takes q over and frees it, also
// when creation fails (its f32 matrices packed in place, as above). cfg->weights
// and cfg->group are ignored (q's are reported by ot_engine_config_of).
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

// ------------------------------------------------------------ beam search ---
// Greedy and beam search over a batch of sentences, independent of the model:
// a step callback computes the logits of every live hypothesis. Semantics are
// Hugging Face transformers 4.40's generate() (num_beams > 1: _beam_search with
// BeamSearchScorer / BeamHypotheses; num_beams == 1: _greedy_search), with the
// decoder start token as the one-token decoder prompt:
// - a step takes log_softmax of each row's logits (float32), applies the
//   logits processors below (min_length: eos -inf while fewer than min_length
//   tokens, the start token included, exist), adds the
//   beam's running score (float32; beam 0 starts at 0, the others at -1e9) and
//   keeps the 2 * num_beams best of the sentence's num_beams * V candidates
//   (ties: lower beam, then lower id, first; torch.topk leaves ties unspecified);
// - in rank order an eos candidate among the first num_beams ranks becomes a
//   finished hypothesis (later ones are skipped), the others the next beams
//   until num_beams are taken;
// - a hypothesis's score is sum_logprobs / len^length_penalty in double, len =
//   tokens generated after the start token, the eos included; a sentence keeps
//   its num_beams best (a better one replaces the worst);
// - a sentence is done when it holds num_beams hypotheses and: TRUE: at once;
//   FALSE: the worst is >= best candidate score / cur_len^α (cur_len: tokens
//   generated so far incl. this step's); NEVER: the same with (max_new)^α when
//   α > 0 (the best any longer beam could reach), else with cur_len^α;
// - at the length limit the live beams join the hypotheses (no eos) and the
//   best hypothesis is the result (the last added among equal scores);
//   its score is HF's sequences_scores.
// Greedy: argmax of the processed logits (lowest id on ties), ends at eos or
// the limit; its score is computed as for a beam hypothesis from the model's
// own log_softmax of the chosen tokens (HF's greedy search reports none). One result per sentence
// (num_return_sequences 1). NaN logits count as -inf. Sentences are
// independent: a batch gives each sentence what a search of it alone gives
// (HF keeps computing finished sentences with pad tokens; here they leave).
typedef enum {
  OT_EARLY_STOP_FALSE = 0,   // HF early_stopping=False (the heuristic)
  OT_EARLY_STOP_TRUE = 1,    // HF early_stopping=True
  OT_EARLY_STOP_NEVER = 2,   // HF early_stopping="never"
} ot_early_stop;

typedef struct {
  int vocab;                 // V: logits per row (ids 0..V-1)
  int num_beams;             // >= 1; 1: greedy
  float length_penalty;      // α (HF default 1.0)
  ot_early_stop early_stopping;
  // Length limit per sentence, counted like HF's max_length (the decoder start
  // token included, so at most limit - 1 new tokens, the eos among them):
  // limit = min(max_length if > 0, floor(max_len_a * src_len + max_len_b) if
  // either is nonzero). At least one must be set; each limit must be >= 2.
  int max_length;
  float max_len_a, max_len_b;
  int min_length;            // HF min_length (start token included); 0: none
  int32_t eos_id;            // in [0, V)
  int32_t pad_id;            // written after a result's end in out_tokens; in [0, V)
  int32_t decoder_start_id;  // the first input token of every sentence; in [0, V)
  // Hugging Face logits processors (all off by default), applied to a row's
  // log_softmax scores (beams) or raw logits (greedy) in HF 4.40's order:
  // repetition_penalty, no_repeat_ngram_size, bad_words_ids, min_length,
  // forced_eos_token_id. A row's input is [start, y_1 .. y_t] (cur_len = t + 1).
  float repetition_penalty;  // > 0; 1 (or 0, a zeroed config): off. Each token of
                             // the input: score < 0 ? score * p : score / p
  int no_repeat_ngram_size;  // n > 0: a token completing an n-gram of the input
                             // already seen in it is -inf; 0: off
  int n_bad_words;           // HF bad_words_ids: n_bad_words sequences, 0: off;
  const int32_t *bad_words_len;   // [n_bad_words] lengths >= 1
  const int32_t *bad_words_ids;   // their tokens concatenated, each in [0, V).
                             // Length 1: that token -inf (the sequence [eos] is
                             // ignored, as HF drops it); longer: the last token
                             // -inf when the input ends with the others
  int32_t forced_eos_id;     // -1: off (ot_beam_config_default; a zeroed config
                             // forces token 0); else at cur_len == limit - 1 every
                             // score is -inf but this token's, which is 0
} ot_beam_config;

// num_beams 4, length_penalty 1, early_stopping FALSE, max_length 0,
// max_len_a 0, max_len_b 0, min_length 0, processors off (repetition_penalty 1,
// forced_eos_id -1); vocab and the ids must be set.
ot_beam_config ot_beam_config_default(void);

// Computes logits for `rows` live hypotheses. tokens[r]: row r's last token
// (the decoder start token at step 0); parent[r]: the row of the previous call
// whose sequence row r continues (-1 at step 0): a KV cache gathers its rows
// by parent before appending tokens (rows may repeat a parent or drop one);
// sentence[r]: the batch index of row r's sentence (e.g. its encoder output).
// Rows are grouped by sentence in increasing order. Step 0 has one row per
// sentence; later steps num_beams rows per sentence still searching (finished
// sentences leave the batch, so rows shrink). Writes logits [rows, ld] (ld =
// V); a non-OK status stops the search and is returned as is.
typedef ot_status (*ot_beam_step_fn)(void *ctx, int step, int rows, const int32_t *tokens,
                                     const int32_t *parent, const int32_t *sentence,
                                     float *logits, int ld);

typedef struct {
  int steps;          // callback calls
  long long rows;     // rows computed over all calls
} ot_beam_stats;

// Searches batch sentences (src_len[batch]: source lengths for max_len_a;
// may be NULL when max_len_a == 0). Results: out_tokens [batch, cap] (the
// tokens after the start token, the eos included when the hypothesis ended
// with it, pad_id after), out_len [batch], out_score [batch] (may be NULL);
// cap must be >= the largest limit - 1. stats may be NULL. OT_EINVAL names a
// bad option; all working memory is allocated once (OT_MEM_WORKSPACE) and
// freed before returning, also on errors.
ot_status ot_beam_search(const ot_beam_config *cfg, int batch, const int *src_len,
                         ot_beam_step_fn step, void *ctx, int32_t *out_tokens, int cap,
                         int *out_len, float *out_score, ot_beam_stats *stats);


// ------------------------------------------------------------ translation ---
// Translation with an encoder-decoder model (cfg.arch = OT_ARCH_ENCDEC): per
// call, the encoder runs once over the batch's sources (key-padding mask),
// every decoder block's cross K/V are projected once per sentence and kept
// [sentence, Hkv, S, D] (the beams of a sentence share them), and each search
// step runs the one block forward over the live rows' newest token (position =
// step) with a self-attention KV cache per row, gathered by parent when the
// beam order changes. Greedy (num_beams 1) and beam search are ot_beam_search.
// All buffers are planned from the config and allocated at create
// (OT_MEM_KVCACHE: both caches; OT_MEM_WORKSPACE: the rest); a step allocates
// nothing (ot_beam_search allocates its own arrays once per call).
typedef struct {
  int max_batch;     // sentences per call (>= 1)
  int num_beams;     // most beams a call may use (>= 1)
  int max_src;       // longest source in tokens (eos included); 0: the model's max_seq
  int max_tgt;       // largest length limit (HF max_length: the start token counted);
                     // 0: the model's max_seq; in [2, max_seq]
} ot_translator_config;

typedef struct {
  int sentences;       // translated by the call
  int steps;           // decoder steps (beam callback calls)
  long long rows;      // decoder rows computed over all steps
  double encode_s, decode_s;   // wall time of the encoder + cross K/V, and of the search
} ot_translate_stats;

typedef struct ot_translator ot_translator;

// A translator over the model's own weights in its run dtype (f32, or bf16
// activations with the bf16 weight copy). The model must outlive it.
// OT_EINVAL names a bad field or a decoder-only model.
ot_status ot_translator_create(ot_translator **out, const ot_model *m,
                               const ot_translator_config *cfg);
// The same over a quantized encoder-decoder (ot_qmodel_from_model: bf16 or int8
// per channel or group; f32 activations). q must outlive the translator.
ot_status ot_translator_create_q(ot_translator **out, const ot_qmodel *q,
                                 const ot_translator_config *cfg);
void ot_translator_free(ot_translator *t);   // NULL ok
const ot_translator_config *ot_translator_config_of(const ot_translator *t);   // resolved
const ot_model_config *ot_translator_model_config(const ot_translator *t);
size_t ot_translator_cache_bytes(const ot_translator *t);       // OT_MEM_KVCACHE part
size_t ot_translator_workspace_bytes(const ot_translator *t);   // OT_MEM_WORKSPACE part

// Translates batch sentences: src [batch, S] (row b's tokens [0, src_len[b]),
// the rest ignored; 1 <= src_len[b] <= min(S, max_src)), with the search of cfg
// (cfg->vocab = the model's vocab; num_beams <= the translator's; every
// sentence's length limit <= max_tgt). Results as ot_beam_search: out_tokens
// [batch, cap], out_len [batch], out_score [batch] (may be NULL); stats may be
// NULL. OT_EINVAL names a bad argument (empty or too long source, token id out
// of range, batch over capacity).
ot_status ot_translate_ids(ot_translator *t, int batch, const int32_t *src, int S,
                           const int32_t *src_len, const ot_beam_config *cfg,
                           int32_t *out_tokens, int cap, int *out_len, float *out_score,
                           ot_translate_stats *stats);

// ---------------------------------------------------- image classification ---
// Top-k classes of images idx[n] of set s with a vision transformer: batches of up to the
// model's run.B images, each resized (bilinear) to the model's image_size and normalized
// by a (a->crop and a->flip ignored: inference), the logits' softmax (double) ->
// top_class [n, k] and top_p [n, k] (probabilities, descending; ties: the lower class).
// k in [1, classes]; s->c must be the model's channels. OT_EINVAL otherwise.
ot_status ot_classify_images(ot_model *m, const ot_images *s, const ot_image_aug *a,
                             const int64_t *idx, int n, int k, int32_t *top_class, float *top_p);

#ifdef __cplusplus
}
#endif
#endif
