// AdamW step vs the scalar reference (several steps, weight decay, grad_scale,
// bf16 copy), a hand-computed PyTorch value, argument validation; ot_sumsq vs
// a double loop and its independence of the thread count; ot_clip_coef cases.
#include "harness.h"

static const size_t sizes[] = {1, 3, 17, 65, 127, 769, 4099, 70001, 200003};

typedef struct { float lr, b1, b2, eps, wd, gs; } adam_case;
static const adam_case cases[] = {
    {0.05f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f},
    {0.05f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f},     // weight decay + clipping scale
    {0.02f, 0.8f, 0.99f, 1e-3f, 0.01f, 1.0f},    // eps large enough to matter
    {0.01f, 0.0f, 0.0f, 1e-6f, 0.5f, 2.0f},      // degenerate betas (no momentum)
};

static void test_vs_ref(ot_isa isa) {
  th_rng r = {1234};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const adam_case *c = &cases[ci];
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      size_t n = sizes[si];
      float *p = th_falloc(n), *m = th_falloc(n), *v = th_falloc(n), *g = th_falloc(n);
      float *p0 = th_falloc(n), *pr = th_falloc(n), *mr = th_falloc(n), *vr = th_falloc(n);
      float *dp = th_falloc(n), *dpr = th_falloc(n), *pbf = th_falloc(n);
      uint16_t *pb = th_alloc(n * 2), *ph = th_alloc(n * 2);
      th_fill(&r, p, n, -1.f, 1.f);
      memcpy(pr, p, n * 4);
      bool bf_ok = true, f16_ok = true;
      for (int64_t step = 1; step <= 3; step++) {
        th_fill_normal(&r, g, n, 1.0f);
        memcpy(p0, p, n * 4);
        ot_adamw_cfg cfg = {c->lr, c->b1, c->b2, c->eps, c->wd, step};
        // step 2 writes the bf16 copy, step 3 the f16 one (ot_adamw_dt)
        ot_status st = step == 3 ? ot_adamw_dt(p, g, m, v, ph, OT_F16, n, &cfg, c->gs)
                                 : ot_adamw(p, g, m, v, step == 2 ? pb : NULL, n, &cfg, c->gs);
        ot_ref_adamw(pr, g, mr, vr, n, &cfg, c->gs);
        th_check(st == OT_OK, "adamw status %s", ot_last_error());
        // the update itself (lr is large, so f32 cancellation stays ~1e-6)
        for (size_t i = 0; i < n; i++) { dp[i] = p[i] - p0[i]; dpr[i] = pr[i] - p0[i]; }
        th_check_nerr(dp, dpr, n, 2e-5, "%s adamw case %zu n=%zu step %lld: update",
                                ot_isa_name(isa), ci, n, (long long)step);
        th_check_nerr(p, pr, n, 1e-6, "%s adamw case %zu n=%zu step %lld: p",
                                ot_isa_name(isa), ci, n, (long long)step);
        th_check_nerr(m, mr, n, 1e-6, "%s adamw case %zu n=%zu step %lld: m",
                                ot_isa_name(isa), ci, n, (long long)step);
        th_check_nerr(v, vr, n, 1e-6, "%s adamw case %zu n=%zu step %lld: v",
                                ot_isa_name(isa), ci, n, (long long)step);
        if (step == 2)
          for (size_t i = 0; i < n; i++) bf_ok &= pb[i] == ot_f32_to_bf16(p[i]);
        if (step == 3)
          for (size_t i = 0; i < n; i++) f16_ok &= ph[i] == ot_f32_to_f16(p[i]);
        // keep the reference on the kernel's trajectory so errors do not compound
        memcpy(pr, p, n * 4); memcpy(mr, m, n * 4); memcpy(vr, v, n * 4);
      }
      th_check(bf_ok, "%s adamw case %zu n=%zu: p_bf16 == round(p)", ot_isa_name(isa), ci, n);
      th_check(f16_ok, "%s adamw case %zu n=%zu: f16 copy == round(p)", ot_isa_name(isa), ci, n);
      free(p); free(m); free(v); free(g); free(p0); free(pr); free(mr); free(vr);
      free(dp); free(dpr); free(pbf); free(pb); free(ph);
    }
  }
}

