// Model-level int8 calibration and quantization-aware training:
//  - QAT forward = the forward of a model whose matrices hold the scalar reference's
//    fake-quantized weights (logits, loss), for GPT-2 and Llama shapes, per row and
//    per group; its backward is straight-through: the gradients equal that model's
//    (the unquantized-weight gradient formula at the fake-quantized weights); the
//    masters stay unquantized;
//  - a tiny QAT training run converges, ot_qmodel_from_model with its group stores
//    exactly the weights its forward ran with, and the int8 engine scores held-out
//    text as its fake-quantized forward does;
//  - QAT as a fine-tune: a resume of an f32 checkpoint with QAT on continues the run on
//    the fake-quantized weights of its masters and writes a QAT checkpoint elsewhere;
//    a new run from a checkpoint's (or a Hugging Face directory's) weights, fresh optimizer;
//  - calibrated PTQ (ot_qmodel_calibrate) on models with outlier activation channels:
//    the int8 engine's logits are closer to f32 than plain PTQ's; the model's own
//    weights are untouched; bad input.
#include "harness.h"
#include "model_common.h"
#include "train_common.h"
#include "ot/infer.h"
#include "ot/quant.h"
#include <math.h>

static bool quantized(const ot_param *p) {
  return p->ndim == 2 && (p->kind == OT_PT_EMBED || p->kind == OT_PT_MATRIX || p->kind == OT_PT_MATRIX_RES ||
                          p->kind == OT_PT_LM_HEAD);
}

static void random_tokens(int32_t *t, size_t n, int V, uint64_t seed) {
  th_rng r = {seed};
  for (size_t i = 0; i < n; i++) t[i] = (int32_t)(th_next(&r) % (uint64_t)V);
}

// ------------------------------------------------------------------- QAT ----
static void test_qat_fwd_bwd(const ot_model_config *c, int group) {
  const int B = 2, T = 12, N = B * T;
  ot_model *m = tm_make(c, B, T, OT_F32, 5), *r = tm_make(c, B, T, OT_F32, 5);
  if (!m || !r) return;
  const size_t nf = ot_model_n_floats(m);
  float *w0 = th_falloc(nf);
  memcpy(w0, ot_model_params(m), nf * sizeof(float));
  for (int i = 0; i < ot_model_param_count(r); i++) {   // r: the reference's fake-quantized weights
    const ot_param *p = ot_model_param_at(r, i);
    float *x = ot_model_params(r) + p->offset;
    if (quantized(p))
      th_check(ot_ref_qweight_fake_quant(x, x, (int)p->shape[0], (int)p->shape[1], group, NULL) == OT_OK, "ref");
  }
  th_check(ot_model_set_qat(m, group) == OT_OK && ot_model_qat_group(m) == group, "set_qat %s g%d: %s", c->name,
           group, ot_last_error());
  int32_t *tok = th_alloc((size_t)N * 4), *tgt = th_alloc((size_t)N * 4);
  random_tokens(tok, (size_t)N, c->vocab, 9);
  random_tokens(tgt, (size_t)N, c->vocab, 10);
  double la = 0, lb = 0;
  int ld = 0;
  // logits first (no targets: the logits stay logits), then loss and gradients
  th_check(ot_model_forward(m, tok, NULL, B, T, 0, false, NULL) == OT_OK, "fwd: %s", ot_last_error());
  const float *L = ot_model_logits(m, &ld);
  float *lm = th_falloc((size_t)N * ld);
  memcpy(lm, L, sizeof(float) * (size_t)N * ld);
  th_check(ot_model_forward(r, tok, NULL, B, T, 0, false, NULL) == OT_OK, "ref fwd");
  const double le = th_nerr(ot_model_logits(r, &ld), lm, (size_t)N * ld);
  th_check(le <= 1e-6, "%s g%d: QAT logits vs the reference fake-quantized model: nerr %.3g", c->name, group, le);
  ot_model_zero_grad(m);
  ot_model_zero_grad(r);
  th_check(ot_model_forward(m, tok, tgt, B, T, 0, true, &la) == OT_OK && ot_model_backward(m) == OT_OK, "bwd");
  th_check(ot_model_forward(r, tok, tgt, B, T, 0, true, &lb) == OT_OK && ot_model_backward(r) == OT_OK, "ref bwd");
  th_check(fabs(la - lb) <= 1e-6 * fabs(lb), "%s g%d: loss %.9g vs %.9g", c->name, group, la, lb);
  const double ge = th_nerr(ot_model_grads(m), ot_model_grads(r), nf);
  th_check(ge <= 1e-6, "%s g%d: straight-through gradients vs the gradients at the fake-quantized weights: "
           "nerr %.3g", c->name, group, ge);
  th_check(!memcmp(w0, ot_model_params(m), nf * sizeof(float)), "the masters stay unquantized");
  // plain PTQ of the same masters differs from them (the test would see no quantization otherwise)
  th_check(th_nerr(ot_model_params(r), w0, nf) > 1e-4, "quantization changes the weights");
  th_check(ot_model_set_qat(m, -1) == OT_OK && ot_model_qat_group(m) == -1, "QAT off");
  th_check(ot_model_forward(m, tok, NULL, B, T, 0, false, NULL) == OT_OK &&
           th_nerr(ot_model_logits(m, &ld), lm, (size_t)N * ld) > 1e-5, "QAT off: the f32 forward again");
  free(w0); free(tok); free(tgt); free(lm);
  ot_model_free(m);
  ot_model_free(r);
}

