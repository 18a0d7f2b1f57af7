// Shared pieces of the training tests (tests/test_train*.c): synthetic token
// shards with learnable structure and a tiny training config.
#ifndef OT_TEST_TRAIN_COMMON_H
#define OT_TEST_TRAIN_COMMON_H
#include "harness.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

// A token stream over [0, V) that a model can learn: mostly a fixed
// successor per token, sometimes a random one.
static void synth_tokens(int32_t *ids, int64_t n, int V, uint64_t seed) {
  th_rng r = {seed};
  int32_t t = 0;
  for (int64_t i = 0; i < n; i++) {
    ids[i] = t;
    t = (th_next(&r) % 10) < 8 ? (t * 7 + 3) % V : (int32_t)(th_next(&r) % (uint64_t)V);
  }
}

// Makes a fresh directory under /tmp holding train_000000.bin (ntrain tokens)
// and val_000000.bin (nval tokens); returns it (static buffer per call site
// when the caller copies it).
static const char *make_data(char *dir, size_t cap, int V, int64_t ntrain, int64_t nval) {
  snprintf(dir, cap, "/tmp/ot_test_train_XXXXXX");
  if (!mkdtemp(dir)) { th_check(false, "mkdtemp"); return NULL; }
  int32_t *ids = th_alloc((size_t)(ntrain > nval ? ntrain : nval) * sizeof(int32_t));
  char p[512];
  synth_tokens(ids, ntrain, V, 11);
  snprintf(p, sizeof p, "%s/train_000000.bin", dir);
  th_check(ot_shard_write(p, ids, ntrain, 1) == OT_OK, "write %s: %s", p, ot_last_error());
  synth_tokens(ids, nval, V, 12);
  snprintf(p, sizeof p, "%s/val_000000.bin", dir);
  th_check(ot_shard_write(p, ids, nval, 1) == OT_OK, "write %s: %s", p, ot_last_error());
  free(ids);
  return dir;
}

// rm -r of a test directory (only ever called on our mkdtemp directories).
static void remove_tree(const char *dir) {
  if (strncmp(dir, "/tmp/ot_test_train_", 19) != 0) return;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
}

// The tiny preset (V 50, C 32, 2 layers, T 16), small batches, quiet.
static ot_train_config tiny_config(const char *data) {
  ot_train_config c;
  ot_train_config_default(&c);
  ot_model_config_preset(&c.model, "tiny");
  snprintf(c.data, sizeof c.data, "%s", data ? data : "");
  c.batch_size = 4;
  c.seq_len = 16;
  c.steps = 20;
  c.lr = 1e-2f;
  c.warmup = 2;
  c.eval_batches = 2;
  c.quiet = true;
  c.measure_peak = false;
  c.out[0] = 0;
  // one thread: the tiny shapes are dominated by fork/join, which a busy
  // 2-core machine turns into seconds; the determinism tests use 2
  c.threads = 1;
  return c;
}

static ot_trainer *make_trainer(const ot_train_config *c) {
  ot_trainer *t = NULL;
  ot_status s = ot_trainer_create(&t, c);
  th_check(s == OT_OK, "ot_trainer_create: %s", ot_last_error());
  return t;
}
#endif
