// Label-smoothed cross-entropy (ot_xent_ls_fused): the fast kernel on every ISA,
// f32 and bf16, odd N and V, padded ld, ignored rows, multi-chunk rows, against
// the double reference; eps = 0 gives ot_xent_fused's bits (losses and
// gradients); finite differences of the reference; the PyTorch golden file
// tests/golden/xent_ls.safetensors (tools/gen_golden.py); same bits for 1 and
// 2 threads; bad arguments. Run from the repository root (CTest does).
#include "harness.h"

static th_rng g_rng = {0x5eed0e15};

typedef struct { int N, V, ld, ignore; float eps; } lshape;

// x: [N, ld]; columns < V uniform in [-5, 5] plus a ramp (the max moves
// between chunks), padding NaN (must never be read).
static void fill(float *x, int N, int V, int ld) {
  for (size_t i = 0; i < (size_t)N * ld; i++) x[i] = NAN;
  for (int r = 0; r < N; r++)
    for (int i = 0; i < V; i++)
      x[(size_t)r * ld + i] = th_uniform(&g_rng, -5.0f, 5.0f) + (r & 1 ? 0.003f * i : 0.0f);
}

// Targets: random in [0, V), every third row ignored; returns a count.
static float targets(int32_t *tg, int N, int V, int ignore) {
  int kept = 0;
  for (int r = 0; r < N; r++) {
    tg[r] = (int32_t)(th_next(&g_rng) % (uint64_t)V);
    if (r % 3 == 1) tg[r] = ignore;
    if (tg[r] != ignore) kept++;
  }
  return (float)(kept ? kept + 1 : 1);
}

static void test_vs_ref(void) {
  static const lshape sh[] = {{1, 1, 1, -100, 0.1f},   {3, 3, 8, -100, 0.5f},
                              {5, 17, 17, -100, 0.1f}, {7, 65, 80, 2, 0.2f},
                              {3, 769, 771, -100, 0.05f}, {5, 4099, 4160, -1, 0.1f},
                              {2, 50257, 50257, -100, 0.1f}, {4, 33, 33, -100, 0.95f}};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    const char *isa = ot_isa_name(isas[ii]);
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
      for (int di = 0; di < TH_NDT; di++) {
        lshape s = sh[k];
        ot_dtype dt = th_dts[di];
        size_t n = (size_t)s.N * s.ld;
        float *x = th_falloc(n), *want = th_falloc(n), *g = th_falloc(n);
        float rl[8], rlw[8], ml = 0, mlw = 0;
        int32_t tg[8];
        fill(x, s.N, s.V, s.ld);
        th_round_dt(dt, x, n);
        float count = targets(tg, s.N, s.V, s.ignore);
        memcpy(want, x, n * 4);
        ot_ref_xent_ls(want, s.ld, tg, s.N, s.V, s.ignore, s.eps, count, rlw, &mlw, true);
        for (int wg = 0; wg < 2; wg++) {
          void *xb = th_to_dt(dt, x, n), *x0 = th_to_dt(dt, x, n);
          memset(rl, 0xff, sizeof rl);
          ot_status rc = ot_xent_ls_fused(dt, xb, s.ld, tg, s.N, s.V, s.ignore, s.eps, count, rl,
                                          &ml, wg);
          th_check(rc == OT_OK, "xent_ls status %s", ot_last_error());
          th_check_nerr(rl, rlw, (size_t)s.N, 1e-5, "xent_ls row_loss %s %s N=%d V=%d eps=%g",
                        ot_dtype_name(dt), isa, s.N, s.V, s.eps);
          th_check_nerr(&ml, &mlw, 1, 1e-5, "xent_ls mean_loss %s %s N=%d V=%d eps=%g",
                        ot_dtype_name(dt), isa, s.N, s.V, s.eps);
          if (!wg) {
            th_check(memcmp(xb, x0, n * ot_dtype_size(dt)) == 0,
                     "xent_ls want_grad=false leaves logits untouched (%s %s V=%d)",
                     ot_dtype_name(dt), isa, s.V);
          } else {
            th_from_dt(dt, xb, g, n);
            th_check_nerr(g, want, n, th_tol(dt, 1e-5, 1e-2), "xent_ls dlogits %s %s N=%d V=%d ld=%d",
                          ot_dtype_name(dt), isa, s.N, s.V, s.ld);
            bool zero = true;
            for (int r = 0; r < s.N; r++)
              for (int i = 0; i < s.ld; i++)
                if (i >= s.V || tg[r] == s.ignore) zero &= g[(size_t)r * s.ld + i] == 0.0f;
            th_check(zero, "xent_ls: padding and ignored rows get exactly 0 (%s %s V=%d ld=%d)",
                     ot_dtype_name(dt), isa, s.V, s.ld);
          }
          free(xb); free(x0);
        }
        free(x); free(want); free(g);
      }
  }
  ot_isa_unforce();
}

