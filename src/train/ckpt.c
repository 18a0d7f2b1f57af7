// Checkpoints: model.safetensors (HF names; every training setting, a checksum
// per tensor and of the metadata), optimizer.safetensors (AdamW moments per
// parameter; step, RNG, data position, weight checksum, the settings, the
// checksums), config.json (Hugging Face, when expressible) and the tokenizer
// of the training data. A save writes them into .NAME.tmp/, fsyncs, renames
// the directory into place and fsyncs its parent; <out>/latest names the
// newest step_NNNNNN directory. Integrity checks: ckpt_files.c.
#include "train/train_impl.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT "ot-train-state"
#define FORMAT_VERSION "2"
// ------------------------------------------------------------ config.json ---
// The HF config of the model, or "" when HF cannot express it.
static void hf_config(const ot_model_config *c, char *buf, size_t cap) {
  buf[0] = 0;
  if (c->arch == OT_ARCH_VIT) {
    ot_vit_hf_config(c, buf, cap);
    return;
  }
  if (c->names == OT_NAMES_GPT2 && c->norm == OT_NORM_LAYERNORM && c->mlp == OT_MLP_GELU &&
      c->pos == OT_POS_LEARNED && c->bias && c->n_kv_heads == c->n_heads) {
    snprintf(buf, cap,
             "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
             "  \"vocab_size\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
             "  \"n_inner\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n"
             "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": %.9g,\n"
             "  \"initializer_range\": %.9g,\n  \"tie_word_embeddings\": %s,\n"
             "  \"torch_dtype\": \"float32\"\n}\n",
             c->vocab, c->d_model, c->n_layers, c->n_heads, c->d_ff, c->max_seq, c->max_seq,
             (double)c->eps, (double)c->init_std, c->tied ? "true" : "false");
  } else if (c->names == OT_NAMES_LLAMA && c->norm == OT_NORM_RMSNORM && c->mlp == OT_MLP_SWIGLU &&
             c->pos == OT_POS_ROPE && c->rope_style == OT_ROPE_NEOX) {
    snprintf(buf, cap,
             "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
             "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
             "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n"
             "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n"
             "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %.9g,\n  \"rope_theta\": %.9g,\n"
             "  \"initializer_range\": %.9g,\n  \"tie_word_embeddings\": %s,\n"
             "  \"attention_bias\": %s,\n  \"mlp_bias\": %s,\n  \"torch_dtype\": \"float32\"\n}\n",
             c->vocab, c->d_model, c->n_layers, c->n_heads, c->n_kv_heads, c->d_ff, c->max_seq,
             (double)c->eps, (double)c->rope_base, (double)c->init_std, c->tied ? "true" : "false",
             c->bias ? "true" : "false", c->bias ? "true" : "false");
  }
}

// ------------------------------------------------------------- metadata ---
// __metadata__ pairs being built (owned strings).
typedef struct { int n, cap; char **k, **v; ot_status err; } meta_list;

