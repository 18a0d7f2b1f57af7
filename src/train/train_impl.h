// Private helpers of the trainer (src/train/*.c): the key table shared by
// config.c and the checkpoints, the checkpoint files, the trainer object.
#ifndef OT_TRAIN_IMPL_H
#define OT_TRAIN_IMPL_H
#include "internal.h"
#include "io/files.h"
#include "ot/train.h"
#include "dist/par.h"

// ---- key table (config.c)
int ot__key_count(void);
const char *ot__key_name(int i);       // canonical ("batch-size")
bool ot__key_is_model(int i);          // part of the model shape (checked on resume)
bool ot__key_is_saved(int i);          // stored in checkpoints
bool ot__train_key_inverted(const char *key);      // a "not key" alias (vocab_emb_dp)
bool ot__train_key_value_named(const char *key);   // its values have other names (true = full, = 1)

// ---- checkpoint files (ckpt_files.c)
// Checksum of a file's __metadata__: every (key, value) pair but "meta_checksum",
// in key order. keys/vals [n].
uint64_t ot__meta_checksum(const char *const *keys, const char *const *vals, int n);
// Checks an open checkpoint file: its "meta_checksum", every tensor against its
// "checksum.<name>" (when the file carries checksums; `require`: it must), and
// with `values` every F32/BF16/F16 value finite (exp_avg_sq.* also >= 0).
// OT_EFORMAT naming the file and the tensor.
ot_status ot__ckpt_check_file(const ot_st_file *f, bool require, bool values);
// Refuses (OT_EINVAL naming the tensor) a trainer state holding a non-finite
// weight or moment, or a negative second moment.
ot_status ot__ckpt_check_state(ot_trainer *t, const char *dir);
// Removes the leftovers of interrupted saves in a run directory: .step_*.tmp
// and .step_*.del directories, latest.tmp, *.tmp files inside step_*
// directories (and such a directory when nothing else is in it); a
// .step_N.old directory goes back to step_N when that is missing, else away.
void ot__ckpt_cleanup(const char *out);
// True if dir holds a whole checkpoint (both files open and validate, their
// metadata checksums hold, the files they name exist); no tensor is read.
bool ot__ckpt_complete(const char *dir);

// ---- loss scaling (scaler.c): PyTorch GradScaler semantics
typedef struct {
  bool on;                  // scaling active (dtype f16 by default, or asked for)
  bool dynamic;             // grows and backs off; else a static scale
  float scale;              // the scale of the next step
  int64_t clean;            // consecutive clean steps since the last growth or backoff
  int interval;             // clean steps before a growth
  float growth, backoff, min;
} ot__scaler;
// From the resolved keys (loss_scale < 0: dynamic for dtype f16, off otherwise).
void ot__scaler_init(ot__scaler *s, const ot_train_config *c);
// The scale of the next step (1 when off).
float ot__scaler_scale(const ot__scaler *s);
// After a step: found_inf (agreed by every rank) backs the scale off (not below
// min) and restarts the count; else a clean step, and the interval-th grows it.
void ot__scaler_update(ot__scaler *s, bool found_inf);
// Test aid: whether OT_TEST_INF_GRAD names this step (1-based) and world rank.
bool ot__scaler_test_inf(int64_t step, int rank);

// ---- trainer internals shared with ckpt.c, ckpt_par.c and run.c
typedef struct { size_t off, n; bool decay; } ot__group;

struct ot_trainer {
  ot_train_config cfg;        // resolved
  ot_model *m;
  float *mom[2];              // AdamW m, v [s1 - s0] of this rank's shard (OT_MEM_OPTIM), NULL for eval_only
  ot__group *groups;          // contiguous ranges of the buffer with one decay setting
  int ngroups;
  ot_loader *train, *val;
  int32_t *x, *y;             // [B * T] one micro-batch's inputs and targets
  int64_t step, updates;
  uint64_t rng;               // trainer RNG state (advanced once per step; saved)
  double flops_tok;
  ot__par *par;               // the parallel runtime (dist/par.h), NULL for one process
  struct ot__tr *tr;          // task = translate: tokenizer, bitexts, batchers (translate.c); else NULL
  ot_train_hooks hooks;
  struct ot__cls *cls;        // task = classify: image sets, order, batch buffers (classify.c); else NULL
  ot__scaler scaler;          // loss scaling (fp16); state saved in checkpoints
};

