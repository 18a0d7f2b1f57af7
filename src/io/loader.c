// Deterministic, resumable batch loader over token shards. Window w of a
// shard covers tokens [w*T, w*T + T]; the windows of all shards form one
// global list of W entries. Epoch e visits them in order, or in a seeded
// permutation (a 4-round Feistel network on the next power of 4 >= W with
// cycle walking: O(1) memory, random access, a new permutation per epoch).
// The position (epoch, index) is all the state there is.
#include "data_impl.h"
#include <glob.h>

struct ot_loader {
  int nshards;
  ot_shard **sh;
  int64_t *first;        // [nshards + 1]: global index of each shard's first window
  int64_t W, tokens;
  int B, T, rank, world;
  bool shuffle;
  uint64_t seed, fp;
  uint64_t epoch, index;
  int half_bits;         // Feistel halves of half_bits bits each
  int32_t *buf;          // [B, T+1]
};

// --------------------------------------------------------- permutation -----
static uint64_t feistel(uint64_t x, int hb, uint64_t seed, uint64_t epoch) {
  uint64_t mask = ((uint64_t)1 << hb) - 1, l = x >> hb, r = x & mask;
  for (uint64_t i = 0; i < 4; i++) {
    uint64_t k = ot__mix64(seed ^ ot__mix64(epoch + 0x632be59bd9b4e019ull * (i + 1)));
    uint64_t f = ot__mix64(r ^ k) & mask;
    uint64_t nl = r;
    r = l ^ f;
    l = nl;
  }
  return (l << hb) | r;
}

static int64_t window_at(const ot_loader *L, uint64_t epoch, uint64_t k) {
  if (!L->shuffle) return (int64_t)k;
  uint64_t x = k;
  do x = feistel(x, L->half_bits, L->seed, epoch); while (x >= (uint64_t)L->W);
  return (int64_t)x;
}

// Copies global window w into dst[0, T+1).
static void copy_window(const ot_loader *L, int64_t w, int32_t *dst) {
  int lo = 0, hi = L->nshards - 1;  // last shard with first <= w
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (L->first[mid] <= w) lo = mid; else hi = mid - 1;
  }
  ot_shard_read(L->sh[lo], (w - L->first[lo]) * L->T, L->T + 1, dst);
}

// ---------------------------------------------------------------- open -----
void ot_loader_close(ot_loader *L) {
  if (!L) return;
  for (int i = 0; i < L->nshards; i++) ot_shard_close(L->sh[i]);
  ot_mem_free(L->sh);
  ot_mem_free(L->first);
  ot_mem_free(L->buf);
  ot_mem_free(L);
}

static ot_status check_config(const ot_loader_config *c) {
  const char *fn = "ot_loader_open";
  if (!c) return ot_error(OT_EINVAL, "%s: config is NULL", fn);
  if (!c->pattern == !(c->paths && c->npaths > 0))
    return ot_error(OT_EINVAL, "%s: give either a pattern or paths/npaths (got %s)", fn,
                    c->pattern ? "both" : "neither");
  if (c->vocab_size <= 0) return ot_error(OT_EINVAL, "%s: vocab_size=%lld must be > 0", fn, (long long)c->vocab_size);
  if (c->B <= 0) return ot_error(OT_EINVAL, "%s: B=%d must be > 0", fn, c->B);
  if (c->T <= 0) return ot_error(OT_EINVAL, "%s: T=%d must be > 0", fn, c->T);
  int world = c->world ? c->world : 1;
  if (world < 0 || c->rank < 0 || c->rank >= world)
    return ot_error(OT_EINVAL, "%s: rank=%d must be in [0, world=%d)", fn, c->rank, world);
  return OT_OK;
}

