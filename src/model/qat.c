// Quantization-aware training (contract in ot/model.h, ot_model_set_qat): a
// weight-read option of the one graph. The model keeps a copy of its masters
// with every quantized matrix fake-quantized (m->wq); ot__pdt hands the graph,
// the head and the backward's dx GEMMs that copy, so the forward runs on the
// int8 weights and dx = dy Wq, while dW = dy^T x accumulates into the masters'
// gradients: the straight-through estimator, with no second forward or backward.
#include "model_impl.h"

int ot_model_qat_group(const ot_model *m) { return m && m->wq ? m->qat_group : -1; }

ot_status ot_model_sync_qat(ot_model *m) {
  OT_CHECK_PTR(m, "ot_model_sync_qat");
  if (!m->wq) return OT_OK;
  memcpy(m->wq, m->w, m->n_stored * sizeof(float));
  for (int i = 0; i < m->n_params; i++) {
    const ot_param *p = &m->params[i];
    if (!ot__param_quantized(p)) continue;
    OT_TRY(ot_qweight_fake_quant(m->wq + m->wpos[i], m->w + m->wpos[i], (int)p->shape[0], (int)p->shape[1],
                                 m->qat_group, NULL));
  }
  return OT_OK;
}

ot_status ot_model_set_qat(ot_model *m, int group) {
  static const char fn[] = "ot_model_set_qat";
  OT_CHECK_PTR(m, fn);
  if (group < 0) {
    if (!m->wq) return OT_OK;
    ot_mem_free(m->wq);
    m->wq = NULL;
    return ot__graph_rebuild(m);
  }
  if (group != 0 && group != 32 && group != 64 && group != 128)
    return ot_error(OT_EINVAL, "%s: group=%d unsupported (use 0 = one scale per row, 32, 64 or 128)", fn, group);
  if (m->run.dt != OT_F32)
    return ot_error(OT_EUNSUPPORTED, "%s: quantization-aware training runs in f32 (the run is %s; use "
                    "--dtype f32)", fn, ot_dtype_name(m->run.dt));
  if (m->cfg.arch != OT_ARCH_DECODER)
    return ot_error(OT_EUNSUPPORTED, "%s: quantization-aware training takes decoder-only language models "
                    "(quantized encoder-decoders and vision transformers cannot be saved yet)", fn);
  if (m->part.tp != 1 || m->part.param_slots)
    return ot_error(OT_EUNSUPPORTED, "%s: quantization-aware training needs whole matrices on each rank (no "
                    "tensor parallelism, no ZeRO-3): the scales are those of the whole rows", fn);
  for (int i = 0; i < m->n_params && group; i++) {
    const ot_param *p = &m->params[i];
    if (ot__param_quantized(p) && p->shape[1] % group)
      return ot_error(OT_EINVAL, "%s: %s has %lld input features, not a multiple of group=%d (use a group "
                      "dividing it, or 0 = per row)", fn, p->name, (long long)p->shape[1], group);
  }
  if (!m->wq) {
    m->wq = ot_mem_alloc(m->n_stored * sizeof(float), OT_MEM_PARAMS);
    if (!m->wq) return OT_ENOMEM;
  }
  m->qat_group = group;
  ot_status s = ot_model_sync_qat(m);
  if (s == OT_OK) s = ot__graph_rebuild(m);
  if (s != OT_OK) {
    ot_mem_free(m->wq);
    m->wq = NULL;
    ot__graph_rebuild(m);
  }
  return s;
}
