// ot_linear_fwd/bwd against the references: odd shapes, bias or not, GELU in
// both modes (fused epilogue, and pre kept for the backward), f32, bf16 and f16,
// every ISA; finite differences of the reference backward; the weight
// gradient by row chunks and dx alone; primitive reuse; determinism; bad arguments.
// bf16 also with f32 weights (ot_linear_fwd_w / _bwd_w: the f32 masters read in
// place), bf16 GEMMs native and converted.
#include "harness.h"
#include "ops/gemm_impl.h"

static th_rng g_rng = {0x11ea};
static bool g_w32;   // bf16 runs: the weights in f32 (ot_linear_*_w with wdt = f32)

typedef struct { int M, N, K; } shape;
static const shape SHAPES[] = {{1, 1, 1}, {3, 17, 65}, {17, 3, 1}, {65, 127, 17}, {127, 65, 3},
                               {1, 769, 127}, {128, 96, 64}, {33, 769, 65}};
#define NSHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

// Stores f32 values in dt (a fresh buffer) / reads them back.

static void test_fwd(const char *isa, ot_dtype dt, shape s, bool bias, ot_act act, bool keep_pre) {
  int M = s.M, N = s.N, K = s.K;
  size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
  float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(N), *yr = th_falloc(ny), *pr = th_falloc(ny),
        *yg = th_falloc(ny), *pg = th_falloc(ny);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -0.5f, 0.5f);
  th_fill(&g_rng, b, N, -1, 1);
  const ot_dtype wdt = g_w32 ? OT_F32 : dt;
  th_round_dt(dt, x, nx); if (wdt == dt) th_round_dt(dt, w, nw);
  ot_ref_linear_fwd(yr, pr, x, w, bias ? b : NULL, M, N, K, act);
  void *xd = th_to_dt(dt, x, nx), *wd = th_to_dt(wdt, w, nw), *yd = th_to_dt(dt, yg, ny), *pd = th_to_dt(dt, pg, ny);
  ot_status st = ot_linear_fwd_w(dt, wdt, yd, keep_pre ? pd : NULL, xd, wd, bias ? b : NULL, M, N, K, act);
  th_check(st == OT_OK, "[%s] linear_fwd ok (%s)", isa, ot_last_error());
  th_from_dt(dt, yd, yg, ny);
  th_from_dt(dt, pd, pg, ny);
  double tol = th_tol(dt, 2e-6, 6e-3);
  th_check_nerr(yg, yr, ny, tol, "[%s] linear_fwd %s (w %s) y M=%d N=%d K=%d bias=%d act=%d pre=%d", isa,
                ot_dtype_name(dt), ot_dtype_name(wdt), M, N, K, bias, act, keep_pre);
  if (keep_pre)
    th_check_nerr(pg, pr, ny, tol, "[%s] linear_fwd %s pre M=%d N=%d K=%d bias=%d", isa, ot_dtype_name(dt),
                  M, N, K, bias);
  free(x); free(w); free(b); free(yr); free(pr); free(yg); free(pg);
  free(xd); free(wd); free(yd); free(pd);
}

