// safetensors reader (validating every field against the file) and atomic
// writer. Reader: the image is mmapped (or borrowed), the header parsed with
// the strict JSON parser, each entry checked, then the layout: entries sorted
// by offset must tile the data region exactly.
#include "ot/io.h"
#include "json.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct ot_st_file {
  char *name;
  const uint8_t *base;       // whole image
  size_t size;
  bool mapped;
  ot_json_doc doc;
  int n, n_meta;
  ot_st_tensor *t;           // data order
  const ot_st_tensor **by_name;
  const char **mkey, **mval;
  void *blk;                 // one block: entries, tensors, name index, metadata
  void *copy;                // aligned copies of tensors misaligned in the image
};

// ------------------------------------------------------------- dtypes ------
static const char *const k_st_names[OT_DTYPE_COUNT] = {"F32", "BF16", "F16", "I8", "I32", "U16"};
// safetensors dtypes we know but do not support.
static const char *const k_st_other[] = {"F64", "I64", "U64", "U32", "I16", "U8", "BOOL",
                                         "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                         "F4", "C64", "I4", "U4"};

const char *ot_st_dtype_name(ot_dtype dt) {
  return (unsigned)dt < OT_DTYPE_COUNT ? k_st_names[dt] : "?";
}

// ------------------------------------------------------------ helpers ------
static void fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  for (int i = 0; i < ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

// "an array", "a number", "null", ... for messages.
static const char *a_type(ot_jtype t) {
  switch (t) {
    case OT_JNULL: return "null";
    case OT_JBOOL: return "a boolean";
    case OT_JNUM: return "a number";
    case OT_JSTR: return "a string";
    case OT_JARR: return "an array";
    case OT_JOBJ: return "an object";
  }
  return "unknown";
}

static void fmt_num(char *buf, size_t cap, const ot_json *v) {
  if (v->type != OT_JNUM) snprintf(buf, cap, "%s", a_type(v->type));
  else if (v->is_int) snprintf(buf, cap, "%lld", (long long)v->i);
  else snprintf(buf, cap, "%.15g", v->d);
}

// numel * esize with overflow checks; false on overflow past INT64_MAX.
static bool checked_bytes(const int64_t *shape, int ndim, size_t esize, uint64_t *out) {
  for (int i = 0; i < ndim; i++) if (shape[i] == 0) { *out = 0; return true; }
  uint64_t n = esize;
  for (int i = 0; i < ndim; i++) {
    uint64_t d = (uint64_t)shape[i];
    if (n > (uint64_t)INT64_MAX / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s);
  char *d = ot_mem_alloc(n + 1, OT_MEM_OTHER);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const ot_st_tensor *const *)a)->name, (*(const ot_st_tensor *const *)b)->name);
}

typedef struct { ot_st_tensor t; uint64_t begin, end; } entry;

static int cmp_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->t.name, y->t.name);
}

