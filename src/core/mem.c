// Tracked allocations, arenas and per-thread scratch. Every long-lived buffer
// the library holds goes through ot_mem_alloc, so current/peak per category is
// exact. Each block carries a 64-byte header (size, category) in front of the
// 64-byte-aligned payload. Blocks of 4 MiB and more start on a 2 MiB boundary and
// ask for transparent huge pages (madvise; Linux "madvise" mode): weights,
// activations and GEMM packing buffers then cost a TLB entry per 2 MiB, not per
// 4 KiB (measured: the own GEMM's weight gradients 80-84% -> 88-90% of the FMA
// peak on one thread).
#include "internal.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HDR 64
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)4 << 20)   // blocks this large ask for 2 MiB pages
#define MAGIC 0x6f746d656d626c6bull  // "otmemblk"

typedef struct { uint64_t magic; size_t bytes; int cat; } blk_hdr;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_cur[OT_MEM_CATEGORY_COUNT], g_peak[OT_MEM_CATEGORY_COUNT];
static size_t g_allocated;   // cumulative bytes handed out
static size_t g_total, g_peak_total;   // all categories together: now, and the most at once

const char *ot_mem_category_name(ot_mem_category c) {
  static const char *nm[OT_MEM_CATEGORY_COUNT] = {
      "parameters", "gradients", "optimizer", "activations", "kv_cache", "workspace", "other"};
  return (unsigned)c < OT_MEM_CATEGORY_COUNT ? nm[c] : "unknown";
}

void *ot_mem_alloc(size_t bytes, ot_mem_category cat) {
  if ((unsigned)cat >= OT_MEM_CATEGORY_COUNT) {
    ot_error(OT_EINVAL, "ot_mem_alloc: category %d out of range", (int)cat);
    return NULL;
  }
  size_t total = HDR + ot_align64(bytes);
  if (total < bytes) { ot_error(OT_ENOMEM, "ot_mem_alloc: size %zu overflows", bytes); return NULL; }
  void *p = NULL;
  const int huge = total >= HUGE_MIN;
  if (posix_memalign(&p, huge ? HUGE_PAGE : 64, total) != 0 || !p) {
    ot_error(OT_ENOMEM, "out of memory: could not allocate %.1f MiB for %s",
             bytes / 1048576.0, ot_mem_category_name(cat));
    return NULL;
  }
#ifdef MADV_HUGEPAGE
  // whole 2 MiB pages of the block only (the tail keeps small pages: no resident growth);
  // advisory, so an error (no transparent huge pages here) changes nothing
  if (huge) madvise(p, total & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
  blk_hdr *h = p;
  h->magic = MAGIC; h->bytes = bytes; h->cat = cat;
  pthread_mutex_lock(&g_lock);
  g_cur[cat] += bytes;
  g_allocated += bytes;
  if (g_cur[cat] > g_peak[cat]) g_peak[cat] = g_cur[cat];
  g_total += bytes;
  if (g_total > g_peak_total) g_peak_total = g_total;
  pthread_mutex_unlock(&g_lock);
  return (uint8_t *)p + HDR;
}

void ot_mem_free(void *q) {
  if (!q) return;
  blk_hdr *h = (blk_hdr *)((uint8_t *)q - HDR);
  if (h->magic != MAGIC) return;  // not ours (or double free): refuse to corrupt the counts
  h->magic = 0;
  pthread_mutex_lock(&g_lock);
  g_cur[h->cat] -= h->bytes;
  g_total -= h->bytes;
  pthread_mutex_unlock(&g_lock);
  free(h);
}

size_t ot_mem_current(ot_mem_category c) {
  if ((unsigned)c >= OT_MEM_CATEGORY_COUNT) return 0;
  pthread_mutex_lock(&g_lock); size_t v = g_cur[c]; pthread_mutex_unlock(&g_lock);
  return v;
}
size_t ot_mem_peak(ot_mem_category c) {
  if ((unsigned)c >= OT_MEM_CATEGORY_COUNT) return 0;
  pthread_mutex_lock(&g_lock); size_t v = g_peak[c]; pthread_mutex_unlock(&g_lock);
  return v;
}
size_t ot_mem_peak_total(void) {
  pthread_mutex_lock(&g_lock); size_t v = g_peak_total; pthread_mutex_unlock(&g_lock);
  return v;
}
size_t ot_mem_allocated(void) {
  pthread_mutex_lock(&g_lock); size_t v = g_allocated; pthread_mutex_unlock(&g_lock);
  return v;
}
void ot_mem_reset_peak(void) {
  pthread_mutex_lock(&g_lock);
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) g_peak[c] = g_cur[c];
  g_peak_total = g_total;
  pthread_mutex_unlock(&g_lock);
}

void ot_mem_report(FILE *f) {
  size_t tc = 0, tp = 0;
  fprintf(f, "%-12s %12s %12s\n", "memory", "current MiB", "peak MiB");
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) {
    size_t cur = ot_mem_current(c), pk = ot_mem_peak(c);
    tc += cur; tp += pk;
    fprintf(f, "%-12s %12.2f %12.2f\n", ot_mem_category_name(c), cur / 1048576.0, pk / 1048576.0);
  }
  fprintf(f, "%-12s %12.2f %12.2f (peak = sum of category peaks)\n", "total", tc / 1048576.0, tp / 1048576.0);
}

