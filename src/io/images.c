// Labelled image sets: the image array file ("otimg", see ot/data.h), binary
// PGM / PPM files through a list file, and the array writer. Every defect is
// refused with the file's name and the problem; memory is tracked (OT_MEM_OTHER).
#include "ot/data.h"
#include "io/files.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define IMG_MAGIC "OTIMG01\n"
#define IMG_HEADER 32
#define IMG_MAX_BYTES ((size_t)1 << 34)

void ot_images_free(ot_images *s) {
  if (!s) return;
  ot_mem_free(s->pix);
  ot_mem_free(s->labels);
  ot_mem_free(s);
}

// A whole binary file into a tracked buffer.
static ot_status read_bin(const char *path, uint8_t **out, size_t *len) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ot_error(OT_EIO, "%s: cannot open (%s)", path, strerror(errno));
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return ot_error(OT_EIO, "%s: cannot read its size (not a regular file?)", path);
  }
  if ((size_t)n > IMG_MAX_BYTES) {
    fclose(f);
    return ot_error(OT_EFORMAT, "%s: %ld bytes is over the 16 GiB limit of an image file", path, n);
  }
  uint8_t *b = ot_mem_alloc((size_t)n + 1, OT_MEM_OTHER);
  if (!b) { fclose(f); return OT_ENOMEM; }
  const size_t k = fread(b, 1, (size_t)n, f);
  fclose(f);
  if (k != (size_t)n) {
    ot_mem_free(b);
    return ot_error(OT_EIO, "%s: short read (%zu of %ld bytes)", path, k, n);
  }
  *out = b;
  *len = (size_t)n;
  return OT_OK;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static ot_status alloc_set(ot_images **out, int n, int h, int w, int c) {
  ot_images *s = ot_mem_alloc(sizeof *s, OT_MEM_OTHER);
  if (!s) return OT_ENOMEM;
  memset(s, 0, sizeof *s);
  s->n = n; s->h = h; s->w = w; s->c = c;
  s->pix = ot_mem_alloc((size_t)n * h * w * c, OT_MEM_OTHER);
  s->labels = ot_mem_alloc((size_t)n * sizeof(int32_t), OT_MEM_OTHER);
  if (!s->pix || !s->labels) { ot_images_free(s); return OT_ENOMEM; }
  *out = s;
  return OT_OK;
}

// The array file in b[0, len).
static ot_status parse_array(ot_images **out, const char *path, const uint8_t *b, size_t len) {
  if (len < IMG_HEADER)
    return ot_error(OT_EFORMAT, "%s: %zu bytes is shorter than the 32-byte image file header", path, len);
  const uint32_t n = le32(b + 8), h = le32(b + 12), w = le32(b + 16), c = le32(b + 20);
  const uint32_t classes = le32(b + 24), maxval = le32(b + 28);
  if (n < 1 || n > (1u << 30) || h < 1 || h > 65536 || w < 1 || w > 65536)
    return ot_error(OT_EFORMAT, "%s: header n=%u, h=%u, w=%u out of range (n in [1, 2^30], sides in "
                    "[1, 65536])", path, n, h, w);
  if (c != 1 && c != 3)
    return ot_error(OT_EFORMAT, "%s: %u channels per pixel (image files hold 1 or 3)", path, c);
  if (classes < 1 || classes > 65536 || maxval < 1 || maxval > 255)
    return ot_error(OT_EFORMAT, "%s: classes=%u (want [1, 65536]) or maxval=%u (want [1, 255]) out of "
                    "range", path, classes, maxval);
  const size_t npix = (size_t)n * h * w * c, want = IMG_HEADER + npix + 2 * (size_t)n;
  if (npix > IMG_MAX_BYTES || len != want)
    return ot_error(OT_EFORMAT, "%s: %zu bytes, but the header (%u images of %ux%ux%u) needs exactly "
                    "%zu (truncated or corrupt file)", path, len, n, h, w, c, want);
  ot_images *s = NULL;
  OT_TRY(alloc_set(&s, (int)n, (int)h, (int)w, (int)c));
  s->classes = (int)classes;
  s->maxval = (int)maxval;
  memcpy(s->pix, b + IMG_HEADER, npix);
  for (size_t i = 0; i < npix; i++)
    if (s->pix[i] > maxval) {
      ot_images_free(s);
      return ot_error(OT_EFORMAT, "%s: image %zu has pixel value %d above maxval %u", path,
                      i / ((size_t)h * w * c), b[IMG_HEADER + i], maxval);
    }
  const uint8_t *lb = b + IMG_HEADER + npix;
  for (uint32_t i = 0; i < n; i++) {
    s->labels[i] = (int32_t)(lb[2 * i] | lb[2 * i + 1] << 8);
    if (s->labels[i] >= (int32_t)classes) {
      const int v = s->labels[i];
      ot_images_free(s);
      return ot_error(OT_EFORMAT, "%s: label %d of image %u is outside [0, classes=%u)", path, v, i,
                      classes);
    }
  }
  *out = s;
  return OT_OK;
}

