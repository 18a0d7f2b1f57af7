// Flash attention forward (dense and block-sparse) and decode, one source for
// every ISA (see simd.h, flash_mk.h).
//
// Per query tile (<= 64 rows of one head) the queries are transposed once,
// pre-scaled by scale * log2(e), into Qt [D, 64]; each key tile (<= 64 keys)
// then gives the TRANSPOSED scores S^T [keys, queries] = K Qt in base-2 units,
// with K's rows broadcast straight from the input (no per-tile copy for f32).
// In this layout the online softmax runs down the columns, i.e. VL queries at
// a time with plain vertical vector ops (running max m, sum l per query), and
// O = O * alpha + P V reads P^T transposed for free through the
// micro-kernel's broadcasts. The tile's column maxima come out of the S^T
// product itself (MK_SET_MAX), so the softmax is one pass over the tile: p =
// 2^(s - m) with the bare base-2 exponential (no range reduction multiply).
// Key ranges come from ot__attn_key_ivs (dense: all keys; sparse: global keys
// + window) clipped by kv_len and the causal limit, so whole tiles above the
// diagonal or outside the sparse layout are never touched; only tiles that
// cross the diagonal apply an element mask.
#include "flash_mk.h"
#include "dropout_k.h"

typedef struct {
  float *qt, *st, *oacc, *m, *l, *al, *lim, *cm, *kb, *vb;
  float *dm;      // dropout: one mask row (keys of one query)
  uint64_t dc0;   // dropout: counter of (query row 0 of the tile, key 0)
} fwd_ws;

static fwd_ws fwd_ws_of(const ot__attn_args *A, int Dp) {
  float *p = thread_ws(A);
  fwd_ws w;
  w.qt = take(&p, (size_t)A->D * OT_ATTN_BQ);
  w.st = take(&p, (size_t)OT_ATTN_BK * OT_ATTN_BQ);
  w.oacc = take(&p, (size_t)OT_ATTN_BQ * Dp);
  w.m = take(&p, OT_ATTN_BQ);
  w.l = take(&p, OT_ATTN_BQ);
  w.al = take(&p, OT_ATTN_BQ);
  w.lim = take(&p, OT_ATTN_BQ);
  w.cm = take(&p, OT_ATTN_BQ);
  w.kb = take(&p, (size_t)OT_ATTN_BK * Dp);
  w.vb = take(&p, (size_t)OT_ATTN_BK * Dp);
  w.dm = take(&p, OT_ATTN_BK);
  w.dc0 = 0;
  return w;
}

// Starts a query tile: nq rows at element offset qoff (row stride D), scaled
// by scale * log2(e) and transposed into w->qt; m = -inf, l = 0, O = 0.
static void fwd_tile_begin(const ot__attn_args *A, fwd_ws *w, size_t qoff, int nq, int ncols,
                           int Dp) {
  tr_rows(w->qt, OT_ATTN_BQ, ncols, A->q, qoff, nq, A->D, A->bf16, A->scale * OT_LOG2E);
  for (int i = 0; i < ncols; i++) { w->m[i] = -INFINITY; w->l[i] = 0.0f; }
  memset(w->oacc, 0, sizeof(float) * (size_t)nq * Dp);
}

// Attention dropout on the tile's probabilities P^T (st [nk keys, ld], query
// column i): P[i, j] *= Z[i, j] * scale, before they meet V; l keeps the
// undropped sum. Query i of the tile has counters dc0 + i * drop_si + j.
static void fwd_dropout(const ot__attn_args *A, fwd_ws *w, float *st, int ld, int j0, int nk,
                        int nq) {
  for (int i = 0; i < nq; i++) {
    ot__drop_mask(w->dm, nk, A->drop_seed, w->dc0 + (uint64_t)i * A->drop_si + (uint64_t)j0,
                  A->drop_thr, A->drop_scale);
    for (int j = 0; j < nk; j++) st[(size_t)j * ld + i] *= w->dm[j];
  }
}

