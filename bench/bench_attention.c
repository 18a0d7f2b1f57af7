// Attention benchmark: flash vs materialized vs block-sparse, D=64, 12 heads,
// causal, batch 1, f32. For each T: forward and forward+backward time,
// GFLOP/s and peak working memory.
//   FLOPs (FlashAttention-2 convention): forward 4*T^2*D per head, halved for
//   causal; forward+backward = 3.5 x forward (backward = 2.5 x forward). The
//   same nominal count is used for the materialized baseline (which computes
//   the full T x T products), so its GFLOP/s are "effective". Block-sparse
//   counts only its active pairs (ot_attn_pairs), same factors.
//   Working memory: peak of OT_MEM_WORKSPACE during the call (ot_scratch and,
//   for the materialized one, its att/datt [H, T, T] f32 buffers, allocated
//   as workspace here), not counting q/k/v/o/lse and the gradients.
// Usage: bench_attention [T ...]   (default 512 1024 2048 4096 8192)
// Prints a table (medians of 5 runs, 1 at T > 4096; the three implementations'
// runs interleaved); asserts nothing.
#include "ot/ot.h"
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_stats.h"

#define H 12
#define D 64
#define MAT_MAX_BYTES 6.0e9  // skip the materialized baseline beyond this (att + datt)

typedef struct { double fwd, all; double peak; } result;

typedef struct {
  int T;
  float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv;
  float *att, *datt;
  ot_attn_shape s;
  ot_attn_sparse_layout l;
} prob;

typedef enum { FLASH, MAT, SPARSE } impl;
static const char *impl_name[] = {"flash", "materialized", "sparse b64 w3 g10"};

static ot_status run_fwd(impl m, prob *p) {
  switch (m) {
    case FLASH: return ot_attn_flash_fwd(OT_F32, p->o, p->lse, p->q, p->k, p->v, &p->s);
    case MAT: return ot_attn_mat_fwd(OT_F32, p->o, p->att, p->q, p->k, p->v, &p->s);
    default: return ot_attn_sparse_fwd(OT_F32, p->o, p->lse, p->q, p->k, p->v, &p->s, &p->l);
  }
}
static ot_status run_bwd(impl m, prob *p) {
  switch (m) {
    case FLASH:
      return ot_attn_flash_bwd(OT_F32, p->dq, p->dk, p->dv, p->dout, p->o, p->lse, p->q, p->k,
                               p->v, &p->s);
    case MAT:
      return ot_attn_mat_bwd(OT_F32, p->dq, p->dk, p->dv, p->datt, p->dout, p->att, p->q, p->k,
                             p->v, &p->s);
    default:
      return ot_attn_sparse_bwd(OT_F32, p->dq, p->dk, p->dv, p->dout, p->o, p->lse, p->q, p->k,
                                p->v, &p->s, &p->l);
  }
}

// Peak working memory of one (untimed) forward + backward from a released
// scratch; allocates the materialized baseline's att / datt, which stay
// allocated for the timed runs (freed by release()).
static int warm(impl m, prob *p, result *r) {
  const size_t tt = sizeof(float) * H * (size_t)p->T * p->T;
  ot_scratch_release();
  size_t base = ot_mem_current(OT_MEM_WORKSPACE);
  ot_mem_reset_peak();
  if (m == MAT) {
    p->att = ot_mem_alloc(tt, OT_MEM_WORKSPACE);
    p->datt = ot_mem_alloc(tt, OT_MEM_WORKSPACE);
    if (!p->att || !p->datt) { ot_mem_free(p->att); ot_mem_free(p->datt); p->att = p->datt = NULL; return -1; }
  }
  ot_status st = run_fwd(m, p);
  if (st == OT_OK) st = run_bwd(m, p);
  if (st != OT_OK) { fprintf(stderr, "%s T=%d: %s\n", impl_name[m], p->T, ot_last_error()); return -1; }
  r->peak = (double)(ot_mem_peak(OT_MEM_WORKSPACE) - base);
  return 0;
}

static void release(prob *p) {
  ot_mem_free(p->att); ot_mem_free(p->datt);
  p->att = p->datt = NULL;
}

// One timed forward and forward+backward of m (seconds).
static void time_once(impl m, prob *p, double *fwd, double *all) {
  double t0 = ot_now();
  run_fwd(m, p);
  double t1 = ot_now();
  run_bwd(m, p);
  double t2 = ot_now();
  *fwd = t1 - t0;
  *all = t2 - t0;
}

static float *falloc(size_t n, unsigned seed) {
  float *x = ot_mem_alloc(n * sizeof(float), OT_MEM_ACTIVATIONS);
  if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  return x;
}

