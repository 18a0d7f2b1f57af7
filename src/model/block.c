// The one block forward (training, KV-cache decoding and the serving engine
// all run it; contract in graph.h) and the block backward (training), with the
// helpers they share: norms, RoPE at the rows' positions, the current-sequence
// key/value source. The same calls run in the forward and in every recompute,
// so recompute none | selective | full give bitwise-identical results.
#include "model_impl.h"

// ------------------------------------------------------------- helpers ------
void ot__transpose_heads(size_t es, void *dst, const void *src, int B, int T, int H, int D,
                         bool to_heads) {
  const size_t row = (size_t)D * es;
  const long n = (long)B * T;
#pragma omp parallel for schedule(static) if (n * H * D >= 65536)
  for (long bt = 0; bt < n; bt++) {
    const long b = bt / T, t = bt % T;
    for (int h = 0; h < H; h++) {
      size_t tok = ((size_t)bt * H + h) * row, head = (((size_t)b * H + h) * T + t) * row;
      if (to_heads) memcpy((char *)dst + head, (const char *)src + tok, row);
      else memcpy((char *)dst + tok, (const char *)src + head, row);
    }
  }
}

ot_status ot__norm_fwd(const ot__graph *g, void *y, float *mean, float *rstd, void *res_out,
                       const void *x, const void *r, const float *gain, const float *beta, int N) {
  if (g->a.norm == OT_NORM_LAYERNORM)
    return ot_layernorm_fwd(g->dt, y, mean, rstd, res_out, x, r, gain, beta, N, g->a.C, g->a.eps);
  return ot_rmsnorm_fwd(g->dt, y, rstd, res_out, x, r, gain, N, g->a.C, g->a.eps);
}

// RoPE on head-major x [B, H, T, D] at the rows' positions (see ot__block_io).
static ot_status rope_rows(const ot__graph *g, void *x, int H, const ot__block_io *io) {
  const ot__arch *a = &g->a;
  if (!io->pos)
    return ot_rope_fwd(g->dt, x, a->rope, a->rope_len, io->B, H, io->T, a->D, a->D, io->pos0,
                       a->rope_style);
  const size_t seq = (size_t)H * io->T * a->D * ot_dtype_size(g->dt);
  for (int b = 0; b < io->B; b++)
    OT_TRY(ot_rope_fwd(g->dt, (char *)x + (size_t)b * seq, a->rope, a->rope_len, 1, H, io->T, a->D,
                       a->D, io->pos[b], a->rope_style));
  return OT_OK;
}

// A row-parallel layer's bias is added by the lead rank only (then summed once).
static const float *rp_bias(const ot__graph *g, const float *b) { return g->tp_lead ? b : NULL; }

// The QKV projection y1 (post-norm: res) -> head-major q, k, v through the weight interface.
static ot_status qkv_fwd(const ot__graph *g, const ot__block_w *w, const ot__block_io *io) {
  const ot__arch *a = &g->a;
  ot__layer_acts *A = io->A;
  const void *x = a->post ? A->res : A->y1;
  if (w->qkv.dense)
    return ot_qkv_fwd_w(g->dt, w->qkv.w32 ? OT_F32 : g->dt, A->q, A->k, A->v, x, w->qkv.dense,
                        w->qkv_b, io->B, io->T, a->C, a->Hq, a->Hkv, a->D);
  const int N = io->B * io->T, QKV = (a->Hq + 2 * a->Hkv) * a->D;
  OT_TRY(ot__wlinear(g->dt, io->qkv_tok, NULL, x, &w->qkv, w->qkv_b, N, QKV, a->C, OT_ACT_NONE));
  return ot_qkv_split(g->dt, A->q, A->k, A->v, io->qkv_tok, io->B, io->T, a->Hq, a->Hkv, a->D);
}

