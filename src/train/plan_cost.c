// The layout planner's prediction of one layout (ot_plan_eval, ot/plan.h): the memory
// of every rank from the engine's own plan (ot_train_plan_memory) plus its stage's ops'
// scratch (ot_plan_scratch_of) and the data loaders, and the step time from the cost
// model the header describes.
#include "train/train_impl.h"
#include "ot/plan.h"
#include <math.h>
#include <stdlib.h>

// ------------------------------------------------------------------ memory ---
// The block a scratch slot holds for a request of `want` bytes: 4 KiB doubled until it fits.
static size_t slot_cap(size_t want) {
  size_t cap = 4096;
  while (cap < want) cap *= 2;
  return cap;
}

// Adds one GEMM (C [M, N] of cdt over K) to a stage's GEMM scratch: the largest own-GEMM
// workspace and measurement slice so far.
static void add_gemm(int M, int N, int K, ot_dtype cdt, bool cvt, size_t *own, size_t *choice) {
  ot_gemm_scratch g;
  ot_gemm_scratch_of(M, N, K, cdt, cvt, &g);
  if (g.own_ws > *own) *own = g.own_ws;
  if (g.choice_ws > *choice) *choice = g.choice_ws;
}
// A linear layer of `rows` tokens, `out` x `in` weights: its forward (C [rows, out] of
// fwd_cdt), its backward's dx (C [rows, in], dt) and dW (C [out, in] f32, over the rows;
// wrows at a time when ZeRO chunks it).
static void add_linear(int rows, int out, int in, int wrows, ot_dtype dt, ot_dtype fwd_cdt, bool cvt,
                       size_t *own, size_t *choice) {
  add_gemm(rows, out, in, fwd_cdt, cvt, own, choice);
  add_gemm(rows, in, out, dt, cvt, own, choice);
  add_gemm(wrows, in, rows, OT_F32, cvt, own, choice);
}

// The scratch of the rank whose plan is pm (see ot_plan_scratch_of).
static void stage_scratch(const ot_train_config *c, const ot_rank_memory *pm, ot_plan_scratch *o) {
  memset(o, 0, sizeof *o);
  const ot_model_config *mc = &c->model;
  const int tp = c->tensor_parallel, C = mc->d_model, D = ot_model_head_dim(mc);
  const int rows = c->batch_size * c->seq_len;
  const int qkv = (mc->n_heads + 2 * mc->n_kv_heads) / tp * D, att = mc->n_heads / tp * D;
  const int ff = mc->d_ff / tp, up = mc->mlp == OT_MLP_SWIGLU ? 2 * ff : ff;
  const bool last = pm->layer1 == ot_model_n_blocks(mc);
  const ot_dtype dt = c->dtype;
  const bool cvt = dt == OT_F16 || (dt == OT_BF16 && !ot_gemm_bf16_native());
  // the ops' slot: the QKV projection's f32 output staging [rows, qkv] (forward) and its
  // gathered gradient (backward), with the conversion tiles when the GEMMs convert; the
  // cross-entropy's row sums (the last stage)
  size_t want = ot_align64((size_t)rows * qkv * 4);
  if (cvt) want += ot_gemm_convert_ws_max();
  const size_t xent = ot_align64((size_t)rows * sizeof(double));
  if (last && xent > want) want = xent;
  o->ops = slot_cap(want);
  // the GEMMs the stage runs, forward and backward: each block's QKV (f32 output), attention
  // output, MLP up and down projections; the last stage's head (ZeRO-3: chunk_rows of the
  // vocabulary at a time in every GEMM, ZeRO-2 in the weight gradient only)
  size_t own = 0, choice = 0;
  if (pm->layer1 > pm->layer0) {
    add_linear(rows, qkv, C, qkv, dt, OT_F32, cvt, &own, &choice);
    add_linear(rows, C, att, C, dt, dt, cvt, &own, &choice);
    add_linear(rows, up, C, up, dt, dt, cvt, &own, &choice);
    add_linear(rows, C, ff, C, dt, dt, cvt, &own, &choice);
  }
  if (last) {
    const int V = pm->vocab_rows, R = pm->chunk_rows > 0 && pm->chunk_rows < V ? pm->chunk_rows : V;
    if (c->optimizer_shard == 3) {   // forward C: a column block of the logits; dx summed in f32
      add_gemm(rows, R, C, dt, cvt, &own, &choice);
      add_gemm(rows, C, R, OT_F32, cvt, &own, &choice);
      add_gemm(R, C, rows, OT_F32, cvt, &own, &choice);
    } else {
      add_linear(rows, V, C, c->optimizer_shard == 2 ? R : V, dt, dt, cvt, &own, &choice);
    }
  }
  // the GEMMs' own block (OT_SCRATCH_GEMM): taken where a GEMM runs the own GEMM or is
  // measured (OT_GEMM=auto, ot_gemm_may_measure: a stage whose GEMMs all stay below the
  // threshold never takes it); the measurement's slice of C, held during its first call
  o->gemm = own ? slot_cap(own) : 0;
  o->choice = choice;
  o->total = o->ops + o->gemm + o->choice;
}

