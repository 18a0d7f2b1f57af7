// `ot export`: writes an encoder-decoder checkpoint of `ot train --task translate`
// (a step directory, its run directory, or an `ot average` output) as a Hugging
// Face MarianMTModel directory: config.json, generation_config.json and
// model.safetensors (ot_model_save_hf), plus the checkpoint's tokenizer
// (vocab.json, merges.txt, and a tokenizer_config.json naming GPT2Tokenizer).
// The directory is written beside its final name and renamed into place.
#include "cli.h"
#include "io/files.h"
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  const char *model, *out, *tok_dir, *check;
  bool force;
} export_opts;

static const cli_flag k_flags[] = {
    CLI_S("--model", export_opts, model, "DIR",
          "a checkpoint of `ot train --task translate` (step_NNNNNN/, or its run\n"
          "directory: the latest checkpoint), or an `ot average` output"),
    CLI_S("--out", export_opts, out, "DIR", "the MarianMTModel directory to write (must not exist)"),
    CLI_S("--tokenizer", export_opts, tok_dir, "DIR",
          "vocab.json + merges.txt to include (default: the checkpoint's own,\n"
          "else its training data directory's)"),
    CLI_B("--force", export_opts, force, "replace --out if it exists (only a directory holding "
          "the files of\nan export is replaced)"),
    CLI_S("--check-logits", export_opts, check, "FILE",
          "also write a fixed sample batch and the checkpoint's logits for it to\n"
          "FILE (safetensors: src_ids, src_mask, decoder_input_ids, logits), for\n"
          "tools/check_hf_export.py to compare with transformers"),
};

const cli_command cli_export_command = {
    "export", "--model CHECKPOINT --out DIR [--tokenizer DIR] [--force]",
    "write a translation checkpoint as a Hugging Face MarianMTModel directory",
    "Writes config.json, generation_config.json and model.safetensors (F32) that\n"
    "transformers' MarianMTModel.from_pretrained, `ot translate --model DIR` and `ot serve\n"
    "--model DIR` load, and the checkpoint's tokenizer (vocab.json, merges.txt, with a\n"
    "tokenizer_config.json for transformers' GPT2Tokenizer; a source sentence is its BPE\n"
    "ids followed by eos). The directory decodes as the checkpoint does: no decoding\n"
    "setting is added (forced_eos_token_id is null).\n",
    k_flags, sizeof k_flags / sizeof k_flags[0],
    "example: ot export --model out/translate --out out/translate-hf\n"
    "         ot translate --model out/translate-hf < src.en\n",
    NULL, false};

// The files an export writes: --force replaces a directory holding only these.
static const char *const k_files[] = {"config.json", "generation_config.json", "model.safetensors",
                                      "vocab.json", "merges.txt", "tokenizer_config.json"};
enum { NFILES = sizeof k_files / sizeof k_files[0] };

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ot export: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

// dir holds only files an export writes (no subdirectory, nothing else): NULL,
// else the name of the first other entry (static storage).
static const char *foreign_entry(const char *dir) {
  static char name[256];
  DIR *d = opendir(dir);
  if (!d) return "(unreadable)";
  const char *bad = NULL;
  for (struct dirent *e; !bad && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    bool ok = false;
    for (int i = 0; i < NFILES && !ok; i++) ok = !strcmp(e->d_name, k_files[i]);
    if (!ok) snprintf(name, sizeof name, "%s", e->d_name), bad = name;
  }
  closedir(d);
  return bad;
}

// a is b or a directory above it (both absolute, no trailing '/').
static bool same_or_above(const char *a, const char *b) {
  const size_t n = strlen(a);
  return !strncmp(a, b, n) && (b[n] == 0 || b[n] == '/' || (n == 1 && a[0] == '/'));
}

static ot_status copy_file(const char *from_dir, const char *to_dir, const char *name) {
  char src[OT_PATH_MAX + 64], dst[OT_PATH_MAX + 64];
  OT_TRY(ot__join(src, sizeof src, from_dir, name));
  OT_TRY(ot__join(dst, sizeof dst, to_dir, name));
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(src, (size_t)1 << 30, &text, &len));
  ot_status s = ot__write_file(dst, text, len);
  free(text);
  return s;
}

