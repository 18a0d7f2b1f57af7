// The own GEMM against oneDNN on the GEMMs of a GPT-2 124M training step
// (B*T = 2048 tokens, d_model 768, d_ff 3072, vocabulary 50304):
//   fwd  y[M, N] = x[M, K] W[N, K]^T         (+ bias)
//   dx   dx[M, K] = dy[M, N] W[N, K]
//   dw   dW[N, K] += dy[M, N]^T x[M, K]      (a transposed A, beta = 1)
// Both implementations run alternately on each shape (one warm-up each, then
// --reps timed calls each); the medians are printed in GFLOP/s and as a share of
// this machine's f32 FMA peak, measured before and after the cases (the higher
// of the two). Operands: f32, or bf16 A and B (--dtype bf16; oneDNN then runs
// natively where the CPU has avx512_bf16, else its conversion path).
// Usage: bench_gemm [--reps N (7)] [--dtype f32|bf16] [--only SUBSTRING] [--m M (2048)] [--cpu-time] [--best]
//                   [--kc N] [--mc N] [--nc N] (the own GEMM's blocks; default: from the caches)
// --cpu-time: times by the process's CPU time over the threads (for tuning on a
// busy machine: time spent descheduled is not counted, spinning is).
// --best: the fastest of the reps instead of the median (for tuning while neighbours come and go).
// Threads: OMP_NUM_THREADS; kernels: OT_ISA. Asserts nothing.
#include "ot/ot.h"
#include "internal.h"
#include "ops/gemm_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_stats.h"

