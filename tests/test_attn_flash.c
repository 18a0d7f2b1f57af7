// Flash attention (ot_attn_flash_fwd/bwd) vs the scalar reference (double
// accumulation) and the materialized baseline, every ISA: T = 1, T not a
// multiple of the 64-row tile, Tq != Tk under the bottom-right causal mask,
// GQA (Hkv = 2 of 4) and MQA (Hkv = 1), kv_len padding (padding holds NaN: it
// must never be read) with fully masked rows (o = 0, lse = -inf), D in
// {32, 64, 80, 128, 256} and an odd D; diagonal tiles off the tile grid (the
// kernels skip their invisible triangles); several backward rounds (dQ
// partials per round); bf16 storage; finite differences of
// the flash backward; bitwise determinism across runs and thread counts;
// O(T*D) workspace; argument validation messages. Attention dropout: flash ==
// reference with the same mask (f32, bf16, every ISA, the cases above), the
// mask of every (b, h, i, j) == ot_dropout_keep at its documented counter and
// its keep rate within 5 sigma, dropout_p = 0 bit-identical to no dropout,
// finite differences with the fixed mask, the same bits with 1/2/3 threads
// (dq: rounding only), the kernels without dropout refuse it.
#include "attn_bufs.h"
#include "internal.h"  // ot_scratch_release

typedef struct { int B, Hq, Hkv, Tq, Tk, D; bool causal; int kvl[3]; } fcase;  // kvl[0] < 0: none
static const fcase cases[] = {
    {1, 1, 1, 1, 1, 32, false, {-1}},
    {1, 1, 1, 1, 1, 32, true, {-1}},
    {1, 2, 2, 1, 77, 64, true, {-1}},          // one query row, Tq < Tk
    {1, 2, 2, 65, 65, 64, true, {-1}},         // one row past the tile
    {2, 4, 2, 33, 130, 80, true, {-1}},        // GQA, Tq < Tk (bottom-right)
    {1, 2, 1, 70, 40, 32, true, {-1}},         // Tq > Tk: 30 rows see nothing
    {1, 4, 1, 129, 129, 64, true, {-1}},       // MQA, 3 tiles
    {3, 2, 1, 50, 70, 32, true, {0, 20, 70}},  // padding: empty sequence, masked rows
    {2, 4, 2, 64, 64, 128, false, {5, 64}},
    {1, 2, 2, 70, 70, 256, true, {-1}},
    {1, 2, 2, 17, 23, 65, false, {-1}},        // D not a multiple of the vector length
    {1, 2, 2, 150, 300, 64, true, {250}},      // causal + padding, many tiles
    {1, 2, 1, 40, 40, 32, false, {-1}},        // explicit scale (below)
    {1, 4, 2, 200, 263, 64, true, {-1}},       // diagonal 63 keys off the tile grid (skipped triangles)
    {1, 4, 4, 520, 520, 32, true, {-1}},       // several backward rounds with 2+ threads, partial last tile
    {2, 2, 1, 130, 100, 64, true, {90, 100}},  // Tq > Tk causal + padding, MQA
};

