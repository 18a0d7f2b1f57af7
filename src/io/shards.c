// llm.c-compatible token shards: validated, memory-mapped reader and atomic
// writer; plus the data layer's file helpers (atomic write, whole-file read,
// growable tracked arrays).
#include "data_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token shards are little-endian; this reader assumes a little-endian host"
#endif

// ------------------------------------------------------------ helpers ------
ot_status ot__aw_open(ot__aw *w, const char *path) {
  memset(w, 0, sizeof *w);
  w->fd = -1;
  w->path = path;
  if (strlen(path) + 5 > sizeof w->tmp) return ot_error(OT_EINVAL, "%s: path too long", path);
  snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
  w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) return ot_error(OT_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
  return OT_OK;
}

void ot__aw_write(ot__aw *w, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n && !w->failed) {
    ssize_t k = write(w->fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) { w->failed = true; break; }
    b += k;
    n -= (size_t)k;
  }
}

static void fsync_dir(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) { (void)fsync(fd); close(fd); }  // best effort
}

ot_status ot__aw_close(ot__aw *w, bool commit) {
  if (w->fd < 0) return OT_OK;
  ot_status s = OT_OK;
  if (commit) {
    if (w->failed) s = ot_error(OT_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    else if (fsync(w->fd) != 0) s = ot_error(OT_EIO, "%s: fsync failed: %s", w->tmp, strerror(errno));
  }
  if (close(w->fd) != 0 && commit && s == OT_OK)
    s = ot_error(OT_EIO, "%s: close failed: %s", w->tmp, strerror(errno));
  w->fd = -1;
  if (commit && s == OT_OK && rename(w->tmp, w->path) != 0)
    s = ot_error(OT_EIO, "%s: cannot rename %s over it: %s", w->path, w->tmp, strerror(errno));
  if (!commit || s != OT_OK) unlink(w->tmp);
  else fsync_dir(w->path);
  return s;
}

ot_status ot__read_file(const char *path, char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ot_error(OT_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return ot_error(OT_EIO, "%s: not a regular file", path);
  }
  size_t n = (size_t)st.st_size, got = 0;
  char *b = ot_mem_alloc(n + 1, OT_MEM_OTHER);
  if (!b) { close(fd); return ot_error(OT_ENOMEM, "%s: out of memory for %zu bytes", path, n); }
  while (got < n) {
    ssize_t k = read(fd, b + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  if (got != n) { ot_mem_free(b); return ot_error(OT_EIO, "%s: short read (%zu of %zu bytes)", path, got, n); }
  b[n] = 0;
  *buf = b;
  *len = n;
  return OT_OK;
}

ot_status ot__grow(void **p, size_t *cap, size_t need, size_t esize) {
  if (need <= *cap) return OT_OK;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) nc *= 2;
  void *q = ot_mem_alloc(nc * esize, OT_MEM_OTHER);
  if (!q) return ot_error(OT_ENOMEM, "out of memory growing an array to %zu elements", nc);
  if (*p) { memcpy(q, *p, *cap * esize); ot_mem_free(*p); }
  *p = q;
  *cap = nc;
  return OT_OK;
}

// ------------------------------------------------------------- reader ------
struct ot_shard {
  char *path;
  const uint8_t *map;   // whole file
  size_t size;
  int version;
  int64_t n;
};

static size_t tok_size(int version) { return version == 1 ? 2 : 4; }

void ot_shard_close(ot_shard *s) {
  if (!s) return;
  if (s->map) munmap((void *)s->map, s->size);
  ot_mem_free(s);
}

ot_status ot_shard_open(ot_shard **out, const char *path, int64_t vocab_size) {
  if (!out) return ot_error(OT_EINVAL, "ot_shard_open: out is NULL");
  *out = NULL;
  if (!path || !*path) return ot_error(OT_EINVAL, "ot_shard_open: path is NULL or empty");
  if (vocab_size <= 0) return ot_error(OT_EINVAL, "ot_shard_open: vocab_size=%lld must be > 0", (long long)vocab_size);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ot_error(OT_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return ot_error(OT_EIO, "%s: not a regular file", path);
  }
  size_t size = (size_t)st.st_size;
  if (size == 0) {
    close(fd);
    return ot_error(OT_EFORMAT, "%s: empty file (0 bytes); a token shard starts with a %d-byte header",
                    path, OT_SHARD_HEADER_BYTES);
  }
  if (size < OT_SHARD_HEADER_BYTES) {
    close(fd);
    return ot_error(OT_EFORMAT, "%s: truncated: %zu bytes, shorter than the %d-byte header",
                    path, size, OT_SHARD_HEADER_BYTES);
  }
  const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return ot_error(OT_EIO, "%s: mmap failed: %s", path, strerror(errno));
  int32_t h[3];
  memcpy(h, map, sizeof h);
  ot_status s = OT_OK;
  int64_t n = h[2];
  if (h[0] != OT_SHARD_MAGIC)
    s = ot_error(OT_EFORMAT, "%s: bad magic %d in header[0] (expected %d): not an llm.c token shard",
                 path, h[0], OT_SHARD_MAGIC);
  else if (h[1] != 1 && h[1] != 2)
    s = ot_error(OT_EFORMAT, "%s: unsupported version %d in header[1] (1 = uint16 tokens, 2 = uint32 tokens)",
                 path, h[1]);
  else if (n < 0)
    s = ot_error(OT_EFORMAT, "%s: negative token count %lld in header[2]", path, (long long)n);
  else if (n == 0)
    s = ot_error(OT_EFORMAT, "%s: empty shard: header[2] says 0 tokens", path);
  else {
    size_t want = OT_SHARD_HEADER_BYTES + (size_t)n * tok_size(h[1]);
    if (size != want)
      s = ot_error(OT_EFORMAT, "%s: count mismatch: header[2] says %lld uint%d tokens = %zu bytes with the "
                   "header, but the file has %zu bytes (%s)", path, (long long)n, h[1] == 1 ? 16 : 32,
                   want, size, size < want ? "truncated" : "trailing bytes");
  }
  if (s == OT_OK) {  // every id < vocab_size
    const uint8_t *d = map + OT_SHARD_HEADER_BYTES;
    int64_t bad = -1;
    uint32_t v = 0;
    if (h[1] == 1) {
      const uint16_t *t = (const uint16_t *)d;
      for (int64_t i = 0; i < n; i++) if (t[i] >= vocab_size) { bad = i; v = t[i]; break; }
    } else {
      const uint32_t *t = (const uint32_t *)d;
      for (int64_t i = 0; i < n; i++) if (t[i] >= (uint64_t)vocab_size) { bad = i; v = t[i]; break; }
    }
    if (bad >= 0)
      s = ot_error(OT_EFORMAT, "%s: token id %u at index %lld is >= the vocab size %lld "
                   "(shard made with another tokenizer?)", path, v, (long long)bad, (long long)vocab_size);
  }
  if (s != OT_OK) { munmap((void *)map, size); return s; }
  size_t plen = strlen(path);
  ot_shard *sh = ot_mem_alloc(sizeof *sh + plen + 1, OT_MEM_OTHER);
  if (!sh) { munmap((void *)map, size); return ot_error(OT_ENOMEM, "%s: out of memory", path); }
  sh->path = (char *)(sh + 1);
  memcpy(sh->path, path, plen + 1);
  sh->map = map;
  sh->size = size;
  sh->version = h[1];
  sh->n = n;
  *out = sh;
  return OT_OK;
}

int64_t ot_shard_ntokens(const ot_shard *s) { return s ? s->n : 0; }
int ot_shard_version(const ot_shard *s) { return s ? s->version : 0; }
const char *ot_shard_path(const ot_shard *s) { return s ? s->path : ""; }

void ot_shard_read(const ot_shard *s, int64_t start, int64_t n, int32_t *dst) {
  const uint8_t *d = s->map + OT_SHARD_HEADER_BYTES;
  if (s->version == 1) {
    const uint16_t *t = (const uint16_t *)d + start;
    for (int64_t i = 0; i < n; i++) dst[i] = t[i];
  } else {
    const uint32_t *t = (const uint32_t *)d + start;
    for (int64_t i = 0; i < n; i++) dst[i] = (int32_t)t[i];
  }
}

// ------------------------------------------------------------- writer ------
ot_status ot_shard_write(const char *path, const int32_t *ids, int64_t n, int version) {
  if (!path || !*path) return ot_error(OT_EINVAL, "ot_shard_write: path is NULL or empty");
  if (version != 1 && version != 2)
    return ot_error(OT_EINVAL, "ot_shard_write: version=%d must be 1 (uint16) or 2 (uint32)", version);
  if (n < 1 || n > INT32_MAX)
    return ot_error(OT_EINVAL, "ot_shard_write: n=%lld tokens must be in [1, %d] (split into more shards)",
                    (long long)n, INT32_MAX);
  if (!ids) return ot_error(OT_EINVAL, "ot_shard_write: ids is NULL");
  int32_t hi = version == 1 ? 65535 : INT32_MAX;
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] > hi)
      return ot_error(OT_EINVAL, "ot_shard_write: ids[%lld]=%d out of range [0, %d] for version %d%s",
                      (long long)i, ids[i], hi, version, version == 1 ? " (use version 2 for uint32 ids)" : "");
  int32_t h[256] = {0};
  h[0] = OT_SHARD_MAGIC;
  h[1] = version;
  h[2] = (int32_t)n;
  ot__aw w;
  OT_TRY(ot__aw_open(&w, path));
  ot__aw_write(&w, h, sizeof h);
  if (version == 2) {
    ot__aw_write(&w, ids, (size_t)n * 4);
  } else {
    uint16_t buf[4096];
    for (int64_t i = 0; i < n; i += 4096) {
      int64_t k = n - i < 4096 ? n - i : 4096;
      for (int64_t j = 0; j < k; j++) buf[j] = (uint16_t)ids[i + j];
      ot__aw_write(&w, buf, (size_t)k * 2);
    }
  }
  return ot__aw_close(&w, true);
}
