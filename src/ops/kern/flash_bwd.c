// Flash attention backward (dense and block-sparse), one source for every ISA
// (see simd.h, flash_mk.h). FlashAttention-2 recurrences: P is recomputed from
// the saved logsumexp, delta_i = rowsum(dO_i * O_i), dS = P * (dP - delta).
// Work items are key tiles of one (b, kv head) group: Kt (pre-scaled by
// scale * log2(e), so P = 2^(S - lse * log2(e)), see flash_mk.h) and Vt
// are transposed once per item; for each query head of the group (in order)
// and each query tile that sees the keys: S = Q Kt, P, dP = dO Vt, dS,
// dV += P^T dO, dK += dS^T Q (owned by the item) and dQ += dS K - five tile
// products, scores computed once. dQ rows receive contributions from many
// items, so each thread accumulates them into its own partial buffer and the
// partials are summed in thread order afterwards: no atomics, no races, and
// for a given thread count a fixed assignment of items to threads (greedy by
// cost, computed from the shape only) and a fixed order, hence identical bits
// on every run. (dK, dV do not depend on the thread count at all; dQ's
// rounding does, through the partition.) Groups are processed in rounds of
// A->chunk groups so that the partials stay O(T * D) per thread (at most
// about the size of dq over all threads).
#include "flash_mk.h"
#include "dropout_k.h"

// delta[r] = sum_d dout[r, d] * o[r, d] over all B*Hq*Tq rows; called by
// every thread of a parallel region (a work-shared loop, ends in a barrier).
static void bwd_delta(const ot__attn_args *A) {
  const long rows = (long)A->B * A->Hq * A->Tq;
  const int D = A->D, bf = A->bf16;
#pragma omp for schedule(static)
  for (long r = 0; r < rows; r++) {
    const size_t o = (size_t)r * D;
    vf acc = vzero();
    int d = 0;
    for (; d + VL <= D; d += VL) acc = vfmadd(vld(A->dout, o + d, bf), vld(A->o, o + d, bf), acc);
    float s = vsum(acc);
    for (; d < D; d++) s += sld(A->dout, o + d, bf) * sld(A->o, o + d, bf);
    A->delta[r] = s;
  }
}

// ---- dK / dV / dQ partials ---------------------------------------------------
// Query rows of head-group row space that see keys [j0, j0 + nk), per head.
static long item_rows(const ot__attn_args *A, int j0, int nk, ot__iv iv[2], int *niv) {
  *niv = ot__attn_query_ivs(A, j0, j0 + nk, iv);
  const long ifirst = A->causal ? (long)j0 - A->off : 0;  // first row that sees key j0
  long n = 0;
  for (int t = 0; t < *niv; t++) {
    iv[t].a = (int)ot__lmax(iv[t].a, ifirst);
    n += ot__lmax(0, (long)iv[t].b - iv[t].a);
  }
  return n;
}

