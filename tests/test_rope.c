// RoPE: table values, fast kernels (every ISA, f32 and bf16, NEOX and GPTJ,
// partial rotary, pos0) against the double-precision reference, forward then
// backward = identity, the NEOX/GPTJ permutation relation, finite differences
// of the reference backward, determinism across thread counts, bad arguments.
#include "harness.h"

static th_rng g_rng = {0x5eed0001};

// Runs the fast forward (bwd = 0) or backward on x (f32 values) with storage dt.
static ot_status fast_rope(int bwd, ot_dtype dt, float *x, const float *tab, int Tmax, int B, int H,
                           int T, int D, int rot, int pos0, ot_rope_style st) {
  size_t n = (size_t)B * H * T * D;
  ot_status s;
  if (dt != OT_F32) {
    void *xb = th_to_dt(dt, x, n);
    s = (bwd ? ot_rope_bwd : ot_rope_fwd)(dt, xb, tab, Tmax, B, H, T, D, rot, pos0, st);
    th_from_dt(dt, xb, x, n);
    free(xb);
  } else {
    s = (bwd ? ot_rope_bwd : ot_rope_fwd)(dt, x, tab, Tmax, B, H, T, D, rot, pos0, st);
  }
  return s;
}

static const char *sname(ot_rope_style st) { return st == OT_ROPE_GPTJ ? "gptj" : "neox"; }

static void test_table(void) {
  int Tmax = 300, rot = 10;
  float base = 10000.0f;
  float *tab = th_falloc((size_t)Tmax * rot), *want = th_falloc((size_t)Tmax * rot);
  th_check(ot_rope_table(tab, Tmax, rot, base) == OT_OK, "rope_table ok");
  for (int p = 0; p < Tmax; p++)
    for (int i = 0; i < rot / 2; i++) {
      long double a = (long double)p * powl(10000.0L, -2.0L * i / rot);
      want[p * rot + i] = (float)cosl(a);
      want[p * rot + rot / 2 + i] = (float)sinl(a);
    }
  th_check_nerr(tab, want, (size_t)Tmax * rot, 1e-7, "rope_table vs long double cos/sin");
  th_check(tab[0] == 1.0f && tab[rot / 2] == 0.0f && fabsf(tab[rot + 0] - cosf(1.0f)) < 1e-7f,
           "rope_table layout: position 0 -> cos 1, sin 0; position 1, i=0 -> cos(1)");
  free(tab);
  free(want);
}

typedef struct { int B, H, T, D, rot, pos0; float base; } rshape;

static void test_vs_ref(void) {
  static const rshape sh[] = {
      {1, 1, 1, 2, 2, 0, 10000}, {1, 2, 3, 3, 2, 5, 10000}, {2, 3, 17, 17, 16, 0, 10000},
      {1, 2, 5, 64, 64, 3, 10000}, {1, 1, 7, 65, 64, 0, 10000}, {2, 2, 9, 128, 32, 11, 500000},
      {1, 1, 3, 769, 768, 100, 10000}, {1, 3, 4, 12, 6, 1, 10000}, {1, 2, 33, 20, 20, 0, 100},
      {1, 1, 127, 34, 34, 2000, 10000}};
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
      rshape s = sh[k];
      size_t n = (size_t)s.B * s.H * s.T * s.D;
      int Tmax = s.pos0 + s.T + 3;
      float *tab = th_falloc((size_t)Tmax * s.rot);
      ot_rope_table(tab, Tmax, s.rot, s.base);
      float *x0 = th_falloc(n), *x = th_falloc(n), *want = th_falloc(n);
      for (int di = 0; di < TH_NDT; di++) {
        ot_dtype dt = th_dts[di];
        double tol = th_tol(dt, 1e-6, 1e-2);
        th_fill(&g_rng, x0, n, -2.0f, 2.0f);
        th_round_dt(dt, x0, n);
        for (int st = 0; st < 2; st++)
          for (int bwd = 0; bwd < 2; bwd++) {
            ot_rope_style style = (ot_rope_style)st;
            memcpy(x, x0, n * 4);
            memcpy(want, x0, n * 4);
            ot_status rc = fast_rope(bwd, dt, x, tab, Tmax, s.B, s.H, s.T, s.D, s.rot, s.pos0, style);
            (bwd ? ot_ref_rope_bwd : ot_ref_rope_fwd)(want, s.B, s.H, s.T, s.D, s.rot, s.base,
                                                      s.pos0, style);
            th_check(rc == OT_OK, "rope status %s", ot_last_error());
            th_check_nerr(x, want, n, tol, "rope_%s %s %s %s B=%d H=%d T=%d D=%d rot=%d pos0=%d",
                          bwd ? "bwd" : "fwd", sname(style), ot_dtype_name(dt),
                          ot_isa_name(isas[ii]), s.B, s.H, s.T, s.D, s.rot, s.pos0);
            // dims [rot, D) untouched, bit for bit
            bool same = true;
            for (size_t r = 0; r < n / s.D; r++)
              for (int d = s.rot; d < s.D; d++)
                same &= memcmp(&x[r * s.D + d], &x0[r * s.D + d], 4) == 0;
            th_check(same, "rope_%s %s %s %s D=%d rot=%d: dims >= rot untouched",
                     bwd ? "bwd" : "fwd", sname(style), ot_dtype_name(dt), ot_isa_name(isas[ii]),
                     s.D, s.rot);
          }
      }
      free(x0); free(x); free(want); free(tab);
    }
  }
  ot_isa_unforce();
}

