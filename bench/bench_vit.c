// Vision transformer benchmark: ViT-B/16 (preset "vit-base/16": 224 x 224 x 3 images,
// 16 x 16 patches -> 196 patches + CLS = 197 tokens, d_model 768, 12 layers, 12 heads,
// d_ff 3072, 1000 classes, pre-norm LayerNorm, erf GELU, learned positions) training and
// inference images/s, f32 and bf16, on a synthetic image array file (random 8-bit pixels
// and labels, fixed seed) written to a temporary folder and deleted at the end.
//
// training: an ot_trainer of task classify on that file, built as `ot train --task
//   classify --model vit-base/16 --train-images FILE --batch-size 8 [--dtype bf16]`
//   builds it (the classify defaults: AdamW lr 1e-3 cosine, betas 0.9/0.999, weight decay
//   0.05 on matrices, CLS and positions, global-norm clip 1.0; no held-out set). One timed
//   step = ot_trainer_step: the loader's random resized crop (from 0.6 of the area,
//   bilinear) and normalization of the batch, forward, cross-entropy, backward, clip,
//   AdamW (f32 master weights and moments; bf16: a bf16 weight copy, bf16 activations).
// inference: ot_classify_images (as `ot classify --weights f32|bf16|int8 --batch B`): a
//   model created for run.B = B in the weights' dtype (int8: f32, then its block matrices
//   and classifier read as int8 per row), random init; one timed call = B images resized
//   (a copy at 224) and normalized, the forward, the softmax and the top-1 class.
// Each configuration: --warmup untimed + --steps timed calls; images/s = B / median.
//
// FLOPs per image (ot's convention, ot_model_flops_per_token x 197 tokens): forward =
// 2 x the multiply-adds of every matmul: per layer QKV, attention output and the two MLP
// matrices (4 C^2 + 2 C F per token) plus bidirectional attention (QK^T and PV: 2 T C per
// token), the patch projection (196 x 768 x 768) and the classifier on the CLS row: 17.56
// GMAC = 35.1 GFLOP for ViT-B/16 (the "17.6 GFLOPs" of the ViT/DeiT tables count MACs);
// training = 3 x forward (105.4 GFLOP). Norms, softmax, GELU and the optimizer are not
// counted. MFU = FLOP/s over the measured f32 FMA peak (ot_measure_fma_peak on all
// threads, or one thread's x threads when larger: the rule of `ot train`); bf16 runs are
// rated against the same f32 peak.
//
// Usage: bench_vit [--mode train|infer|all] [--dtype f32|bf16|int8|both|all] [--batch B]
//                  [--steps N] [--warmup N] [--threads N] [--model PRESET]
//                  [--bf16-gemm auto|native|convert] [--json] [--no-mfu] [--profile]
// --batch B overrides the batch of every configuration (default: train 8, infer 1 and 32).
// --dtype both = f32 and bf16; all adds int8 (inference only; training skips it).
// --json: also one line per configuration, {"impl":"ot","mode":...}, for bench/vit_speed.py.
// --profile: the profiler's per-span table (ot_prof_summary) over each configuration's timed
// steps (the spans add a little time of their own).
// Asserts nothing; exits 1 only if the library reports an error.
#include "ot/ot.h"
#include "internal.h"
#include "ops/gemm_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench_stats.h"

#define MAX_STEPS 1000
#define MAX_CONF 16

typedef struct {
  bool train, infer, json, mfu, profile;
  ot_dtype dts[3];
  int ndt;
  int batch, steps, warmup, threads, gemm;   // batch 0: the defaults; gemm -1 auto, 0 convert, 1 native
  const char *model;
} opts;

typedef struct {
  const char *mode;
  char dtype[8], gemm[8];
  int batch, timed;
  double med, min, img_s, gflops, mfu, peak_mib;
} result;

static void usage(FILE *f) {
  fprintf(f, "usage: bench_vit [--mode train|infer|all (all)] [--dtype f32|bf16|int8|both|all (both)]\n"
             "                 [--batch B (train 8, infer 1 and 32)] [--steps N (3)] [--warmup N (1)]\n"
             "                 [--threads N (2)] [--model PRESET (vit-base/16)]\n"
             "                 [--bf16-gemm auto|native|convert (auto)] [--json] [--no-mfu] [--profile]\n");
}

static int parse_int(const char *flag, const char *v, int lo, int hi) {
  char *end = NULL;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || x < lo || x > hi) {
    fprintf(stderr, "bench_vit: %s '%s' must be an integer in [%d, %d]\n", flag, v ? v : "", lo, hi);
    exit(2);
  }
  return (int)x;
}

