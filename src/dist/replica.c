// Replica consistency (par.h: ot__par_check_replicas): the parameters that must be
// bit-identical across ranks, compared by checksum. Over the data-parallel group
// (same tensor rank and stage) every parameter of the model part; over the tensor
// group (same data rank and stage) the replicated ones (norms, row-parallel
// biases, positions, the embedding without vocab-parallel). The first tensor (in
// layout order) that differs ends the run on every rank with one message naming
// it, the group and the world ranks with their checksums and norms.
//
// Test aid (tests/mpi/replica.sh): OT_TEST_REPLICA_PERTURB="RANK:STEP[:NAME]" adds
// 1e-3 to element 0 of parameter NAME (default: the first) on world rank RANK at
// the first check at or after step STEP, so the check can be seen to fire. Never
// set it in a real run.
#include "dist/dist_impl.h"
#include "io/files.h"
#include "ot/ops.h"
#include <math.h>
#include <stdlib.h>

// One tensor's signature on one rank.
typedef struct {
  uint64_t hash;   // bit patterns of its floats
  double norm;     // its L2 norm (for the message)
} sig;

// Applies OT_TEST_REPLICA_PERTURB when it names this rank and the step has come.
static void test_perturb(ot__par *p, int64_t step) {
  static bool done;
  const char *e = getenv("OT_TEST_REPLICA_PERTURB");
  if (!e || done) return;
  char name[96] = "";
  int rank = -1;
  long long at = 0;
  if (sscanf(e, "%d:%lld:%95s", &rank, &at, name) < 2 || rank != p->g.rank || step < at) return;
  const int i = name[0] ? ot_model_param_find(p->m, name) : 0;
  const ot_param *q = ot_model_param_at(p->m, i);
  if (!q) return;
  float *w = ot_model_storage(p->m, q->offset);
  if (p->zero == 3 && (q->layer >= 0 || !ot_model_param_stored(p->m, i))) w = p->ps && q->offset >= p->s0 && q->offset < p->s1 ? p->ps + (q->offset - p->s0) : NULL;
  if (!w) return;
  *w += 1e-3f;
  done = true;
  fprintf(stderr, "ot: test aid OT_TEST_REPLICA_PERTURB: '%s' changed on world rank %d before the check at step "
          "%lld\n", q->name, p->g.rank, (long long)step);
}

// World rank of rank r of comm.
static int world_of(MPI_Comm comm, int r) {
  MPI_Group a, w;
  int out = -1;
  MPI_Comm_group(comm, &a);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  MPI_Group_translate_ranks(a, 1, &r, w, &out);
  MPI_Group_free(&a);
  MPI_Group_free(&w);
  return out;
}

// Compares the signatures mine [n] (of parameters idx [n]) over comm; on the first
// tensor that differs writes the message into msg (else leaves it ""). Collective.
static ot_status compare(ot__par *p, MPI_Comm comm, const char *group, const int *idx, const sig *mine, int n,
                         int64_t step, char *msg, size_t cap) {
  int gs = 1;
  MPI_Comm_size(comm, &gs);
  if (gs < 2 || n == 0) return OT_OK;
  sig *all = ot_mem_alloc((size_t)gs * (size_t)n * sizeof *all, OT_MEM_OTHER);
  if (!all) return ot_error(OT_ENOMEM, "replica check: out of memory");
  ot__wd_begin(&p->g, "replica check all-gather", -1);
  const int rc = MPI_Allgather(mine, n * (int)sizeof *mine, MPI_BYTE, all, n * (int)sizeof *mine, MPI_BYTE, comm);
  ot__wd_end();
  ot_status s = rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, "replica check all-gather");
  for (int k = 0; s == OT_OK && k < n && !msg[0]; k++) {
    int bad = 0;
    for (int r = 1; r < gs; r++) bad += all[(size_t)r * n + k].hash != all[k].hash;
    if (!bad) continue;
    const ot_param *q = ot_model_param_at(p->m, idx[k]);
    size_t len = (size_t)snprintf(msg, cap,
                                  "replica check at step %lld: '%s' differs over the %s (world rank: checksum, "
                                  "norm):", (long long)step, q->name, group);
    for (int r = 0; r < gs && len < cap; r++) {
      const sig *x = &all[(size_t)r * n + k];
      len += (size_t)snprintf(msg + len, cap - len, " %d%s: %016llx, %.9g;", world_of(comm, r),
                              r && x->hash != all[k].hash ? " (differs)" : "", (unsigned long long)x->hash, x->norm);
    }
    if (len < cap)
      snprintf(msg + len, cap - len, " the replicas have diverged: every rank of the group must apply the same "
               "update (a rank's reduction, update or input differs)");
  }
  ot_mem_free(all);
  return s;
}

