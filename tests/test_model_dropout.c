// Dropout in the model graph (embedding, sublayer outputs, attention probabilities,
// MLP activation), decoder-only and encoder-decoder:
//  - dropout 0 takes the old path: the mask stream changes nothing, want_grad on/off
//    give the same loss, the plan has the same bytes with dropout on;
//  - the backward by finite differences with dropout on (the same stream in every
//    evaluation: a fixed mask) for GPT-2-, Llama-shaped and post-/pre-norm enc-dec models;
//  - the embedding mask is exactly the keep rule of ot/core.h at the documented
//    counters ((sample, position, channel) at the stride of max_seq), and the keep
//    rate of the residual / activation masks is 1 - p within
//    5 sigma;
//  - recompute none / selective / full: bitwise-identical losses and gradients (f32 and
//    bf16); 1 vs 2 threads: bitwise-identical losses (and gradients on the tiny shapes;
//    on larger ones the LayerNorm gain / beta reductions of the backward depend on the
//    thread count with or without dropout, so those are compared within rounding);
//    micro-batch slots keep their own masks;
//  - want_grad = false gives the no-dropout logits exactly; different counters or
//    seeds give different masks, the same ones the same;
//  - an encoder-decoder batch's rows in one forward or one per forward (each padded to
//    its own lengths, its sample index given) draw the same masks: the same gradients;
//  - bad probabilities refused with messages; presets and the HF config keys.
#include <math.h>
#include "harness.h"
#include "model/model_impl.h"
#include <omp.h>
#include <unistd.h>

// ------------------------------------------------------------- helpers -----
static void fill_weights(ot_model *m, uint64_t seed) {
  th_rng r = {seed};
  float *w = ot_model_params(m);
  const ot_model_config *c = ot_model_config_of(m);
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    size_t n = p->numel;
    if (p->kind == OT_PT_EMBED || p->kind == OT_PT_LM_HEAD) n = (size_t)c->vocab * p->shape[1];
    if (strcmp(p->name, "final_logits_bias") == 0) n = (size_t)c->vocab;
    for (size_t j = 0; j < n; j++)
      w[p->offset + j] = (p->kind == OT_PT_NORM_W ? 1.0f : 0.0f) + 0.3f * th_normal(&r);
  }
  ot_model_sync_bf16(m);
}

