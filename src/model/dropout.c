// Dropout in the model graph (training forwards only): the mask stream a caller
// sets per step, the per-forward state (ot__dropout, graph.h) and the counter of
// every element of every site. No mask is stored: the backward (and every
// recompute) regenerates a site's mask from its counters, so dropout adds no bytes
// to the memory plan and recompute none | selective | full give the same masks.
//
// Layout independence: an element's counter is a function of what it is in the
// one-process step, never of where it is computed, so data-parallel ranks, micro-
// batches (grad-accum, token budgets cut into forwards of any padding), tensor-
// parallel ranks and pipeline stages draw the masks one process does:
// - the stream key = mix(mix(seed) + counter) is the step's (ot_model_set_dropout_step:
//   the trainers pass the step, the same on every rank and micro-batch; a resume
//   restores the step, so the key);
// - site s of block l of stack k (k = 0 decoder, 1 encoder) starts at
//     base = id << 46,  id = (k * 8192 + layer0 + l) * 8 + s
//   (layers < 8192 per stack, checked by the config; 2^46 counters per site, checked
//   per forward);
// - inside a site, with r the row's index in the step's global batch (the batch's
//   `sample` list, or sample0 + b), t the position, P = max(max_seq, T, S) a fixed
//   position stride:
//     embedding / sublayer outputs [B, T, C]:   base + (r * P + t) * C + c
//       (the residual stream is replicated over the tensor ranks: one mask for all)
//     MLP activation [B, T, F / tp]:            base + (r * P + t) * Fg + f0 + f
//       (f0: the tensor rank's first column of the Fg in all)
//     attention probabilities (b, h, i, j):     base + ((r * Hg + h0 + h) * P + i) * P + j
//       (h0: the tensor rank's first head of Hg; the flash kernels take the strides)
//     drop-path (ViT, per sample):              base(PATH) + r (MLP output: + 2^45).
// Counters are 64-bit Philox inputs (ot_rand_u32); the kernels add strides per row or
// per tile, never divide per element.
#include "model_impl.h"
#include <math.h>

// SplitMix64's finalizer (Steele, Lea, Flood 2014): a bijection of 64-bit words.
static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void ot_model_set_dropout_step(ot_model *m, uint64_t seed, uint64_t counter) {
  if (!m) return;
  m->drop_seed = seed;
  m->drop_counter = counter;
}

uint64_t ot__drop_offset(const ot__dropout *d, int l, int site) {
  const uint64_t id = ((uint64_t)d->stack * 8192 + (uint64_t)(d->layer0 + l)) * 8 + (uint64_t)site;
  return id << OT__DROP_SITE_BITS;
}

// Global batch index of row b.
static uint64_t row_of(const ot__dropout *d, int b) {
  return d->sample ? (uint64_t)d->sample[b] : (uint64_t)(d->sample0 + b);
}

void ot__drop_attn(const ot__dropout *d, ot_attn_shape *s, int l, int site) {
  if (!ot__drop_on(d, d ? d->attn : 0.0f)) return;
  const uint64_t P = (uint64_t)d->P;
  s->dropout_p = d->attn;
  s->dropout_seed = d->key;
  s->dropout_si = P;
  s->dropout_sh = P * P;
  s->dropout_sb = (uint64_t)d->Hg * P * P;
  s->dropout_rows = d->sample;
  s->dropout_offset = ot__drop_offset(d, l, site) + (uint64_t)d->h0 * P * P +
                      (d->sample ? 0 : (uint64_t)d->sample0 * s->dropout_sb);
}

// Drop-path probability of site s of block l (0: none at this site).
static float path_p(const ot__dropout *d, int l, int site) {
  if (!ot__drop_path_on(d) || (site != OT__DROP_ATTN_OUT && site != OT__DROP_MLP_OUT) ||
      d->path_layers < 2)
    return 0.0f;
  return d->path * (float)(d->layer0 + l) / (float)(d->path_layers - 1);
}

// x [B, T, C] (dt) in place: row b is kept iff ot_rand_u32(key, off + r(b)) >= threshold(p)
// (then scaled by 1 / (1 - p)), else zeroed: timm's drop_path, the same rule forward and
// backward.
static void path_apply(const ot__dropout *d, float p, ot_dtype dt, void *x, int l, int site) {
  const uint64_t off = ot__drop_offset(d, l, OT__DROP_PATH) +
                       (site == OT__DROP_MLP_OUT ? (1ull << (OT__DROP_SITE_BITS - 1)) : 0);
  const uint32_t thr = ot_dropout_threshold(p);
  const float sc = ot_dropout_scale(p);
  const size_t S = (size_t)d->T * (size_t)d->C;
  for (int b = 0; b < d->B; b++) {
    const float f = ot_rand_u32(d->key, off + row_of(d, b)) >= thr ? sc : 0.0f;
    const long e0 = (long)b * (long)S, e1 = e0 + (long)S;
#pragma omp parallel for schedule(static) if (S >= 65536)
    for (long e = e0; e < e1; e++) ot__stf(dt, x, (size_t)e, ot__ldf(dt, x, (size_t)e) * f);
  }
}

