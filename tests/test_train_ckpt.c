// Checkpoint and run tests on the tiny model and synthetic shards:
//  - resume is bit-exact (cosine and inverse_sqrt schedules): 6 steps straight vs 3 + save + load + 3 (losses,
//    final weights and AdamW moments bitwise equal), f32, bf16 and with
//    gradient accumulation and a skipped step in the first half
//  - the files load back: model.safetensors has the Hugging Face names and
//    ot_model_load_hf reads the directory (config.json) to the same weights;
//    optimizer.safetensors holds exp_avg / exp_avg_sq per parameter and the
//    metadata (step, data position, settings that rebuild the same config)
//  - bad checkpoints are rejected with their reason: weights from another
//    step (checksum), another model shape (the key named), missing files,
//    a 'latest' naming nothing
//  - ot_train_run: log, SVG, checkpoints with latest + keep; a resumed run
//    ends with the same weights and loss as the uninterrupted one, and its
//    log holds each step once
#include "harness.h"
#include "train_common.h"
#include <sys/stat.h>

#define V 50

static bool same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void run_steps(ot_trainer *t, int n, double *losses) {
  for (int i = 0; i < n; i++) {
    ot_step_info st;
    if (ot_trainer_step(t, &st) != OT_OK) { th_check(false, "step: %s", ot_last_error()); return; }
    losses[i] = st.loss;
  }
}

static void test_resume(const char *data, const char *tmp, ot_dtype dt, int accum, bool skip,
                        ot_lr_decay decay) {
  ot_train_config c = tiny_config(data);
  c.dtype = dt;
  c.grad_accum = accum;
  c.steps = 6;
  c.warmup = 2;
  c.lr_decay = decay;
  char what[96];
  snprintf(what, sizeof what, "%s accum %d%s %s", ot_dtype_name(dt), accum, skip ? " skip" : "",
           ot_lr_decay_name(decay));
  ot_trainer *a = make_trainer(&c), *b = make_trainer(&c), *r = make_trainer(&c);
  if (!a || !b || !r) goto out;
  double la[6], lb[6];
  ot_model *ma = ot_trainer_model(a), *mb = ot_trainer_model(b), *mr = ot_trainer_model(r);
  const size_t n = ot_model_n_floats(ma);
  if (skip) {   // a skipped step in the first half: the counters must survive the checkpoint
    ot_model *ms[2] = {ma, mb};
    ot_trainer *ts[2] = {a, b};
    for (int k = 0; k < 2; k++) {
      float *p = ot_model_params(ms[k]), sv = p[100];
      p[100] = INFINITY;
      ot_step_info st;
      ot_trainer_step(ts[k], &st);
      th_check(st.skipped, "%s: the poisoned step is skipped", what);
      p[100] = sv;
    }
  }
  int s0 = skip ? 1 : 0;
  run_steps(a, 6 - s0, la + s0);
  run_steps(b, 3 - s0, lb + s0);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/ck_%s_%d_%d_%d", tmp, ot_dtype_name(dt), accum, skip, (int)decay);
  th_check(ot_trainer_save(b, dir) == OT_OK, "%s: save: %s", what, ot_last_error());
  th_check(ot_trainer_load(r, dir, false) == OT_OK, "%s: load: %s", what, ot_last_error());
  th_check(ot_trainer_steps_done(r) == 3 && ot_trainer_updates(r) == 3 - s0, "%s: counters restored (%lld, %lld)",
           what, (long long)ot_trainer_steps_done(r), (long long)ot_trainer_updates(r));
  th_check(same_floats(ot_model_params(mr), ot_model_params(mb), n), "%s: weights restored bitwise", what);
  if (dt == OT_BF16 && ot_model_params_bf16(mr))
    th_check(memcmp(ot_model_params_bf16(mr), ot_model_params_bf16(mb), n * 2) == 0, "%s: bf16 copy restored", what);
  if (decay == OT_LR_INVSQRT) {   // the resumed run continues the curve: step 3 at lr sqrt(2 / 4)
    ot_step_info st;
    th_check(ot_trainer_step(r, &st) == OT_OK && st.lr == (float)((double)c.lr * sqrt(0.5)),
             "%s: the resumed step 3 runs at lr sqrt(2/4) (%g)", what, st.lr);
    lb[3] = st.loss;
    run_steps(r, 2, lb + 4);
  } else {
    run_steps(r, 3, lb + 3);
  }
  bool same = true;
  for (int i = s0; i < 6; i++) same &= memcmp(&la[i], &lb[i], sizeof la[i]) == 0;
  th_check(same, "%s: 6 straight vs 3 + resume + 3: bitwise-identical losses (%.7f / %.7f at step 6)", what, la[5],
           lb[5]);
  th_check(same_floats(ot_model_params(ma), ot_model_params(mr), n), "%s: final weights bitwise equal", what);
  th_check(same_floats(ot_trainer_moment(a, 0), ot_trainer_moment(r, 0), n) &&
               same_floats(ot_trainer_moment(a, 1), ot_trainer_moment(r, 1), n),
           "%s: final AdamW moments bitwise equal", what);
  th_check(memcmp(&la[3], &la[2], sizeof la[2]) != 0, "%s: losses do change step to step", what);
out:
  ot_trainer_free(a);
  ot_trainer_free(b);
  ot_trainer_free(r);
}

