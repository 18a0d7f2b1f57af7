// Model tests on tiny configs (2 layers, C=32, 4 heads, vocab 50 padded to 64):
//  - config/run validation: each bad field rejected with a message naming it
//  - memory plan: the plan equals the bytes the arenas hold (per category,
//    measured with ot_mem_current), recompute modes order none > selective > full;
//    with bf16 GEMMs native (a bf16 weight copy) and converted (none: f32 masters)
//  - whole-model gradients vs central finite differences (loss in double, a few
//    random elements of every tensor) for a GPT-2 family and a Llama family
//    (RMSNorm, SwiGLU, RoPE, GQA 4/2, untied) config
//  - recompute none / selective / full: bitwise-identical losses and gradients
//    (f32 and bf16); determinism (two runs, two models: bitwise equal)
//  - bf16 mixed precision: loss within 1% of f32, gradients within nerr 2e-2
//    (GPT-2 init) / 0.1 (large random weights), GEMMs native and converted
//  - PyTorch golden files (tools/gen_model_golden.py): logits, loss and every
//    gradient by HF name within nerr 1e-5, for every ISA; bf16 close to them
//  - HF-name export -> strict import round trip is bit exact; bad imports are
//    rejected with the tensor named
//  - when tests/golden/hf_gpt2 and hf_llama exist (tools/gen_hf_golden.py,
//    transformers): config.json + model.safetensors load and logits match
// Run from the repository root (CTest does).
#include "model_common.h"
#include "ops/gemm_impl.h"
#include "ot/model.h"
#include <sys/stat.h>
#include <unistd.h>

#define B_ 2
#define T_ 8

// the "tiny" preset's context (16) for both families
static ot_model_config cfg_gpt2(void) { return tm_cfg_gpt2(16); }
static ot_model_config cfg_llama(void) { return tm_cfg_llama(16); }

static ot_run_config run_of(ot_dtype dt, ot_recompute rc) {
  ot_run_config r = {B_, T_, dt, rc, -1};
  return r;
}

static ot_model *make(const ot_model_config *c, ot_dtype dt, ot_recompute rc) {
  ot_run_config r = run_of(dt, rc);
  ot_model *m = NULL;
  ot_status s = ot_model_create(&m, c, &r);
  th_check(s == OT_OK, "create %s %s %s: %s", c->name, ot_dtype_name(dt), ot_recompute_name(rc),
           ot_last_error());
  return m;
}

// Larger, generic weights than the GPT-2 init (gains != 1, biases != 0), so
// every gradient is well away from zero for the finite differences.
static void randomize(ot_model *m, uint64_t seed) {
  th_rng r = {seed};
  float *w = ot_model_params(m);
  const int V = ot_model_config_of(m)->vocab, C = ot_model_config_of(m)->d_model;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    float *x = w + p->offset;
    switch (p->kind) {
      case OT_PT_EMBED: case OT_PT_LM_HEAD: th_fill_normal(&r, x, (size_t)V * C, 0.3f); break;
      case OT_PT_POS: th_fill_normal(&r, x, p->numel, 0.1f); break;
      case OT_PT_MATRIX: th_fill_normal(&r, x, p->numel, 0.25f); break;
      case OT_PT_MATRIX_RES: th_fill_normal(&r, x, p->numel, 0.15f); break;
      case OT_PT_NORM_W:
        for (size_t j = 0; j < p->numel; j++) x[j] = 1.0f + 0.1f * th_normal(&r);
        break;
      case OT_PT_NORM_B: case OT_PT_BIAS: th_fill_normal(&r, x, p->numel, 0.1f); break;
    }
  }
  ot_model_sync_bf16(m);
}

static void make_batch(int32_t *tok, int32_t *tgt, int V, uint64_t seed) {
  th_rng r = {seed};
  for (int i = 0; i < B_ * T_; i++) {
    tok[i] = (int32_t)(th_next(&r) % (uint64_t)V);
    tgt[i] = (int32_t)(th_next(&r) % (uint64_t)V);
  }
  tgt[T_ + 3] = -1;   // one ignored target
}

static double step(ot_model *m, const int32_t *tok, const int32_t *tgt) {
  double loss = NAN;
  ot_model_zero_grad(m);
  ot_status s = ot_model_forward(m, tok, tgt, B_, T_, 0.0f, true, &loss);
  if (s == OT_OK) s = ot_model_backward(m);
  if (s != OT_OK) th_check(false, "forward/backward: %s", ot_last_error());
  return loss;
}

