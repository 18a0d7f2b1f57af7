// Token sampler: temperature, top-k, top-p (nucleus) and a seeded RNG
// (splitmix64-seeded xoshiro256**). Every choice is a pure function of the
// logits and the RNG state: candidates are ordered by (probability desc, id
// asc), a total order, so sorting is deterministic whatever qsort does.
#include "internal.h"
#include "ot/infer.h"
#include <math.h>
#include <stdlib.h>

struct ot_sampler {
  ot_sampler_config cfg;
  int V;
  uint64_t s[4];     // xoshiro256** state
  int32_t *idx;      // [V] candidate ids
  float *val;        // [V] scaled logits by id
  double *cum;       // [V] cumulative weights of the ordered candidates
};

ot_sampler_config ot_sampler_config_default(void) {
  ot_sampler_config c = {0.8f, 40, 0.95f, 1337};
  return c;
}

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t next_u64(ot_sampler *s) {
  const uint64_t r = rotl(s->s[1] * 5, 7) * 9, t = s->s[1] << 17;
  s->s[2] ^= s->s[0]; s->s[3] ^= s->s[1]; s->s[1] ^= s->s[2]; s->s[0] ^= s->s[3];
  s->s[2] ^= t; s->s[3] = rotl(s->s[3], 45);
  return r;
}
static double uniform01(ot_sampler *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }   // [0, 1)

void ot_sampler_reseed(ot_sampler *s, uint64_t seed) {
  if (!s) return;
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) s->s[i] = splitmix(&x);
  s->cfg.seed = seed;
}

ot_status ot_sampler_create(ot_sampler **out, const ot_sampler_config *cfg, int V) {
  static const char fn[] = "ot_sampler_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_POS(V, fn);
  if (!(cfg->temperature >= 0.0f) || !isfinite(cfg->temperature))
    return ot_error(OT_EINVAL, "%s: temperature=%g must be >= 0 and finite (0 = greedy)", fn,
                    cfg->temperature);
  if (cfg->top_k < 0)
    return ot_error(OT_EINVAL, "%s: top_k=%d must be >= 0 (0 = off)", fn, cfg->top_k);
  if (!(cfg->top_p > 0.0f && cfg->top_p <= 1.0f))
    return ot_error(OT_EINVAL, "%s: top_p=%g must be in (0, 1] (1 = off)", fn, cfg->top_p);
  ot_sampler *s = calloc(1, sizeof *s);
  if (!s) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  s->cfg = *cfg;
  s->V = V;
  s->idx = ot_mem_alloc(sizeof(int32_t) * (size_t)V, OT_MEM_OTHER);
  s->val = ot_mem_alloc(sizeof(float) * (size_t)V, OT_MEM_OTHER);
  s->cum = ot_mem_alloc(sizeof(double) * (size_t)V, OT_MEM_OTHER);
  if (!s->idx || !s->val || !s->cum) {
    ot_sampler_free(s);
    return ot_error(OT_ENOMEM, "%s: no memory for vocabulary %d", fn, V);
  }
  ot_sampler_reseed(s, cfg->seed);
  *out = s;
  return OT_OK;
}

void ot_sampler_free(ot_sampler *s) {
  if (!s) return;
  ot_mem_free(s->idx);
  ot_mem_free(s->val);
  ot_mem_free(s->cum);
  free(s);
}

int ot_sampler_vocab(const ot_sampler *s) { return s ? s->V : 0; }

// ------------------------------------------------------------ ordering ------
// a before b: larger value first, then lower id.
static inline bool before(const float *val, int32_t a, int32_t b) {
  return val[a] > val[b] || (val[a] == val[b] && a < b);
}

// Min-heap (root = the candidate that comes last) over ids in h[0, n).
static void sift_down(int32_t *h, int n, int i, const float *val) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, w = i;
    if (l < n && before(val, h[w], h[l])) w = l;
    if (r < n && before(val, h[w], h[r])) w = r;
    if (w == i) return;
    int32_t t = h[i]; h[i] = h[w]; h[w] = t;
    i = w;
  }
}

// Heap sort of ids[0, n) into order (first = most likely): build a heap with
// the LAST candidate at the root, move the root to the end, repeat.
static void sort_ids(int32_t *ids, int n, const float *val) {
  for (int i = n / 2 - 1; i >= 0; i--) sift_down(ids, n, i, val);
  for (int e = n - 1; e > 0; e--) {
    int32_t t = ids[0]; ids[0] = ids[e]; ids[e] = t;
    sift_down(ids, e, 0, val);
  }
  // the heap yields ascending "lastness" from the end: ids[0] is now the first
}

// ------------------------------------------------------------- sample --------
#define SB 64   // logits per block of the max / top-k scans