static ot_attn_shape shape_of(const fcase *c, int32_t *kvl) {
  ot_attn_shape s = {c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D, c->causal, NULL, 0.0f};
  if (c->kvl[0] >= 0) {
    for (int b = 0; b < c->B; b++) kvl[b] = c->kvl[b];
    s.kv_len = kvl;
  }
  if (c->Tq == 40 && c->Tk == 40) s.scale = 0.3f;
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

// lse: -inf exactly where the reference has -inf; the rest compared by nerr.
static void check_lse(const float *got, const float *want, size_t n, double tol, const char *ctx) {
  float *g = th_falloc(n), *w = th_falloc(n);
  bool inf_ok = true;
  for (size_t i = 0; i < n; i++) {
    bool wi = isinf(want[i]) && want[i] < 0, gi = isinf(got[i]) && got[i] < 0;
    inf_ok &= wi == gi;
    g[i] = gi ? 0.0f : got[i];
    w[i] = wi ? 0.0f : want[i];
  }
  th_check(inf_ok, "%s: lse = -inf exactly on the rows that see nothing", ctx);
  th_check_nerr(g, w, n, tol, "%s: lse", ctx);
  free(g); free(w);
}

// Gradient check: normalized error, or (when the exact gradient is 0, e.g. a
// single visible key) an absolute bound on the f32 rounding noise.
static void check_grad(const float *got, const float *want, size_t n, double tol, const char *ctx,
                       const char *name) {
  double ww = 0, mx = 0;
  for (size_t i = 0; i < n; i++) ww += (double)want[i] * want[i];
  if (ww != 0) { th_check_nerr(got, want, n, tol, "%s: %s", ctx, name); return; }  // NaN too
  for (size_t i = 0; i < n; i++) mx = fabs(got[i]) > mx ? fabs(got[i]) : mx;
  th_check(mx <= 1e-5, "%s: %s is exactly 0 in the reference; max |got| = %.3g <= 1e-5", ctx, name, mx);
}

static void dirty(th_abufs *b) {  // outputs start as NaN: every element must be written
  for (size_t i = 0; i < b->nq; i++) b->o[i] = b->dq[i] = NAN;
  for (size_t i = 0; i < b->nk; i++) b->dk[i] = b->dv[i] = NAN;
  for (size_t i = 0; i < b->nl; i++) b->lse[i] = NAN;
}

// Flash forward + backward with storage dtype dt (bf16 via conversion).
static ot_status run_flash(ot_dtype dt, th_abufs *b, const ot_attn_shape *s) {
  if (dt == OT_F32) {
    ot_status st = ot_attn_flash_fwd(dt, b->o, b->lse, b->q, b->k, b->v, s);
    if (st != OT_OK) return st;
    return ot_attn_flash_bwd(dt, b->dq, b->dk, b->dv, b->dout, b->o, b->lse, b->q, b->k, b->v, s);
  }
  void *qb = th_to_dt(dt, b->q, b->nq), *kb = th_to_dt(dt, b->k, b->nk);
  void *vb = th_to_dt(dt, b->v, b->nk), *db = th_to_dt(dt, b->dout, b->nq);
  uint16_t *ob = th_alloc(b->nq * 2), *dqb = th_alloc(b->nq * 2);
  uint16_t *dkb = th_alloc(b->nk * 2), *dvb = th_alloc(b->nk * 2);
  ot_status st = ot_attn_flash_fwd(dt, ob, b->lse, qb, kb, vb, s);
  if (st == OT_OK) st = ot_attn_flash_bwd(dt, dqb, dkb, dvb, db, ob, b->lse, qb, kb, vb, s);
  th_from_dt(dt, ob, b->o, b->nq); th_from_dt(dt, dqb, b->dq, b->nq);
  th_from_dt(dt, dkb, b->dk, b->nk); th_from_dt(dt, dvb, b->dv, b->nk);
  free(qb); free(kb); free(vb); free(db); free(ob); free(dqb); free(dkb); free(dvb);
  return st;
}

static void test_vs_ref(ot_isa isa, ot_dtype dt) {
  const bool bf = dt != OT_F32;   // 16-bit storage (bf16, f16)
  const double tol = th_tol(dt, 1e-6, 1e-2);
  th_rng r = {2024};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    if (bf && (ci % 3) != 1) continue;  // bf16: a subset
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&cases[ci], kvl);
    th_abufs b = th_abufs_make(&s), w = th_abufs_make(&s);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
    if (bf) { th_round_dt(dt, b.q, b.nq); th_round_dt(dt, b.k, b.nk); th_round_dt(dt, b.v, b.nk);
              th_round_dt(dt, b.dout, b.nq); }
    poison_padding(b.k, &s); poison_padding(b.v, &s);
    ot_ref_attn_fwd(w.o, w.lse, b.q, b.k, b.v, &s);
    ot_ref_attn_bwd(w.dq, w.dk, w.dv, b.dout, b.q, b.k, b.v, &s);
    dirty(&b);
    ot_status st = run_flash(dt, &b, &s);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s %s flash case %zu (B%d Hq%d Hkv%d Tq%d Tk%d D%d%s%s)",
             ot_isa_name(isa), ot_dtype_name(dt), ci, s.B, s.Hq, s.Hkv, s.Tq, s.Tk, s.D,
             s.causal ? " causal" : "", s.kv_len ? " kv_len" : "");
    th_check(st == OT_OK, "%s: status %s (%s)", ctx, ot_status_name(st), ot_last_error());
    th_check(all_finite(b.o, b.nq) && all_finite(b.dq, b.nq) && all_finite(b.dk, b.nk) &&
             all_finite(b.dv, b.nk), "%s: outputs written and finite (padding never read)", ctx);
    th_check_nerr(b.o, w.o, b.nq, tol, "%s: o", ctx);
    check_lse(b.lse, w.lse, b.nl, th_tol(dt, 1e-6, 1e-2), ctx);
    check_grad(b.dq, w.dq, b.nq, tol, ctx, "dq");
    check_grad(b.dk, w.dk, b.nk, tol, ctx, "dk");
    check_grad(b.dv, w.dv, b.nk, tol, ctx, "dv");
    // rows that see nothing: o exactly 0
    bool zero_ok = true;
    for (size_t i = 0; i < b.nl; i++)
      if (isinf(w.lse[i]))
        for (int d = 0; d < s.D; d++) zero_ok &= b.o[i * s.D + d] == 0.0f;
    th_check(zero_ok, "%s: fully masked rows give o = 0", ctx);
    th_abufs_free(&b); th_abufs_free(&w);
  }
}