// ------------------------------------------------------------ validation ----
static void test_validation(void) {
  ot_model_config c;
  th_check_error(ot_model_config_preset(&c, "gpt3"), OT_EINVAL, "llama-tiny", "unknown preset");
  const char *presets[] = {"gpt2", "llama-tiny", "tiny", "small"};
  for (int i = 0; i < 4; i++) {
    th_check(ot_model_config_preset(&c, presets[i]) == OT_OK && ot_model_config_validate(&c) == OT_OK,
             "preset %s valid: %s", presets[i], ot_last_error());
  }
  ot_model_config_preset(&c, "gpt2");
  th_check(ot_model_vocab_padded(&c) == 50304, "gpt2 padded vocab %d == 50304", ot_model_vocab_padded(&c));
  th_check(ot_model_n_params(&c) == 124439808, "gpt2 parameters %lld == 124439808 (HF count)",
           (long long)ot_model_n_params(&c));
  ot_model_config_preset(&c, "llama-tiny");
  th_check(ot_model_n_params(&c) > 15000000 && ot_model_n_params(&c) < 25000000,
           "llama-tiny parameters %lld", (long long)ot_model_n_params(&c));

#define BADCFG(stmt, needle) do { c = cfg_gpt2(); stmt; \
    th_check_error(ot_model_config_validate(&c), OT_EINVAL, needle, "config: " #stmt); } while (0)
  BADCFG(c.d_model = 30, "not a multiple of n_heads");
  BADCFG(c.n_kv_heads = 3, "n_kv_heads=3");
  BADCFG(c.n_kv_heads = 0, "n_kv_heads=0");
  BADCFG(c.vocab = 0, "vocab=0");
  BADCFG(c.vocab_pad = 48, "vocab_pad=48");
  BADCFG(c.n_layers = -1, "n_layers=-1");
  BADCFG(c.d_ff = 0, "d_ff=0");
  BADCFG(c.max_seq = 0, "max_seq=0");
  BADCFG(c.eps = 0.0f, "eps=0");
  BADCFG(c.norm = (ot_norm_kind)7, "norm=7");
  BADCFG(c.mlp = (ot_mlp_kind)7, "activation=7");
  BADCFG((c.pos = OT_POS_ROPE, c.n_heads = c.n_kv_heads = 32, c.d_model = 96), "even head_dim");
  BADCFG((c.pos = OT_POS_ROPE, c.rope_base = 0.0f), "rope_base=0");
  BADCFG(c.init_std = -1.0f, "init_std=-1");
#undef BADCFG
  c = cfg_gpt2();
  ot_model *m = (ot_model *)1;
  ot_run_config r = run_of(OT_F32, OT_RECOMPUTE_NONE);
  r.T = 17;
  th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "max_seq=16", "run T > max_seq");
  th_check(m == NULL, "failed create leaves *out NULL");
  r = run_of(OT_I32, OT_RECOMPUTE_NONE);
  th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "i32", "run dtype");
  r = run_of(OT_F32, (ot_recompute)5);
  th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "recompute=5", "run recompute");
  r = run_of(OT_F32, OT_RECOMPUTE_NONE);
  r.ignore_index = 3;
  th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "ignore_index=3", "run ignore_index");

  m = make(&c, OT_F32, OT_RECOMPUTE_NONE);
  if (!m) return;
  ot_model_init(m, 1);
  int32_t tok[B_ * T_ * 2] = {0}, tgt[B_ * T_ * 2] = {0};
  th_check_error(ot_model_forward(m, tok, tgt, B_ + 1, T_, 0, true, NULL), OT_EINVAL, "B=3",
                 "forward beyond the planned batch");
  th_check_error(ot_model_forward(m, tok, NULL, B_, T_, 0, true, NULL), OT_EINVAL, "needs targets",
                 "want_grad without targets");
  th_check_error(ot_model_backward(m), OT_EINVAL, "no forward", "backward without forward");
  tok[5] = 50;
  th_check_error(ot_model_forward(m, tok, tgt, B_, T_, 0, false, NULL), OT_EINVAL, "tokens[5] = 50",
                 "token outside the vocabulary");
  tok[5] = 0;
  tgt[2] = 60;
  th_check_error(ot_model_forward(m, tok, tgt, B_, T_, 0, false, NULL), OT_EINVAL, "targets[2] = 60",
                 "target outside the vocabulary");
  ot_model_free(m);
}

