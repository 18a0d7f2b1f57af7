// Translation: the encoder once per batch, the cross K/V once per sentence,
// then greedy or beam search (ot_beam_search) whose step runs the decoder's
// one block forward over every live row's newest token (translate_cache.c
// holds the caches). Buffers are planned from the config at create.
#include "infer/translate_impl.h"
#include <math.h>
#include <stdlib.h>


static void plan_kv(ot_translator *t, ot__planner *p) {
  const size_t cross = (size_t)t->cfg.max_batch * t->Hkv * t->cfg.max_src * t->D * t->es;
  const size_t self = (size_t)t->R * t->Hkv * t->cfg.max_tgt * t->D * t->es;
  void ***lists[6] = {&t->kc, &t->vc, &t->sk, &t->sv, &t->sk2, &t->sv2};
  for (int i = 0; i < 6; i++) *lists[i] = ot__plan_take(p, sizeof(void *) * t->L);
  for (int l = 0; l < t->L; l++)
    for (int i = 0; i < 6; i++) {
      void *b = ot__plan_take(p, i < 2 ? cross : self);
      if (p->a && *lists[i]) (*lists[i])[l] = b;
    }
}

static void plan_ws(ot_translator *t, ot__planner *p) {
  const size_t es = t->es, C = (size_t)t->C, HD = (size_t)t->Hq * t->D, KD = (size_t)t->Hkv * t->D;
  const size_t NS = (size_t)t->cfg.max_batch * t->cfg.max_src, R = (size_t)t->R;
  t->stok = ot__plan_take(p, NS * sizeof(int32_t));
  void **enc[] = {&t->ex, &t->eo, &t->eres2, &t->ey1, &t->eyc, &t->ey2, &t->eabuf, &t->enc};
  for (size_t i = 0; i < sizeof enc / sizeof *enc; i++) *enc[i] = ot__plan_take(p, NS * C * es);
  t->eq = ot__plan_take(p, NS * HD * es);
  t->ek = ot__plan_take(p, NS * KD * es);
  t->ev = ot__plan_take(p, NS * KD * es);
  t->eoh = ot__plan_take(p, NS * HD * es);
  t->eatt = ot__plan_take(p, NS * HD * es);
  t->epre = ot__plan_take(p, NS * (size_t)t->Fa * es);
  t->eh = ot__plan_take(p, NS * (size_t)t->F * es);
  t->emean = ot__plan_take(p, NS * sizeof(float));
  t->erstd = ot__plan_take(p, NS * sizeof(float));
  t->ctok = ot__plan_take(p, NS * KD * es);
  t->src_len = ot__plan_take(p, sizeof(int32_t) * t->cfg.max_batch);
  t->slot_sent = ot__plan_take(p, sizeof(int32_t) * t->cfg.max_batch);
  t->kv_len = ot__plan_take(p, sizeof(int32_t) * R);
  void **dec[] = {&t->x, &t->xo, &t->x2, &t->y1, &t->yc, &t->y2, &t->resc, &t->abuf};
  for (size_t i = 0; i < sizeof dec / sizeof *dec; i++) *dec[i] = ot__plan_take(p, R * C * es);
  void **hd[] = {&t->q, &t->oh, &t->qc, &t->attyc, &t->qh, &t->oh2};
  for (size_t i = 0; i < sizeof hd / sizeof *hd; i++) *hd[i] = ot__plan_take(p, R * HD * es);
  t->kn = ot__plan_take(p, R * KD * es);
  t->vn = ot__plan_take(p, R * KD * es);
  t->pre = ot__plan_take(p, R * (size_t)t->Fa * es);
  t->h = ot__plan_take(p, R * (size_t)t->F * es);
  t->mean = ot__plan_take(p, R * sizeof(float));
  t->rstd = ot__plan_take(p, R * sizeof(float));
  t->lgdt = t->dt == OT_F32 ? NULL : ot__plan_take(p, R * (size_t)t->V * es);
  t->logits = ot__plan_take(p, R * (size_t)t->V * sizeof(float));
  const size_t QKV = HD + 2 * KD;
  t->eqkv = t->quant ? ot__plan_take(p, NS * QKV * sizeof(float)) : NULL;
  t->dqkv = t->quant ? ot__plan_take(p, R * QKV * sizeof(float)) : NULL;
}

