// ZeRO-3: the parameters are sharded over the data-parallel ranks too.
//
// Each rank keeps its shard [s0, s1) of the stage's f32 master weights (ps), of
// the gradients (ZeRO-2's shard accumulator gs: each unit's reduce-scatter to its
// owners composed of the tuned all-reduce and keeping the shard, since Open MPI's
// reduce-scatter runs 10-20x slower here) and of the AdamW moments (the trainer's).
// The model part is created with param_slots: it stores the global tensors outside the
// blocks (positions, final norms, logits bias) and two block slots, block l in slot
// l % 2 (src/model/slots.c; an encoder-decoder's blocks numbered in running order,
// its encoder blocks, then its decoder blocks, so the prefetch crosses the seam). Before block l runs (comm.need_block) the
// runtime makes sure its slot holds it: the gather of block l was started while
// block l - 1 ran (forward; l + 1 in the backward) on the gather thread over a
// communicator of its own, so the all-gather of the next block's weights
// overlaps the current block's compute (--zero-prefetch; without it each block
// is gathered when it is needed). After the update the global tensors are
// gathered again and the slots are stale until their blocks are gathered. The
// vocabulary tensors (token embedding, head) are not stored whole: the embedding
// lookup and the head's GEMMs read them a chunk of rows at a time (need_rows,
// gathered when asked for).
//
// Memory per rank (f32 run): 4 n/dp (master shard) + 4 n/dp (gradient shard) +
// 8 n/dp (moments) = 16 n/dp bytes, plus the working set: the stored global
// tensors, two block slots, one chunk of vocabulary rows (f32 and 16-bit), and the
// gradient staging of ZeRO-2 (Z2_BUFS units and one vocabulary chunk); bf16 / f16
// runs add the 16-bit copies of the global tensors and the slots.
#include "dist_impl.h"
#include <stdlib.h>
#include <string.h>

// All-gather of layout range [a, b) from the dp ranks' shards into dst (contiguous
// storage of the range). Collective over the dp group, on the runtime's duplicate of
// the dp communicator (zcomm: the gather thread's, or the main thread's when no
// gather is in flight), never on dp_comm, where the reduction thread may be working.
// polite (the gather thread): the point-to-point ring (ot__allgatherv_ring), tested every
// 50 us with the core given away in between; else Open MPI's all-gather (its ring, comm.c).
static ot_status gather_range(ot__par *p, size_t a, size_t b, float *dst, bool polite, const char *what) {
  MPI_Comm comm = p->zcomm;
  const int dp = p->g.dp;
  int *cnt = malloc(2 * (size_t)dp * sizeof(int));
  if (!cnt) return ot_error(OT_ENOMEM, "ZeRO-3: out of memory");
  int *dsp = cnt + dp, mine = 0;
  for (int r = 0; r < dp; r++) {
    const size_t r0 = (size_t)p->displs[r], r1 = r0 + (size_t)p->counts[r];
    const size_t lo = a > r0 ? a : r0, hi = b < r1 ? b : r1;
    cnt[r] = lo < hi ? (int)(hi - lo) : 0;
    dsp[r] = lo < hi ? (int)(lo - a) : 0;
    if (r == p->g.dp_rank) mine = cnt[r];
  }
  const size_t lo = a > p->s0 ? a : p->s0;
  const float *src = mine ? p->ps + (lo - p->s0) : p->ps;
  ot__wd_begin(&p->g, what, -1);
  ot_status s = OT_OK;
  if (polite) {   // the gather thread: a blocking call would spin on a core the compute needs
    s = ot__allgatherv_ring(comm, src, dst, cnt, dsp, 3, what);
  } else {
    const int rc = MPI_Allgatherv(src, mine, MPI_FLOAT, dst, cnt, dsp, MPI_FLOAT, comm);
    if (rc != MPI_SUCCESS) s = ot__mpi_error(rc, what);
  }
  ot__wd_end();
  free(cnt);
  return s;
}

