// The int8 x int8 -> int32 GEMM of the quantized linear (ot_qlinear_i8_fwd,
// src/ops/kern/qgemm.c) on every ISA the CPU runs: against its scalar
// reference (ot_ref_qlinear_i8_fwd) over odd shapes, per-channel and per-group
// weights (tight tolerance: only the f32 epilogue differs); bit-exact where the
// epilogue is exact (power-of-two scales, integer activations), which checks
// the integer sums; the error bound against the f32 product of the dequantized
// weights with the unquantized activations (also through ot_qlinear_fwd at
// prefill sizes); special rows (zero, tiny, outlier, NaN, infinity); thread-
// count independence; bad input.
#include "harness.h"
#include "ot/quant.h"
#include "quant_i8_bound.h"

static th_rng g_rng = {0x5eed1808};
static const int k_groups[] = {0, 32, 64, 128};
#define N_GROUPS 4

// Weights with rows of different magnitudes, some zero groups and a few outliers.
static void fill_weights(float *w, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    float mag = powf(10.0f, th_uniform(&g_rng, -3.0f, 1.0f));
    for (int k = 0; k < cols; k++) w[(size_t)r * cols + k] = mag * th_normal(&g_rng);
    if (r % 5 == 3) for (int k = 0; k < cols && k < 32; k++) w[(size_t)r * cols + k] = 0.0f;
    if (r % 7 == 2) w[(size_t)r * cols + (r * 13) % cols] *= 50.0f;
  }
}

// Per output: |y - ref| <= 1e-6 (sum_k |wd x| + the quantization slack + |bias|)
// (the kernel's epilogue is f32, the reference's double).
static int over_tight(const float *y, const float *ref, const float *wd, const float *x, const float *bias, int M,
                      int N, int K) {
  int bad = 0;
  for (int m = 0; m < M; m++) {
    double amax = 0.0;
    for (int k = 0; k < K; k++) amax = fmax(amax, fabs(x[(size_t)m * K + k]));
    for (int n = 0; n < N; n++) {
      double s = bias ? fabs(bias[n]) : 0.0;
      for (int k = 0; k < K; k++) s += fabs(wd[(size_t)n * K + k]) * (fabs(x[(size_t)m * K + k]) + amax / 127.0);
      const double d = fabs((double)y[(size_t)m * N + n] - ref[(size_t)m * N + n]);
      bad += !(d <= 1e-6 * s + 1e-30);
    }
  }
  return bad;
}

static void test_vs_ref(void) {
  static const int Ns[] = {1, 3, 17, 67}, Ks[] = {32, 37, 96, 384, 640}, Ms[] = {1, 2, 3, 5, 17, 40, 71};
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (size_t ni_ = 0; ni_ < sizeof Ns / sizeof Ns[0]; ni_++)
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
      const int N = Ns[ni_], K = Ks[ki], MX = 71;
      float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)MX * K), *b = th_falloc((size_t)N);
      float *y = th_falloc((size_t)MX * N), *ref = th_falloc((size_t)MX * N), *want = th_falloc((size_t)MX * N);
      float *wd = th_falloc((size_t)N * K);
      fill_weights(w, N, K);
      th_fill(&g_rng, x, (size_t)MX * K, -1.0f, 1.0f);
      for (int m = 0; m < MX; m += 3) x[(size_t)m * K + (m * 7) % K] *= 30.0f;   // outliers in some rows
      th_fill(&g_rng, b, (size_t)N, -1.0f, 1.0f);
      for (int gi = 0; gi < N_GROUPS; gi++) {
        const int G = k_groups[gi];
        if (G && K % G) continue;
        ot_qweight q;
        if (!th_check(ot_qweight_quantize(&q, OT_QW_INT8, G, w, N, K) == OT_OK, "quantize: %s", ot_last_error()))
          continue;
        ot_qweight_dequantize(&q, wd);
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
          const int M = Ms[mi];
          const float *bias = (mi + (size_t)gi) % 2 ? b : NULL;
          th_check(ot_ref_qlinear_i8_fwd(ref, x, &q, bias, M) == OT_OK, "ref: %s", ot_last_error());
          ot_ref_qlinear_fwd(want, x, &q, bias, M);
          th_check(th_over_i8_bound(ref, want, wd, x, bias, M, N, K) == 0,
                   "reference g%d N=%d K=%d M=%d over the int8 bound", G, N, K, M);
          for (int ii = 0; ii < ni; ii++) {
            ot_isa_force(isas[ii]);
            for (size_t i = 0; i < (size_t)M * N; i++) y[i] = NAN;
            th_check(ot_qlinear_i8_fwd(y, x, &q, bias, M) == OT_OK, "i8: %s", ot_last_error());
            const int bad = over_tight(y, ref, wd, x, bias, M, N, K);
            th_check(bad == 0, "i8 g%d %s N=%d K=%d M=%d bias=%d: %d outputs off the reference", G,
                     ot_isa_name(isas[ii]), N, K, M, bias != NULL, bad);
            th_check(th_over_i8_bound(y, want, wd, x, bias, M, N, K) == 0,
                     "i8 g%d %s N=%d K=%d M=%d: over the int8 bound", G, ot_isa_name(isas[ii]), N, K, M);
          }
          ot_isa_unforce();
        }
        ot_qweight_free(&q);
      }
      free(w); free(x); free(b); free(y); free(ref); free(want); free(wd);
    }
}

