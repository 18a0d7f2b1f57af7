// Row softmax and fused softmax + cross-entropy: fast kernels (every ISA, f32
// and bf16, odd V, multi-chunk rows whose max moves, ignore_index rows, padded
// ld > V, V = 50304) against the double reference; finite differences of the
// reference backwards (softmax; mean loss w.r.t. logits); want_grad = false
// leaves logits untouched; determinism over thread counts; bad arguments.
#include "harness.h"

static th_rng g_rng = {0x5eed0003};

// Fills x: [N, V] with one of several patterns: 0 uniform [-5, 5], 1 ramp up
// (the running max grows chunk after chunk), 2 ramp down, 3 large offset.
static void fill_rows(float *x, int N, int V, int ld, int pat) {
  for (int r = 0; r < N; r++)
    for (int i = 0; i < V; i++) {
      float u = th_uniform(&g_rng, -5.0f, 5.0f);
      float v = pat == 1 ? u + 0.004f * i : pat == 2 ? u - 0.004f * i : pat == 3 ? 3000.0f + 20 * u : u;
      x[(size_t)r * ld + i] = v;
    }
}

static void to_dt(ot_dtype dt, void *dst, const float *src, size_t n) {
  void *t = th_to_dt(dt, src, n);
  memcpy(dst, t, n * ot_dtype_size(dt));
  free(t);
}
static void from_dt(ot_dtype dt, float *dst, const void *src, size_t n) { th_from_dt(dt, src, dst, n); }

// ------------------------------------------------------------------ softmax --
static void test_softmax_vs_ref(void) {
  static const int Vs[] = {1, 3, 17, 65, 769, 2049, 4100};
  static const int Ns[] = {1, 3, 5};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++)
      for (int di = 0; di < TH_NDT; di++) {
        int V = Vs[vi], N = Ns[vi % 3], pat = (int)(vi % 4);
        ot_dtype dt = th_dts[di];
        size_t n = (size_t)N * V;
        float *x = th_falloc(n), *y = th_falloc(n), *want = th_falloc(n), *dy = th_falloc(n);
        float *dx = th_falloc(n), *dwant = th_falloc(n);
        void *xb = th_alloc(n * 4), *yb = th_alloc(n * 4), *dyb = th_alloc(n * 4);
        fill_rows(x, N, V, V, pat);
        th_fill(&g_rng, dy, n, -1.0f, 1.0f);
        th_round_dt(dt, x, n); th_round_dt(dt, dy, n);
        double tol = th_tol(dt, 1e-6, 1e-2);
        ot_ref_softmax_fwd(want, x, N, V);
        for (int alias = 0; alias < 2; alias++) {
          to_dt(dt, xb, x, n);
          void *out = alias ? xb : yb;
          th_check(ot_softmax_fwd(dt, out, xb, N, V) == OT_OK, "softmax_fwd status");
          from_dt(dt, y, out, n);
          th_check_nerr(y, want, n, tol, "softmax_fwd %s %s N=%d V=%d pattern %d%s",
                        ot_dtype_name(dt), ot_isa_name(isas[ii]), N, V, pat,
                        alias ? " (y aliases x)" : "");
        }
        // backward from probabilities of moderate logits (a peaked row makes dx a
        // cancellation, ill-conditioned beyond bf16 tolerances), rounded to dt
        fill_rows(x, N, V, V, 0);
        ot_ref_softmax_fwd(want, x, N, V);
        th_round_dt(dt, want, n);
        ot_ref_softmax_bwd(dwant, want, dy, N, V);
        for (int alias = 0; alias < 2; alias++) {
          to_dt(dt, yb, want, n);
          to_dt(dt, dyb, dy, n);
          void *out = alias ? dyb : xb;
          th_check(ot_softmax_bwd(dt, out, yb, dyb, N, V) == OT_OK, "softmax_bwd status");
          from_dt(dt, dx, out, n);
          th_check_nerr(dx, dwant, n, th_tol(dt, 1e-5, 1e-2), "softmax_bwd %s %s N=%d V=%d%s",
                        ot_dtype_name(dt), ot_isa_name(isas[ii]), N, V,
                        alias ? " (dx aliases dy)" : "");
        }
        free(x); free(y); free(want); free(dy); free(dx); free(dwant); free(xb); free(yb); free(dyb);
      }
  }
  ot_isa_unforce();
}

