// Model forward and backward over the operators of ot/ops.h and the flash
// attention of ot/attn.h. Every buffer comes from the plan (plan.c); the only
// memory the step itself touches beyond that is the operators' ot_scratch.
// The same calls run in the forward and in every recompute, so recompute
// none | selective | full give bitwise-identical losses and gradients.
#include "model_impl.h"
#include <math.h>
#include <omp.h>

// ------------------------------------------------------------- helpers ------
static inline float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f2bf(float f) {  // round to nearest even; NaN stays quiet NaN
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

// y = a + b, n elements of dt (element-wise, static partition).
static void add_rows(ot_dtype dt, void *y, const void *a, const void *b, size_t n) {
  const long nn = (long)n;
  if (dt == OT_F32) {
    float *yy = y;
    const float *aa = a, *bb = b;
#pragma omp parallel for schedule(static) if (nn >= 65536)
    for (long i = 0; i < nn; i++) yy[i] = aa[i] + bb[i];
  } else {
    uint16_t *yy = y;
    const uint16_t *aa = a, *bb = b;
#pragma omp parallel for schedule(static) if (nn >= 65536)
    for (long i = 0; i < nn; i++) yy[i] = f2bf(bf2f(aa[i]) + bf2f(bb[i]));
  }
}

// [B, T, H, D] <-> [B, H, T, D] (element size es). to_heads: token-major src ->
// head-major dst; otherwise head-major src -> token-major dst.
static void transpose_heads(size_t es, void *dst, const void *src, int B, int T, int H, int D,
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

// Sum of buf [n] (dt) over the tensor group (no-op without tensor parallelism).
static ot_status tp_sum(const ot_model *m, void *buf, size_t n) {
  if (m->part.tp == 1) return OT_OK;
  return m->part.comm.allreduce(m->part.comm.ctx, buf, n, m->run.dt, OT_RED_SUM);
}
// A row-parallel layer's bias is added by tp rank 0 only (then summed once).
static const float *rp_bias(const ot_model *m, int i) {
  return m->part.tp_rank == 0 ? ot__pw(m, i) : NULL;
}
static void grads_ready(const ot_model *m, size_t from) {
  if (m->part.comm.grads_ready) m->part.comm.grads_ready(m->part.comm.ctx, from);
}

static ot_status norm_fwd(const ot_model *m, void *y, float *mean, float *rstd, void *res_out,
                          const void *x, const void *r, int gi, int bi, int N) {
  if (m->cfg.norm == OT_NORM_LAYERNORM)
    return ot_layernorm_fwd(m->run.dt, y, mean, rstd, res_out, x, r, ot__pw(m, gi), ot__pw(m, bi),
                            N, m->C, m->cfg.eps);
  return ot_rmsnorm_fwd(m->run.dt, y, rstd, res_out, x, r, ot__pw(m, gi), N, m->C, m->cfg.eps);
}

static ot_status norm_bwd(const ot_model *m, void *dx, int gi, int bi, const void *dy,
                          const void *dres, const void *res, const float *mean, const float *rstd,
                          int N) {
  if (m->cfg.norm == OT_NORM_LAYERNORM)
    return ot_layernorm_bwd(m->run.dt, dx, ot__pg(m, gi), ot__pg(m, bi), dy, dres, res, mean, rstd,
                            ot__pw(m, gi), N, m->C);
  return ot_rmsnorm_bwd(m->run.dt, dx, ot__pg(m, gi), dy, dres, res, rstd, ot__pw(m, gi), N, m->C);
}

static ot_attn_shape attn_shape(const ot_model *m, int B, int T) {
  ot_attn_shape s = {B, m->Hq, m->Hkv, T, T, m->D, true, NULL, 0.0f};
  return s;
}

// Attention core: flash forward into the head-major workspace, then the
// token-major copy the output projection reads.
static ot_status attn_core_fwd(ot_model *m, ot__layer_acts *A, int B, int T) {
  ot_attn_shape s = attn_shape(m, B, T);
  OT_TRY(ot_attn_flash_fwd(m->run.dt, m->ohead, A->lse, A->q, A->k, A->v, &s));
  transpose_heads(ot_dtype_size(m->run.dt), A->atty, m->ohead, B, T, m->Hq, m->D, false);
  return OT_OK;
}

// MLP activation: h = gelu(pre) or silu(gate) * up.
static ot_status mlp_act_fwd(ot_model *m, ot__layer_acts *A, int N) {
  if (m->cfg.mlp == OT_MLP_GELU) return ot_gelu_fwd(m->run.dt, A->h, A->pre, (size_t)N * m->F);
  return ot_swiglu_fwd(m->run.dt, A->h, A->pre, N, m->F);
}

// ------------------------------------------------------------- block --------
// Forward of block l from its input la[l].res. out: also compute the MLP
// output and the block output (the next block's input); false when the
// backward reruns the block (full recompute) and only needs its internals.
static ot_status block_fwd(ot_model *m, int l, int B, int T, bool out) {
  ot__layer_acts *A = &m->la[l];
  const ot__layer_params *P = &m->lp[l];
  const ot_dtype dt = m->run.dt;
  const int N = B * T, C = m->C, HD = m->Hq * m->D;
  OT_TRY(norm_fwd(m, A->y1, A->mean1, A->rstd1, NULL, A->res, NULL, P->ln1_w, P->ln1_b, N));
  OT_TRY(ot_qkv_fwd(dt, A->q, A->k, A->v, A->y1, ot__pdt(m, P->qkv_w), ot__pw(m, P->qkv_b), B, T, C,
                    m->Hq, m->Hkv, m->D));
  if (m->rope) {
    OT_TRY(ot_rope_fwd(dt, A->q, m->rope, m->cfg.max_seq, B, m->Hq, T, m->D, m->D, 0,
                       m->cfg.rope_style));
    OT_TRY(ot_rope_fwd(dt, A->k, m->rope, m->cfg.max_seq, B, m->Hkv, T, m->D, m->D, 0,
                       m->cfg.rope_style));
  }
  OT_TRY(attn_core_fwd(m, A, B, T));
  OT_TRY(ot_linear_fwd(dt, m->abuf, NULL, A->atty, ot__pdt(m, P->o_w), rp_bias(m, P->o_b), N, C,
                       HD, OT_ACT_NONE));
  OT_TRY(tp_sum(m, m->abuf, (size_t)N * C));
  OT_TRY(norm_fwd(m, A->y2, A->mean2, A->rstd2, A->res2, A->res, m->abuf, P->ln2_w, P->ln2_b, N));
  if (m->cfg.mlp == OT_MLP_GELU) {
    OT_TRY(ot_linear_fwd(dt, A->h, A->pre, A->y2, ot__pdt(m, P->fc_w), ot__pw(m, P->fc_b), N, m->F,
                         C, OT_ACT_GELU));
  } else {
    OT_TRY(ot_linear_fwd(dt, A->pre, NULL, A->y2, ot__pdt(m, P->fc_w), ot__pw(m, P->fc_b), N, m->Fa,
                         C, OT_ACT_NONE));
    OT_TRY(mlp_act_fwd(m, A, N));
  }
  if (!out) return OT_OK;
  OT_TRY(ot_linear_fwd(dt, m->abuf, NULL, A->h, ot__pdt(m, P->proj_w), rp_bias(m, P->proj_b), N,
                       C, m->F, OT_ACT_NONE));
  OT_TRY(tp_sum(m, m->abuf, (size_t)N * C));
  void *next = l + 1 < m->L ? m->la[l + 1].res : m->resf;
  add_rows(dt, next, A->res2, m->abuf, (size_t)N * C);
  return OT_OK;
}

// Backward of block l: m->dres holds the gradient of the block output on entry
// and of its input on exit; parameter gradients accumulate.
static ot_status block_bwd(ot_model *m, int l, int B, int T) {
  ot__layer_acts *A = &m->la[l];
  const ot__layer_params *P = &m->lp[l];
  const ot_dtype dt = m->run.dt;
  const ot_recompute rc = m->run.recompute;
  const int N = B * T, C = m->C, HD = m->Hq * m->D;
  if (rc == OT_RECOMPUTE_FULL) OT_TRY(block_fwd(m, l, B, T, false));
  if (rc == OT_RECOMPUTE_SELECTIVE) OT_TRY(mlp_act_fwd(m, A, N));
  // MLP
  OT_TRY(ot_linear_bwd(dt, m->dh, ot__pg(m, P->proj_w), ot__pg(m, P->proj_b), m->dres, NULL, A->h,
                       ot__pdt(m, P->proj_w), N, C, m->F, OT_ACT_NONE));
  grads_ready(m, m->params[P->proj_w].offset);
  if (m->cfg.mlp == OT_MLP_GELU) {
    OT_TRY(ot_linear_bwd(dt, m->dy, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dh, A->pre, A->y2,
                         ot__pdt(m, P->fc_w), N, m->F, C, OT_ACT_GELU));
  } else {
    OT_TRY(ot_swiglu_bwd(dt, m->dfc, A->pre, m->dh, N, m->F));
    OT_TRY(ot_linear_bwd(dt, m->dy, ot__pg(m, P->fc_w), ot__pg(m, P->fc_b), m->dfc, NULL, A->y2,
                         ot__pdt(m, P->fc_w), N, m->Fa, C, OT_ACT_NONE));
  }
  grads_ready(m, m->params[P->fc_w].offset);
  OT_TRY(tp_sum(m, m->dy, (size_t)N * C));
  OT_TRY(norm_bwd(m, m->dres, P->ln2_w, P->ln2_b, m->dy, m->dres, A->res2, A->mean2, A->rstd2, N));
  grads_ready(m, m->params[P->ln2_w].offset);
  // attention
  if (rc == OT_RECOMPUTE_SELECTIVE) OT_TRY(attn_core_fwd(m, A, B, T));
  OT_TRY(ot_linear_bwd(dt, m->datty, ot__pg(m, P->o_w), ot__pg(m, P->o_b), m->dres, NULL, A->atty,
                       ot__pdt(m, P->o_w), N, C, HD, OT_ACT_NONE));
  grads_ready(m, m->params[P->o_w].offset);
  const size_t es = ot_dtype_size(dt);
  transpose_heads(es, m->dohead, m->datty, B, T, m->Hq, m->D, true);
  if (rc == OT_RECOMPUTE_NONE) transpose_heads(es, m->ohead, A->atty, B, T, m->Hq, m->D, true);
  ot_attn_shape s = attn_shape(m, B, T);
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
  grads_ready(m, m->params[P->qkv_w].offset);
  OT_TRY(tp_sum(m, m->dy, (size_t)N * C));
  OT_TRY(norm_bwd(m, m->dres, P->ln1_w, P->ln1_b, m->dy, m->dres, A->res, A->mean1, A->rstd1, N));
  return OT_OK;
}

// ------------------------------------------------------------- model --------
static int lm_index(const ot_model *m) { return m->cfg.tied ? m->wte : m->lm_head; }

static ot_status forward(ot_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                         float count, bool want_grad, double *loss) {
  const ot_dtype dt = m->run.dt;
  const int N = B * T;
  if (m->first) {
    memcpy(m->tokens, tokens, (size_t)N * sizeof(int32_t));
    if (m->part.vocab_parallel && m->part.tp > 1)
      OT_TRY(ot__vp_embed_fwd(m, m->la[0].res, m->tokens, B, T));
    else
      OT_TRY(ot_embed_fwd(dt, m->la[0].res, m->tokens, ot__pdt(m, m->wte), ot__pdt(m, m->wpe), B,
                          T, m->C, m->V));
  }
  for (int l = 0; l < m->L; l++) OT_TRY(block_fwd(m, l, B, T, true));
  if (!m->last) {
    m->have_grad_state = want_grad;
    return OT_OK;
  }
  OT_TRY(norm_fwd(m, m->yf, m->meanf, m->rstdf, NULL, m->resf, NULL, m->lnf_w, m->lnf_b, N));
  OT_TRY(ot_linear_fwd(dt, m->logits, NULL, m->yf, ot__pdt(m, lm_index(m)), NULL, N, m->Vl, m->C,
                       OT_ACT_NONE));
  if (!targets) return OT_OK;
  if (!(count > 0.0f)) {
    long n = 0;
    for (int i = 0; i < N; i++) n += targets[i] != m->run.ignore_index;
    count = n > 0 ? (float)n : 1.0f;   // nothing to learn from: loss 0, zero gradient
  }
  if (m->part.vocab_parallel && m->part.tp > 1)
    OT_TRY(ot__vp_xent(m, m->logits, targets, N, count, m->row_loss, want_grad, m->xred));
  else
    OT_TRY(ot_xent_fused(dt, m->logits, m->Vl, targets, N, m->V, m->run.ignore_index, count,
                         m->row_loss, NULL, want_grad));
  double sum = 0.0;
  for (int i = 0; i < N; i++) sum += m->row_loss[i];
  if (loss) *loss = sum / (double)count;
  m->have_grad_state = want_grad;
  return OT_OK;
}

static ot_status check_slot(const ot_model *m, int slot, const char *fn) {
  OT_CHECK_PTR(m, fn);
  if (slot < 0 || slot >= m->part.slots)
    return ot_error(OT_EINVAL, "%s: slot %d outside [0, %d) (create the model with more slots)", fn,
                    slot, m->part.slots);
  return OT_OK;
}

ot_status ot_model_forward_slot(ot_model *m, int slot, const int32_t *tokens,
                                const int32_t *targets, int B, int T, float count, bool want_grad,
                                double *loss) {
  static const char fn[] = "ot_model_forward";
  OT_TRY(check_slot(m, slot, fn));
  if (m->first) OT_CHECK_PTR(tokens, fn);
  if (B <= 0 || B > m->run.B || T <= 0 || T > m->run.T)
    return ot_error(OT_EINVAL, "%s: B=%d, T=%d outside the planned [1, %d] x [1, %d] (create the "
                    "model with a larger run)", fn, B, T, m->run.B, m->run.T);
  if (want_grad && !targets && m->last)
    return ot_error(OT_EINVAL, "%s: want_grad needs targets", fn);
  if (!isfinite(count))
    return ot_error(OT_EINVAL, "%s: count=%g must be finite (> 0, or <= 0 for this call's own "
                    "non-ignored targets)", fn, count);
  ot__select_slot(m, slot);
  m->have_grad_state = false;
  m->B = B;
  m->T = T;
  OT_PROF_BEGIN("model_forward", 0.0, 0.0);
  ot_status s = forward(m, tokens, targets, B, T, count, want_grad, loss);
  OT_PROF_STOP();
  return s;
}

ot_status ot_model_forward(ot_model *m, const int32_t *tokens, const int32_t *targets, int B,
                           int T, float count, bool want_grad, double *loss) {
  return ot_model_forward_slot(m, 0, tokens, targets, B, T, count, want_grad, loss);
}

// Offset of block l's first parameter (every gradient from there on belongs to
// blocks >= l and the head).
static size_t block_start(const ot_model *m, int l) { return m->params[m->lp[l].ln1_w].offset; }

// Vocabulary-row chunks (comm.vocab_chunk): chunk_rows rows per call.
static bool vocab_chunked(const ot_model *m) { return m->part.comm.vocab_chunk != NULL; }
static int chunk_rows(const ot_model *m) {
  const int r = m->part.comm.chunk_rows;
  return r > 0 && r < m->Vl ? r : m->Vl;
}

// The head's weight gradient chunk by chunk into comm.chunk_buf (logits hold dlogits).
static ot_status head_dw_chunks(ot_model *m, int N) {
  const int R = chunk_rows(m), li = lm_index(m);
  for (int r0 = 0; r0 < m->Vl; r0 += R) {
    const int rows = r0 + R < m->Vl ? R : m->Vl - r0;
    OT_TRY(ot_linear_dw_rows(m->run.dt, m->part.comm.chunk_buf, m->logits, m->yf, N, m->Vl, m->C,
                             r0, rows));
    m->part.comm.vocab_chunk(m->part.comm.ctx, li, r0, rows);
  }
  return OT_OK;
}

// The token embedding's gradient chunk by chunk into comm.chunk_buf; positions into
// their bound gradient.
static void embed_dw_chunks(ot_model *m, int B, int T) {
  const int R = chunk_rows(m);
  if (m->wpe >= 0) ot__embed_bwd_rows(m, NULL, 0, 0, ot__pg(m, m->wpe), m->dres, m->tokens, B, T);
  for (int r0 = 0; r0 < m->Vl; r0 += R) {
    const int rows = r0 + R < m->Vl ? R : m->Vl - r0;
    memset(m->part.comm.chunk_buf, 0, (size_t)rows * m->C * sizeof(float));
    ot__embed_bwd_rows(m, m->part.comm.chunk_buf, r0, rows, NULL, m->dres, m->tokens, B, T);
    m->part.comm.vocab_chunk(m->part.comm.ctx, m->wte, r0, rows);
  }
}

static ot_status backward(ot_model *m) {
  const ot_dtype dt = m->run.dt;
  const int B = m->B, T = m->T, N = B * T;
  if (m->last) {
    if (vocab_chunked(m)) OT_TRY(head_dw_chunks(m, N));
    OT_TRY(ot_linear_bwd(dt, m->dy, vocab_chunked(m) ? NULL : ot__pg(m, lm_index(m)), NULL,
                         m->logits, NULL, m->yf, ot__pdt(m, lm_index(m)), N, m->Vl, m->C,
                         OT_ACT_NONE));
    if (m->part.vocab_parallel) OT_TRY(tp_sum(m, m->dy, (size_t)N * m->C));
    OT_TRY(norm_bwd(m, m->dres, m->lnf_w, m->lnf_b, m->dy, NULL, m->resf, m->meanf, m->rstdf, N));
    grads_ready(m, m->params[m->lnf_w].offset);
  }
  for (int l = m->L - 1; l >= 0; l--) {
    OT_TRY(block_bwd(m, l, B, T));
    if (l > 0 || m->first) grads_ready(m, block_start(m, l));
  }
  if (m->first) {
    if (vocab_chunked(m))
      embed_dw_chunks(m, B, T);
    else if (m->part.vocab_parallel && m->part.tp > 1)
      ot__vp_embed_bwd(m, m->dres, m->tokens, B, T);
    else
      OT_TRY(ot_embed_bwd(dt, ot__pg(m, m->wte), ot__pg(m, m->wpe), m->dres, m->tokens, B, T, m->C,
                          m->V));
  }
  grads_ready(m, 0);
  return OT_OK;
}

ot_status ot_model_backward_slot(ot_model *m, int slot) {
  static const char fn[] = "ot_model_backward";
  OT_TRY(check_slot(m, slot, fn));
  ot__select_slot(m, slot);
  if (!m->have_grad_state)
    return ot_error(OT_EINVAL, "%s: no forward with targets and want_grad since the last backward",
                    fn);
  m->have_grad_state = false;   // the logits hold dlogits: a second backward would be wrong
  OT_PROF_BEGIN("model_backward", 0.0, 0.0);
  ot_status s = backward(m);
  OT_PROF_STOP();
  return s;
}

ot_status ot_model_backward(ot_model *m) { return ot_model_backward_slot(m, 0); }

const void *ot_model_logits(const ot_model *m, int *ld) {
  if (!m) return NULL;
  if (ld) *ld = m->Vl;
  return m->logits;
}

void *ot_model_stage_input(ot_model *m, int slot) {
  return m && slot >= 0 && slot < m->part.slots ? m->slots[slot].la[0].res : NULL;
}
void *ot_model_stage_output(ot_model *m, int slot) {
  return m && slot >= 0 && slot < m->part.slots ? m->slots[slot].resf : NULL;
}
void *ot_model_stage_grad(ot_model *m) { return m ? m->dres : NULL; }
