// Calibrated int8 quantization of a model (contract in ot/model.h,
// ot_qmodel_calibrate): the model's own forward (the one graph) runs on the
// calibration tokens; each linear layer's input rows are read from the saved
// activations (recompute none keeps them all: la[l].y1 for QKV, la[l].atty for
// the output projection, la[l].y2 for the MLP input, la[l].h for the down
// projection, m->yf for the head); ot_qsearch chooses per-input-channel scales
// and clip ratios; the scales are folded into a copy of the weights (the
// matrix's columns times s, the op before it divided by s), which is quantized.
#include "model_impl.h"
#include <math.h>
#include <stdlib.h>

enum { S_QKV = 0, S_O, S_FC, S_PROJ, S_COUNT };

typedef struct {
  int K;
  float *x;        // [max_rows, K] kept rows
  double *asum;    // [K] sum of |x| over every row
  int rows;
} tap;

typedef struct {
  ot_model *m;
  const ot_qcalib_config *cfg;
  ot_qsearch_opts so;
  int max_rows, stride;
  long seen;           // rows seen (all batches)
  tap *taps;           // [L * S_COUNT + 1] (the head last)
  float *w;            // [n_floats] working copy of the weights (folded)
  float **clip;        // [n_params] per-row clip ratios of the searched matrices
  ot_qcalib_report *rep;
} calib;

static ot_status tap_init(tap *t, int K, int max_rows) {
  t->K = K;
  t->x = ot_mem_alloc((size_t)max_rows * K * sizeof(float), OT_MEM_WORKSPACE);
  t->asum = ot_mem_alloc((size_t)K * sizeof(double), OT_MEM_WORKSPACE);
  if (!t->x || !t->asum) return OT_ENOMEM;
  memset(t->asum, 0, (size_t)K * sizeof(double));
  t->rows = 0;
  return OT_OK;
}

// Rows [N, K] of one forward (f32) into t: every row counts in the means, every
// stride-th (global index g0 + i) is kept.
static void tap_rows(tap *t, const float *x, int N, long g0, int stride, int max_rows) {
  for (int i = 0; i < N; i++) {
    const float *r = x + (size_t)i * t->K;
    for (int k = 0; k < t->K; k++) t->asum[k] += fabs((double)r[k]);
    if ((g0 + i) % stride == 0 && t->rows < max_rows)
      memcpy(t->x + (size_t)t->rows++ * t->K, r, (size_t)t->K * sizeof(float));
  }
}

static ot_status collect(calib *c, const int32_t *tokens, int batches) {
  ot_model *m = c->m;
  const int B = m->run.B, T = m->run.T, N = B * T;
  for (int b = 0; b < batches; b++) {
    OT_TRY(ot_model_forward(m, tokens + (size_t)b * N, NULL, B, T, 0.0f, false, NULL));
    for (int l = 0; l < m->L; l++) {
      const ot__layer_acts *A = &m->la[l];
      const void *src[S_COUNT] = {A->y1, A->atty, A->y2, A->h};
      for (int s = 0; s < S_COUNT; s++)
        tap_rows(&c->taps[l * S_COUNT + s], src[s], N, c->seen, c->stride, c->max_rows);
    }
    tap_rows(&c->taps[m->L * S_COUNT], m->yf, N, c->seen, c->stride, c->max_rows);
    c->seen += N;
  }
  return OT_OK;
}

