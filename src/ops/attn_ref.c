// Scalar reference attention (tests only): plain loops, one query row at a
// time, accumulation in double. Shapes, masking and dropout as in attn.h (the
// dropout mask straight from ot_dropout_keep, one call per element).
#include "internal.h"
#include "ot/attn.h"
#include "ot/ops.h"
#include <math.h>
#include <stdlib.h>

// Number of keys query row i of batch b sees: keys [0, lim) (both masks keep a prefix).
static int ref_lim(const ot_attn_shape *s, int b, int i) {
  long long lim = s->Tk;
  if (s->kv_len && s->kv_len[b] < lim) lim = s->kv_len[b];
  if (s->causal && (long long)i + s->Tk - s->Tq + 1 < lim) lim = (long long)i + s->Tk - s->Tq + 1;
  return lim < 0 ? 0 : (int)lim;
}

static double ref_scale(const ot_attn_shape *s) {
  return s->scale != 0.0f ? (double)s->scale : (double)(float)(1.0 / sqrt((double)s->D));
}

// Dropout factor of (row, key j): Z * scale (1 without dropout); row = (b*Hq + h)*Tq + i,
// the counter offset + r(b) sb + h sh + i si + j (attn.h).
static double ref_drop(const ot_attn_shape *s, size_t row, int j) {
  if (s->dropout_p == 0.0f) return 1.0;
  const uint64_t i = row % (size_t)s->Tq, h = (row / (size_t)s->Tq) % (size_t)s->Hq;
  const size_t b = row / ((size_t)s->Tq * (size_t)s->Hq);
  const uint64_t si = s->dropout_si ? s->dropout_si : (uint64_t)s->Tk;
  const uint64_t sh = s->dropout_sh ? s->dropout_sh : (uint64_t)s->Tq * (uint64_t)s->Tk;
  const uint64_t sb = s->dropout_sb ? s->dropout_sb : (uint64_t)s->Hq * s->Tq * (uint64_t)s->Tk;
  const uint64_t r = s->dropout_rows ? (uint64_t)s->dropout_rows[b] : (uint64_t)b;
  const uint64_t c = s->dropout_offset + r * sb + h * sh + i * si + (uint64_t)j;
  return ot_dropout_keep(s->dropout_seed, c, s->dropout_p) ? (double)ot_dropout_scale(s->dropout_p)
                                                           : 0.0;
}

static void fill_nan(float *x, size_t n) { if (x) for (size_t i = 0; i < n; i++) x[i] = NAN; }

// Probabilities of row (b, h, i) into p[0, lim) (double); returns lim, *lse.
static int ref_row_probs(double *p, double *lse, const float *qi, const float *kb,
                         const ot_attn_shape *s, int b, int i, double scale) {
  int lim = ref_lim(s, b, i), D = s->D;
  if (lim == 0) { *lse = -INFINITY; return 0; }
  double mx = -INFINITY, sum = 0;
  for (int j = 0; j < lim; j++) {
    double d = 0;
    for (int c = 0; c < D; c++) d += (double)qi[c] * kb[(size_t)j * D + c];
    p[j] = scale * d;
    if (p[j] > mx) mx = p[j];
  }
  for (int j = 0; j < lim; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
  for (int j = 0; j < lim; j++) p[j] /= sum;
  *lse = mx + log(sum);
  return lim;
}

// q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] -> o: [B,Hq,Tq,D], lse: [B,Hq,Tq] or NULL.
void ot_ref_attn_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                     const ot_attn_shape *s) {
  const int B = s->B, Hq = s->Hq, Hkv = s->Hkv, Tq = s->Tq, Tk = s->Tk, D = s->D, G = Hq / Hkv;
  const double scale = ref_scale(s);
  double *p = malloc(sizeof(double) * (size_t)Tk);
  if (!p) {
    fill_nan(o, (size_t)B * Hq * Tq * D);
    fill_nan(lse, (size_t)B * Hq * Tq);
    return;
  }
  for (int b = 0; b < B; b++)
    for (int h = 0; h < Hq; h++) {
      const float *kb = k + ((size_t)b * Hkv + h / G) * Tk * D;
      const float *vb = v + ((size_t)b * Hkv + h / G) * Tk * D;
      for (int i = 0; i < Tq; i++) {
        size_t row = ((size_t)b * Hq + h) * Tq + i;
        double l;
        int lim = ref_row_probs(p, &l, q + row * D, kb, s, b, i, scale);
        for (int j = 0; j < lim; j++) p[j] *= ref_drop(s, row, j);  // o = (Z o P / (1-p)) V
        for (int c = 0; c < D; c++) {
          double acc = 0;
          for (int j = 0; j < lim; j++) acc += p[j] * vb[(size_t)j * D + c];
          o[row * D + c] = (float)acc;
        }
        if (lse) lse[row] = (float)l;
      }
    }
  free(p);
}

