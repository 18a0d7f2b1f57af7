// The layout planner (ot/plan.h, src/train/plan_*.c): the memory plan of a rank equals what
// ot_trainer_create allocates (exact, one process; the parallel layouts are checked by every
// variant of tests/mpi/mpi_parallel.c), machine files and presets, the cost model's
// structure (its terms add up, a pipeline's bubble shrinks with micro-batches, slower links
// cost more, a tensor group across hosts costs more than inside one), the seed's 1000B and
// the 34B layouts evaluate, and bad input: a model that fits nowhere, impossible device
// counts, malformed machine files. The ops' scratch per stage: the GEMMs' block and the GEMM
// choice's slice only where a GEMM of the stage can run the own GEMM or be measured (a
// pipeline's small stages take neither), the GEMM block equal to the one the engine takes.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "ot/ot.h"
#include "ot/plan.h"
#include "dist/par.h"
#include "ops/gemm_impl.h"

static ot_train_config tiny_cfg(void) {
  ot_train_config c;
  ot_train_config_default(&c);
  ot_model_config_preset(&c.model, "tiny");
  c.data[0] = 0;
  c.batch_size = 4;
  c.seq_len = 16;
  c.steps = 1;
  return c;
}

// One process: the plan of rank 0 = the bytes the trainer's creation took, per category.
static void check_exact(const char *what, ot_train_config c) {
  ot_train_config r = c;
  if (!th_check(ot_train_config_resolve(&r) == OT_OK, "%s: resolve: %s", what, ot_last_error())) return;
  size_t before[OT_MEM_CATEGORY_COUNT];
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) before[k] = ot_mem_current((ot_mem_category)k);
  ot_trainer *t = NULL;
  if (!th_check(ot_trainer_create(&t, &r) == OT_OK, "%s: create: %s", what, ot_last_error())) return;
  ot_rank_memory pm;
  th_check(ot_train_plan_memory(ot_trainer_config(t), 0, &pm) == OT_OK, "%s: plan: %s", what, ot_last_error());
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) {
    const size_t got = ot_mem_current((ot_mem_category)k) - before[k];
    th_check(got == pm.bytes[k], "%s: planned %s %zu bytes = allocated %zu", what,
             ot_mem_category_name((ot_mem_category)k), pm.bytes[k], got);
  }
  ot_trainer_free(t);
}

static void test_exact(void) {
  ot_train_config c = tiny_cfg();
  check_exact("tiny f32", c);
  c.recompute = OT_RECOMPUTE_FULL;
  check_exact("tiny recompute full", c);
  c = tiny_cfg();
  c.dtype = OT_BF16;
  c.recompute = OT_RECOMPUTE_SELECTIVE;
  check_exact("tiny bf16 selective", c);
  c = tiny_cfg();
  c.dtype = OT_F16;
  check_exact("tiny f16", c);
  c = tiny_cfg();
  c.qat = true;
  c.qat_group = 32;
  check_exact("tiny QAT g32 (the fake-quantized copy)", c);
  c = tiny_cfg();
  ot_model_config_preset(&c.model, "llama-tiny");
  c.model.n_layers = 2;
  c.seq_len = 32;
  c.batch_size = 2;
  check_exact("llama-tiny (2 layers)", c);
  // the planner refuses tasks it does not plan, naming them
  c = tiny_cfg();
  c.task = OT_TASK_TRANSLATE;
  ot_rank_memory pm;
  th_check_error(ot_train_plan_memory(&c, 0, &pm), OT_EUNSUPPORTED, "lm task", "plan of a translate task");
  c = tiny_cfg();
  c.data_parallel = 2;
  th_check_error(ot_train_plan_memory(&c, 2, &pm), OT_EINVAL, "rank 2", "rank outside the layout");
}

static ot_machine cpu_machine(void) {
  ot_machine m = {.name = "test-cpu", .shared = true, .cores = 2, .devices_per_host = 2, .hosts = 4,
                  .mem_bytes = 8e9, .gemm_flops = 200e9, .core_gemm_flops = 100e9, .peak_flops = 230e9,
                  .mem_bw = 30e9, .intra_bw = 4e9, .intra_lat = 20e-6, .inter_bw = 125e6, .inter_lat = 1e-3};
  return m;
}