// MLP activation: h = gelu(pre), relu(pre), gelu_erf(pre) or silu(gate) * up (from pre),
// then block l's activation dropout (d: NULL or off: none).
static ot_status mlp_act(const ot__graph *g, ot__layer_acts *A, int N, const ot__dropout *d,
                         int l) {
  const size_t n = (size_t)N * g->a.F;
  if (g->a.mlp == OT_MLP_GELU) OT_TRY(ot_gelu_fwd(g->dt, A->h, A->pre, n));
  else if (g->a.mlp == OT_MLP_SWIGLU) OT_TRY(ot_swiglu_fwd(g->dt, A->h, A->pre, N, g->a.F));
  else OT_TRY(ot__act_fwd(g->a.mlp, g->dt, A->h, A->pre, n));
  return ot__drop_fwd(d, d ? d->act : 0.0f, g->dt, A->h, n, l, OT__DROP_ACT);
}

// --------------------------------------------------- current sequence ------
ot_attn_shape ot__self_shape(const ot__graph *g, int B, int T, const int32_t *kv_len) {
  ot_attn_shape s = {B, g->a.Hq, g->a.Hkv, T, T, g->a.D, g->a.causal, kv_len, 0.0f};
  return s;
}

static ot_status self_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                             const void *q, const void *k, const void *v, int B, int T) {
  const ot__kv_self *s = (const ot__kv_self *)self;
  ot_attn_shape sh = ot__self_shape(g, B, T, s->kv_len);
  ot__drop_attn(s->drop, &sh, l, OT__DROP_ATTN_P);
  return ot_attn_flash_fwd(g->dt, o, lse, q, k, v, &sh);
}

ot__kv_self ot__kv_self_make(const int32_t *kv_len) {
  ot__kv_self s = {{self_attend, NULL}, kv_len, NULL};
  return s;
}

// ------------------------------------------------ encoder-decoder source ---
ot_attn_shape ot__cross_shape(const ot__graph *g, int B, int T, int S, const int32_t *src_len) {
  ot_attn_shape s = {B, g->a.Hq, g->a.Hkv, T, S, g->a.D, false, src_len, 0.0f};
  return s;
}

ot_status ot__cross_kv_fwd(const ot__graph *g, int l, void *kc, void *vc, void *tok,
                           const void *enc, int B, int S) {
  const ot__block_w *w = &g->blk[l];
  const int KD = g->a.Hkv * g->a.D;
  const size_t es = ot_dtype_size(g->dt);
  OT_TRY(ot__wlinear(g->dt, tok, NULL, enc, &w->ck, w->ck_b, B * S, KD, g->a.C, OT_ACT_NONE));
  ot__transpose_heads(es, kc, tok, B, S, g->a.Hkv, g->a.D, true);
  OT_TRY(ot__wlinear(g->dt, tok, NULL, enc, &w->cv, w->cv_b, B * S, KD, g->a.C, OT_ACT_NONE));
  ot__transpose_heads(es, vc, tok, B, S, g->a.Hkv, g->a.D, true);
  return OT_OK;
}

static ot_status s2s_cross(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                           const void *q, int B, int T) {
  const ot__kv_s2s *s = (const ot__kv_s2s *)self;
  ot__layer_acts *A = &s->la[l];
  OT_TRY(ot__cross_kv_fwd(g, l, A->kc, A->vc, s->tok, s->enc, B, s->S));
  ot_attn_shape sh = ot__cross_shape(g, B, T, s->S, s->src_len);
  ot__drop_attn(s->self.drop, &sh, l, OT__DROP_CROSS_P);
  return ot_attn_flash_fwd(g->dt, o, lse, q, A->kc, A->vc, &sh);
}

ot__kv_s2s ot__kv_s2s_make(const void *enc, int S, const int32_t *src_len, ot__layer_acts *la,
                           void *tok) {
  ot__kv_s2s s = {{{self_attend, s2s_cross}, NULL, NULL}, enc, S, src_len, la, tok};
  return s;
}

// ------------------------------------------------------------- forward ------
// Attention output (head-major, in io->ohead) -> the token-major rows the
// output projection reads.
static const void *attn_rows(const ot__graph *g, const ot__block_io *io) {
  ot__layer_acts *A = io->A;
  if (io->T == 1 && !A->atty) return io->ohead;   // [B, Hq, 1, D] is token-major already
  ot__transpose_heads(ot_dtype_size(g->dt), A->atty, io->ohead, io->B, io->T, g->a.Hq, g->a.D,
                      false);
  return A->atty;
}

