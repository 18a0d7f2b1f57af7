// ot_qkv_fwd/bwd against the references: multi-head, grouped-query (Hkv < Hq)
// and multi-query (Hkv = 1), odd C/D/T, bias or not, f32, bf16 and f16, every ISA;
// finite differences of the reference backward; the layout of one head
// checked by hand; primitive reuse; bad arguments.
#include "harness.h"
#include "ops/gemm_impl.h"

static th_rng g_rng = {0x9c7};
static bool g_w32;   // bf16 runs: the weights in f32 (ot_qkv_*_w with wdt = f32)

typedef struct { int B, T, C, Hq, Hkv, D; } qshape;
static const qshape SHAPES[] = {
    {1, 1, 1, 1, 1, 1},   {2, 3, 17, 2, 2, 3},   {1, 17, 65, 4, 2, 16}, {3, 5, 64, 4, 1, 17},
    {2, 65, 127, 6, 3, 8}, {1, 33, 96, 12, 12, 8}, {2, 16, 65, 8, 1, 65}};
#define NSHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])


static void test_fwd_bwd(const char *isa, ot_dtype dt, qshape s, bool bias) {
  int B = s.B, T = s.T, C = s.C, Hq = s.Hq, Hkv = s.Hkv, D = s.D, Nt = (Hq + 2 * Hkv) * D;
  size_t nx = (size_t)B * T * C, nw = (size_t)Nt * C, nq = (size_t)B * Hq * T * D, nk = (size_t)B * Hkv * T * D;
  float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(Nt);
  float *qr = th_falloc(nq), *kr = th_falloc(nk), *vr = th_falloc(nk), *qg = th_falloc(nq), *kg = th_falloc(nk),
        *vg = th_falloc(nk);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -0.5f, 0.5f);
  th_fill(&g_rng, b, Nt, -1, 1);
  const ot_dtype wdt = g_w32 ? OT_F32 : dt;
  th_round_dt(dt, x, nx); if (wdt == dt) th_round_dt(dt, w, nw);
  const char *n = g_w32 ? "bf16 (w f32)" : ot_dtype_name(dt);
  double tol = th_tol(dt, 2e-6, 6e-3);
  // forward
  ot_ref_qkv_fwd(qr, kr, vr, x, w, bias ? b : NULL, B, T, C, Hq, Hkv, D);
  void *xd = th_to_dt(dt, x, nx), *wd = th_to_dt(wdt, w, nw), *qd = th_to_dt(dt, qg, nq), *kd = th_to_dt(dt, kg, nk),
       *vd = th_to_dt(dt, vg, nk);
  ot_status st = ot_qkv_fwd_w(dt, wdt, qd, kd, vd, xd, wd, bias ? b : NULL, B, T, C, Hq, Hkv, D);
  th_check(st == OT_OK, "[%s] qkv_fwd ok (%s)", isa, ot_last_error());
  th_from_dt(dt, qd, qg, nq); th_from_dt(dt, kd, kg, nk); th_from_dt(dt, vd, vg, nk);
  th_check_nerr(qg, qr, nq, tol, "[%s] qkv_fwd %s q B=%d T=%d C=%d Hq=%d Hkv=%d D=%d bias=%d", isa, n, B, T, C, Hq, Hkv, D, bias);
  th_check_nerr(kg, kr, nk, tol, "[%s] qkv_fwd %s k B=%d T=%d C=%d Hq=%d Hkv=%d D=%d", isa, n, B, T, C, Hq, Hkv, D);
  th_check_nerr(vg, vr, nk, tol, "[%s] qkv_fwd %s v B=%d T=%d C=%d Hq=%d Hkv=%d D=%d", isa, n, B, T, C, Hq, Hkv, D);
  // backward
  float *dq = th_falloc(nq), *dk = th_falloc(nk), *dv = th_falloc(nk), *dxr = th_falloc(nx), *dxg = th_falloc(nx),
        *dwr = th_falloc(nw), *dwg = th_falloc(nw), *dbr = th_falloc(Nt), *dbg = th_falloc(Nt);
  th_fill(&g_rng, dq, nq, -1, 1);
  th_fill(&g_rng, dk, nk, -1, 1);
  th_fill(&g_rng, dv, nk, -1, 1);
  th_fill(&g_rng, dwr, nw, -1, 1);
  th_fill(&g_rng, dbr, Nt, -1, 1);
  th_round_dt(dt, dq, nq); th_round_dt(dt, dk, nk); th_round_dt(dt, dv, nk);
  memcpy(dwg, dwr, nw * 4);
  memcpy(dbg, dbr, Nt * 4);
  ot_ref_qkv_bwd(dxr, dwr, bias ? dbr : NULL, dq, dk, dv, x, w, B, T, C, Hq, Hkv, D);
  void *dqd = th_to_dt(dt, dq, nq), *dkd = th_to_dt(dt, dk, nk), *dvd = th_to_dt(dt, dv, nk), *dxd = th_to_dt(dt, dxg, nx);
  st = ot_qkv_bwd_w(dt, wdt, dxd, dwg, bias ? dbg : NULL, dqd, dkd, dvd, xd, wd, B, T, C, Hq, Hkv, D);
  th_check(st == OT_OK, "[%s] qkv_bwd ok (%s)", isa, ot_last_error());
  th_from_dt(dt, dxd, dxg, nx);
  th_check_nerr(dxg, dxr, nx, tol, "[%s] qkv_bwd %s dx B=%d T=%d C=%d Hq=%d Hkv=%d D=%d", isa, n, B, T, C, Hq, Hkv, D);
  th_check_nerr(dwg, dwr, nw, 2e-6, "[%s] qkv_bwd %s dw B=%d T=%d C=%d Hq=%d Hkv=%d D=%d", isa, n, B, T, C, Hq, Hkv, D);
  th_check_nerr(dbg, dbr, Nt, 2e-6, "[%s] qkv_bwd %s db B=%d T=%d C=%d Hq=%d Hkv=%d D=%d bias=%d", isa, n, B, T, C, Hq,
                Hkv, D, bias);
  free(x); free(w); free(b); free(qr); free(kr); free(vr); free(qg); free(kg); free(vg);
  free(xd); free(wd); free(qd); free(kd); free(vd);
  free(dq); free(dk); free(dv); free(dxr); free(dxg); free(dwr); free(dwg); free(dbr); free(dbg);
  free(dqd); free(dkd); free(dvd); free(dxd);
}

