// Shared pieces of `ot bench`: options, timing (median), tracked buffers,
// table rows with the fraction of the relevant roofline.
#ifndef OT_BENCH_UTIL_H
#define OT_BENCH_UTIL_H
#include "cli.h"
#include "internal.h"

typedef struct {
  bool quick;
  int reps;
  const char *only;
  double peak_gflops, stream_gbs;
} bench_opts;

// Median wall time of `reps` calls of fn(ctx) after one warm-up call.
double bench_median(void (*fn)(void *), void *ctx, int reps);
// Tracked allocation (workspace category); exits with a message on failure.
void *bench_alloc(size_t bytes);
// Fills n floats (f32) or bf16 values with a deterministic pattern in [-1, 1].
void bench_fill(void *x, size_t n, ot_dtype dt, uint32_t seed);
bool bench_wanted(const bench_opts *o, const char *name);
void bench_header(void);
// One table row: flops > 0 -> GFLOP/s vs FMA peak; else bytes -> GB/s vs STREAM.
void bench_row(const bench_opts *o, const char *name, const char *shape, double sec,
               double flops, double bytes, const char *note);
// Aborts the benchmark with the library's message when an op fails.
void bench_must(ot_status s, const char *what);

int bench_linear_cases(const bench_opts *o);
int bench_rowop_cases(const bench_opts *o);
int bench_misc_cases(const bench_opts *o);
#endif