static void meta_add(meta_list *m, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_add(meta_list *m, const char *key, const char *fmt, ...) {
  if (m->err != OT_OK) return;
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    char **k = realloc(m->k, sizeof *k * (size_t)cap), **v = k ? realloc(m->v, sizeof *v * (size_t)cap) : NULL;
    if (k) m->k = k;
    if (v) m->v = v;
    if (!k || !v) { m->err = ot_error(OT_ENOMEM, "checkpoint: out of memory"); return; }
    m->cap = cap;
  }
  char val[OT_PATH_MAX + 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(val, sizeof val, fmt, ap);
  va_end(ap);
  m->k[m->n] = strdup(key);
  m->v[m->n] = strdup(val);
  if (!m->k[m->n] || !m->v[m->n]) {
    free(m->k[m->n]);
    free(m->v[m->n]);
    m->err = ot_error(OT_ENOMEM, "checkpoint: out of memory");
    return;
  }
  m->n++;
}

// Appends meta_checksum over the pairs so far.
static void meta_seal(meta_list *m) {
  if (m->err != OT_OK) return;
  meta_add(m, "meta_checksum", "%016" PRIx64,
           ot__meta_checksum((const char *const *)m->k, (const char *const *)m->v, m->n));
}

static void meta_free(meta_list *m) {
  for (int i = 0; i < m->n; i++) { free(m->k[i]); free(m->v[i]); }
  free(m->k);
  free(m->v);
}

static bool is_path_key(const char *k) {
  return !strcmp(k, "data") || !strcmp(k, "train-data") || !strcmp(k, "val-data") || !strcmp(k, "out") ||
         !strcmp(k, "log") || !strcmp(k, "plot");
}

// The training settings as stored: data paths absolute; out ".." when the
// checkpoint sits in it (a copied run directory resumes into itself), else
// absolute; log / plot "" when they are the defaults under out (so they follow
// --out on resume), else absolute.
static void add_settings(meta_list *m, const ot_train_config *c, const char *parent) {
  const char *out = c->out[0] ? c->out : ".";
  char rp[PATH_MAX], ro[PATH_MAX], v[OT_PATH_MAX], a[OT_PATH_MAX], dflt[OT_PATH_MAX + 16];
  const bool inside = realpath(parent, rp) && realpath(out, ro) && !strcmp(rp, ro);
  for (int i = 0; i < ot__key_count(); i++) {
    if (!ot__key_is_saved(i)) continue;
    const char *name = ot__key_name(i);
    char key[96];
    snprintf(key, sizeof key, "cfg.%s", name);
    ot_train_config_get(c, name, v, sizeof v);
    if (!is_path_key(name)) { meta_add(m, key, "%s", v); continue; }
    if (!strcmp(name, "out") && inside) { meta_add(m, key, ".."); continue; }
    if (!strcmp(name, "log") || !strcmp(name, "plot")) {
      snprintf(dflt, sizeof dflt, "%s/%s", out, name[0] == 'l' ? "log.jsonl" : "loss.svg");
      if (!strcmp(v, dflt)) v[0] = 0;
    }
    if (ot__abs_path(v, a, sizeof a) != OT_OK) { m->err = OT_EINVAL; return; }
    meta_add(m, key, "%s", a);
  }
}

// -------------------------------------------------------------- writing ---
// Copies vocab.json and merges.txt of the training data directory (when both
// are there) into dir, recording their checksums in m.
static ot_status copy_tokenizer(const ot_train_config *c, const char *dir, meta_list *m) {
  char src[OT_PATH_MAX];
  snprintf(src, sizeof src, "%s", c->data);
  if (!src[0] && c->train_data[0]) {   // the directory of the training shards' glob
    snprintf(src, sizeof src, "%s", c->train_data);
    char *slash = strrchr(src, '/');
    if (slash) *slash = 0; else snprintf(src, sizeof src, ".");
  }
  static const char *const files[] = {"vocab.json", "merges.txt"};
  char p[OT_PATH_MAX + 64], q[OT_PATH_MAX + 64];
  for (int k = 0; k < 2; k++)
    if (!src[0] || ot__join(p, sizeof p, src, files[k]) != OT_OK || !ot__exists(p)) {
      ot_clear_error();
      return OT_OK;   // no tokenizer there (e.g. token ids made by another tool)
    }
  for (int k = 0; k < 2; k++) {
    char *text = NULL;
    size_t len = 0;
    OT_TRY(ot__join(p, sizeof p, src, files[k]));
    OT_TRY(ot__join(q, sizeof q, dir, files[k]));
    OT_TRY(ot__read_text(p, (size_t)1 << 30, &text, &len));
    ot_status s = ot__write_file(q, text, len);
    char key[64];
    snprintf(key, sizeof key, "file.%s", files[k]);
    if (s == OT_OK) meta_add(m, key, "%016" PRIx64, ot__hash_bytes(text, len));
    free(text);
    OT_TRY(s);
  }
  return OT_OK;
}

// model.safetensors: every HF tensor (F32) with its checksum; metadata m + the checksums.
static ot_status write_weights(ot_trainer *t, const char *path, meta_list *m) {
  ot_model *mod = t->m;
  const int n = ot_model_hf_count(mod);
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    const ot_hf_tensor *h = ot_model_hf_at(mod, i);
    total += (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
  }
  float *buf = ot_mem_alloc((total ? total : 1) * sizeof(float), OT_MEM_OTHER);
  ot_st_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
  ot_status s = buf && ts ? OT_OK : ot_error(OT_ENOMEM, "checkpoint: out of memory for the weights");
  size_t off = 0;
  for (int i = 0; i < n && s == OT_OK; i++) {
    const ot_hf_tensor *h = ot_model_hf_at(mod, i);
    const size_t k = (size_t)h->shape[0] * (size_t)(h->ndim == 2 ? h->shape[1] : 1);
    s = ot_model_hf_get(mod, i, ot_model_params(mod), buf + off);
    int64_t fs[4];
    const int fd = ot_model_hf_file_shape(mod, i, fs);   // HF's shape (ViT: 3-D / 4-D tensors)
    ts[i] = (ot_st_tensor){.name = h->name, .dtype = OT_F32, .ndim = fd, .data = buf + off,
                           .nbytes = k * sizeof(float)};
    for (int d = 0; d < fd; d++) ts[i].shape[d] = fs[d];
    char key[128];
    snprintf(key, sizeof key, "checksum.%s", h->name);
    meta_add(m, key, "%016" PRIx64, ot__hash_bytes(buf + off, k * sizeof(float)));
    off += k;
  }
  meta_seal(m);
  if (s == OT_OK) s = m->err;
  if (s == OT_OK)
    s = ot_st_write(path, ts, n, (const char *const *)m->k, (const char *const *)m->v, m->n);
  ot_mem_free(buf);
  free(ts);
  return s;
}

// optimizer.safetensors: exp_avg / exp_avg_sq per parameter with checksums; metadata m + the checksums.
static ot_status write_state(const ot_trainer *t, const char *path, meta_list *m) {
  const int np = ot_model_param_count(t->m);
  ot_st_tensor *ts = calloc((size_t)2 * np + 1, sizeof *ts);
  char (*names)[96] = calloc((size_t)2 * np + 1, sizeof *names);
  ot_status s = ts && names ? OT_OK : ot_error(OT_ENOMEM, "checkpoint: out of memory");
  for (int i = 0; i < np && s == OT_OK; i++) {
    const ot_param *p = ot_model_param_at(t->m, i);
    for (int k = 0; k < 2; k++) {
      ot_st_tensor *x = &ts[2 * i + k];
      snprintf(names[2 * i + k], sizeof names[0], "%s.%s", k ? "exp_avg_sq" : "exp_avg", p->name);
      x->name = names[2 * i + k];
      x->dtype = OT_F32;
      x->ndim = p->ndim;
      x->shape[0] = p->shape[0];
      x->shape[1] = p->shape[1];
      x->data = t->mom[k] + p->offset;
      x->nbytes = p->numel * sizeof(float);
      char key[128];
      snprintf(key, sizeof key, "checksum.%s", x->name);
      meta_add(m, key, "%016" PRIx64, ot__hash_bytes(x->data, x->nbytes));
    }
  }
  meta_seal(m);
  if (s == OT_OK) s = m->err;
  if (s == OT_OK)
    s = ot_st_write(path, ts, 2 * np, (const char *const *)m->k, (const char *const *)m->v, m->n);
  free(ts);
  free(names);
  return s;
}

// Every file of the checkpoint into the (new, empty) directory dir.
static ot_status write_files(ot_trainer *t, const char *dir, const char *parent) {
  meta_list w = {0}, o = {0};
  char path[OT_PATH_MAX + 64], cj[4096];
  meta_add(&w, "format", "pt");
  meta_add(&w, "ot_checkpoint", FORMAT_VERSION);
  meta_add(&w, "step", "%" PRId64, t->step);
  ot_status s = copy_tokenizer(&t->cfg, dir, &w);
  hf_config(&t->cfg.model, cj, sizeof cj);
  if (s == OT_OK && cj[0]) s = ot__join(path, sizeof path, dir, "config.json");
  if (s == OT_OK && cj[0]) s = ot__write_file(path, cj, strlen(cj));
  if (s == OT_OK && cj[0]) meta_add(&w, "file.config.json", "%016" PRIx64, ot__hash_bytes(cj, strlen(cj)));
  add_settings(&w, &t->cfg, parent);
  if (s == OT_OK) s = ot__join(path, sizeof path, dir, "model.safetensors");
  if (s == OT_OK) s = write_weights(t, path, &w);

  meta_add(&o, "format", FORMAT);
  meta_add(&o, "format_version", FORMAT_VERSION);
  meta_add(&o, "step", "%" PRId64, t->step);
  meta_add(&o, "updates", "%" PRId64, t->updates);
  meta_add(&o, "rng", "%" PRIu64, t->rng);
  if (t->scaler.on) {   // the loss scaler: its scale (exact: 9 digits) and clean-step count
    meta_add(&o, "loss_scale", "%.9g", (double)t->scaler.scale);
    meta_add(&o, "loss_scale_clean", "%" PRId64, t->scaler.clean);
  }
  meta_add(&o, "params_checksum", "%016" PRIx64, ot__hash_floats(ot_model_params(t->m), ot_model_n_floats(t->m)));
  ot_loader_state ls;
  if (t->cls ? ot__cls_data_state(t, &ls) : ot__trainer_data_state(t, &ls)) {
    meta_add(&o, "data_epoch", "%" PRIu64, ls.epoch);
    meta_add(&o, "data_index", "%" PRIu64, ls.index);
    meta_add(&o, "data_fingerprint", "%016" PRIx64, ls.fingerprint);
  }
  ot_lr_schedule sch = ot_train_schedule(&t->cfg);
  meta_add(&o, "lr_next", "%.9g", (double)ot_lr_at(&sch, t->step));
  add_settings(&o, &t->cfg, parent);
  if (s == OT_OK) s = ot__join(path, sizeof path, dir, "optimizer.safetensors");
  if (s == OT_OK) s = write_state(t, path, &o);
  meta_free(&w);
  meta_free(&o);
  return s;
}

// A file a checkpoint directory may hold (a save replaces such a directory whole).
static bool ckpt_file(const char *name) {
  static const char *const known[] = {"model.safetensors", "optimizer.safetensors", "config.json", "vocab.json",
                                      "merges.txt"};
  for (int i = 0; i < 5; i++) {
    size_t n = strlen(known[i]);
    if (!strncmp(name, known[i], n) && (!name[n] || !strcmp(name + n, ".tmp"))) return true;
  }
  return false;
}

// dir (trailing slashes dropped) = parent + "/" + base.
static ot_status split_dir(const char *dir, char *parent, char *base, size_t cap) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t b = n;
  while (b > 0 && dir[b - 1] != '/') b--;
  if (n - b == 0 || n - b >= 200 || !strncmp(dir + b, ".", n - b) || !strncmp(dir + b, "..", n - b))
    return ot_error(OT_EINVAL, "checkpoint directory '%s': name a directory to create, such as out/ckpt", dir);
  if (b >= cap) return ot_error(OT_EINVAL, "checkpoint path too long: %s", dir);
  if (b == 0) snprintf(parent, cap, ".");   // a bare name: the working directory
  else snprintf(parent, cap, "%.*s", b > 1 ? (int)(b - 1) : 1, dir);
  snprintf(base, 256, "%.*s", (int)(n - b), dir + b);
  return OT_OK;
}

