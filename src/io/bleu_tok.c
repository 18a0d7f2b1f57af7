// BLEU tokenizers as sacreBLEU 2.6.0 applies them to a segment: Python's
// str.lower() (optional; with its final-sigma rule), str.rstrip(), then "13a" (mteval-v13a: entity
// unescaping and the four substitution rules below, each a left-to-right
// pass of non-overlapping matches, as re.sub), "intl" (mteval-v14's
// international rules over Unicode classes, tokintl below) or "none", and finally
// ' '.join(line.split()). Python's whitespace and lowercase tables come from
// bleu_tables.c. The substitution rules look at ASCII bytes only, so they run
// on the UTF-8 bytes directly: a multi-byte character never contains an
// ASCII byte, and matching its last (or first) byte alone splits the text at
// the same places as matching the whole character.
#define _GNU_SOURCE  // memmem
#include "bleu_impl.h"
#include <stdlib.h>

void ot__bleu_buf_free(ot__bleu_buf *t) {
  ot_mem_free(t->a);
  ot_mem_free(t->b);
  memset(t, 0, sizeof *t);
}

// Decodes the code point at s[i] (valid UTF-8 assumed); *w = its byte count.
static uint32_t dec(const uint8_t *s, size_t i, int *w) {
  uint32_t c = s[i];
  if (c < 0x80) { *w = 1; return c; }
  if (c < 0xE0) { *w = 2; return (c & 0x1F) << 6 | (s[i + 1] & 0x3F); }
  if (c < 0xF0) { *w = 3; return (c & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F); }
  *w = 4;
  return (c & 0x07) << 18 | (s[i + 1] & 0x3F) << 12 | (s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
}

static int enc(uint32_t c, char *o) {
  if (c < 0x80) { o[0] = (char)c; return 1; }
  if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
  if (c < 0x10000) {
    o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | (c >> 6 & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | (c >> 12 & 0x3F));
  o[2] = (char)(0x80 | (c >> 6 & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

size_t ot__utf8_check(const char *str, size_t n) {
  const uint8_t *s = (const uint8_t *)str;
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    int w = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3
          : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (!w || i + (size_t)w > n) return i;
    for (int k = 1; k < w; k++)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    if (w == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) return i;
    if (w == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) return i;
    i += (size_t)w;
  }
  return n;
}

static bool is_ws(uint32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  for (int k = 0; k < ot__bleu_nws; k++)
    if (c >= ot__bleu_ws[k][0] && c <= ot__bleu_ws[k][1]) return true;
  return false;
}

static bool in_ranges(const uint32_t (*r)[2], int n, uint32_t c) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    if (c < r[m][0]) hi = m - 1;
    else if (c > r[m][1]) lo = m + 1;
    else return true;
  }
  return false;
}

// Python's final-sigma rule for the capital sigma at s[i, i + w): final form
// when, skipping case-ignorable code points, a cased one precedes it and none
// follows.
static bool final_sigma(const uint8_t *s, size_t n, size_t i, int w) {
  bool before = false;
  for (size_t j = i; j > 0;) {
    size_t st = j - 1;
    while (st > 0 && (s[st] & 0xC0) == 0x80) st--;
    int k;
    uint32_t c = dec(s, st, &k);
    if (!in_ranges(ot__bleu_ignorable, ot__bleu_nignorable, c)) {
      before = in_ranges(ot__bleu_cased, ot__bleu_ncased, c);
      break;
    }
    j = st;
  }
  if (!before) return false;
  for (size_t j = i + (size_t)w; j < n;) {
    int k;
    uint32_t c = dec(s, j, &k);
    if (!in_ranges(ot__bleu_ignorable, ot__bleu_nignorable, c))
      return !in_ranges(ot__bleu_cased, ot__bleu_ncased, c);
    j += (size_t)k;
  }
  return true;
}

static uint32_t lower1(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  int lo = 0, hi = ot__bleu_nlower - 1;  // the runs are sorted and disjoint
  while (lo <= hi) {
    int m = (lo + hi) / 2;
    const ot__bleu_lrun *r = &ot__bleu_lower[m];
    if (c < r->lo) hi = m - 1;
    else if (c > r->hi) lo = m + 1;
    else return (c - r->lo) % (uint32_t)r->stride == 0 ? (uint32_t)((int32_t)c + r->delta) : c;
  }
  return c;
}

// Makes room for need bytes in the b buffer.
static ot_status room(ot__bleu_buf *t, size_t need) {
  return ot__grow((void **)&t->b, &t->bcap, need + 1, 1);
}
// The b buffer becomes the current text (a).
static void flip(ot__bleu_buf *t, size_t len) {
  char *p = t->a; size_t c = t->acap;
  t->a = t->b; t->acap = t->bcap; t->b = p; t->bcap = c;
  t->len = len;
}

// a <- a with every occurrence of pat replaced by rep (str.replace).
static ot_status replace(ot__bleu_buf *t, const char *pat, const char *rep) {
  size_t pl = strlen(pat), rl = strlen(rep), n = t->len, o = 0;
  if (n < pl || !memmem(t->a, n, pat, pl)) return OT_OK;
  OT_TRY(room(t, n / pl * (rl > pl ? rl : pl) + n));
  for (size_t i = 0; i < n;) {
    if (i + pl <= n && memcmp(t->a + i, pat, pl) == 0) {
      memcpy(t->b + o, rep, rl); o += rl; i += pl;
    } else t->b[o++] = t->a[i++];
  }
  flip(t, o);
  return OT_OK;
}

static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool dotcomma(char c) { return c == '.' || c == ','; }
// The character class of 13a's first rule: { | } ~ [ \ ] ^ _ ` space ! " # $
// % & ( ) * + : ; < = > ? @ /
static bool punct13a(char ch) {
  unsigned c = (unsigned char)ch;
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

// One two-character rule: where (x, y) = a[i], a[i + 1] matches, writes
// x ' ' y ' ' (kind 0: "\1 \2 ") or ' ' x ' ' y (kind 1: " \1 \2"), then goes on
// after y.
static ot_status rule2(ot__bleu_buf *t, bool (*m)(char, char), int kind) {
  size_t n = t->len, o = 0;
  OT_TRY(room(t, 2 * n));
  for (size_t i = 0; i < n;) {
    if (i + 1 < n && m(t->a[i], t->a[i + 1])) {
      char x = t->a[i], y = t->a[i + 1];
      if (kind == 0) { t->b[o++] = x; t->b[o++] = ' '; t->b[o++] = y; t->b[o++] = ' '; }
      else { t->b[o++] = ' '; t->b[o++] = x; t->b[o++] = ' '; t->b[o++] = y; }
      i += 2;
    } else t->b[o++] = t->a[i++];
  }
  flip(t, o);
  return OT_OK;
}
static bool r_nondigit_dot(char x, char y) { return !digit(x) && dotcomma(y); }
static bool r_dot_nondigit(char x, char y) { return dotcomma(x) && !digit(y); }
static bool r_digit_dash(char x, char y) { return digit(x) && y == '-'; }

static ot_status tok13a(ot__bleu_buf *t) {
  OT_TRY(replace(t, "<skipped>", ""));
  OT_TRY(replace(t, "-\n", ""));
  OT_TRY(replace(t, "\n", " "));
  if (memchr(t->a, '&', t->len)) {
    OT_TRY(replace(t, "&quot;", "\""));
    OT_TRY(replace(t, "&amp;", "&"));
    OT_TRY(replace(t, "&lt;", "<"));
    OT_TRY(replace(t, "&gt;", ">"));
  }
  size_t n = t->len, o = 0;  // f' {line} ' and the first rule: ' \1 ' around punctuation
  OT_TRY(room(t, 3 * n + 2));
  t->b[o++] = ' ';
  for (size_t i = 0; i < n; i++) {
    char c = t->a[i];
    if (punct13a(c)) { t->b[o++] = ' '; t->b[o++] = c; t->b[o++] = ' '; }
    else t->b[o++] = c;
  }
  t->b[o++] = ' ';
  flip(t, o);
  OT_TRY(rule2(t, r_nondigit_dot, 0));  // period and comma unless preceded by a digit
  OT_TRY(rule2(t, r_dot_nondigit, 1));  // ... unless followed by a digit
  return rule2(t, r_digit_dash, 0);     // dash after a digit
}

// sacreBLEU's 'intl' (TokenizerV14International), three passes of regex.sub,
// each over code points, left to right, matches not overlapping:
//   (\P{N})(\p{P}) -> '\1 \2 '   punctuation after a non-number
//   (\p{P})(\P{N}) -> ' \1 \2'   punctuation before a non-number
//   (\p{S})        -> ' \1 '     every symbol
// (so a sentence-final '.' right after a digit stays attached, as in mteval-v14).
static bool is_p(uint32_t c) { return in_ranges(ot__bleu_intl_punct, ot__bleu_nintl_punct, c); }
static bool is_n(uint32_t c) { return in_ranges(ot__bleu_intl_number, ot__bleu_nintl_number, c); }
static bool is_s(uint32_t c) { return in_ranges(ot__bleu_intl_symbol, ot__bleu_nintl_symbol, c); }

// One two-code-point pass: where (x, y) matches, x ' ' y ' ' (kind 0) or
// ' ' x ' ' y (kind 1), then on after y.
static ot_status intl2(ot__bleu_buf *t, int kind) {
  const uint8_t *a = (const uint8_t *)t->a;
  size_t n = t->len, o = 0;
  OT_TRY(room(t, 2 * n));  // 2 bytes added per >= 2 consumed
  for (size_t i = 0; i < n;) {
    int w1, w2 = 0;
    uint32_t x = dec(a, i, &w1), y = i + (size_t)w1 < n ? dec(a, i + (size_t)w1, &w2) : 0;
    bool m = w2 && (kind == 0 ? !is_n(x) && is_p(y) : is_p(x) && !is_n(y));
    if (!m) {
      memcpy(t->b + o, a + i, (size_t)w1);
      o += (size_t)w1; i += (size_t)w1;
      continue;
    }
    if (kind == 1) t->b[o++] = ' ';
    memcpy(t->b + o, a + i, (size_t)w1); o += (size_t)w1;
    t->b[o++] = ' ';
    memcpy(t->b + o, a + i + w1, (size_t)w2); o += (size_t)w2;
    if (kind == 0) t->b[o++] = ' ';
    i += (size_t)(w1 + w2);
  }
  flip(t, o);
  return OT_OK;
}

static ot_status tokintl(ot__bleu_buf *t) {
  OT_TRY(intl2(t, 0));
  OT_TRY(intl2(t, 1));
  const uint8_t *a = (const uint8_t *)t->a;
  size_t n = t->len, o = 0;
  OT_TRY(room(t, 3 * n));
  for (size_t i = 0; i < n;) {
    int w;
    bool s = is_s(dec(a, i, &w));
    if (s) t->b[o++] = ' ';
    memcpy(t->b + o, a + i, (size_t)w); o += (size_t)w;
    if (s) t->b[o++] = ' ';
    i += (size_t)w;
  }
  flip(t, o);
  return OT_OK;
}

ot_status ot__bleu_tok(ot_bleu_tok tok, bool lower, const char *s, size_t n, ot__bleu_buf *t) {
  const uint8_t *u = (const uint8_t *)s;
  OT_TRY(ot__grow((void **)&t->a, &t->acap, 2 * n + 1, 1));  // lower() grows by <= 3/2
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    int w;
    uint32_t c = dec(u, i, &w);
    if (lower && c == 0x130) { t->a[o++] = 'i'; o += (size_t)enc(0x307, t->a + o); }
    else if (lower && c == 0x3A3) o += (size_t)enc(final_sigma(u, n, i, w) ? 0x3C2 : 0x3C3, t->a + o);
    else if (lower && c >= 'A') o += (size_t)enc(lower1(c), t->a + o);
    else memcpy(t->a + o, s + i, (size_t)w), o += (size_t)w;
    i += (size_t)w;
  }
  // rstrip(): drop trailing whitespace code points
  size_t end = o;
  while (end > 0) {
    size_t st = end - 1;
    while (st > 0 && ((uint8_t)t->a[st] & 0xC0) == 0x80) st--;
    int w;
    if (!is_ws(dec((const uint8_t *)t->a, st, &w))) break;
    end = st;
  }
  t->len = end;
  if (tok == OT_BLEU_TOK_13A) OT_TRY(tok13a(t));
  else if (tok == OT_BLEU_TOK_INTL) OT_TRY(tokintl(t));
  // ' '.join(line.split())
  OT_TRY(room(t, t->len));
  o = 0;
  bool gap = false;
  for (size_t i = 0; i < t->len;) {
    int w;
    uint32_t c = dec((const uint8_t *)t->a, i, &w);
    if (is_ws(c)) gap = o > 0;
    else {
      if (gap) t->b[o++] = ' ';
      gap = false;
      memcpy(t->b + o, t->a + i, (size_t)w);
      o += (size_t)w;
    }
    i += (size_t)w;
  }
  flip(t, o);
  t->a[o] = '\0';
  return OT_OK;
}

ot_status ot_bleu_tokenize(const ot_bleu_opts *o, const char *s, size_t n, char **out,
                           size_t *len) {
  static const char fn[] = "ot_bleu_tokenize";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  ot_bleu_opts d = {0};
  if (!o) o = &d;
  if (o->tokenize < OT_BLEU_TOK_13A || o->tokenize > OT_BLEU_TOK_INTL)
    return ot_error(OT_EINVAL, "%s: unknown tokenizer %d (13a, none or intl)", fn,
                    (int)o->tokenize);
  size_t bad = ot__utf8_check(s, n);
  if (bad < n)
    return ot_error(OT_EINVAL, "%s: invalid UTF-8 at byte %zu (0x%02x); the text must be UTF-8",
                    fn, bad, (unsigned)(uint8_t)s[bad]);
  ot__bleu_buf t = {0};
  ot_status st = ot__bleu_tok(o->tokenize, o->lowercase, s, n, &t);
  if (st == OT_OK) {
    *out = malloc(t.len + 1);
    if (!*out) st = ot_error(OT_ENOMEM, "%s: out of memory (%zu bytes)", fn, t.len + 1);
    else {
      memcpy(*out, t.a, t.len + 1);
      if (len) *len = t.len;
    }
  }
  ot__bleu_buf_free(&t);
  return st;
}
