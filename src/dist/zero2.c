// ZeRO-2: gradients outside a data-parallel rank's shard are not kept.
//
// The model is created without a gradient buffer and its parameters' gradients
// are bound to staging buffers: the blocks alternate between two block-sized
// buffers, the global parameters (embedding, positions, final norm, head) have
// one buffer for the whole step. After each micro-batch's backward of block l
// the block's buffer is all-reduced over the data-parallel group (the composed
// reduce-scatter: measured faster here than MPI's), this rank's shard of it is
// added to the shard accumulator gs, and the buffer is zeroed for block l - 2;
// with overlap that happens on the reduction thread while block l - 1 runs.
// The global parameters' gradients (written at the start and the end of every
// backward) are reduced once per step. Gradient memory: the shard (n / dp)
// plus the staging (2 blocks + the global parameters).
#include "dist_impl.h"
#include "engine/engine_impl.h"
#include <stdlib.h>

static float *zalloc(size_t n) {
  float *x = ot_mem_alloc((n ? n : 1) * sizeof(float), OT_MEM_GRADS);
  if (x) memset(x, 0, (n ? n : 1) * sizeof(float));
  return x;
}

ot_status ot__z2_setup(ot__par *p) {
  ot_model *m = p->t->m;
  const int np = ot_model_param_count(m), l0 = ot_model_part_of(m)->layer0;
  p->blk0 = calloc((size_t)p->L + 1, sizeof(size_t));
  p->blk_done = calloc((size_t)p->L + 1, sizeof(bool));
  p->goff = calloc((size_t)np + 1, sizeof(size_t));
  if (!p->blk0 || !p->blk_done || !p->goff) return ot_error(OT_ENOMEM, "ZeRO-2: out of memory");
  // block l spans its parameters (contiguous in the layout, alignment gaps included)
  for (int l = 0; l <= p->L; l++) p->blk0[l] = (size_t)-1;
  size_t blk_end = 0;
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    size_t end = q->offset + ((q->numel + 15) & ~(size_t)15);
    if (q->layer < 0) {
      p->goff[i] = p->ng;
      p->ng += (q->numel + 15) & ~(size_t)15;
      continue;
    }
    const int l = q->layer - l0;
    if (q->offset < p->blk0[l]) p->blk0[l] = q->offset;
    if (end > blk_end) blk_end = end;
  }
  p->blk0[p->L] = blk_end;
  for (int l = 0; l < p->L; l++) {
    if (p->blk0[l + 1] < p->blk0[l]) return ot_error(OT_EINTERNAL, "ZeRO-2: blocks out of order");
    if (p->blk0[l + 1] - p->blk0[l] > p->bsz) p->bsz = p->blk0[l + 1] - p->blk0[l];
  }
  p->gs = zalloc(p->s1 - p->s0);
  p->gstage = zalloc(p->ng);
  p->bstage[0] = zalloc(p->bsz);
  p->bstage[1] = zalloc(p->bsz);
  if (!p->gs || !p->gstage || !p->bstage[0] || !p->bstage[1])
    return ot_error(OT_ENOMEM, "ZeRO-2: out of memory for the gradient staging");
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    float *g = q->layer < 0 ? p->gstage + p->goff[i]
                            : p->bstage[(q->layer - l0) & 1] + (q->offset - p->blk0[q->layer - l0]);
    OT_TRY(ot_model_bind_grad(m, i, g));
  }
  return OT_OK;
}

void ot__z2_free(ot__par *p) {
  ot_mem_free(p->gs);
  ot_mem_free(p->gstage);
  ot_mem_free(p->bstage[0]);
  ot_mem_free(p->bstage[1]);
  free(p->blk0);
  free(p->blk_done);
  free(p->goff);
}

// gs += the shard's part of layout range [a, a + n) held at src; src zeroed.
static void keep_shard(ot__par *p, const float *src, size_t a, size_t n) {
  size_t lo = a > p->s0 ? a : p->s0, hi = a + n < p->s1 ? a + n : p->s1;
  for (size_t o = lo; o < hi; o++) p->gs[o - p->s0] += src[o - a];
}

ot_status ot__z2_block_reduce(ot__par *p, int l) {
  float *st = p->bstage[l & 1];
  const size_t a = p->blk0[l], n = p->blk0[l + 1] - a;
  OT_TRY(ot__allreduce(&p->g, p->g.dp_comm, st, n, OT_F32, OT_RED_SUM,
                       "ZeRO-2 gradient reduction (block)"));
  keep_shard(p, st, a, n);
  memset(st, 0, n * sizeof(float));
  return OT_OK;
}

void ot__z2_grads_ready(ot__par *p, size_t from) {
  for (int l = p->L - 1; l >= 0; l--) {
    if (p->blk_done[l] || p->blk0[l] < from) continue;
    p->blk_done[l] = true;
    ot_status s = ot__par_launch_job(p, l);
    // block l - 1 writes the buffer block l + 1 used: its reduction must be over
    if (s == OT_OK) s = ot__par_wait_jobs(p, 1);
    if (s != OT_OK) {   // a callback cannot fail: the step reports it (ot__z2_finish)
      if (p->th_up) pthread_mutex_lock(&p->mu);
      if (p->th_err == OT_OK) {
        p->th_err = s;
        snprintf(p->th_msg, sizeof p->th_msg, "%s", ot_last_error());
      }
      if (p->th_up) pthread_mutex_unlock(&p->mu);
    }
  }
}

ot_status ot__z2_before_backward(ot__par *p) {
  OT_TRY(ot__par_wait_jobs(p, 0));
  if (p->th_err != OT_OK) return ot_error(p->th_err, "%s", p->th_msg);
  for (int l = 0; l < p->L; l++) p->blk_done[l] = false;
  return OT_OK;
}

ot_status ot__z2_finish(ot__par *p) {
  OT_TRY(ot__par_wait_jobs(p, 0));
  if (p->th_err != OT_OK) return ot_error(p->th_err, "%s", p->th_msg);
  ot_model *m = p->t->m;
  const int np = ot_model_param_count(m);
  if (p->g.embed_comm != MPI_COMM_NULL)   // tied embedding: both stages' copies
    for (int i = 0; i < np; i++) {
      const ot_param *q = ot_model_param_at(m, i);
      if (q->kind == OT_PT_EMBED)
        OT_TRY(ot__allreduce(&p->g, p->g.embed_comm, p->gstage + p->goff[i], q->numel, OT_F32,
                             OT_RED_SUM, "tied-embedding gradient all-reduce"));
    }
  OT_TRY(ot__allreduce(&p->g, p->g.dp_comm, p->gstage, p->ng, OT_F32, OT_RED_SUM,
                       "ZeRO-2 gradient reduction (embedding, final norm, head)"));
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    if (q->layer < 0) keep_shard(p, p->gstage + p->goff[i], q->offset, q->numel);
  }
  memset(p->gstage, 0, p->ng * sizeof(float));
  return OT_OK;
}

double ot__z2_sumsq(const ot__par *p) {
  const ot_model *m = p->t->m;
  double s = 0.0;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    if (!p->own[i]) continue;
    const ot_param *q = ot_model_param_at(m, i);
    size_t lo = q->offset > p->s0 ? q->offset : p->s0;
    size_t hi = q->offset + q->numel < p->s1 ? q->offset + q->numel : p->s1;
    if (lo < hi) s += ot_sumsq(p->gs + (lo - p->s0), hi - lo);
  }
  return s;
}
