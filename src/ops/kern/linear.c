// Kernels around the GEMMs of linear and fused QKV (one source for every ISA,
// see simd.h): strided f32/bf16 matrix copy-convert, deterministic bias
// gradient (column sums) and the QKV per-head scatter/gather. All are
// element-wise or per-column sequential, so results do not depend on the
// thread count.
#include "core/simd.h"
#include "linear_k.h"

#define LIN_PAR_MIN 32768   // elements below which a kernel stays on one thread

// d[0..n) = s[0..n), converting f32 <-> bf16 as the flags say.
static inline void copy_row(void *d, int dbf, const void *s, int sbf, size_t n) {
  size_t i = 0;
  for (; i + VL <= n; i += VL) vst(d, i, vld(s, i, sbf), dbf);
  if (i < n) vst_part(d, i, vld_part(s, i, (int)(n - i), sbf), (int)(n - i), dbf);
}

// dst: [rows, ldd], src: [rows, lds]; copies the first `cols` of each row.
void OT_K(k_lin_copy2d)(void *dst, int dbf, size_t ldd, const void *src, int sbf, size_t lds,
                        int rows, int cols) {
  const size_t des = dbf ? 2 : 4, ses = sbf ? 2 : 4;
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= LIN_PAR_MIN)
  for (int r = 0; r < rows; r++)
    copy_row((char *)dst + (size_t)r * ldd * des, dbf, (const char *)src + (size_t)r * lds * ses, sbf,
             (size_t)cols);
}

// db[j] += sum_i src[i*ld + j]. Columns are split in chunks of 4 vectors, one
// chunk per thread at a time; rows are summed in blocks of 256 whose partial
// sums are then added in order (two-level summation, better than one long
// f32 chain for large M).
#define CS_BLOCK 256
void OT_K(k_lin_colsum)(float *db, const void *src, int sbf, size_t ld, int M, int N) {
  const int CW = 4 * VL;
  const long nch = (N + CW - 1) / CW;
#pragma omp parallel for schedule(static) if ((size_t)M * N >= LIN_PAR_MIN && nch > 1)
  for (long c = 0; c < nch; c++) {
    const int j0 = (int)c * CW;
    if (j0 + CW <= N) {
      vf t0 = vzero(), t1 = vzero(), t2 = vzero(), t3 = vzero();
      for (int i0 = 0; i0 < M; i0 += CS_BLOCK) {
        const int i1 = i0 + CS_BLOCK < M ? i0 + CS_BLOCK : M;
        vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
        for (int i = i0; i < i1; i++) {
          size_t o = (size_t)i * ld + j0;
          a0 = vadd(a0, vld(src, o, sbf));
          a1 = vadd(a1, vld(src, o + VL, sbf));
          a2 = vadd(a2, vld(src, o + 2 * VL, sbf));
          a3 = vadd(a3, vld(src, o + 3 * VL, sbf));
        }
        t0 = vadd(t0, a0); t1 = vadd(t1, a1); t2 = vadd(t2, a2); t3 = vadd(t3, a3);
      }
      vstore(db + j0, vadd(vload(db + j0), t0));
      vstore(db + j0 + VL, vadd(vload(db + j0 + VL), t1));
      vstore(db + j0 + 2 * VL, vadd(vload(db + j0 + 2 * VL), t2));
      vstore(db + j0 + 3 * VL, vadd(vload(db + j0 + 3 * VL), t3));
    } else {  // last, partial chunk: one (partial) vector at a time
      for (int j = j0; j < N; j += VL) {
        const int w = N - j < VL ? N - j : VL;
        vf t = vzero();
        for (int i0 = 0; i0 < M; i0 += CS_BLOCK) {
          const int i1 = i0 + CS_BLOCK < M ? i0 + CS_BLOCK : M;
          vf a = vzero();
          for (int i = i0; i < i1; i++) a = vadd(a, vld_part(src, (size_t)i * ld + j, w, sbf));
          t = vadd(t, a);
        }
        vstore_part(db + j, vadd(vload_part(db + j, w), t), w);
      }
    }
  }
}

// Row r = b*T + t of the [B*T, (Hq+2Hkv)*D] projection holds Hq q heads, then
// Hkv k heads, then Hkv v heads, D values each; head h of q goes to
// q[((b*Hq + h)*T + t)*D ...] (same for k, v with Hkv).
void OT_K(k_qkv_scatter)(void *q, void *k, void *v, int bf, const float *src, int B, int T,
                         int Hq, int Hkv, int D) {
  const int H = Hq + 2 * Hkv;
  const size_t es = bf ? 2 : 4, rowlen = (size_t)H * D;
  const long rows = (long)B * T;
#pragma omp parallel for schedule(static) if ((size_t)rows * rowlen >= LIN_PAR_MIN)
  for (long r = 0; r < rows; r++) {
    const long b = r / T, t = r % T;
    const float *s = src + (size_t)r * rowlen;
    for (int h = 0; h < H; h++) {
      void *base = h < Hq ? q : (h < Hq + Hkv ? k : v);
      const int hh = h < Hq ? h : (h < Hq + Hkv ? h - Hq : h - Hq - Hkv);
      const int nh = h < Hq ? Hq : Hkv;
      char *d = (char *)base + ((size_t)(b * nh + hh) * T + t) * D * es;
      copy_row(d, bf, s + (size_t)h * D, 0, (size_t)D);
    }
  }
}

// Inverse of k_qkv_scatter: per-head dq/dk/dv (dt) -> g: [B*T, (Hq+2Hkv)*D].
void OT_K(k_qkv_gather)(void *g, int gbf, const void *dq, const void *dk, const void *dv, int bf,
                        int B, int T, int Hq, int Hkv, int D) {
  const int H = Hq + 2 * Hkv;
  const size_t es = bf ? 2 : 4, ges = gbf ? 2 : 4, rowlen = (size_t)H * D;
  const long rows = (long)B * T;
#pragma omp parallel for schedule(static) if ((size_t)rows * rowlen >= LIN_PAR_MIN)
  for (long r = 0; r < rows; r++) {
    const long b = r / T, t = r % T;
    char *d = (char *)g + (size_t)r * rowlen * ges;
    for (int h = 0; h < H; h++) {
      const void *base = h < Hq ? dq : (h < Hq + Hkv ? dk : dv);
      const int hh = h < Hq ? h : (h < Hq + Hkv ? h - Hq : h - Hq - Hkv);
      const int nh = h < Hq ? Hq : Hkv;
      const char *s = (const char *)base + ((size_t)(b * nh + hh) * T + t) * D * es;
      copy_row(d + (size_t)h * D * ges, gbf, s, bf, (size_t)D);
    }
  }
}