// The materialized baseline agrees too (same contract, GEMM path).
static void test_vs_mat(void) {
  static const int pick[] = {4, 7, 11};
  th_rng r = {7};
  for (size_t pi = 0; pi < sizeof pick / sizeof pick[0]; pi++) {
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&cases[pick[pi]], kvl);
    th_abufs b = th_abufs_make(&s), m = th_abufs_make(&s);
    size_t na = (size_t)s.B * s.Hq * s.Tq * s.Tk;
    float *att = th_falloc(na), *datt = th_falloc(na);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
    ot_status st = run_flash(OT_F32, &b, &s);
    ot_status sm = ot_attn_mat_fwd(OT_F32, m.o, att, b.q, b.k, b.v, &s);
    if (sm == OT_OK)
      sm = ot_attn_mat_bwd(OT_F32, m.dq, m.dk, m.dv, datt, b.dout, att, b.q, b.k, b.v, &s);
    th_check(st == OT_OK && sm == OT_OK, "flash vs mat case %d: status (%s)", pick[pi], ot_last_error());
    th_check_nerr(b.o, m.o, b.nq, 1e-5, "flash vs mat case %d: o", pick[pi]);
    th_check_nerr(b.dq, m.dq, b.nq, 1e-5, "flash vs mat case %d: dq", pick[pi]);
    th_check_nerr(b.dk, m.dk, b.nk, 1e-5, "flash vs mat case %d: dk", pick[pi]);
    th_check_nerr(b.dv, m.dv, b.nk, 1e-5, "flash vs mat case %d: dv", pick[pi]);
    th_abufs_free(&b); th_abufs_free(&m); free(att); free(datt);
  }
}

// ---- finite differences of the flash backward ----
typedef struct { const ot_attn_shape *s; th_abufs *b; const float *w; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_attn_flash_fwd(OT_F32, c->b->o, c->b->lse, c->b->q, c->b->k, c->b->v, c->s);
  return th_dot(c->b->o, c->w, c->b->nq);
}

static void test_fd(ot_isa isa, float p) {
  static const fcase fc[] = {
      {1, 2, 1, 3, 5, 4, true, {-1}},    // GQA, Tq < Tk causal
      {1, 1, 1, 4, 4, 3, false, {2}},    // padding
      {2, 2, 2, 3, 2, 5, true, {-1}},    // Tq > Tk: a masked row
      {1, 4, 2, 2, 3, 8, false, {-1}},
  };
  th_rng r = {5};
  for (size_t ci = 0; ci < sizeof fc / sizeof fc[0]; ci++) {
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&fc[ci], kvl);
    s.dropout_p = p; s.dropout_seed = 77 + ci; s.dropout_offset = 5 * ci;  // p = 0: none
    th_abufs b = th_abufs_make(&s);
    float *w = th_falloc(b.nq), *fq = th_falloc(b.nq), *fk = th_falloc(b.nk), *fv = th_falloc(b.nk);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, w, b.nq, 1.0f);
    memcpy(b.dout, w, b.nq * 4);  // dL/do = w
    run_flash(OT_F32, &b, &s);
    fd_ctx c = {&s, &b, w};
    for (size_t i = 0; i < b.nq; i++) fq[i] = (float)th_fd(b.q, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < b.nk; i++) fk[i] = (float)th_fd(b.k, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < b.nk; i++) fv[i] = (float)th_fd(b.v, i, 1e-2f, fd_loss, &c);
    th_check_nerr(b.dq, fq, b.nq, 1e-3, "%s flash bwd vs finite differences, case %zu, dropout %g: dq",
                  ot_isa_name(isa), ci, (double)p);
    th_check_nerr(b.dk, fk, b.nk, 1e-3, "%s flash bwd vs finite differences, case %zu, dropout %g: dk",
                  ot_isa_name(isa), ci, (double)p);
    th_check_nerr(b.dv, fv, b.nk, 1e-3, "%s flash bwd vs finite differences, case %zu, dropout %g: dv",
                  ot_isa_name(isa), ci, (double)p);
    th_abufs_free(&b); free(w); free(fq); free(fk); free(fv);
  }
}

