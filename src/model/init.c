// Initialization: every tensor of a (part of a) model exactly as the one-process
// model's, each drawn from its own stream (seed, the tensor's index in the whole
// model), so the values do not depend on the other tensors' shapes or on the
// partition. GPT-2 style: matrices and embeddings normal(0, init_std), residual
// projections normal(0, init_std / sqrt(2 L)), norm gains 1, biases 0.
#include "model_impl.h"
#include <math.h>
#include <stdlib.h>

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fills x[0, n) with normal(0, std) from a splitmix64 stream (Box-Muller, double).
static void fill_normal(float *x, size_t n, float std, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 2) {
    double u1 = ((mix(&s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (mix(&s) >> 11) * (1.0 / 9007199254740992.0);
    double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
    x[i] = (float)(std * r * cos(a));
    if (i + 1 < n) x[i + 1] = (float)(std * r * sin(a));
  }
}

static void init_tensor(const ot_model *m, ot_param_kind kind, int gidx, float *x, size_t numel,
                     uint64_t seed) {
  const float std = m->cfg.init_std, rstd = std / sqrtf(2.0f * (float)m->cfg.n_layers);
  uint64_t s = seed ^ (0xA0761D6478BD642Full * (uint64_t)(gidx + 1));
  switch (kind) {
    case OT_PT_EMBED: case OT_PT_LM_HEAD:
      fill_normal(x, (size_t)m->V * m->C, std, s);   // padding rows stay 0
      break;
    case OT_PT_POS: case OT_PT_MATRIX: fill_normal(x, numel, std, s); break;
    case OT_PT_MATRIX_RES: fill_normal(x, numel, rstd, s); break;
    case OT_PT_NORM_W: for (size_t j = 0; j < numel; j++) x[j] = 1.0f; break;
    case OT_PT_NORM_B: case OT_PT_BIAS: break;
  }
}

// The whole tensor of slice s, initialized from its own stream, into x.
static void init_whole(const ot_model *m, const ot__slice *s, ot_param_kind kind, float *x,
                       uint64_t seed) {
  init_tensor(m, kind, s->gidx, x, (size_t)(s->shape[0] * (s->shape[1] ? s->shape[1] : 1)), seed);
}

// Every tensor of the part into buf [n_floats] (the layout).
static ot_status init_params(const ot_model *m, uint64_t seed, float *buf) {
  memset(buf, 0, m->n_floats * sizeof(float));
  int64_t big = 0;
  for (int i = 0; i < m->n_params; i++)
    if (!m->slices[i].whole && ot_model_part_whole_numel(m, i) > big) big = ot_model_part_whole_numel(m, i);
  float *tmp = big ? malloc((size_t)big * sizeof(float)) : NULL;
  if (big && !tmp) return ot_error(OT_ENOMEM, "ot_model_init: out of memory (%lld floats)", (long long)big);
  // whole tensors in parallel (each from its own stream); slices one at a time via tmp
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < m->n_params; i++)
    if (m->slices[i].whole) init_whole(m, &m->slices[i], m->params[i].kind, buf + m->params[i].offset, seed);
  for (int i = 0; i < m->n_params; i++) {
    if (m->slices[i].whole) continue;
    int64_t n = ot_model_part_whole_numel(m, i);
    memset(tmp, 0, (size_t)n * sizeof(float));
    init_whole(m, &m->slices[i], m->params[i].kind, tmp, seed);
    ot__slice_copy(&m->slices[i], &m->params[i], buf + m->params[i].offset, tmp, false);
  }
  free(tmp);
  return OT_OK;
}

ot_status ot_model_init_into(const ot_model *m, uint64_t seed, float *buf) {
  OT_CHECK_PTR(m, "ot_model_init_into");
  OT_CHECK_PTR(buf, "ot_model_init_into");
  return init_params(m, seed, buf);
}

ot_status ot_model_init(ot_model *m, uint64_t seed) {
  OT_CHECK_PTR(m, "ot_model_init");
  // each tensor draws from its own stream (seed, index in the whole model):
  // independent of the others' shapes and of the partition
  if (m->part.param_slots)
    return ot_error(OT_EINVAL, "ot_model_init: a ZeRO-3 part stores two blocks at a time; initialize "
                    "the layout with ot_model_init_into and hand each rank its shard");
  OT_TRY(init_params(m, seed, m->w));
  return ot_model_sync_bf16(m);
}
