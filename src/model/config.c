// Model configuration: presets, validation with messages that name the field
// and the fix, printing, parameter and FLOP counts.
#include "model_impl.h"
#include <limits.h>
#include <math.h>

static ot_model_config base_gpt2(void) {
  ot_model_config c;
  memset(&c, 0, sizeof c);
  c.names = OT_NAMES_GPT2;
  c.vocab_pad = 64;
  c.norm = OT_NORM_LAYERNORM;
  c.mlp = OT_MLP_GELU;
  c.pos = OT_POS_LEARNED;
  c.rope_base = 10000.0f;
  c.rope_style = OT_ROPE_NEOX;
  c.tied = true;
  c.bias = true;
  c.eps = 1e-5f;
  c.init_std = 0.02f;
  return c;
}

static ot_model_config base_llama(void) {
  ot_model_config c = base_gpt2();
  c.names = OT_NAMES_LLAMA;
  c.norm = OT_NORM_RMSNORM;
  c.mlp = OT_MLP_SWIGLU;
  c.pos = OT_POS_ROPE;
  c.tied = false;
  c.bias = false;
  return c;
}

// The original Transformer / Marian: post-norm, sinusoidal positions, ReLU, scaled
// embeddings, one vocabulary for source, target and head, a logits bias; pad = decoder
// start = V - 1, eos = 0 (Marian's convention).
static ot_model_config base_transformer(void) {
  ot_model_config c = base_gpt2();
  c.names = OT_NAMES_MARIAN;
  c.arch = OT_ARCH_ENCDEC;
  c.norm_place = OT_PLACE_POST;
  c.mlp = OT_MLP_RELU;
  c.pos = OT_POS_SINUSOID;
  c.embed_scale = true;
  c.logits_bias = true;
  return c;
}

// A ViT as HF's ViTConfig has it: pre-norm LayerNorm (eps 1e-12), erf GELU, learned
// positions, biases on, an untied classification head with a bias.
static void vit(ot_model_config *c, const char *name, int img, int P, int ch, int classes, int C,
                int L, int H, int F) {
  memset(c, 0, sizeof *c);
  c->names = OT_NAMES_VIT;
  c->arch = OT_ARCH_VIT;
  c->norm = OT_NORM_LAYERNORM;
  c->mlp = OT_MLP_GELU_ERF;
  c->pos = OT_POS_LEARNED;
  c->rope_base = 10000.0f;
  c->bias = true;
  c->logits_bias = true;
  c->eps = 1e-12f;
  c->init_std = 0.02f;
  c->image_size = img;
  c->patch_size = P;
  c->channels = ch;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->vocab = classes; c->vocab_pad = 1; c->d_model = C; c->n_layers = L; c->n_heads = H;
  c->n_kv_heads = H; c->d_ff = F; c->max_seq = 1 + (img / P) * (img / P);
}

static void encdec_ids(ot_model_config *c, int enc_layers) {
  c->n_enc_layers = enc_layers;
  c->pad_id = c->decoder_start_id = c->vocab - 1;
  c->eos_id = 0;
}

static void shape(ot_model_config *c, const char *name, int V, int pad, int C, int L, int H, int Hkv,
                  int F, int T) {
  snprintf(c->name, sizeof c->name, "%s", name);
  c->vocab = V; c->vocab_pad = pad; c->d_model = C; c->n_layers = L; c->n_heads = H;
  c->n_kv_heads = Hkv; c->d_ff = F; c->max_seq = T;
}

static const char *const k_presets = "gpt2, llama-tiny, tiny, small, llama-34b, gpt-1t, transformer-base, "
                                     "transformer-big, transformer-seed, transformer-small, "
                                     "transformer-tiny, vit-tiny/16, vit-small/16, vit-base/16, "
                                     "vit-long, vit-digits, hf-gpt2, hf-llama";