static ot_model_config gpt2_cfg(float pd, float pa, float pf) {
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  c.dropout = pd;
  c.attn_dropout = pa;
  c.act_dropout = pf;
  return c;
}
static ot_model_config llama_cfg(float pd, float pa, float pf) {
  ot_model_config c = gpt2_cfg(pd, pa, pf);
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
// transformer-tiny, post-norm (Marian) or pre-norm (mBART-like), erf-GELU (smooth for
// finite differences)
static ot_model_config s2s_cfg(bool post, float pd, float pa, float pf) {
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  c.mlp = OT_MLP_GELU_ERF;
  snprintf(c.name, sizeof c.name, "%s", post ? "s2s-post" : "s2s-pre");
  if (!post) {
    c.norm_place = OT_PLACE_PRE;
    c.pos = OT_POS_LEARNED;
    c.pos_offset = 2;
    c.embed_norm = true;
    c.n_kv_heads = 2;
    c.tied = false;
  }
  c.dropout = pd;
  c.attn_dropout = pa;
  c.act_dropout = pf;
  return c;
}
static bool is_s2s(const ot_model_config *c) { return c->arch == OT_ARCH_ENCDEC; }

enum { B_ = 2, S_ = 5, T_ = 4, DB = 3, DT = 12 };
static const int32_t k_src[B_ * S_] = {3, 7, 11, 2, 0, 5, 9, 0, 49, 49};
static const int32_t k_len[B_] = {5, 3};
static const int32_t k_tgt[B_ * T_] = {49, 4, 8, 15, 49, 21, 6, 30};
static const int32_t k_out[B_ * T_] = {4, 8, 15, 0, 21, 6, 0, -100};
static int32_t g_tok[DB * DT], g_lab[DB * DT];   // decoder-only batch

static ot_model *make(const ot_model_config *c, ot_recompute rc, uint64_t seed) {
  ot_run_config r = {is_s2s(c) ? B_ : DB, is_s2s(c) ? T_ : DT, OT_F32, rc, -100,
                     is_s2s(c) ? S_ : 0};
  ot_model *m = NULL;
  if (!th_check(ot_model_create(&m, c, &r) == OT_OK, "create %s: %s", c->name, ot_last_error()))
    return NULL;
  fill_weights(m, seed);
  return m;
}

// One forward on the fixed batch (targets NULL: logits only).
static ot_status fwd(ot_model *m, bool targets, bool want_grad, double *loss) {
  if (is_s2s(ot_model_config_of(m))) {
    ot_s2s_batch b = {B_, S_, T_, k_src, k_len, k_tgt, targets ? k_out : NULL};
    return ot_model_forward_s2s(m, &b, 0.0f, want_grad, loss);
  }
  return ot_model_forward(m, g_tok, targets ? g_lab : NULL, DB, DT, 0.0f, want_grad, loss);
}

// Loss and gradients of one training step with stream (seed, counter) into g (n floats).
static double step(ot_model *m, uint64_t seed, uint64_t counter, float *g) {
  ot_model_set_dropout_step(m, seed, counter);
  ot_model_zero_grad(m);
  double loss = NAN;
  th_check(fwd(m, true, true, &loss) == OT_OK, "forward: %s", ot_last_error());
  th_check(ot_model_backward(m) == OT_OK, "backward: %s", ot_last_error());
  if (g) memcpy(g, ot_model_grads(m), ot_model_n_floats(m) * sizeof(float));
  return loss;
}

static bool same_bits(const void *a, const void *b, size_t bytes) { return !memcmp(a, b, bytes); }

// ------------------------------------------------------ dropout 0 path ------
static void test_zero(const ot_model_config *c0) {
  ot_model *m = make(c0, OT_RECOMPUTE_NONE, 3);
  if (!m) return;
  const size_t n = ot_model_n_floats(m);
  float *g1 = th_falloc(n), *g2 = th_falloc(n);
  double l1 = step(m, 1, 2, g1), l2 = step(m, 77, 9, g2), l3 = NAN;
  th_check(same_bits(&l1, &l2, sizeof l1) && same_bits(g1, g2, n * 4),
           "%s, dropout 0: the mask stream changes nothing", c0->name);
  fwd(m, true, false, &l3);
  th_check(same_bits(&l1, &l3, sizeof l1), "%s, dropout 0: want_grad on / off: loss %.17g / %.17g",
           c0->name, l1, l3);
  // the plan holds the same bytes with dropout on (masks are regenerated, never stored)
  ot_model_config c1 = *c0;
  c1.dropout = c1.attn_dropout = c1.act_dropout = 0.3f;
  ot_mem_plan p0, p1;
  th_check(ot_model_plan(c0, ot_model_run_of(m), &p0) == OT_OK &&
               ot_model_plan(&c1, ot_model_run_of(m), &p1) == OT_OK && same_bits(&p0, &p1, sizeof p0),
           "%s: dropout adds no bytes to the plan", c0->name);
  free(g1);
  free(g2);
  ot_model_free(m);
}

// ---------------------------------------------------- finite differences ----
static double fd_loss(ot_model *m) {
  ot_model_sync_bf16(m);
  ot_model_set_dropout_step(m, 5, 6);   // the same mask in every evaluation
  double loss = NAN;
  fwd(m, true, true, &loss);
  return loss;
}

static void test_fd(const ot_model_config *c) {
  ot_model *m = make(c, OT_RECOMPUTE_NONE, 11);
  if (!m) return;
  const size_t nf = ot_model_n_floats(m);
  float *g = th_falloc(nf), *w = ot_model_params(m);
  const double l0 = step(m, 5, 6, g);
  double l_off = NAN;
  fwd(m, true, false, &l_off);
  th_check(isfinite(l0) && l0 != l_off, "%s: dropout changes the training loss (%.9g vs %.9g)",
           c->name, l0, l_off);
  th_rng r = {99};
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    size_t n = p->numel;
    if (p->kind == OT_PT_EMBED || p->kind == OT_PT_LM_HEAD) n = (size_t)c->vocab * p->shape[1];
    if (strcmp(p->name, "final_logits_bias") == 0) n = (size_t)c->vocab;
    // directional derivatives along a random direction and along the gradient itself
    float *v = th_falloc(n), *w0 = th_falloc(n);
    memcpy(w0, w + p->offset, n * 4);
    double vn = 0.0, gn = 0.0;
    for (size_t j = 0; j < n; j++) {
      v[j] = th_normal(&r);
      vn += (double)v[j] * v[j];
      gn += (double)g[p->offset + j] * g[p->offset + j];
    }
    for (int d = 0; d < 2; d++) {
      double an = 0.0;
      for (size_t j = 0; j < n; j++) {
        v[j] = d ? (float)(g[p->offset + j] / sqrt(gn)) : (float)(v[j] / sqrt(vn));
        an += (double)g[p->offset + j] * v[j];
      }
      if (d && !(gn > 0.0)) break;
      const float h = d ? 2e-3f : 1e-2f;
      for (size_t j = 0; j < n; j++) w[p->offset + j] = w0[j] + h * v[j];
      const double lp = fd_loss(m);
      for (size_t j = 0; j < n; j++) w[p->offset + j] = w0[j] - h * v[j];
      const double lm = fd_loss(m);
      memcpy(w + p->offset, w0, n * 4);
      const double fd = (lp - lm) / (2.0 * h);
      th_check(fabs(fd - an) <= (d ? 1e-2 : 2e-3) * sqrt(gn) + 2e-6 / (2.0 * h),
               "%s (dropout %g/%g/%g): gradient of %s along %s: %.6g, finite differences %.6g",
               c->name, c->dropout, c->attn_dropout, c->act_dropout, p->name,
               d ? "itself" : "a random direction", an, fd);
    }
    free(v);
    free(w0);
  }
  ot_model_sync_bf16(m);
  free(g);
  ot_model_free(m);
}

