// Patch embedding (ViT): the unfold + GEMM fast path against the direct
// convolution reference over odd shapes (image sides not multiples of P: the
// remainder cropped as nn.Conv2d does), f32 and bf16, forward and backward
// (dw, db, dimg); the reference backward against finite differences; fold as
// the adjoint of unfold; bad arguments.
#include "harness.h"

static th_rng g_rng = {0x5eed0015};

typedef struct { int B, Cin, H, W, P, E; } pshape;

static void test_vs_ref(void) {
  static const pshape sh[] = {{1, 1, 1, 1, 1, 1},  {2, 3, 7, 7, 3, 5},   {1, 3, 10, 13, 4, 17},
                              {3, 1, 8, 8, 2, 3},  {2, 3, 40, 33, 16, 9}, {1, 2, 5, 9, 5, 64},
                              {2, 3, 32, 32, 8, 48}};
  for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
    const pshape s = sh[k];
    const int Np = s.B * (s.H / s.P) * (s.W / s.P), K = s.Cin * s.P * s.P;
    const size_t ni = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.E * K, no = (size_t)Np * s.E;
    float *img = th_falloc(ni), *w = th_falloc(nw), *b = th_falloc(s.E), *out = th_falloc(no);
    float *want = th_falloc(no), *dout = th_falloc(no), *dw = th_falloc(nw), *db = th_falloc(s.E);
    float *rdw = th_falloc(nw), *rdb = th_falloc(s.E), *dimg = th_falloc(ni), *rdimg = th_falloc(ni);
    float *cols = th_falloc((size_t)Np * K), *dcols = th_falloc((size_t)Np * K);
    for (int di = 0; di < TH_NDT; di++) {
      const ot_dtype dt = th_dts[di];
      const double tol = th_tol(dt, 1e-5, 1e-2);
      th_fill(&g_rng, img, ni, -1.0f, 1.0f);
      th_fill(&g_rng, w, nw, -0.5f, 0.5f);
      th_fill(&g_rng, b, s.E, -0.5f, 0.5f);
      th_fill(&g_rng, dout, no, -1.0f, 1.0f);
      th_round_dt(dt, img, ni); th_round_dt(dt, w, nw); th_round_dt(dt, dout, no);
      void *wd = th_to_dt(dt, w, nw), *od = th_to_dt(dt, out, no), *doutd = th_to_dt(dt, dout, no);
      void *cd = th_to_dt(dt, cols, (size_t)Np * K), *dcd = th_to_dt(dt, dcols, (size_t)Np * K);
      th_check(ot_patch_embed_fwd(dt, od, cd, img, wd, b, s.B, s.Cin, s.H, s.W, s.P, s.E) == OT_OK,
               "patch_embed_fwd status %s", ot_last_error());
      th_from_dt(dt, od, out, no);
      ot_ref_patch_embed_fwd(want, img, w, b, s.B, s.Cin, s.H, s.W, s.P, s.E);
      th_check_nerr(out, want, no, tol, "patch_embed_fwd %s B=%d Cin=%d %dx%d P=%d E=%d",
                    ot_dtype_name(dt), s.B, s.Cin, s.H, s.W, s.P, s.E);
      // backward: += into non-zero gradients; dimg overwritten (pre-filled with garbage)
      th_fill(&g_rng, dw, nw, -1.0f, 1.0f);
      th_fill(&g_rng, db, s.E, -1.0f, 1.0f);
      th_fill(&g_rng, dimg, ni, 5.0f, 6.0f);
      memcpy(rdw, dw, nw * 4);
      memcpy(rdb, db, (size_t)s.E * 4);
      th_check(ot_patch_embed_bwd(dt, dimg, dcd, dw, db, doutd, cd, wd, s.B, s.Cin, s.H, s.W, s.P,
                                  s.E) == OT_OK, "patch_embed_bwd status %s", ot_last_error());
      ot_ref_patch_embed_bwd(rdimg, rdw, rdb, dout, img, w, s.B, s.Cin, s.H, s.W, s.P, s.E);
      th_check_nerr(dw, rdw, nw, tol, "patch_embed_bwd dw %s B=%d %dx%d P=%d E=%d",
                    ot_dtype_name(dt), s.B, s.H, s.W, s.P, s.E);
      th_check_nerr(db, rdb, s.E, 1e-5, "patch_embed_bwd db %s B=%d %dx%d P=%d E=%d",
                    ot_dtype_name(dt), s.B, s.H, s.W, s.P, s.E);
      th_check_nerr(dimg, rdimg, ni, tol, "patch_embed_bwd dimg %s B=%d %dx%d P=%d E=%d",
                    ot_dtype_name(dt), s.B, s.H, s.W, s.P, s.E);
      // the cropped pixels' gradient is exactly 0
      bool zero = true;
      for (int n = 0; n < s.B; n++)
        for (int c = 0; c < s.Cin; c++)
          for (int y = 0; y < s.H; y++)
            for (int x = 0; x < s.W; x++)
              if ((y >= s.H / s.P * s.P || x >= s.W / s.P * s.P) &&
                  dimg[(((size_t)n * s.Cin + c) * s.H + y) * s.W + x] != 0.0f)
                zero = false;
      th_check(zero, "cropped pixels get a zero gradient (%dx%d P=%d)", s.H, s.W, s.P);
      free(wd); free(od); free(doutd); free(cd); free(dcd);
    }
    free(img); free(w); free(b); free(out); free(want); free(dout); free(dw); free(db);
    free(rdw); free(rdb); free(dimg); free(rdimg); free(cols); free(dcols);
  }
}

