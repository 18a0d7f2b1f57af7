// The own blocked GEMM (ops/gemm_own.c, kern/sgemm.c) against the scalar
// reference on every ISA this CPU runs: odd shapes with blocks forced small (so
// that several row, column, contraction blocks and k-groups are crossed), every
// transpose, mixed storage kinds of A, B and C (f32 / bf16 / f16), the epilogues
// (alpha, beta, bias, GELU), 16-bit C over a long contraction, the results
// bitwise independent of the thread count, and the per-shape choice between the
// own GEMM and oneDNN (measured at first use, then fixed; OT_GEMM's modes).
// ot_gemm's shapes in both modes are in test_gemm.c.
#include "harness.h"
#include "ops/gemm_impl.h"
#include "ops/kern/sgemm_k.h"
#include <pthread.h>

static th_rng g_rng = {0x51ee};

typedef struct {
  ot_dtype adt, bdt, cdt;
  bool ta, tb, bias, gelu;
  int M, N, K, pad;
  float alpha, beta;
} own_case;

// Runs c on the own GEMM with `threads` threads; returns the f32 view of C
// (caller frees) and the reference in *ref (NULL: not wanted).
static float *run_own(const own_case *c, int threads, float **ref, unsigned seed) {
  th_rng rng = {seed};
  const int lda = (c->ta ? c->M : c->K) + c->pad, ldb = (c->tb ? c->K : c->N) + c->pad, ldc = c->N + c->pad;
  const size_t na = (size_t)(c->ta ? c->K : c->M) * lda, nb = (size_t)(c->tb ? c->N : c->K) * ldb,
               nc = (size_t)c->M * ldc;
  float *A = th_falloc(na), *B = th_falloc(nb), *C = th_falloc(nc), *bias = th_falloc((size_t)c->N);
  th_fill(&rng, A, na, -1, 1);
  th_fill(&rng, B, nb, -1, 1);
  th_fill(&rng, C, nc, -1, 1);
  th_fill(&rng, bias, (size_t)c->N, -1, 1);
  th_round_dt(c->adt, A, na);
  th_round_dt(c->bdt, B, nb);
  th_round_dt(c->cdt, C, nc);
  if (ref) {
    float *R = th_falloc(nc);
    memcpy(R, C, nc * 4);
    ot_ref_gemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, lda, B, ldb, c->beta, R, ldc);
    for (int i = 0; i < c->M; i++) {
      float *row = R + (size_t)i * ldc;
      if (c->bias) for (int j = 0; j < c->N; j++) row[j] += bias[j];
      if (c->gelu) ot_ref_gelu_fwd(row, row, (size_t)c->N);
    }
    *ref = R;
  }
  void *Ad = th_to_dt(c->adt, A, na), *Bd = th_to_dt(c->bdt, B, nb), *Cd = th_to_dt(c->cdt, C, nc);
  ot_mm m = {c->adt, c->bdt, c->cdt, c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->beta, Ad, lda, Bd, ldb, Cd, ldc,
             c->bias ? bias : NULL, c->gelu};
  const int t0 = ot_threads_get();
  ot_threads_set(threads);
  ot_status s = ot__mm_own_run(&m, "test");
  ot_threads_set(t0);
  th_check(s == OT_OK, "own gemm runs (%s)", ot_last_error());
  th_from_dt(c->cdt, Cd, C, nc);
  free(A); free(B); free(bias); free(Ad); free(Bd); free(Cd);
  return C;
}

static void check_case(const own_case *c, const char *tag) {
  float *R, *C = run_own(c, 2, &R, 7);
  // f32 C: 2e-6 per 128 terms of the contraction (operands rounded to their kinds first)
  const double tol = th_tol(c->cdt, 2e-6 * (1.0 + c->K / 128.0), 5e-3);
  th_check_nerr(C, R, (size_t)c->M * (c->N + c->pad), tol,
                "%s own %s x %s -> %s tA=%d tB=%d M=%d N=%d K=%d pad=%d alpha=%g beta=%g bias=%d gelu=%d", tag,
                ot_dtype_name(c->adt), ot_dtype_name(c->bdt), ot_dtype_name(c->cdt), c->ta, c->tb, c->M, c->N, c->K,
                c->pad, c->alpha, c->beta, c->bias, c->gelu);
  free(C); free(R);
}

