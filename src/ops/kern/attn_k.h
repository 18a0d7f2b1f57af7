// The fused attention kernels' interface (kern/flash.c, kern/flash_bwd.c and
// their callers ops/attn_*.c through ops/attn_impl.h): one argument block for
// every kernel, the tile sizes, the interval logic that says which keys a
// query tile sees (dense or block-sparse) and which queries see a key tile,
// and the kernels' prototypes, one variant per ISA. ISA-independent.
#ifndef OT_KERN_ATTN_K_H
#define OT_KERN_ATTN_K_H
#include "internal.h"

// Tile sizes (queries x keys). 64 x 64 with D = 64: the transposed query tile
// Qt [D, 64], the score tile [64, 64] and the output accumulator [64, D] are
// 16 KB each, the key/value rows of one tile 16 KB each: ~80 KB per thread,
// well inside the 512 KB L2, and the operands the micro-kernel streams at any
// moment (a [D, 16] strip of Qt or a [64, 16] strip of V, 4 KB, plus 6 rows of
// A) stay in the 32 KB L1. At D = 256 the set grows to ~400 KB, still in L2.
// 64 is also the usual block-sparse block size, so a sparse block is one tile.
// Larger tiles would leave L2 at D = 256; smaller ones (32) halve the reuse of
// each transposed tile and the register-blocked inner loops' trip counts, and
// 64 = 10 x 6 + 4 rows keeps the 6-row micro-tile mostly full. (Measured at
// T = 2048, D = 64 on the 2-core Zen 3: Bk = 48 or 96 and Bq = 96 or 128 were
// within noise of 64 x 64.)
#define OT_ATTN_BQ 64
#define OT_ATTN_BK 64
// Decode splits the cache into chunks of this many keys (fixed, so results do
// not depend on the thread count).
#define OT_ATTN_CHUNK 256

typedef struct { int a, b; } ot__iv;  // half-open interval [a, b)

typedef struct {
  int B, Hq, Hkv, G, Tq, Tk, D;
  int off;                 // Tk - Tq: query i sits at key position i + off
  int causal;
  const int32_t *kv_len;   // [B] or NULL
  float scale;             // resolved (never 0)
  int blk, win, glob;      // block-sparse layout; blk = 0: dense
  int bf16;
  const void *q, *k, *v, *o, *dout;
  void *out, *dq, *dk, *dv;
  float *lse;              // forward output (may be NULL)
  const float *lse_in;     // backward input
  float *delta;            // backward: [B*Hq*Tq] rowsum(dO * O)
  float *ws;               // per-thread scratch: thread t uses ws + t * ws_pt
  size_t ws_pt;
  int nt;                  // threads the scratch is sized for
  const ot__iv *qtiles;    // query tiles (same for every head)
  int nqt;
  const ot__iv *ktiles;    // key tiles (backward dK/dV)
  int nkt;
  int chunk;               // backward: (b, kv head) groups per round
  float *dqpart;           // backward: per-thread dQ partials, dqp_pt floats each
  size_t dqp_pt;
  int *items;              // backward: 3 * chunk * nkt ints (work list)
  int nch;                 // decode: chunks per (b, kv head)
  float *part;             // decode: [B, Hkv, nch, G*Tq, D + 2] partial (m, l, acc)
  int drop;                // attention dropout on (flash forward / backward only)
  uint32_t drop_thr;       // keep iff rand >= drop_thr (ot_dropout_threshold)
  float drop_scale;        // kept probabilities times this (ot_dropout_scale)
  uint64_t drop_seed;      // stream
  uint64_t drop_off;       // counter of (b, h, i, j) = drop_off + r(b)*drop_sb + h*drop_sh + i*drop_si + j
  const int64_t *drop_rows;  // r(b) = drop_rows[b] (NULL: b)
  uint64_t drop_sb, drop_sh, drop_si;
} ot__attn_args;

// Dropout counter of (b, h, i, key 0).
static inline uint64_t ot__attn_dc(const ot__attn_args *A, int b, int h, long i) {
  const uint64_t r = A->drop_rows ? (uint64_t)A->drop_rows[b] : (uint64_t)b;
  return A->drop_off + r * A->drop_sb + (uint64_t)h * A->drop_sh + (uint64_t)i * A->drop_si;
}

static inline int ot__attn_L(const ot__attn_args *A, int b) {
  return A->kv_len ? A->kv_len[b] : A->Tk;
}
static inline long ot__lmin(long a, long b) { return a < b ? a : b; }
static inline long ot__lmax(long a, long b) { return a > b ? a : b; }

// Window extent in blocks: query block qb sees key blocks [qb - lo, qb + hi].
static inline void ot__attn_win(const ot__attn_args *A, long *lo, long *hi) {
  *lo = A->causal ? A->win - 1 : A->win / 2;
  *hi = A->causal ? 0 : (A->win - 1) / 2;
}

