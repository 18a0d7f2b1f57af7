// Held-out perplexity of a model under different weight quantizations, side by
// side: each argument LABEL=PATH is an `ot train` checkpoint (a run directory or
// step_NNNNNN: scored with f32 weights) or a file `ot quantize` wrote (int8 / bf16,
// plain, calibrated or from a QAT checkpoint). Every window of --seq tokens of the
// held-out shards is teacher-forced through the engine (ot_engine_score: the
// serving path, the quantized linears of ot_qlinear_fwd), so each row is the
// perplexity inference would see. The first argument is the reference of the
// "vs first" column. bench/quant_ppl.sh trains the models and makes the files.
//
// Usage: bench_quant_ppl --data DIR [--seq T] [--windows N] LABEL=PATH ...
// Threads: OMP_NUM_THREADS. Asserts nothing; exits 1 on a library error.
#include "ot/ot.h"
#include "ot/infer.h"
#include "ot/quant.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void must(ot_status s, const char *what) {
  if (s == OT_OK) return;
  fprintf(stderr, "bench_quant_ppl: %s: %s\n", what, ot_last_error());
  exit(1);
}

// The f32 weights of a checkpoint as a "quantized" model of f32 tensors.
static ot_qmodel *load_ckpt(const char *dir) {
  char ckpt[OT_PATH_MAX + 64], path[OT_PATH_MAX + 96];
  must(ot_ckpt_resolve(dir, ckpt, sizeof ckpt), dir);
  ot_train_config *tc = calloc(1, sizeof *tc);
  if (!tc) must(OT_ENOMEM, "config");
  must(ot_ckpt_train_config(ckpt, tc), "checkpoint config");
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  must(ot_model_create(&m, &tc->model, &run), "model");
  snprintf(path, sizeof path, "%s/model.safetensors", ckpt);
  ot_st_file *f = NULL;
  must(ot_st_open(&f, path), "weights");
  must(ot_model_import(m, f, NULL, true), "weights");
  ot_st_close(f);
  ot_qmodel *q = NULL;
  must(ot_qmodel_from_model(&q, m, OT_QW_F32, 0), "f32 model");
  ot_model_free(m);
  free(tc);
  return q;
}

int main(int argc, char **argv) {
  const char *data = NULL;
  int seq = 0, maxw = 0, first = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
    else if (!strcmp(argv[i], "--seq") && i + 1 < argc) seq = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--windows") && i + 1 < argc) maxw = atoi(argv[++i]);
    else if (strchr(argv[i], '=')) { if (!first) first = i; }
    else { fprintf(stderr, "bench_quant_ppl: unknown argument %s\n", argv[i]); return 2; }
  }
  if (!data || !first) {
    fprintf(stderr, "usage: bench_quant_ppl --data DIR [--seq T] [--windows N] LABEL=PATH ...\n");
    return 2;
  }
  double ppl0 = 0.0;
  ot_loader *L = NULL;
  int64_t nwin = 0;
  for (int i = first; i < argc; i++) {
    if (!strchr(argv[i], '=')) continue;
    char label[64];
    const char *path = strchr(argv[i], '=') + 1;
    snprintf(label, sizeof label, "%.*s", (int)(path - 1 - argv[i]), argv[i]);
    struct stat st;
    ot_qmodel *q = NULL;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) q = load_ckpt(path);
    else must(ot_quant_file_load(&q, path), path);
    const int T = seq ? seq : q->config.max_seq, kind = q->kind, group = q->group;
    if (!L) {   // windows of T tokens: T - 1 scored targets each
      char pat[OT_PATH_MAX + 32];
      snprintf(pat, sizeof pat, "%s/val_*.bin", data);
      ot_loader_config lc = {pat, NULL, 0, q->config.vocab, 1, T - 1, false, 0, 0, 1};
      must(ot_loader_open(&L, &lc), "held-out data");
      nwin = ot_loader_windows(L);
      if (maxw > 0 && nwin > maxw) nwin = maxw;
      printf("held-out data %s: %lld windows of %d tokens\n\n", pat, (long long)nwin, T);
      printf("%-22s %-10s %10s %12s %10s\n", "model", "weights", "loss", "perplexity", "vs first");
    }
    ot_engine_config ec = {0};
    ec.max_seqs = 1;
    ec.max_prompt = T;
    ot_engine *e = NULL;
    must(ot_engine_create_q(&e, q, &ec), "engine");
    ot_loader_reset(L);
    double nll = 0.0;
    int64_t cnt = 0;
    for (int64_t w = 0; w < nwin; w++) {
      const int32_t *b;
      must(ot_loader_next(L, &b), "held-out batch");
      double s;
      int c;
      must(ot_engine_score(e, b, T, &s, &c), "score");
      nll += s;
      cnt += c;
    }
    const double loss = nll / (double)cnt, ppl = exp(loss);
    if (i == first) ppl0 = ppl;
    char wl[32];
    if (kind == OT_QW_INT8) snprintf(wl, sizeof wl, group ? "int8/g%d" : "int8/row", group);
    else snprintf(wl, sizeof wl, "%s", ot_qw_kind_name((ot_qw_kind)kind));
    printf("%-22s %-10s %10.5f %12.4f %+9.3f%%\n", label, wl, loss, ppl, 100.0 * (ppl / ppl0 - 1.0));
    fflush(stdout);
    ot_engine_free(e);
  }
  ot_loader_close(L);
  return 0;
}
