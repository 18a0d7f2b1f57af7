// Machine probes: the f32 FMA peak, measured (the denominator of MFU in the
// training progress, and the roofline of `ot bench ops`), and the STREAM
// triad kernels the benchmarks measure the memory bandwidth with.
#include "internal.h"
#include "ot/ops.h"
#include "kern/peak_k.h"

double ot_measure_fma_peak(void) {
  float sink = 0;
  const long iters = 20000000;
  OT_KPICK(k_fma_peak)(iters / 10, &sink);   // warm up the clocks
  double best = 0;
  for (int r = 0; r < 5; r++) {
    double t0 = ot_now();
    double fl = OT_KPICK(k_fma_peak)(iters, &sink);
    double g = fl / (ot_now() - t0) * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

void ot_stream_init(float *a, float *b, float *c, size_t n) { OT_KPICK(k_stream_init)(a, b, c, n); }

void ot_stream_triad(float *a, const float *b, const float *c, float s, size_t n, bool streaming) {
  if (streaming) OT_KPICK(k_stream_triad_nt)(a, b, c, s, n);
  else OT_KPICK(k_stream_triad)(a, b, c, s, n);
}