// Same inputs and thread count: identical bits. Across thread counts o, lse,
// dk, dv are still bitwise identical (one owner per row, fixed order); dq sums
// per-thread partials, so only its rounding may change with the thread count.
static void test_determinism(ot_isa isa) {
  const fcase c = {1, 4, 2, 200, 200, 64, true, {-1}};
  int32_t kvl[3];
  ot_attn_shape s = shape_of(&c, kvl);
  th_abufs b = th_abufs_make(&s), b2 = th_abufs_make(&s), b3 = th_abufs_make(&s);
  th_rng r = {99};
  th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
  th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
  th_abufs *o2[2] = {&b2, &b3};
  for (int i = 0; i < 2; i++) {
    memcpy(o2[i]->q, b.q, b.nq * 4); memcpy(o2[i]->k, b.k, b.nk * 4);
    memcpy(o2[i]->v, b.v, b.nk * 4); memcpy(o2[i]->dout, b.dout, b.nq * 4);
  }
  int nt0 = ot_threads_get();
  static const int nts[] = {1, 2, 3};
  for (size_t t = 0; t < 3; t++) {
    ot_threads_set(nts[t]);
    dirty(&b2); dirty(&b3);
    run_flash(OT_F32, &b2, &s);
    run_flash(OT_F32, &b3, &s);
    th_check(!memcmp(b2.o, b3.o, b.nq * 4) && !memcmp(b2.lse, b3.lse, b.nl * 4) &&
             !memcmp(b2.dq, b3.dq, b.nq * 4) && !memcmp(b2.dk, b3.dk, b.nk * 4) &&
             !memcmp(b2.dv, b3.dv, b.nk * 4),
             "%s flash: two runs with %d threads give identical bits", ot_isa_name(isa), nts[t]);
    if (t == 0) {  // keep the 1-thread result
      memcpy(b.o, b2.o, b.nq * 4); memcpy(b.lse, b2.lse, b.nl * 4); memcpy(b.dq, b2.dq, b.nq * 4);
      memcpy(b.dk, b2.dk, b.nk * 4); memcpy(b.dv, b2.dv, b.nk * 4);
      continue;
    }
    th_check(!memcmp(b.o, b2.o, b.nq * 4) && !memcmp(b.lse, b2.lse, b.nl * 4) &&
             !memcmp(b.dk, b2.dk, b.nk * 4) && !memcmp(b.dv, b2.dv, b.nk * 4),
             "%s flash: o, lse, dk, dv bitwise equal with 1 and %d threads", ot_isa_name(isa), nts[t]);
    th_check_nerr(b2.dq, b.dq, b.nq, 1e-6, "%s flash: dq with %d threads vs 1", ot_isa_name(isa), nts[t]);
  }
  ot_threads_set(nt0);
  th_abufs_free(&b); th_abufs_free(&b2); th_abufs_free(&b3);
}