// ---- the translate task (translate.c)
// Opens the tokenizer (<data>/vocab.json, merges.txt), the bitexts and their
// batchers, then creates the encoder-decoder model sized for them into t->m
// (run.S, run.T: the longest source / target + eos; run.B: the most rows of one
// forward; a data-parallel layout: this rank's part through the parallel
// runtime, t->par, each rank batching its rows of every global batch) and sets
// the label smoothing. t->cfg is resolved; t->cfg.model's
// vocab and token ids are set from the tokenizer.
ot_status ot__tr_create(ot_trainer *t);
void ot__tr_free(struct ot__tr *tr);
// This rank's micro-batches of the next global batch, forward and backward
// (parallel: every gradient reduction complete on return): *loss (sum of this
// rank's micro-batch losses, each over the global target count), *finite,
// *tokens (source + target tokens of the global batch), *tgt_tokens (its targets).
ot_status ot__tr_micro_batches(ot_trainer *t, double *loss, bool *finite, int64_t *tokens,
                               int64_t *tgt_tokens);
// Held-out loss over the first `batches` batches of the held-out bitext.
ot_status ot__tr_eval(ot_trainer *t, int batches, double *loss, double *nll, int64_t *tokens);
bool ot__tr_has_val(const ot_trainer *t);
// ---- the classify task (classify.c)
// Loads the image sets (channels and classes of the model checked), sets the model's
// dropout and drop-path from the keys and creates the vision transformer for batch_size
// images into t->m, with the batch buffers.
ot_status ot__cls_create(ot_trainer *t);
void ot__cls_free(struct ot__cls *c);
// grad_accum micro-batches of batch_size images, forward and backward: *loss (sum of the
// micro-batch losses, each over the step's images), *finite, *tokens = *tgt_tokens (the
// step's images x tokens per image).
ot_status ot__cls_micro_batches(ot_trainer *t, double *loss, bool *finite, int64_t *tokens,
                                int64_t *tgt_tokens);
// Held-out loss (and plain NLL) over the first batches x batch_size held-out images; the
// top-1 accuracy is kept for ot_trainer_accuracy; *images (may be NULL) = images scored.
ot_status ot__cls_eval(ot_trainer *t, int batches, double *loss, double *nll, int64_t *images);
bool ot__cls_has_val(const ot_trainer *t);
bool ot__cls_data_state(const ot_trainer *t, ot_loader_state *st);
ot_status ot__cls_set_data_state(ot_trainer *t, const ot_loader_state *st);
// The training data position (loader or batcher); false without training data.
bool ot__trainer_data_state(const ot_trainer *t, ot_loader_state *st);
ot_status ot__trainer_set_data_state(ot_trainer *t, const ot_loader_state *st);

// The parallel runtime's view of a resolved config and run (trainer.c).
ot__par_config ot__train_par_config(const ot_train_config *c, const ot_run_config *run);

// ot_trainer_create over a config already resolved by ot_train_config_resolve.
ot_status ot__trainer_create(ot_trainer **out, const ot_train_config *resolved);

// ---- checkpoints of a parallel trainer (ckpt_par.c): whole tensors gathered to
// world rank 0, which writes the one-process checkpoint; loading gives every
// rank its slices.
ot_status ot__ckpt_par_save(ot_trainer *t, const char *dir);
ot_status ot__ckpt_par_load(ot_trainer *t, const char *dir, bool weights_only);
// The whole model's weights gathered into `whole` on world rank 0 (a model of t's
// config the caller created there; NULL on the other ranks), every rank giving its
// slices (ZeRO-3: its shards; collective).
ot_status ot__par_whole_weights(ot_trainer *t, ot_model *whole);

// ot_train_run for a config ot_train_config_resolve has resolved (the `ot train`
// command resolves it once, to report a bad config before anything starts);
// it is not resolved again.
ot_status ot__train_run_resolved(const ot_train_config *resolved, FILE *out, double *final_loss,
                                 double *final_val);
// Same with hooks (NULL: none).
ot_status ot__train_run_hooks(const ot_train_config *resolved, const ot_train_hooks *h, FILE *out,
                              double *final_loss, double *final_val);

// ---- the profiler's three ratios of a run, per rank (ratios.c)
typedef struct { double step_s, comm_s, gemm_flops, gemm_s, alloc, used; } ot__ratio_sums;
typedef struct {
  ot__ratio_sums first, after;   // the run's first step (warm-up), the later ones
  int64_t steps_all;
  double f0, g0;                 // GEMM counters before the running step
  size_t a0;                     // bytes allocated before it
} ot__ratios;
// Around each step: counters before; after, the step's seconds, its exposed
// communication seconds and the FMA peak (GFLOP/s, 0: unknown) add it in (and
// record trace counters when profiling).
void ot__ratios_begin(ot__ratios *r);
void ot__ratios_end(ot__ratios *r, double step_s, double comm_s, double peak_gflops);
// At the end (collective over the world): world rank 0 prints every rank's
// communication share, matmul utilization and memory reuse with the thresholds and
// what to change beside each breach, writes one JSONL record per rank ({"step": S,
// "ratios": {...}}) to log (NULL: none) and the values into the trace's otherData.
ot_status ot__ratios_report(const ot__ratios *r, ot__par *par, double peak_gflops, int64_t step, FILE *out,
                            FILE *log);

#endif
