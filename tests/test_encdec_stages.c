// Pipeline stages of an encoder-decoder on one process: the parts of a split of the
// combined stack (encoder blocks, then decoder blocks) run one after the other, the
// test moving the stage buffers between them as the parallel runtime does
// (ot_model_s2s_stage_buf: the encoder / decoder stage inputs and outputs, the
// encoder output from the stage of the last encoder block to every later stage; in the
// backward the stage input's gradient and the partial sum of the encoder output's
// gradient, stage by stage). Every split of transformer-tiny shapes into 2, 3 and 4
// stages (cuts inside the encoder, at the seam, inside the decoder; stages holding
// both stacks), post-norm (tied three ways) and mBART-like pre-norm (learned
// positions, embedding norms, untied head, GQA), recompute none / full, dropout on:
// the loss and every parameter's gradient equal the whole model's (the shared
// embedding's copies on up to three stages summed), within 1e-6 (measured: bit for bit
// where the head is untied; 1e-7 with the tied head: its copy is summed in another order).
// Two micro-batches of different shapes in two slots of every stage: both forwards, then
// both backwards. Then the refusals: a range outside the blocks.
// Run from the repository root (CTest does).
#include "harness.h"
#include "ot/model.h"
#include <math.h>

enum { B_ = 2, S_ = 5, T_ = 4, MAXP = 4 };
static const int32_t k_src[B_ * S_] = {3, 7, 11, 2, 0, 5, 9, 0, 49, 49};
static const int32_t k_len[B_] = {5, 3};
static const int32_t k_tgt[B_ * T_] = {49, 4, 8, 15, 49, 21, 6, 30};
static const int32_t k_out[B_ * T_] = {4, 8, 15, 0, 21, 6, 0, -100};

static ot_model_config config(bool post, float dropout) {
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  if (!post) {
    c.norm_place = OT_PLACE_PRE;
    c.pos = OT_POS_LEARNED;
    c.pos_offset = 2;
    c.embed_norm = true;
    c.mlp = OT_MLP_GELU_ERF;
    c.n_kv_heads = 2;
    c.tied = false;
  }
  c.dropout = c.attn_dropout = c.act_dropout = dropout;
  return c;
}

// A second micro-batch of another shape (B 1, S 3, T 2).
static const int32_t k_src2[3] = {5, 9, 1}, k_len2[1] = {3}, k_tgt2[2] = {49, 21},
                     k_out2[2] = {21, 6};

// Copies n floats of stage buffer `which` of slot k of model a into b's `into` (both must exist).
static bool move(ot_model *from, ot_s2s_stage_buf which, ot_model *to, ot_s2s_stage_buf into,
                 size_t n, int k, const char *what) {
  const void *src = ot_model_s2s_stage_buf(from, k, which);
  void *dst = ot_model_s2s_stage_buf(to, k, into);
  if (!th_check(src && dst, "%s: both buffers exist", what)) return false;
  memcpy(dst, src, n * sizeof(float));
  return true;
}

