// Block-sparse attention (ot_attn_sparse_fwd/bwd) vs dense attention run with
// the equivalent element mask (a masked dense reference in double, below),
// every ISA: causal and bidirectional layouts, T not a multiple of the block,
// global tokens spanning several blocks, Tq < Tk, GQA, kv_len padding (NaN
// padding never read), block size 1 and a window that covers everything (=
// dense flash); bf16; finite differences; the mask helper vs the definition;
// pair counts; determinism (repeatable bits; thread count changes only dq's
// rounding); argument validation.
#include "attn_bufs.h"

typedef struct {
  int B, Hq, Hkv, Tq, Tk, D; bool causal; int kvl[2];  // kvl[0] < 0: none
  ot_attn_sparse_layout l;
} scase;
static const scase cases[] = {
    {1, 2, 1, 100, 100, 32, true, {-1}, {16, 3, 5}},
    {1, 2, 1, 100, 100, 32, false, {-1}, {16, 3, 5}},
    {1, 4, 2, 300, 300, 64, true, {-1}, {64, 3, 10}},     // the users' layout, GQA
    {1, 2, 2, 200, 200, 64, false, {-1}, {64, 3, 10}},
    {2, 2, 1, 50, 50, 32, false, {40, 7}, {8, 2, 0}},     // padding, even window
    {1, 2, 2, 260, 260, 80, true, {-1}, {100, 1, 130}},   // globals span 1.3 blocks
    {1, 2, 1, 20, 70, 32, true, {-1}, {16, 2, 3}},        // Tq < Tk
    {1, 1, 1, 30, 30, 64, true, {-1}, {1, 4, 2}},         // block size 1
    {1, 2, 2, 77, 77, 128, false, {-1}, {32, 5, 1}},
    {1, 2, 1, 1, 1, 32, true, {-1}, {64, 3, 10}},         // T = 1
};

// The layout's element mask from its definition (independent of the library).
static bool allowed(const ot_attn_shape *s, const ot_attn_sparse_layout *l, int i, int j) {
  long p = (long)i + s->Tk - s->Tq, qb = p / l->block_size, kb = j / l->block_size;
  long w = l->local_window;
  bool win = s->causal ? (kb <= qb && kb >= qb - (w - 1)) : (kb >= qb - w / 2 && kb <= qb + (w - 1) / 2);
  bool ok = p < l->global_tokens || j < l->global_tokens || win;
  return ok && (!s->causal || j <= p);
}

static int klen(const ot_attn_shape *s, int b) { return s->kv_len ? s->kv_len[b] : s->Tk; }

// Masked dense attention in double: query (b, h, i) attends key j iff
// mask[i * Tk + j] and j < kv_len[b]. o, lse (-inf for empty rows).
static void mref_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                     const ot_attn_shape *s, const uint8_t *mask, double *p) {
  const int D = s->D, G = s->Hq / s->Hkv;
  const double sc = s->scale != 0.0f ? s->scale : (double)(float)(1.0 / sqrt((double)D));
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->Hq; h++)
      for (int i = 0; i < s->Tq; i++) {
        size_t row = ((size_t)b * s->Hq + h) * s->Tq + i;
        const float *kb = k + ((size_t)b * s->Hkv + h / G) * s->Tk * D;
        const float *vb = v + ((size_t)b * s->Hkv + h / G) * s->Tk * D;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < s->Tk; j++) {
          p[j] = -INFINITY;
          if (!mask[(size_t)i * s->Tk + j] || j >= klen(s, b)) continue;
          double d = 0;
          for (int c = 0; c < D; c++) d += (double)q[row * D + c] * kb[(size_t)j * D + c];
          p[j] = sc * d;
          mx = p[j] > mx ? p[j] : mx;
        }
        for (int j = 0; j < s->Tk; j++) { p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx); sum += p[j]; }
        for (int c = 0; c < D; c++) {
          double acc = 0;
          for (int j = 0; j < s->Tk; j++) if (p[j] != 0) acc += p[j] * vb[(size_t)j * D + c];
          o[row * D + c] = sum > 0 ? (float)(acc / sum) : 0.0f;
        }
        lse[row] = sum > 0 ? (float)(mx + log(sum)) : -INFINITY;
      }
}

