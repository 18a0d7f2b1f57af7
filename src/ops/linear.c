// Linear layer y = act(x w^T + b), forward and backward, f32 and bf16 storage,
// on the oneDNN GEMM wrapper of gemm.c (see gemm_impl.h for the bf16 paths).
#include "gemm_impl.h"
#include "quant_impl.h"
#include <stdlib.h>

static ot_status check_common(const char *fn, ot_dtype dt, int M, int N, int K, ot_act act) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_POS(M, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(K, fn);
  if (act != OT_ACT_NONE && act != OT_ACT_GELU)
    return ot_error(OT_EINVAL, "%s: act=%d unknown (use OT_ACT_NONE or OT_ACT_GELU)", fn, (int)act);
  return OT_OK;
}

// GELU without pre: as the GEMM's epilogue (oneDNN eltwise post-op) where that
// is cheap, i.e. with oneDNN's brgemm kernels (avx512_core: ~7% over the bare
// GEMM), or as a separate in-place ot_gelu_fwd pass after the GEMM: on AVX2
// oneDNN uses gemm:jit whose GELU post-op costs ~27% (M=2048 N=3072 K=768:
// 63 -> 80 ms) against ~4 ms for the separate pass. OT_LINEAR_GELU=fused|separate
// overrides.
static int g_gelu_fused = -1;
static bool gelu_fused(void) {
  int f = __atomic_load_n(&g_gelu_fused, __ATOMIC_RELAXED);
  if (f < 0) {
    const char *v = getenv("OT_LINEAR_GELU");
    if (v && strcmp(v, "fused") == 0) f = 1;
    else if (v && strcmp(v, "separate") == 0) f = 0;
    else f = ot_isa_supported(OT_ISA_AVX512);
    __atomic_store_n(&g_gelu_fused, f, __ATOMIC_RELAXED);
  }
  return f == 1;
}
void ot__linear_set_gelu_fused(int mode) {
  __atomic_store_n(&g_gelu_fused, mode < 0 ? -1 : (mode ? 1 : 0), __ATOMIC_RELAXED);
}

// x: [M,K] (dt), w: [N,K] (dt), b: [N] f32 or NULL -> y: [M,N] (dt) =
// act(x w^T + b). GELU with pre: [M,N] (dt) stores x w^T + b, then y = gelu(pre);
// GELU with pre == NULL: fused epilogue or in place on y (see gelu_fused).
ot_status ot_linear_fwd(ot_dtype dt, void *y, void *pre, const void *x, const void *w,
                        const float *b, int M, int N, int K, ot_act act) {
  return ot_linear_fwd_w(dt, dt, y, pre, x, w, b, M, N, K, act);
}

// Weights in wdt: dt, or f32 (read in place by the GEMM's conversion path).
static ot_status check_wdt(const char *fn, ot_dtype dt, ot_dtype wdt) {
  if (wdt != dt && wdt != OT_F32)
    return ot_error(OT_EINVAL, "%s: weights dtype %s with %s activations unsupported (use %s or f32)",
                    fn, ot_dtype_name(wdt), ot_dtype_name(dt), ot_dtype_name(dt));
  return OT_OK;
}

ot_status ot_linear_fwd_w(ot_dtype dt, ot_dtype wdt, void *y, void *pre, const void *x,
                          const void *w, const float *b, int M, int N, int K, ot_act act) {
  static const char fn[] = "ot_linear_fwd";
  OT_TRY(check_common(fn, dt, M, N, K, act));
  OT_TRY(check_wdt(fn, dt, wdt));
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(w, fn);
  const bool gelu = act == OT_ACT_GELU, keep = gelu && pre;
  if (keep && pre == y)
    return ot_error(OT_EINVAL, "%s: pre must not alias y (the backward needs x w^T + b intact)", fn);
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("linear_fwd", 2.0 * M * N * K, (double)es * ((double)M * K + (double)N * K + (double)M * N * (keep ? 2 : 1)));
  const bool fuse = gelu && !keep && gelu_fused();
  ot_status s;
  if (M == 1 && dt == OT_F32 && wdt == OT_F32 && !keep) {   // decode: the GEMV (never waits on a descheduled thread)
    s = ot__gemv_f32(y, x, w, b, N, K);
    if (s == OT_OK && gelu) s = ot_gelu_fwd(dt, y, y, (size_t)N);
    OT_PROF_STOP();
    return s;
  }
  ot_mm m = {dt, wdt, dt, false, true, M, N, K, 1.0f, 0.0f, x, K, w, K, keep ? pre : y, N, b, fuse};
  s = ot__mm_run(&m, NULL, fn);
  if (s == OT_OK && gelu && !fuse) s = ot_gelu_fwd(dt, y, keep ? pre : y, (size_t)M * N);
  OT_PROF_STOP();
  return s;
}

