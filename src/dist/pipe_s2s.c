// Pipeline stages of an encoder-decoder (hooks of dist/par.h): the stages split the
// combined stack, encoder blocks [0, nenc) then decoder blocks, anywhere; the stage
// of the last encoder block (the seam) sends the encoder output to every later
// stage, whose decoder blocks cross-attend it. A step's micro-batches (the translate
// task's token-budget chunks, each of its own shape, which every stage reads from the
// same batch) run 1F1B: stage s holds at most pp - s of them, each in its own slot.
//
// Messages of stage s (blocks [k0, k1)) per micro-batch, forward:
//   encoder stage input  [B*S, C] from s - 1   when 0 < k0 < nenc
//   decoder stage input  [B*T, C] from s - 1   when k0 > nenc
//   encoder output       [B*S, C] from seam    when s > seam
// backward (the gradients of the same, in the other direction), plus the partial
// sum of the encoder output's gradient [B*S, C] from s + 1 to s when s + 1 > seam:
// each stage continues it with its decoder blocks, in the one-process order, and
// the seam stage runs the encoder from the complete sum.
#include "dist_impl.h"
#include <math.h>

enum { TAG_FWD = 11, TAG_BWD = 12, TAG_ENC = 13, TAG_DENC = 14 };

static size_t rows_bytes(const ot__par *p, int B, int T) {
  return (size_t)B * T * p->mc.d_model * ot_dtype_size(p->dt);
}

static void *buf(ot__par *p, int slot, ot_s2s_stage_buf which) {
  return ot_model_s2s_stage_buf(p->m, slot, which);
}

// The sends of slot k's last forward complete (its buffers are about to be rewritten).
static ot_status wait_fwd_sends(ot__par *p, int k) {
  OT_TRY(ot__wait(&p->g, &p->freq[k], "pipeline send of activations"));
  for (int s = 0; s < p->g.pp; s++)
    OT_TRY(ot__wait(&p->g, &p->ereq[(size_t)k * p->g.pp + s],
                    "pipeline send of the encoder output"));
  return OT_OK;
}

// Forward of one micro-batch in slot k: receive the stage inputs, run, send the outputs.
static ot_status fwd(ot__par *p, int k, const ot_s2s_batch *b, float count, bool want_grad,
                     double *loss) {
  if (p->g.pp == 1) return ot_model_forward_s2s_slot(p->m, k, b, count, want_grad, loss);
  const int st = p->g.pp_rank, E = p->nenc;
  const size_t es = rows_bytes(p, b->B, b->S), et = rows_bytes(p, b->B, b->T);
  OT_TRY(wait_fwd_sends(p, k));
  if (p->k0 > 0 && p->k0 < E)
    OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_ENC_IN), es, st - 1, TAG_FWD,
                    "pipeline receive of encoder activations"));
  if (p->k0 > E)
    OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_DEC_IN), et, st - 1, TAG_FWD,
                    "pipeline receive of decoder activations"));
  if (st > p->seam)
    OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_ENC_OUT), es, p->seam, TAG_ENC,
                    "pipeline receive of the encoder output"));
  OT_TRY(ot_model_forward_s2s_slot(p->m, k, b, count, want_grad, loss));
  if (p->k1 < E)   // an encoder stage before the seam: its output to the next stage
    OT_TRY(ot__isend(&p->g, buf(p, k, OT_S2S_ENC_OUT), es, st + 1, TAG_FWD, &p->freq[k]));
  else if (p->k1 > E && p->k1 < p->nblk)
    OT_TRY(ot__isend(&p->g, buf(p, k, OT_S2S_DEC_OUT), et, st + 1, TAG_FWD, &p->freq[k]));
  if (st == p->seam)   // the encoder output to every later stage
    for (int s = st + 1; s < p->g.pp; s++)
      OT_TRY(ot__isend(&p->g, buf(p, k, OT_S2S_ENC_OUT), es, s, TAG_ENC,
                       &p->ereq[(size_t)k * p->g.pp + s]));
  return OT_OK;
}

