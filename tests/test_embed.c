// Token + position embedding: fast kernels (every ISA, f32 and bf16, with and
// without wpe) against the reference, backward accumulation (+=) against the
// reference, finite differences of the reference backward, determinism over
// thread counts, token validation (first bad index, value, V; nothing written);
// f32 tables with bf16 rows (ot_embed_fwd_w): the f32 sum rounded once.
#include "harness.h"

static th_rng g_rng = {0x5eed0002};

static void fill_tokens(int32_t *t, size_t n, int V) {
  for (size_t i = 0; i < n; i++) t[i] = (int32_t)(th_next(&g_rng) % (uint64_t)V);
}

// Fast forward with storage dt on f32 values (converted for bf16 / f16).
static ot_status fast_fwd(ot_dtype dt, float *out, const int32_t *tok, const float *wte,
                          const float *wpe, int B, int T, int C, int V, int Tpos) {
  size_t n = (size_t)B * T * C;
  if (dt == OT_F32) return ot_embed_fwd(dt, out, tok, wte, wpe, B, T, C, V);
  void *ob = th_to_dt(dt, out, n), *wb = th_to_dt(dt, wte, (size_t)V * C);
  void *pb = wpe ? th_to_dt(dt, wpe, (size_t)Tpos * C) : NULL;
  ot_status s = ot_embed_fwd(dt, ob, tok, wb, pb, B, T, C, V);
  th_from_dt(dt, ob, out, n);
  free(ob); free(wb); free(pb);
  return s;
}

static ot_status fast_bwd(ot_dtype dt, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tok, int B, int T, int C, int V) {
  if (dt == OT_F32) return ot_embed_bwd(dt, dwte, dwpe, dout, tok, B, T, C, V);
  void *db = th_to_dt(dt, dout, (size_t)B * T * C);
  ot_status s = ot_embed_bwd(dt, dwte, dwpe, db, tok, B, T, C, V);
  free(db);
  return s;
}

typedef struct { int B, T, C, V; } eshape;

static void test_vs_ref(void) {
  static const eshape sh[] = {{1, 1, 1, 1},   {2, 3, 3, 5},   {2, 17, 17, 7},  {3, 5, 65, 100},
                              {1, 9, 769, 50}, {2, 8, 128, 3}, {1, 127, 20, 1000}};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
      eshape s = sh[k];
      int Tpos = s.T + 2;
      size_t n = (size_t)s.B * s.T * s.C, nw = (size_t)s.V * s.C, np = (size_t)Tpos * s.C;
      int32_t *tok = th_alloc((size_t)s.B * s.T * 4);
      float *wte = th_falloc(nw), *wpe = th_falloc(np), *out = th_falloc(n), *want = th_falloc(n);
      float *dout = th_falloc(n), *dwte = th_falloc(nw), *dwpe = th_falloc(np);
      float *rwte = th_falloc(nw), *rwpe = th_falloc(np);
      for (int di = 0; di < TH_NDT; di++) {
        ot_dtype dt = th_dts[di];
        double tol = th_tol(dt, 1e-7, 1e-2);
        fill_tokens(tok, (size_t)s.B * s.T, s.V);
        th_fill(&g_rng, wte, nw, -1.0f, 1.0f);
        th_fill(&g_rng, wpe, np, -1.0f, 1.0f);
        th_fill(&g_rng, dout, n, -1.0f, 1.0f);
        th_round_dt(dt, wte, nw); th_round_dt(dt, wpe, np); th_round_dt(dt, dout, n);
        for (int usepos = 0; usepos < 2; usepos++) {
          const float *p = usepos ? wpe : NULL;
          th_check(fast_fwd(dt, out, tok, wte, p, s.B, s.T, s.C, s.V, Tpos) == OT_OK,
                   "embed_fwd status %s", ot_last_error());
          ot_ref_embed_fwd(want, tok, wte, p, s.B, s.T, s.C);
          th_check_nerr(out, want, n, tol, "embed_fwd %s %s wpe=%d B=%d T=%d C=%d V=%d",
                        ot_dtype_name(dt), ot_isa_name(isas[ii]), usepos, s.B, s.T, s.C, s.V);
          // backward accumulates into non-zero gradients (+=); f32 gradients
          // are exact sums in token order, so the tolerance is tiny for bf16 too
          th_fill(&g_rng, dwte, nw, -1.0f, 1.0f);
          th_fill(&g_rng, dwpe, np, -1.0f, 1.0f);
          memcpy(rwte, dwte, nw * 4);
          memcpy(rwpe, dwpe, np * 4);
          th_check(fast_bwd(dt, dwte, usepos ? dwpe : NULL, dout, tok, s.B, s.T, s.C, s.V) == OT_OK,
                   "embed_bwd status %s", ot_last_error());
          ot_ref_embed_bwd(rwte, usepos ? rwpe : NULL, dout, tok, s.B, s.T, s.C);
          th_check_nerr(dwte, rwte, nw, 1e-7, "embed_bwd dwte %s %s wpe=%d B=%d T=%d C=%d V=%d",
                        ot_dtype_name(dt), ot_isa_name(isas[ii]), usepos, s.B, s.T, s.C, s.V);
          th_check_nerr(dwpe, rwpe, np, 1e-7, "embed_bwd dwpe %s %s wpe=%d B=%d T=%d C=%d",
                        ot_dtype_name(dt), ot_isa_name(isas[ii]), usepos, s.B, s.T, s.C);
        }
      }
      free(tok); free(wte); free(wpe); free(out); free(want); free(dout); free(dwte);
      free(dwpe); free(rwte); free(rwpe);
    }
  }
  ot_isa_unforce();
}

