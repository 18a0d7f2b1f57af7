// Parameter layout: the table of named tensors inside the one f32 master buffer
// (same layout for the gradients and the bf16 copy), the Hugging Face view of
// it (names, shapes, row ranges of fused tensors, Conv1D transposes), the
// GPT-2 style initialization and the parameter accessors.
#include "model_impl.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

// ------------------------------------------------------------ dimensions ---
// Fills the dimensions of m from a config, run and partition (all validated).
void ot__set_dims(ot_model *m, const ot_model_config *c, const ot_run_config *r,
                  const ot_model_part *p) {
  m->cfg = *c;
  m->run = *r;
  m->part = *p;
  const int tp = p->tp;
  m->first = p->layer0 == 0;
  m->last = p->layer1 == ot_model_n_blocks(c);
  m->C = c->d_model; m->L = p->layer1 - p->layer0;
  m->d0 = p->layer0;
  m->Hq = c->n_heads / tp; m->Hkv = c->n_kv_heads / tp;
  m->D = ot_model_head_dim(c); m->F = c->d_ff / tp;
  m->Fa = c->mlp == OT_MLP_SWIGLU ? 2 * m->F : m->F;
  m->V = c->vocab; m->Vp = ot_model_vocab_padded(c);
  m->Vl = p->vocab_parallel ? (m->Vp + tp - 1) / tp : m->Vp;
  m->v0 = p->vocab_parallel ? p->tp_rank * m->Vl : 0;
  m->QKV = (m->Hq + 2 * m->Hkv) * m->D;
  m->Le = 0;
  m->e0 = 0;
  if (c->arch == OT_ARCH_ENCDEC) {   // [layer0, layer1) over encoder blocks, then decoder blocks
    const int E = c->n_enc_layers, k0 = p->layer0, k1 = p->layer1;
    m->e0 = k0 < E ? k0 : E;
    m->Le = (k1 < E ? k1 : E) - m->e0;
    m->d0 = (k0 > E ? k0 : E) - E;
    m->L = (k1 > E ? k1 : E) - E - m->d0;
    m->enc_last = m->Le > 0 && m->e0 + m->Le == E;
    m->dec_first = m->L > 0 && m->d0 == 0;
  }
}

// ------------------------------------------------------------ table build ---
typedef struct {
  ot_model *m;
  int cap_p, cap_h;
  size_t off;
} builder;

static ot_status grow(void **p, int *cap, int need, size_t es) {
  if (need <= *cap) return OT_OK;
  int nc = *cap ? *cap * 2 : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * es);
  if (!q) return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  *p = q;
  *cap = nc;
  return OT_OK;
}

// Adds a parameter [d0] (d1 = 0) or [d0, d1]; returns its index or -1 on error.
static int add_param(builder *b, ot_param_kind kind, int layer, int64_t d0, int64_t d1,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int add_param(builder *b, ot_param_kind kind, int layer, int64_t d0, int64_t d1,
                     const char *fmt, ...) {
  ot_model *m = b->m;
  if (grow((void **)&m->params, &b->cap_p, m->n_params + 1, sizeof(ot_param)) != OT_OK) return -1;
  ot_param *p = &m->params[m->n_params];
  memset(p, 0, sizeof *p);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->name, sizeof p->name, fmt, ap);
  va_end(ap);
  p->kind = kind;
  p->layer = layer;
  p->ndim = d1 ? 2 : 1;
  p->shape[0] = d0;
  p->shape[1] = d1;
  p->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
  p->offset = b->off;
  p->decay = kind == OT_PT_EMBED || kind == OT_PT_POS || kind == OT_PT_MATRIX ||
             kind == OT_PT_MATRIX_RES || kind == OT_PT_LM_HEAD;
  b->off += (p->numel + 15) & ~(size_t)15;
  return m->n_params++;
}

