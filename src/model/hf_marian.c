// Saving an encoder-decoder model as a Hugging Face MarianMTModel directory:
// config.json (the keys MarianConfig reads) + generation_config.json (the token
// ids and the length cap; no logits processors) + model.safetensors (the
// layout's HF tensors: model.shared, the blocks' q/k/v/out_proj, norms,
// fc1/fc2, final_logits_bias [1, V] and lm_head when untied).
//
// The directory decodes as the model does in ot (`ot translate`, `ot serve`, the
// trainer's BLEU): no decoding setting is added. MarianConfig defaults
// forced_eos_token_id to 0 (the opus-mt convention: the last position of a
// sentence that reaches the length limit is forced to eos); an ot model has no
// such setting, so both files state it as null.
#include "model_impl.h"
#include <math.h>

static const char *act_name(ot_mlp_kind k) {
  return k == OT_MLP_RELU ? "relu" : k == OT_MLP_GELU_ERF ? "gelu" : "gelu_new";
}

static ot_status write_config(const ot_model_config *c, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return ot_error(OT_EIO, "ot_model_save_hf: cannot create %s", path);
  fprintf(f, "{\n  \"architectures\": [\"MarianMTModel\"],\n  \"model_type\": \"marian\",\n");
  fprintf(f, "  \"is_encoder_decoder\": true,\n  \"activation_function\": \"%s\",\n",
          act_name(c->mlp));
  fprintf(f, "  \"d_model\": %d,\n  \"encoder_layers\": %d,\n  \"decoder_layers\": %d,\n",
          c->d_model, c->n_enc_layers, c->n_layers);
  fprintf(f, "  \"num_hidden_layers\": %d,\n", c->n_enc_layers);
  fprintf(f, "  \"encoder_attention_heads\": %d,\n  \"decoder_attention_heads\": %d,\n",
          c->n_heads, c->n_heads);
  fprintf(f, "  \"encoder_ffn_dim\": %d,\n  \"decoder_ffn_dim\": %d,\n", c->d_ff, c->d_ff);
  fprintf(f, "  \"max_position_embeddings\": %d,\n", c->max_seq);
  fprintf(f, "  \"vocab_size\": %d,\n  \"decoder_vocab_size\": %d,\n", c->vocab, c->vocab);
  fprintf(f, "  \"pad_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"decoder_start_token_id\": %d,\n",
          c->pad_id, c->eos_id, c->decoder_start_id);
  fprintf(f, "  \"forced_eos_token_id\": null,\n");
  fprintf(f, "  \"scale_embedding\": %s,\n  \"tie_word_embeddings\": %s,\n",
          c->embed_scale ? "true" : "false", c->tied ? "true" : "false");
  fprintf(f, "  \"share_encoder_decoder_embeddings\": true,\n");
  fprintf(f, "  \"dropout\": %.9g,\n  \"attention_dropout\": %.9g,\n  \"activation_dropout\": %.9g,\n",
          c->dropout, c->attn_dropout, c->act_dropout);
  fprintf(f, "  \"encoder_layerdrop\": 0.0,\n  \"decoder_layerdrop\": 0.0,\n");
  fprintf(f, "  \"init_std\": %.9g,\n  \"use_cache\": true,\n  \"torch_dtype\": \"float32\"\n}\n",
          c->init_std);
  const bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad) return ot_error(OT_EIO, "ot_model_save_hf: write error on %s", path);
  return OT_OK;
}

// generation_config.json: what GenerationConfig needs to decode the model as ot
// does. max_length is the model's positions (ot's cap; HF's default would be 20).
static ot_status write_gen_config(const ot_model_config *c, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return ot_error(OT_EIO, "ot_model_save_hf: cannot create %s", path);
  fprintf(f, "{\n  \"decoder_start_token_id\": %d,\n  \"eos_token_id\": %d,\n"
          "  \"pad_token_id\": %d,\n  \"forced_eos_token_id\": null,\n  \"max_length\": %d\n}\n",
          c->decoder_start_id, c->eos_id, c->pad_id, c->max_seq);
  const bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad) return ot_error(OT_EIO, "ot_model_save_hf: write error on %s", path);
  return OT_OK;
}

ot_status ot_model_save_hf(const ot_model *m, const char *dir) {
  static const char fn[] = "ot_model_save_hf";
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(dir, fn);
  const ot_model_config *c = &m->cfg;
  if (c->arch == OT_ARCH_VIT) return ot__vit_save_hf(m, dir);
  if (c->arch != OT_ARCH_ENCDEC)
    return ot_error(OT_EUNSUPPORTED, "%s: writes MarianMTModel directories; '%s' is decoder-only "
                    "(ot_model_export writes its weights with HF names)", fn, c->name);
  const char *why = c->norm_place != OT_PLACE_POST ? "pre-norm (mBART-style)"
                    : c->norm != OT_NORM_LAYERNORM   ? "RMSNorm"
                    : !c->bias                       ? "without biases"
                    : c->mlp == OT_MLP_SWIGLU        ? "SwiGLU"
                    : fabsf(c->eps - 1e-5f) > 1e-12f ? "a norm eps other than 1e-5"
                                                     : NULL;
  if (why)
    return ot_error(OT_EUNSUPPORTED, "%s: MarianMTModel is post-norm LayerNorm (eps 1e-5) with "
                    "biases and relu / gelu / gelu_new; '%s' is %s", fn, c->name, why);
  if (!ot__is_whole(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout", fn);
  char path[4096];
  if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
    return ot_error(OT_EINVAL, "%s: directory name too long", fn);
  OT_TRY(write_config(c, path));
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  OT_TRY(write_gen_config(c, path));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  return ot_model_export(m, path);
}
