// `ot prepare`: corpus -> tokenizer files + llm.c-format train/val shards.
// `ot tokenize`: encode a text (or decode ids) with a tokenizer, for inspection.
#include "cli.h"
#include "io/files.h"
#include "prepare_translate.h"
#include <errno.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

// The whole of path ("-": stdin) in a malloc'd NUL-terminated buffer; NULL
// after a message naming the command and the file.
static char *read_all(const char *cmd, const char *path, size_t *len) {
  char *b = NULL;
  if (ot__read_text(strcmp(path, "-") ? path : "/dev/stdin", SIZE_MAX / 4, &b, len) != OT_OK) {
    fprintf(stderr, "ot %s: %s\n", cmd, ot_last_error());
    return NULL;
  }
  return b;
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

typedef struct {
  const char *corpus, *out, *kind;
  int vocab, shard_tokens;
  double valf;
  bool quiet;
  const char *task, *src, *tgt, *vsrc, *vtgt, *tsrc, *ttgt, *dump_ids;   // --task translate
  int max_len;
  bool refuse_long;
} prepare_opts;

static const cli_flag k_prepare_flags[] = {
    CLI_S("--corpus", prepare_opts, corpus, "FILE", "UTF-8 text (e.g. data/shakespeare.txt; - = stdin)"),
    CLI_S("--out", prepare_opts, out, "DIR", "output directory (created)"),
    CLI_I("--vocab-size", prepare_opts, vocab, 257, 1 << 24, "N",
          "tokens of the trained vocabulary, incl. <|endoftext|> (default 8192)"),
    CLI_S("--tokenizer", prepare_opts, kind, "KIND",
          "bpe (train, default), gpt2 (data/gpt2) or a directory with\n"
          "vocab.json + merges.txt"),
    {"--val-fraction", CLI_DOUBLE, offsetof(prepare_opts, valf), 0, "F", 0, 0.5, NULL, {0},
     "held-out share of the corpus in [0, 0.5] (default 0.05)"},
    CLI_I("--shard-tokens", prepare_opts, shard_tokens, 1, INT32_MAX, "N",
          "tokens per shard file (default 100000000)"),
    CLI_B("--quiet", prepare_opts, quiet, "no progress lines"),
    CLI_S("--task", prepare_opts, task, "TASK", "lm (default: --corpus) or translate (--src/--tgt)"),
    CLI_S("--src", prepare_opts, src, "FILE", "translate: source side of the training pairs (one per line)"),
    CLI_S("--tgt", prepare_opts, tgt, "FILE", "translate: target side, line i translating --src line i"),
    CLI_S("--valid-src", prepare_opts, vsrc, "FILE", "translate: validation pairs, source side"),
    CLI_S("--valid-tgt", prepare_opts, vtgt, "FILE", "translate: validation pairs, target side"),
    CLI_S("--test-src", prepare_opts, tsrc, "FILE", "translate: test pairs, source side"),
    CLI_S("--test-tgt", prepare_opts, ttgt, "FILE", "translate: test pairs, target side"),
    CLI_I("--max-len", prepare_opts, max_len, 1, 1 << 20, "N",
          "translate: most BPE tokens per side; longer pairs are skipped (default 256)"),
    CLI_B("--refuse-long", prepare_opts, refuse_long, "translate: fail on a line over --max-len instead"),
    CLI_S("--dump-ids", prepare_opts, dump_ids, "PREFIX",
          "translate: write PREFIX.<split>.tsv, one line per kept pair:\n"
          "source ids, a tab, target ids (no start/eos)"),
};

const cli_command cli_prepare_command = {
    "prepare", "--corpus FILE --out DIR [options]",
    "train a BPE tokenizer (or use GPT-2's) and write train/val token shards",
    "Trains (or loads) a byte-level BPE tokenizer and writes DIR/vocab.json, DIR/merges.txt,\n"
    "DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin (llm.c token shards: uint16 ids when the\n"
    "vocabulary fits, else uint32) and DIR/info.json. The last --val-fraction of the corpus\n"
    "(from a line start) is the held-out split; the tokenizer is trained on the rest. Each\n"
    "split starts with <|endoftext|>; literal <|endoftext|> in the corpus becomes that token.\n"
    "With --task translate: trains one joint BPE on --src and --tgt (its <|endoftext|> is eos,\n"
    "decoder start and pad), writes DIR/vocab.json, DIR/merges.txt, DIR/info.json, and prints\n"
    "pairs, skipped pairs and tokens per side of each split given (train, --valid-*, --test-*).\n",
    k_prepare_flags, sizeof k_prepare_flags / sizeof k_prepare_flags[0], NULL, NULL, false};

int ot_cmd_prepare(int argc, char **argv) {
  prepare_opts o = {.kind = "bpe", .vocab = 8192, .shard_tokens = 100000000, .valf = 0.05, .task = "lm",
                    .max_len = 256};
  const int pr = cli_parse(&cli_prepare_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (strcmp(o.task, "lm") && strcmp(o.task, "translate"))
    return cli_usage_error(&cli_prepare_command, "--task '%s' is not one of lm|translate", o.task);
  const bool tr = !strcmp(o.task, "translate");
  if (!tr && (o.src || o.tgt || o.vsrc || o.vtgt || o.tsrc || o.ttgt || o.dump_ids))
    return cli_usage_error(&cli_prepare_command, "--src/--tgt/--valid-*/--test-*/--dump-ids need --task translate");
  if (tr) {
    if (o.corpus) return cli_usage_error(&cli_prepare_command, "--task translate reads --src/--tgt, not --corpus");
    if (!o.src || !o.tgt || !o.out)
      return cli_usage_error(&cli_prepare_command, "--task translate needs --src, --tgt and --out");
    if (!o.vsrc != !o.vtgt) return cli_usage_error(&cli_prepare_command, "give both --valid-src and --valid-tgt");
    if (!o.tsrc != !o.ttgt) return cli_usage_error(&cli_prepare_command, "give both --test-src and --test-tgt");
    cli_translate_prep p = {{o.src, o.vsrc, o.tsrc}, {o.tgt, o.vtgt, o.ttgt}, o.out, o.kind, o.dump_ids, o.vocab,
                            o.max_len, o.refuse_long, o.quiet};
    return cli_prepare_translate(&p);
  }
  const char *corpus = o.corpus, *out = o.out, *kind = o.kind;
  const int vocab = o.vocab, shard_tokens = o.shard_tokens;
  const double valf = o.valf;
  const bool quiet = o.quiet;
  if (!corpus || !out) return cli_usage_error(&cli_prepare_command, "--corpus and --out are required");
  size_t len = 0;
  char *text = read_all("prepare", corpus, &len);
  if (ot__mkdirs(out) != OT_OK) {
    fprintf(stderr, "ot prepare: %s\n", ot_last_error());
    free(text);
    return 1;
  }
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
typedef struct {
  const char *dir, *text, *file;
  bool tokens, no_special, decode;
} tokenize_opts;

static const cli_flag k_tokenize_flags[] = {
    CLI_S("--tokenizer", tokenize_opts, dir, "DIR", "directory with vocab.json + merges.txt (default gpt2 = data/gpt2)"),
    CLI_S("--text", tokenize_opts, text, "STR", "the text (or with --decode the ids \"ID ID ...\")"),
    CLI_S("--file", tokenize_opts, file, "PATH", "read the text (or ids) from a file (default: stdin)"),
    CLI_B("--tokens", tokenize_opts, tokens, "one line per token: id, then its bytes (C-escaped)"),
    CLI_B("--decode", tokenize_opts, decode, "turn ids back into text"),
    CLI_B("--no-special", tokenize_opts, no_special, "treat <|endoftext|> in the text as plain text"),
};

const cli_command cli_tokenize_command = {
    "tokenize", "[--tokenizer DIR|gpt2] [--text STR | --file PATH] [--tokens | --decode] [--no-special]",
    "print the token ids of a text (or decode ids)",
    "Prints the ids of the text (stdin when neither --text nor --file), or with --tokens one\n"
    "line per token: id, then its bytes (C-escaped). --decode turns ids back into text.\n",
    k_tokenize_flags, sizeof k_tokenize_flags / sizeof k_tokenize_flags[0], NULL, NULL, false};

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
  tokenize_opts o = {.dir = "gpt2"};
  const int pr = cli_parse(&cli_tokenize_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  const char *dir = o.dir, *text = o.text, *file = o.file;
  const bool tokens = o.tokens, special = !o.no_special, decode = o.decode;
  ot_bpe *t = load_tokenizer(dir);
  if (!t) return 1;
  size_t len = 0;
  char *buf = text ? strdup(text) : read_all("tokenize", file ? file : "-", &len);
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
