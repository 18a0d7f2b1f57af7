// Inference benchmark of the batched serving engine (ot_engine: paged KV
// cache, weight-only quantized linears) against the memory-bandwidth roofline.
//
// Model: a preset (default "gpt2" = GPT-2 124M: 12 layers, d_model 768, vocab
// 50257, tied embeddings), random init. For each weight dtype (f32, bf16,
// int8 with --group columns per scale):
//  - prefill: time to first token (prompt forward + the first sample) and
//    prompt tokens/s, for prompts of --prompts tokens (default 128 and 1024),
//    median of --reps prompts;
//  - decode: tokens/s at batch 1 and batch 8 (sequences with 128-token
//    prompts, the CLI's default sampler: temperature 0.8, top-k 40, top-p
//    0.95); one step = one token for every sequence.
// Roofline: a decode step reads every weight once (all linear layers and the
// lm_head: ot_engine_weight_bytes), so tokens/s <= batch x STREAM / weight
// bytes, with STREAM the triad bandwidth as `ot bench ops` measures it (3
// arrays of 128 MiB, median of 5). On a shared machine both move with the
// load, so the decode runs in --trials trials, each a fresh STREAM probe
// followed by --steps timed steps of every (dtype, batch), the dtypes
// interleaved; a trial's fraction = its median step's tokens/s / (batch x its
// STREAM / weight bytes). Printed: the median over the trials and the best.
// KV-cache reads are not in the roofline (at 128 tokens, 9.4 MB per sequence
// per step with an f32 cache: 2% of the f32 weights, 7% of int8's; --kv bf16
// halves them).
//
// --ppl DIR: perplexity of an `ot train` checkpoint (DIR = run directory or
// step_NNNNNN) on the held-out shards of its data directory (every window of
// max_seq tokens, teacher-forced through ot_engine_score) with f32, bf16 and
// int8 weights, and the relative change against f32. No timing then.
//
// --busy-core: single-stream decode (the KV-cache path of `ot generate`, and
// the engine at batch 1 for each --weights) with every core free and with the
// last CPU held by a process this program starts (a spin loop pinned there) and
// kills after each busy run; --trials trials alternate free and busy runs of
// --steps new tokens; printed: median tokens/s of each, their ratio and the
// worst trial's ratio. Every run's tokens/s is new tokens / wall time of all
// steps (a step that waited on the busy core counts in full).
//
// Usage: bench_infer [--model PRESET] [--weights f32,bf16,int8] [--group G]
//                    [--prompts 128,1024] [--steps N] [--reps N] [--trials N]
//                    [--kv f32|bf16] [--profile] [--ppl DIR [--data DIR]] [--busy-core]
// Threads: OMP_NUM_THREADS. Asserts nothing; exits 1 only on a library error.
#define _GNU_SOURCE   // sched_setaffinity
#include "ot/ot.h"
#include "ot/quant.h"
#include "ot/infer.h"
#include "internal.h"
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_stats.h"

static void must(ot_status s, const char *what) {
  if (s != OT_OK) {
    fprintf(stderr, "bench_infer: %s: %s\n", what, ot_last_error());
    exit(1);
  }
}

// STREAM triad bytes/s (3 arrays of 128 MiB counted, no write-allocate),
// median of 5; the arrays are allocated once and kept for later probes.
static double stream_bps(void) {
  static float *a, *b, *c;
  const size_t n = (size_t)32 << 20;
  if (!a) {
    a = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE);
    b = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE);
    c = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE);
    if (!a || !b || !c) must(OT_ENOMEM, "STREAM arrays");
    ot_stream_init(a, b, c, n);
    ot_stream_triad(a, b, c, 3.0f, n, false);
  }
  double t[5];
  for (int i = 0; i < 5; i++) {
    const double t0 = ot_now();
    ot_stream_triad(a, b, c, 3.0f, n, false);
    t[i] = ot_now() - t0;
  }
  return 12.0 * n / median(t, 5);
}