static void row(int T, impl m, const result *r, double fl) {
  printf("%6d  %-18s %10.1f %9.1f %12.1f %9.1f %12.1f\n", T, impl_name[m], r->fwd * 1e3,
         fl / r->fwd * 1e-9, r->all * 1e3, 3.5 * fl / r->all * 1e-9, r->peak / 1048576.0);
}

int main(int argc, char **argv) {
  int Ts[16] = {512, 1024, 2048, 4096, 8192}, nT = 5;
  if (argc > 1) {
    nT = 0;
    for (int i = 1; i < argc && nT < 16; i++) Ts[nT++] = atoi(argv[i]);
  }
  printf("attention benchmark: batch 1, %d heads, D=%d, causal, f32, %d threads, isa %s\n", H, D,
         ot_threads_get(), ot_isa_name(ot_isa_active()));
  printf("%6s  %-18s %10s %9s %12s %9s %12s\n", "T", "impl", "fwd ms", "GFLOP/s", "fwd+bwd ms",
         "GFLOP/s", "peak work MB");
  result keep[16][3];
  memset(keep, 0, sizeof keep);
  for (int ti = 0; ti < nT; ti++) {
    const int T = Ts[ti];
    const size_t n = (size_t)H * T * D;
    prob p;
    memset(&p, 0, sizeof p);
    p.T = T;
    p.q = falloc(n, 1); p.k = falloc(n, 2); p.v = falloc(n, 3); p.dout = falloc(n, 4);
    p.o = falloc(n, 5); p.dq = falloc(n, 6); p.dk = falloc(n, 7); p.dv = falloc(n, 8);
    p.lse = falloc((size_t)H * T, 9);
    ot_attn_shape s = {1, H, H, T, T, D, true, NULL, 0.0f};
    ot_attn_sparse_layout l = {64, 3, 10};
    p.s = s; p.l = l;
    const int reps = T <= 4096 ? 5 : 1;
    const double fl_dense = 4.0 * T * (double)T * D * H / 2;
    const double fl_sparse = 4.0 * D * H * ot_attn_pairs(&s, &l);
    // warm-up / peak memory of each, then the timed runs interleaved (flash,
    // materialized, sparse, flash, ...) so that all see the same machine load
    // (a shared machine's load drifts over the tens of seconds a T takes)
    bool on[3] = {false, false, false};
    result r[3];
    double tf[3][64], ta[3][64];
    for (int mi = 0; mi < 3; mi++) {
      impl m = (impl)mi;
      if (m == MAT && 2.0 * sizeof(float) * H * (double)T * T > MAT_MAX_BYTES) continue;
      on[mi] = warm(m, &p, &r[mi]) == 0;
    }
    for (int i = 0; i < reps; i++)
      for (int mi = 0; mi < 3; mi++)
        if (on[mi]) time_once((impl)mi, &p, &tf[mi][i], &ta[mi][i]);
    release(&p);
    for (int mi = 0; mi < 3; mi++) {
      impl m = (impl)mi;
      if (m == MAT && 2.0 * sizeof(float) * H * (double)T * T > MAT_MAX_BYTES) {
        printf("%6d  %-18s %s\n", T, impl_name[m], "(skipped: att + datt would exceed 6 GB)");
        continue;
      }
      if (!on[mi]) continue;
      r[mi].fwd = median(tf[mi], reps);
      r[mi].all = median(ta[mi], reps);
      keep[ti][mi] = r[mi];
      row(T, m, &r[mi], m == SPARSE ? fl_sparse : fl_dense);
    }
    fflush(stdout);
    ot_mem_free(p.q); ot_mem_free(p.k); ot_mem_free(p.v); ot_mem_free(p.dout);
    ot_mem_free(p.o); ot_mem_free(p.dq); ot_mem_free(p.dk); ot_mem_free(p.dv); ot_mem_free(p.lse);
  }
  printf("\n");
  for (int ti = 0; ti < nT; ti++) {
    const result *f = &keep[ti][FLASH], *m = &keep[ti][MAT], *sp = &keep[ti][SPARSE];
    if (f->all > 0 && m->all > 0)
      printf("T=%d: flash fwd+bwd %.2fx faster than materialized, %.0fx less working memory\n",
             Ts[ti], m->all / f->all, m->peak / f->peak);
    if (f->all > 0 && sp->all > 0)
      printf("T=%d: block-sparse fwd+bwd %.2fx faster than dense flash\n", Ts[ti], f->all / sp->all);
  }
  ot_scratch_release();
  return 0;
}
