// Checkpoint integrity and layout on disk: the checksums of every tensor and
// of the metadata, the refusal of non-finite state, the test for a complete
// checkpoint, finding the checkpoint of a run directory (`latest`, else the
// newest complete step_*), and the removal of what interrupted saves left.
#include "train/train_impl.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 32);
}

uint64_t ot__meta_checksum(const char *const *keys, const char *const *vals, int n) {
  // a sum over the pairs: independent of their order in the file
  uint64_t sum = 0;
  int used = 0;
  for (int i = 0; i < n; i++) {
    if (!keys[i] || !strcmp(keys[i], "meta_checksum")) continue;
    const char *v = vals[i] ? vals[i] : "";
    uint64_t hk = ot__hash_bytes(keys[i], strlen(keys[i])), hv = ot__hash_bytes(v, strlen(v));
    sum += mix64(hk ^ mix64(hv + 0x9e3779b97f4a7c15ull));
    used++;
  }
  return mix64(sum ^ (uint64_t)used);
}

static bool parse_hex(const char *v, uint64_t *out) {
  if (!v || !*v) return false;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 16);
  if (*end || errno || *v == '-') return false;
  *out = (uint64_t)x;
  return true;
}

// Index of the first non-finite value of x (or, nonneg, negative one), -1 if none.
static int64_t first_bad(const ot_st_tensor *x, bool nonneg, char *what, size_t cap) {
  const unsigned char *b = x->data;
  if (x->dtype == OT_F32) {
    const size_t n = x->nbytes / 4;
    for (size_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, b + 4 * i, 4);
      const bool nonfinite = (u & 0x7f800000u) == 0x7f800000u;
      if (nonfinite || (nonneg && (u >> 31) && (u & 0x7fffffffu))) {
        float f;
        memcpy(&f, &u, 4);
        snprintf(what, cap, nonfinite ? "a non-finite value (%g" : "a negative second moment (%g", (double)f);
        return (int64_t)i;
      }
    }
  } else if (x->dtype == OT_BF16 || x->dtype == OT_F16) {
    const uint16_t mask = x->dtype == OT_BF16 ? 0x7f80 : 0x7c00;
    const size_t n = x->nbytes / 2;
    for (size_t i = 0; i < n; i++) {
      uint16_t u;
      memcpy(&u, b + 2 * i, 2);
      if ((u & mask) == mask) {
        snprintf(what, cap, "a non-finite value (%s", (u & (mask ^ 0x7fff)) ? "nan" : (u >> 15) ? "-inf" : "inf");
        return (int64_t)i;
      }
    }
  }
  return -1;
}

ot_status ot__ckpt_check_file(const ot_st_file *f, bool require, bool values) {
  const char *file = ot_st_name(f);
  const char *mc = ot_st_meta(f, "meta_checksum");
  uint64_t want = 0;
  if (!mc && require)
    return ot_error(OT_EFORMAT, "%s: __metadata__ has no meta_checksum: the file was not written whole by "
                    "`ot train` (or was rewritten by another tool)", file);
  if (mc && !parse_hex(mc, &want))
    return ot_error(OT_EFORMAT, "%s: __metadata__ meta_checksum '%.40s' is not a hex number", file, mc);
  const int nm = ot_st_meta_count(f), nt = ot_st_count(f);
  int nsums = 0;
  if (mc) {
    const char **k = calloc((size_t)nm + 1, sizeof *k), **v = calloc((size_t)nm + 1, sizeof *v);
    if (!k || !v) { free(k); free(v); return ot_error(OT_ENOMEM, "%s: out of memory", file); }
    for (int i = 0; i < nm; i++) {
      k[i] = ot_st_meta_at(f, i, &v[i]);
      if (k[i] && !strncmp(k[i], "checksum.", 9)) nsums++;
    }
    const uint64_t got = ot__meta_checksum(k, v, nm);
    free(k);
    free(v);
    if (got != want)
      return ot_error(OT_EFORMAT, "%s: the __metadata__ (step, settings, checksums) does not match its "
                      "checksum (%016" PRIx64 " stored, %016" PRIx64 " computed): the file was edited or is "
                      "corrupt", file, want, got);
    if (nsums != nt)
      return ot_error(OT_EFORMAT, "%s: __metadata__ has the checksums of %d tensors but the file holds %d "
                      "(a tensor was removed or added)", file, nsums, nt);
  }
  for (int i = 0; i < nt; i++) {
    const ot_st_tensor *x = ot_st_get(f, i);
    if (mc) {
      char key[160];
      snprintf(key, sizeof key, "checksum.%s", x->name);
      uint64_t sum = 0;
      if (!parse_hex(ot_st_meta(f, key), &sum))
        return ot_error(OT_EFORMAT, "%s: tensor '%s' has no valid checksum in __metadata__ ('%s')", file,
                        x->name, key);
      const uint64_t got = ot__hash_bytes(x->data, x->nbytes);
      if (got != sum)
        return ot_error(OT_EFORMAT, "%s: tensor '%s' does not match its checksum (%016" PRIx64 " stored, "
                        "%016" PRIx64 " read): the file is corrupt (disk or copy error) or was changed "
                        "after it was written", file, x->name, sum, got);
    }
    char what[64];
    const int64_t at = values ? first_bad(x, !strncmp(x->name, "exp_avg_sq.", 11), what, sizeof what) : -1;
    if (at >= 0)
      return ot_error(OT_EFORMAT, "%s: tensor '%s' holds %s at element %" PRId64 "): refusing a diverged "
                      "or corrupt state", file, x->name, what, at);
  }
  return OT_OK;
}

