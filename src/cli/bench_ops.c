// `ot bench ops`: measures this machine's f32 FMA peak and STREAM triad
// bandwidth, then each operator's forward and backward throughput as a
// fraction of the relevant roofline (GEMM-like ops: FMA peak; element-wise and
// row ops: STREAM). Linear is also compared with oneDNN's bare matmul.
// Bytes are the minimal DRAM traffic of each op (reads + writes of its tensors).
#include "bench_util.h"

static bench_opts g_opt;

// ------------------------------------------------------------ rooflines -----
static void run_triad(void *ctx) {
  float **abc = ctx;
  ot_stream_triad(abc[0], abc[1], abc[2], 3.0f, (size_t)(uintptr_t)abc[3], false);
}
static void run_triad_nt(void *ctx) {
  float **abc = ctx;
  ot_stream_triad(abc[0], abc[1], abc[2], 3.0f, (size_t)(uintptr_t)abc[3], true);
}

// STREAM triad bandwidth (bytes counted as STREAM does: 3 arrays, no
// write-allocate); *nt_gbs receives the same with streaming stores.
static double measure_stream(double *nt_gbs) {
  size_t n = g_opt.quick ? (size_t)8 << 20 : (size_t)32 << 20;  // 3 x 128 MiB: far beyond L3
  float *a = bench_alloc(n * 4), *b = bench_alloc(n * 4), *c = bench_alloc(n * 4);
  ot_stream_init(a, b, c, n);
  float *ctx[4] = {a, b, c, (float *)(uintptr_t)n};
  double t = bench_median(run_triad, ctx, g_opt.reps);
  *nt_gbs = 3.0 * 4.0 * n / bench_median(run_triad_nt, ctx, g_opt.reps) * 1e-9;
  ot_mem_free(a); ot_mem_free(b); ot_mem_free(c);
  return 3.0 * 4.0 * n / t * 1e-9;
}

static const cli_flag k_flags[] = {
    CLI_B("--quick", bench_opts, quick, "smaller shapes and fewer repetitions (a smoke run)"),
    CLI_I("--reps", bench_opts, reps, 1, 1000, "N", "timed repetitions per case (median reported; default 7)"),
    CLI_S("--only", bench_opts, only, "S", "run only cases whose name contains S (e.g. layernorm, linear)"),
};

const cli_command cli_bench_command = {
    "bench ops", "[--quick] [--reps N] [--only SUBSTRING]",
    "measure FMA peak and STREAM bandwidth, then every operator",
    "Measures this machine's f32 FMA peak and STREAM triad bandwidth, then each operator's\n"
    "forward and backward throughput as a fraction of the relevant roofline.\n",
    k_flags, sizeof k_flags / sizeof k_flags[0],
    "Threads: OMP_NUM_THREADS. Kernel ISA: OT_ISA=portable|avx2|avx512.\n", NULL, false};

int ot_cmd_bench(int argc, char **argv) {
  if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) { cli_help(&cli_bench_command, stdout); return 0; }
  if (argc < 1 || strcmp(argv[0], "ops") != 0)
    return cli_usage_error(&cli_bench_command, "expected 'ops' (the only benchmark so far)");
  g_opt.reps = 7;
  const int pr = cli_parse(&cli_bench_command, argc - 1, argv + 1, &g_opt, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (g_opt.quick && g_opt.reps > 3) g_opt.reps = 3;
  printf("ops-transformer operator benchmark: %d threads, kernels %s, median of %d runs\n",
         ot_threads_get(), ot_isa_name(ot_isa_active()), g_opt.reps);
  g_opt.peak_gflops = ot_measure_fma_peak();
  double nt;
  g_opt.stream_gbs = measure_stream(&nt);
  printf("measured f32 FMA peak: %.1f GFLOP/s   STREAM triad: %.1f GB/s (with streaming stores: %.1f GB/s)\n",
         g_opt.peak_gflops, g_opt.stream_gbs, nt);
  printf("fractions: GEMM-like ops of the FMA peak, others of the STREAM triad; in-place ops (read and\n"
         "write the same lines) avoid write-allocate traffic and can exceed 100%%\n\n");
  bench_header();
  int rc = 0;
  rc |= bench_linear_cases(&g_opt);
  rc |= bench_rowop_cases(&g_opt);
  rc |= bench_misc_cases(&g_opt);
  return rc;
}
