// Parallel training equals one process. Run under mpirun with 2, 4 or 8
// ranks (CTest does: tests/CMakeLists section "MPI tests"), every layout of
// that world size is trained for 5 steps on the same global batches as a
// one-process reference computed before MPI starts, in variants (ZeRO-1,
// recompute, vocab-parallel, more micro-batches than stages, GPipe, no
// overlap, bf16, f16 with the loss scaler, a Llama-style model); losses must match
// to 1e-5 (f32; bf16 2e-2, f16 2e-3 relative) and
// the final weights (gathered through a checkpoint) to 1e-5 normalized error.
// Also: resume in another layout, invalid layouts and their messages, the
// ZeRO-1 optimizer memory and 1F1B vs GPipe activation memory, the refusal
// of a parallel save of a non-finite state.
//   mpirun -np N mpi_parallel [CKPT_OUT]   (N = 8 writes a step-3 checkpoint to CKPT_OUT)
//   mpi_parallel --resume CKPT            (one process: resume it, compare steps 4-5)
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
#include "harness.h"
#include "ot/ot.h"
#include "ot/dist.h"

#define STEPS 5
#define ROWS 8        // global batch rows
#define T 16

typedef struct {
  ot_train_config c;            // the one-process config of the family
  double loss[STEPS];
  ot_model *m;                  // reference final weights (whole model)
  ot_trainer *t;
} ref_run;

static int32_t g_rows[STEPS][ROWS * (T + 1)];

static void make_rows(int V) {
  th_rng r = {77};
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < ROWS; i++) {
      int32_t *row = g_rows[s] + i * (T + 1);
      for (int j = 0; j <= T; j++) row[j] = (int32_t)(th_next(&r) % (uint64_t)V);
      if (i % 3 == 1) row[T] = -1;   // an ignored target: the loss counts the others
    }
}

// Family 'a': GPT-2 style, tied, biases, vocabulary 61 unpadded (tp does not divide it).
// Family 'b': Llama style, untied, RMSNorm, SwiGLU, RoPE, GQA (4 heads, 2 kv-heads).
static ot_train_config family(char f) {
  ot_train_config c;
  ot_train_config_default(&c);
  ot_model_config_preset(&c.model, "tiny");
  c.model.vocab = 61;
  c.model.vocab_pad = 1;
  c.model.n_layers = 2;
  if (f == 'b') {
    c.model.names = OT_NAMES_LLAMA;
    c.model.norm = OT_NORM_RMSNORM;
    c.model.mlp = OT_MLP_SWIGLU;
    c.model.pos = OT_POS_ROPE;
    c.model.n_kv_heads = 2;
    c.model.d_ff = 64;
    c.model.tied = false;
    c.model.bias = false;
  }
  c.data[0] = 0;
  c.out[0] = 0;
  c.batch_size = ROWS;
  c.seq_len = T;
  c.steps = STEPS;
  c.lr = 1e-2f;
  c.warmup = 1;
  c.quiet = true;
  c.measure_peak = false;
  c.threads = 1;
  return c;
}

static void reference(ref_run *r, char f) {
  r->c = family(f);
  th_check(ot_trainer_create(&r->t, &r->c) == OT_OK, "reference trainer: %s", ot_last_error());
  for (int s = 0; s < STEPS; s++) {
    ot_step_info st;
    th_check(ot_trainer_step_on(r->t, g_rows[s], &st) == OT_OK, "reference step: %s", ot_last_error());
    r->loss[s] = st.loss;
  }
  r->m = ot_trainer_model(r->t);
}

static int g_rank, g_world;
static char g_tmp[256];