// Odd shapes and every option, with blocks forced small: mc 2 micro-tiles, kc 24
// (or the whole K for 16-bit C), nc 3 column panels, k-groups of 2.
static void test_shapes(const char *tag) {
  static const int dims[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 37, 50}, {37, 13, 97}, {64, 96, 24}, {50, 131, 77}};
  static const ot_dtype kinds[][3] = {{OT_F32, OT_F32, OT_F32}, {OT_BF16, OT_BF16, OT_F32}, {OT_BF16, OT_BF16, OT_BF16},
                                      {OT_F16, OT_F16, OT_F16}, {OT_BF16, OT_F32, OT_F32}, {OT_F32, OT_F16, OT_F32}};
  int mr, nr;
  OT_KPICK(k_sg_tile)(&mr, &nr);
  int n = 0;
  for (int blocks = 0; blocks < 2; blocks++) {
    ot__gemm_own_set_blocks(blocks ? 2 * mr : 0, blocks ? 24 : 0, blocks ? 3 * nr : 0, blocks ? 2 : 0);
    for (int d = 0; d < 6; d++)
      for (int k = 0; k < 6; k++, n++) {
        own_case c = {kinds[k][0], kinds[k][1], kinds[k][2], n & 1, (n >> 1) & 1, n % 3 == 0, n % 4 == 1,
                      dims[d][0], dims[d][1], dims[d][2], n % 5 == 0 ? 3 : 0, n % 7 == 3 ? -0.5f : 1.0f,
                      n % 3 == 1 ? 0.75f : n % 3 == 2 ? 1.0f : 0.0f};
        if (c.gelu) c.beta = 0.0f;
        check_case(&c, tag);
      }
  }
  ot__gemm_own_set_blocks(0, 0, 0, 0);
}

// Each C value's sum runs in one order whatever the split: 1, 2 and 3 threads
// give the same bits, with small blocks (many work items) and the default ones.
static void test_threads(void) {
  const own_case c = {OT_F32, OT_F32, OT_F32, false, true, true, false, 203, 171, 300, 1, 1.0f, 1.0f};
  int mr, nr;
  OT_KPICK(k_sg_tile)(&mr, &nr);
  for (int blocks = 0; blocks < 2; blocks++) {
    ot__gemm_own_set_blocks(blocks ? mr : 0, blocks ? 40 : 0, blocks ? 2 * nr : 0, 0);
    float *C1 = run_own(&c, 1, NULL, 9), *C2 = run_own(&c, 2, NULL, 9), *C3 = run_own(&c, 3, NULL, 9);
    const size_t n = (size_t)c.M * (c.N + c.pad) * 4;
    th_check(memcmp(C1, C2, n) == 0 && memcmp(C1, C3, n) == 0,
             "own gemm (%s blocks): 1, 2 and 3 threads bitwise equal", blocks ? "small" : "default");
    free(C1); free(C2); free(C3);
  }
  ot__gemm_own_set_blocks(0, 0, 0, 0);
  // default blocks over many rows: the row blocks evened out over the threads, B read in place
  // (f32, k-major, whole panels: gemm_own.c's direct_b)
  const own_case t = {OT_F32, OT_F32, OT_F32, true, false, false, false, 2500, 64, 700, 0, 1.0f, 1.0f};
  float *R, *T1 = run_own(&t, 1, &R, 4), *T2 = run_own(&t, 2, NULL, 4), *T3 = run_own(&t, 3, NULL, 4);
  const size_t nt = (size_t)t.M * t.N;
  th_check(memcmp(T1, T2, nt * 4) == 0 && memcmp(T1, T3, nt * 4) == 0,
           "own gemm M=%d (row blocks evened out): 1, 2 and 3 threads bitwise equal", t.M);
  th_check_nerr(T2, R, nt, 2e-6 * (1.0 + t.K / 128.0), "own gemm M=%d K=%d, 2 threads, against the reference", t.M,
                t.K);
  free(R); free(T1); free(T2); free(T3);
}

