// ot_gemm against ot_ref_gemm: odd shapes, all transposes, leading dimensions
// above the minimum, alpha/beta, f32 and bf16 (both C dtypes, and the native
// bf16 request falling back where oneDNN has no bf16), the primitive cache,
// concurrent calls, determinism, bad arguments: on oneDNN, then the shapes again
// on the own GEMM (its own cases: test_gemm_own.c).
#include "harness.h"
#include "ops/gemm_impl.h"
#include <pthread.h>

static th_rng g_rng = {0x6e3d};

// One GEMM case vs the reference. pad: extra leading-dimension elements.
static void run_case(ot_dtype ab, ot_dtype cdt, bool ta, bool tb, int M, int N, int K, int pad,
                     float alpha, float beta, const char *tag) {
  int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
  float *A = th_falloc(na), *B = th_falloc(nb), *C0 = th_falloc(nc), *Cr = th_falloc(nc), *Cg = th_falloc(nc);
  th_fill(&g_rng, A, na, -1, 1);
  th_fill(&g_rng, B, nb, -1, 1);
  th_fill(&g_rng, C0, nc, -1, 1);
  th_round_dt(ab, A, na);
  th_round_dt(ab, B, nb);
  th_round_dt(cdt, C0, nc);
  memcpy(Cr, C0, nc * 4);
  ot_ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, ldc);
  ot_status s;
  if (ab == OT_F32) {
    memcpy(Cg, C0, nc * 4);
    s = ot_gemm(ab, cdt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cg, ldc);
  } else {
    void *Ab = th_to_dt(ab, A, na), *Bb = th_to_dt(ab, B, nb);
    if (cdt == OT_F32) {
      memcpy(Cg, C0, nc * 4);
      s = ot_gemm(ab, cdt, ta, tb, M, N, K, alpha, Ab, lda, Bb, ldb, beta, Cg, ldc);
    } else {
      void *Cb = th_to_dt(cdt, C0, nc);
      s = ot_gemm(ab, cdt, ta, tb, M, N, K, alpha, Ab, lda, Bb, ldb, beta, Cb, ldc);
      th_from_dt(cdt, Cb, Cg, nc);
      free(Cb);
    }
    free(Ab); free(Bb);
  }
  th_check(s == OT_OK, "%s gemm %s->%s ok (%s)", tag, ot_dtype_name(ab), ot_dtype_name(cdt), ot_last_error());
  // f32: 2e-6 per 128 terms of the contraction (a single output with cancellation, e.g.
  // M = N = 1, sees the whole f32 rounding of its sum)
  double tol = th_tol(cdt, 2e-6 * (1.0 + K / 128.0), 5e-3);
  th_check_nerr(Cg, Cr, nc, tol, "%s gemm %s->%s tA=%d tB=%d M=%d N=%d K=%d pad=%d alpha=%g beta=%g", tag,
                ot_dtype_name(ab), ot_dtype_name(cdt), ta, tb, M, N, K, pad, alpha, beta);
  // the padding columns of C are never written
  bool pad_ok = true;
  for (int i = 0; i < M && pad; i++)
    for (int j = N; j < ldc; j++) pad_ok &= Cg[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
  th_check(pad_ok, "%s gemm M=%d N=%d pad=%d leaves C's padding untouched", tag, M, N, pad);
  free(A); free(B); free(C0); free(Cr); free(Cg);
}

static void test_shapes(const char *tag, ot_dtype ab, ot_dtype cdt) {
  static const int dims[] = {1, 3, 17, 65, 127};
  static const float ab_pairs[][2] = {{1, 0}, {0.5f, 0}, {1, 1}, {-2, 0.75f}};
  int c = 0;
  for (int mi = 0; mi < 5; mi++)
    for (int ni = 0; ni < 5; ni++)
      for (int ki = 0; ki < 5; ki++, c++) {
        int M = dims[mi], N = dims[ni], K = dims[ki];
        // every combination once with plain settings; rotate the others through
        bool ta = c & 1, tb = (c >> 1) & 1;
        int pad = (c % 3 == 0) ? 3 : 0;
        const float *p = ab_pairs[c % 4];
        run_case(ab, cdt, ta, tb, M, N, K, pad, p[0], p[1], tag);
      }
  for (int t = 0; t < 4; t++)  // a larger one, each transpose combination
    run_case(ab, cdt, t & 1, t >> 1, 129, 769, 65, t == 3 ? 5 : 0, 1.0f, t == 2 ? 1.0f : 0.0f, tag);
}

