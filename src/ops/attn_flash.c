// Flash attention: public entry points (validation, scratch, profiler span,
// dispatch to kern/flash.c and kern/flash_bwd.c) and the drivers shared with
// the block-sparse entry points. Contracts in include/ot/attn.h.
#include "ops/attn_impl.h"
#include <math.h>

void ot__attn_args_init(ot__attn_args *A, ot_dtype dt, const ot_attn_shape *s) {
  memset(A, 0, sizeof *A);
  A->B = s->B; A->Hq = s->Hq; A->Hkv = s->Hkv; A->G = s->Hq / s->Hkv;
  A->Tq = s->Tq; A->Tk = s->Tk; A->D = s->D;
  A->off = s->Tk - s->Tq;
  A->causal = s->causal;
  A->kv_len = s->kv_len;
  // same rounding as the reference: the f32 value of 1/sqrt(D)
  A->scale = s->scale != 0.0f ? s->scale : (float)(1.0 / sqrt((double)s->D));
  A->bf16 = ot__sk(dt);
  if (s->dropout_p > 0.0f) {
    A->drop = 1;
    A->drop_thr = ot_dropout_threshold(s->dropout_p);
    A->drop_scale = ot_dropout_scale(s->dropout_p);
    A->drop_seed = s->dropout_seed;
    A->drop_off = s->dropout_offset;
    A->drop_rows = s->dropout_rows;
    A->drop_si = s->dropout_si ? s->dropout_si : (uint64_t)s->Tk;
    A->drop_sh = s->dropout_sh ? s->dropout_sh : (uint64_t)s->Tq * (uint64_t)s->Tk;
    A->drop_sb = s->dropout_sb ? s->dropout_sb : (uint64_t)s->Hq * s->Tq * (uint64_t)s->Tk;
  }
}

ot_status ot__attn_no_dropout(const ot_attn_shape *s, const char *fn) {
  if (s->dropout_p != 0.0f)
    return ot_error(OT_EINVAL, "%s: dropout_p=%g is not supported here (only ot_attn_flash_fwd "
                    "/ ot_attn_flash_bwd apply attention dropout): set dropout_p = 0 or use "
                    "the flash kernels", fn, (double)s->dropout_p);
  return OT_OK;
}

static int threads(void) {
  int nt = ot_threads_get();
  return nt < 1 ? 1 : nt;
}

// Scratch: nt per-thread slices, then `extra` floats, then the tile lists.
// Sets A->ws, ws_pt, nt, qtiles/nqt (query tiles of BQ rows) and, when kt,
// ktiles/nkt (key tiles of BK rows); returns the `extra` area or NULL.
static float *attn_scratch(const char *fn, ot__attn_args *A, size_t extra, bool kt) {
  A->nt = threads();
  A->ws_pt = ot_align64(sizeof(float) * ot__attn_ws_floats(A->D)) / sizeof(float);
  A->nqt = ot__attn_tiles(A->Tq, A->off, A->blk, A->glob, OT_ATTN_BQ, NULL);
  A->nkt = kt ? ot__attn_tiles(A->Tk, 0, A->blk, A->glob, OT_ATTN_BK, NULL) : 0;
  size_t fl = (size_t)A->nt * A->ws_pt + ot_align64(extra * sizeof(float)) / sizeof(float);
  size_t bytes = fl * sizeof(float) + sizeof(ot__iv) * ((size_t)A->nqt + (size_t)A->nkt);
  float *ws = ot_scratch(bytes);
  if (!ws) {
    ot_error(OT_ENOMEM, "%s: no %zu bytes of scratch (%d threads, D=%d, T=%d)", fn, bytes, A->nt,
             A->D, A->Tq);
    return NULL;
  }
  A->ws = ws;
  ot__iv *iv = (ot__iv *)(ws + fl);
  ot__attn_tiles(A->Tq, A->off, A->blk, A->glob, OT_ATTN_BQ, iv);
  A->qtiles = iv;
  if (kt) {
    ot__attn_tiles(A->Tk, 0, A->blk, A->glob, OT_ATTN_BK, iv + A->nqt);
    A->ktiles = iv + A->nqt;
  }
  return ws + (size_t)A->nt * A->ws_pt;
}

// Visible (query, key) pairs of one head summed over the batch, for FLOP counts.
static double attn_pairs_args(const ot__attn_args *A) {
  double n = 0;
  for (int b = 0; b < A->B; b++) {
    const long L = ot__attn_L(A, b);
    for (int i = 0; i < A->Tq; i++) {
      long lim = L;
      if (A->causal) lim = ot__lmin(lim, (long)i + A->off + 1);
      ot__iv iv[2];
      int c = ot__attn_key_ivs(A, i, i + 1, iv);
      for (int t = 0; t < c; t++) n += (double)ot__lmax(0, ot__lmin(iv[t].b, lim) - iv[t].a);
    }
  }
  return n;
}

double ot__attn_pairs(const ot__attn_args *A) { return attn_pairs_args(A); }

