// GELU (tanh and erf forms) and SwiGLU: fast kernels (every ISA this CPU runs, f32 and
// bf16 storage) against the double-precision libm reference over odd sizes;
// the reference backward against central finite differences; extreme inputs
// (no NaN from overflow, NaN propagates); in-place use; determinism; errors.
#include "harness.h"
#include "internal.h"

static th_rng g_rng = {777u};

static void fill(float *x, size_t n, float sd, ot_dtype dt) {
  th_fill_normal(&g_rng, x, n, sd);
  th_round_dt(dt, x, n);
}

// ------------------------------------------------------------------- GELU --
// The two GELU forms: kernels and their references.
typedef struct {
  const char *name;
  ot_status (*fwd)(ot_dtype, void *, const void *, size_t);
  ot_status (*bwd)(ot_dtype, void *, const void *, const void *, size_t);
  void (*rfwd)(float *, const float *, size_t);
  void (*rbwd)(float *, const float *, const float *, size_t);
} gelu_kind;
static const gelu_kind g_gelus[2] = {
    {"gelu", ot_gelu_fwd, ot_gelu_bwd, ot_ref_gelu_fwd, ot_ref_gelu_bwd},
    {"gelu_erf", ot_gelu_erf_fwd, ot_gelu_erf_bwd, ot_ref_gelu_erf_fwd, ot_ref_gelu_erf_bwd}};

static void check_gelu(const gelu_kind *g, const char *isa, ot_dtype dt, size_t n) {
  float *x = th_falloc(n), *dy = th_falloc(n), *ry = th_falloc(n), *rdx = th_falloc(n);
  float *fy = th_falloc(n), *fdx = th_falloc(n);
  fill(x, n, 2.5f, dt);
  fill(dy, n, 1.0f, dt);
  g->rfwd(ry, x, n);
  g->rbwd(rdx, x, dy, n);
  void *x_ = th_to_dt(dt, x, n), *dy_ = th_to_dt(dt, dy, n);
  void *y_ = th_to_dt(dt, dy, n), *dx_ = th_to_dt(dt, x, n);
  ot_status s1 = g->fwd(dt, y_, x_, n), s2 = g->bwd(dt, dx_, x_, dy_, n);
  th_check(s1 == OT_OK && s2 == OT_OK, "%s %s [%s] n=%zu: status %s/%s", g->name, ot_dtype_name(dt), isa, n,
           ot_status_name(s1), ot_status_name(s2));
  th_from_dt(dt, y_, fy, n);
  th_from_dt(dt, dx_, fdx, n);
  th_check_nerr(fy, ry, n, th_tol(dt, 1e-6, 1e-2), "%s %s fwd [%s] n=%zu", g->name, ot_dtype_name(dt), isa, n);
  th_check_nerr(fdx, rdx, n, th_tol(dt, 1e-6, 1e-2), "%s %s bwd [%s] n=%zu", g->name, ot_dtype_name(dt), isa, n);
  // in place: y over x, dx over dy: same bits
  const size_t es = ot_dtype_size(dt);
  void *a = th_to_dt(dt, x, n), *b = th_to_dt(dt, dy, n);
  g->fwd(dt, a, a, n);
  g->bwd(dt, b, x_, b, n);
  th_check(memcmp(a, y_, n * es) == 0 && memcmp(b, dx_, n * es) == 0,
           "%s %s [%s] n=%zu: in place (y = x, dx = dy) gives the same bits", g->name, ot_dtype_name(dt), isa, n);
  free(a); free(b);
  free(x); free(dy); free(ry); free(rdx); free(fy); free(fdx); free(x_); free(dy_); free(y_); free(dx_);
}

