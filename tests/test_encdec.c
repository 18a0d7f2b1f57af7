// Encoder-decoder (Marian / the original Transformer) tests:
//  - Hugging Face golden files (tools/gen_marian_golden.py, transformers 4.40.2):
//    hf_marian (relu, tied), hf_marian_gelu (erf gelu, untied head), hf_mbart
//    (pre-norm, learned positions, layernorm_embedding): logits and encoder output
//    within nerr 1e-5 of transformers, the sinusoid table equal to HF's
//  - the backward vs central finite differences on transformer-tiny shapes: every
//    parameter tensor (embedding, encoder and decoder self-attention, cross-attention
//    q/k/v/out and norm, MLP, norms, logits bias, learned positions, embedding norms)
//    for post-norm (relu, erf-GELU) and mBART-like pre-norm erf-GELU with GQA
//  - recompute none / selective / full: bitwise-identical loss and gradients
//  - ReLU / erf-GELU kernels vs their scalar references (forward, backward by FD);
//    every decoder block's cross K/V and cross-attention vs plain loops + ot_ref_attn_fwd
//  - save_hf -> load_hf round trip bit-exact (weights and logits)
//  - bad input: src_len 0 or > S, token ids out of range, mismatched config.json,
//    missing tensor, refused quantization / decoder-only entry points
//  - memory plan: ot_model_plan equals the model's, what the arenas hold, the
//    encoder categories filled, recompute modes ordered; vocabulary-parallel parts
//    (stages, tensor ranks, recompute modes, f32 / bf16) allocate exactly their plan
// Run from the repository root (CTest does).
#include "harness.h"
#include "model/model_impl.h"
#include "ot/model.h"
#include <sys/stat.h>
#include <unistd.h>

// ------------------------------------------------------------- helpers -----
static const ot_st_tensor *need(const ot_st_file *f, const char *name) {
  const ot_st_tensor *t = ot_st_find(f, name);
  th_check(t != NULL, "golden tensor %s present", name);
  return t;
}

// Fills every parameter with generic values (gains 1 + noise, everything else noise;
// embedding padding rows stay 0).
static void generic_weights(ot_model *m, uint64_t seed, float sd) {
  th_rng r = {seed};
  float *w = ot_model_params(m);
  const ot_model_config *c = ot_model_config_of(m);
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    size_t n = p->numel;
    if (p->kind == OT_PT_EMBED || p->kind == OT_PT_LM_HEAD) n = (size_t)c->vocab * p->shape[1];
    if (strcmp(p->name, "final_logits_bias") == 0) n = (size_t)c->vocab;
    for (size_t j = 0; j < n; j++)
      w[p->offset + j] = (p->kind == OT_PT_NORM_W ? 1.0f : 0.0f) + sd * th_normal(&r);
  }
  ot_model_sync_bf16(m);
}

static ot_model_config tiny(bool post) {
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  if (!post) {   // mBART-like: pre-norm with final norms, learned positions at offset 2,
                 // embedding norms; erf-GELU, grouped-query attention, untied head
    c.norm_place = OT_PLACE_PRE;
    c.pos = OT_POS_LEARNED;
    c.pos_offset = 2;
    c.embed_norm = true;
    c.mlp = OT_MLP_GELU_ERF;
    c.n_kv_heads = 2;
    c.tied = false;
  }
  return c;
}

enum { B_ = 2, S_ = 5, T_ = 4 };
static const int32_t k_src[B_ * S_] = {3, 7, 11, 2, 0, 5, 9, 0, 49, 49};
static const int32_t k_len[B_] = {5, 3};
static const int32_t k_tgt[B_ * T_] = {49, 4, 8, 15, 49, 21, 6, 30};
static const int32_t k_out[B_ * T_] = {4, 8, 15, 0, 21, 6, 0, -100};

static ot_s2s_batch batch(const int32_t *targets) {
  ot_s2s_batch b = {B_, S_, T_, k_src, k_len, k_tgt, targets};
  return b;
}

static ot_model *make_tiny(bool post, ot_recompute rc, uint64_t seed) {
  ot_model_config c = tiny(post);
  ot_run_config r = {B_, T_, OT_F32, rc, -100, S_};
  ot_model *m = NULL;
  ot_status s = ot_model_create(&m, &c, &r);
  th_check(s == OT_OK, "create transformer-tiny (%s-norm): %s", post ? "post" : "pre",
           ot_last_error());
  if (m) generic_weights(m, seed, 0.3f);
  return m;
}

