// The one trainer: model + AdamW state + data loaders; one optimizer step over
// grad_accum micro-batches (loss averaged over every non-ignored token of the
// global batch), global-norm clipping, non-finite skip, mixed precision
// (bf16 / f16 copy refreshed by the fused AdamW pass; fp16 loss scaling,
// scaler.c, unscaled in the same pass), held-out evaluation. A
// parallel layout runs the same step and evaluation through the runtime's
// hooks (dist/par.h): micro-batch schedule, gradient reduction, norm
// reduction, ZeRO shard, gather after the update.
#include "train/train_impl.h"
#include "io/data_impl.h"
#include "ot/dist.h"
#include <glob.h>
#include <math.h>
#include <stdlib.h>

void ot_trainer_free(ot_trainer *t) {
  if (!t) return;
  ot__par_free(t->par);   // first: its reduction thread reads the model's gradients
  ot_model_free(t->m);
  ot__tr_free(t->tr);
  ot__cls_free(t->cls);
  ot_mem_free(t->mom[0]);
  ot_mem_free(t->mom[1]);
  free(t->groups);
  ot_loader_close(t->train);
  ot_loader_close(t->val);
  ot_mem_free(t->x);
  ot_mem_free(t->y);
  free(t);
}

static bool glob_any(const char *pattern) {
  glob_t g;
  int r = glob(pattern, 0, NULL, &g);
  bool any = r == 0 && g.gl_pathc > 0;
  globfree(&g);
  return any;
}

// Contiguous ranges [off, off + n) of the parameter buffer with one decay
// setting: each parameter with the alignment gap after it (zeros that never
// change), neighbours with the same setting merged.
static ot_status build_groups(ot_trainer *t) {
  const int np = ot_model_param_count(t->m);
  const size_t total = ot_model_n_floats(t->m);
  t->groups = calloc((size_t)np + 1, sizeof *t->groups);
  if (!t->groups) return ot_error(OT_ENOMEM, "trainer: out of memory");
  // the table is in offset order (layout.c appends)
  size_t prev = 0;
  for (int i = 0; i < np; i++) {
    const ot_param *p = ot_model_param_at(t->m, i);
    if (p->offset < prev) return ot_error(OT_EINTERNAL, "trainer: parameter table not in offset order");
    prev = p->offset;
  }
  for (int i = 0; i < np; i++) {
    const ot_param *p = ot_model_param_at(t->m, i);
    size_t start = i == 0 ? 0 : p->offset;
    size_t end = i + 1 < np ? ot_model_param_at(t->m, i + 1)->offset : total;
    if (t->ngroups > 0 && t->groups[t->ngroups - 1].decay == p->decay) {
      t->groups[t->ngroups - 1].n = end - t->groups[t->ngroups - 1].off;
    } else {
      t->groups[t->ngroups++] = (ot__group){start, end - start, p->decay};
    }
  }
  return OT_OK;
}

static ot_status open_loaders(ot_trainer *t) {
  const ot_train_config *c = &t->cfg;
  char pat[OT_PATH_MAX + 32];
  ot_loader_config lc = {0};
  lc.vocab_size = c->model.vocab;
  lc.T = c->seq_len;
  lc.seed = c->seed;
  lc.pattern = pat;
  if (!c->eval_only && (c->train_data[0] || c->data[0])) {
    if (c->train_data[0]) snprintf(pat, sizeof pat, "%s", c->train_data);
    else OT_TRY(ot__join(pat, sizeof pat, c->data, "train_*.bin"));
    if (!glob_any(pat))
      return ot_error(OT_EINVAL, "no training shards match '%s' (make them with `ot prepare --corpus "
                      "data/shakespeare.txt --out %s`, or set --data / --train-data)", pat,
                      c->data[0] ? c->data : "DIR");
    lc.B = c->batch_size * c->grad_accum * c->data_parallel;   // one loader batch = the global batch
    lc.shuffle = c->shuffle;
    OT_TRY(ot_loader_open(&t->train, &lc));
  }
  if (c->val_data[0] || c->data[0]) {
    if (c->val_data[0]) snprintf(pat, sizeof pat, "%s", c->val_data);
    else OT_TRY(ot__join(pat, sizeof pat, c->data, "val_*.bin"));
    if (glob_any(pat)) {
      lc.B = c->batch_size;
      lc.shuffle = false;
      OT_TRY(ot_loader_open(&t->val, &lc));
    } else if (c->val_data[0] || c->eval_only) {
      return ot_error(OT_EINVAL, "no held-out shards match '%s' (set --val-data or --data)", pat);
    }
  }
  return OT_OK;
}

