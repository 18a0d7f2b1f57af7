// Scalar reference of the patch embedding: a direct PxP, stride-P convolution
// (no unfolding), single thread, double accumulation.
#include "ot/ops.h"

// img [B, Cin, H, W], w [E, Cin, P, P], b [E] or NULL -> out [B*Hp*Wp, E].
void ot_ref_patch_embed_fwd(float *out, const float *img, const float *w, const float *b, int B,
                            int Cin, int H, int W, int P, int E) {
  const int Hp = H / P, Wp = W / P;
  for (int n = 0; n < B; n++)
    for (int i = 0; i < Hp; i++)
      for (int j = 0; j < Wp; j++)
        for (int e = 0; e < E; e++) {
          double s = b ? b[e] : 0.0;
          for (int c = 0; c < Cin; c++)
            for (int y = 0; y < P; y++)
              for (int x = 0; x < P; x++)
                s += (double)img[(((size_t)n * Cin + c) * H + i * P + y) * W + j * P + x] *
                     w[(((size_t)e * Cin + c) * P + y) * P + x];
          out[(((size_t)n * Hp + i) * Wp + j) * E + e] = (float)s;
        }
}

// dout [B*Hp*Wp, E] -> dimg [B, Cin, H, W] overwritten (NULL: skip; cropped pixels 0),
// dw [E, Cin, P, P] +=, db [E] += (NULL: skip).
void ot_ref_patch_embed_bwd(float *dimg, float *dw, float *db, const float *dout,
                            const float *img, const float *w, int B, int Cin, int H, int W, int P,
                            int E) {
  const int Hp = H / P, Wp = W / P;
  if (dimg)
    for (size_t k = 0; k < (size_t)B * Cin * H * W; k++) dimg[k] = 0.0f;
  for (int e = 0; e < E; e++) {
    if (db) {
      double s = db[e];
      for (int r = 0; r < B * Hp * Wp; r++) s += dout[(size_t)r * E + e];
      db[e] = (float)s;
    }
    for (int c = 0; c < Cin; c++)
      for (int y = 0; y < P; y++)
        for (int x = 0; x < P; x++) {
          double s = dw[(((size_t)e * Cin + c) * P + y) * P + x];
          for (int n = 0; n < B; n++)
            for (int i = 0; i < Hp; i++)
              for (int j = 0; j < Wp; j++)
                s += (double)dout[(((size_t)n * Hp + i) * Wp + j) * E + e] *
                     img[(((size_t)n * Cin + c) * H + i * P + y) * W + j * P + x];
          dw[(((size_t)e * Cin + c) * P + y) * P + x] = (float)s;
        }
  }
  if (!dimg) return;
  for (int n = 0; n < B; n++)
    for (int i = 0; i < Hp; i++)
      for (int j = 0; j < Wp; j++)
        for (int c = 0; c < Cin; c++)
          for (int y = 0; y < P; y++)
            for (int x = 0; x < P; x++) {
              double s = 0.0;
              for (int e = 0; e < E; e++)
                s += (double)dout[(((size_t)n * Hp + i) * Wp + j) * E + e] *
                     w[(((size_t)e * Cin + c) * P + y) * P + x];
              dimg[(((size_t)n * Cin + c) * H + i * P + y) * W + j * P + x] = (float)s;
            }
}
