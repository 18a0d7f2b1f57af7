// Byte-level BPE training. The corpus is pre-tokenized once into unique
// words with counts; each word is a symbol sequence. Pair counts (weighted by
// word counts) live in a hash map, each pair keeps a list of the words it
// occurs in, and a max-heap with lazy deletion picks the next merge: most
// frequent, ties to the smallest (left id, right id). A merge rewrites only
// the words on its list and updates only the pairs next to a merge site.
#define _GNU_SOURCE  // memmem
#include "bpe_impl.h"
#include <stdio.h>

typedef struct {
  // words
  const char *text;
  size_t nw, cap_w;
  size_t *w_off;          // first occurrence in text
  uint32_t *w_len;        // bytes
  uint64_t *w_hash;
  int64_t *w_cnt;
  int32_t *wtab;          // open addressing: word index or -1
  size_t wmask;
  // symbols
  int32_t *sym;           // pool; word w = sym[w_start[w], + w_n[w])
  size_t *w_start;
  uint32_t *w_n;
  uint32_t *w_stamp;      // merge number that last rewrote the word
  uint32_t max_len;
  // pairs
  size_t np, cap_p;
  int32_t *p_a, *p_b, *p_head;
  int64_t *p_cnt;
  uint32_t *p_stamp;      // merge number that last touched the count
  int32_t *ptab;          // open addressing: pair index or -1
  size_t pmask;
  // occurrence lists: (word, next)
  size_t no, cap_o;
  int32_t (*occ)[2];
  // heap of pair indices with their count at push time
  size_t nh, cap_h;
  struct hent { int64_t cnt; int32_t p; } *heap;
  // touched pairs of the current merge
  size_t nt, cap_t;
  int32_t *touched;
  uint8_t *hit, *made;    // [max_len] scratch
} trainer;

static void tr_free(trainer *T) {
  void *ps[] = {T->w_off, T->w_len, T->w_hash, T->w_cnt, T->wtab, T->sym, T->w_start, T->w_n, T->w_stamp,
                T->p_a, T->p_b, T->p_head, T->p_cnt, T->p_stamp, T->ptab, T->occ, T->heap, T->touched,
                T->hit, T->made};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
}

static int32_t *new_table(size_t cap) {
  int32_t *t = ot_mem_alloc(cap * sizeof *t, OT_MEM_OTHER);
  if (t) memset(t, 0xff, cap * sizeof *t);
  return t;
}

// ---------------------------------------------------------------- words ----
static ot_status add_word(trainer *T, size_t off, size_t len) {
  const uint8_t *p = (const uint8_t *)T->text + off;
  uint64_t h = ot__key_hash(p, len);
  size_t i = h & T->wmask;
  for (; T->wtab[i] >= 0; i = (i + 1) & T->wmask) {
    int32_t w = T->wtab[i];
    if (T->w_hash[w] == h && T->w_len[w] == len && memcmp(T->text + T->w_off[w], p, len) == 0) {
      T->w_cnt[w]++;
      return OT_OK;
    }
  }
  if (len > UINT32_MAX || T->nw >= INT32_MAX) return ot_error(OT_EINVAL, "ot_bpe_train: corpus too large");
  size_t c = T->cap_w;
  OT_TRY(ot__grow((void **)&T->w_off, &c, T->nw + 1, sizeof *T->w_off)); c = T->cap_w;
  OT_TRY(ot__grow((void **)&T->w_len, &c, T->nw + 1, sizeof *T->w_len)); c = T->cap_w;
  OT_TRY(ot__grow((void **)&T->w_hash, &c, T->nw + 1, sizeof *T->w_hash)); c = T->cap_w;
  OT_TRY(ot__grow((void **)&T->w_cnt, &c, T->nw + 1, sizeof *T->w_cnt));
  T->cap_w = c;
  size_t w = T->nw++;
  T->w_off[w] = off; T->w_len[w] = (uint32_t)len; T->w_hash[w] = h; T->w_cnt[w] = 1;
  T->wtab[i] = (int32_t)w;
  if (T->nw * 2 > T->wmask) {  // rehash at load 1/2
    size_t cap = (T->wmask + 1) * 2;
    int32_t *nt = new_table(cap);
    if (!nt) return ot_error(OT_ENOMEM, "ot_bpe_train: out of memory (word table)");
    for (size_t k = 0; k < T->nw; k++) {
      size_t j = T->w_hash[k] & (cap - 1);
      while (nt[j] >= 0) j = (j + 1) & (cap - 1);
      nt[j] = (int32_t)k;
    }
    ot_mem_free(T->wtab);
    T->wtab = nt;
    T->wmask = cap - 1;
  }
  return OT_OK;
}

