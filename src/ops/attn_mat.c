// Attention shape validation and materialized attention (GEMM + masked row
// softmax), the baseline the flash kernels beat. Per (batch, kv head) the
// Hq/Hkv query heads sharing that kv head are one GEMM operand: their rows
// are contiguous in q/o/att ([G*Tq, D] and [G*Tq, Tk]), so GQA needs no
// gather and dK/dV come out summed over the group by the GEMM itself.
// Keys at or beyond kv_len[b] are never read (padding may hold garbage).
#include "internal.h"
#include "ot/attn.h"
#include "ot/ops.h"
#include <math.h>
#include "kern/attn_mat_k.h"

// Validates a shape descriptor for any attention kernel; `fn` names the caller.
ot_status ot_attn_shape_check(const ot_attn_shape *s, const char *fn) {
  if (!fn) fn = "attention";
  if (!s) return ot_error(OT_EINVAL, "%s: shape descriptor is NULL", fn);
  const int dims[6] = {s->B, s->Hq, s->Hkv, s->Tq, s->Tk, s->D};
  static const char *names[6] = {"B", "Hq", "Hkv", "Tq", "Tk", "D"};
  for (int i = 0; i < 6; i++)
    if (dims[i] <= 0) return ot_error(OT_EINVAL, "%s: %s=%d must be > 0", fn, names[i], dims[i]);
  if (s->Hq % s->Hkv != 0)
    return ot_error(OT_EINVAL, "%s: Hq=%d is not a multiple of Hkv=%d (each kv head serves "
                    "Hq/Hkv query heads)", fn, s->Hq, s->Hkv);
  // every buffer index (and the largest, att: [B,Hq,Tq,Tk]) must fit comfortably
  double big = (double)s->B * s->Hq * s->Tq * (s->Tk > s->D ? s->Tk : s->D);
  double kvb = (double)s->B * s->Hkv * s->Tk * s->D;
  if (big > 0x1p53 || kvb > 0x1p53 || (double)(s->Hq / s->Hkv) * s->Tq > 0x7fffffff)
    return ot_error(OT_EINVAL, "%s: shape B=%d Hq=%d Tq=%d Tk=%d D=%d is too large", fn, s->B,
                    s->Hq, s->Tq, s->Tk, s->D);
  if (!isfinite(s->scale) || s->scale < 0)
    return ot_error(OT_EINVAL, "%s: scale=%g must be finite and >= 0 (0 means 1/sqrt(D))", fn,
                    s->scale);
  if (!(s->dropout_p >= 0.0f && s->dropout_p < 1.0f))
    return ot_error(OT_EINVAL, "%s: dropout_p=%g must be in [0, 1) (0: no attention dropout, "
                    "e.g. at inference)", fn, (double)s->dropout_p);
  if (s->dropout_p > 0.0f) {   // explicit dropout counter strides must not overlap
    const double si = s->dropout_si ? (double)s->dropout_si : s->Tk;
    const double sh = s->dropout_sh ? (double)s->dropout_sh : si * s->Tq;
    const double sb = s->dropout_sb ? (double)s->dropout_sb : sh * s->Hq;
    if (si < s->Tk || sh < si * s->Tq || sb < sh * s->Hq)
      return ot_error(OT_EINVAL, "%s: dropout counter strides sb=%.0f sh=%.0f si=%.0f overlap "
                      "(need si >= Tk=%d, sh >= Tq * si, sb >= Hq * sh; 0 takes the dense "
                      "stride)", fn, sb, sh, si, s->Tk);
    if (s->dropout_rows)
      for (int b = 0; b < s->B; b++)
        if (s->dropout_rows[b] < 0)
          return ot_error(OT_EINVAL, "%s: dropout_rows[%d]=%lld must be >= 0", fn, b,
                          (long long)s->dropout_rows[b]);
  }
  if (s->kv_len)
    for (int b = 0; b < s->B; b++)
      if (s->kv_len[b] < 0 || s->kv_len[b] > s->Tk)
        return ot_error(OT_EINVAL, "%s: kv_len[%d]=%d is outside [0, Tk=%d]", fn, b,
                        s->kv_len[b], s->Tk);
  return OT_OK;
}

static float mat_scale(const ot_attn_shape *s) {
  return s->scale != 0.0f ? s->scale : (float)(1.0 / sqrt((double)s->D));
}

// Zeroes n elements of dtype size esz at p + off elements.
// n values of the 16-bit array p (bf16 or f16) from element off, to / from f32.
static void to_f32(ot_dtype dt, const void *p, size_t off, float *d, size_t n) {
  if (dt == OT_BF16) ot_cvt_bf16_to_f32((const uint16_t *)p + off, d, n);
  else ot_cvt_f16_to_f32((const uint16_t *)p + off, d, n);
}
static void from_f32(ot_dtype dt, void *p, size_t off, const float *s, size_t n) {
  if (dt == OT_BF16) ot_cvt_f32_to_bf16(s, (uint16_t *)p + off, n);
  else ot_cvt_f32_to_f16(s, (uint16_t *)p + off, n);
}