ot__par_config ot__train_par_config(const ot_train_config *c, const ot_run_config *run) {
  ot__par_config pc;
  memset(&pc, 0, sizeof pc);
  pc.model = c->model;
  pc.run = *run;
  pc.dp = c->data_parallel;
  pc.tp = c->tensor_parallel;
  pc.pp = c->pipeline_stages;
  pc.micro_batches = c->grad_accum;
  pc.gpipe = c->gpipe;
  pc.balanced_stages = c->balanced_stages;
  pc.overlap = c->overlap;
  pc.vocab_parallel = c->vocab_parallel;
  pc.zero = c->optimizer_shard;
  pc.zero_prefetch = c->zero_prefetch;
  pc.grad_buckets = c->grad_buckets;
  pc.fusion_layers = c->comm_fusion_layers;
  pc.comm_timeout = c->comm_timeout;
  return pc;
}

// Bytes of one of the trainer's input / target buffers ([B * T] int32 each).
static size_t io_bytes(const ot_train_config *c) {
  return (size_t)c->batch_size * (size_t)c->seq_len * sizeof(int32_t);
}

ot_status ot_train_plan_memory(const ot_train_config *c, int rank, ot_rank_memory *o) {
  static const char fn[] = "ot_train_plan_memory";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(o, fn);
  memset(o, 0, sizeof *o);
  if (c->task != OT_TASK_LM)
    return ot_error(OT_EUNSUPPORTED, "%s: memory plans cover the lm task (decoder language models); "
                    "--task %s is not planned yet", fn, c->task == OT_TASK_TRANSLATE ? "translate" : "classify");
  ot_run_config run = {c->batch_size, c->seq_len, c->dtype, c->recompute, -1};
  const ot__par_config pc = ot__train_par_config(c, &run);
  ot__par_mem pm;
  OT_TRY(ot__par_plan_rank(&pc, rank, &pm));
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) o->bytes[k] = pm.bytes[k];
  const size_t n = pm.shard_floats;
  if (!c->eval_only) o->bytes[OT_MEM_OPTIM] += 2 * (n ? n : 1) * sizeof(float);   // AdamW m, v
  o->bytes[OT_MEM_OTHER] += 2 * io_bytes(c);
  // quantization-aware training: the fake-quantized copy of the stored weights (ot_model_set_qat;
  // ZeRO-3, whose parts store less, refuses it)
  if (c->qat) o->bytes[OT_MEM_PARAMS] += pm.n_floats * sizeof(float);
  o->dp_rank = pm.dp_rank;
  o->tp_rank = pm.tp_rank;
  o->pp_rank = pm.pp_rank;
  o->layer0 = pm.layer0;
  o->layer1 = pm.layer1;
  o->slots = pm.slots;
  o->n_floats = pm.n_floats;
  o->act_saved_layer = pm.model.act_saved_layer;
  o->vocab_rows = pm.vocab_rows;
  o->chunk_rows = pm.chunk_rows;
  // (ot__par_init_params: ZeRO-3's whole initial weights, then the moments and x, y)
  size_t total = 0;
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) total += o->bytes[k];
  o->create_peak = total;
  if (pc.zero == 3 && ot__par_wanted(c->data_parallel, c->tensor_parallel, c->pipeline_stages)) {
    const size_t init = total - (o->bytes[OT_MEM_OPTIM] - pm.bytes[OT_MEM_OPTIM]) - 2 * io_bytes(c) +
                        (pm.n_floats ? pm.n_floats : 1) * sizeof(float);
    if (init > total) o->create_peak = init;
  }
  return OT_OK;
}

ot_status ot_trainer_create(ot_trainer **out, const ot_train_config *cin) {
  static const char fn[] = "ot_trainer_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(cin, fn);
  ot_train_config c = *cin;
  OT_TRY(ot_train_config_resolve(&c));
  return ot__trainer_create(out, &c);
}

