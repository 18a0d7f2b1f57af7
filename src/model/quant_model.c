// Quantized models: every matrix of a model quantized (ot_qweight), and the
// one-file safetensors format `ot quantize` writes and inference loads
// (__metadata__ format "ot-quantized" with the model config).
#include "model_impl.h"
#include <errno.h>
#include <stdlib.h>

#define QFORMAT "ot-quantized"

// Matrices that are quantized (learned positions are read one row per token: kept f32).
static bool is_quantized(const ot_param *p) {
  return p->ndim == 2 && (p->kind == OT_PT_EMBED || p->kind == OT_PT_MATRIX || p->kind == OT_PT_MATRIX_RES ||
                          p->kind == OT_PT_LM_HEAD);
}

static ot_qmodel *qmodel_alloc(int n) {
  ot_qmodel *q = calloc(1, sizeof *q);
  if (q) q->t = calloc((size_t)(n > 0 ? n : 1), sizeof *q->t);
  if (!q || !q->t) {
    if (q) free(q);
    ot_error(OT_ENOMEM, "quantized model: out of memory for the tensor table");
    return NULL;
  }
  return q;
}

void ot_qmodel_free(ot_qmodel *q) {
  if (!q) return;
  for (int i = 0; i < q->n; i++) ot_qweight_free(&q->t[i].w);
  free(q->t);
  free(q);
}

const ot_qtensor *ot_qmodel_find(const ot_qmodel *q, const char *name) {
  if (!q || !name) return NULL;
  for (int i = 0; i < q->n; i++)
    if (!strcmp(q->t[i].name, name)) return &q->t[i];
  return NULL;
}

size_t ot_qmodel_bytes(const ot_qmodel *q) {
  size_t b = 0;
  for (int i = 0; q && i < q->n; i++) b += ot_qweight_bytes(&q->t[i].w);
  return b;
}

ot_status ot_qmodel_from_model(ot_qmodel **out, const ot_model *m, ot_qw_kind kind, int group) {
  OT_CHECK_PTR(m, "ot_qmodel_from_model");
  return ot__qmodel_build(out, m, kind, group, ot_model_params((ot_model *)m), NULL);
}

bool ot__param_quantized(const ot_param *p) { return is_quantized(p); }

ot_status ot__qmodel_build(ot_qmodel **out, const ot_model *m, ot_qw_kind kind, int group, const float *w,
                           float *const *clip) {
  static const char fn[] = "ot_qmodel_from_model";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(m, fn);
  const ot_model_config *c = ot_model_config_of(m);
  const ot_model_part *part = ot_model_part_of(m);
  if (part->tp != 1 || part->layer0 != 0 || part->layer1 != ot_model_n_blocks(c))
    return ot_error(OT_EINVAL, "%s: the model is one part of a partitioned model (quantize the whole model)", fn);
  if (kind != OT_QW_INT8 && group != 0)
    return ot_error(OT_EINVAL, "%s: group=%d is only meaningful for int8 (use 0 for %s)", fn, group,
                    ot_qw_kind_name(kind));
  const int n = ot_model_param_count(m);
  // every quantized matrix must admit the group before anything is allocated
  for (int i = 0; i < n && kind == OT_QW_INT8 && group; i++) {
    const ot_param *p = ot_model_param_at(m, i);
    if (is_quantized(p) && p->shape[1] % group)
      return ot_error(OT_EINVAL, "%s: %s has %lld input features, not a multiple of group=%d (use a group "
                      "of 32, 64 or 128 dividing %lld, or 0 = per-channel)", fn, p->name,
                      (long long)p->shape[1], group, (long long)p->shape[1]);
  }
  ot_qmodel *q = qmodel_alloc(n);
  if (!q) return OT_ENOMEM;
  q->config = *c;
  q->kind = kind;
  q->group = kind == OT_QW_INT8 ? group : 0;
  ot_status s = OT_OK;
  for (int i = 0; i < n && s == OT_OK; i++) {
    const ot_param *p = ot_model_param_at(m, i);
    ot_qtensor *t = &q->t[q->n];
    snprintf(t->name, sizeof t->name, "%s", p->name);
    t->ndim = p->ndim;
    if (is_quantized(p))
      s = ot_qweight_quantize_clip(&t->w, kind, q->group, w + p->offset, (int)p->shape[0], (int)p->shape[1],
                                   clip && kind == OT_QW_INT8 ? clip[i] : NULL);
    else
      s = ot_qweight_quantize(&t->w, OT_QW_F32, 0, w + p->offset, p->ndim == 2 ? (int)p->shape[0] : 1,
                              (int)(p->ndim == 2 ? p->shape[1] : p->shape[0]));
    if (s == OT_OK) q->n++;
  }
  if (s != OT_OK) {
    ot_qmodel_free(q);
    return s;
  }
  *out = q;
  return OT_OK;
}