// HF view of rows [row0, row0 + rows) of parameter `param`.
static int add_hf(builder *b, int param, int64_t row0, int64_t rows, bool transpose,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int add_hf(builder *b, int param, int64_t row0, int64_t rows, bool transpose,
                  const char *fmt, ...) {
  ot_model *m = b->m;
  if (param < 0) return -1;
  if (grow((void **)&m->hf, &b->cap_h, m->n_hf + 1, sizeof(ot_hf_tensor)) != OT_OK) return -1;
  ot_hf_tensor *h = &m->hf[m->n_hf];
  memset(h, 0, sizeof *h);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->name, sizeof h->name, fmt, ap);
  va_end(ap);
  const ot_param *p = &m->params[param];
  h->param = param;
  h->row0 = row0;
  h->rows = rows;
  h->transpose = transpose;
  h->ndim = p->ndim;
  if (p->ndim == 1) {
    h->shape[0] = rows;
  } else if (transpose) {
    h->shape[0] = p->shape[1];
    h->shape[1] = rows;
  } else {
    h->shape[0] = rows;
    h->shape[1] = p->shape[1];
  }
  return m->n_hf++;
}

// A parameter that is exactly one HF tensor (same name).
static int add_plain(builder *b, ot_param_kind kind, int layer, int64_t d0, int64_t d1,
                     bool transpose, const char *name) {
  int i = add_param(b, kind, layer, d0, d1, "%s", name);
  if (i >= 0 && add_hf(b, i, 0, d0, transpose, "%s", name) < 0) return -1;
  return i;
}

static ot_status build_gpt2(builder *b) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  const bool nb = c->norm == OT_NORM_LAYERNORM && c->bias;
  char n[80];
  if (m->first || (c->tied && m->last)) {
    m->wte = add_param(b, OT_PT_EMBED, -1, m->Vl, m->C, "wte.weight");
    add_hf(b, m->wte, 0, m->V, false, "wte.weight");
  }
  if (m->first && c->pos == OT_POS_LEARNED)
    m->wpe = add_plain(b, OT_PT_POS, -1, c->max_seq, m->C, false, "wpe.weight");
  for (int l = 0; l < m->L; l++) {
    ot__layer_params *P = &m->lp[l];
    const int gl = m->part.layer0 + l;
#define G2(field, kind, d0, d1, tr, suffix) \
    (snprintf(n, sizeof n, "h.%d.%s", gl, suffix), P->field = add_plain(b, kind, gl, d0, d1, tr, n))
    G2(ln1_w, OT_PT_NORM_W, m->C, 0, false, "ln_1.weight");
    if (nb) G2(ln1_b, OT_PT_NORM_B, m->C, 0, false, "ln_1.bias");
    G2(qkv_w, OT_PT_MATRIX, m->QKV, m->C, true, "attn.c_attn.weight");
    if (c->bias) G2(qkv_b, OT_PT_BIAS, m->QKV, 0, false, "attn.c_attn.bias");
    G2(o_w, OT_PT_MATRIX_RES, m->C, m->Hq * m->D, true, "attn.c_proj.weight");
    if (c->bias) G2(o_b, OT_PT_BIAS, m->C, 0, false, "attn.c_proj.bias");
    G2(ln2_w, OT_PT_NORM_W, m->C, 0, false, "ln_2.weight");
    if (nb) G2(ln2_b, OT_PT_NORM_B, m->C, 0, false, "ln_2.bias");
    G2(fc_w, OT_PT_MATRIX, m->Fa, m->C, true, "mlp.c_fc.weight");
    if (c->bias) G2(fc_b, OT_PT_BIAS, m->Fa, 0, false, "mlp.c_fc.bias");
    G2(proj_w, OT_PT_MATRIX_RES, m->C, m->F, true, "mlp.c_proj.weight");
    if (c->bias) G2(proj_b, OT_PT_BIAS, m->C, 0, false, "mlp.c_proj.bias");
#undef G2
  }
  if (!m->last) return OT_OK;
  m->lnf_w = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, "ln_f.weight");
  if (nb) m->lnf_b = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, "ln_f.bias");
  if (!c->tied) {
    m->lm_head = add_param(b, OT_PT_LM_HEAD, -1, m->Vl, m->C, "lm_head.weight");
    add_hf(b, m->lm_head, 0, m->V, false, "lm_head.weight");
  }
  return OT_OK;
}