ot_status ot_plan_scratch_of(const ot_train_config *c, int rank, ot_plan_scratch *o) {
  static const char fn[] = "ot_plan_scratch_of";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(o, fn);
  memset(o, 0, sizeof *o);
  ot_rank_memory pm;
  OT_TRY(ot_train_plan_memory(c, rank, &pm));
  stage_scratch(c, &pm, o);
  return OT_OK;
}

// The loaders' buffers: one global batch of [T + 1] rows for training, one micro-batch for
// evaluation (int32).
static size_t loader_bytes(const ot_train_config *c) {
  const size_t rows = (size_t)c->batch_size * c->grad_accum * c->data_parallel + (size_t)c->batch_size;
  return rows * ((size_t)c->seq_len + 1) * sizeof(int32_t);
}

// ------------------------------------------------------------------- links ---
typedef struct {
  double bw, lat;
  bool network;   // a link the host's cores do not drive (a GPU fabric, a network)
  bool wire;      // between hosts: its time is spent waiting on the wire, not on the cores
} link;

// Ranks fill hosts in rank order (rph per host).
static int host_of(int rank, int rph) { return rank / rph; }

// The link a group of n ranks r0, r0 + stride, ... uses. Groups of one kind are the
// rank sets {blk * n * stride + j + i * stride : i < n} (j < stride): tensor groups
// (stride 1), data groups (stride tp), stage pairs (n 2, stride dp * tp). Between hosts,
// every group of the kind that spans hosts with a rank on r0's host shares its link.
// A shared host's all-reduce bandwidth when k of its ranks move data at once: the measured
// one of the largest group <= k (2, 4, 8), slower in proportion beyond it.
static double shared_bw(const ot_machine *m, int k) {
  double bw = m->intra_bw;
  int at = 2;
  if (k >= 4 && m->intra_bw4 > 0) { bw = m->intra_bw4; at = 4; }
  if (k >= 8 && m->intra_bw8 > 0) { bw = m->intra_bw8; at = 8; }
  return k > at ? bw * at / k : bw;
}

static link group_link(const ot_machine *m, int world, int rph, int n, int stride, int r0) {
  const int h0 = host_of(r0, rph);
  bool span = false;
  for (int i = 1; i < n; i++) span |= host_of(r0 + i * stride, rph) != h0;
  // inside a shared host every rank of it moves data at about the same time (the groups of
  // one kind communicate together), on the cores the ranks share
  link l = {m->shared ? shared_bw(m, rph < world ? rph : world) : m->intra_bw, m->intra_lat, !m->shared, false};
  if (!span) return l;
  int share = 0;
  for (int blk = 0; blk * n * stride < world; blk++)
    for (int j = 0; j < stride; j++) {
      const int base = blk * n * stride + j;
      bool on = false, sp = false;
      for (int i = 0; i < n && base + i * stride < world; i++) {
        const int h = host_of(base + i * stride, rph);
        on |= h == h0;
        sp |= h != host_of(base, rph);
      }
      share += on && sp;
    }
  // a group of 4 or more: its own measured rate where there is one. Groups sharing the link
  // split the most it was measured to carry, each at most its own rate (a pair's all-reduce
  // may not fill the link: between 2 simulated hosts at 1 Gb/s the engine's all-reduce of 64
  // MiB runs at 62 MB/s for one pair, 110 for a group of 4, and 50 each for two pairs at once:
  // bench/mpi_coll.c)
  const double own = n >= 4 && m->inter_bw4 > 0 ? m->inter_bw4 : m->inter_bw;
  const double most = fmax(m->inter_bw, m->inter_bw4);
  l.bw = share > 1 ? fmin(own, most / share) : own;
  l.lat = m->inter_lat;
  // a CPU host's cores drive its network too (the TCP stack, MPI's progress): with every core
  // computing, a transfer between hosts is not hidden behind the compute (measured, dp4 over 2
  // simulated hosts of one core at 1 Gb/s: overlap saved 0.2 of the 0.43 s this would hide)
  l.network = !m->shared;
  l.wire = true;
  return l;
}

