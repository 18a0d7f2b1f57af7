// Small helpers the benchmark programs share: ascending sort of timings and
// their median, and a splitmix64 stream for synthetic inputs.
#ifndef OT_BENCH_STATS_H
#define OT_BENCH_STATS_H
#include <stdint.h>
#include <stdlib.h>

// qsort comparator: ascending doubles.
static inline int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Median of t[0, n) (n >= 1); sorts t ascending, so t[0] is then the minimum.
static inline double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

// The next value of the splitmix64 stream with state *s.
static inline uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
#endif