static void test_machine(void) {
  ot_machine m, back;
  th_check(ot_machine_preset("a100-80gb", &m) == OT_OK && ot_machine_validate(&m) == OT_OK,
           "preset a100-80gb valid: %s", ot_last_error());
  th_check(strstr(m.source, "datasheet") != NULL, "the preset states its sources");
  th_check(ot_machine_preset("ascend-910", &m) == OT_OK, "preset ascend-910");
  th_check_error(ot_machine_preset("h100", &m), OT_EINVAL, "a100-80gb, ascend-910", "unknown preset lists them");
  m = cpu_machine();
  m.inter_bw4 = 250e6;
  const char *path = "/tmp/ot_test_plan_machine.conf";
  th_check(ot_machine_write(path, &m) == OT_OK, "machine file written: %s", ot_last_error());
  th_check(ot_machine_read(path, &back) == OT_OK, "machine file read: %s", ot_last_error());
  th_check(back.shared && back.cores == 2 && fabs(back.inter_bw - 125e6) < 1 && fabs(back.core_gemm_flops - 100e9) < 1e3 &&
           fabs(back.inter_bw4 - 250e6) < 1, "machine file round trip");
  FILE *f = fopen(path, "w");
  fprintf(f, "name = bad\nshared = true\ncores = 2\ndevices_per_host = 2\nhosts = 1\nmem_bytes = 1e9\n"
          "gemm_flops = -5\n");
  fclose(f);
  th_check_error(ot_machine_read(path, &back), OT_EFORMAT, "gemm_flops = '-5' is not a non-negative number",
                 "negative rate");
  f = fopen(path, "w");
  fprintf(f, "name = bad\nflops = 5\n");
  fclose(f);
  th_check_error(ot_machine_read(path, &back), OT_EFORMAT, "'flops' is not a machine key", "unknown key");
  f = fopen(path, "w");
  fprintf(f, "name = incomplete\nshared = false\ndevices_per_host = 8\nhosts = 1\n");
  fclose(f);
  th_check_error(ot_machine_read(path, &back), OT_EINVAL, "mem_bytes = 0 must be > 0", "missing fields");
  remove(path);
}

static ot_plan_result eval(const ot_train_config *c, const ot_machine *m, int hosts) {
  ot_plan_result r;
  th_check(ot_plan_eval(c, m, hosts, &r) == OT_OK, "eval: %s", ot_last_error());
  return r;
}

