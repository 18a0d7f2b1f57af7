// Dropout: the Philox4x32-10 generator against the published known-answer
// vectors (Random123) and the kernels' inline copy; the keep rule; the
// elementwise kernel (ot_dropout_fwd / _bwd) == the scalar reference bit for
// bit on every ISA, f32 and bf16, odd sizes and offsets, in place; p = 0 is an
// exact copy; the keep rate within a 5-sigma binomial bound for several p;
// the same bits with 1 and 2 threads; counters compose (two calls on the two
// halves == one call); the backward by finite differences with the fixed mask;
// argument validation messages. The mapped form (ot_dropout_fwd_map / _bwd_map:
// a slice of a larger tensor with the whole tensor's counters) == its scalar
// reference on every ISA and dtype (row lists, strides with gaps, odd sizes, in
// place); a tensor's column halves, or its samples taken in another order or
// padded to another length, get the whole tensor's masks; its backward by finite
// differences.
#include "harness.h"
#include "ops/kern/dropout_k.h"

static void test_philox(void) {
  // Random123 kat_vectors: philox4x32 10 rounds (ctr, key -> out)
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
       0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
       0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    ot_philox4x32_10(out, kat[t], kat[t] + 4);
    th_check(out[0] == kat[t][6] && out[1] == kat[t][7] && out[2] == kat[t][8] &&
             out[3] == kat[t][9], "philox4x32-10 known answer %d: got %08x %08x %08x %08x", t,
             out[0], out[1], out[2], out[3]);
  }
  // ot_rand_u32 and the kernels' inline generator: the same stream
  th_rng r = {11};
  bool same = true, word = true;
  for (int t = 0; t < 2000; t++) {
    const uint64_t seed = th_next(&r), c = t < 1000 ? (uint64_t)t : th_next(&r);
    uint32_t w[4], o[4];
    ot__philox_blk(w, seed, c >> 2);
    const uint32_t ctr[4] = {(uint32_t)(c >> 2), (uint32_t)(c >> 34), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ot_philox4x32_10(o, ctr, key);
    same &= !memcmp(w, o, sizeof w);
    word &= ot_rand_u32(seed, c) == o[c & 3];
  }
  th_check(same, "inline philox (kernels) == ot_philox4x32_10");
  bool lanes = true;
  for (int t = 0; t < 50; t++) {
    const uint64_t seed = th_next(&r), b0 = t < 25 ? (uint64_t)t : th_next(&r);
    uint32_t w[4 * OT__PHX_N], o[4];
    ot__philox_lanes(w, seed, b0);
    for (int l = 0; l < OT__PHX_N; l++) {
      ot__philox_blk(o, seed, b0 + (uint64_t)l);
      for (int k = 0; k < 4; k++) lanes &= w[k * OT__PHX_N + l] == o[k];
    }
  }
  th_check(lanes, "lane-wise philox (kernels) == one block at a time");
  bool mask = true;
  for (int t = 0; t < 300; t++) {
    const uint64_t seed = th_next(&r), c0 = th_next(&r) >> (t % 60);
    const int n = (int)(th_next(&r) % 200);
    float m[200];
    ot__drop_mask(m, n, seed, c0, ot_dropout_threshold(0.3f), 2.0f);
    for (int e = 0; e < n; e++) mask &= m[e] == (ot_dropout_keep(seed, c0 + e, 0.3f) ? 2.0f : 0.0f);
  }
  th_check(mask, "kernels' mask rows == ot_dropout_keep (any start, any length)");
  th_check(word, "ot_rand_u32(seed, c) = word c & 3 of block c >> 2");
  // the keep rule
  th_check(ot_dropout_threshold(0.0f) == 0 && ot_dropout_threshold(0.5f) == 0x80000000u &&
           ot_dropout_threshold(0.25f) == 0x40000000u, "threshold = floor(p * 2^32)");
  th_check(ot_dropout_scale(0.0f) == 1.0f && ot_dropout_scale(0.5f) == 2.0f &&
           ot_dropout_scale(0.1f) == (float)(1.0 / (1.0 - (double)0.1f)), "scale = 1 / (1 - p)");
  bool k0 = true;
  for (uint64_t c = 0; c < 1000; c++) k0 &= ot_dropout_keep(5, c, 0.0f);
  th_check(k0, "p = 0 keeps every element");
}

