// Hugging Face interop at the level of names and layout: import/export of the
// weights by HF tensor name (safetensors), config.json -> config, and loading a
// GPT2LMHeadModel / LlamaForCausalLM directory (config.json + model.safetensors).
#include "model_impl.h"
#include "io/json.h"
#include <math.h>
#include <stdlib.h>

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && o < n; d++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool ends(const char *s, const char *p) {
  size_t a = strlen(s), b = strlen(p);
  return a >= b && strcmp(s + a - b, p) == 0;
}

// Finds HF tensor `name` in f under prefix (GPT-2 names: "transformer." also tried).
static const ot_st_tensor *find_hf(const ot_model *m, const ot_st_file *f, const char *prefix,
                                   const char *name) {
  char full[256];
  snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", name);
  const ot_st_tensor *t = ot_st_find(f, full);
  if (!t && m->cfg.names == OT_NAMES_GPT2 && (!prefix || !*prefix)) {
    snprintf(full, sizeof full, "transformer.%s", name);
    t = ot_st_find(f, full);
  }
  return t;
}

// A file tensor (name without prefix) that is not a parameter but may appear.
static bool ignorable(const ot_model *m, const char *name) {
  if (ends(name, ".attn.masked_bias") || ends(name, ".rotary_emb.inv_freq")) return true;
  if (m->cfg.names == OT_NAMES_GPT2 && ends(name, ".attn.bias") && ot_model_hf_find(m, name) < 0)
    return true;   // GPT-2's causal-mask buffer, saved by older transformers
  if (m->cfg.names == OT_NAMES_MARIAN &&
      (strcmp(name, "model.encoder.embed_tokens.weight") == 0 ||
       strcmp(name, "model.decoder.embed_tokens.weight") == 0 ||
       strcmp(name, "model.encoder.embed_positions.weight") == 0 ||
       strcmp(name, "model.decoder.embed_positions.weight") == 0))
    return true;   // views of model.shared / the sinusoid tables (rebuilt, never trained)
  return m->cfg.tied && strcmp(name, "lm_head.weight") == 0;
}