// Extreme and special inputs: overflow must not turn into NaN; NaN propagates.
static void check_gelu_special(const gelu_kind *g, const char *isa) {
  static const float xs[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 9.0f, -9.0f, 10.0f, -10.0f, 20.0f,
                             -20.0f, 30.0f, -30.0f, 100.0f, -100.0f, 1e10f, -1e10f, 1e30f,
                             -1e30f, 3e38f, -3e38f};
  const size_t n = sizeof xs / sizeof *xs;
  float y[32], dx[32], ry[32], rdx[32], one[32];
  for (size_t i = 0; i < n; i++) one[i] = 1.0f;
  g->fwd(OT_F32, y, xs, n);
  g->bwd(OT_F32, dx, xs, one, n);
  g->rfwd(ry, xs, n);
  g->rbwd(rdx, xs, one, n);
  for (size_t i = 0; i < n; i++) {
    bool ok = isfinite(y[i]) && isfinite(dx[i]) &&
              fabsf(y[i] - ry[i]) <= 1e-6f * fmaxf(1.0f, fabsf(ry[i])) &&
              fabsf(dx[i] - rdx[i]) <= 1e-6f;
    th_check(ok, "%s special [%s] x=%g: y=%g (ref %g), dy/dx=%g (ref %g)", g->name, isa, xs[i], y[i], ry[i],
             dx[i], rdx[i]);
  }
  float nx[9] = {1, 2, 3, 4, NAN, 6, 7, 8, 9}, ny[9], nd[9];
  g->fwd(OT_F32, ny, nx, 9);
  g->bwd(OT_F32, nd, nx, one, 9);
  th_check(isnan(ny[4]) && isnan(nd[4]) && !isnan(ny[3]) && !isnan(nd[5]),
           "%s [%s]: NaN input gives NaN output and stays in its lane", g->name, isa);
}

// ----------------------------------------------------------------- SwiGLU --
// Extreme gates: silu saturates to 0 or g without NaN; NaN propagates.
static void check_swiglu_special(const char *isa) {
  static const float gs[] = {0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 86.0f, -86.0f, 88.0f, -88.0f,
                             100.0f, -100.0f, 1e10f, -1e10f, 1e30f, -1e30f, 3e38f, -3e38f};
  enum { F = sizeof gs / sizeof *gs };
  float x[2 * F], dy[F], y[F], dx[2 * F], ry[F], rdx[2 * F];
  for (int i = 0; i < F; i++) { x[i] = gs[i]; x[F + i] = 0.5f; dy[i] = 1.0f; }
  ot_swiglu_fwd(OT_F32, y, x, 1, F);
  ot_swiglu_bwd(OT_F32, dx, x, dy, 1, F);
  ot_ref_swiglu_fwd(ry, x, 1, F);
  ot_ref_swiglu_bwd(rdx, x, dy, 1, F);
  for (int i = 0; i < F; i++) {
    bool ok = isfinite(y[i]) && isfinite(dx[i]) && isfinite(dx[F + i]) &&
              fabsf(y[i] - ry[i]) <= 1e-6f * fmaxf(1.0f, fabsf(ry[i])) &&
              fabsf(dx[i] - rdx[i]) <= 1e-6f &&
              fabsf(dx[F + i] - rdx[F + i]) <= 1e-6f * fmaxf(1.0f, fabsf(rdx[F + i]));
    th_check(ok, "swiglu special [%s] g=%g u=0.5: y=%g (ref %g), dg=%g (ref %g), du=%g (ref %g)",
             isa, gs[i], y[i], ry[i], dx[i], rdx[i], dx[F + i], rdx[F + i]);
  }
  float xn[4] = {NAN, 1.0f, 2.0f, 3.0f}, yn[2], dn[4], d1[2] = {1, 1};
  ot_swiglu_fwd(OT_F32, yn, xn, 1, 2);
  ot_swiglu_bwd(OT_F32, dn, xn, d1, 1, 2);
  th_check(isnan(yn[0]) && isnan(dn[0]) && !isnan(yn[1]) && !isnan(dn[1]),
           "swiglu [%s]: NaN gate gives NaN and stays in its lane", isa);
}

