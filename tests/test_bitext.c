// Parallel text: counts and id round trips on the bundled En-Fr corpus, the
// batcher's epoch coverage, token budget, padding and ignore index, resume vs
// uninterrupted, the data-parallel partition vs the one-process batches, and
// bad input (unequal line counts, invalid UTF-8, over-long lines under both
// policies, CRLF, empty lines, empty and missing files) with its messages.
#include "harness.h"
#include "internal.h"
#include <unistd.h>

#define EN "data/translate/train.en"
#define FR "data/translate/train.fr"
static char g_dir[64];
static ot_bpe *g_bpe;      // joint BPE trained on the bundled training split
static size_t g_mem0;

static const char *tmp(const char *name) {
  static char p[4][256];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}
static void write_bytes(const char *path, const char *s, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(s, 1, n, f);
  fclose(f);
}
static void write_text(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }
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
// Start of each line of text (split on '\n'), malloc'd; *n lines.
static char **split_lines(char *text, size_t len, int64_t *n) {
  int64_t c = 0;
  for (size_t i = 0; i < len; i++) c += text[i] == '\n';
  char **l = th_alloc((size_t)(c + 1) * sizeof *l);
  *n = 0;
  for (char *p = text; p < text + len;) {
    char *e = memchr(p, '\n', (size_t)(text + len - p));
    if (e) *e = 0;
    l[(*n)++] = p;
    p = e ? e + 1 : text + len;
  }
  return l;
}
static ot_bitext *open_ok(const char *a, const char *b, int max_len, bool refuse) {
  ot_bitext_opts o = {g_bpe, max_len, refuse};
  ot_bitext *bt = NULL;
  ot_status s = ot_bitext_open(&bt, a, b, &o);
  th_check(s == OT_OK, "open %s %s: %s", a, b, s == OT_OK ? "" : ot_last_error());
  return bt;
}

// -------------------------------------------------------- bundled data -----
static void test_bundled(void) {
  size_t le, lf;
  char *te = slurp(EN, &le), *tf = slurp(FR, &lf);
  if (!th_check(te && tf, "bundled corpus readable (run from the repository root)")) return;
  int64_t ne, nf;
  char **Le = split_lines(te, le, &ne), **Lf = split_lines(tf, lf, &nf);
  th_check(ne == nf && ne > 20000, "bundled train split: %lld / %lld lines", (long long)ne, (long long)nf);
  ot_bitext *bt = open_ok(EN, FR, 1 << 20, true);
  if (!bt) return;
  ot_bitext_stats st;
  ot_bitext_get_stats(bt, &st);
  th_check(st.lines == ne && st.pairs == ne && st.empty == 0 && st.too_long == 0,
           "stats lines %lld pairs %lld empty %lld long %lld (want %lld pairs)", (long long)st.lines,
           (long long)st.pairs, (long long)st.empty, (long long)st.too_long, (long long)ne);
  th_check(ot_bitext_eos(bt) == ot_bpe_eot(g_bpe), "eos is <|endoftext|>");
  // every pair decodes back to its lines; token totals and maxima agree
  char *buf = th_alloc(1 << 16);
  int64_t bad = 0, ts = 0, tt = 0;
  int ms = 0, mt = 0;
  for (int64_t i = 0; i < st.pairs; i++) {
    const int32_t *s, *t;
    int ns, nt;
    int64_t line = ot_bitext_pair(bt, i, &s, &ns, &t, &nt);
    size_t n1 = 0, n2 = 0;
    ot_bitext_pair(bt, i, &s, &ns, &t, &nt);
    bool ok = line == i + 1 && ot_bpe_decode(g_bpe, s, (size_t)ns, buf, 1 << 16, &n1) == OT_OK &&
              n1 == strlen(Le[i]) && !memcmp(buf, Le[i], n1);
    ok = ok && ot_bpe_decode(g_bpe, t, (size_t)nt, buf, 1 << 16, &n2) == OT_OK && n2 == strlen(Lf[i]) &&
         !memcmp(buf, Lf[i], n2);
    for (int k = 0; k < ns; k++) ok = ok && s[k] != ot_bitext_eos(bt);
    bad += !ok;
    ts += ns; tt += nt;
    ms = ns > ms ? ns : ms; mt = nt > mt ? nt : mt;
  }
  th_check(bad == 0, "%lld of %lld pairs do not decode to their lines", (long long)bad, (long long)st.pairs);
  th_check(ts == st.src_tokens && tt == st.tgt_tokens && ms == st.max_src && mt == st.max_tgt,
           "token stats %lld/%lld max %d/%d", (long long)st.src_tokens, (long long)st.tgt_tokens, st.max_src,
           st.max_tgt);
  th_check(ot_bitext_pair(bt, st.pairs, NULL, NULL, NULL, NULL) == -1, "pair index past the end gives -1");
  // the over-long policy on real data: skip counts exactly the pairs over the limit
  int lim = 24;
  int64_t want_long = 0;
  for (int64_t i = 0; i < st.pairs; i++) {
    int ns, nt;
    ot_bitext_pair(bt, i, NULL, &ns, NULL, &nt);
    want_long += ns > lim || nt > lim;
  }
  ot_bitext *b2 = open_ok(EN, FR, lim, false);
  if (b2) {
    ot_bitext_stats s2;
    ot_bitext_get_stats(b2, &s2);
    th_check(s2.too_long == want_long && s2.pairs == ne - want_long && s2.max_src <= lim && s2.max_tgt <= lim,
             "max_len %d: %lld skipped (want %lld), %lld kept", lim, (long long)s2.too_long,
             (long long)want_long, (long long)s2.pairs);
    ot_bitext_close(b2);
  }
  ot_bitext_close(bt);
  free(buf); free(Le); free(Lf); free(te); free(tf);
}