// ------------------------------------------------------------- parsing -----
// One tensor entry `e` named key -> out (shape, dtype, offsets checked alone).
static ot_status parse_entry(const ot_st_file *f, const ot_json *e, uint64_t data_size, entry *out) {
  const char *nm = f->name, *key = e->key;
  char b1[64], b2[128];
  if (e->type != OT_JOBJ)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': entry is %s, not an object", nm, key,
                    a_type(e->type));
  const ot_json *dt = ot_json_get(e, "dtype"), *sh = ot_json_get(e, "shape"),
                *of = ot_json_get(e, "data_offsets");
  if (!dt || !sh || !of)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': missing \"%s\"", nm, key,
                    !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  // dtype
  if (dt->type != OT_JSTR)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': \"dtype\" is %s, not a string", nm, key,
                    a_type(dt->type));
  int d = -1;
  for (int i = 0; i < OT_DTYPE_COUNT; i++) if (strcmp(dt->s, k_st_names[i]) == 0) d = i;
  if (d < 0) {
    for (size_t i = 0; i < sizeof k_st_other / sizeof *k_st_other; i++)
      if (strcmp(dt->s, k_st_other[i]) == 0)
        return ot_error(OT_EFORMAT, "%s: tensor '%s': dtype %s is not supported (supported: "
                        "F32, BF16, F16, I8, I32, U16; convert the tensor before saving)",
                        nm, key, dt->s);
    return ot_error(OT_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", nm, key, dt->s);
  }
  out->t.dtype = (ot_dtype)d;
  size_t esize = ot_dtype_size(out->t.dtype);
  // shape
  if (sh->type != OT_JARR)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': \"shape\" is %s, not an array", nm, key,
                    a_type(sh->type));
  if (sh->n > OT_MAX_DIMS)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': shape has %d dims, at most %d are supported",
                    nm, key, sh->n, OT_MAX_DIMS);
  out->t.ndim = sh->n;
  int i = 0;
  for (const ot_json *v = sh->first; v; v = v->next, i++) {
    if (v->type != OT_JNUM || !v->is_int) {
      fmt_num(b1, sizeof b1, v);
      return ot_error(OT_EFORMAT, "%s: tensor '%s': shape dim %d is not an integer (got %s)",
                      nm, key, i, b1);
    }
    if (v->i < 0)
      return ot_error(OT_EFORMAT, "%s: tensor '%s': shape dim %d is negative (%lld)", nm, key, i,
                      (long long)v->i);
    out->t.shape[i] = v->i;
  }
  fmt_shape(b2, sizeof b2, out->t.shape, out->t.ndim);
  uint64_t need;
  if (!checked_bytes(out->t.shape, out->t.ndim, esize, &need))
    return ot_error(OT_EFORMAT, "%s: tensor '%s': shape %s of %s overflows (elements x %zu bytes "
                    "exceeds 2^63)", nm, key, b2, k_st_names[d], esize);
  // data_offsets
  if (of->type != OT_JARR || of->n != 2)
    return of->type == OT_JARR
        ? ot_error(OT_EFORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end], got an "
                   "array of %d element%s", nm, key, of->n, of->n == 1 ? "" : "s")
        : ot_error(OT_EFORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end], got %s",
                   nm, key, a_type(of->type));
  uint64_t off[2];
  i = 0;
  for (const ot_json *v = of->first; v; v = v->next, i++) {
    if (v->type != OT_JNUM || !v->is_int || v->i < 0) {
      fmt_num(b1, sizeof b1, v);
      return ot_error(OT_EFORMAT, "%s: tensor '%s': data_offsets[%d] is not a non-negative "
                      "integer (got %s)", nm, key, i, b1);
    }
    off[i] = (uint64_t)v->i;
  }
  if (off[0] > off[1])
    return ot_error(OT_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) has begin > end", nm,
                    key, (unsigned long long)off[0], (unsigned long long)off[1]);
  if (off[1] > data_size)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) end beyond the data "
                    "region of %llu bytes (file truncated?)", nm, key,
                    (unsigned long long)off[0], (unsigned long long)off[1],
                    (unsigned long long)data_size);
  if (off[1] - off[0] != need)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) hold %llu bytes but "
                    "shape %s of %s needs %llu", nm, key, (unsigned long long)off[0],
                    (unsigned long long)off[1], (unsigned long long)(off[1] - off[0]), b2,
                    k_st_names[d], (unsigned long long)need);
  out->t.name = key;
  out->t.nbytes = (size_t)need;
  out->begin = off[0];
  out->end = off[1];
  return OT_OK;
}

