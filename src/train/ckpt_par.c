// Checkpoints of a parallel run in the one-process format: every whole tensor
// (weights and both AdamW moments) is assembled on world rank 0 from the
// slices the ranks hold, and rank 0 writes the one-process checkpoint with the
// engine's writer; loading reads the one-process checkpoint on every rank and
// keeps each rank's slices. So a checkpoint from any layout loads into any
// other layout (or one process) and continues with the same losses. The
// parallel runtime only moves the tensors (dist/par.h: gather to rank 0,
// agreement between the ranks).
#include "dist/par.h"
#include "train/train_impl.h"
#include <stdlib.h>

// The smallest run of t's model (B = T = 1; an encoder-decoder's source S = 1).
static ot_run_config tiny_run(const ot_trainer *t) {
  const ot_arch_kind a = t->cfg.model.arch;   // (a ViT: the CLS token and one patch)
  ot_run_config run = {1, a == OT_ARCH_VIT ? 2 : 1, OT_F32, OT_RECOMPUTE_NONE, -1, a == OT_ARCH_ENCDEC ? 1 : 0};
  return run;
}

// A one-process trainer over a whole model (B = T = 1: no training
// buffers to speak of) that shares t's config, counters and data loader.
static ot_status shell_create(const ot_trainer *t, ot_trainer *sh) {
  *sh = *t;
  sh->par = NULL;
  sh->m = NULL;
  sh->mom[0] = sh->mom[1] = NULL;
  const ot_run_config run = tiny_run(t);
  OT_TRY(ot_model_create(&sh->m, &t->cfg.model, &run));
  const size_t n = ot_model_n_floats(sh->m);
  for (int k = 0; k < 2; k++) {
    sh->mom[k] = ot_mem_alloc(n * sizeof(float), OT_MEM_OTHER);
    if (!sh->mom[k]) return ot_error(OT_ENOMEM, "checkpoint: out of memory for %zu floats", n);
    memset(sh->mom[k], 0, n * sizeof(float));
  }
  return OT_OK;
}

static void shell_free(ot_trainer *sh) {
  ot_model_free(sh->m);
  ot_mem_free(sh->mom[0]);
  ot_mem_free(sh->mom[1]);
}

// The local parameter whose slice of whole tensor gi this rank contributes, or -1.
static int contributor(const ot_trainer *t, int gi, const char *name) {
  const ot_model *m = t->m;
  int i = ot_model_param_find(m, name);
  (void)gi;
  if (i < 0) return -1;
  const ot_param *q = ot_model_param_at(m, i);
  if (!ot_model_is_first(m) && q->kind == OT_PT_EMBED) return -1;  // a later stage's copy
  if (!ot_model_param_is_split(m, i) && ot_model_part_of(m)->tp_rank != 0) return -1;
  return i;
}

// Full-length local moment buffers (zeros outside this rank's ZeRO shard).
static ot_status local_moments(ot_trainer *t, float *full[2]) {
  size_t s0, s1, n = ot_model_n_floats(t->m);
  ot__par_shard(t->par, &s0, &s1);
  for (int k = 0; k < 2; k++) {
    full[k] = calloc(n ? n : 1, sizeof(float));
    if (!full[k]) return ot_error(OT_ENOMEM, "checkpoint: out of memory for %zu floats", n);
    if (t->mom[k]) memcpy(full[k] + s0, t->mom[k], (s1 - s0) * sizeof(float));
  }
  return OT_OK;
}

