// `ot translate`: translates lines with an encoder-decoder model (a Hugging
// Face MarianMTModel directory or an `ot train` checkpoint) through the
// library's translator (ot_translator_*, beam search). Stream mode (--batch 1,
// or an interactive standard input) translates and flushes each line as it
// arrives; batch mode reads up to --batch lines, sorts them by length,
// translates them together and writes them in input order.
#include "translate.h"
#include <sys/stat.h>
#include <unistd.h>

static const cli_flag k_flags[] = {
    CLI_S("--model", tr_opts, model, "DIR", "a Hugging Face Marian directory (config.json + "
          "model.safetensors),\nan `ot train` checkpoint / run directory, or a file of `ot "
          "quantize`"),
    CLI_S("--tokenizer", tr_opts, tok_dir, "DIR", "vocab.json + merges.txt (GPT-2 format; "
          "default: the model directory)"),
    CLI_I("--beam", tr_opts, beam, 1, 256, "N", "beams (default 4; 1 = greedy)"),
    CLI_F("--length-penalty", tr_opts, length_penalty, -100, 100, "A",
          "hypothesis score = log p / length^A (default 1.0)"),
    CLI_B("--early-stopping", tr_opts, early_stopping, "stop a sentence once it has N finished "
          "hypotheses (HF early_stopping=True)"),
    CLI_F("--max-len-a", tr_opts, max_len_a, 0, 1000, "A", "length limit A * source length + B "
          "(default 1.2)"),
    CLI_F("--max-len-b", tr_opts, max_len_b, 0, 1e6, "B", "(default 10); both 0: --max-length only"),
    CLI_I("--max-length", tr_opts, max_length, 0, 1 << 20, "N",
          "length limit with the start token (HF max_length; default:\nthe model's max_seq)"),
    CLI_I("--min-length", tr_opts, min_length, 0, 1 << 20, "N", "HF min_length (default: the "
          "model's generation config, else 0)"),
    CLI_I("--batch", tr_opts, batch, 1, 1024, "N", "sentences translated together (default 16)"),
    CLI_WEIGHTS("--dtype", tr_opts, dtype, 0, "f32, bf16 (bf16 weights and activations) or "
                "int8\n(int8 weights, f32 activations) (default f32)"),
    CLI_I("--group", tr_opts, group, 0, 4096, "G", "int8: input columns per scale, 32, 64 or 128 "
          "(default 0: per channel)"),
    CLI_S("--input", tr_opts, input, "FILE", "source lines (default `-`: standard input)"),
    CLI_S("--output", tr_opts, output, "FILE", "translations, one line per input line (default: "
          "standard output)"),
    CLI_B("--ids", tr_opts, ids, "input and output are token ids separated by spaces (no "
          "tokenizer; the\ninput is the whole encoder input, eos included; the output stops "
          "before eos)"),
    {"--long", CLI_ENUM, offsetof(tr_opts, long_mode), 0, NULL, 0, 0, "skip|refuse",
     {TR_LONG_SKIP, TR_LONG_REFUSE}, "a source over the model's max_seq tokens: an empty line "
     "and a warning\n(skip, default) or an error (refuse)"},
    CLI_B("--no-generation-config", tr_opts, no_gen_config, "ignore the model directory's "
          "generation settings (bad_words_ids,\nforced_eos_token_id, ...)"),
    CLI_I("--threads", tr_opts, threads, 1, 4096, "N", "threads (default: OMP_NUM_THREADS)"),
    CLI_S("--profile", tr_opts, profile, "FILE", "profile the translation: a Chrome trace to FILE "
          "and the per-span\nsummary on standard error"),
    CLI_B("--quiet", tr_opts, quiet, "no summary on standard error"),
};

const cli_command cli_translate_command = {
    "translate", "--model DIR [--tokenizer DIR] [--beam 4] [--batch 16] [--dtype f32|bf16|int8] "
    "[--input FILE|-] [--output FILE] [--ids]",
    "translate lines with an encoder-decoder model (greedy or beam search)",
    NULL, k_flags, sizeof k_flags / sizeof k_flags[0], NULL, NULL, false};

