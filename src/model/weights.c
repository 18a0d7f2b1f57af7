// How the forward passes read weights (graph.h): the linear layer and the
// embedding through an ot__wref (dense or quantized), and the two graphs a
// forward can run on: a model's own buffers, or a quantized model's tensors
// (found by the names of the model's parameter layout, so the names live in
// one place: layout.c).
#include "model_impl.h"
#include <stdlib.h>

ot_status ot__wlinear(ot_dtype dt, void *y, void *pre, const void *x, const ot__wref *w,
                      const float *b, int N, int out, int in, ot_act act) {
  if (w->dense) return ot_linear_fwd_w(dt, w->w32 ? OT_F32 : dt, y, pre, x, w->dense, b, N, out, in, act);
  if (dt != OT_F32)
    return ot_error(OT_EINVAL, "quantized weights take f32 activations, not %s", ot_dtype_name(dt));
  OT_TRY(ot_qlinear_fwd(y, x, w->q, b, N));
  return act == OT_ACT_GELU ? ot_gelu_fwd(OT_F32, y, y, (size_t)N * out) : OT_OK;
}

ot_status ot__embed_fwd(const ot__graph *g, void *x, const int32_t *tokens, int B, int T, int pos0,
                        const int32_t *pos) {
  const int C = g->a.C;
  const ot_dtype wdt = g->wte.w32 ? OT_F32 : g->dt;   // the tables' dtype
  const size_t es = ot_dtype_size(g->dt), row = (size_t)C * es, trow = (size_t)C * ot_dtype_size(wdt);
  if (g->wte.dense && !pos) {
    const void *wpe = g->wpe ? (const char *)g->wpe + (size_t)pos0 * trow : NULL;
    return ot_embed_fwd_w(g->dt, wdt, x, tokens, g->wte.dense, wpe, B, T, C, g->V);
  }
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const int p = (pos ? pos[b] : pos0) + t;
      const size_t i = (size_t)b * T + t;
      void *xi = (char *)x + i * row;
      if (g->wte.dense) {
        const void *wpe = g->wpe ? (const char *)g->wpe + (size_t)p * trow : NULL;
        OT_TRY(ot_embed_fwd_w(g->dt, wdt, xi, tokens + i, g->wte.dense, wpe, 1, 1, C, g->V));
        continue;
      }
      float *xf = xi;   // quantized: f32 activations
      OT_TRY(ot_qweight_row(g->wte.q, tokens[i], xf));
      if (g->wpe) {
        const float *pr = (const float *)g->wpe + (size_t)p * C;
        for (int c = 0; c < C; c++) xf[c] += pr[c];
      }
    }
  return OT_OK;
}

// ------------------------------------------------------------ the model -----
static ot_status model_tp_sum(void *ctx, void *buf, size_t n, ot_dtype dt) {
  const ot_model *m = ctx;
  return m->part.comm.allreduce(m->part.comm.ctx, buf, n, dt, OT_RED_SUM);
}

static ot__wref dense(const ot_model *m, int i) {
  ot__wref r = {ot__pdt(m, i), NULL, ot__wdt(m) != m->run.dt};
  return r;
}

static ot__arch arch_of(const ot_model_config *c, int C, int Hq, int Hkv, int F, const float *rope) {
  ot__arch a = {C, Hq, Hkv, ot_model_head_dim(c), F, c->mlp == OT_MLP_SWIGLU ? 2 * F : F, c->norm,
                c->mlp, true, c->eps, rope, c->max_seq, c->rope_style};
  return a;
}

// A view of rows [r0, ...) of matrix parameter i (dense, in the graph dtype).
static ot__wref dense_rows(const ot_model *m, int i, size_t r0) {
  const size_t es = ot_dtype_size(ot__wdt(m));
  ot__wref r = {(const char *)ot__pdt(m, i) + r0 * (size_t)m->params[i].shape[1] * es, NULL,
                ot__wdt(m) != m->run.dt};
  return r;
}

// Block weights of layer params P (cross-attention when P has it).
static void block_weights(const ot_model *m, const ot__layer_params *P, ot__block_w *w);

