// Checkpoint averaging (ot_ckpt_average, src/train/ckpt_avg.c) on the tiny
// model: checkpoints whose weights are planted values
//   w_j[i] = ((i mod 7) - 3) / 4 + j / 2
// so that the mean of j = 0, 1, 2 is exactly checkpoint j = 1's weights:
//  - the last 1 = the newest checkpoint's tensors, the same bytes;
//  - the last 3 = the middle one's tensors bitwise, and equal to the
//    per-element double mean of the three inputs;
//  - four explicit checkpoints = the per-element (float)(sum in double / 4);
//  - the output loads for evaluation (ot_trainer_load weights only, settings
//    read back), a resume from it is refused (no optimizer state);
//  - refused with messages: more checkpoints than the run holds, a missing
//    directory, an existing output, another model shape (--d-ff), a tensor of
//    another shape, a corrupt input; nothing left behind after a refusal;
//  - bare output names (no '/') for an average and for a save.
#include "ckpt_common.h"

static void plant(ot_trainer *t, int j) {
  ot_model *m = ot_trainer_model(t);
  float *p = ot_model_params(m);
  const size_t n = ot_model_n_floats(m);
  for (size_t i = 0; i < n; i++) p[i] = (float)((int)(i % 7) - 3) * 0.25f + (float)j * 0.5f;
}

// One step, then the planted weights, then a checkpoint in c->out.
static void step_and_save(ot_trainer *t, int j, char *path, size_t cap) {
  ot_step_info st;
  th_check(ot_trainer_step(t, &st) == OT_OK, "step: %s", ot_last_error());
  plant(t, j);
  th_check(ot_trainer_checkpoint(t, path, cap) == OT_OK, "checkpoint: %s", ot_last_error());
}

// Every tensor of a/model.safetensors equals b's (names, shapes, bytes).
static bool same_weights(const char *a, const char *b) {
  char pa[700], pb[700];
  snprintf(pa, sizeof pa, "%s/model.safetensors", a);
  snprintf(pb, sizeof pb, "%s/model.safetensors", b);
  ot_st_file *fa = NULL, *fb = NULL;
  bool ok = ot_st_open(&fa, pa) == OT_OK && ot_st_open(&fb, pb) == OT_OK;
  ok = ok && ot_st_count(fa) == ot_st_count(fb) && ot_st_count(fa) > 0;
  for (int i = 0; ok && i < ot_st_count(fa); i++) {
    const ot_st_tensor *x = ot_st_get(fa, i), *y = ot_st_find(fb, x->name);
    ok = y && y->nbytes == x->nbytes && y->ndim == x->ndim && y->shape[0] == x->shape[0] &&
         y->shape[1] == x->shape[1] && !memcmp(x->data, y->data, x->nbytes);
    if (!ok) printf("  tensor '%s' differs between %s and %s\n", x->name, a, b);
  }
  ot_st_close(fa);
  ot_st_close(fb);
  return ok;
}

// out's tensors = (float)(sum_j in double / n) of the inputs', element by element.
static bool is_mean(const char *out, const char *const *in, int n) {
  char p[700];
  ot_st_file *fo = NULL, *fi[8] = {0};
  snprintf(p, sizeof p, "%s/model.safetensors", out);
  bool ok = ot_st_open(&fo, p) == OT_OK;
  for (int j = 0; j < n && ok; j++) {
    snprintf(p, sizeof p, "%s/model.safetensors", in[j]);
    ok = ot_st_open(&fi[j], p) == OT_OK;
  }
  size_t checked = 0;
  for (int i = 0; ok && i < ot_st_count(fo); i++) {
    const ot_st_tensor *x = ot_st_get(fo, i);
    const float *o = x->data;
    for (size_t e = 0; ok && e < x->nbytes / 4; e++) {
      double s = 0;
      for (int j = 0; j < n; j++) s += ((const float *)ot_st_find(fi[j], x->name)->data)[e];
      ok = o[e] == (float)(s / n);
      if (!ok) printf("  %s[%zu] = %.9g, the mean is %.9g\n", x->name, e, o[e], s / n);
      checked++;
    }
  }
  ot_st_close(fo);
  for (int j = 0; j < n; j++) ot_st_close(fi[j]);
  return ok && checked > 0;
}

