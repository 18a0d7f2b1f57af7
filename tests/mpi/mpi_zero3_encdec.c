// ZeRO-3 (and ZeRO-2) of an encoder-decoder part on 2 data-parallel ranks (mpirun -np 2), for a
// post-norm model with sinusoidal positions (transformer-tiny's layout) and a pre-norm
// one with learned positions and embedding norms (mBART's: the encoder's final norm and
// the decoder's positions and embedding norm lie between the last encoder block and the
// first decoder block in the layout):
// - the slots hold the largest block (a decoder block, with its cross-attention) and
//   every block's range is disjoint from the stored global tensors;
// - the runtime's parameter + gradient memory equals its plan (ot__par_plan_rank) to the
//   byte and the README's formula within 1%: 8 n/dp (master and gradient shards) +
//   4 x (stored globals + 2 x the largest block) + 6 x one vocabulary-row chunk (f32 and
//   16-bit) + 4 x ZeRO-2's staging (3 units + one chunk + the small globals);
// - a forward's loss equals one process's bitwise, and after the same micro-batch's
//   forward and backward on both ranks each rank's reduced gradient shard is exactly twice
//   the one-process gradient, to 1e-6 of its largest element (the embedding's three uses
//   summed chunk by chunk round differently) (prefetch on and off; recompute full); and
//   the same under ZeRO-2 with a pre-norm model (its gradient units are whole blocks for
//   an encoder-decoder: a decoder block writes its cross-attention's gradients before it
//   reports the units after them, which with matrix units raced their reductions).
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include "harness.h"
#include "ot/ot.h"
#include "ot/dist.h"
#include "dist/par.h"

enum { B = 3, S = 7, T = 6, V = 500 };

static ot_model_config model_of(bool pre) {
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  c.vocab = V;
  c.vocab_pad = 1;
  c.pad_id = c.eos_id = c.decoder_start_id = V - 1;
  c.d_model = 48;
  c.d_ff = 96;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  if (pre) {
    c.norm_place = OT_PLACE_PRE;
    c.pos = OT_POS_LEARNED;
    c.pos_offset = 2;
    c.embed_norm = true;
  }
  return c;
}

static ot__par_config par_of(const ot_model_config *mc, ot_recompute rc, bool prefetch) {
  ot__par_config pc;
  memset(&pc, 0, sizeof pc);
  pc.model = *mc;
  pc.run = (ot_run_config){B, T, OT_F32, rc, -1, S};
  pc.dp = 2;
  pc.tp = pc.pp = 1;
  pc.micro_batches = 1;
  pc.overlap = true;
  pc.zero = 3;
  pc.zero_prefetch = prefetch;
  pc.grad_buckets = 3;
  pc.comm_timeout = 120;
  return pc;
}

static int32_t g_src[B * S], g_len[B], g_in[B * T], g_tgt[B * T];

static void make_batch(void) {
  th_rng r = {5};
  for (int b = 0; b < B; b++) g_len[b] = S - 2 * b;
  for (int i = 0; i < B * S; i++) g_src[i] = (int32_t)(th_next(&r) % (V - 1));
  for (int i = 0; i < B * T; i++) {
    g_in[i] = (int32_t)(th_next(&r) % (V - 1));
    g_tgt[i] = i % 5 == 4 ? -1 : (int32_t)(th_next(&r) % (V - 1));
  }
}

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