// The layout by hand: x = e_c (one-hot over C), w row n = n-th output
// feature; so q[b,h,t,d] must equal w[(h*D + d), c] for the one-hot column.
static void test_layout(void) {
  enum { B = 2, T = 3, C = 4, Hq = 4, Hkv = 2, D = 2, Nt = (Hq + 2 * Hkv) * D };
  float x[B * T * C] = {0}, w[Nt * C], q[B * Hq * T * D], k[B * Hkv * T * D], v[B * Hkv * T * D];
  for (int i = 0; i < B * T; i++) x[i * C + (i % C)] = 1.0f;     // row i picks column i % C
  for (int n = 0; n < Nt; n++) for (int c = 0; c < C; c++) w[n * C + c] = (float)(100 * c + n);
  ot_status s = ot_qkv_fwd(OT_F32, q, k, v, x, w, NULL, B, T, C, Hq, Hkv, D);
  th_check(s == OT_OK, "layout: qkv_fwd ok");
  bool ok = true;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      int c = (b * T + t) % C;
      for (int d = 0; d < D; d++) {
        for (int h = 0; h < Hq; h++) ok &= q[((b * Hq + h) * T + t) * D + d] == 100 * c + h * D + d;
        for (int h = 0; h < Hkv; h++) {
          ok &= k[((b * Hkv + h) * T + t) * D + d] == 100 * c + (Hq + h) * D + d;
          ok &= v[((b * Hkv + h) * T + t) * D + d] == 100 * c + (Hq + Hkv + h) * D + d;
        }
      }
    }
  th_check(ok, "layout: q heads, then k heads, then v heads, each [B, H, T, D]");
}

// ---- finite differences of the reference: loss = <q,rq> + <k,rk> + <v,rv> --
typedef struct { qshape s; float *x, *w, *b, *q, *k, *v, *rq, *rk, *rv; size_t nq, nk; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_ref_qkv_fwd(c->q, c->k, c->v, c->x, c->w, c->b, c->s.B, c->s.T, c->s.C, c->s.Hq, c->s.Hkv, c->s.D);
  return th_dot(c->q, c->rq, c->nq) + th_dot(c->k, c->rk, c->nk) + th_dot(c->v, c->rv, c->nk);
}