// Keys [j0, j0 + nk) of kv slice `kvoff` against the current query tile.
// masked: apply key j <= lim[i] per query column; MASK_TRI: and lim[i] =
// lim[0] + i (a causal diagonal tile), so the products skip the invisible
// triangle. Scores, m and the exponentials are in base 2 (Qt carries the
// factor log2(e)).
enum { MASK_NONE, MASK_LIM, MASK_TRI };
static void fwd_block(const ot__attn_args *A, fwd_ws *w, size_t kvoff, int j0, int nk, int nq,
                      int ncols, int Dp, int masked) {
  const int D = A->D, ld = OT_ATTN_BQ;
  const size_t off = kvoff + (size_t)j0 * D;
  const float *K = rows_f32(w->kb, A->k, off, nk, D, Dp, A->bf16);
  const float *V = rows_f32(w->vb, A->v, off, nk, D, Dp, A->bf16);
  float *st = w->st, *cm = w->cm;
  const vf ninf = vset1(-INFINITY);
  const int tri = masked == MASK_TRI ? MK_TRI_SCORES_KQ : MK_TRI_NONE;
  const int d = tri ? (int)w->lim[0] - j0 : 0;  // key j visible to query i iff j <= i + d
  if (!masked) {  // S^T = K Qt and its column maxima
    for (int c = 0; c < ncols; c += VL) vstore(cm + c, ninf);
    const mk_ep e = {.cm = cm};
    mm(nk, ncols, MK_SET_MAX, st, ld, K, Dp, 1, w->qt, ld, D, &e);
  } else {  // S^T = K Qt; keys past a query's limit -> -inf; column maxima
    mm_tri(nk, ncols, MK_SET, st, ld, K, Dp, 1, w->qt, ld, D, NULL, tri, d);
    for (int c = 0; c < ncols; c += VL) {
      const vf lim = vload(w->lim + c);
      vf mx = ninf;
      for (int j = 0; j < nk; j++) {
        float *s = st + (size_t)j * ld + c;
        const vf x = vselect_gt(vset1((float)(j0 + j)), lim, ninf, vload(s));
        vstore(s, x);
        mx = vmax(mx, x);
      }
      vstore(cm + c, mx);
    }
  }
  // online softmax down the columns, 4 vectors of queries at a time, rows in order
  for (int c0 = 0; c0 < ncols; c0 += 4 * VL) {
    const int nv = ncols - c0 >= 4 * VL ? 4 : (ncols - c0) / VL;
    vf ms[4];
    for (int v = 0; v < nv; v++) {
      const int c = c0 + v * VL;
      const vf mo = vload(w->m + c), mn = vmax(mo, vload(cm + c));
      ms[v] = vselect_gt(mn, ninf, mn, vzero());  // all masked so far: use 0
      vstore(w->al + c, exp2_neg(vsub(mo, ms[v])));
      vstore(w->m + c, mn);
    }
    vf s0 = vzero(), s1 = vzero(), s2 = vzero(), s3 = vzero();
#define FWD_EXP(v, acc)                                                              \
  if (nv > v) {                                                                      \
    const vf p = exp2_neg(vsub(vload(s + v * VL), ms[v]));  /* masked: exact 0 */    \
    vstore(s + v * VL, p);                                                           \
    acc = vadd(acc, p);                                                              \
  }
    for (int j = 0; j < nk; j++) {
      float *s = st + (size_t)j * ld + c0;
      FWD_EXP(0, s0) FWD_EXP(1, s1) FWD_EXP(2, s2) FWD_EXP(3, s3)
    }
#undef FWD_EXP
    vf sm[4] = {s0, s1, s2, s3};
    for (int v = 0; v < nv; v++) {
      float *l = w->l + c0 + v * VL;
      vstore(l, vfmadd(vload(l), vload(w->al + c0 + v * VL), sm[v]));
    }
  }
  if (A->drop) fwd_dropout(A, w, st, ld, j0, nk, nq);
  // O = O * alpha + P V  (P[i, j] = st[j * ld + i])
  const mk_ep e = {.rs = w->al};
  mm_tri(nq, Dp, MK_RESCALE, w->oacc, Dp, st, 1, ld, V, Dp, nk, &e,
         tri ? MK_TRI_K_KEYS : MK_TRI_NONE, d);
}

