// GEMM through oneDNN's matmul primitive, shared by linear and fused QKV.
//  - One CPU engine for the process; one stream per calling thread.
//  - Row-major C = alpha op(A) op(B) + beta C maps to matmul memory descriptors
//    with strides (a transpose is a stride swap, never a copy); alpha is an
//    output scale, beta a sum post-op, bias a [1, N] f32 bias memory, GELU an
//    eltwise post-op (gelu_tanh).
//  - Primitives are cached per (M, N, K, dtypes, transposes, leading dims,
//    bias, GELU, alpha, beta) in a table under a mutex: creating one costs
//    ~1-15 ms, so a training step reuses the ones made during warm-up. Each
//    entry also keeps its memory objects (only their data handles change); a
//    thread finding them busy uses temporary ones. The table holds at most
//    OT_GEMM_CACHE_MAX entries (~17 KB each): past that the least recently used
//    idle one is dropped, so a server seeing every prompt length stays bounded.
//  - The scratchpad is user-managed: each calling thread passes its own block
//    (ot_scratch_slot(OT_SCRATCH_GEMM)). oneDNN's library-managed scratchpad
//    is shared by the primitives of the thread that made them, so a cached
//    primitive run from another thread (a server's workers, a scheduler beside
//    the caller) would share it with that thread's GEMMs running at the same
//    time, and their results would be wrong.
//  - bf16: oneDNN 2.6 only implements bf16 matmul on avx512_core and above. On
//    CPUs with avx512_bf16 (or OT_GEMM_BF16=native) bf16 goes to oneDNN; else
//    (or when oneDNN refuses it, or picks a reference kernel) the bf16 operands
//    run as f32 GEMMs on tiles (gemm_cvt.c): a bounded f32 workspace holds one
//    converted tile of each bf16 operand; f32 operands are read in place.
// Set OT_GEMM_VERBOSE=1 to print each primitive created and its implementation.
#include "gemm_impl.h"
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
  int32_t M, N, K, lda, ldb, ldc;
  uint32_t alpha, beta;               // bit patterns
  uint8_t adt, cdt, ta, tb, bias, gelu, pad[2];
} mm_key;

typedef struct {
  mm_key key;
  dnnl_primitive_t prim;              // NULL: no (fast) oneDNN implementation
  dnnl_memory_desc_t md[5];           // src, weights, dst, bias, scratchpad
  dnnl_memory_t mem[5];               // reused while not busy (scratchpad: when it has bytes)
  size_t scratch_bytes;               // the primitive's scratchpad (user-managed), 0: none
  int busy;                           // atomic
  int users;                          // atomic: threads between lookup and the end of exec
  uint64_t tick;                      // last lookup (under g_mu)
  char impl[48];
} mm_entry;

#define OT_GEMM_CACHE_MAX 512

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static mm_entry **g_tab;
static int g_n, g_cap, g_nprim, g_max = OT_GEMM_CACHE_MAX;
static uint64_t g_tick;
static dnnl_engine_t g_eng;
static dnnl_status_t g_eng_st = dnnl_success;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_stream_t *g_streams;      // every thread's stream, kept reachable
static int g_nstreams, g_capstreams;
static _Thread_local dnnl_stream_t t_stream;
static int g_bf16_mode = -1;          // -1 undecided, 0 convert, 1 native
static int g_verbose = -1;

static void engine_init(void) { g_eng_st = dnnl_engine_create(&g_eng, dnnl_cpu, 0); }

static bool grow(void **p, int *cap, int need, size_t elt) {
  if (need <= *cap) return true;
  int nc = *cap ? *cap * 2 : 32;
  while (nc < need) nc *= 2;
  void *q = ot_mem_alloc((size_t)nc * elt, OT_MEM_OTHER);
  if (!q) return false;
  if (*p) memcpy(q, *p, (size_t)*cap * elt);
  ot_mem_free(*p);
  *p = q; *cap = nc;
  return true;
}

