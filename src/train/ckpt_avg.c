// Checkpoint averaging: the element-wise mean of the model weights of several
// `ot train` checkpoints (the last k of a run, as translation models are
// usually evaluated), written as a weights-only checkpoint directory.
// Contract in ot/train.h.
#include "train/train_impl.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FN "ot_ckpt_average"

// Step number of a directory name "step_<digits>", -1 otherwise.
static int64_t step_num(const char *s) {
  const size_t len = strlen(s);
  if (len < 6 || len > 24 || strncmp(s, "step_", 5)) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

typedef struct { int64_t step; char name[32]; } ckpt_ent;

static int cmp_asc(const void *a, const void *b) {
  const ckpt_ent *x = a, *y = b;
  return x->step < y->step ? -1 : x->step > y->step;
}

// Tensor t of checkpoint file g matches tensor r of the first one (f0).
static ot_status same_tensor(const ot_st_tensor *r, const ot_st_file *g, const char *d0, const char *dj) {
  const ot_st_tensor *t = ot_st_find(g, r->name);
  if (!t)
    return ot_error(OT_EINVAL, "%s: checkpoint %s has no tensor '%s', which %s has: checkpoints of "
                    "different models cannot be averaged", FN, dj, r->name, d0);
  if (t->dtype != OT_F32)
    return ot_error(OT_EINVAL, "%s: checkpoint %s: tensor '%s' is %s; only F32 weights are averaged", FN,
                    dj, t->name, ot_dtype_name(t->dtype));
  bool same = t->ndim == r->ndim;
  for (int k = 0; same && k < r->ndim; k++) same = t->shape[k] == r->shape[k];
  if (!same || t->nbytes != r->nbytes)
    return ot_error(OT_EINVAL, "%s: tensor '%s' is [%lld, %lld] in checkpoint %s but [%lld, %lld] in %s: "
                    "checkpoints of different model shapes cannot be averaged", FN, r->name,
                    (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 1), dj,
                    (long long)r->shape[0], (long long)(r->ndim > 1 ? r->shape[1] : 1), d0);
  return OT_OK;
}

// Checkpoint g (dir dj) has the model settings and tensor set of f0 (dir d0).
static ot_status check_same(const ot_st_file *f0, const ot_st_file *g, const char *d0, const char *dj) {
  for (int i = 0; i < ot__key_count(); i++) {
    if (!ot__key_is_model(i) || !strcmp(ot__key_name(i), "model")) continue;
    char key[80];
    snprintf(key, sizeof key, "cfg.%s", ot__key_name(i));
    const char *a = ot_st_meta(f0, key), *b = ot_st_meta(g, key);
    if (!a || !b)
      return ot_error(OT_EFORMAT, "%s: checkpoint %s has no '%s' in its metadata", FN, a ? dj : d0, key);
    if (strcmp(a, b))
      return ot_error(OT_EINVAL, "%s: checkpoint %s has --%s %s, checkpoint %s --%s %s: checkpoints of "
                      "different models cannot be averaged", FN, dj, ot__key_name(i), b, d0,
                      ot__key_name(i), a);
  }
  if (ot_st_count(g) != ot_st_count(f0))
    return ot_error(OT_EINVAL, "%s: checkpoint %s holds %d tensors, checkpoint %s %d: checkpoints of "
                    "different models cannot be averaged", FN, dj, ot_st_count(g), d0, ot_st_count(f0));
  for (int i = 0; i < ot_st_count(f0); i++) OT_TRY(same_tensor(ot_st_get(f0, i), g, d0, dj));
  return OT_OK;
}

// Copies file name of checkpoint src into dir when it is there.
static ot_status copy_if_there(const char *src, const char *dir, const char *name) {
  char p[OT_PATH_MAX + 64], q[OT_PATH_MAX + 320];
  OT_TRY(ot__join(p, sizeof p, src, name));
  if (!ot__exists(p)) return OT_OK;
  OT_TRY(ot__join(q, sizeof q, dir, name));
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(p, (size_t)1 << 30, &text, &len));
  ot_status s = ot__write_file(q, text, len);
  free(text);
  return s;
}