static void test_files(const char *data, const char *tmp) {
  ot_train_config c = tiny_config(data);
  c.steps = 4;
  ot_trainer *t = make_trainer(&c);
  if (!t) return;
  double l[2];
  run_steps(t, 2, l);
  char dir[256], p[512];
  snprintf(dir, sizeof dir, "%s/files", tmp);
  th_check(ot_trainer_save(t, dir) == OT_OK, "save: %s", ot_last_error());
  ot_model *m = ot_trainer_model(t);

  // weights: HF names, and a Hugging Face loader reads the directory
  ot_st_file *f = NULL;
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  th_check(ot_st_open(&f, p) == OT_OK, "open %s: %s", p, ot_last_error());
  if (f) {
    th_check(ot_st_find(f, "wte.weight") && ot_st_find(f, "h.1.mlp.c_fc.weight") && ot_st_find(f, "ln_f.bias"),
             "model.safetensors has Hugging Face GPT-2 names");
    th_check(ot_st_count(f) == ot_model_hf_count(m), "one tensor per HF tensor (%d)", ot_st_count(f));
    ot_st_close(f);
  }
  snprintf(p, sizeof p, "%s/config.json", dir);
  th_check(file_exists(p), "config.json written");
  ot_run_config run = *ot_model_run_of(m);
  ot_model *hf = NULL;
  th_check(ot_model_load_hf(&hf, dir, &run) == OT_OK, "ot_model_load_hf(checkpoint dir): %s", ot_last_error());
  if (hf) {   // its vocab padding may differ (HF configs carry none): compare HF tensors
    bool eq = ot_model_hf_count(hf) == ot_model_hf_count(m);
    for (int i = 0; eq && i < ot_model_hf_count(m); i++) {
      const ot_hf_tensor *h = ot_model_hf_at(m, i);
      int j = ot_model_hf_find(hf, h->name);
      size_t k = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
      float *u = th_falloc(k), *w = th_falloc(k);
      eq = j >= 0 && ot_model_hf_get(m, i, ot_model_params(m), u) == OT_OK &&
           ot_model_hf_get(hf, j, ot_model_params(hf), w) == OT_OK && same_floats(u, w, k);
      free(u);
      free(w);
    }
    th_check(eq, "HF loader gives the same weights bitwise");
  }
  ot_model_free(hf);

  // optimizer state and metadata
  snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
  th_check(ot_st_open(&f, p) == OT_OK, "open %s: %s", p, ot_last_error());
  if (f) {
    const ot_st_tensor *x = ot_st_find(f, "exp_avg.h.0.attn.c_attn.weight"),
                       *y = ot_st_find(f, "exp_avg_sq.h.0.attn.c_attn.weight");
    int qi = ot_model_param_find(m, "h.0.attn.c_attn.weight");
    th_check(x && y && qi >= 0, "exp_avg / exp_avg_sq per parameter");
    if (x && y && qi >= 0) {
      const ot_param *q = ot_model_param_at(m, qi);
      th_check(x->ndim == 2 && x->shape[0] == q->shape[0] && x->shape[1] == q->shape[1] &&
                   same_floats(x->data, ot_trainer_moment(t, 0) + q->offset, q->numel) &&
                   same_floats(y->data, ot_trainer_moment(t, 1) + q->offset, q->numel),
               "moments stored with the parameter's shape and values");
    }
    th_check(ot_st_count(f) == 2 * ot_model_param_count(m), "2 tensors per parameter");
    const char *step = ot_st_meta(f, "step"), *fmt = ot_st_meta(f, "format"), *ep = ot_st_meta(f, "data_index"),
               *lr = ot_st_meta(f, "cfg.lr"), *layers = ot_st_meta(f, "cfg.layers");
    th_check(step && !strcmp(step, "2") && fmt && !strcmp(fmt, "ot-train-state") && ep && !strcmp(ep, "8") && lr &&
                 !strcmp(lr, "0.01") && layers && !strcmp(layers, "2"),
             "metadata: step 2, format, data index 8 (2 steps x 4 windows), cfg.lr, cfg.layers");
    th_check(ot_st_meta(f, "rng") && ot_st_meta(f, "params_checksum") && ot_st_meta(f, "cfg.warmup") &&
                 ot_st_meta(f, "cfg.decay-steps") && ot_st_meta(f, "cfg.lr-decay") && ot_st_meta(f, "cfg.min-lr"),
             "metadata: RNG, checksum, LR schedule");
    ot_st_close(f);
  }
  // the saved settings rebuild the same resolved config
  ot_settings *l2 = calloc(1, sizeof *l2);
  th_check(ot_ckpt_read_config(dir, l2) == OT_OK, "read config: %s", ot_last_error());
  ot_train_config back;
  ot_train_config_default(&back);
  th_check(ot_train_config_apply(&back, l2, NULL) == OT_OK && ot_train_config_resolve(&back) == OT_OK,
           "apply saved settings: %s", ot_last_error());
  const ot_train_config *rc = ot_trainer_config(t);
  const char *keys[] = {"layers", "d-model", "vocab-size", "lr", "min-lr", "warmup", "decay-steps", "batch-size",
                        "seq-len", "seed", "data", "eps", "weight-decay", "grad-clip", "dtype", "norm-eps", "steps"};
  bool eq = true;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    char x1[OT_PATH_MAX], x2[OT_PATH_MAX];
    ot_train_config_get(rc, keys[k], x1, sizeof x1);
    ot_train_config_get(&back, keys[k], x2, sizeof x2);
    if (strcmp(x1, x2)) { eq = false; printf("  key %s: %s vs %s\n", keys[k], x1, x2); }
  }
  th_check(eq && !memcmp(&back.model, &rc->model, sizeof back.model), "saved settings == the run's settings");
  free(l2);

  // an evaluation-only trainer loads the weights and scores the same
  ot_train_config ce = c;
  ce.eval_only = true;
  ot_trainer *e = make_trainer(&ce);
  double v1 = 0, v2 = 0;
  if (e) {
    th_check(ot_trainer_load(e, dir, true) == OT_OK, "eval-only load: %s", ot_last_error());
    ot_trainer_eval(e, 2, &v1, NULL);
    ot_trainer_eval(t, 2, &v2, NULL);
    th_check(v1 == v2, "eval-only trainer: same held-out loss %.6f == %.6f", v1, v2);
    th_check_error(ot_trainer_load(e, dir, false), OT_EINVAL, "evaluation-only", "eval-only trainer, full load");
    th_check_error(ot_trainer_save(e, dir), OT_EINVAL, "evaluation-only", "eval-only trainer cannot save");
    ot_trainer_free(e);
  }

  // bad checkpoints
  char dir2[256], cmd[800];
  run_steps(t, 1, l);
  snprintf(dir2, sizeof dir2, "%s/files3", tmp);
  ot_trainer_save(t, dir2);
  snprintf(cmd, sizeof cmd, "cp '%s/model.safetensors' '%s/model.safetensors'", dir, dir2);
  th_check(system(cmd) == 0, "copy weights of step 2 into the step-3 checkpoint");
  ot_trainer *r = make_trainer(&c);
  th_check_error(ot_trainer_load(r, dir2, false), OT_EFORMAT, "different checkpoints", "mixed-up files");
  ot_trainer_free(r);
  ot_train_config c1 = c;
  c1.model.n_layers = 1;
  r = make_trainer(&c1);
  th_check_error(ot_trainer_load(r, dir, false), OT_EINVAL, "--layers 2", "another model shape");
  ot_trainer_free(r);
  ot_train_config c3 = c;
  c3.seq_len = 8;   // another window layout: the data position does not fit
  r = make_trainer(&c3);
  th_check_error(ot_trainer_load(r, dir, false), OT_EINVAL, "data position", "another --seq-len");
  ot_trainer_free(r);
  r = make_trainer(&c);
  snprintf(p, sizeof p, "%s/none", tmp);
  th_check_error(ot_trainer_load(r, p, false), OT_EIO, "no such directory", "missing directory");
  snprintf(p, sizeof p, "%s/latest", tmp);
  FILE *lf = fopen(p, "w");
  if (lf) { fputs("step_999999\n", lf); fclose(lf); }
  th_check_error(ot_trainer_load(r, tmp, false), OT_EIO, "step_999999", "'latest' naming nothing");
  snprintf(p, sizeof p, "%s/optimizer.safetensors", dir2);
  unlink(p);
  th_check_error(ot_trainer_load(r, dir2, false), OT_EIO, "no optimizer.safetensors", "weights only: no resume");
  ot_trainer_free(r);
  ot_trainer_free(t);
}

