// GPT-2-format tokenizer files. vocab.json: one JSON object mapping each
// token, written in GPT-2's byte alphabet (bytes_to_unicode), to its id; ids
// dense 0..n-1. merges.txt: an optional "#version" line, then one merge
// "A B" per line in rank order. Tokens whose key uses characters outside the
// byte alphabet (added tokens) are kept verbatim and never produced by merges.
#include "bpe_impl.h"
#include "io/json.h"

// Decodes one code point of valid UTF-8 at s (the JSON parser validated it).
static uint32_t utf8_cp(const uint8_t *s, size_t *n) {
  if (s[0] < 0x80) { *n = 1; return s[0]; }
  if (s[0] < 0xE0) { *n = 2; return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); }
  if (s[0] < 0xF0) { *n = 3; return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F); }
  *n = 4;
  return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

// Maps the byte-alphabet string s[0, n) (valid UTF-8) to bytes in out;
// returns the byte count, or -1 if a character is outside the alphabet.
static ptrdiff_t from_alphabet(const char *s, size_t n, uint8_t *out) {
  const ot__b2u_t *m = ot__b2u();
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t l;
    uint32_t cp = utf8_cp((const uint8_t *)s + i, &l);
    if (l > n - i || cp >= 324 || m->u2b[cp] < 0) return -1;
    out[k++] = (uint8_t)m->u2b[cp];
    i += l;
  }
  return (ptrdiff_t)k;
}

static ot_status load_vocab(ot_bpe **out, const char *path, const char *text, size_t len, int cap_merges) {
  ot_json_doc doc;
  OT_TRY(ot_json_parse(&doc, text, len, 0, path));
  ot_status s = OT_OK;
  const ot_json *root = doc.root, **by_id = NULL;
  uint8_t *tmp = NULL;
  ot_bpe *t = NULL;
  if (root->type != OT_JOBJ) {
    s = ot_error(OT_EFORMAT, "%s: expected a JSON object {\"token\": id, ...}, got %s", path, ot_json_type_name(root->type));
    goto done;
  }
  int n = root->n;
  if (n < 256) {
    s = ot_error(OT_EFORMAT, "%s: %d tokens; a byte-level vocabulary has at least the 256 single bytes", path, n);
    goto done;
  }
  by_id = ot_mem_alloc((size_t)n * sizeof *by_id, OT_MEM_OTHER);
  size_t nb = 0, maxk = 0;
  for (const ot_json *m = root->first; m; m = m->next) { nb += m->key_len; if (m->key_len > maxk) maxk = m->key_len; }
  tmp = ot_mem_alloc(maxk + 1, OT_MEM_OTHER);
  if (!by_id || !tmp) { s = ot_error(OT_ENOMEM, "%s: out of memory", path); goto done; }
  memset(by_id, 0, (size_t)n * sizeof *by_id);
  for (const ot_json *m = root->first; m; m = m->next) {
    if (m->type != OT_JNUM || !m->is_int || m->i < 0 || m->i >= n) {
      s = ot_error(OT_EFORMAT, "%s: token \"%.40s\": id must be an integer in [0, %d) (ids are dense)", path, m->key, n);
      goto done;
    }
    if (by_id[m->i]) {
      s = ot_error(OT_EFORMAT, "%s: id %lld is given to both \"%.40s\" and \"%.40s\"", path, (long long)m->i,
                   by_id[m->i]->key, m->key);
      goto done;
    }
    by_id[m->i] = m;
  }
  if ((s = ot__bpe_create(&t, n, nb, cap_merges)) != OT_OK) goto done;
  for (int id = 0; id < n; id++) {
    const ot_json *m = by_id[id];
    ptrdiff_t k = from_alphabet(m->key, m->key_len, tmp);
    bool raw = k < 0;
    const uint8_t *b = raw ? (const uint8_t *)m->key : tmp;
    size_t bl = raw ? m->key_len : (size_t)k;
    int32_t other = ot__bpe_find(t, b, bl);
    if (other >= 0) {
      s = ot_error(OT_EFORMAT, "%s: tokens %d (\"%.40s\") and %d (\"%.40s\") have the same bytes", path, other,
                   by_id[other]->key, id, m->key);
      goto done;
    }
    ot__bpe_add(t, b, bl, raw);
  }
  s = ot__bpe_finish(t, path);
done:
  ot_mem_free(by_id);
  ot_mem_free(tmp);
  ot_json_free(&doc);
  if (s != OT_OK) { ot_bpe_free(t); t = NULL; }
  *out = t;
  return s;
}

