// `ot quantize`: load a checkpoint or Hugging Face directory and write its
// weights quantized (int8 per channel / per group, or bf16) to one safetensors
// file that inference loads with ot_quant_file_load.
#include "cli.h"
#include "ot/quant.h"
#include <math.h>

typedef struct {
  const char *model_dir, *out;
  int kind, group, threads;
  bool group_set;
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
    CLI_I("--threads", quantize_opts, threads, 1, 4096, "N", "threads (default: OMP_NUM_THREADS)"),
};

const cli_command cli_quantize_command = {
    "quantize", "--model DIR --out FILE --dtype int8|bf16 [--group 0|32|64|128]",
    "write a model's matrices quantized to one safetensors file",
    "Writes every matrix of a model (linear weights, token embedding, lm_head) quantized to one\n"
    "safetensors file (format \"ot-quantized\", the model config in its metadata); learned\n"
    "positions, norms and biases stay f32. Inference reads it with ot_quant_file_load.\n",
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

int ot_cmd_quantize(int argc, char **argv) {
  quantize_opts o = {.kind = -1, .group = 64};
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
  if (threads) ot_threads_set(threads);

  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  ot_qmodel *q = NULL;
  char ckpt[OT_PATH_MAX + 64], data_dir[OT_PATH_MAX];
  double t0 = ot_now();
  ot_status s = cli_load_checkpoint(model_dir, &run, &m, ckpt, data_dir);
  if (s != OT_OK) { fprintf(stderr, "ot quantize: loading %s: %s\n", model_dir, ot_last_error()); return 1; }
  s = ot_qmodel_from_model(&q, m, kind, group);
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
  double err = worst_error(q, m, &worst);
  char what[32];
  if (kind == OT_QW_BF16) snprintf(what, sizeof what, "bf16");
  else if (group) snprintf(what, sizeof what, "int8 (group %d)", group);
  else snprintf(what, sizeof what, "int8 (per-channel)");
  printf("ot quantize: %s (%s: %d layers, d_model %d, vocab %d) -> %s\n", ckpt, c->name, c->n_layers,
         c->d_model, c->vocab, out);
  printf("  %d matrices to %s, %d other tensors f32: %.1f MB -> %.1f MB (%.2fx smaller)\n", nq, what,
         q->n - nq, f32_bytes / 1e6, ot_qmodel_bytes(q) / 1e6, (double)f32_bytes / (double)ot_qmodel_bytes(q));
  printf("  largest relative weight error ||W - deq(Q)|| / ||W||: %.3g%% (%s); %.1f s\n", 100 * err, worst,
         ot_now() - t0);
  ot_qmodel_free(q);
  ot_model_free(m);
  return 0;
}