static void run_dt(ot_dtype dt, bool fwd, void *y, const void *x, size_t n, float p, uint64_t seed,
                   uint64_t off, ot_status *st) {
  *st = fwd ? ot_dropout_fwd(dt, y, x, n, p, seed, off) : ot_dropout_bwd(dt, y, x, n, p, seed, off);
}

// Kernel == reference, bit for bit (f32: the f32 product; bf16 / f16: the product of
// the 16-bit value rounded to its dtype), out of place and in place.
static void test_vs_ref(ot_isa isa, ot_dtype dt) {
  static const size_t ns[] = {1, 3, 15, 16, 17, 31, 33, 1000, 1023, 1024, 1025, 4099, 70001};
  static const float ps[] = {0.1f, 0.5f, 0.87f};
  th_rng r = {77};
  for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
    for (size_t pi = 0; pi < 3; pi++) {
      const size_t n = ns[ni];
      const float p = ps[pi];
      const uint64_t seed = th_next(&r), off = (th_next(&r) >> 8) + ni;  // odd offsets too
      float *x = th_falloc(n), *want = th_falloc(n), *got = th_falloc(n);
      th_fill_normal(&r, x, n, 1.0f);
      th_round_dt(dt, x, n);
      ot_ref_dropout_fwd(want, x, n, p, seed, off);
      th_round_dt(dt, want, n);
      void *xd = th_to_dt(dt, x, n), *yd = th_to_dt(dt, x, n);
      for (int fwd = 0; fwd < 2; fwd++) {
        ot_status st;
        run_dt(dt, fwd, yd, xd, n, p, seed, off, &st);  // out of place
        th_from_dt(dt, yd, got, n);
        th_check(st == OT_OK && !memcmp(got, want, n * 4), "%s %s dropout_%s n=%zu p=%g off=%llu"
                 ": kernel == reference bit for bit", ot_isa_name(isa), ot_dtype_name(dt),
                 fwd ? "fwd" : "bwd", n, (double)p, (unsigned long long)off);
        void *z = th_to_dt(dt, x, n);
        run_dt(dt, fwd, z, z, n, p, seed, off, &st);  // in place
        th_from_dt(dt, z, got, n);
        th_check(st == OT_OK && !memcmp(got, want, n * 4), "%s %s dropout_%s n=%zu p=%g in place",
                 ot_isa_name(isa), ot_dtype_name(dt), fwd ? "fwd" : "bwd", n, (double)p);
        free(z);
      }
      // the mask is the rule's, values x * scale
      bool rule = true;
      const float s = ot_dropout_scale(p);
      for (size_t e = 0; e < n; e++) {
        const bool k = ot_dropout_keep(seed, off + e, p);
        float v = k ? x[e] * s : 0.0f;
        th_round_dt(dt, &v, 1);
        rule &= memcmp(&v, &want[e], 4) == 0;
      }
      th_check(rule, "%s reference n=%zu p=%g: y = keep ? x * scale : 0", ot_dtype_name(dt), n,
               (double)p);
      free(x); free(want); free(got); free(xd); free(yd);
    }
}

