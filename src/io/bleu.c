// Corpus BLEU as sacreBLEU 2.6.0 computes it (metrics/bleu.py): per segment,
// the hypothesis n-grams (n = 1..4) are counted, each clipped by the largest
// count of that n-gram in any one reference; matches, totals, the hypothesis
// length and the closest reference length are summed over the corpus, and the
// score comes from those sums with sacreBLEU's smoothing, in its order of
// floating-point operations. Tokenizers: bleu_tok.c; files: bleu_files.c.
#include "bleu_impl.h"
#include <math.h>
#include <stdio.h>

#define BLEU_N 4

typedef struct { const char *p; uint32_t len; uint64_t h; } tokref;
// One distinct hypothesis n-gram of the current segment (open addressing).
typedef struct { uint64_t h; int32_t start, n, hyp, refmax, cur, last; } gram;

struct ot_bleu {
  ot_bleu_opts o;
  int64_t sys_len, ref_len, correct[BLEU_N], total[BLEU_N], segments;
  int nrefs;                // -2 before the first segment, -1 when it varied
  ot__bleu_buf hb, rb;      // tokenized hypothesis / reference
  tokref *ht, *rt;          // their tokens
  size_t htcap, rtcap;
  gram *tab;                // [tcap], tcap a power of two
  size_t tcap;
};

ot_status ot_bleu_create(ot_bleu **out, const ot_bleu_opts *o) {
  static const char fn[] = "ot_bleu_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  ot_bleu_opts d = {0};
  if (o) d = *o;
  if (d.tokenize < OT_BLEU_TOK_13A || d.tokenize > OT_BLEU_TOK_INTL)
    return ot_error(OT_EINVAL, "%s: unknown tokenizer %d (13a, none or intl)", fn,
                    (int)d.tokenize);
  if (d.smooth < OT_BLEU_SMOOTH_EXP || d.smooth > OT_BLEU_SMOOTH_NONE)
    return ot_error(OT_EINVAL, "%s: unknown smoothing %d (exp, floor, add-k or none)", fn,
                    (int)d.smooth);
  if (!(d.smooth_value > 0) || !isfinite(d.smooth_value))
    d.smooth_value = d.smooth == OT_BLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
  ot_bleu *b = ot_mem_alloc(sizeof *b, OT_MEM_OTHER);
  if (!b) return OT_ENOMEM;
  memset(b, 0, sizeof *b);
  b->o = d;
  b->nrefs = -2;
  *out = b;
  return OT_OK;
}

void ot_bleu_free(ot_bleu *b) {
  if (!b) return;
  ot__bleu_buf_free(&b->hb);
  ot__bleu_buf_free(&b->rb);
  ot_mem_free(b->ht); ot_mem_free(b->rt); ot_mem_free(b->tab);
  ot_mem_free(b);
}

// Splits the tokenized text (single spaces) into tokens with their hashes.
static ot_status split(const ot__bleu_buf *t, tokref **v, size_t *cap, size_t *n) {
  size_t k = 0;
  for (size_t i = 0; i < t->len;) {
    size_t j = i;
    while (j < t->len && t->a[j] != ' ') j++;
    OT_TRY(ot__grow((void **)v, cap, k + 1, sizeof **v));
    (*v)[k++] = (tokref){t->a + i, (uint32_t)(j - i), ot__key_hash((const uint8_t *)t->a + i, j - i)};
    i = j + 1;
  }
  *n = k;
  return OT_OK;
}

static uint64_t gram_hash(const tokref *t, int n) {
  uint64_t h = (uint64_t)n;
  for (int k = 0; k < n; k++) h = ot__mix64(h * 0x9e3779b97f4a7c15ull + t[k].h);
  return h;
}
static bool same(const tokref *a, const tokref *b, int n) {
  for (int k = 0; k < n; k++)
    if (a[k].h != b[k].h || a[k].len != b[k].len || memcmp(a[k].p, b[k].p, a[k].len)) return false;
  return true;
}
// The slot of n-gram g (in the hypothesis tokens b->ht), empty (n = 0) if absent.
static gram *find(ot_bleu *b, const tokref *g, int n, uint64_t h) {
  size_t m = b->tcap - 1;
  for (size_t i = h & m;; i = (i + 1) & m) {
    gram *e = &b->tab[i];
    if (!e->n || (e->h == h && e->n == n && same(b->ht + e->start, g, n))) return e;
  }
}