// ---------------------------------------------------------- memory plan -----
// mode: bf16 GEMMs 1 native (the bf16 copy kept), 0 converted (the GEMMs read the f32 masters).
static void test_plan(int mode) {
  ot__gemm_bf16_set_mode(mode);
  ot_model_config cfgs[2] = {cfg_gpt2(), cfg_llama()};
  for (int ci = 0; ci < 2; ci++)
    for (int d = 0; d < TH_NDT; d++) {
      ot_dtype dt = th_dts[d];
      size_t act[3] = {0};
      for (int rc = 0; rc < 3; rc++) {
        const ot_model_config *c = &cfgs[ci];
        size_t before[OT_MEM_CATEGORY_COUNT];
        for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) before[k] = ot_mem_current((ot_mem_category)k);
        ot_model *m = make(c, dt, (ot_recompute)rc);
        if (!m) continue;
        const ot_mem_plan *p = ot_model_plan_of(m);
        size_t got[OT_MEM_CATEGORY_COUNT];
        for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++)
          got[k] = ot_mem_current((ot_mem_category)k) - before[k];
        ot_run_config r = run_of(dt, (ot_recompute)rc);
        ot_mem_plan q;
        th_check(ot_model_plan(c, &r, &q) == OT_OK && memcmp(&q, p, sizeof q) == 0,
                 "plan without a model equals the model's plan (%s)", c->name);
        th_check(got[OT_MEM_PARAMS] == p->params + p->params_bf16 && got[OT_MEM_GRADS] == p->grads &&
                     got[OT_MEM_ACTIVATIONS] == p->act_saved && got[OT_MEM_WORKSPACE] == p->workspace &&
                     got[OT_MEM_OPTIM] == 0 && got[OT_MEM_OTHER] == 0,
                 "%s %s %s: allocated params %zu/%zu grads %zu/%zu act %zu/%zu ws %zu/%zu (got/plan)",
                 c->name, ot_dtype_name(dt), ot_recompute_name((ot_recompute)rc), got[OT_MEM_PARAMS],
                 p->params + p->params_bf16, got[OT_MEM_GRADS], p->grads, got[OT_MEM_ACTIVATIONS],
                 p->act_saved, got[OT_MEM_WORKSPACE], p->workspace);
        th_check(p->params == ot_align64(ot_model_n_floats(m) * 4) &&
                     p->params_bf16 == (dt != OT_F32 && (dt != OT_BF16 || mode) ? ot_align64(ot_model_n_floats(m) * 2) : 0),
                 "params plan: f32 master + 16-bit copy only with f16, and bf16 with native bf16 GEMMs (mode %d)",
                 mode);
        th_check((ot_model_params_bf16(m) != NULL) == (p->params_bf16 != 0),
                 "a 16-bit copy exactly where planned (mode %d)", mode);
        act[rc] = p->act_saved;
        // the layout covers the HF parameter count plus padding rows/alignment only
        size_t hf = 0;
        for (int i = 0; i < ot_model_hf_count(m); i++) {
          const ot_hf_tensor *h = ot_model_hf_at(m, i);
          hf += (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
        }
        th_check(hf == (size_t)ot_model_n_params(c), "HF tensors cover %zu == n_params %lld", hf,
                 (long long)ot_model_n_params(c));
        if (rc == OT_RECOMPUTE_FULL) {
          const size_t N = B_ * T_, es = ot_dtype_size(dt);
          th_check(p->act_saved_layer == ot_align64(N * 32 * es),
                   "full recompute keeps only the layer input per layer (%zu bytes)", p->act_saved_layer);
        }
        ot_model_free(m);
        size_t after = 0, start = 0;
        for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) {
          if (k == OT_MEM_WORKSPACE) continue;   // ot_scratch of the ops may stay
          after += ot_mem_current((ot_mem_category)k);
          start += before[k];
        }
        th_check(after == start, "free returns every byte (%zu vs %zu)", after, start);
      }
      th_check(act[0] > act[1] && act[1] > act[2], "%s %s activations none %zu > selective %zu > full %zu",
               cfgs[ci].name, ot_dtype_name(dt), act[0], act[1], act[2]);
    }
  // the printed plan
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ot_model_config g;
  ot_model_config_preset(&g, "gpt2");
  ot_run_config r = {8, 256, OT_BF16, OT_RECOMPUTE_SELECTIVE, -1};
  ot_status s = ot_model_plan_print(f, &g, &r);
  fclose(f);
  th_check(s == OT_OK && strstr(text, "gradients") && strstr(text, "saves vs none") &&
               strstr(text, "<- this run") && strstr(text, "bf16 copy") &&
               (mode || strstr(text, "the GEMMs read the f32 masters")),
           "plan print (mode %d): %s", mode, s == OT_OK ? "ok" : ot_last_error());
  printf("%s", text);
  free(text);
  ot__gemm_bf16_set_mode(-1);
}

// ---------------------------------------------------- finite differences ----
typedef struct {
  ot_model *m;
  const int32_t *tok, *tgt;
} fd_ctx;