// The encoder graph of an encoder-decoder (bidirectional blocks, no cross-attention).
static ot_status encoder_graph(ot_model *m) {
  ot__graph *g = &m->egraph;
  *g = m->graph;
  g->a.causal = false;
  g->a.cross = false;
  m->eblkw = calloc((size_t)m->Le + 1, sizeof *m->eblkw);
  if (!m->eblkw) return ot_error(OT_ENOMEM, "model graph: out of memory");
  g->L = m->Le;
  g->blk = m->eblkw;
  for (int l = 0; l < m->Le; l++) block_weights(m, &m->elp[l], &m->eblkw[l]);
  g->lnf_w = ot__pw(m, m->elnf_w);
  g->lnf_b = ot__pw(m, m->elnf_b);
  return OT_OK;
}

static void block_weights(const ot_model *m, const ot__layer_params *P, ot__block_w *w) {
  w->qkv = dense(m, P->qkv_w);
  w->o = dense(m, P->o_w);
  w->fc = dense(m, P->fc_w);
  w->proj = dense(m, P->proj_w);
  w->ln1_w = ot__pw(m, P->ln1_w); w->ln1_b = ot__pw(m, P->ln1_b);
  w->ln2_w = ot__pw(m, P->ln2_w); w->ln2_b = ot__pw(m, P->ln2_b);
  w->qkv_b = ot__pw(m, P->qkv_b); w->o_b = ot__pw(m, P->o_b);
  w->fc_b = ot__pw(m, P->fc_b); w->proj_b = ot__pw(m, P->proj_b);
  if (P->cqkv_w >= 0) {   // cross-attention: q, k, v rows of the fused weight
    const size_t HD = (size_t)m->Hq * m->D, KD = (size_t)m->Hkv * m->D;
    w->cq = dense_rows(m, P->cqkv_w, 0);
    w->ck = dense_rows(m, P->cqkv_w, HD);
    w->cv = dense_rows(m, P->cqkv_w, HD + KD);
    w->co = dense(m, P->co_w);
    w->lnc_w = ot__pw(m, P->lnc_w); w->lnc_b = ot__pw(m, P->lnc_b);
    const float *cb = ot__pw(m, P->cqkv_b);
    w->cq_b = cb; w->ck_b = cb ? cb + HD : NULL; w->cv_b = cb ? cb + HD + KD : NULL;
    w->co_b = ot__pw(m, P->co_b);
  }
}

static ot_status quantized_views(ot_model *m);

ot_status ot__graph_build(ot_model *m) {
  ot__graph *g = &m->graph;
  memset(g, 0, sizeof *g);
  m->blkw = calloc((size_t)m->L + 1, sizeof *m->blkw);
  if (!m->blkw) return ot_error(OT_ENOMEM, "model graph: out of memory");
  g->a = arch_of(&m->cfg, m->C, m->Hq, m->Hkv, m->F, m->rope);
  g->a.post = m->cfg.norm_place == OT_PLACE_POST;
  g->a.cross = m->cfg.arch == OT_ARCH_ENCDEC;
  if (m->cfg.arch == OT_ARCH_VIT) g->a.causal = false;   // bidirectional over the patches
  g->dt = m->run.dt;
  g->L = m->L;
  g->blk = m->blkw;
  for (int l = 0; l < m->L; l++) block_weights(m, &m->lp[l], &m->blkw[l]);
  if (m->wte >= 0) g->wte = dense(m, m->wte);
  g->wpe = m->wpe >= 0 ? ot__pdt(m, m->wpe) : NULL;
  g->V = m->V;
  g->lnf_w = ot__pw(m, m->lnf_w);
  g->lnf_b = ot__pw(m, m->lnf_b);
  const int head = m->cfg.tied ? m->wte : m->lm_head;
  if (m->last && head >= 0) g->head = dense(m, head);
  g->head_rows = m->Vl;
  if (m->part.tp > 1) {
    g->tp_sum = model_tp_sum;
    g->tp_ctx = m;
  }
  g->tp_lead = m->part.tp_rank == 0;
  if (m->qm) OT_TRY(quantized_views(m));
  return m->Le > 0 ? encoder_graph(m) : OT_OK;
}

ot_status ot__graph_rebuild(ot_model *m) {
  free(m->blkw);
  free(m->eblkw);
  m->blkw = m->eblkw = NULL;
  return ot__graph_build(m);
}

const ot__graph *ot__model_graph(const ot_model *m) { return m ? &m->graph : NULL; }

