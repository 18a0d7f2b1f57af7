// Model forward and backward for training: the embedding, the blocks (the one
// block forward and backward of block.c, over the current sequence), the final
// norm, the head and the loss; pipeline stages, vocabulary-parallel parts and
// the vocabulary-row gradient chunks of ZeRO-2. Every buffer comes from the
// plan (plan.c); the only memory a step touches beyond that is the operators'
// ot_scratch.
#include "model_impl.h"
#include <math.h>
#include <omp.h>

// ------------------------------------------------------------- helpers ------

void ot__add_pair(ot_dtype dt, void *y, const void *a, const void *b, size_t n) {
  const long nn = (long)n;
  if (dt == OT_F32) {
    float *yy = y;
    const float *aa = a, *bb = b;
#pragma omp parallel for schedule(static) if (nn >= 65536)
    for (long i = 0; i < nn; i++) yy[i] = aa[i] + bb[i];
  } else if (dt == OT_F16) {
#pragma omp parallel for schedule(static) if (nn >= 65536)
    for (long i = 0; i < nn; i++) ot__stf(dt, y, (size_t)i, ot__ldf(dt, a, (size_t)i) + ot__ldf(dt, b, (size_t)i));
  } else {
    uint16_t *yy = y;
    const uint16_t *aa = a, *bb = b;
#pragma omp parallel for schedule(static) if (nn >= 65536)
    for (long i = 0; i < nn; i++) yy[i] = ot__f2bf(ot__bf2f(aa[i]) + ot__bf2f(bb[i]));
  }
}

// ------------------------------------------------------------- model --------
// The current slot's pre-norm self-attention blocks over la[0].res [B*T, C]: each one's
// output (res2 + abuf) is added by the next one's first norm; the last one's pair is left
// in io->x, io->r (decoder-only models and the vision transformer).
ot_status ot__stack_fwd(ot_model *m, int B, int T, ot__block_io *io) {
  ot__kv_self src = ot__kv_self_make(NULL);
  src.drop = &m->ddrop;
  *io = (ot__block_io){B, T, m->la[0].res, NULL, NULL, m->abuf, m->ohead, m->qtok, 0, NULL,
                       &src.base, NULL, &m->ddrop};
  for (int l = 0; l < m->L; l++) {
    io->A = &m->la[l];
    ot__need_block(m, l, false);
    OT_TRY(ot__block_fwd(&m->graph, l, io, true));
    io->x = m->la[l].res2;
    io->r = m->abuf;
  }
  io->kv = NULL;   // (src lived on this stack)
  return OT_OK;
}

static int lm_index(const ot_model *m) { return m->cfg.tied ? m->wte : m->lm_head; }

static ot_status forward(ot_model *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                         float count, bool want_grad, double *loss) {
  const ot__graph *g = &m->graph;
  const ot_dtype dt = m->run.dt;
  const int N = B * T;
  if (m->first) {
    memcpy(m->tokens, tokens, (size_t)N * sizeof(int32_t));
    if (m->part.param_slots)   // ZeRO-3: the rows read from the shards a chunk at a time
      OT_TRY(ot__z3_embed_fwd(m, m->la[0].res, m->tokens, B, T));
    else if (m->part.vocab_parallel && m->part.tp > 1)
      OT_TRY(ot__vp_embed_fwd(m, m->la[0].res, m->tokens, B, T));
    else
      OT_TRY(ot__embed_fwd(g, m->la[0].res, m->tokens, B, T, 0, NULL));
    OT_TRY(ot__drop_fwd(&m->ddrop, m->ddrop.resid, dt, m->la[0].res, (size_t)N * m->C, 0,
                        OT__DROP_EMBED));
  }
  ot__block_io io;
  OT_TRY(ot__stack_fwd(m, B, T, &io));
  if (!m->last) {   // the stage output, materialized for the next stage
    ot__add_pair(dt, m->resf, io.x, io.r, (size_t)N * m->C);
    m->have_grad_state = want_grad;
    return OT_OK;
  }
  OT_TRY(ot__norm_fwd(g, m->yf, m->meanf, m->rstdf, m->resf, io.x, io.r, m->graph.lnf_w,
                      m->graph.lnf_b, N));
  return ot__head_fwd(m, targets, N, count, want_grad, loss);
}