// Item: keys [j0, j1) of group (b, kh); dq partial rows of the group at dqp
// ([G, Tq, Dp]).
static void dkv_item(const ot__attn_args *A, int b, int kh, int j0, int j1, int Dp, float *dqp) {
  const int D = A->D, ld = OT_ATTN_BK, L = ot__attn_L(A, b);
  const size_t kvoff = ((size_t)b * A->Hkv + kh) * A->Tk * D;
  const int nk = (int)ot__lmax(0, ot__lmin(j1, L) - j0);
  if (nk < j1 - j0)  // keys at or beyond kv_len: no gradient
    for (int j = j0 + nk; j < j1; j++) {
      zero_rows(A->dk, kvoff + (size_t)j * D, (size_t)D, A->bf16);
      zero_rows(A->dv, kvoff + (size_t)j * D, (size_t)D, A->bf16);
    }
  if (nk == 0) return;
  const int ncols = rup(nk, VL);
  float *p = thread_ws(A);
  float *kt = take(&p, (size_t)D * ld), *vt = take(&p, (size_t)D * ld);
  float *s = take(&p, (size_t)OT_ATTN_BQ * ld), *dp = take(&p, (size_t)OT_ATTN_BQ * ld);
  float *dka = take(&p, (size_t)OT_ATTN_BK * Dp), *dva = take(&p, (size_t)OT_ATTN_BK * Dp);
  float *qb = take(&p, (size_t)OT_ATTN_BQ * Dp), *db = take(&p, (size_t)OT_ATTN_BQ * Dp);
  float *kb = take(&p, (size_t)OT_ATTN_BK * Dp), *jv = take(&p, ld), *ls2 = take(&p, OT_ATTN_BQ);
  float *dm = take(&p, ld);  // dropout: mask row (Z * scale) of one query row
  tr_rows(kt, ld, ncols, A->k, kvoff + (size_t)j0 * D, nk, D, A->bf16, A->scale * OT_LOG2E);
  tr_rows(vt, ld, ncols, A->v, kvoff + (size_t)j0 * D, nk, D, A->bf16, 1.0f);
  const float *K = rows_f32(kb, A->k, kvoff + (size_t)j0 * D, nk, D, Dp, A->bf16);
  for (int j = 0; j < ncols; j++) jv[j] = (float)(j0 + j);
  memset(dka, 0, sizeof(float) * (size_t)nk * Dp);
  memset(dva, 0, sizeof(float) * (size_t)nk * Dp);
  ot__iv iv[2];
  int niv;
  item_rows(A, j0, nk, iv, &niv);
  const vf zero = vzero();
  for (int g = 0; g < A->G; g++) {
    const size_t hrow = ((size_t)b * A->Hq + (size_t)kh * A->G + g) * A->Tq;
    for (int t = 0; t < niv; t++) {
      for (long i0 = iv[t].a; i0 < iv[t].b; i0 += OT_ATTN_BQ) {
        const int nq = (int)ot__lmin(OT_ATTN_BQ, iv[t].b - i0);
        const size_t row0 = hrow + (size_t)i0;
        const int masked = A->causal && i0 + A->off < (long)j0 + nk - 1;
        const float *Q = rows_f32(qb, A->q, row0 * D, nq, D, Dp, A->bf16);
        const float *dO = rows_f32(db, A->dout, row0 * D, nq, D, Dp, A->bf16);
        // a diagonal tile skips its invisible triangle: key j visible to row i iff j <= i + d
        const int d = (int)(i0 + A->off - j0);
        const int tsc = masked ? MK_TRI_SCORES_QK : MK_TRI_NONE;
        const int tkq = masked ? MK_TRI_K_QUERIES : MK_TRI_NONE, tkk = masked ? MK_TRI_K_KEYS : MK_TRI_NONE;
        for (int i = 0; i < nq; i++) ls2[i] = A->lse_in[row0 + i] * OT_LOG2E;
        mm_tri(nq, ncols, MK_SET, s, ld, Q, Dp, 1, kt, ld, D, NULL, tsc, d);  // S = scale log2(e) Q K^T
        if (A->drop) {  // Pd = Z P scale: dV += Pd^T dO, dS = P (Z scale dPd - delta)
          mm_tri(nq, ncols, MK_SET, dp, ld, dO, Dp, 1, vt, ld, D, NULL, tsc, d);  // dPd = dO V^T
          for (int c = nk; c < ncols; c++) dm[c] = 0.0f;
          for (int i = 0; i < nq; i++) {
            ot__drop_mask(dm, nk, A->drop_seed,
                          ot__attn_dc(A, b, kh * A->G + g, i0 + i) + (uint64_t)j0,
                          A->drop_thr, A->drop_scale);
            const vf ls = vset1(ls2[i]), de = vset1(A->delta[row0 + i]);
            const vf lim = vset1(masked ? (float)(i0 + i + A->off) : INFINITY);
            float *sr = s + (size_t)i * ld, *dr = dp + (size_t)i * ld;
            for (int c = 0; c < ncols; c += VL) {
              const vf jc = vload(jv + c), z = vload(dm + c);
              const vf pv = vselect_gt(jc, lim, zero, exp2_neg(vsub(vload(sr + c), ls)));
              vstore(sr + c, vmul(pv, z));
              vstore(dr + c, vselect_gt(jc, lim, zero, vmul(pv, vsub(vmul(z, vload(dr + c)), de))));
            }
          }
        } else if (!masked) {  // dP = dO V^T, and in its epilogue P = 2^(S - lse), dS
          const mk_ep e = {.x = s, .ls = ls2, .de = A->delta + row0};
          mm(nq, ncols, MK_SET_DS, dp, ld, dO, Dp, 1, vt, ld, D, &e);
        } else {  // dP = dO V^T; then P and dS, 0 past each row's limit (whatever S, dP hold there)
          mm_tri(nq, ncols, MK_SET, dp, ld, dO, Dp, 1, vt, ld, D, NULL, tsc, d);
          for (int i = 0; i < nq; i++) {
            const vf ls = vset1(ls2[i]), de = vset1(A->delta[row0 + i]);
            const vf lim = vset1((float)(i0 + i + A->off));
            float *sr = s + (size_t)i * ld, *dr = dp + (size_t)i * ld;
            for (int c = 0; c < ncols; c += VL) {
              const vf jc = vload(jv + c), pv = exp2_neg(vsub(vload(sr + c), ls));
              vstore(sr + c, vselect_gt(jc, lim, zero, pv));
              vstore(dr + c, vselect_gt(jc, lim, zero, vmul(pv, vsub(vload(dr + c), de))));
            }
          }
        }
        if (nk < ncols)  // padded keys: no dQ term
          for (int i = 0; i < nq; i++)
            for (int c = nk; c < ncols; c++) dp[(size_t)i * ld + c] = 0.0f;
        mm_tri(nk, Dp, MK_ADD, dva, Dp, s, 1, ld, dO, Dp, nq, NULL, tkq, d);   // dV += P^T dO
        mm_tri(nk, Dp, MK_ADD, dka, Dp, dp, 1, ld, Q, Dp, nq, NULL, tkq, d);   // dK += dS^T Q
        mm_tri(nq, Dp, MK_ADD, dqp + ((size_t)g * A->Tq + i0) * Dp, Dp, dp, ld, 1, K, Dp, nk, NULL,
               tkk, d);                                                       // dQ += dS K
      }
    }
  }
  for (int j = 0; j < nk; j++) {
    const size_t o = kvoff + (size_t)(j0 + j) * D;
    store_row(A->dk, o, dka + (size_t)j * Dp, D, A->scale, A->bf16);
    store_row(A->dv, o, dva + (size_t)j * Dp, D, 1.0f, A->bf16);
  }
}

