// BLEU against sacreBLEU 2.6.0 (tests/golden/bleu/, tools/gen_bleu_golden.py):
// every golden line tokenized as sacreBLEU does (13a / none / intl, mixed / lower
// case), every scored variant's numbers (score to 1e-9 relative, counts and
// lengths exactly), its formatted line and signature byte for byte; the
// string API gives the file API's bits; variable reference counts; bad
// input (invalid UTF-8, line count mismatch, missing file, bad options).
// Run from the repository root (CTest does).
#include "harness.h"
#include "ot/data.h"
#include <unistd.h>

#define GOLD "tests/golden/bleu/"
#define MAXL 64

// Lines of a text file split at '\n' (a final '\n' adds none), malloc'd.
static int read_lines(const char *path, char **lines, int max) {
  FILE *f = fopen(path, "rb");
  if (!th_check(f != NULL, "open %s", path)) return 0;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  int k = 0;
  for (size_t i = 0; i < n && k < max;) {
    char *e = memchr(buf + i, '\n', n - i);
    size_t len = e ? (size_t)(e - buf - i) : n - i;
    lines[k] = malloc(len + 1);
    memcpy(lines[k], buf + i, len);
    lines[k][len] = '\0';
    k++;
    i += len + 1;
  }
  return k;
}
static void free_lines(char **l, int n) { for (int i = 0; i < n; i++) free(l[i]); }

static int nrefs_of(const char *set) {
  int k = 0;
  char p[256];
  for (;; k++) {
    snprintf(p, sizeof p, GOLD "%s/ref%d.txt", set, k);
    if (access(p, R_OK) != 0) return k;
  }
}

// Tokenized golden lines: hyp.txt then each ref file, tok_<tok>_<case>.txt.
static void test_tokenizer(void) {
  static const char *sets[] = {"punct", "unicode", "empty", "zero", "single", "multiref", "short",
                               "intl"};
  for (size_t si = 0; si < sizeof sets / sizeof *sets; si++) {
    char *in[MAXL * 4], *want[MAXL * 4], p[256];
    int n = 0, nr = nrefs_of(sets[si]);
    snprintf(p, sizeof p, GOLD "%s/hyp.txt", sets[si]);
    n += read_lines(p, in + n, MAXL);
    for (int r = 0; r < nr; r++) {
      snprintf(p, sizeof p, GOLD "%s/ref%d.txt", sets[si], r);
      n += read_lines(p, in + n, MAXL);
    }
    static const char *tn[] = {"13a", "none", "intl"};
    static const ot_bleu_tok tv[] = {OT_BLEU_TOK_13A, OT_BLEU_TOK_NONE, OT_BLEU_TOK_INTL};
    for (int t = 0; t < 3; t++)
      for (int lc = 0; lc < 2; lc++) {
        snprintf(p, sizeof p, GOLD "%s/tok_%s_%s.txt", sets[si], tn[t], lc ? "lc" : "mixed");
        int nw = read_lines(p, want, MAXL * 4);
        th_check(nw == n, "%s: %d tokenized lines for %d inputs", p, nw, n);
        ot_bleu_opts o = {tv[t], OT_BLEU_SMOOTH_EXP, 0, lc};
        for (int i = 0; i < n && i < nw; i++) {
          char *got = NULL;
          size_t len = 0;
          ot_status st = ot_bleu_tokenize(&o, in[i], strlen(in[i]), &got, &len);
          th_check(st == OT_OK && strcmp(got, want[i]) == 0 && len == strlen(want[i]),
                   "%s line %d: '%s' -> '%s', sacreBLEU '%s'", p, i + 1, in[i],
                   got ? got : "(null)", want[i]);
          free(got);
        }
        free_lines(want, nw);
      }
    free_lines(in, n);
  }
}

typedef struct {
  char set[32], tok[8], smooth[8], line[1024], sig[1024];
  int nrefs, lc;
  double value, score, prec[4], bp, ratio;
  long long sys_len, ref_len, counts[4], totals[4];
} gcase;