static ot_status load_merges(ot_bpe *t, const char *path, char *text, size_t len) {
  uint8_t *buf = ot_mem_alloc(len + 1, OT_MEM_OTHER);
  if (!buf) return ot_error(OT_ENOMEM, "%s: out of memory", path);
  ot_status s = OT_OK;
  int line = 0;
  for (size_t pos = 0; pos < len && s == OT_OK;) {
    char *nl = memchr(text + pos, '\n', len - pos);
    size_t e = nl ? (size_t)(nl - text) : len, l = e - pos;
    const char *p = text + pos;
    line++;
    pos = e + 1;
    if (l && p[l - 1] == '\r') l--;
    if (line == 1 && l >= 8 && memcmp(p, "#version", 8) == 0) continue;
    if (l == 0) {
      if (pos >= len) break;  // a final newline
      s = ot_error(OT_EFORMAT, "%s:%d: empty line", path, line);
      break;
    }
    const char *sp = memchr(p, ' ', l);
    if (!sp || sp == p || sp == p + l - 1 || memchr(sp + 1, ' ', (size_t)(p + l - sp - 1))) {
      s = ot_error(OT_EFORMAT, "%s:%d: expected two tokens separated by one space, got \"%.*s\"", path, line,
                   (int)(l < 60 ? l : 60), p);
      break;
    }
    if (!ot_json_utf8_valid(p, l)) { s = ot_error(OT_EFORMAT, "%s:%d: invalid UTF-8", path, line); break; }
    size_t la = (size_t)(sp - p);
    ptrdiff_t ka = from_alphabet(p, la, buf);
    ptrdiff_t kb = ka < 0 ? -1 : from_alphabet(sp + 1, l - la - 1, buf + ka);
    if (ka < 0 || kb < 0) {
      s = ot_error(OT_EFORMAT, "%s:%d: \"%.*s\" has a character outside GPT-2's byte alphabet", path, line,
                   (int)(l < 60 ? l : 60), p);
      break;
    }
    int32_t a = ot__bpe_find(t, buf, (size_t)ka), b = ot__bpe_find(t, buf + ka, (size_t)kb);
    int32_t c = ot__bpe_find(t, buf, (size_t)(ka + kb));
    if (a < 0 || b < 0 || c < 0) {
      const char *which = a < 0 ? "left token" : b < 0 ? "right token" : "merged token";
      s = ot_error(OT_EFORMAT, "%s:%d: the %s of \"%.*s\" is not in vocab.json", path, line, which,
                   (int)(l < 60 ? l : 60), p);
      break;
    }
    if (t->raw[a] || t->raw[b] || t->raw[c]) {
      s = ot_error(OT_EFORMAT, "%s:%d: \"%.*s\" involves an added (non-byte) token", path, line, (int)(l < 60 ? l : 60), p);
      break;
    }
    if (t->n_merges >= t->cap_merges || !ot__bpe_add_merge(t, a, b, c)) {
      s = ot_error(OT_EFORMAT, "%s:%d: duplicate merge \"%.*s\"", path, line, (int)(l < 60 ? l : 60), p);
      break;
    }
  }
  ot_mem_free(buf);
  return s;
}

