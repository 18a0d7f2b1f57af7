// ZeRO-2: gradients outside a data-parallel rank's shard are not kept.
//
// The model is created without a gradient buffer and its parameters'
// gradients are bound to staging. The blocks' parameters form units, each a
// weight matrix with what follows it in the layout up to the next matrix
// (biases, norms; the model reports each matrix final as the backward passes
// it) — post-norm models and encoder-decoders: each block one unit (see
// unit_start); the units take Z2_BUFS staging
// buffers of the largest unit in turn.
// After each micro-batch's backward of unit k the buffer is all-reduced over
// the data-parallel group, this rank's shard of it is added to the shard
// accumulator gs and the buffer is zeroed for unit k - Z2_BUFS; with overlap
// that happens on the reduction thread while the backward goes on (up to
// Z2_BUFS - 1 reductions in flight).
// The embedding's and the head's gradients (vocabulary x width, the largest
// tensors) are produced by the model in chunks of rows (comm.vocab_chunk) and
// reduced chunk by chunk the same way; a tied embedding split over pipeline
// stages sums its two copies' shards chunk by chunk at the end of the step.
// The small global parameters (positions, final norm) have one buffer for the
// step. Gradient memory: the shard (n / dp) plus the staging (Z2_BUFS units +
// one chunk + the small globals).
#include "dist_impl.h"
#include <stdlib.h>
#include <string.h>

static float *zalloc(size_t n) {
  float *x = ot_mem_alloc((n ? n : 1) * sizeof(float), OT_MEM_GRADS);
  if (x) memset(x, 0, (n ? n : 1) * sizeof(float));
  return x;
}

static size_t padded(size_t n) { return (n + 15) & ~(size_t)15; }

// Gradients the model produces in vocabulary-row chunks.
static bool chunked(const ot_param *q) {
  return q->layer < 0 && (q->kind == OT_PT_EMBED || q->kind == OT_PT_LM_HEAD);
}
size_t ot__block_prefix(const ot_param *q) {
  char num[16];
  snprintf(num, sizeof num, ".%d.", q->layer);
  const char *at = q->layer >= 0 ? strstr(q->name, num) : NULL;
  return at ? (size_t)(at - q->name) + strlen(num) : 0;
}

// A unit starts at every block weight matrix (pre-norm: a block's backward writes its
// gradients in reverse layout order, matrix by matrix), or with `whole_blocks` at every
// block's first tensor (post-norm: the second norm's gradient is written first, before
// the MLP's, so a block's units would be written out of order; an encoder-decoder: a
// decoder block's backward writes its second norm's and cross-attention's units, two
// units ahead, before it reports them, so a buffer could still be under reduction).
static bool unit_start(const ot_param *q, const ot_param *prev, bool whole_blocks) {
  if (q->layer < 0) return false;
  if (!whole_blocks) return q->kind == OT_PT_MATRIX || q->kind == OT_PT_MATRIX_RES;
  const size_t n = ot__block_prefix(q);
  return !prev || prev->layer != q->layer || ot__block_prefix(prev) != n || strncmp(prev->name, q->name, n);
}

bool ot__z2_whole_blocks(const ot_model_config *mc) {
  return mc->norm_place == OT_PLACE_POST || mc->arch == OT_ARCH_ENCDEC;
}

int ot__z2_chunk_rows(int d_model) {
  const int r = (1 << 20) / (d_model > 0 ? d_model : 1);
  return r > 0 ? r : 1;
}

ot_status ot__z2_units(const ot_model *m, bool whole_blocks, ot__z2_layout *u, size_t *ng, size_t *usz) {
  const int np = ot_model_param_count(m);
  size_t blk_end = 0, g = 0, big = 0, start = 0;
  int nu = 0;
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i), *prev = i > 0 ? ot_model_param_at(m, i - 1) : NULL;
    if (q->layer < 0) {
      if (!chunked(q)) {
        if (u) u->goff[i] = g;
        g += padded(q->numel);
      }
      continue;
    }
    if (unit_start(q, prev, whole_blocks) || nu == 0) {   // unit nu - 1 ends where this one starts
      if (nu > 0 && q->offset < start) return ot_error(OT_EINTERNAL, "ZeRO-2: units out of order");
      if (nu > 0 && q->offset - start > big) big = q->offset - start;
      if (u) u->u0[nu] = q->offset;
      start = q->offset;
      nu++;
    }
    if (u) u->unit_of[i] = nu - 1;
    if (q->offset + padded(q->numel) > blk_end) blk_end = q->offset + padded(q->numel);
  }
  if (nu > 0 && blk_end - start > big) big = blk_end - start;   // the last unit: to the blocks' end
  if (u) {
    u->u0[nu] = blk_end;   // (alignment gaps included in the units)
    u->nu = nu;
  }
  *ng = g;
  *usz = big;
  return OT_OK;
}