// Work list of one round: items it = c * nkt + t (group g0 + c, key tile t)
// sorted by decreasing cost (ties by index; stable merge sort), each given to
// the least loaded of nth threads (greedy LPT). Depends on the shape and nth.
static void sort_by_cost(int *ord, int *tmp, const int *cost, int n) {
  for (int w = 1; w < n; w *= 2) {
    for (int lo = 0; lo < n; lo += 2 * w) {
      int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int a = lo, b = mid, k = lo;
      while (a < mid && b < hi) tmp[k++] = cost[ord[b]] > cost[ord[a]] ? ord[b++] : ord[a++];
      while (a < mid) tmp[k++] = ord[a++];
      while (b < hi) tmp[k++] = ord[b++];
    }
    memcpy(ord, tmp, sizeof(int) * (size_t)n);
  }
}

#define MAX_OWNERS 256

static void assign_items(const ot__attn_args *A, int g0, int nc, int nth, int *owner) {
  const int n = nc * A->nkt;
  int *cost = A->items + n, *ord = A->items + 2 * n, *tmp = A->items + 3 * n;
  for (int it = 0; it < n; it++) {
    const int grp = g0 + it / A->nkt, t = it % A->nkt, b = grp / A->Hkv;
    const int j0 = A->ktiles[t].a;
    const int nk = (int)ot__lmax(0, ot__lmin(A->ktiles[t].b, ot__attn_L(A, b)) - j0);
    ot__iv iv[2];
    int niv;
    long rows = nk > 0 ? item_rows(A, j0, nk, iv, &niv) : 0;
    cost[it] = (int)ot__lmin(rows * A->G + 1, 1L << 30);  // +1: tiles that only zero rows
    ord[it] = it;
  }
  sort_by_cost(ord, tmp, cost, n);
  long load[MAX_OWNERS];
  for (int t = 0; t < nth; t++) load[t] = 0;
  for (int k = 0; k < n; k++) {
    int best = 0;
    for (int t = 1; t < nth; t++) if (load[t] < load[best]) best = t;
    owner[ord[k]] = best;
    load[best] += cost[ord[k]];
  }
}