// The memory and layout checks of a freshly created part (see the file comment).
static void check_memory(const char *name, const ot__par_config *pc, ot_model *m, const size_t *alloc) {
  ot__par_mem pm;
  if (!th_check(ot__par_plan_rank(pc, ot_dist_world_rank(), &pm) == OT_OK, "%s: plan: %s", name,
                ot_last_error()))
    return;
  th_check(pm.bytes[OT_MEM_PARAMS] == alloc[0] && pm.bytes[OT_MEM_GRADS] == alloc[1],
           "%s: planned params %zu, grads %zu bytes = allocated %zu, %zu", name,
           pm.bytes[OT_MEM_PARAMS], pm.bytes[OT_MEM_GRADS], alloc[0], alloc[1]);
  const int Le = pc->model.n_enc_layers, nb = Le + pc->model.n_layers;
  size_t blk = 0, enc = 0, globals = 0, small = 0, chunk = 0, unit = 0;
  for (int l = 0; l < nb; l++) {
    size_t o0, o1;
    ot_model_block_range(m, l, &o0, &o1);
    if (l < Le && o1 - o0 > enc) enc = o1 - o0;
    if (o1 - o0 > blk) blk = o1 - o0;
    for (int i = 0; i < ot_model_param_count(m); i++) {   // no global tensor inside a block
      const ot_param *q = ot_model_param_at(m, i);
      if (q->layer < 0)
        th_check(q->offset + q->numel <= o0 || q->offset >= o1, "%s: '%s' lies inside block %d", name,
                 q->name, l);
    }
  }
  th_check(blk > enc, "%s: the slot (%zu floats) holds a decoder block, larger than an encoder "
           "block (%zu)", name, blk, enc);
  for (int i = 0; i < ot_model_param_count(m); i++) {
    const ot_param *q = ot_model_param_at(m, i);
    if (q->layer >= 0) continue;
    if (q->kind == OT_PT_EMBED || q->kind == OT_PT_LM_HEAD) {
      const size_t rows = (size_t)(1 << 20) / (size_t)q->shape[1];
      chunk = (rows < (size_t)q->shape[0] ? rows : (size_t)q->shape[0]) * (size_t)q->shape[1];
    } else {
      small += pad16(q->numel);
    }
    if (ot_model_param_stored(m, i)) globals += pad16(q->numel);
  }
  // ZeRO-2's units of an encoder-decoder: whole blocks, each to the next block's start
  for (int l = 0; l < nb; l++) {
    size_t o0, o1, n0, n1;
    ot_model_block_range(m, l, &o0, &o1);
    if (l + 1 < nb) ot_model_block_range(m, l + 1, &n0, &n1);
    const size_t u = (l + 1 < nb ? n0 : o1) - o0;
    if (u > unit) unit = u;
  }
  const size_t nf = ot_model_n_floats(m), shard = pad16((nf + 1) / 2);
  const double want = 8.0 * shard + 4.0 * (double)(globals + 2 * blk) + 6.0 * (double)chunk +
                      4.0 * (double)(3 * unit + chunk + small);
  const double got = (double)(alloc[0] + alloc[1]);
  th_check(fabs(got / want - 1) <= 0.01, "%s: parameters + gradients %.0f bytes vs the formula 8 n/dp "
           "+ 4 (globals + 2 blocks) + 6 chunk + 4 staging = %.0f (n %zu, globals %zu, block %zu, "
           "chunk %zu, unit %zu)", name, got, want, nf, globals, blk, chunk, unit);
  if (ot_dist_world_rank() == 0)
    printf("%s: ZeRO-3 dp2 params+grads %.1f KiB = %.4f x the formula (n %zu floats, slot %zu, "
           "encoder block %zu)\n", name, got / 1024, got / want, nf, blk, enc);
}

