// Which GEMM runs a given shape: the own blocked GEMM (gemm_own.c) or oneDNN
// (gemm.c, with its conversion path for bf16 on CPUs without native bf16).
// By default (OT_GEMM=auto) the choice is measured at the first call of each
// (M and K each rounded up to a power of two past 64, N, dtypes, transposes,
// leading dimensions, bias, GELU, beta != 0; M and K are the dimensions that
// follow the batch: rows in the forward and the input gradient, the
// contraction over rows in the weight gradient, so a run whose batches vary
// in length measures a few shapes, not one per batch):
//  - both run on a slice of the problem (C cut to 8 MiB and 2 GFLOP of work
//    along its longer side, down to 512; the contraction cut only past 100
//    GFLOP; C copied to a block of its own, freed after: ot_gemm_scratch_of's
//    choice_ws, never written): one untimed run
//    each, then PICK_SAMPLES timed runs each, alternating;
//  - the own GEMM is kept when its fastest run beats oneDNN's by PICK_MARGIN
//    (the fastest: the run least disturbed by other work on the cores)
//    (oneDNN, the incumbent, keeps near-ties, so that a noisy measurement
//    rarely changes a process's choice from another's);
//  - every call of the shape, the first included, then runs the chosen one, so
//    results within a process never mix the two (recompute, repeated steps and
//    threads give the same bits).
// Shapes below PICK_MIN_FLOPS (1 GFLOP) are not measured (oneDNN runs them;
// ot_gemm_may_measure decides it for the engine and the planner alike):
// decode steps and short prompts pay no measurement in their latency, timings of
// a few milliseconds decide little, and small models stay reproducible bit for
// bit from one process to the next. Across processes a choice can differ where
// the two are within the noise; OT_GEMM=own or OT_GEMM=onednn fixes it for
// every shape (bitwise-reproducible runs). OT_GEMM_VERBOSE=1 prints each choice
// with its timings. The table keeps at most PICK_MAX shapes, then starts over.
#include "gemm_impl.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PICK_SAMPLES 3
#define PICK_MARGIN 0.05
#define PICK_MIN_FLOPS 1e9         // 2 M N K
#define PICK_SLICE_BYTES ((size_t)8 << 20)
#define PICK_SLICE_FLOPS 2e9
#define PICK_SLICE_MIN 512        // rows (or columns) a slice keeps at least
#define PICK_SLICE_KCUT 50         // the contraction is cut only past this many PICK_SLICE_FLOPS
#define PICK_MAX 4096

typedef struct {
  int32_t M, N, K, lda, ldb, ldc;
  uint8_t adt, bdt, cdt, ta, tb, bias, gelu, beta;
} pick_key;

typedef struct {
  pick_key key;
  int used;                 // 0 free slot
  int choice;               // -1 not measured yet, 0 oneDNN, 1 own
} pick_entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;          // the table
static pthread_mutex_t g_measure_mu = PTHREAD_MUTEX_INITIALIZER;  // one measurement at a time
static double g_min_flops = PICK_MIN_FLOPS;
static pick_entry *g_tab;     // PICK_MAX * 2 slots, open addressing
static int g_n;
static int g_mode = -2;       // -2 unread, -1 auto, 0 oneDNN, 1 own

static int mode_get(void) {
  int mode = __atomic_load_n(&g_mode, __ATOMIC_RELAXED);
  if (mode == -2) {
    const char *v = getenv("OT_GEMM");
    mode = v && strcmp(v, "own") == 0 ? 1 : v && strcmp(v, "onednn") == 0 ? 0 : -1;
    __atomic_store_n(&g_mode, mode, __ATOMIC_RELAXED);
  }
  return mode;
}

void ot__gemm_impl_set_mode(int mode) {
  pthread_mutex_lock(&g_mu);
  if (g_tab) memset(g_tab, 0, sizeof(pick_entry) * 2 * PICK_MAX);
  g_n = 0;
  pthread_mutex_unlock(&g_mu);
  __atomic_store_n(&g_mode, mode < -1 ? -2 : mode > 1 ? 1 : mode, __ATOMIC_RELAXED);
}

// n, or past 64 the power of two at or above it.
static int32_t pow2_bucket(int n) {
  int b = n;
  if (b > 64) { b = 64; while (b < n && b < (1 << 30)) b *= 2; }
  return b;
}

static void make_key(pick_key *k, const ot_mm *m) {
  memset(k, 0, sizeof *k);
  // M and K by powers of two past 64: a server's prompt lengths and a translation run's
  // batches (tokens per batch vary with the lengths) share a few measurements
  k->M = pow2_bucket(m->M); k->N = m->N; k->K = pow2_bucket(m->K); k->lda = m->lda; k->ldb = m->ldb; k->ldc = m->ldc;
  k->adt = (uint8_t)m->adt; k->bdt = (uint8_t)m->bdt; k->cdt = (uint8_t)m->cdt;
  k->ta = m->ta; k->tb = m->tb; k->bias = m->bias != NULL; k->gelu = m->gelu; k->beta = m->beta != 0.0f;
}

