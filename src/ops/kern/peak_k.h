// Prototypes of the machine probes (kern/peak.c): the FMA peak loop and the
// STREAM kernels, one variant per ISA; included by the kernels and by ops/peak.c.
#ifndef OT_KERN_PEAK_K_H
#define OT_KERN_PEAK_K_H
#include "internal.h"

// Runs `iters` rounds of independent FMA chains on every OpenMP thread; returns
// the flops done (the sum lands in *sink so nothing is optimized away).
OT_KDECL(double, k_fma_peak, (long iters, float *sink));
// STREAM triad a = b + s*c over n floats (OpenMP static partition); _nt: with
// streaming stores where the ISA has them; init: a = 1, b = 2, c = 0.5 with the
// same partition (first touch).
OT_KDECL(void, k_stream_triad, (float *a, const float *b, const float *c, float s, size_t n));
OT_KDECL(void, k_stream_triad_nt, (float *a, const float *b, const float *c, float s, size_t n));
OT_KDECL(void, k_stream_init, (float *a, float *b, float *c, size_t n));

#endif