// Dense / sparse forward of query rows [i0, i1) of head (b, h).
static void fwd_qtile(const ot__attn_args *A, fwd_ws *w, int b, int h, int i0, int i1, int Dp) {
  const int D = A->D, nq = i1 - i0, ncols = rup(nq, VL);
  const size_t row0 = ((size_t)b * A->Hq + h) * A->Tq + i0;
  const size_t kvoff = ((size_t)b * A->Hkv + h / A->G) * A->Tk * D;
  fwd_tile_begin(A, w, row0 * D, nq, ncols, Dp);
  for (int i = 0; i < ncols; i++) w->lim[i] = (float)(i0 + i + A->off);
  w->dc0 = A->drop ? ot__attn_dc(A, b, h, i0) : 0;
  long jend = ot__attn_L(A, b);
  if (A->causal) jend = ot__lmin(jend, (long)i1 + A->off);  // last row's limit + 1
  ot__iv iv[2];
  int niv = ot__attn_key_ivs(A, i0, i1, iv);
  for (int t = 0; t < niv; t++) {
    const long e = ot__lmin(iv[t].b, jend);
    for (long j0 = iv[t].a; j0 < e; j0 += OT_ATTN_BK) {
      const int nk = (int)ot__lmin(OT_ATTN_BK, e - j0);
      const int masked = A->causal && j0 + nk - 1 > (long)i0 + A->off;
      fwd_block(A, w, kvoff, (int)j0, nk, nq, ncols, Dp, masked ? MASK_TRI : MASK_NONE);
    }
  }
  for (int i = 0; i < nq; i++) {
    const float l = w->l[i];
    store_row(A->out, (row0 + i) * D, w->oacc + (size_t)i * Dp, D, l > 0.0f ? 1.0f / l : 0.0f,
              A->bf16);
    if (A->lse) A->lse[row0 + i] = l > 0.0f ? w->m[i] * OT_LN2 + logf(l) : -INFINITY;
  }
}

// A->out, A->lse from A->q, k, v over A->qtiles x (b, h). Work items are taken
// dynamically, heaviest (last) query tiles first; each item is computed by one
// thread from start to end, so the schedule never changes a bit.
void OT_K(k_attn_fwd)(const ot__attn_args *A) {
  const int Dp = rup(A->D, VL), BH = A->B * A->Hq;
  const long n = (long)A->nqt * BH;
#pragma omp parallel for schedule(dynamic, 1) num_threads(A->nt) if (n > 1)
  for (long it = 0; it < n; it++) {
    fwd_ws w = fwd_ws_of(A, Dp);
    const int t = A->nqt - 1 - (int)(it % A->nqt), bh = (int)(it / A->nqt);
    fwd_qtile(A, &w, bh / A->Hq, bh % A->Hq, A->qtiles[t].a, A->qtiles[t].b, Dp);
  }
}

// ---- decode ----------------------------------------------------------------
// Item (b, kv head, chunk c): the G*Tq query rows of the group (contiguous in
// q) against keys [c * CHUNK, (c+1) * CHUNK) of the cache, in row tiles of
// <= 64; writes the unnormalized partial (m, l, acc[D]) of every row (m in
// base 2, as fwd_block keeps it).
static void dec_item(const ot__attn_args *A, fwd_ws *w, int b, int kh, int c, int Dp) {
  const int D = A->D, R = A->G * A->Tq, L = ot__attn_L(A, b), PS = D + 2;
  const size_t row0 = ((size_t)b * A->Hq + (size_t)kh * A->G) * A->Tq;
  const size_t kvoff = ((size_t)b * A->Hkv + kh) * A->Tk * D;
  float *part = A->part + (((size_t)b * A->Hkv + kh) * A->nch + c) * R * PS;
  for (int r0 = 0; r0 < R; r0 += OT_ATTN_BQ) {
    const int nq = R - r0 < OT_ATTN_BQ ? R - r0 : OT_ATTN_BQ, ncols = rup(nq, VL);
    long lmax = -1, lmin = L;  // largest / smallest visible key over the tile's rows
    for (int i = 0; i < ncols; i++) {
      int t = (r0 + (i < nq ? i : 0)) % A->Tq;
      long lim = A->causal ? (long)L - A->Tq + t : (long)L - 1;
      w->lim[i] = (float)lim;
      lmax = ot__lmax(lmax, lim);
      lmin = ot__lmin(lmin, lim);
    }
    fwd_tile_begin(A, w, (row0 + r0) * D, nq, ncols, Dp);
    const long e = ot__lmin(ot__lmin((long)(c + 1) * OT_ATTN_CHUNK, L), lmax + 1);
    for (long j0 = (long)c * OT_ATTN_CHUNK; j0 < e; j0 += OT_ATTN_BK) {
      const int nk = (int)ot__lmin(OT_ATTN_BK, e - j0);
      fwd_block(A, w, kvoff, (int)j0, nk, nq, ncols, Dp, j0 + nk - 1 > lmin ? MASK_LIM : MASK_NONE);
    }
    for (int i = 0; i < nq; i++) {
      float *pr = part + (size_t)(r0 + i) * PS;
      pr[0] = w->m[i];
      pr[1] = w->l[i];
      memcpy(pr + 2, w->oacc + (size_t)i * Dp, sizeof(float) * (size_t)D);
    }
  }
}