// A 16-bit C over a contraction of several k-blocks: computed into an f32 C and rounded once
// (gemm_own.c's c_detour): within the 16-bit tolerance of the reference (beta, bias), and
// bitwise the f32-C result rounded (GELU).
static void test_c16_long(const char *tag) {
  for (int d = 0; d < 2; d++) {
    const ot_dtype cdt = d ? OT_F16 : OT_BF16;
    const own_case c = {OT_BF16, OT_F32, cdt, false, true, true, false, 37, 45, 1500, 2, 0.75f, 1.0f};
    check_case(&c, tag);
    own_case g = {OT_F32, OT_BF16, cdt, true, false, false, true, 29, 40, 1400, 0, 1.0f, 0.0f};
    float *C16 = run_own(&g, 2, NULL, 12);
    g.cdt = OT_F32;
    float *C32 = run_own(&g, 2, NULL, 12);
    th_round_dt(cdt, C32, (size_t)g.M * g.N);
    th_check(memcmp(C16, C32, sizeof(float) * (size_t)g.M * g.N) == 0,
             "%s own gemm %s C, K=%d: the f32 result rounded once", tag, ot_dtype_name(cdt), g.K);
    free(C16); free(C32);
  }
}

// beta = 0 never reads C: NaN there stays out (also 16-bit C).
static void test_beta0(void) {
  for (int k = 0; k < 2; k++) {
    const ot_dtype cdt = k ? OT_BF16 : OT_F32;
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4] = {NAN, NAN, NAN, NAN}, R[4];
    uint16_t Cb[4] = {0x7fc0, 0x7fc0, 0x7fc0, 0x7fc0};
    ot_ref_gemm(false, false, 2, 2, 3, 1, A, 3, B, 2, 0, R, 2);
    ot_mm m = {OT_F32, OT_F32, cdt, false, false, 2, 2, 3, 1.0f, 0.0f, A, 3, B, 2, k ? (void *)Cb : C, 2, NULL, false};
    th_check(ot__mm_own_run(&m, "test") == OT_OK, "beta=0 own gemm ok");
    if (k) for (int i = 0; i < 4; i++) C[i] = ot_bf16_to_f32(Cb[i]);
    th_check_nerr(C, R, 4, k ? 1e-2 : 1e-7, "own gemm beta=0 ignores NaN in %s C", ot_dtype_name(cdt));
  }
}

// The choice per shape in auto mode: measured at the first call (on a slice,
// C untouched), then fixed; every call, the first included, equals the chosen
// implementation's result bitwise. Small shapes run on oneDNN unmeasured.
static void test_pick(void) {
  const int M = 96, N = 80, K = 1000;
  float *A = th_falloc((size_t)M * K), *B = th_falloc((size_t)N * K), *C = th_falloc((size_t)M * N),
        *Co = th_falloc((size_t)M * N), *Cl = th_falloc((size_t)M * N), *C0 = th_falloc((size_t)M * N);
  th_fill(&g_rng, A, (size_t)M * K, -1, 1);
  th_fill(&g_rng, B, (size_t)N * K, -1, 1);
  th_fill(&g_rng, C0, (size_t)M * N, -1, 1);
  ot_mm m = {OT_F32, OT_F32, OT_F32, false, true, M, N, K, 1.0f, 1.0f, A, K, B, K, Co, N, NULL, false};
  memcpy(Co, C0, (size_t)M * N * 4);
  memcpy(Cl, C0, (size_t)M * N * 4);
  th_check(ot__mm_own_run(&m, "test") == OT_OK, "own reference run");
  m.C = Cl;
  th_check(ot__mm_run_lib(&m, NULL, "test") == OT_OK, "oneDNN reference run");
  th_check(memcmp(Co, Cl, (size_t)M * N * 4) != 0, "the two differ in rounding here (else the test shows nothing)");
  m.C = C;
  ot__gemm_impl_set_mode(-1);
  th_check(ot__gemm_pick_get(&m) == 0, "auto: a small shape runs on oneDNN unmeasured");
  ot__gemm_pick_set_min_flops(1.0);
  th_check(ot__gemm_pick_get(&m) == -1, "auto: no choice before the first call");
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    memcpy(C, C0, (size_t)M * N * 4);
    th_check(ot__mm_run(&m, NULL, "test") == OT_OK, "auto call %d", i);
    bad += memcmp(C, ot__gemm_pick_get(&m) == 1 ? Co : Cl, (size_t)M * N * 4) != 0;
  }
  const int pick = ot__gemm_pick_get(&m);
  th_check(pick == 0 || pick == 1, "auto: a choice is made at the first call (%d)", pick);
  th_check(bad == 0, "auto: every call, the first included, equals the chosen one (%s) bitwise (%d do not)",
           pick ? "own" : "oneDNN", bad);
  // M and K count by powers of two: a shorter contraction over the same operands (a weight
  // gradient over a batch of other length) takes the choice made, a longer one past the
  // next power of two is a shape of its own
  ot_mm m2 = m;
  m2.K = 900;
  th_check(ot__gemm_pick_get(&m2) == pick, "auto: K 900 shares K 1000's choice (%d, %d)",
           ot__gemm_pick_get(&m2), pick);
  m2.M = 70;
  th_check(ot__gemm_pick_get(&m2) == pick, "auto: M 70, K 900 share M 96, K 1000's choice");
  m2.K = 1025;
  th_check(ot__gemm_pick_get(&m2) == -1, "auto: K 1025 is measured on its own (%d)", ot__gemm_pick_get(&m2));
  for (int mode = 0; mode < 2; mode++) {
    ot__gemm_impl_set_mode(mode);
    th_check(ot__gemm_pick_get(&m) == mode, "mode %d reported", mode);
    memcpy(C, C0, (size_t)M * N * 4);
    th_check(ot__mm_run(&m, NULL, "test") == OT_OK && memcmp(C, mode ? Co : Cl, (size_t)M * N * 4) == 0,
             "forced mode %s runs it", mode ? "own" : "oneDNN");
  }
  ot__gemm_pick_set_min_flops(0);
  ot__gemm_impl_set_mode(-2);   // back to the environment's choice
  free(A); free(B); free(C); free(Co); free(Cl); free(C0);
}