// ------------------------------------------------------------- batcher -----
static uint64_t batch_hash(const ot_bitext_batch *b) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)b->B;
  for (int i = 0; i < b->B; i++) h = (h ^ (uint64_t)b->pair[i]) * 1099511628211ull;
  for (int i = 0; i < b->B * b->S; i++) h = (h ^ (uint32_t)b->src[i]) * 1099511628211ull;
  for (int i = 0; i < b->B * b->T; i++) h = (h ^ (uint32_t)b->dec_tgt[i]) * 1099511628211ull;
  return h;
}

// Row contents against the pair's ids; returns the number of bad rows.
static int cmp_i64(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

// Rows out of the batcher's order: (max(ns, nt) + 1, ns + 1) non-decreasing.
static int unordered(const ot_bitext_batch *b) {
  int bad = 0;
  for (int r = 1; r < b->B; r++) {
    const int l0 = b->src_len[r - 1] > b->tgt_len[r - 1] ? b->src_len[r - 1] : b->tgt_len[r - 1];
    const int l1 = b->src_len[r] > b->tgt_len[r] ? b->src_len[r] : b->tgt_len[r];
    bad += l1 < l0 || (l1 == l0 && b->src_len[r] < b->src_len[r - 1]);
  }
  return bad;
}

static int check_rows(const ot_bitext *bt, const ot_bitext_batch *b) {
  int bad = 0;
  const int32_t eos = ot_bitext_eos(bt);
  for (int r = 0; r < b->B; r++) {
    const int32_t *s, *t;
    int ns, nt;
    ot_bitext_pair(bt, b->pair[r], &s, &ns, &t, &nt);
    const int32_t *ps = b->src + (size_t)r * b->S, *pi = b->dec_in + (size_t)r * b->T,
                  *pt = b->dec_tgt + (size_t)r * b->T;
    bool ok = b->src_len[r] == ns + 1 && b->tgt_len[r] == nt + 1 && ns + 1 <= b->S && nt + 1 <= b->T;
    for (int j = 0; ok && j < b->S; j++) ok = ps[j] == (j < ns ? s[j] : eos);
    for (int j = 0; ok && j < b->T; j++) ok = pi[j] == (j == 0 ? eos : j <= nt ? t[j - 1] : eos);
    for (int j = 0; ok && j < b->T; j++) ok = pt[j] == (j < nt ? t[j] : j == nt ? eos : -1);
    bad += !ok;
  }
  return bad;
}

static void test_batcher(const ot_bitext *bt) {
  const int64_t P = ot_bitext_pairs(bt), budget = 2048;
  ot_bitext_batcher_config cfg = {budget, 8, true, 1234, 0, 1};
  ot_bitext_batcher *b = NULL;
  if (!th_check(ot_bitext_batcher_open(&b, bt, &cfg) == OT_OK, "batcher open: %s", ot_last_error())) return;
  int *seen = th_alloc((size_t)P * sizeof *seen);
  uint64_t first[3] = {0};
  for (uint64_t e = 0; e < 3; e++) {
    memset(seen, 0, (size_t)P * sizeof *seen);
    int64_t nb = ot_bitext_batches(b, e), over = 0, badrows = 0, badtok = 0, pad = 0, real = 0;
    int smax = 0;
    for (int64_t k = 0; k < nb; k++) {
      ot_bitext_batch x;
      ot_bitext_next(b, &x);
      if (k == 0) first[e] = batch_hash(&x);
      if (x.epoch != e || x.index != (uint64_t)k) { over += 1000000; break; }
      int L = x.S > x.T ? x.S : x.T;
      over += (int64_t)x.B * L > budget;
      badrows += check_rows(bt, &x) + unordered(&x);
      int64_t tt = 0;
      for (int r = 0; r < x.B; r++) { seen[x.pair[r]]++; tt += x.tgt_len[r]; real += x.src_len[r]; }
      badtok += tt != x.tgt_tokens || x.global_tgt_tokens != tt || x.global_rows != x.B;
      pad += (int64_t)x.B * x.S;
      smax = x.B > smax ? x.B : smax;
    }
    int64_t miss = 0;
    for (int64_t i = 0; i < P; i++) miss += seen[i] != 1;
    th_check(miss == 0, "epoch %llu: %lld pairs not seen exactly once", (unsigned long long)e, (long long)miss);
    th_check(over == 0, "epoch %llu: %lld batches over the %lld-token budget", (unsigned long long)e,
             (long long)over, (long long)budget);
    th_check(badrows == 0 && badtok == 0, "epoch %llu: %lld rows with bad padding / ignore, %lld bad counts",
             (unsigned long long)e, (long long)badrows, (long long)badtok);
    th_check((double)real / (double)pad > 0.6, "epoch %llu: buckets keep source padding low (%.2f real)",
             (unsigned long long)e, (double)real / (double)pad);
    ot_loader_state st;
    ot_bitext_get_state(b, &st);
    th_check(st.epoch == e + 1 && st.index == 0, "after epoch %llu the state is (%llu, %llu)",
             (unsigned long long)e, (unsigned long long)st.epoch, (unsigned long long)st.index);
  }
  th_check(first[0] != first[1] && first[1] != first[2], "each epoch has its own order");
  // same seed, same batches; another seed, another order
  ot_bitext_batcher *b2 = NULL;
  ot_bitext_batcher_open(&b2, bt, &cfg);
  ot_bitext_batch x;
  ot_bitext_next(b2, &x);
  th_check(batch_hash(&x) == first[0], "same seed gives the same first batch");
  ot_bitext_batcher_close(b2);
  cfg.seed = 99;
  ot_bitext_batcher_open(&b2, bt, &cfg);
  ot_bitext_next(b2, &x);
  th_check(batch_hash(&x) != first[0], "another seed gives another first batch");
  ot_loader_state other;
  ot_bitext_get_state(b2, &other);
  th_check_error(ot_bitext_set_state(b, &other), OT_EINVAL, "fingerprint", "state of another seed");
  ot_bitext_batcher_close(b2);
  // resume == uninterrupted, across an epoch boundary
  cfg.seed = 1234;
  ot_bitext_batcher *u = NULL, *r = NULL;
  ot_bitext_batcher_open(&u, bt, &cfg);
  const int64_t nb0 = ot_bitext_batches(u, 0), stop = nb0 - 3, run = 10;
  for (int64_t k = 0; k < stop; k++) ot_bitext_next(u, &x);
  ot_loader_state st;
  ot_bitext_get_state(u, &st);
  uint64_t want[10];
  for (int k = 0; k < run; k++) { ot_bitext_next(u, &x); want[k] = batch_hash(&x); }
  ot_bitext_batcher_open(&r, bt, &cfg);
  ot_bitext_next(r, &x);  // somewhere else first
  th_check(ot_bitext_set_state(r, &st) == OT_OK, "set_state: %s", ot_last_error());
  int diff = 0;
  for (int k = 0; k < run; k++) { ot_bitext_next(r, &x); diff += batch_hash(&x) != want[k]; }
  th_check(diff == 0, "resumed at batch %lld: %d of %lld batches differ", (long long)stop, diff, (long long)run);
  ot_loader_state badst = st;
  badst.index = (uint64_t)nb0;
  th_check_error(ot_bitext_set_state(r, &badst), OT_EINVAL, "out of range", "index past the epoch");
  ot_bitext_batcher_close(u);
  ot_bitext_batcher_close(r);
  // unshuffled: longest bucket first, the same every epoch
  cfg.shuffle = false;
  ot_bitext_batcher_open(&u, bt, &cfg);
  ot_bitext_next(u, &x);
  uint64_t h0 = batch_hash(&x);
  int lastL = 1 << 30, order_bad = 0;
  for (int64_t k = 1; k < ot_bitext_batches(u, 0); k++) {
    ot_bitext_next(u, &x);
    int L = x.S > x.T ? x.S : x.T;
    order_bad += (L - 1) / 8 > (lastL - 1) / 8;
    lastL = L;
  }
  ot_bitext_next(u, &x);
  th_check(order_bad == 0 && batch_hash(&x) == h0, "unshuffled: buckets in descending order, epochs equal");
  ot_bitext_batcher_close(u);
  ot_bitext_batcher_close(b);
  free(seen);
}

// Rank r of world W: same batch count, non-empty, union of the parts = the one-process batch;
// a row's sample index (its index in the global batch) names the same pair on every world
// size, and the one-process batch's indices are 0 .. B - 1.
static void test_partition(const ot_bitext *bt) {
  for (int W = 2; W <= 3; W++) {
    ot_bitext_batcher_config c1 = {4096, 8, true, 7, 0, 1};
    ot_bitext_batcher *one = NULL, *rk[3] = {0};
    ot_bitext_batcher_open(&one, bt, &c1);
    bool ok = true;
    for (int r = 0; r < W; r++) {
      ot_bitext_batcher_config c = c1;
      c.rank = r; c.world = W;
      ok = ok && ot_bitext_batcher_open(&rk[r], bt, &c) == OT_OK;
    }
    if (!th_check(ok, "world %d: open every rank: %s", W, ot_last_error())) return;
    int64_t bad = 0, empty = 0, counts = 0, pp[4096], by_sample[4096], sbad = 0;
    for (uint64_t e = 0; e < 2; e++) {
      int64_t nb = ot_bitext_batches(one, e);
      for (int r = 0; r < W; r++) counts += ot_bitext_batches(rk[r], e) != nb;
      for (int64_t k = 0; k < nb; k++) {
        ot_bitext_batch g, p;
        ot_bitext_next(one, &g);
        for (int i = 0; i < g.B && g.B <= 4096; i++) by_sample[i] = -1;
        for (int i = 0; i < g.B && g.B <= 4096; i++) {
          const int64_t s = g.sample[i];
          if (s < 0 || s >= g.B || by_sample[s] != -1) sbad++;
          else by_sample[s] = g.pair[i];
        }
        // the ranks' parts hold the one-process batch's pairs (each part ordered by length)
        int at = 0;
        for (int r = 0; r < W; r++) {
          ot_bitext_next(rk[r], &p);
          empty += p.B == 0;
          bad += check_rows(bt, &p) + (p.global_rows != g.B) + (p.global_tgt_tokens != g.global_tgt_tokens);
          bad += unordered(&p);
          for (int i = 0; i < p.B; i++, at++) {
            if (at < (int)(sizeof pp / sizeof *pp)) pp[at] = p.pair[i];
            sbad += p.sample[i] < 0 || p.sample[i] >= g.B || by_sample[p.sample[i]] != p.pair[i];
          }
        }
        bad += at != g.B || at > (int)(sizeof pp / sizeof *pp);
        if (at == g.B && at <= (int)(sizeof pp / sizeof *pp)) {
          int64_t gp[sizeof pp / sizeof *pp];
          memcpy(gp, g.pair, (size_t)g.B * sizeof *gp);
          qsort(gp, (size_t)g.B, sizeof *gp, cmp_i64);
          qsort(pp, (size_t)at, sizeof *pp, cmp_i64);
          for (int i = 0; i < at; i++) bad += pp[i] != gp[i];
        }
      }
    }
    th_check(bad == 0 && empty == 0 && counts == 0,
             "world %d: %lld mismatches with the one-process batches, %lld empty parts, %lld count differences",
             W, (long long)bad, (long long)empty, (long long)counts);
    th_check(sbad == 0, "world %d: every row's sample index names its pair in the one-process "
             "batch (%lld mismatches)", W, (long long)sbad);
    ot_bitext_batcher_close(one);
    for (int r = 0; r < W; r++) ot_bitext_batcher_close(rk[r]);
  }
  // the budget must let every rank have a row of the longest pair
  ot_bitext_stats st;
  ot_bitext_get_stats(bt, &st);
  int L = (st.max_src > st.max_tgt ? st.max_src : st.max_tgt) + 1;
  ot_bitext_batcher_config c = {(int64_t)4 * L - 1, 8, true, 7, 1, 2};
  ot_bitext_batcher *b = NULL;
  th_check_error(ot_bitext_batcher_open(&b, bt, &c), OT_EINVAL, "raise max_tokens", "budget below 2*world*L");
  c.max_tokens = 4 * L;
  th_check(ot_bitext_batcher_open(&b, bt, &c) == OT_OK, "budget of exactly 2*world*L opens");
  ot_bitext_batcher_close(b);
  c.rank = 2;
  th_check_error(ot_bitext_batcher_open(&b, bt, &c), OT_EINVAL, "rank=2", "rank outside the world");
}

// ------------------------------------------------------------ bad input ----
static void open_fails(const char *a, const char *b, int max_len, bool refuse, ot_status want, const char *n1,
                       const char *n2, const char *what) {
  ot_bitext_opts o = {g_bpe, max_len, refuse};
  ot_bitext *bt = (ot_bitext *)1;
  ot_status s = ot_bitext_open(&bt, a, b, &o);
  th_check_error(s, want, n1, what);
  if (n2) th_check(s != OT_OK && strstr(ot_last_error(), n2), "%s: message names '%s': %s", what, n2, ot_last_error());
  th_check(bt == NULL, "%s: *out is NULL after a failure", what);
}

static void test_bad_input(void) {
  write_text(tmp("a.en"), "one\ntwo\nthree\n");
  write_text(tmp("a.fr"), "un\ndeux\n");
  open_fails(tmp("a.en"), tmp("a.fr"), 0, false, OT_EFORMAT, "has 3 lines but", "a.en:3: \"three\"",
             "unequal line counts");
  write_text(tmp("b.fr"), "un\ndeux\ntrois\nquatre");
  open_fails(tmp("a.en"), tmp("b.fr"), 0, false, OT_EFORMAT, "has 4", "b.fr:4: \"quatre\"", "extra target line");
  write_text(tmp("u.fr"), "un\nde\xff" "ux\ntrois\n");
  open_fails(tmp("a.en"), tmp("u.fr"), 0, false, OT_EFORMAT, "u.fr:2: invalid UTF-8", "byte offset 2",
             "invalid UTF-8 byte");
  write_text(tmp("v.fr"), "un\ndeux\ntr\xc3\n");   // truncated sequence at the line end
  open_fails(tmp("a.en"), tmp("v.fr"), 0, false, OT_EFORMAT, "v.fr:3: invalid UTF-8", "byte offset 2",
             "truncated UTF-8");
  write_text(tmp("w.fr"), "\xc0\xafun\ndeux\n\xed\xa0\x80\n");   // overlong '/', then a surrogate
  open_fails(tmp("a.en"), tmp("w.fr"), 0, false, OT_EFORMAT, "w.fr:1: invalid UTF-8", "byte 0xc0",
             "overlong UTF-8");
  write_text(tmp("x.fr"), "un\ndeux\n\xed\xa0\x80\n");
  open_fails(tmp("a.en"), tmp("x.fr"), 0, false, OT_EFORMAT, "x.fr:3: invalid UTF-8", NULL, "surrogate");
  open_fails(tmp("a.en"), tmp("missing.fr"), 0, false, OT_EIO, "missing.fr", NULL, "missing file");
  write_text(tmp("e.en"), "");
  write_text(tmp("e.fr"), "");
  open_fails(tmp("e.en"), tmp("e.fr"), 0, false, OT_EFORMAT, "no pair", NULL, "empty files");
  open_fails(tmp("e.en"), tmp("a.fr"), 0, false, OT_EFORMAT, "has 0 lines", NULL, "one empty file");
  write_text(tmp("blank.en"), "\n  \n\t\n");
  write_text(tmp("blank.fr"), "a\nb\nc\n");
  open_fails(tmp("blank.en"), tmp("blank.fr"), 0, false, OT_EFORMAT, "3 with an empty side", NULL, "only blanks");
  ot_bitext_opts o = {NULL, 0, false};
  ot_bitext *bt = NULL;
  th_check_error(ot_bitext_open(&bt, tmp("a.en"), tmp("a.en"), &o), OT_EINVAL, "opts->bpe", "no tokenizer");
  o.bpe = g_bpe; o.max_len = -1;
  th_check_error(ot_bitext_open(&bt, tmp("a.en"), tmp("a.en"), &o), OT_EINVAL, "max_len=-1", "negative max_len");

  // CRLF = LF; empty lines (either side) skipped and counted; line numbers kept
  write_text(tmp("c.en"), "The file\r\n\r\nOpen the dialog.\r\nSave\r\nlast line");
  write_text(tmp("c.fr"), "Le fichier\r\nvide\r\nOuvrez la bo\xc3\xaete de dialogue.\r\n \r\nderni\xc3\xa8re");
  write_text(tmp("l.en"), "The file\nOpen the dialog.\nlast line\n");
  write_text(tmp("l.fr"), "Le fichier\nOuvrez la bo\xc3\xaete de dialogue.\nderni\xc3\xa8re\n");
  ot_bitext *c = open_ok(tmp("c.en"), tmp("c.fr"), 0, false), *l = open_ok(tmp("l.en"), tmp("l.fr"), 0, false);
  if (c && l) {
    ot_bitext_stats sc;
    ot_bitext_get_stats(c, &sc);
    th_check(sc.lines == 5 && sc.pairs == 3 && sc.empty == 2, "CRLF file: %lld lines %lld pairs %lld empty",
             (long long)sc.lines, (long long)sc.pairs, (long long)sc.empty);
    static const int64_t lines[3] = {1, 3, 5};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
      const int32_t *s1, *t1, *s2, *t2;
      int a1, b1, a2, b2;
      int64_t ln = ot_bitext_pair(c, i, &s1, &a1, &t1, &b1);
      ot_bitext_pair(l, i, &s2, &a2, &t2, &b2);
      bad += ln != lines[i] || a1 != a2 || b1 != b2 || memcmp(s1, s2, (size_t)a1 * 4) || memcmp(t1, t2, (size_t)b1 * 4);
      const char *txt = i == 1 ? "Open the dialog." : NULL;
      if (txt) {
        char out[64];
        size_t n = 0;
        ot_bpe_decode(g_bpe, s1, (size_t)a1, out, sizeof out, &n);
        bad += n != strlen(txt) || memcmp(out, txt, n);
      }
    }
    th_check(bad == 0, "CRLF and LF give the same ids; line numbers 1, 3, 5");
  }
  ot_bitext_close(c);
  ot_bitext_close(l);

  // over-long lines: skipped and counted, or refused with file:line
  write_text(tmp("long.en"), "short\nThis sentence is clearly much longer than four tokens of text.\nok\n");
  write_text(tmp("long.fr"), "court\nlong\noui\n");
  ot_bitext *sk = open_ok(tmp("long.en"), tmp("long.fr"), 4, false);
  if (sk) {
    ot_bitext_stats s;
    ot_bitext_get_stats(sk, &s);
    th_check(s.pairs == 2 && s.too_long == 1 && ot_bitext_pair(sk, 1, NULL, NULL, NULL, NULL) == 3,
             "over-long skipped: %lld pairs, %lld long", (long long)s.pairs, (long long)s.too_long);
  }
  ot_bitext_close(sk);
  open_fails(tmp("long.en"), tmp("long.fr"), 4, true, OT_EFORMAT, "long.en:2:", "> max_len 4", "over-long refused");
  open_fails(tmp("long.en"), tmp("long.fr"), 1, false, OT_EFORMAT, "no pair", "3 over max_len", "all over-long");

  // the batcher refuses a budget below the longest pair, and more ranks than pairs
  ot_bitext *two = open_ok(tmp("l.en"), tmp("l.fr"), 0, false);
  if (two) {
    ot_bitext_batcher *b = NULL;
    ot_bitext_batcher_config cfg = {1, 8, true, 1, 0, 1};
    th_check_error(ot_bitext_batcher_open(&b, two, &cfg), OT_EINVAL, "max_tokens=1", "tiny budget");
    cfg.max_tokens = 1000; cfg.world = 4; cfg.rank = 3;
    th_check_error(ot_bitext_batcher_open(&b, two, &cfg), OT_EINVAL, "3 pairs", "world > pairs");
    cfg.world = 3; cfg.rank = 2;
    th_check(ot_bitext_batcher_open(&b, two, &cfg) == OT_OK, "world = pairs opens");
    ot_bitext_batch x;
    ot_bitext_next(b, &x);
    th_check(x.B == 1 && x.global_rows == 3, "3 pairs over 3 ranks: one row each (B=%d)", x.B);
    ot_bitext_batcher_close(b);
  }
  ot_bitext_close(two);

  // the joint BPE trainer checks the files the same way
  ot_bpe *t = NULL;
  th_check_error(ot_bitext_train_bpe(&t, tmp("a.en"), tmp("a.fr"), 300, false), OT_EFORMAT, "has 3 lines",
                 "train on unequal files");
  th_check_error(ot_bitext_train_bpe(&t, tmp("a.en"), tmp("u.fr"), 300, false), OT_EFORMAT, "invalid UTF-8",
                 "train on invalid UTF-8");
  th_check_error(ot_bitext_train_bpe(&t, tmp("e.en"), tmp("e.fr"), 300, false), OT_EFORMAT, "no non-empty line",
                 "train on empty files");
  th_check_error(ot_bitext_train_bpe(&t, tmp("nope.en"), tmp("a.fr"), 300, false), OT_EIO, "nope.en",
                 "train on a missing file");
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ot_bitext_%d", (int)getpid());
  char cmd[128];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
  if (system(cmd) != 0) return 1;
  g_mem0 = ot_mem_current(OT_MEM_OTHER);
  double t0 = ot_now();
  ot_status s = ot_bitext_train_bpe(&g_bpe, EN, FR, 2000, false);
  if (!th_check(s == OT_OK, "joint BPE on the bundled corpus: %s", s == OT_OK ? "" : ot_last_error()))
    return th_finish();
  printf("joint BPE: %d tokens in %.2f s\n", ot_bpe_vocab_size(g_bpe), ot_now() - t0);
  th_check(ot_bpe_vocab_size(g_bpe) == 2000 && ot_bpe_eot(g_bpe) >= 0, "vocab 2000 with <|endoftext|>");
  // no token spans a line break or holds a newline: lines are separate words
  int nl = 0;
  for (int i = 0; i < ot_bpe_vocab_size(g_bpe); i++) {
    size_t n;
    const char *p = ot_bpe_token(g_bpe, i, &n);
    nl += n > 1 && memchr(p, '\n', n) != NULL;
  }
  th_check(nl == 0, "%d merged tokens contain a newline", nl);
  test_bundled();
  ot_bitext *bt = open_ok(EN, FR, 128, false);
  if (bt) {
    test_batcher(bt);
    test_partition(bt);
  }
  ot_bitext_close(bt);
  test_bad_input();
  ot_bpe_free(g_bpe);
  th_check(ot_mem_current(OT_MEM_OTHER) == g_mem0, "tracked memory back to its start (%zu vs %zu)",
           ot_mem_current(OT_MEM_OTHER), g_mem0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) return 1;
  return th_finish();
}
