// Attention dropout on slices of a larger attention (ot_attn_shape's dropout_rows
// and counter strides, attn.h): the masks do not depend on the layout. (1) The
// query heads split in two halves (a tensor-parallel split: heads h0.. with the
// offset advanced by h0 * sh) give the whole call's o, lse, dk, dv bit for bit
// and its dq up to rounding; (2) a sample processed with others, alone, or at
// another padded length (counters at fixed strides of the largest length P, its
// row r(b) its index in a global batch) gets the same output and gradients on its
// valid rows. A wrong mask element would change a value by a whole probability.
#include "attn_bufs.h"

static ot_status ab_run(th_abufs *b, const ot_attn_shape *s) {
  OT_TRY(ot_attn_flash_fwd(OT_F32, b->o, b->lse, b->q, b->k, b->v, s));
  return ot_attn_flash_bwd(OT_F32, b->dq, b->dk, b->dv, b->dout, b->o, b->lse, b->q, b->k, b->v, s);
}

// Heads [h0, h0 + n) of x [B, H, T, D] -> y [B, n, T, D] (dir 0), or back (dir 1).
static void heads(float *y, float *x, int B, int H, int h0, int n, int T, int D, int dir) {
  const size_t hs = (size_t)T * D;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < n; h++) {
      float *a = y + ((size_t)b * n + h) * hs, *c = x + ((size_t)b * H + h0 + h) * hs;
      if (dir == 0) memcpy(a, c, hs * 4); else memcpy(c, a, hs * 4);
    }
}

static void test_heads(void) {
  const int B = 2, Hq = 4, Hkv = 2, T = 37, D = 32;
  int32_t kvl[2] = {37, 30};
  const uint64_t sh = (uint64_t)T * T, sb = (uint64_t)Hq * sh, off = 1001;
  for (int causal = 0; causal < 2; causal++) {
    ot_attn_shape s = {B, Hq, Hkv, T, T, D, causal, kvl, 0.0f, 0.3f, 424242, off, NULL, sb, sh, T};
    th_abufs w = th_abufs_make(&s), p = th_abufs_make(&s);
    th_rng r = {5};
    th_fill_normal(&r, w.q, w.nq, 1.0f); th_fill_normal(&r, w.k, w.nk, 1.0f);
    th_fill_normal(&r, w.v, w.nk, 1.0f); th_fill_normal(&r, w.dout, w.nq, 1.0f);
    ot_status st = ab_run(&w, &s);
    for (int half = 0; half < 2; half++) {   // rank `half` of two: Hq / 2 query, Hkv / 2 kv heads
      ot_attn_shape h = s;
      h.Hq = Hq / 2; h.Hkv = Hkv / 2;
      h.dropout_offset = off + (uint64_t)(half * Hq / 2) * sh;
      th_abufs b = th_abufs_make(&h);
      heads(b.q, w.q, B, Hq, half * Hq / 2, Hq / 2, T, D, 0);
      heads(b.dout, w.dout, B, Hq, half * Hq / 2, Hq / 2, T, D, 0);
      heads(b.k, w.k, B, Hkv, half * Hkv / 2, Hkv / 2, T, D, 0);
      heads(b.v, w.v, B, Hkv, half * Hkv / 2, Hkv / 2, T, D, 0);
      st |= ab_run(&b, &h);
      heads(b.o, p.o, B, Hq, half * Hq / 2, Hq / 2, T, D, 1);
      heads(b.dq, p.dq, B, Hq, half * Hq / 2, Hq / 2, T, D, 1);
      heads(b.dk, p.dk, B, Hkv, half * Hkv / 2, Hkv / 2, T, D, 1);
      heads(b.dv, p.dv, B, Hkv, half * Hkv / 2, Hkv / 2, T, D, 1);
      heads(b.lse, p.lse, B, Hq, half * Hq / 2, Hq / 2, T, 1, 1);
      th_abufs_free(&b);
    }
    th_check(st == OT_OK, "attention dropout heads split: status (%s)", ot_last_error());
    th_check(!memcmp(w.o, p.o, w.nq * 4) && !memcmp(w.lse, p.lse, w.nl * 4) &&
             !memcmp(w.dk, p.dk, w.nk * 4) && !memcmp(w.dv, p.dv, w.nk * 4),
             "attention dropout%s: two halves of the heads give all heads' o, lse, dk, dv bit for "
             "bit", causal ? " causal" : "");
    th_check_nerr(p.dq, w.dq, w.nq, 1e-6, "attention dropout%s: two halves of the heads: dq",
                  causal ? " causal" : "");
    th_abufs_free(&w); th_abufs_free(&p);
  }
}

// Sample `sel` of the lengths L[] (keys and queries < L valid) in a batch `rows` padded to
// T, its inputs x0 [P, D] per head (positions < P) -> valid rows of o, dq, dk, dv [Hq, L, D].
typedef struct { float *o, *dq, *dk, *dv; } srows;