// The save of one process; sync_parent false: the caller fsyncs dir's parent
// (ot_trainer_checkpoint: writing `latest` right after does).
static ot_status save_dir(ot_trainer *t, const char *dir, bool sync_parent) {
  OT_TRY(ot__ckpt_check_state(t, dir));   // before anything is written
  char parent[OT_PATH_MAX], base[256], final[OT_PATH_MAX + 300], tmp[OT_PATH_MAX + 300], old[OT_PATH_MAX + 300];
  OT_TRY(split_dir(dir, parent, base, sizeof parent));
  snprintf(final, sizeof final, "%s/%s", parent, base);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", parent, base);
  snprintf(old, sizeof old, "%s/.%s.old", parent, base);
  OT_TRY(ot__mkdirs(parent));
  // what an interrupted save of this directory left
  if (ot__exists(old) && !(!ot__exists(final) && rename(old, final) == 0)) ot__remove_flat_dir(old);
  if (ot__exists(tmp)) ot__remove_flat_dir(tmp);
  const bool replace = ot__exists(final);
  if (replace) {
    if (!ot__is_dir(final)) return ot_error(OT_EIO, "checkpoint %s exists and is not a directory", final);
    DIR *d = opendir(final);
    if (!d) return ot_error(OT_EIO, "cannot read directory %s: %s", final, strerror(errno));
    char foreign[256] = "";
    for (struct dirent *e; !foreign[0] && (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !ckpt_file(e->d_name))
        snprintf(foreign, sizeof foreign, "%s", e->d_name);
    closedir(d);
    if (foreign[0])
      return ot_error(OT_EINVAL, "checkpoint %s: it holds '%s', which is not part of a checkpoint (a save "
                      "replaces the directory whole): save into a new directory", final, foreign);
  }
  if (mkdir(tmp, 0755) != 0) return ot_error(OT_EIO, "cannot create directory %s: %s", tmp, strerror(errno));
  OT_PROF_BEGIN("checkpoint", 0.0, 0.0);
  ot_status s = write_files(t, tmp, parent);
  if (s == OT_OK) s = ot__fsync_dir(tmp);
  bool moved = false;
  if (s == OT_OK && replace) {
    if (rename(final, old) == 0) moved = true;
    else s = ot_error(OT_EIO, "cannot rename %s to %s: %s", final, old, strerror(errno));
  }
  if (s == OT_OK && rename(tmp, final) != 0) {
    s = ot_error(OT_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
    if (moved) rename(old, final);
    moved = false;
  }
  if (s == OT_OK && sync_parent) s = ot__fsync_dir(parent);
  if (moved) ot__remove_flat_dir(old);
  if (s != OT_OK) ot__remove_flat_dir(tmp);
  OT_PROF_STOP();
  return s;
}

ot_status ot_trainer_save(ot_trainer *t, const char *dir) {
  static const char fn[] = "ot_trainer_save";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(dir, fn);
  if (!t->mom[0]) return ot_error(OT_EINVAL, "%s: an evaluation-only trainer has no optimizer state", fn);
  if (t->par) return ot__ckpt_par_save(t, dir);
  return save_dir(t, dir, true);
}

typedef struct { int64_t step; char *name; } step_entry;

static int cmp_step(const void *a, const void *b) {
  const step_entry *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

// Removes the oldest <out>/step_* directories beyond keep (never `current`):
// each is first renamed to .step_N.del, so no step_* directory is ever partial.
static void prune(const char *out, int keep, const char *current) {
  if (keep <= 0) return;
  DIR *d = opendir(out);
  if (!d) return;
  int n = 0, cap = 64;
  step_entry *v = malloc(sizeof *v * (size_t)cap);
  for (struct dirent *e; v && (e = readdir(d));) {
    const char *nm = e->d_name;
    size_t len = strlen(nm), i = 5;
    if (len < 6 || len > 24 || strncmp(nm, "step_", 5)) continue;
    while (i < len && nm[i] >= '0' && nm[i] <= '9') i++;
    if (i != len) continue;
    if (n == cap) {
      step_entry *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
      if (!nv) break;
      v = nv;
    }
    if ((v[n].name = strdup(nm))) v[n++].step = strtoll(nm + 5, NULL, 10);
  }
  closedir(d);
  if (v) qsort(v, (size_t)n, sizeof *v, cmp_step);
  for (int i = 0; i < n; i++) {
    if (i < n - keep && strcmp(v[i].name, current)) {
      char dir[OT_PATH_MAX + 64], del[OT_PATH_MAX + 64];
      snprintf(dir, sizeof dir, "%s/%s", out, v[i].name);
      snprintf(del, sizeof del, "%s/.%s.del", out, v[i].name);
      if (rename(dir, del) == 0) ot__remove_flat_dir(del);
    }
    free(v[i].name);
  }
  free(v);
}

ot_status ot_trainer_checkpoint(ot_trainer *t, char *path_out, size_t cap) {
  static const char fn[] = "ot_trainer_checkpoint";
  OT_CHECK_PTR(t, fn);
  const char *out = t->cfg.out[0] ? t->cfg.out : ".";
  char name[32], dir[OT_PATH_MAX + 32], latest[OT_PATH_MAX + 32];
  snprintf(name, sizeof name, "step_%06lld", (long long)t->step);
  OT_TRY(ot__join(dir, sizeof dir, out, name));
  const bool root = ot__par_rank(t->par) == 0;   // parallel: rank 0 writes the directory and names it
  if (root) ot__ckpt_cleanup(out);
  if (!t->mom[0] || t->par) OT_TRY(ot_trainer_save(t, dir));
  else OT_TRY(save_dir(t, dir, false));
  if (root) {   // written right after the rename (its directory fsync covers both)
    OT_TRY(ot__join(latest, sizeof latest, out, "latest"));
    char text[40];
    snprintf(text, sizeof text, "%s\n", name);
    OT_TRY(ot__write_atomic(latest, text, strlen(text)));
    prune(out, t->cfg.keep, name);
  }
  if (path_out && cap) snprintf(path_out, cap, "%s", dir);
  return OT_OK;
}

// ------------------------------------------------------------------- load ---
// Opens the optimizer state of checkpoint dir; with `tensors` every tensor is
// checked against its checksum and for non-finite values.
static ot_status open_state(const char *dir, ot_st_file **f, bool tensors) {
  char path[OT_PATH_MAX + 64];
  OT_TRY(ot__join(path, sizeof path, dir, "optimizer.safetensors"));
  if (!ot__exists(path))
    return ot_error(OT_EIO, "checkpoint %s: no optimizer.safetensors (a weights-only or Hugging Face "
                    "directory cannot be resumed; `ot eval` reads it, `ot train --init-from` starts a new "
                    "run from its weights)", dir);
  OT_TRY(ot_st_open(f, path));
  const char *fmt = ot_st_meta(*f, "format"), *ver = ot_st_meta(*f, "format_version");
  ot_status s = OT_OK;
  if (!fmt || strcmp(fmt, FORMAT))
    s = ot_error(OT_EFORMAT, "%s: __metadata__ format is '%s', expected '%s'", path, fmt ? fmt : "(none)",
                 FORMAT);
  else if (ver && strcmp(ver, "1") && strcmp(ver, FORMAT_VERSION))
    s = ot_error(OT_EFORMAT, "%s: format_version '%.20s' is not one this ot reads (1 or %s)", path, ver,
                 FORMAT_VERSION);
  else   // version 1 files (older ot) carry no checksums
    s = ot__ckpt_check_file(*f, !ver || strcmp(ver, "1"), tensors);
  if (s != OT_OK) {
    ot_st_close(*f);
    *f = NULL;
  }
  return s;
}

// A stored path of checkpoint dir as this process sees it: relative ones
// (format 2) are relative to the checkpoint directory.
static ot_status stored_path(const char *dir, const char *v, char *out, size_t cap) {
  const char *v0 = v;
  int n = -1;
  if (!v[0] || v[0] == '/') n = snprintf(out, cap, "%s", v);
  char d[OT_PATH_MAX + 64];
  snprintf(d, sizeof d, "%s", dir);
  while (n < 0 && !strncmp(v, "..", 2) && (v[2] == '/' || !v[2])) {   // "<ckpt>/.." = the directory holding it
    char *slash = strrchr(d, '/');
    const char *last = slash ? slash + 1 : d;
    if (!strcmp(last, ".") || !strcmp(last, "..") || !last[0]) break;
    if (!slash) snprintf(d, sizeof d, ".");
    else if (slash == d) d[1] = 0;
    else *slash = 0;
    v += v[2] ? 3 : 2;
    if (!slash) break;
  }
  if (n < 0) n = v[0] ? snprintf(out, cap, "%s/%s", d, v) : snprintf(out, cap, "%s", d);
  if (n < 0 || (size_t)n >= cap)
    return ot_error(OT_EINVAL, "checkpoint %s: the stored path '%s' is longer than %zu bytes from there", dir,
                    v0, cap - 1);
  return OT_OK;
}

ot_status ot_ckpt_read_config(const char *dir, ot_settings *l) {
  OT_CHECK_PTR(dir, "ot_ckpt_read_config");
  OT_CHECK_PTR(l, "ot_ckpt_read_config");
  char d[OT_PATH_MAX + 64], path[OT_PATH_MAX + 96];
  OT_TRY(ot_ckpt_resolve(dir, d, sizeof d));
  // format 2: the weights file holds the settings (evaluation needs no optimizer state)
  ot_st_file *f = NULL;
  OT_TRY(ot__join(path, sizeof path, d, "model.safetensors"));
  bool v2 = false;
  if (ot__exists(path)) {
    OT_TRY(ot_st_open(&f, path));
    v2 = ot_st_meta(f, "ot_checkpoint") != NULL;
    ot_status s = v2 ? ot__ckpt_check_file(f, true, false) : OT_OK;
    if (!v2) { ot_st_close(f); f = NULL; }
    if (s != OT_OK) { ot_st_close(f); return s; }
  }
  if (!v2) OT_TRY(open_state(d, &f, false));
  ot_status s = OT_OK;
  char origin[128], v[OT_PATH_MAX];
  snprintf(origin, sizeof origin, "checkpoint %.100s", d);
  const char *out = ot_st_meta(f, "cfg.out");
  for (int i = 0; i < ot_st_meta_count(f) && s == OT_OK; i++) {
    const char *val = NULL, *k = ot_st_meta_at(f, i, &val);
    if (!k || !val || strncmp(k, "cfg.", 4)) continue;
    snprintf(v, sizeof v, "%s", val);
    if (v2 && is_path_key(k + 4)) {
      s = stored_path(d, val, v, sizeof v);
    } else if (!v2 && out && (!strcmp(k, "cfg.log") || !strcmp(k, "cfg.plot"))) {
      // version 1 stored the defaults under out: drop them so that they follow --out
      char dflt[OT_PATH_MAX + 16];
      snprintf(dflt, sizeof dflt, "%s/%s", out, k[4] == 'l' ? "log.jsonl" : "loss.svg");
      if (!strcmp(val, dflt)) v[0] = 0;
    }
    if (s == OT_OK) s = ot_settings_add(l, k + 4, v, origin);
  }
  ot_st_close(f);
  return s;
}

static ot_status meta_u64(const ot_st_file *f, const char *key, int base, uint64_t *out) {
  const char *v = ot_st_meta(f, key);
  if (!v) return ot_error(OT_EFORMAT, "%s: __metadata__ has no '%s'", ot_st_name(f), key);
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, base);
  if (end == v || *end || errno || *v == '-')
    return ot_error(OT_EFORMAT, "%s: __metadata__ '%s' = '%.40s' is not a number", ot_st_name(f), key, v);
  *out = (uint64_t)x;
  return OT_OK;
}

// The checkpoint's model keys must equal this trainer's.
static ot_status check_model(const ot_trainer *t, const ot_st_file *f) {
  for (int i = 0; i < ot__key_count(); i++) {
    if (!ot__key_is_model(i) || !strcmp(ot__key_name(i), "model")) continue;
    char key[80], mine[OT_PATH_MAX];
    snprintf(key, sizeof key, "cfg.%s", ot__key_name(i));
    const char *theirs = ot_st_meta(f, key);
    ot_train_config_get(&t->cfg, ot__key_name(i), mine, sizeof mine);
    if (!theirs && !strcmp(ot__key_name(i), "pool") && !strcmp(mine, "cls"))
      continue;   // a checkpoint from before the key: a CLS-pooled model
    if (!theirs) return ot_error(OT_EFORMAT, "%s: __metadata__ has no '%s'", ot_st_name(f), key);
    if (strcmp(theirs, mine))
      return ot_error(OT_EINVAL, "checkpoint %s has --%s %s, this run --%s %s (resume with the same "
                      "model shape)", ot_st_name(f), ot__key_name(i), theirs, ot__key_name(i), mine);
  }
  return OT_OK;
}

static ot_status load_state(ot_trainer *t, const ot_st_file *f) {
  OT_TRY(check_model(t, f));
  uint64_t step, updates, rng, sum;
  OT_TRY(meta_u64(f, "step", 10, &step));
  OT_TRY(meta_u64(f, "updates", 10, &updates));
  OT_TRY(meta_u64(f, "rng", 10, &rng));
  OT_TRY(meta_u64(f, "params_checksum", 16, &sum));
  if (updates > step)
    return ot_error(OT_EFORMAT, "%s: updates %llu > step %llu", ot_st_name(f), (unsigned long long)updates,
                    (unsigned long long)step);
  uint64_t mine = ot__hash_floats(ot_model_params(t->m), ot_model_n_floats(t->m));
  if (mine != sum)
    return ot_error(OT_EFORMAT, "%s: the weights in model.safetensors (checksum %016llx) are not the ones "
                    "this optimizer state was saved with (%016llx): files from different checkpoints?",
                    ot_st_name(f), (unsigned long long)mine, (unsigned long long)sum);
  const size_t n = ot_model_n_floats(t->m);
  for (int k = 0; k < 2; k++) memset(t->mom[k], 0, n * sizeof(float));
  for (int i = 0; i < ot_model_param_count(t->m); i++) {
    const ot_param *p = ot_model_param_at(t->m, i);
    for (int k = 0; k < 2; k++) {
      char name[96];
      snprintf(name, sizeof name, "%s.%s", k ? "exp_avg_sq" : "exp_avg", p->name);
      const ot_st_tensor *x = ot_st_find(f, name);
      if (!x) return ot_error(OT_EFORMAT, "%s: tensor '%s' is missing", ot_st_name(f), name);
      if (x->dtype != OT_F32 || x->nbytes != p->numel * sizeof(float))
        return ot_error(OT_EFORMAT, "%s: tensor '%s' is %s with %zu bytes, expected F32 with %zu",
                        ot_st_name(f), name, ot_dtype_name(x->dtype), x->nbytes, p->numel * sizeof(float));
      memcpy(t->mom[k] + p->offset, x->data, x->nbytes);
    }
  }
  ot_loader_state ls;
  if ((t->cls ? ot__cls_data_state(t, &ls) : ot__trainer_data_state(t, &ls)) &&
      ot_st_meta(f, "data_epoch")) {   // absent: saved without a loader
    OT_TRY(meta_u64(f, "data_epoch", 10, &ls.epoch));
    OT_TRY(meta_u64(f, "data_index", 10, &ls.index));
    OT_TRY(meta_u64(f, "data_fingerprint", 16, &ls.fingerprint));
    if ((t->cls ? ot__cls_set_data_state(t, &ls) : ot__trainer_set_data_state(t, &ls)) != OT_OK)
      return ot_error(OT_EINVAL, "checkpoint %s: its data position does not fit this run's training data "
                      "(other shards, --seq-len, --batch-size, --shuffle or --seed?): %s", ot_st_name(f),
                      ot_last_error());
  }
  if (t->scaler.on && t->scaler.dynamic && ot_st_meta(f, "loss_scale")) {   // absent: saved without one
    uint64_t clean;
    const char *v = ot_st_meta(f, "loss_scale");
    char *end;
    const float x = strtof(v, &end);
    if (end == v || *end || !(x > 0) || !isfinite(x))
      return ot_error(OT_EFORMAT, "%s: __metadata__ 'loss_scale' = '%.40s' is not a positive number",
                      ot_st_name(f), v);
    OT_TRY(meta_u64(f, "loss_scale_clean", 10, &clean));
    t->scaler.scale = x;
    t->scaler.clean = (int64_t)clean;
  }
  t->step = (int64_t)step;
  t->updates = (int64_t)updates;
  t->rng = rng;
  return OT_OK;
}

ot_status ot_trainer_load(ot_trainer *t, const char *dir, bool weights_only) {
  static const char fn[] = "ot_trainer_load";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(dir, fn);
  char d[OT_PATH_MAX + 64];
  OT_TRY(ot_ckpt_resolve(dir, d, sizeof d));
  if (!weights_only && !t->mom[0])
    return ot_error(OT_EINVAL, "%s: an evaluation-only trainer can load weights only", fn);
  if (t->par) return ot__ckpt_par_load(t, d, weights_only);
  ot_st_file *state = NULL;
  if (!weights_only) OT_TRY(open_state(d, &state, true));
  ot_status s = state ? check_model(t, state) : OT_OK;
  ot_st_file *w = NULL;
  if (s == OT_OK) s = ot_ckpt_open_weights(d, &w);
  if (s == OT_OK) s = ot_model_import(t->m, w, NULL, true);
  ot_st_close(w);
  if (s == OT_OK && state) s = load_state(t, state);
  ot_st_close(state);
  return s;
}
