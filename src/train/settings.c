// Settings: (key, value, origin) lists: config files (key = value lines or a flat JSON
// object, with MindSpore's "parallel_config" block of keys inside either) and flags are collected first, then applied to a config in one go
// ("model" presets first, so shape keys refine a preset wherever they appear).
#include "train/train_impl.h"
#include "io/json.h"
#include <ctype.h>
#include <stdlib.h>

ot_status ot_settings_add(ot_settings *l, const char *key, const char *val, const char *origin) {
  if (!l || !key || !val) return ot_error(OT_EINVAL, "ot_settings_add: list, key or value is NULL");
  if (!origin) origin = "config";
  if (l->n >= OT_SETTINGS_MAX) return ot_error(OT_EINVAL, "%s: more than %d settings", origin, OT_SETTINGS_MAX);
  if (!key[0] || strlen(key) >= sizeof l->item[0].key)
    return ot_error(OT_EINVAL, "%s: key '%.80s' is empty or too long", origin, key);
  if (strlen(val) >= sizeof l->item[0].val)
    return ot_error(OT_EINVAL, "%s: value of '%s' is longer than %d bytes", origin, key,
                    (int)sizeof l->item[0].val - 1);
  ot_setting *kv = &l->item[l->n++];
  snprintf(kv->key, sizeof kv->key, "%s", key);
  snprintf(kv->val, sizeof kv->val, "%s", val);
  snprintf(kv->origin, sizeof kv->origin, "%s", origin);
  return OT_OK;
}

bool ot_settings_has(const ot_settings *l, const char *key) {
  const char *want = ot_train_key_canonical(key);
  if (!l || !want) return false;
  for (int i = 0; i < l->n; i++) {
    const char *c = ot_train_key_canonical(l->item[i].key);
    if (c && !strcmp(c, want)) return true;
  }
  return false;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

static int line_of(const char *text, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && text[i]; i++) line += text[i] == '\n';
  return line;
}

// The members of JSON object obj as settings; `block` names an enclosing block
// ("parallel_config", MindSpore's TransformerOpParallelConfig), NULL at the top.
static ot_status read_json_obj(ot_settings *l, const char *path, const char *text, const ot_json *obj,
                               const char *block) {
  ot_status s = OT_OK;
  for (const ot_json *v = obj->first; v && s == OT_OK; v = v->next) {
    char origin[128], val[64];
    snprintf(origin, sizeof origin, "%.100s:%d", path, line_of(text, v->pos));
    const char *sv = val;
    if (!block && v->type == OT_JOBJ && !strcmp(v->key, "parallel_config")) {
      s = read_json_obj(l, path, text, v, v->key);
      continue;
    }
    switch (v->type) {
      case OT_JSTR: sv = v->s; break;
      case OT_JBOOL: snprintf(val, sizeof val, "%s", v->b ? "true" : "false"); break;
      case OT_JNUM:
        if (v->is_int) snprintf(val, sizeof val, "%lld", (long long)v->i);
        else snprintf(val, sizeof val, "%.17g", v->d);
        break;
      default:
        s = ot_error(OT_EFORMAT, "%s: '%s'%s%s is a %s; values must be numbers, strings or booleans "
                     "(key: value pairs, and a \"parallel_config\": {...} block of them)", origin, v->key,
                     block ? " in " : "", block ? block : "", ot_json_type_name(v->type));
    }
    if (s == OT_OK) s = ot_settings_add(l, v->key, sv, origin);
  }
  return s;
}

static ot_status read_json(ot_settings *l, const char *path, const char *text, size_t len) {
  ot_json_doc doc = {0};
  OT_TRY(ot_json_parse(&doc, text, len, 0, path));
  ot_status s = OT_OK;
  if (doc.root->type != OT_JOBJ)
    s = ot_error(OT_EFORMAT, "%s: a JSON config must be an object {\"key\": value, ...}", path);
  else
    s = read_json_obj(l, path, text, doc.root, NULL);
  ot_json_free(&doc);
  return s;
}

