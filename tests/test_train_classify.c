// The classify task of the one trainer on the bundled digits: its defaults, the
// refusals (an LM model, parallel layouts, images of another channel count,
// labels beyond the model's classes), a short run whose held-out top-1 accuracy
// rises far above chance, and a bit-exact resume (3 + save + load + 3 = 6 steps,
// with random crops, flips, dropout and drop-path, across epoch boundaries), with CLS
// and with mean pooling (whose checkpoint's config.json loads back with its pooling
// and which ot_model_save_hf refuses).
#include "train_common.h"
#include <math.h>

static char g_dir[256], g_small[320], g_rgb[320], g_bad[320];

static ot_train_config cls_config(void) {
  ot_train_config c;
  ot_train_config_default(&c);
  th_check(ot_train_config_set(&c, "task", "classify", "test") == OT_OK, "task classify: %s", ot_last_error());
  c.threads = 1;   // tiny GEMMs: one thread is as fast and stays quick on a busy machine
  c.quiet = true;
  c.measure_peak = false;
  c.keep = 0;
  return c;
}

static void test_defaults(void) {
  ot_train_config c = cls_config();
  th_check(c.model.arch == OT_ARCH_VIT && !strcmp(c.model.name, "vit-digits") &&
           !strcmp(c.train_images, "data/digits/train.otimg") && c.crop_min == 0.6f && !c.flip,
           "classify defaults: vit-digits on the bundled digits");
  th_check(ot_train_config_resolve(&c) == OT_OK && c.seq_len == 17, "seq-len = tokens per image (%d)", c.seq_len);
  th_check(ot_train_config_set(&c, "image-mean", "0.5,0.4,0.3", "t") == OT_OK && c.image_mean[2] == 0.3f &&
           ot_train_config_set(&c, "std", "(0.2)", "t") == OT_OK && c.image_std[1] == 0.2f,
           "image-mean / -std take one or three values");
  th_check_error(ot_train_config_set(&c, "image-std", "1,2", "t"), OT_EINVAL, "one or three", "two values");
  th_check_error(ot_train_config_set(&c, "image-std", "0", "t"), OT_EINVAL, "outside", "std 0");
  char buf[64];
  th_check(!strcmp(ot_train_config_get(&c, "task", buf, sizeof buf), "classify") &&
           !strcmp(ot_train_key_canonical("drop_path_rate"), "drop-path"), "keys read back, timm alias");
}

static void test_bad_config(void) {
  ot_train_config c = cls_config();
  ot_trainer *t = NULL;
  ot_train_config_set(&c, "model", "tiny", "t");
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "needs a vision transformer", "classify with an LM");
  c = cls_config();
  c.tensor_parallel = 2;   // (a layout runs under mpirun: tests/mpi/vit.sh)
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "mpirun -np 2", "classify tp 2 on one process");
  c = cls_config();
  c.tensor_parallel = 2;
  c.vocab_parallel = true;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "classifier stays whole", "classify --vocab-parallel");
  c = cls_config();
  snprintf(c.train_images, sizeof c.train_images, "%s", g_rgb);
  th_check_error(ot_trainer_create(&t, &c), OT_EFORMAT, "the model takes 1", "RGB images for a 1-channel model");
  c = cls_config();
  snprintf(c.val_images, sizeof c.val_images, "%s", g_bad);
  th_check_error(ot_trainer_create(&t, &c), OT_EFORMAT, "outside the model's 10 classes", "label 12");
  ot_train_config_default(&c);
  ot_train_config_set(&c, "model", "vit-digits", "t");
  th_check_error(ot_train_config_resolve(&c), OT_EINVAL, "--task classify", "lm task with a ViT");
  th_check(t == NULL, "no trainer on failure");
}

static bool run_steps(ot_trainer *t, int steps, double *out) {
  for (int i = 0; i < steps; i++) {
    ot_step_info st;
    if (!th_check(ot_trainer_step(t, &st) == OT_OK, "step: %s", ot_last_error())) return false;
    out[i] = st.loss;
  }
  return true;
}

