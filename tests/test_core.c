// Core: status messages, dtype conversions (scalar rules and every ISA's
// vectorized path), tracked memory + arenas + scratch, ISA forcing, tensor
// descriptors, profiler summary and trace.
#include "harness.h"
#include "internal.h"
#include <omp.h>

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_scalar_conversions(void) {
  // bf16 round-to-nearest-even: 1 + 2^-8 is halfway between 1 and 1+2^-7 -> even (1)
  th_check(ot_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80, "bf16 tie rounds to even (down)");
  th_check(ot_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82, "bf16 tie rounds to even (up)");
  th_check(ot_f32_to_bf16(bits_f(0x3f808001)) == 0x3f81, "bf16 above tie rounds up");
  th_check(ot_f32_to_bf16(INFINITY) == 0x7f80 && ot_f32_to_bf16(-INFINITY) == 0xff80, "bf16 inf");
  uint16_t nb = ot_f32_to_bf16(bits_f(0x7f800001));  // signalling NaN with low payload only
  th_check((nb & 0x7f80) == 0x7f80 && (nb & 0x7f), "bf16 NaN stays NaN (0x%04x)", nb);
  th_check(ot_f32_to_bf16(bits_f(0x7f7fffff)) == 0x7f80, "bf16 max float rounds to inf");
  th_check(ot_bf16_to_f32(0x4049) == bits_f(0x40490000), "bf16 -> f32 exact");
  // f16
  th_check(ot_f32_to_f16(1.0f) == 0x3c00 && ot_f32_to_f16(-2.0f) == 0xc000, "f16 basic");
  th_check(ot_f32_to_f16(65504.0f) == 0x7bff, "f16 max");
  th_check(ot_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow to inf");
  th_check(ot_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "f16 tie to even (down)");
  th_check(ot_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "f16 tie to even (up)");
  th_check(ot_f32_to_f16(5.9604645e-8f) == 0x0001, "f16 smallest subnormal");
  th_check(ot_f32_to_f16(2.9802322e-8f) == 0x0000, "f16 half of smallest subnormal ties to 0");
  uint16_t nh = ot_f32_to_f16(NAN);
  th_check((nh & 0x7c00) == 0x7c00 && (nh & 0x3ff), "f16 NaN");
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {  // every f16 round-trips exactly
    if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) continue;  // NaN payloads: checked above
    if (ot_f32_to_f16(ot_f16_to_f32((uint16_t)h)) != h) bad++;
  }
  th_check(bad == 0, "all %d non-NaN f16 values round-trip (%d bad)", 65536 - 2046, bad);
  bad = 0;
  for (uint32_t b = 0; b < 65536; b++) {
    if (((b >> 7) & 0xff) == 0xff && (b & 0x7f)) continue;
    if (ot_f32_to_bf16(ot_bf16_to_f32((uint16_t)b)) != b) bad++;
  }
  th_check(bad == 0, "all non-NaN bf16 values round-trip (%d bad)", bad);
}