// <unfold(x), y> == <x, fold(y)>: fold is unfold's adjoint (f32, exact up to rounding).
static void test_adjoint(void) {
  const int B = 2, Cin = 3, H = 11, W = 9, P = 4, Np = B * (H / P) * (W / P), K = Cin * P * P;
  const size_t ni = (size_t)B * Cin * H * W, nc = (size_t)Np * K;
  float *x = th_falloc(ni), *fx = th_falloc(ni), *y = th_falloc(nc), *ux = th_falloc(nc);
  th_fill(&g_rng, x, ni, -1.0f, 1.0f);
  th_fill(&g_rng, y, nc, -1.0f, 1.0f);
  th_check(ot_patch_unfold(OT_F32, ux, x, B, Cin, H, W, P) == OT_OK, "unfold");
  th_check(ot_patch_fold(OT_F32, fx, y, B, Cin, H, W, P) == OT_OK, "fold");
  const double a = th_dot(ux, y, nc), b = th_dot(x, fx, ni);
  th_check(fabs(a - b) <= 1e-9 * (fabs(a) + 1.0), "fold is the adjoint of unfold: %g vs %g", a, b);
  free(x); free(fx); free(y); free(ux);
}

// Finite differences of loss = sum(ref_fwd(img, w, b) * g) against ref_bwd(g).
typedef struct { float *img, *w, *b, *out, *g; pshape s; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  const pshape s = c->s;
  ot_ref_patch_embed_fwd(c->out, c->img, c->w, c->b, s.B, s.Cin, s.H, s.W, s.P, s.E);
  return th_dot(c->out, c->g, (size_t)s.B * (s.H / s.P) * (s.W / s.P) * s.E);
}

