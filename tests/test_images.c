// Image sets (ot/data.h): the bundled digits, the array file round trip, PGM /
// PPM list files, normalization, the random resized crop and flip (deterministic
// by seed and counter), epoch orders, and every refusal naming the file.
#include "harness.h"
#include <unistd.h>

static char g_dir[256];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

static void write_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

static void test_digits(void) {
  ot_images *tr = NULL, *ho = NULL;
  th_check(ot_images_load(&tr, "data/digits/train.otimg", 1, 10) == OT_OK, "load train: %s", ot_last_error());
  th_check(ot_images_load(&ho, "data/digits/heldout.otimg", 1, 10) == OT_OK, "load heldout: %s", ot_last_error());
  if (!tr || !ho) { ot_images_free(tr); ot_images_free(ho); return; }
  th_check(tr->n == 1500 && ho->n == 297 && tr->h == 8 && tr->w == 8 && tr->c == 1 &&
           tr->maxval == 16 && tr->classes == 10, "digits: 1500 + 297 images of 8x8x1, maxval 16");
  int cnt[10] = {0};
  for (int i = 0; i < ho->n; i++) cnt[ho->labels[i]]++;
  bool all = true;
  for (int k = 0; k < 10; k++) all = all && cnt[k] > 10;
  th_check(all, "every class is in the held-out split");
  // no augmentation, same size: exactly (pixel / 16 - mean) / std
  ot_image_aug a = {8, 8, {0.5f}, {0.25f}, false, 1.0f, false};
  int64_t idx[2] = {3, 1499};
  float x[2 * 64];
  int32_t lab[2];
  th_check(ot_images_batch(tr, &a, idx, 2, 1, 0, x, lab) == OT_OK, "batch");
  bool exact = lab[0] == tr->labels[3] && lab[1] == tr->labels[1499];
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < 64; p++)
      exact = exact && x[k * 64 + p] == (tr->pix[(size_t)idx[k] * 64 + p] / 16.0f - 0.5f) / 0.25f;
  th_check(exact, "plain batch = normalized pixels and labels");
  // crop of the whole image (crop_min 1 and ratio 1 fit only as the whole image
  // when square) with flip: either the image or its mirror
  ot_image_aug f = a;
  f.flip = true;
  int mirrored = 0, same = 0;
  for (uint64_t c = 0; c < 16; c++) {
    th_check(ot_images_batch(tr, &f, idx, 1, 5, c, x, lab) == OT_OK, "flip batch");
    bool m = true, s = true;
    for (int y = 0; y < 8; y++)
      for (int xx = 0; xx < 8; xx++) {
        const float v = (tr->pix[3 * 64 + y * 8 + xx] / 16.0f - 0.5f) / 0.25f;
        s = s && x[y * 8 + xx] == v;
        m = m && x[y * 8 + 7 - xx] == v;
      }
    mirrored += m && !s;
    same += s;
  }
  th_check(mirrored > 0 && same > 0 && mirrored + same == 16, "flip: %d mirrored, %d as is", mirrored, same);
  // random resized crop to 16x16: deterministic by (seed, counter), varies with the counter
  ot_image_aug r = {16, 16, {0.5f}, {0.25f}, true, 0.3f, true};
  float *p1 = th_falloc(4 * 256), *p2 = th_falloc(4 * 256), *p3 = th_falloc(4 * 256);
  int64_t i4[4] = {0, 1, 2, 3};
  ot_images_batch(tr, &r, i4, 4, 9, 100, p1, NULL);
  ot_images_batch(tr, &r, i4, 4, 9, 100, p2, NULL);
  ot_images_batch(tr, &r, i4, 4, 9, 104, p3, NULL);
  th_check(memcmp(p1, p2, 4 * 256 * 4) == 0, "augmentation deterministic by (seed, counter)");
  th_check(memcmp(p1, p3, 4 * 256 * 4) != 0, "augmentation differs with the counter");
  // image k of a batch at counter c = image 0 of a batch at counter c + k (resumable)
  ot_images_batch(tr, &r, i4 + 2, 1, 9, 102, p3, NULL);
  th_check(memcmp(p1 + 2 * 256, p3, 256 * 4) == 0, "image k of a batch draws at counter + k");
  bool range = true;
  for (int i = 0; i < 4 * 256; i++) range = range && p1[i] >= -2.0f - 1e-5f && p1[i] <= 2.0f + 1e-5f;
  th_check(range, "bilinear values stay inside the pixel range");
  free(p1); free(p2); free(p3);
  // orders: permutations, different per epoch, identity without shuffle
  int64_t o1[100], o2[100];
  ot_images_order(o1, 100, true, 3, 0);
  ot_images_order(o2, 100, true, 3, 1);
  int seen[100] = {0}, diff = 0;
  for (int i = 0; i < 100; i++) { seen[o1[i]]++; diff += o1[i] != o2[i]; }
  bool perm = true;
  for (int i = 0; i < 100; i++) perm = perm && seen[i] == 1;
  th_check(perm && diff > 50, "epoch orders are permutations that change per epoch");
  ot_images_order(o1, 100, false, 3, 7);
  th_check(o1[0] == 0 && o1[99] == 99, "no shuffle: file order");
  // round trip through our writer
  char p[512];
  path_in(p, sizeof p, "rt.otimg");
  th_check(ot_images_save(ho, p) == OT_OK, "save: %s", ot_last_error());
  ot_images *back = NULL;
  th_check(ot_images_load(&back, p, 0, 0) == OT_OK, "reload");
  th_check(back && back->n == ho->n && memcmp(back->pix, ho->pix, (size_t)ho->n * 64) == 0 &&
           memcmp(back->labels, ho->labels, (size_t)ho->n * 4) == 0, "array file round trip");
  ot_images_free(back);
  ot_images_free(tr);
  ot_images_free(ho);
}