static double fd_loss(void *p) {
  fd_ctx *c = p;
  double loss = NAN;
  if (ot_model_forward(c->m, c->tok, c->tgt, B_, T_, 0.0f, false, &loss) != OT_OK) return NAN;
  return loss;
}

static void test_fd(const ot_model_config *c) {
  ot_model *m = make(c, OT_F32, OT_RECOMPUTE_NONE);
  if (!m) return;
  randomize(m, 11);
  int32_t tok[B_ * T_], tgt[B_ * T_];
  make_batch(tok, tgt, c->vocab, 12);
  step(m, tok, tgt);
  float *w = ot_model_params(m), *g = ot_model_grads(m);
  fd_ctx ctx = {m, tok, tgt};
  th_rng r = {13};
  const int K = 4, C = c->d_model;
  double worst = 0;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    double num = 0, den = 0;
    for (int k = 0; k < K; k++) {
      size_t j;
      if (p->kind == OT_PT_EMBED) j = (size_t)tok[th_next(&r) % (B_ * T_)] * C + th_next(&r) % C;
      else if (p->kind == OT_PT_LM_HEAD) j = (size_t)(th_next(&r) % c->vocab) * C + th_next(&r) % C;
      else if (p->kind == OT_PT_POS) j = (th_next(&r) % T_) * C + th_next(&r) % C;
      else j = th_next(&r) % p->numel;
      double fd = th_fd(w + p->offset, j, 1e-2f, fd_loss, &ctx);
      double an = g[p->offset + j];
      num += (fd - an) * (fd - an);
      den += an * an;
    }
    // f32 forward: the loss carries ~1e-7 relative noise, 2e-5 after /2h
    double e = sqrt(num) / fmax(sqrt(den), 1e-3);
    if (e > worst) worst = e;
    th_check(e < 1e-2, "%s fd gradient %s: nerr %.3g (|g| %.3g)", c->name, p->name, e, sqrt(den / K));
  }
  printf("%s: finite differences, worst normalized error over %d tensors x %d elements: %.3g\n",
         c->name, ot_model_param_count(m), K, worst);
  // untouched padding rows and positions beyond T have zero gradient
  const ot_param *pe = ot_model_param_at(m, ot_model_param_find(m, c->names == OT_NAMES_GPT2 ?
                                                                "wte.weight" : "model.embed_tokens.weight"));
  bool zero = true;
  for (size_t j = (size_t)c->vocab * C; j < pe->numel; j++) zero &= g[pe->offset + j] == 0.0f;
  th_check(zero, "%s: padding rows of the embedding get zero gradient", c->name);
  ot_model_free(m);
}

// -------------------------------------------- recompute, determinism, bf16 --
static void test_recompute(const ot_model_config *c, ot_dtype dt) {
  int32_t tok[B_ * T_], tgt[B_ * T_];
  make_batch(tok, tgt, c->vocab, 21);
  ot_model *m[3];
  double loss[3];
  for (int rc = 0; rc < 3; rc++) {
    m[rc] = make(c, dt, (ot_recompute)rc);
    if (!m[rc]) return;
    randomize(m[rc], 22);
    loss[rc] = step(m[rc], tok, tgt);
  }
  size_t n = ot_model_n_floats(m[0]);
  for (int rc = 1; rc < 3; rc++) {
    th_check(memcmp(&loss[0], &loss[rc], sizeof(double)) == 0,
             "%s %s: loss recompute %s %.9g == none %.9g (bitwise)", c->name, ot_dtype_name(dt),
             ot_recompute_name((ot_recompute)rc), loss[rc], loss[0]);
    th_check(memcmp(ot_model_grads(m[0]), ot_model_grads(m[rc]), n * sizeof(float)) == 0,
             "%s %s: gradients recompute %s == none (bitwise)", c->name, ot_dtype_name(dt),
             ot_recompute_name((ot_recompute)rc));
  }
  // determinism: the same model again, and a second model built the same way
  float *g0 = th_falloc(n);
  memcpy(g0, ot_model_grads(m[0]), n * sizeof(float));
  double l2 = step(m[0], tok, tgt);
  th_check(memcmp(&l2, &loss[0], sizeof l2) == 0 &&
               memcmp(g0, ot_model_grads(m[0]), n * sizeof(float)) == 0,
           "%s %s: a second step is bitwise identical", c->name, ot_dtype_name(dt));
  // accumulation: a second backward without zeroing doubles the gradient
  double l3 = NAN;
  ot_model_forward(m[0], tok, tgt, B_, T_, 0.0f, true, &l3);
  ot_model_backward(m[0]);
  float *g2 = th_falloc(n);
  for (size_t i = 0; i < n; i++) g2[i] = 2.0f * g0[i];
  th_check_nerr(ot_model_grads(m[0]), g2, n, 1e-6, "%s %s: gradients accumulate (+=)", c->name,
                ot_dtype_name(dt));
  free(g2);
  for (int rc = 0; rc < 3; rc++) ot_model_free(m[rc]);
  ot_model *a = make(c, dt, OT_RECOMPUTE_NONE);
  if (a) {
    randomize(a, 22);
    double l4 = step(a, tok, tgt);
    th_check(memcmp(&l4, &loss[0], sizeof l4) == 0 && memcmp(g0, ot_model_grads(a), n * sizeof(float)) == 0,
             "%s %s: a fresh model gives bitwise-identical loss and gradients", c->name, ot_dtype_name(dt));
    ot_model_free(a);
  }
  free(g0);
}

