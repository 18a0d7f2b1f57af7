// Helpers of the libFuzzer targets: see fuzz_common.h.
#define _GNU_SOURCE
#include "fuzz_common.h"
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fz_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz invariant violated at %s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  __builtin_trap();
}

size_t fz_mem_total(void) {
  ot_scratch_release();
  size_t t = 0;
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) t += ot_mem_current((ot_mem_category)c);
  return t;
}

void fz_mem_back(size_t start, const char *target) {
  ot_scratch_release();   // this thread's scratch block is kept between calls by design
  const size_t now = fz_mem_total();
  FZ_CHECK(now == start, "%s: tracked memory %zu bytes after the input, %zu before", target, now, start);
}

void fz_refused(ot_status s, const char *what) {
  FZ_CHECK(s != OT_OK, "%s: refused with OT_OK", what);
  const char *e = ot_last_error();
  FZ_CHECK(e && e[0], "%s: refused (status %d) with an empty error message", what, (int)s);
}

int fz_memfile(const void *data, size_t n, char *path, size_t cap) {
  int fd = memfd_create("fuzz", 0);
  FZ_CHECK(fd >= 0, "memfd_create failed");
  const char *p = data;
  size_t left = n;
  while (left > 0) {
    ssize_t k = write(fd, p, left);
    FZ_CHECK(k > 0, "write to memfd failed");
    p += k;
    left -= (size_t)k;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

void fz_close(int fd) { close(fd); }

void fz_scratch(char *out, size_t cap, const char *name) {
  static char dir[512];
  if (!dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ot_fuzz_XXXXXX", t && t[0] ? t : "/tmp");
    FZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp %s failed", dir);
  }
  snprintf(out, cap, "%s/%s", dir, name);
}