// ZeRO-3's chunked head GEMMs take no bias: the logits bias (a ViT's classifier bias, a
// stored global tensor) is added to logits [N, Vl] here, and its gradient (the column
// sums of the dlogits, in row order) taken in the backward.
static void z3_bias_fwd(ot_model *m, int N) {
  const float *b = ot__pw(m, m->lbias);
  for (long r = 0; r < N; r++)
    for (int j = 0; j < m->Vl; j++)
      ot__stf(m->run.dt, m->logits, (size_t)r * m->Vl + j,
              ot__ldf(m->run.dt, m->logits, (size_t)r * m->Vl + j) + b[j]);
}
static void z3_bias_bwd(ot_model *m, int N) {
  float *g = ot__pg(m, m->lbias);
  for (int j = 0; j < m->Vl; j++) {
    float s = 0.0f;
    for (long r = 0; r < N; r++) s += ot__ldf(m->run.dt, m->logits, (size_t)r * m->Vl + j);
    g[j] += s;
  }
}

// The head on m->yf [N, C] and the loss (the single call site of the cross-entropy).
ot_status ot__head_fwd(ot_model *m, const int32_t *targets, int N, float count, bool want_grad,
                       double *loss) {
  const ot_dtype dt = m->run.dt;
  if (m->part.param_slots) {
    OT_TRY(ot__z3_head(m, lm_index(m), N, false, NULL));
    if (m->lbias >= 0) z3_bias_fwd(m, N);
  } else if (m->graph.head.q) {   // quantized inference (ot_model_set_weights_q): f32 activations
    OT_TRY(ot__wlinear(dt, m->logits, NULL, m->yf, &m->graph.head, ot__pw(m, m->lbias), N, m->Vl, m->C,
                       OT_ACT_NONE));
  } else OT_TRY(ot_linear_fwd_w(dt, ot__wdt(m), m->logits, NULL, m->yf, ot__pdt(m, lm_index(m)),
                              ot__pw(m, m->lbias), N, m->Vl, m->C, OT_ACT_NONE));
  if (!targets) return OT_OK;
  if (!(count > 0.0f)) {
    long n = 0;
    for (int i = 0; i < N; i++) n += targets[i] != m->run.ignore_index;
    count = n > 0 ? (float)n : 1.0f;   // nothing to learn from: loss 0, zero gradient
  }
  // loss scaling: the gradient written over the logits (the seed of the backward) is
  // (softmax - onehot) / gcount = scale x that of the loss; row losses stay unscaled
  const float gcount = want_grad && m->loss_scale > 0.0f ? count / m->loss_scale : count;
  double sum = 0.0;
  m->nll = NAN;
  if (m->part.vocab_parallel && m->part.tp > 1) {   // logits split over the tensor group
    const ot__vp_shard v = ot__vp_shard_of(m);
    const bool eval_ls = m->ls_eps > 0.0f && !want_grad;
    double nll = 0.0;
    OT_TRY(ot__vp_xent(&v, m->logits, targets, N, gcount, m->ls_eps, m->row_loss,
                       eval_ls ? &nll : NULL, want_grad, m->xred));
    if (eval_ls) m->nll = nll / (double)count;
  } else if (m->ls_eps > 0.0f) {   // label-smoothed (encoder-decoder training)
    if (!want_grad) {       // evaluation: the plain NLL of the same logits first (not overwritten)
      OT_TRY(ot_xent_fused(dt, m->logits, m->Vl, targets, N, m->V, m->run.ignore_index, count,
                           m->row_loss, NULL, false));
      for (int i = 0; i < N; i++) sum += m->row_loss[i];
      m->nll = sum / (double)count;
      sum = 0.0;
    }
    OT_TRY(ot_xent_ls_fused(dt, m->logits, m->Vl, targets, N, m->V, m->run.ignore_index,
                            m->ls_eps, gcount, m->row_loss, NULL, want_grad));
  } else {
    OT_TRY(ot_xent_fused(dt, m->logits, m->Vl, targets, N, m->V, m->run.ignore_index, gcount,
                         m->row_loss, NULL, want_grad));
  }
  for (int i = 0; i < N; i++) sum += m->row_loss[i];
  if (!(m->ls_eps > 0.0f)) m->nll = sum / (double)count;
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
  if (m->cfg.arch == OT_ARCH_ENCDEC)
    return ot_error(OT_EINVAL, "%s: '%s' is an encoder-decoder model; run it with "
                    "ot_model_forward_s2s (source and target)", fn, m->cfg.name);
  if (m->cfg.arch == OT_ARCH_VIT)
    return ot_error(OT_EINVAL, "%s: '%s' is a vision transformer; run it with "
                    "ot_model_forward_images", fn, m->cfg.name);
  if (want_grad && !targets && m->last)
    return ot_error(OT_EINVAL, "%s: want_grad needs targets", fn);
  if (!isfinite(count))
    return ot_error(OT_EINVAL, "%s: count=%g must be finite (> 0, or <= 0 for this call's own "
                    "non-ignored targets)", fn, count);
  ot__select_slot(m, slot);
  m->have_grad_state = false;
  m->B = B;
  m->T = T;
  OT_TRY(ot__dropout_begin(m, want_grad, B, T, 0, NULL, 0, fn));
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

// The head's backward: weight (and logits bias) gradients from the dlogits in
// m->logits, dx [N, C] = dlogits W.
ot_status ot__head_bwd(ot_model *m, int N, void *dx) {
  if (vocab_chunked(m)) OT_TRY(head_dw_chunks(m, N));
  if (m->part.param_slots) {
    if (m->lbias >= 0) z3_bias_bwd(m, N);
    return ot__z3_head(m, lm_index(m), N, true, dx);
  }
  return ot_linear_bwd_w(m->run.dt, ot__wdt(m), dx, vocab_chunked(m) ? NULL : ot__pg(m, lm_index(m)),
                         ot__pg(m, m->lbias), m->logits, NULL, m->yf, ot__pdt(m, lm_index(m)), N,
                         m->Vl, m->C, OT_ACT_NONE);
}

static ot_status backward(ot_model *m) {
  const ot_dtype dt = m->run.dt;
  const int B = m->B, T = m->T, N = B * T;
  if (m->cfg.arch == OT_ARCH_ENCDEC) return ot__s2s_backward(m);
  if (m->cfg.arch == OT_ARCH_VIT) return ot__vit_backward(m);
  if (m->last) {
    OT_TRY(ot__head_bwd(m, N, m->dy));
    if (m->part.vocab_parallel) OT_TRY(ot__tp_sum(&m->graph, m->dy, (size_t)N * m->C));
    OT_TRY(ot__norm_bwd(m, m->dres, m->lnf_w, m->lnf_b, m->dy, NULL, m->resf, m->meanf, m->rstdf, N));
    ot__grads_ready(m, m->params[m->lnf_w].offset);
  }
  const ot__stack st = ot__stack_decoder(m);
  for (int l = m->L - 1; l >= 0; l--) {
    ot__need_block(m, l, true);
    OT_TRY(ot__block_bwd(m, &st, l, B, T));
    if (l > 0 || m->first) ot__grads_ready(m, block_start(m, l));
  }
  if (m->first) {
    OT_TRY(ot__drop_bwd(&m->ddrop, m->ddrop.resid, dt, m->dres, m->dres, (size_t)N * m->C, 0,
                        OT__DROP_EMBED));
    if (vocab_chunked(m))
      embed_dw_chunks(m, B, T);
    else if (m->part.vocab_parallel && m->part.tp > 1)
      ot__vp_embed_bwd(m, m->dres, m->tokens, B, T);
    else
      OT_TRY(ot_embed_bwd(dt, ot__pg(m, m->wte), ot__pg(m, m->wpe), m->dres, m->tokens, B, T, m->C,
                          m->V));
  }
  ot__grads_ready(m, 0);
  return OT_OK;
}

ot_status ot_model_backward_slot(ot_model *m, int slot) {
  static const char fn[] = "ot_model_backward";
  OT_TRY(check_slot(m, slot, fn));
  ot__select_slot(m, slot);
  if (m->infer_only)
    return ot_error(OT_EINVAL, "%s: '%s' was loaded for inference (ot_model_load_hf_infer: no "
                    "gradient buffer); load it with ot_model_load_hf to train", fn, m->cfg.name);
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

// Label smoothing eps in [0, 1) of every later loss (0: plain cross-entropy).
ot_status ot_model_set_label_smoothing(ot_model *m, float eps) {
  OT_CHECK_PTR(m, "ot_model_set_label_smoothing");
  if (!(eps >= 0.0f && eps < 1.0f))
    return ot_error(OT_EINVAL, "label smoothing %g is outside [0, 1) (0.1 is the usual value)", eps);
  m->ls_eps = eps;
  return OT_OK;
}

// Loss scale of every later backward: the loss gradient at the seed is multiplied by
// scale (> 0, finite; 1: none), so every gradient comes out scaled by it.
ot_status ot_model_set_loss_scale(ot_model *m, float scale) {
  OT_CHECK_PTR(m, "ot_model_set_loss_scale");
  if (!(scale > 0.0f) || !isfinite(scale))
    return ot_error(OT_EINVAL, "loss scale %g must be finite and > 0 (1: no scaling)", scale);
  m->loss_scale = scale;
  return OT_OK;
}

double ot_model_nll(const ot_model *m) { return m ? m->nll : NAN; }