static ot_status read_lines(ot_settings *l, const char *path, char *text) {
  int line = 0;
  for (char *p = text; p && *p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    line++;
    char origin[128];
    snprintf(origin, sizeof origin, "%.100s:%d", path, line);
    // a comment: '#' at the start or after whitespace
    for (char *h = p; *h; h++)
      if (*h == '#' && (h == p || isspace((unsigned char)h[-1]))) { *h = 0; break; }
    char *s = trim(p);
    if (*s) {
      size_t k = strcspn(s, "=:");
      if (!s[k] || k == 0)
        return ot_error(OT_EFORMAT, "%s: expected 'key = value', got '%.60s'", origin, s);
      s[k] = 0;
      char *key = trim(s), *val = trim(s + k + 1);
      if (!*val && !strcmp(key, "parallel_config")) {   // a YAML-style block: its indented lines follow
        p = nl ? nl + 1 : NULL;
        continue;
      }
      size_t vn = strlen(val);
      if (vn >= 2 && (val[0] == '"' || val[0] == '\'') && val[vn - 1] == val[0]) {
        val[vn - 1] = 0;
        val++;
      }
      if (!*val) return ot_error(OT_EFORMAT, "%s: key '%s' has no value", origin, key);
      OT_TRY(ot_settings_add(l, key, val, origin));
    }
    p = nl ? nl + 1 : NULL;
  }
  return OT_OK;
}

ot_status ot_settings_read_file(ot_settings *l, const char *path) {
  if (!l || !path) return ot_error(OT_EINVAL, "ot_settings_read_file: list or path is NULL");
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(path, (size_t)1 << 20, &text, &len));
  if (strlen(text) != len) {
    free(text);
    return ot_error(OT_EFORMAT, "%s: contains a NUL byte (not a text config file)", path);
  }
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  ot_status s = *p == '{' ? read_json(l, path, text, len) : read_lines(l, path, text);
  free(text);
  return s;
}

ot_status ot_train_config_apply(ot_train_config *c, const ot_settings *l, FILE *notes) {
  if (!c || !l) return ot_error(OT_EINVAL, "ot_train_config_apply: config or list is NULL");
  for (int i = 0; i < l->n; i++)   // unknown keys first, in order
    if (!ot_train_key_canonical(l->item[i].key))
      return ot_train_config_set(c, l->item[i].key, l->item[i].val, l->item[i].origin);
  for (int pass = 0; pass < 3; pass++)   // task (its defaults), then presets, then the rest
    for (int i = 0; i < l->n; i++) {
      const ot_setting *kv = &l->item[i];
      const char *canon = ot_train_key_canonical(kv->key);
      const int want = !strcmp(canon, "task") ? 0 : !strcmp(canon, "model") ? 1 : 2;
      if (pass != want) continue;
      OT_TRY(ot_train_config_set(c, kv->key, kv->val, kv->origin));
      if (notes) {
        char norm[64];
        size_t n = 0;
        const char *k = kv->key;
        while (*k == '-') k++;
        for (; *k && n + 1 < sizeof norm; k++) norm[n++] = *k == '_' ? '-' : (char)tolower((unsigned char)*k);
        norm[n] = 0;
        char v[OT_PATH_MAX];
        ot_train_config_get(c, canon, v, sizeof v);
        if (ot__train_key_inverted(kv->key))   // vocab_emb_dp true = --no-vocab-parallel
          fprintf(notes, "ot: %s: '%s' %s is --%s%s here (%s=%s)\n", kv->origin, kv->key, kv->val,
                  strcmp(v, "true") ? "no-" : "", canon, canon, v);
        else if (ot__train_key_value_named(kv->key) && strcmp(kv->val, v))   // recompute true = full
          fprintf(notes, "ot: %s: '%s' %s is --%s %s here (%s=%s)\n", kv->origin, kv->key, kv->val, canon,
                  v, canon, v);
        else if (strcmp(norm, canon))
          fprintf(notes, "ot: %s: '%s' is --%s here (%s=%s)\n", kv->origin, kv->key, canon, canon, v);
      }
    }
  return OT_OK;
}

ot_status ot_train_data_vocab(const char *data_dir, int *vocab) {
  if (!data_dir || !vocab) return ot_error(OT_EINVAL, "ot_train_data_vocab: argument is NULL");
  char path[OT_PATH_MAX + 16];
  OT_TRY(ot__join(path, sizeof path, data_dir, "info.json"));
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(path, (size_t)1 << 20, &text, &len));
  ot_json_doc doc = {0};
  ot_status s = ot_json_parse(&doc, text, len, 0, path);
  free(text);
  if (s != OT_OK) return s;
  const ot_json *v = ot_json_get(doc.root, "vocab_size");
  if (!v || v->type != OT_JNUM || !v->is_int || v->i < 1 || v->i > (1 << 24))
    s = ot_error(OT_EFORMAT, "%s: 'vocab_size' is missing or not a positive integer", path);
  else
    *vocab = (int)v->i;
  ot_json_free(&doc);
  return s;
}