static void test_bwd(const char *isa, ot_dtype dt, shape s, ot_act act, bool want_dx, bool want_db) {
  int M = s.M, N = s.N, K = s.K;
  size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
  float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(N), *y = th_falloc(ny), *pre = th_falloc(ny),
        *dy = th_falloc(ny), *dyr = th_falloc(ny), *dyg = th_falloc(ny);
  float *dxr = th_falloc(nx), *dxg = th_falloc(nx), *dwr = th_falloc(nw), *dwg = th_falloc(nw),
        *dbr = th_falloc(N), *dbg = th_falloc(N);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -0.5f, 0.5f);
  th_fill(&g_rng, b, N, -1, 1);
  th_fill(&g_rng, dy, ny, -1, 1);
  th_fill(&g_rng, dwr, nw, -1, 1);   // accumulated into
  th_fill(&g_rng, dbr, N, -1, 1);
  const ot_dtype wdt = g_w32 ? OT_F32 : dt;
  th_round_dt(dt, x, nx); if (wdt == dt) th_round_dt(dt, w, nw); th_round_dt(dt, dy, ny);
  ot_ref_linear_fwd(y, pre, x, w, b, M, N, K, act);
  th_round_dt(dt, pre, ny);  // what the bf16 forward saved
  memcpy(dwg, dwr, nw * 4);
  memcpy(dbg, dbr, N * 4);
  float *db0 = th_falloc(N);
  memcpy(db0, dbr, N * 4);
  memcpy(dyr, dy, ny * 4);
  ot_ref_linear_bwd(dxr, dwr, dbr, dyr, pre, x, w, M, N, K, act);
  void *xd = th_to_dt(dt, x, nx), *wd = th_to_dt(wdt, w, nw), *dyd = th_to_dt(dt, dy, ny), *pd = th_to_dt(dt, pre, ny),
       *dxd = th_to_dt(dt, dxg, nx);
  ot_status st = ot_linear_bwd_w(dt, wdt, want_dx ? dxd : NULL, dwg, want_db ? dbg : NULL, dyd,
                                 act == OT_ACT_GELU ? pd : NULL, xd, want_dx ? wd : NULL, M, N, K, act);
  th_check(st == OT_OK, "[%s] linear_bwd ok (%s)", isa, ot_last_error());
  th_from_dt(dt, dxd, dxg, nx);
  th_from_dt(dt, dyd, dyg, ny);
  double tol = th_tol(dt, 2e-6, 6e-3), tolw = act == OT_ACT_GELU ? th_tol(dt, 2e-6, 1e-2) : 2e-6;
  const char *n = ot_dtype_name(dt);
  if (want_dx) th_check_nerr(dxg, dxr, nx, tol, "[%s] linear_bwd %s (w %s) dx M=%d N=%d K=%d act=%d", isa, n,
                             ot_dtype_name(wdt), M, N, K, act);
  // bf16 with GELU: dy*gelu'(pre) is stored in bf16 before the dw GEMM
  th_check_nerr(dwg, dwr, nw, tolw, "[%s] linear_bwd %s dw M=%d N=%d K=%d act=%d", isa, n, M, N, K, act);
  if (want_db) th_check_nerr(dbg, dbr, N, tolw, "[%s] linear_bwd %s db M=%d N=%d K=%d act=%d", isa, n, M, N, K, act);
  else th_check(memcmp(dbg, db0, N * 4) == 0, "[%s] linear_bwd db=NULL leaves db alone", isa);
  if (act == OT_ACT_GELU) th_check_nerr(dyg, dyr, ny, tol, "[%s] linear_bwd %s dy <- dpre", isa, n);
  free(x); free(w); free(b); free(y); free(pre); free(dy); free(dyr); free(dyg);
  free(dxr); free(dxg); free(dwr); free(dwg); free(dbr); free(dbg);
  free(xd); free(wd); free(dyd); free(pd); free(dxd); free(db0);
}