// Cross-attention of a decoder block on x [N, C] (its norm's output or, post-norm,
// the self-attention sublayer's output): the queries (token-major into attyc, then
// head-major qc), the key/value source's cross-attention into ohead, the output
// projection into io->abuf.
static ot_status cross_fwd(const ot__graph *g, const ot__block_w *w, int l, const ot__block_io *io,
                           const void *x) {
  const ot__arch *a = &g->a;
  ot__layer_acts *A = io->A;
  const int N = io->B * io->T, HD = a->Hq * a->D;
  const size_t es = ot_dtype_size(g->dt);
  if (!io->kv->cross)
    return ot_error(OT_EINVAL, "decoder block %d: this key/value source has no cross-attention "
                    "(an encoder-decoder decoder needs the encoder output)", l);
  OT_TRY(ot__wlinear(g->dt, A->attyc, NULL, x, &w->cq, w->cq_b, N, HD, a->C, OT_ACT_NONE));
  ot__transpose_heads(es, A->qc, A->attyc, io->B, io->T, a->Hq, a->D, true);
  OT_TRY(io->kv->cross(io->kv, g, l, io->ohead, A->lsec, A->qc, io->B, io->T));
  ot__transpose_heads(es, A->attyc, io->ohead, io->B, io->T, a->Hq, a->D, false);
  OT_TRY(ot__wlinear(g->dt, io->abuf, NULL, A->attyc, &w->co, rp_bias(g, w->co_b), N, a->C, HD,
                     OT_ACT_NONE));
  OT_TRY(ot__tp_sum(g, io->abuf, (size_t)N * a->C));
  const ot__dropout *d = io->drop;
  return ot__drop_fwd(d, d ? d->resid : 0.0f, g->dt, io->abuf, (size_t)N * a->C, l,
                      OT__DROP_CROSS_OUT);
}