// Integer activations times a power of two (each row holding +-127) and
// power-of-two weight scales: every step of the epilogue is exact (each group's
// sum < 2^24), so kernel and reference agree bit for bit on every ISA; an
// integer sum off by one would show.
static void test_exact(void) {
  static const int shapes[][3] = {{7, 5, 768}, {6, 9, 384}, {13, 4, 37}, {4, 3, 1000}, {1, 2, 96},
                                  {37, 53, 768}, {41, 5, 37}, {33, 49, 1000}};   // from 32 rows: the panel form
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
    int8_t *wq = th_alloc((size_t)N * K);
    float *sc = th_falloc((size_t)N * K), *x = th_falloc((size_t)M * K), *b = th_falloc((size_t)N);
    float *y = th_falloc((size_t)M * N), *ref = th_falloc((size_t)M * N);
    for (size_t i = 0; i < (size_t)N * K; i++) wq[i] = (int8_t)((int)(th_next(&g_rng) % 255) - 127);
    for (int m = 0; m < M; m++) {
      const float e = ldexpf(1.0f, -(m % 5) - 3);
      for (int k = 0; k < K; k++) x[(size_t)m * K + k] = (float)((int)(th_next(&g_rng) % 255) - 127) * e;
      x[(size_t)m * K + (m * 11) % K] = (m % 2 ? 127.0f : -127.0f) * e;
    }
    for (int n = 0; n < N; n++) b[n] = (float)n - 1.5f;
    for (int gi = 0; gi < N_GROUPS; gi++) {
      const int G = k_groups[gi];
      if (G && K % G) continue;
      const int ng = G ? K / G : 1;
      for (int n = 0; n < N; n++)
        for (int g = 0; g < ng; g++) sc[(size_t)n * ng + g] = ldexpf(1.0f, -7 - n % 3);
      ot_qweight q = {OT_QW_INT8, N, K, G, wq, sc, false};
      const float *bias = gi % 2 ? b : NULL;
      th_check(ot_ref_qlinear_i8_fwd(ref, x, &q, bias, M) == OT_OK, "ref: %s", ot_last_error());
      for (int ii = 0; ii < ni; ii++) {
        ot_isa_force(isas[ii]);
        th_check(ot_qlinear_i8_fwd(y, x, &q, bias, M) == OT_OK, "i8: %s", ot_last_error());
        int bad = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) bad += y[i] != ref[i];
        th_check(bad == 0, "exact g%d %s M=%d N=%d K=%d: %d outputs differ from the reference", G,
                 ot_isa_name(isas[ii]), M, N, K, bad);
      }
      ot_isa_unforce();
    }
    free(wq); free(sc); free(x); free(b); free(y); free(ref);
  }
}