// p = 0: an exact copy (NaN, -0, denormals kept); in place a no-op.
static void test_p0(void) {
  const size_t n = 1001;
  float *x = th_falloc(n), *y = th_falloc(n);
  th_rng r = {3};
  th_fill_normal(&r, x, n, 1.0f);
  x[0] = NAN; x[1] = -0.0f; x[2] = 1e-40f; x[3] = INFINITY;
  th_check(ot_dropout_fwd(OT_F32, y, x, n, 0.0f, 9, 17) == OT_OK && !memcmp(x, y, n * 4),
           "p = 0 forward: exact copy");
  th_check(ot_dropout_bwd(OT_F32, y, y, n, 0.0f, 9, 17) == OT_OK && !memcmp(x, y, n * 4),
           "p = 0 backward in place: unchanged");
  uint16_t *xb = th_to_bf16(x, n), *yb = th_alloc(n * 2);
  th_check(ot_dropout_fwd(OT_BF16, yb, xb, n, 0.0f, 9, 17) == OT_OK && !memcmp(xb, yb, n * 2),
           "p = 0 bf16: exact copy");
  free(xb); free(yb);
  uint16_t *xh = th_to_dt(OT_F16, x, n), *yh = th_alloc(n * 2);
  th_check(ot_dropout_fwd(OT_F16, yh, xh, n, 0.0f, 9, 17) == OT_OK && !memcmp(xh, yh, n * 2),
           "p = 0 f16: exact copy");
  free(x); free(y); free(xh); free(yh);
}

// Keep rate within 5 binomial sigma; kept values exactly scale; dropped are 0
// even for non-finite x.
static void test_rate(void) {
  static const float ps[] = {0.05f, 0.1f, 0.3f, 0.5f, 0.9f};
  const size_t n = 1000003;
  float *x = th_falloc(n), *y = th_falloc(n);
  for (size_t e = 0; e < n; e++) x[e] = e % 7 == 0 ? NAN : 1.0f;
  for (int pi = 0; pi < 5; pi++) {
    const float p = ps[pi];
    ot_dropout_fwd(OT_F32, y, x, n, p, 1234 + pi, 99);
    size_t kept = 0;
    bool vals = true;
    for (size_t e = 0; e < n; e++) {
      if (e % 7 == 0) { kept += y[e] != 0.0f; vals &= isnan(y[e]) || y[e] == 0.0f; continue; }
      if (y[e] != 0.0f) { kept++; vals &= y[e] == ot_dropout_scale(p); }
    }
    const double q = 1.0 - (double)ot_dropout_threshold(p) / 4294967296.0;
    const double sig = sqrt((double)n * q * (1 - q)), dev = fabs((double)kept - n * q);
    th_check(dev <= 5 * sig, "p=%g: kept %zu of %zu, expected %.0f +- %.0f (5 sigma)", (double)p,
             kept, n, n * q, 5 * sig);
    th_check(vals, "p=%g: kept values are exactly 1 * scale, dropped exactly 0 (NaN x too)",
             (double)p);
  }
  free(x); free(y);
}

// Same bits with 1 and 2 threads; two calls on [off, off+n1) and [off+n1,
// off+n) == one call on [off, off+n).
static void test_threads_and_stream(void) {
  const size_t n = 300007, n1 = 123457;
  float *x = th_falloc(n), *a = th_falloc(n), *b = th_falloc(n);
  th_rng r = {8};
  th_fill_normal(&r, x, n, 1.0f);
  const int nt0 = ot_threads_get();
  ot_threads_set(1);
  ot_dropout_fwd(OT_F32, a, x, n, 0.3f, 42, 1001);
  ot_threads_set(2);
  ot_dropout_fwd(OT_F32, b, x, n, 0.3f, 42, 1001);
  th_check(!memcmp(a, b, n * 4), "dropout: the same bits with 1 and 2 threads");
  ot_dropout_fwd(OT_F32, b, x, n1, 0.3f, 42, 1001);
  ot_dropout_fwd(OT_F32, b + n1, x + n1, n - n1, 0.3f, 42, 1001 + n1);
  th_check(!memcmp(a, b, n * 4), "dropout: two calls on the halves == one call");
  ot_dropout_fwd(OT_F32, b, x, n, 0.3f, 43, 1001);
  th_check(memcmp(a, b, n * 4) != 0, "dropout: another seed, another mask");
  ot_threads_set(nt0);
  free(x); free(a); free(b);
}

