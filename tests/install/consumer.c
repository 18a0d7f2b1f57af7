// A program from outside the project, built by tests/install/run.sh against an
// INSTALLED libot (only the installed public headers, only the public API).
// Usage: consumer <dir>   with <dir>/config.json + model.safetensors (a Hugging
// Face GPT-2 or Llama checkpoint) and <dir>/logits.safetensors (tokens [B, T]
// I32 and transformers' logits [B, T, V] F32, e.g. tests/golden/hf_gpt2).
// Loads the model, runs one forward over the tokens and checks:
//  - the logits are finite and match transformers' (normalized error <= 1e-5);
//  - one forward with next-token targets gives a finite loss equal to the
//    cross-entropy of the golden logits (computed here in double) to 1e-5.
// Prints "consumer: ok ..." and exits 0, or names what failed and exits 1.
#include <ot/ot.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "consumer: FAIL: %s: %s\n", what, ot_last_error());
  return 1;
}

// Mean next-token cross-entropy of logits [B*T, V] (targets[i] < 0: ignored), in double.
static double ref_loss(const float *logits, const int32_t *targets, int n, int V) {
  double sum = 0;
  int count = 0;
  for (int i = 0; i < n; i++) {
    if (targets[i] < 0) continue;
    const float *row = logits + (size_t)i * V;
    double mx = row[0], s = 0;
    for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    for (int j = 0; j < V; j++) s += exp((double)row[j] - mx);
    sum += mx + log(s) - row[targets[i]];
    count++;
  }
  return sum / count;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <hf model dir with logits.safetensors>\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/logits.safetensors", argv[1]);
  ot_st_file *g = NULL;
  if (ot_st_open(&g, path) != OT_OK) return fail("open the golden logits");
  const ot_st_tensor *tt = ot_st_find(g, "tokens"), *tl = ot_st_find(g, "logits");
  if (!tt || !tl || tt->dtype != OT_I32 || tt->ndim != 2 || tl->dtype != OT_F32 || tl->ndim != 3) {
    fprintf(stderr, "consumer: FAIL: %s lacks tokens [B, T] I32 / logits [B, T, V] F32\n", path);
    ot_st_close(g);
    return 1;
  }
  const int B = (int)tt->shape[0], T = (int)tt->shape[1], V = (int)tl->shape[2], n = B * T;
  const int32_t *tokens = tt->data;
  const float *want = tl->data;

  ot_run_config run = {B, T, OT_F32, OT_RECOMPUTE_NONE, -1, 0};   // S = 0: decoder-only
  ot_model *m = NULL;
  int rc = 1;
  int32_t *targets = malloc((size_t)n * sizeof *targets);
  if (!targets) { fprintf(stderr, "consumer: FAIL: out of memory\n"); goto done; }
  if (ot_model_load_hf(&m, argv[1], &run) != OT_OK) { fail("ot_model_load_hf"); goto done; }
  if (ot_model_config_of(m)->vocab != V) { fprintf(stderr, "consumer: FAIL: vocab != %d\n", V); goto done; }

  // logits only: [B*T, ld] with ld >= V (padding columns dropped)
  if (ot_model_forward(m, tokens, NULL, B, T, 0, false, NULL) != OT_OK) { fail("forward"); goto done; }
  int ld = 0;
  const float *lg = ot_model_logits(m, &ld);
  double num = 0, den = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < V; j++) {
      float x = lg[(size_t)i * ld + j], w = want[(size_t)i * V + j];
      if (!isfinite(x)) { fprintf(stderr, "consumer: FAIL: logit [%d, %d] = %g\n", i, j, x); goto done; }
      num += ((double)x - w) * ((double)x - w);
      den += (double)w * w;
    }
  double nerr = sqrt(num) / sqrt(den);

  // with targets: each position's next token (the last one of a row ignored)
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) targets[b * T + t] = t + 1 < T ? tokens[b * T + t + 1] : -1;
  double loss = NAN;
  if (ot_model_forward(m, tokens, targets, B, T, 0, false, &loss) != OT_OK) { fail("forward + loss"); goto done; }
  double want_loss = ref_loss(want, targets, n, V);
  double lerr = fabs(loss - want_loss) / want_loss;

  printf("consumer: %s B=%d T=%d V=%d isa=%s: logits nerr %.3g vs transformers, loss %.6f (golden %.6f)\n",
         ot_model_config_of(m)->name, B, T, V, ot_isa_name(ot_isa_active()), nerr, loss, want_loss);
  if (!(nerr <= 1e-5)) fprintf(stderr, "consumer: FAIL: logits nerr %.3g > 1e-5\n", nerr);
  else if (!isfinite(loss) || !(lerr <= 1e-5)) fprintf(stderr, "consumer: FAIL: loss %g, want %g\n", loss, want_loss);
  else { printf("consumer: ok\n"); rc = 0; }
done:
  ot_model_free(m);
  ot_st_close(g);
  free(targets);
  return rc;
}
