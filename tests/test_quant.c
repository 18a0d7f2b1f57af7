// Weight-only quantization: quantize -> dequantize bounds (int8 |w - deq| <=
// scale/2, scale = absmax/127, bf16 round-to-nearest-even, f32 exact), the
// quantized linear (GEMV and GEMM paths) against the scalar reference over odd
// shapes, every group and every ISA, thread-count independence of the GEMV,
// bad input, and the quantized model file (save -> load round trip, format
// errors).
#include "harness.h"
#include "ot/quant.h"
#include "quant_i8_bound.h"
#include <unistd.h>

static th_rng g_rng = {0x5eed0071};

typedef struct { ot_qw_kind kind; int group; } storage;
static const storage k_stores[] = {{OT_QW_F32, 0},    {OT_QW_BF16, 0},   {OT_QW_INT8, 0},
                                   {OT_QW_INT8, 32},  {OT_QW_INT8, 64},  {OT_QW_INT8, 128}};
#define N_STORES ((int)(sizeof k_stores / sizeof k_stores[0]))

static bool fits(storage s, int cols) { return s.kind != OT_QW_INT8 || !s.group || cols % s.group == 0; }

static const char *sname(storage s, char *buf) {
  if (s.kind == OT_QW_INT8) sprintf(buf, "int8/g%d", s.group);
  else sprintf(buf, "%s", ot_qw_kind_name(s.kind));
  return buf;
}

// Weights with rows of different magnitudes, some zero groups and a few outliers.
static void fill_weights(float *w, int rows, int cols) {
  for (int r = 0; r < rows; r++) {
    float mag = powf(10.0f, th_uniform(&g_rng, -3.0f, 1.0f));
    for (int k = 0; k < cols; k++) w[(size_t)r * cols + k] = mag * th_normal(&g_rng);
    if (r % 5 == 3) for (int k = 0; k < cols && k < 32; k++) w[(size_t)r * cols + k] = 0.0f;
    if (r % 7 == 2) w[(size_t)r * cols + (r * 13) % cols] *= 50.0f;
  }
}

