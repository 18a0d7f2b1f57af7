// The work split that never waits for a descheduled thread (ot__team_for,
// src/core/team.c) and the decode kernels that run on it:
// - every split gives the reference result: 1 to 4 threads, totals that items
//   do not divide, one item, steal on and off, stealing at once (grace 0);
// - a helper that sleeps in the middle of an item (as a descheduled thread
//   would) does not hold the caller: with steal the call returns long before
//   the helper wakes, the item stolen and the helper's late result dropped (the
//   output is not touched after the return); without steal the caller waits;
// - the M = 1 GEMV (f32 / bf16 / int8 weights, ot_qlinear_fwd and the f32
//   ot_linear_fwd routed to it), ot_attn_decode and ot_attn_paged_decode on the
//   team: bitwise equal for every thread count and grace, close to the references.
#include "harness.h"
#include "internal.h"
#include "ot/quant.h"
#include "ot/attn.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static pthread_t g_main;
static _Atomic int g_sleep_once;   // 1: the first item a helper takes sleeps g_sleep_us
static int g_sleep_us;

// item i: out[a..b) = a value of (salt, index); every float depends only on them
typedef struct { long total; int w; uint32_t salt; int spin, helper_us; } job;
static float val(uint32_t salt, long k) {
  uint32_t h = (uint32_t)k * 2654435761u ^ salt;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
  return (float)(h & 0xffff) - 32768.0f;
}
static void item(const void *ctx, long i, float *dst, float *scratch) {
  const job *j = ctx;
  scratch[0] = 1.0f;   // the scratch is writable
  if (!pthread_equal(pthread_self(), g_main)) {
    int one = 1;
    if (atomic_compare_exchange_strong(&g_sleep_once, &one, 0)) usleep((useconds_t)g_sleep_us);
    if (j->helper_us) usleep((useconds_t)j->helper_us);   // a slow helper: the caller steals its items
  }
  for (volatile int s = 0; s < j->spin; s++) {}
  const long a = i * j->w, b = a + j->w < j->total ? a + j->w : j->total;
  for (long k = a; k < b; k++) dst[k] = val(j->salt, k);
}

static bool run(job *j, float *out, bool steal) {
  for (long k = 0; k < j->total; k++) out[k] = -1e30f;
  const bool held = ot__team_acquire();
  const ot_status s = ot__team_for(out, j->total, j->w, item, j, sizeof *j, steal);
  if (held) ot__team_release();
  bool ok = s == OT_OK;
  for (long k = 0; k < j->total && ok; k++) ok = out[k] == val(j->salt, k);
  return ok;
}

static void test_splits(void) {
  const int nt0 = ot_threads_get();
  static const long totals[] = {1, 2, 7, 100, 1000, 4099};
  static const int ws[] = {1, 3, 7, 64, 1000};
  static const double graces[] = {-1.0, 0.0, 1.0};
  float *out = th_alloc(sizeof(float) * 4099);
  ot__team_stats s0, s1;
  ot__team_get_stats(&s0);
  int bad = 0, cases = 0;
  for (int t = 1; t <= 4; t++) {
    ot_threads_set(t);
    for (int gi = 0; gi < 3; gi++) {
      ot__team_set_grace(graces[gi]);
      for (size_t ti = 0; ti < sizeof totals / sizeof *totals; ti++)
        for (size_t wi = 0; wi < sizeof ws / sizeof *ws; wi++)
          for (int steal = 0; steal < 2; steal++) {
            job j = {totals[ti], ws[wi], (uint32_t)(ti * 131 + wi * 7 + (size_t)steal), 2000,
                     graces[gi] == 0.0 ? 100 : 0};
            if ((j.total + j.w - 1) / j.w > OT_TEAM_ITEMS_MAX) continue;
            cases++;
            if (!run(&j, out, steal) && bad++ < 5)
              th_check(false, "team: %d threads, total %ld, w %d, steal %d, grace %g: wrong output", t,
                       j.total, j.w, steal, graces[gi]);
          }
    }
  }
  ot__team_set_grace(-1.0);
  ot_threads_set(nt0);
  ot__team_get_stats(&s1);
  th_check(bad == 0, "team: %d splits give the reference output", cases);
  // the helpers did take items (the split is not all in the caller); stealing
  // is checked below (on a loaded machine the caller and a helper seldom run
  // at the same time, so steals here are not guaranteed)
  th_check(s1.helper > s0.helper, "team: helpers computed %ld items (%ld stolen)", s1.helper - s0.helper,
           s1.stolen - s0.stolen);
  // too many items, too large a context: an error, nothing run
  job j = {OT_TEAM_ITEMS_MAX + 1, 1, 0, 0, 0};
  th_check_error(ot__team_for(out, j.total, 1, item, &j, sizeof j, false), OT_EINTERNAL, "items",
                 "team: too many items");
  th_check_error(ot__team_for(out, 10, 1, item, &j, OT_TEAM_CTX_MAX + 1, false), OT_EINTERNAL, "ctx_size",
                 "team: too large a context");
  free(out);
}

