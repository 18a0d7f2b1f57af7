// Paged decode attention: validation, the work list (row, kv head, chunk),
// scratch, dispatch to kern/paged.c; and the scalar reference. Contract in
// include/ot/attn.h.
#include "internal.h"
#include "ot/attn.h"
#include "kern/paged_k.h"
#include <math.h>
#include <stdlib.h>

static ot_status check(const char *fn, const float *o, int ldo, const float *q, int ldq,
                       const ot_paged_attn *p) {
  OT_CHECK_PTR(o, fn);
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(p, fn);
  OT_CHECK_POS(p->n, fn);
  OT_CHECK_POS(p->Hq, fn);
  OT_CHECK_POS(p->Hkv, fn);
  OT_CHECK_POS(p->D, fn);
  OT_CHECK_POS(p->block_tokens, fn);
  OT_CHECK_POS(p->n_blocks, fn);
  OT_CHECK_POS(p->table_stride, fn);
  if (p->Hq % p->Hkv)
    return ot_error(OT_EINVAL, "%s: Hkv=%d does not divide Hq=%d", fn, p->Hkv, p->Hq);
  if (p->kv_dt != OT_F32 && p->kv_dt != OT_BF16)
    return ot_error(OT_EINVAL, "%s: kv_dt=%s unsupported (use f32 or bf16)", fn,
                    ot_dtype_name(p->kv_dt));
  OT_CHECK_PTR(p->k, fn);
  OT_CHECK_PTR(p->v, fn);
  OT_CHECK_PTR(p->tables, fn);
  OT_CHECK_PTR(p->kv_len, fn);
  const int64_t HD = (int64_t)p->Hq * p->D;
  if (ldq < HD || ldo < HD)
    return ot_error(OT_EINVAL, "%s: ldq=%d and ldo=%d must be >= Hq*D=%lld", fn, ldq, ldo,
                    (long long)HD);
  if (p->block_stride < (size_t)p->block_tokens * p->D)
    return ot_error(OT_EINVAL, "%s: block_stride=%zu is smaller than one block's "
                    "block_tokens*D=%lld elements", fn, p->block_stride,
                    (long long)p->block_tokens * p->D);
  if (p->Hkv > 1 && p->head_stride < p->block_stride)
    return ot_error(OT_EINVAL, "%s: head_stride=%zu is smaller than block_stride=%zu", fn,
                    p->head_stride, p->block_stride);
  for (int r = 0; r < p->n; r++) {
    const int L = p->kv_len[r];
    if (L < 1 || (int64_t)L > (int64_t)p->table_stride * p->block_tokens)
      return ot_error(OT_EINVAL, "%s: kv_len[%d]=%d must be in [1, table_stride*block_tokens=%lld]",
                      fn, r, L, (long long)p->table_stride * p->block_tokens);
    const int nb = (L + p->block_tokens - 1) / p->block_tokens;
    for (int i = 0; i < nb; i++) {
      const int32_t b = p->tables[(size_t)r * p->table_stride + i];
      if (b < 0 || b >= p->n_blocks)
        return ot_error(OT_EINVAL, "%s: row %d's block %d is %d, outside the pool's [0, %d)", fn,
                        r, i, b, p->n_blocks);
    }
  }
  return OT_OK;
}