// Normalized error of a checkpoint's weights against the reference model over
// all tensors together (per tensor it is meaningless for the key bias: its
// true gradient is 0, so AdamW turns float noise into +-lr steps), and the
// largest absolute difference (*maxabs).
static double weights_err(const char *dir, ot_model *ref, double *maxabs) {
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ot_st_file *f = NULL;
  *maxabs = INFINITY;
  if (ot_st_open(&f, path) != OT_OK) return INFINITY;
  double num = 0, den = 0, mx = 0;
  for (int i = 0; i < ot_model_hf_count(ref); i++) {
    const ot_hf_tensor *h = ot_model_hf_at(ref, i);
    const ot_st_tensor *x = ot_st_find(f, h->name);
    size_t n = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
    if (!x || x->dtype != OT_F32 || x->nbytes != n * 4) { num = INFINITY; break; }
    float *want = th_falloc(n);
    ot_model_hf_get(ref, i, ot_model_params(ref), want);
    const float *got = x->data;
    for (size_t j = 0; j < n; j++) {
      double d = (double)got[j] - want[j];
      num += d * d;
      den += (double)want[j] * want[j];
      if (!(fabs(d) <= mx)) mx = fabs(d);
    }
    free(want);
  }
  ot_st_close(f);
  *maxabs = mx;
  return sqrt(num) / fmax(sqrt(den), 1e-30);
}

typedef struct {
  const char *name;
  char fam;
  int dp, tp, pp, M;
  int zero;
  ot_recompute rc;
  bool vp, gpipe, no_overlap, bf16;
  bool f16;   // fp16 with the dynamic loss scaler (takes precedence over bf16)
} variant;

static ot_train_config config_of(const variant *v) {
  ot_train_config c = family(v->fam);
  c.data_parallel = v->dp;
  c.tensor_parallel = v->tp;
  c.pipeline_stages = v->pp;
  c.grad_accum = v->M;
  c.batch_size = ROWS / (v->dp * v->M);
  c.optimizer_shard = v->zero;
  c.recompute = v->rc;
  c.vocab_parallel = v->vp;
  c.gpipe = v->gpipe;
  c.overlap = !v->no_overlap;
  c.zero_prefetch = !v->no_overlap;   // ZeRO-3 variants: no_overlap also gathers without prefetch
  c.grad_buckets = v->no_overlap ? 1 : 3;
  c.dtype = v->f16 ? OT_F16 : v->bf16 ? OT_BF16 : OT_F32;
  c.comm_timeout = 120;
  return c;
}

// The memory plan of this rank (ot_train_plan_memory) equals what creating the trainer
// allocated, category by category, to the byte, and the most it held at once (the peak
// reset before the creation) its create_peak (ZeRO-3: the whole initial weights).
static void check_plan(const char *name, const ot_train_config *resolved, const size_t *before) {
  ot_rank_memory pm;
  if (!th_check(ot_train_plan_memory(resolved, g_rank, &pm) == OT_OK, "%s: plan: %s", name, ot_last_error()))
    return;
  size_t held = 0;
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) {
    const size_t got = ot_mem_current((ot_mem_category)k) - before[k];
    held += before[k];
    th_check(got == pm.bytes[k], "%s rank %d: planned %s %zu bytes = allocated %zu", name, g_rank,
             ot_mem_category_name((ot_mem_category)k), pm.bytes[k], got);
  }
  th_check(ot_mem_peak_total() - held == pm.create_peak, "%s rank %d: the creation's peak %zu bytes = planned %zu",
           name, g_rank, ot_mem_peak_total() - held, pm.create_peak);
}

// Trains variant v for steps [from, to) (resuming from `resume` when set) and
// checks the losses; saves to `save` (when set) at the end.
static void run_variant(const variant *v, const ref_run *ref, int from, int to, const char *resume,
                        const char *save) {
  ot_train_config c = config_of(v);
  ot_trainer *t = NULL;
  size_t before[OT_MEM_CATEGORY_COUNT];
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) before[k] = ot_mem_current((ot_mem_category)k);
  ot_mem_reset_peak();
  if (!th_check(ot_trainer_create(&t, &c) == OT_OK, "%s: create: %s", v->name, ot_last_error())) return;
  check_plan(v->name, ot_trainer_config(t), before);
  if (resume) th_check(ot_trainer_load(t, resume, false) == OT_OK, "%s: load: %s", v->name, ot_last_error());
  double worst = 0;
  for (int s = from; s < to; s++) {
    ot_step_info st;
    if (!th_check(ot_trainer_step_on(t, g_rows[s], &st) == OT_OK, "%s: step %d: %s", v->name, s + 1,
                  ot_last_error()))
      break;
    double e = fabs(st.loss - ref->loss[s]) / fabs(ref->loss[s]);
    if (e > worst) worst = e;
  }
  const double tol = v->f16 ? 2e-3 : v->bf16 ? 2e-2 : 1e-5;
  th_check(worst <= tol, "%s: steps %d-%d losses equal the one-process run (worst relative "
           "difference %.2e, limit %.0e)", v->name, from + 1, to, worst, tol);
  if (save) th_check(ot_trainer_save(t, save) == OT_OK, "%s: save: %s", v->name, ot_last_error());
  ot_trainer_free(t);
}