// beta = 0 must not read C (NaN there stays out of the result), also with a transposed A
// (the sgemm path) on both of its paths.
static void test_beta0_ignores_c(void) {
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4] = {NAN, NAN, NAN, NAN}, R[4];
  ot_ref_gemm(false, false, 2, 2, 3, 1, A, 3, B, 2, 0, R, 2);
  ot_status s = ot_gemm(OT_F32, OT_F32, false, false, 2, 2, 3, 1, A, 3, B, 2, 0, C, 2);
  th_check(s == OT_OK, "beta=0 gemm ok");
  th_check_nerr(C, R, 4, 1e-7, "beta=0 ignores NaN in C");
  for (int mode = 0; mode < 2; mode++) {
    float Ct[4] = {NAN, NAN, NAN, NAN}, Rt[4];
    ot__gemm_ta_set_mode(mode);
    ot_ref_gemm(true, false, 2, 2, 3, 1, A, 2, B, 2, 0, Rt, 2);
    s = ot_gemm(OT_F32, OT_F32, true, false, 2, 2, 3, 1, A, 2, B, 2, 0, Ct, 2);
    th_check(s == OT_OK, "beta=0 transposed-A gemm ok (mode %d)", mode);
    th_check_nerr(Ct, Rt, 4, 1e-7, "beta=0 transposed-A (mode %d) ignores NaN in C", mode);
  }
  ot__gemm_ta_set_mode(-1);
  th_check(R[0] == 4 && R[1] == 5 && R[2] == 10 && R[3] == 11, "reference gemm on a hand example");
}

static void test_cache(void) {
  int M = 33, N = 20, K = 9;
  float *A = th_falloc((size_t)M * K), *B = th_falloc((size_t)K * N), *C = th_falloc((size_t)M * N);
  th_fill(&g_rng, A, (size_t)M * K, -1, 1);
  th_fill(&g_rng, B, (size_t)K * N, -1, 1);
  ot_gemm_cache_clear();
  th_check(ot_gemm_cache_size() == 0, "cache empty after clear");
  ot_gemm(OT_F32, OT_F32, false, false, M, N, K, 1, A, K, B, N, 0, C, N);
  int n1 = ot_gemm_cache_size();
  th_check(n1 == 1, "first call creates one primitive (%d)", n1);
  ot_gemm(OT_F32, OT_F32, false, false, M, N, K, 1, A, K, B, N, 0, C, N);
  th_check(ot_gemm_cache_size() == n1, "second call with the same shape creates none (%d)", ot_gemm_cache_size());
  ot_gemm(OT_F32, OT_F32, false, false, M, N, K, 1, A, K, B, N, 1, C, N);   // beta differs
  ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, A, K, B, K, 0, C, N);    // transB differs
  th_check(ot_gemm_cache_size() == n1 + 2, "beta and transB are part of the key (%d)", ot_gemm_cache_size());
  ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, A, K, B, K, 0, C, N);
  th_check(ot_gemm_cache_size() == n1 + 2, "repeat creates none (%d)", ot_gemm_cache_size());
  free(A); free(B); free(C);
}

