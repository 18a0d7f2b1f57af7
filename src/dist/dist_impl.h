// Private interface of the parallel layer (src/dist/): the rank grid and its
// communicators, collectives guarded by a watchdog, and the parallel runtime's
// state behind the hooks of dist/par.h.
#ifndef OT_DIST_IMPL_H
#define OT_DIST_IMPL_H
#include <mpi.h>
#include "internal.h"
#include "ot/dist.h"
#include "ot/model.h"

// The rank grid: tp fastest, then dp, then pp:
//   world rank = tp_rank + tp * (dp_rank + dp * pp_rank).
// One communicator per group: tp (same dp, pp), dp (same tp, pp), pp (same
// tp, dp), embed (the stages of the same tp, dp that hold a copy of the token
// embedding, when two or more do: a tied model's first and last stage; an
// encoder-decoder's first stage, the stage of decoder block 0 and a tied head's
// last stage; else MPI_COMM_NULL).
typedef struct {
  int world, rank;
  int dp, tp, pp;
  int dp_rank, tp_rank, pp_rank;
  MPI_Comm tp_comm, dp_comm, pp_comm, embed_comm, world_comm;
  double timeout;       // seconds a blocking operation may wait before the job is ended
} ot__grid;

// Builds the grid for dp x tp x pp over the world (collective); embed_stage [pp]:
// the stages holding a copy of the embedding (NULL: none). OT_EINVAL when the
// world size is not dp * tp * pp, naming both and the fix.
// Grid coordinates of world rank r (tensor fastest, then data, then pipeline).
void ot__grid_coords(int r, int dp, int tp, int *dp_rank, int *tp_rank, int *pp_rank);
ot_status ot__grid_create(ot__grid *g, int dp, int tp, int pp, const bool *embed_stage,
                          double timeout);
void ot__grid_free(ot__grid *g);

// Watchdog (watchdog.c): blocking operations run between wd_begin and wd_end;
// one that lasts longer than the grid's timeout prints "rank R (dp, tp, pp):
// <what> did not complete within S s ..." naming the ranks that stopped
// answering the heartbeat (world rank, coordinates, host, pid) and the ones
// that wait, sends SIGKILL to a stopped one on this host and ends the job (a
// dead or hung peer never hangs it).
// start: collective, once MPI runs (ot_dist_init): the ranks' identities and the
// heartbeat (world > 1 and MPI_THREAD_MULTIPLE), the watchdog thread.
// stop: before MPI_Finalize; the thread and the heartbeat end.
// thread: starts the watchdog thread without heartbeat when none runs (false: it cannot).
ot_status ot__wd_start(void);
void ot__wd_stop(void);
bool ot__wd_thread(void);
void ot__wd_begin(const ot__grid *g, const char *what, int peer);
void ot__wd_end(void);
// Seconds the calling thread has spent inside guarded (blocking) operations.
double ot__comm_seconds(void);

// In-place all-reduce of buf [n] over comm (f32 or bf16 summed in f32; op sum
// or max), guarded by the watchdog; `what` names it in messages.
ot_status ot__allreduce(const ot__grid *g, MPI_Comm comm, void *buf, size_t n, ot_dtype dt,
                        ot_red_op op, const char *what);
ot_status ot__allreduce_f64(const ot__grid *g, MPI_Comm comm, double *buf, int n, const char *what);
// Point-to-point along the pipeline (from / to: stage indices = pp_comm ranks): blocking receive, and a
// send that completes before ot__send_wait returns (one outstanding per tag).
ot_status ot__recv(const ot__grid *g, void *buf, size_t bytes, int from, int tag, const char *what);
ot_status ot__isend(const ot__grid *g, const void *buf, size_t bytes, int to, int tag,
                    MPI_Request *req);
ot_status ot__wait(const ot__grid *g, MPI_Request *req, const char *what);
// Gathers shards [counts[r]] of every dp rank into buf (in place: rank r's shard at displs[r]).
ot_status ot__allgather_f32(const ot__grid *g, MPI_Comm comm, float *buf, const int *counts,
                            const int *displs, const char *what);