// Gathers block l into its slot (and its 16-bit copy); *sec: the seconds it took.
static ot_status gather_block(ot__par *p, int l, bool polite, double *sec) {
  const size_t a = p->zb[2 * l], b = p->zb[2 * l + 1];
  const double t0 = ot_now();
  OT_TRY(gather_range(p, a, b, ot_model_storage(p->m, a), polite, "ZeRO-3 all-gather of a block's weights"));
  OT_TRY(ot_model_sync_bf16_range(p->m, a, b));
  *sec = ot_now() - t0;
  return OT_OK;
}

static void *gatherer(void *arg) {
  ot__par *p = arg;
  pthread_mutex_lock(&p->zmu);
  for (;;) {
    while (p->zjob < 0 && !p->zstop) pthread_cond_wait(&p->zcv, &p->zmu);
    if (p->zjob < 0) break;
    const int l = p->zjob;
    pthread_mutex_unlock(&p->zmu);
    double sec = 0.0;
    ot_status s = gather_block(p, l, true, &sec);
    pthread_mutex_lock(&p->zmu);
    p->zgather_s += sec;
    if (s != OT_OK && p->zerr == OT_OK) {
      p->zerr = s;
      snprintf(p->zmsg, sizeof p->zmsg, "%s", ot_last_error());
    }
    if (s == OT_OK) p->zres[l % 2] = l;
    p->zjob = -1;
    pthread_cond_broadcast(&p->zcv);
  }
  pthread_mutex_unlock(&p->zmu);
  return NULL;
}

// Waits for the gather in flight (if any); its error, if it failed.
static ot_status wait_gather(ot__par *p) {
  if (!p->zth_up) return OT_OK;
  const double t0 = ot_now();
  ot__wd_begin(&p->g, "waiting for the ZeRO-3 prefetch of a block's weights", -1);
  pthread_mutex_lock(&p->zmu);
  while (p->zjob >= 0) pthread_cond_wait(&p->zcv, &p->zmu);
  ot_status s = p->zerr;
  pthread_mutex_unlock(&p->zmu);
  ot__wd_end();
  p->zwait_s += ot_now() - t0;
  return s == OT_OK ? OT_OK : ot_error(s, "%s", p->zmsg);
}

// Starts the gather of block l on the gather thread (none in flight).
static void launch(ot__par *p, int l) {
  pthread_mutex_lock(&p->zmu);
  p->zres[l % 2] = -1;
  p->zjob = l;
  pthread_cond_broadcast(&p->zcv);
  pthread_mutex_unlock(&p->zmu);
}

void ot__z3_need_block(ot__par *p, int l, bool backward) {
  ot_status s = wait_gather(p);
  if (s == OT_OK && p->zres[l % 2] != l) {   // not prefetched: gathered now, in full view
    double sec = 0.0;   // (no gather in flight: the thread does not touch the counters)
    s = gather_block(p, l, false, &sec);
    p->zgather_s += sec;
    p->zwait_s += sec;
    if (s == OT_OK) p->zres[l % 2] = l;
  }
  const int next = backward ? l - 1 : l + 1;
  if (s == OT_OK && p->zth_up && next >= 0 && next < p->L && p->zres[next % 2] != next) launch(p, next);
  ot__par_note_error(p, s);
}

