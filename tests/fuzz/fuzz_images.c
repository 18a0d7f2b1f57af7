// libFuzzer target: image files (ot_images_load on the array format or a list
// file; ot_image_read_pnm). Input: one byte of settings (bit 0: read as a PNM,
// bits 1-2: channels asked for, bits 3-4: classes asked for), then the file.
// Invariants: an accepted array file is written back by ot_images_save byte for
// byte; every accepted set's labels are in range and its pixels <= maxval; a
// batch with augmentation over an accepted set succeeds; a refusal has a
// message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_set(const ot_images *s, const uint8_t *file, size_t n) {
  const size_t np = (size_t)s->n * s->h * s->w * s->c;
  for (int i = 0; i < s->n; i++) FZ_CHECK(s->labels[i] >= 0 && s->labels[i] < s->classes, "label range");
  for (size_t i = 0; i < np; i++) FZ_CHECK(s->pix[i] <= s->maxval, "pixel above maxval");
  char path[600];
  fz_scratch(path, sizeof path, "rt.otimg");
  FZ_CHECK(ot_images_save(s, path) == OT_OK, "an accepted set does not write back: %s", ot_last_error());
  if (n >= 8 && memcmp(file, "OTIMG01\n", 8) == 0) {
    FILE *g = fopen(path, "rb");
    FZ_CHECK(g != NULL, "cannot reopen %s", path);
    uint8_t *back = malloc(n + 1);
    const size_t k = fread(back, 1, n + 1, g);
    fclose(g);
    FZ_CHECK(k == n && memcmp(back, file, n) == 0, "the rewritten file differs (%zu vs %zu bytes)", k, n);
    free(back);
  }
  ot_image_aug a = {3, 5, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}, true, 0.1f, true};
  int64_t idx[2] = {0, s->n - 1};
  float *x = ot_mem_alloc(2 * 3 * 15 * sizeof(float), OT_MEM_OTHER);
  int32_t lab[2];
  FZ_CHECK(ot_images_batch(s, &a, idx, 2, 1, 2, x, lab) == OT_OK, "batch: %s", ot_last_error());
  ot_mem_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  const uint8_t flags = size ? data[0] : 0;
  const uint8_t *file = size ? data + 1 : data;
  const size_t n = size ? size - 1 : 0;
  char path[64];
  int fd = fz_memfile(file, n, path, sizeof path);
  if (flags & 1) {
    uint8_t *pix = NULL;
    int h, w, c, mv;
    ot_status s = ot_image_read_pnm(path, &pix, &h, &w, &c, &mv);
    if (s == OT_OK) {
      for (size_t i = 0; i < (size_t)h * w * c; i++) FZ_CHECK(pix[i] <= mv, "pnm pixel above maxval");
      ot_mem_free(pix);
    } else {
      fz_refused(s, "ot_image_read_pnm");
    }
  } else {
    static const int ch[4] = {0, 1, 3, 2}, cl[4] = {0, 1, 10, 65536};
    ot_images *s = NULL;
    ot_status st = ot_images_load(&s, path, ch[flags >> 1 & 3], cl[flags >> 3 & 3]);
    if (st == OT_OK) {
      check_set(s, file, (flags >> 3 & 3) ? 0 : n);
      ot_images_free(s);
    } else {
      fz_refused(st, "ot_images_load");
    }
  }
  fz_close(fd);
  fz_mem_back(mem0, "images");
  return 0;
}