static void write_pnm(const char *path, const char *magic, int w, int h, int c, int maxval, int fill) {
  char hdr[64];
  int k = snprintf(hdr, sizeof hdr, "%s\n# comment\n%d %d\n%d\n", magic, w, h, maxval);
  uint8_t *b = malloc((size_t)k + (size_t)w * h * c);
  memcpy(b, hdr, (size_t)k);
  for (int i = 0; i < w * h * c; i++) b[k + i] = (uint8_t)((fill + i) % (maxval + 1));
  write_bytes(path, b, (size_t)k + (size_t)w * h * c);
  free(b);
}

static void test_list(void) {
  char a[512], b[512], l[512];
  path_in(a, sizeof a, "a.ppm");
  path_in(b, sizeof b, "b.ppm");
  path_in(l, sizeof l, "list.txt");
  write_pnm(a, "P6", 5, 3, 3, 255, 0);
  write_pnm(b, "P6", 5, 3, 3, 255, 7);
  const char *list = "# name label\na.ppm 2\n\nb.ppm 0\n";
  write_bytes(l, list, strlen(list));
  ot_images *s = NULL;
  th_check(ot_images_load(&s, l, 3, 0) == OT_OK, "list load: %s", ot_last_error());
  th_check(s && s->n == 2 && s->w == 5 && s->h == 3 && s->c == 3 && s->classes == 3 &&
           s->labels[0] == 2 && s->labels[1] == 0 && s->pix[15 * 3 + 1] == 7 + 1, "list of PPMs");
  ot_images_free(s);
  // wrong channel count, label out of range, mixed sizes, truncated image, bad list line
  s = NULL;
  th_check_error(ot_images_load(&s, l, 1, 0), OT_EFORMAT, "the model takes 1", "channels");
  th_check_error(ot_images_load(&s, l, 3, 2), OT_EFORMAT, "label 2 of image 0", "label range");
  write_pnm(b, "P5", 5, 3, 1, 255, 0);
  th_check_error(ot_images_load(&s, l, 0, 0), OT_EFORMAT, "b.ppm", "mixed channel counts");
  write_bytes(b, "P6\n5 3\n255\n\1\2", 13);
  th_check_error(ot_images_load(&s, l, 0, 0), OT_EFORMAT, "truncated", "truncated PPM");
  write_bytes(b, "\x89PNG\r\n\x1a\n", 8);
  th_check_error(ot_images_load(&s, l, 0, 0), OT_EFORMAT, "P5 nor P6", "a PNG");
  write_bytes(l, "a.ppm two\n", 10);
  th_check_error(ot_images_load(&s, l, 0, 0), OT_EFORMAT, "list.txt:1", "bad label");
  path_in(l, sizeof l, "missing.txt");
  th_check_error(ot_images_load(&s, l, 0, 0), OT_EIO, "missing.txt", "missing file");
  th_check(s == NULL, "refusals leave *out NULL");
}