ot_status ot__z3_setup(ot__par *p, bool prefetch) {
  ot_model *m = p->m;
  p->zb = calloc(2 * (size_t)p->L + 2, sizeof(size_t));
  p->ps = ot_mem_alloc((p->s1 - p->s0 ? p->s1 - p->s0 : 1) * sizeof(float), OT_MEM_PARAMS);
  if (!p->zb || !p->ps) return ot_error(OT_ENOMEM, "ZeRO-3: out of memory for the parameter shard");
  memset(p->ps, 0, (p->s1 - p->s0) * sizeof(float));
  for (int l = 0; l < p->L; l++) {   // (an encoder-decoder's: encoder blocks, then decoder blocks)
    ot_model_block_range(m, l, &p->zb[2 * l], &p->zb[2 * l + 1]);
    if (p->zb[2 * l + 1] <= p->zb[2 * l]) return ot_error(OT_EINTERNAL, "ZeRO-3: block %d is empty", l);
  }
  p->zres[0] = p->zres[1] = -1;
  p->zjob = -1;
  int rc = MPI_Comm_dup(p->g.dp_comm, &p->zcomm);
  if (rc != MPI_SUCCESS) return ot__mpi_error(rc, "ZeRO-3: duplicating the data-parallel communicator");
  if (!prefetch) return OT_OK;
  pthread_mutex_init(&p->zmu, NULL);
  pthread_cond_init(&p->zcv, NULL);
  if (pthread_create(&p->zth, NULL, gatherer, p) != 0)
    return ot_error(OT_EINTERNAL, "ZeRO-3: cannot start the gather thread");
  p->zth_up = true;
  return OT_OK;
}

void ot__z3_free(ot__par *p) {
  if (p->zth_up) {
    pthread_mutex_lock(&p->zmu);
    while (p->zjob >= 0) pthread_cond_wait(&p->zcv, &p->zmu);
    p->zstop = true;
    pthread_cond_broadcast(&p->zcv);
    pthread_mutex_unlock(&p->zmu);
    pthread_join(p->zth, NULL);
    pthread_mutex_destroy(&p->zmu);
    pthread_cond_destroy(&p->zcv);
    p->zth_up = false;
  }
  if (p->zcomm != MPI_COMM_NULL && p->zcomm != 0) MPI_Comm_free(&p->zcomm);
  ot_mem_free(p->ps);
  p->ps = NULL;
  free(p->zb);
  p->zb = NULL;
}

// The stored global tensors (positions, final norm; not the vocabulary ones): gathered
// from the shards (full == NULL) or copied from the stage's layout full.
static ot_status globals(ot__par *p, const float *full) {
  ot_model *m = p->m;
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *q = ot_model_param_at(m, i);
    if (q->layer >= 0 || !ot_model_param_stored(m, i)) continue;
    const size_t a = q->offset, b = a + q->numel;
    if (full) memcpy(ot_model_storage(m, a), full + a, q->numel * sizeof(float));
    else OT_TRY(gather_range(p, a, b, ot_model_storage(m, a), false, "ZeRO-3 all-gather of the global weights"));
    OT_TRY(ot_model_sync_bf16_range(m, a, b));
  }
  return OT_OK;
}

ot_status ot__z3_refresh(ot__par *p) {
  OT_TRY(wait_gather(p));
  OT_TRY(globals(p, NULL));
  p->zres[0] = p->zres[1] = -1;   // the blocks' weights changed
  if (p->zth_up) launch(p, 0);
  return OT_OK;
}

ot_status ot__z3_set(ot__par *p, const float *full) {
  OT_TRY(wait_gather(p));
  memcpy(p->ps, full + p->s0, (p->s1 - p->s0) * sizeof(float));
  OT_TRY(globals(p, full));
  p->zres[0] = p->zres[1] = -1;
  return OT_OK;
}

void ot__z3_need_rows(ot__par *p, int i, int r0, int rows) {
  const ot_param *q = ot_model_param_at(p->m, i);
  const size_t C = (size_t)q->shape[1], a = q->offset + (size_t)r0 * C;
  ot_status s = wait_gather(p);
  const double t0 = ot_now();
  if (s == OT_OK) s = gather_range(p, a, a + (size_t)rows * C, p->rbuf, false,
                                   "ZeRO-3 all-gather of vocabulary rows");
  const double sec = ot_now() - t0;   // (no gather in flight: the thread does not touch the counters)
  p->zgather_s += sec;
  p->zwait_s += sec;
  if (s != OT_OK) memset(p->rbuf, 0, (size_t)rows * C * sizeof(float));   // defined, the step fails
  ot__par_note_error(p, s);
}