static void mref_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                     const float *k, const float *v, const ot_attn_shape *s, const uint8_t *mask) {
  const int D = s->D, G = s->Hq / s->Hkv, Tk = s->Tk;
  const double sc = s->scale != 0.0f ? s->scale : (double)(float)(1.0 / sqrt((double)D));
  const size_t kvn = (size_t)Tk * D;
  double *p = th_alloc(sizeof(double) * (2 * (size_t)Tk + 2 * kvn));
  double *ds = p + Tk, *dka = ds + Tk, *dva = dka + kvn;
  for (int b = 0; b < s->B; b++)
    for (int kh = 0; kh < s->Hkv; kh++) {
      const float *kb = k + ((size_t)b * s->Hkv + kh) * kvn, *vb = v + ((size_t)b * s->Hkv + kh) * kvn;
      for (size_t x = 0; x < kvn; x++) dka[x] = dva[x] = 0;
      for (int h = kh * G; h < (kh + 1) * G; h++)
        for (int i = 0; i < s->Tq; i++) {
          size_t row = ((size_t)b * s->Hq + h) * s->Tq + i;
          const float *qi = q + row * D, *di = dout + row * D;
          double mx = -INFINITY, sum = 0, dsum = 0;
          for (int j = 0; j < Tk; j++) {
            p[j] = -INFINITY;
            if (!mask[(size_t)i * Tk + j] || j >= klen(s, b)) continue;
            double d = 0;
            for (int c = 0; c < D; c++) d += (double)qi[c] * kb[(size_t)j * D + c];
            p[j] = sc * d;
            mx = p[j] > mx ? p[j] : mx;
          }
          for (int j = 0; j < Tk; j++) { p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx); sum += p[j]; }
          for (int j = 0; j < Tk; j++) {
            if (sum > 0) p[j] /= sum;
            double d = 0;
            if (p[j] != 0)
              for (int c = 0; c < D; c++) d += (double)di[c] * vb[(size_t)j * D + c];
            ds[j] = d;
            dsum += p[j] * d;
          }
          for (int j = 0; j < Tk; j++) ds[j] = p[j] * (ds[j] - dsum);
          for (int c = 0; c < D; c++) {
            double acc = 0;
            for (int j = 0; j < Tk; j++) if (p[j] != 0) acc += ds[j] * kb[(size_t)j * D + c];
            dq[row * D + c] = (float)(sc * acc);
          }
          for (int j = 0; j < Tk; j++)
            if (p[j] != 0)
              for (int c = 0; c < D; c++) {
                dka[(size_t)j * D + c] += sc * ds[j] * qi[c];
                dva[(size_t)j * D + c] += p[j] * di[c];
              }
        }
      float *dkb = dk + ((size_t)b * s->Hkv + kh) * kvn, *dvb = dv + ((size_t)b * s->Hkv + kh) * kvn;
      for (size_t x = 0; x < kvn; x++) { dkb[x] = (float)dka[x]; dvb[x] = (float)dva[x]; }
    }
  free(p);
}

static ot_attn_shape shape_of(const scase *c, int32_t *kvl) {
  ot_attn_shape s = {c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D, c->causal, NULL, 0.0f};
  if (c->kvl[0] >= 0) {
    for (int b = 0; b < c->B; b++) kvl[b] = c->kvl[b];
    s.kv_len = kvl;
  }
  return s;
}

static void poison_padding(float *x, const ot_attn_shape *s) {
  if (!s->kv_len) return;
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->Hkv; h++)
      for (int j = s->kv_len[b]; j < s->Tk; j++)
        for (int d = 0; d < s->D; d++) x[(((size_t)b * s->Hkv + h) * s->Tk + j) * s->D + d] = NAN;
}

static bool all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return false;
  return true;
}

// Normalized error, or an absolute noise bound where the exact value is all 0.
static void check_close(const float *got, const float *want, size_t n, double tol,
                        const char *ctx, const char *name) {
  double ww = 0, mx = 0;
  for (size_t i = 0; i < n; i++) ww += (double)want[i] * want[i];
  if (ww != 0) { th_check_nerr(got, want, n, tol, "%s: %s", ctx, name); return; }  // NaN too
  for (size_t i = 0; i < n; i++) mx = fabs(got[i]) > mx ? fabs(got[i]) : mx;
  th_check(mx <= 1e-5, "%s: %s exactly 0 in the reference; max |got| = %.3g", ctx, name, mx);
}


