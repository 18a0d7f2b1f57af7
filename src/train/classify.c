// The classify task of the one trainer: the training and held-out image sets
// (ot_images_load), the vision transformer sized for them, the micro-batches of
// a step (epoch orders and augmentation deterministic by the seed and the data
// position, forward_images + backward, the loss over the global batch's images)
// and the held-out loss with top-1 accuracy. The optimizer step, the non-finite
// rule, checkpoints and the run loop are trainer.c's and run.c's.
#include "train/train_impl.h"
#include <math.h>
#include <stdlib.h>

struct ot__cls {
  ot_images *train, *valid;
  int64_t *perm;            // [train->n] this epoch's order
  uint64_t epoch, index;    // the next training image: position `index` of epoch `epoch`
  uint64_t perm_epoch;      // the epoch perm holds (UINT64_MAX: none yet)
  float *img;               // [B, channels, S, S] one micro-batch of model input
  int32_t *lab;             // [B]
  int64_t *idx;             // [B]
  double acc;               // top-1 accuracy of the last evaluation
};

void ot__cls_free(struct ot__cls *c) {
  if (!c) return;
  ot_images_free(c->train);
  ot_images_free(c->valid);
  ot_mem_free(c->perm);
  ot_mem_free(c->img);
  ot_mem_free(c->lab);
  ot_mem_free(c->idx);
  free(c);
}

bool ot__cls_has_val(const ot_trainer *t) { return t && t->cls && t->cls->valid; }

double ot_trainer_accuracy(const ot_trainer *t) { return t && t->cls ? t->cls->acc : NAN; }

// What defines the order of the training images: their count, the seed, shuffling.
static uint64_t fingerprint(const ot_trainer *t) {
  const uint64_t v[3] = {(uint64_t)t->cls->train->n, t->cfg.seed, t->cfg.shuffle};
  return ot__hash_bytes(v, sizeof v) ^ 0x636c617373696679ull;
}

bool ot__cls_data_state(const ot_trainer *t, ot_loader_state *st) {
  if (!t->cls->train) return false;
  st->epoch = t->cls->epoch;
  st->index = t->cls->index;
  st->fingerprint = fingerprint(t);
  return true;
}

ot_status ot__cls_set_data_state(ot_trainer *t, const ot_loader_state *st) {
  struct ot__cls *c = t->cls;
  if (!c->train) return OT_OK;
  if (st->fingerprint != fingerprint(t) || st->index >= (uint64_t)c->train->n)
    return ot_error(OT_EINVAL, "the image order differs (other images, --seed or --shuffle)");
  c->epoch = st->epoch;
  c->index = st->index;
  return OT_OK;
}

static ot_image_aug aug_of(const ot_train_config *c, bool train) {
  ot_image_aug a = {c->model.image_size, c->model.image_size, {0}, {0}, train && c->crop_min > 0,
                    c->crop_min > 0 ? c->crop_min : 1.0f, train && c->flip};
  for (int i = 0; i < 3; i++) {
    a.mean[i] = c->image_mean[i];
    a.std[i] = c->image_std[i];
  }
  return a;
}

ot_status ot__cls_create(ot_trainer *t) {
  ot_train_config *c = &t->cfg;
  struct ot__cls *k = calloc(1, sizeof *k);
  if (!k) return ot_error(OT_ENOMEM, "trainer: out of memory");
  t->cls = k;
  k->acc = NAN;
  k->perm_epoch = UINT64_MAX;
  const int ch = c->model.channels, classes = c->model.vocab, S = c->model.image_size;
  if (!c->eval_only) OT_TRY(ot_images_load(&k->train, c->train_images, ch, classes));
  if (c->val_images[0]) OT_TRY(ot_images_load(&k->valid, c->val_images, ch, classes));
  else if (c->eval_only) return ot_error(OT_EINVAL, "--task classify evaluation needs --val-images");
  c->model.dropout = c->dropout;
  c->model.attn_dropout = c->attn_dropout;
  c->model.act_dropout = c->act_dropout;
  c->model.drop_path = c->drop_path;
  const int B = c->batch_size;
  ot_run_config run = {B, c->model.max_seq, c->dtype, c->recompute, -1};
  OT_TRY(ot_model_create(&t->m, &c->model, &run));
  OT_TRY(ot_model_set_label_smoothing(t->m, c->label_smoothing));
  k->img = ot_mem_alloc((size_t)B * ch * S * S * sizeof(float), OT_MEM_OTHER);
  k->lab = ot_mem_alloc((size_t)B * sizeof(int32_t), OT_MEM_OTHER);
  k->idx = ot_mem_alloc((size_t)B * sizeof(int64_t), OT_MEM_OTHER);
  if (k->train) k->perm = ot_mem_alloc((size_t)k->train->n * sizeof(int64_t), OT_MEM_OTHER);
  if (!k->img || !k->lab || !k->idx || (k->train && !k->perm)) return OT_ENOMEM;
  return OT_OK;
}

