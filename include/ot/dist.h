// ops-transformer processes: the MPI world a parallel run lives in.
//
// `mpirun -np N ot train ...` starts N processes; ot_dist_init joins them
// (MPI_Init_thread, only when a launcher started this process: run alone it
// touches no MPI and the world is this one process). Before MPI starts it
// selects Open MPI's segmented-ring all-reduce (coll_tuned dynamic rules,
// algorithm 5, 1 MiB segments) unless the user set those parameters: the
// default decision is 10-20x slower for gradient-sized messages on one
// machine (measured, see the README). The parallel layout itself
// (data/tensor/pipeline parallel) is part of the training configuration.
#ifndef OT_DIST_H
#define OT_DIST_H
#include "ot/core.h"
#ifdef __cplusplus
extern "C" {
#endif

// Joins the MPI world when launched by mpirun (OMPI_COMM_WORLD_SIZE / PMI
// set); idempotent. OT_EINTERNAL when MPI cannot start or lacks thread support.
ot_status ot_dist_init(int *argc, char ***argv);
// Leaves MPI (collective; every rank calls it once at the end).
void ot_dist_finalize(void);
bool ot_dist_active(void);        // MPI was started
int ot_dist_world_size(void);     // 1 when not active
int ot_dist_world_rank(void);     // 0 when not active
// Waits for every process (no-op when not active).
void ot_dist_barrier(void);
// *x := the largest *x over every process (no-op when not active).
void ot_dist_allreduce_max_int(int *x);
// Ends every process of the job with exit code `code` (after a message on stderr).
void ot_dist_abort(int code);

#ifdef __cplusplus
}
#endif
#endif
