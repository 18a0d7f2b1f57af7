// Model partitions for tensor and pipeline parallelism: validation, where
// each parameter of a part lives in the one-process model's tensors (the
// slices), and the copies between a part's buffers and whole tensors that
// initialization and layout-independent checkpoints are built on.
#include "model_impl.h"
#include <stdlib.h>

int ot_model_n_blocks(const ot_model_config *c) {
  if (!c) return 0;
  return c->n_layers + (c->arch == OT_ARCH_ENCDEC ? c->n_enc_layers : 0);
}

ot_model_part ot_model_part_whole(const ot_model_config *c) {
  ot_model_part p;
  memset(&p, 0, sizeof p);
  p.tp = 1;
  p.layer1 = c ? ot_model_n_blocks(c) : 1;
  p.slots = 1;
  return p;
}

ot_status ot_model_part_validate(const ot_model_config *c, const ot_model_part *p) {
  static const char fn[] = "model partition";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(p, fn);
  if (p->tp < 1 || p->tp_rank < 0 || p->tp_rank >= p->tp)
    return ot_error(OT_EINVAL, "%s: tp rank %d of %d is not a valid rank", fn, p->tp_rank, p->tp);
  if (c->n_heads % p->tp)
    return ot_error(OT_EINVAL, "%s: n_heads=%d is not divisible by tensor_parallel=%d (choose a "
                    "tensor_parallel that divides it)", fn, c->n_heads, p->tp);
  if (c->n_kv_heads % p->tp)
    return ot_error(OT_EINVAL, "%s: n_kv_heads=%d is not divisible by tensor_parallel=%d (choose a "
                    "tensor_parallel that divides it)", fn, c->n_kv_heads, p->tp);
  if (c->d_ff % p->tp)
    return ot_error(OT_EINVAL, "%s: d_ff=%d is not divisible by tensor_parallel=%d (choose a "
                    "tensor_parallel that divides it)", fn, c->d_ff, p->tp);
  const int nb = ot_model_n_blocks(c);
  if (p->layer0 < 0 || p->layer1 <= p->layer0 || p->layer1 > nb)
    return ot_error(OT_EINVAL, "%s: blocks [%d, %d) are not a non-empty range of the %d %s", fn,
                    p->layer0, p->layer1, nb,
                    c->arch == OT_ARCH_ENCDEC ? "blocks (encoder, then decoder)" : "layers");
  if (p->slots < 1)
    return ot_error(OT_EINVAL, "%s: slots=%d must be >= 1", fn, p->slots);
  if (p->tp > 1 && !p->comm.allreduce)
    return ot_error(OT_EINVAL, "%s: tensor_parallel=%d needs an all-reduce over the tensor group",
                    fn, p->tp);
  return OT_OK;
}

const ot_model_part *ot_model_part_of(const ot_model *m) { return m ? &m->part : NULL; }
bool ot_model_is_first(const ot_model *m) { return m && m->first; }
bool ot_model_is_last(const ot_model *m) { return m && m->last; }

// ---------------------------------------------------------------- slices ----
static void set_rows(ot__slice *s, int i, int64_t g0, int64_t l0, int64_t n) {
  s->g0[i] = g0;
  s->l0[i] = l0;
  s->n[i] = n;
}

// The tensor-parallel slices of one block (P): the fused q/k/v rows of this rank's
// heads (self- and cross-attention), the MLP's rows, and the columns of the
// row-parallel output projections (attention, cross-attention, MLP). Hq, Hkv, Fg:
// the whole model's head counts and MLP width.
static void layer_slices(ot_model *m, const ot__layer_params *P, int64_t Hq, int64_t Hkv, int64_t Fg) {
  const int r = m->part.tp_rank, D = m->D;
  const int qkv[4] = {P->qkv_w, P->qkv_b, P->cqkv_w, P->cqkv_b};
  for (int k = 0; k < 4; k++) {
    if (qkv[k] < 0) continue;
    ot__slice *s = &m->slices[qkv[k]];
    s->nseg = 3;
    set_rows(s, 0, r * m->Hq * D, 0, (int64_t)m->Hq * D);
    set_rows(s, 1, Hq * D + r * m->Hkv * D, (int64_t)m->Hq * D, (int64_t)m->Hkv * D);
    set_rows(s, 2, (Hq + Hkv) * D + r * m->Hkv * D, (int64_t)(m->Hq + m->Hkv) * D,
             (int64_t)m->Hkv * D);
  }
  const int fc[2] = {P->fc_w, P->fc_b};
  for (int k = 0; k < 2; k++) {
    if (fc[k] < 0) continue;
    ot__slice *s = &m->slices[fc[k]];
    s->nseg = m->cfg.mlp == OT_MLP_SWIGLU ? 2 : 1;
    set_rows(s, 0, (int64_t)r * m->F, 0, m->F);
    if (s->nseg == 2) set_rows(s, 1, Fg + (int64_t)r * m->F, m->F, m->F);
  }
  const int cols[3] = {P->o_w, P->co_w, P->proj_w};
  for (int k = 0; k < 3; k++) {
    if (cols[k] < 0) continue;
    ot__slice *s = &m->slices[cols[k]];
    s->cols = true;
    const int64_t n = k < 2 ? (int64_t)m->Hq * D : m->F;
    set_rows(s, 0, (int64_t)r * n, 0, n);
  }
}