// ------------------------------------------------------------ golden -------
static void golden(const char *name) {
  char dir[256], path[320];
  snprintf(dir, sizeof dir, "tests/golden/%s", name);
  ot_run_config r = {3, 7, OT_F32, OT_RECOMPUTE_NONE, -100, 9};
  ot_model *m = NULL;
  ot_status s = ot_model_load_hf(&m, dir, &r);
  if (!th_check(s == OT_OK, "load %s: %s", dir, ot_last_error())) return;
  snprintf(path, sizeof path, "%s/logits.safetensors", dir);
  ot_st_file *f = NULL;
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s", path)) { ot_model_free(m); return; }
  const ot_st_tensor *ids = need(f, "src_ids"), *mask = need(f, "src_mask"),
                     *dec = need(f, "decoder_input_ids"), *lg = need(f, "logits"),
                     *eo = need(f, "encoder_out");
  const ot_st_tensor *sp = strstr(name, "marian") ? need(f, "sinusoid_pos") : NULL;
  if (ids && mask && dec && lg && eo) {
    const int B = (int)ids->shape[0], S = (int)ids->shape[1], T = (int)dec->shape[1];
    const int V = (int)lg->shape[2], C = (int)eo->shape[2];
    int32_t len[3] = {0, 0, 0};
    for (int b = 0; b < B && b < 3; b++)
      for (int t = 0; t < S; t++) len[b] += ((const int32_t *)mask->data)[b * S + t];
    ot_s2s_batch bt = {B, S, T, ids->data, len, dec->data, NULL};
    s = ot_model_forward_s2s(m, &bt, 0.0f, false, NULL);
    if (th_check(s == OT_OK, "%s forward: %s", name, ot_last_error())) {
      int ld = 0;
      const float *L = ot_model_logits(m, &ld);
      float *got = th_falloc((size_t)B * T * V);
      for (int i = 0; i < B * T; i++) memcpy(got + (size_t)i * V, L + (size_t)i * ld, V * 4);
      th_check_nerr(got, lg->data, (size_t)B * T * V, 1e-5, "%s logits vs HF", name);
      int lde = 0;
      const float *E = ot_model_encoder_out(m, &lde);
      th_check(lde == C, "%s encoder width %d", name, lde);
      th_check_nerr(E, eo->data, (size_t)B * S * C, 1e-5, "%s encoder_out vs HF", name);
      if (sp) {
        const int P = (int)sp->shape[0];
        th_check(P == ot_model_config_of(m)->max_seq, "%s sinusoid rows %d", name, P);
        th_check_nerr(m->pos_tab, sp->data, (size_t)P * C, 1e-7, "%s sinusoid table vs HF", name);
      }
      free(got);
    }
  }
  ot_st_close(f);
  ot_model_free(m);
}

// ----------------------------------------------------- finite differences ---
typedef struct {
  ot_model *m;
} fdctx;

static double fd_loss(void *p) {
  fdctx *c = p;
  ot_model_sync_bf16(c->m);
  ot_s2s_batch b = batch(k_out);
  double loss = 0.0;
  ot_model_forward_s2s(c->m, &b, 0.0f, false, &loss);
  return loss;
}