// dout: [B,Hq,Tq,D] -> dq: [B,Hq,Tq,D], dk, dv: [B,Hkv,Tk,D] (overwritten; dk/dv
// summed over the Hq/Hkv query heads of each kv head).
void ot_ref_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                     const float *k, const float *v, const ot_attn_shape *s) {
  const int B = s->B, Hq = s->Hq, Hkv = s->Hkv, Tq = s->Tq, Tk = s->Tk, D = s->D, G = Hq / Hkv;
  const double scale = ref_scale(s);
  const size_t kvn = (size_t)Tk * D;
  double *p = malloc(sizeof(double) * (2 * (size_t)Tk + 2 * kvn));
  if (!p) {
    fill_nan(dq, (size_t)B * Hq * Tq * D);
    fill_nan(dk, (size_t)B * Hkv * kvn);
    fill_nan(dv, (size_t)B * Hkv * kvn);
    return;
  }
  double *ds = p + Tk, *dka = ds + Tk, *dva = dka + kvn;
  for (int b = 0; b < B; b++)
    for (int kh = 0; kh < Hkv; kh++) {
      const float *kb = k + ((size_t)b * Hkv + kh) * kvn, *vb = v + ((size_t)b * Hkv + kh) * kvn;
      for (size_t x = 0; x < kvn; x++) dka[x] = dva[x] = 0;
      for (int h = kh * G; h < (kh + 1) * G; h++)
        for (int i = 0; i < Tq; i++) {
          size_t row = ((size_t)b * Hq + h) * Tq + i;
          const float *qi = q + row * D, *doi = dout + row * D;
          double l;
          int lim = ref_row_probs(p, &l, qi, kb, s, b, i, scale);
          // dropout: o = sum_j z_j P_j v_j, so dP_j = z_j (dO . v_j), dV_j += z_j P_j dO
          double dsum = 0;  // sum_j P_j dP_j
          for (int j = 0; j < lim; j++) {
            double dpj = 0;
            for (int c = 0; c < D; c++) dpj += (double)doi[c] * vb[(size_t)j * D + c];
            ds[j] = dpj * ref_drop(s, row, j);
            dsum += p[j] * ds[j];
          }
          for (int j = 0; j < lim; j++) ds[j] = p[j] * (ds[j] - dsum);
          for (int c = 0; c < D; c++) {
            double acc = 0;
            for (int j = 0; j < lim; j++) acc += ds[j] * kb[(size_t)j * D + c];
            dq[row * D + c] = (float)(scale * acc);
          }
          for (int j = 0; j < lim; j++)
            for (int c = 0; c < D; c++) {
              dka[(size_t)j * D + c] += scale * ds[j] * qi[c];
              dva[(size_t)j * D + c] += p[j] * ref_drop(s, row, j) * doi[c];
            }
        }
      float *dkb = dk + ((size_t)b * Hkv + kh) * kvn, *dvb = dv + ((size_t)b * Hkv + kh) * kvn;
      for (size_t x = 0; x < kvn; x++) { dkb[x] = (float)dka[x]; dvb[x] = (float)dva[x]; }
    }
  free(p);
}