// dy: [M,N] (dt; with GELU overwritten by dy * gelu'(pre)); dx: [M,K] (dt) =
// dy w, overwritten (NULL: skip; w may then be NULL); dw: [N,K] f32 += dy^T x;
// db: [N] f32 += column sums of dy (NULL: skip).
ot_status ot_linear_bwd(ot_dtype dt, void *dx, float *dw, float *db, void *dy,
                        const void *pre, const void *x, const void *w,
                        int M, int N, int K, ot_act act) {
  return ot_linear_bwd_w(dt, dt, dx, dw, db, dy, pre, x, w, M, N, K, act);
}

ot_status ot_linear_bwd_w(ot_dtype dt, ot_dtype wdt, void *dx, float *dw, float *db, void *dy,
                          const void *pre, const void *x, const void *w, int M, int N, int K,
                          ot_act act) {
  static const char fn[] = "ot_linear_bwd";
  OT_TRY(check_common(fn, dt, M, N, K, act));
  OT_TRY(check_wdt(fn, dt, wdt));
  OT_CHECK_PTR(dy, fn);
  OT_CHECK_PTR(x, fn);
  if (dx) OT_CHECK_PTR(w, fn);
  if (act == OT_ACT_GELU && !pre)
    return ot_error(OT_EINVAL, "%s: act=GELU needs pre (x w^T + b saved by ot_linear_fwd)", fn);
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("linear_bwd", (dx ? 4.0 : 2.0) * M * N * K,
                (double)es * (2.0 * M * N + (double)M * K * (dx ? 2 : 1) + (dx ? (double)N * K : 0)) + 8.0 * N * K);
  ot_status s = OT_OK;
  if (act == OT_ACT_GELU) s = ot_gelu_bwd(dt, dy, pre, dy, (size_t)M * N);

  // 16-bit GEMMs that convert (f16, or bf16 without a native bf16 GEMM or with f32 weights): dy converted to f32 once
  // for both GEMMs and the bias when that copy fits the conversion budget, else each GEMM
  // converts it tile by tile (gemm_cvt.c)
  const bool cvt = dt != OT_F32 && (dt != OT_BF16 || wdt == OT_F32 || !ot__gemm_bf16_native()) && (dx || dw);
  const size_t gsz = cvt && (size_t)M * N * 4 <= ot_gemm_convert_ws_max() ? ot_align64((size_t)M * N * 4) : 0;
  const ot_dtype gdt = gsz ? OT_F32 : dt;
  ot_mm mx = {gdt, wdt, dt, false, false, M, K, N, 1.0f, 0.0f, dy, N, w, K, dx, K, NULL, false};
  ot_mm mw = {gdt, dt, OT_F32, true, false, N, K, M, 1.0f, 1.0f, dy, N, x, K, dw, K, NULL, false};
  uint8_t *ws = NULL;
  if (s == OT_OK && gsz) {
    const size_t wx = dx ? ot__mm_ws(&mx) : 0, ww = dw ? ot__mm_ws(&mw) : 0;
    if ((ws = ot_scratch(gsz + (wx > ww ? wx : ww)))) {
      OT_KPICK(k_lin_copy2d)(ws, 0, (size_t)N, dy, ot__sk(dt), (size_t)N, M, N);
      mx.A = mw.A = ws;
    } else {
      s = OT_ENOMEM;
    }
  }
  if (s == OT_OK && dx) s = ot__mm_run(&mx, ws ? ws + gsz : NULL, fn);
  if (s == OT_OK && dw) s = ot__mm_run(&mw, ws ? ws + gsz : NULL, fn);
  if (s == OT_OK && db) OT_KPICK(k_lin_colsum)(db, ws ? (const void *)ws : dy, ot__sk(gdt), (size_t)N, M, N);
  OT_PROF_STOP();
  return s;
}

ot_status ot_linear_dw_rows(ot_dtype dt, float *dw, const void *dy, const void *x, int M, int N,
                            int K, int n0, int rows) {
  static const char fn[] = "ot_linear_dw_rows";
  OT_TRY(check_common(fn, dt, M, N, K, OT_ACT_NONE));
  OT_CHECK_PTR(dw, fn);
  OT_CHECK_PTR(dy, fn);
  OT_CHECK_PTR(x, fn);
  if (n0 < 0 || rows <= 0 || n0 + rows > N)
    return ot_error(OT_EINVAL, "%s: rows [%d, %d) outside the %d output rows", fn, n0, n0 + rows, N);
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("linear_dw_rows", 2.0 * M * rows * K, (double)es * ((double)M * rows + (double)M * K) + 4.0 * rows * K);
  ot_mm mw = {dt, dt, OT_F32, true, false, rows, K, M, 1.0f, 0.0f, (const char *)dy + (size_t)n0 * es, N,
              x, K, dw, K, NULL, false};
  ot_status s = ot__mm_run(&mw, NULL, fn);
  OT_PROF_STOP();
  return s;
}
