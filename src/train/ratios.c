// The profiler's three ratios of a training run, per rank (train_impl.h):
//   communication share = seconds the training thread waits in communication
//                          (exposed: what overlap hides is not counted) / step seconds;
//   matmul utilization   = achieved GEMM FLOP/s (2 M N K of every matmul over the
//                          seconds inside the matmul kernels) / the FMA peak measured
//                          at start (world rank 0, one process with its threads);
//   memory reuse rate    = 1 - bytes newly allocated during the steps / the bytes the
//                          steps work in (tracked parameters, gradients, optimizer
//                          state, activations, workspace at each step's end, summed
//                          over the steps): the share served from buffers planned and
//                          allocated before the step. Allocations outside the tracker
//                          (MPI, oneDNN's primitive caches) are not seen.
// The first step of a run (warm-up: scratch blocks grow, primitives are created) is
// left out when the run has more. Printed at the end with the thresholds of the
// seed (comm > 30%, matmul < 60%, reuse < 80%) and what to change beside each
// breach; one JSONL record per rank; counters and otherData in the Chrome trace.
#include "train/train_impl.h"
#include "ot/dist.h"
#include "ot/ops.h"
#include <math.h>
#include <stdlib.h>

static size_t tracked_bytes(void) {
  size_t b = 0;
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) b += ot_mem_current((ot_mem_category)c);
  return b;
}

void ot__ratios_begin(ot__ratios *r) {
  ot_gemm_stats(&r->f0, &r->g0);
  r->a0 = ot_mem_allocated();
}

void ot__ratios_end(ot__ratios *r, double step_s, double comm_s, double peak_gflops) {
  double f1, g1;
  ot_gemm_stats(&f1, &g1);
  const double alloc = (double)(ot_mem_allocated() - r->a0), used = (double)tracked_bytes();
  const double df = f1 - r->f0, dg = g1 - r->g0;
  ot__ratio_sums *s = r->steps_all ? &r->after : &r->first;   // the run's first step apart
  s->step_s += step_s;
  s->comm_s += comm_s;
  s->gemm_flops += df;
  s->gemm_s += dg;
  s->alloc += alloc;
  s->used += used;
  r->steps_all++;
  // the step's values as trace counters (profiling on)
  ot_prof_counter("comm_share", step_s > 0 ? comm_s / step_s : 0.0);
  if (peak_gflops > 0 && dg > 0) ot_prof_counter("matmul_util", df / dg * 1e-9 / peak_gflops);
  ot_prof_counter("mem_reuse", used > 0 ? fmax(0.0, 1.0 - alloc / used) : 1.0);
}

// The three ratios of sums s (NaN where undefined).
static void ratios_of(const ot__ratio_sums *s, double peak_gflops, double out[4]) {
  out[0] = s->step_s > 0 ? s->comm_s / s->step_s : NAN;
  out[1] = s->gemm_s > 0 ? s->gemm_flops / s->gemm_s * 1e-9 : NAN;   // GFLOP/s
  out[2] = s->gemm_s > 0 && peak_gflops > 0 ? out[1] / peak_gflops : NAN;
  out[3] = s->used > 0 ? fmax(0.0, 1.0 - s->alloc / s->used) : NAN;
}

static void pct(char *buf, size_t cap, double v, bool breach) {
  if (isfinite(v)) snprintf(buf, cap, "%6.1f%%%s", 100 * v, breach ? " !" : "  ");
  else snprintf(buf, cap, "%7s  ", "-");
}

