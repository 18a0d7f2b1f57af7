// Residual + LayerNorm / RMSNorm: fast kernels (every ISA this CPU runs, f32
// and bf16 storage) against the scalar reference over odd shapes, with and
// without r / beta / dres; the reference backward against central finite
// differences; dx aliasing dres; res_out when r is NULL; bitwise determinism;
// argument errors.
#include "harness.h"
#include "internal.h"

static th_rng g_rng = {20240611u}, g_rng16 = {16u};  // f16 cases: their own stream


static void fill_act(float *x, size_t n, float offset, ot_dtype dt) {
  th_fill_normal(&g_rng, x, n, 1.0f);
  for (size_t i = 0; i < n; i++) x[i] += offset;
  th_round_dt(dt, x, n);
}

// ---------------------------------------------------------------- forward --
// res_mode (r == NULL only): 0 res_out NULL, 1 res_out given (must equal x).
static void check_fwd(const char *isa, ot_dtype dt, int rms, int N, int C, int use_r, int use_beta,
                      int res_mode) {
  const size_t n = (size_t)N * C;
  float *x = th_falloc(n), *r = th_falloc(n), *g = th_falloc(C), *beta = th_falloc(C);
  fill_act(x, n, 0.7f, dt);
  fill_act(r, n, -0.2f, dt);
  th_fill(&g_rng, g, C, 0.5f, 1.5f);
  th_fill(&g_rng, beta, C, -0.3f, 0.3f);
  float *ry = th_falloc(n), *rres = th_falloc(n), *rm = th_falloc(N), *rs = th_falloc(N);
  const float eps = 1e-5f;
  const bool want_res = use_r || res_mode == 1;
  if (rms) ot_ref_rmsnorm_fwd(ry, rs, rres, x, use_r ? r : NULL, g, N, C, eps);
  else ot_ref_layernorm_fwd(ry, rm, rs, rres, x, use_r ? r : NULL, g, use_beta ? beta : NULL, N, C, eps);

  void *dx_ = th_to_dt(dt, x, n), *dr_ = th_to_dt(dt, r, n);
  void *dy_ = th_to_dt(dt, ry, n), *dres_ = th_to_dt(dt, ry, n);  // garbage-filled outputs
  float *fm = th_falloc(N), *fs = th_falloc(N), *fy = th_falloc(n), *fres = th_falloc(n);
  ot_status st;
  if (rms)
    st = ot_rmsnorm_fwd(dt, dy_, fs, want_res ? dres_ : NULL, dx_, use_r ? dr_ : NULL, g, N, C, eps);
  else
    st = ot_layernorm_fwd(dt, dy_, fm, fs, want_res ? dres_ : NULL, dx_, use_r ? dr_ : NULL, g,
                          use_beta ? beta : NULL, N, C, eps);
  th_from_dt(dt, dy_, fy, n);
  th_from_dt(dt, dres_, fres, n);
  const char *nm = rms ? "rmsnorm" : "layernorm";
  const double ty = th_tol(dt, 2e-6, 1e-2), ts = th_tol(dt, 3e-6, 1e-2);
  th_check(st == OT_OK, "%s %s fwd [%s] N=%d C=%d: status %s (%s)", nm, ot_dtype_name(dt), isa, N,
           C, ot_status_name(st), ot_last_error());
  th_check_nerr(fy, ry, n, ty, "%s %s fwd y [%s] N=%d C=%d r=%d beta=%d", nm, ot_dtype_name(dt), isa,
                N, C, use_r, use_beta);
  th_check_nerr(fs, rs, N, ts, "%s %s fwd rstd [%s] N=%d C=%d r=%d", nm, ot_dtype_name(dt), isa, N,
                C, use_r);
  if (!rms)
    th_check_nerr(fm, rm, N, ts, "%s %s fwd mean [%s] N=%d C=%d r=%d", nm, ot_dtype_name(dt), isa, N,
                  C, use_r);
  if (use_r)  // x + r in f32 is exact in both; bf16 rounds once
    th_check_nerr(fres, rres, n, th_tol(dt, 0.0, 4e-3), "%s %s fwd res_out [%s] N=%d C=%d", nm,
                  ot_dtype_name(dt), isa, N, C);
  else if (res_mode == 1)
    th_check(memcmp(dres_, dx_, n * ot_dtype_size(dt)) == 0,
             "%s %s fwd res_out == x when r is NULL [%s] N=%d C=%d", nm, ot_dtype_name(dt), isa, N, C);
  free(x); free(r); free(g); free(beta); free(ry); free(rres); free(rm); free(rs);
  free(dx_); free(dr_); free(dy_); free(dres_); free(fm); free(fs); free(fy); free(fres);
}

