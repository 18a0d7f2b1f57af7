// The GEMM wrapper's bf16 paths (ot__mm_run) against the reference: the
// conversion path on tiles (gemm_cvt.c) with tile budgets small enough to cut
// every dimension into several tiles, and the native path; odd M/N/K, both
// transposes, leading dimensions above the minimum, alpha/beta, bias, the GELU
// epilogue, bf16 or f32 C, and a bf16 A with an f32 B (f32 master weights read
// in place). Also: the workspace stays within the budget whatever the shape.
#include "harness.h"
#include "ops/gemm_impl.h"

static th_rng g_rng = {0xc0f7};

typedef struct {
  bool ta, tb;
  int M, N, K, pad;
  float alpha, beta;
  bool bias, gelu;
  ot_dtype bdt, cdt;   // A is bf16
} cvt_case;

// Runs c through ot__mm_run (workspace from ot__mm_ws) and compares with the
// reference on the same bf16-rounded operands.
static void run_case(const cvt_case *c, const char *tag) {
  const int lda = (c->ta ? c->M : c->K) + c->pad, ldb = (c->tb ? c->K : c->N) + c->pad,
            ldc = c->N + c->pad;
  const size_t na = (size_t)(c->ta ? c->K : c->M) * lda, nb = (size_t)(c->tb ? c->N : c->K) * ldb,
               nc = (size_t)c->M * ldc;
  float *A = th_falloc(na), *B = th_falloc(nb), *C0 = th_falloc(nc), *R = th_falloc(nc),
        *G = th_falloc(nc), *bias = th_falloc((size_t)c->N);
  th_fill(&g_rng, A, na, -1, 1);
  th_fill(&g_rng, B, nb, -1, 1);
  th_fill(&g_rng, C0, nc, -1, 1);
  th_fill(&g_rng, bias, (size_t)c->N, -1, 1);
  th_round_bf16(A, na);
  if (c->bdt == OT_BF16) th_round_bf16(B, nb);
  if (c->cdt == OT_BF16) th_round_bf16(C0, nc);
  memcpy(R, C0, nc * 4);
  ot_ref_gemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, lda, B, ldb, c->beta, R, ldc);
  for (int i = 0; i < c->M; i++) {
    float *r = R + (size_t)i * ldc;
    if (c->bias) for (int j = 0; j < c->N; j++) r[j] += bias[j];
    if (c->gelu) ot_ref_gelu_fwd(r, r, (size_t)c->N);
  }
  uint16_t *Ab = th_to_bf16(A, na), *Bb = c->bdt == OT_BF16 ? th_to_bf16(B, nb) : NULL,
           *Cb = c->cdt == OT_BF16 ? th_to_bf16(C0, nc) : NULL;
  if (!Cb) memcpy(G, C0, nc * 4);
  ot_mm m = {OT_BF16, c->bdt, c->cdt, c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->beta,
             Ab, lda, Bb ? (const void *)Bb : B, ldb, Cb ? (void *)Cb : G, ldc,
             c->bias ? bias : NULL, c->gelu};
  size_t wsz = ot__mm_ws(&m);
  void *ws = wsz ? ot_mem_alloc(wsz, OT_MEM_WORKSPACE) : NULL;
  ot_status s = ot__mm_run(&m, ws, "test");
  ot_mem_free(ws);
  if (Cb) th_from_bf16(Cb, G, nc);
  th_check(s == OT_OK, "%s run ok (%s)", tag, ot_last_error());
  const double tol = c->cdt == OT_BF16 ? 5e-3 : 2e-5;
  th_check_nerr(G, R, nc, tol, "%s B %s C %s tA=%d tB=%d M=%d N=%d K=%d pad=%d alpha=%g beta=%g "
                "bias=%d gelu=%d", tag, ot_dtype_name(c->bdt), ot_dtype_name(c->cdt), c->ta, c->tb,
                c->M, c->N, c->K, c->pad, c->alpha, c->beta, c->bias, c->gelu);
  bool pad_ok = true;   // C's padding columns are never written
  for (int i = 0; i < c->M && c->pad; i++)
    for (int j = c->N; j < ldc; j++) pad_ok &= G[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
  th_check(pad_ok, "%s M=%d N=%d pad=%d leaves C's padding untouched", tag, c->M, c->N, c->pad);
  free(A); free(B); free(C0); free(R); free(G); free(bias);
  free(Ab); free(Bb); free(Cb);
}

