// The own GEMM's kernels, one source for every ISA (see simd.h): BLIS-style
// packing of A into MR-row panels and of B into NR-column panels (converting
// bf16 / f16 storage to f32 on the way), and the macro-kernel that runs the
// register-blocked MR x NR micro-kernel over a packed block with the epilogue.
//   micro-tile: AVX-512 12 x 32 (24 accumulators of 32 registers), AVX2 6 x 16
//   (12 of 16), portable 4 x 4 scalars. Per k step the micro-kernel loads NV
//   vectors of the B panel and broadcasts MR values of the A panel: MR*NV
//   independent FMAs, enough to cover the FMA latency on both pipes.
#include "core/simd.h"
#include "sgemm_k.h"

#if defined(OT_ARCH_AVX512)
#  define MR 12
#  define NV 2
#elif defined(OT_ARCH_AVX2)
#  define MR 6
#  define NV 2
#else
#  define MR 4
#  define NV 4
#endif
#define NR (NV * VL)
#define CH 256            // conversion chunk of the packing routines (floats)
#define INL static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

void OT_K(k_sg_tile)(int *mr, int *nr) { *mr = MR; *nr = NR; }

// t[0..n) = the n (<= CH) values of storage kind sk at src, as f32.
INL void cvt_chunk(float *t, const void *src, int sk, int n) {
  int i = 0;
  for (; i + VL <= n; i += VL) vstore(t + i, vld(src, (size_t)i, sk));
  if (i < n) vstore_part(t + i, vld_part(src, (size_t)i, n - i, sk), n - i);
}

// dst[k*stride] = the n values of storage kind sk at src (a strided scatter of
// one contiguous source line: a transposing pack).
INL void scatter_line(float *dst, size_t stride, const void *src, int sk, int n) {
  float t[CH];
  for (int k0 = 0; k0 < n; k0 += CH) {
    const int c = n - k0 < CH ? n - k0 : CH;
    const float *s;
    if (sk == OT_SK_F32) s = (const float *)src + k0;
    else { cvt_chunk(t, (const uint16_t *)src + k0, sk, c); s = t; }
    float *d = dst + (size_t)k0 * stride;
    for (int k = 0; k < c; k++) d[(size_t)k * stride] = s[k];
  }
}

// dst[0..W) = the first w values at src (storage kind sk), zeros after; W = MR or NR.
INL void copy_pad(float *dst, const void *src, int sk, int w, int W) {
  if (w == W && sk == OT_SK_F32) {
    int i = 0;
    for (; i + VL <= W; i += VL) vstore(dst + i, vload((const float *)src + i));
    for (; i < W; i++) dst[i] = ((const float *)src)[i];
    return;
  }
  int i = 0;
  for (; i + VL <= w; i += VL) vstore(dst + i, vld(src, (size_t)i, sk));
  if (i < w) { vstore_part(dst + i, vld_part(src, (size_t)i, w - i, sk), w - i); i = w; }
  for (; i < W; i++) dst[i] = 0.0f;
}

INL const char *elt(const void *p, size_t i, int sk) { return (const char *)p + i * (sk ? 2 : 4); }

// d[k*W + r] = the k-th value of stored row r (r < rows; each row contiguous in k, rows ld
// elements apart, storage kind sk), zero for rows <= r < W; k < kc: the transposing pack of
// A's row panels (W = MR) and of B's transposed column panels (W = NR). VL x VL blocks go
// through registers (vtranspose); with W < VL each store's VL - W extra lanes land on the
// next k's row (or past the panel, on a panel packed later or the buffer's slack) and are
// overwritten.
INL void pack_rows_t(float *d, int W, const void *src, size_t ld, int sk, int rows, int kc) {
#if VL > 1
  const int kv = kc / VL * VL;
  for (int k = 0; k < kv; k += VL)
    for (int r0 = 0; r0 < W; r0 += VL) {
      vf t[VL];
      UNROLL for (int i = 0; i < VL; i++)
        t[i] = r0 + i < rows ? vld(elt(src, (size_t)(r0 + i) * ld, sk), (size_t)k, sk) : vzero();
      vtranspose(t);   // t[kk] lane i = row r0 + i, value k + kk
      UNROLL for (int kk = 0; kk < VL; kk++) vstore(d + (size_t)(k + kk) * W + r0, t[kk]);
    }
  for (int r = 0; r < W; r++)
    for (int k = kv; k < kc; k++)
      d[(size_t)k * W + r] = r < rows ? sld(elt(src, (size_t)r * ld, sk), (size_t)k, sk) : 0.0f;
#else
  for (int r = 0; r < rows; r++) scatter_line(d + r, (size_t)W, elt(src, (size_t)r * ld, sk), sk, kc);
  for (int r = rows; r < W; r++)
    for (int k = 0; k < kc; k++) d[(size_t)k * W + r] = 0.0f;
#endif
}

