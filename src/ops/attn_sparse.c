// Block-sparse attention ("block_size=64, local_window=3, global_tokens=10"):
// public entry points over the flash kernels with a sparse layout, the
// equivalent dense element mask, and the pair count used for FLOP figures.
// Contracts in include/ot/attn.h.
#include "ops/attn_impl.h"

static ot_status layout_check(const char *fn, const ot_attn_shape *s,
                              const ot_attn_sparse_layout *l) {
  if (!l) return ot_error(OT_EINVAL, "%s: layout is NULL (pass an ot_attn_sparse_layout)", fn);
  if (l->block_size < 1)
    return ot_error(OT_EINVAL, "%s: block_size=%d must be >= 1 (e.g. 64)", fn, l->block_size);
  if (l->local_window < 1)
    return ot_error(OT_EINVAL, "%s: local_window=%d must be >= 1 block (e.g. 3)", fn,
                    l->local_window);
  if (l->global_tokens < 0)
    return ot_error(OT_EINVAL, "%s: global_tokens=%d must be >= 0", fn, l->global_tokens);
  if (s->Tq > s->Tk)
    return ot_error(OT_EINVAL, "%s: Tq=%d > Tk=%d: block-sparse queries sit at positions "
                    "i + Tk - Tq, which must be >= 0", fn, s->Tq, s->Tk);
  return OT_OK;
}

static ot_status sparse_args(const char *fn, ot__attn_args *A, ot_dtype dt,
                             const ot_attn_shape *s, const ot_attn_sparse_layout *l) {
  OT_TRY(ot_attn_shape_check(s, fn));
  OT_TRY(layout_check(fn, s, l));
  ot__attn_args_init(A, dt, s);
  A->blk = l->block_size;
  A->win = l->local_window;
  A->glob = l->global_tokens;
  return OT_OK;
}

// q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] (dt) -> o (dt), lse f32 or NULL; active blocks only.
ot_status ot_attn_sparse_fwd(ot_dtype dt, void *o, float *lse, const void *q, const void *k,
                             const void *v, const ot_attn_shape *s,
                             const ot_attn_sparse_layout *l) {
  static const char fn[] = "ot_attn_sparse_fwd";
  ot__attn_args A;
  OT_TRY(sparse_args(fn, &A, dt, s, l));
  OT_TRY(ot__attn_no_dropout(s, fn));
  return ot__attn_fwd_run(fn, dt, &A, o, lse, q, k, v, s);
}

// dout, o, lse from the sparse forward -> dq, dk, dv (overwritten); active blocks only.
ot_status ot_attn_sparse_bwd(ot_dtype dt, void *dq, void *dk, void *dv, const void *dout,
                             const void *o, const float *lse, const void *q, const void *k,
                             const void *v, const ot_attn_shape *s,
                             const ot_attn_sparse_layout *l) {
  static const char fn[] = "ot_attn_sparse_bwd";
  ot__attn_args A;
  OT_TRY(sparse_args(fn, &A, dt, s, l));
  OT_TRY(ot__attn_no_dropout(s, fn));
  return ot__attn_bwd_run(fn, dt, &A, dq, dk, dv, dout, o, lse, q, k, v, s);
}

// mask: [Tq, Tk] = 1 where the layout and s->causal allow (i, j). Written
// element by element from the definition (not from the kernels' intervals).
ot_status ot_attn_sparse_mask(uint8_t *mask, const ot_attn_shape *s,
                              const ot_attn_sparse_layout *l) {
  static const char fn[] = "ot_attn_sparse_mask";
  OT_CHECK_PTR(mask, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  OT_TRY(layout_check(fn, s, l));
  const long b = l->block_size, w = l->local_window, g = l->global_tokens;
  const long lo = s->causal ? w - 1 : w / 2, hi = s->causal ? 0 : (w - 1) / 2;
  for (long i = 0; i < s->Tq; i++) {
    const long p = i + s->Tk - s->Tq, qb = p / b;
    for (long j = 0; j < s->Tk; j++) {
      const long kb = j / b;
      int ok = p < g || j < g || (kb >= qb - lo && kb <= qb + hi);
      if (s->causal && j > p) ok = 0;
      mask[i * s->Tk + j] = (uint8_t)ok;
    }
  }
  return OT_OK;
}

double ot_attn_pairs(const ot_attn_shape *s, const ot_attn_sparse_layout *l) {
  static const char fn[] = "ot_attn_pairs";
  ot__attn_args A;
  if (l) {
    if (sparse_args(fn, &A, OT_F32, s, l) != OT_OK) return -1.0;
  } else {
    if (ot_attn_shape_check(s, fn) != OT_OK) return -1.0;
    ot__attn_args_init(&A, OT_F32, s);
  }
  return ot__attn_pairs(&A);
}
