// Training benchmark: full optimizer steps of the GPT-2 124M shape through the
// trainer API (ot_trainer_step_on: forward + backward + global-norm clip +
// AdamW with f32 master weights and moments, i.e. what `ot train` does per
// step, minus the data loader), on synthetic random tokens (no data files).
//
// Model: preset "gpt2" = 12 layers, d_model 768, 12 heads, d_ff 3072, vocab
// 50257 padded to 50304, tied embeddings, learned positions, LayerNorm, GELU
// (tanh), biases. Default run: batch 8 x seq 256, 2 threads, recompute none,
// f32 then bf16 (bf16 weights copy / activations / GEMMs, f32 master + moments),
// 1 warm-up step + up to 3 timed steps each, within --max-seconds (210 s) for
// the whole run: a configuration stops adding timed steps (keeping at least
// one) when the next one would overrun its share of the time left.
//
// Per dtype it prints the median step time, tokens/s, achieved GFLOP/s and MFU,
// the memory report by category (ot_mem_report: current and peak), and at the
// end the bf16/f32 throughput ratio.
//
// FLOPs per token (two conventions, both printed):
//   ot     = ot_trainer_flops_per_token, the count `ot train` uses for its MFU:
//            3 x forward, forward = 2 x (L x (12 C^2 GEMM MACs of QKV, proj,
//            MLP) + Vp x C (logits GEMM)) + attention 2 x 2 x L x C x (T+1)/2
//            (QK^T and PV with causal halving) -> 6 x matmul weights + 6 L C (T+1)
//   nanoGPT = 6 x N + 12 x L x C x T (nanoGPT/llm.c/PaLM appendix B): N = every
//            parameter except the position table (layer matrices, biases, norms,
//            final norm, and the tied [Vp, C] embedding = the logits matmul),
//            attention without causal halving.
// MFU = FLOPs per token x tokens/s / peak, where peak is the measured f32 FMA
// peak (ot_measure_fma_peak) on all threads, or one thread's x threads when
// the machine is busy and that is larger (the rule `ot train` applies). bf16
// runs are rated against the same f32 peak.
//
// Usage: bench_train [--steps N] [--warmup N] [--dtype f32|bf16|both]
//                    [--batch B] [--seq T] [--threads N]
//                    [--recompute none|selective|full|all] [--model PRESET]
//                    [--max-seconds S (0 = no cap)]
//                    [--bf16-gemm auto|native|convert|both] [--interleave]
// --interleave: every configuration's trainer is created first, then their steps
// alternate (A B C A B C ...), so that a machine whose load changes during the
// run slows them alike; tokens/s medians and minimum step times per configuration
// (no per-configuration memory peaks: they overlap; the plans are printed).
// --bf16-gemm: the bf16 configurations' GEMMs: auto (native where the CPU has
// avx512_bf16), native, convert (what a CPU without it runs: f32 GEMMs on
// converted tiles, no bf16 weight copy), or both (two bf16 configurations).
// Each configuration also prints its memory plan (ot_model_plan_of: what the
// model allocates, plus AdamW's moments).
// Asserts nothing; exits 1 only if the library reports an error.
#include "ot/ot.h"
#include "internal.h"
#include "ops/gemm_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_stats.h"

#define MAX_STEPS 1000

typedef struct {
  int steps, warmup, batch, seq, threads, max_seconds, interleave;
  int dtypes[3], ndt;          // OT_F32 / OT_BF16 in run order
  int gemm[3];                 // per dtype entry: bf16 GEMM mode (-1 auto, 0 convert, 1 native)
  int recs[3], nrec;           // ot_recompute values in run order
  const char *model;
} opts;

typedef struct {
  ot_dtype dt;
  int gemm;                    // bf16 GEMM mode asked (-1 auto) and the one that ran
  bool native;
  ot_recompute rc;
  size_t plan_total;           // ot_model_plan_of: allocated by the model + optimizer moments
  int timed;
  double med, tps, gflops, mfu, mfu_nano;
  size_t peak[OT_MEM_CATEGORY_COUNT];
} result;

