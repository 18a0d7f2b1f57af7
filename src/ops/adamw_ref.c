// Scalar reference of the AdamW step (tests only). Written straight from the
// contract in ops.h, in double per element (states stored back as f32), so it
// is an independent check of the kernel's folded-coefficient f32 arithmetic.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>

// p, g, m, v: [n] f32, updated like ot_adamw (no validation, no bf16 copy).
void ot_ref_adamw(float *p, const float *g, float *m, float *v, size_t n,
                  const ot_adamw_cfg *cfg, float grad_scale) {
  const double b1 = cfg->beta1, b2 = cfg->beta2, lr = cfg->lr, wd = cfg->weight_decay;
  const double bc1 = 1.0 - pow(b1, (double)cfg->step), bc2 = 1.0 - pow(b2, (double)cfg->step);
  for (size_t i = 0; i < n; i++) {
    double gi = (double)g[i] * grad_scale;
    double mi = b1 * m[i] + (1.0 - b1) * gi;
    double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
    double mhat = mi / bc1, vhat = vi / bc2;
    double pi = p[i];
    pi -= lr * (wd * pi + mhat / (sqrt(vhat) + cfg->eps));
    m[i] = (float)mi;
    v[i] = (float)vi;
    p[i] = (float)pi;
  }
}