static ot_status build_llama(builder *b) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  const bool nb = c->norm == OT_NORM_LAYERNORM && c->bias;
  const int64_t qd = (int64_t)m->Hq * m->D, kd = (int64_t)m->Hkv * m->D;
  char n[80];
  if (m->first || (c->tied && m->last)) {
    m->wte = add_param(b, OT_PT_EMBED, -1, m->Vl, m->C, "model.embed_tokens.weight");
    add_hf(b, m->wte, 0, m->V, false, "model.embed_tokens.weight");
  }
  if (m->first && c->pos == OT_POS_LEARNED)
    m->wpe = add_plain(b, OT_PT_POS, -1, c->max_seq, m->C, false, "model.embed_positions.weight");
  for (int lo = 0; lo < m->L; lo++) {
    ot__layer_params *P = &m->lp[lo];
    const int l = m->part.layer0 + lo;   // global index in names
    const char *pre = "model.layers";
#define LL(field, kind, d0, d1, suffix) \
    (snprintf(n, sizeof n, "%s.%d.%s", pre, l, suffix), P->field = add_plain(b, kind, l, d0, d1, false, n))
#define PART(field, r0, rows, suffix) add_hf(b, P->field, r0, rows, false, "%s.%d.%s", pre, l, suffix)
    LL(ln1_w, OT_PT_NORM_W, m->C, 0, "input_layernorm.weight");
    if (nb) LL(ln1_b, OT_PT_NORM_B, m->C, 0, "input_layernorm.bias");
    P->qkv_w = add_param(b, OT_PT_MATRIX, l, m->QKV, m->C, "%s.%d.self_attn.qkv_proj.weight", pre, l);
    PART(qkv_w, 0, qd, "self_attn.q_proj.weight");
    PART(qkv_w, qd, kd, "self_attn.k_proj.weight");
    PART(qkv_w, qd + kd, kd, "self_attn.v_proj.weight");
    if (c->bias) {
      P->qkv_b = add_param(b, OT_PT_BIAS, l, m->QKV, 0, "%s.%d.self_attn.qkv_proj.bias", pre, l);
      PART(qkv_b, 0, qd, "self_attn.q_proj.bias");
      PART(qkv_b, qd, kd, "self_attn.k_proj.bias");
      PART(qkv_b, qd + kd, kd, "self_attn.v_proj.bias");
    }
    LL(o_w, OT_PT_MATRIX_RES, m->C, qd, "self_attn.o_proj.weight");
    if (c->bias) LL(o_b, OT_PT_BIAS, m->C, 0, "self_attn.o_proj.bias");
    LL(ln2_w, OT_PT_NORM_W, m->C, 0, "post_attention_layernorm.weight");
    if (nb) LL(ln2_b, OT_PT_NORM_B, m->C, 0, "post_attention_layernorm.bias");
    if (c->mlp == OT_MLP_SWIGLU) {
      P->fc_w = add_param(b, OT_PT_MATRIX, l, m->Fa, m->C, "%s.%d.mlp.gate_up_proj.weight", pre, l);
      PART(fc_w, 0, m->F, "mlp.gate_proj.weight");
      PART(fc_w, m->F, m->F, "mlp.up_proj.weight");
      if (c->bias) {
        P->fc_b = add_param(b, OT_PT_BIAS, l, m->Fa, 0, "%s.%d.mlp.gate_up_proj.bias", pre, l);
        PART(fc_b, 0, m->F, "mlp.gate_proj.bias");
        PART(fc_b, m->F, m->F, "mlp.up_proj.bias");
      }
    } else {
      LL(fc_w, OT_PT_MATRIX, m->Fa, m->C, "mlp.up_proj.weight");
      if (c->bias) LL(fc_b, OT_PT_BIAS, m->Fa, 0, "mlp.up_proj.bias");
    }
    LL(proj_w, OT_PT_MATRIX_RES, m->C, m->F, "mlp.down_proj.weight");
    if (c->bias) LL(proj_b, OT_PT_BIAS, m->C, 0, "mlp.down_proj.bias");
#undef LL
#undef PART
  }
  if (!m->last) return OT_OK;
  m->lnf_w = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, "model.norm.weight");
  if (nb) m->lnf_b = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, "model.norm.bias");
  if (!c->tied) {
    m->lm_head = add_param(b, OT_PT_LM_HEAD, -1, m->Vl, m->C, "lm_head.weight");
    add_hf(b, m->lm_head, 0, m->V, false, "lm_head.weight");
  }
  return OT_OK;
}