ot_status ot_loader_open(ot_loader **out, const ot_loader_config *cfg) {
  if (!out) return ot_error(OT_EINVAL, "ot_loader_open: out is NULL");
  *out = NULL;
  OT_TRY(check_config(cfg));
  glob_t g;
  memset(&g, 0, sizeof g);
  int n = cfg->npaths;
  const char *const *paths = cfg->paths;
  if (cfg->pattern) {
    int r = glob(cfg->pattern, 0, NULL, &g);
    if (r != 0 || g.gl_pathc == 0) {
      globfree(&g);
      return ot_error(OT_EINVAL, "ot_loader_open: pattern '%s' matches no file", cfg->pattern);
    }
    n = (int)g.gl_pathc;
    paths = (const char *const *)g.gl_pathv;
  }
  ot_status s = OT_ENOMEM;
  ot_loader *L = ot_mem_alloc(sizeof *L, OT_MEM_OTHER);
  if (L) {
    memset(L, 0, sizeof *L);
    L->sh = ot_mem_alloc((size_t)n * sizeof *L->sh, OT_MEM_OTHER);
    L->first = ot_mem_alloc((size_t)(n + 1) * sizeof *L->first, OT_MEM_OTHER);
    L->buf = ot_mem_alloc((size_t)cfg->B * ((size_t)cfg->T + 1) * sizeof(int32_t), OT_MEM_OTHER);
  }
  if (!L || !L->sh || !L->first || !L->buf) {
    ot_loader_close(L);
    globfree(&g);
    return ot_error(OT_ENOMEM, "ot_loader_open: out of memory (B=%d, T=%d, %d shards)", cfg->B, cfg->T, n);
  }
  L->B = cfg->B; L->T = cfg->T;
  L->rank = cfg->rank; L->world = cfg->world ? cfg->world : 1;
  L->shuffle = cfg->shuffle; L->seed = cfg->seed;
  uint64_t fp = ot__mix64(0x6c6f61646572ull ^ (uint64_t)cfg->T);
  fp = ot__mix64(fp ^ (cfg->shuffle ? ot__mix64(cfg->seed + 1) : 0));
  s = OT_OK;
  for (int i = 0; i < n && s == OT_OK; i++) {
    s = ot_shard_open(&L->sh[i], paths[i], cfg->vocab_size);
    if (s != OT_OK) break;
    L->nshards++;
    int64_t nt = ot_shard_ntokens(L->sh[i]);
    L->first[i] = L->W;
    L->W += (nt - 1) / cfg->T;
    L->tokens += nt;
    fp = ot__mix64(fp ^ (uint64_t)nt);
  }
  if (s == OT_OK) {
    L->first[n] = L->W;
    if (L->W == 0)
      s = ot_error(OT_EINVAL, "ot_loader_open: the %d shard(s) hold no window of T+1=%d tokens "
                   "(largest shard too small; lower T)", n, cfg->T + 1);
  }
  globfree(&g);
  if (s != OT_OK) { ot_loader_close(L); return s; }
  L->fp = fp;
  while (((uint64_t)1 << (2 * L->half_bits)) < (uint64_t)L->W) L->half_bits++;
  if (L->half_bits == 0) L->half_bits = 1;
  *out = L;
  return OT_OK;
}

// ---------------------------------------------------------------- next -----
ot_status ot_loader_next(ot_loader *L, const int32_t **batch) {
  if (!L || !batch) return ot_error(OT_EINVAL, "ot_loader_next: loader or batch is NULL");
  uint64_t W = (uint64_t)L->W;
  uint64_t base = L->index + (uint64_t)L->rank * (uint64_t)L->B;
  for (int i = 0; i < L->B; i++) {
    uint64_t g = base + (uint64_t)i;
    copy_window(L, window_at(L, L->epoch + g / W, g % W), L->buf + (size_t)i * (L->T + 1));
  }
  uint64_t adv = L->index + (uint64_t)L->world * (uint64_t)L->B;
  L->epoch += adv / W;
  L->index = adv % W;
  *batch = L->buf;
  return OT_OK;
}

void ot_loader_get_state(const ot_loader *L, ot_loader_state *st) {
  st->epoch = L->epoch;
  st->index = L->index;
  st->fingerprint = L->fp;
}

ot_status ot_loader_set_state(ot_loader *L, const ot_loader_state *st) {
  if (!L || !st) return ot_error(OT_EINVAL, "ot_loader_set_state: loader or state is NULL");
  if (st->fingerprint != L->fp)
    return ot_error(OT_EINVAL, "ot_loader_set_state: fingerprint %016llx does not match this loader's "
                    "%016llx (other shards, T, shuffle or seed)",
                    (unsigned long long)st->fingerprint, (unsigned long long)L->fp);
  if (st->index >= (uint64_t)L->W)
    return ot_error(OT_EINVAL, "ot_loader_set_state: index %llu out of range (%lld windows per epoch)",
                    (unsigned long long)st->index, (long long)L->W);
  L->epoch = st->epoch;
  L->index = st->index;
  return OT_OK;
}

void ot_loader_reset(ot_loader *L) { L->epoch = 0; L->index = 0; }
int64_t ot_loader_windows(const ot_loader *L) { return L->W; }
int64_t ot_loader_tokens(const ot_loader *L) { return L->tokens; }
int ot_loader_nshards(const ot_loader *L) { return L->nshards; }

// Splits rows [B, T+1] into x = row[0:T], y = row[1:T+1]; returns the targets != -1.
int64_t ot__split_rows(int32_t *x, int32_t *y, const int32_t *rows, int B, int T) {
  int64_t count = 0;
  for (int b = 0; b < B; b++) {
    const int32_t *r = rows + (size_t)b * (T + 1);
    memcpy(x + (size_t)b * T, r, (size_t)T * sizeof(int32_t));
    memcpy(y + (size_t)b * T, r + 1, (size_t)T * sizeof(int32_t));
    for (int j = 1; j <= T; j++) count += r[j] != -1;
  }
  return count;
}