typedef struct { float *x, *y, *w; int N, V; } sm_ctx;
static double sm_loss(void *p) {
  sm_ctx *c = p;
  ot_ref_softmax_fwd(c->y, c->x, c->N, c->V);
  return th_dot(c->y, c->w, (size_t)c->N * c->V);
}

static void test_softmax_fd(void) {
  sm_ctx c = {0};
  c.N = 2; c.V = 7;
  size_t n = 14;
  c.x = th_falloc(n); c.y = th_falloc(n); c.w = th_falloc(n);
  float *g = th_falloc(n), *fd = th_falloc(n), *y = th_falloc(n);
  th_fill(&g_rng, c.x, n, -2.0f, 2.0f);
  th_fill(&g_rng, c.w, n, -1.0f, 1.0f);
  ot_ref_softmax_fwd(y, c.x, c.N, c.V);
  ot_ref_softmax_bwd(g, y, c.w, c.N, c.V);
  for (size_t i = 0; i < n; i++) fd[i] = (float)th_fd(c.x, i, 1e-2f, sm_loss, &c);
  th_check_nerr(g, fd, n, 1e-3, "ref softmax_bwd vs finite differences");
  free(c.x); free(c.y); free(c.w); free(g); free(fd); free(y);
}

// -------------------------------------------------------------------- xent ---
typedef struct { int N, V, ld, pat, ignore; } xshape;

static void test_xent_vs_ref(void) {
  static const xshape sh[] = {{1, 1, 1, 0, -100},   {3, 3, 8, 0, -100},     {4, 17, 17, 1, -100},
                              {5, 65, 80, 2, 2},    {7, 769, 769, 3, -100}, {3, 4099, 4160, 1, -1},
                              {6, 2048, 2051, 2, -100}, {2, 50304, 50304, 0, -100}};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
      for (int di = 0; di < TH_NDT; di++) {
        xshape s = sh[k];
        ot_dtype dt = th_dts[di];
        size_t n = (size_t)s.N * s.ld;
        float *x = th_falloc(n), *g = th_falloc(n), *want = th_falloc(n);
        float rl[8], rlw[8], ml = 0, mlw = 0;
        int32_t tg[8];
        void *xb = th_alloc(n * 4), *x0 = th_alloc(n * 4);
        for (size_t i = 0; i < n; i++) x[i] = NAN;  // padding: must be ignored
        fill_rows(x, s.N, s.V, s.ld, s.pat);
        th_round_dt(dt, x, n);
        int kept = 0;
        for (int r = 0; r < s.N; r++) {
          tg[r] = (int32_t)(th_next(&g_rng) % (uint64_t)s.V);
          if (r % 3 == 1) tg[r] = s.ignore;  // every third row ignored
          if (tg[r] != s.ignore) kept++;
        }
        float count = (float)(kept ? 2 * kept : 1);  // as if half the global batch
        memcpy(want, x, n * 4);
        ot_ref_xent(want, s.ld, tg, s.N, s.V, s.ignore, count, rlw, &mlw, true);
        for (int wg = 0; wg < 2; wg++) {
          to_dt(dt, xb, x, n);
          memcpy(x0, xb, n * ot_dtype_size(dt));
          memset(rl, 0xff, sizeof rl);
          ot_status rc = ot_xent_fused(dt, xb, s.ld, tg, s.N, s.V, s.ignore, count, rl, &ml, wg);
          th_check(rc == OT_OK, "xent status %s", ot_last_error());
          const char *ctx = ot_isa_name(isas[ii]);
          th_check_nerr(rl, rlw, (size_t)s.N, th_tol(dt, 1e-6, 1e-5),
                        "xent row_loss %s %s N=%d V=%d ld=%d pat=%d grad=%d", ot_dtype_name(dt),
                        ctx, s.N, s.V, s.ld, s.pat, wg);
          th_check_nerr(&ml, &mlw, 1, th_tol(dt, 1e-6, 1e-5), "xent mean_loss %s %s N=%d V=%d grad=%d",
                        ot_dtype_name(dt), ctx, s.N, s.V, wg);
          if (!wg) {
            th_check(memcmp(xb, x0, n * ot_dtype_size(dt)) == 0,
                     "xent want_grad=false leaves logits untouched (%s %s V=%d)",
                     ot_dtype_name(dt), ctx, s.V);
            continue;
          }
          from_dt(dt, g, xb, n);
          th_check_nerr(g, want, n, th_tol(dt, 1e-5, 1e-2), "xent dlogits %s %s N=%d V=%d ld=%d pat=%d",
                        ot_dtype_name(dt), ctx, s.N, s.V, s.ld, s.pat);
          bool zero = true;
          for (int r = 0; r < s.N; r++)
            for (int i = 0; i < s.ld; i++)
              if (i >= s.V || tg[r] == s.ignore) zero &= g[(size_t)r * s.ld + i] == 0.0f;
          th_check(zero, "xent: padding columns and ignored rows get exactly 0 (%s %s V=%d ld=%d)",
                   ot_dtype_name(dt), ctx, s.V, s.ld);
        }
        free(x); free(g); free(want); free(xb); free(x0);
      }
  }
  ot_isa_unforce();
}