typedef struct {
  const char *model, *ppl, *data;
  int group, steps, reps, trials;
  ot_dtype kv;
  int prompts[4], np;
  ot_dtype w[3];
  int nw;
  bool profile;
} opts;

static const char *wname(ot_dtype d) { return d == OT_I8 ? "int8" : ot_dtype_name(d); }

static void fill(int32_t *t, int n, int V, uint64_t *s) {
  for (int i = 0; i < n; i++) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    t[i] = (int32_t)((*s >> 33) % (uint64_t)V);
  }
}

static ot_engine *engine(const ot_model *m, ot_dtype w, int group, ot_dtype kv, int max_seqs,
                         int max_prompt) {
  ot_engine_config ec = {w, w == OT_I8 ? group : 0, kv, 0, 16, max_seqs, 0, max_prompt};
  ot_engine *e = NULL;
  must(ot_engine_create(&e, m, &ec), "engine");
  return e;
}

// Median time to first token of a P-token prompt.
static double ttft(ot_engine *e, int P, int reps, uint64_t *rng) {
  const int V = ot_engine_model_config(e)->vocab;
  int32_t *p = malloc(sizeof(int32_t) * (size_t)P);
  double t[64];
  ot_request r = {p, P, ot_sampler_config_default(), 1, -1};
  for (int i = 0; i <= reps; i++) {   // the first run warms up (scratch, oneDNN primitives)
    fill(p, P, V, rng);
    int id;
    ot_engine_event ev;
    const double t0 = ot_now();
    must(ot_engine_add(e, &r, &id, &ev), "prefill");
    if (i) t[i - 1] = ot_now() - t0;
  }
  free(p);
  return median(t, reps);
}

// Median decode step with B sequences (128-token prompts) in the batch.
// With prof, the profiler records the timed steps only.
static double decode_step(ot_engine *e, int B, int steps, uint64_t *rng, bool prof, double *total) {
  const int V = ot_engine_model_config(e)->vocab, P = 128, warm = 3;
  int32_t p[128];
  for (int b = 0; b < B; b++) {
    fill(p, P, V, rng);
    ot_request r = {p, P, ot_sampler_config_default(), warm + steps + 1, -1};
    r.sampler.seed += (uint64_t)b;
    int id;
    must(ot_engine_add(e, &r, &id, NULL), "add");
  }
  double t[1024], sum = 0.0;
  for (int s = 0; s < warm + steps; s++) {
    const ot_engine_event *ev;
    int n;
    if (prof && s == warm) { ot_prof_reset(); ot_prof_enable(true); }
    const double t0 = ot_now();
    must(ot_engine_step(e, &ev, &n), "step");
    if (s >= warm) sum += t[s - warm] = ot_now() - t0;
    if (n != B) must(ot_error(OT_EINTERNAL, "%d sequences stepped, %d expected", n, B), "batch");
  }
  if (prof) ot_prof_enable(false);
  const ot_engine_event *ev;
  int n;
  must(ot_engine_step(e, &ev, &n), "last step");   // the sequences end here
  if (total) *total = sum;
  return median(t, steps);
}