// One held-out sequence's logits at its last token through the int8 engine of q (taken over).
static void engine_logits(ot_qmodel *q, const int32_t *seq, int n, float *out, int V) {
  ot_engine_config ec = {0};
  ec.max_seqs = 1;
  ot_engine *e = NULL;
  if (!th_check(ot_engine_create_q(&e, q, &ec) == OT_OK, "engine: %s", ot_last_error())) return;
  ot_request rq = {seq, n, {0.0f, 0, 1.0f, 1}, 1, -1};
  int id;
  ot_engine_event ev;
  if (th_check(ot_engine_add(e, &rq, &id, &ev) == OT_OK, "add: %s", ot_last_error()))
    memcpy(out, ot_engine_logits(e, id, NULL), sizeof(float) * V);
  ot_engine_free(e);
}

// The int8 export of m (ot_qmodel_from_model with group) stores exactly the weights m's QAT
// forward runs with, and the int8 engine scores held-out text as that forward does.
static void check_export(ot_model *m, int group, const char *what) {
  ot_qmodel *q = NULL;
  th_check(ot_qmodel_from_model(&q, m, OT_QW_INT8, group) == OT_OK, "%s: export: %s", what, ot_last_error());
  // the export's matrices are the fake-quantized masters, bit for bit
  size_t bad = 0;
  for (int i = 0; q && i < q->n; i++) {
    const ot_qtensor *x = &q->t[i];
    if (x->w.kind != OT_QW_INT8) continue;
    const ot_param *p = ot_model_param_at(m, ot_model_param_find(m, x->name));
    const size_t n = (size_t)x->w.rows * x->w.cols;
    float *a = th_falloc(n), *b = th_falloc(n);
    ot_qweight_dequantize(&x->w, a);
    ot_ref_qweight_fake_quant(b, ot_model_params(m) + p->offset, x->w.rows, x->w.cols, group, NULL);
    for (size_t k = 0; k < n; k++) bad += a[k] != b[k];
    free(a); free(b);
  }
  th_check(q && !bad, "%s: %zu exported weights differ from the fake-quantized forward's", what, bad);
  // held-out logits: the QAT model's forward against the int8 engine; a prompt of
  // fewer than OT_QLINEAR_I8_MIN tokens, so the engine's linears take the GEMV with
  // f32 activations (from 4 rows on, the int8 GEMM quantizes them: tested in test_quant_i8)
  const int T = OT_QLINEAR_I8_MIN - 1, V = 50;
  int32_t seq[16];
  random_tokens(seq, 16, V, 77);
  int ld = 0;
  th_check(ot_model_forward(m, seq, NULL, 1, T, 0, false, NULL) == OT_OK, "fwd: %s", ot_last_error());
  const float *L = ot_model_logits(m, &ld);
  float want[50], got[50];
  memcpy(want, L + (size_t)(T - 1) * ld, sizeof want);
  if (q) engine_logits(q, seq, T, got, V);
  const double e = th_nerr(got, want, (size_t)V);
  th_check(e <= 1e-5, "%s: int8 engine logits vs the QAT forward: nerr %.3g", what, e);
}