static void zero_dt(void *p, size_t off, size_t n, size_t esz) {
  memset((char *)p + off * esz, 0, n * esz);
}

// Common offsets of one (b, kv head) group.
typedef struct { size_t q, kv, att; int kvl; } grp;
static grp group_at(const ot_attn_shape *s, int b, int kh) {
  const int G = s->Hq / s->Hkv;
  grp g;
  g.q = ((size_t)b * s->Hq + (size_t)kh * G) * s->Tq * s->D;
  g.kv = ((size_t)b * s->Hkv + kh) * s->Tk * s->D;
  g.att = ((size_t)b * s->Hq + (size_t)kh * G) * s->Tq * s->Tk;
  g.kvl = s->kv_len && s->kv_len[b] < s->Tk ? s->kv_len[b] : s->Tk;
  return g;
}

// q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] (dt) -> o: [B,Hq,Tq,D] (dt), att:
// [B,Hq,Tq,Tk] f32 probabilities (masked entries 0). bf16 slices are widened
// to f32 in this thread's scratch; every GEMM is f32.
ot_status ot_attn_mat_fwd(ot_dtype dt, void *o, float *att, const void *q, const void *k,
                          const void *v, const ot_attn_shape *s) {
  static const char fn[] = "ot_attn_mat_fwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  if (s->dropout_p != 0.0f)
    return ot_error(OT_EINVAL, "%s: dropout_p=%g is not supported by materialized attention: "
                    "use ot_attn_flash_fwd / ot_attn_flash_bwd for attention dropout", fn,
                    (double)s->dropout_p);
  OT_CHECK_PTR(o, fn); OT_CHECK_PTR(att, fn);
  OT_CHECK_PTR(q, fn); OT_CHECK_PTR(k, fn); OT_CHECK_PTR(v, fn);
  const int G = s->Hq / s->Hkv, M = G * s->Tq, Tk = s->Tk, D = s->D;
  const bool bf = dt != OT_F32;   // 16-bit storage: widened in scratch
  const size_t esz = ot_dtype_size(dt), md = (size_t)M * D, kd = (size_t)Tk * D;
  const float scale = mat_scale(s);
  float *ws = NULL;
  if (bf && !(ws = ot_scratch(sizeof(float) * (2 * md + 2 * kd)))) return OT_ENOMEM;
  double nq = (double)s->B * s->Hq * s->Tq, nk = (double)s->B * s->Hkv * Tk;
  OT_PROF_BEGIN("attn_mat_fwd", 4.0 * nq * Tk * D, esz * (2 * nq + 2 * nk) * D + 8.0 * nq * Tk);
  ot_status st = OT_OK;
  for (int b = 0; b < s->B && st == OT_OK; b++)
    for (int kh = 0; kh < s->Hkv && st == OT_OK; kh++) {
      grp g = group_at(s, b, kh);
      float *S = att + g.att;
      if (g.kvl == 0) {  // no visible key in the whole group: P = 0, o = 0
        memset(S, 0, sizeof(float) * (size_t)M * Tk);
        zero_dt(o, g.q, md, esz);
        continue;
      }
      const float *Q, *K, *V;
      float *O;
      if (bf) {
        float *Qw = ws, *Kw = ws + 2 * md, *Vw = Kw + kd;
        to_f32(dt, q, g.q, Qw, md);
        to_f32(dt, k, g.kv, Kw, (size_t)g.kvl * D);
        to_f32(dt, v, g.kv, Vw, (size_t)g.kvl * D);
        Q = Qw; K = Kw; V = Vw; O = ws + md;
      } else {
        Q = (const float *)q + g.q; K = (const float *)k + g.kv; V = (const float *)v + g.kv;
        O = (float *)o + g.q;
      }
      // S[:, :kvl] = scale * Q K^T; softmax rows (zero beyond each row's limit); O = P V
      st = ot_gemm(OT_F32, OT_F32, false, true, M, g.kvl, D, scale, Q, D, K, D, 0.0f, S, Tk);
      if (st != OT_OK) break;
      OT_KPICK(k_attn_mat_softmax)(S, M, Tk, s->Tq, Tk, g.kvl, s->causal);
      st = ot_gemm(OT_F32, OT_F32, false, false, M, D, g.kvl, 1.0f, S, Tk, V, D, 0.0f, O, D);
      if (st == OT_OK && bf) from_f32(dt, o, g.q, O, md);
    }
  OT_PROF_STOP();
  return st;
}

