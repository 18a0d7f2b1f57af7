// The parallel runtime (hooks of dist/par.h): one optimizer step of a data x tensor x pipeline
// parallel layout that equals the one-process step on the same global batch.
//
// Data: every rank reads the same global batch of data_parallel x grad_accum
// x batch_size rows; the trainer hands data-parallel rank d rows
// [d A B, (d + 1) A B), micro-batch k of them rows [k B, (k + 1) B). Each micro-batch's loss is
// divided by the global count of scored targets, so the gradients summed over
// the data-parallel ranks are the one-process gradients.
// Pipeline: 1F1B (warm-up forwards, then one forward + one backward, then the
// remaining backwards) or GPipe; activations and their gradients move by MPI
// point-to-point; stage s holds min(stages - s, micro-batches) micro-batches
// of activations under 1F1B, all of them under GPipe.
// Gradients: reduced over the data-parallel group in grad_buckets contiguous
// ranges of the parameter buffer; with overlap each bucket is handed to a
// reduction thread as soon as the backward of the last micro-batch has made it
// final (the model reports it), else all are reduced after the backward. A
// tied embedding's gradient is then summed between the first and last stage.
// The trainer (src/train/trainer.c) then takes the global gradient norm
// (ot__par_reduce_norm: each element counted once over the world), clips and
// updates; with ZeRO each data-parallel rank updates its 1/dp shard of the
// buffer (its share of the moments only) and ot__par_gather gathers the shards.
#include "dist_impl.h"
#include "io/data_impl.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

enum { TAG_FWD = 11, TAG_BWD = 12 };

// --------------------------------------------------------------- buckets ----
// One reduction job: bucket k (ZeRO 0/1) or unit k (ZeRO-2).
static ot_status run_job(ot__par *p, int k) {
  if (p->zero >= 2) return ot__z2_unit_reduce(p, k);
  char what[96];
  snprintf(what, sizeof what, "data-parallel gradient all-reduce (bucket %d of %d)", k + 1, p->nb);
  return ot__allreduce(&p->g, p->g.dp_comm, ot_model_grads(p->m) + p->bstart[k],
                       p->bstart[k + 1] - p->bstart[k], OT_F32, OT_RED_SUM, what);
}

// Jobs pending at once: every bucket (ZeRO 0/1), or Z2_BUFS units (ZeRO-2 waits for
// all but Z2_BUFS - 1 after each launch).
static int queue_cap(const ot__par *p) { return (p->nb > Z2_BUFS ? p->nb : Z2_BUFS) + 1; }

static void *reducer(void *arg) {
  ot__par *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->qhead == p->qtail && !p->th_stop) pthread_cond_wait(&p->cv, &p->mu);
    if (p->qhead == p->qtail && p->th_stop) break;
    int k = p->queue[p->qhead++ % queue_cap(p)];
    pthread_mutex_unlock(&p->mu);
    ot_status s = run_job(p, k);
    pthread_mutex_lock(&p->mu);
    if (s != OT_OK && p->th_err == OT_OK) {
      p->th_err = s;
      snprintf(p->th_msg, sizeof p->th_msg, "%s", ot_last_error());
    }
    p->pending--;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

// Runs job k on the reduction thread (overlap) or here and now.
ot_status ot__par_launch_job(ot__par *p, int k) {
  if (!p->th_up) return run_job(p, k);
  pthread_mutex_lock(&p->mu);
  p->queue[p->qtail++ % queue_cap(p)] = k;
  p->pending++;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return OT_OK;
}

void ot__par_note_error(ot__par *p, ot_status s) {
  if (s == OT_OK) return;
  if (p->th_up) pthread_mutex_lock(&p->mu);
  if (p->th_err == OT_OK) {
    p->th_err = s;
    snprintf(p->th_msg, sizeof p->th_msg, "%s", ot_last_error());
  }
  if (p->th_up) pthread_mutex_unlock(&p->mu);
}

ot_status ot__par_wait_jobs(ot__par *p, int left) {
  if (!p->th_up) return p->th_err == OT_OK ? OT_OK : ot_error(p->th_err, "%s", p->th_msg);
  ot__wd_begin(&p->g, "waiting for the data-parallel gradient all-reduce", -1);
  pthread_mutex_lock(&p->mu);
  while (p->pending > left) pthread_cond_wait(&p->cv, &p->mu);
  ot_status s = p->th_err;
  pthread_mutex_unlock(&p->mu);
  ot__wd_end();
  return s == OT_OK ? OT_OK : ot_error(s, "%s", p->th_msg);
}

// Model callback: every gradient at offsets >= from is final for this micro-batch.
static void grads_ready(void *ctx, size_t from) {
  ot__par *p = ctx;
  if (p->zero >= 2) {
    ot__z2_grads_ready(p, from);
    return;
  }
  if (!p->last_mb || p->g.dp == 1 || !p->overlap) return;
  for (int k = p->nb - 1; k >= 0; k--)
    if (!p->launched[k] && p->bstart[k] >= from) {
      p->launched[k] = true;
      ot__par_launch_job(p, k);
    }
}

static void vocab_chunk(void *ctx, int param, int row0, int rows) {
  ot__z2_vocab_chunk(ctx, param, row0, rows);
}

static void need_block(void *ctx, int l, bool backward) { ot__z3_need_block(ctx, l, backward); }
static void need_rows(void *ctx, int i, int r0, int rows) { ot__z3_need_rows(ctx, i, r0, rows); }

