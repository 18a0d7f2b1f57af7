// The classify task of the one trainer: the training and held-out image sets
// (ot_images_load), the vision transformer sized for them, the micro-batches of
// a step (epoch orders and augmentation deterministic by the seed and the data
// position, forward_images + backward, the loss over the global batch's images)
// and the held-out loss with top-1 accuracy. In parallel every rank walks the
// same global batch (data_parallel x grad_accum micro-batches) and runs its data-
// parallel rank's micro-batches on the runtime's schedule (dist/par.h:
// ot__par_micro_batches_fn, its pipeline stages and gradient reduction), so a
// layout's step equals the one-process step with grad_accum x data_parallel
// micro-batches. The optimizer step, the non-finite rule, checkpoints and the
// run loop are trainer.c's and run.c's.
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
  int64_t *idx;             // [(A + 1) * B] the step's micro-batches of this rank (+ scratch)
  uint64_t *ctr;            // [A] their augmentation counters
  int enb;                  // evaluation: the images of the chunk in img / lab
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
  ot_mem_free(c->ctr);
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
  const int B = c->batch_size, A = c->grad_accum;
  ot_run_config run = {B, c->model.max_seq, c->dtype, c->recompute, -1};
  if (ot__par_wanted(c->data_parallel, c->tensor_parallel, c->pipeline_stages)) {
    const ot__par_config pc = ot__train_par_config(c, &run);
    OT_TRY(ot__par_create(&pc, &t->m, &t->par));
  } else {
    OT_TRY(ot_model_create(&t->m, &c->model, &run));
  }
  OT_TRY(ot_model_set_label_smoothing(t->m, c->label_smoothing));
  k->img = ot_mem_alloc((size_t)B * ch * S * S * sizeof(float), OT_MEM_OTHER);
  k->lab = ot_mem_alloc((size_t)B * sizeof(int32_t), OT_MEM_OTHER);
  k->idx = ot_mem_alloc((size_t)(A + 1) * B * sizeof(int64_t), OT_MEM_OTHER);
  k->ctr = ot_mem_alloc((size_t)A * sizeof(uint64_t), OT_MEM_OTHER);
  if (k->train) k->perm = ot_mem_alloc((size_t)k->train->n * sizeof(int64_t), OT_MEM_OTHER);
  if (!k->img || !k->lab || !k->idx || !k->ctr || (k->train && !k->perm)) return OT_ENOMEM;
  return OT_OK;
}

// The next B training images (crossing into the next epoch when one ends) into idx [B],
// and the augmentation counter of the first (its global visit number).
static uint64_t next_indices(ot_trainer *t, int64_t *idx, int B) {
  struct ot__cls *c = t->cls;
  const int64_t n = c->train->n;
  const uint64_t counter = c->epoch * (uint64_t)n + c->index;
  for (int i = 0; i < B; i++) {
    if (c->perm_epoch != c->epoch) {
      ot_images_order(c->perm, n, t->cfg.shuffle, t->cfg.seed, c->epoch);
      c->perm_epoch = c->epoch;
    }
    idx[i] = c->perm[c->index];
    if (++c->index == (uint64_t)n) {
      c->index = 0;
      c->epoch++;
    }
  }
  return counter;
}

// Forward of this rank's micro-batch mb of the step (its images augmented, its dropout
// the step's stream, its rows those of the global micro-batch dp_rank x A + mb), or with mb < 0 of the
// evaluation chunk in img / lab; into slot `slot` (the runtime's ot__par_fwd_fn).
static ot_status fwd_mb(void *ctx, ot_model *m, int mb, int slot, bool want_grad, double *loss) {
  ot_trainer *t = ctx;
  struct ot__cls *c = t->cls;
  const ot_train_config *cf = &t->cfg;
  const int B = cf->batch_size, A = cf->grad_accum, S = cf->model.image_size;
  if (mb < 0) {
    const ot_image_batch b = {c->enb, S, S, c->img, c->lab, false};
    return ot_model_forward_images_slot(m, slot, &b, (float)c->enb, false, loss);
  }
  const ot_image_aug aug = aug_of(cf, true);
  OT_PROF_BEGIN("data", 0.0, 0.0);
  ot_status s = ot_images_batch(c->train, &aug, c->idx + (size_t)mb * B, B, cf->seed, c->ctr[mb],
                                c->img, c->lab);
  OT_PROF_STOP();
  OT_TRY(s);
  const int g = ot__par_dp_rank(t->par) * A + mb;
  ot_model_set_dropout_step(m, cf->seed, (uint64_t)t->step);
  const ot_image_batch b = {B, S, S, c->img, c->lab, false, (int64_t)g * B};
  return ot_model_forward_images_slot(m, slot, &b, (float)ot__par_dp(t->par) * A * B, want_grad, loss);
}

