// Vocabulary-parallel embedding and cross-entropy (Megatron): each tensor-
// parallel rank holds rows [v0, v0 + Vl) of the embedding / head. The
// embedding looks up its own rows (zeros elsewhere) and the tensor group sums;
// the cross-entropy all-reduces the row max, then the row sum of exp and the
// target logit, so the [N, V] logits are never gathered.
#include "model_impl.h"
#include <math.h>

static inline float ld(ot_dtype dt, const void *p, size_t i) { return ot__ldf(dt, p, i); }
static inline void st(ot_dtype dt, void *p, size_t i, float x) { ot__stf(dt, p, i, x); }

static ot_status check_tokens(const ot_model *m, const int32_t *tok, long N, const char *fn) {
  for (long i = 0; i < N; i++)
    if (tok[i] < 0 || tok[i] >= m->V)
      return ot_error(OT_EINVAL, "%s: token %d at position %ld is outside the vocabulary [0, %d)",
                      fn, tok[i], i, m->V);
  return OT_OK;
}

// out [B*T, C] = (this rank's row of tokens[i], or 0) + wpe[t] on tp rank 0; then summed
// over the tensor group. wte: [Vl, C] (dt), wpe: [max_seq, C] (dt) or NULL.
ot_status ot__vp_embed_fwd(ot_model *m, void *out, const int32_t *tokens, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const long N = (long)B * T;
  const int C = m->C;
  OT_TRY(check_tokens(m, tokens, N, "vocab-parallel embedding"));
  const void *wte = ot__pdt(m, m->wte);
  const void *wpe = m->part.tp_rank == 0 ? ot__pdt(m, m->wpe) : NULL;
  const ot_dtype wdt = ot__wdt(m);   // the tables' dtype (f32 masters, or the bf16 copy)
#pragma omp parallel for schedule(static)
  for (long i = 0; i < N; i++) {
    const long r = (long)tokens[i] - m->v0;
    const bool mine = r >= 0 && r < m->Vl;
    const size_t t = (size_t)(i % T);
    for (int c = 0; c < C; c++) {
      float x = mine ? ld(wdt, wte, (size_t)r * C + c) : 0.0f;
      if (wpe) x += ld(wdt, wpe, t * C + c);
      st(dt, out, (size_t)i * C + c, x);
    }
  }
  return m->part.comm.allreduce(m->part.comm.ctx, out, (size_t)N * C, dt, OT_RED_SUM);
}

// dwte [rows, C] += dout rows of the tokens whose local row (token - v0) lies
// in [r0, r0 + rows) (NULL: skip), dwpe [T, C] += sum over b (NULL: skip;
// every tp rank: wpe is replicated). Deterministic: columns split over
// threads, rows accumulated in token order.
void ot__embed_bwd_rows(ot_model *m, float *dwte, int r0, int rows, float *dwpe, const void *dout,
                        const int32_t *tokens, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const long N = (long)B * T;
  const int C = m->C;
  const int nb = (C + 63) / 64;
  const long lo = (long)m->v0 + r0;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < nb; cb++) {
    const int c0 = cb * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
    for (long i = 0; i < N; i++) {
      const long r = (long)tokens[i] - lo;
      if (dwte && r >= 0 && r < rows)
        for (int c = c0; c < c1; c++) dwte[(size_t)r * C + c] += ld(dt, dout, (size_t)i * C + c);
      if (dwpe)
        for (int c = c0; c < c1; c++) dwpe[(size_t)(i % T) * C + c] += ld(dt, dout, (size_t)i * C + c);
    }
  }
}

void ot__vp_embed_bwd(ot_model *m, const void *dout, const int32_t *tokens, int B, int T) {
  ot__embed_bwd_rows(m, ot__pg(m, m->wte), 0, m->Vl, ot__pg(m, m->wpe), dout, tokens, B, T);
}

ot__vp_shard ot__vp_shard_of(const ot_model *m) {
  ot__vp_shard v = {m->run.dt, m->V, m->Vl, m->v0, m->run.ignore_index, &m->part.comm};
  return v;
}