// ------------------------------------------------------------ the masks ----
static int count_zeros(const float *x, size_t n) {
  int z = 0;
  for (size_t i = 0; i < n; i++) z += x[i] == 0.0f;
  return z;
}
static void check_rate(int zeros, size_t n, float p, const char *what, const char *name) {
  const double mean = p * (double)n, sd = sqrt((double)n * p * (1.0 - p));
  th_check(fabs(zeros - mean) <= 5.0 * sd + 1.0, "%s %s: %d of %zu dropped, expected %.1f +- %.1f",
           name, what, zeros, n, mean, 5.0 * sd);
}

// Decoder-only, f32: the embedding output against the keep rule at its counters; the
// zero fractions of the last MLP output and of every saved activation.
static void test_masks(void) {
  const float p = 0.25f;
  ot_model_config c = gpt2_cfg(p, 0.0f, p);
  c.d_model = 64;
  c.d_ff = 256;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  ot_model *m = make(&c, OT_RECOMPUTE_NONE, 4);
  if (!m) return;
  const size_t N = (size_t)DB * DT, NC = N * c.d_model;
  float *e0 = th_falloc(NC);
  th_check(fwd(m, true, false, NULL) == OT_OK, "eval forward");
  memcpy(e0, m->la[0].res, NC * 4);
  ot_model_set_dropout_step(m, 42, 7);
  th_check(fwd(m, true, true, NULL) == OT_OK, "train forward: %s", ot_last_error());
  const float *e1 = m->la[0].res, sc = ot_dropout_scale(p);
  const uint64_t off = ot__drop_offset(&m->ddrop, 0, OT__DROP_EMBED);
  bool exact = true;
  int dropped = 0;
  for (size_t i = 0; i < NC; i++) {   // element (b, t, ch): counter off + (b * max_seq + t) * C + ch
    const size_t C = (size_t)c.d_model, bt = i / C, b = bt / DT, t = bt % DT;
    const bool keep = ot_dropout_keep(m->ddrop.key, off + (b * (size_t)c.max_seq + t) * C + i % C, p);
    exact &= keep ? e1[i] == e0[i] * sc : e1[i] == 0.0f;
    dropped += !keep;
  }
  th_check(exact, "embedding output = the keep rule at its counters, kept values x * %g", sc);
  check_rate(dropped, NC, p, "embedding mask", c.name);
  check_rate(count_zeros(m->abuf, NC), NC, p, "last MLP output (residual branch)", c.name);
  for (int l = 0; l < c.n_layers; l++)
    check_rate(count_zeros(m->la[l].h, N * c.d_ff), N * c.d_ff, p, "activation", c.name);
  // different counters, seeds and sites: different masks
  float *e2 = th_falloc(NC);
  memcpy(e2, e1, NC * 4);
  ot_model_set_dropout_step(m, 42, 8);
  fwd(m, true, true, NULL);
  th_check(!same_bits(e2, m->la[0].res, NC * 4), "counter 7 vs 8: different embedding masks");
  ot_model_set_dropout_step(m, 43, 7);
  fwd(m, true, true, NULL);
  th_check(!same_bits(e2, m->la[0].res, NC * 4), "seed 42 vs 43: different embedding masks");
  ot_model_set_dropout_step(m, 42, 7);
  fwd(m, true, true, NULL);
  th_check(same_bits(e2, m->la[0].res, NC * 4), "the same stream again: the same mask");
  // distinct sites never share a counter range
  bool distinct = true;
  const ot__dropout d2[2] = {m->ddrop, {0.1f, 0.1f, 0.1f, 0, 1, 0}};
  uint64_t seen[2 * 3 * 7];
  int k = 0;
  for (int s = 0; s < 2; s++)
    for (int l = 0; l < 3; l++)
      for (int site = 0; site < 7; site++) {
        const uint64_t o = ot__drop_offset(&d2[s], l, site);
        for (int j = 0; j < k; j++) distinct &= seen[j] != o;
        seen[k++] = o;
      }
  th_check(distinct, "every (stack, layer, site) has its own counter range");
  free(e0);
  free(e2);
  ot_model_free(m);
}

