// The vision transformer as parts of the one model graph: the patch embedding
// (ot_patch_embed_fwd: one GEMM over the unfolded patches), the CLS token and
// learned positions (bicubically resized when the image size differs, as HF's
// interpolate_pos_encoding does), the blocks of block.c (bidirectional, with
// attention dropout, residual dropout and drop-path through the model's
// dropout), the final norm and the classification head on the CLS row (or, with
// mean pooling, the final norm of the patch rows' mean) through the one head and
// loss of forward.c (ot__head_fwd / ot__head_bwd).
#include "model_impl.h"
#include <math.h>

// ------------------------------------------------------------ config ------
ot_status ot__vit_validate(const ot_model_config *c, const char *n) {
  if (c->names != OT_NAMES_VIT)
    return ot_error(OT_EINVAL, "%s: a vision transformer takes vit names (names=%d)", n, (int)c->names);
  if (c->patch_size < 1 || c->patch_size > 1024)
    return ot_error(OT_EINVAL, "%s: patch_size=%d must be in [1, 1024] (16 for ViT-*/16)", n,
                    c->patch_size);
  if (c->image_size < c->patch_size || c->image_size > 65536)
    return ot_error(OT_EINVAL, "%s: image_size=%d must be in [patch_size=%d, 65536]", n,
                    c->image_size, c->patch_size);
  if (c->channels < 1 || c->channels > 16)
    return ot_error(OT_EINVAL, "%s: channels=%d must be in [1, 16] (3 for RGB)", n, c->channels);
  const int g = c->image_size / c->patch_size;
  if ((int64_t)g * g + 1 != c->max_seq)
    return ot_error(OT_EINVAL, "%s: max_seq=%d must be 1 + (image_size / patch_size)^2 = %lld (CLS "
                    "+ patches)", n, c->max_seq, (long long)g * g + 1);
  if (c->norm != OT_NORM_LAYERNORM || c->norm_place != OT_PLACE_PRE || !c->bias)
    return ot_error(OT_EINVAL, "%s: a vision transformer is pre-norm LayerNorm with biases", n);
  if (c->mlp != OT_MLP_GELU_ERF && c->mlp != OT_MLP_GELU)
    return ot_error(OT_EINVAL, "%s: activation %s unsupported in a vision transformer (use gelu_erf, "
                    "HF's \"gelu\", or gelu: \"gelu_new\")", n, ot__mlp_name(c->mlp));
  if (c->pos != OT_POS_LEARNED || c->tied || !c->logits_bias || c->vocab_pad != 1 ||
      c->n_kv_heads != c->n_heads)
    return ot_error(OT_EINVAL, "%s: a vision transformer has learned positions, an untied "
                    "classifier with a bias, vocab_pad 1 (vocab = classes) and n_kv_heads = "
                    "n_heads", n);
  if (c->embed_scale || c->embed_norm || c->n_enc_layers || c->src_vocab || c->pos_offset)
    return ot_error(OT_EINVAL, "%s: embed_scale, embed_norm, n_enc_layers, src_vocab and "
                    "pos_offset are encoder-decoder settings (leave them 0)", n);
  if (!(c->drop_path >= 0.0f && c->drop_path < 1.0f))
    return ot_error(OT_EINVAL, "%s: drop_path=%g must be in [0, 1) (0.1 is usual)", n, c->drop_path);
  return OT_OK;
}

int ot_vit_tokens(const ot_model_config *c, int H, int W) {
  if (!c || c->arch != OT_ARCH_VIT || c->patch_size < 1 || H < c->patch_size || W < c->patch_size)
    return 0;
  return 1 + (H / c->patch_size) * (W / c->patch_size);
}