ot_status ot__block_fwd(const ot__graph *g, int l, const ot__block_io *io, bool mlp) {
  const ot__arch *a = &g->a;
  const ot__block_w *w = &g->blk[l];
  ot__layer_acts *A = io->A;
  const ot_dtype dt = g->dt;
  const int N = io->B * io->T, C = a->C, HD = a->Hq * a->D;
  const ot__dropout *d = io->drop;
  const float pr = d ? d->resid : 0.0f;
  // attention
  if (!a->post) {
    OT_TRY(ot__norm_fwd(g, A->y1, A->mean1, A->rstd1, A->res, io->x, io->r, w->ln1_w, w->ln1_b, N));
  } else if (io->r) {
    ot__add_into(dt, memcpy(A->res, io->x, (size_t)N * C * ot_dtype_size(dt)), io->r, (size_t)N * C);
  } else if (io->x != A->res) {
    memcpy(A->res, io->x, (size_t)N * C * ot_dtype_size(dt));
  }
  OT_TRY(qkv_fwd(g, w, io));
  if (a->rope) {
    OT_TRY(rope_rows(g, A->q, a->Hq, io));
    OT_TRY(rope_rows(g, A->k, a->Hkv, io));
  }
  OT_TRY(io->kv->attend(io->kv, g, l, io->ohead, A->lse, A->q, A->k, A->v, io->B, io->T));
  OT_TRY(ot__wlinear(dt, io->abuf, NULL, attn_rows(g, io), &w->o, rp_bias(g, w->o_b), N, C, HD,
                     OT_ACT_NONE));
  OT_TRY(ot__tp_sum(g, io->abuf, (size_t)N * C));
  OT_TRY(ot__drop_fwd(d, pr, dt, io->abuf, (size_t)N * C, l, OT__DROP_ATTN_OUT));
  // cross-attention, then the MLP's input
  const void *min;
  if (a->post) {
    OT_TRY(ot__norm_fwd(g, A->y1, A->mean1, A->rstd1, A->res2, A->res, io->abuf, w->ln1_w,
                        w->ln1_b, N));
    min = A->y1;
    if (a->cross) {
      OT_TRY(cross_fwd(g, w, l, io, A->y1));
      OT_TRY(ot__norm_fwd(g, A->yc, A->meanc, A->rstdc, A->resc, A->y1, io->abuf, w->lnc_w,
                          w->lnc_b, N));
      min = A->yc;
    }
  } else {
    const void *r1 = A->res;
    if (a->cross) {
      OT_TRY(ot__norm_fwd(g, A->yc, A->meanc, A->rstdc, A->resc, A->res, io->abuf, w->lnc_w,
                          w->lnc_b, N));
      OT_TRY(cross_fwd(g, w, l, io, A->yc));
      r1 = A->resc;
    }
    OT_TRY(ot__norm_fwd(g, A->y2, A->mean2, A->rstd2, A->res2, r1, io->abuf, w->ln2_w, w->ln2_b,
                        N));
    min = A->y2;
  }
  // MLP
  if (a->mlp == OT_MLP_GELU) {
    OT_TRY(ot__wlinear(dt, A->h, A->pre, min, &w->fc, w->fc_b, N, a->F, C, OT_ACT_GELU));
    OT_TRY(ot__drop_fwd(d, d ? d->act : 0.0f, dt, A->h, (size_t)N * a->F, l, OT__DROP_ACT));
  } else {
    OT_TRY(ot__wlinear(dt, A->pre, NULL, min, &w->fc, w->fc_b, N, a->Fa, C, OT_ACT_NONE));
    OT_TRY(mlp_act(g, A, N, d, l));
  }
  if (!mlp) return OT_OK;
  OT_TRY(ot__wlinear(dt, io->abuf, NULL, A->h, &w->proj, rp_bias(g, w->proj_b), N, C, a->F,
                     OT_ACT_NONE));
  OT_TRY(ot__tp_sum(g, io->abuf, (size_t)N * C));
  OT_TRY(ot__drop_fwd(d, pr, dt, io->abuf, (size_t)N * C, l, OT__DROP_MLP_OUT));
  if (!a->post) return OT_OK;
  return ot__norm_fwd(g, io->out, A->mean2, A->rstd2, A->y2, min, io->abuf, w->ln2_w, w->ln2_b, N);
}

// ------------------------------------------------------------ backward ------
ot_status ot__norm_bwd(const ot_model *m, void *dx, int gi, int bi, const void *dy,
                       const void *dres, const void *res, const float *mean, const float *rstd,
                       int N) {
  if (m->cfg.norm == OT_NORM_LAYERNORM)
    return ot_layernorm_bwd(m->run.dt, dx, ot__pg(m, gi), ot__pg(m, bi), dy, dres, res, mean, rstd,
                            ot__pw(m, gi), N, m->C);
  return ot_rmsnorm_bwd(m->run.dt, dx, ot__pg(m, gi), dy, dres, res, rstd, ot__pw(m, gi), N, m->C);
}

ot__stack ot__stack_decoder(ot_model *m) {
  ot__stack st = {&m->graph, m->la, m->lp, NULL, NULL, NULL, 0, NULL, &m->ddrop};
  return st;
}

// The model's forward io for block l of stack st (training: the current-sequence
// source, or the encoder-decoder's; input la[l].res as saved; a post-norm block's
// output, needed only when a full recompute reruns it, goes to the free m->dy).
static ot__block_io train_io(ot_model *m, const ot__stack *st, int l, int B, int T,
                             ot__kv_s2s *src) {
  *src = ot__kv_s2s_make(st->enc, st->S, st->src_len, st->la, m->ctok);
  src->self.kv_len = st->kv_len;
  src->self.drop = st->drop;
  if (!st->enc) src->self.base.cross = NULL;
  ot__block_io io = {B, T, st->la[l].res, NULL, &st->la[l], m->abuf, m->ohead, NULL, 0, NULL,
                     &src->self.base, m->dy, st->drop};
  return io;
}

