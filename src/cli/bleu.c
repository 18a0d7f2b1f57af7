// `ot bleu`: corpus BLEU of a hypothesis file against one or more reference
// files, as sacreBLEU 2.6.0 computes and prints it (the score line, then the
// signature). The library does the work (ot_bleu_* in ot/data.h).
#include "cli.h"

typedef struct {
  const char *hyp;
  cli_list refs;
  int tok, smooth;
  double smooth_value;
  bool lowercase;
} bleu_opts;

static const cli_flag k_flags[] = {
    CLI_S("--hyp", bleu_opts, hyp, "FILE", "hypotheses, one segment per line (`-`: standard input)"),
    {"--ref", CLI_LIST, offsetof(bleu_opts, refs), 0, "FILE", 0, 64, NULL, {0},
     "references, one line per hypothesis line; repeat for more references"},
    {"--tokenize", CLI_ENUM, offsetof(bleu_opts, tok), 0, NULL, 0, 0, "13a|none|intl",
     {OT_BLEU_TOK_13A, OT_BLEU_TOK_NONE, OT_BLEU_TOK_INTL},
     "tokenizer (default 13a, as sacreBLEU; intl: mteval-v14 international, Unicode punctuation "
     "and symbols)"},
    CLI_B("--lowercase", bleu_opts, lowercase, "case-insensitive BLEU (sacreBLEU -lc)"),
    {"--smooth", CLI_ENUM, offsetof(bleu_opts, smooth), 0, NULL, 0, 0, "exp|floor|add-k|none",
     {OT_BLEU_SMOOTH_EXP, OT_BLEU_SMOOTH_FLOOR, OT_BLEU_SMOOTH_ADD_K, OT_BLEU_SMOOTH_NONE},
     "smoothing (default exp)"},
    {"--smooth-value", CLI_DOUBLE, offsetof(bleu_opts, smooth_value), 0, "X", 1e-9, 1e9, NULL, {0},
     "value of floor (default 0.1) and add-k (default 1)"},
};

const cli_command cli_bleu_command = {
    "bleu", "--hyp FILE|- --ref FILE [--ref FILE2 ...] [--tokenize 13a|none|intl] [--lowercase] "
    "[--smooth exp|floor|add-k|none]",
    "corpus BLEU of a hypothesis file against reference files (sacreBLEU 2.6.0 numbers)",
    "Prints sacreBLEU's score line and signature, e.g.\n"
    "  BLEU = 38.12 70.1/45.3/31.2/22.0 (BP = 0.986 ratio = 0.986 hyp_len = 1234 ref_len = 1251)\n"
    "  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0\n"
    "Files are UTF-8 text split at '\\n'; every reference file needs as many lines as the\n"
    "hypotheses. Effective order is off (corpus BLEU).\n",
    k_flags, sizeof k_flags / sizeof k_flags[0], NULL, NULL, false};

int ot_cmd_bleu(int argc, char **argv) {
  bleu_opts o = {.tok = OT_BLEU_TOK_13A, .smooth = OT_BLEU_SMOOTH_EXP};
  const int pr = cli_parse(&cli_bleu_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (!o.hyp || o.refs.n == 0)
    return cli_usage_error(&cli_bleu_command, "--hyp and at least one --ref are required");
  ot_bleu_opts bo = {(ot_bleu_tok)o.tok, (ot_bleu_smooth)o.smooth, o.smooth_value, o.lowercase};
  ot_bleu *b = NULL;
  ot_status s = ot_bleu_create(&b, &bo);
  if (s == OT_OK) s = ot_bleu_add_files(b, o.hyp, o.refs.v, o.refs.n);
  if (s != OT_OK) {
    fprintf(stderr, "ot bleu: %s\n", ot_last_error());
    ot_bleu_free(b);
    return 1;
  }
  ot_bleu_score r;
  char line[512], sig[256];
  ot_bleu_result(b, &r);
  ot_bleu_format(&r, line, sizeof line);
  ot_bleu_signature(b, sig, sizeof sig);
  printf("%s\n%s\n", line, sig);
  ot_bleu_free(b);
  return 0;
}
