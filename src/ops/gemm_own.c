// The own GEMM: a BLIS-style blocked GEMM on the kernels of kern/sgemm.c.
//   for jc over N by NC:
//     for each group of KG k-blocks (KC each):
//       pack B[group, jc] into NR-column panels (items of PACK_PANELS panels,
//       spread dynamically over the threads)
//       for each (MC rows, column chunk) work item, dynamically over the threads:
//         for each k-block of the group, in order:
//           pack A[ic, pc] (MR-row panels, the thread's own buffer)
//           macro-kernel: every MR x NR tile of the item, epilogue into C
//           (GELU over the item's rows after the last k-block)
// Cache blocks from this CPU's caches (sysconf): KC so that a 16-column B panel
// fills L1, MC so that the A block takes half of L2 (and 2 row blocks per thread
// when M allows), the packed B of a group a quarter of L3. Operands
// of any storage kind (f32, bf16, f16) are converted to f32 while packing; C is
// f32, or 16-bit with one k-block (KC = K) so that partial sums are never rounded.
// Work items are handed out dynamically, so a thread that was descheduled does
// not hold the others back, and a short M (few row blocks) is still split over
// the threads by columns. Two barriers per group. Each C value's sum runs over
// k in the same order whatever the split: results do not depend on the thread
// count.
#include "gemm_impl.h"
#include "kern/sgemm_k.h"
#include "kern/act_k.h"
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// mc: the most rows of a row block; nic row blocks, the first rem of base + 1 micro-panels,
// the others of base (block_rows)
typedef struct { int mr, nr, mc, kc, nc, kg, nic, base, rem; } own_blocks;

#define PACK_PANELS 8      // B panels per packing work item


static int g_set[4];   // mc, kc, nc, kg forced by ot__gemm_own_set_blocks (0: from the caches)

void ot__gemm_own_set_blocks(int mc, int kc, int nc, int kg) {
  __atomic_store_n(&g_set[0], mc > 0 ? mc : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_set[1], kc > 0 ? kc : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_set[2], nc > 0 ? nc : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_set[3], kg > 0 ? kg : 0, __ATOMIC_RELAXED);
}

static long cache_bytes(int name, long dflt, long lo, long hi) {
  long v = sysconf(name);
  if (v <= 0) v = dflt;
  return v < lo ? lo : v > hi ? hi : v;
}

// This CPU's L1d, L2 and L3 sizes in bytes, read once (sysconf; defaults where it does not
// know; L3 at most 32 MiB: a virtual machine may report the host's), not on every GEMM.
typedef struct { long l1, l2, l3; } cpu_caches;
static cpu_caches g_caches;
static pthread_once_t g_caches_once = PTHREAD_ONCE_INIT;
static void caches_read(void) {
  g_caches.l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10, 16 << 10, 128 << 10);
  g_caches.l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 512 << 10, 128 << 10, 4 << 20);
  g_caches.l3 = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 8 << 20, 1 << 20, 32 << 20);
}
static const cpu_caches *caches(void) {
  pthread_once(&g_caches_once, caches_read);
  return &g_caches;
}

// A 16-bit C over a contraction longer than one k-block is computed into an f32 C of the
// library's (M x N, at most C_DETOUR_MAX bytes) with the usual blocks, then rounded once
// into C; without it the whole contraction had to be one k-block (KC = K), whose panels
// overflow the caches: on their measurement slices the bf16 LM head's input gradient
// (K = 50304) ran at 0.66x of oneDNN's converting path, the fc projection's forward
// (K = 3072) at 0.86x.
#define C_DETOUR_MAX ((size_t)32 << 20)
static int c_detour(const ot_mm *m) {
  const long kc1 = caches()->l1 / (4L * 16);
  return m->cdt != OT_F32 && m->K > kc1 + kc1 / 4 && (size_t)m->M * m->N * 4 <= C_DETOUR_MAX;
}