// --------------------------------------------------------------- config ----
typedef enum { F_INT, F_FLOAT, F_BOOL, F_ENUM, F_TEXT } field_type;
typedef struct {
  const char *key;
  field_type type;
  size_t off;
  const char *names[4];   // F_ENUM: value i is names[i]
  bool optional;          // absent from a file: 0 (the encoder-decoder fields, which files of
                          // decoder-only models written before them lack)
} field;

#define OFF(f) offsetof(ot_model_config, f)
static const field k_fields[] = {
    {"config.name", F_TEXT, OFF(name), {0}},
    {"config.names", F_ENUM, OFF(names), {"gpt2", "llama", "marian"}},
    {"config.vocab", F_INT, OFF(vocab), {0}},
    {"config.vocab_pad", F_INT, OFF(vocab_pad), {0}},
    {"config.d_model", F_INT, OFF(d_model), {0}},
    {"config.n_layers", F_INT, OFF(n_layers), {0}},
    {"config.n_heads", F_INT, OFF(n_heads), {0}},
    {"config.n_kv_heads", F_INT, OFF(n_kv_heads), {0}},
    {"config.d_ff", F_INT, OFF(d_ff), {0}},
    {"config.max_seq", F_INT, OFF(max_seq), {0}},
    {"config.norm", F_ENUM, OFF(norm), {"layernorm", "rmsnorm"}},
    {"config.mlp", F_ENUM, OFF(mlp), {"gelu", "swiglu", "relu", "gelu_erf"}},
    {"config.pos", F_ENUM, OFF(pos), {"learned", "rope", "sinusoid"}},
    {"config.rope_base", F_FLOAT, OFF(rope_base), {0}},
    {"config.rope_style", F_ENUM, OFF(rope_style), {"neox", "gptj"}},
    {"config.tied", F_BOOL, OFF(tied), {0}},
    {"config.bias", F_BOOL, OFF(bias), {0}},
    {"config.eps", F_FLOAT, OFF(eps), {0}},
    {"config.init_std", F_FLOAT, OFF(init_std), {0}},
    // encoder-decoder models
    {"config.arch", F_ENUM, OFF(arch), {"decoder", "encdec"}, true},
    {"config.n_enc_layers", F_INT, OFF(n_enc_layers), {0}, true},
    {"config.norm_place", F_ENUM, OFF(norm_place), {"pre", "post"}, true},
    {"config.embed_scale", F_BOOL, OFF(embed_scale), {0}, true},
    {"config.logits_bias", F_BOOL, OFF(logits_bias), {0}, true},
    {"config.pad_id", F_INT, OFF(pad_id), {0}, true},
    {"config.eos_id", F_INT, OFF(eos_id), {0}, true},
    {"config.decoder_start_id", F_INT, OFF(decoder_start_id), {0}, true},
    {"config.src_vocab", F_INT, OFF(src_vocab), {0}, true},
    {"config.pos_offset", F_INT, OFF(pos_offset), {0}, true},
    {"config.embed_norm", F_BOOL, OFF(embed_norm), {0}, true},
};
#undef OFF
#define N_FIELDS ((int)(sizeof k_fields / sizeof k_fields[0]))

static void field_get(const ot_model_config *c, const field *f, char *buf, size_t cap) {
  const char *p = (const char *)c + f->off;
  switch (f->type) {
    case F_INT: snprintf(buf, cap, "%d", *(const int *)p); break;
    case F_FLOAT: snprintf(buf, cap, "%.9g", (double)*(const float *)p); break;
    case F_BOOL: snprintf(buf, cap, "%s", *(const bool *)p ? "true" : "false"); break;
    case F_ENUM: snprintf(buf, cap, "%s", f->names[*(const int *)p]); break;
    case F_TEXT: snprintf(buf, cap, "%s", p); break;
  }
}