// Parses the steps of the log; returns how many train records, and whether
// every step 1..n appears exactly once.
static int log_steps(const char *path, int n, bool *once) {
  FILE *f = fopen(path, "r");
  int cnt[64] = {0}, total = 0;
  char line[2048];
  while (f && fgets(line, sizeof line, f)) {
    if (!strstr(line, "\"loss\"")) continue;
    int s = atoi(strstr(line, "\"step\": ") + 8);
    if (s >= 0 && s < 64) cnt[s]++;
    total++;
  }
  if (f) fclose(f);
  *once = true;
  for (int s = 1; s <= n; s++) *once &= cnt[s] == 1;
  return total;
}

static void test_run(const char *data, const char *tmp) {
  ot_train_config c = tiny_config(data);
  c.steps = 6;
  c.eval_every = 3;
  c.save_every = 2;
  c.keep = 2;
  char a[256], b[256], p[512];
  snprintf(a, sizeof a, "%s/run_a", tmp);
  snprintf(b, sizeof b, "%s/run_b", tmp);
  snprintf(c.out, sizeof c.out, "%s", a);
  FILE *sink = fopen("/dev/null", "w");
  double fa = 0, va = 0, fb = 0, vb = 0;
  th_check(ot_train_run(&c, sink, &fa, &va) == OT_OK, "run a: %s", ot_last_error());
  th_check(isfinite(fa) && isfinite(va), "final losses reported (%.4f, %.4f)", fa, va);
  snprintf(p, sizeof p, "%s/loss.svg", a);
  FILE *svg = fopen(p, "r");
  char head[256] = "";
  if (svg) { if (!fgets(head, sizeof head, svg)) head[0] = 0; fclose(svg); }
  th_check(strstr(head, "<svg") != NULL, "loss.svg written");
  snprintf(p, sizeof p, "%s/latest", a);
  th_check(file_exists(p), "latest written");
  snprintf(p, sizeof p, "%s/step_000002", a);
  th_check(!file_exists(p), "keep 2: step_000002 pruned");
  snprintf(p, sizeof p, "%s/step_000004/optimizer.safetensors", a);
  th_check(file_exists(p), "step_000004 kept");
  snprintf(p, sizeof p, "%s/log.jsonl", a);
  bool once = false;
  th_check(log_steps(p, 6, &once) == 6 && once, "log: 6 training records, one per step");

  // 3 steps, then resume to 6: same end
  ot_train_config c1 = c;
  snprintf(c1.out, sizeof c1.out, "%s", b);
  c1.steps = 3;
  c1.save_every = 0;
  c1.decay_steps = 6;   // the schedule of the 6-step run
  th_check(ot_train_run(&c1, sink, &fb, &vb) == OT_OK, "run b (3 steps): %s", ot_last_error());
  // a later first run (steps 4..) is dropped from the log on resume: fake one
  snprintf(p, sizeof p, "%s/log.jsonl", b);
  FILE *lf = fopen(p, "a");
  if (lf) { fputs("{\"step\": 5, \"loss\": 1.0}\n", lf); fclose(lf); }
  ot_train_config c2 = c1;
  c2.steps = 6;
  snprintf(c2.resume, sizeof c2.resume, "%s", b);
  th_check(ot_train_run(&c2, sink, &fb, &vb) == OT_OK, "run b resumed: %s", ot_last_error());
  th_check(memcmp(&fa, &fb, sizeof fa) == 0 && memcmp(&va, &vb, sizeof va) == 0,
           "resumed run ends with the same losses bitwise (%.7f %.7f vs %.7f %.7f)", fa, va, fb, vb);
  th_check(log_steps(p, 6, &once) == 6 && once, "resumed log: each step once");
  // same final weights
  ot_st_file *x = NULL, *y = NULL;
  snprintf(p, sizeof p, "%s/step_000006/model.safetensors", a);
  ot_st_open(&x, p);
  snprintf(p, sizeof p, "%s/step_000006/model.safetensors", b);
  ot_st_open(&y, p);
  bool eq = x && y && ot_st_count(x) == ot_st_count(y);
  for (int i = 0; eq && i < ot_st_count(x); i++) {
    const ot_st_tensor *tx = ot_st_get(x, i), *ty = ot_st_find(y, tx->name);
    eq = ty && tx->nbytes == ty->nbytes && !memcmp(tx->data, ty->data, tx->nbytes);
  }
  th_check(eq, "final checkpoints hold bitwise-equal weights");
  ot_st_close(x);
  ot_st_close(y);
  // a resume with another model shape is refused with the key named
  ot_train_config c3 = c2;
  c3.model.d_ff = 64;
  c3.steps = 8;
  th_check_error(ot_train_run(&c3, sink, NULL, NULL), OT_EINVAL, "--d-ff", "resume with another --d-ff");
  // the plot of a log with a non-finite loss record and an eval record
  snprintf(p, sizeof p, "%s/plot.jsonl", tmp);
  lf = fopen(p, "w");
  if (lf) {
    fputs("{\"step\": 1, \"loss\": 3.5}\n{\"step\": 2, \"loss\": null}\n{\"step\": 2, \"val_loss\": 3.1}\nnot json\n", lf);
    fclose(lf);
  }
  char svgp[512];
  snprintf(svgp, sizeof svgp, "%s/plot.svg", tmp);
  th_check(ot_train_plot(p, svgp, "t <&> t") == OT_OK, "plot: %s", ot_last_error());
  snprintf(p, sizeof p, "%s/missing.jsonl", tmp);
  th_check_error(ot_train_plot(p, svgp, NULL), OT_EIO, "missing.jsonl", "plot of a missing log");
  fclose(sink);
}

int main(void) {
  char dir[64], tmp[128];
  if (!make_data(dir, sizeof dir, V, 20000, 1000)) return th_finish();
  snprintf(tmp, sizeof tmp, "%s/ck", dir);
  mkdir(tmp, 0755);
  double t0 = ot_now();
  test_resume(dir, tmp, OT_F32, 1, false, OT_LR_COSINE);
  test_resume(dir, tmp, OT_BF16, 1, false, OT_LR_COSINE);
  test_resume(dir, tmp, OT_F32, 2, true, OT_LR_COSINE);
  test_resume(dir, tmp, OT_F32, 1, false, OT_LR_INVSQRT);
  test_files(dir, tmp);
  test_run(dir, tmp);
  printf("(%.1f s)\n", ot_now() - t0);
  remove_tree(dir);
  return th_finish();
}