// Seconds of a ring all-reduce of `bytes` over n ranks on link l.
static double allreduce_s(double bytes, int n, link l) {
  if (n < 2 || bytes <= 0) return 0.0;
  return 2.0 * (n - 1) / n * bytes / l.bw + 2.0 * (n - 1) * l.lat;
}
// An all-gather of `bytes` in all (each rank contributing bytes / n).
static double allgather_s(double bytes, int n, link l) {
  if (n < 2 || bytes <= 0) return 0.0;
  return (double)(n - 1) / n * bytes / l.bw + (n - 1) * l.lat;
}

// ------------------------------------------------------------------- time ---
typedef struct {
  double t_mb;        // one micro-batch's forward + backward (compute + tensor comm + sends)
  double t_bwd;       // of which the backward
  double busy;        // the part that occupies this rank's core(s) (all but network waits)
  double stage_floats;
  int layers;         // the stage's blocks
} stage_time;

// Rates of one rank: GEMM and attention FLOP/s, memory bytes/s, with its threads on a
// shared host.
static void rank_rates(const ot_machine *m, int ranks_on_host, double *gemm, double *attn, double *mem) {
  const double ah = m->attn_flops > 0 ? m->attn_flops : m->gemm_flops;
  if (!m->shared) {
    *gemm = m->gemm_flops;
    *attn = ah;
    *mem = m->mem_bw;
    return;
  }
  const int th = m->cores / ranks_on_host > 1 ? m->cores / ranks_on_host : 1;
  const double ac = m->core_attn_flops > 0 ? m->core_attn_flops : m->core_gemm_flops;
  *gemm = th == 1 ? m->core_gemm_flops : m->gemm_flops * th / m->cores;
  *attn = th == 1 ? ac : ah * th / m->cores;
  *mem = m->mem_bw * (th < m->cores ? (double)th / m->cores : 1.0);
}

