// Translators over quantized encoder-decoder weights (ot_qmodel: bf16, or
// int8 per channel or group; f32 activations). The graphs of both stacks are
// built over q's tensors (ot__qmodel_s2s_graph); everything else is the
// translator of translate.c.
#include "infer/translate_impl.h"
#include <stdlib.h>

ot_status ot_translator_create_q(ot_translator **out, const ot_qmodel *q,
                                 const ot_translator_config *cfg) {
  static const char fn[] = "ot_translator_create_q";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(cfg, fn);
  const ot_model_config *c = &q->config;
  if (c->arch != OT_ARCH_ENCDEC)
    return ot_error(OT_EINVAL, "%s: '%s' is a decoder-only model, not an encoder-decoder (decode "
                    "it with ot_engine_create_q)", fn, c->name);
  ot_translator *t = calloc(1, sizeof *t);
  if (!t) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  t->mc = *c;
  t->quant = true;
  t->qeblk = calloc((size_t)c->n_enc_layers + 1, sizeof *t->qeblk);
  t->qdblk = calloc((size_t)c->n_layers + 1, sizeof *t->qdblk);
  t->cviews = calloc(3 * (size_t)c->n_layers + 1, sizeof *t->cviews);
  t->sin_tab = calloc((size_t)c->max_seq * c->d_model + 1, sizeof *t->sin_tab);
  ot_status s = OT_OK;
  if (!t->qeblk || !t->qdblk || !t->cviews || !t->sin_tab)
    s = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  if (s == OT_OK)
    s = ot__qmodel_s2s_graph(q, &t->sg, &t->qenc, &t->qdec, t->qeblk, t->qdblk, &t->qhead,
                             t->cviews, t->sin_tab);
  if (s == OT_OK) s = ot__tr_setup(t, cfg, fn);
  if (s != OT_OK) {
    ot_translator_free(t);
    return s;
  }
  *out = t;
  return OT_OK;
}