static void test_cost(void) {
  const ot_machine m = cpu_machine();
  ot_train_config c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.seq_len = 64;
  c.batch_size = 4;
  ot_plan_result a = eval(&c, &m, 1);
  th_check(a.fits && a.t_step > 0 && fabs(a.t_step - (a.t_compute + a.t_bubble + a.t_comm + a.t_optim)) < 1e-12 &&
           a.t_bubble == 0 && a.mfu > 0 && a.mfu < 1, "one process: the step is the sum of its parts (%g s, "
           "MFU %.2f), no bubble", a.t_step, a.mfu);
  // a pipeline's bubble shrinks with more micro-batches (same global batch)
  c.pipeline_stages = 2;
  c.grad_accum = 2;
  c.batch_size = 8;
  ot_plan_result p2 = eval(&c, &m, 1);
  c.grad_accum = 8;
  c.batch_size = 2;
  ot_plan_result p8 = eval(&c, &m, 1);
  th_check(p2.fits && p8.fits && p8.t_bubble < p2.t_bubble && p2.t_bubble > 0,
           "pp2: bubble with 8 micro-batches %.4f s < with 2 %.4f s", p8.t_bubble, p2.t_bubble);
  // data parallel across hosts: a slower link costs more; a tensor group across hosts costs
  // more than inside one
  c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.seq_len = 64;
  c.batch_size = 4;
  c.data_parallel = 2;
  ot_machine slow = m;
  slow.inter_bw = m.inter_bw / 10;
  ot_plan_result d1 = eval(&c, &m, 2), d2 = eval(&c, &slow, 2), d0 = eval(&c, &m, 1);
  th_check(d2.t_comm > d1.t_comm && d1.t_comm > d0.t_comm,
           "dp2 gradient all-reduce: 2 hosts at 1/10 the bandwidth %.3f s > 2 hosts %.3f s > one host %.4f s",
           d2.t_comm, d1.t_comm, d0.t_comm);
  // a group of 4 across hosts moves at inter_bw4 where it was measured; a pair at inter_bw
  ot_machine ring4 = m;
  ring4.inter_bw4 = 2.0 * m.inter_bw;
  const ot_plan_result p2m = eval(&c, &m, 2), p2r = eval(&c, &ring4, 2);
  c.data_parallel = 4;
  c.batch_size = 2;
  const ot_plan_result p4m = eval(&c, &m, 2), p4r = eval(&c, &ring4, 2);
  th_check(p2r.t_comm == p2m.t_comm && p4r.t_comm < p4m.t_comm && p4m.t_comm > 0,
           "inter_bw4: dp4 over 2 hosts %.3f s -> %.3f s, dp2 over 2 hosts %.3f s = %.3f s", p4m.t_comm,
           p4r.t_comm, p2m.t_comm, p2r.t_comm);
  c.batch_size = 4;
  c.data_parallel = 2;
  c.tensor_parallel = 2;
  ot_plan_result in = eval(&c, &m, 2);
  // two data-parallel pairs over one link (tp pairs inside the hosts) split it, each at most
  // at a pair's own rate: a link measured to carry 4x a pair's rate leaves each its own
  {
    ot_machine wide = m;
    wide.inter_bw4 = 4.0 * m.inter_bw;
    const ot_plan_result sh = eval(&c, &m, 2), wd = eval(&c, &wide, 2);
    th_check(sh.t_comm > 0 && fabs(wd.t_comm - sh.t_comm / 2) < 0.05 * sh.t_comm,
             "two pairs on a link: %.3f s each at half the pair's rate, %.3f s on a link of 4x its rate",
             sh.t_comm, wd.t_comm);
  }   // 4 ranks, 2 per host: tp pairs inside a host
  c.data_parallel = 1;
  c.pipeline_stages = 1;
  c.tensor_parallel = 2;
  c.batch_size = 8;
  ot_plan_result across = eval(&c, &m, 2);   // one tp pair over 2 hosts
  th_check(in.fits && across.fits && across.t_compute > in.t_compute,
           "tensor parallel across hosts %.3f s > inside hosts %.3f s of compute and its all-reduces",
           across.t_compute, in.t_compute);
  // ZeRO-3 holds less than ZeRO-0 on the fullest rank
  c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.seq_len = 64;
  c.data_parallel = 4;
  c.batch_size = 2;
  ot_plan_result z0 = eval(&c, &m, 2);
  c.optimizer_shard = 3;
  ot_plan_result z3 = eval(&c, &m, 2);
  th_check(z3.mem[OT_MEM_PARAMS] + z3.mem[OT_MEM_GRADS] + z3.mem[OT_MEM_OPTIM] <
               (z0.mem[OT_MEM_PARAMS] + z0.mem[OT_MEM_GRADS] + z0.mem[OT_MEM_OPTIM]) / 2,
           "dp4: ZeRO-3's parameters + gradients + optimizer below half of ZeRO-0's");
  // a layout the engine refuses is reported with its reason, not as an error
  c.optimizer_shard = 0;
  c.tensor_parallel = 3;
  c.data_parallel = 1;
  ot_plan_result bad = eval(&c, &m, 1);
  th_check(!bad.fits && strstr(bad.why, "not divisible") != NULL, "tp3 of 4 heads: does not fit (%s)", bad.why);
}

