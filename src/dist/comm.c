// MPI world, rank grid and the watchdog-guarded collectives the parallel trainer
// uses (the watchdog itself: watchdog.c).
#include "dist_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool g_active, g_self_init;
static int g_rank, g_size = 1;

static bool launched_by_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

ot_status ot_dist_init(int *argc, char ***argv) {
  if (g_active || !launched_by_mpirun()) return OT_OK;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    // measured on one machine: the default large all-reduce runs at 0.2-0.4 GB/s,
    // the segmented ring at ~4 GB/s (README: parallel training). User settings win.
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
    setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "5", 0);
    setenv("OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize", "1048576", 0);
    // the ring all-gather: 40 MiB over 4 ranks on 2 simulated hosts at 1 Gb/s 274 ms against
    // the default decision's 622 (on one host 19.5 against 26.1 ms; bench/mpi_coll.c)
    setenv("OMPI_MCA_coll_tuned_allgatherv_algorithm", "3", 0);
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return ot_error(OT_EINTERNAL, "MPI_Init_thread failed (is this mpirun's Open MPI?)");
    if (provided < MPI_THREAD_MULTIPLE)
      return ot_error(OT_EINTERNAL, "MPI provides thread level %d, not MPI_THREAD_MULTIPLE (the "
                      "gradient-reduction thread needs it); use Debian's Open MPI", provided);
    g_self_init = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_active = true;
  return ot__wd_start();
}

void ot_dist_finalize(void) {
  if (!g_active) return;
  ot__wd_stop();   // the watchdog thread uses MPI for its heartbeat
  g_active = false;
  if (g_self_init) MPI_Finalize();
}

bool ot_dist_active(void) { return g_active; }
int ot_dist_world_size(void) { return g_active ? g_size : 1; }
int ot_dist_world_rank(void) { return g_active ? g_rank : 0; }

void ot_dist_barrier(void) {
  if (g_active) MPI_Barrier(MPI_COMM_WORLD);
}

void ot_dist_barrier_idle(void) {
  if (!g_active) return;
  MPI_Request r;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &r) != MPI_SUCCESS) return;
  int done = 0;
  while (MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    const struct timespec ts = {0, 1000000};   // 1 ms: a waiting rank leaves its core to the others
    nanosleep(&ts, NULL);
  }
}

