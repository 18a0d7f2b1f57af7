// Private interface of the batched serving engine (engine.c: creation, sequence
// admission / removal, events; engine_fwd.c: the prefill, decode and scoring
// passes: the model graph's blocks over the paged cache).
#ifndef OT_ENGINE_BATCH_IMPL_H
#define OT_ENGINE_BATCH_IMPL_H
#include "model/graph.h"
#include "ot/infer.h"

// The block pool as the blocks' key/value source (engine_fwd.c).
typedef struct {
  ot__kvsrc base;
  ot_engine *e;
} ot__eng_src;

// A sequence slot (index = its pool slot).
typedef struct {
  int id;               // -1: free
  int len;              // tokens whose K/V are in its blocks
  int32_t next;         // last sampled token: the input of the next step
  int generated;        // tokens emitted so far
  int max_tokens;
  int32_t stop;
  ot_sampler *smp;
} ot__eng_seq;

struct ot_engine {
  ot_engine_config cfg;        // resolved
  ot_model_config mc;
  int C, L, Hq, Hkv, D, F, Fa, V, QKV, HD;
  ot_qmodel *q;                // the weights (owned)
  ot__graph g;                 // the model graph over q's tensors (f32 activations)
  ot__block_w *blk;            // [L] the graph's block weights
  ot_qweight lm;               // view of the head's first V rows (not owned)
  float *rope;                 // [max_seq, D] or NULL (OT_MEM_PARAMS)
  ot__eng_src src;             // the pool as the blocks' K/V source
  bool fwd_decode;             // the running forward: decode (n sequences) or prefill (one)
  int fwd_slot;                // prefill: the pool slot its K/V go to (< 0: none, scoring)
  ot_kvpool *pool;
  ot__eng_seq *seq;            // [max_seqs]
  int *order;                  // [max_seqs] active slots in admission order
  int n_active, next_id;
  ot_engine_event *ev;         // [max_seqs]
  int *row_id;                 // [LR] sequence id of each logits row of the latest call (-1: none)
  // workspace (one arena, OT_MEM_WORKSPACE); R = max(max_seqs, max_prompt) rows
  ot_arena a_ws;
  int R, LR;                   // workspace rows, logit rows
  float *x, *x2, *y, *abuf;    // [R, C] residual stream, after attention, norm output, projection
  float *qkv;                  // [R, QKV]
  float *att;                  // [R, HD] attention output, token-major
  float *pre, *h;              // [R, Fa] (SwiGLU only), [R, F]
  float *mean, *rstd;          // [R]
  float *qh, *kh, *vh, *oh;    // head-major q, k, v, attention output: [R, Hq | Hkv, D]
  float *logits;               // [LR, V]
  int32_t *tok, *pos, *kvl;    // [max_seqs] step inputs: token, position, keys after it
  int32_t *tabs;               // [max_seqs, max_blocks] the step rows' block tables
};

// Forward passes (engine_fwd.c). Prefill: P tokens of a new sequence at
// positions [0, P); K/V go into pool slot `slot` (< 0: scoring, nothing kept);
// leaves the final residual of every row in e->x2 + e->abuf.
ot_status ot__eng_prefill(ot_engine *e, const int32_t *tokens, int P, int slot);
// Final norm of rows [r0, r0 + n) of the last forward's residual into e->y
// rows [0, n).
ot_status ot__eng_norm_f(ot_engine *e, int r0, int n);
// Logits of e->y rows [y0, y0 + n) into e->logits rows [0, n) (n <= LR).
ot_status ot__eng_head(ot_engine *e, int y0, int n);
// One decode step of n rows: e->tok, e->pos, e->kvl, e->tabs filled by the
// caller (row i = one sequence); K/V of each new token written at its
// position; the final norm and the logits into e->logits rows [0, n).
ot_status ot__eng_decode(ot_engine *e, int n);

#endif