static ot_status count_words(trainer *T, size_t len) {
  const size_t el = strlen(OT_BPE_EOT);
  T->wmask = 4095;
  if (!(T->wtab = new_table(T->wmask + 1))) return ot_error(OT_ENOMEM, "ot_bpe_train: out of memory");
  for (size_t pos = 0; pos < len;) {
    const char *f = memmem(T->text + pos, len - pos, OT_BPE_EOT, el);
    size_t end = f ? (size_t)(f - T->text) : len;
    while (pos < end) {
      size_t e = ot_pretok_next(T->text, end, pos);
      OT_TRY(add_word(T, pos, e - pos));
      pos = e;
    }
    if (f) pos += el;
  }
  return OT_OK;
}

// ---------------------------------------------------------------- pairs ----
static ot_status pair_get(trainer *T, int32_t a, int32_t b, int32_t *out) {
  uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  size_t i = ot__mix64(k) & T->pmask;
  for (; T->ptab[i] >= 0; i = (i + 1) & T->pmask) {
    int32_t p = T->ptab[i];
    if (T->p_a[p] == a && T->p_b[p] == b) { *out = p; return OT_OK; }
  }
  size_t c = T->cap_p;
  OT_TRY(ot__grow((void **)&T->p_a, &c, T->np + 1, sizeof *T->p_a)); c = T->cap_p;
  OT_TRY(ot__grow((void **)&T->p_b, &c, T->np + 1, sizeof *T->p_b)); c = T->cap_p;
  OT_TRY(ot__grow((void **)&T->p_head, &c, T->np + 1, sizeof *T->p_head)); c = T->cap_p;
  OT_TRY(ot__grow((void **)&T->p_cnt, &c, T->np + 1, sizeof *T->p_cnt)); c = T->cap_p;
  OT_TRY(ot__grow((void **)&T->p_stamp, &c, T->np + 1, sizeof *T->p_stamp));
  T->cap_p = c;
  int32_t p = (int32_t)T->np++;
  T->p_a[p] = a; T->p_b[p] = b; T->p_head[p] = -1; T->p_cnt[p] = 0; T->p_stamp[p] = UINT32_MAX;
  T->ptab[i] = p;
  if (T->np * 2 > T->pmask) {
    size_t cap = (T->pmask + 1) * 2;
    int32_t *nt = new_table(cap);
    if (!nt) return ot_error(OT_ENOMEM, "ot_bpe_train: out of memory (pair table)");
    for (size_t q = 0; q < T->np; q++) {
      uint64_t kk = ((uint64_t)(uint32_t)T->p_a[q] << 32) | (uint32_t)T->p_b[q];
      size_t j = ot__mix64(kk) & (cap - 1);
      while (nt[j] >= 0) j = (j + 1) & (cap - 1);
      nt[j] = (int32_t)q;
    }
    ot_mem_free(T->ptab);
    T->ptab = nt;
    T->pmask = cap - 1;
  }
  *out = p;
  return OT_OK;
}

// Adds delta to pair (a, b) of word w; records w in the pair's list when
// `listed` and marks the pair touched by merge number `stamp`.
static ot_status pair_add(trainer *T, int32_t a, int32_t b, int64_t delta, int32_t w, bool listed, uint32_t stamp) {
  int32_t p = -1;
  OT_TRY(pair_get(T, a, b, &p));
  T->p_cnt[p] += delta;
  if (listed && (T->p_head[p] < 0 || T->occ[T->p_head[p]][0] != w)) {
    OT_TRY(ot__grow((void **)&T->occ, &T->cap_o, T->no + 1, sizeof *T->occ));
    T->occ[T->no][0] = w;
    T->occ[T->no][1] = T->p_head[p];
    T->p_head[p] = (int32_t)T->no++;
  }
  if (T->p_stamp[p] != stamp) {
    T->p_stamp[p] = stamp;
    OT_TRY(ot__grow((void **)&T->touched, &T->cap_t, T->nt + 1, sizeof *T->touched));
    T->touched[T->nt++] = p;
  }
  return OT_OK;
}

// ----------------------------------------------------------------- heap ----
static bool hbefore(const trainer *T, struct hent x, struct hent y) {
  if (x.cnt != y.cnt) return x.cnt > y.cnt;
  if (T->p_a[x.p] != T->p_a[y.p]) return T->p_a[x.p] < T->p_a[y.p];
  return T->p_b[x.p] < T->p_b[y.p];
}