// relu: ReLU's kinks make finite differences along the gradient (a long step in
// few directions) inexact, so that config is checked along random directions only
// (the kernel's own backward is checked in activations()); the others use erf-GELU.
static void fd_check(bool post, bool relu) {
  ot_model_config c0 = tiny(post);
  c0.mlp = relu ? OT_MLP_RELU : OT_MLP_GELU_ERF;
  ot_run_config r0 = {B_, T_, OT_F32, OT_RECOMPUTE_NONE, -100, S_};
  ot_model *m = NULL;
  th_check(ot_model_create(&m, &c0, &r0) == OT_OK, "create: %s", ot_last_error());
  if (!m) return;
  generic_weights(m, post ? 11 : 12, 0.3f);
  ot_s2s_batch b = batch(k_out);
  double loss = 0.0;
  ot_model_zero_grad(m);
  th_check(ot_model_forward_s2s(m, &b, 0.0f, true, &loss) == OT_OK, "forward: %s", ot_last_error());
  th_check(ot_model_backward(m) == OT_OK, "backward: %s", ot_last_error());
  th_check(isfinite(loss) && loss > 0.0, "loss %g", loss);
  const float *g = ot_model_grads(m);
  float *w = ot_model_params(m);
  const ot_model_config *c = ot_model_config_of(m);
  fdctx ctx = {m};
  th_rng r = {99};
  int cross_checked = 0;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    size_t n = p->numel;
    if (p->kind == OT_PT_EMBED || p->kind == OT_PT_LM_HEAD) n = (size_t)c->vocab * p->shape[1];
    if (strcmp(p->name, "final_logits_bias") == 0) n = (size_t)c->vocab;
    // directional derivative along a random direction v over the tensor's used elements:
    // (L(w + h v) - L(w - h v)) / 2h against <g, v>
    float *v = th_falloc(n), *w0 = th_falloc(n);
    memcpy(w0, w + p->offset, n * 4);
    double an = 0.0, gn = 0.0, vn = 0.0;
    for (size_t j = 0; j < n; j++) v[j] = th_normal(&r);
    for (size_t j = 0; j < n; j++) vn += (double)v[j] * v[j];
    for (size_t j = 0; j < n; j++) {
      v[j] = (float)(v[j] / sqrt(vn));
      an += (double)g[p->offset + j] * v[j];
      gn += (double)g[p->offset + j] * g[p->offset + j];
    }
    // two directions: random (an = <g, v>) and the gradient itself (an = |g|: only the
    // true gradient has FD derivative |g| along g / |g|)
    for (int d = 0; d < 2; d++) {
      const float h = d ? 2e-3f : 1e-2f;
      if (d == 1) {
        if (!(gn > 0.0) || relu) break;
        for (size_t j = 0; j < n; j++) v[j] = (float)(g[p->offset + j] / sqrt(gn));
        an = sqrt(gn);
      }
      for (size_t j = 0; j < n; j++) w[p->offset + j] = w0[j] + h * v[j];
      const double lp = fd_loss(&ctx);
      for (size_t j = 0; j < n; j++) w[p->offset + j] = w0[j] - h * v[j];
      const double lm = fd_loss(&ctx);
      memcpy(w + p->offset, w0, n * 4);
      const double fd = (lp - lm) / (2.0 * h);
      // f32 forward: the loss difference carries ~2e-6 of rounding, / 2h
      th_check(fabs(fd - an) <= (d ? 1e-2 : 2e-3) * sqrt(gn) + 2e-6 / (2.0 * h),
               "%s-norm %s: gradient of %s along %s: %.6g, finite differences %.6g (|g| %.3g)",
               post ? "post" : "pre", ot__mlp_name(c->mlp), p->name,
               d ? "itself" : "a random direction", an, fd,
               sqrt(gn));
    }
    free(v);
    free(w0);
    cross_checked += strstr(p->name, "encoder_attn") != NULL;
  }
  th_check(cross_checked >= 4, "cross-attention tensors checked: %d", cross_checked);
  ot_model_free(m);
}

// Recompute modes give the same loss and gradients, bit for bit.
static void recompute_modes(bool post) {
  double l0 = 0.0;
  float *g0 = NULL;
  size_t n = 0;
  for (int rc = 0; rc < 3; rc++) {
    ot_model *m = make_tiny(post, (ot_recompute)rc, 5);
    if (!m) return;
    ot_s2s_batch b = batch(k_out);
    double loss = 0.0;
    th_check(ot_model_forward_s2s(m, &b, 0.0f, true, &loss) == OT_OK, "forward");
    th_check(ot_model_backward(m) == OT_OK, "backward: %s", ot_last_error());
    n = ot_model_n_floats(m);
    if (rc == 0) {
      l0 = loss;
      g0 = th_falloc(n);
      memcpy(g0, ot_model_grads(m), n * 4);
    } else {
      th_check(loss == l0, "%s-norm recompute %s: loss %.17g vs %.17g", post ? "post" : "pre",
               ot_recompute_name((ot_recompute)rc), loss, l0);
      th_check(memcmp(g0, ot_model_grads(m), n * 4) == 0, "%s-norm recompute %s: gradients equal",
               post ? "post" : "pre", ot_recompute_name((ot_recompute)rc));
    }
    ot_model_free(m);
  }
  free(g0);
}