// One Marian block's tensors under `pre` ("model.encoder.layers.N" / "model.decoder...."),
// with cross-attention for decoder blocks; q, k, v rows of each attention fused.
static void marian_block(builder *b, ot__layer_params *P, int l, const char *pre, bool cross) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  const bool nb = c->norm == OT_NORM_LAYERNORM && c->bias;
  const int64_t qd = (int64_t)m->Hq * m->D, kd = (int64_t)m->Hkv * m->D;
  char n[96];
#define MB(field, kind, d0, d1, suffix) \
    (snprintf(n, sizeof n, "%s.%d.%s", pre, l, suffix), P->field = add_plain(b, kind, l, d0, d1, false, n))
#define MPART(field, r0, rows, suffix) add_hf(b, P->field, r0, rows, false, "%s.%d.%s", pre, l, suffix)
#define MQKV(wf, bf, att)                                                                          \
    P->wf = add_param(b, OT_PT_MATRIX, l, m->QKV, m->C, "%s.%d." att ".qkv_proj.weight", pre, l);  \
    MPART(wf, 0, qd, att ".q_proj.weight");                                                       \
    MPART(wf, qd, kd, att ".k_proj.weight");                                                      \
    MPART(wf, qd + kd, kd, att ".v_proj.weight");                                                 \
    if (c->bias) {                                                                                \
      P->bf = add_param(b, OT_PT_BIAS, l, m->QKV, 0, "%s.%d." att ".qkv_proj.bias", pre, l);       \
      MPART(bf, 0, qd, att ".q_proj.bias");                                                       \
      MPART(bf, qd, kd, att ".k_proj.bias");                                                      \
      MPART(bf, qd + kd, kd, att ".v_proj.bias");                                                 \
    }
  MB(ln1_w, OT_PT_NORM_W, m->C, 0, "self_attn_layer_norm.weight");
  if (nb) MB(ln1_b, OT_PT_NORM_B, m->C, 0, "self_attn_layer_norm.bias");
  MQKV(qkv_w, qkv_b, "self_attn");
  MB(o_w, OT_PT_MATRIX_RES, m->C, qd, "self_attn.out_proj.weight");
  if (c->bias) MB(o_b, OT_PT_BIAS, m->C, 0, "self_attn.out_proj.bias");
  if (cross) {
    MB(lnc_w, OT_PT_NORM_W, m->C, 0, "encoder_attn_layer_norm.weight");
    if (nb) MB(lnc_b, OT_PT_NORM_B, m->C, 0, "encoder_attn_layer_norm.bias");
    MQKV(cqkv_w, cqkv_b, "encoder_attn");
    MB(co_w, OT_PT_MATRIX_RES, m->C, qd, "encoder_attn.out_proj.weight");
    if (c->bias) MB(co_b, OT_PT_BIAS, m->C, 0, "encoder_attn.out_proj.bias");
  }
  MB(ln2_w, OT_PT_NORM_W, m->C, 0, "final_layer_norm.weight");
  if (nb) MB(ln2_b, OT_PT_NORM_B, m->C, 0, "final_layer_norm.bias");
  MB(fc_w, OT_PT_MATRIX, m->Fa, m->C, "fc1.weight");   // SwiGLU (not Marian's): [gate | up]
  if (c->bias) MB(fc_b, OT_PT_BIAS, m->Fa, 0, "fc1.bias");
  MB(proj_w, OT_PT_MATRIX_RES, m->C, m->F, "fc2.weight");
  if (c->bias) MB(proj_b, OT_PT_BIAS, m->C, 0, "fc2.bias");
#undef MB
#undef MPART
#undef MQKV
}

// A stack's own embedding tensors (mBART): learned positions, the embedding norm.
static void stack_embed(builder *b, const char *pre, int *pos, int *lw, int *lb) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  char n[96];
  if (c->pos == OT_POS_LEARNED) {
    snprintf(n, sizeof n, "%s.embed_positions.weight", pre);
    *pos = add_plain(b, OT_PT_POS, -1, (int64_t)c->max_seq + c->pos_offset, m->C, false, n);
  }
  if (!c->embed_norm) return;
  snprintf(n, sizeof n, "%s.layernorm_embedding.weight", pre);
  *lw = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, n);
  if (c->norm == OT_NORM_LAYERNORM && c->bias) {
    snprintf(n, sizeof n, "%s.layernorm_embedding.bias", pre);
    *lb = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, n);
  }
}