// ---------------------------------------------------------- quantization ----
static void test_quantize_bounds(void) {
  static const int shapes[][2] = {{1, 32}, {3, 64}, {17, 128}, {5, 384}, {4, 37}, {2, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int R = shapes[si][0], K = shapes[si][1];
    const size_t n = (size_t)R * K;
    float *w = th_falloc(n), *deq = th_falloc(n), *row = th_falloc((size_t)K);
    fill_weights(w, R, K);
    for (int st = 0; st < N_STORES; st++) {
      storage s = k_stores[st];
      char nm[32];
      if (!fits(s, K)) continue;
      ot_qweight q;
      size_t before = ot_mem_current(OT_MEM_PARAMS);
      if (!th_check(ot_qweight_quantize(&q, s.kind, s.group, w, R, K) == OT_OK, "quantize %s [%d, %d]: %s",
                    sname(s, nm), R, K, ot_last_error()))
        continue;
      th_check(q.owned && q.rows == R && q.cols == K && q.group == s.group, "descriptor %s", sname(s, nm));
      th_check(ot_qweight_dequantize(&q, deq) == OT_OK, "dequantize: %s", ot_last_error());
      const int G = s.group ? s.group : K, ng = K / G;
      size_t bytes = n * (s.kind == OT_QW_F32 ? 4 : s.kind == OT_QW_BF16 ? 2 : 1) +
                     (s.kind == OT_QW_INT8 ? (size_t)R * ng * 4 : 0);
      th_check(ot_qweight_bytes(&q) == bytes, "bytes %s: %zu vs %zu", sname(s, nm), ot_qweight_bytes(&q), bytes);
      th_check(ot_mem_current(OT_MEM_PARAMS) >= before + bytes, "tracked as params");
      int bad = 0;
      for (int r = 0; r < R; r++)
        for (int g = 0; g < ng; g++) {
          float amax = 0;
          for (int k = g * G; k < (g + 1) * G; k++) amax = fmaxf(amax, fabsf(w[(size_t)r * K + k]));
          const float sc = s.kind == OT_QW_INT8 ? q.scales[(size_t)r * ng + g] : 0.0f;
          int qmax = 0;
          if (s.kind == OT_QW_INT8 && sc != amax / 127.0f) bad++;
          for (int k = g * G; k < (g + 1) * G; k++) {
            const size_t i = (size_t)r * K + k;
            const float d = deq[i];
            if (s.kind == OT_QW_F32) bad += d != w[i];
            else if (s.kind == OT_QW_BF16) bad += d != ot_bf16_to_f32(ot_f32_to_bf16(w[i]));
            else {
              const int qi = ((const int8_t *)q.data)[i];
              if (abs(qi) > qmax) qmax = abs(qi);
              // the product q * scale is rounded to f32 once
              bad += fabsf(w[i] - d) > 0.5f * sc + 1e-7f * fabsf(d) || d != (float)qi * sc;
            }
          }
          if (s.kind == OT_QW_INT8) bad += amax > 0 ? qmax != 127 : qmax != 0;
        }
      th_check(bad == 0, "quantize %s [%d, %d]: %d values off their bound / scale", sname(s, nm), R, K, bad);
      // one row at a time equals the whole dequantization
      int rbad = 0;
      for (int r = 0; r < R; r++) {
        th_check(ot_qweight_row(&q, r, row) == OT_OK, "row: %s", ot_last_error());
        rbad += memcmp(row, deq + (size_t)r * K, (size_t)K * 4) != 0;
      }
      th_check(rbad == 0, "ot_qweight_row %s: %d rows differ from ot_qweight_dequantize", sname(s, nm), rbad);
      ot_qweight_free(&q);
      th_check(q.data == NULL && q.scales == NULL && q.rows == 0, "free zeroes the struct");
      th_check(ot_mem_current(OT_MEM_PARAMS) == before, "free returns the tracked bytes");
    }
    free(w); free(deq); free(row);
  }
  ot_qweight_free(NULL);
}

// ----------------------------------------------------------- qlinear -------
// The quantized linear against the reference: normalized error <= 1e-5 (f32
// accumulation), except int8 weights at M >= OT_QLINEAR_I8_MIN (the int8 GEMM, groups
// of 32 from M > OT_QLINEAR_GEMV_MAX:
// the activations quantized to int8 per row, tests/quant_i8_bound.h; the GEMM
// itself is tested in test_quant_i8.c) and at M = 1 on AVX2, where the activations
// are rounded to int16 per chunk (kern/qgemv.c; for x uniform on [-1, 1] that
// is a normalized error of ~1 / (2 * 32767) = 1.5e-5, more for one row of
// few columns): every output within the exact rounding bound below instead.
// |y - want| <= the int16 rounding bound of kern/qgemv.c's int8 M = 1 path, per
// output: sum over columns of |w| sx / 2 (1 + 2^-8), sx = the column's chunk
// (group, or 128 columns per channel) max |x| / 32767, plus 1e-6 sum |w x| for
// the f32 conversions and sums (and 1e-6 |bias|). wd: the dequantized weights [N, K].
static int over_x16_bound(const float *y, const float *want, const float *wd, const float *x, const float *bias,
                          int N, int K, int group) {
  const int C = group ? group : 128;
  int bad = 0;
  for (int n = 0; n < N; n++) {
    double b = 1e-30 + (bias ? 1e-6 * fabs(bias[n]) : 0.0);
    for (int k0 = 0; k0 < K; k0 += C) {
      double amax = 0.0;
      for (int k = k0; k < K && k < k0 + C; k++) amax = fmax(amax, fabs(x[k]));
      for (int k = k0; k < K && k < k0 + C; k++) {
        const double aw = fabs(wd[(size_t)n * K + k]);
        b += aw * amax / 32767.0 * 0.5 * (1.0 + 1.0 / 256.0) + 1e-6 * aw * fabs(x[k]);
      }
    }
    bad += !(fabs((double)y[n] - want[n]) <= b);
  }
  return bad;
}

// M = 1 with special activations, every ISA: an outlier 1e4 times the rest
// (int8 on AVX2: its chunk is then coarse, checked against the exact rounding
// bound, the other chunks keep 2^-16), a zero chunk, values all below 1e-30
// (the int16 path declines them: f32 path), a NaN (every output NaN, as in
// the reference).
static void test_m1_activations(void) {
  static const int shapes[][2] = {{37, 384}, {9, 300}};
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (int si = 0; si < 2; si++) {
    const int N = shapes[si][0], K = shapes[si][1];
    float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)K), *y = th_falloc((size_t)N);
    float *want = th_falloc((size_t)N), *wd = th_falloc((size_t)N * K);
    fill_weights(w, N, K);
    for (int st = 0; st < N_STORES; st++) {
      storage s = k_stores[st];
      char nm[32];
      if (!fits(s, K)) continue;
      ot_qweight q;
      if (!th_check(ot_qweight_quantize(&q, s.kind, s.group, w, N, K) == OT_OK, "quantize: %s", ot_last_error()))
        continue;
      ot_qweight_dequantize(&q, wd);
      for (int c = 0; c < 4; c++) {
        th_fill(&g_rng, x, (size_t)K, -1.0f, 1.0f);
        if (c == 0) x[K / 2] = 1e4f;
        if (c == 1) memset(x, 0, sizeof(float) * 128);
        if (c == 2) for (int k = 0; k < K; k++) x[k] *= 1e-31f;
        if (c == 3) x[K - 3] = NAN;
        ot_ref_qlinear_fwd(want, x, &q, NULL, 1);
        for (int ii = 0; ii < ni; ii++) {
          ot_isa_force(isas[ii]);
          th_check(ot_qlinear_fwd(y, x, &q, NULL, 1) == OT_OK, "qlinear: %s", ot_last_error());
          if (c == 3) {
            int nan = 0;
            for (int n = 0; n < N; n++) nan += isnan(y[n]);
            th_check(nan == N, "NaN activation: %d of %d outputs NaN (%s %s)", nan, N, sname(s, nm),
                     ot_isa_name(isas[ii]));
          } else if (s.kind == OT_QW_INT8 && isas[ii] == OT_ISA_AVX2) {
            const int bad = over_x16_bound(y, want, wd, x, NULL, N, K, s.group);
            th_check(bad == 0, "qlinear M=1 %s %s N=%d K=%d activations #%d: %d outputs over the int16 bound",
                     sname(s, nm), ot_isa_name(isas[ii]), N, K, c, bad);
          } else {
            th_check_nerr(y, want, (size_t)N, 1e-5, "qlinear M=1 %s %s N=%d K=%d activations #%d", sname(s, nm),
                          ot_isa_name(isas[ii]), N, K, c);
          }
        }
        ot_isa_unforce();
      }
      ot_qweight_free(&q);
    }
    free(w); free(x); free(y); free(want); free(wd);
  }
}