static ot_status field_set(ot_model_config *c, const field *f, const char *v, const char *path) {
  char *p = (char *)c + f->off, *end = NULL;
  errno = 0;
  switch (f->type) {
    case F_INT: {
      long x = strtol(v, &end, 10);
      if (errno || end == v || *end || x < -2147483647L || x > 2147483647L) break;
      *(int *)p = (int)x;
      return OT_OK;
    }
    case F_FLOAT: {
      float x = strtof(v, &end);
      if (errno || end == v || *end) break;
      *(float *)p = x;
      return OT_OK;
    }
    case F_BOOL:
      if (strcmp(v, "true") && strcmp(v, "false")) break;
      *(bool *)p = !strcmp(v, "true");
      return OT_OK;
    case F_ENUM:
      for (int i = 0; i < 4 && f->names[i]; i++)
        if (!strcmp(v, f->names[i])) { *(int *)p = i; return OT_OK; }
      break;
    case F_TEXT:
      snprintf(p, sizeof c->name, "%s", v);
      return OT_OK;
  }
  return ot_error(OT_EFORMAT, "%s: __metadata__ %s = '%.40s' is not a valid value", path, f->key, v);
}

// ----------------------------------------------------------------- save ----
ot_status ot_quant_file_save(const ot_qmodel *q, const char *path) {
  static const char fn[] = "ot_quant_file_save";
  OT_CHECK_PTR(q, fn);
  OT_CHECK_PTR(path, fn);
  if (q->config.arch == OT_ARCH_VIT)   // nor the image settings
    return ot_error(OT_EUNSUPPORTED, "%s: quantized vision transformers cannot be saved (ot classify "
                    "--weights int8 quantizes the f32 model as it loads it)", fn);
  const int nmax = 2 * q->n, nmeta = 5 + N_FIELDS;
  ot_st_tensor *ts = calloc((size_t)(nmax > 0 ? nmax : 1), sizeof *ts);
  char (*names)[96] = calloc((size_t)(q->n > 0 ? q->n : 1), sizeof *names);
  const char *mk[5 + N_FIELDS], *mv[5 + N_FIELDS];
  char vals[5 + N_FIELDS][64];
  if (!ts || !names) {
    free(ts); free(names);
    return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  }
  ot_status s = OT_OK;
  int nt = 0;
  for (int i = 0; i < q->n && s == OT_OK; i++) {
    const ot_qtensor *t = &q->t[i];
    s = ot_qweight_check(&t->w, fn);
    if (s == OT_OK && t->w.pack)
      s = ot_error(OT_EINVAL, "%s: tensor '%s' is packed for this CPU's kernel (ot_qweight_pack: an engine's "
                   "run-time layout); save the model before an engine packs it", fn, t->name);
    if (s == OT_OK && (t->ndim < 1 || t->ndim > 2 || (t->ndim == 1 && (t->w.kind != OT_QW_F32 || t->w.rows != 1))))
      s = ot_error(OT_EINVAL, "%s: tensor '%s': ndim=%d with a %s [%d, %d] weight (1-D tensors are f32 with "
                   "rows = 1)", fn, t->name, t->ndim, ot_qw_kind_name(t->w.kind), t->w.rows, t->w.cols);
    if (s != OT_OK) break;
    ot_st_tensor *x = &ts[nt++];
    const ot_qweight *w = &t->w;
    x->name = t->name;
    x->dtype = w->kind == OT_QW_F32 ? OT_F32 : w->kind == OT_QW_BF16 ? OT_BF16 : OT_I8;
    x->ndim = t->ndim;
    x->shape[0] = t->ndim == 2 ? w->rows : (int64_t)w->rows * w->cols;
    x->shape[1] = w->cols;
    x->data = w->data;
    x->nbytes = (size_t)w->rows * w->cols * ot_dtype_size(x->dtype);
    if (w->kind == OT_QW_INT8) {
      ot_st_tensor *sc = &ts[nt++];
      snprintf(names[i], sizeof names[i], "%s.scales", t->name);
      sc->name = names[i];
      sc->dtype = OT_F32;
      sc->ndim = w->group ? 2 : 1;
      sc->shape[0] = w->rows;
      sc->shape[1] = w->group ? w->cols / w->group : 0;
      sc->data = w->scales;
      sc->nbytes = ot_qweight_bytes(w) - (size_t)w->rows * w->cols;
    }
  }
  int nm = 0;
  mk[nm] = "format"; snprintf(vals[nm], sizeof vals[0], "%s", QFORMAT); nm++;
  mk[nm] = "format_version"; snprintf(vals[nm], sizeof vals[0], "1"); nm++;
  mk[nm] = "dtype"; snprintf(vals[nm], sizeof vals[0], "%s", ot_qw_kind_name(q->kind)); nm++;
  mk[nm] = "group"; snprintf(vals[nm], sizeof vals[0], "%d", q->group); nm++;
  mk[nm] = "layout"; snprintf(vals[nm], sizeof vals[0], "out_in"); nm++;
  for (int i = 0; i < N_FIELDS; i++, nm++) {
    mk[nm] = k_fields[i].key;
    field_get(&q->config, &k_fields[i], vals[nm], sizeof vals[0]);
  }
  for (int i = 0; i < nm; i++) mv[i] = vals[i];
  if (s == OT_OK) s = ot_st_write(path, ts, nt, mk, mv, nmeta);
  free(ts);
  free(names);
  return s;
}

