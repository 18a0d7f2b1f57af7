// Attention: materialized GEMM + softmax (ot_attn_mat_*) vs the scalar
// reference over shapes with T=1, Tq != Tk under the bottom-right causal mask,
// GQA/MQA, kv_len padding (padding filled with NaN: it must never be read),
// fully masked rows, D in {8, 32, 64, 65}, f32 and bf16 storage; finite
// differences of the reference backward; shape validation messages.
#include "harness.h"

typedef struct { int B, Hq, Hkv, Tq, Tk, D; bool causal; int kvl[3]; } acase;  // kvl[0] < 0: no kv_len
static const acase cases[] = {
    {1, 1, 1, 1, 1, 8, false, {-1}},
    {1, 1, 1, 1, 1, 8, true, {-1}},
    {2, 2, 2, 5, 5, 8, true, {-1}},
    {1, 4, 2, 7, 7, 32, true, {-1}},          // GQA
    {2, 4, 1, 3, 9, 64, true, {-1}},          // MQA, Tq < Tk (decode-like chunk)
    {1, 2, 2, 9, 4, 65, true, {-1}},          // Tq > Tk: the first 5 rows see nothing
    {2, 4, 2, 17, 17, 65, false, {17, 5}},    // padding
    {3, 2, 1, 6, 10, 32, true, {0, 3, 10}},   // a sequence with no key; rows masked by both
    {1, 3, 3, 33, 65, 64, false, {40}},
    {1, 2, 1, 1, 127, 8, true, {100}},        // one query, long padded cache
    {2, 2, 2, 64, 64, 64, true, {-1}},
    {1, 4, 4, 31, 31, 32, false, {-1}},       // explicit scale (below)
};

static ot_attn_shape shape_of(const acase *c, int32_t *kvl) {
  ot_attn_shape s = {c->B, c->Hq, c->Hkv, c->Tq, c->Tk, c->D, c->causal, NULL, 0.0f};
  if (c->kvl[0] >= 0) {
    for (int b = 0; b < c->B; b++) kvl[b] = c->kvl[b];
    s.kv_len = kvl;
  }
  if (c->Tq == 31) s.scale = 0.3f;
  return s;
}

static int visible(const ot_attn_shape *s, int b, int i) {
  long long lim = s->Tk;
  if (s->kv_len && s->kv_len[b] < lim) lim = s->kv_len[b];
  if (s->causal && (long long)i + s->Tk - s->Tq + 1 < lim) lim = (long long)i + s->Tk - s->Tq + 1;
  return lim < 0 ? 0 : (int)lim;
}

// NaN into every key/value row a query can never see (j >= kv_len[b]).
static void poison_padding(float *x, const ot_attn_shape *s) {
  if (!s->kv_len) return;
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->Hkv; h++)
      for (int j = s->kv_len[b]; j < s->Tk; j++)
        for (int d = 0; d < s->D; d++) x[(((size_t)b * s->Hkv + h) * s->Tk + j) * s->D + d] = NAN;
}

// att rows: masked entries exactly 0, visible ones sum to 1; rows seeing nothing all 0 with o = 0.
static bool att_ok(const float *att, const float *o, const ot_attn_shape *s) {
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->Hq; h++)
      for (int i = 0; i < s->Tq; i++) {
        size_t row = ((size_t)b * s->Hq + h) * s->Tq + i;
        const float *a = att + row * s->Tk;
        int lim = visible(s, b, i);
        double sum = 0;
        for (int j = 0; j < s->Tk; j++) {
          if (j >= lim && a[j] != 0.0f) return false;
          if (!(a[j] >= 0.0f)) return false;
          sum += a[j];
        }
        if (lim > 0 && fabs(sum - 1.0) > 1e-5) return false;
        if (lim == 0)
          for (int d = 0; d < s->D; d++) if (o[row * s->D + d] != 0.0f) return false;
      }
  return true;
}

static bool all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return false;
  return true;
}