static void test_vector_conversions(void) {
  ot_isa isas[OT_ISA_COUNT];
  int ni = th_isas(isas);
  th_rng rng = {42};
  const size_t sizes[] = {0, 1, 3, 7, 8, 9, 17, 65, 127, 769, 70001};
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      size_t n = sizes[si];
      float *x = th_falloc(n), *y = th_falloc(n);
      uint16_t *h = th_alloc(2 * n + 2);
      int8_t *q = th_alloc(n + 1);
      th_fill(&rng, x, n, -70000.f, 70000.f);
      for (size_t i = 0; i < n; i += 13) x[i] = th_uniform(&rng, -1e-6f, 1e-6f);  // f16 subnormals
      if (n > 5) { x[1] = NAN; x[2] = INFINITY; x[3] = -0.0f; x[4] = 1.0f + 1.0f / 256; }
      int bad = 0;
      ot_cvt_f32_to_bf16(x, h, n);
      for (size_t i = 0; i < n; i++) {
        uint16_t want = ot_f32_to_bf16(x[i]);
        if (isnan(x[i]) ? !((h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f)) : h[i] != want) bad++;
      }
      ot_cvt_bf16_to_f32(h, y, n);
      for (size_t i = 0; i < n; i++) if (!isnan(x[i]) && y[i] != ot_bf16_to_f32(h[i])) bad++;
      th_check(bad == 0, "[%s] f32<->bf16 n=%zu matches scalar (%d bad)", ot_isa_name(isas[ii]), n, bad);
      bad = 0;
      ot_cvt_f32_to_f16(x, h, n);
      for (size_t i = 0; i < n; i++) {
        uint16_t want = ot_f32_to_f16(x[i]);
        if (isnan(x[i]) ? (h[i] & 0x7c00) != 0x7c00 || !(h[i] & 0x3ff) : h[i] != want) bad++;
      }
      ot_cvt_f16_to_f32(h, y, n);
      for (size_t i = 0; i < n; i++) if (!isnan(x[i]) && y[i] != ot_f16_to_f32(h[i])) bad++;
      th_check(bad == 0, "[%s] f32<->f16 n=%zu matches scalar (%d bad)", ot_isa_name(isas[ii]), n, bad);
      bad = 0;
      th_fill(&rng, x, n, -2.f, 2.f);
      ot_cvt_f32_to_i8(x, q, n, 0.01f);
      for (size_t i = 0; i < n; i++) {
        float r = nearbyintf(x[i] / 0.01f);
        r = r > 127 ? 127 : r < -127 ? -127 : r;
        if (q[i] != (int8_t)r && fabsf(x[i] / 0.01f - r) < 0.499f) bad++;
      }
      th_check(bad == 0, "[%s] f32->i8 n=%zu clamps and rounds (%d bad)", ot_isa_name(isas[ii]), n, bad);
      free(x); free(y); free(h); free(q);
    }
  }
  ot_isa_unforce();
  float a[4] = {1, 2, 3, 4}; uint16_t b[4]; float c[4];
  th_check(ot_convert(a, OT_F32, b, OT_BF16, 4) == OT_OK && ot_convert(b, OT_BF16, c, OT_F32, 4) == OT_OK &&
           c[3] == 4.0f, "ot_convert f32->bf16->f32");
  th_check_error(ot_convert(a, OT_I32, b, OT_BF16, 4), OT_EINVAL, "i32", "ot_convert rejects i32");
  // short runs converted from inside a parallel region, each thread its own (the ViT patch
  // unfold's pattern: 16 pixels a call): the scalar conversion's bits, both ways
  enum { R = 300, L = 16 };
  float *x = th_falloc(R * L), *y = th_falloc(R * L);
  uint16_t *h = th_alloc(2 * R * L);
  th_fill(&rng, x, R * L, -3.0f, 3.0f);
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (int r = 0; r < R; r++) {
    (void)ot_convert(x + r * L, OT_F32, h + r * L, OT_BF16, L);
    (void)ot_convert(h + r * L, OT_BF16, y + r * L, OT_F32, L);
    for (int i = r * L; i < (r + 1) * L; i++) bad += h[i] != ot_f32_to_bf16(x[i]) || y[i] != ot_bf16_to_f32(h[i]);
  }
  th_check(bad == 0, "short conversions inside a parallel region match scalar (%d bad)", bad);
  free(x); free(y); free(h);
}

static void test_memory(void) {
  size_t before = ot_mem_current(OT_MEM_ACTIVATIONS);
  ot_mem_reset_peak();
  void *p = ot_mem_alloc(1000, OT_MEM_ACTIVATIONS);
  th_check(p && ((uintptr_t)p % 64) == 0, "tracked allocation is 64-byte aligned");
  th_check(ot_mem_current(OT_MEM_ACTIVATIONS) == before + 1000, "current counts exact bytes");
  void *p2 = ot_mem_alloc(5000, OT_MEM_ACTIVATIONS);
  ot_mem_free(p);
  th_check(ot_mem_current(OT_MEM_ACTIVATIONS) == before + 5000, "free subtracts");
  th_check(ot_mem_peak(OT_MEM_ACTIVATIONS) == before + 6000, "peak remembers the high-water mark");
  ot_mem_free(p2);
  ot_mem_free(NULL);
  th_check(ot_mem_current(OT_MEM_ACTIVATIONS) == before, "back to the start");
  // the total peak: the most held at once over all categories, not the sum of their peaks
  size_t all = 0;
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) all += ot_mem_current((ot_mem_category)c);
  ot_mem_reset_peak();
  void *p3 = ot_mem_alloc(3000, OT_MEM_PARAMS);
  ot_mem_free(p3);
  void *p4 = ot_mem_alloc(2000, OT_MEM_GRADS);
  th_check(ot_mem_peak_total() == all + 3000, "total peak %zu = %zu + 3000 (not + 5000)", ot_mem_peak_total(), all);
  ot_mem_free(p4);
  void *huge = ot_mem_alloc((size_t)1 << 62, OT_MEM_PARAMS);
  th_check(huge == NULL && strstr(ot_last_error(), "out of memory") != NULL,
           "impossible allocation fails with a message: %s", ot_last_error());

  ot_arena a;
  th_check(ot_arena_init(&a, "acts", 4096, OT_MEM_ACTIVATIONS) == OT_OK, "arena init");
  th_check(ot_mem_current(OT_MEM_ACTIVATIONS) == before + 4096, "arena capacity is accounted");
  void *x = ot_arena_alloc(&a, 10), *y = ot_arena_alloc(&a, 100);
  th_check(x && y && ((uintptr_t)y % 64) == 0 && (uint8_t *)y - (uint8_t *)x == 64, "arena bump is aligned");
  size_t m = ot_arena_mark(&a);
  void *z = ot_arena_alloc(&a, 3000);
  th_check(z != NULL, "arena alloc within capacity");
  th_check(ot_arena_alloc(&a, 2000) == NULL && strstr(ot_last_error(), "acts") != NULL,
           "arena overflow names the arena: %s", ot_last_error());
  ot_arena_release(&a, m);
  th_check(ot_arena_alloc(&a, 2000) != NULL, "release to a mark frees the tail");
  th_check(a.high >= 64 + 128 + 3008, "arena high-water mark");
  ot_arena_destroy(&a);
  th_check(ot_mem_current(OT_MEM_ACTIVATIONS) == before, "arena destroy returns its bytes");

  size_t ws = ot_mem_current(OT_MEM_WORKSPACE);
  void *s1 = ot_scratch(100);
  void *s2 = ot_scratch(50);
  th_check(s1 && s1 == s2, "scratch is reused when large enough");
  th_check(ot_scratch(1 << 20) != NULL && ot_mem_current(OT_MEM_WORKSPACE) >= ws + (1 << 20), "scratch grows, tracked");
  ot_scratch_release();
  th_check(ot_mem_current(OT_MEM_WORKSPACE) == ws, "scratch release");

  char buf[2048];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  ot_mem_report(f);
  fclose(f);
  th_check(strstr(buf, "parameters") && strstr(buf, "kv_cache") && strstr(buf, "peak"), "memory report lists categories");
}

