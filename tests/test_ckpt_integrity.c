// Checkpoint integrity on the tiny model and synthetic shards:
//  - NaN written over a tensor of optimizer.safetensors or model.safetensors,
//    a changed weight, an edited metadata value: refused on load, naming the
//    file and the tensor (or the metadata)
//  - non-finite values are refused on load also where there are no checksums
//    (an optimizer state of format_version 1, a Hugging Face weights directory)
//  - a save of a state holding a non-finite weight or moment fails naming the
//    tensor, leaves nothing behind, and `latest` unchanged
//  - a run that ends on skipped (non-finite loss) steps fails, in the library
//    and in `ot train` (non-zero exit)
//  - `ot eval` refuses NaN weights naming the tensor, and needs no
//    optimizer.safetensors (a broken one does not matter)
//  - a garbage config.json in a checkpoint, a garbage `latest`: refused naming the file
#include "ckpt_common.h"

#define V 50

static void steps(ot_trainer *t, int n) {
  for (int i = 0; i < n; i++) {
    ot_step_info st;
    if (ot_trainer_step(t, &st) != OT_OK) { th_check(false, "step: %s", ot_last_error()); return; }
  }
}

static bool has(const char *needle) {
  bool ok = strstr(ot_last_error(), needle) != NULL;
  if (!ok) printf("  message lacks '%s': %s\n", needle, ot_last_error());
  return ok;
}

