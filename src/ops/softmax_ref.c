// Scalar references for row softmax and softmax + cross-entropy: plain loops,
// double accumulation, single thread.
#include "ot/ops.h"
#include <math.h>

// x, y: [N, V]; y may alias x.
void ot_ref_softmax_fwd(float *y, const float *x, int N, int V) {
  for (long r = 0; r < N; r++) {
    const float *xr = x + (size_t)r * V;
    float *yr = y + (size_t)r * V;
    double m = -INFINITY, s = 0.0;
    for (int i = 0; i < V; i++) m = xr[i] > m ? xr[i] : m;
    for (int i = 0; i < V; i++) s += exp((double)xr[i] - m);
    for (int i = 0; i < V; i++) yr[i] = (float)(exp((double)xr[i] - m) / s);
  }
}

// dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
void ot_ref_softmax_bwd(float *dx, const float *y, const float *dy, int N, int V) {
  for (long r = 0; r < N; r++) {
    size_t o = (size_t)r * V;
    double d = 0.0;
    for (int i = 0; i < V; i++) d += (double)dy[o + i] * y[o + i];
    for (int i = 0; i < V; i++) dx[o + i] = (float)((double)y[o + i] * ((double)dy[o + i] - d));
  }
}

// logits: [N, ld] (V valid columns); targets valid (or == ignore_index).
// Same contract as ot_xent_fused with f32 storage.
void ot_ref_xent(float *logits, int ld, const int32_t *targets, int N, int V, int ignore_index,
                 float count, float *row_loss, float *mean_loss, bool want_grad) {
  double sum = 0.0;
  for (long r = 0; r < N; r++) {
    float *x = logits + (size_t)r * ld;
    int t = targets[r];
    double loss = 0.0;
    if (t == ignore_index) {
      if (want_grad)
        for (int i = 0; i < ld; i++) x[i] = 0.0f;
    } else {
      double m = -INFINITY, s = 0.0;
      for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
      for (int i = 0; i < V; i++) s += exp((double)x[i] - m);
      double lse = m + log(s);
      loss = lse - (double)x[t];
      if (want_grad) {
        for (int i = 0; i < V; i++)
          x[i] = (float)((exp((double)x[i] - lse) - (i == t ? 1.0 : 0.0)) / (double)count);
        for (int i = V; i < ld; i++) x[i] = 0.0f;
      }
    }
    if (row_loss) row_loss[r] = (float)loss;
    sum += loss;
  }
  if (mean_loss) *mean_loss = (float)(sum / (double)count);
}

// Label-smoothed cross-entropy: same contract as ot_xent_ls_fused with f32
// storage (eps in [0, 1), targets valid or == ignore_index). Straight from the
// definition: log p_j in double, loss = (1 - eps) (-log p_t) + eps / V *
// sum_j(-log p_j); gradient (p_j - (1 - eps) [j == t] - eps / V) / count.
void ot_ref_xent_ls(float *logits, int ld, const int32_t *targets, int N, int V,
                    int ignore_index, float eps, float count, float *row_loss, float *mean_loss,
                    bool want_grad) {
  double sum = 0.0, de = eps;
  for (long r = 0; r < N; r++) {
    float *x = logits + (size_t)r * ld;
    int t = targets[r];
    double loss = 0.0;
    if (t == ignore_index) {
      if (want_grad)
        for (int i = 0; i < ld; i++) x[i] = 0.0f;
    } else {
      double m = -INFINITY, s = 0.0, smooth = 0.0;
      for (int i = 0; i < V; i++) m = x[i] > m ? x[i] : m;
      for (int i = 0; i < V; i++) s += exp((double)x[i] - m);
      double lse = m + log(s);
      for (int i = 0; i < V; i++) smooth += lse - (double)x[i];
      loss = (1.0 - de) * (lse - (double)x[t]) + de * smooth / V;
      if (want_grad) {
        for (int i = 0; i < V; i++)
          x[i] = (float)((exp((double)x[i] - lse) - (i == t ? 1.0 - de : 0.0) - de / V) /
                         (double)count);
        for (int i = V; i < ld; i++) x[i] = 0.0f;
      }
    }
    if (row_loss) row_loss[r] = (float)loss;
    sum += loss;
  }
  if (mean_loss) *mean_loss = (float)(sum / (double)count);
}