ot_status ot_model_import(ot_model *m, const ot_st_file *f, const char *prefix, bool strict) {
  static const char fn[] = "ot_model_import";
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(f, fn);
  if (!ot__is_whole(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout; import into the "
                    "whole model and copy slices with ot_model_part_put", fn);
  const char *file = ot_st_name(f);
  const char *pfx = prefix ? prefix : "";
  // every expected tensor: present, shaped and typed right
  size_t tmp_n = 0;
  for (int i = 0; i < m->n_hf; i++) {
    const ot_hf_tensor *h = &m->hf[i];
    char want[64], got[64];
    int64_t fs[4];
    const int fd = ot_model_hf_file_shape(m, i, fs);
    shape_str(want, sizeof want, fd, fs);
    const ot_st_tensor *t = find_hf(m, f, pfx, h->name);
    if (!t)
      return ot_error(OT_EFORMAT, "%s: tensor '%s%s' %s is missing (the config %s expects it)",
                      file, pfx, h->name, want, m->cfg.name[0] ? m->cfg.name : "given");
    bool same = t->ndim == fd;
    for (int d = 0; same && d < fd; d++) same = t->shape[d] == fs[d];
    if (!same) {
      shape_str(got, sizeof got, t->ndim, t->shape);
      return ot_error(OT_EFORMAT, "%s: tensor '%s' has shape %s, the config expects %s%s", file,
                      t->name, got, want,
                      h->param == m->wte || h->param == m->lm_head ? " (check vocab / d_model)" : "");
    }
    if (t->dtype != OT_F32 && t->dtype != OT_BF16 && t->dtype != OT_F16)
      return ot_error(OT_EFORMAT, "%s: tensor '%s' has dtype %s (F32, BF16 or F16 expected)", file,
                      t->name, ot_st_dtype_name(t->dtype));
    size_t n = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
    if (t->dtype != OT_F32 && n > tmp_n) tmp_n = n;
  }
  if (strict) {
    for (int i = 0; i < ot_st_count(f); i++) {
      const char *name = ot_st_get(f, i)->name;
      if (!starts(name, pfx)) continue;
      name += strlen(pfx);
      if (m->cfg.names == OT_NAMES_GPT2 && !*pfx && starts(name, "transformer."))
        name += strlen("transformer.");
      if (ot_model_hf_find(m, name) < 0 && !ignorable(m, name))
        return ot_error(OT_EFORMAT, "%s: unexpected tensor '%s%s': not part of this config's "
                        "layout (check n_layers, biases, tied embeddings, positions)", file, pfx,
                        name);
    }
  }
  float *tmp = tmp_n ? ot_mem_alloc(tmp_n * sizeof(float), OT_MEM_OTHER) : NULL;
  if (tmp_n && !tmp) return OT_ENOMEM;
  ot_status s = OT_OK;
  for (int i = 0; i < m->n_hf && s == OT_OK; i++) {
    const ot_st_tensor *t = find_hf(m, f, pfx, m->hf[i].name);
    const float *src = t->data;
    if (t->dtype != OT_F32) {
      s = ot_convert(t->data, t->dtype, tmp, OT_F32, t->nbytes / ot_dtype_size(t->dtype));
      src = tmp;
    }
    if (s == OT_OK) s = ot_model_hf_put(m, i, m->w, src);
  }
  ot_mem_free(tmp);
  if (s == OT_OK) s = ot_model_sync_bf16(m);
  return s;
}

ot_status ot_model_export(const ot_model *m, const char *path) {
  static const char fn[] = "ot_model_export";
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(path, fn);
  if (!ot__is_whole(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout; gather the whole "
                    "tensors (ot_model_part_get) into a whole model and export that", fn);
  size_t total = 0;
  for (int i = 0; i < m->n_hf; i++)
    total += (size_t)m->hf[i].shape[0] * (size_t)(m->hf[i].ndim == 2 ? m->hf[i].shape[1] : 1);
  float *buf = ot_mem_alloc(total * sizeof(float), OT_MEM_OTHER);
  ot_st_tensor *ts = ot_mem_alloc((size_t)m->n_hf * sizeof(ot_st_tensor), OT_MEM_OTHER);
  ot_status s = buf && ts ? OT_OK : OT_ENOMEM;
  size_t off = 0;
  for (int i = 0; i < m->n_hf && s == OT_OK; i++) {
    const ot_hf_tensor *h = &m->hf[i];
    size_t n = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
    s = ot_model_hf_get(m, i, m->w, buf + off);
    int64_t fs[4];
    const int fd = ot_model_hf_file_shape(m, i, fs);
    ts[i] = (ot_st_tensor){.name = h->name, .dtype = OT_F32, .ndim = fd, .data = buf + off,
                           .nbytes = n * sizeof(float)};
    for (int d = 0; d < fd; d++) ts[i].shape[d] = fs[d];
    off += n;
  }
  const char *keys[] = {"format"}, *vals[] = {"pt"};
  if (s == OT_OK) s = ot_st_write(path, ts, m->n_hf, keys, vals, 1);
  ot_mem_free(buf);
  ot_mem_free(ts);
  return s;
}

// ------------------------------------------------------------ config.json ---
typedef struct {
  const ot_json *root;
  const char *path;
  ot_status err;
} cfgj;

static const ot_json *jget(cfgj *j, const char *key) {
  const ot_json *v = ot_json_get(j->root, key);
  return v && v->type != OT_JNULL ? v : NULL;
}

// Positive integer key; def when absent (an error when required).
static int jint(cfgj *j, const char *key, long long def, bool required) {
  const ot_json *v = jget(j, key);
  if (!v) {
    if (required && j->err == OT_OK)
      j->err = ot_error(OT_EFORMAT, "%s: key '%s' is missing", j->path, key);
    return (int)def;
  }
  if (v->type != OT_JNUM || !v->is_int || v->i <= 0 || v->i > 1000000000) {
    if (j->err == OT_OK)
      j->err = ot_error(OT_EFORMAT, "%s: '%s' must be a positive integer", j->path, key);
    return (int)def;
  }
  return (int)v->i;
}

static double jnum(cfgj *j, const char *key, double def) {
  const ot_json *v = jget(j, key);
  if (!v) return def;
  if (v->type != OT_JNUM) {
    if (j->err == OT_OK) j->err = ot_error(OT_EFORMAT, "%s: '%s' must be a number", j->path, key);
    return def;
  }
  return v->d;
}

static bool jbool(cfgj *j, const char *key, bool def) {
  const ot_json *v = jget(j, key);
  if (!v) return def;
  if (v->type != OT_JBOOL) {
    if (j->err == OT_OK) j->err = ot_error(OT_EFORMAT, "%s: '%s' must be true or false", j->path, key);
    return def;
  }
  return v->b;
}

static const char *jstr(cfgj *j, const char *key) {
  const ot_json *v = jget(j, key);
  return v && v->type == OT_JSTR ? v->s : NULL;
}

static ot_status read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return ot_error(OT_EIO, "%s: cannot open", path);
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      if (cap >= ((size_t)16 << 20)) {
        free(buf);
        fclose(f);
        return ot_error(OT_EFORMAT, "%s: larger than 16 MiB, not a config.json", path);
      }
      cap = cap ? cap * 2 : 4096;
      char *q = realloc(buf, cap);
      if (!q) { free(buf); fclose(f); return ot_error(OT_ENOMEM, "%s: out of memory", path); }
      buf = q;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) { free(buf); return ot_error(OT_EIO, "%s: read error", path); }
  *out = buf;
  *len = n;
  return OT_OK;
}