// One rank's logits [N, Vl] (dt; columns of vocabulary rows [v0, v0 + Vl), real below
// V) -> row_loss [N] (the label-smoothed loss (1 - eps) nll + eps mean_j(-log p_j),
// computed as nll + eps (x_t - mean_j x_j) like ot_xent_ls_fused; eps = 0: the NLL),
// *nll_sum (NULL: skip) = the sum of the rows' plain NLL (row order), and with
// want_grad dlogits = (softmax - (1 - eps) onehot - eps / V) / count in place (0 on
// padding columns and ignored rows). Three all-reduces over the tensor group: the
// row max, then the row sums of exp, the target logit and (eps > 0) of the logits.
// red [4N] f32 workspace. Targets equal to ignore give loss 0 and zero gradient.
ot_status ot__vp_xent(const ot__vp_shard *v, void *logits, const int32_t *targets, int N,
                      float count, float eps, float *row_loss, double *nll_sum, bool want_grad,
                      float *red) {
  const ot_dtype dt = v->dt;
  const int Vl = v->Vl, ign = v->ignore, V = v->V;
  const bool ls = eps > 0.0f;
  int nv = V - v->v0;
  if (nv > Vl) nv = Vl;
  if (nv < 0) nv = 0;
  float *mx = red, *sm = red + N, *tg = red + 2 * N, *xs = red + 3 * N;
  if (!(eps >= 0.0f && eps < 1.0f))
    return ot_error(OT_EINVAL, "vocab-parallel cross-entropy: label smoothing %g is outside "
                    "[0, 1)", eps);
  for (int i = 0; i < N; i++)
    if (targets[i] != ign && (targets[i] < 0 || targets[i] >= V))
      return ot_error(OT_EINVAL, "vocab-parallel cross-entropy: target %d at row %d is outside "
                      "[0, %d) and not ignore_index=%d", targets[i], i, V, ign);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const size_t o = (size_t)i * Vl;
    float x = -INFINITY;
    for (int j = 0; j < nv; j++) x = fmaxf(x, ld(dt, logits, o + j));
    mx[i] = x;
  }
  OT_TRY(v->comm->allreduce(v->comm->ctx, mx, (size_t)N, OT_F32, OT_RED_MAX));
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const size_t o = (size_t)i * Vl;
    float s = 0.0f;
    for (int j = 0; j < nv; j++) s += expf(ld(dt, logits, o + j) - mx[i]);
    sm[i] = s;
    const long r = (long)targets[i] - v->v0;
    tg[i] = targets[i] != ign && r >= 0 && r < nv ? ld(dt, logits, o + (size_t)r) : 0.0f;
    if (ls) {
      double x = 0.0;
      for (int j = 0; j < nv; j++) x += (double)ld(dt, logits, o + j);
      xs[i] = (float)x;
    }
  }
  OT_TRY(v->comm->allreduce(v->comm->ctx, sm, (size_t)(ls ? 3 : 2) * N, OT_F32, OT_RED_SUM));
  const float inv = 1.0f / count;
  const float sub = (float)((double)eps / V / (double)count);   // eps / V / count per column
  const double de = eps;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const size_t o = (size_t)i * Vl;
    const bool skip = targets[i] == ign;
    const float nll = skip ? 0.0f : logf(sm[i]) + mx[i] - tg[i];
    row_loss[i] = skip || !ls ? nll : (float)((double)nll + de * ((double)tg[i] - (double)xs[i] / V));
    if (want_grad) {
      const long r = (long)targets[i] - v->v0;
      const float rs = 1.0f / sm[i], on = ls ? (float)(1.0 - de) : 1.0f;
      for (int j = 0; j < Vl; j++) {
        float g = 0.0f;
        if (!skip && j < nv) {
          const float p = expf(ld(dt, logits, o + j) - mx[i]) * rs;
          g = ls ? (p - (j == r ? on : 0.0f)) * inv - sub : (p - (j == r)) * inv;
        }
        st(dt, logits, o + j, g);
      }
    }
    mx[i] = nll;   // (row i's max is no longer needed)
  }
  if (nll_sum) {
    double s = 0.0;
    for (int i = 0; i < N; i++) s += mx[i];
    *nll_sum = s;
  }
  return OT_OK;
}