static void test_search(void) {
  const ot_machine m = cpu_machine();
  ot_train_config c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.seq_len = 64;
  c.global_batch = 16;
  ot_plan_result *r = NULL;
  int n = 0;
  th_check(ot_plan_search(&c, &m, 2, 4, &r, &n) == OT_OK && n > 10, "4 devices on 2 hosts: %d layouts", n);
  bool ranked = true, seen_pp = false, seen_tp = false;
  for (int i = 1; i < n && r[i].fits; i++) ranked &= r[i].tokens_per_s <= r[i - 1].tokens_per_s;
  for (int i = 0; i < n; i++) {
    seen_pp |= r[i].pp > 1;
    seen_tp |= r[i].tp > 1;
  }
  th_check(ranked && seen_pp && seen_tp && r[0].fits, "ranked by tokens/s, tensor and pipeline layouts among them");
  free(r);
  // a model that fits nowhere: every layout listed as not fitting, with the memory it needs
  ot_model_config_preset(&c.model, "gpt2");
  c.seq_len = 256;
  ot_machine small = m;
  small.mem_bytes = 64e6;
  th_check(ot_plan_search(&c, &small, 1, 2, &r, &n) == OT_OK && n > 0 && !r[0].fits &&
           strstr(r[0].why, "GiB per host") != NULL, "gpt2 on 64 MB: nothing fits (%s)", n ? r[0].why : "");
  free(r);
  // impossible device counts
  ot_model_config_preset(&c.model, "small");
  c.seq_len = 64;
  th_check_error(ot_plan_search(&c, &m, 2, 3, &r, &n), OT_EINVAL, "cannot be spread evenly over 2 hosts",
                 "3 devices on 2 hosts");
  th_check_error(ot_plan_search(&c, &m, 9, 9, &r, &n), OT_EINVAL, "9 hosts, but the machine 'test-cpu' has 4",
                 "more hosts than the machine");
  c.global_batch = 1;
  c.model.n_layers = 1;
  th_check_error(ot_plan_search(&c, &m, 1, 7, &r, &n), OT_EINVAL, "no layout of 7 devices", "7 devices, 4 heads, 1 block, 1 row");
  ot_machine gpu;
  ot_machine_preset("a100-80gb", &gpu);
  th_check_error(ot_plan_search(&c, &gpu, 1, 16, &r, &n), OT_EINVAL, "16 per host, but a host of 'a100-80gb' has 8",
                 "16 devices on one 8-GPU host");
}

// dp x tp x pp ranks, M micro-batches of B rows, ZeRO stage z.
static void set_layout(ot_train_config *c, int dp, int tp, int pp, int M, int B, int z) {
  c->data_parallel = dp;
  c->tensor_parallel = tp;
  c->pipeline_stages = pp;
  c->grad_accum = M;
  c->batch_size = B;
  c->optimizer_shard = z;
}

// The seed's 1000B layout and the primer's 34B layouts are evaluated (the engine's own
// plan over 128-layer / 48-layer models, nothing allocated).
static void test_seed_layouts(void) {
  ot_machine gpu;
  ot_machine_preset("ascend-910", &gpu);
  ot_train_config c = tiny_cfg();
  ot_model_config_preset(&c.model, "gpt-1t");
  c.seq_len = 2048;
  set_layout(&c, 8, 16, 8, 32, 1, 1);
  c.grad_buckets = 8;
  ot_plan_result r = eval(&c, &gpu, 128);
  th_check(r.mem_total > 0 && r.t_step > 0 && r.t_bubble > 0, "1000B dp8 tp16 pp8 M32 ZeRO-1 on 128 hosts: "
           "%.1f GiB on the fullest device, step %.1f s (bubble %.1f s), %s", r.mem_total / 1073741824.0,
           r.t_step, r.t_bubble, r.fits ? "fits" : r.why);
  ot_model_config_preset(&c.model, "llama-34b");
  c.seq_len = 4096;
  set_layout(&c, 1, 8, 8, 8, 4, 0);
  ot_machine a100;
  ot_machine_preset("a100-80gb", &a100);
  ot_plan_result before = eval(&c, &a100, 8);
  set_layout(&c, 2, 8, 4, 16, 1, 0);
  ot_plan_result after = eval(&c, &a100, 8);
  th_check(before.t_step > 0 && after.t_step > 0 && after.t_bubble < before.t_bubble,
           "34B: pp8 M8 bubble %.2f s > pp4 M16 bubble %.2f s", before.t_bubble, after.t_bubble);
}

