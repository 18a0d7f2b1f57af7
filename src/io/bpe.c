// Byte-level BPE core: token and merge tables (open-addressing hash maps on
// tracked memory, sized once), encode (pre-tokenize, then merge each piece by
// lowest rank, leftmost first, like tiktoken) and decode.
#define _GNU_SOURCE  // memmem
#include "bpe_impl.h"
#include "internal.h"
#include <pthread.h>

size_t ot__bpe_heap_min = 64;
#define SCAN_MAX 256  // bound of the linear-scan path's stack arrays

static ot__b2u_t g_b2u;
static pthread_once_t g_b2u_once = PTHREAD_ONCE_INIT;

static void b2u_init(void) {
  ot__b2u_t *t = &g_b2u;
  int n = 0, k = 0;
  bool printable[256];
  for (int i = 0; i < 324; i++) t->u2b[i] = -1;
  for (int b = 0; b < 256; b++) {
    printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (printable[b]) { t->b2u[b] = (uint16_t)b; t->order[k++] = (uint8_t)b; }
  }
  for (int b = 0; b < 256; b++)
    if (!printable[b]) { t->b2u[b] = (uint16_t)(256 + n++); t->order[k++] = (uint8_t)b; }
  for (int b = 0; b < 256; b++) t->u2b[t->b2u[b]] = (int16_t)b;
}

const ot__b2u_t *ot__b2u(void) {
  pthread_once(&g_b2u_once, b2u_init);
  return &g_b2u;
}

// --------------------------------------------------------------- tables ----
static size_t pow2_at_least(size_t n) {
  size_t p = 16;
  while (p < n) p *= 2;
  return p;
}

void ot_bpe_free(ot_bpe *t) {
  if (!t) return;
  ot_mem_free(t->bytes); ot_mem_free(t->off); ot_mem_free(t->raw); ot_mem_free(t->merge);
  ot_mem_free(t->pkey); ot_mem_free(t->prank); ot_mem_free(t->tidx);
  ot_mem_free(t);
}

ot_status ot__bpe_create(ot_bpe **out, int cap_vocab, size_t cap_bytes, int cap_merges) {
  *out = NULL;
  ot_bpe *t = ot_mem_alloc(sizeof *t, OT_MEM_OTHER);
  if (!t) return ot_error(OT_ENOMEM, "bpe: out of memory");
  memset(t, 0, sizeof *t);
  t->cap_vocab = cap_vocab;
  t->cap_bytes = cap_bytes;
  t->cap_merges = cap_merges;
  t->eot = -1;
  size_t pcap = pow2_at_least((size_t)cap_merges * 2 + 2), tcap = pow2_at_least((size_t)cap_vocab * 2 + 2);
  t->pmask = pcap - 1;
  t->tmask = tcap - 1;
  t->bytes = ot_mem_alloc(cap_bytes ? cap_bytes : 1, OT_MEM_OTHER);
  t->off = ot_mem_alloc(((size_t)cap_vocab + 1) * sizeof *t->off, OT_MEM_OTHER);
  t->raw = ot_mem_alloc((size_t)cap_vocab + 1, OT_MEM_OTHER);
  t->merge = ot_mem_alloc(((size_t)cap_merges + 1) * sizeof *t->merge, OT_MEM_OTHER);
  t->pkey = ot_mem_alloc(pcap * sizeof *t->pkey, OT_MEM_OTHER);
  t->prank = ot_mem_alloc(pcap * sizeof *t->prank, OT_MEM_OTHER);
  t->tidx = ot_mem_alloc(tcap * sizeof *t->tidx, OT_MEM_OTHER);
  if (!t->bytes || !t->off || !t->raw || !t->merge || !t->pkey || !t->prank || !t->tidx) {
    ot_bpe_free(t);
    return ot_error(OT_ENOMEM, "bpe: out of memory for %d tokens and %d merges", cap_vocab, cap_merges);
  }
  memset(t->prank, 0xff, pcap * sizeof *t->prank);
  memset(t->tidx, 0xff, tcap * sizeof *t->tidx);
  t->off[0] = 0;
  *out = t;
  return OT_OK;
}

int32_t ot__bpe_find(const ot_bpe *t, const uint8_t *p, size_t n) {
  for (size_t h = ot__key_hash(p, n) & t->tmask;; h = (h + 1) & t->tmask) {
    int32_t id = t->tidx[h];
    if (id < 0) return -1;
    if (t->off[id + 1] - t->off[id] == n && memcmp(t->bytes + t->off[id], p, n) == 0) return id;
  }
}