static void check_swiglu(const char *isa, ot_dtype dt, int N, int F) {
  const size_t nx = (size_t)N * 2 * F, ny = (size_t)N * F;
  float *x = th_falloc(nx), *dy = th_falloc(ny), *ry = th_falloc(ny), *rdx = th_falloc(nx);
  float *fy = th_falloc(ny), *fdx = th_falloc(nx);
  fill(x, nx, 2.0f, dt);
  fill(dy, ny, 1.0f, dt);
  ot_ref_swiglu_fwd(ry, x, N, F);
  ot_ref_swiglu_bwd(rdx, x, dy, N, F);
  void *x_ = th_to_dt(dt, x, nx), *dy_ = th_to_dt(dt, dy, ny), *y_ = th_to_dt(dt, dy, ny), *dx_ = th_to_dt(dt, x, nx);
  ot_status s1 = ot_swiglu_fwd(dt, y_, x_, N, F), s2 = ot_swiglu_bwd(dt, dx_, x_, dy_, N, F);
  th_check(s1 == OT_OK && s2 == OT_OK, "swiglu %s [%s] N=%d F=%d: status %s/%s", ot_dtype_name(dt),
           isa, N, F, ot_status_name(s1), ot_status_name(s2));
  th_from_dt(dt, y_, fy, ny);
  th_from_dt(dt, dx_, fdx, nx);
  th_check_nerr(fy, ry, ny, th_tol(dt, 1e-6, 1e-2), "swiglu %s fwd [%s] N=%d F=%d", ot_dtype_name(dt), isa, N, F);
  th_check_nerr(fdx, rdx, nx, th_tol(dt, 1e-6, 1e-2), "swiglu %s bwd [%s] N=%d F=%d", ot_dtype_name(dt), isa, N, F);
  free(x); free(dy); free(ry); free(rdx); free(fy); free(fdx); free(x_); free(dy_); free(y_); free(dx_);
}

// ----------------------------------------------- finite differences (ref) --
typedef struct { int swiglu, N, F; size_t n; float *x, *w, *y; } fd_ctx;

static double fd_loss(void *p) {
  fd_ctx *c = p;
  if (c->swiglu == 1) { ot_ref_swiglu_fwd(c->y, c->x, c->N, c->F); return th_dot(c->y, c->w, (size_t)c->N * c->F); }
  if (c->swiglu == 2) ot_ref_gelu_erf_fwd(c->y, c->x, c->n); else ot_ref_gelu_fwd(c->y, c->x, c->n);
  return th_dot(c->y, c->w, c->n);
}

// swiglu: 0 GELU (tanh), 1 SwiGLU, 2 GELU (erf).
static void check_fd(int swiglu) {
  fd_ctx c = {swiglu, 3, 11, 0, NULL, NULL, NULL};
  c.n = swiglu == 1 ? (size_t)c.N * 2 * c.F : 97;
  const size_t ny = swiglu == 1 ? (size_t)c.N * c.F : c.n;
  c.x = th_falloc(c.n); c.w = th_falloc(ny); c.y = th_falloc(ny);
  th_fill(&g_rng, c.x, c.n, -5.0f, 5.0f);
  th_fill(&g_rng, c.w, ny, -1.0f, 1.0f);
  float *dx = th_falloc(c.n), *fd = th_falloc(c.n);
  if (swiglu == 1) ot_ref_swiglu_bwd(dx, c.x, c.w, c.N, c.F);
  else if (swiglu == 2) ot_ref_gelu_erf_bwd(dx, c.x, c.w, c.n);
  else ot_ref_gelu_bwd(dx, c.x, c.w, c.n);
  for (size_t i = 0; i < c.n; i++) fd[i] = (float)th_fd(c.x, i, 1e-2f, fd_loss, &c);
  th_check_nerr(dx, fd, c.n, 1e-4, "%s ref bwd vs FD (n=%zu)", swiglu == 1 ? "swiglu" : swiglu ? "gelu_erf" : "gelu", c.n);
  free(c.x); free(c.w); free(c.y); free(dx); free(fd);
}

// ------------------------------------------------------------ determinism --
static void check_determinism(const gelu_kind *g, const char *isa) {
  const size_t n = 200003;  // threaded, with a tail
  float *x = th_falloc(n), *d = th_falloc(n), *y[2], *dx[2];
  fill(x, n, 3.0f, OT_F32); fill(d, n, 1.0f, OT_F32);
  for (int k = 0; k < 2; k++) {
    y[k] = th_falloc(n); dx[k] = th_falloc(n);
    g->fwd(OT_F32, y[k], x, n);
    g->bwd(OT_F32, dx[k], x, d, n);
  }
  th_check(!memcmp(y[0], y[1], n * 4) && !memcmp(dx[0], dx[1], n * 4),
           "%s [%s] n=%zu: two runs bitwise equal", g->name, isa, n);
  for (int k = 0; k < 2; k++) { free(y[k]); free(dx[k]); }
  free(x); free(d);
}