// eps = 0: the same bits as ot_xent_fused, row losses, mean and gradients.
static void test_eps0_bits(void) {
  static const lshape sh[] = {{1, 1, 1, -100, 0}, {5, 17, 24, -100, 0}, {7, 769, 769, 3, 0},
                              {3, 4099, 4099, -100, 0}, {2, 50304, 50304, -100, 0}};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
      for (int di = 0; di < TH_NDT; di++) {
        lshape s = sh[k];
        ot_dtype dt = th_dts[di];
        size_t n = (size_t)s.N * s.ld, bytes = n * ot_dtype_size(dt);
        float *x = th_falloc(n), ra[8], rb[8], ma = 0, mb = 1;
        int32_t tg[8];
        fill(x, s.N, s.V, s.ld);
        float count = targets(tg, s.N, s.V, s.ignore);
        for (int wg = 0; wg < 2; wg++) {
          void *a = th_to_dt(dt, x, n), *b = th_to_dt(dt, x, n);
          ot_status r1 = ot_xent_fused(dt, a, s.ld, tg, s.N, s.V, s.ignore, count, ra, &ma, wg);
          ot_status r2 = ot_xent_ls_fused(dt, b, s.ld, tg, s.N, s.V, s.ignore, 0.0f, count, rb,
                                          &mb, wg);
          th_check(r1 == OT_OK && r2 == OT_OK && memcmp(a, b, bytes) == 0 &&
                       memcmp(ra, rb, sizeof(float) * (size_t)s.N) == 0 &&
                       memcmp(&ma, &mb, sizeof ma) == 0,
                   "eps=0 gives ot_xent_fused's bits (%s %s N=%d V=%d ld=%d grad=%d)",
                   ot_dtype_name(dt), ot_isa_name(isas[ii]), s.N, s.V, s.ld, wg);
          free(a); free(b);
        }
        free(x);
      }
  }
  ot_isa_unforce();
  // and the reference agrees with ot_ref_xent at eps = 0 (to rounding)
  float x[3 * 7], y[3 * 7], r1[3], r2[3], m1, m2;
  int32_t tg[3] = {6, -100, 0};
  th_fill(&g_rng, x, 21, -3.0f, 3.0f);
  memcpy(y, x, sizeof x);
  ot_ref_xent(x, 7, tg, 3, 7, -100, 2.0f, r1, &m1, true);
  ot_ref_xent_ls(y, 7, tg, 3, 7, -100, 0.0f, 2.0f, r2, &m2, true);
  th_check_nerr(r2, r1, 3, 1e-7, "ref xent_ls eps=0 row loss = ref xent");
  th_check_nerr(y, x, 21, 1e-7, "ref xent_ls eps=0 gradient = ref xent");
}

// FD of the reference mean loss w.r.t. the logits against its gradient.
typedef struct { float *x; const int32_t *tg; int N, V, ld; float eps, count; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  float rl[4];
  ot_ref_xent_ls(c->x, c->ld, c->tg, c->N, c->V, -100, c->eps, c->count, rl, NULL, false);
  double s = 0;
  for (int r = 0; r < c->N; r++) s += rl[r];
  return s / c->count;
}

static void test_fd(void) {
  int32_t tg[3] = {4, -100, 0};
  for (int e = 0; e < 2; e++) {
    fd_ctx c = {th_falloc(24), tg, 3, 7, 8, e ? 0.3f : 0.1f, 2.0f};
    float *g = th_falloc(24), *fd = th_falloc(24), ml;
    th_fill(&g_rng, c.x, 24, -2.0f, 2.0f);
    memcpy(g, c.x, 24 * 4);
    ot_ref_xent_ls(g, c.ld, tg, c.N, c.V, -100, c.eps, c.count, NULL, &ml, true);
    for (size_t i = 0; i < 24; i++) fd[i] = (float)th_fd(c.x, i, 1e-2f, fd_loss, &c);
    th_check_nerr(g, fd, 24, 2e-3, "ref xent_ls gradient vs finite differences (eps=%g)", c.eps);
    th_check(fabs(ml - fd_loss(&c)) < 1e-6, "ref xent_ls mean_loss = sum(row_loss) / count");
    // the fast kernel's gradient against the same finite differences
    memcpy(g, c.x, 24 * 4);
    th_check(ot_xent_ls_fused(OT_F32, g, c.ld, tg, c.N, c.V, -100, c.eps, c.count, NULL, &ml,
                              true) == OT_OK, "xent_ls fd call");
    th_check_nerr(g, fd, 24, 2e-3, "xent_ls gradient vs finite differences (eps=%g)", c.eps);
    free(c.x); free(g); free(fd);
  }
}

// tests/golden/xent_ls.safetensors: PyTorch F.cross_entropy(label_smoothing).
static const ot_st_tensor *gt(ot_st_file *f, int c, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "c%d.%s", c, name);
  const ot_st_tensor *t = ot_st_find(f, key);
  th_check(t != NULL, "golden xent_ls: tensor %s present", key);
  return t;
}
static double gm(ot_st_file *f, int c, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "c%d.%s", c, name);
  const char *v = ot_st_meta(f, key);
  th_check(v != NULL, "golden xent_ls: metadata %s present", key);
  return v ? atof(v) : 0.0;
}

