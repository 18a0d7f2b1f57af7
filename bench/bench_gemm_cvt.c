// bf16 GEMMs without a native bf16 GEMM: the conversion path's variants on the
// GEMMs of a GPT-2 124M training step (B*T = 2048 tokens, d_model 768, d_ff
// 3072, vocabulary 50304), against the f32 GEMM of the same shape:
//   f32        all operands f32 (what --dtype f32 runs)
//   full       bf16 operands converted whole (the tile budget set above every
//              operand: the old behaviour, workspace = M*K + K*N + M*N floats)
//   tiled      bf16 operands converted tile by tile (bounded workspace)
//   tiled-w32  as tiled, the weights read as f32 (the f32 master weights)
//   native     oneDNN's bf16 GEMM (where the CPU has avx512_bf16)
// Per GEMM: forward y = x w^T, dx = dy w, dw += dy^T x. The variants run in
// turn, repeated, and the median of each is printed (ms) with its workspace.
// Usage: bench_gemm_cvt [--reps N (5)] [--bytes MiB (32)] [--kt N (512)] [--m M (2048)]
//                       [--layer "qkv"|"attn proj"|"fc"|"fc proj"|"lm head"] [--gemm fwd|dx|dw]
// Asserts nothing.
#include "ot/ot.h"
#include "internal.h"
#include "ops/gemm_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_stats.h"

enum { V_F32, V_FULL, V_TILED, V_W32, V_NATIVE, NV };
static const char *vname[NV] = {"f32", "full", "tiled", "tiled-w32", "native"};

