// `ot translate` input and output: a line to source ids (token ids or BPE),
// a result to a line, and the generation settings of a Hugging Face directory.
#include "serve/serve_impl.h"   // ot__source_ids, ot__tokens_text
#include "translate.h"
#include "io/json.h"
#include <errno.h>

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *b = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 > cap) {
      char *nb = realloc(b, cap = cap * 2 + 8192);
      if (!nb) { free(b); fclose(f); return NULL; }
      b = nb;
    }
    const size_t k = fread(b + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  *len = n;
  return b;
}

static bool as_int(const ot_json *j, int lo, int hi, int *out) {
  if (!j || j->type != OT_JNUM || !j->is_int || j->i < lo || j->i > hi) return false;
  *out = (int)j->i;
  return true;
}

ot_status tr_read_gen_config(const char *dir, ot_beam_config *bc, int32_t *len, int32_t *ids,
                             int cap) {
  char path[OT_PATH_MAX + 32];
  size_t n = 0;
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  char *text = slurp(path, &n);
  if (!text) {
    snprintf(path, sizeof path, "%s/config.json", dir);
    text = slurp(path, &n);
  }
  if (!text) return OT_OK;
  ot_json_doc doc = {0};
  ot_status s = ot_json_parse(&doc, text, n, 0, path);
  free(text);
  if (s != OT_OK) return s;
  const ot_json *r = doc.root, *bw = ot_json_get(r, "bad_words_ids"), *j;
  int v = 0, used = 0;
  if (bw && bw->type == OT_JARR) {
    for (const ot_json *w = bw->first; w && s == OT_OK; w = w->next) {
      if (w->type != OT_JARR || w->n < 1 || used + w->n > cap) {
        s = ot_error(OT_EFORMAT, "%s: bad_words_ids must be a list of non-empty id lists (at "
                     "most %d ids in all)", path, cap);
        break;
      }
      for (const ot_json *e = w->first; e && s == OT_OK; e = e->next)
        if (!as_int(e, 0, bc->vocab - 1, &v))
          s = ot_error(OT_EFORMAT, "%s: bad_words_ids holds a value that is not a token id "
                       "(vocab %d)", path, bc->vocab);
        else
          ids[used++] = v;
      len[bc->n_bad_words++] = w->n;
    }
    bc->bad_words_len = len;
    bc->bad_words_ids = ids;
  }
  if (s == OT_OK && (j = ot_json_get(r, "forced_eos_token_id")) && j->type != OT_JNULL) {
    if (as_int(j, 0, bc->vocab - 1, &v)) bc->forced_eos_id = v;
    else s = ot_error(OT_EFORMAT, "%s: forced_eos_token_id is not a token id", path);
  }
  if (s == OT_OK && (j = ot_json_get(r, "no_repeat_ngram_size")) && as_int(j, 0, 1 << 20, &v))
    bc->no_repeat_ngram_size = v;
  if (s == OT_OK && (j = ot_json_get(r, "min_length")) && as_int(j, 0, 1 << 20, &v))
    bc->min_length = v;
  if (s == OT_OK && (j = ot_json_get(r, "repetition_penalty")) && j->type == OT_JNUM && j->d > 0)
    bc->repetition_penalty = (float)j->d;
  ot_json_free(&doc);
  return s;
}

ot_status tr_line_ids(const ot_bpe *bpe, bool ids_mode, const char *line, size_t len, int vocab,
                      int32_t eos, int32_t *out, int cap, int *n) {
  *n = 0;
  if (ids_mode) {
    const char *p = line, *e = line + len;
    while (p < e) {
      while (p < e && (*p == ' ' || *p == '\t')) p++;
      if (p >= e) break;
      char *end = NULL;
      errno = 0;
      const long v = strtol(p, &end, 10);
      if (end == p || errno || v < 0 || v >= vocab || (end < e && *end != ' ' && *end != '\t'))
        return ot_error(OT_EINVAL, "'%.*s' is not a token id in [0, %d) (--ids input is token ids "
                        "separated by spaces)", (int)strcspn(p, " \t"), p, vocab);
      if (*n < cap) out[*n] = (int32_t)v;
      ++*n;
      p = end;
    }
    if (*n == 0)
      return ot_error(OT_EINVAL, "empty line (--ids input needs at least one id, e.g. eos)");
    return OT_OK;
  }
  return ot__source_ids(bpe, line, len, vocab, eos, out, cap, n);
}

void tr_write(FILE *f, const ot_bpe *bpe, bool ids_mode, const int32_t *tok, int n, int32_t eos) {
  if (ids_mode) {
    if (n > 0 && tok[n - 1] == eos) n--;
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? " " : "", tok[i]);
  } else {
    ot__sbuf text = {0};
    ot__tokens_text(bpe, tok, n, eos, &text);
    if (text.len) fwrite(text.p, 1, text.len, f);
    ot__sb_free(&text);
  }
  fputc('\n', f);
}
