// File utilities (contracts in files.h).
#include "io/files.h"
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

ot_status ot__join(char *out, size_t cap, const char *dir, const char *name) {
  int n = snprintf(out, cap, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= cap)
    return ot_error(OT_EINVAL, "path '%s/%s' is longer than %zu bytes", dir, name, cap - 1);
  return OT_OK;
}

bool ot__exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

bool ot__is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

ot_status ot__mkdirs(const char *dir) {
  char p[OT_PATH_MAX + 64];
  if (!dir || !dir[0]) return ot_error(OT_EINVAL, "mkdir: empty directory name");
  if (strlen(dir) >= sizeof p) return ot_error(OT_EINVAL, "mkdir: path too long: %s", dir);
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return ot_error(OT_EIO, "cannot create directory %s: %s", p, strerror(errno));
      *s = '/';
    }
  if (mkdir(p, 0755) != 0 && errno != EEXIST)
    return ot_error(OT_EIO, "cannot create directory %s: %s", dir, strerror(errno));
  if (!ot__is_dir(dir)) return ot_error(OT_EIO, "%s exists and is not a directory", dir);
  return OT_OK;
}

ot_status ot__write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ot_error(OT_EIO, "cannot create %s: %s", path, strerror(errno));
  const char *p = data;
  size_t left = len;
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      close(fd);
      unlink(path);
      return ot_error(OT_EIO, "cannot write %s: %s", path, strerror(e));
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    int e = errno;
    unlink(path);
    return ot_error(OT_EIO, "cannot sync %s: %s", path, strerror(e));
  }
  return OT_OK;
}

ot_status ot__fsync_dir(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ot_error(OT_EIO, "cannot open directory %s: %s", dir, strerror(errno));
  int rc = fsync(dfd), e = errno;
  close(dfd);
  // some file systems cannot sync a directory (EINVAL): nothing more to do there
  if (rc != 0 && e != EINVAL) return ot_error(OT_EIO, "cannot sync directory %s: %s", dir, strerror(e));
  return OT_OK;
}

ot_status ot__write_atomic(const char *path, const void *data, size_t len) {
  char tmp[OT_PATH_MAX + 64];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return ot_error(OT_EINVAL, "path too long: %s", path);
  OT_TRY(ot__write_file(tmp, data, len));
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return ot_error(OT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
  }
  char dcopy[OT_PATH_MAX + 64];
  snprintf(dcopy, sizeof dcopy, "%s", path);
  if (ot__fsync_dir(dirname(dcopy)) != OT_OK) ot_clear_error();   // the file itself is in place
  return OT_OK;
}

ot_status ot__read_text(const char *path, size_t max_bytes, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return ot_error(OT_EIO, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n < cap) break;
    if (cap >= max_bytes) {
      free(buf);
      fclose(f);
      return ot_error(OT_EFORMAT, "%s: larger than %zu bytes", path, max_bytes);
    }
    char *nb = realloc(buf, cap * 2 + 1);
    if (!nb) { free(buf); buf = NULL; break; }
    buf = nb;
    cap *= 2;
  }
  bool err = ferror(f);
  fclose(f);
  if (!buf) return ot_error(OT_ENOMEM, "%s: out of memory", path);
  if (err) { free(buf); return ot_error(OT_EIO, "cannot read %s", path); }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return OT_OK;
}

// The four lanes' starting values, and their fold with the length into one
// word: shared by ot__hash_floats and ot__hash_bytes (same values for the same
// 32-bit words).
static const uint64_t k_lane0[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
                                    0x1234567887654321ull};
static uint64_t fold_lanes(const uint64_t h[4], size_t n) {
  uint64_t r = n;
  for (int k = 0; k < 4; k++) {
    r ^= h[k] + 0x9e3779b97f4a7c15ull + (r << 6) + (r >> 2);
    r ^= r >> 31;
    r *= 0xbf58476d1ce4e5b9ull;
  }
  return r ^ (r >> 29);
}

uint64_t ot__hash_floats(const float *x, size_t n) {
  // four independent FNV-1a-like lanes over 32-bit words, folded with a mixer
  uint64_t h[4];
  memcpy(h, k_lane0, sizeof h);
  const uint32_t *w = (const uint32_t *)(const void *)x;
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; k++) h[k] = (h[k] ^ w[i + k]) * 0x100000001b3ull;
  for (; i < n; i++) h[0] = (h[0] ^ w[i]) * 0x100000001b3ull;
  return fold_lanes(h, n);
}

uint64_t ot__hash_bytes(const void *data, size_t n) {
  // the lanes of ot__hash_floats over whole 32-bit words, then the tail bytes
  const unsigned char *b = data;
  uint64_t h[4];
  memcpy(h, k_lane0, sizeof h);
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; k++) {
      uint32_t w;
      memcpy(&w, b + i + 4 * k, 4);
      h[k] = (h[k] ^ w) * 0x100000001b3ull;
    }
  for (; i < n; i++) h[0] = (h[0] ^ b[i]) * 0x100000001b3ull;
  return fold_lanes(h, n);
}

ot_status ot__abs_path(const char *path, char *out, size_t cap) {
  if (!path[0] || path[0] == '/') {
    if (strlen(path) >= cap) return ot_error(OT_EINVAL, "path too long: %s", path);
    snprintf(out, cap, "%s", path);
    return OT_OK;
  }
  char cwd[OT_PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return ot_error(OT_EIO, "cannot get the working directory: %s", strerror(errno));
  while (path[0] == '.' && path[1] == '/') path += 2;
  if (!strcmp(path, ".")) path = "";
  int n = snprintf(out, cap, "%s%s%s", cwd, path[0] && strcmp(cwd, "/") ? "/" : "", path);
  if (n < 0 || (size_t)n >= cap) return ot_error(OT_EINVAL, "path '%s/%s' is too long", cwd, path);
  return OT_OK;
}

bool ot__remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return !ot__exists(dir);
  char p[OT_PATH_MAX + 300];
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (lstat(p, &st) == 0 && !S_ISDIR(st.st_mode)) unlink(p);
  }
  closedir(d);
  return rmdir(dir) == 0;
}
