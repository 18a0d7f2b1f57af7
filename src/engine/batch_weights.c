// The serving engine's weights: pointers into its quantized model (ot_qmodel,
// tensors named as the model's parameters), each checked for presence and
// shape against the model config; the lm_head as a view of the first V rows
// (padding rows are never read); the RoPE table.
#include "engine/batch_impl.h"

typedef enum {
  R_LN1_W, R_LN1_B, R_QKV_W, R_QKV_B, R_O_W, R_O_B, R_LN2_W, R_LN2_B, R_FC_W, R_FC_B, R_PROJ_W,
  R_PROJ_B, R_WTE, R_WPE, R_LNF_W, R_LNF_B, R_LM
} role;

// The model's name of a tensor (ot_param.name: Hugging Face names, Llama's fused
// qkv_proj / gate_up_proj), layer l for per-block roles.
static void tensor_name(char *out, size_t cap, const ot_model_config *c, role r, int l) {
  static const char *const gpt2[] = {
      "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
      "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
      "mlp.c_proj.weight", "mlp.c_proj.bias", "wte.weight", "wpe.weight", "ln_f.weight",
      "ln_f.bias", "lm_head.weight"};
  static const char *const llama[] = {
      "input_layernorm.weight", "input_layernorm.bias", "self_attn.qkv_proj.weight",
      "self_attn.qkv_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
      "post_attention_layernorm.weight", "post_attention_layernorm.bias", "mlp.up_proj.weight",
      "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias",
      "model.embed_tokens.weight", "model.embed_positions.weight", "model.norm.weight",
      "model.norm.bias", "lm_head.weight"};
  const bool g2 = c->names == OT_NAMES_GPT2;
  const char *n = g2 ? gpt2[r] : llama[r];
  if (!g2 && c->mlp == OT_MLP_SWIGLU && (r == R_FC_W || r == R_FC_B))
    n = r == R_FC_W ? "mlp.gate_up_proj.weight" : "mlp.gate_up_proj.bias";
  if (r >= R_WTE) snprintf(out, cap, "%s", n);
  else snprintf(out, cap, g2 ? "h.%d.%s" : "model.layers.%d.%s", l, n);
}

// Tensor (role, layer) of [rows, cols]; f32: it must be stored f32 (vectors:
// rows 1). present = false: *out = NULL.
static ot_status get(const ot_engine *e, role r, int l, int rows, int cols, bool f32, bool present,
                     const ot_qweight **out) {
  *out = NULL;
  if (!present) return OT_OK;
  char name[96];
  tensor_name(name, sizeof name, &e->mc, r, l);
  const ot_qtensor *t = ot_qmodel_find(e->q, name);
  if (!t)
    return ot_error(OT_EINVAL, "ot_engine_create: the model has no tensor '%s' (the engine needs "
                    "the whole model, with every tensor its config implies)", name);
  if (t->w.rows != rows || t->w.cols != cols)
    return ot_error(OT_EINVAL, "ot_engine_create: tensor '%s' is [%d, %d], the config implies "
                    "[%d, %d]", name, t->w.rows, t->w.cols, rows, cols);
  if (f32 && t->w.kind != OT_QW_F32)
    return ot_error(OT_EINVAL, "ot_engine_create: tensor '%s' is stored %s; the engine reads it as "
                    "f32", name, ot_qw_kind_name(t->w.kind));
  *out = &t->w;
  return OT_OK;
}

static ot_status vec(const ot_engine *e, role r, int l, int n, bool present, const float **out) {
  const ot_qweight *w;
  OT_TRY(get(e, r, l, 1, n, true, present, &w));
  *out = w ? (const float *)w->data : NULL;
  return OT_OK;
}

ot_status ot__eng_weights(ot_engine *e) {
  const ot_model_config *c = &e->mc;
  const bool nb = c->norm == OT_NORM_LAYERNORM && c->bias, b = c->bias;
  const int C = e->C, Vp = ot_model_vocab_padded(c);
  for (int l = 0; l < e->L; l++) {
    ot__eng_layer *w = &e->ly[l];
    OT_TRY(get(e, R_QKV_W, l, e->QKV, C, false, true, &w->qkv));
    OT_TRY(get(e, R_O_W, l, C, e->HD, false, true, &w->o));
    OT_TRY(get(e, R_FC_W, l, e->Fa, C, false, true, &w->fc));
    OT_TRY(get(e, R_PROJ_W, l, C, e->F, false, true, &w->proj));
    OT_TRY(vec(e, R_LN1_W, l, C, true, &w->ln1_w));
    OT_TRY(vec(e, R_LN1_B, l, C, nb, &w->ln1_b));
    OT_TRY(vec(e, R_LN2_W, l, C, true, &w->ln2_w));
    OT_TRY(vec(e, R_LN2_B, l, C, nb, &w->ln2_b));
    OT_TRY(vec(e, R_QKV_B, l, e->QKV, b, &w->qkv_b));
    OT_TRY(vec(e, R_O_B, l, C, b, &w->o_b));
    OT_TRY(vec(e, R_FC_B, l, e->Fa, b, &w->fc_b));
    OT_TRY(vec(e, R_PROJ_B, l, C, b, &w->proj_b));
  }
  OT_TRY(vec(e, R_LNF_W, -1, C, true, &e->lnf_w));
  OT_TRY(vec(e, R_LNF_B, -1, C, nb, &e->lnf_b));
  const ot_qweight *w;
  OT_TRY(get(e, R_WPE, -1, c->max_seq, C, true, c->pos == OT_POS_LEARNED, &w));
  e->wpe = w ? (const float *)w->data : NULL;
  OT_TRY(get(e, R_WTE, -1, Vp, C, false, true, &e->wte));
  OT_TRY(get(e, R_LM, -1, Vp, C, false, !c->tied, &w));
  e->lm = *(c->tied ? e->wte : w);   // a view of the V real rows: padding rows are never read
  e->lm.rows = e->V;
  e->lm.owned = false;
  if (c->pos == OT_POS_ROPE) {
    e->rope = ot_mem_alloc(sizeof(float) * (size_t)c->max_seq * e->D, OT_MEM_PARAMS);
    if (!e->rope) return ot_error(OT_ENOMEM, "ot_engine_create: no memory for the RoPE table");
    OT_TRY(ot_rope_table(e->rope, c->max_seq, e->D, c->rope_base));
  }
  return OT_OK;
}