// Completes every bucket's reduction (launching the rest).
static ot_status finish_buckets(ot__par *p) {
  if (p->zero >= 2) return ot__z2_finish(p);
  if (p->g.dp == 1) return OT_OK;
  for (int k = p->nb - 1; k >= 0; k--)
    if (!p->launched[k]) OT_TRY(ot__par_launch_job(p, k));
  OT_TRY(ot__par_wait_jobs(p, 0));
  for (int k = 0; k < p->nb; k++) p->launched[k] = false;
  return OT_OK;
}

// ------------------------------------------------------------- tp hooks -----
static ot_status tp_allreduce(void *ctx, void *buf, size_t n, ot_dtype dt, ot_red_op op) {
  ot__par *p = ctx;
  return ot__allreduce(&p->g, p->g.tp_comm, buf, n, dt, op, "tensor-parallel all-reduce");
}

// ---------------------------------------------------------------- create ----
void ot__par_free(ot__par *p) {
  if (!p) return;
  if (p->th_up) {
    pthread_mutex_lock(&p->mu);
    p->th_stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
  }
  ot__z3_free(p);
  ot_mem_free(p->rbuf);
  ot_mem_free(p->rbuf16);
  ot__z2_free(p);
  ot__grid_free(&p->g);
  free(p->counts);
  free(p->displs);
  free(p->own);
  free(p->bstart);
  free(p->launched);
  free(p->queue);
  free(p->freq);
  free(p->ereq);
  ot_mem_free(p->gsend);
  ot_mem_free(p->dsend);
  free(p);
}

int ot__par_dp(const ot__par *p) { return p ? p->g.dp : 1; }
int ot__par_dp_rank(const ot__par *p) { return p ? p->g.dp_rank : 0; }
int ot__par_rank(const ot__par *p) { return p ? p->g.rank : 0; }
int ot__par_tp_rank(const ot__par *p) { return p ? p->g.tp_rank : 0; }
int ot__par_zero(const ot__par *p) { return p ? p->zero : 0; }
double ot__par_comm_seconds(const ot__par *p) { return p ? p->comm_s : 0.0; }

// FLOPs of one micro-batch's forward of block k (of the combined stack) and of the head,
// per the model config and the run's lengths (the backward is twice: the ratio is the same).
static double block_cost(const ot__par_config *c, int k) {
  const ot_model_config *mc = &c->model;
  const double C = mc->d_model, D = ot_model_head_dim(mc), Hq = mc->n_heads, Hkv = mc->n_kv_heads;
  const double F = mc->d_ff, Fa = mc->mlp == OT_MLP_SWIGLU ? 2 * F : F;
  const double gemm = (Hq + 2 * Hkv) * D * C + C * Hq * D + Fa * C + C * F;   // MACs per token
  const double T = c->run.T, S = c->run.S > 0 ? c->run.S : c->run.T;
  const int nenc = mc->arch == OT_ARCH_ENCDEC ? mc->n_enc_layers : 0;
  if (k < nenc) return S * (gemm + 2.0 * Hq * D * S);                        // bidirectional
  double dec = T * (gemm + Hq * D * (T + 1));                                // causal average
  if (nenc) dec += T * (2.0 * C * Hq * D + 2.0 * Hq * D * S) + S * 2.0 * C * Hkv * D;   // cross
  return dec;
}
static double head_cost(const ot__par_config *c) {
  const double vl = (double)ot_model_vocab_padded(&c->model) / (c->vocab_parallel && c->tp > 1 ? c->tp : 1);
  return (double)c->run.T * c->model.d_model * vl;
}

void ot__par_stage_layers(const ot__par_config *c, int s, int *l0, int *l1) {
  const int L = ot_model_n_blocks(&c->model), pp = c->pp;
  if (!c->balanced_stages || pp <= 1 || pp >= L) {   // L / pp each, the first L % pp one more
    const int base = L / pp, extra = L % pp;
    *l0 = s * base + (s < extra ? s : extra);
    *l1 = *l0 + base + (s < extra);
    return;
  }
  // dp over prefixes: best[k][j] = the least possible slowest-stage cost of blocks [0, j) in k
  // stages (the last stage's cost includes the head); cut[k][j] where its last stage starts
  double *pre = malloc(((size_t)L + 1) * sizeof(double));
  double *best = malloc((size_t)(pp + 1) * (L + 1) * sizeof(double));
  int *cut = malloc((size_t)(pp + 1) * (L + 1) * sizeof(int));
  if (!pre || !best || !cut) {   // out of memory: the equal split (still the same on every rank)
    free(pre); free(best); free(cut);
    ot__par_config e = *c;
    e.balanced_stages = false;
    ot__par_stage_layers(&e, s, l0, l1);
    return;
  }
  pre[0] = 0.0;
  for (int k = 0; k < L; k++) pre[k + 1] = pre[k] + block_cost(c, k);
  const double head = head_cost(c);
#define B(k, j) best[(size_t)(k) * (L + 1) + (j)]
#define X(k, j) cut[(size_t)(k) * (L + 1) + (j)]
  for (int j = 0; j <= L; j++) B(1, j) = j ? pre[j] + (pp == 1 ? head : 0.0) : INFINITY;
  for (int k = 2; k <= pp; k++)
    for (int j = 0; j <= L; j++) {
      B(k, j) = INFINITY;
      X(k, j) = k - 1;
      for (int i = k - 1; i < j; i++) {   // the k-th stage holds blocks [i, j)
        const double last = pre[j] - pre[i] + (k == pp && j == L ? head : 0.0);
        const double v = B(k - 1, i) > last ? B(k - 1, i) : last;
        if (v < B(k, j)) {   // (strict: the earliest cut among equals, the same on every rank)
          B(k, j) = v;
          X(k, j) = i;
        }
      }
    }
  int j = L;   // walk back from the last stage to stage s
  for (int k = pp; k > s + 1; k--) j = X(k, j);
  *l1 = j;
  *l0 = s == 0 ? 0 : X(s + 1, j);
#undef B
#undef X
  free(pre);
  free(best);
  free(cut);
}