// Merges the chunk partials of row (b, h, t) in chunk order.
static void dec_merge(const ot__attn_args *A, float *acc, int b, int h, int t) {
  const int D = A->D, R = A->G * A->Tq, PS = D + 2, kh = h / A->G;
  const int r = (h % A->G) * A->Tq + t;
  const float *p0 = A->part + ((size_t)b * A->Hkv + kh) * A->nch * R * PS + (size_t)r * PS;
  const size_t cs = (size_t)R * PS;  // chunk stride
  float M = -INFINITY;
  for (int c = 0; c < A->nch; c++) M = p0[c * cs] > M ? p0[c * cs] : M;
  const size_t row = ((size_t)b * A->Hq + h) * A->Tq + t;
  if (M == -INFINITY) {  // no visible key
    zero_rows(A->out, row * D, (size_t)D, A->bf16);
    if (A->lse) A->lse[row] = -INFINITY;
    return;
  }
  memset(acc, 0, sizeof(float) * (size_t)rup(D, VL));
  float Ls = 0.0f;
  for (int c = 0; c < A->nch; c++) {
    const float *pc = p0 + c * cs;
    if (pc[1] == 0.0f) continue;
    const float f = exp2f(pc[0] - M);  // m in base 2 (see fwd_block)
    Ls += pc[1] * f;
    const vf fv = vset1(f);
    int d = 0;
    for (; d + VL <= D; d += VL) vstore(acc + d, vfmadd(vload(pc + 2 + d), fv, vload(acc + d)));
    for (; d < D; d++) acc[d] += pc[2 + d] * f;
  }
  store_row(A->out, row * D, acc, D, 1.0f / Ls, A->bf16);
  if (A->lse) A->lse[row] = M * OT_LN2 + logf(Ls);
}

// The items on the team (ot__team_for): team item i = items [i per, (i + 1) per),
// their partials written to dst (indexed like A->part), the tiles in scratch.
typedef struct {
  ot__attn_args A;
  long per, n;
} dec_job;

static void dec_team_item(const void *ctx, long i, float *dst, float *scratch) {
  const dec_job *j = ctx;
  ot__attn_args A = j->A;
  A.part = dst;
  A.ws = scratch;   // thread_ws: omp_get_thread_num() is 0 outside a parallel region
  const int Dp = rup(A.D, VL);
  fwd_ws w = fwd_ws_of(&A, Dp);
  for (long it = i * j->per; it < (i + 1) * j->per && it < j->n; it++) {
    const int c = (int)(it % A.nch), bk = (int)(it / A.nch);
    dec_item(&A, &w, bk / A.Hkv, bk % A.Hkv, c, Dp);
  }
}

void OT_K(k_attn_decode)(const ot__attn_args *A) {
  const int Dp = rup(A->D, VL);
  const long n = (long)A->B * A->Hkv * A->nch;
  // items on the team (a thread descheduled by another process costs at most an
  // item), when there are several and the scratch and job fit its limits
  double work = 0.0;   // query-key products times D
  for (int b = 0; b < A->B; b++) work += (double)ot__attn_L(A, b) * A->Hq * A->Tq * A->D;
  const bool par = n > 1 && work >= 32768.0;   // below: one thread is faster than any split
  bool done = false;
  if (par && A->ws_pt <= OT_TEAM_SCRATCH && sizeof(dec_job) <= OT_TEAM_CTX_MAX && ot__team_acquire()) {
    const long T = ot__team_size(), want = n < 4 * T ? n : 4 * T;
    long per = (n + want - 1) / want;
    if (per < (n + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX) per = (n + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX;
    const long uw = (long)A->G * A->Tq * (A->D + 2);
    const dec_job j = {*A, per, n};
    done = ot__team_for(A->part, n * uw, (int)(per * uw), dec_team_item, &j, sizeof j, ot__team_steal_get()) == OT_OK;
    ot__team_release();
  }
  if (!done) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(A->nt) if (par)
    for (long it = 0; it < n; it++) {
      fwd_ws w = fwd_ws_of(A, Dp);
      const int c = (int)(it % A->nch), bk = (int)(it / A->nch);
      dec_item(A, &w, bk / A->Hkv, bk % A->Hkv, c, Dp);
    }
  }
  const long rows = (long)A->B * A->Hq * A->Tq;
#pragma omp parallel for schedule(static) num_threads(A->nt) if (rows * A->nch * A->D > 65536)
  for (long r = 0; r < rows; r++) {
    float *acc = thread_ws(A);
    const int t = (int)(r % A->Tq), bh = (int)(r / A->Tq);
    dec_merge(A, acc, bh / A->Hq, bh % A->Hq, t);
  }
}