// A copy of checkpoint src at tmp/name; returns it (static buffer).
static const char *copy_of(const char *src, const char *tmp, const char *name) {
  static char dst[512];
  snprintf(dst, sizeof dst, "%s/%s", tmp, name);
  th_check(sh("rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst), "copy %s", name);
  return dst;
}

static void test_load_checks(const char *data, const char *tmp, const char *good) {
  ot_train_config c = tiny_config(data);
  ot_trainer *r = make_trainer(&c);
  char p[600];
  // NaN over the bytes of a moment: the checksum of that tensor fails
  const char *d = copy_of(good, tmp, "nan_state");
  snprintf(p, sizeof p, "%s/optimizer.safetensors", d);
  th_check(st_rewrite(p, "exp_avg.h.0.attn.c_attn.weight", 3, NAN, NULL, NULL, NULL), "poison the state");
  th_check_error(ot_trainer_load(r, d, false), OT_EFORMAT, "exp_avg.h.0.attn.c_attn.weight",
                 "NaN written into optimizer.safetensors");
  th_check(has("optimizer.safetensors") && has("checksum"), "the message names the file and the checksum");
  // a changed weight: refused by a full and by a weights-only load
  d = copy_of(good, tmp, "changed_weight");
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  th_check(st_rewrite(p, "h.1.mlp.c_fc.weight", 5, 1.5f, NULL, NULL, NULL), "change a weight");
  th_check_error(ot_trainer_load(r, d, false), OT_EFORMAT, "h.1.mlp.c_fc.weight", "changed weight, resume");
  th_check(has("model.safetensors"), "the message names model.safetensors");
  th_check_error(ot_trainer_load(r, d, true), OT_EFORMAT, "h.1.mlp.c_fc.weight", "changed weight, weights only");
  // an edited metadata value (the step) with every tensor intact
  d = copy_of(good, tmp, "edited_meta");
  snprintf(p, sizeof p, "%s/optimizer.safetensors", d);
  th_check(st_rewrite(p, NULL, 0, 0, "step", "7", NULL), "edit the step");
  th_check_error(ot_trainer_load(r, d, false), OT_EFORMAT, "__metadata__", "edited step");
  th_check(has("optimizer.safetensors"), "the message names the file");
  // no checksums (an older state file): the non-finite moment is still refused, by name
  static const char *const sums[] = {"checksum.", "meta_checksum", NULL};
  d = copy_of(good, tmp, "v1_nan");
  snprintf(p, sizeof p, "%s/optimizer.safetensors", d);
  th_check(st_rewrite(p, "exp_avg_sq.ln_f.weight", 0, INFINITY, "format_version", "1", sums), "v1 state with inf");
  th_check_error(ot_trainer_load(r, d, false), OT_EFORMAT, "exp_avg_sq.ln_f.weight", "non-finite moment, no checksums");
  th_check(has("non-finite"), "the message says non-finite");
  d = copy_of(good, tmp, "v1_ok");   // the same file without the poison loads
  snprintf(p, sizeof p, "%s/optimizer.safetensors", d);
  th_check(st_rewrite(p, NULL, 0, 0, "format_version", "1", sums), "v1 state");
  th_check(ot_trainer_load(r, d, false) == OT_OK, "a format_version 1 state without checksums loads: %s",
           ot_last_error());
  // a Hugging Face directory (no ot metadata at all) with a NaN weight
  static const char *const ours[] = {"ot_checkpoint", "checksum.", "meta_checksum", "file.", "cfg.", "step", NULL};
  d = copy_of(good, tmp, "hf_nan");
  th_check(sh("rm -f '%s/optimizer.safetensors' '%s/vocab.json' '%s/merges.txt'", d, d, d), "HF layout");
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  th_check(st_rewrite(p, "h.0.attn.c_proj.weight", 2, NAN, NULL, NULL, ours), "HF weights with a NaN");
  ot_train_config ce = c;
  ce.eval_only = true;
  ot_trainer *e = make_trainer(&ce);
  th_check_error(ot_trainer_load(e, d, true), OT_EFORMAT, "h.0.attn.c_proj.weight", "HF weights with a NaN");
  th_check(has("non-finite"), "the message says non-finite");
  // a garbage config.json next to good weights
  d = copy_of(good, tmp, "bad_config");
  snprintf(p, sizeof p, "%s/config.json", d);
  write_text(p, "{\"model_type\": \"gpt2\", \"n_embd\": ");
  th_check_error(ot_trainer_load(r, d, false), OT_EFORMAT, "config.json", "garbage config.json, resume");
  th_check_error(ot_trainer_load(e, d, true), OT_EFORMAT, "config.json", "garbage config.json, weights only");
  ot_trainer_free(e);
  ot_trainer_free(r);
}

static void test_latest_garbage(const char *data, const char *tmp, const char *good) {
  ot_train_config c = tiny_config(data);
  ot_trainer *r = make_trainer(&c);
  char run[512], p[600];
  snprintf(run, sizeof run, "%s/garbage_latest", tmp);
  th_check(sh("rm -rf '%s' && mkdir -p '%s' && cp -r '%s' '%s/step_000002'", run, run, good, run), "run dir");
  snprintf(p, sizeof p, "%s/latest", run);
  static const char *const bad[] = {"\x7f" "ELF\x01\x02 not a name\n", "step_000002\nstep_000003\n", "../step_000002\n",
                                    "step_2x\n"};
  for (int i = 0; i < 4; i++) {
    write_text(p, bad[i]);
    th_check_error(ot_trainer_load(r, run, false), OT_EFORMAT, "latest: expected one line", "garbage latest");
  }
  write_text(p, "step_000002\n");
  th_check(ot_trainer_load(r, run, false) == OT_OK && ot_trainer_steps_done(r) == 2, "a good latest loads: %s",
           ot_last_error());
  ot_trainer_free(r);
}

// Index of element k of parameter `name` in the parameter buffer.
static size_t at_param(ot_trainer *t, const char *name, size_t k) {
  ot_model *m = ot_trainer_model(t);
  int i = ot_model_param_find(m, name);
  th_check(i >= 0, "parameter %s", name);
  return i >= 0 ? ot_model_param_at(m, i)->offset + k : 0;
}

static void test_save_refusal(const char *data, const char *tmp) {
  ot_train_config c = tiny_config(data);
  snprintf(c.out, sizeof c.out, "%s/nan_run", tmp);
  ot_trainer *t = make_trainer(&c);
  steps(t, 2);
  th_check(ot_trainer_checkpoint(t, NULL, 0) == OT_OK, "checkpoint at step 2: %s", ot_last_error());
  char p[OT_PATH_MAX + 64], list[512], latest[64] = "";
  float *w = ot_model_params(ot_trainer_model(t));
  const size_t k = at_param(t, "h.0.mlp.c_fc.weight", 7);
  const float keep = w[k];
  w[k] = NAN;
  steps(t, 1);   // skipped: the weights stay non-finite
  th_check_error(ot_trainer_checkpoint(t, NULL, 0), OT_EINVAL, "h.0.mlp.c_fc.weight", "checkpoint of NaN weights");
  th_check(has("non-finite value (nan)"), "the message shows the value");
  snprintf(p, sizeof p, "%s/step_000003", c.out);
  th_check(!file_exists(p), "no step_000003 written");
  th_check(names_with(c.out, ".tmp", list, sizeof list) == 0 && names_with(c.out, "step_000003", NULL, 0) == 0,
           "nothing left behind in the run directory (%s)", list);
  snprintf(p, sizeof p, "%s/latest", c.out);
  FILE *f = fopen(p, "r");
  if (f) { if (!fgets(latest, sizeof latest, f)) latest[0] = 0; fclose(f); }
  th_check(!strcmp(latest, "step_000002\n"), "latest unchanged (%s)", latest);
  w[k] = keep;
  float *v = ot_trainer_moment(t, 1);
  const size_t j = at_param(t, "ln_f.bias", 1);
  v[j] = INFINITY;
  snprintf(p, sizeof p, "%s/nan_moment", tmp);
  th_check_error(ot_trainer_save(t, p), OT_EINVAL, "ln_f.bias", "save of an inf moment");
  th_check(has("exp_avg_sq"), "the message names the moment");
  th_check(!file_exists(p) && names_with(tmp, "nan_moment", NULL, 0) == 0, "nothing written for it");
  v[j] = 0;
  th_check(ot_trainer_save(t, p) == OT_OK, "the finite state saves: %s", ot_last_error());
  ot_trainer_free(t);
}

// A checkpoint whose forward overflows (finite weights): every further step is skipped.
static void test_run_ends_skipped(const char *data, const char *tmp) {
  ot_train_config c = tiny_config(data);
  snprintf(c.out, sizeof c.out, "%s/skip_run", tmp);
  c.steps = 4;
  ot_trainer *t = make_trainer(&c);
  steps(t, 2);
  float *w = ot_model_params(ot_trainer_model(t));
  const size_t k = at_param(t, "h.0.ln_1.weight", 0);
  for (int i = 0; i < 32; i++) w[k + i] = 1e30f;   // LayerNorm gains: the attention scores overflow
  th_check(ot_trainer_checkpoint(t, NULL, 0) == OT_OK, "checkpoint of huge finite weights: %s", ot_last_error());
  ot_trainer_free(t);
  ot_train_config r = c;
  snprintf(r.resume, sizeof r.resume, "%s", c.out);
  FILE *sink = fopen("/dev/null", "w");
  double fl = 0;
  th_check_error(ot_train_run(&r, sink, &fl, NULL), OT_EINVAL, "skipped", "run that ends on skipped steps");
  th_check(has("not finite") && has("steps 3-4"), "the message says which steps and why");
  fclose(sink);
  char out[8192];
  int rc = run_ot(out, sizeof out, "train --resume '%s' --steps 6 --quiet", c.out);
  th_check(rc == 1 && strstr(out, "skipped"), "ot train exits 1 and says so (rc %d): %.300s", rc, out);
}

static void test_eval_cli(const char *tmp, const char *good, const char *data) {
  char out[8192], p[600];
  const char *d = copy_of(good, tmp, "eval_nan");
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  th_check(st_rewrite(p, "h.1.attn.c_attn.weight", 4, NAN, NULL, NULL, NULL), "NaN in the weights");
  int rc = run_ot(out, sizeof out, "eval '%s'", d);
  th_check(rc != 0 && strstr(out, "h.1.attn.c_attn.weight") && !strstr(out, "held-out loss"),
           "ot eval of NaN weights fails naming the tensor (rc %d): %.300s", rc, out);
  static const char *const ours[] = {"ot_checkpoint", "checksum.", "meta_checksum", "file.", "cfg.", "step", NULL};
  d = copy_of(good, tmp, "eval_hf_nan");
  th_check(sh("rm -f '%s/optimizer.safetensors'", d), "HF layout");
  snprintf(p, sizeof p, "%s/model.safetensors", d);
  th_check(st_rewrite(p, "h.0.mlp.c_proj.weight", 9, NAN, NULL, NULL, ours), "HF weights with a NaN");
  rc = run_ot(out, sizeof out, "eval '%s' --data '%s' --seq-len 16", d, data);
  th_check(rc != 0 && strstr(out, "h.0.mlp.c_proj.weight") && strstr(out, "non-finite"),
           "ot eval of a Hugging Face directory with a NaN fails naming the tensor (rc %d): %.300s", rc, out);
  d = copy_of(good, tmp, "eval_bad_state");
  snprintf(p, sizeof p, "%s/optimizer.safetensors", d);
  write_text(p, "garbage, not safetensors");
  rc = run_ot(out, sizeof out, "eval '%s'", d);
  th_check(rc == 0 && strstr(out, "held-out loss"), "ot eval needs no optimizer.safetensors (rc %d): %.300s", rc, out);
}

int main(void) {
  char dir[64], tmp[128], good[256];
  if (!make_data(dir, sizeof dir, V, 20000, 1000)) return th_finish();
  snprintf(tmp, sizeof tmp, "%s/ck", dir);
  mkdir(tmp, 0755);
  double t0 = ot_now();
  ot_train_config c = tiny_config(dir);
  ot_trainer *t = make_trainer(&c);
  steps(t, 2);
  snprintf(good, sizeof good, "%s/good", tmp);
  th_check(ot_trainer_save(t, good) == OT_OK, "save: %s", ot_last_error());
  ot_trainer_free(t);
  test_load_checks(dir, tmp, good);
  test_latest_garbage(dir, tmp, good);
  test_save_refusal(dir, tmp);
  test_run_ends_skipped(dir, tmp);
  test_eval_cli(tmp, good, dir);
  printf("(%.1f s)\n", ot_now() - t0);
  remove_tree(dir);
  return th_finish();
}