static ot_status hpush(trainer *T, int32_t p) {
  OT_TRY(ot__grow((void **)&T->heap, &T->cap_h, T->nh + 1, sizeof *T->heap));
  struct hent e = {T->p_cnt[p], p};
  size_t i = T->nh++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!hbefore(T, e, T->heap[up])) break;
    T->heap[i] = T->heap[up];
    i = up;
  }
  T->heap[i] = e;
  return OT_OK;
}

static struct hent hpop(trainer *T) {
  struct hent top = T->heap[0], last = T->heap[--T->nh];
  size_t i = 0, n = T->nh;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && hbefore(T, T->heap[c + 1], T->heap[c])) c++;
    if (!hbefore(T, T->heap[c], last)) break;
    T->heap[i] = T->heap[c];
    i = c;
  }
  T->heap[i] = last;
  return top;
}

// ---------------------------------------------------------------- merge ----
// Rewrites word w, replacing non-overlapping (a, b) left to right by c.
static ot_status merge_word(trainer *T, int32_t w, int32_t a, int32_t b, int32_t c, uint32_t stamp) {
  int32_t *s = T->sym + T->w_start[w];
  uint32_t n = T->w_n[w];
  int64_t f = T->w_cnt[w];
  bool any = false;
  for (uint32_t i = 0; i + 1 < n; i++) if (s[i] == a && s[i + 1] == b) { any = true; break; }
  if (!any) return OT_OK;
  memset(T->hit, 0, n);
  for (uint32_t i = 0; i + 1 < n;) {
    if (s[i] == a && s[i + 1] == b) { T->hit[i] = T->hit[i + 1] = 1; i += 2; }
    else i++;
  }
  for (uint32_t i = 0; i + 1 < n; i++)   // old pairs next to a merge site
    if (T->hit[i] || T->hit[i + 1]) OT_TRY(pair_add(T, s[i], s[i + 1], -f, w, false, stamp));
  uint32_t j = 0;
  for (uint32_t i = 0; i < n;) {
    if (i + 1 < n && T->hit[i] && s[i] == a && s[i + 1] == b && T->hit[i + 1]) {
      s[j] = c; T->made[j++] = 1; i += 2;
    } else {
      s[j] = s[i]; T->made[j++] = 0; i++;
    }
  }
  T->w_n[w] = j;
  for (uint32_t k = 0; k + 1 < j; k++)   // new pairs with a merged symbol
    if (T->made[k] || T->made[k + 1]) OT_TRY(pair_add(T, s[k], s[k + 1], f, w, true, stamp));
  return OT_OK;
}