// Forward + backward of one micro-batch on pipeline stage st (tensor rank 0's part).
static ot_status stage_eval(const ot_train_config *c, const ot_machine *m, int rph, int st,
                            stage_time *o, ot_rank_memory *pm) {
  const int dp = c->data_parallel, tp = c->tensor_parallel, world = dp * tp * c->pipeline_stages;
  const int rank = st * dp * tp;
  OT_TRY(ot_train_plan_memory(c, rank, pm));
  const ot_model_config *mc = &c->model;
  const double N = (double)c->batch_size * c->seq_len, T = c->seq_len, C = mc->d_model;
  const double D = ot_model_head_dim(mc), Hq = mc->n_heads, Hkv = mc->n_kv_heads, F = mc->d_ff;
  const double Fa = mc->mlp == OT_MLP_SWIGLU ? 2 * F : F, Vp = ot_model_vocab_padded(mc);
  const double gemm_mac = ((Hq + 2 * Hkv) * D * C + C * Hq * D + Fa * C + C * F) / tp;
  const double attn_mac = Hq / tp * D * (T + 1);   // QK^T and PV, causal average
  const double L = pm->layer1 - pm->layer0;
  const bool last = pm->layer1 == ot_model_n_blocks(mc);
  const double blk_fwd = 2.0 * N * (gemm_mac + attn_mac) * L;
  const double head_fwd = last ? 2.0 * N * C * Vp / (c->vocab_parallel && tp > 1 ? tp : 1) : 0.0;
  // GEMM FLOPs (blocks without the attention core, the head) and the attention core's,
  // forward + backward (2 x the forward); recompute reruns the forward of the blocks (full)
  // or the attention core (selective) inside the backward
  const double attn_fwd = 2.0 * N * attn_mac * L, gemm_fwd = blk_fwd - attn_fwd + head_fwd;
  const bool full = c->recompute == OT_RECOMPUTE_FULL, sel = c->recompute == OT_RECOMPUTE_SELECTIVE;
  const double gemm_bwd = 2.0 * gemm_fwd + (full ? blk_fwd - attn_fwd : 0.0);
  const double attn_bwd = 2.0 * attn_fwd + (full || sel ? attn_fwd : 0.0);
  const double logits = last ? N * Vp / (c->vocab_parallel && tp > 1 ? tp : 1) * ot_dtype_size(c->dtype) : 0.0;
  const double traffic = 3.0 * (double)pm->act_saved_layer * L + 4.0 * logits;
  const int on_host = world < rph ? world : rph;
  double rg, ra, rm;
  rank_rates(m, on_host, &rg, &ra, &rm);
  // a shared host's ranks of one stage (data and tensor peers) compute at the same time: more
  // of them than its cores take turns (ranks of other stages fill each other's bubbles: the
  // host bound in eval)
  double share = 1.0;   // the part of its cores the rank gets while its stage computes
  if (m->shared) {
    const int th = m->cores / on_host > 1 ? m->cores / on_host : 1;
    const int same = on_host < dp * tp ? on_host : dp * tp;
    if (same * th > m->cores) share = (double)m->cores / (same * th);
  }
  rg *= N / (N + m->gemm_rows_half);   // small GEMMs run slower (the machine's measured curve)
  ra *= T / (T + m->attn_len_half);
  const double alone_bwd = gemm_bwd / rg + attn_bwd / ra + traffic * 2.0 / 3.0 / rm;
  const double alone = gemm_fwd / rg + attn_fwd / ra + traffic / 3.0 / rm + alone_bwd;
  const double comp_bwd = alone_bwd / share, comp = alone / share;
  // tensor parallel: 4 all-reduces of [N, C] f32 per block (6 when the forward reruns),
  // the vocabulary-parallel embedding and head's
  double tcomm = 0.0, tcomm_bwd = 0.0;
  bool tcomm_wire = false;
  if (tp > 1) {
    const link l = group_link(m, world, rph, tp, 1, rank);
    tcomm_wire = l.wire;
    const double k = c->recompute == OT_RECOMPUTE_FULL ? 6.0 : 4.0;
    const double one = allreduce_s(N * C * 4.0, tp, l);
    tcomm = k * L * one;
    tcomm_bwd = (k - 2.0) * L * one;
    if (c->vocab_parallel) {
      if (pm->layer0 == 0) tcomm += one;                                  // the embedding's sum
      if (last) tcomm += one + 3.0 * allreduce_s(N * 4.0, tp, l);          // dx, the softmax sums
    }
  }
  // pipeline sends: the activation forward, its gradient back
  double p2p = 0.0;
  if (c->pipeline_stages > 1) {
    const int peer = st + 1 < c->pipeline_stages ? rank + dp * tp : rank - dp * tp;
    link l = group_link(m, world, rph, 2, peer > rank ? peer - rank : rank - peer, peer > rank ? rank : peer);
    const double b = N * C * ot_dtype_size(c->dtype);
    p2p = 2.0 * (b / l.bw + l.lat);
  }
  o->t_mb = comp + tcomm + p2p;
  o->t_bwd = comp_bwd + tcomm_bwd + p2p / 2;
  // (its core time: the host bound divides it over the cores; a tensor group between hosts
  // waits on the wire: GPT-2 tp4 over 2 simulated hosts of one core at 1 Gb/s, counted as core
  // time, was predicted 8.0 s a step against 6.3-6.6 measured)
  o->busy = alone + (tcomm_wire ? 0.0 : tcomm);
  o->stage_floats = (double)pm->n_floats;
  o->layers = pm->layer1 - pm->layer0;
  return OT_OK;
}

static ot_status eval(ot_train_config *c, const ot_machine *m, int hosts, ot_plan_result *o);

ot_status ot_plan_eval(const ot_train_config *cin, const ot_machine *m, int hosts, ot_plan_result *o) {
  static const char fn[] = "ot_plan_eval";
  OT_CHECK_PTR(cin, fn);
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(o, fn);
  memset(o, 0, sizeof *o);
  ot_train_config *c = malloc(sizeof *c);   // (large: its paths)
  if (!c) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  *c = *cin;
  ot_status s = eval(c, m, hosts, o);
  free(c);
  return s;
}