// The gradient buckets [bstart[k], bstart[k + 1]) of the stage's buffer: with
// fusion > 0 the fusion groups, each the parameters of `fusion` consecutive blocks
// (the tensors before the first block join the first group, those after the last
// block the last: MindSpore's set_comm_fusion(layer // fusion)); else `buckets` equal
// contiguous ranges, 16-float aligned.
static ot_status make_buckets(ot__par *p, int buckets, int fusion) {
  const ot_model *m = p->m;
  const int np = ot_model_param_count(m);
  p->bstart = calloc((size_t)np + (size_t)buckets + 2, sizeof(size_t));
  if (!p->bstart) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  p->fusion = fusion;
  p->nblocks = 0;
  p->nb = 0;
  for (int i = 0; i < np; i++) {   // block starts, in layout order
    const ot_param *q = ot_model_param_at(m, i), *pr = i ? ot_model_param_at(m, i - 1) : NULL;
    if (q->layer < 0) continue;
    const size_t n = ot__block_prefix(q);
    if (pr && pr->layer == q->layer && ot__block_prefix(pr) == n && !strncmp(pr->name, q->name, n))
      continue;
    if (fusion > 0 && p->nblocks % fusion == 0 && p->nblocks > 0) p->bstart[++p->nb] = q->offset;
    p->nblocks++;
  }
  if (fusion > 0) {
    p->bstart[0] = 0;
    p->bstart[++p->nb] = p->n;
    return OT_OK;
  }
  p->nb = buckets;
  if ((size_t)p->nb > p->n / 16) p->nb = (int)(p->n / 16) > 0 ? (int)(p->n / 16) : 1;
  size_t bsz = ((p->n + (size_t)p->nb - 1) / (size_t)p->nb + 15) & ~(size_t)15;
  for (int k = 0; k <= p->nb; k++) p->bstart[k] = (size_t)k * bsz < p->n ? (size_t)k * bsz : p->n;
  p->bstart[p->nb] = p->n;
  return OT_OK;
}

// Micro-batches whose activations stage st of pp holds at once: 1F1B at most pp - st (an
// encoder-decoder's step has as many as its token budget makes: slots for the most 1F1B
// keeps), GPipe all of them.
static int stage_slots(const ot__par_config *c, int pp, int st) {
  if (c->model.arch == OT_ARCH_ENCDEC) return pp - st;
  if (c->gpipe) return c->micro_batches;
  return pp - st < c->micro_batches ? pp - st : c->micro_batches;
}

// The part of stage st and tensor rank tr: blocks, slots, tensor split, vocab-parallel,
// ZeRO's gradient and parameter storage, and (ctx non-NULL) the runtime's hooks; the
// hook buffers are bound by ot__par_create. *chunk_rows: ZeRO-2/3's vocabulary rows per
// chunk (0 below ZeRO-2).
static ot_model_part stage_part(const ot__par_config *c, int st, int tr, void *ctx, int *chunk_rows) {
  ot_model_part part = ot_model_part_whole(&c->model);
  part.tp = c->tp;
  part.tp_rank = tr;
  ot__par_stage_layers(c, st, &part.layer0, &part.layer1);
  part.vocab_parallel = c->vocab_parallel && c->tp > 1;
  part.slots = stage_slots(c, c->pp, st);
  part.comm.ctx = ctx;
  part.comm.allreduce = tp_allreduce;
  part.comm.grads_ready = grads_ready;
  part.external_grads = c->zero >= 2;
  part.param_slots = c->zero == 3;
  if (c->zero == 3) part.comm.need_block = need_block;
  *chunk_rows = 0;
  if (c->zero >= 2) {   // the embedding / head gradients in chunks of rows
    const int vp = ot_model_vocab_padded(&c->model);
    const int vl = part.vocab_parallel ? (vp + part.tp - 1) / part.tp : vp;
    *chunk_rows = ot__z2_chunk_rows(c->model.d_model);
    if (*chunk_rows > vl) *chunk_rows = vl;
    part.comm.vocab_chunk = vocab_chunk;
    part.comm.chunk_rows = *chunk_rows;
  }
  if (c->zero == 3) {
    part.comm.need_rows = need_rows;
    part.comm.row_rows = *chunk_rows;
  }
  return part;
}

// ZeRO shard [*a, *b) of data-parallel rank r over a stage buffer of n floats: dp equal
// parts, 16-float aligned.
static void shard_range(size_t n, int dp, int r, size_t *a, size_t *b) {
  const size_t per = ((n + (size_t)dp - 1) / (size_t)dp + 15) & ~(size_t)15;
  *a = (size_t)r * per < n ? (size_t)r * per : n;
  *b = *a + per < n ? *a + per : n;
}

// Bytes of the pipeline's gradient send buffer (a stage input [B * rows, C]) and of an
// encoder-decoder decoder stage's encoder-gradient send buffer.
static size_t stage_act_bytes(const ot__par_config *c) {
  const bool encdec = c->model.arch == OT_ARCH_ENCDEC;
  const size_t rows = (size_t)c->run.B * (encdec && c->run.S > c->run.T ? c->run.S : c->run.T);
  return rows * c->model.d_model * ot_dtype_size(c->run.dt);
}
static size_t enc_grad_bytes(const ot__par_config *c) {
  return (size_t)c->run.B * c->run.S * c->model.d_model * ot_dtype_size(c->run.dt);
}
// The pipeline stage holding the encoder's last block (encoder-decoders), else -1.
static int seam_stage(const ot__par_config *c) {
  const int nenc = c->model.arch == OT_ARCH_ENCDEC ? c->model.n_enc_layers : 0;
  for (int s = 0; s < c->pp && nenc; s++) {
    int k0, k1;
    ot__par_stage_layers(c, s, &k0, &k1);
    if (k0 < nenc && k1 >= nenc) return s;
  }
  return -1;
}