// The balanced split: contiguous, every stage a block, and its slowest stage no slower than
// that of any other split (all splits of 12 blocks in 2 and 3 stages tried; the cost of a
// stage from the same FLOP counts: 12 C^2-ish per block token, the head on the last).
static double split_max(const ot__par_config *pc, const int *cuts, int pp) {
  const ot_model_config *mc = &pc->model;
  const double C = mc->d_model, D = ot_model_head_dim(mc), H = mc->n_heads, F = mc->d_ff, T = pc->run.T;
  const double blk = T * ((3 * H) * D * C + C * H * D + 2 * F * C + H * D * (T + 1));
  const double head = T * C * ot_model_vocab_padded(mc);
  double worst = 0;
  for (int s = 0; s < pp; s++) {
    double c = (cuts[s + 1] - cuts[s]) * blk + (s == pp - 1 ? head : 0);
    if (c > worst) worst = c;
  }
  return worst;
}

static void test_balanced_stages(void) {
  ot__par_config pc;
  memset(&pc, 0, sizeof pc);
  ot_model_config_preset(&pc.model, "gpt2");
  pc.run.B = 4;
  pc.run.T = 256;
  pc.dp = pc.tp = 1;
  pc.micro_batches = 8;
  pc.balanced_stages = true;
  for (int pp = 2; pp <= 3; pp++) {
    pc.pp = pp;
    int cuts[4] = {0}, prev = 0;
    bool ok = true;
    for (int s = 0; s < pp; s++) {
      int l0, l1;
      ot__par_stage_layers(&pc, s, &l0, &l1);
      ok &= l0 == prev && l1 > l0;
      prev = l1;
      cuts[s + 1] = l1;
    }
    ok &= prev == 12;
    th_check(ok, "gpt2 on %d balanced stages: contiguous, each a block, all 12 (cuts %d %d %d)", pp, cuts[1],
             cuts[2], cuts[3]);
    const double got = split_max(&pc, cuts, pp);
    double best = INFINITY;
    int t[4] = {0, 0, 0, 12};
    for (t[1] = 1; t[1] < 12; t[1]++)
      for (t[2] = pp == 3 ? t[1] + 1 : 12; t[2] < 12 || (pp == 2 && t[2] == 12); t[2]++) {
        int u[4] = {0, t[1], pp == 3 ? t[2] : 12, 12};
        const double v = split_max(&pc, u, pp);
        if (v < best) best = v;
        if (pp == 2) break;
      }
    th_check(got <= best * (1 + 1e-12), "gpt2 pp%d: the balanced split's slowest stage %.4g = the best of all "
             "splits %.4g", pp, got, best);
    th_check(cuts[1] > 12 / pp, "gpt2 pp%d: the first stage takes more than 12 / %d blocks (the head weighs "
             "on the last): %d", pp, pp, cuts[1]);
  }
  // one block per stage, and the equal split without the flag
  pc.pp = 12;
  int l0, l1;
  ot__par_stage_layers(&pc, 11, &l0, &l1);
  th_check(l0 == 11 && l1 == 12, "12 stages of 12 blocks: one each");
  pc.pp = 5;
  pc.balanced_stages = false;
  ot__par_stage_layers(&pc, 1, &l0, &l1);
  th_check(l0 == 3 && l1 == 6, "equal split of 12 over 5: stage 1 is [3, 6) (got [%d, %d))", l0, l1);
}

// The bench's model (bench/plan_check.sh: C 384, 6 blocks, V 8192, T 128), B rows per micro-batch.
static ot_train_config bench_cfg(int B) {
  ot_train_config c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.model.d_model = 384;
  c.model.n_layers = 6;
  c.model.n_heads = c.model.n_kv_heads = 6;
  c.model.d_ff = 1536;
  c.model.max_seq = 128;
  c.seq_len = 128;
  c.batch_size = B;
  return c;
}

