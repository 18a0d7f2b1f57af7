// Parallel training throughput: run under mpirun with one OpenMP thread per
// rank (bench/parallel.sh runs the whole table). Prints, for the layout given
// by the flags, tokens/s and the share of step time the main thread spent
// blocked in communication (medians over the timed steps), plus the measured
// all-reduce bandwidth of this MPI so the communication cost can be read
// next to the compute cost.
//   mpirun -np N bench_parallel [--dp D --tp T --pp P] [--micro M] [--rows R]
//                               [--model small] [--steps S] [--zero Z] [--no-overlap]
//                               [--memory]   (per-rank gradient / optimizer memory only)
#include <mpi.h>
#include <stdlib.h>
#include "ot/ot.h"
#include "ot/dist.h"
#include "train/train_impl.h"
#include "bench_stats.h"

int main(int argc, char **argv) {
  if (ot_dist_init(&argc, &argv) != OT_OK) { fprintf(stderr, "%s\n", ot_last_error()); return 1; }
  int dp = 1, tp = 1, pp = 1, M = 8, rows = 16, steps = 6, zero = 0;
  bool overlap = true, memory = false;
  const char *model = "small";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
    if (!strcmp(a, "--dp")) dp = atoi(v), i++;
    else if (!strcmp(a, "--tp")) tp = atoi(v), i++;
    else if (!strcmp(a, "--pp")) pp = atoi(v), i++;
    else if (!strcmp(a, "--micro")) M = atoi(v), i++;
    else if (!strcmp(a, "--rows")) rows = atoi(v), i++;
    else if (!strcmp(a, "--steps")) steps = atoi(v), i++;
    else if (!strcmp(a, "--zero")) zero = atoi(v), i++;
    else if (!strcmp(a, "--model")) model = v, i++;
    else if (!strcmp(a, "--no-overlap")) overlap = false;
    else if (!strcmp(a, "--memory")) memory = true;
    else { fprintf(stderr, "unknown flag %s\n", a); return 2; }
  }
  const int rank = ot_dist_world_rank();
  ot_train_config c;
  ot_train_config_default(&c);
  if (ot_model_config_preset(&c.model, model) != OT_OK) { fprintf(stderr, "%s\n", ot_last_error()); return 2; }
  c.data[0] = c.out[0] = 0;
  c.seq_len = c.model.max_seq < 256 ? c.model.max_seq : 256;
  c.data_parallel = dp;
  c.tensor_parallel = tp;
  c.pipeline_stages = pp;
  c.grad_accum = M;
  c.batch_size = rows / (dp * M);
  c.optimizer_shard = zero;
  c.overlap = overlap;
  c.threads = 1;
  c.quiet = true;
  c.measure_peak = false;
  if (c.batch_size < 1 || c.batch_size * dp * M != rows) {
    fprintf(stderr, "--rows %d is not divisible by dp %d x micro %d\n", rows, dp, M);
    return 2;
  }
  ot_trainer *t = NULL;
  const size_t g0 = ot_mem_current(OT_MEM_GRADS), o0 = ot_mem_current(OT_MEM_OPTIM);
  if (ot_trainer_create(&t, &c) != OT_OK) { fprintf(stderr, "rank %d: %s\n", rank, ot_last_error()); return 1; }
  if (memory) {   // rank 0's gradients and optimizer state against the stage's floats / dp
    const size_t nf = ot_model_n_floats(ot_trainer_model(t));
    const double g = (double)(ot_mem_current(OT_MEM_GRADS) - g0), o = (double)(ot_mem_current(OT_MEM_OPTIM) - o0);
    if (rank == 0)
      printf("%-8s dp%d tp%d pp%d zero%d  stage floats n %10zu  grads %8.1f MB = %.3f x 4n/dp  "
             "optim %8.1f MB = %.3f x 8n/dp\n", model, dp, tp, pp, zero, nf, g / 1e6, g / (4.0 * nf / dp),
             o / 1e6, o / (8.0 * nf / dp));
    ot_trainer_free(t);
    ot_dist_finalize();
    return 0;
  }
  const int T = c.seq_len, V = c.model.vocab;
  int32_t *data = malloc(sizeof(int32_t) * (size_t)rows * (T + 1));
  uint64_t s = 1;
  for (size_t i = 0; i < (size_t)rows * (T + 1); i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    data[i] = (int32_t)((s >> 33) % (uint64_t)V);
  }
  double *tps = calloc((size_t)steps, sizeof(double)), *comm = calloc((size_t)steps, sizeof(double));
  for (int i = -2; i < steps; i++) {   // two warm-up steps
    ot_step_info st;
    if (ot_trainer_step_on(t, data, &st) != OT_OK) { fprintf(stderr, "rank %d: %s\n", rank, ot_last_error()); return 1; }
    if (i < 0) continue;
    tps[i] = (double)st.tokens / st.seconds;
    comm[i] = t->par ? ot__par_comm_seconds(t->par) / st.seconds : 0.0;
  }
  // the slowest rank's communication share matters as much as rank 0's: report the world max
  qsort(tps, (size_t)steps, sizeof *tps, cmp_d);
  qsort(comm, (size_t)steps, sizeof *comm, cmp_d);
  double med_comm = comm[steps / 2], max_comm = med_comm;
  if (ot_dist_active()) MPI_Reduce(&med_comm, &max_comm, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  // all-reduce bandwidth of this MPI on the data-parallel gradient size (world comm)
  double ar_ms = 0, ar_gbs = 0;
  size_t n = ot_model_n_floats(ot_trainer_model(t));
  if (ot_dist_active() && ot_dist_world_size() > 1) {
    unsigned long long nn = n;   // stages differ: every rank reduces the largest count
    MPI_Allreduce(MPI_IN_PLACE, &nn, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    n = (size_t)nn;
    float *buf = calloc(n, sizeof(float));
    double best = 1e9;
    for (int k = 0; k < 4; k++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0;
      if (dt < best) best = dt;
    }
    free(buf);
    ar_ms = best * 1e3;
    ar_gbs = (double)n * 4 / best / 1e9;
  }
  if (rank == 0) {
    char lay[64];
    snprintf(lay, sizeof lay, "dp%d tp%d pp%d M%d%s%s", dp, tp, pp, M, zero == 1 ? " zero1" : zero == 2 ? " zero2" : "",
             overlap ? "" : " no-overlap");
    printf("%-28s ranks %d  tokens/s %9.1f  comm %5.1f%% (max over ranks %5.1f%%)  params/rank %zu", lay,
           ot_dist_world_size(), tps[steps / 2], 100 * med_comm, 100 * max_comm, n);
    if (ar_ms > 0) printf("  allreduce(%zu floats) %.1f ms = %.2f GB/s", n, ar_ms, ar_gbs);
    printf("\n");
  }
  free(tps);
  free(comm);
  free(data);
  ot_trainer_free(t);
  ot_dist_finalize();
  return 0;
}