static void parse(opts *o, int argc, char **argv) {
  *o = (opts){true, true, false, true, false, {OT_F32, OT_BF16}, 2, 0, 3, 1, 2, -1, "vit-base/16"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
    if (!strcmp(a, "--json")) { o->json = true; continue; }
    if (!strcmp(a, "--no-mfu")) { o->mfu = false; continue; }
    if (!strcmp(a, "--profile")) { o->profile = true; continue; }
    if (!v) { fprintf(stderr, "bench_vit: %s needs a value\n", a); usage(stderr); exit(2); }
    i++;
    if (!strcmp(a, "--steps")) o->steps = parse_int(a, v, 1, MAX_STEPS);
    else if (!strcmp(a, "--warmup")) o->warmup = parse_int(a, v, 0, MAX_STEPS);
    else if (!strcmp(a, "--batch")) o->batch = parse_int(a, v, 1, 4096);
    else if (!strcmp(a, "--threads")) o->threads = parse_int(a, v, 1, 1024);
    else if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--mode")) {
      o->train = !strcmp(v, "train") || !strcmp(v, "all");
      o->infer = !strcmp(v, "infer") || !strcmp(v, "all");
      if (!o->train && !o->infer) { fprintf(stderr, "bench_vit: --mode '%s' must be train, infer or all\n", v); exit(2); }
    } else if (!strcmp(a, "--bf16-gemm")) {
      if (!strcmp(v, "auto")) o->gemm = -1;
      else if (!strcmp(v, "native")) o->gemm = 1;
      else if (!strcmp(v, "convert")) o->gemm = 0;
      else { fprintf(stderr, "bench_vit: --bf16-gemm '%s' must be auto, native or convert\n", v); exit(2); }
    } else if (!strcmp(a, "--dtype")) {
      if (!strcmp(v, "f32")) { o->dts[0] = OT_F32; o->ndt = 1; }
      else if (!strcmp(v, "bf16")) { o->dts[0] = OT_BF16; o->ndt = 1; }
      else if (!strcmp(v, "int8")) { o->dts[0] = OT_I8; o->ndt = 1; }
      else if (!strcmp(v, "both")) { o->dts[0] = OT_F32; o->dts[1] = OT_BF16; o->ndt = 2; }
      else if (!strcmp(v, "all")) { o->dts[0] = OT_F32; o->dts[1] = OT_BF16; o->dts[2] = OT_I8; o->ndt = 3; }
      else { fprintf(stderr, "bench_vit: --dtype '%s' must be f32, bf16, int8, both or all\n", v); exit(2); }
    } else {
      fprintf(stderr, "bench_vit: unknown option '%s'\n", a);
      usage(stderr);
      exit(2);
    }
  }
}

static void must(ot_status s, const char *what) {
  if (s == OT_OK) return;
  fprintf(stderr, "bench_vit: %s failed: %s\n", what, ot_last_error());
  exit(1);
}

// Releases the per-thread scratch of this thread and of the OpenMP workers, so
// that the next configuration's memory peak is its own.
static void release_scratch(void) {
#pragma omp parallel
  ot_scratch_release();
  ot_scratch_release();
}

static void begin(const opts *o, ot_dtype dt, result *r, const char *mode, int B) {
  release_scratch();
  ot_mem_reset_peak();
  ot__gemm_bf16_set_mode(dt == OT_BF16 ? o->gemm : -1);
  memset(r, 0, sizeof *r);
  r->mode = mode;
  r->batch = B;
  snprintf(r->dtype, sizeof r->dtype, "%s", dt == OT_I8 ? "int8" : ot_dtype_name(dt));
  snprintf(r->gemm, sizeof r->gemm, "%s", dt != OT_BF16 ? "-" : ot__gemm_bf16_native() ? "native" : "convert");
  printf("\n== %s %s%s%s, batch %d, %d threads ==\n", mode, r->dtype, dt == OT_BF16 ? " GEMMs " : "",
         dt == OT_BF16 ? r->gemm : "", B, o->threads);
  fflush(stdout);
}

// Step s is about to run: the profiler on from the first timed step (--profile).
static void prof_step(const opts *o, int s) {
  if (!o->profile || s != o->warmup) return;
  ot_prof_reset();
  ot_prof_enable(true);
}

