// Machine-roofline probes used by `ot bench`: FMA peak of this ISA's vector
// unit and a STREAM-style triad. Not operators; kept here so that the FMA loop
// is compiled with the ISA's flags like every kernel.
#include "core/simd.h"
#include "peak_k.h"

// Runs `iters` rounds of 12 independent FMA chains per thread on all OpenMP
// threads; returns the number of floating-point operations performed
// (2 per lane per FMA). The result is consumed so the loop is not removed.
double OT_K(k_fma_peak)(long iters, float *sink) {
  double flops = 0;
#pragma omp parallel reduction(+ : flops)
  {
    vf a0 = vset1(1.0f), a1 = vset1(1.1f), a2 = vset1(1.2f), a3 = vset1(1.3f), a4 = vset1(1.4f),
       a5 = vset1(1.5f), a6 = vset1(1.6f), a7 = vset1(1.7f), a8 = vset1(1.8f), a9 = vset1(1.9f),
       a10 = vset1(2.0f), a11 = vset1(2.1f);
    const vf m = vset1(0.9999999f), c = vset1(1e-7f);
    for (long i = 0; i < iters; i++) {
      a0 = vfmadd(a0, m, c); a1 = vfmadd(a1, m, c); a2 = vfmadd(a2, m, c); a3 = vfmadd(a3, m, c);
      a4 = vfmadd(a4, m, c); a5 = vfmadd(a5, m, c); a6 = vfmadd(a6, m, c); a7 = vfmadd(a7, m, c);
      a8 = vfmadd(a8, m, c); a9 = vfmadd(a9, m, c); a10 = vfmadd(a10, m, c); a11 = vfmadd(a11, m, c);
    }
    vf s = vadd(vadd(vadd(a0, a1), vadd(a2, a3)), vadd(vadd(a4, a5), vadd(a6, a7)));
    s = vadd(s, vadd(vadd(a8, a9), vadd(a10, a11)));
#pragma omp critical
    *sink += vsum(s);
    flops += 2.0 * VL * 12.0 * (double)iters;
  }
  return flops;
}

// STREAM triad a = b + s*c over n floats, OpenMP static (first touch must use
// the same partition: see k_stream_init).
void OT_K(k_stream_triad)(float *a, const float *b, const float *c, float s, size_t n) {
  long nv = (long)(n / VL);
  const vf vs = vset1(s);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < nv; i++) vstore(a + i * VL, vfmadd(vs, vload(c + i * VL), vload(b + i * VL)));
  for (size_t i = (size_t)nv * VL; i < n; i++) a[i] = b[i] + s * c[i];
}

void OT_K(k_stream_init)(float *a, float *b, float *c, size_t n) {
  long nv = (long)(n / VL);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < nv; i++) {
    vstore(a + i * VL, vset1(1.0f)); vstore(b + i * VL, vset1(2.0f)); vstore(c + i * VL, vset1(0.5f));
  }
  for (size_t i = (size_t)nv * VL; i < n; i++) { a[i] = 1; b[i] = 2; c[i] = 0.5f; }
}

// The same triad with non-temporal (streaming) stores where the ISA has them:
// no read-for-ownership of `a`, so it shows the DRAM bandwidth that in-place
// kernels (read and write the same lines) can reach.
void OT_K(k_stream_triad_nt)(float *a, const float *b, const float *c, float s, size_t n) {
#if defined(OT_ARCH_PORTABLE)
  OT_K(k_stream_triad)(a, b, c, s, n);
#else
  long nv = (long)(n / VL);
  const vf vs = vset1(s);
  if (((uintptr_t)a & 63) != 0) { OT_K(k_stream_triad)(a, b, c, s, n); return; }
#pragma omp parallel for schedule(static)
  for (long i = 0; i < nv; i++) {
#if defined(OT_ARCH_AVX512)
    _mm512_stream_ps(a + i * VL, vfmadd(vs, vload(c + i * VL), vload(b + i * VL)));
#else
    _mm256_stream_ps(a + i * VL, vfmadd(vs, vload(c + i * VL), vload(b + i * VL)));
#endif
  }
  _mm_sfence();
  for (size_t i = (size_t)nv * VL; i < n; i++) a[i] = b[i] + s * c[i];
#endif
}