static ot_status parse_meta(ot_st_file *f, const ot_json *m) {
  if (m->type != OT_JOBJ)
    return ot_error(OT_EFORMAT, "%s: __metadata__ is %s, not an object", f->name,
                    a_type(m->type));
  for (const ot_json *v = m->first; v; v = v->next) {
    if (v->key_len == 0)  // the writer refuses it too
      return ot_error(OT_EFORMAT, "%s: __metadata__ has an empty key", f->name);
    if (strlen(v->key) != v->key_len)
      return ot_error(OT_EFORMAT, "%s: __metadata__ key '%s...' contains a NUL character", f->name, v->key);
    if (v->type != OT_JSTR)
      return ot_error(OT_EFORMAT, "%s: __metadata__ value of key '%s' is %s, not a string",
                      f->name, v->key, a_type(v->type));
    if (strlen(v->s) != v->len)
      return ot_error(OT_EFORMAT, "%s: __metadata__ value of key '%s' contains a NUL character",
                      f->name, v->key);
    for (const ot_json *w = m->first; w != v; w = w->next)
      if (strcmp(w->key, v->key) == 0)
        return ot_error(OT_EFORMAT, "%s: __metadata__ key '%s' appears twice", f->name, v->key);
    f->mkey[f->n_meta] = v->key;
    f->mval[f->n_meta++] = v->s;
  }
  return OT_OK;
}