ot_status ot__par_plan_rank(const ot__par_config *c, int rank, ot__par_mem *o) {
  memset(o, 0, sizeof *o);
  if (c->dp < 1 || c->tp < 1 || c->pp < 1 || rank < 0 || rank >= c->dp * c->tp * c->pp)
    return ot_error(OT_EINVAL, "parallel plan: rank %d of dp=%d tp=%d pp=%d", rank, c->dp, c->tp, c->pp);
  const int nblk = ot_model_n_blocks(&c->model);
  if (c->pp > nblk)
    return ot_error(OT_EINVAL, "parallel layout: %d pipeline stages for %d blocks (at most one "
                    "stage per block)", c->pp, nblk);
  ot__grid_coords(rank, c->dp, c->tp, &o->dp_rank, &o->tp_rank, &o->pp_rank);
  int chunk_rows = 0;
  ot_model_part part = stage_part(c, o->pp_rank, o->tp_rank, NULL, &chunk_rows);
  o->layer0 = part.layer0;
  o->layer1 = part.layer1;
  o->slots = part.slots;
  const int vp = ot_model_vocab_padded(&c->model);
  o->vocab_rows = part.vocab_parallel ? (vp + part.tp - 1) / part.tp : vp;
  o->chunk_rows = chunk_rows;
  ot_model *m = NULL;
  OT_TRY(ot_model_create_layout(&m, &c->model, &c->run, &part));
  const ot_mem_plan *mp = ot_model_plan_of(m);
  o->model = *mp;
  size_t *b = o->bytes;
  b[OT_MEM_PARAMS] = mp->params + mp->params_bf16;
  b[OT_MEM_GRADS] = mp->grads;
  b[OT_MEM_ACTIVATIONS] = mp->act_saved;
  b[OT_MEM_WORKSPACE] = mp->workspace;
  const size_t cd = (size_t)chunk_rows * c->model.d_model;
  if (c->zero >= 2) b[OT_MEM_GRADS] += cd * sizeof(float);
  if (c->zero == 3) b[OT_MEM_PARAMS] += cd * (sizeof(float) + sizeof(uint16_t));
  const size_t n = ot_model_n_floats(m);
  size_t s0, s1;
  shard_range(n, c->dp, o->dp_rank, &s0, &s1);
  o->n_floats = n;
  o->shard_floats = c->zero ? s1 - s0 : n;
  if (c->pp > 1 && part.layer0 > 0) b[OT_MEM_WORKSPACE] += stage_act_bytes(c);
  const int seam = seam_stage(c);
  if (seam >= 0 && c->pp > 1 && o->pp_rank > seam) b[OT_MEM_WORKSPACE] += enc_grad_bytes(c);
  ot_status s = OT_OK;
  if (c->zero >= 2) {
    size_t ng = 0, usz = 0;
    s = ot__z2_units(m, ot__z2_whole_blocks(&c->model), NULL, &ng, &usz);
    b[OT_MEM_GRADS] += ot__z2_bytes(s1 - s0, ng, usz);
  }
  if (c->zero == 3) b[OT_MEM_PARAMS] += (s1 - s0 ? s1 - s0 : 1) * sizeof(float);
  ot_model_free(m);
  return s;
}

