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

static void fmt_num(char *buf, size_t cap, const ot_json *v) {
  if (v->type != OT_JNUM) snprintf(buf, cap, "a %s", ot_json_type_name(v->type));
  else if (v->is_int) snprintf(buf, cap, "%lld", (long long)v->i);
  else snprintf(buf, cap, "%.17g", v->d);
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
    return ot_error(OT_EFORMAT, "%s: tensor '%s': entry is a %s, not an object", nm, key,
                    ot_json_type_name(e->type));
  const ot_json *dt = ot_json_get(e, "dtype"), *sh = ot_json_get(e, "shape"),
                *of = ot_json_get(e, "data_offsets");
  if (!dt || !sh || !of)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': missing \"%s\"", nm, key,
                    !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  // dtype
  if (dt->type != OT_JSTR)
    return ot_error(OT_EFORMAT, "%s: tensor '%s': \"dtype\" is a %s, not a string", nm, key,
                    ot_json_type_name(dt->type));
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
    return ot_error(OT_EFORMAT, "%s: tensor '%s': \"shape\" is a %s, not an array", nm, key,
                    ot_json_type_name(sh->type));
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
    return ot_error(OT_EFORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end], got %s%s "
                    "of %d", nm, key, of->type == OT_JARR ? "an " : "a ",
                    ot_json_type_name(of->type), of->type == OT_JARR ? of->n : 1);
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
    return ot_error(OT_EFORMAT, "%s: __metadata__ is a %s, not an object", f->name,
                    ot_json_type_name(m->type));
  for (const ot_json *v = m->first; v; v = v->next) {
    if (strlen(v->key) != v->key_len)
      return ot_error(OT_EFORMAT, "%s: __metadata__ key '%s...' contains a NUL character", f->name, v->key);
    if (v->type != OT_JSTR)
      return ot_error(OT_EFORMAT, "%s: __metadata__ value of key '%s' is a %s, not a string",
                      f->name, v->key, ot_json_type_name(v->type));
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
  // f->t's block start is the allocation (freed in close) - keep blk reachable via ent? No:
  // store the block pointer in f->copy's sibling: we free `blk` through f->t's offset.
  ot_status s = OT_OK;
  int k = 0;
  for (const ot_json *e = root->first; e && s == OT_OK; e = e->next) {
    if (strlen(e->key) != e->key_len)
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
  if (s != OT_OK) { ot_mem_free(blk); f->t = NULL; return s; }

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
    if (!c) { ot_mem_free(blk); f->t = NULL; f->n = 0; return ot_error(OT_ENOMEM, "%s: out of memory", nm); }
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
  f->t = (ot_st_tensor *)f->t;
  // remember the block start (ent) for close: it's at a fixed offset before f->t
  return OT_OK;
}
