// `ot quantize`: load a checkpoint or Hugging Face directory and write its
// weights quantized (int8 per channel / per group, or bf16) to one safetensors
// file that inference loads with ot_quant_file_load.
#include "cli.h"
#include "ot/quant.h"
#include <math.h>
#include <sys/stat.h>

typedef struct {
  const char *model_dir, *out, *calib;
  int kind, group, threads, calib_batches, calib_batch, calib_seq, calib_rows;
  bool group_set, calib_clip_only;
} quantize_opts;

static const cli_flag k_flags[] = {
    CLI_S("--model", quantize_opts, model_dir, "DIR",
          "a checkpoint of `ot train` (step_NNNNNN/ or its run directory), or a\n"
          "Hugging Face directory (config.json + model.safetensors)"),
    CLI_S("--out", quantize_opts, out, "FILE", "the quantized file (written atomically)"),
    {"--dtype", CLI_ENUM, offsetof(quantize_opts, kind), 0, NULL, 0, 0, "int8|bf16", {OT_QW_INT8, OT_QW_BF16},
     "int8: symmetric, scale = absmax / 127 per row or per group;\n"
     "bf16: rounded to nearest even"},
    {"--group", CLI_INT, offsetof(quantize_opts, group), CLI_MARK(quantize_opts, group_set), "G", 0, 128, NULL,
     {0},
     "int8 scale group along the input features: 0 = one scale per output\n"
     "row, or 32, 64, 128 (default 64; must divide every matrix's inputs)"},
    CLI_S("--calibrate", quantize_opts, calib, "DATA",
          "calibrated int8: token shards as `ot prepare` writes them (a directory:\n"
          "its train_*.bin; or a glob pattern); each layer's scales are searched on\n"
          "them (AWQ-style: per-input-channel scales folded into the op before,\n"
          "clip ratios per output row; see README)"),
    CLI_I("--calib-batches", quantize_opts, calib_batches, 1, 100000, "N", "calibration batches (default 8)"),
    CLI_I("--calib-batch", quantize_opts, calib_batch, 1, 4096, "B", "sequences per calibration batch (default 4)"),
    CLI_I("--calib-seq", quantize_opts, calib_seq, 1, 1 << 20, "T",
          "tokens per calibration sequence (default min(256, max_seq))"),
    CLI_I("--calib-rows", quantize_opts, calib_rows, 1, 1 << 20, "R",
          "calibration rows kept per layer for the search (default 512)"),
    CLI_B("--calib-clip-only", quantize_opts, calib_clip_only,
          "search clip ratios only (no per-channel scales)"),
    CLI_I("--threads", quantize_opts, threads, 1, 4096, "N", "threads (default: OMP_NUM_THREADS)"),
};

const cli_command cli_quantize_command = {
    "quantize", "--model DIR --out FILE --dtype int8|bf16 [--group 0|32|64|128] [--calibrate DATA]",
    "write a model's matrices quantized to one safetensors file",
    "Writes every matrix of a model (linear weights, token embedding, lm_head) quantized to one\n"
    "safetensors file (format \"ot-quantized\", the model config in its metadata); learned\n"
    "positions, norms and biases stay f32. Inference reads it with ot_quant_file_load.\n"
    "With --calibrate, int8 scales are searched on data (calibrated post-training\n"
    "quantization); a checkpoint trained with `ot train --qat` quantizes exactly as its\n"
    "fake-quantized forward ran when --group is its qat_group (the default then).\n",
    k_flags, sizeof k_flags / sizeof k_flags[0], NULL, NULL, false};

// Largest normalized error ||W - deq(Q)|| / ||W|| over the quantized matrices; *worst names it.
static double worst_error(const ot_qmodel *q, const ot_model *m, const char **worst) {
  double we = 0;
  *worst = "";
  const float *w = ot_model_params((ot_model *)m);
  for (int i = 0; i < q->n; i++) {
    const ot_qtensor *t = &q->t[i];
    if (t->ndim != 2 || t->w.kind == OT_QW_F32) continue;
    const ot_param *p = ot_model_param_at(m, ot_model_param_find(m, t->name));
    float *d = malloc((size_t)t->w.rows * t->w.cols * sizeof(float));
    if (!p || !d || ot_qweight_dequantize(&t->w, d) != OT_OK) { free(d); continue; }
    double e2 = 0, w2 = 0;
    for (size_t k = 0; k < p->numel; k++) {
      double a = w[p->offset + k], b = d[k];
      e2 += (a - b) * (a - b);
      w2 += a * a;
    }
    free(d);
    double e = w2 > 0 ? sqrt(e2 / w2) : 0;
    if (e > we) { we = e; *worst = t->name; }
  }
  return we;
}