// A model planned for B_ x T_ run on a smaller batch equals one planned for it.
static void test_smaller_batch(const ot_model_config *c) {
  int32_t tok[B_ * T_], tgt[B_ * T_];
  make_batch(tok, tgt, c->vocab, 41);
  const int B = 1, T = 5;
  ot_run_config r = {B, T, OT_F32, OT_RECOMPUTE_SELECTIVE, -1};
  ot_model *big = make(c, OT_F32, OT_RECOMPUTE_SELECTIVE), *small = NULL;
  if (!big || !th_check(ot_model_create(&small, c, &r) == OT_OK, "create %dx%d: %s", B, T,
                        ot_last_error())) {
    ot_model_free(big);
    return;
  }
  randomize(big, 42);
  randomize(small, 42);
  double l[2] = {NAN, NAN};
  ot_model *ms[2] = {big, small};
  for (int i = 0; i < 2; i++) {
    ot_model_zero_grad(ms[i]);
    th_check(ot_model_forward(ms[i], tok, tgt, B, T, 0.0f, true, &l[i]) == OT_OK &&
                 ot_model_backward(ms[i]) == OT_OK, "step %dx%d: %s", B, T, ot_last_error());
  }
  th_check(memcmp(&l[0], &l[1], sizeof l[0]) == 0 &&
               memcmp(ot_model_grads(big), ot_model_grads(small), ot_model_n_floats(big) * 4) == 0,
           "%s: a %dx%d step in a model planned for %dx%d equals a model planned for it (bitwise)",
           c->name, B, T, B_, T_);
  ot_model_free(big);
  ot_model_free(small);
}

// A 16-bit run (bf16 or f16 activations) against f32: f16's 3 more mantissa bits give
// tolerances / 8. mode: bf16 GEMMs native (1) or converted by tiles from the f32 masters (0).
static void test_16bit(const ot_model_config *c, ot_dtype dt, int mode) {
  int32_t tok[B_ * T_], tgt[B_ * T_];
  make_batch(tok, tgt, c->vocab, 31);
  const char *dn = ot_dtype_name(dt);
  ot__gemm_bf16_set_mode(mode);
  ot__gemm_cvt_set_tiles(mode ? 0 : 4096, mode ? 0 : 16);   // tiny tiles: every GEMM in many
  for (int init = 0; init < 2; init++) {
    ot_model *f = make(c, OT_F32, OT_RECOMPUTE_NONE), *h = make(c, dt, OT_RECOMPUTE_SELECTIVE);
    if (!f || !h) return;
    if (init) { randomize(f, 32); randomize(h, 32); }
    else { ot_model_init(f, 33); ot_model_init(h, 33); }
    double lf = step(f, tok, tgt), lh = step(h, tok, tgt);
    size_t n = ot_model_n_floats(f);
    double e = th_nerr(ot_model_grads(h), ot_model_grads(f), n);
    printf("%s (%s weights, bf16 GEMMs %s): loss f32 %.6f %s %.6f (rel %.2e), gradient nerr %.3g\n",
           c->name, init ? "random" : "GPT-2 init", mode ? "native" : "converted", lf, dn, lh,
           fabs(lh - lf) / lf, e);
    const double ltol = th_tol(dt, 0.0, 1e-2);
    th_check(fabs(lh - lf) <= ltol * lf, "%s %s loss %.6f within %.2g%% of f32 %.6f", c->name, dn, lh,
             100 * ltol, lf);
    // large random weights amplify the 16-bit rounding of activations
    const double gtol = th_tol(dt, 0.0, init ? 0.1 : 2e-2);
    th_check(e <= gtol, "%s %s gradients nerr %.3g <= %g", c->name, dn, e, gtol);
    ot_model_free(f);
    ot_model_free(h);
  }
  ot__gemm_bf16_set_mode(-1);
  ot__gemm_cvt_set_tiles(0, 0);
}

