// Images -> model input: epoch orders, random resized crop, horizontal flip,
// bilinear resize and per-channel normalization, all deterministic from
// (seed, counter) so a training run resumes from its position alone.
#include "ot/data.h"
#include "internal.h"
#include <math.h>

static double u01(uint64_t seed, uint64_t c) { return ot_rand_u32(seed, c) * (1.0 / 4294967296.0); }

void ot_images_order(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, uint64_t epoch) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  if (!shuffle) return;
  const uint64_t key = seed ^ (0x9E3779B97F4A7C15ull * (epoch + 1));
  for (int64_t i = n - 1; i > 0; i--) {
    const uint64_t r = ((uint64_t)ot_rand_u32(key, 2 * (uint64_t)i) << 32) |
                       ot_rand_u32(key, 2 * (uint64_t)i + 1);
    const int64_t j = (int64_t)(r % (uint64_t)(i + 1));
    const int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

// The crop box (y0, x0, ch, cw) of one image, torchvision's RandomResizedCrop rule.
static void crop_box(int H, int W, float smin, uint64_t seed, uint64_t base, int *y0, int *x0,
                     int *ch, int *cw) {
  const double area = (double)H * W, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
  for (int t = 0; t < 10; t++) {
    const double a = area * (smin + (1.0 - smin) * u01(seed, base + 4 * t));
    const double r = exp(lr0 + (lr1 - lr0) * u01(seed, base + 4 * t + 1));
    const int w = (int)lround(sqrt(a * r)), h = (int)lround(sqrt(a / r));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      *y0 = (int)(u01(seed, base + 4 * t + 2) * (H - h + 1));
      *x0 = (int)(u01(seed, base + 4 * t + 3) * (W - w + 1));
      *ch = h;
      *cw = w;
      return;
    }
  }
  *y0 = 0; *x0 = 0; *ch = H; *cw = W;
}

ot_status ot_images_batch(const ot_images *s, const ot_image_aug *a, const int64_t *idx, int B,
                          uint64_t seed, uint64_t counter, float *img, int32_t *labels) {
  static const char fn[] = "ot_images_batch";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(a, fn);
  OT_CHECK_PTR(idx, fn);
  OT_CHECK_PTR(img, fn);
  OT_CHECK_POS(B, fn);
  if (a->out_h < 1 || a->out_w < 1 || a->out_h > 65536 || a->out_w > 65536)
    return ot_error(OT_EINVAL, "%s: output size %dx%d out of range", fn, a->out_w, a->out_h);
  if (a->crop && !(a->crop_min > 0.0f && a->crop_min <= 1.0f))
    return ot_error(OT_EINVAL, "%s: crop_min=%g must be in (0, 1] (0.08 is torchvision's)", fn,
                    a->crop_min);
  for (int ch = 0; ch < s->c; ch++)
    if (!(a->std[ch] > 0.0f) || !isfinite(a->mean[ch]))
      return ot_error(OT_EINVAL, "%s: std[%d]=%g must be > 0 (and mean finite)", fn, ch, a->std[ch]);
  for (int k = 0; k < B; k++)
    if (idx[k] < 0 || idx[k] >= s->n)
      return ot_error(OT_EINVAL, "%s: image index %lld outside [0, %d)", fn, (long long)idx[k], s->n);
  const int H = s->h, W = s->w, C = s->c, OH = a->out_h, OW = a->out_w;
#pragma omp parallel for schedule(static) if (B >= 4 && (long)OH * OW * C >= 4096)
  for (int k = 0; k < B; k++) {
    const uint64_t base = 64 * (counter + (uint64_t)k);
    int y0 = 0, x0 = 0, ch = H, cw = W;
    if (a->crop) crop_box(H, W, a->crop_min, seed, base, &y0, &x0, &ch, &cw);
    const bool flip = a->flip && u01(seed, base + 48) < 0.5;
    const uint8_t *src = s->pix + (size_t)idx[k] * H * W * C;
    float *dst = img + (size_t)k * C * OH * OW;
    const float inv = 1.0f / (float)s->maxval;
    for (int oy = 0; oy < OH; oy++) {
      // half-pixel centres: source coordinate of output pixel centre
      double sy = ((double)oy + 0.5) * ch / OH - 0.5;
      if (sy < 0) sy = 0;
      int iy = (int)sy;
      if (iy > ch - 1) iy = ch - 1;
      const int iy1 = iy + 1 < ch ? iy + 1 : ch - 1;
      const float fy = (float)(sy - iy);
      for (int ox = 0; ox < OW; ox++) {
        const int oxs = flip ? OW - 1 - ox : ox;
        double sx = ((double)oxs + 0.5) * cw / OW - 0.5;
        if (sx < 0) sx = 0;
        int ix = (int)sx;
        if (ix > cw - 1) ix = cw - 1;
        const int ix1 = ix + 1 < cw ? ix + 1 : cw - 1;
        const float fx = (float)(sx - ix);
        for (int c = 0; c < C; c++) {
          const float p00 = src[((size_t)(y0 + iy) * W + x0 + ix) * C + c];
          const float p01 = src[((size_t)(y0 + iy) * W + x0 + ix1) * C + c];
          const float p10 = src[((size_t)(y0 + iy1) * W + x0 + ix) * C + c];
          const float p11 = src[((size_t)(y0 + iy1) * W + x0 + ix1) * C + c];
          const float v = (p00 * (1 - fx) + p01 * fx) * (1 - fy) + (p10 * (1 - fx) + p11 * fx) * fy;
          dst[((size_t)c * OH + oy) * OW + ox] = (v * inv - a->mean[c]) / a->std[c];
        }
      }
    }
    if (labels) labels[k] = s->labels[idx[k]];
  }
  return OT_OK;
}