static ot_status parse_image(ot_st_file *f) {
  const char *nm = f->name;
  if (f->size < 8)
    return ot_error(OT_EFORMAT, "%s: file is %zu bytes, shorter than the 8-byte header length "
                    "(not a safetensors file?)", nm, f->size);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->base[i];
  if (hlen > OT_ST_MAX_HEADER)
    return ot_error(OT_EFORMAT, "%s: header length %llu is absurd (limit %llu bytes; not a "
                    "safetensors file?)", nm, (unsigned long long)hlen,
                    (unsigned long long)OT_ST_MAX_HEADER);
  if (hlen > f->size - 8)
    return ot_error(OT_EFORMAT, "%s: header length %llu is larger than the %zu bytes after the "
                    "length field (file truncated?)", nm, (unsigned long long)hlen, f->size - 8);
  char what[512];
  snprintf(what, sizeof what, "%s: header", nm);
  OT_TRY(ot_json_parse(&f->doc, (const char *)f->base + 8, (size_t)hlen, 0, what));
  const ot_json *root = f->doc.root;
  if (root->type != OT_JOBJ)
    return ot_error(OT_EFORMAT, "%s: header is a JSON %s, not an object", nm,
                    ot_json_type_name(root->type));
  const uint8_t *data = f->base + 8 + hlen;
  uint64_t data_size = f->size - 8 - hlen;

  // Sizes, then one block: entries (temporary), tensors, name index, metadata.
  int nt = 0, nmeta_obj = 0, nmeta = 0;
  for (const ot_json *e = root->first; e; e = e->next) {
    if (strcmp(e->key, "__metadata__") == 0 && e->key_len == 12) {
      if (++nmeta_obj > 1) return ot_error(OT_EFORMAT, "%s: __metadata__ appears twice", nm);
      nmeta = e->type == OT_JOBJ ? e->n : 0;
    } else nt++;
  }
  size_t bytes = ot_align64((size_t)nt * sizeof(entry)) + ot_align64((size_t)nt * sizeof(ot_st_tensor)) +
                 ot_align64((size_t)nt * sizeof(void *)) + 2 * ot_align64((size_t)nmeta * sizeof(void *));
  uint8_t *blk = ot_mem_alloc(bytes, OT_MEM_OTHER);
  if (!blk) return ot_error(OT_ENOMEM, "%s: out of memory for %d tensor entries", nm, nt);
  entry *ent = (entry *)blk;
  f->t = (ot_st_tensor *)(blk + ot_align64((size_t)nt * sizeof(entry)));
  f->by_name = (const ot_st_tensor **)((uint8_t *)f->t + ot_align64((size_t)nt * sizeof(ot_st_tensor)));
  f->mkey = (const char **)((uint8_t *)f->by_name + ot_align64((size_t)nt * sizeof(void *)));
  f->mval = (const char **)((uint8_t *)f->mkey + ot_align64((size_t)nmeta * sizeof(void *)));
  f->blk = blk;
  ot_status s = OT_OK;
  int k = 0;
  for (const ot_json *e = root->first; e && s == OT_OK; e = e->next) {
    if (e->key_len == 0)  // the writer refuses it too
      s = ot_error(OT_EFORMAT, "%s: tensor %d has an empty name", nm, k);
    else if (strlen(e->key) != e->key_len)
      s = ot_error(OT_EFORMAT, "%s: tensor name '%s...' contains a NUL character", nm, e->key);
    else if (strcmp(e->key, "__metadata__") == 0) s = parse_meta(f, e);
    else {
      memset(&ent[k], 0, sizeof ent[k]);
      s = parse_entry(f, e, data_size, &ent[k]);
      k++;
    }
  }
  if (s == OT_OK) {  // duplicate names
    for (int i = 0; i < nt; i++) f->by_name[i] = &ent[i].t;
    qsort(f->by_name, (size_t)nt, sizeof *f->by_name, cmp_name);
    for (int i = 1; i < nt && s == OT_OK; i++)
      if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
        s = ot_error(OT_EFORMAT, "%s: duplicate tensor name '%s'", nm, f->by_name[i]->name);
  }
  if (s == OT_OK) {  // the tensors must tile [0, data_size) exactly
    qsort(ent, (size_t)nt, sizeof *ent, cmp_offsets);
    uint64_t pos = 0;
    for (int i = 0; i < nt && s == OT_OK; i++) {
      if (ent[i].begin < pos)
        s = ot_error(OT_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu) overlap tensor '%s' "
                     "[%llu, %llu)", nm, ent[i].t.name, (unsigned long long)ent[i].begin,
                     (unsigned long long)ent[i].end, ent[i - 1].t.name,
                     (unsigned long long)ent[i - 1].begin, (unsigned long long)ent[i - 1].end);
      else if (ent[i].begin > pos)
        s = ot_error(OT_EFORMAT, "%s: bytes [%llu, %llu) of the data region are not covered by "
                     "any tensor (gap before tensor '%s')", nm, (unsigned long long)pos,
                     (unsigned long long)ent[i].begin, ent[i].t.name);
      pos = ent[i].end;
    }
    if (s == OT_OK && pos != data_size)
      s = ot_error(OT_EFORMAT, "%s: bytes [%llu, %llu) of the data region are not covered by any "
                   "tensor (%llu trailing bytes)", nm, (unsigned long long)pos,
                   (unsigned long long)data_size, (unsigned long long)(data_size - pos));
  }
  if (s != OT_OK) return s;  // ot_st_close frees what was allocated

  // Final tensors in data order; misaligned ones get an aligned copy.
  size_t copy_bytes = 0;
  for (int i = 0; i < nt; i++) {
    f->t[i] = ent[i].t;
    f->t[i].data = data + ent[i].begin;
    if ((uintptr_t)f->t[i].data % ot_dtype_size(f->t[i].dtype)) copy_bytes += ot_align64(f->t[i].nbytes);
  }
  f->n = nt;
  if (copy_bytes) {
    uint8_t *c = ot_mem_alloc(copy_bytes, OT_MEM_OTHER);
    if (!c) return ot_error(OT_ENOMEM, "%s: out of memory for aligned tensor copies", nm);
    f->copy = c;
    for (int i = 0; i < nt; i++)
      if ((uintptr_t)f->t[i].data % ot_dtype_size(f->t[i].dtype)) {
        memcpy(c, f->t[i].data, f->t[i].nbytes);
        f->t[i].data = c;
        c += ot_align64(f->t[i].nbytes);
      }
  }
  for (int i = 0; i < nt; i++) f->by_name[i] = &f->t[i];
  qsort(f->by_name, (size_t)nt, sizeof *f->by_name, cmp_name);
  return OT_OK;
}