// forward then backward gives the input back; fast (each ISA) and reference.
static void test_identity(void) {
  int B = 2, H = 3, T = 64, D = 72, rot = 64, pos0 = 100;
  size_t n = (size_t)B * H * T * D;
  float *tab = th_falloc((size_t)(pos0 + T) * rot), *x0 = th_falloc(n), *x = th_falloc(n);
  ot_rope_table(tab, pos0 + T, rot, 10000.0f);
  th_fill(&g_rng, x0, n, -1.0f, 1.0f);
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (int st = 0; st < 2; st++) {
      memcpy(x, x0, n * 4);
      fast_rope(0, OT_F32, x, tab, pos0 + T, B, H, T, D, rot, pos0, (ot_rope_style)st);
      th_check(th_nerr(x, x0, n) > 0.1, "rope_fwd %s changes x", sname((ot_rope_style)st));
      fast_rope(1, OT_F32, x, tab, pos0 + T, B, H, T, D, rot, pos0, (ot_rope_style)st);
      th_check_nerr(x, x0, n, 1e-6, "rope fwd then bwd = identity, %s %s",
                    sname((ot_rope_style)st), ot_isa_name(isas[ii]));
    }
  }
  ot_isa_unforce();
  for (int st = 0; st < 2; st++) {
    memcpy(x, x0, n * 4);
    ot_ref_rope_fwd(x, B, H, T, D, rot, 10000.0f, pos0, (ot_rope_style)st);
    ot_ref_rope_bwd(x, B, H, T, D, rot, 10000.0f, pos0, (ot_rope_style)st);
    th_check_nerr(x, x0, n, 1e-7, "ref rope fwd then bwd = identity, %s", sname((ot_rope_style)st));
  }
  free(tab); free(x0); free(x);
}

// Permuting the rotated dims (2i -> i, 2i+1 -> i + rot/2) turns GPTJ into NEOX:
// neox(P x) = P gptj(x).
static void permute(float *dst, const float *src, size_t rows, int D, int rot) {
  for (size_t r = 0; r < rows; r++) {
    const float *s = src + r * D;
    float *d = dst + r * D;
    for (int i = 0; i < rot / 2; i++) { d[i] = s[2 * i]; d[rot / 2 + i] = s[2 * i + 1]; }
    for (int i = rot; i < D; i++) d[i] = s[i];
  }
}