static void test_mat_vs_ref(ot_isa isa, ot_dtype dt) {
  const bool bf = dt != OT_F32;   // 16-bit storage (bf16, f16)
  const double tol = th_tol(dt, 1e-5, 1e-2);
  th_rng r = {42};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&cases[ci], kvl);
    size_t nq = (size_t)s.B * s.Hq * s.Tq * s.D, nk = (size_t)s.B * s.Hkv * s.Tk * s.D;
    size_t na = (size_t)s.B * s.Hq * s.Tq * s.Tk;
    float *q = th_falloc(nq), *k = th_falloc(nk), *v = th_falloc(nk), *dout = th_falloc(nq);
    float *o = th_falloc(nq), *ore = th_falloc(nq), *att = th_falloc(na), *datt = th_falloc(na);
    float *dq = th_falloc(nq), *dk = th_falloc(nk), *dv = th_falloc(nk);
    float *dqr = th_falloc(nq), *dkr = th_falloc(nk), *dvr = th_falloc(nk);
    th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, k, nk, 1.0f);
    th_fill_normal(&r, v, nk, 1.0f); th_fill_normal(&r, dout, nq, 1.0f);
    if (bf) { th_round_dt(dt, q, nq); th_round_dt(dt, k, nk); th_round_dt(dt, v, nk); th_round_dt(dt, dout, nq); }
    poison_padding(k, &s); poison_padding(v, &s);
    for (size_t i = 0; i < na; i++) att[i] = datt[i] = NAN;  // outputs/scratch start dirty
    ot_ref_attn_fwd(ore, NULL, q, k, v, &s);
    ot_ref_attn_bwd(dqr, dkr, dvr, dout, q, k, v, &s);
    ot_status st1, st2;
    if (!bf) {
      st1 = ot_attn_mat_fwd(dt, o, att, q, k, v, &s);
      st2 = ot_attn_mat_bwd(dt, dq, dk, dv, datt, dout, att, q, k, v, &s);
    } else {
      void *qb = th_to_dt(dt, q, nq), *kb = th_to_dt(dt, k, nk), *vb = th_to_dt(dt, v, nk);
      void *db = th_to_dt(dt, dout, nq), *ob = th_to_dt(dt, o, nq);
      void *dqb = th_to_dt(dt, dq, nq), *dkb = th_to_dt(dt, dk, nk), *dvb = th_to_dt(dt, dv, nk);
      st1 = ot_attn_mat_fwd(dt, ob, att, qb, kb, vb, &s);
      st2 = ot_attn_mat_bwd(dt, dqb, dkb, dvb, datt, db, att, qb, kb, vb, &s);
      th_from_dt(dt, ob, o, nq); th_from_dt(dt, dqb, dq, nq);
      th_from_dt(dt, dkb, dk, nk); th_from_dt(dt, dvb, dv, nk);
      free(qb); free(kb); free(vb); free(db); free(ob); free(dqb); free(dkb); free(dvb);
    }
    char ctx[128];
    snprintf(ctx, sizeof ctx, "%s %s case %zu (B%d Hq%d Hkv%d Tq%d Tk%d D%d%s%s)", ot_isa_name(isa),
             ot_dtype_name(dt), ci, s.B, s.Hq, s.Hkv, s.Tq, s.Tk, s.D, s.causal ? " causal" : "",
             s.kv_len ? " kv_len" : "");
    th_check(st1 == OT_OK && st2 == OT_OK, "%s: status %d %d (%s)", ctx, st1, st2, ot_last_error());
    th_check(all_finite(ore, nq) && all_finite(dqr, nq) && all_finite(dkr, nk) && all_finite(dvr, nk),
             "%s: reference never reads padding", ctx);
    th_check(all_finite(o, nq) && all_finite(dq, nq) && all_finite(dk, nk) && all_finite(dv, nk),
             "%s: mat never reads padding (outputs finite)", ctx);
    th_check(att_ok(att, o, &s), "%s: att masked entries 0, rows sum to 1, empty rows give o=0", ctx);
    th_check_nerr(o, ore, nq, tol, "%s: o", ctx);
    th_check_nerr(dq, dqr, nq, tol, "%s: dq", ctx);
    th_check_nerr(dk, dkr, nk, tol, "%s: dk", ctx);
    th_check_nerr(dv, dvr, nk, tol, "%s: dv", ctx);
    if (!bf && ci == 3) {  // same inputs, same thread count: same bits
      float *o2 = th_falloc(nq), *dq2 = th_falloc(nq);
      ot_attn_mat_fwd(dt, o2, att, q, k, v, &s);
      ot_attn_mat_bwd(dt, dq2, dk, dv, datt, dout, att, q, k, v, &s);
      th_check(!memcmp(o, o2, nq * 4) && !memcmp(dq, dq2, nq * 4), "%s: repeatable bits", ctx);
      free(o2); free(dq2);
    }
    free(q); free(k); free(v); free(dout); free(o); free(ore); free(att); free(datt);
    free(dq); free(dk); free(dv); free(dqr); free(dkr); free(dvr);
  }
}

