// Text helpers of the server: a growable byte buffer, JSON string literals,
// the UTF-8 cleaner that keeps streamed text equal to the whole text, and a
// translation's source ids and target text (shared with `ot translate`).
#include "serve/serve_impl.h"
#include "io/json.h"
#include <stdarg.h>
#include <stdlib.h>

static bool sb_reserve(ot__sbuf *b, size_t extra) {
  if (b->oom) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) {
    if (cap > SIZE_MAX / 2) { b->oom = true; return false; }
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (!p) { b->oom = true; return false; }
  b->p = p;
  b->cap = cap;
  return true;
}

void ot__sb_put(ot__sbuf *b, const void *s, size_t n) {
  if (!sb_reserve(b, n)) return;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

void ot__sb_puts(ot__sbuf *b, const char *s) { ot__sb_put(b, s, strlen(s)); }

void ot__sb_printf(ot__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !sb_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void ot__sb_json_str(ot__sbuf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  ot__sb_put(b, "\"", 1);
  size_t run = 0;   // bytes copied as they are, flushed before each escape
  for (size_t i = 0; i < n; i++) {
    const unsigned char ch = (unsigned char)s[i];
    const char *esc = NULL;
    char u[7];
    if (ch == '"') esc = "\\\"";
    else if (ch == '\\') esc = "\\\\";
    else if (ch == '\n') esc = "\\n";
    else if (ch == '\r') esc = "\\r";
    else if (ch == '\t') esc = "\\t";
    else if (ch < 0x20 || ch == 0x7f) {
      memcpy(u, "\\u00", 4);
      u[4] = hex[ch >> 4];
      u[5] = hex[ch & 15];
      u[6] = 0;
      esc = u;
    }
    if (!esc) { run++; continue; }
    ot__sb_put(b, s + i - run, run);
    run = 0;
    ot__sb_puts(b, esc);
  }
  ot__sb_put(b, s + n - run, run);
  ot__sb_put(b, "\"", 1);
}

void ot__sb_free(ot__sbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

// Length of the well-formed character starting at s[0, n): > 0 when complete,
// 0 when the bytes present are a valid but incomplete start, -1 when s[0]
// cannot start a well-formed character (Unicode table 3-7).
static int utf8_char(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  int len;
  unsigned lo = 0x80, hi = 0xbf;   // range of the second byte
  if (c >= 0xc2 && c <= 0xdf) len = 2;
  else if (c == 0xe0) { len = 3; lo = 0xa0; }
  else if (c == 0xed) { len = 3; hi = 0x9f; }
  else if (c >= 0xe1 && c <= 0xef) len = 3;
  else if (c == 0xf0) { len = 4; lo = 0x90; }
  else if (c == 0xf4) { len = 4; hi = 0x8f; }
  else if (c >= 0xf1 && c <= 0xf3) len = 4;
  else return -1;
  for (int k = 1; k < len; k++) {
    if ((size_t)k >= n) return 0;
    const unsigned lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xbf;
    if (s[k] < lo_k || s[k] > hi_k) return -1;
  }
  return len;
}

size_t ot__utf8_take(const char *s, size_t n, bool final, ot__sbuf *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    int k = utf8_char(u + i, n - i);
    if (k == 0 && !final) break;
    if (k > 0) {
      ot__sb_put(out, s + i, (size_t)k);
      i += (size_t)k;
    } else {
      ot__sb_put(out, "\xef\xbf\xbd", 3);   // U+FFFD for this byte
      i++;
    }
  }
  return i;
}

void ot__tokens_text(const ot_bpe *bpe, const int32_t *tok, int n, int32_t eos, ot__sbuf *out) {
  if (n > 0 && tok[n - 1] == eos) n--;
  ot__sbuf raw = {0};
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    const char *s = ot_bpe_token(bpe, tok[i], &len);
    if (s) ot__sb_put(&raw, s, len);
  }
  // byte-level tokens may end mid-character: invalid bytes become U+FFFD (as HF's decode)
  if (raw.len) ot__utf8_take(raw.p, raw.len, true, out);
  if (raw.oom) out->oom = true;
  ot__sb_free(&raw);
}

ot_status ot__source_ids(const ot_bpe *bpe, const char *text, size_t len, int vocab, int32_t eos,
                         int32_t *out, int cap, int *n) {
  *n = 0;
  if (!ot_json_utf8_valid(text, len))
    return ot_error(OT_EINVAL, "invalid UTF-8 (convert the input to UTF-8)");
  int32_t *buf = malloc(sizeof(int32_t) * (len + 1));
  if (!buf) return ot_error(OT_ENOMEM, "out of memory");
  size_t k = 0;
  ot_status s = ot_bpe_encode(bpe, text, len, false, buf, len + 1, &k);
  if (s == OT_OK) {
    for (size_t i = 0; i < k; i++) {
      if (buf[i] >= vocab) {
        s = ot_error(OT_EINVAL, "token %d is outside the model's vocabulary of %d (is "
                     "the tokenizer the model's?)", buf[i], vocab);
        break;
      }
      if ((int)i < cap) out[i] = buf[i];
    }
    if ((int)k < cap) out[k] = eos;
    *n = (int)k + 1;
  }
  free(buf);
  return s;
}
