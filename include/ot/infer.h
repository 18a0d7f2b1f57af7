// ops-transformer inference: a KV cache with an incremental forward over the
// model's weights (prefill a prompt, then decode a token at a time), a
// sampler (temperature, top-k, top-p, seeded) and the generation loop.
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

#ifdef __cplusplus
}
#endif
#endif
