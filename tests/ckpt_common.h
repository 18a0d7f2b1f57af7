// Shared pieces of the checkpoint tests (tests/test_ckpt_*.c): rewriting a
// safetensors file with one value or one metadata entry changed, copying
// directories, running the built `ot` next to the test binary.
#ifndef OT_TEST_CKPT_COMMON_H
#define OT_TEST_CKPT_COMMON_H
#include "harness.h"
#include "train_common.h"
#include <dirent.h>
#include <stdarg.h>
#include <sys/wait.h>

// Rewrites the safetensors file `path`: element `at` of tensor `name` set to
// `val` (name may be NULL), metadata `key` set to `val_str` (key may be NULL),
// metadata whose key starts with one of drop[] (NULL-terminated, may be NULL)
// removed. Every other byte of tensors and metadata is kept, so the stored
// checksums are not updated. Returns success.
static bool st_rewrite(const char *path, const char *name, size_t at, float val, const char *key,
                       const char *val_str, const char *const *drop) {
  ot_st_file *f = NULL;
  if (ot_st_open(&f, path) != OT_OK) { printf("  open %s: %s\n", path, ot_last_error()); return false; }
  const int n = ot_st_count(f), nm = ot_st_meta_count(f);
  ot_st_tensor *ts = calloc((size_t)n, sizeof *ts);
  void **bufs = calloc((size_t)n, sizeof *bufs);
  const char **mk = calloc((size_t)nm + 1, sizeof *mk), **mv = calloc((size_t)nm + 1, sizeof *mv);
  bool ok = ts && bufs && mk && mv, found = !name;
  for (int i = 0; ok && i < n; i++) {
    ts[i] = *ot_st_get(f, i);
    bufs[i] = malloc(ts[i].nbytes ? ts[i].nbytes : 1);
    if (!bufs[i]) { ok = false; break; }
    memcpy(bufs[i], ts[i].data, ts[i].nbytes);
    if (name && !strcmp(ts[i].name, name) && ts[i].dtype == OT_F32 && at < ts[i].nbytes / 4) {
      ((float *)bufs[i])[at] = val;
      found = true;
    }
    ts[i].data = bufs[i];
  }
  int k = 0;
  bool set = !key;
  for (int i = 0; ok && i < nm; i++) {
    const char *v = NULL, *mkey = ot_st_meta_at(f, i, &v);
    bool dropped = false;
    for (int d = 0; drop && drop[d]; d++) dropped |= !strncmp(mkey, drop[d], strlen(drop[d]));
    if (dropped) continue;
    if (key && !strcmp(mkey, key)) { v = val_str; set = true; }
    mk[k] = mkey;
    mv[k++] = v;
  }
  if (ok && !set) { mk[k] = key; mv[k++] = val_str; }
  if (ok && !found) { printf("  %s: no F32 tensor '%s' with element %zu\n", path, name, at); ok = false; }
  if (ok && ot_st_write(path, ts, n, mk, mv, k) != OT_OK) {
    printf("  write %s: %s\n", path, ot_last_error());
    ok = false;
  }
  for (int i = 0; bufs && i < n; i++) free(bufs[i]);
  free(bufs);
  free(ts);
  free(mk);
  free(mv);
  ot_st_close(f);
  return ok;
}

static bool sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int rc = system(cmd);
  if (rc != 0) printf("  command failed (%d): %s\n", rc, cmd);
  return rc == 0;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) { fputs(text, f); fclose(f); }
  th_check(f != NULL, "write %s", path);
}

// Runs `<dir of this test>/ot ARGS 2>&1`; out (cap bytes) receives the output. Returns the exit status.
static int run_ot(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_ot(char *out, size_t cap, const char *fmt, ...) {
  char self[1024] = "", cmd[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  int k = snprintf(cmd, sizeof cmd, "'%s/ot' ", self);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd + k, sizeof cmd - (size_t)k, fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// Names in dir holding `part` (e.g. ".tmp"), written into list (cap bytes, space-separated); their count.
static int names_with(const char *dir, const char *part, char *list, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  if (list && cap) list[0] = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, part)) {
      n++;
      if (list) { strncat(list, e->d_name, cap - strlen(list) - 1); strncat(list, " ", cap - strlen(list) - 1); }
    }
  if (d) closedir(d);
  return n;
}
#endif