// A helper sleeping 400 ms inside its first item, as a descheduled one would.
static void test_descheduled(void) {
  const int nt0 = ot_threads_get();
  ot_threads_set(2);
  float *out = th_alloc(sizeof(float) * 4096);
  g_sleep_us = 400000;
  for (int steal = 1; steal >= 0; steal--) {
    ot__team_stats s0, s1;
    bool slept = false, ok = true;
    double dt = 0.0;
    // until a helper has taken an item (and so slept): a busy machine may keep it off a core
    for (int tries = 0; tries < 200 && !slept; tries++) {
      ot__team_get_stats(&s0);
      atomic_store(&g_sleep_once, 1);
      job j = {4096, 64, (uint32_t)tries, 20000, 0};
      const double t0 = ot_now();
      ok = run(&j, out, steal);
      dt = ot_now() - t0;
      slept = atomic_load(&g_sleep_once) == 0;
      if (!slept) continue;
      if (steal) {
        // the output must not change once the call has returned
        for (int k = 0; k < 4096; k++) out[k] = 7.0f;
        ot__team_quiesce();   // the sleeping helper wakes, finds its item stolen, drops it
        bool kept = true;
        for (int k = 0; k < 4096; k++) kept &= out[k] == 7.0f;
        th_check(kept, "team: a stolen item's late result is dropped");
      }
      ot__team_get_stats(&s1);
    }
    atomic_store(&g_sleep_once, 0);
    if (!th_check(slept, "team (steal %d): a helper took an item in 200 tries", steal)) continue;
    th_check(ok, "team (steal %d): output with a sleeping helper", steal);
    if (steal) {
      th_check(dt < 0.2, "team: the caller did not wait for the sleeping helper (%.3f s, it sleeps 0.4 s)", dt);
      th_check(s1.stolen > s0.stolen, "team: the sleeping helper's item was stolen");
    } else {
      th_check(dt >= 0.3, "team without steal: the caller waited for the helper's item (%.3f s)", dt);
    }
  }
  ot__team_quiesce();
  free(out);
  ot_threads_set(nt0);
}

