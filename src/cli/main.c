// `ot`: the ops-transformer command line. Thin: parse, call the library.
#include "cli.h"
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

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
  if (!strcmp(cmd, "info")) return ot_cmd_info(argc - 2, argv + 2);
  if (!strcmp(cmd, "bench")) return ot_cmd_bench(argc - 2, argv + 2);
  if (!strcmp(cmd, "prepare")) return ot_cmd_prepare(argc - 2, argv + 2);
  if (!strcmp(cmd, "tokenize")) return ot_cmd_tokenize(argc - 2, argv + 2);
  if (!strcmp(cmd, "train")) return ot_cmd_train(argc - 2, argv + 2);
  if (!strcmp(cmd, "eval")) return ot_cmd_eval(argc - 2, argv + 2);
  if (!strcmp(cmd, "generate")) return ot_cmd_generate(argc - 2, argv + 2);
  if (!strcmp(cmd, "serve")) return ot_cmd_serve(argc - 2, argv + 2);
  if (!strcmp(cmd, "quantize")) return ot_cmd_quantize(argc - 2, argv + 2);
  fprintf(stderr, "ot: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