ot_status ot__cls_micro_batches(ot_trainer *t, double *loss, bool *finite, int64_t *tokens,
                                int64_t *tgt_tokens) {
  struct ot__cls *c = t->cls;
  const ot_train_config *cf = &t->cfg;
  if (!c->train) return ot_error(OT_EINVAL, "ot_trainer_step: no training images (set --train-images)");
  const int B = cf->batch_size, A = cf->grad_accum, dp = ot__par_dp(t->par), dr = ot__par_dp_rank(t->par);
  *tokens = *tgt_tokens = (int64_t)dp * A * B * cf->model.max_seq;
  *loss = 0.0;
  *finite = true;
  // the global batch's dp x A micro-batches in order (every rank advances the same
  // position); this rank keeps its A
  for (int g = 0; g < dp * A; g++) {
    const bool mine = g / A == dr;
    const uint64_t ctr = next_indices(t, c->idx + (size_t)(mine ? g % A : A) * B, B);
    if (mine) c->ctr[g % A] = ctr;
  }
  if (t->par) return ot__par_micro_batches_fn(t->par, fwd_mb, t, loss, finite);
  for (int k = 0; k < A; k++) {
    double l = 0.0;
    OT_TRY(fwd_mb(t, t->m, k, 0, true, &l));
    *loss += l;
    if (!isfinite(l)) {
      *finite = false;
      break;
    }
    OT_TRY(ot_model_backward(t->m));
  }
  return OT_OK;
}

// Top-1 hits of the nb images in lab against the last forward's logits.
static int64_t top1_hits(const ot_trainer *t, int nb) {
  const ot_train_config *cf = &t->cfg;
  int ld = 0;
  const void *lg = ot_model_logits(t->m, &ld);
  int64_t right = 0;
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
    right += best == t->cls->lab[k];
  }
  return right;
}

// Parallel: the B-image chunks dealt round-robin to the data-parallel ranks (every stage
// and tensor rank of one runs the same chunks; ZeRO-3 in lockstep, a rank without a chunk
// running chunk 0 uncounted), the last stage's tensor rank 0 counting; sums over the world.
ot_status ot__cls_eval(ot_trainer *t, int batches, double *loss, double *nll, int64_t *images) {
  struct ot__cls *c = t->cls;
  if (!c->valid) return ot_error(OT_EINVAL, "ot_trainer_eval: no held-out images (set --val-images)");
  const ot_train_config *cf = &t->cfg;
  ot__par *par = t->par;
  const int B = cf->batch_size, dp = ot__par_dp(par), dr = ot__par_dp_rank(par);
  if (batches <= 0) batches = cf->eval_batches;
  const int64_t n = (int64_t)batches * B < c->valid->n ? (int64_t)batches * B : c->valid->n;
  const ot_image_aug aug = aug_of(cf, false);
  const bool lockstep = par && ot__par_zero(par) == 3;
  const int64_t nch = (n + B - 1) / B, rounds = (nch + dp - 1) / dp;
  double red[4] = {0.0, 0.0, 0.0, 0.0};   // loss x images, nll x images, hits, images
  for (int64_t r = 0; r < rounds; r++) {
    const int64_t j = r * dp + dr, ch = j < nch ? j : 0;
    const bool mine = j < nch;
    if (!mine && !lockstep) continue;
    const int64_t i0 = ch * B;
    const int nb = n - i0 < B ? (int)(n - i0) : B;
    for (int k = 0; k < nb; k++) c->idx[k] = i0 + k;
    OT_TRY(ot_images_batch(c->valid, &aug, c->idx, nb, 0, 0, c->img, c->lab));
    c->enb = nb;
    double l = 0.0;
    bool counts = true;
    if (par) OT_TRY(ot__par_eval_fn(par, fwd_mb, t, nb, &l, &counts));
    else OT_TRY(fwd_mb(t, t->m, -1, 0, false, &l));
    if (!counts || !mine) continue;
    red[0] += l * nb;
    red[1] += ot_model_nll(t->m) * nb;
    red[2] += (double)top1_hits(t, nb);
    red[3] += nb;
  }
  if (par) OT_TRY(ot__par_sum(par, red, 4, "evaluation loss and accuracy all-reduce"));
  const double m = red[3];
  *loss = m > 0 ? red[0] / m : NAN;
  if (nll) *nll = m > 0 ? red[1] / m : NAN;
  if (images) *images = (int64_t)m;
  c->acc = m > 0 ? red[2] / m : NAN;
  return OT_OK;
}