size_t ot__z2_bytes(size_t shard, size_t ng, size_t usz) {
  const size_t f = sizeof(float);
  return (shard ? shard : 1) * f + (ng ? ng : 1) * f + Z2_BUFS * (usz ? usz : 1) * f;
}

ot_status ot__z2_setup(ot__par *p) {
  ot_model *m = p->m;
  const int np = ot_model_param_count(m);
  p->u0 = calloc((size_t)np + 1, sizeof(size_t));
  p->unit_done = calloc((size_t)np + 1, sizeof(bool));
  p->unit_of = calloc((size_t)np + 1, sizeof(int));
  p->goff = calloc((size_t)np + 1, sizeof(size_t));
  if (!p->u0 || !p->unit_done || !p->unit_of || !p->goff) return ot_error(OT_ENOMEM, "ZeRO-2: out of memory");
  ot__z2_layout lay = {p->u0, p->unit_of, p->goff, 0};
  OT_TRY(ot__z2_units(m, ot__z2_whole_blocks(&p->mc), &lay, &p->ng, &p->usz));
  p->nu = lay.nu;
  p->gs = zalloc(p->s1 - p->s0);
  p->gstage = zalloc(p->ng);
  bool ok = p->gs && p->gstage;
  for (int b = 0; b < Z2_BUFS; b++) ok = ok && (p->ustage[b] = zalloc(p->usz));
  if (!ok) return ot_error(OT_ENOMEM, "ZeRO-2: out of memory for the gradient staging");
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    float *g = NULL;   // chunked: the model writes comm.chunk_buf instead
    if (q->layer >= 0) {
      const int k = p->unit_of[i];
      g = p->ustage[k % Z2_BUFS] + (q->offset - p->u0[k]);
    } else if (!chunked(q)) {
      g = p->gstage + p->goff[i];
    }
    OT_TRY(ot_model_bind_grad(m, i, g));
  }
  return OT_OK;
}

void ot__z2_free(ot__par *p) {
  ot_mem_free(p->gs);
  ot_mem_free(p->gstage);
  for (int b = 0; b < Z2_BUFS; b++) ot_mem_free(p->ustage[b]);
  ot_mem_free(p->chunk);
  free(p->u0);
  free(p->unit_done);
  free(p->unit_of);
  free(p->goff);
}

// gs += the shard's part of layout range [a, a + n) held at src.
static void keep_shard(ot__par *p, const float *src, size_t a, size_t n) {
  size_t lo = a > p->s0 ? a : p->s0, hi = a + n < p->s1 ? a + n : p->s1;
  for (size_t o = lo; o < hi; o++) p->gs[o - p->s0] += src[o - a];
}

ot_status ot__z2_unit_reduce(ot__par *p, int k) {
  float *st = p->ustage[k % Z2_BUFS];
  const size_t a = p->u0[k], n = p->u0[k + 1] - a;
  OT_TRY(ot__allreduce(&p->g, p->g.dp_comm, st, n, OT_F32, OT_RED_SUM,
                       "ZeRO-2 gradient reduction (block parameters)"));
  keep_shard(p, st, a, n);
  memset(st, 0, n * sizeof(float));
  return OT_OK;
}

