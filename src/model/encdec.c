// The encoder-decoder Transformer (the original Transformer, Marian) as parts
// of the one model graph: the encoder is a stack of the one block (graph.h,
// block.c) with bidirectional self-attention masked by the source lengths; the
// decoder is the same block with causal self-attention and cross-attention over
// the encoder output (through the key/value source's cross interface). This
// file holds what only encoder-decoders need: config checks, the scaled token
// embedding with sinusoidal positions, the training step (forward over both
// stacks, then the backward from the head through the decoder, the gradient of
// the encoder output summed over every decoder block's cross K/V, and the
// encoder) and the MLP activations ReLU and exact (erf) GELU.
#include "model_impl.h"
#include <math.h>

// ------------------------------------------------------------ config ------
const char *ot__mlp_name(ot_mlp_kind k) {
  switch (k) {
    case OT_MLP_GELU: return "gelu";
    case OT_MLP_SWIGLU: return "swiglu";
    case OT_MLP_RELU: return "relu";
    case OT_MLP_GELU_ERF: return "gelu_erf";
  }
  return "unknown";
}

ot_status ot__encdec_validate(const ot_model_config *c, const char *n) {
  if (c->names != OT_NAMES_MARIAN)
    return ot_error(OT_EINVAL, "%s: an encoder-decoder model takes marian names (names=%d)", n,
                    (int)c->names);
  if (c->n_enc_layers <= 0 || c->n_enc_layers > 4096)
    return ot_error(OT_EINVAL, "%s: n_enc_layers=%d must be in [1, 4096] for an encoder-decoder "
                    "model", n, c->n_enc_layers);
  if (c->mlp != OT_MLP_GELU && c->mlp != OT_MLP_SWIGLU && c->mlp != OT_MLP_RELU &&
      c->mlp != OT_MLP_GELU_ERF)
    return ot_error(OT_EINVAL, "%s: activation=%d unknown (use relu, gelu_erf, gelu or swiglu)", n,
                    (int)c->mlp);
  if (c->pos != OT_POS_SINUSOID && c->pos != OT_POS_LEARNED)
    return ot_error(OT_EUNSUPPORTED, "%s: positions=rope unsupported in an encoder-decoder model "
                    "(use sinusoid or learned)", n);
  if (c->pos_offset < 0 || c->pos_offset > 1024 || (c->pos_offset && c->pos != OT_POS_LEARNED))
    return ot_error(OT_EINVAL, "%s: pos_offset=%d must be in [0, 1024], and 0 unless positions "
                    "are learned", n, c->pos_offset);
  if (c->pos == OT_POS_SINUSOID && c->d_model % 2)
    return ot_error(OT_EINVAL, "%s: sinusoidal positions need an even d_model, got %d", n,
                    c->d_model);
  if (c->norm_place != OT_PLACE_PRE && c->norm_place != OT_PLACE_POST)
    return ot_error(OT_EINVAL, "%s: norm_place=%d unknown (use pre or post)", n,
                    (int)c->norm_place);
  if (c->src_vocab != 0)
    return ot_error(OT_EUNSUPPORTED, "%s: src_vocab=%d: separate source vocabularies are not "
                    "supported (0: source and target share the vocabulary)", n, c->src_vocab);
  const int ids[3] = {c->pad_id, c->eos_id, c->decoder_start_id};
  const char *names[3] = {"pad_id", "eos_id", "decoder_start_id"};
  for (int i = 0; i < 3; i++)
    if (ids[i] < 0 || ids[i] >= c->vocab)
      return ot_error(OT_EINVAL, "%s: %s=%d is not a token id (vocab %d)", n, names[i], ids[i],
                      c->vocab);
  return OT_OK;
}

// --------------------------------------------------------- element-wise ---

void ot__add_into(ot_dtype dt, void *y, const void *x, size_t n) {
  const long nn = (long)n;
#pragma omp parallel for schedule(static) if (nn >= 65536)
  for (long i = 0; i < nn; i++) ot__stf(dt, y, (size_t)i, ot__ldf(dt, y, (size_t)i) + ot__ldf(dt, x, (size_t)i));
}