// ot_linear_dw_rows over chunks of `rows` equals the reference dw row for row, and
// ot_linear_bwd with dw = NULL gives the same dx as with it (dw untouched).
static void test_dw_rows(const char *isa, ot_dtype dt, shape s, int rows) {
  int M = s.M, N = s.N, K = s.K;
  size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
  float *x = th_falloc(nx), *w = th_falloc(nw), *dy = th_falloc(ny), *dwr = th_falloc(nw),
        *dwg = th_falloc(nw), *dxr = th_falloc(nx), *dx1 = th_falloc(nx), *dx2 = th_falloc(nx);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -0.5f, 0.5f);
  th_fill(&g_rng, dy, ny, -1, 1);
  th_round_dt(dt, x, nx); th_round_dt(dt, w, nw); th_round_dt(dt, dy, ny);
  memset(dwr, 0, nw * 4);
  ot_ref_linear_bwd(dxr, dwr, NULL, dy, NULL, x, w, M, N, K, OT_ACT_NONE);
  void *xd = th_to_dt(dt, x, nx), *wd = th_to_dt(dt, w, nw), *dyd = th_to_dt(dt, dy, ny), *d1 = th_to_dt(dt, dx1, nx),
       *d2 = th_to_dt(dt, dx2, nx);
  th_fill(&g_rng, dwg, nw, 5, 6);   // overwritten, not accumulated into
  bool ok = true;
  for (int r0 = 0; r0 < N && ok; r0 += rows)
    ok = ot_linear_dw_rows(dt, dwg + (size_t)r0 * K, dyd, xd, M, N, K, r0, r0 + rows < N ? rows : N - r0) == OT_OK;
  th_check(ok, "[%s] linear_dw_rows ok (%s)", isa, ot_last_error());
  const char *n = ot_dtype_name(dt);
  th_check_nerr(dwg, dwr, nw, 2e-6, "[%s] linear_dw_rows %s M=%d N=%d K=%d in chunks of %d rows", isa, n, M, N, K, rows);
  float *dw = th_falloc(nw);
  memset(dw, 0, nw * 4);
  th_check(ot_linear_bwd(dt, d1, dw, NULL, dyd, NULL, xd, wd, M, N, K, OT_ACT_NONE) == OT_OK &&
           ot_linear_bwd(dt, d2, NULL, NULL, dyd, NULL, xd, wd, M, N, K, OT_ACT_NONE) == OT_OK,
           "[%s] linear_bwd with and without dw ok (%s)", isa, ot_last_error());
  th_check(memcmp(d1, d2, nx * ot_dtype_size(dt)) == 0, "[%s] linear_bwd %s dw=NULL: the same dx", isa, n);
  th_from_dt(dt, d2, dx2, nx);
  th_check_nerr(dx2, dxr, nx, th_tol(dt, 2e-6, 6e-3), "[%s] linear_bwd %s dw=NULL: dx vs reference", isa, n);
  free(x); free(w); free(dy); free(dwr); free(dwg); free(dxr); free(dx1); free(dx2); free(dw);
  free(xd); free(wd); free(dyd); free(d1); free(d2);
}

// ---- finite differences: loss = sum(y * r), y = act(x w^T + b) ------------
typedef struct { int M, N, K; float *x, *w, *b, *y, *r; ot_act act; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_ref_linear_fwd(c->y, NULL, c->x, c->w, c->b, c->M, c->N, c->K, c->act);
  return th_dot(c->y, c->r, (size_t)c->M * c->N);
}

// Checks the reference backward, and the fast one (f32), against central
// differences of the reference forward.
static void test_fd(ot_act act) {
  fd_ctx c = {4, 5, 6, NULL, NULL, NULL, NULL, NULL, act};
  size_t nx = 24, nw = 30, ny = 20;
  c.x = th_falloc(nx); c.w = th_falloc(nw); c.b = th_falloc(5); c.y = th_falloc(ny); c.r = th_falloc(ny);
  th_fill(&g_rng, c.x, nx, -1.5f, 1.5f);
  th_fill(&g_rng, c.w, nw, -1, 1);
  th_fill(&g_rng, c.b, 5, -1, 1);
  th_fill(&g_rng, c.r, ny, -1, 1);
  float *pre = th_falloc(ny), *dy = th_falloc(ny), *dx = th_falloc(nx), *dw = th_falloc(nw), *db = th_falloc(5);
  float *fdx = th_falloc(nx), *fdw = th_falloc(nw), *fdb = th_falloc(5);
  ot_ref_linear_fwd(c.y, pre, c.x, c.w, c.b, c.M, c.N, c.K, act);
  memcpy(dy, c.r, ny * 4);
  ot_ref_linear_bwd(dx, dw, db, dy, pre, c.x, c.w, c.M, c.N, c.K, act);
  for (size_t i = 0; i < nx; i++) fdx[i] = (float)th_fd(c.x, i, 1e-2f, fd_loss, &c);
  for (size_t i = 0; i < nw; i++) fdw[i] = (float)th_fd(c.w, i, 1e-2f, fd_loss, &c);
  for (size_t i = 0; i < 5; i++) fdb[i] = (float)th_fd(c.b, i, 1e-2f, fd_loss, &c);
  th_check_nerr(dx, fdx, nx, 1e-3, "fd: ref linear dx act=%d", act);
  th_check_nerr(dw, fdw, nw, 1e-3, "fd: ref linear dw act=%d", act);
  th_check_nerr(db, fdb, 5, 1e-3, "fd: ref linear db act=%d", act);
  // the fast backward on the same data
  float *gdx = th_falloc(nx), *gdw = th_falloc(nw), *gdb = th_falloc(5);
  memcpy(dy, c.r, ny * 4);
  ot_status st = ot_linear_bwd(OT_F32, gdx, gdw, gdb, dy, pre, c.x, c.w, c.M, c.N, c.K, act);
  th_check(st == OT_OK, "fd: fast linear_bwd ok");
  th_check_nerr(gdx, fdx, nx, 1e-3, "fd: fast linear dx act=%d", act);
  th_check_nerr(gdw, fdw, nw, 1e-3, "fd: fast linear dw act=%d", act);
  th_check_nerr(gdb, fdb, 5, 1e-3, "fd: fast linear db act=%d", act);
  free(c.x); free(c.w); free(c.b); free(c.y); free(c.r); free(pre); free(dy); free(dx); free(dw); free(db);
  free(fdx); free(fdw); free(fdb); free(gdx); free(gdw); free(gdb);
}