void ot_translator_free(ot_translator *t) {
  if (!t) return;
  ot_arena_destroy(&t->a_kv);
  ot_arena_destroy(&t->a_ws);
  free(t->qeblk);
  free(t->qdblk);
  free(t->cviews);
  free(t->sin_tab);
  free(t);
}

// Resolves and checks the config against the model, plans and allocates.
ot_status ot__tr_setup(ot_translator *t, const ot_translator_config *cfg, const char *fn) {
  const ot_model_config *mc = &t->mc;
  ot_translator_config k = *cfg;
  if (k.max_batch < 1 || k.max_batch > 65536)
    return ot_error(OT_EINVAL, "%s: max_batch=%d must be in [1, 65536]", fn, k.max_batch);
  if (k.num_beams < 1 || k.num_beams > 256)
    return ot_error(OT_EINVAL, "%s: num_beams=%d must be in [1, 256]", fn, k.num_beams);
  if (k.max_src == 0) k.max_src = mc->max_seq;
  if (k.max_src < 1 || k.max_src > mc->max_seq)
    return ot_error(OT_EINVAL, "%s: max_src=%d must be in [1, %d] (the model's max_seq), or 0 "
                    "for all of it", fn, k.max_src, mc->max_seq);
  if (k.max_tgt == 0) k.max_tgt = mc->max_seq;
  if (k.max_tgt < 2 || k.max_tgt > mc->max_seq)
    return ot_error(OT_EINVAL, "%s: max_tgt=%d must be in [2, %d] (the model's max_seq), or 0 "
                    "for all of it", fn, k.max_tgt, mc->max_seq);
  const ot__graph *g = t->sg.dec;
  t->cfg = k;
  t->C = g->a.C; t->Hq = g->a.Hq; t->Hkv = g->a.Hkv; t->D = g->a.D;
  t->F = g->a.F; t->Fa = g->a.Fa; t->L = g->L; t->Le = t->sg.enc->L; t->V = mc->vocab;
  t->R = k.max_batch * k.num_beams;
  t->dt = g->dt;
  t->es = ot_dtype_size(t->dt);
  t->src.base.attend = ot__tr_attend;
  t->src.base.cross = ot__tr_cross;
  t->src.t = t;
  ot__planner dk = {0}, dw = {0};
  plan_kv(t, &dk);
  plan_ws(t, &dw);
  OT_TRY(ot_arena_init(&t->a_kv, "translate-cache", dk.bytes, OT_MEM_KVCACHE));
  OT_TRY(ot_arena_init(&t->a_ws, "translate-workspace", dw.bytes, OT_MEM_WORKSPACE));
  memset(t->a_kv.base, 0, t->a_kv.cap);   // defined contents (never read beyond lengths)
  memset(t->a_ws.base, 0, t->a_ws.cap);
  ot__planner pk = {&t->a_kv, 0, false}, pw = {&t->a_ws, 0, false};
  plan_kv(t, &pk);
  plan_ws(t, &pw);
  if (pk.failed || pw.failed || t->a_kv.used != t->a_kv.cap || t->a_ws.used != t->a_ws.cap)
    return ot_error(OT_EINTERNAL, "%s: the translator's plan does not cover its allocation", fn);
  return OT_OK;
}

ot_status ot_translator_create(ot_translator **out, const ot_model *m,
                               const ot_translator_config *cfg) {
  static const char fn[] = "ot_translator_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(cfg, fn);
  ot_translator *t = calloc(1, sizeof *t);
  if (!t) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  t->mc = *ot_model_config_of(m);
  ot_status s = ot__model_s2s_graph(m, &t->sg);
  if (s != OT_OK) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", ot_last_error());
    s = ot_error(s, "%s: %s", fn, msg);
  }
  if (s == OT_OK) s = ot__tr_setup(t, cfg, fn);
  if (s != OT_OK) {
    ot_translator_free(t);
    return s;
  }
  *out = t;
  return OT_OK;
}

const ot_translator_config *ot_translator_config_of(const ot_translator *t) {
  return t ? &t->cfg : NULL;
}
const ot_model_config *ot_translator_model_config(const ot_translator *t) {
  return t ? &t->mc : NULL;
}
size_t ot_translator_cache_bytes(const ot_translator *t) { return t ? t->a_kv.cap : 0; }
size_t ot_translator_workspace_bytes(const ot_translator *t) { return t ? t->a_ws.cap : 0; }