ot_status ot__par_create(const ot__par_config *c, ot_model **mout, ot__par **out) {
  const ot_run_config *run = &c->run;
  ot__par *p = calloc(1, sizeof *p);
  if (!p) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  *out = p;
  p->mc = c->model;
  p->B = run->B;
  p->T = run->T;
  p->dt = run->dt;
  p->comm_timeout = c->comm_timeout;
  p->M = c->micro_batches;
  p->gpipe = c->gpipe;
  p->overlap = c->overlap;
  p->zero = c->zero;
  // the blocks of every stage (an encoder-decoder's: encoder, then decoder) and the stages
  // holding a copy of the token embedding
  const bool encdec = c->model.arch == OT_ARCH_ENCDEC;
  p->nblk = ot_model_n_blocks(&c->model);
  p->nenc = encdec ? c->model.n_enc_layers : 0;
  if (c->pp < 1 || c->pp > p->nblk)
    return ot_error(OT_EINVAL, "parallel layout: %d pipeline stages for %d blocks (at most one "
                    "stage per block)", c->pp, p->nblk);
  bool *embed = calloc((size_t)c->pp, sizeof(bool));
  if (!embed) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  p->seam = seam_stage(c) >= 0 ? seam_stage(c) : 0;
  for (int s = 0; s < c->pp; s++) {
    int k0, k1;
    ot__par_stage_layers(c, s, &k0, &k1);
    embed[s] = k0 == 0 || (c->model.tied && k1 == p->nblk) ||
               (encdec && k0 <= p->nenc && p->nenc < k1);   // decoder block 0
  }
  ot_status gs = ot__grid_create(&p->g, c->dp, c->tp, c->pp, embed, c->comm_timeout);
  free(embed);
  OT_TRY(gs);
  const int pp = p->g.pp, st = p->g.pp_rank;
  ot_model_part part = stage_part(c, st, p->g.tp_rank, p, &p->chunk_rows);
  p->slots = part.slots;
  p->k0 = part.layer0;
  p->k1 = part.layer1;
  if (p->zero >= 2) {   // the embedding / head gradients in chunks of rows
    p->chunk = ot_mem_alloc((size_t)p->chunk_rows * c->model.d_model * sizeof(float), OT_MEM_GRADS);
    if (!p->chunk) return ot_error(OT_ENOMEM, "ZeRO-2: out of memory for the gradient staging");
    part.comm.chunk_buf = p->chunk;
  }
  if (p->zero == 3) {   // the vocabulary tensors' rows, a chunk at a time (same rows per chunk)
    const size_t n = (size_t)p->chunk_rows * c->model.d_model;
    p->rbuf = ot_mem_alloc(n * sizeof(float), OT_MEM_PARAMS);
    p->rbuf16 = ot_mem_alloc(n * sizeof(uint16_t), OT_MEM_PARAMS);
    if (!p->rbuf || !p->rbuf16) return ot_error(OT_ENOMEM, "ZeRO-3: out of memory for the vocabulary rows");
    part.comm.row_buf = p->rbuf;
    part.comm.row_buf16 = p->rbuf16;
  }
  OT_TRY(ot_model_create_part(mout, &c->model, run, &part));
  ot_model *m = p->m = *mout;
  p->n = ot_model_n_floats(m);
  p->L = part.layer1 - part.layer0;
  // ZeRO shards: dp equal parts of the buffer, 16-float aligned
  const int dp = p->g.dp;
  p->counts = calloc((size_t)dp, sizeof(int));
  p->displs = calloc((size_t)dp, sizeof(int));
  const int np = ot_model_param_count(m);
  p->own = calloc((size_t)np + 1, sizeof(bool));
  if (!p->counts || !p->displs || !p->own) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  if (p->n > (size_t)1 << 31) return ot_error(OT_EINVAL, "parallel trainer: a stage of %zu floats is too large", p->n);
  for (int r = 0; r < dp; r++) {
    size_t a, b;
    shard_range(p->n, dp, r, &a, &b);
    p->displs[r] = (int)a;
    p->counts[r] = (int)(b - a);
  }
  p->s0 = p->zero ? (size_t)p->displs[p->g.dp_rank] : 0;
  p->s1 = p->zero ? p->s0 + (size_t)p->counts[p->g.dp_rank] : p->n;
  // norm ownership: tensor-replicated parameters once per tensor group, the tied copy on the
  // last stage not at all (the first stage's counts)
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    bool tied_copy = pp > 1 && !ot_model_is_first(m) && q->kind == OT_PT_EMBED;
    p->own[i] = (ot_model_param_is_split(m, i) || p->g.tp_rank == 0) && !tied_copy;
  }
  OT_TRY(make_buckets(p, c->grad_buckets, c->fusion_layers));
  p->launched = calloc((size_t)p->nb, sizeof(bool));
  p->queue = calloc((size_t)queue_cap(p), sizeof(int));
  p->freq = calloc((size_t)p->slots, sizeof(MPI_Request));
  if (!p->launched || !p->queue || !p->freq)
    return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  for (int k = 0; k < p->slots; k++) p->freq[k] = MPI_REQUEST_NULL;
  p->breq = MPI_REQUEST_NULL;
  // (an encoder-decoder's stage input: the encoder's [B*S, C] or the decoder's [B*T, C])
  p->act_bytes = stage_act_bytes(c);
  if (pp > 1 && !ot_model_is_first(m)) {
    p->gsend = ot_mem_alloc(p->act_bytes, OT_MEM_WORKSPACE);
    if (!p->gsend) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  }
  p->dreq = MPI_REQUEST_NULL;
  p->ereq = calloc((size_t)pp * p->slots, sizeof(MPI_Request));
  if (!p->ereq) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  for (int k = 0; k < pp * p->slots; k++) p->ereq[k] = MPI_REQUEST_NULL;
  if (encdec && pp > 1 && st > p->seam) {
    p->dsend = ot_mem_alloc(enc_grad_bytes(c), OT_MEM_WORKSPACE);
    if (!p->dsend) return ot_error(OT_ENOMEM, "parallel trainer: out of memory");
  }
  if (p->zero >= 2) OT_TRY(ot__z2_setup(p));
  if (p->zero == 3) OT_TRY(ot__z3_setup(p, c->zero_prefetch));
  p->comm0 = ot__comm_seconds();
  if (p->overlap && dp > 1) {
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, reducer, p) != 0)
      return ot_error(OT_EINTERNAL, "parallel trainer: cannot start the reduction thread");
    p->th_up = true;
  }
  return OT_OK;
}

// Shard of the moments / optimizer range.
void ot__par_shard(const ot__par *p, size_t *s0, size_t *s1) {
  *s0 = p->s0;
  *s1 = p->s1;
}

// ------------------------------------------------------------------ step ----
typedef struct {
  ot__par *p;
  const int32_t *rows;       // this dp rank's A * B rows
  int32_t *x, *y;            // [B * T] one micro-batch's inputs and targets
  float count;
  double loss;
  bool finite;
  ot__par_fwd_fn fn;         // a task's forward (NULL: the token rows above)
  void *fctx;
} stepctx;