static void test_fd(void) {
  const pshape s = {2, 2, 5, 7, 2, 3};
  const size_t ni = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.E * s.Cin * s.P * s.P;
  const size_t no = (size_t)s.B * (s.H / s.P) * (s.W / s.P) * s.E;
  fd_ctx c = {th_falloc(ni), th_falloc(nw), th_falloc(s.E), th_falloc(no), th_falloc(no), s};
  th_fill(&g_rng, c.img, ni, -1.0f, 1.0f);
  th_fill(&g_rng, c.w, nw, -1.0f, 1.0f);
  th_fill(&g_rng, c.b, s.E, -1.0f, 1.0f);
  th_fill(&g_rng, c.g, no, -1.0f, 1.0f);
  float *gi = th_falloc(ni), *gw = th_falloc(nw), *gb = th_falloc(s.E);
  float *fi = th_falloc(ni), *fw = th_falloc(nw), *fb = th_falloc(s.E);
  ot_ref_patch_embed_bwd(gi, gw, gb, c.g, c.img, c.w, s.B, s.Cin, s.H, s.W, s.P, s.E);
  for (size_t i = 0; i < ni; i++) fi[i] = (float)th_fd(c.img, i, 0.05f, fd_loss, &c);
  for (size_t i = 0; i < nw; i++) fw[i] = (float)th_fd(c.w, i, 0.05f, fd_loss, &c);
  for (int i = 0; i < s.E; i++) fb[i] = (float)th_fd(c.b, (size_t)i, 0.05f, fd_loss, &c);
  th_check_nerr(gi, fi, ni, 1e-5, "ref patch_embed_bwd dimg vs finite differences");
  th_check_nerr(gw, fw, nw, 1e-5, "ref patch_embed_bwd dw vs finite differences");
  th_check_nerr(gb, fb, s.E, 1e-5, "ref patch_embed_bwd db vs finite differences");
  free(c.img); free(c.w); free(c.b); free(c.out); free(c.g);
  free(gi); free(gw); free(gb); free(fi); free(fw); free(fb);
}

// Same bits with 1 and 2 threads.
static void test_determinism(void) {
  const int B = 4, Cin = 3, H = 48, W = 48, P = 16, E = 40, Np = B * 9, K = Cin * P * P;
  const size_t ni = (size_t)B * Cin * H * W;
  float *img = th_falloc(ni), *w = th_falloc((size_t)E * K), *c1 = th_falloc((size_t)Np * K);
  float *c2 = th_falloc((size_t)Np * K), *o1 = th_falloc((size_t)Np * E), *o2 = th_falloc((size_t)Np * E);
  th_fill(&g_rng, img, ni, -1.0f, 1.0f);
  th_fill(&g_rng, w, (size_t)E * K, -1.0f, 1.0f);
  const int nt = ot_threads_get();
  ot_threads_set(1);
  ot_patch_embed_fwd(OT_F32, o1, c1, img, w, NULL, B, Cin, H, W, P, E);
  ot_threads_set(2);
  ot_patch_embed_fwd(OT_F32, o2, c2, img, w, NULL, B, Cin, H, W, P, E);
  ot_threads_set(nt);
  th_check(memcmp(c1, c2, (size_t)Np * K * 4) == 0, "unfold: same bits with 1 and 2 threads");
  free(img); free(w); free(c1); free(c2); free(o1); free(o2);
}

static void test_errors(void) {
  float buf[64] = {0};
  th_check_error(ot_patch_unfold(OT_F32, buf, buf, 1, 1, 3, 8, 4), OT_EINVAL, "smaller than one patch",
                 "image smaller than the patch");
  th_check_error(ot_patch_unfold(OT_F32, buf, buf, 1, 1, 4, 4, 0), OT_EINVAL, "P=0",
                 "patch size 0");
  th_check_error(ot_patch_unfold(OT_I8, buf, buf, 1, 1, 4, 4, 2), OT_EINVAL, "unsupported",
                 "int8 storage");
  th_check_error(ot_patch_embed_fwd(OT_F32, buf, buf, NULL, buf, NULL, 1, 1, 4, 4, 2, 2), OT_EINVAL,
                 "img", "NULL image");
  th_check_error(ot_patch_embed_bwd(OT_F32, buf, NULL, buf, NULL, buf, buf, buf, 1, 1, 4, 4, 2, 2),
                 OT_EINVAL, "dcols", "dimg without workspace");
}

int main(void) {
  test_vs_ref();
  test_adjoint();
  test_fd();
  test_determinism();
  test_errors();
  return th_finish();
}
