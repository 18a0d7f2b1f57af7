// The translator's internals (src/infer/translate.c, translate_cache.c): its
// struct, the encoder pass and the decoder step that ot_translate_ids hands to
// ot_beam_search (tests drive them directly, teacher-forced).
#ifndef OT_INFER_TRANSLATE_IMPL_H
#define OT_INFER_TRANSLATE_IMPL_H
#include "model/graph.h"
#include "ot/infer.h"

typedef struct ot_translator ot_translator;

// The decoder's key/value source: self-attention over the rows' caches, cross-
// attention over the sentences' cached cross K/V.
typedef struct {
  ot__kvsrc base;
  ot_translator *t;
} ot__tr_src;

struct ot_translator {
  ot__s2s_graph sg;
  ot_model_config mc;
  // quantized translators own their graphs (weights: the caller's ot_qmodel)
  ot__graph qenc, qdec;
  ot__block_w *qeblk, *qdblk;
  ot_qweight qhead, *cviews;
  float *sin_tab;
  bool quant;                          // quantized weights: QKV through f32 scratch
  ot_translator_config cfg;    // resolved
  int C, Hq, Hkv, D, F, Fa, L, Le, V, R;   // R: most decoder rows (max_batch * num_beams)
  ot_dtype dt;
  size_t es;
  ot__tr_src src;
  ot_arena a_kv, a_ws;
  // encoder, NS = max_batch * max_src rows
  int32_t *stok;                       // [NS] padded sources
  void *ex, *eo, *eres2, *ey1, *eyc, *ey2, *eabuf, *eq, *ek, *ev, *eoh, *eatt, *epre, *eh;
  float *emean, *erstd;                // [NS]
  void *enc;                           // [NS, C] encoder output
  void *ctok;                          // [NS, Hkv*D] cross K/V scratch
  float *eqkv, *dqkv;                  // quantized: [NS | R, QKV] f32 QKV scratch (else NULL)
  // cross K/V per decoder block: [max_batch, Hkv, max_src, D], slot i = sentence slot_sent[i]
  void **kc, **vc;
  int32_t *src_len, *slot_sent;        // [max_batch]
  int n_slots, S;                      // live slots; this call's source stride
  // self-attention cache per decoder block: [R, Hkv, max_tgt, D], double-buffered for gathers
  void **sk, **sv, **sk2, **sv2;
  int32_t *kv_len;                     // [R]
  int rows, len;                       // rows held, tokens held per row
  // decoder step buffers, R rows
  void *x, *xo, *x2, *y1, *yc, *y2, *resc, *abuf, *q, *kn, *vn, *oh, *qc, *attyc, *pre, *h;
  void *qh, *oh2;                      // [R, Hq, D] cross-attention queries / output, grouped
  float *mean, *rstd;                  // [R]
  void *lgdt;                          // [R, V] dt logits (bf16 only)
  float *logits;                       // [R, V] f32 logits of the latest step
  ot_translate_stats *stats;
};

// Resolves cfg against t->mc and t->sg (set by the caller), plans and allocates
// the arenas. fn names the caller in messages.
ot_status ot__tr_setup(ot_translator *t, const ot_translator_config *cfg, const char *fn);
// Runs the encoder over src [batch, S] (validated by the caller) and projects
// every decoder block's cross K/V; resets the decoder caches.
ot_status ot__tr_encode(ot_translator *t, int batch, const int32_t *src, int S,
                        const int32_t *src_len);
// ot_beam_step_fn over the translator (ctx = t): rows' last tokens at position
// `step`, caches gathered by parent, logits [rows, ld] (also kept in t->logits).
ot_status ot__tr_step(void *ctx, int step, int rows, const int32_t *tokens, const int32_t *parent,
                      const int32_t *sentence, float *logits, int ld);
// The cache's key/value callbacks (translate_cache.c).
ot_status ot__tr_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                        const void *q, const void *k, const void *v, int B, int T);
ot_status ot__tr_cross(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                       const void *q, int B, int T);
// Reorders the self caches by parent (rows entries) and the cross slots by the
// rows' sentences; nothing moves when the order is unchanged.
ot_status ot__tr_reorder(ot_translator *t, int rows, const int32_t *parent,
                         const int32_t *sentence);

#endif
