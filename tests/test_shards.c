// Token shards and the batch loader: write/read round trips (uint16 and
// uint32), every malformed-shard case with its message, writer errors, and
// the loader's windows, shuffling, multi-shard layout, rank partition,
// determinism, save/restore of its position, and no allocation per batch.
#include "harness.h"
#include <unistd.h>
#include <sys/stat.h>

static char g_dir[128];

static const char *path_of(const char *name) {
  static char p[8][256];
  static int k;
  k = (k + 1) % 8;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}

// Writes a raw file: the 256-int32 header (h0, h1, h2) then `nbytes` of payload.
static void write_raw(const char *path, int32_t h0, int32_t h1, int32_t h2, const void *payload, size_t nbytes) {
  FILE *f = fopen(path, "wb");
  int32_t h[256] = {h0, h1, h2};
  fwrite(h, 4, 256, f);
  if (nbytes) fwrite(payload, 1, nbytes, f);
  fclose(f);
}

static void check_fmt(const char *path, int64_t vocab, const char *needle, const char *what) {
  ot_shard *s = NULL;
  ot_status st = ot_shard_open(&s, path, vocab);
  th_check_error(st, OT_EFORMAT, needle, what);
  th_check(strstr(ot_last_error(), path) != NULL, "%s: message names the file (%s)", what, ot_last_error());
  th_check(s == NULL, "%s: no shard returned", what);
  ot_shard_close(s);
}

static void test_roundtrip(void) {
  enum { N = 1000 };
  int32_t ids[N], back[N];
  for (int v = 1; v <= 2; v++) {
    for (int i = 0; i < N; i++) ids[i] = v == 1 ? (i * 7919) % 65536 : (i * 104729) % 200000;
    const char *p = path_of(v == 1 ? "rt16.bin" : "rt32.bin");
    ot_status ws = ot_shard_write(p, ids, N, v);
    th_check(ws == OT_OK, "v%d: write (%s)", v, ot_last_error());
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    th_check(access(tmp, F_OK) != 0, "v%d: no .tmp left behind", v);
    struct stat st;
    th_check(stat(p, &st) == 0 && st.st_size == 1024 + N * (v == 1 ? 2 : 4), "v%d: file size", v);
    ot_shard *s = NULL;
    ot_status os = ot_shard_open(&s, p, v == 1 ? 65536 : 200000);
    if (!th_check(os == OT_OK, "v%d: open (%s)", v, ot_last_error())) continue;
    th_check(ot_shard_version(s) == v && ot_shard_ntokens(s) == N, "v%d: version and count", v);
    ot_shard_read(s, 0, N, back);
    th_check(memcmp(ids, back, sizeof ids) == 0, "v%d: tokens read back", v);
    ot_shard_read(s, 123, 5, back);
    th_check(memcmp(ids + 123, back, 5 * sizeof *back) == 0, "v%d: partial read", v);
    th_check(strcmp(ot_shard_path(s), p) == 0, "v%d: path kept", v);
    ot_shard_close(s);
    // the largest id is accepted at vocab = max + 1 and rejected below
    int32_t mx = 0;
    for (int i = 0; i < N; i++) if (ids[i] > mx) mx = ids[i];
    th_check(ot_shard_open(&s, p, mx + 1) == OT_OK, "v%d: vocab = max id + 1 accepted", v);
    ot_shard_close(s);
    s = NULL;
    check_fmt(p, mx, "vocab size", "id >= vocab");
    unlink(p);
  }
  // uint16 shard header is llm.c's: magic, version 1, count
  int32_t one = 42;
  const char *p = path_of("hdr.bin");
  ot_shard_write(p, &one, 1, 1);
  FILE *f = fopen(p, "rb");
  int32_t h[256];
  uint16_t tok = 0;
  th_check(f && fread(h, 4, 256, f) == 256 && fread(&tok, 2, 1, f) == 1, "header readable");
  if (f) fclose(f);
  bool zeros = true;
  for (int i = 3; i < 256; i++) zeros &= h[i] == 0;
  th_check(h[0] == 20240520 && h[1] == 1 && h[2] == 1 && zeros && tok == 42, "llm.c header layout");
  unlink(p);
}