ot_status ot_model_config_preset(ot_model_config *c, const char *name) {
  OT_CHECK_PTR(c, "ot_model_config_preset");
  if (!name) name = "small";
  if (strcmp(name, "gpt2") == 0) {
    *c = base_gpt2();
    shape(c, name, 50257, 128, 768, 12, 12, 12, 3072, 1024);
  } else if (strcmp(name, "llama-tiny") == 0) {
    *c = base_llama();
    shape(c, name, 32000, 64, 288, 6, 6, 2, 768, 256);
  } else if (strcmp(name, "hf-gpt2") == 0 || strcmp(name, "hf-llama") == 0) {
    // the base of a model read from a Hugging Face config.json of that type (hf.c), the name
    // its checkpoints store: every field the file sets is a stored shape key
    OT_TRY(ot_model_config_preset(c, name[3] == 'g' ? "gpt2" : "llama-tiny"));
    snprintf(c->name, sizeof c->name, "%s", name);
  } else if (strcmp(name, "llama-34b") == 0) {   // CodeLlama-34B's shape (planning)
    *c = base_llama();
    shape(c, name, 32000, 64, 8192, 48, 64, 8, 22016, 16384);
  } else if (strcmp(name, "gpt-1t") == 0) {      // a 1.0T-parameter GPT (the seed's 1000B layout)
    *c = base_gpt2();
    shape(c, name, 51200, 128, 25600, 128, 160, 160, 102400, 2048);
  } else if (strcmp(name, "tiny") == 0) {
    *c = base_gpt2();
    shape(c, name, 50, 64, 32, 2, 4, 4, 128, 16);
  } else if (strcmp(name, "small") == 0) {
    *c = base_gpt2();
    shape(c, name, 8192, 64, 256, 4, 4, 4, 1024, 256);
  } else if (strcmp(name, "transformer-base") == 0) {
    *c = base_transformer();
    c->dropout = 0.1f;   // fairseq's transformer: 0.1 / 0 / 0
    shape(c, name, 32000, 64, 512, 6, 8, 8, 2048, 512);
    encdec_ids(c, 6);
  } else if (strcmp(name, "transformer-big") == 0) {
    *c = base_transformer();
    c->dropout = 0.1f;   // fairseq's transformer: 0.1 / 0 / 0
    shape(c, name, 32000, 64, 1024, 6, 16, 16, 4096, 512);
    encdec_ids(c, 6);
  } else if (strcmp(name, "transformer-seed") == 0) {
    *c = base_transformer();
    c->dropout = 0.1f;   // fairseq's transformer: 0.1 / 0 / 0
    shape(c, name, 32000, 64, 1024, 12, 16, 16, 4096, 512);
    encdec_ids(c, 12);
  } else if (strcmp(name, "transformer-small") == 0) {
    *c = base_transformer();
    c->dropout = 0.1f;   // fairseq's transformer: 0.1 / 0 / 0
    shape(c, name, 8000, 64, 256, 3, 4, 4, 1024, 128);
    encdec_ids(c, 3);
  } else if (strcmp(name, "transformer-tiny") == 0) {
    *c = base_transformer();
    shape(c, name, 50, 16, 32, 2, 4, 4, 64, 16);
    encdec_ids(c, 2);
  } else if (strcmp(name, "vit-tiny/16") == 0) {
    vit(c, name, 224, 16, 3, 1000, 192, 12, 3, 768);
  } else if (strcmp(name, "vit-small/16") == 0) {
    vit(c, name, 224, 16, 3, 1000, 384, 12, 6, 1536);
  } else if (strcmp(name, "vit-base/16") == 0) {
    vit(c, name, 224, 16, 3, 1000, 768, 12, 12, 3072);
  } else if (strcmp(name, "vit-long") == 0) {
    vit(c, name, 512, 16, 3, 1000, 384, 12, 6, 1536);
  } else if (strcmp(name, "vit-digits") == 0) {
    vit(c, name, 8, 2, 1, 10, 64, 4, 4, 128);
  } else {
    return ot_error(OT_EINVAL, "model preset '%s' unknown (presets: %s)", name, k_presets);
  }
  return OT_OK;
}

ot_model_config ot_model_config_default(void) {
  ot_model_config c;
  ot_model_config_preset(&c, "small");
  return c;
}

int ot_model_head_dim(const ot_model_config *c) {
  return c->n_heads > 0 ? c->d_model / c->n_heads : 0;
}

int ot_model_vocab_padded(const ot_model_config *c) {
  int p = c->vocab_pad > 0 ? c->vocab_pad : 1;
  return (int)(((int64_t)c->vocab + p - 1) / p * p);
}

#define BAD(...) return ot_error(OT_EINVAL, __VA_ARGS__)

