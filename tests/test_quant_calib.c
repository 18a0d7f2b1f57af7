// Calibration operators (ot/quant.h): fake quantization against its scalar
// reference and against quantize -> dequantize (bit for bit, every group, clip
// ratios, in place), the activation-aware search (ot_qsearch) against its
// scalar reference over odd shapes, its error reduction over plain PTQ on data
// with outlier input channels (on the calibration rows and on held-out rows),
// and bad input.
#include "harness.h"
#include "internal.h"
#include "ot/quant.h"
#include <math.h>

static th_rng g_rng = {0x5eed0c41};

// x [R, K]: normal rows whose channels (k % 13 == 5) are `out` times larger.
static void fill_x(float *x, int R, int K, float out) {
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) x[(size_t)r * K + k] = th_normal(&g_rng) * (k % 13 == 5 ? out : 1.0f);
}

// Output error (double) of (s, clip) on x: sum_n sum_r (x_r . (w_n - deq_n / s))^2 / R.
static double err_of(const float *w, int N, int K, int group, const float *x, int R, const float *s,
                     const float *clip) {
  float *wq = th_falloc((size_t)N * K);
  for (size_t i = 0; i < (size_t)N * K; i++) wq[i] = w[i] * (s ? s[i % (size_t)K] : 1.0f);
  th_check(ot_ref_qweight_fake_quant(wq, wq, N, K, group, clip) == OT_OK, "ref fake quant: %s", ot_last_error());
  double t = 0.0;
  for (int n = 0; n < N; n++)
    for (int r = 0; r < R; r++) {
      double d = 0.0;
      for (int k = 0; k < K; k++) {
        const size_t i = (size_t)n * K + k;
        d += (double)x[(size_t)r * K + k] * ((double)w[i] - (double)(s ? wq[i] / s[k] : wq[i]));
      }
      t += d * d;
    }
  free(wq);
  return t / R;
}

static void test_fake_quant(void) {
  static const int shapes[][2] = {{1, 32}, {3, 64}, {17, 128}, {5, 384}, {4, 37}, {2, 1}, {300, 256}};
  static const int groups[] = {0, 32, 64, 128};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int R = shapes[si][0], K = shapes[si][1];
    const size_t n = (size_t)R * K;
    float *w = th_falloc(n), *a = th_falloc(n), *b = th_falloc(n), *d = th_falloc(n), *clip = th_falloc((size_t)R);
    th_fill_normal(&g_rng, w, n, 0.5f);
    for (int r = 0; r < R; r++) {
      clip[r] = th_uniform(&g_rng, 0.6f, 1.0f);
      if (r % 4 == 1) for (int k = 0; k < K; k++) w[(size_t)r * K + k] = 0.0f;   // zero rows: scale 0
      else w[(size_t)r * K + (r * 7) % K] *= 20.0f;
    }
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
      for (int ci = 0; ci < 2; ci++) {
        const int g = groups[gi];
        const float *cl = ci ? clip : NULL;
        if (g && K % g) continue;
        th_check(ot_qweight_fake_quant(a, w, R, K, g, cl) == OT_OK, "fake quant: %s", ot_last_error());
        th_check(ot_ref_qweight_fake_quant(b, w, R, K, g, cl) == OT_OK, "ref: %s", ot_last_error());
        ot_qweight q;
        th_check(ot_qweight_quantize_clip(&q, OT_QW_INT8, g, w, R, K, cl) == OT_OK, "quantize: %s", ot_last_error());
        th_check(ot_qweight_dequantize(&q, d) == OT_OK, "dequantize");
        ot_qweight_free(&q);
        size_t bad_ref = 0, bad_deq = 0;
        for (size_t i = 0; i < n; i++) {
          bad_ref += a[i] != b[i];
          bad_deq += a[i] != d[i];
        }
        th_check(!bad_ref && !bad_deq, "fake quant [%d, %d] g%d clip %d: %zu differ from the reference, %zu "
                 "from dequantize(quantize)", R, K, g, ci, bad_ref, bad_deq);
        memcpy(b, w, n * sizeof(float));   // in place
        th_check(ot_qweight_fake_quant(b, b, R, K, g, cl) == OT_OK && !memcmp(a, b, n * sizeof(float)),
                 "fake quant in place [%d, %d] g%d", R, K, g);
      }
    free(w); free(a); free(b); free(d); free(clip);
  }
}