// FD of the reference mean loss w.r.t. the logits against its gradient.
typedef struct { float *x, *tmp; const int32_t *tg; int N, V, ld; float count; } xe_ctx;
static double xe_loss(void *p) {
  xe_ctx *c = p;
  float rl[4];
  ot_ref_xent(c->x, c->ld, c->tg, c->N, c->V, -100, c->count, rl, NULL, false);
  double s = 0;
  for (int r = 0; r < c->N; r++) s += rl[r];  // double sum of the row losses
  return s / c->count;
}

static void test_xent_fd(void) {
  int32_t tg[3] = {4, -100, 0};
  xe_ctx c = {th_falloc(24), NULL, tg, 3, 6, 8, 2.0f};
  float *g = th_falloc(24), *fd = th_falloc(24);
  th_fill(&g_rng, c.x, 24, -2.0f, 2.0f);
  memcpy(g, c.x, 24 * 4);
  float ml;
  ot_ref_xent(g, c.ld, tg, c.N, c.V, -100, c.count, NULL, &ml, true);
  for (size_t i = 0; i < 24; i++) fd[i] = (float)th_fd(c.x, i, 1e-2f, xe_loss, &c);
  th_check_nerr(g, fd, 24, 2e-3, "ref xent gradient vs finite differences of the mean loss");
  th_check(fabs(ml - xe_loss(&c)) < 1e-6, "ref xent mean_loss = sum(row_loss) / count");
  free(c.x); free(g); free(fd);
}

// Same bits for 1 and 2 threads: softmax, xent losses and gradients.
static void test_determinism(void) {
  int N = 64, V = 3001;
  size_t n = (size_t)N * V;
  float *x = th_falloc(n), *a = th_falloc(n), *b = th_falloc(n);
  float ra[64], rb[64], ma, mb;
  int32_t tg[64];
  fill_rows(x, N, V, V, 0);
  for (int r = 0; r < N; r++) tg[r] = r % 5 == 0 ? -100 : (int32_t)(th_next(&g_rng) % (uint64_t)V);
  int nt = ot_threads_get();
  for (int di = 0; di < TH_NDT; di++) {
    ot_dtype dt = th_dts[di];
    size_t bytes = n * ot_dtype_size(dt);
    to_dt(dt, a, x, n);
    to_dt(dt, b, x, n);
    ot_threads_set(1);
    ot_xent_fused(dt, a, V, tg, N, V, -100, 51.0f, ra, &ma, true);
    ot_threads_set(2);
    ot_xent_fused(dt, b, V, tg, N, V, -100, 51.0f, rb, &mb, true);
    th_check(memcmp(a, b, bytes) == 0 && memcmp(ra, rb, sizeof ra) == 0 && ma == mb,
             "xent %s: same bits with 1 and 2 threads", ot_dtype_name(dt));
    to_dt(dt, a, x, n);
    ot_threads_set(1);
    ot_softmax_fwd(dt, b, a, N, V);
    ot_threads_set(2);
    ot_softmax_fwd(dt, a, a, N, V);
    th_check(memcmp(a, b, bytes) == 0, "softmax %s: same bits with 1 and 2 threads",
             ot_dtype_name(dt));
  }
  ot_threads_set(nt);
  free(x); free(a); free(b);
}