// ---- finite differences of the reference backward ----
typedef struct { const ot_attn_shape *s; float *q, *k, *v, *o, *w; size_t nq; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_ref_attn_fwd(c->o, NULL, c->q, c->k, c->v, c->s);
  return th_dot(c->o, c->w, c->nq);
}

static void test_ref_fd(void) {
  static const acase fcases[] = {
      {1, 2, 1, 3, 4, 5, true, {-1}},     // GQA, Tq < Tk causal
      {1, 1, 1, 3, 3, 4, false, {2}},     // padding
      {2, 2, 2, 3, 2, 3, true, {-1}},     // Tq > Tk: a masked row
      {1, 4, 2, 2, 3, 2, false, {-1}},
  };
  th_rng r = {5};
  for (size_t ci = 0; ci < sizeof fcases / sizeof fcases[0]; ci++) {
    int32_t kvl[3];
    ot_attn_shape s = shape_of(&fcases[ci], kvl);
    size_t nq = (size_t)s.B * s.Hq * s.Tq * s.D, nk = (size_t)s.B * s.Hkv * s.Tk * s.D;
    float *q = th_falloc(nq), *k = th_falloc(nk), *v = th_falloc(nk), *o = th_falloc(nq);
    float *w = th_falloc(nq), *dq = th_falloc(nq), *dk = th_falloc(nk), *dv = th_falloc(nk);
    float *fq = th_falloc(nq), *fk = th_falloc(nk), *fv = th_falloc(nk);
    th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, k, nk, 1.0f);
    th_fill_normal(&r, v, nk, 1.0f); th_fill_normal(&r, w, nq, 1.0f);
    fd_ctx c = {&s, q, k, v, o, w, nq};
    ot_ref_attn_bwd(dq, dk, dv, w, q, k, v, &s);  // dL/do = w
    for (size_t i = 0; i < nq; i++) fq[i] = (float)th_fd(q, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < nk; i++) fk[i] = (float)th_fd(k, i, 1e-2f, fd_loss, &c);
    for (size_t i = 0; i < nk; i++) fv[i] = (float)th_fd(v, i, 1e-2f, fd_loss, &c);
    th_check_nerr(dq, fq, nq, 3e-4, "ref attn bwd vs finite differences, case %zu: dq", ci);
    th_check_nerr(dk, fk, nk, 3e-4, "ref attn bwd vs finite differences, case %zu: dk", ci);
    th_check_nerr(dv, fv, nk, 3e-4, "ref attn bwd vs finite differences, case %zu: dv", ci);
    free(q); free(k); free(v); free(o); free(w); free(dq); free(dk); free(dv);
    free(fq); free(fk); free(fv);
  }
}