// ----------------------------------------------------------- open/close ----
static ot_status new_file(ot_st_file **out, const char *name) {
  ot_st_file *f = ot_mem_alloc(sizeof *f, OT_MEM_OTHER);
  if (!f) return ot_error(OT_ENOMEM, "%s: out of memory", name);
  memset(f, 0, sizeof *f);
  f->name = dup_str(name);
  if (!f->name) { ot_mem_free(f); return ot_error(OT_ENOMEM, "%s: out of memory", name); }
  *out = f;
  return OT_OK;
}

static ot_status finish_open(ot_st_file **out, ot_st_file *f) {
  ot_status s = parse_image(f);
  if (s != OT_OK) {
    ot_st_close(f);   // does not touch the error message
    return s;
  }
  *out = f;
  return OT_OK;
}

ot_status ot_st_open_mem(ot_st_file **out, const void *buf, size_t len, const char *name) {
  if (!out) return ot_error(OT_EINVAL, "ot_st_open_mem: out is NULL");
  *out = NULL;
  if (!buf && len) return ot_error(OT_EINVAL, "ot_st_open_mem: buf is NULL with len=%zu", len);
  ot_st_file *f;
  OT_TRY(new_file(&f, name ? name : "<memory>"));
  f->base = buf ? buf : (const uint8_t *)"";
  f->size = len;
  return finish_open(out, f);
}

ot_status ot_st_open(ot_st_file **out, const char *path) {
  if (!out) return ot_error(OT_EINVAL, "ot_st_open: out is NULL");
  *out = NULL;
  if (!path) return ot_error(OT_EINVAL, "ot_st_open: path is NULL");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ot_error(OT_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno; close(fd);
    return ot_error(OT_EIO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) { close(fd); return ot_error(OT_EIO, "%s: not a regular file", path); }
  ot_st_file *f;
  ot_status s = new_file(&f, path);
  if (s != OT_OK) { close(fd); return s; }
  f->size = (size_t)st.st_size;
  if (f->size == 0) f->base = (const uint8_t *)"";
  else {
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno; close(fd); ot_st_close(f);
      return ot_error(OT_EIO, "%s: cannot map %zu bytes: %s", path, (size_t)st.st_size, strerror(e));
    }
    f->base = m;
    f->mapped = true;
  }
  close(fd);
  return finish_open(out, f);
}

void ot_st_close(ot_st_file *f) {
  if (!f) return;
  if (f->mapped) munmap((void *)f->base, f->size);
  ot_json_free(&f->doc);
  ot_mem_free(f->blk);
  ot_mem_free(f->copy);
  ot_mem_free(f->name);
  ot_mem_free(f);
}

// ------------------------------------------------------------ accessors ----
int ot_st_count(const ot_st_file *f) { return f ? f->n : 0; }
const char *ot_st_name(const ot_st_file *f) { return f ? f->name : ""; }

const ot_st_tensor *ot_st_get(const ot_st_file *f, int i) {
  return (f && i >= 0 && i < f->n) ? &f->t[i] : NULL;
}

const ot_st_tensor *ot_st_find(const ot_st_file *f, const char *name) {
  if (!f || !name) return NULL;
  int lo = 0, hi = f->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(name, f->by_name[mid]->name);
    if (c == 0) return f->by_name[mid];
    if (c < 0) hi = mid - 1; else lo = mid + 1;
  }
  return NULL;
}

const char *ot_st_meta(const ot_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int i = 0; i < f->n_meta; i++) if (strcmp(f->mkey[i], key) == 0) return f->mval[i];
  return NULL;
}
int ot_st_meta_count(const ot_st_file *f) { return f ? f->n_meta : 0; }
const char *ot_st_meta_at(const ot_st_file *f, int i, const char **value) {
  if (!f || i < 0 || i >= f->n_meta) { if (value) *value = NULL; return NULL; }
  if (value) *value = f->mval[i];
  return f->mkey[i];
}

// --------------------------------------------------------------- writer ----
// A sink that counts bytes (buf NULL) or writes them.
typedef struct { char *buf; size_t n; } sink;