ot_status ot__ratios_report(const ot__ratios *r, ot__par *par, double peak_gflops, int64_t step, FILE *out,
                            FILE *log) {
  if (r->steps_all < 1) return OT_OK;
  const ot__ratio_sums *s = r->steps_all > 1 ? &r->after : &r->first;
  const int world = ot_dist_world_size(), rank = ot__par_rank(par);
  enum { K = 4 };   // comm share, GEMM GFLOP/s, matmul utilization, reuse
  double *v = calloc((size_t)world * K, sizeof *v);
  if (!v) return ot_error(OT_ENOMEM, "profile ratios: out of memory");
  ratios_of(s, peak_gflops, v + (size_t)rank * K);
  for (int k = 0; k < K; k++)   // NaN travels as -1 through the sum
    if (!isfinite(v[(size_t)rank * K + k])) v[(size_t)rank * K + k] = -1.0;
  ot_status st = par && world > 1 ? ot__par_sum(par, v, world * K, "profile ratios gather") : OT_OK;
  if (st != OT_OK || rank != 0) {
    free(v);
    return st;
  }
  for (int i = 0; i < world * K; i++)
    if (v[i] < 0) v[i] = NAN;
  for (int q = 0; q < world && peak_gflops > 0; q++)   // rank 0's peak for every rank
    v[(size_t)q * K + 2] = isfinite(v[(size_t)q * K + 1]) ? v[(size_t)q * K + 1] / peak_gflops : NAN;
  static const double lim_comm = 0.30, lim_mm = 0.60, lim_reuse = 0.80;
  fprintf(out, "profile ratios over %lld step%s%s (thresholds: comm > 30%%, matmul < 60%%, reuse < 80%%; ! = "
          "breach):\n", (long long)(r->steps_all > 1 ? r->steps_all - 1 : 1), r->steps_all > 2 ? "s" : "",
          r->steps_all > 1 ? ", the first left out" : "");
  fprintf(out, "  %4s %11s %12s %11s %13s\n", "rank", "comm share", "matmul util", "mem reuse", "GEMM GFLOP/s");
  double worst[3] = {-1, 2, 2};
  int who[3] = {-1, -1, -1};
  for (int q = 0; q < world; q++) {
    const double *x = v + (size_t)q * K;
    char a[24], b[24], c[24];
    pct(a, sizeof a, x[0], x[0] > lim_comm);
    pct(b, sizeof b, x[2], x[2] < lim_mm);
    pct(c, sizeof c, x[3], x[3] < lim_reuse);
    fprintf(out, "  %4d %11s %12s %11s %13.1f\n", q, a, b, c, x[1]);
    if (x[0] > lim_comm && x[0] > worst[0]) { worst[0] = x[0]; who[0] = q; }
    if (x[2] < lim_mm && x[2] < worst[1]) { worst[1] = x[2]; who[1] = q; }
    if (x[3] < lim_reuse && x[3] < worst[2]) { worst[2] = x[3]; who[2] = q; }
    if (log) {
      fprintf(log, "{\"step\": %lld, \"ratios\": {\"rank\": %d, ", (long long)step, q);
      static const char *const key[K] = {"comm_share", "gemm_gflops", "matmul_util", "mem_reuse"};
      for (int k = 0; k < K; k++) {
        if (isfinite(x[k])) fprintf(log, "\"%s\": %.6g, ", key[k], x[k]);
        else fprintf(log, "\"%s\": null, ", key[k]);
      }
      if (peak_gflops > 0) fprintf(log, "\"peak_gflops\": %.6g}}\n", peak_gflops);
      else fprintf(log, "\"peak_gflops\": null}}\n");
    }
    static const char *const mkey[K] = {"comm_share", "gemm_gflops", "matmul_util", "mem_reuse"};
    for (int k = 0; k < K; k++) {   // the trace's otherData (profiling on)
      char mk[64];
      snprintf(mk, sizeof mk, "rank%d_%s", q, mkey[k]);
      ot_prof_meta(mk, x[k]);
    }
  }
  if (peak_gflops <= 0) fprintf(out, "  (matmul utilization needs the FMA peak, measured at start)\n");
  bool over = false;
  for (int q = 0; q < world; q++) over |= v[(size_t)q * K + 2] > 1.05;
  if (over)
    fprintf(out, "  (a utilization above 100%%: the FMA peak measured at start, %.1f GFLOP/s, was low: the machine "
            "was busy then, or ranks share its cores)\n", peak_gflops);
  if (who[0] >= 0)
    fprintf(out, "  comm share %.1f%% > 30%% (rank %d): the ranks wait on communication; give each exchange more "
            "work (--grad-accum, --batch-size), keep --overlap on, try fewer --grad-buckets, a smaller "
            "--tensor-parallel (two all-reduces per block and pass) or fewer --pipeline-stages, and do not let "
            "ranks share cores (ranks x OMP_NUM_THREADS <= cores, ot launch --bind core)\n", 100 * worst[0], who[0]);
  if (who[1] >= 0)
    fprintf(out, "  matmul utilization %.1f%% < 60%% (rank %d): the GEMMs are too small or starved; make them "
            "larger (--batch-size, --seq-len, a wider --d-model), give each rank its own cores, and use --dtype "
            "bf16 only where the CPU has native bf16 GEMMs (else they convert to f32)\n", 100 * worst[1], who[1]);
  if (who[2] >= 0)
    fprintf(out, "  memory reuse %.1f%% < 80%% (rank %d): steps allocate afresh instead of reusing the planned "
            "buffers; run longer than the warm-up, and report what allocates during the step (a cache or "
            "scratch block growing every step)\n", 100 * worst[2], who[2]);
  if (log) fflush(log);
  free(v);
  return OT_OK;
}
