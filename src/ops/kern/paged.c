// Paged decode attention, one source for every ISA (see simd.h): one query row
// per sequence against keys/values held in fixed-size blocks named by a block
// table. Work items (row, kv head, chunk of blocks) go to the threads round-robin
// (each prefetches the first block of its next item while on the current); an
// item streams each K/V block once for all G query heads of its kv head,
// keeping per head the online-softmax state (max m, sum l, accumulator acc).
// A row with one chunk writes its output directly; otherwise the chunk
// partials are merged in chunk order (fixed, thread-count independent).
#include "core/simd.h"
#include "paged_k.h"
#include <math.h>
#include <omp.h>

static inline int rup(int x, int m) { return (x + m - 1) / m * m; }

// Dot products s[j] = qs . K[j] for j < nk (rows of D elements, stride D),
// four keys at a time so that four FMA chains run in parallel.
static void scores(float *s, const float *qs, const void *K, int nk, int D, int bf16) {
  const int Dv = D - D % VL;
  int j = 0;
  for (; j + 4 <= nk; j += 4) {
    const size_t r0 = (size_t)j * D;
    vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
    int d = 0;
    for (; d < Dv; d += VL) {
      const vf x = vload(qs + d);
      a0 = vfmadd(x, vld(K, r0 + d, bf16), a0);
      a1 = vfmadd(x, vld(K, r0 + D + d, bf16), a1);
      a2 = vfmadd(x, vld(K, r0 + 2 * (size_t)D + d, bf16), a2);
      a3 = vfmadd(x, vld(K, r0 + 3 * (size_t)D + d, bf16), a3);
    }
    if (d < D) {
      const int n = D - d;
      const vf x = vload(qs + d);
      a0 = vfmadd(x, vld_part(K, r0 + d, n, bf16), a0);
      a1 = vfmadd(x, vld_part(K, r0 + D + d, n, bf16), a1);
      a2 = vfmadd(x, vld_part(K, r0 + 2 * (size_t)D + d, n, bf16), a2);
      a3 = vfmadd(x, vld_part(K, r0 + 3 * (size_t)D + d, n, bf16), a3);
    }
    s[j] = vsum(a0); s[j + 1] = vsum(a1); s[j + 2] = vsum(a2); s[j + 3] = vsum(a3);
  }
  for (; j < nk; j++) {
    const size_t r0 = (size_t)j * D;
    vf a = vzero();
    int d = 0;
    for (; d < Dv; d += VL) a = vfmadd(vload(qs + d), vld(K, r0 + d, bf16), a);
    if (d < D) a = vfmadd(vload(qs + d), vld_part(K, r0 + d, D - d, bf16), a);
    s[j] = vsum(a);
  }
}

// acc[0, Dp) = acc * alpha + sum_j p[j] V[j] (j < nk), four vectors of
// columns at a time (four accumulator chains). acc is padded to Dp = rup(D, VL).
static void accumulate(float *acc, float alpha, const float *p, const void *V, int nk, int D,
                       int bf16) {
  const int Dv = D - D % VL;
  const vf al = vset1(alpha);
  int d = 0;
  for (; d + 4 * VL <= Dv; d += 4 * VL) {
    vf c0 = vmul(vload(acc + d), al), c1 = vmul(vload(acc + d + VL), al);
    vf c2 = vmul(vload(acc + d + 2 * VL), al), c3 = vmul(vload(acc + d + 3 * VL), al);
    for (int j = 0; j < nk; j++) {
      const vf pj = vset1(p[j]);
      const size_t r = (size_t)j * D + d;
      c0 = vfmadd(pj, vld(V, r, bf16), c0);
      c1 = vfmadd(pj, vld(V, r + VL, bf16), c1);
      c2 = vfmadd(pj, vld(V, r + 2 * VL, bf16), c2);
      c3 = vfmadd(pj, vld(V, r + 3 * VL, bf16), c3);
    }
    vstore(acc + d, c0); vstore(acc + d + VL, c1);
    vstore(acc + d + 2 * VL, c2); vstore(acc + d + 3 * VL, c3);
  }
  for (; d < D; d += VL) {
    const int n = D - d < VL ? D - d : VL;
    vf c = vmul(vload(acc + d), al);
    for (int j = 0; j < nk; j++) {
      const size_t r = (size_t)j * D + d;
      c = vfmadd(vset1(p[j]), n == VL ? vld(V, r, bf16) : vld_part(V, r, n, bf16), c);
    }
    vstore(acc + d, c);
  }
}

