// The weight-only quantized linear kernels' interface (kern/qgemv.c and its
// caller ops/quant.c): the weight as the kernels read it and their prototypes,
// one variant per ISA.
#ifndef OT_KERN_QGEMV_K_H
#define OT_KERN_QGEMV_K_H
#include "internal.h"

// Storage kinds (the values of ot_qw_kind) and the most activation rows the
// GEMV kernels take (OT_QLINEAR_GEMV_MAX); ops/quant.c asserts both match.
enum { OT__QK_F32 = 0, OT__QK_BF16 = 1, OT__QK_INT8 = 2 };
#define OT__QK_GEMV_MAX 16

// A checked ot_qweight as the kernels see it: [rows, cols] row-major, data f32 |
// bf16 | int8; int8 scales [rows, cols / group] (group 0: [rows], per row).
// pack > 0: f32 packed in panels of `pack` rows (kern/qpack_k.h; k_qgemv does
// not take those).
typedef struct {
  int kind, rows, cols, group;
  const void *data;
  const float *scales;
  int pack;
} ot__qk_weight;

// M = 1 on the team: the rows of one item, for N rows of rb weight bytes each over T
// threads: about 4 items per thread, each of 16 KiB to 256 KiB of weights (a stolen
// item is computed twice: at most 256 KiB) when the rows allow, at most
// OT_TEAM_ITEMS_MAX items, a multiple of `mult` rows.
static inline int ot__qk_team_width(int N, size_t rb, int T, int mult) {
  const int by_t = (N + 4 * T - 1) / (4 * T);
  const int by_b = (int)((16384 + rb - 1) / rb), most = (int)(262144 / rb);
  int w = by_t < most ? by_t : most;
  if (w < by_b) w = by_b;
  if (w < (N + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX) w = (N + OT_TEAM_ITEMS_MAX - 1) / OT_TEAM_ITEMS_MAX;
  return (w + mult - 1) / mult * mult;
}

// y[M, rows] = x[M, cols] @ W^T (+ bias[rows]), 1 <= M <= OT__QK_GEMV_MAX; W streamed
// once for all M rows. OT_ENOMEM if the per-thread scratch cannot grow.
OT_KDECL(ot_status, k_qgemv, (float *y, const float *x, const ot__qk_weight *W,
                              const float *bias, int M));
// dst[(n - n0) * cols + c] = dequantized W[n, c] for rows n in [n0, n1) (packed f32 too).
OT_KDECL(void, k_qdequant_rows, (float *dst, const ot__qk_weight *W, int n0, int n1));

#endif