// Working memory: O(T * D), far below one T x T score matrix.
static void test_memory(void) {
  const fcase c = {1, 1, 1, 1024, 1024, 32, true, {-1}};
  int32_t kvl[3];
  ot_attn_shape s = shape_of(&c, kvl);
  th_abufs b = th_abufs_make(&s);
  th_rng r = {3};
  th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
  th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
  ot_scratch_release();
  ot_mem_reset_peak();
  size_t base = ot_mem_current(OT_MEM_WORKSPACE);
  ot_status st = run_flash(OT_F32, &b, &s);
  size_t peak = ot_mem_peak(OT_MEM_WORKSPACE) - base;
  size_t tt = sizeof(float) * (size_t)s.Tq * s.Tk;  // the score matrix: 4 MB
  th_check(st == OT_OK && peak > 0 && peak * 4 <= tt,
           "flash workspace %zu bytes <= 1/4 of one T x T matrix (%zu bytes)", peak, tt);
  ot_scratch_release();
  th_check(ot_mem_current(OT_MEM_WORKSPACE) == base, "flash workspace returns to %zu", base);
  th_abufs_free(&b);
}

static void test_errors(void) {
  float buf[4096] = {0}, lse[64] = {0};
  const float *x = buf;
  int32_t kvl[2] = {3, 9};
  ot_attn_shape ok = {2, 4, 2, 3, 4, 8, true, NULL, 0.0f}, s;
  th_check(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &ok) == OT_OK, "flash accepts a valid shape");
  s = ok; s.Hq = 3;
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL,
                 "ot_attn_flash_fwd: Hq=3 is not a multiple of Hkv=2", "flash Hq % Hkv");
  s = ok; s.kv_len = kvl;
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &s), OT_EINVAL,
                 "ot_attn_flash_bwd: kv_len[1]=9 is outside [0, Tk=4]", "flash kv_len > Tk");
  s = ok; s.D = 0;
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL, "D=0 must be > 0",
                 "flash D = 0");
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, NULL), OT_EINVAL,
                 "shape descriptor", "flash NULL shape");
  th_check_error(ot_attn_flash_fwd(OT_I8, buf, lse, x, x, x, &ok), OT_EINVAL, "dtype i8",
                 "flash i8 storage");
  th_check_error(ot_attn_flash_fwd(OT_F32, NULL, lse, x, x, x, &ok), OT_EINVAL, "'o'",
                 "flash o NULL");
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, NULL, x, &ok), OT_EINVAL, "'k'",
                 "flash k NULL");
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, buf, x, x, NULL, x, x, x, &ok), OT_EINVAL,
                 "'lse' is NULL", "flash bwd lse NULL");
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, NULL, x, x, lse, x, x, x, &ok), OT_EINVAL,
                 "'dv'", "flash bwd dv NULL");
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, buf, NULL, x, lse, x, x, x, &ok), OT_EINVAL,
                 "'dout'", "flash bwd dout NULL");
  s = ok; s.scale = -1.0f;
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &s), OT_EINVAL,
                 "scale=-1", "flash negative scale");
}

