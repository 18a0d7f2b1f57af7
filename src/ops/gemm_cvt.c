// The conversion path of the GEMM wrapper: bf16 operands on CPUs without a
// native bf16 GEMM (no avx512_bf16, or OT_GEMM_BF16=convert), run as f32 GEMMs
// on tiles. The f32 workspace holds one tile of each converted operand, so it
// is bounded (the budget: 32 MiB, or OT_GEMM_CVT_MB) whatever M, N and K are:
//  - op(A) [M, K]: blocks of mb rows x kb columns, converted once per block
//    when the contraction is one chunk (kb = K), else per (block, chunk);
//  - op(B) [K, N]: an f32 operand (e.g. a layer's f32 master weights) is read
//    in place, a bf16 one converted by [kb, nb] panels;
//  - C [M, N]: f32 written in place (contraction chunks after the first add
//    into it, beta = 1); bf16 accumulated in an f32 [mb, nb] tile (preloaded
//    from C when beta != 0) and rounded back once, after the last chunk.
// The bias is added by the first contraction chunk and the GELU epilogue runs
// with the last, so the result equals one f32 GEMM up to the order of the
// contraction's partial sums. Each tile is an f32 GEMM of gemm.c (oneDNN's
// cached matmul primitive, or sgemm for a transposed A).
#include "gemm_impl.h"
#include <limits.h>
#include <stdlib.h>

// The default budget, 32 MiB: the linear backward's one f32 copy of dy (linear.c) fits it
// for every layer of GPT-2 124M at 2048 tokens; the tiles alone run as fast with 8 MiB
// (bench_gemm_cvt on an idle machine: within 1% of 32 MiB on those shapes).
#define CVT_BYTES_DEFAULT ((size_t)32 << 20)
#define CVT_KT_DEFAULT 512      // contraction chunk with a transposed A (the weight gradients)
#define CVT_CAP 4096            // contraction chunk (no transposed A) and column panel: only a
#define CVT_CAP_DIV 512         // vocabulary-sized K or N splits, so that the row blocks stay
                                // tall (smaller budgets: budget/4/512)
#define CVT_MMIN 16             // fewest rows in a block, whatever the budget
#define CVT_PANEL_MIN 1024      // narrowest column panel / contraction chunk chosen to keep M whole

static size_t g_bytes;          // 0: default (tests and benchmarks set it)
static int g_kt;

void ot__gemm_cvt_set_tiles(size_t bytes, int kt) {
  __atomic_store_n(&g_bytes, bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&g_kt, kt, __ATOMIC_RELAXED);
}

// The budget: set by ot__gemm_cvt_set_tiles, else OT_GEMM_CVT_MB (MiB, >= 1), else the default.
static size_t budget(void) {
  size_t bytes = __atomic_load_n(&g_bytes, __ATOMIC_RELAXED);
  if (bytes) return bytes;
  static size_t env = 0;   // read once (a benign race: every thread computes the same value)
  size_t e = __atomic_load_n(&env, __ATOMIC_RELAXED);
  if (!e) {
    const char *v = getenv("OT_GEMM_CVT_MB");
    const long mb = v ? strtol(v, NULL, 10) : 0;
    e = mb >= 1 && mb <= (1L << 20) ? (size_t)mb << 20 : CVT_BYTES_DEFAULT;
    __atomic_store_n(&env, e, __ATOMIC_RELAXED);
  }
  return e;
}

size_t ot_gemm_convert_ws_max(void) { return budget(); }

typedef struct {
  int mb, nb, kb;               // tile extents
  size_t a, b, c;               // bytes of the f32 tiles of A, B, C (0: that operand is used in place)
} cvt_tiles;

static int imin(int a, int b) { return a < b ? a : b; }

// Tile extents of m within the budget: full N and K where they are below the
// caps (narrower when that keeps all M rows in one block), then as many rows as
// fit (at least CVT_MMIN, a multiple of 16 below M).
static void cvt_plan(const ot_mm *m, cvt_tiles *t) {
  const size_t bytes = budget();
  int kt = __atomic_load_n(&g_kt, __ATOMIC_RELAXED);
  if (kt <= 0) kt = CVT_KT_DEFAULT;
  const size_t F = bytes / 4;
  const bool ca = m->adt != OT_F32, cb = m->bdt != OT_F32, cc = m->cdt != OT_F32;   // converted
  const size_t c0 = F / CVT_CAP_DIV;   // >= 1 GiB: no caps (whole operands, as benchmarks compare)
  const int cap = bytes >= ((size_t)1 << 30) ? INT_MAX : c0 < 16 ? 16 : c0 > CVT_CAP ? CVT_CAP : (int)c0;
  int nb = imin(m->N, cap), kb = imin(m->K, m->ta ? kt : cap);
  while (cb && (size_t)kb * nb > F / 2 && (nb > 64 || kb > 64)) {   // B's panel: half the budget at most
    if (nb >= kb) nb = nb / 2 > 64 ? nb / 2 : 64;
    else kb = kb / 2 > 64 ? kb / 2 : 64;
  }
  // a split N (or K) whose panels leave fewer rows than M: narrower panels (>= CVT_PANEL_MIN), so
  // that one block holds every row and each weight panel is read (and packed by oneDNN) once
  const size_t rowmax = F / (size_t)m->M;
  if (!cb && nb < m->N && cc && rowmax < (ca ? (size_t)kb : 0) + nb) {
    const size_t w = rowmax - (ca ? (size_t)kb : 0);
    if (rowmax > (ca ? (size_t)kb : 0) && w >= CVT_PANEL_MIN) nb = (int)(w / 64 * 64);
  } else if (!cb && !m->ta && kb < m->K && ca && rowmax < kb + (cc ? (size_t)nb : 0)) {
    const size_t w = rowmax - (cc ? (size_t)nb : 0);
    if (rowmax > (cc ? (size_t)nb : 0) && w >= CVT_PANEL_MIN) kb = (int)(w / 64 * 64);
  }
  const size_t bsz = cb ? (size_t)kb * nb : 0, row = (ca ? (size_t)kb : 0) + (cc ? (size_t)nb : 0);
  size_t mb = row ? (F > bsz ? (F - bsz) / row : 0) : (size_t)m->M;
  if (mb < (size_t)m->M) mb = mb / 16 * 16;
  if (mb < CVT_MMIN) mb = CVT_MMIN;
  t->mb = imin(m->M, mb > (size_t)m->M ? m->M : (int)mb);
  t->nb = nb;
  t->kb = kb;
  t->a = ca ? ot_align64((size_t)t->mb * kb * 4) : 0;
  t->b = cb ? ot_align64((size_t)kb * nb * 4) : 0;
  t->c = cc ? ot_align64((size_t)t->mb * nb * 4) : 0;
}