// Chooses the cache blocks for m (see the file comment).
static void choose_blocks(const ot_mm *m, own_blocks *b) {
  OT_KPICK(k_sg_tile)(&b->mr, &b->nr);
  const long l1 = caches()->l1, l2 = caches()->l2, l3 = caches()->l3;
  const int set_mc = __atomic_load_n(&g_set[0], __ATOMIC_RELAXED), set_kc = __atomic_load_n(&g_set[1], __ATOMIC_RELAXED),
            set_nc = __atomic_load_n(&g_set[2], __ATOMIC_RELAXED);
  // kc: a 16-column B panel fills L1 (measured on Zen 4 with both micro-tiles: kc from
  // 384 to 768 within 2% of each other, 128 up to 10% slower: the C tile's traffic)
  int kc = set_kc > 0 ? set_kc : (int)(l1 / (4L * 16));
  kc = kc < 1 ? 1 : kc > 4096 ? 4096 : kc;
  // one block also for up to 2 of them where the columns need several column blocks (the
  // packed B of a k-group takes a quarter of L3, below): k-blocks in separate groups would
  // send each C block to memory and back between them (the LM head's forward, 2048 x 50304
  // x 768: 0.99x oneDNN with 2 blocks of 384, 1.01x with one of 768)
  const int wide = set_kc <= 0 && m->K <= 2 * kc && (long)m->N * 4 * kc > l3 / 4;
  if ((m->cdt != OT_F32 && !c_detour(m)) || m->K <= kc + kc / 4 || wide) kc = m->K;
  else {      // equal blocks, none short
    const int nk = (m->K + kc - 1) / kc;
    kc = (m->K + nk - 1) / nk;
  }
  int mc = set_mc > 0 ? set_mc : (int)(l2 / 2 / (4L * kc));
  // 2 row blocks per thread when M allows (a descheduled thread's share is taken by the
  // others), but at least 16 micro-tiles: each B micro-panel serves a block's rows, and
  // fewer rows make it come from L3 too often (measured on the weight gradients, M = 768:
  // MC 96 0.64x of oneDNN, 192 0.77x, 384 0.68x, the last with one block per thread)
  const int T = ot_threads_get() > 1 ? ot_threads_get() : 1;
  const int mfair = (m->M + 2 * T - 1) / (2 * T);
  if (set_mc <= 0 && mc > mfair) mc = mfair < 16 * b->mr ? 16 * b->mr : mfair;
  mc = mc < b->mr ? b->mr : (mc + b->mr - 1) / b->mr * b->mr;
  if (mc > 1024) mc = 1024;
  // row blocks: base micro-panels each, the first rem one more (the last may be cut by M)
  b->base = mc / b->mr; b->rem = 0; b->nic = (m->M + mc - 1) / mc;
  if (set_mc <= 0 && T > 1 && b->nic >= 2 * T) {   // (fewer blocks: split by columns too)
    // blocks that the threads share evenly: a multiple of T of them, their sizes differing
    // by one micro-panel at most. 2048 rows in blocks of 288 made 8 blocks, the last of 32
    // rows: one thread ran 4 full blocks, the other 3 and the short one (qkv dx measured at 80%
    // of the FMA peak, 89% with 8 x 256).
    const int np = (m->M + b->mr - 1) / b->mr;
    b->nic = (b->nic + T - 1) / T * T;
    if (b->nic > np) b->nic = np;
    b->base = np / b->nic; b->rem = np % b->nic;
    mc = (b->base + (b->rem > 0)) * b->mr;
  }
  // the packed B of a k-group (kg k-blocks x nc columns) takes a quarter of L3
  const long bbytes = l3 / 4;
  int nc = set_nc > 0 ? set_nc : (int)(bbytes / (4L * kc));
  nc = nc < b->nr ? b->nr : nc / b->nr * b->nr;
  if (nc > 8192) nc = 8192 / b->nr * b->nr;
  if (nc >= m->N) nc = m->N;
  const int nk = (m->K + kc - 1) / kc;
  const long panel = 4L * kc * ((nc + b->nr - 1) / b->nr * b->nr);
  int kg = (int)(bbytes / panel);
  if (__atomic_load_n(&g_set[3], __ATOMIC_RELAXED) > 0) kg = __atomic_load_n(&g_set[3], __ATOMIC_RELAXED);
  kg = kg < 1 ? 1 : kg > nk ? nk : kg;
  b->mc = mc; b->kc = kc; b->nc = nc; b->kg = kg;
}

