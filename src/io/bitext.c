// Parallel text: both files read and checked (bitext_read.c), every pair
// tokenized once with the joint BPE into one id pool; and the joint BPE's
// training over both sides' lines.
#include "bitext_impl.h"
#include "files.h"

void ot_bitext_close(ot_bitext *bt) {
  if (!bt) return;
  void *ps[] = {bt->line, bt->so, bt->to, bt->sn, bt->tn, bt->ids};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
  ot_mem_free(bt);
}

// Both files read, each checked, equal line counts.
static ot_status read_both(ot__lines *a, ot__lines *b, const char *pa, const char *pb, const char *fn) {
  memset(b, 0, sizeof *b);
  OT_TRY(ot__lines_read(a, pa, fn));
  ot_status s = ot__lines_read(b, pb, fn);
  if (s == OT_OK) s = ot__lines_same_count(a, pa, b, pb, fn);
  if (s != OT_OK) { ot__lines_free(a); ot__lines_free(b); }
  return s;
}

// Appends the ids of line i of L to the pool at *n; sets *k to their count.
static ot_status encode_line(ot_bitext *bt, size_t *cap, size_t *n, const ot_bpe *bpe, const ot__lines *L,
                             int64_t i, size_t *k) {
  OT_TRY(ot__grow((void **)&bt->ids, cap, *n + L->len[i] + 1, sizeof *bt->ids));
  return ot_bpe_encode(bpe, L->buf + L->off[i], L->len[i], false, bt->ids + *n, *cap - *n, k);
}

static ot_status fill(ot_bitext *bt, const ot__lines *A, const ot__lines *Bl, const char *pa, const char *pb,
                      const ot_bpe *bpe, int max_len, bool refuse) {
  const char *fn = "ot_bitext_open";
  size_t cap = 0, n = 0;
  uint64_t h = 0x6269746578740000ull;
  for (int64_t i = 0; i < A->n; i++) {
    if (ot__line_blank(A, i) || ot__line_blank(Bl, i)) { bt->st.empty++; continue; }
    size_t ks = 0, kt = 0, at = n;
    OT_TRY(encode_line(bt, &cap, &n, bpe, A, i, &ks));
    n += ks;
    OT_TRY(encode_line(bt, &cap, &n, bpe, Bl, i, &kt));
    n += kt;
    if (ks > (size_t)max_len || kt > (size_t)max_len) {
      if (refuse)
        return ot_error(OT_EFORMAT, "%s: %s:%lld: %zu tokens > max_len %d (raise max_len, or skip such "
                        "pairs: refuse_long = false)", fn, ks > (size_t)max_len ? pa : pb, (long long)i + 1,
                        ks > (size_t)max_len ? ks : kt, max_len);
      bt->st.too_long++;
      n = at;
      continue;
    }
    int64_t p = bt->P++;
    bt->line[p] = i + 1;
    bt->so[p] = (int64_t)at; bt->sn[p] = (int32_t)ks;
    bt->to[p] = (int64_t)(at + ks); bt->tn[p] = (int32_t)kt;
    bt->st.src_tokens += (int64_t)ks; bt->st.tgt_tokens += (int64_t)kt;
    if ((int)ks > bt->st.max_src) bt->st.max_src = (int)ks;
    if ((int)kt > bt->st.max_tgt) bt->st.max_tgt = (int)kt;
    h = ot__mix64(h ^ ((uint64_t)ks << 32 | kt));
    h = ot__mix64(h ^ ot__hash_bytes(bt->ids + at, (ks + kt) * sizeof(int32_t)));
  }
  bt->hash = h;
  bt->st.pairs = bt->P;
  if (bt->P == 0)
    return ot_error(OT_EFORMAT, "%s: %s and %s hold no pair to use (%lld lines: %lld with an empty side, %lld "
                    "over max_len %d tokens)", fn, pa, pb, (long long)A->n, (long long)bt->st.empty,
                    (long long)bt->st.too_long, max_len);
  return OT_OK;
}