static void test_qat_train_export(int group) {
  char dir[64];
  if (!make_data(dir, sizeof dir, 50, 20000, 2000)) return;
  ot_train_config c = tiny_config(dir);
  c.qat = true;
  c.qat_group = group;
  c.steps = 40;
  ot_trainer *t = make_trainer(&c);
  if (!t) { remove_tree(dir); return; }
  double first = 0, last = 0;
  for (int s = 0; s < (int)c.steps; s++) {
    ot_step_info info;
    if (!th_check(ot_trainer_step(t, &info) == OT_OK, "step: %s", ot_last_error())) break;
    if (s == 0) first = info.loss;
    last = info.loss;
  }
  printf("QAT g%d: loss %.4f -> %.4f in %d steps\n", group, first, last, (int)c.steps);
  th_check(last < first - 1.0, "QAT g%d converges: loss %.4f -> %.4f", group, first, last);
  char what[32];
  snprintf(what, sizeof what, "QAT g%d", group);
  check_export(ot_trainer_model(t), group, what);
  ot_trainer_free(t);
  remove_tree(dir);
}

// QAT as a fine-tune of a trained f32 run (`ot train --resume F32 --qat --out NEW`): the
// resumed trainer's masters are the checkpoint's, its fake-quantized copy is made from them
// (the export matches its forward before any step), its steps continue the run's count
// and differ from the f32 continuation's; the new checkpoint goes to NEW (the f32 run is
// untouched), records qat / qat-group, and a trainer made from its settings runs the
// forward that its int8 export computes. --steps below the checkpoint's is refused.
static void test_qat_resume(int group) {
  char dir[64], ck[600], ck2[600], p[700];
  if (!make_data(dir, sizeof dir, 50, 20000, 2000)) return;
  ot_train_config c = tiny_config(dir);
  c.steps = 12;
  snprintf(c.out, sizeof c.out, "%s/f32", dir);
  ot_trainer *t = make_trainer(&c), *q = NULL, *e = NULL;
  ot_step_info si;
  for (int s = 0; t && s < (int)c.steps; s++) th_check(ot_trainer_step(t, &si) == OT_OK, "f32 step");
  if (!t || !th_check(ot_trainer_checkpoint(t, ck, sizeof ck) == OT_OK, "checkpoint: %s", ot_last_error()))
    goto out;
  ot_train_config cq = c;
  cq.qat = true;
  cq.qat_group = group;
  cq.steps = 16;
  snprintf(cq.out, sizeof cq.out, "%s/qat", dir);
  q = make_trainer(&cq);
  if (!q || !th_check(ot_trainer_load(q, ck, false) == OT_OK, "resume with QAT: %s", ot_last_error())) goto out;
  ot_model *mq = ot_trainer_model(q), *mf = ot_trainer_model(t);
  th_check(ot_trainer_steps_done(q) == 12 && ot_model_qat_group(mq) == group, "resumed at step %lld, QAT group %d",
           (long long)ot_trainer_steps_done(q), ot_model_qat_group(mq));
  th_check(!memcmp(ot_model_params(mq), ot_model_params(mf), ot_model_n_floats(mf) * sizeof(float)),
           "the resumed masters are the f32 checkpoint's");
  char what[48];
  snprintf(what, sizeof what, "QAT g%d resumed from f32", group);
  check_export(mq, group, what);
  // the first step after the checkpoint: same batch, same optimizer state, QAT on or off
  ot_step_info sq, sf;
  th_check(ot_trainer_step(q, &sq) == OT_OK && ot_trainer_step(t, &sf) == OT_OK, "step 13");
  printf("QAT g%d fine-tune from an f32 checkpoint: step 13 loss %.6f (f32 continuation %.6f)\n", group, sq.loss,
         sf.loss);
  th_check(sq.step == 13 && sq.loss != sf.loss && fabs(sq.loss - sf.loss) < 0.05 * sf.loss,
           "step %lld: QAT loss %.6f vs f32 %.6f (quantized, and close)", (long long)sq.step, sq.loss, sf.loss);
  for (int s = 13; s < (int)cq.steps; s++) th_check(ot_trainer_step(q, &si) == OT_OK, "QAT step");
  if (!th_check(ot_trainer_checkpoint(q, ck2, sizeof ck2) == OT_OK, "QAT checkpoint: %s", ot_last_error())) goto out;
  snprintf(p, sizeof p, "%s/f32/step_000016", dir);
  th_check(strstr(ck2, "/qat/step_000016") && !file_exists(p), "the QAT checkpoint %s is in its own run", ck2);
  // a trainer from the new checkpoint's settings: QAT with its group, the forward its export computes
  ot_settings *l = calloc(1, sizeof *l);
  ot_train_config ce;
  ot_train_config_default(&ce);
  th_check(l && ot_ckpt_read_config(ck2, l) == OT_OK && ot_train_config_apply(&ce, l, NULL) == OT_OK, "settings: %s",
           ot_last_error());
  free(l);
  th_check(ce.qat && ce.qat_group == group, "the checkpoint records qat %d qat-group %d", ce.qat, ce.qat_group);
  ce.threads = 1;
  e = make_trainer(&ce);
  if (e && th_check(ot_trainer_load(e, ck2, true) == OT_OK, "load: %s", ot_last_error())) {
    snprintf(what, sizeof what, "the QAT g%d fine-tune's checkpoint", group);
    check_export(ot_trainer_model(e), group, what);
  }
  // --steps is the total: below the checkpoint's step is refused, equal trains nothing
  ot_train_config cr = cq;
  snprintf(cr.resume, sizeof cr.resume, "%s", ck);
  cr.steps = 4;
  FILE *sink = tmpfile();
  th_check_error(ot_train_run(&cr, sink, NULL, NULL), OT_EINVAL, "at step 12 and --steps is 4: --steps counts from "
                 "the run's start (--steps 16 trains 4 more)", "resume with --steps below the checkpoint's");
  cr.steps = 12;
  char text[8192] = "";
  if (sink && th_check(ot_train_run(&cr, sink, NULL, NULL) == OT_OK, "resume at its step: %s", ot_last_error())) {
    rewind(sink);
    text[fread(text, 1, sizeof text - 1, sink)] = 0;
  }
  th_check(strstr(text, "nothing to train, no checkpoint written") != NULL, "a finished run says so: %.300s", text);
  if (sink) fclose(sink);
out:
  ot_trainer_free(t);
  ot_trainer_free(q);
  ot_trainer_free(e);
  remove_tree(dir);
}

