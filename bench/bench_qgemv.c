// Quantized linear (ot_qlinear_fwd) at decode sizes against the bandwidth
// roofline: for each GPT-2 124M weight shape and storage (f32, bf16, int8 per
// channel and per group), the time of y = x W^T at M = 1 and M = 8, the weight
// bytes streamed per second and their fraction of the STREAM triad measured
// here first. Each case cycles through enough copies of the weight to exceed
// the last-level cache several times, so the weights come from DRAM as in a
// real decode step. Then prefill sizes against oneDNN's f32 GEMM.
// Each case prints the median time per call and the best; GB/s and the
// fraction of STREAM use the best of both (on a shared machine the best shows
// what the kernel reaches when no other process takes a core or bandwidth;
// the median how much it was disturbed).
// --m M: that decode size only (1 to OT_QLINEAR_GEMV_MAX; default 1 and 8); --no-prefill skips the GEMM part;
// --pool MIB: the copies' total size (default 256; 0: one weight, cache-resident when it fits,
// which shows the kernels' compute bound).
// --streams: only a read probe behind the M = 1 kernels' layout (QG_S in
// src/ops/kern/qgemv.c): 256 MiB summed by the threads, each splitting its half
// into S = 1, 2, 4, 8 contiguous streams read side by side one 64-byte line of
// each at a time (prefetch 512 bytes ahead); median GB/s of 9 per S.
// --i8gemm [--rows M] [--reps N] [--cpu-time]: only the int8 GEMM against dequantize + f32 (see
// i8gemm_probe); --cpu-time: timed by thread CPU time (use with OMP_NUM_THREADS=1 on a busy machine).
//   OMP_NUM_THREADS=2 ./build/bench_qgemv [--quick] [--only SUBSTRING] [--m M] [--no-prefill] [--streams]
#include "internal.h"
#include "ot/ot.h"
#include "ot/quant.h"
#include <omp.h>
#include <stdlib.h>
#include <time.h>
#include "bench_stats.h"

static size_t POOL_BYTES = (size_t)256 << 20;   // weight copies per case: >= 8x a 32 MiB L3

typedef struct { double med, best; } timing;
static timing summarize(double *t, int n) {
  timing r;
  r.med = median(t, n);   // sorts
  r.best = t[0];
  return r;
}

static void *must_alloc(size_t bytes) {
  void *p = ot_mem_alloc(bytes, OT_MEM_WORKSPACE);
  if (!p) { fprintf(stderr, "bench_qgemv: %s\n", ot_last_error()); exit(1); }
  return p;
}
static void must(ot_status s, const char *what) {
  if (s != OT_OK) { fprintf(stderr, "bench_qgemv: %s: %s\n", what, ot_last_error()); exit(1); }
}

static void fill(float *x, size_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((s >> 8) * (2.0 / 16777216.0) - 1.0) * 0.05f;
  }
}

// STREAM triad GB/s (3 arrays of 128 MiB counted, as STREAM does), of 9 runs.
static timing stream_gbs(void) {
  const size_t n = (size_t)32 << 20;
  float *a = must_alloc(n * 4), *b = must_alloc(n * 4), *c = must_alloc(n * 4);
  ot_stream_init(a, b, c, n);
  double t[9];
  ot_stream_triad(a, b, c, 3.0f, n, false);
  for (int r = 0; r < 9; r++) {
    double t0 = ot_now();
    ot_stream_triad(a, b, c, 3.0f, n, false);
    t[r] = ot_now() - t0;
  }
  ot_mem_free(a); ot_mem_free(b); ot_mem_free(c);
  timing tm = summarize(t, 9);
  return (timing){12.0 * n / tm.med * 1e-9, 12.0 * n / tm.best * 1e-9};   // GB/s: median, best
}

typedef struct { const char *name; int N, K; } shape;
typedef struct { const char *name; ot_qw_kind kind; int group; bool pack; } storage;

