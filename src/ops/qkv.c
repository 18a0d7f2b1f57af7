// Fused QKV projection: one GEMM [B*T, C] x [(Hq+2Hkv)D, C]^T into an f32
// workspace, then a scatter to the per-head layouts [B, H, T, D] (converting
// to bf16 on the way). Backward: gather dq/dk/dv back into [B*T, (Hq+2Hkv)D]
// (f32 where the GEMMs convert bf16 anyway), then the dx and dw GEMMs
// and the bias column sums.
#include "gemm_impl.h"
#include "quant_impl.h"
#include <limits.h>

static ot_status check_qkv(const char *fn, ot_dtype dt, int B, int T, int C, int Hq, int Hkv, int D) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_POS(B, fn);
  OT_CHECK_POS(T, fn);
  OT_CHECK_POS(C, fn);
  OT_CHECK_POS(Hq, fn);
  OT_CHECK_POS(Hkv, fn);
  OT_CHECK_POS(D, fn);
  if (Hq % Hkv != 0)
    return ot_error(OT_EINVAL, "%s: Hq=%d must be a multiple of Hkv=%d (each kv head serves Hq/Hkv "
                    "query heads)", fn, Hq, Hkv);
  if ((int64_t)B * T > INT_MAX || ((int64_t)Hq + 2 * (int64_t)Hkv) * D > INT_MAX)
    return ot_error(OT_EINVAL, "%s: B*T=%lld or (Hq+2*Hkv)*D=%lld exceeds %d", fn, (long long)B * T,
                    ((long long)Hq + 2LL * Hkv) * D, INT_MAX);
  return OT_OK;
}

// x: [B,T,C] (dt), w: [(Hq+2Hkv)D, C] (dt), b: [(Hq+2Hkv)D] f32 or NULL ->
// q: [B,Hq,T,D], k, v: [B,Hkv,T,D] (dt).
ot_status ot_qkv_fwd(ot_dtype dt, void *q, void *k, void *v, const void *x, const void *w,
                     const float *b, int B, int T, int C, int Hq, int Hkv, int D) {
  return ot_qkv_fwd_w(dt, dt, q, k, v, x, w, b, B, T, C, Hq, Hkv, D);
}

// Weights in wdt: dt, or f32 (read in place by the GEMM's conversion path).
static ot_status check_wdt(const char *fn, ot_dtype dt, ot_dtype wdt) {
  if (wdt != dt && wdt != OT_F32)
    return ot_error(OT_EINVAL, "%s: weights dtype %s with %s activations unsupported (use %s or f32)",
                    fn, ot_dtype_name(wdt), ot_dtype_name(dt), ot_dtype_name(dt));
  return OT_OK;
}