// ----------------------------------------------------------------- errors --
static void check_errors(void) {
  float a[8] = {0}, b[8] = {0};
  th_check_error(ot_gelu_fwd(OT_F32, NULL, a, 8), OT_EINVAL, "'y' is NULL", "gelu fwd y NULL");
  th_check_error(ot_gelu_fwd(OT_F32, b, NULL, 8), OT_EINVAL, "'x' is NULL", "gelu fwd x NULL");
  th_check_error(ot_gelu_fwd(OT_I8, b, a, 8), OT_EINVAL, "i8", "gelu fwd dtype i8");
  th_check_error(ot_gelu_bwd(OT_F32, b, a, NULL, 8), OT_EINVAL, "'dy' is NULL", "gelu bwd dy NULL");
  th_check_error(ot_gelu_bwd(OT_I32, b, a, a, 8), OT_EINVAL, "i32", "gelu bwd dtype i32");
  th_check(ot_gelu_fwd(OT_F32, b, a, 0) == OT_OK, "gelu fwd n=0 is a no-op");
  th_check_error(ot_gelu_erf_fwd(OT_I8, b, a, 8), OT_EINVAL, "i8", "gelu_erf fwd dtype i8");
  th_check_error(ot_gelu_erf_bwd(OT_F32, NULL, a, a, 8), OT_EINVAL, "'dx' is NULL", "gelu_erf bwd dx NULL");
  th_check(ot_gelu_erf_bwd(OT_F32, b, a, a, 0) == OT_OK, "gelu_erf bwd n=0 is a no-op");
  th_check_error(ot_swiglu_fwd(OT_F32, b, a, 0, 4), OT_EINVAL, "N=0", "swiglu fwd N=0");
  th_check_error(ot_swiglu_fwd(OT_F32, b, a, 2, -1), OT_EINVAL, "F=-1", "swiglu fwd F<0");
  th_check_error(ot_swiglu_fwd(OT_F32, NULL, a, 2, 2), OT_EINVAL, "'y' is NULL", "swiglu fwd y NULL");
  th_check_error(ot_swiglu_bwd(OT_F32, b, NULL, a, 2, 2), OT_EINVAL, "'x' is NULL", "swiglu bwd x NULL");
  th_check_error(ot_swiglu_bwd(OT_F32, NULL, a, a, 2, 2), OT_EINVAL, "'dx' is NULL", "swiglu bwd dx NULL");
  th_check_error(ot_swiglu_bwd(OT_I8, b, a, a, 2, 2), OT_EINVAL, "i8", "swiglu bwd dtype i8");
}

int main(void) {
  static const size_t ns[] = {1, 3, 7, 8, 9, 17, 64, 65, 127, 769, 100003};
  static const int Ns[] = {1, 3, 17, 64}, Fs[] = {1, 3, 17, 64, 65, 127, 769};
  ot_isa isas[OT_ISA_COUNT];
  int nisa = th_isas(isas);
  for (int k = 0; k < nisa; k++) {
    th_check(ot_isa_force(isas[k]) == OT_OK, "force %s", ot_isa_name(isas[k]));
    const char *isa = ot_isa_name(isas[k]);
    for (int d = 0; d < TH_NDT; d++) {
      ot_dtype dt = th_dts[d];
      for (int g = 0; g < 2; g++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) check_gelu(&g_gelus[g], isa, dt, ns[i]);
      for (size_t i = 0; i < sizeof Ns / sizeof *Ns; i++)
        for (size_t j = 0; j < sizeof Fs / sizeof *Fs; j++) check_swiglu(isa, dt, Ns[i], Fs[j]);
      check_swiglu(isa, dt, 100, 400);  // threaded
    }
    for (int g = 0; g < 2; g++) {
      check_gelu_special(&g_gelus[g], isa);
      check_determinism(&g_gelus[g], isa);
    }
    check_swiglu_special(isa);
  }
  ot_isa_unforce();
  check_fd(0);
  check_fd(1);
  check_fd(2);
  check_errors();
  return th_finish();
}
