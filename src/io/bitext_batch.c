// Token-budget batches over a bitext. An epoch's plan: pairs sorted by
// length bucket (longest first) with a seeded key inside each bucket (a
// stable merge sort over buffers sized at open), cut greedily under the
// budget, the last batch topped up to `world` rows, and the batch order
// shuffled; each rank's rows of a batch come ordered by length. The plan is
// a function of (pairs, config, epoch) only, so the
// state is (epoch, index) and every rank computes the same plan.
#include "bitext_impl.h"
#include <stdlib.h>

struct ot_bitext_batcher {
  const ot_bitext *bt;
  int64_t P, budget, rows_cap;
  int bucket, rank, world;
  bool shuffle;
  uint64_t seed, fp;
  uint64_t epoch, index;        // the next global batch
  uint64_t plan_epoch;
  bool planned;
  int64_t nb;                   // batches of the planned epoch
  uint64_t *key, *key2;         // [P] sort keys (+ merge buffer)
  int64_t *ord, *ord2;          // [P] pair order (+ merge buffer)
  int64_t *bstart;              // [P + 1] batch k = ord[bstart[k], bstart[k + 1])
  int64_t *bperm;               // [P] batch order
  int32_t *src, *dec_in, *dec_tgt;  // [budget]
  int32_t *src_len, *tgt_len;   // [rows_cap]
  int64_t *pair;                // [rows_cap]
  int64_t *sample;              // [rows_cap] each row's index in its global batch
};

static int pair_len(const ot_bitext *bt, int64_t i) {
  return (bt->sn[i] > bt->tn[i] ? bt->sn[i] : bt->tn[i]) + 1;
}

void ot_bitext_batcher_close(ot_bitext_batcher *b) {
  if (!b) return;
  void *ps[] = {b->key, b->key2, b->ord, b->ord2, b->bstart, b->bperm, b->src, b->dec_in, b->dec_tgt,
                b->src_len, b->tgt_len, b->pair, b->sample};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
  ot_mem_free(b);
}

// Stable bottom-up merge sort of (key, ord) by key.
static void sort_keys(ot_bitext_batcher *b) {
  uint64_t *k = b->key, *k2 = b->key2;
  int64_t *o = b->ord, *o2 = b->ord2, n = b->P;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, t = lo;
      while (i < mid && j < hi) {
        if (k[j] < k[i]) { k2[t] = k[j]; o2[t++] = o[j++]; }
        else { k2[t] = k[i]; o2[t++] = o[i++]; }
      }
      while (i < mid) { k2[t] = k[i]; o2[t++] = o[i++]; }
      while (j < hi) { k2[t] = k[j]; o2[t++] = o[j++]; }
    }
    uint64_t *tk = k; k = k2; k2 = tk;
    int64_t *to = o; o = o2; o2 = to;
  }
  if (k != b->key) {
    memcpy(b->key, k, (size_t)n * sizeof *k);
    memcpy(b->ord, o, (size_t)n * sizeof *o);
  }
}

static int cmp_u64(const void *x, const void *y) {
  const uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return (a > c) - (a < c);
}

static void plan(ot_bitext_batcher *b, uint64_t epoch) {
  if (b->planned && b->plan_epoch == epoch) return;
  const ot_bitext *bt = b->bt;
  const uint64_t mask40 = ((uint64_t)1 << 40) - 1;
  const uint64_t ek = ot__mix64(b->seed ^ ot__mix64(epoch * 0x9e3779b97f4a7c15ull + 0x62617463ull));
  for (int64_t i = 0; i < b->P; i++) {
    uint64_t bucket = (uint64_t)((pair_len(bt, i) - 1) / b->bucket);
    if (bucket > 0xffffff) bucket = 0xffffff;
    uint64_t low = b->shuffle ? ot__mix64(ek ^ (uint64_t)i) & mask40 : (uint64_t)i;
    b->key[i] = ((uint64_t)0xffffff - bucket) << 40 | low;
    b->ord[i] = i;
  }
  sort_keys(b);
  // greedy cut: rows * (longest pair of the batch) <= budget
  int64_t nb = 0, rows = 0, m = 0;
  b->bstart[0] = 0;
  for (int64_t k = 0; k < b->P; k++) {
    int64_t l = pair_len(bt, b->ord[k]), mm = l > m ? l : m;
    if (rows > 0 && (rows + 1) * mm > b->budget) {
      b->bstart[++nb] = k;
      rows = 0;
      mm = l;
    }
    rows++;
    m = mm;
  }
  b->bstart[++nb] = b->P;
  // top the last batch up to `world` rows from the one before (open checked the budget allows it)
  int64_t last = b->bstart[nb] - b->bstart[nb - 1];
  if (last < b->world && nb > 1) b->bstart[nb - 1] -= b->world - last;
  b->nb = nb;
  for (int64_t k = 0; k < nb; k++) b->bperm[k] = k;
  if (b->shuffle) {
    uint64_t r = ot__mix64(ek ^ 0x7368756666ull);
    for (int64_t k = nb - 1; k > 0; k--) {
      r = ot__mix64(r + 0x9e3779b97f4a7c15ull);
      int64_t j = (int64_t)(r % (uint64_t)(k + 1));
      int64_t t = b->bperm[k]; b->bperm[k] = b->bperm[j]; b->bperm[j] = t;
    }
  }
  b->plan_epoch = epoch;
  b->planned = true;
}

