// The cost of dropout in a training step: forward + backward of the
// transformer-small encoder-decoder (V 8000, C 256, 3 + 3 post-norm layers, 4 heads,
// F 1024, ReLU, sinusoidal positions) on synthetic batches, with dropout 0 (the
// no-dropout path), 0.1 on the embeddings and sublayer outputs (the preset), and
// 0.1 everywhere (also on the attention probabilities and after the activation).
// Prints the median step time (wall and process CPU time: on a busy machine the CPU
// time is the steadier figure), target tokens/s per setting, and the ratio to dropout 0. Usage: bench_model_dropout [B] [S=T] [steps] (defaults 16 64 3).
#include "ot/ot.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bench_stats.h"

int main(int argc, char **argv) {
  const int B = argc > 1 ? atoi(argv[1]) : 16, T = argc > 2 ? atoi(argv[2]) : 64;
  const int steps = argc > 3 ? atoi(argv[3]) : 3;
  if (B < 1 || T < 2 || T > 128 || steps < 1 || steps > 100) {
    fprintf(stderr, "usage: bench_model_dropout [B >= 1] [S=T in [2, 128]] [steps in [1, 100]]\n");
    return 2;
  }
  const float set[3][3] = {{0, 0, 0}, {0.1f, 0, 0}, {0.1f, 0.1f, 0.1f}};
  const char *name[3] = {"dropout 0", "dropout 0.1 (preset)", "0.1 / attn 0.1 / act 0.1"};
  int32_t *src = malloc(sizeof(int32_t) * B * T * 3), *tgt = src + B * T, *out = tgt + B * T;
  int32_t *len = malloc(sizeof(int32_t) * B);
  if (!src || !len) return 1;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < B * T; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    src[i] = (int32_t)(x % 7999);
    tgt[i] = (int32_t)((x >> 20) % 7999);
    out[i] = (int32_t)((x >> 40) % 7999);
  }
  for (int b = 0; b < B; b++) len[b] = T - b % 8;
  ot_s2s_batch bt = {B, T, T, src, len, tgt, out};
  double base = 0.0;
  printf("transformer-small enc-dec, f32, B %d, S = T = %d, forward + backward, median of %d\n",
         B, T, steps);
  for (int k = 0; k < 3; k++) {
    ot_model_config c;
    ot_model_config_preset(&c, "transformer-small");
    c.dropout = set[k][0];
    c.attn_dropout = set[k][1];
    c.act_dropout = set[k][2];
    ot_run_config r = {B, T, OT_F32, OT_RECOMPUTE_NONE, -100, T};
    ot_model *m = NULL;
    if (ot_model_create(&m, &c, &r) != OT_OK || ot_model_init(m, 1) != OT_OK) {
      fprintf(stderr, "bench_model_dropout: %s\n", ot_last_error());
      return 1;
    }
    double t[100], u[100];
    for (int s = 0; s <= steps; s++) {
      ot_model_set_dropout_step(m, 7, (uint64_t)s);
      const double t0 = ot_now(), c0 = (double)clock() / CLOCKS_PER_SEC;
      double loss = 0.0;
      if (ot_model_forward_s2s(m, &bt, 0.0f, true, &loss) != OT_OK || ot_model_backward(m) != OT_OK) {
        fprintf(stderr, "bench_model_dropout: %s\n", ot_last_error());
        return 1;
      }
      if (s > 0) {   // step 0 warms up
        t[s - 1] = ot_now() - t0;
        u[s - 1] = (double)clock() / CLOCKS_PER_SEC - c0;
      }
    }
    qsort(t, (size_t)steps, sizeof t[0], cmp_d);
    qsort(u, (size_t)steps, sizeof u[0], cmp_d);
    const double med = t[steps / 2], cpu = u[steps / 2], tps = B * T / med, cps = B * T / cpu;
    if (k == 0) base = cps;
    printf("  %-26s wall %8.1f ms/step %8.0f tokens/s | cpu %8.1f ms/step %8.0f tokens/cpu-s  "
           "%.3f x dropout 0 (cpu)\n", name[k], med * 1e3, tps, cpu * 1e3, cps, cps / base);
    ot_model_free(m);
  }
  free(src);
  free(len);
  return 0;
}
