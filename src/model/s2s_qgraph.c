// Both stacks of a quantized encoder-decoder (ot_qmodel) as graphs with f32
// activations: every tensor found by the one parameter layout's names
// (layout.c, build_marian) and checked for shape; the fused cross q/k/v
// weight of each decoder block read as three row views of one quantized matrix.
#include "model_impl.h"
#include <math.h>
#include <stdlib.h>

static const char k_fn[] = "ot_translator_create_q";

// Tensor i of the layout in q, [rows, cols] (vectors: rows 1, stored f32); i < 0: absent.
static ot_status find(const ot_qmodel *q, const ot_model *lay, int i, bool vec,
                      const ot_qweight **out) {
  *out = NULL;
  if (i < 0) return OT_OK;
  const ot_param *p = &lay->params[i];
  const ot_qtensor *t = ot_qmodel_find(q, p->name);
  if (!t)
    return ot_error(OT_EINVAL, "%s: the quantized model has no tensor '%s' (it needs every "
                    "tensor its config implies)", k_fn, p->name);
  const int rows = vec ? 1 : (int)p->shape[0], cols = vec ? (int)p->shape[0] : (int)p->shape[1];
  if (t->w.rows != rows || t->w.cols != cols)
    return ot_error(OT_EINVAL, "%s: tensor '%s' is [%d, %d], the config implies [%d, %d]", k_fn,
                    p->name, t->w.rows, t->w.cols, rows, cols);
  if ((vec || p->kind == OT_PT_POS) && t->w.kind != OT_QW_F32)
    return ot_error(OT_EINVAL, "%s: tensor '%s' is stored %s; it is read as f32", k_fn, p->name,
                    ot_qw_kind_name(t->w.kind));
  *out = &t->w;
  return OT_OK;
}

static ot_status mat(const ot_qmodel *q, const ot_model *lay, int i, ot__wref *r) {
  r->dense = NULL;
  r->w32 = false;
  return find(q, lay, i, false, &r->q);
}

static ot_status vec(const ot_qmodel *q, const ot_model *lay, int i, const float **out) {
  const ot_qweight *w;
  OT_TRY(find(q, lay, i, true, &w));
  *out = w ? (const float *)w->data : NULL;
  return OT_OK;
}

// Rows [r0, r0 + n) of w as a view (same kind and group).
static ot_qweight rows_view(const ot_qweight *w, int r0, int n) {
  ot_qweight v = *w;
  const size_t es = w->kind == OT_QW_F32 ? 4 : w->kind == OT_QW_BF16 ? 2 : 1;
  v.rows = n;
  v.data = (char *)w->data + (size_t)r0 * w->cols * es;
  if (w->scales) v.scales = w->scales + (size_t)r0 * (w->group ? w->cols / w->group : 1);
  v.owned = false;
  return v;
}

static ot_status block(const ot_qmodel *q, const ot_model *lay, const ot__layer_params *P,
                       ot__block_w *w, ot_qweight *cv, int HD, int KD) {
  OT_TRY(mat(q, lay, P->qkv_w, &w->qkv));
  OT_TRY(mat(q, lay, P->o_w, &w->o));
  OT_TRY(mat(q, lay, P->fc_w, &w->fc));
  OT_TRY(mat(q, lay, P->proj_w, &w->proj));
  OT_TRY(vec(q, lay, P->ln1_w, &w->ln1_w));
  OT_TRY(vec(q, lay, P->ln1_b, &w->ln1_b));
  OT_TRY(vec(q, lay, P->ln2_w, &w->ln2_w));
  OT_TRY(vec(q, lay, P->ln2_b, &w->ln2_b));
  OT_TRY(vec(q, lay, P->qkv_b, &w->qkv_b));
  OT_TRY(vec(q, lay, P->o_b, &w->o_b));
  OT_TRY(vec(q, lay, P->fc_b, &w->fc_b));
  OT_TRY(vec(q, lay, P->proj_b, &w->proj_b));
  if (P->cqkv_w < 0) return OT_OK;
  const ot_qweight *f;
  OT_TRY(find(q, lay, P->cqkv_w, false, &f));
  cv[0] = rows_view(f, 0, HD);
  cv[1] = rows_view(f, HD, KD);
  cv[2] = rows_view(f, HD + KD, KD);
  w->cq.q = &cv[0];
  w->ck.q = &cv[1];
  w->cv.q = &cv[2];
  OT_TRY(mat(q, lay, P->co_w, &w->co));
  OT_TRY(vec(q, lay, P->lnc_w, &w->lnc_w));
  OT_TRY(vec(q, lay, P->lnc_b, &w->lnc_b));
  const float *cb;
  OT_TRY(vec(q, lay, P->cqkv_b, &cb));
  w->cq_b = cb;
  w->ck_b = cb ? cb + HD : NULL;
  w->cv_b = cb ? cb + HD + KD : NULL;
  return vec(q, lay, P->co_b, &w->co_b);
}

