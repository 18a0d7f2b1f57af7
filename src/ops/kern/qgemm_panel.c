// The int8 x int8 -> int32 GEMM in outer-product form, for many activation rows
// (prefill): the same contract as k_qgemm_i8 (qgemm_k.h), another order of the
// same integer sums.
//
// The dot-product form (qgemm.c) keeps partial sums across the lanes of each
// accumulator and pays a conversion, a multiply-add and (at the end) a
// horizontal sum per (weight row, activation row) and weight group. Here each
// lane is one output column: the weights are first packed, panel by panel, as
// [K / 4][QP_NR][QP_NP columns][4 bytes] (QP_NP = the lanes of an int32
// vector), so one vector holds 4 consecutive k of QP_NP columns; a register
// tile of QP_MR activation rows x QP_NR vectors takes, per 4 k, QP_NR weight
// loads and one 4-byte broadcast of each activation row (VNNI: vpdpbusd; AVX2:
// vpsignb, vpmaddubsw, vpmaddwd as in simd.h's vq_dot). The group's integer
// sums become f32 once per group for QP_MR x QP_NR vectors of outputs.
// Work split: the threads share the panels (QP_NR * QP_NP output columns);
// each packs its panel into its own scratch (L2-resident: panel bytes =
// columns x K rounded up to 32), then runs every activation row through it
// (xq streams from the last-level cache). Every output is computed by one
// thread in a fixed order (independent of the thread count).
#if defined(OT_ARCH_AVX512)
#pragma GCC target("avx512vnni")   // as qgemm.c: ops/quant.c runs the AVX-512 variant only with VNNI
#endif
#include "core/simd.h"
#include "qgemm_k.h"
#include <omp.h>

#define AI static inline __attribute__((always_inline))

// qp: an int32 vector of QP_NP lanes (one per output column), loaded as 4 x
// QP_NP bytes of a packed panel; qp_bcast: 4 activation bytes in every lane;
// qp_dot(acc, w, wa, x): acc + sum of the 4 byte products per lane (x as
// stored by k_qx_i8, wa = qp_wabs(w), hoisted). Under VNNI the activations
// carry + 128 (VQ_XOFF) and the sums are corrected by the packed -128 * sum(w).
#if defined(OT_ARCH_AVX512)
#define QP_NP 16
#define QP_MR 4   // 4 x 4 measured against 8 x 3, 8 x 2, 6 x 4, 5 x 4, 4 x 5, 3 x 6 (bench_qgemv --i8gemm):
#define QP_NR 4   // the larger tiles run out of registers (spills, copies) and lose 10-40% on groups
typedef __m512i qp;
static inline qp qp_load(const int8_t *p) { return _mm512_loadu_si512(p); }
static inline qp qp_zero(void) { return _mm512_setzero_si512(); }
static inline qp qp_bcast(const int8_t *x) { int32_t v; memcpy(&v, x, 4); return _mm512_set1_epi32(v); }
#if VQ_XOFF   // VNNI (simd.h sets VQ_XOFF 128 exactly when the pragma above enabled it)
static inline qp qp_wabs(qp w) { return w; }
static inline qp qp_dot(qp acc, qp w, qp wa, qp x) { (void)wa; return _mm512_dpbusd_epi32(acc, x, w); }
static inline qp qp_wsum(qp cs, qp w) { return _mm512_dpbusd_epi32(cs, _mm512_set1_epi8(1), w); }
static inline qp qp_unoff(qp cs) { return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(cs, 7)); }
#else   // a compiler that ignores the pragma (clang): vq_dot's AVX2 form in 512 bits (no vpsignb:
        // x negated under the mask of w's sign bits), as qgemm.c's variant then computes
static inline qp qp_wabs(qp w) { return _mm512_abs_epi8(w); }
static inline qp qp_dot(qp acc, qp w, qp wa, qp x) {
  const __m512i xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(wa, xs), _mm512_set1_epi16(1))); }