// First bad value of n floats (non-finite, or negative with nonneg), -1 if none.
static int64_t bad_float(const float *x, size_t n, bool nonneg) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]) || (nonneg && x[i] < 0)) return (int64_t)i;
  return -1;
}

ot_status ot__ckpt_check_state(ot_trainer *t, const char *dir) {
  const float *w = ot_model_params(t->m);
  for (int i = 0; i < ot_model_param_count(t->m); i++) {
    const ot_param *p = ot_model_param_at(t->m, i);
    for (int k = 0; k < 3; k++) {
      const float *x = (k == 0 ? w : t->mom[k - 1]) + p->offset;
      const int64_t at = bad_float(x, p->numel, k == 2);
      if (at < 0) continue;
      return ot_error(OT_EINVAL, "checkpoint %s not written: %s%s '%s' holds a %s value (%g) at element %" PRId64
                      " (the training state diverged; lower --lr, raise --warmup, or check the data)", dir,
                      k == 0 ? "weight" : "AdamW moment", k == 0 ? "" : k == 1 ? " exp_avg" : " exp_avg_sq",
                      p->name, isfinite(x[at]) ? "negative" : "non-finite", (double)x[at], at);
    }
  }
  return OT_OK;
}

// Step number of a name "step_<digits>" of length len, -1 otherwise.
static int64_t step_of(const char *s, size_t len) {
  if (len < 6 || len > 24 || strncmp(s, "step_", 5)) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

// Names in dir (malloc'd array of strdup'd names), *n of them; NULL when unreadable.
static char **list_dir(const char *dir, int *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  int cap = 64;
  char **v = malloc(sizeof *v * (size_t)cap);
  for (struct dirent *e; v && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (*n == cap) {
      char **nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
      if (!nv) break;
      v = nv;
    }
    if ((v[*n] = strdup(e->d_name))) (*n)++;
  }
  closedir(d);
  return v;
}

static void free_list(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

void ot__ckpt_cleanup(const char *out) {
  int n = 0;
  char **names = list_dir(out, &n);
  char p[OT_PATH_MAX + 300], q[2 * OT_PATH_MAX + 600];
  for (int i = 0; i < n; i++) {
    const char *e = names[i];
    const size_t len = strlen(e);
    snprintf(p, sizeof p, "%s/%s", out, e);
    if (e[0] == '.' && len > 5 && step_of(e + 1, len - 5) >= 0) {   // .step_N.tmp / .del / .old
      if (ends_with(e, ".old")) {
        snprintf(q, sizeof q, "%s/%.*s", out, (int)(len - 5), e + 1);
        if (!ot__exists(q) && rename(p, q) == 0) continue;   // the save that replaced it did not finish
      }
      if (ends_with(e, ".tmp") || ends_with(e, ".del") || ends_with(e, ".old")) ot__remove_flat_dir(p);
    } else if (!strcmp(e, "latest.tmp")) {
      unlink(p);
    } else if (step_of(e, len) >= 0 && ot__is_dir(p)) {   // files half-written by an older version
      int m = 0;
      char **inner = list_dir(p, &m);
      for (int k = 0; k < m; k++)
        if (ends_with(inner[k], ".tmp")) {
          snprintf(q, sizeof q, "%s/%s", p, inner[k]);
          unlink(q);
        }
      free_list(inner, m);
      rmdir(p);   // only when nothing else is left in it
    }
  }
  free_list(names, n);
}

// The files of a checkpoint that model.safetensors records a checksum of.
static const char *const k_extra[] = {"config.json", "vocab.json", "merges.txt"};

bool ot__ckpt_complete(const char *dir) {
  char p[OT_PATH_MAX + 64];
  ot_st_file *w = NULL, *o = NULL;
  bool ok = ot__join(p, sizeof p, dir, "model.safetensors") == OT_OK && ot_st_open(&w, p) == OT_OK;
  const bool ours = ok && ot_st_meta(w, "ot_checkpoint");
  ok = ok && ot__ckpt_check_file(w, ours, false) == OT_OK;
  ok = ok && ot__join(p, sizeof p, dir, "optimizer.safetensors") == OT_OK && ot_st_open(&o, p) == OT_OK;
  const char *fmt = ok ? ot_st_meta(o, "format") : NULL, *ver = ok ? ot_st_meta(o, "format_version") : NULL;
  ok = ok && fmt && !strcmp(fmt, "ot-train-state");
  ok = ok && ot__ckpt_check_file(o, !ver || strcmp(ver, "1"), false) == OT_OK;
  for (int i = 0; ok && ours && i < 3; i++) {
    char key[64];
    snprintf(key, sizeof key, "file.%s", k_extra[i]);
    ok = !ot_st_meta(w, key) || (ot__join(p, sizeof p, dir, k_extra[i]) == OT_OK && ot__exists(p));
  }
  ot_st_close(w);
  ot_st_close(o);
  ot_clear_error();
  return ok;
}

typedef struct { int64_t step; char *name; } step_dir;

static int cmp_step_desc(const void *a, const void *b) {
  const step_dir *x = a, *y = b;
  return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

// The newest complete step_* directory of dir into out; false if none.
static bool newest_complete(const char *dir, char *out, size_t cap) {
  int n = 0;
  char **names = list_dir(dir, &n);
  step_dir *v = calloc((size_t)n + 1, sizeof *v);
  int m = 0;
  for (int i = 0; v && i < n; i++) {
    const int64_t s = step_of(names[i], strlen(names[i]));
    if (s >= 0) v[m++] = (step_dir){s, names[i]};
  }
  if (v) qsort(v, (size_t)m, sizeof *v, cmp_step_desc);
  bool found = false;
  for (int i = 0; i < m && !found; i++) {
    int k = snprintf(out, cap, "%s/%s", dir, v[i].name);
    found = k > 0 && (size_t)k < cap && ot__ckpt_complete(out);
  }
  free(v);
  free_list(names, n);
  return found;
}

ot_status ot_ckpt_find(const char *dir, char *out, size_t cap, char *note, size_t note_cap) {
  static const char fn[] = "ot_ckpt_find";
  OT_CHECK_PTR(dir, fn);
  OT_CHECK_PTR(out, fn);
  if (note && note_cap) note[0] = 0;
  char p[OT_PATH_MAX + 64], latest[OT_PATH_MAX + 32];
  OT_TRY(ot__join(p, sizeof p, dir, "model.safetensors"));
  if (ot__exists(p)) {   // a checkpoint directory itself: checked when it is loaded
    if (strlen(dir) >= cap) return ot_error(OT_EINVAL, "checkpoint path too long: %s", dir);
    snprintf(out, cap, "%s", dir);
    return OT_OK;
  }
  OT_TRY(ot__join(latest, sizeof latest, dir, "latest"));
  char why[OT_PATH_MAX + 128] = "";
  if (ot__exists(latest)) {
    char *text = NULL;
    size_t len = 0;
    OT_TRY(ot__read_text(latest, 4096, &text, &len));
    size_t n = len;
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r')) n--;
    const bool good = step_of(text, n) >= 0 && strlen(text) >= n;   // one line, no NUL inside
    char shown[64];
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < sizeof shown; i++)
      shown[k++] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    shown[k] = 0;
    if (good) text[n] = 0;
    ot_status s = OT_OK;
    if (!good)
      s = ot_error(OT_EFORMAT, "%s: expected one line naming a checkpoint directory such as step_000100, got "
                   "'%s'%s: fix it, or remove it to resume from the newest complete checkpoint", latest,
                   shown, len > k ? "..." : "");
    else if (ot__join(p, sizeof p, dir, text) != OT_OK)
      s = ot_error(OT_EINVAL, "checkpoint path too long: %s/%s", dir, text);
    else if (ot__ckpt_complete(p)) {
      if (strlen(p) >= cap) s = ot_error(OT_EINVAL, "checkpoint path too long: %s", p);
      else snprintf(out, cap, "%s", p);
      free(text);
      return s;
    } else {
      snprintf(why, sizeof why, "%s names %s, which is %s", latest, text,
               ot__is_dir(p) ? "incomplete (an interrupted save?)" : "missing");
    }
    free(text);
    if (s != OT_OK) return s;
  } else if (!ot__is_dir(dir)) {
    return ot_error(OT_EIO, "checkpoint %s: no such directory", dir);
  }
  if (newest_complete(dir, out, cap)) {
    if (note && note_cap)
      snprintf(note, note_cap, "%s%s: using %s, the newest complete checkpoint", why[0] ? why : "no 'latest' in ",
               why[0] ? "" : dir, out);
    return OT_OK;
  }
  if (why[0]) return ot_error(OT_EIO, "%s, and %s holds no other complete checkpoint", why, dir);
  return ot_error(OT_EIO, "checkpoint %s: no model.safetensors, no 'latest' file and no complete step_* "
                  "checkpoint in it", dir);
}

ot_status ot_ckpt_resolve(const char *dir, char *out, size_t cap) {
  char note[2 * OT_PATH_MAX + 256];
  OT_TRY(ot_ckpt_find(dir, out, cap, note, sizeof note));
  if (note[0]) fprintf(stderr, "ot: note: %s\n", note);
  return OT_OK;
}

bool ot_ckpt_has_settings(const char *dir) {
  char p[OT_PATH_MAX + 64];
  ot_st_file *f = NULL;
  bool ours = false;
  if (ot__join(p, sizeof p, dir, "model.safetensors") == OT_OK && ot_st_open(&f, p) == OT_OK)
    ours = ot_st_meta(f, "ot_checkpoint") != NULL;
  ot_st_close(f);
  if (!ours) ours = ot__join(p, sizeof p, dir, "optimizer.safetensors") == OT_OK && ot__exists(p);
  ot_clear_error();
  return ours;
}

ot_status ot_ckpt_open_weights(const char *dir, ot_st_file **out) {
  static const char fn[] = "ot_ckpt_open_weights";
  OT_CHECK_PTR(dir, fn);
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  char p[OT_PATH_MAX + 64];
  ot_st_file *f = NULL;
  OT_TRY(ot__join(p, sizeof p, dir, "model.safetensors"));
  OT_TRY(ot_st_open(&f, p));
  const bool ours = ot_st_meta(f, "ot_checkpoint") != NULL;
  ot_status s = ot__ckpt_check_file(f, ours, true);
  if (s == OT_OK) s = ot__join(p, sizeof p, dir, "config.json");
  if (s == OT_OK && ot__exists(p)) {
    ot_model_config mc;
    if ((s = ot_model_config_from_hf(&mc, p)) != OT_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", ot_last_error());
      s = ot_error(s, "checkpoint %s: its config.json is not usable: %s", dir, msg);
    }
  }
  for (int i = 0; s == OT_OK && ours && i < 3; i++) {
    char key[64];
    snprintf(key, sizeof key, "file.%s", k_extra[i]);
    uint64_t want = 0;
    const char *v = ot_st_meta(f, key);
    if (!v) continue;
    if (!parse_hex(v, &want)) {
      s = ot_error(OT_EFORMAT, "%s: __metadata__ '%s' is not a hex number", ot_st_name(f), key);
      break;
    }
    if ((s = ot__join(p, sizeof p, dir, k_extra[i])) != OT_OK) break;
    if (!ot__exists(p)) {
      s = ot_error(OT_EFORMAT, "checkpoint %s: %s is missing (model.safetensors records its checksum): an "
                   "incomplete copy?", dir, k_extra[i]);
      break;
    }
    char *text = NULL;
    size_t len = 0;
    if ((s = ot__read_text(p, (size_t)1 << 30, &text, &len)) != OT_OK) break;
    const uint64_t got = ot__hash_bytes(text, len);
    free(text);
    if (got != want)
      s = ot_error(OT_EFORMAT, "checkpoint %s: %s does not match the checksum recorded in model.safetensors "
                   "(edited or corrupt)", dir, k_extra[i]);
  }
  if (s != OT_OK) { ot_st_close(f); return s; }
  *out = f;
  return OT_OK;
}