// --------------------------------------------------------------- backward --
static void check_bwd(const char *isa, ot_dtype dt, int rms, int N, int C, int use_dres,
                      int use_dbeta) {
  const size_t n = (size_t)N * C;
  float *res = th_falloc(n), *dy = th_falloc(n), *dres = th_falloc(n), *g = th_falloc(C);
  float *y = th_falloc(n), *mean = th_falloc(N), *rstd = th_falloc(N);
  fill_act(res, n, 0.5f, dt);
  fill_act(dy, n, 0.0f, dt);
  fill_act(dres, n, 0.1f, dt);
  th_fill(&g_rng, g, C, 0.5f, 1.5f);
  if (rms) ot_ref_rmsnorm_fwd(y, rstd, NULL, res, NULL, g, N, C, 1e-5f);
  else ot_ref_layernorm_fwd(y, mean, rstd, NULL, res, NULL, g, NULL, N, C, 1e-5f);
  // parameter gradients start from small nonzero values: the ops accumulate
  float *rdg = th_falloc(C), *rdb = th_falloc(C), *fdg = th_falloc(C), *fdb = th_falloc(C);
  th_fill(&g_rng, rdg, C, -0.05f, 0.05f);
  th_fill(&g_rng, rdb, C, -0.05f, 0.05f);
  memcpy(fdg, rdg, C * 4); memcpy(fdb, rdb, C * 4);
  float *rdx = th_falloc(n), *fdx = th_falloc(n);
  if (rms) ot_ref_rmsnorm_bwd(rdx, rdg, dy, use_dres ? dres : NULL, res, rstd, g, N, C);
  else ot_ref_layernorm_bwd(rdx, rdg, use_dbeta ? rdb : NULL, dy, use_dres ? dres : NULL, res, mean,
                            rstd, g, N, C);
  void *res_ = th_to_dt(dt, res, n), *dy_ = th_to_dt(dt, dy, n), *dres_ = th_to_dt(dt, dres, n);
  void *dx_ = th_to_dt(dt, y, n);
  ot_status st = rms ? ot_rmsnorm_bwd(dt, dx_, fdg, dy_, use_dres ? dres_ : NULL, res_, rstd, g, N, C)
                     : ot_layernorm_bwd(dt, dx_, fdg, use_dbeta ? fdb : NULL, dy_,
                                        use_dres ? dres_ : NULL, res_, mean, rstd, g, N, C);
  th_from_dt(dt, dx_, fdx, n);
  const char *nm = rms ? "rmsnorm" : "layernorm", *dn = ot_dtype_name(dt);
  th_check(st == OT_OK, "%s %s bwd [%s] N=%d C=%d: status %s (%s)", nm, dn, isa, N, C,
           ot_status_name(st), ot_last_error());
  if (C > 1) {
    th_check_nerr(fdx, rdx, n, th_tol(dt, 3e-6, 1e-2), "%s %s bwd dx [%s] N=%d C=%d dres=%d", nm, dn, isa,
                  N, C, use_dres);
  } else {
    // C = 1: dx is a difference of nearly equal terms (exactly 0 for LayerNorm),
    // so measure the error against the size of those terms instead.
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
      double sc = fabs((double)rstd[i] * dy[i] * g[0]) + (use_dres ? fabs(dres[i]) : 0.0);
      num += ((double)fdx[i] - rdx[i]) * ((double)fdx[i] - rdx[i]);
      den += sc * sc;
    }
    double e = sqrt(num) / fmax(sqrt(den), 1e-30);
    th_check(e <= (th_tol(dt, 1e-5, 1e-2)), "%s %s bwd dx [%s] N=%d C=1 dres=%d: error %.3g of the term scale",
             nm, dn, isa, N, use_dres, e);
  }
  // dg/dbeta accumulate in f32 from the same (bf16-exact) inputs in both dtypes
  th_check_nerr(fdg, rdg, C, 1e-5, "%s %s bwd dg [%s] N=%d C=%d", nm, dn, isa, N, C);
  if (!rms)
    th_check_nerr(fdb, rdb, C, 1e-5, "%s %s bwd dbeta [%s] N=%d C=%d dbeta=%d", nm, dn, isa, N, C,
                  use_dbeta);

  // dx aliasing dres: same bits as the separate buffer
  if (use_dres) {
    void *alias = th_to_dt(dt, dres, n);
    memcpy(fdg, rdg, C * 4);
    st = rms ? ot_rmsnorm_bwd(dt, alias, fdg, dy_, alias, res_, rstd, g, N, C)
             : ot_layernorm_bwd(dt, alias, fdg, NULL, dy_, alias, res_, mean, rstd, g, N, C);
    th_check(st == OT_OK && memcmp(alias, dx_, n * ot_dtype_size(dt)) == 0,
             "%s %s bwd dx aliasing dres [%s] N=%d C=%d", nm, dn, isa, N, C);
    free(alias);
  }
  free(res); free(dy); free(dres); free(g); free(y); free(mean); free(rstd);
  free(rdg); free(rdb); free(fdg); free(fdb); free(rdx); free(fdx);
  free(res_); free(dy_); free(dres_); free(dx_);
}