// ---------------------------------------------------------------- golden ----
static int meta_i(const ot_st_file *f, const char *k) {
  const char *v = ot_st_meta(f, k);
  th_check(v != NULL, "%s: metadata %s", ot_st_name(f), k);
  return v ? atoi(v) : 0;
}
static double meta_d(const ot_st_file *f, const char *k) {
  const char *v = ot_st_meta(f, k);
  th_check(v != NULL, "%s: metadata %s", ot_st_name(f), k);
  return v ? atof(v) : 0;
}

// Config of a golden file from its metadata.
static ot_model_config golden_cfg(const ot_st_file *f) {
  const char *fam = ot_st_meta(f, "family");
  ot_model_config c = fam && strcmp(fam, "llama") == 0 ? cfg_llama() : cfg_gpt2();
  c.vocab = meta_i(f, "vocab");
  c.d_model = meta_i(f, "d_model");
  c.n_layers = meta_i(f, "n_layers");
  c.n_heads = meta_i(f, "n_heads");
  c.n_kv_heads = meta_i(f, "n_kv_heads");
  c.d_ff = meta_i(f, "d_ff");
  c.max_seq = meta_i(f, "max_seq");
  c.eps = (float)meta_d(f, "eps");
  if (c.pos == OT_POS_ROPE) c.rope_base = (float)meta_d(f, "rope_base");
  return c;
}

static const ot_st_tensor *need(const ot_st_file *f, const char *name) {
  const ot_st_tensor *t = ot_st_find(f, name);
  th_check(t != NULL, "%s: tensor %s present", ot_st_name(f), name);
  return t;
}

static void golden_run(const ot_st_file *f, ot_dtype dt, ot_recompute rc, const char *isa) {
  ot_model_config c = golden_cfg(f);
  int B = meta_i(f, "B"), T = meta_i(f, "T"), V = c.vocab;
  ot_run_config r = {B, T, dt, rc, meta_i(f, "ignore_index")};
  ot_model *m = NULL;
  if (!th_check(ot_model_create(&m, &c, &r) == OT_OK, "golden create: %s", ot_last_error())) return;
  ot_status s = ot_model_import(m, f, NULL, false);
  th_check(s == OT_OK, "golden import: %s", ot_last_error());
  const ot_st_tensor *tt = need(f, "tokens"), *tg = need(f, "targets"), *tl = need(f, "logits"),
                     *ls = need(f, "loss");
  if (s != OT_OK || !tt || !tg || !tl || !ls) { ot_model_free(m); return; }
  const double tol = th_tol(dt, 1e-5, 3e-2);
  const char *fam = ot_st_meta(f, "family");
  // logits
  th_check(ot_model_forward(m, tt->data, NULL, B, T, 0, false, NULL) == OT_OK, "forward: %s",
           ot_last_error());
  int ld = 0;
  const void *lg = ot_model_logits(m, &ld);
  float *got = th_falloc((size_t)B * T * V);
  for (int i = 0; i < B * T; i++)
    for (int j = 0; j < V; j++)
      got[(size_t)i * V + j] = dt == OT_BF16 ? ot_bf16_to_f32(((const uint16_t *)lg)[(size_t)i * ld + j])
                               : dt == OT_F16 ? ot_f16_to_f32(((const uint16_t *)lg)[(size_t)i * ld + j])
                                              : ((const float *)lg)[(size_t)i * ld + j];
  th_check_nerr(got, tl->data, (size_t)B * T * V, tol, "golden %s [%s %s %s] logits", fam, isa,
                ot_dtype_name(dt), ot_recompute_name(rc));
  free(got);
  // loss and gradients (count from the metadata, as a caller accumulating would pass it)
  double loss = NAN;
  ot_model_zero_grad(m);
  s = ot_model_forward(m, tt->data, tg->data, B, T, (float)meta_i(f, "count"), true, &loss);
  if (s == OT_OK) s = ot_model_backward(m);
  th_check(s == OT_OK, "golden step: %s", ot_last_error());
  const double want = ((const float *)ls->data)[0];
  th_check(fabs(loss - want) <= tol * fabs(want), "golden %s [%s %s %s] loss %.7f vs torch %.7f", fam,
           isa, ot_dtype_name(dt), ot_recompute_name(rc), loss, want);
  double worst = 0;
  for (int i = 0; i < ot_model_hf_count(m); i++) {
    const ot_hf_tensor *h = ot_model_hf_at(m, i);
    char name[128];
    snprintf(name, sizeof name, "grad.%s", h->name);
    const ot_st_tensor *t = need(f, name);
    if (!t) continue;
    size_t n = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
    float *gg = th_falloc(n);
    ot_model_hf_get(m, i, ot_model_grads(m), gg);
    double e = th_nerr(gg, t->data, n);
    if (e > worst) worst = e;
    th_check(e <= th_tol(dt, 1e-5, 0.1), "golden %s [%s %s %s] %s nerr %.3g", fam, isa, ot_dtype_name(dt),
             ot_recompute_name(rc), name, e);
    free(gg);
  }
  if (getenv("TH_VERBOSE") && *getenv("TH_VERBOSE") == '1')
    printf("golden %s [%s %s %s]: loss %.7f (torch %.7f), worst gradient nerr %.3g\n", fam, isa,
           ot_dtype_name(dt), ot_recompute_name(rc), loss, want, worst);
  ot_model_free(m);
}