// Next block of cases.txt; false at the end.
static bool next_case(FILE *f, gcase *c) {
  char l[1024];
  memset(c, 0, sizeof *c);
  if (!fgets(l, sizeof l, f)) return false;
  if (sscanf(l, "case %31s nrefs %d tok %7s lc %d smooth %7s value %lf", c->set, &c->nrefs,
             c->tok, &c->lc, c->smooth, &c->value) != 6) {
    th_check(false, "cases.txt: bad header '%s'", l);
    return false;
  }
  while (fgets(l, sizeof l, f) && strncmp(l, "end", 3) != 0) {
    l[strcspn(l, "\n")] = '\0';
    if (!strncmp(l, "score ", 6)) c->score = strtod(l + 6, NULL);
    else if (!strncmp(l, "precisions ", 11))
      sscanf(l + 11, "%lf %lf %lf %lf", &c->prec[0], &c->prec[1], &c->prec[2], &c->prec[3]);
    else if (!strncmp(l, "bp ", 3)) c->bp = strtod(l + 3, NULL);
    else if (!strncmp(l, "ratio ", 6)) c->ratio = strtod(l + 6, NULL);
    else if (!strncmp(l, "sys_len ", 8)) c->sys_len = atoll(l + 8);
    else if (!strncmp(l, "ref_len ", 8)) c->ref_len = atoll(l + 8);
    else if (!strncmp(l, "counts ", 7))
      sscanf(l + 7, "%lld %lld %lld %lld", &c->counts[0], &c->counts[1], &c->counts[2], &c->counts[3]);
    else if (!strncmp(l, "totals ", 7))
      sscanf(l + 7, "%lld %lld %lld %lld", &c->totals[0], &c->totals[1], &c->totals[2], &c->totals[3]);
    else if (!strncmp(l, "line ", 5)) snprintf(c->line, sizeof c->line, "%s", l + 5);
    else if (!strncmp(l, "signature ", 10)) snprintf(c->sig, sizeof c->sig, "%s", l + 10);
  }
  return true;
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

static void test_golden_scores(void) {
  FILE *f = fopen(GOLD "cases.txt", "r");
  if (!th_check(f != NULL, "open " GOLD "cases.txt")) return;
  gcase c;
  int ncase = 0;
  while (next_case(f, &c)) {
    ncase++;
    ot_bleu_opts o = {0};
    o.tokenize = !strcmp(c.tok, "none") ? OT_BLEU_TOK_NONE
                 : !strcmp(c.tok, "intl") ? OT_BLEU_TOK_INTL : OT_BLEU_TOK_13A;
    o.smooth = !strcmp(c.smooth, "floor") ? OT_BLEU_SMOOTH_FLOOR
               : !strcmp(c.smooth, "add-k") ? OT_BLEU_SMOOTH_ADD_K
               : !strcmp(c.smooth, "none") ? OT_BLEU_SMOOTH_NONE : OT_BLEU_SMOOTH_EXP;
    o.smooth_value = c.value;
    o.lowercase = c.lc;
    char hyp[256], rp[8][256];
    const char *refs[8];
    snprintf(hyp, sizeof hyp, GOLD "%s/hyp.txt", c.set);
    for (int r = 0; r < c.nrefs && r < 8; r++) {
      snprintf(rp[r], sizeof rp[r], GOLD "%s/ref%d.txt", c.set, r);
      refs[r] = rp[r];
    }
    ot_bleu *b = NULL;
    ot_bleu_score s;
    th_check(ot_bleu_create(&b, &o) == OT_OK, "create %s", ot_last_error());
    th_check(ot_bleu_add_files(b, hyp, refs, c.nrefs) == OT_OK, "add_files %s: %s", c.set,
             ot_last_error());
    ot_bleu_result(b, &s);
    const char *v = c.set;
    th_check(close_to(s.score, c.score), "%s %s lc=%d %s: score %.17g, sacreBLEU %.17g", v,
             c.tok, c.lc, c.smooth, s.score, c.score);
    for (int n = 0; n < 4; n++) {
      th_check(close_to(s.precisions[n], c.prec[n]), "%s %s: precision %d %.17g vs %.17g", v,
               c.smooth, n + 1, s.precisions[n], c.prec[n]);
      th_check(s.counts[n] == c.counts[n] && s.totals[n] == c.totals[n],
               "%s %s lc=%d: %d-gram counts %lld/%lld, sacreBLEU %lld/%lld", v, c.tok, c.lc,
               n + 1, (long long)s.counts[n], (long long)s.totals[n], c.counts[n], c.totals[n]);
    }
    th_check(close_to(s.bp, c.bp) && close_to(s.ratio, c.ratio), "%s: bp %.17g ratio %.17g", v,
             s.bp, s.ratio);
    th_check(s.sys_len == c.sys_len && s.ref_len == c.ref_len, "%s %s: lengths %lld %lld vs %lld %lld",
             v, c.tok, (long long)s.sys_len, (long long)s.ref_len, c.sys_len, c.ref_len);
    char line[512], sig[128];
    size_t need = ot_bleu_format(&s, line, sizeof line);
    th_check(strcmp(line, c.line) == 0 && need == strlen(c.line), "%s: line\n  '%s'\n  '%s'", v,
             line, c.line);
    ot_bleu_signature(b, sig, sizeof sig);
    th_check(strcmp(sig, c.sig) == 0, "%s: signature '%s' vs '%s'", v, sig, c.sig);

    // the string API gives the same bits
    ot_bleu *b2 = NULL;
    ot_bleu_create(&b2, &o);
    char *hl[MAXL], *rl[8][MAXL];
    int nh = read_lines(hyp, hl, MAXL), nr[8];
    for (int r = 0; r < c.nrefs; r++) nr[r] = read_lines(refs[r], rl[r], MAXL);
    for (int i = 0; i < nh; i++) {
      const char *seg[8];
      for (int r = 0; r < c.nrefs; r++) seg[r] = rl[r][i];
      th_check(ot_bleu_add(b2, hl[i], seg, c.nrefs) == OT_OK, "add %s", ot_last_error());
    }
    ot_bleu_score s2;
    ot_bleu_result(b2, &s2);
    th_check(memcmp(&s, &s2, sizeof s) == 0, "%s: ot_bleu_add gives ot_bleu_add_files' bits", v);
    free_lines(hl, nh);
    for (int r = 0; r < c.nrefs; r++) free_lines(rl[r], nr[r]);
    ot_bleu_free(b2);
    ot_bleu_free(b);
  }
  fclose(f);
  th_check(ncase >= 15, "cases.txt: %d scored variants", ncase);
}

static void test_var_refs(void) {
  ot_bleu *b = NULL;
  ot_bleu_create(&b, NULL);
  const char *r2[] = {"a b c", "a b"}, *r1[] = {"x y z"};
  char sig[128], line[256];
  ot_bleu_score s;
  ot_bleu_result(b, &s);
  ot_bleu_format(&s, line, sizeof line);
  th_check(strcmp(line, "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 "
                        "ref_len = 0)") == 0, "empty corpus: '%s'", line);
  ot_bleu_add(b, "a b c", r2, 2);
  ot_bleu_signature(b, sig, sizeof sig);
  th_check(strcmp(sig, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0") == 0,
           "signature '%s'", sig);
  ot_bleu_add(b, "x y", r1, 1);
  ot_bleu_signature(b, sig, sizeof sig);
  th_check(strstr(sig, "nrefs:var|") == sig, "variable reference count: '%s'", sig);
  ot_bleu_result(b, &s);
  th_check(s.sys_len == 5 && s.ref_len == 6 && s.counts[0] == 5 && s.totals[0] == 5 &&
           s.counts[1] == 3 && s.totals[1] == 3, "hand-counted stats (sys %lld ref %lld)",
           (long long)s.sys_len, (long long)s.ref_len);
  // snprintf rules: the needed length, truncated output
  char small[8];
  size_t need = ot_bleu_signature(b, small, sizeof small);
  th_check(need == strlen(sig) && strlen(small) == 7, "signature truncates (need %zu)", need);
  ot_bleu_free(b);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
}

static void test_errors(void) {
  ot_bleu *b = NULL;
  ot_bleu_score s;
  ot_bleu_create(&b, NULL);
  const char *ok[] = {"fine"}, *bad[] = {"bad \xff byte"};
  th_check_error(ot_bleu_add(b, "caf\xc3", ok, 1), OT_EINVAL, "hypothesis is not valid UTF-8",
                 "truncated UTF-8 hypothesis");
  th_check_error(ot_bleu_add(b, "ok", bad, 1), OT_EINVAL, "reference 1 is not valid UTF-8",
                 "invalid reference byte");
  th_check_error(ot_bleu_add(b, "\xed\xa0\x80", ok, 1), OT_EINVAL, "UTF-8", "surrogate");
  th_check_error(ot_bleu_add(b, "\xc0\xaf", ok, 1), OT_EINVAL, "UTF-8", "overlong");
  th_check_error(ot_bleu_add(b, "ok", ok, 0), OT_EINVAL, "nrefs=0", "no references");
  ot_bleu_result(b, &s);
  th_check(s.segments == 0 && s.sys_len == 0, "rejected segments add nothing");
  char d[] = "/tmp/ot_bleu_XXXXXX";
  th_check(mkdtemp(d) != NULL, "mkdtemp");
  char h[64], r[64], r3[64], u[64];
  snprintf(h, sizeof h, "%s/h", d); snprintf(r, sizeof r, "%s/r", d);
  snprintf(r3, sizeof r3, "%s/r3", d); snprintf(u, sizeof u, "%s/u", d);
  write_file(h, "one\ntwo\n");
  write_file(r, "one\ntwo");  // no final newline: still two lines
  write_file(r3, "one\ntwo\nthree\n");
  write_file(u, "one\nt\xe9o\n");
  const char *rr[] = {r}, *r3r[] = {r3}, *ur[] = {u}, *miss[] = {"/nonexistent/ref.txt"};
  th_check(ot_bleu_add_files(b, h, rr, 1) == OT_OK, "two lines each: %s", ot_last_error());
  ot_bleu_result(b, &s);
  th_check(s.segments == 2 && s.counts[0] == 2, "files added (%lld segments)", (long long)s.segments);
  th_check_error(ot_bleu_add_files(b, h, r3r, 1), OT_EFORMAT, "has 3 lines", "line mismatch");
  th_check(strstr(ot_last_error(), "has 2") != NULL, "message names both counts: %s",
           ot_last_error());
  th_check_error(ot_bleu_add_files(b, h, ur, 1), OT_EFORMAT, ":2: invalid UTF-8", "file UTF-8");
  th_check_error(ot_bleu_add_files(b, h, miss, 1), OT_EIO, "/nonexistent/ref.txt", "missing file");
  ot_bleu_result(b, &s);
  th_check(s.segments == 2, "failed file calls add nothing (%lld)", (long long)s.segments);
  unlink(h); unlink(r); unlink(r3); unlink(u); rmdir(d);
  ot_bleu_free(b);
  ot_bleu_opts o = {0};
  o.tokenize = (ot_bleu_tok)7;
  th_check_error(ot_bleu_create(&b, &o), OT_EINVAL, "tokenizer", "unknown tokenizer");
  o.tokenize = OT_BLEU_TOK_13A;
  o.smooth = (ot_bleu_smooth)9;
  th_check_error(ot_bleu_create(&b, &o), OT_EINVAL, "smoothing", "unknown smoothing");
  char *out = NULL;
  th_check_error(ot_bleu_tokenize(NULL, "a\x80", 2, &out, NULL), OT_EINVAL, "byte 1",
                 "tokenize invalid UTF-8");
  th_check(out == NULL, "no output on error");
}

int main(void) {
  test_tokenizer();
  test_golden_scores();
  test_var_refs();
  test_errors();
  return th_finish();
}