void ot_ref_relu_fwd(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// ReLU here; the erf GELU is the ops layer's SIMD kernel (ot_gelu_erf_fwd / _bwd).
ot_status ot__act_fwd(ot_mlp_kind k, ot_dtype dt, void *y, const void *x, size_t n) {
  if (k == OT_MLP_GELU_ERF) return ot_gelu_erf_fwd(dt, y, x, n);
  if (k != OT_MLP_RELU) return ot_error(OT_EINVAL, "activation %s has its own kernel", ot__mlp_name(k));
  const long nn = (long)n;
#pragma omp parallel for schedule(static) if (nn >= 65536)
  for (long i = 0; i < nn; i++) {
    const float v = ot__ldf(dt, x, (size_t)i);
    ot__stf(dt, y, (size_t)i, v > 0.0f ? v : 0.0f);
  }
  return OT_OK;
}

ot_status ot__act_bwd(ot_mlp_kind k, ot_dtype dt, void *dx, const void *x, const void *dy,
                      size_t n) {
  if (k == OT_MLP_GELU_ERF) return ot_gelu_erf_bwd(dt, dx, x, dy, n);
  if (k != OT_MLP_RELU) return ot_error(OT_EINVAL, "activation %s has its own kernel", ot__mlp_name(k));
  const long nn = (long)n;
#pragma omp parallel for schedule(static) if (nn >= 65536)
  for (long i = 0; i < nn; i++) {
    const float v = ot__ldf(dt, x, (size_t)i), g = ot__ldf(dt, dy, (size_t)i);
    ot__stf(dt, dx, (size_t)i, v > 0.0f ? g : 0.0f);
  }
  return OT_OK;
}

// ---------------------------------------------------------- embedding -----
void ot__sinusoid_table(float *tab, int Tmax, int C) {
  const int h = C / 2;
  for (int p = 0; p < Tmax; p++)
    for (int i = 0; i < h; i++) {
      const double a = (double)p / pow(10000.0, 2.0 * i / (double)C);
      tab[(size_t)p * C + i] = (float)sin(a);
      tab[(size_t)p * C + h + i] = (float)cos(a);
    }
}

static float embed_scale(const ot_model *m) {
  return m->cfg.embed_scale ? (float)sqrt((double)m->C) : 1.0f;
}

// x [B*T, C] (dt) at the tokens whose local row (token - v0) lies in [r0, r0 + rows):
// scale * w[row - r0] + position t (the sinusoid table, or row t + pos_offset of learned
// table `pos`); w [rows, C] in wdt.
static void embed_rows(const ot_model *m, void *x, const void *w, ot_dtype wdt, long r0, long rows,
                       const int32_t *tok, int B, int T, int pos) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C, off = m->cfg.pos_offset;
  const float sc = embed_scale(m);
  const void *lp = ot__pdt(m, pos);
  const ot_dtype pdt = ot__wdt(m);   // the position table's dtype
  const long n = (long)B * T;
#pragma omp parallel for schedule(static) if (n * C >= 65536)
  for (long i = 0; i < n; i++) {
    const long r = (long)tok[i] - m->v0 - r0;
    if (r < 0 || r >= rows) continue;
    const size_t o = (size_t)i * C, p = (size_t)(i % T), row = (size_t)r * C;
    const float *sin_row = m->pos_tab ? m->pos_tab + p * C : NULL;
    for (int c = 0; c < C; c++) {
      const float pe = sin_row ? sin_row[c] : ot__ldf(pdt, lp, (p + off) * C + c);
      ot__stf(dt, x, o + c, ot__ldf(wdt, w, row + c) * sc + pe);
    }
  }
}