// ot_qsearch against ot_ref_qsearch: the same plain error, and the fast choice scores as well
// as the reference's under the reference's arithmetic.
static void test_search_vs_ref(void) {
  static const int shapes[][4] = {{5, 64, 7, 0}, {9, 96, 33, 32}, {3, 128, 65, 64}, {7, 37, 11, 0},
                                  {1, 128, 1, 128}, {20, 64, 40, 0}};
  for (int act = 0; act < 2; act++)
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const ot_qsearch_opts o = {10, 5, 0.05f, act == 1};
    const int N = shapes[si][0], K = shapes[si][1], R = shapes[si][2], g = shapes[si][3];
    float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)R * K);
    float *s1 = th_falloc((size_t)K), *s2 = th_falloc((size_t)K), *c1 = th_falloc((size_t)N), *c2 = th_falloc((size_t)N);
    th_fill_normal(&g_rng, w, (size_t)N * K, 0.2f);
    fill_x(x, R, K, 25.0f);
    ot_qsearch_result a, b;
    if (!th_check(ot_qsearch(&a, s1, c1, w, N, K, g, x, R, NULL, &o) == OT_OK, "qsearch: %s", ot_last_error()) ||
        !th_check(ot_ref_qsearch(&b, s2, c2, w, N, K, g, x, R, NULL, &o) == OT_OK, "ref: %s", ot_last_error()))
      continue;
    const double tol = 1e-4 * b.err_plain + 1e-12;
    th_check(fabs(a.err_plain - b.err_plain) <= tol, "[%d, %d] R %d g%d: plain error %.9g vs ref %.9g", N, K, R,
             g, a.err_plain, b.err_plain);
    th_check(b.err <= b.err_scaled && b.err_scaled <= b.err_plain && a.err <= a.err_scaled &&
             a.err_scaled <= a.err_plain, "errors never increase along the search");
    if (act) {   // the int8-activation term: the same choice, or one that scores alike
      th_check(fabs(a.err - b.err) <= 1e-3 * b.err + 1e-12 && a.err_plain > 0,
               "act [%d, %d] g%d: error %.9g (alpha %.2f) vs ref %.9g (alpha %.2f)", N, K, g, a.err,
               (double)a.alpha, b.err, (double)b.alpha);
      free(w); free(x); free(s1); free(s2); free(c1); free(c2);
      continue;
    }
    const double ea = err_of(w, N, K, g, x, R, a.alpha > 0 ? s1 : NULL, c1);
    th_check(fabs(ea - a.err) <= 1e-4 * a.err + 1e-12, "[%d, %d]: reported error %.9g, recomputed %.9g", N, K,
             a.err, ea);
    th_check(ea <= b.err * (1 + 1e-4) + 1e-12, "[%d, %d] g%d: the fast choice (alpha %.2f) scores %.9g, the "
             "reference's (alpha %.2f) %.9g", N, K, g, (double)a.alpha, ea, (double)b.alpha, b.err);
    if (a.alpha == b.alpha) th_check(th_nerr(s1, s2, (size_t)K) < 1e-6, "same alpha, same scales");
    free(w); free(x); free(s1); free(s2); free(c1); free(c2);
  }
}

// Outlier input channels: the search lowers the output error well below plain PTQ on the
// calibration rows and on held-out rows of the same distribution.
static void test_outliers(void) {
  const int N = 48, K = 256, R = 128;
  static const int groups[] = {0, 32};
  const ot_qsearch_opts o = {20, 10, 0.02f, false};
  for (int gi = 0; gi < 2; gi++) {
    const int g = groups[gi];
    float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)R * K), *h = th_falloc((size_t)R * K);
    float *s = th_falloc((size_t)K), *c = th_falloc((size_t)N);
    th_fill_normal(&g_rng, w, (size_t)N * K, 0.1f);
    for (int n = 0; n < N; n++) w[(size_t)n * K + (n * 11) % K] *= 8.0f;   // weight outliers set the row scale
    fill_x(x, R, K, 40.0f);
    fill_x(h, R, K, 40.0f);
    ot_qsearch_result r;
    if (!th_check(ot_qsearch(&r, s, c, w, N, K, g, x, R, NULL, &o) == OT_OK, "qsearch: %s", ot_last_error()))
      continue;
    const double hp = err_of(w, N, K, g, h, R, NULL, NULL), hs = err_of(w, N, K, g, h, R, r.alpha > 0 ? s : NULL, c);
    printf("outliers g%d: alpha %.2f, calibration error %.4g -> %.4g (scaled %.4g), held-out %.4g -> %.4g\n", g,
           (double)r.alpha, r.err_plain, r.err, r.err_scaled, hp, hs);
    th_check(r.alpha > 0.0f, "g%d: outlier channels call for scaling (alpha %.2f)", g, (double)r.alpha);
    th_check(r.err < 0.7 * r.err_plain, "g%d: calibration error %.4g vs plain %.4g", g, r.err, r.err_plain);
    th_check(hs < 0.8 * hp, "g%d: held-out error %.4g vs plain %.4g", g, hs, hp);
    // with the int8-activation term: outlier channels make per-row activation quantization
    // coarse, which the scales also fix
    ot_qsearch_result ra;
    const ot_qsearch_opts oa = {20, 10, 0.02f, true};
    th_check(ot_qsearch(&ra, s, c, w, N, K, g, x, R, NULL, &oa) == OT_OK && ra.alpha > 0.0f &&
             ra.err < 0.5 * ra.err_plain, "g%d act: error %.4g vs plain %.4g (alpha %.2f)", g, ra.err,
             ra.err_plain, (double)ra.alpha);
    printf("outliers g%d, int8 activations too: alpha %.2f, error %.4g -> %.4g\n", g, (double)ra.alpha,
           ra.err_plain, ra.err);
    // no scaling, clipping only: never worse than plain on the calibration rows
    ot_qsearch_result rc;
    const ot_qsearch_opts oc = {0, 10, 0.02f, false};
    th_check(ot_qsearch(&rc, NULL, c, w, N, K, g, x, R, NULL, &oc) == OT_OK && rc.alpha == 0.0f &&
             rc.err <= rc.err_plain, "clip only: %.4g vs %.4g", rc.err, rc.err_plain);
    free(w); free(x); free(h); free(s); free(c);
  }
}

