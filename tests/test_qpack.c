// f32 weights packed in panels (ot_qweight_pack): the linear layer over them on
// every ISA against the scalar reference on the row-major weight (odd shapes,
// panels cut by N, M from 1 to 100: one or several row tiles and their
// remainders), weights packed by one ISA run under another (the row-tile
// path), repacking, rows
// and dequantization read back exactly, a view with fewer rows (the engine's
// head), the padded byte count, thread-count independence and bad input.
#include "harness.h"
#include "ot/quant.h"

static th_rng g_rng = {0x9ac4ed01};

// The reference on the row-major weight; y from the packed weight under ISA `run`,
// packed under ISA `by`.
static void check_case(const float *w, const float *x, const float *b, int N, int K, int M, ot_isa by, ot_isa run) {
  ot_qweight rm, pk;
  th_check(ot_qweight_quantize(&rm, OT_QW_F32, 0, w, N, K) == OT_OK, "quantize: %s", ot_last_error());
  th_check(ot_qweight_quantize(&pk, OT_QW_F32, 0, w, N, K) == OT_OK, "quantize: %s", ot_last_error());
  ot_isa_force(by);
  th_check(ot_qweight_pack(&pk) == OT_OK, "pack: %s", ot_last_error());
  const int P = pk.pack;
  th_check(P > 0 && ot_qweight_bytes(&pk) == (size_t)((N + P - 1) / P) * P * K * 4, "packed bytes N=%d K=%d P=%d",
           N, K, P);
  float *want = th_falloc((size_t)M * N), *y = th_falloc((size_t)M * N);
  th_check(ot_ref_qlinear_fwd(want, x, &rm, b, M) == OT_OK, "ref: %s", ot_last_error());
  ot_isa_force(run);
  for (size_t i = 0; i < (size_t)M * N; i++) y[i] = NAN;
  th_check(ot_qlinear_fwd(y, x, &pk, b, M) == OT_OK, "qlinear: %s", ot_last_error());
  th_check_nerr(y, want, (size_t)M * N, 1e-5, "packed by %s, run on %s: N=%d K=%d M=%d bias=%d", ot_isa_name(by),
                ot_isa_name(run), N, K, M, b != NULL);
  // the reference reads the packed layout as the same matrix
  th_check(ot_ref_qlinear_fwd(y, x, &pk, b, M) == OT_OK && memcmp(y, want, (size_t)M * N * 4) == 0,
           "reference on the packed weight equals it on the row-major one (N=%d K=%d M=%d)", N, K, M);
  ot_isa_unforce();
  ot_qweight_free(&rm);
  ot_qweight_free(&pk);
  free(want);
  free(y);
}

static void test_vs_ref(void) {
  static const int shapes[][2] = {{1, 1}, {5, 7}, {31, 33}, {33, 64}, {70, 96}, {257, 40}, {48, 768}};
  static const int Ms[] = {1, 2, 3, 5, 6, 7, 8, 9, 13, 16, 17, 40, 100};
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int N = shapes[si][0], K = shapes[si][1];
    float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)100 * K), *b = th_falloc((size_t)N);
    th_fill(&g_rng, w, (size_t)N * K, -1.0f, 1.0f);
    th_fill(&g_rng, x, (size_t)100 * K, -1.0f, 1.0f);
    th_fill(&g_rng, b, (size_t)N, -1.0f, 1.0f);
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
      for (int a = 0; a < ni; a++)
        for (int r = 0; r < ni; r++) {
          if (a != r && mi % 3) continue;   // cross-ISA runs on a third of the sizes (time)
          check_case(w, x, mi % 2 ? b : NULL, N, K, Ms[mi], isas[a], isas[r]);
        }
    free(w); free(x); free(b);
  }
}

