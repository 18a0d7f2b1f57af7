// Parallel-text files: whole-file reads split into lines (LF or CRLF), with
// strict UTF-8 checks (no overlong forms, surrogates or code points past
// U+10FFFF) that name the file, the line and the byte offset.
#include "bitext_impl.h"
#include <stdio.h>

void ot__lines_free(ot__lines *L) {
  if (!L) return;
  ot_mem_free(L->buf);
  ot_mem_free(L->off);
  ot_mem_free(L->len);
  memset(L, 0, sizeof *L);
}

// Length of the valid UTF-8 sequence at p[0, n) (n >= 1), or 0 if invalid.
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t k;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) k = 2;
  else if (c >= 0xE0 && c <= 0xEF) { k = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
  else if (c >= 0xF0 && c <= 0xF4) { k = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
  else return 0;
  if (n < k || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return k;
}

ot_status ot__lines_read(ot__lines *L, const char *path, const char *fn) {
  memset(L, 0, sizeof *L);
  ot_status s = ot__read_file(path, &L->buf, &L->size);
  if (s != OT_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ot_last_error());
    return ot_error(s, "%s: %s", fn, msg);
  }
  int64_t cap = 1;
  for (size_t i = 0; i < L->size; i++) cap += L->buf[i] == '\n';
  L->off = ot_mem_alloc((size_t)cap * sizeof *L->off, OT_MEM_OTHER);
  L->len = ot_mem_alloc((size_t)cap * sizeof *L->len, OT_MEM_OTHER);
  if (!L->off || !L->len) {
    ot__lines_free(L);
    return ot_error(OT_ENOMEM, "%s: %s: out of memory for %lld lines", fn, path, (long long)cap);
  }
  const unsigned char *b = (const unsigned char *)L->buf;
  size_t start = 0;
  while (start < L->size) {
    const unsigned char *nl = memchr(b + start, '\n', L->size - start);
    size_t end = nl ? (size_t)(nl - b) : L->size, e = end;
    if (e > start && b[e - 1] == '\r') e--;
    int64_t line = L->n + 1;
    for (size_t i = start; i < e;) {
      size_t k = utf8_seq(b + i, e - i);
      if (!k) {
        const unsigned byte = b[i];
        ot__lines_free(L);
        return ot_error(OT_EFORMAT, "%s: %s:%lld: invalid UTF-8 at byte offset %zu of the line (byte 0x%02x, "
                        "file offset %zu); the files must be UTF-8 (convert with iconv -t UTF-8)",
                        fn, path, (long long)line, i - start, byte, i);
      }
      i += k;
    }
    if (e - start > UINT32_MAX) {
      ot__lines_free(L);
      return ot_error(OT_EFORMAT, "%s: %s:%lld: line longer than 4 GB", fn, path, (long long)line);
    }
    L->off[L->n] = start;
    L->len[L->n] = (uint32_t)(e - start);
    L->n++;
    start = end + 1;
  }
  return OT_OK;
}

ot_status ot__lines_same_count(const ot__lines *a, const char *pa, const ot__lines *b, const char *pb,
                               const char *fn) {
  if (a->n == b->n) return OT_OK;
  const ot__lines *m = a->n > b->n ? a : b;
  const char *pm = a->n > b->n ? pa : pb;
  int64_t i = a->n < b->n ? a->n : b->n;
  int show = m->len[i] > 60 ? 60 : (int)m->len[i];
  return ot_error(OT_EFORMAT, "%s: %s has %lld lines but %s has %lld; the first extra line is %s:%lld: \"%.*s%s\" "
                  "(line i of one file must translate line i of the other)",
                  fn, pa, (long long)a->n, pb, (long long)b->n, pm, (long long)i + 1, show, m->buf + m->off[i],
                  m->len[i] > 60 ? "..." : "");
}

bool ot__line_blank(const ot__lines *L, int64_t i) {
  const char *p = L->buf + L->off[i];
  for (uint32_t k = 0; k < L->len[i]; k++)
    if (p[k] != ' ' && p[k] != '\t' && p[k] != '\v' && p[k] != '\f') return false;
  return true;
}