static void test_neox_gptj(void) {
  int B = 1, H = 2, T = 9, D = 40, rot = 36, pos0 = 7;
  size_t n = (size_t)B * H * T * D, rows = n / D;
  float *tab = th_falloc((size_t)(pos0 + T) * rot), *x = th_falloc(n), *xp = th_falloc(n);
  float *a = th_falloc(n), *b = th_falloc(n);
  ot_rope_table(tab, pos0 + T, rot, 10000.0f);
  th_fill(&g_rng, x, n, -1.0f, 1.0f);
  permute(xp, x, rows, D, rot);
  // reference: identical double arithmetic, so exact
  memcpy(a, xp, n * 4);
  ot_ref_rope_fwd(a, B, H, T, D, rot, 10000.0f, pos0, OT_ROPE_NEOX);
  memcpy(b, x, n * 4);
  ot_ref_rope_fwd(b, B, H, T, D, rot, 10000.0f, pos0, OT_ROPE_GPTJ);
  permute(xp, b, rows, D, rot);
  th_check(memcmp(a, xp, n * 4) == 0, "ref: neox(P x) == P gptj(x) exactly");
  // and not trivially: neox(x) != gptj(x)
  memcpy(b, x, n * 4);
  ot_ref_rope_fwd(b, B, H, T, D, rot, 10000.0f, pos0, OT_ROPE_NEOX);
  memcpy(xp, x, n * 4);
  ot_ref_rope_fwd(xp, B, H, T, D, rot, 10000.0f, pos0, OT_ROPE_GPTJ);
  th_check(th_nerr(b, xp, n) > 0.1, "neox(x) differs from gptj(x)");
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (int bwd = 0; bwd < 2; bwd++) {
      permute(a, x, rows, D, rot);
      fast_rope(bwd, OT_F32, a, tab, pos0 + T, B, H, T, D, rot, pos0, OT_ROPE_NEOX);
      memcpy(b, x, n * 4);
      fast_rope(bwd, OT_F32, b, tab, pos0 + T, B, H, T, D, rot, pos0, OT_ROPE_GPTJ);
      permute(xp, b, rows, D, rot);
      th_check_nerr(a, xp, n, 1e-6, "fast %s: neox(P x) == P gptj(x), %s", bwd ? "bwd" : "fwd",
                    ot_isa_name(isas[ii]));
    }
  }
  ot_isa_unforce();
  free(tab); free(x); free(xp); free(a); free(b);
}

// Finite differences of loss(x) = sum(ref_rope_fwd(x) * w) against ref_rope_bwd(w).
typedef struct { float *x, *w, *tmp; int B, H, T, D, rot, pos0; ot_rope_style st; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  size_t n = (size_t)c->B * c->H * c->T * c->D;
  memcpy(c->tmp, c->x, n * 4);
  ot_ref_rope_fwd(c->tmp, c->B, c->H, c->T, c->D, c->rot, 10000.0f, c->pos0, c->st);
  return th_dot(c->tmp, c->w, n);
}

static void test_fd(void) {
  for (int st = 0; st < 2; st++) {
    fd_ctx c = {0};
    c.B = 1; c.H = 2; c.T = 3; c.D = 9; c.rot = 6; c.pos0 = 2; c.st = (ot_rope_style)st;
    size_t n = (size_t)c.B * c.H * c.T * c.D;
    c.x = th_falloc(n); c.w = th_falloc(n); c.tmp = th_falloc(n);
    float *g = th_falloc(n), *fd = th_falloc(n);
    th_fill(&g_rng, c.x, n, -1.0f, 1.0f);
    th_fill(&g_rng, c.w, n, -1.0f, 1.0f);
    memcpy(g, c.w, n * 4);
    ot_ref_rope_bwd(g, c.B, c.H, c.T, c.D, c.rot, 10000.0f, c.pos0, c.st);
    for (size_t i = 0; i < n; i++) fd[i] = (float)th_fd(c.x, i, 0.05f, fd_loss, &c);
    th_check_nerr(g, fd, n, 1e-5, "ref rope_bwd vs finite differences (%s)", sname(c.st));
    free(c.x); free(c.w); free(c.tmp); free(g); free(fd);
  }
}