static void test_golden(const char *path) {
  ot_st_file *f = NULL;
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s: %s", path, ot_last_error())) return;
  ot_isa isas[OT_ISA_COUNT];
  int n = th_isas(isas);
  for (int i = 0; i < n; i++) {
    ot_isa_force(isas[i]);
    golden_run(f, OT_F32, OT_RECOMPUTE_NONE, ot_isa_name(isas[i]));
  }
  ot_isa_unforce();
  golden_run(f, OT_F32, OT_RECOMPUTE_FULL, ot_isa_name(ot_isa_active()));
  golden_run(f, OT_BF16, OT_RECOMPUTE_SELECTIVE, ot_isa_name(ot_isa_active()));
  golden_run(f, OT_F16, OT_RECOMPUTE_SELECTIVE, ot_isa_name(ot_isa_active()));

  // strict import rejects the extra (gradient) tensors; wrong configs name the tensor
  ot_model_config c = golden_cfg(f);
  ot_run_config r = run_of(OT_F32, OT_RECOMPUTE_NONE);
  ot_model *m = NULL;
  if (ot_model_create(&m, &c, &r) == OT_OK) {
    th_check_error(ot_model_import(m, f, NULL, true), OT_EFORMAT, "unexpected tensor 'grad.",
                   "strict import of a file with extra tensors");
    // export -> strict import round trip
    ot_model_import(m, f, NULL, false);
    char tmp[128];
    snprintf(tmp, sizeof tmp, "/tmp/ot_test_model_%d_export.safetensors", (int)getpid());
    th_check(ot_model_export(m, tmp) == OT_OK, "export: %s", ot_last_error());
    ot_st_file *e = NULL;
    ot_model *m2 = NULL;
    if (ot_st_open(&e, tmp) == OT_OK && ot_model_create(&m2, &c, &r) == OT_OK) {
      th_check(ot_model_import(m2, e, NULL, true) == OT_OK, "strict import of the export: %s",
               ot_last_error());
      th_check(memcmp(ot_model_params(m), ot_model_params(m2), ot_model_n_floats(m) * 4) == 0,
               "%s: export -> import round trip is bit exact", path);
      th_check(ot_st_count(e) == ot_model_hf_count(m), "export holds %d HF tensors",
               ot_st_count(e));
    } else {
      th_check(false, "reopen export: %s", ot_last_error());
    }
    ot_model_free(m2);
    ot_st_close(e);
    remove(tmp);
    ot_model_free(m);
  }
  c = golden_cfg(f);
  c.d_ff += 16;
  if (ot_model_create(&m, &c, &r) == OT_OK) {
    th_check_error(ot_model_import(m, f, NULL, false), OT_EFORMAT, "the config expects",
                   "import with a wrong d_ff");
    ot_model_free(m);
  }
  c = golden_cfg(f);
  c.bias = !c.bias;
  if (ot_model_create(&m, &c, &r) == OT_OK) {
    if (c.bias) {
      th_check_error(ot_model_import(m, f, NULL, false), OT_EFORMAT, "is missing",
                     "import of a bias-free file into a model with biases");
    } else {  // extra biases: accepted without strict, named with strict
      th_check(ot_model_import(m, f, NULL, false) == OT_OK, "non-strict import ignores extra tensors");
      th_check_error(ot_model_import(m, f, NULL, true), OT_EFORMAT, ".bias'",
                     "strict import of a file with biases into a bias-free model");
    }
    ot_model_free(m);
  }
  ot_st_close(f);
}