// GEMV (M = 1) on the team: bitwise equal over threads and graces, close to the reference.
static void test_gemv(void) {
  const int nt0 = ot_threads_get();
  static const int shapes[][2] = {{768, 256}, {1000, 333}, {8192, 256}, {50, 64}, {2304, 768}, {97, 1024}};
  th_rng r = {42};
  int bad = 0, cases = 0;
  const bool st0 = ot__team_steal_set(true);
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int N = shapes[si][0], K = shapes[si][1];
    float *w = th_alloc(sizeof(float) * (size_t)N * K), *x = th_alloc(sizeof(float) * K);
    float *b = th_alloc(sizeof(float) * N), *y0 = th_alloc(sizeof(float) * N), *y = th_alloc(sizeof(float) * N);
    float *yr = th_alloc(sizeof(float) * N);
    th_fill(&r, w, (size_t)N * K, -1.0f, 1.0f);
    th_fill(&r, x, K, -1.0f, 1.0f);
    th_fill(&r, b, N, -1.0f, 1.0f);
    for (int kind = 0; kind < 4; kind++) {   // f32, bf16, int8 per row, int8 groups of 64
      ot_qweight q;
      const ot_qw_kind k = kind == 0 ? OT_QW_F32 : kind == 1 ? OT_QW_BF16 : OT_QW_INT8;
      const int group = kind == 3 && K % 64 == 0 ? 64 : 0;
      if (ot_qweight_quantize(&q, k, group, w, N, K) != OT_OK) { th_check(false, "quantize: %s", ot_last_error()); continue; }
      ot_ref_qlinear_fwd(yr, x, &q, b, 1);
      ot_threads_set(1);
      ot_qlinear_fwd(y0, x, &q, b, 1);
      th_check_nerr(y0, yr, N, 1e-5, "gemv %s g%d %dx%d, 1 thread vs reference", ot_qw_kind_name(k), group, N, K);
      for (int t = 2; t <= 3; t++)
        for (int gi = 0; gi < 2; gi++) {
          ot_threads_set(t);
          ot__team_set_grace(gi ? 0.0 : -1.0);
          ot_qlinear_fwd(y, x, &q, b, 1);
          cases++;
          if (memcmp(y, y0, sizeof(float) * N) && bad++ < 5)
            th_check(false, "gemv %s g%d %dx%d: %d threads (grace %s) differ from 1 thread", ot_qw_kind_name(k),
                     group, N, K, t, gi ? "0" : "auto");
        }
      ot_qweight_free(&q);
    }
    // f32 linear and QKV at M = 1: the GEMV path, equal for every thread count
    ot_threads_set(1);
    th_check(ot_linear_fwd(OT_F32, y0, NULL, x, w, b, 1, N, K, OT_ACT_NONE) == OT_OK, "linear M=1");
    ot_qweight q;
    ot_qweight_quantize(&q, OT_QW_F32, 0, w, N, K);
    ot_ref_qlinear_fwd(yr, x, &q, b, 1);
    ot_qweight_free(&q);
    th_check_nerr(y0, yr, N, 1e-5, "linear M=1 %dx%d vs reference", N, K);
    for (int t = 2; t <= 3; t++) {
      ot_threads_set(t);
      ot__team_set_grace(0.0);
      ot_linear_fwd(OT_F32, y, NULL, x, w, b, 1, N, K, OT_ACT_NONE);
      cases++;
      if (memcmp(y, y0, sizeof(float) * N) && bad++ < 5)
        th_check(false, "linear M=1 %dx%d: %d threads differ from 1", N, K, t);
    }
    ot__team_set_grace(-1.0);
    ot__team_quiesce();   // with steal, a preempted helper may still read w (the contract)
    free(w); free(x); free(b); free(y0); free(y); free(yr);
  }
  ot__team_steal_set(st0);
  ot_threads_set(nt0);
  th_check(bad == 0, "gemv on the team: %d thread / grace cases bitwise equal to 1 thread", cases);
}

// ot_attn_decode on the team: bitwise equal over threads and graces, close to flash.
static void test_attn(void) {
  const int nt0 = ot_threads_get();
  int32_t kvl[2] = {300, 1111};
  ot_attn_shape s = {2, 6, 3, 1, 1200, 64, true, kvl, 0.0f, 0.0f, 0, 0};
  const size_t nq = (size_t)2 * 6 * 64, nk = (size_t)2 * 3 * 1200 * 64;
  th_rng r = {9};
  float *q = th_alloc(nq * 4), *k = th_alloc(nk * 4), *v = th_alloc(nk * 4);
  float *o0 = th_alloc(nq * 4), *o = th_alloc(nq * 4), *l0 = th_alloc(12 * 4), *l = th_alloc(12 * 4);
  th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, k, nk, 1.0f); th_fill_normal(&r, v, nk, 1.0f);
  ot_threads_set(1);
  th_check(ot_attn_decode(OT_F32, o0, l0, q, k, v, &s) == OT_OK, "attn decode, 1 thread");
  const bool st0 = ot__team_steal_set(true);
  int bad = 0;
  for (int t = 2; t <= 4; t++)
    for (int gi = 0; gi < 2; gi++) {
      ot_threads_set(t);
      ot__team_set_grace(gi ? 0.0 : -1.0);
      th_check(ot_attn_decode(OT_F32, o, l, q, k, v, &s) == OT_OK, "attn decode, %d threads", t);
      if ((memcmp(o, o0, nq * 4) || memcmp(l, l0, 12 * 4)) && bad++ < 3)
        th_check(false, "attn decode: %d threads (grace %s) differ from 1 thread", t, gi ? "0" : "auto");
    }
  th_check(bad == 0, "attn decode on the team: bitwise equal to 1 thread");
  ot__team_set_grace(-1.0);
  ot__team_steal_set(st0);
  ot_threads_set(nt0);
  ot__team_quiesce();
  free(q); free(k); free(v); free(o0); free(o); free(l0); free(l);
}