// rows [n, T+1]: uniform random ids in [0, V)
static void fill_tokens(int32_t *rows, size_t n, int V, uint64_t *rng) {
  for (size_t i = 0; i < n; i++) rows[i] = (int32_t)(splitmix(rng) % (uint64_t)V);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_train [--steps N (3)] [--warmup N (1)] [--dtype f32|bf16|both (both)]\n"
             "                   [--batch B (8)] [--seq T (256)] [--threads N (2)]\n"
             "                   [--recompute none|selective|full|all (none)] [--model PRESET (gpt2)]\n"
             "                   [--max-seconds S (210; 0 = no cap: timed steps stop early, at least 1\n"
             "                    per configuration, to keep the whole run within S)]\n"
             "                   [--bf16-gemm auto|native|convert|both (auto)] [--interleave]\n");
}

static int parse_int(const char *flag, const char *v, int lo, int hi) {
  char *end = NULL;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || x < lo || x > hi) {
    fprintf(stderr, "bench_train: %s '%s' must be an integer in [%d, %d]\n", flag, v ? v : "", lo, hi);
    exit(2);
  }
  return (int)x;
}

static void parse(opts *o, int argc, char **argv) {
  *o = (opts){3, 1, 8, 256, 2, 210, 0, {OT_F32, OT_BF16}, 2, {-1, -1, -1}, {OT_RECOMPUTE_NONE}, 1, "gpt2"};
  int bf16_gemm = -1, both_gemm = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
    if (!strcmp(a, "--interleave")) { o->interleave = 1; continue; }
    if (!v) { fprintf(stderr, "bench_train: %s needs a value\n", a); usage(stderr); exit(2); }
    i++;
    if (!strcmp(a, "--steps")) o->steps = parse_int(a, v, 1, MAX_STEPS);
    else if (!strcmp(a, "--warmup")) o->warmup = parse_int(a, v, 0, MAX_STEPS);
    else if (!strcmp(a, "--batch")) o->batch = parse_int(a, v, 1, 1 << 16);
    else if (!strcmp(a, "--seq")) o->seq = parse_int(a, v, 1, 1 << 20);
    else if (!strcmp(a, "--threads")) o->threads = parse_int(a, v, 1, 1024);
    else if (!strcmp(a, "--max-seconds")) o->max_seconds = parse_int(a, v, 0, 1 << 30);
    else if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--bf16-gemm")) {
      if (!strcmp(v, "auto")) bf16_gemm = -1;
      else if (!strcmp(v, "native")) bf16_gemm = 1;
      else if (!strcmp(v, "convert")) bf16_gemm = 0;
      else if (!strcmp(v, "both")) both_gemm = 1;
      else { fprintf(stderr, "bench_train: --bf16-gemm '%s' must be auto, native, convert or both\n", v); exit(2); }
    }
    else if (!strcmp(a, "--dtype")) {
      if (!strcmp(v, "f32")) { o->dtypes[0] = OT_F32; o->ndt = 1; }
      else if (!strcmp(v, "bf16")) { o->dtypes[0] = OT_BF16; o->ndt = 1; }
      else if (!strcmp(v, "both")) { o->dtypes[0] = OT_F32; o->dtypes[1] = OT_BF16; o->ndt = 2; }
      else { fprintf(stderr, "bench_train: --dtype '%s' must be f32, bf16 or both\n", v); exit(2); }
    } else if (!strcmp(a, "--recompute")) {
      static const char *names[] = {"none", "selective", "full"};
      o->nrec = 0;
      for (int r = 0; r < 3; r++)
        if (!strcmp(v, names[r]) || !strcmp(v, "all")) o->recs[o->nrec++] = r;
      if (!o->nrec) {
        fprintf(stderr, "bench_train: --recompute '%s' must be none, selective, full or all\n", v);
        exit(2);
      }
    } else {
      fprintf(stderr, "bench_train: unknown option '%s'\n", a);
      usage(stderr);
      exit(2);
    }
  }
  for (int d = 0; d < o->ndt; d++) o->gemm[d] = o->dtypes[d] == OT_BF16 ? bf16_gemm : -1;
  if (both_gemm)   // every bf16 entry twice: converted, then native
    for (int d = o->ndt - 1; d >= 0; d--)
      if (o->dtypes[d] == OT_BF16) {
        for (int j = o->ndt; j > d + 1; j--) { o->dtypes[j] = o->dtypes[j - 1]; o->gemm[j] = o->gemm[j - 1]; }
        o->ndt++;
        o->dtypes[d + 1] = OT_BF16;
        o->gemm[d] = 0;
        o->gemm[d + 1] = 1;
      }
}

