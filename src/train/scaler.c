// Dynamic loss scaling for fp16 mixed precision, with PyTorch GradScaler's
// semantics: the backward starts from loss x scale (ot_model_set_loss_scale);
// a step whose gradients hold an inf or NaN anywhere (on any rank: the flag is
// reduced over the world before this runs) is skipped and the scale multiplied
// by the backoff; after `interval` consecutive clean steps it is multiplied by
// the growth factor. The trainer unscales in its optimizer step (the norm, the
// clip and AdamW's grad_scale divide by the scale), so no pass of its own.
#include "train/train_impl.h"
#include <math.h>
#include <stdlib.h>

void ot__scaler_init(ot__scaler *s, const ot_train_config *c) {
  memset(s, 0, sizeof *s);
  const bool want = c->loss_scale >= 0.0f || c->dtype == OT_F16;   // < 0: auto
  if (!want) return;
  s->on = true;
  s->dynamic = !(c->loss_scale > 0.0f);
  s->scale = s->dynamic ? c->loss_scale_init : c->loss_scale;
  s->interval = c->loss_scale_growth_interval;
  s->growth = c->loss_scale_growth;
  s->backoff = c->loss_scale_backoff;
  s->min = c->loss_scale_min;
}

float ot__scaler_scale(const ot__scaler *s) { return s->on ? s->scale : 1.0f; }

void ot__scaler_update(ot__scaler *s, bool found_inf) {
  if (!s->on || !s->dynamic) return;
  if (found_inf) {
    float x = s->scale * s->backoff;
    if (x < s->min) x = s->min;
    if (x > 0.0f) s->scale = x;   // never 0 (a subnormal product stays above it)
    s->clean = 0;
    return;
  }
  if (++s->clean >= s->interval) {
    const float x = s->scale * s->growth;
    if (isfinite(x)) s->scale = x;   // an f32 overflow keeps the scale
    s->clean = 0;
  }
}

// Test aid (tests/test_train_fp16.c, tests/mpi/): OT_TEST_INF_GRAD="STEP[:RANK][,...]"
// puts an inf into the gradient shard world rank RANK (default 0) is about to apply
// at 1-based step STEP, as an fp16 overflow in that rank's backward would.
bool ot__scaler_test_inf(int64_t step, int rank) {
  const char *e = getenv("OT_TEST_INF_GRAD");
  if (!e || !*e) return false;
  while (*e) {
    char *end;
    const long long st = strtoll(e, &end, 10);
    long r = 0;
    if (end == e) return false;
    if (*end == ':') {
      const char *q = end + 1;
      r = strtol(q, &end, 10);
      if (end == q) return false;
    }
    if (st == step && r == rank) return true;
    if (*end != ',') return false;
    e = end + 1;
  }
  return false;
}
