// Private interface of the model layer (src/model/*.c): the model object, the
// per-layer parameter/activation pointer sets, and helpers shared by the files.
#ifndef OT_MODEL_IMPL_H
#define OT_MODEL_IMPL_H

#include "internal.h"
#include "ot/attn.h"
#include "ot/model.h"

// Indices into the parameter table for one block (-1: absent).
typedef struct {
  int ln1_w, ln1_b, qkv_w, qkv_b, o_w, o_b, ln2_w, ln2_b, fc_w, fc_b, proj_w, proj_b;
} ot__layer_params;

// Activations of one block. `res` is the block input (the residual stream) and
// always saved per layer; the rest is saved per layer or points into the shared
// set, depending on the recompute policy (see plan.c).
typedef struct {
  void *res;               // [N, C] block input = norm1 input
  float *mean1, *rstd1;    // [N] (mean: LayerNorm only)
  void *y1;                // [N, C] norm1 output
  void *q, *k, *v;         // [B, Hq|Hkv, T, D] after RoPE
  void *atty;              // [N, Hq*D] attention output, token-major (o_proj input)
  float *lse;              // [B, Hq, T]
  void *res2;              // [N, C] = res + o_proj output = norm2 input
  float *mean2, *rstd2;    // [N]
  void *y2;                // [N, C] norm2 output
  void *pre;               // [N, Fa] fc output (GELU: pre-activation; SwiGLU: [gate | up])
  void *h;                 // [N, F] activation output (down projection input)
} ot__layer_acts;

struct ot_model {
  ot_model_config cfg;
  ot_run_config run;
  ot_mem_plan plan;
  int C, L, Hq, Hkv, D, F, Fa, V, Vp, QKV;   // QKV = (Hq + 2 Hkv) D
  // parameter layout
  ot_param *params;
  int n_params;
  ot_hf_tensor *hf;
  int n_hf;
  ot__layer_params *lp;       // [L]
  int wte, wpe, lnf_w, lnf_b, lm_head;   // -1 if absent
  size_t n_floats;
  // storage
  ot_arena a_params, a_grads, a_act, a_ws;
  float *w;                   // master weights [n_floats]
  uint16_t *wb;               // bf16 copy or NULL
  float *g;                   // gradients [n_floats]
  // activations (saved)
  ot__layer_acts *la;         // [L]
  int32_t *tokens;            // [N] copy of the last forward's tokens
  void *resf;                 // [N, C] final residual = norm_f input
  float *meanf, *rstdf;       // [N]
  void *yf;                   // [N, C] norm_f output
  void *logits;               // [N, Vp]
  float *row_loss;            // [N]
  // workspace
  ot__layer_acts shared;      // the non-saved buffers of one block
  void *abuf;                 // [N, C] projection outputs before the residual add
  void *ohead;                // [B, Hq, T, D] attention output, head-major
  void *dres, *dy, *datty, *dohead, *dq, *dk, *dv, *dh, *dfc;
  float *rope;                // [max_seq, D] or NULL
  // state of the last forward
  int B, T;
  bool have_grad_state;
};

// Parameter table construction (layout.c): fills params, hf, lp and n_floats
// into m (malloc'd tables, freed by ot__layout_free).
ot_status ot__layout_build(ot_model *m);
void ot__layout_free(ot_model *m);

// Pointers to a parameter in the master (f32), weights-as-used (dt) or grads buffer.
static inline float *ot__pw(const ot_model *m, int i) { return i < 0 ? NULL : m->w + m->params[i].offset; }
static inline float *ot__pg(const ot_model *m, int i) { return i < 0 ? NULL : m->g + m->params[i].offset; }
static inline const void *ot__pdt(const ot_model *m, int i) {
  if (i < 0) return NULL;
  return m->wb ? (const void *)(m->wb + m->params[i].offset) : (const void *)(m->w + m->params[i].offset);
}

#endif