// ------------------------------------------------ position interpolation ---
// PyTorch's bicubic kernel (A = -0.75) at fraction t: w[0..3] for taps -1, 0, 1, 2.
static void cubic_w(float t, float w[4]) {
  const float A = -0.75f, x0 = t + 1.0f, x1 = t, x2 = 1.0f - t, x3 = 2.0f - t;
  w[0] = ((A * x0 - 5.0f * A) * x0 + 8.0f * A) * x0 - 4.0f * A;
  w[1] = ((A + 2.0f) * x1 - (A + 3.0f)) * x1 * x1 + 1.0f;
  w[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
  w[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

// Output index o of in -> out samples (align_corners = False): the first tap's source
// index (taps clamped into [0, in - 1] by the caller) and the four weights.
static int cubic_taps(int in, int out, int o, float w[4]) {
  const float scale = (float)in / (float)out, real = scale * ((float)o + 0.5f) - 0.5f;
  const float f = floorf(real);
  cubic_w(real - f, w);
  return (int)f - 1;
}

static int clampi(int x, int hi) { return x < 0 ? 0 : x > hi ? hi : x; }

// The S x S grid of src [S*S, C] (f32) resized bicubically to dst [Hp*Wp, C] (as
// F.interpolate(mode="bicubic", align_corners=False): along x per row, then along y).
static void pos_resize_fwd(float *dst, const float *src, int S, int Hp, int Wp, int C) {
#pragma omp parallel for schedule(static) if ((long)Hp * Wp * C >= 65536)
  for (int oy = 0; oy < Hp; oy++) {
    float wy[4], wx[4];
    const int y0 = cubic_taps(S, Hp, oy, wy);
    for (int ox = 0; ox < Wp; ox++) {
      const int x0 = cubic_taps(S, Wp, ox, wx);
      float *o = dst + ((size_t)oy * Wp + ox) * C;
      for (int c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int i = 0; i < 4; i++) {
          const float *row = src + (size_t)clampi(y0 + i, S - 1) * S * C;
          float r = 0.0f;
          for (int j = 0; j < 4; j++) r += wx[j] * row[(size_t)clampi(x0 + j, S - 1) * C + c];
          acc += wy[i] * r;
        }
        o[c] = acc;
      }
    }
  }
}

// Its transpose: dsrc [S*S, C] += the adjoint of the resize applied to ddst [Hp*Wp, C].
static void pos_resize_bwd(float *dsrc, const float *ddst, int S, int Hp, int Wp, int C) {
  for (int oy = 0; oy < Hp; oy++) {
    float wy[4], wx[4];
    const int y0 = cubic_taps(S, Hp, oy, wy);
    for (int ox = 0; ox < Wp; ox++) {
      const int x0 = cubic_taps(S, Wp, ox, wx);
      const float *g = ddst + ((size_t)oy * Wp + ox) * C;
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
          float *d = dsrc + ((size_t)clampi(y0 + i, S - 1) * S + clampi(x0 + j, S - 1)) * C;
          const float w = wy[i] * wx[j];
          for (int c = 0; c < C; c++) d[c] += w * g[c];
        }
    }
  }
}

// ------------------------------------------------------------ forward -----
// m->vpos [T, C] = the positions of this forward (row 0: CLS; patch rows resized when
// m->vinterp), from the f32 master.
static void vit_positions(ot_model *m, int Hp, int Wp) {
  const int C = m->C, S = m->cfg.image_size / m->cfg.patch_size;
  const float *pos = ot__pw(m, m->wpe);
  if (!m->vinterp) {
    memcpy(m->vpos, pos, (size_t)(1 + Hp * Wp) * C * sizeof(float));
    return;
  }
  memcpy(m->vpos, pos, (size_t)C * sizeof(float));
  pos_resize_fwd(m->vpos + C, pos + C, S, Hp, Wp, C);
}

// x0 = la[0].res [B*T, C]: row (b, 0) = CLS + pos[0], row (b, 1 + p) = patch p's
// projection + pos[1 + p]; then the embedding dropout (HF ViTEmbeddings' order).
static ot_status vit_embed_fwd(ot_model *m, const ot_image_batch *b, int Hp, int Wp) {
  const ot_dtype dt = m->run.dt;
  const int B = b->B, C = m->C, Np = Hp * Wp, T = Np + 1, P = m->cfg.patch_size;
  vit_positions(m, Hp, Wp);
  OT_TRY(ot_patch_embed_fwd(dt, m->abuf, m->vcols, b->img, ot__pdt(m, m->vpatch_w),
                            ot__pw(m, m->vpatch_b), B, m->cfg.channels, b->H, b->W, P, C));
  void *x0 = m->la[0].res;
  const float *cls = ot__pw(m, m->vcls);
  const long rows = (long)B * T;
#pragma omp parallel for schedule(static) if (rows * C >= 65536)
  for (long r = 0; r < rows; r++) {
    const long bi = r / T, t = r % T;
    const float *pe = m->vpos + (size_t)t * C;
    for (int c = 0; c < C; c++) {
      const float v = t == 0 ? cls[c] : ot__ldf(dt, m->abuf, ((size_t)bi * Np + t - 1) * C + c);
      ot__stf(dt, x0, (size_t)r * C + c, v + pe[c]);
    }
  }
  return ot__drop_fwd(&m->ddrop, m->ddrop.resid, dt, x0, (size_t)rows * C, 0, OT__DROP_EMBED);
}

static ot_status images_check(const ot_model *m, const ot_image_batch *b, float count,
                              bool want_grad, const char *fn) {
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(b, fn);
  const ot_model_config *c = &m->cfg;
  if (c->arch != OT_ARCH_VIT)
    return ot_error(OT_EINVAL, "%s: '%s' is not a vision transformer", fn, c->name);
  if (m->first) OT_CHECK_PTR(b->img, fn);   // (later pipeline stages read their stage input)
  if (b->B <= 0 || b->B > m->run.B)
    return ot_error(OT_EINVAL, "%s: B=%d outside the planned [1, %d] (create the model with a larger "
                    "run)", fn, b->B, m->run.B);
  if (b->H < c->patch_size || b->W < c->patch_size)
    return ot_error(OT_EINVAL, "%s: %dx%d images are smaller than one %dx%d patch", fn, b->W, b->H,
                    c->patch_size, c->patch_size);
  if (!b->interpolate && (b->H != c->image_size || b->W != c->image_size))
    return ot_error(OT_EINVAL, "%s: input image size (%d*%d) doesn't match model (%d*%d); resize "
                    "the images, or interpolate the position embeddings (interpolate = true, "
                    "HF's interpolate_pos_encoding)", fn, b->H, b->W, c->image_size, c->image_size);
  const int T = ot_vit_tokens(c, b->H, b->W);
  if (T > m->run.T)
    return ot_error(OT_EINVAL, "%s: %dx%d images make %d tokens, more than the planned T=%d (create "
                    "the model with run.T = ot_vit_tokens(...))", fn, b->W, b->H, T, m->run.T);
  if (want_grad && m->last && !b->labels) return ot_error(OT_EINVAL, "%s: want_grad needs labels", fn);
  if (want_grad && m->qm)
    return ot_error(OT_EINVAL, "%s: the model runs quantized weights (inference only; "
                    "ot_model_set_weights_q(m, OT_QW_F32, 0) turns them off to train)", fn);
  if (!isfinite(count))
    return ot_error(OT_EINVAL, "%s: count=%g must be finite (> 0, or <= 0 for this call's own "
                    "labelled images)", fn, count);
  for (int i = 0; m->last && b->labels && i < b->B; i++)
    if (b->labels[i] != m->run.ignore_index && (b->labels[i] < 0 || b->labels[i] >= m->V))
      return ot_error(OT_EINVAL, "%s: labels[%d]=%d is outside [0, %d classes) (and not "
                      "ignore_index=%d)", fn, i, b->labels[i], m->V, m->run.ignore_index);
  return OT_OK;
}

// Mean pooling: resf rows [0, B) = the mean over t = 1 .. T-1 of (x + r) rows (b, t) (the
// last block's output pair, [B*T, C]; summed in f32, stored once in the run's dtype).
static void mean_pool_fwd(ot_model *m, const void *x, const void *r, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C;
  const float inv = 1.0f / (float)(T - 1);
#pragma omp parallel for schedule(static) if ((long)B * T * C >= 65536)
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      float s = 0.0f;
      for (int t = 1; t < T; t++) {
        const size_t e = ((size_t)b * T + t) * C + c;
        s += ot__ldf(dt, x, e) + (r ? ot__ldf(dt, r, e) : 0.0f);
      }
      ot__stf(dt, m->resf, (size_t)b * C + c, s * inv);
    }
}