// Searches matrix parameter pi [N, K] (in c->w) on tap t; scale: with per-channel
// scales (s [K] out, alpha 0 when not worth it), else clipping only. The matrix's
// columns are multiplied by s here; the caller divides the op before it by s.
static ot_status search(calib *c, int pi, const tap *t, bool scale, float *s, float *alpha) {
  ot_model *m = c->m;
  const ot_param *p = &m->params[pi];
  const int N = (int)p->shape[0], K = (int)p->shape[1];
  float *w = c->w + p->offset;
  float *xm = ot_mem_alloc((size_t)K * sizeof(float), OT_MEM_WORKSPACE);
  float *y = ot_mem_alloc((size_t)t->rows * N * sizeof(float), OT_MEM_WORKSPACE);
  c->clip[pi] = ot_mem_alloc((size_t)N * sizeof(float), OT_MEM_WORKSPACE);
  if (!xm || !y || !c->clip[pi]) {
    ot_mem_free(xm);
    ot_mem_free(y);
    return OT_ENOMEM;
  }
  for (int k = 0; k < K; k++) xm[k] = (float)(t->asum[k] / (double)c->seen);
  ot_qsearch_opts o = c->so;
  if (!scale || c->cfg->no_scale) o.alpha_steps = 0;
  ot_qsearch_result r;
  ot_status st = ot_qsearch(&r, o.alpha_steps ? s : NULL, c->clip[pi], w, N, K, c->cfg->group, t->x,
                            t->rows, xm, &o);
  double y2 = 0.0;   // ||x W^T||^2 / R: the scale of the errors
  if (st == OT_OK) st = ot_linear_fwd(OT_F32, y, NULL, t->x, w, NULL, t->rows, N, K, OT_ACT_NONE);
  for (size_t i = 0; st == OT_OK && i < (size_t)t->rows * N; i++) y2 += (double)y[i] * y[i];
  y2 /= t->rows;
  ot_mem_free(xm);
  ot_mem_free(y);
  OT_TRY(st);
  *alpha = o.alpha_steps ? r.alpha : 0.0f;
  if (*alpha > 0.0f)
    for (int n = 0; n < N; n++)
      for (int k = 0; k < K; k++) w[(size_t)n * K + k] *= s[k];
  ot_qcalib_report *rp = c->rep;
  rp->matrices++;
  rp->scaled += *alpha > 0.0f;
  rp->err_plain += r.err_plain;
  rp->err += r.err;
  rp->rel_plain += y2 > 0 ? sqrt(r.err_plain / y2) : 0.0;
  rp->rel += y2 > 0 ? sqrt(r.err / y2) : 0.0;
  return OT_OK;
}

// v[i * stride] /= s[i], i in [0, n) (a norm's gain / bias, a bias, or rows of a matrix: len floats each).
static void divide_rows(float *v, const float *s, int n, int len) {
  if (!v) return;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < len; k++) v[(size_t)i * len + k] /= s[i];
}

static float *wc(const calib *c, int i) { return i < 0 ? NULL : c->w + c->m->params[i].offset; }

static ot_status calibrate_block(calib *c, int l, float *s) {
  ot_model *m = c->m;
  const ot__layer_params *P = &m->lp[l];
  const tap *t = &c->taps[l * S_COUNT];
  const bool pre = m->cfg.norm_place != OT_PLACE_POST;
  const int C = m->C, HD = m->Hq * m->D, KD = m->Hkv * m->D;
  float a;
  // output projection: its input channels are V's (one per q head's dim when Hq = Hkv)
  OT_TRY(search(c, P->o_w, &t[S_O], m->Hq == m->Hkv, s, &a));
  if (a > 0.0f) {
    divide_rows(wc(c, P->qkv_w) + (size_t)(HD + KD) * C, s, KD, C);
    divide_rows(wc(c, P->qkv_b) ? wc(c, P->qkv_b) + HD + KD : NULL, s, KD, 1);
  }
  // down projection: foldable into the up rows under SwiGLU (h = silu(gate) * up)
  const bool swiglu = m->cfg.mlp == OT_MLP_SWIGLU;
  OT_TRY(search(c, P->proj_w, &t[S_PROJ], swiglu, s, &a));
  if (a > 0.0f) {
    divide_rows(wc(c, P->fc_w) + (size_t)m->F * C, s, m->F, C);
    divide_rows(wc(c, P->fc_b) ? wc(c, P->fc_b) + m->F : NULL, s, m->F, 1);
  }
  // QKV and the MLP input: after a pre-norm, whose gain and bias take 1 / s
  OT_TRY(search(c, P->qkv_w, &t[S_QKV], pre, s, &a));
  if (a > 0.0f) {
    divide_rows(wc(c, P->ln1_w), s, C, 1);
    divide_rows(wc(c, P->ln1_b), s, C, 1);
  }
  OT_TRY(search(c, P->fc_w, &t[S_FC], pre, s, &a));
  if (a > 0.0f) {
    divide_rows(wc(c, P->ln2_w), s, C, 1);
    divide_rows(wc(c, P->ln2_b), s, C, 1);
  }
  return OT_OK;
}

