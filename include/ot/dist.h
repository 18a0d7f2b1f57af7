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
// The same, but a waiting process sleeps (1 ms polls) instead of spinning on its core: for
// ranks that wait while another measures (no-op when not active).
void ot_dist_barrier_idle(void);
// *x := the largest *x over every process (no-op when not active).
void ot_dist_allreduce_max_int(int *x);
// Times the engine's all-reduce (the tuned ring, f32 sum) of n floats over the first `group`
// processes (the others sleep meanwhile): the median of `reps` calls, each the slowest rank's
// time between barriers (*sec, on every process); *hosts_differ: the group does not all run on
// one host (MPI processor names). Collective; OT_EINVAL on one process or a bad group.
ot_status ot_dist_measure_allreduce(int group, size_t n, int reps, double *sec, bool *hosts_differ);
// Ends every process of the job with exit code `code` (after a message on stderr).
void ot_dist_abort(int code);

// ---- launching: a MindSpore / HCCL rank table or an Open MPI hostfile -> mpirun
//
// The rank table (MindSpore's rank_table_Npcs.json, as hccl_tools.py writes it):
//   {"version": "1.0", "server_count": "2", "status": "completed",
//    "server_list": [{"server_id": "10.0.0.1", "host_nic_ip": "reserve",
//                     "device": [{"device_id": "0", "device_ip": "192.1.27.6", "rank_id": "0"}, ...]},
//                    ...]}
// Numbers may be JSON strings (as HCCL writes them) or integers; device_ip,
// host_nic_ip and version are read past. Every rank 0..N-1 appears once, N the
// devices of all servers; server_count equals the servers listed; a server and a
// device_id within a server appear once; status, if given, is "completed".
#define OT_LAUNCH_HOST_MAX 256   // bytes of a host name, with its NUL
#define OT_LAUNCH_RANKS_MAX 65536
typedef struct {
  int host;     // index in ot_launch_plan.host
  int device;   // device_id (a hostfile: the rank's position on its host)
  int local;    // position among its host's ranks, by device_id (its core group there)
} ot_launch_rank;
typedef struct {
  int n_ranks;                          // the world size
  ot_launch_rank *rank;                 // [n_ranks], by rank id
  int n_hosts;
  char (*host)[OT_LAUNCH_HOST_MAX];     // [n_hosts], in the order of their lowest rank
  int *slots;                           // [n_hosts]: ranks on each host
  bool rankfile;                        // the rank order needs a rankfile (a host's ranks are
                                        // not one run after the previous host's)
} ot_launch_plan;

// Reads and checks a rank table; OT_EFORMAT naming `path` (or `what`) and the problem.
ot_status ot_launch_read_rank_table(ot_launch_plan *p, const char *path);
ot_status ot_launch_parse_rank_table(ot_launch_plan *p, const char *text, size_t len, const char *what);
// An Open MPI hostfile ("host slots=N" lines, '#' comments; a bare host is one
// slot; a host on several lines adds up): ranks fill the hosts in order.
ot_status ot_launch_read_hostfile(ot_launch_plan *p, const char *path);
void ot_launch_free(ot_launch_plan *p);

// What mpirun runs and how.
typedef struct {
  const char *mpirun;              // NULL: "mpirun"
  int np;                          // processes (0: the plan's ranks; a hostfile may take fewer)
  const char *hostfile;            // the hostfile it reads (ot_launch_write's or the user's)
  const char *rankfile;            // NULL: none (only with plan->rankfile)
  int threads;                     // OMP_NUM_THREADS of each rank (>= 1)
  bool bind;                       // bind each rank to `threads` cores (else --bind-to none)
  int n_extra;                     // more mpirun arguments, before the program
  const char *const *extra;
  int n_cmd;                       // the program and its arguments
  const char *const *cmd;
} ot_launch_cmd;

// Writes <dir>/hostfile (and <dir>/rankfile when p->rankfile, each rank's cores
// local * threads .. + threads - 1 on its host); their paths into hostfile /
// rankfile (cap bytes each; rankfile "" when none). dir is created.
ot_status ot_launch_write(const ot_launch_plan *p, const char *dir, int threads, char *hostfile,
                          char *rankfile, size_t cap);
// The mpirun command line: mpirun -np N --hostfile F [--rankfile R | --map-by
// slot[:PE=T] --bind-to core | --bind-to none] -x OMP_NUM_THREADS=T [extra] cmd...
// *argv: a NULL-terminated array of *argc strings (free with ot_launch_argv_free).
ot_status ot_launch_argv(const ot_launch_plan *p, const ot_launch_cmd *c, char ***argv, int *argc);
void ot_launch_argv_free(char **argv);

#ifdef __cplusplus
}
#endif
#endif