void OT_K(k_sg_pack_a)(float *dst, const void *A, int ask, size_t lda, int ta, int mc, int kc) {
  if (ta && ask == OT_SK_F32) {   // A(i, k) at A[k*lda + i]: each stored row read once, dealt to the panels
#if VL >= MR
    // one vector per panel row. A whole vector is stored (its VL - MR extra lanes land on the
    // next k's row and are overwritten by it) except at the panel's last k, where they would
    // land on the next panel's first row; the load reads VL values where they lie inside the
    // block's mc columns. Masked stores made this pack 9% of the weight gradient's time with
    // AVX-512 (5% after) and cost the AVX2 kernels 10-15% of the FMA peak on those shapes.
    const int np = (mc + MR - 1) / MR;
    for (int k = 0; k < kc; k++) {
      const float *src = (const float *)A + (size_t)k * lda;
      for (int p = 0; p < np; p++) {
        float *d = dst + (size_t)p * MR * kc + (size_t)k * MR;
        const int w = mc - p * MR < MR ? mc - p * MR : MR;
        const vf x = p * MR + VL <= mc ? vload(src + p * MR) : vload_part(src + p * MR, w);
        if (k + 1 < kc) vstore(d, x);   // lanes past w are zeros (vload_part) or spill
        else vstore_part(d, x, MR);
      }
    }
#else
    for (int k = 0; k < kc; k++) {
      const float *src = (const float *)A + (size_t)k * lda;
      for (int p = 0; p * MR < mc; p++)
        copy_pad(dst + (size_t)p * MR * kc + (size_t)k * MR, src + p * MR, OT_SK_F32,
                 mc - p * MR < MR ? mc - p * MR : MR, MR);
    }
#endif
    return;
  }
  for (int p = 0; !ta && p * MR < mc; p++)   // A(i, k) at A[i*lda + k]: rows transposed into panels
    pack_rows_t(dst + (size_t)p * MR * kc, MR, elt(A, (size_t)p * MR * lda, ask), lda, ask,
                mc - p * MR < MR ? mc - p * MR : MR, kc);

  if (!ta) return;
  // 16-bit A stored transposed: each stored row's mc values converted by vectors
  // (RCH at a time, a multiple of MR), then dealt out to the panels
  enum { RCH = CH / MR * MR };
  float t[CH];
  for (int i0 = 0; i0 < mc; i0 += RCH) {
    const int n = mc - i0 < RCH ? mc - i0 : RCH;
    for (int k = 0; k < kc; k++) {
      cvt_chunk(t, elt(A, (size_t)k * lda + (size_t)i0, ask), ask, n);
      for (int q = 0; q * MR < n; q++) {
        float *d = dst + (size_t)(i0 / MR + q) * MR * kc + (size_t)k * MR;
        const int w = n - q * MR < MR ? n - q * MR : MR;
        for (int r = 0; r < MR; r++) d[r] = r < w ? t[q * MR + r] : 0.0f;
      }
    }
  }
}

void OT_K(k_sg_pack_b)(float *dst, const void *B, int bsk, size_t ldb, int tb, int kc, int nc, int p0, int p1) {
  if (!tb) {    // B(k, j) at B[k*ldb + j]: each stored row's stretch read once, NR values to each panel
    for (int k = 0; k < kc; k++)
      for (int p = p0; p < p1; p++)
        copy_pad(dst + (size_t)p * NR * kc + (size_t)k * NR, elt(B, (size_t)k * ldb + (size_t)p * NR, bsk), bsk,
                 nc - p * NR < NR ? nc - p * NR : NR, NR);
    return;
  }
  for (int p = p0; p < p1; p++)   // B(k, j) at B[j*ldb + k]: stored rows transposed into panels
    pack_rows_t(dst + (size_t)p * NR * kc, NR, elt(B, (size_t)p * NR * ldb, bsk), ldb, bsk,
                nc - p * NR < NR ? nc - p * NR : NR, kc);
}