// ----------------------------------------------- finite differences (ref) --
// loss = sum(y * wy) + sum(res * wr): dy = wy, dres = wr, and dx is the
// gradient of both x and r.
typedef struct {
  int rms, N, C;
  float *x, *r, *g, *beta, *wy, *wr, *y, *res, *mean, *rstd;
} fd_ctx;

static double fd_loss(void *p) {
  fd_ctx *c = p;
  const size_t n = (size_t)c->N * c->C;
  if (c->rms) ot_ref_rmsnorm_fwd(c->y, c->rstd, c->res, c->x, c->r, c->g, c->N, c->C, 1e-5f);
  else ot_ref_layernorm_fwd(c->y, c->mean, c->rstd, c->res, c->x, c->r, c->g, c->beta, c->N, c->C, 1e-5f);
  return th_dot(c->y, c->wy, n) + th_dot(c->res, c->wr, n);
}

static void check_fd(int rms, int N, int C) {
  const size_t n = (size_t)N * C;
  fd_ctx c = {rms, N, C, th_falloc(n), th_falloc(n), th_falloc(C), th_falloc(C), th_falloc(n),
              th_falloc(n), th_falloc(n), th_falloc(n), th_falloc(N), th_falloc(N)};
  fill_act(c.x, n, 0.4f, OT_F32);
  fill_act(c.r, n, 0.0f, OT_F32);
  th_fill(&g_rng, c.g, C, 0.5f, 1.5f);
  th_fill(&g_rng, c.beta, C, -0.5f, 0.5f);
  th_fill(&g_rng, c.wy, n, -1.0f, 1.0f);
  th_fill(&g_rng, c.wr, n, -1.0f, 1.0f);
  fd_loss(&c);  // res, mean, rstd of the unperturbed inputs
  float *dx = th_falloc(n), *dg = th_falloc(C), *db = th_falloc(C);
  if (rms) ot_ref_rmsnorm_bwd(dx, dg, c.wy, c.wr, c.res, c.rstd, c.g, N, C);
  else ot_ref_layernorm_bwd(dx, dg, db, c.wy, c.wr, c.res, c.mean, c.rstd, c.g, N, C);
  float *fx = th_falloc(n), *fr = th_falloc(n), *fg = th_falloc(C), *fb = th_falloc(C);
  const float h = 1e-2f;
  for (size_t i = 0; i < n; i++) {
    fx[i] = (float)th_fd(c.x, i, h, fd_loss, &c);
    fr[i] = (float)th_fd(c.r, i, h, fd_loss, &c);
  }
  for (int i = 0; i < C; i++) {
    fg[i] = (float)th_fd(c.g, i, h, fd_loss, &c);
    if (!rms) fb[i] = (float)th_fd(c.beta, i, h, fd_loss, &c);
  }
  const char *nm = rms ? "rmsnorm" : "layernorm";
  th_check_nerr(dx, fx, n, 1e-4, "%s ref bwd vs FD: dx N=%d C=%d", nm, N, C);
  th_check_nerr(dx, fr, n, 1e-4, "%s ref bwd vs FD: dr N=%d C=%d", nm, N, C);
  th_check_nerr(dg, fg, C, 1e-4, "%s ref bwd vs FD: dg N=%d C=%d", nm, N, C);
  if (!rms) th_check_nerr(db, fb, C, 1e-4, "%s ref bwd vs FD: dbeta N=%d C=%d", nm, N, C);
  free(c.x); free(c.r); free(c.g); free(c.beta); free(c.wy); free(c.wr); free(c.y); free(c.res);
  free(c.mean); free(c.rstd); free(dx); free(dg); free(db); free(fx); free(fr); free(fg); free(fb);
}