// One split: stage s holds blocks [cut[s], cut[s + 1]). Micro-batches `mb` (1 or 2, the
// second of another shape): the stages hold them in as many slots, both forwards run
// before the backwards (as a pipeline's warm-up does); the whole model runs them one
// after the other, its gradients accumulating.
static void split(bool post, ot_recompute rc, float dropout, const int *cut, int P, int mb) {
  const ot_model_config c = config(post, dropout);
  const int E = c.n_enc_layers, C = c.d_model;
  char name[96];
  int n = snprintf(name, sizeof name, "%s %s%s%s cuts", post ? "post" : "pre",
                   ot_recompute_name(rc), dropout > 0 ? " dropout" : "", mb > 1 ? " 2 slots" : "");
  for (int s = 1; s < P; s++) n += snprintf(name + n, sizeof name - (size_t)n, " %d", cut[s]);
  ot_run_config r = {B_, T_, OT_F32, rc, -100, S_};
  ot_model *w = NULL, *st[MAXP] = {NULL};
  if (!th_check(ot_model_create(&w, &c, &r) == OT_OK && ot_model_init(w, 7) == OT_OK,
                "%s: whole model: %s", name, ot_last_error()))
    return;
  th_rng rng = {11};   // weights off their initial values (norm gains, biases not 1 / 0)
  float *ww = ot_model_params(w);
  for (size_t i = 0; i < ot_model_n_floats(w); i++) ww[i] += 0.05f * th_normal(&rng);
  ot_model_sync_bf16(w);
  const ot_s2s_batch bs[2] = {{B_, S_, T_, k_src, k_len, k_tgt, k_out},
                              {1, 3, 2, k_src2, k_len2, k_tgt2, k_out2}};
  double lw[2] = {0, 0}, ls[2] = {-1, -1};
  bool ok = true;
  for (int k = 0; k < mb && ok; k++) {
    ot_model_set_dropout_step(w, 5, 9 + (uint64_t)k);
    ok = ot_model_forward_s2s(w, &bs[k], 0.0f, true, &lw[k]) == OT_OK && ot_model_backward(w) == OT_OK;
  }
  int seam = -1;   // the stage of the last encoder block
  for (int s = 0; s < P && ok; s++) {
    ot_model_part p = ot_model_part_whole(&c);
    p.layer0 = cut[s];
    p.layer1 = cut[s + 1];
    p.slots = mb;
    if (cut[s] < E && cut[s + 1] >= E) seam = s;
    ok = ot_model_create_part(&st[s], &c, &r, &p) == OT_OK;
    for (int i = 0; ok && i < ot_model_param_count(st[s]); i++) {   // the whole model's weights
      const ot_param *q = ot_model_param_at(st[s], i);
      const int gi = ot_model_param_find(w, q->name);
      ok = gi >= 0 && ot_model_part_put(st[s], i, ot_model_params(st[s]),
                                        ww + ot_model_param_at(w, gi)->offset) == OT_OK;
    }
    if (ok) ok = ot_model_sync_bf16(st[s]) == OT_OK;
  }
  if (!th_check(ok, "%s: create: %s", name, ot_last_error())) goto done;
  // forwards, stage by stage, each micro-batch into its slot
  for (int k = 0; k < mb && ok; k++) {
    const size_t NS = (size_t)bs[k].B * bs[k].S * C, NT = (size_t)bs[k].B * bs[k].T * C;
    for (int s = 0; s < P && ok; s++) {
      const bool enc_in = cut[s] > 0 && cut[s] < E, dec_in = cut[s] > E,
                 enc_out_in = s > seam;   // holds decoder blocks only, after the seam stage
      if (enc_in) ok = move(st[s - 1], OT_S2S_ENC_OUT, st[s], OT_S2S_ENC_IN, NS, k, "encoder stage input");
      if (ok && dec_in) ok = move(st[s - 1], OT_S2S_DEC_OUT, st[s], OT_S2S_DEC_IN, NT, k, "decoder stage input");
      if (ok && enc_out_in) ok = move(st[seam], OT_S2S_ENC_OUT, st[s], OT_S2S_ENC_OUT, NS, k, "encoder output");
      double l = -1.0;
      ot_model_set_dropout_step(st[s], 5, 9 + (uint64_t)k);
      ok = ok && ot_model_forward_s2s_slot(st[s], k, &bs[k], 0.0f, true, &l) == OT_OK;
      if (s == P - 1) ls[k] = l;
      else th_check(l == 0.0, "%s: stage %d (not last) reports loss 0, got %g", name, s, l);
      th_check(ok, "%s: forward of stage %d: %s", name, s, ot_last_error());
    }
    th_check(ok && lw[k] == ls[k], "%s: micro-batch %d: loss %.9g == whole %.9g", name, k, ls[k], lw[k]);
  }
  // backwards, from the last stage (GRAD and ENC_GRAD are a stage's, shared by its slots)
  for (int k = 0; k < mb && ok; k++) {
    const size_t NS = (size_t)bs[k].B * bs[k].S * C, NT = (size_t)bs[k].B * bs[k].T * C;
    for (int s = P - 1; s >= 0 && ok; s--) {
      if (s + 1 < P) {
        const int nx = cut[s + 1];   // the next stage's first block
        if (nx < E) ok = move(st[s + 1], OT_S2S_GRAD, st[s], OT_S2S_GRAD, NS, k, "encoder gradient");
        else if (nx > E) ok = move(st[s + 1], OT_S2S_GRAD, st[s], OT_S2S_GRAD, NT, k, "decoder gradient");
        if (ok && nx >= E)   // the next stage holds decoder blocks only: its partial sum
          ok = move(st[s + 1], OT_S2S_ENC_GRAD, st[s], OT_S2S_ENC_GRAD, NS, k, "encoder output gradient");
      }
      ok = ok && ot_model_backward_slot(st[s], k) == OT_OK;
      th_check(ok, "%s: backward of stage %d: %s", name, s, ot_last_error());
    }
  }
  // every gradient: a parameter's stages (the shared embedding's copies: last stage first,
  // then the decoder's embedding, then the encoder's, the whole model's order) summed
  double worst = 0.0;
  const float *gw = ot_model_grads(w);
  for (int gi = 0; ok && gi < ot_model_param_count(w); gi++) {
    const ot_param *q = ot_model_param_at(w, gi);
    float *sum = th_falloc(q->numel);
    int held = 0;
    for (int s = P - 1; s >= 0; s--) {
      const int i = ot_model_param_find(st[s], q->name);
      if (i < 0) continue;
      const float *g = ot_model_grads(st[s]) + ot_model_param_at(st[s], i)->offset;
      for (size_t j = 0; j < q->numel; j++) sum[j] += g[j];
      held++;
    }
    const bool emb = strcmp(q->name, "model.shared.weight") == 0;
    th_check(held == 1 || (emb && held <= 3), "%s: %s held by %d stages", name, q->name, held);
    double mx = 0.0, d = 0.0;
    for (size_t j = 0; j < q->numel; j++) {
      mx = fmax(mx, fabs(gw[q->offset + j]));
      d = fmax(d, fabs(gw[q->offset + j] - sum[j]));
    }
    const double rel = mx > 0 ? d / mx : d;
    if (rel > worst) worst = rel;
    th_check(rel <= 1e-6, "%s: gradient of %s within 1e-6 (%.2e)", name, q->name, rel);
    free(sum);
  }
  if (ok && worst > 0) printf("  %s: largest relative gradient difference %.2e\n", name, worst);
done:
  for (int s = 0; s < P; s++) ot_model_free(st[s]);
  ot_model_free(w);
}