// The MLP's backward (block l of st): dout [N, C] (gradient of its output, read by the
// first call only: dx may alias it) -> dx [N, C] (of its input x), weight gradients
// accumulated.
static ot_status mlp_bwd(ot_model *m, const ot__stack *st, int l, const ot__layer_acts *A,
                         const ot__layer_params *P, const void *x, void *dout, void *dx, int N) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C;
  OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), m->dh, ot__pg(m, P->proj_w), ot__pg(m, P->proj_b), dout, NULL, A->h,
                       ot__pdt(m, P->proj_w), N, C, m->F, OT_ACT_NONE));
  ot__grads_ready(m, m->params[P->proj_w].offset);
  const ot__dropout *d = st->drop;
  OT_TRY(ot__drop_bwd(d, d ? d->act : 0.0f, dt, m->dh, m->dh, (size_t)N * m->F, l, OT__DROP_ACT));
  if (m->cfg.mlp == OT_MLP_GELU) {
    OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), dx, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dh, A->pre, x,
                         ot__pdt(m, P->fc_w), N, m->F, C, OT_ACT_GELU));
  } else if (m->cfg.mlp == OT_MLP_SWIGLU) {
    OT_TRY(ot_swiglu_bwd(dt, m->dfc, A->pre, m->dh, N, m->F));
    OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), dx, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dfc, NULL, x,
                         ot__pdt(m, P->fc_w), N, m->Fa, C, OT_ACT_NONE));
  } else {
    OT_TRY(ot__act_bwd(m->cfg.mlp, dt, m->dh, A->pre, m->dh, (size_t)N * m->F));
    OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), dx, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dh, NULL, x,
                         ot__pdt(m, P->fc_w), N, m->Fa, C, OT_ACT_NONE));
  }
  ot__grads_ready(m, m->params[P->fc_w].offset);
  return ot__tp_sum(&m->graph, dx, (size_t)N * C);
}

// Self-attention's backward (block l): dout [N, C] (read first: dx may alias it) ->
// dx [N, C] (gradient of its input x).
static ot_status attn_bwd(ot_model *m, const ot__stack *st, int l, const ot__layer_acts *A,
                          const ot__layer_params *P, const void *x, void *dout, void *dx, int B,
                          int T) {
  const ot__graph *g = st->g;
  const ot_dtype dt = m->run.dt;
  const ot_recompute rc = m->run.recompute;
  const int N = B * T, C = m->C, HD = m->Hq * m->D;
  ot_attn_shape s = ot__self_shape(g, B, T, st->kv_len);
  ot__drop_attn(st->drop, &s, l, OT__DROP_ATTN_P);
  if (rc == OT_RECOMPUTE_SELECTIVE) {   // the attention core again (o, lse), then its rows
    OT_TRY(ot_attn_flash_fwd(dt, m->ohead, A->lse, A->q, A->k, A->v, &s));
    ot__transpose_heads(ot_dtype_size(dt), A->atty, m->ohead, B, T, m->Hq, m->D, false);
  }
  OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), m->datty, ot__pg(m, P->o_w), ot__pg(m, P->o_b), dout, NULL, A->atty,
                       ot__pdt(m, P->o_w), N, C, HD, OT_ACT_NONE));
  ot__grads_ready(m, m->params[P->o_w].offset);
  const size_t es = ot_dtype_size(dt);
  ot__transpose_heads(es, m->dohead, m->datty, B, T, m->Hq, m->D, true);
  // ohead holds the attention output after a full recompute, unless cross-attention ran since
  if (rc == OT_RECOMPUTE_NONE || (rc == OT_RECOMPUTE_FULL && g->a.cross))
    ot__transpose_heads(es, m->ohead, A->atty, B, T, m->Hq, m->D, true);
  OT_TRY(ot_attn_flash_bwd(dt, m->dq, m->dk, m->dv, m->dohead, m->ohead, A->lse, A->q, A->k, A->v,
                           &s));
  if (m->rope) {
    OT_TRY(ot_rope_bwd(dt, m->dq, m->rope, m->cfg.max_seq, B, m->Hq, T, m->D, m->D, 0,
                       m->cfg.rope_style));
    OT_TRY(ot_rope_bwd(dt, m->dk, m->rope, m->cfg.max_seq, B, m->Hkv, T, m->D, m->D, 0,
                       m->cfg.rope_style));
  }
  OT_TRY(ot_qkv_bwd_w(dt, ot__wdt(m), dx, ot__pg(m, P->qkv_w), ot__pg(m, P->qkv_b), m->dq, m->dk, m->dv, x,
                    ot__pdt(m, P->qkv_w), B, T, C, m->Hq, m->Hkv, m->D));
  ot__grads_ready(m, m->params[P->qkv_w].offset);
  return ot__tp_sum(g, dx, (size_t)N * C);
}

