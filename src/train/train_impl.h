// Private helpers of the trainer (src/train/*.c): the key table shared by
// config.c and the checkpoints, the checkpoint files, the trainer object.
#ifndef OT_TRAIN_IMPL_H
#define OT_TRAIN_IMPL_H
#include "internal.h"
#include "io/files.h"
#include "ot/train.h"

// ---- key table (config.c)
int ot__key_count(void);
const char *ot__key_name(int i);       // canonical ("batch-size")
bool ot__key_is_model(int i);          // part of the model shape (checked on resume)
bool ot__key_is_saved(int i);          // stored in checkpoints

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

// ---- trainer internals shared with ckpt.c and the parallel layer (src/dist)
typedef struct { size_t off, n; bool decay; } ot__group;
typedef struct ot__par ot__par;   // parallel state (src/dist/ptrain.c), NULL for one process

struct ot_trainer {
  ot_train_config cfg;        // resolved
  ot_model *m;
  float *mom[2];              // AdamW m, v [n_floats] (OT_MEM_OPTIM), NULL for eval_only
  ot__group *groups;          // contiguous ranges of the buffer with one decay setting
  int ngroups;
  ot_loader *train, *val;
  int32_t *x, *y;             // [B * T] one micro-batch's inputs and targets
  int64_t step, updates;
  uint64_t rng;               // trainer RNG state (advanced once per step; saved)
  double flops_tok;
  ot__par *par;
};

// x = row[0:T], y = row[1:T+1] of B rows into t->x, t->y; returns the targets != -1.
int64_t ot__split_rows(ot_trainer *t, const int32_t *rows, int B);

// ---- the parallel layer (src/dist/ptrain.c, pckpt.c)
// True when the config asks for more than one process or mpirun started several.
bool ot__par_wanted(const ot_train_config *c);
// Creates the rank grid, this rank's model part (t->m) for run r and the
// reduction machinery. Moments are allocated by the caller over ot__par_shard.
ot_status ot__par_create(ot_trainer *t, const ot_run_config *r, ot__par **out);
void ot__par_free(ot__par *p);
void ot__par_shard(const ot__par *p, size_t *s0, size_t *s1);
int ot__par_dp(const ot__par *p);
int ot__par_rank(const ot__par *p);                  // world rank (0: the one that prints / writes)
double ot__par_comm_seconds(const ot__par *p);       // blocked in communication, last step
// Prints (world rank 0) the layout and every rank's memory by category (collective).
ot_status ot__par_report(ot_trainer *t, FILE *out);
ot_status ot__par_step(ot_trainer *t, const int32_t *rows, ot_step_info *info);
ot_status ot__par_eval_on(ot_trainer *t, const int32_t *rows, int nrows, double *loss,
                          int64_t *tokens);
// Checkpoints of a parallel trainer: whole tensors gathered to world rank 0,
// which writes the one-process checkpoint; loading gives every rank its slices.
ot_status ot__par_save(ot_trainer *t, const char *dir);
ot_status ot__par_load(ot_trainer *t, const char *dir, bool weights_only);

#endif
