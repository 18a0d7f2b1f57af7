// Weight-only quantization: quantize / dequantize a weight matrix (f32, bf16,
// symmetric int8 per channel or per group) and the linear layer over it: GEMV
// kernels (kern/qgemv.c) for decode-sized M; for prefill-sized M the int8 GEMM
// (kern/qgemm.c) over int8 weights, f32 / bf16 tiles through the oneDNN GEMM
// (gemm.c); the scalar references (int8 GEMM: quant_ref.c).
#include "gemm_impl.h"
#include "ot/quant.h"
#include "kern/qgemm_k.h"
#include "kern/qpack_k.h"
#include "quant_impl.h"
#include <math.h>
#include <stdlib.h>

_Static_assert((int)OT_QW_F32 == OT__QK_F32 && (int)OT_QW_BF16 == OT__QK_BF16 && (int)OT_QW_INT8 == OT__QK_INT8,
               "kern/qgemv_k.h's storage kinds are ot_qw_kind's");
_Static_assert(OT_QLINEAR_GEMV_MAX == OT__QK_GEMV_MAX, "kern/qgemv_k.h's GEMV row limit");
_Static_assert(OT_QLINEAR_I8_MIN <= OT_QLINEAR_GEMV_MAX + 1, "ot_qlinear_fwd: int8 past the GEMV takes the int8 GEMM");

// The kernels' view of a (checked) weight.
static ot__qk_weight kview(const ot_qweight *w) {
  return (ot__qk_weight){(int)w->kind, w->rows, w->cols, w->group, w->data, w->scales, w->pack};
}

#define QL_TILE_BYTES ((size_t)8 << 20)   // f32 bytes of one dequantized tile of the GEMM path

ot_status ot__gemv_f32(float *y, const float *x, const float *w, const float *b, int N, int K) {
  const ot__qk_weight kw = {OT__QK_F32, N, K, 0, w, NULL};
  return OT_KPICK(k_qgemv)(y, x, &kw, b, 1);
}

const char *ot_qw_kind_name(ot_qw_kind k) {
  return k == OT_QW_F32 ? "f32" : k == OT_QW_BF16 ? "bf16" : k == OT_QW_INT8 ? "int8" : "?";
}

static size_t kind_size(ot_qw_kind k) { return k == OT_QW_F32 ? 4 : k == OT_QW_BF16 ? 2 : 1; }

// kind, shape and group alone (no pointers).
static ot_status check_layout(ot_qw_kind kind, int group, int rows, int cols, const char *fn) {
  if (kind != OT_QW_F32 && kind != OT_QW_BF16 && kind != OT_QW_INT8)
    return ot_error(OT_EINVAL, "%s: kind=%d unknown (use OT_QW_F32, OT_QW_BF16 or OT_QW_INT8)", fn, (int)kind);
  OT_CHECK_POS(rows, fn);
  OT_CHECK_POS(cols, fn);
  if (kind != OT_QW_INT8) {
    if (group != 0)
      return ot_error(OT_EINVAL, "%s: group=%d is only meaningful for int8 (use 0 for %s)", fn, group,
                      ot_qw_kind_name(kind));
    return OT_OK;
  }
  if (group != 0 && group != 32 && group != 64 && group != 128)
    return ot_error(OT_EINVAL, "%s: group=%d unsupported (use 0 = per-channel, 32, 64 or 128)", fn, group);
  if (group && cols % group)
    return ot_error(OT_EINVAL, "%s: group=%d does not divide cols=%d (use a group that divides the "
                    "input features, or 0 = per-channel)", fn, group, cols);
  return OT_OK;
}

ot_status ot_qweight_check(const ot_qweight *w, const char *fn) {
  OT_CHECK_PTR(w, fn);
  OT_TRY(check_layout(w->kind, w->group, w->rows, w->cols, fn));
  if (!w->data) return ot_error(OT_EINVAL, "%s: weight data is NULL", fn);
  if (w->kind == OT_QW_INT8 && !w->scales) return ot_error(OT_EINVAL, "%s: int8 weight without scales", fn);
  if (w->pack < 0 || w->pack > 256 || (w->pack && w->kind != OT_QW_F32))
    return ot_error(OT_EINVAL, "%s: pack=%d invalid for a %s weight (0 = row-major; only f32 is packed, "
                    "by ot_qweight_pack)", fn, w->pack, ot_qw_kind_name(w->kind));
  return OT_OK;
}