// Union of [0, g) and [a, b) (a >= 0) as sorted disjoint intervals, each
// clipped to [0, n); returns the count (0..2).
static inline int ot__attn_union(long g, long a, long b, long n, ot__iv iv[2]) {
  int c = 0;
  if (g > 0 && g < a) {
    iv[c].a = 0; iv[c].b = (int)ot__lmin(g, n); if (iv[c].b > iv[c].a) c++;
    iv[c].a = (int)ot__lmin(a, n); iv[c].b = (int)ot__lmin(b, n); if (iv[c].b > iv[c].a) c++;
  } else {
    long lo = g > 0 ? 0 : a, hi = ot__lmax(g, b);
    iv[c].a = (int)ot__lmin(lo, n); iv[c].b = (int)ot__lmin(hi, n); if (iv[c].b > iv[c].a) c++;
  }
  return c;
}

// Keys (before causal / kv_len clipping) the query rows [i0, i1) may attend.
// Sparse query tiles never straddle a block boundary nor the global boundary.
static inline int ot__attn_key_ivs(const ot__attn_args *A, int i0, int i1, ot__iv iv[2]) {
  long p0 = (long)i0 + A->off, p1 = (long)i1 - 1 + A->off;
  if (!A->blk || p1 < A->glob) { iv[0].a = 0; iv[0].b = A->Tk; return 1; }
  long lo, hi, qb = p0 / A->blk;
  ot__attn_win(A, &lo, &hi);
  long a = ot__lmax(qb - lo, 0) * A->blk, b = (qb + hi + 1) * A->blk;
  return ot__attn_union(A->glob, a, b, A->Tk, iv);
}

// Query rows (before causal clipping) that may attend the keys [j0, j1).
static inline int ot__attn_query_ivs(const ot__attn_args *A, int j0, int j1, ot__iv iv[2]) {
  if (!A->blk || j1 - 1 < A->glob) { iv[0].a = 0; iv[0].b = A->Tq; return 1; }
  long lo, hi, kb = j0 / A->blk;
  ot__attn_win(A, &lo, &hi);
  // positions: [0, glob) and the query blocks [kb - hi, kb + lo]
  long a = ot__lmax(kb - hi, 0) * A->blk, b = (kb + lo + 1) * A->blk;
  ot__iv pv[2];
  int n = ot__attn_union(A->glob, a, b, (long)A->Tk, pv), c = 0;
  for (int t = 0; t < n; t++) {  // positions -> rows (off >= 0 for sparse)
    long ra = ot__lmax((long)pv[t].a - A->off, 0), rb = ot__lmin((long)pv[t].b - A->off, A->Tq);
    if (rb > ra) { iv[c].a = (int)ra; iv[c].b = (int)rb; c++; }
  }
  return c;
}

// Cuts rows [0, n) (row r at position r + off) into tiles of at most T rows;
// with blk > 0 no tile straddles a multiple of blk nor the position glob.
// Writes the tiles when out != NULL; returns their number.
static inline int ot__attn_tiles(int n, int off, int blk, int glob, int T, ot__iv *out) {
  int cnt = 0;
  for (long r = 0; r < n;) {
    long e = ot__lmin(n, r + T), p = r + off;
    if (blk > 0) {
      e = ot__lmin(e, (p / blk + 1) * blk - off);
      if (p < glob) e = ot__lmin(e, (long)glob - off);
    }
    if (out) { out[cnt].a = (int)r; out[cnt].b = (int)e; }
    cnt++;
    r = e;
  }
  return cnt;
}

// Per-thread scratch floats any attention kernel needs for head dim D.
static inline size_t ot__attn_ws_floats(int D) {
  size_t Dp = ((size_t)D + 15) & ~(size_t)15, d = (size_t)D;
  return 2 * OT_ATTN_BQ * d + 2 * OT_ATTN_BK * d          // transposed tiles
         + 2 * (size_t)OT_ATTN_BQ * OT_ATTN_BK             // score tiles
         + 2 * (OT_ATTN_BQ + OT_ATTN_BK) * Dp              // accumulators + f32 rows
         + 2 * OT_ATTN_BK * Dp
         + 8 * 64 + 16 * 16;                                // row vectors, alignment
}

// Kernels (kern/flash.c, kern/flash_bwd.c), one variant per ISA: forward (o,
// lse), backward (dq, dk, dv from dout, o, lse_in, delta) and decode (split-KV
// chunks merged in order).
OT_KDECL(void, k_attn_fwd, (const ot__attn_args *A));
OT_KDECL(void, k_attn_bwd, (const ot__attn_args *A));
OT_KDECL(void, k_attn_decode, (const ot__attn_args *A));

#endif