static void test_golden(void) {
  ot_st_file *f = NULL;
  const char *path = "tests/golden/xent_ls.safetensors";
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s: %s", path, ot_last_error())) return;
  const char *nc = ot_st_meta(f, "cases");
  int cases = nc ? atoi(nc) : 0;
  th_check(cases >= 3, "golden xent_ls: %d cases", cases);
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int c = 0; c < cases; c++) {
    int N = (int)gm(f, c, "N"), V = (int)gm(f, c, "V"), ld = (int)gm(f, c, "ld");
    int ign = (int)gm(f, c, "ignore_index");
    float count = (float)gm(f, c, "count"), eps = (float)gm(f, c, "eps");
    const ot_st_tensor *tl = gt(f, c, "logits"), *tt = gt(f, c, "targets"),
                       *tr = gt(f, c, "row_loss"), *tm = gt(f, c, "mean_loss"),
                       *td = gt(f, c, "dlogits");
    if (!tl || !tt || !tr || !tm || !td) continue;
    size_t n = (size_t)N * ld;
    float *lg = th_falloc(n), rl[16], ml;
    for (int v = -1; v < ni; v++) {  // -1: the reference
      if (v >= 0) ot_isa_force(isas[v]);
      const char *who = v < 0 ? "ref" : ot_isa_name(isas[v]);
      memcpy(lg, tl->data, n * 4);
      if (v < 0) ot_ref_xent_ls(lg, ld, tt->data, N, V, ign, eps, count, rl, &ml, true);
      else th_check(ot_xent_ls_fused(OT_F32, lg, ld, tt->data, N, V, ign, eps, count, rl, &ml,
                                     true) == OT_OK, "golden xent_ls c%d call", c);
      th_check_nerr(rl, tr->data, (size_t)N, 1e-5, "golden xent_ls c%d [%s] row_loss", c, who);
      th_check_nerr(&ml, tm->data, 1, 1e-5, "golden xent_ls c%d [%s] mean_loss", c, who);
      th_check_nerr(lg, td->data, n, 1e-5, "golden xent_ls c%d [%s] dlogits", c, who);
    }
    ot_isa_unforce();
    free(lg);
  }
  ot_st_close(f);
}

// Same bits for 1 and 2 threads.
static void test_threads(void) {
  int N = 64, V = 3001;
  size_t n = (size_t)N * V;
  float *x = th_falloc(n), ra[64], rb[64], ma, mb;
  int32_t tg[64];
  fill(x, N, V, V);
  float count = targets(tg, N, V, -100);
  int nt = ot_threads_get();
  for (int di = 0; di < TH_NDT; di++) {
    ot_dtype dt = th_dts[di];
    void *a = th_to_dt(dt, x, n), *b = th_to_dt(dt, x, n);
    ot_threads_set(1);
    ot_xent_ls_fused(dt, a, V, tg, N, V, -100, 0.1f, count, ra, &ma, true);
    ot_threads_set(2);
    ot_xent_ls_fused(dt, b, V, tg, N, V, -100, 0.1f, count, rb, &mb, true);
    th_check(memcmp(a, b, n * ot_dtype_size(dt)) == 0 && memcmp(ra, rb, sizeof ra) == 0 &&
                 ma == mb, "xent_ls %s: same bits with 1 and 2 threads", ot_dtype_name(dt));
    free(a); free(b);
  }
  ot_threads_set(nt);
  free(x);
}

static void test_errors(void) {
  float lg[4 * 6], lg0[4 * 6], rl[4], ml;
  int32_t tg[4] = {0, 4, -100, 1};
  for (int i = 0; i < 24; i++) lg[i] = lg0[i] = (float)i;
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, 1.0f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "eps=1", "eps = 1");
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, -0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "[0, 1)", "negative eps");
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, NAN, 3.0f, rl, &ml, true),
                 OT_EINVAL, "eps=nan", "NaN eps");
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 0, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "V", "V = 0");
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, -2, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "V", "V < 0");
  tg[3] = 7;
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "targets[3] = 7", "target >= V");
  tg[3] = -5;
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "targets[3] = -5", "negative target that is not ignore_index");
  tg[3] = 1;
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 4, tg, 4, 5, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "ld=4", "ld < V");
  th_check_error(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, 0.1f, 0.0f, rl, &ml, true),
                 OT_EINVAL, "count", "count = 0");
  th_check_error(ot_xent_ls_fused(OT_I8, lg, 6, tg, 4, 5, -100, 0.1f, 3.0f, rl, &ml, true),
                 OT_EINVAL, "i8", "i8 logits");
  th_check(memcmp(lg, lg0, sizeof lg) == 0, "logits untouched on bad input");
  th_check(ot_xent_ls_fused(OT_F32, lg, 6, tg, 4, 5, -100, 0.1f, 3.0f, NULL, NULL, false) == OT_OK,
           "NULL row_loss / mean_loss accepted");
}

int main(void) {
  test_vs_ref();
  test_eps0_bits();
  test_fd();
  test_golden();
  test_threads();
  test_errors();
  return th_finish();
}
