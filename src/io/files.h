// File utilities of the library (src/io/files.c): mkdir -p, whole-file and
// atomic writes with fsync, small reads, paths, flat directory removal, and
// the 64-bit hashes checkpoints use as checksums.
#ifndef OT_IO_FILES_H
#define OT_IO_FILES_H
#include "internal.h"

// mkdir -p; OT_EIO naming the directory on failure.
ot_status ot__mkdirs(const char *dir);
bool ot__exists(const char *path);
bool ot__is_dir(const char *path);
// Writes data[0, len) to path (created or truncated) and fsyncs it; a failed write removes it.
ot_status ot__write_file(const char *path, const void *data, size_t len);
// fsync of a directory (after a rename or a file created in it).
ot_status ot__fsync_dir(const char *dir);
// Writes text[0, len) to path atomically (path.tmp, fsync, rename, fsync dir).
ot_status ot__write_atomic(const char *path, const void *data, size_t len);
// Reads a whole (small) file into a malloc'd NUL-terminated buffer (max_bytes cap).
ot_status ot__read_text(const char *path, size_t max_bytes, char **out, size_t *len);
// path = dir + "/" + name, OT_EINVAL if it does not fit.
ot_status ot__join(char *out, size_t cap, const char *dir, const char *name);
// 64-bit hash of n floats' bit patterns (order-dependent, deterministic).
uint64_t ot__hash_floats(const float *x, size_t n);
// 64-bit hash of n bytes (deterministic; any length and alignment).
uint64_t ot__hash_bytes(const void *data, size_t n);
// path made absolute against the working directory ("" and absolute paths unchanged).
ot_status ot__abs_path(const char *path, char *out, size_t cap);
// Removes the files (not subdirectories) of dir, then dir; true when dir is gone.
bool ot__remove_flat_dir(const char *dir);

#endif