ot_status ot_model_config_validate(const ot_model_config *c) {
  OT_CHECK_PTR(c, "ot_model_config_validate");
  const char *n = c->name[0] ? c->name : "model";
  if (c->names != OT_NAMES_GPT2 && c->names != OT_NAMES_LLAMA && c->names != OT_NAMES_MARIAN &&
      c->names != OT_NAMES_VIT)
    BAD("%s: names=%d unknown (use gpt2, llama, marian or vit)", n, (int)c->names);
  if (c->vocab <= 0) BAD("%s: vocab=%d must be > 0", n, c->vocab);
  if (c->vocab_pad <= 0 || c->vocab_pad > 1024 || (c->vocab_pad & (c->vocab_pad - 1)))
    BAD("%s: vocab_pad=%d must be a power of two in [1, 1024] (64 or 128 suit the GEMMs)", n,
        c->vocab_pad);
  if ((int64_t)c->vocab + c->vocab_pad > INT_MAX / 2)
    BAD("%s: vocab=%d is too large", n, c->vocab);
  if (c->d_model <= 0) BAD("%s: d_model=%d must be > 0", n, c->d_model);
  if (c->n_layers <= 0) BAD("%s: n_layers=%d must be > 0", n, c->n_layers);
  if (c->n_heads <= 0) BAD("%s: n_heads=%d must be > 0", n, c->n_heads);
  if (c->d_model % c->n_heads)
    BAD("%s: d_model=%d is not a multiple of n_heads=%d (head_dim = d_model / n_heads)", n,
        c->d_model, c->n_heads);
  if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
    BAD("%s: n_kv_heads=%d must divide n_heads=%d (n_heads: multi-head, 1: multi-query)", n,
        c->n_kv_heads, c->n_heads);
  if (c->d_ff <= 0) BAD("%s: d_ff=%d must be > 0 (e.g. 4 * d_model)", n, c->d_ff);
  if (c->max_seq <= 0) BAD("%s: max_seq=%d must be > 0", n, c->max_seq);
  if (c->norm != OT_NORM_LAYERNORM && c->norm != OT_NORM_RMSNORM)
    BAD("%s: norm=%d unknown (use layernorm or rmsnorm)", n, (int)c->norm);
  if (c->arch != OT_ARCH_DECODER && c->arch != OT_ARCH_ENCDEC && c->arch != OT_ARCH_VIT)
    BAD("%s: arch=%d unknown (use decoder, encdec or vit)", n, (int)c->arch);
  if (c->arch != OT_ARCH_VIT &&
      (c->image_size || c->patch_size || c->channels || c->drop_path || c->pool != OT_POOL_CLS))
    BAD("%s: image_size, patch_size, channels, drop_path and pool are vision transformer settings "
        "(set arch vit, or leave them 0)", n);
  if (c->pool != OT_POOL_CLS && c->pool != OT_POOL_MEAN)
    BAD("%s: pool=%d unknown (cls or mean)", n, (int)c->pool);
  if (c->arch == OT_ARCH_VIT) {
    OT_TRY(ot__vit_validate(c, n));
  } else if (c->names == OT_NAMES_VIT) {
    BAD("%s: vit names belong to vision transformers (set arch vit)", n);
  } else if (c->arch == OT_ARCH_ENCDEC) {
    OT_TRY(ot__encdec_validate(c, n));
  } else {
    if (c->names == OT_NAMES_MARIAN)
      BAD("%s: marian names belong to encoder-decoder models (set arch encdec, or use gpt2 / "
          "llama names)", n);
    if (c->mlp != OT_MLP_GELU && c->mlp != OT_MLP_SWIGLU)
      BAD("%s: activation=%d unsupported in a decoder-only model (use gelu or swiglu)", n,
          (int)c->mlp);
    if (c->pos != OT_POS_LEARNED && c->pos != OT_POS_ROPE)
      BAD("%s: positions=%d unsupported in a decoder-only model (use learned or rope)", n,
          (int)c->pos);
    if (c->norm_place != OT_PLACE_PRE || c->embed_scale || c->logits_bias || c->n_enc_layers ||
        c->src_vocab || c->pos_offset || c->embed_norm)
      BAD("%s: norm_place post, embed_scale, logits_bias, n_enc_layers, src_vocab, pos_offset "
          "and embed_norm are encoder-decoder settings (set arch encdec, or leave them 0)", n);
  }
  if (c->pos == OT_POS_ROPE) {
    if (ot_model_head_dim(c) % 2)
      BAD("%s: RoPE needs an even head_dim, got d_model/n_heads = %d/%d = %d", n, c->d_model,
          c->n_heads, ot_model_head_dim(c));
    if (!(c->rope_base > 1.0f) || !isfinite(c->rope_base))
      BAD("%s: rope_base=%g must be finite and > 1 (e.g. 10000)", n, c->rope_base);
    if (c->rope_style != OT_ROPE_NEOX && c->rope_style != OT_ROPE_GPTJ)
      BAD("%s: rope_style=%d unknown (use neox or gptj)", n, (int)c->rope_style);
  }
  if (!(c->eps > 0.0f) || !(c->eps < 1.0f))
    BAD("%s: eps=%g must be in (0, 1) (e.g. 1e-5)", n, c->eps);
  if (!(c->init_std > 0.0f) || !isfinite(c->init_std))
    BAD("%s: init_std=%g must be finite and > 0 (e.g. 0.02)", n, c->init_std);
  const float dp[3] = {c->dropout, c->attn_dropout, c->act_dropout};
  const char *dn[3] = {"dropout", "attn_dropout", "act_dropout"};
  for (int i = 0; i < 3; i++)
    if (!(dp[i] >= 0.0f && dp[i] < 1.0f))
      BAD("%s: %s=%g must be in [0, 1) (a probability of dropping; 0: off, e.g. 0.1)", n, dn[i],
          dp[i]);
  if (c->n_layers > 8192 || c->n_enc_layers > 8192)
    BAD("%s: n_layers=%d / n_enc_layers=%d: at most 8192 blocks per stack", n, c->n_layers,
        c->n_enc_layers);
  int64_t D = ot_model_head_dim(c), qkv = ((int64_t)c->n_heads + 2 * c->n_kv_heads) * D;
  int64_t fa = (c->mlp == OT_MLP_SWIGLU ? 2 : 1) * (int64_t)c->d_ff;
  if (qkv > INT_MAX / 4 || fa > INT_MAX / 4 || (int64_t)c->max_seq * c->d_model > INT_MAX)
    BAD("%s: dimensions too large (d_model=%d, d_ff=%d, max_seq=%d)", n, c->d_model, c->d_ff,
        c->max_seq);
  return OT_OK;
}