// bf16 mixed precision: loss within 2% and gradients within nerr 0.1 of f32 (same large
// random weights, as test_model uses for them).
static void bf16_close(bool post) {
  ot_model_config c = tiny(post);
  ot_run_config r = {B_, T_, OT_F32, OT_RECOMPUTE_SELECTIVE, -100, S_};
  ot_model *m[2] = {NULL, NULL};
  double loss[2] = {0.0, 0.0};
  for (int i = 0; i < 2; i++) {
    r.dt = i ? OT_BF16 : OT_F32;
    th_check(ot_model_create(&m[i], &c, &r) == OT_OK, "create %s", ot_dtype_name(r.dt));
    if (!m[i]) return;
    generic_weights(m[i], 8, 0.3f);
    ot_s2s_batch b = batch(k_out);
    th_check(ot_model_forward_s2s(m[i], &b, 0.0f, true, &loss[i]) == OT_OK, "forward");
    th_check(ot_model_backward(m[i]) == OT_OK, "backward");
  }
  th_check(fabs(loss[1] - loss[0]) < 0.02 * loss[0], "%s-norm bf16 loss %g vs f32 %g",
           post ? "post" : "pre", loss[1], loss[0]);
  th_check_nerr(ot_model_grads(m[1]), ot_model_grads(m[0]), ot_model_n_floats(m[0]), 0.1,
                "%s-norm bf16 gradients vs f32", post ? "post" : "pre");
  ot_model_free(m[0]);
  ot_model_free(m[1]);
}

// Cross-attention of every decoder block against plain scalar code: K/V = the encoder
// output through the block's k / v rows (loops), attention by ot_ref_attn_fwd over the
// source lengths, compared with what the forward kept (la[l].kc / vc / attyc).
static void cross_reference(void) {
  ot_model *m = make_tiny(true, OT_RECOMPUTE_NONE, 31);
  if (!m) return;
  ot_s2s_batch b = batch(NULL);
  th_check(ot_model_forward_s2s(m, &b, 0.0f, false, NULL) == OT_OK, "forward");
  const int C = m->C, Hq = m->Hq, Hkv = m->Hkv, D = m->D, HD = Hq * D, KD = Hkv * D;
  const float *enc = m->enc_out;
  float *kr = th_falloc((size_t)B_ * KD * S_), *vr = th_falloc((size_t)B_ * KD * S_);
  float *o = th_falloc((size_t)B_ * HD * T_), *ot = th_falloc((size_t)B_ * HD * T_);
  for (int l = 0; l < m->L; l++) {
    const ot__layer_params *P = &m->lp[l];
    const float *W = ot__pw(m, P->cqkv_w), *bias = ot__pw(m, P->cqkv_b);
    for (int bb = 0; bb < B_; bb++)
      for (int t = 0; t < S_; t++)
        for (int j = 0; j < KD; j++) {
          double k = bias[HD + j], v = bias[HD + KD + j];
          for (int c = 0; c < C; c++) {
            const double x = enc[((size_t)bb * S_ + t) * C + c];
            k += x * W[(size_t)(HD + j) * C + c];
            v += x * W[(size_t)(HD + KD + j) * C + c];
          }
          const size_t hm = (((size_t)bb * Hkv + j / D) * S_ + t) * D + j % D;   // head-major
          kr[hm] = (float)k;
          vr[hm] = (float)v;
        }
    th_check_nerr(m->la[l].kc, kr, (size_t)B_ * KD * S_, 1e-6, "block %d cross keys", l);
    th_check_nerr(m->la[l].vc, vr, (size_t)B_ * KD * S_, 1e-6, "block %d cross values", l);
    ot_attn_shape sh = {B_, Hq, Hkv, T_, S_, D, false, k_len, 0.0f};
    ot_ref_attn_fwd(o, NULL, m->la[l].qc, kr, vr, &sh);
    for (int bb = 0; bb < B_; bb++)
      for (int h = 0; h < Hq; h++)
        for (int t = 0; t < T_; t++)
          memcpy(ot + (((size_t)bb * T_ + t) * Hq + h) * D, o + (((size_t)bb * Hq + h) * T_ + t) * D,
                 D * 4);
    th_check_nerr(m->la[l].attyc, ot, (size_t)B_ * HD * T_, 1e-5,
                  "block %d cross-attention vs ot_ref_attn_fwd", l);
  }
  free(kr);
  free(vr);
  free(o);
  free(ot);
  ot_model_free(m);
}

// --------------------------------------------------------- activations -----
typedef struct {
  ot_mlp_kind k;
  float *x, *y;
  const float *w;
  size_t n;
} actctx;

static double act_loss(void *p) {
  actctx *a = p;
  ot__act_fwd(a->k, OT_F32, a->y, a->x, a->n);
  return th_dot(a->y, a->w, a->n);
}