// --------------------------------------------- threads, recompute, slots ----
static void test_recompute(const ot_model_config *c) {
  ot_model *m[3];
  double l[3];
  float *g[3];
  for (int rc = 0; rc < 3; rc++) {
    m[rc] = make(c, (ot_recompute)rc, 21);
    if (!m[rc]) return;
    g[rc] = th_falloc(ot_model_n_floats(m[rc]));
    l[rc] = step(m[rc], 3, 14, g[rc]);
  }
  const size_t n = ot_model_n_floats(m[0]);
  for (int rc = 1; rc < 3; rc++)
    th_check(same_bits(&l[0], &l[rc], sizeof l[0]) && same_bits(g[0], g[rc], n * 4),
             "%s, dropout on: recompute %s == none (loss %.17g vs %.17g, gradients bitwise)",
             c->name, ot_recompute_name((ot_recompute)rc), l[rc], l[0]);
  // want_grad = false: the logits of a model without dropout, exactly
  ot_model_config c0 = *c;
  c0.dropout = c0.attn_dropout = c0.act_dropout = 0.0f;
  ot_model *z = make(&c0, OT_RECOMPUTE_NONE, 21);
  if (z) {
    int ld = 0;
    const size_t nl = (size_t)(is_s2s(c) ? B_ * T_ : DB * DT) * ot_model_vocab_padded(c);
    th_check(fwd(z, false, false, NULL) == OT_OK && fwd(m[0], false, false, NULL) == OT_OK,
             "logits forwards");
    th_check(same_bits(ot_model_logits(z, &ld), ot_model_logits(m[0], &ld), nl * 4),
             "%s: want_grad = false gives the no-dropout logits exactly", c->name);
    ot_model_free(z);
  }
  // the same step with 1 thread
  const int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  float *g1 = th_falloc(n);
  double l1 = step(m[0], 3, 14, g1);
  omp_set_num_threads(nt);
  th_check(same_bits(&l1, &l[0], sizeof l1) && same_bits(g1, g[0], n * 4),
           "%s, dropout on: 1 thread == %d threads (bitwise)", c->name, nt);
  free(g1);
  for (int rc = 0; rc < 3; rc++) {
    free(g[rc]);
    ot_model_free(m[rc]);
  }
}

