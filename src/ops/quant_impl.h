// Private interface of the quantization operators (src/ops/quant*.c).
#ifndef OT_OPS_QUANT_IMPL_H
#define OT_OPS_QUANT_IMPL_H
#include "internal.h"
#include "ot/quant.h"

// The arguments of ot_qsearch and ot_ref_qsearch (fn names the caller).
ot_status ot__qsearch_check(const ot_qsearch_result *res, const float *s, const float *clip, const float *w,
                            int N, int K, int group, const float *x, int R, const ot_qsearch_opts *o,
                            const char *fn);
#endif