ot_status ot__trainer_create(ot_trainer **out, const ot_train_config *resolved) {
  static const char fn[] = "ot_trainer_create";
  *out = NULL;
  ot_trainer *t = calloc(1, sizeof *t);
  if (!t) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  t->cfg = *resolved;
  const ot_train_config *c = &t->cfg;
  ot_status s = OT_OK;
  if (c->threads > 0) ot_threads_set(c->threads);
  ot_run_config run = {c->batch_size, c->seq_len, c->dtype, c->recompute, -1};
  if (c->task == OT_TASK_TRANSLATE) {   // the bitexts first: they size the model's buffers
    s = ot__tr_create(t);
  } else if (c->task == OT_TASK_CLASSIFY) {   // the image sets and the vision transformer
    s = ot__cls_create(t);
  } else if (ot__par_wanted(c->data_parallel, c->tensor_parallel, c->pipeline_stages)) {
    const ot__par_config pc = ot__train_par_config(c, &run);
    s = ot__par_create(&pc, &t->m, &t->par);
  } else {
    s = ot_model_create(&t->m, &c->model, &run);
  }
  if (s == OT_OK) s = t->par ? ot__par_init_params(t->par, c->seed) : ot_model_init(t->m, c->seed);
  if (s == OT_OK && c->qat) s = ot_model_set_qat(t->m, c->qat_group);
  if (s == OT_OK && c->task == OT_TASK_LM && c->label_smoothing > 0.0f)
    s = ot_model_set_label_smoothing(t->m, c->label_smoothing);
  size_t s0 = 0, s1 = s == OT_OK ? ot_model_n_floats(t->m) : 0;
  if (s == OT_OK && t->par) ot__par_shard(t->par, &s0, &s1);   // ZeRO: this rank's share
  const size_t n = s1 - s0;
  if (s == OT_OK && !c->eval_only) {
    for (int k = 0; k < 2 && s == OT_OK; k++) {
      t->mom[k] = ot_mem_alloc((n ? n : 1) * sizeof(float), OT_MEM_OPTIM);
      if (!t->mom[k]) s = OT_ENOMEM;
      else memset(t->mom[k], 0, n * sizeof(float));
    }
  }
  if (s == OT_OK) s = build_groups(t);
  if (s == OT_OK) {
    size_t bt = io_bytes(c);
    t->x = ot_mem_alloc(bt, OT_MEM_OTHER);
    t->y = ot_mem_alloc(bt, OT_MEM_OTHER);
    if (!t->x || !t->y) s = OT_ENOMEM;
  }
  if (s == OT_OK && !t->tr && !t->cls) s = open_loaders(t);
  if (s != OT_OK) {
    ot_trainer_free(t);
    return s;
  }
  t->rng = c->seed ^ 0x7472616e696e6721ull;
  ot__scaler_init(&t->scaler, c);
  t->flops_tok = ot_model_flops_per_token(&c->model, c->seq_len);
  *out = t;
  return OT_OK;
}