// ot_attn_paged_decode with one chunk per row (the team path) and with longer
// rows (OpenMP): bitwise equal over threads and graces, close to the reference.
static void test_paged(void) {
  const int nt0 = ot_threads_get();
  const int n = 3, Hq = 6, Hkv = 3, D = 40, bt = 16, nb = 64, ts = 32;
  const size_t bs = (size_t)bt * D, hs = (size_t)nb * bs, nkv = (size_t)Hkv * hs;
  th_rng r = {11};
  float *k = th_alloc(nkv * 4), *v = th_alloc(nkv * 4), *q = th_alloc((size_t)n * Hq * D * 4);
  const size_t no = (size_t)n * Hq * D;
  float *o0 = th_alloc(no * 4), *o = th_alloc(no * 4), *orf = th_alloc(no * 4);
  int32_t tab[3 * 32], kvl[3];
  th_fill_normal(&r, k, nkv, 1.0f); th_fill_normal(&r, v, nkv, 1.0f); th_fill_normal(&r, q, no, 1.0f);
  for (int i = 0; i < 3 * 32; i++) tab[i] = (int32_t)((i * 37 + 5) % nb);
  static const int lens[2][3] = {{200, 77, 256}, {300, 41, 500}};   // one chunk each; longer rows
  const bool st0 = ot__team_steal_set(true);
  for (int li = 0; li < 2; li++) {
    for (int i = 0; i < 3; i++) kvl[i] = lens[li][i];
    ot_paged_attn p = {n, Hq, Hkv, D, bt, nb, OT_F32, k, v, bs, hs, tab, ts, kvl, 0.0f};
    ot_ref_attn_paged_decode(orf, Hq * D, q, Hq * D, &p);
    ot_threads_set(1);
    th_check(ot_attn_paged_decode(o0, Hq * D, q, Hq * D, &p) == OT_OK, "paged, 1 thread");
    th_check_nerr(o0, orf, no, 1e-5, "paged (lengths %d %d %d) vs reference", kvl[0], kvl[1], kvl[2]);
    int bad = 0;
    ot__team_stats s0, s1;
    ot__team_get_stats(&s0);
    for (int t = 2; t <= 3; t++)
      for (int gi = 0; gi < 2; gi++) {
        ot_threads_set(t);
        ot__team_set_grace(gi ? 0.0 : -1.0);
        ot_attn_paged_decode(o, Hq * D, q, Hq * D, &p);
        bad += memcmp(o, o0, no * 4) != 0;
      }
    ot__team_get_stats(&s1);
    th_check((s1.jobs > s0.jobs) == (li == 0), "paged: the team runs the one-chunk rows (%ld jobs), not longer ones",
             s1.jobs - s0.jobs);
    th_check(bad == 0, "paged (lengths %d %d %d): every thread count and grace bitwise equal to 1 thread",
             kvl[0], kvl[1], kvl[2]);
  }
  ot__team_set_grace(-1.0);
  ot__team_steal_set(st0);
  ot_threads_set(nt0);
  ot__team_quiesce();
  free(k); free(v); free(q); free(o0); free(o); free(orf);
}

int main(void) {
  g_main = pthread_self();
  test_splits();
  test_descheduled();
  test_gemv();
  test_attn();
  test_paged();
  return th_finish();
}