static ot_status fwd(stepctx *x, int mb) {
  ot__par *p = x->p;
  ot_model *m = p->m;
  const int B = p->B, T = p->T, slot = mb % p->slots, st = p->g.pp_rank;
  const size_t rowlen = (size_t)T + 1;
  OT_TRY(ot__wait(&p->g, &p->freq[slot], "pipeline send of activations"));
  if (!ot_model_is_first(m))
    OT_TRY(ot__recv(&p->g, ot_model_stage_input(m, slot), p->act_bytes, st - 1, TAG_FWD,
                    "pipeline receive of activations"));
  double l = 0.0;
  if (x->fn) {
    OT_TRY(x->fn(x->fctx, m, mb, slot, true, &l));
  } else {
    ot__split_rows(x->x, x->y, x->rows + (size_t)mb * B * rowlen, B, T);
    OT_TRY(ot_model_forward_slot(m, slot, x->x, x->y, B, T, x->count, true, &l));
  }
  if (ot_model_is_last(m)) {
    x->loss += l;
    if (!isfinite(l)) x->finite = false;
  } else {
    OT_TRY(ot__isend(&p->g, ot_model_stage_output(m, slot), p->act_bytes, st + 1, TAG_FWD,
                     &p->freq[slot]));
  }
  return OT_OK;
}

static ot_status bwd(stepctx *x, int mb) {
  ot__par *p = x->p;
  ot_model *m = p->m;
  const int slot = mb % p->slots, st = p->g.pp_rank;
  if (!ot_model_is_last(m))
    OT_TRY(ot__recv(&p->g, ot_model_stage_grad(m), p->act_bytes, st + 1, TAG_BWD,
                    "pipeline receive of gradients"));
  p->last_mb = mb == p->M - 1;
  if (p->zero >= 2) OT_TRY(ot__z2_before_backward(p));
  OT_TRY(ot_model_backward_slot(m, slot));
  p->last_mb = false;
  if (!ot_model_is_first(m)) {
    OT_TRY(ot__wait(&p->g, &p->breq, "pipeline send of gradients"));
    memcpy(p->gsend, ot_model_stage_grad(m), p->act_bytes);
    OT_TRY(ot__isend(&p->g, p->gsend, p->act_bytes, st - 1, TAG_BWD, &p->breq));
  }
  return OT_OK;
}

static ot_status schedule(stepctx *x) {
  ot__par *p = x->p;
  const int M = p->M, S = p->g.pp, st = p->g.pp_rank;
  if (p->gpipe) {
    for (int i = 0; i < M; i++) OT_TRY(fwd(x, i));
    for (int i = 0; i < M; i++) OT_TRY(bwd(x, i));
  } else {
    int warm = S - st - 1 < M ? S - st - 1 : M;
    for (int i = 0; i < warm; i++) OT_TRY(fwd(x, i));
    for (int i = 0; i < M - warm; i++) {
      OT_TRY(fwd(x, warm + i));
      OT_TRY(bwd(x, i));
    }
    for (int i = M - warm; i < M; i++) OT_TRY(bwd(x, i));
  }
  for (int k = 0; k < p->slots; k++) OT_TRY(ot__wait(&p->g, &p->freq[k], "pipeline send of activations"));
  return ot__wait(&p->g, &p->breq, "pipeline send of gradients");
}

// The tail of a step's backwards: every bucket reduced, then a tied embedding's two
// stages' copies summed.
ot_status ot__par_finish_backward(ot__par *p) {
  p->last_mb = false;
  if (p->nenc) OT_TRY(ot__par_s2s_flush(p));
  OT_TRY(finish_buckets(p));
  ot_model *m = p->m;
  float *g = ot_model_grads(m);
  if (p->g.embed_comm != MPI_COMM_NULL && p->zero < 2) {   // tied embedding: both stages' copies
    for (int i = 0; i < ot_model_param_count(m); i++) {
      const ot_param *q = ot_model_param_at(m, i);
      if (q->kind == OT_PT_EMBED)
        OT_TRY(ot__allreduce(&p->g, p->g.embed_comm, g + q->offset, q->numel, OT_F32, OT_RED_SUM,
                             "tied-embedding gradient all-reduce"));
    }
  }
  return OT_OK;
}

ot_status ot__par_before_backward(ot__par *p, bool last) {
  if (p->th_err != OT_OK) return ot_error(p->th_err, "%s", p->th_msg);
  p->last_mb = last;
  if (p->zero >= 2) OT_TRY(ot__z2_before_backward(p));
  return OT_OK;
}

ot_status ot__par_max_int(ot__par *p, int *v, const char *what) {
  ot__wd_begin(&p->g, what, -1);
  int rc = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, p->g.world_comm);
  ot__wd_end();
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, what);
}

ot_status ot__par_micro_batches(ot__par *p, const int32_t *rows, int32_t *xb, int32_t *yb, float count,
                                double *loss, bool *finite) {
  p->comm0 = ot__comm_seconds();
  stepctx x = {p, rows, xb, yb, count, 0.0, true, NULL, NULL};
  OT_TRY(schedule(&x));
  OT_TRY(ot__par_finish_backward(p));
  *loss = x.loss;
  *finite = x.finite;
  return OT_OK;
}

ot_status ot__par_micro_batches_fn(ot__par *p, ot__par_fwd_fn fn, void *ctx, double *loss,
                                   bool *finite) {
  p->comm0 = ot__comm_seconds();
  stepctx x = {p, NULL, NULL, NULL, 0.0f, 0.0, true, fn, ctx};
  OT_TRY(schedule(&x));
  OT_TRY(ot__par_finish_backward(p));
  *loss = x.loss;
  *finite = x.finite;
  return OT_OK;
}

// Sum of squares of the gradients this rank counts (see own).
static double owned_sumsq(const ot__par *p) {
  if (p->zero >= 2) return ot__z2_sumsq(p);
  const ot_model *m = p->m;
  const float *g = ot_model_grads((ot_model *)m);
  double s = 0.0;
  if (p->g.dp_rank != 0) return 0.0;
  for (int i = 0; i < ot_model_param_count(m); i++)
    if (p->own[i]) {
      const ot_param *q = ot_model_param_at(m, i);
      s += ot_sumsq(g + q->offset, q->numel);
    }
  return s;
}