void ot_model_config_print(FILE *f, const ot_model_config *c) {
  fprintf(f, "model %s (%s names): vocab %d (padded %d), d_model %d, layers %d, heads %d "
          "(kv %d, head_dim %d), d_ff %d, max_seq %d\n",
          c->name[0] ? c->name : "custom",
          c->names == OT_NAMES_GPT2 ? "gpt2" : c->names == OT_NAMES_LLAMA ? "llama"
          : c->names == OT_NAMES_VIT ? "vit" : "marian", c->vocab,
          ot_model_vocab_padded(c), c->d_model, c->n_layers, c->n_heads, c->n_kv_heads,
          ot_model_head_dim(c), c->d_ff, c->max_seq);
  fprintf(f, "  norm %s (eps %g), activation %s, positions %s", 
          c->norm == OT_NORM_LAYERNORM ? "layernorm" : "rmsnorm", c->eps,
          ot__mlp_name(c->mlp), c->pos == OT_POS_LEARNED ? "learned"
                                : c->pos == OT_POS_ROPE ? "rope" : "sinusoid");
  if (c->pos == OT_POS_ROPE)
    fprintf(f, " (base %g, %s)", c->rope_base, c->rope_style == OT_ROPE_NEOX ? "neox" : "gptj");
  if (c->arch == OT_ARCH_ENCDEC)
    fprintf(f, ", encoder-decoder (%d encoder layers, %s-norm%s%s%s, position offset %d; pad %d, "
            "eos %d, start %d)", c->n_enc_layers, c->norm_place == OT_PLACE_POST ? "post" : "pre",
            c->embed_scale ? ", scaled embeddings" : "", c->embed_norm ? ", embedding norms" : "",
            c->logits_bias ? ", logits bias" : "", c->pos_offset, c->pad_id, c->eos_id,
            c->decoder_start_id);
  if (c->arch == OT_ARCH_VIT)
    fprintf(f, ", vision transformer (%dx%d images, %d channel%s, %dx%d patches, %d classes, %s "
            "pooling%s)", c->image_size, c->image_size, c->channels, c->channels == 1 ? "" : "s",
            c->patch_size, c->patch_size, c->vocab, c->pool == OT_POOL_MEAN ? "mean" : "CLS",
            c->drop_path > 0.0f ? ", drop-path" : "");
  fprintf(f, ", %s embeddings, biases %s; %.2fM parameters\n", c->tied ? "tied" : "untied",
          c->bias ? "on" : "off", ot_model_n_params(c) / 1e6);
  if (c->dropout > 0.0f || c->attn_dropout > 0.0f || c->act_dropout > 0.0f || c->drop_path > 0.0f)
    fprintf(f, "  dropout %g (embeddings, sublayer outputs), attention %g, activation %g, "
            "drop-path %g (training only)\n", c->dropout, c->attn_dropout, c->act_dropout,
            c->drop_path);
}