static ot_status run(trainer *T, ot_bpe *t, int vocab_size, bool verbose, double t0) {
  const ot__b2u_t *m = ot__b2u();
  for (int k = 0; k < 256; k++) t->byte_id[m->order[k]] = ot__bpe_add(t, &m->order[k], 1, false);
  // symbols: every word starts as its bytes
  size_t total = 0;
  for (size_t w = 0; w < T->nw; w++) { total += T->w_len[w]; if (T->w_len[w] > T->max_len) T->max_len = T->w_len[w]; }
  T->sym = ot_mem_alloc((total ? total : 1) * sizeof *T->sym, OT_MEM_OTHER);
  T->w_start = ot_mem_alloc((T->nw + 1) * sizeof *T->w_start, OT_MEM_OTHER);
  T->w_n = ot_mem_alloc((T->nw + 1) * sizeof *T->w_n, OT_MEM_OTHER);
  T->w_stamp = ot_mem_alloc((T->nw + 1) * sizeof *T->w_stamp, OT_MEM_OTHER);
  T->hit = ot_mem_alloc(T->max_len + 1, OT_MEM_OTHER);
  T->made = ot_mem_alloc(T->max_len + 1, OT_MEM_OTHER);
  T->pmask = 65535;
  T->ptab = new_table(T->pmask + 1);
  if (!T->sym || !T->w_start || !T->w_n || !T->w_stamp || !T->hit || !T->made || !T->ptab)
    return ot_error(OT_ENOMEM, "ot_bpe_train: out of memory for %zu symbols", total);
  size_t o = 0;
  const uint32_t init = UINT32_MAX - 1;
  for (size_t w = 0; w < T->nw; w++) {
    T->w_start[w] = o;
    T->w_n[w] = T->w_len[w];
    T->w_stamp[w] = UINT32_MAX;
    const uint8_t *p = (const uint8_t *)T->text + T->w_off[w];
    for (uint32_t i = 0; i < T->w_len[w]; i++) T->sym[o + i] = t->byte_id[p[i]];
    for (uint32_t i = 0; i + 1 < T->w_len[w]; i++)
      OT_TRY(pair_add(T, T->sym[o + i], T->sym[o + i + 1], T->w_cnt[w], (int32_t)w, true, init));
    o += T->w_len[w];
  }
  for (size_t p = 0; p < T->np; p++) OT_TRY(hpush(T, (int32_t)p));
  if (verbose) {
    int64_t pieces = 0;
    for (size_t w = 0; w < T->nw; w++) pieces += T->w_cnt[w];
    fprintf(stderr, "bpe: %lld pre-tokens, %zu unique (%zu bytes), %zu distinct pairs; %.2f s\n",
            (long long)pieces, T->nw, o, T->np, ot_now() - t0);
  }
  uint8_t *nb = NULL;
  size_t nb_cap = 0;
  ot_status s = OT_OK;
  for (uint32_t stamp = 0; t->n_vocab < vocab_size - 1 && T->nh && s == OT_OK; stamp++) {
    struct hent e = hpop(T);
    if (e.cnt != T->p_cnt[e.p] || e.cnt <= 0) { stamp--; continue; }  // stale entry
    if (e.cnt < 2) break;
    int32_t a = T->p_a[e.p], b = T->p_b[e.p];
    size_t la = t->off[a + 1] - t->off[a], lb = t->off[b + 1] - t->off[b];
    if ((s = ot__grow((void **)&nb, &nb_cap, la + lb, 1)) != OT_OK) break;
    memcpy(nb, t->bytes + t->off[a], la);
    memcpy(nb + la, t->bytes + t->off[b], lb);
    int32_t c = ot__bpe_find(t, nb, la + lb);
    if (c < 0 && (c = ot__bpe_add(t, nb, la + lb, false)) < 0) { s = ot_error(OT_ENOMEM, "ot_bpe_train: out of memory"); break; }
    (void)ot__bpe_add_merge(t, a, b, c);  // false only if (a, b) reappeared via a duplicate token
    T->nt = 0;
    for (int32_t it = T->p_head[e.p]; it >= 0 && s == OT_OK; it = T->occ[it][1]) {
      int32_t w = T->occ[it][0];
      if (T->w_stamp[w] == stamp) continue;
      T->w_stamp[w] = stamp;
      s = merge_word(T, w, a, b, c, stamp);
    }
    for (size_t k = 0; k < T->nt && s == OT_OK; k++)
      if (T->p_cnt[T->touched[k]] > 0) s = hpush(T, T->touched[k]);
    if (verbose && (t->n_merges % 1000 == 0))
      fprintf(stderr, "bpe: %d merges, vocab %d, last count %lld; %.2f s\n", t->n_merges, t->n_vocab,
              (long long)e.cnt, ot_now() - t0);
  }
  ot_mem_free(nb);
  OT_TRY(s);
  if (ot__bpe_find(t, (const uint8_t *)OT_BPE_EOT, strlen(OT_BPE_EOT)) >= 0)
    return ot_error(OT_EINTERNAL, "ot_bpe_train: a merge produced the bytes of %s", OT_BPE_EOT);
  ot__bpe_add(t, (const uint8_t *)OT_BPE_EOT, strlen(OT_BPE_EOT), false);
  OT_TRY(ot__bpe_finish(t, "ot_bpe_train"));
  if (verbose)
    fprintf(stderr, "bpe: done: %d tokens (%d merges) in %.2f s\n", t->n_vocab, t->n_merges, ot_now() - t0);
  return OT_OK;
}

ot_status ot_bpe_train(ot_bpe **out, const char *text, size_t len, int vocab_size, bool verbose) {
  if (!out) return ot_error(OT_EINVAL, "ot_bpe_train: out is NULL");
  *out = NULL;
  if (len && !text) return ot_error(OT_EINVAL, "ot_bpe_train: text is NULL");
  if (vocab_size < 257 || vocab_size > (1 << 24))
    return ot_error(OT_EINVAL, "ot_bpe_train: vocab_size=%d must be in [257, %d] (256 bytes + merges + %s)",
                    vocab_size, 1 << 24, OT_BPE_EOT);
  trainer T;
  memset(&T, 0, sizeof T);
  T.text = text;
  ot_bpe *t = NULL;
  double t0 = ot_now();
  ot_status s = ot__bpe_create(&t, vocab_size, 4096, vocab_size);
  if (s == OT_OK) s = count_words(&T, len);
  if (s == OT_OK) s = run(&T, t, vocab_size, verbose, t0);
  tr_free(&T);
  if (s != OT_OK) { ot_bpe_free(t); return s; }
  *out = t;
  return OT_OK;
}
