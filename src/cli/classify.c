// `ot classify`: images in, the k most probable classes with their
// probabilities out, batched, with a vision transformer from an `ot train
// --task classify` checkpoint or a Hugging Face ViTForImageClassification
// directory. Thin: loading is the library's, the batching and the softmax are
// ot_classify_images'.
#include "cli.h"

typedef struct {
  const char *model, *images;
  int top_k, batch;
  int weights;
  bool weights_set, accuracy, quiet;
  const char *mean, *std;
} classify_opts;

static const cli_flag k_flags[] = {
    CLI_S("--model", classify_opts, model, "DIR",
          "checkpoint (or run directory) of `ot train --task classify`, or a Hugging Face\n"
          "ViTForImageClassification directory (config.json + model.safetensors)"),
    CLI_S("--images", classify_opts, images, "FILE",
          "an image array file, or a list of '<PGM/PPM file> <label>' lines (label: any class\n"
          "number, e.g. 0, when unknown)"),
    CLI_I("--top-k", classify_opts, top_k, 1, 1 << 20, "K", "classes printed per image (default 5, at most the classes)"),
    CLI_I("--batch", classify_opts, batch, 1, 1 << 16, "N", "images per forward (default 32)"),
    CLI_WEIGHTS("--weights", classify_opts, weights, CLI_MARK(classify_opts, weights_set),
                "weights and activations: f32 (default), bf16, or int8 (block matrices and classifier\n"
                "int8 with one scale per row, f32 activations; the patch projection stays f32)"),
    CLI_S("--image-mean", classify_opts, mean, "M",
          "per-channel mean of pixel / maxval, one value or three (default: the checkpoint's\n"
          "training setting, else 0.5 as HF's ViTImageProcessor)"),
    CLI_S("--image-std", classify_opts, std, "S", "per-channel std (same defaults)"),
    CLI_B("--accuracy", classify_opts, accuracy, "print the top-1 accuracy against the file's labels"),
    CLI_B("--quiet", classify_opts, quiet, "only the accuracy and the timing (no line per image)"),
};

const cli_command cli_classify_command = {
    "classify", "--model DIR --images FILE [--top-k K] [--batch N] [--weights f32|bf16|int8]",
    "classify images with a vision transformer: the top-k classes and their probabilities",
    "Resizes every image (bilinear) to the model's image size, normalizes it and prints one\n"
    "line per image: its index, then K 'class:probability' pairs, most probable first.\n",
    k_flags, sizeof k_flags / sizeof k_flags[0],
    "example: ot classify --model out/classify --images data/digits/heldout.otimg --top-k 3 --accuracy\n",
    NULL, false};

static int fail(const char *what) {
  fprintf(stderr, "ot classify: %s: %s\n", what, ot_last_error());
  return 1;
}

int ot_cmd_classify(int argc, char **argv) {
  classify_opts o = {0};
  o.top_k = 5;
  o.batch = 32;
  o.weights = OT_F32;
  const int pr = cli_parse(&cli_classify_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (!o.model || !o.images) return cli_usage_error(&cli_classify_command, "--model and --images are required");
  // the model: an ot checkpoint (its settings: the normalization it trained with) or an HF directory
  char ckpt[OT_PATH_MAX + 64];
  if (ot_ckpt_resolve(o.model, ckpt, sizeof ckpt) != OT_OK) return fail("--model");
  ot_train_config *tc = calloc(1, sizeof *tc);
  ot_settings *l = calloc(1, sizeof *l);
  if (!tc || !l) { free(tc); free(l); return fail("memory"); }
  ot_train_config_default(tc);
  for (int i = 0; i < 3; i++) tc->image_mean[i] = tc->image_std[i] = 0.5f;
  int rc = 0;
  if (ot_ckpt_has_settings(ckpt) &&
      (ot_ckpt_read_config(ckpt, l) != OT_OK || ot_train_config_apply(tc, l, NULL) != OT_OK))
    rc = fail(ckpt);
  if (!rc && o.mean && ot_train_config_set(tc, "image-mean", o.mean, "--image-mean") != OT_OK) rc = fail("--image-mean");
  if (!rc && o.std && ot_train_config_set(tc, "image-std", o.std, "--image-std") != OT_OK) rc = fail("--image-std");
  ot_model *m = NULL;
  // int8: the model in f32, its block matrices and classifier then read as int8 (one scale per row)
  const bool i8 = o.weights == OT_I8;
  // for inference: no gradient buffer, and recompute full (a forward without gradients keeps
  // only each block's input, not every activation a backward would read): ViT-B/16 at batch
  // 32 peaked at 4616 MiB with both, 1564 MiB with recompute full (bench_vit)
  ot_run_config r = {o.batch, 2, i8 ? OT_F32 : (ot_dtype)o.weights, OT_RECOMPUTE_FULL, -1};
  if (!rc && ot_model_load_hf_infer(&m, ckpt, &r) != OT_OK) rc = fail(ckpt);
  const ot_model_config *c = m ? ot_model_config_of(m) : NULL;
  if (!rc && c->arch != OT_ARCH_VIT) {
    fprintf(stderr, "ot classify: %s holds '%s', not a vision transformer (use ot generate / ot translate)\n",
            ckpt, c->name);
    rc = 1;
  }
  if (!rc && i8 && ot_model_set_weights_q(m, OT_QW_INT8, 0) != OT_OK) rc = fail("--weights int8");
  ot_images *s = NULL;
  if (!rc && ot_images_load(&s, o.images, c->channels, 0) != OT_OK) rc = fail("--images");
  const int k = !rc && o.top_k > c->vocab ? c->vocab : o.top_k;
  int64_t *idx = NULL;
  int32_t *cls = NULL;
  float *p = NULL;
  if (!rc) {
    idx = malloc(sizeof *idx * (size_t)s->n);
    cls = malloc(sizeof *cls * (size_t)s->n * k);
    p = malloc(sizeof *p * (size_t)s->n * k);
    if (!idx || !cls || !p) rc = fail("memory");
  }
  if (!rc) {
    for (int i = 0; i < s->n; i++) idx[i] = i;
    ot_image_aug a = {c->image_size, c->image_size, {0}, {0}, false, 1.0f, false};
    for (int i = 0; i < 3; i++) {
      a.mean[i] = tc->image_mean[i];
      a.std[i] = tc->image_std[i];
    }
    const double t0 = ot_now();
    if (ot_classify_images(m, s, &a, idx, s->n, k, cls, p) != OT_OK) rc = fail("classify");
    const double sec = ot_now() - t0;
    int right = 0;
    for (int i = 0; !rc && i < s->n; i++) {
      right += cls[(size_t)i * k] == s->labels[i];
      if (o.quiet) continue;
      printf("%d", i);
      for (int q = 0; q < k; q++) printf("%c%d:%.4f", q ? ' ' : '\t', cls[(size_t)i * k + q], p[(size_t)i * k + q]);
      printf("\n");
    }
    if (!rc && o.accuracy) printf("top-1 %.2f%% (%d of %d images)\n", 100.0 * right / s->n, right, s->n);
    if (!rc)
      fprintf(stderr, "ot classify: %d images of %dx%d in %.3f s (%.1f images/s), %s, batch %d\n", s->n,
              c->image_size, c->image_size, sec, s->n / (sec > 0 ? sec : 1e-9), i8 ? "int8" : ot_dtype_name((ot_dtype)o.weights),
              o.batch);
  }
  free(idx);
  free(cls);
  free(p);
  ot_images_free(s);
  ot_model_free(m);
  free(tc);
  free(l);
  return rc;
}