// ----------------------------------------------------------------- load ----
static bool has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n >= k && !strcmp(s + n - k, suf);
}

// Copies x's bytes into fresh tracked memory.
static ot_status copy_data(const ot_st_tensor *x, void **out) {
  *out = ot_mem_alloc(x->nbytes, OT_MEM_PARAMS);
  if (!*out) return OT_ENOMEM;
  memcpy(*out, x->data, x->nbytes);
  return OT_OK;
}

// One stored tensor (not a ".scales") -> t, with its scales for I8.
static ot_status load_tensor(const ot_st_file *f, const ot_st_tensor *x, const ot_qmodel *q, ot_qtensor *t) {
  const char *path = ot_st_name(f);
  if (strlen(x->name) >= sizeof t->name)
    return ot_error(OT_EFORMAT, "%s: tensor name '%.60s...' is too long", path, x->name);
  if (x->ndim != 1 && x->ndim != 2)
    return ot_error(OT_EFORMAT, "%s: tensor '%s' has %d dimensions, expected 1 or 2", path, x->name, x->ndim);
  if (x->dtype != OT_F32 && x->dtype != OT_BF16 && x->dtype != OT_I8)
    return ot_error(OT_EFORMAT, "%s: tensor '%s' is %s, expected F32, BF16 or I8", path, x->name,
                    ot_st_dtype_name(x->dtype));
  if ((x->dtype != OT_F32 && x->ndim != 2) || (x->dtype == OT_BF16 && q->kind != OT_QW_BF16) ||
      (x->dtype == OT_I8 && q->kind != OT_QW_INT8))
    return ot_error(OT_EFORMAT, "%s: tensor '%s' is %s with %d dimensions in a file of dtype %s", path,
                    x->name, ot_st_dtype_name(x->dtype), x->ndim, ot_qw_kind_name(q->kind));
  const int64_t d0 = x->ndim == 2 ? x->shape[0] : 1, d1 = x->ndim == 2 ? x->shape[1] : x->shape[0];
  if (d0 < 1 || d1 < 1 || d0 > INT32_MAX || d1 > INT32_MAX)
    return ot_error(OT_EFORMAT, "%s: tensor '%s' has an empty or oversized shape", path, x->name);
  snprintf(t->name, sizeof t->name, "%s", x->name);
  t->ndim = x->ndim;
  ot_qweight *w = &t->w;
  w->kind = x->dtype == OT_F32 ? OT_QW_F32 : x->dtype == OT_BF16 ? OT_QW_BF16 : OT_QW_INT8;
  w->rows = (int)d0;
  w->cols = (int)d1;
  w->group = w->kind == OT_QW_INT8 ? q->group : 0;
  w->owned = true;
  if (w->kind == OT_QW_INT8) {
    if (w->group && w->cols % w->group)
      return ot_error(OT_EFORMAT, "%s: tensor '%s' has %d columns, not a multiple of the file's group %d",
                      path, x->name, w->cols, w->group);
    char sn[96];
    snprintf(sn, sizeof sn, "%s.scales", x->name);
    const ot_st_tensor *sc = ot_st_find(f, sn);
    const int64_t sc1 = w->group ? w->cols / w->group : 0;
    if (!sc) return ot_error(OT_EFORMAT, "%s: I8 tensor '%s' has no '%s'", path, x->name, sn);
    if (sc->dtype != OT_F32 || sc->ndim != (w->group ? 2 : 1) || sc->shape[0] != w->rows ||
        (w->group && sc->shape[1] != sc1))
      return ot_error(OT_EFORMAT, "%s: '%s' must be F32 [%d%s%lld] (group %d)", path, sn, w->rows,
                      w->group ? ", " : "", w->group ? (long long)sc1 : 0LL, w->group);
    OT_TRY(copy_data(sc, (void **)&w->scales));
  }
  return copy_data(x, &w->data);
}

