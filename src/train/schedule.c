// Learning-rate schedule: linear warmup, then cosine / linear decay to a floor,
// constant, or inverse square root (contract in ot/train.h).
#include "train/train_impl.h"
#include <math.h>

float ot_lr_at(const ot_lr_schedule *s, int64_t step) {
  if (!s) return 0.0f;
  if (step < 0) step = 0;
  if (s->decay == OT_LR_INVSQRT) {
    const double w = s->warmup > 0 ? (double)s->warmup : 1.0, n = (double)step + 1.0;
    if (n < w) return (float)((double)s->lr * n / w);
    const double x = (double)s->lr * sqrt(w / n);
    return (float)(x > (double)s->min_lr ? x : (double)s->min_lr);
  }
  if (step < s->warmup) return (float)((double)s->lr * (double)(step + 1) / (double)s->warmup);
  if (s->decay == OT_LR_CONSTANT) return s->lr;
  if (step >= s->decay_steps) return s->min_lr;
  double r = (double)(step - s->warmup) / (double)(s->decay_steps - s->warmup);
  double span = (double)s->lr - (double)s->min_lr;
  if (s->decay == OT_LR_LINEAR) return (float)((double)s->lr - r * span);
  return (float)((double)s->min_lr + 0.5 * (1.0 + cos(M_PI * r)) * span);
}