// One element by hand, PyTorch order: p *= 1 - lr*wd; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
static void test_known_value(void) {
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  ot_adamw_cfg cfg = {0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  ot_status st = ot_adamw(&p, &g, &m, &v, NULL, 1, &cfg, 1.0f);
  // m = 0.05, v = 2.5e-4, mhat = 0.5, vhat = 0.25: p = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8)
  double want = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8);
  // (betas are f32 in the config: 1 - 0.999f = 0.00099998713, not 0.001)
  double wm = (1.0 - (double)cfg.beta1) * 0.5, wv = (1.0 - (double)cfg.beta2) * 0.25;
  th_check(st == OT_OK && fabs(p - want) < 1e-6 && fabs(m - wm) < 2e-7 * wm &&
           fabs(v - wv) < 2e-7 * wv,
           "adamw known value: p=%.9g (want %.9g), m=%.9g (%.9g), v=%.9g (%.9g)", p, want,
           m, wm, v, wv);
  // second step with the same gradient: m = 0.095, v = 4.9975e-4, bc1 = 0.19, bc2 = 0.001999
  cfg.step = 2;
  double p1 = p;
  st = ot_adamw(&p, &g, &m, &v, NULL, 1, &cfg, 1.0f);
  double mh = 0.095 / 0.19, vh = 4.9975e-4 / (1 - 0.999 * 0.999);
  want = p1 * (1 - 0.1 * 0.01) - 0.1 * mh / (sqrt(vh) + 1e-8);
  th_check(st == OT_OK && fabs(p - want) < 1e-6, "adamw known value step 2: p=%.9g (want %.9g)",
           p, want);
  // grad_scale scales g before both moments: scale 2 on g=0.25 == scale 1 on g=0.5
  float pa = 0.3f, ma = 0.01f, va = 0.02f, ga = 0.25f;
  float pb = 0.3f, mb = 0.01f, vb = 0.02f, gb = 0.5f;
  cfg.step = 5;
  ot_adamw(&pa, &ga, &ma, &va, NULL, 1, &cfg, 2.0f);
  ot_adamw(&pb, &gb, &mb, &vb, NULL, 1, &cfg, 1.0f);
  th_check(pa == pb && ma == mb && va == vb, "adamw grad_scale applies to g (%g %g)", pa, pb);
}

static void test_errors(void) {
  float x[4] = {0}, g[4] = {0}, m[4] = {0}, v[4] = {0};
  ot_adamw_cfg ok = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1}, c;
  c = ok; c.lr = -1;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "lr=", "adamw lr < 0");
  c = ok; c.lr = NAN;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "lr=", "adamw lr NaN");
  c = ok; c.beta1 = 1.0f;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "beta1=", "adamw beta1 = 1");
  c = ok; c.beta2 = -0.1f;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "beta2=", "adamw beta2 < 0");
  c = ok; c.beta2 = NAN;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "beta2=", "adamw beta2 NaN");
  c = ok; c.eps = 0;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "eps=", "adamw eps = 0");
  c = ok; c.weight_decay = INFINITY;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "weight_decay=", "adamw wd inf");
  c = ok; c.step = 0;
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &c, 1), OT_EINVAL, "step=0", "adamw step 0");
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, &ok, NAN), OT_EINVAL, "grad_scale",
                 "adamw grad_scale NaN");
  th_check_error(ot_adamw(NULL, g, m, v, NULL, 4, &ok, 1), OT_EINVAL, "'p'", "adamw p NULL");
  th_check_error(ot_adamw(x, g, NULL, v, NULL, 4, &ok, 1), OT_EINVAL, "'m'", "adamw m NULL");
  th_check_error(ot_adamw(x, g, m, v, NULL, 4, NULL, 1), OT_EINVAL, "'cfg'", "adamw cfg NULL");
  th_check(ot_adamw(x, g, m, v, NULL, 0, &ok, 1) == OT_OK, "adamw n=0 is a no-op");
  uint16_t h[4];
  th_check_error(ot_adamw_dt(x, g, m, v, h, OT_I8, 4, &ok, 1), OT_EINVAL, "copy dtype i8",
                 "adamw 16-bit copy dtype i8");
}

static double sumsq_d(const float *g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
  return s;
}

