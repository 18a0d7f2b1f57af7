// `ot`: the ops-transformer command line. Thin: parse, call the library.
#include "cli.h"
#include "internal.h"
#include <errno.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: ot <command> [options]\n"
          "\n"
          "commands:\n"
          "  info                 CPU features, active kernel ISA, threads, oneDNN version\n"
          "  bench ops [options]  measure FMA peak and STREAM bandwidth, then every operator\n"
          "                       (run `ot bench ops --help` for options)\n"
          "  prepare --corpus FILE --out DIR [--vocab-size N | --tokenizer gpt2]\n"
          "                       train a BPE tokenizer (or use GPT-2's) and write train/val token\n"
          "                       shards (run `ot prepare --help` for options)\n"
          "  tokenize [--text STR] [--tokenizer DIR|gpt2] [--tokens | --decode]\n"
          "                       print the token ids of a text (or decode ids)\n"
          "  train [options]      train a model (default: the small preset on the bundled corpus) with\n"
          "                       live progress, held-out eval, checkpoints, log and loss-curve SVG\n"
          "                       (run `ot train --help` for every key and its aliases)\n"
          "  eval DIR [options]   held-out loss of a checkpoint (ours or a Hugging Face directory)\n"
          "  generate (--model DIR | --checkpoint DIR) [--prompt TEXT] [--max-tokens N]\n"
          "                       [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
          "                       continue a prompt with KV-cache decoding, streaming tokens\n"
          "                       (run `ot generate --help` for options)\n"
          "  serve (--model DIR | --checkpoint DIR) [--port N] [--host ADDR]\n"
          "                       OpenAI-compatible HTTP server: POST /v1/completions (streaming too),\n"
          "                       GET /v1/models, GET /health (run `ot serve --help` for options)\n"
          "  quantize --model DIR --out FILE --dtype int8|bf16 [--group 0|32|64|128]\n"
          "                       write a model's matrices quantized to one safetensors file\n"
          "                       (run `ot quantize --help` for options)\n"
          "  help                 this text\n"
          "\n"
          "environment: OMP_NUM_THREADS (threads), OT_ISA=portable|avx2|avx512 or\n"
          "OT_FORCE_PORTABLE=1 (kernel path), DNNL_VERBOSE=1 (oneDNN's choices)\n");
}

bool cli_parse_int(const char *flag, const char *val, int lo, int hi, int *out) {
  if (!val) { fprintf(stderr, "ot: %s needs a value (an integer in [%d, %d])\n", flag, lo, hi); return false; }
  char *end;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (errno || *end || end == val || v < lo || v > hi) {
    fprintf(stderr, "ot: %s '%s' is not an integer in [%d, %d]\n", flag, val, lo, hi);
    return false;
  }
  *out = (int)v;
  return true;
}

bool cli_parse_float(const char *flag, const char *val, double lo, double hi, float *out) {
  char *end;
  errno = 0;
  const double v = val ? strtod(val, &end) : 0.0;
  if (!val || errno || *end || end == val || !(v >= lo && v <= hi)) {
    fprintf(stderr, "ot: %s '%s' is not a number in [%g, %g]\n", flag, val ? val : "", lo, hi);
    return false;
  }
  *out = (float)v;
  return true;
}

bool cli_parse_weights(const char *flag, const char *val, ot_dtype *out) {
  if (val && !strcmp(val, "f32")) *out = OT_F32;
  else if (val && !strcmp(val, "bf16")) *out = OT_BF16;
  else if (val && !strcmp(val, "int8")) *out = OT_I8;
  else {
    fprintf(stderr, "ot: %s '%s' is not f32, bf16 or int8\n", flag, val ? val : "");
    return false;
  }
  return true;
}

int ot_cmd_quantize(int argc, char **argv);   // quantize.c

typedef struct { const char *name; int (*run)(int argc, char **argv); } command;
static const command k_commands[] = {
    {"info", ot_cmd_info},         {"bench", ot_cmd_bench},       {"prepare", ot_cmd_prepare},
    {"tokenize", ot_cmd_tokenize}, {"train", ot_cmd_train},       {"eval", ot_cmd_eval},
    {"generate", ot_cmd_generate}, {"serve", ot_cmd_serve},       {"quantize", ot_cmd_quantize},
};
enum { NCOMMANDS = sizeof k_commands / sizeof k_commands[0] };

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(cmd, k_commands[i].name)) return k_commands[i].run(argc - 2, argv + 2);
  const char *near = NULL;
  int best = 3;   // at most two edits away
  for (int i = 0; i < NCOMMANDS; i++) {
    int d = ot__edit_distance(cmd, k_commands[i].name);
    if (d < best) { best = d; near = k_commands[i].name; }
  }
  if (near) fprintf(stderr, "ot: unknown command '%s' (did you mean '%s'?)\n\n", cmd, near);
  else fprintf(stderr, "ot: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