// Warm-up then the same calls again: no new primitive; outputs bitwise equal.
static void test_reuse_and_determinism(void) {
  int M = 70, N = 90, K = 50;
  size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
  float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(N), *y1 = th_falloc(ny), *y2 = th_falloc(ny),
        *pre = th_falloc(ny), *dy = th_falloc(ny), *dy2 = th_falloc(ny), *dx1 = th_falloc(nx), *dx2 = th_falloc(nx),
        *dw1 = th_falloc(nw), *dw2 = th_falloc(nw), *db1 = th_falloc(N), *db2 = th_falloc(N);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -1, 1);
  th_fill(&g_rng, b, N, -1, 1);
  th_fill(&g_rng, dy, ny, -1, 1);
  memcpy(dy2, dy, ny * 4);
  ot_linear_fwd(OT_F32, y1, pre, x, w, b, M, N, K, OT_ACT_GELU);
  ot_linear_bwd(OT_F32, dx1, dw1, db1, dy, pre, x, w, M, N, K, OT_ACT_GELU);
  int n0 = ot_gemm_cache_size();
  ot_linear_fwd(OT_F32, y2, pre, x, w, b, M, N, K, OT_ACT_GELU);
  ot_linear_bwd(OT_F32, dx2, dw2, db2, dy2, pre, x, w, M, N, K, OT_ACT_GELU);
  th_check(ot_gemm_cache_size() == n0, "linear fwd+bwd after warm-up create no primitive (%d -> %d)", n0,
           ot_gemm_cache_size());
  th_check(memcmp(y1, y2, ny * 4) == 0 && memcmp(dx1, dx2, nx * 4) == 0 && memcmp(dw1, dw2, nw * 4) == 0 &&
           memcmp(db1, db2, N * 4) == 0, "linear fwd+bwd bitwise repeatable");
  free(x); free(w); free(b); free(y1); free(y2); free(pre); free(dy); free(dy2); free(dx1); free(dx2);
  free(dw1); free(dw2); free(db1); free(db2);
}