// times [n]: the step times; flops: per image.
static void finish(const opts *o, result *r, double *times, int n, double flops, double peak) {
  if (o->profile) {
    ot_prof_enable(false);
    ot_prof_summary(stdout);
  }
  r->timed = n;
  r->med = median(times, n);
  r->min = times[0];
  r->img_s = r->batch / r->med;
  r->gflops = flops * r->img_s * 1e-9;
  r->mfu = peak > 0 ? r->gflops / peak : 0;
  r->peak_mib = ot_mem_peak_total() / 1048576.0;
  ot__gemm_bf16_set_mode(-1);
  printf("median of %d: %.4f s | %.2f images/s | %.1f GFLOP/s", n, r->med, r->img_s, r->gflops);
  if (peak > 0) printf(" | MFU %.1f%%", 100 * r->mfu);
  printf(" | memory peak %.1f MiB\n", r->peak_mib);
  if (o->json)
    printf("{\"impl\":\"ot\",\"model\":\"%s\",\"mode\":\"%s\",\"dtype\":\"%s\",\"gemm\":\"%s\",\"batch\":%d,"
           "\"threads\":%d,\"steps\":%d,\"median_s\":%.6f,\"min_s\":%.6f,\"img_s\":%.4f,\"gflop_s\":%.2f,"
           "\"peak_mib\":%.1f}\n", o->model, r->mode, r->dtype, r->gemm, r->batch, o->threads, r->timed,
           r->med, r->min, r->img_s, r->gflops, r->peak_mib);
  fflush(stdout);
}

static void run_train(const opts *o, const char *path, ot_dtype dt, int B, double flops, double peak,
                      result *r) {
  begin(o, dt, r, "train", B);
  ot_train_config c;
  ot_train_config_default(&c);
  must(ot_train_config_set(&c, "task", "classify", "bench_vit"), "task classify");
  must(ot_train_config_set(&c, "model", o->model, "--model"), "--model");
  snprintf(c.train_images, sizeof c.train_images, "%s", path);
  c.val_images[0] = 0;
  c.batch_size = B;
  c.dtype = dt;
  c.threads = o->threads;
  c.steps = o->warmup + o->steps;
  c.quiet = true;
  c.measure_peak = false;
  const double t0 = ot_now();
  ot_trainer *t = NULL;
  must(ot_trainer_create(&t, &c), "ot_trainer_create");
  const ot_mem_plan *pl = ot_model_plan_of(ot_trainer_model(t));
  printf("created in %.1f s; plan MiB: params %.1f + bf16 copy %.1f + grads %.1f + activations %.1f + "
         "workspace %.1f + optimizer %.1f\n", ot_now() - t0, pl->params / 1048576.0, pl->params_bf16 / 1048576.0,
         pl->grads / 1048576.0, pl->act_saved / 1048576.0, pl->workspace / 1048576.0, pl->optim / 1048576.0);
  double times[MAX_STEPS];
  int n = 0;
  for (int s = 0; s < o->warmup + o->steps; s++) {
    ot_step_info st;
    prof_step(o, s);
    const double ts = ot_now();
    must(ot_trainer_step(t, &st), "ot_trainer_step");
    const double sec = ot_now() - ts;
    if (s >= o->warmup) times[n++] = sec;
    printf("  %s step %d: %.4f s  %.2f images/s  loss %.4f\n", s >= o->warmup ? "timed " : "warmup", s + 1,
           sec, B / sec, st.loss);
    fflush(stdout);
  }
  finish(o, r, times, n, flops, peak);
  ot_trainer_free(t);
}

static void run_infer(const opts *o, const ot_images *set, ot_dtype dt, int B, double flops, double peak,
                      result *r) {
  begin(o, dt, r, "infer", B);
  ot_model_config mc;
  must(ot_model_config_preset(&mc, o->model), "--model");
  // as ot classify (ot_model_load_hf_infer): recompute full, no gradient buffer
  const ot_run_config run = {B, mc.max_seq, dt == OT_I8 ? OT_F32 : dt, OT_RECOMPUTE_FULL, -1};
  ot_model_part part = ot_model_part_whole(&mc);
  part.external_grads = true;
  ot_model *m = NULL;
  must(ot_model_create_part(&m, &mc, &run, &part), "ot_model_create");
  must(ot_model_init(m, 1337), "ot_model_init");
  if (dt == OT_I8) must(ot_model_set_weights_q(m, OT_QW_INT8, 0), "int8 weights");
  ot_image_aug a = {mc.image_size, mc.image_size, {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}, false, 1.0f, false};
  int64_t *idx = malloc(sizeof *idx * (size_t)B);
  int32_t *cls = malloc(sizeof *cls * (size_t)B);
  float *p = malloc(sizeof *p * (size_t)B);
  if (!idx || !cls || !p) { fprintf(stderr, "bench_vit: out of memory\n"); exit(1); }
  double times[MAX_STEPS];
  int n = 0;
  for (int s = 0; s < o->warmup + o->steps; s++) {
    for (int i = 0; i < B; i++) idx[i] = ((int64_t)s * B + i) % set->n;
    prof_step(o, s);
    const double ts = ot_now();
    must(ot_classify_images(m, set, &a, idx, B, 1, cls, p), "ot_classify_images");
    const double sec = ot_now() - ts;
    if (s >= o->warmup) times[n++] = sec;
    printf("  %s call %d: %.4f s  %.2f images/s  (image 0: class %d p %.4f)\n",
           s >= o->warmup ? "timed " : "warmup", s + 1, sec, B / sec, cls[0], p[0]);
    fflush(stdout);
  }
  finish(o, r, times, n, flops, peak);
  free(idx);
  free(cls);
  free(p);
  ot_model_free(m);
}