// ------------------------------------------------------ quantized model -----
// Tensor i of the layout (the whole model of q->config) in q, checked to be
// [rows, cols] (vectors: rows 1) and, for vectors, stored f32. i < 0: absent.
static ot_status qfind(const ot_qmodel *q, const ot_model *lay, int i, bool vec,
                       const ot_qweight **out) {
  *out = NULL;
  if (i < 0) return OT_OK;
  const ot_param *p = &lay->params[i];
  const ot_qtensor *t = ot_qmodel_find(q, p->name);
  if (!t)
    return ot_error(OT_EINVAL, "ot_engine_create: the model has no tensor '%s' (the engine needs "
                    "the whole model, with every tensor its config implies)", p->name);
  const int rows = vec ? 1 : (int)p->shape[0], cols = vec ? (int)p->shape[0] : (int)p->shape[1];
  if (t->w.rows != rows || t->w.cols != cols)
    return ot_error(OT_EINVAL, "ot_engine_create: tensor '%s' is [%d, %d], the config implies "
                    "[%d, %d]", p->name, t->w.rows, t->w.cols, rows, cols);
  if (vec && t->w.kind != OT_QW_F32)
    return ot_error(OT_EINVAL, "ot_engine_create: tensor '%s' is stored %s; the engine reads it as "
                    "f32", p->name, ot_qw_kind_name(t->w.kind));
  *out = &t->w;
  return OT_OK;
}

// Matrix i; pack: an f32 one is packed for this CPU's linear kernel first (ot_qweight_pack;
// q is then the caller's to change: ot__qmodel_graph).
static ot_status qmat(const ot_qmodel *q, const ot_model *lay, int i, ot__wref *r, bool pack) {
  r->dense = NULL;
  r->w32 = false;
  OT_TRY(qfind(q, lay, i, false, &r->q));
  if (pack && r->q && r->q->kind == OT_QW_F32) OT_TRY(ot_qweight_pack((ot_qweight *)r->q));
  return OT_OK;
}

static ot_status qvec(const ot_qmodel *q, const ot_model *lay, int i, const float **out) {
  const ot_qweight *w;
  OT_TRY(qfind(q, lay, i, true, &w));
  *out = w ? (const float *)w->data : NULL;
  return OT_OK;
}

static ot_status qgraph(const ot_qmodel *q, const ot_model *lay, ot__graph *g, ot__block_w *blk,
                        ot_qweight *head, float *rope, bool pack) {
  const ot_model_config *c = &q->config;
  memset(g, 0, sizeof *g);
  g->a = arch_of(c, c->d_model, c->n_heads, c->n_kv_heads, c->d_ff,
                 c->pos == OT_POS_ROPE ? rope : NULL);
  g->dt = OT_F32;
  g->L = c->n_layers;
  g->blk = blk;
  for (int l = 0; l < c->n_layers; l++) {
    const ot__layer_params *P = &lay->lp[l];
    ot__block_w *w = &blk[l];
    OT_TRY(qmat(q, lay, P->qkv_w, &w->qkv, pack));
    OT_TRY(qmat(q, lay, P->o_w, &w->o, pack));
    OT_TRY(qmat(q, lay, P->fc_w, &w->fc, pack));
    OT_TRY(qmat(q, lay, P->proj_w, &w->proj, pack));
    OT_TRY(qvec(q, lay, P->ln1_w, &w->ln1_w));
    OT_TRY(qvec(q, lay, P->ln1_b, &w->ln1_b));
    OT_TRY(qvec(q, lay, P->ln2_w, &w->ln2_w));
    OT_TRY(qvec(q, lay, P->ln2_b, &w->ln2_b));
    OT_TRY(qvec(q, lay, P->qkv_b, &w->qkv_b));
    OT_TRY(qvec(q, lay, P->o_b, &w->o_b));
    OT_TRY(qvec(q, lay, P->fc_b, &w->fc_b));
    OT_TRY(qvec(q, lay, P->proj_b, &w->proj_b));
  }
  OT_TRY(qvec(q, lay, lay->lnf_w, &g->lnf_w));
  OT_TRY(qvec(q, lay, lay->lnf_b, &g->lnf_b));
  const ot_qweight *wpe;
  OT_TRY(qfind(q, lay, lay->wpe, false, &wpe));
  if (wpe && wpe->kind != OT_QW_F32)
    return ot_error(OT_EINVAL, "ot_engine_create: tensor '%s' is stored %s; the engine reads it as "
                    "f32", lay->params[lay->wpe].name, ot_qw_kind_name(wpe->kind));
  g->wpe = wpe ? wpe->data : NULL;
  OT_TRY(qmat(q, lay, lay->wte, &g->wte, pack));
  ot__wref lm;
  OT_TRY(qmat(q, lay, c->tied ? lay->wte : lay->lm_head, &lm, pack));
  *head = *lm.q;   // a view of the V real rows: padding rows are never read
  head->rows = c->vocab;
  head->owned = false;
  g->head.q = head;
  g->head_rows = c->vocab;
  g->V = c->vocab;
  g->tp_lead = true;
  if (g->a.rope) OT_TRY(ot_rope_table(rope, c->max_seq, g->a.D, c->rope_base));
  return OT_OK;
}