// Largest of x[0, n) ignoring NaN (-inf if none), 1 <= n <= SB; eight independent
// lanes so that the compiler can vectorize it.
static float block_max(const float *x, int n) {
  float m[8];
  for (int j = 0; j < 8; j++) m[j] = -INFINITY;
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int j = 1; j < 8; j++) r = m[j] > r ? m[j] : r;
  return r;
}

ot_status ot_sampler_sample(ot_sampler *s, const float *logits, int32_t *token) {
  static const char fn[] = "ot_sampler_sample";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(logits, fn);
  OT_CHECK_PTR(token, fn);
  const int V = s->V;
  const ot_sampler_config *c = &s->cfg;
  // argmax (lowest id on ties; NaN never wins): the largest logit, then its first id
  float mx = -INFINITY;
  for (int i = 0; i < V; i += SB) {
    const float m = block_max(logits + i, V - i < SB ? V - i : SB);
    mx = m > mx ? m : mx;
  }
  if (!(mx > -INFINITY))
    return ot_error(OT_EINVAL, "%s: no finite logit among %d (all -inf or NaN)", fn, V);
  int32_t best = 0;
  while (!(logits[best] == mx)) best++;
  const float inv = c->temperature > 0.0f ? 1.0f / c->temperature : INFINITY;
  if (c->temperature == 0.0f || c->top_k == 1 || !isfinite(inv) || !isfinite(mx)) {
    *token = best;
    return OT_OK;
  }
  // probabilities up to a factor: w_i = exp((l_i - l_max) / T), v_i = (l_i - l_max) / T.
  // The candidates are collected in one pass; with top-k a min-heap keeps the k
  // first so far (its last value thr): ids come in ascending order, so a value
  // equal to thr never enters, and a block of SB logits whose largest gives
  // v <= thr is skipped whole (v is non-decreasing in l). Without top-k every
  // finite logit is a candidate, in id order.
  const int k = c->top_k > 0 ? c->top_k : V;
  int n = 0;
  float thr = -INFINITY;   // v of the heap's root once it holds k
  for (int i0 = 0; i0 < V; i0 += SB) {
    const int i1 = V - i0 < SB ? V : i0 + SB;
    if (n == k && !((block_max(logits + i0, i1 - i0) - mx) * inv > thr)) continue;
    for (int i = i0; i < i1; i++) {
      const float l = logits[i];
      if (!(l > -INFINITY)) continue;   // NaN, -inf: probability 0
      const float v = (l - mx) * inv;
      if (n < k) {
        s->val[i] = v;
        s->idx[n++] = i;
        if (n == k && c->top_k > 0) {
          for (int j = k / 2 - 1; j >= 0; j--) sift_down(s->idx, k, j, s->val);
          thr = s->val[s->idx[0]];
        }
      } else if (v > thr) {
        s->val[i] = v;
        s->idx[0] = i;
        sift_down(s->idx, k, 0, s->val);
        thr = s->val[s->idx[0]];
      }
    }
  }
  bool ordered = c->top_k > 0;
  if (ordered) sort_ids(s->idx, n, s->val);
  double total = 0.0;
  if (c->top_p < 1.0f) {
    if (!ordered) {
      // a token with w_i < (1 - p) / (n - 1) * sum cannot be in the nucleus: the
      // tokens above it already hold more than p. Cheap filter before sorting.
      double sum = 0.0;
      for (int j = 0; j < n; j++) sum += exp((double)s->val[s->idx[j]]);
      const double cut = (1.0 - c->top_p) / (n > 1 ? n - 1 : 1) * sum;
      int m = 0;
      for (int j = 0; j < n; j++)
        if (exp((double)s->val[s->idx[j]]) >= cut) s->idx[m++] = s->idx[j];
      if (m == 0) m = n;   // nothing reaches the cut (tiny p, flat): ids are untouched
      sort_ids(s->idx, m, s->val);
      n = m;
      ordered = true;
      total = sum;   // the nucleus is relative to every candidate's probability
    } else {
      for (int j = 0; j < n; j++) total += exp((double)s->val[s->idx[j]]);
    }
    const double need = (double)c->top_p * total;
    double acc = 0.0;
    int keep = n;
    for (int j = 0; j < n; j++) {
      acc += exp((double)s->val[s->idx[j]]);
      if (acc >= need) { keep = j + 1; break; }
    }
    n = keep;
  }
  if (n == 1) {   // one token left: no draw
    *token = s->idx[0];
    return OT_OK;
  }
  double acc = 0.0;
  for (int j = 0; j < n; j++) {
    acc += exp((double)s->val[s->idx[j]]);
    s->cum[j] = acc;
  }
  const double r = uniform01(s) * acc;
  int32_t pick = s->idx[n - 1];
  for (int j = 0; j < n; j++)
    if (r < s->cum[j]) { pick = s->idx[j]; break; }
  *token = pick;
  return OT_OK;
}