static srows run_padded(int nb, const int64_t *rows, const int *L, int T, int P, int Hq, int D,
                        int causal, int Tq_extra, const float *x0, int sel, ot_status *st) {
  int32_t kvl[4];
  for (int b = 0; b < nb; b++) kvl[b] = L[rows[b]];
  const int Tq = causal ? T : T + Tq_extra;   // cross-attention: queries of another length
  const uint64_t si = (uint64_t)P, sh = (uint64_t)P * P, sb = (uint64_t)Hq * sh;
  ot_attn_shape s = {nb, Hq, Hq, Tq, T, D, causal, kvl, 0.0f, 0.25f, 77, 13, rows, sb, sh, si};
  th_abufs b = th_abufs_make(&s);
  // every (sample, head, position) has its own inputs, whatever the padding
  for (int a = 0; a < nb; a++)
    for (int h = 0; h < Hq; h++) {
      const float *src = x0 + ((size_t)rows[a] * Hq + h) * 4 * P * D;
      for (int i = 0; i < Tq; i++) {
        const size_t e = (((size_t)a * Hq + h) * Tq + i) * D;
        memcpy(b.q + e, src + (size_t)i * D, (size_t)D * 4);
        if (i < L[rows[a]]) memcpy(b.dout + e, src + (size_t)(P + i) * D, (size_t)D * 4);
      }
      for (int j = 0; j < T; j++) {
        const size_t e = (((size_t)a * Hq + h) * T + j) * D;
        memcpy(b.k + e, src + (size_t)(2 * P + j) * D, (size_t)D * 4);
        memcpy(b.v + e, src + (size_t)(3 * P + j) * D, (size_t)D * 4);
      }
    }
  *st |= ab_run(&b, &s);
  const int Ls = L[rows[sel]];
  srows o = {th_falloc((size_t)Hq * Ls * D), th_falloc((size_t)Hq * Ls * D),
             th_falloc((size_t)Hq * Ls * D), th_falloc((size_t)Hq * Ls * D)};
  for (int h = 0; h < Hq; h++)
    for (int i = 0; i < Ls; i++) {
      const size_t d = ((size_t)h * Ls + i) * D;
      const size_t eq = (((size_t)sel * Hq + h) * Tq + i) * D, ek = (((size_t)sel * Hq + h) * T + i) * D;
      memcpy(o.o + d, b.o + eq, (size_t)D * 4); memcpy(o.dq + d, b.dq + eq, (size_t)D * 4);
      memcpy(o.dk + d, b.dk + ek, (size_t)D * 4); memcpy(o.dv + d, b.dv + ek, (size_t)D * 4);
    }
  th_abufs_free(&b);
  return o;
}

static void test_samples(void) {
  const int P = 24, Hq = 2, D = 16, L[4] = {5, 17, 9, 12};
  float *x0 = th_falloc((size_t)4 * Hq * 4 * P * D);
  th_rng r = {8};
  th_fill_normal(&r, x0, (size_t)4 * Hq * 4 * P * D, 1.0f);
  for (int causal = 0; causal < 2; causal++) {
    ot_status st = OT_OK;
    const int64_t all[4] = {0, 1, 2, 3}, some[2] = {3, 2}, alone[1] = {2};
    const size_t n = (size_t)Hq * L[2] * D;
    srows w = run_padded(4, all, L, 17, P, Hq, D, causal, 3, x0, 2, &st);   // sample 2 of the batch
    srows a = run_padded(2, some, L, 12, P, Hq, D, causal, 0, x0, 1, &st);  // with one other, less padding
    srows b = run_padded(1, alone, L, 9, P, Hq, D, causal, 5, x0, 0, &st);  // alone, unpadded
    th_check(st == OT_OK, "attention dropout samples: status (%s)", ot_last_error());
    const srows *v[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
      const char *how = k ? "alone" : "in another batch and padding";
      const char *kind = causal ? "self (causal)" : "cross";
      th_check_nerr(v[k]->o, w.o, n, 1e-5, "attention dropout %s: a sample %s: o", kind, how);
      th_check_nerr(v[k]->dq, w.dq, n, 1e-5, "attention dropout %s: a sample %s: dq", kind, how);
      th_check_nerr(v[k]->dk, w.dk, n, 1e-5, "attention dropout %s: a sample %s: dk", kind, how);
      th_check_nerr(v[k]->dv, w.dv, n, 1e-5, "attention dropout %s: a sample %s: dv", kind, how);
    }
    srows *all3[3] = {&w, &a, &b};
    for (int k = 0; k < 3; k++) { free(all3[k]->o); free(all3[k]->dq); free(all3[k]->dk); free(all3[k]->dv); }
  }
  free(x0);
}

static void test_errors(void) {
  float x[64] = {0}, lse[4];
  ot_attn_shape s = {1, 1, 1, 4, 4, 4, false, NULL, 0.0f, 0.2f, 1, 0, NULL, 0, 0, 3};
  th_check_error(ot_attn_flash_fwd(OT_F32, x, lse, x, x, x, &s), OT_EINVAL,
                 "dropout counter strides", "attention dropout overlapping strides");
  const int64_t neg[1] = {-1};
  ot_attn_shape t = {1, 1, 1, 4, 4, 4, false, NULL, 0.0f, 0.2f, 1, 0, neg, 0, 0, 0};
  th_check_error(ot_attn_flash_fwd(OT_F32, x, lse, x, x, x, &t), OT_EINVAL,
                 "dropout_rows[0]=-1 must be >= 0", "attention dropout negative row");
}

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_heads();
    test_samples();
  }
  ot_isa_unforce();
  test_errors();
  return th_finish();
}