// dout: [B,Hq,Tq,D] (dt), att: the forward's probabilities -> dq: [B,Hq,Tq,D],
// dk, dv: [B,Hkv,Tk,D] (dt, overwritten); datt: [B,Hq,Tq,Tk] f32 scratch.
//   dP = dO V^T, dS = P (dP - rowsum(dP P)), dQ = scale dS K,
//   dK = scale dS^T Q, dV = P^T dO (the last two summed over the query group).
ot_status ot_attn_mat_bwd(ot_dtype dt, void *dq, void *dk, void *dv, float *datt,
                          const void *dout, const float *att, const void *q, const void *k,
                          const void *v, const ot_attn_shape *s) {
  static const char fn[] = "ot_attn_mat_bwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  if (s->dropout_p != 0.0f)
    return ot_error(OT_EINVAL, "%s: dropout_p=%g is not supported by materialized attention: "
                    "use ot_attn_flash_fwd / ot_attn_flash_bwd for attention dropout", fn,
                    (double)s->dropout_p);
  OT_CHECK_PTR(dq, fn); OT_CHECK_PTR(dk, fn); OT_CHECK_PTR(dv, fn); OT_CHECK_PTR(datt, fn);
  OT_CHECK_PTR(dout, fn); OT_CHECK_PTR(att, fn);
  OT_CHECK_PTR(q, fn); OT_CHECK_PTR(k, fn); OT_CHECK_PTR(v, fn);
  const int G = s->Hq / s->Hkv, M = G * s->Tq, Tk = s->Tk, D = s->D;
  const bool bf = dt != OT_F32;   // 16-bit storage: widened in scratch
  const size_t esz = ot_dtype_size(dt), md = (size_t)M * D, kd = (size_t)Tk * D;
  const float scale = mat_scale(s);
  float *ws = NULL;
  if (bf && !(ws = ot_scratch(sizeof(float) * (3 * md + 4 * kd)))) return OT_ENOMEM;
  double nq = (double)s->B * s->Hq * s->Tq, nk = (double)s->B * s->Hkv * Tk;
  OT_PROF_BEGIN("attn_mat_bwd", 8.0 * nq * Tk * D, esz * (4 * nq + 4 * nk) * D + 12.0 * nq * Tk);
  ot_status st = OT_OK;
  for (int b = 0; b < s->B && st == OT_OK; b++)
    for (int kh = 0; kh < s->Hkv && st == OT_OK; kh++) {
      grp g = group_at(s, b, kh);
      if (g.kvl == 0) {
        zero_dt(dq, g.q, md, esz);
        zero_dt(dk, g.kv, kd, esz);
        zero_dt(dv, g.kv, kd, esz);
        continue;
      }
      const size_t nv = (size_t)g.kvl * D;
      const float *Q, *K, *V, *dO;
      float *dQ, *dK, *dV;
      if (bf) {
        float *Qw = ws, *dOw = ws + md, *Kw = ws + 3 * md, *Vw = Kw + kd;
        to_f32(dt, q, g.q, Qw, md);
        to_f32(dt, dout, g.q, dOw, md);
        to_f32(dt, k, g.kv, Kw, nv);
        to_f32(dt, v, g.kv, Vw, nv);
        Q = Qw; dO = dOw; K = Kw; V = Vw;
        dQ = ws + 2 * md; dK = Vw + kd; dV = dK + kd;
      } else {
        Q = (const float *)q + g.q; dO = (const float *)dout + g.q;
        K = (const float *)k + g.kv; V = (const float *)v + g.kv;
        dQ = (float *)dq + g.q; dK = (float *)dk + g.kv; dV = (float *)dv + g.kv;
      }
      float *dS = datt + g.att;
      const float *P = att + g.att;
      st = ot_gemm(OT_F32, OT_F32, false, true, M, g.kvl, D, 1.0f, dO, D, V, D, 0.0f, dS, Tk);
      if (st != OT_OK) break;
      OT_KPICK(k_attn_mat_dsoftmax)(dS, P, M, Tk, g.kvl);
      st = ot_gemm(OT_F32, OT_F32, false, false, M, D, g.kvl, scale, dS, Tk, K, D, 0.0f, dQ, D);
      if (st == OT_OK)
        st = ot_gemm(OT_F32, OT_F32, true, false, g.kvl, D, M, scale, dS, Tk, Q, D, 0.0f, dK, D);
      if (st == OT_OK)
        st = ot_gemm(OT_F32, OT_F32, true, false, g.kvl, D, M, 1.0f, P, Tk, dO, D, 0.0f, dV, D);
      if (st != OT_OK) break;
      if (g.kvl < Tk) {  // keys beyond kv_len get no gradient
        memset(dK + nv, 0, sizeof(float) * (kd - nv));
        memset(dV + nv, 0, sizeof(float) * (kd - nv));
      }
      if (bf) {
        from_f32(dt, dq, g.q, dQ, md);
        from_f32(dt, dk, g.kv, dK, kd);
        from_f32(dt, dv, g.kv, dV, kd);
      }
    }
  OT_PROF_STOP();
  return st;
}