static void must(ot_status s, const char *what) {
  if (s == OT_OK) return;
  fprintf(stderr, "bench_train: %s failed: %s\n", what, ot_last_error());
  exit(1);
}

// nanoGPT-convention FLOPs per token: 6 N (N without the position table) + 12 L C T.
static double flops_nanogpt(ot_model *m, int T) {
  const ot_model_config *c = ot_model_config_of(m);
  double n = 0;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *p = ot_model_param_at(m, i);
    if (p->kind != OT_PT_POS) n += (double)p->numel;   // the embedding at Vp rows: the logits GEMM
  }
  return 6.0 * n + 12.0 * c->n_layers * (double)c->d_model * T;
}

// Releases the per-thread scratch of this thread and of the OpenMP workers, so
// that the next configuration's memory peaks are its own.
static void release_scratch(void) {
#pragma omp parallel
  ot_scratch_release();
  ot_scratch_release();
}

// One configuration: create the trainer, warm-up + timed steps, report. `share`
// (seconds, <= 0: none) caps this configuration's wall time, creation included.
static void run_one(const opts *o, ot_dtype dt, int gemm, ot_recompute rc, double peak, double share,
                    result *r) {
  ot__gemm_bf16_set_mode(gemm);
  ot_train_config c;
  ot_train_config_default(&c);
  must(ot_model_config_preset(&c.model, o->model), "--model");
  c.data[0] = 0;       // no loader: synthetic rows via ot_trainer_step_on
  c.batch_size = o->batch;
  c.seq_len = o->seq;
  c.dtype = dt;
  c.recompute = rc;
  c.threads = o->threads;
  c.steps = o->warmup + o->steps;
  c.lr = 6e-4f;
  c.warmup = 0;
  c.quiet = true;
  c.measure_peak = false;

  release_scratch();
  ot_mem_reset_peak();
  printf("\n== %s%s, recompute %s: batch %d x seq %d, %d threads ==\n", ot_dtype_name(dt),
         dt != OT_BF16 ? "" : ot__gemm_bf16_native() ? " (native bf16 GEMMs)" : " (GEMMs converted to f32 by tiles)",
         ot_recompute_name(rc), o->batch, o->seq, o->threads);
  fflush(stdout);
  const double t0 = ot_now();
  ot_trainer *t = NULL;
  must(ot_trainer_create(&t, &c), "ot_trainer_create");
  printf("created and initialized in %.1f s\n", ot_now() - t0);
  const ot_mem_plan *pl = ot_model_plan_of(ot_trainer_model(t));
  const size_t ptot = pl->params + pl->params_bf16 + pl->grads + pl->act_saved + pl->workspace + pl->optim;
  printf("plan MiB: params %.2f + bf16 copy %.2f + grads %.2f + activations %.2f + workspace %.2f + "
         "optimizer %.2f = %.2f\n", pl->params / 1048576.0, pl->params_bf16 / 1048576.0, pl->grads / 1048576.0,
         pl->act_saved / 1048576.0, pl->workspace / 1048576.0, pl->optim / 1048576.0, ptot / 1048576.0);
  r->plan_total = ptot;
  r->gemm = gemm;
  r->native = dt == OT_BF16 && ot__gemm_bf16_native();

  const size_t nrow = (size_t)o->batch * ((size_t)o->seq + 1);
  int32_t *rows = malloc(nrow * sizeof *rows);
  if (!rows) { fprintf(stderr, "bench_train: out of memory\n"); exit(1); }
  uint64_t rng = 0x62656e6368ull ^ (uint64_t)dt;
  double times[MAX_STEPS];
  int ntimed = 0;
  const int64_t tokens = (int64_t)o->batch * o->seq;
  for (int s = 0; s < o->warmup + o->steps; s++) {
    fill_tokens(rows, nrow, c.model.vocab, &rng);
    ot_step_info st;
    double ts = ot_now();
    must(ot_trainer_step_on(t, rows, &st), "ot_trainer_step_on");
    double sec = ot_now() - ts;
    const bool timed = s >= o->warmup;
    if (timed) times[ntimed++] = sec;
    printf("  %s step %d: %.4f s  %.0f tok/s  loss %.4f%s\n", timed ? "timed " : "warmup", s + 1, sec,
           tokens / sec, st.loss, st.skipped ? "  (update skipped: non-finite)" : "");
    fflush(stdout);
    if (ntimed >= 1 && ntimed < o->steps && share > 0 && ot_now() - t0 + sec > share) {
      printf("  (stopping after %d timed step%s: the next would pass this configuration's %.0f s share of "
             "--max-seconds %d)\n", ntimed, ntimed > 1 ? "s" : "", share, o->max_seconds);
      break;
    }
  }
  free(rows);

  const double fpt = ot_trainer_flops_per_token(t), fpt_nano = flops_nanogpt(ot_trainer_model(t), o->seq);
  r->dt = dt;
  r->rc = rc;
  r->timed = ntimed;
  r->med = median(times, ntimed);
  r->tps = tokens / r->med;
  r->gflops = fpt * r->tps * 1e-9;
  r->mfu = peak > 0 ? r->gflops / peak : 0;
  r->mfu_nano = peak > 0 ? fpt_nano * r->tps * 1e-9 / peak : 0;
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) r->peak[k] = ot_mem_peak(k);
  printf("median of %d step%s %.4f s | %.0f tokens/s | %.1f GFLOP/s | MFU %.1f%% (ot: %.1f MFLOP/token) | "
         "MFU %.1f%% (nanoGPT: %.1f MFLOP/token)\n", ntimed, ntimed > 1 ? "s" : "", r->med, r->tps, r->gflops, 100 * r->mfu, fpt * 1e-6,
         100 * r->mfu_nano, fpt_nano * 1e-6);
  ot_mem_report(stdout);
  ot_trainer_free(t);
  ot__gemm_bf16_set_mode(-1);
}

