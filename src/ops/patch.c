// Patch embedding (ViT): a PxP convolution with stride P computed as one GEMM
// over the unfolded patches. The unfold / fold are row copies of P pixels (no
// per-pixel loop); the GEMM and its backward are ot_linear_fwd / _bwd. The
// scalar reference (a direct convolution) is in patch_ref.c.
#include "internal.h"
#include "ot/ops.h"

static ot_status patch_check(const char *fn, ot_dtype dt, int B, int Cin, int H, int W, int P) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_POS(B, fn);
  OT_CHECK_POS(Cin, fn);
  OT_CHECK_POS(P, fn);
  OT_CHECK_POS(H, fn);
  OT_CHECK_POS(W, fn);
  if (H < P || W < P)
    return ot_error(OT_EINVAL, "%s: the image (%dx%d) is smaller than one patch (%dx%d); use "
                    "larger images or a smaller patch size", fn, H, W, P, P);
  if ((long)Cin * P * P > (1L << 30) || (long)B * (H / P) * (W / P) > (1L << 30))
    return ot_error(OT_EINVAL, "%s: B=%d, Cin=%d, %dx%d, P=%d is too large", fn, B, Cin, H, W, P);
  return OT_OK;
}

// img [B, Cin, H, W] f32 -> cols [B*Hp*Wp, Cin*P*P] (dt); row (b, i, j) holds the
// patch at pixel (i*P, j*P), columns in (c, y, x) order (the Conv2d weight's).
ot_status ot_patch_unfold(ot_dtype dt, void *cols, const float *img, int B, int Cin, int H,
                          int W, int P) {
  static const char fn[] = "ot_patch_unfold";
  OT_CHECK_PTR(cols, fn);
  OT_CHECK_PTR(img, fn);
  OT_TRY(patch_check(fn, dt, B, Cin, H, W, P));
  const int Hp = H / P, Wp = W / P, K = Cin * P * P;
  const long rows = (long)B * Hp * Wp;
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("patch_unfold", 0.0, (double)rows * K * (4.0 + es));
#pragma omp parallel for schedule(static) if (rows * K >= 65536)
  for (long r = 0; r < rows; r++) {
    const long b = r / ((long)Hp * Wp), i = (r / Wp) % Hp, j = r % Wp;
    char *dst = (char *)cols + (size_t)r * K * es;
    for (int c = 0; c < Cin; c++)
      for (int y = 0; y < P; y++) {
        const float *src = img + (((size_t)b * Cin + c) * H + (size_t)i * P + y) * W + (size_t)j * P;
        char *d = dst + ((size_t)c * P + y) * P * es;
        if (dt == OT_F32)
          memcpy(d, src, (size_t)P * sizeof(float));
        else
          (void)ot_convert(src, OT_F32, d, dt, (size_t)P);   // f32 -> bf16 / f16: cannot fail
      }
  }
  OT_PROF_STOP();
  return OT_OK;
}

// The adjoint of ot_patch_unfold: dcols [B*Hp*Wp, Cin*P*P] (dt) -> dimg [B, Cin, H, W]
// f32, OVERWRITTEN; pixels of the cropped right / bottom remainder get 0.
ot_status ot_patch_fold(ot_dtype dt, float *dimg, const void *dcols, int B, int Cin, int H, int W,
                        int P) {
  static const char fn[] = "ot_patch_fold";
  OT_CHECK_PTR(dimg, fn);
  OT_CHECK_PTR(dcols, fn);
  OT_TRY(patch_check(fn, dt, B, Cin, H, W, P));
  const int Hp = H / P, Wp = W / P, K = Cin * P * P;
  const long rows = (long)B * Hp * Wp;
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("patch_fold", 0.0, (double)rows * K * (4.0 + es));
  if (H % P || W % P) memset(dimg, 0, (size_t)B * Cin * H * W * sizeof(float));
#pragma omp parallel for schedule(static) if (rows * K >= 65536)
  for (long r = 0; r < rows; r++) {   // patches cover disjoint pixels: no race
    const long b = r / ((long)Hp * Wp), i = (r / Wp) % Hp, j = r % Wp;
    const char *src = (const char *)dcols + (size_t)r * K * es;
    for (int c = 0; c < Cin; c++)
      for (int y = 0; y < P; y++) {
        float *d = dimg + (((size_t)b * Cin + c) * H + (size_t)i * P + y) * W + (size_t)j * P;
        const char *s = src + ((size_t)c * P + y) * P * es;
        if (dt == OT_F32)
          memcpy(d, s, (size_t)P * sizeof(float));
        else
          (void)ot_convert(s, dt, d, OT_F32, (size_t)P);
      }
  }
  OT_PROF_STOP();
  return OT_OK;
}

ot_status ot_patch_embed_fwd(ot_dtype dt, void *out, void *cols, const float *img, const void *w,
                             const float *b, int B, int Cin, int H, int W, int P, int E) {
  static const char fn[] = "ot_patch_embed_fwd";
  OT_CHECK_PTR(out, fn);
  OT_CHECK_PTR(w, fn);
  OT_CHECK_POS(E, fn);
  OT_TRY(ot_patch_unfold(dt, cols, img, B, Cin, H, W, P));
  const int N = B * (H / P) * (W / P);
  return ot_linear_fwd(dt, out, NULL, cols, w, b, N, E, Cin * P * P, OT_ACT_NONE);
}

ot_status ot_patch_embed_bwd(ot_dtype dt, float *dimg, void *dcols, float *dw, float *db,
                             const void *dout, const void *cols, const void *w, int B, int Cin,
                             int H, int W, int P, int E) {
  static const char fn[] = "ot_patch_embed_bwd";
  OT_CHECK_PTR(dout, fn);
  OT_CHECK_PTR(cols, fn);
  OT_CHECK_POS(E, fn);
  OT_TRY(patch_check(fn, dt, B, Cin, H, W, P));
  if (dimg && (!dcols || !w))
    return ot_error(OT_EINVAL, "%s: dimg needs the dcols workspace and w", fn);
  const int N = B * (H / P) * (W / P), K = Cin * P * P;
  // no activation: ot_linear_bwd only reads dy
  OT_TRY(ot_linear_bwd(dt, dimg ? dcols : NULL, dw, db, (void *)dout, NULL, cols, w, N, E, K,
                       OT_ACT_NONE));
  if (dimg) OT_TRY(ot_patch_fold(dt, dimg, dcols, B, Cin, H, W, P));
  return OT_OK;
}
