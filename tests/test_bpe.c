// Byte-level BPE: GPT-2 pre-tokenization pieces (expected splits checked with
// the `regex` module), Unicode classes, training against a naive re-counting
// trainer (every merge equal), determinism, encode of the training text equals
// the training segmentation, encode/decode round trips on arbitrary bytes
// (invalid UTF-8 too), scan vs heap merge paths, vocab.json/merges.txt
// save/load round trips, malformed tokenizer files with their messages, and
// the training time on the bundled corpus.
#include "harness.h"
#include "io/bpe_impl.h"
#include "io/pretok.h"
#include "internal.h"
#include <unistd.h>
#include <sys/stat.h>

static char g_dir[128];
static const char *path_of(const char *name) {
  static char p[4][256];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = th_alloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  b[*len] = 0;
  fclose(f);
  return b;
}

static void write_text(const char *path, const char *s) {
  FILE *f = fopen(path, "wb");
  fputs(s, f);
  fclose(f);
}

// ---------------------------------------------------------- pre-tokenizer --
static void test_pretok(void) {
  static const struct { const char *text, *want; } cases[] = {
      {"Hello world", "Hello| world"},
      {"don't", "don|'t"},
      {"I'll we've they're I'm he'd", "I|'ll| we|'ve| they|'re| I|'m| he|'d"},
      {"DON'T", "DON|'|T"},
      {"a  b", "a| | b"},
      {"a\t\tb", "a|\t|\t|b"},
      {"end   ", "end|   "},
      {"x 123 4", "x| 123| 4"},
      {"caf\xc3\xa9 au lait", "caf\xc3\xa9| au| lait"},
      {" ?!", " ?!"},
      {"''s", "''|s"},
      {"a\n\nb", "a|\n|\n|b"},
      {"  \thello", "  |\t|hello"},
      {"\n   indented", "\n  | indented"},
      {"1,000.5", "1|,|000|.|5"},
      {"x'y", "x|'|y"},
      {" 's", " '|s"},
      {"\xe4\xb8\xad\xe6\x96\x87 \xe5\xad\x97", "\xe4\xb8\xad\xe6\x96\x87| \xe5\xad\x97"},
      {"e\xcc\x81t\xc3\xa9", "e|\xcc\x81|t\xc3\xa9"},                 // combining acute is not a letter
      {"a\xc2\xa0" "b", "a|\xc2\xa0|b"},                              // NBSP is \s
      {"a \xe3\x80\x80" "b", "a| |\xe3\x80\x80|b"},                   // U+3000 is \s
      {"tab\tend\t", "tab|\t|end|\t"},
      {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ok", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd| ok"},
      {" ", " "}, {"''", "''"}, {"'", "'"}, {"a'", "a|'"}, {"'re'", "'re|'"}, {"  ", "  "},
      {"\xe2\x85\xab\xc2\xbd\xc2\xb2x", "\xe2\x85\xab\xc2\xbd\xc2\xb2|x"},  // Nl, No, No then a letter
      // invalid UTF-8: each bad byte is one "other" character
      {"a\xff\xfe" "b", "a|\xff\xfe|b"},
      {" \xff", " \xff"},
      {"\xc3(x", "\xc3(|x"},                                          // truncated 2-byte sequence
      {"\xed\xa0\x80z", "\xed\xa0\x80|z"},                            // a UTF-16 surrogate
      {"\xe2\x82", "\xe2\x82"},                                       // cut at the end
  };
  int bad = 0;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char got[256];
    size_t o = 0, len = strlen(cases[c].text);
    for (size_t pos = 0; pos < len;) {
      size_t e = ot_pretok_next(cases[c].text, len, pos);
      if (e <= pos || e > len) { o = 0; break; }
      if (pos) got[o++] = '|';
      memcpy(got + o, cases[c].text + pos, e - pos);
      o += e - pos;
      pos = e;
    }
    got[o] = 0;
    if (strcmp(got, cases[c].want) != 0) {
      bad++;
      th_check(false, "pretok case %zu: got \"%s\", want \"%s\"", c, got, cases[c].want);
    }
  }
  th_check(bad == 0, "pretok: %zu hand-checked splits", sizeof cases / sizeof *cases);
  th_check(ot_pretok_next("abc", 3, 3) == 3, "pretok at the end returns len");

  static const struct { uint32_t cp; int cls; } cl[] = {
      {'a', OT_UC_LETTER}, {'Z', OT_UC_LETTER}, {'5', OT_UC_NUMBER}, {' ', OT_UC_SPACE}, {'\v', OT_UC_SPACE},
      {'_', OT_UC_OTHER}, {0xE9, OT_UC_LETTER}, {0x3A9, OT_UC_LETTER}, {0x4E2D, OT_UC_LETTER},
      {0xAC00, OT_UC_LETTER}, {0x663, OT_UC_NUMBER}, {0xFF11, OT_UC_NUMBER}, {0x216B, OT_UC_NUMBER},
      {0xBD, OT_UC_NUMBER}, {0xA0, OT_UC_SPACE}, {0x85, OT_UC_SPACE}, {0x2028, OT_UC_SPACE},
      {0x3000, OT_UC_SPACE}, {0x1C, OT_UC_OTHER}, {0x200B, OT_UC_OTHER}, {0x301, OT_UC_OTHER},
      {0x1F44D, OT_UC_OTHER}, {0x20000, OT_UC_LETTER}, {0x10FFFF, OT_UC_OTHER}, {0xAA, OT_UC_LETTER},
  };
  bad = 0;
  for (size_t i = 0; i < sizeof cl / sizeof *cl; i++)
    if (ot_uc_class(cl[i].cp) != cl[i].cls) {
      bad++;
      th_check(false, "class of U+%04X: got %d want %d", cl[i].cp, ot_uc_class(cl[i].cp), cl[i].cls);
    }
  th_check(bad == 0, "unicode classes (tables from Unicode %s)", ot_pretok_unicode_version());
}

