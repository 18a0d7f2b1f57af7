// Decode attention (ot_attn_decode) vs the last rows of full causal attention
// (flash and the scalar reference), every ISA: one and a few query rows,
// caches of several chunks with per-sequence fill (padding holds NaN: never
// read), a sequence shorter than Tq (rows that see nothing) and an empty one,
// GQA/MQA with more group rows than one tile, D in {32, 64, 80, 256} and odd,
// bidirectional rows; bf16; equality with flash when kv_len is NULL;
// results independent of the thread count; argument validation.
#include "harness.h"

typedef struct { int B, Hq, Hkv, Tq, S, D; bool causal; int len[3]; } dcase;  // len[0] < 0: full
static const dcase cases[] = {
    {1, 1, 1, 1, 1, 32, true, {-1}},
    {2, 4, 2, 1, 600, 64, true, {600, 333}},      // 3 chunks, uneven fill
    {1, 8, 1, 9, 300, 64, true, {290}},           // MQA: 72 group rows (2 tiles)
    {3, 2, 2, 4, 520, 80, true, {3, 0, 517}},     // fill < Tq, empty sequence
    {1, 4, 2, 3, 257, 256, false, {257}},         // bidirectional rows
    {2, 2, 1, 2, 100, 33, true, {-1}},            // odd D, full caches
};

static bool all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return false;
  return true;
}

// Full attention for sequence b: queries [1, Hq, L, D] whose last Tq rows are
// the decode rows, keys [1, Hkv, L, D] = the cache's first L rows; returns in
// o_last [Hq, Tq, D] and lse_last [Hq, Tq] the last Tq rows (rows before the
// sequence start, when L < Tq, are o = 0, lse = -inf). use_ref: scalar
// reference, else flash.
static void full_last_rows(float *o_last, float *lse_last, const float *q, const float *kc,
                           const float *vc, const dcase *c, int b, int L, bool use_ref, th_rng *r) {
  const int D = c->D, Tq = c->Tq, Tf = L > Tq ? L : Tq;  // rows of the full problem
  const int kv = L > 0 ? L : 1;
  float *qf = th_falloc((size_t)c->Hq * Tf * D), *kf = th_falloc((size_t)c->Hkv * kv * D);
  float *vf = th_falloc((size_t)c->Hkv * kv * D), *of = th_falloc((size_t)c->Hq * Tf * D);
  float *lf = th_falloc((size_t)c->Hq * Tf);
  th_fill_normal(r, qf, (size_t)c->Hq * Tf * D, 1.0f);  // earlier rows: anything
  for (int h = 0; h < c->Hq; h++)
    memcpy(qf + ((size_t)h * Tf + Tf - Tq) * D, q + (((size_t)b * c->Hq + h) * Tq) * D,
           sizeof(float) * (size_t)Tq * D);
  for (int h = 0; h < c->Hkv; h++) {
    memcpy(kf + (size_t)h * kv * D, kc + ((size_t)b * c->Hkv + h) * c->S * D, sizeof(float) * (size_t)L * D);
    memcpy(vf + (size_t)h * kv * D, vc + ((size_t)b * c->Hkv + h) * c->S * D, sizeof(float) * (size_t)L * D);
  }
  if (L == 0) {  // nothing to attend: the contract's empty rows
    for (size_t i = 0; i < (size_t)c->Hq * Tq * D; i++) o_last[i] = 0.0f;
    for (size_t i = 0; i < (size_t)c->Hq * Tq; i++) lse_last[i] = -INFINITY;
  } else {
    // query row t of the full problem sits at position t - (Tf - L) (Tf > L: leading rows see nothing)
    ot_attn_shape s = {1, c->Hq, c->Hkv, Tf, L, D, c->causal, NULL, 0.0f};
    if (use_ref) ot_ref_attn_fwd(of, lf, qf, kf, vf, &s);
    else ot_attn_flash_fwd(OT_F32, of, lf, qf, kf, vf, &s);
    for (int h = 0; h < c->Hq; h++) {
      memcpy(o_last + (size_t)h * Tq * D, of + ((size_t)h * Tf + Tf - Tq) * D, sizeof(float) * (size_t)Tq * D);
      memcpy(lse_last + (size_t)h * Tq, lf + (size_t)h * Tf + Tf - Tq, sizeof(float) * (size_t)Tq);
    }
  }
  free(qf); free(kf); free(vf); free(of); free(lf);
}