// All-gather of the blocks [cnt[r]] at dst + dsp[r] over comm, rank r's from src (copied
// into place unless it is there): a ring of point-to-point steps, polled with sleeps between
// tests (for a helper thread that must not spin on the compute's cores). Messages use tag.
ot_status ot__allgatherv_ring(MPI_Comm comm, const float *src, float *dst, const int *cnt, const int *dsp,
                              int tag, const char *what);
ot_status ot__mpi_error(int rc, const char *what);

// ------------------------------------------------------ parallel runtime ----
#include <pthread.h>
#include "dist/par.h"
// ZeRO-2 staging buffers: Z2_BUFS - 1 unit reductions overlap the backward.
#define Z2_BUFS 3
// The parallel runtime's state (ptrain.c; ZeRO-2 staging in zero2.c).
struct ot__par {
  ot__grid g;
  ot_model *m;               // this rank's model part (owned by the trainer)
  ot_model_config mc;        // the whole model's config
  int B, T;                  // micro-batch rows, sequence length
  ot_dtype dt;               // activation dtype of the run
  float comm_timeout;
  int M, slots;
  bool gpipe, overlap;
  int zero;
  size_t n;                  // local parameter floats
  size_t s0, s1;             // this rank's ZeRO shard [s0, s1) (whole buffer without ZeRO)
  int *counts, *displs;      // shards of every dp rank (allgather)
  bool *own;                 // [n_params] counted in the global gradient norm
  // gradient buckets
  int nb;
  size_t *bstart;            // [nb + 1] boundaries (floats)
  int fusion;                // > 0: buckets of that many consecutive blocks
  int nblocks;               // blocks of this stage (both stacks)
  bool *launched;            // [nb]
  bool last_mb;              // the running backward is the step's last micro-batch
  // reduction thread
  pthread_t th;
  bool th_up, th_stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int *queue, qhead, qtail, pending;
  ot_status th_err;
  char th_msg[512];
  // pipeline
  void *gsend;               // gradient send buffer [B*T*C] of the run dtype
  size_t act_bytes;
  MPI_Request *freq, breq;   // [slots] forward sends, the backward send
  // encoder-decoder stages (pipe_s2s.c): this stage's blocks [k0, k1) of nblk, the
  // first nenc of them the encoder's; `seam` the stage of the last encoder block
  int k0, k1, nblk, nenc, seam;
  MPI_Request *ereq;         // [slots * pp] the seam stage's sends of the encoder output
  MPI_Request dreq;          // the send of the encoder output's partial gradient
  void *dsend;               // [B*S*C] its buffer (stages after the seam)
  double comm_s;             // communication seconds of the last step (blocked main thread)
  double comm0;              // ot__comm_seconds() when the running step began
  // ZeRO-2 (zero == 2, zero2.c): the model's gradients live in staging buffers
  float *gs;                 // [s1 - s0] this rank's shard, reduced over dp and accumulated
  float *gstage;             // [ng] the small global parameters' gradients (positions, final
                             // norm), accumulated over the step's micro-batches
  float *ustage[Z2_BUFS];    // [usz] one unit's gradients, units taking them in turn
  float *chunk;              // [chunk_rows * d_model] embedding / head rows (comm.chunk_buf)
  int chunk_rows;
  size_t ng, usz;
  size_t *goff;              // [n_params] a small global parameter's offset in gstage
  int L;                     // blocks of this stage
  int nu;                    // units: a block matrix and the parameters up to the next one
  size_t *u0;                // [nu + 1] unit k = layout floats [u0[k], u0[k + 1])
  int *unit_of;              // [n_params] a block parameter's unit
  bool *unit_done;           // [nu] reduced in the running micro-batch
  // ZeRO-3 (zero == 3, zero3.c; the gradients as ZeRO-2)
  float *ps;                 // [s1 - s0] this rank's shard of the master weights
  float *rbuf;               // [chunk_rows, d_model] vocabulary rows (comm.row_buf)
  uint16_t *rbuf16;          // [chunk_rows, d_model] their 16-bit copy (comm.row_buf16)
  size_t *zb;                // [2 L] block l's layout range [zb[2l], zb[2l + 1])
  int zres[2];               // the block each slot holds (-1: none or stale)
  int zjob;                  // block the gather thread is gathering (-1: none)
  bool zth_up, zstop;
  pthread_t zth;
  pthread_mutex_t zmu;
  pthread_cond_t zcv;
  MPI_Comm zcomm;            // duplicate of dp_comm for the gathers
  ot_status zerr;
  char zmsg[512];
  double zgather_s, zwait_s; // seconds gathering blocks / the main thread waiting for them
};