// ------------------------------------------------------------ naive trainer --
// Re-counts every pair each round: the definition the fast trainer must meet.
typedef struct { uint8_t *bytes; size_t *off, *len; int n; } naive_vocab;

static int naive_train(const char *text, size_t len, int n_merges, int32_t (*merges)[3], int *n_vocab,
                       int32_t **seg_out, size_t *seg_n) {
  const ot__b2u_t *m = ot__b2u();
  int V = 256 + n_merges;
  naive_vocab nv = {th_alloc(1 << 20), th_alloc(sizeof(size_t) * V), th_alloc(sizeof(size_t) * V), 0};
  size_t used = 0;
  for (int k = 0; k < 256; k++) { nv.bytes[used] = m->order[k]; nv.off[k] = used++; nv.len[k] = 1; }
  nv.n = 256;
  int32_t byte_id[256];
  for (int k = 0; k < 256; k++) byte_id[m->order[k]] = k;
  // unique words with counts (linear search: small corpus)
  int nw = 0, capw = 4096;
  size_t *woff = th_alloc(sizeof(size_t) * capw), *wlen = th_alloc(sizeof(size_t) * capw);
  int64_t *wcnt = th_alloc(sizeof(int64_t) * capw);
  for (size_t pos = 0; pos < len;) {
    size_t e = ot_pretok_next(text, len, pos);
    int w = 0;
    for (; w < nw; w++) if (wlen[w] == e - pos && memcmp(text + woff[w], text + pos, e - pos) == 0) break;
    if (w == nw) {
      if (nw == capw) { th_check(false, "naive: too many words"); return 0; }
      woff[nw] = pos; wlen[nw] = e - pos; wcnt[nw++] = 0;
    }
    wcnt[w]++;
    pos = e;
  }
  int32_t **ws = th_alloc(sizeof(int32_t *) * nw);
  size_t *wn = th_alloc(sizeof(size_t) * nw);
  for (int w = 0; w < nw; w++) {
    ws[w] = th_alloc(sizeof(int32_t) * wlen[w]);
    wn[w] = wlen[w];
    for (size_t i = 0; i < wlen[w]; i++) ws[w][i] = byte_id[(uint8_t)text[woff[w] + i]];
  }
  int64_t *cnt = th_alloc(sizeof(int64_t) * V * V);
  int done = 0;
  for (; done < n_merges; done++) {
    memset(cnt, 0, sizeof(int64_t) * V * V);
    for (int w = 0; w < nw; w++)
      for (size_t i = 0; i + 1 < wn[w]; i++) cnt[(size_t)ws[w][i] * V + ws[w][i + 1]] += wcnt[w];
    int64_t best = 0;
    int ba = -1, bb = -1;
    for (int a = 0; a < nv.n; a++)
      for (int b = 0; b < nv.n; b++)
        if (cnt[(size_t)a * V + b] > best) { best = cnt[(size_t)a * V + b]; ba = a; bb = b; }
    if (best < 2) break;
    uint8_t buf[4096];
    size_t l = nv.len[ba] + nv.len[bb];
    memcpy(buf, nv.bytes + nv.off[ba], nv.len[ba]);
    memcpy(buf + nv.len[ba], nv.bytes + nv.off[bb], nv.len[bb]);
    int c = -1;
    for (int k = 0; k < nv.n; k++) if (nv.len[k] == l && memcmp(nv.bytes + nv.off[k], buf, l) == 0) c = k;
    if (c < 0) { c = nv.n++; memcpy(nv.bytes + used, buf, l); nv.off[c] = used; nv.len[c] = l; used += l; }
    merges[done][0] = ba; merges[done][1] = bb; merges[done][2] = c;
    for (int w = 0; w < nw; w++) {
      size_t j = 0;
      for (size_t i = 0; i < wn[w];) {
        if (i + 1 < wn[w] && ws[w][i] == ba && ws[w][i + 1] == bb) { ws[w][j++] = c; i += 2; }
        else ws[w][j++] = ws[w][i++];
      }
      wn[w] = j;
    }
  }
  *n_vocab = nv.n;
  // the final segmentation of the text, piece by piece
  size_t sn = 0;
  int32_t *seg = th_alloc(sizeof(int32_t) * (len + 1));
  for (size_t pos = 0; pos < len;) {
    size_t e = ot_pretok_next(text, len, pos);
    for (int w = 0; w < nw; w++)
      if (wlen[w] == e - pos && memcmp(text + woff[w], text + pos, e - pos) == 0) {
        memcpy(seg + sn, ws[w], wn[w] * sizeof(int32_t));
        sn += wn[w];
        break;
      }
    pos = e;
  }
  *seg_out = seg;
  *seg_n = sn;
  for (int w = 0; w < nw; w++) free(ws[w]);
  free(ws); free(wn); free(woff); free(wlen); free(wcnt); free(cnt);
  free(nv.bytes); free(nv.off); free(nv.len);
  return done;
}