ot_status ot_attn_paged_decode(float *o, int ldo, const float *q, int ldq, const ot_paged_attn *p) {
  static const char fn[] = "ot_attn_paged_decode";
  OT_TRY(check(fn, o, ldo, q, ldq, p));
  ot__paged_args A;
  memset(&A, 0, sizeof A);
  A.p = (ot__paged_pool){p->Hq, p->D, p->block_tokens, p->k, p->v, p->block_stride,
                        p->head_stride, p->tables, p->table_stride, p->kv_len};
  A.q = q; A.o = o; A.ldq = ldq; A.ldo = ldo;
  A.G = p->Hq / p->Hkv;
  A.bpc = OT_PAGED_CHUNK / p->block_tokens > 0 ? OT_PAGED_CHUNK / p->block_tokens : 1;
  A.bf16 = p->kv_dt == OT_BF16;
  A.scale = p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)p->D));
  const int nt = ot_threads_get() < 1 ? 1 : ot_threads_get();
  A.nt = nt;
  // sizes of the work list, the partials and the merge list
  size_t nitems = 0, nparts = 0, nmerge = 0;
  double keys = 0;
  const int bt = p->block_tokens, chunk_keys = A.bpc * bt;
  for (int r = 0; r < p->n; r++) {
    const int nch = (p->kv_len[r] + chunk_keys - 1) / chunk_keys;
    nitems += (size_t)p->Hkv * nch;
    if (nch > 1) {
      nparts += (size_t)p->Hkv * nch * A.G * ((size_t)p->D + 2);
      nmerge += (size_t)p->Hq;
    }
    keys += p->kv_len[r];
  }
  if (nitems > INT32_MAX / 3 || nmerge > INT32_MAX)
    return ot_error(OT_EINVAL, "%s: %zu work items is too many for one call", fn, nitems);
  A.ws_pt = ot_align64(sizeof(float) * ot__paged_ws_floats(p->D, A.G, bt)) / sizeof(float);
  const size_t f_ws = (size_t)nt * A.ws_pt, f_part = ot_align64(nparts * 4) / 4;
  const size_t b_int = ot_align64(sizeof(int32_t) * (3 * nitems + nmerge + (size_t)p->n));
  const size_t bytes = (f_ws + f_part) * sizeof(float) + sizeof(int64_t) * (size_t)p->n + b_int;
  char *ws = ot_scratch(bytes);
  if (!ws)
    return ot_error(OT_ENOMEM, "%s: no %zu bytes of scratch (%d threads, %zu items)", fn, bytes,
                    nt, nitems);
  A.ws = (float *)ws;
  A.part = A.ws + f_ws;
  int64_t *poff = (int64_t *)(A.part + f_part);
  int32_t *items = (int32_t *)(poff + p->n), *merge = items + 3 * nitems, *nch = merge + nmerge;
  size_t it = 0, mi = 0;
  int64_t off = 0;
  for (int r = 0; r < p->n; r++) {
    nch[r] = (p->kv_len[r] + chunk_keys - 1) / chunk_keys;
    poff[r] = off;
    if (nch[r] > 1) {
      off += (int64_t)p->Hkv * nch[r] * A.G * (p->D + 2);
      for (int h = 0; h < p->Hq; h++) merge[mi++] = r * p->Hq + h;
    }
    for (int kh = 0; kh < p->Hkv; kh++)
      for (int c = 0; c < nch[r]; c++) {
        items[3 * it] = r; items[3 * it + 1] = kh; items[3 * it + 2] = c;
        it++;
      }
  }
  A.items = items; A.nitems = (int)nitems;
  A.merge = merge; A.nmerge = (int)nmerge;
  A.nch = nch; A.poff = poff;
  // below ~32k key elements (e.g. one short sequence) a second thread costs more than it saves;
  // rows of one chunk each run on the team (kern/paged.c), never waiting on a descheduled thread
  A.par = nt > 1 && nitems > 1 && keys * p->Hkv * p->D >= 32768.0;
  const double es = (double)ot_dtype_size(p->kv_dt);
  OT_PROF_BEGIN("ot_attn_paged_decode", 4.0 * p->D * p->Hq * keys,
                es * 2.0 * keys * p->Hkv * p->D + 8.0 * p->n * p->Hq * p->D);
  OT_KPICK(k_attn_paged)(&A);
  OT_PROF_STOP();
  return OT_OK;
}

void ot_ref_attn_paged_decode(float *o, int ldo, const float *q, int ldq, const ot_paged_attn *p) {
  const int D = p->D, G = p->Hq / p->Hkv, bt = p->block_tokens;
  const double scale = p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)D);
  for (int r = 0; r < p->n; r++) {
    const int L = p->kv_len[r];
    const int32_t *tab = p->tables + (size_t)r * p->table_stride;
    double *w = malloc(sizeof(double) * (size_t)L);
    if (!w) return;
    for (int h = 0; h < p->Hq; h++) {
      const float *qr = q + (size_t)r * ldq + (size_t)h * D;
      const size_t hoff = (size_t)(h / G) * p->head_stride;
      double mx = -INFINITY, sum = 0.0;
      for (int j = 0; j < L; j++) {
        const size_t e = (size_t)tab[j / bt] * p->block_stride + hoff + (size_t)(j % bt) * D;
        double s = 0.0;
        for (int d = 0; d < D; d++) {
          const size_t i = e + d;
          const float kv = p->kv_dt == OT_BF16 ? ot_bf16_to_f32(((const uint16_t *)p->k)[i])
                                               : ((const float *)p->k)[i];
          s += (double)qr[d] * kv;
        }
        w[j] = s * scale;
        if (w[j] > mx) mx = w[j];
      }
      for (int j = 0; j < L; j++) { w[j] = exp(w[j] - mx); sum += w[j]; }
      float *orow = o + (size_t)r * ldo + (size_t)h * D;
      for (int d = 0; d < D; d++) {
        double a = 0.0;
        for (int j = 0; j < L; j++) {
          const size_t i = (size_t)tab[j / bt] * p->block_stride + hoff + (size_t)(j % bt) * D + d;
          const float vv = p->kv_dt == OT_BF16 ? ot_bf16_to_f32(((const uint16_t *)p->v)[i])
                                               : ((const float *)p->v)[i];
          a += w[j] * vv;
        }
        orow[d] = (float)(a / sum);
      }
    }
    free(w);
  }
}
