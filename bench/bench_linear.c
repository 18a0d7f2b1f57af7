// Linear forward against oneDNN's bare matmul (a primitive made here with
// plain row-major layouts, no bias), f32 and bf16, median of 10 runs after
// warm-up; plus the GELU variants and the backward for reference.
//   usage: bench_linear [reps]     (OMP_NUM_THREADS governs both sides)
#include "ot/ot.h"
#include "ops/gemm_impl.h"
#include <oneapi/dnnl/dnnl.h>
#include <math.h>
#include <stdlib.h>

static int g_reps = 10;

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *t, int n) { qsort(t, n, sizeof *t, cmpd); return t[n / 2]; }

typedef struct { dnnl_primitive_t p; dnnl_stream_t s; dnnl_exec_arg_t args[3]; } bare_mm;

// Bare oneDNN matmul C[M,N] = A[M,K] B[K,N], all plain (tag ab), dtype dt.
static dnnl_status_t bare_make(bare_mm *b, dnnl_engine_t eng, ot_dtype dt, int M, int N, int K,
                               void *A, void *B, void *C, char *impl, size_t ni) {
  dnnl_data_type_t t = dt == OT_BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t ma, mb, mc;
  dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
  dnnl_memory_desc_init_by_tag(&ma, 2, da, t, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&mb, 2, db, t, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&mc, 2, dc, t, dnnl_ab);
  dnnl_matmul_desc_t d;
  dnnl_matmul_desc_init(&d, &ma, &mb, NULL, &mc);
  dnnl_primitive_desc_t pd;
  dnnl_status_t st = dnnl_primitive_desc_create(&pd, &d, NULL, eng, NULL);
  if (st) return st;
  const char *s = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
  snprintf(impl, ni, "%s", s ? s : "?");
  st = dnnl_primitive_create(&b->p, pd);
  dnnl_primitive_desc_destroy(pd);
  if (st) return st;
  dnnl_memory_t m[3];
  dnnl_memory_create(&m[0], &ma, eng, A);
  dnnl_memory_create(&m[1], &mb, eng, B);
  dnnl_memory_create(&m[2], &mc, eng, C);
  int ids[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
  for (int i = 0; i < 3; i++) { b->args[i].arg = ids[i]; b->args[i].memory = m[i]; }
  return dnnl_stream_create(&b->s, eng, dnnl_stream_default_flags);
}
static void bare_free(bare_mm *b) {
  for (int i = 0; i < 3; i++) dnnl_memory_destroy(b->args[i].memory);
  dnnl_primitive_destroy(b->p);
  dnnl_stream_destroy(b->s);
}
static double bare_time(bare_mm *b) {
  double t[64];
  for (int r = -3; r < g_reps; r++) {
    double t0 = ot_now();
    dnnl_primitive_execute(b->p, b->s, 3, b->args);
    dnnl_stream_wait(b->s);
    if (r >= 0) t[r] = ot_now() - t0;
  }
  return median(t, g_reps);
}

typedef struct { ot_dtype dt; int M, N, K; void *x, *w, *y, *pre, *dy, *dx; float *b, *dw, *db; } lin_args;

// which: 0 fwd+bias, 1 fwd+bias+GELU fused (pre NULL), 2 the same with a
// separate GELU pass, 3 fwd+bias+GELU keeping pre, 4 bwd (no act)
static double lin_time(lin_args *a, int which) {
  double t[64];
  ot__linear_set_gelu_fused(which == 1 ? 1 : which == 2 ? 0 : -1);
  for (int r = -2; r < g_reps; r++) {
    double t0 = ot_now();
    ot_status s;
    if (which == 4)
      s = ot_linear_bwd(a->dt, a->dx, a->dw, a->db, a->dy, NULL, a->x, a->w, a->M, a->N, a->K, OT_ACT_NONE);
    else
      s = ot_linear_fwd(a->dt, a->y, which == 3 ? a->pre : NULL, a->x, a->w, a->b, a->M, a->N, a->K,
                        which ? OT_ACT_GELU : OT_ACT_NONE);
    if (s != OT_OK) { printf("  error: %s\n", ot_last_error()); return NAN; }
    if (r >= 0) t[r] = ot_now() - t0;
  }
  ot__linear_set_gelu_fused(-1);
  return median(t, g_reps);
}

static void fill(void *p, ot_dtype dt, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    float v = ((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    if (dt == OT_BF16) ((uint16_t *)p)[i] = ot_f32_to_bf16(v); else ((float *)p)[i] = v;
  }
}

int main(int argc, char **argv) {
  if (argc > 1) g_reps = atoi(argv[1]) > 0 && atoi(argv[1]) <= 64 ? atoi(argv[1]) : 10;
  dnnl_engine_t eng;
  dnnl_engine_create(&eng, dnnl_cpu, 0);
  const ot_cpu_features *f = ot_cpu();
  printf("threads %d, avx2 %d, avx512f %d, avx512_bf16 %d; bf16 GEMM path by default: %s; median of %d\n",
         ot_threads_get(), f->avx2, f->avx512f, f->avx512_bf16, ot__gemm_bf16_native() ? "native" : "convert",
         g_reps);
  static const int shapes[][3] = {{2048, 768, 768}, {2048, 3072, 768}};
  double bare_f32[2] = {0, 0};
  for (int d = 0; d < 2; d++)
    for (int si = 0; si < 2; si++) {
      ot_dtype dt = d ? OT_BF16 : OT_F32;
      int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
      size_t es = ot_dtype_size(dt);
      double gf = 2.0 * M * N * K * 1e-9;
      lin_args a = {dt, M, N, K, malloc((size_t)M * K * es), malloc((size_t)N * K * es), malloc((size_t)M * N * es),
                    malloc((size_t)M * N * es), malloc((size_t)M * N * es), malloc((size_t)M * K * es),
                    malloc((size_t)N * 4), calloc((size_t)N * K, 4), calloc((size_t)N, 4)};
      fill(a.x, dt, (size_t)M * K, 1); fill(a.w, dt, (size_t)N * K, 2); fill(a.dy, dt, (size_t)M * N, 3);
      fill(a.b, OT_F32, (size_t)N, 4);
      printf("\n%s M=%d N=%d K=%d (%.2f GFLOP)\n", ot_dtype_name(dt), M, N, K, gf);
      bare_mm bm;
      char impl[64] = "";
      void *Bp = malloc((size_t)K * N * es);
      fill(Bp, dt, (size_t)K * N, 5);
      dnnl_status_t st = bare_make(&bm, eng, dt, M, N, K, a.x, Bp, a.y, impl, sizeof impl);
      double tb = NAN;
      if (st == dnnl_success) {
        tb = bare_time(&bm);
        bare_free(&bm);
        printf("  %-44s %8.2f ms %7.1f GFLOP/s  [%s]\n", "oneDNN bare matmul (plain, no bias)", tb * 1e3, gf / tb, impl);
      } else {
        printf("  %-44s unavailable (oneDNN status %d: no bf16 matmul on this CPU)\n", "oneDNN bare matmul (plain, no bias)",
               (int)st);
      }
      free(Bp);
      if (dt == OT_F32) bare_f32[si] = tb;
      double ref = st == dnnl_success ? tb : bare_f32[si];
      const char *refn = st == dnnl_success ? "bare" : "bare f32";
      static const char *names[5] = {"ot_linear_fwd (bias)", "ot_linear_fwd (bias, GELU epilogue)",
                                     "ot_linear_fwd (bias, GELU 2nd pass)", "ot_linear_fwd (bias, GELU, pre kept)",
                                     "ot_linear_bwd (dx, dw, db)"};
      for (int mode = 0; mode < (dt == OT_BF16 ? 2 : 1); mode++) {
        if (dt == OT_BF16) ot__gemm_bf16_set_mode(mode ? 1 : 0);
        for (int w = 0; w < 5; w++) {
          double t = lin_time(&a, w);
          double fl = w == 4 ? 2 * gf : gf;
          char nm[80];
          snprintf(nm, sizeof nm, "%s%s", names[w], dt == OT_BF16 ? (mode ? " [native req]" : " [convert]") : "");
          printf("  %-44s %8.2f ms %7.1f GFLOP/s  ratio vs %s %.3f\n", nm, t * 1e3, fl / t, refn,
                 (w == 4 ? 2 * ref : ref) / t);
        }
      }
      ot__gemm_bf16_set_mode(-1);
      free(a.x); free(a.w); free(a.y); free(a.pre); free(a.dy); free(a.dx); free(a.b); free(a.dw); free(a.db);
    }
  printf("\nratio: bare matmul time (x2 for the backward's two GEMMs) / ot time; the goal for\n"
         "plain linear forward is >= 0.90. bf16 rows compare with bare f32 when oneDNN has no bf16.\n");
  printf("primitives cached: %d\n", ot_gemm_cache_size());
  ot_gemm_cache_clear();
  dnnl_engine_destroy(eng);
  return 0;
}
