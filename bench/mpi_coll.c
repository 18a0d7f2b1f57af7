// Times one Open MPI collective as the engine uses it, for choosing algorithms and for the
// planner's link figures. Not part of the build (needs only mpicc):
//   mpicc -O2 -o build/mpi_coll bench/mpi_coll.c
//   mpirun -np 4 build/mpi_coll OP MIB [pairs]
//   tests/netns/hosts.sh mpirun -np 4 --map-by ppr:2:node -- build/mpi_coll allgatherv 40
// OP: allreduce (in place, f32 sum), allgatherv (MIB in all, an equal block per rank),
// iallgatherv (non-blocking, tested every 50 us with sleeps between, as a helper thread
// would). pairs: the world split into pairs (r, r + n/2) that run at once (the data-parallel
// pairs of a 2-host layout). Open MPI's algorithm comes from the environment, e.g.
// -x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_allreduce_algorithm=5.
// Prints the mean of 4 timed calls after one warm-up (the slowest rank's), the bus bandwidth
// (all-reduce: 2 (n-1)/n bytes / s) or the bytes each rank receives per second.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int wr, wn;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm_size(MPI_COMM_WORLD, &wn);
  if (argc < 3 || (strcmp(argv[1], "allreduce") && strcmp(argv[1], "allgatherv") && strcmp(argv[1], "iallgatherv"))) {
    if (!wr) fprintf(stderr, "usage: mpi_coll allreduce|allgatherv|iallgatherv MIB [pairs]\n");
    MPI_Finalize();
    return 2;
  }
  const char *op = argv[1];
  const size_t tot = (size_t)atoi(argv[2]) << 18;   // floats
  const int pairs = argc > 3 && !strcmp(argv[3], "pairs") && wn % 2 == 0;
  MPI_Comm comm = MPI_COMM_WORLD;
  if (pairs) MPI_Comm_split(MPI_COMM_WORLD, wr % (wn / 2), wr, &comm);
  int r, n;
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, &n);
  float *buf = malloc(tot * sizeof(float) + 64), *src = malloc(tot / n * sizeof(float) + 64);
  int *cnt = malloc(2 * (size_t)n * sizeof(int)), *dsp = cnt + n;
  for (int i = 0; i < n; i++) { cnt[i] = (int)(tot / n); dsp[i] = i * (int)(tot / n); }
  for (size_t i = 0; i < tot; i++) buf[i] = 1e-3f;
  for (size_t i = 0; i < tot / n; i++) src[i] = (float)r;
  double sum = 0.0;
  for (int it = 0; it < 5; it++) {
    MPI_Barrier(MPI_COMM_WORLD);   // (pairs start together)
    const double t0 = MPI_Wtime();
    if (!strcmp(op, "allreduce")) {
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)tot, MPI_FLOAT, MPI_SUM, comm);
    } else if (!strcmp(op, "allgatherv")) {
      MPI_Allgatherv(src, cnt[r], MPI_FLOAT, buf, cnt, dsp, MPI_FLOAT, comm);
    } else {
      MPI_Request q;
      int done = 0;
      MPI_Iallgatherv(src, cnt[r], MPI_FLOAT, buf, cnt, dsp, MPI_FLOAT, comm, &q);
      while (!done) {
        MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&(struct timespec){0, 50000}, NULL);
      }
    }
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it) sum += dt;
  }
  const double mean = sum / 4, bytes = (double)tot * sizeof(float);
  if (!wr)
    printf("%s of %zu MiB over %d ranks%s: mean %.1f ms, %s %.1f MB/s\n", op, tot >> 18, n,
           pairs ? " (every pair at once)" : "", mean * 1e3, strcmp(op, "allreduce") ? "received per rank" : "bus",
           (strcmp(op, "allreduce") ? (n - 1.0) / n : 2.0 * (n - 1) / n) * bytes / mean / 1e6);
  free(buf);
  free(src);
  free(cnt);
  MPI_Finalize();
  return 0;
}