static void activations(void) {
  enum { n = 257 };
  th_rng r = {3};
  float x[n], y[n], ref[n], w[n], dx[n], fd[n];
  th_fill(&r, x, n, -4.0f, 4.0f);
  th_fill(&r, w, n, -1.0f, 1.0f);
  const ot_mlp_kind ks[2] = {OT_MLP_RELU, OT_MLP_GELU_ERF};
  for (int i = 0; i < 2; i++) {
    const char *nm = ot__mlp_name(ks[i]);
    th_check(ot__act_fwd(ks[i], OT_F32, y, x, n) == OT_OK, "%s forward", nm);
    if (ks[i] == OT_MLP_RELU) ot_ref_relu_fwd(ref, x, n);
    else ot_ref_gelu_erf_fwd(ref, x, n);
    th_check_nerr(y, ref, n, 1e-6, "%s kernel vs scalar reference", nm);
    th_check(ot__act_bwd(ks[i], OT_F32, dx, x, w, n) == OT_OK, "%s backward", nm);
    actctx a = {ks[i], x, y, w, n};
    for (int j = 0; j < n; j++) {
      if (ks[i] == OT_MLP_RELU && fabsf(x[j]) < 2e-3f) x[j] = 0.5f;   // away from the kink
      fd[j] = (float)th_fd(x, (size_t)j, 1e-3f, act_loss, &a);
    }
    th_check(ot__act_bwd(ks[i], OT_F32, dx, x, w, n) == OT_OK, "%s backward", nm);
    th_check_nerr(dx, fd, n, 1e-3, "%s backward vs finite differences", nm);
  }
  // bf16 storage: close to f32
  uint16_t *xb = th_to_bf16(x, n), yb[n];
  float yf[n];
  th_round_bf16(x, n);
  ot__act_fwd(OT_MLP_GELU_ERF, OT_BF16, yb, xb, n);
  th_from_bf16(yb, yf, n);
  ot_ref_gelu_erf_fwd(ref, x, n);
  th_check_nerr(yf, ref, n, 1e-2, "gelu_erf bf16 vs reference");
  free(xb);
}

// ---------------------------------------------------------- round trip -----
// dir/: save_hf's files + check.safetensors (the batch and its logits [B, T, V]).
static void save_for_check(ot_model *m, const char *dir) {
  mkdir(dir, 0755);
  th_check(ot_model_save_hf(m, dir) == OT_OK, "save_hf %s: %s", dir, ot_last_error());
  ot_s2s_batch b = batch(NULL);
  th_check(ot_model_forward_s2s(m, &b, 0.0f, false, NULL) == OT_OK, "forward for the check");
  int ld = 0;
  const float *L = ot_model_logits(m, &ld);
  const int V = ot_model_config_of(m)->vocab;
  float *lg = th_falloc((size_t)B_ * T_ * V);
  int32_t mask[B_ * S_];
  for (int i = 0; i < B_ * T_; i++) memcpy(lg + (size_t)i * V, L + (size_t)i * ld, V * 4);
  for (int i = 0; i < B_ * S_; i++) mask[i] = i % S_ < k_len[i / S_];
  ot_st_tensor t[4] = {
      {"src_ids", OT_I32, 2, {B_, S_}, k_src, sizeof k_src},
      {"src_mask", OT_I32, 2, {B_, S_}, mask, sizeof mask},
      {"decoder_input_ids", OT_I32, 2, {B_, T_}, k_tgt, sizeof k_tgt},
      {"logits", OT_F32, 3, {B_, T_, V}, lg, (size_t)B_ * T_ * V * 4}};
  char path[512];
  snprintf(path, sizeof path, "%s/check.safetensors", dir);
  th_check(ot_st_write(path, t, 4, NULL, NULL, 0) == OT_OK, "write %s: %s", path, ot_last_error());
  free(lg);
}