// lse of the reference against a direct log-sum-exp; -inf for rows that see nothing.
static void test_ref_lse(void) {
  const acase c = {2, 2, 1, 4, 3, 8, true, {3, 1}};
  int32_t kvl[3];
  ot_attn_shape s = shape_of(&c, kvl);
  size_t nq = (size_t)s.B * s.Hq * s.Tq * s.D, nk = (size_t)s.B * s.Hkv * s.Tk * s.D;
  th_rng r = {77};
  float *q = th_falloc(nq), *k = th_falloc(nk), *v = th_falloc(nk), *o = th_falloc(nq);
  float *lse = th_falloc((size_t)s.B * s.Hq * s.Tq);
  th_fill_normal(&r, q, nq, 1.0f); th_fill_normal(&r, k, nk, 1.0f); th_fill_normal(&r, v, nk, 1.0f);
  ot_ref_attn_fwd(o, lse, q, k, v, &s);
  bool ok = true;
  double sc = 1.0 / sqrt(8.0);
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.Hq; h++)
      for (int i = 0; i < s.Tq; i++) {
        size_t row = ((size_t)b * s.Hq + h) * s.Tq + i;
        int lim = visible(&s, b, i);
        double acc = 0;
        for (int j = 0; j < lim; j++)
          acc += exp(sc * th_dot(q + row * 8, k + ((size_t)b * s.Tk + j) * 8, 8));
        if (lim == 0) ok &= isinf(lse[row]) && lse[row] < 0;
        else ok &= fabs(lse[row] - log(acc)) < 1e-5;
      }
  th_check(ok, "ref attn lse = log sum exp of visible scores, -inf when none");
  free(q); free(k); free(v); free(o); free(lse);
}

static void test_errors(void) {
  float buf[4096] = {0}, att[4096];
  const float *x = buf;
  int32_t kvl[2] = {3, 5};
  ot_attn_shape ok = {2, 4, 2, 3, 4, 8, true, NULL, 0.0f}, s;
  th_check(ot_attn_shape_check(&ok, "t") == OT_OK, "attn shape check accepts a valid shape");
  s = ok; s.Hq = 3;
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, &s), OT_EINVAL,
                 "ot_attn_mat_fwd: Hq=3 is not a multiple of Hkv=2", "attn Hq % Hkv != 0");
  s = ok; s.kv_len = kvl;
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, &s), OT_EINVAL,
                 "kv_len[1]=5 is outside [0, Tk=4]", "attn kv_len > Tk");
  kvl[1] = -1;
  th_check_error(ot_attn_shape_check(&s, "myfn"), OT_EINVAL, "myfn: kv_len[1]=-1", "attn kv_len < 0");
  s = ok; s.D = 0;
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, &s), OT_EINVAL, "D=0 must be > 0",
                 "attn D = 0");
  s = ok; s.Tk = -2;
  th_check_error(ot_attn_mat_bwd(OT_F32, buf, buf, buf, att, x, att, x, x, x, &s), OT_EINVAL,
                 "ot_attn_mat_bwd: Tk=-2", "attn bwd Tk < 0");
  s = ok; s.scale = NAN;
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, &s), OT_EINVAL, "scale=", "attn scale NaN");
  s = ok; s.B = 100000; s.Hq = 4096; s.Tq = 65536; s.Tk = 65536;
  th_check_error(ot_attn_shape_check(&s, "t"), OT_EINVAL, "too large", "attn huge shape");
  th_check_error(ot_attn_mat_fwd(OT_F32, buf, att, x, x, x, NULL), OT_EINVAL, "shape descriptor",
                 "attn NULL shape");
  th_check_error(ot_attn_mat_fwd(OT_I8, buf, att, x, x, x, &ok), OT_EINVAL, "dtype i8",
                 "attn i8 storage");
  th_check_error(ot_attn_mat_fwd(OT_F32, NULL, att, x, x, x, &ok), OT_EINVAL, "'o'", "attn o NULL");
  th_check_error(ot_attn_mat_bwd(OT_F32, buf, buf, buf, NULL, x, att, x, x, x, &ok), OT_EINVAL,
                 "'datt'", "attn bwd datt NULL");
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_mat_vs_ref(isas[k], OT_F32);
    test_mat_vs_ref(isas[k], OT_BF16);
    test_mat_vs_ref(isas[k], OT_F16);
  }
  ot_isa_unforce();
  test_ref_fd();
  test_ref_lse();
  test_errors();
  return th_finish();
}