static void test_vs_full(ot_isa isa, ot_dtype dt) {
  const bool bf = dt != OT_F32;   // 16-bit storage (bf16, f16)
  th_rng r = {555};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    if (bf && ci % 2 == 0) continue;
    const dcase *c = &cases[ci];
    int32_t len[3];
    ot_attn_shape s = {c->B, c->Hq, c->Hkv, c->Tq, c->S, c->D, c->causal, NULL, 0.0f};
    if (c->len[0] >= 0) { for (int b = 0; b < c->B; b++) len[b] = c->len[b]; s.kv_len = len; }
    const size_t nq = (size_t)c->B * c->Hq * c->Tq * c->D, nk = (size_t)c->B * c->Hkv * c->S * c->D;
    const size_t nl = (size_t)c->B * c->Hq * c->Tq;
    float *q = th_falloc(nq), *kc = th_falloc(nk), *vc = th_falloc(nk), *o = th_falloc(nq);
    float *lse = th_falloc(nl);
    th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, kc, nk, 1.0f); th_fill_normal(&r, vc, nk, 1.0f);
    if (bf) { th_round_dt(dt, q, nq); th_round_dt(dt, kc, nk); th_round_dt(dt, vc, nk); }
    for (int b = 0; b < c->B; b++)  // unused cache rows: NaN
      for (int h = 0; h < c->Hkv; h++)
        for (int j = s.kv_len ? len[b] : c->S; j < c->S; j++)
          for (int d = 0; d < c->D; d++) kc[(((size_t)b * c->Hkv + h) * c->S + j) * c->D + d] =
                                             vc[(((size_t)b * c->Hkv + h) * c->S + j) * c->D + d] = NAN;
    for (size_t i = 0; i < nq; i++) o[i] = NAN;
    ot_status st;
    if (!bf) st = ot_attn_decode(dt, o, lse, q, kc, vc, &s);
    else {
      void *qb = th_to_dt(dt, q, nq), *kb = th_to_dt(dt, kc, nk), *vb = th_to_dt(dt, vc, nk);
      uint16_t *ob = th_alloc(nq * 2);
      st = ot_attn_decode(dt, ob, lse, qb, kb, vb, &s);
      th_from_dt(dt, ob, o, nq);
      free(qb); free(kb); free(vb); free(ob);
    }
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s %s decode case %zu (B%d Hq%d Hkv%d Tq%d S%d D%d%s)", ot_isa_name(isa),
             ot_dtype_name(dt), ci, c->B, c->Hq, c->Hkv, c->Tq, c->S, c->D, c->causal ? " causal" : "");
    th_check(st == OT_OK, "%s: status %s (%s)", ctx, ot_status_name(st), ot_last_error());
    th_check(all_finite(o, nq), "%s: outputs written, cache padding never read", ctx);
    float *orf = th_falloc(nq), *lrf = th_falloc(nl), *ofl = th_falloc(nq), *lfl = th_falloc(nl);
    const size_t per = (size_t)c->Hq * c->Tq;
    for (int b = 0; b < c->B; b++) {
      int L = s.kv_len ? len[b] : c->S;
      full_last_rows(orf + b * per * c->D, lrf + b * per, q, kc, vc, c, b, L, true, &r);
      full_last_rows(ofl + b * per * c->D, lfl + b * per, q, kc, vc, c, b, L, false, &r);
    }
    th_check_nerr(o, orf, nq, th_tol(dt, 1e-6, 1e-2), "%s: o vs reference", ctx);
    if (!bf) th_check_nerr(o, ofl, nq, 1e-6, "%s: o vs last rows of full flash attention", ctx);
    bool lok = true;
    for (size_t i = 0; i < nl; i++)
      lok &= isinf(lrf[i]) ? (isinf(lse[i]) && lse[i] < 0)
                           : fabs(lse[i] - lrf[i]) <= (th_tol(dt, 2e-6, 2e-2)) * (1 + fabs(lrf[i]));
    th_check(lok, "%s: lse (-inf exactly where nothing is seen)", ctx);
    free(q); free(kc); free(vc); free(o); free(lse); free(orf); free(lrf); free(ofl); free(lfl);
  }
}