static ot_status cfg_gpt2(cfgj *j, ot_model_config *c) {
  ot_model_config_preset(c, "hf-gpt2");
  c->vocab = jint(j, "vocab_size", 0, true);
  c->d_model = jint(j, "n_embd", 0, true);
  c->n_layers = jint(j, "n_layer", 0, true);
  c->n_heads = c->n_kv_heads = jint(j, "n_head", 0, true);
  c->d_ff = jint(j, "n_inner", 4LL * c->d_model, false);
  c->max_seq = jint(j, "n_positions", 1024, false);
  c->eps = (float)jnum(j, "layer_norm_epsilon", 1e-5);
  c->init_std = (float)jnum(j, "initializer_range", 0.02);
  c->tied = jbool(j, "tie_word_embeddings", true);
  const char *act = jstr(j, "activation_function");
  if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
    return ot_error(OT_EUNSUPPORTED, "%s: activation_function '%s' unsupported (gelu_new only)",
                    j->path, act);
  if (jbool(j, "scale_attn_by_inverse_layer_idx", false) || !jbool(j, "scale_attn_weights", true))
    return ot_error(OT_EUNSUPPORTED, "%s: scale_attn_by_inverse_layer_idx / scale_attn_weights=false"
                    " unsupported", j->path);
  return j->err;
}