// Full variant: 5 steps, then the gathered weights against the reference.
static void check_variant(const variant *v, const ref_run *ref) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/%s", g_tmp, v->name);
  run_variant(v, ref, 0, STEPS, NULL, v->bf16 || v->f16 ? NULL : dir);
  if (v->bf16 || v->f16) return;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    double mx, e = weights_err(dir, ref->m, &mx);
    th_check(e <= 1e-5 && mx <= 1e-4, "%s: final weights equal the one-process run (normalized "
             "error %.2e, largest difference %.2e)", v->name, e, mx);
  }
}

static void check_invalid(void) {
  ot_trainer *t = NULL;
  ot_train_config c = family('a');
  c.data_parallel = 2; c.tensor_parallel = 2; c.batch_size = 4;   // 4 ranks wanted
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "4 processes, but 2 were started", "dp2 x tp2 on 2 ranks");
  c = family('a'); c.tensor_parallel = 2;
  c.model.d_model = 30; c.model.n_heads = 3; c.model.n_kv_heads = 3;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "--heads 3 is not divisible by --tensor-parallel 2", "heads % tp");
  c = family('b'); c.tensor_parallel = 2; c.model.n_kv_heads = 1;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "--kv-heads 1 is not divisible by --tensor-parallel 2", "kv-heads % tp");
  c = family('a'); c.tensor_parallel = 2; c.model.d_ff = 129;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "--d-ff 129 is not divisible by --tensor-parallel 2", "d_ff % tp");
  c = family('a'); c.pipeline_stages = 2; c.grad_accum = 2; c.batch_size = 4; c.model.n_layers = 1;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "--layers 1 is below --pipeline-stages 2", "layers < stages");
  c = family('a'); c.pipeline_stages = 2; c.grad_accum = 1;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "micro-batches) 1 is below --pipeline-stages 2", "micro-batches < stages");
  c = family('a'); c.data_parallel = 2; c.batch_size = 4; c.global_batch = 12;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "--global-batch 12 is not a multiple of --batch-size 4 x --data-parallel 2", "batch % dp");
  c = family('a'); c.data_parallel = 2; c.batch_size = 4; c.optimizer_shard = 4;
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "ZeRO stages 0, 1, 2 and 3", "ZeRO stage 4");
  c = family('a'); c.data_parallel = 4; c.batch_size = 2; c.optimizer_shard = 3;   // 4 ranks wanted
  th_check_error(ot_trainer_create(&t, &c), OT_EINVAL, "4 processes, but 2 were started", "ZeRO-3 dp4 on 2 ranks");
}