// A NaN logit makes that row's loss NaN (divergence must be visible), other
// rows stay finite; an -inf logit (masked vocabulary entry) is fine.
static void test_xent_nonfinite(void) {
  int N = 3, V = 37;
  float x[3 * 37], rl[3], ml;
  int32_t tg[3] = {1, 2, 3};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    fill_rows(x, N, V, V, 0);
    x[5] = NAN;
    x[V + 30] = -INFINITY;
    ot_xent_fused(OT_F32, x, V, tg, N, V, -100, 3.0f, rl, &ml, false);
    th_check(isnan(rl[0]) && isfinite(rl[1]) && isfinite(rl[2]) && isnan(ml),
             "xent %s: NaN logit -> NaN row loss and mean, -inf logit -> finite (%g %g %g)",
             ot_isa_name(isas[ii]), rl[0], rl[1], rl[2]);
  }
  ot_isa_unforce();
}

static void test_errors(void) {
  float lg[4 * 6], lg0[4 * 6], rl[4], ml;
  int32_t tg[4] = {0, 4, -100, 1};
  for (int i = 0; i < 24; i++) lg[i] = lg0[i] = (float)i;
  tg[3] = 7;
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "targets[3] = 7", "target >= V");
  th_check(strstr(ot_last_error(), "V=5") != NULL, "message names V: %s", ot_last_error());
  th_check(memcmp(lg, lg0, sizeof lg) == 0, "logits untouched on a bad target");
  tg[3] = 1;
  tg[1] = -3;
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "targets[1] = -3", "negative target that is not ignore_index");
  tg[1] = 4;
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 4, 5, -100, 0.0f, rl, &ml, true), OT_EINVAL,
                 "count=0", "count 0");
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 4, 5, -100, NAN, rl, &ml, true), OT_EINVAL,
                 "count=nan", "count NaN");
  th_check_error(ot_xent_fused(OT_F32, lg, 4, tg, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "ld=4", "ld < V");
  th_check_error(ot_xent_fused(OT_I8, lg, 6, tg, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "i8", "i8");
  th_check_error(ot_xent_fused(OT_F32, NULL, 6, tg, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "'logits'", "NULL logits");
  th_check_error(ot_xent_fused(OT_F32, lg, 6, NULL, 4, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "'targets'", "NULL targets");
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 0, 5, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "N=0", "N=0");
  th_check_error(ot_xent_fused(OT_F32, lg, 6, tg, 4, 0, -100, 3.0f, rl, &ml, true), OT_EINVAL,
                 "V=0", "V=0");
  th_check(memcmp(lg, lg0, sizeof lg) == 0, "logits untouched by failing calls");
  th_check(ot_xent_fused(OT_F32, lg, 6, tg, 4, 5, -100, 3.0f, NULL, NULL, false) == OT_OK,
           "row_loss and mean_loss may be NULL");
  th_check_error(ot_softmax_fwd(OT_I8, lg, lg, 4, 6), OT_EINVAL, "i8", "softmax i8");
  th_check_error(ot_softmax_fwd(OT_F32, NULL, lg, 4, 6), OT_EINVAL, "'y'", "softmax NULL y");
  th_check_error(ot_softmax_fwd(OT_F32, lg, lg, 4, 0), OT_EINVAL, "V=0", "softmax V=0");
  th_check_error(ot_softmax_bwd(OT_F32, lg, lg, NULL, 4, 6), OT_EINVAL, "'dy'", "softmax_bwd NULL dy");
  th_check_error(ot_softmax_bwd(OT_F32, lg, lg, lg, -1, 6), OT_EINVAL, "N=-1", "softmax_bwd N<0");
}

int main(void) {
  test_softmax_vs_ref();
  test_softmax_fd();
  test_xent_vs_ref();
  test_xent_fd();
  test_determinism();
  test_xent_nonfinite();
  test_errors();
  return th_finish();
}
