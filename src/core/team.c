// A work split that never waits for a thread the OS has descheduled
// (ot__team_for, contract in internal.h).
//
// Why: an OpenMP parallel region ends in a barrier, so every region of a
// decode step waits for each of its threads. When another process holds one
// of two cores, the thread that shares that core runs only in the scheduler's
// slices, and each region waits for its next slice: single-stream decode of the
// small model fell to 20% of its speed (bench_infer --busy-core).
//
// How: the caller and T - 1 helper threads (created once, spinning a while after
// each job, then sleeping) take items from one counter. The caller never waits
// for a helper that has not started: it simply takes the items itself. An item a
// helper has taken is computed into the helper's own buffer and copied out
// after a compare-and-swap from HELPER to COMMIT; when the caller has run out of
// items it waits a short grace for the helpers' items, then steals the rest
// (HELPER -> STOLEN) and computes them itself, so a helper preempted in the
// middle of an item costs the caller one item, not a time slice. A stolen item's
// helper finds its swap refused and drops its result. Item i's result depends
// only on i and the job, so who computes it does not change a bit.
//
// A helper that was preempted may go on reading the job's inputs after the
// caller returned (its result then dropped): transient inputs go into the
// team's own buffer (ot__team_buf, which stays mapped), and memory freed while
// a helper may still read it (weights, caches) is freed after ot__team_quiesce.
// Callers that cannot promise that run with steal = false: the caller then
// waits for the items helpers hold (still never for a helper that holds none).
// The team's buffers (scratch per thread, result buffers, ot__team_buf) are
// tracked allocations (OT_MEM_WORKSPACE): they show in the memory report.
#define _GNU_SOURCE
#include "internal.h"
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TEAM_MAX 16             // helpers at most
#define TEAM_SPIN_S 50e-6       // a helper spins this long for the next job, then sleeps
#define TEAM_GRACE_MIN 2e-6     // the caller waits at least this long before stealing
enum { ST_FREE, ST_CALLER, ST_HELPER, ST_COMMIT, ST_DONE, ST_STOLEN };

#if defined(__x86_64__) || defined(__i386__)
#define PAUSE() __builtin_ia32_pause()
#else
#define PAUSE() ((void)0)
#endif

typedef struct {
  pthread_t th;
  float *out;                   // the helper's own result buffer (only it touches it)
  size_t out_cap;               // floats
  float *scratch;               // OT_TEAM_SCRATCH floats
  _Atomic int active;           // inside a job (ot__team_quiesce waits for 0)
  _Atomic unsigned seq;         // the job's seq while active
} helper;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic int owner;            // 1 while a caller runs a job (one caller at a time)
  _Atomic unsigned seq;         // odd: a job being published; even: job seq / 2 published
  _Atomic unsigned long long next;   // (job << 32) | next item
  _Atomic unsigned long long st[OT_TEAM_ITEMS_MAX];   // (job << 8) | ST_*
  _Atomic double taken[OT_TEAM_ITEMS_MAX];   // ot_now() when a helper took the item
  _Atomic int sleepers;
  _Atomic int nhelp;            // helpers that may join the current job
  int nthreads;                 // helpers created
  // the job (copied by each helper, checked against seq)
  ot__team_fn fn;
  float *out;
  long total, n;
  int w;
  _Alignas(64) unsigned char ctx[OT_TEAM_CTX_MAX];   // aligned for any job struct
  size_t ctx_size;
  // caller side
  float *scratch;               // the caller's OT_TEAM_SCRATCH floats
  char *buf;                    // ot__team_buf
  size_t buf_cap;
  helper h[TEAM_MAX];
} g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static double g_grace_s = -1.0;   // < 0: automatic

static float *grow(float *p, size_t *cap, size_t need) {
  if (need <= *cap) return p;
  ot_mem_free(p);
  size_t c = *cap ? *cap : 1024;
  while (c < need) c *= 2;
  p = ot_mem_alloc(c * sizeof(float), OT_MEM_WORKSPACE);
  *cap = p ? c : 0;
  return p;
}

// One item run by helper h for job j (copied); false if the job is over for it.
static void helper_job(helper *h, unsigned j, ot__team_fn fn, float *out, long total, long n, int w,
                       const unsigned char *ctx) {
  if (!(h->out = grow(h->out, &h->out_cap, (size_t)total))) return;
  for (;;) {
    const unsigned long long v = atomic_fetch_add(&g.next, 1);
    if ((unsigned)(v >> 32) != j || (long)(v & 0xffffffffu) >= n) return;
    const long i = (long)(v & 0xffffffffu);
    unsigned long long s = ((unsigned long long)j << 8) | ST_FREE;
    atomic_store_explicit(&g.taken[i], ot_now(), memory_order_relaxed);
    if (!atomic_compare_exchange_strong(&g.st[i], &s, ((unsigned long long)j << 8) | ST_HELPER)) continue;
    fn(ctx, i, h->out, h->scratch);
    s = ((unsigned long long)j << 8) | ST_HELPER;
    if (!atomic_compare_exchange_strong(&g.st[i], &s, ((unsigned long long)j << 8) | ST_COMMIT)) continue;
    const long a = i * w, b = a + w < total ? a + w : total;
    memcpy(out + a, h->out + a, sizeof(float) * (size_t)(b - a));
    atomic_store_explicit(&g.st[i], ((unsigned long long)j << 8) | ST_DONE, memory_order_release);
  }
}

