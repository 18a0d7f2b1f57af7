// Checkpoints: model.safetensors (HF names, via ot_model_export),
// optimizer.safetensors (AdamW moments per parameter; step, RNG, data
// position, weight checksum and every training key in __metadata__),
// config.json (Hugging Face, when expressible). Each file is written
// atomically; <out>/latest names the newest step_NNNNNN directory.
#include "engine_impl.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#define FORMAT "ot-train-state"
#define FORMAT_VERSION "1"

// ------------------------------------------------------------ config.json ---
// The HF config of the model, or "" when HF cannot express it.
static void hf_config(const ot_model_config *c, char *buf, size_t cap) {
  buf[0] = 0;
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

// ------------------------------------------------------------------- save ---
ot_status ot_trainer_save(ot_trainer *t, const char *dir) {
  static const char fn[] = "ot_trainer_save";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(dir, fn);
  if (!t->mom[0]) return ot_error(OT_EINVAL, "%s: an evaluation-only trainer has no optimizer state", fn);
  if (t->par) return ot__par_save(t, dir);
  OT_TRY(ot__mkdirs(dir));
  char path[OT_PATH_MAX + 64];
  OT_PROF_BEGIN("checkpoint", 0.0, 0.0);
  ot_status s = ot__join(path, sizeof path, dir, "model.safetensors");
  if (s == OT_OK) s = ot_model_export(t->m, path);

  // optimizer state + metadata
  const int np = ot_model_param_count(t->m), nk = ot__key_count();
  const int nmeta_max = nk + 16;
  ot_st_tensor *ts = calloc((size_t)2 * np, sizeof *ts);
  char (*names)[96] = calloc((size_t)2 * np, sizeof *names);
  const char **mk = calloc((size_t)nmeta_max, sizeof *mk), **mv = calloc((size_t)nmeta_max, sizeof *mv);
  char (*kbuf)[80] = calloc((size_t)nmeta_max, sizeof *kbuf);
  char (*vbuf)[OT_PATH_MAX] = calloc((size_t)nmeta_max, sizeof *vbuf);
  if (s == OT_OK && (!ts || !names || !mk || !mv || !kbuf || !vbuf)) s = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  if (s == OT_OK) {
    for (int i = 0; i < np; i++) {
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
      }
    }
    int nm = 0;
#define META(key, ...) do { snprintf(kbuf[nm], sizeof kbuf[0], "%s", key); \
      snprintf(vbuf[nm], sizeof vbuf[0], __VA_ARGS__); mk[nm] = kbuf[nm]; mv[nm] = vbuf[nm]; nm++; } while (0)
    META("format", FORMAT);
    META("format_version", FORMAT_VERSION);
    META("step", "%" PRId64, t->step);
    META("updates", "%" PRId64, t->updates);
    META("rng", "%" PRIu64, t->rng);
    META("params_checksum", "%016" PRIx64,
         ot__hash_floats(ot_model_params(t->m), ot_model_n_floats(t->m)));
    if (t->train) {
      ot_loader_state ls;
      ot_loader_get_state(t->train, &ls);
      META("data_epoch", "%" PRIu64, ls.epoch);
      META("data_index", "%" PRIu64, ls.index);
      META("data_fingerprint", "%016" PRIx64, ls.fingerprint);
    }
    ot_lr_schedule sch = ot_train_schedule(&t->cfg);
    META("lr_next", "%.9g", (double)ot_lr_at(&sch, t->step));
    for (int i = 0; i < nk; i++) {
      if (!ot__key_is_saved(i)) continue;
      snprintf(kbuf[nm], sizeof kbuf[0], "cfg.%s", ot__key_name(i));
      ot_train_config_get(&t->cfg, ot__key_name(i), vbuf[nm], sizeof vbuf[0]);
      mk[nm] = kbuf[nm];
      mv[nm] = vbuf[nm];
      nm++;
    }
#undef META
    s = ot__join(path, sizeof path, dir, "optimizer.safetensors");
    if (s == OT_OK) s = ot_st_write(path, ts, 2 * np, mk, mv, nm);
  }
  free(ts); free(names); free(mk); free(mv); free(kbuf); free(vbuf);
  if (s == OT_OK) {
    char cj[4096];
    hf_config(&t->cfg.model, cj, sizeof cj);
    s = ot__join(path, sizeof path, dir, "config.json");
    if (s == OT_OK && cj[0]) s = ot__write_atomic(path, cj, strlen(cj));
    else if (s == OT_OK) unlink(path);   // a stale one would describe another model
  }
  OT_PROF_STOP();
  return s;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Removes the oldest <out>/step_* directories beyond keep (never `current`).