static void test_fd(void) {
  fd_ctx c;
  memset(&c, 0, sizeof c);
  c.s = (qshape){2, 3, 5, 2, 1, 2};
  int Nt = (c.s.Hq + 2 * c.s.Hkv) * c.s.D;
  size_t nx = (size_t)c.s.B * c.s.T * c.s.C, nw = (size_t)Nt * c.s.C;
  c.nq = (size_t)c.s.B * c.s.Hq * c.s.T * c.s.D; c.nk = (size_t)c.s.B * c.s.Hkv * c.s.T * c.s.D;
  c.x = th_falloc(nx); c.w = th_falloc(nw); c.b = th_falloc(Nt);
  c.q = th_falloc(c.nq); c.k = th_falloc(c.nk); c.v = th_falloc(c.nk);
  c.rq = th_falloc(c.nq); c.rk = th_falloc(c.nk); c.rv = th_falloc(c.nk);
  th_fill(&g_rng, c.x, nx, -1, 1); th_fill(&g_rng, c.w, nw, -1, 1); th_fill(&g_rng, c.b, Nt, -1, 1);
  th_fill(&g_rng, c.rq, c.nq, -1, 1); th_fill(&g_rng, c.rk, c.nk, -1, 1); th_fill(&g_rng, c.rv, c.nk, -1, 1);
  float *dx = th_falloc(nx), *dw = th_falloc(nw), *db = th_falloc(Nt), *gx = th_falloc(nx), *gw = th_falloc(nw),
        *gb = th_falloc(Nt), *fx = th_falloc(nx), *fw = th_falloc(nw), *fb = th_falloc(Nt);
  ot_ref_qkv_bwd(dx, dw, db, c.rq, c.rk, c.rv, c.x, c.w, c.s.B, c.s.T, c.s.C, c.s.Hq, c.s.Hkv, c.s.D);
  ot_status st = ot_qkv_bwd(OT_F32, gx, gw, gb, c.rq, c.rk, c.rv, c.x, c.w, c.s.B, c.s.T, c.s.C, c.s.Hq, c.s.Hkv, c.s.D);
  th_check(st == OT_OK, "fd: fast qkv_bwd ok");
  for (size_t i = 0; i < nx; i++) fx[i] = (float)th_fd(c.x, i, 1e-2f, fd_loss, &c);
  for (size_t i = 0; i < nw; i++) fw[i] = (float)th_fd(c.w, i, 1e-2f, fd_loss, &c);
  for (int i = 0; i < Nt; i++) fb[i] = (float)th_fd(c.b, i, 1e-2f, fd_loss, &c);
  th_check_nerr(dx, fx, nx, 3e-4, "fd: ref qkv dx");
  th_check_nerr(dw, fw, nw, 3e-4, "fd: ref qkv dw");
  th_check_nerr(db, fb, Nt, 3e-4, "fd: ref qkv db");
  th_check_nerr(gx, fx, nx, 3e-4, "fd: fast qkv dx");
  th_check_nerr(gw, fw, nw, 3e-4, "fd: fast qkv dw");
  th_check_nerr(gb, fb, Nt, 3e-4, "fd: fast qkv db");
  free(c.x); free(c.w); free(c.b); free(c.q); free(c.k); free(c.v); free(c.rq); free(c.rk); free(c.rv);
  free(dx); free(dw); free(db); free(gx); free(gw); free(gb); free(fx); free(fw); free(fb);
}