static void *buf(size_t n, ot_dtype dt, unsigned seed) {
  void *p = ot_mem_alloc(n * ot_dtype_size(dt), OT_MEM_OTHER);
  float *f = malloc(n * 4);
  if (!p || !f) { fprintf(stderr, "bench_gemm: out of memory\n"); exit(1); }
  for (size_t i = 0; i < n; i++) f[i] = (float)((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f;
  if (dt == OT_BF16) ot_cvt_f32_to_bf16(f, p, n);
  else memcpy(p, f, n * 4);
  free(f);
  return p;
}

static int g_cpu;   // --cpu-time: process CPU time / threads instead of wall time
static int g_best;  // --best: the fastest rep instead of the median (tuning on a noisy machine)

static double now(void) {
  if (!g_cpu) return ot_now();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / ot_threads_get();
}

static double run(const ot_mm *m, int own) {
  double t0 = now();
  ot_status s = own ? ot__mm_own_run(m, "bench_gemm") : ot__mm_run_lib(m, NULL, "bench_gemm");
  double t = now() - t0;
  if (s != OT_OK) { fprintf(stderr, "bench_gemm: %s\n", ot_last_error()); exit(1); }
  return t;
}

int main(int argc, char **argv) {
  int reps = 7, M = 2048, kc = 0, mc = 0, nc = 0;
  const char *only = NULL;
  ot_dtype dt = OT_F32;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc && strcmp(argv[i], "--cpu-time") && strcmp(argv[i], "--best")) { fprintf(stderr, "bench_gemm: %s needs a value\n", argv[i]); return 2; }
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--m")) M = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--kc")) kc = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mc")) mc = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nc")) nc = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!strcmp(argv[i], "--cpu-time")) { g_cpu = 1; i--; }
    else if (!strcmp(argv[i], "--best")) { g_best = 1; i--; }
    else if (!strcmp(argv[i], "--dtype")) dt = !strcmp(argv[i + 1], "bf16") ? OT_BF16 : OT_F32;
    else { fprintf(stderr, "usage: bench_gemm [--reps N] [--dtype f32|bf16] [--only S] [--m M] [--cpu-time] [--best] [--kc N] [--mc N] [--nc N]\n"); return 2; }
  }
  if (reps < 1 || M < 1) { fprintf(stderr, "bench_gemm: --reps and --m must be >= 1\n"); return 2; }
  ot__gemm_own_set_blocks(mc, kc, nc, 0);
  static const struct { const char *name; int n, k; } layer[] = {
    {"qkv", 2304, 768}, {"attn proj", 768, 768}, {"fc", 3072, 768}, {"fc proj", 768, 3072}, {"lm head", 50304, 768}};
  const double peak0 = ot_measure_fma_peak();
  printf("threads %d, kernels %s, A/B %s; f32 FMA peak %.1f GFLOP/s (before)\n", ot_threads_get(),
         ot_isa_name(ot_isa_active()), ot_dtype_name(dt), peak0);
  printf("%-10s %-4s %24s %12s %12s %8s\n", "layer", "gemm", "M x N x K", "oneDNN GF/s", "own GF/s", "own/lib");
  double *t[2];
  t[0] = malloc(sizeof(double) * reps); t[1] = malloc(sizeof(double) * reps);
  double res[5][3][2];
  int nres = 0;
  for (int l = 0; l < 5; l++)
    for (int g = 0; g < 3; g++) {
      static const char *gname[3] = {"fwd", "dx", "dw"};
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", layer[l].name, gname[g]);
      if (only && !strstr(tag, only)) { res[l][g][0] = -1; continue; }
      const int N = layer[l].n, K = layer[l].k;
      void *x = buf((size_t)M * K, dt, 1), *w = buf((size_t)N * K, dt, 2), *y = buf((size_t)M * N, dt, 3);
      float *out = ot_mem_alloc(sizeof(float) * (size_t)(M > N ? M : N) * (N > K ? N : K), OT_MEM_OTHER);
      ot_mm m = {dt, dt, OT_F32, false, false, 0, 0, 0, 1.0f, 0.0f, NULL, 0, NULL, 0, out, 0, NULL, false};
      if (g == 0) { m.M = M; m.N = N; m.K = K; m.A = x; m.lda = K; m.B = w; m.ldb = K; m.tb = true; m.ldc = N; }
      else if (g == 1) { m.M = M; m.N = K; m.K = N; m.A = y; m.lda = N; m.B = w; m.ldb = K; m.ldc = K; }
      else { m.M = N; m.N = K; m.K = M; m.A = y; m.lda = N; m.ta = true; m.B = x; m.ldb = K; m.ldc = K; m.beta = 1.0f; }
      run(&m, 0); run(&m, 1);
      for (int r = 0; r < reps; r++) { t[0][r] = run(&m, 0); t[1][r] = run(&m, 1); }
      const double fl = 2.0 * M * N * K;
      for (int v = 0; v < 2; v++) {
        qsort(t[v], (size_t)reps, sizeof(double), cmp_d);
        res[l][g][v] = fl / t[v][g_best ? 0 : reps / 2] * 1e-9;
      }
      char shape[48];
      snprintf(shape, sizeof shape, "%d x %d x %d", m.M, m.N, m.K);
      printf("%-10s %-4s %24s %12.1f %12.1f %7.2fx\n", layer[l].name, gname[g], shape, res[l][g][0], res[l][g][1],
             res[l][g][1] / res[l][g][0]);
      fflush(stdout);
      nres++;
      ot_mem_free(x); ot_mem_free(w); ot_mem_free(y); ot_mem_free(out);
    }
  const double peak1 = ot_measure_fma_peak(), peak = peak0 > peak1 ? peak0 : peak1;
  printf("f32 FMA peak %.1f GFLOP/s (after); shares of %.1f:\n", peak1, peak);
  for (int l = 0; l < 5; l++)
    for (int g = 0; g < 3; g++)
      if (res[l][g][0] >= 0)
        printf("  %-10s %-4s oneDNN %5.1f%%  own %5.1f%%\n", layer[l].name, (const char *[]){"fwd", "dx", "dw"}[g],
               100 * res[l][g][0] / peak, 100 * res[l][g][1] / peak);
  free(t[0]); free(t[1]);
  return nres ? 0 : 1;
}