ot_status ot__par_reduce_norm(ot__par *p, double *loss, bool *finite, double *sumsq) {
  // loss (last stage, tp rank 0, summed over dp) and the norm, world-wide in one reduction
  // the non-finite flag from every rank (a rank's own check, e.g. of the gradients it
  // applies, counts wherever it is), so that no rank updates while another skips
  double red[3] = {0.0, owned_sumsq(p), *finite ? 0.0 : 1.0};
  if (ot_model_is_last(p->m) && p->g.tp_rank == 0) red[0] = *loss;
  OT_TRY(ot__allreduce_f64(&p->g, p->g.world_comm, red, 3, "loss and gradient-norm all-reduce"));
  *loss = red[0];
  *finite = red[2] == 0.0;
  *sumsq = red[1];
  return OT_OK;
}

float *ot__par_shard_grads(ot__par *p) {
  return p->zero >= 2 ? p->gs : ot_model_grads(p->m) + p->s0;
}

bool ot__par_update_writes_bf16(const ot__par *p) { return !p->zero; }

float *ot__par_shard_params(ot__par *p) {
  return p->zero == 3 ? p->ps : ot_model_params(p->m) + p->s0;
}

ot_status ot__par_set_params(ot__par *p, const float *full) {
  if (p->zero == 3) return ot__z3_set(p, full);
  float *w = ot_model_params(p->m);
  if (w != full) memcpy(w, full, p->n * sizeof(float));
  return ot_model_sync_bf16(p->m);
}

ot_status ot__par_init_params(ot__par *p, uint64_t seed) {
  if (p->zero != 3) return ot_model_init(p->m, seed);
  float *full = ot_mem_alloc((p->n ? p->n : 1) * sizeof(float), OT_MEM_OTHER);
  if (!full) return ot_error(OT_ENOMEM, "ZeRO-3: out of memory for the initial weights (%zu floats)", p->n);
  ot_status s = ot_model_init_into(p->m, seed, full);
  if (s == OT_OK) s = ot__z3_set(p, full);
  ot_mem_free(full);
  return s;
}

void ot__par_local_params(const ot__par *p, float *full) {
  if (p->zero == 3) {
    memset(full, 0, p->n * sizeof(float));
    memcpy(full + p->s0, p->ps, (p->s1 - p->s0) * sizeof(float));
  } else {
    memcpy(full, ot_model_params(p->m), p->n * sizeof(float));
  }
}

void ot__par_gather_stats(ot__par *p, double *gather_s, double *exposed_s) {
  *gather_s = *exposed_s = 0.0;
  if (!p) return;
  if (p->zth_up) pthread_mutex_lock(&p->zmu);   // the gather thread adds
  *gather_s = p->zgather_s;
  *exposed_s = p->zwait_s;
  if (p->zth_up) pthread_mutex_unlock(&p->zmu);
}

ot_status ot__par_gather(ot__par *p) {
  if (!p->zero) return OT_OK;
  if (p->zero == 3) return ot__z3_refresh(p);
  OT_TRY(ot__allgather_f32(&p->g, p->g.dp_comm, ot_model_params(p->m), p->counts, p->displs,
                           "ZeRO parameter all-gather"));
  return ot_model_sync_bf16(p->m);
}

void ot__par_zero_grads(ot__par *p) {
  if (p->zero >= 2) memset(p->gs, 0, (p->s1 - p->s0) * sizeof(float));
  else ot_model_zero_grad(p->m);
  p->comm_s = ot__comm_seconds() - p->comm0;
  p->comm0 = ot__comm_seconds();   // the next step's communication counts from here
}

// One forward of b rows through the stages: token rows x, y (fn NULL) or the task's fn.
static ot_status eval_fwd(ot__par *p, const int32_t *x, const int32_t *y, ot__par_fwd_fn fn,
                          void *ctx, int b, float n, double *l, bool *counts) {
  ot_model *m = p->m;
  const int st = p->g.pp_rank;
  const size_t bytes = (size_t)b * p->T * p->mc.d_model * ot_dtype_size(p->dt);
  if (!ot_model_is_first(m))
    OT_TRY(ot__recv(&p->g, ot_model_stage_input(m, 0), bytes, st - 1, TAG_FWD,
                    "pipeline receive of activations (eval)"));
  *l = 0.0;
  if (fn) OT_TRY(fn(ctx, m, -1, 0, false, l));
  else OT_TRY(ot_model_forward_slot(m, 0, x, y, b, p->T, n, false, l));
  *counts = false;
  if (!ot_model_is_last(m)) {
    MPI_Request rq;
    OT_TRY(ot__isend(&p->g, ot_model_stage_output(m, 0), bytes, st + 1, TAG_FWD, &rq));
    OT_TRY(ot__wait(&p->g, &rq, "pipeline send of activations (eval)"));
  } else if (p->g.tp_rank == 0) {
    *counts = true;
  }
  return OT_OK;
}

ot_status ot__par_eval_chunk(ot__par *p, const int32_t *x, const int32_t *y, int b, float n,
                             double *l, bool *counts) {
  return eval_fwd(p, x, y, NULL, NULL, b, n, l, counts);
}

ot_status ot__par_eval_fn(ot__par *p, ot__par_fwd_fn fn, void *ctx, int b, double *l, bool *counts) {
  return eval_fwd(p, NULL, NULL, fn, ctx, b, 0.0f, l, counts);
}

ot_status ot__par_sum(ot__par *p, double *v, int n, const char *what) {
  return ot__allreduce_f64(&p->g, p->g.world_comm, v, n, what);
}

bool ot__par_wanted(int dp, int tp, int pp) {
  return dp * tp * pp > 1 || ot_dist_world_size() > 1;
}