// Rows, dequantization, a view of the first rows, repacking for another ISA, idempotence.
static void test_layout(void) {
  const int N = 45, K = 19;
  float *w = th_falloc((size_t)N * K), *d = th_falloc((size_t)N * K), *row = th_falloc((size_t)K);
  float *x = th_falloc((size_t)3 * K), *y = th_falloc((size_t)3 * N), *want = th_falloc((size_t)3 * N);
  th_fill(&g_rng, w, (size_t)N * K, -2.0f, 2.0f);
  th_fill(&g_rng, x, (size_t)3 * K, -1.0f, 1.0f);
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  const size_t params0 = ot_mem_current(OT_MEM_PARAMS);
  ot_qweight q;
  th_check(ot_qweight_quantize(&q, OT_QW_F32, 0, w, N, K) == OT_OK, "quantize");
  for (int a = 0; a < ni; a++) {
    ot_isa_force(isas[a]);
    th_check(ot_qweight_pack(&q) == OT_OK, "pack on %s: %s", ot_isa_name(isas[a]), ot_last_error());
    const void *data = q.data;
    const int P = q.pack;
    th_check(ot_qweight_pack(&q) == OT_OK && q.data == data && q.pack == P, "packing twice is a no-op");
    th_check(ot_qweight_dequantize(&q, d) == OT_OK && memcmp(d, w, (size_t)N * K * 4) == 0,
             "dequantize of the packed weight (width %d) gives the weight", P);
    int bad = 0;
    for (int r = 0; r < N; r++) {
      th_check(ot_qweight_row(&q, r, row) == OT_OK, "row: %s", ot_last_error());
      bad += memcmp(row, w + (size_t)r * K, (size_t)K * 4) != 0;
    }
    th_check(bad == 0, "ot_qweight_row on the packed weight (width %d): %d rows differ", P, bad);
    ot_qweight v = q;   // the first 37 rows, as the engine's head views the padded vocabulary
    v.rows = 37;
    v.owned = false;
    ot_qweight rm = {OT_QW_F32, 37, K, 0, w, NULL, false, 0};
    ot_ref_qlinear_fwd(want, x, &rm, NULL, 3);
    for (int M = 1; M <= 3; M += 2) {
      th_check(ot_qlinear_fwd(y, x, &v, NULL, M) == OT_OK, "view: %s", ot_last_error());
      th_check_nerr(y, want, (size_t)M * 37, 1e-5, "a view of 37 of 45 packed rows, M=%d, %s", M,
                    ot_isa_name(isas[a]));
    }
  }
  ot_isa_unforce();
  ot_qweight_free(&q);
  th_check(ot_mem_current(OT_MEM_PARAMS) == params0, "repacked weights free every byte");
  free(w); free(d); free(row); free(x); free(y); free(want);
}

// Each output is computed by one thread in a fixed order: bitwise equal for 1 and 2 threads.
static void test_threads(void) {
  const int N = 1031, K = 768;
  float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)8 * K);
  float *y1 = th_falloc((size_t)8 * N), *y2 = th_falloc((size_t)8 * N);
  th_fill(&g_rng, w, (size_t)N * K, -1.0f, 1.0f);
  th_fill(&g_rng, x, (size_t)8 * K, -1.0f, 1.0f);
  const int nt = ot_threads_get();
  ot_qweight q;
  th_check(ot_qweight_quantize(&q, OT_QW_F32, 0, w, N, K) == OT_OK && ot_qweight_pack(&q) == OT_OK, "pack");
  for (int M = 1; M <= 8; M += 7) {
    ot_threads_set(1);
    ot_qlinear_fwd(y1, x, &q, NULL, M);
    ot_threads_set(2);
    ot_qlinear_fwd(y2, x, &q, NULL, M);
    th_check(memcmp(y1, y2, (size_t)M * N * 4) == 0, "packed M=%d: 1 and 2 threads differ", M);
  }
  ot_threads_set(nt);
  ot_qweight_free(&q);
  free(w); free(x); free(y1); free(y2);
}

static void test_bad_input(void) {
  float w[64], x[8], y[8];
  for (int i = 0; i < 64; i++) w[i] = (float)i;
  for (int i = 0; i < 8; i++) x[i] = 1.0f;
  ot_qweight q;
  th_check_error(ot_qweight_pack(NULL), OT_EINVAL, "is NULL", "NULL weight");
  th_check(ot_qweight_quantize(&q, OT_QW_INT8, 0, w, 8, 8) == OT_OK, "quantize");
  th_check_error(ot_qweight_pack(&q), OT_EINVAL, "only f32 weights are packed", "int8");
  q.pack = 16;
  th_check_error(ot_qlinear_fwd(y, x, &q, NULL, 1), OT_EINVAL, "pack=16 invalid for a int8 weight", "int8 marked packed");
  q.pack = 0;
  ot_qweight_free(&q);
  th_check(ot_qweight_quantize(&q, OT_QW_BF16, 0, w, 8, 8) == OT_OK, "quantize");
  th_check_error(ot_qweight_pack(&q), OT_EINVAL, "the weight is bf16", "bf16");
  ot_qweight_free(&q);
  th_check(ot_qweight_quantize(&q, OT_QW_F32, 0, w, 8, 8) == OT_OK, "quantize");
  q.pack = -4;
  th_check_error(ot_qlinear_fwd(y, x, &q, NULL, 1), OT_EINVAL, "pack=-4 invalid", "negative pack");
  q.pack = 0;
  ot_qweight_free(&q);
}

int main(void) {
  const size_t params0 = ot_mem_current(OT_MEM_PARAMS);
  test_vs_ref();
  test_layout();
  test_threads();
  test_bad_input();
  th_check(ot_mem_current(OT_MEM_PARAMS) == params0, "every packed byte freed");
  return th_finish();
}