// Its backward in place: dres rows [0, B) (the pooled rows' gradient) -> dres [B*T, C], row
// (b, 0) zero and rows (b, t >= 1) that gradient / (T - 1). Downward over b: row b is read
// (into the f32 row tmp [C]) before rows b*T .. are written, and no write reaches a row < b.
static void mean_pool_bwd(ot_model *m, int B, int T, float *tmp) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C;
  const float inv = 1.0f / (float)(T - 1);
  for (int b = B - 1; b >= 0; b--) {
    for (int c = 0; c < C; c++) tmp[c] = ot__ldf(dt, m->dres, (size_t)b * C + c) * inv;
    for (int c = 0; c < C; c++) ot__stf(dt, m->dres, (size_t)b * T * C + c, 0.0f);
    for (int t = 1; t < T; t++)
      for (int c = 0; c < C; c++) ot__stf(dt, m->dres, ((size_t)b * T + t) * C + c, tmp[c]);
  }
}

// The stage's part of the forward: the embedding on the first stage (else the stage
// input, received into la[0].res), the blocks, then the stage output (not last) or the
// final norm, the CLS rows and the head (last).
static ot_status vit_forward(ot_model *m, const ot_image_batch *b, float count, bool want_grad,
                             double *loss) {
  const ot__graph *g = &m->graph;
  const int B = b->B, P = m->cfg.patch_size, Hp = b->H / P, Wp = b->W / P, T = 1 + Hp * Wp;
  const int N = B * T, C = m->C;
  const size_t es = ot_dtype_size(m->run.dt);
  if (m->first) OT_TRY(vit_embed_fwd(m, b, Hp, Wp));
  ot__block_io io;
  OT_TRY(ot__stack_fwd(m, B, T, &io));
  if (!m->last) {   // the stage output, materialized for the next stage
    ot__add_pair(m->run.dt, m->resf, io.x, io.r, (size_t)N * C);
    m->have_grad_state = want_grad;
    return OT_OK;
  }
  if (m->cfg.pool == OT_POOL_MEAN) {   // the norm of the patch rows' mean (B rows)
    mean_pool_fwd(m, io.x, io.r, B, T);
    OT_TRY(ot__norm_fwd(g, m->yf, m->meanf, m->rstdf, NULL, m->resf, NULL, g->lnf_w, g->lnf_b, B));
    return ot__head_fwd(m, b->labels, B, count, want_grad, loss);
  }
  OT_TRY(ot__norm_fwd(g, m->yf, m->meanf, m->rstdf, m->resf, io.x, io.r, g->lnf_w, g->lnf_b, N));
  // the CLS rows (b, 0) -> rows b of yf (row b*T >= b: increasing b reads before it writes)
  for (int i = 1; i < B; i++)
    memcpy((char *)m->yf + (size_t)i * C * es, (char *)m->yf + (size_t)i * T * C * es, (size_t)C * es);
  return ot__head_fwd(m, b->labels, B, count, want_grad, loss);
}