ot_status ot__attn_fwd_run(const char *fn, ot_dtype dt, ot__attn_args *A, void *o, float *lse,
                           const void *q, const void *k, const void *v, const ot_attn_shape *s) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  OT_CHECK_PTR(o, fn); OT_CHECK_PTR(q, fn); OT_CHECK_PTR(k, fn); OT_CHECK_PTR(v, fn);
  A->q = q; A->k = k; A->v = v; A->out = o; A->lse = lse;
  if (!attn_scratch(fn, A, 0, false)) return OT_ENOMEM;
  const double es = (double)ot_dtype_size(dt), nq = (double)A->B * A->Hq * A->Tq * A->D;
  const double fl = ot_prof_enabled() ? 4.0 * A->D * A->Hq * attn_pairs_args(A) : 0.0;
  OT_PROF_BEGIN(A->blk ? "ot_attn_sparse_fwd" : "ot_attn_flash_fwd", fl,
                es * (2 * nq + 2.0 * A->B * A->Hkv * A->Tk * A->D));
  OT_KPICK(k_attn_fwd)(A);
  OT_PROF_STOP();
  return OT_OK;
}

ot_status ot__attn_bwd_run(const char *fn, ot_dtype dt, ot__attn_args *A, void *dq, void *dk,
                           void *dv, const void *dout, const void *o, const float *lse,
                           const void *q, const void *k, const void *v, const ot_attn_shape *s) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_TRY(ot_attn_shape_check(s, fn));
  OT_CHECK_PTR(dq, fn); OT_CHECK_PTR(dk, fn); OT_CHECK_PTR(dv, fn);
  OT_CHECK_PTR(dout, fn); OT_CHECK_PTR(o, fn);
  if (!lse)
    return ot_error(OT_EINVAL, "%s: argument 'lse' is NULL: the backward needs the forward's "
                    "logsumexp [B, Hq, Tq] (pass a buffer to the forward)", fn);
  OT_CHECK_PTR(q, fn); OT_CHECK_PTR(k, fn); OT_CHECK_PTR(v, fn);
  A->q = q; A->k = k; A->v = v; A->o = o; A->dout = dout; A->lse_in = lse;
  A->dq = dq; A->dk = dk; A->dv = dv;
  // groups per round: as many as keep the per-thread dQ partials within about
  // the size of dq (few rounds: each costs three synchronizations of the
  // threads), and at least enough key tiles to balance the threads
  const int nt = threads(), NG = A->B * A->Hkv;
  const int nkt = ot__attn_tiles(A->Tk, 0, A->blk, A->glob, OT_ATTN_BK, NULL);
  A->chunk = NG / nt > 0 ? NG / nt : 1;
  if (A->chunk < (4 * nt + nkt - 1) / nkt) A->chunk = (4 * nt + nkt - 1) / nkt;
  if (A->chunk > NG) A->chunk = NG;
  const size_t Dp16 = ((size_t)A->D + 15) & ~(size_t)15;
  A->dqp_pt = ot_align64(sizeof(float) * (size_t)A->chunk * A->G * A->Tq * Dp16) / sizeof(float);
  const size_t nd = ot_align64(sizeof(float) * (size_t)A->B * A->Hq * A->Tq) / sizeof(float);
  const size_t ni = 4 * (size_t)A->chunk * nkt;
  float *ex = attn_scratch(fn, A, nd + (size_t)nt * A->dqp_pt + ni, true);
  if (!ex) return OT_ENOMEM;
  A->delta = ex;
  A->dqpart = ex + nd;
  A->items = (int *)(A->dqpart + (size_t)nt * A->dqp_pt);
  const double es = (double)ot_dtype_size(dt), nq = (double)A->B * A->Hq * A->Tq * A->D;
  const double fl = ot_prof_enabled() ? 10.0 * A->D * A->Hq * attn_pairs_args(A) : 0.0;
  OT_PROF_BEGIN(A->blk ? "ot_attn_sparse_bwd" : "ot_attn_flash_bwd", fl,
                es * (4 * nq + 4.0 * A->B * A->Hkv * A->Tk * A->D));
  OT_KPICK(k_attn_bwd)(A);
  OT_PROF_STOP();
  return OT_OK;
}

// q: [B,Hq,Tq,D], k, v: [B,Hkv,Tk,D] (dt) -> o: [B,Hq,Tq,D] (dt), lse: [B,Hq,Tq] f32 or NULL.
ot_status ot_attn_flash_fwd(ot_dtype dt, void *o, float *lse, const void *q, const void *k,
                            const void *v, const ot_attn_shape *s) {
  static const char fn[] = "ot_attn_flash_fwd";
  OT_TRY(ot_attn_shape_check(s, fn));
  ot__attn_args A;
  ot__attn_args_init(&A, dt, s);
  return ot__attn_fwd_run(fn, dt, &A, o, lse, q, k, v, s);
}

// dout, o: [B,Hq,Tq,D], lse: [B,Hq,Tq] -> dq: [B,Hq,Tq,D], dk, dv: [B,Hkv,Tk,D] (overwritten).
ot_status ot_attn_flash_bwd(ot_dtype dt, void *dq, void *dk, void *dv, const void *dout,
                            const void *o, const float *lse, const void *q, const void *k,
                            const void *v, const ot_attn_shape *s) {
  static const char fn[] = "ot_attn_flash_bwd";
  OT_TRY(ot_attn_shape_check(s, fn));
  ot__attn_args A;
  ot__attn_args_init(&A, dt, s);
  return ot__attn_bwd_run(fn, dt, &A, dq, dk, dv, dout, o, lse, q, k, v, s);
}