static void *helper_main(void *arg) {
  helper *h = arg;
  const int id = (int)(h - g.h);
  unsigned seen = atomic_load(&g.seq);
  _Alignas(64) unsigned char ctx[OT_TEAM_CTX_MAX];   // aligned for any job struct
  for (;;) {
    // wait for a new published job: spin, then sleep
    unsigned s;
    double t0 = 0.0;
    for (int k = 0;; k++) {
      s = atomic_load(&g.seq);
      if (s != seen && !(s & 1)) break;
      PAUSE();
      if ((k & 255) == 255) {
        const double t = ot_now();
        if (t0 == 0.0) t0 = t;
        else if (t - t0 > TEAM_SPIN_S) {
          pthread_mutex_lock(&g.mu);
          atomic_fetch_add(&g.sleepers, 1);
          while ((s = atomic_load(&g.seq)) == seen || (s & 1)) pthread_cond_wait(&g.cv, &g.mu);
          atomic_fetch_sub(&g.sleepers, 1);
          pthread_mutex_unlock(&g.mu);
          break;
        }
      }
    }
    seen = s;
    if (id >= atomic_load(&g.nhelp)) continue;
    atomic_store(&h->seq, s);
    atomic_store(&h->active, 1);
    // copy the job, then check that it was not being replaced meanwhile (seqlock)
    const ot__team_fn fn = g.fn;
    float *out = g.out;
    const long total = g.total, n = g.n;
    const int w = g.w;
    memcpy(ctx, g.ctx, g.ctx_size <= OT_TEAM_CTX_MAX ? g.ctx_size : OT_TEAM_CTX_MAX);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load(&g.seq) == s) helper_job(h, s / 2, fn, out, total, n, w, ctx);
    atomic_store(&h->active, 0);
  }
  return NULL;
}

static void after_fork_child(void) {
  // the helpers do not exist in the child: start over (their buffers are leaked)
  g.nthreads = 0;
  atomic_store(&g.owner, 0);
  atomic_store(&g.sleepers, 0);
  for (int i = 0; i < TEAM_MAX; i++) g.h[i] = (helper){0};
  pthread_mutex_init(&g.mu, NULL);
  pthread_cond_init(&g.cv, NULL);
}

// Creates helpers up to `want` (called by the owning caller only).
static int ensure_helpers(int want) {
  static int atfork;
  if (!atfork) { pthread_atfork(NULL, NULL, after_fork_child); atfork = 1; }
  if (!g.scratch && !(g.scratch = ot_mem_alloc(sizeof(float) * OT_TEAM_SCRATCH, OT_MEM_WORKSPACE))) return 0;
  while (g.nthreads < want) {
    helper *h = &g.h[g.nthreads];
    if (!h->scratch && !(h->scratch = ot_mem_alloc(sizeof(float) * OT_TEAM_SCRATCH, OT_MEM_WORKSPACE))) break;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    const int rc = pthread_create(&h->th, &at, helper_main, h);
    pthread_attr_destroy(&at);
    if (rc) break;
    g.nthreads++;
  }
  return g.nthreads < want ? g.nthreads : want;
}

int ot__team_size(void) {
  if (omp_in_parallel()) return 1;
  const int t = omp_get_max_threads();
  return t < 1 ? 1 : t > TEAM_MAX + 1 ? TEAM_MAX + 1 : t;
}

void ot__team_set_grace(double s) { g_grace_s = s; }

static _Thread_local bool g_owner;   // this thread holds the team

// Waits for the helpers inside a job published before this call (a later job's
// helpers are not reading anything freed before it).
void ot__team_quiesce(void) {
  const unsigned cur = atomic_load(&g.seq);
  for (int i = 0; i < g.nthreads; i++)
    while (atomic_load(&g.h[i].active) && (int)(atomic_load(&g.h[i].seq) - cur) <= 0) sched_yield();
}

void *ot__team_buf(size_t bytes) {
  if (!g_owner) return NULL;
  if (bytes <= g.buf_cap) return g.buf;
  ot__team_quiesce();   // no helper may still read the old buffer
  ot_mem_free(g.buf);
  size_t c = g.buf_cap ? g.buf_cap : 4096;
  while (c < bytes) c *= 2;
  g.buf = ot_mem_alloc(c, OT_MEM_WORKSPACE);
  g.buf_cap = g.buf ? c : 0;
  return g.buf;
}

static _Atomic long g_nc, g_nh, g_ns, g_nj;   // statistics: items by caller, helpers, stolen; jobs

void ot__team_get_stats(ot__team_stats *st) {
  st->caller = atomic_load(&g_nc);
  st->helper = atomic_load(&g_nh);
  st->stolen = atomic_load(&g_ns);
  st->jobs = atomic_load(&g_nj);
}