// Cross-attention's backward (block l): dout [N, C] (read first: dx may alias it) ->
// dx [N, C] (gradient of its input x, summed over the tensor group); the gradient of the
// encoder output through this block's cross K/V (this tensor rank's heads' part) is
// added to st->denc.
static ot_status cross_bwd(ot_model *m, const ot__stack *st, int l, const ot__layer_acts *A,
                           const ot__layer_params *P, const void *x, void *dout, void *dx, int B,
                           int T) {
  const ot__graph *g = st->g;
  const ot_dtype dt = m->run.dt;
  const size_t es = ot_dtype_size(dt);
  const int N = B * T, C = m->C, HD = m->Hq * m->D, KD = m->Hkv * m->D, S = st->S, NS = B * S;
  ot_attn_shape s = ot__cross_shape(g, B, T, S, st->src_len);
  ot__drop_attn(st->drop, &s, l, OT__DROP_CROSS_P);
  if (m->run.recompute == OT_RECOMPUTE_SELECTIVE) {
    OT_TRY(ot_attn_flash_fwd(dt, m->ohead, A->lsec, A->qc, A->kc, A->vc, &s));
    ot__transpose_heads(es, A->attyc, m->ohead, B, T, m->Hq, m->D, false);
  }
  OT_TRY(ot_linear_bwd_w(dt, ot__wdt(m), m->datty, ot__pg(m, P->co_w), ot__pg(m, P->co_b), dout, NULL, A->attyc,
                       ot__pdt(m, P->co_w), N, C, HD, OT_ACT_NONE));
  ot__transpose_heads(es, m->dohead, m->datty, B, T, m->Hq, m->D, true);
  if (m->run.recompute != OT_RECOMPUTE_SELECTIVE)
    ot__transpose_heads(es, m->ohead, A->attyc, B, T, m->Hq, m->D, true);
  OT_TRY(ot_attn_flash_bwd(dt, m->dq, m->dk, m->dv, m->dohead, m->ohead, A->lsec, A->qc, A->kc,
                           A->vc, &s));
  // q rows [0, HD), k rows [HD, HD + KD), v rows [HD + KD, HD + 2 KD) of the fused weight
  float *dw = ot__pg(m, P->cqkv_w), *db = ot__pg(m, P->cqkv_b);
  const char *w = ot__pdt(m, P->cqkv_w);
  ot__transpose_heads(es, m->datty, m->dq, B, T, m->Hq, m->D, false);
  const ot_dtype wdt = ot__wdt(m);
  OT_TRY(ot_linear_bwd_w(dt, wdt, dx, dw, db, m->datty, NULL, x, w, N, HD, C, OT_ACT_NONE));
  OT_TRY(ot__tp_sum(g, dx, (size_t)N * C));   // tensor parallel: every rank's heads' part
  const void *dkv[2] = {m->dk, m->dv};
  for (int j = 0; j < 2; j++) {
    const size_t r0 = (size_t)HD + (size_t)j * KD;
    ot__transpose_heads(es, m->ctok, dkv[j], B, S, m->Hkv, m->D, false);
    OT_TRY(ot_linear_bwd_w(dt, wdt, m->ctmp, dw ? dw + r0 * C : NULL, db ? db + r0 : NULL, m->ctok,
                           NULL, st->enc, w + r0 * C * ot_dtype_size(wdt), NS, KD, C, OT_ACT_NONE));
    ot__add_into(dt, st->denc, m->ctmp, (size_t)NS * C);
  }
  ot__grads_ready(m, m->params[P->cqkv_w].offset);
  return OT_OK;
}