// Two micro-batch slots forwarded with their own counters, then backward in reverse:
// each slot's gradient is that of a lone step with its counter.
static void test_slots(void) {
  ot_model_config c = gpt2_cfg(0.2f, 0.2f, 0.2f);
  ot_run_config r = {DB, DT, OT_F32, OT_RECOMPUTE_SELECTIVE, -100, 0};
  ot_model_part part = ot_model_part_whole(&c);
  part.slots = 2;
  ot_model *m = NULL, *one = make(&c, OT_RECOMPUTE_SELECTIVE, 31);
  if (!th_check(ot_model_create_part(&m, &c, &r, &part) == OT_OK, "create 2 slots: %s",
                ot_last_error()) || !one)
    return;
  fill_weights(m, 31);
  const size_t n = ot_model_n_floats(m);
  float *ga = th_falloc(n), *gb = th_falloc(n), *gs = th_falloc(n);
  step(one, 9, 100, ga);
  step(one, 9, 101, gb);
  for (size_t i = 0; i < n; i++) gs[i] = ga[i] + gb[i];
  ot_model_zero_grad(m);
  ot_model_set_dropout_step(m, 9, 100);
  th_check(ot_model_forward_slot(m, 0, g_tok, g_lab, DB, DT, 0.0f, true, NULL) == OT_OK, "slot 0");
  ot_model_set_dropout_step(m, 9, 101);
  th_check(ot_model_forward_slot(m, 1, g_tok, g_lab, DB, DT, 0.0f, true, NULL) == OT_OK, "slot 1");
  th_check(ot_model_backward_slot(m, 1) == OT_OK && ot_model_backward_slot(m, 0) == OT_OK,
           "slot backwards");
  th_check_nerr(ot_model_grads(m), gs, n, 1e-6,
                "two slots keep their own masks: gradients = the two lone steps' sum");
  th_check(!same_bits(ga, gb, n * 4), "counters 100 and 101: different gradients");
  free(ga);
  free(gb);
  free(gs);
  ot_model_free(m);
  ot_model_free(one);
}

// A larger decoder-only model (rows past the kernels' threading thresholds), f32 and
// bf16: 1 thread = 2 threads (to rounding) and recompute full == none (bitwise), with dropout on.
static void test_threads_large(ot_dtype dt, float p) {
  ot_model_config c = gpt2_cfg(p, p, p);
  c.d_model = 128;
  c.d_ff = 512;
  c.max_seq = 64;
  enum { LB = 4, LT = 64 };
  int32_t *tok = malloc(sizeof(int32_t) * LB * LT * 2), *lab = tok + LB * LT;
  th_rng r = {5};
  for (int i = 0; i < LB * LT; i++) {
    tok[i] = (int32_t)(th_next(&r) % 50);
    lab[i] = (int32_t)(th_next(&r) % 50);
  }
  float *g[3] = {NULL, NULL, NULL};
  double l[3];
  size_t n = 0;
  const int nt = omp_get_max_threads();
  for (int k = 0; k < 3; k++) {   // 0: none, nt threads; 1: none, 1 thread; 2: full, nt threads
    ot_run_config run = {LB, LT, dt, k == 2 ? OT_RECOMPUTE_FULL : OT_RECOMPUTE_NONE, -100, 0};
    ot_model *m = NULL;
    if (!th_check(ot_model_create(&m, &c, &run) == OT_OK, "create: %s", ot_last_error())) break;
    fill_weights(m, 17);
    n = ot_model_n_floats(m);
    g[k] = th_falloc(n);
    if (k == 1) omp_set_num_threads(1);
    ot_model_set_dropout_step(m, 1, 2);
    th_check(ot_model_forward(m, tok, lab, LB, LT, 0.0f, true, &l[k]) == OT_OK &&
                 ot_model_backward(m) == OT_OK, "step: %s", ot_last_error());
    omp_set_num_threads(nt);
    memcpy(g[k], ot_model_grads(m), n * 4);
    ot_model_free(m);
  }
  if (g[2]) {
    // the masks are thread-independent (a different mask moves the loss by ~1e-2); the
    // GEMMs' blocking may depend on the thread count (oneDNN's AVX2 f32 kernels do), so the
    // loss agrees to rounding, and the backward's reductions differ within rounding too
    th_check(fabs(l[0] - l[1]) <= 1e-6 * fabs(l[0]),
             "%s B %d T %d C 128, dropout %g: loss with 1 thread (%.9g) = %d threads (%.9g) to 1e-6",
             ot_dtype_name(dt), LB, LT, p, l[1], nt, l[0]);
    th_check_nerr(g[1], g[0], n, dt == OT_F32 ? 1e-5 : 1e-2,
                  "%s B %d T %d C 128, dropout %g: gradients with 1 thread ~ %d threads",
                  ot_dtype_name(dt), LB, LT, p, nt);
    th_check(same_bits(&l[0], &l[2], sizeof l[0]) && same_bits(g[0], g[2], n * 4),
             "%s B %d T %d C 128, dropout %g: recompute full == none (bitwise)",
             ot_dtype_name(dt), LB, LT, p);
  }
  for (int k = 0; k < 3; k++) free(g[k]);
  free(tok);
}

