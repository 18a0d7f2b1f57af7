// CPU feature detection (cpuid + xgetbv) and the active-ISA switch used by
// every kernel dispatch; threads; wall clock; tensor descriptor helpers.
#include "internal.h"
#include <stdlib.h>
#include <time.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static ot_cpu_features g_cpu;
static int g_cpu_done;
static int g_forced = -1;   // -1: not forced by API
static int g_env_done, g_env_isa = -1;

static void detect(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  g_cpu.fma = c & (1u << 12);
  g_cpu.f16c = c & (1u << 29);
  uint64_t xcr0 = 0;
  if (osxsave) { unsigned lo, hi; __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0)); xcr0 = ((uint64_t)hi << 32) | lo; }
  bool os_avx = (xcr0 & 6) == 6, os_avx512 = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    g_cpu.avx2 = avx && os_avx && (b & (1u << 5));
    g_cpu.avx512f = os_avx512 && (b & (1u << 16));
    g_cpu.avx512bw = os_avx512 && (b & (1u << 30));
    g_cpu.avx512vl = os_avx512 && (b & (1u << 31));
    g_cpu.avx512_vnni = os_avx512 && (c & (1u << 11));
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) g_cpu.avx512_bf16 = os_avx512 && (a & (1u << 5));
  }
  if (!(avx && os_avx)) g_cpu.fma = g_cpu.f16c = false;
#endif
}

const ot_cpu_features *ot_cpu(void) {
  if (!g_cpu_done) { detect(); g_cpu_done = 1; }
  return &g_cpu;
}

const char *ot_isa_name(ot_isa isa) {
  static const char *nm[OT_ISA_COUNT] = {"portable", "avx2", "avx512"};
  return (unsigned)isa < OT_ISA_COUNT ? nm[isa] : "unknown";
}

bool ot_isa_supported(ot_isa isa) {
  const ot_cpu_features *f = ot_cpu();
  switch (isa) {
    case OT_ISA_PORTABLE: return true;
    case OT_ISA_AVX2: return f->avx2 && f->fma && f->f16c;
    case OT_ISA_AVX512: return f->avx512f && f->avx512bw && f->avx512vl && f->fma && f->f16c;
    default: return false;
  }
}

static ot_isa best(void) {
  return ot_isa_supported(OT_ISA_AVX512) ? OT_ISA_AVX512
       : ot_isa_supported(OT_ISA_AVX2) ? OT_ISA_AVX2 : OT_ISA_PORTABLE;
}

static void read_env(void) {
  g_env_done = 1;
  const char *fp = getenv("OT_FORCE_PORTABLE");
  if (fp && *fp && strcmp(fp, "0") != 0) { g_env_isa = OT_ISA_PORTABLE; return; }
  const char *e = getenv("OT_ISA");
  if (!e || !*e) return;
  for (int i = 0; i < OT_ISA_COUNT; i++)
    if (strcmp(e, ot_isa_name((ot_isa)i)) == 0 && ot_isa_supported((ot_isa)i)) { g_env_isa = i; return; }
  fprintf(stderr, "ot: warning: OT_ISA=%s is unknown or unsupported on this CPU (use portable|avx2|avx512); using %s\n",
          e, ot_isa_name(best()));
}

ot_isa ot_isa_active(void) {
  if (g_forced >= 0) return (ot_isa)g_forced;
  if (!g_env_done) read_env();
  return g_env_isa >= 0 ? (ot_isa)g_env_isa : best();
}

ot_status ot_isa_force(ot_isa isa) {
  if ((unsigned)isa >= OT_ISA_COUNT) return ot_error(OT_EINVAL, "ot_isa_force: ISA %d out of range", (int)isa);
  if (!ot_isa_supported(isa))
    return ot_error(OT_EUNSUPPORTED, "ot_isa_force: this CPU cannot run %s kernels (best here: %s)",
                    ot_isa_name(isa), ot_isa_name(best()));
  g_forced = isa;
  return OT_OK;
}
void ot_isa_unforce(void) { g_forced = -1; }

void ot_threads_set(int n) { if (n > 0) omp_set_num_threads(n); }
int ot_threads_get(void) { return omp_get_max_threads(); }

double ot_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

ot_tensor ot_tensor_make(void *data, ot_dtype dt, int ndim, const int64_t *shape) {
  ot_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data; t.dtype = dt;
  t.ndim = ndim < 0 ? 0 : (ndim > OT_MAX_DIMS ? OT_MAX_DIMS : ndim);
  int64_t s = 1;
  for (int i = t.ndim - 1; i >= 0; i--) { t.shape[i] = shape[i]; t.stride[i] = s; s *= shape[i]; }
  return t;
}
int64_t ot_tensor_numel(const ot_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}
bool ot_tensor_is_contiguous(const ot_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) { if (t->shape[i] != 1 && t->stride[i] != s) return false; s *= t->shape[i]; }
  return true;
}