// QAT as a fine-tune in a new run (`ot train --init-from DIR --qat`): ot_train_run with
// init_from a checkpoint, or the same weights as a Hugging Face directory, trains from
// those weights with a fresh optimizer from step 0: its checkpoint holds the weights of a
// trainer that loaded them (weights only) and stepped, the export equals its forward;
// init_from with resume is refused.
static void test_qat_init_from(int group) {
  char dir[64], ck[600], hf[600], ft[1100], p[1400], text[8192];
  if (!make_data(dir, sizeof dir, 50, 20000, 2000)) return;
  ot_train_config c = tiny_config(dir);
  c.steps = 30;
  snprintf(c.out, sizeof c.out, "%s/f32", dir);
  ot_trainer *t = make_trainer(&c);
  ot_step_info si = {0};
  for (int s = 0; t && s < (int)c.steps; s++) th_check(ot_trainer_step(t, &si) == OT_OK, "f32 step");
  const double trained = si.loss;
  snprintf(hf, sizeof hf, "%s/hf", dir);
  snprintf(p, sizeof p, "%s/model.safetensors", hf);
  if (!t || !th_check(ot_trainer_checkpoint(t, ck, sizeof ck) == OT_OK && mkdir(hf, 0755) == 0 &&
                      ot_model_export(ot_trainer_model(t), p) == OT_OK, "checkpoint, HF export: %s", ot_last_error()))
    goto out;
  snprintf(p, sizeof p, "cp '%s/config.json' '%s/'", ck, hf);
  th_check(system(p) == 0, "config.json of the HF directory");
  for (int k = 0; k < 2; k++) {
    ot_train_config cf = c;
    cf.qat = true;
    cf.qat_group = group;
    cf.steps = 4;
    cf.lr = 1e-3f;
    cf.warmup = 0;
    cf.lr_decay = OT_LR_CONSTANT;
    snprintf(cf.out, sizeof cf.out, "%s/ft%d", dir, k);
    ot_train_config ch = cf;   // by hand: the weights loaded into a fresh trainer
    snprintf(cf.init_from, sizeof cf.init_from, "%s", k ? hf : c.out);
    ot_train_config hc;   // from an HF directory, `ot train` takes the model of its config.json
    if (k && th_check(ot_ckpt_train_config(hf, &hc) == OT_OK && !strcmp(hc.model.name, "hf-gpt2"),
                      "HF config: %s", ot_last_error()))
      cf.model = ch.model = hc.model;
    FILE *sink = tmpfile();
    text[0] = 0;
    if (sink && th_check(ot_train_run(&cf, sink, NULL, NULL) == OT_OK, "run from %s: %s", cf.init_from,
                         ot_last_error())) {
      rewind(sink);
      text[fread(text, 1, sizeof text - 1, sink)] = 0;
    }
    if (sink) fclose(sink);
    th_check(strstr(text, "weights from ") && strstr(text, k ? "/hf;" : "/f32/step_000030;"),
             "the run says where its weights are from: %.300s", text);
    ot_trainer *e = make_trainer(&ch), *g = make_trainer(&ch);
    ot_step_info s1 = {0};
    if (e && th_check(ot_trainer_load(e, k ? hf : ck, true) == OT_OK, "load: %s", ot_last_error()))
      for (int s = 0; s < 4; s++) th_check(ot_trainer_step(e, s ? &si : &s1) == OT_OK, "step");
    snprintf(ft, sizeof ft, "%s/step_000004", cf.out);
    if (e && g && th_check(ot_trainer_load(g, ft, true) == OT_OK, "%s: %s", ft, ot_last_error())) {
      ot_model *mg = ot_trainer_model(g), *me = ot_trainer_model(e);
      th_check(!memcmp(ot_model_params(mg), ot_model_params(me), ot_model_n_floats(me) * sizeof(float)),
               "%s: the weights of a fresh optimizer's 4 steps from the loaded weights", ft);
      th_check(s1.loss < trained + 0.2, "step 1 starts from the trained model: loss %.4f (trained %.4f)", s1.loss,
               trained);
      char what[64];
      snprintf(what, sizeof what, "QAT g%d fine-tune from %s", group, k ? "HF" : "a checkpoint");
      check_export(mg, group, what);
      // its checkpoint reads back (the model of an HF directory is stored as hf-gpt2 + shape keys)
      ot_train_config rb;
      const ot_model_config *a = &rb.model, *b = &ch.model;
      th_check(ot_ckpt_train_config(ft, &rb) == OT_OK && !strcmp(a->name, b->name) && a->vocab == b->vocab &&
               a->vocab_pad == b->vocab_pad && a->d_model == b->d_model && a->n_layers == b->n_layers &&
               a->n_heads == b->n_heads && a->d_ff == b->d_ff && a->max_seq == b->max_seq && a->mlp == b->mlp &&
               a->tied == b->tied && a->bias == b->bias && a->eps == b->eps && a->arch == b->arch,
               "%s: its settings read back to the same model (%s): %s", ft, a->name, ot_last_error());
    }
    ot_trainer_free(e);
    ot_trainer_free(g);
    if (k) {
      snprintf(cf.resume, sizeof cf.resume, "%s", ck);
      th_check_error(ot_train_run(&cf, stdout, NULL, NULL), OT_EINVAL, "give one of them", "--init-from --resume");
    }
  }
out:
  ot_trainer_free(t);
  remove_tree(dir);
}