// ------------------------------------------- layout-independent masks ----
// Encoder-decoder with every dropout on: the batch's two rows in one forward, or each
// in a forward of its own (row 1 padded to its own lengths, S 3 and T 3 instead of 5
// and 4), their sample indices given: the same loss and summed gradients (to rounding;
// a different mask moves them by far more). Given the wrong index, row 1 draws other
// masks and the gradients differ.
static double split_step(ot_model *m, int parts, const int64_t *s1, float *g) {
  static const int32_t src1[3] = {5, 9, 0}, len1[1] = {3}, tin1[3] = {49, 21, 6},
                       out1[3] = {21, 6, 0};
  static const int64_t r0[1] = {0}, both[2] = {0, 1};
  ot_model_set_dropout_step(m, 11, 3);
  ot_model_zero_grad(m);
  double sum = 0.0, l = NAN;
  ot_s2s_batch b[2] = {{B_, S_, T_, k_src, k_len, k_tgt, k_out, both},
                       {1, 3, 3, src1, len1, tin1, out1, s1}};
  if (parts == 2) b[0] = (ot_s2s_batch){1, S_, T_, k_src, k_len, k_tgt, k_out, r0};
  for (int k = 0; k < parts; k++) {
    th_check(ot_model_forward_s2s(m, &b[k], 7.0f, true, &l) == OT_OK &&
                 ot_model_backward(m) == OT_OK, "split step: %s", ot_last_error());
    sum += l;
  }
  memcpy(g, ot_model_grads(m), ot_model_n_floats(m) * sizeof(float));
  return sum;
}

static void test_split(void) {
  const ot_model_config c = s2s_cfg(true, 0.2f, 0.2f, 0.2f);
  ot_model *m = make(&c, OT_RECOMPUTE_NONE, 31);
  if (!m) return;
  const size_t n = ot_model_n_floats(m);
  float *g1 = th_falloc(n), *g2 = th_falloc(n), *g3 = th_falloc(n);
  const int64_t one[1] = {1};
  const double l1 = split_step(m, 1, NULL, g1), l2 = split_step(m, 2, one, g2);
  split_step(m, 2, NULL, g3);   // row 1 drawn as sample 0: wrong masks
  th_check(fabs(l1 - l2) <= 1e-6 * fabs(l1), "%s, dropout on: the rows in one forward (loss "
           "%.9g) or one per forward, padded to their own lengths (%.9g)", c.name, l1, l2);
  th_check_nerr(g2, g1, n, 1e-5, "%s, dropout on: gradients of the rows in one forward == one "
                "per forward (sample indices given)", c.name);
  th_check(th_nerr(g3, g1, n) > 1e-3, "%s, dropout on: row 1 given sample index 0 draws other "
           "masks (gradients differ by %.3g)", c.name, th_nerr(g3, g1, n));
  free(g1); free(g2); free(g3);
  ot_model_free(m);
}

