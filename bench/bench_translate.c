// Translation throughput: sentences/s of ot_translate_ids with beam 4 at batch
// 1 and 16, f32 / bf16 / int8, on a random transformer-small-shaped model
// (8000 vocab, d 256, 3 + 3 layers, 4 heads, FFN 1024). Random weights make
// the output lengths arbitrary, so every hypothesis runs to the full length
// (min_length = the limit; the forced eos ends it): each sentence costs the
// same decoder steps. Prints a table; asserts nothing.
// Usage: bench_translate [SENTENCES (default 32)] [SRC_LEN (24)] [MAX_LENGTH (32)]
#include "ot/ot.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 32, S = argc > 2 ? atoi(argv[2]) : 24;
  const int lim = argc > 3 ? atoi(argv[3]) : 32;
  if (n < 1 || S < 2 || lim < 3 || S > 128 || lim > 128) {
    fprintf(stderr, "usage: bench_translate [SENTENCES] [SRC_LEN <= 128] [MAX_LENGTH <= 128]\n");
    return 2;
  }
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-small");
  int32_t *src = malloc(sizeof(int32_t) * (size_t)n * S), *len = malloc(sizeof(int32_t) * n);
  int32_t *out = malloc(sizeof(int32_t) * (size_t)16 * lim);
  int *olen = malloc(sizeof(int) * 16);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < n * S; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    src[i] = 1 + (int32_t)(x % (uint64_t)(c.vocab - 1));
  }
  for (int b = 0; b < n; b++) {
    len[b] = S;
    src[b * S + S - 1] = c.eos_id;
  }
  printf("transformer-small (V %d, d %d, %d+%d layers), %d sentences of %d tokens, beam 4, "
         "max_length %d, %d threads\n", c.vocab, c.d_model, c.n_enc_layers, c.n_layers, n, S,
         lim, ot_threads_get());
  printf("%-6s %6s %12s %12s %10s\n", "dtype", "batch", "sentences/s", "tokens/s", "encode %");
  const char *names[3] = {"f32", "bf16", "int8"};
  for (int d = 0; d < 3; d++) {
    ot_run_config r = {1, 1, d == 1 ? OT_BF16 : OT_F32, OT_RECOMPUTE_NONE, -100, 1};
    ot_model *m = NULL;
    ot_qmodel *q = NULL;
    if (ot_model_create(&m, &c, &r) != OT_OK || ot_model_init(m, 1) != OT_OK ||
        (d == 2 && ot_qmodel_from_model(&q, m, OT_QW_INT8, 0) != OT_OK)) {
      fprintf(stderr, "bench_translate: %s\n", ot_last_error());
      return 1;
    }
    for (int bi = 0; bi < 2; bi++) {
      const int B = bi ? 16 : 1;
      ot_translator_config tc = {B, 4, S, lim};
      ot_translator *t = NULL;
      ot_status s = q ? ot_translator_create_q(&t, q, &tc) : ot_translator_create(&t, m, &tc);
      ot_beam_config bc = ot_beam_config_default();
      bc.vocab = c.vocab;
      bc.num_beams = 4;
      bc.max_length = lim;
      bc.min_length = lim;
      bc.eos_id = c.eos_id;
      bc.pad_id = c.pad_id;
      bc.decoder_start_id = c.decoder_start_id;
      bc.forced_eos_id = c.eos_id;
      double enc = 0.0, t0 = 0.0;
      long long toks = 0;
      for (int rep = 0; rep < 2 && s == OT_OK; rep++) {   // rep 0 warms up
        if (rep == 1) { t0 = ot_now(); enc = 0.0; toks = 0; }
        for (int b0 = 0; b0 < n && s == OT_OK; b0 += B) {
          const int k = n - b0 < B ? n - b0 : B;
          ot_translate_stats st;
          s = ot_translate_ids(t, k, src + (size_t)b0 * S, S, len + b0, &bc, out, lim, olen,
                               NULL, &st);
          enc += st.encode_s;
          for (int i = 0; i < k; i++) toks += olen[i];
        }
      }
      if (s != OT_OK) {
        fprintf(stderr, "bench_translate: %s\n", ot_last_error());
        return 1;
      }
      const double el = ot_now() - t0;
      printf("%-6s %6d %12.2f %12.1f %9.1f%%\n", names[d], B, n / el, toks / el,
             100.0 * enc / el);
      fflush(stdout);
      ot_translator_free(t);
    }
    ot_qmodel_free(q);
    ot_model_free(m);
  }
  free(src); free(len); free(out); free(olen);
  return 0;
}