static void round_trip(void) {
  ot_model *m = make_tiny(true, OT_RECOMPUTE_NONE, 21);
  if (!m) return;
  char dir[] = "/tmp/ot_encdec_XXXXXX";
  if (!th_check(mkdtemp(dir) != NULL, "mkdtemp")) { ot_model_free(m); return; }
  th_check(ot_model_save_hf(m, dir) == OT_OK, "save_hf: %s", ot_last_error());
  ot_run_config r = *ot_model_run_of(m);
  ot_model *q = NULL;
  ot_status s = ot_model_load_hf(&q, dir, &r);
  if (th_check(s == OT_OK, "load_hf of the saved dir: %s", ot_last_error())) {
    th_check(ot_model_n_floats(q) == ot_model_n_floats(m), "same layout");
    th_check(memcmp(ot_model_params(q), ot_model_params(m), ot_model_n_floats(m) * 4) == 0,
             "save_hf -> load_hf weights bit-exact");
    ot_s2s_batch b = batch(NULL);
    ot_model_forward_s2s(m, &b, 0.0f, false, NULL);
    ot_model_forward_s2s(q, &b, 0.0f, false, NULL);
    int ld = 0;
    const float *a = ot_model_logits(m, &ld), *c = ot_model_logits(q, &ld);
    th_check(memcmp(a, c, (size_t)B_ * T_ * ld * 4) == 0, "round trip logits bit-exact");
  }
  // a missing tensor: config.json asks for one decoder layer more than the file has
  char path[300];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "r");
  char text[8192];
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[len] = 0;
  char *dl = strstr(text, "\"decoder_layers\": 2");
  if (th_check(dl != NULL, "decoder_layers in the saved config")) {
    dl[strlen("\"decoder_layers\": ")] = '3';
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    ot_model_free(q);
    q = NULL;
    s = ot_model_load_hf(&q, dir, &r);
    th_check_error(s, OT_EFORMAT, "model.decoder.layers.2.", "missing tensor named");
    // mismatched config.json: encoder heads differ from decoder heads
    dl[strlen("\"decoder_layers\": ")] = '2';
    char *eh = strstr(text, "\"encoder_attention_heads\": 4");
    if (th_check(eh != NULL, "encoder_attention_heads in the saved config")) {
      eh[strlen("\"encoder_attention_heads\": ")] = '2';
      f = fopen(path, "w");
      fputs(text, f);
      fclose(f);
      s = ot_model_load_hf(&q, dir, &r);
      th_check_error(s, OT_EUNSUPPORTED, "encoder_attention_heads=2", "heads mismatch named");
    }
  }
  ot_model_free(q);
  const char *keep = getenv("OT_SAVE_HF_DIR");   // for tools/gen_marian_golden.py --check
  if (keep && *keep) save_for_check(m, keep);
  snprintf(path, sizeof path, "%s/config.json", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unlink(path);
  rmdir(dir);
  ot_model_free(m);
}

// ---------------------------------------------------------- bad input ------
static void bad_input(void) {
  ot_model *m = make_tiny(true, OT_RECOMPUTE_NONE, 1);
  if (!m) return;
  int32_t len[B_] = {5, 0}, src[B_ * S_], tgt[B_ * T_];
  memcpy(src, k_src, sizeof src);
  memcpy(tgt, k_tgt, sizeof tgt);
  ot_s2s_batch b = {B_, S_, T_, src, len, tgt, k_out};
  th_check_error(ot_model_forward_s2s(m, &b, 0.0f, true, NULL), OT_EINVAL, "src_len[1]=0",
                 "src_len 0");
  len[1] = 6;
  th_check_error(ot_model_forward_s2s(m, &b, 0.0f, true, NULL), OT_EINVAL, "src_len[1]=6",
                 "src_len > S");
  len[1] = 3;
  src[2] = 50;
  th_check_error(ot_model_forward_s2s(m, &b, 0.0f, true, NULL), OT_EINVAL, "src[0][2]=50",
                 "source id out of range");
  src[2] = 11;
  src[9] = 77;   // past src_len[1]: ignored
  th_check(ot_model_forward_s2s(m, &b, 0.0f, true, NULL) == OT_OK, "ids past src_len ignored");
  tgt[5] = -3;
  th_check_error(ot_model_forward_s2s(m, &b, 0.0f, true, NULL), OT_EINVAL, "tgt_in[1][1]=-3",
                 "target input id out of range");
  tgt[5] = 21;
  b.S = 6;
  th_check_error(ot_model_forward_s2s(m, &b, 0.0f, true, NULL), OT_EINVAL, "S=6",
                 "S beyond the run");
  b.S = S_;
  int32_t tok[4] = {1, 2, 3, 4};
  th_check_error(ot_model_forward(m, tok, NULL, 1, 4, 0.0f, false, NULL), OT_EINVAL,
                 "ot_model_forward_s2s", "decoder-only entry point refused");
  // (quantized enc-dec models are saved, loaded and translated by test_translate)
  ot_model_free(m);
  // configs and runs
  ot_model_config c = tiny(true);
  ot_run_config r = {B_, T_, OT_F32, OT_RECOMPUTE_NONE, -100, 0};
  th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "S=0", "S missing");
  r.S = S_;
  // (partitions into pipeline stages: test_encdec_stages)
  c.n_enc_layers = 0;
  th_check_error(ot_model_config_validate(&c), OT_EINVAL, "n_enc_layers=0", "no encoder layers");
  c = tiny(true);
  c.pos = OT_POS_ROPE;
  th_check_error(ot_model_config_validate(&c), OT_EUNSUPPORTED, "positions=rope",
                 "rope positions refused");
  c = tiny(true);
  c.pos_offset = 2;
  th_check_error(ot_model_config_validate(&c), OT_EINVAL, "pos_offset=2",
                 "pos_offset without learned positions");
  c = tiny(true);
  c.pad_id = 50;
  th_check_error(ot_model_config_validate(&c), OT_EINVAL, "pad_id=50", "pad id out of range");
  c = tiny(true);
  c.src_vocab = 100;
  th_check_error(ot_model_config_validate(&c), OT_EUNSUPPORTED, "src_vocab=100",
                 "separate vocabularies refused");
  ot_model_config g;
  ot_model_config_preset(&g, "tiny");
  g.norm_place = OT_PLACE_POST;
  th_check_error(ot_model_config_validate(&g), OT_EINVAL, "encoder-decoder settings",
                 "decoder-only with post-norm refused");
  ot_model_config_preset(&g, "tiny");
  ot_run_config rd = {2, 8, OT_F32, OT_RECOMPUTE_NONE, -1, 0};
  ot_model *d = NULL;
  th_check(ot_model_create(&d, &g, &rd) == OT_OK, "decoder-only create");
  th_check_error(ot_model_save_hf(d, "/tmp"), OT_EUNSUPPORTED, "decoder-only", "save_hf gpt2");
  ot_s2s_batch bb = batch(NULL);
  th_check_error(ot_model_forward_s2s(d, &bb, 0.0f, false, NULL), OT_EINVAL, "decoder-only",
                 "s2s on decoder-only refused");
  ot_model_free(d);
}