// x [B*T, C] (dt) = scale * wte[tokens] + position t (see embed_rows); ids checked by the
// caller. Vocabulary-parallel (the tensor rank holds rows [v0, v0 + Vl)): the rank holding
// a token's row writes the whole sum, the others 0, and the tensor group sums (so every
// rank gets the one-process bits). ZeRO-3: the rows read a chunk at a time (ot__z3_rows).
static ot_status s2s_embed(const ot_model *m, void *x, const int32_t *tok, int B, int T, int pos) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C;
  const long n = (long)B * T, v0 = m->v0, Vl = m->Vl;
  for (long i = 0; i < n; i++) {   // another tensor rank's row
    const long r = (long)tok[i] - v0;
    if (r < 0 || r >= Vl)
      for (int c = 0; c < C; c++) ot__stf(dt, x, (size_t)i * C + c, 0.0f);
  }
  if (!m->part.param_slots) {
    embed_rows(m, x, ot__pdt(m, m->wte), ot__wdt(m), 0, Vl, tok, B, T, pos);
  } else {
    const int R = m->part.comm.row_rows;
    for (int r0 = 0; r0 < Vl; r0 += R) {
      const int rows = r0 + R < Vl ? R : (int)Vl - r0;
      ot_dtype wdt;
      const void *w = ot__z3_rows(m, m->wte, r0, rows, &wdt);
      embed_rows(m, x, w, wdt, r0, rows, tok, B, T, pos);
    }
  }
  if (!(m->part.vocab_parallel && m->part.tp > 1)) return OT_OK;
  return m->part.comm.allreduce(m->part.comm.ctx, x, (size_t)n * C, dt, OT_RED_SUM);
}

// dw [rows, C] += scale * dout [B*T, C] at the tokens of tok whose local row (token - v0)
// lies in [r0, r0 + rows) (dw may be NULL), learned positions dp += dout (NULL: none; every
// tensor rank: the table is replicated); serial: rows repeat.
static void s2s_embed_rows(const ot_model *m, float *dw, int r0, int rows, float *dp,
                           const void *dout, const int32_t *tok, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C, off = m->cfg.pos_offset;
  const float sc = embed_scale(m);
  for (int i = 0; i < B * T; i++) {
    const long lr = (long)tok[i] - m->v0 - r0;   // the row in dw
    const bool in = dw && lr >= 0 && lr < rows;
    float *r = in ? dw + (size_t)lr * C : NULL;
    float *q = dp ? dp + (size_t)(i % T + off) * C : NULL;
    if (!r && !q) continue;
    for (int c = 0; c < C; c++) {
      const float g = ot__ldf(dt, dout, (size_t)i * C + c);
      if (r) r[c] += sc * g;
      if (q) q[c] += g;
    }
  }
}

// The embedding's gradients of one stack from dout [B*T, C]: wte += scale * dout at the
// rows of tok, learned positions += dout. With vocabulary chunks (ZeRO-2: comm.vocab_chunk)
// the wte gradient goes chunk by chunk through comm.chunk_buf.
static void s2s_embed_bwd(ot_model *m, const void *dout, const int32_t *tok, int B, int T,
                          int pos) {
  float *dp = ot__pg(m, pos);
  const ot_model_comm *pc = &m->part.comm;
  if (!pc->vocab_chunk) {
    s2s_embed_rows(m, ot__pg(m, m->wte), 0, m->Vl, dp, dout, tok, B, T);
    return;
  }
  if (dp) s2s_embed_rows(m, NULL, 0, 0, dp, dout, tok, B, T);
  const int R = pc->chunk_rows > 0 && pc->chunk_rows < m->Vl ? pc->chunk_rows : m->Vl;
  for (int r0 = 0; r0 < m->Vl; r0 += R) {
    const int rows = r0 + R < m->Vl ? R : m->Vl - r0;
    memset(pc->chunk_buf, 0, (size_t)rows * m->C * sizeof(float));
    s2s_embed_rows(m, pc->chunk_buf, r0, rows, NULL, dout, tok, B, T);
    pc->vocab_chunk(pc->ctx, m->wte, r0, rows);
  }
}