// ot_gemm_own_ws_max bounds the workspace of every f32-output shape (the planner counts it).
static void test_ws_bound(void) {
  static const int sh[][3] = {{2048, 2304, 768}, {2048, 768, 3072}, {2048, 50304, 768}, {2048, 768, 50304},
                              {50304, 768, 2048}, {1, 1, 1}, {7, 100000, 3}, {100000, 7, 3}, {300, 300, 100000}};
  const size_t max = ot_gemm_own_ws_max();
  int bad = 0;
  for (int i = 0; i < 9; i++)
    for (int t = 0; t < 4; t++) {
      ot_mm m = {OT_F32, t & 1 ? OT_BF16 : OT_F32, OT_F32, t & 1, t >> 1, sh[i][0], sh[i][1], sh[i][2], 1.0f, 0.0f,
                 NULL, 1, NULL, 1, NULL, 1, NULL, false};
      bad += ot__mm_own_ws(&m, ot_threads_get()) > max;
    }
  th_check(bad == 0 && max > 0, "own gemm workspace <= ot_gemm_own_ws_max (%zu bytes) for every shape (%d exceed)",
           max, bad);
}

// Calling threads at once (a server's workers): each has its own packing workspace;
// every result equals the same call made alone, bitwise.
typedef struct { const own_case *c; float *want; int bad; } conc_arg;
static void *conc_main(void *p) {
  conc_arg *a = p;
  for (int r = 0; r < 6; r++) {
    float *C = run_own(a->c, 2, NULL, 21);
    a->bad += memcmp(C, a->want, (size_t)a->c->M * (a->c->N + a->c->pad) * 4) != 0;
    free(C);
  }
  return NULL;
}
static void test_concurrent(void) {
  const own_case cs[2] = {{OT_F32, OT_F32, OT_F32, false, true, true, false, 130, 70, 90, 0, 1.0f, 0.0f},
                          {OT_BF16, OT_F32, OT_F32, true, false, false, true, 64, 200, 300, 2, 1.0f, 0.0f}};
  conc_arg a[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    a[i] = (conc_arg){&cs[i], run_own(&cs[i], 2, NULL, 21), 0};
    pthread_create(&t[i], NULL, conc_main, &a[i]);
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    th_check(a[i].bad == 0, "own gemm from 2 calling threads at once: case %d equals its solo run (%d differ)", i,
             a[i].bad);
    free(a[i].want);
  }
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  const int n = th_isas(isas);
  for (int i = 0; i < n; i++) {
    ot_isa_force(isas[i]);
    char tag[32];
    snprintf(tag, sizeof tag, "[%s]", ot_isa_name(isas[i]));
    test_shapes(tag);
    test_c16_long(tag);
    test_threads();
    test_beta0();
  }
  ot_isa_unforce();
  test_concurrent();
  test_ws_bound();
  test_pick();
  return th_finish();
}