static ot_status run_sparse(ot_dtype dt, th_abufs *b, const ot_attn_shape *s,
                            const ot_attn_sparse_layout *l) {
  for (size_t i = 0; i < b->nq; i++) b->o[i] = b->dq[i] = NAN;
  for (size_t i = 0; i < b->nk; i++) b->dk[i] = b->dv[i] = NAN;
  if (dt == OT_F32) {
    ot_status st = ot_attn_sparse_fwd(dt, b->o, b->lse, b->q, b->k, b->v, s, l);
    if (st != OT_OK) return st;
    return ot_attn_sparse_bwd(dt, b->dq, b->dk, b->dv, b->dout, b->o, b->lse, b->q, b->k, b->v, s, l);
  }
  void *qb = th_to_dt(dt, b->q, b->nq), *kb = th_to_dt(dt, b->k, b->nk);
  void *vb = th_to_dt(dt, b->v, b->nk), *db = th_to_dt(dt, b->dout, b->nq);
  uint16_t *ob = th_alloc(b->nq * 2), *dqb = th_alloc(b->nq * 2);
  uint16_t *dkb = th_alloc(b->nk * 2), *dvb = th_alloc(b->nk * 2);
  ot_status st = ot_attn_sparse_fwd(dt, ob, b->lse, qb, kb, vb, s, l);
  if (st == OT_OK) st = ot_attn_sparse_bwd(dt, dqb, dkb, dvb, db, ob, b->lse, qb, kb, vb, s, l);
  th_from_dt(dt, ob, b->o, b->nq); th_from_dt(dt, dqb, b->dq, b->nq);
  th_from_dt(dt, dkb, b->dk, b->nk); th_from_dt(dt, dvb, b->dv, b->nk);
  free(qb); free(kb); free(vb); free(db); free(ob); free(dqb); free(dkb); free(dvb);
  return st;
}

static void test_vs_masked_dense(ot_isa isa, ot_dtype dt) {
  const bool bf = dt != OT_F32;   // 16-bit storage (bf16, f16)
  const double tol = th_tol(dt, 1e-6, 1e-2);
  th_rng r = {31337};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    if (bf && ci % 3 != 2) continue;
    const scase *c = &cases[ci];
    int32_t kvl[2];
    ot_attn_shape s = shape_of(c, kvl);
    th_abufs b = th_abufs_make(&s), w = th_abufs_make(&s);
    uint8_t *mask = th_alloc((size_t)s.Tq * s.Tk);
    double *p = th_alloc(sizeof(double) * (size_t)s.Tk);
    for (int i = 0; i < s.Tq; i++)
      for (int j = 0; j < s.Tk; j++) mask[(size_t)i * s.Tk + j] = allowed(&s, &c->l, i, j);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
    if (bf) { th_round_dt(dt, b.q, b.nq); th_round_dt(dt, b.k, b.nk); th_round_dt(dt, b.v, b.nk);
              th_round_dt(dt, b.dout, b.nq); }
    poison_padding(b.k, &s); poison_padding(b.v, &s);
    mref_fwd(w.o, w.lse, b.q, b.k, b.v, &s, mask, p);
    mref_bwd(w.dq, w.dk, w.dv, b.dout, b.q, b.k, b.v, &s, mask);
    ot_status st = run_sparse(dt, &b, &s, &c->l);
    char ctx[192];
    snprintf(ctx, sizeof ctx, "%s %s sparse case %zu (B%d Hq%d Hkv%d Tq%d Tk%d D%d%s%s b=%d w=%d g=%d)",
             ot_isa_name(isa), ot_dtype_name(dt), ci, s.B, s.Hq, s.Hkv, s.Tq, s.Tk, s.D,
             s.causal ? " causal" : "", s.kv_len ? " kv_len" : "", c->l.block_size,
             c->l.local_window, c->l.global_tokens);
    th_check(st == OT_OK, "%s: status %s (%s)", ctx, ot_status_name(st), ot_last_error());
    th_check(all_finite(b.o, b.nq) && all_finite(b.dq, b.nq) && all_finite(b.dk, b.nk) &&
             all_finite(b.dv, b.nk), "%s: outputs written and finite", ctx);
    check_close(b.o, w.o, b.nq, tol, ctx, "o");
    bool lse_ok = true;
    for (size_t i = 0; i < b.nl; i++)
      lse_ok &= isinf(w.lse[i]) ? (isinf(b.lse[i]) && b.lse[i] < 0)
                                : fabs(b.lse[i] - w.lse[i]) <= (th_tol(dt, 2e-6, 2e-2)) * (1 + fabs(w.lse[i]));
    th_check(lse_ok, "%s: lse", ctx);
    check_close(b.dq, w.dq, b.nq, tol, ctx, "dq");
    check_close(b.dk, w.dk, b.nk, tol, ctx, "dk");
    check_close(b.dv, w.dv, b.nk, tol, ctx, "dv");
    if (!bf && isa == OT_ISA_PORTABLE) {  // helpers: mask and pair count
      uint8_t *m2 = th_alloc((size_t)s.Tq * s.Tk);
      ot_status sm = ot_attn_sparse_mask(m2, &s, &c->l);
      th_check(sm == OT_OK && !memcmp(m2, mask, (size_t)s.Tq * s.Tk), "%s: ot_attn_sparse_mask", ctx);
      double cnt = 0;
      for (int bb = 0; bb < s.B; bb++)
        for (int i = 0; i < s.Tq; i++)
          for (int j = 0; j < klen(&s, bb); j++) cnt += mask[(size_t)i * s.Tk + j];
      double pairs = ot_attn_pairs(&s, &c->l);
      th_check(pairs == cnt, "%s: ot_attn_pairs %.0f == mask count %.0f", ctx, pairs, cnt);
      free(m2);
    }
    th_abufs_free(&b); th_abufs_free(&w); free(mask); free(p);
  }
}

