// Private interface of the quantization operators (src/ops/quant*.c).
#ifndef OT_OPS_QUANT_IMPL_H
#define OT_OPS_QUANT_IMPL_H
#include "internal.h"
#include "ot/quant.h"

// The arguments of ot_qsearch and ot_ref_qsearch (fn names the caller).
ot_status ot__qsearch_check(const ot_qsearch_result *res, const float *s, const float *clip, const float *w,
                            int N, int K, int group, const float *x, int R, const ot_qsearch_opts *o,
                            const char *fn);
// y[N] = x[K] w[N, K]^T (+ b[N]), all f32: one activation row (decode) through
// the GEMV kernel (kern/qgemv.c: chunks of rows on the team), not the GEMM.
ot_status ot__gemv_f32(float *y, const float *x, const float *w, const float *b, int N, int K);
#endif