// Backward by finite differences with the fixed mask: L = sum(w * dropout(x)).
typedef struct { float *x, *y; const float *w; size_t n; } fd_ctx;
static double fd_loss(void *p) {
  fd_ctx *c = p;
  ot_dropout_fwd(OT_F32, c->y, c->x, c->n, 0.4f, 5, 3);
  return th_dot(c->y, c->w, c->n);
}

static void test_fd(ot_isa isa) {
  const size_t n = 37;
  float *x = th_falloc(n), *y = th_falloc(n), *w = th_falloc(n), *dx = th_falloc(n), *fd = th_falloc(n);
  th_rng r = {21};
  th_fill_normal(&r, x, n, 1.0f); th_fill_normal(&r, w, n, 1.0f);
  ot_dropout_bwd(OT_F32, dx, w, n, 0.4f, 5, 3);
  fd_ctx c = {x, y, w, n};
  for (size_t i = 0; i < n; i++) fd[i] = (float)th_fd(x, i, 1e-2f, fd_loss, &c);
  th_check_nerr(dx, fd, n, 1e-4, "%s dropout backward vs finite differences", ot_isa_name(isa));
  free(x); free(y); free(w); free(dx); free(fd);
}

static void test_errors(void) {
  float b[8] = {0};
  th_check_error(ot_dropout_fwd(OT_F32, b, b, 8, 1.0f, 0, 0), OT_EINVAL, "p=1 must be in [0, 1)",
                 "dropout p = 1");
  th_check_error(ot_dropout_bwd(OT_F32, b, b, 8, NAN, 0, 0), OT_EINVAL, "ot_dropout_bwd: dropout "
                 "probability p=nan", "dropout p = NaN");
  th_check_error(ot_dropout_fwd(OT_F32, b, b, 8, -0.1f, 0, 0), OT_EINVAL, "p=-0.1",
                 "dropout p < 0");
  th_check_error(ot_dropout_fwd(OT_F32, b, b, 8, 1.5f, 0, 0), OT_EINVAL, "p=1.5", "dropout p > 1");
  th_check_error(ot_dropout_fwd(OT_I8, b, b, 8, 0.1f, 0, 0), OT_EINVAL, "dtype i8",
                 "dropout i8");
  th_check_error(ot_dropout_fwd(OT_F32, NULL, b, 8, 0.1f, 0, 0), OT_EINVAL, "'y'", "dropout y NULL");
  th_check(ot_dropout_fwd(OT_F32, b, b, 0, 0.1f, 0, 0) == OT_OK, "dropout n = 0 is a no-op");
  const ot_dropout_map bad = {1, 2, 4, NULL, 0, 3};
  th_check_error(ot_dropout_fwd_map(OT_F32, b, b, &bad, 0.1f, 0, 0), OT_EINVAL, "s1=3 is below the "
                 "row length n2=4", "dropout map overlapping rows");
  th_check_error(ot_dropout_bwd_map(OT_F32, b, b, NULL, 0.1f, 0, 0), OT_EINVAL, "'mp'",
                 "dropout map NULL");
}

