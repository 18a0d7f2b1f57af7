// libFuzzer target: the safetensors reader, from memory (ot_st_open_mem) and
// from a file (ot_st_open over a memfd). Invariants: both agree; an accepted
// image round-trips through ot_st_write (same tensors, bytes and metadata);
// a refused one names its defect; tracked memory returns to its start.
#include "fuzz_common.h"
#include <string.h>

// a and b hold the same tensors (same order, dtype, shape, bytes) and metadata.
static void same_files(const ot_st_file *a, const ot_st_file *b) {
  FZ_CHECK(ot_st_count(a) == ot_st_count(b), "tensor count %d vs %d", ot_st_count(a), ot_st_count(b));
  for (int i = 0; i < ot_st_count(a); i++) {
    const ot_st_tensor *x = ot_st_get(a, i), *y = ot_st_find(b, x->name);
    FZ_CHECK(y && x->dtype == y->dtype && x->ndim == y->ndim && x->nbytes == y->nbytes,
             "tensor '%s' differs after the round trip", x->name);
    for (int d = 0; d < x->ndim; d++) FZ_CHECK(x->shape[d] == y->shape[d], "'%s' shape differs", x->name);
    FZ_CHECK(x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0, "'%s' bytes differ", x->name);
  }
  FZ_CHECK(ot_st_meta_count(a) == ot_st_meta_count(b), "metadata count differs");
  for (int i = 0; i < ot_st_meta_count(a); i++) {
    const char *v;
    const char *k = ot_st_meta_at(a, i, &v);
    const char *w = ot_st_meta(b, k);
    FZ_CHECK(w && strcmp(v, w) == 0, "metadata '%s' differs", k);
  }
}

static void round_trip(const ot_st_file *f) {
  const int n = ot_st_count(f), nm = ot_st_meta_count(f);
  ot_st_tensor t[n > 0 ? n : 1];
  const char *k[nm > 0 ? nm : 1], *v[nm > 0 ? nm : 1];
  for (int i = 0; i < n; i++) t[i] = *ot_st_get(f, i);
  for (int i = 0; i < nm; i++) k[i] = ot_st_meta_at(f, i, &v[i]);
  char path[600];
  fz_scratch(path, sizeof path, "rt.safetensors");
  ot_status s = ot_st_write(path, t, n, k, v, nm);
  FZ_CHECK(s == OT_OK, "an accepted file does not write back: %s", ot_last_error());
  ot_st_file *g = NULL;
  s = ot_st_open(&g, path);
  FZ_CHECK(s == OT_OK, "what we wrote does not read back: %s", ot_last_error());
  same_files(f, g);
  ot_st_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  ot_st_file *f = NULL, *g = NULL;
  ot_status s = ot_st_open_mem(&f, data, size, "fuzz");
  char path[64];
  int fd = fz_memfile(data, size, path, sizeof path);
  ot_status s2 = ot_st_open(&g, path);
  FZ_CHECK((s == OT_OK) == (s2 == OT_OK), "memory (%d) and file (%d) readers disagree", (int)s, (int)s2);
  if (s == OT_OK) {
    same_files(f, g);
    round_trip(f);
  } else {
    fz_refused(s2, "ot_st_open");
    s = ot_st_open_mem(&f, data, size, "fuzz");
    fz_refused(s, "ot_st_open_mem");
    FZ_CHECK(f == NULL, "*out is not NULL on failure");
  }
  ot_st_close(f);
  ot_st_close(g);
  fz_close(fd);
  fz_mem_back(mem0, "safetensors");
  return 0;
}