// PNM header token: skips whitespace and # comments, reads a decimal number.
static bool pnm_num(const uint8_t *b, size_t len, size_t *pos, int *v) {
  size_t p = *pos;
  for (;;) {
    while (p < len && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r')) p++;
    if (p < len && b[p] == '#') {
      while (p < len && b[p] != '\n') p++;
      continue;
    }
    break;
  }
  long x = 0;
  size_t s = p;
  while (p < len && b[p] >= '0' && b[p] <= '9' && p - s < 9) x = x * 10 + (b[p++] - '0');
  if (p == s) return false;
  *v = (int)x;
  *pos = p;
  return true;
}

static ot_status parse_pnm(const char *path, const uint8_t *b, size_t len, uint8_t **pix, int *h,
                           int *w, int *c, int *maxval) {
  *pix = NULL;
  if (len < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6'))
    return ot_error(OT_EFORMAT, "%s: not a binary PGM/PPM image (starts with neither P5 nor P6; convert "
                    "PNG/JPEG files with e.g. `convert in.png out.ppm`)", path);
  size_t p = 2;
  int W = 0, H = 0, M = 0;
  if (!pnm_num(b, len, &p, &W) || !pnm_num(b, len, &p, &H) || !pnm_num(b, len, &p, &M) || p >= len)
    return ot_error(OT_EFORMAT, "%s: truncated or corrupt PNM header", path);
  p++;   // the single whitespace byte before the pixels
  if (W < 1 || H < 1 || W > 65536 || H > 65536 || M < 1 || M > 255)
    return ot_error(OT_EFORMAT, "%s: %dx%d with maxval %d unsupported (sides in [1, 65536], maxval in "
                    "[1, 255]: 8-bit images)", path, W, H, M);
  const int C = b[1] == '6' ? 3 : 1;
  const size_t n = (size_t)W * H * C;
  if (len - p < n)
    return ot_error(OT_EFORMAT, "%s: truncated: %zu pixel bytes for a %dx%dx%d image (%zu)", path,
                    len - p, W, H, C, n);
  uint8_t *o = ot_mem_alloc(n, OT_MEM_OTHER);
  if (!o) return OT_ENOMEM;
  memcpy(o, b + p, n);
  for (size_t i = 0; i < n; i++)
    if (o[i] > M) {
      ot_mem_free(o);
      return ot_error(OT_EFORMAT, "%s: pixel value %d above maxval %d", path, b[p + i], M);
    }
  *pix = o; *h = H; *w = W; *c = C; *maxval = M;
  return OT_OK;
}

ot_status ot_image_read_pnm(const char *path, uint8_t **pix, int *h, int *w, int *c, int *maxval) {
  static const char fn[] = "ot_image_read_pnm";
  OT_CHECK_PTR(path, fn);
  OT_CHECK_PTR(pix, fn);
  uint8_t *b = NULL;
  size_t len = 0;
  OT_TRY(read_bin(path, &b, &len));
  ot_status s = parse_pnm(path, b, len, pix, h, w, c, maxval);
  ot_mem_free(b);
  return s;
}

// The list file in text[0, len) (NUL-terminated).
static ot_status parse_list(ot_images **out, const char *path, char *text) {
  char dir[OT_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) slash[1] = '\0'; else dir[0] = '\0';
  int n = 0;
  for (char *q = text; *q; q++) n += *q == '\n';
  n += 1;
  char **names = calloc((size_t)n, sizeof *names);
  int32_t *labs = calloc((size_t)n, sizeof *labs);
  if (!names || !labs) { free(names); free(labs); return ot_error(OT_ENOMEM, "%s: out of memory", path); }
  int cnt = 0, line = 0;
  ot_status s = OT_OK;
  for (char *q = text; *q && s == OT_OK;) {
    char *e = strchr(q, '\n');
    if (e) *e = '\0';
    line++;
    while (*q == ' ' || *q == '\t') q++;
    size_t L = strlen(q);
    while (L && (q[L - 1] == '\r' || q[L - 1] == ' ' || q[L - 1] == '\t')) q[--L] = '\0';
    if (L && q[0] != '#') {
      char *sp = strrchr(q, ' ');
      if (!sp) sp = strrchr(q, '\t');
      char *end = NULL;
      long v = sp ? strtol(sp + 1, &end, 10) : -1;
      if (!sp || !end || *end || end == sp + 1)
        s = ot_error(OT_EFORMAT, "%s:%d: expected '<image path> <label>'", path, line);
      else if (v < 0 || v > 65535)
        s = ot_error(OT_EFORMAT, "%s:%d: label %ld is outside [0, 65535]", path, line, v);
      else {
        *sp = '\0';
        names[cnt] = q;
        labs[cnt++] = (int32_t)v;
      }
    }
    if (!e) break;
    q = e + 1;
  }
  if (s == OT_OK && cnt == 0) s = ot_error(OT_EFORMAT, "%s: lists no image", path);
  ot_images *set = NULL;
  for (int i = 0; i < cnt && s == OT_OK; i++) {
    char p2[OT_PATH_MAX];
    if (names[i][0] == '/') snprintf(p2, sizeof p2, "%s", names[i]);
    else if (snprintf(p2, sizeof p2, "%s%s", dir, names[i]) >= (int)sizeof p2) {
      s = ot_error(OT_EINVAL, "%s: path of image %d too long", path, i);
      break;
    }
    uint8_t *px = NULL;
    int h, w, c, mv;
    s = ot_image_read_pnm(p2, &px, &h, &w, &c, &mv);
    if (s != OT_OK) break;
    if (!set) {
      s = alloc_set(&set, cnt, h, w, c);
      if (s == OT_OK) set->maxval = 255;
    } else if (h != set->h || w != set->w || c != set->c) {
      s = ot_error(OT_EFORMAT, "%s: %dx%d with %d channels, but %s's first image is %dx%d with %d "
                   "(resize the images to one size)", p2, w, h, c, path, set->w, set->h, set->c);
    }
    if (s == OT_OK) {   // to the common scale 0..255
      const size_t np = (size_t)h * w * c;
      for (size_t k = 0; k < np; k++)
        set->pix[(size_t)i * np + k] = (uint8_t)((px[k] * 255 + mv / 2) / mv);
      set->labels[i] = labs[i];
      if (labs[i] + 1 > set->classes) set->classes = labs[i] + 1;
    }
    ot_mem_free(px);
  }
  free(names);
  free(labs);
  if (s != OT_OK) { ot_images_free(set); return s; }
  *out = set;
  return OT_OK;
}

ot_status ot_images_load(ot_images **out, const char *path, int channels, int classes) {
  static const char fn[] = "ot_images_load";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(path, fn);
  uint8_t *b = NULL;
  size_t len = 0;
  OT_TRY(read_bin(path, &b, &len));
  b[len] = 0;
  ot_images *s = NULL;
  ot_status st;
  if (len >= 8 && memcmp(b, IMG_MAGIC, 8) == 0) st = parse_array(&s, path, b, len);
  else if (len >= 5 && memcmp(b, "OTIMG", 5) == 0)
    st = ot_error(OT_EFORMAT, "%s: image file version '%.8s' unsupported (this build reads OTIMG01)",
                  path, (const char *)b);
  else if (memchr(b, 0, len))
    st = ot_error(OT_EFORMAT, "%s: neither an image file (magic OTIMG01) nor a text list of "
                  "'<image> <label>' lines", path);
  else st = parse_list(&s, path, (char *)b);
  ot_mem_free(b);
  OT_TRY(st);
  if (channels > 0 && s->c != channels) {
    st = ot_error(OT_EFORMAT, "%s: images have %d channel%s, the model takes %d", path, s->c,
                  s->c == 1 ? "" : "s", channels);
  } else if (classes > 0) {
    if (s->classes > classes) {
      for (int i = 0; i < s->n; i++)
        if (s->labels[i] >= classes) {
          st = ot_error(OT_EFORMAT, "%s: label %d of image %d is outside the model's %d classes",
                        path, s->labels[i], i, classes);
          break;
        }
      if (st == OT_OK)
        st = ot_error(OT_EFORMAT, "%s: the file has %d classes, the model %d", path, s->classes,
                      classes);
    }
    s->classes = classes;
  }
  if (st != OT_OK) { ot_images_free(s); return st; }
  *out = s;
  return OT_OK;
}

ot_status ot_images_save(const ot_images *s, const char *path) {
  static const char fn[] = "ot_images_save";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(path, fn);
  if (s->n < 1 || s->h < 1 || s->w < 1 || (s->c != 1 && s->c != 3) || s->classes < 1 ||
      s->classes > 65536 || s->maxval < 1 || s->maxval > 255 || !s->pix || !s->labels)
    return ot_error(OT_EINVAL, "%s: inconsistent image set (n=%d, %dx%dx%d, classes=%d, maxval=%d)",
                    fn, s->n, s->h, s->w, s->c, s->classes, s->maxval);
  const size_t npix = (size_t)s->n * s->h * s->w * s->c, len = IMG_HEADER + npix + 2 * (size_t)s->n;
  uint8_t *b = ot_mem_alloc(len, OT_MEM_OTHER);
  if (!b) return OT_ENOMEM;
  memcpy(b, IMG_MAGIC, 8);
  const uint32_t hd[6] = {(uint32_t)s->n, (uint32_t)s->h, (uint32_t)s->w, (uint32_t)s->c,
                          (uint32_t)s->classes, (uint32_t)s->maxval};
  for (int k = 0; k < 6; k++)
    for (int j = 0; j < 4; j++) b[8 + 4 * k + j] = (uint8_t)(hd[k] >> (8 * j));
  memcpy(b + IMG_HEADER, s->pix, npix);
  ot_status st = OT_OK;
  for (int i = 0; i < s->n && st == OT_OK; i++) {
    if (s->labels[i] < 0 || s->labels[i] >= s->classes || s->labels[i] > 65535)
      st = ot_error(OT_EINVAL, "%s: label %d of image %d outside [0, %d)", fn, s->labels[i], i,
                    s->classes);
    b[IMG_HEADER + npix + 2 * (size_t)i] = (uint8_t)(s->labels[i] & 255);
    b[IMG_HEADER + npix + 2 * (size_t)i + 1] = (uint8_t)(s->labels[i] >> 8);
  }
  if (st == OT_OK) st = ot__write_atomic(path, b, len);
  ot_mem_free(b);
  return st;
}