// ----------------------------------------------------------- calibration ----
// Outlier activation channels without changing the function: in every block, the norm
// gains and biases of channels k % 7 == 3 times 12 and the columns k of the matrix the
// norm feeds (QKV after norm 1, the MLP input after norm 2) divided by 12 (the
// situation of trained LLMs that AWQ addresses: large activations meet small weights).
static void inject_outliers(ot_model *m) {
  const ot_model_config *c = ot_model_config_of(m);
  float *w = ot_model_params(m);
  for (int l = 0; l < c->n_layers; l++) {
    int nw = 0, nb = 0, nm = 0, gi[2] = {-1, -1}, bi[2] = {-1, -1}, mi[2] = {-1, -1};
    for (int i = 0; i < ot_model_param_count(m); i++) {   // in block order: norm 1, QKV, ..., norm 2, MLP in
      const ot_param *p = ot_model_param_at(m, i);
      if (p->layer != l) continue;
      if (p->kind == OT_PT_NORM_W && nw < 2) gi[nw++] = i;
      if (p->kind == OT_PT_NORM_B && nb < 2) bi[nb++] = i;
      if (p->kind == OT_PT_MATRIX && nm < 2) mi[nm++] = i;
    }
    for (int j = 0; j < 2; j++) {
      const ot_param *pm = ot_model_param_at(m, mi[j]);
      for (int k = 3; k < c->d_model; k += 7) {
        w[ot_model_param_at(m, gi[j])->offset + k] *= 12.0f;
        if (bi[j] >= 0) w[ot_model_param_at(m, bi[j])->offset + k] *= 12.0f;
        for (int n = 0; n < pm->shape[0]; n++) w[pm->offset + (size_t)n * pm->shape[1] + k] /= 12.0f;
      }
    }
  }
}

