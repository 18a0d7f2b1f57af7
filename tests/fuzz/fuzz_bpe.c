// libFuzzer target: the BPE tokenizer files (ot_bpe_load). Input: vocab.json,
// a NUL byte, merges.txt (no NUL: merges.txt empty). Invariants: an accepted
// tokenizer decodes its own encoding of a few strings back to the same bytes,
// saves and reloads to one that encodes them alike; a refused pair of files
// has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <string.h>

static const char *const k_texts[] = {
  "hello world", "the quick brown fox's 12 jumps\n\n  ", "caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80",
  "\xff\xfe invalid \xc3", "<|endoftext|>a<|endoftext|>", "",
};

// ids of text under t (cap len + 1), *n set; aborts when encoding fails.
static int32_t *encode(const ot_bpe *t, const char *text, size_t len, bool special, size_t *n) {
  int32_t *ids = ot_mem_alloc(sizeof(int32_t) * (len + 1), OT_MEM_OTHER);
  FZ_CHECK(ids != NULL, "out of memory");
  ot_status s = ot_bpe_encode(t, text, len, special, ids, len + 1, n);
  FZ_CHECK(s == OT_OK, "encode of an accepted tokenizer failed: %s", ot_last_error());
  return ids;
}

static void check_tokenizer(const ot_bpe *t) {
  char vp[600], mp[600];
  fz_scratch(vp, sizeof vp, "vocab.json");
  fz_scratch(mp, sizeof mp, "merges.txt");
  ot_status s = ot_bpe_save(t, vp, mp);
  FZ_CHECK(s == OT_OK, "an accepted tokenizer does not save: %s", ot_last_error());
  ot_bpe *u = NULL;
  s = ot_bpe_load(&u, vp, mp);
  FZ_CHECK(s == OT_OK, "what we saved does not load: %s", ot_last_error());
  FZ_CHECK(ot_bpe_vocab_size(u) == ot_bpe_vocab_size(t) && ot_bpe_merges(u) == ot_bpe_merges(t) &&
           ot_bpe_eot(u) == ot_bpe_eot(t), "vocab/merges/eot differ after save+load");
  for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
    const char *x = k_texts[i];
    const size_t len = strlen(x);
    for (int sp = 0; sp < 2; sp++) {
      size_t n = 0, m = 0, dl = 0;
      int32_t *a = encode(t, x, len, sp, &n), *b = encode(u, x, len, sp, &m);
      FZ_CHECK(n == m && (n == 0 || memcmp(a, b, n * sizeof *a) == 0), "save+load encodes '%s' otherwise", x);
      char out[256];
      s = ot_bpe_decode(t, a, n, out, sizeof out, &dl);
      FZ_CHECK(s == OT_OK && dl == len && memcmp(out, x, len) == 0, "decode(encode('%s')) differs", x);
      ot_mem_free(a);
      ot_mem_free(b);
    }
  }
  ot_bpe_free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  const uint8_t *z = memchr(data, 0, size);
  const size_t vn = z ? (size_t)(z - data) : size;
  char vp[64], mp[64];
  int vfd = fz_memfile(data, vn, vp, sizeof vp);
  int mfd = fz_memfile(z ? z + 1 : data, z ? size - vn - 1 : 0, mp, sizeof mp);
  ot_bpe *t = NULL;
  ot_status s = ot_bpe_load(&t, vp, mp);
  if (s == OT_OK) check_tokenizer(t);
  else fz_refused(s, "ot_bpe_load");
  ot_bpe_free(t);
  fz_close(vfd);
  fz_close(mfd);
  fz_mem_back(mem0, "bpe");
  return 0;
}