ot_status ot_model_forward_images_slot(ot_model *m, int slot, const ot_image_batch *b, float count,
                                       bool want_grad, double *loss) {
  static const char fn[] = "ot_model_forward_images";
  OT_TRY(images_check(m, b, count, want_grad, fn));
  if (slot < 0 || slot >= m->part.slots)
    return ot_error(OT_EINVAL, "%s: slot %d outside [0, %d) (create the model with more slots)", fn,
                    slot, m->part.slots);
  const int T = ot_vit_tokens(&m->cfg, b->H, b->W);
  ot__select_slot(m, slot);
  m->have_grad_state = false;
  m->B = b->B;
  m->T = T;
  m->vH = b->H;
  m->vW = b->W;
  m->vinterp = T != m->cfg.max_seq || b->H / m->cfg.patch_size != b->W / m->cfg.patch_size;
  OT_TRY(ot__dropout_begin(m, want_grad, b->B, T, 0, NULL, b->sample0, fn));
  OT_PROF_BEGIN("model_forward_images", 0.0, 0.0);
  ot_status s = vit_forward(m, b, count, want_grad, loss);
  OT_PROF_STOP();
  return s;
}

ot_status ot_model_forward_images(ot_model *m, const ot_image_batch *b, float count,
                                  bool want_grad, double *loss) {
  return ot_model_forward_images_slot(m, 0, b, count, want_grad, loss);
}

