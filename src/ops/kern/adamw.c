// AdamW step and deterministic sum of squares, one source for every ISA
// (see simd.h). Both are memory-bound single passes; the AdamW update is
// element-wise, so its result does not depend on the thread count, and the
// sum of squares uses fixed chunks summed in a fixed order.
#include "core/simd.h"
#include "adamw_k.h"

#define ADAMW_BLK 4096          // elements per OpenMP work item (multiple of 16)
#define ADAMW_PAR_MIN 65536     // below this, one thread
#define SUMSQ_CHUNK 65536       // elements per deterministic chunk
#define SUMSQ_ROUND 1024        // chunks per parallel round (stack partials)
#define SUMSQ_BLOCK 1024        // f32 partials are promoted to double every BLOCK elements

// One AdamW update of VL lanes (n < VL: partial tail). Coefficients come from
// the entry point (bias corrections folded in, computed in double there).
static inline void adamw_vec(float *p, const float *g, float *m, float *v, uint16_t *pb,
                             const int pbsk, size_t i, int n, vf b1, vf omb1, vf b2, vf omb2, vf eps,
                             vf decay, vf ss, vf isb2, vf gs) {
  vf gv, mv, vv, pv;
  if (n == VL) { gv = vload(g + i); mv = vload(m + i); vv = vload(v + i); pv = vload(p + i); }
  else { gv = vload_part(g + i, n); mv = vload_part(m + i, n); vv = vload_part(v + i, n); pv = vload_part(p + i, n); }
  gv = vmul(gv, gs);
  mv = vfmadd(b1, mv, vmul(omb1, gv));              // m = b1 m + (1-b1) g
  vv = vfmadd(b2, vv, vmul(omb2, vmul(gv, gv)));    // v = b2 v + (1-b2) g^2
  vf den = vfmadd(vsqrt(vv), isb2, eps);            // sqrt(v)/sqrt(bc2) + eps
  pv = vfnmadd(ss, vdiv(mv, den), vmul(pv, decay)); // p(1-lr wd) - lr/bc1 * m/den
  if (n == VL) {
    vstore(m + i, mv); vstore(v + i, vv); vstore(p + i, pv);
    if (pb) vst(pb, i, pv, pbsk);
  } else {
    vstore_part(m + i, mv, n); vstore_part(v + i, vv, n); vstore_part(p + i, pv, n);
    if (pb) vst_part(pb, i, pv, n, pbsk);
  }
}

// p, g, m, v: [n] f32; pb: [n] 16-bit copy of the new p (storage kind pbsk:
// OT_SK_BF16 or OT_SK_F16) or NULL. c = {b1, 1-b1, b2, 1-b2, eps, 1 - lr*wd,
// lr/bc1, 1/sqrt(bc2), grad_scale}.
void OT_K(k_adamw)(float *p, const float *g, float *m, float *v, uint16_t *pb, int pbsk, size_t n,
                   const float c[9]) {
  const vf b1 = vset1(c[0]), omb1 = vset1(c[1]), b2 = vset1(c[2]), omb2 = vset1(c[3]);
  const vf eps = vset1(c[4]), decay = vset1(c[5]), ss = vset1(c[6]), isb2 = vset1(c[7]);
  const vf gs = vset1(c[8]);
  long nb = (long)((n + ADAMW_BLK - 1) / ADAMW_BLK);
#pragma omp parallel for schedule(static) if (n >= ADAMW_PAR_MIN)
  for (long b = 0; b < nb; b++) {
    size_t i0 = (size_t)b * ADAMW_BLK, i1 = i0 + ADAMW_BLK < n ? i0 + ADAMW_BLK : n;
    size_t i = i0;
    if (pbsk == OT_SK_F16) {
      for (; i + VL <= i1; i += VL)
        adamw_vec(p, g, m, v, pb, OT_SK_F16, i, VL, b1, omb1, b2, omb2, eps, decay, ss, isb2, gs);
      if (i < i1)
        adamw_vec(p, g, m, v, pb, OT_SK_F16, i, (int)(i1 - i), b1, omb1, b2, omb2, eps, decay, ss, isb2, gs);
    } else {
      for (; i + VL <= i1; i += VL)
        adamw_vec(p, g, m, v, pb, OT_SK_BF16, i, VL, b1, omb1, b2, omb2, eps, decay, ss, isb2, gs);
      if (i < i1)
        adamw_vec(p, g, m, v, pb, OT_SK_BF16, i, (int)(i1 - i), b1, omb1, b2, omb2, eps, decay, ss, isb2, gs);
    }
  }
}

// Sum of squares of one chunk (n <= SUMSQ_CHUNK): f32 vector partials over
// blocks of SUMSQ_BLOCK elements (<= 32 adds per lane), each block's lanes
// added in double.
static double sumsq_chunk(const float *g, size_t n) {
  double tot = 0;
  float lanes[4 * VL];
  for (size_t i = 0; i < n;) {
    size_t e = i + SUMSQ_BLOCK < n ? i + SUMSQ_BLOCK : n;
    vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
    for (; i + 4 * VL <= e; i += 4 * VL) {
      vf x0 = vload(g + i), x1 = vload(g + i + VL), x2 = vload(g + i + 2 * VL), x3 = vload(g + i + 3 * VL);
      a0 = vfmadd(x0, x0, a0); a1 = vfmadd(x1, x1, a1);
      a2 = vfmadd(x2, x2, a2); a3 = vfmadd(x3, x3, a3);
    }
    for (; i + VL <= e; i += VL) { vf x = vload(g + i); a0 = vfmadd(x, x, a0); }
    if (i < e) { vf x = vload_part(g + i, (int)(e - i)); a1 = vfmadd(x, x, a1); i = e; }
    vstore(lanes, a0); vstore(lanes + VL, a1); vstore(lanes + 2 * VL, a2); vstore(lanes + 3 * VL, a3);
    for (int l = 0; l < 4 * VL; l++) tot += (double)lanes[l];
  }
  return tot;
}

// g: [n] f32 -> sum of g^2 in double. Chunks of SUMSQ_CHUNK elements are
// summed independently (in parallel) and their results added in chunk order,
// so the value depends on n and the ISA only, never on the thread count.
double OT_K(k_sumsq)(const float *g, size_t n) {
  size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  double tot = 0;
  for (size_t r0 = 0; r0 < nch; r0 += SUMSQ_ROUND) {
    double part[SUMSQ_ROUND];
    long nr = (long)(nch - r0 < SUMSQ_ROUND ? nch - r0 : SUMSQ_ROUND);
#pragma omp parallel for schedule(static) if (nr > 1)
    for (long c = 0; c < nr; c++) {
      size_t i0 = (r0 + (size_t)c) * SUMSQ_CHUNK;
      size_t len = n - i0 < SUMSQ_CHUNK ? n - i0 : SUMSQ_CHUNK;
      part[c] = sumsq_chunk(g + i0, len);
    }
    for (long c = 0; c < nr; c++) tot += part[c];
  }
  return tot;
}