static ot_status get_stream(dnnl_stream_t *out, const char *fn) {
  pthread_once(&g_once, engine_init);
  if (g_eng_st != dnnl_success)
    return ot_error(OT_EINTERNAL, "%s: oneDNN CPU engine creation failed (status %d)", fn, (int)g_eng_st);
  if (!t_stream) {
    dnnl_stream_t s;
    dnnl_status_t st = dnnl_stream_create(&s, g_eng, dnnl_stream_default_flags);
    if (st != dnnl_success) return ot_error(OT_EINTERNAL, "%s: oneDNN stream creation failed (status %d)", fn, (int)st);
    pthread_mutex_lock(&g_mu);
    bool ok = grow((void **)&g_streams, &g_capstreams, g_nstreams + 1, sizeof *g_streams);
    if (ok) g_streams[g_nstreams++] = s;
    pthread_mutex_unlock(&g_mu);
    if (!ok) { dnnl_stream_destroy(s); return OT_ENOMEM; }
    t_stream = s;
  }
  *out = t_stream;
  return OT_OK;
}

static uint32_t fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static dnnl_data_type_t dnnl_dt(ot_dtype d) { return d == OT_BF16 ? dnnl_bf16 : dnnl_f32; }

static void make_key(mm_key *k, const ot_mm *m) {
  memset(k, 0, sizeof *k);
  k->M = m->M; k->N = m->N; k->K = m->K;
  k->lda = m->lda; k->ldb = m->ldb; k->ldc = m->ldc;
  k->alpha = fbits(m->alpha); k->beta = fbits(m->beta);
  k->adt = (uint8_t)m->adt; k->cdt = (uint8_t)m->cdt;
  k->ta = m->ta; k->tb = m->tb; k->bias = m->bias != NULL; k->gelu = m->gelu;
}

static void entry_destroy(mm_entry *e) {
  for (int i = 0; i < 5; i++) if (e->mem[i]) dnnl_memory_destroy(e->mem[i]);
  if (e->prim) dnnl_primitive_destroy(e->prim);
  ot_mem_free(e);
}

// Creates the primitive for e->key. dnnl_unimplemented (cached as a negative
// entry) when oneDNN has no implementation or only a reference one for bf16.
static dnnl_status_t entry_build(mm_entry *e) {
  const mm_key *k = &e->key;
  dnnl_dims_t ad = {k->M, k->K}, as = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
  dnnl_dims_t bd = {k->K, k->N}, bs = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1};
  dnnl_dims_t cd = {k->M, k->N}, cs = {k->ldc, 1};
  dnnl_dims_t vd = {1, k->N}, vs = {k->N, 1};
  dnnl_data_type_t abt = dnnl_dt((ot_dtype)k->adt);
  dnnl_status_t st;
  if ((st = dnnl_memory_desc_init_by_strides(&e->md[0], 2, ad, abt, as)) ||
      (st = dnnl_memory_desc_init_by_strides(&e->md[1], 2, bd, abt, bs)) ||
      (st = dnnl_memory_desc_init_by_strides(&e->md[2], 2, cd, dnnl_dt((ot_dtype)k->cdt), cs)) ||
      (st = dnnl_memory_desc_init_by_strides(&e->md[3], 2, vd, dnnl_f32, vs)))
    return st;
  dnnl_matmul_desc_t d;
  if ((st = dnnl_matmul_desc_init(&d, &e->md[0], &e->md[1], k->bias ? &e->md[3] : NULL, &e->md[2])))
    return st;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  float alpha, beta;
  memcpy(&alpha, &k->alpha, 4); memcpy(&beta, &k->beta, 4);
  if ((st = dnnl_primitive_attr_create(&attr))) goto done;
  if ((st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))) goto done;
  if (alpha != 1.0f && (st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))) goto done;
  if (beta != 0.0f || k->gelu) {
    if ((st = dnnl_post_ops_create(&po))) goto done;
    if (beta != 0.0f && (st = dnnl_post_ops_append_sum(po, beta))) goto done;
    if (k->gelu && (st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_tanh, 0.f, 0.f))) goto done;
    if ((st = dnnl_primitive_attr_set_post_ops(attr, po))) goto done;
  }
  if ((st = dnnl_primitive_desc_create(&pd, &d, attr, g_eng, NULL))) goto done;
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(e->impl, sizeof e->impl, "%s", impl ? impl : "?");
  if (k->adt == OT_BF16 && strncmp(e->impl, "ref", 3) == 0) { st = dnnl_unimplemented; goto done; }
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (smd) { e->md[4] = *smd; e->scratch_bytes = dnnl_memory_desc_get_size(smd); }
  if ((st = dnnl_primitive_create(&e->prim, pd))) { e->prim = NULL; goto done; }
  for (int i = 0; i < 5 && !st; i++)
    if (i < 3 || (i == 3 && k->bias) || (i == 4 && e->scratch_bytes))
      st = dnnl_memory_create(&e->mem[i], &e->md[i], g_eng, DNNL_MEMORY_NONE);
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return st;
}