static void *buf(size_t n, size_t es, unsigned seed) {
  void *p = ot_mem_alloc(n * es, OT_MEM_OTHER);
  if (!p) { fprintf(stderr, "bench_gemm_cvt: out of memory\n"); exit(1); }
  float *f = malloc(n * 4);
  for (size_t i = 0; i < n; i++) f[i] = (float)((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f;
  if (es == 2) ot_cvt_f32_to_bf16(f, p, n);
  else memcpy(p, f, n * 4);
  free(f);
  return p;
}

// One GEMM's variant v: a description with pointers to the right dtypes.
typedef struct { ot_mm m[NV]; size_t ws[NV]; } gemm_set;

static double run(ot_mm *m, int v, size_t bytes, int kt) {
  ot__gemm_bf16_set_mode(v == V_NATIVE ? 1 : 0);
  ot__gemm_cvt_set_tiles(v == V_FULL ? ((size_t)1 << 40) : bytes, v == V_FULL ? 1 << 30 : kt);
  double t0 = ot_now();
  ot_status s = ot__mm_run(m, NULL, "bench");
  double t = ot_now() - t0;
  if (s != OT_OK) { fprintf(stderr, "bench_gemm_cvt: %s\n", ot_last_error()); exit(1); }
  return t;
}

int main(int argc, char **argv) {
  int reps = 5, kt = 512, M = 2048;
  const char *only = NULL, *gonly = NULL;
  size_t bytes = (size_t)32 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--bytes")) bytes = (size_t)(atof(argv[i + 1]) * 1048576.0);
    else if (!strcmp(argv[i], "--kt")) kt = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--m")) M = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--layer")) only = argv[i + 1];
    else if (!strcmp(argv[i], "--gemm")) gonly = argv[i + 1];
    else { fprintf(stderr, "usage: bench_gemm_cvt [--reps N] [--bytes MiB] [--kt N] [--m M] [--layer NAME] [--gemm fwd|dx|dw]\n"); return 2; }
  }
  if (reps < 1 || reps > 100 || kt < 1 || M < 1 || bytes < 4096) { fprintf(stderr, "bench_gemm_cvt: bad option\n"); return 2; }
  static const struct { const char *name; int N, K; } layers[] = {
      {"qkv", 2304, 768}, {"attn proj", 768, 768}, {"fc", 3072, 768}, {"fc proj", 768, 3072},
      {"lm head", 50304, 768}};
  printf("bf16 GEMM conversion path, M=%d tokens, tile budget %.1f MiB, dw contraction chunk %d, "
         "median of %d; native bf16 on this CPU: %s\n", M, bytes / 1048576.0, kt, reps,
         ot_cpu()->avx512_bf16 ? "yes" : "no");
  printf("%-10s %-4s %9s %9s %9s %9s %9s | workspace MiB: full, tiled, tiled-w32\n", "layer", "gemm",
         vname[0], vname[1], vname[2], vname[3], vname[4]);
  for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
    const int N = layers[l].N, K = layers[l].K;
    if (only && strcmp(only, layers[l].name) != 0) continue;
    float *x32 = buf((size_t)M * K, 4, 1), *w32 = buf((size_t)N * K, 4, 2), *dy32 = buf((size_t)M * N, 4, 3);
    void *x16 = buf((size_t)M * K, 2, 1), *w16 = buf((size_t)N * K, 2, 2), *dy16 = buf((size_t)M * N, 2, 3);
    float *y32 = buf((size_t)M * N, 4, 4), *dx32 = buf((size_t)M * K, 4, 5), *dw = buf((size_t)N * K, 4, 6);
    void *y16 = buf((size_t)M * N, 2, 4), *dx16 = buf((size_t)M * K, 2, 5);
    static const char *gn[3] = {"fwd", "dx", "dw"};
    for (int g = 0; g < 3; g++) {
      if (gonly && strcmp(gonly, gn[g]) != 0) continue;
      ot_mm m[NV];
      for (int v = 0; v < NV; v++) {
        const bool f = v == V_F32;
        const ot_dtype a = f ? OT_F32 : OT_BF16, b = f || v == V_W32 ? OT_F32 : OT_BF16;
        const void *w = b == OT_F32 ? (const void *)w32 : w16;
        if (g == 0)
          m[v] = (ot_mm){a, b, a, false, true, M, N, K, 1, 0, f ? (void *)x32 : x16, K, w, K,
                         f ? (void *)y32 : y16, N, NULL, false};
        else if (g == 1)
          m[v] = (ot_mm){a, b, a, false, false, M, K, N, 1, 0, f ? (void *)dy32 : dy16, N, w, K,
                         f ? (void *)dx32 : dx16, K, NULL, false};
        else   // dw: B is the activation x, bf16 in every bf16 variant
          m[v] = (ot_mm){a, a, OT_F32, true, false, N, K, M, 1, 1, f ? (void *)dy32 : dy16, N,
                         f ? (void *)x32 : x16, K, dw, K, NULL, false};
      }
      double t[NV][100];
      size_t ws[NV];
      for (int v = 0; v < NV; v++) {
        run(&m[v], v, bytes, kt);   // warm-up: primitives, scratch
        ot__gemm_bf16_set_mode(v == V_NATIVE ? 1 : 0);
        ot__gemm_cvt_set_tiles(v == V_FULL ? ((size_t)1 << 40) : bytes, v == V_FULL ? 1 << 30 : kt);
        ws[v] = ot__mm_ws(&m[v]);
      }
      for (int r = 0; r < reps; r++)
        for (int v = 0; v < NV; v++) t[v][r] = run(&m[v], v, bytes, kt);
      printf("%-10s %-4s", layers[l].name, gn[g]);
      for (int v = 0; v < NV; v++) {
        qsort(t[v], reps, sizeof(double), cmp_d);
        printf(" %9.2f", 1e3 * t[v][reps / 2]);
      }
      printf(" | %8.2f %8.2f %8.2f\n", ws[V_FULL] / 1048576.0, ws[V_TILED] / 1048576.0,
             ws[V_W32] / 1048576.0);
      fflush(stdout);
    }
    void *ps[] = {x32, w32, dy32, x16, w16, dy16, y32, dx32, dw, y16, dx16};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
  }
  ot__gemm_bf16_set_mode(-1);
  ot__gemm_cvt_set_tiles(0, 0);
  return 0;
}
