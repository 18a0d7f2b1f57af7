// Translators over quantized encoder-decoder weights (ot_qmodel).
#include "infer/translate_impl.h"

ot_status ot_translator_create_q(ot_translator **out, const ot_qmodel *q,
                                 const ot_translator_config *cfg) {
  static const char fn[] = "ot_translator_create_q";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(cfg, fn);
  return ot_error(OT_EUNSUPPORTED, "%s: not yet", fn);
}