// model.safetensors of the mean into dir: the metadata of the newest input
// (files[n - 1]) with new tensor checksums, out made absolute, averaged_from.
static ot_status write_mean(ot_st_file *const *files, const char *const *dirs, int n, const char *dir) {
  const ot_st_file *f0 = files[0], *last = files[n - 1];
  const int nt = ot_st_count(f0);
  size_t total = 0;
  for (int i = 0; i < nt; i++) total += ot_st_get(f0, i)->nbytes / sizeof(float);
  float *buf = ot_mem_alloc((total ? total : 1) * sizeof(float), OT_MEM_OTHER);
  ot_st_tensor *ts = calloc((size_t)nt + 1, sizeof *ts);
  const int nm = ot_st_meta_count(last), cap = nm + nt + 4;
  char **k = calloc((size_t)cap, sizeof *k), **v = calloc((size_t)cap, sizeof *v);
  size_t from_len = 16;
  for (int j = 0; j < n; j++) from_len += strlen(dirs[j]) + 1;
  char *from = malloc(from_len);
  ot_status s = buf && ts && k && v && from ? OT_OK : ot_error(OT_ENOMEM, "%s: out of memory", FN);
  int m = 0;
  size_t off = 0;
  for (int i = 0; i < nt && s == OT_OK; i++) {
    const ot_st_tensor *r = ot_st_get(f0, i);
    const size_t cnt = r->nbytes / sizeof(float);
    const float *src[64];
    for (int j = 0; j < n; j++) src[j] = ot_st_find(files[j], r->name)->data;
    float *o = buf + off;
    for (size_t e = 0; e < cnt; e++) {   // in double, inputs in the given order
      double acc = 0.0;
      for (int j = 0; j < n; j++) acc += (double)src[j][e];
      o[e] = (float)(acc / (double)n);
    }
    ts[i] = *r;
    ts[i].data = o;
    char key[160], val[24];
    snprintf(key, sizeof key, "checksum.%s", r->name);
    snprintf(val, sizeof val, "%016" PRIx64, ot__hash_bytes(o, r->nbytes));
    k[m] = strdup(key);
    v[m] = strdup(val);
    if (!k[m] || !v[m]) s = ot_error(OT_ENOMEM, "%s: out of memory", FN);
    m++;
    off += cnt;
  }
  for (int i = 0; i < nm && s == OT_OK; i++) {
    const char *val = NULL, *key = ot_st_meta_at(last, i, &val);
    if (!key || !strncmp(key, "checksum.", 9) || !strcmp(key, "meta_checksum") ||
        !strncmp(key, "averaged_", 9))
      continue;
    char abs[OT_PATH_MAX + 96];
    if (!strcmp(key, "cfg.out") && val && val[0] && val[0] != '/') {   // relative to the checkpoint
      char rel[OT_PATH_MAX + 96];
      snprintf(rel, sizeof rel, "%s/%s", dirs[n - 1], val);
      if ((s = ot__abs_path(rel, abs, sizeof abs)) != OT_OK) break;
      val = abs;
    }
    k[m] = strdup(key);
    v[m] = strdup(val ? val : "");
    if (!k[m] || !v[m]) s = ot_error(OT_ENOMEM, "%s: out of memory", FN);
    m++;
  }
  if (s == OT_OK) {
    from[0] = 0;
    for (int j = 0; j < n; j++) {
      const char *b = strrchr(dirs[j], '/');
      strcat(from, j ? " " : "");
      strcat(from, b && b[1] ? b + 1 : dirs[j]);
    }
    char cnt[16];
    snprintf(cnt, sizeof cnt, "%d", n);
    k[m] = strdup("averaged_from"); v[m] = strdup(from); m++;
    k[m] = strdup("averaged_count"); v[m] = strdup(cnt); m++;
    for (int i = 0; i < m && s == OT_OK; i++)
      if (!k[i] || !v[i]) s = ot_error(OT_ENOMEM, "%s: out of memory", FN);
  }
  if (s == OT_OK) {
    char sum[24];
    snprintf(sum, sizeof sum, "%016" PRIx64, ot__meta_checksum((const char *const *)k, (const char *const *)v, m));
    k[m] = strdup("meta_checksum");
    v[m] = strdup(sum);
    m++;
    if (!k[m - 1] || !v[m - 1]) s = ot_error(OT_ENOMEM, "%s: out of memory", FN);
  }
  char path[OT_PATH_MAX + 320];
  if (s == OT_OK) s = ot__join(path, sizeof path, dir, "model.safetensors");
  if (s == OT_OK) s = ot_st_write(path, ts, nt, (const char *const *)k, (const char *const *)v, m);
  for (int i = 0; i < m && k && v; i++) { free(k[i]); free(v[i]); }
  free(k);
  free(v);
  free(from);
  free(ts);
  ot_mem_free(buf);
  return s;
}