static int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

// Row block i of m: its first row *ic and its rows (cut by M).
static int block_rows(const ot_mm *m, const own_blocks *b, int i, int *ic) {
  *ic = (i * b->base + (i < b->rem ? i : b->rem)) * b->mr;
  const int r = (b->base + (i < b->rem)) * b->mr;
  return m->M - *ic < r ? m->M - *ic : r;
}

// Element offset helpers: op(A)(i, k) and op(B)(k, j) addresses.
static const void *a_at(const ot_mm *m, int i, int k) {
  const size_t off = m->ta ? (size_t)k * m->lda + i : (size_t)i * m->lda + k;
  return (const char *)m->A + off * ot_dtype_size(m->adt);
}
static const void *b_at(const ot_mm *m, int k, int j) {
  const size_t off = m->tb ? (size_t)j * m->ldb + k : (size_t)k * m->ldb + j;
  return (const char *)m->B + off * ot_dtype_size(m->bdt);
}

// Floats of the packed B block and of one thread's packed A block, each rounded
// up to 64 bytes with 16 floats of slack (the packing stores whole vectors).
static void pack_floats(const ot_mm *m, const own_blocks *b, size_t *bfl, size_t *afl) {
  *bfl = ((size_t)b->kg * ceil_div(b->nc, b->nr) * b->nr * b->kc + 16 + 15) & ~(size_t)15;
  *afl = ((size_t)ceil_div(b->mc < m->M ? b->mc : m->M, b->mr) * b->mr * b->kc + 16 + 15) & ~(size_t)15;
}

void ot__gemm_own_describe(char *buf, size_t n) {
  int mr, nr;
  OT_KPICK(k_sg_tile)(&mr, &nr);
  const long l1 = caches()->l1, l2 = caches()->l2, l3 = caches()->l3;
  snprintf(buf, n, "micro-tile %d x %d (%s), blocks from L1 %ld KiB, L2 %ld KiB, L3 %ld MiB", mr, nr,
           ot_isa_name(ot_isa_active()), l1 >> 10, l2 >> 10, l3 >> 20);
}

size_t ot_gemm_own_ws_max(void) {
  const long l2 = caches()->l2, l3 = caches()->l3;
  const int T = ot_threads_get() > 1 ? ot_threads_get() : 1;
  // the packed B group (a quarter of L3, plus a partial panel per k-block), an A block per
  // thread (half of L2, plus its micro-tile rounding) and the slack of each
  const size_t b = (size_t)l3 / 4 + (size_t)l3 / 32, a = (size_t)l2 / 2 + (size_t)l2 / 16;
  return b + (size_t)T * a + 128 * (size_t)(T + 1) + C_DETOUR_MAX + 64;
}

size_t ot__mm_own_ws(const ot_mm *m, int threads) {
  own_blocks b;
  size_t bfl, afl;
  choose_blocks(m, &b);
  pack_floats(m, &b, &bfl, &afl);
  return 4 * (bfl + (size_t)threads * afl) + (c_detour(m) ? (size_t)m->M * m->N * 4 + 64 : 0);
}

int ot__mm_own_threads(const ot_mm *m) {
  const int T = ot_threads_get();
  // one thread beats a parallel region below ~20 us of work
  return T < 1 || 2.0 * m->M * m->N * m->K < 4e6 ? 1 : T;
}