// ------------------------------------------------------ Hugging Face dirs ---
static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void test_hf_dir(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/logits.safetensors", dir);
  if (!exists(path)) {
    printf("note: %s not present (tools/gen_hf_golden.py makes it): skipped\n", dir);
    return;
  }
  ot_st_file *f = NULL;
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s: %s", path, ot_last_error())) return;
  const ot_st_tensor *tt = need(f, "tokens"), *tl = need(f, "logits");
  if (!tt || !tl) { ot_st_close(f); return; }
  int B = (int)tt->shape[0], T = (int)tt->shape[1], V = (int)tl->shape[2];
  ot_run_config r = {B, T, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  ot_status s = ot_model_load_hf(&m, dir, &r);
  if (th_check(s == OT_OK, "load %s: %s", dir, ot_last_error())) {
    th_check(ot_model_config_of(m)->vocab == V, "%s: vocab %d", dir, V);
    s = ot_model_forward(m, tt->data, NULL, B, T, 0, false, NULL);
    th_check(s == OT_OK, "forward: %s", ot_last_error());
    int ld = 0;
    const float *lg = ot_model_logits(m, &ld);
    float *got = th_falloc((size_t)B * T * V);
    for (int i = 0; i < B * T; i++) memcpy(got + (size_t)i * V, lg + (size_t)i * ld, (size_t)V * 4);
    th_check_nerr(got, tl->data, (size_t)B * T * V, 1e-5, "%s: logits vs transformers", dir);
    free(got);
    ot_model_free(m);
  }
  ot_st_close(f);
}

static void test_hf_config_errors(void) {
  char p[128];
  snprintf(p, sizeof p, "/tmp/ot_test_model_%d_config.json", (int)getpid());
  struct { const char *json, *needle; ot_status want; } cases[] = {
      {"{\"model_type\": \"bert\"}", "model_type 'bert'", OT_EUNSUPPORTED},
      {"{\"model_type\": \"gpt2\", \"n_embd\": 32}", "'vocab_size' is missing", OT_EFORMAT},
      {"{\"model_type\": \"llama\", \"vocab_size\": 50, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
       " \"num_attention_heads\": 4, \"intermediate_size\": 64, \"rope_scaling\": {\"type\": \"linear\"}}",
       "rope_scaling", OT_EUNSUPPORTED},
      {"{\"model_type\": \"llama\", \"vocab_size\": 50, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
       " \"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"intermediate_size\": 64}",
       "n_kv_heads=3", OT_EINVAL},
      {"{\"model_type\": \"gpt2\", \"vocab_size\": 50, \"n_embd\": 32, \"n_layer\": 2, \"n_head\": 4,"
       " \"activation_function\": \"relu\"}", "relu", OT_EUNSUPPORTED},
      {"{\"model_type\": \"gpt2\", \"vocab_size\": 50,", "invalid JSON", OT_EFORMAT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(p, "w");
    if (!f) { th_check(false, "write %s", p); return; }
    fputs(cases[i].json, f);
    fclose(f);
    ot_model_config c;
    th_check_error(ot_model_config_from_hf(&c, p), cases[i].want, cases[i].needle, "HF config.json");
  }
  FILE *f = fopen(p, "w");
  if (f) {
    fputs("{\"model_type\": \"llama\", \"vocab_size\": 50, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
          " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 64,"
          " \"rms_norm_eps\": 1e-05, \"max_position_embeddings\": 16, \"hidden_act\": \"silu\","
          " \"rope_scaling\": null, \"tie_word_embeddings\": false}", f);
    fclose(f);
    ot_model_config c;
    ot_status s = ot_model_config_from_hf(&c, p);
    th_check(s == OT_OK && c.names == OT_NAMES_LLAMA && c.n_kv_heads == 2 && c.d_ff == 64 &&
                 c.max_seq == 16 && !c.tied && !c.bias && c.norm == OT_NORM_RMSNORM,
             "HF llama config.json parsed: %s", s == OT_OK ? "ok" : ot_last_error());
  }
  remove(p);
}

int main(void) {
  test_validation();
  test_plan(1);
  test_plan(0);
  ot_model_config g = cfg_gpt2(), l = cfg_llama();
  test_fd(&g);
  test_fd(&l);
  for (int d = 0; d < TH_NDT; d++) {
    test_recompute(&g, th_dts[d]);
    test_recompute(&l, th_dts[d]);
  }
  test_smaller_batch(&g);
  test_smaller_batch(&l);
  for (int mode = 1; mode >= 0; mode--) {
    test_16bit(&g, OT_BF16, mode);
    test_16bit(&l, OT_BF16, mode);
  }
  test_16bit(&g, OT_F16, 1);
  test_16bit(&l, OT_F16, 1);
  test_golden("tests/golden/model_gpt2.safetensors");
  test_golden("tests/golden/model_llama.safetensors");
  test_hf_config_errors();
  test_hf_dir("tests/golden/hf_gpt2");
  test_hf_dir("tests/golden/hf_llama");
  return th_finish();
}