static void test_malformed(void) {
  uint16_t t16[16];
  uint32_t t32[16];
  for (int i = 0; i < 16; i++) { t16[i] = (uint16_t)i; t32[i] = (uint32_t)i; }
  const char *p = path_of("bad.bin");
  FILE *f = fopen(p, "wb");
  fclose(f);
  check_fmt(p, 100, "empty file (0 bytes)", "empty file");
  f = fopen(p, "wb");
  fwrite(t16, 2, 16, f);
  fclose(f);
  check_fmt(p, 100, "truncated: 32 bytes, shorter than the 1024-byte header", "shorter than the header");
  write_raw(p, 20240521, 1, 16, t16, 32);
  check_fmt(p, 100, "bad magic 20240521", "bad magic");
  write_raw(p, 20240520, 3, 16, t16, 32);
  check_fmt(p, 100, "unsupported version 3", "bad version");
  write_raw(p, 20240520, 0, 16, t16, 32);
  check_fmt(p, 100, "unsupported version 0", "version 0");
  write_raw(p, 20240520, 1, -5, t16, 32);
  check_fmt(p, 100, "negative token count -5", "negative count");
  write_raw(p, 20240520, 1, 0, NULL, 0);
  check_fmt(p, 100, "empty shard: header[2] says 0 tokens", "zero tokens");
  write_raw(p, 20240520, 1, 16, t16, 30);
  check_fmt(p, 100, "1056 bytes with the header, but the file has 1054 bytes (truncated)", "truncated payload");
  write_raw(p, 20240520, 1, 15, t16, 32);
  check_fmt(p, 100, "count mismatch: header[2] says 15 uint16 tokens", "count mismatch (uint16)");
  check_fmt(p, 100, "(trailing bytes)", "trailing bytes");
  write_raw(p, 20240520, 2, 16, t32, 62);
  check_fmt(p, 100, "says 16 uint32 tokens = 1088 bytes", "uint32 truncated");
  write_raw(p, 20240520, 1, 16, t16, 32);
  check_fmt(p, 10, "token id 10 at index 10 is >= the vocab size 10", "uint16 id >= vocab");
  write_raw(p, 20240520, 2, 16, t32, 64);
  check_fmt(p, 7, "token id 7 at index 7 is >= the vocab size 7", "uint32 id >= vocab");
  t32[3] = 0x80000000u;
  write_raw(p, 20240520, 2, 16, t32, 64);
  check_fmt(p, 100, "token id 2147483648 at index 3", "uint32 id above INT32_MAX");
  ot_shard *s = NULL;
  write_raw(p, 20240520, 1, 16, t16, 32);
  ot_status os = ot_shard_open(&s, p, 16);
  th_check(os == OT_OK, "valid hand-made shard opens (%s)", ot_last_error());
  ot_shard_close(s);
  s = NULL;
  th_check_error(ot_shard_open(&s, p, 0), OT_EINVAL, "vocab_size=0", "vocab 0");
  th_check_error(ot_shard_open(&s, path_of("missing.bin"), 10), OT_EIO, "cannot open", "missing file");
  th_check_error(ot_shard_open(&s, g_dir, 10), OT_EIO, "not a regular file", "a directory");
  unlink(p);
}

static void test_writer_errors(void) {
  int32_t ids[4] = {1, 2, 70000, 3};
  const char *p = path_of("w.bin");
  th_check_error(ot_shard_write(p, ids, 0, 1), OT_EINVAL, "n=0", "write 0 tokens");
  th_check_error(ot_shard_write(p, ids, 4, 3), OT_EINVAL, "version=3", "write version 3");
  th_check_error(ot_shard_write(p, ids, 4, 1), OT_EINVAL, "ids[2]=70000 out of range [0, 65535]", "uint16 overflow");
  th_check(strstr(ot_last_error(), "use version 2") != NULL, "hint names version 2");
  ot_status ws = ot_shard_write(p, ids, 4, 2);
  th_check(ws == OT_OK, "the same ids as uint32 (%s)", ot_last_error());
  ids[1] = -1;
  th_check_error(ot_shard_write(p, ids, 4, 2), OT_EINVAL, "ids[1]=-1", "negative id");
  th_check_error(ot_shard_write("/nonexistent_dir_ot/x.bin", ids, 1, 1), OT_EIO, "cannot create", "unwritable path");
  th_check_error(ot_shard_write(p, NULL, 4, 1), OT_EINVAL, "ids is NULL", "NULL ids");
  unlink(p);
}