// Length of the name prefix that names q's block ("model.encoder.layers.3." -> up to
// the layer number), 0 for a global tensor (zero2.c).
size_t ot__block_prefix(const ot_param *q);
// ZeRO-2 (zero2.c). setup: staging + shard buffers, gradients bound to the model.
ot_status ot__z2_setup(ot__par *p);
// ZeRO-2's units over a stage's layout (u non-NULL: their starts u0 [nu + 1], each block
// parameter's unit, each small global's offset goff in the globals' staging), the globals'
// staging floats *ng and the largest unit *usz; ot__z2_bytes: the gradient bytes ZeRO-2
// allocates for a shard of `shard` floats (shard accumulator, globals, Z2_BUFS units).
typedef struct { size_t *u0; int *unit_of; size_t *goff; int nu; } ot__z2_layout;
ot_status ot__z2_units(const ot_model *m, bool whole_blocks, ot__z2_layout *u, size_t *ng, size_t *usz);
// Whether the units are whole blocks (post-norm models, encoder-decoders; see zero2.c).
bool ot__z2_whole_blocks(const ot_model_config *mc);
size_t ot__z2_bytes(size_t shard, size_t ng, size_t usz);
void ot__z2_free(ot__par *p);
// Rows of the embedding / head chunk for a model width.
int ot__z2_chunk_rows(int d_model);
// Reduction job of unit k (the reduction thread or inline): all-reduce over dp,
// add this rank's shard into gs, zero the staging.
ot_status ot__z2_unit_reduce(ot__par *p, int k);
// Model callbacks under ZeRO-2 (every micro-batch).
void ot__z2_grads_ready(ot__par *p, size_t from);
void ot__z2_vocab_chunk(ot__par *p, int param, int row0, int rows);
// Before each micro-batch's backward: every staging buffer free.
ot_status ot__z2_before_backward(ot__par *p);
// After the step's backwards: the global parameters' gradients reduced into gs.
ot_status ot__z2_finish(ot__par *p);
// Sum of squares of the shard's gradients this rank counts.
double ot__z2_sumsq(const ot__par *p);
// ZeRO-3 (zero3.c). setup: the master shard, the block ranges, the gather communicator
// and (prefetch) the gather thread; need_block: the model's hook; refresh: after the
// update, the global tensors gathered, the slots stale (block 0 prefetched); set: the
// shard and the global tensors from the whole stage layout full [n].
ot_status ot__z3_setup(ot__par *p, bool prefetch);
void ot__z3_free(ot__par *p);
void ot__z3_need_block(ot__par *p, int l, bool backward);
void ot__z3_need_rows(ot__par *p, int param, int row0, int rows);
ot_status ot__z3_refresh(ot__par *p);
ot_status ot__z3_set(ot__par *p, const float *full);
// Waits until at most `left` reduction jobs are pending; the thread's error if any.
ot_status ot__par_wait_jobs(ot__par *p, int left);
ot_status ot__par_launch_job(ot__par *p, int k);
// The first error of a model callback (which cannot fail) kept where the step reports it.
void ot__par_note_error(ot__par *p, ot_status s);



#endif