ot_status ot_ckpt_average_dirs(const char *const *dirs, int n, const char *out_dir) {
  OT_CHECK_PTR(dirs, FN);
  OT_CHECK_PTR(out_dir, FN);
  if (n < 1 || n > 64) return ot_error(OT_EINVAL, "%s: %d checkpoints: average 1 to 64", FN, n);
  for (int j = 0; j < n; j++) {
    OT_CHECK_PTR(dirs[j], FN);
    if (!ot__is_dir(dirs[j])) return ot_error(OT_EIO, "%s: checkpoint %s: no such directory", FN, dirs[j]);
  }
  // the output: a new directory, written as .NAME.tmp beside it and renamed into place
  char parent[OT_PATH_MAX], tmp[OT_PATH_MAX + 300], final[OT_PATH_MAX + 300];
  size_t len = strlen(out_dir);
  while (len > 1 && out_dir[len - 1] == '/') len--;
  size_t b = len;
  while (b > 0 && out_dir[b - 1] != '/') b--;
  if (len - b == 0 || len - b >= 200 || !strncmp(out_dir + b, ".", len - b) ||
      !strncmp(out_dir + b, "..", len - b) || b >= sizeof parent)
    return ot_error(OT_EINVAL, "%s: output '%s': name a new directory, such as out/avg_last5", FN, out_dir);
  if (b == 0) snprintf(parent, sizeof parent, ".");
  else snprintf(parent, sizeof parent, "%.*s", b > 1 ? (int)(b - 1) : 1, out_dir);
  snprintf(final, sizeof final, "%s/%.*s", parent, (int)(len - b), out_dir + b);
  snprintf(tmp, sizeof tmp, "%s/.%.*s.tmp", parent, (int)(len - b), out_dir + b);
  if (ot__exists(final))
    return ot_error(OT_EINVAL, "%s: output %s already exists: remove it or name a new directory", FN, final);

  ot_st_file *files[64] = {0};
  ot_status s = OT_OK;
  for (int j = 0; j < n && s == OT_OK; j++) {
    s = ot_ckpt_open_weights(dirs[j], &files[j]);   // checksums, finite values, config.json
    if (s == OT_OK && !ot_st_meta(files[j], "ot_checkpoint"))
      s = ot_error(OT_EINVAL, "%s: %s is not a checkpoint of `ot train` (no ot_checkpoint in the "
                   "metadata of its model.safetensors)", FN, dirs[j]);
    if (s == OT_OK && j > 0) s = check_same(files[0], files[j], dirs[0], dirs[j]);
    for (int i = 0; s == OT_OK && j == 0 && i < ot_st_count(files[0]); i++)
      if (ot_st_get(files[0], i)->dtype != OT_F32)
        s = ot_error(OT_EINVAL, "%s: checkpoint %s: tensor '%s' is %s; only F32 weights are averaged", FN,
                     dirs[0], ot_st_get(files[0], i)->name, ot_dtype_name(ot_st_get(files[0], i)->dtype));
  }
  if (s == OT_OK) s = ot__mkdirs(parent);
  if (s == OT_OK && ot__exists(tmp)) ot__remove_flat_dir(tmp);   // an interrupted earlier average
  if (s == OT_OK && mkdir(tmp, 0755) != 0)
    s = ot_error(OT_EIO, "%s: cannot create directory %s: %s", FN, tmp, strerror(errno));
  const bool made = s == OT_OK;
  if (s == OT_OK) s = write_mean(files, dirs, n, tmp);
  static const char *const extra[] = {"config.json", "vocab.json", "merges.txt"};
  for (int i = 0; i < 3 && s == OT_OK; i++) s = copy_if_there(dirs[n - 1], tmp, extra[i]);
  if (s == OT_OK) s = ot__fsync_dir(tmp);
  if (s == OT_OK && rename(tmp, final) != 0)
    s = ot_error(OT_EIO, "%s: cannot rename %s to %s: %s", FN, tmp, final, strerror(errno));
  if (s == OT_OK) s = ot__fsync_dir(parent);
  else if (made) ot__remove_flat_dir(tmp);
  for (int j = 0; j < n; j++) ot_st_close(files[j]);
  return s;
}