// ------------------------------------------------------------- encoder ------
ot_status ot__tr_encode(ot_translator *t, int batch, const int32_t *src, int S,
                        const int32_t *src_len) {
  const ot__graph *g = t->sg.enc;
  const bool post = g->a.post;
  int Sm = 1;   // this call's stride: the longest source
  for (int b = 0; b < batch; b++) Sm = src_len[b] > Sm ? src_len[b] : Sm;
  for (int b = 0; b < batch; b++) {
    t->src_len[b] = src_len[b];
    t->slot_sent[b] = b;
    for (int i = 0; i < Sm; i++)
      t->stok[(size_t)b * Sm + i] = i < src_len[b] ? src[(size_t)b * S + i] : t->mc.pad_id;
  }
  t->S = Sm;
  t->n_slots = batch;
  t->rows = 0;
  t->len = 0;
  OT_TRY(ot__s2s_embed_fwd(g, &t->sg.eemb, t->ex, t->ey1, t->emean, t->erstd, t->stok, batch, Sm,
                           0));
  ot__layer_acts A = {t->ex, t->emean, t->erstd, t->ey1, t->eq, t->ek, t->ev, t->eatt, NULL,
                      t->eres2, t->emean, t->erstd, t->ey2, t->epre, t->eh};
  ot__kv_self self = ot__kv_self_make(t->src_len);
  ot__block_io io = {batch, Sm, t->ex, NULL, &A, t->eabuf, t->eoh, t->eqkv, 0, NULL, &self.base,
                     NULL};
  for (int l = 0; l < t->Le; l++) {
    io.out = post && l + 1 == t->Le ? t->enc : t->eo;
    OT_TRY(ot__block_fwd(g, l, &io, true));
    io.x = post ? io.out : t->eres2;
    io.r = post ? NULL : t->eabuf;
  }
  if (!post)
    OT_TRY(ot__norm_fwd(g, t->enc, t->emean, t->erstd, t->eyc, io.x, io.r, g->lnf_w, g->lnf_b,
                        batch * Sm));
  // every decoder block's cross K/V, once per sentence
  for (int l = 0; l < t->L; l++)
    OT_TRY(ot__cross_kv_fwd(t->sg.dec, l, t->kc[l], t->vc[l], t->ctok, t->enc, batch, Sm));
  return OT_OK;
}

// -------------------------------------------------------------- decoder -----
ot_status ot__tr_step(void *ctx, int step, int rows, const int32_t *tokens, const int32_t *parent,
                      const int32_t *sentence, float *logits, int ld) {
  ot_translator *t = ctx;
  const ot__graph *g = t->sg.dec;
  const bool post = g->a.post;
  if (step != t->len || t->len >= t->cfg.max_tgt)
    return ot_error(OT_EINTERNAL, "translator: step %d with %d tokens cached (capacity %d)", step,
                    t->len, t->cfg.max_tgt);
  OT_TRY(ot__tr_reorder(t, rows, parent, sentence));
  for (int r = 0; r < rows; r++) {
    if (tokens[r] < 0 || tokens[r] >= t->V)
      return ot_error(OT_EINVAL, "translator: token %d of row %d outside [0, vocab=%d)", tokens[r],
                      r, t->V);
    t->kv_len[r] = t->len + 1;
  }
  OT_TRY(ot__s2s_embed_fwd(g, &t->sg.demb, t->x, t->y1, t->mean, t->rstd, tokens, rows, 1,
                           t->len));
  ot__layer_acts A = {t->x, t->mean, t->rstd, t->y1, t->q, t->kn, t->vn, NULL, NULL, t->x2,
                      t->mean, t->rstd, t->y2, t->pre, t->h, t->yc, t->resc, t->mean, t->rstd,
                      t->qc, t->attyc, NULL, NULL, NULL};
  ot__block_io io = {rows, 1, t->x, NULL, &A, t->abuf, t->oh, t->dqkv, t->len, NULL,
                     &t->src.base, t->xo};
  for (int l = 0; l < t->L; l++) {
    OT_TRY(ot__block_fwd(g, l, &io, true));
    io.x = post ? t->xo : t->x2;
    io.r = post ? NULL : t->abuf;
  }
  const void *y = t->xo;
  if (!post) {
    OT_TRY(ot__norm_fwd(g, t->y2, t->mean, t->rstd, t->yc, io.x, io.r, g->lnf_w, g->lnf_b, rows));
    y = t->y2;
  }
  void *lg = t->dt == OT_F32 ? (void *)t->logits : t->lgdt;
  OT_TRY(ot__wlinear(t->dt, lg, NULL, y, &g->head, t->sg.head_b, rows, t->V, t->C, OT_ACT_NONE));
  if (t->dt != OT_F32) OT_TRY(ot_convert(lg, t->dt, t->logits, OT_F32, (size_t)rows * t->V));
  t->len++;
  if (t->stats) {
    t->stats->steps++;
    t->stats->rows += rows;
  }
  if (logits)
    for (int r = 0; r < rows; r++)
      memcpy(logits + (size_t)r * ld, t->logits + (size_t)r * t->V, sizeof(float) * t->V);
  return OT_OK;
}