static ot_status check(const ot_model *m, const int32_t *tokens, int batches, const ot_qcalib_config *cfg,
                       const char *fn) {
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(tokens, fn);
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_POS(batches, fn);
  if (!ot__is_whole(m) || m->cfg.arch != OT_ARCH_DECODER)
    return ot_error(OT_EINVAL, "%s: calibration takes a whole decoder-only model (not a part of a "
                    "partitioned one, an encoder-decoder or a vision transformer)", fn);
  if (m->run.dt != OT_F32 || m->run.recompute != OT_RECOMPUTE_NONE)
    return ot_error(OT_EINVAL, "%s: create the model with dt f32 and recompute none (the calibration reads "
                    "every layer's saved input)", fn);
  if (cfg->group != 0 && cfg->group != 32 && cfg->group != 64 && cfg->group != 128)
    return ot_error(OT_EINVAL, "%s: group=%d unsupported (use 0 = per row, 32, 64 or 128)", fn, cfg->group);
  if (cfg->max_rows < 0) return ot_error(OT_EINVAL, "%s: max_rows=%d is negative", fn, cfg->max_rows);
  for (int i = 0; i < m->n_params && cfg->group; i++)
    if (ot__param_quantized(&m->params[i]) && m->params[i].shape[1] % cfg->group)
      return ot_error(OT_EINVAL, "%s: %s has %lld input features, not a multiple of group=%d (use a group "
                      "dividing it, or 0 = per row)", fn, m->params[i].name, (long long)m->params[i].shape[1],
                      cfg->group);
  const long n = (long)batches * m->run.B * m->run.T;
  for (long i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= m->V)
      return ot_error(OT_EINVAL, "%s: calibration token %ld = %d is outside the vocabulary [0, %d)", fn, i,
                      tokens[i], m->V);
  return OT_OK;
}

ot_status ot_qmodel_calibrate(ot_qmodel **out, ot_model *m, const int32_t *tokens, int batches,
                              const ot_qcalib_config *cfg, ot_qcalib_report *rep) {
  static const char fn[] = "ot_qmodel_calibrate";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_TRY(check(m, tokens, batches, cfg, fn));
  ot_qcalib_report rp0;
  if (!rep) rep = &rp0;
  memset(rep, 0, sizeof *rep);
  calib c = {m, cfg, cfg->search, cfg->max_rows ? cfg->max_rows : 512, 1, 0, NULL, NULL, NULL, rep};
  if (!c.so.alpha_steps && !c.so.clip_steps) c.so = (ot_qsearch_opts){20, 10, 0.02f, false};
  // the engine's prefill runs the int8-activation GEMM for groups other than 32 (ot_qlinear_fwd)
  c.so.act_int8 = cfg->group != 32;
  const long total = (long)batches * m->run.B * m->run.T;
  c.stride = (int)((total + c.max_rows - 1) / c.max_rows);
  const int nt = m->L * S_COUNT + 1, head = m->cfg.tied ? m->wte : m->lm_head;
  c.taps = calloc((size_t)nt, sizeof *c.taps);
  c.clip = calloc((size_t)m->n_params, sizeof *c.clip);
  c.w = ot_mem_alloc(m->n_floats * sizeof(float), OT_MEM_WORKSPACE);
  float *s = ot_mem_alloc((size_t)(m->F > m->C ? m->F : m->C) * 2 * sizeof(float), OT_MEM_WORKSPACE);
  ot_status st = c.taps && c.clip && c.w && s ? OT_OK : ot_error(OT_ENOMEM, "%s: out of memory", fn);
  const int K[S_COUNT] = {m->C, m->Hq * m->D, m->C, m->F};
  for (int i = 0; i < nt && st == OT_OK; i++)
    st = tap_init(&c.taps[i], i == nt - 1 ? m->C : K[i % S_COUNT], c.max_rows);
  if (st == OT_OK) st = collect(&c, tokens, batches);
  if (st == OT_OK) memcpy(c.w, m->w, m->n_floats * sizeof(float));
  for (int l = 0; l < m->L && st == OT_OK; l++) st = calibrate_block(&c, l, s);
  float a;
  if (st == OT_OK && head >= 0) st = search(&c, head, &c.taps[nt - 1], false, s, &a);
  if (st == OT_OK && rep->matrices) {
    rep->rel_plain /= rep->matrices;
    rep->rel /= rep->matrices;
  }
  rep->rows = c.taps ? c.taps[0].rows : 0;
  if (st == OT_OK) st = ot__qmodel_build(out, m, OT_QW_INT8, cfg->group, c.w, c.clip);
  for (int i = 0; c.taps && i < nt; i++) {
    ot_mem_free(c.taps[i].x);
    ot_mem_free(c.taps[i].asum);
  }
  for (int i = 0; c.clip && i < m->n_params; i++) ot_mem_free(c.clip[i]);
  free(c.taps);
  free(c.clip);
  ot_mem_free(c.w);
  ot_mem_free(s);
  return st;
}