// acc = a-panel (MR x kc) times b-panel (kc x NR), k in order.
INL void micro(const float *restrict a, const float *restrict b, size_t bk, int kc, vf acc[MR][NV]) {
  UNROLL for (int i = 0; i < MR; i++) UNROLL for (int v = 0; v < NV; v++) acc[i][v] = vzero();
  _Pragma("GCC unroll 4") for (int k = 0; k < kc; k++) {
    vf bv[NV];
    UNROLL for (int v = 0; v < NV; v++) bv[v] = vload(b + v * VL);
    UNROLL for (int i = 0; i < MR; i++) {
      const vf ai = vset1(a[i]);
      UNROLL for (int v = 0; v < NV; v++) acc[i][v] = vfmadd(ai, bv[v], acc[i][v]);
    }
    a += MR;
    b += bk;
  }
}

// One C value vector: w (<= VL) values of storage kind csk at c.
INL vf cld(const void *c, int w, int csk) { return w == VL ? vld(c, 0, csk) : vld_part(c, 0, w, csk); }
INL void cst(void *c, vf x, int w, int csk) {
  if (w == VL) vst(c, 0, x, csk); else vst_part(c, 0, x, w, csk);
}

// The epilogue of one m x n (<= MR x NR) tile at C (see ot_sg_epi).
INL void epilogue(vf acc[MR][NV], void *C, int csk, size_t ldc, int m, int n, const ot_sg_epi *e,
                  const float *bias) {
  const vf al = vset1(e->alpha), be = vset1(e->beta);
  const size_t es = csk ? 2 : 4;
  for (int i = 0; i < m; i++) {
    char *row = (char *)C + (size_t)i * ldc * es;
    UNROLL for (int v = 0; v < NV; v++) {
      const int j = v * VL;
      if (j >= n) break;
      const int w = n - j < VL ? n - j : VL;
      vf x = vmul(acc[i][v], al);
      if (!e->first) x = vadd(x, cld(row + j * es, w, csk));
      else if (e->beta != 0.0f) x = vfmadd(be, cld(row + j * es, w, csk), x);
      if (bias) x = vadd(x, w == VL ? vload(bias + j) : vload_part(bias + j, w));
      cst(row + j * es, x, w, csk);
    }
  }
}

void OT_K(k_sg_macro)(const float *Ap, const float *Bp, size_t bk, size_t bpan, int mc, int nc, int kc,
                      void *C, int csk, size_t ldc, const ot_sg_epi *e) {
  const size_t es = csk ? 2 : 4;
  for (int jr = 0; jr < nc; jr += NR) {
    const float *bp = Bp + (size_t)(jr / NR) * bpan;
    const int n = nc - jr < NR ? nc - jr : NR;
    const float *bias = e->last && e->bias ? e->bias + jr : NULL;
    for (int ir = 0; ir < mc; ir += MR) {
      vf acc[MR][NV];
      {   // the C tile's lines, wanted by the epilogue
        const char *c0 = (const char *)C + ((size_t)ir * ldc + (size_t)jr) * es;
        for (int i = 0; i < MR && ir + i < mc; i++) {
          __builtin_prefetch(c0 + (size_t)i * ldc * es, 1, 3);
          __builtin_prefetch(c0 + (size_t)i * ldc * es + NR * es - 1, 1, 3);
        }
      }
      if (bk == NR) micro(Ap + (size_t)(ir / MR) * MR * kc, bp, NR, kc, acc);   // (a constant stride)
      else micro(Ap + (size_t)(ir / MR) * MR * kc, bp, bk, kc, acc);
      epilogue(acc, (char *)C + ((size_t)ir * ldc + (size_t)jr) * es, csk, ldc, mc - ir < MR ? mc - ir : MR,
               n, e, bias);
    }
  }
}