// Seeded text: words from a small lexicon, numbers, punctuation, varied spaces.
static char *synth_text(uint64_t seed, size_t n, size_t *len) {
  static const char *lex[] = {"the", "then", "there", "other", "brother", "thee", "thou", "art", "heart",
                              "don't", "I'll", "we're", "caf\xc3\xa9", "na\xc3\xafve", "\xce\xb1\xce\xb2",
                              "2024", "42", "!", "?!", "...", "--", "\xf0\x9f\x98\x80", "aaaa", "abab"};
  static const char *sp[] = {" ", " ", " ", "  ", "\n", "\n\n", "\t", " \n"};
  th_rng r = {seed};
  char *b = th_alloc(n + 64);
  size_t o = 0;
  while (o < n) {
    const char *w = lex[th_next(&r) % (sizeof lex / sizeof *lex)];
    const char *s = sp[th_next(&r) % (sizeof sp / sizeof *sp)];
    o += (size_t)sprintf(b + o, "%s%s", w, s);
  }
  b[o] = 0;
  *len = o;
  return b;
}

static void test_train_vs_naive(void) {
  size_t len;
  char *text = synth_text(11, 20000, &len);
  size_t clen;
  char *corp = slurp("data/shakespeare.txt", &clen);
  if (corp) {  // append a slice of real text
    char *both = th_alloc(len + 12000 + 1);
    memcpy(both, text, len);
    memcpy(both + len, corp + 100000, 12000);
    len += 12000;
    both[len] = 0;
    free(text);
    text = both;
    free(corp);
  }
  const int M = 240;
  int32_t (*nm)[3] = th_alloc(sizeof(int32_t) * 3 * M);
  int nvocab = 0;
  int32_t *seg = NULL;
  size_t seg_n = 0;
  int done = naive_train(text, len, M, nm, &nvocab, &seg, &seg_n);
  ot_bpe *t = NULL;
  ot_status ts = ot_bpe_train(&t, text, len, nvocab + 1, false);
  if (!th_check(ts == OT_OK, "train (%s)", ot_last_error())) return;
  th_check(done == M && t->n_merges == M && ot_bpe_vocab_size(t) == nvocab + 1 && ot_bpe_eot(t) == nvocab,
           "train: %d merges, vocab %d with <|endoftext|> last (naive: %d merges, %d tokens)", t->n_merges,
           ot_bpe_vocab_size(t), done, nvocab);
  int first_diff = -1;
  for (int r = 0; r < done && r < t->n_merges && first_diff < 0; r++)
    if (memcmp(t->merge[r], nm[r], sizeof nm[r]) != 0) first_diff = r;
  th_check(first_diff < 0, "every merge equals the naive trainer's (first difference at rank %d: %d+%d->%d vs %d+%d->%d)",
           first_diff, first_diff >= 0 ? t->merge[first_diff][0] : 0, first_diff >= 0 ? t->merge[first_diff][1] : 0,
           first_diff >= 0 ? t->merge[first_diff][2] : 0, first_diff >= 0 ? nm[first_diff][0] : 0,
           first_diff >= 0 ? nm[first_diff][1] : 0, first_diff >= 0 ? nm[first_diff][2] : 0);
  int32_t *ids = th_alloc(sizeof(int32_t) * (len + 1));
  size_t n = 0;
  ot_status es = ot_bpe_encode(t, text, len, false, ids, len, &n);
  th_check(es == OT_OK && n == seg_n &&
               memcmp(ids, seg, n * sizeof *ids) == 0,
           "encoding the training text reproduces the training segmentation (%zu vs %zu tokens)", n, seg_n);
  // determinism: a second training gives the same tables and the same files
  ot_bpe *t2 = NULL;
  ot_bpe_train(&t2, text, len, nvocab + 1, false);
  th_check(t2 && t2->n_vocab == t->n_vocab && t2->n_bytes == t->n_bytes &&
               memcmp(t2->bytes, t->bytes, t->n_bytes) == 0 &&
               memcmp(t2->merge, t->merge, sizeof *t->merge * (size_t)t->n_merges) == 0,
           "training twice gives identical vocabularies and merges");
  // vocab_size caps the merges; a tiny corpus stops when no pair repeats
  ot_bpe *t3 = NULL;
  th_check(ot_bpe_train(&t3, text, len, 300, false) == OT_OK && ot_bpe_vocab_size(t3) == 300 &&
               memcmp(t3->merge, t->merge, sizeof *t->merge * 43) == 0,
           "vocab 300: 43 merges, a prefix of the longer run");
  ot_bpe_free(t3);
  t3 = NULL;
  th_check(ot_bpe_train(&t3, "abcd efgh", 9, 1000, false) == OT_OK && ot_bpe_merges(t3) == 0 &&
               ot_bpe_vocab_size(t3) == 257,
           "'abcd efgh': no pair occurs twice, so no merge and vocab 257");
  ot_bpe_free(t3);
  t3 = NULL;
  th_check(ot_bpe_train(&t3, "abcabc", 6, 1000, false) == OT_OK && ot_bpe_merges(t3) == 2 &&
               ot_bpe_vocab_size(t3) == 259,
           "'abcabc' (one word seen once): pairs count per occurrence: 'a b', 'ab c', then stop");
  ot_bpe_free(t3);
  t3 = NULL;
  th_check(ot_bpe_train(&t3, "ab ab ab<|endoftext|>ab", 23, 1000, false) == OT_OK && ot_bpe_merges(t3) == 2,
           "<|endoftext|> separates words in training (merges: 'a b', then ' ab')");
  if (t3) {
    int32_t x[32];
    size_t k = 0;
    ot_bpe_encode(t3, "ab<|endoftext|>ab", 17, true, x, 32, &k);
    th_check(k == 3 && x[1] == ot_bpe_eot(t3) && x[0] == x[2], "allow_special: the special token is one id");
    ot_bpe_encode(t3, "ab<|endoftext|>ab", 17, false, x, 32, &k);
    bool no_eot = k > 3;
    for (size_t i = 0; i < k; i++) no_eot &= x[i] != ot_bpe_eot(t3);
    th_check(no_eot, "without allow_special it is plain text (%zu ids)", k);
  }
  ot_bpe_free(t3);

  // save/load round trip: same tables, same ids, identical files on re-save
  const char *vj = path_of("vocab.json"), *mt = path_of("merges.txt");
  char vj2[256], mt2[256];
  snprintf(vj2, sizeof vj2, "%s/vocab2.json", g_dir);
  snprintf(mt2, sizeof mt2, "%s/merges2.txt", g_dir);
  ot_bpe *t4 = NULL;
  ot_status ss = ot_bpe_save(t, vj, mt);
  if (ss == OT_OK) ss = ot_bpe_load(&t4, vj, mt);
  th_check(ss == OT_OK, "save + load (%s)", ot_last_error());
  if (t4) {
    th_check(t4->n_vocab == t->n_vocab && t4->n_merges == t->n_merges && t4->eot == t->eot &&
                 memcmp(t4->merge, t->merge, sizeof *t->merge * (size_t)t->n_merges) == 0 &&
                 memcmp(t4->bytes, t->bytes, t->n_bytes) == 0,
             "loaded tables equal the trained ones");
    size_t n4 = 0;
    int32_t *ids4 = th_alloc(sizeof(int32_t) * (len + 1));
    ot_bpe_encode(t4, text, len, false, ids4, len, &n4);
    th_check(n4 == n && memcmp(ids4, ids, n * sizeof *ids) == 0, "loaded tokenizer encodes identically");
    free(ids4);
    ot_bpe_save(t4, vj2, mt2);
    size_t a1, a2, b1, b2;
    char *x1 = slurp(vj, &a1), *x2 = slurp(vj2, &a2), *y1 = slurp(mt, &b1), *y2 = slurp(mt2, &b2);
    th_check(a1 == a2 && b1 == b2 && !memcmp(x1, x2, a1) && !memcmp(y1, y2, b1), "re-saved files are identical");
    free(x1); free(x2); free(y1); free(y2);
    unlink(vj2); unlink(mt2);
  }
  ot_bpe_free(t4);
  ot_bpe_free(t2);
  unlink(vj); unlink(mt);
  free(ids); free(seg); free(nm); free(text);
  ot_bpe_free(t);
}