// The counter map of site s's tensor [B, T, C] (or [B, T, F] at the activation site) and
// its first counter *off.
static ot_status site_map(const ot__dropout *d, size_t n, int l, int site, ot_dropout_map *mp,
                          uint64_t *off) {
  const bool act = site == OT__DROP_ACT;
  const size_t w = (size_t)(act ? d->F : d->C);
  const uint64_t s1 = (uint64_t)(act ? d->Fg : d->C), s0 = (uint64_t)d->P * s1;
  if (n != (size_t)d->B * (size_t)d->T * w)
    return ot_error(OT_EINTERNAL, "dropout site %d of block %d: %zu elements, not B=%d x T=%d x %zu",
                    site, l, n, d->B, d->T, w);
  *mp = (ot_dropout_map){(size_t)d->B, (size_t)d->T, w, d->sample, s0, s1};
  *off = ot__drop_offset(d, l, site) + (act ? (uint64_t)d->f0 : 0) +
         (d->sample ? 0 : (uint64_t)d->sample0 * s0);
  return OT_OK;
}

ot_status ot__drop_fwd(const ot__dropout *d, float p, ot_dtype dt, void *x, size_t n, int l,
                       int site) {
  if (ot__drop_on(d, p)) {
    ot_dropout_map mp;
    uint64_t off;
    OT_TRY(site_map(d, n, l, site, &mp, &off));
    OT_TRY(ot_dropout_fwd_map(dt, x, x, &mp, p, d->key, off));
  }
  const float pp = path_p(d, l, site);
  if (pp > 0.0f) path_apply(d, pp, dt, x, l, site);
  return OT_OK;
}

ot_status ot__drop_bwd(const ot__dropout *d, float p, ot_dtype dt, void *dx, const void *dy,
                       size_t n, int l, int site) {
  if (!ot__drop_on(d, p)) {
    if (dx != dy) memcpy(dx, dy, n * ot_dtype_size(dt));
  } else {
    ot_dropout_map mp;
    uint64_t off;
    OT_TRY(site_map(d, n, l, site, &mp, &off));
    OT_TRY(ot_dropout_bwd_map(dt, dx, dy, &mp, p, d->key, off));
  }
  const float pp = path_p(d, l, site);
  if (pp > 0.0f) path_apply(d, pp, dt, dx, l, site);
  return OT_OK;
}

ot_status ot__dropout_begin(ot_model *m, bool want_grad, int B, int T, int S,
                            const int64_t *sample, int64_t sample0, const char *fn) {
  const ot_model_config *c = &m->cfg;
  ot__dropout d = {0};
  if (want_grad) {
    d.resid = c->dropout;
    d.attn = c->attn_dropout;
    d.act = c->act_dropout;
    d.key = mix64(mix64(m->drop_seed) + m->drop_counter);
    d.path = c->drop_path;
  }
  d.path_layers = c->n_layers;
  d.layer0 = m->d0;
  d.B = B;
  d.T = T;
  d.P = c->max_seq > T ? c->max_seq : T;
  if (S > d.P) d.P = S;
  d.C = m->C;
  d.F = m->F;
  d.Fg = c->d_ff;
  d.f0 = m->part.tp_rank * m->F;
  d.Hg = c->n_heads;
  d.h0 = m->part.tp_rank * m->Hq;
  d.sample = sample;
  d.sample0 = sample0;
  m->ddrop = d;
  d.stack = 1;
  d.layer0 = m->e0;
  d.T = S;
  m->edrop = d;
  if (!(d.resid > 0.0f || d.attn > 0.0f || d.act > 0.0f || d.path > 0.0f)) return OT_OK;
  // every row's counters must fit its site's 2^46
  int64_t rmax = sample0 + B - 1;
  if (sample) {
    rmax = 0;
    for (int b = 0; b < B; b++) {
      if (sample[b] < 0)
        return ot_error(OT_EINVAL, "%s: sample[%d]=%lld must be >= 0 (a row's index in the "
                        "step's global batch)", fn, b, (long long)sample[b]);
      if (sample[b] > rmax) rmax = sample[b];
    }
  }
  const double P = d.P, per = fmax(fmax(P * d.C, P * d.Fg), (double)d.Hg * P * P);
  const double big = ((double)rmax + 1.0) * per;
  if (rmax < 0 || big >= (double)(1ull << (OT__DROP_SITE_BITS - 1)))
    return ot_error(OT_EINVAL, "%s: dropout on rows up to global index %lld needs %.3g counters "
                    "per site, more than the 2^%d each site has (use a smaller global batch)", fn,
                    (long long)rmax, big, OT__DROP_SITE_BITS - 1);
  return OT_OK;
}