// One stack's embedding tensors and buffers.
typedef struct {
  int pos, lw, lb;        // learned positions, embedding norm (-1: absent)
  void *emb;              // embedding norm input (embed_norm)
  float *mean, *rstd;
} stack_emb;

static stack_emb enc_emb(const ot_model *m) {
  stack_emb e = {m->epos, m->elne_w, m->elne_b, m->eemb, m->eemean, m->eerstd};
  return e;
}
static stack_emb dec_emb(const ot_model *m) {
  stack_emb e = {m->dpos, m->dlne_w, m->dlne_b, m->demb, m->demean, m->derstd};
  return e;
}

// x0 [B*T, C]: the embedding, then (embed_norm) its norm, then the stack's embedding
// dropout d (HF Marian / mBART order).
static ot_status stack_embed_fwd(ot_model *m, const ot__graph *g, const stack_emb *e, void *x0,
                                 const int32_t *tok, int B, int T, const ot__dropout *d) {
  OT_TRY(s2s_embed(m, m->cfg.embed_norm ? e->emb : x0, tok, B, T, e->pos));
  if (m->cfg.embed_norm)
    OT_TRY(ot__norm_fwd(g, x0, e->mean, e->rstd, NULL, e->emb, NULL, ot__pw(m, e->lw),
                        ot__pw(m, e->lb), B * T));
  return ot__drop_fwd(d, d->resid, m->run.dt, x0, (size_t)B * T * m->C, 0, OT__DROP_EMBED);
}

// From m->dres (the gradient of x0; overwritten) to the embedding's parameters.
static ot_status stack_embed_bwd(ot_model *m, const stack_emb *e, const int32_t *tok, int B,
                                 int T, const ot__dropout *d) {
  OT_TRY(ot__drop_bwd(d, d->resid, m->run.dt, m->dres, m->dres, (size_t)B * T * m->C, 0,
                      OT__DROP_EMBED));
  const void *g = m->dres;
  if (m->cfg.embed_norm) {
    OT_TRY(ot__norm_bwd(m, m->dy, e->lw, e->lb, m->dres, NULL, e->emb, e->mean, e->rstd, B * T));
    g = m->dy;
  }
  s2s_embed_bwd(m, g, tok, B, T, e->pos);
  return OT_OK;
}

// ------------------------------------------------------------ forward -----
static ot_status check_ids(const int32_t *ids, int rows, int cols, const int32_t *len, int V,
                           const char *what, const char *fn) {
  for (int b = 0; b < rows; b++)
    for (int t = 0; t < (len ? len[b] : cols); t++) {
      const int32_t v = ids[(size_t)b * cols + t];
      if (v < 0 || v >= V)
        return ot_error(OT_EINVAL, "%s: %s[%d][%d]=%d is not a token id (vocab %d)", fn, what, b,
                        t, v, V);
    }
  return OT_OK;
}

