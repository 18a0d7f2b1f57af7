// The parallel runtime's hooks (src/dist/): what the trainer (src/train/)
// calls to run a data x tensor x pipeline parallel layout. The runtime owns
// the rank grid, this rank's model part, the micro-batch schedule over the
// pipeline stages, the gradient reduction (buckets, overlap, ZeRO-2 staging),
// the squared-norm reduction, the ZeRO shard and the gather after the update;
// the trainer owns the optimizer step, the evaluation rule and checkpoints.
// The runtime never sees the trainer: it gets the model config, the run
// shape, the schedule numbers and the input / target buffers.
#ifndef OT_DIST_PAR_H
#define OT_DIST_PAR_H
#include <stdio.h>
#include "internal.h"
#include "ot/model.h"

typedef struct ot__par ot__par;

// What the runtime needs of a (resolved) training config.
typedef struct {
  ot_model_config model;
  ot_run_config run;          // B = micro-batch rows, T = sequence length, dtype, recompute
  int dp, tp, pp;             // data, tensor, pipeline parallel sizes
  int micro_batches;          // per step and data-parallel rank (grad_accum)
  bool gpipe, overlap, vocab_parallel;
  bool balanced_stages;       // stages split by compute cost (ot__par_stage_layers)
  int zero;                   // ZeRO stage 0 | 1 | 2 | 3
  bool zero_prefetch;         // ZeRO-3: gather the next block while the current one runs
  int grad_buckets;
  int fusion_layers;          // > 0: buckets of that many consecutive blocks (else grad_buckets)
  float comm_timeout;         // seconds (0: never)
} ot__par_config;

// What rank `rank` of a layout allocates, by memory category (ot_mem_category), from the
// same sizing code ot__par_create and the model use (no MPI, nothing allocated): the
// model part's plan, ZeRO-2's gradient staging and vocabulary-row chunk, ZeRO-3's
// parameter shard and row buffers, the pipeline's send buffers. The optimizer's moments
// are the trainer's (2 x shard_floats f32 each under AdamW). OT_EINVAL for a layout the
// model cannot be split into, naming the numbers.
typedef struct {
  size_t bytes[7];            // by ot_mem_category (OT_MEM_CATEGORY_COUNT)
  int dp_rank, tp_rank, pp_rank, layer0, layer1, slots;
  int vocab_rows;             // the embedding / head rows of this tensor rank (vocab-parallel: its part)
  int chunk_rows;             // ZeRO-2/3's vocabulary rows per chunk (0 below ZeRO-2)
  size_t n_floats;            // the stage's parameter buffer (floats)
  size_t shard_floats;        // the part the optimizer updates (ZeRO >= 1: the shard)
  ot_mem_plan model;          // the part's own plan
} ot__par_mem;
ot_status ot__par_plan_rank(const ot__par_config *c, int rank, ot__par_mem *out);

// Blocks [*l0, *l1) of pipeline stage s: equal numbers (L / pp each, the first L % pp
// stages one more), or with balanced_stages the contiguous split whose slowest stage costs
// least, a block costing its forward + backward FLOPs per micro-batch (an encoder block over
// the source length, a decoder block with its cross-attention) and the last stage also the
// head's (divided over the tensor ranks when vocab-parallel); every stage gets a block.
void ot__par_stage_layers(const ot__par_config *c, int s, int *l0, int *l1);

// True when dp * tp * pp > 1 or mpirun started several processes.
bool ot__par_wanted(int dp, int tp, int pp);
// Creates the rank grid, this rank's model part (*m, owned by the caller, freed
// after ot__par_free) and the reduction machinery (collective).
ot_status ot__par_create(const ot__par_config *pc, ot_model **m, ot__par **out);
void ot__par_free(ot__par *p);   // NULL ok; before the model (its thread reads the gradients)

// This rank's ZeRO shard [s0, s1) of the parameter buffer (the whole buffer without ZeRO).
void ot__par_shard(const ot__par *p, size_t *s0, size_t *s1);
int ot__par_dp(const ot__par *p);                    // 1 for NULL
int ot__par_dp_rank(const ot__par *p);               // 0 for NULL
int ot__par_rank(const ot__par *p);                  // world rank (0: the one that prints / writes)
double ot__par_comm_seconds(const ot__par *p);       // blocked in communication, last step
// Prints (world rank 0) the layout and every rank's memory by category (collective).
ot_status ot__par_report(ot__par *p, FILE *out);

// ---- the step (every rank, in this order)
// Micro-batch schedule: forward and backward of this data-parallel rank's
// micro_batches x B rows [.., T + 1] (x, y: [B * T] scratch) over the pipeline
// stages (1F1B or GPipe), each loss divided by `count` (the global batch's
// scored targets); then every gradient reduction is complete (buckets over dp,
// the tied embedding between first and last stage). *loss: this rank's summed
// micro-batch losses (last stage only, else 0); *finite: all of them finite.
ot_status ot__par_micro_batches(ot__par *p, const int32_t *rows, int32_t *x, int32_t *y, float count,
                                double *loss, bool *finite);
// ---- a task's own forwards on the runtime's schedule (the classify task): fn runs
// micro-batch mb of this data-parallel rank's micro_batches into the stage's slot `slot`
// (ot_model_forward_images_slot: the first stage reads its images, the last its labels;
// the runtime moves the stage inputs and outputs and runs the backwards), *loss the last
// stage's. ot__par_micro_batches_fn is ot__par_micro_batches with it (loss, finite: the
// same), ot__par_eval_fn ot__par_eval_chunk (b rows of run.T tokens; fn gets mb = -1,
// slot 0, want_grad false).
typedef ot_status (*ot__par_fwd_fn)(void *ctx, ot_model *m, int mb, int slot, bool want_grad,
                                    double *loss);