ot_status ot_ckpt_last(const char *run_dir, int last_k, char (*out)[OT_PATH_MAX + 64]) {
  OT_CHECK_PTR(run_dir, "ot_ckpt_last");
  OT_CHECK_PTR(out, "ot_ckpt_last");
  if (last_k < 1 || last_k > 64)
    return ot_error(OT_EINVAL, "ot_ckpt_last: last %d: choose 1 to 64 checkpoints", last_k);
  DIR *d = opendir(run_dir);
  if (!d) return ot_error(OT_EIO, "run directory %s: %s", run_dir, strerror(errno));
  int n = 0, cap = 64;
  ckpt_ent *v = malloc(sizeof *v * (size_t)cap);
  for (struct dirent *e; v && (e = readdir(d));) {
    const int64_t st = step_num(e->d_name);
    if (st < 0) continue;
    char p[OT_PATH_MAX + 64];
    if (ot__join(p, sizeof p, run_dir, e->d_name) != OT_OK || !ot__ckpt_complete(p)) continue;
    if (n == cap) {
      ckpt_ent *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
      if (!nv) break;
      v = nv;
    }
    v[n].step = st;
    snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
    n++;
  }
  closedir(d);
  ot_clear_error();
  if (!v) return ot_error(OT_ENOMEM, "ot_ckpt_last: out of memory");
  qsort(v, (size_t)n, sizeof *v, cmp_asc);
  ot_status s = OT_OK;
  if (n < last_k) {
    char have[256] = "";
    for (int i = 0; i < n && strlen(have) < 200; i++)
      snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "", v[i].name);
    s = ot_error(OT_EINVAL, "run directory %s holds %d complete checkpoint%s%s%s%s, fewer than the %d asked "
                 "for (lower the count, or save more often with --save-every and a larger --keep)",
                 run_dir, n, n == 1 ? "" : "s", n ? " (" : "", have, n ? ")" : "", last_k);
  }
  for (int i = 0; s == OT_OK && i < last_k; i++)
    s = ot__join(out[i], OT_PATH_MAX + 64, run_dir, v[n - last_k + i].name);
  free(v);
  return s;
}

ot_status ot_ckpt_average(const char *run_dir, int last_k, const char *out_dir) {
  OT_CHECK_PTR(run_dir, FN);
  if (last_k < 1 || last_k > 64)
    return ot_error(OT_EINVAL, "%s: last_k=%d: average the last 1 to 64 checkpoints", FN, last_k);
  char (*paths)[OT_PATH_MAX + 64] = calloc((size_t)last_k, sizeof *paths);
  const char *dirs[64];
  if (!paths) return ot_error(OT_ENOMEM, "%s: out of memory", FN);
  ot_status s = ot_ckpt_last(run_dir, last_k, paths);
  for (int i = 0; i < last_k; i++) dirs[i] = paths[i];
  if (s == OT_OK) s = ot_ckpt_average_dirs(dirs, last_k, out_dir);
  free(paths);
  return s;
}