static void test_qlinear_vs_ref(void) {
  static const int rows[] = {1, 3, 17, 769}, cols[] = {32, 96, 384, 37};
  static const int Ms[] = {1, 2, 3, 5, 8, 11, 16, 64, 200};
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
      const int N = rows[ri], K = cols[ci];
      float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)200 * K), *b = th_falloc((size_t)N);
      float *y = th_falloc((size_t)200 * N), *want = th_falloc((size_t)200 * N), *wd = th_falloc((size_t)N * K);
      fill_weights(w, N, K);
      th_fill(&g_rng, x, (size_t)200 * K, -1.0f, 1.0f);
      th_fill(&g_rng, b, (size_t)N, -1.0f, 1.0f);
      for (int st = 0; st < N_STORES; st++) {
        storage s = k_stores[st];
        char nm[32];
        if (!fits(s, K)) continue;
        ot_qweight q;
        if (!th_check(ot_qweight_quantize(&q, s.kind, s.group, w, N, K) == OT_OK, "quantize: %s", ot_last_error()))
          continue;
        ot_qweight_dequantize(&q, wd);
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
          const int M = Ms[mi];
          if (M > 64 && N > 64) continue;   // the GEMM path at M = 200 on the smaller shapes only (time)
          // bias on every other case (both paths see both)
          const float *bias = (mi + (size_t)st) % 2 ? b : NULL;
          ot_ref_qlinear_fwd(want, x, &q, bias, M);
          for (int ii = 0; ii < ni; ii++) {
            ot_isa_force(isas[ii]);
            for (size_t i = 0; i < (size_t)M * N; i++) y[i] = NAN;
            th_check(ot_qlinear_fwd(y, x, &q, bias, M) == OT_OK, "qlinear: %s", ot_last_error());
            if (s.kind == OT_QW_INT8 && M == 1 && isas[ii] == OT_ISA_AVX2) {
              const int bad = over_x16_bound(y, want, wd, x, bias, N, K, s.group);
              th_check(bad == 0, "qlinear %s %s N=%d K=%d M=1 bias=%d: %d outputs over the int16 bound",
                       sname(s, nm), ot_isa_name(isas[ii]), N, K, bias != NULL, bad);
            } else if (s.kind == OT_QW_INT8 && (M > OT_QLINEAR_GEMV_MAX || (s.group != 32 && M >= OT_QLINEAR_I8_MIN))) {   // the int8 GEMM
              const int bad = th_over_i8_bound(y, want, wd, x, bias, M, N, K);
              th_check(bad == 0, "qlinear %s %s N=%d K=%d M=%d bias=%d: %d outputs over the int8 bound",
                       sname(s, nm), ot_isa_name(isas[ii]), N, K, M, bias != NULL, bad);
            } else {
              th_check_nerr(y, want, (size_t)M * N, 1e-5, "qlinear %s %s N=%d K=%d M=%d bias=%d", sname(s, nm),
                            ot_isa_name(isas[ii]), N, K, M, bias != NULL);
            }
          }
          ot_isa_unforce();
        }
        ot_qweight_free(&q);
      }
      free(w); free(x); free(b); free(y); free(want); free(wd);
    }
}