// Whether the micro-kernel reads B in place instead of packed panels: an f32 B stored k-major
// (B(k, j) at B[k*ldb + j]: each k's NR columns are one vector load), whole panels only, few
// row blocks (each re-reads B; past ~16 the packing is paid back), and rows that do not all
// fall in a few L2 sets (ldb*4 not a multiple of 2 KiB: with 12 KiB between rows a panel's
// rows fell in 32 of the 2048 sets and came from L3 at every tile). Measured on the weight
// and input gradients (2 threads, medians): attn proj dw 79-81% -> 86-90% of the FMA peak,
// qkv dw 86-87% -> 89-91%, the LM head's input gradient 87% -> 89-90%; with 12 KiB rows
// (fc proj dx) 88% -> 83-87%, hence the set rule; the LM head's weight gradient (190 row
// blocks) 87-89% -> 86-87%, hence the block rule. The AVX-512 tile only (NR >= 32: 24 FMAs
// per k step hide the strided loads; the AVX2 6 x 16 tile's 12 lost 5-10% on every one).
static int direct_b(const ot_mm *m, const own_blocks *b) {
  return b->nr >= 32 && m->bdt == OT_F32 && !m->tb && m->N % b->nr == 0 && b->nic <= 16 &&
         ((long)m->ldb * 4) % 2048 != 0;
}

static void own_run(const ot_mm *m, const own_blocks *bp, float *ws, size_t bfl, size_t afl, int T);

// m's 16-bit C [M, N] (ldc) and the f32 C cf [M, N] (ldc N): cf into C (to16), else C into cf.
static void c16_rows(const ot_mm *m, float *cf, bool to16) {
  const size_t ces = ot_dtype_size(m->cdt);
  for (int i = 0; i < m->M; i++) {
    char *c = (char *)m->C + (size_t)i * m->ldc * ces;
    float *f = cf + (size_t)i * m->N;
    if (to16) ot_convert(f, OT_F32, c, m->cdt, (size_t)m->N);   // (f32 <-> bf16 / f16: cannot fail)
    else ot_convert(c, m->cdt, f, OT_F32, (size_t)m->N);
  }
}

ot_status ot__mm_own_run(const ot_mm *m, const char *fn) {
  own_blocks b;
  choose_blocks(m, &b);
  const int T = ot__mm_own_threads(m);
  size_t bfl, afl;
  pack_floats(m, &b, &bfl, &afl);
  const int detour = c_detour(m);
  const size_t wsb = 4 * (bfl + (size_t)T * afl), cb = detour ? (size_t)m->M * m->N * 4 + 64 : 0;   // ot__mm_own_ws
  float *ws = ot_scratch_slot(OT_SCRATCH_GEMM, wsb + cb);
  if (!ws)
    return ot_error(OT_ENOMEM, "%s: own GEMM M=%d N=%d K=%d: no workspace (%zu bytes)", fn, m->M, m->N, m->K,
                    wsb + cb);
  if (!detour) { own_run(m, &b, ws, bfl, afl, T); return OT_OK; }
  // the f32 C (see c_detour): C's values first where beta reads them, rounded into C after
  float *cf = (float *)(((uintptr_t)ws + wsb + 63) & ~(uintptr_t)63);
  ot_mm f = *m;
  f.cdt = OT_F32; f.C = cf; f.ldc = m->N;
  if (m->beta != 0.0f) c16_rows(m, cf, false);
  own_run(&f, &b, ws, bfl, afl, T);
  c16_rows(m, cf, true);
  return OT_OK;
}