// Backward of the micro-batch in slot k: receive the gradients of the stage outputs,
// run, send the stage input's gradient and the encoder output's partial sum back.
static ot_status bwd(ot__par *p, int k, const ot_s2s_batch *b, bool last) {
  OT_TRY(ot__par_before_backward(p, last));
  if (p->g.pp == 1) return ot_model_backward_slot(p->m, k);
  const int st = p->g.pp_rank, E = p->nenc;
  const size_t es = rows_bytes(p, b->B, b->S), et = rows_bytes(p, b->B, b->T);
  if (p->k1 < p->nblk) {
    if (p->k1 < E)
      OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_GRAD), es, st + 1, TAG_BWD,
                      "pipeline receive of encoder gradients"));
    else if (p->k1 > E)
      OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_GRAD), et, st + 1, TAG_BWD,
                      "pipeline receive of decoder gradients"));
    if (p->k1 >= E)
      OT_TRY(ot__recv(&p->g, buf(p, k, OT_S2S_ENC_GRAD), es, st + 1, TAG_DENC,
                      "pipeline receive of the encoder output's gradient"));
  }
  OT_TRY(ot_model_backward_slot(p->m, k));
  if (p->k0 == 0) return OT_OK;
  const size_t gb = p->k0 < E ? es : et;
  if (p->k0 != E) {   // (a stage starting at decoder block 0 embeds: no input gradient)
    OT_TRY(ot__wait(&p->g, &p->breq, "pipeline send of gradients"));
    memcpy(p->gsend, buf(p, k, OT_S2S_GRAD), gb);
    OT_TRY(ot__isend(&p->g, p->gsend, gb, st - 1, TAG_BWD, &p->breq));
  }
  if (st > p->seam) {
    OT_TRY(ot__wait(&p->g, &p->dreq, "pipeline send of the encoder output's gradient"));
    memcpy(p->dsend, buf(p, k, OT_S2S_ENC_GRAD), es);
    OT_TRY(ot__isend(&p->g, p->dsend, es, st - 1, TAG_DENC, &p->dreq));
  }
  return OT_OK;
}

ot_status ot__par_s2s_forward(ot__par *p, const ot_s2s_batch *b, float count, bool want_grad,
                              double *loss) {
  return fwd(p, 0, b, count, want_grad, loss);
}

// Forward k of a step: the step's dropout stream (each row's masks from its sample
// index), then the forward into its slot.
static ot_status step_fwd(ot__par *p, const ot_s2s_batch *mb, int k, float count, uint64_t seed,
                          uint64_t counter, double *loss, bool *finite) {
  ot_model_set_dropout_step(p->m, seed, counter);
  double l = 0.0;
  OT_TRY(fwd(p, k % p->slots, &mb[k], count, true, &l));
  *loss += l;
  if (!isfinite(l)) *finite = false;
  return OT_OK;
}

ot_status ot__par_s2s_step(ot__par *p, const ot_s2s_batch *mb, int M, float count,
                           uint64_t seed, uint64_t counter, double *loss, bool *finite) {
  const int S = p->g.pp, st = p->g.pp_rank;
  const int warm = S - st - 1 < M ? S - st - 1 : M;
  *loss = 0.0;
  *finite = true;
  // 1F1B: warm-up forwards, then one forward and one backward, then the remaining backwards
  for (int i = 0; i < warm; i++) OT_TRY(step_fwd(p, mb, i, count, seed, counter, loss, finite));
  for (int i = 0; i < M - warm; i++) {
    OT_TRY(step_fwd(p, mb, warm + i, count, seed, counter, loss, finite));
    OT_TRY(bwd(p, i % p->slots, &mb[i], i == M - 1));
  }
  for (int i = M - warm; i < M; i++) OT_TRY(bwd(p, i % p->slots, &mb[i], i == M - 1));
  return OT_OK;
}

ot_status ot__par_s2s_flush(ot__par *p) {
  if (p->g.pp == 1) return OT_OK;
  for (int k = 0; k < p->slots; k++) OT_TRY(wait_fwd_sends(p, k));
  OT_TRY(ot__wait(&p->g, &p->breq, "pipeline send of gradients"));
  return ot__wait(&p->g, &p->dreq, "pipeline send of the encoder output's gradient");
}