// Every shape combination, rotating transposes, padding, alpha/beta, bias/GELU
// (these only with alpha = 1 / beta = 0, the wrapper's contract) and the dtypes.
static void sweep(const char *tag) {
  static const int dims[] = {1, 7, 33, 100, 257};
  static const float ab[][2] = {{1, 0}, {0.5f, 0}, {1, 1}, {-2, 0.75f}};
  int n = 0;
  for (int mi = 0; mi < 5; mi++)
    for (int ni = 0; ni < 5; ni++)
      for (int ki = 0; ki < 5; ki++, n++) {
        cvt_case c = {n & 1, (n >> 1) & 1, dims[mi], dims[ni], dims[ki], n % 3 == 0 ? 3 : 0,
                      ab[n % 4][0], ab[n % 4][1], false, false,
                      (n >> 2) & 1 ? OT_F32 : OT_BF16, (n / 3) & 1 ? OT_F32 : OT_BF16};
        if (c.alpha == 1.0f && c.beta == 0.0f) { c.bias = (n >> 3) & 1; c.gelu = (n >> 4) & 1; }
        run_case(&c, tag);
      }
}

// The workspace is bounded by the budget (one tile per operand), not by M, N or K.
static void test_ws_bound(void) {
  ot__gemm_bf16_set_mode(0);
  ot__gemm_cvt_set_tiles(0, 0);
  const int big[][3] = {{2048, 768, 768}, {2048, 50304, 768}, {2048, 768, 50304}, {65536, 3072, 768}};
  for (int i = 0; i < 4; i++) {
    for (int ta = 0; ta < 2; ta++) {
      const int M = big[i][0], N = big[i][1], K = big[i][2];
      ot_mm m = {OT_BF16, OT_BF16, OT_BF16, ta, true, M, N, K, 1, 0, NULL, ta ? M : K, NULL, K,
                 NULL, N, NULL, false};
      size_t ws = ot__mm_ws(&m), full = ((size_t)M * K + (size_t)K * N + (size_t)M * N) * 4;
      th_check(ws <= ot_gemm_convert_ws_max() + 256, "M=%d N=%d K=%d tA=%d: workspace %zu B within "
               "the %zu B budget (a full conversion: %zu B)", M, N, K, ta, ws, ot_gemm_convert_ws_max(),
               full);
      m.bdt = OT_F32;
      th_check(ot__mm_ws(&m) <= ot_gemm_convert_ws_max() + 256, "f32 B: workspace %zu B within the "
               "budget too", ot__mm_ws(&m));
    }
  }
  ot__gemm_bf16_set_mode(-1);
}

int main(void) {
  printf("bf16 GEMM path by default here: %s\n", ot__gemm_bf16_native() ? "oneDNN native" : "convert to f32");
  static const struct { size_t bytes; int kt; const char *name; } budgets[] = {
      {0, 0, "default tiles"}, {4096, 24, "4 KiB tiles"}, {60000, 64, "60 KB tiles"}};
  ot_isa isas[OT_ISA_COUNT];
  const int nisa = th_isas(isas);
  for (int b = 0; b < 3; b++) {
    ot__gemm_cvt_set_tiles(budgets[b].bytes, budgets[b].kt);
    ot__gemm_bf16_set_mode(0);
    for (int i = 0; i < (b == 0 ? nisa : 1); i++) {   // the conversion kernels are per ISA
      ot_isa_force(isas[i]);
      char tag[64];
      snprintf(tag, sizeof tag, "[%s] convert, %s", ot_isa_name(isas[i]), budgets[b].name);
      sweep(tag);
    }
    ot_isa_unforce();
  }
  ot__gemm_cvt_set_tiles(0, 0);
  ot__gemm_bf16_set_mode(1);   // native where oneDNN has bf16; mixed dtypes still convert
  sweep("native request");
  ot__gemm_cvt_set_tiles(0, 0);
  ot__gemm_bf16_set_mode(-1);
  test_ws_bound();
  ot_gemm_cache_clear();
  return th_finish();
}
