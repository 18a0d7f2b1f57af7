// Private helpers of the training engine (src/engine/*.c): the key table
// shared by config.c and the checkpoints, file utilities, the trainer object.
#ifndef OT_ENGINE_IMPL_H
#define OT_ENGINE_IMPL_H
#include "internal.h"
#include "ot/train.h"

// ---- key table (config.c)
int ot__key_count(void);
const char *ot__key_name(int i);       // canonical ("batch-size")
bool ot__key_is_model(int i);          // part of the model shape (checked on resume)
bool ot__key_is_saved(int i);          // stored in checkpoints

// ---- files (util.c)
// mkdir -p; OT_EIO naming the directory on failure.
ot_status ot__mkdirs(const char *dir);
bool ot__exists(const char *path);
bool ot__is_dir(const char *path);
// Writes text[0, len) to path atomically (path.tmp, fsync, rename, fsync dir).
ot_status ot__write_atomic(const char *path, const void *data, size_t len);
// Reads a whole (small) file into a malloc'd NUL-terminated buffer (max_bytes cap).
ot_status ot__read_text(const char *path, size_t max_bytes, char **out, size_t *len);
// path = dir + "/" + name, OT_EINVAL if it does not fit.
ot_status ot__join(char *out, size_t cap, const char *dir, const char *name);
// 64-bit hash of n floats' bit patterns (order-dependent, deterministic).
uint64_t ot__hash_floats(const float *x, size_t n);

// ---- trainer internals shared with ckpt.c
typedef struct { size_t off, n; bool decay; } ot__group;

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
};

#endif
