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

// The QKV projection y1 -> head-major q, k, v through the weight interface.
static ot_status qkv_fwd(const ot__graph *g, const ot__block_w *w, const ot__block_io *io) {
  const ot__arch *a = &g->a;
  ot__layer_acts *A = io->A;
  if (w->qkv.dense)
    return ot_qkv_fwd(g->dt, A->q, A->k, A->v, A->y1, w->qkv.dense, w->qkv_b, io->B, io->T, a->C,
                      a->Hq, a->Hkv, a->D);
  const int N = io->B * io->T, QKV = (a->Hq + 2 * a->Hkv) * a->D;
  OT_TRY(ot__wlinear(g->dt, io->qkv_tok, NULL, A->y1, &w->qkv, w->qkv_b, N, QKV, a->C, OT_ACT_NONE));
  return ot_qkv_split(g->dt, A->q, A->k, A->v, io->qkv_tok, io->B, io->T, a->Hq, a->Hkv, a->D);
}

// MLP activation: h = gelu(pre) or silu(gate) * up (both from pre).
static ot_status mlp_act(const ot__graph *g, ot__layer_acts *A, int N) {
  if (g->a.mlp == OT_MLP_GELU) return ot_gelu_fwd(g->dt, A->h, A->pre, (size_t)N * g->a.F);
  return ot_swiglu_fwd(g->dt, A->h, A->pre, N, g->a.F);
}

// --------------------------------------------------- current sequence ------
ot_attn_shape ot__self_shape(const ot__graph *g, int B, int T, const int32_t *kv_len) {
  ot_attn_shape s = {B, g->a.Hq, g->a.Hkv, T, T, g->a.D, g->a.causal, kv_len, 0.0f};
  return s;
}

static ot_status self_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                             const void *q, const void *k, const void *v, int B, int T) {
  (void)l;
  const ot__kv_self *s = (const ot__kv_self *)self;
  ot_attn_shape sh = ot__self_shape(g, B, T, s->kv_len);
  return ot_attn_flash_fwd(g->dt, o, lse, q, k, v, &sh);
}