// Each output row is computed by one thread in a fixed order: bitwise equal for any thread count.
static void test_threads(void) {
  const int N = 1031, K = 768;
  float *w = th_falloc((size_t)N * K), *x = th_falloc((size_t)5 * K);
  float *y1 = th_falloc((size_t)5 * N), *y2 = th_falloc((size_t)5 * N);
  fill_weights(w, N, K);
  th_fill(&g_rng, x, (size_t)5 * K, -1.0f, 1.0f);
  const int nt = ot_threads_get();
  for (int st = 0; st < N_STORES; st++) {
    ot_qweight q;
    th_check(ot_qweight_quantize(&q, k_stores[st].kind, k_stores[st].group, w, N, K) == OT_OK, "quantize");
    for (int M = 1; M <= 5; M += 4) {
      ot_threads_set(1);
      ot_qlinear_fwd(y1, x, &q, NULL, M);
      ot_threads_set(2);
      ot_qlinear_fwd(y2, x, &q, NULL, M);
      char nm[32];
      th_check(memcmp(y1, y2, (size_t)M * N * 4) == 0, "qlinear %s M=%d: 1 and 2 threads differ",
               sname(k_stores[st], nm), M);
    }
    ot_qweight_free(&q);
  }
  ot_threads_set(nt);
  free(w); free(x); free(y1); free(y2);
}