// ------------------------------------------------------------ determinism --
static void check_determinism(const char *isa, ot_dtype dt, int rms) {
  const int N = 256, C = 768;
  const size_t n = (size_t)N * C, es = ot_dtype_size(dt);
  float *x = th_falloc(n), *r = th_falloc(n), *dy = th_falloc(n), *g = th_falloc(C), *b = th_falloc(C);
  fill_act(x, n, 0.3f, dt); fill_act(r, n, 0.0f, dt); fill_act(dy, n, 0.0f, dt);
  th_fill(&g_rng, g, C, 0.5f, 1.5f); th_fill(&g_rng, b, C, -0.5f, 0.5f);
  void *x_ = th_to_dt(dt, x, n), *r_ = th_to_dt(dt, r, n), *dy_ = th_to_dt(dt, dy, n);
  void *y[2], *res[2], *dx[2];
  float *m[2], *s[2], *dg[2], *db[2];
  for (int k = 0; k < 2; k++) {
    y[k] = th_alloc(n * es); res[k] = th_alloc(n * es); dx[k] = th_alloc(n * es);
    m[k] = th_falloc(N); s[k] = th_falloc(N); dg[k] = th_falloc(C); db[k] = th_falloc(C);
    if (rms) {
      ot_rmsnorm_fwd(dt, y[k], s[k], res[k], x_, r_, g, N, C, 1e-5f);
      ot_rmsnorm_bwd(dt, dx[k], dg[k], dy_, r_, res[k], s[k], g, N, C);
    } else {
      ot_layernorm_fwd(dt, y[k], m[k], s[k], res[k], x_, r_, g, b, N, C, 1e-5f);
      ot_layernorm_bwd(dt, dx[k], dg[k], db[k], dy_, r_, res[k], m[k], s[k], g, N, C);
    }
  }
  bool same = memcmp(y[0], y[1], n * es) == 0 && memcmp(res[0], res[1], n * es) == 0 &&
              memcmp(dx[0], dx[1], n * es) == 0 && memcmp(s[0], s[1], N * 4) == 0 &&
              memcmp(m[0], m[1], N * 4) == 0 && memcmp(dg[0], dg[1], C * 4) == 0 &&
              memcmp(db[0], db[1], C * 4) == 0;
  th_check(same, "%s %s [%s] N=%d C=%d: two runs bitwise equal (%d threads)",
           rms ? "rmsnorm" : "layernorm", ot_dtype_name(dt), isa, N, C, ot_threads_get());
  for (int k = 0; k < 2; k++) { free(y[k]); free(res[k]); free(dx[k]); free(m[k]); free(s[k]); free(dg[k]); free(db[k]); }
  free(x); free(r); free(dy); free(g); free(b); free(x_); free(r_); free(dy_);
}