// ------------------------------------------------------------ translate -----
static int limit_of(const ot_beam_config *c, int src_len) {
  int lim = c->max_length > 0 ? c->max_length : 0;
  if (c->max_len_a != 0.0f || c->max_len_b != 0.0f) {
    const int l = (int)floor((double)c->max_len_a * src_len + (double)c->max_len_b);
    lim = lim > 0 && lim < l ? lim : l;
  }
  return lim;
}

ot_status ot_translate_ids(ot_translator *t, int batch, const int32_t *src, int S,
                           const int32_t *src_len, const ot_beam_config *cfg,
                           int32_t *out_tokens, int cap, int *out_len, float *out_score,
                           ot_translate_stats *stats) {
  static const char fn[] = "ot_translate_ids";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(src, fn);
  OT_CHECK_PTR(src_len, fn);
  OT_CHECK_PTR(cfg, fn);
  if (batch < 1 || batch > t->cfg.max_batch)
    return ot_error(OT_EINVAL, "%s: batch=%d outside [1, %d] (the translator's max_batch: "
                    "create it with a larger one, or translate in chunks)", fn, batch,
                    t->cfg.max_batch);
  if (S < 1) return ot_error(OT_EINVAL, "%s: S=%d must be >= 1", fn, S);
  if (cfg->num_beams < 1 || cfg->num_beams > t->cfg.num_beams)
    return ot_error(OT_EINVAL, "%s: num_beams=%d outside [1, %d] (the translator's num_beams)",
                    fn, cfg->num_beams, t->cfg.num_beams);
  if (cfg->vocab != t->V)
    return ot_error(OT_EINVAL, "%s: the search's vocab=%d is not the model's %d", fn, cfg->vocab,
                    t->V);
  for (int b = 0; b < batch; b++) {
    if (src_len[b] < 1)
      return ot_error(OT_EINVAL, "%s: source %d is empty (src_len=%d; every source needs at "
                      "least one token, e.g. eos)", fn, b, src_len[b]);
    if (src_len[b] > S || src_len[b] > t->cfg.max_src)
      return ot_error(OT_EINVAL, "%s: source %d has %d tokens, longer than %s=%d (split or "
                      "skip it, or create the translator with a larger max_src)", fn, b,
                      src_len[b], src_len[b] > S ? "S" : "max_src",
                      src_len[b] > S ? S : t->cfg.max_src);
    for (int i = 0; i < src_len[b]; i++) {
      const int32_t v = src[(size_t)b * S + i];
      if (v < 0 || v >= t->V)
        return ot_error(OT_EINVAL, "%s: source %d token %d is %d, not a token id (vocab %d)", fn,
                        b, i, v, t->V);
    }
    const int lim = limit_of(cfg, src_len[b]);
    if (lim > t->cfg.max_tgt)
      return ot_error(OT_EINVAL, "%s: sentence %d's length limit %d exceeds max_tgt=%d (lower "
                      "max_length / max_len_a / max_len_b, or create the translator with a "
                      "larger max_tgt)", fn, b, lim, t->cfg.max_tgt);
  }
  ot_translate_stats st = {0};
  st.sentences = batch;
  const double t0 = ot_now();
  OT_PROF_BEGIN("translate", 0.0, 0.0);
  ot_status s = ot__tr_encode(t, batch, src, S, src_len);
  const double t1 = ot_now();
  t->stats = &st;
  if (s == OT_OK)
    s = ot_beam_search(cfg, batch, src_len, ot__tr_step, t, out_tokens, cap, out_len, out_score,
                       NULL);
  t->stats = NULL;
  OT_PROF_STOP();
  st.encode_s = t1 - t0;
  st.decode_s = ot_now() - t1;
  if (stats) *stats = st;
  return s;
}