static void prune(const char *out, int keep, const char *current) {
  if (keep <= 0) return;
  DIR *d = opendir(out);
  if (!d) return;
  char *names[4096];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 4096;)
    if (!strncmp(e->d_name, "step_", 5) && strlen(e->d_name) == 11) names[n++] = strdup(e->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], cmp_str);
  for (int i = 0; i < n; i++) {
    if (names[i] && i < n - keep && strcmp(names[i], current)) {
      static const char *const files[] = {"model.safetensors", "optimizer.safetensors", "config.json"};
      char dir[OT_PATH_MAX + 32], f[OT_PATH_MAX + 64];
      if (ot__join(dir, sizeof dir, out, names[i]) == OT_OK) {
        for (int k = 0; k < 3; k++)
          if (ot__join(f, sizeof f, dir, files[k]) == OT_OK) unlink(f);
        rmdir(dir);   // fails, harmlessly, when the user put other files there
      }
    }
    free(names[i]);
  }
}

ot_status ot_trainer_checkpoint(ot_trainer *t, char *path_out, size_t cap) {
  static const char fn[] = "ot_trainer_checkpoint";
  OT_CHECK_PTR(t, fn);
  const char *out = t->cfg.out[0] ? t->cfg.out : ".";
  char name[32], dir[OT_PATH_MAX + 32], latest[OT_PATH_MAX + 32];
  snprintf(name, sizeof name, "step_%06lld", (long long)t->step);
  OT_TRY(ot__join(dir, sizeof dir, out, name));
  OT_TRY(ot_trainer_save(t, dir));
  if (ot__par_rank(t->par) == 0) {   // parallel: rank 0 wrote the directory and names it
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
static bool has_ckpt(const char *dir) {
  char p[OT_PATH_MAX + 64];
  return ot__join(p, sizeof p, dir, "model.safetensors") == OT_OK && ot__exists(p);
}

ot_status ot_ckpt_resolve(const char *dir, char *out, size_t cap) {
  OT_CHECK_PTR(dir, "ot_ckpt_resolve");
  OT_CHECK_PTR(out, "ot_ckpt_resolve");
  if (has_ckpt(dir)) {
    if (strlen(dir) >= cap) return ot_error(OT_EINVAL, "checkpoint path too long: %s", dir);
    snprintf(out, cap, "%s", dir);
    return OT_OK;
  }
  char latest[OT_PATH_MAX + 32];
  OT_TRY(ot__join(latest, sizeof latest, dir, "latest"));
  if (!ot__exists(latest)) {
    if (!ot__is_dir(dir)) return ot_error(OT_EIO, "checkpoint %s: no such directory", dir);
    return ot_error(OT_EIO, "checkpoint %s: no model.safetensors and no 'latest' file in it", dir);
  }
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(latest, 4096, &text, &len));
  char *name = text;
  while (*name == ' ' || *name == '\t') name++;
  name[strcspn(name, "\r\n")] = 0;
  ot_status s = OT_OK;
  if (!name[0] || strchr(name, '/'))
    s = ot_error(OT_EFORMAT, "%s: expected a checkpoint directory name such as step_000100, got '%.60s'",
                 latest, name);
  if (s == OT_OK) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) s = ot_error(OT_EINVAL, "checkpoint path too long: %s/%s", dir, name);
  }
  free(text);
  if (s == OT_OK && !has_ckpt(out))
    s = ot_error(OT_EIO, "%s names %s, which holds no model.safetensors", latest, out);
  return s;
}