// A bounded cache: 20 distinct shapes (e.g. every prompt length a server sees)
// keep at most the cap, the least recently used dropped; a dropped shape is
// made again and still equals the reference; a recently used one survives.
static void test_cache_bound(void) {
  ot_gemm_cache_clear();
  ot__gemm_cache_set_max(8);
  const int N = 12, K = 10;
  float *A = th_falloc(32 * K), *B = th_falloc((size_t)K * N), *C = th_falloc(32 * N),
        *R = th_falloc(32 * N);
  th_fill(&g_rng, A, 32 * K, -1, 1);
  th_fill(&g_rng, B, (size_t)K * N, -1, 1);
  for (int M = 1; M <= 20; M++) {
    ot_gemm(OT_F32, OT_F32, false, false, M, N, K, 1, A, K, B, N, 0, C, N);
    ot_gemm(OT_F32, OT_F32, false, false, 1, N, K, 1, A, K, B, N, 0, C, N);   // M = 1 stays hot
  }
  th_check(ot_gemm_cache_size() <= 8, "cache bounded by its cap: %d primitives", ot_gemm_cache_size());
  int before = ot_gemm_cache_size();
  ot_gemm(OT_F32, OT_F32, false, false, 1, N, K, 1, A, K, B, N, 0, C, N);
  th_check(ot_gemm_cache_size() == before, "the recently used shape was kept");
  ot_status s = ot_gemm(OT_F32, OT_F32, false, false, 3, N, K, 1, A, K, B, N, 0, C, N);   // dropped
  ot_ref_gemm(false, false, 3, N, K, 1, A, K, B, N, 0, R, N);
  th_check(s == OT_OK && th_nerr(C, R, (size_t)3 * N) < 1e-6, "a dropped shape is made again and "
           "correct (nerr %.2e)", th_nerr(C, R, (size_t)3 * N));
  th_check(ot_gemm_cache_size() <= 8, "still bounded: %d", ot_gemm_cache_size());
  ot__gemm_cache_set_max(0);
  free(A); free(B); free(C); free(R);
}

typedef struct { const float *A, *B; float *C; int reps; ot_status s; } thr_arg;
static void *thr_main(void *p) {
  thr_arg *a = p;
  for (int r = 0; r < a->reps && a->s == OT_OK; r++)
    a->s = ot_gemm(OT_F32, OT_F32, false, true, 64, 48, 40, 1, a->A, 40, a->B, 40, 0, a->C, 48);
  return NULL;
}

