// libFuzzer target: quantized model files (`ot quantize` output,
// ot_quant_file_load). Invariants: an accepted file saves (ot_quant_file_save)
// and reloads to the same config, kind, group and tensors (names, shapes,
// bytes, scales); a refusal has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <string.h>

static size_t elem_size(ot_qw_kind k) { return k == OT_QW_F32 ? 4 : k == OT_QW_BF16 ? 2 : 1; }

static void same(const ot_qmodel *a, const ot_qmodel *b) {
  FZ_CHECK(a->n == b->n && a->kind == b->kind && a->group == b->group, "model header differs");
  FZ_CHECK(memcmp(&a->config, &b->config, sizeof a->config) == 0, "config differs after the round trip");
  for (int i = 0; i < a->n; i++) {
    const ot_qtensor *x = &a->t[i], *y = ot_qmodel_find(b, x->name);
    FZ_CHECK(y && x->ndim == y->ndim && x->w.kind == y->w.kind && x->w.rows == y->w.rows &&
             x->w.cols == y->w.cols && x->w.group == y->w.group, "tensor '%s' differs", x->name);
    const size_t n = (size_t)x->w.rows * (size_t)x->w.cols;
    FZ_CHECK(n == 0 || memcmp(x->w.data, y->w.data, n * elem_size(x->w.kind)) == 0, "'%s' data", x->name);
    if (x->w.kind == OT_QW_INT8) {
      const size_t ns = (size_t)x->w.rows * (size_t)(x->w.group ? x->w.cols / x->w.group : 1);
      FZ_CHECK(ns == 0 || memcmp(x->w.scales, y->w.scales, ns * sizeof(float)) == 0, "'%s' scales", x->name);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  char path[64];
  int fd = fz_memfile(data, size, path, sizeof path);
  ot_qmodel *q = NULL, *r = NULL;
  ot_status s = ot_quant_file_load(&q, path);
  if (s == OT_OK) {
    char out[600];
    fz_scratch(out, sizeof out, "rt.safetensors");
    s = ot_quant_file_save(q, out);
    FZ_CHECK(s == OT_OK, "an accepted quantized file does not save: %s", ot_last_error());
    s = ot_quant_file_load(&r, out);
    FZ_CHECK(s == OT_OK, "what we saved does not load: %s", ot_last_error());
    same(q, r);
  } else {
    fz_refused(s, "ot_quant_file_load");
    FZ_CHECK(q == NULL, "*out is not NULL on failure");
  }
  ot_qmodel_free(q);
  ot_qmodel_free(r);
  fz_close(fd);
  fz_mem_back(mem0, "quant");
  return 0;
}