static ot_status eval(ot_train_config *c, const ot_machine *m, int hosts, ot_plan_result *o) {
  static const char fn[] = "ot_plan_eval";
  o->dp = c->data_parallel;
  o->tp = c->tensor_parallel;
  o->pp = c->pipeline_stages;
  o->micro_batches = c->grad_accum;
  o->batch_size = c->batch_size;
  o->zero = c->optimizer_shard;
  o->recompute = c->recompute;
  o->vocab_parallel = c->vocab_parallel;
  o->buckets = c->grad_buckets;
  o->fusion_layers = c->comm_fusion_layers;
  o->balanced_stages = c->balanced_stages;
  OT_TRY(ot_machine_validate(m));
  const int dp = c->data_parallel, tp = c->tensor_parallel, pp = c->pipeline_stages, world = dp * tp * pp;
  if (hosts < 1 || hosts > m->hosts)
    return ot_error(OT_EINVAL, "%s: %d hosts, but the machine '%s' has %d", fn, hosts, m->name, m->hosts);
  if (world % hosts)
    return ot_error(OT_EINVAL, "%s: %d ranks do not fill %d hosts evenly", fn, world, hosts);
  const int rph = world / hosts;
  o->hosts = hosts;
  o->ranks_per_host = rph;
  if (!m->shared && rph > m->devices_per_host) {
    snprintf(o->why, sizeof o->why, "%d ranks per host, but a host has %d devices", rph, m->devices_per_host);
    return OT_OK;
  }
  if (ot_train_config_resolve(c) != OT_OK) {
    snprintf(o->why, sizeof o->why, "%s", ot_last_error());
    return OT_OK;
  }
  o->micro_batches = c->grad_accum;
  // every pipeline stage (tensor rank 0, data rank 0: the fullest shard)
  stage_time *stt = calloc((size_t)pp, sizeof *stt);
  if (!stt) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  const size_t loaders = loader_bytes(c);
  double tmax = 0.0, tsum = 0.0, busy_host = 0.0;
  int slowest = 0;
  for (int st = 0; st < pp; st++) {
    ot_rank_memory pm;
    if (stage_eval(c, m, rph, st, &stt[st], &pm) != OT_OK) {
      snprintf(o->why, sizeof o->why, "%s", ot_last_error());
      free(stt);
      return OT_OK;
    }
    if (st == 0) o->first_stage_blocks = pm.layer1 - pm.layer0;
    ot_plan_scratch sc;
    stage_scratch(c, &pm, &sc);
    const size_t scratch = sc.total;
    size_t tot = scratch + loaders;
    for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) tot += pm.bytes[k];
    if (pm.create_peak > tot) tot = pm.create_peak;   // (ZeRO-3's initial weights)
    if (tot > o->mem_total) {
      o->mem_total = tot;
      o->mem_rank = st * dp * tp;
      memcpy(o->mem, pm.bytes, sizeof o->mem);
      o->mem[OT_MEM_OTHER] += loaders;
      o->scratch = scratch;
    }
    if (stt[st].t_mb > tmax) {
      tmax = stt[st].t_mb;
      slowest = st;
    }
    tsum += stt[st].t_mb;
  }
  const int M = c->grad_accum;
  // pipeline: (M - 1) x the slowest stage + every stage once
  const double t_pipe = pp > 1 ? (M - 1) * tmax + tsum : M * tmax;
  o->t_compute = M * tmax;
  o->t_bubble = t_pipe - o->t_compute;
  // a shared host: its ranks' work on at most `cores` cores at once
  if (m->shared && rph > m->cores) {
    for (int h0 = 0; h0 < world; h0 += rph) {   // the busiest host (a pipeline's last holds the head)
      double busy = 0.0;
      for (int r = h0; r < h0 + rph && r < world; r++) busy += M * stt[(r / (dp * tp)) % pp].busy;
      busy_host = fmax(busy_host, busy);
    }
    const double bound = busy_host / m->cores;
    if (bound > t_pipe) o->t_compute += bound - t_pipe;
  }
  // data parallel: the gradients of the fullest stage
  const stage_time *sl = &stt[slowest];
  const double gbytes = sl->stage_floats * 4.0;
  double comm = 0.0, optim = 0.0;
  if (dp > 1) {
    const link l = group_link(m, world, rph, dp, tp, 0);
    // the all-reduces of a step: --grad-buckets ranges, or one per fusion group of blocks;
    // each pays the ring's latency
    const int Ls = sl->layers;
    const double nb = c->comm_fusion_layers > 0 ? (Ls + c->comm_fusion_layers - 1) / c->comm_fusion_layers
                                               : c->grad_buckets;
    const double ar = allreduce_s(gbytes, dp, l) + (nb - 1) * 2.0 * (dp - 1) * l.lat;
    // overlap: the backward makes the buckets final from the last; the first is ready after
    // 1 / nb of it and the reductions run one after another from then on (hidden only where a
    // network moves the bytes, not a shared host's cores)
    const double hide = l.network && c->overlap ? sl->t_bwd * (1.0 - 1.0 / nb) : 0.0;
    const double ex1 = fmax(ar / nb, ar - hide);
    const double cpu_scale = 1.0;   // (a shared host's bandwidth already counts its ranks)
    if (c->optimizer_shard >= 2) comm += M * ex1 * cpu_scale;   // per micro-batch
    else comm += (c->overlap ? ex1 : ar) * cpu_scale;
    if (c->optimizer_shard == 1 || c->optimizer_shard == 2) optim += allgather_s(gbytes, dp, l) * cpu_scale;
    if (c->optimizer_shard == 3) {   // every block gathered before its forward and backward
      const ot_model_config *mc = &c->model;
      const double vbytes = (double)ot_model_vocab_padded(mc) * mc->d_model * 4.0 /
                            (c->vocab_parallel && tp > 1 ? tp : 1);
      const double gather = 2.0 * allgather_s(gbytes - vbytes * (mc->tied ? 1 : 2), dp, l);
      const double hidden = c->zero_prefetch && l.network ? fmin(gather, sl->t_mb) : 0.0;
      comm += M * ((gather - hidden) + 3.0 * allgather_s(vbytes, dp, l)) * cpu_scale;
    }
  }
  if (pp > 1 && c->model.tied) {   // the tied embedding's two copies summed (first, last stage)
    const ot_model_config *mc = &c->model;
    const int last = (pp - 1) * dp * tp;
    const link l = group_link(m, world, rph, 2, last, 0);
    comm += allreduce_s((double)ot_model_vocab_padded(mc) * mc->d_model * 4.0 / (c->vocab_parallel ? tp : 1), 2, l);
  }
  // the optimizer: AdamW reads and writes the shard's weights, moments and gradients
  {
    double rg, ra, rm;
    rank_rates(m, world < rph ? world : rph, &rg, &ra, &rm);
    const double shard = c->optimizer_shard >= 1 ? sl->stage_floats / dp : sl->stage_floats;
    double t = shard * 28.0 / rm;
    if (m->shared && rph > m->cores) t *= (double)rph / m->cores;
    optim += t;
  }
  o->t_comm = comm;
  o->t_optim = optim;
  o->t_step = o->t_compute + o->t_bubble + o->t_comm + o->t_optim;
  const double tokens = (double)c->batch_size * M * dp * c->seq_len;
  o->tokens_per_s = tokens / o->t_step;
  const double peak = m->shared ? hosts * m->peak_flops : world * m->peak_flops;
  o->mfu = ot_model_flops_per_token(&c->model, c->seq_len) * o->tokens_per_s / peak;
  // memory: per device, or per host on a shared host
  double need = (double)o->mem_total, have = m->mem_bytes;
  if (m->shared) {
    need = 0.0;
    for (int r = 0; r < rph && r < world; r++) {
      ot_rank_memory pm;
      ot_plan_scratch sc;
      if (ot_train_plan_memory(c, r, &pm) != OT_OK) continue;
      stage_scratch(c, &pm, &sc);
      double rk = (double)(sc.total + loaders);
      for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) rk += (double)pm.bytes[k];
      need += fmax(rk, (double)pm.create_peak);
    }
  }
  free(stt);
  o->resident = o->mem_total + (size_t)m->rank_overhead;
  if (m->shared) need += m->rank_overhead * (rph < world ? rph : world);
  o->fits = need <= have;
  if (!o->fits)
    snprintf(o->why, sizeof o->why, "needs %.1f GiB per %s, the machine has %.1f GiB", need / 1073741824.0,
             m->shared ? "host" : "device", have / 1073741824.0);
  return OT_OK;
}