ot_status ot_qkv_fwd_w(ot_dtype dt, ot_dtype wdt, void *q, void *k, void *v, const void *x,
                       const void *w, const float *b, int B, int T, int C, int Hq, int Hkv, int D) {
  static const char fn[] = "ot_qkv_fwd";
  OT_TRY(check_qkv(fn, dt, B, T, C, Hq, Hkv, D));
  OT_TRY(check_wdt(fn, dt, wdt));
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(k, fn);
  OT_CHECK_PTR(v, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(w, fn);
  const int M = B * T, Nt = (Hq + 2 * Hkv) * D;
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("qkv_fwd", 2.0 * M * Nt * C, (double)es * ((double)M * C + (double)Nt * C + (double)M * Nt));
  size_t osz = ot_align64((size_t)M * Nt * 4);
  ot_mm m = {dt, wdt, OT_F32, false, true, M, Nt, C, 1.0f, 0.0f, x, C, w, C, NULL, Nt, b, false};
  uint8_t *ws = ot_scratch(osz + ot__mm_ws(&m));
  ot_status s = ws ? OT_OK : OT_ENOMEM;
  if (s == OT_OK && M == 1 && dt == OT_F32 && wdt == OT_F32)   // decode: the GEMV (see ot_linear_fwd)
    s = ot__gemv_f32((float *)ws, x, w, b, Nt, C);
  else if (s == OT_OK) {
    m.C = ws;
    s = ot__mm_run(&m, ws + osz, fn);
  }
  if (s == OT_OK) OT_KPICK(k_qkv_scatter)(q, k, v, ot__sk(dt), (const float *)ws, B, T, Hq, Hkv, D);
  OT_PROF_STOP();
  return s;
}

// qkv: [B*T, (Hq+2Hkv)D] f32 token-major (a projection computed elsewhere, e.g.
// from quantized weights) -> q: [B,Hq,T,D], k, v: [B,Hkv,T,D] (dt).
ot_status ot_qkv_split(ot_dtype dt, void *q, void *k, void *v, const float *qkv, int B, int T,
                       int Hq, int Hkv, int D) {
  static const char fn[] = "ot_qkv_split";
  OT_TRY(check_qkv(fn, dt, B, T, 1, Hq, Hkv, D));
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(k, fn);
  OT_CHECK_PTR(v, fn);
  OT_CHECK_PTR(qkv, fn);
  OT_KPICK(k_qkv_scatter)(q, k, v, ot__sk(dt), qkv, B, T, Hq, Hkv, D);
  return OT_OK;
}

// dq: [B,Hq,T,D], dk, dv: [B,Hkv,T,D] (dt) -> dx: [B,T,C] (dt, overwritten),
// dw: [(Hq+2Hkv)D, C] f32 +=, db: [(Hq+2Hkv)D] f32 += (NULL: skip).
ot_status ot_qkv_bwd(ot_dtype dt, void *dx, float *dw, float *db, const void *dq,
                     const void *dk, const void *dv, const void *x, const void *w,
                     int B, int T, int C, int Hq, int Hkv, int D) {
  return ot_qkv_bwd_w(dt, dt, dx, dw, db, dq, dk, dv, x, w, B, T, C, Hq, Hkv, D);
}

ot_status ot_qkv_bwd_w(ot_dtype dt, ot_dtype wdt, void *dx, float *dw, float *db, const void *dq,
                       const void *dk, const void *dv, const void *x, const void *w,
                       int B, int T, int C, int Hq, int Hkv, int D) {
  static const char fn[] = "ot_qkv_bwd";
  OT_TRY(check_qkv(fn, dt, B, T, C, Hq, Hkv, D));
  OT_TRY(check_wdt(fn, dt, wdt));
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(dw, fn);
  OT_CHECK_PTR(dq, fn);
  OT_CHECK_PTR(dk, fn);
  OT_CHECK_PTR(dv, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_PTR(w, fn);
  const int M = B * T, Nt = (Hq + 2 * Hkv) * D;
  const size_t es = ot_dtype_size(dt);
  OT_PROF_BEGIN("qkv_bwd", 4.0 * M * Nt * C,
                (double)es * (2.0 * M * C + (double)Nt * C + (double)M * Nt) + 8.0 * Nt * C);
  // the gathered gradient: f32 where the GEMMs convert bf16 (no native bf16 GEMM, or f32
  // weights), as large as the forward's f32 projection output, so no conversion in the GEMMs
  const ot_dtype gdt = dt != OT_F32 && (dt != OT_BF16 || wdt == OT_F32 || !ot__gemm_bf16_native()) ? OT_F32 : dt;
  ot_mm mx = {gdt, wdt, dt, false, false, M, C, Nt, 1.0f, 0.0f, NULL, Nt, w, C, dx, C, NULL, false};
  ot_mm mw = {gdt, dt, OT_F32, true, false, Nt, C, M, 1.0f, 1.0f, NULL, Nt, x, C, dw, C, NULL, false};
  size_t gsz = ot_align64((size_t)M * Nt * ot_dtype_size(gdt));
  size_t wx = ot__mm_ws(&mx), ww = ot__mm_ws(&mw);
  uint8_t *ws = ot_scratch(gsz + (wx > ww ? wx : ww));
  ot_status s = ws ? OT_OK : OT_ENOMEM;
  if (s == OT_OK) {
    OT_KPICK(k_qkv_gather)(ws, ot__sk(gdt), dq, dk, dv, ot__sk(dt), B, T, Hq, Hkv, D);
    mx.A = mw.A = ws;
    s = ot__mm_run(&mx, ws + gsz, fn);
  }
  if (s == OT_OK) s = ot__mm_run(&mw, ws + gsz, fn);
  if (s == OT_OK && db) OT_KPICK(k_lin_colsum)(db, ws, ot__sk(gdt), (size_t)Nt, M, Nt);
  OT_PROF_STOP();
  return s;
}