static void compare_calibrated(const ot_model_config *c, int group) {
  const int B = 4, T = 16, NB = 4, V = c->vocab;
  ot_model *m = tm_make(c, B, T, OT_F32, 31);
  if (!m) return;
  inject_outliers(m);
  const size_t nf = ot_model_n_floats(m);
  float *w0 = th_falloc(nf);
  memcpy(w0, ot_model_params(m), nf * sizeof(float));
  int32_t *cal = th_alloc((size_t)NB * B * T * 4);
  random_tokens(cal, (size_t)NB * B * T, V, 3);
  ot_qcalib_config cc = {group, 0, {0, 0, 0.0f, false}, false};
  ot_qcalib_report rep;
  ot_qmodel *qc = NULL;
  if (!th_check(ot_qmodel_calibrate(&qc, m, cal, NB, &cc, &rep) == OT_OK, "calibrate %s g%d: %s", c->name, group,
                ot_last_error()))
    return;
  th_check(!memcmp(w0, ot_model_params(m), nf * sizeof(float)), "the model's weights are untouched");
  th_check(rep.matrices == 4 * c->n_layers + 1 && rep.rel <= rep.rel_plain && rep.scaled > 0,
           "report: %d matrices, %d scaled, rel %.4g vs %.4g", rep.matrices, rep.scaled, rep.rel, rep.rel_plain);
  double ec = 0, ep = 0;
  const int NS = 8;
  float *f = th_falloc((size_t)V), *a = th_falloc((size_t)V), *b = th_falloc((size_t)V);
  for (int s = 0; s < NS; s++) {
    int32_t seq[12];
    random_tokens(seq, 12, V, 100 + (uint64_t)s);
    ot_qmodel *q32 = NULL, *qp = NULL, *qcc = NULL;
    ot_qmodel_from_model(&q32, m, OT_QW_F32, 0);
    ot_qmodel_from_model(&qp, m, OT_QW_INT8, group);
    if (s == NS - 1) qcc = qc;
    else {   // the calibrated model again (the engine takes it over): same input, same result
      ot_qcalib_report r2;
      ot_qmodel_calibrate(&qcc, m, cal, NB, &cc, &r2);
    }
    engine_logits(q32, seq, 12, f, V);
    engine_logits(qp, seq, 12, a, V);
    engine_logits(qcc, seq, 12, b, V);
    for (int v = 0; v < V; v++) {
      ep += (double)(a[v] - f[v]) * (a[v] - f[v]);
      ec += (double)(b[v] - f[v]) * (b[v] - f[v]);
    }
  }
  printf("calibrated %s g%d: %d/%d matrices scaled, layer output error %.4g%% -> %.4g%%, held-out logits "
         "MSE vs f32 %.4g (plain) -> %.4g (calibrated)\n", c->name, group, rep.scaled, rep.matrices,
         100 * rep.rel_plain, 100 * rep.rel, ep / (NS * V), ec / (NS * V));
  th_check(ec < 0.5 * ep, "%s g%d: calibrated logits error %.4g vs plain %.4g", c->name, group, ec, ep);
  free(f); free(a); free(b); free(w0); free(cal);
  ot_model_free(m);
}