// Fills m->slices: for every parameter the whole tensor it belongs to (index
// in the one-process layout `w`, shape) and the ranges this part holds.
static ot_status build_slices(ot_model *m, const ot_model *w) {
  const int64_t Hq = w->Hq, Hkv = w->Hkv, Fg = w->F;
  for (int i = 0; i < m->n_params; i++) {
    const ot_param *p = &m->params[i];
    ot__slice *s = &m->slices[i];
    memset(s, 0, sizeof *s);
    s->gidx = -1;
    for (int j = 0; j < w->n_params; j++)
      if (strcmp(w->params[j].name, p->name) == 0) { s->gidx = j; break; }
    if (s->gidx < 0)
      return ot_error(OT_EINTERNAL, "model partition: '%s' is not in the whole model", p->name);
    const ot_param *g = &w->params[s->gidx];
    s->shape[0] = g->shape[0];
    s->shape[1] = g->shape[1];
    s->nseg = 1;
    set_rows(s, 0, 0, 0, g->shape[0]);
  }
  for (int l = 0; l < m->L; l++) layer_slices(m, &m->lp[l], Hq, Hkv, Fg);
  for (int l = 0; l < m->Le; l++) layer_slices(m, &m->elp[l], Hq, Hkv, Fg);
  const int voc[3] = {m->wte, m->lm_head, m->cfg.arch == OT_ARCH_ENCDEC ? m->lbias : -1};
  for (int k = 0; k < 3; k++) {   // vocabulary rows (an encoder-decoder's final_logits_bias too)
    if (voc[k] < 0) continue;
    ot__slice *s = &m->slices[voc[k]];
    int64_t n = m->Vp - m->v0 < m->Vl ? m->Vp - m->v0 : m->Vl;
    if (n < 0) n = 0;
    s->nseg = n > 0 ? 1 : 0;
    set_rows(s, 0, m->v0, 0, n);
  }
  for (int i = 0; i < m->n_params; i++) {
    ot__slice *s = &m->slices[i];
    const ot_param *p = &m->params[i];
    s->whole = !s->cols && s->nseg == 1 && s->g0[0] == 0 && s->n[0] == s->shape[0] &&
               p->shape[0] == s->shape[0];
  }
  return OT_OK;
}

ot_status ot__slices_build(ot_model *m) {
  m->slices = calloc((size_t)m->n_params + 1, sizeof *m->slices);
  if (!m->slices) return ot_error(OT_ENOMEM, "model partition: out of memory");
  // the whole model's table (layout only) names the tensors and their shapes
  ot_model *w = calloc(1, sizeof *w);
  if (!w) return ot_error(OT_ENOMEM, "model partition: out of memory");
  ot_model_part whole = ot_model_part_whole(&m->cfg);
  ot__set_dims(w, &m->cfg, &m->run, &whole);
  ot_status s = ot__layout_build(w);
  if (s == OT_OK) s = build_slices(m, w);
  ot__layout_free(w);
  free(w);
  return s;
}

// Copies between the slice of whole tensor `s` and local parameter p (model_impl.h).
void ot__slice_copy(const ot__slice *s, const ot_param *p, float *local, float *whole,
                       bool to_whole) {
  const int64_t wc = s->shape[1] ? s->shape[1] : 1, lc = p->ndim == 2 ? p->shape[1] : 1;
  for (int k = 0; k < s->nseg; k++) {
    if (!s->cols) {
      float *a = local + s->l0[k] * lc, *b = whole + s->g0[k] * wc;
      size_t bytes = (size_t)(s->n[k] * wc) * sizeof(float);
      if (to_whole) memcpy(b, a, bytes);
      else memcpy(a, b, bytes);
      continue;
    }
    for (int64_t row = 0; row < p->shape[0]; row++) {
      float *a = local + row * lc + s->l0[k], *b = whole + row * wc + s->g0[k];
      if (to_whole) memcpy(b, a, (size_t)s->n[k] * sizeof(float));
      else memcpy(a, b, (size_t)s->n[k] * sizeof(float));
    }
  }
}

static ot_status part_check(const ot_model *m, int i, const void *buf, const void *whole,
                            const char *fn) {
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(buf, fn);
  OT_CHECK_PTR(whole, fn);
  if (i < 0 || i >= m->n_params)
    return ot_error(OT_EINVAL, "%s: parameter index %d outside [0, %d)", fn, i, m->n_params);
  return OT_OK;
}

ot_status ot_model_part_get(const ot_model *m, int i, const float *buf, float *whole) {
  OT_TRY(part_check(m, i, buf, whole, "ot_model_part_get"));
  ot__slice_copy(&m->slices[i], &m->params[i], (float *)buf + m->params[i].offset, whole, true);
  return OT_OK;
}

ot_status ot_model_part_put(const ot_model *m, int i, float *buf, const float *whole) {
  OT_TRY(part_check(m, i, buf, whole, "ot_model_part_put"));
  ot__slice_copy(&m->slices[i], &m->params[i], buf + m->params[i].offset, (float *)whole, false);
  return OT_OK;
}

int64_t ot_model_part_whole_numel(const ot_model *m, int i) {
  if (!m || i < 0 || i >= m->n_params) return -1;
  const ot__slice *s = &m->slices[i];
  return s->shape[0] * (s->shape[1] ? s->shape[1] : 1);
}

ot_status ot_model_bind_grad(ot_model *m, int i, float *g) {
  OT_CHECK_PTR(m, "ot_model_bind_grad");
  if (!m->part.external_grads)
    return ot_error(OT_EINVAL, "ot_model_bind_grad: the model owns its gradients (create it with "
                    "external_grads to bind them)");
  if (i < 0 || i >= m->n_params)
    return ot_error(OT_EINVAL, "ot_model_bind_grad: parameter index %d outside [0, %d)", i, m->n_params);
  m->gp[i] = g;
  return OT_OK;
}

bool ot_model_param_is_split(const ot_model *m, int i) {
  if (!m || i < 0 || i >= m->n_params || m->part.tp == 1) return false;
  return !m->slices[i].whole;   // a tp rank's own rows / columns (or vocabulary rows)
}