// --------------------------------------------------- config and refusals ----
static void test_config(void) {
  ot_model_config c;
  const char *on[] = {"transformer-base", "transformer-big", "transformer-seed",
                      "transformer-small"};
  const char *off[] = {"gpt2", "llama-tiny", "tiny", "small", "transformer-tiny"};
  for (int i = 0; i < 4; i++) {
    ot_model_config_preset(&c, on[i]);
    th_check(c.dropout == 0.1f && c.attn_dropout == 0.0f && c.act_dropout == 0.0f,
             "%s: dropout 0.1 / 0 / 0", on[i]);
  }
  for (int i = 0; i < 5; i++) {
    ot_model_config_preset(&c, off[i]);
    th_check(c.dropout == 0.0f && c.attn_dropout == 0.0f && c.act_dropout == 0.0f,
             "%s: no dropout", off[i]);
  }
  const float bad[] = {-0.1f, 1.0f, 1.5f, NAN};
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < 4; i++) {
      ot_model_config_preset(&c, "tiny");
      float *x = f == 0 ? &c.dropout : f == 1 ? &c.attn_dropout : &c.act_dropout;
      *x = bad[i];
      const char *nm = f == 0 ? "dropout=" : f == 1 ? "attn_dropout=" : "act_dropout=";
      th_check_error(ot_model_config_validate(&c), OT_EINVAL, nm, nm);
      ot_run_config r = {1, 4, OT_F32, OT_RECOMPUTE_NONE, -1, 0};
      ot_model *m = NULL;
      th_check_error(ot_model_create(&m, &c, &r), OT_EINVAL, "[0, 1)", "create refuses");
      th_check(m == NULL, "no model on refusal");
    }
  // Marian's keys: the golden config (0 / 0 / 0) and one with other values
  th_check(ot_model_config_from_hf(&c, "tests/golden/hf_marian/config.json") == OT_OK &&
               c.dropout == 0.0f && c.attn_dropout == 0.0f && c.act_dropout == 0.0f,
           "hf_marian config: dropout 0 / 0 / 0 (%s)", ot_last_error());
  FILE *f = fopen("tests/golden/hf_marian/config.json", "rb");
  char buf[8192], out[8400];
  size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[len] = 0;
  // rewrite the three keys' values
  const char *keys[3] = {"\"dropout\": 0.0", "\"attention_dropout\": 0.0",
                         "\"activation_dropout\": 0.0"};
  const char *vals[3] = {"\"dropout\": 0.25", "\"attention_dropout\": 0.125",
                         "\"activation_dropout\": 0.5"};
  for (int k = 0; k < 3; k++) {
    char *at = strstr(buf, keys[k]);
    if (!th_check(at != NULL, "golden config has %s", keys[k])) return;
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, vals[k], at + strlen(keys[k]));
    memcpy(buf, out, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/ot_test_model_dropout_%d.json", (int)getpid());
  f = fopen(path, "wb");
  if (!th_check(f != NULL, "write %s", path)) return;
  fputs(buf, f);
  fclose(f);
  th_check(ot_model_config_from_hf(&c, path) == OT_OK && c.dropout == 0.25f &&
               c.attn_dropout == 0.125f && c.act_dropout == 0.5f,
           "config.json dropout keys read: %g / %g / %g", c.dropout, c.attn_dropout,
           c.act_dropout);
  remove(path);
}

int main(void) {
  th_rng r = {1234};
  for (int i = 0; i < DB * DT; i++) {
    g_tok[i] = (int32_t)(th_next(&r) % 50);
    g_lab[i] = i % 7 == 3 ? -100 : (int32_t)(th_next(&r) % 50);
  }
  test_config();
  const ot_model_config zero[] = {gpt2_cfg(0, 0, 0), llama_cfg(0, 0, 0), s2s_cfg(true, 0, 0, 0),
                                  s2s_cfg(false, 0, 0, 0)};
  for (int i = 0; i < 4; i++) test_zero(&zero[i]);
  const ot_model_config on[] = {gpt2_cfg(0.2f, 0.2f, 0.2f), llama_cfg(0.2f, 0.2f, 0.2f),
                                s2s_cfg(true, 0.2f, 0.2f, 0.2f), s2s_cfg(false, 0.2f, 0.2f, 0.2f),
                                s2s_cfg(true, 0.3f, 0.0f, 0.0f), gpt2_cfg(0.0f, 0.3f, 0.0f)};
  for (int i = 0; i < 6; i++) test_fd(&on[i]);
  for (int i = 0; i < 4; i++) test_recompute(&on[i]);
  test_masks();
  test_slots();
  test_split();
  test_threads_large(OT_F32, 0.1f);
  test_threads_large(OT_BF16, 0.1f);
  test_threads_large(OT_F32, 0.0f);
  return th_finish();
}
