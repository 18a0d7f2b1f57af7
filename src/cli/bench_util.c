#include "bench_util.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_median(void (*fn)(void *), void *ctx, int reps) {
  double t[1000];
  if (reps > 1000) reps = 1000;
  fn(ctx);
  for (int i = 0; i < reps; i++) {
    double t0 = ot_now();
    fn(ctx);
    t[i] = ot_now() - t0;
  }
  qsort(t, reps, sizeof(double), cmp_d);
  return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

void *bench_alloc(size_t bytes) {
  void *p = ot_mem_alloc(bytes, OT_MEM_WORKSPACE);
  if (!p) { fprintf(stderr, "ot bench: %s\n", ot_last_error()); exit(1); }
  memset(p, 0, bytes);
  return p;
}

void bench_fill(void *x, size_t n, ot_dtype dt, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    float v = (float)((s >> 8) * (2.0 / 16777216.0) - 1.0);
    if (dt == OT_BF16) ((uint16_t *)x)[i] = ot_f32_to_bf16(v); else ((float *)x)[i] = v;
  }
}

bool bench_wanted(const bench_opts *o, const char *name) { return !o->only || strstr(name, o->only); }

void bench_header(void) {
  printf("%-26s %-24s %10s %12s %9s  %s\n", "case", "shape", "time ms", "throughput", "of peak", "note");
}

void bench_row(const bench_opts *o, const char *name, const char *shape, double sec, double flops,
               double bytes, const char *note) {
  char thr[32], frac[16];
  if (flops > 0) {
    snprintf(thr, sizeof thr, "%.1f GF/s", flops / sec * 1e-9);
    snprintf(frac, sizeof frac, "%.0f%% FMA", 100 * flops / sec * 1e-9 / o->peak_gflops);
  } else {
    snprintf(thr, sizeof thr, "%.1f GB/s", bytes / sec * 1e-9);
    snprintf(frac, sizeof frac, "%.0f%% BW", 100 * bytes / sec * 1e-9 / o->stream_gbs);
  }
  printf("%-26s %-24s %10.3f %12s %9s  %s\n", name, shape, sec * 1e3, thr, frac, note ? note : "");
  fflush(stdout);
}

void bench_must(ot_status s, const char *what) {
  if (s != OT_OK) { fprintf(stderr, "ot bench: %s failed: %s\n", what, ot_last_error()); exit(1); }
}