// ---------------------------------------------------------- bad input ------
static void test_bad_input(void) {
  float w[64 * 4] = {0}, x[64 * 2] = {0}, y[8] = {0};
  ot_qweight q;
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 48, w, 4, 64), OT_EINVAL, "group=48", "bad group");
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 128, w, 2, 64), OT_EINVAL, "does not divide cols=64",
                 "group not dividing cols");
  th_check_error(ot_qweight_quantize(&q, OT_QW_BF16, 32, w, 4, 64), OT_EINVAL, "only meaningful for int8",
                 "group with bf16");
  th_check_error(ot_qweight_quantize(&q, (ot_qw_kind)7, 0, w, 4, 64), OT_EINVAL, "kind=7", "bad kind");
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 0, NULL, 4, 64), OT_EINVAL, "'w' is NULL", "NULL w");
  th_check_error(ot_qweight_quantize(NULL, OT_QW_INT8, 0, w, 4, 64), OT_EINVAL, "'out' is NULL", "NULL out");
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 0, w, 0, 64), OT_EINVAL, "rows=0", "rows 0");
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 0, w, 4, -1), OT_EINVAL, "cols=-1", "cols -1");
  w[70] = NAN;
  th_check_error(ot_qweight_quantize(&q, OT_QW_INT8, 32, w, 4, 64), OT_EINVAL, "weight [1, 6]", "NaN weight");
  w[70] = 0.5f;
  th_check(ot_qweight_quantize(&q, OT_QW_INT8, 32, w, 4, 64) == OT_OK, "quantize: %s", ot_last_error());
  th_check_error(ot_qlinear_fwd(y, x, &q, NULL, 0), OT_EINVAL, "M=0", "M = 0");
  th_check_error(ot_qlinear_fwd(y, x, &q, NULL, -3), OT_EINVAL, "M=-3", "M < 0");
  th_check_error(ot_qlinear_fwd(NULL, x, &q, NULL, 1), OT_EINVAL, "'y' is NULL", "NULL y");
  th_check_error(ot_qlinear_fwd(y, NULL, &q, NULL, 1), OT_EINVAL, "'x' is NULL", "NULL x");
  th_check_error(ot_qlinear_fwd(y, x, NULL, NULL, 1), OT_EINVAL, "'w' is NULL", "NULL W");
  th_check_error(ot_qlinear_fwd(x + 8, x, &q, NULL, 1), OT_EINVAL, "overlaps x", "y overlapping x");
  th_check_error(ot_ref_qlinear_fwd(y, x, &q, NULL, 0), OT_EINVAL, "M=0", "ref M = 0");
  th_check_error(ot_qweight_row(&q, 4, y), OT_EINVAL, "row=4 out of range [0, 4)", "row out of range");
  th_check_error(ot_qweight_row(&q, 0, NULL), OT_EINVAL, "'out' is NULL", "row NULL out");
  ot_qweight bad = q;
  bad.group = 96;
  th_check_error(ot_qlinear_fwd(y, x, &bad, NULL, 1), OT_EINVAL, "group=96", "descriptor with a bad group");
  bad = q;
  bad.scales = NULL;
  th_check_error(ot_qlinear_fwd(y, x, &bad, NULL, 1), OT_EINVAL, "without scales", "int8 without scales");
  bad.data = NULL;
  th_check_error(ot_qlinear_fwd(y, x, &bad, NULL, 1), OT_EINVAL, "data is NULL", "NULL data");
  ot_qweight_free(&q);
}