// kv_len = NULL: decode is exactly the flash forward's contract.
static void test_vs_flash(void) {
  ot_attn_shape s = {2, 4, 2, 5, 700, 64, true, NULL, 0.0f};
  size_t nq = (size_t)2 * 4 * 5 * 64, nk = (size_t)2 * 2 * 700 * 64;
  th_rng r = {6};
  float *q = th_falloc(nq), *k = th_falloc(nk), *v = th_falloc(nk), *o = th_falloc(nq), *of = th_falloc(nq);
  float *l = th_falloc(40), *lf = th_falloc(40);
  th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, k, nk, 1.0f); th_fill_normal(&r, v, nk, 1.0f);
  ot_status a = ot_attn_decode(OT_F32, o, l, q, k, v, &s);
  ot_status b = ot_attn_flash_fwd(OT_F32, of, lf, q, k, v, &s);
  th_check(a == OT_OK && b == OT_OK, "decode vs flash status");
  th_check_nerr(o, of, nq, 1e-6, "decode == flash forward when kv_len is NULL: o");
  th_check_nerr(l, lf, 40, 1e-6, "decode == flash forward when kv_len is NULL: lse");
  // thread count never changes a bit (fixed chunks, merged in order)
  int nt0 = ot_threads_get();
  static const int nts[] = {1, 3, 2};
  for (int t = 0; t < 3; t++) {
    ot_threads_set(nts[t]);
    float *o2 = th_falloc(nq), *l2 = th_falloc(40);
    ot_attn_decode(OT_F32, o2, l2, q, k, v, &s);
    th_check(!memcmp(o, o2, nq * 4) && !memcmp(l, l2, 40 * 4),
             "decode: bitwise identical with %d threads", nts[t]);
    free(o2); free(l2);
  }
  ot_threads_set(nt0);
  free(q); free(k); free(v); free(o); free(of); free(l); free(lf);
}

static void test_errors(void) {
  float buf[4096] = {0}, lse[64];
  const float *x = buf;
  int32_t len[2] = {3, 9};
  ot_attn_shape ok = {2, 4, 2, 1, 8, 8, true, NULL, 0.0f}, s;
  th_check(ot_attn_decode(OT_F32, buf, lse, x, x, x, &ok) == OT_OK, "decode accepts a valid shape");
  s = ok; s.kv_len = len;
  th_check_error(ot_attn_decode(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL,
                 "ot_attn_decode: kv_len[1]=9 is outside [0, Tk=8]", "decode kv_len > S");
  s = ok; s.Hkv = 3;
  th_check_error(ot_attn_decode(OT_F32, buf, lse, x, x, x, &s), OT_EINVAL,
                 "Hq=4 is not a multiple of Hkv=3", "decode Hq % Hkv");
  th_check_error(ot_attn_decode(OT_F32, buf, lse, x, NULL, x, &ok), OT_EINVAL, "'kc'", "decode kc NULL");
  th_check_error(ot_attn_decode(OT_I8, buf, lse, x, x, x, &ok), OT_EINVAL, "dtype i8", "decode i8");
  th_check_error(ot_attn_decode(OT_F32, buf, lse, x, x, x, NULL), OT_EINVAL, "shape descriptor",
                 "decode NULL shape");
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_vs_full(isas[k], OT_F32);
    test_vs_full(isas[k], OT_BF16);
    test_vs_full(isas[k], OT_F16);
  }
  ot_isa_unforce();
  test_vs_flash();
  test_errors();
  return th_finish();
}