static void test_bad_input(void) {
  ot_model_config c = tm_cfg_gpt2(16);
  int32_t tok[64] = {0};
  ot_qmodel *q = NULL;
  ot_qcalib_config cc = {0, 0, {0, 0, 0.0f, false}, false};
  ot_model *m = tm_make(&c, 4, 16, OT_BF16, 1);
  if (m) th_check_error(ot_qmodel_calibrate(&q, m, tok, 1, &cc, NULL), OT_EINVAL, "dt f32", "bf16 model");
  if (m) th_check_error(ot_model_set_qat(m, 0), OT_EUNSUPPORTED, "f32", "QAT on bf16");
  ot_model_free(m);
  m = tm_make(&c, 4, 16, OT_F32, 1);
  cc.group = 64;
  if (m) th_check_error(ot_qmodel_calibrate(&q, m, tok, 1, &cc, NULL), OT_EINVAL, "not a multiple of group=64",
                        "group 64, C 32");
  cc.group = 0;
  tok[5] = 50;
  if (m) th_check_error(ot_qmodel_calibrate(&q, m, tok, 1, &cc, NULL), OT_EINVAL, "outside the vocabulary",
                        "token 50");
  if (m) th_check_error(ot_model_set_qat(m, 64), OT_EINVAL, "not a multiple of group=64", "QAT group 64");
  if (m) th_check_error(ot_model_set_qat(m, 48), OT_EINVAL, "group=48", "QAT group 48");
  th_check(q == NULL, "no model on failure");
  ot_model_free(m);
  ot_train_config tc;
  ot_train_config_default(&tc);
  tc.qat = true;
  tc.dtype = OT_BF16;
  th_check_error(ot_train_config_resolve(&tc), OT_EINVAL, "--qat trains in f32", "--qat --dtype bf16");
  ot_train_config_default(&tc);
  tc.qat_group = 16;
  th_check_error(ot_train_config_resolve(&tc), OT_EINVAL, "--qat-group 16", "--qat-group 16");
}

int main(void) {
  ot_model_config g = tm_cfg_gpt2(16), l = tm_cfg_llama(16);
  test_qat_fwd_bwd(&g, 0);
  test_qat_fwd_bwd(&g, 32);
  test_qat_fwd_bwd(&l, 32);
  test_qat_train_export(0);
  test_qat_train_export(32);
  test_qat_resume(0);
  test_qat_resume(32);
  test_qat_init_from(0);
  test_qat_init_from(32);
  compare_calibrated(&g, 0);
  compare_calibrated(&g, 32);
  compare_calibrated(&l, 0);
  test_bad_input();
  return th_finish();
}