void ot__z2_grads_ready(ot__par *p, size_t from) {
  for (int k = p->nu - 1; k >= 0; k--) {
    if (p->unit_done[k] || p->u0[k] < from) continue;
    p->unit_done[k] = true;
    ot_status s = ot__par_launch_job(p, k);
    // the backward writes unit k - 1 next, in the buffer of unit k - 1 + Z2_BUFS:
    // its reduction must be over (at most units k .. k + Z2_BUFS - 2 pending)
    if (s == OT_OK) s = ot__par_wait_jobs(p, Z2_BUFS - 1);
    ot__par_note_error(p, s);
  }
}

void ot__z2_vocab_chunk(ot__par *p, int i, int row0, int rows) {
  const ot_param *q = ot_model_param_at(p->m, i);
  const size_t C = (size_t)q->shape[1], n = (size_t)rows * C;
  ot_status s = ot__par_wait_jobs(p, 0);   // the main thread now uses the dp communicator
  if (s == OT_OK)
    s = ot__allreduce(&p->g, p->g.dp_comm, p->chunk, n, OT_F32, OT_RED_SUM,
                      "ZeRO-2 gradient reduction (embedding / head rows)");
  if (s == OT_OK) keep_shard(p, p->chunk, q->offset + (size_t)row0 * C, n);
  ot__par_note_error(p, s);
}

ot_status ot__z2_before_backward(ot__par *p) {
  OT_TRY(ot__par_wait_jobs(p, 0));
  if (p->th_err != OT_OK) return ot_error(p->th_err, "%s", p->th_msg);
  for (int k = 0; k < p->nu; k++) p->unit_done[k] = false;
  return OT_OK;
}

// A tied embedding on two pipeline stages: each stage's shards hold its own copy's
// gradient (reduced over dp); chunk by chunk, the stage's rows are assembled from the
// shards (sum over dp of disjoint parts), summed with the other stage's, and the sum
// written back into the shard. Both stages walk the same rows in the same order.
static ot_status tied_combine(ot__par *p, const ot_param *q) {
  const size_t C = (size_t)q->shape[1], V = (size_t)q->shape[0];
  const size_t R = (size_t)p->chunk_rows;
  for (size_t r0 = 0; r0 < V; r0 += R) {
    const size_t n = (r0 + R < V ? R : V - r0) * C, a = q->offset + r0 * C;
    const size_t lo = a > p->s0 ? a : p->s0, hi = a + n < p->s1 ? a + n : p->s1;
    memset(p->chunk, 0, n * sizeof(float));
    if (lo < hi) memcpy(p->chunk + (lo - a), p->gs + (lo - p->s0), (hi - lo) * sizeof(float));
    OT_TRY(ot__allreduce(&p->g, p->g.dp_comm, p->chunk, n, OT_F32, OT_RED_SUM,
                         "ZeRO-2 tied-embedding assembly"));
    OT_TRY(ot__allreduce(&p->g, p->g.embed_comm, p->chunk, n, OT_F32, OT_RED_SUM,
                         "tied-embedding gradient all-reduce"));
    if (lo < hi) memcpy(p->gs + (lo - p->s0), p->chunk + (lo - a), (hi - lo) * sizeof(float));
  }
  return OT_OK;
}

ot_status ot__z2_finish(ot__par *p) {
  OT_TRY(ot__par_wait_jobs(p, 0));
  if (p->th_err != OT_OK) return ot_error(p->th_err, "%s", p->th_msg);
  ot_model *m = p->m;
  const int np = ot_model_param_count(m);
  if (p->g.embed_comm != MPI_COMM_NULL)
    for (int i = 0; i < np; i++) {
      const ot_param *q = ot_model_param_at(m, i);
      if (q->kind == OT_PT_EMBED) OT_TRY(tied_combine(p, q));
    }
  if (p->ng)
    OT_TRY(ot__allreduce(&p->g, p->g.dp_comm, p->gstage, p->ng, OT_F32, OT_RED_SUM,
                         "ZeRO-2 gradient reduction (positions, final norm)"));
  for (int i = 0; i < np; i++) {
    const ot_param *q = ot_model_param_at(m, i);
    if (q->layer < 0 && !chunked(q)) keep_shard(p, p->gstage + p->goff[i], q->offset, q->numel);
  }
  memset(p->gstage, 0, p->ng * sizeof(float));
  return OT_OK;
}

double ot__z2_sumsq(const ot__par *p) {
  const ot_model *m = p->m;
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