ot_status ot__par_micro_batches_fn(ot__par *p, ot__par_fwd_fn fn, void *ctx, double *loss,
                                   bool *finite);
ot_status ot__par_eval_fn(ot__par *p, ot__par_fwd_fn fn, void *ctx, int b, double *l, bool *counts);
// ---- a task's own micro-batches (the translate task, its forwards and backwards
// run by the task): before each micro-batch's backward
// ot__par_before_backward (last: the step's last micro-batch of this rank; with
// overlap its backward launches the bucket reductions; ZeRO-2: the staging), and
// after the last backward ot__par_finish_backward (every gradient reduction
// complete). ZeRO-2 and 3 reduce (ZeRO-3 also gathers) per micro-batch: every
// data-parallel rank must run the same number of them (ot__par_max_int, padding with
// empty ones).
ot_status ot__par_before_backward(ot__par *p, bool last);
ot_status ot__par_finish_backward(ot__par *p);
// *v := its maximum over the world (collective).
ot_status ot__par_max_int(ot__par *p, int *v, const char *what);
// An encoder-decoder's micro-batches over the pipeline stages (pipe_s2s.c; one stage:
// the model's calls). step: the M micro-batches mb [M] of this data-parallel rank
// (every stage of it gets the same) 1F1B, each forward receiving this stage's inputs
// (the previous stage's output, the encoder output from the stage of the last encoder
// block) and sending its outputs on, each backward (ot__par_before_backward included,
// the last micro-batch's launching the overlapped reductions) receiving their
// gradients and sending its input's gradient and the encoder output's partial
// gradient back; every micro-batch's dropout stream is (seed, counter), its rows'
// masks from their sample indices (ot_s2s_batch.sample); *loss: the
// last stage's summed losses (else 0). forward: one forward without a backward
// (evaluation). flush: every send complete.
ot_status ot__par_s2s_step(ot__par *p, const ot_s2s_batch *mb, int M, float count,
                           uint64_t seed, uint64_t counter, double *loss, bool *finite);
ot_status ot__par_s2s_forward(ot__par *p, const ot_s2s_batch *b, float count, bool want_grad,
                              double *loss);
ot_status ot__par_s2s_flush(ot__par *p);
int ot__par_zero(const ot__par *p);                  // ZeRO stage (0 for NULL)
int ot__par_tp_rank(const ot__par *p);               // 0 for NULL

// World-wide reduction of the loss (last stage, tensor rank 0, summed over dp),
// the non-finite flag (false on any rank: false on every rank) and the squared
// gradient norm (each element counted once).
ot_status ot__par_reduce_norm(ot__par *p, double *loss, bool *finite, double *sumsq);
// Gradients of the shard [s1 - s0] (ZeRO-2: the reduced shard accumulator).
float *ot__par_shard_grads(ot__par *p);
// True when the optimizer may write the bf16 copy itself (no ZeRO: every rank updates all).
bool ot__par_update_writes_bf16(const ot__par *p);
// After the shard's update: the shards gathered over dp and the bf16 copy refreshed (ZeRO;
// ZeRO-3: the global tensors, the blocks when they next run).
ot_status ot__par_gather(ot__par *p);
// The master weights of the shard [s1 - s0] the optimizer updates (ZeRO-3: the only copy
// of them on this rank; else the model's buffer from s0).
float *ot__par_shard_params(ot__par *p);
// Initial weights (as ot_model_init; ZeRO-3: the layout initialized into a temporary
// buffer, this rank's shard and the global tensors kept), and weights set from the
// stage's whole layout full [n_floats] (checkpoint loads).
ot_status ot__par_init_params(ot__par *p, uint64_t seed);
ot_status ot__par_set_params(ot__par *p, const float *full);
// full [n_floats] := the stage's master weights this rank holds (ZeRO-3: its shard,
// zeros elsewhere; else the whole buffer).
void ot__par_local_params(const ot__par *p, float *full);
// ZeRO-3 over the run so far: seconds spent gathering blocks' weights, and the part of
// them the main thread waited for (not hidden behind compute). Zeros otherwise.
void ot__par_gather_stats(ot__par *p, double *gather_s, double *exposed_s);
// Zeroes the step's gradients (ZeRO-2: the shard accumulator).
void ot__par_zero_grads(ot__par *p);

// ---- evaluation (the trainer deals B-row chunks round-robin to the dp ranks)
// Forward only of one chunk x, y [b, T] through the pipeline stages, the loss
// divided by n; *l is the chunk's loss where *counts (last stage, tensor rank 0).
ot_status ot__par_eval_chunk(ot__par *p, const int32_t *x, const int32_t *y, int b, float n,
                             double *l, bool *counts);
// v [n] := its sum over the world (collective).
ot_status ot__par_sum(ot__par *p, double *v, int n, const char *what);

// ---- checkpoints: gather to world rank 0, agreement
// buf [n] := the sum of every rank's buf on world rank 0 (contributors give
// their slice, zeros elsewhere); other ranks' buf unchanged (collective).
ot_status ot__par_gather_sum(ot__par *p, float *buf, size_t n);
// True on every rank when ok on every rank (collective).
bool ot__par_all_ok(ot__par *p, bool ok);
// World rank 0's ok on every rank (collective).
bool ot__par_root_ok(ot__par *p, bool ok);

// ---- replica consistency (replica.c), after a step's update (collective): the
// parameters that must be identical across the data-parallel replicas, and the
// replicated ones across the tensor group, compared by checksum; OT_EINTERNAL on
// every rank naming the first tensor that differs and the world ranks involved.
ot_status ot__par_check_replicas(ot__par *p, int64_t step);

#endif