// Optimizer memory / dp under ZeRO-1; activations of stage 0: 1F1B < GPipe.
static void check_memory(void) {
  variant z0 = {"mem-z0", 'a', 2, 1, 1, 1, 0, OT_RECOMPUTE_NONE, false, false, false, false};
  variant z1 = z0;
  z1.zero = 1;
  size_t o[2];
  for (int k = 0; k < 2; k++) {
    ot_train_config c = config_of(k ? &z1 : &z0);
    size_t before = ot_mem_current(OT_MEM_OPTIM);
    ot_trainer *t = NULL;
    th_check(ot_trainer_create(&t, &c) == OT_OK, "memory: create: %s", ot_last_error());
    o[k] = ot_mem_current(OT_MEM_OPTIM) - before;
    ot_trainer_free(t);
  }
  double ratio = (double)o[1] / (double)o[0];
  th_check(fabs(ratio - 0.5) <= 0.005, "ZeRO-1 on dp2: optimizer state %zu bytes = %.4f x ZeRO-0's %zu "
           "(formula 1/dp = 0.5, within 1%%)", o[1], ratio, o[0]);
  // ZeRO-2: gradients = the shard (n / dp) + staging: 3 x the largest unit (a block
  // matrix and what follows it up to the next one), one chunk of embedding / head rows,
  // the small globals
  variant z2 = z0;
  z2.zero = 2;
  size_t gr[2];
  size_t nf = 0, stage = 0, glob = 0, unit = 0, chunk = 0;
  for (int k = 0; k < 2; k++) {
    ot_train_config c = config_of(k ? &z2 : &z0);
    size_t before = ot_mem_current(OT_MEM_GRADS);
    ot_trainer *t = NULL;
    th_check(ot_trainer_create(&t, &c) == OT_OK, "memory: create: %s", ot_last_error());
    gr[k] = ot_mem_current(OT_MEM_GRADS) - before;
    ot_model *m = ot_trainer_model(t);
    nf = ot_model_n_floats(m);
    if (k) {   // the formula from the layout
      size_t u = 0;
      for (int i = 0; i < ot_model_param_count(m); i++) {
        const ot_param *q = ot_model_param_at(m, i);
        size_t a = (q->numel + 15) & ~(size_t)15;
        if (q->layer < 0) {
          if (q->kind == OT_PT_EMBED || q->kind == OT_PT_LM_HEAD) {
            size_t rows = (size_t)(1 << 20) / (size_t)q->shape[1];
            chunk = (rows < (size_t)q->shape[0] ? rows : (size_t)q->shape[0]) * (size_t)q->shape[1];
          } else {
            glob += a;
          }
          continue;
        }
        if (q->kind == OT_PT_MATRIX || q->kind == OT_PT_MATRIX_RES) u = 0;   // a unit starts
        u += a;
        if (u > unit) unit = u;
      }
      stage = glob + 3 * unit + chunk;
    }
    ot_trainer_free(t);
  }
  const double want = 4.0 * ((double)((nf / 2 + 15) & ~(size_t)15) + (double)stage);
  th_check(fabs((double)gr[1] / want - 1) <= 0.01, "ZeRO-2 on dp2: gradients %zu bytes vs the formula "
           "4 x (n/dp + staging) = %.0f (n = %zu floats, staging %zu = 3 x unit %zu + chunk %zu + "
           "globals %zu; ZeRO-0 keeps %zu bytes)", gr[1], want, nf, stage, unit, chunk, glob, gr[0]);
  if (g_rank == 0)
    printf("ZeRO-2 on dp2: gradients %.3f MB = %.4f x the formula; n/dp alone %.3f MB; ZeRO-0 %.3f MB\n",
           gr[1] / 1e6, gr[1] / want, 4.0 * nf / 2 / 1e6, gr[0] / 1e6);
  // ZeRO-3: parameters + gradients + optimizer state = 16 n / dp bytes, plus the working
  // set: the stored global tensors (not the vocabulary ones) and two block slots (f32
  // weights), one chunk of vocabulary rows (f32 + 16-bit) and ZeRO-2's gradient staging
  {
    variant z3 = z0;
    z3.zero = 3;
    ot_train_config c = config_of(&z3);
    const size_t b[3] = {ot_mem_current(OT_MEM_PARAMS), ot_mem_current(OT_MEM_GRADS), ot_mem_current(OT_MEM_OPTIM)};
    ot_trainer *t = NULL;
    th_check(ot_trainer_create(&t, &c) == OT_OK, "memory: create ZeRO-3: %s", ot_last_error());
    const size_t got = ot_mem_current(OT_MEM_PARAMS) - b[0] + ot_mem_current(OT_MEM_GRADS) - b[1] +
                       ot_mem_current(OT_MEM_OPTIM) - b[2];
    ot_model *m = ot_trainer_model(t);
    size_t k0, k1, blk = 0, globals = 0;
    for (int i = 0; i < ot_model_param_count(m); i++) {   // the stored global tensors
      const ot_param *q = ot_model_param_at(m, i);
      if (q->layer < 0 && ot_model_param_stored(m, i)) globals += (q->numel + 15) & ~(size_t)15;
    }
    for (int l = 0; l < c.model.n_layers; l++) {
      ot_model_block_range(m, l, &k0, &k1);
      if (k1 - k0 > blk) blk = k1 - k0;
    }
    const double shard = (double)((nf / 2 + 15) & ~(size_t)15);
    const double want = 16.0 * shard + 4.0 * (double)(globals + 2 * blk) + 6.0 * (double)chunk +
                        4.0 * (double)stage;
    th_check(fabs((double)got / want - 1) <= 0.01, "ZeRO-3 on dp2: parameters + gradients + optimizer "
             "%zu bytes vs the formula 16 n/dp + 4 (stored globals + 2 blocks) + 6 vocabulary-row "
             "chunk + 4 staging = %.0f (n %zu, globals %zu, block %zu, chunk %zu, staging %zu floats)",
             got, want, nf, globals, blk, chunk, stage);
    if (g_rank == 0)
      printf("ZeRO-3 on dp2: params+grads+optim %.3f MB = %.4f x the formula (16 n/dp alone %.3f MB)\n",
             got / 1e6, got / want, 16.0 * shard / 1e6);
    ot_trainer_free(t);
  }
  variant f1 = {"mem-1f1b", 'a', 1, 1, 2, 4, 0, OT_RECOMPUTE_NONE, false, false, false, false};
  variant gp = f1;
  gp.gpipe = true;
  size_t a[2];
  for (int k = 0; k < 2; k++) {
    ot_train_config c = config_of(k ? &gp : &f1);
    size_t before = ot_mem_current(OT_MEM_ACTIVATIONS);
    ot_trainer *t = NULL;
    th_check(ot_trainer_create(&t, &c) == OT_OK, "memory: create: %s", ot_last_error());
    a[k] = ot_mem_current(OT_MEM_ACTIVATIONS) - before;
    ot_trainer_free(t);
  }
  if (g_rank == 0)   // stage 0 holds 2 micro-batches under 1F1B, 4 under GPipe
    th_check(2 * a[0] == a[1], "pp2 x 4 micro-batches, stage 0 activations: 1F1B %zu bytes, GPipe "
             "%zu bytes (half)", a[0], a[1]);
}