#define MAX_TRIALS 64
static void bench(const opts *o) {
  ot_model_config mc;
  must(ot_model_config_preset(&mc, o->model), "preset");
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  must(ot_model_create(&m, &mc, &run), "model");
  must(ot_model_init(m, 1), "init");
  int maxp = 128;
  for (int i = 0; i < o->np; i++) maxp = o->prompts[i] > maxp ? o->prompts[i] : maxp;
  if (maxp > mc.max_seq) maxp = mc.max_seq;
  ot_engine *eng[3];
  char wl[3][32];
  double wb[3];
  for (int wi = 0; wi < o->nw; wi++) {
    eng[wi] = engine(m, o->w[wi], o->group, o->kv, 8, maxp);
    wb[wi] = (double)ot_engine_weight_bytes(eng[wi]);
    if (o->w[wi] == OT_I8) snprintf(wl[wi], sizeof wl[wi], o->group ? "int8/g%d" : "int8/row", o->group);
    else snprintf(wl[wi], sizeof wl[wi], "%s", wname(o->w[wi]));
  }
  ot_model_free(m);
  const double bw0 = stream_bps();
  printf("bench_infer: %s (%.1fM parameters), %d threads, kernels %s; STREAM triad %.2f GB/s\n",
         mc.name, ot_model_n_params(&mc) / 1e6, ot_threads_get(), ot_isa_name(ot_isa_active()),
         bw0 / 1e9);
  const double kvb = 2.0 * mc.n_layers * mc.n_kv_heads * ot_model_head_dim(&mc) * ot_dtype_size(o->kv);
  printf("KV cache %s: %.2f MB read per sequence per step at 128 tokens (not in the roofline)\n",
         ot_dtype_name(o->kv), kvb * 128 / 1e6);
  uint64_t rng = 7;
  printf("\nprefill: median of %d prompts\n%-10s %10s %-28s %10s %12s\n", o->reps, "weights",
         "MB/step", "case", "ms", "tokens/s");
  for (int wi = 0; wi < o->nw; wi++)
    for (int i = 0; i < o->np; i++) {
      const int P = o->prompts[i] < mc.max_seq ? o->prompts[i] : mc.max_seq;
      const double t = ttft(eng[wi], P, o->reps, &rng);
      char name[64];
      snprintf(name, sizeof name, "prefill %d (time to 1st)", P);
      printf("%-10s %10.1f %-28s %10.2f %12.1f\n", wl[wi], wb[wi] / 1e6, name, t * 1e3, P / t);
      fflush(stdout);
    }
  // decode: trials interleave the dtypes, each decode run right after its own
  // STREAM probe; the fraction of the roofline is taken per trial
  static double ms[3][2][MAX_TRIALS], frac[3][2][MAX_TRIALS], bws[MAX_TRIALS * 6];
  const int bs[2] = {1, 8};
  int nbw = 0;
  for (int t = 0; t < o->trials; t++)
    for (int wi = 0; wi < o->nw; wi++)
      for (int k = 0; k < 2; k++) {
        const double bw = stream_bps();
        bws[nbw++] = bw;
        const bool prof = o->profile && t == 0;
        const double st = decode_step(eng[wi], bs[k], o->steps, &rng, prof, NULL);
        if (prof) {
          printf("\nprofile of %d timed batch-%d decode steps (%s weights):\n", o->steps, bs[k], wl[wi]);
          ot_prof_summary(stdout);
        }
        ms[wi][k][t] = st * 1e3;
        frac[wi][k][t] = (bs[k] / st) / (bs[k] * bw / wb[wi]);
      }
  const double bwm = median(bws, nbw);   // sorts bws
  printf("\ndecode: %d trials; a trial = a STREAM probe, then %d timed steps (median) of sequences "
         "with 128-token prompts,\nsampler T=0.8 top-k 40 top-p 0.95. STREAM over the trials: median "
         "%.2f GB/s (min %.2f, max %.2f)\n", o->trials, o->steps, bwm / 1e9, bws[0] / 1e9,
         bws[nbw - 1] / 1e9);
  printf("%-10s %10s %-16s %10s %12s %12s %9s %9s\n", "weights", "MB/step", "case", "ms", "tokens/s",
         "roofline", "of roof", "best");
  for (int wi = 0; wi < o->nw; wi++)
    for (int k = 0; k < 2; k++) {
      const double mst = median(ms[wi][k], o->trials), fm = median(frac[wi][k], o->trials);
      const double best = frac[wi][k][o->trials - 1];   // sorted by median()
      char name[32];
      snprintf(name, sizeof name, "decode batch %d", bs[k]);
      printf("%-10s %10.1f %-16s %10.2f %12.1f %12.1f %8.0f%% %8.0f%%\n", wl[wi], wb[wi] / 1e6, name,
             mst, bs[k] * 1e3 / mst, bs[k] * bwm / wb[wi], 100.0 * fm, 100.0 * best);
    }
  for (int wi = 0; wi < o->nw; wi++) ot_engine_free(eng[wi]);
}

