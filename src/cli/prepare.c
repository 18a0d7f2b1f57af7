// `ot prepare`: corpus -> tokenizer files + llm.c-format train/val shards.
// `ot tokenize`: encode a text (or decode ids) with a tokenizer, for inspection.
#include "cli.h"
#include <errno.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

static char *read_all(const char *path, size_t *len) {
  FILE *f = !strcmp(path, "-") ? stdin : fopen(path, "rb");
  if (!f) { fprintf(stderr, "ot: cannot open %s: %s\n", path, strerror(errno)); return NULL; }
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;) {
    n += k;
    if (n == cap) { char *nb = realloc(b, cap *= 2); if (!nb) { free(b); b = NULL; } else b = nb; }
  }
  bool err = ferror(f);
  if (f != stdin) fclose(f);
  if (!b || err) { fprintf(stderr, "ot: cannot read %s\n", path); free(b); return NULL; }
  *len = n;
  return b;
}

static bool mkdirs(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') { *s = 0; mkdir(p, 0755); *s = '/'; }
  if (mkdir(p, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "ot prepare: cannot create %s: %s\n", dir, strerror(errno));
    return false;
  }
  return true;
}

// "data/gpt2" for "gpt2", else the directory itself; loads DIR/vocab.json + DIR/merges.txt.
static ot_bpe *load_tokenizer(const char *dir) {
  if (!strcmp(dir, "gpt2")) dir = "data/gpt2";
  char vj[4200], mt[4200];
  snprintf(vj, sizeof vj, "%s/vocab.json", dir);
  snprintf(mt, sizeof mt, "%s/merges.txt", dir);
  ot_bpe *t = NULL;
  if (ot_bpe_load(&t, vj, mt) != OT_OK) { fprintf(stderr, "ot: %s\n", ot_last_error()); return NULL; }
  return t;
}

// Encodes text (with <|endoftext|> as the special token) after a leading
// EOT and writes shards "<out>/<split>_NNNNNN.bin" of at most shard_tokens.
static int write_split(const ot_bpe *t, const char *text, size_t len, const char *out, const char *split,
                       int64_t shard_tokens, int version, int64_t *ntok, int *nshards, double *enc_s) {
  int32_t *ids = malloc((len + 1) * sizeof *ids);
  if (!ids) { fprintf(stderr, "ot prepare: out of memory\n"); return 1; }
  size_t n = 0;
  double t0 = ot_now();
  ids[0] = ot_bpe_eot(t);
  if (ot_bpe_encode(t, text, len, true, ids + 1, len, &n) != OT_OK) {
    fprintf(stderr, "ot prepare: %s\n", ot_last_error());
    free(ids);
    return 1;
  }
  *enc_s += ot_now() - t0;
  n += 1;
  *ntok = (int64_t)n;
  *nshards = 0;
  for (size_t at = 0; at < n; at += (size_t)shard_tokens) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_%06d.bin", out, split, *nshards);
    size_t k = n - at < (size_t)shard_tokens ? n - at : (size_t)shard_tokens;
    if (ot_shard_write(path, ids + at, (int64_t)k, version) != OT_OK) {
      fprintf(stderr, "ot prepare: %s\n", ot_last_error());
      free(ids);
      return 1;
    }
    ++*nshards;
  }
  free(ids);
  return 0;
}

static void remove_old_shards(const char *out) {
  static const char *const pats[] = {"train_*.bin", "val_*.bin"};
  for (int i = 0; i < 2; i++) {
    char pat[4200];
    snprintf(pat, sizeof pat, "%s/%s", out, pats[i]);
    glob_t g;
    if (glob(pat, 0, NULL, &g) == 0)
      for (size_t k = 0; k < g.gl_pathc; k++) unlink(g.gl_pathv[k]);
    globfree(&g);
  }
}

static void prepare_usage(FILE *f) {
  fprintf(f,
          "usage: ot prepare --corpus FILE --out DIR [options]\n"
          "Trains (or loads) a byte-level BPE tokenizer and writes DIR/vocab.json, DIR/merges.txt,\n"
          "DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin (llm.c token shards: uint16 ids when the\n"
          "vocabulary fits, else uint32) and DIR/info.json. The last --val-fraction of the corpus\n"
          "(from a line start) is the held-out split; the tokenizer is trained on the rest. Each\n"
          "split starts with <|endoftext|>; literal <|endoftext|> in the corpus becomes that token.\n"
          "  --corpus FILE        UTF-8 text (e.g. data/shakespeare.txt)\n"
          "  --out DIR            output directory (created)\n"
          "  --vocab-size N       tokens of the trained vocabulary, incl. <|endoftext|> (default 8192)\n"
          "  --tokenizer KIND     bpe (train, default), gpt2 (data/gpt2) or a directory with\n"
          "                       vocab.json + merges.txt\n"
          "  --val-fraction F     held-out share of the corpus in [0, 0.5] (default 0.05)\n"
          "  --shard-tokens N     tokens per shard file (default 100000000)\n"
          "  --quiet              no progress lines\n");
}