// --------------------------------------------------------- memory plan -----
static void plan(void) {
  const char *presets[] = {"transformer-tiny", "transformer-small"};
  for (int i = 0; i < 2; i++) {
    ot_model_config c;
    ot_model_config_preset(&c, presets[i]);
    ot_run_config r = {2, 12, OT_F32, OT_RECOMPUTE_NONE, -100, 14};
    ot_mem_plan p[3];
    for (int rc = 0; rc < 3; rc++) {
      r.recompute = (ot_recompute)rc;
      const size_t a0 = ot_mem_current(OT_MEM_ACTIVATIONS), w0 = ot_mem_current(OT_MEM_WORKSPACE);
      ot_model *m = NULL;
      th_check(ot_model_plan(&c, &r, &p[rc]) == OT_OK, "plan %s", presets[i]);
      if (!th_check(ot_model_create(&m, &c, &r) == OT_OK, "create %s: %s", presets[i],
                    ot_last_error()))
        return;
      th_check(memcmp(&p[rc], ot_model_plan_of(m), sizeof p[rc]) == 0, "%s %s: plan == model's",
               presets[i], ot_recompute_name(r.recompute));
      th_check(ot_mem_current(OT_MEM_ACTIVATIONS) - a0 == p[rc].act_saved &&
                   ot_mem_current(OT_MEM_WORKSPACE) - w0 == p[rc].workspace,
               "%s %s: arenas hold exactly the plan", presets[i], ot_recompute_name(r.recompute));
      th_check(p[rc].act_enc > 0 && p[rc].act_saved_enc_layer * c.n_enc_layers < p[rc].act_enc &&
                   p[rc].act_enc < p[rc].act_saved,
               "%s: encoder activations counted", presets[i]);
      ot_model_free(m);
    }
    th_check(p[0].act_saved > p[1].act_saved && p[1].act_saved > p[2].act_saved,
             "%s: none > selective > full", presets[i]);
    FILE *f = tmpfile();
    th_check(ot_model_plan_print(f, &c, &r) == OT_OK, "plan print");
    char buf[4096] = {0};
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    th_check(strstr(buf, "encoder layer") != NULL && strstr(buf, "source S=14") != NULL,
             "plan print names the encoder");
  }
  // presets validate and count parameters (transformer-base: ~60M with a 32000 vocabulary)
  const char *all[] = {"transformer-base", "transformer-big", "transformer-seed"};
  for (int i = 0; i < 3; i++) {
    ot_model_config c;
    th_check(ot_model_config_preset(&c, all[i]) == OT_OK && ot_model_config_validate(&c) == OT_OK,
             "preset %s", all[i]);
  }
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-base");
  const int64_t n = ot_model_n_params(&c);
  th_check(n > 60000000 && n < 62000000, "transformer-base has %lld parameters", (long long)n);
  FILE *f = tmpfile();
  ot_model_config_print(f, &c);
  char buf[1024] = {0};
  rewind(f);
  buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
  fclose(f);
  th_check(strstr(buf, "marian names") && strstr(buf, "encoder-decoder (6 encoder layers, post-norm"),
           "config print: %s", buf);
}