// MarianMTModel names (mBART's with learned positions and embedding norms): the shared embedding, encoder blocks, decoder blocks, (pre-norm)
// final norms, the logits bias ([1, V] in HF) and an untied head.
static ot_status build_marian(builder *b) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  const bool nb = c->norm == OT_NORM_LAYERNORM && c->bias;
  // a pipeline stage holds the shared embedding where it embeds (the encoder's first
  // stage, the stage of decoder block 0) or projects (a tied head on the last stage)
  if (m->first || m->dec_first || (c->tied && m->last)) {
    m->wte = add_param(b, OT_PT_EMBED, -1, m->Vl, m->C, "model.shared.weight");
    add_hf(b, m->wte, 0, m->V, false, "model.shared.weight");
  }
  if (m->first) stack_embed(b, "model.encoder", &m->epos, &m->elne_w, &m->elne_b);
  for (int l = 0; l < m->Le; l++)
    marian_block(b, &m->elp[l], m->e0 + l, "model.encoder.layers", false);
  if (c->norm_place == OT_PLACE_PRE && m->enc_last) {
    m->elnf_w = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, "model.encoder.layer_norm.weight");
    if (nb) m->elnf_b = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, "model.encoder.layer_norm.bias");
  }
  if (m->dec_first) stack_embed(b, "model.decoder", &m->dpos, &m->dlne_w, &m->dlne_b);
  for (int l = 0; l < m->L; l++)
    marian_block(b, &m->lp[l], m->d0 + l, "model.decoder.layers", true);
  if (!m->last) return OT_OK;
  if (c->norm_place == OT_PLACE_PRE) {
    m->lnf_w = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, "model.decoder.layer_norm.weight");
    if (nb) m->lnf_b = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, "model.decoder.layer_norm.bias");
  }
  if (c->logits_bias) {
    m->lbias = add_param(b, OT_PT_BIAS, -1, m->Vl, 0, "final_logits_bias");
    int h = add_hf(b, m->lbias, 0, m->V, false, "final_logits_bias");
    if (h >= 0) {   // HF keeps it [1, V]
      m->hf[h].ndim = 2;
      m->hf[h].shape[0] = 1;
      m->hf[h].shape[1] = m->V;
    }
  }
  if (!c->tied) {
    m->lm_head = add_param(b, OT_PT_LM_HEAD, -1, m->Vl, m->C, "lm_head.weight");
    add_hf(b, m->lm_head, 0, m->V, false, "lm_head.weight");
  }
  return OT_OK;
}

// ViTForImageClassification names: the patch projection (HF's Conv2d weight [C, Cin, P, P]
// is our [C, Cin*P*P]), CLS token ([1, 1, C] in HF), positions ([1, T, C] in HF), blocks
// (query / key / value rows of one fused qkv), the final norm and the classifier.
// Sets the file shape of the HF tensor of parameter `param` (the last one added for it).
static void file_shape(builder *b, int param, int fdim, int64_t d0, int64_t d1, int64_t d2,
                       int64_t d3) {
  ot_model *m = b->m;
  for (int i = m->n_hf - 1; param >= 0 && i >= 0; i--)
    if (m->hf[i].param == param) {
      const int64_t d[4] = {d0, d1, d2, d3};
      m->hf[i].fdim = fdim;
      memcpy(m->hf[i].fshape, d, sizeof d);
      return;
    }
}

