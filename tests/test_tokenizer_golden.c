// GPT-2 tokenizer golden test: data/gpt2/vocab.json + merges.txt loaded by
// ot_bpe_load must give exactly the ids of the reference tokenizer (tiktoken,
// cross-checked with GPT-2's own algorithm by tools/gen_tokenizer_golden.py)
// on tests/golden/tokenizer_gpt2.json: hand-written tricky texts, seeded
// random mixes, and the whole bundled corpus (count + FNV-1a-64 of the ids).
// Both merge paths (linear scan and heap) are checked; decode restores text.
#include "harness.h"
#include "io/json.h"
#include "io/bpe_impl.h"
#include "internal.h"
#include <unistd.h>
#include <sys/stat.h>

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = th_alloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  fclose(f);
  b[got] = 0;
  *len = got;
  return b;
}

static uint64_t fnv1a64_ids(const int32_t *ids, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) h = (h ^ (((uint32_t)ids[i] >> (8 * k)) & 0xFF)) * 0x100000001b3ull;
  return h;
}

// Encodes every case and compares with the golden ids; returns mismatches.
static int check_cases(const ot_bpe *t, const ot_json *cases, const char *label) {
  int bad = 0, n = 0;
  for (const ot_json *c = cases->first; c; c = c->next, n++) {
    const ot_json *name = ot_json_get(c, "name"), *text = ot_json_get(c, "text");
    const ot_json *allow = ot_json_get(c, "allow_special"), *ids = ot_json_get(c, "ids");
    size_t cap = text->len + 1, m = 0;
    int32_t *got = th_alloc(cap * sizeof *got);
    ot_status s = ot_bpe_encode(t, text->s, text->len, allow->b, got, cap, &m);
    bool ok = s == OT_OK && (int)m == ids->n;
    int i = 0;
    for (const ot_json *v = ids->first; ok && v; v = v->next, i++) ok = got[i] == v->i;
    if (!ok) {
      bad++;
      i = 0;
      const ot_json *v = ids->first;
      while (v && i < (int)m && got[i] == v->i) { v = v->next; i++; }
      th_check(false, "%s: case '%s': %zu ids vs %d golden, first difference at %d (got %d, want %lld) %s",
               label, name->s, m, ids->n, i, i < (int)m ? got[i] : -1, v ? (long long)v->i : -1LL,
               s == OT_OK ? "" : ot_last_error());
    }
    char *back = th_alloc(text->len + 1);
    size_t bl = 0;
    bool dec = ot_bpe_decode(t, got, m, back, text->len + 1, &bl) == OT_OK && bl == text->len &&
               memcmp(back, text->s, bl) == 0;
    if (!dec) { bad++; th_check(false, "%s: case '%s': decode(encode(text)) != text", label, name->s); }
    free(back);
    free(got);
  }
  th_check(bad == 0, "%s: %d golden cases, %d mismatches", label, n, bad);
  return bad;
}