// ------------------------------------------------------------- round trip --
static void roundtrip(const ot_bpe *t, const char *label) {
  th_rng r = {99};
  int bad = 0, badheap = 0;
  char *buf = th_alloc(4096), *back = th_alloc(4096);
  int32_t *ids = th_alloc(4096 * sizeof *ids), *ids2 = th_alloc(4096 * sizeof *ids2);
  static const char *frag[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", " ", "  ", "\n", "'s", "the",
                               "<|endoftext|>", "\xff", "\xc3", "\xed\xa0\x80", "\0", "12", "\xe3\x80\x80"};
  for (int it = 0; it < 300; it++) {
    size_t n = 0, want = th_next(&r) % 600;
    while (n < want) {
      if (th_next(&r) % 2) buf[n++] = (char)(th_next(&r) & 0xFF);  // any byte
      else {
        const char *f = frag[th_next(&r) % (sizeof frag / sizeof *frag)];
        size_t l = f[0] ? strlen(f) : 1;
        memcpy(buf + n, f, l);
        n += l;
      }
    }
    bool special = it % 3 == 0;
    size_t m = 0, m2 = 0, bl = 0;
    ot_status s = ot_bpe_encode(t, buf, n, special, ids, 4096, &m);
    bool ok = s == OT_OK && ot_bpe_decode(t, ids, m, back, 4096, &bl) == OT_OK && bl == n && !memcmp(back, buf, n);
    if (!ok) bad++;
    size_t saved = ot__bpe_heap_min;
    ot__bpe_heap_min = 1;
    ot_bpe_encode(t, buf, n, special, ids2, 4096, &m2);
    ot__bpe_heap_min = saved;
    if (m2 != m || memcmp(ids, ids2, m * sizeof *ids)) badheap++;
  }
  // long pieces go through the heap path at the default threshold
  for (int it = 0; it < 4; it++) {
    size_t n = 3000;
    for (size_t i = 0; i < n; i++) buf[i] = it == 0 ? 'a' : it == 1 ? "ab"[i % 2] : it == 2 ? ' ' : "thee"[th_next(&r) % 4];
    size_t m = 0, m2 = 0, bl = 0;
    ot_bpe_encode(t, buf, n, false, ids, 4096, &m);
    size_t saved = ot__bpe_heap_min;
    bool ok = ot_bpe_decode(t, ids, m, back, 4096, &bl) == OT_OK && bl == n && !memcmp(back, buf, n);
    if (!ok) bad++;
    ot_bpe_encode(t, buf, 256, false, ids, 4096, &m);   // scan path (256 <= bound)
    ot__bpe_heap_min = 1;
    ot_bpe_encode(t, buf, 256, false, ids2, 4096, &m2);
    ot__bpe_heap_min = saved;
    if (m2 != m || memcmp(ids, ids2, m * sizeof *ids)) badheap++;
  }
  th_check(bad == 0, "%s: decode(encode(x)) == x on 304 random byte strings (%d failures)", label, bad);
  th_check(badheap == 0, "%s: heap and scan merge paths give the same ids (%d differ)", label, badheap);
  size_t m = 0;
  th_check_error(ot_bpe_encode(t, "hello world", 11, false, ids, 1, &m), OT_EINVAL, "capacity 1 too small",
                 "encode into a too small buffer");
  int32_t badid = ot_bpe_vocab_size(t);
  size_t bl = 0;
  th_check_error(ot_bpe_decode(t, &badid, 1, back, 16, &bl), OT_EINVAL, "out of range", "decode an id >= vocab");
  int32_t one = ot_bpe_eot(t) >= 0 ? ot_bpe_eot(t) : 0;
  th_check_error(ot_bpe_decode(t, &one, 1, back, 2, &bl), OT_EINVAL, "capacity 2 too small", "decode into a small buffer");
  free(buf); free(back); free(ids); free(ids2);
}

