// libFuzzer target: parallel text (ot_bitext_open, ot_bitext_train_bpe) and
// the batcher over what it accepts. Input: one byte of settings (max_len,
// refuse_long, world, shuffle, train), the source file, a NUL byte, the
// target file (no NUL: the target is empty). Invariants: accepted files give
// pairs + empty + too_long == lines, every side within max_len and decoding to
// UTF-8 bytes without a line break; one epoch of batches covers every pair
// exactly once, within the budget, with eos/pad/ignore where they belong, on
// every rank; a refusal has a message; tracked memory returns to its start.
#include "fuzz_common.h"
#include <string.h>

static ot_bpe *g_bpe;   // trained once, kept (outside the per-input memory check)

static void batches(const ot_bitext *bt, uint8_t flags, int max_len) {
  const int world = 1 + (flags >> 4 & 1), L = max_len + 1;
  const int64_t P = ot_bitext_pairs(bt), budget = (world == 1 ? 1 : 2 * world) * (int64_t)L + (flags >> 5);
  uint8_t *seen = ot_mem_alloc((size_t)P, OT_MEM_OTHER);
  FZ_CHECK(seen != NULL, "out of memory");
  memset(seen, 0, (size_t)P);
  const int32_t eos = ot_bitext_eos(bt);
  for (int r = 0; r < world; r++) {
    ot_bitext_batcher_config c = {budget, 1 + (flags & 3), (flags & 8) != 0, 5, r, world};
    ot_bitext_batcher *b = NULL;
    ot_status s = ot_bitext_batcher_open(&b, bt, &c);
    if (s != OT_OK) {
      FZ_CHECK(P < world, "batcher refused %lld pairs (world %d, budget %lld): %s", (long long)P, world,
               (long long)budget, ot_last_error());
      fz_refused(s, "ot_bitext_batcher_open");
      continue;
    }
    const int64_t nb = ot_bitext_batches(b, 0);
    for (int64_t k = 0; k < nb; k++) {
      ot_bitext_batch x;
      FZ_CHECK(ot_bitext_next(b, &x) == OT_OK, "next: %s", ot_last_error());
      FZ_CHECK(x.B >= 1 && x.global_rows >= world, "every rank has a row");
      FZ_CHECK((int64_t)x.B * (x.S > x.T ? x.S : x.T) <= budget, "rank part over the budget");
      for (int i = 0; i < x.B; i++) {
        const int32_t *s1, *t1;
        int ns, nt;
        ot_bitext_pair(bt, x.pair[i], &s1, &ns, &t1, &nt);
        seen[x.pair[i]]++;
        FZ_CHECK(x.src_len[i] == ns + 1 && x.tgt_len[i] == nt + 1, "row lengths");
        for (int j = 0; j < x.S; j++) FZ_CHECK(x.src[i * x.S + j] == (j < ns ? s1[j] : eos), "src row");
        for (int j = 0; j < x.T; j++) {
          FZ_CHECK(x.dec_in[i * x.T + j] == (j == 0 ? eos : j <= nt ? t1[j - 1] : eos), "dec_in row");
          FZ_CHECK(x.dec_tgt[i * x.T + j] == (j < nt ? t1[j] : j == nt ? eos : -1), "dec_tgt row");
        }
      }
    }
    ot_loader_state st;
    ot_bitext_get_state(b, &st);
    FZ_CHECK(st.epoch == 1 && st.index == 0 && ot_bitext_set_state(b, &st) == OT_OK, "state after an epoch");
    ot_bitext_batcher_close(b);
  }
  if (P >= world)
    for (int64_t i = 0; i < P; i++) FZ_CHECK(seen[i] == 1, "pair %lld seen %d times in an epoch", (long long)i, seen[i]);
  ot_mem_free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_bpe) {
    static const char text[] = "the file is open. le fichier est ouvert. caf\xc3\xa9 the the le le";
    FZ_CHECK(ot_bpe_train(&g_bpe, text, sizeof text - 1, 300, false) == OT_OK, "train: %s", ot_last_error());
  }
  const size_t mem0 = fz_mem_total();
  const uint8_t flags = size ? data[0] : 0;
  data += size ? 1 : 0;
  size -= size ? 1 : 0;
  const uint8_t *z = memchr(data, 0, size);
  const size_t sn = z ? (size_t)(z - data) : size;
  char sp[64], tp[64];
  int sfd = fz_memfile(data, sn, sp, sizeof sp);
  int tfd = fz_memfile(z ? z + 1 : data, z ? size - sn - 1 : 0, tp, sizeof tp);
  const int max_len = 1 + (flags >> 1 & 3) * 8;
  ot_bitext_opts o = {g_bpe, max_len, (flags & 64) != 0};
  ot_bitext *bt = NULL;
  ot_status s = ot_bitext_open(&bt, sp, tp, &o);
  if (s == OT_OK) {
    ot_bitext_stats st;
    ot_bitext_get_stats(bt, &st);
    FZ_CHECK(st.pairs + st.empty + st.too_long == st.lines && st.pairs > 0, "pair counts");
    FZ_CHECK(!o.refuse_long || st.too_long == 0, "refuse_long skipped a pair");
    char buf[4096];
    for (int64_t i = 0; i < st.pairs; i++) {
      const int32_t *a, *b;
      int na, nb;
      int64_t line = ot_bitext_pair(bt, i, &a, &na, &b, &nb);
      FZ_CHECK(line >= 1 && line <= st.lines && na >= 1 && nb >= 1 && na <= max_len && nb <= max_len, "pair %lld",
               (long long)i);
      size_t n = 0;
      FZ_CHECK(ot_bpe_decode(g_bpe, a, (size_t)na, buf, sizeof buf, &n) == OT_OK && !memchr(buf, '\n', n),
               "source decodes to a line");
      FZ_CHECK(ot_bpe_decode(g_bpe, b, (size_t)nb, buf, sizeof buf, &n) == OT_OK && !memchr(buf, '\n', n),
               "target decodes to a line");
    }
    batches(bt, flags, st.max_src > st.max_tgt ? st.max_src : st.max_tgt);
    ot_bitext_close(bt);
  } else {
    fz_refused(s, "ot_bitext_open");
  }
  if (flags & 128) {
    ot_bpe *t = NULL;
    s = ot_bitext_train_bpe(&t, sp, tp, 260 + (flags & 15), false);
    if (s == OT_OK) {
      FZ_CHECK(ot_bpe_eot(t) >= 0 && ot_bpe_vocab_size(t) <= 260 + (flags & 15), "trained vocab");
      ot_bpe_free(t);
    } else {
      fz_refused(s, "ot_bitext_train_bpe");
    }
  }
  fz_close(sfd);
  fz_close(tfd);
  fz_mem_back(mem0, "bitext");
  return 0;
}