static ot_status open_state(const char *dir, ot_st_file **f) {
  char path[OT_PATH_MAX + 64];
  OT_TRY(ot__join(path, sizeof path, dir, "optimizer.safetensors"));
  if (!ot__exists(path))
    return ot_error(OT_EIO, "checkpoint %s: no optimizer.safetensors (a weights-only or Hugging Face "
                    "directory cannot be resumed; `ot eval` reads it)", dir);
  OT_TRY(ot_st_open(f, path));
  const char *fmt = ot_st_meta(*f, "format");
  if (!fmt || strcmp(fmt, FORMAT)) {
    ot_st_close(*f);
    *f = NULL;
    return ot_error(OT_EFORMAT, "%s: __metadata__ format is '%s', expected '%s'", path, fmt ? fmt : "(none)",
                    FORMAT);
  }
  return OT_OK;
}

ot_status ot_ckpt_read_config(const char *dir, ot_settings *l) {
  OT_CHECK_PTR(dir, "ot_ckpt_read_config");
  OT_CHECK_PTR(l, "ot_ckpt_read_config");
  char d[OT_PATH_MAX + 64];
  OT_TRY(ot_ckpt_resolve(dir, d, sizeof d));
  ot_st_file *f = NULL;
  OT_TRY(open_state(d, &f));
  ot_status s = OT_OK;
  char origin[128];
  snprintf(origin, sizeof origin, "checkpoint %.100s", d);
  for (int i = 0; i < ot_st_meta_count(f) && s == OT_OK; i++) {
    const char *v = NULL, *k = ot_st_meta_at(f, i, &v);
    if (k && v && !strncmp(k, "cfg.", 4)) s = ot_settings_add(l, k + 4, v, origin);
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
    if (!theirs) return ot_error(OT_EFORMAT, "%s: __metadata__ has no '%s'", ot_st_name(f), key);
    ot_train_config_get(&t->cfg, ot__key_name(i), mine, sizeof mine);
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
  if (t->train && ot_st_meta(f, "data_epoch")) {   // absent: saved without a loader
    ot_loader_state ls;
    OT_TRY(meta_u64(f, "data_epoch", 10, &ls.epoch));
    OT_TRY(meta_u64(f, "data_index", 10, &ls.index));
    OT_TRY(meta_u64(f, "data_fingerprint", 16, &ls.fingerprint));
    if (ot_loader_set_state(t->train, &ls) != OT_OK)
      return ot_error(OT_EINVAL, "checkpoint %s: its data position does not fit this run's training data "
                      "(other shards, --seq-len, --batch-size, --shuffle or --seed?): %s", ot_st_name(f),
                      ot_last_error());
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
  char d[OT_PATH_MAX + 64], path[OT_PATH_MAX + 96];
  OT_TRY(ot_ckpt_resolve(dir, d, sizeof d));
  if (!weights_only && !t->mom[0])
    return ot_error(OT_EINVAL, "%s: an evaluation-only trainer can load weights only", fn);
  if (t->par) return ot__par_load(t, d, weights_only);
  ot_st_file *state = NULL;
  if (!weights_only) OT_TRY(open_state(d, &state));
  ot_status s = state ? check_model(t, state) : OT_OK;
  ot_st_file *w = NULL;
  if (s == OT_OK) s = ot__join(path, sizeof path, d, "model.safetensors");
  if (s == OT_OK) s = ot_st_open(&w, path);
  if (s == OT_OK) s = ot_model_import(t->m, w, NULL, true);
  ot_st_close(w);
  if (s == OT_OK && state) s = load_state(t, state);
  ot_st_close(state);
  return s;
}
