// Image classification with a vision transformer (the one model graph's ViT
// forward): batches of images resized and normalized as the model expects, the
// softmax of the logits, the k most probable classes of each image.
#include "internal.h"
#include "ot/infer.h"
#include <math.h>
#include <stdlib.h>

ot_status ot_classify_images(ot_model *m, const ot_images *s, const ot_image_aug *a,
                             const int64_t *idx, int n, int k, int32_t *top_class, float *top_p) {
  static const char fn[] = "ot_classify_images";
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(a, fn);
  OT_CHECK_PTR(idx, fn);
  OT_CHECK_PTR(top_class, fn);
  OT_CHECK_PTR(top_p, fn);
  const ot_model_config *c = ot_model_config_of(m);
  if (c->arch != OT_ARCH_VIT)
    return ot_error(OT_EINVAL, "%s: '%s' is not a vision transformer", fn, c->name);
  const int V = c->vocab, S = c->image_size, B = ot_model_run_of(m)->B;
  if (k < 1 || k > V) return ot_error(OT_EINVAL, "%s: k=%d outside [1, %d classes]", fn, k, V);
  if (s->c != c->channels)
    return ot_error(OT_EINVAL, "%s: the images have %d channels, the model takes %d", fn, s->c,
                    c->channels);
  if (n <= 0) return OT_OK;
  ot_image_aug in = *a;
  in.out_h = in.out_w = S;
  in.crop = in.flip = false;
  float *img = ot_mem_alloc((size_t)B * c->channels * S * S * sizeof(float), OT_MEM_OTHER);
  double *p = ot_mem_alloc((size_t)V * sizeof(double), OT_MEM_OTHER);
  ot_status st = img && p ? OT_OK : OT_ENOMEM;
  const ot_dtype dt = ot_model_run_of(m)->dt;
  for (int i0 = 0; i0 < n && st == OT_OK; i0 += B) {
    const int nb = n - i0 < B ? n - i0 : B;
    st = ot_images_batch(s, &in, idx + i0, nb, 0, 0, img, NULL);
    const ot_image_batch b = {nb, S, S, img, NULL, false};
    if (st == OT_OK) st = ot_model_forward_images(m, &b, 0.0f, false, NULL);
    if (st != OT_OK) break;
    int ld = 0;
    const void *lg = ot_model_logits(m, &ld);
    for (int r = 0; r < nb; r++) {
      double mx = -INFINITY, sum = 0.0;
      for (int j = 0; j < V; j++) {
        const size_t e = (size_t)r * ld + j;
        p[j] = dt == OT_F32 ? ((const float *)lg)[e] : ot_bf16_to_f32(((const uint16_t *)lg)[e]);
        if (p[j] > mx) mx = p[j];
      }
      for (int j = 0; j < V; j++) sum += (p[j] = exp(p[j] - mx));
      int32_t *tc = top_class + (size_t)(i0 + r) * k;
      float *tp = top_p + (size_t)(i0 + r) * k;
      for (int q = 0; q < k; q++) {   // k passes: the next largest, lower class first on ties
        int best = -1;
        for (int j = 0; j < V; j++) {
          bool taken = false;
          for (int u = 0; u < q && !taken; u++) taken = tc[u] == j;
          if (!taken && (best < 0 || p[j] > p[best])) best = j;
        }
        tc[q] = best;
        tp[q] = (float)(p[best] / sum);
      }
    }
  }
  ot_mem_free(img);
  ot_mem_free(p);
  return st;
}