// ------------------------------------------------------- malformed files ---
// vocab.json body for the 256 byte tokens, in GPT-2's alphabet, ids 0..255.
static size_t byte_vocab(char *o) {
  const ot__b2u_t *m = ot__b2u();
  size_t n = 0;
  for (int k = 0; k < 256; k++) {
    unsigned cp = m->b2u[m->order[k]];
    n += (size_t)sprintf(o + n, "%s\"", k ? "," : "");
    if (cp == '"' || cp == '\\') o[n++] = '\\';
    if (cp < 0x80) o[n++] = (char)cp;
    else { o[n++] = (char)(0xC0 | (cp >> 6)); o[n++] = (char)(0x80 | (cp & 0x3F)); }
    n += (size_t)sprintf(o + n, "\":%d", k);
  }
  return n;
}

static void check_load(const char *vocab, const char *merges, ot_status want, const char *needle, const char *what) {
  const char *vj = path_of("bad_vocab.json"), *mt = path_of("bad_merges.txt");
  write_text(vj, vocab);
  write_text(mt, merges);
  ot_bpe *t = NULL;
  th_check_error(ot_bpe_load(&t, vj, mt), want, needle, what);
  th_check(t == NULL, "%s: nothing returned", what);
  ot_bpe_free(t);
}

static void test_malformed(void) {
  static char v[8192], w[16384];
  (void)byte_vocab(v);
  // valid: the byte tokens + "th" + "the" + <|endoftext|>
  snprintf(w, sizeof w, "{%s,\"th\":256,\"the\":257,\"<|endoftext|>\":258}", v);
  const char *vj = path_of("ok_vocab.json"), *mt = path_of("ok_merges.txt");
  write_text(vj, w);
  write_text(mt, "#version: 0.2\nt h\nth e\n");
  ot_bpe *t = NULL;
  ot_status ls = ot_bpe_load(&t, vj, mt);
  th_check(ls == OT_OK && ot_bpe_vocab_size(t) == 259 && ot_bpe_merges(t) == 2 &&
               ot_bpe_eot(t) == 258,
           "minimal vocab loads (%s)", ot_last_error());
  if (t) {
    int32_t ids[8];
    size_t k = 0;
    ot_bpe_encode(t, "the them", 8, false, ids, 8, &k);
    th_check(k == 4 && ids[0] == 257 && ids[2] == 257, "minimal vocab encodes 'the'|' '|'the'|'m' (%zu ids)", k);
  }
  ot_bpe_free(t);
  unlink(vj); unlink(mt);

  char *ok = strdup(w);
  check_load("[1, 2]", "", OT_EFORMAT, "expected a JSON object", "vocab is an array");
  check_load("{\"a\": 0", "", OT_EFORMAT, "invalid JSON", "truncated JSON");
  check_load("{\"a\": 0}", "", OT_EFORMAT, "1 tokens; a byte-level vocabulary has at least the 256", "too few tokens");
  snprintf(w, sizeof w, "{%s,\"th\":\"256\"}", v);
  check_load(w, "", OT_EFORMAT, "\"th\": id must be an integer in [0, 257)", "string id");
  snprintf(w, sizeof w, "{%s,\"th\":300}", v);
  check_load(w, "", OT_EFORMAT, "id must be an integer in [0, 257)", "id out of range");
  snprintf(w, sizeof w, "{%s,\"th\":255}", v);
  check_load(w, "", OT_EFORMAT, "id 255 is given to both", "duplicate id");
  // drop byte 'A' (id 32) and put "th" in its place
  char *a = strstr(v, "\"A\":32");
  snprintf(w, sizeof w, "{%.*s\"th\":32%s}", (int)(a - v), v, a + 6);
  check_load(w, "", OT_EFORMAT, "no token for the byte 0x41", "a byte without a token");
  snprintf(w, sizeof w, "{%s,\"\\u0100\":256}", v);              // U+0100 is GPT-2's spelling of byte 0x00
  check_load(w, "", OT_EFORMAT, "have the same bytes", "two tokens with the same bytes");
  check_load(ok, "#version: 0.2\nth\n", OT_EFORMAT, "bad_merges.txt:2: expected two tokens separated by one space",
             "merge without a space");
  check_load(ok, "#version: 0.2\nt  h\n", OT_EFORMAT, ":2: expected two tokens", "two spaces");
  check_load(ok, "t h\nx y\n", OT_EFORMAT, ":2: the merged token of \"x y\" is not in vocab.json", "unknown merge result");
  check_load(ok, "#version: 0.2\nt h\nt h\n", OT_EFORMAT, ":3: duplicate merge \"t h\"", "duplicate merge");
  check_load(ok, "#version: 0.2\nt h\n\nth e\n", OT_EFORMAT, ":3: empty line", "empty line inside");
  check_load(ok, "#version: 0.2\nt \xe4\xb8\xad\n", OT_EFORMAT, "outside GPT-2's byte alphabet", "non-alphabet char");
  check_load(ok, "#version: 0.2\nt \xff\n", OT_EFORMAT, ":2: invalid UTF-8", "invalid UTF-8 merge");
  ot_bpe *x = NULL;
  th_check_error(ot_bpe_load(&x, path_of("nope.json"), path_of("nope.txt")), OT_EIO, "cannot open", "missing files");
  th_check_error(ot_bpe_train(&x, "abc", 3, 256, false), OT_EINVAL, "vocab_size=256 must be in [257", "vocab too small");
  free(ok);
}