int main(void) {
  ot_bpe *t = NULL;
  ot_status ls = ot_bpe_load(&t, "data/gpt2/vocab.json", "data/gpt2/merges.txt");
  if (!th_check(ls == OT_OK,
                "load GPT-2 vocab.json + merges.txt (%s)", ot_last_error()))
    return th_finish();
  th_check(ot_bpe_vocab_size(t) == 50257 && ot_bpe_merges(t) == 50000 && ot_bpe_eot(t) == 50256,
           "GPT-2: 50257 tokens, 50000 merges, <|endoftext|> = 50256 (got %d, %d, %d)",
           ot_bpe_vocab_size(t), ot_bpe_merges(t), ot_bpe_eot(t));
  size_t tok_len;
  const char *tk = ot_bpe_token(t, 220, &tok_len);
  th_check(tk && tok_len == 1 && tk[0] == ' ', "token 220 is the space byte");

  size_t glen;
  char *gtext = slurp("tests/golden/tokenizer_gpt2.json", &glen);
  ot_json_doc doc = {0};
  ot_status js = gtext ? ot_json_parse(&doc, gtext, glen, 0, "tokenizer_gpt2.json") : OT_EIO;
  if (!th_check(js == OT_OK,
                "golden file parses (%s)", ot_last_error()))
    return th_finish();
  const ot_json *cases = ot_json_get(doc.root, "cases"), *corpus = ot_json_get(doc.root, "corpus");
  th_check(cases && cases->n > 300, "golden: %d cases", cases ? cases->n : 0);

  check_cases(t, cases, "scan path");
  size_t saved = ot__bpe_heap_min;
  ot__bpe_heap_min = 1;  // every piece of 2+ bytes through the heap path
  check_cases(t, cases, "heap path");
  ot__bpe_heap_min = saved;

  // save + load round trip of the GPT-2 files keeps every id
  char dir[128], vj[160], mt[160];
  snprintf(dir, sizeof dir, "/tmp/ot_test_tokgold_%d", (int)getpid());
  mkdir(dir, 0755);
  snprintf(vj, sizeof vj, "%s/vocab.json", dir);
  snprintf(mt, sizeof mt, "%s/merges.txt", dir);
  ot_bpe *t2 = NULL;
  ot_status ss = ot_bpe_save(t, vj, mt);
  if (ss == OT_OK) ss = ot_bpe_load(&t2, vj, mt);
  th_check(ss == OT_OK,
           "GPT-2 save + load (%s)", ot_last_error());
  if (t2) check_cases(t2, cases, "reloaded");
  size_t l1, l2;
  char *orig = slurp("data/gpt2/vocab.json", &l1), *mine = slurp(vj, &l2);
  while (l1 && (orig[l1 - 1] == '\n')) l1--;
  while (l2 && (mine[l2 - 1] == '\n')) l2--;
  th_check(l1 == l2 && memcmp(orig, mine, l1) == 0, "saved vocab.json is byte-identical to GPT-2's");
  free(orig); free(mine);
  ot_bpe_free(t2);
  unlink(vj); unlink(mt); rmdir(dir);

  // the whole corpus: token count + FNV-1a-64 of the ids, and throughput
  size_t clen;
  char *ctext = corpus ? slurp(ot_json_get(corpus, "path")->s, &clen) : NULL;
  if (th_check(ctext && (int64_t)clen == ot_json_get(corpus, "bytes")->i, "corpus file present with the golden size")) {
    int32_t *ids = th_alloc(clen * sizeof *ids);
    size_t n = 0;
    double t0 = ot_now();
    ot_status s = ot_bpe_encode(t, ctext, clen, false, ids, clen, &n);
    double dt = ot_now() - t0;
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)fnv1a64_ids(ids, n));
    th_check(s == OT_OK && (int64_t)n == ot_json_get(corpus, "tokens")->i &&
                 strcmp(want, ot_json_get(corpus, "fnv1a64")->s) == 0,
             "corpus: %zu tokens (golden %lld), fnv1a64 %s (golden %s)", n,
             (long long)ot_json_get(corpus, "tokens")->i, want, ot_json_get(corpus, "fnv1a64")->s);
    printf("encode: %.2f MB in %.3f s = %.1f MB/s (%.2f bytes/token)\n", clen / 1e6, dt, clen / 1e6 / dt,
           (double)clen / (double)(n ? n : 1));
    free(ids);
  }
  free(ctext);
  ot_json_free(&doc);
  free(gtext);
  ot_bpe_free(t);
  ot_scratch_release();
  th_check(ot_mem_current(OT_MEM_OTHER) == 0 && ot_mem_current(OT_MEM_WORKSPACE) == 0,
           "all tracked memory released (other %zu, workspace %zu)", ot_mem_current(OT_MEM_OTHER),
           ot_mem_current(OT_MEM_WORKSPACE));
  return th_finish();
}