int ot_cmd_prepare(int argc, char **argv) {
  const char *corpus = NULL, *out = NULL, *kind = "bpe";
  int vocab = 8192, shard_tokens = 100000000;
  double valf = 0.05;
  bool quiet = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { prepare_usage(stdout); return 0; }
    else if (!strcmp(a, "--quiet")) quiet = true;
    else if (!strcmp(a, "--corpus") && v) { corpus = v; i++; }
    else if (!strcmp(a, "--out") && v) { out = v; i++; }
    else if (!strcmp(a, "--tokenizer") && v) { kind = v; i++; }
    else if (!strcmp(a, "--vocab-size")) { if (!cli_parse_int(a, v, 257, 1 << 24, &vocab)) return 2; i++; }
    else if (!strcmp(a, "--shard-tokens")) { if (!cli_parse_int(a, v, 1, INT32_MAX, &shard_tokens)) return 2; i++; }
    else if (!strcmp(a, "--val-fraction") && v) {
      char *end;
      valf = strtod(v, &end);
      if (*end || end == v || !(valf >= 0 && valf <= 0.5)) {
        fprintf(stderr, "ot prepare: --val-fraction '%s' is not a number in [0, 0.5]\n", v);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "ot prepare: unknown option or missing value: '%s'\n\n", a);
      prepare_usage(stderr);
      return 2;
    }
  }
  if (!corpus || !out) { fprintf(stderr, "ot prepare: --corpus and --out are required\n\n"); prepare_usage(stderr); return 2; }
  size_t len = 0;
  char *text = read_all(corpus, &len);
  if (!text) return 1;
  if (!mkdirs(out)) { free(text); return 1; }
  // held-out split from the start of a line
  size_t split = len - (size_t)((double)len * valf);
  while (valf > 0 && split < len && split > 0 && text[split - 1] != '\n') split++;
  if (valf > 0 && split >= len) split = len - (size_t)((double)len * valf);
  double t0 = ot_now();
  ot_bpe *t = NULL;
  if (!strcmp(kind, "bpe")) {
    if (ot_bpe_train(&t, text, split, vocab, !quiet) != OT_OK) {
      fprintf(stderr, "ot prepare: %s\n", ot_last_error());
      free(text);
      return 1;
    }
  } else if (!(t = load_tokenizer(kind))) {
    free(text);
    return 1;
  }
  double tok_s = ot_now() - t0;
  if (ot_bpe_eot(t) < 0) {
    fprintf(stderr, "ot prepare: the tokenizer has no %s token\n", OT_BPE_EOT);
    ot_bpe_free(t); free(text);
    return 1;
  }
  char vj[4200], mt[4200];
  snprintf(vj, sizeof vj, "%s/vocab.json", out);
  snprintf(mt, sizeof mt, "%s/merges.txt", out);
  int rc = 0;
  if (ot_bpe_save(t, vj, mt) != OT_OK) { fprintf(stderr, "ot prepare: %s\n", ot_last_error()); rc = 1; }
  int V = ot_bpe_vocab_size(t), version = V <= 65536 ? 1 : 2;
  int64_t ntr = 0, nva = 0;
  int str = 0, sva = 0;
  double enc_s = 0;
  if (!rc) remove_old_shards(out);
  if (!rc) rc = write_split(t, text, split, out, "train", shard_tokens, version, &ntr, &str, &enc_s);
  if (!rc && split < len) rc = write_split(t, text + split, len - split, out, "val", shard_tokens, version, &nva, &sva, &enc_s);
  if (!rc) {
    char ip[4200];
    snprintf(ip, sizeof ip, "%s/info.json", out);
    FILE *f = fopen(ip, "w");
    if (!f) { fprintf(stderr, "ot prepare: cannot write %s: %s\n", ip, strerror(errno)); rc = 1; }
    else {
      fprintf(f, "{\"corpus\": \"%s\", \"tokenizer\": \"%s\", \"vocab_size\": %d, \"eot\": %d, "
              "\"shard_version\": %d, \"train_bytes\": %zu, \"val_bytes\": %zu, \"train_tokens\": %lld, "
              "\"val_tokens\": %lld, \"train_shards\": %d, \"val_shards\": %d}\n",
              corpus, kind, V, ot_bpe_eot(t), version, split, len - split, (long long)ntr, (long long)nva, str, sva);
      fclose(f);
    }
  }
  if (!rc) {
    printf("corpus     %s: %.2f MB (train %.2f MB, held-out %.2f MB from byte %zu)\n", corpus, len / 1e6,
           split / 1e6, (len - split) / 1e6, split);
    printf("tokenizer  %s: %d tokens, %d merges, <|endoftext|> = %d (%s %.2f s)\n", kind, V, ot_bpe_merges(t),
           ot_bpe_eot(t), strcmp(kind, "bpe") ? "loaded in" : "trained in", tok_s);
    printf("tokens     train %lld in %d shard(s), val %lld in %d shard(s); %.2f bytes/token; encode %.1f MB/s\n",
           (long long)ntr, str, (long long)nva, sva, (double)len / (double)(ntr + nva), len / 1e6 / enc_s);
    printf("wrote      %s/{vocab.json,merges.txt,info.json,train_*.bin,val_*.bin} (uint%d tokens)\n", out,
           version == 1 ? 16 : 32);
  }
  ot_bpe_free(t);
  free(text);
  return rc;
}