// n batches [B, T] of the shards `data` (a directory: its train_*.bin; else a glob) in a
// seeded window order -> a new buffer [n, B, T] (NULL: printed the error).
static int32_t *read_calibration(const char *data, int64_t vocab, int n, int B, int T) {
  char pat[OT_PATH_MAX + 32];
  struct stat st;
  if (stat(data, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(pat, sizeof pat, "%s/train_*.bin", data);
  else snprintf(pat, sizeof pat, "%s", data);
  ot_loader_config lc = {0};
  lc.pattern = pat;
  lc.vocab_size = vocab;
  lc.B = B;
  lc.T = T;
  lc.shuffle = true;
  lc.seed = 1234;
  ot_loader *L = NULL;
  int32_t *tok = malloc((size_t)n * B * T * sizeof(int32_t));
  ot_status s = tok ? ot_loader_open(&L, &lc) : ot_error(OT_ENOMEM, "out of memory");
  for (int b = 0; b < n && s == OT_OK; b++) {
    const int32_t *rows = NULL;
    s = ot_loader_next(L, &rows);
    for (int r = 0; r < B && s == OT_OK; r++)
      memcpy(tok + ((size_t)b * B + r) * T, rows + (size_t)r * (T + 1), (size_t)T * sizeof(int32_t));
  }
  ot_loader_close(L);
  if (s != OT_OK) {
    fprintf(stderr, "ot quantize: --calibrate %s: %s\n", data, ot_last_error());
    free(tok);
    return NULL;
  }
  return tok;
}

// The checkpoint's training keys (model shape, qat_group), or NULL (printed).
static ot_train_config *ckpt_config(const char *dir) {
  char ckpt[OT_PATH_MAX + 64];
  ot_train_config *tc = calloc(1, sizeof *tc);
  ot_status s = tc ? ot_ckpt_resolve(dir, ckpt, sizeof ckpt) : ot_error(OT_ENOMEM, "out of memory");
  if (s == OT_OK) s = ot_ckpt_train_config(ckpt, tc);
  if (s != OT_OK) {
    fprintf(stderr, "ot quantize: loading %s: %s\n", dir, ot_last_error());
    free(tc);
    return NULL;
  }
  return tc;
}

int ot_cmd_quantize(int argc, char **argv) {
  quantize_opts o = {.kind = -1, .group = 64, .calib_batches = 8, .calib_batch = 4};
  const int pr = cli_parse(&cli_quantize_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  const char *model_dir = o.model_dir, *out = o.out;
  int group = o.group;
  const int threads = o.threads;
  if (!model_dir || !out || o.kind < 0)
    return cli_usage_error(&cli_quantize_command, "--model, --out and --dtype are required");
  const ot_qw_kind kind = (ot_qw_kind)o.kind;
  if (kind == OT_QW_INT8 && group != 0 && group != 32 && group != 64 && group != 128) {
    fprintf(stderr, "ot quantize: --group %d unsupported (use 0 = per output row, 32, 64 or 128)\n", group);
    return 2;
  }
  if (kind == OT_QW_BF16) {
    if (o.group_set && group) fprintf(stderr, "ot quantize: --group applies to int8 only; ignored for bf16\n");
    group = 0;
  }
  if (o.calib && kind != OT_QW_INT8)
    return cli_usage_error(&cli_quantize_command, "--calibrate searches int8 scales: use --dtype int8");
  if (threads) ot_threads_set(threads);
  ot_train_config *tc = ckpt_config(model_dir);
  if (!tc) return 1;
  if (tc->qat && kind == OT_QW_INT8) {   // a QAT checkpoint: its forward ran on these scales
    if (!o.group_set) group = tc->qat_group;
    else if (group != tc->qat_group)
      fprintf(stderr, "ot quantize: warning: the checkpoint was trained with --qat-group %d; --group %d "
              "quantizes other weights than its forward ran on\n", tc->qat_group, group);
    if (o.calib)
      fprintf(stderr, "ot quantize: warning: --calibrate on a QAT checkpoint changes the scales it was "
              "trained with\n");
  }
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  int32_t *calib = NULL;
  if (o.calib) {
    const int T = o.calib_seq ? o.calib_seq : tc->model.max_seq < 256 ? tc->model.max_seq : 256;
    if (T > tc->model.max_seq) {
      fprintf(stderr, "ot quantize: --calib-seq %d exceeds the model's max_seq %d\n", T, tc->model.max_seq);
      free(tc);
      return 2;
    }
    run.B = o.calib_batch;
    run.T = T;
    calib = read_calibration(o.calib, tc->model.vocab, o.calib_batches, run.B, run.T);
    if (!calib) { free(tc); return 1; }
  }
  free(tc);
  ot_model *m = NULL;
  ot_qmodel *q = NULL;
  char ckpt[OT_PATH_MAX + 64], data_dir[OT_PATH_MAX];
  double t0 = ot_now();
  ot_status s = cli_load_checkpoint(model_dir, &run, &m, ckpt, data_dir);
  if (s != OT_OK) {
    fprintf(stderr, "ot quantize: loading %s: %s\n", model_dir, ot_last_error());
    free(calib);
    return 1;
  }
  ot_qcalib_report rep = {0};
  if (calib) {
    ot_qcalib_config cc = {group, o.calib_rows, {0, 0, 0.0f, false}, o.calib_clip_only};
    s = ot_qmodel_calibrate(&q, m, calib, o.calib_batches, &cc, &rep);
    free(calib);
  } else {
    s = ot_qmodel_from_model(&q, m, kind, group);
  }
  if (s == OT_OK) s = ot_quant_file_save(q, out);
  if (s != OT_OK) {
    fprintf(stderr, "ot quantize: %s\n", ot_last_error());
    ot_qmodel_free(q);
    ot_model_free(m);
    return 1;
  }
  const ot_model_config *c = ot_model_config_of(m);
  size_t f32_bytes = 0;
  int nq = 0;
  for (int i = 0; i < q->n; i++) {
    f32_bytes += (size_t)q->t[i].w.rows * q->t[i].w.cols * sizeof(float);
    nq += q->t[i].ndim == 2 && q->t[i].w.kind != OT_QW_F32;
  }
  const char *worst = "";
  double err = rep.matrices ? 0.0 : worst_error(q, m, &worst);
  char what[32];
  if (kind == OT_QW_BF16) snprintf(what, sizeof what, "bf16");
  else if (group) snprintf(what, sizeof what, "int8 (group %d)", group);
  else snprintf(what, sizeof what, "int8 (per-channel)");
  printf("ot quantize: %s (%s: %d layers, d_model %d, vocab %d) -> %s\n", ckpt, c->name, c->n_layers,
         c->d_model, c->vocab, out);
  printf("  %d matrices to %s, %d other tensors f32: %.1f MB -> %.1f MB (%.2fx smaller)\n", nq, what,
         q->n - nq, f32_bytes / 1e6, ot_qmodel_bytes(q) / 1e6, (double)f32_bytes / (double)ot_qmodel_bytes(q));
  if (rep.matrices)
    printf("  calibrated on %d x %d x %d tokens (%d rows per layer searched): %d matrices, %d with "
           "per-channel scales; mean relative output error %.4g%% -> %.4g%% (plain PTQ -> calibrated)\n",
           o.calib_batches, run.B, run.T, rep.rows, rep.matrices, rep.scaled, 100 * rep.rel_plain,
           100 * rep.rel);
  if (!rep.matrices)   // (calibrated matrices hold W diag(s), not W)
    printf("  largest relative weight error ||W - deq(Q)|| / ||W||: %.3g%% (%s)\n", 100 * err, worst);
  printf("  %.1f s\n", ot_now() - t0);
  ot_qmodel_free(q);
  ot_model_free(m);
  return 0;
}