static size_t n_scales(const ot_qweight *w) {
  if (w->kind != OT_QW_INT8) return 0;
  return (size_t)w->rows * (size_t)(w->group ? w->cols / w->group : 1);
}

size_t ot_qweight_bytes(const ot_qweight *w) {
  if (!w) return 0;
  if (w->pack) return ot__qpk_floats(w->rows, w->cols, w->pack) * sizeof(float);
  return (size_t)w->rows * (size_t)w->cols * kind_size(w->kind) + n_scales(w) * sizeof(float);
}

void ot_qweight_free(ot_qweight *w) {
  if (!w) return;
  ot__team_quiesce();   // a preempted helper of a decode step may still read it
  if (w->owned) {
    ot_mem_free(w->data);
    ot_mem_free(w->scales);
  }
  memset(w, 0, sizeof *w);
}

// One int8 group: scale = clip * absmax / 127 (f32; clip 1: absmax / 127 exactly),
// q = round_even(v / scale) clamped to [-127, 127] into q, or (q NULL) the
// fake-quantized values q * scale (one f32 product, as the dequantization) into deq.
static float quantize_group(const float *v, int n, int8_t *q, float *deq, float clip) {
  float amax = 0.0f;
  for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(v[i]));
  const float s = clip * amax / 127.0f;
  for (int i = 0; i < n; i++) {
    double t = s > 0.0f ? nearbyint((double)v[i] / (double)s) : 0.0;
    const int8_t qi = (int8_t)(t > 127.0 ? 127.0 : t < -127.0 ? -127.0 : t);
    if (q) q[i] = qi;
    else deq[i] = (float)qi * s;
  }
  return s;
}

// Finite weights and clip ratios in (0, 1] (NULL: none).
static ot_status check_values(const float *w, int rows, int cols, const float *clip, const char *fn) {
  const size_t n = (size_t)rows * (size_t)cols;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(w[i]))
      return ot_error(OT_EINVAL, "%s: weight [%zu, %zu] = %g is not finite", fn, i / (size_t)cols,
                      i % (size_t)cols, (double)w[i]);
  for (int r = 0; clip && r < rows; r++)
    if (!(clip[r] > 0.0f && clip[r] <= 1.0f))
      return ot_error(OT_EINVAL, "%s: clip[%d] = %g is outside (0, 1] (a ratio of the row's absmax)", fn, r,
                      (double)clip[r]);
  return OT_OK;
}

ot_status ot_qweight_quantize(ot_qweight *out, ot_qw_kind kind, int group, const float *w, int rows, int cols) {
  return ot_qweight_quantize_clip(out, kind, group, w, rows, cols, NULL);
}

ot_status ot_qweight_quantize_clip(ot_qweight *out, ot_qw_kind kind, int group, const float *w, int rows,
                                   int cols, const float *clip) {
  static const char fn[] = "ot_qweight_quantize";
  OT_CHECK_PTR(out, fn);
  memset(out, 0, sizeof *out);
  OT_CHECK_PTR(w, fn);
  OT_TRY(check_layout(kind, group, rows, cols, fn));
  if (clip && kind != OT_QW_INT8)
    return ot_error(OT_EINVAL, "%s: clip ratios apply to int8 only (pass NULL for %s)", fn, ot_qw_kind_name(kind));
  OT_TRY(check_values(w, rows, cols, clip, fn));
  const size_t n = (size_t)rows * (size_t)cols;
  ot_qweight q = {kind, rows, cols, group, NULL, NULL, true, 0};
  q.data = ot_mem_alloc(n * kind_size(kind), OT_MEM_PARAMS);
  if (q.data && kind == OT_QW_INT8) q.scales = ot_mem_alloc(n_scales(&q) * sizeof(float), OT_MEM_PARAMS);
  if (!q.data || (kind == OT_QW_INT8 && !q.scales)) {
    ot_qweight_free(&q);
    return OT_ENOMEM;
  }
  if (kind == OT_QW_F32) {
    memcpy(q.data, w, n * sizeof(float));
  } else if (kind == OT_QW_BF16) {
    ot_cvt_f32_to_bf16(w, q.data, n);
  } else {
    const int G = group ? group : cols, ng = cols / G;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
      for (int g = 0; g < ng; g++) {
        const size_t o = (size_t)r * cols + (size_t)g * G;
        q.scales[(size_t)r * ng + g] = quantize_group(w + o, G, (int8_t *)q.data + o, NULL, clip ? clip[r] : 1.0f);
      }
  }
  *out = q;
  return OT_OK;
}