static ot_status build_vit(builder *b) {
  ot_model *m = b->m;
  const ot_model_config *c = &m->cfg;
  const int64_t qd = (int64_t)m->Hq * m->D, K = (int64_t)c->channels * c->patch_size * c->patch_size;
  char n[96];
  const char *pre = "vit.encoder.layer";
  if (m->first) {   // the patch embedding, CLS token and positions: the first pipeline stage's
    m->vpatch_w = add_plain(b, OT_PT_MATRIX, -1, m->C, K, false,
                            "vit.embeddings.patch_embeddings.projection.weight");
    m->vpatch_b = add_plain(b, OT_PT_BIAS, -1, m->C, 0, false,
                            "vit.embeddings.patch_embeddings.projection.bias");
    m->vcls = add_plain(b, OT_PT_POS, -1, 1, m->C, false, "vit.embeddings.cls_token");
    m->wpe = add_plain(b, OT_PT_POS, -1, c->max_seq, m->C, false, "vit.embeddings.position_embeddings");
    file_shape(b, m->vpatch_w, 4, m->C, c->channels, c->patch_size, c->patch_size);
    file_shape(b, m->vcls, 3, 1, 1, m->C, 0);
    file_shape(b, m->wpe, 3, 1, c->max_seq, m->C, 0);
  }
  for (int l = 0; l < m->L; l++) {   // (tensor parallel: this rank's heads and MLP rows)
    ot__layer_params *P = &m->lp[l];
    const int gl = m->part.layer0 + l;
#define VB(field, kind, d0, d1, suffix) \
    (snprintf(n, sizeof n, "%s.%d.%s", pre, gl, suffix), P->field = add_plain(b, kind, gl, d0, d1, false, n))
#define VPART(field, r0, rows, suffix) add_hf(b, P->field, r0, rows, false, "%s.%d.%s", pre, gl, suffix)
    VB(ln1_w, OT_PT_NORM_W, m->C, 0, "layernorm_before.weight");
    VB(ln1_b, OT_PT_NORM_B, m->C, 0, "layernorm_before.bias");
    P->qkv_w = add_param(b, OT_PT_MATRIX, gl, m->QKV, m->C, "%s.%d.attention.attention.qkv.weight", pre, gl);
    VPART(qkv_w, 0, qd, "attention.attention.query.weight");
    VPART(qkv_w, qd, qd, "attention.attention.key.weight");
    VPART(qkv_w, 2 * qd, qd, "attention.attention.value.weight");
    P->qkv_b = add_param(b, OT_PT_BIAS, gl, m->QKV, 0, "%s.%d.attention.attention.qkv.bias", pre, gl);
    VPART(qkv_b, 0, qd, "attention.attention.query.bias");
    VPART(qkv_b, qd, qd, "attention.attention.key.bias");
    VPART(qkv_b, 2 * qd, qd, "attention.attention.value.bias");
    VB(o_w, OT_PT_MATRIX, m->C, qd, "attention.output.dense.weight");
    VB(o_b, OT_PT_BIAS, m->C, 0, "attention.output.dense.bias");
    VB(ln2_w, OT_PT_NORM_W, m->C, 0, "layernorm_after.weight");
    VB(ln2_b, OT_PT_NORM_B, m->C, 0, "layernorm_after.bias");
    VB(fc_w, OT_PT_MATRIX, m->F, m->C, "intermediate.dense.weight");
    VB(fc_b, OT_PT_BIAS, m->F, 0, "intermediate.dense.bias");
    VB(proj_w, OT_PT_MATRIX, m->C, m->F, "output.dense.weight");
    VB(proj_b, OT_PT_BIAS, m->C, 0, "output.dense.bias");
#undef VB
#undef VPART
  }
  if (!m->last) return OT_OK;   // the final norm and the classifier: the last stage's
  m->lnf_w = add_plain(b, OT_PT_NORM_W, -1, m->C, 0, false, "vit.layernorm.weight");
  m->lnf_b = add_plain(b, OT_PT_NORM_B, -1, m->C, 0, false, "vit.layernorm.bias");
  m->lm_head = add_plain(b, OT_PT_LM_HEAD, -1, m->V, m->C, false, "classifier.weight");
  m->lbias = add_plain(b, OT_PT_BIAS, -1, m->V, 0, false, "classifier.bias");
  if (m->lnf_b < 0 || m->lm_head < 0 || m->lbias < 0)
    return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  return OT_OK;
}

