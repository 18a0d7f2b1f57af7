// ot_bleu_add_files: a hypothesis file (or standard input) and its reference
// files, read whole, split into lines at '\n' as sacreBLEU reads them (a last
// line without '\n' counts; a final '\n' adds no empty line), checked (line
// counts, UTF-8) before any segment is added.
#include "bleu_impl.h"
#include <errno.h>
#include <stdio.h>

typedef struct { char *text; size_t len; size_t nlines; const char *name; } tfile;

static ot_status read_stdin(tfile *f) {
  size_t cap = 0;
  f->text = NULL;
  f->len = 0;
  for (;;) {
    OT_TRY(ot__grow((void **)&f->text, &cap, f->len + 65536 + 1, 1));
    size_t got = fread(f->text + f->len, 1, 65536, stdin);
    f->len += got;
    if (got < 65536) {
      if (ferror(stdin)) return ot_error(OT_EIO, "ot_bleu_add_files: reading standard input: %s",
                                         strerror(errno));
      break;
    }
  }
  f->text[f->len] = '\0';
  return OT_OK;
}

static size_t count_lines(const char *t, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += t[i] == '\n';
  return k + (n > 0 && t[n - 1] != '\n');
}

// The next line of f at *pos: start, length (without '\n'); advances *pos.
static const char *next_line(const tfile *f, size_t *pos, size_t *len) {
  const char *s = f->text + *pos, *e = memchr(s, '\n', f->len - *pos);
  *len = e ? (size_t)(e - s) : f->len - *pos;
  *pos += *len + (e ? 1 : 0);
  return s;
}

// Checks every line of f for UTF-8; the error names file:line and the byte.
static ot_status check_utf8(const tfile *f) {
  size_t pos = 0, len;
  for (size_t l = 1; l <= f->nlines; l++) {
    const char *s = next_line(f, &pos, &len);
    size_t bad = ot__utf8_check(s, len);
    if (bad < len)
      return ot_error(OT_EFORMAT, "ot_bleu_add_files: %s:%zu: invalid UTF-8 at column %zu (byte "
                      "0x%02x); convert the file to UTF-8 (e.g. iconv)", f->name, l, bad + 1,
                      (unsigned)(uint8_t)s[bad]);
  }
  return OT_OK;
}

ot_status ot_bleu_add_files(ot_bleu *b, const char *hyp_path, const char *const *ref_paths,
                            int nrefs) {
  static const char fn[] = "ot_bleu_add_files";
  OT_CHECK_PTR(b, fn);
  OT_CHECK_PTR(hyp_path, fn);
  OT_CHECK_PTR(ref_paths, fn);
  if (nrefs < 1 || nrefs > 64)
    return ot_error(OT_EINVAL, "%s: nrefs=%d must be in [1, 64] (one file per reference)", fn,
                    nrefs);
  tfile f[65] = {{0}};
  ot_status st = OT_OK;
  for (int k = 0; k <= nrefs && st == OT_OK; k++) {
    const char *p = k == 0 ? hyp_path : ref_paths[k - 1];
    if (!p) { st = ot_error(OT_EINVAL, "%s: reference path %d is NULL", fn, k); break; }
    f[k].name = strcmp(p, "-") == 0 && k == 0 ? "<stdin>" : p;
    st = k == 0 && strcmp(p, "-") == 0 ? read_stdin(&f[k]) : ot__read_file(p, &f[k].text, &f[k].len);
    if (st == OT_OK) f[k].nlines = count_lines(f[k].text, f[k].len);
  }
  for (int k = 1; k <= nrefs && st == OT_OK; k++)
    if (f[k].nlines != f[0].nlines)
      st = ot_error(OT_EFORMAT, "%s: %s has %zu lines but the hypothesis %s has %zu; every "
                    "reference file needs one line per hypothesis line", fn, f[k].name,
                    f[k].nlines, f[0].name, f[0].nlines);
  for (int k = 0; k <= nrefs && st == OT_OK; k++) st = check_utf8(&f[k]);
  size_t pos[65] = {0};
  for (size_t l = 0; l < f[0].nlines && st == OT_OK; l++) {
    const char *refs[64];
    size_t rlen[64], hlen;
    const char *hyp = next_line(&f[0], &pos[0], &hlen);
    for (int k = 1; k <= nrefs; k++) refs[k - 1] = next_line(&f[k], &pos[k], &rlen[k - 1]);
    st = ot__bleu_add_n(b, hyp, hlen, refs, rlen, nrefs);
  }
  for (int k = 0; k <= nrefs; k++) ot_mem_free(f[k].text);
  return st;
}