static void test_corpus_speed(void) {
  size_t len;
  char *text = slurp("data/shakespeare.txt", &len);
  if (!th_check(text != NULL, "data/shakespeare.txt present")) return;
  ot_bpe *t = NULL;
  double t0 = ot_now();
  ot_status s = ot_bpe_train(&t, text, len, 8192, false);
  double dt = ot_now() - t0;
  th_check(s == OT_OK && ot_bpe_vocab_size(t) == 8192, "train 8192 on the corpus (%s)", ot_last_error());
  int32_t *ids = th_alloc(len * sizeof *ids);
  size_t n = 0;
  t0 = ot_now();
  ot_bpe_encode(t, text, len, false, ids, len, &n);
  double de = ot_now() - t0;
  printf("bpe train: %.2f MB corpus -> 8192 tokens in %.2f s; encode %.1f MB/s, %.2f bytes/token\n",
         len / 1e6, dt, len / 1e6 / de, (double)len / (double)(n ? n : 1));
  roundtrip(t, "trained 8192");
  free(ids);
  free(text);
  ot_bpe_free(t);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ot_test_bpe_%d", (int)getpid());
  mkdir(g_dir, 0755);
  test_pretok();
  test_train_vs_naive();
  test_malformed();
  test_corpus_speed();
  ot_bpe *g = NULL;
  ot_status gs = ot_bpe_load(&g, "data/gpt2/vocab.json", "data/gpt2/merges.txt");
  if (th_check(gs == OT_OK, "load GPT-2 (%s)",
               ot_last_error()))
    roundtrip(g, "gpt2");
  ot_bpe_free(g);
  ot_scratch_release();
  th_check(ot_mem_current(OT_MEM_OTHER) == 0, "all tracked memory released (%zu left)", ot_mem_current(OT_MEM_OTHER));
  rmdir(g_dir);
  return th_finish();
}