// Two threads hammering the same cached primitive (one of them uses
// temporary memory objects when the entry is busy); results bitwise equal to
// a single-threaded call, and to each other.
static void test_concurrent(void) {
  float *A = th_falloc(64 * 40), *B = th_falloc(48 * 40), *C0 = th_falloc(64 * 48);
  th_fill(&g_rng, A, 64 * 40, -1, 1);
  th_fill(&g_rng, B, 48 * 40, -1, 1);
  ot_gemm(OT_F32, OT_F32, false, true, 64, 48, 40, 1, A, 40, B, 40, 0, C0, 48);
  thr_arg a[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    a[i] = (thr_arg){A, B, th_falloc(64 * 48), 50, OT_OK};
    pthread_create(&t[i], NULL, thr_main, &a[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    th_check(a[i].s == OT_OK, "concurrent gemm thread %d ok", i);
    th_check(memcmp(a[i].C, C0, 64 * 48 * 4) == 0, "concurrent gemm thread %d bitwise equal", i);
    free(a[i].C);
  }
  free(A); free(B); free(C0);
}

// Threads running cached primitives the main thread made, at the same time,
// each on its own data: every result bitwise equal to the same call made
// alone. (With oneDNN's library-managed scratchpad, shared by the primitives of
// the thread that creates them, such runs corrupted each other's partial sums.)
enum { CT_THREADS = 3, CT_SHAPES = 3, CT_REPS = 40 };
static const int ct_shape[CT_SHAPES][3] = {{70, 384, 128}, {2, 768, 128}, {64, 256, 384}};   // M, N, K
typedef struct { float *A[CT_SHAPES], *C[CT_SHAPES], *want[CT_SHAPES]; const float *B[CT_SHAPES]; int bad; ot_status s; } ct_arg;
static void *ct_main(void *p) {
  ct_arg *a = p;
  for (int r = 0; r < CT_REPS && a->s == OT_OK; r++)
    for (int j = 0; j < CT_SHAPES && a->s == OT_OK; j++) {
      const int M = ct_shape[j][0], N = ct_shape[j][1], K = ct_shape[j][2];
      a->s = ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, a->A[j], K, a->B[j], K, 0, a->C[j], N);
      if (memcmp(a->C[j], a->want[j], (size_t)M * N * 4) != 0) a->bad++;
    }
  return NULL;
}

static void test_concurrent_data(void) {
  ct_arg a[CT_THREADS];
  float *B[CT_SHAPES];
  for (int j = 0; j < CT_SHAPES; j++) {
    B[j] = th_falloc((size_t)ct_shape[j][1] * ct_shape[j][2]);
    th_fill(&g_rng, B[j], (size_t)ct_shape[j][1] * ct_shape[j][2], -1, 1);
  }
  for (int i = 0; i < CT_THREADS; i++) {
    a[i].bad = 0; a[i].s = OT_OK;
    for (int j = 0; j < CT_SHAPES; j++) {
      const int M = ct_shape[j][0], N = ct_shape[j][1], K = ct_shape[j][2];
      a[i].A[j] = th_falloc((size_t)M * K);
      a[i].C[j] = th_falloc((size_t)M * N);
      a[i].want[j] = th_falloc((size_t)M * N);
      a[i].B[j] = B[j];
      th_fill(&g_rng, a[i].A[j], (size_t)M * K, -1, 1);
      // made (and its primitive created) here, alone, in the main thread
      ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, a[i].A[j], K, B[j], K, 0, a[i].want[j], N);
    }
  }
  pthread_t t[CT_THREADS];
  for (int i = 0; i < CT_THREADS; i++) pthread_create(&t[i], NULL, ct_main, &a[i]);
  for (int i = 0; i < CT_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < CT_THREADS; i++) {
    th_check(a[i].s == OT_OK && a[i].bad == 0, "thread %d of %d, own data, %d shapes x %d runs at once: "
             "%d results differ from the same call alone", i, CT_THREADS, CT_SHAPES, CT_REPS, a[i].bad);
    for (int j = 0; j < CT_SHAPES; j++) { free(a[i].A[j]); free(a[i].C[j]); free(a[i].want[j]); }
  }
  for (int j = 0; j < CT_SHAPES; j++) free(B[j]);
}

static void test_bad_args(void) {
  float A[16] = {0}, B[16] = {0}, C[16] = {0};
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, -1, 2, 2, 1, A, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "M=-1", "negative M");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, 2, 0, 2, 1, A, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "N=0", "zero N");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, 2, 2, 2, 1, NULL, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "'A' is NULL", "NULL A");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, 2, 2, 2, 1, A, 2, B, 2, 0, NULL, 2), OT_EINVAL,
                 "'C' is NULL", "NULL C");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, 2, 3, 4, 1, A, 3, B, 3, 0, C, 3), OT_EINVAL,
                 "lda=3", "lda < K");
  th_check_error(ot_gemm(OT_F32, OT_F32, true, false, 5, 3, 2, 1, A, 3, B, 3, 0, C, 3), OT_EINVAL,
                 "lda=3 must be >= M=5", "transposed lda < M");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, true, 2, 3, 4, 1, A, 4, B, 3, 0, C, 3), OT_EINVAL,
                 "ldb=3 must be >= K=4", "transposed ldb < K");
  th_check_error(ot_gemm(OT_F32, OT_F32, false, false, 2, 3, 2, 1, A, 2, B, 3, 0, C, 2), OT_EINVAL,
                 "ldc=2", "ldc < N");
  th_check_error(ot_gemm(OT_I8, OT_F32, false, false, 2, 2, 2, 1, A, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "i8", "i8 operands");
  th_check_error(ot_gemm(OT_F16, OT_BF16, false, false, 2, 2, 2, 1, A, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "bf16", "bf16 C with f16 A/B");
  th_check_error(ot_gemm(OT_F32, OT_BF16, false, false, 2, 2, 2, 1, A, 2, B, 2, 0, C, 2), OT_EINVAL,
                 "bf16", "bf16 C with f32 A/B");
}

static void test_determinism(void) {
  int M = 97, N = 130, K = 200;
  float *A = th_falloc((size_t)M * K), *B = th_falloc((size_t)N * K), *C1 = th_falloc((size_t)M * N),
        *C2 = th_falloc((size_t)M * N);
  th_fill(&g_rng, A, (size_t)M * K, -1, 1);
  th_fill(&g_rng, B, (size_t)N * K, -1, 1);
  ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, A, K, B, K, 0, C1, N);
  ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1, A, K, B, K, 0, C2, N);
  th_check(memcmp(C1, C2, (size_t)M * N * 4) == 0, "gemm bitwise repeatable");
  free(A); free(B); free(C1); free(C2);
}

