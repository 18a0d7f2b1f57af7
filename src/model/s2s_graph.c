// The two stacks of an encoder-decoder as an incremental decoder reads them
// (src/infer/translate.c): the encoder and decoder graphs of a model, the
// embedding of each stack at any position, and the logits bias. The blocks
// run through the one block forward (block.c); nothing here is a second copy
// of a forward: ot__s2s_embed_fwd is the embedding of encdec.c's forward at
// positions pos0 + t (the same arithmetic, so the logits agree bitwise in f32).
#include "model_impl.h"
#include <math.h>


static ot__s2s_emb emb_of(const ot_model *m, int pos, int lw, int lb) {
  ot__s2s_emb e = {m->cfg.embed_scale ? (float)sqrt((double)m->C) : 1.0f, m->pos_tab,
                   ot__pdt(m, pos), m->cfg.pos_offset, ot__pw(m, lw), ot__pw(m, lb)};
  return e;
}

ot_status ot__model_s2s_graph(const ot_model *m, ot__s2s_graph *out) {
  static const char fn[] = "ot__model_s2s_graph";
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(out, fn);
  if (m->cfg.arch != OT_ARCH_ENCDEC)
    return ot_error(OT_EINVAL, "'%s' is a decoder-only model, not an encoder-decoder (translate "
                    "with an encoder-decoder such as a MarianMTModel directory)", m->cfg.name);
  if (!ot__is_whole(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout", fn);
  memset(out, 0, sizeof *out);
  out->enc = &m->egraph;
  out->dec = &m->graph;
  out->eemb = emb_of(m, m->epos, m->elne_w, m->elne_b);
  out->demb = emb_of(m, m->dpos, m->dlne_w, m->dlne_b);
  out->head_b = ot__pw(m, m->lbias);
  out->max_seq = m->cfg.max_seq;
  return OT_OK;
}

ot_status ot__s2s_embed_fwd(const ot__graph *g, const ot__s2s_emb *e, void *x, void *tmp,
                            float *mean, float *rstd, const int32_t *tok, int B, int T, int pos0) {
  const ot_dtype dt = g->dt;
  const int C = g->a.C;
  const float sc = e->scale;
  void *dst = e->ln_w ? tmp : x;
  const long n = (long)B * T;
  if (g->wte.q) {   // quantized table: f32 activations, one dequantized row per token
    if (dt != OT_F32) return ot_error(OT_EINVAL, "quantized embedding with %s activations",
                                      ot_dtype_name(dt));
    for (long i = 0; i < n; i++) OT_TRY(ot_qweight_row(g->wte.q, tok[i], (float *)dst + i * C));
  }
  const void *w = g->wte.dense;
  const ot_dtype wdt = g->wte.w32 ? OT_F32 : dt;   // the tables' dtype (learned positions too)
#pragma omp parallel for schedule(static) if (n * C >= 65536)
  for (long i = 0; i < n; i++) {
    const size_t row = (size_t)tok[i] * C, o = (size_t)i * C, p = (size_t)(pos0 + i % T);
    const float *sin_row = e->sin_tab ? e->sin_tab + p * C : NULL;
    for (int c = 0; c < C; c++) {
      const float pe = sin_row ? sin_row[c] : ot__ldf(wdt, e->lpos, (p + e->off) * C + c);
      const float t = w ? ot__ldf(wdt, w, row + c) : ((const float *)dst)[o + c];
      ot__stf(dt, dst, o + c, t * sc + pe);
    }
  }
  if (!e->ln_w) return OT_OK;
  return ot__norm_fwd(g, x, mean, rstd, NULL, tmp, NULL, e->ln_w, e->ln_b, B * T);
}