static inline qp qp_wsum(qp cs, qp w) { (void)w; return cs; }
static inline qp qp_unoff(qp cs) { (void)cs; return _mm512_setzero_si512(); }
#endif
static inline void qp_store(int32_t *p, qp v) { _mm512_storeu_si512(p, v); }
static inline qp qp_loadi(const int32_t *p) { return _mm512_loadu_si512(p); }
#else   // AVX2 and portable: a panel vector is simd.h's vq (VQ = 4 x QP_NP bytes) and its operations
#if defined(OT_ARCH_AVX2)
#define QP_NP 8
#define QP_MR 4   // 16 registers: 8 accumulators, 2 weights, 2 |weights|, a broadcast, temporaries
#define QP_NR 2   // (3 x 2, 2 x 3, 6 x 1 measured: equal or slower)
static inline vq qp_bcast(const int8_t *x) { int32_t v; memcpy(&v, x, 4); return _mm256_set1_epi32(v); }
static inline void qp_store(int32_t *p, vq v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline vq qp_loadi(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
#else
#define QP_NP 1
#define QP_MR 4
#define QP_NR 4
static inline vq qp_bcast(const int8_t *x) { return vq_load(x); }
static inline void qp_store(int32_t *p, vq v) { *p = v; }
static inline vq qp_loadi(const int32_t *p) { return *p; }
#endif
_Static_assert(VQ == 4 * QP_NP, "simd.h's vq holds 4 bytes of each panel column");
typedef vq qp;
static inline qp qp_load(const int8_t *p) { return vq_load(p); }
static inline qp qp_zero(void) { return vq_zero(); }
static inline qp qp_wabs(qp w) { return vq_wabs(w); }
static inline qp qp_dot(qp acc, qp w, qp wa, qp x) { return vq_dot(acc, wa, w, x); }
static inline qp qp_wsum(qp cs, qp w) { return vq_wsum(cs, w); }
static inline qp qp_unoff(qp cs) { return vq_unoff(cs); }
#endif
_Static_assert(QP_NP == VL, "a panel vector's columns are the f32 vector's lanes");
_Static_assert(QP_MR == 4, "rows() takes the last M % QP_MR rows in tiles of 3, 2, 1");

#define QP_NB (QP_NR * QP_NP)   // output columns per panel
#define QP_VB (QP_NP * 4)       // bytes per packed vector

// A packed panel: w [Kp / 4][QP_NR][QP_VB] bytes, then per group g (ng groups)
// the scales sc [g][QP_NB] f32 and (VNNI) the accumulators' start values
// cs [g][QP_NB] int32 = -128 * the group's weight sums.
typedef struct {
  int8_t *w;
  float *sc;
  int32_t *cs;
} panel;

// Bytes of one panel's scratch for K = cols padded to Kp and ng groups.
static size_t panel_bytes(int Kp, int ng) {
  return (size_t)Kp * QP_NB + (size_t)ng * QP_NB * 8 + 64;
}

// Packs weight rows [n0, n0 + QP_NB) (rows from N on and columns from K on as
// zeros, scales 0) into p; ng groups of equal width along Kp (1: per channel).
static void pack(panel *p, const ot__qk_weight *W, int n0, int Kp, int ng) {
  const int N = W->rows, K = W->cols;
  const int8_t *wd = (const int8_t *)W->data;
  for (int j = 0; j < QP_NR; j++) {
    const int c0 = n0 + j * QP_NP;
    int8_t *dst = p->w + (size_t)j * QP_VB;
    int k = 0;
#if VL > 1
    if (c0 + QP_NP <= N)   // VL full rows: VL x VL transposes of 4-byte units (bit patterns moved, never computed)
      for (; k + 4 * VL <= K; k += 4 * VL) {
        vf r[VL];
        for (int c = 0; c < VL; c++) {
          memcpy(&r[c], wd + (size_t)(c0 + c) * K + k, sizeof r[c]);
        }
        vtranspose(r);
        for (int t = 0; t < VL; t++) memcpy(dst + ((size_t)(k / 4 + t) * QP_NR) * QP_VB, &r[t], QP_VB);
      }
#endif
    for (; k < Kp; k += 4)
      for (int c = 0; c < QP_NP; c++)
        for (int b = 0; b < 4; b++) {
          const int n = c0 + c, kk = k + b;
          dst[((size_t)(k / 4) * QP_NR) * QP_VB + c * 4 + b] = n < N && kk < K ? wd[(size_t)n * K + kk] : 0;
        }
  }
  for (int g = 0; g < ng; g++)
    for (int c = 0; c < QP_NB; c++) p->sc[(size_t)g * QP_NB + c] = n0 + c < N ? W->scales[(size_t)(n0 + c) * ng + g] : 0.0f;
  if (VQ_XOFF) {
    const int k4g = (Kp / 4) / ng;
    for (int g = 0; g < ng; g++)
      for (int j = 0; j < QP_NR; j++) {
        qp cs = qp_zero();
        for (int k4 = g * k4g; k4 < (g + 1) * k4g; k4++)
          cs = qp_wsum(cs, qp_load(p->w + ((size_t)k4 * QP_NR + j) * QP_VB));
        qp_store(p->cs + (size_t)g * QP_NB + j * QP_NP, qp_unoff(cs));
      }
  }
}

// Outputs y[m0 + i, n0 .. n0 + QP_NB) (those below N) for i < MT, from panel p;
// GC as in k_qgemm_i8 (a compile-time constant). ft: QP_MR x QP_NB floats (the
// per-group f32 sums of grouped weights).
AI void tile(int MT, int GC, const panel *p, int K4, int ng, const int8_t *xq, int Kp, const float *sx, int m0,
             int n0, int N, float *y, const float *bias, float *ft) {
  const int k4g = GC ? GC / 4 : K4;
  const int8_t *xr[QP_MR];
#pragma GCC unroll 8
  for (int i = 0; i < MT; i++) xr[i] = xq + (size_t)(m0 + i) * Kp;
  for (int g = 0; g < ng; g++) {
    qp a[QP_MR][QP_NR];
#pragma GCC unroll 4
    for (int j = 0; j < QP_NR; j++) {
      const qp s = VQ_XOFF ? qp_loadi(p->cs + (size_t)g * QP_NB + j * QP_NP) : qp_zero();
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) a[i][j] = s;
    }
    const int8_t *wp = p->w + (size_t)g * k4g * QP_NR * QP_VB;
#pragma GCC unroll 4
    for (int k4 = g * k4g; k4 < (g + 1) * k4g; k4++, wp += QP_NR * QP_VB) {
      qp w[QP_NR], wa[QP_NR];
#pragma GCC unroll 4
      for (int j = 0; j < QP_NR; j++) {
        w[j] = qp_load(wp + j * QP_VB);
        wa[j] = qp_wabs(w[j]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) {
        const qp xb = qp_bcast(xr[i] + 4 * k4);
#pragma GCC unroll 4
        for (int j = 0; j < QP_NR; j++) a[i][j] = qp_dot(a[i][j], w[j], wa[j], xb);
      }
    }
    const float *sc = p->sc + (size_t)g * QP_NB;
    const bool last = g == ng - 1;
#pragma GCC unroll 4
    for (int j = 0; j < QP_NR; j++) {
      const vf s = vload(sc + j * QP_NP);
      const int c0 = n0 + j * QP_NP, nc = N - c0 < QP_NP ? N - c0 : QP_NP;
      const vf b = bias && last && nc > 0 ? vload_part(bias + c0, nc) : vzero();
#pragma GCC unroll 8
      for (int i = 0; i < MT; i++) {
        float *f = ft + (size_t)i * QP_NB + j * QP_NP;
        const vf v = g ? vfmadd(vcvt_i2f(a[i][j]), s, vload(f)) : vmul(vcvt_i2f(a[i][j]), s);
        if (!last) vstore(f, v);
        else if (nc >= QP_NP) vstore(y + (size_t)(m0 + i) * N + c0, vfmadd(v, vset1(sx[m0 + i]), b));
        else if (nc > 0) vstore_part(y + (size_t)(m0 + i) * N + c0, vfmadd(v, vset1(sx[m0 + i]), b), nc);
      }
    }
  }
}

// Every activation row through panel p (at n0), in tiles of QP_MR rows.
AI void rows(int GC, const panel *p, int K4, int ng, const int8_t *xq, int Kp, const float *sx, int M, int n0,
             int N, float *y, const float *bias, float *ft) {
  int m = 0;
  for (; m + QP_MR <= M; m += QP_MR) tile(QP_MR, GC, p, K4, ng, xq, Kp, sx, m, n0, N, y, bias, ft);
  switch (M - m) {   // the last M % QP_MR rows
    case 3: tile(3, GC, p, K4, ng, xq, Kp, sx, m, n0, N, y, bias, ft); break;
    case 2: tile(2, GC, p, K4, ng, xq, Kp, sx, m, n0, N, y, bias, ft); break;
    case 1: tile(1, GC, p, K4, ng, xq, Kp, sx, m, n0, N, y, bias, ft); break;
    default: break;
  }
}

size_t OT_K(k_qgemm_i8p_ws)(int Kp, int group) {
  const int ng = group ? Kp / group : 1;
  return panel_bytes(Kp, ng) + (size_t)QP_MR * QP_NB * sizeof(float);
}

bool OT_K(k_qgemm_i8p)(float *y, const int8_t *xq, const float *sx, int M, int Kp, const ot__qk_weight *W,
                       const float *bias) {
  const int N = W->rows, G = W->group, ng = G ? W->cols / G : 1, K4 = Kp / 4;
  const int np = (N + QP_NB - 1) / QP_NB;
  const size_t wb = (size_t)Kp * QP_NB;
  int bad = 0;
#pragma omp parallel if (np > 1 && (double)M * N * W->cols >= 65536.0) reduction(| : bad)
  {
    char *ws = ot_scratch_slot(OT_SCRATCH_GEMM, OT_K(k_qgemm_i8p_ws)(Kp, G) + 64);
    if (!ws) bad = 1;
#pragma omp for schedule(dynamic, 1)
    for (int pi = 0; pi < np; pi++) {
      if (!ws) continue;
      char *a = (char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
      panel p = {(int8_t *)a, (float *)(a + wb), (int32_t *)(a + wb + (size_t)ng * QP_NB * 4)};
      float *ft = (float *)(a + panel_bytes(Kp, ng));
      const int n0 = pi * QP_NB;
      pack(&p, W, n0, Kp, ng);
      switch (G) {
        case 32: rows(32, &p, K4, ng, xq, Kp, sx, M, n0, N, y, bias, ft); break;
        case 64: rows(64, &p, K4, ng, xq, Kp, sx, M, n0, N, y, bias, ft); break;
        case 128: rows(128, &p, K4, ng, xq, Kp, sx, M, n0, N, y, bias, ft); break;
        default: rows(0, &p, K4, ng, xq, Kp, sx, M, n0, N, y, bias, ft); break;
      }
    }
  }
  return !bad;
}