static ot_plan_scratch scratch_of(const ot_train_config *c, int rank) {
  ot_plan_scratch s;
  memset(&s, 0, sizeof s);
  th_check(ot_plan_scratch_of(c, rank, &s) == OT_OK, "scratch of rank %d: %s", rank, ot_last_error());
  th_check(s.total == s.ops + s.gemm + s.choice, "rank %d: the scratch is the sum of its parts", rank);
  return s;
}

// The fullest rank of ot_plan_eval = the largest plan + its stage's scratch + the loaders.
static void check_fullest(const char *what, ot_train_config c, const ot_machine *m) {
  ot_plan_result r = eval(&c, m, 1);
  if (!th_check(ot_train_config_resolve(&c) == OT_OK, "%s: resolve", what)) return;
  const size_t loaders = ((size_t)c.batch_size * c.grad_accum * c.data_parallel + (size_t)c.batch_size) *
                         ((size_t)c.seq_len + 1) * sizeof(int32_t);
  size_t best = 0;
  int at = -1;
  for (int st = 0; st < c.pipeline_stages; st++) {
    const int rank = st * c.data_parallel * c.tensor_parallel;
    ot_rank_memory pm;
    if (!th_check(ot_train_plan_memory(&c, rank, &pm) == OT_OK, "%s: plan", what)) return;
    size_t tot = scratch_of(&c, rank).total + loaders;
    for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) tot += pm.bytes[k];
    if (tot > best) { best = tot; at = rank; }
  }
  th_check(r.mem_total == best && r.mem_rank == at, "%s: the fullest rank %d, %zu bytes = rank %d's plan + its "
           "stage's scratch + the loaders, %zu", what, r.mem_rank, r.mem_total, at, best);
}