// --interleave: all configurations' trainers at once, their steps alternating.
static void run_interleaved(const opts *o) {
  enum { NC = 9 };
  ot_trainer *t[NC] = {0};
  double times[NC][MAX_STEPS];
  char name[NC][48];
  int n = 0;
  const size_t nrow = (size_t)o->batch * ((size_t)o->seq + 1);
  int32_t *rows = malloc(nrow * sizeof *rows);
  if (!rows) { fprintf(stderr, "bench_train: out of memory\n"); exit(1); }
  for (int d = 0; d < o->ndt; d++)
    for (int k = 0; k < o->nrec && n < NC; k++, n++) {
      ot_train_config c;
      ot_train_config_default(&c);
      must(ot_model_config_preset(&c.model, o->model), "--model");
      c.data[0] = 0;
      c.batch_size = o->batch;
      c.seq_len = o->seq;
      c.dtype = (ot_dtype)o->dtypes[d];
      c.recompute = (ot_recompute)o->recs[k];
      c.threads = o->threads;
      c.steps = o->warmup + o->steps;
      c.lr = 6e-4f;
      c.warmup = 0;
      c.quiet = true;
      c.measure_peak = false;
      ot__gemm_bf16_set_mode(o->gemm[d]);
      must(ot_trainer_create(&t[n], &c), "ot_trainer_create");
      snprintf(name[n], sizeof name[n], "%s%s %s", ot_dtype_name(c.dtype),
               c.dtype != OT_BF16 ? "" : ot__gemm_bf16_native() ? " native" : " convert",
               ot_recompute_name(c.recompute));
      const ot_mem_plan *pl = ot_model_plan_of(ot_trainer_model(t[n]));
      printf("%-22s plan MiB: params %.2f + bf16 copy %.2f + grads %.2f + activations %.2f + workspace "
             "%.2f + optimizer %.2f\n", name[n], pl->params / 1048576.0, pl->params_bf16 / 1048576.0,
             pl->grads / 1048576.0, pl->act_saved / 1048576.0, pl->workspace / 1048576.0, pl->optim / 1048576.0);
    }
  ot__gemm_bf16_set_mode(-1);
  const int64_t tokens = (int64_t)o->batch * o->seq;
  uint64_t rng = 0x62656e6368ull;
  for (int s = 0; s < o->warmup + o->steps; s++)
    for (int i = 0; i < n; i++) {
      // the GEMM mode of configuration i (bf16 x bf16 GEMMs consult it at each call)
      ot__gemm_bf16_set_mode(o->gemm[i / o->nrec]);
      fill_tokens(rows, nrow, ot_model_config_of(ot_trainer_model(t[i]))->vocab, &rng);
      ot_step_info st;
      const double ts = ot_now();
      must(ot_trainer_step_on(t[i], rows, &st), "ot_trainer_step_on");
      const double sec = ot_now() - ts;
      if (s >= o->warmup) times[i][s - o->warmup] = sec;
      printf("  %-22s %s step %d: %.4f s  %.0f tok/s\n", name[i], s >= o->warmup ? "timed " : "warmup", s + 1,
             sec, tokens / sec);
      fflush(stdout);
    }
  ot__gemm_bf16_set_mode(-1);
  double med0 = 0;
  printf("\n%-22s %10s %10s %10s %9s\n", "configuration", "median s", "min s", "tok/s", "vs first");
  for (int i = 0; i < n; i++) {
    const double med = median(times[i], o->steps);   // sorts: times[i][0] is then the minimum
    if (i == 0) med0 = med;
    printf("%-22s %10.4f %10.4f %10.0f %8.2fx\n", name[i], med, times[i][0], tokens / med, med0 / med);
    ot_trainer_free(t[i]);
  }
  free(rows);
}