// ViTConfig: a vision transformer (ViTForImageClassification; num_labels = id2label's size).
static ot_status cfg_vit(cfgj *j, ot_model_config *c) {
  ot_model_config_preset(c, "vit-base/16");
  c->d_model = jint(j, "hidden_size", 768, false);
  c->n_layers = jint(j, "num_hidden_layers", 12, false);
  c->n_heads = c->n_kv_heads = jint(j, "num_attention_heads", 12, false);
  c->d_ff = jint(j, "intermediate_size", 3072, false);
  c->image_size = jint(j, "image_size", 224, false);
  c->patch_size = jint(j, "patch_size", 16, false);
  c->channels = jint(j, "num_channels", 3, false);
  c->eps = (float)jnum(j, "layer_norm_eps", 1e-12);
  c->init_std = (float)jnum(j, "initializer_range", 0.02);
  c->dropout = (float)jnum(j, "hidden_dropout_prob", 0.0);
  c->attn_dropout = (float)jnum(j, "attention_probs_dropout_prob", 0.0);
  const ot_json *lab = jget(j, "id2label");
  c->vocab = lab && lab->type == OT_JOBJ && lab->n > 0 ? lab->n : jint(j, "num_labels", 2, false);
  const int g = c->patch_size > 0 ? c->image_size / c->patch_size : 0;
  c->max_seq = 1 + g * g;
  const char *act = jstr(j, "hidden_act");
  if (act && !strcmp(act, "gelu")) c->mlp = OT_MLP_GELU_ERF;
  else if (act && (!strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh"))) c->mlp = OT_MLP_GELU;
  else if (act)
    return ot_error(OT_EUNSUPPORTED, "%s: hidden_act '%s' unsupported (gelu or gelu_new)", j->path, act);
  if (!jbool(j, "qkv_bias", true))
    return ot_error(OT_EUNSUPPORTED, "%s: qkv_bias=false unsupported (ViT's q/k/v have biases)", j->path);
  const char *pool = jstr(j, "pooling");   // (ot's key: "ot-vit" files of mean-pooled models)
  if (pool && !strcmp(pool, "mean")) c->pool = OT_POOL_MEAN;
  else if (pool && strcmp(pool, "cls"))
    return ot_error(OT_EUNSUPPORTED, "%s: pooling '%s' unsupported (cls or mean)", j->path, pool);
  const char *pt = jstr(j, "problem_type");
  if (pt && strcmp(pt, "single_label_classification"))
    return ot_error(OT_EUNSUPPORTED, "%s: problem_type '%s' unsupported (single_label_classification)",
                    j->path, pt);
  return j->err;
}

static ot_status cfg_llama(cfgj *j, ot_model_config *c) {
  ot_model_config_preset(c, "hf-llama");
  c->vocab = jint(j, "vocab_size", 0, true);
  c->d_model = jint(j, "hidden_size", 0, true);
  c->n_layers = jint(j, "num_hidden_layers", 0, true);
  c->n_heads = jint(j, "num_attention_heads", 0, true);
  c->n_kv_heads = jint(j, "num_key_value_heads", c->n_heads, false);
  c->d_ff = jint(j, "intermediate_size", 0, true);
  c->max_seq = jint(j, "max_position_embeddings", 2048, false);
  c->eps = (float)jnum(j, "rms_norm_eps", 1e-6);
  c->rope_base = (float)jnum(j, "rope_theta", 10000.0);
  c->init_std = (float)jnum(j, "initializer_range", 0.02);
  c->tied = jbool(j, "tie_word_embeddings", false);
  bool ab = jbool(j, "attention_bias", false), mb = jbool(j, "mlp_bias", ab);
  if (ab != mb)
    return ot_error(OT_EUNSUPPORTED, "%s: attention_bias=%d with mlp_bias=%d unsupported (one "
                    "bias switch for every linear layer)", j->path, ab, mb);
  c->bias = ab;
  const char *act = jstr(j, "hidden_act");
  if (act && strcmp(act, "silu"))
    return ot_error(OT_EUNSUPPORTED, "%s: hidden_act '%s' unsupported (silu only)", j->path, act);
  if (jget(j, "rope_scaling"))
    return ot_error(OT_EUNSUPPORTED, "%s: rope_scaling unsupported (plain RoPE only)", j->path);
  if (j->err == OT_OK && c->n_heads > 0 && jget(j, "head_dim") &&
      jint(j, "head_dim", 0, false) != c->d_model / c->n_heads)
    return ot_error(OT_EUNSUPPORTED, "%s: head_dim=%d != hidden_size / num_attention_heads = %d "
                    "unsupported", j->path, jint(j, "head_dim", 0, false), c->d_model / c->n_heads);
  return j->err;
}

// MarianMTModel: post-norm, sinusoidal positions, one vocabulary (decoder_vocab_size
// equal), encoder and decoder of the same width and heads.
static ot_status cfg_marian(cfgj *j, ot_model_config *c, bool mbart) {
  ot_model_config_preset(c, "transformer-base");
  if (mbart) {   // pre-norm, learned positions at offset 2, embedding norms, gelu
    c->norm_place = OT_PLACE_PRE;
    c->pos = OT_POS_LEARNED;
    c->pos_offset = 2;
    c->embed_norm = true;
  }
  c->vocab = jint(j, "vocab_size", 0, true);
  c->d_model = jint(j, "d_model", 0, true);
  c->n_enc_layers = jint(j, "encoder_layers", 0, true);
  c->n_layers = jint(j, "decoder_layers", 0, true);
  c->n_heads = c->n_kv_heads = jint(j, "decoder_attention_heads", 0, true);
  c->d_ff = jint(j, "decoder_ffn_dim", 0, true);
  c->max_seq = jint(j, "max_position_embeddings", 512, false);
  c->init_std = (float)jnum(j, "init_std", 0.02);
  c->tied = jbool(j, "tie_word_embeddings", true);
  c->dropout = (float)jnum(j, "dropout", 0.1);   // HF Marian / mBART defaults 0.1 / 0 / 0
  c->attn_dropout = (float)jnum(j, "attention_dropout", 0.0);
  c->act_dropout = (float)jnum(j, "activation_dropout", 0.0);
  c->embed_scale = jbool(j, "scale_embedding", false);
  const char *ids[3] = {"pad_token_id", "eos_token_id", "decoder_start_token_id"};
  int *dst[3] = {&c->pad_id, &c->eos_id, &c->decoder_start_id};
  for (int i = 0; i < 3; i++) {
    const ot_json *v = jget(j, ids[i]);
    if (!v) {
      if (j->err == OT_OK) j->err = ot_error(OT_EFORMAT, "%s: key '%s' is missing", j->path, ids[i]);
    } else if (v->type != OT_JNUM || !v->is_int || v->i < 0 || v->i > 1000000000) {
      if (j->err == OT_OK)
        j->err = ot_error(OT_EFORMAT, "%s: '%s' must be a token id (integer >= 0)", j->path, ids[i]);
    } else {
      *dst[i] = (int)v->i;
    }
  }
  if (j->err != OT_OK) return j->err;
  const char *act = jstr(j, "activation_function");
  if (!act) c->mlp = mbart ? OT_MLP_GELU_ERF : OT_MLP_RELU;
  else if (strcmp(act, "relu") == 0) c->mlp = OT_MLP_RELU;
  else if (strcmp(act, "gelu") == 0) c->mlp = OT_MLP_GELU_ERF;
  else if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0) c->mlp = OT_MLP_GELU;
  else
    return ot_error(OT_EUNSUPPORTED, "%s: activation_function '%s' unsupported (relu, gelu, "
                    "gelu_new)", j->path, act);
  const char *same[3][2] = {{"encoder_attention_heads", "decoder_attention_heads"},
                            {"encoder_ffn_dim", "decoder_ffn_dim"},
                            {"decoder_vocab_size", "vocab_size"}};
  for (int i = 0; i < 3; i++)
    if (jget(j, same[i][0]) && jint(j, same[i][0], 0, false) != jint(j, same[i][1], 0, false))
      return ot_error(OT_EUNSUPPORTED, "%s: %s=%d differs from %s=%d (encoder and decoder must "
                      "agree)", j->path, same[i][0], jint(j, same[i][0], 0, false), same[i][1],
                      jint(j, same[i][1], 0, false));
  if (!jbool(j, "share_encoder_decoder_embeddings", true))
    return ot_error(OT_EUNSUPPORTED, "%s: share_encoder_decoder_embeddings=false unsupported (one "
                    "vocabulary for source and target)", j->path);
  if (!mbart && (jbool(j, "normalize_before", false) || jbool(j, "normalize_embedding", false) ||
                 jbool(j, "add_final_layer_norm", false)))
    return ot_error(OT_EUNSUPPORTED, "%s: normalize_before / normalize_embedding / "
                    "add_final_layer_norm unsupported (Marian is post-norm)", j->path);
  if (!jbool(j, "is_encoder_decoder", true))
    return ot_error(OT_EUNSUPPORTED, "%s: is_encoder_decoder=false unsupported", j->path);
  return j->err;
}

ot_status ot_model_config_from_hf(ot_model_config *c, const char *path) {
  static const char fn[] = "ot_model_config_from_hf";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(path, fn);
  char *text = NULL;
  size_t len = 0;
  OT_TRY(read_file(path, &text, &len));
  ot_json_doc doc = {0};
  ot_status s = ot_json_parse(&doc, text, len, 0, path);
  free(text);
  if (s != OT_OK) return s;
  cfgj j = {doc.root, path, OT_OK};
  if (doc.root->type != OT_JOBJ) s = ot_error(OT_EFORMAT, "%s: not a JSON object", path);
  const char *type = s == OT_OK ? jstr(&j, "model_type") : NULL;
  if (s == OT_OK && !type) s = ot_error(OT_EFORMAT, "%s: key 'model_type' is missing", path);
  if (s == OT_OK) {
    if (strcmp(type, "gpt2") == 0) s = cfg_gpt2(&j, c);
    else if (strcmp(type, "llama") == 0) s = cfg_llama(&j, c);
    else if (strcmp(type, "marian") == 0) s = cfg_marian(&j, c, false);
    else if (strcmp(type, "mbart") == 0) s = cfg_marian(&j, c, true);
    else if (strcmp(type, "vit") == 0 || strcmp(type, "ot-vit") == 0) s = cfg_vit(&j, c);
    else s = ot_error(OT_EUNSUPPORTED, "%s: model_type '%s' unsupported (gpt2, llama, marian, "
                      "mbart, vit or ot-vit)", path, type);
  }
  if (s == OT_OK) snprintf(c->name, sizeof c->name, "hf-%s", type);
  ot_json_free(&doc);
  if (s == OT_OK) s = ot_model_config_validate(c);
  return s;
}

// Both loaders: inference = no gradient buffer (external_grads, never bound).
static ot_status load_hf(ot_model **out, const char *dir, const ot_run_config *r, bool inference,
                         const char *fn) {
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(dir, fn);
  char path[4096];
  ot_model_config c;
  snprintf(path, sizeof path, "%s/config.json", dir);
  OT_TRY(ot_model_config_from_hf(&c, path));
  ot_model *m = NULL;
  OT_CHECK_PTR(r, fn);
  ot_run_config run = *r;
  if (c.arch == OT_ARCH_ENCDEC && run.S == 0) run.S = run.T;   // source as long as the target
  if (c.arch == OT_ARCH_VIT && run.T < c.max_seq) run.T = c.max_seq;   // at least its own images
  ot_model_part part = ot_model_part_whole(&c);
  part.external_grads = inference;
  OT_TRY(ot_model_create_part(&m, &c, &run, &part));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  ot_st_file *f = NULL;
  ot_status s = ot_st_open(&f, path);
  if (s == OT_OK) s = ot_model_import(m, f, NULL, true);
  ot_st_close(f);
  if (s != OT_OK) {
    ot_model_free(m);
    return s;
  }
  m->infer_only = inference;
  *out = m;
  return OT_OK;
}

ot_status ot_model_load_hf(ot_model **out, const char *dir, const ot_run_config *r) {
  return load_hf(out, dir, r, false, "ot_model_load_hf");
}

ot_status ot_model_load_hf_infer(ot_model **out, const char *dir, const ot_run_config *r) {
  return load_hf(out, dir, r, true, "ot_model_load_hf_infer");
}