size_t ot__mm_cvt_ws(const ot_mm *m) {
  cvt_tiles t;
  cvt_plan(m, &t);
  return t.a + t.b + t.c;
}

// Element offset of stored element (r, c) of a row-major matrix with leading dimension ld.
static size_t at(int r, int c, int ld) { return (size_t)r * ld + c; }

static const void *elem(const void *p, ot_dtype dt, size_t i) {
  return (const char *)p + i * ot_dtype_size(dt);
}

// The conversion kernel's flag for a stored operand dtype (k_lin_copy2d: 1 = bf16).
static int sk(ot_dtype dt) { return ot__sk(dt); }

// The f32 view of op(X)[r0:+rows, c0:+cols] of an operand stored [R, C] (ld), or [C, R]
// when transposed (tr): read in place when X is f32 (tile NULL), else converted into
// tile, which keeps the panel last converted (*pr, *pc) and is reused while it is the
// same. *ldo: the view's leading dimension.
static const float *panel(const void *x, ot_dtype dt, bool tr, int ld, int r0, int c0, int rows,
                          int cols, float *tile, int *pr, int *pc, int *ldo) {
  const size_t off = tr ? at(c0, r0, ld) : at(r0, c0, ld);
  if (!tile) {
    *ldo = ld;
    return (const float *)x + off;
  }
  if (*pr != r0 || *pc != c0) {
    OT_KPICK(k_lin_copy2d)(tile, 0, (size_t)(tr ? rows : cols), elem(x, dt, off), sk(dt), (size_t)ld,
                           tr ? cols : rows, tr ? rows : cols);
    *pr = r0;
    *pc = c0;
  }
  *ldo = tr ? rows : cols;
  return tile;
}

ot_status ot__mm_cvt_run(const ot_mm *m, void *ws, const char *fn) {
  cvt_tiles t;
  cvt_plan(m, &t);
  if (!ws && !(ws = ot_scratch(t.a + t.b + t.c))) return OT_ENOMEM;
  float *ta = ws, *tb = (float *)((char *)ws + t.a), *tc = (float *)((char *)ws + t.a + t.b);
  const int M = m->M, N = m->N, K = m->K;
  int ai = -1, ak = -1, bk = -1, bj = -1;   // the tiles of A and B the workspace holds
  for (int i0 = 0; i0 < M; i0 += t.mb) {
    const int mr = imin(t.mb, M - i0);
    for (int j0 = 0; j0 < N; j0 += t.nb) {
      const int nr = imin(t.nb, N - j0);
      ot_mm f = *m;
      f.adt = f.bdt = f.cdt = OT_F32;
      f.M = mr;
      f.N = nr;
      if (t.c) {
        if (m->beta != 0.0f)
          OT_KPICK(k_lin_copy2d)(tc, 0, (size_t)nr, elem(m->C, m->cdt, at(i0, j0, m->ldc)), sk(m->cdt),
                                 (size_t)m->ldc, mr, nr);
        f.C = tc;
        f.ldc = nr;
      } else {
        f.C = (float *)m->C + at(i0, j0, m->ldc);
      }
      for (int k0 = 0; k0 < K; k0 += t.kb) {
        const int kr = imin(t.kb, K - k0);
        // op(A)[i0:+mr, k0:+kr]: stored [M, K], or [K, M] when transposed
        f.A = panel(m->A, m->adt, m->ta, m->lda, i0, k0, mr, kr, t.a ? ta : NULL, &ai, &ak, &f.lda);
        // op(B)[k0:+kr, j0:+nr]: stored [K, N], or [N, K] when transposed
        f.B = panel(m->B, m->bdt, m->tb, m->ldb, k0, j0, kr, nr, t.b ? tb : NULL, &bk, &bj, &f.ldb);
        f.K = kr;
        f.beta = k0 == 0 ? m->beta : 1.0f;
        f.bias = k0 == 0 && m->bias ? m->bias + j0 : NULL;
        f.gelu = m->gelu && k0 + kr == K;
        OT_TRY(ot__mm_run_f32(&f, fn));
      }
      if (t.c)
        OT_KPICK(k_lin_copy2d)((void *)elem(m->C, m->cdt, at(i0, j0, m->ldc)), sk(m->cdt),
                               (size_t)m->ldc, tc, 0, (size_t)nr, mr, nr);
    }
  }
  return OT_OK;
}