// The blocked GEMM of m (see the file comment) with blocks b on T threads; ws holds the
// packed B group (bfl floats) and T packed A blocks (afl floats each).
static void own_run(const ot_mm *m, const own_blocks *bp, float *ws, size_t bfl, size_t afl, int T) {
  const own_blocks b = *bp;
  float *bbuf = ws, *abuf = ws + bfl;
  const int csk = ot__sk(m->cdt), ask = ot__sk(m->adt), bsk = ot__sk(m->bdt);
  const size_t ces = ot_dtype_size(m->cdt);
  const int nic = b.nic;
  const int nk = ceil_div(m->K, b.kc);
  const int direct = direct_b(m, &b);
  const double t0 = ot_now();
#pragma omp parallel num_threads(T)
  {
    const int tid = omp_get_thread_num();
    float *ap = abuf + (size_t)tid * afl;
    for (int jc = 0; jc < m->N; jc += b.nc) {
      const int nc = m->N - jc < b.nc ? m->N - jc : b.nc;
      const int npan = ceil_div(nc, b.nr);
      // column chunks per row block: enough items for every thread to stay busy
      int njc = nic >= 2 * T ? 1 : ceil_div(2 * T, nic);
      if (njc > npan) njc = npan;
      const int cpan = ceil_div(npan, njc);   // panels per chunk
      njc = ceil_div(npan, cpan);
      const size_t pstride = (size_t)npan * b.nr * b.kc;   // floats of one k-block's packed B
      for (int g0 = 0; g0 < nk; g0 += b.kg) {               // a group of k-blocks packed at once
        const int g1 = g0 + b.kg < nk ? g0 + b.kg : nk;
        const int nbp = ceil_div(npan, PACK_PANELS);
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < (direct ? 0 : (g1 - g0) * nbp); it++) {
          const int pk = g0 + it / nbp, p0 = (it % nbp) * PACK_PANELS;
          const int pc = pk * b.kc, kc = m->K - pc < b.kc ? m->K - pc : b.kc;
          const int p1 = p0 + PACK_PANELS < npan ? p0 + PACK_PANELS : npan;
          OT_KPICK(k_sg_pack_b)(bbuf + (size_t)(pk - g0) * pstride, b_at(m, pc, jc), bsk, (size_t)m->ldb, m->tb,
                                kc, nc, p0, p1);
        }
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < nic * njc; it++) {
          const int q = it % njc;
          int ic;
          const int mc = block_rows(m, &b, it / njc, &ic);
          const int j0 = q * cpan * b.nr, j1 = j0 + cpan * b.nr < nc ? j0 + cpan * b.nr : nc;
          char *c = (char *)m->C + ((size_t)ic * m->ldc + (size_t)(jc + j0)) * ces;
          for (int pk = g0; pk < g1; pk++) {
            const int pc = pk * b.kc, kc = m->K - pc < b.kc ? m->K - pc : b.kc;
            const ot_sg_epi e = {m->alpha, m->beta, pc == 0, pc + kc >= m->K,
                                 m->bias ? m->bias + jc + j0 : NULL};
            OT_KPICK(k_sg_pack_a)(ap, a_at(m, ic, pc), ask, (size_t)m->lda, m->ta, mc, kc);
            if (direct)
              OT_KPICK(k_sg_macro)(ap, (const float *)b_at(m, pc, jc + j0), (size_t)m->ldb, (size_t)b.nr, mc,
                                   j1 - j0, kc, c, csk, (size_t)m->ldc, &e);
            else
              OT_KPICK(k_sg_macro)(ap, bbuf + (size_t)(pk - g0) * pstride + (size_t)q * cpan * b.nr * kc,
                                   (size_t)b.nr, (size_t)b.nr * kc, mc, j1 - j0, kc, c, csk, (size_t)m->ldc, &e);
            if (m->gelu && e.last)
              for (int i = 0; i < mc; i++)
                OT_KPICK(k_gelu_fwd)(csk, c + (size_t)i * m->ldc * ces, c + (size_t)i * m->ldc * ces,
                                     (size_t)(j1 - j0));
          }
        }
      }
    }
  }
  ot__gemm_count(m, ot_now() - t0);
}
