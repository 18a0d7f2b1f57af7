// Row softmax (forward/backward) and fused softmax + cross-entropy:
// validation, scratch, profiler span and dispatch. Kernels: kern/softmax.c;
// scalar references: softmax_ref.c.
#include "internal.h"
#include "ot/ops.h"
#include <math.h>
#include <omp.h>
#include "kern/softmax_k.h"

// Per-thread f32 row buffers for bf16 storage: stride (floats) and count.
static size_t row_stride(int V) { return ((size_t)V + 15) & ~(size_t)15; }

// x, y: [N, V] (dt); y = softmax(x) per row; y may alias x.
ot_status ot_softmax_fwd(ot_dtype dt, void *y, const void *x, int N, int V) {
  static const char fn[] = "ot_softmax_fwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(x, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(V, fn);
  size_t bs = row_stride(V);
  int nth = omp_get_max_threads();
  float *buf = NULL;
  if (dt != OT_F32) {
    buf = ot_scratch((size_t)nth * bs * sizeof(float));
    if (!buf) return OT_ENOMEM;
  }
  double n = (double)N * V;
  OT_PROF_BEGIN("softmax_fwd", 25.0 * n, 2.0 * n * ot_dtype_size(dt));
  OT_KPICK(k_softmax_fwd)(y, x, N, V, buf, bs, ot__sk(dt));
  OT_PROF_STOP();
  return OT_OK;
}

// y, dy -> dx: [N, V] (dt) = y * (dy - sum_j dy_j y_j) per row; dx may alias dy.
ot_status ot_softmax_bwd(ot_dtype dt, void *dx, const void *y, const void *dy, int N, int V) {
  static const char fn[] = "ot_softmax_bwd";
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(dx, fn);
  OT_CHECK_PTR(y, fn);
  OT_CHECK_PTR(dy, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(V, fn);
  double n = (double)N * V;
  OT_PROF_BEGIN("softmax_bwd", 4.0 * n, 3.0 * n * ot_dtype_size(dt));
  OT_KPICK(k_softmax_bwd)(dx, y, dy, N, V, ot__sk(dt));
  OT_PROF_STOP();
  return OT_OK;
}

// Validation shared by the cross-entropy entry points (fn names the caller).
static ot_status xent_check(const char *fn, ot_dtype dt, const void *logits, int ld,
                            const int32_t *targets, int N, int V, int ignore_index, float count) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(logits, fn);
  OT_CHECK_PTR(targets, fn);
  OT_CHECK_POS(N, fn);
  OT_CHECK_POS(V, fn);
  if (ld < V)
    return ot_error(OT_EINVAL, "%s: ld=%d must be >= V=%d (row stride of the logits)", fn, ld, V);
  if (!(count > 0) || !isfinite(count))
    return ot_error(OT_EINVAL, "%s: count=%g must be finite and > 0 (number of non-ignored "
                    "targets of the global batch)", fn, count);
  for (int i = 0; i < N; i++) {
    int t = targets[i];
    if (t != ignore_index && (t < 0 || t >= V))
      return ot_error(OT_EINVAL, "%s: targets[%d] = %d is outside [0, V=%d) and is not "
                      "ignore_index=%d", fn, i, t, V, ignore_index);
  }
  return OT_OK;
}

// Runs the plain (eps < 0) or label-smoothed kernel over validated arguments:
// scratch, profiler span, row losses and the mean in double, row order.
static ot_status xent_run(ot_dtype dt, void *logits, int ld, const int32_t *targets, int N, int V,
                          int ignore_index, float eps, float count, float *row_loss,
                          float *mean_loss, bool want_grad) {
  size_t bs = row_stride(V);
  int nth = omp_get_max_threads();
  bool rowbuf = want_grad && dt != OT_F32;
  size_t loss_bytes = ot_align64((size_t)N * sizeof(double));
  uint8_t *scr = ot_scratch(loss_bytes + (rowbuf ? (size_t)nth * bs * sizeof(float) : 0));
  if (!scr) return OT_ENOMEM;
  double *loss = (double *)scr;
  float *buf = rowbuf ? (float *)(scr + loss_bytes) : NULL;
  double n = (double)N * V;
  double bytes = (want_grad ? 2.0 : 1.0) * (double)N * ld * ot_dtype_size(dt);
  if (eps > 0) bytes += (double)N * ld * ot_dtype_size(dt);  // the row sum reads it once more
  OT_PROF_BEGIN(eps < 0 ? "xent_fused" : "xent_ls_fused", 25.0 * n, bytes);
  if (eps < 0)
    OT_KPICK(k_xent)(logits, ld, targets, N, V, ignore_index, count, loss, want_grad, buf, bs,
                     ot__sk(dt));
  else
    OT_KPICK(k_xent_ls)(logits, ld, targets, N, V, ignore_index, eps, count, loss, want_grad,
                        buf, bs, ot__sk(dt));
  double sum = 0.0;
  for (int i = 0; i < N; i++) {
    sum += loss[i];
    if (row_loss) row_loss[i] = (float)loss[i];
  }
  if (mean_loss) *mean_loss = (float)(sum / (double)count);
  OT_PROF_STOP();
  return OT_OK;
}

// logits: [N, ld] (dt), V <= ld valid columns; targets: [N] int32 in [0, V) or
// == ignore_index. row_loss: [N] f32 (NULL: skip) = logsumexp - logit[target]
// (0 when ignored); *mean_loss (NULL: skip) = sum of row losses (double, row
// order) / count. want_grad: logits overwritten with (softmax - onehot) /
// count, 0 on ignored rows and on padding columns [V, ld); otherwise untouched.
ot_status ot_xent_fused(ot_dtype dt, void *logits, int ld, const int32_t *targets, int N, int V,
                        int ignore_index, float count, float *row_loss, float *mean_loss,
                        bool want_grad) {
  OT_TRY(xent_check("ot_xent_fused", dt, logits, ld, targets, N, V, ignore_index, count));
  return xent_run(dt, logits, ld, targets, N, V, ignore_index, -1.0f, count, row_loss, mean_loss,
                  want_grad);
}

// As ot_xent_fused with label smoothing eps in [0, 1): row_loss = (1 - eps) *
// nll + eps * mean_j(-log p_j) (0 when ignored); gradient (softmax - (1 - eps)
// onehot - eps / V) / count. eps = 0 gives ot_xent_fused's bits.
ot_status ot_xent_ls_fused(ot_dtype dt, void *logits, int ld, const int32_t *targets, int N,
                           int V, int ignore_index, float eps, float count, float *row_loss,
                           float *mean_loss, bool want_grad) {
  static const char fn[] = "ot_xent_ls_fused";
  if (!(eps >= 0.0f && eps < 1.0f))
    return ot_error(OT_EINVAL, "%s: label smoothing eps=%g must be in [0, 1) (0 = plain "
                    "cross-entropy, 0.1 is usual)", fn, eps);
  OT_TRY(xent_check(fn, dt, logits, ld, targets, N, V, ignore_index, count));
  return xent_run(dt, logits, ld, targets, N, V, ignore_index, eps, count, row_loss, mean_loss,
                  want_grad);
}
