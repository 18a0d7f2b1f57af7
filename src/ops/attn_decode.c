// Decode attention: a few query rows against a long KV cache, keys split in
// fixed chunks across threads, partial (max, sum, accumulator) triples merged
// in chunk order (kern/flash.c). Contract in include/ot/attn.h.
#include "ops/attn_impl.h"

// q: [B,Hq,Tq,D], kc, vc: [B,Hkv,S=Tk,D] (dt), kv_len: [B] fill -> o: [B,Hq,Tq,D] (dt), lse f32 or NULL.
ot_status ot_attn_decode(ot_dtype dt, void *o, float *lse, const void *q, const void *kc,
                         const void *vc, const ot_attn_shape *s) {
  static const char fn[] = "ot_attn_decode";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  OT_TRY(ot__attn_no_dropout(s, fn));
  OT_CHECK_PTR(o, fn); OT_CHECK_PTR(q, fn); OT_CHECK_PTR(kc, fn); OT_CHECK_PTR(vc, fn);
  ot__attn_args A;
  ot__attn_args_init(&A, dt, s);
  A.q = q; A.k = kc; A.v = vc; A.out = o; A.lse = lse;
  int nt = ot_threads_get();
  A.nt = nt < 1 ? 1 : nt;
  A.nch = (s->Tk + OT_ATTN_CHUNK - 1) / OT_ATTN_CHUNK;
  // per-thread tiles, then the partials [B, Hkv, nch, G*Tq, D + 2]
  A.ws_pt = ot_align64(sizeof(float) * ot__attn_ws_floats(A.D)) / sizeof(float);
  const size_t np = (size_t)s->B * s->Hkv * A.nch * A.G * s->Tq * ((size_t)s->D + 2);
  const size_t bytes = sizeof(float) * ((size_t)A.nt * A.ws_pt + np);
  float *ws = ot_scratch(bytes);
  if (!ws)
    return ot_error(OT_ENOMEM, "%s: no %zu bytes of scratch (%d threads, %d chunks)", fn, bytes,
                    A.nt, A.nch);
  A.ws = ws;
  A.part = ws + (size_t)A.nt * A.ws_pt;
  double pairs = 0;
  for (int b = 0; b < s->B; b++) {
    const double L = s->kv_len ? s->kv_len[b] : s->Tk;
    pairs += s->causal ? s->Tq * L - 0.5 * s->Tq * (s->Tq - 1) : s->Tq * L;
  }
  const double es = (double)ot_dtype_size(dt), nq = (double)s->B * s->Hq * s->Tq * s->D;
  OT_PROF_BEGIN("ot_attn_decode", 4.0 * s->D * s->Hq * pairs,
                es * (2 * nq + 2.0 * s->B * s->Hkv * (pairs / s->Tq) * s->D));
  OT_KPICK(k_attn_decode)(&A);
  OT_PROF_STOP();
  return OT_OK;
}