ot_status ot_bitext_open(ot_bitext **out, const char *src_path, const char *tgt_path, const ot_bitext_opts *opts) {
  const char *fn = "ot_bitext_open";
  if (!out) return ot_error(OT_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  if (!src_path || !tgt_path) return ot_error(OT_EINVAL, "%s: src_path and tgt_path are required", fn);
  if (!opts || !opts->bpe) return ot_error(OT_EINVAL, "%s: opts->bpe (the joint tokenizer) is required", fn);
  if (opts->max_len < 0) return ot_error(OT_EINVAL, "%s: max_len=%d must be >= 0 (0: 256)", fn, opts->max_len);
  int32_t eos = ot_bpe_eot(opts->bpe);
  if (eos < 0) return ot_error(OT_EINVAL, "%s: the tokenizer has no %s token (train it with ot_bitext_train_bpe)",
                               fn, OT_BPE_EOT);
  const int max_len = opts->max_len ? opts->max_len : 256;
  ot__lines A, B;
  OT_TRY(read_both(&A, &B, src_path, tgt_path, fn));
  ot_bitext *bt = ot_mem_alloc(sizeof *bt, OT_MEM_OTHER);
  ot_status s = OT_ENOMEM;
  if (bt) {
    memset(bt, 0, sizeof *bt);
    size_t n = (size_t)(A.n ? A.n : 1);
    bt->line = ot_mem_alloc(n * sizeof *bt->line, OT_MEM_OTHER);
    bt->so = ot_mem_alloc(n * sizeof *bt->so, OT_MEM_OTHER);
    bt->to = ot_mem_alloc(n * sizeof *bt->to, OT_MEM_OTHER);
    bt->sn = ot_mem_alloc(n * sizeof *bt->sn, OT_MEM_OTHER);
    bt->tn = ot_mem_alloc(n * sizeof *bt->tn, OT_MEM_OTHER);
    if (bt->line && bt->so && bt->to && bt->sn && bt->tn) s = OT_OK;
  }
  if (s != OT_OK) s = ot_error(OT_ENOMEM, "%s: out of memory for %lld pairs", fn, (long long)A.n);
  if (s == OT_OK) {
    bt->eos = eos;
    bt->st.lines = A.n;
    s = fill(bt, &A, &B, src_path, tgt_path, opts->bpe, max_len, opts->refuse_long);
  }
  ot__lines_free(&A);
  ot__lines_free(&B);
  if (s != OT_OK) { ot_bitext_close(bt); return s; }
  *out = bt;
  return OT_OK;
}

void ot_bitext_get_stats(const ot_bitext *bt, ot_bitext_stats *st) { *st = bt->st; }
int64_t ot_bitext_pairs(const ot_bitext *bt) { return bt->P; }
int32_t ot_bitext_eos(const ot_bitext *bt) { return bt->eos; }

int64_t ot_bitext_pair(const ot_bitext *bt, int64_t i, const int32_t **src, int *ns, const int32_t **tgt,
                       int *nt) {
  if (!bt || i < 0 || i >= bt->P) return -1;
  if (src) *src = bt->ids + bt->so[i];
  if (ns) *ns = bt->sn[i];
  if (tgt) *tgt = bt->ids + bt->to[i];
  if (nt) *nt = bt->tn[i];
  return bt->line[i];
}

// --------------------------------------------------------- joint BPE -------
ot_status ot_bitext_train_bpe(ot_bpe **out, const char *src_path, const char *tgt_path, int vocab_size,
                              bool verbose) {
  const char *fn = "ot_bitext_train_bpe";
  if (!out) return ot_error(OT_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  if (!src_path || !tgt_path) return ot_error(OT_EINVAL, "%s: src_path and tgt_path are required", fn);
  ot__lines L[2];
  OT_TRY(read_both(&L[0], &L[1], src_path, tgt_path, fn));
  // every non-empty line, each followed by <|endoftext|> (a separator the trainer never merges across)
  const size_t sep = strlen(OT_BPE_EOT);
  size_t total = 0;
  int64_t used = 0;
  for (int f = 0; f < 2; f++)
    for (int64_t i = 0; i < L[f].n; i++)
      if (!ot__line_blank(&L[f], i)) { total += L[f].len[i] + sep; used++; }
  ot_status s = OT_OK;
  char *text = used ? ot_mem_alloc(total + 1, OT_MEM_OTHER) : NULL;
  if (!used)
    s = ot_error(OT_EFORMAT, "%s: %s and %s hold no non-empty line to train on", fn, src_path, tgt_path);
  else if (!text)
    s = ot_error(OT_ENOMEM, "%s: out of memory for %zu bytes of text", fn, total);
  if (s == OT_OK) {
    size_t at = 0;
    for (int f = 0; f < 2; f++)
      for (int64_t i = 0; i < L[f].n; i++) {
        if (ot__line_blank(&L[f], i)) continue;
        memcpy(text + at, L[f].buf + L[f].off[i], L[f].len[i]);
        at += L[f].len[i];
        memcpy(text + at, OT_BPE_EOT, sep);
        at += sep;
      }
    text[at] = 0;
    ot__lines_free(&L[0]);
    ot__lines_free(&L[1]);
    s = ot_bpe_train(out, text, at, vocab_size, verbose);
  }
  ot_mem_free(text);
  ot__lines_free(&L[0]);
  ot__lines_free(&L[1]);
  return s;
}