ot_status ot_bleu_add(ot_bleu *b, const char *hyp, const char *const *refs, int nrefs) {
  static const char fn[] = "ot_bleu_add";
  OT_CHECK_PTR(b, fn);
  OT_CHECK_PTR(hyp, fn);
  OT_CHECK_PTR(refs, fn);
  if (nrefs < 1) return ot_error(OT_EINVAL, "%s: nrefs=%d must be >= 1", fn, nrefs);
  size_t rl[64], *rlen = nrefs <= 64 ? rl : ot_mem_alloc(sizeof(size_t) * (size_t)nrefs, OT_MEM_OTHER);
  if (!rlen) return OT_ENOMEM;
  ot_status st = OT_OK;
  for (int r = 0; r < nrefs && st == OT_OK; r++) {
    if (!refs[r]) st = ot_error(OT_EINVAL, "%s: reference %d of %d is NULL", fn, r + 1, nrefs);
    else rlen[r] = strlen(refs[r]);
  }
  if (st == OT_OK) st = ot__bleu_add_n(b, hyp, strlen(hyp), refs, rlen, nrefs);
  if (rlen != rl) ot_mem_free(rlen);
  return st;
}

// As ot_bleu_add with explicit lengths (the strings need no terminator).
ot_status ot__bleu_add_n(ot_bleu *b, const char *hyp, size_t hlen, const char *const *refs,
                         const size_t *rlen, int nrefs) {
  static const char fn[] = "ot_bleu_add";
  for (int r = -1; r < nrefs; r++) {  // validate everything first: no partial segment
    const char *s = r < 0 ? hyp : refs[r];
    size_t n = r < 0 ? hlen : rlen[r], bad = ot__utf8_check(s, n);
    if (bad < n) {
      if (r < 0)
        return ot_error(OT_EINVAL, "%s: the hypothesis is not valid UTF-8 (byte %zu = 0x%02x)",
                        fn, bad, (unsigned)(uint8_t)s[bad]);
      return ot_error(OT_EINVAL, "%s: reference %d is not valid UTF-8 (byte %zu = 0x%02x)", fn,
                      r + 1, bad, (unsigned)(uint8_t)s[bad]);
    }
  }
  size_t nh = 0, nr = 0;
  OT_TRY(ot__bleu_tok(b->o.tokenize, b->o.lowercase, hyp, hlen, &b->hb));
  OT_TRY(split(&b->hb, &b->ht, &b->htcap, &nh));
  size_t need = 16;
  while (need < 2 * BLEU_N * nh + 2) need *= 2;
  if (need > b->tcap) {
    ot_mem_free(b->tab);
    b->tcap = 0;
    b->tab = ot_mem_alloc(need * sizeof(gram), OT_MEM_OTHER);
    if (!b->tab) return OT_ENOMEM;
    b->tcap = need;
  }
  memset(b->tab, 0, b->tcap * sizeof(gram));
  int64_t total[BLEU_N] = {0}, correct[BLEU_N] = {0};
  for (int n = 1; n <= BLEU_N; n++)
    for (size_t i = 0; i + (size_t)n <= nh; i++) {
      uint64_t h = gram_hash(b->ht + i, n);
      gram *e = find(b, b->ht + i, n, h);
      if (!e->n) *e = (gram){h, (int32_t)i, n, 0, 0, 0, -1};
      e->hyp++;
      total[n - 1]++;
    }
  int64_t best = -1, bestd = -1;  // closest reference length, the shorter on a tie
  for (int r = 0; r < nrefs; r++) {
    OT_TRY(ot__bleu_tok(b->o.tokenize, b->o.lowercase, refs[r], rlen[r], &b->rb));
    OT_TRY(split(&b->rb, &b->rt, &b->rtcap, &nr));
    int64_t d = (int64_t)nh > (int64_t)nr ? (int64_t)(nh - nr) : (int64_t)(nr - nh);
    if (bestd < 0 || d < bestd || (d == bestd && (int64_t)nr < best)) { bestd = d; best = (int64_t)nr; }
    for (int n = 1; n <= BLEU_N; n++)
      for (size_t i = 0; i + (size_t)n <= nr; i++) {
        gram *e = find(b, b->rt + i, n, gram_hash(b->rt + i, n));
        if (!e->n) continue;  // not in the hypothesis: cannot match
        if (e->last != r) { e->last = r; e->cur = 0; }
        if (++e->cur > e->refmax) e->refmax = e->cur;
      }
  }
  for (size_t i = 0; i < b->tcap; i++) {
    const gram *e = &b->tab[i];
    if (e->n) correct[e->n - 1] += e->hyp < e->refmax ? e->hyp : e->refmax;
  }
  b->sys_len += (int64_t)nh;
  b->ref_len += best;
  for (int n = 0; n < BLEU_N; n++) { b->correct[n] += correct[n]; b->total[n] += total[n]; }
  b->segments++;
  b->nrefs = b->nrefs == -2 || b->nrefs == nrefs ? nrefs : -1;
  return OT_OK;
}