// Vocabulary-parallel parts (tensor rank 0 and 1 of 2; stages [0, 4), [0, 2), [2, 4); every
// recompute mode; f32 and bf16): ot_model_plan_part equals the part's plan, and the arenas
// hold exactly it per category; the shared embedding (and final_logits_bias) keep Vl rows.
static ot_status no_allreduce(void *ctx, void *buf, size_t n, ot_dtype dt, ot_red_op op) {
  (void)ctx; (void)buf; (void)n; (void)dt; (void)op;
  return OT_OK;
}
static void plan_vocab_parallel(void) {
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  c.vocab = 401;   // padded to 416: 208 rows per tensor rank, rank 1 holds 15 padding rows
  const int ranges[3][2] = {{0, 4}, {0, 2}, {2, 4}};
  for (int dti = 0; dti < 2; dti++)
    for (int rc = 0; rc < 3; rc++)
      for (int k = 0; k < 3; k++)
        for (int tr = 0; tr < 2; tr++) {
          ot_run_config r = {2, 12, dti ? OT_BF16 : OT_F32, (ot_recompute)rc, -100, 14};
          ot_model_part part = ot_model_part_whole(&c);
          part.tp = 2;
          part.tp_rank = tr;
          part.vocab_parallel = true;
          part.layer0 = ranges[k][0];
          part.layer1 = ranges[k][1];
          part.comm.allreduce = no_allreduce;
          ot_mem_plan want;
          size_t c0[OT_MEM_CATEGORY_COUNT];
          for (int q = 0; q < OT_MEM_CATEGORY_COUNT; q++) c0[q] = ot_mem_current((ot_mem_category)q);
          ot_model *m = NULL;
          if (!th_check(ot_model_plan_part(&c, &r, &part, &want) == OT_OK &&
                            ot_model_create_part(&m, &c, &r, &part) == OT_OK,
                        "vocab-parallel part [%d, %d) rank %d: %s", ranges[k][0], ranges[k][1],
                        tr, ot_last_error()))
            continue;
          const ot_mem_plan *got = ot_model_plan_of(m);
          th_check(memcmp(&want, got, sizeof want) == 0,
                   "vocab-parallel part [%d, %d) rank %d %s: plan == model's", ranges[k][0],
                   ranges[k][1], tr, ot_recompute_name(r.recompute));
          th_check(ot_mem_current(OT_MEM_ACTIVATIONS) - c0[OT_MEM_ACTIVATIONS] == got->act_saved &&
                       ot_mem_current(OT_MEM_WORKSPACE) - c0[OT_MEM_WORKSPACE] == got->workspace &&
                       ot_mem_current(OT_MEM_GRADS) - c0[OT_MEM_GRADS] == got->grads &&
                       ot_mem_current(OT_MEM_PARAMS) - c0[OT_MEM_PARAMS] ==
                           got->params + got->params_bf16,
                   "vocab-parallel part [%d, %d) rank %d %s %s: the arenas hold exactly the plan",
                   ranges[k][0], ranges[k][1], tr, ot_recompute_name(r.recompute),
                   ot_dtype_name(r.dt));
          const int wte = ot_model_param_find(m, "model.shared.weight");
          const int lb = ot_model_param_find(m, "final_logits_bias");
          th_check(wte >= 0 && ot_model_param_at(m, wte)->shape[0] == 208 &&
                       ot_model_param_is_split(m, wte) &&
                       (ranges[k][1] < 4 || (lb >= 0 && ot_model_param_at(m, lb)->shape[0] == 208 &&
                                             ot_model_param_is_split(m, lb))),
                   "vocab-parallel part [%d, %d): 208 rows of the shared embedding and the bias",
                   ranges[k][0], ranges[k][1]);
          ot_model_free(m);
        }
}

int main(void) {
  golden("hf_marian");
  golden("hf_marian_gelu");
  golden("hf_mbart");
  activations();
  cross_reference();
  fd_check(true, false);
  fd_check(true, true);
  fd_check(false, false);
  recompute_modes(true);
  recompute_modes(false);
  bf16_close(true);
  bf16_close(false);
  round_trip();
  bad_input();
  plan();
  plan_vocab_parallel();
  return th_finish();
}