static _Thread_local bool g_steal;
bool ot__team_steal_set(bool on) {
  const bool was = g_steal;
  g_steal = on;
  return was;
}
bool ot__team_steal_get(void) { return g_steal; }

bool ot__team_acquire(void) {
  if (g_owner) return true;
  int expect = 0;
  if (ot__team_size() < 2 || !atomic_compare_exchange_strong(&g.owner, &expect, 1)) return false;
  if (ensure_helpers(ot__team_size() - 1) < 1) {
    atomic_store(&g.owner, 0);
    return false;
  }
  g_owner = true;
  return true;
}

void ot__team_release(void) {
  if (!g_owner) return;
  g_owner = false;
  atomic_store(&g.owner, 0);
}

ot_status ot__team_for(float *out, long total, int w, ot__team_fn fn, const void *ctx, size_t ctx_size,
                       bool steal) {
  if (total <= 0) return OT_OK;
  if (w < 1 || ctx_size > OT_TEAM_CTX_MAX)
    return ot_error(OT_EINTERNAL, "ot__team_for: w=%d, ctx_size=%zu (most %d)", w, ctx_size, OT_TEAM_CTX_MAX);
  const long n = (total + w - 1) / w;
  if (n > OT_TEAM_ITEMS_MAX)
    return ot_error(OT_EINTERNAL, "ot__team_for: %ld items, most %d", n, OT_TEAM_ITEMS_MAX);
  const int nh = g_owner ? (g.nthreads < ot__team_size() - 1 ? g.nthreads : ot__team_size() - 1) : 0;
  if (nh < 1 || n < 2) {   // every item here
    float *sc = g_owner ? g.scratch : ot_scratch_slot(OT_SCRATCH_TEAM, sizeof(float) * OT_TEAM_SCRATCH);
    if (!sc) return OT_ENOMEM;
    for (long i = 0; i < n; i++) fn(ctx, i, out, sc);
    atomic_fetch_add(&g_nc, n);
    return OT_OK;
  }
  // publish: seq odd while the job is written, even once it is
  const unsigned s0 = atomic_load(&g.seq) + 1;
  atomic_store(&g.seq, s0);
  const unsigned j = (s0 + 1) / 2;
  g.fn = fn; g.out = out; g.total = total; g.n = n; g.w = w; g.ctx_size = ctx_size;
  memcpy(g.ctx, ctx, ctx_size);
  for (long i = 0; i < n; i++)
    atomic_store_explicit(&g.st[i], ((unsigned long long)j << 8) | ST_FREE, memory_order_relaxed);
  atomic_store(&g.nhelp, nh);
  atomic_store(&g.next, (unsigned long long)j << 32);
  atomic_store(&g.seq, s0 + 1);
  if (atomic_load(&g.sleepers) > 0) {
    pthread_mutex_lock(&g.mu);
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
  }
  // the caller's share: whatever the helpers have not taken
  const double t0 = ot_now();
  long mine = 0, stolen = 0;
  for (;;) {
    const unsigned long long v = atomic_fetch_add(&g.next, 1);
    const long i = (long)(v & 0xffffffffu);
    if (i >= n) break;
    unsigned long long s = ((unsigned long long)j << 8) | ST_FREE;
    if (!atomic_compare_exchange_strong(&g.st[i], &s, ((unsigned long long)j << 8) | ST_CALLER)) continue;
    fn(g.ctx, i, out, g.scratch);
    atomic_store_explicit(&g.st[i], ((unsigned long long)j << 8) | ST_DONE, memory_order_relaxed);
    mine++;
  }
  // the helpers' items: one a helper took more than about two of the caller's
  // items ago is late (its helper has most likely lost its core): steal it
  const double grace = g_grace_s >= 0.0 ? g_grace_s
                       : (mine ? 2.0 * (ot_now() - t0) / (double)mine : 0.0) + TEAM_GRACE_MIN;
  for (long i = 0; i < n; i++) {
    for (int k = 0;; k++) {
      unsigned long long s = atomic_load_explicit(&g.st[i], memory_order_acquire);
      const int st = (int)(s & 0xff);
      if (st == ST_DONE || st == ST_CALLER) break;
      const bool late = steal && st == ST_HELPER &&
                        (grace <= 0.0 || ot_now() - atomic_load_explicit(&g.taken[i], memory_order_relaxed) > grace);
      // FREE: a helper counted it but has not claimed it (or was preempted in between)
      if (st == ST_FREE || (st == ST_HELPER && late)) {
        if (atomic_compare_exchange_strong(&g.st[i], &s, ((unsigned long long)j << 8) | ST_STOLEN)) {
          fn(g.ctx, i, out, g.scratch);
          stolen++;
          break;
        }
        continue;
      }
      PAUSE();
      if (!steal && (k & 1023) == 1023) sched_yield();
    }
  }
  atomic_fetch_add(&g_nc, mine);
  atomic_fetch_add(&g_ns, stolen);
  atomic_fetch_add(&g_nh, n - mine - stolen);
  atomic_fetch_add(&g_nj, 1);
  return OT_OK;
}