static void run_case(const char *name, bool pre, ot_recompute rc, bool prefetch, bool mem, int zero) {
  const ot_model_config mc = model_of(pre);
  const ot_run_config run = {B, T, OT_F32, OT_RECOMPUTE_NONE, -1, S};
  const ot_s2s_batch b = {B, S, T, g_src, g_len, g_in, g_tgt};
  float count = 0.0f;
  for (int i = 0; i < B * T; i++) count += g_tgt[i] >= 0;
  // one process: the loss of a forward, the gradient of a forward + backward
  ot_model *ref = NULL;
  double lref = 0.0, lfwd = 0.0;
  if (!th_check(ot_model_create(&ref, &mc, &run) == OT_OK && ot_model_init(ref, 11) == OT_OK &&
                ot_model_forward_s2s(ref, &b, count, true, &lref) == OT_OK &&
                ot_model_backward(ref) == OT_OK, "%s: reference: %s", name, ot_last_error())) {
    ot_model_free(ref);
    return;
  }
  ot__par_config pc = par_of(&mc, rc, prefetch);
  pc.zero = zero;
  const size_t before[2] = {ot_mem_current(OT_MEM_PARAMS), ot_mem_current(OT_MEM_GRADS)};
  ot_model *m = NULL;
  ot__par *p = NULL;
  ot_status s = ot__par_create(&pc, &m, &p);
  const size_t alloc[2] = {ot_mem_current(OT_MEM_PARAMS) - before[0],
                           ot_mem_current(OT_MEM_GRADS) - before[1]};
  if (s == OT_OK) s = ot__par_init_params(p, 11);
  if (s == OT_OK && mem) check_memory(name, &pc, m, alloc);
  if (s == OT_OK) s = ot__par_s2s_forward(p, &b, count, false, &lfwd);
  double l = 0.0;
  bool finite = true;
  if (s == OT_OK) {
    ot__par_zero_grads(p);
    s = ot__par_s2s_step(p, &b, 1, count, 0, 0, &l, &finite);
  }
  if (s == OT_OK) s = ot__par_finish_backward(p);
  if (th_check(s == OT_OK, "%s: %s", name, ot_last_error())) {
    th_check(lfwd == lref && l == lref, "%s: losses %.9g (forward) and %.9g (step) vs one process %.9g",
             name, lfwd, l, lref);
    // (the embedding's gradient sums its three uses chunk by chunk, as ZeRO-2: rounding)
    size_t s0, s1;
    ot__par_shard(p, &s0, &s1);
    size_t worst = s0;
    const float *gs = ot__par_shard_grads(p), *g = ot_model_grads(ref);
    double big = 0.0, dmax = 0.0;
    for (size_t k = 0; k < s1 - s0; k++) big = fmax(big, fabs(2.0 * g[s0 + k]));
    for (size_t k = 0; k < s1 - s0; k++) {
      const double d = fabs((double)gs[k] - 2.0 * g[s0 + k]);
      if (!(d <= dmax)) {
        dmax = d;
        worst = s0 + k;
      }
    }
    th_check(big > 0 && dmax <= 1e-6 * big, "%s rank %d: the reduced gradient shard [%zu, %zu) differs "
             "from twice one process's by %g of its largest %g (offset %zu: %.9g vs %.9g)", name,
             ot_dist_world_rank(), s0, s1, dmax / big, big, worst, gs[worst - s0], 2.0 * g[worst]);
    for (int i = 0; dmax > 1e-6 * big && i < ot_model_param_count(ref); i++) {
      const ot_param *q = ot_model_param_at(ref, i);
      if (worst >= q->offset && worst < q->offset + q->numel) printf("  (offset %zu: '%s')\n", worst, q->name);
    }
    if (ot_dist_world_rank() == 0)
      printf("%s: loss %.9g equal; gradient shard within %.1e of the largest\n", name, l, dmax / big);
  }
  ot__par_free(p);
  ot_model_free(m);
  ot_model_free(ref);
}

int main(int argc, char **argv) {
  if (!th_check(ot_dist_init(&argc, &argv) == OT_OK && ot_dist_active() && ot_dist_world_size() == 2,
                "run under mpirun -np 2: %s", ot_last_error()))
    return th_finish();
  make_batch();
  run_case("pre-norm, ZeRO-2", true, OT_RECOMPUTE_NONE, true, false, 2);
  run_case("post-norm, sinusoidal", false, OT_RECOMPUTE_NONE, true, true, 3);
  run_case("pre-norm, learned positions, embedding norms", true, OT_RECOMPUTE_NONE, true, true, 3);
  run_case("pre-norm, no prefetch", true, OT_RECOMPUTE_NONE, false, false, 3);
  run_case("post-norm, recompute full", false, OT_RECOMPUTE_FULL, true, false, 3);
  int any = th_finish();
  ot_dist_allreduce_max_int(&any);
  ot_dist_finalize();
  return any;
}