ot__kv_self ot__kv_self_make(const int32_t *kv_len) {
  ot__kv_self s = {{self_attend}, kv_len};
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

ot_status ot__block_fwd(const ot__graph *g, int l, const ot__block_io *io, bool mlp) {
  const ot__arch *a = &g->a;
  const ot__block_w *w = &g->blk[l];
  ot__layer_acts *A = io->A;
  const ot_dtype dt = g->dt;
  const int N = io->B * io->T, C = a->C, HD = a->Hq * a->D;
  // attention
  OT_TRY(ot__norm_fwd(g, A->y1, A->mean1, A->rstd1, A->res, io->x, io->r, w->ln1_w, w->ln1_b, N));
  OT_TRY(qkv_fwd(g, w, io));
  if (a->rope) {
    OT_TRY(rope_rows(g, A->q, a->Hq, io));
    OT_TRY(rope_rows(g, A->k, a->Hkv, io));
  }
  OT_TRY(io->kv->attend(io->kv, g, l, io->ohead, A->lse, A->q, A->k, A->v, io->B, io->T));
  OT_TRY(ot__wlinear(dt, io->abuf, NULL, attn_rows(g, io), &w->o, rp_bias(g, w->o_b), N, C, HD,
                     OT_ACT_NONE));
  OT_TRY(ot__tp_sum(g, io->abuf, (size_t)N * C));
  // MLP
  OT_TRY(ot__norm_fwd(g, A->y2, A->mean2, A->rstd2, A->res2, A->res, io->abuf, w->ln2_w, w->ln2_b,
                      N));
  if (a->mlp == OT_MLP_GELU) {
    OT_TRY(ot__wlinear(dt, A->h, A->pre, A->y2, &w->fc, w->fc_b, N, a->F, C, OT_ACT_GELU));
  } else {
    OT_TRY(ot__wlinear(dt, A->pre, NULL, A->y2, &w->fc, w->fc_b, N, a->Fa, C, OT_ACT_NONE));
    OT_TRY(mlp_act(g, A, N));
  }
  if (!mlp) return OT_OK;
  OT_TRY(ot__wlinear(dt, io->abuf, NULL, A->h, &w->proj, rp_bias(g, w->proj_b), N, C, a->F,
                     OT_ACT_NONE));
  return ot__tp_sum(g, io->abuf, (size_t)N * C);
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

// The model's forward io for block l of the current slot (training: the
// current-sequence source, input la[l].res as saved).
static ot__block_io train_io(ot_model *m, int l, int B, int T, ot__kv_self *src) {
  *src = ot__kv_self_make(NULL);
  ot__block_io io = {B, T, m->la[l].res, NULL, &m->la[l], m->abuf, m->ohead, NULL, 0, NULL,
                     &src->base};
  return io;
}

ot_status ot__block_bwd(ot_model *m, int l, int B, int T) {
  ot__layer_acts *A = &m->la[l];
  const ot__layer_params *P = &m->lp[l];
  const ot__graph *g = &m->graph;
  const ot_dtype dt = m->run.dt;
  const ot_recompute rc = m->run.recompute;
  const int N = B * T, C = m->C, HD = m->Hq * m->D;
  ot__kv_self src;
  const ot__block_io io = train_io(m, l, B, T, &src);
  if (rc == OT_RECOMPUTE_FULL) OT_TRY(ot__block_fwd(g, l, &io, false));
  if (rc == OT_RECOMPUTE_SELECTIVE) OT_TRY(mlp_act(g, A, N));
  // MLP
  OT_TRY(ot_linear_bwd(dt, m->dh, ot__pg(m, P->proj_w), ot__pg(m, P->proj_b), m->dres, NULL, A->h,
                       ot__pdt(m, P->proj_w), N, C, m->F, OT_ACT_NONE));
  ot__grads_ready(m, m->params[P->proj_w].offset);
  if (m->cfg.mlp == OT_MLP_GELU) {
    OT_TRY(ot_linear_bwd(dt, m->dy, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dh, A->pre, A->y2,
                         ot__pdt(m, P->fc_w), N, m->F, C, OT_ACT_GELU));
  } else {
    OT_TRY(ot_swiglu_bwd(dt, m->dfc, A->pre, m->dh, N, m->F));
    OT_TRY(ot_linear_bwd(dt, m->dy, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dfc, NULL, A->y2,
                         ot__pdt(m, P->fc_w), N, m->Fa, C, OT_ACT_NONE));
  }
  ot__grads_ready(m, m->params[P->fc_w].offset);
  OT_TRY(ot__tp_sum(g, m->dy, (size_t)N * C));
  OT_TRY(ot__norm_bwd(m, m->dres, P->ln2_w, P->ln2_b, m->dy, m->dres, A->res2, A->mean2, A->rstd2, N));
  ot__grads_ready(m, m->params[P->ln2_w].offset);
  // attention
  ot_attn_shape s = ot__self_shape(g, B, T, NULL);
  if (rc == OT_RECOMPUTE_SELECTIVE) {   // the attention core again (o, lse), then its rows
    OT_TRY(ot_attn_flash_fwd(dt, m->ohead, A->lse, A->q, A->k, A->v, &s));
    ot__transpose_heads(ot_dtype_size(dt), A->atty, m->ohead, B, T, m->Hq, m->D, false);
  }
  OT_TRY(ot_linear_bwd(dt, m->datty, ot__pg(m, P->o_w), ot__pg(m, P->o_b), m->dres, NULL, A->atty,
                       ot__pdt(m, P->o_w), N, C, HD, OT_ACT_NONE));
  ot__grads_ready(m, m->params[P->o_w].offset);
  const size_t es = ot_dtype_size(dt);
  ot__transpose_heads(es, m->dohead, m->datty, B, T, m->Hq, m->D, true);
  if (rc == OT_RECOMPUTE_NONE) ot__transpose_heads(es, m->ohead, A->atty, B, T, m->Hq, m->D, true);
  OT_TRY(ot_attn_flash_bwd(dt, m->dq, m->dk, m->dv, m->dohead, m->ohead, A->lse, A->q, A->k, A->v,
                           &s));
  if (m->rope) {
    OT_TRY(ot_rope_bwd(dt, m->dq, m->rope, m->cfg.max_seq, B, m->Hq, T, m->D, m->D, 0,
                       m->cfg.rope_style));
    OT_TRY(ot_rope_bwd(dt, m->dk, m->rope, m->cfg.max_seq, B, m->Hkv, T, m->D, m->D, 0,
                       m->cfg.rope_style));
  }
  OT_TRY(ot_qkv_bwd(dt, m->dy, ot__pg(m, P->qkv_w), ot__pg(m, P->qkv_b), m->dq, m->dk, m->dv, A->y1,
                    ot__pdt(m, P->qkv_w), B, T, C, m->Hq, m->Hkv, m->D));
  ot__grads_ready(m, m->params[P->qkv_w].offset);
  OT_TRY(ot__tp_sum(g, m->dy, (size_t)N * C));
  OT_TRY(ot__norm_bwd(m, m->dres, P->ln1_w, P->ln1_b, m->dy, m->dres, A->res, A->mean1, A->rstd1, N));
  return OT_OK;
}