// The next B training images (crossing into the next epoch when one ends) into idx,
// and the augmentation counter of the first (its global visit number).
static uint64_t next_indices(ot_trainer *t, int B) {
  struct ot__cls *c = t->cls;
  const int64_t n = c->train->n;
  const uint64_t counter = c->epoch * (uint64_t)n + c->index;
  for (int i = 0; i < B; i++) {
    if (c->perm_epoch != c->epoch) {
      ot_images_order(c->perm, n, t->cfg.shuffle, t->cfg.seed, c->epoch);
      c->perm_epoch = c->epoch;
    }
    c->idx[i] = c->perm[c->index];
    if (++c->index == (uint64_t)n) {
      c->index = 0;
      c->epoch++;
    }
  }
  return counter;
}

ot_status ot__cls_micro_batches(ot_trainer *t, double *loss, bool *finite, int64_t *tokens,
                                int64_t *tgt_tokens) {
  struct ot__cls *c = t->cls;
  const ot_train_config *cf = &t->cfg;
  if (!c->train) return ot_error(OT_EINVAL, "ot_trainer_step: no training images (set --train-images)");
  const int B = cf->batch_size, A = cf->grad_accum, S = cf->model.image_size;
  const ot_image_aug aug = aug_of(cf, true);
  *tokens = *tgt_tokens = (int64_t)A * B * cf->model.max_seq;
  *loss = 0.0;
  *finite = true;
  for (int k = 0; k < A; k++) {
    OT_PROF_BEGIN("data", 0.0, 0.0);
    const uint64_t counter = next_indices(t, B);
    ot_status s = ot_images_batch(c->train, &aug, c->idx, B, cf->seed, counter, c->img, c->lab);
    OT_PROF_STOP();
    OT_TRY(s);
    ot_model_set_dropout_step(t->m, cf->seed, ((uint64_t)t->step << 20) | (uint64_t)k);
    const ot_image_batch b = {B, S, S, c->img, c->lab, false};
    double l = 0.0;
    OT_TRY(ot_model_forward_images(t->m, &b, (float)A * B, true, &l));
    *loss += l;
    if (!isfinite(l)) {
      *finite = false;
      break;
    }
    OT_TRY(ot_model_backward(t->m));
  }
  return OT_OK;
}

ot_status ot__cls_eval(ot_trainer *t, int batches, double *loss, double *nll, int64_t *images) {
  struct ot__cls *c = t->cls;
  if (!c->valid) return ot_error(OT_EINVAL, "ot_trainer_eval: no held-out images (set --val-images)");
  const ot_train_config *cf = &t->cfg;
  const int B = cf->batch_size, S = cf->model.image_size;
  if (batches <= 0) batches = cf->eval_batches;
  const int64_t n = (int64_t)batches * B < c->valid->n ? (int64_t)batches * B : c->valid->n;
  const ot_image_aug aug = aug_of(cf, false);
  double sl = 0.0, sn = 0.0;
  int64_t right = 0;
  for (int64_t i0 = 0; i0 < n; i0 += B) {
    const int nb = n - i0 < B ? (int)(n - i0) : B;
    for (int k = 0; k < nb; k++) c->idx[k] = i0 + k;
    OT_TRY(ot_images_batch(c->valid, &aug, c->idx, nb, 0, 0, c->img, c->lab));
    const ot_image_batch b = {nb, S, S, c->img, c->lab, false};
    double l = 0.0;
    OT_TRY(ot_model_forward_images(t->m, &b, (float)nb, false, &l));
    sl += l * nb;
    sn += ot_model_nll(t->m) * nb;
    int ld = 0;
    const void *lg = ot_model_logits(t->m, &ld);
    for (int k = 0; k < nb; k++) {
      int best = 0;
      float bv = -INFINITY;
      for (int j = 0; j < cf->model.vocab; j++) {
        const size_t e = (size_t)k * ld + j;
        const float v = cf->dtype == OT_F32    ? ((const float *)lg)[e]
                        : cf->dtype == OT_F16 ? ot_f16_to_f32(((const uint16_t *)lg)[e])
                                              : ot_bf16_to_f32(((const uint16_t *)lg)[e]);
        if (v > bv) { bv = v; best = j; }
      }
      right += best == c->lab[k];
    }
  }
  *loss = n > 0 ? sl / (double)n : NAN;
  if (nll) *nll = n > 0 ? sn / (double)n : NAN;
  if (images) *images = n;
  c->acc = n > 0 ? (double)right / (double)n : NAN;
  return OT_OK;
}