// A parallel save (dp2, ZeRO-1) of a state with a NaN weight fails on every
// rank, rank 0 naming the tensor, and leaves nothing; made finite, it saves.
static void check_nonfinite_save(void) {
  variant v = {"nan", 'a', 2, 1, 1, 1, 1, OT_RECOMPUTE_NONE, false, false, false, false};
  ot_train_config c = config_of(&v);
  ot_trainer *t = NULL;
  if (!th_check(ot_trainer_create(&t, &c) == OT_OK, "nan: create: %s", ot_last_error())) return;
  ot_step_info st;
  th_check(ot_trainer_step_on(t, g_rows[0], &st) == OT_OK, "nan: step: %s", ot_last_error());
  ot_model *m = ot_trainer_model(t);
  const int i = ot_model_param_find(m, "h.1.mlp.c_proj.weight");
  if (!th_check(i >= 0, "nan: parameter h.1.mlp.c_proj.weight")) { ot_trainer_free(t); return; }
  float *w = ot_model_params(m) + ot_model_param_at(m, i)->offset, keep = w[3];
  w[3] = NAN;   // on every rank (the weights are replicated over data-parallel ranks)
  char dir[300], tmp[320];
  snprintf(dir, sizeof dir, "%s/nan_ckpt", g_tmp);
  snprintf(tmp, sizeof tmp, "%s/.nan_ckpt.tmp", g_tmp);
  ot_status s = ot_trainer_save(t, dir);
  if (g_rank == 0) th_check_error(s, OT_EINVAL, "h.1.mlp.c_proj.weight", "parallel save of a NaN weight");
  else th_check(s != OT_OK, "rank %d: the parallel save of a NaN weight fails too", g_rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) th_check(access(dir, F_OK) != 0 && access(tmp, F_OK) != 0, "nothing written for it");
  w[3] = keep;
  th_check(ot_trainer_save(t, dir) == OT_OK, "rank %d: the finite state saves: %s", g_rank, ot_last_error());
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    snprintf(tmp, sizeof tmp, "%s/nan_ckpt/optimizer.safetensors", g_tmp);
    th_check(access(tmp, F_OK) == 0, "the parallel checkpoint is in place");
  }
  ot_trainer_free(t);
}

