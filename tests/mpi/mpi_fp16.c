// fp16 loss scaling in parallel layouts: an inf gradient injected on ONE rank
// (OT_TEST_INF_GRAD="STEP:RANK", in the gradients that rank applies) skips the
// step on EVERY rank (weights and AdamW moments bitwise unchanged, the updates
// counter not advanced, st.overflow everywhere), the scale backs off to the same
// value on every rank, and the next step trains on all of them. Each world rank
// takes its turn as the injected one, in every layout of the world size:
//   mpirun -np 2 mpi_fp16   dp2, dp2 ZeRO-1, dp2 ZeRO-2, tp2, tp2 vocab-parallel, pp2
//   mpirun -np 4 mpi_fp16   dp2 x tp2, dp2 x pp2 (ZeRO-2), tp2 x pp2
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include "harness.h"
#include "ot/ot.h"
#include "ot/dist.h"
#include "train/train_impl.h"

#define T 16
#define V 61

static int g_rank, g_world;

static ot_train_config config(int dp, int tp, int pp, int zero, bool vp) {
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
  c.dtype = OT_F16;
  c.loss_scale_growth_interval = 2;
  c.data_parallel = dp;
  c.tensor_parallel = tp;
  c.pipeline_stages = pp;
  c.optimizer_shard = zero;
  c.vocab_parallel = vp;
  return c;
}

// Whether every rank has the same x (bitwise).
static bool agreed(float x) {
  float lo = x, hi = x;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi && x == lo;
}
// Whether cond holds on every rank.
static bool all(bool cond) {
  int v = cond ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v == 1;
}

static void run_layout(const char *name, int dp, int tp, int pp, int zero, bool vp, int victim) {
  ot_train_config c = config(dp, tp, pp, zero, vp);
  const int nrows = dp * c.grad_accum * c.batch_size;
  int32_t *rows = malloc((size_t)nrows * (T + 1) * sizeof(int32_t));
  th_rng r = {91};
  for (int i = 0; i < nrows * (T + 1); i++) rows[i] = (int32_t)(th_next(&r) % V);
  ot_trainer *t = NULL;
  char what[96];
  snprintf(what, sizeof what, "%s, inf on rank %d", name, victim);
  if (!th_check(all(ot_trainer_create(&t, &c) == OT_OK), "%s: create: %s", what, ot_last_error())) {
    ot_trainer_free(t);
    free(rows);
    return;
  }
  ot_model *m = ot_trainer_model(t);
  ot_step_info st;
  th_check(all(ot_trainer_step_on(t, rows, &st) == OT_OK && !st.skipped && st.loss_scale == 65536.0f),
           "%s: step 1 trains at scale 2^16 (%s)", what, ot_last_error());
  // this rank's weights and moments before the overflow
  size_t s0 = 0, s1 = ot_model_n_floats(m);
  ot__par_shard(t->par, &s0, &s1);
  const size_t n = ot_model_n_floats(m), ns = s1 - s0;
  float *w = th_falloc(n), *m0 = th_falloc(ns), *m1 = th_falloc(ns);
  memcpy(w, ot_model_params(m), n * 4);
  memcpy(m0, ot_trainer_moment(t, 0), ns * 4);
  memcpy(m1, ot_trainer_moment(t, 1), ns * 4);
  char inj[32];
  snprintf(inj, sizeof inj, "2:%d", victim);
  setenv("OT_TEST_INF_GRAD", inj, 1);
  ot_status s = ot_trainer_step_on(t, rows, &st);
  unsetenv("OT_TEST_INF_GRAD");
  th_check(all(s == OT_OK), "%s: step 2: %s", what, ot_last_error());
  th_check(all(st.skipped && st.overflow), "%s: step 2 skipped as an overflow on every rank (here: skipped %d, "
           "overflow %d, loss %g)", what, st.skipped, st.overflow, st.loss);
  th_check(all(!memcmp(w, ot_model_params(m), n * 4) && !memcmp(m0, ot_trainer_moment(t, 0), ns * 4) &&
               !memcmp(m1, ot_trainer_moment(t, 1), ns * 4)),
           "%s: weights and moments unchanged on every rank", what);
  float sc;
  int64_t clean;
  ot_trainer_loss_scale(t, &sc, &clean);
  th_check(agreed(sc) && sc == 32768.0f && all(clean == 0 && ot_trainer_updates(t) == 1),
           "%s: the scale backed off to 32768 on every rank (here %g, %lld updates)", what, sc,
           (long long)ot_trainer_updates(t));
  // two clean steps: trained everywhere, the scale grown back alike
  for (int k = 0; k < 2; k++) {
    s = ot_trainer_step_on(t, rows, &st);
    th_check(all(s == OT_OK && !st.skipped && isfinite(st.loss)), "%s: step %d trains (%s)", what, 3 + k,
             ot_last_error());
  }
  ot_trainer_loss_scale(t, &sc, &clean);
  th_check(agreed(sc) && sc == 65536.0f && all(ot_trainer_updates(t) == 3), "%s: scale %g after two clean steps "
           "(interval 2), equal on every rank", what, sc);
  free(w); free(m0); free(m1);
  ot_trainer_free(t);
  free(rows);
}

int main(int argc, char **argv) {
  if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE")) {
    printf("mpi_fp16: run under mpirun -np 2 or 4\n");
    return th_finish();
  }
  if (!th_check(ot_dist_init(&argc, &argv) == OT_OK && ot_dist_active(), "MPI: %s", ot_last_error()))
    return th_finish();
  g_rank = ot_dist_world_rank();
  g_world = ot_dist_world_size();
  for (int victim = 0; victim < g_world; victim++) {
    if (g_world == 2) {
      run_layout("dp2", 2, 1, 1, 0, false, victim);
      run_layout("dp2 ZeRO-1", 2, 1, 1, 1, false, victim);
      run_layout("dp2 ZeRO-2", 2, 1, 1, 2, false, victim);
      run_layout("tp2", 1, 2, 1, 0, false, victim);
      run_layout("tp2 vocab-parallel", 1, 2, 1, 0, true, victim);
      run_layout("pp2", 1, 1, 2, 0, false, victim);
    } else if (g_world == 4) {
      run_layout("dp2 x tp2", 2, 2, 1, 0, false, victim);
      run_layout("dp2 x pp2 ZeRO-2", 2, 1, 2, 2, false, victim);
      run_layout("tp2 x pp2", 1, 2, 2, 0, false, victim);
    }
  }
  int fails = th_finish();
  int any = fails;
  ot_dist_allreduce_max_int(&any);
  ot_dist_finalize();
  return any;
}