static bool verbose(void) {
  if (g_verbose < 0) { const char *v = getenv("OT_GEMM_VERBOSE"); g_verbose = v && *v == '1'; }
  return g_verbose;
}

// With g_mu held and the table full: drops the least recently used entry that no
// thread is using (none dropped when all are in use: the table grows past g_max).
static void evict_one(void) {
  int best = -1;
  for (int i = 0; i < g_n; i++)
    if (__atomic_load_n(&g_tab[i]->users, __ATOMIC_ACQUIRE) == 0 &&
        (best < 0 || g_tab[i]->tick < g_tab[best]->tick))
      best = i;
  if (best < 0) return;
  if (g_tab[best]->prim) g_nprim--;
  entry_destroy(g_tab[best]);
  memmove(&g_tab[best], &g_tab[best + 1], (size_t)(g_n - best - 1) * sizeof *g_tab);
  g_n--;
}

void ot__gemm_cache_set_max(int n) {
  pthread_mutex_lock(&g_mu);
  g_max = n > 0 ? n : OT_GEMM_CACHE_MAX;
  while (g_n > g_max) {
    int before = g_n;
    evict_one();
    if (g_n == before) break;
  }
  pthread_mutex_unlock(&g_mu);
}

// Finds or creates the entry for m (never NULL on OT_OK; e->prim may be NULL)
// and counts the caller as its user until release().
static ot_status lookup(const ot_mm *m, mm_entry **out, const char *fn) {
  mm_key k;
  make_key(&k, m);
  pthread_once(&g_once, engine_init);
  if (g_eng_st != dnnl_success)
    return ot_error(OT_EINTERNAL, "%s: oneDNN CPU engine creation failed (status %d)", fn, (int)g_eng_st);
  pthread_mutex_lock(&g_mu);
  for (int i = g_n - 1; i >= 0; i--)
    if (memcmp(&g_tab[i]->key, &k, sizeof k) == 0) {
      *out = g_tab[i];
      g_tab[i]->tick = ++g_tick;
      __atomic_add_fetch(&g_tab[i]->users, 1, __ATOMIC_ACQ_REL);
      pthread_mutex_unlock(&g_mu);
      return OT_OK;
    }
  ot_status s = OT_OK;
  if (g_n >= g_max) evict_one();
  mm_entry *e = ot_mem_alloc(sizeof *e, OT_MEM_OTHER);
  if (!e || !grow((void **)&g_tab, &g_cap, g_n + 1, sizeof *g_tab)) { ot_mem_free(e); s = OT_ENOMEM; goto out; }
  memset(e, 0, sizeof *e);
  e->key = k;
  double t0 = ot_now();
  dnnl_status_t st = entry_build(e);
  if (verbose())
    fprintf(stderr, "ot_gemm: primitive M=%d N=%d K=%d %s*%s->%s tA=%d tB=%d ld=%d,%d,%d bias=%d gelu=%d "
            "alpha=%g beta=%g: %s (%s, scratchpad %zu B, %.1f ms)\n", m->M, m->N, m->K, ot_dtype_name(m->adt),
            ot_dtype_name(m->adt), ot_dtype_name(m->cdt), m->ta, m->tb, m->lda, m->ldb, m->ldc,
            m->bias != NULL, m->gelu, m->alpha, m->beta, st ? "unavailable" : "created", e->impl,
            e->scratch_bytes, (ot_now() - t0) * 1e3);
  if (st != dnnl_success) {
    bool cacheable = st == dnnl_unimplemented && m->adt == OT_BF16;
    for (int i = 0; i < 5; i++) if (e->mem[i]) { dnnl_memory_destroy(e->mem[i]); e->mem[i] = NULL; }
    if (e->prim) { dnnl_primitive_destroy(e->prim); e->prim = NULL; }
    if (!cacheable) {
      ot_mem_free(e);
      s = ot_error(OT_EINTERNAL, "%s: oneDNN matmul M=%d N=%d K=%d (%s) failed: status %d", fn,
                   m->M, m->N, m->K, ot_dtype_name(m->adt), (int)st);
      goto out;
    }
  } else {
    g_nprim++;
  }
  e->tick = ++g_tick;
  e->users = 1;
  g_tab[g_n++] = e;
  *out = e;
out:
  pthread_mutex_unlock(&g_mu);
  return s;
}