static void test_scratch(void) {
  const ot_machine m = cpu_machine();
  ot__gemm_impl_set_mode(-1);        // OT_GEMM=auto
  ot__gemm_pick_set_min_flops(0);    // its threshold: 1 GFLOP
  // pp2, 4 rows x 128 per micro-batch: every block GEMM below 1 GFLOP (the MLP's 2 x 512 x 1536
  // x 384 = 0.6), the head's 3.2 above: stage 0 never takes the GEMMs' block nor the slice
  ot_train_config c = bench_cfg(4);
  c.grad_accum = 4;
  c.pipeline_stages = 2;
  ot_train_config r = c;
  th_check(ot_train_config_resolve(&r) == OT_OK, "resolve pp2: %s", ot_last_error());
  ot_plan_scratch s0 = scratch_of(&r, 0), s1 = scratch_of(&r, 1);
  th_check(s0.gemm == 0 && s0.choice == 0 && s0.ops > 0, "pp2 auto, stage 0 (blocks only): no GEMM block "
           "(%zu), no measurement slice (%zu)", s0.gemm, s0.choice);
  th_check(s1.gemm >= 4096 && (s1.gemm & (s1.gemm - 1)) == 0 && s1.choice == ((size_t)8 << 20) + 64,
           "pp2 auto, stage 1 (the head): the GEMM block %zu (a slot's power of two), the head's slice of C "
           "cut to 8 MiB (%zu)", s1.gemm, s1.choice);
  th_check(ot_gemm_may_measure(2.0 * 512 * 8192 * 384) && !ot_gemm_may_measure(2.0 * 512 * 1536 * 384),
           "auto: the head measured, the MLP not");
  check_fullest("pp2 auto", c, &m);
  // a lower threshold measures the blocks too: stage 0's largest slice is the MLP up
  // projection's whole C [512, 1536] f32
  ot__gemm_pick_set_min_flops(1e8);
  s0 = scratch_of(&r, 0);
  th_check(s0.gemm > 0 && s0.choice == (size_t)512 * 1536 * 4 + 64, "pp2, threshold 0.1 GFLOP: stage 0 "
           "takes the GEMM block (%zu) and the MLP's slice (%zu)", s0.gemm, s0.choice);
  ot__gemm_pick_set_min_flops(0);
  // balanced stages, dp2 x pp2, tp2 x pp2: every pipeline stage its own scratch
  c.balanced_stages = true;
  check_fullest("pp2 balanced", c, &m);
  c.balanced_stages = false;
  c.data_parallel = 2;
  c.grad_accum = 2;
  check_fullest("dp2 pp2", c, &m);
  c.data_parallel = 1;
  c.tensor_parallel = 2;
  check_fullest("tp2 pp2", c, &m);
  // OT_GEMM=own: every stage takes the block, nothing is measured; =onednn: neither
  ot__gemm_impl_set_mode(1);
  s0 = scratch_of(&r, 0);
  s1 = scratch_of(&r, 1);
  th_check(s0.gemm > 0 && s1.gemm >= s0.gemm && s0.choice == 0 && s1.choice == 0,
           "OT_GEMM=own: both stages take the GEMM block (%zu, %zu), no slice", s0.gemm, s1.gemm);
  ot__gemm_impl_set_mode(0);
  s0 = scratch_of(&r, 0);
  s1 = scratch_of(&r, 1);
  th_check(s0.gemm + s0.choice + s1.gemm + s1.choice == 0 && !ot_gemm_may_measure(1e12),
           "OT_GEMM=onednn: no GEMM block, no slice");
  // ZeRO-3 dp2: the head's GEMMs a chunk of 2730 rows at a time (C [1024, 2730] f32: cut to
  // 8 MiB); ZeRO-2: the forward whole
  c = bench_cfg(8);
  c.data_parallel = 2;
  c.optimizer_shard = 3;
  ot__gemm_impl_set_mode(-1);
  r = c;
  th_check(ot_train_config_resolve(&r) == OT_OK, "resolve z3: %s", ot_last_error());
  s0 = scratch_of(&r, 0);
  th_check(s0.gemm > 0 && s0.choice == ((size_t)8 << 20) + 64, "dp2 ZeRO-3: the chunked head measured (%zu)",
           s0.choice);
  check_fullest("dp2 ZeRO-3", c, &m);

  // the engine (one process, the small preset, 2 x 32 rows): the GEMM block its step takes
  // is the planner's. OT_GEMM=own runs every GEMM on the own GEMM: the block exactly; auto
  // measures none of these shapes (the head's 2 x 64 x 8192 x 256 = 0.27 GFLOP): no own block
  // (at most oneDNN's scratchpad, below it)
  c = tiny_cfg();
  ot_model_config_preset(&c.model, "small");
  c.batch_size = 2;
  c.seq_len = 32;
  r = c;
  th_check(ot_train_config_resolve(&r) == OT_OK, "resolve small: %s", ot_last_error());
  int32_t rows[2 * 33];
  for (int i = 0; i < 2 * 33; i++) rows[i] = (i * 37 + 11) % 8192;
  size_t own_block = 0;
  for (int mode = 1; mode >= -1; mode -= 2) {
    ot__gemm_impl_set_mode(mode);
    const ot_plan_scratch p = scratch_of(&r, 0);
    ot_trainer *t = NULL;
    if (!th_check(ot_trainer_create(&t, &r) == OT_OK, "create small: %s", ot_last_error())) break;
    ot_scratch_release();   // this thread's blocks from nothing
    ot_step_info info;
    th_check(ot_trainer_step_on(t, rows, &info) == OT_OK, "step: %s", ot_last_error());
    const size_t got = ot_scratch_slot_bytes(OT_SCRATCH_GEMM);
    if (mode == 1) {
      own_block = p.gemm;
      th_check(got == p.gemm && p.gemm > 0 && p.choice == 0, "OT_GEMM=own: the step's GEMM block %zu = planned %zu",
               got, p.gemm);
    } else {
      th_check(p.gemm == 0 && p.choice == 0 && got < own_block, "OT_GEMM=auto, nothing measured: planned no GEMM "
               "block (%zu), the step's %zu (oneDNN's scratchpad) below the own GEMM's %zu", p.gemm, got, own_block);
    }
    ot_trainer_free(t);
  }
  ot_scratch_release();
  ot__gemm_impl_set_mode(-2);   // back to the environment's choice
}

int main(void) {
  test_exact();
  test_machine();
  test_cost();
  test_search();
  test_seed_layouts();
  test_balanced_stages();
  test_scratch();
  return th_finish();
}