// The mapped kernel == the mapped reference bit for bit, forward and backward,
// out of place and in place.
static void test_map_vs_ref(ot_isa isa, ot_dtype dt) {
  static const size_t sh[][3] = {{1, 1, 1}, {1, 7, 5}, {3, 4, 17}, {2, 3, 1025},
                                 {5, 9, 33}, {1, 130, 700}, {4, 40, 64}};
  th_rng r = {91};
  for (size_t t = 0; t < sizeof sh / sizeof sh[0]; t++)
    for (int form = 0; form < 2; form++) {
      const size_t n0 = sh[t][0], n1 = sh[t][1], n2 = sh[t][2], n = n0 * n1 * n2;
      int64_t rows[8];
      for (size_t a = 0; a < n0; a++) rows[a] = (int64_t)(3 * (n0 - 1 - a) + (t & 1));  // reversed, gaps
      const ot_dropout_map mp = {n0, n1, n2, form ? rows : NULL, (n1 + 2) * (n2 + 3 * t),
                                 n2 + 3 * t};
      const float p = t % 2 ? 0.3f : 0.75f;
      const uint64_t seed = th_next(&r), off = (th_next(&r) >> 12) + t;
      float *x = th_falloc(n), *want = th_falloc(n), *got = th_falloc(n);
      th_fill_normal(&r, x, n, 1.0f);
      th_round_dt(dt, x, n);
      ot_ref_dropout_fwd_map(want, x, &mp, p, seed, off);
      th_round_dt(dt, want, n);
      void *xd = th_to_dt(dt, x, n), *yd = th_to_dt(dt, x, n);
      for (int fwd = 0; fwd < 2; fwd++) {
        ot_status st = fwd ? ot_dropout_fwd_map(dt, yd, xd, &mp, p, seed, off)
                           : ot_dropout_bwd_map(dt, yd, xd, &mp, p, seed, off);
        th_from_dt(dt, yd, got, n);
        th_check(st == OT_OK && !memcmp(got, want, n * 4), "%s %s dropout_%s_map [%zu,%zu,%zu] "
                 "rows=%s: kernel == reference bit for bit", ot_isa_name(isa), ot_dtype_name(dt),
                 fwd ? "fwd" : "bwd", n0, n1, n2, form ? "list" : "NULL");
        void *z = th_to_dt(dt, x, n);
        st = fwd ? ot_dropout_fwd_map(dt, z, z, &mp, p, seed, off)
                 : ot_dropout_bwd_map(dt, z, z, &mp, p, seed, off);
        th_from_dt(dt, z, got, n);
        th_check(st == OT_OK && !memcmp(got, want, n * 4), "%s %s dropout_%s_map [%zu,%zu,%zu] in "
                 "place", ot_isa_name(isa), ot_dtype_name(dt), fwd ? "fwd" : "bwd", n0, n1, n2);
        free(z);
      }
      // the reference straight from the rule
      bool rule = true;
      for (size_t a = 0; a < n0; a++)
        for (size_t b = 0; b < n1; b++)
          for (size_t c = 0; c < n2; c++) {
            const size_t e = (a * n1 + b) * n2 + c;
            const uint64_t ra = form ? (uint64_t)rows[a] : a;
            const bool k = ot_dropout_keep(seed, off + ra * mp.s0 + b * mp.s1 + c, p);
            float v = k ? x[e] * ot_dropout_scale(p) : 0.0f;
            th_round_dt(dt, &v, 1);
            rule &= memcmp(&v, &want[e], 4) == 0;
          }
      th_check(rule, "%s map reference [%zu,%zu,%zu]: keep(offset + r(a) s0 + b s1 + c)",
               ot_dtype_name(dt), n0, n1, n2);
      free(x); free(want); free(got); free(xd); free(yd);
    }
}