// tokenizer_config.json for transformers (GPT2Tokenizer over vocab.json + merges.txt);
// the special tokens are the model's eos / pad ids as strings of the vocabulary.
static ot_status write_tok_config(const ot_bpe *bpe, const ot_model_config *c, const char *dir) {
  size_t ne = 0, np = 0;
  const char *eos = ot_bpe_token(bpe, c->eos_id, &ne), *pad = ot_bpe_token(bpe, c->pad_id, &np);
  if (!eos || !pad) return OT_OK;   // ids outside the tokenizer: nothing to name
  for (size_t i = 0; i < ne; i++)
    if (eos[i] < 0x20 || eos[i] == '"' || eos[i] == '\\') return OT_OK;
  for (size_t i = 0; i < np; i++)
    if (pad[i] < 0x20 || pad[i] == '"' || pad[i] == '\\') return OT_OK;
  char text[1024], path[OT_PATH_MAX + 64];
  const int n = snprintf(text, sizeof text,
                         "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"model_max_length\": %d,\n"
                         "  \"add_prefix_space\": false,\n  \"eos_token\": \"%.*s\",\n"
                         "  \"unk_token\": \"%.*s\",\n  \"pad_token\": \"%.*s\"\n}\n",
                         c->max_seq, (int)ne, eos, (int)ne, eos, (int)np, pad);
  if (n < 0 || (size_t)n >= sizeof text) return OT_OK;
  OT_TRY(ot__join(path, sizeof path, dir, "tokenizer_config.json"));
  return ot__write_file(path, text, (size_t)n);
}

// --check-logits: a fixed batch (2 rows, sources of S = 8 and 5 tokens ending in
// eos, padded with pad; decoder inputs of T = 6 tokens from decoder_start) and its logits.
static ot_status write_check(ot_model *m, const char *path) {
  const ot_model_config *c = ot_model_config_of(m);
  const ot_run_config *r = ot_model_run_of(m);
  enum { B = 2 };
  const int S = r->S, T = r->T - 2, V = c->vocab;   // run: B 2, T 8, S 8
  int32_t src[B * 8], len[B] = {S, S - 3}, mask[B * 8], tgt[B * 6];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < B * S; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int b = i / S, t = i % S;
    src[i] = t < len[b] - 1 ? (int32_t)((x >> 33) % (uint64_t)V) : t == len[b] - 1 ? c->eos_id : c->pad_id;
    mask[i] = t < len[b];
  }
  for (int i = 0; i < B * T; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tgt[i] = i % T == 0 ? c->decoder_start_id : (int32_t)((x >> 33) % (uint64_t)V);
  }
  ot_s2s_batch b = {B, S, T, src, len, tgt, NULL};
  OT_TRY(ot_model_forward_s2s(m, &b, 0.0f, false, NULL));
  int ld = 0;
  const float *L = ot_model_logits(m, &ld);
  float *lg = malloc(sizeof(float) * B * T * (size_t)V);
  if (!lg) return ot_error(OT_ENOMEM, "out of memory");
  for (int i = 0; i < B * T; i++) memcpy(lg + (size_t)i * V, L + (size_t)i * ld, sizeof(float) * V);
  ot_st_tensor t[4] = {
      {"src_ids", OT_I32, 2, {B, S}, src, sizeof(int32_t) * B * S},
      {"src_mask", OT_I32, 2, {B, S}, mask, sizeof(int32_t) * B * S},
      {"decoder_input_ids", OT_I32, 2, {B, T}, tgt, sizeof(int32_t) * B * T},
      {"logits", OT_F32, 3, {B, T, V}, lg, sizeof(float) * B * T * (size_t)V}};
  ot_status s = ot_st_write(path, t, 4, NULL, NULL, 0);
  free(lg);
  return s;
}