// Every split of the 4 blocks (2 encoder + 2 decoder) into P stages, mb micro-batches.
static void every_split(bool post, ot_recompute rc, float dropout, int mb) {
  int cut[MAXP + 1] = {0};
  for (int P = 2; P <= 4; P++)
    for (int mask = 0; mask < 8; mask++) {   // cuts among blocks 1, 2, 3
      if (__builtin_popcount((unsigned)mask) != P - 1) continue;
      int k = 1;
      for (int b = 1; b <= 3; b++)
        if (mask & (1 << (b - 1))) cut[k++] = b;
      cut[P] = 4;
      split(post, rc, dropout, cut, P, mb);
    }
}

static void refusals(void) {
  const ot_model_config c = config(true, 0.0f);
  ot_run_config r = {B_, T_, OT_F32, OT_RECOMPUTE_NONE, -100, S_};
  ot_model *m = NULL;
  ot_model_part p = ot_model_part_whole(&c);
  th_check(p.layer1 == ot_model_n_blocks(&c) && ot_model_n_blocks(&c) == 4,
           "the whole part holds the 4 blocks of both stacks");
  p.layer1 = 5;
  th_check_error(ot_model_create_part(&m, &c, &r, &p), OT_EINVAL, "blocks (encoder, then decoder)",
                 "a range past the blocks refused");
  // a stage's buffers: the first stage has no inputs, an encoder-only stage no decoder output
  p = ot_model_part_whole(&c);
  p.layer1 = 1;
  if (th_check(ot_model_create_part(&m, &c, &r, &p) == OT_OK, "stage [0, 1): %s", ot_last_error())) {
    th_check(!ot_model_s2s_stage_buf(m, 0, OT_S2S_ENC_IN) && !ot_model_s2s_stage_buf(m, 0, OT_S2S_DEC_IN) &&
                 !ot_model_s2s_stage_buf(m, 0, OT_S2S_DEC_OUT) && ot_model_s2s_stage_buf(m, 0, OT_S2S_ENC_OUT),
             "stage [0, 1): only an encoder output");
    th_check(!ot_model_is_last(m) && ot_model_is_first(m), "stage [0, 1) is first, not last");
    ot_model_free(m);
  }
}

int main(void) {
  every_split(true, OT_RECOMPUTE_NONE, 0.0f, 1);
  every_split(false, OT_RECOMPUTE_NONE, 0.0f, 1);
  every_split(true, OT_RECOMPUTE_FULL, 0.1f, 2);
  every_split(false, OT_RECOMPUTE_SELECTIVE, 0.1f, 2);
  every_split(false, OT_RECOMPUTE_NONE, 0.0f, 2);
  refusals();
  return th_finish();
}