static void release(mm_entry *e) { __atomic_sub_fetch(&e->users, 1, __ATOMIC_ACQ_REL); }

// GEMM counters (ot_gemm_stats): flops and nanoseconds, every thread.
static uint64_t g_gemm_flops, g_gemm_ns;
void ot__gemm_count(const ot_mm *m, double seconds) {
  __atomic_add_fetch(&g_gemm_flops, 2 * (uint64_t)m->M * (uint64_t)m->N * (uint64_t)m->K, __ATOMIC_RELAXED);
  __atomic_add_fetch(&g_gemm_ns, (uint64_t)(seconds * 1e9), __ATOMIC_RELAXED);
}
void ot_gemm_stats(double *flops, double *seconds) {
  if (flops) *flops = (double)__atomic_load_n(&g_gemm_flops, __ATOMIC_RELAXED);
  if (seconds) *seconds = 1e-9 * (double)__atomic_load_n(&g_gemm_ns, __ATOMIC_RELAXED);
}

static ot_status exec(mm_entry *e, const ot_mm *m, const char *fn) {
  dnnl_stream_t s = NULL;
  OT_TRY(get_stream(&s, fn));
  void *scratch = NULL;   // this thread's scratchpad block
  if (e->scratch_bytes && !(scratch = ot_scratch_slot(OT_SCRATCH_GEMM, e->scratch_bytes)))
    return ot_error(OT_ENOMEM, "%s: oneDNN matmul M=%d N=%d K=%d: no %zu-byte scratchpad", fn, m->M, m->N,
                    m->K, e->scratch_bytes);
  dnnl_memory_t mem[5] = {0};
  bool mine = __atomic_exchange_n(&e->busy, 1, __ATOMIC_ACQUIRE) == 0;
  int n = m->bias ? 4 : 3;
  void *h[5] = {(void *)m->A, (void *)m->B, m->C, (void *)m->bias, scratch};
  static const int argi[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, DNNL_ARG_SCRATCHPAD};
  int idx[5] = {0, 1, 2, 3, 4}, na = 0;   // the arguments this call passes
  for (int i = 0; i < 5; i++) if (i < n || (i == 4 && scratch)) idx[na++] = i;
  dnnl_status_t st = dnnl_success;
  if (mine) memcpy(mem, e->mem, sizeof mem);
  else
    for (int a = 0; a < na && !st; a++)
      st = dnnl_memory_create(&mem[idx[a]], &e->md[idx[a]], g_eng, DNNL_MEMORY_NONE);
  dnnl_exec_arg_t args[5];
  for (int a = 0; a < na && !st; a++) {
    st = dnnl_memory_set_data_handle(mem[idx[a]], h[idx[a]]);
    args[a].arg = argi[idx[a]]; args[a].memory = mem[idx[a]];
  }
  const double t0 = ot_now();
  if (!st) st = dnnl_primitive_execute(e->prim, s, na, args);
  if (!st) st = dnnl_stream_wait(s);
  ot__gemm_count(m, ot_now() - t0);
  if (mine) __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
  else for (int i = 0; i < 5; i++) if (mem[i]) dnnl_memory_destroy(mem[i]);
  if (st != dnnl_success)
    return ot_error(OT_EINTERNAL, "%s: oneDNN matmul M=%d N=%d K=%d (%s) execution failed: status %d",
                    fn, m->M, m->N, m->K, e->impl, (int)st);
  return OT_OK;
}