// A decoder-only checkpoint: say what loads it instead.
static int refuse_decoder_only(const ot_model_config *c, const char *ckpt) {
  const char *arch = c->names == OT_NAMES_LLAMA ? "LlamaForCausalLM" : "GPT2LMHeadModel";
  if (cli_file_exists(ckpt, "config.json"))
    return fail("'%s' is a decoder-only model; `ot export` writes encoder-decoders (MarianMTModel). "
                "This checkpoint already loads in transformers as it is: %s holds config.json + "
                "model.safetensors (%s.from_pretrained(\"%s\"))", c->name, ckpt, arch, ckpt);
  return fail("'%s' is a decoder-only model; `ot export` writes encoder-decoders (MarianMTModel). "
              "Hugging Face has no architecture for its settings, so the checkpoint has no "
              "config.json; its weights carry HF names in %s/model.safetensors (ot quantize "
              "writes an int8 / bf16 file for ot)", c->name, ckpt);
}

int ot_cmd_export(int argc, char **argv) {
  export_opts o = {0};
  const int pr = cli_parse(&cli_export_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (!o.model) return cli_usage_error(&cli_export_command, "--model DIR is required");
  if (!o.out) return cli_usage_error(&cli_export_command, "--out DIR is required");
  if (!ot__is_dir(o.model))
    return fail("--model %s: no such directory (give a checkpoint of `ot train --task translate`, "
                "its run directory or an `ot average` output)", o.model);
  // the output: <parent>/<name>, written as <parent>/.<name>.export.tmp
  char out[OT_PATH_MAX], parent[OT_PATH_MAX], tmp[OT_PATH_MAX + 300], old[OT_PATH_MAX + 300];
  if (ot__abs_path(o.out, out, sizeof out) != OT_OK) return fail("%s", ot_last_error());
  size_t len = strlen(out);
  while (len > 1 && out[len - 1] == '/') out[--len] = 0;
  const char *slash = strrchr(out, '/');
  const char *name = slash + 1;
  if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > 200)
    return fail("--out %s: name a new directory, such as out/translate-hf", o.out);
  snprintf(parent, sizeof parent, "%.*s", slash == out ? 1 : (int)(slash - out), out);
  if (snprintf(tmp, sizeof tmp, "%.1023s/.%.200s.export.tmp", parent, name) >= (int)sizeof tmp ||
      snprintf(old, sizeof old, "%.1023s/.%.200s.export.old", parent, name) >= (int)sizeof old)
    return fail("--out %s: the path is too long", o.out);
  const bool replace = ot__exists(out);
  if (replace && !o.force)
    return fail("--out %s already exists: remove it, name a new directory, or add --force to "
                "replace it", o.out);

  // (T = 2: a vision transformer's CLS token and one patch)
  ot_run_config run = {1, 2, OT_F32, OT_RECOMPUTE_NONE, -100, 0};   // S = T for enc-dec
  if (o.check) run = (ot_run_config){2, 8, OT_F32, OT_RECOMPUTE_NONE, -100, 0};   // S = T for enc-dec
  char ckpt[OT_PATH_MAX + 64], data[OT_PATH_MAX], model_abs[OT_PATH_MAX], ckpt_abs[OT_PATH_MAX];
  ot_model *m = NULL;
  if (cli_load_checkpoint(o.model, &run, &m, ckpt, data) != OT_OK)
    return fail("%s: %s", o.model, ot_last_error());
  const ot_model_config *c = ot_model_config_of(m);
  int rc = 0;
  if (c->arch == OT_ARCH_VIT)
    rc = c->pool == OT_POOL_MEAN
             ? fail("'%s' pools the mean of its patch tokens (--pool mean): Hugging Face's "
                    "ViTForImageClassification classifies the CLS token only, so it cannot be exported "
                    "(ot classify --model %s reads it)", c->name, ckpt)
             : fail("'%s' is a vision transformer: its checkpoint %s already is a Hugging Face "
                    "ViTForImageClassification directory (config.json + model.safetensors; "
                    "from_pretrained(\"%s\"))", c->name, ckpt, ckpt);
  else if (c->arch != OT_ARCH_ENCDEC) rc = refuse_decoder_only(c, ckpt);
  if (rc == 0 && (ot__abs_path(o.model, model_abs, sizeof model_abs) != OT_OK ||
                  ot__abs_path(ckpt, ckpt_abs, sizeof ckpt_abs) != OT_OK))
    rc = fail("%s", ot_last_error());
  if (rc == 0 && (same_or_above(out, model_abs) || same_or_above(out, ckpt_abs)))
    rc = fail("--out %s is the checkpoint's directory or above it: name a new directory", o.out);
  if (rc == 0 && replace) {
    const char *bad = ot__is_dir(out) ? foreign_entry(out) : "(not a directory)";
    if (bad)
      rc = fail("--out %s holds '%s', which an export does not write: --force replaces only a "
                "directory of exported files; remove it yourself or name a new directory", o.out, bad);
  }
  // the tokenizer: --tokenizer, else the checkpoint's, else its training data directory's
  const char *tok = o.tok_dir;
  if (!tok && cli_file_exists(ckpt, "vocab.json") && cli_file_exists(ckpt, "merges.txt")) tok = ckpt;
  if (!tok && data[0] && cli_file_exists(data, "vocab.json") && cli_file_exists(data, "merges.txt"))
    tok = data;
  ot_bpe *bpe = NULL;
  if (rc == 0 && tok) {
    char vj[OT_PATH_MAX + 128], mt[OT_PATH_MAX + 128];
    snprintf(vj, sizeof vj, "%s/vocab.json", tok);
    snprintf(mt, sizeof mt, "%s/merges.txt", tok);
    if (ot_bpe_load(&bpe, vj, mt) != OT_OK)
      rc = fail("tokenizer %s: %s", tok, ot_last_error());
    else if (ot_bpe_vocab_size(bpe) > c->vocab)
      rc = fail("tokenizer %s has %d tokens, more than the model's vocabulary of %d: it is not this "
                "model's tokenizer (give --tokenizer DIR)", tok, ot_bpe_vocab_size(bpe), c->vocab);
  }
  ot_status s = OT_OK;
  if (rc == 0) {
    if (ot__exists(tmp)) ot__remove_flat_dir(tmp);   // left by an interrupted export
    if (mkdir(tmp, 0755) != 0)
      rc = fail("cannot create %s: %s", tmp, strerror(errno));
  }
  if (rc == 0) {
    s = ot_model_save_hf(m, tmp);   // refuses what MarianMTModel cannot express
    if (s == OT_EUNSUPPORTED)
      rc = fail("%s: %s (ot translate and ot serve load the checkpoint itself)", ckpt, ot_last_error());
    if (s == OT_OK && bpe) s = copy_file(tok, tmp, "vocab.json");
    if (s == OT_OK && bpe) s = copy_file(tok, tmp, "merges.txt");
    if (s == OT_OK && bpe) s = write_tok_config(bpe, c, tmp);
    if (s == OT_OK) s = ot__fsync_dir(tmp);
    if (s == OT_OK && replace && rename(out, old) != 0)
      s = ot_error(OT_EIO, "cannot move %s aside: %s", out, strerror(errno));
    if (s == OT_OK && rename(tmp, out) != 0) {
      s = ot_error(OT_EIO, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
      if (replace) rename(old, out);
    }
    if (s == OT_OK && replace) ot__remove_flat_dir(old);
    if (s == OT_OK) s = ot__fsync_dir(parent);
    if (s != OT_OK) {
      ot__remove_flat_dir(tmp);
      if (rc == 0) rc = fail("%s", ot_last_error());
    }
  }
  if (rc == 0 && o.check && write_check(m, o.check) != OT_OK)
    rc = fail("--check-logits %s: %s", o.check, ot_last_error());
  if (rc == 0) {
    printf("ot export: %s -> %s (MarianMTModel: %d + %d layers, d_model %d, vocab %d, %s)\n", ckpt,
           out, c->n_enc_layers, c->n_layers, c->d_model, c->vocab,
           bpe ? "tokenizer included" : "no tokenizer");
    printf("  files: config.json generation_config.json model.safetensors%s\n",
           bpe ? " vocab.json merges.txt tokenizer_config.json" : "");
    if (!bpe)
      fprintf(stderr, "ot export: note: no vocab.json + merges.txt in %s%s%s: give --tokenizer DIR "
              "to include them (`ot translate --tokenizer DIR`, or --ids, reads the directory "
              "without them)\n", ckpt, data[0] ? " or " : "", data);
    printf("  use: ot translate --model %s; transformers: MarianMTModel.from_pretrained(\"%s\")\n",
           out, out);
  }
  ot_bpe_free(bpe);
  ot_model_free(m);
  return rc;
}