typedef struct {
  tr_opts o;
  ot_translator *t;
  const ot_model_config *mc;
  ot_bpe *bpe;
  ot_beam_config bc;
  FILE *out;
  int max_src, cap;
  // one chunk
  int32_t *src, *slen, *toks;
  int *olen, *order;
  long long lines, skipped, tokens;
  double busy_s;
  char ckpt[OT_PATH_MAX + 64], data[OT_PATH_MAX];   // a checkpoint's directory and data directory
} tr_run;

static int load_model(tr_run *r, ot_model **m, ot_qmodel **q) {
  const tr_opts *o = &r->o;
  ot_run_config run = {1, 1, o->dtype == OT_BF16 ? OT_BF16 : OT_F32, OT_RECOMPUTE_NONE, -100, 1};
  char cfg[OT_PATH_MAX + 32];
  snprintf(cfg, sizeof cfg, "%s/config.json", o->model);
  FILE *f = fopen(cfg, "r");
  ot_status s;
  struct stat st;
  if (!f && stat(o->model, &st) == 0 && S_ISREG(st.st_mode)) {   // a file of `ot quantize`
    if (o->dtype == OT_BF16 || o->group) {
      fprintf(stderr, "ot translate: %s holds quantized weights already: leave out %s\n", o->model,
              o->group ? "--group" : "--dtype bf16");
      return 2;
    }
    s = ot_quant_file_load(q, o->model);
    if (s == OT_OK && (*q)->config.arch != OT_ARCH_ENCDEC)
      s = ot_error(OT_EINVAL, "%s: '%s' is a decoder-only model (translate needs an "
                   "encoder-decoder; use `ot generate --quantized`)", o->model, (*q)->config.name);
    if (s == OT_OK) cli_dir_of(o->model, r->ckpt, sizeof r->ckpt);   // the tokenizer files next to it
  } else if (f) {
    fclose(f);
    s = ot_model_load_hf(m, o->model, &run);
  } else {
    s = cli_load_checkpoint(o->model, &run, m, r->ckpt, r->data);
  }
  if (s == OT_OK && *m && ot_model_config_of(*m)->arch != OT_ARCH_ENCDEC)
    s = ot_error(OT_EINVAL, "%s: '%s' is a decoder-only model (translate needs an "
                 "encoder-decoder; use `ot generate`)", o->model, ot_model_config_of(*m)->name);
  if (s == OT_OK && *m && o->dtype == OT_I8) s = ot_qmodel_from_model(q, *m, OT_QW_INT8, o->group);
  if (s != OT_OK) {
    fprintf(stderr, "ot translate: %s\n", ot_last_error());
    return 1;
  }
  return 0;
}

// Translates lines [0, n) of the chunk (their ids in r->src rows) and writes them in order.
static int run_chunk(tr_run *r, int n, const bool *skip) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!skip[i]) r->order[k++] = i;
  for (int a = 1; a < k; a++)   // by length, longest first (stable)
    for (int b = a; b > 0 && r->slen[r->order[b]] > r->slen[r->order[b - 1]]; b--) {
      const int x = r->order[b]; r->order[b] = r->order[b - 1]; r->order[b - 1] = x;
    }
  int32_t *src = r->src + (size_t)r->o.batch * r->max_src, *len = r->slen + r->o.batch;
  for (int i = 0; i < k; i++) {
    memcpy(src + (size_t)i * r->max_src, r->src + (size_t)r->order[i] * r->max_src,
           sizeof(int32_t) * r->slen[r->order[i]]);
    len[i] = r->slen[r->order[i]];
  }
  const double t0 = ot_now();
  if (k > 0 && ot_translate_ids(r->t, k, src, r->max_src, len, &r->bc, r->toks, r->cap, r->olen,
                                NULL, NULL) != OT_OK) {
    fprintf(stderr, "ot translate: %s\n", ot_last_error());
    return 1;
  }
  r->busy_s += ot_now() - t0;
  int *where = r->olen + r->o.batch;
  for (int i = 0; i < n; i++) where[i] = -1;
  for (int i = 0; i < k; i++) where[r->order[i]] = i;
  for (int i = 0; i < n; i++) {
    if (where[i] < 0) { fputc('\n', r->out); continue; }
    const int j = where[i];
    tr_write(r->out, r->bpe, r->o.ids, r->toks + (size_t)j * r->cap, r->olen[j], r->mc->eos_id);
    r->tokens += r->olen[j];
  }
  fflush(r->out);
  return 0;
}