static void test_reuse(void) {
  qshape s = {2, 20, 48, 4, 2, 8};
  int Nt = (s.Hq + 2 * s.Hkv) * s.D;
  size_t nx = (size_t)s.B * s.T * s.C, nw = (size_t)Nt * s.C, nq = (size_t)s.B * s.Hq * s.T * s.D,
         nk = (size_t)s.B * s.Hkv * s.T * s.D;
  float *x = th_falloc(nx), *w = th_falloc(nw), *b = th_falloc(Nt), *q = th_falloc(nq), *k = th_falloc(nk),
        *v = th_falloc(nk), *dx = th_falloc(nx), *dw = th_falloc(nw), *db = th_falloc(Nt);
  th_fill(&g_rng, x, nx, -1, 1);
  th_fill(&g_rng, w, nw, -1, 1);
  for (int r = 0; r < 2; r++) {
    int n0 = ot_gemm_cache_size();
    ot_qkv_fwd(OT_F32, q, k, v, x, w, b, s.B, s.T, s.C, s.Hq, s.Hkv, s.D);
    ot_qkv_bwd(OT_F32, dx, dw, db, q, k, v, x, w, s.B, s.T, s.C, s.Hq, s.Hkv, s.D);
    if (r == 1) th_check(ot_gemm_cache_size() == n0, "qkv fwd+bwd after warm-up create no primitive");
  }
  free(x); free(w); free(b); free(q); free(k); free(v); free(dx); free(dw); free(db);
}

static void test_bad_args(void) {
  float a[256] = {0}, dw[256] = {0};
  th_check_error(ot_qkv_fwd(OT_F32, a, a, a, a, a, NULL, 1, 2, 4, 3, 2, 2), OT_EINVAL, "Hq=3 must be a multiple of Hkv=2",
                 "Hq not a multiple of Hkv");
  th_check_error(ot_qkv_fwd(OT_F32, a, a, a, a, a, NULL, 1, 2, 4, 2, 4, 2), OT_EINVAL, "Hq=2 must be a multiple of Hkv=4",
                 "Hkv > Hq");
  th_check_error(ot_qkv_fwd(OT_F32, a, a, a, a, a, NULL, 1, 2, 4, 2, 1, 0), OT_EINVAL, "D=0", "D=0");
  th_check_error(ot_qkv_fwd(OT_F32, a, a, a, a, a, NULL, -1, 2, 4, 2, 1, 2), OT_EINVAL, "B=-1", "negative B");
  th_check_error(ot_qkv_fwd(OT_F32, a, NULL, a, a, a, NULL, 1, 2, 4, 2, 1, 2), OT_EINVAL, "'k' is NULL", "NULL k");
  th_check_error(ot_qkv_fwd(OT_I8, a, a, a, a, a, NULL, 1, 2, 4, 2, 1, 2), OT_EINVAL, "i8", "i8 dtype");
  th_check_error(ot_qkv_bwd(OT_F32, a, dw, NULL, a, a, a, a, a, 1, 2, 4, 6, 4, 2), OT_EINVAL, "multiple of Hkv=4",
                 "bwd Hq not a multiple of Hkv");
  th_check_error(ot_qkv_bwd(OT_F32, a, NULL, NULL, a, a, a, a, a, 1, 2, 4, 2, 1, 2), OT_EINVAL, "'dw' is NULL", "NULL dw");
  th_check_error(ot_qkv_bwd(OT_F32, a, dw, NULL, a, a, NULL, a, a, 1, 2, 4, 2, 1, 2), OT_EINVAL, "'dv' is NULL", "NULL dv");
}

int main(void) {
  test_layout();
  test_fd();
  ot_isa isas[OT_ISA_COUNT];
  int n = th_isas(isas);
  for (int i = 0; i < n; i++) {
    ot_isa_force(isas[i]);
    for (int d = 0; d < TH_NDT; d++)
      for (int s = 0; s < NSHAPES; s++)
        test_fwd_bwd(ot_isa_name(isas[i]), th_dts[d], SHAPES[s], (s & 1) == 0);
  }
  ot_isa_unforce();
  for (int mode = 1; mode >= 0; mode--)   // bf16 GEMMs native / converted, bf16 or f32 weights
    for (int w32 = 0; w32 < 2; w32++) {
      ot__gemm_bf16_set_mode(mode);
      g_w32 = w32;
      for (int s = 0; s < NSHAPES; s++)
        test_fwd_bwd(mode ? "native" : "convert", OT_BF16, SHAPES[s], (s & 1) == 0);
    }
  g_w32 = false;
  ot__gemm_bf16_set_mode(-1);
  test_reuse();
  test_bad_args();
  ot_gemm_cache_clear();
  return th_finish();
}