ot_status ot_bitext_batcher_open(ot_bitext_batcher **out, const ot_bitext *bt, const ot_bitext_batcher_config *cfg) {
  const char *fn = "ot_bitext_batcher_open";
  if (!out) return ot_error(OT_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  if (!bt || !cfg) return ot_error(OT_EINVAL, "%s: bitext and config are required", fn);
  const int world = cfg->world ? cfg->world : 1, bucket = cfg->bucket ? cfg->bucket : 8;
  if (world < 0 || cfg->rank < 0 || cfg->rank >= world)
    return ot_error(OT_EINVAL, "%s: rank=%d must be in [0, world=%d)", fn, cfg->rank, world);
  if (bucket < 0) return ot_error(OT_EINVAL, "%s: bucket=%d must be >= 0 (0: 8)", fn, cfg->bucket);
  int64_t lmax = 0, lmin = INT32_MAX;
  for (int64_t i = 0; i < bt->P; i++) {
    int64_t l = pair_len(bt, i);
    if (l > lmax) lmax = l;
    if (l < lmin) lmin = l;
  }
  const int64_t need = world == 1 ? lmax : 2 * (int64_t)world * lmax;
  if (cfg->max_tokens < need)
    return ot_error(OT_EINVAL, "%s: max_tokens=%lld is below %lld = %s%lld tokens (the longest pair, with "
                    "eos); raise max_tokens or lower max_len", fn, (long long)cfg->max_tokens, (long long)need,
                    world == 1 ? "" : "2 * world * ", (long long)lmax);
  if (bt->P < world)
    return ot_error(OT_EINVAL, "%s: %lld pairs cannot give each of world=%d ranks a row", fn, (long long)bt->P,
                    world);
  ot_bitext_batcher *b = ot_mem_alloc(sizeof *b, OT_MEM_OTHER);
  if (!b) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  memset(b, 0, sizeof *b);
  b->bt = bt; b->P = bt->P; b->budget = cfg->max_tokens; b->bucket = bucket;
  b->rank = cfg->rank; b->world = world; b->shuffle = cfg->shuffle; b->seed = cfg->seed;
  b->rows_cap = cfg->max_tokens / lmin < b->P ? cfg->max_tokens / lmin : b->P;
  const size_t P = (size_t)b->P, R = (size_t)b->rows_cap, T = (size_t)b->budget;
  b->key = ot_mem_alloc(P * 8, OT_MEM_OTHER); b->key2 = ot_mem_alloc(P * 8, OT_MEM_OTHER);
  b->ord = ot_mem_alloc(P * 8, OT_MEM_OTHER); b->ord2 = ot_mem_alloc(P * 8, OT_MEM_OTHER);
  b->bstart = ot_mem_alloc((P + 1) * 8, OT_MEM_OTHER); b->bperm = ot_mem_alloc(P * 8, OT_MEM_OTHER);
  b->src = ot_mem_alloc(T * 4, OT_MEM_OTHER); b->dec_in = ot_mem_alloc(T * 4, OT_MEM_OTHER);
  b->dec_tgt = ot_mem_alloc(T * 4, OT_MEM_OTHER);
  b->src_len = ot_mem_alloc(R * 4, OT_MEM_OTHER); b->tgt_len = ot_mem_alloc(R * 4, OT_MEM_OTHER);
  b->pair = ot_mem_alloc(R * 8, OT_MEM_OTHER); b->sample = ot_mem_alloc(R * 8, OT_MEM_OTHER);
  if (!b->sample || !b->key || !b->key2 || !b->ord || !b->ord2 || !b->bstart || !b->bperm || !b->src || !b->dec_in ||
      !b->dec_tgt || !b->src_len || !b->tgt_len || !b->pair) {
    ot_bitext_batcher_close(b);
    return ot_error(OT_ENOMEM, "%s: out of memory (max_tokens=%lld, %lld pairs)", fn, (long long)cfg->max_tokens,
                    (long long)bt->P);
  }
  uint64_t fp = ot__mix64(bt->hash ^ 0x626174636865ull);
  fp = ot__mix64(fp ^ (uint64_t)b->P);
  fp = ot__mix64(fp ^ (uint64_t)b->budget);
  fp = ot__mix64(fp ^ (uint64_t)bucket);
  fp = ot__mix64(fp ^ (b->shuffle ? ot__mix64(b->seed + 1) : 0));
  b->fp = fp;
  plan(b, 0);
  *out = b;
  return OT_OK;
}

ot_status ot_bitext_next(ot_bitext_batcher *b, ot_bitext_batch *out) {
  if (!b || !out) return ot_error(OT_EINVAL, "ot_bitext_next: batcher or batch is NULL");
  const ot_bitext *bt = b->bt;
  plan(b, b->epoch);
  const int64_t k = b->bperm[b->index], g0 = b->bstart[k], R = b->bstart[k + 1] - g0;
  const int64_t lo = g0 + b->rank * R / b->world, hi = g0 + (b->rank + 1) * R / b->world;
  const int32_t eos = bt->eos;
  int S = 0, T = 0;
  int64_t gt = 0, gs = 0, nt = 0;
  for (int64_t r = g0; r < g0 + R; r++) {
    int64_t i = b->ord[r];
    gt += bt->tn[i] + 1;
    gs += bt->sn[i] + 1;
    if (r < lo || r >= hi) continue;
    if (bt->sn[i] + 1 > S) S = bt->sn[i] + 1;
    if (bt->tn[i] + 1 > T) T = bt->tn[i] + 1;
  }
  const int B = (int)(hi - lo);
  // rows by (length, source length, plan position): a trainer cutting the rows into
  // micro-batches pads each to its own longest pair (key2: the merge buffer, free after plan)
  uint64_t *rk = b->key2;
  const bool sorted = B < (1 << 24);
  for (int row = 0; sorted && row < B; row++) {
    const int64_t i = b->ord[lo + row];
    const uint64_t l = (uint64_t)pair_len(bt, i), s = (uint64_t)bt->sn[i] + 1, cap = (1u << 20) - 1;
    rk[row] = (l < cap ? l : cap) << 44 | (s < cap ? s : cap) << 24 | (uint64_t)row;
  }
  if (sorted) qsort(rk, (size_t)B, sizeof *rk, cmp_u64);
  for (int row = 0; row < B; row++) {
    const int64_t i = b->ord[lo + (sorted ? (int64_t)(rk[row] & 0xffffff) : row)];
    const int ns = bt->sn[i], ntg = bt->tn[i];
    const int32_t *s = bt->ids + bt->so[i], *t = bt->ids + bt->to[i];
    int32_t *ps = b->src + (size_t)row * S, *pi = b->dec_in + (size_t)row * T, *pt = b->dec_tgt + (size_t)row * T;
    memcpy(ps, s, (size_t)ns * sizeof *s);
    for (int j = ns; j < S; j++) ps[j] = eos;
    pi[0] = eos;
    memcpy(pi + 1, t, (size_t)ntg * sizeof *t);
    for (int j = ntg + 1; j < T; j++) pi[j] = eos;
    memcpy(pt, t, (size_t)ntg * sizeof *t);
    pt[ntg] = eos;
    for (int j = ntg + 1; j < T; j++) pt[j] = -1;
    b->src_len[row] = ns + 1;
    b->tgt_len[row] = ntg + 1;
    b->pair[row] = i;
    b->sample[row] = lo - g0 + (sorted ? (int64_t)(rk[row] & 0xffffff) : row);
    nt += ntg + 1;
  }
  *out = (ot_bitext_batch){B, S, T, b->src, b->src_len, b->dec_in, b->dec_tgt, b->tgt_len, b->pair, nt, R, gt,
                           b->epoch, b->index, gs, b->sample};
  if (++b->index == (uint64_t)b->nb) { b->epoch++; b->index = 0; }
  return OT_OK;
}

int64_t ot_bitext_batches(ot_bitext_batcher *b, uint64_t epoch) {
  plan(b, epoch);
  return b->nb;
}

void ot_bitext_get_state(const ot_bitext_batcher *b, ot_loader_state *st) {
  st->epoch = b->epoch;
  st->index = b->index;
  st->fingerprint = b->fp;
}

ot_status ot_bitext_set_state(ot_bitext_batcher *b, const ot_loader_state *st) {
  if (!b || !st) return ot_error(OT_EINVAL, "ot_bitext_set_state: batcher or state is NULL");
  if (st->fingerprint != b->fp)
    return ot_error(OT_EINVAL, "ot_bitext_set_state: fingerprint %016llx does not match this batcher's %016llx "
                    "(other pairs, max_tokens, bucket, shuffle or seed)",
                    (unsigned long long)st->fingerprint, (unsigned long long)b->fp);
  plan(b, st->epoch);
  if (st->index >= (uint64_t)b->nb)
    return ot_error(OT_EINVAL, "ot_bitext_set_state: index %llu out of range (epoch %llu has %lld batches)",
                    (unsigned long long)st->index, (unsigned long long)st->epoch, (long long)b->nb);
  b->epoch = st->epoch;
  b->index = st->index;
  return OT_OK;
}