static uint32_t key_hash(const pick_key *k) {
  const unsigned char *p = (const unsigned char *)k;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

// The entry of k (created when absent); NULL when the table cannot be allocated.
// Under g_mu.
static pick_entry *find(const pick_key *k) {
  if (!g_tab) {
    g_tab = ot_mem_alloc(sizeof(pick_entry) * 2 * PICK_MAX, OT_MEM_OTHER);
    if (!g_tab) { ot_clear_error(); return NULL; }
    memset(g_tab, 0, sizeof(pick_entry) * 2 * PICK_MAX);
  }
  if (g_n >= PICK_MAX) { memset(g_tab, 0, sizeof(pick_entry) * 2 * PICK_MAX); g_n = 0; }
  for (uint32_t i = key_hash(k) & (2 * PICK_MAX - 1);; i = (i + 1) & (2 * PICK_MAX - 1)) {
    pick_entry *e = &g_tab[i];
    if (!e->used) {
      memset(e, 0, sizeof *e);
      e->key = *k; e->used = 1; e->choice = -1;
      g_n++;
      return e;
    }
    if (memcmp(&e->key, k, sizeof *k) == 0) return e;
  }
}

// The decided choice of k (-1: none yet). Under no lock.
static int lookup(const pick_key *k) {
  pthread_mutex_lock(&g_mu);
  pick_entry *e = find(k);
  const int c = e ? e->choice : 0;   // no table: oneDNN
  pthread_mutex_unlock(&g_mu);
  return c;
}

static void decide(const pick_key *k, int choice) {
  pthread_mutex_lock(&g_mu);
  pick_entry *e = find(k);
  if (e && e->choice < 0) e->choice = choice;
  pthread_mutex_unlock(&g_mu);
}

// The slice of m the measurement times (see the file comment): the first rows / columns /
// contraction terms of m, at the same pointers, C [s.M, s.N] of its own (ldc s.N).
static ot_mm slice_of(const ot_mm *m) {
  const size_t ces = ot_dtype_size(m->cdt);
  ot_mm s = *m;
  // C within PICK_SLICE_BYTES: cut the longer side (the shorter keeps the shape's character)
  const size_t cap = PICK_SLICE_BYTES / ces;
  if ((size_t)s.M * s.N > cap) {
    if (s.M >= s.N) { s.M = (int)(cap / (size_t)s.N); s.M = s.M < 64 ? 64 : s.M > m->M ? m->M : s.M; }
    else { s.N = (int)(cap / (size_t)s.M); s.N = s.N < 64 ? 64 : s.N > m->N ? m->N : s.N; }
  }
  // and the work within PICK_SLICE_FLOPS (~10 ms a run): the longer of M and N is cut
  // further, to no fewer than PICK_SLICE_MIN; the contraction only beyond PICK_SLICE_KCUT
  // times that. Both decide between the two: the LM head's input gradient (M x 768 x 50304,
  // 2 threads) measured oneDNN / own at 83 / 80% of the peak with M = 256, 75 / 82% with
  // 512, 67 / 88% with 1024 and 62 / 87% with 2048, but 1024 rows over 12715 terms gave
  // oneDNN the lead again. So that one shape is measured on 512 rows and every term (40
  // GFLOP a run, about 1.5 s once per process; a training step takes 8 s there).
  double fl = 2.0 * s.M * s.N * s.K;
  if (fl > PICK_SLICE_FLOPS) {
    int *side = s.M >= s.N ? &s.M : &s.N;
    const int want = (int)(*side * (PICK_SLICE_FLOPS / fl));
    if (*side > PICK_SLICE_MIN) *side = want < PICK_SLICE_MIN ? PICK_SLICE_MIN : want;
    fl = 2.0 * s.M * s.N * s.K;
  }
  if (fl > PICK_SLICE_KCUT * PICK_SLICE_FLOPS) {
    const int k = (int)(s.K * (PICK_SLICE_KCUT * PICK_SLICE_FLOPS / fl));
    s.K = k < 256 ? (s.K < 256 ? s.K : 256) : k;
  }
  s.ldc = s.N;
  return s;
}

// Times oneDNN (0) and the own GEMM (1) on a slice of m (see the file comment);
// returns the choice. On any failure (memory, an implementation refusing the
// slice) oneDNN is kept.
static int measure(const ot_mm *m, double t[2], int sl[3]) {
  t[0] = t[1] = 0.0;
  const size_t ces = ot_dtype_size(m->cdt);
  ot_mm s = slice_of(m);
  sl[0] = s.M; sl[1] = s.N; sl[2] = s.K;
  const size_t cbytes = (size_t)s.M * s.N * ces, wbytes = ot__mm_ws(&s);
  char *c = ot_mem_alloc(cbytes + wbytes + 64, OT_MEM_WORKSPACE);
  if (!c) { ot_clear_error(); return 0; }
  void *ws = wbytes ? (void *)(((uintptr_t)c + cbytes + 63) & ~(uintptr_t)63) : NULL;
  s.C = c;
  for (int r = 0; r < 1 + PICK_SAMPLES; r++)
    for (int which = 0; which < 2; which++) {
      if (s.beta != 0.0f)   // C's slice as the callers have it (a beta of 0 never reads it)
        for (int i = 0; i < s.M; i++)
          memcpy(c + (size_t)i * s.N * ces, (const char *)m->C + (size_t)i * m->ldc * ces, (size_t)s.N * ces);
      const double t0 = ot_now();
      ot_status st = which ? ot__mm_own_run(&s, "gemm choice") : ot__mm_run_lib(&s, ws, "gemm choice");
      const double dt = ot_now() - t0;
      if (st != OT_OK) { ot_clear_error(); ot_mem_free(c); return 0; }
      if (r && (r == 1 || dt < t[which])) t[which] = dt;   // the fastest run: one a busy core did not interrupt
    }
  ot_mem_free(c);
  return t[1] < t[0] * (1.0 - PICK_MARGIN);
}

// Which implementation runs m (0 oneDNN, 1 own): forced by the mode, fixed for
// small shapes, else the shape's measured choice (measured now at its first call).
static int pick(const ot_mm *m) {
  const int mode = mode_get();
  if (mode >= 0) return mode;
  if (!ot_gemm_may_measure(2.0 * m->M * m->N * m->K)) return 0;
  pick_key k;
  make_key(&k, m);
  int c = lookup(&k);
  if (c >= 0) return c;
  pthread_mutex_lock(&g_measure_mu);
  c = lookup(&k);   // another thread may have measured it meanwhile
  if (c < 0) {
    double t[2];
    int sl[3];
    c = measure(m, t, sl);
    decide(&k, c);
    static int verbose = -1;
    if (verbose < 0) { const char *v = getenv("OT_GEMM_VERBOSE"); verbose = v && *v && strcmp(v, "0") != 0; }
    if (verbose)
      fprintf(stderr, "[ot gemm] M=%d N=%d K=%d %s%s x %s%s -> %s: on %d x %d x %d oneDNN %.3f ms, own %.3f ms -> %s\n",
              m->M, m->N, m->K, ot_dtype_name(m->adt), m->ta ? "^T" : "", ot_dtype_name(m->bdt), m->tb ? "^T" : "",
              ot_dtype_name(m->cdt), sl[0], sl[1], sl[2], 1e3 * t[0], 1e3 * t[1], c ? "own" : "oneDNN");
  }
  pthread_mutex_unlock(&g_measure_mu);
  return c;
}

void ot__gemm_pick_set_min_flops(double flops) {
  pthread_mutex_lock(&g_measure_mu);
  g_min_flops = flops > 0 ? flops : PICK_MIN_FLOPS;
  pthread_mutex_unlock(&g_measure_mu);
}

int ot__gemm_pick_get(const ot_mm *m) {
  const int mode = mode_get();
  if (mode >= 0) return mode;
  if (!ot_gemm_may_measure(2.0 * m->M * m->N * m->K)) return 0;
  pick_key k;
  make_key(&k, m);
  pthread_mutex_lock(&g_mu);
  pick_entry *e = find(&k);
  const int c = e ? e->choice : -1;
  pthread_mutex_unlock(&g_mu);
  return c;
}

bool ot_gemm_may_measure(double flops) { return mode_get() < 0 && flops >= g_min_flops; }

void ot_gemm_scratch_of(int M, int N, int K, ot_dtype cdt, bool converting, ot_gemm_scratch *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  if (M <= 0 || N <= 0 || K <= 0) return;
  o->measured = ot_gemm_may_measure(2.0 * M * N * K);
  o->may_own = o->measured || mode_get() == 1;
  if (!o->may_own) return;
  // (the own GEMM's blocks depend on the shape and C's dtype only: it packs f32)
  const ot_mm m = {OT_F32, OT_F32, cdt, false, false, M, N, K, 1.0f, 0.0f, NULL, K, NULL, N, NULL, N, NULL, false};
  o->own_ws = ot__mm_own_ws(&m, ot__mm_own_threads(&m));
  if (!o->measured) return;
  const ot_mm s = slice_of(&m);
  const size_t sw = ot__mm_own_ws(&s, ot__mm_own_threads(&s));
  if (sw > o->own_ws) o->own_ws = sw;
  o->choice_ws = (size_t)s.M * s.N * ot_dtype_size(cdt) + 64 + (converting ? ot_gemm_convert_ws_max() : 0);
}

ot_status ot__mm_run(const ot_mm *m, void *ws, const char *fn) {
  return pick(m) ? ot__mm_own_run(m, fn) : ot__mm_run_lib(m, ws, fn);
}

void ot_gemm_describe(char *buf, size_t n) {
  if (!buf || n == 0) return;
  const int mode = mode_get();
  char own[160];
  ot__gemm_own_describe(own, sizeof own);
  snprintf(buf, n, "%s (own blocked GEMM: %s)",
           mode == 1 ? "own for every shape (OT_GEMM=own)" : mode == 0 ? "oneDNN for every shape (OT_GEMM=onednn)"
                     : "own or oneDNN, measured per shape at its first call (OT_GEMM=auto)", own);
}