int32_t ot__bpe_add(ot_bpe *t, const uint8_t *p, size_t n, bool raw) {
  if (t->n_vocab >= t->cap_vocab || ot__grow((void **)&t->bytes, &t->cap_bytes, t->n_bytes + n, 1) != OT_OK)
    return -1;
  int32_t id = t->n_vocab++;
  memcpy(t->bytes + t->n_bytes, p, n);
  t->n_bytes += n;
  t->off[id + 1] = (uint32_t)t->n_bytes;
  t->raw[id] = raw;
  size_t h = ot__key_hash(p, n) & t->tmask;
  while (t->tidx[h] >= 0) h = (h + 1) & t->tmask;
  t->tidx[h] = id;
  return id;
}

static inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

int32_t ot__bpe_rank(const ot_bpe *t, int32_t a, int32_t b) {
  uint64_t k = pair_key(a, b);
  for (size_t h = ot__mix64(k) & t->pmask;; h = (h + 1) & t->pmask) {
    int32_t r = t->prank[h];
    if (r < 0) return -1;
    if (t->pkey[h] == k) return r;
  }
}

bool ot__bpe_add_merge(ot_bpe *t, int32_t a, int32_t b, int32_t c) {
  uint64_t k = pair_key(a, b);
  size_t h = ot__mix64(k) & t->pmask;
  for (; t->prank[h] >= 0; h = (h + 1) & t->pmask)
    if (t->pkey[h] == k) return false;
  int32_t r = t->n_merges++;
  t->pkey[h] = k;
  t->prank[h] = r;
  t->merge[r][0] = a; t->merge[r][1] = b; t->merge[r][2] = c;
  return true;
}

ot_status ot__bpe_finish(ot_bpe *t, const char *what) {
  for (int b = 0; b < 256; b++) {
    uint8_t c = (uint8_t)b;
    t->byte_id[b] = ot__bpe_find(t, &c, 1);
    if (t->byte_id[b] < 0)
      return ot_error(OT_EFORMAT, "%s: no token for the byte 0x%02x (a byte-level vocabulary needs all 256)", what, b);
  }
  t->eot = ot__bpe_find(t, (const uint8_t *)OT_BPE_EOT, strlen(OT_BPE_EOT));
  return OT_OK;
}

int ot_bpe_vocab_size(const ot_bpe *t) { return t ? t->n_vocab : 0; }
int ot_bpe_merges(const ot_bpe *t) { return t ? t->n_merges : 0; }
int ot_bpe_eot(const ot_bpe *t) { return t ? t->eot : -1; }

const char *ot_bpe_token(const ot_bpe *t, int32_t id, size_t *len) {
  if (!t || id < 0 || id >= t->n_vocab) { if (len) *len = 0; return NULL; }
  if (len) *len = t->off[id + 1] - t->off[id];
  return (const char *)t->bytes + t->off[id];
}

// --------------------------------------------------------------- encode ----
// Linear scan: ranks r[i] of pairs (i, i+1); merge the lowest, leftmost.
static size_t merge_scan(const ot_bpe *t, const uint8_t *p, size_t n, int32_t *sym) {
  int32_t r[SCAN_MAX];
  for (size_t i = 0; i < n; i++) sym[i] = t->byte_id[p[i]];
  for (size_t i = 0; i + 1 < n; i++) r[i] = ot__bpe_rank(t, sym[i], sym[i + 1]);
  size_t m = n;
  while (m > 1) {
    int32_t best = INT32_MAX;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < m; i++)
      if (r[i] >= 0 && r[i] < best) { best = r[i]; bi = i; }
    if (best == INT32_MAX) break;
    sym[bi] = t->merge[best][2];
    if (bi + 2 < m) memmove(sym + bi + 1, sym + bi + 2, (m - bi - 2) * sizeof *sym);
    if (bi + 3 < m) memmove(r + bi + 1, r + bi + 2, (m - bi - 3) * sizeof *r);
    m--;
    if (bi > 0) r[bi - 1] = ot__bpe_rank(t, sym[bi - 1], sym[bi]);
    if (bi + 1 < m) r[bi] = ot__bpe_rank(t, sym[bi], sym[bi + 1]);
  }
  return m;
}