// ------------------------------------------------------------------ arena ---
ot_status ot_arena_init(ot_arena *a, const char *name, size_t cap, ot_mem_category cat) {
  OT_CHECK_PTR(a, "ot_arena_init");
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s", name ? name : "arena");
  a->cat = cat;
  a->base = ot_mem_alloc(cap, cat);
  if (!a->base) return OT_ENOMEM;
  a->cap = cap;
  return OT_OK;
}

void *ot_arena_alloc(ot_arena *a, size_t bytes) {
  size_t need = ot_align64(bytes);
  if (!a || !a->base || need < bytes || a->used + need > a->cap || a->used + need < a->used) {
    ot_error(OT_ENOMEM, "arena '%s' full: %zu bytes requested, %zu of %zu used (plan a larger arena)",
             a ? a->name : "?", bytes, a ? a->used : 0, a ? a->cap : 0);
    return NULL;
  }
  void *p = a->base + a->used;
  a->used += need;
  if (a->used > a->high) a->high = a->used;
  return p;
}

void ot_arena_destroy(ot_arena *a) {
  if (!a) return;
  ot_mem_free(a->base);
  memset(a, 0, sizeof *a);
}

// ---------------------------------------------------------------- scratch ---
// The block of each thread sits in a _Thread_local pointer (the fast path) and
// in a pthread key whose destructor frees it when the thread exits, so that no
// thread the library or a caller starts (connection, scheduler, reduction,
// watchdog threads, OpenMP workers) leaves its scratch behind. The key is set
// only when the block is (re)allocated. Destructors do not run for the main
// thread (its block lives until the process exits) nor, until their pool ends,
// for OpenMP's threads.
static _Thread_local void *g_scratch[OT_SCRATCH_SLOTS];
static _Thread_local size_t g_scratch_cap[OT_SCRATCH_SLOTS];
static pthread_key_t g_scratch_key[OT_SCRATCH_SLOTS];
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static bool g_scratch_keyed[OT_SCRATCH_SLOTS];   // the keys exist (written once, under g_scratch_once)

// Thread exit: frees the block (a later destructor that calls ot_scratch again
// gets a fresh one, freed in the next destructor round).
static void scratch_at_exit(void *p) {
  for (int i = 0; i < OT_SCRATCH_SLOTS; i++)
    if (p == g_scratch[i]) { g_scratch[i] = NULL; g_scratch_cap[i] = 0; }
  ot_mem_free(p);
}

static void scratch_key_init(void) {
  for (int i = 0; i < OT_SCRATCH_SLOTS; i++)
    g_scratch_keyed[i] = pthread_key_create(&g_scratch_key[i], scratch_at_exit) == 0;
}

void *ot_scratch_slot(int slot, size_t bytes) {
  if (slot < 0 || slot >= OT_SCRATCH_SLOTS) {
    ot_error(OT_EINVAL, "ot_scratch_slot: slot %d out of range [0, %d)", slot, OT_SCRATCH_SLOTS);
    return NULL;
  }
  if (bytes <= g_scratch_cap[slot] && g_scratch[slot]) return g_scratch[slot];
  size_t cap = g_scratch_cap[slot] ? g_scratch_cap[slot] : 4096;
  while (cap < bytes) cap *= 2;
  pthread_once(&g_scratch_once, scratch_key_init);
  // the old block goes first (its contents are not kept), so growing never holds both
  if (g_scratch[slot] && g_scratch_keyed[slot]) pthread_setspecific(g_scratch_key[slot], NULL);
  ot_mem_free(g_scratch[slot]);
  g_scratch[slot] = NULL;
  g_scratch_cap[slot] = 0;
  void *p = ot_mem_alloc(cap, OT_MEM_WORKSPACE);
  if (!p) return NULL;
  if (g_scratch_keyed[slot] && pthread_setspecific(g_scratch_key[slot], p) != 0) {
    ot_mem_free(p);   // only when out of memory: better no block than one that leaks
    ot_error(OT_ENOMEM, "ot_scratch: cannot register %zu bytes of thread scratch", cap);
    return NULL;
  }
  g_scratch[slot] = p;
  g_scratch_cap[slot] = cap;
  return p;
}

void *ot_scratch(size_t bytes) { return ot_scratch_slot(OT_SCRATCH_MAIN, bytes); }

size_t ot_scratch_slot_bytes(int slot) {
  return slot >= 0 && slot < OT_SCRATCH_SLOTS && g_scratch[slot] ? g_scratch_cap[slot] : 0;
}

void ot_scratch_release(void) {
  for (int i = 0; i < OT_SCRATCH_SLOTS; i++) {
    if (g_scratch[i] && g_scratch_keyed[i]) pthread_setspecific(g_scratch_key[i], NULL);
    ot_mem_free(g_scratch[i]);
    g_scratch[i] = NULL;
    g_scratch_cap[i] = 0;
  }
}