static void test_learns(void) {
  ot_train_config c = cls_config();
  c.steps = 80;
  c.batch_size = 32;
  c.lr = 2e-3f;
  c.warmup = 5;
  c.crop_min = 0.0f;
  ot_trainer *t = NULL;
  if (!th_check(ot_trainer_create(&t, &c) == OT_OK, "create: %s", ot_last_error())) return;
  double v0 = 0, v1 = 0, l[80];
  int64_t n = 0;
  th_check(ot_trainer_eval(t, 0, &v0, &n) == OT_OK && n == 297, "eval over the 297 held-out images");
  const double a0 = ot_trainer_accuracy(t);
  if (run_steps(t, 80, l)) {
    th_check(ot_trainer_eval(t, 0, &v1, NULL) == OT_OK, "eval: %s", ot_last_error());
    const double a1 = ot_trainer_accuracy(t);
    printf("classify: held-out loss %.3f -> %.3f, top-1 %.1f%% -> %.1f%% after 80 steps of 32 images\n", v0, v1,
           100 * a0, 100 * a1);
    th_check(v1 < v0 - 0.3 && a1 > 0.3, "accuracy rises well above chance (%.3f -> %.3f)", a0, a1);
  }
  ot_trainer_free(t);
}

static void test_resume(bool mean, double *l6) {
  ot_train_config c = cls_config();
  if (mean) th_check(ot_train_config_set(&c, "global_pool", "avg", "t") == OT_OK && c.model.pool == OT_POOL_MEAN,
                     "timm's global_pool=avg: mean pooling");
  snprintf(c.train_images, sizeof c.train_images, "%s", g_small);   // 20 images: epochs end often
  c.batch_size = 8;
  c.grad_accum = 2;
  c.steps = 6;
  c.flip = true;
  c.dropout = 0.1f;
  c.attn_dropout = 0.1f;
  c.drop_path = 0.2f;
  ot_trainer *a = NULL, *b = NULL;
  double la[6], lb[6];
  char ck[400];
  snprintf(ck, sizeof ck, "%s/ck%d", g_dir, (int)mean);
  th_check(ot_trainer_create(&a, &c) == OT_OK && run_steps(a, 6, la), "run A: %s", ot_last_error());
  th_check(ot_trainer_create(&b, &c) == OT_OK && run_steps(b, 3, lb), "run B: %s", ot_last_error());
  th_check(ot_trainer_save(b, ck) == OT_OK, "save: %s", ot_last_error());
  ot_trainer_free(b);
  b = NULL;
  ot_settings *kl = calloc(1, sizeof *kl);
  ot_train_config rc;
  ot_train_config_default(&rc);
  th_check(ot_ckpt_read_config(ck, kl) == OT_OK && ot_train_config_apply(&rc, kl, NULL) == OT_OK &&
           ot_train_config_resolve(&rc) == OT_OK, "checkpoint settings: %s", ot_last_error());
  th_check(rc.task == OT_TASK_CLASSIFY && rc.model.arch == OT_ARCH_VIT && rc.model.patch_size == 2 &&
           rc.drop_path == 0.2f && rc.flip && rc.crop_min == c.crop_min && rc.image_std[0] == c.image_std[0] &&
           rc.model.pool == c.model.pool, "checkpoint settings round-trip (pool %d)", (int)mean);
  free(kl);
  // its config.json (mean pooling: model_type "ot-vit") loads the same model: the same logits
  ot_run_config r1 = {4, 17, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *h = NULL;
  char sub[440];
  snprintf(sub, sizeof sub, "%s/config.json", ck);
  char *cj = NULL;
  size_t cn = 0;
  FILE *cf = fopen(sub, "rb");
  if (cf) {
    cj = calloc(1, 8192);
    cn = cj ? fread(cj, 1, 8191, cf) : 0;
    fclose(cf);
  }
  th_check(cn > 0 && (strstr(cj, "\"model_type\": \"ot-vit\"") != NULL) == mean &&
           (strstr(cj, "\"pooling\": \"mean\"") != NULL) == mean, "config.json names the pooling (%d)",
           (int)mean);
  free(cj);
  if (th_check(ot_model_load_hf(&h, ck, &r1) == OT_OK, "load_hf %s: %s", ck, ot_last_error())) {
    th_check(ot_model_config_of(h)->pool == c.model.pool, "load_hf: the pooling");
    ot_model *tm = NULL;
    th_check(ot_model_create(&tm, &c.model, &r1) == OT_OK, "model: %s", ot_last_error());
    ot_trainer *w = NULL;
    if (tm && th_check(ot_trainer_create(&w, &c) == OT_OK && ot_trainer_load(w, ck, true) == OT_OK,
                       "weights: %s", ot_last_error())) {
      float img[4 * 64];
      for (int i = 0; i < 4 * 64; i++) img[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
      ot_image_batch ib = {4, 8, 8, img, NULL, false};
      float l1[40];
      int ld = 0;
      th_check(ot_model_forward_images(ot_trainer_model(w), &ib, 0, false, NULL) == OT_OK, "fwd");
      memcpy(l1, ot_model_logits(ot_trainer_model(w), &ld), sizeof l1);
      th_check(ot_model_forward_images(h, &ib, 0, false, NULL) == OT_OK &&
               !memcmp(l1, ot_model_logits(h, &ld), sizeof l1), "config.json + weights: the same logits");
    }
    ot_trainer_free(w);
    ot_model_free(tm);
    th_check_error(ot_model_save_hf(h, g_dir), mean ? OT_EUNSUPPORTED : OT_OK, mean ? "cannot express" : "",
                   "save_hf of a mean-pooled ViT refused");
  }
  ot_model_free(h);
  th_check(ot_trainer_create(&b, &c) == OT_OK && ot_trainer_load(b, ck, false) == OT_OK, "load: %s",
           ot_last_error());
  if (a && b && ot_trainer_steps_done(b) == 3 && run_steps(b, 3, lb + 3)) {
    bool same = true;
    for (int i = 0; i < 6; i++) same = same && la[i] == lb[i];
    th_check(same, "resumed losses equal (%.9g vs %.9g at step 6)", la[5], lb[5]);
    *l6 = la[5];
    th_check(!memcmp(ot_model_params(ot_trainer_model(a)), ot_model_params(ot_trainer_model(b)),
                     ot_model_n_floats(ot_trainer_model(a)) * sizeof(float)), "resumed weights equal");
  }
  ot_trainer_free(a);
  ot_trainer_free(b);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ot_test_classify_XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  ot_images *d = NULL;
  if (ot_images_load(&d, "data/digits/heldout.otimg", 1, 10) != OT_OK) return 1;
  d->n = 20;
  snprintf(g_small, sizeof g_small, "%s/small.otimg", g_dir);
  th_check(ot_images_save(d, g_small) == OT_OK, "small set");
  d->labels[3] = 12;
  d->classes = 13;
  snprintf(g_bad, sizeof g_bad, "%s/bad.otimg", g_dir);
  th_check(ot_images_save(d, g_bad) == OT_OK, "bad set");
  ot_images_free(d);
  ot_images rgb = {2, 8, 8, 3, 10, 255, NULL, NULL};
  uint8_t px[2 * 8 * 8 * 3] = {0};
  int32_t lab[2] = {1, 2};
  rgb.pix = px;
  rgb.labels = lab;
  snprintf(g_rgb, sizeof g_rgb, "%s/rgb.otimg", g_dir);
  th_check(ot_images_save(&rgb, g_rgb) == OT_OK, "rgb set");
  test_defaults();
  test_bad_config();
  test_learns();
  double cls6 = NAN, mean6 = NAN;
  test_resume(false, &cls6);
  test_resume(true, &mean6);
  th_check(cls6 != mean6, "mean pooling trains another model (step 6 loss %.6f vs CLS %.6f)", mean6, cls6);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) return 1;
  return th_finish();
}
