// Tiny models shared by the model-level tests (test_generate, test_paged):
// the "tiny" preset (GPT-2 family) and a Llama-family variant of it, and
// generic weights (gains != 1, biases != 0) so that every path matters.
#ifndef OT_TEST_MODEL_COMMON_H
#define OT_TEST_MODEL_COMMON_H
#include "harness.h"

static ot_model_config tm_cfg_gpt2(int max_seq) {
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  c.max_seq = max_seq;
  return c;
}

static ot_model_config tm_cfg_llama(int max_seq) {
  ot_model_config c = tm_cfg_gpt2(max_seq);
  snprintf(c.name, sizeof c.name, "tiny-llama");
  c.names = OT_NAMES_LLAMA;
  c.norm = OT_NORM_RMSNORM;
  c.mlp = OT_MLP_SWIGLU;
  c.pos = OT_POS_ROPE;
  c.n_kv_heads = 2;
  c.d_ff = 64;
  c.tied = false;
  c.bias = false;
  return c;
}

// Creates config c for run (B, T, dt) and fills generic weights from seed.
static ot_model *tm_make(const ot_model_config *c, int B, int T, ot_dtype dt, uint64_t seed) {
  ot_run_config r = {B, T, dt, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  if (!th_check(ot_model_create(&m, c, &r) == OT_OK, "create %s: %s", c->name, ot_last_error()))
    return NULL;
  th_rng g = {seed};
  float *w = ot_model_params(m);
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    float *x = w + p->offset;
    switch (p->kind) {
      case OT_PT_EMBED: case OT_PT_LM_HEAD: th_fill_normal(&g, x, (size_t)c->vocab * c->d_model, 0.5f); break;
      case OT_PT_POS: th_fill_normal(&g, x, p->numel, 0.2f); break;
      case OT_PT_MATRIX: th_fill_normal(&g, x, p->numel, 0.25f); break;
      case OT_PT_MATRIX_RES: th_fill_normal(&g, x, p->numel, 0.15f); break;
      case OT_PT_NORM_W:
        for (size_t j = 0; j < p->numel; j++) x[j] = 1.0f + 0.1f * th_normal(&g);
        break;
      case OT_PT_NORM_B: case OT_PT_BIAS: th_fill_normal(&g, x, p->numel, 0.1f); break;
    }
  }
  ot_model_sync_bf16(m);
  return m;
}
#endif
