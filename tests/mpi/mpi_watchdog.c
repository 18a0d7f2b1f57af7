// The watchdog's view of the other ranks (tests/mpi/watchdog.sh runs the
// scenarios under mpirun and reads what the watchdog prints):
//   mpirun -np 4 mpi_watchdog stop|deadlock|slow|left     mpirun -np N mpi_watchdog layout
// Every scenario runs a 2 (dp) x 2 (tp) grid:
//   stop:     rank 3 stops itself (SIGSTOP) before its tensor-parallel all-reduce;
//             rank 2 waits for it there; ranks 0 and 1 wait for ranks 2 and 3 in
//             data-parallel all-reduces (timeout 2 s). Each watchdog must name rank 3
//             alone as stopped, and the others as alive.
//   deadlock: rank 3 sleeps outside MPI while ranks 0-2 wait for it in a world
//             all-reduce (timeout 1 s): no rank stopped, rank 3 is named as running.
//   slow:     rank 3 joins the world all-reduce 2.5 s late (timeout 1 s): every peer
//             answers the heartbeat, so the watchdog lets it finish (exit 0).
//   left:     rank 3 stops its watchdog and heartbeat as ot_dist_finalize does, while
//             ranks 0-2 wait for it in a world all-reduce (timeout 1 s): rank 3 is
//             named as having left.
//   layout:   a grid of world + 1 ranks is refused: "but 1 was started" on one
//             process, "but N were started" on more.
#include <signal.h>
#include <unistd.h>
#include "dist/dist_impl.h"
#include "harness.h"

static ot_status world_allreduce(const ot__grid *g, const char *what) {
  float x = 1.0f;
  return ot__allreduce(g, g->world_comm, &x, 1, OT_F32, OT_RED_SUM, what);
}

static int scenario(const char *name, int rank) {
  ot__grid g;
  const bool stop = !strcmp(name, "stop"), slow = !strcmp(name, "slow");
  if (ot__grid_create(&g, 2, 2, 1, NULL, stop ? 2.0 : 1.0) != OT_OK) {
    printf("rank %d: %s\n", rank, ot_last_error());
    return 1;
  }
  ot_dist_barrier();
  ot_status s = OT_OK;
  float x = 1.0f;
  if (stop) {
    if (rank == 3) raise(SIGSTOP);   // never continued: the watchdog of a peer ends it
    if (rank >= 2) s = ot__allreduce(&g, g.tp_comm, &x, 1, OT_F32, OT_RED_SUM, "test tensor-parallel all-reduce");
    if (s == OT_OK) s = ot__allreduce(&g, g.dp_comm, &x, 1, OT_F32, OT_RED_SUM, "test data-parallel all-reduce");
  } else if (!strcmp(name, "left")) {
    if (rank == 3) {   // what ot_dist_finalize does first (its MPI_Finalize would wait for the others)
      ot__wd_stop();
      usleep(30000000);
    }
    s = world_allreduce(&g, "test world all-reduce");
  } else {
    if (rank == 3) usleep(slow ? 2500000 : 30000000);   // alive, outside any communication
    s = world_allreduce(&g, "test world all-reduce");
  }
  if (s != OT_OK) printf("rank %d: %s\n", rank, ot_last_error());
  else printf("rank %d: %s: the all-reduce completed\n", rank, name);
  ot__grid_free(&g);
  return s != OT_OK;
}

static int layout(int world) {
  ot__grid g;
  char want[64];
  snprintf(want, sizeof want, "%d processes, but %d %s started", world + 1, world,
           world == 1 ? "was" : "were");
  th_check_error(ot__grid_create(&g, world + 1, 1, 1, NULL, 1.0), OT_EINVAL, want,
                 "a layout for one rank more than the world");
  return th_finish();
}

int main(int argc, char **argv) {
  if (ot_dist_init(&argc, &argv) != OT_OK || !ot_dist_active() || argc != 2) {
    printf("usage: mpirun -np 4 mpi_watchdog stop|deadlock|slow|left|layout (%s)\n", ot_last_error());
    return 2;
  }
  const int rank = ot_dist_world_rank();
  int rc = 2;
  if (!strcmp(argv[1], "layout")) rc = layout(ot_dist_world_size());
  else if (ot_dist_world_size() == 4) rc = scenario(argv[1], rank);
  else printf("run me with -np 4\n");
  ot_dist_finalize();
  return rc;
}
