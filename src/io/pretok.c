// GPT-2's pre-tokenization regex, by hand over UTF-8 (no regex engine):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The alternatives are tried in order at each position, as the regex does:
// contractions first, then an optional ASCII space followed by a run of one
// class (letters, numbers, or "other"), then whitespace runs, where
// \s+(?!\S) leaves the last whitespace character to prefix the next piece.
#include "pretok.h"

static inline int ascii_class(unsigned c) {
  if ((c | 32u) - 'a' < 26u) return OT_UC_LETTER;
  if (c - '0' < 10u) return OT_UC_NUMBER;
  if (c == ' ' || (c >= 9 && c <= 13)) return OT_UC_SPACE;
  return OT_UC_OTHER;
}

static bool in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) >> 1;
    if (cp < r[mid][0]) hi = mid - 1;
    else if (cp > r[mid][1]) lo = mid + 1;
    else return true;
  }
  return false;
}

int ot_uc_class(uint32_t cp) {
  if (cp < 128) return ascii_class(cp);
  if (in_ranges(ot_uc_letter, ot_uc_letter_n, cp)) return OT_UC_LETTER;
  if (in_ranges(ot_uc_number, ot_uc_number_n, cp)) return OT_UC_NUMBER;
  if (in_ranges(ot_uc_space, ot_uc_space_n, cp)) return OT_UC_SPACE;
  return OT_UC_OTHER;
}

size_t ot_uc_next(const uint8_t *s, size_t len, size_t pos, int *cls) {
  unsigned c = s[pos];
  if (c < 0x80) { *cls = ascii_class(c); return 1; }
  size_t n;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; min = 0x10000; }
  else goto invalid;
  if (n > len - pos) goto invalid;
  for (size_t i = 1; i < n; i++) {
    unsigned b = s[pos + i];
    if ((b & 0xC0) != 0x80) goto invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto invalid;
  *cls = ot_uc_class(cp);
  return n;
invalid:
  *cls = OT_UC_OTHER;
  return 1;
}

const char *ot_pretok_unicode_version(void) { return ot_uc_version; }

size_t ot_pretok_next(const char *text, size_t len, size_t pos) {
  const uint8_t *s = (const uint8_t *)text;
  if (pos >= len) return len;
  unsigned c = s[pos];
  if (c == '\'' && pos + 1 < len) {            // 's 't 'm 'd 're 've 'll (case-sensitive)
    unsigned d = s[pos + 1];
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return pos + 2;
    if (pos + 2 < len) {
      unsigned e = s[pos + 2];
      if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return pos + 3;
    }
  }
  int cls;
  size_t start = pos, n = ot_uc_next(s, len, pos, &cls);
  if (c == ' ' && pos + 1 < len) {             // ' ?' before a letter/number/other run
    int cls1;
    size_t n1 = ot_uc_next(s, len, pos + 1, &cls1);
    if (cls1 != OT_UC_SPACE) { cls = cls1; start = pos + 1; n = n1; }
  }
  if (cls != OT_UC_SPACE) {                    // \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+
    size_t p = start + n;
    while (p < len) {
      int k;
      size_t m = ot_uc_next(s, len, p, &k);
      if (k != cls) break;
      p += m;
    }
    return p;
  }
  size_t p = pos, last = pos;                  // whitespace run [pos, p)
  while (p < len) {
    int k;
    size_t m = ot_uc_next(s, len, p, &k);
    if (k != OT_UC_SPACE) break;
    last = p;
    p += m;
  }
  if (p == len) return len;                    // \s+(?!\S) up to the end
  if (last > pos) return last;                 // \s+(?!\S) backs off one character
  return p;                                    // a single \s before a non-space
}