// ---- attention dropout ----
// Flash with dropout == the reference with the same (seed, offset; every third
// case with dropout_rows and counter strides): a wrong mask element would change
// o by a whole probability.
static void test_drop_vs_ref(ot_isa isa, ot_dtype dt) {
  const bool bf = dt != OT_F32;   // 16-bit storage (bf16, f16)
  const double tol = th_tol(dt, 2e-6, 1e-2);
  th_rng r = {4242};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    if (bf && (ci % 3) != 2) continue;  // bf16: a subset
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&cases[ci], kvl);
    s.dropout_p = ci % 2 ? 0.6f : 0.15f;
    s.dropout_seed = th_next(&r);
    s.dropout_offset = (th_next(&r) >> 20) + ci;  // not a multiple of 4 either
    const int64_t rows[3] = {7, 2, 0};   // every third case: a slice of a larger layout
    if (ci % 3 == 1) {
      s.dropout_rows = rows + 3 - s.B;
      s.dropout_si = (uint64_t)s.Tk + 5;
      s.dropout_sh = s.dropout_si * ((uint64_t)s.Tq + 2);
      s.dropout_sb = s.dropout_sh * ((uint64_t)s.Hq + 1);
    }
    th_abufs b = th_abufs_make(&s), w = th_abufs_make(&s), n = th_abufs_make(&s);
    th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
    th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
    if (bf) { th_round_dt(dt, b.q, b.nq); th_round_dt(dt, b.k, b.nk); th_round_dt(dt, b.v, b.nk);
              th_round_dt(dt, b.dout, b.nq); }
    poison_padding(b.k, &s); poison_padding(b.v, &s);
    ot_ref_attn_fwd(w.o, w.lse, b.q, b.k, b.v, &s);
    ot_ref_attn_bwd(w.dq, w.dk, w.dv, b.dout, b.q, b.k, b.v, &s);
    ot_attn_shape s0 = s;
    s0.dropout_p = 0.0f;
    ot_ref_attn_fwd(n.o, n.lse, b.q, b.k, b.v, &s0);
    dirty(&b);
    ot_status st = run_flash(dt, &b, &s);
    char ctx[200];
    snprintf(ctx, sizeof ctx, "%s %s flash dropout %g case %zu (B%d Hq%d Hkv%d Tq%d Tk%d D%d%s%s%s)",
             ot_isa_name(isa), ot_dtype_name(dt), (double)s.dropout_p, ci, s.B, s.Hq, s.Hkv,
             s.Tq, s.Tk, s.D, s.causal ? " causal" : "", s.kv_len ? " kv_len" : "",
             s.dropout_rows ? " rows + strides" : "");
    th_check(st == OT_OK, "%s: status %s (%s)", ctx, ot_status_name(st), ot_last_error());
    th_check(all_finite(b.o, b.nq) && all_finite(b.dq, b.nq) && all_finite(b.dk, b.nk) &&
             all_finite(b.dv, b.nk), "%s: outputs written and finite", ctx);
    th_check_nerr(b.o, w.o, b.nq, tol, "%s: o", ctx);
    check_lse(b.lse, w.lse, b.nl, th_tol(dt, 1e-6, 1e-2), ctx);
    check_lse(b.lse, n.lse, b.nl, th_tol(dt, 1e-6, 1e-2), ctx);  // lse: the undropped normalizer
    check_grad(b.dq, w.dq, b.nq, tol, ctx, "dq");
    check_grad(b.dk, w.dk, b.nk, tol, ctx, "dk");
    check_grad(b.dv, w.dv, b.nk, tol, ctx, "dv");
    if (s.Tk > 8) th_check(th_nerr(w.o, n.o, b.nq) > 0.05, "%s: dropout changes o", ctx);
    th_abufs_free(&b); th_abufs_free(&w); th_abufs_free(&n);
  }
}

// V = identity (Tk = D): o[b, h, i, j] = Z P[i, j] / (1 - p), so the nonzeros
// of o are the mask. It must be ot_dropout_keep at the counter offset +
// ((b*Hq + h)*Tq + i)*Tk + j on every visible (i, j), and keep ~(1 - p) of them.
static void test_drop_mask(ot_isa isa) {
  static const float ps[] = {0.1f, 0.5f, 0.9f};
  const int B = 2, Hq = 2, Tq = 70, Tk = 67;
  int32_t kvl[2] = {67, 50};
  for (int causal = 0; causal < 2; causal++)
    for (int pi = 0; pi < 3; pi++) {
      ot_attn_shape s = {B, Hq, 1, Tq, Tk, Tk, causal, kvl, 0.0f, ps[pi], 31337 + pi, 4099};
      th_abufs b = th_abufs_make(&s);
      th_rng r = {6};
      th_fill_normal(&r, b.q, b.nq, 0.1f); th_fill_normal(&r, b.k, b.nk, 0.1f);
      for (int bb = 0; bb < B; bb++)
        for (int j = 0; j < Tk; j++)
          for (int d = 0; d < Tk; d++) b.v[((size_t)bb * Tk + j) * Tk + d] = j == d ? 1.0f : 0.0f;
      ot_status st = ot_attn_flash_fwd(OT_F32, b.o, b.lse, b.q, b.k, b.v, &s);
      size_t vis = 0, kept = 0, bad = 0;
      for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < Hq; h++)
          for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) {
              const size_t row = ((size_t)bb * Hq + h) * Tq + i;
              const bool see = j < kvl[bb] && (!causal || j <= i + Tk - Tq);
              const bool keep = ot_dropout_keep(s.dropout_seed,
                                                s.dropout_offset + row * Tk + (size_t)j, s.dropout_p);
              const bool nz = b.o[row * Tk + (size_t)j] != 0.0f;
              bad += nz != (see && keep);
              vis += see;
              kept += see && nz;
            }
      const double q = 1.0 - (double)ot_dropout_threshold(s.dropout_p) / 4294967296.0;
      const double sig = sqrt((double)vis * q * (1 - q)), dev = fabs((double)kept - vis * q);
      th_check(st == OT_OK && bad == 0, "%s attention dropout %g%s: mask == ot_dropout_keep at "
               "its counter (%zu of %zu differ)", ot_isa_name(isa), (double)s.dropout_p,
               causal ? " causal" : "", bad, vis);
      th_check(dev <= 5 * sig, "%s attention dropout %g: kept %zu of %zu visible, expected %.0f "
               "+- %.0f (5 sigma)", ot_isa_name(isa), (double)s.dropout_p, kept, vis, vis * q,
               5 * sig);
      th_abufs_free(&b);
    }
}