static void test_isa_and_errors(void) {
  th_check(ot_isa_force(OT_ISA_PORTABLE) == OT_OK && ot_isa_active() == OT_ISA_PORTABLE, "force portable");
  ot_isa_unforce();
  if (!ot_isa_supported(OT_ISA_AVX512))
    th_check_error(ot_isa_force(OT_ISA_AVX512), OT_EUNSUPPORTED, "avx512", "forcing an unsupported ISA");
  th_check_error(ot_isa_force((ot_isa)7), OT_EINVAL, "range", "forcing a bogus ISA");
  const ot_cpu_features *c = ot_cpu();
  printf("cpu: avx2=%d fma=%d f16c=%d avx512f=%d bw=%d vl=%d bf16=%d vnni=%d -> active %s\n", c->avx2, c->fma,
         c->f16c, c->avx512f, c->avx512bw, c->avx512vl, c->avx512_bf16, c->avx512_vnni, ot_isa_name(ot_isa_active()));
  th_check(ot_error(OT_EIO, "x=%d", 5) == OT_EIO && strcmp(ot_last_error(), "x=5") == 0, "error message set");
  // a caller prefixing the message of the call that failed (the argument is the buffer itself)
  ot_error(OT_EINVAL, "vocab_pad=48 must be a power of two");
  ot_error(OT_EINVAL, "model: %s (set with --model)", ot_last_error());
  th_check(strcmp(ot_last_error(), "model: vocab_pad=48 must be a power of two (set with --model)") == 0,
           "an error prefixing ot_last_error() keeps it whole: %s", ot_last_error());
  ot_clear_error();
  th_check(ot_last_error()[0] == 0, "error cleared");
  th_check(strcmp(ot_status_name(OT_EFORMAT), "malformed input") == 0, "status names");
  int64_t shp[3] = {2, 3, 4};
  ot_tensor t = ot_tensor_make(NULL, OT_BF16, 3, shp);
  th_check(ot_tensor_numel(&t) == 24 && t.stride[0] == 12 && t.stride[2] == 1 && ot_tensor_is_contiguous(&t), "tensor descriptor");
  t.stride[0] = 13;
  th_check(!ot_tensor_is_contiguous(&t), "non-contiguous detected");
  th_check(ot_dtype_size(OT_BF16) == 2 && ot_dtype_size(OT_I8) == 1 && !strcmp(ot_dtype_name(OT_F16), "f16"), "dtype table");
}

static void test_profiler(void) {
  int t = ot_prof_begin("off", 0, 0);
  th_check(t < 0, "profiler off: begin is a no-op");
  ot_prof_enable(true);
  ot_prof_reset();
  for (int i = 0; i < 3; i++) {
    int a = ot_prof_begin("outer", 2e9, 0);
    int b = ot_prof_begin("inner", 0, 1e9);
    volatile double s = 0; for (int k = 0; k < 100000; k++) s += k;
    ot_prof_end(b);
    ot_prof_end(a);
  }
  char buf[4096];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  ot_prof_summary(f);
  fclose(f);
  th_check(strstr(buf, "outer") && strstr(buf, "inner") && strstr(buf, "100.0%"), "summary lists spans:\n%s", buf);
  const char *path = "build_prof_trace_test.json";
  th_check(ot_prof_write_trace(path) == OT_OK, "trace written");
  FILE *tf = fopen(path, "r");
  size_t n = tf ? fread(buf, 1, sizeof buf - 1, tf) : 0;
  buf[n] = 0;
  if (tf) fclose(tf);
  remove(path);
  int events = 0;
  for (char *p = buf; (p = strstr(p, "\"ph\":\"X\"")); p++) events++;
  th_check(events == 6 && strstr(buf, "traceEvents"), "trace holds 6 complete events (%d)", events);
  th_check_error(ot_prof_write_trace("/nonexistent-dir/x.json"), OT_EIO, "nonexistent-dir", "trace to a bad path");
  ot_prof_enable(false);
}

int main(void) {
  test_scalar_conversions();
  test_vector_conversions();
  test_memory();
  test_isa_and_errors();
  test_profiler();
  return th_finish();
}