// Finite differences of loss = sum(ref_fwd(wte, wpe) * w) w.r.t. wte and wpe
// against ref_bwd(w).
typedef struct { float *wte, *wpe, *out, *w; const int32_t *tok; int B, T, C; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_ref_embed_fwd(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
  return th_dot(c->out, c->w, (size_t)c->B * c->T * c->C);
}

static void test_fd(void) {
  int B = 2, T = 3, C = 4, V = 5;
  int32_t tok[6] = {1, 3, 1, 0, 1, 3};  // token 2 and 4 unused: zero gradient rows
  size_t n = (size_t)B * T * C, nw = (size_t)V * C, np = (size_t)T * C;
  fd_ctx c = {th_falloc(nw), th_falloc(np), th_falloc(n), th_falloc(n), tok, B, T, C};
  float *gw = th_falloc(nw), *gp = th_falloc(np), *fw = th_falloc(nw), *fp = th_falloc(np);
  th_fill(&g_rng, c.wte, nw, -1.0f, 1.0f);
  th_fill(&g_rng, c.wpe, np, -1.0f, 1.0f);
  th_fill(&g_rng, c.w, n, -1.0f, 1.0f);
  ot_ref_embed_bwd(gw, gp, c.w, tok, B, T, C);
  for (size_t i = 0; i < nw; i++) fw[i] = (float)th_fd(c.wte, i, 0.05f, fd_loss, &c);
  for (size_t i = 0; i < np; i++) fp[i] = (float)th_fd(c.wpe, i, 0.05f, fd_loss, &c);
  th_check_nerr(gw, fw, nw, 1e-5, "ref embed_bwd dwte vs finite differences");
  th_check_nerr(gp, fp, np, 1e-5, "ref embed_bwd dwpe vs finite differences");
  th_check(gw[2 * C] == 0.0f && gw[4 * C + 3] == 0.0f && gw[C] != 0.0f,
           "unused tokens get zero gradient, used ones not");
  free(c.wte); free(c.wpe); free(c.out); free(c.w); free(gw); free(gp); free(fw); free(fp);
}

// Same bits for 1 and 2 threads (and equal to the reference's token order).
static void test_determinism(void) {
  int B = 4, T = 64, C = 200, V = 50;
  size_t n = (size_t)B * T * C, nw = (size_t)V * C, np = (size_t)T * C;
  int32_t *tok = th_alloc((size_t)B * T * 4);
  float *dout = th_falloc(n), *a = th_falloc(nw), *b = th_falloc(nw), *r = th_falloc(nw);
  float *pa = th_falloc(np), *pb = th_falloc(np), *pr = th_falloc(np);
  fill_tokens(tok, (size_t)B * T, V);
  th_fill_normal(&g_rng, dout, n, 1.0f);
  int nt = ot_threads_get();
  ot_threads_set(1);
  ot_embed_bwd(OT_F32, a, pa, dout, tok, B, T, C, V);
  ot_threads_set(2);
  ot_embed_bwd(OT_F32, b, pb, dout, tok, B, T, C, V);
  ot_threads_set(nt);
  ot_ref_embed_bwd(r, pr, dout, tok, B, T, C);
  th_check(memcmp(a, b, nw * 4) == 0 && memcmp(pa, pb, np * 4) == 0,
           "embed_bwd: same bits with 1 and 2 threads");
  th_check(memcmp(a, r, nw * 4) == 0 && memcmp(pa, pr, np * 4) == 0,
           "embed_bwd: same bits as the reference (token order)");
  free(tok); free(dout); free(a); free(b); free(r); free(pa); free(pb); free(pr);
}

static void test_errors(void) {
  enum { B = 2, T = 4, C = 3, V = 10 };
  int32_t tok[B * T] = {1, 2, 3, 4, 5, 6, 7, 8};
  float wte[V * C] = {0}, wpe[T * C] = {0}, out[B * T * C], dwte[V * C], dout[B * T * C] = {0};
  for (int i = 0; i < B * T * C; i++) out[i] = 7.0f;
  for (int i = 0; i < V * C; i++) dwte[i] = 3.0f;
  tok[5] = -1;
  th_check_error(ot_embed_fwd(OT_F32, out, tok, wte, wpe, B, T, C, V), OT_EINVAL,
                 "tokens[5] = -1", "negative token");
  th_check(strstr(ot_last_error(), "V=10") != NULL, "message names V: %s", ot_last_error());
  bool untouched = true;
  for (int i = 0; i < B * T * C; i++) untouched &= out[i] == 7.0f;
  th_check(untouched, "embed_fwd: output untouched on a bad token");
  tok[5] = 6;
  tok[7] = V;
  tok[6] = V + 5;
  th_check_error(ot_embed_fwd(OT_BF16, out, tok, wte, wpe, B, T, C, V), OT_EINVAL,
                 "tokens[6] = 15", "first bad token is reported");
  th_check_error(ot_embed_bwd(OT_F32, dwte, NULL, dout, tok, B, T, C, V), OT_EINVAL,
                 "tokens[6] = 15", "bwd bad token");
  untouched = true;
  for (int i = 0; i < V * C; i++) untouched &= dwte[i] == 3.0f;
  th_check(untouched, "embed_bwd: gradients untouched on a bad token");
  tok[6] = tok[7] = 0;
  th_check_error(ot_embed_fwd(OT_I8, out, tok, wte, wpe, B, T, C, V), OT_EINVAL, "i8", "i8");
  th_check_error(ot_embed_fwd(OT_F32, NULL, tok, wte, wpe, B, T, C, V), OT_EINVAL, "'out'", "NULL out");
  th_check_error(ot_embed_fwd(OT_F32, out, NULL, wte, wpe, B, T, C, V), OT_EINVAL, "'tokens'", "NULL tokens");
  th_check_error(ot_embed_fwd(OT_F32, out, tok, NULL, wpe, B, T, C, V), OT_EINVAL, "'wte'", "NULL wte");
  th_check_error(ot_embed_bwd(OT_F32, NULL, NULL, dout, tok, B, T, C, V), OT_EINVAL, "'dwte'", "NULL dwte");
  th_check_error(ot_embed_bwd(OT_F32, dwte, NULL, NULL, tok, B, T, C, V), OT_EINVAL, "'dout'", "NULL dout");
  th_check_error(ot_embed_fwd(OT_F32, out, tok, wte, wpe, 0, T, C, V), OT_EINVAL, "B=0", "B=0");
  th_check_error(ot_embed_fwd(OT_F32, out, tok, wte, wpe, B, T, -1, V), OT_EINVAL, "C=-1", "C<0");
  th_check_error(ot_embed_bwd(OT_F32, dwte, NULL, dout, tok, B, T, C, 0), OT_EINVAL, "V=0", "V=0");
  th_check(ot_embed_fwd(OT_F32, out, tok, wte, NULL, B, T, C, V) == OT_OK, "valid call succeeds");
}

// f32 tables, bf16 rows: each row = bf16(wte[tok] + wpe[t]) exactly (one rounding of the f32 sum).
static void test_f32_tables(void) {
  static const int shp[][4] = {{1, 1, 1, 1}, {2, 5, 33, 7}, {3, 17, 769, 50}};   // B, T, C, V
  for (int k = 0; k < 3; k++)
    for (int usepos = 0; usepos < 2; usepos++) {
      const int B = shp[k][0], T = shp[k][1], C = shp[k][2], V = shp[k][3];
      const size_t n = (size_t)B * T * C;
      int32_t *tok = th_alloc((size_t)B * T * 4);
      float *wte = th_falloc((size_t)V * C), *wpe = th_falloc((size_t)T * C);
      uint16_t *out = th_alloc(n * 2);
      fill_tokens(tok, (size_t)B * T, V);
      th_fill(&g_rng, wte, (size_t)V * C, -1.0f, 1.0f);
      th_fill(&g_rng, wpe, (size_t)T * C, -1.0f, 1.0f);
      ot_status s = ot_embed_fwd_w(OT_BF16, OT_F32, out, tok, wte, usepos ? wpe : NULL, B, T, C, V);
      size_t bad = 0;
      for (size_t i = 0; i < (size_t)B * T; i++)
        for (int c = 0; c < C; c++) {
          const float want = wte[(size_t)tok[i] * C + c] + (usepos ? wpe[(i % T) * C + c] : 0.0f);
          bad += out[i * C + c] != ot_f32_to_bf16(want);
        }
      th_check(s == OT_OK && bad == 0, "f32 tables -> bf16 rows B=%d T=%d C=%d wpe=%d: %zu differ (%s)",
               B, T, C, usepos, bad, s == OT_OK ? "ok" : ot_last_error());
      free(tok); free(wte); free(wpe); free(out);
    }
  uint16_t o[4];
  float w[4] = {0};
  int32_t t[1] = {0};
  th_check_error(ot_embed_fwd_w(OT_F32, OT_BF16, o, t, w, NULL, 1, 1, 4, 1), OT_EINVAL, "unsupported",
                 "bf16 tables with f32 rows refused");
}

int main(void) {
  test_vs_ref();
  test_f32_tables();
  test_fd();
  test_determinism();
  test_errors();
  return th_finish();
}