ot_status ot__layout_build(ot_model *m) {
  builder b = {m, 0, 0, 0};
  m->lp = calloc((size_t)m->L + 1, sizeof *m->lp);
  m->elp = calloc((size_t)m->Le + 1, sizeof *m->elp);
  if (!m->lp || !m->elp) return ot_error(OT_ENOMEM, "model layout: out of memory");
  for (int l = 0; l < m->L; l++) memset(&m->lp[l], 0xff, sizeof m->lp[l]);  // all -1
  for (int l = 0; l < m->Le; l++) memset(&m->elp[l], 0xff, sizeof m->elp[l]);
  m->wte = m->wpe = m->lnf_w = m->lnf_b = m->lm_head = -1;
  m->elnf_w = m->elnf_b = m->lbias = -1;
  m->epos = m->dpos = m->elne_w = m->elne_b = m->dlne_w = m->dlne_b = -1;
  m->vpatch_w = m->vpatch_b = m->vcls = -1;
  ot_status s = m->cfg.names == OT_NAMES_VIT     ? build_vit(&b)
                : m->cfg.names == OT_NAMES_GPT2  ? build_gpt2(&b)
                : m->cfg.names == OT_NAMES_LLAMA ? build_llama(&b)
                                                 : build_marian(&b);
  if (s != OT_OK) return s;
  // every add checked here once: a failed add leaves a -1 somewhere
  const bool post = m->cfg.norm_place == OT_PLACE_POST;   // post-norm: no final norm
  for (int l = 0; l < m->Le; l++)
    if (m->elp[l].qkv_w < 0 || m->elp[l].o_w < 0 || m->elp[l].fc_w < 0 || m->elp[l].proj_w < 0 ||
        m->elp[l].ln1_w < 0 || m->elp[l].ln2_w < 0)
      return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  if (m->cfg.arch == OT_ARCH_ENCDEC) {
    const bool lp = m->cfg.pos == OT_POS_LEARNED, en = m->cfg.embed_norm;
    for (int l = 0; l < m->L; l++)
      if (m->lp[l].cqkv_w < 0 || m->lp[l].co_w < 0 || m->lp[l].lnc_w < 0)
        return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
    if ((m->last && m->cfg.logits_bias && m->lbias < 0) || (m->enc_last && !post && m->elnf_w < 0) ||
        (m->first && ((lp && m->epos < 0) || (en && m->elne_w < 0))) ||
        (m->dec_first && ((lp && m->dpos < 0) || (en && m->dlne_w < 0) || m->wte < 0)))
      return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  }
  const bool vit = m->cfg.arch == OT_ARCH_VIT;   // no token embedding
  if ((vit && m->first && (m->vpatch_w < 0 || m->vpatch_b < 0 || m->vcls < 0 || m->wpe < 0)) ||
      (m->first && m->wte < 0 && !vit) || (m->last && !post && m->lnf_w < 0) ||
      (m->last && !m->cfg.tied && m->lm_head < 0) || (m->last && m->cfg.tied && m->wte < 0) ||
      (m->first && m->cfg.pos == OT_POS_LEARNED && m->Le == 0 && m->wpe < 0))
    return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  for (int l = 0; l < m->L; l++)
    if (m->lp[l].qkv_w < 0 || m->lp[l].o_w < 0 || m->lp[l].fc_w < 0 || m->lp[l].proj_w < 0 ||
        m->lp[l].ln1_w < 0 || m->lp[l].ln2_w < 0)
      return ot_error(OT_ENOMEM, "model layout: out of memory for the tensor table");
  // a block's parameters in forward order: the backward completes them from the end
  // (the contract of ot_model_comm.grads_ready)
  for (int l = 0; l < m->L; l++) {
    const ot__layer_params *P = &m->lp[l];
    const int order[6] = {P->ln1_w, P->qkv_w, P->o_w, P->ln2_w, P->fc_w, P->proj_w};
    for (int k = 1; k < 6; k++)
      if (m->params[order[k]].offset <= m->params[order[k - 1]].offset)
        return ot_error(OT_EINTERNAL, "model layout: block %d's parameters are not in forward order", l);
  }
  m->n_floats = b.off;
  return OT_OK;
}

void ot__layout_free(ot_model *m) {
  free(m->params);
  free(m->hf);
  free(m->lp);
  free(m->elp);
  m->params = NULL;
  m->hf = NULL;
  m->lp = NULL;
  m->elp = NULL;
  m->n_params = m->n_hf = 0;
}