ot_model *ot_trainer_model(ot_trainer *t) { return t ? t->m : NULL; }
const ot_train_config *ot_trainer_config(const ot_trainer *t) { return t ? &t->cfg : NULL; }
int64_t ot_trainer_steps_done(const ot_trainer *t) { return t ? t->step : 0; }
int64_t ot_trainer_updates(const ot_trainer *t) { return t ? t->updates : 0; }
void ot_trainer_loss_scale(const ot_trainer *t, float *scale, int64_t *clean) {
  if (scale) *scale = t && t->scaler.on ? t->scaler.scale : 0.0f;
  if (clean) *clean = t && t->scaler.on ? t->scaler.clean : 0;
}
float *ot_trainer_moment(ot_trainer *t, int which) {
  return t && (which == 0 || which == 1) ? t->mom[which] : NULL;
}
bool ot_trainer_has_val(const ot_trainer *t) {
  return t && (t->val || ot__tr_has_val(t) || ot__cls_has_val(t));
}
double ot_trainer_flops_per_token(const ot_trainer *t) { return t ? t->flops_tok : 0; }

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The global count of scored targets of rows [nrows, T + 1] (every
// micro-batch's loss is divided by it); 1 when there are none.
static float lm_count(const int32_t *rows, size_t nrows, int T) {
  int64_t count = 0;
  for (size_t i = 0; i < nrows; i++)
    for (int j = 1; j <= T; j++) count += rows[i * ((size_t)T + 1) + (size_t)j] != -1;
  return count > 0 ? (float)count : 1.0f;
}

// One optimizer step on the global batch rows [dp * A * B, T + 1] (every
// layout): this data-parallel rank's A micro-batches forward and backward (one
// process here, else the runtime's schedule and gradient reduction), the global
// loss and squared gradient norm; the update is skipped when the loss OR the
// norm is not finite (weights, moments and updates unchanged), else clipped
// AdamW over this rank's shard and, in parallel, the gather of the shards.
// With loss scaling the backward ran on loss x scale: the norm, the clip and
// AdamW's grad_scale divide by it (no unscaling pass), and a skip backs the
// dynamic scale off on every rank alike (the non-finite flag is world-wide).
static ot_status step_on(ot_trainer *t, const int32_t *rows, ot_step_info *info) {
  const ot_train_config *c = &t->cfg;
  ot__par *par = t->par;
  const int B = c->batch_size, T = c->seq_len, A = c->grad_accum, dp = ot__par_dp(par);
  const size_t rowlen = (size_t)T + 1;
  ot_step_info st;
  memset(&st, 0, sizeof st);
  double t0 = ot_now();
  ot_model *m = t->m;
  const size_t n = ot_model_n_floats(m);
  float *w = ot_model_params(m), *g = ot_model_grads(m);
  uint16_t *pb = ot_model_params_bf16(m);
  const float ls = ot__scaler_scale(&t->scaler);
  OT_TRY(ot_model_set_loss_scale(m, ls));
  double loss = 0.0, sumsq = 0.0;
  bool finite = true;
  int64_t ntok = (int64_t)dp * A * B * T, ntgt = ntok;
  if (t->cls) {   // classify: the step's images (parallel: on the runtime's schedule)
    OT_TRY(ot__cls_micro_batches(t, &loss, &finite, &ntok, &ntgt));
  } else if (t->tr) {   // translate: this rank's part of the bitext batcher's global batch
    OT_TRY(ot__tr_micro_batches(t, &loss, &finite, &ntok, &ntgt));
  } else if (par) {
    OT_TRY(ot__par_micro_batches(par, rows + (size_t)ot__par_dp_rank(par) * A * B * rowlen, t->x, t->y,
                                 lm_count(rows, (size_t)dp * A * B, T), &loss, &finite));
  } else {
    const float fcount = lm_count(rows, (size_t)dp * A * B, T);
    const int32_t *mine = rows;
    for (int k = 0; k < A && finite; k++) {
      ot__split_rows(t->x, t->y, mine + (size_t)k * B * rowlen, B, T);
      double l = 0.0;
      OT_TRY(ot_model_forward(m, t->x, t->y, B, T, fcount, true, &l));
      loss += l;
      if (!isfinite(l)) { finite = false; break; }   // the step is lost anyway
      OT_TRY(ot_model_backward(m));
    }
  }
  size_t s0 = 0, s1 = n;   // this rank's shard (ZeRO), else the whole buffer
  if (par) ot__par_shard(par, &s0, &s1);
  float *gs = par ? ot__par_shard_grads(par) : g;   // [s1 - s0], the gradients this rank applies
  if (s1 > s0 && ot__scaler_test_inf(t->step + 1, ot_dist_world_rank())) gs[0] = INFINITY;
  if (par) {
    // loss scaling: every rank checks what it will apply (a replica or shard the norm
    // does not count included), and the reduction makes the flag world-wide
    if (finite && t->scaler.on && !isfinite(ot_sumsq(gs, s1 - s0))) finite = false;
    OT_TRY(ot__par_reduce_norm(par, &loss, &finite, &sumsq));
  } else if (finite) {
    sumsq = ot_sumsq(g, n);
  }
  // the one rule: a non-finite loss or gradient norm skips the update
  finite = finite && isfinite(loss);
  const double norm = finite ? sqrt(sumsq) / ls : NAN;
  const float coef = ot_clip_coef(norm, c->grad_clip);
  ot_lr_schedule sch = ot_train_schedule(c);
  st.lr = ot_lr_at(&sch, t->step);
  st.loss = finite ? loss : NAN;
  st.grad_norm = norm;
  st.tokens = ntok;   // translate: source + target tokens
  st.tgt_tokens = ntgt;
  st.loss_scale = t->scaler.on ? ls : 0.0f;
  if (!finite || !isfinite(norm) || isnan(coef)) {
    st.skipped = true;
    st.clip = NAN;
    st.overflow = t->scaler.on && t->scaler.dynamic && isfinite(loss);
  } else {
    float *ws = par ? ot__par_shard_params(par) : w;         // [s1 - s0]
    uint16_t *pbu = par && !ot__par_update_writes_bf16(par) ? NULL : pb;
    OT_PROF_BEGIN("optimizer", 0.0, 0.0);
    ot_adamw_cfg ac = {st.lr, c->beta1, c->beta2, c->eps, 0.0f, t->updates + 1};
    ot_status s = OT_OK;
    for (int i = 0; i < t->ngroups && s == OT_OK; i++) {
      const ot__group *G = &t->groups[i];
      size_t a = G->off > s0 ? G->off : s0, b = G->off + G->n < s1 ? G->off + G->n : s1;
      if (a >= b) continue;
      ac.weight_decay = G->decay ? c->weight_decay : 0.0f;
      s = ot_adamw_dt(ws + (a - s0), gs + (a - s0), t->mom[0] + (a - s0), t->mom[1] + (a - s0),
                      pbu ? pbu + a : NULL, c->dtype, b - a, &ac, coef / ls);
    }
    OT_PROF_STOP();
    OT_TRY(s);
    if (par) OT_TRY(ot__par_gather(par));
    if (c->qat) OT_TRY(ot_model_sync_qat(m));   // the fake-quantized copy of the new weights
    t->updates++;
    st.clip = coef;
  }
  ot__scaler_update(&t->scaler, st.skipped);
  if (par) ot__par_zero_grads(par);
  else ot_model_zero_grad(m);
  t->step++;
  rng_next(&t->rng);
  if (par && c->check_replicas > 0 && t->step % c->check_replicas == 0)
    OT_TRY(ot__par_check_replicas(par, t->step));
  st.step = t->step;
  st.seconds = ot_now() - t0;
  if (info) *info = st;
  return OT_OK;
}

ot_status ot_trainer_step_on(ot_trainer *t, const int32_t *rows, ot_step_info *info) {
  static const char fn[] = "ot_trainer_step_on";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(rows, fn);
  if (t->tr || t->cls)
    return ot_error(OT_EINVAL, "%s: a %s trainer takes its batches from its data (ot_trainer_step)", fn,
                    t->tr ? "translate" : "classify");
  if (t->cfg.eval_only || !t->mom[0])
    return ot_error(OT_EINVAL, "%s: this trainer was created for evaluation only", fn);
  OT_PROF_BEGIN("train_step", t->flops_tok * t->cfg.batch_size * t->cfg.grad_accum * t->cfg.seq_len, 0.0);
  ot_status s = step_on(t, rows, info);
  OT_PROF_STOP();
  if (s != OT_OK) ot_model_zero_grad(t->m);
  return s;
}

ot_status ot_trainer_step(ot_trainer *t, ot_step_info *info) {
  static const char fn[] = "ot_trainer_step";
  OT_CHECK_PTR(t, fn);
  if (t->tr || t->cls) {
    if (t->cfg.eval_only || !t->mom[0])
      return ot_error(OT_EINVAL, "%s: this trainer was created for evaluation only", fn);
    OT_PROF_BEGIN("train_step", 0.0, 0.0);
    ot_status s = step_on(t, NULL, info);
    OT_PROF_STOP();
    if (s != OT_OK) ot_model_zero_grad(t->m);
    return s;
  }
  if (!t->train)
    return ot_error(OT_EINVAL, "%s: no training data (set --data or --train-data)", fn);
  const int32_t *rows = NULL;
  double t0 = ot_now();
  OT_PROF_BEGIN("data", 0.0, 0.0);
  ot_status s = ot_loader_next(t->train, &rows);
  OT_PROF_STOP();
  OT_TRY(s);
  double td = ot_now() - t0;
  OT_TRY(ot_trainer_step_on(t, rows, info));
  if (info) info->seconds += td;
  return OT_OK;
}

// Mean loss over rows [nrows, T + 1] in batch_size chunks (every layout: the
// chunks dealt round-robin to the data-parallel ranks, each through the
// pipeline; the sums reduced over the world).
ot_status ot_trainer_eval_on(ot_trainer *t, const int32_t *rows, int nrows, double *loss,
                             int64_t *tokens) {
  static const char fn[] = "ot_trainer_eval_on";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(rows, fn);
  OT_CHECK_PTR(loss, fn);
  OT_CHECK_POS(nrows, fn);
  ot__par *par = t->par;
  const int B = t->cfg.batch_size, T = t->cfg.seq_len, dp = ot__par_dp(par), dr = ot__par_dp_rank(par);
  double red[2] = {0.0, 0.0};   // loss x tokens, tokens
  // ZeRO-3: a forward gathers weights over the data-parallel group, so every dp rank runs
  // one forward per round; a rank without a chunk of its own runs chunk 0 uncounted
  const bool lockstep = par && ot__par_zero(par) == 3;
  const int nch = (nrows + B - 1) / B, rounds = (nch + dp - 1) / dp;
  for (int k = 0; k < rounds; k++) {
    const int j = k * dp + dr, r = (j < nch ? j : 0) * B;
    const bool mine = j < nch;
    if (!mine && !lockstep) continue;
    int b = nrows - r < B ? nrows - r : B;
    int64_t n = ot__split_rows(t->x, t->y, rows + (size_t)r * (T + 1), b, T);
    if (n == 0 && !lockstep) continue;
    double l = 0.0;
    bool counts = true;
    if (par) OT_TRY(ot__par_eval_chunk(par, t->x, t->y, b, n > 0 ? (float)n : 1.0f, &l, &counts));
    else OT_TRY(ot_model_forward(t->m, t->x, t->y, b, T, (float)n, false, &l));
    if (counts && mine && n > 0) {
      red[0] += l * (double)n;
      red[1] += (double)n;
    }
  }
  if (par) OT_TRY(ot__par_sum(par, red, 2, "evaluation loss all-reduce"));
  *loss = red[1] > 0 ? red[0] / red[1] : NAN;
  if (tokens) *tokens = (int64_t)red[1];
  return OT_OK;
}

ot_status ot_trainer_eval_nll(ot_trainer *t, int batches, double *loss, double *nll,
                              int64_t *tokens) {
  static const char fn[] = "ot_trainer_eval";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(loss, fn);
  if (t->tr || t->cls) {
    OT_PROF_BEGIN("eval", 0.0, 0.0);
    ot_status s = t->cls ? ot__cls_eval(t, batches, loss, nll, tokens)
                         : ot__tr_eval(t, batches, loss, nll, tokens);
    OT_PROF_STOP();
    return s;
  }
  OT_TRY(ot_trainer_eval(t, batches, loss, tokens));
  if (nll) *nll = t->cfg.label_smoothing > 0.0f ? NAN : *loss;
  return OT_OK;
}

ot_status ot_trainer_eval(ot_trainer *t, int batches, double *loss, int64_t *tokens) {
  static const char fn[] = "ot_trainer_eval";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(loss, fn);
  if (t->tr || t->cls) return ot_trainer_eval_nll(t, batches, loss, NULL, tokens);
  if (!t->val) return ot_error(OT_EINVAL, "%s: no held-out split (no val_*.bin in --data; set --val-data)", fn);
  if (batches <= 0) batches = t->cfg.eval_batches;
  int64_t avail = ot_loader_windows(t->val) / t->cfg.batch_size;
  if (avail < 1) avail = 1;
  if (batches > avail) batches = (int)avail;
  OT_PROF_BEGIN("eval", 0.0, 0.0);
  ot_loader_reset(t->val);
  double sum = 0.0;
  int64_t total = 0;
  ot_status s = OT_OK;
  for (int i = 0; i < batches && s == OT_OK; i++) {
    const int32_t *rows = NULL;
    s = ot_loader_next(t->val, &rows);
    double l = 0.0;
    int64_t n = 0;
    if (s == OT_OK) s = ot_trainer_eval_on(t, rows, t->cfg.batch_size, &l, &n);
    if (s == OT_OK && n > 0) { sum += l * (double)n; total += n; }
  }
  OT_PROF_STOP();
  OT_TRY(s);
  *loss = total > 0 ? sum / (double)total : NAN;
  if (tokens) *tokens = total;
  return OT_OK;
}
