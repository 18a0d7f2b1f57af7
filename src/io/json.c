// Strict JSON parser: two passes over the input with the same code. The first
// validates and counts nodes and decoded string bytes; the second fills one
// tracked block sized exactly. Every read checks p < end.
#define _GNU_SOURCE  // strtod_l: numbers parse the same under any LC_NUMERIC
#include "json.h"
#include <locale.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct {
  const char *beg, *p, *end, *what;
  int depth, max_depth;
  bool fill;                 // second pass: write nodes and strings
  ot_json *nodes; size_t nn;
  char *strs; size_t ns;
  locale_t c_locale;         // "C" numeric locale for strtod_l, or 0 (then strtod)
} jp;

__attribute__((format(printf, 3, 4)))
static ot_status fail(jp *j, const char *at, const char *fmt, ...) {
  char reason[256];
  va_list ap; va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  size_t off = (size_t)(at - j->beg), line = 1, col = 1;
  for (const char *q = j->beg; q < at; q++) { if (*q == '\n') { line++; col = 1; } else col++; }
  return ot_error(OT_EFORMAT, "%s: invalid JSON at byte %zu (line %zu, column %zu): %s",
                  j->what, off, line, col, reason);
}

// Printable description of the byte at p (or end of input) for messages.
static const char *show(jp *j, const char *p, char buf[16]) {
  if (p >= j->end) return "end of input";
  unsigned char c = (unsigned char)*p;
  if (c >= 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
  else snprintf(buf, 16, "byte 0x%02x", c);
  return buf;
}

static void skip_ws(jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static ot_json *new_node(jp *j, ot_jtype t, const char *at) {
  ot_json *n = NULL;
  if (j->fill) {
    n = &j->nodes[j->nn];
    memset(n, 0, sizeof *n);
    n->type = t;
    n->pos = (size_t)(at - j->beg);
  }
  j->nn++;
  return n;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at p (bounds-checked) -> code unit, or -1.
static long hex4(jp *j, const char *p) {
  if (j->end - p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p[i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Length of the valid UTF-8 sequence starting at p (lead byte >= 0x80), or 0.
static int utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  int n; unsigned lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
  else return 0;
  if (end - p < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (int i = 2; i < n; i++) if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return n;
}

static size_t put_utf8(char *o, unsigned long cp) {
  unsigned char b[4]; size_t n;
  if (cp < 0x80) { b[0] = (unsigned char)cp; n = 1; }
  else if (cp < 0x800) { b[0] = (unsigned char)(0xc0 | (cp >> 6)); b[1] = (unsigned char)(0x80 | (cp & 0x3f)); n = 2; }
  else if (cp < 0x10000) {
    b[0] = (unsigned char)(0xe0 | (cp >> 12)); b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    b[2] = (unsigned char)(0x80 | (cp & 0x3f)); n = 3;
  } else {
    b[0] = (unsigned char)(0xf0 | (cp >> 18)); b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)); b[3] = (unsigned char)(0x80 | (cp & 0x3f)); n = 4;
  }
  if (o) memcpy(o, b, n);
  return n;
}

// j->p at the opening quote. Decodes into the string pool (fill pass) and
// returns its start and length.
static ot_status parse_string(jp *j, const char **out, size_t *out_len) {
  const char *open = j->p++;
  char *o = j->fill ? j->strs + j->ns : NULL;
  size_t n = 0;
  for (;;) {
    if (j->p >= j->end) return fail(j, open, "unterminated string");
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') { j->p++; break; }
    if (c < 0x20) return fail(j, j->p, "control character 0x%02x inside a string (escape it)", c);
    if (c == '\\') {
      const char *esc = j->p;
      if (j->end - j->p < 2) return fail(j, esc, "unterminated escape sequence");
      char e = j->p[1];
      j->p += 2;
      char simple = 0;
      switch (e) {
        case '"': simple = '"'; break;
        case '\\': simple = '\\'; break;
        case '/': simple = '/'; break;
        case 'b': simple = '\b'; break;
        case 'f': simple = '\f'; break;
        case 'n': simple = '\n'; break;
        case 'r': simple = '\r'; break;
        case 't': simple = '\t'; break;
        case 'u': break;
        default: return fail(j, esc, "invalid escape '\\%c'", (e >= 0x20 && e < 0x7f) ? e : '?');
      }
      if (e != 'u') { if (o) o[n] = simple; n++; continue; }
      long u = hex4(j, j->p);
      if (u < 0) return fail(j, esc, "\\u must be followed by 4 hex digits");
      j->p += 4;
      unsigned long cp = (unsigned long)u;
      if (u >= 0xdc00 && u <= 0xdfff) return fail(j, esc, "lone low surrogate \\u%04lx", u);
      if (u >= 0xd800 && u <= 0xdbff) {
        long lo = (j->end - j->p >= 2 && j->p[0] == '\\' && j->p[1] == 'u') ? hex4(j, j->p + 2) : -1;
        if (lo < 0xdc00 || lo > 0xdfff)
          return fail(j, esc, "high surrogate \\u%04lx not followed by a low surrogate", u);
        j->p += 6;
        cp = 0x10000 + (((unsigned long)u - 0xd800) << 10) + ((unsigned long)lo - 0xdc00);
      }
      n += put_utf8(o ? o + n : NULL, cp);
      continue;
    }
    if (c < 0x80) { if (o) o[n] = (char)c; n++; j->p++; continue; }
    int k = utf8_len((const unsigned char *)j->p, (const unsigned char *)j->end);
    if (!k) return fail(j, j->p, "invalid UTF-8 byte 0x%02x in a string", c);
    if (o) memcpy(o + n, j->p, (size_t)k);
    n += (size_t)k; j->p += k;
  }
  if (o) { o[n] = 0; *out = o; }
  else *out = NULL;
  *out_len = n;
  j->ns += n + 1;
  return OT_OK;
}

static ot_status parse_number(jp *j, ot_json *node) {
  const char *s = j->p, *p = j->p;
  bool integer = true;
  if (p < j->end && *p == '-') p++;
  if (p >= j->end || *p < '0' || *p > '9') return fail(j, s, "'-' must be followed by a digit");
  if (*p == '0') {
    p++;
    if (p < j->end && *p >= '0' && *p <= '9') return fail(j, s, "number with a leading zero");
  } else {
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < j->end && *p == '.') {
    integer = false; p++;
    if (p >= j->end || *p < '0' || *p > '9') return fail(j, p, "digit expected after '.'");
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < j->end && (*p == 'e' || *p == 'E')) {
    integer = false; p++;
    if (p < j->end && (*p == '+' || *p == '-')) p++;
    if (p >= j->end || *p < '0' || *p > '9') return fail(j, p, "digit expected in exponent");
    while (p < j->end && *p >= '0' && *p <= '9') p++;
  }
  size_t len = (size_t)(p - s);
  char buf[512];
  if (len >= sizeof buf) return fail(j, s, "number literal longer than %zu characters", sizeof buf - 1);
  memcpy(buf, s, len); buf[len] = 0;
  double d = j->c_locale ? strtod_l(buf, NULL, j->c_locale) : strtod(buf, NULL);
  if (!isfinite(d)) return fail(j, s, "number %s is out of double range", buf);
  bool is_int = false; int64_t iv = 0;
  if (integer) {  // exact int64 parse with overflow check
    const char *q = buf; bool neg = *q == '-'; if (neg) q++;
    uint64_t acc = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    is_int = true;
    for (; *q; q++) {
      unsigned dig = (unsigned)(*q - '0');
      if (acc > (lim - dig) / 10) { is_int = false; break; }
      acc = acc * 10 + dig;
    }
    if (is_int) iv = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  }
  if (node) { node->d = d; node->is_int = is_int; node->i = iv; }
  j->p = p;
  return OT_OK;
}

static bool match(jp *j, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0) return false;
  j->p += n;
  return true;
}

static ot_status parse_value(jp *j, ot_json **out);

static ot_status parse_container(jp *j, ot_json *node, bool obj) {
  const char *open = j->p++;
  char close = obj ? '}' : ']', b1[16];
  if (++j->depth > j->max_depth)
    return fail(j, open, "nesting deeper than %d levels", j->max_depth);
  ot_json *tail = NULL;
  int count = 0;
  skip_ws(j);
  if (j->p < j->end && *j->p == close) { j->p++; goto done; }
  for (;;) {
    const char *key = NULL; size_t key_len = 0;
    skip_ws(j);
    if (obj) {
      if (j->p >= j->end || *j->p != '"')
        return fail(j, j->p, "expected a string key in object, got %s", show(j, j->p, b1));
      OT_TRY(parse_string(j, &key, &key_len));
      skip_ws(j);
      if (j->p >= j->end || *j->p != ':')
        return fail(j, j->p, "expected ':' after object key, got %s", show(j, j->p, b1));
      j->p++;
    }
    ot_json *child = NULL;
    OT_TRY(parse_value(j, &child));
    if (count == INT32_MAX) return fail(j, open, "too many elements");
    count++;
    if (child) {
      child->key = key; child->key_len = key_len;
      if (tail) tail->next = child; else node->first = child;
      tail = child;
    }
    skip_ws(j);
    if (j->p < j->end && *j->p == ',') { j->p++; continue; }
    if (j->p < j->end && *j->p == close) { j->p++; break; }
    return fail(j, j->p, "expected ',' or '%c' in %s, got %s", close, obj ? "object" : "array",
                show(j, j->p, b1));
  }
done:
  if (node) node->n = count;
  j->depth--;
  return OT_OK;
}

static ot_status parse_value(jp *j, ot_json **out) {
  char b1[16];
  skip_ws(j);
  const char *at = j->p;
  if (at >= j->end) return fail(j, at, "value expected, got end of input");
  ot_json *n = NULL;
  switch (*at) {
    case '{': n = new_node(j, OT_JOBJ, at); OT_TRY(parse_container(j, n, true)); break;
    case '[': n = new_node(j, OT_JARR, at); OT_TRY(parse_container(j, n, false)); break;
    case '"': {
      n = new_node(j, OT_JSTR, at);
      const char *s; size_t len;
      OT_TRY(parse_string(j, &s, &len));
      if (n) { n->s = s; n->len = len; }
      break;
    }
    case 't': case 'f': case 'n': {
      ot_jtype t = *at == 'n' ? OT_JNULL : OT_JBOOL;
      bool v = *at == 't';
      if (!match(j, *at == 't' ? "true" : *at == 'f' ? "false" : "null"))
        return fail(j, at, "invalid literal (expected true, false or null)");
      n = new_node(j, t, at);
      if (n) n->b = v;
      break;
    }
    default:
      if (*at == '-' || (*at >= '0' && *at <= '9')) {
        n = new_node(j, OT_JNUM, at);
        OT_TRY(parse_number(j, n));
        break;
      }
      return fail(j, at, "value expected, got %s", show(j, at, b1));
  }
  *out = n;
  return OT_OK;
}

static ot_status run_pass(jp *j, ot_json **root) {
  char b1[16];
  j->p = j->beg; j->depth = 0; j->nn = 0; j->ns = 0;
  OT_TRY(parse_value(j, root));
  skip_ws(j);
  if (j->p < j->end)
    return fail(j, j->p, "unexpected %s after the top-level value", show(j, j->p, b1));
  return OT_OK;
}

ot_status ot_json_parse(ot_json_doc *doc, const char *text, size_t len, int max_depth,
                        const char *what) {
  if (!doc) return ot_error(OT_EINVAL, "ot_json_parse: doc is NULL");
  doc->root = NULL; doc->mem = NULL;
  if (!text && len) return ot_error(OT_EINVAL, "ot_json_parse: text is NULL");
  if (!what) what = "json";
  jp j = {.beg = text ? text : "", .end = (text ? text : "") + len, .what = what,
          .max_depth = max_depth > 0 ? max_depth : OT_JSON_MAX_DEPTH};
  ot_json *root = NULL;
  j.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  ot_status s = run_pass(&j, &root);  // count pass: validates everything
  void *mem = NULL;
  if (s == OT_OK) {
    size_t nodes_bytes = ot_align64(j.nn * sizeof(ot_json));
    mem = ot_mem_alloc(nodes_bytes + j.ns, OT_MEM_OTHER);
    if (!mem) s = ot_error(OT_ENOMEM, "%s: out of memory for %zu JSON nodes", what, j.nn);
    else {
      j.fill = true;
      j.nodes = mem;
      j.strs = (char *)mem + nodes_bytes;
      s = run_pass(&j, &root);
    }
  }
  if (j.c_locale) freelocale(j.c_locale);
  if (s != OT_OK) { ot_mem_free(mem); return s; }
  doc->root = root; doc->mem = mem;
  return OT_OK;
}

void ot_json_free(ot_json_doc *doc) {
  if (!doc) return;
  ot_mem_free(doc->mem);
  doc->mem = NULL; doc->root = NULL;
}

const ot_json *ot_json_get(const ot_json *obj, const char *key) {
  if (!obj || obj->type != OT_JOBJ || !key) return NULL;
  size_t kl = strlen(key);
  for (const ot_json *c = obj->first; c; c = c->next)
    if (c->key_len == kl && memcmp(c->key, key, kl) == 0) return c;
  return NULL;
}

const ot_json *ot_json_at(const ot_json *arr, int i) {
  if (!arr || arr->type != OT_JARR || i < 0 || i >= arr->n) return NULL;
  const ot_json *c = arr->first;
  while (i-- > 0 && c) c = c->next;
  return c;
}

bool ot_json_utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    if (*p < 0x80) { p++; continue; }
    int k = utf8_len(p, end);
    if (!k) return false;
    p += k;
  }
  return true;
}

const char *ot_json_type_name(ot_jtype t) {
  switch (t) {
    case OT_JNULL: return "null";
    case OT_JBOOL: return "boolean";
    case OT_JNUM: return "number";
    case OT_JSTR: return "string";
    case OT_JARR: return "array";
    case OT_JOBJ: return "object";
  }
  return "unknown";
}