// dropout_p = 0 with any seed / offset: bit-identical to a shape without dropout.
static void test_drop_p0(ot_isa isa) {
  static const int pick[] = {4, 7, 11, 13};
  th_rng r = {12};
  for (int pi = 0; pi < 4; pi++) {
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&cases[pick[pi]], kvl), s0 = s;
    s0.dropout_seed = 99; s0.dropout_offset = 12345;
    for (int bf = 0; bf < TH_NDT; bf++) {
      const ot_dtype dt = th_dts[bf];
      th_abufs a = th_abufs_make(&s), b = th_abufs_make(&s);
      th_fill_normal(&r, a.q, a.nq, 1.0f); th_fill_normal(&r, a.k, a.nk, 1.0f);
      th_fill_normal(&r, a.v, a.nk, 1.0f); th_fill_normal(&r, a.dout, a.nq, 1.0f);
      memcpy(b.q, a.q, a.nq * 4); memcpy(b.k, a.k, a.nk * 4);
      memcpy(b.v, a.v, a.nk * 4); memcpy(b.dout, a.dout, a.nq * 4);
      run_flash(dt, &a, &s);
      run_flash(dt, &b, &s0);
      th_check(!memcmp(a.o, b.o, a.nq * 4) && !memcmp(a.lse, b.lse, a.nl * 4) &&
               !memcmp(a.dq, b.dq, a.nq * 4) && !memcmp(a.dk, b.dk, a.nk * 4) &&
               !memcmp(a.dv, b.dv, a.nk * 4), "%s %s flash case %d: dropout_p = 0 is bit-identical "
               "to no dropout", ot_isa_name(isa), ot_dtype_name(dt), pick[pi]);
      th_abufs_free(&a); th_abufs_free(&b);
    }
  }
}

// With dropout, as without: o, lse, dk, dv bitwise equal for 1, 2, 3 threads,
// dq equal up to its documented rounding; repeated runs identical.
static void test_drop_determinism(ot_isa isa) {
  const fcase c = {2, 4, 2, 150, 170, 64, true, {-1}};
  int32_t kvl[3];
  ot_attn_shape s = shape_of(&c, kvl);
  s.dropout_p = 0.3f; s.dropout_seed = 2718; s.dropout_offset = 3;
  th_abufs b = th_abufs_make(&s), b2 = th_abufs_make(&s), b3 = th_abufs_make(&s);
  th_rng r = {98};
  th_fill_normal(&r, b.q, b.nq, 1.0f); th_fill_normal(&r, b.k, b.nk, 1.0f);
  th_fill_normal(&r, b.v, b.nk, 1.0f); th_fill_normal(&r, b.dout, b.nq, 1.0f);
  th_abufs *o2[2] = {&b2, &b3};
  for (int i = 0; i < 2; i++) {
    memcpy(o2[i]->q, b.q, b.nq * 4); memcpy(o2[i]->k, b.k, b.nk * 4);
    memcpy(o2[i]->v, b.v, b.nk * 4); memcpy(o2[i]->dout, b.dout, b.nq * 4);
  }
  const int nt0 = ot_threads_get();
  for (int nt = 1; nt <= 3; nt++) {
    ot_threads_set(nt);
    run_flash(OT_F32, &b2, &s);
    run_flash(OT_F32, &b3, &s);
    th_check(!memcmp(b2.o, b3.o, b.nq * 4) && !memcmp(b2.dq, b3.dq, b.nq * 4) &&
             !memcmp(b2.dk, b3.dk, b.nk * 4) && !memcmp(b2.dv, b3.dv, b.nk * 4),
             "%s flash dropout: two runs with %d threads give identical bits", ot_isa_name(isa), nt);
    if (nt == 1) {
      memcpy(b.o, b2.o, b.nq * 4); memcpy(b.lse, b2.lse, b.nl * 4); memcpy(b.dq, b2.dq, b.nq * 4);
      memcpy(b.dk, b2.dk, b.nk * 4); memcpy(b.dv, b2.dv, b.nk * 4);
      continue;
    }
    th_check(!memcmp(b.o, b2.o, b.nq * 4) && !memcmp(b.lse, b2.lse, b.nl * 4) &&
             !memcmp(b.dk, b2.dk, b.nk * 4) && !memcmp(b.dv, b2.dv, b.nk * 4),
             "%s flash dropout: o, lse, dk, dv bitwise equal with 1 and %d threads",
             ot_isa_name(isa), nt);
    th_check_nerr(b2.dq, b.dq, b.nq, 1e-6, "%s flash dropout: dq with %d threads vs 1",
                  ot_isa_name(isa), nt);
  }
  ot_threads_set(nt0);
  th_abufs_free(&b); th_abufs_free(&b2); th_abufs_free(&b3);
}