int64_t ot_model_n_params(const ot_model_config *c) {
  const int64_t C = c->d_model, V = c->vocab, D = ot_model_head_dim(c);
  const int64_t Hq = c->n_heads, Hkv = c->n_kv_heads, F = c->d_ff;
  const int64_t Fa = c->mlp == OT_MLP_SWIGLU ? 2 * F : F, qkv = (Hq + 2 * Hkv) * D;
  const int64_t nb = c->norm == OT_NORM_LAYERNORM && c->bias ? 2 : 1;  // norm tensors of size C
  int64_t layer = qkv * C + C * Hq * D + Fa * C + C * F + 2 * nb * C;
  if (c->bias) layer += qkv + C + Fa + C;
  if (c->arch == OT_ARCH_ENCDEC) {   // + encoder blocks; decoder blocks + cross-attention
    int64_t cross = qkv * C + C * Hq * D + nb * C + (c->bias ? qkv + C : 0);
    int64_t n = V * C + (c->tied ? 0 : V * C) + (c->logits_bias ? V : 0);
    n += (int64_t)c->n_enc_layers * layer + (int64_t)c->n_layers * (layer + cross);
    if (c->norm_place == OT_PLACE_PRE) n += 2 * nb * C;   // final encoder and decoder norms
    if (c->embed_norm) n += 2 * nb * C;
    if (c->pos == OT_POS_LEARNED) n += 2 * ((int64_t)c->max_seq + c->pos_offset) * C;
    return n;
  }
  if (c->arch == OT_ARCH_VIT) {   // patch conv + bias, CLS, positions, blocks, norm, head
    const int64_t K = (int64_t)c->channels * c->patch_size * c->patch_size;
    return K * C + C + C + (int64_t)c->max_seq * C + (int64_t)c->n_layers * layer + nb * C +
           V * C + V;
  }
  int64_t n = V * C + (c->tied ? 0 : V * C) + nb * C + (int64_t)c->n_layers * layer;
  if (c->pos == OT_POS_LEARNED) n += (int64_t)c->max_seq * C;
  return n;
}

double ot_model_flops_per_token(const ot_model_config *c, int T) {
  const double C = c->d_model, D = ot_model_head_dim(c), Hq = c->n_heads, Hkv = c->n_kv_heads;
  const double F = c->d_ff, Fa = c->mlp == OT_MLP_SWIGLU ? 2 * F : F;
  const double gemm = (Hq + 2 * Hkv) * D * C + C * Hq * D + Fa * C + C * F;   // MACs per layer
  const double attn = 2.0 * Hq * D * (T + 1) / 2.0;   // QK^T + PV MACs, causal average
  if (c->arch == OT_ARCH_VIT) {   // per token (CLS + patches), bidirectional; the patch
                                  // GEMM and the head (on the CLS row) spread over the T tokens
    const double K = (double)c->channels * c->patch_size * c->patch_size;
    const double vfwd = 2.0 * (c->n_layers * (gemm + 2.0 * Hq * D * T) + K * C * (T - 1) / T +
                               (double)c->vocab * C / T);
    return 3.0 * vfwd;
  }
  double fwd = 2.0 * (c->n_layers * (gemm + attn) + (double)ot_model_vocab_padded(c) * C);
  if (c->arch == OT_ARCH_ENCDEC) {   // per target token, a source as long as the target:
    const double enc_attn = 2.0 * Hq * D * T;                     // bidirectional
    const double cross = 2.0 * Hq * D * C + 2.0 * Hkv * D * C + 2.0 * Hq * D * T;   // q, o; k, v; attn
    fwd += 2.0 * (c->n_enc_layers * (gemm + enc_attn) + c->n_layers * cross);
  }
  return 3.0 * fwd;
}

const char *ot_recompute_name(ot_recompute r) {
  switch (r) {
    case OT_RECOMPUTE_NONE: return "none";
    case OT_RECOMPUTE_SELECTIVE: return "selective";
    case OT_RECOMPUTE_FULL: return "full";
  }
  return "unknown";
}
