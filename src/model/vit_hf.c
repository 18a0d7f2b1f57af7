// Hugging Face ViTForImageClassification directories of a vision transformer:
// config.json (ViTConfig; a mean-pooled model's names model_type "ot-vit", which
// only ot reads) and model.safetensors with HF's names and shapes
// (the layout's file shapes: [1, 1, C] CLS, [1, T, C] positions, [C, Cin, P, P]
// patch projection). Reading them is hf.c's (cfg_vit, ot_model_load_hf).
#include "model_impl.h"
#include "io/files.h"
#include <math.h>
#include <stdlib.h>

void ot_vit_hf_config(const ot_model_config *c, char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  buf[0] = 0;
  if (!c || c->arch != OT_ARCH_VIT) return;
  size_t o = 0;
#define PUT(...) do { if (o < cap) o += (size_t)snprintf(buf + o, cap - o, __VA_ARGS__); } while (0)
  // mean pooling: HF's ViT cannot express it, so the file names a model type transformers
  // refuses ("ot-vit": ViTConfig's keys plus "pooling") rather than one it would run on the CLS token
  if (c->pool == OT_POOL_MEAN) PUT("{\n  \"model_type\": \"ot-vit\",\n  \"pooling\": \"mean\",\n");
  else PUT("{\n  \"architectures\": [\"ViTForImageClassification\"],\n  \"model_type\": \"vit\",\n");
  PUT("  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
      "  \"intermediate_size\": %d,\n  \"hidden_act\": \"%s\",\n  \"hidden_dropout_prob\": %.9g,\n"
      "  \"attention_probs_dropout_prob\": %.9g,\n  \"initializer_range\": %.9g,\n"
      "  \"layer_norm_eps\": %.9g,\n  \"image_size\": %d,\n  \"patch_size\": %d,\n"
      "  \"num_channels\": %d,\n  \"qkv_bias\": true,\n  \"encoder_stride\": %d,\n"
      "  \"torch_dtype\": \"float32\",\n  \"id2label\": {",
      c->d_model, c->n_layers, c->n_heads, c->d_ff, c->mlp == OT_MLP_GELU ? "gelu_new" : "gelu",
      (double)c->dropout, (double)c->attn_dropout, (double)c->init_std, (double)c->eps,
      c->image_size, c->patch_size, c->channels, c->patch_size);
  for (int i = 0; i < c->vocab; i++) PUT("%s\"%d\": \"LABEL_%d\"", i ? ", " : "", i, i);
  PUT("},\n  \"label2id\": {");
  for (int i = 0; i < c->vocab; i++) PUT("%s\"LABEL_%d\": %d", i ? ", " : "", i, i);
  PUT("}\n}\n");
#undef PUT
  if (o >= cap) buf[0] = 0;
}

ot_status ot__vit_save_hf(const ot_model *m, const char *dir) {
  static const char fn[] = "ot_model_save_hf";
  if (!ot__is_whole(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout", fn);
  if (m->cfg.pool == OT_POOL_MEAN)
    return ot_error(OT_EUNSUPPORTED, "%s: '%s' pools the mean of its patch tokens (pool mean); Hugging "
                    "Face's ViTForImageClassification classifies the CLS token only and cannot express "
                    "it (train with --pool cls to export, or load the checkpoint directory with ot)", fn,
                    m->cfg.name);
  const size_t cap = 4096 + (size_t)m->cfg.vocab * 48;
  char *cj = malloc(cap);
  if (!cj) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  ot_vit_hf_config(&m->cfg, cj, cap);
  char path[OT_PATH_MAX + 32];
  ot_status s = cj[0] ? ot__join(path, sizeof path, dir, "config.json")
                      : ot_error(OT_EINTERNAL, "%s: config.json does not fit", fn);
  if (s == OT_OK) s = ot__write_atomic(path, cj, strlen(cj));
  free(cj);
  if (s == OT_OK) s = ot__join(path, sizeof path, dir, "model.safetensors");
  if (s == OT_OK) s = ot_model_export(m, path);
  return s;
}