static void test_bad_args(void) {
  float x[16] = {0}, w[16] = {0}, y[16] = {0}, p[16] = {0}, dw[16] = {0};
  th_check_error(ot_linear_fwd(OT_I8, y, NULL, x, w, NULL, 2, 2, 2, OT_ACT_NONE), OT_EINVAL, "i8", "i8 dtype");
  th_check_error(ot_linear_fwd(OT_F32, y, NULL, x, w, NULL, -3, 2, 2, OT_ACT_NONE), OT_EINVAL, "M=-3", "negative M");
  th_check_error(ot_linear_fwd(OT_F32, y, NULL, x, w, NULL, 2, 2, 0, OT_ACT_NONE), OT_EINVAL, "K=0", "zero K");
  th_check_error(ot_linear_fwd(OT_F32, y, NULL, NULL, w, NULL, 2, 2, 2, OT_ACT_NONE), OT_EINVAL, "'x' is NULL", "NULL x");
  th_check_error(ot_linear_fwd(OT_F32, y, NULL, x, w, NULL, 2, 2, 2, (ot_act)7), OT_EINVAL, "act=7", "bad act");
  th_check_error(ot_linear_fwd(OT_F32, y, y, x, w, NULL, 2, 2, 2, OT_ACT_GELU), OT_EINVAL, "alias", "pre == y");
  th_check_error(ot_linear_bwd(OT_F32, x, dw, NULL, y, NULL, x, w, 2, 2, 2, OT_ACT_GELU), OT_EINVAL, "needs pre",
                 "GELU backward without pre");
  th_check_error(ot_linear_bwd(OT_F32, x, NULL, NULL, NULL, p, x, w, 2, 2, 2, OT_ACT_NONE), OT_EINVAL, "'dy' is NULL",
                 "NULL dy");
  th_check_error(ot_linear_dw_rows(OT_F32, dw, y, x, 2, 2, 2, 1, 2), OT_EINVAL, "rows [1, 3) outside the 2 output rows",
                 "dw rows past the end");
  th_check_error(ot_linear_dw_rows(OT_F32, NULL, y, x, 2, 2, 2, 0, 1), OT_EINVAL, "'dw' is NULL", "dw_rows NULL dw");
  th_check_error(ot_linear_bwd(OT_F32, x, dw, NULL, y, p, x, NULL, 2, 2, 2, OT_ACT_NONE), OT_EINVAL, "'w' is NULL",
                 "NULL w with dx");
  th_check(ot_linear_bwd(OT_F32, NULL, dw, NULL, y, p, x, NULL, 2, 2, 2, OT_ACT_NONE) == OT_OK,
           "w may be NULL when dx is skipped");
}

int main(void) {
  test_fd(OT_ACT_NONE);
  test_fd(OT_ACT_GELU);
  ot_isa isas[OT_ISA_COUNT];
  int n = th_isas(isas);
  for (int i = 0; i < n; i++) {
    ot_isa_force(isas[i]);
    const char *isa = ot_isa_name(isas[i]);
    for (int d = 0; d < TH_NDT; d++) {
      ot_dtype dt = th_dts[d];
      for (int s = 0; s < NSHAPES; s++) {
        test_fwd(isa, dt, SHAPES[s], s & 1, OT_ACT_NONE, false);
        for (int fm = 0; fm < 2; fm++) {  // GELU without pre: separate pass, then fused epilogue
          ot__linear_set_gelu_fused(fm);
          test_fwd(isa, dt, SHAPES[s], !(s & 1), OT_ACT_GELU, false);
        }
        ot__linear_set_gelu_fused(-1);
        test_fwd(isa, dt, SHAPES[s], true, OT_ACT_GELU, true);
        test_bwd(isa, dt, SHAPES[s], OT_ACT_NONE, true, true);
        ot__gemm_ta_set_mode(0);   // dW through the matmul primitive (default: oneDNN sgemm)
        test_bwd(isa, dt, SHAPES[s], OT_ACT_NONE, true, true);
        ot__gemm_ta_set_mode(-1);
        test_bwd(isa, dt, SHAPES[s], OT_ACT_GELU, s & 1, !(s & 1));
        test_dw_rows(isa, dt, SHAPES[s], 1 + s * 7);
      }
    }
  }
  ot_isa_unforce();
  // bf16 activations with f32 weights, bf16 GEMMs native (mixed dtypes: the conversion path
  // anyway) and converted; and bf16 weights converted
  for (int mode = 1; mode >= 0; mode--)
    for (int w32 = mode; w32 >= 0; w32--) {
      ot__gemm_bf16_set_mode(mode);
      g_w32 = w32;
      const char *isa = mode ? (w32 ? "native request, f32 w" : "native") : (w32 ? "convert, f32 w" : "convert");
      for (int s = 0; s < NSHAPES; s++) {
        test_fwd(isa, OT_BF16, SHAPES[s], s & 1, OT_ACT_NONE, false);
        test_fwd(isa, OT_BF16, SHAPES[s], true, OT_ACT_GELU, s & 1);
        test_bwd(isa, OT_BF16, SHAPES[s], s & 1 ? OT_ACT_GELU : OT_ACT_NONE, true, true);
      }
    }
  g_w32 = false;
  ot__gemm_bf16_set_mode(-1);
  test_reuse_and_determinism();
  test_bad_args();
  ot_gemm_cache_clear();
  return th_finish();
}