// Heap of (rank, position) over a linked list of symbols: O(n log n) for
// long pieces. Entries are validated when popped (lazy deletion).
typedef struct { int32_t rank, pos; } hent;
static inline bool hless(hent a, hent b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }
static void hpush(hent *h, size_t *n, hent e) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!hless(e, h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = e;
}
static hent hpop(hent *h, size_t *n) {
  hent top = h[0], last = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && hless(h[c + 1], h[c])) c++;
    if (!hless(h[c], last)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

static ot_status merge_heap(const ot_bpe *t, const uint8_t *p, size_t n, int32_t **out, size_t *m) {
  // scratch: id[n], nxt[n], prv[n], heap[3n] (each merge pushes at most 2)
  int32_t *id = ot_scratch(n * 3 * sizeof(int32_t) + 3 * n * sizeof(hent));
  if (!id) return ot_error(OT_ENOMEM, "ot_bpe_encode: out of memory for a %zu-byte piece", n);
  int32_t *nxt = id + n, *prv = nxt + n;
  hent *h = (hent *)(prv + n);
  size_t hn = 0;
  for (size_t i = 0; i < n; i++) {
    id[i] = t->byte_id[p[i]];
    nxt[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    prv[i] = (int32_t)i - 1;
  }
  for (size_t i = 0; i + 1 < n; i++) {
    int32_t r = ot__bpe_rank(t, id[i], id[i + 1]);
    if (r >= 0) hpush(h, &hn, (hent){r, (int32_t)i});
  }
  while (hn) {
    hent e = hpop(h, &hn);
    int32_t i = e.pos, j = nxt[i];
    if (id[i] < 0 || j < 0 || ot__bpe_rank(t, id[i], id[j]) != e.rank) continue;  // stale
    id[i] = t->merge[e.rank][2];
    id[j] = -1;
    nxt[i] = nxt[j];
    if (nxt[j] >= 0) prv[nxt[j]] = i;
    if (prv[i] >= 0) {
      int32_t r = ot__bpe_rank(t, id[prv[i]], id[i]);
      if (r >= 0) hpush(h, &hn, (hent){r, prv[i]});
    }
    if (nxt[i] >= 0) {
      int32_t r = ot__bpe_rank(t, id[i], id[nxt[i]]);
      if (r >= 0) hpush(h, &hn, (hent){r, i});
    }
  }
  size_t k = 0;
  for (int32_t i = 0; i >= 0; i = nxt[i]) id[k++] = id[i];
  *out = id;
  *m = k;
  return OT_OK;
}

ot_status ot_bpe_encode(const ot_bpe *t, const char *text, size_t len, bool allow_special,
                        int32_t *ids, size_t cap, size_t *n) {
  if (!t || !n || (len && !text) || (cap && !ids))
    return ot_error(OT_EINVAL, "ot_bpe_encode: NULL argument (tokenizer, text, ids or n)");
  *n = 0;
  const size_t el = strlen(OT_BPE_EOT);
  size_t heap_min = ot__bpe_heap_min < SCAN_MAX ? ot__bpe_heap_min : SCAN_MAX;
  size_t pos = 0, out = 0;
  int32_t sym[SCAN_MAX];
  while (pos < len) {
    size_t end = len;
    bool special = false;
    if (allow_special && t->eot >= 0) {
      const char *f = memmem(text + pos, len - pos, OT_BPE_EOT, el);
      if (f) { end = (size_t)(f - text); special = true; }
    }
    while (pos < end) {
      size_t e = ot_pretok_next(text, end, pos), pn = e - pos, m = 0;
      const int32_t *src = sym;
      if (pn <= heap_min) {
        m = merge_scan(t, (const uint8_t *)text + pos, pn, sym);
      } else {
        int32_t *hs = NULL;
        OT_TRY(merge_heap(t, (const uint8_t *)text + pos, pn, &hs, &m));
        src = hs;
      }
      if (m > cap - out)
        return ot_error(OT_EINVAL, "ot_bpe_encode: ids capacity %zu too small (cap >= len = %zu always suffices)",
                        cap, len);
      memcpy(ids + out, src, m * sizeof *ids);
      out += m;
      pos = e;
    }
    if (special) {
      if (out >= cap)
        return ot_error(OT_EINVAL, "ot_bpe_encode: ids capacity %zu too small (cap >= len = %zu always suffices)",
                        cap, len);
      ids[out++] = t->eot;
      pos += el;
    }
  }
  *n = out;
  return OT_OK;
}

ot_status ot_bpe_decode(const ot_bpe *t, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len) {
  if (!t || !len || (n && !ids) || (cap && !out))
    return ot_error(OT_EINVAL, "ot_bpe_decode: NULL argument (tokenizer, ids, out or len)");
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n_vocab)
      return ot_error(OT_EINVAL, "ot_bpe_decode: ids[%zu]=%d out of range [0, %d)", i, ids[i], t->n_vocab);
    size_t k = t->off[ids[i] + 1] - t->off[ids[i]];
    if (k > cap - o)
      return ot_error(OT_EINVAL, "ot_bpe_decode: output capacity %zu too small at ids[%zu]", cap, i);
    memcpy(out + o, t->bytes + t->off[ids[i]], k);
    o += k;
  }
  *len = o;
  return OT_OK;
}