ot_status ot__block_bwd(ot_model *m, const ot__stack *st, int l, int B, int T) {
  ot__layer_acts *A = &st->la[l];
  const ot__layer_params *P = &st->lp[l];
  const ot__graph *g = st->g;
  const ot_dtype dt = m->run.dt;
  const ot_recompute rc = m->run.recompute;
  const int N = B * T;
  const size_t NC = (size_t)N * m->C;
  const ot__dropout *d = st->drop;
  const float pr = d ? d->resid : 0.0f;
  // residual dropout or drop-path: sublayer output masks
  const bool rd = ot__drop_on(d, pr) || ot__drop_path_on(d);
  ot__kv_s2s src;
  const ot__block_io io = train_io(m, st, l, B, T, &src);
  if (rc == OT_RECOMPUTE_FULL) OT_TRY(ot__block_fwd(g, l, &io, g->a.post));
  if (rc == OT_RECOMPUTE_SELECTIVE) OT_TRY(mlp_act(g, A, N, d, l));
  if (!g->a.post) {   // pre-norm: m->dres is the residual stream's gradient throughout;
                      // with dropout the sublayer sees its masked copy in m->dy
    void *dout = rd ? m->dy : m->dres;
    OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dres, NC, l, OT__DROP_MLP_OUT));
    OT_TRY(mlp_bwd(m, st, l, A, P, A->y2, dout, m->dy, N));
    OT_TRY(ot__norm_bwd(m, m->dres, P->ln2_w, P->ln2_b, m->dy, m->dres, A->res2, A->mean2,
                        A->rstd2, N));
    ot__grads_ready(m, m->params[P->ln2_w].offset);
    if (g->a.cross) {
      OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dres, NC, l, OT__DROP_CROSS_OUT));
      OT_TRY(cross_bwd(m, st, l, A, P, A->yc, dout, m->dy, B, T));
      OT_TRY(ot__norm_bwd(m, m->dres, P->lnc_w, P->lnc_b, m->dy, m->dres, A->resc, A->meanc,
                          A->rstdc, N));
    }
    OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dres, NC, l, OT__DROP_ATTN_OUT));
    OT_TRY(attn_bwd(m, st, l, A, P, A->y1, dout, m->dy, B, T));
    return ot__norm_bwd(m, m->dres, P->ln1_w, P->ln1_b, m->dy, m->dres, A->res, A->mean1,
                        A->rstd1, N);
  }
  // post-norm: per sublayer, dy = norm backward of the output's gradient (dres), then
  // dres = sublayer backward of dy (masked in place into dres with dropout) + dy (the
  // residual path)
  const void *min = g->a.cross ? A->yc : A->y1;
  void *dout = rd ? m->dres : m->dy;
  OT_TRY(ot__norm_bwd(m, m->dy, P->ln2_w, P->ln2_b, m->dres, NULL, A->y2, A->mean2, A->rstd2, N));
  OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dy, NC, l, OT__DROP_MLP_OUT));
  OT_TRY(mlp_bwd(m, st, l, A, P, min, dout, m->dres, N));
  ot__add_into(dt, m->dres, m->dy, NC);
  if (g->a.cross) {
    OT_TRY(ot__norm_bwd(m, m->dy, P->lnc_w, P->lnc_b, m->dres, NULL, A->resc, A->meanc, A->rstdc,
                        N));
    OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dy, NC, l, OT__DROP_CROSS_OUT));
    OT_TRY(cross_bwd(m, st, l, A, P, A->y1, dout, m->dres, B, T));
    ot__add_into(dt, m->dres, m->dy, NC);
  }
  OT_TRY(ot__norm_bwd(m, m->dy, P->ln1_w, P->ln1_b, m->dres, NULL, A->res2, A->mean1, A->rstd1, N));
  OT_TRY(ot__drop_bwd(d, pr, dt, dout, m->dy, NC, l, OT__DROP_ATTN_OUT));
  OT_TRY(attn_bwd(m, st, l, A, P, A->res, dout, m->dres, B, T));
  ot__add_into(dt, m->dres, m->dy, NC);
  return OT_OK;
}