// ----------------------------------------------------------- backward -----
// From m->dres (the gradient of x0, overwritten by the dropout's backward) to the CLS
// token, the positions (through the resize) and the patch projection.
static ot_status vit_embed_bwd(ot_model *m, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const int C = m->C, Np = T - 1, P = m->cfg.patch_size, Hp = m->vH / P, Wp = m->vW / P;
  OT_TRY(ot__drop_bwd(&m->ddrop, m->ddrop.resid, dt, m->dres, m->dres, (size_t)B * T * C, 0,
                      OT__DROP_EMBED));
  // positions (and CLS): sums over the batch, in batch order
  float *dcls = ot__pg(m, m->vcls), *dpos = ot__pg(m, m->wpe);
#pragma omp parallel for schedule(static) if ((long)T * C * B >= 65536)
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      float s = 0.0f;
      for (int bi = 0; bi < B; bi++) s += ot__ldf(dt, m->dres, ((size_t)bi * T + t) * C + c);
      m->vdpos[(size_t)t * C + c] = s;
    }
  for (int c = 0; c < C; c++) {
    dcls[c] += m->vdpos[c];
    dpos[c] += m->vdpos[c];
  }
  if (m->vinterp) {
    pos_resize_bwd(dpos + C, m->vdpos + C, m->cfg.image_size / P, Hp, Wp, C);
  } else {
    for (size_t i = C; i < (size_t)T * C; i++) dpos[i] += m->vdpos[i];
  }
  // the patch rows of dx0 -> dy [B*Np, C], then the projection's weight and bias
  const size_t es = ot_dtype_size(dt), row = (size_t)C * es;
  for (int bi = 0; bi < B; bi++)
    memcpy((char *)m->dy + (size_t)bi * Np * row, (char *)m->dres + ((size_t)bi * T + 1) * row,
           (size_t)Np * row);
  return ot_patch_embed_bwd(dt, NULL, NULL, ot__pg(m, m->vpatch_w), ot__pg(m, m->vpatch_b), m->dy,
                            m->vcols, NULL, B, m->cfg.channels, m->vH, m->vW, P, C);
}

// Offset of block l's first parameter (every gradient from there on is final once block
// l's backward has run: the blocks' and the head's).
static size_t block_start(const ot_model *m, int l) { return m->params[m->lp[l].ln1_w].offset; }

ot_status ot__vit_backward(ot_model *m) {
  const int B = m->B, T = m->T, N = B * T;
  const size_t es = ot_dtype_size(m->run.dt), row = (size_t)m->C * es;
  if (m->last && m->cfg.pool == OT_POOL_MEAN) {   // head, norm over the B pooled rows, spread
    OT_TRY(ot__head_bwd(m, B, m->dy));
    OT_TRY(ot__norm_bwd(m, m->dres, m->lnf_w, m->lnf_b, m->dy, NULL, m->resf, m->meanf, m->rstdf, B));
    mean_pool_bwd(m, B, T, m->vdpos);
    ot__grads_ready(m, m->params[m->lnf_w].offset);
  } else if (m->last) {   // (other stages: m->dres holds the gradient of the stage output)
    OT_TRY(ot__head_bwd(m, B, m->dy));   // dy rows [0, B): the CLS rows' gradient
    // spread to rows (b, 0), every patch row 0 (downward: row b*T >= b is written after it is read)
    for (int i = B - 1; i >= 0; i--) {
      char *d = (char *)m->dy;
      if (i > 0) memcpy(d + (size_t)i * T * row, d + (size_t)i * row, row);
      memset(d + ((size_t)i * T + 1) * row, 0, (size_t)(T - 1) * row);
    }
    OT_TRY(ot__norm_bwd(m, m->dres, m->lnf_w, m->lnf_b, m->dy, NULL, m->resf, m->meanf, m->rstdf, N));
    ot__grads_ready(m, m->params[m->lnf_w].offset);
  }
  const ot__stack st = ot__stack_decoder(m);
  for (int l = m->L - 1; l >= 0; l--) {
    ot__need_block(m, l, true);
    OT_TRY(ot__block_bwd(m, &st, l, B, T));
    if (l > 0 || m->first) ot__grads_ready(m, block_start(m, l));
  }
  if (m->first) OT_TRY(vit_embed_bwd(m, B, T));
  ot__grads_ready(m, 0);
  return OT_OK;
}