// A window wider than the sequence and no globals is dense attention.
static void test_dense_equivalence(ot_isa isa) {
  ot_attn_shape s = {1, 4, 2, 150, 150, 64, true, NULL, 0.0f};
  ot_attn_sparse_layout l = {32, 100, 0};
  th_abufs b = th_abufs_make(&s), f = th_abufs_make(&s);
  th_rng r = {8};
  th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
  th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
  ot_status st = run_sparse(OT_F32, &b, &s, &l);
  ot_status sf = ot_attn_flash_fwd(OT_F32, f.o, f.lse, b.q, b.k, b.v, &s);
  if (sf == OT_OK) sf = ot_attn_flash_bwd(OT_F32, f.dq, f.dk, f.dv, b.dout, f.o, f.lse, b.q, b.k, b.v, &s);
  th_check(st == OT_OK && sf == OT_OK, "%s sparse(full window) status", ot_isa_name(isa));
  th_check_nerr(b.o, f.o, b.nq, 1e-6, "%s sparse(full window) == flash: o", ot_isa_name(isa));
  th_check_nerr(b.dq, f.dq, b.nq, 1e-6, "%s sparse(full window) == flash: dq", ot_isa_name(isa));
  th_check_nerr(b.dk, f.dk, b.nk, 1e-6, "%s sparse(full window) == flash: dk", ot_isa_name(isa));
  th_check_nerr(b.dv, f.dv, b.nk, 1e-6, "%s sparse(full window) == flash: dv", ot_isa_name(isa));
  th_abufs_free(&b); th_abufs_free(&f);
}

// ---- finite differences of the sparse backward ----
typedef struct { const ot_attn_shape *s; const ot_attn_sparse_layout *l; th_abufs *b; const float *w; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_attn_sparse_fwd(OT_F32, c->b->o, c->b->lse, c->b->q, c->b->k, c->b->v, c->s, c->l);
  return th_dot(c->b->o, c->w, c->b->nq);
}

static void test_fd(void) {
  static const scase fc[] = {
      {1, 2, 1, 9, 9, 4, true, {-1}, {2, 2, 1}},
      {1, 1, 1, 7, 9, 3, false, {-1}, {3, 1, 2}},
  };
  th_rng r = {12};
  for (size_t ci = 0; ci < sizeof fc / sizeof fc[0]; ci++) {
    int32_t kvl[2];
    ot_attn_shape s = shape_of(&fc[ci], kvl);
    th_abufs b = th_abufs_make(&s);
    float *w = th_falloc(b.nq), *fq = th_falloc(b.nq), *fk = th_falloc(b.nk), *fv = th_falloc(b.nk);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, w, b.nq, 1.0f);
    memcpy(b.dout, w, b.nq * 4);
    run_sparse(OT_F32, &b, &s, &fc[ci].l);
    fd_ctx c = {&s, &fc[ci].l, &b, w};
    for (size_t i = 0; i < b.nq; i++) fq[i] = (float)th_fd(b.q, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < b.nk; i++) fk[i] = (float)th_fd(b.k, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < b.nk; i++) fv[i] = (float)th_fd(b.v, i, 1e-2f, fd_loss, &c);
    th_check_nerr(b.dq, fq, b.nq, 1e-3, "sparse bwd vs finite differences, case %zu: dq", ci);
    th_check_nerr(b.dk, fk, b.nk, 1e-3, "sparse bwd vs finite differences, case %zu: dk", ci);
    th_check_nerr(b.dv, fv, b.nk, 1e-3, "sparse bwd vs finite differences, case %zu: dv", ci);
    th_abufs_free(&b); free(w); free(fq); free(fk); free(fv);
  }
}