// ----------------------------------------------------------------- errors --
static void check_errors(void) {
  float a[8] = {0}, b[8] = {0}, g[4] = {1, 1, 1, 1}, m[2], s[2], dg[4];
  th_check_error(ot_layernorm_fwd(OT_F32, NULL, m, s, NULL, a, NULL, g, NULL, 2, 4, 1e-5f),
                 OT_EINVAL, "'y' is NULL", "layernorm fwd y NULL");
  th_check_error(ot_layernorm_fwd(OT_F32, b, NULL, s, NULL, a, NULL, g, NULL, 2, 4, 1e-5f),
                 OT_EINVAL, "'mean' is NULL", "layernorm fwd mean NULL");
  th_check_error(ot_layernorm_fwd(OT_F32, b, m, s, NULL, a, NULL, NULL, NULL, 2, 4, 1e-5f),
                 OT_EINVAL, "'g' is NULL", "layernorm fwd g NULL");
  th_check_error(ot_layernorm_fwd(OT_F32, b, m, s, NULL, a, b, g, NULL, 2, 4, 1e-5f),
                 OT_EINVAL, "res_out", "layernorm fwd r without res_out");
  th_check_error(ot_layernorm_fwd(OT_F32, b, m, s, NULL, a, NULL, g, NULL, 0, 4, 1e-5f),
                 OT_EINVAL, "N=0", "layernorm fwd N=0");
  th_check_error(ot_rmsnorm_fwd(OT_F32, b, s, NULL, a, NULL, g, 2, -3, 1e-5f),
                 OT_EINVAL, "C=-3", "rmsnorm fwd C<0");
  th_check_error(ot_layernorm_fwd(OT_F32, b, m, s, NULL, a, NULL, g, NULL, 2, 4, 0.0f),
                 OT_EINVAL, "eps=0", "layernorm fwd eps=0");
  th_check_error(ot_rmsnorm_fwd(OT_F32, b, s, NULL, a, NULL, g, 2, 4, NAN),
                 OT_EINVAL, "eps=nan", "rmsnorm fwd eps=NaN");
  th_check_error(ot_rmsnorm_fwd(OT_F32, b, s, NULL, a, NULL, g, 2, 4, INFINITY),
                 OT_EINVAL, "eps=inf", "rmsnorm fwd eps=inf");
  th_check_error(ot_layernorm_fwd(OT_I32, b, m, s, NULL, a, NULL, g, NULL, 2, 4, 1e-5f),
                 OT_EINVAL, "i32", "layernorm fwd dtype i32");
  th_check_error(ot_layernorm_bwd(OT_F32, NULL, dg, NULL, a, NULL, b, m, s, g, 2, 4),
                 OT_EINVAL, "'dx' is NULL", "layernorm bwd dx NULL");
  th_check_error(ot_layernorm_bwd(OT_F32, b, dg, NULL, a, NULL, b, NULL, s, g, 2, 4),
                 OT_EINVAL, "'mean' is NULL", "layernorm bwd mean NULL");
  th_check_error(ot_layernorm_bwd(OT_I8, b, dg, NULL, a, NULL, b, m, s, g, 2, 4),
                 OT_EINVAL, "i8", "layernorm bwd dtype i8");
  th_check_error(ot_rmsnorm_bwd(OT_F32, b, NULL, a, NULL, b, s, g, 2, 4),
                 OT_EINVAL, "'dg' is NULL", "rmsnorm bwd dg NULL");
  th_check_error(ot_rmsnorm_bwd(OT_F32, b, dg, a, NULL, NULL, s, g, 2, 4),
                 OT_EINVAL, "'res' is NULL", "rmsnorm bwd res NULL");
  th_check_error(ot_rmsnorm_bwd(OT_F32, b, dg, a, NULL, b, s, g, 2, 0),
                 OT_EINVAL, "C=0", "rmsnorm bwd C=0");
}

int main(void) {
  static const int Ns[] = {1, 3, 17, 64}, Cs[] = {1, 3, 17, 64, 65, 127, 768, 769};
  static const int extra[][2] = {{301, 65}, {129, 768}, {5, 4099}};
  ot_isa isas[OT_ISA_COUNT];
  int nisa = th_isas(isas);
  for (int k = 0; k < nisa; k++) {
    th_check(ot_isa_force(isas[k]) == OT_OK, "force %s", ot_isa_name(isas[k]));
    const char *isa = ot_isa_name(isas[k]);
    for (int d = 0; d < TH_NDT; d++) {
      ot_dtype dt = th_dts[d];
      const th_rng keep = g_rng;   // the f32 / bf16 cases keep the inputs they had before f16
      if (dt == OT_F16) g_rng = g_rng16;
      for (int rms = 0; rms < 2; rms++) {
        for (size_t i = 0; i < sizeof Ns / sizeof *Ns + sizeof extra / sizeof *extra; i++)
          for (size_t j = 0; j < sizeof Cs / sizeof *Cs; j++) {
            int N, C;
            if (i < sizeof Ns / sizeof *Ns) { N = Ns[i]; C = Cs[j]; }
            else if (j == 0) { N = extra[i - 4][0]; C = extra[i - 4][1]; }
            else continue;
            const int v = (int)(i + j);  // vary the optional arguments over shapes
            check_fwd(isa, dt, rms, N, C, 1, v & 1, 0);
            check_fwd(isa, dt, rms, N, C, 0, (v >> 1) & 1, v & 1);
            check_bwd(isa, dt, rms, N, C, 1, v & 1);
            check_bwd(isa, dt, rms, N, C, 0, (v >> 1) & 1);
          }
        check_determinism(isa, dt, rms);
      }
      if (dt == OT_F16) {
        g_rng16 = g_rng;
        g_rng = keep;
      }
    }
  }
  ot_isa_unforce();
  check_fd(0, 3, 5);
  check_fd(0, 2, 17);
  check_fd(1, 3, 5);
  check_fd(1, 2, 17);
  check_errors();
  ot_scratch_release();
  return th_finish();
}