// ot_qlinear_fwd at prefill sizes (the int8 GEMM) within the int8 bound of the
// f32 product, with special rows: zero, tiny (< 2^-100: quantized as zero),
// one outlier 1e4 times the rest, values near FLT_MAX / 1e30; NaN and infinity
// rows propagate (the f32 path takes those calls).
static void test_bound_special(int M) {
  const int N = 45, K = 256;
  float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)M * K), *b = th_falloc((size_t)N);
  float *y = th_falloc((size_t)M * N), *want = th_falloc((size_t)M * N), *wd = th_falloc((size_t)N * K);
  fill_weights(w, N, K);
  th_fill(&g_rng, x, (size_t)M * K, -1.0f, 1.0f);
  th_fill(&g_rng, b, (size_t)N, -1.0f, 1.0f);
  memset(x + 2 * K, 0, (size_t)K * 4);                                 // row 2: zero
  for (int k = 0; k < K; k++) x[3 * K + k] *= 1e-31f;                  // row 3: tiny
  x[5 * K + 17] = 1e4f;                                                // row 5: an outlier
  for (int k = 0; k < K; k++) x[7 * K + k] *= 1e30f;                   // row 7: large
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (int gi = 0; gi < N_GROUPS; gi++) {
    ot_qweight q;
    th_check(ot_qweight_quantize(&q, OT_QW_INT8, k_groups[gi], w, N, K) == OT_OK, "quantize");
    ot_qweight_dequantize(&q, wd);
    ot_ref_qlinear_fwd(want, x, &q, b, M);
    for (int ii = 0; ii < ni; ii++) {
      ot_isa_force(isas[ii]);
      th_check(ot_qlinear_fwd(y, x, &q, b, M) == OT_OK, "qlinear: %s", ot_last_error());
      th_check(th_over_i8_bound(y, want, wd, x, b, M, N, K) == 0, "qlinear g%d %s M=%d: over the int8 bound",
               k_groups[gi], ot_isa_name(isas[ii]), M);
      float keep = x[9 * K + 3];
      x[9 * K + 3] = NAN;
      th_check(ot_qlinear_fwd(y, x, &q, b, M) == OT_OK, "qlinear NaN: %s", ot_last_error());
      th_check(isnan(y[9 * N]) && isnan(y[9 * N + N - 1]) && isfinite(y[0]), "NaN propagates to its row only");
      x[9 * K + 3] = INFINITY;
      th_check(ot_qlinear_i8_fwd(y, x, &q, b, M) == OT_OK, "i8 inf: %s", ot_last_error());
      int nonfinite = 0;
      for (int n = 0; n < N; n++) nonfinite += !isfinite(y[9 * N + n]);
      th_check(nonfinite > 0 && isfinite(y[8 * N]), "an infinity propagates (%d outputs)", nonfinite);
      x[9 * K + 3] = keep;
    }
    ot_isa_unforce();
    ot_qweight_free(&q);
  }
  free(w); free(x); free(b); free(y); free(want); free(wd);
}

// Every output computed by one thread in a fixed order: bitwise equal for any thread count.
static void test_threads(int M) {
  const int N = 301, K = 768;
  float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)M * K);
  float *y1 = th_falloc((size_t)M * N), *y2 = th_falloc((size_t)M * N);
  fill_weights(w, N, K);
  th_fill(&g_rng, x, (size_t)M * K, -1.0f, 1.0f);
  const int nt = ot_threads_get();
  for (int gi = 0; gi < N_GROUPS; gi++) {
    ot_qweight q;
    th_check(ot_qweight_quantize(&q, OT_QW_INT8, k_groups[gi], w, N, K) == OT_OK, "quantize");
    ot_threads_set(1);
    ot_qlinear_fwd(y1, x, &q, NULL, M);
    ot_threads_set(2);
    ot_qlinear_fwd(y2, x, &q, NULL, M);
    th_check(memcmp(y1, y2, (size_t)M * N * 4) == 0, "i8 g%d: 1 and 2 threads differ", k_groups[gi]);
    ot_qweight_free(&q);
  }
  ot_threads_set(nt);
  free(w); free(x); free(y1); free(y2);
}

static void test_bad_input(void) {
  float w[64 * 4] = {0}, x[64 * 2] = {0}, y[8] = {0};
  ot_qweight q;
  th_check(ot_qweight_quantize(&q, OT_QW_BF16, 0, w, 4, 64) == OT_OK, "quantize: %s", ot_last_error());
  th_check_error(ot_qlinear_i8_fwd(y, x, &q, NULL, 2), OT_EINVAL, "takes int8 weights", "bf16 weight");
  th_check_error(ot_ref_qlinear_i8_fwd(y, x, &q, NULL, 2), OT_EINVAL, "takes int8 weights", "ref bf16 weight");
  ot_qweight_free(&q);
  th_check(ot_qweight_quantize(&q, OT_QW_INT8, 32, w, 4, 64) == OT_OK, "quantize: %s", ot_last_error());
  th_check_error(ot_qlinear_i8_fwd(y, x, &q, NULL, 0), OT_EINVAL, "M=0", "M = 0");
  th_check_error(ot_qlinear_i8_fwd(NULL, x, &q, NULL, 1), OT_EINVAL, "'y' is NULL", "NULL y");
  th_check_error(ot_qlinear_i8_fwd(x + 8, x, &q, NULL, 1), OT_EINVAL, "overlaps x", "y overlapping x");
  th_check_error(ot_ref_qlinear_i8_fwd(y, NULL, &q, NULL, 1), OT_EINVAL, "'x' is NULL", "ref NULL x");
  ot_qweight_free(&q);
}

int main(void) {
  test_vs_ref();
  test_exact();
  test_bound_special(24);   // the dot-product form (OT__QI8_PANEL_MIN 32)
  test_bound_special(40);   // the panel form
  test_threads(20);   // the dot-product form
  test_threads(33);   // the panel form
  test_bad_input();
  return th_finish();
}