// Seconds per call (median, best) of ot_qlinear_fwd over `copies` of W,
// cycling (each copy once per round), for about `budget` seconds.
static timing time_case(ot_qweight *copies, int ncopies, const float *x, float *y, int M, double budget) {
  double t[2001];
  int n = 0;
  double t_end = ot_now() + budget;
  must(ot_qlinear_fwd(y, x, &copies[0], NULL, M), "warm-up");
  while (n < 2001 && (n < 15 || ot_now() < t_end)) {
    // the copy used longest ago (never the warm-up's, still cached, when there are several)
    const ot_qweight *w = &copies[(n + 1) % ncopies];
    double t0 = ot_now();
    must(ot_qlinear_fwd(y, x, w, NULL, M), "ot_qlinear_fwd");
    t[n++] = ot_now() - t0;
  }
  return summarize(t, n);
}

// ncopies views of one quantized weight, the copies laid out one after another.
static ot_qweight *make_copies(const ot_qweight *w, int ncopies, void **pool) {
  const size_t db = w->pack ? ot_qweight_bytes(w)
                            : (size_t)w->rows * w->cols * (w->kind == OT_QW_F32 ? 4 : w->kind == OT_QW_BF16 ? 2 : 1);
  const size_t sb = ot_qweight_bytes(w) - db, stride = ot_align64(db) + ot_align64(sb);
  char *p = must_alloc(stride * (size_t)ncopies);
  ot_qweight *c = calloc((size_t)ncopies, sizeof *c);
  for (int i = 0; i < ncopies; i++) {
    char *d = p + stride * (size_t)i;
    memcpy(d, w->data, db);
    if (sb) memcpy(d + ot_align64(db), w->scales, sb);
    c[i] = *w;
    c[i].owned = false;
    c[i].data = d;
    c[i].scales = sb ? (float *)(d + ot_align64(db)) : NULL;
  }
  *pool = p;
  return c;
}

// Read bandwidth of n 64-bit words at a with S streams per thread (see --streams), bytes/s.
static double read_streams(const uint64_t *a, size_t n, int S) {
  uint64_t total = 0;
  const double t0 = ot_now();
#pragma omp parallel reduction(+ : total)
  {
    const int T = omp_get_num_threads(), t = omp_get_thread_num();
    const size_t lo = n * t / T / 8 * 8, hi = n * (t + 1) / T / 8 * 8, len = (hi - lo) / S / 8 * 8;
    uint64_t acc[8] = {0};
    for (size_t k = 0; k < len; k += 8)
      for (int s = 0; s < S; s++) {
        const uint64_t *p = a + lo + (size_t)s * len + k;
        __builtin_prefetch(p + 64, 0, 3);
        for (int j = 0; j < 8; j++) acc[j] += p[j];
      }
    for (int j = 0; j < 8; j++) total += acc[j];
  }
  const double dt = ot_now() - t0;
  if (total == 42) printf(" ");   // keeps the sum
  return (double)n * 8 / dt;
}

static void stream_probe(void) {
  const size_t n = (size_t)32 << 20;   // 256 MiB
  uint64_t *a = must_alloc(n * 8);
  for (size_t i = 0; i < n; i++) a[i] = i;
  printf("read probe: 256 MiB, %d threads, S streams per thread read side by side, median of 9\n",
         ot_threads_get());
  static const int Ss[] = {1, 2, 4, 8};
  double t[4][9];
  for (int r = 0; r < 9; r++)   // the S values interleaved, so that a change of load hits all
    for (int i = 0; i < 4; i++) t[i][r] = read_streams(a, n, Ss[i]);
  for (int i = 0; i < 4; i++) printf("S = %d   %6.2f GB/s\n", Ss[i], median(t[i], 9) / 1e9);
  ot_mem_free(a);
}