void ot_dist_allreduce_max_int(int *x) {
  if (g_active) MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

static ot_status allreduce_raw(MPI_Comm comm, void *buf, size_t n, MPI_Datatype t, size_t es,
                               MPI_Op op, const char *what);

ot_status ot_dist_measure_allreduce(int group, size_t n, int reps, double *sec, bool *hosts_differ) {
  *sec = 0.0;
  *hosts_differ = false;
  if (!g_active || g_size < 2) return ot_error(OT_EINVAL, "measuring the all-reduce needs 2 or more processes (mpirun -np 2)");
  if (group < 2 || group > g_size)
    return ot_error(OT_EINVAL, "all-reduce measurement: a group of %d of %d processes", group, g_size);
  const bool in = g_rank < group;
  char name[MPI_MAX_PROCESSOR_NAME] = "", first[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(name, &len);
  // the group's ring in host order (a host's ranks next to each other, as the engine's groups
  // of consecutive ranks are placed), so that it crosses each link between hosts once each way
  char *names = malloc((size_t)g_size * MPI_MAX_PROCESSOR_NAME);
  int nomem = !names;   // (every rank returns together: none is left in the all-gather)
  MPI_Allreduce(MPI_IN_PLACE, &nomem, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (nomem) {
    free(names);
    return ot_error(OT_ENOMEM, "all-reduce measurement: out of memory for the host names");
  }
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  int key = 0;
  for (int j = 0; j < group && j < g_size; j++) {
    const int c = strcmp(names + (size_t)j * MPI_MAX_PROCESSOR_NAME, name);
    key += c < 0 || (c == 0 && j < g_rank);
  }
  free(names);
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, key, &comm);
  if (rc != MPI_SUCCESS) return ot__mpi_error(rc, "all-reduce measurement: splitting the world");
  memcpy(first, name, sizeof first);
  MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  int differ = in && strcmp(first, name) != 0;
  MPI_Allreduce(MPI_IN_PLACE, &differ, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  *hosts_differ = differ != 0;
  float *buf = in ? ot_mem_alloc((n ? n : 1) * sizeof(float), OT_MEM_WORKSPACE) : NULL;
  double *t = in ? malloc((size_t)(reps > 0 ? reps : 1) * sizeof(double)) : NULL;
  int bad = in && (!buf || !t);
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ot_status s = bad ? ot_error(OT_ENOMEM, "all-reduce measurement: out of memory") : OT_OK;
  if (s == OT_OK && in) {   // the group times it; the others sleep at the barrier below
    for (size_t i = 0; i < n; i++) buf[i] = 1e-3f;
    s = allreduce_raw(comm, buf, n, MPI_FLOAT, 4, MPI_SUM, "all-reduce measurement");
    for (int r = 0; r < reps && s == OT_OK; r++) {
      MPI_Barrier(comm);
      const double t0 = MPI_Wtime();
      s = allreduce_raw(comm, buf, n, MPI_FLOAT, 4, MPI_SUM, "all-reduce measurement");
      double dt = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm);
      t[r] = dt;
    }
    if (s == OT_OK) {   // the median
      for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
      *sec = t[reps / 2];
    }
  }
  ot_dist_barrier_idle();
  MPI_Bcast(sec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  ot_mem_free(buf);
  free(t);
  return s;
}

void ot_dist_abort(int code) {
  fflush(stdout);
  fflush(stderr);
  // _exit rather than MPI_Abort: this may run while another thread is inside
  // MPI; mpirun ends the other ranks when one exits without finalizing
  _exit(code);
}

ot_status ot__mpi_error(int rc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  return ot_error(OT_EIO, "rank %d: %s failed: %s", ot_dist_world_rank(), what, s);
}

// ------------------------------------------------------------------ grid ----
void ot__grid_coords(int r, int dp, int tp, int *dp_rank, int *tp_rank, int *pp_rank) {
  *tp_rank = r % tp;
  *dp_rank = (r / tp) % dp;
  *pp_rank = r / (tp * dp);
}

ot_status ot__grid_create(ot__grid *g, int dp, int tp, int pp, const bool *embed_stage,
                          double timeout) {
  memset(g, 0, sizeof *g);
  g->tp_comm = g->dp_comm = g->pp_comm = g->embed_comm = MPI_COMM_NULL;
  g->world = ot_dist_world_size();
  g->rank = ot_dist_world_rank();
  g->dp = dp;
  g->tp = tp;
  g->pp = pp;
  g->timeout = timeout;
  if (dp < 1 || tp < 1 || pp < 1)
    return ot_error(OT_EINVAL, "parallel layout dp=%d tp=%d pp=%d: each must be >= 1", dp, tp, pp);
  if (g->world != dp * tp * pp)
    return ot_error(OT_EINVAL, "parallel layout: data_parallel %d x tensor_parallel %d x "
                    "pipeline_stages %d = %d processes, but %d %s started (run `mpirun -np %d "
                    "...` or change the layout)", dp, tp, pp, dp * tp * pp, g->world,
                    g->world == 1 ? "was" : "were", dp * tp * pp);
  ot__grid_coords(g->rank, dp, tp, &g->dp_rank, &g->tp_rank, &g->pp_rank);
  if (!ot_dist_active()) {   // one process: no communicators are ever used
    g->world_comm = MPI_COMM_NULL;
    return OT_OK;
  }
  g->world_comm = MPI_COMM_WORLD;
  int rc = MPI_Comm_split(MPI_COMM_WORLD, g->pp_rank * dp + g->dp_rank, g->tp_rank, &g->tp_comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_split(MPI_COMM_WORLD, g->pp_rank * tp + g->tp_rank, g->dp_rank, &g->dp_comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_split(MPI_COMM_WORLD, g->dp_rank * tp + g->tp_rank, g->pp_rank, &g->pp_comm);
  if (rc == MPI_SUCCESS) {
    int holders = 0;   // stages with a copy of the embedding: a group when two or more
    for (int st = 0; embed_stage && st < pp; st++) holders += embed_stage[st];
    const bool member = holders > 1 && embed_stage[g->pp_rank];
    rc = MPI_Comm_split(MPI_COMM_WORLD, member ? g->dp_rank * tp + g->tp_rank : MPI_UNDEFINED,
                        g->pp_rank, &g->embed_comm);
  }
  if (rc != MPI_SUCCESS) return ot__mpi_error(rc, "MPI_Comm_split (rank grid)");
  MPI_Comm cs[4] = {g->tp_comm, g->dp_comm, g->pp_comm, g->embed_comm};
  for (int i = 0; i < 4; i++)
    if (cs[i] != MPI_COMM_NULL) MPI_Comm_set_errhandler(cs[i], MPI_ERRORS_RETURN);
  return OT_OK;
}

void ot__grid_free(ot__grid *g) {
  if (!g || !ot_dist_active()) return;
  MPI_Comm *cs[4] = {&g->tp_comm, &g->dp_comm, &g->pp_comm, &g->embed_comm};
  for (int i = 0; i < 4; i++)
    if (*cs[i] != MPI_COMM_NULL) MPI_Comm_free(cs[i]);
}

// ----------------------------------------------------------- collectives ----
#define CHUNK ((size_t)1 << 28)   // elements per MPI call (int counts)

static ot_status allreduce_raw(MPI_Comm comm, void *buf, size_t n, MPI_Datatype t, size_t es,
                               MPI_Op op, const char *what) {
  for (size_t o = 0; o < n; o += CHUNK) {
    size_t k = n - o < CHUNK ? n - o : CHUNK;
    int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + o * es, (int)k, t, op, comm);
    if (rc != MPI_SUCCESS) return ot__mpi_error(rc, what);
  }
  return OT_OK;
}

ot_status ot__allreduce(const ot__grid *g, MPI_Comm comm, void *buf, size_t n, ot_dtype dt,
                        ot_red_op op, const char *what) {
  if (comm == MPI_COMM_NULL || n == 0) return OT_OK;
  MPI_Op mop = op == OT_RED_MAX ? MPI_MAX : MPI_SUM;
  ot_status s;
  ot__wd_begin(g, what, -1);
  if (dt == OT_F32) {
    s = allreduce_raw(comm, buf, n, MPI_FLOAT, 4, mop, what);
  } else if (dt == OT_BF16 || dt == OT_F16) {   // summed in f32 (this thread's grow-only scratch), rounded once
    float *tmp = ot_scratch(n * sizeof(float));
    if (!tmp) {
      ot__wd_end();
      return ot_error(OT_ENOMEM, "%s: out of memory for %zu floats", what, n);
    }
    if (dt == OT_BF16) ot_cvt_bf16_to_f32(buf, tmp, n);
    else ot_cvt_f16_to_f32(buf, tmp, n);
    s = allreduce_raw(comm, tmp, n, MPI_FLOAT, 4, mop, what);
    if (s == OT_OK && dt == OT_BF16) ot_cvt_f32_to_bf16(tmp, buf, n);
    else if (s == OT_OK) ot_cvt_f32_to_f16(tmp, buf, n);
  } else {
    s = ot_error(OT_EINVAL, "%s: dtype %s cannot be reduced", what, ot_dtype_name(dt));
  }
  ot__wd_end();
  return s;
}

ot_status ot__allreduce_f64(const ot__grid *g, MPI_Comm comm, double *buf, int n, const char *what) {
  if (comm == MPI_COMM_NULL || n == 0) return OT_OK;
  ot__wd_begin(g, what, -1);
  ot_status s = allreduce_raw(comm, buf, (size_t)n, MPI_DOUBLE, 8, MPI_SUM, what);
  ot__wd_end();
  return s;
}

// Completes req by polling: spins briefly, then sleeps between tests (a
// blocked MPI_Wait spins on the CPU, which on an oversubscribed machine takes
// it from the rank doing the work this one waits for).
static int poll_wait(MPI_Request *req) {
  int done = 0, rc = MPI_SUCCESS;
  for (int i = 0; !done && rc == MPI_SUCCESS; i++) {
    rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done || rc != MPI_SUCCESS) break;
    if (i >= 64) usleep(i < 1024 ? 20 : 200);
  }
  return rc;
}

ot_status ot__recv(const ot__grid *g, void *buf, size_t bytes, int from, int tag, const char *what) {
  ot__wd_begin(g, what, g->tp_rank + g->tp * (g->dp_rank + g->dp * from));
  int rc = MPI_SUCCESS;
  for (size_t o = 0; o < bytes && rc == MPI_SUCCESS; o += CHUNK) {
    size_t k = bytes - o < CHUNK ? bytes - o : CHUNK;
    MPI_Request req;
    rc = MPI_Irecv((char *)buf + o, (int)k, MPI_BYTE, from, tag, g->pp_comm, &req);
    if (rc == MPI_SUCCESS) rc = poll_wait(&req);
  }
  ot__wd_end();
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, what);
}

ot_status ot__isend(const ot__grid *g, const void *buf, size_t bytes, int to, int tag,
                    MPI_Request *req) {
  (void)g;
  if (bytes > CHUNK) return ot_error(OT_EINVAL, "pipeline send of %zu bytes is too large", bytes);
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, g->pp_comm, req);
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, "MPI_Isend (pipeline)");
}