static void put(sink *k, const char *s, size_t n) {
  if (k->buf) memcpy(k->buf + k->n, s, n);
  k->n += n;
}
static void puts_(sink *k, const char *s) { put(k, s, strlen(s)); }
static void put_jstr(sink *k, const char *s) {
  put(k, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char e[8];
    if (*p == '"') put(k, "\\\"", 2);
    else if (*p == '\\') put(k, "\\\\", 2);
    else if (*p == '\n') put(k, "\\n", 2);
    else if (*p == '\t') put(k, "\\t", 2);
    else if (*p < 0x20) { snprintf(e, sizeof e, "\\u%04x", *p); put(k, e, 6); }
    else put(k, (const char *)p, 1);
  }
  put(k, "\"", 1);
}

static void emit_header(sink *k, const ot_st_tensor *t, int n, const char *const *mk,
                        const char *const *mv, int n_meta) {
  char num[64];
  puts_(k, "{");
  if (n_meta > 0) {
    puts_(k, "\"__metadata__\":{");
    for (int i = 0; i < n_meta; i++) {
      if (i) puts_(k, ",");
      put_jstr(k, mk[i]); puts_(k, ":"); put_jstr(k, mv[i]);
    }
    puts_(k, "}");
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    if (i || n_meta > 0) puts_(k, ",");
    put_jstr(k, t[i].name);
    puts_(k, ":{\"dtype\":\""); puts_(k, k_st_names[t[i].dtype]); puts_(k, "\",\"shape\":[");
    for (int d = 0; d < t[i].ndim; d++) {
      snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)t[i].shape[d]);
      puts_(k, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
             (unsigned long long)(off + t[i].nbytes));
    puts_(k, num);
    off += t[i].nbytes;
  }
  puts_(k, "}");
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Names must be non-empty, valid UTF-8 and unique.
static ot_status check_names(const char *const *names, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    if (!names[i]) return ot_error(OT_EINVAL, "ot_st_write: %s %d has a NULL name", what, i);
    if (!*names[i]) return ot_error(OT_EINVAL, "ot_st_write: %s %d has an empty name", what, i);
    if (!ot_json_utf8_valid(names[i], strlen(names[i])))
      return ot_error(OT_EINVAL, "ot_st_write: %s %d name is not valid UTF-8", what, i);
  }
  if (n < 2) return OT_OK;
  const char **s = ot_mem_alloc((size_t)n * sizeof *s, OT_MEM_OTHER);
  if (!s) return ot_error(OT_ENOMEM, "ot_st_write: out of memory");
  memcpy(s, names, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_cstr);
  ot_status st = OT_OK;
  for (int i = 1; i < n && st == OT_OK; i++)
    if (strcmp(s[i - 1], s[i]) == 0) st = ot_error(OT_EINVAL, "ot_st_write: duplicate %s name '%s'", what, s[i]);
  ot_mem_free(s);
  return st;
}