ot_status ot_bpe_load(ot_bpe **out, const char *vocab_json, const char *merges_txt) {
  if (!out) return ot_error(OT_EINVAL, "ot_bpe_load: out is NULL");
  *out = NULL;
  if (!vocab_json || !merges_txt) return ot_error(OT_EINVAL, "ot_bpe_load: file path is NULL");
  char *vt = NULL, *mt = NULL;
  size_t vl, ml;
  OT_TRY(ot__read_file(vocab_json, &vt, &vl));
  ot_status s = ot__read_file(merges_txt, &mt, &ml);
  int lines = 1;
  for (size_t i = 0; s == OT_OK && i < ml; i++) lines += mt[i] == '\n';
  ot_bpe *t = NULL;
  if (s == OT_OK) s = load_vocab(&t, vocab_json, vt, vl, lines);
  if (s == OT_OK) s = load_merges(t, merges_txt, mt, ml);
  ot_mem_free(vt);
  ot_mem_free(mt);
  if (s != OT_OK) { ot_bpe_free(t); return s; }
  *out = t;
  return OT_OK;
}

// ----------------------------------------------------------------- save ----
// Appends token id in the byte alphabet (JSON-escaped when json) to dst.
static size_t put_token(char *dst, const ot_bpe *t, int32_t id, bool json) {
  const ot__b2u_t *m = ot__b2u();
  size_t o = 0;
  for (uint32_t i = t->off[id]; i < t->off[id + 1]; i++) {
    uint8_t c = t->bytes[i];
    uint32_t cp = t->raw[id] ? c : m->b2u[c];
    if (t->raw[id] && (c >= 0x80 || c < 0x20)) {  // verbatim UTF-8 (controls escaped)
      if (c < 0x20) o += (size_t)sprintf(dst + o, "\\u%04x", c);
      else dst[o++] = (char)c;
      continue;
    }
    if (json && (cp == '"' || cp == '\\')) dst[o++] = '\\';
    if (cp < 0x80) dst[o++] = (char)cp;
    else { dst[o++] = (char)(0xC0 | (cp >> 6)); dst[o++] = (char)(0x80 | (cp & 0x3F)); }
  }
  return o;
}

ot_status ot_bpe_save(const ot_bpe *t, const char *vocab_json, const char *merges_txt) {
  if (!t || !vocab_json || !merges_txt) return ot_error(OT_EINVAL, "ot_bpe_save: NULL argument");
  size_t cap = t->n_bytes * 6 + (size_t)t->n_vocab * 16 + 64;
  size_t mcap = 16;
  for (int r = 0; r < t->n_merges; r++) mcap += 2 * (t->off[t->merge[r][2] + 1] - t->off[t->merge[r][2]]) + 2;
  char *buf = ot_mem_alloc(cap > mcap ? cap : mcap, OT_MEM_OTHER);
  if (!buf) return ot_error(OT_ENOMEM, "ot_bpe_save: out of memory");
  size_t o = 0;
  buf[o++] = '{';
  for (int32_t id = 0; id < t->n_vocab; id++) {
    if (id) buf[o++] = ',';
    buf[o++] = '"';
    o += put_token(buf + o, t, id, true);
    o += (size_t)sprintf(buf + o, "\":%d", id);
  }
  buf[o++] = '}';
  buf[o++] = '\n';
  ot__aw w;
  ot_status s = ot__aw_open(&w, vocab_json);
  if (s == OT_OK) { ot__aw_write(&w, buf, o); s = ot__aw_close(&w, true); }
  if (s == OT_OK) {
    o = (size_t)sprintf(buf, "#version: 0.2\n");
    for (int r = 0; r < t->n_merges; r++) {
      o += put_token(buf + o, t, t->merge[r][0], false);
      buf[o++] = ' ';
      o += put_token(buf + o, t, t->merge[r][1], false);
      buf[o++] = '\n';
    }
    s = ot__aw_open(&w, merges_txt);
    if (s == OT_OK) { ot__aw_write(&w, buf, o); s = ot__aw_close(&w, true); }
  }
  ot_mem_free(buf);
  return s;
}