ot_status ot_qweight_fake_quant(float *out, const float *w, int rows, int cols, int group, const float *clip) {
  static const char fn[] = "ot_qweight_fake_quant";
  OT_CHECK_PTR(out, fn);
  OT_CHECK_PTR(w, fn);
  OT_TRY(check_layout(OT_QW_INT8, group, rows, cols, fn));
  OT_TRY(check_values(w, rows, cols, clip, fn));
  const int G = group ? group : cols, ng = cols / G;
  OT_PROF_BEGIN("qweight_fake_quant", 0.0, 8.0 * rows * cols);
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= 65536)
  for (int r = 0; r < rows; r++)
    for (int g = 0; g < ng; g++) {
      const size_t o = (size_t)r * cols + (size_t)g * G;
      quantize_group(w + o, G, NULL, out + o, clip ? clip[r] : 1.0f);
    }
  OT_PROF_STOP();
  return OT_OK;
}

ot_status ot_qweight_row(const ot_qweight *w, int row, float *out) {
  static const char fn[] = "ot_qweight_row";
  OT_TRY(ot_qweight_check(w, fn));
  OT_CHECK_PTR(out, fn);
  if (row < 0 || row >= w->rows)
    return ot_error(OT_EINVAL, "%s: row=%d out of range [0, %d)", fn, row, w->rows);
  const ot__qk_weight kw = kview(w);
  OT_KPICK(k_qdequant_rows)(out, &kw, row, row + 1);
  return OT_OK;
}

ot_status ot_qweight_pack(ot_qweight *w) {
  static const char fn[] = "ot_qweight_pack";
  OT_TRY(ot_qweight_check(w, fn));
  if (w->kind != OT_QW_F32)
    return ot_error(OT_EINVAL, "%s: the weight is %s (only f32 weights are packed; bf16 and int8 are read "
                    "row-major by their kernels)", fn, ot_qw_kind_name(w->kind));
  const int P = OT_KPICK(k_qpk_width)();
  if (w->pack == P) return OT_OK;
  const int N = w->rows, K = w->cols;
  float *rm = NULL;   // row-major source: the data, or (packed for another ISA) an unpacked copy
  if (w->pack) {
    if (!(rm = ot_mem_alloc((size_t)N * K * sizeof(float), OT_MEM_WORKSPACE))) return OT_ENOMEM;
    OT_TRY(ot_qweight_dequantize(w, rm));
  }
  float *d = ot_mem_alloc(ot__qpk_floats(N, K, P) * sizeof(float), OT_MEM_PARAMS);
  if (!d) {
    ot_mem_free(rm);
    return OT_ENOMEM;
  }
  OT_KPICK(k_qpk_pack)(d, rm ? rm : (const float *)w->data, N, K);
  ot_mem_free(rm);
  if (w->owned) ot_mem_free(w->data);
  w->data = d;
  w->owned = true;
  w->pack = P;
  return OT_OK;
}