// Same bits for 1 and 2 threads, and a pos0 offset equals the matching rows of a
// longer sequence.
static void test_determinism_pos0(void) {
  int B = 2, H = 4, T = 64, D = 64, rot = 64;
  size_t n = (size_t)B * H * T * D;
  float *tab = th_falloc((size_t)T * rot), *x0 = th_falloc(n), *a = th_falloc(n), *b = th_falloc(n);
  ot_rope_table(tab, T, rot, 10000.0f);
  th_fill(&g_rng, x0, n, -1.0f, 1.0f);
  int nt = ot_threads_get();
  for (int di = 0; di < TH_NDT; di++)
    for (int st = 0; st < 2; st++) {
      ot_dtype dt = th_dts[di];
      memcpy(a, x0, n * 4);
      memcpy(b, x0, n * 4);
      ot_threads_set(1);
      fast_rope(0, dt, a, tab, T, B, H, T, D, rot, 0, (ot_rope_style)st);
      ot_threads_set(2);
      fast_rope(0, dt, b, tab, T, B, H, T, D, rot, 0, (ot_rope_style)st);
      th_check(memcmp(a, b, n * 4) == 0, "rope_fwd %s %s: same bits with 1 and 2 threads",
               sname((ot_rope_style)st), ot_dtype_name(dt));
    }
  ot_threads_set(nt);
  // rows t in [16, 64) of a T=64 sequence == a T=48 sequence with pos0 = 16
  int T2 = 48, p0 = T - T2;
  float *c = th_falloc((size_t)T2 * D);
  memcpy(a, x0, (size_t)T * D * 4);
  fast_rope(0, OT_F32, a, tab, T, 1, 1, T, D, rot, 0, OT_ROPE_NEOX);
  memcpy(c, x0 + (size_t)p0 * D, (size_t)T2 * D * 4);
  fast_rope(0, OT_F32, c, tab, T, 1, 1, T2, D, rot, p0, OT_ROPE_NEOX);
  th_check(memcmp(c, a + (size_t)p0 * D, (size_t)T2 * D * 4) == 0,
           "rope_fwd with pos0=%d equals rows %d.. of the pos0=0 sequence", p0, p0);
  free(tab); free(x0); free(a); free(b); free(c);
}

static void test_errors(void) {
  float tab[64], x[64];
  th_check_error(ot_rope_table(tab, 4, 5, 10000.0f), OT_EINVAL, "rot_dims=5", "table odd rot");
  th_check_error(ot_rope_table(tab, 4, 0, 10000.0f), OT_EINVAL, "rot_dims=0", "table rot 0");
  th_check_error(ot_rope_table(tab, 0, 4, 10000.0f), OT_EINVAL, "Tmax=0", "table Tmax 0");
  th_check_error(ot_rope_table(tab, 4, 4, 0.0f), OT_EINVAL, "base=0", "table base 0");
  th_check_error(ot_rope_table(tab, 4, 4, -2.0f), OT_EINVAL, "base=-2", "table base < 0");
  th_check_error(ot_rope_table(NULL, 4, 4, 10.0f), OT_EINVAL, "'tab'", "table NULL");
  ot_rope_table(tab, 8, 8, 10000.0f);
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 5, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "rot_dims=5", "odd rot_dims");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 10, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "rot_dims=10", "rot_dims > D");
  th_check_error(ot_rope_bwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 0, 0, OT_ROPE_GPTJ), OT_EINVAL,
                 "rot_dims=0", "rot_dims 0");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 8, -1, OT_ROPE_NEOX), OT_EINVAL,
                 "pos0=-1", "negative pos0");
  th_check_error(ot_rope_fwd(OT_F32, NULL, tab, 8, 1, 1, 2, 8, 8, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "'x'", "NULL x");
  th_check_error(ot_rope_bwd(OT_F32, x, NULL, 8, 1, 1, 2, 8, 8, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "'tab'", "NULL tab");
  th_check_error(ot_rope_fwd(OT_I8, x, tab, 8, 1, 1, 2, 8, 8, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "i8", "i8 dtype");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 0, 1, 2, 8, 8, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "B=0", "B=0");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, -3, 8, 8, 0, OT_ROPE_NEOX), OT_EINVAL,
                 "T=-3", "T<0");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 8, 0, (ot_rope_style)7), OT_EINVAL,
                 "style=7", "unknown style");
  th_check_error(ot_rope_fwd(OT_F32, x, tab, 8, 1, 1, 2, 8, 8, 7, OT_ROPE_NEOX), OT_EINVAL,
                 "Tmax=8", "positions beyond the table");
}

int main(void) {
  test_table();
  test_vs_ref();
  test_identity();
  test_neox_gptj();
  test_fd();
  test_determinism_pos0();
  test_errors();
  return th_finish();
}
