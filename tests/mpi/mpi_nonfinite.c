// The one rule for non-finite values, in one process and in parallel layouts:
// a step whose global gradient norm is not finite (the loss finite) and a step
// whose loss is not finite both skip the update: weights and AdamW moments
// unchanged (bitwise), the updates counter not advanced, the step counted and
// reported as skipped; the next finite step updates again.
//   mpi_nonfinite                 one process only
//   mpirun -np 2 mpi_nonfinite    one process on each rank, then dp2 (ZeRO 0 and 1), tp2, pp2
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include "harness.h"
#include "ot/ot.h"
#include "ot/dist.h"
#include "train/train_impl.h"

#define T 16
#define V 61

static int g_rank;

static ot_train_config config(int dp, int tp, int pp, int zero) {
  ot_train_config c;
  ot_train_config_default(&c);
  ot_model_config_preset(&c.model, "tiny");
  c.model.vocab = V;
  c.model.vocab_pad = 1;
  c.model.n_layers = 2;
  c.data[0] = 0;
  c.out[0] = 0;
  c.batch_size = 2;
  c.grad_accum = 2;
  c.seq_len = T;
  c.steps = 10;
  c.lr = 1e-2f;
  c.warmup = 1;
  c.quiet = true;
  c.measure_peak = false;
  c.threads = 1;
  c.data_parallel = dp;
  c.tensor_parallel = tp;
  c.pipeline_stages = pp;
  c.optimizer_shard = zero;
  return c;
}

// This rank's weights [n] and moments [s1 - s0] (copies, malloc'd).
typedef struct { float *w, *m0, *m1; size_t n, ns; } snap;

static snap take(ot_trainer *t) {
  snap s;
  ot_model *m = ot_trainer_model(t);
  size_t s0 = 0, s1 = ot_model_n_floats(m);
  if (t->par) ot__par_shard(t->par, &s0, &s1);
  s.n = ot_model_n_floats(m);
  s.ns = s1 - s0;
  s.w = malloc(s.n * sizeof(float) + 1);
  s.m0 = malloc(s.ns * sizeof(float) + 1);
  s.m1 = malloc(s.ns * sizeof(float) + 1);
  memcpy(s.w, ot_model_params(m), s.n * sizeof(float));
  memcpy(s.m0, ot_trainer_moment(t, 0), s.ns * sizeof(float));
  memcpy(s.m1, ot_trainer_moment(t, 1), s.ns * sizeof(float));
  return s;
}

static bool same(ot_trainer *t, const snap *s) {
  ot_model *m = ot_trainer_model(t);
  return !memcmp(s->w, ot_model_params(m), s->n * sizeof(float)) &&
         !memcmp(s->m0, ot_trainer_moment(t, 0), s->ns * sizeof(float)) &&
         !memcmp(s->m1, ot_trainer_moment(t, 1), s->ns * sizeof(float));
}

static void drop(snap *s) {
  free(s->w);
  free(s->m0);
  free(s->m1);
}

static void run_layout(const char *name, int dp, int tp, int pp, int zero) {
  ot_train_config c = config(dp, tp, pp, zero);
  const int nrows = dp * c.grad_accum * c.batch_size;
  int32_t *rows = malloc((size_t)nrows * (T + 1) * sizeof(int32_t));
  th_rng r = {91};
  for (int i = 0; i < nrows * (T + 1); i++) rows[i] = (int32_t)(th_next(&r) % V);
  ot_trainer *t = NULL;
  if (!th_check(ot_trainer_create(&t, &c) == OT_OK, "%s: create: %s", name, ot_last_error())) {
    free(rows);
    return;
  }
  ot_model *m = ot_trainer_model(t);
  ot_step_info st;
  // a finite step: the moments are no longer zero
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK && !st.skipped && ot_trainer_updates(t) == 1,
           "%s: first step: %s", name, ot_last_error());

  // 1. finite loss, non-finite gradient norm: an infinite gradient on world rank 0
  //    (an element it counts in the norm; reduced to its replicas)
  snap s = take(t);
  float *g = ot_model_grads(m);
  if (g_rank == 0) g[ot_model_param_at(m, 0)->offset] = INFINITY;
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK, "%s: step with an infinite gradient: %s", name,
           ot_last_error());
  th_check(st.skipped && isfinite(st.loss) && !isfinite(st.grad_norm) && isnan(st.clip),
           "%s: infinite gradient norm: skipped %d, loss %g, norm %g, clip %g", name, st.skipped,
           st.loss, st.grad_norm, (double)st.clip);
  th_check(same(t, &s), "%s: infinite gradient norm: weights or moments changed", name);
  th_check(ot_trainer_updates(t) == 1 && ot_trainer_steps_done(t) == 2 && st.step == 2,
           "%s: infinite gradient norm: updates %lld, steps %lld", name,
           (long long)ot_trainer_updates(t), (long long)ot_trainer_steps_done(t));
  drop(&s);
  // the gradients were cleared: the next step updates
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK && !st.skipped && isfinite(st.grad_norm) &&
               ot_trainer_updates(t) == 2,
           "%s: step after the skipped one: skipped %d, norm %g", name, st.skipped, st.grad_norm);

  // 2. non-finite loss: the first parameter (every rank's) is NaN
  const ot_param *q = ot_model_param_at(m, 0);
  float *w = ot_model_params(m);
  for (size_t i = 0; i < q->numel; i++) w[q->offset + i] = NAN;
  s = take(t);
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK, "%s: step with a NaN weight: %s", name,
           ot_last_error());
  th_check(st.skipped && !isfinite(st.loss) && isnan(st.clip),
           "%s: non-finite loss: skipped %d, loss %g, clip %g", name, st.skipped, st.loss,
           (double)st.clip);
  th_check(same(t, &s), "%s: non-finite loss: weights or moments changed", name);
  th_check(ot_trainer_updates(t) == 2 && ot_trainer_steps_done(t) == 4,
           "%s: non-finite loss: updates %lld, steps %lld", name, (long long)ot_trainer_updates(t),
           (long long)ot_trainer_steps_done(t));
  drop(&s);
  ot_trainer_free(t);
  free(rows);
}

int main(int argc, char **argv) {
  run_layout("one process", 1, 1, 1, 0);   // before MPI starts (afterwards every trainer is parallel)
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
    if (!th_check(ot_dist_init(&argc, &argv) == OT_OK && ot_dist_active(), "MPI: %s", ot_last_error()))
      return th_finish();
    g_rank = ot_dist_world_rank();
    if (ot_dist_world_size() == 2) {
      run_layout("dp2", 2, 1, 1, 0);
      run_layout("dp2 ZeRO-1", 2, 1, 1, 1);
      run_layout("tp2", 1, 2, 1, 0);
      run_layout("pp2", 1, 1, 2, 0);
    }
    int fails = th_finish();
    int any = fails;
    ot_dist_allreduce_max_int(&any);
    ot_dist_finalize();
    return any;
  }
  return th_finish();
}