// --i8gemm: the int8 GEMM (ot_qlinear_i8_fwd) against dequantize + f32 GEMM (the
// int8 prefill path before it: the weight dequantized to f32, then oneDNN), at
// M = 128 (--rows M) on GPT-2 124M's shapes, per-channel and per group, the two
// alternated call by call (one weight, cache-resident: the compute bound);
// median ms and GOPS (2 M N K / time) of `reps` calls each.
// cpu: time the calls by this thread's CPU time instead of the wall clock
// (with OMP_NUM_THREADS=1 that is all the work of a call, and a process that
// shares its core with others still reads its own cost).
static double thread_cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void i8gemm_probe(int M, int reps, bool cpu) {
  double (*clk)(void) = cpu ? thread_cpu : ot_now;
  static const shape shapes[] = {{"mlp.fc", 3072, 768}, {"mlp.proj", 768, 3072}, {"qkv", 2304, 768},
                                 {"attn.proj", 768, 768}};
  static const int groups[] = {0, 64, 128, 32};
  printf("int8 GEMM vs dequantize + f32 GEMM: %d threads, kernels %s, M = %d, median of %d calls each, "
         "alternated, %s\n", ot_threads_get(), ot_isa_name(ot_isa_active()), M, reps,
         cpu ? "thread CPU time" : "wall clock");
  printf("%-10s %-12s %-6s %12s %12s %12s %12s %8s\n", "shape", "[N, K]", "group", "i8 ms", "i8 GOPS",
         "deq+f32 ms", "deq+f32 GOPS", "speedup");
  double *ta = malloc(sizeof(double) * (size_t)reps), *tb = malloc(sizeof(double) * (size_t)reps);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape sh = shapes[si];
    float *w = must_alloc((size_t)sh.N * sh.K * 4), *x = must_alloc((size_t)M * sh.K * 4);
    float *y = must_alloc((size_t)M * sh.N * 4), *wd = must_alloc((size_t)sh.N * sh.K * 4);
    fill(w, (size_t)sh.N * sh.K, 1 + (uint32_t)si);
    fill(x, (size_t)M * sh.K, 100 + (uint32_t)si);
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
      ot_qweight q;
      must(ot_qweight_quantize(&q, OT_QW_INT8, groups[gi], w, sh.N, sh.K), "quantize");
      ot_qweight f = {OT_QW_F32, sh.N, sh.K, 0, wd, NULL, false};
      must(ot_qlinear_i8_fwd(y, x, &q, NULL, M), "warm-up");
      must(ot_qweight_dequantize(&q, wd), "warm-up");
      must(ot_qlinear_fwd(y, x, &f, NULL, M), "warm-up");
      for (int r = 0; r < reps; r++) {
        double t0 = clk();
        must(ot_qlinear_i8_fwd(y, x, &q, NULL, M), "ot_qlinear_i8_fwd");
        double t1 = clk();
        must(ot_qweight_dequantize(&q, wd), "dequantize");
        must(ot_qlinear_fwd(y, x, &f, NULL, M), "ot_qlinear_fwd f32");
        double t2 = clk();
        ta[r] = t1 - t0;
        tb[r] = t2 - t1;
      }
      const double a = median(ta, reps), b = median(tb, reps), ops = 2.0 * M * sh.N * sh.K;
      char dims[32], gname[16];
      snprintf(dims, sizeof dims, "[%d, %d]", sh.N, sh.K);
      snprintf(gname, sizeof gname, groups[gi] ? "g%d" : "ch", groups[gi]);
      printf("%-10s %-12s %-6s %12.3f %12.1f %12.3f %12.1f %7.2fx\n", sh.name, dims, gname, a * 1e3, ops / a * 1e-9,
             b * 1e3, ops / b * 1e-9, b / a);
      fflush(stdout);
      ot_qweight_free(&q);
    }
    ot_mem_free(w); ot_mem_free(x); ot_mem_free(y); ot_mem_free(wd);
  }
  free(ta); free(tb);
}