// ------------------------------------------------------------- tokenize ----
static void tokenize_usage(FILE *f) {
  fprintf(f,
          "usage: ot tokenize [--tokenizer DIR|gpt2] [--text STR | --file PATH] [--tokens] [--no-special]\n"
          "       ot tokenize [--tokenizer DIR|gpt2] --decode [--text \"ID ID ...\" | --file PATH]\n"
          "Prints the ids of the text (stdin when neither --text nor --file), or with --tokens one\n"
          "line per token: id, then its bytes (C-escaped). --decode turns ids back into text.\n"
          "  --tokenizer DIR   directory with vocab.json + merges.txt (default gpt2 = data/gpt2)\n"
          "  --no-special      treat <|endoftext|> in the text as plain text\n");
}

static void put_escaped(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') fputs("\\n", stdout);
    else if (c == '\t') fputs("\\t", stdout);
    else if (c == '\\') fputs("\\\\", stdout);
    else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
    else putchar(c);
  }
}

int ot_cmd_tokenize(int argc, char **argv) {
  const char *dir = "gpt2", *text = NULL, *file = NULL;
  bool tokens = false, special = true, decode = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { tokenize_usage(stdout); return 0; }
    else if (!strcmp(a, "--tokens")) tokens = true;
    else if (!strcmp(a, "--no-special")) special = false;
    else if (!strcmp(a, "--decode")) decode = true;
    else if (!strcmp(a, "--tokenizer") && v) { dir = v; i++; }
    else if (!strcmp(a, "--text") && v) { text = v; i++; }
    else if (!strcmp(a, "--file") && v) { file = v; i++; }
    else { fprintf(stderr, "ot tokenize: unknown option or missing value: '%s'\n\n", a); tokenize_usage(stderr); return 2; }
  }
  ot_bpe *t = load_tokenizer(dir);
  if (!t) return 1;
  size_t len = 0;
  char *buf = text ? strdup(text) : read_all(file ? file : "-", &len);
  if (text) len = strlen(text);
  if (!buf) { ot_bpe_free(t); return 1; }
  int rc = 0;
  if (decode) {
    int32_t *ids = malloc((len / 2 + 1) * sizeof *ids);
    size_t n = 0;
    char *p = buf, *end;
    for (;;) {
      while (*p == ' ' || *p == '\n' || *p == '\t' || *p == ',' || *p == '\r') p++;
      if (!*p) break;
      long v = strtol(p, &end, 10);
      if (end == p) { fprintf(stderr, "ot tokenize: '%.20s' is not an id\n", p); rc = 2; break; }
      ids[n++] = (int32_t)v;
      p = end;
    }
    size_t cap = 0, ol = 0;
    for (size_t i = 0; i < n; i++) { size_t k; ot_bpe_token(t, ids[i], &k); cap += k; }
    char *o = malloc(cap + 1);
    if (!rc && ot_bpe_decode(t, ids, n, o, cap + 1, &ol) != OT_OK) { fprintf(stderr, "ot tokenize: %s\n", ot_last_error()); rc = 1; }
    if (!rc) fwrite(o, 1, ol, stdout);
    free(o);
    free(ids);
  } else {
    int32_t *ids = malloc((len + 1) * sizeof *ids);
    size_t n = 0;
    if (ot_bpe_encode(t, buf, len, special, ids, len + 1, &n) != OT_OK) {
      fprintf(stderr, "ot tokenize: %s\n", ot_last_error());
      rc = 1;
    }
    for (size_t i = 0; !rc && i < n; i++) {
      if (tokens) {
        size_t k;
        const char *s = ot_bpe_token(t, ids[i], &k);
        printf("%d\t", ids[i]);
        put_escaped(s, k);
        putchar('\n');
      } else {
        printf(i ? " %d" : "%d", ids[i]);
      }
    }
    if (!rc && !tokens) putchar('\n');
    if (!rc) fprintf(stderr, "%zu bytes -> %zu tokens\n", len, n);
    free(ids);
  }
  free(buf);
  ot_bpe_free(t);
  return rc;
}