static void test_drop_errors(void) {
  float buf[4096] = {0}, lse[64] = {0}, att[512] = {0};
  const float *x = buf;
  ot_attn_shape ok = {2, 4, 2, 3, 4, 8, true, NULL, 0.0f, 0.1f, 1, 0}, s;
  th_check(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &ok) == OT_OK &&
           ot_attn_flash_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &ok) == OT_OK,
           "flash accepts dropout_p = 0.1");
  s = ok; s.dropout_p = 1.0f;
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL,
                 "ot_attn_flash_fwd: dropout_p=1 must be in [0, 1)", "flash dropout_p = 1");
  s = ok; s.dropout_p = NAN;
  th_check_error(ot_attn_flash_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &s), OT_EINVAL,
                 "dropout_p=nan", "flash dropout_p = NaN");
  s = ok; s.dropout_p = -0.5f;
  th_check_error(ot_attn_flash_fwd(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL, "dropout_p=-0.5",
                 "flash dropout_p < 0");
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, &ok), OT_EINVAL,
                 "ot_attn_mat_fwd: dropout_p=0.1 is not supported", "mat refuses dropout");
  th_check_error(ot_attn_mat_bwd(OT_F32, buf, buf, buf, att, x, att, x, x, x, &ok), OT_EINVAL,
                 "ot_attn_mat_bwd: dropout_p=0.1 is not supported", "mat bwd refuses dropout");
  th_check_error(ot_attn_decode(OT_F32, buf, lse, x, x, x, &ok), OT_EINVAL,
                 "ot_attn_decode: dropout_p=0.1 is not supported", "decode refuses dropout");
  s = ok; s.Tq = 4;
  const ot_attn_sparse_layout l = {2, 1, 0};
  th_check_error(ot_attn_sparse_fwd(OT_F32, buf, lse, x, x, x, &s, &l), OT_EINVAL,
                 "ot_attn_sparse_fwd: dropout_p=0.1 is not supported", "sparse refuses dropout");
  th_check_error(ot_attn_sparse_bwd(OT_F32, buf, buf, buf, x, x, lse, x, x, x, &s, &l), OT_EINVAL,
                 "ot_attn_sparse_bwd: dropout_p=0.1 is not supported", "sparse bwd refuses dropout");
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_vs_ref(isas[k], OT_F32);
    test_vs_ref(isas[k], OT_BF16);
    test_vs_ref(isas[k], OT_F16);
    test_fd(isas[k], 0.0f);
    test_determinism(isas[k]);
    test_drop_vs_ref(isas[k], OT_F32);
    test_drop_vs_ref(isas[k], OT_BF16);
    test_drop_vs_ref(isas[k], OT_F16);
    test_drop_mask(isas[k]);
    test_drop_p0(isas[k]);
    test_fd(isas[k], 0.3f);
    test_drop_determinism(isas[k]);
  }
  ot_isa_unforce();
  test_vs_mat();
  test_memory();
  test_errors();
  test_drop_errors();
  return th_finish();
}