static void test_sumsq(ot_isa isa) {
  static const size_t ns[] = {1, 3, 17, 65, 127, 769, 1025, 65536, 65537, 300001};
  th_rng r = {99};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    size_t n = ns[k];
    float *g = th_falloc(n);
    th_fill_normal(&r, g, n, 3.0f);
    double got = ot_sumsq(g, n), want = sumsq_d(g, n);
    th_check(fabs(got - want) <= 1e-6 * want, "%s sumsq n=%zu: %.17g vs %.17g (rel %.3g)",
             ot_isa_name(isa), n, got, want, fabs(got - want) / want);
    free(g);
  }
  th_check(ot_sumsq(NULL, 0) == 0.0, "sumsq n=0 is 0");
  // the thread count must not change a single bit
  size_t n = 5 * 65536 + 123;
  float *g = th_falloc(n);
  th_fill(&r, g, n, -10.f, 10.f);
  int nt0 = ot_threads_get();
  ot_threads_set(1);
  double s1 = ot_sumsq(g, n);
  ot_threads_set(2);
  double s2 = ot_sumsq(g, n);
  ot_threads_set(3);
  double s3 = ot_sumsq(g, n);
  ot_threads_set(nt0);
  th_check(s1 == s2 && s2 == s3, "%s sumsq bitwise equal for 1/2/3 threads: %.17g %.17g %.17g",
           ot_isa_name(isa), s1, s2, s3);
  g[n - 7] = NAN;
  th_check(isnan(ot_sumsq(g, n)), "%s sumsq propagates NaN", ot_isa_name(isa));
  g[n - 7] = INFINITY;
  th_check(isinf(ot_sumsq(g, n)), "%s sumsq propagates inf", ot_isa_name(isa));
  free(g);
}

// AdamW is element-wise: any thread count gives the same bits.
static void test_adamw_threads(ot_isa isa) {
  size_t n = 300001;
  th_rng r = {7};
  float *p = th_falloc(n), *g = th_falloc(n), *m = th_falloc(n), *v = th_falloc(n);
  float *p2 = th_falloc(n), *m2 = th_falloc(n), *v2 = th_falloc(n);
  th_fill(&r, p, n, -1, 1); th_fill(&r, g, n, -1, 1); th_fill(&r, m, n, -0.1f, 0.1f);
  th_fill(&r, v, n, 0, 0.01f);
  memcpy(p2, p, n * 4); memcpy(m2, m, n * 4); memcpy(v2, v, n * 4);
  ot_adamw_cfg cfg = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 10};
  int nt0 = ot_threads_get();
  ot_threads_set(1);
  ot_adamw(p, g, m, v, NULL, n, &cfg, 0.7f);
  ot_threads_set(2);
  ot_adamw(p2, g, m2, v2, NULL, n, &cfg, 0.7f);
  ot_threads_set(nt0);
  th_check(!memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4),
           "%s adamw bitwise equal for 1/2 threads", ot_isa_name(isa));
  free(p); free(g); free(m); free(v); free(p2); free(m2); free(v2);
}

static void test_clip_coef(void) {
  float c = ot_clip_coef(2.0, 1.0f);
  th_check(fabsf(c - (float)(1.0 / (2.0 + 1e-6))) == 0.0f, "clip_coef(2, 1) = %.9g", c);
  th_check(ot_clip_coef(0.5, 1.0f) == 1.0f, "clip_coef(0.5, 1) = 1");
  th_check(ot_clip_coef(0.0, 1.0f) == 1.0f, "clip_coef(0, 1) = 1");
  th_check(ot_clip_coef(1e9, 0.0f) == 1.0f, "clip_coef(1e9, 0) = 1 (clipping off)");
  th_check(ot_clip_coef(1e9, -1.0f) == 1.0f, "clip_coef(1e9, -1) = 1 (clipping off)");
  th_check(isnan(ot_clip_coef(NAN, 1.0f)), "clip_coef(NaN, 1) = NaN");
  th_check(isnan(ot_clip_coef(INFINITY, 1.0f)), "clip_coef(inf, 1) = NaN");
  th_check(isnan(ot_clip_coef(NAN, 0.0f)), "clip_coef(NaN, 0) = NaN (skip even with clipping off)");
  c = ot_clip_coef(sqrt(ot_sumsq((const float[]){3, 4}, 2)), 2.5f);
  th_check(fabsf(c - 0.5f) < 1e-6f, "clip_coef(norm [3,4] = 5, 2.5) = %.9g", c);
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_vs_ref(isas[k]);
    test_sumsq(isas[k]);
    test_adamw_threads(isas[k]);
    test_known_value();
  }
  ot_isa_unforce();
  test_errors();
  test_clip_coef();
  return th_finish();
}