static void test_bad_input(void) {
  float w[64 * 2], x[64 * 3], s[64], c[2];
  for (int i = 0; i < 128; i++) w[i] = 0.01f * i;
  for (int i = 0; i < 192; i++) x[i] = 0.1f;
  ot_qsearch_result r;
  const ot_qsearch_opts o = {4, 2, 0.1f, false};
  th_check_error(ot_qsearch(&r, s, c, w, 2, 64, 48, x, 3, NULL, &o), OT_EINVAL, "group=48", "group 48");
  th_check_error(ot_qsearch(&r, s, c, w, 2, 64, 128, x, 3, NULL, &o), OT_EINVAL, "does not divide", "group 128 K 64");
  th_check_error(ot_qsearch(&r, NULL, c, w, 2, 64, 0, x, 3, NULL, &o), OT_EINVAL, "s is NULL", "no s");
  th_check_error(ot_qsearch(&r, s, NULL, w, 2, 64, 0, x, 3, NULL, &o), OT_EINVAL, "clip is NULL", "no clip");
  const ot_qsearch_opts ob = {4, 20, 0.1f, false};
  th_check_error(ot_qsearch(&r, s, c, w, 2, 64, 0, x, 3, NULL, &ob), OT_EINVAL, "ratios in (0, 1)", "clip grid");
  th_check_error(ot_qsearch(&r, s, c, w, 2, 64, 0, x, 0, NULL, &o), OT_EINVAL, "R", "no rows");
  x[70] = NAN;
  th_check_error(ot_qsearch(&r, s, c, w, 2, 64, 0, x, 3, NULL, &o), OT_EINVAL, "not finite", "NaN input");
  th_check_error(ot_ref_qsearch(&r, s, c, w, 2, 64, 0, x, 3, NULL, &o), OT_EINVAL, "not finite", "ref NaN input");
  ot_qweight q;
  c[0] = 1.5f; c[1] = 1.0f;
  th_check_error(ot_qweight_quantize_clip(&q, OT_QW_INT8, 0, w, 2, 64, c), OT_EINVAL, "clip[0]", "clip 1.5");
  th_check_error(ot_qweight_quantize_clip(&q, OT_QW_BF16, 0, w, 2, 64, c), OT_EINVAL, "int8 only", "clip bf16");
  th_check_error(ot_qweight_fake_quant(w, w, 2, 64, 0, c), OT_EINVAL, "clip[0]", "fake quant clip 1.5");
  th_check_error(ot_qweight_fake_quant(w, w, 2, 64, 96, NULL), OT_EINVAL, "group", "fake quant group 96");
  w[3] = INFINITY;
  th_check_error(ot_qweight_fake_quant(w, w, 2, 64, 0, NULL), OT_EINVAL, "not finite", "fake quant inf");
}

int main(void) {
  const size_t ws0 = ot_mem_current(OT_MEM_WORKSPACE);
  test_fake_quant();
  test_search_vs_ref();
  test_outliers();
  test_bad_input();
  ot_scratch_release();   // the GEMM's per-thread scratch
  th_check(ot_mem_current(OT_MEM_WORKSPACE) == ws0, "the search frees its workspace");
  return th_finish();
}