// A->dq, dk, dv from A->dout, o, lse_in, q, k, v. One parallel region for
// the whole backward: on a shared machine each synchronization point can cost
// a scheduler time slice, so there are three per round and A->chunk is
// chosen to make the rounds few.
void OT_K(k_attn_bwd)(const ot__attn_args *A) {
  const int Dp = rup(A->D, VL), NG = A->B * A->Hkv, R = A->G * A->Tq;
  const long work = (long)A->B * A->Hq * A->Tq * A->Tk;
#pragma omp parallel num_threads(A->nt) if (work > 4096)
  {
    const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
    bwd_delta(A);
    for (int g0 = 0; g0 < NG; g0 += A->chunk) {
      const int nc = NG - g0 < A->chunk ? NG - g0 : A->chunk, n = nc * A->nkt;
      int *owner = A->items;
      const size_t rows = (size_t)nc * R;
#pragma omp single
      assign_items(A, g0, nc, nth < MAX_OWNERS ? nth : MAX_OWNERS, owner);
      float *dqp = A->dqpart + (size_t)tid * A->dqp_pt;
      memset(dqp, 0, sizeof(float) * rows * Dp);
      for (int it = 0; it < n; it++) {  // this thread's items, in index order
        if (owner[it] != tid) continue;
        const int c = it / A->nkt, t = it % A->nkt, grp = g0 + c;
        dkv_item(A, grp / A->Hkv, grp % A->Hkv, A->ktiles[t].a, A->ktiles[t].b, Dp,
                 dqp + (size_t)c * R * Dp);
      }
#pragma omp barrier
      // dq rows of the round's groups = scale * sum of the partials in thread order
#pragma omp for schedule(static)
      for (long r = 0; r < (long)rows; r++) {
        const int c = (int)(r / R), gr = (int)(r % R), grp = g0 + c;
        const size_t row = ((size_t)(grp / A->Hkv) * A->Hq + (size_t)(grp % A->Hkv) * A->G) * A->Tq + gr;
        const float *p0 = A->dqpart + (size_t)r * Dp;
        if (nth == 1) {
          store_row(A->dq, row * A->D, p0, A->D, A->scale, A->bf16);
          continue;
        }
        float *acc = thread_ws(A);  // the sum, VL columns at a time in registers
        const vf sc = vset1(A->scale);
        for (int d = 0; d < Dp; d += VL) {
          vf x = vload(p0 + d);
          for (int t = 1; t < nth; t++)
            x = vadd(x, vload(A->dqpart + (size_t)t * A->dqp_pt + (size_t)r * Dp + d));
          vstore(acc + d, vmul(x, sc));
        }
        store_row(A->dq, row * A->D, acc, A->D, 1.0f, A->bf16);
      }
    }
  }
}
