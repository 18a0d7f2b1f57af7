// Dropout in the model graph (training forwards only): the mask stream a caller
// sets per step, the per-forward state (ot__dropout, graph.h) and the counter
// range of every site. No mask is stored: the backward (and every recompute)
// regenerates a site's mask from (key, offset), so dropout adds no bytes to the
// memory plan and recompute none | selective | full give the same masks.
//
// Counters: site s of block l of stack k (k = 0 decoder, 1 encoder), on tensor-
// parallel rank r (attention / activation sites only; residual sites use r = 0 so
// the replicated residual stream gets one mask on every rank), starts at
//   id << 38,  id = ((r * 2 + k) * 8192 + layer0 + l) * 8 + s
// (layers < 8192 per stack, checked by the config; 2^38 counters per site,
// checked per forward), of the stream key = mix(mix(seed) + counter): for one
// seed, distinct counters give distinct keys (mix is a bijection).
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
  const bool per_rank = site == OT__DROP_ATTN_P || site == OT__DROP_CROSS_P || site == OT__DROP_ACT;
  const uint64_t r = per_rank ? (uint64_t)d->rank : 0;
  const uint64_t id = ((r * 2 + (uint64_t)d->stack) * 8192 + (uint64_t)(d->layer0 + l)) * 8 +
                      (uint64_t)site;
  return id << OT__DROP_SITE_BITS;
}

void ot__drop_attn(const ot__dropout *d, ot_attn_shape *s, int l, int site) {
  if (!ot__drop_on(d, d ? d->attn : 0.0f)) return;
  s->dropout_p = d->attn;
  s->dropout_seed = d->key;
  s->dropout_offset = ot__drop_offset(d, l, site);
}

// Drop-path probability of site s of block l (0: none at this site).
static float path_p(const ot__dropout *d, int l, int site) {
  if (!ot__drop_path_on(d) || (site != OT__DROP_ATTN_OUT && site != OT__DROP_MLP_OUT) ||
      d->path_layers < 2 || d->sample == 0)
    return 0.0f;
  return d->path * (float)(d->layer0 + l) / (float)(d->path_layers - 1);
}

// x [n] (dt) in place: sample b (elements [b * sample, (b + 1) * sample)) is kept iff
// ot_rand_u32(key, off + b) >= threshold(p) (then scaled by 1 / (1 - p)), else zeroed:
// timm's drop_path, the same rule forward and backward.
static void path_apply(const ot__dropout *d, float p, ot_dtype dt, void *x, size_t n, int l,
                       int site) {
  const uint64_t off = ot__drop_offset(d, l, OT__DROP_PATH) +
                       (site == OT__DROP_MLP_OUT ? (1ull << 37) : 0);
  const uint32_t thr = ot_dropout_threshold(p);
  const float sc = ot_dropout_scale(p);
  const size_t S = d->sample;
  const long ns = (long)(n / S);
  for (long b = 0; b < ns; b++) {
    const float f = ot_rand_u32(d->key, off + (uint64_t)b) >= thr ? sc : 0.0f;
    const long e0 = b * (long)S, e1 = e0 + (long)S;
#pragma omp parallel for schedule(static) if (S >= 65536)
    for (long e = e0; e < e1; e++) ot__stf(dt, x, (size_t)e, ot__ldf(dt, x, (size_t)e) * f);
  }
}

ot_status ot__drop_fwd(const ot__dropout *d, float p, ot_dtype dt, void *x, size_t n, int l,
                       int site) {
  if (ot__drop_on(d, p)) OT_TRY(ot_dropout_fwd(dt, x, x, n, p, d->key, ot__drop_offset(d, l, site)));
  const float pp = path_p(d, l, site);
  if (pp > 0.0f) path_apply(d, pp, dt, x, n, l, site);
  return OT_OK;
}

ot_status ot__drop_bwd(const ot__dropout *d, float p, ot_dtype dt, void *dx, const void *dy,
                       size_t n, int l, int site) {
  if (!ot__drop_on(d, p)) {
    if (dx != dy) memcpy(dx, dy, n * ot_dtype_size(dt));
  } else {
    OT_TRY(ot_dropout_bwd(dt, dx, dy, n, p, d->key, ot__drop_offset(d, l, site)));
  }
  const float pp = path_p(d, l, site);
  if (pp > 0.0f) path_apply(d, pp, dt, dx, n, l, site);
  return OT_OK;
}

ot_status ot__dropout_begin(ot_model *m, bool want_grad, int B, int T, int S, const char *fn) {
  const ot_model_config *c = &m->cfg;
  ot__dropout d = {0.0f, 0.0f, 0.0f, 0, 0, m->d0, m->part.tp_rank};
  if (want_grad) {
    d.resid = c->dropout;
    d.attn = c->attn_dropout;
    d.act = c->act_dropout;
    d.key = mix64(mix64(m->drop_seed) + m->drop_counter);
    d.path = c->drop_path;
  }
  d.path_layers = c->n_layers;
  d.sample = (size_t)T * m->C;
  m->ddrop = d;
  d.stack = 1;
  d.layer0 = m->e0;
  d.sample = (size_t)S * m->C;
  m->edrop = d;
  if (!(d.resid > 0.0f || d.attn > 0.0f || d.act > 0.0f || d.path > 0.0f)) return OT_OK;
  // the largest call of any site must fit its 2^38 counters
  const double Tk = T > S ? T : S, n = (double)B * (T > S ? T : S);
  const double big = fmax(fmax(n * m->C, n * m->F), (double)B * m->Hq * Tk * Tk);
  if (big >= (double)(1ull << OT__DROP_SITE_BITS))
    return ot_error(OT_EINVAL, "%s: dropout on a batch of B=%d, T=%d, S=%d needs %.3g counters "
                    "per site, more than the 2^%d each site has (use a smaller batch)", fn, B, T,
                    S, big, OT__DROP_SITE_BITS);
  return OT_OK;
}