static ot_status validate_write(const ot_st_tensor *t, int n, const char *const *mk,
                                const char *const *mv, int n_meta) {
  if (n < 0 || n_meta < 0) return ot_error(OT_EINVAL, "ot_st_write: n=%d and n_meta=%d must be >= 0", n, n_meta);
  if (n > 0 && !t) return ot_error(OT_EINVAL, "ot_st_write: tensors is NULL with n=%d", n);
  if (n_meta > 0 && (!mk || !mv)) return ot_error(OT_EINVAL, "ot_st_write: meta_keys/meta_vals NULL with n_meta=%d", n_meta);
  for (int i = 0; i < n; i++) {
    const char *nm = t[i].name ? t[i].name : "(null)";
    if (t[i].name && strcmp(t[i].name, "__metadata__") == 0)
      return ot_error(OT_EINVAL, "ot_st_write: tensor %d: the name '__metadata__' is reserved", i);
    if ((unsigned)t[i].dtype >= OT_DTYPE_COUNT)
      return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': dtype %d out of range", nm, (int)t[i].dtype);
    if (t[i].ndim < 0 || t[i].ndim > OT_MAX_DIMS)
      return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': ndim=%d must be in [0, %d]", nm, t[i].ndim, OT_MAX_DIMS);
    for (int d = 0; d < t[i].ndim; d++)
      if (t[i].shape[d] < 0)
        return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': shape[%d]=%lld is negative", nm, d, (long long)t[i].shape[d]);
    uint64_t need = 0;
    char b[128];
    fmt_shape(b, sizeof b, t[i].shape, t[i].ndim);
    if (!checked_bytes(t[i].shape, t[i].ndim, ot_dtype_size(t[i].dtype), &need))
      return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': shape %s of %s overflows 2^63 bytes",
                      nm, b, k_st_names[t[i].dtype]);
    if (need != t[i].nbytes)
      return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': nbytes=%zu but shape %s of %s needs %llu",
                      nm, t[i].nbytes, b, k_st_names[t[i].dtype], (unsigned long long)need);
    if (need && !t[i].data) return ot_error(OT_EINVAL, "ot_st_write: tensor '%s': data is NULL", nm);
  }
  const char **names = n ? ot_mem_alloc((size_t)n * sizeof *names, OT_MEM_OTHER) : NULL;
  if (n && !names) return ot_error(OT_ENOMEM, "ot_st_write: out of memory");
  for (int i = 0; i < n; i++) names[i] = t[i].name;
  ot_status s = check_names(names, n, "tensor");
  ot_mem_free(names);
  OT_TRY(s);
  for (int i = 0; i < n_meta; i++)
    if (!mv[i] || !ot_json_utf8_valid(mv[i], strlen(mv[i])))
      return ot_error(OT_EINVAL, "ot_st_write: metadata value %d is %s", i, mv[i] ? "not valid UTF-8" : "NULL");
  return check_names(mk, n_meta, "metadata key");
}

static bool write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w; n -= (size_t)w;
  }
  return true;
}

static void fsync_dir(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) { (void)fsync(fd); close(fd); }  // best effort: some file systems refuse
}

ot_status ot_st_write(const char *path, const ot_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_vals, int n_meta) {
  if (!path || !*path) return ot_error(OT_EINVAL, "ot_st_write: path is NULL or empty");
  OT_TRY(validate_write(tensors, n, meta_keys, meta_vals, n_meta));
  sink k = {0};
  emit_header(&k, tensors, n, meta_keys, meta_vals, n_meta);
  size_t hlen = k.n, padded = hlen + (8 - (8 + hlen) % 8) % 8;
  size_t plen = strlen(path);
  uint8_t *buf = ot_mem_alloc(8 + padded + plen + 5, OT_MEM_OTHER);
  if (!buf) return ot_error(OT_ENOMEM, "%s: out of memory for a %zu-byte header", path, padded);
  char *tmp = (char *)buf + 8 + padded;
  memcpy(tmp, path, plen); memcpy(tmp + plen, ".tmp", 5);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  k.buf = (char *)buf + 8; k.n = 0;
  emit_header(&k, tensors, n, meta_keys, meta_vals, n_meta);
  memset(buf + 8 + hlen, ' ', padded - hlen);

  ot_status s = OT_OK;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    s = ot_error(OT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    ot_mem_free(buf);
    return s;
  }
  bool ok = write_all(fd, buf, 8 + padded);
  for (int i = 0; i < n && ok; i++) ok = write_all(fd, tensors[i].data, tensors[i].nbytes);
  if (!ok) s = ot_error(OT_EIO, "%s: write failed: %s", tmp, strerror(errno));
  else if (fsync(fd) != 0) s = ot_error(OT_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && s == OT_OK) s = ot_error(OT_EIO, "%s: close failed: %s", tmp, strerror(errno));
  if (s == OT_OK && rename(tmp, path) != 0)
    s = ot_error(OT_EIO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
  if (s != OT_OK) unlink(tmp);
  else fsync_dir(path);
  ot_mem_free(buf);
  return s;
}
