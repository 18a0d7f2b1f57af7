// Internal helpers of the data layer (shards, loader, BPE): atomic file
// writes, whole-file reads, hashing, growable arrays on tracked memory.
#ifndef OT_IO_DATA_IMPL_H
#define OT_IO_DATA_IMPL_H
#include "ot/data.h"
#include <string.h>

// Atomic write: ot__aw_open creates "<path>.tmp"; ot__aw_write appends;
// ot__aw_close(commit=true) fsyncs, renames over path and fsyncs the
// directory, (commit=false, or any failure) removes the temporary file.
typedef struct { int fd; bool failed; char tmp[4104]; const char *path; } ot__aw;
ot_status ot__aw_open(ot__aw *w, const char *path);
void ot__aw_write(ot__aw *w, const void *p, size_t n);
ot_status ot__aw_close(ot__aw *w, bool commit);

// Splits rows [B, T + 1] into x = row[0:T], y = row[1:T+1] (x, y: [B * T]);
// returns the targets != -1.
int64_t ot__split_rows(int32_t *x, int32_t *y, const int32_t *rows, int B, int T);

// Reads a whole file into a tracked buffer (NUL-terminated; *len excludes it).
ot_status ot__read_file(const char *path, char **buf, size_t *len);

// Grows a tracked array to hold at least `need` elements of `esize` bytes
// (doubling; contents kept). On failure returns OT_ENOMEM, *p unchanged.
ot_status ot__grow(void **p, size_t *cap, size_t need, size_t esize);

static inline uint64_t ot__mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static inline uint64_t ot__key_hash(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return ot__mix64(h);
}

#endif
