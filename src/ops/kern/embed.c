// Embedding kernels, one source for every ISA (see simd.h).
// Forward: OpenMP static over rows. Backward: each thread owns a slice of
// channels and walks the tokens in order, so every gradient element receives
// its additions in token order: deterministic for any thread count, no atomics.
#include "core/simd.h"
#include "embed_k.h"
#include <omp.h>

#define EMB_PAR_MIN 32768  // elements below which one thread is faster
#define INL static inline __attribute__((always_inline))

INL void fwd_rows(void *out, const int32_t *tok, const void *wte, const void *wpe, long N, int T,
                  int C, const int bf16) {
#pragma omp parallel for schedule(static) if (N * (long)C >= EMB_PAR_MIN)
  for (long i = 0; i < N; i++) {
    size_t o = (size_t)i * C, w = (size_t)tok[i] * C, p = (size_t)(i % T) * C;
    int c = 0;
    if (wpe) {
      for (; c + VL <= C; c += VL) vst(out, o + c, vadd(vld(wte, w + c, bf16), vld(wpe, p + c, bf16)), bf16);
      for (; c < C; c++) sst(out, o + c, sld(wte, w + c, bf16) + sld(wpe, p + c, bf16), bf16);
    } else {
      for (; c + VL <= C; c += VL) vst(out, o + c, vld(wte, w + c, bf16), bf16);
      for (; c < C; c++) sst(out, o + c, sld(wte, w + c, bf16), bf16);
    }
  }
}

// out: [N, C] = wte[tok[i]] + wpe[i % T] (wpe may be NULL); dt f32 or bf16.
void OT_K(k_embed_fwd)(void *out, const int32_t *tok, const void *wte, const void *wpe, long N,
                       int T, int C, int bf16) {
  OT_SK_SWITCH(bf16, K, fwd_rows(out, tok, wte, wpe, N, T, C, K));
}

// dst[c0, c1) += src[c0, c1) (src f32 or bf16 at element offset s).
INL void acc_slice(float *dst, const void *src, size_t s, int c0, int c1, const int bf16) {
  int c = c0;
  for (; c + VL <= c1; c += VL) vstore(dst + c, vadd(vload(dst + c), vld(src, s + c, bf16)));
  for (; c < c1; c++) dst[c] += sld(src, s + c, bf16);
}

INL void bwd_slice(float *dwte, float *dwpe, const void *dout, const int32_t *tok, long N, int T,
                   int C, int c0, int c1, const int bf16) {
  for (long i = 0; i < N; i++) {
    size_t o = (size_t)i * C;
    acc_slice(dwte + (size_t)tok[i] * C, dout, o, c0, c1, bf16);
    if (dwpe) acc_slice(dwpe + (size_t)(i % T) * C, dout, o, c0, c1, bf16);
  }
}

// dout: [N, C] -> dwte[tok[i]] += dout[i], dwpe[i % T] += dout[i] (dwpe may be NULL).
void OT_K(k_embed_bwd)(float *dwte, float *dwpe, const void *dout, const int32_t *tok, long N,
                       int T, int C, int bf16) {
#pragma omp parallel if (N * (long)C >= EMB_PAR_MIN)
  {
    // contiguous channel slices, multiples of 16 floats (one cache line) so
    // threads never share a line of dwte/dwpe
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int per = ((C + nt - 1) / nt + 15) & ~15;
    int c0 = id * per, c1 = c0 + per < C ? c0 + per : C;
    if (c0 < c1) {
      OT_SK_SWITCH(bf16, K, bwd_slice(dwte, dwpe, dout, tok, N, T, C, c0, c1, K));
    }
  }
}