ot_status ot__ckpt_par_save(ot_trainer *t, const char *dir) {
  ot__par *P = t->par;
  const bool root = ot__par_rank(P) == 0;
  const int dp_rank = ot__par_dp_rank(P);
  ot_trainer sh;
  memset(&sh, 0, sizeof sh);
  float *mf[2] = {NULL, NULL}, *buf = NULL;
  ot_status s = OT_OK;
  // every rank builds the whole layout's table (names, sizes) the same way
  const ot_run_config run = tiny_run(t);
  ot_model *whole = NULL;
  if (root) {
    s = shell_create(t, &sh);
    whole = sh.m;
  } else {
    s = ot_model_create(&whole, &t->cfg.model, &run);
  }
  if (s == OT_OK) s = local_moments(t, mf);
  const bool sharded = t->cfg.optimizer_shard > 0 && ot__par_dp(P) > 1;
  // ZeRO-3: the weights are sharded like the moments (each dp rank gives its shard)
  const bool wsharded = ot__par_zero(P) == 3 && ot__par_dp(P) > 1;
  float *wl = NULL;
  if (s == OT_OK && ot__par_zero(P) == 3) {
    if (!(wl = calloc(ot_model_n_floats(t->m) + 1, sizeof(float)))) s = ot_error(OT_ENOMEM, "checkpoint: out of memory");
    else ot__par_local_params(P, wl);
  }
  size_t big = 0;
  for (int gi = 0; s == OT_OK && gi < ot_model_param_count(whole); gi++)
    if (ot_model_param_at(whole, gi)->numel > big) big = ot_model_param_at(whole, gi)->numel;
  if (s == OT_OK && !(buf = malloc(big * sizeof(float))))
    s = ot_error(OT_ENOMEM, "checkpoint: out of memory");
  // agree on success before the collective loop (a failed rank must not leave the others waiting)
  bool all = ot__par_all_ok(P, s == OT_OK);
  for (int gi = 0; all && gi < ot_model_param_count(whole); gi++) {
    const ot_param *wp = ot_model_param_at(whole, gi);
    const int i = contributor(t, gi, wp->name);
    for (int what = 0; what < 3; what++) {
      memset(buf, 0, wp->numel * sizeof(float));
      const float *src = what == 0 ? (wl ? wl : ot_model_params(t->m)) : mf[what - 1];
      // weights, and the moments without ZeRO, are replicated over the data-parallel ranks:
      // rank 0 gives them; under ZeRO each dp rank gives its shard (zeros elsewhere)
      if (i >= 0 && (dp_rank == 0 || (what > 0 && sharded) || (what == 0 && wsharded)))
        ot_model_part_get(t->m, i, src, buf);
      float *dst = !root ? NULL : what == 0 ? ot_model_params(sh.m) + wp->offset
                                            : sh.mom[what - 1] + wp->offset;
      s = ot__par_gather_sum(P, buf, wp->numel);
      if (s != OT_OK) { all = false; break; }
      if (root) memcpy(dst, buf, wp->numel * sizeof(float));
    }
  }
  if (s == OT_OK && !all) s = ot_error(OT_EIO, "checkpoint %s: another rank failed to prepare its part", dir);
  if (s == OT_OK && root) s = ot_trainer_save(&sh, dir);
  // everyone learns whether rank 0 wrote it
  const bool ok = ot__par_root_ok(P, s == OT_OK);
  if (s == OT_OK && !ok) s = ot_error(OT_EIO, "checkpoint %s: rank 0 could not write it", dir);
  free(buf);
  free(wl);
  free(mf[0]);
  free(mf[1]);
  if (root) shell_free(&sh);
  else ot_model_free(whole);
  return s;
}