// ----------------------------------------------------------- checkpoints ----
ot_status ot__par_gather_sum(ot__par *p, float *buf, size_t n) {
  const bool root = p->g.rank == 0;
  ot__wd_begin(&p->g, "checkpoint gather", -1);
  int rc = MPI_Reduce(root ? MPI_IN_PLACE : buf, root ? buf : NULL, (int)n, MPI_FLOAT, MPI_SUM, 0,
                      p->g.world_comm);
  ot__wd_end();
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, "checkpoint gather (MPI_Reduce)");
}

bool ot__par_all_ok(ot__par *p, bool ok) {
  int mine = ok, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, p->g.world_comm);
  return all != 0;
}

bool ot__par_root_ok(ot__par *p, bool ok) {
  int v = ok;
  MPI_Bcast(&v, 1, MPI_INT, 0, p->g.world_comm);
  return v != 0;
}

ot_status ot__par_report(ot__par *p, FILE *out) {
  const ot__grid *g = &p->g;
  const ot_model_part *part = ot_model_part_of(p->m);
  enum { NV = 10 };
  double mine[NV] = {(double)p->g.pp_rank, (double)p->g.dp_rank, (double)p->g.tp_rank,
                     (double)part->layer0, (double)part->layer1,
                     (double)ot_mem_current(OT_MEM_PARAMS), (double)ot_mem_current(OT_MEM_GRADS),
                     (double)ot_mem_current(OT_MEM_OPTIM), (double)ot_mem_current(OT_MEM_ACTIVATIONS),
                     (double)ot_mem_current(OT_MEM_WORKSPACE)};
  double *all = g->rank == 0 ? malloc(sizeof mine * (size_t)g->world) : NULL;
  if (g->rank == 0 && !all) return ot_error(OT_ENOMEM, "parallel report: out of memory");
  ot__wd_begin(g, "memory report gather", -1);
  int rc = MPI_Gather(mine, NV, MPI_DOUBLE, all, NV, MPI_DOUBLE, 0, g->world_comm);
  ot__wd_end();
  if (rc != MPI_SUCCESS) {
    free(all);
    return ot__mpi_error(rc, "memory report gather");
  }
  if (g->rank == 0) {
    fprintf(out, "parallel: data %d x tensor %d x pipeline %d = %d processes; %s schedule, %d "
            "micro-batches, ZeRO-%d, %d gradient buckets%s, vocab-parallel %s, comm-timeout %g s\n",
            g->dp, g->tp, g->pp, g->world,
            p->nenc ? (g->pp > 1 ? "encoder-decoder 1F1B" : "encoder-decoder")
                    : p->gpipe ? "GPipe" : "1F1B",
            p->M, p->zero, p->nb,
            p->overlap ? " (overlapped)" : "", part->vocab_parallel ? "on" : "off",
            (double)p->comm_timeout);
    const char *unit = ot__z2_whole_blocks(&p->mc) ? "a whole block"
                                                  : "a block matrix and what follows it";
    if (g->dp > 1) {   // the collectives of a step (this rank's stage)
      fprintf(out, "  data-parallel gradient reduction per step (stage %d): ", g->pp_rank);
      if (p->zero == 3) {
        fprintf(out, "ZeRO-3, one all-reduce per unit of %d (%s; each rank keeps its shard) per "
                "micro-batch; one all-gather of each block's weights before its forward "
                "and its backward (%s), of the global tensors after the update\n", p->nu, unit,
                p->zth_up ? "the next block prefetched while one runs" : "no prefetch");
      } else if (p->zero == 2) {
        fprintf(out, "ZeRO-2, one all-reduce per unit of %d (%s) per micro-batch\n", p->nu, unit);
      } else {
        double tot = 0.0;
        for (int k = 0; k < p->nb; k++) tot += (double)(p->bstart[k + 1] - p->bstart[k]) * 4;
        if (p->fusion > 0)
          fprintf(out, "%d fused all-reduces (fusion groups of %d of the %d blocks), %.3f MiB:",
                  p->nb, p->fusion, p->nblocks, tot / 1048576);
        else
          fprintf(out, "%d all-reduces (equal ranges), %.3f MiB:", p->nb, tot / 1048576);
        for (int k = 0; k < p->nb && k < 16; k++)
          fprintf(out, " %.3f", (double)(p->bstart[k + 1] - p->bstart[k]) * 4 / 1048576);
        fprintf(out, "%s MiB%s\n", p->nb > 16 ? " ..." : "", p->overlap ? ", overlapped with the backward" : "");
      }
    }
    const int V = p->mc.vocab, Vp = ot_model_vocab_padded(&p->mc);
    if (part->vocab_parallel)
      fprintf(out, "  vocabulary %d, padded to %d rows; %d rows per tensor rank (%d padding rows in "
              "all)\n", V, Vp, (Vp + g->tp - 1) / g->tp, (Vp + g->tp - 1) / g->tp * g->tp - V);
    fprintf(out, "  rank stage  dp  tp  blocks      params MiB   grads MiB   optim MiB     act MiB      ws MiB\n");
    for (int r = 0; r < g->world; r++) {
      const double *v = all + (size_t)r * NV;
      char blk[24];
      snprintf(blk, sizeof blk, "[%d,%d)", (int)v[3], (int)v[4]);
      fprintf(out, "  %4d %5d %3d %3d  %-9s %11.3f %11.3f %11.3f %11.3f %11.3f\n", r, (int)v[0],
              (int)v[1], (int)v[2], blk, v[5] / 1048576, v[6] / 1048576, v[7] / 1048576,
              v[8] / 1048576, v[9] / 1048576);
    }
  }
  free(all);
  return OT_OK;
}