// Slices get the whole tensor's masks: the two column halves of [N, F] (a tensor-
// parallel split), and samples of a [B, P, C] batch processed alone, in another order
// or padded to fewer positions (data-parallel ranks, micro-batches, token budgets).
static void test_map_slices(void) {
  th_rng r = {17};
  const float p = 0.4f;
  const uint64_t seed = 1234, off = 99;
  {
    const size_t N = 13, F = 22, H = F / 2;
    float *x = th_falloc(N * F), *y = th_falloc(N * F), *xs = th_falloc(N * H), *ys = th_falloc(N * H);
    th_fill_normal(&r, x, N * F, 1.0f);
    ot_dropout_fwd(OT_F32, y, x, N * F, p, seed, off);
    bool ok = true;
    for (size_t h = 0; h < 2; h++) {
      for (size_t i = 0; i < N; i++) memcpy(xs + i * H, x + i * F + h * H, H * 4);
      const ot_dropout_map mp = {1, N, H, NULL, 0, F};
      ot_dropout_fwd_map(OT_F32, ys, xs, &mp, p, seed, off + h * H);
      for (size_t i = 0; i < N; i++) ok &= !memcmp(ys + i * H, y + i * F + h * H, H * 4);
    }
    th_check(ok, "dropout map: the column halves of [N, F] get the whole tensor's masks");
    free(x); free(y); free(xs); free(ys);
  }
  {
    const size_t B = 5, P = 9, C = 6, T = 4;  // every sample at its first T of P positions
    float *x = th_falloc(B * P * C), *y = th_falloc(B * P * C);
    th_fill_normal(&r, x, B * P * C, 1.0f);
    const ot_dropout_map whole = {B, P, C, NULL, P * C, C};
    ot_dropout_fwd_map(OT_F32, y, x, &whole, p, seed, off);
    bool ok = true;
    // samples 3, 0, 4 alone or together, padded to T positions
    const int64_t pick[3] = {3, 0, 4};
    float *xs = th_falloc(3 * T * C), *ys = th_falloc(3 * T * C);
    for (size_t a = 0; a < 3; a++) memcpy(xs + a * T * C, x + (size_t)pick[a] * P * C, T * C * 4);
    const ot_dropout_map part = {3, T, C, pick, P * C, C};
    ot_dropout_fwd_map(OT_F32, ys, xs, &part, p, seed, off);
    for (size_t a = 0; a < 3; a++) ok &= !memcmp(ys + a * T * C, y + (size_t)pick[a] * P * C, T * C * 4);
    const ot_dropout_map one = {1, T, C, NULL, 0, C};
    ot_dropout_fwd_map(OT_F32, ys, xs + T * C, &one, p, seed, off + 0 * P * C);
    ok &= !memcmp(ys, y, T * C * 4);
    th_check(ok, "dropout map: a sample's mask does not depend on its batch, order or padding");
    free(x); free(y); free(xs); free(ys);
  }
}

// The mapped backward by finite differences: L = sum(w * dropout_map(x)).
typedef struct { float *x, *y; const float *w; const ot_dropout_map *mp; } fdm_ctx;
static double fdm_loss(void *p) {
  fdm_ctx *c = p;
  ot_dropout_fwd_map(OT_F32, c->y, c->x, c->mp, 0.4f, 5, 3);
  return th_dot(c->y, c->w, c->mp->n0 * c->mp->n1 * c->mp->n2);
}

static void test_map_fd(ot_isa isa) {
  const int64_t rows[3] = {4, 1, 2};
  const ot_dropout_map mp = {3, 2, 7, rows, 20, 9};
  const size_t n = 42;
  float *x = th_falloc(n), *y = th_falloc(n), *w = th_falloc(n), *dx = th_falloc(n), *fd = th_falloc(n);
  th_rng r = {23};
  th_fill_normal(&r, x, n, 1.0f); th_fill_normal(&r, w, n, 1.0f);
  ot_dropout_bwd_map(OT_F32, dx, w, &mp, 0.4f, 5, 3);
  fdm_ctx c = {x, y, w, &mp};
  for (size_t i = 0; i < n; i++) fd[i] = (float)th_fd(x, i, 1e-2f, fdm_loss, &c);
  th_check_nerr(dx, fd, n, 1e-4, "%s dropout_map backward vs finite differences", ot_isa_name(isa));
  free(x); free(y); free(w); free(dx); free(fd);
}

int main(void) {
  test_philox();
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  for (int k = 0; k < ni; k++) {
    ot_isa_force(isas[k]);
    test_vs_ref(isas[k], OT_F32);
    test_vs_ref(isas[k], OT_BF16);
    test_vs_ref(isas[k], OT_F16);
    test_fd(isas[k]);
    test_map_vs_ref(isas[k], OT_F32);
    test_map_vs_ref(isas[k], OT_BF16);
    test_map_fd(isas[k]);
  }
  test_map_slices();
  ot_isa_unforce();
  test_p0();
  test_rate();
  test_threads_and_stream();
  test_errors();
  return th_finish();
}