ot_status ot_qweight_dequantize(const ot_qweight *w, float *out) {
  static const char fn[] = "ot_qweight_dequantize";
  OT_TRY(ot_qweight_check(w, fn));
  OT_CHECK_PTR(out, fn);
  const ot__qk_weight kw = kview(w);
  OT_KPICK(k_qdequant_rows)(out, &kw, 0, w->rows);
  return OT_OK;
}

// ----------------------------------------------------------- linear layer ---
static ot_status check_fwd(float *y, const float *x, const ot_qweight *W, int M, const char *fn) {
  OT_TRY(ot_qweight_check(W, fn));
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_POS(M, fn);
  const char *ye = (const char *)(y + (size_t)M * W->rows), *xe = (const char *)(x + (size_t)M * W->cols);
  if ((const char *)y < xe && (const char *)x < ye)
    return ot_error(OT_EINVAL, "%s: y [%d, %d] overlaps x [%d, %d] (use separate buffers)", fn, M, W->rows,
                    M, W->cols);
  return OT_OK;
}

// Prefill: rows of W dequantized tile by tile (at most QL_TILE_BYTES of f32:
// the whole weight for GPT-2's layers, within the last-level cache) into a
// per-thread scratch, each tile then a GEMM into y[:, n0:n0+nr].
static ot_status qlinear_gemm(float *y, const float *x, const ot_qweight *W, const float *bias, int M,
                              const char *fn) {
  const int N = W->rows, K = W->cols;
  if (W->kind == OT_QW_F32 && !W->pack) {
    ot_mm m = {OT_F32, OT_F32, OT_F32, false, true, M, N, K, 1.0f, 0.0f, x, K, W->data, K, y, N, bias, false};
    return ot__mm_run(&m, NULL, fn);
  }
  size_t rows = QL_TILE_BYTES / ((size_t)K * sizeof(float));
  int nt = rows < 16 ? 16 : (int)(rows & ~(size_t)15);
  if (nt > N) nt = N;
  float *tile = ot_scratch((size_t)nt * K * sizeof(float));
  if (!tile) return OT_ENOMEM;
  const ot__qk_weight kw = kview(W);
  for (int n0 = 0; n0 < N; n0 += nt) {
    const int nr = N - n0 < nt ? N - n0 : nt;
    OT_KPICK(k_qdequant_rows)(tile, &kw, n0, n0 + nr);
    ot_mm m = {OT_F32, OT_F32, OT_F32, false, true, M, nr, K, 1.0f, 0.0f, x, K, tile, K, y + n0, N,
               bias ? bias + n0 : NULL, false};
    OT_TRY(ot__mm_run(&m, NULL, fn));
  }
  return OT_OK;
}

// The int8 GEMM: x quantized per row into this thread's scratch (xq [M, Kp],
// Kp = cols rounded up to 32, then sx [M]), then k_qgemm_i8. x with a NaN or an
// infinity: the f32 path (qlinear_gemm) instead, so that they propagate.
static ot_status qlinear_i8(float *y, const float *x, const ot_qweight *W, const float *bias, int M,
                            const char *fn) {
  const int K = W->cols, Kp = (K + 31) & ~31;
  const size_t xb = (size_t)M * Kp;
  int8_t *xq = ot_scratch(xb + (size_t)M * sizeof(float) + 16);
  if (!xq) return OT_ENOMEM;
  float *sx = (float *)(xq + ((xb + 15) & ~(size_t)15));
  const ot__qk_weight kw = kview(W);
  const bool avx2 = ot_isa_active() == OT_ISA_AVX512 && !ot_cpu()->avx512_vnni;   // AVX-512 variants need VNNI
  if (!(avx2 ? k_qx_i8_avx2 : OT_KPICK(k_qx_i8))(xq, sx, x, M, K, Kp)) return qlinear_gemm(y, x, W, bias, M, fn);
  if (M >= OT__QI8_PANEL_MIN && (avx2 ? k_qgemm_i8p_avx2 : OT_KPICK(k_qgemm_i8p))(y, xq, sx, M, Kp, &kw, bias))
    return OT_OK;
  (avx2 ? k_qgemm_i8_avx2 : OT_KPICK(k_qgemm_i8))(y, xq, sx, M, Kp, &kw, bias);
  return OT_OK;
}