static int translate_stream(tr_run *r, FILE *in, bool stream) {
  const int B = stream ? 1 : r->o.batch;
  bool *skip = calloc((size_t)B, sizeof *skip);
  char *line = NULL;
  size_t lcap = 0;
  ssize_t got;
  int n = 0, rc = 0;
  while (rc == 0 && skip && (got = getline(&line, &lcap, in)) >= 0) {
    size_t len = (size_t)got;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    r->lines++;
    int k = 0;
    ot_status s = tr_line_ids(r->bpe, r->o.ids, line, len, r->mc->vocab, r->mc->eos_id,
                              r->src + (size_t)n * r->max_src, r->max_src, &k);
    if (s != OT_OK) {
      fprintf(stderr, "ot translate: input line %lld: %s\n", r->lines, ot_last_error());
      rc = 1;
      break;
    }
    skip[n] = k > r->max_src;
    if (skip[n] && r->o.long_mode == TR_LONG_REFUSE) {
      fprintf(stderr, "ot translate: input line %lld has %d source tokens, more than the "
              "model's %d (split it, or --long skip)\n", r->lines, k, r->max_src);
      rc = 1;
      break;
    }
    if (skip[n]) {
      fprintf(stderr, "ot translate: warning: input line %lld has %d source tokens, more than "
              "the model's %d: skipped (empty output line)\n", r->lines, k, r->max_src);
      r->skipped++;
    }
    r->slen[n] = k;
    if (++n == B) {
      rc = run_chunk(r, n, skip);
      n = 0;
    }
  }
  if (rc == 0 && n > 0) rc = run_chunk(r, n, skip);
  free(line);
  free(skip);
  return rc;
}

