// Row kernels of materialized attention (attn_mat.c), one source for every ISA
// (see simd.h): the masked row softmax of the forward and the softmax
// backward dS = P * (dP - rowsum(dP * P)). Rows are independent, so results
// do not depend on the thread count.
#include "core/simd.h"
#include "attn_mat_k.h"

#define ATTN_PAR_MIN 32768   // elements (rows * cols) below which one thread runs

// Keys [0, lim) visible to query i (kv_len already folded into kvl).
static inline int mat_lim(int i, int Tq, int Tk, int kvl, int causal) {
  long long lim = kvl;
  if (causal && (long long)i + Tk - Tq + 1 < lim) lim = (long long)i + Tk - Tq + 1;
  return lim < 0 ? 0 : (int)lim;
}

// Softmax of one row over [0, n) (n >= 1) in place; [n, len) set to 0.
static void softmax_row(float *x, int n, int len) {
  float mx = -INFINITY;
  int j = 0;
  if (n >= VL) {
    vf m = vload(x);
    for (j = VL; j + VL <= n; j += VL) m = vmax(m, vload(x + j));
    mx = vhmax(m);
  }
  for (; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  const vf vm = vset1(mx);
  vf acc = vzero();
  for (j = 0; j + VL <= n; j += VL) {
    vf e = vexp(vsub(vload(x + j), vm));
    vstore(x + j, e);
    acc = vadd(acc, e);
  }
  float sum = vsum(acc);
  if (j < n) {
    vstore_part(x + j, vexp(vsub(vload_part(x + j, n - j), vm)), n - j);
    for (; j < n; j++) sum += x[j];
  }
  const vf inv = vset1(1.0f / sum);
  for (j = 0; j + VL <= n; j += VL) vstore(x + j, vmul(vload(x + j), inv));
  if (j < n) vstore_part(x + j, vmul(vload_part(x + j, n - j), inv), n - j);
  if (len > n) memset(x + n, 0, sizeof(float) * (size_t)(len - n));
}

// s: [rows, ld] scaled scores of rows r = h*Tq + i (the query heads of one kv
// head), valid in columns [0, kvl). In place: masked row softmax over the keys
// each query sees; columns [lim, Tk) become 0 (a row that sees nothing is all 0).
void OT_K(k_attn_mat_softmax)(float *s, int rows, int ld, int Tq, int Tk, int kvl, int causal) {
#pragma omp parallel for schedule(static) if ((long)rows * Tk >= ATTN_PAR_MIN)
  for (int r = 0; r < rows; r++) {
    float *x = s + (size_t)r * ld;
    int lim = mat_lim(r % Tq, Tq, Tk, kvl, causal);
    if (lim == 0) memset(x, 0, sizeof(float) * (size_t)Tk);
    else softmax_row(x, lim, Tk);
  }
}

// dp: [rows, ld] holds dP = dO V^T in columns [0, n); p: [rows, ld] the
// probabilities. In place over [0, n): dS = P * (dP - sum_j dP_j P_j).
void OT_K(k_attn_mat_dsoftmax)(float *dp, const float *p, int rows, int ld, int n) {
#pragma omp parallel for schedule(static) if ((long)rows * n >= ATTN_PAR_MIN)
  for (int r = 0; r < rows; r++) {
    float *d = dp + (size_t)r * ld;
    const float *y = p + (size_t)r * ld;
    vf acc = vzero();
    int j = 0;
    for (; j + VL <= n; j += VL) acc = vfmadd(vload(d + j), vload(y + j), acc);
    if (j < n) acc = vfmadd(vload_part(d + j, n - j), vload_part(y + j, n - j), acc);
    const vf dot = vset1(vsum(acc));
    for (j = 0; j + VL <= n; j += VL) vstore(d + j, vmul(vload(y + j), vsub(vload(d + j), dot)));
    if (j < n)
      vstore_part(d + j, vmul(vload_part(y + j, n - j), vsub(vload_part(d + j, n - j), dot)), n - j);
  }
}