ot_status ot_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M) {
  static const char fn[] = "ot_qlinear_fwd";
  OT_TRY(check_fwd(y, x, W, M, fn));
  const double wbytes = (double)ot_qweight_bytes(W);
  OT_PROF_BEGIN("qlinear_fwd", 2.0 * M * W->rows * W->cols,
                wbytes + 4.0 * M * ((double)W->cols + W->rows) + (bias ? 4.0 * W->rows : 0.0));
  ot_status s = OT_OK;
  // see ot/quant.h: int8 (groups other than 32) from OT_QLINEAR_I8_MIN rows on, the GEMV up to
  // OT_QLINEAR_GEMV_MAX rows, the dequantized-tile GEMM beyond
  if (W->pack) {   // packed f32: its kernel (any M) when this ISA packed it, else row tiles
    const ot__qk_weight kw = kview(W);
    s = W->pack == OT_KPICK(k_qpk_width)() ? OT_KPICK(k_qpk_linear)(y, x, &kw, bias, M)
                                           : qlinear_gemm(y, x, W, bias, M, fn);
  } else if (W->kind == OT_QW_INT8 && W->group != 32 && M >= OT_QLINEAR_I8_MIN) {
    s = qlinear_i8(y, x, W, bias, M, fn);
  } else if (M <= OT_QLINEAR_GEMV_MAX) {
    const ot__qk_weight kw = kview(W);
    s = OT_KPICK(k_qgemv)(y, x, &kw, bias, M);
  } else {
    s = qlinear_gemm(y, x, W, bias, M, fn);
  }
  OT_PROF_STOP();
  return s;
}

ot_status ot_qlinear_i8_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M) {
  static const char fn[] = "ot_qlinear_i8_fwd";
  OT_TRY(check_fwd(y, x, W, M, fn));
  if (W->kind != OT_QW_INT8)
    return ot_error(OT_EINVAL, "%s: weight is %s (the int8 GEMM takes int8 weights; use ot_qlinear_fwd)", fn,
                    ot_qw_kind_name(W->kind));
  OT_PROF_BEGIN("qlinear_i8_fwd", 2.0 * M * W->rows * W->cols,
                (double)ot_qweight_bytes(W) + 4.0 * M * ((double)W->cols + W->rows) + (bias ? 4.0 * W->rows : 0.0));
  ot_status s = qlinear_i8(y, x, W, bias, M, fn);
  OT_PROF_STOP();
  return s;
}

ot_status ot_ref_qlinear_fwd(float *y, const float *x, const ot_qweight *W, const float *bias, int M) {
  static const char fn[] = "ot_ref_qlinear_fwd";
  OT_TRY(check_fwd(y, x, W, M, fn));
  const int N = W->rows, K = W->cols, G = W->kind == OT_QW_INT8 && W->group ? W->group : K;
  float *w = malloc((size_t)K * sizeof(float));   // one dequantized row
  if (!w) return ot_error(OT_ENOMEM, "%s: out of memory for a row of %d floats", fn, K);
  for (int n = 0; n < N; n++) {
    if (W->pack) ot__qpk_row(w, W->data, W->pack, K, n);
    for (int k = 0; k < K && !W->pack; k++) {
      const size_t i = (size_t)n * K + k;
      if (W->kind == OT_QW_F32) w[k] = ((const float *)W->data)[i];
      else if (W->kind == OT_QW_BF16) w[k] = ot_bf16_to_f32(((const uint16_t *)W->data)[i]);
      else w[k] = (float)((const int8_t *)W->data)[i] * W->scales[(size_t)n * (K / G) + k / G];
    }
    for (int m = 0; m < M; m++) {
      double acc = bias ? (double)bias[n] : 0.0;
      for (int k = 0; k < K; k++) acc += (double)x[(size_t)m * K + k] * (double)w[k];
      y[(size_t)m * N + n] = (float)acc;
    }
  }
  free(w);
  return OT_OK;
}