int main(int argc, char **argv) {
  const double t_start = ot_now();
  opts o;
  parse(&o, argc, argv);
  ot_threads_set(o.threads);
  ot_model_config mc;
  must(ot_model_config_preset(&mc, o.model), "--model");
  if (mc.arch != OT_ARCH_VIT) {
    fprintf(stderr, "bench_vit: --model %s is not a vision transformer (vit-base/16, vit-small/16, "
                    "vit-tiny/16, vit-digits)\n", o.model);
    return 2;
  }
  const int T = mc.max_seq;
  const double ftrain = ot_model_flops_per_token(&mc, T) * T, finfer = ftrain / 3;
  printf("bench_vit: %s training (ot_trainer_step) and inference (ot_classify_images), synthetic images\n",
         o.model);
  ot_model_config_print(stdout, &mc);
  printf("kernels %s, %d threads, %d warm-up + %d timed per configuration; %.2f GFLOP per image "
         "forward, %.2f training (ot convention: 2 x matmul MACs incl. attention, x 3 for training)\n",
         ot_isa_name(ot_isa_active()), ot_threads_get(), o.warmup, o.steps, finfer * 1e-9, ftrain * 1e-9);
  double peak = 0;
  if (o.mfu) {
    const double peak_all = ot_measure_fma_peak();
    ot_threads_set(1);
    const double peak_one = ot_measure_fma_peak();
    ot_threads_set(o.threads);
    peak = peak_all > peak_one * o.threads ? peak_all : peak_one * o.threads;
    printf("measured f32 FMA peak: %.1f GFLOP/s on %d threads (1 thread: %.1f); MFU uses %.1f\n", peak_all,
           o.threads, peak_one, peak);
  }

  // the synthetic image set: random pixels and labels, fixed seed
  const int nimg = o.batch > 64 ? o.batch : 64, S = mc.image_size, ch = mc.channels;
  ot_images set = {nimg, S, S, ch, mc.vocab, 255, NULL, NULL};
  set.pix = malloc((size_t)nimg * S * S * ch);
  set.labels = malloc(sizeof *set.labels * (size_t)nimg);
  if (!set.pix || !set.labels) { fprintf(stderr, "bench_vit: out of memory\n"); return 1; }
  uint64_t rng = 0x7669746265ull;
  for (size_t i = 0; i < (size_t)nimg * S * S * ch; i++) set.pix[i] = (uint8_t)(splitmix(&rng) >> 56);
  for (int i = 0; i < nimg; i++) set.labels[i] = (int32_t)(splitmix(&rng) % (uint64_t)mc.vocab);
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/bench_vit_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) { perror("bench_vit: mkdtemp"); return 1; }
  snprintf(path, sizeof path, "%s/images.otimg", dir);
  must(ot_images_save(&set, path), "ot_images_save");

  result res[MAX_CONF];
  int nres = 0;
  for (int d = 0; d < o.ndt && o.train; d++) {
    if (o.dts[d] == OT_I8) continue;   // int8 is an inference format
    run_train(&o, path, o.dts[d], o.batch ? o.batch : 8, ftrain, peak, &res[nres++]);
  }
  const int ib[2] = {o.batch ? o.batch : 1, 32};
  for (int d = 0; d < o.ndt && o.infer; d++)
    for (int k = 0; k < (o.batch ? 1 : 2); k++) run_infer(&o, &set, o.dts[d], ib[k], finfer, peak, &res[nres++]);
  unlink(path);
  rmdir(dir);
  free(set.pix);
  free(set.labels);

  printf("\ntotal run time %.1f s\n\n", ot_now() - t_start);
  printf("%-6s %-6s %-8s %6s %6s %10s %10s %10s %9s %7s %10s\n", "mode", "dtype", "bf16 mm", "batch", "steps",
         "median s", "min s", "images/s", "GFLOP/s", "MFU", "peak MiB");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    char mfu[16] = "-";
    if (peak > 0) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * r->mfu);
    printf("%-6s %-6s %-8s %6d %6d %10.4f %10.4f %10.2f %9.1f %7s %10.1f\n", r->mode, r->dtype, r->gemm,
           r->batch, r->timed, r->med, r->min, r->img_s, r->gflops, mfu, r->peak_mib);
  }
  return 0;
}