bool ot__gemm_bf16_native(void) {
  int mode = __atomic_load_n(&g_bf16_mode, __ATOMIC_RELAXED);
  if (mode < 0) {
    const char *v = getenv("OT_GEMM_BF16");
    if (v && strcmp(v, "native") == 0) mode = 1;
    else if (v && strcmp(v, "convert") == 0) mode = 0;
    else mode = ot_cpu()->avx512_bf16 ? 1 : 0;
    __atomic_store_n(&g_bf16_mode, mode, __ATOMIC_RELAXED);
  }
  return mode == 1;
}
bool ot_gemm_bf16_native(void) { return ot__gemm_bf16_native(); }
void ot__gemm_bf16_set_mode(int mode) { __atomic_store_n(&g_bf16_mode, mode < 0 ? -1 : (mode ? 1 : 0), __ATOMIC_RELAXED); }

// Whether m runs in oneDNN as is (all f32, or bf16 x bf16 with a native primitive).
static bool runs_direct(const ot_mm *m) {
  if (m->adt == OT_F32 && m->bdt == OT_F32 && m->cdt == OT_F32) return true;
  if (m->adt != OT_BF16 || m->bdt != OT_BF16 || !ot__gemm_bf16_native()) return false;
  mm_entry *e;
  if (lookup(m, &e, "ot_gemm") != OT_OK) { ot_clear_error(); return false; }
  return e->prim != NULL;
}

size_t ot__mm_ws(const ot_mm *m) { return runs_direct(m) ? 0 : ot__mm_cvt_ws(m); }

// f32 GEMMs with a transposed A and no epilogue (the weight gradients dW += dy^T x of
// linear / QKV backward) go to oneDNN's sgemm: on these shapes (dy^T [N, M] with M the
// tokens) it runs 7-15% faster than the matmul primitive, which first copies the
// transposed A into its blocked layout. OT_GEMM_TA=matmul (or ot__gemm_ta_set_mode(0))
// keeps the primitive; both paths are tested against the reference.
static int g_ta_sgemm = -1;
static bool ta_sgemm(const ot_mm *m) {
  if (!m->ta || m->bias || m->gelu || m->adt != OT_F32 || m->bdt != OT_F32 || m->cdt != OT_F32)
    return false;
  int mode = __atomic_load_n(&g_ta_sgemm, __ATOMIC_RELAXED);
  if (mode < 0) {
    const char *v = getenv("OT_GEMM_TA");
    mode = v && strcmp(v, "matmul") == 0 ? 0 : 1;
    __atomic_store_n(&g_ta_sgemm, mode, __ATOMIC_RELAXED);
  }
  return mode == 1;
}
void ot__gemm_ta_set_mode(int mode) {
  __atomic_store_n(&g_ta_sgemm, mode < 0 ? -1 : (mode ? 1 : 0), __ATOMIC_RELAXED);
}

// An all-f32 m: sgemm for a transposed A without epilogue (ta_sgemm), else the
// cached matmul primitive.
ot_status ot__mm_run_f32(const ot_mm *m, const char *fn) {
  if (ta_sgemm(m)) {
    const double t0 = ot_now();
    dnnl_status_t st = dnnl_sgemm('T', m->tb ? 'T' : 'N', m->M, m->N, m->K, m->alpha, m->A, m->lda,
                                  m->B, m->ldb, m->beta, m->C, m->ldc);
    ot__gemm_count(m, ot_now() - t0);
    if (st != dnnl_success)
      return ot_error(OT_EINTERNAL, "%s: oneDNN sgemm M=%d N=%d K=%d (transposed A) failed: status %d",
                      fn, m->M, m->N, m->K, (int)st);
    return OT_OK;
  }
  mm_entry *e;
  OT_TRY(lookup(m, &e, fn));
  ot_status s = exec(e, m, fn);
  release(e);
  return s;
}