// ------------------------------------------------------- quantized model ---
static void test_model_file(void) {
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  ot_run_config r = {1, 4, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  if (!th_check(ot_model_create(&m, &c, &r) == OT_OK, "model: %s", ot_last_error())) return;
  ot_model_init(m, 7);
  char path[64];
  snprintf(path, sizeof path, "/tmp/ot_test_quant_%d.safetensors", (int)getpid());
  ot_qmodel *q = NULL;
  // tiny has C = 32: group 64 cannot divide its matrices
  th_check_error(ot_qmodel_from_model(&q, m, OT_QW_INT8, 64), OT_EINVAL, "not a multiple of group=64",
                 "group larger than the input features");
  th_check(q == NULL, "no model on failure");
  static const storage st[] = {{OT_QW_INT8, 32}, {OT_QW_INT8, 0}, {OT_QW_BF16, 0}};
  for (int si = 0; si < 3; si++) {
    char nm[32];
    if (!th_check(ot_qmodel_from_model(&q, m, st[si].kind, st[si].group) == OT_OK, "quantize model %s: %s",
                  sname(st[si], nm), ot_last_error()))
      continue;
    th_check(q->n == ot_model_param_count(m), "one tensor per parameter");
    const ot_qtensor *e = ot_qmodel_find(q, "wte.weight"), *ln = ot_qmodel_find(q, "h.0.ln_1.weight");
    const ot_qtensor *pos = ot_qmodel_find(q, "wpe.weight");
    th_check(e && e->w.kind == st[si].kind && e->w.rows == ot_model_vocab_padded(&c) && e->w.cols == c.d_model,
             "embedding quantized with its padding rows");
    th_check(ln && ln->ndim == 1 && ln->w.kind == OT_QW_F32 && ln->w.cols == c.d_model, "norm gain kept f32");
    th_check(pos && pos->w.kind == OT_QW_F32, "learned positions kept f32");
    // the GPT-2 Conv1D weight is stored [out, in]: dequantized it matches the master buffer
    const int qi = ot_model_param_find(m, "h.1.attn.c_attn.weight");
    const ot_param *p = ot_model_param_at(m, qi);
    const ot_qtensor *t = ot_qmodel_find(q, p->name);
    float *deq = th_falloc(p->numel);
    ot_qweight_dequantize(&t->w, deq);
    th_check(t->w.rows == p->shape[0] && t->w.cols == p->shape[1], "qkv stored [out, in]");
    th_check_nerr(deq, ot_model_params(m) + p->offset, p->numel, st[si].kind == OT_QW_BF16 ? 4e-3 : 1e-2,
                  "dequantized qkv %s", sname(st[si], nm));
    free(deq);
    th_check(ot_quant_file_save(q, path) == OT_OK, "save: %s", ot_last_error());
    ot_qmodel *l = NULL;
    if (th_check(ot_quant_file_load(&l, path) == OT_OK, "load: %s", ot_last_error())) {
      th_check(l->n == q->n && l->kind == q->kind && l->group == q->group, "loaded header");
      const ot_model_config *k = &l->config;
      th_check(!strcmp(k->name, c.name) && k->names == c.names && k->vocab == c.vocab &&
               k->vocab_pad == c.vocab_pad && k->d_model == c.d_model && k->n_layers == c.n_layers &&
               k->n_heads == c.n_heads && k->n_kv_heads == c.n_kv_heads && k->d_ff == c.d_ff &&
               k->max_seq == c.max_seq && k->norm == c.norm && k->mlp == c.mlp && k->pos == c.pos &&
               k->rope_base == c.rope_base && k->rope_style == c.rope_style && k->tied == c.tied &&
               k->bias == c.bias && k->eps == c.eps && k->init_std == c.init_std, "config round trip");
      int diff = 0;
      for (int i = 0; i < q->n; i++) {
        const ot_qtensor *a = &q->t[i], *b = ot_qmodel_find(l, a->name);
        const size_t db = (size_t)a->w.rows * a->w.cols * (a->w.kind == OT_QW_F32 ? 4 : a->w.kind == OT_QW_BF16 ? 2 : 1);
        const size_t sb = ot_qweight_bytes(&a->w) - db;
        if (!b || b->ndim != a->ndim || b->w.kind != a->w.kind || b->w.rows != a->w.rows ||
            b->w.cols != a->w.cols || b->w.group != a->w.group || memcmp(b->w.data, a->w.data, db) ||
            (sb && memcmp(b->w.scales, a->w.scales, sb)))
          diff++;
      }
      th_check(diff == 0, "%d tensors differ after save -> load (%s)", diff, sname(st[si], nm));
      th_check(ot_qmodel_bytes(l) == ot_qmodel_bytes(q), "bytes after load");
    }
    ot_qmodel_free(l);
    ot_qmodel_free(q);
    q = NULL;
  }
  // a 1-D tensor must be f32 with one row
  ot_qmodel bad = {0};
  ot_qtensor bt = {"norm", 1, {OT_QW_BF16, 1, 4, 0, (void *)path, NULL, false}};
  bad.config = c;
  bad.n = 1;
  bad.t = &bt;
  th_check_error(ot_quant_file_save(&bad, path), OT_EINVAL, "1-D tensors are f32", "bf16 1-D tensor");
  // a plain checkpoint is not a quantized file; a file without it
  th_check(ot_model_export(m, path) == OT_OK, "export: %s", ot_last_error());
  ot_qmodel *l = NULL;
  th_check_error(ot_quant_file_load(&l, path), OT_EFORMAT, "expected 'ot-quantized'", "plain checkpoint");
  th_check(l == NULL, "no model on failure");
  unlink(path);
  th_check_error(ot_quant_file_load(&l, path), OT_EIO, "", "missing file");
  th_check_error(ot_quant_file_load(NULL, path), OT_EINVAL, "'out' is NULL", "NULL out");
  ot_model_free(m);
}

int main(void) {
  size_t params0 = ot_mem_current(OT_MEM_PARAMS);
  test_quantize_bounds();
  test_qlinear_vs_ref();
  test_m1_activations();
  test_threads();
  test_bad_input();
  test_model_file();
  th_check(ot_mem_current(OT_MEM_PARAMS) == params0, "every quantized byte freed");
  return th_finish();
}