int main(int argc, char **argv) {
  bool quick = false;
  bool prefill = true;
  const char *only = NULL;
  int only_m = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--m") && i + 1 < argc) only_m = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-prefill")) prefill = false;
    else if (!strcmp(argv[i], "--pool") && i + 1 < argc) POOL_BYTES = (size_t)atoi(argv[++i]) << 20;
    else if (!strcmp(argv[i], "--streams")) { stream_probe(); return 0; }
    else if (!strcmp(argv[i], "--i8gemm")) {
      int M = 128, reps = 21;
      bool cpu = false;
      for (int j = i + 1; j < argc; j++) {
        if (!strcmp(argv[j], "--rows") && j + 1 < argc) M = atoi(argv[++j]);
        else if (!strcmp(argv[j], "--reps") && j + 1 < argc) reps = atoi(argv[++j]);
        else if (!strcmp(argv[j], "--cpu-time")) cpu = true;
        else { fprintf(stderr, "bench_qgemv --i8gemm: unknown option '%s' (--rows M, --reps N, --cpu-time)\n", argv[j]); return 2; }
      }
      if (M < 1 || reps < 1) { fprintf(stderr, "bench_qgemv: --rows and --reps take positive counts\n"); return 2; }
      i8gemm_probe(M, reps, cpu);
      return 0;
    }
    else {
      fprintf(stderr, "usage: bench_qgemv [--quick] [--only SUBSTRING] [--m M] [--no-prefill] [--pool MIB] "
                      "[--streams] [--i8gemm [--rows M] [--reps N] [--cpu-time]]\n");
      return 2;
    }
  }
  if (only_m < 0 || only_m > OT_QLINEAR_GEMV_MAX) {
    fprintf(stderr, "bench_qgemv: --m %d outside [1, %d] (the GEMV kernels' rows)\n", only_m, OT_QLINEAR_GEMV_MAX);
    return 2;
  }
  static const shape shapes[] = {{"qkv", 2304, 768}, {"attn.proj", 768, 768}, {"mlp.fc", 3072, 768},
                                 {"mlp.proj", 768, 3072}, {"logits", 50304, 768}};
  static const storage stores[] = {{"f32", OT_QW_F32, 0, false},       {"f32/packed", OT_QW_F32, 0, true},
                                   {"bf16", OT_QW_BF16, 0, false},      {"int8/ch", OT_QW_INT8, 0, false},
                                   {"int8/g128", OT_QW_INT8, 128, false}, {"int8/g64", OT_QW_INT8, 64, false},
                                   {"int8/g32", OT_QW_INT8, 32, false}};
  int Ms[] = {1, 8};
  if (only_m) Ms[0] = Ms[1] = only_m;
  const double budget = quick ? 0.1 : 0.4;
  printf("quantized linear, decode sizes: %d threads, kernels %s, median per call, weights cycled "
         "through %d MiB of copies\n", ot_threads_get(), ot_isa_name(ot_isa_active()), (int)(POOL_BYTES >> 20));
  const timing sb = stream_gbs();
  const double bw = sb.best;
  printf("STREAM triad: %.1f GB/s best of 9 (the roofline below), median %.1f GB/s\n\n", sb.best, sb.med);
  printf("%-10s %-12s %-9s %2s %10s %10s %10s %9s %8s %8s\n", "shape", "[N, K]", "weights", "M", "median us",
         "best us", "best GB/s", "of STREAM", "MB", "GFLOP/s");
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape sh = shapes[si];
    float *w = must_alloc((size_t)sh.N * sh.K * 4), *x = must_alloc((size_t)OT_QLINEAR_GEMV_MAX * sh.K * 4);
    float *y = must_alloc((size_t)OT_QLINEAR_GEMV_MAX * sh.N * 4);
    fill(w, (size_t)sh.N * sh.K, 1 + (uint32_t)si);
    fill(x, (size_t)OT_QLINEAR_GEMV_MAX * sh.K, 100 + (uint32_t)si);
    for (size_t ki = 0; ki < sizeof stores / sizeof stores[0]; ki++) {
      const storage st = stores[ki];
      char tag[64];
      snprintf(tag, sizeof tag, "%s %s", sh.name, st.name);
      if (only && !strstr(tag, only)) continue;
      ot_qweight q;
      must(ot_qweight_quantize(&q, st.kind, st.group, w, sh.N, sh.K), "quantize");
      if (st.pack) must(ot_qweight_pack(&q), "pack");
      const size_t bytes = ot_qweight_bytes(&q);
      int nc = (int)((POOL_BYTES + bytes - 1) / bytes);
      if (nc < 2) nc = 2;
      void *pool;
      ot_qweight *copies = make_copies(&q, nc, &pool);
      for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        if (mi && Ms[mi] == Ms[0]) continue;
        timing t = time_case(copies, nc, x, y, Ms[mi], budget);
        char dims[32];
        snprintf(dims, sizeof dims, "[%d, %d]", sh.N, sh.K);
        printf("%-10s %-12s %-9s %2d %10.1f %10.1f %10.1f %8.0f%% %8.2f %8.1f\n", sh.name, dims, st.name, Ms[mi],
               t.med * 1e6, t.best * 1e6, bytes / t.best * 1e-9, 100.0 * bytes / t.best * 1e-9 / bw, bytes / 1e6,
               2.0 * Ms[mi] * sh.N * sh.K / t.med * 1e-9);
        fflush(stdout);
      }
      free(copies);
      ot_mem_free(pool);
      ot_qweight_free(&q);
    }
    ot_mem_free(w); ot_mem_free(x); ot_mem_free(y);
  }

  if (!prefill) return 0;
  // prefill: the dequantized-tile GEMM path against oneDNN's f32 GEMM on the f32 weight
  printf("\nprefill sizes (GEMM path): time vs oneDNN f32 GEMM of the same shape\n");
  printf("%-10s %-12s %4s %-9s %10s %10s %8s\n", "shape", "[N, K]", "M", "weights", "best ms", "GFLOP/s", "vs f32");
  const int Mp[] = {17, 128};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape sh = shapes[si];
    if (quick && sh.N > 4096) continue;
    if (only && !strstr(sh.name, only)) continue;
    float *w = must_alloc((size_t)sh.N * sh.K * 4), *x = must_alloc((size_t)128 * sh.K * 4);
    float *y = must_alloc((size_t)128 * sh.N * 4);
    fill(w, (size_t)sh.N * sh.K, 1 + (uint32_t)si);
    fill(x, (size_t)128 * sh.K, 100 + (uint32_t)si);
    for (size_t mi = 0; mi < 2; mi++) {
      const int M = Mp[mi];
      double tf = 0;
      for (int ki = 0; ki < 4; ki++) {
        const storage st = stores[ki == 0 ? 0 : ki == 1 ? 1 : ki == 2 ? 2 : 4];   // f32, f32/packed, bf16, int8/g128
        ot_qweight q;
        must(ot_qweight_quantize(&q, st.kind, st.group, w, sh.N, sh.K), "quantize");
        if (st.pack) must(ot_qweight_pack(&q), "pack");
        double t = time_case(&q, 1, x, y, M, budget).best;
        if (ki == 0) tf = t;
        char dims[32];
        snprintf(dims, sizeof dims, "[%d, %d]", sh.N, sh.K);
        printf("%-10s %-12s %4d %-9s %10.3f %10.1f %7.2fx\n", sh.name, dims, M, st.name, t * 1e3,
               2.0 * M * sh.N * sh.K / t * 1e-9, tf / t);
        fflush(stdout);
        ot_qweight_free(&q);
      }
    }
    ot_mem_free(w); ot_mem_free(x); ot_mem_free(y);
  }
  return 0;
}