static ot__s2s_emb emb(const ot_qmodel *q, const ot_model *lay, int pos, int lw, int lb,
                       const float *sin_tab, ot_status *s) {
  const ot_model_config *c = &q->config;
  ot__s2s_emb e = {c->embed_scale ? (float)sqrt((double)c->d_model) : 1.0f,
                   c->pos == OT_POS_SINUSOID ? sin_tab : NULL, NULL, c->pos_offset, NULL, NULL};
  const ot_qweight *p;
  if (*s == OT_OK) *s = find(q, lay, pos, false, &p);
  if (*s == OT_OK) e.lpos = p ? p->data : NULL;
  if (*s == OT_OK) *s = vec(q, lay, lw, &e.ln_w);
  if (*s == OT_OK) *s = vec(q, lay, lb, &e.ln_b);
  return e;
}

static ot_status build(const ot_qmodel *q, const ot_model *lay, ot__s2s_graph *sg, ot__graph *enc,
                       ot__graph *dec, ot__block_w *eblk, ot__block_w *dblk, ot_qweight *head,
                       ot_qweight *cviews, float *sin_tab) {
  const ot_model_config *c = &q->config;
  const int D = ot_model_head_dim(c), HD = c->n_heads * D, KD = c->n_kv_heads * D;
  memset(dec, 0, sizeof *dec);
  ot__arch a = {c->d_model, c->n_heads, c->n_kv_heads, D, c->d_ff,
                c->mlp == OT_MLP_SWIGLU ? 2 * c->d_ff : c->d_ff, c->norm, c->mlp, true, c->eps,
                NULL, c->max_seq, c->rope_style, c->norm_place == OT_PLACE_POST, true};
  dec->a = a;
  dec->dt = OT_F32;
  dec->L = c->n_layers;
  dec->blk = dblk;
  dec->tp_lead = true;
  for (int l = 0; l < c->n_layers; l++)
    OT_TRY(block(q, lay, &lay->lp[l], &dblk[l], cviews + 3 * l, HD, KD));
  OT_TRY(vec(q, lay, lay->lnf_w, &dec->lnf_w));
  OT_TRY(vec(q, lay, lay->lnf_b, &dec->lnf_b));
  OT_TRY(mat(q, lay, lay->wte, &dec->wte));
  ot__wref lm;
  OT_TRY(mat(q, lay, c->tied ? lay->wte : lay->lm_head, &lm));
  *head = *lm.q;   // a view of the V real rows
  head->rows = c->vocab;
  head->owned = false;
  dec->head.q = head;
  dec->head_rows = c->vocab;
  dec->V = c->vocab;
  *enc = *dec;
  enc->a.causal = false;
  enc->a.cross = false;
  enc->L = lay->Le;
  enc->blk = eblk;
  for (int l = 0; l < lay->Le; l++) OT_TRY(block(q, lay, &lay->elp[l], &eblk[l], NULL, HD, KD));
  OT_TRY(vec(q, lay, lay->elnf_w, &enc->lnf_w));
  OT_TRY(vec(q, lay, lay->elnf_b, &enc->lnf_b));
  memset(sg, 0, sizeof *sg);
  sg->enc = enc;
  sg->dec = dec;
  if (c->pos == OT_POS_SINUSOID) ot__sinusoid_table(sin_tab, c->max_seq, c->d_model);
  ot_status s = OT_OK;
  sg->eemb = emb(q, lay, lay->epos, lay->elne_w, lay->elne_b, sin_tab, &s);
  sg->demb = emb(q, lay, lay->dpos, lay->dlne_w, lay->dlne_b, sin_tab, &s);
  OT_TRY(s);
  OT_TRY(vec(q, lay, lay->lbias, &sg->head_b));
  sg->max_seq = c->max_seq;
  return OT_OK;
}

ot_status ot__qmodel_s2s_graph(const ot_qmodel *q, ot__s2s_graph *sg, ot__graph *enc,
                               ot__graph *dec, ot__block_w *eblk, ot__block_w *dblk,
                               ot_qweight *head, ot_qweight *cviews, float *sin_tab) {
  if (q->config.arch != OT_ARCH_ENCDEC)
    return ot_error(OT_EINVAL, "%s: '%s' is a decoder-only model, not an encoder-decoder", k_fn,
                    q->config.name);
  ot_model *lay = calloc(1, sizeof *lay);
  if (!lay) return ot_error(OT_ENOMEM, "%s: out of memory", k_fn);
  ot_model_part whole = ot_model_part_whole(&q->config);
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1, 1};
  ot__set_dims(lay, &q->config, &run, &whole);
  ot_status s = ot__layout_build(lay);
  if (s == OT_OK) s = build(q, lay, sg, enc, dec, eblk, dblk, head, cviews, sin_tab);
  ot__layout_free(lay);
  free(lay);
  return s;
}
