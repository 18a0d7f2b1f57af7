// ops-transformer I/O: safetensors (validated reader, atomic writer).
//
// safetensors layout: 8-byte little-endian header length N, N bytes of JSON
// header {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
// ..., "__metadata__": {"key": "value", ...}}, then the data region; offsets are
// relative to the data region, which the tensors must cover exactly (no gaps,
// no overlaps, nothing after the last tensor).
#ifndef OT_IO_H
#define OT_IO_H
#include "ot/core.h"
#ifdef __cplusplus
extern "C" {
#endif

// Largest header the reader accepts (the JSON part), in bytes.
#define OT_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

// One tensor. Reader: every field is filled and points into the open file
// (valid until ot_st_close); data is aligned to at least the dtype's size.
// Writer: name, dtype, ndim, shape, data and nbytes (must equal numel * size).
typedef struct {
  const char *name;
  ot_dtype dtype;              // F32, BF16, F16, I8, I32, U16
  int ndim;                    // 0 (a scalar) .. OT_MAX_DIMS
  int64_t shape[OT_MAX_DIMS];
  const void *data;
  size_t nbytes;
} ot_st_tensor;

typedef struct ot_st_file ot_st_file;

// Opens and validates a safetensors file (memory-mapped read-only, so the
// file must not be truncated while open). Any defect returns OT_EFORMAT with
// "<path>: <what is wrong>"; a missing/unreadable file returns OT_EIO.
ot_status ot_st_open(ot_st_file **out, const char *path);
// Same validation over an in-memory image buf[0, len), BORROWED: it must stay
// alive and unchanged until ot_st_close. `name` is used in messages.
ot_status ot_st_open_mem(ot_st_file **out, const void *buf, size_t len, const char *name);
void ot_st_close(ot_st_file *f);           // NULL ok

// Tensors in data order (ascending data_offsets; ties by name).
int ot_st_count(const ot_st_file *f);
const ot_st_tensor *ot_st_get(const ot_st_file *f, int i);       // NULL if out of range
const ot_st_tensor *ot_st_find(const ot_st_file *f, const char *name);  // NULL if absent
// __metadata__ value for key, or NULL. Keys in file order with ot_st_meta_at.
const char *ot_st_meta(const ot_st_file *f, const char *key);
int ot_st_meta_count(const ot_st_file *f);
const char *ot_st_meta_at(const ot_st_file *f, int i, const char **value);
const char *ot_st_name(const ot_st_file *f);   // the path or name given at open

// Writes n tensors (in the given order, header and data alike) and n_meta
// metadata string pairs (may be 0 with NULL arrays) to path atomically: to
// "<path>.tmp", fsync, rename over path, fsync the directory. The header is
// padded with spaces so the data region starts at a multiple of 8 bytes.
// OT_EINVAL for bad arguments (duplicate or empty names, nbytes mismatch, ...),
// OT_EIO for file-system errors (the temporary file is removed).
ot_status ot_st_write(const char *path, const ot_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_vals, int n_meta);

// safetensors dtype string ("F32", "BF16", ...) of a supported dtype.
const char *ot_st_dtype_name(ot_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