static ot_status s2s_check(const ot_model *m, const ot_s2s_batch *b, float count, bool want_grad,
                           const char *fn) {
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(b, fn);
  if (m->cfg.arch != OT_ARCH_ENCDEC)
    return ot_error(OT_EINVAL, "%s: '%s' is a decoder-only model (use ot_model_forward)", fn,
                    m->cfg.name);
  // the plan holds tokens: any B rows whose B*S source and B*T target tokens fit
  const int64_t ns = (int64_t)b->B * b->S, nt = (int64_t)b->B * b->T;
  if (b->B <= 0 || b->S <= 0 || b->S > m->run.S || b->T <= 0 || b->T > m->run.T ||
      ns > (int64_t)m->run.B * m->run.S || nt > (int64_t)m->run.B * m->run.T)
    return ot_error(OT_EINVAL, "%s: B=%d, S=%d, T=%d outside the plan: S <= %d, T <= %d, B*S <= "
                    "%lld and B*T <= %lld tokens (run B=%d; create the model with a larger run)",
                    fn, b->B, b->S, b->T, m->run.S, m->run.T, (long long)m->run.B * m->run.S,
                    (long long)m->run.B * m->run.T, m->run.B);
  OT_CHECK_PTR(b->src, fn);
  OT_CHECK_PTR(b->src_len, fn);
  OT_CHECK_PTR(b->tgt_in, fn);
  if (want_grad && !b->targets) return ot_error(OT_EINVAL, "%s: want_grad needs targets", fn);
  if (!isfinite(count))
    return ot_error(OT_EINVAL, "%s: count=%g must be finite (> 0, or <= 0 for this call's own "
                    "non-ignored targets)", fn, count);
  for (int i = 0; i < b->B; i++)
    if (b->src_len[i] < 1 || b->src_len[i] > b->S)
      return ot_error(OT_EINVAL, "%s: src_len[%d]=%d outside [1, S=%d] (every source needs at "
                      "least one token, e.g. eos)", fn, i, b->src_len[i], b->S);
  OT_TRY(check_ids(b->src, b->B, b->S, b->src_len, m->V, "src", fn));
  OT_TRY(check_ids(b->tgt_in, b->B, b->T, NULL, m->V, "tgt_in", fn));
  if (b->targets)
    for (int i = 0; i < b->B * b->T; i++) {
      const int32_t v = b->targets[i];
      if (v != m->run.ignore_index && (v < 0 || v >= m->V))
        return ot_error(OT_EINVAL, "%s: targets[%d]=%d is neither a token id (vocab %d) nor "
                        "ignore_index=%d", fn, i, v, m->V, m->run.ignore_index);
    }
  return OT_OK;
}

// This stage's encoder blocks over m->src (the first stage embeds; a later one finds
// its input in ela[0].res). The stage of the last encoder block writes the encoder
// output to m->enc_out; an earlier stage writes its output there for the next stage.
static ot_status encode(ot_model *m, int B, int S) {
  const ot__graph *g = &m->egraph;
  const bool post = g->a.post;
  if (m->first) {
    const stack_emb e = enc_emb(m);
    OT_TRY(stack_embed_fwd(m, g, &e, m->ela[0].res, m->src, B, S, &m->edrop));
  }
  ot__kv_self self = ot__kv_self_make(m->src_len);
  self.drop = &m->edrop;
  ot__block_io io = {B, S, m->ela[0].res, NULL, NULL, m->abuf, m->ohead, NULL, 0, NULL,
                     &self.base, NULL, &m->edrop};
  for (int l = 0; l < m->Le; l++) {
    io.A = &m->ela[l];
    io.out = l + 1 < m->Le ? m->ela[l + 1].res : m->enc_out;
    ot__need_block(m, l, false);
    OT_TRY(ot__block_fwd(g, l, &io, true));
    io.x = post ? io.out : m->ela[l].res2;
    io.r = post ? NULL : m->abuf;
  }
  if (post) return OT_OK;
  if (!m->enc_last) {   // pre-norm stage output (res2 + abuf), materialized for the next stage
    ot__add_pair(m->run.dt, m->enc_out, io.x, io.r, (size_t)B * S * m->C);
    return OT_OK;
  }
  return ot__norm_fwd(g, m->enc_out, m->emean, m->erstd, m->enc_res, io.x, io.r, g->lnf_w,
                      g->lnf_b, B * S);
}