ot_status ot__par_check_replicas(ot__par *p, int64_t step) {
  if (!p) return OT_OK;
  test_perturb(p, step);
  const int np = ot_model_param_count(p->m);
  int *idx = ot_mem_alloc((size_t)np * sizeof *idx, OT_MEM_OTHER), nt = 0;
  sig *s_dp = ot_mem_alloc((size_t)np * sizeof *s_dp, OT_MEM_OTHER),
      *s_tp = ot_mem_alloc((size_t)np * sizeof *s_tp, OT_MEM_OTHER);
  int *idx_dp = ot_mem_alloc((size_t)np * sizeof *idx_dp, OT_MEM_OTHER);
  ot_status s = idx && s_dp && s_tp && idx_dp ? OT_OK : ot_error(OT_ENOMEM, "replica check: out of memory");
  char msg[1536] = "";
  if (s == OT_OK) {
    OT_PROF_BEGIN("replica_check", 0.0, 0.0);
    int nd = 0;
    for (int i = 0; i < np; i++) {
      const ot_param *q = ot_model_param_at(p->m, i);
      // ZeRO-3: the blocks' and vocabulary tensors' weights exist once (in their owners'
      // shards); the stored global tensors are compared as gathered
      if (p->zero == 3 && (q->layer >= 0 || !ot_model_param_stored(p->m, i))) continue;
      const float *x = ot_model_storage(p->m, q->offset);
      s_dp[nd] = (sig){ot__hash_floats(x, q->numel), sqrt(ot_sumsq(x, q->numel))};
      idx_dp[nd++] = i;
      if (!ot_model_param_is_split(p->m, i)) {
        s_tp[nt] = s_dp[nd - 1];
        idx[nt++] = i;
      }
    }
    OT_PROF_STOP();
    char group[128];
    snprintf(group, sizeof group, "data-parallel replicas of tensor rank %d, stage %d", p->g.tp_rank, p->g.pp_rank);
    s = compare(p, p->g.dp_comm, group, idx_dp, s_dp, nd, step, msg, sizeof msg);
    snprintf(group, sizeof group, "tensor-parallel ranks of data rank %d, stage %d (a replicated parameter)",
             p->g.dp_rank, p->g.pp_rank);
    if (s == OT_OK) s = compare(p, p->g.tp_comm, group, idx, s_tp, nt, step, msg, sizeof msg);
  }
  ot_mem_free(idx);
  ot_mem_free(idx_dp);
  ot_mem_free(s_dp);
  ot_mem_free(s_tp);
  // every rank learns the lowest world rank that found a difference, and its message
  int who = s == OT_OK && msg[0] ? p->g.rank : p->g.world;
  int any = s != OT_OK;
  ot__wd_begin(&p->g, "replica check agreement", -1);
  int rc = MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, p->g.world_comm);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, p->g.world_comm);
  if (rc == MPI_SUCCESS && who < p->g.world)
    rc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, who, p->g.world_comm);
  ot__wd_end();
  if (rc != MPI_SUCCESS) return ot__mpi_error(rc, "replica check agreement");
  if (s != OT_OK) return s;
  if (who < p->g.world) return ot_error(OT_EINTERNAL, "%s", msg);
  if (any) return ot_error(OT_EINTERNAL, "replica check at step %lld failed on another rank", (long long)step);
  return OT_OK;
}