// ---------------------------------------------------------- one core busy ----
// A child process spinning on the last CPU, as another job on a shared machine
// would hold a core; started before and killed after each busy run.
static pid_t spin_start(int cpu) {
  fflush(stdout);
  const pid_t p = fork();
  if (p < 0) { perror("bench_infer: fork"); exit(1); }
  if (p == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    for (volatile unsigned long x = 0;; x++) {}
  }
  usleep(50000);   // let it start and settle on its CPU
  return p;
}
static void spin_stop(pid_t p) {
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

// New tokens / s of one single-stream decode run: the KV-cache path of `ot
// generate` (a 16-token prompt, then `steps` tokens sampled and fed back), or
// the engine at batch 1 (128-token prompt, `steps` timed steps); wall time of
// all steps, so a stalled step counts.
static double single_run(ot_kvcache *kv, ot_sampler *smp, ot_engine *e, int steps, uint64_t *rng) {
  if (e) {
    double total;
    decode_step(e, 1, steps, rng, false, &total);
    return steps / total;
  }
  const int V = ot_model_config_of(ot_kv_model(kv))->vocab;
  int32_t p[16];
  fill(p, 16, V, rng);
  ot_kv_reset(kv);
  ot_gen_config gc = {steps + 1, -1};
  ot_gen_stats st;
  must(ot_generate(kv, smp, p, 16, &gc, NULL, NULL, NULL, &st), "generate");
  return st.decode_steps / st.decode_s;
}

// Single-stream decode with both cores free and with one held by a spinning
// process, the runs alternated per trial; medians and their ratio.
static void busy_bench(const opts *o) {
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  ot_model_config mc;
  must(ot_model_config_preset(&mc, o->model), "preset");
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  must(ot_model_create(&m, &mc, &run), "model");
  must(ot_model_init(m, 1), "init");
  const int steps = o->steps < mc.max_seq - 133 ? o->steps : mc.max_seq - 133;   // the engine: 128 + 3 warm + 1
  if (steps < 8) must(ot_error(OT_EINVAL, "the context of %s is too short", mc.name), "--busy-core");
  enum { NC = 4 };
  ot_kvcache *kv = NULL;
  ot_kv_config kc = {1, 0, 0, false};
  must(ot_kv_create(&kv, m, &kc), "KV cache");
  ot_sampler *smp = NULL;
  const ot_sampler_config sc = ot_sampler_config_default();
  must(ot_sampler_create(&smp, &sc, mc.vocab), "sampler");
  ot_engine *eng[NC] = {NULL};
  char name[NC][48];
  int nc = 0;
  snprintf(name[nc++], sizeof name[0], "kv cache f32 (ot generate)");
  for (int wi = 0; wi < o->nw && nc < NC; wi++, nc++) {
    eng[nc] = engine(m, o->w[wi], o->group, o->kv, 1, 128);
    if (o->w[wi] == OT_I8) snprintf(name[nc], sizeof name[0], o->group ? "engine int8/g%d" : "engine int8/row", o->group);
    else snprintf(name[nc], sizeof name[0], "engine %s", wname(o->w[wi]));
  }
  double la[3] = {0, 0, 0};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
  printf("bench_infer --busy-core: %s (%.1fM parameters), %d threads, kernels %s, %ld CPUs; load average "
         "%.2f %.2f %.2f at start\nbusy = a process spinning on CPU %ld during the run; %d trials, free and "
         "busy runs alternated; %d new tokens per run (sampler T=0.8 top-k 40 top-p 0.95)\n",
         mc.name, ot_model_n_params(&mc) / 1e6, ot_threads_get(), ot_isa_name(ot_isa_active()), ncpu,
         la[0], la[1], la[2], ncpu - 1, o->trials, steps);
  static double fr[NC][MAX_TRIALS], bz[NC][MAX_TRIALS], rt[NC][MAX_TRIALS];
  uint64_t rng = 11;
  for (int c = 0; c < nc; c++) single_run(kv, smp, eng[c], steps, &rng);   // warm-up
  for (int t = 0; t < o->trials; t++)
    for (int c = 0; c < nc; c++) {
      fr[c][t] = single_run(kv, smp, eng[c], steps, &rng);
      const pid_t p = spin_start((int)(ncpu - 1));
      bz[c][t] = single_run(kv, smp, eng[c], steps, &rng);
      spin_stop(p);
      rt[c][t] = bz[c][t] / fr[c][t];
    }
  printf("%-28s %12s %12s %10s %14s\n", "single-stream decode", "free tok/s", "busy tok/s", "busy/free",
         "worst trial");
  for (int c = 0; c < nc; c++) {
    const double a = median(fr[c], o->trials), b = median(bz[c], o->trials);
    median(rt[c], o->trials);   // sorts
    printf("%-28s %12.1f %12.1f %9.0f%% %13.0f%%\n", name[c], a, b, 100.0 * b / a, 100.0 * rt[c][0]);
  }
  for (int c = 1; c < nc; c++) ot_engine_free(eng[c]);
  ot_sampler_free(smp);
  ot_kv_free(kv);
  ot_model_free(m);
}

// ------------------------------------------------------------ perplexity ----
static ot_model *load_ckpt(const char *dir, char *data, size_t cap) {
  char ckpt[OT_PATH_MAX + 64], path[OT_PATH_MAX + 96];
  must(ot_ckpt_resolve(dir, ckpt, sizeof ckpt), "checkpoint");
  ot_settings *l = calloc(1, sizeof *l);
  ot_train_config *tc = calloc(1, sizeof *tc);
  if (!l || !tc) must(OT_ENOMEM, "config");
  ot_train_config_default(tc);
  must(ot_ckpt_read_config(ckpt, l), "checkpoint config");
  must(ot_train_config_apply(tc, l, NULL), "checkpoint config");
  if (data && !data[0]) snprintf(data, cap, "%s", tc->data);
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  must(ot_model_create(&m, &tc->model, &run), "model");
  snprintf(path, sizeof path, "%s/model.safetensors", ckpt);
  ot_st_file *f = NULL;
  must(ot_st_open(&f, path), "weights");
  must(ot_model_import(m, f, NULL, true), "weights");
  ot_st_close(f);
  printf("checkpoint %s: %s, %.2fM parameters, context %d\n", ckpt, tc->model.name,
         ot_model_n_params(&tc->model) / 1e6, tc->model.max_seq);
  free(l);
  free(tc);
  return m;
}

static void perplexity(const opts *o) {
  char data[OT_PATH_MAX] = "";
  if (o->data) snprintf(data, sizeof data, "%s", o->data);
  ot_model *m = load_ckpt(o->ppl, data, sizeof data);
  const ot_model_config *mc = ot_model_config_of(m);
  char pat[OT_PATH_MAX + 32];
  snprintf(pat, sizeof pat, "%s/val_*.bin", data);
  // windows of max_seq tokens: max_seq - 1 scored targets each, positions 0 .. max_seq - 2
  ot_loader_config lc = {pat, NULL, 0, mc->vocab, 1, mc->max_seq - 1, false, 0, 0, 1};
  ot_loader *L = NULL;
  must(ot_loader_open(&L, &lc), "held-out data");
  const int64_t nwin = ot_loader_windows(L);
  printf("held-out data %s: %lld windows of %d tokens\n\n", pat, (long long)nwin, mc->max_seq);
  printf("%-10s %12s %12s %14s %10s\n", "weights", "MB weights", "loss", "perplexity", "vs f32");
  const ot_dtype kinds[3] = {OT_F32, OT_BF16, OT_I8};
  double ppl0 = 0.0;
  for (int k = 0; k < 3; k++) {
    for (int g = 0; g < (kinds[k] == OT_I8 ? 2 : 1); g++) {
      const int group = kinds[k] == OT_I8 ? (g == 0 ? o->group : 0) : 0;
      ot_engine *e = engine(m, kinds[k], group, OT_F32, 1, mc->max_seq);
      ot_loader_reset(L);
      double nll = 0.0;
      int64_t cnt = 0;
      for (int64_t w = 0; w < nwin; w++) {
        const int32_t *b;
        must(ot_loader_next(L, &b), "held-out batch");
        double s;
        int c;
        must(ot_engine_score(e, b, mc->max_seq, &s, &c), "score");
        nll += s;
        cnt += c;
      }
      const double loss = nll / (double)cnt, ppl = exp(loss);
      if (k == 0) ppl0 = ppl;
      char wl[32];
      if (kinds[k] == OT_I8) snprintf(wl, sizeof wl, group ? "int8/g%d" : "int8/row", group);
      else snprintf(wl, sizeof wl, "%s", wname(kinds[k]));
      printf("%-10s %12.2f %12.5f %14.4f %+9.3f%%\n", wl, ot_engine_weight_bytes(e) / 1e6, loss, ppl,
             100.0 * (ppl / ppl0 - 1.0));
      ot_engine_free(e);
    }
  }
  ot_loader_close(L);
  ot_model_free(m);
}

// "a,b,c" -> ints
static int parse_list(const char *s, int *out, int cap) {
  int n = 0;
  for (const char *p = s; *p && n < cap;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1) return -1;
    out[n++] = (int)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  opts o = {"gpt2", NULL, NULL, 64, 32, 5, 5, OT_F32, {128, 1024}, 2, {OT_F32, OT_BF16, OT_I8}, 3, false};
  bool busy = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--model") && v) { o.model = v; i++; }
    else if (!strcmp(a, "--group") && v) { o.group = atoi(v); i++; }
    else if (!strcmp(a, "--steps") && v) { o.steps = atoi(v); i++; }
    else if (!strcmp(a, "--reps") && v) { o.reps = atoi(v); i++; }
    else if (!strcmp(a, "--trials") && v) { o.trials = atoi(v); i++; }
    else if (!strcmp(a, "--ppl") && v) { o.ppl = v; i++; }
    else if (!strcmp(a, "--data") && v) { o.data = v; i++; }
    else if (!strcmp(a, "--profile")) o.profile = true;
    else if (!strcmp(a, "--busy-core")) busy = true;
    else if (!strcmp(a, "--kv") && v) { o.kv = !strcmp(v, "bf16") ? OT_BF16 : OT_F32; i++; }
    else if (!strcmp(a, "--prompts") && v) {
      if ((o.np = parse_list(v, o.prompts, 4)) < 1) { fprintf(stderr, "bad --prompts '%s'\n", v); return 2; }
      i++;
    } else if (!strcmp(a, "--weights") && v) {
      o.nw = 0;
      char buf[64];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t && o.nw < 3; t = strtok(NULL, ",")) {
        if (!strcmp(t, "f32")) o.w[o.nw++] = OT_F32;
        else if (!strcmp(t, "bf16")) o.w[o.nw++] = OT_BF16;
        else if (!strcmp(t, "int8")) o.w[o.nw++] = OT_I8;
        else { fprintf(stderr, "bad --weights entry '%s' (f32, bf16, int8)\n", t); return 2; }
      }
      i++;
    } else {
      fprintf(stderr, "usage: bench_infer [--model PRESET] [--weights f32,bf16,int8] [--group G] "
              "[--prompts 128,1024] [--steps N] [--reps N] [--trials N] [--kv f32|bf16] [--profile] "
              "[--ppl DIR [--data DIR]] [--busy-core]\n");
      return 2;
    }
  }
  if (o.steps < 1 || o.steps > 1000 || o.reps < 1 || o.reps > 63 || o.trials < 1 || o.trials > MAX_TRIALS) {
    fprintf(stderr, "--steps must be in [1, 1000], --reps in [1, 63], --trials in [1, 64]\n");
    return 2;
  }
  if (busy) busy_bench(&o);
  else if (o.ppl) perplexity(&o);
  else bench(&o);
  return 0;
}