// A copy of checkpoint src at dst with its first non-square matrix's shape
// swapped ([a, b] -> [b, a]: same bytes, so its checksums still hold).
static bool swap_shape(const char *src, const char *dst, char *name, size_t cap) {
  if (!sh("rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst)) return false;
  char p[700];
  snprintf(p, sizeof p, "%s/model.safetensors", dst);
  ot_st_file *f = NULL;
  if (ot_st_open(&f, p) != OT_OK) return false;
  const int n = ot_st_count(f), nm = ot_st_meta_count(f);
  ot_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  const char **k = calloc((size_t)nm, sizeof *k), **v = calloc((size_t)nm, sizeof *v);
  bool done = false;
  for (int i = 0; i < n; i++) {
    ts[i] = *ot_st_get(f, i);
    if (!done && ts[i].ndim == 2 && ts[i].shape[0] != ts[i].shape[1]) {
      const int64_t a = ts[i].shape[0];
      ts[i].shape[0] = ts[i].shape[1];
      ts[i].shape[1] = a;
      snprintf(name, cap, "%s", ts[i].name);
      done = true;
    }
  }
  for (int i = 0; i < nm; i++) k[i] = ot_st_meta_at(f, i, &v[i]);
  // written beside it, then moved over it (the mapped file stays valid)
  char q[720];
  snprintf(q, sizeof q, "%s.new", p);
  bool ok = done && ot_st_write(q, ts, n, k, v, nm) == OT_OK;
  ot_st_close(f);
  free(ts);
  free(k);
  free(v);
  return ok && rename(q, p) == 0;
}

int main(void) {
  char data[256], tmp[256] = "/tmp/ot_test_train_avgXXXXXX";
  if (!make_data(data, sizeof data, 50, 4000, 800) || !mkdtemp(tmp)) return th_finish();
  ot_train_config c = tiny_config(data);
  c.keep = 0;
  snprintf(c.out, sizeof c.out, "%s/run", tmp);
  ot_trainer *t = make_trainer(&c);
  if (!t) return th_finish();
  char ck[4][600];
  const int plant_j[4] = {9, 0, 1, 2};   // steps 1..4
  for (int k = 0; k < 4; k++) step_and_save(t, plant_j[k], ck[k], sizeof ck[k]);
  char out[600], run[600];
  snprintf(run, sizeof run, "%s/run", tmp);

  // last 1: the same bytes
  snprintf(out, sizeof out, "%s/avg1", tmp);
  th_check(ot_ckpt_average(run, 1, out) == OT_OK, "average of the last 1: %s", ot_last_error());
  th_check(same_weights(out, ck[3]), "the last 1 = step 4, the same bytes");
  // last 3: exactly the middle one's weights
  snprintf(out, sizeof out, "%s/avg3", tmp);
  th_check(ot_ckpt_average(run, 3, out) == OT_OK, "average of the last 3: %s", ot_last_error());
  th_check(same_weights(out, ck[2]), "the last 3 (w0, w1, w2) = w1 bitwise (step 3)");
  const char *three[3] = {ck[1], ck[2], ck[3]};
  th_check(is_mean(out, three, 3), "the last 3 = the per-element mean of steps 2..4");
  {
    char p[700];
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    ot_st_file *f = NULL;
    th_check(ot_st_open(&f, p) == OT_OK, "open %s", p);
    const char *from = f ? ot_st_meta(f, "averaged_from") : NULL, *cnt = f ? ot_st_meta(f, "averaged_count") : NULL,
               *step = f ? ot_st_meta(f, "step") : NULL;
    th_check(from && !strcmp(from, "step_000002 step_000003 step_000004") && cnt && !strcmp(cnt, "3") && step &&
                 !strcmp(step, "4"), "metadata: averaged_from '%s', count '%s', the newest step '%s'",
             from ? from : "", cnt ? cnt : "", step ? step : "");
    ot_st_close(f);
    snprintf(p, sizeof p, "%s/optimizer.safetensors", out);
    th_check(!file_exists(p), "no optimizer state in the average");
  }
  // four explicit ones (a mean that rounds)
  const char *four[4] = {ck[0], ck[1], ck[2], ck[3]};
  snprintf(out, sizeof out, "%s/avg4", tmp);
  th_check(ot_ckpt_average_dirs(four, 4, out) == OT_OK, "average of 4 given: %s", ot_last_error());
  th_check(is_mean(out, four, 4), "4 checkpoints: (float)(sum in double / 4) per element");

  // the average loads for evaluation; a resume is refused
  snprintf(out, sizeof out, "%s/avg3", tmp);
  ot_trainer *e = make_trainer(&c), *ref = make_trainer(&c);
  if (e && ref) {
    th_check(ot_trainer_load(e, out, true) == OT_OK, "load the average (weights only): %s", ot_last_error());
    th_check(ot_trainer_load(ref, ck[2], true) == OT_OK, "load step 3: %s", ot_last_error());
    ot_model *me = ot_trainer_model(e), *mr = ot_trainer_model(ref);
    th_check(!memcmp(ot_model_params(me), ot_model_params(mr), ot_model_n_floats(me) * sizeof(float)),
             "the loaded average = step 3's weights");
    th_check_error(ot_trainer_load(e, out, false), OT_EIO, "no optimizer.safetensors", "resume from an average");
    ot_settings *l = calloc(1, sizeof *l);
    th_check(ot_ckpt_read_config(out, l) == OT_OK && ot_settings_has(l, "d-ff") && ot_settings_has(l, "out"),
             "the settings read back: %s", ot_last_error());
    for (int i = 0; i < l->n; i++)
      if (!strcmp(l->item[i].key, "out"))
        th_check(!strcmp(l->item[i].val, run) || strstr(l->item[i].val, "/run"), "out = the run (%s)",
                 l->item[i].val);
    free(l);
  }
  ot_trainer_free(e);
  ot_trainer_free(ref);

  // refusals
  snprintf(out, sizeof out, "%s/bad", tmp);
  th_check_error(ot_ckpt_average(run, 5, out), OT_EINVAL, "holds 4 complete checkpoints", "5 of 4");
  th_check(strstr(ot_last_error(), "step_000001, step_000002") != NULL, "the found ones listed: %s", ot_last_error());
  th_check_error(ot_ckpt_average(run, 0, out), OT_EINVAL, "last_k=0", "k = 0");
  char missing[600];
  snprintf(missing, sizeof missing, "%s/nope", tmp);
  th_check_error(ot_ckpt_average(missing, 2, out), OT_EIO, "nope", "missing run directory");
  const char *gone[2] = {ck[0], missing};
  th_check_error(ot_ckpt_average_dirs(gone, 2, out), OT_EIO, "no such directory", "missing checkpoint");
  snprintf(out, sizeof out, "%s/avg3", tmp);
  th_check_error(ot_ckpt_average(run, 2, out), OT_EINVAL, "already exists", "existing output");
  snprintf(out, sizeof out, "%s/bad", tmp);
  {   // another model shape
    ot_train_config c2 = c;
    c2.model.d_ff = c.model.d_ff + 8;
    snprintf(c2.out, sizeof c2.out, "%s/run2", tmp);
    ot_trainer *t2 = make_trainer(&c2);
    char other[600];
    if (t2) step_and_save(t2, 0, other, sizeof other);
    ot_trainer_free(t2);
    const char *mix[2] = {ck[3], other};
    th_check_error(ot_ckpt_average_dirs(mix, 2, out), OT_EINVAL, "--d-ff", "another --d-ff");
    th_check(strstr(ot_last_error(), "run2/step_000001") != NULL, "the checkpoint named: %s", ot_last_error());
  }
  {   // a tensor of another shape under the same settings
    char sw[600], name[128] = "";
    snprintf(sw, sizeof sw, "%s/swapped", tmp);
    th_check(swap_shape(ck[3], sw, name, sizeof name), "make a checkpoint with a swapped shape");
    const char *mix[2] = {ck[2], sw};
    char want[160];
    snprintf(want, sizeof want, "tensor '%s'", name);
    th_check_error(ot_ckpt_average_dirs(mix, 2, out), OT_EINVAL, want, "a tensor of another shape");
  }
  {   // a corrupt input: the integrity checks name the tensor
    char bad[600], p[700];
    snprintf(bad, sizeof bad, "%s/corrupt", tmp);
    sh("cp -r '%s' '%s'", ck[1], bad);
    snprintf(p, sizeof p, "%s/model.safetensors", bad);
    ot_st_file *f = NULL;
    char name[128] = "";
    if (ot_st_open(&f, p) == OT_OK) {
      snprintf(name, sizeof name, "%s", ot_st_get(f, 0)->name);
      ot_st_close(f);
    }
    th_check(st_rewrite(p, name, 0, 123.0f, NULL, NULL, NULL), "corrupt %s", p);
    const char *mix[2] = {ck[2], bad};
    th_check_error(ot_ckpt_average_dirs(mix, 2, out), OT_EFORMAT, name, "a corrupt input");
  }
  char left[700];
  snprintf(left, sizeof left, "%s/.bad.tmp", tmp);
  th_check(!file_exists(out) && !file_exists(left), "nothing left behind by the refusals");
  {   // bare directory names (no '/'): the working directory is their parent
    char cwd[512];
    if (getcwd(cwd, sizeof cwd) && chdir(tmp) == 0) {
      th_check(ot_trainer_save(t, "bare") == OT_OK, "save to a bare name: %s", ot_last_error());
      th_check(ot_ckpt_average(run, 2, "bare_avg") == OT_OK && file_exists("bare_avg/model.safetensors"),
               "average to a bare name: %s", ot_last_error());
      th_check(chdir(cwd) == 0, "back to %s", cwd);
    }
  }
  ot_trainer_free(t);
  remove_tree(tmp);
  remove_tree(data);
  return th_finish();
}