ot_status ot__mm_run_lib(const ot_mm *m, void *ws, const char *fn) {
  if (m->adt == OT_F32 && m->bdt == OT_F32 && m->cdt == OT_F32) return ot__mm_run_f32(m, fn);
  if (m->adt == OT_BF16 && m->bdt == OT_BF16 && ot__gemm_bf16_native()) {
    mm_entry *e;
    OT_TRY(lookup(m, &e, fn));
    if (e->prim) {
      ot_status s = exec(e, m, fn);
      release(e);
      return s;
    }
    release(e);
  }
  // conversion path (gemm_cvt.c): f32 GEMMs on tiles, bf16 operands converted tile by tile
  return ot__mm_cvt_run(m, ws, fn);
}

// C[M,N] = alpha op(A) op(B) + beta C; see ops.h.
ot_status ot_gemm(ot_dtype ab, ot_dtype cdt, bool transA, bool transB, int M, int N, int K,
                  float alpha, const void *A, int lda, const void *B, int ldb, float beta,
                  void *C, int ldc) {
  static const char fn[] = "ot_gemm";
  if (ab != OT_F32 && ab != OT_BF16 && ab != OT_F16)
    return ot_error(OT_EINVAL, "%s: A/B dtype %s unsupported (use f32, bf16 or f16)", fn, ot_dtype_name(ab));
  if (cdt != OT_F32 && cdt != ab)
    return ot_error(OT_EINVAL, "%s: C dtype %s with A/B %s unsupported (C is f32, or the A/B dtype)",
                    fn, ot_dtype_name(cdt), ot_dtype_name(ab));
  OT_CHECK_POS(M, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(K, fn);
  OT_CHECK_PTR(A, fn);
  OT_CHECK_PTR(B, fn);
  OT_CHECK_PTR(C, fn);
  if (lda < (transA ? M : K))
    return ot_error(OT_EINVAL, "%s: lda=%d must be >= %s=%d (A is stored [%s] row-major)", fn, lda,
                    transA ? "M" : "K", transA ? M : K, transA ? "K, M" : "M, K");
  if (ldb < (transB ? K : N))
    return ot_error(OT_EINVAL, "%s: ldb=%d must be >= %s=%d (B is stored [%s] row-major)", fn, ldb,
                    transB ? "K" : "N", transB ? K : N, transB ? "N, K" : "K, N");
  if (ldc < N) return ot_error(OT_EINVAL, "%s: ldc=%d must be >= N=%d (C is [M, N] row-major)", fn, ldc, N);
  size_t es = ot_dtype_size(ab);
  OT_PROF_BEGIN("gemm", 2.0 * M * N * K,
                (double)es * ((double)M * K + (double)K * N) + (double)ot_dtype_size(cdt) * M * N);
  ot_mm m = {ab, ab, cdt, transA, transB, M, N, K, alpha, beta, A, lda, B, ldb, C, ldc, NULL, false};
  ot_status s = ot__mm_run(&m, NULL, fn);
  OT_PROF_STOP();
  return s;
}

int ot_gemm_cache_size(void) {
  pthread_mutex_lock(&g_mu);
  int n = g_nprim;
  pthread_mutex_unlock(&g_mu);
  return n;
}

// Drops every cached primitive. Must not run while another thread is in a GEMM.
void ot_gemm_cache_clear(void) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_n; i++) entry_destroy(g_tab[i]);
  ot_mem_free(g_tab);
  g_tab = NULL;
  g_n = g_cap = g_nprim = 0;
  pthread_mutex_unlock(&g_mu);
}