// Prefetch of one block's K and V (bbytes each) at element offset off of the cache.
static void prefetch_kv(const ot__paged_pool *P, size_t off, size_t es, size_t bbytes) {
  for (size_t x = 0; x < bbytes; x += 64) {
    __builtin_prefetch((const char *)P->k + off * es + x);
    __builtin_prefetch((const char *)P->v + off * es + x);
  }
}

// Prefetch of the first K and V block of item e (this thread's next item: the
// items go round-robin, so its cold start overlaps the current one).
static void prefetch_first(const ot__paged_args *A, const int32_t *e) {
  const ot__paged_pool *P = &A->p;
  const size_t es = A->bf16 ? 2 : 4, b0 = (size_t)e[2] * A->bpc;
  prefetch_kv(P, (size_t)P->tables[(size_t)e[0] * P->table_stride + b0] * P->block_stride +
                     (size_t)e[1] * P->head_stride, es, (size_t)P->block_tokens * P->D * es);
}

// One item: row r, kv head kh, chunk c (its blocks [c * bpc, ...)).
static void item(const ot__paged_args *A, float *ws, int r, int kh, int c, int nch_r) {
  const ot__paged_pool *P = &A->p;
  const int D = P->D, G = A->G, bt = P->block_tokens, Dp = rup(D, VL), Sp = rup(bt, VL);
  const int L = P->kv_len[r], nb = (L + bt - 1) / bt;
  const int b0 = c * A->bpc, b1 = b0 + A->bpc < nb ? b0 + A->bpc : nb;
  const int32_t *tab = P->tables + (size_t)r * P->table_stride;
  const size_t es = A->bf16 ? 2 : 4, hoff = (size_t)kh * P->head_stride;
  float *qs = ws, *acc = qs + (size_t)G * Dp, *m = acc + (size_t)G * Dp, *l = m + G + 16;
  float *s = l + G + 16;
  const vf ninf = vset1(-INFINITY);
  for (int g = 0; g < G; g++) {   // pre-scaled queries, zero-padded to Dp
    const float *qr = A->q + (size_t)r * A->ldq + (size_t)(kh * G + g) * D;
    float *qd = qs + (size_t)g * Dp;
    for (int d = 0; d < D; d++) qd[d] = qr[d] * A->scale;
    for (int d = D; d < Dp; d++) qd[d] = 0.0f;
    memset(acc + (size_t)g * Dp, 0, sizeof(float) * (size_t)Dp);
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  const size_t bbytes = (size_t)bt * D * es;
  for (int bi = b0; bi < b1; bi++) {
    const int nk = L - bi * bt < bt ? L - bi * bt : bt;
    const size_t boff = (size_t)tab[bi] * P->block_stride + hoff;
    const void *K = (const char *)P->k + boff * es, *V = (const char *)P->v + boff * es;
    if (bi + 1 < b1)   // the next block: maybe another page, where hardware prefetch stops
      prefetch_kv(P, (size_t)tab[bi + 1] * P->block_stride + hoff, es, bbytes);
    for (int g = 0; g < G; g++) {
      scores(s, qs + (size_t)g * Dp, K, nk, D, A->bf16);
      for (int j = nk; j < Sp; j++) s[j] = -INFINITY;
      vf mv = ninf;
      for (int j = 0; j < Sp; j += VL) mv = vmax(mv, vload(s + j));
      const float mx = vhmax(mv), mn = mx > m[g] ? mx : m[g];
      const float alpha = m[g] == -INFINITY ? 0.0f : expf(m[g] - mn);
      const vf mnv = vset1(mn);
      vf sum = vzero();
      for (int j = 0; j < Sp; j += VL) {   // padding scores are -inf: p = 0
        const vf pj = vexp_neg(vsub(vload(s + j), mnv));
        vstore(s + j, pj);
        sum = vadd(sum, pj);
      }
      l[g] = l[g] * alpha + vsum(sum);
      m[g] = mn;
      accumulate(acc + (size_t)g * Dp, alpha, s, V, nk, D, A->bf16);
    }
  }
  if (nch_r == 1) {   // the only chunk: normalize into the output
    for (int g = 0; g < G; g++) {
      float *orow = A->o + (size_t)r * A->ldo + (size_t)(kh * G + g) * D;
      const float inv = 1.0f / l[g];
      const float *a = acc + (size_t)g * Dp;
      for (int d = 0; d < D; d++) orow[d] = a[d] * inv;
    }
    return;
  }
  const int PS = D + 2;
  float *part = A->part + A->poff[r] + (((size_t)kh * nch_r + c) * G) * PS;
  for (int g = 0; g < G; g++) {
    float *pr = part + (size_t)g * PS;
    pr[0] = m[g];
    pr[1] = l[g];
    memcpy(pr + 2, acc + (size_t)g * Dp, sizeof(float) * (size_t)D);
  }
}

// Output row (r, query head h) from its chunk partials, in chunk order.
static void merge(const ot__paged_args *A, float *acc, int r, int h) {
  const ot__paged_pool *P = &A->p;
  const int D = P->D, G = A->G, kh = h / G, g = h % G, nch = A->nch[r], PS = D + 2;
  const float *p0 = A->part + A->poff[r] + ((size_t)kh * nch * G + g) * PS;
  const size_t cs = (size_t)G * PS;   // chunk stride
  float M = -INFINITY;
  for (int c = 0; c < nch; c++) M = p0[c * cs] > M ? p0[c * cs] : M;
  memset(acc, 0, sizeof(float) * (size_t)rup(D, VL));
  float Ls = 0.0f;
  for (int c = 0; c < nch; c++) {
    const float *pc = p0 + c * cs;
    const float f = expf(pc[0] - M);
    Ls += pc[1] * f;
    const vf fv = vset1(f);
    int d = 0;
    for (; d + VL <= D; d += VL) vstore(acc + d, vfmadd(vload(pc + 2 + d), fv, vload(acc + d)));
    for (; d < D; d++) acc[d] += pc[2 + d] * f;
  }
  float *orow = A->o + (size_t)r * A->ldo + (size_t)h * D;
  const float inv = 1.0f / Ls;
  for (int d = 0; d < D; d++) orow[d] = acc[d] * inv;
}

// On the team (ot__team_for) when every row is one chunk and o is [n, Hq * D]:
// team item i = items [i per, (i + 1) per) (item it = row it / Hkv, kv head it %
// Hkv), each writing its G output rows, contiguous in o; the helper's copy of o
// is dst. Reads the pool, tables, kv_len and q by pointer, nothing of the
// caller's scratch.
typedef struct {
  ot__paged_args A;
  int hkv;
  long per, n;
} paged_job;

static void paged_team_item(const void *ctx, long i, float *dst, float *scratch) {
  const paged_job *j = ctx;
  ot__paged_args A = j->A;
  A.o = dst;
  for (long it = i * j->per; it < (i + 1) * j->per && it < j->n; it++)
    item(&A, scratch, (int)(it / j->hkv), (int)(it % j->hkv), 0, 1);
}

// All items, then all merges, in one parallel region (two work-shared loops);
// or the items on the team (see paged_team_item).
void OT_K(k_attn_paged)(const ot__paged_args *A) {
  const int hkv = A->p.Hq / A->G;
  if (A->par && A->nmerge == 0 && A->ldo == A->p.Hq * A->p.D && A->nitems == A->nitems / hkv * hkv &&
      A->ws_pt <= OT_TEAM_SCRATCH && ot__team_acquire()) {
    const long n = A->nitems, T = ot__team_size(), want = n < 4 * T ? n : 4 * T;
    long per = (n + want - 1) / want;
    if (per < (n + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX) per = (n + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX;
    const long w = (long)A->G * A->p.D;
    const paged_job j = {*A, hkv, per, n};
    const ot_status s = ot__team_for(A->o, n * w, (int)(per * w), paged_team_item, &j, sizeof j, ot__team_steal_get());
    ot__team_release();
    if (s == OT_OK) return;
  }
#pragma omp parallel num_threads(A->nt) if (A->par)
  {
    float *ws = A->ws + (size_t)omp_get_thread_num() * A->ws_pt;
    const int nt = omp_get_num_threads();
#pragma omp for schedule(static, 1)
    for (int it = 0; it < A->nitems; it++) {
      if (it + nt < A->nitems) prefetch_first(A, A->items + 3 * (size_t)(it + nt));
      const int32_t *e = A->items + 3 * (size_t)it;
      item(A, ws, e[0], e[1], e[2], A->nch[e[0]]);
    }
#pragma omp for schedule(static)
    for (int i = 0; i < A->nmerge; i++)
      merge(A, ws, A->merge[i] / A->p.Hq, A->merge[i] % A->p.Hq);
  }
}