// This stage's decoder blocks over m->tgt (cross-attending m->enc_out): the stage of
// block 0 embeds, a later one finds its input in la[0].res. The last stage writes
// the head's input m->yf, an earlier one its output m->resf for the next stage.
static ot_status decode(ot_model *m, int B, int S, int T) {
  const ot__graph *g = &m->graph;
  const bool post = g->a.post;
  if (m->dec_first) {
    const stack_emb e = dec_emb(m);
    OT_TRY(stack_embed_fwd(m, g, &e, m->la[0].res, m->tgt, B, T, &m->ddrop));
  }
  ot__kv_s2s src = ot__kv_s2s_make(m->enc_out, S, m->src_len, m->la, m->ctok);
  src.self.drop = &m->ddrop;
  void *out = m->last ? m->yf : m->resf;
  ot__block_io io = {B, T, m->la[0].res, NULL, NULL, m->abuf, m->ohead, NULL, 0, NULL,
                     &src.self.base, NULL, &m->ddrop};
  for (int l = 0; l < m->L; l++) {
    io.A = &m->la[l];
    io.out = l + 1 < m->L ? m->la[l + 1].res : out;
    ot__need_block(m, m->Le + l, false);   // (ZeRO-3: the part's blocks, encoder ones first)
    OT_TRY(ot__block_fwd(g, l, &io, true));
    io.x = post ? io.out : m->la[l].res2;
    io.r = post ? NULL : m->abuf;
  }
  if (post) return OT_OK;
  if (!m->last) {
    ot__add_pair(m->run.dt, m->resf, io.x, io.r, (size_t)B * T * m->C);
    return OT_OK;
  }
  return ot__norm_fwd(g, m->yf, m->meanf, m->rstdf, m->resf, io.x, io.r, g->lnf_w, g->lnf_b,
                      B * T);
}

ot_status ot_model_forward_s2s(ot_model *m, const ot_s2s_batch *b, float count, bool want_grad,
                               double *loss) {
  return ot_model_forward_s2s_slot(m, 0, b, count, want_grad, loss);
}

ot_status ot_model_forward_s2s_slot(ot_model *m, int slot, const ot_s2s_batch *b, float count,
                                    bool want_grad, double *loss) {
  static const char fn[] = "ot_model_forward_s2s";
  OT_TRY(s2s_check(m, b, count, want_grad, fn));
  if (slot < 0 || slot >= m->part.slots)
    return ot_error(OT_EINVAL, "%s: slot %d outside [0, %d) (create the model with more slots)", fn,
                    slot, m->part.slots);
  ot__select_slot(m, slot);
  const int B = b->B, S = b->S, T = b->T;
  m->have_grad_state = false;
  m->B = B;
  m->T = T;
  m->S = S;
  // copies: source positions past src_len hold pad (never seen as keys)
  for (int i = 0; i < B; i++) {
    m->src_len[i] = b->src_len[i];
    for (int t = 0; t < S; t++)
      m->src[(size_t)i * S + t] = t < b->src_len[i] ? b->src[(size_t)i * S + t] : m->cfg.pad_id;
  }
  memcpy(m->tgt, b->tgt_in, (size_t)B * T * sizeof(int32_t));
  OT_TRY(ot__dropout_begin(m, want_grad, B, T, S, b->sample, 0, fn));
  OT_PROF_BEGIN("model_forward_s2s", 0.0, 0.0);
  ot_status s = m->Le > 0 ? encode(m, B, S) : OT_OK;
  if (s == OT_OK && m->L > 0) s = decode(m, B, S, T);
  if (s == OT_OK && m->last) s = ot__head_fwd(m, b->targets, B * T, count, want_grad, loss);
  else if (s == OT_OK) {   // an earlier pipeline stage: its output waits for the next stage
    if (loss) *loss = 0.0;
    m->have_grad_state = want_grad;
  }
  OT_PROF_STOP();
  return s;
}

void *ot_model_s2s_stage_buf(ot_model *m, int slot, ot_s2s_stage_buf which) {
  if (!m || m->cfg.arch != OT_ARCH_ENCDEC || slot < 0 || slot >= m->part.slots) return NULL;
  const ot__slot *S = &m->slots[slot];
  switch (which) {
    case OT_S2S_ENC_IN: return m->Le > 0 && !m->first ? S->ela[0].res : NULL;
    case OT_S2S_DEC_IN: return m->L > 0 && !m->dec_first ? S->la[0].res : NULL;
    case OT_S2S_ENC_OUT: return S->enc_out;
    case OT_S2S_DEC_OUT: return m->L > 0 && !m->last ? S->resf : NULL;
    case OT_S2S_GRAD: return m->dres;
    case OT_S2S_ENC_GRAD: return m->denc;
  }
  return NULL;
}

