// The layout planner (`ot plan`): for a model, a global batch and a machine, every
// parallel layout (data x tensor x pipeline parallel, micro-batches, ZeRO stage,
// recompute, vocab-parallel, gradient fusion) with its per-device memory by category
// and its predicted step time (compute, exposed communication, pipeline bubble),
// tokens/s and MFU, ranked.
//
// Memory comes from the engine's own sizing code (ot_train_plan_memory: what
// ot_trainer_create allocates, to the byte) plus the ops' transient scratch; time from
// a cost model over the machine description (see ot_plan_eval for its terms).
#ifndef OT_PLAN_H
#define OT_PLAN_H
#include "ot/train.h"
#ifdef __cplusplus
extern "C" {
#endif

// A machine: hosts of devices joined by links. A CPU host (shared = true) runs its ranks
// on its cores: the host's GEMM rate and memory bandwidth are split over the ranks that
// run at once (at most `cores`), and a host never computes faster than all its cores. A
// GPU-like host (shared = false) has devices_per_host devices, each with the rates given.
typedef struct {
  char name[64];
  char source[512];          // where the numbers come from (a measurement, a datasheet)
  bool shared;               // CPU host: ranks share the cores
  int cores;                 // shared: cores per host
  int devices_per_host;      // ranks per host the layouts use (shared: default = cores)
  int hosts;                 // hosts available
  double mem_bytes;          // memory per device (shared: per host, split over its ranks)
  double gemm_flops;         // f32 / 16-bit GEMM FLOP/s: per device (shared: the whole host)
  double core_gemm_flops;    // shared: one core's (a rank of one thread)
  double attn_flops;         // causal flash attention, forward + backward (the model's count:
                             // 2 x 2 x D x (T + 1) / 2 per query and head, x 3): per device
                             // (shared: the whole host); 0: as gemm_flops
  double core_attn_flops;    // shared: one core's
  double gemm_rows_half;     // a GEMM of M rows runs at gemm_flops x M / (M + this) (0: always
                             // gemm_flops); measured from M = 2048 and 128
  double attn_len_half;      // attention over T runs at attn_flops x T / (T + this)
  double peak_flops;         // the FMA peak the MFU is quoted against (same unit)
  double mem_bw;             // memory-bound ops' bandwidth, bytes/s (same unit)
  double intra_bw, intra_lat;   // within a host: all-reduce bus bandwidth (bytes/s) and
                                // per-message latency (s) of the engine's collectives (2 ranks)
  double intra_bw4, intra_bw8;  // shared: the bus bandwidth when 4 / 8 ranks of the host move
                                // data at once (more ranks than cores: they take turns); 0:
                                // unmeasured (intra_bw x 2 / ranks)
  double inter_bw, inter_lat;   // between hosts: link bandwidth (bytes/s, per host) and latency
  double rank_overhead;      // bytes a rank holds beyond the library's tracked allocations
                             // (code, libraries, MPI's buffers, thread stacks): measured as the
                             // resident set minus the tracked bytes of a measuring rank
  double inter_bw4;          // between hosts: the all-reduce bus bandwidth of a group of 4 or more
                             // ranks that spans hosts (inter_bw: a pair, one rank a host); 0:
                             // unmeasured (inter_bw)
} ot_machine;

// Built-in machines: "this" needs a measured file (ot_machine_measure); presets
// "a100-80gb" (DGX A100: NVLink / NVSwitch inside, 8 x 200 Gb/s InfiniBand between)
// and "ascend-910" (MindSpore's Atlas 800: HCCS inside, 8 x 100 GbE RoCE between).
// Names: ot_machine_presets. OT_EINVAL naming them for other names.
ot_status ot_machine_preset(const char *name, ot_machine *m);
const char *ot_machine_presets(void);   // "a100-80gb, ascend-910"
// A machine file: 'key = value' lines (# comments), the keys of ot_machine_write.
ot_status ot_machine_read(const char *path, ot_machine *m);
ot_status ot_machine_write(const char *path, const ot_machine *m);
// Checks every field (positive rates, memory, at least one host and device).
ot_status ot_machine_validate(const ot_machine *m);
// Measures this host: cores, the GEMM rate of every core together (oneDNN f32 on
// transformer-sized shapes), the FMA peak, the STREAM-triad bandwidth and memory; under
// mpirun with 2+ ranks also the engine's all-reduce bandwidth and latency between
// ranks 0 and 1 (inter-host when they run on different hosts, else intra-host).
// Collective under mpirun.
ot_status ot_machine_measure(ot_machine *m, FILE *log);

// The ops' transient scratch world rank `rank` of a resolved lm config's layout holds during
// a step, on top of its planned memory (ot_train_plan_memory), by the GEMM choice and the
// thread count of this process (the engine's OT_GEMM): bytes.
typedef struct {
  size_t ops;      // the ops' scratch block (the QKV projection's f32 staging and gradient,
                   // the conversion tiles, the cross-entropy's row sums), as the slot holds it
  size_t gemm;     // the GEMMs' block: the own GEMM's packing workspace, where a GEMM of the
                   // rank's stage may run it (ot_gemm_scratch_of); 0 where none can (OT_GEMM=
                   // auto with every GEMM below the measurement threshold, or =onednn)
  size_t choice;   // the largest slice of C the first-use GEMM measurement holds (0: none measured)
  size_t total;
} ot_plan_scratch;
ot_status ot_plan_scratch_of(const ot_train_config *resolved, int rank, ot_plan_scratch *out);

// One layout's prediction.
typedef struct {
  // the layout (the training keys that run it)
  int dp, tp, pp;            // --data-parallel, --tensor-parallel, --pipeline-stages
  int micro_batches;         // --grad-accum: micro-batches per step and data-parallel rank
  int batch_size;            // --batch-size: rows per micro-batch
  int zero;                  // --optimizer-shard
  ot_recompute recompute;    // --recompute
  bool vocab_parallel;       // --vocab-parallel
  int buckets, fusion_layers;   // --grad-buckets, --comm-fusion-layers
  bool balanced_stages;      // --balanced-stages
  int first_stage_blocks;    // blocks on pipeline stage 0 (the split)
  int hosts, ranks_per_host;
  bool fits;
  char why[256];             // when !fits: the reason (memory, a rule of the layout)
  // memory of the fullest rank, bytes: by ot_mem_category, the ops' scratch (its stage's:
  // ot_plan_scratch_of), the total (these added up, or its creation's peak where larger:
  // ot_rank_memory.create_peak, ZeRO-3's initial weights)
  size_t mem[OT_MEM_CATEGORY_COUNT];
  size_t scratch, mem_total;
  size_t resident;           // mem_total + the machine's rank_overhead: the resident set
  int mem_rank;              // which rank that is
  // time of one optimizer step, seconds
  double t_compute;          // the slowest stage's forward + backward of its micro-batches
  double t_bubble;           // pipeline fill and drain
  double t_comm;             // exposed communication (not hidden behind compute)
  double t_optim;            // the optimizer update and ZeRO gathers after it
  double t_step;
  double tokens_per_s, mfu;
} ot_plan_result;

// Predicts one layout: cfg's model, batch, dtype and layout keys (data_parallel,
// tensor_parallel, pipeline_stages, grad_accum, optimizer_shard, recompute,
// vocab_parallel, comm_fusion_layers / grad_buckets, balanced_stages, overlap) on `hosts` hosts of m
// (ranks filling hosts in rank order: tensor fastest, then data, then pipeline).
// A layout the engine refuses, or one that does not fit the memory, gives fits = false
// with the reason (OT_OK). The cost model:
//   compute   GEMM + attention FLOPs / GEMM rate, plus memory-bound traffic (3 x the
//             saved activations, 4 x the logits) / bandwidth, per micro-batch and stage;
//             recompute adds its forward; a shared host also bounds its ranks' total work
//             by its rate;
//   tensor    4 all-reduces of [B*T, C] per block and micro-batch (6 with recompute),
//             ring volume 2 (n - 1) / n, on the slowest link the group spans;
//   pipeline  (M - 1) x the slowest stage + every stage once (fill / drain = bubble),
//             plus the stage-to-stage sends;
//   data      the gradient all-reduce (ZeRO-2/3: per micro-batch), hidden behind the
//             last backward where the link is a network (overlap on), not where the
//             host's cores move the bytes; ZeRO-1/2 all-gather the shards after the
//             update, ZeRO-3 gathers every block before its forward and backward
//             (prefetched behind compute) and the vocabulary tensors (not hidden).
ot_status ot_plan_eval(const ot_train_config *cfg, const ot_machine *m, int hosts, ot_plan_result *out);

// Every layout of `devices` ranks on `hosts` hosts for cfg's model and global batch
// (cfg.global_batch rows; 0: batch_size x grad_accum x data_parallel of cfg), ranked:
// those that fit by tokens/s (best first), then those that do not with their reasons.
// *out (malloc'd, free with free()) holds *n results. OT_EINVAL when no layout of that
// many devices exists (naming why), or the devices exceed the machine's.
ot_status ot_plan_search(const ot_train_config *cfg, const ot_machine *m, int hosts, int devices,
                         ot_plan_result **out, int *n);

#ifdef __cplusplus
}
#endif
#endif