static int resume_single(const char *dir) {
  make_rows(61);
  ref_run ref;
  reference(&ref, 'a');
  ot_train_config c = family('a');
  ot_trainer *t = NULL;
  th_check(ot_trainer_create(&t, &c) == OT_OK, "one-process trainer: %s", ot_last_error());
  th_check(ot_trainer_load(t, dir, false) == OT_OK, "load %s: %s", dir, ot_last_error());
  th_check(ot_trainer_steps_done(t) == 3, "the checkpoint is at step 3 (%lld)", (long long)ot_trainer_steps_done(t));
  double worst = 0;
  for (int s = 3; s < STEPS; s++) {
    ot_step_info st;
    th_check(ot_trainer_step_on(t, g_rows[s], &st) == OT_OK, "step: %s", ot_last_error());
    double e = fabs(st.loss - ref.loss[s]) / ref.loss[s];
    if (e > worst) worst = e;
  }
  th_check(worst <= 1e-5, "one process resumed from the dp2 x tp2 x pp2 checkpoint: steps 4-5 equal "
           "the uninterrupted run (worst relative difference %.2e)", worst);
  ot_trainer_free(t);
  ot_trainer_free(ref.t);
  return th_finish();
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--resume")) return resume_single(argv[2]);
  // the one-process references, before MPI starts (afterwards every trainer is parallel)
  make_rows(61);
  ref_run ra, rb;
  reference(&ra, 'a');
  reference(&rb, 'b');
  if (ot_dist_init(&argc, &argv) != OT_OK || !ot_dist_active()) {
    printf("run me under mpirun (%s)\n", ot_last_error());
    return 1;
  }
  g_rank = ot_dist_world_rank();
  g_world = ot_dist_world_size();
  if (g_rank == 0) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ot_mpi_test_XXXXXX");
    if (!mkdtemp(g_tmp)) g_tmp[0] = 0;
  }
  MPI_Bcast(g_tmp, sizeof g_tmp, MPI_CHAR, 0, MPI_COMM_WORLD);
  // layouts of this world size: (dp, tp, pp)
  // (dp4: ZeRO-3's initial weights outgrow its moments, the creation's peak above the plan)
  int lay[4][3], nl = 0;
  if (g_world == 2) { int l[3][3] = {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}}; memcpy(lay, l, sizeof l); nl = 3; }
  if (g_world == 4) {
    int l[4][3] = {{2, 2, 1}, {2, 1, 2}, {1, 2, 2}, {4, 1, 1}};
    memcpy(lay, l, sizeof l);
    nl = 4;
  }
  if (g_world == 8) { int l[1][3] = {{2, 2, 2}}; memcpy(lay, l, sizeof l); nl = 1; }
  for (int i = 0; i < nl; i++) {
    const int dp = lay[i][0], tp = lay[i][1], pp = lay[i][2], M = pp;
    char nm[24][64];
    variant vs[24];
    int n = 0;
#define V(fam_, M_, zero_, rc_, vp_, gp_, no_, bf_, tag)                                      \
    do {                                                                                       \
      snprintf(nm[n], sizeof nm[n], "dp%d_tp%d_pp%d_%s", dp, tp, pp, tag);                     \
      vs[n] = (variant){nm[n], fam_, dp, tp, pp, M_, zero_, rc_, vp_, gp_, no_, bf_};          \
      n++;                                                                                     \
    } while (0)
    V('a', M, 0, OT_RECOMPUTE_NONE, false, false, false, false, "base");
    V('b', M, 0, OT_RECOMPUTE_NONE, false, false, false, false, "llama");
    if (dp > 1) V('a', M, 1, OT_RECOMPUTE_NONE, false, false, false, false, "zero1");
    if (dp > 1) V('b', M, 1, OT_RECOMPUTE_NONE, false, false, true, false, "zero1_nooverlap");
    if (dp > 1) V('a', M, 2, OT_RECOMPUTE_NONE, tp > 1, false, false, false, "zero2");
    if (dp > 1) V('b', 2 * M, 2, OT_RECOMPUTE_FULL, false, pp > 1, true, false, "zero2_nooverlap");
    if (dp > 1) V('a', M, 3, OT_RECOMPUTE_NONE, tp > 1, false, false, false, "zero3");
    if (dp > 1) V('b', 2 * M, 3, OT_RECOMPUTE_FULL, false, pp > 1, true, false, "zero3_noprefetch");
    if (dp > 1) V('b', M, 3, OT_RECOMPUTE_SELECTIVE, false, false, false, true, "zero3_bf16");
    V('a', M, 0, OT_RECOMPUTE_FULL, false, false, false, false, "recompute_full");
    V('b', M, 0, OT_RECOMPUTE_SELECTIVE, false, false, false, false, "recompute_sel");
    if (tp > 1) V('a', M, 0, OT_RECOMPUTE_NONE, true, false, false, false, "vocab_parallel");
    if (tp > 1) V('b', M, 0, OT_RECOMPUTE_NONE, true, false, false, false, "vocab_parallel_llama");
    if (ROWS % (dp * 2 * M) == 0) V('a', 2 * M, 0, OT_RECOMPUTE_NONE, false, false, false, false, "more_micro");
    if (pp > 1) V('b', 2 * M <= ROWS / dp ? 2 * M : M, 0, OT_RECOMPUTE_NONE, false, true, false, false, "gpipe");
    V('a', M, dp > 1, OT_RECOMPUTE_SELECTIVE, tp > 1, false, false, true, "bf16");
    V('a', M, dp > 1 ? 2 : 0, OT_RECOMPUTE_SELECTIVE, tp > 1, false, false, false, "f16");
    vs[n - 1].f16 = true;
    if (dp > 1) {   // ZeRO-3 with f16 and the loss scaler (the f16 copy of each gathered block)
      V('a', M, 3, OT_RECOMPUTE_NONE, false, false, false, false, "zero3_f16");
      vs[n - 1].f16 = true;
    }
#undef V
    for (int k = 0; k < n; k++) check_variant(&vs[k], vs[k].fam == 'a' ? &ra : &rb);
  }
  // resume in another layout: steps 1-3 in one, 4-5 in the other
  {
    // ZeRO-3's checkpoint (dp2) into pp2; at 8 ranks a ZeRO-1 one into dp4 x pp2 under ZeRO-3
    variant a = {"resume_from", 'a', 2, 1, 1, 1, 3, OT_RECOMPUTE_NONE, false, false, false, false};
    variant b = {"resume_into", 'a', 1, 1, 2, 2, 0, OT_RECOMPUTE_NONE, false, false, false, false};
    if (g_world == 4) {   // ZeRO-0 moments (replicated over dp) into another layout
      a = (variant){"resume_from", 'b', 2, 2, 1, 1, 0, OT_RECOMPUTE_NONE, false, false, false, false};
      b = (variant){"resume_into", 'b', 1, 2, 2, 2, 0, OT_RECOMPUTE_NONE, true, false, false, false};
    }
    if (g_world == 8) {
      a = (variant){"resume_from", 'a', 2, 2, 2, 2, 1, OT_RECOMPUTE_NONE, true, false, false, false};
      b = (variant){"resume_into", 'a', 4, 1, 2, 2, 3, OT_RECOMPUTE_FULL, false, false, false, false};
    }
    char dir[300];
    snprintf(dir, sizeof dir, "%s/resume", g_tmp);
    const char *keep = argc > 1 ? argv[1] : NULL;
    const ref_run *r = a.fam == 'a' ? &ra : &rb;
    run_variant(&a, r, 0, 3, NULL, dir);
    if (keep && g_world == 8) run_variant(&a, r, 0, 3, NULL, keep);   // for the one-process resume test
    MPI_Barrier(MPI_COMM_WORLD);
    run_variant(&b, r, 3, STEPS, dir, NULL);
  }
  if (g_world == 2) {
    check_invalid();
    check_memory();
    check_nonfinite_save();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0 && g_tmp[0]) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", g_tmp);
  }
  ot_trainer_free(ra.t);
  ot_trainer_free(rb.t);
  int rc = th_finish();
  int any = rc;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ot_dist_finalize();
  return any;
}