ot_status ot__qmodel_graph(ot_qmodel *q, ot__graph *g, ot__block_w *blk, ot_qweight *head, float *rope,
                           bool pack) {
  // the whole model's layout (tables only) names the tensors and gives their shapes
  ot_model *lay = calloc(1, sizeof *lay);
  if (!lay) return ot_error(OT_ENOMEM, "ot_engine_create: out of memory");
  ot_model_part whole = ot_model_part_whole(&q->config);
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot__set_dims(lay, &q->config, &run, &whole);
  ot_status s = ot__layout_build(lay);
  if (s == OT_OK) s = qgraph(q, lay, g, blk, head, rope, pack);
  ot__layout_free(lay);
  free(lay);
  return s;
}

// ------------------------------------------ a model's quantized inference -----
// The graph's block matrices and head pointed at m->qm (whose names and shapes are m's own
// layout's: qmat checks them).
static ot_status quantized_views(ot_model *m) {
  ot__graph *g = &m->graph;
  for (int l = 0; l < m->L; l++) {
    const ot__layer_params *P = &m->lp[l];
    ot__block_w *w = &m->blkw[l];
    OT_TRY(qmat(m->qm, m, P->qkv_w, &w->qkv, false));
    OT_TRY(qmat(m->qm, m, P->o_w, &w->o, false));
    OT_TRY(qmat(m->qm, m, P->fc_w, &w->fc, false));
    OT_TRY(qmat(m->qm, m, P->proj_w, &w->proj, false));
  }
  return qmat(m->qm, m, m->lm_head, &g->head, false);
}

ot_status ot_model_set_weights_q(ot_model *m, ot_qw_kind kind, int group) {
  static const char fn[] = "ot_model_set_weights_q";
  OT_CHECK_PTR(m, fn);
  if (kind == OT_QW_F32) {   // off: the dense views again
    if (!m->qm) return OT_OK;
    ot_qmodel_free(m->qm);
    ot_mem_free(m->qtok);
    m->qm = NULL;
    m->qtok = NULL;
    return ot__graph_rebuild(m);
  }
  if (kind != OT_QW_BF16 && kind != OT_QW_INT8)
    return ot_error(OT_EINVAL, "%s: kind %d unknown (f32 = off, bf16 or int8)", fn, (int)kind);
  if (m->cfg.arch != OT_ARCH_VIT)
    return ot_error(OT_EUNSUPPORTED, "%s: '%s' is not a vision transformer (language models and "
                    "translators run quantized weights on ot_qmodel_from_model: ot_engine_create, "
                    "ot_translator_create_q)", fn, m->cfg.name);
  if (m->run.dt != OT_F32)
    return ot_error(OT_EUNSUPPORTED, "%s: quantized weights take f32 activations (the run is %s; create "
                    "the model with dt f32)", fn, ot_dtype_name(m->run.dt));
  if (m->wq)
    return ot_error(OT_EINVAL, "%s: the model trains quantization-aware (ot_model_set_qat); turn it off first",
                    fn);
  ot_qmodel *q = NULL;
  OT_TRY(ot_qmodel_from_model(&q, m, kind, group));   // (whole models only: it says so)
  if (!m->qtok) {
    m->qtok = ot_mem_alloc((size_t)m->run.B * m->run.T * m->QKV * sizeof(float), OT_MEM_WORKSPACE);
    if (!m->qtok) {
      ot_qmodel_free(q);
      return ot_error(OT_ENOMEM, "%s: out of memory for the QKV output (%d x %d x %d f32)", fn, m->run.B,
                      m->run.T, m->QKV);
    }
  }
  ot_qmodel_free(m->qm);
  m->qm = q;
  return ot__graph_rebuild(m);
}
