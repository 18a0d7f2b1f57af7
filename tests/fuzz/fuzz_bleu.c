// libFuzzer target: the BLEU tokenizers (13a / none / intl, with and without
// lowercase; src/io/bleu_tok.c) and the n-gram statistics. Input: one flags
// byte (bit 0: tokenizer none, else bit 2: intl, else 13a; bit 1: lowercase),
// then the text. Invariants:
// invalid UTF-8 is refused with a message; valid text gives valid UTF-8 tokens
// joined by single spaces, no space at either end and no other whitespace
// byte; the none tokenizer is idempotent; a text scored against itself
// matches every n-gram (BLEU 100 when it has a 4-gram); tracked memory
// returns to its start.
#include "fuzz_common.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool utf8_ok(const char *s, size_t n) {
  char *t = NULL;  // the tokenizer's own check, through the none tokenizer
  ot_bleu_opts o = {OT_BLEU_TOK_NONE, OT_BLEU_SMOOTH_EXP, 0, false};
  bool ok = ot_bleu_tokenize(&o, s, n, &t, NULL) == OT_OK;
  free(t);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const size_t mem0 = fz_mem_total();
  ot_bleu_opts o = {data[0] & 1   ? OT_BLEU_TOK_NONE
                    : data[0] & 4 ? OT_BLEU_TOK_INTL
                                  : OT_BLEU_TOK_13A,
                    OT_BLEU_SMOOTH_EXP, 0, (data[0] & 2) != 0};
  const char *s = (const char *)data + 1;
  size_t n = size - 1;
  char *t = NULL;
  size_t len = 0;
  ot_status st = ot_bleu_tokenize(&o, s, n, &t, &len);
  if (st != OT_OK) {
    fz_refused(st, "ot_bleu_tokenize");
    FZ_CHECK(st == OT_EINVAL && strstr(ot_last_error(), "UTF-8"), "refusal is not about UTF-8: %s",
             ot_last_error());
    FZ_CHECK(t == NULL, "output on a refusal");
    fz_mem_back(mem0, "bleu");
    return 0;
  }
  FZ_CHECK(t[len] == 0 && (memchr(s, 0, n) || strlen(t) == len), "length %zu vs strlen %zu",
           len, strlen(t));  // NUL is a character like any other (Python's too)
  FZ_CHECK(utf8_ok(t, len), "tokens are not valid UTF-8");
  FZ_CHECK(len == 0 || (t[0] != ' ' && t[len - 1] != ' '), "space at an end");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)t[i];
    FZ_CHECK(!(c == ' ' && i + 1 < len && t[i + 1] == ' '), "double space at %zu", i);
    FZ_CHECK(c == ' ' || !((c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)),
             "whitespace byte 0x%02x kept at %zu", c, i);
  }
  if (o.tokenize == OT_BLEU_TOK_NONE) {
    char *t2 = NULL;
    ot_bleu_opts o2 = {OT_BLEU_TOK_NONE, OT_BLEU_SMOOTH_EXP, 0, false};
    FZ_CHECK(ot_bleu_tokenize(&o2, t, len, &t2, NULL) == OT_OK && strcmp(t, t2) == 0,
             "none tokenizer not idempotent");
    free(t2);
  }
  // the text against itself (NUL-terminated copy: ot_bleu_add takes C strings)
  if (memchr(s, 0, n) == NULL) {
    char *c = malloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    ot_bleu *b = NULL;
    FZ_CHECK(ot_bleu_create(&b, &o) == OT_OK, "create");
    const char *refs[2] = {c, c};
    FZ_CHECK(ot_bleu_add(b, c, refs, 2) == OT_OK, "add refused a text the tokenizer took: %s",
             ot_last_error());
    ot_bleu_score r;
    ot_bleu_result(b, &r);
    for (int k = 0; k < 4; k++)
      FZ_CHECK(r.counts[k] == r.totals[k], "self-match %d-grams %lld of %lld", k + 1,
               (long long)r.counts[k], (long long)r.totals[k]);
    FZ_CHECK(r.sys_len == r.ref_len && r.bp == 1.0, "self lengths %lld %lld",
             (long long)r.sys_len, (long long)r.ref_len);
    if (r.totals[3] > 0) FZ_CHECK(fabs(r.score - 100.0) < 1e-9, "self BLEU %.17g", r.score);
    char line[256];
    FZ_CHECK(ot_bleu_format(&r, line, sizeof line) < sizeof line, "line too long");
    ot_bleu_free(b);
    free(c);
  }
  free(t);
  fz_mem_back(mem0, "bleu");
  return 0;
}