ot_status ot__par_whole_weights(ot_trainer *t, ot_model *whole) {
  ot__par *P = t->par;
  const bool root = ot__par_rank(P) == 0;
  const ot_run_config run = tiny_run(t);
  ot_model *table = root ? whole : NULL;   // the whole layout's names and sizes, on every rank
  ot_status s = root ? (whole ? OT_OK : ot_error(OT_EINVAL, "ot__par_whole_weights: no model on rank 0"))
                     : ot_model_create(&table, &t->cfg.model, &run);
  // ZeRO-3: each dp rank gives its shard of the weights (zeros elsewhere), as the save does
  const bool z3 = ot__par_zero(P) == 3;
  float *wl = NULL;
  if (s == OT_OK && z3) {
    if (!(wl = calloc(ot_model_n_floats(t->m) + 1, sizeof(float)))) s = ot_error(OT_ENOMEM, "weight gather: out of memory");
    else ot__par_local_params(P, wl);
  }
  float *buf = NULL;
  size_t big = 0;
  for (int gi = 0; s == OT_OK && gi < ot_model_param_count(table); gi++)
    if (ot_model_param_at(table, gi)->numel > big) big = ot_model_param_at(table, gi)->numel;
  if (s == OT_OK && !(buf = malloc((big ? big : 1) * sizeof(float))))
    s = ot_error(OT_ENOMEM, "weight gather: out of memory");
  bool all = ot__par_all_ok(P, s == OT_OK);
  const int dp_rank = ot__par_dp_rank(P);
  for (int gi = 0; all && gi < ot_model_param_count(table); gi++) {
    const ot_param *wp = ot_model_param_at(table, gi);
    const int i = contributor(t, gi, wp->name);
    memset(buf, 0, wp->numel * sizeof(float));
    if (i >= 0 && (dp_rank == 0 || z3)) ot_model_part_get(t->m, i, wl ? wl : ot_model_params(t->m), buf);
    s = ot__par_gather_sum(P, buf, wp->numel);
    if (s != OT_OK) break;
    if (root) memcpy(ot_model_params(whole) + wp->offset, buf, wp->numel * sizeof(float));
  }
  if (s == OT_OK && !all) s = ot_error(OT_EIO, "weight gather: another rank failed to prepare its part");
  if (s == OT_OK && root) s = ot_model_sync_bf16(whole);
  free(buf);
  free(wl);
  if (!root) ot_model_free(table);
  return s;
}

ot_status ot__ckpt_par_load(ot_trainer *t, const char *dir, bool weights_only) {
  ot_trainer sh;
  memset(&sh, 0, sizeof sh);
  ot_status s = shell_create(t, &sh);
  if (s == OT_OK) s = ot_trainer_load(&sh, dir, weights_only);
  float *mf[2] = {NULL, NULL}, *wf = NULL;
  const size_t n = ot_model_n_floats(t->m);
  for (int k = 0; k < 2 && s == OT_OK; k++)
    if (!(mf[k] = calloc(n ? n : 1, sizeof(float)))) s = ot_error(OT_ENOMEM, "checkpoint: out of memory");
  // ZeRO-3: the stage's whole layout is assembled here, then each rank keeps its shard
  const bool z3 = ot__par_zero(t->par) == 3;
  if (s == OT_OK && !(wf = z3 ? calloc(n ? n : 1, sizeof(float)) : ot_model_params(t->m)))
    s = ot_error(OT_ENOMEM, "checkpoint: out of memory");
  for (int i = 0; s == OT_OK && i < ot_model_param_count(t->m); i++) {
    const ot_param *q = ot_model_param_at(t->m, i);
    int gi = ot_model_param_find(sh.m, q->name);
    if (gi < 0) { s = ot_error(OT_EINTERNAL, "checkpoint: '%s' is not in the whole model", q->name); break; }
    const size_t off = ot_model_param_at(sh.m, gi)->offset;
    s = ot_model_part_put(t->m, i, wf, ot_model_params(sh.m) + off);
    for (int k = 0; k < 2 && s == OT_OK; k++) s = ot_model_part_put(t->m, i, mf[k], sh.mom[k] + off);
  }
  if (s == OT_OK && !weights_only && t->mom[0]) {
    size_t s0, s1;
    ot__par_shard(t->par, &s0, &s1);
    for (int k = 0; k < 2; k++) memcpy(t->mom[k], mf[k] + s0, (s1 - s0) * sizeof(float));
  }
  if (s == OT_OK) {
    t->step = sh.step;
    t->updates = sh.updates;
    t->rng = sh.rng;
    t->scaler = sh.scaler;
    s = ot__par_set_params(t->par, wf);
  }
  if (z3) free(wf);
  free(mf[0]);
  free(mf[1]);
  shell_free(&sh);
  // a rank that failed ends the job's step together with the others
  const bool all = ot__par_all_ok(t->par, s == OT_OK);
  if (s == OT_OK && !all) s = ot_error(OT_EIO, "checkpoint %s: another rank could not load it", dir);
  return s;
}