// The file's metadata -> q (format, dtype, group, config).
static ot_status load_meta(const ot_st_file *f, ot_qmodel *q) {
  const char *path = ot_st_name(f), *fmt = ot_st_meta(f, "format"), *dt = ot_st_meta(f, "dtype");
  const char *gr = ot_st_meta(f, "group"), *lay = ot_st_meta(f, "layout");
  if (!fmt || strcmp(fmt, QFORMAT))
    return ot_error(OT_EFORMAT, "%s: __metadata__ format is '%s', expected '%s' (a file written by "
                    "`ot quantize`)", path, fmt ? fmt : "(none)", QFORMAT);
  if (!lay || strcmp(lay, "out_in"))
    return ot_error(OT_EFORMAT, "%s: __metadata__ layout is '%s', expected 'out_in'", path, lay ? lay : "(none)");
  if (!dt || (strcmp(dt, "f32") && strcmp(dt, "bf16") && strcmp(dt, "int8")))
    return ot_error(OT_EFORMAT, "%s: __metadata__ dtype is '%s', expected f32, bf16 or int8", path, dt ? dt : "(none)");
  q->kind = !strcmp(dt, "f32") ? OT_QW_F32 : !strcmp(dt, "bf16") ? OT_QW_BF16 : OT_QW_INT8;
  char *end = NULL;
  long g = gr ? strtol(gr, &end, 10) : -1;
  if (!gr || *end || (g != 0 && g != 32 && g != 64 && g != 128) || (q->kind != OT_QW_INT8 && g))
    return ot_error(OT_EFORMAT, "%s: __metadata__ group is '%s', expected 0, 32, 64 or 128 (0 unless int8)",
                    path, gr ? gr : "(none)");
  q->group = (int)g;
  memset(&q->config, 0, sizeof q->config);
  for (int i = 0; i < N_FIELDS; i++) {
    const char *v = ot_st_meta(f, k_fields[i].key);
    if (!v && k_fields[i].optional) continue;
    if (!v) return ot_error(OT_EFORMAT, "%s: __metadata__ has no %s", path, k_fields[i].key);
    OT_TRY(field_set(&q->config, &k_fields[i], v, path));
  }
  if (ot_model_config_validate(&q->config) != OT_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", ot_last_error());
    return ot_error(OT_EFORMAT, "%s: the stored model config is invalid: %s", path, why);
  }
  return OT_OK;
}

ot_status ot_quant_file_load(ot_qmodel **out, const char *path) {
  static const char fn[] = "ot_quant_file_load";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(path, fn);
  ot_st_file *f = NULL;
  OT_TRY(ot_st_open(&f, path));
  path = ot_st_name(f);
  const int nf = ot_st_count(f);
  ot_qmodel *q = qmodel_alloc(nf);
  ot_status s = q ? load_meta(f, q) : OT_ENOMEM;
  for (int i = 0; i < nf && s == OT_OK; i++) {
    const ot_st_tensor *x = ot_st_get(f, i);
    if (has_suffix(x->name, ".scales")) {
      char base[96];
      snprintf(base, sizeof base, "%.*s", (int)(strlen(x->name) - 7), x->name);
      const ot_st_tensor *b = ot_st_find(f, base);
      if (!b || b->dtype != OT_I8)
        s = ot_error(OT_EFORMAT, "%s: '%s' scales no I8 tensor '%s'", path, x->name, base);
      continue;
    }
    s = load_tensor(f, x, q, &q->t[q->n]);
    q->n++;   // freed with the model even when partly loaded
  }
  if (s == OT_OK && q->n == 0) s = ot_error(OT_EFORMAT, "%s: holds no tensors", path);
  ot_st_close(f);
  if (s != OT_OK) {
    ot_qmodel_free(q);
    return s;
  }
  *out = q;
  return OT_OK;
}
