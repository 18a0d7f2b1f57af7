// The f32 FMA peak of this machine, measured (the denominator of MFU in the
// training progress, and the roofline of `ot bench ops`).
#include "internal.h"
#include "ot/ops.h"

// The probe kernel lives in src/ops/kern/peak.c (compiled per ISA).
OT_KDECL(double, k_fma_peak, (long iters, float *sink));

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