int ot_cmd_translate(int argc, char **argv) {
  tr_run r = {0};
  r.o = (tr_opts){.beam = 4, .batch = 16, .dtype = OT_F32, .length_penalty = 1.0f,
                  .max_len_a = 1.2f, .max_len_b = 10.0f, .long_mode = TR_LONG_SKIP};
  const int pr = cli_parse(&cli_translate_command, argc, argv, &r.o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  tr_opts *o = &r.o;
  if (!o->model) return cli_usage_error(&cli_translate_command, "--model DIR is required");
  if (o->group && o->dtype != OT_I8)
    return cli_usage_error(&cli_translate_command, "--group applies to --dtype int8 only");
  if (o->threads > 0) ot_threads_set(o->threads);
  ot_model *m = NULL;
  ot_qmodel *q = NULL;
  int rc = load_model(&r, &m, &q);
  FILE *in = NULL;
  static int32_t bad_len[64], bad_ids[1024];
  if (rc == 0) {
    r.mc = m ? ot_model_config_of(m) : &q->config;
    r.max_src = r.mc->max_seq;
    r.bc = ot_beam_config_default();
    r.bc.vocab = r.mc->vocab;
    r.bc.num_beams = o->beam;
    r.bc.length_penalty = o->length_penalty;
    r.bc.early_stopping = o->early_stopping ? OT_EARLY_STOP_TRUE : OT_EARLY_STOP_FALSE;
    r.bc.max_length = o->max_length ? o->max_length : r.mc->max_seq;
    r.bc.max_len_a = o->max_len_a;
    r.bc.max_len_b = o->max_len_b;
    r.bc.eos_id = r.mc->eos_id;
    r.bc.pad_id = r.mc->pad_id;
    r.bc.decoder_start_id = r.mc->decoder_start_id;
    if (r.bc.max_length > r.mc->max_seq) {
      fprintf(stderr, "ot translate: --max-length %d exceeds the model's max_seq %d\n",
              r.bc.max_length, r.mc->max_seq);
      rc = 2;
    }
    if (rc == 0 && !o->no_gen_config &&
        tr_read_gen_config(m ? o->model : r.ckpt, &r.bc, bad_len, bad_ids, 64) != OT_OK) {
      fprintf(stderr, "ot translate: %s\n", ot_last_error());
      rc = 1;
    }
    if (o->min_length) r.bc.min_length = o->min_length;
  }
  if (rc == 0 && !o->ids) {   // --tokenizer, else the model's directory, else the checkpoint's data
    const char *d = o->tok_dir ? o->tok_dir : r.ckpt[0] ? r.ckpt : o->model;
    if (!o->tok_dir && r.data[0] && !cli_file_exists(d, "vocab.json")) d = r.data;
    char vj[OT_PATH_MAX + 128], mt[OT_PATH_MAX + 128];
    snprintf(vj, sizeof vj, "%s/vocab.json", d);
    snprintf(mt, sizeof mt, "%s/merges.txt", d);
    if (ot_bpe_load(&r.bpe, vj, mt) != OT_OK) {
      fprintf(stderr, "ot translate: tokenizer: %s (give --tokenizer DIR with vocab.json + "
              "merges.txt, or --ids)\n", ot_last_error());
      rc = 1;
    }
  }
  ot_translator_config tc = {o->batch, o->beam, r.max_src, r.mc ? r.mc->max_seq : 0};
  if (rc == 0) {
    ot_status s = q ? ot_translator_create_q(&r.t, q, &tc) : ot_translator_create(&r.t, m, &tc);
    if (s != OT_OK) { fprintf(stderr, "ot translate: %s\n", ot_last_error()); rc = 1; }
  }
  if (rc == 0) {
    r.cap = r.mc->max_seq;
    r.src = calloc((size_t)2 * o->batch * (r.max_src + 1), sizeof(int32_t));
    r.slen = calloc((size_t)2 * o->batch, sizeof(int32_t));
    r.toks = calloc((size_t)o->batch * r.cap, sizeof(int32_t));
    r.olen = calloc((size_t)2 * o->batch, sizeof(int));
    r.order = calloc((size_t)o->batch, sizeof(int));
    in = !o->input || !strcmp(o->input, "-") ? stdin : fopen(o->input, "rb");
    r.out = o->output ? fopen(o->output, "w") : stdout;
    if (!r.src || !r.slen || !r.toks || !r.olen || !r.order) {
      fprintf(stderr, "ot translate: out of memory\n");
      rc = 1;
    } else if (!in || !r.out) {
      fprintf(stderr, "ot translate: cannot open %s '%s'\n", in ? "--output" : "--input",
              in ? o->output : o->input);
      rc = 1;
    }
  }
  if (rc == 0) {
    const double t0 = ot_now();
    const bool stream = o->batch == 1 || (in == stdin && isatty(fileno(stdin)));
    if (o->profile) { ot_prof_enable(true); ot_prof_reset(); }
    rc = translate_stream(&r, in, stream);
    if (o->profile) {
      ot_prof_enable(false);
      if (ot_prof_write_trace(o->profile) != OT_OK)
        fprintf(stderr, "ot translate: --profile: %s\n", ot_last_error());
      ot_prof_summary(stderr);
    }
    if (!o->quiet)
      fprintf(stderr, "ot translate: %lld lines (%lld skipped), %lld tokens out, %.2f s "
              "(%.1f sentences/s translating), beam %d, %s\n", r.lines, r.skipped, r.tokens,
              ot_now() - t0, r.busy_s > 0 ? (double)(r.lines - r.skipped) / r.busy_s : 0.0,
              o->beam, q ? ot_qw_kind_name(q->kind) : o->dtype == OT_BF16 ? "bf16" : "f32");
  }
  if (in && in != stdin) fclose(in);
  if (r.out && r.out != stdout) fclose(r.out);
  free(r.src); free(r.slen); free(r.toks); free(r.olen); free(r.order);
  ot_translator_free(r.t);
  ot_bpe_free(r.bpe);
  ot_qmodel_free(q);
  ot_model_free(m);
  return rc;
}