// ------------------------------------------------------------------ loader --
static ot_loader *open_loader(const char *const *paths, int n, int B, int T, bool shuffle, uint64_t seed,
                              int rank, int world) {
  ot_loader_config c = {0};
  c.paths = paths; c.npaths = n;
  c.vocab_size = 1 << 20;
  c.B = B; c.T = T; c.shuffle = shuffle; c.seed = seed; c.rank = rank; c.world = world;
  ot_loader *L = NULL;
  if (ot_loader_open(&L, &c) != OT_OK) th_check(false, "loader open: %s", ot_last_error());
  return L;
}

// Writes shard `name` with tokens base, base+1, ... (n of them); returns its path.
static const char *make_shard(const char *name, int32_t base, int n, int version) {
  int32_t *ids = th_alloc((size_t)n * sizeof *ids);
  for (int i = 0; i < n; i++) ids[i] = base + i;
  const char *p = path_of(name);
  if (ot_shard_write(p, ids, n, version) != OT_OK) th_check(false, "make_shard %s: %s", name, ot_last_error());
  free(ids);
  return p;
}

static void test_loader_sequential(void) {
  const int T = 8, B = 3;
  char p0[256], p1[256], p2[256];
  snprintf(p0, sizeof p0, "%s", make_shard("s0.bin", 0, 50, 1));        // (50-1)/8 = 6 windows
  snprintf(p1, sizeof p1, "%s", make_shard("s1.bin", 10000, 9, 2));     // 1 window
  snprintf(p2, sizeof p2, "%s", make_shard("s2.bin", 20000, 5, 1));     // too short: 0 windows
  const char *paths[3] = {p0, p1, p2};
  ot_loader *L = open_loader(paths, 3, B, T, false, 0, 0, 1);
  if (!L) return;
  th_check(ot_loader_windows(L) == 7 && ot_loader_tokens(L) == 64 && ot_loader_nshards(L) == 3,
           "3 shards: 7 windows, 64 tokens (got %lld, %lld)", (long long)ot_loader_windows(L),
           (long long)ot_loader_tokens(L));
  // windows in order: 0..5 from shard 0, 6 from shard 1, then epoch 1 starts again at 0
  int64_t expect_start[7] = {0, 8, 16, 24, 32, 40, 10000};
  bool ok = true;
  for (int b = 0; b < 5; b++) {
    const int32_t *x = NULL;
    ot_loader_next(L, &x);
    for (int r = 0; r < B; r++) {
      int w = (b * B + r) % 7;
      for (int j = 0; j <= T; j++) ok &= x[r * (T + 1) + j] == expect_start[w] + j;
    }
  }
  th_check(ok, "sequential windows: stride T, T+1 tokens, never across shards, wrap to the next epoch");
  ot_loader_state st;
  ot_loader_get_state(L, &st);
  th_check(st.epoch == 2 && st.index == 1, "after 15 windows of 7: epoch 2, index 1 (got %llu, %llu)",
           (unsigned long long)st.epoch, (unsigned long long)st.index);
  ot_loader_reset(L);
  const int32_t *x = NULL;
  ot_loader_next(L, &x);
  th_check(x[0] == 0 && x[T + 1] == 8, "reset goes back to window 0");
  ot_loader_close(L);
  // a too-small data set
  L = NULL;
  ot_loader_config c = {0};
  c.paths = paths + 2; c.npaths = 1; c.vocab_size = 1 << 20; c.B = 1; c.T = 8;
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "hold no window of T+1=9 tokens", "no full window");
  c.paths = paths; c.npaths = 3; c.vocab_size = 100;
  th_check_error(ot_loader_open(&L, &c), OT_EFORMAT, "s1.bin: token id 10000", "shard with ids >= vocab");
  c.vocab_size = 1 << 20; c.B = 0;
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "B=0", "B = 0");
  c.B = 1; c.T = -1;
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "T=-1", "T < 0");
  c.T = 4; c.rank = 2; c.world = 2;
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "rank=2", "rank >= world");
  c.rank = 0; c.world = 0; c.pattern = "x";
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "either a pattern or paths", "both pattern and paths");
  c.paths = NULL; c.npaths = 0; c.pattern = path_of("nothing_*.bin");
  th_check_error(ot_loader_open(&L, &c), OT_EINVAL, "matches no file", "empty glob");
  th_check(L == NULL, "failed opens return no loader");
  unlink(p0); unlink(p1); unlink(p2);
}

