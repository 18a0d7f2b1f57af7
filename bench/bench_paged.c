// Paged decode attention (ot_attn_paged_decode) for one GPT-2 124M layer at
// batch --batch (default 1): 12 heads of 64, 16-token blocks in a pool of 512
// blocks per head (the engine's layout at 8 sequences of 1024 tokens), each
// sequence of --keys keys; sequence b's block i is pool block i * batch + b (the
// sequences' blocks interleaved, as a batch that grew step by step gets them). The cache holds nonzero values written before the
// timing (untouched pages would all read the kernel's zero page). Two cases,
// each the median and best of --reps calls:
//  - cold: before each call the threads read 64 MiB of another buffer, so K/V
//    come from DRAM as in a decode step that has just streamed the weights;
//  - cached: calls back to back (K/V in the caches), the kernel's compute bound.
//   OMP_NUM_THREADS=2 ./build/bench_paged [--keys N] [--batch B] [--kv f32|bf16] [--reps N]
#include "internal.h"
#include "ot/ot.h"
#include "ot/infer.h"
#include <stdlib.h>
#include <string.h>
#include "bench_stats.h"

static void *must_alloc(size_t bytes) {
  void *p = ot_mem_alloc(bytes, OT_MEM_WORKSPACE);
  if (!p) { fprintf(stderr, "bench_paged: %s\n", ot_last_error()); exit(1); }
  return p;
}

int main(int argc, char **argv) {
  int L = 160, reps = 101, B = 1;
  ot_dtype dt = OT_F32;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--keys") && i + 1 < argc) L = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) B = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
      const char *v = argv[++i];
      if (!strcmp(v, "f32")) dt = OT_F32;
      else if (!strcmp(v, "bf16")) dt = OT_BF16;
      else { fprintf(stderr, "bench_paged: --kv %s: use f32 or bf16\n", v); return 2; }
    } else {
      fprintf(stderr, "usage: bench_paged [--keys N] [--batch B] [--kv f32|bf16] [--reps N]\n");
      return 2;
    }
  }
  enum { H = 12, D = 64, BT = 16, NB = 512 };
  if (L < 1 || reps < 1 || B < 1 || B > 8 || (size_t)B * ((L + BT - 1) / BT) > NB) {
    fprintf(stderr, "bench_paged: --keys in [1, %d], --batch in [1, 8] with batch x blocks <= %d, --reps >= 1\n",
            64 * BT, NB);
    return 2;
  }
  const size_t es = ot_dtype_size(dt), per = (size_t)H * NB * BT * D;
  float *kf = must_alloc(per * 4), *vf = must_alloc(per * 4);
  uint32_t st = 12345;
  for (size_t i = 0; i < per; i++) {   // values in [-1, 1)
    st = st * 1664525u + 1013904223u;
    kf[i] = (float)(st >> 8) / 8388608.0f - 1.0f;
    st = st * 1664525u + 1013904223u;
    vf[i] = (float)(st >> 8) / 8388608.0f - 1.0f;
  }
  void *k = kf, *v = vf;
  if (dt == OT_BF16) {
    k = must_alloc(per * 2);
    v = must_alloc(per * 2);
    ot_cvt_f32_to_bf16(kf, k, per);
    ot_cvt_f32_to_bf16(vf, v, per);
  }
  int32_t tab[8 * 64], len[8];
  for (int b = 0; b < B; b++) {
    len[b] = L;
    for (int i = 0; i < 64; i++) tab[b * 64 + i] = (i * B + b) % NB;
  }
  float q[8 * H * D], o[8 * H * D];
  for (int i = 0; i < B * H * D; i++) q[i] = 0.05f * (float)(i % 17) - 0.4f;
  const ot_paged_attn p = {B, H, H, D, BT, NB, dt, k, v, (size_t)BT * D, (size_t)NB * BT * D,
                           tab, 64, len, 0.0f};
  const size_t fl = (size_t)64 << 20;
  char *f = must_alloc(fl);
  memset(f, 1, fl);
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return 1;
  const double bytes = 2.0 * B * H * L * D * (double)es;
  printf("bench_paged: batch %d x %d keys, kv %s, %d threads, kernels %s: %.2f MB of K/V per call\n", B, L,
         ot_dtype_name(dt), ot_threads_get(), ot_isa_name(ot_isa_active()), bytes / 1e6);
  for (int cold = 1; cold >= 0; cold--) {
    long sink = 0;
    for (int r = 0; r < reps; r++) {
      if (cold) {
        long s = 0;
#pragma omp parallel for reduction(+ : s)
        for (size_t i = 0; i < fl; i += 64) s += f[i];
        sink += s;
      }
      const double t0 = ot_now();
      if (ot_attn_paged_decode(o, H * D, q, H * D, &p) != OT_OK) {
        fprintf(stderr, "bench_paged: %s\n", ot_last_error());
        return 1;
      }
      t[r] = ot_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_d);
    printf("%-7s median %7.1f us (%5.1f GB/s)   best %7.1f us%s\n", cold ? "cold" : "cached",
           t[reps / 2] * 1e6, bytes / t[reps / 2] / 1e9, t[0] * 1e6, sink == 42 ? " " : "");
  }
  free(t);
  ot_mem_free(f);
  if (k != kf) { ot_mem_free(k); ot_mem_free(v); }
  ot_mem_free(kf);
  ot_mem_free(vf);
  return 0;
}