static void test_bad_array(void) {
  uint8_t b[32 + 4 + 2] = "OTIMG01\n";
  const uint32_t hd[6] = {1, 2, 2, 1, 3, 16};
  for (int k = 0; k < 6; k++)
    for (int j = 0; j < 4; j++) b[8 + 4 * k + j] = (uint8_t)(hd[k] >> (8 * j));
  b[32] = 16; b[36] = 2;
  char p[512];
  path_in(p, sizeof p, "x.otimg");
  ot_images *s = NULL;
  write_bytes(p, b, sizeof b);
  th_check(ot_images_load(&s, p, 1, 3) == OT_OK, "minimal array file: %s", ot_last_error());
  ot_images_free(s);
  s = NULL;
  write_bytes(p, b, sizeof b - 1);
  th_check_error(ot_images_load(&s, p, 0, 0), OT_EFORMAT, "truncated", "truncated array file");
  b[36] = 3;
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 0, 0), OT_EFORMAT, "label 3 of image 0", "label >= classes");
  b[36] = 2;
  b[33] = 17;
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 0, 0), OT_EFORMAT, "above maxval", "pixel > maxval");
  b[33] = 0;
  b[20] = 2;
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 0, 0), OT_EFORMAT, "2 channels", "2 channels");
  b[20] = 1;
  b[6] = '2';
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 0, 0), OT_EFORMAT, "version", "future version");
  b[6] = '1';
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 1, 2), OT_EFORMAT, "label 2 of image 0 is outside the model's 2",
                 "a label beyond the model's classes");
  b[36] = 1;
  write_bytes(p, b, sizeof b);
  th_check_error(ot_images_load(&s, p, 1, 2), OT_EFORMAT, "3 classes, the model 2", "more classes than the model");
  ot_image_aug a = {0, 8, {0}, {1}, false, 1, false};
  int64_t idx = 0;
  float x[64];
  ot_images *d = NULL;
  ot_images_load(&d, "data/digits/heldout.otimg", 1, 10);
  th_check_error(ot_images_batch(d, &a, &idx, 1, 0, 0, x, NULL), OT_EINVAL, "output size", "zero size");
  a.out_h = 8;
  a.std[0] = 0;
  th_check_error(ot_images_batch(d, &a, &idx, 1, 0, 0, x, NULL), OT_EINVAL, "std[0]", "zero std");
  a.std[0] = 1;
  idx = 297;
  th_check_error(ot_images_batch(d, &a, &idx, 1, 0, 0, x, NULL), OT_EINVAL, "index 297", "bad index");
  ot_images_free(d);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s/ot_test_images_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
  if (system(cmd) != 0) return 1;
  const size_t m0 = ot_mem_current(OT_MEM_OTHER);
  test_digits();
  test_list();
  test_bad_array();
  th_check(ot_mem_current(OT_MEM_OTHER) == m0, "tracked memory back to its start");
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) return 1;
  return th_finish();
}