// sacreBLEU's my_log: log, with log(0) = -9999999999.
static double my_log(double x) { return x == 0.0 ? -9999999999.0 : log(x); }

ot_status ot_bleu_result(const ot_bleu *b, ot_bleu_score *s) {
  static const char fn[] = "ot_bleu_result";
  OT_CHECK_PTR(b, fn);
  OT_CHECK_PTR(s, fn);
  memset(s, 0, sizeof *s);
  s->sys_len = b->sys_len;
  s->ref_len = b->ref_len;
  s->segments = b->segments;
  s->nrefs = b->nrefs == -2 ? 0 : b->nrefs;
  for (int n = 0; n < BLEU_N; n++) { s->counts[n] = b->correct[n]; s->totals[n] = b->total[n]; }
  s->ratio = b->ref_len ? (double)b->sys_len / (double)b->ref_len : 0.0;
  s->bp = 1.0;
  if (b->sys_len < b->ref_len)
    s->bp = b->sys_len > 0 ? exp(1.0 - (double)b->ref_len / (double)b->sys_len) : 0.0;
  bool any = false;
  for (int n = 0; n < BLEU_N; n++) any |= b->correct[n] != 0;
  if (!any) return OT_OK;  // score 0, precisions 0
  double corr[BLEU_N], tot[BLEU_N], smooth_mteval = 1.0, sv = b->o.smooth_value;
  for (int n = 0; n < BLEU_N; n++) { corr[n] = (double)b->correct[n]; tot[n] = (double)b->total[n]; }
  for (int n = 0; n < BLEU_N; n++) {
    if (b->o.smooth == OT_BLEU_SMOOTH_ADD_K && n > 0) { corr[n] += sv; tot[n] += sv; }
    if (tot[n] == 0) break;
    if (corr[n] == 0) {
      if (b->o.smooth == OT_BLEU_SMOOTH_EXP) {
        smooth_mteval *= 2;
        s->precisions[n] = 100.0 / (smooth_mteval * tot[n]);
      } else if (b->o.smooth == OT_BLEU_SMOOTH_FLOOR) {
        s->precisions[n] = 100.0 * sv / tot[n];
      }
    } else {
      s->precisions[n] = 100.0 * corr[n] / tot[n];
    }
  }
  double sum = 0.0;
  for (int n = 0; n < BLEU_N; n++) sum += my_log(s->precisions[n]);
  s->score = s->bp * exp(sum / BLEU_N);
  return OT_OK;
}

size_t ot_bleu_format(const ot_bleu_score *s, char *buf, size_t cap) {
  int k = snprintf(buf, cap, "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f "
                   "hyp_len = %lld ref_len = %lld)", s->score, s->precisions[0],
                   s->precisions[1], s->precisions[2], s->precisions[3], s->bp, s->ratio,
                   (long long)s->sys_len, (long long)s->ref_len);
  return k < 0 ? 0 : (size_t)k;
}

size_t ot_bleu_signature(const ot_bleu *b, char *buf, size_t cap) {
  static const char *const sm[] = {"exp", "floor", "add-k", "none"};
  static const char *const tk[] = {"13a", "none", "intl"};
  char nr[24], smooth[40];
  if (b->nrefs == -1) snprintf(nr, sizeof nr, "var");
  else snprintf(nr, sizeof nr, "%d", b->nrefs < 0 ? 0 : b->nrefs);
  if (b->o.smooth == OT_BLEU_SMOOTH_FLOOR || b->o.smooth == OT_BLEU_SMOOTH_ADD_K)
    snprintf(smooth, sizeof smooth, "%s[%.2f]", sm[b->o.smooth], b->o.smooth_value);
  else snprintf(smooth, sizeof smooth, "%s", sm[b->o.smooth]);
  int k = snprintf(buf, cap, "nrefs:%s|case:%s|eff:no|tok:%s|smooth:%s|version:2.6.0", nr,
                   b->o.lowercase ? "lc" : "mixed",
                   tk[b->o.tokenize], smooth);
  return k < 0 ? 0 : (size_t)k;
}