static void test_determinism(void) {
  const scase *c = &cases[2];
  int32_t kvl[2];
  ot_attn_shape s = shape_of(c, kvl);
  th_abufs a = th_abufs_make(&s), b = th_abufs_make(&s);
  th_rng r = {4};
  th_fill_normal(&r, a.q, a.nq, 1.0f); th_fill_normal(&r, a.k, a.nk, 1.0f);
  th_fill_normal(&r, a.v, a.nk, 1.0f); th_fill_normal(&r, a.dout, a.nq, 1.0f);
  memcpy(b.q, a.q, a.nq * 4); memcpy(b.k, a.k, a.nk * 4);
  memcpy(b.v, a.v, a.nk * 4); memcpy(b.dout, a.dout, a.nq * 4);
  int nt0 = ot_threads_get();
  ot_threads_set(1);
  run_sparse(OT_F32, &a, &s, &c->l);
  static const int nts[] = {1, 2, 3};
  for (int t = 0; t < 3; t++) {
    ot_threads_set(nts[t]);
    run_sparse(OT_F32, &b, &s, &c->l);
    th_check(!memcmp(a.o, b.o, a.nq * 4) && !memcmp(a.dk, b.dk, a.nk * 4) &&
             !memcmp(a.dv, b.dv, a.nk * 4),
             "sparse: o, dk, dv bitwise identical with 1 and %d threads", nts[t]);
    if (t == 0) th_check(!memcmp(a.dq, b.dq, a.nq * 4), "sparse: dq repeatable with 1 thread");
    else th_check_nerr(b.dq, a.dq, a.nq, 1e-6, "sparse: dq with %d threads vs 1", nts[t]);
  }
  ot_threads_set(nt0);
  th_abufs_free(&a); th_abufs_free(&b);
}

static void test_errors(void) {
  float buf[4096] = {0}, lse[64] = {0};
  uint8_t m[64];
  const float *x = buf;
  ot_attn_shape s = {1, 2, 1, 4, 4, 8, true, NULL, 0.0f}, s2;
  ot_attn_sparse_layout ok = {2, 1, 1}, l;
  th_check(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s, &ok) == OT_OK, "sparse accepts a valid layout");
  th_check_error(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s, NULL), OT_EINVAL,
                 "ot_attn_sparse_fwd: layout is NULL", "sparse NULL layout");
  l = ok; l.block_size = 0;
  th_check_error(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s, &l), OT_EINVAL,
                 "block_size=0 must be >= 1", "sparse block_size 0");
  l = ok; l.local_window = 0;
  th_check_error(ot_attn_sparse_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &s, &l), OT_EINVAL,
                 "ot_attn_sparse_bwd: local_window=0", "sparse window 0");
  l = ok; l.global_tokens = -3;
  th_check_error(ot_attn_sparse_mask(m, &s, &l), OT_EINVAL, "global_tokens=-3", "sparse g < 0");
  s2 = s; s2.Tq = 5;
  th_check_error(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s2, &ok), OT_EINVAL,
                 "Tq=5 > Tk=4", "sparse Tq > Tk");
  s2 = s; s2.Hkv = 3;
  th_check_error(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s2, &ok), OT_EINVAL,
                 "Hq=2 is not a multiple of Hkv=3", "sparse Hq % Hkv");
  th_check_error(ot_attn_sparse_bwd(OT_F32, buf, buf, buf, x, x, NULL, x, x, x, &s, &ok), OT_EINVAL,
                 "'lse' is NULL", "sparse bwd lse NULL");
  th_check_error(ot_attn_sparse_mask(NULL, &s, &ok), OT_EINVAL, "'mask'", "sparse mask NULL");
  th_check(ot_attn_pairs(&s2, &ok) < 0, "ot_attn_pairs: -1 on a bad shape");
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_vs_masked_dense(isas[k], OT_F32);
    test_vs_masked_dense(isas[k], OT_BF16);
    test_vs_masked_dense(isas[k], OT_F16);
    test_dense_equivalence(isas[k]);
  }
  ot_isa_unforce();
  test_fd();
  test_determinism();
  test_errors();
  return th_finish();
}