ot_status ot__wait(const ot__grid *g, MPI_Request *req, const char *what) {
  if (*req == MPI_REQUEST_NULL) return OT_OK;
  ot__wd_begin(g, what, -1);
  int rc = poll_wait(req);
  ot__wd_end();
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, what);
}

ot_status ot__allgather_f32(const ot__grid *g, MPI_Comm comm, float *buf, const int *counts,
                            const int *displs, const char *what) {
  if (comm == MPI_COMM_NULL) return OT_OK;
  ot__wd_begin(g, what, -1);
  int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, comm);
  ot__wd_end();
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, what);
}

// A ring of point-to-point exchanges: n - 1 steps, each sending the block received last to
// the right neighbour. Polled like poll_wait but gently (50 us asleep between tests), so a
// helper thread waiting on it leaves the cores to the compute (libnbc's MPI_Iallgatherv is a
// linear exchange: 40 MiB over 4 ranks on 2 simulated hosts 370 ms against the ring's 274,
// bench/mpi_coll.c).
ot_status ot__allgatherv_ring(MPI_Comm comm, const float *src, float *dst, const int *cnt, const int *dsp,
                              int tag, const char *what) {
  int n = 1, r = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  if (cnt[r] && src != dst + dsp[r]) memmove(dst + dsp[r], src, (size_t)cnt[r] * sizeof(float));
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  int rc = MPI_SUCCESS;
  for (int k = 0; k < n - 1 && rc == MPI_SUCCESS; k++) {
    const int sb = (r - k + n) % n, rb = (r - k - 1 + 2 * n) % n;
    MPI_Request q[2];
    rc = MPI_Irecv(dst + dsp[rb], cnt[rb], MPI_FLOAT, left, tag, comm, &q[0]);
    if (rc != MPI_SUCCESS) break;
    rc = MPI_Isend(dst + dsp[sb], cnt[sb], MPI_FLOAT, right, tag, comm, &q[1]);
    if (rc != MPI_SUCCESS) {
      MPI_Cancel(&q[0]);
      MPI_Wait(&q[0], MPI_STATUS_IGNORE);
      break;
    }
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
      rc = MPI_Testall(2, q, &done, MPI_STATUSES_IGNORE);
      if (rc == MPI_SUCCESS && !done) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
  }
  return rc == MPI_SUCCESS ? OT_OK : ot__mpi_error(rc, what);
}