// ------------------------------------------------------------- accessors ----
const ot_model_config *ot_model_config_of(const ot_model *m) { return m ? &m->cfg : NULL; }
const ot_run_config *ot_model_run_of(const ot_model *m) { return m ? &m->run : NULL; }
const ot_mem_plan *ot_model_plan_of(const ot_model *m) { return m ? &m->plan : NULL; }
float *ot_model_params(ot_model *m) { return m ? m->w : NULL; }
float *ot_model_grads(ot_model *m) { return m ? m->g : NULL; }
uint16_t *ot_model_params_bf16(ot_model *m) { return m ? m->wb : NULL; }
size_t ot_model_n_floats(const ot_model *m) { return m ? m->n_floats : 0; }
int ot_model_param_count(const ot_model *m) { return m ? m->n_params : 0; }
const ot_param *ot_model_param_at(const ot_model *m, int i) {
  return m && i >= 0 && i < m->n_params ? &m->params[i] : NULL;
}
int ot_model_param_find(const ot_model *m, const char *name) {
  if (!m || !name) return -1;
  for (int i = 0; i < m->n_params; i++)
    if (strcmp(m->params[i].name, name) == 0) return i;
  return -1;
}
int ot_model_hf_count(const ot_model *m) { return m ? m->n_hf : 0; }
int ot_model_hf_file_shape(const ot_model *m, int i, int64_t shape[4]) {
  if (!m || i < 0 || i >= m->n_hf) return 0;
  const ot_hf_tensor *h = &m->hf[i];
  memset(shape, 0, 4 * sizeof *shape);
  if (h->fdim > 0) {
    memcpy(shape, h->fshape, sizeof h->fshape);
    return h->fdim;
  }
  shape[0] = h->shape[0];
  shape[1] = h->shape[1];
  return h->ndim;
}
const ot_hf_tensor *ot_model_hf_at(const ot_model *m, int i) {
  return m && i >= 0 && i < m->n_hf ? &m->hf[i] : NULL;
}
int ot_model_hf_find(const ot_model *m, const char *name) {
  if (!m || !name) return -1;
  for (int i = 0; i < m->n_hf; i++)
    if (strcmp(m->hf[i].name, name) == 0) return i;
  return -1;
}

void ot_model_zero_grad(ot_model *m) {
  if (m && m->g) memset(m->g, 0, m->n_floats * sizeof(float));
}

ot_status ot_model_sync_bf16(ot_model *m) {
  OT_CHECK_PTR(m, "ot_model_sync_bf16");
  if (m->wb && m->run.dt == OT_F16) ot_cvt_f32_to_f16(m->w, m->wb, m->n_stored);
  else if (m->wb) ot_cvt_f32_to_bf16(m->w, m->wb, m->n_stored);
  return ot_model_sync_qat(m);
}

// Copies between an HF tensor (row-major in its HF shape) and buf.
static void hf_copy(const ot_model *m, const ot_hf_tensor *h, float *buf, float *hfdata, bool to_hf) {
  const ot_param *p = &m->params[h->param];
  const size_t cols = p->ndim == 2 ? (size_t)p->shape[1] : 1;
  float *base = buf + p->offset + (size_t)h->row0 * cols;
  const size_t rows = (size_t)h->rows;
  if (!h->transpose) {
    if (to_hf) memcpy(hfdata, base, rows * cols * sizeof(float));
    else memcpy(base, hfdata, rows * cols * sizeof(float));
    return;
  }
  // HF [cols, rows] <-> ours [rows, cols]
  for (size_t r = 0; r < rows; r++)
    for (size_t j = 0; j < cols; j++) {
      if (to_hf) hfdata[j * rows + r] = base[r * cols + j];
      else base[r * cols + j] = hfdata[j * rows + r];
    }
}

ot_status ot_model_hf_get(const ot_model *m, int i, const float *buf, float *out) {
  OT_CHECK_PTR(m, "ot_model_hf_get");
  OT_CHECK_PTR(buf, "ot_model_hf_get");
  OT_CHECK_PTR(out, "ot_model_hf_get");
  if (i < 0 || i >= m->n_hf)
    return ot_error(OT_EINVAL, "ot_model_hf_get: tensor index %d outside [0, %d)", i, m->n_hf);
  hf_copy(m, &m->hf[i], (float *)buf, out, true);
  return OT_OK;
}

ot_status ot_model_hf_put(const ot_model *m, int i, float *buf, const float *in) {
  OT_CHECK_PTR(m, "ot_model_hf_put");
  OT_CHECK_PTR(buf, "ot_model_hf_put");
  OT_CHECK_PTR(in, "ot_model_hf_put");
  if (i < 0 || i >= m->n_hf)
    return ot_error(OT_EINVAL, "ot_model_hf_put: tensor index %d outside [0, %d)", i, m->n_hf);
  hf_copy(m, &m->hf[i], buf, (float *)in, false);
  return OT_OK;
}