// Reads `nb` batches into out[nb * B * (T+1)].
static void read_batches(ot_loader *L, int nb, int B, int T, int32_t *out) {
  for (int b = 0; b < nb; b++) {
    const int32_t *x = NULL;
    ot_loader_next(L, &x);
    memcpy(out + (size_t)b * B * (T + 1), x, (size_t)B * (T + 1) * sizeof *x);
  }
}

static void test_loader_shuffle_resume(void) {
  const int T = 4, N = 4 * 1000 + 1;   // 1000 windows in shard a, 250 in shard b
  char pa[256], pb[256];
  snprintf(pa, sizeof pa, "%s", make_shard("train_000.bin", 0, N, 1));
  snprintf(pb, sizeof pb, "%s", make_shard("train_001.bin", 100000, 1001, 2));
  const char *paths[2] = {pa, pb};
  const int W = 1250;
  // one epoch with B=1 visits every window exactly once; the next epoch in another order
  ot_loader *L = open_loader(paths, 2, 1, T, true, 7, 0, 1);
  if (!L) return;
  int32_t *e0 = th_alloc(sizeof(int32_t) * W * (T + 1)), *e1 = th_alloc(sizeof(int32_t) * W * (T + 1));
  read_batches(L, W, 1, T, e0);
  read_batches(L, W, 1, T, e1);
  char *seen = calloc(W, 1);
  bool perm = true, inorder = true;
  int same = 0;
  for (int i = 0; i < W; i++) {
    int32_t s0 = e0[i * (T + 1)];
    int w = s0 >= 100000 ? 1000 + (s0 - 100000) / T : s0 / T;
    perm &= w >= 0 && w < W && !seen[w] && (s0 >= 100000 || s0 % T == 0);
    if (w >= 0 && w < W) seen[w] = 1;
    inorder &= w == i;
    same += e0[i * (T + 1)] == e1[i * (T + 1)];
    for (int j = 1; j <= T; j++) perm &= e0[i * (T + 1) + j] == s0 + j;
  }
  th_check(perm, "shuffled epoch is a permutation of the %d windows", W);
  th_check(!inorder, "shuffled epoch is not the file order");
  th_check(same < W / 10, "epoch 1 has another order (%d of %d positions equal)", same, W);
  free(seen);
  ot_loader_close(L);

  // same seed -> same stream; another seed -> another
  int32_t *a = th_alloc(sizeof(int32_t) * 50 * 8 * (T + 1)), *b = th_alloc(sizeof(int32_t) * 50 * 8 * (T + 1));
  L = open_loader(paths, 2, 8, T, true, 7, 0, 1);
  read_batches(L, 50, 8, T, a);
  ot_loader_close(L);
  L = open_loader(paths, 2, 8, T, true, 7, 0, 1);
  read_batches(L, 50, 8, T, b);
  th_check(memcmp(a, b, sizeof(int32_t) * 50 * 8 * (T + 1)) == 0, "same seed: identical batches");
  ot_loader_close(L);
  L = open_loader(paths, 2, 8, T, true, 8, 0, 1);
  read_batches(L, 50, 8, T, b);
  th_check(memcmp(a, b, sizeof(int32_t) * 50 * 8 * (T + 1)) != 0, "another seed: other batches");
  ot_loader_close(L);

  // resume: state after 37 batches, then 100 more (crossing epochs) equal the uninterrupted run
  int32_t *full = th_alloc(sizeof(int32_t) * 137 * 8 * (T + 1));
  L = open_loader(paths, 2, 8, T, true, 7, 0, 1);
  read_batches(L, 137, 8, T, full);
  ot_loader_close(L);
  L = open_loader(paths, 2, 8, T, true, 7, 0, 1);
  read_batches(L, 37, 8, T, a);
  ot_loader_state st;
  ot_loader_get_state(L, &st);
  ot_loader_close(L);
  int32_t *rest = th_alloc(sizeof(int32_t) * 100 * 8 * (T + 1));
  L = open_loader(paths, 2, 8, T, true, 7, 0, 1);
  ot_status rs = ot_loader_set_state(L, &st);
  th_check(rs == OT_OK, "restore state (%s)", ot_last_error());
  read_batches(L, 100, 8, T, rest);
  th_check(memcmp(rest, full + (size_t)37 * 8 * (T + 1), sizeof(int32_t) * 100 * 8 * (T + 1)) == 0,
           "resumed run equals the uninterrupted one (epoch %llu index %llu at the save)",
           (unsigned long long)st.epoch, (unsigned long long)st.index);
  ot_loader_state bad = st;
  bad.index = W;
  th_check_error(ot_loader_set_state(L, &bad), OT_EINVAL, "index 1250 out of range", "restore index >= windows");
  ot_loader_close(L);
  L = open_loader(paths, 2, 8, T, true, 9, 0, 1);
  th_check_error(ot_loader_set_state(L, &st), OT_EINVAL, "fingerprint", "restore into another seed");
  ot_loader_close(L);
  L = open_loader(paths, 2, 8, 5, true, 7, 0, 1);
  th_check_error(ot_loader_set_state(L, &st), OT_EINVAL, "fingerprint", "restore into another T");
  ot_loader_close(L);

  // ranks: world 2 with B=3 splits the world=1, B=6 batches in halves
  int32_t *w1 = th_alloc(sizeof(int32_t) * 40 * 6 * (T + 1));
  int32_t *r0 = th_alloc(sizeof(int32_t) * 40 * 3 * (T + 1)), *r1 = th_alloc(sizeof(int32_t) * 40 * 3 * (T + 1));
  L = open_loader(paths, 2, 6, T, true, 3, 0, 1); read_batches(L, 40, 6, T, w1); ot_loader_close(L);
  L = open_loader(paths, 2, 3, T, true, 3, 0, 2); read_batches(L, 40, 3, T, r0); ot_loader_close(L);
  L = open_loader(paths, 2, 3, T, true, 3, 1, 2); read_batches(L, 40, 3, T, r1); ot_loader_close(L);
  bool split = true;
  size_t half = (size_t)3 * (T + 1);
  for (int k = 0; k < 40; k++) {
    split &= memcmp(w1 + (size_t)k * 2 * half, r0 + k * half, half * sizeof(int32_t)) == 0;
    split &= memcmp(w1 + (size_t)k * 2 * half + half, r1 + k * half, half * sizeof(int32_t)) == 0;
  }
  th_check(split, "rank 0/1 of world 2 read the two halves of each global batch");

  // a glob pattern finds the shards sorted by name; no allocation per batch
  ot_loader_config c = {0};
  char pat[300];
  snprintf(pat, sizeof pat, "%s/train_*.bin", g_dir);
  c.pattern = pat; c.vocab_size = 200000; c.B = 4; c.T = T; c.shuffle = true; c.seed = 1;
  L = NULL;
  ot_status ps = ot_loader_open(&L, &c);
  th_check(ps == OT_OK && ot_loader_nshards(L) == 2 && ot_loader_windows(L) == W,
           "pattern opens 2 shards, %d windows (%s)", W, ot_last_error());
  if (L) {
    size_t cur = ot_mem_current(OT_MEM_OTHER);
    ot_mem_reset_peak();
    const int32_t *x = NULL;
    for (int k = 0; k < 1000; k++) ot_loader_next(L, &x);
    th_check(ot_mem_current(OT_MEM_OTHER) == cur && ot_mem_peak(OT_MEM_OTHER) == cur,
             "1000 batches allocate nothing (current %zu -> %zu, peak %zu)", cur,
             ot_mem_current(OT_MEM_OTHER), ot_mem_peak(OT_MEM_OTHER));
    ot_loader_close(L);
  }
  free(e0); free(e1); free(a); free(b); free(full); free(rest); free(w1); free(r0); free(r1);
  unlink(pa); unlink(pb);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ot_test_shards_%d", (int)getpid());
  mkdir(g_dir, 0755);
  test_roundtrip();
  test_malformed();
  test_writer_errors();
  test_loader_sequential();
  test_loader_shuffle_resume();
  th_check(ot_mem_current(OT_MEM_OTHER) == 0, "all tracked memory released (%zu bytes left)",
           ot_mem_current(OT_MEM_OTHER));
  rmdir(g_dir);
  return th_finish();
}