int main(int argc, char **argv) {
  const double t_start = ot_now();
  opts o;
  parse(&o, argc, argv);
  ot_threads_set(o.threads);
  ot_model_config mc;
  must(ot_model_config_preset(&mc, o.model), "--model");
  if (o.seq > mc.max_seq) {
    fprintf(stderr, "bench_train: --seq %d exceeds the %s model's max_seq %d\n", o.seq, o.model, mc.max_seq);
    return 2;
  }
  printf("bench_train: full training steps (forward + backward + clip + AdamW) through ot_trainer_step_on, "
         "synthetic tokens\n");
  ot_model_config_print(stdout, &mc);
  printf("kernels %s, %d threads, %d warm-up + up to %d timed steps per configuration, --max-seconds %d\n",
         ot_isa_name(ot_isa_active()), ot_threads_get(), o.warmup, o.steps, o.max_seconds);

  // the MFU denominator: the same probe and rule as `ot train`
  double peak_all = ot_measure_fma_peak();
  ot_threads_set(1);
  double peak_one = ot_measure_fma_peak();
  ot_threads_set(o.threads);
  double peak = peak_all > peak_one * o.threads ? peak_all : peak_one * o.threads;
  printf("measured f32 FMA peak: %.1f GFLOP/s on %d threads (1 thread: %.1f); MFU uses %.1f%s\n", peak_all,
         o.threads, peak_one, peak, peak_all < 0.8 * peak_one * o.threads ? " (machine busy?)" : "");

  if (o.interleave) {
    run_interleaved(&o);
    printf("\ntotal run time %.1f s\n", ot_now() - t_start);
    return 0;
  }
  result res[9];
  int nres = 0;
  const int nconf = o.ndt * o.nrec;
  for (int d = 0; d < o.ndt; d++)
    for (int k = 0; k < o.nrec; k++) {
      double share = o.max_seconds > 0 ? (o.max_seconds - (ot_now() - t_start)) / (nconf - nres) : 0;
      if (o.max_seconds > 0 && share < 1) share = 1;   // over budget already: one timed step
      run_one(&o, (ot_dtype)o.dtypes[d], o.gemm[d], (ot_recompute)o.recs[k], peak, share, &res[nres++]);
    }
  printf("\ntotal run time %.1f s\n", ot_now() - t_start);

  printf("\n%-12s %-10s %5s %10s %10s %9s %7s %9s %9s %9s %9s %9s %9s %9s\n", "dtype", "recompute", "steps",
         "step s", "tok/s", "GFLOP/s", "MFU", "MFU nGPT", "act MiB", "wksp MiB", "total MiB", "plan MiB",
         "vs f32", "mem/f32");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    double tot = 0, f32_tps = 0, f32_tot = 0;
    for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) tot += r->peak[k];
    for (int j = 0; j < nres; j++)
      if (res[j].dt == OT_F32 && res[j].rc == r->rc) {
        f32_tps = res[j].tps;
        f32_tot = 0;
        for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) f32_tot += res[j].peak[k];
      }
    char ratio[16] = "-", mratio[16] = "-", name[16];
    if (f32_tps > 0) snprintf(ratio, sizeof ratio, "%.2fx", r->tps / f32_tps);
    if (f32_tot > 0) snprintf(mratio, sizeof mratio, "%.3fx", tot / f32_tot);
    snprintf(name, sizeof name, "%s%s", ot_dtype_name(r->dt), r->dt != OT_BF16 ? "" : r->native ? " native" : " convert");
    printf("%-12s %-10s %5d %10.4f %10.0f %9.1f %6.1f%% %8.1f%% %9.1f %9.1f %9.1f %9.1f %9s %9s\n", name,
           ot_recompute_name(r->rc), r->timed, r->med, r->tps, r->gflops, 100 * r->mfu, 100 * r->mfu_nano,
           r->peak[OT_MEM_ACTIVATIONS] / 1048576.0, r->peak[OT_MEM_WORKSPACE] / 1048576.0, tot / 1048576.0,
           r->plan_total / 1048576.0, ratio, mratio);
  }
  for (int i = 0; i < nres; i++)
    for (int j = 0; j < nres; j++)
      if (res[i].dt == OT_F32 && res[j].dt == OT_BF16 && res[i].rc == res[j].rc)
        printf("bf16%s/f32 throughput ratio (recompute %s): %.2fx\n", res[j].native ? " native" : " convert",
               ot_recompute_name(res[i].rc), res[j].tps / res[i].tps);
  // one line to set beside bench/torch_gpt2_train.py's final line
  for (int i = 0; i < nres; i++)
    printf("RESULT ot %s%s recompute=%s B=%d T=%d threads=%d: median_step_s=%.4f tokens_per_s=%.1f\n",
           ot_dtype_name(res[i].dt), res[i].dt != OT_BF16 ? "" : res[i].native ? " native" : " convert",
           ot_recompute_name(res[i].rc), o.batch, o.seq, o.threads, res[i].med, res[i].tps);
  return 0;
}