int main(void) {
  printf("bf16 GEMM path by default here: %s\n", ot__gemm_bf16_native() ? "oneDNN native" : "convert to f32");
  // the oneDNN path (cache, sgemm, conversion) first, then ot_gemm's shapes on the own GEMM
  ot__gemm_impl_set_mode(0);
  test_beta0_ignores_c();
  test_shapes("f32", OT_F32, OT_F32);
  ot__gemm_ta_set_mode(0);   // transposed A through the matmul primitive too (default: sgemm)
  test_shapes("f32 ta-matmul", OT_F32, OT_F32);
  ot__gemm_ta_set_mode(-1);
  ot_isa isas[OT_ISA_COUNT];
  int n = th_isas(isas);
  for (int i = 0; i < n; i++) {  // the bf16 conversion kernels are per ISA
    ot_isa_force(isas[i]);
    char tag[32];
    snprintf(tag, sizeof tag, "[%s] bf16", ot_isa_name(isas[i]));
    test_shapes(tag, OT_BF16, OT_F32);
    test_shapes(tag, OT_BF16, OT_BF16);
  }
  for (int i = 0; i < n; i++) {  // f16: always the conversion path (F16C / scalar per ISA)
    ot_isa_force(isas[i]);
    char tag[32];
    snprintf(tag, sizeof tag, "[%s] f16", ot_isa_name(isas[i]));
    test_shapes(tag, OT_F16, OT_F32);
    test_shapes(tag, OT_F16, OT_F16);
  }
  ot_isa_unforce();
  // ask for native bf16 too: oneDNN either runs it or (no avx512 bf16 support)
  // refuses once, and the call falls back to the conversion path
  ot__gemm_bf16_set_mode(1);
  run_case(OT_BF16, OT_F32, false, true, 65, 17, 127, 0, 1, 0, "native-request");
  run_case(OT_BF16, OT_BF16, true, false, 17, 65, 3, 2, 1, 1, "native-request");
  int n0 = ot_gemm_cache_size();
  run_case(OT_BF16, OT_F32, false, true, 65, 17, 127, 0, 1, 0, "native-request");
  th_check(ot_gemm_cache_size() == n0, "native request: repeat creates no primitive");
  ot__gemm_bf16_set_mode(-1);
  test_cache();
  test_cache_bound();
  test_concurrent();
  test_concurrent_data();
  test_determinism();
  test_bad_args();
  ot_gemm_cache_clear();
  ot__gemm_impl_set_mode(1);
  for (int i = 0; i < n; i++) {
    ot_isa_force(isas[i]);
    char tag[32];
    snprintf(tag, sizeof tag, "[%s] own", ot_isa_name(isas[i]));
    test_shapes(tag, OT_F32, OT_F32);
    test_shapes(tag, OT_BF16, OT_BF16);
    test_shapes(tag, OT_F16, OT_F32);
  }
  ot_isa_unforce();
  test_beta0_ignores_c();
  test_determinism();
  ot__gemm_impl_set_mode(-2);
  return th_finish();
}