const void *ot_model_encoder_out(const ot_model *m, int *ldo) {
  if (!m || m->cfg.arch != OT_ARCH_ENCDEC) return NULL;
  if (ldo) *ldo = m->C;
  return m->enc_out;
}

// ----------------------------------------------------------- backward -----
// The backward of this stage's blocks (a pipeline stage: see ot_model_s2s_stage_buf).
// Decoder: from the head (last stage) or the gradient of the stage output in m->dres;
// every decoder block's cross K/V add their part of the encoder output's gradient into
// m->denc (zeroed on the last stage, else the later stages' partial sum), continuing
// the one-process order block by block. The stage of the last encoder block sums the
// tensor group's parts and runs the encoder from it; an earlier encoder stage starts
// from the gradient of its output in m->dres. m->dres ends as the gradient of the
// stage's input (the decoder's, or the encoder's when the stage holds encoder blocks).
ot_status ot__s2s_backward(ot_model *m) {
  const int B = m->B, T = m->T, S = m->S, N = B * T, NS = B * S;
  const size_t es = ot_dtype_size(m->run.dt), C = (size_t)m->C;
  const bool post = m->cfg.norm_place == OT_PLACE_POST;
  if (m->L > 0) {
    // head (post-norm: the last decoder block's output feeds it directly)
    if (m->last) {
      memset(m->denc, 0, (size_t)NS * C * es);
      // vocabulary-parallel: each tensor rank's rows gave their part of the head's input
      // gradient
      const bool vp = m->part.vocab_parallel && m->part.tp > 1;
      if (post) {
        OT_TRY(ot__head_bwd(m, N, m->dres));
        if (vp) OT_TRY(ot__tp_sum(&m->graph, m->dres, (size_t)N * C));
      } else {
        OT_TRY(ot__head_bwd(m, N, m->dy));
        if (vp) OT_TRY(ot__tp_sum(&m->graph, m->dy, (size_t)N * C));
        OT_TRY(ot__norm_bwd(m, m->dres, m->lnf_w, m->lnf_b, m->dy, NULL, m->resf, m->meanf,
                            m->rstdf, N));
      }
    }
    const ot__stack dec = {&m->graph, m->la, m->lp, NULL, m->enc_out, m->denc, S, m->src_len,
                           &m->ddrop};
    for (int l = m->L - 1; l >= 0; l--) {
      ot__need_block(m, m->Le + l, true);
      OT_TRY(ot__block_bwd(m, &dec, l, B, T));
    }
    if (m->dec_first) {
      const stack_emb de = dec_emb(m);
      OT_TRY(stack_embed_bwd(m, &de, m->tgt, B, T, &m->ddrop));
    }
  }
  if (m->Le > 0) {
    if (m->enc_last) {
      // tensor parallel: each rank's cross K/V heads gave their part of the encoder
      // output's gradient
      OT_TRY(ot__tp_sum(&m->graph, m->denc, (size_t)NS * C));
      if (post)
        memcpy(m->dres, m->denc, (size_t)NS * C * es);
      else
        OT_TRY(ot__norm_bwd(m, m->dres, m->elnf_w, m->elnf_b, m->denc, NULL, m->enc_res,
                            m->emean, m->erstd, NS));
    }
    const ot__stack enc = {&m->egraph, m->ela, m->elp, m->src_len, NULL, NULL, 0, NULL,
                           &m->edrop};
    for (int l = m->Le - 1; l >= 0; l--) {
      ot__need_block(m, l, true);
      OT_TRY(ot__block_bwd(m, &enc, l, B, S));
    }
    if (m->first) {
      const stack_emb ee = enc_emb(m);
      OT_TRY(stack_embed_bwd(m, &ee, m->src, B, S, &m->edrop));
    }
  }
  ot__grads_ready(m, 0);
  return OT_OK;
}
