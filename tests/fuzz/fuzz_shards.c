// libFuzzer target: token shards (ot_shard_open) and the loader over one
// (ot_loader_open, ot_loader_set_state with a fuzzed state, ot_loader_next).
// Input: 25 bytes of loader settings and state (flags, epoch, index,
// fingerprint; missing bytes are 0), then the shard file. Invariants: an
// accepted shard is rewritten by ot_shard_write byte for byte; every batch
// token is < vocab; a refusal has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB (1 << 20)

static uint64_t le64(const uint8_t *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
  return x;
}

// The shard f written again by our writer holds the same version and tokens:
// the same file bytes, except header words 3..255 (zero in our files; llm.c's
// readers, and ours, ignore them).
static void round_trip(const ot_shard *f, const uint8_t *file, size_t n) {
  const int64_t nt = ot_shard_ntokens(f);
  int32_t *ids = ot_mem_alloc(sizeof(int32_t) * (size_t)nt, OT_MEM_OTHER);
  FZ_CHECK(ids != NULL, "out of memory");
  ot_shard_read(f, 0, nt, ids);
  for (int64_t i = 0; i < nt; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < VOCAB, "token %d beyond vocab", ids[i]);
  char path[600];
  fz_scratch(path, sizeof path, "rt.bin");
  ot_status s = ot_shard_write(path, ids, nt, ot_shard_version(f));
  FZ_CHECK(s == OT_OK, "an accepted shard does not write back: %s", ot_last_error());
  ot_mem_free(ids);
  FILE *g = fopen(path, "rb");
  FZ_CHECK(g != NULL, "cannot reopen %s", path);
  uint8_t *back = malloc(n + 1);
  const size_t k = fread(back, 1, n + 1, g);
  fclose(g);
  FZ_CHECK(k == n && n >= 1024 && memcmp(back, file, 12) == 0 && memcmp(back + 1024, file + 1024, n - 1024) == 0,
           "the rewritten shard differs (%zu vs %zu bytes)", k, n);
  free(back);
}

static void loader(const char *path, const uint8_t *cfgb) {
  const uint8_t flags = cfgb[0];
  const char *paths[1] = {path};
  ot_loader_config c;
  memset(&c, 0, sizeof c);
  c.paths = paths;
  c.npaths = 1;
  c.vocab_size = VOCAB;
  c.B = 1 + (flags >> 5 & 1);
  c.T = 1 + (flags & 7);
  c.shuffle = flags & 8;
  c.seed = 7;
  c.world = 1 + (flags >> 4 & 1);
  c.rank = c.world - 1;
  ot_loader *L = NULL;
  ot_status s = ot_loader_open(&L, &c);
  if (s != OT_OK) {
    fz_refused(s, "ot_loader_open");
    return;
  }
  ot_loader_state st0, st = {le64(cfgb + 1), le64(cfgb + 9), le64(cfgb + 17)};
  ot_loader_get_state(L, &st0);
  if (flags & 64) st.fingerprint = st0.fingerprint;   // reach the checks past the fingerprint
  s = ot_loader_set_state(L, &st);
  if (s != OT_OK) fz_refused(s, "ot_loader_set_state");
  for (int b = 0; b < 3; b++) {
    const int32_t *batch = NULL;
    s = ot_loader_next(L, &batch);
    FZ_CHECK(s == OT_OK && batch, "ot_loader_next failed: %s", ot_last_error());
    for (int i = 0; i < c.B * (c.T + 1); i++) FZ_CHECK(batch[i] >= 0 && batch[i] < VOCAB, "batch token");
  }
  ot_loader_close(L);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  uint8_t cfgb[25] = {0};
  const size_t k = size < 25 ? size : 25;
  memcpy(cfgb, data, k);
  const uint8_t *file = data + k;
  const size_t n = size - k;
  char path[64];
  int fd = fz_memfile(file, n, path, sizeof path);
  ot_shard *f = NULL;
  ot_status s = ot_shard_open(&f, path, VOCAB);
  if (s == OT_OK) {
    round_trip(f, file, n);
    ot_shard_close(f);
    loader(path, cfgb);
  } else {
    fz_refused(s, "ot_shard_open");
  }
  fz_close(fd);
  fz_mem_back(mem0, "shards");
  return 0;
}
